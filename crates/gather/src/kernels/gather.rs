//! The read kernel: `out[p] = input[p with p[dim] := index[p]]` over the index's shape.
//!
//! gather, index_select (an index broadcast over the non-dim axes) and take_along_dim (input and
//! index broadcast against each other) all run here. The innermost planned axis picks the loop:
//!
//! - index constant along it (expanded or broadcast index): one contiguous row copy per index value;
//!   short rows (ROI labels), and rows up to 1 KiB of a large input (index_select), run many rows
//!   per task call with the rows ahead prefetched ([`short_rows`]);
//! - it is the `dim` axis itself: a lookup loop `out[j] = row[index[j]]`;
//! - a lookup along an outer `dim` of a large input: tiled, and where every outer position reads
//!   the same input, each tile is first copied into a contiguous buffer ([`staged`]);
//! - otherwise the general strided loop.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use ndarray::{ArrayView, IxDyn};

use super::words::{self, Plain};
use super::{SharedPtr, checked_position};
use crate::dims::Small;
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
    out: Vec<T>,
) -> Vec<T>
where
    T: Plain,
    I: IndexElem,
{
    let mode = Mode::Checked(index.bounds());
    let (input, out) = (words::view(input), words::vec(out));
    let out = gather_impl(&input, dim, index.view(), index.size(), mode, out);
    let out = out.expect("checked values are never out of range");
    // SAFETY: the kernel only copies words of `input`, i.e. elements of `T`, into `out`.
    unsafe { words::unvec(out) }
}

/// [`gather`] under the strict bounds policy with an index that has not been checked: every value
/// is checked as it is used (one predictable comparison in the loop, instead of a separate pass
/// over the index before it). Returns `None`, with the output dropped, if any value is outside
/// `0..input.shape[dim]`; the caller then finds the first such value for the error
/// ([`crate::index::check_bounds`]). Preconditions as [`gather`], but for the index check.
pub(crate) fn gather_checking<T, I>(
    input: &ArrayView<'_, T, IxDyn>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    out: Vec<T>,
) -> Option<Vec<T>>
where
    T: Plain,
    I: IndexElem,
{
    assert!(dim < input.ndim(), "gather kernel: dim out of range");
    let size = input.shape()[dim];
    let (input, out) = (words::view(input), words::vec(out));
    let out = gather_impl(&input, dim, index, size, Mode::Checking, out);
    // SAFETY: the kernel only copies words of `input`, i.e. elements of `T`, into `out`.
    out.map(|out| unsafe { words::unvec(out) })
}

/// Whether the index values were checked before the kernel (under a policy), or are checked by
/// it.
#[derive(Clone, Copy)]
enum Mode {
    Checked(Bounds),
    Checking,
}

fn gather_impl<T, I>(
    input: &ArrayView<'_, T, IxDyn>,
    dim: usize,
    idx: &ArrayView<'_, I, IxDyn>,
    size: usize,
    mode: Mode,
    mut out: Vec<T>,
) -> Option<Vec<T>>
where
    T: Copy + Send + Sync,
    I: IndexElem,
{
    let nd = input.ndim();
    assert_eq!(idx.ndim(), nd, "gather kernel: rank mismatch");
    assert!(dim < nd, "gather kernel: dim out of range");
    assert_eq!(
        size,
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
        return Some(out);
    }
    if size == 0 {
        // No value can be in range (and a checked index of this size is empty).
        assert!(
            matches!(mode, Mode::Checking),
            "gather kernel: checked index for an empty dim"
        );
        return None;
    }
    if let Mode::Checked(bounds @ (Bounds::Wrap | Bounds::Modulo)) = mode {
        let positions = super::positions(idx, bounds, size);
        let positions = positions
            .broadcast(idx.raw_dim())
            .expect("positions broadcast to the index's shape");
        let strict = Mode::Checked(Bounds::Strict);
        return gather_impl(input, dim, &positions, size, strict, out);
    }
    let shape = idx.shape();
    let out_strides = Small::row_major(shape);
    let mut in_strides = Small::from_slice(input.strides());
    let dstride = in_strides[dim];
    in_strides[dim] = 0;
    let nest = Nest::<3>::new(shape, [&out_strides, idx.strides(), &in_strides], None);
    let ptrs = Ptrs {
        out: SharedPtr(out.as_mut_ptr()),
        idx: SharedPtr(idx.as_ptr() as *mut I),
        x: SharedPtr(input.as_ptr() as *mut T),
    };
    let how = How::new::<T>(&nest, input.len(), size);
    let bad = AtomicBool::new(false);
    // One loop for every mode: checked positions pass the check (one compare, always predicted);
    // an unchecked value out of range reads row 0 instead and is remembered in the task's flag,
    // and the output is then dropped.
    run(&nest, ptrs, dstride, how, &bad, move |v, bad| {
        checked_position::<false>(v, size, bad) as isize
    });
    if bad.into_inner() {
        return None;
    }
    // SAFETY: the nest covers every position of the index shape exactly once, and the output
    // strides are the row-major strides of that shape, so each of the `n` slots was written once.
    unsafe { out.set_len(n) };
    Some(out)
}

/// Bytes of the input one tile of a tiled lookup may span (a part of a core's L2 cache); 4 KiB
/// under Miri, whose test inputs are small.
const TILE_BYTES: usize = if cfg!(miri) { 4 << 10 } else { 256 << 10 };

/// Bytes of a staged tile ([`staged`]): half of a core's L2 cache, the size that served W5 best
/// of those compared, smaller and larger (see docs/performance.md,
/// "kernels/gather.rs: STAGE_BYTES"). 8 KiB under Miri.
const STAGE_BYTES: usize = if cfg!(miri) { 8 << 10 } else { 512 << 10 };

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
    /// The tile width of a staged lookup ([`staged`]), at least `tile`'s.
    staged_tile: usize,
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
        let tile_of = |bytes: usize| (bytes / size.max(1).saturating_mul(elem)) / line * line;
        let tile = tile_of(TILE_BYTES);
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
            staged_tile: tile_of(STAGE_BYTES),
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

/// Rows of at most this many bytes are copied by [`short_rows`], many rows per task call.
const SHORT_ROW_BYTES: usize = 256;

/// Rows of a large input up to this many bytes go to [`short_rows`] too, which prefetches them
/// whole a few rows ahead (index_select of 1 KiB rows from a 100 MB table, W8).
const PREFETCHED_ROW_BYTES: usize = 1024;

/// How many bytes of rows ahead [`short_rows`] keeps requested for rows longer than
/// [`SHORT_ROW_BYTES`].
const ROWS_AHEAD_BYTES: usize = 2048;

