//! Gradients of `scatter`, `scatter_add`, `scatter_reduce` and the legacy `scatter(reduce=)`.
//!
//! ```text
//! scatter_add(self, dim=1, index, src)     d self = g        d src[i][j] = g[i][index[i][j]]
//!
//!  g (self's shape)     index        d src (index-shaped block of src)
//!  ┌───┬───┬───┐        ┌───┬───┐    ┌───┬───┐
//!  │ 1 │ 2 │ 3 │   →    │ 2 │ 0 │ →  │ 3 │ 1 │     src[0][0] landed on self[0][2]: it gets g[0][2]
//!  ├───┼───┼───┤        ├───┼───┤    ├───┼───┤
//!  │ 4 │ 5 │ 6 │   →    │ 1 │ 1 │ →  │ 5 │ 5 │     both src of row 1 landed on self[1][1]
//!  └───┴───┴───┘        └───┴───┘    └───┴───┘
//! ```
//!
//! `scatter` (a plain write) zeroes `d self` where something was written, and, like PyTorch, gives
//! every duplicate writer the gradient of the element it targeted, although only the last write
//! survived. The reductions are in the [module docs](super).
//!
//! The src gradient always has src's shape: src may be larger than the index (the forward reads
//! only its leading index-shaped block), and the rest of it gets zero. PyTorch's backward fails
//! with "returned an invalid gradient" there.

use crate::kernels::zip::{map, map2, map3};
use ndarray::{Array, ArrayBase, ArrayD, ArrayView, Data, Dimension, IxDyn, Zip};
use num_traits::{Float, Zero};

use super::output::{GradOutputOf, check_grad_output};
use super::{
    GradFloat, Parity, check_shape, embed_leading, leading_block, narrow_to, view_nonempty, widen,
};
use crate::error::Result;
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::scatter::{LegacyReduce, Reduce, check_scatter_shapes};

/// The gradients of a scatter-like op with respect to `input` (`self`) and `src`, each of its
/// input's shape.
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::scatter_add(&array![1.0f32, 2.0, 3.0], 0, &array![2, 2], [2])?;
/// assert_eq!(g.input, array![1.0, 2.0, 3.0]);
/// assert_eq!(g.src, array![3.0, 3.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ScatterGrad<T, D: Dimension, DS: Dimension> {
    /// The gradient of `input` (`self`), of its shape.
    pub input: Array<T, D>,
    /// The gradient of `src`, of its shape (zero outside the index-shaped block the op read).
    pub src: Array<T, DS>,
}

/// The checks of the forward scatter plus the gradient's shape; `None` for an empty index.
fn check_scatter_grad<I: IndexElem>(
    op: &str,
    grad_shape: &[usize],
    dim: isize,
    index: &ArrayView<'_, I, IxDyn>,
    src_shape: Option<&[usize]>,
) -> Result<Option<usize>> {
    let d = check_scatter_shapes(op, grad_shape, dim, index.shape(), src_shape)?;
    if let Some(d) = d {
        let idx = view_nonempty(index);
        let size = super::nonempty(grad_shape)[d];
        check_bounds(op, &idx, d, size, Bounds::Strict)?;
    }
    Ok(d)
}

/// `g.gather(dim, index)` placed in a zero array of `src_shape`.
fn src_grad<T, S, DG, I, SI, DI, DS>(
    op: &str,
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src_shape: DS,
    d: Option<usize>,
) -> Result<Array<T, DS>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    DS: Dimension,
{
    match d {
        None => super::try_zeros(op, src_shape),
        Some(_) => {
            let block = crate::gather(grad_out, dim, index)?.into_dyn();
            embed_leading(op, view_nonempty(&block), src_shape)
        }
    }
}

