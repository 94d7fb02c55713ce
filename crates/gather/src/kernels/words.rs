//! Kernels that only move elements run on unsigned words of the element's width.
//!
//! Thirteen element types are four widths, so a data-moving kernel (gather, take, index_select,
//! plain scatter, index_copy/fill, put, the copy of an input) is compiled at most four times, not
//! once per element type. Its public entry takes the element type, sees the operands as words
//! with [`view`]/[`view_mut`]/[`vec`], runs the word instance, and gives the result back as
//! elements with [`unvec`]. The bits of every element move unchanged (NaN payloads, `-0.0`).

use std::mem::{ManuallyDrop, align_of, size_of};

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

/// Plain data: the element and index types, each value one initialised word of its width (no
/// padding, no pointers), whose bits the data-moving kernels move as that [`Word`]. A supertrait
/// of [`Element`](crate::Element) and [`IndexElem`](crate::IndexElem) that no other crate can
/// name, so both are sealed.
pub trait Plain: Copy + Send + Sync + 'static {
    /// The unsigned integer of the same size and alignment.
    type Word: Word;
}

/// The types the data-moving kernels are compiled for, one per width.
///
/// Four- and eight-byte words are `f32`/`f64` on x86-64 and AArch64: the loops keep pointers,
/// index values and loaded elements in registers at once, and floats live in the vector
/// registers, leaving the general ones to the rest (as integers, the scatter loop of four at a
/// time took one more instruction per load and per store). A float load or store moves its bits
/// unchanged, NaN payloads included; only arithmetic may change them, and these kernels do none.
/// Elsewhere (x87 floats on 32-bit x86 can quiet a signalling NaN) the words are integers.
pub trait Word: Plain<Word = Self> {}

macro_rules! plain {
    ($w:ty: $($t:ty),*) => { $(impl Plain for $t { type Word = $w; })* };
}
plain!(u8: bool, u8, i8);
plain!(u16: u16, i16, half::f16, half::bf16);
impl Word for u8 {}
impl Word for u16 {}
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod wide {
    use super::{Plain, Word};
    plain!(f32: u32, i32, f32);
    plain!(f64: u64, i64, f64, usize, isize);
    impl Word for f32 {}
    impl Word for f64 {}
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod wide {
    use super::{Plain, Word};
    plain!(u32: u32, i32, f32);
    plain!(u64: u64, i64, f64);
    #[cfg(target_pointer_width = "64")]
    plain!(u64: usize, isize);
    #[cfg(target_pointer_width = "32")]
    plain!(u32: usize, isize);
    impl Word for u32 {}
    impl Word for u64 {}
}

/// Checks, for each `T` the kernels are instantiated with, that its word has its memory layout.
const fn same_layout<T: Plain>() {
    let (t, w) = (size_of::<T>(), size_of::<T::Word>());
    assert!(t == w && align_of::<T>() == align_of::<T::Word>());
}

/// The elements of `a` seen as words: the same memory, shape and strides.
///
pub(crate) fn view<'a, T: Plain>(a: &ArrayView<'a, T, IxDyn>) -> ArrayView<'a, T::Word, IxDyn> {
    const { same_layout::<T>() };
    // SAFETY: `T` and `W` have the same size and alignment (checked above), `T` has no padding, and
    // every bit pattern is a valid `W`, so each element (`Plain`: no padding) can be read as one word. The view borrows
    // the same memory for the same lifetime `'a` and is only read.
    unsafe { a.raw_view().cast::<T::Word>().deref_into_view() }
}

/// The elements of `a` seen as words, for writing.
///
/// # Safety
/// Every word written through the view must be the bits of a value of `T` (a word read from an
/// element of `T`), so that the elements stay valid values of `T`.
pub(crate) unsafe fn view_mut<'a, 'b, T: Plain>(
    a: &'b mut ArrayViewMut<'a, T, IxDyn>,
) -> ArrayViewMut<'b, T::Word, IxDyn> {
    const { same_layout::<T>() };
    // SAFETY: as in `view`, and the caller writes only bits of `T` values. The new view holds the
    // unique borrow of `a` for `'b`, so nothing else reads or writes the memory meanwhile.
    unsafe { a.raw_view_mut().cast::<T::Word>().deref_into_view_mut() }
}

