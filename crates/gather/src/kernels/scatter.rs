//! The write kernel: `update(&mut dst[p with p[dim] := index[p]], src[p])` over the index's shape.
//!
//! scatter (set, value form, legacy reduce), scatter_add, scatter_reduce, index_add, index_copy,
//! index_fill and index_reduce all run here; the last four pass an index broadcast over the non-dim
//! axes. The planner keeps `dim` as the serial axis: positions that can hit the same destination
//! element differ only in their `dim` coordinate, so they are visited by one thread in ascending
//! order. That makes every result deterministic, whatever the number of threads: `scatter` keeps the
//! last write in index order, and float sums add in index order, as PyTorch's CPU kernel does.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

use super::segment::Segments;
use super::words::{self, Plain};
use super::{SharedPtr, checked_position, position};
use crate::element::{DType, Element};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::plan::Nest;

/// A reduction: every destination element the index reaches is first set to `init` (when given:
/// `include_self = false`), then `update(dst_elem, src_elem)` runs for every position of the index,
/// in index order per destination element.
///
/// Preconditions (asserted, O(rank)): `dst`, `index` and `src` have the same rank; `dim` is one of
/// its axes; `index.shape[d] <= src.shape[d]` for every `d`; `index.shape[d] <= dst.shape[d]` for
/// every `d != dim`; the index was checked against `dst.shape[dim]`.
pub(crate) fn scatter_reduce<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    init: Option<A>,
    update: F,
) where
    A: Plain,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    scatter_impl(dst, dim, index, src, init, false, update)
}

/// Where the updates of a reduction go: along `dim` at the positions of a checked index, or
/// along `dim` by segments built beforehand (a reusable plan).
pub(crate) enum Target<'s, 'a, I: IndexElem> {
    /// [`scatter_reduce`] with this index.
    Index {
        dim: usize,
        index: &'s CheckedIndex<'a, I>,
    },
    /// [`scatter_rows`] with these destination rows (one per position along `dim`, each below
    /// `size`), grouped into `segs` when the grouped loop is the one that runs.
    Rows {
        dim: usize,
        ids: &'s [u32],
        size: usize,
        segs: &'s std::sync::OnceLock<Segments>,
    },
    /// [`scatter_checking`] with this unchecked index, against a `dim` of `size`; `bad` is set if a
    /// value is out of range (and the destination must then be discarded).
    Checking {
        dim: usize,
        index: &'s ArrayView<'a, I, IxDyn>,
        size: usize,
        bad: &'s AtomicBool,
    },
}

impl<I: IndexElem> Target<'_, '_, I> {
    /// Runs the reduction (see [`scatter_reduce`] and [`scatter_rows`], whose preconditions
    /// are asserted).
    pub(crate) fn reduce<A, T, F>(
        &self,
        dst: &mut ArrayViewMut<'_, A, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
        init: Option<A>,
        update: F,
    ) where
        A: Plain,
        T: Copy + Send + Sync,
        F: Fn(&mut A, T) + Sync + Send,
    {
        match *self {
            Target::Index { dim, index } => scatter_reduce(dst, dim, index, src, init, update),
            Target::Rows {
                dim,
                ids,
                size,
                segs,
            } => scatter_rows(dst, dim, ids, size, segs, src, init, update),
            Target::Checking {
                dim,
                index,
                size,
                bad,
            } => scatter_checking(dst, dim, index, size, src, init, bad, update),
        }
    }
}

/// The general element loop of [`scatter_reduce`] (a plain write is `init = None` and
/// `update = |a, s| *a = s`), checking each index value as it goes, for a destination that is a
/// fresh copy: an out-of-range value updates row 0 instead (in range: `size > 0`) and sets `bad`,
/// and the caller then drops the destination and reports the first bad value. This saves the
/// separate pass over the index that a [`CheckedIndex`] costs; it runs the element loop even for a
/// row index, whose grouped loops the checked kernels pick, so callers offer it only for indices
/// that are not ([`is_row_index`]).
///
/// Preconditions as [`scatter_reduce`], but for the index check; and `size == dst.shape[dim] > 0`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_checking<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    size: usize,
    src: &ArrayView<'_, T, IxDyn>,
    init: Option<A>,
    bad: &AtomicBool,
    update: F,
) where
    A: Plain,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    check_preconditions(dst.shape(), dim, index.shape(), size, src.shape());
    assert!(size > 0, "scatter kernel: checking against an empty dim");
    if index.is_empty() {
        return;
    }
    if let Some(v) = init {
        let ones = crate::dims::splat(&v, index.shape());
        // SAFETY: the plain write stores only copies of `v`, an `A`.
        let mut words = unsafe { words::view_mut(dst) };
        let ones = words::view(&ones);
        general_mapped(&mut words, dim, index, &ones, size, bad, set::<A::Word>);
    }
    general_mapped(dst, dim, index, src, size, bad, update);
}

/// [`scatter_checking`] into a fresh destination: `out` (empty, with room for `from.len()`
/// elements) becomes a row-major copy of `from` with the scatter applied, and is returned with
/// that length. Where the index spans the destination on every axis but `dim` and `from` is
/// contiguous along its last axis, each task copies
/// the part of `from` it is about to update, whole along `dim`, just before updating it, so the
/// destination is written once and updated while it is still in cache, instead of a separate
/// parallel copy followed by a second pass over the destination (the out-of-place `scatter_add`
/// of W11b, `self[1000,1000]`, `index[1000,500]`, and the plain scatter of W11a; see
/// `scatter_fresh_fused`):
///
/// ```text
///   task rows 0..k:   out[0] = from[0]; out[0][index[0][j]] op= src[0][j] (j = 0..500)
///                     out[1] = from[1]; out[1][index[1][j]] op= src[1][j] ...
/// ```
///
/// Otherwise it copies first and then runs [`scatter_checking`]. A value out of range sets `bad`
/// (the caller then drops the result), as there. No reduction with an `init`: only updates that
/// read or write just their own destination element.
///
/// Preconditions as [`scatter_checking`], with `from` for the destination; `out` empty with room
/// for `from.len()` elements (asserted).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_checking_fresh<A, T, I, F>(
    from: &ArrayView<'_, A, IxDyn>,
    mut out: Vec<A>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    bad: &AtomicBool,
    update: F,
) -> Vec<A>
where
    A: Plain,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let n = from.len();
    assert!(
        out.is_empty() && out.capacity() >= n,
        "scatter kernel: output buffer too small"
    );
    let size = from.shape().get(dim).copied().unwrap_or(0);
    let spans = index.ndim() == from.ndim()
        && (0..from.ndim()).all(|d| d == dim || index.shape()[d] == from.shape()[d]);
    // A `from` strided along its rows (a transposed input) is copied apart: the copy kernel's
    // blocks read and write whole lines, the fused copy one element of each.
    let rows_contiguous = crate::dims::inner_stride(from.shape(), from.strides())
        .is_none_or(|s| s.unsigned_abs() == 1);
    if !spans || index.is_empty() || size == 0 || !rows_contiguous {
        let mut out = super::copy::copy_into(from, out);
        let mut dst = ArrayViewMut::from_shape(from.shape(), &mut out[..])
            .expect("a row-major buffer of the shape's length");
        if size > 0 {
            scatter_checking(&mut dst, dim, index, size, src, None, bad, update);
        }
        return out;
    }
    check_preconditions(from.shape(), dim, index.shape(), size, src.shape());
    let strides = crate::dims::row_major_strides(from.shape());
    general_raw(
        SharedPtr(out.as_mut_ptr()),
        &strides,
        Some(from),
        dim,
        index,
        src,
        size,
        bad,
        update,
    );
    // SAFETY: every element of the `n` was written. The index spans the destination on every
    // axis but `dim` (checked above), so the planner's tasks cover every non-dim coordinate of the
    // destination, each once; and each task first copied, for its coordinates, every position
    // along `dim` (`from.shape()[dim]` of them) before updating any (see `run`).
    unsafe { out.set_len(n) };
    out
}

/// [`scatter_checking_fresh`] with a plain write (the last update in index order wins), run on
/// words of `T`'s width.
pub(crate) fn scatter_checking_fresh_set<T: Plain, I: IndexElem>(
    from: &ArrayView<'_, T, IxDyn>,
    out: Vec<T>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    bad: &AtomicBool,
) -> Vec<T> {
    let (from, src) = (words::view(from), words::view(src));
    let out = scatter_checking_fresh(
        &from,
        words::vec(out),
        dim,
        index,
        &src,
        bad,
        set::<T::Word>,
    );
    // SAFETY: the copy and the plain write store only words of `from` and `src`, i.e. elements of
    // `T`.
    unsafe { words::unvec(out) }
}

/// Where each task of [`run`] copies its part of a fresh destination from first (see
/// [`scatter_checking_fresh`]), along `dim`: the other strides of `from` are the nest's fourth
/// operand.
struct FillAlong<A> {
    from: SharedPtr<A>,
    /// `from`'s stride along `dim`.
    stride: isize,
    /// The destination's length along `dim`.
    len: usize,
}

// Not derived: a derive would ask `A: Copy`, and the kernels also write non-`Copy` accumulators.
impl<A> Clone for FillAlong<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for FillAlong<A> {}

/// Whether the checked kernels would take a grouped row loop for this index (see
/// [`scatter_checking`]).
pub(crate) fn is_row_index<I: IndexElem>(index: &ArrayView<'_, I, IxDyn>, dim: usize) -> bool {
    rows_of(index, dim).is_some_and(|slice| slice >= SEGMENT_MIN_SLICE)
}

/// Whether a reduction of `index` along `dim` into a destination of `rows` rows, of
/// `elem`-byte elements that the update does not convert, with an initial value or not
/// (`init`), takes the source-order walk of slices of 2 to 7 elements ([`route`]), which wants
/// its values checked first.
pub(crate) fn walks_narrow_rows<I: IndexElem>(
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    rows: usize,
    elem: usize,
    init: bool,
) -> bool {
    let marks = if init { Marks::Init } else { Marks::None };
    row_loop(index, dim, rows, marks, (elem, elem))
        .is_some_and(|(slice, _)| slice < SEGMENT_MIN_SLICE)
}

/// The row loop a scatter of `index` along `dim` into `rows` rows takes, decided from the
/// shapes alone (see [`route`]): `None` for the element loop, else the slices' length and
/// whether the walk in source order ([`direct_fits`]) or the grouped loop runs.
fn row_loop<I: IndexElem>(
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    rows: usize,
    marks: Marks,
    sizes: (usize, usize),
) -> Option<(usize, bool)> {
    let slice = rows_of(index, dim)?;
    let slice_shape = without(index.shape(), dim);
    let direct = direct_fits(index.shape()[dim], &slice_shape, rows, marks, sizes);
    // Narrower slices are not worth grouping, but the plain walk in source order takes those
    // of 2 and more faster than the element loop, which splits a row's few elements between
    // the threads. Single elements stay in the element loop, whose steps cost less.
    let walked = direct && marks != Marks::LastOnly && slice >= 2;
    (slice >= SEGMENT_MIN_SLICE || walked).then_some((slice, direct))
}

/// What a row walk keeps per destination row: nothing; whether the row was reached, to set it
/// to an initial value at its first update (`include_self = false`); or which write was the
/// last (a plain write, walked backwards).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Marks {
    None,
    Init,
    LastOnly,
}

impl Marks {
    fn of<A>(init: Option<A>, last_only: bool) -> Marks {
        match (init, last_only) {
            (_, true) => Marks::LastOnly,
            (Some(_), false) => Marks::Init,
            (None, false) => Marks::None,
        }
    }
}

/// The length of the slices of `index` when it is a row index with enough work for the row
/// loops: constant along every axis but `dim`, at least two positions along it (no more than
/// `u32` counts), at least [`crate::plan::GRAIN`] elements in all, and each slice one run or
/// runs of at least [`ROW_MIN_RUN`] elements.
fn rows_of<I: IndexElem>(index: &ArrayView<'_, I, IxDyn>, dim: usize) -> Option<usize> {
    let e = index.shape()[dim];
    let constant =
        (0..index.ndim()).all(|d| d == dim || index.shape()[d] == 1 || index.strides()[d] == 0);
    // A slice is every axis but `dim`: `outer` runs of `run` elements.
    let outer: usize = index.shape()[..dim].iter().product();
    let run: usize = index.shape()[dim + 1..].iter().product();
    let slice = outer * run;
    let rows = constant
        && (outer == 1 || run >= ROW_MIN_RUN)
        && e >= 2
        && u32::try_from(e).is_ok()
        && e.saturating_mul(slice) >= crate::plan::GRAIN;
    rows.then_some(slice)
}

/// The shortest run of a row loop's slices (the elements after `dim`, where there are axes
/// before it). A row loop updates a whole slice per position along `dim`; a slice of short runs
/// (a column of a row-major matrix, `index_add` along its last dim) costs a line of dst and of
/// src per run, where the element loop reads src in order and keeps each destination row in the
/// caches: 10x faster for a column of one element, even at runs of 8 (docs/performance.md,
/// "Row loops of short runs").
const ROW_MIN_RUN: usize = 8;

/// The update of a plain write. A function item, not a closure: a closure written inside a
/// generic function is a type of its own for each instance of that function, and so would be
/// every kernel instance it is passed to.
#[inline(always)]
pub(crate) fn set<A: Copy>(a: &mut A, s: A) {
    *a = s;
}

/// The element update of a reduction, for [`Target::reduce_as`] and [`scatter_checking_fresh_as`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Update {
    /// `a + s` (wrapping for integers, or for bool).
    Add,
    /// `a * s` (wrapping for integers, and for bool).
    Mul,
    /// PyTorch's NaN-propagating max.
    Max,
    /// PyTorch's NaN-propagating min.
    Min,
}

impl Update {
    /// The update that does the same on the bytes 0 and 1 of a `bool` (or and and are max and
    /// min), or `self` for every other type.
    fn on_bits_of<T: Element>(self) -> Update {
        match self {
            Update::Add if T::DTYPE == DType::Bool => Update::Max,
            Update::Mul if T::DTYPE == DType::Bool => Update::Min,
            u => u,
        }
    }
}

