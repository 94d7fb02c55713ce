//! The building blocks of the deterministic scatter: one scratch allocation per call, an
//! exclusive scan of u32, a stable LSD radix sort of (u32 key, u32 row) pairs and the runs of
//! equal keys in sorted keys, or a counting sort that gives every key its run directly.

use cudarc::driver::LaunchConfig;

use crate::device::{Cuda, Source, launch};
use crate::error::Result;
use crate::memory::Buffer;

const SCAN_TILE: usize = 2048;
const SORT_TILE: usize = 2048;
const ALIGN: usize = 256;
/// Key bits per radix pass, and digits (`RADIX_BITS`, `RADIX` in scatter.cu).
const RADIX_BITS: u32 = 10;
const RADIX: usize = 1 << RADIX_BITS;

fn blocks(n: usize, tile: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(tile).max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One device allocation carved into the temporaries of a call (one allocation and one free
/// instead of one per temporary).
pub(crate) struct Scratch {
    _buf: Buffer,
    base: u64,
    used: usize,
    len: usize,
}

impl Scratch {
    pub(crate) fn new(dev: &Cuda, bytes: usize) -> Result<Scratch> {
        let buf = dev.alloc(bytes)?;
        let base = buf.base;
        Ok(Scratch {
            _buf: buf,
            base,
            used: 0,
            len: bytes.max(1),
        })
    }

    /// The address of `n` u32 (256-byte aligned).
    pub(crate) fn u32s(&mut self, n: usize) -> u64 {
        let at = self.used;
        self.used += u32_bytes(n);
        assert!(
            self.used <= self.len,
            "scratch sized too small (a bug of gather-cuda)"
        );
        self.base + at as u64
    }
}

/// Scratch bytes of `n` u32, aligned.
pub(crate) fn u32_bytes(n: usize) -> usize {
    (n.max(1) * 4).div_ceil(ALIGN) * ALIGN
}

/// Scratch bytes an exclusive scan of `n` u32 takes (its block sums, level by level).
pub(crate) fn scan_bytes(n: usize) -> usize {
    let tiles = n.div_ceil(SCAN_TILE);
    if tiles <= 1 {
        u32_bytes(1)
    } else {
        u32_bytes(tiles) + scan_bytes(tiles)
    }
}

/// Scratch bytes of sorting `n` pairs by `bits` bits and finding their runs.
pub(crate) fn sort_bytes(n: usize) -> usize {
    let tiles = n.div_ceil(SORT_TILE);
    4 * u32_bytes(n)
        + u32_bytes(tiles * RADIX)
        + scan_bytes(tiles * RADIX)
        + u32_bytes(n) // run flags
        + scan_bytes(n)
        + u32_bytes(n + 1) // run starts
        + u32_bytes(1) // run count
}

/// The flag's value for "a key has more rows than the counting sort orders" (`LONG_RUN` and
/// `COUNT_RUN_MAX`, 4096, in scatter.cu): above every position, so that a bad index wins the
/// flag's minimum.
pub(crate) const LONG_RUN: u64 = u64::MAX - 1;
/// Runs that a warp orders in its registers (`WARP_RUN_MAX`); longer ones take a block each.
const WARP_RUN_MAX: usize = 128;
/// Runs that the row kernel orders itself (`SHORT_RUN`).
const SHORT_RUN: usize = 32;
/// Rows a thread of the keys kernel and of count_place takes (`KEYS_BATCH`).
pub(crate) const KEYS_BATCH: usize = 4;

/// Whether the counting sort serves `n` rows into `keys` keys: its scan and its runs are per
/// key, so the keys must not outnumber the rows by much.
pub(crate) fn counting_fits(n: usize, keys: usize) -> bool {
    keys <= 2 * n + 4096
}

/// Scratch bytes of the counting sort of `n` rows into `keys` keys, beyond the keys and ranks it
/// sorts: the zeroed counts and long-run count, the placed pairs, the long-run list, the run
/// count and the scan of the counts.
pub(crate) fn count_bytes(n: usize, keys: usize) -> usize {
    zeroed_bytes(keys)
        + 2 * u32_bytes(n)
        + u32_bytes(n / (WARP_RUN_MAX + 1) + 1)
        + u32_bytes(n / (SHORT_RUN + 1) + 1)
        + u32_bytes(1)
        + scan_bytes(keys + 1)
}

// The counts (keys + 1, scanned into the run starts), the long-run count and the listed count.
fn zeroed_words(keys: usize) -> usize {
    keys + 3
}

fn zeroed_bytes(keys: usize) -> usize {
    u32_bytes(zeroed_words(keys))
}

/// The counting sort's zeroed words, to carve before the keys kernel (which counts into the
/// first `keys + 1`).
pub(crate) fn count_zeroed(dev: &Cuda, s: &mut Scratch, keys: usize) -> Result<u64> {
    let at = s.u32s(zeroed_words(keys));
    dev.memset(at, 0, zeroed_bytes(keys))?;
    Ok(at)
}

/// The list of the keys whose runs are longer than `SHORT_RUN` and its count (in the zeroed
/// words at `zeroed`), for the keys kernel to fill and [`count_runs`] to sort alone: the row
/// kernel orders the shorter runs itself.
pub(crate) fn count_listed(s: &mut Scratch, n: usize, keys: usize, zeroed: u64) -> (u64, u64) {
    (
        s.u32s(n / (SHORT_RUN + 1) + 1),
        zeroed + 4 * (keys as u64 + 2),
    )
}

/// The counting sort of the `n` rows whose keys (below `keys`) the keys kernel has counted into
/// `zeroed` ([`count_zeroed`]), with each row's place in its run in `ranks`, no run past
/// [`COUNT_RUN_MAX`]: the sorted keys, rows, run starts and run count, as [`sort_pairs`] and
/// [`runs`] give them, except that every key is a run (empty ones too). With `listed` (the
/// list and its count from [`count_listed`]) the runs are for the row kernel: only the listed
/// ones are sorted, and no keys are written (0 for them), as run k is key k.
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_runs(
    dev: &Cuda,
    s: &mut Scratch,
    keys_in: u64,
    ranks: u64,
    n: usize,
    keys: usize,
    zeroed: u64,
    listed: Option<(u64, u64)>,
) -> Result<(u64, u64, u64, u64)> {
    let starts = zeroed;
    let n_long = zeroed + 4 * (keys as u64 + 1);
    exclusive_scan(dev, s, starts, keys + 1)?;
    let (kp, rp) = (s.u32s(n), s.u32s(n));
    let long_runs = s.u32s(n / (WARP_RUN_MAX + 1) + 1);
    let np = s.u32s(1);
    let (n64, k64) = (n as i64, keys as i64);
    let kp = if listed.is_none() { kp } else { 0 };
    let f = dev.function(Source::Scatter, "count_place")?;
    launch!(
        dev,
        &f,
        "count_place",
        dev.grid_batched(n, 256, KEYS_BATCH),
        &keys_in,
        &ranks,
        &n64,
        &starts,
        &kp,
        &rp,
        &np,
        &k64
    )?;
    // Without `listed`, a warp per key orders runs of up to WARP_RUN_MAX rows and lists the
    // longer ones. A block per listed run orders the rest: at most n / (WARP_RUN_MAX + 1) or
    // n / (SHORT_RUN + 1) of them, usually none, so two blocks per multiprocessor loop over
    // the list.
    let (list, n_list, most) = if let Some((listed, n_listed)) = listed {
        (listed, n_listed, n / (SHORT_RUN + 1))
    } else {
        let f = dev.function(Source::Scatter, "count_sort_runs")?;
        launch!(
            dev,
            &f,
            "count_sort_runs",
            dev.grid(keys.saturating_mul(32), 256),
            &rp,
            &starts,
            &k64,
            &long_runs,
            &n_long
        )?;
        (long_runs, n_long, n / (WARP_RUN_MAX + 1))
    };
    let blocks = most.clamp(1, dev.sms() * 2);
    let f = dev.function(Source::Scatter, "count_sort_long")?;
    launch!(
        dev,
        &f,
        "count_sort_long",
        dev.grid(blocks * 256, 256),
        &rp,
        &starts,
        &list,
        &n_list
    )?;
    Ok((kp, rp, starts, np))
}

/// Replaces the `n` u32 at `data` by their exclusive prefix sums.
pub(crate) fn exclusive_scan(dev: &Cuda, s: &mut Scratch, data: u64, n: usize) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let tiles = n.div_ceil(SCAN_TILE);
    let sp = s.u32s(tiles);
    let n64 = n as i64;
    if (2..=SCAN_TILE).contains(&tiles) {
        let f = dev.function(Source::Scatter, "scan_sums")?;
        launch!(dev, &f, "scan_sums", blocks(n, SCAN_TILE), &data, &n64, &sp)?;
        let f = dev.function(Source::Scatter, "scan_tiles")?;
        launch!(
            dev,
            &f,
            "scan_tiles",
            blocks(n, SCAN_TILE),
            &data,
            &n64,
            &sp
        )?;
        return Ok(());
    }
    let f = dev.function(Source::Scatter, "scan_block")?;
    launch!(
        dev,
        &f,
        "scan_block",
        blocks(n, SCAN_TILE),
        &data,
        &n64,
        &sp
    )?;
    if tiles > 1 {
        exclusive_scan(dev, s, sp, tiles)?;
        let f = dev.function(Source::Scatter, "scan_add")?;
        launch!(dev, &f, "scan_add", blocks(n, SCAN_TILE), &data, &n64, &sp)?;
    }
    Ok(())
}

/// Sorts the `n` pairs at (keys, rows) by the low `bits` bits of the keys, stably, `RADIX_BITS`
/// a pass; returns where the sorted pairs are (the input or the second pair of buffers).
pub(crate) fn sort_pairs(
    dev: &Cuda,
    s: &mut Scratch,
    keys: u64,
    rows: u64,
    n: usize,
    bits: u32,
) -> Result<(u64, u64)> {
    let passes = bits.div_ceil(RADIX_BITS);
    if n <= 1 || passes == 0 {
        return Ok((keys, rows));
    }
    let tiles = n.div_ceil(SORT_TILE);
    let cp = s.u32s(tiles * RADIX);
    let (mut ka, mut ra) = (keys, rows);
    let (mut kb, mut rb) = (s.u32s(n), s.u32s(n));
    let count = dev.function(Source::Scatter, "radix_count")?;
    let place = dev.function(Source::Scatter, "radix_scatter")?;
    let (n64, t64) = (n as i64, tiles as i64);
    // Every pass scans a counts array of the same size: its block sums are carved once.
    let mark = s.used;
    for p in 0..passes {
        let shift = (p * RADIX_BITS) as i32;
        s.used = mark;
        launch!(
            dev,
            &count,
            "radix_count",
            blocks(n, SORT_TILE),
            &ka,
            &n64,
            &shift,
            &cp,
            &t64
        )?;
        exclusive_scan(dev, s, cp, tiles * RADIX)?;
        launch!(
            dev,
            &place,
            "radix_scatter",
            blocks(n, SORT_TILE),
            &ka,
            &ra,
            &kb,
            &rb,
            &n64,
            &shift,
            &cp,
            &t64
        )?;
        std::mem::swap(&mut ka, &mut kb);
        std::mem::swap(&mut ra, &mut rb);
    }
    Ok((ka, ra))
}

/// The runs of equal keys in `n` sorted keys: the address of `starts` (runs + 1 entries, the
/// last `n`) and of the number of runs, both on the GPU.
pub(crate) fn runs(dev: &Cuda, s: &mut Scratch, keys: u64, n: usize) -> Result<(u64, u64)> {
    let fp = s.u32s(n);
    let sp = s.u32s(n + 1);
    let np = s.u32s(1);
    let n64 = n as i64;
    let f = dev.function(Source::Scatter, "run_flags")?;
    launch!(dev, &f, "run_flags", dev.grid(n, 256), &keys, &n64, &fp)?;
    exclusive_scan(dev, s, fp, n)?;
    let f = dev.function(Source::Scatter, "run_starts")?;
    launch!(
        dev,
        &f,
        "run_starts",
        dev.grid(n, 256),
        &keys,
        &fp,
        &n64,
        &sp,
        &np
    )?;
    Ok((sp, np))
}
