//! The write kernel: `update(&mut dst[p with p[dim] := index[p]], src[p])` over the index's shape.
//!
//! scatter (set, value form, legacy reduce), scatter_add, scatter_reduce, index_add, index_copy,
//! index_fill and index_reduce all run here; the last four pass an index broadcast over the non-dim
//! axes. The planner keeps `dim` as the serial axis: positions that can hit the same destination
//! element differ only in their `dim` coordinate, so they are visited by one thread in ascending
//! order. That makes every result deterministic, whatever the number of threads: `scatter` keeps the
//! last write in index order, and float sums add in index order, as PyTorch's CPU kernel does.

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

use super::{SharedPtr, position};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::plan::Nest;

/// Applies `update(dst_elem, src_elem)` for every position of the index.
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
    A: Send + Sync,
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
