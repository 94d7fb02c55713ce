//! Dynamically typed calls: every op by name, on arrays whose dtype is known only at run time.
//!
//! This is the layer the `gather` command, the conformance runner and the Python bindings use: a
//! [`Tensor`] is an `ArrayD` of one of the thirteen element types, [`Args`] holds the non-tensor
//! arguments by PyTorch's names, [`call`] runs an op by its PyTorch name, and [`call_grad`] its
//! gradient.
//!
//! ```
//! use gather::dynamic::{call, Args, Arg, Tensor};
//! use ndarray::{array, ArrayD};
//! use std::collections::BTreeMap;
//!
//! let mut inputs = BTreeMap::new();
//! inputs.insert("input".to_string(), Tensor::from(array![[10i32, 20, 30], [40, 50, 60]].into_dyn()));
//! inputs.insert("index".to_string(), Tensor::from(array![[0i64, 2], [1, 0]].into_dyn()));
//! let mut args = Args::default();
//! args.set("dim", Arg::Int(1));
//! let out = call("gather", &args, &inputs).unwrap();
//! assert_eq!(out[0].0, "output");
//! assert_eq!(out[0].1, Tensor::from(array![[10i32, 30], [50, 40]].into_dyn()));
//! ```

mod bounds;
mod broadcast;
mod grad;
mod groups;
mod index_ops;
mod masked;
mod onnx;
mod scatter;
mod sort;
mod take;
#[cfg(test)]
pub(crate) mod test_util;

pub use bounds::{bounds_policy, check_policy_form, grad_bounds_policy, takes_bounds_policy};
pub use grad::{GRAD_OPS, call_grad, call_grad_with, check_grad_dtypes};
pub use groups::{arg_reduce, bool_fill, group_fill, group_reduce, opt_size, segment_args};
pub use index_ops::index_reduce_arg;
pub use onnx::ONNX_OPS;
pub use sort::{order_args, repeat_interleave_args, repeat_interleave_count};
pub use take::batch_dims;

use std::collections::BTreeMap;

use half::{bf16, f16};
use ndarray::{ArrayD, ArrayView, ArrayViewD, ArrayViewMutD, CowArray, IxDyn};

use crate::kernels::words::Moved;

use crate::element::{DType, Element, Scalar};
use crate::error::{Error, Result};

/// An n-dimensional array of any supported element type.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Tensor {
    Bool(ArrayD<bool>),
    U8(ArrayD<u8>),
    I8(ArrayD<i8>),
    I16(ArrayD<i16>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
    U16(ArrayD<u16>),
    U32(ArrayD<u32>),
    U64(ArrayD<u64>),
    F16(ArrayD<f16>),
    BF16(ArrayD<bf16>),
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
}

