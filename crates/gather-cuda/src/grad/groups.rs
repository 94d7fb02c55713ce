//! Gradients of the group reductions and the segment ops on the GPU, as the CPU library's
//! (`gather::grad::scatter_groups` ...): every source element of group `G` reads `g[G]` and the
//! forward result `out[G]` (a gather), and, for softmax, one sum over its group (a group fold).
//!
//! ```text
//! reduce            d src[j]   (x = src[j], G = its group, n = |G|, y = the forward output)
//! sum               g[G]
//! mean              g[G] / n
//! amax / amin       g[G] / t  where x == out[G] (t tied elements share it), else 0
//! prod              g[G] * (product of the others in G)  (exact with zeros)
//! first / last      g[G] for the first / last element of G, else 0
//! logsumexp         g[G] * exp(x - out[G])
//! var (corr. c)     g[G] * 2 (x - mean[G]) / (n - c)
//! std (corr. c)     g[G] * (x - mean[G]) / ((n - c) * out[G])
//! softmax           y[j] * (g[j] - Σ_{k in G} g[k] y[k])
//! log_softmax       g[j] - exp(y[j]) * Σ_{k in G} g[k]
//! ```
//!
//! The group sums are the forward's deterministic folds; the segments are read to the host and
//! resolved by the CPU library's rules (they are small: one value per segment or position).

use gather::backend;
use gather::ops::reduce::{EmptyFill, GroupReduce};
use gather::{DType, OutOfBounds};

use super::{
    ScatterGrad, as_1d_shape, cast, check_shape, constant, div, embed, eq, eq_nan, exp, keep_eq,
    max, mul, nonzero_or_one, select, sub, widen, zeros,
};
use crate::error::Result;
use crate::gather::{as_1d, index_operand};
use crate::options::splat;
use crate::reduce::{How, fold_into, grouped, how};
use crate::scatter::R_SUM;
use crate::segment::on_host;
use crate::{CudaTensor, Options, Segments};

/// `vals` (of the block's shape) folded over the groups `idx` names along `d`, into a new
/// group-level tensor of `groups` along `d` holding `bits` where a group is empty.
fn fold(
    op: &str,
    vals: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    groups: usize,
    bits: u64,
    how: How,
) -> Result<CudaTensor> {
    let mut shape = vals.shape().to_vec();
    shape[d] = groups;
    Ok(fold_into(op, vals, d, idx, &shape, bits, how)?.0)
}

fn group_sum(
    op: &str,
    vals: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    groups: usize,
) -> Result<CudaTensor> {
    fold(op, vals, d, idx, groups, 0, How::Reduce(R_SUM))
}

/// `a[G]` at every source position of the block: a gather through the spread index.
fn pick(a: &CudaTensor, d: usize, idx: &CudaTensor) -> Result<CudaTensor> {
    crate::gather(a, d as isize, idx)
}

/// The positions along `d` of a tensor of `shape` (i64, stride 0 on the other axes).
fn positions(like: &CudaTensor, shape: &[usize], d: usize) -> Result<CudaTensor> {
    let iota = ndarray::Array1::from_iter(0..shape[d] as i64);
    Ok(CudaTensor::from_host(like.device(), &iota)?.spread(shape, d))
}

