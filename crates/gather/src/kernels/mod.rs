//! The inner loops: the only place in the crate with `unsafe`.
//!
//! Every kernel is a safe function. It takes ndarray views (whose memory ndarray vouches for) and a
//! [`CheckedIndex`](crate::index::CheckedIndex) (whose values were checked against the size they
//! index), re-asserts the O(rank) shape relations that make every offset it computes land inside
//! its operands, and only then runs unchecked loops planned by [`crate::plan::Nest`]. Each `unsafe`
//! block states the invariant it relies on in a `// SAFETY:` comment.

pub(crate) mod check;
pub(crate) mod convert;
pub(crate) mod copy;
pub(crate) mod fold;
pub(crate) mod gather;
pub(crate) mod order;
pub(crate) mod scatter;
pub(crate) mod segment;
pub(crate) mod take;
pub(crate) mod words;
pub(crate) mod zip;

use ndarray::{ArrayD, ArrayView, IxDyn, Slice};

use crate::index::{Bounds, IndexElem};

/// A test size: `native` in ordinary test runs, `miri` under Miri (`scripts/miri.sh`). Miri
/// interprets every operation, so its shapes are small; the thresholds that pick the loops
/// ([`crate::plan::GRAIN`], [`RANDOM_BYTES`], the tile sizes) are scaled down with them, so the
/// small shapes still reach the parallel, prefetched and tiled loops.
#[cfg(test)]
pub(crate) fn sized(native: usize, miri: usize) -> usize {
    if cfg!(miri) { miri } else { native }
}

/// A rayon pool of `threads` threads, for the tests that check a kernel gives one result on
/// any number of threads.
#[cfg(test)]
pub(crate) fn test_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a test's thread pool")
}

/// A raw pointer that may be shared across rayon tasks.
///
/// Tasks write through it only at positions that no other task writes (the planner hands each task
/// a disjoint set of destination positions), and read only memory that no task writes.
pub(crate) struct SharedPtr<T>(pub(crate) *mut T);

impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedPtr<T> {}

// SAFETY: the pointer is only dereferenced at offsets the planner assigns to exactly one task (for
// writes) or at memory that is not written during the kernel (for reads), so sharing it across
// threads cannot create a data race. `T: Send + Sync` keeps non-thread-safe element types out.
unsafe impl<T: Send + Sync> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for SharedPtr<T> {}

/// Maps a checked index value to a position under `bounds` for a dimension of `size`.
#[inline(always)]
pub(crate) fn position(bounds: Bounds, value: i64, size: usize) -> isize {
    match bounds {
        Bounds::Strict => value as isize,
        Bounds::Wrap => {
            if value < 0 {
                (value + size as i64) as isize
            } else {
                value as isize
            }
        }
        Bounds::Modulo => value.rem_euclid(size as i64) as isize,
    }
}

/// The positions that the values of a checked index select under `bounds` in a dimension of
/// `size`, with the index's shape but for the axes it is broadcast along (stride 0), which keep
/// one element: broadcast the result back to the index's shape, and each stored value is mapped
/// once. The kernels then run one loop, for positions of `0..size`, instead of one per policy: a
/// pass over the index costs less than the machine code of a loop per policy and element width.
pub(crate) fn positions<I: IndexElem>(
    index: &ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
    size: usize,
) -> ArrayD<i64> {
    let stored = index.slice_each_axis(|ax| match ax.stride {
        0 => Slice::from(0..ax.len.min(1)),
        _ => Slice::from(..),
    });
    zip::map(&stored, |v| position(bounds, v.to_i64(), size) as i64)
}

/// The four index values at `ip..ip + 4`, and whether all four are positions of `0..size`: one
/// unsigned comparison of their maximum (a negative value is a huge unsigned one) instead of four.
/// The grouped element loops of gather (`lookup_row`) and scatter take four values at a time with
/// it. The four loads are written out: as `[0, 1, 2, 3].map(..)` the compiler leaves a call to
/// `array::try_map` in the loop (see docs/performance.md, "kernels/mod.rs: four_values").
///
/// # Safety
/// `ip..ip + 4` must be readable.
#[inline(always)]
pub(crate) unsafe fn four_values<I: IndexElem>(ip: *const I, size: usize) -> ([i64; 4], bool) {
    // SAFETY: the caller's contract.
    let value = |k: usize| unsafe { (*ip.add(k)).to_i64() };
    let v = [value(0), value(1), value(2), value(3)];
    let max = (v[0] as u64)
        .max(v[1] as u64)
        .max(v[2] as u64)
        .max(v[3] as u64);
    (v, max < size as u64)
}

