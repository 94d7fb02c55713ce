//! Gradients of `index_select`, `index_add`, `index_copy`, `index_fill` and `index_reduce`: the
//! whole-slice versions of gather's and scatter's.
//!
//! ```text
//! index_select(input, dim=0, index=[2, 0, 2])        d input row j = sum of g rows i with index[i] = j
//!
//!  g (output's shape)   index      d input (input's shape)
//!  │ 1 1 │                2        │ 2 2 │ ← g row 1
//!  │ 2 2 │                0        │ 0 0 │ ← never selected
//!  │ 3 3 │                2        │ 4 4 │ ← g rows 0 + 2
//! ```
//!
//! `index_add`/`index_copy`/`index_reduce` give their `source` the slices of `g` that its slices
//! landed on (`g.index_select(dim, index)`, times `alpha` for `index_add`); `index_copy` and
//! `index_fill` zero `d input` on the slices they overwrote. With duplicate indices every
//! duplicate source slice of `index_copy` gets the gradient (as in PyTorch), although only the
//! last write survived. `index_reduce` follows `scatter_reduce` (see the [module docs](super)),
//! with the correct `include_self = false` tie rule by default.

use ndarray::{Array, ArrayBase, ArrayD, Axis, Data, Dimension, IntoDimension, IxDyn};
use num_traits::{One, Zero};

use super::output::{GradOutputOf, check_grad_output};
use super::scatter::reduce_core;
use super::{
    GradFloat, Parity, SourceGrad, check_shape, narrow_to, nonempty, reshape_to, try_zeros,
    view_nonempty, widen, with_spread_index,
};
use crate::dims::normalize_dim;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::index::{check_dim_and_vector, check_select_shapes};
use crate::ops::scatter::Reduce;

/// The shape of `index_select(x, dim, index)`'s output: `x`'s shape with `n` at `dim` (a 0-d `x`
/// gives a 0-d output).
fn selected_shape(x_shape: &[usize], d: usize, n: usize) -> Vec<usize> {
    let mut s = x_shape.to_vec();
    if !s.is_empty() {
        s[d] = n;
    }
    s
}

/// The checks shared by the gradients of the writing ops: `dim`, a 0-d/1-d index in bounds for
/// `grad_shape` (the input's shape) under `bounds`. Returns the normalised dim.
fn check_write<I: IndexElem>(
    op: &str,
    grad_shape: &[usize],
    dim: isize,
    index: &ndarray::ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
) -> Result<usize> {
    let d = check_dim_and_vector(op, grad_shape, dim, index.shape(), I::DTYPE)?;
    let size = nonempty(grad_shape)[d];
    check_bounds(op, index, d, size, bounds)?;
    Ok(d)
}

/// The gradient of [`index_select()`](crate::index_select()) with respect to `input`:
/// `zeros(input_shape).index_add(dim, index, grad_out)`. Slices selected several times get the
/// sum of their gradients (`f16`/`bf16` added in `f32`).
///
/// ```
/// use ndarray::array;
/// let g = array![[1.0f64, 1.0], [2.0, 2.0], [3.0, 3.0]];
/// let dx = gather::grad::index_select(&g, (3, 2), 0, &array![2, 0, 2])?;
/// assert_eq!(dx, array![[2.0, 2.0], [0.0, 0.0], [4.0, 4.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn index_select<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::index_select";
    let shape = input_shape.into_dimension();
    // Shapes before values, as every gradient checks them.
    let d = check_select_shapes(op, shape.slice(), dim, index.shape(), I::DTYPE)?;
    let want = selected_shape(shape.slice(), d, index.len());
    check_grad_output(op, GradOutputOf::IndexSelect, grad_out.shape(), &want)?;
    let idx = index.view().into_dyn();
    check_bounds(op, &idx, d, nonempty(shape.slice())[d], Bounds::Strict)?;
    let mut dx = try_zeros::<T, _>(op, shape)?;
    crate::index_add_inplace(&mut dx, dim, index, grad_out, T::narrow(One::one()))?;
    Ok(dx)
}