/// The gradient of a group reduction with respect to the block `x` of the source (wide type),
/// whose groups `idx` (the block's shape) names; `g` and `out` are group-level (`groups` along
/// `d`, at least the block's extents elsewhere).
#[allow(clippy::too_many_arguments)]
fn group_vjp(
    op: &str,
    reduce: GroupReduce,
    d: usize,
    x: &CudaTensor,
    idx: &CudaTensor,
    groups: usize,
    g: &CudaTensor,
    out: &CudaTensor,
) -> Result<CudaTensor> {
    let block = x.shape().to_vec();
    let gg = pick(g, d, idx)?;
    let counts = || group_sum(op, &constant(x, 1.0, &block)?, d, idx, groups);
    Ok(match reduce {
        GroupReduce::Sum => gg,
        GroupReduce::Mean => div(&gg, &pick(&counts()?, d, idx)?)?,
        GroupReduce::Amax | GroupReduce::Amin => {
            let hit = eq_nan(x, &pick(out, d, idx)?)?;
            let t = pick(&group_sum(op, &hit, d, idx, groups)?, d, idx)?;
            select(&hit, &div(&gg, &t)?, &constant(x, 0.0, &block)?)?
        }
        GroupReduce::First | GroupReduce::Last => {
            let pos = positions(x, &block, d)?;
            let no_winner = u64::MAX; // -1 as i64
            let win = fold(op, &pos, d, idx, groups, no_winner, how(op, reduce)?)?;
            keep_eq(&gg, &pos, &pick(&win, d, idx)?)?
        }
        GroupReduce::Prod => {
            let zero = eq(x, &constant(x, 0.0, &block)?)?;
            let nz = pick(&group_sum(op, &zero, d, idx, groups)?, d, idx)?;
            let one = backend::group_fill_bits(op, reduce, EmptyFill::Identity, x.dtype())?;
            let masked = nonzero_or_one(x)?;
            let others = pick(
                &fold(op, &masked, d, idx, groups, one, how(op, reduce)?)?,
                d,
                idx,
            )?;
            let product = mul(&gg, &others)?;
            // No zero in the group: g * p / x; exactly one, at x: g * p; else 0.
            let single = mul(&eq(&nz, &constant(x, 1.0, &block)?)?, &zero)?;
            let none = eq(&nz, &constant(x, 0.0, &block)?)?;
            let other = select(&single, &product, &constant(x, 0.0, &block)?)?;
            select(&none, &div(&product, x)?, &other)?
        }
        GroupReduce::LogSumExp => mul(&gg, &exp(&sub(x, &pick(out, d, idx)?)?)?)?,
        GroupReduce::Var { correction } | GroupReduce::Std { correction } => {
            let mean = fold(op, x, d, idx, groups, 0, how(op, GroupReduce::Mean)?)?;
            let centred = sub(x, &pick(&mean, d, idx)?)?;
            let n = pick(&counts()?, d, idx)?;
            let c = constant(x, correction as f64, &block)?;
            let denom = max(&sub(&n, &c)?, &constant(x, 0.0, &block)?)?;
            if matches!(reduce, GroupReduce::Std { .. }) {
                let og = pick(out, d, idx)?;
                div(&mul(&gg, &centred)?, &mul(&denom, &og)?)?
            } else {
                let two = constant(x, 2.0, &block)?;
                div(&mul(&mul(&gg, &two)?, &centred)?, &denom)?
            }
        }
        other => {
            return Err(crate::tensor::invalid(format!(
                "{op}: no gradient for reduce=\"{}\"",
                other.name()
            )));
        }
    })
}

/// The softmax gradient: `y (g - Σ_G g y)`, or for log_softmax `g - exp(y) Σ_G g`, in the
/// wide type; `idx` names each position's group (`y`'s shape).
fn softmax_vjp(
    op: &str,
    log: bool,
    d: usize,
    groups: usize,
    idx: &CudaTensor,
    g: &CudaTensor,
    y: &CudaTensor,
) -> Result<CudaTensor> {
    if log {
        let s = pick(&group_sum(op, g, d, idx, groups)?, d, idx)?;
        sub(g, &mul(&exp(y)?, &s)?)
    } else {
        let s = pick(&group_sum(op, &mul(g, y)?, d, idx, groups)?, d, idx)?;
        mul(y, &sub(g, &s)?)
    }
}

/// The output's shape check: `src`'s shape with `groups` on `d`.
fn check_out_shape(
    op: &str,
    what: &str,
    got: &[usize],
    src: &[usize],
    d: usize,
    groups: usize,
) -> Result<()> {
    let mut want = src.to_vec();
    want[d] = groups;
    check_shape(op, what, got, "the forward output", &want)
}

