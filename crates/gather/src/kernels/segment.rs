//! Segments: a stable grouping of the positions of a 1-D index by value (a CSR layout), the first
//! step of a scatter with a *row index* (the index is constant along every axis but `dim`, as in
//! `scatter_add(dim 0, index expanded along the row)`, `index_add`, `index_copy`, ...).
//!
//! ```text
//! index values (positions 0..6):   2 0 2 1 0 2
//! segments:   row 0 ← positions [1, 4]
//!             row 1 ← positions [3]
//!             row 2 ← positions [0, 2, 5]
//! ```
//!
//! Positions with equal values stay in ascending order, so a destination row that is then reduced
//! over its segment sees its sources in index order: bitwise the result of the serial loop, for
//! any number of threads. The grouping itself is deterministic too (a stable counting sort, or a
//! sort of `(value, position)` pairs when the values span far more rows than there are
//! positions).

use rayon::prelude::*;

use super::{SharedPtr, position};
use crate::index::{Bounds, CheckedIndex, IndexElem};

/// Positions of a 1-D index grouped by value, in ascending value order; within a group, in
/// ascending position order. Only values that occur have a segment.
///
/// Invariants (kept by the constructors, the only way to build one): `order` is a permutation of
/// `0..len`; `starts` ascends from 0 to `len` with `rows.len() + 1` entries and no empty segment;
/// every row is below the `rows` bound given to the constructor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segments {
    /// The value (destination row) of each segment, strictly ascending.
    rows: Vec<usize>,
    /// Segment `k` is `order[starts[k]..starts[k + 1]]`; `starts.len() == rows.len() + 1`.
    starts: Vec<usize>,
    /// Every position `0..len`, grouped.
    order: Vec<u32>,
}

/// Below this many positions the grouping runs on the calling thread (256 under Miri, whose test
/// shapes are small).
const PARALLEL_MIN: usize = if cfg!(miri) { 1 << 8 } else { 1 << 16 };

impl Segments {
    /// Groups the positions along `dim` of a row index (constant along every other axis) by the
    /// destination row each selects. `index.shape[dim]` must fit in `u32`.
    pub(crate) fn of_row_index<I: IndexElem>(index: &CheckedIndex<'_, I>, dim: usize) -> Segments {
        let idx = index.view();
        let len = idx.shape()[dim];
        let stride = idx.strides()[dim];
        let ptr = SharedPtr(idx.as_ptr() as *mut I);
        let size = index.size();
        let value = move |e: usize| {
            let p = ptr;
            assert!(e < len, "segments: position out of range");
            // SAFETY: `e < index.shape[dim]`, and every other coordinate is 0: the offset is that
            // of an element of the index view.
            unsafe { *p.0.offset(e as isize * stride) }.to_i64()
        };
        match index.bounds() {
            Bounds::Strict => Self::new(len, size, |e| value(e) as usize),
            Bounds::Wrap => Self::new(len, size, |e| {
                position(Bounds::Wrap, value(e), size) as usize
            }),
            Bounds::Modulo => Self::new(len, size, |e| {
                position(Bounds::Modulo, value(e), size) as usize
            }),
        }
    }

    /// Groups the positions of `ids` by their value, each below `rows`. Not generic, so that the
    /// scatter kernels that call it (once per update type) share one instance.
    pub(crate) fn of_ids(ids: &[u32], rows: usize) -> Segments {
        Self::new(ids.len(), rows, |e| ids[e] as usize)
    }

    /// Groups positions `0..len` by `value(e)`, each value below `rows`. `len` must fit in `u32`.
    pub(crate) fn new<V>(len: usize, rows: usize, value: V) -> Segments
    where
        V: Fn(usize) -> usize + Sync,
    {
        assert!(u32::try_from(len).is_ok(), "segments: too many positions");
        if rows <= 2 * len + 1024 {
            Self::counting(len, rows, &value)
        } else {
            Self::sorting(len, &value)
        }
    }

