//! The reading ops: `gather`, `index_select` and `take`, plus the copies the other ops share.
//! They move elements as words of their byte width; a bad index value is flagged on the GPU
//! and reported, with its value and coordinate, after the call.
//!
//! ```text
//! gather(x, dim=1, index)            index_select(x, dim=0, ids=[2, 0])
//!   x     = [[a b c]                   x = [r0, r1, r2]     (rows)
//!            [d e f]]                  out = [r2, r0]
//!   index = [[2 0]
//!            [1 1]]                  take(x, index=[5, -1])
//!   out   = [[c a]                     x.flat = [a b c d e f]
//!            [e e]]                    out    = [f f]
//! ```

use gather::DType;
use gather::backend::{self, Bounds};

use crate::device::{Source, launch};
use crate::error::Result;
use crate::tensor::{CudaTensor, Layout, width};

/// `torch.gather(input, dim, index)`: `out[p] = input[p with p[dim] := index[p]]`, for every
/// position `p` of the index. The output has the index's shape; index values must lie in
/// `0..input.shape[dim]`, and the index may be smaller than the input on the other axes.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[10, 20, 30], [40, 50, 60]])?;
/// let i = CudaTensor::from_host(&gpu, &array![[0i64, 2], [1, 0]])?;
/// let out = gather_cuda::gather(&x, 1, &i)?;
/// assert_eq!(out.to_host::<i32>()?, array![[10, 30], [50, 40]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn gather(input: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    gather_op("gather", input, dim, index)
}

/// [`gather()`] with `op` naming the op in errors (`gather_broadcast` runs it on broadcast views).
pub(crate) fn gather_op(
    op: &str,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    let Some(d) = backend::check_gather(op, input.shape(), dim, index.shape())? else {
        return CudaTensor::empty(input.device(), index.shape(), input.dtype());
    };
    let x = as_1d(input);
    let idx = as_1d(&index);
    let size = x.shape[d];
    let out = CudaTensor::empty(input.device(), index.shape(), input.dtype())?;
    let bad = gather_into(&x, d, &idx, &out, Bounds::Strict)?;
    if let Some(pos) = bad {
        let coord = unravel(pos, idx.shape());
        let value = read_index(&idx, &coord)?;
        let coord = if index.ndim() == 0 { Vec::new() } else { coord };
        return Err(backend::out_of_bounds(op, value, coord, d, size, Bounds::Strict).into());
    }
    Ok(out)
}

/// `torch.index_select(input, dim, index)`: the slices of `input` at positions `index` along
/// `dim`, in index order. The index is 0-d or 1-d, with values in `0..input.shape[dim]`.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let table = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
/// let ids = CudaTensor::from_host(&gpu, &array![2i64, 0])?;
/// let rows = gather_cuda::index_select(&table, 0, &ids)?;
/// assert_eq!(rows.to_host::<f32>()?, array![[5.0f32, 6.0], [1.0, 2.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_select(input: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    let op = "index_select";
    // The shapes before the index's dtype, as PyTorch (and the CPU library) check them.
    let d = backend::check_index_select(op, input.shape(), dim, index.shape(), index.dtype())?;
    let index = index_operand(op, "index", index)?;
    let x = as_1d(input);
    let n = index.len();
    let mut shape = x.shape().to_vec();
    shape[d] = n;
    let out_shape = if input.ndim() == 0 {
        Vec::new()
    } else {
        shape.clone()
    };
    let size = x.shape[d];
    let out = CudaTensor::empty(input.device(), &out_shape, input.dtype())?;
    if n == 0 {
        return Ok(out);
    }
    // The index spread over the output's shape: stride 0 on every other axis, never copied.
    let spread = as_1d(&index).spread(&shape, d);
    let empty_out = shape.iter().product::<usize>() == 0;
    let bad = if empty_out {
        // Nothing to write, but PyTorch still checks the index: walk it as a 1-d gather.
        check_values(&as_1d(&index), size, Bounds::Strict)?
    } else {
        let mut out1 = out.clone();
        out1.shape = shape.clone();
        out1.strides = gather::dims::row_major_strides(&shape);
        gather_into(&x, d, &spread, &out1, Bounds::Strict)?
            .map(|pos| unravel(pos, &shape)[d] as u64)
    };
    if let Some(j) = bad {
        let coord = if index.ndim() == 0 {
            Vec::new()
        } else {
            vec![j as usize]
        };
        let value = read_index(&as_1d(&index), &[j as usize])?;
        return Err(backend::out_of_bounds(op, value, coord, d, size, Bounds::Strict).into());
    }
    Ok(out)
}