/// The gradient of [`scatter_groups()`](crate::scatter_groups()) with respect to `src`, from the
/// upstream gradient and the forward output (both of the output's shape). Sources beyond the
/// index's block get zero.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::{GroupOptions, GroupReduce};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![3.0f64, 1.0, 3.0, 7.0])?;
/// let idx = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 0, 1])?;
/// let out = gather_cuda::scatter_groups(&src, 0, &idx, GroupReduce::Amax, GroupOptions::default())?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![10.0f64, 20.0])?;
/// let d = gather_cuda::grad::scatter_groups(&g, &src, 0, &idx, GroupReduce::Amax, &out)?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![5.0, 0.0, 5.0, 20.0].into_dyn()); // the tie shares
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_groups(
    grad_out: &CudaTensor,
    src: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    reduce: GroupReduce,
    out: &CudaTensor,
) -> Result<CudaTensor> {
    let op = "scatter_groups_backward";
    let d = gather::dims::normalize_dim(op, dim, src.ndim().max(1))?;
    if out.ndim() != src.ndim() || src.ndim() == 0 {
        return Err(gather::Error::new(
            gather::ErrorKind::RankMismatch,
            format!(
                "{op}: out has {} dims but src has {}",
                out.ndim(),
                src.ndim()
            ),
        )
        .with_hint("pass the src and the output of the same forward call")
        .into());
    }
    let groups = out.shape()[d];
    check_out_shape(op, "out", out.shape(), src.shape(), d, groups)?;
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let gr = grouped(op, src, dim, index, Some(groups))?;
    let x = widen(op, &gr.src)?;
    let dx = group_vjp(
        op,
        reduce,
        d,
        &x,
        &gr.index,
        groups,
        &widen(op, grad_out)?,
        &widen(op, out)?,
    )?;
    cast(&embed(&dx, src.shape())?, src.dtype())
}

fn scatter_softmax_grad(
    op: &str,
    log: bool,
    grad_out: &CudaTensor,
    out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let gr = grouped(op, out, dim, index, None)?;
    if gr.src.shape() != out.shape() {
        return Err(gather::Error::new(
            gather::ErrorKind::ShapeMismatch,
            format!(
                "{op}: index {:?} must cover out {:?}",
                gr.src.shape(),
                out.shape()
            ),
        )
        .with_hint("pass the index of the forward call")
        .into());
    }
    let groups = gr.out_shape[gr.d];
    let dx = softmax_vjp(
        op,
        log,
        gr.d,
        groups,
        &gr.index,
        &widen(op, grad_out)?,
        &widen(op, out)?,
    )?;
    cast(&dx, out.dtype())
}

/// The gradient of [`scatter_softmax()`](crate::scatter_softmax()) with respect to `src`, from
/// the upstream gradient and the forward output `out`: `y (g - Σ_G g y)` in each group.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![0.0f64, 0.0])?;
/// let idx = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let y = gather_cuda::scatter_softmax(&src, 0, &idx)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 0.0])?;
/// let d = gather_cuda::grad::scatter_softmax(&g, &y, 0, &idx)?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![0.25, -0.25].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_softmax(
    grad_out: &CudaTensor,
    out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    scatter_softmax_grad("scatter_softmax_backward", false, grad_out, out, dim, index)
}

/// The gradient of [`scatter_log_softmax()`](crate::scatter_log_softmax()) with respect to
/// `src`: `g - exp(y) Σ_G g` in each group.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![2.0f64, 2.0])?;
/// let idx = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let y = gather_cuda::scatter_log_softmax(&src, 0, &idx)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![0.0f64, 1.0])?;
/// let d = gather_cuda::grad::scatter_log_softmax(&g, &y, 0, &idx)?.to_host::<f64>()?;
/// assert!((d[[0]] + 0.5).abs() < 1e-12 && (d[[1]] - 0.5).abs() < 1e-12);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_log_softmax(
    grad_out: &CudaTensor,
    out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    scatter_softmax_grad(
        "scatter_log_softmax_backward",
        true,
        grad_out,
        out,
        dim,
        index,
    )
}

/// The segment ids of positions `start..end` along `d`, seen over `shape` (stride 0 elsewhere).
fn segment_ids(like: &CudaTensor, ids: Vec<i64>, shape: &[usize], d: usize) -> Result<CudaTensor> {
    let ids = ndarray::Array1::from(ids);
    Ok(CudaTensor::from_host(like.device(), &ids)?.spread(shape, d))
}

