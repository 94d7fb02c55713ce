//! Gradients of `take` and `take_along_dim`.
//!
//! ```text
//! take(input, index)              d input.flatten()[index[q]] += g[q]   (negative values wrap)
//!
//!  g        index        d input (2×2)
//!  ┌───┐    ┌────┐       ┌───┬───┐
//!  │ 1 │ ←  │  3 │       │ 0 │ 0 │
//!  │ 2 │ ←  │ -1 │   →   ├───┼───┤
//!  └───┘    └────┘       │ 0 │ 3 │  flat 3 read twice (3 and -1): 1 + 2
//!                        └───┴───┘
//! ```
//!
//! `take_along_dim` with a dim is a gather from the input broadcast against the index; its
//! gradient is gather's, summed over the axes along which the input was broadcast (index values
//! wrap modulo the size of `dim`, as in the forward). With `dim = None` it is `take` on the
//! flattened input, without wrapping.

use ndarray::{Array, ArrayBase, ArrayD, ArrayView, Data, Dimension, IntoDimension, IxDyn};

use super::output::{GradOutputOf, check_grad_output};
use super::{GradFloat, narrow_to, sum_to, try_zeros, widen};
use crate::error::{Error, Result};
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::scatter::{Mode, Reduce, scatter_into};
use crate::ops::take::{along_dim_shapes, flat_index_error, grad_from_empty};

/// `zeros(shape).put(index, g, accumulate = true)`, after checking `index` against the flat size
/// under `bounds`.
fn put_back<T: GradFloat, I: IndexElem>(
    op: &str,
    grad_out: &ArrayView<'_, T, IxDyn>,
    shape: IxDyn,
    index: &ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
) -> Result<ArrayD<T>> {
    let dims = shape.slice().to_vec();
    let n = shape.size();
    if n == 0 && !index.is_empty() {
        return Err(grad_from_empty(op, &dims, index.len()));
    }
    // take's flat words where negative values count from the end; take_along_dim's (no dim)
    // reject them, in the strict words of its forward.
    check_bounds(op, index, 0, n, bounds).map_err(|e| match bounds {
        Bounds::Strict => e,
        _ => flat_index_error(op, e, &dims),
    })?;
    let mut dx = try_zeros::<T, IxDyn>(op, shape)?;
    if !index.is_empty() {
        crate::put_inplace(&mut dx, index, grad_out, true)?;
    }
    Ok(dx)
}

/// The gradient of [`take()`](crate::take()) with respect to `input`:
/// `zeros(input_shape).put(index, grad_out, accumulate = true)`. Elements taken several times get
/// the sum of their gradients; negative index values count from the end, as in the forward.
///
/// ```
/// use ndarray::array;
/// let dx = gather::grad::take(&array![1.0f64, 2.0], (2, 2), &array![3, -1])?;
/// assert_eq!(dx, array![[0.0, 0.0], [0.0, 3.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn take<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
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
    let op = "grad::take";
    check_grad_output(op, GradOutputOf::Take, grad_out.shape(), index.shape())?;
    let shape = input_shape.into_dimension();
    let dx = put_back(
        op,
        &grad_out.view().into_dyn(),
        IxDyn(shape.slice()),
        &index.view().into_dyn(),
        Bounds::Wrap,
    )?;
    Ok(dx.into_dimensionality().expect("the input's rank"))
}

/// The gradient of [`take_along_dim()`](crate::take_along_dim()) with respect to `input`.
///
/// With `Some(dim)`: gather's gradient into the input broadcast against the index (index values
/// taken modulo the size of `dim`, as in the forward), summed over the axes along which the input
/// was broadcast. With `None`: `take`'s gradient on the flattened input (no wrapping; `grad_out` is
/// 1-d with one element per index element).
///
/// ```
/// use ndarray::array;
/// // torch_semantics.md §A.4: take_along_dim(a, [[0], [0]], dim=0) on 2×2 → grad [[2, 2], [0, 0]].
/// let dx = gather::grad::take_along_dim(&ndarray::Array2::<f64>::ones((2, 2)), (2, 2), &array![[0], [0]], Some(0))?;
/// assert_eq!(dx, array![[2.0, 2.0], [0.0, 0.0]]);
///
/// // The input [1, 4] was broadcast over the 3 rows of the index: their gradients add up.
/// let g = array![[1.0f64], [2.0], [4.0]];
/// let dx = gather::grad::take_along_dim(&g, (1, 4), &array![[1], [1], [-1]], Some(1))?;
/// assert_eq!(dx, array![[0.0, 3.0, 0.0, 4.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn take_along_dim<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    index: &ArrayBase<SI, DI>,
    dim: Option<isize>,
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
    let shape = input_shape.into_dimension();
    let dx = take_along_dim_dyn(
        &grad_out.view().into_dyn(),
        IxDyn(shape.slice()),
        &index.view().into_dyn(),
        dim,
    )?;
    Ok(dx.into_dimensionality().expect("the input's rank"))
}

