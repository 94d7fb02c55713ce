//! The read kernel: `out[p] = input[p with p[dim] := index[p]]` over the index's shape.
//!
//! gather, index_select (an index broadcast over the non-dim axes) and take_along_dim (input and
//! index broadcast against each other) all run here. The innermost planned axis picks the loop:
//!
//! - index constant along it (expanded or broadcast index): one contiguous row copy per index value;
//! - it is the `dim` axis itself: a lookup loop `out[j] = row[index[j]]`;
//! - otherwise the general strided loop.

use std::ops::Range;

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
    let ptrs = Ptrs {
        out: SharedPtr(out.as_mut_ptr()),
        idx: SharedPtr(idx.as_ptr() as *mut I),
        x: SharedPtr(input.as_ptr() as *mut T),
    };
    let size = index.size();
    let how = How::new::<T>(&nest, input.len(), size);
    match index.bounds() {
        Bounds::Strict => run(&nest, ptrs, dstride, how, |v| v as isize),
        Bounds::Wrap => run(&nest, ptrs, dstride, how, |v| {
            position(Bounds::Wrap, v, size)
        }),
        Bounds::Modulo => run(&nest, ptrs, dstride, how, |v| {
            position(Bounds::Modulo, v, size)
        }),
    }
    // SAFETY: the nest covers every position of the index shape exactly once, and the output
    // strides are the row-major strides of that shape, so each of the `n` slots was written once.
    unsafe { out.set_len(n) };
    out
}

/// Bytes of the input one tile of a tiled lookup may span (a part of a core's L2 cache).
const TILE_BYTES: usize = 256 << 10;

/// The operands of a gather, shared by every task.
struct Ptrs<T, I> {
    out: SharedPtr<T>,
    idx: SharedPtr<I>,
    x: SharedPtr<T>,
}

impl<T, I> Clone for Ptrs<T, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, I> Copy for Ptrs<T, I> {}

/// How the lookups of a gather are run: prefetched (the input is too large for the caches), and
/// tiled along the inner axis (lookups spread over a large input along `dim`, but contiguous along
/// the inner axis).
#[derive(Clone, Copy)]
struct How {
    random: bool,
    tile: Option<usize>,
    /// The size of `dim` in the input.
    size: usize,
}

impl How {
    fn new<T>(nest: &Nest<3>, input_len: usize, size: usize) -> How {
        let elem = std::mem::size_of::<T>().max(1);
        let random = input_len.saturating_mul(elem) >= super::RANDOM_BYTES;
        let [os, is, xs] = nest.inner.strides;
        let line = (64 / elem).max(1);
        // One tile covers every position along `dim` for `tile` neighbouring inner positions.
        let tile = (TILE_BYTES / size.max(1).saturating_mul(elem)) / line * line;
        let tiled = random
            && os == 1
            && is == 1
            && xs == 1
            && nest.inner_splittable
            && tile >= line
            && nest.inner.len > tile
            && nest.outer_len() > 1;
        How {
            random,
            tile: tiled.then_some(tile),
            size,
        }
    }
}

/// Runs `f` over the nest with the split the workload calls for.
fn split<F>(nest: &Nest<3>, how: How, f: F)
where
    F: Fn([isize; 3], Range<usize>) + Sync + Send,
{
    match how.tile {
        Some(tile) => nest.for_each_tiled(tile, super::RANDOM_GRAIN, f),
        None if how.random => nest.for_each_grain(super::RANDOM_GRAIN, f),
        None => nest.for_each(f),
    }
}