/// Runs the gather over `nest`. `map` turns an index value into the input position along `dim`;
/// in checking mode it maps a value out of range to 0 and sets the flag it is given. Each task
/// keeps its own flag and reports a set one into `bad` once, at its end. `map` is `Copy` so that
/// every task copies it (its `size`) into a local: read through a reference, it would be reloaded
/// after every store to the output, which the compiler cannot prove does not alias it.
fn run<T, I, M>(nest: &Nest<3>, p: Ptrs<T, I>, dstride: isize, how: How, bad: &AtomicBool, map: M)
where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize + Copy + Sync + Send,
{
    let [os, is, xs] = nest.inner.strides;
    let report = |flag: bool| {
        if flag {
            bad.store(true, Ordering::Relaxed);
        }
    };
    // The prefetch distance of the element loops, over a large input only.
    let ahead = how.random.then_some(super::PREFETCH_DISTANCE);
    let elem = std::mem::size_of::<T>().max(1);
    let row_bytes = nest.inner.len.saturating_mul(elem);
    if is == 0
        && (row_bytes <= SHORT_ROW_BYTES || (how.random && row_bytes <= PREFETCHED_ROW_BYTES))
    {
        if let Some(rows) = nest.rows() {
            return short_rows(&rows, p, dstride, how, report, map);
        }
    }
    if let (Some(_), [outer]) = (how.tile, &nest.outer[..]) {
        if outer.strides[2] == 0 {
            let tile = how.staged_tile;
            return staged(nest, *outer, tile, p, dstride, how.size, report, map);
        }
    }
    // SAFETY (both loops below, and `lookup`): `base` plus `j * stride` for `j` in the inner range
    // are offsets of positions inside the iteration shape, which is the index's shape: in bounds
    // for the output (its shape) and the index (its own view). For the input, every non-dim
    // coordinate is below the index's size there, which the caller asserted is at most the input's,
    // and the dim coordinate is an index value mapped into `0..input.shape[dim]` by `map` (checked
    // before the kernel, or checked by `map` itself, which maps a value out of range to 0). Output
    // positions are disjoint between tasks (the planner splits positions, never duplicates them);
    // the index and the input are only read, and neither can alias the freshly allocated output. A
    // prefetch names the input element of a position `j + PREFETCH_DISTANCE` that `walk_ahead`
    // names only while it is inside the inner range, so its address is in bounds too; the row
    // prefetch computes its addresses with `wrapping_offset` (no dereference, no UB even past the
    // end) and a prefetch never faults.
    if is == 0 {
        // Row copy: the index is constant along the inner axis (an expanded or broadcast index,
        // index_select): one lookup, then a contiguous copy.
        let grain = if os == 1 && xs == 1 {
            super::copy_grain::<T>(nest.total)
        } else {
            crate::plan::GRAIN
        };
        nest.for_each_grain(grain, move |base, r| unsafe {
            let (Ptrs { out, idx, x }, map) = (p, map);
            let mut flag = false;
            let op = out.0.offset(base[0]);
            let v = *idx.0.offset(base[1]);
            let src = x.0.offset(base[2] + map(v.to_i64(), &mut flag) * dstride);
            let src = src.cast_const();
            if os == 1 && xs == 1 {
                std::ptr::copy_nonoverlapping(src.add(r.start), op.add(r.start), r.len());
            } else {
                for j in r {
                    let j = j as isize;
                    *op.offset(j * os) = *src.offset(j * xs);
                }
            }
            report(flag);
        });
    } else if os == 1 && is == 1 {
        // Lookup loop: output and index contiguous along the inner axis (`xs == 0` when the
        // inner axis is `dim` itself: a lookup along one row of the input).
        lookup(nest, p, (xs, dstride), how, report, map);
    } else {
        // The general strided loop.
        split(nest, how, move |base, r| unsafe {
            let (Ptrs { out, idx, x }, map) = (p, map);
            let mut flag = false;
            let op = out.0.offset(base[0]);
            let ip = idx.0.offset(base[1]).cast_const();
            let xp = x.0.offset(base[2]).cast_const();
            let mut src = |j: usize| {
                let jj = j as isize;
                xp.offset(jj * xs + map((*ip.offset(jj * is)).to_i64(), &mut flag) * dstride)
            };
            super::walk_ahead!(r, ahead, |j, next| {
                if let Some(n) = next {
                    super::prefetch(src(n));
                }
                *op.offset(j as isize * os) = *src(j);
            });
            report(flag);
        });
    }
}