/// The gradient of [`segment_reduce()`](crate::segment_reduce()) with respect to `src`, from the
/// upstream gradient and the forward output (both of the output's shape). Positions outside
/// every segment get zero.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64, 5.0, 5.0, 2.0]])?;
/// let off = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 3, 4])?;
/// let out = gather_cuda::segment_reduce(&src, 1, Segments::Offsets(&off), GroupReduce::Amax, EmptyFill::Identity)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[2.0f64, 3.0]])?;
/// let d = gather_cuda::grad::segment_reduce(&g, &src, 1, Segments::Offsets(&off), GroupReduce::Amax, &out)?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![[0.0, 1.0, 1.0, 3.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_reduce(
    grad_out: &CudaTensor,
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    reduce: GroupReduce,
    out: &CudaTensor,
) -> Result<CudaTensor> {
    let op = "segment_reduce_backward";
    if src.ndim() == 0 {
        return Err(gather::Error::new(
            gather::ErrorKind::RankMismatch,
            format!("{op}: src is 0-d"),
        )
        .with_hint("pass the src of the forward call")
        .into());
    }
    let d = gather::dims::normalize_dim(op, axis, src.ndim())?;
    let (start, end, ids, num) = on_host(op, segments, d, src.shape()[d])?;
    check_out_shape(op, "out", out.shape(), src.shape(), d, num)?;
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let block = src.slice_axis(d, start, end, 1)?;
    let x = widen(op, &block)?;
    let idx = segment_ids(src, ids, block.shape(), d)?;
    let dx = group_vjp(
        op,
        reduce,
        d,
        &x,
        &idx,
        num,
        &widen(op, grad_out)?,
        &widen(op, out)?,
    )?;
    let full = zeros(&dx, src.shape())?;
    full.slice_axis(d, start, end, 1)?.assign(&dx)?;
    cast(&full, src.dtype())
}

fn segment_softmax_grad(
    op: &str,
    log: bool,
    grad_out: &CudaTensor,
    out: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    if out.ndim() == 0 {
        return Err(gather::Error::new(
            gather::ErrorKind::RankMismatch,
            format!("{op}: out is 0-d"),
        )
        .with_hint("pass the output of the forward call")
        .into());
    }
    let d = gather::dims::normalize_dim(op, axis, out.ndim())?;
    let n = out.shape()[d];
    let (start, end, ids, num) = on_host(op, segments, d, n)?;
    if start != 0 || end != n {
        return Err(gather::Error::new(gather::ErrorKind::ShapeMismatch, format!(
            "{op}: the offsets cover positions {start}..{end} but out has {n} along dimension {d}"
        ))
        .with_hint("pass the segments of the forward call")
        .into());
    }
    let idx = segment_ids(out, ids, out.shape(), d)?;
    let dx = softmax_vjp(
        op,
        log,
        d,
        num,
        &idx,
        &widen(op, grad_out)?,
        &widen(op, out)?,
    )?;
    cast(&dx, out.dtype())
}

/// The gradient of [`segment_softmax()`](crate::segment_softmax()) with respect to `src` (see
/// [`scatter_softmax`]).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![0.0f64, 0.0])?;
/// let len = CudaTensor::from_host(&gpu, &ndarray::array![2i64])?;
/// let y = gather_cuda::segment_softmax(&src, 0, Segments::Lengths(&len))?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 0.0])?;
/// let d = gather_cuda::grad::segment_softmax(&g, &y, 0, Segments::Lengths(&len))?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![0.25, -0.25].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_softmax(
    grad_out: &CudaTensor,
    out: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    segment_softmax_grad(
        "segment_softmax_backward",
        false,
        grad_out,
        out,
        axis,
        segments,
    )
}

/// The gradient of [`segment_log_softmax()`](crate::segment_log_softmax()) with respect to
/// `src` (see [`scatter_log_softmax`]).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![2.0f64, 2.0])?;
/// let ids = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let y = gather_cuda::segment_log_softmax(&src, 0, Segments::ids(&ids))?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![0.0f64, 1.0])?;
/// let d = gather_cuda::grad::segment_log_softmax(&g, &y, 0, Segments::ids(&ids))?.to_host::<f64>()?;
/// assert!((d[[0]] + 0.5).abs() < 1e-12 && (d[[1]] - 0.5).abs() < 1e-12);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_log_softmax(
    grad_out: &CudaTensor,
    out: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    segment_softmax_grad(
        "segment_log_softmax_backward",
        true,
        grad_out,
        out,
        axis,
        segments,
    )
}