/// `torch.take(input, index)`: `out[p] = input.flatten()[index[p]]`, the row-major flattening
/// of any layout; values in `-n..n` (negative ones count from the end). The output has the
/// index's shape.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1, 2, 3], [4, 5, 6]])?;
/// let i = CudaTensor::from_host(&gpu, &array![5i64, -6, 1])?;
/// assert_eq!(gather_cuda::take(&x, &i)?.to_host::<i32>()?, array![6, 1, 2].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn take(input: &CudaTensor, index: &CudaTensor) -> Result<CudaTensor> {
    let op = "take";
    let index = index_operand(op, "index", index)?;
    take_flat(op, input, &index, index.shape(), Bounds::Wrap)
}

/// `torch.take_along_dim(input, index, dim)`. With a `dim`, input and index broadcast against
/// each other on every other axis, and `out[p] = input[p with p[dim] := index[p] mod n]`
/// (Python's modulo of the dim's size `n`, so any value is in range; only an empty dim with a
/// non-empty index fails); the output has the broadcast index's shape. Without one (`None`),
/// `out[q] = input.flatten()[index.flatten()[q]]`, 1-d, values in `0..input.len()`.
///
/// ```text
/// take_along_dim(x, idx, dim=1)        take_along_dim(x, idx, None)
///   x   = [[a b c]     idx = [[2]         x.flat = [a b c d e f]
///          [d e f]]           [-1]]       idx    = [[5, 0]]
///   out = [[c]                            out    = [f a]
///          [f]]        (-1 mod 3 = 2)
/// ```
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1, 2, 3], [4, 5, 6]])?;
/// let i = CudaTensor::from_host(&gpu, &array![[2i64], [-1]])?;
/// let out = gather_cuda::take_along_dim(&x, &i, Some(1))?;
/// assert_eq!(out.to_host::<i32>()?, array![[3], [6]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn take_along_dim(
    input: &CudaTensor,
    index: &CudaTensor,
    dim: Option<isize>,
) -> Result<CudaTensor> {
    let op = "take_along_dim";
    // PyTorch's name of the argument.
    let index = index_operand(op, "indices", index)?;
    let Some(dim) = dim else {
        return take_flat(op, input, &index, &[index.len()], Bounds::Strict);
    };
    let (d, x_shape, idx_shape) =
        backend::check_take_along_dim("take_along_dim", input.shape(), index.shape(), dim)?;
    let out = CudaTensor::empty(input.device(), &idx_shape, input.dtype())?;
    if out.is_empty() {
        return Ok(out);
    }
    let xb = input.broadcast(&x_shape)?;
    let ib = index.broadcast(&idx_shape)?;
    let size = x_shape[d];
    let error = |pos: u64| -> Result<crate::Error> {
        let coord = unravel(pos, &idx_shape);
        let value = read_index(&ib, &coord)?;
        Ok(backend::out_of_bounds(op, value, coord, d, size, Bounds::Modulo).into())
    };
    if size == 0 {
        // No position to read: every value is out of range, the first one reported.
        return Err(error(0)?);
    }
    match gather_into(&xb, d, &ib, &out, Bounds::Modulo)? {
        Some(pos) => Err(error(pos)?),
        None => Ok(out),
    }
}

/// Batched select, as `tf.gather(input, index, axis, batch_dims)`:
/// `out[b.., k.., t..] = input[b.., p.., index[b.., k..], t..]`, where `b` runs over the first
/// `batch_dims` axes (shared by input and index), `p` over the input's other axes before `axis`,
/// `k` over the index's own axes and `t` over the input's axes after `axis`. The output shape is
/// `input.shape[..axis] + index.shape[batch_dims..] + input.shape[axis+1..]`; values must be in
/// `0..input.shape[axis]`. It runs as `gather` over the index seen through stride-0 axes.
///
/// ```text
/// select_batched(input[2,3,2], axis=1, index[2,2] = [[2 0] [1 1]], batch_dims=1)
///   out[b][k][:] = input[b][index[b][k]][:]      out[0] = [input[0][2], input[0][0]]
/// ```
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let logits = CudaTensor::from_host(&gpu, &array![[[0.1f32, 0.9], [0.6, 0.4]]])?;
/// let labels = CudaTensor::from_host(&gpu, &array![[1i64, 0]])?;
/// let picked = gather_cuda::select_batched(&logits, -1, &labels, 2)?;
/// assert_eq!(picked.to_host::<f32>()?, array![[0.9f32, 0.6]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn select_batched(
    input: &CudaTensor,
    axis: isize,
    index: &CudaTensor,
    batch_dims: usize,
) -> Result<CudaTensor> {
    let op = "select_batched";
    let index = index_operand(op, "index", index)?;
    let (a, gather_shape, out_shape) =
        backend::check_select_batched(op, input.shape(), axis, index.shape(), batch_dims)?;
    check_own_values(op, &index, a, input.shape()[a])?;
    let out = CudaTensor::empty(input.device(), &out_shape, input.dtype())?;
    if out.is_empty() {
        return Ok(out);
    }
    let spread = batched_spread(&index, &gather_shape, batch_dims, a)?;
    match gather_into(
        input,
        a,
        &spread,
        &out.reshape(&gather_shape)?,
        Bounds::Strict,
    )? {
        // Unreachable: every value was checked above.
        Some(pos) => Err(crate::tensor::invalid(format!(
            "{op}: a checked index value was out of range at position {pos} (a bug of gather-cuda)"
        ))),
        None => Ok(out),
    }
}

