//! The group reductions (`scatter_groups`: every reduction of the CPU library, into groups of
//! any size) and the arg-reductions: `scatter_reduce` amax/amin that also return the winning
//! source's position, with the CPU library's rules (first winner on ties, the first NaN for a NaN
//! result, `-1` where self kept its value or nothing arrived).
//!
//! ```text
//! scatter_reduce_arg(self=[10, 20, 30, 40], dim=0, index=[0, 0, 1, 1, 1],
//!                    src=[1, 2, 25, 50, 50], Amax, include_self=true)
//!   values = [10, 50, 30, 40]      self won [0]; the first 50 (position 3) won [1]
//!   arg    = [-1,  3, -1, -1]
//! ```

use gather::DType;
use gather::backend::{self, Bounds};
use gather::ops::reduce::{ArgReduce, GroupOptions, GroupReduce};

use crate::Scalar;
use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::{
    as_1d, check_values, index_operand, index_suffix, intern, read_index, unravel,
};
use crate::options::full;
use crate::scatter::{Fold, copy_of, reshape_like, run, same_dtype, strict_error};
use crate::tensor::{CudaTensor, invalid};

/// `scatter_reduce(input, dim, index, src, "amax"|"amin", include_self)` and, for each element
/// of the output, the position along `dim` of the source that won (`-1` where none did). The
/// values are bitwise those of [`scatter_reduce()`](crate::scatter_reduce()).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::ArgReduce;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// // Node features [V=3] ← edge messages, include_self = false (pytorch_scatter's scatter_max).
/// let x = CudaTensor::from_host(&gpu, &array![0i32, 0, 0])?;
/// let i = CudaTensor::from_host(&gpu, &array![2i64, 0, 2, 2])?;
/// let s = CudaTensor::from_host(&gpu, &array![4i32, 7, 9, 9])?;
/// let (out, arg) = gather_cuda::scatter_reduce_arg(&x, 0, &i, &s, ArgReduce::Amax, false)?;
/// assert_eq!(out.to_host::<i32>()?, array![7, 0, 9].into_dyn());
/// assert_eq!(arg.to_host::<i64>()?, array![1, -1, 2].into_dyn()); // the first 9
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_reduce_arg(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
    reduce: ArgReduce,
    include_self: bool,
) -> Result<(CudaTensor, CudaTensor)> {
    let op = "scatter_reduce";
    gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    same_dtype(op, "src", input, src)?;
    let arg = no_args(input)?;
    let Some(d) = backend::check_scatter(op, input.shape(), dim, index.shape(), Some(src.shape()))?
    else {
        return Ok((copy_of(input)?, arg));
    };
    let (x, idx, s) = (as_1d(input), as_1d(&index), as_1d(src));
    let size = x.shape()[d];
    let out = run(
        op,
        &x,
        d,
        &idx,
        Some(&s),
        0,
        reduce_code(reduce),
        include_self,
        None,
        Bounds::Strict,
        &|pos| strict_error(op, &idx, index.ndim() == 0, d, size, pos),
        Fold::Arg(&arg),
    )?;
    Ok((reshape_like(out, input), arg))
}

/// Reduces the groups of `src` that `index` names along `dim` (pytorch_scatter's
/// `scatter(src, index, dim, dim_size, reduce)`, the CPU library's `scatter_groups`): every
/// reduction of [`GroupReduce`], in index order. The output has `src`'s shape with `dim`
/// replaced by `opts.dim_size` (default: the largest index value + 1), and empty groups hold
/// `opts.fill`. The index has src's rank (and may be smaller: it reads src's leading block) or is
/// 1-D, one group per position along `dim` for every lane.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::{GroupOptions, GroupReduce};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// // Graph messages [E, F] into nodes [V, F] by a 1-D target per edge.
/// let msgs = CudaTensor::from_host(&gpu, &array![[1.0f64, 10.0], [2.0, 20.0], [4.0, 40.0]])?;
/// let dst = CudaTensor::from_host(&gpu, &array![1i64, 0, 1])?;
/// let opts = GroupOptions::default().dim_size(3);
/// let out = gather_cuda::scatter_groups(&msgs, 0, &dst, GroupReduce::Mean, opts)?;
/// assert_eq!(out.to_host::<f64>()?, array![[2.0, 20.0], [2.5, 25.0], [0.0, 0.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_groups(
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    reduce: GroupReduce,
    opts: GroupOptions<Scalar>,
) -> Result<CudaTensor> {
    let op = "scatter_groups";
    backend::check_group_reduce(op, reduce, src.dtype())?;
    let g = grouped(op, src, dim, index, opts.dim_size)?;
    let bits = backend::group_fill_bits(op, reduce, opts.fill, src.dtype())?;
    let (out, _) = fold_into(
        op,
        &g.src,
        g.d,
        &g.index,
        &g.out_shape,
        bits,
        how(op, reduce)?,
    )?;
    Ok(out)
}