/// The in-loop check of the checking kernels (gather, take): `value` as a position in `0..size`
/// under the strict policy (`WRAP == false`) or the wrapping one (negative values count from the
/// end). A value out of range sets `flag` and gives position 0 (in range: `size > 0`). The check
/// is one unsigned comparison and a branch to a cold path: always predicted, it costs fewer
/// instructions in the loop than a select and an or (see docs/performance.md,
/// "kernels/mod.rs: checked_position").
#[inline(always)]
pub(crate) fn checked_position<const WRAP: bool>(
    value: i64,
    size: usize,
    flag: &mut bool,
) -> usize {
    // `value + size` for a negative `value` under wrapping, without a branch.
    let p = if WRAP {
        value.wrapping_add((value >> 63) & size as i64)
    } else {
        value
    };
    if (p as u64) < size as u64 {
        p as usize
    } else {
        out_of_range(flag)
    }
}

/// The path of [`checked_position`] for a value out of range, kept out of the loop.
#[cold]
#[inline(never)]
fn out_of_range(flag: &mut bool) -> usize {
    *flag = true;
    0
}

/// Inputs of at least this many bytes are treated as living in main memory rather than in cache:
/// data-dependent reads from them are prefetched a few elements ahead, and their loops are split
/// over the thread pool with a smaller grain (each element costs a cache miss, not a cycle).
/// Under Miri, 8 KiB: its test shapes are small (see [`crate::plan::GRAIN`]).
pub(crate) const RANDOM_BYTES: usize = if cfg!(miri) { 8 << 10 } else { 8 << 20 };

/// The grain (elements of `T` per task) of a loop over `total` elements that only moves contiguous
/// runs (`memcpy` of whole rows): the whole loop on the calling thread below 1 MiB, the usual
/// grain above. Waking a thread of the pool costs more than moving a few hundred KiB: with
/// [`crate::plan::GRAIN`] a 256 KiB `index_select` was split in two and took 25-40 µs against
/// 11-13 on one thread (docs/performance.md, "Row copies on one thread"). On this machine one
/// thread still wins at 1 MiB, by less; many-core machines, slower per core, gain sooner from
/// the pool. 8 KiB under Miri.
pub(crate) fn copy_grain<T>(total: usize) -> usize {
    const SERIAL_BYTES: usize = if cfg!(miri) { 8 << 10 } else { 1 << 20 };
    if total.saturating_mul(std::mem::size_of::<T>()) < SERIAL_BYTES {
        // `split` runs a loop of fewer than twice its grain on one thread.
        total.max(crate::plan::GRAIN)
    } else {
        crate::plan::GRAIN
    }
}

/// How many elements ahead a data-dependent read is prefetched.
pub(crate) const PREFETCH_DISTANCE: usize = 16;

/// `walk_ahead!(r, distance, |j, next| body)` runs `body` for every `j` in the range `r`, in
/// order: the loop shape of every kernel that reads data-dependent addresses from a large input.
/// With `distance` (an `Option<usize>`), `next` is `Some(j + distance)` while that position is
/// still inside `r` (the body prefetches what it will read there), and `None` for the last
/// `distance` positions; without, it is always `None`.
///
/// ```text
/// r = 3..8, distance Some(2):  (3, Some(5)) (4, Some(6)) (5, Some(7)) (6, None) (7, None)
/// r = 3..8, distance None:     (3, None) ... (7, None)
/// ```
///
/// A macro, not a function taking a closure: the body is written out in two loops, one where
/// `next` is always `Some` and one where it is always `None`, so each compiles to the loop it
/// would be written by hand. Through a closure called from the two loops, the compiler does not
/// inline hot bodies such as gather's short-row copy (see docs/performance.md,
/// "kernels/mod.rs: walk_ahead!").
macro_rules! walk_ahead {
    ($r:expr, $distance:expr, |$j:ident, $next:ident| $body:block) => {{
        let r: ::std::ops::Range<usize> = $r;
        let distance: Option<usize> = $distance;
        let mut j = r.start;
        if let Some(d) = distance {
            while j + d < r.end {
                let ($j, $next) = (j, Some(j + d));
                $body
                j += 1;
            }
        }
        while j < r.end {
            let ($j, $next): (usize, Option<usize>) = (j, None);
            $body
            j += 1;
        }
    }};
}
pub(crate) use walk_ahead;

/// The grain (elements per task) of loops whose every element is a cache miss.
pub(crate) const RANDOM_GRAIN: usize = crate::plan::GRAIN / 16;