/// A borrowed array of any supported element type, any strides: what [`call`] reads. Python's
/// arrays and the command's tensors both come in as these, so no op copies its inputs.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum TensorView<'a> {
    Bool(ArrayViewD<'a, bool>),
    U8(ArrayViewD<'a, u8>),
    I8(ArrayViewD<'a, i8>),
    I16(ArrayViewD<'a, i16>),
    I32(ArrayViewD<'a, i32>),
    I64(ArrayViewD<'a, i64>),
    U16(ArrayViewD<'a, u16>),
    U32(ArrayViewD<'a, u32>),
    U64(ArrayViewD<'a, u64>),
    F16(ArrayViewD<'a, f16>),
    BF16(ArrayViewD<'a, bf16>),
    F32(ArrayViewD<'a, f32>),
    F64(ArrayViewD<'a, f64>),
}

/// A mutable borrowed array of any supported element type: the target of [`call_inplace`].
#[derive(Debug)]
#[allow(missing_docs)]
pub enum TensorViewMut<'a> {
    Bool(ArrayViewMutD<'a, bool>),
    U8(ArrayViewMutD<'a, u8>),
    I8(ArrayViewMutD<'a, i8>),
    I16(ArrayViewMutD<'a, i16>),
    I32(ArrayViewMutD<'a, i32>),
    I64(ArrayViewMutD<'a, i64>),
    U16(ArrayViewMutD<'a, u16>),
    U32(ArrayViewMutD<'a, u32>),
    U64(ArrayViewMutD<'a, u64>),
    F16(ArrayViewMutD<'a, f16>),
    BF16(ArrayViewMutD<'a, bf16>),
    F32(ArrayViewMutD<'a, f32>),
    F64(ArrayViewMutD<'a, f64>),
}

/// Runs `$body` with `$a` bound to the typed array inside `$t`, a value of the enum
/// `$crate::dynamic::$kind` ([`Tensor`], [`TensorView`] or [`TensorViewMut`]), or a reference
/// to one.
#[doc(hidden)]
#[macro_export]
macro_rules! with_elem {
    ($kind:ident, $t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::dynamic::$kind::Bool($a) => $body,
            $crate::dynamic::$kind::U8($a) => $body,
            $crate::dynamic::$kind::I8($a) => $body,
            $crate::dynamic::$kind::I16($a) => $body,
            $crate::dynamic::$kind::I32($a) => $body,
            $crate::dynamic::$kind::I64($a) => $body,
            $crate::dynamic::$kind::U16($a) => $body,
            $crate::dynamic::$kind::U32($a) => $body,
            $crate::dynamic::$kind::U64($a) => $body,
            $crate::dynamic::$kind::F16($a) => $body,
            $crate::dynamic::$kind::BF16($a) => $body,
            $crate::dynamic::$kind::F32($a) => $body,
            $crate::dynamic::$kind::F64($a) => $body,
        }
    };
}

/// Runs `$body` with `$a` bound to the typed array inside a [`Tensor`] (any of the 13 types).
#[macro_export]
macro_rules! with_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        $crate::with_elem!(Tensor, $t, $a => $body)
    };
}

/// [`with_tensor!`] for a [`TensorView`] (or a reference to one): `$a` is a reference to the
/// typed view.
macro_rules! with_view {
    ($t:expr, $a:ident => $body:expr) => {
        $crate::with_elem!(TensorView, &$t, $a => $body)
    };
}
pub(crate) use with_view;

/// [`with_tensor!`] for a [`TensorViewMut`]: `$a` is a mutable reference to the typed view.
macro_rules! with_view_mut {
    ($t:expr, $a:ident => $body:expr) => {
        $crate::with_elem!(TensorViewMut, &mut $t, $a => $body)
    };
}
pub(crate) use with_view_mut;

/// Runs `$body` with `$a` bound to the values of an integer [`TensorView`] as an
/// `&ArrayViewD<i64>`; evaluates `$other` for float and bool tensors. `i64` indices are used as
/// they are; the other integer types are widened to an `i64` copy first (by [`index_i64`],
/// outside the body), so that every op is compiled once, for one index type, here (the typed
/// API takes every integer type without a copy). Checks that print the index's dtype run on the
/// [`TensorView`] before this.
macro_rules! with_index_tensor {
    ($t:expr, $a:ident => $body:expr, _ => $other:expr) => {
        match $crate::dynamic::index_i64(&$t) {
            Some(wide) => {
                let $a: &ndarray::ArrayViewD<'_, i64> = &wide.view();
                $body
            }
            None => $other,
        }
    };
}
pub(crate) use with_index_tensor;

/// The values of an integer [`TensorView`] as `i64`, from [`index_i64`].
pub(crate) struct IndexI64<'a> {
    data: CowArray<'a, i64, IxDyn>,
    shape: IxDyn,
}

impl IndexI64<'_> {
    /// The values, in the tensor's shape.
    pub(crate) fn view(&self) -> ArrayViewD<'_, i64> {
        self.data
            .broadcast(self.shape.clone())
            .unwrap_or_else(|| unreachable!("the copy has the tensor's shape but stride-0 axes"))
    }
}

/// The values of an integer [`TensorView`] as `i64`: borrowed for `i64`, a widened copy for
/// the other integer types; `None` for float and bool tensors. The copy keeps broadcast axes at
/// length 1 (stride 0 in the view), so an expanded index is never materialised. An int64 or
/// int32 index whose values are the same along some axes (a broadcast the caller materialised,
/// as `jnp.broadcast_to` under `jax.jit` or torch's `expand(..).contiguous()` do) becomes the
/// broadcast view of its compact copy, which the kernels' row loops take as the broadcast it is.
pub(crate) fn index_i64<'a>(t: &TensorView<'a>) -> Option<IndexI64<'a>> {
    fn wide<'a, I: crate::IndexElem>(
        a: &ArrayViewD<'a, I>,
        compact: Option<ArrayD<I>>,
    ) -> Option<IndexI64<'a>> {
        let mut c = compact.as_ref().map_or(a.view(), |c| c.view());
        for ax in 0..c.ndim() {
            if c.strides()[ax] == 0 && c.shape()[ax] > 1 {
                c.collapse_axis(ndarray::Axis(ax), 0);
            }
        }
        Some(IndexI64 {
            data: CowArray::from(map_owned(&c, |v| v.to_i64())),
            shape: a.raw_dim(),
        })
    }
    match t {
        TensorView::I64(a) => Some(IndexI64 {
            data: crate::dynamic::materialised_broadcast(a)
                .map_or_else(|| CowArray::from(a.clone()), CowArray::from),
            shape: a.raw_dim(),
        }),
        // JAX's default index type, which XLA hands over with broadcasts materialised; the
        // search is compiled for it and int64 alone.
        TensorView::I32(a) => wide(a, crate::dynamic::materialised_broadcast(a)),
        TensorView::U8(a) => wide(a, None),
        TensorView::I8(a) => wide(a, None),
        TensorView::I16(a) => wide(a, None),
        TensorView::U16(a) => wide(a, None),
        TensorView::U32(a) => wide(a, None),
        TensorView::U64(a) => wide(a, None),
        _ => None,
    }
}

/// Runs `f`, an op that only moves elements, on `x` seen as the type such ops compile for (its
/// word, see [`Moved`]), and gives the result back as a tensor of `x`'s dtype: the op's code is
/// compiled for 5 types instead of 13.
pub(crate) fn moved_op<T: TensorElem + Moved>(
    x: &ArrayViewD<'_, T>,
    f: impl FnOnce(ArrayView<'_, T::As, IxDyn>) -> Result<ArrayD<T::As>>,
) -> Result<Tensor> {
    Ok(moved_back::<T>(f(T::moved(&x.view()))?))
}

/// The ops that read `input` where an index (or a mask) says, with their arguments: run by
/// [`Read::on`] on the moved type of the input (see [`Moved`]). One `match` compiled once per
/// moved type serves them all, where a closure per op and element type would be compiled
/// 13 times per op.
pub(crate) enum Read<'a> {
    Gather(isize, &'a ArrayViewD<'a, i64>),
    Gather32(isize, &'a ArrayViewD<'a, i32>),
    IndexSelect(isize, &'a ArrayViewD<'a, i64>),
    Take(&'a ArrayViewD<'a, i64>),
    TakeAlongDim(Option<isize>, &'a ArrayViewD<'a, i64>),
    SelectBatched(isize, &'a ArrayViewD<'a, i64>, usize),
    GatherBroadcast(isize, &'a ArrayViewD<'a, i64>),
    MaskedSelect(&'a ArrayViewD<'a, bool>),
    RepeatInterleave(&'a ArrayViewD<'a, i64>, Option<isize>, Option<usize>),
    RepeatInterleaveScalar(usize, Option<isize>, Option<usize>),
    OnnxGatherElements(isize, &'a ArrayViewD<'a, i64>),
    OnnxGather(isize, &'a ArrayViewD<'a, i64>),
    OnnxGatherNd(usize, &'a ArrayViewD<'a, i64>),
}

impl Read<'_> {
    /// The read on `x`, whatever its dtype; the result has `x`'s dtype.
    pub(crate) fn on(&self, x: &TensorView<'_>) -> Result<Tensor> {
        with_view!(x, x => self.typed(x))
    }

    fn typed<T: TensorElem + Moved>(&self, x: &ArrayViewD<'_, T>) -> Result<Tensor> {
        Ok(moved_back::<T>(self.run(T::moved(x))?))
    }

    fn run<M: Element>(&self, x: ArrayViewD<'_, M>) -> Result<ArrayD<M>> {
        use crate::ops::{broadcast, masked, onnx, repeat, take};
        match *self {
            Read::Gather(dim, i) => crate::gather(&x, dim, i),
            Read::Gather32(dim, i) => crate::gather(&x, dim, i),
            Read::IndexSelect(dim, i) => crate::ops::index::index_select(&x, dim, i),
            Read::Take(i) => Ok(take::take(&x, i)?.into_dyn()),
            Read::TakeAlongDim(dim, i) => take::take_along_dim(&x, i, dim),
            Read::SelectBatched(dim, i, b) => crate::select_batched(&x, dim, i, b),
            Read::GatherBroadcast(dim, i) => broadcast::gather_broadcast(&x, dim, i),
            Read::MaskedSelect(mask) => Ok(masked::masked_select(&x, mask)?.into_dyn()),
            Read::RepeatInterleave(r, dim, n) => repeat::repeat_interleave(&x, r, dim, n),
            Read::RepeatInterleaveScalar(r, dim, n) => {
                repeat::repeat_interleave_scalar(&x, r, dim, n)
            }
            Read::OnnxGatherElements(axis, i) => onnx::onnx_gather_elements(&x, i, axis),
            Read::OnnxGather(axis, i) => onnx::onnx_gather(&x, i, axis),
            Read::OnnxGatherNd(b, i) => onnx::onnx_gather_nd(&x, i, b),
        }
    }
}

/// The result of a [`moved_op`] as a tensor of `T`: compiled once per type, not per op.
#[inline(never)]
pub(crate) fn moved_back<T: TensorElem + Moved>(a: ArrayD<T::As>) -> Tensor {
    T::wrap(T::from_moved(a))
}

/// Element types that can live in a [`Tensor`].
///
/// ```
/// use gather::dynamic::{Tensor, TensorElem};
/// let t = f32::wrap(ndarray::arr1(&[1.0f32]).into_dyn());
/// assert!(f32::unwrap_ref(&t).is_some());
/// assert!(i64::unwrap_ref(&t).is_none());
/// ```
pub trait TensorElem: Element {
    /// Puts an array into a [`Tensor`].
    fn wrap(a: ArrayD<Self>) -> Tensor;
    /// The array inside `t`, if `t` has this element type.
    fn unwrap_ref(t: &Tensor) -> Option<&ArrayD<Self>>;
    /// The array inside `t`, mutably, if `t` has this element type.
    fn unwrap_mut(t: &mut Tensor) -> Option<&mut ArrayD<Self>>;
    /// The view inside `t`, if `t` has this element type.
    #[doc(hidden)]
    fn view_ref<'b, 'a>(t: &'b TensorView<'a>) -> Option<&'b ArrayViewD<'a, Self>>;
}

macro_rules! tensor_elem {
    ($t:ty, $v:ident) => {
        impl TensorElem for $t {
            fn wrap(a: ArrayD<$t>) -> Tensor {
                Tensor::$v(a)
            }
            fn unwrap_ref(t: &Tensor) -> Option<&ArrayD<$t>> {
                match t {
                    Tensor::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn unwrap_mut(t: &mut Tensor) -> Option<&mut ArrayD<$t>> {
                match t {
                    Tensor::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn view_ref<'b, 'a>(t: &'b TensorView<'a>) -> Option<&'b ArrayViewD<'a, $t>> {
                match t {
                    TensorView::$v(a) => Some(a),
                    _ => None,
                }
            }
        }
        impl<'a> From<ArrayViewD<'a, $t>> for TensorView<'a> {
            fn from(a: ArrayViewD<'a, $t>) -> TensorView<'a> {
                TensorView::$v(a)
            }
        }
        impl<'a> From<ArrayViewMutD<'a, $t>> for TensorViewMut<'a> {
            fn from(a: ArrayViewMutD<'a, $t>) -> TensorViewMut<'a> {
                TensorViewMut::$v(a)
            }
        }
        impl From<ArrayD<$t>> for Tensor {
            fn from(a: ArrayD<$t>) -> Tensor {
                Tensor::$v(a)
            }
        }
    };
}

tensor_elem!(bool, Bool);
tensor_elem!(u8, U8);
tensor_elem!(i8, I8);
tensor_elem!(i16, I16);
tensor_elem!(i32, I32);
tensor_elem!(i64, I64);
tensor_elem!(u16, U16);
tensor_elem!(u32, U32);
tensor_elem!(u64, U64);
tensor_elem!(f16, F16);
tensor_elem!(bf16, BF16);
tensor_elem!(f32, F32);
tensor_elem!(f64, F64);

impl Tensor {
    /// A view of the whole array.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// let t = Tensor::from(ndarray::arr1(&[1u8, 2]).into_dyn());
    /// assert_eq!(t.view().shape(), &[2]);
    /// ```
    pub fn view(&self) -> TensorView<'_> {
        with_tensor!(self, a => TensorView::from(a.view()))
    }

    /// A mutable view of the whole array (the target of [`call_inplace`]).
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// let mut t = Tensor::from(ndarray::arr1(&[1u8, 2]).into_dyn());
    /// assert_eq!(t.view_mut().dtype(), gather::DType::U8);
    /// ```
    pub fn view_mut(&mut self) -> TensorViewMut<'_> {
        with_tensor!(self, a => TensorViewMut::from(a.view_mut()))
    }

    /// The element type.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// assert_eq!(Tensor::from(ndarray::arr1(&[1u8]).into_dyn()).dtype(), gather::DType::U8);
    /// ```
    pub fn dtype(&self) -> DType {
        self.view().dtype()
    }

    /// The shape.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// assert_eq!(Tensor::from(ndarray::Array2::<f32>::zeros((2, 3)).into_dyn()).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, a => a.shape())
    }

    /// The number of elements.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// assert_eq!(Tensor::from(ndarray::Array2::<f32>::zeros((2, 3)).into_dyn()).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        self.view().len()
    }

    /// True when the tensor has no elements.
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// assert!(Tensor::from(ndarray::Array2::<f32>::zeros((0, 3)).into_dyn()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An array of `dtype` and `shape` filled with zeros (`false`).
    ///
    /// ```
    /// use gather::{dynamic::Tensor, DType};
    /// let t = Tensor::zeros(DType::BF16, &[2, 2]);
    /// assert_eq!((t.dtype(), t.len()), (DType::BF16, 4));
    /// ```
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        fn z<T: TensorElem>(shape: &[usize]) -> Tensor {
            T::wrap(ArrayD::from_elem(shape, T::default()))
        }
        match dtype {
            DType::Bool => z::<bool>(shape),
            DType::U8 => z::<u8>(shape),
            DType::I8 => z::<i8>(shape),
            DType::I16 => z::<i16>(shape),
            DType::I32 => z::<i32>(shape),
            DType::I64 => z::<i64>(shape),
            DType::U16 => z::<u16>(shape),
            DType::U32 => z::<u32>(shape),
            DType::U64 => z::<u64>(shape),
            DType::F16 => z::<f16>(shape),
            DType::BF16 => z::<bf16>(shape),
            DType::F32 => z::<f32>(shape),
            DType::F64 => z::<f64>(shape),
        }
    }

    /// The values as `f64`, in row-major order (for display and tolerant comparison).
    ///
    /// ```
    /// use gather::dynamic::Tensor;
    /// let t = Tensor::from(ndarray::arr1(&[true, false]).into_dyn());
    /// assert_eq!(t.to_f64_vec(), vec![1.0, 0.0]);
    /// ```
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_tensor!(self, a => a.iter().map(|x| x.to_f64()).collect())
    }
}

impl<'a> TensorView<'a> {
    /// bfloat16 values read from their bit patterns, in any layout, without a copy: NumPy has
    /// no bfloat16, so its arrays of them are `uint16`.
    ///
    /// ```
    /// use gather::{DType, dynamic::TensorView};
    /// let bits = ndarray::arr2(&[[0x3f80u16, 0x4000], [0x4040, 0x4080]]).into_dyn();
    /// let v = TensorView::bf16_from_bits(bits.t()); // 1, 2, 3, 4, transposed
    /// assert_eq!(v.dtype(), DType::BF16);
    /// assert_eq!(v.to_tensor().to_f64_vec(), [1.0, 3.0, 2.0, 4.0]);
    /// ```
    pub fn bf16_from_bits(bits: ArrayViewD<'a, u16>) -> Self {
        TensorView::BF16(crate::kernels::words::bf16_of_bits(bits))
    }

    /// The same view, for a shorter lifetime (views are not covariant in ndarray 0.17).
    pub(crate) fn reborrow(&self) -> TensorView<'_> {
        with_view!(self, a => TensorView::from(a.view()))
    }

    /// The element type.
    ///
    /// ```
    /// use gather::dynamic::TensorView;
    /// let a = ndarray::arr1(&[1.0f32]).into_dyn();
    /// assert_eq!(TensorView::from(a.view()).dtype(), gather::DType::F32);
    /// ```
    pub fn dtype(&self) -> DType {
        with_view!(self, a => elem_dtype(a))
    }

    /// The shape.
    ///
    /// ```
    /// use gather::dynamic::TensorView;
    /// let a = ndarray::Array2::<i8>::zeros((2, 3)).into_dyn();
    /// assert_eq!(TensorView::from(a.view()).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        with_view!(self, a => a.shape())
    }

    /// The number of elements.
    ///
    /// ```
    /// use gather::dynamic::TensorView;
    /// let a = ndarray::Array2::<i8>::zeros((2, 3)).into_dyn();
    /// assert_eq!(TensorView::from(a.view()).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        with_view!(self, a => a.len())
    }

    /// True when the view has no elements.
    ///
    /// ```
    /// use gather::dynamic::TensorView;
    /// let a = ndarray::Array2::<i8>::zeros((0, 3)).into_dyn();
    /// assert!(TensorView::from(a.view()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An owned copy in standard layout.
    ///
    /// ```
    /// use gather::dynamic::{Tensor, TensorView};
    /// let a = ndarray::arr2(&[[1u16, 2], [3, 4]]).into_dyn();
    /// let t = TensorView::from(a.t()).to_tensor();
    /// assert_eq!(t, Tensor::from(ndarray::arr2(&[[1u16, 3], [2, 4]]).into_dyn()));
    /// ```
    pub fn to_tensor(&self) -> Tensor {
        with_view!(self, a => Tensor::from(crate::kernels::copy::owned(a)))
    }
}

impl<'a> TensorViewMut<'a> {
    /// bfloat16 values to be written in place as their bit patterns, in any layout, without a
    /// copy: NumPy has no bfloat16, so its arrays of them are `uint16` ([`TensorView::bf16_from_bits`]).
    ///
    /// ```
    /// use gather::{DType, dynamic::TensorViewMut};
    /// let mut bits = ndarray::arr1(&[0x3f80u16, 0x4000]).into_dyn(); // 1.0, 2.0
    /// let v = TensorViewMut::bf16_from_bits(bits.view_mut());
    /// assert_eq!(v.dtype(), DType::BF16);
    /// ```
    pub fn bf16_from_bits(bits: ndarray::ArrayViewMutD<'a, u16>) -> Self {
        TensorViewMut::BF16(crate::kernels::words::bf16_of_bits_mut(bits))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        crate::with_elem!(TensorViewMut, self, a => elem_dtype(a))
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        crate::with_elem!(TensorViewMut, self, a => a.shape())
    }

    /// A read-only view of the same elements.
    pub fn view(&self) -> TensorView<'_> {
        crate::with_elem!(TensorViewMut, self, a => TensorView::from(a.view()))
    }
}

/// `index` with every axis along which its values are the same kept at length 1 (an owned
/// array, to broadcast back to `index`'s shape), where there is such an axis of length > 1 that
/// is not already a broadcast (stride 0): a broadcast the caller materialised, as
/// `jnp.broadcast_to` under `jax.jit` or torch's `expand(..).contiguous()` does. The kernels
/// take its broadcast view in their row loops, as they take a stride-0 index. `None` otherwise,
/// after a pass per axis that stops at the first difference (at once for independent values).
/// Indices of fewer than [`GRAIN`](crate::plan::GRAIN) elements are left as they are: the row
/// loops gain little there, and the search would cost a small call a tenth of its time.
pub(crate) fn materialised_broadcast<I: crate::IndexElem + PartialEq>(
    index: &ArrayView<'_, I, IxDyn>,
) -> Option<ArrayD<I>> {
    if index.len() < crate::plan::GRAIN {
        return None;
    }
    let mut compact = index.view();
    let mut found = false;
    for ax in 0..compact.ndim() {
        if compact.shape()[ax] < 2 {
            continue;
        }
        // Broadcast axes stay broadcast (length 1 in the copy), whether they were or not.
        if compact.strides()[ax] == 0 {
            compact.collapse_axis(ndarray::Axis(ax), 0);
        } else if constant_along(&compact, ax) {
            compact.collapse_axis(ndarray::Axis(ax), 0);
            found = true;
        }
    }
    found.then(|| map_owned(&compact, |v| v))
}

/// `compact` (from [`materialised_broadcast`]) as a stride-0 view of `index`'s shape.
pub(crate) fn spread<'c, I: crate::IndexElem>(
    compact: &'c ArrayD<I>,
    index: &ArrayView<'_, I, IxDyn>,
) -> ArrayView<'c, I, IxDyn> {
    compact
        .broadcast(index.raw_dim())
        .expect("a materialised broadcast spreads back to the index it was read from")
}

/// `f` of `index`, or of the broadcast view of its compact copy where `index` is a materialised
/// broadcast (see [`materialised_broadcast`]): how the ops that read an index as it is (not
/// widened by [`index_i64`]) hand it to their kernels.
pub(crate) fn on_compact<I: crate::IndexElem + PartialEq, R>(
    index: &ArrayView<'_, I, IxDyn>,
    f: impl FnOnce(&ArrayView<'_, I, IxDyn>) -> R,
) -> R {
    match materialised_broadcast(index) {
        Some(c) => f(&spread(&c, index)),
        None => f(index),
    }
}

/// Whether the values of `a` are the same along axis `ax`, for a standard-layout `a` (as a
/// materialised broadcast is): each run of the elements after `ax` equals the run before it.
fn constant_along<I: crate::IndexElem + PartialEq>(a: &ArrayView<'_, I, IxDyn>, ax: usize) -> bool {
    let Some(data) = a.as_slice() else {
        return false;
    };
    let inner: usize = a.shape()[ax + 1..].iter().product();
    // Each block (one step of the axes before `ax`) is constant along `ax` when it equals itself
    // shifted by one step of `ax`: one slice compare (memcmp) per block, where comparing run by
    // run cost a loop per element of the last axis.
    data.chunks_exact(inner * a.shape()[ax])
        .all(|block| block[inner..] == block[..block.len() - inner])
}

/// `f` of every element of `a`, as an owned standard-layout array built in logical order (NumPy
/// gives empty arrays strides, 0 along an empty axis, that ndarray's `to_owned` and `mapv` may
/// carry into an owned array).
fn map_owned<T: Copy, U>(a: &ArrayViewD<'_, T>, f: impl Fn(T) -> U) -> ArrayD<U> {
    // Row by row, on huge pages: `iter()` on a dynamic-rank view steps a coordinate of the
    // dynamic rank per element, and a fresh buffer on 4 KiB pages faults once per page
    // (docs/performance.md, "A narrow index's widened copy").
    let mut data: Vec<U> = crate::memory::huge_page_vec(a.len()).unwrap_or_default();
    match a.as_slice() {
        Some(s) => data.extend(s.iter().map(|&x| f(x))),
        None => {
            // A collapsed broadcast (`materialised_broadcast`) is often one strided axis: a
            // loop, where `rows()` would give one row per element.
            match crate::dims::as_line(a) {
                Some(line) => data.extend(line.iter().map(|&x| f(x))),
                None => {
                    for row in a.rows() {
                        data.extend(row.iter().map(|&x| f(x)));
                    }
                }
            }
        }
    }
    ArrayD::from_shape_vec(a.raw_dim(), data)
        .unwrap_or_else(|_| unreachable!("the data has the view's element count"))
}

fn elem_dtype<T: Element, S: ndarray::RawData<Elem = T>>(
    _: &ndarray::ArrayBase<S, IxDyn>,
) -> DType {
    T::DTYPE
}

/// A non-tensor argument, as the conformance suite writes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// `null` / `None`.
    None,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (NaN and infinities allowed).
    Float(f64),
    /// A string (reduction names; also `"nan"`, `"inf"`, `"-inf"` for scalars).
    Str(String),
}

/// Named non-tensor arguments.
///
/// ```
/// use gather::dynamic::{Args, Arg};
/// let mut a = Args::default();
/// a.set("dim", Arg::Int(-1));
/// assert_eq!(a.int("dim").unwrap(), -1);
/// assert!(a.int("k").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args(BTreeMap<String, Arg>);

impl Args {
    /// Sets `name` to `value`.
    pub fn set(&mut self, name: &str, value: Arg) {
        self.0.insert(name.to_string(), value);
    }

    /// The raw argument, if present.
    pub fn get(&self, name: &str) -> Option<&Arg> {
        self.0.get(name)
    }

    fn missing(name: &str, what: &str) -> Error {
        Error::invalid(format!(
            "missing or malformed argument `{name}` (expected {what})"
        ))
    }

    /// A required integer.
    pub fn int(&self, name: &str) -> Result<i64> {
        match self.get(name) {
            Some(Arg::Int(i)) => Ok(*i),
            _ => Err(Self::missing(name, "an integer")),
        }
    }

    /// An optional integer (`None` when absent or null).
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None | Some(Arg::None) => Ok(None),
            Some(Arg::Int(i)) => Ok(Some(*i)),
            _ => Err(Self::missing(name, "an integer or null")),
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(Arg::Bool(b)) => Ok(*b),
            _ => Err(Self::missing(name, "true or false")),
        }
    }

    /// A required string.
    pub fn str(&self, name: &str) -> Result<&str> {
        match self.get(name) {
            Some(Arg::Str(s)) => Ok(s),
            _ => Err(Self::missing(name, "a string")),
        }
    }

    /// A required scalar (`value`, `alpha`): a number, a boolean, or `"nan"`/`"inf"`/`"-inf"`.
    pub fn scalar(&self, name: &str) -> Result<Scalar> {
        match self.get(name) {
            Some(Arg::Bool(b)) => Ok(Scalar::Bool(*b)),
            Some(Arg::Int(i)) => Ok(Scalar::Int(*i)),
            Some(Arg::Float(x)) => Ok(Scalar::Float(*x)),
            Some(Arg::Str(s)) => match s.as_str() {
                "nan" => Ok(Scalar::Float(f64::NAN)),
                "inf" => Ok(Scalar::Float(f64::INFINITY)),
                "-inf" => Ok(Scalar::Float(f64::NEG_INFINITY)),
                _ => Err(Self::missing(name, "a number")),
            },
            _ => Err(Self::missing(name, "a number")),
        }
    }

    /// `dim` as an `isize`.
    pub fn dim(&self) -> Result<isize> {
        Ok(self.int("dim")? as isize)
    }
}

/// Named tensors (inputs or outputs).
pub type Tensors = BTreeMap<String, Tensor>;

/// Named borrowed tensors: the inputs of [`call`] without a copy.
pub type TensorViews<'a> = BTreeMap<String, TensorView<'a>>;

/// The named inputs of a call: [`Tensors`] or [`TensorViews`]. [`call`] takes them as a trait
/// object, so the ops are compiled once whichever map the caller holds.
///
/// ```
/// use gather::dynamic::{Inputs, Tensor, Tensors};
/// let mut t = Tensors::new();
/// t.insert("index".into(), Tensor::from(ndarray::arr1(&[0i64]).into_dyn()));
/// assert_eq!(t.tensor("index").unwrap().len(), 1);
/// assert!(t.tensor("src").is_none());
/// ```
pub trait Inputs {
    /// The tensor named `name`, if there is one.
    fn tensor(&self, name: &str) -> Option<TensorView<'_>>;
}

impl Inputs for Tensors {
    fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.get(name).map(Tensor::view)
    }
}

impl Inputs for TensorViews<'_> {
    fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.get(name).map(TensorView::reborrow)
    }
}

