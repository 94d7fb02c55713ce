//! The gradient of `put`.
//!
//! ```text
//! put(self, index, source, accumulate)      self.flatten()[index[q]] (+)= source.flatten()[q]
//!
//!  g (self's shape)   index   d source = g.take(index)   d self
//!  ┌───┬───┐          ┌───┐   ┌───┐                      accumulate: g
//!  │ 1 │ 2 │          │ 3 │ → │ 4 │                      otherwise:  ┌───┬───┐
//!  ├───┼───┤          │ 0 │ → │ 1 │                                  │ 0 │ 2 │  overwritten
//!  │ 3 │ 4 │          └───┘   └───┘                                  ├───┼───┤  positions
//!  └───┴───┘                                                         │ 3 │ 0 │  get 0
//!                                                                    └───┴───┘
//! ```

use ndarray::{ArrayBase, ArrayView, Data, Dimension, IntoDimension};
use num_traits::Zero;

use super::{GradFloat, SourceGrad, reshape_to};
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::take::flat_index_error;

/// The gradients of [`put()`](crate::put()): `source = g.take(index)` (reshaped to the source's
/// shape); `input = g` with `accumulate`, else `g` with the written positions zeroed.
///
/// Without `accumulate`, every duplicate source element gets the gradient of its position, as in
/// PyTorch, although only the last write survived. Negative index values count from the end.
///
/// ```
/// use ndarray::array;
/// let g = array![[1.0f64, 2.0], [3.0, 4.0]];
/// let r = gather::grad::put(&g, &array![3, -4], [2], false)?;
/// assert_eq!(r.source, array![4.0, 1.0]);
/// assert_eq!(r.input, array![[0.0, 2.0], [3.0, 0.0]]);
/// let r = gather::grad::put(&g, &array![3, -4], [2], true)?;
/// assert_eq!(r.input, g);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn put<T, S, D, I, SI, DI, Sh>(
    grad_out: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    source_shape: Sh,
    accumulate: bool,
) -> Result<SourceGrad<T, D, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::put";
    let source_shape = source_shape.into_dimension();
    check_source_numel(op, source_shape.slice(), index.shape())?;
    if index.is_empty() {
        return Ok(SourceGrad {
            input: crate::ops::try_to_owned(op, grad_out)?,
            source: super::try_zeros(op, source_shape)?,
        });
    }
    check(op, grad_out, index)?;
    let input = if accumulate {
        crate::ops::try_to_owned(op, grad_out)?
    } else {
        let zero = [T::narrow(Zero::zero())];
        let zero = ArrayView::from(&zero[..]);
        let zeros = zero
            .broadcast(index.raw_dim())
            .ok_or_else(|| Error::shape(format!("{op}: cannot broadcast a zero")))?;
        crate::put(grad_out, index, &zeros, false)?
    };
    let taken = crate::take(grad_out, index)?.into_dyn();
    Ok(SourceGrad {
        input,
        source: reshape_to(op, taken, source_shape)?,
    })
}

/// The gradient's check of the forward's source shape: one element per index element.
pub(crate) fn check_source_numel(
    op: &str,
    source_shape: &[usize],
    index_shape: &[usize],
) -> Result<()> {
    let (n, k) = (
        source_shape.iter().product::<usize>(),
        index_shape.iter().product::<usize>(),
    );
    if n == k {
        return Ok(());
    }
    Err(Error::shape(format!(
        "{op}: Expected source and index to have the same number of elements, but got source.numel() = {n}, index.numel() = {k} (source {}, index {})",
        fmt_shape(source_shape),
        fmt_shape(index_shape)
    ))
    .with_hint("pass the source shape and index of the forward call"))
}

/// The forward's index checks, worded for the gradient.
fn check<T, S: Data<Elem = T>, D: Dimension, I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
    op: &str,
    grad_out: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
) -> Result<()> {
    if grad_out.is_empty() {
        return Err(Error::bounds(format!(
            "{op}: Tried to put elements into an empty tensor (self {}, index {})",
            fmt_shape(grad_out.shape()),
            fmt_shape(index.shape())
        ))
        .with_hint(
            "an empty array has no position to write to; only an empty index is valid for it",
        ));
    }
    check_bounds(
        op,
        &index.view().into_dyn(),
        0,
        grad_out.len(),
        Bounds::Wrap,
    )
    .map_err(|e| flat_index_error(op, e, grad_out.shape()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{Array2, array};

    #[test]
    fn source_gradient_has_the_source_shape() {
        let g = Array2::from_shape_fn((2, 3), |(a, b)| (a * 3 + b) as f32);
        let r = put(&g, &array![5i64, 0, 5, 1], (2, 2), false).unwrap();
        assert_eq!(r.source, array![[5.0, 0.0], [5.0, 1.0]]);
        assert_eq!(r.input, array![[0.0, 0.0, 2.0], [3.0, 4.0, 0.0]]);
    }

    #[test]
    fn errors_are_reported() {
        let g = array![1.0f64, 2.0];
        assert_eq!(
            put(&g, &array![2i64], [1], true).unwrap_err().kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            put(&g, &array![0i64], [2], true).unwrap_err().kind(),
            ErrorKind::ShapeMismatch
        );
    }
}