// The updates are function items generic over the accumulator alone: each is compiled once per
// type it runs in, whoever calls it (a closure would be a type of its own in every generic
// function that writes it).
#[inline(always)]
pub(crate) fn add<A: Element>(a: &mut A, s: A) {
    *a = A::from_acc(A::acc_add(a.to_acc(), s.to_acc()));
}
#[inline(always)]
pub(crate) fn mul<A: Element>(a: &mut A, s: A) {
    *a = A::from_acc(A::acc_mul(a.to_acc(), s.to_acc()));
}
#[inline(always)]
fn max<A: Element>(a: &mut A, s: A) {
    *a = A::elem_max(*a, s);
}
#[inline(always)]
fn min<A: Element>(a: &mut A, s: A) {
    *a = A::elem_min(*a, s);
}

/// The sum of a `T` into its wider accumulator (`f16`/`bf16` into `f32`, rounded once at the end).
#[inline(always)]
pub(crate) fn add_wide<T: Element>(a: &mut T::Acc, s: T) {
    *a = T::acc_add(*a, s.to_acc());
}

impl<I: IndexElem> Target<'_, '_, I> {
    /// [`Target::reduce`] with `update` in `T`: on the bits of [`Element::Bits`] where `T` says so
    /// (the signed integers' sums and products, every reduction of `bool`), so that the kernels
    /// are compiled once per width for them.
    pub(crate) fn reduce_as<T: Element>(
        &self,
        dst: &mut ArrayViewMut<'_, T, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
        init: Option<T>,
        update: Update,
    ) {
        // `if` on the type's constants alone, so that what a type runs on bits is not compiled
        // for it.
        match update {
            Update::Add | Update::Mul => {
                if T::SUM_ON_BITS {
                    self.reduce_on_bits(dst, src, init, update)
                } else if update == Update::Add {
                    self.reduce(dst, src, init, add::<T>)
                } else {
                    self.reduce(dst, src, init, mul::<T>)
                }
            }
            Update::Max | Update::Min => {
                self.reduce_order_as(dst, src, init, update == Update::Max)
            }
        }
    }

    /// [`Target::reduce_as`] for `amax` (`is_max`) or `amin` alone: what `f16`/`bf16` run in their
    /// own type (their sums and products run in `f32`), so that their in-type sums are not
    /// compiled.
    pub(crate) fn reduce_order_as<T: Element>(
        &self,
        dst: &mut ArrayViewMut<'_, T, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
        init: Option<T>,
        is_max: bool,
    ) {
        let update = if is_max { Update::Max } else { Update::Min };
        if T::ORDER_ON_BITS {
            self.reduce_on_bits(dst, src, init, update)
        } else if is_max {
            self.reduce(dst, src, init, max::<T>)
        } else {
            self.reduce(dst, src, init, min::<T>)
        }
    }

    fn reduce_on_bits<T: Element>(
        &self,
        dst: &mut ArrayViewMut<'_, T, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
        init: Option<T>,
        update: Update,
    ) {
        // SAFETY: the updates write sums and products of integers, whose every bit pattern is a
        // value of the signed type too, or (`bool`: its sums and products are max and min here)
        // the max or min of bytes that are each 0 or 1, being `dst`'s, `src`'s or `init`'s bools.
        let mut dst = unsafe { words::bits_mut(dst) };
        let src = words::bits(src);
        let init = init.map(words::bits_of);
        match update.on_bits_of::<T>() {
            Update::Add => self.reduce(&mut dst, &src, init, add::<T::Bits>),
            Update::Mul => self.reduce(&mut dst, &src, init, mul::<T::Bits>),
            Update::Max => self.reduce(&mut dst, &src, init, max::<T::Bits>),
            Update::Min => self.reduce(&mut dst, &src, init, min::<T::Bits>),
        }
    }

    /// A plain write (`init = None`, the last update in index order wins), on words of `T`'s
    /// width.
    pub(crate) fn set<T: Plain>(
        &self,
        dst: &mut ArrayViewMut<'_, T, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
    ) {
        // SAFETY: the plain write stores only words of `src`, i.e. elements of `T`.
        let mut dst = unsafe { words::view_mut(dst) };
        self.reduce(&mut dst, &words::view(src), None, set::<T::Word>)
    }
}

impl<I: IndexElem> Target<'_, '_, I> {
    /// The axis the reduction runs along.
    fn dim(&self) -> usize {
        match *self {
            Target::Index { dim, .. } | Target::Rows { dim, .. } | Target::Checking { dim, .. } => {
                dim
            }
        }
    }

    /// The shape of the positions the reduction visits: the index's, or `src`'s for rows given
    /// per position along `dim`.
    fn positions<'x>(&'x self, src: &'x [usize]) -> &'x [usize] {
        match self {
            Target::Index { index, .. } => index.view().shape(),
            Target::Rows { .. } => src,
            Target::Checking { index, .. } => index.shape(),
        }
    }

    /// The grouping of a row index (see [`is_row_index`]) or of plan rows, for the grouped
    /// loop of [`Target::reduce_wide`]; `None` where the element loop runs.
    fn wide_segments(&self, src: &[usize]) -> Option<std::borrow::Cow<'_, Segments>> {
        match *self {
            Target::Index { dim, index } => is_row_index(index.view(), dim)
                .then(|| std::borrow::Cow::Owned(Segments::of_row_index(index, dim))),
            Target::Rows {
                dim,
                ids,
                size,
                segs,
            } => {
                let segs = segs.get_or_init(|| Segments::of_ids(ids, size));
                (src.len() > dim && src[dim] == ids.len())
                    .then_some(std::borrow::Cow::Borrowed(segs))
            }
            Target::Checking { .. } => None,
        }
    }

    /// Whether [`Target::reduce_wide`] runs this target in parts (a row at a time, or blocks
    /// off `dim`), rather than on one block of everything.
    pub(crate) fn reduces_in_parts(&self, src: &[usize]) -> bool {
        let dim = self.dim();
        let rows = match *self {
            Target::Index { index, .. } => is_row_index(index.view(), dim),
            Target::Rows { ids, .. } => src.get(dim) == Some(&ids.len()),
            Target::Checking { .. } => false,
        };
        rows || wide_blocks(self.positions(src), dim, 1).is_some()
    }

    /// `f` of this target with its positions cut to `range` along `axis` (all of them for
    /// `None`).
    fn part<R>(&self, cut: Option<Cut>, f: impl FnOnce(&Target<'_, '_, I>) -> R) -> R {
        let Some((axis, range)) = cut else {
            return f(self);
        };
        match *self {
            Target::Index { dim, index } => {
                let index = index.slice_axis(axis, range);
                f(&Target::Index { dim, index: &index })
            }
            Target::Rows { dim, ids, size, .. } if axis == dim => {
                let segs = std::sync::OnceLock::new();
                f(&Target::Rows {
                    dim,
                    ids: &ids[range],
                    size,
                    segs: &segs,
                })
            }
            // Off `dim`, the rows (one per position along it) are the same in every part.
            Target::Rows { .. } => f(self),
            Target::Checking {
                dim,
                index,
                size,
                bad,
            } => {
                let index = index.slice_axis(ndarray::Axis(axis), ndarray::Slice::from(range));
                f(&Target::Checking {
                    dim,
                    index: &index,
                    size,
                    bad,
                })
            }
        }
    }

    /// [`Target::reduce`] of the sum, product or mean `op` accumulated in `T::Acc` (`f32` for
    /// `f16`/`bf16`, so that each destination element rounds once; the type itself for the
    /// float means): a row index a row piece at a time ([`RowsWide`]), any other block by block
    /// of the part of `dst` the positions reach, each block widened into a buffer that stays in
    /// the caches, reduced there, divided by its contributor counts for a mean, and rounded
    /// back. Blocks cut an axis off `dim`, where destinations never coincide, so that the
    /// blocks run in parallel and each is the serial loop's result.
    ///
    /// ```text
    /// dst [f16; rows x 8]  --block of rows-->  buf [f32]  --reduce--> buf  --round--> dst
    /// ```
    pub(crate) fn reduce_wide<T: Element>(
        &self,
        dst: &mut ArrayViewMut<'_, T, IxDyn>,
        src: &ArrayView<'_, T, IxDyn>,
        op: Wide<T::Acc>,
    ) {
        let dim = self.dim();
        let region = self.positions(src.shape()).to_vec();
        assert_eq!(
            region.len(),
            dst.ndim(),
            "scatter kernel: rank mismatch (index)"
        );
        if region.contains(&0) {
            return;
        }
        if let Some(segs) = self.wide_segments(src.shape()) {
            let segs = segs.as_ref();
            let slice_shape = without(&region, dim);
            let e_len = segs.order().len();
            let (at, slice, rows_of) =
                Rows::new(dst, dim, &slice_shape, src, e_len, None, false, &());
            let wide = RowsWide { rows: rows_of, op };
            rows(&at, &slice, dst.shape()[dim], segs, &wide);
            return;
        }
        // The parts of dst and src the positions reach (both may be larger).
        let reach = |a: usize, len: usize| {
            ndarray::Slice::from(0..if a == dim { len } else { region[a].min(len) })
        };
        let mut dst = dst.slice_each_axis_mut(|ax| reach(ax.axis.index(), ax.len));
        let src = src.slice_each_axis(|ax| ndarray::Slice::from(0..region[ax.axis.index()]));
        let blocks: Vec<(Option<Cut>, ArrayViewMut<'_, T, IxDyn>)> =
            match wide_blocks(&region, dim, dst.shape()[dim]) {
                None => vec![(None, dst.view_mut())],
                Some((axis, per)) => dst
                    .axis_chunks_iter_mut(ndarray::Axis(axis), per)
                    .enumerate()
                    .map(|(k, b)| (Some((axis, k * per..k * per + b.shape()[axis])), b))
                    .collect(),
            };
        let work: usize = region.iter().product();
        let parallel = blocks.len() > 1 && work >= 2 * crate::plan::GRAIN;
        crate::plan::each(blocks, parallel, |(cut, mut d)| {
            let s = match &cut {
                Some((axis, r)) => {
                    src.slice_axis(ndarray::Axis(*axis), ndarray::Slice::from(r.clone()))
                }
                None => src.view(),
            };
            let mut acc = widened(&d.view());
            self.part(cut, |t| t.reduce_widened(&mut acc, &s, op));
            super::zip::zip2_runs(&mut d, &acc.view(), |x, a| T::narrow_run(a, x));
        });
    }

    /// One block of [`Target::reduce_wide`]'s element loop: the reduction into `acc` (the
    /// widened block of dst) of `src`, widened a piece along `dim` at a time, so that a block
    /// that cannot be cut off `dim` (a 1-d scatter) never widens all of a large `src` at once.
    /// The pieces run in order, so each element still sees its updates in index order; `init`
    /// is written first, to every element the positions reach.
    fn reduce_widened<T: Element>(
        &self,
        acc: &mut ndarray::ArrayD<T::Acc>,
        src: &ArrayView<'_, T, IxDyn>,
        op: Wide<T::Acc>,
    ) {
        let dim = self.dim();
        if let Some(v) = op.init {
            self.set(&mut acc.view_mut(), &crate::dims::splat(&v, src.shape()));
        }
        let mut counts = op.mean.map(|_| crate::memory::zeroed::<u64>(acc.raw_dim()));
        let e = src.shape()[dim];
        let step = (WIDE_SRC / (src.len() / e).max(1)).clamp(1, e);
        for lo in (0..e).step_by(step) {
            let piece = lo..(lo + step).min(e);
            let s = src.slice_axis(ndarray::Axis(dim), ndarray::Slice::from(piece.clone()));
            let mut widened = widened(&s);
            if let Some(a) = op.alpha {
                widened.map_inplace(|x| *x = mul_of(a, *x));
            }
            self.part(Some((dim, piece)), |t| {
                let (mut acc, w) = (acc.view_mut(), widened.view());
                if op.prod {
                    t.reduce(&mut acc, &w, None, mul::<T::Acc>);
                } else {
                    t.reduce(&mut acc, &w, None, add::<T::Acc>);
                }
                if let Some(c) = &mut counts {
                    let ones = crate::dims::splat(&0u8, s.shape());
                    t.reduce(&mut c.view_mut(), &ones, None, count_one);
                }
            });
        }
        if let (Some(c), Some(extra)) = (&counts, op.mean) {
            super::zip::zip2(&mut acc.view_mut(), &c.view(), |a, &n| {
                if n > 0 {
                    *a = T::acc_div_count(*a, (n + extra) as usize);
                }
            });
        }
    }
}

/// A reduction of [`Target::reduce_wide`], in the accumulation type `A`: products or sums,
/// each widened source first multiplied by `alpha` (`index_add`'s), every element reached first
/// set to `init` (`include_self = false`), and a mean's sum divided by its count plus `mean`.
/// Values, not a closure: the kernels it runs are the accumulation type's own, compiled once
/// for it and shared with its own scatters.
#[derive(Clone, Copy)]
pub(crate) struct Wide<A> {
    pub(crate) prod: bool,
    pub(crate) alpha: Option<A>,
    pub(crate) init: Option<A>,
    pub(crate) mean: Option<u64>,
}

/// `x` widened into its accumulation type, in a new row-major array (runs at once: F16C, AVX2).
pub(crate) fn widened<T: Element>(x: &ArrayView<'_, T, IxDyn>) -> ndarray::ArrayD<T::Acc> {
    let mut out = ndarray::ArrayD::from_elem(x.raw_dim(), T::acc_zero());
    super::zip::zip2_runs(&mut out.view_mut(), x, |o, v| T::widen_run(v, o));
    out
}

/// The most elements of `src` that [`Target::reduce_widened`] widens at once.
const WIDE_SRC: usize = 1 << 20;

/// `a * x` in the type's arithmetic.
#[inline(always)]
fn mul_of<A: Element>(a: A, x: A) -> A {
    let mut p = a;
    mul(&mut p, x);
    p
}

/// A part of a reduction's positions: `range` along `axis`, as `(axis, range)`.
type Cut = (usize, Range<usize>);

