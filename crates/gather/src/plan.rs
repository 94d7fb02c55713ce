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
use std::sync::Mutex;

use rayon::prelude::*;

use crate::dims::Small;

/// Minimum number of elements per parallel task; calls smaller than this run on the calling thread.
/// Under Miri (`scripts/miri.sh`) it is 256, so that the small shapes Miri can afford still run the
/// parallel loops.
pub const GRAIN: usize = if cfg!(miri) { 256 } else { 32 * 1024 };

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
        // Axes longer than 1, neighbours that are contiguous in every operand merged (never the
        // serial axis, whose place among them is `serial_at`).
        let mut axes: Vec<Axis<N>> = Vec::with_capacity(shape.len());
        let mut serial_at = None;
        for (a, &len) in shape.iter().enumerate() {
            if len == 1 {
                continue;
            }
            let mut s = [0isize; N];
            for k in 0..N {
                s[k] = strides[k][a];
            }
            let is_serial = serial == Some(a);
            let last_serial = serial_at.is_some() && serial_at == axes.len().checked_sub(1);
            if let Some(last) = axes.last_mut() {
                if !is_serial
                    && !last_serial
                    && (0..N).all(|k| last.strides[k] == s[k].wrapping_mul(len as isize))
                {
                    last.len *= len;
                    last.strides = s;
                    continue;
                }
            }
            if is_serial {
                serial_at = Some(axes.len());
            }
            axes.push(Axis { len, strides: s });
        }
        let unit = Axis {
            len: 1,
            strides: [0; N],
        };
        let mut mid = None;
        let mut inner_splittable = true;
        let inner = match axes.pop() {
            None => unit,
            Some(ax) if serial_at == Some(axes.len()) => {
                inner_splittable = false;
                ax
            }
            Some(ax) => {
                mid = serial_at.map(|p| axes.remove(p));
                ax
            }
        };
        let outer = axes;
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
        self.for_each_grain(GRAIN, f)
    }

    /// [`Nest::for_each`] with another minimum number of elements per task: kernels whose
    /// elements are expensive (a cache miss each, say) pass a smaller grain so that the pool is
    /// used earlier. `grain` is clamped to at least 1.
    pub fn for_each_grain<F>(&self, grain: usize, f: F)
    where
        F: Fn([isize; N], Range<usize>) + Sync + Send,
    {
        self.split_with(grain, None, || (), |_, b, r| f(b, r))
    }

    /// The nest of a kernel that walks short inner rows itself: the last outer axis becomes the
    /// inner axis (split between tasks like any inner axis) and the inner axis becomes the serial
    /// axis ([`Nest::mid`]), which the kernel runs whole for every position and whose length
    /// counts in the grain. One call of the kernel's closure then covers a run of rows instead of
    /// one row: no closure call and odometer step per 16-byte row (ROI labels). `None` without an
    /// outer axis, with a serial axis already planned, or with an inner axis that must stay whole.
    ///
    /// ```text
    /// out [65536,4] from roi[65536,21,4] and labels expanded to [65536,1,4]:
    ///   plan  outer: [] (none)   inner: 65536 rows   mid: 4 (out 1, idx 0, x 1)
    ///   rows  outer: []          inner: 65536 rows   mid: the row of 4
    /// ```
    pub fn rows(&self) -> Option<Nest<N>> {
        if self.mid.is_some() || !self.inner_splittable {
            return None;
        }
        self.inner_to_mid()
    }

    /// The nest with the serial inner axis moved outside the last outer axis: that axis becomes
    /// the inner axis (split between tasks like any inner axis), and the serial axis
    /// [`Nest::mid`], run whole and in order for every piece of it. For a scatter along an axis
    /// that is strided in the destination, and another that is contiguous there (`dim` 1 of a
    /// transposed matrix): each update then writes a run of a destination row, where walking
    /// the serial axis innermost writes one element of a line per update. `None` where the
    /// inner axis is not the serial one, or without an outer axis.
    ///
    /// ```text
    /// x.T [1024, 1024] (strides [1, 1024]), dim 1:
    ///   plan            outer: 1024 (x 1)   inner: dim 1024, serial
    ///   serial_outside  outer: []           inner: 1024 (x 1)   mid: dim 1024
    /// ```
    pub fn serial_outside(&self) -> Option<Nest<N>> {
        if self.inner_splittable {
            return None;
        }
        self.inner_to_mid()
    }

    /// The last outer axis as the (splittable) inner axis and the inner axis as the serial one,
    /// for [`Nest::rows`] and [`Nest::serial_outside`]; `None` without an outer axis.
    fn inner_to_mid(&self) -> Option<Nest<N>> {
        let mut outer = self.outer.clone();
        let last = outer.pop()?;
        Some(Nest {
            outer,
            mid: Some(self.inner),
            inner: last,
            inner_splittable: true,
            total: self.total,
        })
    }

    /// Like [`Nest::for_each_grain`], but the inner axis is cut into tiles of `tile` positions and
    /// each task walks *many outer positions for one tile* before moving to the next tile (loop
    /// tiling). A gather whose reads along the inner axis are contiguous but spread over a large
    /// input along another axis then reuses the cache lines of one tile of the input instead of
    /// touching the whole input for every outer position. Requires [`Nest::inner_splittable`].
    pub fn for_each_tiled<F>(&self, tile: usize, grain: usize, f: F)
    where
        F: Fn([isize; N], Range<usize>) + Sync + Send,
    {
        self.for_each_tiled_with(tile, grain, || (), |_, b, r| f(b, r))
    }

    /// [`Nest::for_each_tiled`] with a state per task: `init` makes one (once per task, or more
    /// often: rayon may split a task's work) and `f` gets it with every piece, so a kernel can
    /// keep what it prepared for one tile (a contiguous copy of the input's tile, say) while it
    /// walks the outer positions of that tile.
    pub fn for_each_tiled_with<S, I, F>(&self, tile: usize, grain: usize, init: I, f: F)
    where
        I: Fn() -> S + Sync + Send,
        F: Fn(&mut S, [isize; N], Range<usize>) + Sync + Send,
    {
        assert!(
            self.inner_splittable,
            "tiling needs a splittable inner axis"
        );
        self.split_with(grain, Some(tile.max(1)), init, f)
    }

    /// Runs `f` for every outer position and the whole inner range, serially on the calling
    /// thread, in row-major order.
    pub fn for_each_serial<F>(&self, mut f: F)
    where
        F: FnMut([isize; N], Range<usize>),
    {
        if self.total == 0 {
            return;
        }
        let sp = Split::whole(self.outer_len(), 1, self.inner.len, false);
        self.run_items(0..sp.items, &sp, &mut f);
    }

    /// Cuts the positions into at most `parts` groups of about equal size, for tasks that each
    /// walk their own group many times (a row scatter visits its slice once per source row). Each
    /// group is a list of `(base_offsets, inner_range)` pieces in row-major order; cuts of the
    /// inner axis fall on multiples of `align` positions (a cache line's worth, so that two tasks
    /// rarely write one line). Together the groups cover every position exactly once. An empty
    /// nest has no group.
    pub fn pieces(&self, parts: usize, align: usize) -> Vec<Vec<([isize; N], Range<usize>)>> {
        if self.total == 0 {
            return Vec::new();
        }
        let (parts, align) = (parts.max(1), align.max(1));
        let outer_len = self.outer_len();
        let inner_len = self.inner.len;
        let want = if outer_len >= parts || !self.inner_splittable {
            1
        } else {
            parts.div_ceil(outer_len)
        };
        let chunk = inner_len.div_ceil(want).div_ceil(align) * align;
        let chunks_per_row = inner_len.div_ceil(chunk.max(1)).max(1);
        let items = outer_len * chunks_per_row;
        let mut all = Vec::with_capacity(items);
        let sp = Split::whole(items, chunks_per_row, chunk, false);
        self.run_items(0..items, &sp, &mut |b, r| all.push((b, r)));
        let parts = parts.min(all.len()).max(1);
        let mut groups = Vec::with_capacity(parts);
        let mut rest = all.into_iter();
        for g in 0..parts {
            let take = items / parts + usize::from(g < items % parts);
            groups.push(rest.by_ref().take(take).collect());
        }
        groups
    }

    fn split_with<S, I, F>(&self, grain: usize, tile: Option<usize>, init: I, f: F)
    where
        I: Fn() -> S + Sync + Send,
        F: Fn(&mut S, [isize; N], Range<usize>) + Sync + Send,
    {
        let Some(sp) = self.split(grain, tile) else {
            return;
        };
        if sp.tasks == 1 {
            // One task holds every item: on this thread, with no boxed runner to allocate.
            self.task(&sp, &f, &mut init(), 0);
            return;
        }
        let (f, sp) = (&f, &sp);
        let runner = || -> Box<dyn FnMut(usize) + '_> {
            let mut state = init();
            Box::new(move |t| self.task(sp, f, &mut state, t))
        };
        par_for_with(sp.tasks, &runner);
    }

    /// Task `t` of a split: its items, with `state`. Not inlined: the serial and the parallel
    /// path of [`Nest::split_with`] call this one copy of the kernel.
    #[inline(never)]
    fn task<S, F>(&self, sp: &Split, f: &F, state: &mut S, t: usize)
    where
        F: Fn(&mut S, [isize; N], Range<usize>),
    {
        let lo = t * sp.items_per_task;
        let hi = (lo + sp.items_per_task).min(sp.items);
        self.run_items(lo..hi, sp, &mut |b, r| f(state, b, r));
    }

    /// How [`Nest::split_with`] cuts the work into items and tasks; `None` for an empty nest.
    fn split(&self, grain: usize, tile: Option<usize>) -> Option<Split> {
        if self.total == 0 {
            return None;
        }
        let grain = grain.max(1);
        let outer_len = self.outer_len();
        let inner_len = self.inner.len;
        let per_inner = self.mid_len();
        // A small call never asks for the pool (not even its size: the first such question
        // starts rayon's global pool).
        let threads = if self.total < 2 * grain {
            1
        } else {
            rayon::current_num_threads()
        };
        let serial = threads <= 1;
        let chunks_per_row = match tile {
            Some(t) => inner_len.div_ceil(t),
            // Cut the inner axis when there are too few outer positions to feed every thread.
            None if !serial && self.inner_splittable && outer_len < 4 * threads => {
                let want = (4 * threads).div_ceil(outer_len);
                let min_chunk = (grain / per_inner).max(1);
                want.min(inner_len.div_ceil(min_chunk)).max(1)
            }
            None => 1,
        };
        let chunk = inner_len.div_ceil(chunks_per_row);
        let items = outer_len * chunks_per_row;
        let tiled = tile.is_some();
        if serial {
            return Some(Split::whole(items, chunks_per_row, chunk, tiled));
        }
        let item_elems = chunk * per_inner;
        let items_per_task = (grain / item_elems.max(1))
            .max(1)
            .max(items / (threads * 16))
            .max(1);
        Some(Split {
            items,
            chunks_per_row,
            chunk,
            tiled,
            items_per_task,
            tasks: items.div_ceil(items_per_task),
        })
    }

    /// Runs the items `range` serially, in batches that the shared odometer ([`Items::fill`])
    /// writes: only this loop is compiled per closure.
    fn run_items<F>(&self, range: Range<usize>, sp: &Split, f: &mut F)
    where
        F: FnMut([isize; N], Range<usize>),
    {
        // With one outer position (a row scatter runs one such nest per destination row) the
        // items are the chunks of the inner axis, with no odometer to share. Either way they
        // reach the one call of `f` below: it is inlined there, so a second call would be a
        // second copy of the kernel.
        let (mut next, end) = (range.start, range.end);
        let mut items = (!self.outer.is_empty()).then(|| Items::new(self, range, sp));
        let mut buf = [([0isize; N], 0usize, 0usize); ITEM_BATCH];
        loop {
            let n = match &mut items {
                Some(items) => items.fill(&mut buf),
                None => {
                    let mut n = 0;
                    while next < end && n < ITEM_BATCH {
                        let lo = next * sp.chunk;
                        let hi = (lo + sp.chunk).min(self.inner.len);
                        next += 1;
                        if lo < hi {
                            buf[n] = ([0; N], lo, hi);
                            n += 1;
                        }
                    }
                    n
                }
            };
            for &(b, lo, hi) in &buf[..n] {
                f(b, lo..hi);
            }
            if n < ITEM_BATCH {
                return;
            }
        }
    }
}