/// An output buffer of elements (empty, with capacity) as a buffer of words.
pub(crate) fn vec<T: Plain>(v: Vec<T>) -> Vec<T::Word> {
    const { same_layout::<T>() };
    let mut v = ManuallyDrop::new(v);
    // SAFETY: the allocation was made for `capacity` values of `T`, whose layout is that of `W`, so
    // it is one for `capacity` words and the allocator sees the same layout when it is freed. The
    // `len` elements are initialised `T`s, hence initialised words.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T::Word>(), v.len(), v.capacity()) }
}

/// A buffer of words back as elements.
///
/// # Safety
/// Every word must be the bits of a value of `T` (the kernel only copied elements of `T` into it).
pub(crate) unsafe fn unvec<T: Plain>(v: Vec<T::Word>) -> Vec<T> {
    const { same_layout::<T>() };
    let mut v = ManuallyDrop::new(v);
    // SAFETY: the layouts agree (as in `vec`), and the caller vouches that each word is a `T`.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity()) }
}

/// An element type as the dynamic layer moves it: as its word (every bit pattern of these types is
/// a value, so any word read back is one), or as itself for `bool` (not every byte is a bool).
/// The ops that only move elements then compile once per width, not once per dtype.
/// `a` as a view of [`Element::Bits`](crate::Element::Bits), the type of `T`'s width whose
/// kernels run some of `T`'s reductions.
pub(crate) fn bits<'a, T: crate::Element>(
    a: &ArrayView<'a, T, IxDyn>,
) -> ArrayView<'a, T::Bits, IxDyn> {
    const { same_bits::<T>() };
    // SAFETY: `T::Bits` has `T`'s size and alignment (asserted above), and it is `T` itself or an
    // unsigned integer, every bit pattern of which is a value.
    unsafe { a.raw_view().cast::<T::Bits>().deref_into_view() }
}

/// [`bits`] for a mutable view.
///
/// # Safety
///
/// What is written through the view must be a value of `T` (any bits, for the integer types;
/// 0 or 1 for `bool`).
pub(crate) unsafe fn bits_mut<'a, 'b, T: crate::Element>(
    a: &'b mut ArrayViewMut<'a, T, IxDyn>,
) -> ArrayViewMut<'b, T::Bits, IxDyn> {
    const { same_bits::<T>() };
    // SAFETY: the layouts agree (asserted above), the values read are values of `T::Bits` (see
    // `bits`), and the caller writes values of `T` only.
    unsafe { a.raw_view_mut().cast::<T::Bits>().deref_into_view_mut() }
}

/// One value as its [`bits`].
pub(crate) fn bits_of<T: crate::Element>(x: T) -> T::Bits {
    const { same_bits::<T>() };
    // SAFETY: as in `bits`.
    unsafe { std::mem::transmute_copy(&x) }
}

/// A buffer as its [`bits`].
pub(crate) fn bits_vec<T: crate::Element>(v: Vec<T>) -> Vec<T::Bits> {
    const { same_bits::<T>() };
    let mut v = ManuallyDrop::new(v);
    // SAFETY: the layouts agree (asserted above), so the allocation is one of `T::Bits` too, and
    // the values are values of `T::Bits` (see `bits`).
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T::Bits>(), v.len(), v.capacity()) }
}

/// The inverse of [`bits_vec`].
///
/// # Safety
///
/// Every element of `v` must be a value of `T` (see [`bits_mut`]).
pub(crate) unsafe fn unbits_vec<T: crate::Element>(v: Vec<T::Bits>) -> Vec<T> {
    const { same_bits::<T>() };
    let mut v = ManuallyDrop::new(v);
    // SAFETY: the layouts agree (asserted above), and the caller vouches for the values.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity()) }
}