/// The update that counts a mean's contributors: a function item, so that its kernels are
/// compiled once, not once per element type (as a closure written in a generic function is).
pub(crate) fn count_one(c: &mut u64, _: u8) {
    *c += 1;
}

/// The `f32` elements a block of [`Target::reduce_wide`] aims at: 128 KB, which stay in the
/// level-2 cache while the block is widened, reduced and rounded back.
const WIDE_BLOCK: usize = 32 * 1024;

/// The fewest contiguous elements in a block's runs where blocks cut an axis after `dim`
/// (strips of columns): two cache lines of `f16`.
const WIDE_RUN: usize = 64;

/// How [`Target::reduce_wide`] cuts positions of shape `region` into blocks, with `rows`
/// destination elements along `dim`: `per` positions of the outermost axis off `dim` that has
/// more than one, as `(axis, per)`; `None` for one block of everything.
fn wide_blocks(region: &[usize], dim: usize, rows: usize) -> Option<(usize, usize)> {
    let axis = (0..region.len()).find(|&a| a != dim && region[a] > 1)?;
    let len = |a: usize| if a == dim { rows } else { region[a] };
    let unit: usize = (0..region.len()).filter(|&a| a != axis).map(len).product();
    let after: usize = (axis + 1..region.len()).map(len).product();
    let per = (WIDE_BLOCK / unit.max(1)).max(WIDE_RUN.div_ceil(after.max(1)));
    Some((axis, per.clamp(1, region[axis])))
}

/// [`scatter_checking_fresh`] with `update` in `T`, on bits where `T` says so (see
/// [`Target::reduce_as`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_checking_fresh_as<T: Element, I: IndexElem>(
    from: &ArrayView<'_, T, IxDyn>,
    out: Vec<T>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    bad: &AtomicBool,
    update: Update,
) -> Vec<T> {
    match update {
        Update::Add | Update::Mul => {
            if T::SUM_ON_BITS {
                fresh_on_bits(from, out, dim, index, src, bad, update)
            } else if update == Update::Add {
                scatter_checking_fresh(from, out, dim, index, src, bad, add::<T>)
            } else {
                scatter_checking_fresh(from, out, dim, index, src, bad, mul::<T>)
            }
        }
        Update::Max | Update::Min => {
            fresh_order_as(from, out, dim, index, src, bad, update == Update::Max)
        }
    }
}

/// [`scatter_checking_fresh_as`] for `amax` (`is_max`) or `amin` alone (see
/// [`Target::reduce_order_as`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fresh_order_as<T: Element, I: IndexElem>(
    from: &ArrayView<'_, T, IxDyn>,
    out: Vec<T>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    bad: &AtomicBool,
    is_max: bool,
) -> Vec<T> {
    if T::ORDER_ON_BITS {
        let update = if is_max { Update::Max } else { Update::Min };
        fresh_on_bits(from, out, dim, index, src, bad, update)
    } else if is_max {
        scatter_checking_fresh(from, out, dim, index, src, bad, max::<T>)
    } else {
        scatter_checking_fresh(from, out, dim, index, src, bad, min::<T>)
    }
}

#[allow(clippy::too_many_arguments)]
fn fresh_on_bits<T: Element, I: IndexElem>(
    from: &ArrayView<'_, T, IxDyn>,
    out: Vec<T>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    bad: &AtomicBool,
    update: Update,
) -> Vec<T> {
    let (from, src, out) = (words::bits(from), words::bits(src), words::bits_vec(out));
    let (from, src) = (&from, &src);
    let out = match update.on_bits_of::<T>() {
        Update::Add => scatter_checking_fresh(from, out, dim, index, src, bad, add::<T::Bits>),
        Update::Mul => scatter_checking_fresh(from, out, dim, index, src, bad, mul::<T::Bits>),
        Update::Max => scatter_checking_fresh(from, out, dim, index, src, bad, max::<T::Bits>),
        Update::Min => scatter_checking_fresh(from, out, dim, index, src, bad, min::<T::Bits>),
    };
    // SAFETY: the copy of `from` and the updates store values of `T` only (see
    // `Target::reduce_on_bits`).
    unsafe { words::unbits_vec(out) }
}

/// A plain write, `dst_elem = src_elem`: with duplicates the last position in index order wins.
/// Preconditions as [`scatter_reduce`].
pub(crate) fn scatter_set<T, I>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
) where
    T: Plain,
    I: IndexElem,
{
    // SAFETY: the plain write below stores only words of `src`, i.e. elements of `T`.
    let mut dst = unsafe { words::view_mut(dst) };
    let src = words::view(src);
    scatter_impl(&mut dst, dim, index, &src, None, true, set::<T::Word>)
}

/// Row-index scatters whose slices (the part of one position along `dim`) have fewer elements
/// than this take the general loop: the grouping would cost more than it saves.
const SEGMENT_MIN_SLICE: usize = 8;

/// `last_only`: `update` ignores the old value (a plain write), so only the last update of each
/// destination element matters.
fn scatter_impl<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    init: Option<A>,
    last_only: bool,
    update: F,
) where
    A: Plain,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let marks = Marks::of(init, last_only);
    let sizes = (std::mem::size_of::<T>(), std::mem::size_of::<A>());
    match route(dst.shape(), dim, index, src.shape(), marks, sizes) {
        Route::Nothing => {}
        Route::Rows(slice_shape, RowsBy::Ids(ids)) => {
            let walk = Walk::Direct(&ids);
            row_scatter(dst, dim, &slice_shape, src, walk, init, last_only, &update);
        }
        Route::Rows(slice_shape, RowsBy::Segments(segs)) => {
            let walk = Walk::Grouped(&segs);
            row_scatter(dst, dim, &slice_shape, src, walk, init, last_only, &update);
        }
        Route::General => {
            if let Some(v) = init {
                let ones = crate::dims::splat(&v, index.view().shape());
                // SAFETY: the plain write stores only copies of `v`, an `A`.
                let mut words = unsafe { words::view_mut(dst) };
                general(&mut words, dim, index, &words::view(&ones), set::<A::Word>);
            }
            general(dst, dim, index, src, update);
        }
    }
}

/// Which loop a scatter with a checked index takes (see [`scatter_impl`]), decided from the
/// shapes and the index alone: compiled per index type, not per element type and update.
enum Route {
    /// An empty index: nothing to do.
    Nothing,
    /// A row index (see [`rows_of`]) over slices of this shape, walked in source order through
    /// the destination row of each position, or grouped by destination row.
    Rows(Vec<usize>, RowsBy),
    /// The element loop.
    General,
}

enum RowsBy {
    Ids(Vec<u32>),
    Segments(Segments),
}

/// The route of a scatter of `index` from `src` into `dst` along `dim`; `marks`: what is kept
/// per row reached (see [`Marks`]); `sizes`: the bytes of an element of `src` and of `dst`.
/// Asserts the preconditions of [`scatter_reduce`].
#[inline(never)]
fn route<I: IndexElem>(
    dst_shape: &[usize],
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src_shape: &[usize],
    marks: Marks,
    sizes: (usize, usize),
) -> Route {
    let idx = index.view();
    check_preconditions(dst_shape, dim, idx.shape(), index.size(), src_shape);
    if idx.is_empty() {
        return Route::Nothing;
    }
    let Some((_, direct)) = row_loop(idx, dim, dst_shape[dim], marks, sizes) else {
        return Route::General;
    };
    let slice_shape = without(idx.shape(), dim);
    if direct {
        // The destination row of each position along `dim` (a row index is constant off `dim`):
        // one pass over `e_len` values, so that the walk is compiled for a list of rows alone,
        // as plans and segment ids use it.
        let (bounds, size) = (index.bounds(), index.size());
        let ids: Vec<u32> = idx
            .lanes(ndarray::Axis(dim))
            .into_iter()
            .next()
            .map(|lane| {
                // As a 1-d view: a dynamic-rank iterator steps a coordinate per value.
                let lane = lane
                    .into_dimensionality::<ndarray::Ix1>()
                    .expect("a lane is 1-d");
                match (bounds, lane.as_slice()) {
                    // Checked strict values are the rows: a loop that vectorizes.
                    (Bounds::Strict, Some(s)) => s.iter().map(|v| v.to_i64() as u32).collect(),
                    _ => lane
                        .iter()
                        .map(|v| position(bounds, v.to_i64(), size) as u32)
                        .collect(),
                }
            })
            .unwrap_or_default();
        Route::Rows(slice_shape, RowsBy::Ids(ids))
    } else {
        let segs = Segments::of_row_index(index, dim);
        Route::Rows(slice_shape, RowsBy::Segments(segs))
    }
}

/// The asserted preconditions of every entry point (O(rank)): equal ranks, `dim` an axis, the
/// index no larger than `src` on any axis nor than `dst` off `dim`, and `size` (what the index
/// values are, or will be, checked against) the length of `dst` along `dim`.
fn check_preconditions(
    dst_shape: &[usize],
    dim: usize,
    idx_shape: &[usize],
    size: usize,
    src_shape: &[usize],
) {
    let nd = dst_shape.len();
    assert_eq!(idx_shape.len(), nd, "scatter kernel: rank mismatch (index)");
    assert_eq!(src_shape.len(), nd, "scatter kernel: rank mismatch (src)");
    assert!(dim < nd, "scatter kernel: dim out of range");
    assert_eq!(
        size, dst_shape[dim],
        "scatter kernel: index checked against another size"
    );
    for (d, &len) in dst_shape.iter().enumerate() {
        assert!(
            idx_shape[d] <= src_shape[d],
            "scatter kernel: index larger than src"
        );
        assert!(
            d == dim || idx_shape[d] <= len,
            "scatter kernel: index larger than dst"
        );
    }
}

fn general<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    update: F,
) where
    A: Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    // Only index_fill writes under another policy, and it maps its (short) index first, so the
    // element loop is compiled for strict positions alone.
    assert!(
        matches!(index.bounds(), Bounds::Strict),
        "scatter kernel: the general loop takes strict positions"
    );
    let size = index.size();
    // Checked values: the in-loop check never sets the flag.
    let never = AtomicBool::new(false);
    general_mapped(dst, dim, index.view(), src, size, &never, update);
}

/// The element loop over the index's shape, each index value checked against `size` (the length
/// of `dst` along `dim`) in the loop: a value out of range updates row 0 instead and sets the
/// task's flag, and a task that saw a set flag sets `bad`. For a checked index the check never
/// fails: one compare and a branch always predicted, which costs less than compiling the loop a
/// second time without it.
#[allow(clippy::too_many_arguments)]
fn general_mapped<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    idx: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    size: usize,
    bad: &AtomicBool,
    update: F,
) where
    A: Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let strides = dst.strides().to_vec();
    let dptr = SharedPtr(dst.as_mut_ptr());
    general_raw(dptr, &strides, None, dim, idx, src, size, bad, update);
}

/// [`general_mapped`] on a destination given by its pointer and strides (its shape is the index's
/// off `dim`, or larger); with `fill` (of the destination's shape), each task first copies its
/// part of the destination from there (the caller has checked that the index spans the
/// destination off `dim`).
#[allow(clippy::too_many_arguments)]
fn general_raw<A, T, I, F>(
    dst: SharedPtr<A>,
    dst_strides: &[isize],
    fill: Option<&ArrayView<'_, A, IxDyn>>,
    dim: usize,
    idx: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    size: usize,
    bad: &AtomicBool,
    update: F,
) where
    A: Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let copy = fill.map(|f| FillAlong {
        from: SharedPtr(f.as_ptr() as *mut A),
        stride: f.strides()[dim],
        len: f.shape()[dim],
    });
    let (nest, dstride) = plan_general(
        dim,
        idx.shape(),
        [dst_strides, idx.strides(), src.strides()],
        fill.map(|f| f.strides()),
    );
    let iptr = SharedPtr(idx.as_ptr() as *mut I);
    let sptr = SharedPtr(src.as_ptr() as *mut T);
    run(&nest, dst, iptr, sptr, dstride, copy, size, bad, &update);
}

/// The nest of the element loop over the index's shape (see [`general_raw`]), `dim` serial, with
/// the operands dst, index, src and the fill's source (zero strides without one), and dst's
/// stride along `dim`, which the loop applies to the index values (it is taken out of the nest's
/// strides, as the fill's is: each task copies whole lines along `dim`).
fn plan_general(
    dim: usize,
    shape: &[usize],
    [dst, idx, src]: [&[isize]; 3],
    fill: Option<&[isize]>,
) -> (Nest<4>, isize) {
    let mut dst = dst.to_vec();
    let dstride = dst[dim];
    dst[dim] = 0;
    // A zero stride never keeps axes from merging.
    let mut fill = fill.map_or_else(|| vec![0; shape.len()], <[isize]>::to_vec);
    fill[dim] = 0;
    let nest = Nest::<4>::new(shape, [&dst, idx, src, &fill], Some(dim));
    // `dim` strided in dst, the next axis out contiguous there, long, and the index constant
    // along it (index_add along dim 1 of a transposed matrix): `dim` goes outside that axis, so
    // that each index value updates a run of a destination row instead of one element of a line.
    let swapped = nest.serial_outside().filter(|n| {
        let [ds, is, ..] = n.inner.strides;
        ds.unsigned_abs() == 1
            && is == 0
            && dstride.unsigned_abs() > 1
            && n.inner.len >= SERIAL_OUTSIDE_MIN_RUN
    });
    (swapped.unwrap_or(nest), dstride)
}

/// The shortest run of destination elements for which a scatter's element loop walks `dim`
/// outside it ([`plan_general`]). Shorter runs keep `dim` innermost: a run of 4 or 16 cannot be
/// split between threads, and each position along `dim` then costs a step of the loop for a
/// few elements (`index_add_` into `[100000, 4].T` was 2-3x slower swapped, `[4096, 64].T`
/// the same either way, `[64, 4096].T` twice as fast).
const SERIAL_OUTSIDE_MIN_RUN: usize = 128;

