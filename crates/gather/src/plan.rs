//! The one loop planner every op uses.
//!
//! An op describes its operands (output, index, input ...) as strides over one iteration shape, in
//! elements. The planner turns that into a short loop nest:
//!
//! 1. axes of length 1 are dropped;
//! 2. neighbouring axes that are contiguous with each other in *every* operand are merged, so a
//!    standard-layout array of any rank becomes one axis, and an expanded (stride-0) index becomes a
//!    single "row" axis whose inner part is a plain contiguous copy;
//! 3. the innermost axis is kept apart so that kernels run a tight loop over it (and classify it:
//!    contiguous copy, lookup, general strided), the optional *serial* axis (scatter's `dim`) is
//!    kept whole inside every task so that updates to one destination happen in index order, and
//!    all other axes become the parallel outer loop.
//!
//! Kernels then walk the outer positions with an odometer (one add per step, no per-element
//! division), and work is split across rayon's pool in chunks of at least [`GRAIN`] elements, so a
//! tiny call never touches the thread pool.
//!
//! ```text
//! gather(x[64,196,768], dim 1, idx[64,49,768] expanded from [64,49]) plans as
//!   outer: [64 × 49] (out 768, idx 1, x 150528/0)   inner: 768 (out 1, idx 0, x 1)  -> row copies
//! ```

use std::ops::Range;

use rayon::prelude::*;

/// Minimum number of elements per parallel task; calls smaller than this run on the calling thread.
pub const GRAIN: usize = 32 * 1024;

/// One axis of a loop nest: its length and the stride of each of the `N` operands, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axis<const N: usize> {
    /// Number of positions.
    pub len: usize,
    /// Stride of each operand along this axis, in elements.
    pub strides: [isize; N],
}

/// A planned loop nest over `N` operands.
#[derive(Clone, Debug)]
pub struct Nest<const N: usize> {
    /// Outer axes, outermost first; any position may run on any thread.
    pub outer: Vec<Axis<N>>,
    /// The serial axis (scatter's `dim`), run whole and in order inside each task, if any.
    pub mid: Option<Axis<N>>,
    /// The innermost axis.
    pub inner: Axis<N>,
    /// Whether the inner axis may be cut into pieces run on different threads.
    pub inner_splittable: bool,
    /// Total number of positions (product of all lengths; 0 for an empty shape).
    pub total: usize,
}

impl<const N: usize> Nest<N> {
    /// Plans the iteration over `shape` for operands with the given `strides` (one slice per
    /// operand, each of `shape.len()` entries). `serial` names an axis whose positions must be
    /// visited in ascending order by one thread for any fixed position of the other axes.
    pub fn new(shape: &[usize], strides: [&[isize]; N], serial: Option<usize>) -> Self {
        let total = shape.iter().product::<usize>();
        let mut axes: Vec<(Axis<N>, bool)> = Vec::with_capacity(shape.len());
        for (a, &len) in shape.iter().enumerate() {
            if len == 1 {
                continue;
            }
            let mut s = [0isize; N];
            for k in 0..N {
                s[k] = strides[k][a];
            }
            axes.push((Axis { len, strides: s }, serial == Some(a)));
        }
        // Merge neighbours that are contiguous in every operand (never the serial axis).
        let mut merged: Vec<(Axis<N>, bool)> = Vec::with_capacity(axes.len());
        for (ax, is_serial) in axes {
            if let Some((last, last_serial)) = merged.last_mut() {
                if !*last_serial
                    && !is_serial
                    && (0..N)
                        .all(|k| last.strides[k] == ax.strides[k].wrapping_mul(ax.len as isize))
                {
                    last.len *= ax.len;
                    last.strides = ax.strides;
                    continue;
                }
            }
            merged.push((ax, is_serial));
        }
        let unit = Axis {
            len: 1,
            strides: [0; N],
        };
        let mut mid = None;
        let inner;
        let mut inner_splittable = true;
        match merged.pop() {
            None => inner = unit,
            Some((ax, true)) => {
                inner = ax;
                inner_splittable = false;
            }
            Some((ax, false)) => {
                inner = ax;
                if let Some(p) = merged.iter().position(|(_, s)| *s) {
                    mid = Some(merged.remove(p).0);
                }
            }
        }
        let outer = merged.into_iter().map(|(a, _)| a).collect();
        Nest {
            outer,
            mid,
            inner,
            inner_splittable,
            total: if shape.is_empty() { 1 } else { total },
        }
    }

    /// Number of outer positions.
    pub fn outer_len(&self) -> usize {
        self.outer.iter().map(|a| a.len).product()
    }

    /// Elements handled per outer position and per inner element (the serial axis length).
    fn mid_len(&self) -> usize {
        self.mid.map_or(1, |m| m.len)
    }