/// The gradients of [`scatter()`](crate::scatter()) (`self.scatter(dim, index, src)`):
/// `input = g.scatter(dim, index, 0)`, `src = g.gather(dim, index)`.
///
/// `src_shape` is the shape of the forward's `src` (the index's shape, or larger). With duplicate
/// targets every duplicate gets the gradient, as in PyTorch, although only one write survived.
///
/// ```
/// use ndarray::array;
/// // zeros(3).scatter(0, [0, 0], [1, 2]) → [2, 0, 0]; PyTorch: src.grad = [1, 1].
/// let g = gather::grad::scatter(&array![1.0f64, 1.0, 1.0], 0, &array![0, 0], [2])?;
/// assert_eq!(g.input, array![0.0, 1.0, 1.0]);
/// assert_eq!(g.src, array![1.0, 1.0]);
///
/// // src larger than the index: the part that was never read gets zero (PyTorch fails).
/// let g = gather::grad::scatter(&array![[1.0f32, 2.0, 3.0]], 1, &array![[2]], (1, 3))?;
/// assert_eq!(g.src, array![[3.0, 0.0, 0.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src_shape: Sh,
) -> Result<ScatterGrad<T, DG, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: ndarray::IntoDimension,
{
    let op = "grad::scatter";
    let src_shape = src_shape.into_dimension();
    let idx = index.view().into_dyn();
    let d = check_scatter_grad(op, grad_out.shape(), dim, &idx, Some(src_shape.slice()))?;
    let input = crate::scatter(grad_out, dim, index, T::narrow(Zero::zero()))?;
    let src = src_grad(op, grad_out, dim, index, src_shape, d)?;
    Ok(ScatterGrad { input, src })
}

/// The gradient of [`scatter()`](crate::scatter()) with a value, with respect to `input`:
/// `g.scatter(dim, index, 0)` (the value is a constant).
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::scatter_value(&array![[1.0f32, 2.0], [3.0, 4.0]], 1, &array![[1], [0]])?;
/// assert_eq!(g, array![[1.0, 0.0], [0.0, 4.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_value<T, S, D, I, SI, DI>(
    grad_out: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "grad::scatter_value";
    check_scatter_grad(op, grad_out.shape(), dim, &index.view().into_dyn(), None)?;
    crate::scatter(grad_out, dim, index, T::narrow(Zero::zero()))
}

/// The gradients of [`scatter_add()`](crate::scatter_add()): `input = g`,
/// `src = g.gather(dim, index)` (zero outside the block read when src is larger than the index).
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::scatter_add(&array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]], 1, &array![[2, 0], [1, 1]], (2, 2))?;
/// assert_eq!(g.input, array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// assert_eq!(g.src, array![[3.0, 1.0], [5.0, 5.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_add<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src_shape: Sh,
) -> Result<ScatterGrad<T, DG, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: ndarray::IntoDimension,
{
    let op = "grad::scatter_add";
    let src_shape = src_shape.into_dimension();
    let idx = index.view().into_dyn();
    let d = check_scatter_grad(op, grad_out.shape(), dim, &idx, Some(src_shape.slice()))?;
    let input = crate::ops::try_to_owned(op, grad_out)?;
    let src = src_grad(op, grad_out, dim, index, src_shape, d)?;
    Ok(ScatterGrad { input, src })
}