/// Whether any element of each group is nonzero (NaN counts, -0.0 does not); empty groups hold
/// `opts.fill` (`Identity`: false). A bool tensor of src's shape with `dim` replaced by the
/// number of groups.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::GroupOptions;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![0, 3, 0, 0])?;
/// let index = CudaTensor::from_host(&gpu, &array![0i64, 0, 1, 1])?;
/// let out = gather_cuda::scatter_any(&src, 0, &index, GroupOptions::default().dim_size(3))?;
/// assert_eq!(out.to_host::<bool>()?, array![true, false, false].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_any(
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    opts: GroupOptions<bool>,
) -> Result<CudaTensor> {
    any_all("scatter_any", false, src, dim, index, opts)
}

/// Whether every element of each group is nonzero; empty groups hold `opts.fill` (`Identity`:
/// true). See [`scatter_any()`].
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::GroupOptions;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![1.0f32, 2.0, 0.0, 5.0])?;
/// let index = CudaTensor::from_host(&gpu, &array![0i64, 0, 1, 1])?;
/// let out = gather_cuda::scatter_all(&src, 0, &index, GroupOptions::default().dim_size(3))?;
/// assert_eq!(out.to_host::<bool>()?, array![true, false, true].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_all(
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    opts: GroupOptions<bool>,
) -> Result<CudaTensor> {
    any_all("scatter_all", true, src, dim, index, opts)
}

fn any_all(
    op: &str,
    all: bool,
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    opts: GroupOptions<bool>,
) -> Result<CudaTensor> {
    let g = grouped(op, src, dim, index, opts.dim_size)?;
    let fill = backend::group_bool_fill(op, opts.fill, all)?;
    let how = How::Reduce(if all { 4 } else { 3 });
    let (out, _) = fold_into(
        op,
        &truths(&g.src)?,
        g.d,
        &g.index,
        &g.out_shape,
        fill as u64,
        how,
    )?;
    Ok(out)
}

/// Softmax of every element of `src` within its group (pytorch_scatter's `scatter_softmax`),
/// numerically stable: per group a running maximum and a rescaled sum, then each element. The
/// index has src's shape or is 1-D along `dim`, and covers all of src. Floats only; a group with
/// a NaN or `+inf` gives NaN.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![1.0f64, 1.0, 2.0, 1000.0])?;
/// let index = CudaTensor::from_host(&gpu, &array![0i64, 0, 1, 1])?;
/// let out = gather_cuda::scatter_softmax(&src, 0, &index)?.to_host::<f64>()?;
/// assert_eq!((out[0], out[1], out[3]), (0.5, 0.5, 1.0));
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_softmax(src: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    softmax("scatter_softmax", false, src, dim, index)
}

/// `log` of [`scatter_softmax()`], computed as `x - logsumexp(group)`.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![0.0f32, 0.0])?;
/// let index = CudaTensor::from_host(&gpu, &array![0i64, 0])?;
/// let out = gather_cuda::scatter_log_softmax(&src, 0, &index)?.to_host::<f32>()?;
/// assert!((out[0] + std::f32::consts::LN_2).abs() < 1e-6);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_log_softmax(src: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    softmax("scatter_log_softmax", true, src, dim, index)
}

fn softmax(
    op: &str,
    log: bool,
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    backend::softmax_dtype(op, src.dtype())?;
    let g = grouped(op, src, dim, index, None)?;
    backend::softmax_covers(op, g.index.shape(), src.shape(), g.d)?;
    softmax_into(op, log, src, g.d, &g.index, g.out_shape[g.d])
}