/// `g.index_select(dim, index)` reshaped to `source_shape`, times `alpha` when given.
fn source_grad<T, S, DG, I, SI, DI, DS>(
    op: &str,
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source_shape: DS,
    alpha: Option<T>,
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
    let mut sel = crate::index_select(grad_out, dim, index)?.into_dyn();
    // alpha 1 changes no value (1 * v rounds to v): no pass over the selection.
    if let Some(a) = alpha.map(T::widen).filter(|a| *a != num_traits::One::one()) {
        sel.mapv_inplace(|v| T::narrow(a * v.widen()));
    }
    if sel.len() != source_shape.size() {
        let d = normalize_dim(op, dim, grad_out.ndim())?;
        return Err(Error::shape(format!(
            "{op}: source has shape {} but the forward's source must have {} elements (self {}, {} indices along dim {d})",
            fmt_shape(source_shape.slice()),
            sel.len(),
            fmt_shape(grad_out.shape()),
            index.len()
        ))
        .with_hint("pass the shape of the source the forward call took"));
    }
    reshape_to(op, sel, source_shape)
}

/// The gradients of [`index_add()`](crate::index_add()): `input = g`,
/// `source = alpha * g.index_select(dim, index)`.
///
/// `source_shape` is the forward's source shape (the input's with the number of indices at
/// `dim`). With duplicate indices every source slice gets the gradient of the slice it was added
/// to.
///
/// ```
/// use ndarray::array;
/// // torch_semantics.md §A.5: alpha 3, duplicate index [0, 0]: both source rows get 3 * g[0].
/// let g = gather::grad::index_add(&array![[1.0f64, 2.0], [5.0, 6.0]], 0, &array![0, 0], (2, 2), 3.0)?;
/// assert_eq!(g.source, array![[3.0, 6.0], [3.0, 6.0]]);
/// assert_eq!(g.input, array![[1.0, 2.0], [5.0, 6.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn index_add<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source_shape: Sh,
    alpha: T,
) -> Result<SourceGrad<T, DG, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::index_add";
    check_write(
        op,
        grad_out.shape(),
        dim,
        &index.view().into_dyn(),
        Bounds::Strict,
    )?;
    let source = source_grad(
        op,
        grad_out,
        dim,
        index,
        source_shape.into_dimension(),
        Some(alpha),
    )?;
    let input = crate::ops::try_to_owned(op, grad_out)?;
    Ok(SourceGrad { input, source })
}

/// The gradients of [`index_copy()`](crate::index_copy()): `input = g.index_fill(dim, index, 0)`
/// (the overwritten slices did not reach the output), `source = g.index_select(dim, index)`.
///
/// With duplicate indices every duplicate source slice gets the gradient, as in PyTorch, although
/// only the last write survived.
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::index_copy(&array![1.0f32, 2.0, 3.0], 0, &array![2, 0], [2])?;
/// assert_eq!(g.input, array![0.0, 2.0, 0.0]);
/// assert_eq!(g.source, array![3.0, 1.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn index_copy<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source_shape: Sh,
) -> Result<SourceGrad<T, DG, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::index_copy";
    check_write(
        op,
        grad_out.shape(),
        dim,
        &index.view().into_dyn(),
        Bounds::Strict,
    )?;
    let source = source_grad(
        op,
        grad_out,
        dim,
        index,
        source_shape.into_dimension(),
        None,
    )?;
    let input = crate::index_fill(grad_out, dim, index, T::narrow(Zero::zero()))?;
    Ok(SourceGrad { input, source })
}

/// The gradient of [`index_fill()`](crate::index_fill()) with respect to `input`:
/// `g.index_fill(dim, index, 0)`. Negative index values count from the end, as in the forward.
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::index_fill(&array![[1.0f64, 2.0, 3.0]], 1, &array![-1])?;
/// assert_eq!(g, array![[1.0, 2.0, 0.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn index_fill<T, S, D, I, SI, DI>(
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
    let op = "grad::index_fill";
    check_write(
        op,
        grad_out.shape(),
        dim,
        &index.view().into_dyn(),
        Bounds::Wrap,
    )?;
    crate::index_fill(grad_out, dim, index, T::narrow(Zero::zero()))
}

