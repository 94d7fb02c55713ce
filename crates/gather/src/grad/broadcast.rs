//! Gradients of the broadcasting ops of [`ops::broadcast`](crate::ops::broadcast): those of
//! `gather`/`scatter` on the expanded arrays, summed back over the axes that were broadcast (the
//! gradient of `expand` is a sum).
//!
//! ```text
//! gather_broadcast(input [1, 3], dim=1, index [2, 1])     d input[0][index[b][0]] += g[b][0]
//!
//!  g [2, 1]     index [2, 1]     d input [1, 3]
//!  ┌───┐        ┌───┐            ┌───┬───┬─────┐
//!  │ 1 │   →    │ 2 │   →        │ 0 │ 0 │ 1+2 │   both rows read input[0][2] (input
//!  │ 2 │   →    │ 2 │   →        └───┴───┴─────┘   was broadcast over them): their gradients add
//!  └───┘        └───┘
//!
//! scatter_add_broadcast(self [2, 2], dim=0, index [2, 1], src [1, 2])
//!                                    d self = g     d src[0][d] = Σ_e g[index[e][0]][d]
//!  g [2, 2]       index [2, 1]      d src [1, 2]
//!  ┌───┬───┐      ┌───┐             ┌─────┬─────┐
//!  │ 1 │ 2 │      │ 1 │      →      │ 3+3 │ 4+4 │   src was broadcast over both index rows,
//!  │ 3 │ 4 │      │ 1 │             └─────┴─────┘   each landed on self row 1
//!  └───┴───┘      └───┘
//! ```
//!
//! The sums over broadcast axes run in the wide type (`f32` for `f16`/`bf16`), which rounds once.

use ndarray::{Array, ArrayBase, ArrayD, Data, Dimension, IntoDimension, IxDyn};
use num_traits::Zero;

use super::output::{GradOutputOf, check_grad_output};
use super::scatter::ScatterGrad;
use super::{GradFloat, check_shape, narrow_to, sum_to, try_zeros, view_nonempty, widen};
use crate::dims::normalize_dim;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::broadcast::{gather_shapes, nonempty, scatter_extent};
use crate::ops::scatter::{Mode, Reduce, scatter_into};

fn broadcast_failed(op: &str, from: &[usize], to: &[usize]) -> Error {
    Error::shape(format!(
        "{op}: internal error: {} does not broadcast to {}",
        fmt_shape(from),
        fmt_shape(to)
    ))
}

/// The gradient of [`Options::gather`](crate::Options::gather) with respect to `input`:
/// gather's gradient (a `scatter_add` of `grad_out`) into the input as the forward saw it
/// (broadcast to the output's shape on every axis but `dim`), summed over the axes along which
/// the input was broadcast.
///
/// `grad_out` has the forward output's shape; `input_shape` is the forward input's shape. Where
/// the input was broadcast, the gradient is first accumulated at the broadcast shape (the
/// output's size on those axes, the input's on `dim`), then summed down.
///
/// ```
/// use ndarray::array;
/// let table = array![[1.0f64, 2.0, 3.0]]; // [1, 3], shared by the index's two rows
/// let idx = array![[2i64], [2]];
/// let out = gather::Options::new().broadcast(true).gather(&table, 1, &idx)?; // [[3], [3]]
/// let dx = gather::Options::new().broadcast(true).grad().gather(&array![[1.0f64], [2.0]], table.raw_dim(), 1, &idx)?;
/// assert_eq!(dx, array![[0.0, 0.0, 3.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn gather_broadcast<T, S, DG, I, SI, DI, Sh>(
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
    let op = "grad::gather_broadcast";
    let shape = input_shape.into_dimension();
    let d = normalize_dim(op, dim, shape.ndim())?;
    let xs = nonempty(shape.slice());
    let idx = view_nonempty(index);
    let (out_shape, x_shape) = gather_shapes(op, &xs, idx.shape(), d)?;
    let want: &[usize] = if index.ndim() == 0 { &[] } else { &out_shape };
    check_grad_output(op, GradOutputOf::GatherBroadcast, grad_out.shape(), want)?;
    let ib = idx
        .broadcast(IxDyn(&out_shape))
        .ok_or_else(|| broadcast_failed(op, idx.shape(), &out_shape))?;
    check_bounds(op, &ib, d, xs[d], Bounds::Strict)?;
    let g = widen(grad_out);
    let mut dx = try_zeros::<T::Wide, _>(op, IxDyn(&x_shape))?;
    scatter_into(
        op,
        dx.view_mut(),
        d as isize,
        ib,
        g.view(),
        false,
        Mode::Reduce(Reduce::Sum, true),
        Bounds::Strict,
    )?;
    let dx: ArrayD<T::Wide> = sum_to(dx, &xs);
    Ok(narrow_to::<T, _>(&dx, shape))
}