/// Items per batch of [`Items::fill`].
const ITEM_BATCH: usize = 8;

/// The cut of a nest's work: `items` items (one outer position × one chunk of `chunk` inner
/// positions, `chunks_per_row` per outer position), numbered position-major, or chunk-major when
/// `tiled`; `tasks` tasks of `items_per_task` items each.
struct Split {
    items: usize,
    chunks_per_row: usize,
    chunk: usize,
    tiled: bool,
    items_per_task: usize,
    tasks: usize,
}

impl Split {
    /// All items in one task.
    fn whole(items: usize, chunks_per_row: usize, chunk: usize, tiled: bool) -> Split {
        Split {
            items,
            chunks_per_row,
            chunk,
            tiled,
            items_per_task: items,
            tasks: 1,
        }
    }
}

/// The odometer over a range of items: their base offsets and inner ranges, a batch at a time.
/// Generic over `N` only, so every kernel closure shares it.
struct Items<'n, const N: usize> {
    nest: &'n Nest<N>,
    sp: &'n Split,
    left: usize,
    pos: Small<usize>,
    base: [isize; N],
    row: usize,
    c: usize,
}

impl<'n, const N: usize> Items<'n, N> {
    fn new(nest: &'n Nest<N>, range: Range<usize>, sp: &'n Split) -> Self {
        let nd = nest.outer.len();
        let outer_len = nest.outer_len();
        let mut pos = Small::zeros(nd);
        let (row, c) = if range.is_empty() {
            (0, 0)
        } else if sp.tiled {
            (range.start % outer_len, range.start / outer_len)
        } else {
            (
                range.start / sp.chunks_per_row,
                range.start % sp.chunks_per_row,
            )
        };
        let mut base = [0isize; N];
        let mut rest = row;
        for a in (0..nd).rev() {
            let len = nest.outer[a].len;
            pos[a] = rest % len;
            rest /= len;
            for (b, s) in base.iter_mut().zip(nest.outer[a].strides) {
                *b += pos[a] as isize * s;
            }
        }
        Items {
            nest,
            sp,
            left: range.len(),
            pos,
            base,
            row,
            c,
        }
    }