/// The softmax of `src` (its shape covered by `idx`, every value in `0..groups`) within the
/// groups `idx` names along `d`, into a new tensor of src's shape.
pub(crate) fn softmax_into(
    op: &str,
    log: bool,
    src: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    groups: usize,
) -> Result<CudaTensor> {
    let dev = src.device();
    let out = CudaTensor::empty(dev, src.shape(), src.dtype())?;
    if out.is_empty() {
        return Ok(out);
    }
    // The groups' extent for the sort's keys: one element seen everywhere, never read.
    let mut extent = CudaTensor::empty(dev, &[1], src.dtype())?;
    extent.shape = src.shape().to_vec();
    extent.shape[d] = groups;
    extent.strides = vec![0; src.ndim()];
    let unreachable = |pos| checked_id_flagged(op, pos);
    let fold = Fold::Softmax(&out, log);
    let (x, s) = (&extent, Some(src));
    run(
        op,
        x,
        d,
        idx,
        s,
        0,
        0,
        false,
        None,
        Bounds::Strict,
        &unreachable,
        fold,
    )
}

/// `src` as bools: whether each element is nonzero (NaN is, -0.0 is not), row-major.
pub(crate) fn truths(src: &CudaTensor) -> Result<CudaTensor> {
    let dev = src.device();
    let out = CudaTensor::empty(dev, src.shape(), DType::Bool)?;
    let n = src.len();
    if n == 0 {
        return Ok(out);
    }
    let name = crate::gather::width_name("truth", src.dtype());
    let f = dev.function(Source::Groups, name)?;
    let (op_, xp, xl, n64) = (out.ptr(), src.ptr(), src.layout()?, n as i64);
    let cfg = dev.grid(n, 256);
    // Every bit counts, but a float's sign: -0.0 is zero.
    let mask = match src.dtype() {
        DType::F16 | DType::BF16 => 0x7fff,
        DType::F32 => 0x7fff_ffff,
        DType::F64 => 0x7fff_ffff_ffff_ffff,
        _ => u64::MAX,
    };
    macro_rules! go {
        ($t:ty) => {{
            let m = mask as $t;
            launch!(dev, &f, name, cfg, &op_, &xp, &xl, &m, &n64)
        }};
    }
    match crate::tensor::width(src.dtype()) {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => go!(u64),
    }?;
    Ok(out)
}

/// A group reduction's operands checked: the dim, the index with the block's shape (a 1-D index
/// spread over src's other axes, stride 0), src's block, and the output's shape (src's, with the
/// number of groups on the dim).
pub(crate) struct Grouped {
    pub(crate) d: usize,
    pub(crate) index: CudaTensor,
    pub(crate) src: CudaTensor,
    pub(crate) out_shape: Vec<usize>,
}

/// The checks of the group reductions, in the CPU library's order: the index's dtype and
/// shape, the number of groups (`dim_size`, or the largest value + 1), then every value as given.
pub(crate) fn grouped(
    op: &str,
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    dim_size: Option<usize>,
) -> Result<Grouped> {
    let index = index_operand(op, "index", index)?;
    let (d, block) = backend::grouped_shapes(op, src.shape(), dim, index.shape())?;
    let dim_size = match dim_size {
        Some(n) => n,
        None => (index_max(&index)?.max(-1) + 1) as usize,
    };
    let flat = index.reshape(&[index.len()])?;
    if !flat.is_empty() {
        if let Some(pos) = check_values(&flat, dim_size, Bounds::Strict)? {
            let coord = unravel(pos, index.shape());
            let value = read_index(&index, &coord)?;
            let e = backend::out_of_bounds(op, value, coord, d, dim_size, Bounds::Strict);
            return Err(e.into());
        }
    }
    let spread = if index.ndim() == src.ndim() {
        index.clone()
    } else {
        index.spread(&block, d)
    };
    let mut s = src.clone();
    for (a, &n) in block.iter().enumerate() {
        s = s.slice_axis(a, 0, n, 1)?;
    }
    let mut out_shape = src.shape().to_vec();
    out_shape[d] = dim_size;
    Ok(Grouped {
        d,
        index: spread,
        src: s,
        out_shape,
    })
}

/// The largest value of an index (i64 or i32), `i64::MIN` for an empty one.
fn index_max(index: &CudaTensor) -> Result<i64> {
    let n = index.len();
    if n == 0 {
        return Ok(i64::MIN);
    }
    let dev = index.device();
    let name = intern(format!("index_max_{}", index_suffix(index.dtype())));
    let f = dev.function(Source::Segment, name)?;
    let (ip, il, n64) = (index.ptr(), index.layout()?, n as i64);
    let cfg = dev.grid(n, 256);
    let key = dev.with_flag(|flag| launch!(dev, &f, name, cfg, &ip, &il, &n64, &flag))?;
    Ok(key.map_or(i64::MIN, |k| {
        (0x7fff_ffff_ffff_ffffu64.wrapping_sub(k)) as i64
    }))
}