/// The lookup loop of [`run`]: output and index contiguous along the inner axis, the input read
/// at `j * xs + map(index[j]) * dstride` from the position's base, for `steps = (xs, dstride)`.
/// Steps `(0, 1)` are a lookup along one contiguous row of the input (the inner axis is `dim`,
/// W1): each task then runs the `UNIT` instance of [`lookup_row`], whose steps are constants, so
/// that the loop does not pay a multiply and an add per element for steps read at run time (see
/// docs/performance.md, "kernels/gather.rs: lookup"). Over an input small enough not to be
/// prefetched, that instance checks four elements at a time.
fn lookup<T, I, M, R>(
    nest: &Nest<3>,
    p: Ptrs<T, I>,
    steps: (isize, isize),
    how: How,
    report: R,
    map: M,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize + Copy + Sync + Send,
    R: Fn(bool) + Sync + Send,
{
    let ahead = how.random.then_some(super::PREFETCH_DISTANCE);
    let row = RowPrefetch::new::<T>(nest, steps.0, steps.1, how.size);
    // SAFETY: as the loops of `run`: `base` is a position of the iteration shape and `r` a range
    // of the inner axis there, along which the output and the index are contiguous: the contract
    // of `lookup_row`, whose `UNIT` instance runs only for steps `(0, 1)`. The row prefetch only
    // computes addresses (`wrapping_offset`).
    split(nest, how, move |base, r| unsafe {
        let (Ptrs { out, idx, x }, map) = (p, map);
        let op = out.0.offset(base[0]);
        let ip = idx.0.offset(base[1]).cast_const();
        let xp = x.0.offset(base[2]).cast_const();
        row.fetch_next(xp);
        let flag = if steps == (0, 1) {
            let direct = ahead.is_none().then_some(how.size);
            lookup_row::<true, T, I, M>(op, ip, xp, r, steps, ahead, direct, map)
        } else {
            lookup_row::<false, T, I, M>(op, ip, xp, r, steps, ahead, None, map)
        };
        report(flag);
    });
}

/// One task's range `r` of the lookup loop: `op[j] = xp[j * xs + map(ip[j]) * dstride]` for
/// `steps = (xs, dstride)`, or `(0, 1)` under `UNIT`. Returns whether `map` set its flag.
///
/// With `direct = Some(size)` (`map` is the identity on `0..size` and flags any other value), the
/// loop takes four elements at a time: four index loads, one unsigned comparison of their maximum
/// against `size` (the per-element `map` only on a cold path, [`lookup_each`], when it fails),
/// then four input loads and four stores: one branch per four elements instead of four. Only the
/// `UNIT` instance takes it, as the strided lookup does not gain from it; the loads stay scalar,
/// which a hardware gather (AVX2 `vgatherqps`) does not beat (see docs/performance.md,
/// "kernels/gather.rs: lookup_row").
///
/// Not inlined into the task: inlined into the planner's loop, whose own state takes the
/// registers, the loop kept its pointers and `size` on the stack and reloaded them at every
/// element (three more loads per element). Here they stay in registers, and with `UNIT` the
/// strides are constants (the task closure reads its captures from memory, so it cannot make them
/// so).
///
/// # Safety
/// For every `j` in `r`, `op.add(j)` must be writable and `ip.add(j)` readable, and
/// `xp.offset(j * xs + k * dstride)` readable for every position `k` that `map` can return; with
/// `ahead`, the same holds for every `j + ahead` that is inside `r`. `UNIT` only with
/// `steps == (0, 1)`; `direct` only as described above, and only read under `UNIT`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn lookup_row<const UNIT: bool, T, I, M>(
    op: *mut T,
    ip: *const I,
    xp: *const T,
    mut r: Range<usize>,
    steps: (isize, isize),
    ahead: Option<usize>,
    direct: Option<usize>,
    map: M,
) -> bool
where
    T: Copy,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize,
{
    let (xs, dstride) = if UNIT { (0, 1) } else { steps };
    let mut flag = false;
    // SAFETY: the function's contract. In the grouped loop, `j..j + 4` lies inside `r`; the four
    // values are positions of `0..size` when their unsigned maximum is below `size` (a negative
    // value is a huge unsigned one), which `map` would return unchanged, and otherwise each goes
    // through `map`. The four outputs are contiguous and written by `store4`, whose contract they
    // meet (the output is fresh: it overlaps no input). `walk_ahead!` names `n` only inside `r`.
    unsafe {
        // Only the `UNIT` instance compiles the grouped loop (the strided one never gets `direct`).
        if let (true, Some(size)) = (UNIT, direct) {
            while r.len() >= 4 {
                let j = r.start;
                let (v, in_range) = super::four_values(ip.add(j), size);
                if in_range {
                    let at = |k: usize| xp.offset((j + k) as isize * xs + v[k] as isize * dstride);
                    store4(op.add(j), [at(0), at(1), at(2), at(3)]);
                } else {
                    lookup_each(op, xp, j..j + 4, (xs, dstride), v, &map, &mut flag);
                }
                r.start += 4;
            }
        }
        let mut src =
            |j: usize| xp.offset(j as isize * xs + map((*ip.add(j)).to_i64(), &mut flag) * dstride);
        super::walk_ahead!(r, ahead, |j, next| {
            if let Some(n) = next {
                super::prefetch(src(n));
            }
            *op.add(j) = *src(j);
        });
    }
    flag
}

/// `dst[k] = *at[k]` for `k < 4`. Elements of four bytes (float32, int32) are loaded into one
/// vector register and written with one 16-byte store: W1's loop is bound by its memory
/// operations, eight loads and four stores per group, and the compiler wrote the unaligned
/// `[T; 4]` as four 4-byte stores (see docs/performance.md, "kernels/gather.rs: store4"). The loads
/// and shuffles (`movss`, `unpcklps`, `movlhps`) move bits and never touch their values: a NaN's
/// payload, an integer, whatever the four bytes hold, is written unchanged.
///
/// # Safety
/// Each `at[k]` must be readable and `dst..dst + 4` writable, not overlapping them.
#[inline(always)]
unsafe fn store4<T: Copy>(dst: *mut T, at: [*const T; 4]) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<T>() == 4 {
        use std::arch::x86_64::{_mm_load_ss, _mm_movelh_ps, _mm_storeu_ps, _mm_unpacklo_ps};
        // SAFETY: the contract; SSE is part of x86_64, and neither `_mm_load_ss` nor
        // `_mm_storeu_ps` asks for alignment. Each load reads the four bytes of one element.
        unsafe {
            let load = |p: *const T| _mm_load_ss(p.cast::<f32>());
            let lo = _mm_unpacklo_ps(load(at[0]), load(at[1]));
            let hi = _mm_unpacklo_ps(load(at[2]), load(at[3]));
            _mm_storeu_ps(dst.cast::<f32>(), _mm_movelh_ps(lo, hi));
        }
        return;
    }
    // SAFETY: the contract.
    unsafe {
        dst.cast::<[T; 4]>()
            .write_unaligned([*at[0], *at[1], *at[2], *at[3]])
    }
}

/// The group `r` of four of [`lookup_row`] whose values `v` are not all in range, one element at a
/// time through `map`: out of the loop, so that the loop keeps its registers.
///
/// # Safety
/// As [`lookup_row`], for the positions of `r`, whose index values are `v`.
#[cold]
#[inline(never)]
unsafe fn lookup_each<T: Copy, M: Fn(i64, &mut bool) -> isize>(
    op: *mut T,
    xp: *const T,
    r: Range<usize>,
    (xs, dstride): (isize, isize),
    v: [i64; 4],
    map: &M,
    flag: &mut bool,
) {
    for (j, v) in r.zip(v) {
        // SAFETY: the function's contract; `map` returns a position `lookup_row` may read.
        unsafe { *op.add(j) = *xp.offset(j as isize * xs + map(v, flag) * dstride) };
    }
}

