//! Gradients of the group reductions ([`ops::reduce`](crate::ops::reduce)) and the segment ops
//! ([`ops::segment`](crate::ops::segment)).
//!
//! Every source element belongs to one group `G = index[j]`; its gradient reads the upstream
//! gradient `g[G]` and the forward result `out[G]` of that group (a gather), and, for softmax,
//! one sum over the group:
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
//! arg amax / amin   g[G] if j is the arg of G, else 0 (one winner; self gets g where arg = -1)
//!
//!   src   index   out (amax)   g        d src
//!    3      0       [0]: 3     [0]: 10    10 / 2   (tie: 3 and 3 share g[0])
//!    1      0       [1]: 7     [1]: 20     0
//!    3      0                             10 / 2
//!    7      1                             20
//! ```
//!
//! Sources outside the groups (beyond the index's block, or outside the segments' offsets) get
//! zero; empty groups pass no gradient anywhere. `f16`/`bf16` gradients are computed in `f32`.

use crate::kernels::zip::{map, map2, map3};
use ndarray::{Array, ArrayBase, ArrayD, ArrayView, Axis, Data, Dimension, IxDyn, Slice, Zip};
use num_traits::{Float, NumCast};

use super::{GradFloat, ScatterGrad, check_shape, embed_leading, narrow_to, view_nonempty, widen};
use crate::dims::normalize_dim;
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels::fold::Pick;
use crate::ops::reduce::{
    Fold, GroupReduce, MeanF, ProdF, SumF, check_grouped, fold_groups, spread,
};
use crate::ops::segment::{Segments, resolve};

/// `fold` over the groups of `vals`, into a zero-initialised group-level array.
fn group_fold<W, I, F>(
    fold: &F,
    dim: usize,
    vals: ArrayView<'_, W, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    groups: usize,
    empty: F::Out,
) -> ArrayD<F::Out>
where
    W: Element,
    I: IndexElem,
    F: Fold<W>,
{
    let mut shape = vals.shape().to_vec();
    shape[dim] = groups;
    let mut out = ArrayD::from_elem(IxDyn(&shape), empty);
    fold_groups(fold, dim, vals, index, out.view_mut());
    out
}

/// `a[G]` at every source position: a gather through the (possibly spread) index.
fn pick<W: Element, I: IndexElem>(
    a: &ArrayD<W>,
    dim: usize,
    index: &ArrayView<'_, I, IxDyn>,
    block: &[usize],
) -> Result<ArrayD<W>> {
    let idx = index
        .broadcast(IxDyn(block))
        .expect("the index spreads over the block");
    crate::gather(a, dim as isize, &idx)
}

fn cast<W: Float>(n: usize) -> W {
    <W as NumCast>::from(n).unwrap_or_else(W::infinity)
}