    /// The number of segments.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The destination row of each segment, strictly ascending.
    pub(crate) fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// Where each segment starts in [`Segments::order`], and (last) its length.
    pub(crate) fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// Every position, grouped by segment.
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    /// A stable counting sort: per-chunk histograms (in parallel), exclusive prefix sums in chunk
    /// order, then each chunk places its positions (in parallel, at disjoint slots).
    fn counting<V>(len: usize, rows: usize, value: &V) -> Segments
    where
        V: Fn(usize) -> usize + Sync,
    {
        let threads = rayon::current_num_threads();
        let chunks = if len >= PARALLEL_MIN && threads > 1 {
            threads.min(len / (PARALLEL_MIN / 2)).max(1)
        } else {
            1
        };
        let per = len.div_ceil(chunks.max(1)).max(1);
        let ranges: Vec<(usize, usize)> = (0..chunks)
            .map(|c| (c * per, ((c + 1) * per).min(len)))
            .collect();
        let histogram = |&(lo, hi): &(usize, usize)| {
            let mut h = vec![0u32; rows];
            for e in lo..hi {
                let v = value(e);
                assert!(v < rows, "segments: value out of range");
                h[v] += 1;
            }
            h
        };
        let mut hists: Vec<Vec<u32>> = if chunks > 1 {
            crate::plan::par_map(ranges.len(), |c| histogram(&ranges[c]))
        } else {
            ranges.iter().map(histogram).collect()
        };
        // Exclusive prefix sums, value-major then chunk order: chunk c's positions of value v
        // come after those of every earlier chunk, so the result is stable.
        let mut seg_rows = Vec::new();
        let mut starts = Vec::new();
        let mut running = 0usize;
        for v in 0..rows {
            let first = running;
            for h in hists.iter_mut() {
                let n = h[v] as usize;
                h[v] = running as u32;
                running += n;
            }
            if running > first {
                seg_rows.push(v);
                starts.push(first);
            }
        }
        starts.push(running);
        debug_assert_eq!(running, len);
        let mut order: Vec<u32> = Vec::with_capacity(len);
        let optr = SharedPtr(order.as_mut_ptr());
        let place = |(&(lo, hi), h): (&(usize, usize), &mut Vec<u32>)| {
            let o = optr;
            for e in lo..hi {
                let v = value(e);
                let slot = h[v] as usize;
                h[v] += 1;
                assert!(slot < len, "segments: slot out of range");
                // SAFETY: `slot < len`, inside `order`'s capacity. The prefix sums give every
                // (chunk, value) pair its own run of slots, sized by the chunk's histogram, so no
                // two positions (of any chunk) are placed in the same slot.
                unsafe { *o.0.add(slot) = e as u32 };
            }
        };
        let work = ranges.iter().zip(hists.iter_mut()).collect();
        crate::plan::each(work, chunks > 1, place);
        // SAFETY: the histograms counted `len` positions in all, and each was placed in its own
        // slot below `len`, so every slot of `0..len` was written exactly once.
        unsafe { order.set_len(len) };
        Segments {
            rows: seg_rows,
            starts,
            order,
        }
    }

    /// Sorting `(value, position)` pairs: for values spread over many more rows than positions.
    fn sorting<V>(len: usize, value: &V) -> Segments
    where
        V: Fn(usize) -> usize + Sync,
    {
        let mut pairs: Vec<(usize, u32)> = (0..len).map(|e| (value(e), e as u32)).collect();
        // The pairs are distinct (positions are), so an unstable sort is deterministic and keeps
        // equal values in position order.
        if len >= PARALLEL_MIN {
            pairs.par_sort_unstable();
        } else {
            pairs.sort_unstable();
        }
        let mut rows = Vec::new();
        let mut starts = Vec::new();
        for (k, &(v, _)) in pairs.iter().enumerate() {
            if rows.last() != Some(&v) {
                rows.push(v);
                starts.push(k);
            }
        }
        starts.push(len);
        Segments {
            rows,
            starts,
            order: pairs.into_iter().map(|(_, e)| e).collect(),
        }
    }

    /// Cuts the segments into about `parts` consecutive ranges holding similar numbers of
    /// positions (each segment whole).
    pub(crate) fn split(&self, parts: usize) -> Vec<std::ops::Range<usize>> {
        let n = self.len();
        let total = self.order.len();
        let parts = parts.clamp(1, n.max(1));
        let mut cuts = vec![0usize];
        for p in 1..parts {
            let target = total * p / parts;
            // First segment starting at or after the target.
            let k = self.starts[..n].partition_point(|&s| s < target);
            if k > *cuts.last().unwrap() && k < n {
                cuts.push(k);
            }
        }
        cuts.push(n);
        cuts.windows(2).map(|w| w[0]..w[1]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;

    fn reference(values: &[usize]) -> Segments {
        let mut rows: Vec<usize> = values.to_vec();
        rows.sort();
        rows.dedup();
        let mut starts = vec![0];
        let mut order = Vec::new();
        for &r in &rows {
            order.extend(
                values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v == r)
                    .map(|(e, _)| e as u32),
            );
            starts.push(order.len());
        }
        Segments {
            rows,
            starts,
            order,
        }
    }

    #[test]
    fn counting_and_sorting_give_the_stable_grouping() {
        let mut s = 12345u64;
        for (len, rows) in [
            (0, 5),
            (1, 1),
            (7, 3),
            (1000, 10),
            (sized(200_000, 600), sized(5000, 50)),
            (sized(300_000, 700), 7),
        ] {
            let values: Vec<usize> = (0..len)
                .map(|_| {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                    ((s >> 33) % rows as u64) as usize
                })
                .collect();
            let want = reference(&values);
            assert_eq!(Segments::counting(len, rows, &|e| values[e]), want);
            assert_eq!(Segments::sorting(len, &|e| values[e]), want);
            for threads in [1, 2, 3] {
                let got = crate::kernels::test_pool(threads)
                    .install(|| Segments::new(len, rows, |e| values[e]));
                assert_eq!(got, want, "len {len} rows {rows} threads {threads}");
            }
        }
    }

    #[test]
    fn split_keeps_segments_whole_and_covers_them_all() {
        let values: Vec<usize> = (0..1000).map(|e| (e * 7919) % 37).collect();
        let segs = Segments::new(values.len(), 37, |e| values[e]);
        for parts in [1, 2, 5, 37, 100] {
            let ranges = segs.split(parts);
            assert_eq!(ranges.first().unwrap().start, 0);
            assert_eq!(ranges.last().unwrap().end, segs.len());
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            assert!(ranges.iter().all(|r| !r.is_empty()));
        }
        let empty = Segments::new(0, 3, |_| 0);
        assert_eq!(empty.split(4), vec![0..0]);
    }
}