/// Short rows (ROI labels: one 16-byte row of `roi[n,21,4]` per label): `rows` is the gather's
/// nest from [`Nest::rows`], whose inner axis walks the rows and whose serial axis is one row.
/// Each task copies a run of rows in one loop, and over a large input requests the rows ahead, so
/// that the cache misses of the random rows overlap: the first and last line of the row
/// [`super::PREFETCH_DISTANCE`] rows ahead for short rows, every line of the rows up to
/// [`ROWS_AHEAD_BYTES`] ahead for longer ones (contiguous, up to [`PREFETCHED_ROW_BYTES`]).
fn short_rows<T, I, M, R>(
    rows: &Nest<3>,
    p: Ptrs<T, I>,
    dstride: isize,
    how: How,
    report: R,
    map: M,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize + Copy + Sync + Send,
    R: Fn(bool) + Sync + Send,
{
    let row = rows
        .mid
        .expect("a rows nest has its row as the serial axis");
    let (len, [os, _, xs]) = (row.len, row.strides);
    let [ros, ris, rxs] = rows.inner.strides;
    let contiguous = os == 1 && xs == 1;
    let elem = std::mem::size_of::<T>().max(1);
    let row_bytes = len * elem;
    // Rows ahead, and whether every line of a row is requested (else its first and last).
    let (ahead, whole) = if row_bytes <= SHORT_ROW_BYTES || !contiguous {
        (super::PREFETCH_DISTANCE, false)
    } else {
        ((ROWS_AHEAD_BYTES / row_bytes).max(1), true)
    };
    let grain = if how.random {
        super::RANDOM_GRAIN
    } else {
        crate::plan::GRAIN
    };
    // Contiguous short rows of a common length, packed in the output and named by consecutive
    // index values (ROI labels, index_select of short rows), run a loop of their own whose row
    // copy is one fixed-size move.
    let packed = contiguous && !whole && ris == 1 && ros == len as isize;
    let fixed = packed.then_some(len);
    // Whether a row can cross a cache line: not when its length is a power of two of at most a
    // line and every row starts at a multiple of it (W4: 16-byte rows 336 bytes apart), so its
    // first line is all there is to request. The steps are the call's; the start is each task's.
    let fits = |offset: isize| offset.unsigned_abs() * elem % row_bytes == 0;
    let aligned_steps =
        row_bytes.is_power_of_two() && row_bytes <= 64 && fits(rxs) && fits(dstride);
    // SAFETY: as in `run`: `base + j * inner stride` for `j` in the range is a row of the
    // iteration shape (in bounds for the output and the index), and `k * row stride` for `k` in
    // `0..len` an element of that row; the input row is the one the index value names, mapped
    // into range by `map`. The prefetched row belongs to the position `j + ahead`, inside the
    // range, and the addresses of its lines are computed with `wrapping_offset`; a prefetch never
    // faults. Output rows are disjoint between tasks and the output aliases neither operand.
    rows.for_each_grain(grain, move |base, r| unsafe {
        let (Ptrs { out, idx, x }, map) = (p, map);
        let op = out.0.offset(base[0]);
        let ip = idx.0.offset(base[1]).cast_const();
        let xp = x.0.offset(base[2]).cast_const();
        let ahead = how.random.then_some(ahead);
        let steps = RowSteps {
            x: rxs,
            dim: dstride,
            crosses: !(aligned_steps && (xp as usize) % row_bytes == 0),
        };
        let flag = match fixed {
            Some(1) => fixed_rows::<1, T, I, M>(op, ip, xp, r, steps, ahead, map),
            Some(2) => fixed_rows::<2, T, I, M>(op, ip, xp, r, steps, ahead, map),
            Some(3) => fixed_rows::<3, T, I, M>(op, ip, xp, r, steps, ahead, map),
            Some(4) => fixed_rows::<4, T, I, M>(op, ip, xp, r, steps, ahead, map),
            Some(8) => fixed_rows::<8, T, I, M>(op, ip, xp, r, steps, ahead, map),
            Some(16) => fixed_rows::<16, T, I, M>(op, ip, xp, r, steps, ahead, map),
            _ => {
                let mut flag = false;
                let mut src = |j: usize| {
                    let jj = j as isize;
                    xp.offset(jj * rxs + map((*ip.offset(jj * ris)).to_i64(), &mut flag) * dstride)
                };
                let copy = |s: *const T, j: usize| {
                    let d = op.offset(j as isize * ros);
                    if contiguous {
                        copy_short(s, d, len);
                    } else {
                        for k in 0..len as isize {
                            *d.offset(k * os) = *s.offset(k * xs);
                        }
                    }
                };
                super::walk_ahead!(r, ahead, |j, n| {
                    if let Some(n) = n {
                        let next = src(n);
                        if whole {
                            for k in (0..row_bytes).step_by(64) {
                                super::prefetch(next.cast::<u8>().wrapping_add(k));
                            }
                        } else {
                            super::prefetch(next);
                            super::prefetch(next.wrapping_offset((len as isize - 1) * xs));
                        }
                    }
                    copy(src(j), j);
                });
                flag
            }
        };
        report(flag);
    });
}

/// How [`fixed_rows`] finds its input rows, in elements: the step from one row to the next in the
/// input, and `dim`'s stride there; and whether an input row can cross a cache line.
#[derive(Clone, Copy)]
struct RowSteps {
    x: isize,
    dim: isize,
    crosses: bool,
}

/// One task's range `r` of [`short_rows`] for contiguous rows of `K` elements, packed in the
/// output and named by consecutive index values: output row `j` (the `K` elements at `op + j *
/// K`) is the input row at `xp[j * x + map(ip[j]) * dim]`, for `steps = (x, dim)`. The first line
/// of the row `ahead` positions on is requested, and its last line too where rows can cross a
/// line (`steps.crosses`). Returns whether `map` set its flag.
///
/// ```text
/// ip:  [ 3,                  0,                  2,                  ... ]  one value per row
/// op:  [ xp[0*x + 3*dim..][..K] | xp[1*x + 0*dim..][..K] | xp[2*x + 2*dim..][..K] | ... ]
/// ```
///
/// With `K` and the output and index steps constants the copy is one fixed-size move (no jump on
/// the row length at every row), and as a function of its own (not inlined into the planner's
/// loop) the pointers and strides stay in registers. Whether a row's last line is requested too
/// is decided once per task (`steps.crosses`): a test at every row costs the loop more than a
/// request of one line per row (see docs/performance.md, "kernels/gather.rs: fixed_rows").
///
/// # Safety
/// For every `j` in `r`, the `K` elements at `op.add(j * K)` must be writable, `ip.add(j)`
/// readable, and the `K` elements at `xp.offset(j * x + k * dim)` readable for every position
/// `k` that `map` can return; with `ahead`, the same holds for every `j + ahead` that is inside
/// `r`.
#[inline(never)]
unsafe fn fixed_rows<const K: usize, T, I, M>(
    op: *mut T,
    ip: *const I,
    xp: *const T,
    r: Range<usize>,
    steps: RowSteps,
    ahead: Option<usize>,
    map: M,
) -> bool
where
    T: Copy,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize,
{
    let RowSteps { x, dim, crosses } = steps;
    let mut flag = false;
    // SAFETY: the function's contract; `walk_ahead!` names `n` only inside `r`, and the last
    // element of that row is computed with `wrapping_add` (a prefetch never faults).
    unsafe {
        let mut src = |j: usize| {
            let jj = j as isize;
            xp.offset(jj * x + map((*ip.add(j)).to_i64(), &mut flag) * dim)
        };
        super::walk_ahead!(r, ahead, |j, n| {
            if let Some(n) = n {
                let next = src(n);
                super::prefetch(next);
                if crosses {
                    super::prefetch(next.wrapping_add(K - 1));
                }
            }
            let d = op.add(j * K);
            d.cast::<[T; K]>().write(src(j).cast::<[T; K]>().read());
        });
    }
    flag
}

/// The tiles of a lookup over a large input along an outer `dim` (W5: `x[4096,4096]` gathered
/// along 0 with a full index), where every outer position reads the same input (its stride along
/// the one outer axis is 0). Each task copies the input's current tile, `size` rows of `tile`
/// columns, into a contiguous buffer once, and then serves every outer position of that tile
/// from the buffer:
///
/// ```text
/// x [size, cols] (rows far apart: one page, and few cache sets, per row)
///   tile c: x[0][c0..c1] x[1][c0..c1] ... x[size-1][c0..c1] -> buf [size, c1 - c0], contiguous
///   out[i][j] = buf[index[i][j]][j - c0]   for every i, j in c0..c1
/// ```
///
/// Read straight from the input, the rows of a tile lie a row's length apart, so they share a
/// handful of cache sets and each needs its own page translation: the tile never stays in cache.
/// The buffer holds it in one piece (part of a core's L2). The lines of the index and the output
/// of the position [`TILE_AHEAD`] ahead are prefetched, as those are the remaining misses.
#[allow(clippy::too_many_arguments)]
fn staged<T, I, M, R>(
    nest: &Nest<3>,
    outer: crate::plan::Axis<3>,
    tile: usize,
    p: Ptrs<T, I>,
    dstride: isize,
    size: usize,
    report: R,
    map: M,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    M: Fn(i64, &mut bool) -> isize + Copy + Sync + Send,
    R: Fn(bool) + Sync + Send,
{
    const A: usize = TILE_AHEAD;
    let [oo, io, _] = outer.strides;
    let elem = std::mem::size_of::<T>().max(1);
    let ielem = std::mem::size_of::<I>().max(1);
    let init = || Stage::<T> {
        start: usize::MAX,
        buf: Vec::new(),
    };
    // SAFETY: the nest has the one outer axis `outer`, along which the input's stride is 0, and
    // an inner axis contiguous in all three operands (the tiled lookup's conditions, `How::new`).
    // So a piece `(base, r)` is the outer position `i = base[0] / oo` (the output is row-major,
    // `oo > 0`) and the inner positions `r`; `base[2]` is 0. The staged rows `x + row * dstride +
    // r` for `row` in `0..size` are the input's elements of the tile along `dim`, all in bounds;
    // the buffer then holds `size * r.len()` of them, and `map` maps every index value into
    // `0..size`, so `buf[v * w + c]` with `c < w` is in bounds. Output and index offsets are as
    // in `run`. The lines prefetched `A` positions ahead belong to the position `i + A`, which
    // exists (checked), and are computed with `wrapping_offset`; a prefetch never faults.
    nest.for_each_tiled_with(tile, super::RANDOM_GRAIN, init, move |st, base, r| unsafe {
        let (Ptrs { out, idx, x }, map) = (p, map);
        let w = r.len();
        if st.start != r.start || st.buf.len() != size * w {
            st.buf.clear();
            st.buf.reserve(size * w);
            let first = x.0.add(r.start).cast_const();
            for row in 0..size as isize {
                let src = first.offset(row * dstride);
                super::prefetch(src.wrapping_offset(8 * dstride));
                st.buf.extend_from_slice(std::slice::from_raw_parts(src, w));
            }
            st.start = r.start;
        }
        let i = (base[0] / oo) as usize;
        if i + A < outer.len {
            let ia = idx
                .0
                .offset(base[1])
                .wrapping_offset(A as isize * io + r.start as isize);
            let oa = out
                .0
                .offset(base[0])
                .wrapping_offset(A as isize * oo + r.start as isize);
            for k in (0..w * ielem).step_by(64) {
                super::prefetch(ia.cast::<u8>().wrapping_add(k).cast_const());
            }
            for k in (0..w * elem).step_by(64) {
                super::prefetch(oa.cast::<u8>().wrapping_add(k).cast_const());
            }
        }
        let op = out.0.offset(base[0]);
        let ip = idx.0.offset(base[1]).cast_const();
        report(staged_row(op, ip, st.buf.as_ptr(), r, map));
    });
}

/// One piece `r` of a staged lookup: `op[j] = buf[map(ip[j]) * r.len() + (j - r.start)]`.
/// Returns whether `map` set its flag. Not inlined, as [`lookup_row`] is not, so that the loop
/// keeps its pointers and `size` in registers (inlined into the planner's item loop, it reloaded
/// three of them from the stack at every element).
///
/// # Safety
/// `op.add(j)` writable and `ip.add(j)` readable for every `j` in `r`; `buf` holds `k * r.len()`
/// readable elements for every position `k` that `map` can return.
#[inline(never)]
unsafe fn staged_row<T: Copy, I: IndexElem, M: Fn(i64, &mut bool) -> isize>(
    op: *mut T,
    ip: *const I,
    buf: *const T,
    r: Range<usize>,
    map: M,
) -> bool {
    let w = r.len();
    let mut flag = false;
    for j in r.clone() {
        // SAFETY: the function's contract.
        unsafe {
            let v = map((*ip.add(j)).to_i64(), &mut flag) as usize;
            *op.add(j) = *buf.add(v * w + (j - r.start));
        }
    }
    flag
}

/// How many outer positions ahead [`staged`] prefetches the index and output lines.
const TILE_AHEAD: usize = 16;

/// A task's copy of one tile of the input, for [`staged`].
struct Stage<T> {
    /// The first inner position of the tile held (`usize::MAX` before the first).
    start: usize,
    /// The tile, `size` rows of its width, row-major.
    buf: Vec<T>,
}

/// Copies `len` contiguous elements; the common short lengths as one fixed-size move each.
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing `len` elements, not overlapping.
#[inline(always)]
unsafe fn copy_short<T: Copy>(src: *const T, dst: *mut T, len: usize) {
    /// # Safety
    /// As [`copy_short`], with `len == K`.
    #[inline(always)]
    unsafe fn fixed<T: Copy, const K: usize>(src: *const T, dst: *mut T) {
        // SAFETY: the caller's contract; `[T; K]` has the alignment of `T`.
        unsafe { dst.cast::<[T; K]>().write(src.cast::<[T; K]>().read()) }
    }
    // SAFETY: the caller's contract, for the length matched.
    unsafe {
        match len {
            1 => *dst = *src,
            2 => fixed::<T, 2>(src, dst),
            3 => fixed::<T, 3>(src, dst),
            4 => fixed::<T, 4>(src, dst),
            8 => fixed::<T, 8>(src, dst),
            16 => fixed::<T, 16>(src, dst),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
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
        let span = size
            .saturating_mul(dstride.unsigned_abs())
            .saturating_mul(elem);
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

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use half::{bf16, f16};
    use ndarray::{Array, ArrayD, Axis, Dimension, IxDyn, s};

    /// A small deterministic generator for test data.
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// The definition, one position at a time, in row-major order of the index.
    fn reference<T: Copy>(
        x: &ArrayView<'_, T, IxDyn>,
        dim: usize,
        idx: &ArrayView<'_, i64, IxDyn>,
        bounds: Bounds,
    ) -> Vec<T> {
        let size = x.shape()[dim];
        idx.indexed_iter()
            .map(|(p, &v)| {
                let mut q = p.slice().to_vec();
                q[dim] = bounds.map(v, size).expect("test index in bounds");
                x[IxDyn(&q)]
            })
            .collect()
    }

    fn check<T: crate::Element>(
        name: &str,
        x: &ArrayView<'_, T, IxDyn>,
        dim: usize,
        idx: &ArrayView<'_, i64, IxDyn>,
        bounds: Bounds,
    ) {
        let want = reference(x, dim, idx, bounds);
        for threads in [1, 2, 3] {
            let got = crate::kernels::test_pool(threads).install(|| {
                let checked =
                    CheckedIndex::new("gather", idx.clone(), dim, x.shape()[dim], bounds).unwrap();
                let got = gather(x, dim, &checked, Vec::with_capacity(idx.len()));
                if bounds == Bounds::Strict {
                    let fused = gather_checking(x, dim, idx, Vec::with_capacity(idx.len()));
                    assert!(
                        fused.as_ref() == Some(&got),
                        "{name}: checking kernel differs"
                    );
                }
                got
            });
            assert!(
                got == want,
                "{name}: threads {threads}, x {:?} strides {:?}, idx {:?} strides {:?}, dim {dim}",
                x.shape(),
                x.strides(),
                idx.shape(),
                idx.strides()
            );
        }
    }

    fn random_index(shape: &[usize], hi: usize, seed: u64) -> ArrayD<i64> {
        let mut s = seed;
        Array::from_shape_simple_fn(IxDyn(shape), || (lcg(&mut s) % hi as u64) as i64)
    }

    fn input(shape: &[usize]) -> ArrayD<f32> {
        let mut k = 0.0f32;
        Array::from_shape_simple_fn(IxDyn(shape), || {
            k += 1.0;
            k
        })
    }

    #[test]
    fn row_copy_of_expanded_and_broadcast_indices_matches_the_definition() {
        // Top-k patches: [B,N,D] gathered along 1 with [B,K] expanded along D (stride 0).
        let w = sized(300, 40);
        let x = input(&[6, 40, w]);
        let rows = random_index(&[6, 25], 40, 1);
        let idx = rows.view().insert_axis(Axis(2));
        let idx = idx.broadcast(IxDyn(&[6, 25, w])).unwrap();
        check("expanded", &x.view(), 1, &idx, Bounds::Strict);
        // ... narrower than the input along D, from a reversed and a transposed input.
        let idx_narrow = idx.slice(s![.., .., ..sized(77, 11)]).into_dyn();
        check("narrow", &x.view(), 1, &idx_narrow, Bounds::Strict);
        let rev = x.slice(s![.., ..;-1, ..;-1]).into_dyn();
        check("reversed input", &rev, 1, &idx, Bounds::Strict);
        let perm = x.view().permuted_axes(IxDyn(&[0, 2, 1]));
        let idx_t = rows.view().insert_axis(Axis(1));
        let idx_t = idx_t.broadcast(IxDyn(&[6, w, 25])).unwrap();
        check("transposed input", &perm, 2, &idx_t, Bounds::Strict);
        // ROI labels: one index per row broadcast over a short trailing axis.
        let n = sized(5000, 40);
        let roi = input(&[n, 21, 4]);
        let labels = random_index(&[n], 21, 2);
        let l = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
        let l = l.broadcast(IxDyn(&[n, 1, 4])).unwrap();
        check("roi", &roi.view(), 1, &l, Bounds::Strict);
        // Short rows under two outer axes (a transposed index keeps them apart), of every length
        // the short-row copy treats alike or apart, up to and past 256 bytes.
        let (a, b) = (sized(30, 4), sized(7, 2));
        let labels_t = random_index(&[a, b], 9, 17);
        let lt = labels_t.t().insert_axis(Axis(2)).insert_axis(Axis(3));
        for len in [1, 2, 3, 4, 5, 8, 16, 64, 65] {
            let x = input(&[b, a, 9, len]);
            let l = lt.broadcast(IxDyn(&[b, a, 1, len])).unwrap();
            check(
                &format!("short rows of {len}"),
                &x.view(),
                2,
                &l,
                Bounds::Strict,
            );
            let u = x.mapv(|v| v as u8);
            check(
                &format!("u8 rows of {len}"),
                &u.view(),
                2,
                &l,
                Bounds::Strict,
            );
            let h = x.mapv(|v| v as f64);
            check(
                &format!("f64 rows of {len}"),
                &h.view(),
                2,
                &l,
                Bounds::Strict,
            );
            let rev = x.slice(s![.., ..;-1, .., ..;-1]).into_dyn();
            check(
                &format!("reversed rows of {len}"),
                &rev,
                2,
                &l,
                Bounds::Strict,
            );
        }
        // index_select: a 1-d index spread over a row-major output (stride 0 on the other axes).
        let (t, k) = (sized(500, 30), sized(900, 20));
        let table = input(&[t, 130]);
        let ids = random_index(&[k], t, 3);
        let spread = ids.view().insert_axis(Axis(1));
        let spread = spread.broadcast(IxDyn(&[k, 130])).unwrap();
        check("index_select", &table.view(), 0, &spread, Bounds::Strict);
        // Stride 0 along dim itself: every output of a row reads one element.
        let r = sized(300, 20);
        let along = random_index(&[r, 1], 130, 4);
        let along = along.broadcast(IxDyn(&[r, sized(250, 20)])).unwrap();
        check(
            "stride 0 along dim",
            &table.view(),
            1,
            &along,
            Bounds::Strict,
        );
    }

    #[test]
    fn lookup_along_the_innermost_dim_matches_the_definition() {
        // Seed-like gather along the last axis, contiguous and with negative input strides.
        let r = sized(300, 8);
        let x = input(&[r, 257]);
        let idx = random_index(&[r, sized(400, 40)], 257, 5);
        check("dim 1", &x.view(), 1, &idx.view(), Bounds::Strict);
        // Rows of 4k + 3 values: groups of four and a tail of three.
        let odd = random_index(&[r, 7], 257, 15);
        check("groups and tail", &x.view(), 1, &odd.view(), Bounds::Strict);
        let rev = x.slice(s![..;-1, ..;-1]).into_dyn();
        check("reversed", &rev, 1, &idx.view(), Bounds::Strict);
        // Token logits: [B,L,V] with [B,L,1]; the inner axis walks rows of the input.
        let (l, v) = (sized(200, 8), sized(333, 33));
        let logits = input(&[4, l, v]);
        let labels = random_index(&[4, l, 1], v, 6);
        check("logits", &logits.view(), 2, &labels.view(), Bounds::Strict);
        // Cube: dim 1 of [n,n,n], the inner axis contiguous in all three operands.
        let (a, c) = (sized(40, 5), sized(42, 10));
        let cube = input(&[a, 41, c]);
        let ci = random_index(&[a, 30, c], 41, 7);
        check("cube", &cube.view(), 1, &ci.view(), Bounds::Strict);
        // A reversed index view.
        let ci_rev = ci.slice(s![.., ..;-1, ..;-1]).into_dyn();
        check("reversed index", &cube.view(), 1, &ci_rev, Bounds::Strict);
        // Wrapped and modular values.
        let mut s = 8u64;
        let k = sized(100, 20);
        let wrap = Array::from_shape_simple_fn(IxDyn(&[r, k]), || (lcg(&mut s) % 514) as i64 - 257);
        check("wrap", &x.view(), 1, &wrap.view(), Bounds::Wrap);
        let modulo =
            Array::from_shape_simple_fn(IxDyn(&[r, k]), || (lcg(&mut s) % 5000) as i64 - 2500);
        check("modulo", &x.view(), 1, &modulo.view(), Bounds::Modulo);
        // Under a policy each stored value is mapped once and broadcast again: an index
        // broadcast along the other axis and along dim itself, and a reversed one.
        let one_row = wrap.slice(s![0..1, ..]);
        let one_row = one_row.broadcast(IxDyn(&[r, k])).unwrap();
        check("wrap, broadcast rows", &x.view(), 1, &one_row, Bounds::Wrap);
        let one_col = modulo.slice(s![.., 0..1]);
        let one_col = one_col.broadcast(IxDyn(&[r, k])).unwrap();
        check(
            "modulo, broadcast along dim",
            &x.view(),
            1,
            &one_col,
            Bounds::Modulo,
        );
        let modulo_rev = modulo.slice(s![..;-1, ..;-1]).into_dyn();
        check("modulo, reversed", &rev, 1, &modulo_rev, Bounds::Modulo);
    }

    #[test]
    fn grouped_lookup_moves_four_byte_elements_bit_for_bit() {
        // `store4` moves float32 and int32 elements through vector registers: signalling NaNs
        // keep their payloads, and integers whose bits are NaNs come out unchanged.
        let r = sized(60, 4);
        let bits = Array::from_shape_fn(IxDyn(&[r, 37]), |d| {
            0x7f80_0001u32.wrapping_add(((d[0] * 37 + d[1]) as u32).wrapping_mul(7919))
        });
        let idx = random_index(&[r, 43], 37, 21);
        check("u32", &bits.view(), 1, &idx.view(), Bounds::Strict);
        let ints = bits.mapv(|b| b as i32);
        check("i32", &ints.view(), 1, &idx.view(), Bounds::Strict);
        let want = reference(&bits.view(), 1, &idx.view(), Bounds::Strict);
        let floats = bits.mapv(f32::from_bits);
        let checked = CheckedIndex::new("gather", idx.view(), 1, 37, Bounds::Strict).unwrap();
        let got = gather(&floats.view(), 1, &checked, Vec::with_capacity(idx.len()));
        assert!(got.iter().map(|f| f.to_bits()).eq(want.iter().copied()));
        assert!(got.iter().any(|f| f.is_nan()), "the test must move NaNs");
    }

    #[test]
    fn large_inputs_take_the_prefetched_and_tiled_loops() {
        // 8 MiB of f32 (16 KiB under Miri, whose thresholds are scaled down): the random-access
        // strategy (prefetch; tiling of a dim-0 gather).
        let (rows, cols) = (sized(2048, 64), sized(1024, 64));
        let x = input(&[rows, cols]);
        let idx = random_index(&[sized(700, 20), cols], rows, 9);
        check("dim 0 tiled", &x.view(), 0, &idx.view(), Bounds::Strict);
        let part = idx.slice(s![.., 3..cols - 24]).into_dyn();
        check("dim 0 tiled, offset", &x.view(), 0, &part, Bounds::Strict);
        let k = cols - 24;
        let wrapped =
            random_index(&[sized(300, 10), k - 5], 2 * rows, 18).mapv(|v| v - rows as i64);
        let xw = x.slice(s![.., 5..k]).mapv(|v| v as f64).into_dyn();
        check(
            "dim 0 tiled, f64, wrapped",
            &xw.view(),
            0,
            &wrapped.view(),
            Bounds::Wrap,
        );
        let rev = x.slice(s![..;-1, ..]).into_dyn();
        check(
            "dim 0 tiled, reversed",
            &rev,
            0,
            &idx.view(),
            Bounds::Strict,
        );
        let lookups = random_index(&[rows, sized(300, 20)], cols, 10);
        check(
            "dim 1 prefetched",
            &x.view(),
            1,
            &lookups.view(),
            Bounds::Strict,
        );
        let t = x.t().into_dyn();
        let strided = random_index(&[cols, sized(500, 20)], rows, 11);
        check(
            "transposed, general",
            &t,
            1,
            &strided.view(),
            Bounds::Strict,
        );
        // ROI labels over 8 MiB: short rows, prefetched a few positions ahead along the last
        // outer axis (and never past its end), also reversed and with wrapped labels.
        let n = sized(25_600, 32);
        let roi_data = input(&[n, 21, 4]);
        let roi = roi_data.view();
        let labels = random_index(&[n], 21, 13);
        let l = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
        let l = l.broadcast(IxDyn(&[n, 1, 4])).unwrap();
        check("roi, prefetched rows", &roi, 1, &l, Bounds::Strict);
        let roi_rev = roi.slice(s![..;-1, .., ..;-1]).into_dyn();
        check("roi, reversed", &roi_rev, 1, &l, Bounds::Strict);
        let wrapped = labels.mapv(|v| v - 21);
        let w = wrapped.view().insert_axis(Axis(1)).insert_axis(Axis(2));
        let w = w.broadcast(IxDyn(&[n, 1, 4])).unwrap();
        check("roi, wrapped", &roi, 1, &w, Bounds::Wrap);
        // The other row lengths with a loop of their own over a large input, in f32 and f64:
        // rows of 3 cross cache lines, the others never do.
        for len in [1, 3, 8, 16] {
            let n = sized((8 << 20) / (21 * 4 * len) + 1, 100);
            let x = input(&[n, 21, len]);
            let labels = random_index(&[n], 21, 20 + len as u64);
            let l = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
            let l = l.broadcast(IxDyn(&[n, 1, len])).unwrap();
            let name = format!("prefetched rows of {len}");
            check(&name, &x.view(), 1, &l, Bounds::Strict);
            let h = x.mapv(f64::from);
            check(&format!("{name}, f64"), &h.view(), 1, &l, Bounds::Strict);
        }
        // index_select of rows up to 1 KiB from a large table: whole rows prefetched ahead.
        let (t, k) = (sized(10_000, 24), sized(3000, 10));
        for width in [100, 256, 257] {
            let table = input(&[t, width]);
            let ids = random_index(&[k, 1], t, 19);
            let spread = ids.broadcast(IxDyn(&[k, width])).unwrap();
            check(
                &format!("rows of {width}"),
                &table.view(),
                0,
                &spread,
                Bounds::Strict,
            );
            let rev = table.slice(s![..;-1, ..;-1]).into_dyn();
            check(
                &format!("reversed rows of {width}"),
                &rev,
                0,
                &spread,
                Bounds::Strict,
            );
        }
        let flat = x
            .view()
            .into_shape_with_order(IxDyn(&[rows * cols]))
            .unwrap();
        let takes = random_index(&[sized(100_000, 300)], rows * cols, 12);
        check("1-d", &flat, 0, &takes.view(), Bounds::Strict);
    }

    #[test]
    fn checking_kernel_refuses_any_out_of_range_value_on_every_loop() {
        // (input shape, dim, index): lookup, row copy (expanded index), general (transposed), and
        // the prefetched/tiled loops of a large input.
        let (rows, cols, n) = (sized(2048, 64), sized(1024, 64), sized(25_600, 32));
        let big = input(&[rows, cols]);
        let small = input(&[40, 30]);
        let roi = input(&[n, 21, 4]);
        let col = random_index(&[40, 1], 40, 1);
        let labels = random_index(&[n, 1, 1], 21, 2);
        // (name, input, dim, index, the shape it is broadcast to: stride 0 along the inner axis).
        type Case<'a> = (
            &'a str,
            ArrayView<'a, f32, IxDyn>,
            usize,
            ArrayD<i64>,
            Vec<usize>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "lookup",
                small.view(),
                1,
                random_index(&[40, 30], 30, 3),
                vec![40, 30],
            ),
            ("row copy", small.view(), 0, col, vec![40, 30]),
            (
                "general",
                small.t().into_dyn(),
                1,
                random_index(&[30, 40], 40, 4),
                vec![30, 40],
            ),
            (
                "tiled",
                big.view(),
                0,
                random_index(&[sized(700, 20), cols], rows, 5),
                vec![sized(700, 20), cols],
            ),
            (
                "prefetched",
                big.view(),
                1,
                random_index(&[rows, sized(300, 20)], cols, 6),
                vec![rows, sized(300, 20)],
            ),
            ("short rows", roi.view(), 1, labels, vec![n, 1, 4]),
        ];
        for (name, x, dim, idx, shape) in cases {
            let size = x.shape()[dim] as i64;
            let n = idx.len();
            // A value inside a group of four of the lookup loop, and in its tail (n - 1).
            let cases = [
                (0, -1),
                (n / 2, size),
                (n / 2 + 1, size + 1),
                (n - 1, i64::MAX),
                (n - 1, i64::MIN),
            ];
            for (at, bad) in cases {
                let mut idx = idx.clone();
                idx.as_slice_mut().unwrap()[at] = bad;
                let view = idx.broadcast(IxDyn(&shape)).unwrap();
                for threads in [1, 2] {
                    let got = crate::kernels::test_pool(threads).install(|| {
                        gather_checking(&x, dim, &view, Vec::with_capacity(view.len()))
                    });
                    assert!(
                        got.is_none(),
                        "{name}: value {bad} at {at} accepted ({threads} threads)"
                    );
                }
            }
        }
        // No value fits an empty dim.
        let empty = input(&[3, 0]);
        let idx = ArrayD::<i64>::zeros(IxDyn(&[3, 1]));
        assert!(gather_checking(&empty.view(), 1, &idx.view(), Vec::with_capacity(3)).is_none());
    }

    #[test]
    fn general_loop_handles_transposed_operands() {
        let (a, b) = (sized(50, 12), sized(60, 10));
        let x = input(&[a, b, 7]);
        let xt = x.view().permuted_axes(IxDyn(&[2, 1, 0]));
        let idx = random_index(&[7, b, sized(40, 8)], b, 13);
        check("transposed", &xt, 1, &idx.view(), Bounds::Strict);
        let it = random_index(&[sized(40, 8), b, 7], b, 14);
        let it = it.view().permuted_axes(IxDyn(&[2, 1, 0]));
        check("both transposed", &xt, 1, &it, Bounds::Strict);
    }

    #[test]
    fn empty_shapes_and_small_element_types() {
        let x = input(&[3, 0, 4]);
        let idx = ArrayD::<i64>::zeros(IxDyn(&[3, 0, 4]));
        check("empty", &x.view(), 0, &idx.view(), Bounds::Strict);
        let x = input(&[5, 6]);
        let idx = ArrayD::<i64>::zeros(IxDyn(&[0, 6]));
        check("empty index", &x.view(), 1, &idx.view(), Bounds::Strict);
        let r = sized(300, 12);
        let x = input(&[r, 200]);
        let idx = random_index(&[r, sized(250, 40)], 200, 15);
        let h = x.mapv(f16::from_f32);
        check("f16", &h.view(), 1, &idx.view(), Bounds::Strict);
        let b = x.mapv(bf16::from_f32);
        check("bf16", &b.view(), 1, &idx.view(), Bounds::Strict);
        let u = x.mapv(|v| v as u8);
        let col = random_index(&[r, 1], r, 16);
        let e = col.broadcast(IxDyn(&[r, 200])).unwrap();
        check("u8 row copy", &u.view(), 0, &e, Bounds::Strict);
        let d = x.mapv(|v| v as f64 * 0.5);
        check("f64 row copy", &d.view(), 0, &e, Bounds::Strict);
        let owned = e.to_owned();
        check(
            "f64 materialised rows",
            &d.view(),
            0,
            &owned.view(),
            Bounds::Strict,
        );
    }
}
