//! Gradients of `sort` and `topk` (on their values; the indices are not differentiable).
//!
//! ```text
//! sort(input) → values, indices            d input[indices[j]] = g[j]
//!
//!  input          indices     g (values' shape)    d input
//!  │ 3 │ 1 │ 2 │  │ 1 │ 2 │ 0 │  │ 10 │ 20 │ 30 │  →  │ 30 │ 10 │ 20 │
//! ```
//!
//! Each value came from one input element, so its gradient goes back there
//! (`zeros(input).scatter(dim, indices, g)`); elements topk did not pick get zero.

use ndarray::{Array, ArrayBase, Data, Dimension, IntoDimension};

use super::{GradFloat, check_gather_index, check_shape, try_zeros};
use crate::error::Result;
use crate::index::IndexElem;

fn value_selecting<T, S, DG, I, SI, DI, Sh>(
    op: &str,
    grad_values: &ArrayBase<S, DG>,
    input_shape: Sh,
    dim: isize,
    indices: &ArrayBase<SI, DI>,
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
    let checked = check_gather_index(op, shape.slice(), dim, &indices.view().into_dyn())?;
    check_shape(
        op,
        "grad_values",
        grad_values.shape(),
        "the indices",
        indices.shape(),
    )?;
    let mut dx = try_zeros::<T, _>(op, shape)?;
    if checked.is_some() {
        // The indices of one slice are distinct, so adding is writing.
        crate::scatter_add_inplace(&mut dx, dim, indices, grad_values)?;
    }
    Ok(dx)
}

/// The gradient of [`sort()`](crate::sort()) with respect to `input`, from the gradient of the
/// sorted values and the returned indices: `zeros(input_shape).scatter(dim, indices, grad_values)`.
///
/// ```
/// use ndarray::array;
/// let x = array![3.0f64, 1.0, 2.0];
/// let (_, idx) = gather::sort(&x, 0, false, true)?;
/// let dx = gather::grad::sort(&array![10.0, 20.0, 30.0], x.raw_dim(), 0, &idx)?;
/// assert_eq!(dx, array![30.0, 10.0, 20.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn sort<T, S, DG, I, SI, DI, Sh>(
    grad_values: &ArrayBase<S, DG>,
    input_shape: Sh,
    dim: isize,
    indices: &ArrayBase<SI, DI>,
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
    value_selecting("grad::sort", grad_values, input_shape, dim, indices)
}

/// The gradient of [`topk()`](crate::topk()) with respect to `input`, from the gradient of the k
/// values and the returned indices: the picked elements get their value's gradient, the others
/// zero.
///
/// ```
/// use ndarray::array;
/// let scores = array![[0.1f32, 0.9, 0.3, 0.7]];
/// let (_, idx) = gather::topk(&scores, 2, 1, true, true)?;
/// let d = gather::grad::topk(&array![[1.0f32, 2.0]], scores.raw_dim(), 1, &idx)?;
/// assert_eq!(d, array![[0.0, 1.0, 0.0, 2.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn topk<T, S, DG, I, SI, DI, Sh>(
    grad_values: &ArrayBase<S, DG>,
    input_shape: Sh,
    dim: isize,
    indices: &ArrayBase<SI, DI>,
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
    value_selecting("grad::topk", grad_values, input_shape, dim, indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{IxDyn, arr0, array};

    #[test]
    fn zero_d_and_errors() {
        let (_, i) = crate::topk(&arr0(2.0f64), 1, 0, true, true).unwrap();
        assert_eq!(
            topk(&arr0(5.0f64), IxDyn(&[]), 0, &i).unwrap(),
            arr0(5.0).into_dyn()
        );
        let e = sort(&array![1.0f64, 2.0], 2, 0, &array![0i64]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = sort(&array![1.0f64], 2, 0, &array![2i64]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }
}
