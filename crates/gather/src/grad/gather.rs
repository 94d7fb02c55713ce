//! The gradient of `gather`: `scatter_add` of the output gradient into zeros of the input's shape.
//!
//! ```text
//! gather(input, dim=1, index)            d input[i][index[i][j]] += g[i][j]
//!
//!  g (index's shape)   index        d input (input's shape)
//!  ┌───┬───┐           ┌───┬───┐    ┌─────┬───┬───┐
//!  │ 1 │ 2 │     →     │ 0 │ 0 │ →  │ 1+2 │ 0 │ 0 │   both reads of input[0][0] add up
//!  ├───┼───┤           ├───┼───┤    ├─────┼───┼───┤
//!  │ 3 │ 4 │     →     │ 2 │ 1 │ →  │  0  │ 4 │ 3 │   input[1][0] was never read: 0
//!  └───┴───┘           └───┴───┘    └─────┴───┴───┘
//! ```

use ndarray::{Array, ArrayBase, Data, Dimension, IntoDimension};

use super::output::{GradOutputOf, check_grad_output};
use super::{GradFloat, check_gather_index, try_zeros};
use crate::dims::normalize_dim;
use crate::error::Result;
use crate::index::IndexElem;

/// The gradient of [`gather()`](crate::gather()) with respect to `input`:
/// `zeros(input_shape).scatter_add(dim, index, grad_out)`.
///
/// `grad_out` has the index's shape (the forward output's). Elements read several times get the
/// sum of their gradients (added in index order; `f16`/`bf16` in `f32`); elements never read get
/// zero. `input_shape` is anything ndarray takes as a shape: `x.raw_dim()`, `x.dim()`, `(2, 3)`,
/// `&[2, 3][..]`.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let idx = array![[0, 0], [2, 1]];
/// let _out = x.gather(1, &idx)?;
/// let dx = gather::grad::gather(&array![[1.0f32, 2.0], [3.0, 4.0]], x.raw_dim(), 1, &idx)?;
/// assert_eq!(dx, array![[3.0, 0.0, 0.0], [0.0, 4.0, 3.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn gather<T, S, DG, I, SI, DI, Sh>(
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
    let op = "grad::gather";
    let shape = input_shape.into_dimension();
    // The dim, grad_output's shape, then the index's shape and values: shapes before values.
    normalize_dim(op, dim, shape.ndim())?;
    check_grad_output(op, GradOutputOf::Gather, grad_out.shape(), index.shape())?;
    let idx = index.view().into_dyn();
    let checked = check_gather_index(op, shape.slice(), dim, &idx)?;
    let mut dx = try_zeros::<T, _>(op, shape)?;
    if checked.is_some() {
        crate::scatter_add_inplace(&mut dx, dim, index, grad_out)?;
    }
    Ok(dx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use half::{bf16, f16};
    use ndarray::{Array1, Array2, ArrayD, IxDyn, arr0, array};

    #[test]
    fn duplicate_reads_accumulate_as_in_pytorch() {
        // torch_semantics.md §A.1: gather(x, 1, [[0,0],[1,3],[3,3]]) with ones → [[2,0,0,0],[0,1,0,1],[0,0,0,2]].
        let idx = array![[0i64, 0], [1, 3], [3, 3]];
        let dx = gather(&Array2::<f64>::ones((3, 2)), (3, 4), 1, &idx).unwrap();
        assert_eq!(
            dx,
            array![
                [2.0, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 1.0],
                [0.0, 0.0, 0.0, 2.0]
            ]
        );
    }

    #[test]
    fn zero_d_input_and_empty_index() {
        let dx = gather(&array![2.0f64, 3.0], IxDyn(&[]), 0, &array![0i64, 0]).unwrap();
        assert_eq!(dx, arr0(5.0).into_dyn());
        let empty = ArrayD::<i64>::zeros(IxDyn(&[0, 5, 2]));
        let dx = gather(&ArrayD::<f32>::zeros(IxDyn(&[0, 5, 2])), (2, 3), 1, &empty).unwrap();
        assert_eq!(dx, Array2::<f32>::zeros((2, 3)));
    }

    #[test]
    fn half_gradients_accumulate_in_f32() {
        let g = Array1::from_elem(3000, f16::ONE);
        let dx = gather(&g, 1, 0, &Array1::<i64>::zeros(3000)).unwrap();
        assert_eq!(dx[0], f16::from_f32(3000.0));
        let g = Array1::from_elem(3000, bf16::ONE);
        let dx = gather(&g, 1, 0, &Array1::<i64>::zeros(3000)).unwrap();
        assert_eq!(dx[0], bf16::from_f32(3008.0));
    }

    #[test]
    fn errors_name_the_gradient_op() {
        let idx = array![[0i64, 1]];
        let e = gather(&array![[1.0f64, 2.0, 3.0]], (2, 3), 1, &idx).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.to_string().contains("grad::gather: grad_output"), "{e}");
        let e = gather(&array![[1.0f64, 2.0]], (2, 3), 1, &array![[0i64, 3]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        let e = gather(&array![1.0f64, 2.0], (2, 3), 1, &array![0i64, 1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        let e = gather(&array![[1.0f64]], (2, 3), 2, &array![[0i64]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    }
}