/// The gradients of [`scatter_reduce()`](crate::scatter_reduce()) with respect to `input` and
/// `src`; `result` is the forward's output. Same as [`scatter_reduce_with`] with
/// [`Parity::Correct`].
///
/// - `Sum`: `input = g`, `src = g.gather(dim, index)`.
/// - `Mean`: both divided by the contributor count of their output element.
/// - `Amax`/`Amin`: the gradient of an output element is split evenly among the contributors equal
///   to the result (self included only when `include_self`).
/// - `Prod`: `g * result / value` for a nonzero value; in a group with exactly one zero, that zero
///   gets the exact product of the others; with two or more zeros, every contributor gets zero.
///
/// With `include_self = false`, `input`'s gradient is zero at every position the index refers to
/// (self did not contribute there). Positions no index refers to pass `g` through.
///
/// **Differs from PyTorch** (each case tested): an excluded self equal to the result takes no share
/// of an `amax`/`amin` gradient (PyTorch gives it a share, then drops it: `self = [3, 5]`,
/// `src = [3, 1]`, `index = [0, 0]` → PyTorch `src.grad = [0.5, 0]`, here `[1, 0]`); src may be
/// larger than the index; the `max`/`min` names work; non-finite inputs at unreferenced positions
/// pass `g` through instead of giving NaN.
///
/// ```
/// use gather::{grad, Reduce};
/// use ndarray::array;
/// // torch_semantics.md §A.3: prod with one zero in the group.
/// let (x, idx, src) = (array![2.0f64], array![0, 0, 0], array![3.0f64, 0.0, 4.0]);
/// let out = gather::scatter_reduce(&x, 0, &idx, &src, Reduce::Prod, true)?;
/// let g = grad::scatter_reduce(&array![1.0], &x, 0, &idx, &src, Reduce::Prod, true, &out)?;
/// assert_eq!(g.src, array![0.0, 24.0, 0.0]);
///
/// // mean, include_self = false: self.grad is 0 where written, src shares g / count.
/// let (x, idx, src) = (array![2.0f64, 0.0, 5.0, 7.0], array![0, 0, 1, 1, 1], array![3.0, 4.0, 0.0, 6.0, 0.0]);
/// let out = gather::scatter_reduce(&x, 0, &idx, &src, Reduce::Mean, false)?;
/// let g = grad::scatter_reduce(&array![10.0, 20.0, 30.0, 40.0], &x, 0, &idx, &src, Reduce::Mean, false, &out)?;
/// assert_eq!(g.input, array![0.0, 0.0, 30.0, 40.0]);
/// assert_eq!(g.src, array![5.0, 5.0, 20.0 / 3.0, 20.0 / 3.0, 20.0 / 3.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    result: &ArrayBase<SR, D>,
) -> Result<ScatterGrad<T, D, DS>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
    SX: Data<Elem = T>,
    SR: Data<Elem = T>,
{
    scatter_reduce_with(
        grad_out,
        input,
        dim,
        index,
        src,
        reduce,
        include_self,
        result,
        Parity::Correct,
    )
}

/// [`scatter_reduce`](fn@scatter_reduce)'s gradients, with the choice of [`Parity`]:
/// `Parity::PyTorch` gives PyTorch 2.15's numbers, including its `include_self = false` tie bug.
///
/// ```
/// use gather::{grad::{self, Parity}, Reduce};
/// use ndarray::array;
/// let (x, idx, src) = (array![3.0f64, 5.0], array![0, 0], array![3.0f64, 1.0]);
/// let out = gather::scatter_reduce(&x, 0, &idx, &src, Reduce::Amax, false)?;
/// let g = array![1.0, 1.0];
/// let torch = grad::scatter_reduce_with(&g, &x, 0, &idx, &src, Reduce::Amax, false, &out, Parity::PyTorch)?;
/// assert_eq!((torch.input, torch.src), (array![0.0, 1.0], array![0.5, 0.0]));
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce_with<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    result: &ArrayBase<SR, D>,
    parity: Parity,
) -> Result<ScatterGrad<T, D, DS>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
    SX: Data<Elem = T>,
    SR: Data<Elem = T>,
{
    reduce_grad(
        "grad::scatter_reduce",
        GradOutputOf::ScatterReduce,
        grad_out,
        input,
        dim,
        index,
        src,
        reduce,
        include_self,
        result,
        parity,
    )
}