/// Every value of `index` in `0..size`, a bad one reported against the index's own coordinates
/// (not those of its spread over the batch), as the CPU library reports select_batched's.
pub(crate) fn check_own_values(
    op: &str,
    index: &CudaTensor,
    axis: usize,
    size: usize,
) -> Result<()> {
    if index.is_empty() {
        return Ok(());
    }
    let flat = index.reshape(&[index.len()])?;
    match check_values(&flat, size, Bounds::Strict)? {
        Some(pos) => {
            let coord = unravel(pos, index.shape());
            let value = read_index(index, &coord)?;
            Err(backend::out_of_bounds(op, value, coord, axis, size, Bounds::Strict).into())
        }
        None => Ok(()),
    }
}

/// select_batched's index as `index[..batch_dims] + [M]` seen over `gather_shape`, with stride 0
/// on the input's other axes (never copied): a gather index along `a`.
pub(crate) fn batched_spread(
    index: &CudaTensor,
    gather_shape: &[usize],
    batch_dims: usize,
    a: usize,
) -> Result<CudaTensor> {
    let own: usize = index.shape()[batch_dims..].iter().product();
    let mut flat_shape = index.shape()[..batch_dims].to_vec();
    flat_shape.push(own);
    let flat = index.reshape(&flat_shape)?;
    let mut spread = flat.clone();
    spread.shape = gather_shape.to_vec();
    spread.strides = vec![0; gather_shape.len()];
    spread.strides[..batch_dims].copy_from_slice(&flat.strides()[..batch_dims]);
    spread.strides[a] = flat.strides()[batch_dims];
    Ok(spread)
}

/// Positions per thread of the gather and take kernels (`UNROLL` in gather.cu), and rows per team
/// of the row kernels (`ROW_BATCH`).
const UNROLL: usize = 4;
const ROW_BATCH: usize = 4;

/// `input.flatten()[index]` into a new tensor of `shape` (the index's elements, row-major), the
/// values mapped under `bounds` (`Wrap`: `take`; `Strict`: `take_along_dim` without a dim).
fn take_flat(
    op: &str,
    input: &CudaTensor,
    index: &CudaTensor,
    shape: &[usize],
    bounds: Bounds,
) -> Result<CudaTensor> {
    let out = CudaTensor::empty(input.device(), shape, input.dtype())?;
    if index.is_empty() {
        return Ok(out);
    }
    let error = |pos: u64| -> Result<crate::Error> {
        let coord = unravel(pos, index.shape());
        let value = read_index(index, &coord)?;
        Ok(match bounds {
            Bounds::Wrap => backend::flat_out_of_bounds(op, value, coord, input.shape()),
            _ => backend::out_of_bounds(op, value, coord, 0, input.len(), bounds),
        }
        .into())
    };
    if input.is_empty() {
        return Err(match bounds {
            Bounds::Wrap => backend::take_from_empty(input.shape(), index.shape()).into(),
            _ => error(0)?,
        });
    }
    let xl = input.layout()?;
    let il = index.layout()?;
    let n = index.len();
    // Flat values up to len - 1 read x at offsets up to its span; positions up to n - 1 read
    // the index.
    let small = n <= i32::MAX as usize
        && input.len() <= i32::MAX as usize
        && fits_u32(input.shape(), input.strides())
        && fits_u32(index.shape(), index.strides());
    let name = kernel_name(
        if small { "take32" } else { "take" },
        input.dtype(),
        index.dtype(),
    );
    let dev = input.device();
    let f = dev.function(Source::Gather, name)?;
    let (xp, ip, op_) = (input.ptr(), index.ptr(), out.ptr());
    let (size, code, n64) = (input.len() as i64, rule(bounds), n as i64);
    let cfg = dev.grid_batched(n, 256, UNROLL);
    let bad = dev.with_flag(|flag| {
        launch!(
            dev, &f, name, cfg, &op_, &xp, &xl, &ip, &il, &size, &code, &n64, &flag
        )
    })?;
    match bad {
        Some(pos) => Err(error(pos)?),
        None => Ok(out),
    }
}