    /// Writes the next non-empty items to `buf` as `(base, lo, hi)` and returns how many; fewer
    /// than `buf.len()` means the range is done.
    #[inline(never)]
    fn fill(&mut self, buf: &mut [([isize; N], usize, usize)]) -> usize {
        let nest = self.nest;
        let (chunk, tiled) = (self.sp.chunk, self.sp.tiled);
        let inner_len = nest.inner.len;
        let outer_len = nest.outer_len();
        let mut n = 0;
        if let [ax] = nest.outer.as_slice() {
            // One outer axis (most nests): the same walk without the odometer's loop over the
            // axes, in locals. Items are many and small in a tiled lookup (W5: 32 elements each),
            // where the general step cost as much as a tenth of the call.
            let (mut c, mut row, mut base, mut left) = (self.c, self.pos[0], self.base, self.left);
            while left > 0 && n < buf.len() {
                left -= 1;
                let lo = c * chunk;
                let hi = (lo + chunk).min(inner_len);
                if lo < hi {
                    buf[n] = (base, lo, hi);
                    n += 1;
                }
                let next_row = tiled || {
                    c += 1;
                    c == self.sp.chunks_per_row
                };
                if next_row {
                    if !tiled {
                        c = 0;
                    }
                    row += 1;
                    if row < ax.len {
                        for (b, s) in base.iter_mut().zip(ax.strides) {
                            *b += s;
                        }
                    } else {
                        for (b, s) in base.iter_mut().zip(ax.strides) {
                            *b -= s * (ax.len as isize - 1);
                        }
                        row = 0;
                        if tiled {
                            c += 1;
                        }
                    }
                }
            }
            (self.c, self.pos[0], self.row, self.base, self.left) = (c, row, row, base, left);
            return n;
        }
        while self.left > 0 && n < buf.len() {
            self.left -= 1;
            let lo = self.c * chunk;
            let hi = (lo + chunk).min(inner_len);
            if lo < hi {
                buf[n] = (self.base, lo, hi);
                n += 1;
            }
            let next_row = if tiled {
                true
            } else {
                self.c += 1;
                if self.c == self.sp.chunks_per_row {
                    self.c = 0;
                    true
                } else {
                    false
                }
            };
            if next_row {
                self.row += 1;
                // Odometer step over the outer axes.
                for a in (0..nest.outer.len()).rev() {
                    let ax = &nest.outer[a];
                    self.pos[a] += 1;
                    for (b, s) in self.base.iter_mut().zip(ax.strides) {
                        *b += s;
                    }
                    if self.pos[a] < ax.len {
                        break;
                    }
                    for (b, s) in self.base.iter_mut().zip(ax.strides) {
                        *b -= s * ax.len as isize;
                    }
                    self.pos[a] = 0;
                }
                if tiled && self.row == outer_len {
                    // The odometer wrapped to the first position: on to the next tile.
                    self.row = 0;
                    self.c += 1;
                }
            }
        }
        n
    }
}

