//! The write kernel: `update(&mut dst[p with p[dim] := index[p]], src[p])` over the index's shape.
//!
//! scatter (set, value form, legacy reduce), scatter_add, scatter_reduce, index_add, index_copy,
//! index_fill and index_reduce all run here; the last four pass an index broadcast over the non-dim
//! axes. The planner keeps `dim` as the serial axis: positions that can hit the same destination
//! element differ only in their `dim` coordinate, so they are visited by one thread in ascending
//! order. That makes every result deterministic, whatever the number of threads: `scatter` keeps the
//! last write in index order, and float sums add in index order, as PyTorch's CPU kernel does.

use std::ops::Range;

use ndarray::{ArrayView, ArrayViewMut, IxDyn};
use rayon::prelude::*;

use super::segment::Segments;
use super::{SharedPtr, position};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::plan::Nest;

/// Applies `update(dst_elem, src_elem)` for every position of the index; updates that reach the
/// same destination element run in index order.
///
/// Preconditions (asserted, O(rank)): `dst`, `index` and `src` have the same rank; `dim` is one of
/// its axes; `index.shape[d] <= src.shape[d]` for every `d`; `index.shape[d] <= dst.shape[d]` for
/// every `d != dim`; the index was checked against `dst.shape[dim]`.
pub(crate) fn scatter<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    update: F,
) where
    A: Copy + Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    scatter_impl(dst, dim, index, src, None, false, update)
}

/// A reduction: every destination element the index reaches is first set to `init` (when given:
/// `include_self = false`), then `update(dst_elem, src_elem)` runs for every position of the index,
/// in index order per destination element. Preconditions as [`scatter`].
pub(crate) fn scatter_reduce<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    init: Option<A>,
    update: F,
) where
    A: Copy + Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    scatter_impl(dst, dim, index, src, init, false, update)
}

/// A plain write, `dst_elem = src_elem`: with duplicates the last position in index order wins.
/// Preconditions as [`scatter`].
pub(crate) fn scatter_set<T, I>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
{
    scatter_impl(dst, dim, index, src, None, true, |a: &mut T, s: T| *a = s)
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
    A: Copy + Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let idx = index.view();
    let nd = dst.ndim();
    assert_eq!(idx.ndim(), nd, "scatter kernel: rank mismatch (index)");
    assert_eq!(src.ndim(), nd, "scatter kernel: rank mismatch (src)");
    assert!(dim < nd, "scatter kernel: dim out of range");
    assert_eq!(
        index.size(),
        dst.shape()[dim],
        "scatter kernel: index checked against another size"
    );
    for d in 0..nd {
        assert!(
            idx.shape()[d] <= src.shape()[d],
            "scatter kernel: index larger than src"
        );
        assert!(
            d == dim || idx.shape()[d] <= dst.shape()[d],
            "scatter kernel: index larger than dst"
        );
    }
    if idx.is_empty() {
        return;
    }
    if row_index(index, dim) {
        let segs = Segments::of_row_index(index, dim);
        rows(dst, dim, index, src, &segs, init, last_only, &update);
        return;
    }
    if let Some(v) = init {
        let one = [v];
        let one = ArrayView::from(&one[..]).into_dyn();
        let ones = one.broadcast(idx.raw_dim()).expect("broadcast");
        general(dst, dim, index, &ones, |a: &mut A, s: A| *a = s);
    }
    general(dst, dim, index, src, update);
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
    let idx = index.view();
    let shape = idx.shape().to_vec();
    let mut dst_strides = dst.strides().to_vec();
    let dstride = dst_strides[dim];
    dst_strides[dim] = 0;
    let nest = Nest::<3>::new(
        &shape,
        [&dst_strides, idx.strides(), src.strides()],
        Some(dim),
    );
    let dptr = SharedPtr(dst.as_mut_ptr());
    let iptr = SharedPtr(idx.as_ptr() as *mut I);
    let sptr = SharedPtr(src.as_ptr() as *mut T);
    let size = index.size();
    match index.bounds() {
        Bounds::Strict => run(&nest, dptr, iptr, sptr, dstride, |v| v as isize, &update),
        Bounds::Wrap => run(
            &nest,
            dptr,
            iptr,
            sptr,
            dstride,
            |v| position(Bounds::Wrap, v, size),
            &update,
        ),
        Bounds::Modulo => run(
            &nest,
            dptr,
            iptr,
            sptr,
            dstride,
            |v| position(Bounds::Modulo, v, size),
            &update,
        ),
    }
}