/// The checks of a broadcasting scatter plus the gradient's shape; the extent `E` and `dim`.
fn check_scatter_grad<I: IndexElem>(
    op: &str,
    grad_shape: &[usize],
    dim: isize,
    index: &ndarray::ArrayView<'_, I, IxDyn>,
    src_shape: &[usize],
) -> Result<(Vec<usize>, usize)> {
    let d = normalize_dim(op, dim, grad_shape.len())?;
    let gs = nonempty(grad_shape);
    let e = scatter_extent(op, &gs, index.shape(), Some(&nonempty(src_shape)), d)?;
    let ib = index
        .broadcast(IxDyn(&e))
        .ok_or_else(|| broadcast_failed(op, index.shape(), &e))?;
    check_bounds(op, &ib, d, gs[d], Bounds::Strict)?;
    Ok((e, d))
}

/// `g.gather(dim, index.expand(E))`, summed down to `src_shape` over src's broadcast axes.
fn src_grad<T, S, DG, Sh>(
    op: &str,
    grad_out: &ArrayBase<S, DG>,
    d: usize,
    index: ndarray::ArrayView<'_, impl IndexElem, IxDyn>,
    e: &[usize],
    src_shape: Sh,
) -> Result<Array<T, Sh>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    Sh: Dimension,
{
    let ss = nonempty(src_shape.slice());
    if e.iter().product::<usize>() == 0 {
        return try_zeros(op, src_shape);
    }
    let ib = index
        .broadcast(IxDyn(e))
        .ok_or_else(|| broadcast_failed(op, index.shape(), e))?;
    let g = view_nonempty(grad_out);
    let block = crate::gather(&g, d as isize, &ib)?;
    let w: ArrayD<T::Wide> = sum_to(widen(&block), &ss);
    Ok(narrow_to::<T, _>(&w, src_shape))
}

/// The gradients of [`Options::scatter_add`](crate::Options::scatter_add) with broadcasting:
/// `input = g`, `src = g.gather(dim, index.expand(E))` summed over src's broadcast axes.
///
/// ```
/// use ndarray::array;
/// // src [1, 2] was broadcast over both index rows; both landed on row 1.
/// let g = gather::Options::new().broadcast(true).grad().scatter_add(&array![[1.0f32, 2.0], [3.0, 4.0]], 0, &array![[1i64], [1]], (1, 2))?;
/// assert_eq!(g.input, array![[1.0, 2.0], [3.0, 4.0]]);
/// assert_eq!(g.src, array![[6.0, 8.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_add_broadcast<T, S, DG, I, SI, DI, Sh>(
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
    Sh: IntoDimension,
{
    let op = "grad::scatter_add_broadcast";
    let src_shape = src_shape.into_dimension();
    let idx = view_nonempty(index);
    let (e, d) = check_scatter_grad(op, grad_out.shape(), dim, &idx, src_shape.slice())?;
    let input = crate::ops::try_to_owned(op, grad_out)?;
    let src = src_grad(op, grad_out, d, idx, &e, src_shape)?;
    Ok(ScatterGrad { input, src })
}