/// Asks the CPU to start loading the cache line holding `p`. A hint only: it never faults and
/// changes nothing observable, so any address is fine. A no-op on targets without the
/// instruction.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint that never faults and never changes memory or registers, for
    // any address; the SSE feature it needs is part of every x86_64 target.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Outputs of at least this many bytes are asked to be backed by transparent huge pages.
#[cfg_attr(miri, allow(dead_code))] // Miri skips the advice
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// The size of a transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// What the system allocator (glibc) adds to a request it serves with its own `mmap`: its chunk
/// header and rounding. A request of `k * 2 MiB - ALLOCATOR_OVERHEAD` bytes becomes a mapping of
/// exactly `k * 2 MiB`, which Linux (6.7 on) places on a 2 MiB boundary.
const ALLOCATOR_OVERHEAD: usize = 32;

/// The capacity to allocate for `n` elements of a buffer that [`advise_huge_pages`] will advise:
/// `n` rounded up so that the allocation, with the allocator's header, fills whole 2 MiB pages
/// (when that adds at most an eighth of the size); otherwise `n`.
///
/// A request of that size is mapped 2 MiB-aligned by Linux, so the whole buffer can be huge pages,
/// where an arbitrary size lands at an arbitrary 4 KiB boundary and leaves on average 1 MiB at
/// each end on 4 KiB pages, each page a fault at its first touch (see docs/performance.md,
/// "kernels/mod.rs: huge_page_capacity"). The rounding is never touched, so it costs no memory
/// but the rest of the last huge page (under 2 MiB, and under an eighth of the size). With another
/// allocator, or where the mapping is not aligned, the buffer is as before and only the interior
/// is advised.
pub(crate) fn huge_page_capacity<T>(n: usize) -> usize {
    capacity_for(n, std::mem::size_of::<T>())
}

/// [`huge_page_capacity`] by element size, compiled once.
fn capacity_for(n: usize, elem: usize) -> usize {
    let bytes = n.saturating_mul(elem);
    if elem == 0 || bytes < HUGE_PAGE_MIN_BYTES {
        return n;
    }
    let Some(whole) = bytes
        .checked_add(ALLOCATOR_OVERHEAD)
        .and_then(|b| b.checked_next_multiple_of(HUGE_PAGE))
    else {
        return n;
    };
    let rounded = (whole - ALLOCATOR_OVERHEAD) / elem;
    if rounded.saturating_sub(n).saturating_mul(elem) <= bytes / 8 {
        rounded.max(n)
    } else {
        n
    }
}

/// Asks the kernel to back the (not yet touched) spare capacity of a large output buffer with
/// transparent huge pages, where the system allows it (`madvise(MADV_HUGEPAGE)`, Linux only).
///
/// A new buffer is paid for at its first touch: one page fault per page. With 4 KiB pages a
/// 64 MiB output costs about 16 000 faults, with 2 MiB pages 32 (timings in docs/performance.md,
/// "kernels/mod.rs: advise_huge_pages"). The buffer stays an ordinary allocation of the global
/// allocator (large ones are served by `mmap`), freed as usual. Small buffers, other systems, and
/// kernels without THP: nothing happens.
///
/// Which pages are advised:
///
/// ```text
///   any allocation:     |4K..4K|  2 MiB  |  2 MiB  | ... |  2 MiB  |4K..4K|   the aligned interior
///   at a 2 MiB mapping: |hdr 2 MiB|  2 MiB  | ... |  2 MiB  |              all of it
/// ```
///
/// When the allocation starts just past a 2 MiB boundary (a request of [`huge_page_capacity`]'s
/// size, which glibc serves with a mapping of whole huge pages that Linux aligns), the whole
/// mapping is advised, from the boundary (which holds the allocator's header), and its first
/// 2 MiB, whose header page the allocator has already touched as a 4 KiB page, is collapsed
/// into a huge page at once (`MADV_COLLAPSE`, Linux 6.1 on), so that the whole buffer, its first
/// 2 MiB included, is on huge pages (see docs/performance.md, "kernels/mod.rs: advise_huge_pages").
pub(crate) fn advise_huge_pages<T>(v: &mut Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    advise_bytes(v.as_mut_ptr() as usize, bytes);
}

