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
use crate::gather::{as_1d, check_values, index_operand, read_index, unravel};
use crate::options::full;
use crate::scatter::{Fold, copy_of, reshape_like, run, same_dtype};
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
        &|pos| {
            let coord = unravel(pos, idx.shape());
            let v = read_index(&idx, &coord)?;
            let coord = if index.ndim() == 0 { Vec::new() } else { coord };
            Ok(backend::out_of_bounds(op, v, coord, d, size, Bounds::Strict).into())
        },
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
    let index = index_operand(op, "index", index)?;
    let (d, block) = backend::grouped_shapes(op, src.shape(), dim, index.shape())?;
    let dim_size = match opts.dim_size {
        Some(n) => n,
        None => (index_max(&index)?.max(-1) + 1) as usize,
    };
    // Every value checked as given (its position named in the caller's index), as the CPU does.
    let flat = index.reshape(&[index.len()])?;
    if !flat.is_empty() {
        if let Some(pos) = check_values(&flat, dim_size, Bounds::Strict)? {
            let coord = unravel(pos, index.shape());
            let value = read_index(&index, &coord)?;
            let e = backend::out_of_bounds(op, value, coord, d, dim_size, Bounds::Strict);
            return Err(e.into());
        }
    }
    let bits = backend::group_fill_bits(op, reduce, opts.fill, src.dtype())?;
    let how = how(op, reduce)?;
    // A 1-D index spread over src's other axes (stride 0, never copied); src's leading block.
    let idx = if index.ndim() == src.ndim() {
        index.clone()
    } else {
        let mut v = index.clone();
        v.shape = block.clone();
        v.strides = vec![0; block.len()];
        v.strides[d] = index.strides()[0];
        v
    };
    let mut s = src.clone();
    for (a, &n) in block.iter().enumerate() {
        s = s.slice_axis(a, 0, n, 1)?;
    }
    let mut shape = src.shape().to_vec();
    shape[d] = dim_size;
    let (out, _) = fold_into(op, &s, d, &idx, &shape, bits, how)?;
    Ok(out)
}

/// The largest value of an index (i64 or i32), `i64::MIN` for an empty one.
fn index_max(index: &CudaTensor) -> Result<i64> {
    let n = index.len();
    if n == 0 {
        return Ok(i64::MIN);
    }
    let dev = index.device();
    let name = if index.dtype() == DType::I32 {
        "index_max_i32"
    } else {
        "index_max_i64"
    };
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
    let unreachable = |pos: u64| -> Result<crate::Error> {
        Ok(invalid(format!(
            "{op}: a checked group id was out of range at position {pos} (a bug of gather-cuda)"
        )))
    };
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

/// How the runs of a group reduction (segments, groups) are folded: the apply kernels' reduction (its code), the
/// winners too, or a fold of its own kernel.
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