/// Writes `gather(x, d, idx)` into the row-major `out` (idx's shape); the smallest row-major
/// position of idx whose value `bounds` rejects, if any. x and idx have the same rank.
pub(crate) fn gather_into(
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    out: &CudaTensor,
    bounds: Bounds,
) -> Result<Option<u64>> {
    let dev = x.device();
    let rule = rule(bounds);
    let size = x.shape[d] as i64;
    if let Some(rows) = rows_plan(x, d, idx, out) {
        let f = dev.function(Source::Gather, rows.kernel)?;
        let words = rows.row_bytes / rows.word;
        let team = words.clamp(1, 32).next_power_of_two() as i32;
        let cfg = dev.grid_batched(rows.n_rows.saturating_mul(team as usize), 256, ROW_BATCH);
        let (op_, xp, ip) = (out.ptr(), x.ptr(), idx.ptr());
        let args = [
            rows.idx_so,
            rows.idx_sj,
            rows.n_idx,
            size,
            rows.x_so,
            rows.x_sv,
            rows.n_rows as i64,
            rows.row_bytes as i64,
            rows.lanes,
        ];
        return dev.with_flag(|flag| {
            launch!(
                dev,
                &f,
                rows.kernel,
                cfg,
                &op_,
                &xp,
                &ip,
                &args[0],
                &args[1],
                &args[2],
                &args[3],
                &args[4],
                &args[5],
                &args[6],
                &args[7],
                &args[8],
                &team,
                &rule,
                &flag
            )
        });
    }
    gather_general(x, d, idx, out, size, rule)
}

/// The element-wise gather kernel (any layouts): positions of `idx` whose value `rule` rejects
/// for a dim of `size` are flagged; the smallest, if any.
fn gather_general(
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    out: &CudaTensor,
    size: i64,
    rule: i32,
) -> Result<Option<u64>> {
    let dev = x.device();
    if let Some(t) = tile_plan(dev, x, d, idx) {
        let name = kernel_name("gather_tile", x.dtype(), idx.dtype());
        let f = dev.function(Source::Gather, name)?;
        dev.allow_shared(&f, name, t.bytes)?;
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (t.tiles.min(dev.sms() * 32) as u32, 1, 1),
            block_dim: (TILE_THREADS, 1, 1),
            shared_mem_bytes: t.bytes as u32,
        };
        let (op_, xp, ip) = (out.ptr(), x.ptr(), idx.ptr());
        let (xs, is) = (x.strides(), idx.strides());
        let args = [
            t.x[0],
            xs[d] as i64,
            t.x[1],
            t.idx[0],
            is[d] as i64,
            t.idx[1],
            idx.shape()[d] as i64,
            t.inner as i64,
            size,
        ];
        let (tw, tiles) = (t.tw as i32, t.tiles as i64);
        return dev.with_flag(|flag| {
            launch!(
                dev, &f, name, cfg, &op_, &xp, &args[0], &args[1], &args[2], &ip, &args[3],
                &args[4], &args[5], &args[6], &args[7], &args[8], &rule, &tw, &tiles, &flag
            )
        });
    }
    let il = Layout::exact(idx.shape(), idx.strides())?;
    let xl = Layout::exact(idx.shape(), x.strides())?;
    let n = idx.len();
    // x is read at idx's positions off dim and at values up to size - 1 along it.
    let mut reach = idx.shape().to_vec();
    reach[d] = x.shape[d];
    let small = n <= i32::MAX as usize
        && size <= i32::MAX as i64
        && fits_u32(&reach, x.strides())
        && fits_u32(idx.shape(), idx.strides());
    let name = kernel_name(
        if small { "gather32" } else { "gather" },
        x.dtype(),
        idx.dtype(),
    );
    let f = dev.function(Source::Gather, name)?;
    let (op_, xp, ip) = (out.ptr(), x.ptr(), idx.ptr());
    let (dim, n64) = (d as i32, n as i64);
    let cfg = dev.grid_batched(n, 256, UNROLL);
    dev.with_flag(|flag| {
        launch!(
            dev, &f, name, cfg, &op_, &xp, &xl, &ip, &il, &dim, &size, &rule, &n64, &flag
        )
    })
}