/// A few named views in a list, found by a walk: the Python bindings' calls have two or three
/// inputs, for which a map's allocations cost more than the lookups.
impl Inputs for Vec<(&str, TensorView<'_>)> {
    fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.reborrow())
    }
}

/// `base` with `input` replaced by `input` (a bounded in-place call reads its target so).
struct WithInput<'a> {
    base: &'a dyn Inputs,
    input: TensorView<'a>,
}

impl Inputs for WithInput<'_> {
    fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        match name {
            "input" => Some(self.input.reborrow()),
            _ => self.base.tensor(name),
        }
    }
}

/// A required input tensor.
pub(crate) fn input<'a>(inputs: &'a dyn Inputs, name: &str) -> Result<TensorView<'a>> {
    inputs
        .tensor(name)
        .ok_or_else(|| Error::invalid(format!("missing input tensor `{name}`")))
}

/// `other` as an array of `T`, or the dtype-mismatch error PyTorch gives.
pub(crate) fn same_dtype<'a, T: TensorElem>(
    op: &str,
    what: &str,
    other: &TensorView<'a>,
) -> Result<ArrayViewD<'a, T>> {
    T::view_ref(other)
        .cloned()
        .ok_or_else(|| crate::error::dtype_mismatch(op, what, T::DTYPE, other.dtype()))
}