/// The gradients of [`scatter_reduce_arg()`](crate::scatter_reduce_arg()) routed through its
/// arg: `d src[p] = g[.., index[p], ..]` where `p` is the position the arg names, else 0;
/// `d self = g` where the arg is `-1` (self was kept), else 0. Ties are not split: one winner.
///
/// ```no_run
/// use gather_cuda::{ArgReduce, Cuda, CudaTensor};
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &ndarray::array![0.0f64, 9.0])?;
/// let idx = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 1])?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![4.0f64, 4.0, 1.0])?;
/// let (_, arg) = gather_cuda::scatter_reduce_arg(&x, 0, &idx, &src, ArgReduce::Amax, true)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 2.0])?;
/// let r = gather_cuda::grad::scatter_reduce_arg(&g, &arg, 0, &idx, &[3])?;
/// assert_eq!(r.input.to_host::<f64>()?, ndarray::array![0.0, 2.0].into_dyn());
/// assert_eq!(r.src.to_host::<f64>()?, ndarray::array![1.0, 0.0, 0.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_reduce_arg(
    grad_out: &CudaTensor,
    arg: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src_shape: &[usize],
) -> Result<ScatterGrad> {
    let op = "scatter_reduce_arg_backward";
    check_shape(op, "arg", arg.shape(), "grad_out", grad_out.shape())?;
    let w = widen(op, grad_out)?;
    let none = splat(arg.device(), u64::MAX, DType::I64, arg.shape())?; // -1
    let input = cast(&keep_eq(&w, arg, &none)?, grad_out.dtype())?;
    let Some(d) =
        backend::check_scatter(op, grad_out.shape(), dim, index.shape(), Some(src_shape))?
    else {
        return Ok(ScatterGrad {
            input,
            src: zeros(grad_out, src_shape)?,
        });
    };
    let idx = as_1d(&index_operand(op, "index", index)?);
    let (w1, a1) = (as_1d(&w), as_1d(arg));
    let gg = crate::gather(&w1, d as isize, &idx)?;
    let ga = crate::gather(&a1, d as isize, &idx)?;
    let block = keep_eq(&gg, &ga, &positions(&gg, idx.shape(), d)?)?;
    Ok(ScatterGrad {
        input,
        src: cast(&embed(&block, &as_1d_shape(src_shape))?, grad_out.dtype())?
            .reshape(src_shape)?,
    })
}

/// The gradient of [`segment_arg_reduce()`](crate::segment_arg_reduce()) with respect to `src`
/// (of `src_shape`): each segment's gradient goes to the source its arg names; empty segments
/// (arg `-1`) pass nothing.
///
/// ```no_run
/// use gather_cuda::{ArgReduce, Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::EmptyFill;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &ndarray::array![2.0f64, 7.0, 7.0, 1.0])?;
/// let len = CudaTensor::from_host(&gpu, &ndarray::array![3i64, 1])?;
/// let (_, arg) = gather_cuda::segment_arg_reduce(&src, 0, Segments::Lengths(&len), ArgReduce::Amax, EmptyFill::Zero)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![10.0f64, 20.0])?;
/// let d = gather_cuda::grad::segment_arg_reduce(&g, &arg, 0, &[4])?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![0.0, 10.0, 0.0, 20.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_arg_reduce(
    grad_out: &CudaTensor,
    arg: &CudaTensor,
    axis: isize,
    src_shape: &[usize],
) -> Result<CudaTensor> {
    let op = "segment_arg_reduce_backward";
    check_shape(op, "arg", arg.shape(), "grad_out", grad_out.shape())?;
    if src_shape.is_empty() || src_shape.len() != arg.ndim() {
        return Err(gather::Error::new(
            gather::ErrorKind::RankMismatch,
            format!(
                "{op}: src has {} dims but arg has {}",
                src_shape.len(),
                arg.ndim()
            ),
        )
        .with_hint("pass the src shape and the arg of the same forward call")
        .into());
    }
    let d = gather::dims::normalize_dim(op, axis, src_shape.len())?;
    if let Some(a) = (0..src_shape.len()).find(|&a| a != d && src_shape[a] != arg.shape()[a]) {
        return Err(gather::Error::new(
            gather::ErrorKind::ShapeMismatch,
            format!(
                "{op}: src {src_shape:?} and arg {:?} differ at dimension {a}",
                arg.shape()
            ),
        )
        .with_hint("pass the src shape and the arg of the same forward call")
        .into());
    }
    // Each segment's arg names one source position along `d` (segments do not overlap); an
    // empty segment's -1 is dropped.
    let drop = Options::new().bounds(OutOfBounds::Drop);
    let w = widen(op, grad_out)?;
    let dx = drop.scatter(&zeros(&w, src_shape)?, d as isize, arg, &w)?;
    cast(&dx, grad_out.dtype())
}