    /// Runs `f(base_offsets, inner_range)` for every outer position, each inner range being a piece
    /// of `0..inner.len`. Work is split over rayon's pool when there is enough of it; the calling
    /// thread does it all for small calls. `f` must be correct for any split (the planner only
    /// splits the inner axis when [`Nest::inner_splittable`]).
    pub fn for_each<F>(&self, f: F)
    where
        F: Fn([isize; N], Range<usize>) + Sync + Send,
    {
        if self.total == 0 {
            return;
        }
        let outer_len = self.outer_len();
        let inner_len = self.inner.len;
        let per_inner = self.mid_len();
        let threads = rayon::current_num_threads();
        if self.total < 2 * GRAIN || threads <= 1 {
            self.run_items(0..outer_len, 1, inner_len, &f);
            return;
        }
        // Cut the inner axis when there are too few outer positions to feed every thread.
        let chunks_per_row = if self.inner_splittable && outer_len < 4 * threads {
            let want = (4 * threads).div_ceil(outer_len);
            let min_chunk = (GRAIN / per_inner).max(1);
            want.min(inner_len.div_ceil(min_chunk)).max(1)
        } else {
            1
        };
        let chunk = inner_len.div_ceil(chunks_per_row);
        let items = outer_len * chunks_per_row;
        let item_elems = chunk * per_inner;
        let items_per_task = (GRAIN / item_elems.max(1))
            .max(1)
            .max(items / (threads * 16))
            .max(1);
        let tasks = items.div_ceil(items_per_task);
        (0..tasks).into_par_iter().for_each(|t| {
            let lo = t * items_per_task;
            let hi = (lo + items_per_task).min(items);
            self.run_items(lo..hi, chunks_per_row, chunk, &f);
        });
    }

    /// Runs the items `range` (item = outer position × inner chunk) serially.
    fn run_items<F>(&self, range: Range<usize>, chunks_per_row: usize, chunk: usize, f: &F)
    where
        F: Fn([isize; N], Range<usize>),
    {
        if range.is_empty() {
            return;
        }
        let nd = self.outer.len();
        let mut pos = vec![0usize; nd];
        let mut row = range.start / chunks_per_row;
        let mut c = range.start % chunks_per_row;
        let mut base = [0isize; N];
        for a in (0..nd).rev() {
            let len = self.outer[a].len;
            pos[a] = row % len;
            row /= len;
            for (b, s) in base.iter_mut().zip(self.outer[a].strides) {
                *b += pos[a] as isize * s;
            }
        }
        let inner_len = self.inner.len;
        for _ in range {
            let lo = c * chunk;
            let hi = (lo + chunk).min(inner_len);
            if lo < hi {
                f(base, lo..hi);
            }
            c += 1;
            if c == chunks_per_row {
                c = 0;
                // Odometer step over the outer axes.
                for a in (0..nd).rev() {
                    let ax = &self.outer[a];
                    pos[a] += 1;
                    for (b, s) in base.iter_mut().zip(ax.strides) {
                        *b += s;
                    }
                    if pos[a] < ax.len {
                        break;
                    }
                    for (b, s) in base.iter_mut().zip(ax.strides) {
                        *b -= s * ax.len as isize;
                    }
                    pos[a] = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn contiguous_operands_merge_into_one_axis() {
        let n = Nest::<2>::new(&[4, 5, 6], [&[30, 6, 1], &[30, 6, 1]], None);
        assert!(n.outer.is_empty());
        assert_eq!(
            n.inner,
            Axis {
                len: 120,
                strides: [1, 1]
            }
        );
    }

    #[test]
    fn expanded_index_leaves_a_contiguous_row() {
        // out [64,49,768] contiguous, idx [64,49] expanded, x with dim 1 zeroed.
        let n = Nest::<3>::new(
            &[64, 49, 768],
            [&[49 * 768, 768, 1], &[49, 1, 0], &[196 * 768, 0, 1]],
            None,
        );
        assert_eq!(
            n.inner,
            Axis {
                len: 768,
                strides: [1, 0, 1]
            }
        );
        assert_eq!(n.outer.len(), 2);
    }

    #[test]
    fn serial_axis_is_kept_whole_and_unmerged() {
        let n = Nest::<2>::new(&[10, 3, 4], [&[12, 4, 1], &[12, 4, 1]], Some(1));
        assert_eq!(n.mid.unwrap().len, 3);
        assert_eq!(n.inner.len, 4);
        assert_eq!(n.outer_len(), 10);
        let last = Nest::<2>::new(&[10, 3], [&[3, 1], &[3, 1]], Some(1));
        assert!(!last.inner_splittable);
        assert!(last.mid.is_none());
    }

    #[test]
    fn every_position_is_visited_once_for_any_split() {
        for shape in [
            vec![3usize, 70_000],
            vec![200_000],
            vec![7, 5, 3000],
            vec![1, 1],
        ] {
            let strides = crate::dims::row_major_strides(&shape);
            let n = Nest::<1>::new(&shape, [&strides], None);
            let seen = Mutex::new(vec![0u8; shape.iter().product()]);
            n.for_each(|base, r| {
                let mut s = seen.lock().unwrap();
                for i in r {
                    s[(base[0] + i as isize * n.inner.strides[0]) as usize] += 1;
                }
            });
            assert!(
                seen.into_inner().unwrap().iter().all(|&c| c == 1),
                "shape {shape:?}"
            );
        }
    }
}
