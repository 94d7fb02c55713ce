//! Flat-position kernels: `take` reads and `put` writes elements addressed by their position in
//! the **logical row-major flattening** of an array, whatever its memory layout.
//!
//! A [`FlatLayout`] turns a flat position into a memory offset. It drops axes of length 1 and merges
//! neighbouring axes that are contiguous with each other, so a standard-layout array of any rank
//! (and a reversed 1-d view) is a single axis and costs one multiply per element; a transposed
//! matrix keeps two axes and costs one division. Inputs are never copied.
//!
//! ```text
//!   x = [[0, 1, 2], [3, 4, 5]] stored transposed (strides [1, 2])
//!   flat position 4 → coordinate (4 / 3, 4 % 3) = (1, 1) → offset 1·1 + 1·2 = 3 → value 4
//! ```
//!
//! `take` runs in parallel over the index positions (each output slot is written once); `put` runs
//! serially in row-major index order, so with duplicate positions the last write wins and sums
//! add in index order, deterministically.

use std::sync::atomic::{AtomicBool, Ordering};

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

use super::words::{self, Plain, Word};
use super::{SharedPtr, checked_position, position};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::plan::{GRAIN, Nest, par_for};

/// Maps row-major flat positions of an array to memory offsets (in elements, relative to the
/// array's first element).
#[derive(Debug, Clone)]
pub(crate) struct FlatLayout {
    /// `(len, stride)` of the merged axes, outermost first; no axis has length 1.
    axes: Vec<(usize, isize)>,
}

impl FlatLayout {
    /// The layout of an array with `shape` and `strides` (in elements).
    pub(crate) fn new(shape: &[usize], strides: &[isize]) -> Self {
        let mut axes: Vec<(usize, isize)> = Vec::with_capacity(shape.len());
        for (&len, &stride) in shape.iter().zip(strides) {
            if len == 1 {
                continue;
            }
            if let Some(last) = axes.last_mut() {
                if last.1 == stride.wrapping_mul(len as isize) {
                    last.0 *= len;
                    last.1 = stride;
                    continue;
                }
            }
            axes.push((len, stride));
        }
        FlatLayout { axes }
    }

    /// The memory offset of each flat position `p` (which must be below the number of elements
    /// for the offset to be inside the array), as a closure of plain values that the loops
    /// inline: one division by the innermost axis's length, and a loop over the axes between
    /// only for three axes or more. The outermost axis needs no remainder: below the number of
    /// elements, what is left of `p` there is already below its length.
    fn offsets(&self) -> impl Fn(usize) -> isize + Copy + Send + Sync + '_ {
        let (s0, middle, (l1, s1)) = match self.axes.as_slice() {
            [] => (0, &[][..], (1, 0)),
            &[only] => (0, &[][..], only),
            [first, middle @ .., last] => (first.1, middle, *last),
        };
        move |p| {
            let (q, r) = (p / l1, p % l1);
            let outer = if middle.is_empty() {
                q as isize * s0
            } else {
                outer_offset(middle, s0, q)
            };
            r as isize * s1 + outer
        }
    }
}

/// The offset of what is left of a flat position past the innermost axis, for a layout of three
/// axes or more: out of line, so that the loop of a two-axis layout stays as short as it can.
#[inline(never)]
fn outer_offset(middle: &[(usize, isize)], s0: isize, p: usize) -> isize {
    let (mut p, mut off) = (p, 0);
    for &(len, stride) in middle.iter().rev() {
        off += (p % len) as isize * stride;
        p /= len;
    }
    off + p as isize * s0
}

/// `out[q] = input.flatten()[index[q]]` into `out` (empty, with capacity for the index's length:
/// the caller allocates it, so that a size that cannot be had is an error, not an abort), in the
/// row-major order of the index's shape.
///
/// Preconditions (asserted, O(1)): the index was checked against `input.len()`, and `out` is empty
/// with enough capacity.
pub(crate) fn take<T, I>(
    input: &ArrayView<'_, T, IxDyn>,
    index: &CheckedIndex<'_, I>,
    out: Vec<T>,
) -> Vec<T>
where
    T: Plain,
    I: IndexElem,
{
    assert_eq!(
        index.size(),
        input.len(),
        "take kernel: index checked against another size"
    );
    // The policy's own loop: a checked value passes its check.
    let out = take_policy(
        &words::view(input),
        index.view(),
        index.bounds(),
        words::vec(out),
    );
    let out = out.expect("checked values are never out of range");
    // SAFETY: the kernel only copies words of `input`, i.e. elements of `T`, into `out`.
    unsafe { words::unvec(out) }
}