/// bfloat16 bit patterns (NumPy's `uint16` arrays of them) as bf16 values, any strides, no copy.
#[cfg(feature = "dynamic")]
pub(crate) fn bf16_of_bits(a: ArrayView<'_, u16, IxDyn>) -> ArrayView<'_, half::bf16, IxDyn> {
    const { assert!(size_of::<half::bf16>() == 2 && align_of::<half::bf16>() == 2) };
    // SAFETY: `bf16` is a `u16` in a transparent wrapper (same size and alignment, asserted), and
    // every `u16` is the bits of a bf16 value, so each element read is a value.
    unsafe { a.raw_view().cast::<half::bf16>().deref_into_view() }
}

/// [`bf16_of_bits`] for writing: what is written is a bf16's bits, a `u16` like any other.
#[cfg(feature = "dynamic")]
pub(crate) fn bf16_of_bits_mut(
    mut a: ArrayViewMut<'_, u16, IxDyn>,
) -> ArrayViewMut<'_, half::bf16, IxDyn> {
    const { assert!(size_of::<half::bf16>() == 2 && align_of::<half::bf16>() == 2) };
    // SAFETY: as in `bf16_of_bits`; the view borrows `a`'s elements mutably and alone, and a
    // bf16 written through it is a valid `u16` of the caller's array.
    unsafe { a.raw_view_mut().cast::<half::bf16>().deref_into_view_mut() }
}

const fn same_bits<T: crate::Element>() {
    let (t, b) = (size_of::<T>(), size_of::<T::Bits>());
    assert!(t == b && align_of::<T>() == align_of::<T::Bits>());
}

#[cfg(feature = "dynamic")]
pub(crate) trait Moved: crate::Element {
    /// The element type the op runs on.
    type As: crate::Element;
    /// The elements, seen as [`Moved::As`].
    fn moved<'a>(a: &ArrayView<'a, Self, IxDyn>) -> ArrayView<'a, Self::As, IxDyn>;
    /// The elements, seen as [`Moved::As`], for writing.
    fn moved_mut<'b>(a: &'b mut ArrayViewMut<'_, Self, IxDyn>)
    -> ArrayViewMut<'b, Self::As, IxDyn>;
    /// One value as [`Moved::As`].
    fn to_moved(self) -> Self::As;
    /// An op's result back as elements.
    fn from_moved(a: ndarray::ArrayD<Self::As>) -> ndarray::ArrayD<Self>;
}

#[cfg(feature = "dynamic")]
impl Moved for bool {
    type As = bool;
    fn moved<'a>(a: &ArrayView<'a, bool, IxDyn>) -> ArrayView<'a, bool, IxDyn> {
        a.clone()
    }
    fn moved_mut<'b>(a: &'b mut ArrayViewMut<'_, bool, IxDyn>) -> ArrayViewMut<'b, bool, IxDyn> {
        a.view_mut()
    }
    fn to_moved(self) -> bool {
        self
    }
    fn from_moved(a: ndarray::ArrayD<bool>) -> ndarray::ArrayD<bool> {
        a
    }
}