/// The gradient of a group reduction with respect to the (block of the) source, in the wide
/// type. `g` and `out` are group-level arrays of the block's non-dim shape.
fn group_vjp<W, I>(
    reduce: GroupReduce,
    dim: usize,
    x: ArrayView<'_, W, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    g: &ArrayD<W>,
    out: &ArrayD<W>,
) -> Result<ArrayD<W>>
where
    W: GradFloat<Wide = W> + Float,
    I: IndexElem,
{
    let block = x.shape().to_vec();
    let groups = g.shape()[dim];
    let gg = pick(g, dim, &index, &block)?;
    let counts = || {
        let ones = ArrayD::from_elem(IxDyn(&block), W::one());
        group_fold(&SumF, dim, ones.view(), index.view(), groups, W::zero())
    };
    Ok(match reduce {
        GroupReduce::Sum => gg,
        GroupReduce::Mean => {
            let n = pick(&counts(), dim, &index, &block)?;
            gg / n
        }
        GroupReduce::Amax | GroupReduce::Amin => {
            let og = pick(out, dim, &index, &block)?;
            let eq = map2(&x.view(), &og.view(), |&x, &o| {
                if x == o || (Float::is_nan(x) && Float::is_nan(o)) {
                    W::one()
                } else {
                    W::zero()
                }
            });
            let t = group_fold(&SumF, dim, eq.view(), index.view(), groups, W::zero());
            let tg = pick(&t, dim, &index, &block)?;
            map3(&eq.view(), &gg.view(), &tg.view(), |&e, &g, &t| {
                if e == W::zero() { W::zero() } else { g / t }
            })
        }
        GroupReduce::First | GroupReduce::Last => {
            let pos = ArrayD::from_shape_fn(IxDyn(&block), |p| p[dim] as i64);
            let win = if reduce == GroupReduce::First {
                group_fold(
                    &Pick { last: false },
                    dim,
                    pos.view(),
                    index.view(),
                    groups,
                    -1,
                )
            } else {
                group_fold(
                    &Pick { last: true },
                    dim,
                    pos.view(),
                    index.view(),
                    groups,
                    -1,
                )
            };
            let wg = pick(&win, dim, &index, &block)?;
            map3(&pos.view(), &wg.view(), &gg.view(), |&p, &w, &g| {
                if p == w { g } else { W::zero() }
            })
        }
        GroupReduce::Prod => {
            let zero = map(
                &x.view(),
                |&v| if v == W::zero() { W::one() } else { W::zero() },
            );
            let nz = group_fold(&SumF, dim, zero.view(), index.view(), groups, W::zero());
            let masked = map(&x.view(), |&v| if v == W::zero() { W::one() } else { v });
            let others = group_fold(&ProdF, dim, masked.view(), index.view(), groups, W::one());
            let nzg = pick(&nz, dim, &index, &block)?;
            let og = pick(&others, dim, &index, &block)?;
            let mut dx = gg;
            Zip::from(&mut dx)
                .and(&x)
                .and(&nzg)
                .and(&og)
                .for_each(|d, &x, &nz, &p| {
                    *d = if nz == W::zero() {
                        *d * p / x
                    } else if nz == W::one() && x == W::zero() {
                        *d * p
                    } else {
                        W::zero()
                    };
                });
            dx
        }
        GroupReduce::LogSumExp => {
            let og = pick(out, dim, &index, &block)?;
            let mut dx = gg;
            Zip::from(&mut dx)
                .and(&x)
                .and(&og)
                .for_each(|d, &x, &o| *d = *d * (x - o).exp());
            dx
        }
        GroupReduce::Var { correction } | GroupReduce::Std { correction } => {
            let mean = group_fold(&MeanF, dim, x.view(), index.view(), groups, W::zero());
            let mg = pick(&mean, dim, &index, &block)?;
            let ng = pick(&counts(), dim, &index, &block)?;
            let og = pick(out, dim, &index, &block)?;
            let c: W = cast(correction);
            let is_std = matches!(reduce, GroupReduce::Std { .. });
            let two = W::one() + W::one();
            let mut dx = gg;
            Zip::from(&mut dx)
                .and(&x)
                .and(&mg)
                .and(&ng)
                .and(&og)
                .for_each(|d, &x, &m, &n, &o| {
                    let denom = (n - c).max(W::zero());
                    *d = if is_std {
                        *d * (x - m) / (denom * o)
                    } else {
                        *d * two * (x - m) / denom
                    };
                });
            dx
        }
    })
}

/// Softmax (`log = false`) or log-softmax VJP on a covered block: `g` and `y` have `x`'s shape.
fn softmax_vjp<W, I>(
    log: bool,
    dim: usize,
    groups: usize,
    index: ArrayView<'_, I, IxDyn>,
    g: &ArrayD<W>,
    y: &ArrayD<W>,
) -> Result<ArrayD<W>>
where
    W: GradFloat<Wide = W> + Float,
    I: IndexElem,
{
    let block = y.shape().to_vec();
    if log {
        let s = group_fold(&SumF, dim, g.view(), index.view(), groups, W::zero());
        let sg = pick(&s, dim, &index, &block)?;
        Ok(map3(&g.view(), &y.view(), &sg.view(), |&g, &y, &s| {
            g - y.exp() * s
        }))
    } else {
        let gy = g * y;
        let s = group_fold(&SumF, dim, gy.view(), index.view(), groups, W::zero());
        let sg = pick(&s, dim, &index, &block)?;
        Ok(map3(&g.view(), &y.view(), &sg.view(), |&g, &y, &s| {
            y * (g - s)
        }))
    }
}

/// `out`'s expected shape: `src`'s with `dim` replaced by `groups`.
fn check_out_shape(
    op: &str,
    what: &str,
    got: &[usize],
    src: &[usize],
    dim: usize,
    groups: usize,
) -> Result<()> {
    let mut want = src.to_vec();
    want[dim] = groups;
    check_shape(op, what, got, "the forward output", &want)
}