#[allow(clippy::too_many_arguments)]
fn run<A, T, I, F>(
    nest: &Nest<4>,
    dst: SharedPtr<A>,
    idx: SharedPtr<I>,
    src: SharedPtr<T>,
    dstride: isize,
    fill: Option<FillAlong<A>>,
    size: usize,
    bad: &AtomicBool,
    update: &F,
) where
    A: Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    // A value out of range updates row 0 (there is one: `size > 0` wherever a value is read) and
    // sets the task's flag.
    let map = move |v: i64, flag: &mut bool| checked_position::<false>(v, size, flag) as isize;
    let [ds, is, ss, fs] = nest.inner.strides;
    let (mid_len, [mds, mis, mss, _]) = nest.mid.map_or((1, [0; 4]), |m| (m.len, m.strides));
    // The inner axis is `dim` itself (a task's range then covers only index positions along it).
    let inner_is_dim = !nest.inner_splittable;
    // The inner axis is `dim`, and the index, src and dst are all contiguous along it (W11:
    // `self[1000,1000].scatter(1, index[1000,500], src)`): the element loop with the strides as
    // constants, a load, a check, a load and an update per element, without the multiply and add
    // per stride that strides read at run time would cost (see docs/performance.md,
    // "kernels/scatter.rs: run").
    let unit = is == 1 && ds == 0 && ss == 1 && dstride == 1;
    // `move`: the strides become the closure's own values, and `map` is copied into each task. Captured by reference, they were reloaded from memory after every store through
    // `dst` (which might alias them, as far as the compiler knows).
    nest.for_each(move |base, r| {
        let (d, i, s, map) = (dst, idx, src, map);
        let mut flag = false;
        if let Some(f) = fill {
            // SAFETY: `base[3]` and `base[0]` (+ `j * fs`, `j * ds` for `j` in `r`) are the
            // offsets in `from` and in dst of one position of the index's shape off `dim`; the
            // index spans both there (the fill's contract), and `from` has dst's shape, so every
            // position `k < f.len` along `dim` (strides `f.stride`, `dstride`) is inside both.
            // `from` is only read and is not dst (a fresh buffer); tasks have distinct non-dim
            // coordinates, so their copies never overlap.
            unsafe {
                if inner_is_dim {
                    copy_along(
                        d.0.offset(base[0]),
                        dstride,
                        f.from.0.offset(base[3]),
                        f.stride,
                        0..f.len,
                    );
                } else {
                    for k in 0..f.len as isize {
                        let dp = d.0.offset(base[0] + k * dstride);
                        copy_along(
                            dp,
                            ds,
                            f.from.0.offset(base[3] + k * f.stride),
                            fs,
                            r.clone(),
                        );
                    }
                }
            }
        }
        // SAFETY: offsets are those of positions inside the index's shape. For the index they are
        // in bounds of its own view; for src, whose every size is at least the index's (asserted),
        // too. For dst, each non-dim coordinate is below the index's size there (at most dst's,
        // asserted) and the dim coordinate is `map` of an index value, in `0..size` (the value
        // itself, or row 0 for a bad one), or in the grouped loop a value checked below `size`;
        // every entry point asserts that `size` is `dst.shape[dim]`. With a fill, this task has
        // just written every element it updates. Writes never race: distinct coordinates of dst
        // are distinct memory (a `ArrayViewMut`, or a fresh row-major buffer); positions whose
        // destinations can coincide share every non-dim coordinate, and the planner keeps those
        // in one task (dim is the serial axis; never split across tasks).
        unsafe {
            for m in 0..mid_len as isize {
                let dp = d.0.offset(base[0] + m * mds);
                let ip = i.0.offset(base[1] + m * mis);
                let sp = s.0.offset(base[2] + m * mss);
                if is == 0 {
                    let row = dp.offset(map((*ip).to_i64(), &mut flag) * dstride);
                    for j in r.clone() {
                        let j = j as isize;
                        update(&mut *row.offset(j * ds), *sp.offset(j * ss));
                    }
                } else if unit {
                    let mut r = r.clone();
                    // Four values at a time, checked at once, then the four updates in order
                    // (equal values: the later one last, as ever).
                    while r.len() >= 4 {
                        let j = r.start;
                        let (v, in_range) = super::four_values(ip.add(j), size);
                        let s = [*sp.add(j), *sp.add(j + 1), *sp.add(j + 2), *sp.add(j + 3)];
                        if in_range {
                            for (v, s) in v.into_iter().zip(s) {
                                update(&mut *dp.offset(v as isize), s);
                            }
                        } else {
                            for (v, s) in v.into_iter().zip(s) {
                                update(&mut *dp.offset(map(v, &mut flag)), s);
                            }
                        }
                        r.start += 4;
                    }
                    for j in r {
                        let t = dp.offset(map((*ip.add(j)).to_i64(), &mut flag));
                        update(&mut *t, *sp.add(j));
                    }
                } else {
                    for j in r.clone() {
                        let j = j as isize;
                        let v = (*ip.offset(j * is)).to_i64();
                        let t = dp.offset(j * ds + map(v, &mut flag) * dstride);
                        update(&mut *t, *sp.offset(j * ss));
                    }
                }
            }
        }
        if flag {
            bad.store(true, Ordering::Relaxed);
        }
    });
}

/// `to[j * ts] = from[j * fs]` for `j` in `r`: one `memcpy` when both are contiguous.
///
/// # Safety
/// Every such offset must be in bounds of its buffer; `from` is only read, and the two ranges do
/// not overlap.
#[inline(always)]
unsafe fn copy_along<A>(to: *mut A, ts: isize, from: *const A, fs: isize, r: Range<usize>) {
    // SAFETY: the caller's contract.
    unsafe {
        if ts == 1 && fs == 1 {
            std::ptr::copy_nonoverlapping(from.add(r.start), to.add(r.start), r.len());
        } else {
            for j in r {
                let j = j as isize;
                std::ptr::copy_nonoverlapping(from.offset(j * fs), to.offset(j * ts), 1);
            }
        }
    }
}

/// Whether a row scatter of `e_len` positions over slices of `slice_shape`, into a destination
/// of `rows` rows along `dim`, runs [`direct`]ly, on one thread: when the call is small, or the
/// pool has one thread, unless the rows reached must be marked (`marks`: init or last-only) in a
/// destination far larger than the positions; and when the pool has two threads, no write is
/// last-only, the update does not convert (`sizes`: the bytes of a `src` and a `dst` element,
/// the same), the slices are narrow (up to [`DIRECT_SLICE_BYTES`]) and the destination is no larger
/// than [`DIRECT_DST_BYTES`]. Otherwise the grouped loop ([`rows`]) runs: it splits the
/// destination rows between the threads and prefetches each source row.
///
/// The grouped loop reads each narrow source row at a random place, where the source-order walk
/// streams `src` and updates rows of a destination that stays in the caches: there one thread
/// walking in source order beats two grouped. With rows of 1 KB and more, a destination past
/// the last-level cache (W6, W7), or the software conversions of `f16` sums, the two grouped
/// threads win. A source-order walk is not split between threads: each (owning some rows, or a
/// piece of every row) keeps as many cache misses as one thread has, or reads `src` with gaps
/// that defeat the hardware prefetcher (see docs/performance.md, "kernels/scatter.rs:
/// direct_fits").
fn direct_fits(
    e_len: usize,
    slice_shape: &[usize],
    rows: usize,
    marks: Marks,
    (elem, dst_elem): (usize, usize),
) -> bool {
    let slice_len: usize = slice_shape.iter().product();
    let threads = rayon::current_num_threads();
    let serial = e_len.saturating_mul(slice_len) < 2 * crate::plan::GRAIN || threads == 1;
    let sparse = rows > 64 * e_len + 4096;
    let slice_bytes = slice_len.saturating_mul(elem);
    let cached = threads == 2
        && marks != Marks::LastOnly
        && elem == dst_elem
        && slice_bytes <= DIRECT_SLICE_BYTES
        && rows.saturating_mul(slice_bytes) <= DIRECT_DST_BYTES;
    (serial && !(marks != Marks::None && sparse)) || cached
}

/// The widest slice (in bytes of `src`) that a two-thread row scatter walks in source order on
/// one thread (see [`direct_fits`]).
const DIRECT_SLICE_BYTES: usize = 512;

/// The largest destination (in bytes of `src`'s type) that a two-thread row scatter walks in
/// source order on one thread: half the last-level cache of the machines measured (see
/// [`direct_fits`]).
const DIRECT_DST_BYTES: usize = 16 << 20;

/// A reduction along `dim` with the destination row of each source position given (`ids`, one
/// per position, each below `size == dst.shape[dim]`, asserted): [`direct`] or, grouped into
/// `segs` (built on first use and kept), [`rows`]. Preconditions as [`check_segments`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_rows<A, T, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    ids: &[u32],
    size: usize,
    segs: &std::sync::OnceLock<Segments>,
    src: &ArrayView<'_, T, IxDyn>,
    init: Option<A>,
    update: F,
) where
    A: Plain,
    T: Copy + Send + Sync,
    F: Fn(&mut A, T) + Sync + Send,
{
    if let Some((slice_shape, walk)) = route_rows(
        dst.shape(),
        dim,
        ids,
        size,
        segs,
        src.shape(),
        Marks::of(init, false),
        (std::mem::size_of::<T>(), std::mem::size_of::<A>()),
    ) {
        row_scatter(dst, dim, &slice_shape, src, walk, init, false, &update);
    }
}

/// The walk of [`scatter_rows`] and the shape of its slices (`None`: nothing to do), decided
/// from the shapes alone. Asserts its preconditions.
#[allow(clippy::too_many_arguments)]
fn route_rows<'a>(
    dst_shape: &[usize],
    dim: usize,
    ids: &'a [u32],
    size: usize,
    segs: &'a std::sync::OnceLock<Segments>,
    src_shape: &[usize],
    marks: Marks,
    sizes: (usize, usize),
) -> Option<(Vec<usize>, Walk<'a>)> {
    let nd = dst_shape.len();
    assert!(
        src_shape.len() == nd && dim < nd && dst_shape[dim] == size,
        "scatter kernel: rank mismatch, or rows checked against another size"
    );
    let slice_shape = without(src_shape, dim);
    if src_shape.contains(&0) || ids.is_empty() {
        return None;
    }
    if direct_fits(ids.len(), &slice_shape, size, marks, sizes) {
        return Some((slice_shape, Walk::Direct(ids)));
    }
    let segs = segs.get_or_init(|| Segments::of_ids(ids, size));
    check_segments(dst_shape, dim, segs, src_shape).then_some((slice_shape, Walk::Grouped(segs)))
}

/// The preconditions of a row scatter with segments (asserted): `dst` and `src` have the same
/// rank; `dim` is one of its axes; `src.shape[d] <= dst.shape[d]` for every `d != dim`. (The
/// segments' rows are checked against `dst.shape[dim]` by [`rows`].) `false` when there is
/// nothing to do.
fn check_segments(dst_shape: &[usize], dim: usize, segs: &Segments, src_shape: &[usize]) -> bool {
    let nd = dst_shape.len();
    assert_eq!(src_shape.len(), nd, "scatter kernel: rank mismatch (src)");
    assert!(dim < nd, "scatter kernel: dim out of range");
    for d in 0..nd {
        assert!(
            d == dim || src_shape[d] <= dst_shape[d],
            "scatter kernel: src larger than dst"
        );
    }
    !src_shape.contains(&0) && segs.len() > 0
}

/// How many positions ahead [`direct`] requests the destination row: the rows are random in a
/// destination larger than the caches, so each is a miss to memory, and 16 in flight hide far
/// more of that latency than a few. The source rows are not prefetched: the hardware prefetcher
/// streams them (see docs/performance.md, "kernels/scatter.rs: DIRECT_AHEAD").
const DIRECT_AHEAD: usize = 16;

/// A row-index scatter in source order, with no grouping, on the calling thread: the positions
/// along `dim` are walked in index order, each updating the destination row it selects.
///
/// ```text
/// index rows 2 0 2 1     dst[2] op= src[0]; dst[0] op= src[1]; dst[2] op= src[2]; dst[1] op= src[3]
/// ```
///
/// Sources are read in memory order (the hardware prefetcher streams `src`, the big operand of a
/// GNN-style scatter), the destination row of the position [`DIRECT_AHEAD`] ahead is prefetched,
/// nothing is allocated but a bitmap of the rows reached (with `init` or `last_only`), and every
/// destination element sees its updates in index order: the serial loop's result. With `init`, a
/// row is set to it at its first update; with `last_only`, positions are walked backwards and
/// only the first seen (the last in index order) is written.
///
/// `ids[e]` is the destination row of position `e`; a row outside `dst` (`rows_n` rows) is a bug
/// (asserted per position, before any access).
fn direct(at: &Rows, slice: &Nest<2>, rows_n: usize, ids: &[u32], upd: &dyn RowUpdate) {
    let e_len = ids.len();
    let row_of = |e: usize| -> usize {
        let row = ids[e] as usize;
        assert!(row < rows_n, "scatter kernel: destination row out of range");
        row
    };
    // Every piece of the slice (one, for a contiguous slice), listed once.
    let mine = slice.pieces(1, 1).pop().unwrap_or_default();
    let Some(&(base0, ref r0)) = mine.first() else {
        return;
    };
    let mut seen = if at.init || at.last_only {
        vec![0u64; rows_n.div_ceil(64)]
    } else {
        Vec::new()
    };
    let lines = at.row_lines(base0, r0);
    if !at.last_only && mine.len() == 1 && at.strides == [1, 1] {
        upd.apply_run(at, ids, rows_n, base0, r0.clone(), lines.0, &mut seen);
        return;
    }
    let mut first = |row: usize| first_time(&mut seen, row);
    if at.last_only {
        for e in (0..e_len).rev() {
            let row = row_of(e);
            if first(row) {
                for (base, r) in &mine {
                    upd.apply_at(row, *base, r.clone(), e, false);
                }
            }
        }
        return;
    }
    super::walk_ahead!(0..e_len, Some(DIRECT_AHEAD), |e, next| {
        let row = row_of(e);
        if let Some(n) = next {
            at.prefetch_row(row_of(n), lines);
        }
        let fresh = at.init && first(row);
        for (base, r) in &mine {
            upd.apply_at(row, *base, r.clone(), e, fresh);
        }
    });
}

