//! The building blocks of the deterministic scatter: an exclusive scan of u32, a stable LSD
//! radix sort of (u32 key, u32 row) pairs, and the runs of equal keys in sorted keys.

use cudarc::driver::{CudaSlice, LaunchConfig};

use crate::device::{Cuda, Source, launch};
use crate::error::Result;

const SCAN_TILE: usize = 2048;
const SORT_TILE: usize = 2048;

fn blocks(n: usize, tile: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(tile).max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A u32 buffer of `n` elements (uninitialised).
pub(crate) fn alloc_u32(dev: &Cuda, n: usize) -> Result<CudaSlice<u8>> {
    dev.alloc(n.max(1) * 4)
}

/// Replaces the `n` u32 at `data` by their exclusive prefix sums.
pub(crate) fn exclusive_scan(dev: &Cuda, data: u64, n: usize) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let tiles = n.div_ceil(SCAN_TILE);
    let sums = alloc_u32(dev, tiles)?;
    let sp = dev.ptr(&sums);
    let n64 = n as i64;
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
        exclusive_scan(dev, sp, tiles)?;
        let f = dev.function(Source::Scatter, "scan_add")?;
        launch!(dev, &f, "scan_add", blocks(n, SCAN_TILE), &data, &n64, &sp)?;
    }
    Ok(())
}

/// Sorted pairs: the keys and rows in key order, equal keys in their input order.
pub(crate) struct Sorted {
    pub keys: CudaSlice<u8>,
    pub rows: CudaSlice<u8>,
}

/// Sorts the `n` pairs (keys, rows) by the low `bits` bits of the keys, stably, 8 bits a pass.
pub(crate) fn sort_pairs(
    dev: &Cuda,
    keys: CudaSlice<u8>,
    rows: CudaSlice<u8>,
    n: usize,
    bits: u32,
) -> Result<Sorted> {
    let passes = bits.div_ceil(8);
    if n <= 1 || passes == 0 {
        return Ok(Sorted { keys, rows });
    }
    let tiles = n.div_ceil(SORT_TILE);
    let counts = alloc_u32(dev, tiles * 256)?;
    let cp = dev.ptr(&counts);
    let (mut ka, mut ra) = (keys, rows);
    let (mut kb, mut rb) = (alloc_u32(dev, n)?, alloc_u32(dev, n)?);
    let count = dev.function(Source::Scatter, "radix_count")?;
    let place = dev.function(Source::Scatter, "radix_scatter")?;
    let (n64, t64) = (n as i64, tiles as i64);
    for p in 0..passes {
        let shift = (p * 8) as i32;
        let (kin, rin, kout, rout) = (dev.ptr(&ka), dev.ptr(&ra), dev.ptr(&kb), dev.ptr(&rb));
        launch!(
            dev,
            &count,
            "radix_count",
            blocks(n, SORT_TILE),
            &kin,
            &n64,
            &shift,
            &cp,
            &t64
        )?;
        exclusive_scan(dev, cp, tiles * 256)?;
        launch!(
            dev,
            &place,
            "radix_scatter",
            blocks(n, SORT_TILE),
            &kin,
            &rin,
            &kout,
            &rout,
            &n64,
            &shift,
            &cp,
            &t64
        )?;
        std::mem::swap(&mut ka, &mut kb);
        std::mem::swap(&mut ra, &mut rb);
    }
    Ok(Sorted { keys: ka, rows: ra })
}

/// The runs of equal keys in `n` sorted keys: `starts` (runs + 1 entries, the last `n`) and the
/// number of runs, both on the GPU.
pub(crate) struct Runs {
    pub starts: CudaSlice<u8>,
    pub count: CudaSlice<u8>,
}

pub(crate) fn runs(dev: &Cuda, keys: &CudaSlice<u8>, n: usize) -> Result<Runs> {
    let flags = alloc_u32(dev, n)?;
    let starts = alloc_u32(dev, n + 1)?;
    let count = alloc_u32(dev, 1)?;
    let (kp, fp, sp, np) = (
        dev.ptr(keys),
        dev.ptr(&flags),
        dev.ptr(&starts),
        dev.ptr(&count),
    );
    let n64 = n as i64;
    let f = dev.function(Source::Scatter, "run_flags")?;
    launch!(dev, &f, "run_flags", dev.grid(n, 256), &kp, &n64, &fp)?;
    exclusive_scan(dev, fp, n)?;
    let f = dev.function(Source::Scatter, "run_starts")?;
    launch!(
        dev,
        &f,
        "run_starts",
        dev.grid(n, 256),
        &kp,
        &fp,
        &n64,
        &sp,
        &np
    )?;
    Ok(Runs { starts, count })
}