/// The gradient of [`scatter_groups`](crate::ops::reduce::scatter_groups) with respect to
/// `src`, given the upstream gradient `grad_out` and the forward output `out` (both of `out`'s
/// shape). Every [`GroupReduce`] has one; see the table in [`grad`](crate::grad).
///
/// ```
/// use gather::ops::reduce::{scatter_groups, GroupOptions, GroupReduce};
/// use ndarray::array;
/// let src = array![1.0f64, 2.0, 3.0];
/// let idx = array![0, 0, 1];
/// let out = scatter_groups(&src, 0, &idx, GroupReduce::Mean, GroupOptions::default())?;
/// let d = gather::grad::scatter_groups(&array![1.0, 10.0], &src, 0, &idx, GroupReduce::Mean, &out)?;
/// assert_eq!(d, array![0.5, 0.5, 10.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_groups<T, S, D, SX, DX, I, SI, DI, SR>(
    grad_out: &ArrayBase<S, D>,
    src: &ArrayBase<SX, DX>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    reduce: GroupReduce,
    out: &ArrayBase<SR, D>,
) -> Result<Array<T, DX>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SX: Data<Elem = T>,
    DX: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SR: Data<Elem = T>,
{
    let op = "scatter_groups_backward";
    let srcv = src.view().into_dyn();
    let d = normalize_dim(op, dim, srcv.ndim().max(1))?;
    if out.ndim() != srcv.ndim() || srcv.ndim() == 0 {
        return Err(Error::rank(format!(
            "{op}: out has {} dims but src has {}",
            out.ndim(),
            srcv.ndim()
        ))
        .with_hint("pass the src and the output of the same forward call"));
    }
    let groups = out.shape()[d];
    check_out_shape(op, "out", out.shape(), srcv.shape(), d, groups)?;
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let g = check_grouped(op, srcv, d as isize, index.view().into_dyn(), Some(groups))?;
    let block = g.src.shape().to_vec();
    let x = widen(&g.src);
    let cut = |a: ArrayD<T::Wide>| -> ArrayD<T::Wide> {
        let mut v = a.view();
        v.slice_each_axis_inplace(|ax| {
            let i = ax.axis.index();
            if i == d {
                Slice::from(..)
            } else {
                Slice::from(0..block[i])
            }
        });
        v.to_owned()
    };
    let gw = cut(widen(grad_out));
    let ow = cut(widen(out));
    let dx = group_vjp(reduce, d, x.view(), g.index, &gw, &ow)?;
    let full = embed_leading(op, dx.view(), src.raw_dim())?;
    Ok(narrow_to::<T, DX>(&full.into_dyn(), src.raw_dim()))
}

fn scatter_softmax_grad<T, S, D, SY, I, SI, DI>(
    op: &str,
    log: bool,
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let outv = out.view().into_dyn();
    let full = outv.shape().to_vec();
    let g = check_grouped(op, outv, dim, index.view().into_dyn(), None)?;
    if g.src.shape() != full.as_slice() {
        return Err(Error::shape(format!(
            "{op}: index {} must cover out {}",
            fmt_shape(g.src.shape()),
            fmt_shape(&full)
        ))
        .with_hint("pass the index of the forward call"));
    }
    let y = widen(out);
    let gw = widen(grad_out);
    let dx = softmax_vjp(log, g.dim, g.dim_size, g.index, &gw, &y)?;
    Ok(narrow_to::<T, D>(&dx, out.raw_dim()))
}

/// The gradient of [`scatter_softmax`](crate::ops::reduce::scatter_softmax) with respect to
/// `src`, from the upstream gradient and the forward output `out` (both of src's shape):
/// `out * (grad_out - Σ_group grad_out * out)`.
///
/// ```
/// use gather::ops::reduce::scatter_softmax;
/// use ndarray::array;
/// let idx = array![0, 0, 1];
/// let y = scatter_softmax(&array![0.0f64, 0.0, 3.0], 0, &idx)?;
/// let d = gather::grad::scatter_softmax(&array![1.0, 0.0, 5.0], &y, 0, &idx)?;
/// assert_eq!(d, array![0.25, -0.25, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_softmax<T, S, D, SY, I, SI, DI>(
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    scatter_softmax_grad("scatter_softmax_backward", false, grad_out, out, dim, index)
}