/// [`take`] under the strict or the wrapping policy with an index that has not been checked:
/// every value is checked as it is read (a predictable branch in the loop, instead of a separate
/// pass over the index before it: W9's index is 128 MB). Returns `None`, with the output dropped,
/// if any value is out of range (or the input is empty); the caller then finds the first such
/// value for the error ([`crate::index::check_bounds`]).
pub(crate) fn take_checking<T, I>(
    input: &ArrayView<'_, T, IxDyn>,
    index: &ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
    out: Vec<T>,
) -> Option<Vec<T>>
where
    T: Plain,
    I: IndexElem,
{
    let size = input.len();
    if size == 0 {
        return index.is_empty().then_some(out);
    }
    let (input, out) = (words::view(input), words::vec(out));
    let out = take_policy(&input, index, bounds, out);
    // SAFETY: the kernel only copies words of `input`, i.e. elements of `T`, into `out`.
    out.map(|out| unsafe { words::unvec(out) })
}

/// [`take_checking`] on words: one loop for values of `0..size` and one for `-size..size`, each
/// checking the values it reads. The modulo policy, which cannot fail, maps the values first.
fn take_policy<W: Word, I: IndexElem>(
    input: &ArrayView<'_, W, IxDyn>,
    index: &ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
    out: Vec<W>,
) -> Option<Vec<W>> {
    let size = input.len();
    // A value out of range reads element 0 instead (there is one) and sets the task's flag.
    match bounds {
        Bounds::Strict => take_impl(
            input,
            index,
            move |v: i64, bad: &mut bool| checked_position::<false>(v, size, bad),
            out,
        ),
        Bounds::Wrap => take_impl(
            input,
            index,
            move |v: i64, bad: &mut bool| checked_position::<true>(v, size, bad),
            out,
        ),
        Bounds::Modulo => {
            let positions = super::positions(index, bounds, size);
            take_policy(input, &positions.view(), Bounds::Strict, out)
        }
    }
}

fn take_impl<T, I, M>(
    input: &ArrayView<'_, T, IxDyn>,
    idx: &ArrayView<'_, I, IxDyn>,
    map: M,
    mut out: Vec<T>,
) -> Option<Vec<T>>
where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> usize + Copy + Sync + Send,
{
    let n = idx.len();
    assert!(
        out.is_empty() && out.capacity() >= n,
        "take kernel: output buffer too small"
    );
    if n == 0 {
        return Some(out);
    }
    let out_strides = crate::dims::Small::row_major(idx.shape());
    let nest = Nest::<2>::new(idx.shape(), [&out_strides, idx.strides()], None);
    let optr = SharedPtr(out.as_mut_ptr());
    let iptr = SharedPtr(idx.as_ptr() as *mut I);
    let xptr = SharedPtr(input.as_ptr() as *mut T);
    let layout = FlatLayout::new(input.shape(), input.strides());
    // An input larger than the caches: every read is a miss, so reads are prefetched a few
    // positions ahead and the pool is used from a smaller call size on.
    let random = input.len().saturating_mul(std::mem::size_of::<T>()) >= super::RANDOM_BYTES;
    let ops = (optr, iptr, xptr);
    let bad = AtomicBool::new(false);
    match layout.axes.as_slice() {
        [] => run_take(&nest, ops, random, &bad, map, |_| 0),
        &[(_, s)] => run_take(&nest, ops, random, &bad, map, move |p| p as isize * s),
        _ => run_take(&nest, ops, random, &bad, map, layout.offsets()),
    }
    if bad.into_inner() {
        return None;
    }
    // SAFETY: the nest covers every position of the index shape exactly once and the output
    // strides are the row-major strides of that shape, so each of the `n` slots was written once.
    unsafe { out.set_len(n) };
    Some(out)
}