/// Threads per block of the tile kernel.
const TILE_THREADS: u32 = 256;

/// A gather by tiles staged in shared memory (`gather_tile`) on views [outer, J, inner] of x
/// and the index: the strides of their merged axes before and after dim, `tw` positions of
/// `inner` per tile, `tiles` tiles, `bytes` of shared memory per block.
struct Tile {
    x: [i64; 2],
    idx: [i64; 2],
    inner: usize,
    tw: usize,
    tiles: usize,
    bytes: usize,
}

/// The stride of axes `shape` as one axis of their product's extent, if they merge (each
/// stride the next one's times its extent, axes of extent 1 aside).
fn merged(shape: &[usize], strides: &[isize]) -> Option<i64> {
    let mut axes = shape.iter().zip(strides).filter(|(n, _)| **n != 1).rev();
    let Some((&n0, &s0)) = axes.next() else {
        return Some(0);
    };
    let mut span = n0 as i64 * s0 as i64;
    for (&n, &s) in axes {
        if s as i64 != span {
            return None;
        }
        span *= n as i64;
    }
    Some(s0 as i64)
}

/// How gathers take tiles: `GATHER_CUDA_TILE=off` never, `=on` wherever x's slab fits (the
/// tests of the kernel), by default where the plan below expects the staging to pay.
/// `GATHER_CUDA_TILE_KB` is the shared memory a tile may take (64 KB: three blocks of a
/// Hopper multiprocessor).
fn tile_plan(dev: &crate::Cuda, x: &CudaTensor, d: usize, idx: &CudaTensor) -> Option<Tile> {
    static MODE: std::sync::OnceLock<(Option<bool>, usize)> = std::sync::OnceLock::new();
    let &(mode, budget) = MODE.get_or_init(|| {
        let mode = match std::env::var("GATHER_CUDA_TILE").as_deref() {
            Ok("off") => Some(false),
            Ok("on") => Some(true),
            _ => None,
        };
        let kb = std::env::var("GATHER_CUDA_TILE_KB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(64);
        (mode, kb << 10)
    });
    if mode == Some(false) {
        return None;
    }
    let shape = idx.shape();
    let (size, j) = (x.shape[d], shape[d]);
    let inner: usize = shape[d + 1..].iter().product();
    let outer: usize = shape[..d].iter().product();
    if size == 0 || j == 0 || inner == 0 || outer == 0 {
        return None;
    }
    let w = width(x.dtype());
    let budget = budget.min(dev.shared_optin());
    // Segments of up to 32 bytes (a sector) per row of the slab, fewer while it does not fit.
    let mut tw = (32 / w).min(inner.next_power_of_two());
    let slab = |tw: usize| size.saturating_mul(tw * w);
    while tw > 1 && slab(tw) > budget {
        tw /= 2;
    }
    let bytes = slab(tw);
    if bytes > budget {
        return None;
    }
    let tiles = outer.checked_mul(inner.div_ceil(tw))?;
    let (xs, is) = (x.strides(), idx.strides());
    let x = [
        merged(&shape[..d], &xs[..d])?,
        merged(&shape[d + 1..], &xs[d + 1..])?,
    ];
    let idx = [
        merged(&shape[..d], &is[..d])?,
        merged(&shape[d + 1..], &is[d + 1..])?,
    ];
    // By default: positions after dim to fill a segment, no more rows staged than twice the
    // positions that read them (each read direct pulls a sector), and a tile for every
    // multiprocessor.
    if mode.is_none() && (inner < 2 || size > j.saturating_mul(2) || tiles < dev.sms()) {
        return None;
    }
    Some(Tile {
        x,
        idx,
        inner,
        tw,
        tiles,
        bytes,
    })
}

/// Whether every offset of a view of `shape` and `strides` is a u32: the 32-bit kernels
/// (`gather32`, `take32`) read it then, with half the registers of the 64-bit ones.
/// `GATHER_CUDA_OFFSETS=64` keeps the 64-bit kernels for every call (their tests in CI).
fn fits_u32(shape: &[usize], strides: &[isize]) -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *WIDE.get_or_init(|| std::env::var("GATHER_CUDA_OFFSETS").is_ok_and(|v| v == "64")) {
        return false;
    }
    let mut span = 0u128;
    for (&n, &s) in shape.iter().zip(strides) {
        if s < 0 {
            return false;
        }
        span += n.saturating_sub(1) as u128 * s as u128;
    }
    span <= u32::MAX as u128
}