/// The gradients of the legacy `scatter(..., reduce=)` with a src tensor (`scatter_reduce` with
/// `Sum`/`Prod` and `include_self = true`), which PyTorch does not differentiate: `Add` has `scatter_add`'s gradient,
/// `Multiply` that of `scatter_reduce(prod, include_self = true)`.
///
/// ```
/// use gather::{grad, ops::scatter::LegacyReduce};
/// use ndarray::array;
/// let (x, idx, src) = (array![2.0f64, 1.0], array![0, 0], array![3.0f64, 5.0]);
/// let out = gather::scatter_reduce(&x, 0, &idx, &src, gather::Reduce::Prod, true)?;
/// assert_eq!(out, array![30.0, 1.0]);
/// let g = grad::scatter_legacy(&array![1.0, 1.0], &x, 0, &idx, &src, LegacyReduce::Multiply, &out)?;
/// assert_eq!((g.input, g.src), (array![15.0, 1.0], array![10.0, 6.0]));
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_legacy<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: LegacyReduce,
    result: &ArrayBase<SR, D>,
) -> Result<ScatterGrad<T, D, DS>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
    SX: Data<Elem = T>,
    SR: Data<Elem = T>,
{
    reduce_grad(
        "grad::scatter_legacy",
        GradOutputOf::Scatter,
        grad_out,
        input,
        dim,
        index,
        src,
        reduce.into(),
        true,
        result,
        Parity::Correct,
    )
}

/// The gradient of the legacy `scatter(..., value, reduce=)` (`scatter_reduce` of a value with
/// `Sum`/`Prod` and `include_self = true`) with respect to
/// `input` (the value is a constant): `Add` passes `g` through; `Multiply` gives
/// `g * value^k`, `k` the number of times the element was multiplied.
///
/// ```
/// use gather::{grad, ops::scatter::LegacyReduce};
/// use ndarray::array;
/// let x = array![2.0f32, 2.0];
/// let out = gather::scatter_reduce(&x, 0, &array![1, 1], 5.0, gather::Reduce::Prod, true)?;
/// let g = grad::scatter_value_legacy(&array![1.0f32, 1.0], &x, 0, &array![1, 1], 5.0, LegacyReduce::Multiply, &out)?;
/// assert_eq!(g, array![1.0, 25.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_value_legacy<T, S, D, I, SI, DI, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    value: T,
    reduce: LegacyReduce,
    result: &ArrayBase<SR, D>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SX: Data<Elem = T>,
    SR: Data<Elem = T>,
{
    let op = "grad::scatter_value_legacy";
    let src = crate::dims::splat(&value, index.shape());
    let g = reduce_grad(
        op,
        GradOutputOf::Scatter,
        grad_out,
        input,
        dim,
        index,
        &src,
        reduce.into(),
        true,
        result,
        Parity::Correct,
    )?;
    Ok(g.input)
}

/// The shared core of the reduction gradients: checks, then the formulas in the wide type.
#[allow(clippy::too_many_arguments)]
fn reduce_grad<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    op: &str,
    output: GradOutputOf,
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    result: &ArrayBase<SR, D>,
    parity: Parity,
) -> Result<ScatterGrad<T, D, DS>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
    SX: Data<Elem = T>,
    SR: Data<Elem = T>,
{
    let idx = index.view().into_dyn();
    let d = check_scatter_grad(op, input.shape(), dim, &idx, Some(src.shape()))?;
    // The legacy gradients differentiate scatter(reduce=...), not scatter_reduce.
    check_grad_output(op, output, grad_out.shape(), input.shape())?;
    check_shape(op, "result", result.shape(), "input", input.shape())?;
    let g = widen(grad_out);
    let x = widen(input);
    let r = widen(result);
    let (gi, gs) = match d {
        None => (unreferenced_grad(&g, &x, &r, reduce, parity), None),
        Some(d) => {
            let idx = view_nonempty(&idx);
            let s =
                crate::kernels::zip::map(&leading_block(view_nonempty(src), idx.shape()), |v| {
                    v.widen()
                });
            let (gi, gs) = reduce_core(&g, &x, d, &idx, &s, &r, reduce, include_self, parity)?;
            (gi, Some(gs))
        }
    };
    let input_grad = narrow_to::<T, D>(&gi, input.raw_dim());
    let src_grad = match gs {
        None => super::try_zeros(op, src.raw_dim())?,
        Some(gs) => {
            let gs: ArrayD<T> = crate::kernels::zip::map(&gs.view(), |&w| T::narrow(w));
            embed_leading(op, gs.view(), src.raw_dim())?
        }
    };
    Ok(ScatterGrad {
        input: input_grad,
        src: src_grad,
    })
}