/// The gradient of [`scatter_log_softmax`](crate::ops::reduce::scatter_log_softmax) with respect
/// to `src`: `grad_out - exp(out) * Σ_group grad_out`.
///
/// ```
/// use gather::ops::reduce::scatter_log_softmax;
/// use ndarray::array;
/// let idx = array![0, 0];
/// let y = scatter_log_softmax(&array![1.0f64, 1.0], 0, &idx)?;
/// let d = gather::grad::scatter_log_softmax(&array![1.0, 0.0], &y, 0, &idx)?;
/// assert!((&d - &array![0.5, -0.5]).iter().all(|e| e.abs() < 1e-12));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_log_softmax<T, S, D, SY, I, SI, DI>(
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    scatter_softmax_grad(
        "scatter_log_softmax_backward",
        true,
        grad_out,
        out,
        dim,
        index,
    )
}

/// Places `block` (the gradient of `src`'s positions `start..start + len` along `axis`) in a
/// zero array of `src`'s shape.
fn embed_axis<W: Element>(
    block: ArrayD<W>,
    shape: &[usize],
    axis: usize,
    start: usize,
) -> ArrayD<W> {
    if block.shape() == shape {
        return block;
    }
    let mut full = ArrayD::from_elem(IxDyn(shape), W::default());
    let len = block.shape()[axis];
    crate::kernels::copy::assign(
        &mut full.slice_axis_mut(Axis(axis), Slice::from(start..start + len)),
        &block.view(),
    );
    full
}

/// The gradient of [`segment_reduce`](crate::ops::segment::segment_reduce) with respect to
/// `src`, from the upstream gradient and the forward output (both of the output's shape).
/// Positions outside every segment get zero.
///
/// ```
/// use gather::ops::segment::{segment_reduce, Segments};
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// use ndarray::array;
/// let src = array![[1.0f64, 5.0, 5.0, 2.0]];
/// let off = array![0, 3, 4];
/// let out = segment_reduce(&src, 1, Segments::offsets(&off), GroupReduce::Amax, EmptyFill::Identity)?;
/// let d = gather::grad::segment_reduce(&array![[2.0, 3.0]], &src, 1, Segments::offsets(&off), GroupReduce::Amax, &out)?;
/// assert_eq!(d, array![[0.0, 1.0, 1.0, 3.0]]); // the tie shares the gradient
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_reduce<T, S, D, SX, I, SR>(
    grad_out: &ArrayBase<S, D>,
    src: &ArrayBase<SX, D>,
    axis: isize,
    segments: Segments<'_, I>,
    reduce: GroupReduce,
    out: &ArrayBase<SR, D>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SX: Data<Elem = T>,
    I: IndexElem,
    SR: Data<Elem = T>,
{
    let op = "segment_reduce_backward";
    if src.ndim() == 0 {
        return Err(
            Error::rank(format!("{op}: src is 0-d")).with_hint("pass the src of the forward call")
        );
    }
    let d = normalize_dim(op, axis, src.ndim())?;
    let r = resolve(op, &segments, d, src.shape()[d])?;
    check_out_shape(op, "out", out.shape(), src.shape(), d, r.num)?;
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    let mut s = src.view().into_dyn();
    s.slice_axis_inplace(Axis(d), Slice::from(r.start..r.end));
    let x = widen(&s);
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, s.ndim());
    let dx = group_vjp(reduce, d, x.view(), ids, &widen(grad_out), &widen(out))?;
    let full = embed_axis(dx, src.shape(), d, r.start);
    Ok(narrow_to::<T, D>(&full, src.raw_dim()))
}

fn segment_softmax_grad<T, S, D, SY, I>(
    op: &str,
    log: bool,
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    axis: isize,
    segments: Segments<'_, I>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
{
    check_shape(op, "grad_out", grad_out.shape(), "out", out.shape())?;
    if out.ndim() == 0 {
        return Err(Error::rank(format!("{op}: out is 0-d"))
            .with_hint("pass the output of the forward call"));
    }
    let d = normalize_dim(op, axis, out.ndim())?;
    let n = out.shape()[d];
    let r = resolve(op, &segments, d, n)?;
    if r.start != 0 || r.end != n {
        return Err(Error::shape(format!(
            "{op}: the offsets cover positions {}..{} but out has {n} along dimension {d}",
            r.start, r.end
        ))
        .with_hint("pass the segments of the forward call"));
    }
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, out.ndim());
    let dx = softmax_vjp(log, d, r.num, ids, &widen(grad_out), &widen(out))?;
    Ok(narrow_to::<T, D>(&dx, out.raw_dim()))
}