/// The gradients of [`Options::scatter`](crate::Options::scatter) with broadcasting:
/// `input = g.scatter(dim, index.expand(E), 0)`, `src = g.gather(dim, index.expand(E))` summed
/// over src's broadcast axes. As in PyTorch, every duplicate writer gets the gradient of the
/// element it targeted, although only the last write survived.
///
/// ```
/// use ndarray::array;
/// // One value (src [1, 1]) written at [0][1] and [1][0].
/// let g = gather::Options::new().broadcast(true).grad().scatter(&array![[1.0f64, 2.0], [3.0, 4.0]], 1, &array![[1i64], [0]], (1, 1))?;
/// assert_eq!(g.input, array![[1.0, 0.0], [0.0, 4.0]]);
/// assert_eq!(g.src, array![[5.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_broadcast<T, S, DG, I, SI, DI, Sh>(
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
    Sh: IntoDimension,
{
    let op = "grad::scatter_broadcast";
    let src_shape = src_shape.into_dimension();
    let idx = view_nonempty(index);
    let (e, d) = check_scatter_grad(op, grad_out.shape(), dim, &idx, src_shape.slice())?;
    let zero = [T::narrow(Zero::zero())];
    let zero = ndarray::ArrayView::from(&zero[..]).into_dyn();
    let mut input = crate::ops::try_to_owned(op, grad_out)?;
    crate::ops::broadcast::scatter_broadcast_into(
        op,
        input.view_mut().into_dyn(),
        d as isize,
        idx.view(),
        zero.into_shape_with_order(IxDyn(&vec![1; e.len()]))
            .expect("one element"),
        Mode::Set,
    )?;
    let src = src_grad(op, grad_out, d, idx, &e, src_shape)?;
    Ok(ScatterGrad { input, src })
}

/// The gradients of [`Options::scatter_reduce`](crate::Options::scatter_reduce) with broadcasting, with
/// respect to `input` and `src`; `result` is the forward's output. Those of
/// [`grad::scatter_reduce`](crate::grad::scatter_reduce()) on the expanded index and src, with the
/// src gradient summed over src's broadcast axes (the same rules for ties, zeros and means).
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// // src [1, 2] broadcast over two index rows: both products land on row 0.
/// let (x, idx, src) = (array![[2.0f64, 3.0]], array![[0i64], [0]], array![[5.0f64, 7.0]]);
/// let out = gather::Options::new().broadcast(true).scatter_reduce(&x, 0, &idx, &src, Reduce::Prod, true)?;
/// assert_eq!(out, array![[50.0, 147.0]]);
/// let g = gather::Options::new().broadcast(true).grad().scatter_reduce(&array![[1.0, 1.0]], &x, 0, &idx, &src, Reduce::Prod, true)?;
/// assert_eq!(g.input, array![[25.0, 49.0]]);
/// assert_eq!(g.src, array![[20.0, 42.0]]); // d(2 s²)/ds = 4 s, d(3 s²)/ds = 6 s
/// # Ok::<(), gather::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce_broadcast<T, S, D, I, SI, DI, SS, DS, SX, SR>(
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
    let op = "grad::scatter_reduce_broadcast";
    check_shape(op, "input", input.shape(), "grad_output", grad_out.shape())?;
    check_shape(
        op,
        "result",
        result.shape(),
        "grad_output",
        grad_out.shape(),
    )?;
    let idx = view_nonempty(index);
    let (e, d) = check_scatter_grad(op, grad_out.shape(), dim, &idx, src.shape())?;
    let ib = idx
        .broadcast(IxDyn(&e))
        .ok_or_else(|| broadcast_failed(op, idx.shape(), &e))?;
    // In the wide type, so that the sum over src's broadcast axes rounds once.
    let (gw, xw, rw, sw) = (widen(grad_out), widen(input), widen(result), widen(src));
    let sb = sw
        .broadcast(IxDyn(&e))
        .ok_or_else(|| broadcast_failed(op, sw.shape(), &e))?;
    let g = super::scatter_reduce::<T::Wide, _, _, _, _, _, _, _, _, _>(
        &gw,
        &xw,
        d as isize,
        &ib,
        &sb,
        reduce,
        include_self,
        &rw,
    )?;
    let ds: ArrayD<T::Wide> = sum_to(g.src, &nonempty(src.shape()));
    Ok(ScatterGrad {
        input: narrow_to::<T, _>(&g.input, grad_out.raw_dim()),
        src: narrow_to::<T, _>(&ds, src.raw_dim()),
    })
}