/// The input gradient where nothing was scattered (an empty index).
fn unreferenced_grad<W: GradFloat<Wide = W> + Float>(
    g: &ArrayD<W>,
    x: &ArrayD<W>,
    r: &ArrayD<W>,
    reduce: Reduce,
    parity: Parity,
) -> ArrayD<W> {
    match (parity, reduce) {
        (Parity::Correct, _) | (_, Reduce::Sum | Reduce::Mean) => g.clone(),
        (Parity::PyTorch, Reduce::Amax | Reduce::Amin) => {
            map3(&g.view(), &x.view(), &r.view(), |&g, &x, &r| {
                let e = if x == r { W::one() } else { W::zero() };
                e * (g / e)
            })
        }
        (Parity::PyTorch, Reduce::Prod) => map2(&g.view(), &x.view(), |&g, &x| {
            let m = if x == W::zero() { W::one() } else { x };
            g * m / m
        }),
    }
}

fn mask<W: Float>(b: bool) -> W {
    if b { W::one() } else { W::zero() }
}

/// The formulas of `scatter_reduce_backward` (FunctionsManual.cpp), in the wide type `W`, on
/// 1-d-if-scalar views: `g`, `x`, `r` have the input's shape, `idx` and `s` (the block of src that
/// was read) the index's. Returns `(d input, d src block)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_core<W: GradFloat<Wide = W> + Float, I: IndexElem>(
    g: &ArrayD<W>,
    x: &ArrayD<W>,
    d: usize,
    idx: &ArrayView<'_, I, IxDyn>,
    s: &ArrayD<W>,
    r: &ArrayD<W>,
    reduce: Reduce,
    include_self: bool,
    parity: Parity,
) -> Result<(ArrayD<W>, ArrayD<W>)> {
    let dim = d as isize;
    let (mut gi, gs) = match reduce {
        Reduce::Sum => (g.clone(), crate::gather(g, dim, idx)?),
        Reduce::Mean => {
            let n = counts(x.raw_dim(), dim, idx, include_self)?;
            let gi = map2(&g.view(), &n.view(), |&g, &n| {
                g / W::from(n.max(1)).expect("count fits a float")
            });
            let gs = crate::gather(&gi, dim, idx)?;
            (gi, gs)
        }
        Reduce::Amax | Reduce::Amin => {
            let value = crate::gather(r, dim, idx)?;
            let mut self_is = map2(&x.view(), &r.view(), |&x, &r| mask::<W>(x == r));
            if !include_self && parity == Parity::Correct {
                // An excluded self did not contribute: it takes no share of the gradient.
                crate::scatter_inplace(&mut self_is, dim, idx, W::zero())?;
            }
            let src_is = map2(&s.view(), &value.view(), |&s, &v| mask::<W>(s == v));
            let n = crate::scatter_add(&self_is, dim, idx, &src_is)?;
            let share = map2(&g.view(), &n.view(), |&g, &n| g / n);
            let gi = map2(&self_is.view(), &share.view(), |&e, &sh| e * sh);
            let gs = crate::gather(&share, dim, idx)? * &src_is;
            (gi, gs)
        }
        Reduce::Prod => {
            let masked_self = map(&x.view(), |&v| if v == W::zero() { W::one() } else { v });
            let msr = crate::scatter_reduce(&masked_self, dim, idx, s, Reduce::Prod, include_self)?;
            let gi = map3(&g.view(), &msr.view(), &masked_self.view(), |&g, &p, &m| {
                g * p / m
            });
            // How many src zeros land on each output element, seen from each src position.
            let zero_f = map(&s.view(), |&v| mask::<W>(v == W::zero()));
            let zeros_at = crate::scatter_add(&Array::zeros(x.raw_dim()), dim, idx, &zero_f)?;
            let zeros_seen = crate::gather(&zeros_at, dim, idx)?;
            let single = map2(&s.view(), &zeros_seen.view(), |&v, &z| {
                v == W::zero() && z == W::one()
            });
            let masked_src = map2(
                &s.view(),
                &single.view(),
                |&v, &one| if one { W::one() } else { v },
            );
            let msrc = crate::scatter_reduce(x, dim, idx, &masked_src, Reduce::Prod, include_self)?;
            let with_zero = crate::gather(&(g * &msrc), dim, idx)?;
            let plain = crate::gather(&(g * r), dim, idx)?;
            let mut gs = plain;
            Zip::from(&mut gs)
                .and(s)
                .and(&single)
                .and(&with_zero)
                .for_each(|o, &v, &one, &wz| {
                    *o = if one {
                        wz
                    } else {
                        *o / if v == W::zero() { W::one() } else { v }
                    }
                });
            (gi, gs)
        }
    };
    if !include_self {
        crate::scatter_inplace(&mut gi, dim, idx, W::zero())?;
    }
    if parity == Parity::Correct && matches!(reduce, Reduce::Amax | Reduce::Amin | Reduce::Prod) {
        // Output elements no index refers to are `x` itself: the gradient passes through (the
        // formulas above give NaN there for a non-finite `x`).
        let mut hit = ArrayD::from_elem(x.raw_dim(), false);
        crate::scatter_inplace(&mut hit, dim, idx, true)?;
        Zip::from(&mut gi).and(&hit).and(g).for_each(|o, &h, &g| {
            if !h {
                *o = g
            }
        });
    }
    Ok((gi, gs))
}