/// A gather whose index repeats over every axis after `dim` (an expanded index, index_select),
/// with x dense over those axes: whole rows are copied.
struct Rows {
    kernel: &'static str,
    word: usize,
    idx_so: i64,
    idx_sj: i64,
    n_idx: i64,
    x_so: i64,
    x_sv: i64,
    n_rows: usize,
    row_bytes: usize,
    lanes: i64,
}

fn rows_plan(x: &CudaTensor, d: usize, idx: &CudaTensor, out: &CudaTensor) -> Option<Rows> {
    let nd = idx.ndim();
    let w = width(x.dtype()) as i64;
    let lanes: usize = idx.shape[d + 1..].iter().product();
    if lanes == 0
        || idx.strides[d + 1..]
            .iter()
            .zip(&idx.shape[d + 1..])
            .any(|(&s, &n)| s != 0 && n > 1)
    {
        return None;
    }
    // x dense over the trailing axes, with the index's extents there.
    let mut want = 1isize;
    for a in (d + 1..nd).rev() {
        if x.shape[a] != idx.shape[a] || (idx.shape[a] > 1 && x.strides[a] != want) {
            return None;
        }
        want *= idx.shape[a] as isize;
    }
    let row_bytes = lanes * w as usize;
    if row_bytes < 16 && lanes > 1 {
        return None;
    }
    // The axes before dim walk as one.
    let (mut x_so, mut idx_so) = (0i64, 0i64);
    let mut outer = 1usize;
    let mut first = true;
    for a in (0..d).rev() {
        let n = idx.shape[a];
        if n == 1 {
            continue;
        }
        if first {
            x_so = x.strides[a] as i64;
            idx_so = idx.strides[a] as i64;
            first = false;
        } else if x.strides[a] as i64 != x_so * outer as i64
            || idx.strides[a] as i64 != idx_so * outer as i64
        {
            return None;
        }
        outer *= n;
    }
    if first {
        outer = 1;
    }
    let x_sv = x.strides[d] as i64 * w;
    let x_so = x_so * w;
    let aligned = |v: i64| v.rem_euclid(16) == 0;
    let word = if row_bytes % 16 == 0
        && aligned(x.ptr() as i64)
        && aligned(out.ptr() as i64)
        && aligned(x_so)
        && aligned(x_sv)
    {
        16
    } else if row_bytes % 4 == 0
        && (x.ptr() % 4 == 0)
        && out.ptr() % 4 == 0
        && x_so % 4 == 0
        && x_sv % 4 == 0
    {
        4
    } else {
        1
    };
    let i32_index = idx.dtype() == DType::I32;
    let kernel = match (word, i32_index) {
        (16, false) => "rows_w16_i64",
        (16, true) => "rows_w16_i32",
        (4, false) => "rows_w4_i64",
        (4, true) => "rows_w4_i32",
        (_, false) => "rows_w1_i64",
        (_, true) => "rows_w1_i32",
    };
    Some(Rows {
        kernel,
        word,
        idx_so,
        idx_sj: idx.strides[d] as i64,
        n_idx: idx.shape[d] as i64,
        x_so,
        x_sv,
        n_rows: outer * idx.shape[d],
        row_bytes,
        lanes: lanes as i64,
    })
}

/// Checks every value of a 1-d index against `size` without writing anything: the smallest
/// bad position, if any.
pub(crate) fn check_values(idx: &CudaTensor, size: usize, bounds: Bounds) -> Result<Option<u64>> {
    // A gather from a one-element stand-in of width 1 whose dim has `size` positions of
    // stride 0: it reads nothing out of range and flags exactly what the op would.
    let dev = idx.device();
    let stand_in = CudaTensor::empty(dev, &[1], DType::U8)?;
    let mut x = stand_in.clone();
    x.shape = vec![size.max(1)];
    x.strides = vec![0];
    let scratch = CudaTensor::empty(dev, idx.shape(), DType::U8)?;
    gather_general(&x, 0, idx, &scratch, size as i64, rule(bounds))
}