fn run<A, T, I, M, F>(
    nest: &Nest<3>,
    dst: SharedPtr<A>,
    idx: SharedPtr<I>,
    src: SharedPtr<T>,
    dstride: isize,
    map: M,
    update: &F,
) where
    A: Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64) -> isize + Sync + Send,
    F: Fn(&mut A, T) + Sync + Send,
{
    let [ds, is, ss] = nest.inner.strides;
    let (mid_len, [mds, mis, mss]) = nest.mid.map_or((1, [0; 3]), |m| (m.len, m.strides));
    nest.for_each(|base, r| {
        let (d, i, s) = (dst, idx, src);
        // SAFETY: offsets are those of positions inside the index's shape. For the index they are
        // in bounds of its own view; for src, whose every size is at least the index's (asserted),
        // too. For dst, each non-dim coordinate is below the index's size there (at most dst's,
        // asserted) and the dim coordinate is a checked index value mapped into `0..dst.shape[dim]`.
        // Writes never race: dst is a `ArrayViewMut`, so distinct coordinates are distinct memory;
        // positions whose destinations can coincide share every non-dim coordinate, and the planner
        // keeps those in one task (dim is the serial axis; it is never split across tasks).
        unsafe {
            for m in 0..mid_len as isize {
                let dp = d.0.offset(base[0] + m * mds);
                let ip = i.0.offset(base[1] + m * mis);
                let sp = s.0.offset(base[2] + m * mss);
                if is == 0 {
                    let row = dp.offset(map((*ip).to_i64()) * dstride);
                    for j in r.clone() {
                        let j = j as isize;
                        update(&mut *row.offset(j * ds), *sp.offset(j * ss));
                    }
                } else {
                    for j in r.clone() {
                        let j = j as isize;
                        let t = dp.offset(j * ds + map((*ip.offset(j * is)).to_i64()) * dstride);
                        update(&mut *t, *sp.offset(j * ss));
                    }
                }
            }
        }
    });
}

/// Whether the index is a row index worth grouping: constant along every axis but `dim`, with
/// slices of at least [`SEGMENT_MIN_SLICE`] elements and enough work in all.
fn row_index<I: IndexElem>(index: &CheckedIndex<'_, I>, dim: usize) -> bool {
    let idx = index.view();
    let e = idx.shape()[dim];
    let slice: usize = (0..idx.ndim())
        .filter(|&d| d != dim)
        .map(|d| idx.shape()[d])
        .product();
    let constant =
        (0..idx.ndim()).all(|d| d == dim || idx.shape()[d] == 1 || idx.strides()[d] == 0);
    constant
        && e >= 2
        && u32::try_from(e).is_ok()
        && slice >= SEGMENT_MIN_SLICE
        && e.saturating_mul(slice) >= crate::plan::GRAIN
}

/// A scatter with a row index (see [`row_index`]): the positions along `dim` are grouped by
/// destination row ([`Segments`]), and each destination row is reduced over its sources in index
/// order, in parallel over rows. No two tasks touch the same row, and each row sees its updates
/// in the serial order, so the result is bitwise that of the serial loop for any number of
/// threads.
#[allow(clippy::too_many_arguments)]
fn rows<A, T, I, F>(
    dst: &mut ArrayViewMut<'_, A, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    segs: &Segments,
    init: Option<A>,
    last_only: bool,
    update: &F,
) where
    A: Copy + Send + Sync,
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fn(&mut A, T) + Sync + Send,
{
    let idx = index.view();
    let e_len = idx.shape()[dim];
    assert_eq!(segs.order().len(), e_len, "scatter kernel: segments of another index");
    assert!(
        segs.rows().last().is_none_or(|&r| r < dst.shape()[dim]),
        "scatter kernel: segment row out of range"
    );
    let slice_shape: Vec<usize> = (0..idx.ndim())
        .filter(|&d| d != dim)
        .map(|d| idx.shape()[d])
        .collect();
    let drop_dim =
        |s: &[isize]| -> Vec<isize> { (0..s.len()).filter(|&d| d != dim).map(|d| s[d]).collect() };
    let slice = Nest::<2>::new(
        &slice_shape,
        [&drop_dim(dst.strides()), &drop_dim(src.strides())],
        None,
    );
    let at = Rows {
        dst: SharedPtr(dst.as_mut_ptr()),
        src: SharedPtr(src.as_ptr() as *mut T),
        dstride: dst.strides()[dim],
        sstride: src.strides()[dim],
        strides: slice.inner.strides,
        init,
        last_only,
    };
    let threads = rayon::current_num_threads();
    let work = e_len.saturating_mul(slice.total);
    let parallel = threads > 1 && work >= 2 * crate::plan::GRAIN;
    if parallel && segs.len() < 4 * threads {
        // Few destination rows: split the slices instead, every task visiting every row.
        slice.for_each(|base, r| {
            for k in 0..segs.len() {
                let ahead = &segs.order()[segs.starts()[k]..];
                let n = segs.starts()[k + 1] - segs.starts()[k];
                at.apply(segs.rows()[k], base, r.clone(), ahead, n, update);
            }
        });
        return;
    }
    let ranges = segs.split(if parallel { threads * 8 } else { 1 });
    let task = |ks: &Range<usize>| {
        let end = segs.starts()[ks.end];
        for k in ks.clone() {
            let ahead = &segs.order()[segs.starts()[k]..end];
            let n = segs.starts()[k + 1] - segs.starts()[k];
            slice.for_each_serial(|base, r| {
                at.apply(segs.rows()[k], base, r, ahead, n, update);
            });
        }
    };
    if ranges.len() > 1 {
        ranges.par_iter().for_each(task);
    } else {
        ranges.iter().for_each(task);
    }
}