/// [`take_along_dim`] on dynamic-rank views: compiled per element and index type, not per storage
/// and rank of each operand.
fn take_along_dim_dyn<T: GradFloat, I: IndexElem>(
    grad_out: &ArrayView<'_, T, IxDyn>,
    shape: IxDyn,
    index: &ArrayView<'_, I, IxDyn>,
    dim: Option<isize>,
) -> Result<ArrayD<T>> {
    let op = "grad::take_along_dim";
    let Some(dim) = dim else {
        check_grad_output(
            op,
            GradOutputOf::TakeAlongDimFlat,
            grad_out.shape(),
            &[index.len()],
        )?;
        return put_back(op, grad_out, shape, index, Bounds::Strict);
    };
    let x_shape = shape.slice().to_vec();
    // The forward's checks, in its words, under the gradient's name. `wide_shape`: the input as
    // the forward read it, broadcast against the index off `dim`.
    let (d, wide_shape, out_shape) = along_dim_shapes(op, &x_shape, index.shape(), dim)?;
    check_grad_output(op, GradOutputOf::TakeAlongDim, grad_out.shape(), &out_shape)?;
    let ib = index
        .broadcast(IxDyn(&out_shape))
        .ok_or_else(|| Error::shape(format!("{op}: the index does not broadcast")))?;
    let g = widen(grad_out);
    let mut dx = try_zeros::<T::Wide, _>(op, IxDyn(&wide_shape))?;
    scatter_into(
        op,
        dx.view_mut(),
        d as isize,
        ib,
        g.view(),
        false,
        Mode::Reduce(Reduce::Sum, true),
        Bounds::Modulo,
    )?;
    let dx: ArrayD<T::Wide> = sum_to(dx, &x_shape);
    Ok(narrow_to::<T, _>(&dx, shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use half::f16;
    use ndarray::{arr0, array};

    #[test]
    fn take_wraps_negative_indices_and_accumulates() {
        let dx = take(
            &array![[1.0f64, 2.0], [4.0, 8.0]],
            3,
            &array![[0i64, -3], [2, -1]],
        )
        .unwrap();
        assert_eq!(dx, array![3.0, 0.0, 12.0]);
        let dx = take(&arr0(5.0f32), IxDyn(&[]), &arr0(0i64)).unwrap();
        assert_eq!(dx, arr0(5.0).into_dyn());
    }

    #[test]
    fn take_along_dim_flat_rejects_negative_values() {
        let e = take_along_dim(&array![1.0f64], (2, 2), &array![-1i64], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        // In the forward's words (which reject it), not take's (which would take it).
        let forward =
            crate::take_along_dim(&array![[1.0f64, 2.0], [3.0, 4.0]], &array![-1i64], None);
        let forward =
            forward
                .unwrap_err()
                .message()
                .replacen("take_along_dim", "grad::take_along_dim", 2);
        assert_eq!(e.message(), forward);
        let dx = take_along_dim(&array![1.0f64, 2.0], (2, 2), &array![[3i64, 3]], None).unwrap();
        assert_eq!(dx, array![[0.0, 0.0], [0.0, 3.0]]);
    }

    #[test]
    fn broadcast_sums_accumulate_in_f32_for_half() {
        let n = 3000;
        let g = ndarray::Array2::from_elem((n, 1), f16::ONE);
        let idx = ndarray::Array2::<i64>::zeros((n, 1));
        let dx = take_along_dim(&g, (1, 2), &idx, Some(1)).unwrap();
        assert_eq!(dx, array![[f16::from_f32(3000.0), f16::ZERO]]);
    }
}
