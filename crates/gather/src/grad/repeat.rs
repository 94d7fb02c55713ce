//! Gradients of `repeat_interleave` (on the input; the repeats are counts).
//!
//! ```text
//! repeat_interleave([a, b, c], repeats=[2, 0, 1]) = [a, a, c]
//!
//!  g = [10, 20, 30]   →   d input = [10 + 20, 0, 30]   (each element's copies add up)
//! ```

use ndarray::{Array, Array1, ArrayBase, Data, Dimension, IntoDimension, IxDyn};
use num_traits::One;

use super::output::{GradOutputOf, check_grad_output};
use super::{GradFloat, reshape_to, try_zeros};
use crate::error::Result;
use crate::index::IndexElem;

/// `zeros(input).index_add(dim, [j repeated counts[j] times], g)`; `total` is the sum of the
/// counts, as the forward's plan gives it.
fn sum_copies<T, S, DG, D>(
    op: &str,
    grad_out: &ArrayBase<S, DG>,
    shape: D,
    dim: Option<usize>,
    counts: &[usize],
    total: usize,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    D: Dimension,
{
    let mut want = shape.slice().to_vec();
    match dim {
        None => want = vec![total],
        Some(d) => want[d] = total,
    }
    check_grad_output(op, GradOutputOf::RepeatInterleave, grad_out.shape(), &want)?;
    let positions = Array1::from_vec(crate::ops::repeat::positions(op, counts, total)?);
    let one = T::narrow(One::one());
    match dim {
        Some(d) => {
            let mut dx = try_zeros::<T, D>(op, shape)?;
            crate::index_add_inplace(&mut dx, d as isize, &positions, grad_out, one)?;
            Ok(dx)
        }
        None => {
            let mut flat = try_zeros::<T, _>(op, IxDyn(&[counts.len()]))?;
            crate::index_add_inplace(&mut flat, 0, &positions, grad_out, one)?;
            reshape_to(op, flat, shape)
        }
    }
}

/// The gradient of [`repeat_interleave()`](crate::repeat_interleave()) (tensor repeats) with
/// respect to `input`: each input slice (element, with `dim = None`) gets the sum of the gradients
/// of its copies (`index_add` of `grad_out` at the repeated positions; `f16`/`bf16` summed in
/// `f32`). Slices repeated 0 times get zero.
///
/// `repeats` is as in the forward: one count per slice along `dim`, or a single count (0-d or one
/// element) for all of them.
///
/// ```
/// use ndarray::array;
/// // torch_semantics.md §A.7: repeats [2, 0, 1], grad [10, 20, 30] → [30, 0, 30].
/// let dx = gather::grad::repeat_interleave(&array![10.0f64, 20.0, 30.0], [3], &array![2, 0, 1], Some(0))?;
/// assert_eq!(dx, array![30.0, 0.0, 30.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn repeat_interleave<T, S, DG, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    repeats: &ArrayBase<SI, DI>,
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
    let op = "grad::repeat_interleave";
    let shape = input_shape.into_dimension();
    // The forward's checks, in its words, under the gradient's name (on a Vec, so that they are
    // compiled once, not per dtype and index type).
    let values: Vec<i64> = repeats.iter().map(|r| r.to_i64()).collect();
    let (d, counts, total) = crate::ops::repeat::plan_tensor(
        op,
        shape.slice(),
        repeats.shape(),
        values.iter().copied(),
        dim,
        None,
    )?;
    sum_copies(op, grad_out, shape, d, &counts, total)
}

/// The gradient of [`repeat_interleave_scalar()`](crate::ops::repeat::repeat_interleave_scalar()) (every slice
/// repeated `repeats` times) with respect to `input`: the sum of the gradients of each slice's
/// copies.
///
/// ```
/// use ndarray::array;
/// let g = array![[1.0f32, 2.0, 3.0, 4.0]];   // [[a, a, b, b]] from [[a, b]]
/// let dx = gather::grad::repeat_interleave_scalar(&g, (1, 2), 2, Some(1))?;
/// assert_eq!(dx, array![[3.0, 7.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn repeat_interleave_scalar<T, S, DG, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    repeats: usize,
    dim: Option<isize>,
) -> Result<Array<T, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::repeat_interleave";
    let shape = input_shape.into_dimension();
    let (d, size, total) = crate::ops::repeat::plan_scalar(op, shape.slice(), repeats, dim, None)?;
    sum_copies(op, grad_out, shape, d, &vec![repeats; size], total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use ndarray::{arr0, array};

    #[test]
    fn flattened_and_broadcast_repeats() {
        // dim None: the input is flattened; one count for every element.
        let g = array![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let dx = repeat_interleave(&g, (2, 2), &arr0(2i64), None).unwrap();
        assert_eq!(dx, array![[3.0, 7.0], [11.0, 15.0]]);
        let dx = repeat_interleave_scalar(&array![1.0f64, 2.0], IxDyn(&[]), 2, None).unwrap();
        assert_eq!(dx, arr0(3.0).into_dyn());
    }

    #[test]
    fn errors_are_reported() {
        let g = array![1.0f64, 2.0];
        let e = repeat_interleave(&g, [2], &array![1i64, -1], Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = repeat_interleave(&g, [2], &array![1i64, 1, 1], Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = repeat_interleave_scalar(&g, [2], 2, Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = repeat_interleave_scalar(&g, IxDyn(&[]), 2, Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    }
}
