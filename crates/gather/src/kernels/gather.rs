//! The read kernel: `out[p] = input[p with p[dim] := index[p]]` over the index's shape.
//!
//! gather, index_select (an index broadcast over the non-dim axes) and take_along_dim (input and
//! index broadcast against each other) all run here. The innermost planned axis picks the loop:
//!
//! - index constant along it (expanded or broadcast index): one contiguous row copy per index value;
//! - it is the `dim` axis itself: a lookup loop `out[j] = row[index[j]]`;
//! - otherwise the general strided loop.

use ndarray::{ArrayView, IxDyn};

use super::{SharedPtr, position};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::plan::Nest;

/// Gathers along `dim` into `out` (empty, with capacity for the index's length), filled in the
/// row-major order of the index's shape.
///
/// Preconditions (asserted, O(rank)): `input` and `index` have the same rank, `dim` is one of its
/// axes, `index.shape[d] <= input.shape[d]` for every `d != dim`, and the index was checked
/// against `input.shape[dim]`.
pub(crate) fn gather<T, I>(
    input: &ArrayView<'_, T, IxDyn>,
    dim: usize,
    index: &CheckedIndex<'_, I>,
    mut out: Vec<T>,
) -> Vec<T>
where
    T: Copy + Send + Sync,
    I: IndexElem,
{
    let idx = index.view();
    let nd = input.ndim();
    assert_eq!(idx.ndim(), nd, "gather kernel: rank mismatch");
    assert!(dim < nd, "gather kernel: dim out of range");
    assert_eq!(
        index.size(),
        input.shape()[dim],
        "gather kernel: index checked against another size"
    );
    for d in 0..nd {
        assert!(
            d == dim || idx.shape()[d] <= input.shape()[d],
            "gather kernel: index larger than input"
        );
    }
    let n = idx.len();
    assert!(
        out.is_empty() && out.capacity() >= n,
        "gather kernel: output buffer too small"
    );
    if n == 0 {
        return out;
    }
    let shape = idx.shape().to_vec();
    let out_strides = crate::dims::row_major_strides(&shape);
    let mut in_strides = input.strides().to_vec();
    let dstride = in_strides[dim];
    in_strides[dim] = 0;
    let nest = Nest::<3>::new(&shape, [&out_strides, idx.strides(), &in_strides], None);
    let optr = SharedPtr(out.as_mut_ptr());
    let iptr = SharedPtr(idx.as_ptr() as *mut I);
    let xptr = SharedPtr(input.as_ptr() as *mut T);
    let size = index.size();
    match index.bounds() {
        Bounds::Strict => run(&nest, optr, iptr, xptr, dstride, |v| v as isize),
        Bounds::Wrap => run(&nest, optr, iptr, xptr, dstride, |v| {
            position(Bounds::Wrap, v, size)
        }),
        Bounds::Modulo => run(&nest, optr, iptr, xptr, dstride, |v| {
            position(Bounds::Modulo, v, size)
        }),
    }
    // SAFETY: the nest covers every position of the index shape exactly once, and the output
    // strides are the row-major strides of that shape, so each of the `n` slots was written once.
    unsafe { out.set_len(n) };
    out
}

fn run<T, I, M>(
    nest: &Nest<3>,
    out: SharedPtr<T>,
    idx: SharedPtr<I>,
    x: SharedPtr<T>,
    dstride: isize,
    map: M,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64) -> isize + Sync + Send,
{
    let [os, is, xs] = nest.inner.strides;
    nest.for_each(|base, r| {
        let (o, i, x) = (out, idx, x);
        // SAFETY: `base` plus `j * stride` for `j` in the inner range are offsets of positions inside
        // the iteration shape, which is the index's shape: in bounds for the output (its shape) and
        // the index (its own view). For the input, every non-dim coordinate is below the index's
        // size there, which the caller asserted is at most the input's, and the dim coordinate is a
        // checked index value mapped into `0..input.shape[dim]`. Output positions are disjoint
        // between tasks (the planner splits positions, never duplicates them).
        unsafe {
            let op = o.0.offset(base[0]);
            let ip = i.0.offset(base[1]);
            let xp = x.0.offset(base[2]);
            if is == 0 {
                // The index is constant along the row: one lookup, then a copy.
                let src = xp.offset(map((*ip).to_i64()) * dstride);
                if os == 1 && xs == 1 {
                    std::ptr::copy_nonoverlapping(src.add(r.start), op.add(r.start), r.len());
                } else {
                    for j in r {
                        let j = j as isize;
                        *op.offset(j * os) = *src.offset(j * xs);
                    }
                }
            } else if xs == 0 && os == 1 && is == 1 {
                // Lookup along a row of the input.
                for j in r {
                    *op.add(j) = *xp.offset(map((*ip.add(j)).to_i64()) * dstride);
                }
            } else if os == 1 && is == 1 {
                for j in r {
                    let jj = j as isize;
                    *op.add(j) = *xp.offset(jj * xs + map((*ip.add(j)).to_i64()) * dstride);
                }
            } else {
                for j in r {
                    let j = j as isize;
                    *op.offset(j * os) =
                        *xp.offset(j * xs + map((*ip.offset(j * is)).to_i64()) * dstride);
                }
            }
        }
    });
}