/// Runs `body(t)` for every task `t` in `0..tasks` on rayon's pool. It is not generic: rayon's
/// splitting and job code is compiled once here, not once per kernel closure, which is what
/// every generic `par_iter` in a kernel had cost (see docs/performance.md, "Build cost").
pub(crate) fn par_for(tasks: usize, body: &(dyn Fn(usize) + Sync)) {
    (0..tasks).into_par_iter().for_each(body);
}

/// [`par_for`] with a state per rayon job: `runner()` makes a closure that owns a fresh state and
/// runs tasks with it, called again whenever rayon splits the work onto another job.
fn par_for_with<'a>(tasks: usize, runner: &(dyn Fn() -> Box<dyn FnMut(usize) + 'a> + Sync)) {
    (0..tasks)
        .into_par_iter()
        .for_each_init(runner, |run, t| run(t));
}

/// `(0..n).map(f)` collected in order, run in parallel through [`par_for`].
pub(crate) fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let slots: Vec<Mutex<Option<T>>> = (0..n).map(|_| Mutex::new(None)).collect();
    par_for(n, &|i| {
        let v = f(i);
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("par_for runs every task")
        })
        .collect()
}

/// Hands each item of `items` to `f` once, in parallel. Only the slot lookup is generic; the
/// parallel loop is [`par_for`]'s, and the slots are made per item type, not per `f`.
pub(crate) fn par_each<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let slots = slots(items);
    par_for(slots.len(), &|i| f(take(&slots[i])));
}