/// Marks `row` in `seen` (a bit per row): whether it was not marked before.
#[inline(always)]
fn first_time(seen: &mut [u64], row: usize) -> bool {
    let (w, b) = (row / 64, 1u64 << (row % 64));
    let new = seen[w] & b == 0;
    seen[w] |= b;
    new
}

/// `shape` without axis `dim`.
fn without<X: Copy>(shape: &[X], dim: usize) -> Vec<X> {
    (0..shape.len())
        .filter(|&d| d != dim)
        .map(|d| shape[d])
        .collect()
}

/// A scatter with a row index (see [`is_row_index`]): the positions along `dim` are grouped by
/// destination row ([`Segments`]), and each destination row is reduced over its sources in index
/// order, in parallel over rows. No two tasks touch the same row, and each row sees its updates
/// in the serial order, so the result is bitwise that of the serial loop for any number of
/// threads. The segments' rows must be below `rows_n` (asserted).
fn rows(at: &Rows, slice: &Nest<2>, rows_n: usize, segs: &Segments, upd: &dyn SegmentUpdate) {
    let e_len = segs.order().len();
    assert!(
        segs.rows().last().is_none_or(|&r| r < rows_n),
        "scatter kernel: segment row out of range"
    );
    let threads = rayon::current_num_threads();
    let work = e_len.saturating_mul(slice.total);
    let parallel = threads > 1 && work >= 2 * crate::plan::GRAIN;
    if parallel && segs.len() < 4 * threads {
        // Few destination rows: split the slices instead, every task visiting every row.
        slice.for_each(|base, r| {
            for k in 0..segs.len() {
                let ahead = &segs.order()[segs.starts()[k]..];
                let n = segs.starts()[k + 1] - segs.starts()[k];
                upd.apply_segment(segs.rows()[k], base, r.clone(), ahead, n, at.last_only);
            }
        });
        return;
    }
    // The slice's pieces (one, for a contiguous slice), listed once, not walked per segment.
    let pieces = slice.pieces(1, 1).pop().unwrap_or_default();
    let ranges = segs.split(if parallel { threads * 8 } else { 1 });
    let task = |ks: &Range<usize>| {
        let end = segs.starts()[ks.end];
        for k in ks.clone() {
            let ahead = &segs.order()[segs.starts()[k]..end];
            let n = segs.starts()[k + 1] - segs.starts()[k];
            for (base, r) in &pieces {
                upd.apply_segment(segs.rows()[k], *base, r.clone(), ahead, n, at.last_only);
            }
        }
    };
    if ranges.len() > 1 {
        crate::plan::par_for(ranges.len(), &|i| task(&ranges[i]));
    } else {
        ranges.iter().for_each(task);
    }
}

/// How a row scatter visits its positions: in source order ([`direct`]), or grouped by
/// destination row ([`rows`]).
#[derive(Clone, Copy)]
enum Walk<'a> {
    Direct(&'a [u32]),
    Grouped(&'a Segments),
}

/// A row scatter of `slice_shape` slices along `dim` (see [`direct`] and [`rows`]). Only the
/// update of one slice piece ([`RowUpdate`]) is compiled per type and update; the walks are
/// compiled once.
#[allow(clippy::too_many_arguments)]
fn row_scatter<A, T, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    slice_shape: &[usize],
    src: &ArrayView<'_, T, IxDyn>,
    walk: Walk<'_>,
    init: Option<A>,
    last_only: bool,
    update: &F,
) where
    A: Plain,
    T: Copy + Send + Sync,
    F: Fn(&mut A, T) + Sync + Send,
{
    let e_len = match walk {
        Walk::Direct(ids) => ids.len(),
        Walk::Grouped(segs) => segs.order().len(),
    };
    let (at, slice, upd) = Rows::new(dst, dim, slice_shape, src, e_len, init, last_only, update);
    let rows_n = dst.shape()[dim];
    match walk {
        Walk::Direct(ids) => direct(&at, &slice, rows_n, ids, &upd),
        Walk::Grouped(segs) => rows(&at, &slice, rows_n, segs, &upd),
    }
}

/// The destination of a row-index scatter as an address, for the walks' prefetches, and what the
/// walk does (the typed update is a [`RowUpdate`]).
struct Rows {
    dst: SharedPtr<u8>,
    /// The size of dst's elements in bytes.
    size: usize,
    /// dst's stride along `dim`, in elements.
    dstride: isize,
    /// Inner strides of the slice nest (dst, src), in elements.
    strides: [isize; 2],
    /// Each destination row is set to an initial value at its first update.
    init: bool,
    /// Only the last update of each row counts (a plain write).
    last_only: bool,
}

/// The update of one slice piece of a row scatter, compiled per accumulator, source type and
/// update: the one part of a row scatter that is.
trait RowUpdate: SegmentUpdate {
    /// `update(dst[.., row, ..], src[.., e, ..])` over the slice piece `base + r`; with `fresh`,
    /// the piece of the destination row is first set to `init` (if any).
    fn apply_at(&self, row: usize, base: [isize; 2], r: Range<usize>, e: usize, fresh: bool);
    /// The source-order walk of [`direct`] over one slice piece `base + r` (not last-only):
    /// `ids[e]` (below `rows_n`, asserted) is the destination row of source position `e`; the
    /// rows [`DIRECT_AHEAD`] positions ahead are prefetched (`at`; `line0`, where the piece
    /// starts in a row, from [`Rows::row_lines`]). With an initial value, a row is set to it at
    /// its first update, `seen` holding a bit per row (`rows_n` bits, all clear). The common
    /// walk of a GNN's scatters, compiled with its update, so that a position costs no call.
    #[allow(clippy::too_many_arguments)]
    fn apply_run(
        &self,
        at: &Rows,
        ids: &[u32],
        rows_n: usize,
        base: [isize; 2],
        r: Range<usize>,
        line0: isize,
        seen: &mut [u64],
    );
}

/// The update of one segment of a grouped row scatter ([`rows`]).
trait SegmentUpdate: Sync {
    /// Reduces, into the slice piece `base + r` of destination row `row`, the sources
    /// `ahead[..n]` (positions along `dim`, in index order; only the last with `last_only`);
    /// `ahead[n..]` are the sources that come next in the same task, whose first lines are
    /// prefetched. One call per segment: the loop over its sources is the update's own.
    #[allow(clippy::too_many_arguments)]
    fn apply_segment(
        &self,
        row: usize,
        base: [isize; 2],
        r: Range<usize>,
        ahead: &[u32],
        n: usize,
        last_only: bool,
    );
}

/// The typed pointers of a row scatter and its update (see [`Rows::new`]).
struct RowsOf<'f, A, T, F> {
    dst: SharedPtr<A>,
    src: SharedPtr<T>,
    dstride: isize,
    sstride: isize,
    strides: [isize; 2],
    init: Option<A>,
    update: &'f F,
}

impl Rows {
    /// The walk and the typed update of a row-index scatter of `e_len` positions along `dim`,
    /// over slices of `slice_shape`, and the nest of one slice (dst, src). Asserts (O(rank)) what
    /// every access through them relies on: equal ranks, `dim` an axis, `slice_shape` the shape
    /// off `dim`, no larger than dst's or src's there, and `e_len` no more than src's length
    /// along `dim`. The destination rows are the caller's to check.
    #[allow(clippy::too_many_arguments, clippy::new_ret_no_self)]
    fn new<'f, A, T, F>(
        dst: &mut ArrayViewMut<'_, A, IxDyn>,
        dim: usize,
        slice_shape: &[usize],
        src: &ArrayView<'_, T, IxDyn>,
        e_len: usize,
        init: Option<A>,
        last_only: bool,
        update: &'f F,
    ) -> (Rows, Nest<2>, RowsOf<'f, A, T, F>) {
        let nd = dst.ndim();
        assert!(
            src.ndim() == nd && dim < nd && slice_shape.len() + 1 == nd,
            "scatter kernel: rank mismatch (row scatter)"
        );
        assert!(
            e_len <= src.shape()[dim],
            "scatter kernel: more positions than src has"
        );
        let (dshape, sshape) = (without(dst.shape(), dim), without(src.shape(), dim));
        assert!(
            (0..nd - 1).all(|d| slice_shape[d] <= dshape[d] && slice_shape[d] <= sshape[d]),
            "scatter kernel: slice larger than dst or src"
        );
        let slice = Nest::<2>::new(
            slice_shape,
            [&without(dst.strides(), dim), &without(src.strides(), dim)],
            None,
        );
        let (dstride, sstride) = (dst.strides()[dim], src.strides()[dim]);
        let (dptr, sptr) = (dst.as_mut_ptr(), src.as_ptr() as *mut T);
        let at = Rows {
            dst: SharedPtr(dptr.cast()),
            size: std::mem::size_of::<A>(),
            dstride,
            strides: slice.inner.strides,
            init: init.is_some(),
            last_only,
        };
        let typed = RowsOf {
            dst: SharedPtr(dptr),
            src: SharedPtr(sptr),
            dstride,
            sstride,
            strides: slice.inner.strides,
            init,
            update,
        };
        (at, slice, typed)
    }

    /// Where the slice piece `base + r` starts in a destination row, in bytes, and how many of
    /// its lines [`Rows::prefetch_row`] requests: worked out once per walk, not per row, as they
    /// take two divisions.
    fn row_lines(&self, base: [isize; 2], r: &Range<usize>) -> (isize, usize) {
        let [ds, _] = self.strides;
        let size = self.size.max(1);
        let lines = if ds == 1 {
            line_count(r.len(), size)
        } else {
            1
        };
        ((base[0] + r.start as isize * ds) * size as isize, lines)
    }

    /// Starts loading the first lines (from [`Rows::row_lines`]) of a slice piece of
    /// destination row `row`. A hint: the address is computed with `wrapping_offset` and never
    /// dereferenced.
    #[inline(always)]
    fn prefetch_row(&self, row: usize, (start, lines): (isize, usize)) {
        let at = row as isize * self.dstride * self.size as isize + start;
        for l in 0..lines {
            let p = self.dst.0.wrapping_offset(at + 64 * l as isize);
            super::prefetch(p.cast_const());
        }
    }
}

/// The length of the runs of a walk ([`RowsOf::walk`]): known when it is compiled, or at run
/// time.
trait RunLen: Copy {
    fn get(self) -> usize;
}

/// Runs of `N` elements.
#[derive(Clone, Copy)]
struct Fixed<const N: usize>;

/// Runs of any length.
#[derive(Clone, Copy)]
struct Any(usize);

impl<const N: usize> RunLen for Fixed<N> {
    #[inline(always)]
    fn get(self) -> usize {
        N
    }
}

impl RunLen for Any {
    #[inline(always)]
    fn get(self) -> usize {
        self.0
    }
}

/// How many 64-byte lines [`Rows::prefetch_row`] requests of a run of `len` elements of `size`
/// bytes: the lines of its length, up to 4.
#[inline(always)]
fn line_count(len: usize, size: usize) -> usize {
    len.div_ceil((64 / size.max(1)).max(1)).min(4)
}

impl<A, T, F> RowUpdate for RowsOf<'_, A, T, F>
where
    A: Plain,
    T: Copy + Send + Sync,
    F: Fn(&mut A, T) + Sync,
{
    fn apply_at(&self, row: usize, base: [isize; 2], r: Range<usize>, e: usize, fresh: bool) {
        self.at(row, base, r, e, fresh)
    }

    fn apply_run(
        &self,
        at: &Rows,
        ids: &[u32],
        rows_n: usize,
        base: [isize; 2],
        r: Range<usize>,
        line0: isize,
        seen: &mut [u64],
    ) {
        assert_eq!(
            self.strides,
            [1, 1],
            "scatter kernel: a run walk of a strided piece"
        );
        assert!(
            self.init.is_none() || seen.len() * 64 >= rows_n,
            "scatter kernel: a bit per row"
        );
        // Runs of a few elements (a GNN's narrow features) walk with their length known, so
        // that the run's update and the prefetch of its lines are straight-line code: the loops
        // over a run's blocks and lines cost more than the row's update there.
        match r.len() {
            4 => self.walk(at, ids, rows_n, base, r.start, Fixed::<4>, line0, seen),
            8 => self.walk(at, ids, rows_n, base, r.start, Fixed::<8>, line0, seen),
            16 => self.walk(at, ids, rows_n, base, r.start, Fixed::<16>, line0, seen),
            n => self.walk(at, ids, rows_n, base, r.start, Any(n), line0, seen),
        }
    }
}

impl<A, T, F> SegmentUpdate for RowsOf<'_, A, T, F>
where
    A: Plain,
    T: Copy + Send + Sync,
    F: Fn(&mut A, T) + Sync,
{
    fn apply_segment(
        &self,
        row: usize,
        base: [isize; 2],
        r: Range<usize>,
        ahead: &[u32],
        n: usize,
        last_only: bool,
    ) {
        let mine = if last_only { n - 1..n } else { 0..n };
        let [_, ss] = self.strides;
        let line = (64 / std::mem::size_of::<T>().max(1)).max(1);
        let fetch_lines = if ss == 1 {
            r.len().div_ceil(line).min(4)
        } else {
            1
        };
        let sp = self.src.0.wrapping_offset(base[1]).cast_const();
        for (i, q) in mine.enumerate() {
            if let Some(&next) = ahead.get(q + AHEAD) {
                let np = sp.wrapping_offset(next as isize * self.sstride + r.start as isize * ss);
                for l in 0..fetch_lines {
                    super::prefetch(np.wrapping_add(l * line));
                }
            }
            self.at(row, base, r.clone(), ahead[q] as usize, i == 0);
        }
    }
}

/// How many sources ahead (in the grouped order) the grouped walk prefetches. Sources are rows
/// at random places of a large `src`, so each one is a miss to memory: 16 in flight per thread
/// hide most of their latency, and more gain little (see docs/performance.md,
/// "kernels/scatter.rs: AHEAD").
const AHEAD: usize = 16;