/// The gradient of [`index_fill()`](crate::index_fill())'s fill value (PyTorch's Tensor-value
/// overload): the sum of `g` over the filled slices, each slice counted once however often the
/// index names it. Summed in `f32` for `f16`/`bf16`.
///
/// ```
/// use ndarray::array;
/// let g = array![[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// // Rows 1 and 2 were filled (row 1 named twice, counted once).
/// assert_eq!(gather::grad::index_fill_value(&g, 0, &array![1, 1, -1])?, 18.0);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn index_fill_value<T, S, D, I, SI, DI>(
    grad_out: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<T>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "grad::index_fill_value";
    let d = check_write(
        op,
        grad_out.shape(),
        dim,
        &index.view().into_dyn(),
        Bounds::Wrap,
    )?;
    let g = view_nonempty(grad_out);
    let size = g.shape()[d];
    let mut filled = vec![false; size];
    for v in index.iter() {
        if let Some(p) = Bounds::Wrap.map(v.to_i64(), size) {
            filled[p] = true;
        }
    }
    let mut sum = <T::Wide as Zero>::zero();
    for (j, slice) in g.axis_iter(Axis(d)).enumerate() {
        if filled[j] {
            sum = slice.iter().fold(sum, |acc, v| acc + v.widen());
        }
    }
    Ok(T::narrow(sum))
}

/// The gradients of [`index_reduce()`](crate::index_reduce()) with respect to `input` and
/// `source`; `result` is the forward's output. Same as [`index_reduce_with`] with
/// [`Parity::Correct`].
///
/// The formulas of [`scatter_reduce`](fn@super::scatter_reduce) with the index spread over the
/// slices: `mean` divides by the contributor count, `amax`/`amin` split the gradient among the
/// contributors equal to the result, `prod` gives a lone zero the exact product of the others.
/// With `include_self = false` the input's gradient is zero on every indexed slice.
///
/// **Differs from PyTorch:** an excluded self equal to the result takes no share of an
/// `amax`/`amin` gradient (PyTorch's `index_reduce_backward` has the same tie bug as
/// `scatter_reduce`'s); non-finite inputs on slices no index names pass `g` through.
///
/// ```
/// use gather::{grad, Reduce};
/// use ndarray::array;
/// // amax, include_self = false: self row 0 ties with source row 0, but was excluded.
/// let (x, idx, src) = (array![[3.0f64], [5.0]], array![0, 0], array![[3.0f64], [1.0]]);
/// let out = gather::index_reduce(&x, 0, &idx, &src, Reduce::Amax, false)?;
/// let g = grad::index_reduce(&array![[1.0], [1.0]], &x, 0, &idx, &src, Reduce::Amax, false, &out)?;
/// assert_eq!(g.source, array![[1.0], [0.0]]); // PyTorch: [[0.5], [0]]
/// assert_eq!(g.input, array![[0.0], [1.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn index_reduce<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    result: &ArrayBase<SR, D>,
) -> Result<SourceGrad<T, D, DS>>
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
    index_reduce_with(
        grad_out,
        input,
        dim,
        index,
        source,
        reduce,
        include_self,
        result,
        Parity::Correct,
    )
}