fn slots<T>(items: Vec<T>) -> Vec<Mutex<Option<T>>> {
    items.into_iter().map(|x| Mutex::new(Some(x))).collect()
}

fn take<T>(slot: &Mutex<Option<T>>) -> T {
    slot.lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("par_for visits each task once")
}

/// Hands each item of `items` to `f` once: in parallel ([`par_each`]) or in order on this thread.
/// `f`'s body is compiled once for both (a call that is not inlined), not once per loop.
pub(crate) fn each<T: Send>(items: Vec<T>, parallel: bool, f: impl Fn(T) + Sync) {
    #[inline(never)]
    fn one<T, F: Fn(T)>(f: &F, item: T) {
        f(item)
    }
    if parallel {
        par_each(items, |item| one(&f, item));
    } else {
        items.into_iter().for_each(|item| one(&f, item));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a test hands to the planner: a visit of one piece of the iteration.
    type Visit<'a> = dyn Fn([isize; 1], Range<usize>) + Sync + 'a;

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
    fn rows_turn_the_last_outer_axis_into_the_inner_one_and_the_row_into_the_serial_one() {
        // ROI labels under a batch axis: out [2,100,4], idx [2,100] (transposed) expanded along 4.
        let n = Nest::<2>::new(&[2, 100, 4], [&[400, 4, 1], &[1, 2, 0]], None);
        assert_eq!(n.outer.len(), 2);
        let rows = n.rows().expect("an outer axis to walk");
        assert_eq!(rows.outer, n.outer[..1]);
        assert_eq!(rows.inner, n.outer[1]);
        assert_eq!(rows.mid, Some(n.inner));
        assert!(rows.inner_splittable);
        assert_eq!(rows.total, 800);
        // Every position once, with the row whole in every piece.
        let seen = Mutex::new(Vec::new());
        rows.for_each_grain(1, |b, r| {
            for j in r {
                for k in 0..4isize {
                    seen.lock().unwrap().push(b[0] + j as isize * 4 + k);
                }
            }
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..800).collect::<Vec<isize>>());
        // Nothing to rotate: no outer axis, or a serial axis already planned.
        assert!(Nest::<1>::new(&[8], [&[1]], None).rows().is_none());
        let serial = Nest::<1>::new(&[3, 5, 7], [&[1, 3, 15]], Some(1));
        assert!(serial.rows().is_none());
    }

    #[test]
    fn serial_outside_moves_a_serial_inner_axis_outside_the_last_outer_one() {
        // dim 1 of a transposed matrix [3, 4] (strides [1, 3]), a batch axis in front.
        let n = Nest::<1>::new(&[2, 3, 4], [&[12, 1, 3]], Some(2));
        assert!(!n.inner_splittable);
        let moved = n.serial_outside().expect("an outer axis to move inside");
        assert_eq!(moved.outer, n.outer[..1]);
        assert_eq!(moved.inner, n.outer[1]);
        assert_eq!(moved.mid, Some(n.inner));
        assert!(moved.inner_splittable);
        assert_eq!(moved.total, 24);
        // Every position once, the serial axis whole in every piece, by the moved nest's own
        // strides.
        let (inner, mid) = (moved.inner.strides[0], moved.mid.unwrap());
        let seen = Mutex::new(Vec::new());
        moved.for_each_grain(1, |b, r| {
            for k in 0..mid.len as isize {
                for j in r.clone() {
                    seen.lock()
                        .unwrap()
                        .push(b[0] + j as isize * inner + k * mid.strides[0]);
                }
            }
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..24).collect::<Vec<isize>>());
        // Nothing to move: a splittable inner axis, or no outer axis.
        assert!(
            Nest::<1>::new(&[3, 5, 7], [&[1, 3, 15]], Some(1))
                .serial_outside()
                .is_none()
        );
        assert!(
            Nest::<1>::new(&[8], [&[1]], Some(0))
                .serial_outside()
                .is_none()
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
        // The axes after a serial first axis still merge with each other.
        let first = Nest::<2>::new(&[3, 4, 5], [&[20, 5, 1], &[20, 5, 1]], Some(0));
        assert_eq!(first.mid.unwrap().len, 3);
        assert_eq!(first.inner.len, 20);
        assert!(first.outer.is_empty());
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
            let total: usize = shape.iter().product();
            let check = |name: &str, run: &dyn Fn(&Visit)| {
                let seen = Mutex::new(vec![0u8; total]);
                run(&|base, r| {
                    let mut s = seen.lock().unwrap();
                    for i in r {
                        s[(base[0] + i as isize * n.inner.strides[0]) as usize] += 1;
                    }
                });
                assert!(
                    seen.into_inner().unwrap().iter().all(|&c| c == 1),
                    "{name}: shape {shape:?}"
                );
            };
            check("for_each", &|f| n.for_each(f));
            for grain in [1, 7, 1000] {
                check("for_each_grain", &|f| n.for_each_grain(grain, f));
            }
            check("for_each_serial", &|f| n.for_each_serial(f));
            if n.inner_splittable {
                for (tile, grain) in [(1, 1), (16, 1), (1000, 64), (1 << 20, GRAIN)] {
                    check("for_each_tiled", &|f| n.for_each_tiled(tile, grain, f));
                }
            }
        }
    }

    #[test]
    fn pieces_cover_every_position_once_in_aligned_balanced_groups() {
        for (shape, parts, align) in [
            (vec![64usize], 2, 16),
            (vec![64], 16, 16),
            (vec![100], 3, 16),
            (vec![7, 5, 30], 4, 8),
            (vec![3, 1000], 2, 16),
            (vec![2, 9], 8, 4),
            (vec![5], 1, 16),
        ] {
            let strides = crate::dims::row_major_strides(&shape);
            let n = Nest::<1>::new(&shape, [&strides], None);
            let total: usize = shape.iter().product();
            let groups = n.pieces(parts, align);
            assert!(!groups.is_empty() && groups.len() <= parts, "{shape:?}");
            let mut seen = vec![0u8; total];
            let sizes: Vec<usize> = groups
                .iter()
                .map(|g| {
                    for (base, r) in g {
                        assert!(r.start % align == 0, "{shape:?}: cut at {}", r.start);
                        for i in r.clone() {
                            seen[(base[0] + i as isize * n.inner.strides[0]) as usize] += 1;
                        }
                    }
                    g.len()
                })
                .collect();
            assert!(seen.iter().all(|&c| c == 1), "{shape:?} parts {parts}");
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{shape:?}: unbalanced groups {sizes:?}");
        }
        // One contiguous axis of 64 in two parts: halves of 32.
        let n = Nest::<1>::new(&[64], [&[1]], None);
        assert_eq!(
            n.pieces(2, 16),
            vec![vec![([0], 0..32)], vec![([0], 32..64)]]
        );
        assert!(
            Nest::<1>::new(&[0, 4], [&[4, 1]], None)
                .pieces(2, 16)
                .is_empty()
        );
    }

    #[test]
    fn tiled_tasks_walk_the_outer_positions_of_one_tile_in_order() {
        // 3 outer positions, inner 10 cut into tiles of 4: serially the visits are tile-major.
        let n = Nest::<1>::new(&[3, 10], [&[100, 1]], None);
        let visits = Mutex::new(Vec::new());
        crate::kernels::test_pool(1)
            .install(|| n.for_each_tiled(4, GRAIN, |b, r| visits.lock().unwrap().push((b[0], r))));
        assert_eq!(
            visits.into_inner().unwrap(),
            vec![
                (0, 0..4),
                (100, 0..4),
                (200, 0..4),
                (0, 4..8),
                (100, 4..8),
                (200, 4..8),
                (0, 8..10),
                (100, 8..10),
                (200, 8..10)
            ]
        );
    }
}