/// The gradient of [`segment_softmax`](crate::ops::segment::segment_softmax) with respect to
/// `src` (see [`scatter_softmax`]).
///
/// ```
/// use gather::ops::segment::{segment_softmax, Segments};
/// use ndarray::array;
/// let len = array![2];
/// let y = segment_softmax(&array![0.0f64, 0.0], 0, Segments::lengths(&len))?;
/// let d = gather::grad::segment_softmax(&array![1.0, 0.0], &y, 0, Segments::lengths(&len))?;
/// assert_eq!(d, array![0.25, -0.25]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_softmax<T, S, D, SY, I>(
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    axis: isize,
    segments: Segments<'_, I>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
{
    segment_softmax_grad(
        "segment_softmax_backward",
        false,
        grad_out,
        out,
        axis,
        segments,
    )
}

/// The gradient of [`segment_log_softmax`](crate::ops::segment::segment_log_softmax) with
/// respect to `src` (see [`scatter_log_softmax`]).
///
/// ```
/// use gather::ops::segment::{segment_log_softmax, Segments};
/// use ndarray::array;
/// let ids = array![0, 0];
/// let y = segment_log_softmax(&array![2.0f64, 2.0], 0, Segments::ids(&ids))?;
/// let d = gather::grad::segment_log_softmax(&array![0.0, 1.0], &y, 0, Segments::ids(&ids))?;
/// assert!((&d - &array![-0.5, 0.5]).iter().all(|e| e.abs() < 1e-12));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_log_softmax<T, S, D, SY, I>(
    grad_out: &ArrayBase<S, D>,
    out: &ArrayBase<SY, D>,
    axis: isize,
    segments: Segments<'_, I>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    T::Wide: GradFloat<Wide = T::Wide>,
    S: Data<Elem = T>,
    D: Dimension,
    SY: Data<Elem = T>,
    I: IndexElem,
{
    segment_softmax_grad(
        "segment_log_softmax_backward",
        true,
        grad_out,
        out,
        axis,
        segments,
    )
}

/// The gradients of [`scatter_reduce_arg`](crate::ops::reduce::scatter_reduce_arg) routed
/// through its arg array: one winner per group (pytorch_scatter's `scatter_max` backward).
///
/// `d src[p] = grad_out[.., index[p], ..]` where `p` is the position the arg names, else 0;
/// `d self = grad_out` where the arg is `-1` (self was kept), else 0. Ties are not split: only
/// the first source holding the result gets the gradient (compare [`scatter_reduce`](super::scatter_reduce),
/// which splits it evenly as PyTorch's `scatter_reduce` does).
///
/// ```
/// use gather::ops::reduce::{scatter_reduce_arg, ArgReduce};
/// use ndarray::array;
/// let x = array![0.0f64, 9.0];
/// let (idx, src) = (array![0, 0, 1], array![4.0, 4.0, 1.0]);
/// let (_, arg) = scatter_reduce_arg(&x, 0, &idx, &src, ArgReduce::Amax, true)?;
/// assert_eq!(arg, array![0, -1]);
/// let g = gather::grad::scatter_reduce_arg(&array![1.0, 2.0], &arg, 0, &idx, [3])?;
/// assert_eq!(g.input, array![0.0, 2.0]);
/// assert_eq!(g.src, array![1.0, 0.0, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_reduce_arg<T, S, D, SA, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, D>,
    arg: &ArrayBase<SA, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src_shape: Sh,
) -> Result<ScatterGrad<T, D, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    SA: Data<Elem = i64>,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: ndarray::IntoDimension,
{
    let op = "scatter_reduce_arg_backward";
    let src_dim = src_shape.into_dimension();
    check_shape(op, "arg", arg.shape(), "grad_out", grad_out.shape())?;
    let input = Zip::from(grad_out).and(arg).map_collect(|&g, &a| {
        if a == crate::ops::reduce::NO_ARG {
            g
        } else {
            T::default()
        }
    });
    let Some(d) = crate::ops::scatter::check_scatter_shapes(
        op,
        grad_out.shape(),
        dim,
        index.shape(),
        Some(src_dim.slice()),
    )?
    else {
        let src = super::try_zeros::<T, _>(op, src_dim)?;
        return Ok(ScatterGrad { input, src });
    };
    let gv = view_nonempty(grad_out);
    let av = view_nonempty(arg);
    let idx = view_nonempty(index);
    let checked = CheckedIndex::new(op, idx, d, gv.shape()[d], Bounds::Strict)?;
    let idx = checked.view();
    let gg = crate::gather(&gv, d as isize, idx)?;
    let ga = crate::gather(&av, d as isize, idx)?;
    let mut block = gg;
    for ((p, v), &a) in block.indexed_iter_mut().zip(ga.iter()) {
        if a != p[d] as i64 {
            *v = T::default();
        }
    }
    let src = embed_leading(op, block.view(), src_dim)?;
    Ok(ScatterGrad { input, src })
}