/// [`index_reduce`](fn@index_reduce)'s gradients, with the choice of [`Parity`]
/// (`Parity::PyTorch` reproduces PyTorch's `include_self = false` tie bug).
///
/// ```
/// use gather::{grad::{self, Parity}, Reduce};
/// use ndarray::array;
/// let (x, idx, src) = (array![3.0f64, 5.0], array![0, 0], array![3.0f64, 1.0]);
/// let out = gather::index_reduce(&x, 0, &idx, &src, Reduce::Amax, false)?;
/// let g = grad::index_reduce_with(&array![1.0, 1.0], &x, 0, &idx, &src, Reduce::Amax, false, &out, Parity::PyTorch)?;
/// assert_eq!(g.source, array![0.5, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn index_reduce_with<T, S, D, I, SI, DI, SS, DS, SX, SR>(
    grad_out: &ArrayBase<S, D>,
    input: &ArrayBase<SX, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    result: &ArrayBase<SR, D>,
    parity: Parity,
) -> Result<SourceGrad<T, D, DS>>
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
    let op = "grad::index_reduce";
    if reduce == Reduce::Sum {
        return Err(Error::invalid(format!(
            "{op}: Expected reduce to be one of prod, mean, amax or amin but got sum."
        ))
        .with_hint("index_reduce has no sum; the gradient of index_add is grad::index_add"));
    }
    let idx = index.view().into_dyn();
    let d = check_write(op, input.shape(), dim, &idx, Bounds::Strict)?;
    let want = selected_shape(input.shape(), d, index.len());
    check_shape(
        op,
        "source",
        source.shape(),
        "input with one slice per index at dim",
        &want,
    )?;
    check_grad_output(
        op,
        GradOutputOf::IndexReduce,
        grad_out.shape(),
        input.shape(),
    )?;
    check_shape(op, "result", result.shape(), "input", input.shape())?;
    let g = widen(grad_out);
    let x = widen(input);
    let r = widen(result);
    let s: ArrayD<T::Wide> = widen(source);
    let shape = s.shape().to_vec();
    let (gi, gs) = with_spread_index(idx, d, &shape, |spread| {
        reduce_core(&g, &x, d, &spread, &s, &r, reduce, include_self, parity)
    })
    .ok_or_else(|| {
        Error::shape(format!(
            "{op}: cannot spread index {} over source {}",
            fmt_shape(index.shape()),
            fmt_shape(source.shape())
        ))
    })??;
    Ok(SourceGrad {
        input: narrow_to::<T, D>(&gi, input.raw_dim()),
        source: narrow_to::<T, DS>(&gs, source.raw_dim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{arr0, array};

    #[test]
    fn index_select_duplicates_accumulate() {
        // torch_semantics.md §A.4: index [0, 0, 2] → [2, 0, 1].
        let dx = index_select(&array![1.0f64, 1.0, 1.0], [3], 0, &array![0i64, 0, 2]).unwrap();
        assert_eq!(dx, array![2.0, 0.0, 1.0]);
        // 0-d input, one index, 0-d output.
        let dx = index_select(&arr0(4.0f32), IxDyn(&[]), 0, &array![0i64]).unwrap();
        assert_eq!(dx, arr0(4.0).into_dyn());
    }

    #[test]
    fn index_reduce_mean_and_prod_match_pytorch_formulas() {
        // self [[1,2],[3,4],[5,6]], idx [0,0,2], src [[10,-1],[20,-2],[30,-3]], ones grad.
        let x = array![[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]];
        let idx = array![0i64, 0, 2];
        let src = array![[10.0f64, -1.0], [20.0, -2.0], [30.0, -3.0]];
        let g = Array::ones((3, 2));
        let out = crate::index_reduce(&x, 0, &idx, &src, Reduce::Mean, true).unwrap();
        let r = index_reduce(&g, &x, 0, &idx, &src, Reduce::Mean, true, &out).unwrap();
        let t = 1.0 / 3.0;
        assert_eq!(r.input, array![[t, t], [1.0, 1.0], [0.5, 0.5]]);
        assert_eq!(r.source, array![[t, t], [t, t], [0.5, 0.5]]);
        let out = crate::index_reduce(&x, 0, &idx, &src, Reduce::Prod, false).unwrap();
        let r = index_reduce(&g, &x, 0, &idx, &src, Reduce::Prod, false, &out).unwrap();
        assert_eq!(r.input, array![[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]);
        assert_eq!(r.source, array![[20.0, -2.0], [10.0, -1.0], [1.0, 1.0]]);
    }

    #[test]
    fn index_copy_and_fill_zero_the_overwritten_slices() {
        let g = array![[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]];
        let r = index_copy(&g, 1, &array![1i64], (3, 1)).unwrap();
        assert_eq!(r.input, array![[1.0, 0.0], [3.0, 0.0], [5.0, 0.0]]);
        assert_eq!(r.source, array![[2.0], [4.0], [6.0]]);
        assert_eq!(
            index_fill(&g, 0, &array![-3i64]).unwrap(),
            array![[0.0, 0.0], [3.0, 4.0], [5.0, 6.0]]
        );
    }

    #[test]
    fn errors_are_reported_not_panics() {
        let g = array![[1.0f64, 2.0]];
        assert_eq!(
            index_add(&g, 0, &array![1i64], (1, 2), 1.0)
                .unwrap_err()
                .kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            index_add(&g, 0, &array![0i64], (2, 2), 1.0)
                .unwrap_err()
                .kind(),
            ErrorKind::ShapeMismatch
        );
        assert_eq!(
            index_copy(&g, 0, &array![[0i64]], (1, 2))
                .unwrap_err()
                .kind(),
            ErrorKind::RankMismatch
        );
        assert_eq!(
            index_select(&g, (2, 2), 0, &array![0i64, 1])
                .unwrap_err()
                .kind(),
            ErrorKind::ShapeMismatch
        );
        let x = array![1.0f64, 2.0];
        let e = index_reduce(&x, &x, 0, &array![0i64], &x, Reduce::Sum, true, &x).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