impl<A, T, F> RowsOf<'_, A, T, F>
where
    A: Plain,
    T: Copy + Send + Sync,
    F: Fn(&mut A, T) + Sync,
{
    /// See [`RowUpdate::apply_at`].
    #[inline(always)]
    fn at(&self, row: usize, base: [isize; 2], r: Range<usize>, e: usize, fresh: bool) {
        let [ds, ss] = self.strides;
        // SAFETY: `row` is a checked index value below `dst.shape[dim]`, and `base + j * ds`
        // (`j` in `r`) are offsets of positions of the slice shape, which is the index's shape
        // without `dim`, no larger than dst's there (asserted by `Rows::new`): in bounds for dst.
        // `e` is a position along `dim` below `index.shape[dim]` (or the segments' length),
        // at most `src.shape[dim]` (asserted by `Rows::new`), and the slice positions are below
        // the index's, no larger than src's: in bounds for src. Destination rows are distinct
        // between tasks (each segment belongs to one task) or, when slices are split, the slice
        // pieces are (the planner never duplicates a position), so writes never race; src is
        // only read and cannot alias dst (a `&mut` view).
        unsafe {
            let dp = self.dst.0.offset(row as isize * self.dstride + base[0]);
            let s = self
                .src
                .0
                .offset(base[1] + e as isize * self.sstride)
                .cast_const();
            if let (true, Some(v)) = (fresh, self.init) {
                for j in r.clone() {
                    *dp.offset(j as isize * ds) = v;
                }
            }
            if ds == 1 && ss == 1 {
                let d = std::slice::from_raw_parts_mut(dp.add(r.start), r.len());
                let s = std::slice::from_raw_parts(s.add(r.start), r.len());
                for (a, b) in d.iter_mut().zip(s) {
                    (self.update)(a, *b);
                }
            } else {
                for j in r.clone() {
                    let j = j as isize;
                    (self.update)(&mut *dp.offset(j * ds), *s.offset(j * ss));
                }
            }
        }
    }

    /// [`RowUpdate::apply_run`] over runs of `len` elements from `start` in each slice piece.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn walk<L: RunLen>(
        &self,
        at: &Rows,
        ids: &[u32],
        rows_n: usize,
        base: [isize; 2],
        start: usize,
        len: L,
        line0: isize,
        seen: &mut [u64],
    ) {
        let n = len.get();
        let lines = (line0, line_count(n, std::mem::size_of::<A>()));
        let last = ids.len().saturating_sub(1);
        for (e, &row) in ids.iter().enumerate() {
            let row = row as usize;
            assert!(row < rows_n, "scatter kernel: destination row out of range");
            // One loop body: near the end the last row is requested again.
            at.prefetch_row(ids[(e + DIRECT_AHEAD).min(last)] as usize, lines);
            // SAFETY: as in `at` (`row` below `rows_n`, asserted; `e` a position of `ids`, no
            // more than src has along `dim`; `start..start + n` within the slice shape), with
            // both inner strides 1 (asserted by `apply_run`), so that the piece is a run of `n`
            // adjacent elements in dst and in src. dst and src do not overlap (a `&mut` view and
            // a view).
            unsafe {
                let dp = self.dst.0.offset(row as isize * self.dstride + base[0]);
                let sp = self.src.0.offset(base[1] + e as isize * self.sstride);
                let d = std::slice::from_raw_parts_mut(dp.add(start), n);
                let s = std::slice::from_raw_parts(sp.add(start).cast_const(), n);
                if let Some(v) = self.init
                    && first_time(seen, row)
                {
                    d.fill(v);
                }
                update_run(d, s, self.update);
            }
        }
    }
}

/// The update of a grouped row scatter into `f16`/`bf16` rows whose updates accumulate in
/// `T::Acc` (`f32`; see [`Target::reduce_wide`]): each piece of a destination row is widened
/// into a buffer once, takes every source of its segment there, and is rounded back once. A
/// `mean` (`Some(extra)`) divides by the segment's length plus `extra`: in a row index, every
/// element of a row has the segment's sources as its contributors.
struct RowsWide<'f, T: Element> {
    rows: RowsOf<'f, T, T, ()>,
    op: Wide<T::Acc>,
}

/// About how many lines of sources [`RowsWide`] keeps requested ahead: every line of a
/// source's chunk, for the source as many ahead as that makes (from 2 to [`AHEAD`]). Wide rows
/// are read from memory at a random place each, and the hardware prefetcher catches a row's
/// stream only after its first lines (docs/performance.md, "Wide reductions in parts").
const WIDE_LINES: usize = 64;

/// The elements of a destination row piece that [`RowsWide`] widens at a time: 4 KB of `f32`
/// on the stack, which stay in the first-level cache while the segment's sources are added.
const WIDE_CHUNK: usize = 1024;

impl<T: Element> SegmentUpdate for RowsWide<'_, T> {
    fn apply_segment(
        &self,
        row: usize,
        base: [isize; 2],
        r: Range<usize>,
        ahead: &[u32],
        n: usize,
        last_only: bool,
    ) {
        assert!(!last_only, "scatter kernel: a widened plain write");
        let of = &self.rows;
        let [ds, ss] = of.strides;
        let line = 64 / std::mem::size_of::<T>().max(1);
        let op = self.op;
        let count = op.mean.map(|extra| (n as u64 + extra) as usize);
        let mut buf = [T::acc_zero(); WIDE_CHUNK];
        let mut widened = [T::acc_zero(); WIDE_CHUNK];
        let mut c0 = r.start;
        while c0 < r.end {
            let len = (r.end - c0).min(WIDE_CHUNK);
            let (b, w) = (&mut buf[..len], &mut widened[..len]);
            // SAFETY: as in `RowsOf::at`: `row` is a destination row below `dst.shape[dim]`
            // (the segments' rows, asserted by `rows`), `c0..c0 + len` lies in `r`, a range of
            // the slice piece at `base`, whose positions are inside dst and src (`Rows::new`);
            // the sources `ahead[..n]` are positions along `dim` below src's length there. With
            // a stride of 1 the piece is `len` adjacent elements. The piece of this row is this
            // task's alone (`rows`), src is only read and is not dst's memory.
            unsafe {
                let dp = of.dst.0.offset(row as isize * of.dstride + base[0]);
                match (op.init, ds) {
                    (Some(v), _) => b.fill(v),
                    (None, 1) => T::widen_run(std::slice::from_raw_parts(dp.add(c0), len), b),
                    (None, _) => {
                        for (j, a) in b.iter_mut().enumerate() {
                            *a = (*dp.offset((c0 + j) as isize * ds)).to_acc();
                        }
                    }
                }
                let sp = of.src.0.offset(base[1]).cast_const();
                let fetch_lines = if ss == 1 { len.div_ceil(line) } else { 1 };
                let distance = (WIDE_LINES / fetch_lines).clamp(2, AHEAD);
                for q in 0..n {
                    if let Some(&next) = ahead.get(q + distance) {
                        let np = sp.wrapping_offset(next as isize * of.sstride + c0 as isize * ss);
                        for l in 0..fetch_lines {
                            super::prefetch(np.wrapping_add(l * line));
                        }
                    }
                    let s = sp.offset(ahead[q] as isize * of.sstride + c0 as isize * ss);
                    if ss == 1 {
                        T::widen_run(std::slice::from_raw_parts(s, len), w);
                    } else {
                        for (j, x) in w.iter_mut().enumerate() {
                            *x = (*s.offset(j as isize * ss)).to_acc();
                        }
                    }
                    if let Some(alpha) = op.alpha {
                        w.iter_mut().for_each(|x| *x = mul_of(alpha, *x));
                    }
                    if op.prod {
                        b.iter_mut().zip(w.iter()).for_each(|(a, &x)| mul(a, x));
                    } else {
                        b.iter_mut().zip(w.iter()).for_each(|(a, &x)| add(a, x));
                    }
                }
                if let Some(k) = count {
                    b.iter_mut().for_each(|a| *a = T::acc_div_count(*a, k));
                }
                if ds == 1 {
                    T::narrow_run(b, std::slice::from_raw_parts_mut(dp.add(c0), len));
                } else {
                    for (j, a) in b.iter().enumerate() {
                        *dp.offset((c0 + j) as isize * ds) = T::from_acc(*a);
                    }
                }
            }
            c0 += len;
        }
    }
}

/// `update(d[j], s[j])` over a run of adjacent elements (`d` and `s` of one length), in blocks
/// of 8, then one of 4, 2 and 1 as the length needs. LLVM vectorizes a plain loop over the run
/// only from 24 elements on (below that, the checks that `d` and `s` do not overlap cost more
/// than they save), so the short rows of a GNN's features ran one element at a time; a block
/// of fixed length is vectorized as it is, and the tail takes no second, vectorized loop.
#[inline(always)]
fn update_run<A: Copy, T: Copy, F: Fn(&mut A, T)>(d: &mut [A], s: &[T], update: &F) {
    let n = d.len();
    assert_eq!(n, s.len(), "scatter kernel: a run of two lengths");
    let mut j = 0;
    while j + 8 <= n {
        update_block::<A, T, F, 8>(&mut d[j..j + 8], &s[j..j + 8], update);
        j += 8;
    }
    if j + 4 <= n {
        update_block::<A, T, F, 4>(&mut d[j..j + 4], &s[j..j + 4], update);
        j += 4;
    }
    if j + 2 <= n {
        update_block::<A, T, F, 2>(&mut d[j..j + 2], &s[j..j + 2], update);
        j += 2;
    }
    if j < n {
        update(&mut d[j], s[j]);
    }
}