/// The error for an index tensor of a non-integer dtype.
pub(crate) fn index_dtype_error(op: &str, what: &str, t: &TensorView) -> Error {
    crate::error::index_dtype(op, what, t.dtype())
}

/// The ops [`call`] knows, with whether each has an in-place form.
pub const OPS: &[(&str, bool)] = &[
    ("gather", false),
    ("scatter", true),
    ("scatter_add", true),
    ("scatter_reduce", true),
    ("index_select", false),
    ("take", false),
    ("take_along_dim", false),
    ("index_add", true),
    ("index_copy", true),
    ("index_fill", true),
    ("index_reduce", true),
    ("masked_select", false),
    ("masked_scatter", true),
    ("put", true),
    ("topk", false),
    ("sort", false),
    ("argsort", false),
    ("repeat_interleave", false),
    ("select_batched", false),
    ("scatter_groups", false),
    ("scatter_any", false),
    ("scatter_all", false),
    ("scatter_softmax", false),
    ("scatter_log_softmax", false),
    ("scatter_reduce_arg", false),
    ("segment_reduce", false),
    ("segment_arg_reduce", false),
    ("segment_any", false),
    ("segment_all", false),
    ("segment_softmax", false),
    ("segment_log_softmax", false),
    ("bincount", false),
    ("gather_broadcast", false),
    ("scatter_broadcast", true),
    ("scatter_add_broadcast", true),
    ("scatter_reduce_broadcast", true),
];