/// The contributor count of every output element: hits, plus one when self is included.
fn counts<I: IndexElem>(
    shape: IxDyn,
    dim: isize,
    idx: &ArrayView<'_, I, IxDyn>,
    include_self: bool,
) -> Result<ArrayD<u64>> {
    let base = ArrayD::from_elem(shape, include_self as u64);
    let ones = crate::dims::splat(&1u64, idx.shape());
    crate::scatter_add(&base, dim, idx, &ones)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use half::f16;
    use ndarray::{Array1, Array2, arr0, array};

    fn sr(
        x: &Array1<f64>,
        idx: &Array1<i64>,
        src: &Array1<f64>,
        g: &Array1<f64>,
        reduce: Reduce,
        incl: bool,
    ) -> ScatterGrad<f64, ndarray::Ix1, ndarray::Ix1> {
        let out = crate::scatter_reduce(x, 0, idx, src, reduce, incl).unwrap();
        scatter_reduce(g, x, 0, idx, src, reduce, incl, &out).unwrap()
    }

    #[test]
    fn amax_ties_split_evenly_including_self() {
        // torch_semantics.md §A.3.
        let g = sr(
            &array![5.0, 1.0],
            &array![0, 0, 0],
            &array![5.0, 5.0, 1.0],
            &array![12.0, 1.0],
            Reduce::Amax,
            true,
        );
        assert_eq!(g.input, array![4.0, 1.0]);
        assert_eq!(g.src, array![4.0, 4.0, 0.0]);
    }

    #[test]
    fn excluded_self_takes_no_share_of_a_tie_unlike_pytorch() {
        let (x, idx, src) = (array![3.0, 5.0], array![0i64, 0], array![3.0, 1.0]);
        let g = array![1.0, 1.0];
        for reduce in [Reduce::Amax, "max".parse().unwrap()] {
            let out = crate::scatter_reduce(&x, 0, &idx, &src, reduce, false).unwrap();
            let ours = scatter_reduce(&g, &x, 0, &idx, &src, reduce, false, &out).unwrap();
            assert_eq!(ours.src, array![1.0, 0.0]);
            assert_eq!(ours.input, array![0.0, 1.0]);
            let torch =
                scatter_reduce_with(&g, &x, 0, &idx, &src, reduce, false, &out, Parity::PyTorch)
                    .unwrap();
            assert_eq!(torch.src, array![0.5, 0.0]);
        }
        // amin, the mirror case.
        let (x, src) = (array![1.0, 5.0], array![1.0, 4.0]);
        let out = crate::scatter_reduce(&x, 0, &idx, &src, Reduce::Amin, false).unwrap();
        let ours = scatter_reduce(&g, &x, 0, &idx, &src, Reduce::Amin, false, &out).unwrap();
        assert_eq!(ours.src, array![1.0, 0.0]);
    }

    #[test]
    fn prod_with_zeros_gives_exact_products() {
        // One zero in src: it gets the product of the others (2 * 3 * 4).
        let g = sr(
            &array![2.0],
            &array![0, 0, 0],
            &array![3.0, 0.0, 4.0],
            &array![1.0],
            Reduce::Prod,
            true,
        );
        assert_eq!(g.src, array![0.0, 24.0, 0.0]);
        assert_eq!(g.input, array![0.0]);
        // A zero in self: self gets the product of src.
        let g = sr(
            &array![0.0],
            &array![0, 0],
            &array![3.0, 4.0],
            &array![1.0],
            Reduce::Prod,
            true,
        );
        assert_eq!(g.input, array![12.0]);
        assert_eq!(g.src, array![0.0, 0.0]);
        // Two zeros: everything zero.
        let g = sr(
            &array![2.0],
            &array![0, 0, 0],
            &array![0.0, 5.0, 0.0],
            &array![1.0],
            Reduce::Prod,
            true,
        );
        assert_eq!(g.src, array![0.0, 0.0, 0.0]);
        assert_eq!(g.input, array![0.0]);
        // Excluded self: one zero in src gets the product of the other src only.
        let g = sr(
            &array![7.0, 9.0],
            &array![0, 0, 0],
            &array![3.0, 0.0, 4.0],
            &array![2.0, 1.0],
            Reduce::Prod,
            false,
        );
        assert_eq!(g.src, array![0.0, 24.0, 0.0]);
        assert_eq!(g.input, array![0.0, 1.0]);
    }

    #[test]
    fn mean_matches_pytorch_examples() {
        // torch_semantics.md §A.3: self [2,0,5,7], idx [0,0,1,1,1], src [3,4,0,6,0], grad [10,20,30,40].
        let (x, idx, src) = (
            array![2.0, 0.0, 5.0, 7.0],
            array![0i64, 0, 1, 1, 1],
            array![3.0, 4.0, 0.0, 6.0, 0.0],
        );
        let g = array![10.0, 20.0, 30.0, 40.0];
        let incl = sr(&x, &idx, &src, &g, Reduce::Mean, true);
        assert_eq!(incl.input, array![10.0 / 3.0, 5.0, 30.0, 40.0]);
        assert_eq!(incl.src, array![10.0 / 3.0, 10.0 / 3.0, 5.0, 5.0, 5.0]);
        let excl = sr(&x, &idx, &src, &g, Reduce::Mean, false);
        assert_eq!(excl.input, array![0.0, 0.0, 30.0, 40.0]);
        assert_eq!(
            excl.src,
            array![5.0, 5.0, 20.0 / 3.0, 20.0 / 3.0, 20.0 / 3.0]
        );
    }

    #[test]
    fn src_larger_than_index_gets_zero_outside_the_block_read() {
        let x = Array2::<f64>::zeros((2, 3));
        let src = Array2::from_shape_fn((3, 4), |(a, b)| (a * 4 + b) as f64 + 1.0);
        let idx = array![[2i64, 0]];
        let g = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let out = crate::scatter_reduce(&x, 1, &idx, &src, Reduce::Sum, true).unwrap();
        let gr = scatter_reduce(&g, &x, 1, &idx, &src, Reduce::Sum, true, &out).unwrap();
        let mut want = Array2::<f64>::zeros((3, 4));
        want[[0, 0]] = 3.0;
        want[[0, 1]] = 1.0;
        assert_eq!(gr.src, want);
        let gs = scatter(&g, 1, &idx, (3, 4)).unwrap();
        assert_eq!(gs.src, want);
        assert_eq!(gs.input, array![[0.0, 2.0, 0.0], [4.0, 5.0, 6.0]]);
    }

    #[test]
    fn unreferenced_non_finite_self_passes_the_gradient_through() {
        let idx = array![1i64];
        let src = array![3.0];
        for (x0, reduce) in [(f64::INFINITY, Reduce::Prod), (f64::NAN, Reduce::Amax)] {
            let x = array![x0, 2.0];
            let g = sr(&x, &idx, &src, &array![1.0, 1.0], reduce, true);
            assert_eq!(g.input[0], 1.0, "{reduce:?}");
            let out = crate::scatter_reduce(&x, 0, &idx, &src, reduce, true).unwrap();
            let torch = scatter_reduce_with(
                &array![1.0, 1.0],
                &x,
                0,
                &idx,
                &src,
                reduce,
                true,
                &out,
                Parity::PyTorch,
            )
            .unwrap();
            assert!(torch.input[0].is_nan(), "{reduce:?}");
        }
    }

    #[test]
    fn zero_d_and_empty_index() {
        let g = scatter_add(&arr0(2.0f64), 0, &arr0(0i64), IxDyn(&[])).unwrap();
        assert_eq!(g.src, arr0(2.0).into_dyn());
        let x = array![1.0f64, 2.0];
        let idx = Array2::<i64>::zeros((0, 3));
        let src = array![5.0f64];
        let g = scatter_reduce(
            &array![1.0, 1.0],
            &x,
            0,
            &idx,
            &src,
            Reduce::Amax,
            false,
            &x,
        )
        .unwrap();
        assert_eq!((g.input, g.src), (array![1.0, 1.0], array![0.0]));
    }

    #[test]
    fn half_precision_reduces_in_f32() {
        let n = 2999;
        let x = Array1::from_elem(1, f16::ZERO);
        let idx = Array1::<i64>::zeros(n);
        let src = Array1::from_elem(n, f16::ONE);
        let out = crate::scatter_reduce(&x, 0, &idx, &src, Reduce::Mean, true).unwrap();
        let g = scatter_reduce(
            &array![f16::from_f32(3000.0)],
            &x,
            0,
            &idx,
            &src,
            Reduce::Mean,
            true,
            &out,
        )
        .unwrap();
        // 3000 / 3000 contributors = 1 for each: the count is not rounded to f16 (2048).
        assert!(g.src.iter().all(|&v| v == f16::ONE));
    }

    #[test]
    fn legacy_value_multiply_gradient() {
        let x = array![2.0f64, 3.0];
        let out =
            crate::ops::scatter::scatter_legacy(&x, 0, &array![0i64], 4.0, LegacyReduce::Multiply)
                .unwrap();
        let g = scatter_value_legacy(
            &array![1.0, 1.0],
            &x,
            0,
            &array![0i64],
            4.0,
            LegacyReduce::Multiply,
            &out,
        )
        .unwrap();
        assert_eq!(g, array![4.0, 1.0]);
    }

    #[test]
    fn shape_errors_are_reported() {
        let x = array![1.0f64, 2.0];
        let e = scatter_reduce(
            &array![1.0, 1.0, 1.0],
            &x,
            0,
            &array![0i64],
            &array![1.0],
            Reduce::Sum,
            true,
            &x,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = scatter(&array![1.0f64, 1.0], 0, &array![0i64, 1], [1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = scatter_add(&array![1.0f64, 1.0], 0, &array![2i64], [1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }
}