/// The operands of a take: output, index, input.
type TakeOperands<T, I> = (SharedPtr<T>, SharedPtr<I>, SharedPtr<T>);

fn run_take<T, I, M, O>(
    nest: &Nest<2>,
    (out, idx, x): TakeOperands<T, I>,
    random: bool,
    bad: &AtomicBool,
    map: M,
    offset: O,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> usize + Copy + Sync + Send,
    O: Fn(usize) -> isize + Copy + Sync + Send,
{
    let [os, is] = nest.inner.strides;
    let ahead = random.then_some(super::PREFETCH_DISTANCE);
    let body = |base: [isize; 2], r: std::ops::Range<usize>| {
        // Whole copies (a closure that names `out.0` would capture the raw pointer alone).
        let (o, i, x) = (out, idx, x);
        // SAFETY: `base` plus `j * stride` for `j` in the inner range are the offsets of positions
        // inside the index's shape: in bounds for the index (its own view) and for the output (a
        // row-major buffer of that shape). `map` turns each index value into a flat position
        // `p < input.len()` (a checked value, or one it checks itself, mapping a value out of
        // range to 0 of a non-empty input); `offset` decomposes `p` into a coordinate below the
        // input's shape and sums coordinate × stride, which is how ndarray itself addresses that
        // element. Output positions are disjoint between tasks (the planner splits positions,
        // never duplicates them); the input and the index are only read.
        let flag = unsafe {
            take_row(
                o.0.offset(base[0]),
                i.0.offset(base[1]).cast_const(),
                x.0.cast_const(),
                [os, is],
                r,
                ahead,
                map,
                offset,
            )
        };
        if flag {
            bad.store(true, Ordering::Relaxed);
        }
    };
    if random {
        nest.for_each_grain(super::RANDOM_GRAIN, body);
    } else {
        nest.for_each(body);
    }
}

/// One piece `r` of a take: `op[j * os] = x[offset(map(ip[j * is]))]`, the input element of the
/// position `ahead` further on prefetched. Returns whether `map` set its flag. Not inlined, so
/// that the loop keeps its pointers, strides and `map`'s and `offset`'s captures in registers
/// (inlined into the planner's item loop, it reloaded them from the stack at every element).
///
/// # Safety
/// `op.offset(j * os)` writable and `ip.offset(j * is)` readable for every `j` in `r`;
/// `x.offset(offset(p))` readable for every `p` that `map` can return.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn take_row<T: Copy, I: IndexElem, M, O>(
    op: *mut T,
    ip: *const I,
    x: *const T,
    [os, is]: [isize; 2],
    r: std::ops::Range<usize>,
    ahead: Option<usize>,
    map: M,
    offset: O,
) -> bool
where
    M: Fn(i64, &mut bool) -> usize,
    O: Fn(usize) -> isize,
{
    let mut flag = false;
    // SAFETY: the function's contract; a prefetch names the input element of the position
    // `j + ahead` that `walk_ahead` names only while it is inside `r` (so its address is in
    // bounds too), and never faults.
    unsafe {
        let mut at = |j: usize| {
            x.offset(offset(map(
                (*ip.offset(j as isize * is)).to_i64(),
                &mut flag,
            )))
        };
        super::walk_ahead!(r, ahead, |j, next| {
            if let Some(n) = next {
                super::prefetch(at(n));
            }
            *op.offset(j as isize * os) = *at(j);
        });
    }
    flag
}