/// True when `op` has an in-place form (`scatter_`, `index_add_` ...).
///
/// ```
/// assert!(gather::dynamic::has_inplace("scatter_add"));
/// assert!(!gather::dynamic::has_inplace("gather"));
/// ```
pub fn has_inplace(op: &str) -> bool {
    OPS.iter().any(|(name, inplace)| *name == op && *inplace)
}

/// Runs `op` (PyTorch's name, one of the library's own ops below, or one of [`ONNX_OPS`]) out
/// of place and returns its named outputs (`output`, or `values`/`indices` for sort, topk and
/// the arg-reductions).
///
/// The indexing ops also take a bounds policy (see [`crate::ops::bounds`]): the arguments
/// `bounds` (`error`, the default, `wrap`, `clip`, `fill`, `drop`) and `fill_value` (with
/// `fill`).
///
/// Beyond PyTorch (every op is in [`OPS`]; tensors, then arguments):
/// - `select_batched`: `input`, `index`; `dim`, `batch_dims` (0);
/// - `scatter_groups` ([`crate::ops::reduce::scatter_groups`]): `src`, `index`; `dim`, `reduce`
///   (`sum`, `prod`, `mean`, `amax`, `amin`, `first`, `last`, `logsumexp`, `var`, `std`),
///   `correction` (var/std, default 1), `dim_size` (default: largest index + 1), `fill` (empty
///   groups: `identity`, the default, `zero`, `nan`, or a number);
/// - `scatter_any`, `scatter_all`: `src`, `index`; `dim`, `dim_size`, `fill`; bool output;
/// - `scatter_softmax`, `scatter_log_softmax`: `src`, `index`; `dim`;
/// - `scatter_reduce_arg`: `input`, `index`, `src`; `dim`, `reduce` (`amax`/`amin`),
///   `include_self` (true); outputs `values`, `indices` (`i64`, -1 where no source won);
/// - `segment_reduce`, `segment_arg_reduce` (outputs `values`, `indices`), `segment_any`,
///   `segment_all`, `segment_softmax`, `segment_log_softmax`
///   ([`crate::ops::segment`]): `src` and one 1-D tensor of `offsets` (CSR), `ids` (sorted) or
///   `lengths`; `dim` (default 0), `reduce`, `correction`, `fill` as above, `num_segments`
///   (with `ids`);
/// - `bincount`: `input` (integers), optional `weights`; `minlength` (0), `dim` (absent: 1-D
///   input as `torch.bincount`; an integer: along that axis);
/// - `gather_broadcast`, and with in-place forms `scatter_broadcast`, `scatter_add_broadcast`,
///   `scatter_reduce_broadcast` ([`crate::ops::broadcast`]): `input`, `index`, `src`; `dim`;
///   `reduce` and `include_self` (true) for the last.
///
/// ```
/// use gather::dynamic::{call, Arg, Args, Tensor, Tensors};
/// use ndarray::array;
/// let mut inputs = Tensors::new();
/// inputs.insert("src".into(), Tensor::from(array![1.0f64, 2.0, 5.0].into_dyn()));
/// inputs.insert("index".into(), Tensor::from(array![0i64, 0, 2].into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// args.set("reduce", Arg::Str("mean".into()));
/// args.set("fill", Arg::Str("nan".into()));
/// let out = call("scatter_groups", &args, &inputs).unwrap();
/// assert_eq!(out[0].1.to_f64_vec()[0], 1.5);
/// assert!(out[0].1.to_f64_vec()[1].is_nan()); // group 1 is empty
/// ```
pub fn call(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Vec<(String, Tensor)>> {
    let out = |t: Tensor| Ok(vec![("output".to_string(), t)]);
    if bounds::requested(args) {
        return out(bounds::call(op, args, inputs)?);
    }
    match op {
        "gather" => out(scatter::gather(args, inputs)?),
        "index_select" => out(index_ops::index_select(args, inputs)?),
        "take" => out(take::take(args, inputs)?),
        "take_along_dim" => out(take::take_along_dim(args, inputs)?),
        "select_batched" => out(take::select_batched(args, inputs)?),
        "masked_select" => out(masked::masked_select(args, inputs)?),
        "masked_scatter" => out(masked::masked_scatter(args, inputs)?),
        "topk" | "sort" => sort::sort_like(op, args, inputs),
        "argsort" => out(sort::argsort(args, inputs)?),
        "repeat_interleave" => out(sort::repeat_interleave(args, inputs)?),
        "scatter_groups" => out(groups::scatter_groups(args, inputs)?),
        "scatter_any" | "scatter_all" => out(groups::scatter_any_all(op, args, inputs)?),
        "scatter_softmax" | "scatter_log_softmax" => {
            out(groups::scatter_softmax(op, args, inputs)?)
        }
        "scatter_reduce_arg" => groups::scatter_reduce_arg(args, inputs),
        "segment_reduce"
        | "segment_arg_reduce"
        | "segment_any"
        | "segment_all"
        | "segment_softmax"
        | "segment_log_softmax" => groups::segment(op, args, inputs),
        "bincount" => out(groups::bincount(args, inputs)?),
        "gather_broadcast" => out(broadcast::gather_broadcast(args, inputs)?),
        _ if ONNX_OPS.contains(&op) => out(onnx::call(op, args, inputs)?),
        "scatter" | "scatter_add" | "scatter_reduce" => {
            out(scatter::scatter_fresh(op, args, inputs)?)
        }
        _ if has_inplace(op) => {
            // The copy kernel (parallel, tiled when it transposes), failing with an error where
            // the copy does not fit in memory.
            let x = input(inputs, "input")?;
            let mut target = with_view!(x, a => Tensor::from(crate::ops::try_to_owned(op, a)?));
            call_inplace(op, args, target.view_mut(), inputs)?;
            out(target)
        }
        _ => Err(unknown_op(op)),
    }
}

/// Runs the in-place form of `op` on `target` (which plays the part of `input`; the other inputs
/// come from `inputs`). On error `target` is unchanged.
///
/// ```
/// use gather::dynamic::{call_inplace, Arg, Args, Tensor, Tensors};
/// use ndarray::array;
/// let mut x = Tensor::from(array![1.0f32, 1.0, 1.0].into_dyn());
/// let mut inputs = Tensors::new();
/// inputs.insert("index".into(), Tensor::from(array![2i64, 2].into_dyn()));
/// inputs.insert("src".into(), Tensor::from(array![5.0f32, 7.0].into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// call_inplace("scatter_add", &args, x.view_mut(), &inputs).unwrap();
/// assert_eq!(x, Tensor::from(array![1.0f32, 1.0, 13.0].into_dyn()));
/// ```
pub fn call_inplace(
    op: &str,
    args: &Args,
    mut target: TensorViewMut<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    if bounds::requested(args) && has_inplace(op) {
        let with = WithInput {
            base: inputs,
            input: target.view(),
        };
        let result = bounds::call(op, args, &with)?;
        with_view_mut!(target, dst => assign(dst, &result));
        return Ok(());
    }
    let target = &mut target;
    match op {
        "scatter" | "scatter_add" | "scatter_reduce" => {
            scatter::scatter_family(op, args, target, inputs)
        }
        "index_add" | "index_copy" | "index_fill" | "index_reduce" => {
            index_ops::index_family(op, args, target, inputs)
        }
        "masked_scatter" => masked::masked_scatter_inplace(args, target, inputs),
        "put" => take::put(args, target, inputs),
        "scatter_broadcast" | "scatter_add_broadcast" | "scatter_reduce_broadcast" => {
            broadcast::scatter_family(op, args, target, inputs)
        }
        _ if OPS.iter().any(|(n, _)| *n == op) || ONNX_OPS.contains(&op) => {
            Err(Error::invalid(format!("{op} has no in-place form")))
        }
        _ => Err(unknown_op(op)),
    }
}

/// Copies `src`, a result of `dst`'s dtype and shape, into `dst`.
fn assign<T: TensorElem>(dst: &mut ArrayViewMutD<'_, T>, src: &Tensor) {
    let src = T::unwrap_ref(src)
        .unwrap_or_else(|| unreachable!("a bounded in-place call returns its target's dtype"));
    crate::kernels::copy::assign(dst, &src.view());
}

fn unknown_op(op: &str) -> Error {
    let mut names: Vec<&str> = OPS.iter().map(|(n, _)| *n).collect();
    names.extend_from_slice(ONNX_OPS);
    Error::invalid(format!("unknown op `{op}`"))
        .with_hint(format!("the ops are: {}", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array, Axis, array, s};

    #[test]
    fn a_materialised_broadcast_is_found_and_kept_compact() {
        // Rows constant along axis 1 (jnp.broadcast_to under jit), and along both axes.
        let rows = array![[3i32], [0], [3]]
            .broadcast((3, 20000))
            .unwrap()
            .to_owned()
            .into_dyn();
        let c = materialised_broadcast(&rows.view()).unwrap();
        assert_eq!(c.shape(), &[3, 1]);
        assert_eq!(spread(&c, &rows.view()), rows.view());
        let same = ndarray::ArrayD::from_elem(IxDyn(&[400, 500]), 7i64);
        assert_eq!(
            materialised_broadcast(&same.view()).unwrap().shape(),
            &[1, 1]
        );
        // Constant along the last axis of three but not the middle one, as an int32
        // `broadcast_to(idx[..., None], (a, b, c))` is; one differing value in the last block
        // leaves the last axis as it is.
        let last = Array::from_shape_fn((50, 40, 1), |(i, j, _)| (i * 7 + j) as i32 % 13)
            .broadcast((50, 40, 64))
            .unwrap()
            .to_owned()
            .into_dyn();
        assert_eq!(
            materialised_broadcast(&last.view()).unwrap().shape(),
            &[50, 40, 1]
        );
        let mut one_off = last.clone();
        one_off[[49, 39, 63]] = 99;
        assert!(materialised_broadcast(&one_off.view()).is_none());
        // A stride-0 axis stays length 1 in the copy, next to a found one (never expanded).
        let wide = array![[[1i64, 1]], [[2, 2]]];
        let view = wide.broadcast((2, 1 << 20, 2)).unwrap().into_dyn();
        assert_eq!(materialised_broadcast(&view).unwrap().shape(), &[2, 1, 1]);
        // Values that differ late along both axes, an already stride-0 index, small and empty
        // ones: nothing to do.
        let mut late = ndarray::ArrayD::from_elem(IxDyn(&[300, 300]), 1i64);
        late[[299, 299]] = 2;
        assert!(materialised_broadcast(&late.view()).is_none());
        let b = array![[5i64], [6]];
        assert!(materialised_broadcast(&b.broadcast((2, 90000)).unwrap().into_dyn()).is_none());
        let small = ndarray::ArrayD::from_elem(IxDyn(&[4, 5]), 7i64);
        assert!(materialised_broadcast(&small.view()).is_none());
        let empty = ndarray::ArrayD::<i64>::zeros(IxDyn(&[0, 3]));
        assert!(materialised_broadcast(&empty.view()).is_none());
    }

    /// Every layout a narrow index arrives in (row-major, transposed, reversed, sliced, 0-d,
    /// broadcast) widens to its own values, in its own shape.
    #[test]
    fn a_narrow_index_widens_to_its_values_in_every_layout() {
        let base = Array::from_shape_fn((6, 5, 4), |(i, j, k)| (i * 20 + j * 4 + k) as i32);
        let reversed = base.slice(s![..;-1, .., 1..;2]);
        let row = Array::from_shape_fn(4, |k| k as i32 * 3);
        let wide_row = row.broadcast((6, 5, 4)).unwrap();
        let zero_d = Array::from_elem(IxDyn(&[]), 7i32);
        let views = [
            base.view().into_dyn(),
            base.view().reversed_axes().into_dyn(),
            base.view().permuted_axes([1, 0, 2]).into_dyn(),
            reversed.into_dyn(),
            base.index_axis(Axis(2), 3).into_dyn(),
            wide_row.into_dyn(),
            zero_d.view(),
        ];
        for v in views {
            let wide = index_i64(&TensorView::I32(v.clone())).expect("an integer index");
            let got = wide.view();
            assert_eq!(got.shape(), v.shape());
            assert_eq!(got, v.mapv(i64::from), "{:?} {:?}", v.shape(), v.strides());
        }
        let bytes = Array::from_shape_fn((3, 300), |(i, j)| ((i * 7 + j) % 256) as u8);
        let t = bytes.t().into_dyn();
        let wide = index_i64(&TensorView::U8(t.view())).unwrap();
        assert_eq!(wide.view(), t.mapv(i64::from));
    }

    /// gather with an int32 index runs on it as it is, for every element width: the result and
    /// the errors are those of the int64 index.
    #[test]
    fn gather_with_an_int32_index_equals_the_int64_call() {
        let x = Array::from_shape_fn((5, 7, 3), |(i, j, k)| (i * 21 + j * 3 + k) as f64);
        let base = Array::from_shape_fn((4, 6, 3), |(i, j, k)| ((i * 5 + j * 3 + k) % 7) as i64);
        let tensors: Vec<Tensor> = vec![
            Tensor::from(x.mapv(|v| v as f32).into_dyn()),
            Tensor::from(x.clone().into_dyn()),
            Tensor::from(x.mapv(|v| v as i32).into_dyn()),
            Tensor::from(x.mapv(|v| v as i64).into_dyn()),
            Tensor::from(x.mapv(|v| v as u8).into_dyn()),
            Tensor::from(x.mapv(half::f16::from_f64).into_dyn()),
            Tensor::from(x.mapv(|v| v as i64 % 2 == 0).into_dyn()),
        ];
        let mut args = Args::default();
        args.set("dim", Arg::Int(1));
        let bad = |v: i64| {
            let mut i = base.clone();
            i[[2, 4, 1]] = v;
            i
        };
        for t in &tensors {
            for index in [base.clone(), bad(7), bad(-1), bad(-8)] {
                let mut calls = Vec::new();
                for wide in [true, false] {
                    let mut inputs = Tensors::new();
                    inputs.insert("input".into(), t.clone());
                    let i = if wide {
                        Tensor::from(index.clone().into_dyn())
                    } else {
                        Tensor::from(index.mapv(|v| v as i32).into_dyn())
                    };
                    inputs.insert("index".into(), i);
                    calls.push(call("gather", &args, &inputs));
                }
                assert_eq!(calls[0], calls[1], "{:?}", t.dtype());
            }
            // A transposed int32 index: any strides.
            let mut inputs = Tensors::new();
            inputs.insert("input".into(), t.clone());
            let across =
                Array::from_shape_fn((3, 6, 4), |(i, j, k)| ((i + 2 * j + 3 * k) % 7) as i32);
            let wide = across.mapv(i64::from).permuted_axes([2, 1, 0]).into_dyn();
            inputs.insert("index".into(), Tensor::from(wide));
            let want = call("gather", &args, &inputs).unwrap();
            let narrow = across.permuted_axes([2, 1, 0]).into_dyn();
            assert!(!narrow.is_standard_layout());
            inputs.insert("index".into(), Tensor::from(narrow));
            assert_eq!(
                call("gather", &args, &inputs).unwrap(),
                want,
                "{:?}",
                t.dtype()
            );
        }
    }

    #[test]
    fn a_views_owned_copy_is_row_major_with_its_values() {
        let a = Array::from_shape_fn((4, 3), |(i, j)| (i * 3 + j) as f32);
        let t = TensorView::F32(a.t().into_dyn()).to_tensor();
        let Tensor::F32(owned) = t else {
            panic!("the view's dtype")
        };
        assert!(owned.is_standard_layout());
        assert_eq!(owned, a.t().into_dyn());
    }
}