/// Copies any view into the row-major `out` of the same shape and dtype.
pub(crate) fn copy_into(x: &CudaTensor, out: &CudaTensor) -> Result<()> {
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let dev = x.device();
    if x.is_standard() {
        // The driver's copy moves dense bytes at full bandwidth; the kernel below walks strides.
        return dev.copy_bytes(out.ptr(), x.ptr(), n * width(x.dtype()));
    }
    let name = width_name("copy", x.dtype());
    let f = dev.function(Source::Gather, name)?;
    let xl = x.layout()?;
    let (op_, xp, n64) = (out.ptr(), x.ptr(), n as i64);
    launch!(dev, &f, name, dev.grid(n, 256), &op_, &xp, &xl, &n64)
}

/// An error unless the index has an integer dtype (the index ops reject a float index even when
/// it is empty).
pub(crate) fn require_int_index(op: &str, index: &CudaTensor) -> Result<()> {
    match index.dtype() {
        d @ (DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::Bool) => {
            Err(backend::index_dtype(op, "index", d).into())
        }
        _ => Ok(()),
    }
}

/// The index as the kernels read it: i64 or i32 as it is (any strides), other integer types
/// widened to a row-major i64 copy; a float or bool index is an error unless it is empty.
pub(crate) fn index_operand(op: &str, what: &str, index: &CudaTensor) -> Result<CudaTensor> {
    let widen = match index.dtype() {
        DType::I64 | DType::I32 => return Ok(index.clone()),
        DType::I8 => "widen_i8",
        DType::U8 => "widen_u8",
        DType::I16 => "widen_i16",
        DType::U16 => "widen_u16",
        DType::U32 => "widen_u32",
        DType::U64 => "widen_u64",
        _ if index.is_empty() => {
            // PyTorch skips the dtype check for an empty index.
            return CudaTensor::empty(index.device(), index.shape(), DType::I64);
        }
        other => return Err(backend::index_dtype(op, what, other).into()),
    };
    let dev = index.device();
    let out = CudaTensor::empty(dev, index.shape(), DType::I64)?;
    let n = index.len();
    if n > 0 {
        let f = dev.function(Source::Gather, widen)?;
        let xl = index.layout()?;
        let (op_, xp, n64) = (out.ptr(), index.ptr(), n as i64);
        launch!(dev, &f, widen, dev.grid(n, 256), &op_, &xp, &xl, &n64)?;
    }
    Ok(out)
}

/// A 0-d tensor seen as 1-d of one element.
pub(crate) fn as_1d(t: &CudaTensor) -> CudaTensor {
    let mut t = t.clone();
    if t.shape.is_empty() {
        t.shape = vec![1];
        t.strides = vec![1];
    }
    t
}

/// The coordinate of row-major position `pos` in `shape`.
pub(crate) fn unravel(mut pos: u64, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1) as u64;
        c[d] = (pos % n) as usize;
        pos /= n;
    }
    c
}

/// The index value at `coord`, read from the GPU (only for error messages).
pub(crate) fn read_index(t: &CudaTensor, coord: &[usize]) -> Result<i64> {
    let off: isize = coord
        .iter()
        .zip(&t.strides)
        .map(|(&c, &s)| c as isize * s)
        .sum::<isize>();
    let w = width(t.dtype());
    let addr = t.ptr().wrapping_add((off * w as isize) as u64);
    let b = t.device().read_bytes(addr, w)?;
    let mut a = [0u8; 8];
    a[..w].copy_from_slice(&b);
    Ok(match t.dtype() {
        DType::I64 => i64::from_le_bytes(a),
        DType::I32 => i32::from_le_bytes(a[..4].try_into().unwrap()) as i64,
        DType::I16 => i16::from_le_bytes(a[..2].try_into().unwrap()) as i64,
        DType::I8 => a[0] as i8 as i64,
        DType::U64 => u64::from_le_bytes(a).min(i64::MAX as u64) as i64,
        _ => u64::from_le_bytes(a) as i64,
    })
}

pub(crate) fn rule(b: Bounds) -> i32 {
    match b {
        Bounds::Wrap => 1,
        Bounds::Modulo => 2,
        // Strict; a rule the kernels do not know rejects what is out of 0..size rather than
        // mapping it in a way the CPU library does not.
        _ => 0,
    }
}

/// `copy_u32` and the like: the kernel of `family` for an element width (the kernels move
/// words of the element's byte width).
pub(crate) fn width_name(family: &str, dtype: DType) -> &'static str {
    let w = match width(dtype) {
        1 => "u8",
        2 => "u16",
        4 => "u32",
        _ => "u64",
    };
    intern(format!("{family}_{w}"))
}

/// `gather_u32_i64` and the like: the kernel for an element width and an index type.
pub(crate) fn kernel_name(family: &str, dtype: DType, index: DType) -> &'static str {
    intern(format!(
        "{}_{}",
        width_name(family, dtype),
        index_suffix(index)
    ))
}