/// `update(&mut dst.flatten()[index[q]], src.flatten()[q])` for every `q`; the updates of each
/// position in the row-major order of the index (and of `src`, which is read in its own
/// row-major order), as a serial loop would apply them. A large call into a destination past the
/// caches runs in parallel, cut by ranges of destination positions (see `put_with`).
///
/// `reads`: the update reads the destination element (an accumulation), so that a destination
/// past the caches is requested ahead; a plain write is not (a store miss waits in the store
/// buffer, and the requests made plain `put` of 2M elements into 4M slower).
///
/// Preconditions (asserted, O(1)): the index was checked against `dst.len()`, and `src` has as
/// many elements as the index.
pub(crate) fn put<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    reads: bool,
    update: F,
) where
    A: Copy + Default + Send + Sync,
    T: Copy + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync,
{
    assert_eq!(
        index.size(),
        dst.len(),
        "put kernel: index checked against another size"
    );
    let idx = index.view();
    assert_eq!(
        idx.len(),
        src.len(),
        "put kernel: index and src sizes differ"
    );
    if idx.is_empty() {
        return;
    }
    let layout = FlatLayout::new(dst.shape(), dst.strides());
    let random = dst.len().saturating_mul(std::mem::size_of::<A>()) >= super::RANDOM_BYTES;
    let at = PutAt {
        base: SharedPtr(dst.as_mut_ptr()),
        bounds: index.bounds(),
        size: index.size(),
        ahead: (reads && random).then_some(super::PREFETCH_DISTANCE),
        parts: if random && idx.len() >= 2 * GRAIN {
            rayon::current_num_threads().min(PUT_PARTS)
        } else {
            1
        },
    };
    // A contiguous (or one-axis) dst addresses position `p` without the division by the axis
    // length that the general layout does per element. A dst of one element (no axis) is the
    // one-axis loop with stride 0, rather than a third instance of the loops.
    let stride = match layout.axes.as_slice() {
        [] => Some(0),
        &[(_, stride)] => Some(stride),
        _ => None,
    };
    match stride {
        Some(stride) => put_with(&at, idx, src, update, move |p| p as isize * stride),
        None => put_with(&at, idx, src, update, layout.offsets()),
    }
}

/// The most tasks a large [`put`] is cut into. Each task reads the whole index and writes its own
/// range of `dst`'s positions; more tasks would each spend more on reading than on writing.
const PUT_PARTS: usize = 8;

/// Where [`put`] writes: `dst`'s first element, how index values become positions, how far ahead
/// destinations are requested (`None`: not at all), and into how many ranges of positions,
/// each its own task, the writes are cut.
struct PutAt<A> {
    base: SharedPtr<A>,
    bounds: Bounds,
    size: usize,
    ahead: Option<usize>,
    parts: usize,
}

/// [`put`]'s loops, with `offset` mapping a flat position of `dst` to its memory offset.
///
/// A contiguous index and src are cut by destination, not by index: task `t` walks the whole
/// index in order and applies the updates whose position falls in its range `lo..lo + span` of
/// `dst`'s positions. Every position then takes its updates in index order from one task, as
/// in the serial loop (the last write wins, sums add in index order), whatever the number of
/// tasks. An update outside the task's range goes to a scratch slot instead of being skipped,
/// a select of the address where a branch on each (random) position mispredicted.
fn put_with<A, T, I, F, O>(
    at: &PutAt<A>,
    idx: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    update: F,
    offset: O,
) where
    A: Copy + Default + Send + Sync,
    T: Copy + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync,
    O: Fn(usize) -> isize + Sync,
{
    let (base, bounds, size) = (at.base, at.bounds, at.size);
    let (Some(iv), Some(sv)) = (idx.as_slice(), src.as_slice()) else {
        idx.iter().zip(src.iter()).for_each(|(&v, &s)| {
            let p = position(bounds, v.to_i64(), size) as usize;
            // SAFETY: `v` was checked against `dst.len()`, so `p < dst.len()` and `offset(p)` is
            // the memory offset of an element of `dst` (see `FlatLayout`). `dst` is borrowed
            // mutably for the whole call of `put` and this loop is serial, so the reference is
            // unique while `update` runs.
            unsafe { update(&mut *base.0.offset(offset(p)), s) }
        });
        return;
    };
    assert_eq!(iv.len(), sv.len(), "put kernel: index and src sizes differ");
    let span = size.div_ceil(at.parts);
    let part = |t: usize| {
        // The whole `SharedPtr` (a closure naming `base.0` would capture the raw pointer alone).
        let dst = base;
        let lo = t * span;
        let mut scratch = [A::default(); 8];
        let to = Targets {
            iv,
            bounds,
            size,
            lo,
            span,
            dst: dst.0,
            spare: scratch.as_mut_ptr(),
            offset: &offset,
        };
        // A destination past the caches is a miss per update: the element PREFETCH_DISTANCE
        // positions ahead is requested, as the gathers do.
        super::walk_ahead!(0..iv.len(), at.ahead, |q, next| {
            if let Some(n) = next {
                super::prefetch(to.at(n).cast_const());
            }
            // SAFETY: `to.at(q)` is the element of `dst` at position `p` (checked below
            // `dst.len()`, addressed as `FlatLayout` does) when `p` is in this task's range,
            // else a slot of this task's own scratch. Tasks own disjoint ranges of positions,
            // and distinct positions are distinct elements of the (mutably borrowed, so not
            // self-overlapping) `dst`: no element is referenced by two tasks at once, and the
            // loop of one task is serial.
            unsafe { update(&mut *to.at(q), sv[q]) }
        });
    };
    if at.parts > 1 {
        par_for(at.parts, &part);
    } else {
        part(0);
    }
}