/// The gradient of [`bincount_weighted_axis`](crate::ops::segment::bincount_weighted_axis) (and
/// [`bincount_weighted`](crate::ops::segment::bincount_weighted)) with respect to the weights:
/// each weight gets the gradient of its bin.
///
/// ```
/// use ndarray::array;
/// let input = array![2, 0, 2];
/// let d = gather::grad::bincount_weighted_axis(&array![1.0f32, 0.0, 5.0], &input, 0)?;
/// assert_eq!(d, array![5.0, 1.0, 5.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bincount_weighted_axis<T, S, D, I, SI>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SI, D>,
    axis: isize,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
{
    let op = "bincount_backward";
    let d = normalize_dim(op, axis, input.ndim())?;
    if grad_out.ndim() != input.ndim() {
        return Err(Error::rank(format!(
            "{op}: grad_out has {} dims but input has {}",
            grad_out.ndim(),
            input.ndim()
        ))
        .with_hint("pass the gradient of the bincount output"));
    }
    if input.ndim() > 0 {
        check_out_shape(
            op,
            "grad_out",
            grad_out.shape(),
            input.shape(),
            d,
            grad_out.shape()[d],
        )?;
    }
    crate::gather(grad_out, d as isize, input)
}

/// The gradient of [`segment_arg_reduce`](crate::ops::segment::segment_arg_reduce) with respect
/// to `src` (of `src_shape`): each segment's gradient goes to the source its arg names; empty
/// segments (arg `-1`) pass nothing.
///
/// ```
/// use gather::ops::segment::{segment_arg_reduce, Segments};
/// use gather::ops::reduce::{ArgReduce, EmptyFill};
/// use ndarray::array;
/// let src = array![2.0f64, 7.0, 7.0, 1.0];
/// let (_, arg) = segment_arg_reduce(&src, 0, Segments::lengths(&array![3, 1]), ArgReduce::Amax, EmptyFill::Zero)?;
/// let d = gather::grad::segment_arg_reduce(&array![10.0, 20.0], &arg, 0, [4])?;
/// assert_eq!(d, array![0.0, 10.0, 0.0, 20.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_arg_reduce<T, S, D, SA, Sh>(
    grad_out: &ArrayBase<S, D>,
    arg: &ArrayBase<SA, D>,
    axis: isize,
    src_shape: Sh,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    SA: Data<Elem = i64>,
    Sh: ndarray::IntoDimension<Dim = D>,
{
    let op = "segment_arg_reduce_backward";
    let shape = src_shape.into_dimension();
    check_shape(op, "arg", arg.shape(), "grad_out", grad_out.shape())?;
    if shape.ndim() == 0 || shape.ndim() != arg.ndim() {
        return Err(Error::rank(format!(
            "{op}: src has {} dims but arg has {}",
            shape.ndim(),
            arg.ndim()
        ))
        .with_hint("pass the src shape and the arg of the same forward call"));
    }
    let d = normalize_dim(op, axis, shape.ndim())?;
    if let Some(a) = (0..shape.ndim()).find(|&a| a != d && shape[a] != arg.shape()[a]) {
        return Err(Error::shape(format!(
            "{op}: src {} and arg {} differ at dimension {a}",
            fmt_shape(shape.slice()),
            fmt_shape(arg.shape())
        ))
        .with_hint("pass the src shape and the arg of the same forward call"));
    }
    let n = shape[d];
    let mut out = super::try_zeros::<T, IxDyn>(op, IxDyn(shape.slice()))?;
    for ((p, &a), &g) in arg
        .view()
        .into_dyn()
        .indexed_iter()
        .zip(grad_out.view().into_dyn().iter())
    {
        if a == crate::ops::reduce::NO_ARG {
            continue;
        }
        if a < 0 || a >= n as i64 {
            return Err(Error::new(
                crate::ErrorKind::IndexOutOfBounds,
                format!("{op}: arg {a} is out of bounds for dimension {d} with size {n}"),
            )
            .with_hint("pass the arg of the same forward call")
            .with_index(a, p.slice().to_vec()));
        }
        let mut q = p.slice().to_vec();
        q[d] = a as usize;
        out[q.as_slice()] = g;
    }
    Ok(out
        .into_dimensionality::<D>()
        .expect("the output has src's rank"))
}