/// The destination and source of a row-index scatter, and what to do at each destination row.
struct Rows<A, T> {
    dst: SharedPtr<A>,
    src: SharedPtr<T>,
    /// Strides along `dim`.
    dstride: isize,
    sstride: isize,
    /// Inner strides of the slice nest (dst, src).
    strides: [isize; 2],
    init: Option<A>,
    last_only: bool,
}

impl<A: Copy, T: Copy> Rows<A, T> {
    /// Sources further ahead than this (in the grouped order) are prefetched.
    const AHEAD: usize = 4;

    /// Reduces, into the slice piece `base + r` of destination row `row`, the sources
    /// `ahead[..n]` (positions along `dim`, in index order); `ahead[n..]` are the sources that
    /// come next in the same task, whose first lines are prefetched.
    #[inline(always)]
    fn apply<F: Fn(&mut A, T)>(
        &self,
        row: usize,
        base: [isize; 2],
        r: Range<usize>,
        ahead: &[u32],
        n: usize,
        update: &F,
    ) {
        let [ds, ss] = self.strides;
        let mine = if self.last_only { n - 1..n } else { 0..n };
        // SAFETY: `row` is a checked index value below `dst.shape[dim]`, and `base + j * ds`
        // (`j` in `r`) are offsets of positions of the slice shape, which is the index's shape
        // without `dim`, no larger than dst's there (asserted by the caller): in bounds for dst.
        // Each source is a position along `dim` below `index.shape[dim] <= src.shape[dim]`, and
        // the slice positions are below the index's, no larger than src's: in bounds for src.
        // Destination rows are distinct between tasks (each segment belongs to one task) or,
        // when slices are split, the slice pieces are (the planner never duplicates a position),
        // so writes never race; src is only read and cannot alias dst (a `&mut` view). The
        // prefetched addresses are computed with `wrapping_offset` and never dereferenced.
        unsafe {
            let dp = self.dst.0.offset(row as isize * self.dstride + base[0]);
            let sp = self.src.0.offset(base[1]).cast_const();
            if let Some(v) = self.init {
                for j in r.clone() {
                    *dp.offset(j as isize * ds) = v;
                }
            }
            let line = (64 / std::mem::size_of::<T>().max(1)).max(1);
            let fetch_lines = if ss == 1 { r.len().div_ceil(line).min(4) } else { 1 };
            for q in mine {
                if let Some(&next) = ahead.get(q + Self::AHEAD) {
                    let np = sp.wrapping_offset(next as isize * self.sstride + r.start as isize * ss);
                    for l in 0..fetch_lines {
                        super::prefetch(np.wrapping_add(l * line));
                    }
                }
                let s = sp.offset(ahead[q] as isize * self.sstride);
                if ds == 1 && ss == 1 {
                    let d = std::slice::from_raw_parts_mut(dp.add(r.start), r.len());
                    let s = std::slice::from_raw_parts(s.add(r.start), r.len());
                    for (a, b) in d.iter_mut().zip(s) {
                        update(a, *b);
                    }
                } else {
                    for j in r.clone() {
                        let j = j as isize;
                        update(&mut *dp.offset(j * ds), *s.offset(j * ss));
                    }
                }
            }
        }
    }
}