/// Where the updates of one task of [`put_with`] write. A method rather than a closure, so that
/// it can be inlined by force: left out of line (as a closure of a few layouts was), its call
/// cost a `put` into a transposed destination a third of its time.
struct Targets<'a, A, I, O> {
    iv: &'a [I],
    bounds: Bounds,
    size: usize,
    lo: usize,
    span: usize,
    dst: *mut A,
    spare: *mut A,
    offset: &'a O,
}

impl<A, I: IndexElem, O: Fn(usize) -> isize> Targets<'_, A, I, O> {
    /// The element of `dst` that update `q` writes, or a slot of the task's scratch where that
    /// position is another task's.
    #[inline(always)]
    fn at(&self, q: usize) -> *mut A {
        let p = position(self.bounds, self.iv[q].to_i64(), self.size) as usize;
        let mine = p.wrapping_sub(self.lo) < self.span;
        // In bounds either way: `p < size`, the checked index's bound, is a position of
        // `dst`, and `q % 8` a slot of `scratch`.
        let d = self.dst.wrapping_offset((self.offset)(p));
        if mine {
            d
        } else {
            self.spare.wrapping_add(q % 8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use crate::plan::GRAIN;
    use ndarray::{Array3, s};

    #[test]
    fn flat_layout_addresses_the_logical_row_major_order() {
        let x = Array3::from_shape_fn((3, 4, 5), |(a, b, c)| (a * 100 + b * 10 + c) as i32);
        let views = [
            x.view().into_dyn(),
            x.slice(s![..;-1, .., 1..]).into_dyn(),
            x.view().permuted_axes([2, 0, 1]).into_dyn(),
            x.slice(s![.., 2..3, ..;-2]).into_dyn(),
        ];
        for v in views {
            let layout = FlatLayout::new(v.shape(), v.strides());
            for (p, want) in v.iter().enumerate() {
                // SAFETY (test): `p < v.len()`, so the offset is inside `v`.
                let got = unsafe { *v.as_ptr().offset(layout.offsets()(p)) };
                assert_eq!(
                    got,
                    *want,
                    "shape {:?} strides {:?} p {p}",
                    v.shape(),
                    v.strides()
                );
            }
        }
    }

    #[test]
    fn contiguous_axes_merge_into_one() {
        let l = FlatLayout::new(&[2, 1, 3, 4], &[12, 99, 4, 1]);
        assert_eq!(l.axes, vec![(24, 1)]);
        let t = FlatLayout::new(&[4, 3], &[1, 4]);
        assert_eq!(t.axes, vec![(4, 1), (3, 4)]);
    }
    #[test]
    fn checking_take_refuses_any_value_out_of_range_of_its_policy() {
        use crate::index::Bounds;
        // A small input (the plain loop) and 8 MiB (the prefetched one), contiguous and transposed.
        let small = ndarray::Array2::from_shape_fn((30, 40), |(a, b)| (a * 40 + b) as i32);
        let (rows, cols) = (sized(2048, 64), sized(1024, 64));
        let big = ndarray::Array2::from_shape_fn((rows, cols), |(a, b)| (a * cols + b) as i32);
        for x in [
            small.view().into_dyn(),
            big.view().into_dyn(),
            big.t().into_dyn(),
        ] {
            let n = x.len() as i64;
            let flat: Vec<i32> = x.iter().copied().collect();
            let m = sized(50_000, 600);
            let base = ndarray::Array1::from_shape_fn(m, |k| (k as i64 * 7919) % n).into_dyn();
            for (bounds, bad) in [
                (Bounds::Strict, vec![-1, n, i64::MIN, i64::MAX]),
                (Bounds::Wrap, vec![-n - 1, n, i64::MIN, i64::MAX]),
            ] {
                // In range (a negative value too, under wrap): the flat read.
                let mut ok = base.clone();
                if bounds == Bounds::Wrap {
                    ok[[3]] = -n;
                    ok[[m - 1]] = -1;
                }
                let want: Vec<i32> = ok
                    .iter()
                    .map(|&i| flat[(if i < 0 { i + n } else { i }) as usize])
                    .collect();
                let got = take_checking(&x, &ok.view(), bounds, Vec::with_capacity(m));
                assert!(got == Some(want), "{bounds:?}: in-range values");
                for &value in &bad {
                    for at in [0, m / 2, m - 1] {
                        let mut idx = base.clone();
                        idx[[at]] = value;
                        for threads in [1, 2] {
                            let got = crate::kernels::test_pool(threads).install(|| {
                                take_checking(&x, &idx.view(), bounds, Vec::with_capacity(m))
                            });
                            assert!(
                                got.is_none(),
                                "{bounds:?}: {value} at {at} accepted ({threads} threads)"
                            );
                        }
                    }
                }
            }
        }
        // No value fits an empty input; an empty index takes nothing from it.
        let empty = ndarray::Array1::<i32>::zeros(0).into_dyn();
        let zero = ndarray::Array1::<i64>::zeros(1).into_dyn();
        assert!(take_checking(&empty.view(), &zero.view(), Bounds::Wrap, Vec::new()).is_none());
        let none = ndarray::Array1::<i64>::zeros(0).into_dyn();
        let got = take_checking(&empty.view(), &none.view(), Bounds::Strict, Vec::new());
        assert_eq!(got, Some(Vec::new()));
    }

    #[test]
    fn take_of_a_large_input_is_the_flat_read_in_any_layout_and_pool() {
        // 8 MiB of i32: the prefetched loop, in parallel from a smaller call size on.
        let (rows, cols) = (sized(2048, 64), sized(1024, 64));
        let x = ndarray::Array2::from_shape_fn((rows, cols), |(a, b)| (a * cols + b) as i32);
        let mut seed = 3u64;
        let n = x.len();
        let idx = ndarray::Array2::from_shape_simple_fn((sized(300, 20), sized(170, 30)), || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % (2 * n as u64)) as i64 - n as i64
        })
        .into_dyn();
        let views = [
            x.view().into_dyn(),
            x.slice(s![..;-1, ..]).into_dyn(),
            x.t().into_dyn(),
        ];
        for v in views {
            let flat: Vec<i32> = v.iter().copied().collect();
            for index in [idx.view(), idx.t()] {
                let want: Vec<i32> = index
                    .iter()
                    .map(|&i| flat[if i < 0 { i + n as i64 } else { i } as usize])
                    .collect();
                for threads in [1, 2, 3] {
                    let got = crate::kernels::test_pool(threads).install(|| {
                        let checked = CheckedIndex::new(
                            "take",
                            index.clone(),
                            0,
                            n,
                            crate::index::Bounds::Wrap,
                        )
                        .unwrap();
                        let got = take(&v, &checked, Vec::with_capacity(checked.view().len()));
                        let fused = take_checking(
                            &v,
                            &index,
                            crate::index::Bounds::Wrap,
                            Vec::with_capacity(index.len()),
                        );
                        assert!(fused.as_ref() == Some(&got), "checking kernel differs");
                        got
                    });
                    assert!(got == want, "strides {:?} threads {threads}", v.strides());
                }
            }
        }
    }

    #[test]
    fn large_puts_apply_each_positions_updates_in_index_order_in_any_layout_and_pool() {
        // 8 MiB of f32 and an index of 2 * GRAIN + 1 values, half of them into the first 64
        // positions (many duplicates, some from both ends of the index): the loop cut into
        // ranges of positions. The last write must win and sums must add in index order
        // (bitwise: f32 additions of values of mixed magnitude), for any number of tasks.
        let (rows, cols) = (sized(2048, 64), sized(1024, 64));
        let n = rows * cols;
        let m = 2 * GRAIN + 1;
        let mut seed = 5u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let index: Vec<i64> = (0..m)
            .map(|q| {
                let r = next();
                let v = if q % 2 == 0 { r % 64 } else { r % n as u64 } as i64;
                if r % 3 == 0 { v - n as i64 } else { v }
            })
            .collect();
        let src: Vec<f32> = (0..m)
            .map(|_| (next() % 2001) as f32 * 0.37 - 300.0)
            .collect();
        let start =
            ndarray::Array2::from_shape_fn((rows, cols), |(a, b)| ((a * 7 + b) % 13) as f32 * 1e5);
        let index = ndarray::ArrayView1::from(&index[..]).into_dyn();
        let src = ndarray::ArrayView1::from(&src[..]).into_dyn();
        // dst as it is, or transposed (a layout of two axes, addressed through the division).
        fn got_views(
            a: &mut ndarray::Array2<f32>,
            layout: usize,
        ) -> ndarray::ArrayViewMutD<'_, f32> {
            match layout {
                1 => a.view_mut().reversed_axes().into_dyn(),
                _ => a.view_mut().into_dyn(),
            }
        }
        for accumulate in [false, true] {
            for layout in 0..2 {
                let mut want = start.clone();
                {
                    // The plain loop: flat row-major positions of the view, in index order.
                    let mut flat: Vec<f32> = got_views(&mut want, layout).iter().copied().collect();
                    for (&v, &s) in index.iter().zip(src.iter()) {
                        let p = if v < 0 { v + n as i64 } else { v } as usize;
                        flat[p] = if accumulate { flat[p] + s } else { s };
                    }
                    got_views(&mut want, layout)
                        .iter_mut()
                        .zip(flat)
                        .for_each(|(o, v)| *o = v);
                }
                for threads in [1, 2, 3] {
                    let mut got = start.clone();
                    crate::kernels::test_pool(threads).install(|| {
                        let checked = CheckedIndex::new(
                            "put",
                            index.clone(),
                            0,
                            n,
                            crate::index::Bounds::Wrap,
                        )
                        .unwrap();
                        let mut d = got_views(&mut got, layout);
                        put(&mut d, &checked, &src, accumulate, |d: &mut f32, s: f32| {
                            *d = if accumulate { *d + s } else { s }
                        });
                    });
                    assert!(
                        got == want,
                        "accumulate {accumulate} layout {layout} threads {threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn modular_take_maps_any_value_onto_the_flat_read() {
        use crate::index::Bounds;
        let x = ndarray::Array2::from_shape_fn((7, 5), |(a, b)| (a * 5 + b) as i32);
        let n = x.len() as i64;
        let flat: Vec<i32> = x.t().iter().copied().collect();
        let idx = ndarray::Array2::from_shape_fn((9, 4), |(a, b)| (a as i64 - 4) * 13 + b as i64);
        for index in [idx.view().into_dyn(), idx.t().into_dyn()] {
            let want: Vec<i32> = index
                .iter()
                .map(|&i| flat[i.rem_euclid(n) as usize])
                .collect();
            let x = x.t().into_dyn();
            let got = take_checking(&x, &index, Bounds::Modulo, Vec::with_capacity(36));
            assert_eq!(got.as_ref(), Some(&want), "checking");
            let checked = CheckedIndex::new("take", index.clone(), 0, 35, Bounds::Modulo).unwrap();
            assert_eq!(take(&x, &checked, Vec::with_capacity(36)), want, "checked");
        }
    }
}