/// [`advise_huge_pages`] on the allocation of `bytes` at address `start`, compiled once.
fn advise_bytes(start: usize, bytes: usize) {
    // Miri runs no foreign functions: the advice is skipped there (it never changes contents).
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        /// `MADV_COLLAPSE` (Linux 6.1), which the libc crate does not name yet.
        const MADV_COLLAPSE: libc::c_int = 25;
        if bytes < HUGE_PAGE_MIN_BYTES {
            return;
        }
        let below = start / HUGE_PAGE * HUGE_PAGE;
        let at_boundary = start - below <= 2 * ALLOCATOR_OVERHEAD;
        let lo = if at_boundary {
            below
        } else {
            start.next_multiple_of(HUGE_PAGE)
        };
        let hi = (start + bytes) / HUGE_PAGE * HUGE_PAGE;
        if hi > lo {
            // SAFETY: `lo..hi` is the Vec's own allocation (`start..start + bytes`) rounded to
            // whole huge pages: rounded up at the end, and at the start either rounded up, or
            // (`at_boundary`) extended down by at most 64 bytes to the 2 MiB boundary just
            // before it, where the allocator keeps its header in the same mapping. Neither
            // MADV_HUGEPAGE nor MADV_COLLAPSE changes the contents or the mapping of any memory,
            // ours or not, only how the kernel backs it (a collapse copies what is there into a
            // huge page); a refusal (no THP support, an older kernel, memory that is not ours to
            // advise) is harmless and ignored.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
                if at_boundary {
                    libc::madvise(lo as *mut libc::c_void, HUGE_PAGE, MADV_COLLAPSE);
                }
            }
        }
    }
    #[cfg(any(not(target_os = "linux"), miri))]
    let _ = (start, bytes);
}

#[cfg(test)]
mod tests {
    /// Every step of `walk_ahead!(r, distance)`, in order.
    fn steps(r: std::ops::Range<usize>, distance: Option<usize>) -> Vec<(usize, Option<usize>)> {
        let mut seen = Vec::new();
        walk_ahead!(r, distance, |j, next| {
            seen.push((j, next));
        });
        seen
    }

    #[test]
    fn huge_page_capacity_fills_whole_huge_pages_only_for_large_buffers_and_small_waste() {
        use super::{ALLOCATOR_OVERHEAD, HUGE_PAGE, HUGE_PAGE_MIN_BYTES, huge_page_capacity};
        // Under 4 MiB, and zero-sized elements: as asked.
        for n in [0usize, 1, 1000, HUGE_PAGE_MIN_BYTES / 4 - 1] {
            assert_eq!(huge_page_capacity::<f32>(n), n);
        }
        assert_eq!(huge_page_capacity::<()>(1 << 40), 1 << 40);
        // W8's 51.2 MB output, W9's 64 MiB one, odd sizes: rounded up to a request that with the
        // allocator's header fills whole huge pages, never below what was asked.
        for (n, elem) in [
            (50_000 * 256, 4),
            (1 << 24, 4),
            ((1 << 22) + 3, 4),
            (999_983, 8),
        ] {
            let cap = match elem {
                4 => huge_page_capacity::<f32>(n),
                _ => huge_page_capacity::<u64>(n),
            };
            assert!(cap >= n, "{n}: {cap}");
            let waste = (cap - n) * elem;
            assert!(
                waste < HUGE_PAGE && waste <= n * elem / 8,
                "{n}: wastes {waste}"
            );
            let whole = cap * elem + ALLOCATOR_OVERHEAD;
            assert!(
                whole % HUGE_PAGE < elem,
                "{n}: {whole} bytes are not whole huge pages"
            );
        }
        // 4 MiB + 4 bytes would need almost 2 MiB more: more than an eighth, so left as asked.
        let n = HUGE_PAGE_MIN_BYTES / 4 + 1;
        assert_eq!(huge_page_capacity::<f32>(n), n);
        // Sizes near the top of the address space do not overflow.
        assert_eq!(huge_page_capacity::<u8>(usize::MAX - 3), usize::MAX - 3);
    }

    #[test]
    fn walk_ahead_visits_every_position_once_and_looks_ahead_only_inside_the_range() {
        assert_eq!(
            steps(3..8, Some(2)),
            [
                (3, Some(5)),
                (4, Some(6)),
                (5, Some(7)),
                (6, None),
                (7, None)
            ]
        );
        assert_eq!(steps(3..6, None), [(3, None), (4, None), (5, None)]);
        // A range no longer than the distance: nothing to look ahead to.
        assert_eq!(steps(0..2, Some(2)), [(0, None), (1, None)]);
        assert_eq!(steps(4..4, Some(1)), []);
        for (len, d) in [(40, 16), (17, 16), (16, 16), (1, 0)] {
            let s = steps(10..10 + len, Some(d));
            assert_eq!(s.len(), len);
            for (k, &(j, next)) in s.iter().enumerate() {
                assert_eq!(j, 10 + k);
                assert_eq!(next, (j + d < 10 + len).then_some(j + d));
            }
        }
    }
}