/// The kernels' suffix for an index of `index_operand`'s dtypes (`i32`, else `i64`).
pub(crate) fn index_suffix(index: DType) -> &'static str {
    if index == DType::I32 { "i32" } else { "i64" }
}

/// The values of an index of `index_operand`'s dtypes (i64 or i32), read to the host as i64.
pub(crate) fn host_i64(t: &CudaTensor) -> Result<Vec<i64>> {
    Ok(match t.dtype() {
        DType::I32 => t.to_host::<i32>()?.iter().map(|&v| v as i64).collect(),
        _ => t.to_host::<i64>()?.iter().copied().collect(),
    })
}

/// A kernel's name as a `&'static str`: the names are a small fixed set (families, widths,
/// index types), each leaked once.
pub(crate) fn intern(name: String) -> &'static str {
    static NAMES: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, &'static str>>,
    > = std::sync::OnceLock::new();
    let mut m = NAMES.get_or_init(Default::default).lock().unwrap();
    m.entry(name.clone())
        .or_insert_with(|| Box::leak(name.into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    /// Every kernel name the reading ops launch exists in the compiled PTX (needs NVRTC, no GPU).
    #[test]
    fn every_kernel_the_reads_launch_is_compiled() {
        let Some(k) = compiled_entries(Source::Gather) else {
            return;
        };
        for d in [DType::U8, DType::I16, DType::F32, DType::F64] {
            for i in [DType::I64, DType::I32] {
                for family in ["gather", "take", "gather32", "take32", "gather_tile"] {
                    let name = kernel_name(family, d, i);
                    assert!(k.contains_key(name), "{name}");
                }
            }
        }
        for name in [
            "rows_w1_i64",
            "rows_w1_i32",
            "rows_w4_i64",
            "rows_w4_i32",
            "rows_w16_i64",
            "rows_w16_i32",
            "copy_u8",
            "copy_u16",
            "copy_u32",
            "copy_u64",
            "widen_i8",
            "widen_u8",
            "widen_i16",
            "widen_u16",
            "widen_u32",
            "widen_u64",
        ] {
            assert!(k.contains_key(name), "{name}");
        }
        for d in [DType::Bool, DType::F16, DType::F32, DType::I64] {
            let name = width_name("assign", d);
            assert_eq!(k.get(name), Some(&5), "{name}");
        }
        // The arity the launches rely on, for the one that once went wrong.
        assert_eq!(k["rows_w4_i64"], 15);
        assert_eq!((k["gather_u32_i64"], k["take_u32_i32"]), (10, 9));
        assert_eq!((k["gather32_u32_i64"], k["take32_u32_i32"]), (10, 9));
        assert_eq!(k["gather_tile_u16_i32"], 16);
    }

    /// Axes merge when each stride is the next one's times its extent, extent-1 axes aside:
    /// row-major, expanded (stride 0) and reversed runs do; a transposed pair does not.
    #[test]
    fn axes_merge_only_where_their_strides_chain() {
        assert_eq!(merged(&[], &[]), Some(0));
        assert_eq!(merged(&[1, 1], &[5, 9]), Some(0));
        assert_eq!(merged(&[3, 4, 5], &[20, 5, 1]), Some(1));
        assert_eq!(merged(&[3, 1, 5], &[10, 99, 2]), Some(2));
        assert_eq!(merged(&[3, 4], &[0, 0]), Some(0));
        assert_eq!(merged(&[3, 4], &[-4, -1]), Some(-1));
        assert_eq!(merged(&[3, 4], &[1, 3]), None);
        assert_eq!(merged(&[3, 4], &[5, 1]), None);
    }

    /// A view takes the 32-bit kernels when its last offset is at most u32::MAX and no stride
    /// is negative.
    #[test]
    fn offsets_fit_u32_up_to_the_last_offset() {
        if std::env::var("GATHER_CUDA_OFFSETS").is_ok() {
            return;
        }
        // The last offset is (2^16 - 1) * 2^16 + 2^16 - 1 = u32::MAX; a row more passes it.
        assert!(fits_u32(&[1 << 16, 1 << 16], &[1 << 16, 1]));
        assert!(!fits_u32(&[(1 << 16) + 1, 1 << 16], &[1 << 16, 1]));
        assert!(fits_u32(&[0, 7], &[1 << 40, 1]));
        assert!(!fits_u32(&[2, 3], &[3, -1]));
    }
}