/// `update` over `N` adjacent elements: both blocks are read into registers first, so that no
/// store can change a later load, and the block is one vector operation.
#[inline(always)]
fn update_block<A: Copy, T: Copy, F: Fn(&mut A, T), const N: usize>(
    d: &mut [A],
    s: &[T],
    update: &F,
) {
    let s: [T; N] = s.try_into().expect("a block of N sources");
    let mut v: [A; N] = (&*d).try_into().expect("a block of N targets");
    for (a, b) in v.iter_mut().zip(s) {
        update(a, b);
    }
    d.copy_from_slice(&v);
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use crate::ops::scatter::Reduce;
    use half::{bf16, f16};
    use ndarray::{Array, Array2, ArrayD, Axis, Dimension, IxDyn, s};

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn values(shape: &[usize], seed: u64) -> ArrayD<f32> {
        let mut s = seed;
        Array::from_shape_simple_fn(IxDyn(shape), || (lcg(&mut s) % 2001) as f32 * 1.37e-3 - 1.3)
    }

    fn ids(n: usize, hi: usize, seed: u64) -> ArrayD<i64> {
        let mut s = seed;
        Array::from_shape_simple_fn(IxDyn(&[n]), || (lcg(&mut s) % hi as u64) as i64)
    }

    /// The definition: every reached element set to `init` (if any), then `update` at each
    /// position in row-major order of the index (which is index order per destination element).
    fn reference(
        dst: &ArrayView<'_, f32, IxDyn>,
        dim: usize,
        idx: &ArrayView<'_, i64, IxDyn>,
        src: &ArrayView<'_, f32, IxDyn>,
        init: Option<f32>,
        update: impl Fn(&mut f32, f32),
    ) -> ArrayD<f32> {
        let mut out = dst.to_owned();
        let at = |p: &[usize], v: i64| {
            let mut q = p.to_vec();
            q[dim] = v as usize;
            q
        };
        if let Some(v) = init {
            for (p, &i) in idx.indexed_iter() {
                out[IxDyn(&at(p.slice(), i))] = v;
            }
        }
        for (p, &i) in idx.indexed_iter() {
            update(&mut out[IxDyn(&at(p.slice(), i))], src[p.clone()]);
        }
        out
    }

    /// How the destination is laid out in memory: as given, reversed along axis 0, or the
    /// transpose of a 2-d array.
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        Plain,
        Reversed,
        Transposed,
    }

    fn lay(layout: Layout, mut v: ArrayViewMut<'_, f32, IxDyn>) -> ArrayViewMut<'_, f32, IxDyn> {
        match layout {
            Layout::Plain => {}
            Layout::Reversed => v.invert_axis(Axis(0)),
            Layout::Transposed => v.reverse_axes(),
        }
        v
    }

    /// Runs the kernel (on a destination laid out as `layout` says), in pools of 1, 2 and 3
    /// threads, and compares bitwise with the reference, for sums, amax and prod from an
    /// identity, and plain writes.
    fn check(
        name: &str,
        dst: &ArrayD<f32>,
        layout: Layout,
        dim: usize,
        idx: &ArrayView<'_, i64, IxDyn>,
        src: &ArrayView<'_, f32, IxDyn>,
    ) {
        type Case = (&'static str, Option<f32>, bool, fn(&mut f32, f32));
        let cases: [Case; 4] = [
            ("add", None, false, |a, s| *a += s),
            ("amax from -inf", Some(f32::NEG_INFINITY), false, |a, s| {
                *a = a.max(s)
            }),
            ("prod from 1", Some(1.0), false, |a, s| *a *= s),
            ("set", None, true, |a, s| *a = s),
        ];
        for (what, init, last_only, update) in cases {
            let mut start = dst.clone();
            let want = reference(
                &lay(layout, start.view_mut()).view(),
                dim,
                idx,
                src,
                init,
                update,
            );
            let bits_equal = |got: &ArrayD<f32>| {
                got.iter()
                    .zip(want.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            };
            for threads in [1, 2, 3] {
                let pool = crate::kernels::test_pool(threads);
                // Runs `kernel` on a fresh copy of `dst` in `layout`, in the pool.
                let run = |kernel: &(dyn Fn(&mut ArrayViewMut<'_, f32, IxDyn>, usize) + Sync)| {
                    pool.install(|| {
                        let mut owner = dst.clone();
                        let mut out = lay(layout, owner.view_mut());
                        let size = out.shape()[dim];
                        kernel(&mut out, size);
                        out.to_owned()
                    })
                };
                let got = run(&|out, size| {
                    let checked =
                        CheckedIndex::new("t", idx.clone(), dim, size, Bounds::Strict).unwrap();
                    scatter_impl(out, dim, &checked, src, init, last_only, update);
                });
                assert!(
                    bits_equal(&got),
                    "{name} {what}: threads {threads}, dst {:?} {layout:?}, idx {:?} strides {:?}",
                    dst.shape(),
                    idx.shape(),
                    idx.strides()
                );
                // The checking element loop (out-of-place ops), on every index: same bits, and no
                // value flagged.
                if dst.shape()[dim] == 0 {
                    continue;
                }
                let bad = AtomicBool::new(false);
                let fused = run(&|out, size| {
                    scatter_checking(out, dim, idx, size, src, init, &bad, update);
                });
                assert!(
                    !bad.into_inner(),
                    "{name} {what}: checking kernel flagged a valid index"
                );
                assert!(
                    bits_equal(&fused),
                    "{name} {what}: checking kernel differs, threads {threads}"
                );
                // The fresh form (out-of-place ops without an init): the copy of the laid-out
                // destination made inside the tasks, or before them, then the same loop.
                if init.is_some() {
                    continue;
                }
                let fresh = pool.install(|| {
                    let mut owner = dst.clone();
                    let from = lay(layout, owner.view_mut());
                    let from = from.view();
                    let bad = AtomicBool::new(false);
                    let v = Vec::with_capacity(from.len());
                    let v = scatter_checking_fresh(&from, v, dim, idx, src, &bad, update);
                    assert!(!bad.into_inner(), "{name} {what}: fresh kernel flagged");
                    Array::from_shape_vec(from.raw_dim(), v).unwrap()
                });
                assert!(
                    bits_equal(&fresh),
                    "{name} {what}: fresh kernel differs, threads {threads}, dst {:?} {layout:?}",
                    dst.shape()
                );
            }
        }
    }

    #[test]
    fn fresh_scatters_copy_every_element_once_whatever_the_layout() {
        let mut s = 41u64;
        let mut idx = |shape: &[usize], hi: usize| {
            Array::from_shape_simple_fn(IxDyn(shape), || (lcg(&mut s) % hi as u64) as i64)
        };
        // dim 0 of a 2-d destination: `dim` is the middle loop, the rows' columns the inner one,
        // with large (parallel) and small sizes, and the destination transposed in memory.
        let large = (sized(400, 24), sized(300, 20), sized(150, 30));
        for (rows, cols, k) in [large, (5, 3, 7)] {
            let i = idx(&[k, cols], rows);
            let (src, dst) = (values(&[k, cols], 42), values(&[rows, cols], 43));
            check(
                "fresh dim 0",
                &dst,
                Layout::Plain,
                0,
                &i.view(),
                &src.view(),
            );
            let dst_t = values(&[cols, rows], 44);
            let i_t = idx(&[cols, k], cols);
            let src_t = values(&[cols, k], 45);
            check(
                "fresh transposed dim 1",
                &dst_t,
                Layout::Transposed,
                1,
                &i_t.view(),
                &src_t.view(),
            );
        }
        // One position along `dim` (the planner drops that axis): the copy still covers all of it.
        let (a, d, c) = (sized(300, 26), sized(90, 8), sized(120, 20));
        let i = idx(&[a, 1, c], d);
        let (src, dst) = (values(&[a, 1, c], 46), values(&[a, d, c], 47));
        check(
            "fresh one position along dim",
            &dst,
            Layout::Plain,
            1,
            &i.view(),
            &src.view(),
        );
        check(
            "fresh reversed",
            &dst,
            Layout::Reversed,
            1,
            &i.view(),
            &src.view(),
        );
        // An index narrower than the destination off `dim`: copied first, then scattered.
        let (r, k, c) = (sized(250, 20), sized(40, 30), sized(60, 40));
        let i = idx(&[r, k], c);
        let (src, dst) = (values(&[r, k + 10], 48), values(&[r + 10, c], 49));
        check(
            "fresh narrow index",
            &dst,
            Layout::Plain,
            1,
            &i.view(),
            &src.view(),
        );
        // A 1-d destination, one task.
        let (n, d) = (sized(50_000, 600), sized(1000, 50));
        let i = idx(&[n], d);
        let (src, dst) = (values(&[n], 50), values(&[d], 51));
        check("fresh 1-d", &dst, Layout::Plain, 0, &i.view(), &src.view());
    }

    #[test]
    fn grouped_element_loop_keeps_index_order_inside_each_group_of_four() {
        // The loop along a unit-stride `dim` (W11) takes four index values at a time. Three
        // columns put equal values inside most groups (sums in index order, the last write
        // kept); rows of 4k + 3 positions leave a tail of three; a wide row takes the W11 shape.
        let rows = sized(200, 12);
        for (cols, k, seed) in [(3, 43, 61), (sized(1000, 90), sized(503, 47), 62)] {
            let i = ids(rows * k, cols, seed).into_shape_with_order(IxDyn(&[rows, k]));
            let i = i.unwrap();
            let (src, dst) = (
                values(&[rows, k], seed + 1),
                values(&[rows, cols], seed + 2),
            );
            check("grouped", &dst, Layout::Plain, 1, &i.view(), &src.view());
            check(
                "grouped reversed",
                &dst,
                Layout::Reversed,
                1,
                &i.view(),
                &src.view(),
            );
        }
    }

    #[test]
    fn checking_kernel_flags_any_out_of_range_value_wherever_it_is() {
        let (rows, cols, k) = (sized(300, 16), 50, 40);
        let mut s = 31u64;
        let good =
            Array::from_shape_simple_fn(IxDyn(&[rows, k]), || (lcg(&mut s) % cols as u64) as i64);
        let src = values(&[rows, k], 32);
        let dst = values(&[rows, cols], 33);
        for bad_value in [-1, cols as i64, i64::MIN, i64::MAX] {
            for at in [[0, 0], [rows / 2, k / 3], [rows - 1, k - 1]] {
                let mut idx = good.clone();
                idx[IxDyn(&at)] = bad_value;
                for threads in [1, 2] {
                    let bad = crate::kernels::test_pool(threads).install(|| {
                        let mut out = dst.clone();
                        let bad = AtomicBool::new(false);
                        let mut v = out.view_mut();
                        let (i, sv) = (idx.view(), src.view());
                        scatter_checking(&mut v, 1, &i, cols, &sv, None, &bad, |a, s| *a += s);
                        let fresh = AtomicBool::new(false);
                        let (from, buf) = (dst.view(), Vec::with_capacity(dst.len()));
                        scatter_checking_fresh(&from, buf, 1, &i, &sv, &fresh, |a, s| *a += s);
                        [bad.into_inner(), fresh.into_inner()]
                    });
                    assert_eq!(bad, [true; 2], "{bad_value} at {at:?}, threads {threads}");
                }
            }
        }
    }

    /// `ids` as the values along `dim` of a rank-`nd` array, with length-1 axes elsewhere (to be
    /// broadcast to a row index: stride 0 along every other axis).
    fn axes(ids: &ArrayD<i64>, dim: usize, nd: usize) -> ArrayView<'_, i64, IxDyn> {
        let mut v = ids.view();
        for _ in 0..dim {
            v = v.insert_axis(Axis(0));
        }
        while v.ndim() < nd {
            let k = v.ndim();
            v = v.insert_axis(Axis(k));
        }
        v
    }

    #[test]
    fn slices_of_short_runs_take_the_element_loop() {
        // index_add along the last dim of a matrix: each slice is a column, runs of 1.
        let n = sized(2048, 64);
        let along_1 = Array::from_shape_fn(n, |j| ((j * 7) % n) as i64);
        let col = along_1.view().insert_axis(Axis(0)).into_dyn();
        let col = col.broadcast(IxDyn(&[n, n])).unwrap();
        assert!(rows_of(&col, 1).is_none());
        // Runs of ROW_MIN_RUN elements and more, or one run per slice, keep the row loops.
        let middle = along_1
            .view()
            .insert_axis(Axis(0))
            .insert_axis(Axis(2))
            .into_dyn();
        let wide = middle.broadcast(IxDyn(&[4, n, ROW_MIN_RUN])).unwrap();
        assert_eq!(rows_of(&wide, 1), Some(4 * ROW_MIN_RUN));
        let narrow = middle.broadcast(IxDyn(&[4, n, ROW_MIN_RUN - 1])).unwrap();
        assert!(rows_of(&narrow, 1).is_none());
        let rows = along_1.view().insert_axis(Axis(1)).into_dyn();
        let rows = rows.broadcast(IxDyn(&[n, 32])).unwrap();
        assert_eq!(rows_of(&rows, 0), Some(32));
    }

    #[test]
    fn row_index_scatters_match_the_serial_definition() {
        // GNN-like: many destination rows, duplicates, slices of 64.
        let (e, rows, w) = (sized(3000, 40), sized(200, 12), sized(64, 16));
        let ids_a = ids(e, rows, 1);
        let src = values(&[e, w], 2);
        let dst = values(&[rows, w], 3);
        let idx_axes = axes(&ids_a, 0, 2);
        let idx = idx_axes.broadcast(IxDyn(&[e, w])).unwrap();
        assert!(is_row_index(&idx, 0));
        check("rows", &dst, Layout::Plain, 0, &idx, &src.view());
        // Index narrower than src and dst along the slice; src reversed; dst reversed.
        let narrow_axes = axes(&ids_a, 0, 2);
        let narrow = narrow_axes.broadcast(IxDyn(&[e, sized(40, 10)])).unwrap();
        let src_rev = src.slice(s![..;-1, ..;-1]).into_dyn();
        check(
            "narrow, reversed src",
            &dst,
            Layout::Plain,
            0,
            &narrow,
            &src_rev,
        );
        check("reversed dst", &dst, Layout::Reversed, 0, &idx, &src.view());
        // Slices of 15 (a run updated in blocks of 8, 4, 2 and 1), of 16, 8 and 4 (the walk's
        // runs of a length known when compiled) and of 3 (walked in source order where the walk
        // runs, on one thread or two into this small destination; the element loop elsewhere).
        for (name, e_w, width, seed) in [
            ("slices of 15", e, 15, 14),
            ("slices of 16", e, 16, 20),
            ("slices of 8", e, 8, 23),
            ("slices of 4", sized(12_000, 200), 4, 26),
            ("slices of 3", sized(12_000, 200), 3, 17),
        ] {
            let ids_w = ids(e_w, rows, seed);
            let axes_w = axes(&ids_w, 0, 2);
            let idx_w = axes_w.broadcast(IxDyn(&[e_w, width])).unwrap();
            let src_w = values(&[e_w, width], seed + 1);
            let dst_w = values(&[rows, width], seed + 2);
            check(name, &dst_w, Layout::Plain, 0, &idx_w, &src_w.view());
        }
        // Few destination rows: the slices are split over the tasks instead.
        let few = ids(e, 3, 4);
        let few_idx_axes = axes(&few, 0, 2);
        let few_idx = few_idx_axes.broadcast(IxDyn(&[e, w])).unwrap();
        check(
            "few rows",
            &values(&[3, w], 5),
            Layout::Plain,
            0,
            &few_idx,
            &src.view(),
        );
        // Far more rows than positions: the grouping sorts instead of counting.
        let (e8, rows8) = (sized(5000, 100), sized(100_000, 1300));
        let sparse = ids(e8, rows8, 6);
        let sparse_idx_axes = axes(&sparse, 0, 2);
        let sparse_idx = sparse_idx_axes.broadcast(IxDyn(&[e8, 8])).unwrap();
        let src8 = values(&[e8, 8], 7);
        check(
            "sorted",
            &values(&[rows8, 8], 8),
            Layout::Plain,
            0,
            &sparse_idx,
            &src8.view(),
        );
        // dim 1 (the index constant along axis 0), into a transposed destination.
        let d1 = values(&[rows, w], 9);
        let idx1_axes = axes(&ids_a, 1, 2);
        let idx1 = idx1_axes.broadcast(IxDyn(&[w, e])).unwrap();
        let src1 = values(&[e, w], 10);
        check(
            "dim 1",
            &d1,
            Layout::Transposed,
            1,
            &idx1,
            &src1.t().into_dyn(),
        );
        // The same with runs long enough for `dim` to go outside them (`plan_general`), the
        // source row-major as the index_* ops pass it.
        let long = SERIAL_OUTSIDE_MIN_RUN + 32;
        let idx_long = idx1_axes.broadcast(IxDyn(&[long, e])).unwrap();
        let (dst_long, src_long) = (values(&[rows, long], 27), values(&[long, e], 28));
        let nest = plan_general(
            1,
            &[long, e],
            [&[1, long as isize], idx_long.strides(), src_long.strides()],
            None,
        )
        .0;
        assert_eq!(nest.inner.len, long, "dim outside the run");
        check(
            "dim 1, long runs",
            &dst_long,
            Layout::Transposed,
            1,
            &idx_long,
            &src_long.view(),
        );
        // 3-d: [E] viewed [E,1,1] and expanded to [E,4,16].
        let (e3, rows3) = (sized(2000, 40), sized(50, 10));
        let ids3 = ids(e3, rows3, 11);
        let idx3_axes = axes(&ids3, 0, 3);
        let idx3 = idx3_axes.broadcast(IxDyn(&[e3, 4, 16])).unwrap();
        let src3 = values(&[e3, 4, 16], 13);
        check(
            "3-d",
            &values(&[rows3, 4, 16], 12),
            Layout::Plain,
            0,
            &idx3,
            &src3.view(),
        );
    }

    #[test]
    fn general_scatters_match_the_serial_definition() {
        // Small (serial) and larger (parallel) calls with duplicates along dim 1.
        let parallel = [
            (sized(300, 24), sized(200, 30), sized(150, 24)),
            (sized(1000, 40), sized(100, 20), sized(120, 16)),
        ];
        for (rows, cols, k) in [(2, 3, 2), parallel[0], parallel[1]] {
            let mut s = 14u64;
            let idx = Array::from_shape_simple_fn(IxDyn(&[rows, k]), || {
                (lcg(&mut s) % cols as u64) as i64
            });
            let src = values(&[rows, k], 15);
            let dst = values(&[rows, cols], 16);
            check("dim 1", &dst, Layout::Plain, 1, &idx.view(), &src.view());
            let idx_rev = idx.slice(s![..;-1, ..;-1]).into_dyn();
            check(
                "dim 1, reversed index",
                &dst,
                Layout::Reversed,
                1,
                &idx_rev,
                &src.view(),
            );
        }
        let empty = ArrayD::<i64>::zeros(IxDyn(&[0, 4]));
        check(
            "empty",
            &values(&[3, 4], 17),
            Layout::Plain,
            0,
            &empty.view(),
            &values(&[0, 4], 18).view(),
        );
    }

    /// The reductions of the signed integers' sums and products and of `bool` run on the bits of
    /// the unsigned type of their width (`Element::Bits`): each kernel path (checked index, fresh
    /// copy with the check in the loop, grouped row index, broadcast row index) must still give
    /// the type's own wrapping, floor-division and logical results.
    #[test]
    fn reductions_on_bits_keep_the_arithmetic_of_the_type() {
        fn reference<T: Element>(
            x: &Array2<T>,
            dim: usize,
            idx: &ArrayView<'_, i64, ndarray::Ix2>,
            src: &Array2<T>,
            r: Reduce,
            include_self: bool,
        ) -> Array2<T> {
            let mut acc = x.mapv(|v| v.to_acc());
            let mut n = Array2::<usize>::zeros(x.raw_dim());
            for ((i, j), &k) in idx.indexed_iter() {
                let at = if dim == 0 {
                    (k as usize, j)
                } else {
                    (i, k as usize)
                };
                let s = src[(i, j)].to_acc();
                if !include_self && n[at] == 0 {
                    acc[at] = s;
                } else {
                    acc[at] = match r {
                        Reduce::Sum | Reduce::Mean => T::acc_add(acc[at], s),
                        Reduce::Prod => T::acc_mul(acc[at], s),
                        Reduce::Amax => T::acc_max(acc[at], s),
                        Reduce::Amin => T::acc_min(acc[at], s),
                    };
                }
                n[at] += 1;
            }
            let mut out = acc.mapv(T::from_acc);
            if r == Reduce::Mean {
                for ((o, &a), &c) in out.iter_mut().zip(&acc).zip(&n) {
                    if c > 0 {
                        *o = T::from_acc(T::acc_div_count(a, c + include_self as usize));
                    }
                }
            }
            out
        }
        fn case<T: Element>(to: impl Fn(i64) -> T) {
            let mut s = 5u64;
            let mut next = |hi: usize| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((s >> 33) % hi as u64) as usize
            };
            let (rows, cols) = (sized(300, 24), sized(400, 16));
            let x = Array2::from_shape_fn((rows, cols), |(i, j)| {
                to((i * 7 + j * 13) as i64 % 251 - 125)
            });
            let random = Array2::from_shape_simple_fn((rows, sized(9, 5)), || next(cols) as i64);
            // One destination row per position along dim 0, the same across the row: the grouped
            // row loops.
            let e = sized(150, 20);
            let by_row = Array2::from_shape_simple_fn((e, 1), || next(rows) as i64);
            let by_row = by_row.broadcast((e, cols)).unwrap();
            let src = Array2::from_shape_simple_fn((rows, cols), || to(next(251) as i64 - 125));
            for (dim, idx) in [(1, random.view()), (0, by_row.view())] {
                let src = src
                    .slice(ndarray::s![..idx.nrows(), ..idx.ncols()])
                    .to_owned();
                for r in [
                    Reduce::Sum,
                    Reduce::Prod,
                    Reduce::Amax,
                    Reduce::Amin,
                    Reduce::Mean,
                ] {
                    if T::DTYPE == DType::Bool && r == Reduce::Mean {
                        continue;
                    }
                    for include_self in [true, false] {
                        let want = reference(&x, dim, &idx, &src, r, include_self);
                        let d = dim as isize;
                        let got =
                            crate::scatter_reduce(&x, d, &idx, &src, r, include_self).unwrap();
                        let what =
                            format!("{:?} {r:?} include_self {include_self} dim {dim}", T::DTYPE);
                        assert!(got == want, "out of place: {what}");
                        let mut got = x.clone();
                        crate::scatter_reduce_inplace(&mut got, d, &idx, &src, r, include_self)
                            .unwrap();
                        assert!(got == want, "in place: {what}");
                        if dim == 0 {
                            let plan = crate::ScatterPlan::new(&idx.column(0), rows).unwrap();
                            let got = plan.scatter_reduce(&x, &src, r, include_self).unwrap();
                            assert!(got == want, "plan: {what}");
                        }
                    }
                }
            }
        }
        case(|v| v as i8);
        case(|v| (v * 300) as i16);
        case(|v| (v * 20_000_000) as i32);
        case(|v| v.wrapping_mul(0x0123_4567_89ab_cdef));
        case(|v| v as u8);
        // Unsigned values on both sides of the top bit: ordered as they are, without a flip.
        case(|v| (v * 300) as u16);
        case(|v| (v * 20_000_000) as u32);
        case(|v| (v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        case(|v| v > 0);
        case(|v| v as f32 / 8.0);
    }

    /// Every reduction and both `include_self`, through the op, on a stride-0 row index (the
    /// segment path) and on the same index materialised (the general path, which the
    /// conformance suite checks against PyTorch): bitwise the same results.
    fn segment_path_matches_general_path<T: crate::Element>(to: impl Fn(f32) -> T) {
        let (e, rows) = (sized(4000, 40), sized(300, 12));
        let ids_a = ids(e, rows, 19);
        let expanded_axes = axes(&ids_a, 0, 2);
        let expanded = expanded_axes.broadcast(IxDyn(&[e, 24])).unwrap();
        let materialised = expanded.to_owned();
        let src = values(&[e, 24], 20).mapv(&to);
        let dst = values(&[rows, 24], 21).mapv(&to);
        for r in [
            Reduce::Sum,
            Reduce::Prod,
            Reduce::Mean,
            Reduce::Amax,
            Reduce::Amin,
        ] {
            for include_self in [true, false] {
                let general = crate::ops::scatter::scatter_reduce(
                    &dst,
                    0,
                    &materialised,
                    &src,
                    r,
                    include_self,
                )
                .unwrap();
                for threads in [1, 2, 3] {
                    let rows = crate::kernels::test_pool(threads).install(|| {
                        crate::ops::scatter::scatter_reduce(
                            &dst,
                            0,
                            &expanded,
                            &src,
                            r,
                            include_self,
                        )
                        .unwrap()
                    });
                    let same = rows
                        .iter()
                        .zip(general.iter())
                        .all(|(a, b)| a.to_f64().to_bits() == b.to_f64().to_bits());
                    assert!(
                        same,
                        "{:?} {r:?} include_self {include_self} threads {threads}",
                        T::DTYPE
                    );
                }
            }
        }
        // scatter_add and scatter (set) as well.
        let general = crate::ops::scatter::scatter_add(&dst, 0, &materialised, &src).unwrap();
        let rows = crate::ops::scatter::scatter_add(&dst, 0, &expanded, &src).unwrap();
        assert!(
            rows.iter()
                .zip(general.iter())
                .all(|(a, b)| a.to_f64().to_bits() == b.to_f64().to_bits())
        );
        let general = crate::ops::scatter::scatter(&dst, 0, &materialised, &src).unwrap();
        let rows = crate::ops::scatter::scatter(&dst, 0, &expanded, &src).unwrap();
        assert!(
            rows.iter()
                .zip(general.iter())
                .all(|(a, b)| a.to_f64().to_bits() == b.to_f64().to_bits())
        );
    }

    #[test]
    fn segment_path_matches_general_path_for_every_reduction_f32() {
        segment_path_matches_general_path(|v| v);
    }

    #[test]
    fn segment_path_matches_general_path_for_every_reduction_f16_bf16() {
        segment_path_matches_general_path(f16::from_f32);
        segment_path_matches_general_path(bf16::from_f32);
    }

    #[test]
    fn segment_path_matches_general_path_for_every_reduction_ints() {
        segment_path_matches_general_path(|v| (v * 100.0) as i32);
        segment_path_matches_general_path(|v| (v * 100.0) as u8);
    }

    /// `reduce_wide` against the definition in `f32` rounded once: every reached element set to
    /// `init`, updates in index order, a mean divided by its count (plus `extra`).
    fn check_wide(
        dst: ArrayViewMut<'_, f16, IxDyn>,
        dim: usize,
        idx: &ArrayView<'_, i64, IxDyn>,
        src: &ArrayView<'_, f16, IxDyn>,
        prod: bool,
        include_self: bool,
        mean: bool,
    ) {
        let mut dst = dst;
        let before = dst.mapv(f16::to_f32);
        let src32 = src.mapv(f16::to_f32);
        let init = (!include_self).then_some(if prod { 1.0 } else { 0.0 });
        let up = |a: &mut f32, s: f32| if prod { *a *= s } else { *a += s };
        let mut want = reference(&before.view(), dim, idx, &src32.view(), init, up);
        if mean {
            let ones = ArrayD::from_elem(idx.raw_dim(), 1.0f32);
            let zeros = ArrayD::<f32>::zeros(before.raw_dim());
            let n = reference(&zeros.view(), dim, idx, &ones.view(), None, |a, s| *a += s);
            ndarray::Zip::from(&mut want).and(&n).for_each(|w, &n| {
                if n > 0.0 {
                    *w /= n + include_self as u8 as f32;
                }
            });
        }
        let checked =
            CheckedIndex::new("t", idx.view(), dim, dst.shape()[dim], Bounds::Strict).unwrap();
        let target = Target::Index {
            dim,
            index: &checked,
        };
        let op = Wide {
            prod,
            alpha: None,
            init,
            mean: mean.then_some(include_self as u64),
        };
        target.reduce_wide(&mut dst, src, op);
        let got = dst.mapv(|v| v.to_bits());
        assert_eq!(got, want.mapv(|v| f16::from_f32(v).to_bits()));
    }

    #[test]
    fn widened_reductions_round_once_in_every_block_and_row_layout() {
        let f = |shape: &[usize], seed: u64, lo: f32| {
            values(shape, seed).mapv(|v| f16::from_f32(lo + v.abs() * 0.75))
        };
        let random_idx = |shape: &[usize], hi: usize, seed: u64| {
            ids(shape.iter().product(), hi, seed)
                .into_shape_with_order(IxDyn(shape))
                .unwrap()
        };
        let n = sized(1, 0) * 80 + 4;
        for (prod, include_self, mean) in [
            (false, true, false),
            (false, false, false),
            (true, true, false),
            (true, false, false),
            (false, true, true),
            (false, false, true),
        ] {
            let lo = if prod { 0.6 } else { -0.5 };
            // Blocks of rows (dim 1), and strips of columns (dim 0), of a destination larger
            // than the index off `dim`, from a src larger than the index; the destination
            // also as a view with a stride.
            for dim in [0, 1] {
                let mut dshape = [3 * n, 4 * n];
                dshape[dim] = 4 * n;
                let mut ishape = [3 * n - 8, 5 * n];
                ishape[1 - dim] = 3 * n - 8;
                ishape[dim] = 5 * n;
                let idx = random_idx(&ishape, dshape[dim], 7 + dim as u64);
                let src = f(&[ishape[0] + 3, ishape[1] + 5], 11, lo);
                let mut dst = f(&dshape, 13, lo);
                check_wide(
                    dst.view_mut(),
                    dim,
                    &idx.view(),
                    &src.view(),
                    prod,
                    include_self,
                    mean,
                );
                let mut wide = f(&[dshape[0], 2 * dshape[1]], 17, lo);
                let strided = wide.slice_mut(s![.., ..;2]).into_dyn();
                check_wide(
                    strided,
                    dim,
                    &idx.view(),
                    &src.view(),
                    prod,
                    include_self,
                    mean,
                );
            }
            // A row index (grouped rows) along dim 0 and along dim 1 of a 3-d destination.
            for dim in [0, 1] {
                let e = 3 * n;
                let rows = ids(e, n / 2, 19);
                let mut shape = vec![4, 2 * n, 40];
                let mut ishape = shape.clone();
                ishape[dim] = e;
                let axes = axes(&rows, dim, 3);
                let idx = axes.broadcast(IxDyn(&ishape)).unwrap();
                assert!(is_row_index(&idx, dim));
                shape[dim] = n / 2;
                let src = f(&ishape, 23, lo);
                let mut dst = f(&shape, 29, lo);
                check_wide(
                    dst.view_mut(),
                    dim,
                    &idx,
                    &src.view(),
                    prod,
                    include_self,
                    mean,
                );
            }
            if cfg!(miri) || include_self || (mean && prod) {
                continue;
            }
            // One line, widened a piece along `dim` at a time.
            let e = WIDE_SRC + sized(1000, 0) + 7;
            let idx = random_idx(&[e], 300, 31);
            let src = f(&[e], 37, if prod { 0.999 } else { -0.5 });
            let mut dst = f(&[300], 41, lo);
            check_wide(
                dst.view_mut(),
                0,
                &idx.view(),
                &src.view(),
                prod,
                include_self,
                mean,
            );
        }
    }

    #[test]
    fn f16_row_sums_accumulate_in_f32() {
        // 3000 ones into one row: an f16 running sum sticks at 2048 (2048 + 1 rounds back to
        // 2048); accumulated in f32 and rounded once, the sum is 3000.
        let e = 3000;
        let zeros = ArrayD::<i64>::zeros(IxDyn(&[e]));
        let idx_axes = axes(&zeros, 0, 2);
        let w = sized(16, 8);
        let idx = idx_axes.broadcast(IxDyn(&[e, w])).unwrap();
        let src = ArrayD::from_elem(IxDyn(&[e, w]), f16::ONE);
        let dst = ArrayD::from_elem(IxDyn(&[2, w]), f16::ZERO);
        let out = crate::ops::scatter::scatter_add(&dst, 0, &idx, &src).unwrap();
        assert!(
            out.index_axis(Axis(0), 0)
                .iter()
                .all(|&v| v == f16::from_f32(3000.0))
        );
        assert!(out.index_axis(Axis(0), 1).iter().all(|&v| v == f16::ZERO));
    }
}