#[cfg(feature = "dynamic")]
macro_rules! moved_as_word {
    ($($t:ty),*) => {$(
        impl Moved for $t {
            type As = <$t as Plain>::Word;
            fn moved<'a>(a: &ArrayView<'a, $t, IxDyn>) -> ArrayView<'a, Self::As, IxDyn> {
                view(a)
            }
            fn moved_mut<'b>(
                a: &'b mut ArrayViewMut<'_, $t, IxDyn>,
            ) -> ArrayViewMut<'b, Self::As, IxDyn> {
                // SAFETY: every bit pattern of this type is a value of it, so whatever word is
                // written through the view leaves a valid element.
                unsafe { view_mut(a) }
            }
            fn to_moved(self) -> Self::As {
                const { same_layout::<$t>() };
                // SAFETY: the same size (checked above), and every bit pattern is a word.
                unsafe { std::mem::transmute_copy(&self) }
            }
            fn from_moved(a: ndarray::ArrayD<Self::As>) -> ndarray::ArrayD<$t> {
                let a = if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() };
                let (shape, len) = (a.raw_dim(), a.len());
                let (v, offset) = a.into_raw_vec_and_offset();
                // Owned standard-layout results of the ops start at their buffer's first element.
                let v = if offset.unwrap_or(0) == 0 && v.len() == len {
                    v
                } else {
                    let start = offset.unwrap_or(0);
                    v[start..start + len].to_vec()
                };
                // SAFETY: every bit pattern of this type is a value of it.
                let v = unsafe { unvec::<$t>(v) };
                ndarray::ArrayD::from_shape_vec(shape, v).expect("the buffer holds the shape's elements")
            }
        }
    )*};
}
#[cfg(feature = "dynamic")]
moved_as_word!(
    u8,
    i8,
    u16,
    i16,
    half::f16,
    half::bf16,
    u32,
    i32,
    f32,
    u64,
    i64,
    f64
);

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use ndarray::{ArrayD, IxDyn, s};

    #[test]
    fn each_type_moves_as_the_word_of_its_width() {
        fn width<T: Plain>() -> usize {
            assert_eq!(size_of::<T>(), size_of::<T::Word>());
            size_of::<T::Word>()
        }
        assert_eq!(width::<bool>(), 1);
        assert_eq!(width::<f16>(), 2);
        assert_eq!(width::<half::bf16>(), 2);
        assert_eq!(width::<f32>(), 4);
        assert_eq!(width::<i64>(), 8);
        assert_eq!(width::<usize>(), size_of::<usize>());
    }

    /// The bits of a word of four bytes, whichever type the words of this target are.
    fn bits(w: <u32 as Plain>::Word) -> u32 {
        // SAFETY (test): the word has four bytes, and every bit pattern is a `u32`.
        unsafe { std::mem::transmute_copy(&w) }
    }

    #[test]
    fn views_and_buffers_keep_every_bit_and_the_strides() {
        // A signalling NaN's bits and a quiet NaN with a payload, as u32 elements: the words (floats
        // on x86-64) must carry them unchanged through views, buffers and writes.
        let (snan, qnan) = (0x7f80_0001u32, 0xffc0_1234u32);
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1u32, snan, qnan, 4, 5, 6]).unwrap();
        let t = a.t();
        let w = view::<u32>(&t.view());
        assert_eq!(w.shape(), t.shape());
        assert_eq!(w.strides(), t.strides());
        assert_eq!(bits(w[[0, 1]]), 4);
        assert_eq!(bits(w[[1, 0]]), snan);
        assert_eq!(bits(w[[2, 0]]), qnan);
        let rev = a.slice(s![.., ..;-1]).into_dyn();
        assert_eq!(bits(view::<u32>(&rev)[[0, 0]]), qnan);

        let words = vec::<u32>(a.iter().copied().collect());
        let copied = words.to_vec();
        // SAFETY: the words are bits of u32 values.
        let back: Vec<u32> = unsafe { unvec(copied) };
        assert_eq!(back, vec![1, snan, qnan, 4, 5, 6]);

        let mut m = a.clone();
        let mut mv = m.view_mut();
        // SAFETY: the word written is the bits of a u32 element.
        unsafe { view_mut::<u32>(&mut mv)[[1, 2]] = words[1] };
        assert_eq!(m[[1, 2]], snan);
    }

    #[test]
    fn data_moving_ops_keep_signalling_nans_bit_for_bit() {
        use ndarray::{Array1, array};
        let (b32, b64) = (0x7f80_0001u32, 0x7ff0_0000_0000_0001u64);
        let (s32, s64) = (f32::from_bits(b32), f64::from_bits(b64));
        let x = array![[s32, 1.0], [2.0, s32]];
        let g = crate::gather(&x, 1, &array![[1i64, 0], [1, 1]]).unwrap();
        assert_eq!((g[[0, 1]].to_bits(), g[[1, 0]].to_bits()), (b32, b32));
        let t = crate::take(&x, &array![3i64, 0]).unwrap();
        assert_eq!((t[0].to_bits(), t[1].to_bits()), (b32, b32));
        let v = array![s64, 0.5];
        let sel = crate::index_select(&v, 0, &array![0i64, 0]).unwrap();
        assert_eq!((sel[0].to_bits(), sel[1].to_bits()), (b64, b64));
        let zeros = Array1::<f64>::zeros(3);
        let sc = crate::scatter(&zeros, 0, &array![2i64], &v.slice(s![..1])).unwrap();
        assert_eq!(sc[2].to_bits(), b64);
        let ic = crate::index_copy(&zeros, 0, &array![1i64], &v.slice(s![..1])).unwrap();
        assert_eq!(ic[1].to_bits(), b64);
    }
}