/// Folds the contributions of `src` into a new tensor of `out_shape` that holds the fill
/// (`bits`) where nothing arrives: `idx` (src's shape or its leading block, every value checked)
/// names each contribution's group along `d`. With an arg-reduction, also the winners' positions
/// along `d` (`-1` where none).
pub(crate) fn fold_into(
    op: &str,
    src: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    out_shape: &[usize],
    bits: u64,
    how: How,
) -> Result<(CudaTensor, Option<CudaTensor>)> {
    let filled = full(src.device(), out_shape, src.dtype(), bits)?;
    let arg = match how {
        How::Arg(_) => Some(no_args(&filled)?),
        _ => None,
    };
    if idx.is_empty() || filled.is_empty() {
        return Ok((filled, arg));
    }
    let (code, fold) = match (how, &arg) {
        (How::Reduce(c), _) => (c, Fold::Apply),
        (How::Arg(c), Some(a)) => (c, Fold::Arg(a)),
        (How::First, _) => (0, Fold::First),
        (How::Float(kind, correction), _) => (0, Fold::Float(kind, correction)),
        (How::Arg(_), None) => unreachable!("the arg tensor exists for an arg-reduction"),
    };
    let unreachable = |pos| checked_id_flagged(op, pos);
    let out = run(
        op,
        &filled,
        d,
        idx,
        Some(src),
        0,
        code,
        false,
        None,
        Bounds::Strict,
        &unreachable,
        fold,
    )?;
    Ok((out, arg))
}

/// The error for a group id that the GPU flags although every value was checked before: a bug.
fn checked_id_flagged(op: &str, pos: u64) -> Result<crate::Error> {
    Ok(invalid(format!(
        "{op}: a checked group id was out of range at position {pos} (a bug of gather-cuda)"
    )))
}

/// How the runs of a group reduction (segments, groups) are folded: the apply kernels'
/// reduction (its code), the winners too, or a fold of its own kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum How {
    Reduce(i32),
    Arg(i32),
    First,
    /// logsumexp (0), var (1), std (2), and the correction.
    Float(i32, i64),
}

/// How a group reduction runs, or the error for one that does not run on the GPU.
pub(crate) fn how(op: &str, reduce: GroupReduce) -> Result<How> {
    Ok(match reduce {
        GroupReduce::Sum => How::Reduce(0),
        GroupReduce::Prod => How::Reduce(1),
        GroupReduce::Mean => How::Reduce(2),
        GroupReduce::Amax => How::Reduce(3),
        GroupReduce::Amin => How::Reduce(4),
        GroupReduce::Last => How::Reduce(5),
        GroupReduce::First => How::First,
        GroupReduce::LogSumExp => How::Float(0, 0),
        GroupReduce::Var { correction } => How::Float(1, correction as i64),
        GroupReduce::Std { correction } => How::Float(2, correction as i64),
        other => {
            return Err(invalid(format!(
                "{op}: reduce=\"{}\" does not run on the GPU yet",
                other.name()
            )));
        }
    })
}

/// The kernels' reduction code of an arg-reduction (`R_AMAX`, `R_AMIN`).
pub(crate) fn reduce_code(r: ArgReduce) -> i32 {
    match r {
        ArgReduce::Amax => 3,
        _ => 4,
    }
}

/// A row-major i64 tensor of `like`'s shape, all `-1` (no winner).
pub(crate) fn no_args(like: &CudaTensor) -> Result<CudaTensor> {
    let arg = CudaTensor::empty(like.device(), like.shape(), DType::I64)?;
    like.device().memset(arg.ptr(), 0xff, 8 * arg.len())?;
    Ok(arg)
}

#[cfg(test)]
mod tests {
    use crate::device::{Source, compiled_entries};

    #[test]
    fn every_arg_kernel_is_compiled() {
        let Some(entries) = compiled_entries(Source::Arg) else {
            return;
        };
        for t in [
            "f32", "f64", "f16", "bf16", "bool", "u8", "i8", "i16", "u16", "i32", "u32", "i64",
            "u64",
        ] {
            assert_eq!(entries.get(&format!("arg_{t}")), Some(&16), "arg_{t}");
        }
    }
}