fn run<T, I, M>(nest: &Nest<3>, p: Ptrs<T, I>, dstride: isize, how: How, map: M)
where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64) -> isize + Sync + Send,
{
    let [os, is, xs] = nest.inner.strides;
    let map = &map;
    const D: usize = super::PREFETCH_DISTANCE;
    // SAFETY (all three loops below): `base` plus `j * stride` for `j` in the inner range are
    // offsets of positions inside the iteration shape, which is the index's shape: in bounds for
    // the output (its shape) and the index (its own view). For the input, every non-dim
    // coordinate is below the index's size there, which the caller asserted is at most the
    // input's, and the dim coordinate is a checked index value mapped into
    // `0..input.shape[dim]`. Output positions are disjoint between tasks (the planner splits
    // positions, never duplicates them); the index and the input are only read, and neither can
    // alias the freshly allocated output. A prefetch names the input element of a position
    // `j + D` that is itself inside the inner range, so its address is in bounds too; the row
    // prefetch computes its addresses with `wrapping_offset` (no dereference, no UB even past the
    // end) and a prefetch never faults.
    if is == 0 {
        // Row copy: the index is constant along the inner axis (an expanded or broadcast index,
        // index_select): one lookup, then a contiguous copy.
        nest.for_each(move |base, r| unsafe {
            let Ptrs { out, idx, x } = p;
            let op = out.0.offset(base[0]);
            let v = *idx.0.offset(base[1]);
            let src = x.0.offset(base[2] + map(v.to_i64()) * dstride).cast_const();
            if os == 1 && xs == 1 {
                if r.len() <= 8 {
                    for j in r {
                        *op.add(j) = *src.add(j);
                    }
                } else {
                    std::ptr::copy_nonoverlapping(src.add(r.start), op.add(r.start), r.len());
                }
            } else {
                for j in r {
                    let j = j as isize;
                    *op.offset(j * os) = *src.offset(j * xs);
                }
            }
        });
    } else if os == 1 && is == 1 {
        // Lookup loop: output and index contiguous along the inner axis (`xs == 0` when the
        // inner axis is `dim` itself: a lookup along one row of the input).
        let row = RowPrefetch::new::<T>(nest, xs, dstride, how.size);
        split(nest, how, move |base, r| unsafe {
            let Ptrs { out, idx, x } = p;
            let op = out.0.offset(base[0]);
            let ip = idx.0.offset(base[1]).cast_const();
            let xp = x.0.offset(base[2]).cast_const();
            row.fetch_next(xp);
            let src = |j: usize| xp.offset(j as isize * xs + map((*ip.add(j)).to_i64()) * dstride);
            let mut j = r.start;
            if how.random {
                while j + D < r.end {
                    super::prefetch(src(j + D));
                    *op.add(j) = *src(j);
                    j += 1;
                }
            }
            while j < r.end {
                *op.add(j) = *src(j);
                j += 1;
            }
        });
    } else {
        // The general strided loop.
        split(nest, how, move |base, r| unsafe {
            let Ptrs { out, idx, x } = p;
            let op = out.0.offset(base[0]);
            let ip = idx.0.offset(base[1]).cast_const();
            let xp = x.0.offset(base[2]).cast_const();
            let src = |j: usize| {
                let jj = j as isize;
                xp.offset(jj * xs + map((*ip.offset(jj * is)).to_i64()) * dstride)
            };
            let mut j = r.start;
            if how.random {
                while j + D < r.end {
                    super::prefetch(src(j + D));
                    *op.offset(j as isize * os) = *src(j);
                    j += 1;
                }
            }
            while j < r.end {
                *op.offset(j as isize * os) = *src(j);
                j += 1;
            }
        });
    }
}

/// For a lookup along short rows of the input (the inner axis is `dim`): while one row is looked
/// up, the cache lines of the row of the next outer position are requested, so that its misses
/// overlap with work instead of stalling the lookups one by one.
#[derive(Clone, Copy)]
struct RowPrefetch {
    /// Offset of the next row, in elements (the last outer axis's input stride); 0 for none.
    next: isize,
    /// Offset of the row's first element relative to the row pointer, in elements.
    lo: isize,
    /// Number of cache lines of the row.
    lines: usize,
    /// Cache line size in elements.
    line: isize,
}

impl RowPrefetch {
    /// Rows up to this many bytes are prefetched whole.
    const MAX_ROW_BYTES: usize = 16 << 10;

    fn new<T>(nest: &Nest<3>, xs: isize, dstride: isize, size: usize) -> RowPrefetch {
        let elem = std::mem::size_of::<T>().max(1);
        let span = size.saturating_mul(dstride.unsigned_abs()).saturating_mul(elem);
        let none = RowPrefetch {
            next: 0,
            lo: 0,
            lines: 0,
            line: 1,
        };
        let Some(last) = nest.outer.last() else {
            return none;
        };
        if xs != 0 || span > Self::MAX_ROW_BYTES || dstride.unsigned_abs() * elem > 64 {
            return none;
        }
        RowPrefetch {
            next: last.strides[2],
            lo: if dstride < 0 {
                (size as isize - 1) * dstride
            } else {
                0
            },
            lines: span.div_ceil(64),
            line: (64 / elem) as isize,
        }
    }

    #[inline(always)]
    fn fetch_next<T>(self, row: *const T) {
        if self.lines == 0 {
            return;
        }
        let first = row.wrapping_offset(self.next + self.lo);
        for k in 0..self.lines as isize {
            super::prefetch(first.wrapping_offset(k * self.line));
        }
    }
}
