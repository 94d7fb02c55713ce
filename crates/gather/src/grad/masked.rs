//! Gradients of `masked_select` and `masked_scatter`.
//!
//! ```text
//! masked_select(input, mask) → [2, 4, 5]           masked_scatter(self, mask, source)
//!
//!  mask           g = [a, b, c]   d input          d self = g with the masked positions zeroed
//!  │ F │ T │ F │                  │ 0 │ a │ 0 │    d source = [g at the true positions, in order],
//!  │ T │ T │ F │                  │ b │ c │ 0 │               zero for unused source elements
//! ```
//!
//! Input and mask broadcast against each other in the forward; the input's gradient is summed
//! over the axes along which the input was broadcast.

use ndarray::{Array, ArrayBase, ArrayD, Data, Dimension, IntoDimension, IxDyn, Zip};
use num_traits::Zero;

use super::output::{GradOutputOf, check_grad_output};
use super::{GradFloat, SourceGrad, narrow_to, reshape_to, sum_to, try_zeros};
use crate::error::{Error, Result, fmt_shape};

/// The gradient of [`masked_select()`](crate::masked_select()) with respect to `input`: `grad_out`
/// (1-d, one element per true position of the broadcast mask) scattered back to those positions in
/// row-major order, then summed over the axes along which the input was broadcast.
///
/// ```
/// use ndarray::array;
/// // torch_semantics.md §A.6: input [1, 2] with mask [[T, F], [T, T]] → grad [2, 1] for ones.
/// let mask = array![[true, false], [true, true]];
/// let dx = gather::grad::masked_select(&array![1.0f64, 1.0, 1.0], [2], &mask)?;
/// assert_eq!(dx, array![2.0, 1.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn masked_select<T, S, DG, SM, DM, Sh>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    mask: &ArrayBase<SM, DM>,
) -> Result<Array<T, Sh::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
    Sh: IntoDimension,
{
    let op = "grad::masked_select";
    let shape = input_shape.into_dimension();
    let b = crate::ops::masked::broadcast_shape(op, shape.slice(), mask.shape())?;
    let m = mask.view().into_dyn();
    let mb = m
        .broadcast(IxDyn(&b))
        .ok_or_else(|| Error::shape(format!("{op}: the mask does not broadcast")))?;
    let count = mb.iter().filter(|&&v| v).count();
    check_grad_output(op, GradOutputOf::MaskedSelect, grad_out.shape(), &[count])?;
    let mut full = try_zeros::<T, _>(op, IxDyn(&b))?;
    crate::masked_scatter_inplace(&mut full, &mb, grad_out)?;
    if b == shape.slice() {
        return reshape_to(op, full, shape);
    }
    let wide: ArrayD<T::Wide> = crate::kernels::zip::map(&full.view(), |v| v.widen());
    Ok(narrow_to::<T, _>(&sum_to(wide, shape.slice()), shape))
}

/// The gradient's error for a forward source shape with fewer elements than the `ones` true
/// positions of the mask.
pub(crate) fn source_short(source_shape: &[usize], ones: usize) -> Error {
    let n: usize = source_shape.iter().product();
    Error::shape(format!(
        "grad::masked_scatter: Number of elements of source < number of ones in mask (source {} has {n} elements; the mask has {ones} true positions)",
        fmt_shape(source_shape)
    ))
    .with_hint("pass the source shape of the forward call")
}

/// The gradients of [`masked_scatter()`](crate::masked_scatter()): `input = g` with the masked
/// positions zeroed (summed over the axes along which the input was broadcast);
/// `source = g.masked_select(mask)`, zero-padded to the source's size and shaped like it (source
/// elements the forward did not use get zero).
///
/// `grad_out` has the broadcast shape of input and mask (the forward's output).
///
/// ```
/// use ndarray::array;
/// let mask = array![[false, true], [true, false]];
/// let g = array![[1.0f32, 2.0], [3.0, 4.0]];
/// let r = gather::grad::masked_scatter(&g, (2, 2), &mask, [3])?;
/// assert_eq!(r.input, array![[1.0, 0.0], [0.0, 4.0]]);
/// assert_eq!(r.source, array![2.0, 3.0, 0.0]); // the third source element was not used
/// # Ok::<(), gather::Error>(())
/// ```
pub fn masked_scatter<T, S, DG, SM, DM, Sh, ShS>(
    grad_out: &ArrayBase<S, DG>,
    input_shape: Sh,
    mask: &ArrayBase<SM, DM>,
    source_shape: ShS,
) -> Result<SourceGrad<T, Sh::Dim, ShS::Dim>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    DG: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
    Sh: IntoDimension,
    ShS: IntoDimension,
{
    let op = "grad::masked_scatter";
    let shape = input_shape.into_dimension();
    let source_shape = source_shape.into_dimension();
    let b = crate::ops::masked::broadcast_shape(op, shape.slice(), mask.shape())?;
    check_grad_output(op, GradOutputOf::MaskedScatter, grad_out.shape(), &b)?;
    let m = mask.view().into_dyn();
    let mb = m
        .broadcast(IxDyn(&b))
        .ok_or_else(|| Error::shape(format!("{op}: the mask does not broadcast")))?;
    let g = grad_out.view().into_dyn();
    let zero = <T::Wide as Zero>::zero();
    let kept: ArrayD<T::Wide> = Zip::from(&g)
        .and(&mb)
        .map_collect(|&v, &on| if on { zero } else { v.widen() });
    let input = narrow_to::<T, _>(&sum_to(kept, shape.slice()), shape);
    let picked = crate::masked_select(&g, &mb)?;
    let n = source_shape.size();
    if picked.len() > n {
        return Err(source_short(source_shape.slice(), picked.len()));
    }
    let mut source = try_zeros::<T, _>(op, source_shape)?;
    for (o, &v) in source.iter_mut().zip(picked.iter()) {
        *o = v;
    }
    Ok(SourceGrad { input, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use half::bf16;
    use ndarray::{Array1, Array2, arr0, array};

    #[test]
    fn masked_select_of_a_broadcast_mask_scatters_in_row_major_order() {
        let mask = array![true, false, true];
        let dx = masked_select(&array![1.0f64, 2.0, 3.0, 4.0], (2, 3), &mask).unwrap();
        assert_eq!(dx, array![[1.0, 0.0, 2.0], [3.0, 0.0, 4.0]]);
        let dx = masked_select(&array![7.0f32], ndarray::IxDyn(&[]), &arr0(true)).unwrap();
        assert_eq!(dx, arr0(7.0).into_dyn());
        let e = masked_select(&array![1.0f64], (2, 3), &mask).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    }

    #[test]
    fn broadcast_input_gradient_sums_in_f32() {
        let n = 3000;
        let mask = Array2::from_elem((n, 1), true);
        let g = Array1::from_elem(n, bf16::ONE);
        let dx = masked_select(&g, (1, 1), &mask).unwrap();
        assert_eq!(dx[[0, 0]], bf16::from_f32(3000.0));
        let r = masked_scatter(
            &Array2::from_elem((n, 1), bf16::ONE),
            [1],
            &Array2::from_elem((n, 1), false),
            [1],
        )
        .unwrap();
        assert_eq!(r.input[0], bf16::from_f32(3000.0));
        assert_eq!(r.source[0], bf16::ZERO);
    }
}
