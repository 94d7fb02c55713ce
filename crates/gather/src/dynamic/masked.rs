//! masked_select and masked_scatter, dynamically typed.
//!
//! The mask must be a `bool` tensor, as in PyTorch (`uint8` masks are rejected too).

use ndarray::{ArrayViewD, ArrayViewMutD};

use super::{
    Args, Inputs, Tensor, TensorElem, TensorView, TensorViewMut, input, moved_op, same_dtype,
    with_view, with_view_mut,
};
use crate::error::Result;
use crate::kernels::words::Moved;
use crate::ops::masked as typed;

/// The mask as a bool array, or PyTorch's error for a mask of another dtype.
fn bool_mask<'a>(op: &str, inputs: &'a dyn Inputs) -> Result<ArrayViewD<'a, bool>> {
    match input(inputs, "mask")? {
        TensorView::Bool(m) => Ok(m),
        other => Err(crate::error::mask_dtype(op, other.dtype())),
    }
}

pub(crate) fn masked_select(_args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let mask = bool_mask("masked_select", inputs)?;
    // The masked ops only move elements: they run on the moved type (see `Moved`).
    super::Read::MaskedSelect(&mask).on(&x)
}

pub(crate) fn masked_scatter(_args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let source = input(inputs, "source")?;
    with_view!(x, x => scatter_typed(x, &source, inputs))
}

fn scatter_typed<T: TensorElem + Moved>(
    x: &ArrayViewD<'_, T>,
    source: &TensorView<'_>,
    inputs: &dyn Inputs,
) -> Result<Tensor> {
    let source = same_dtype::<T>("masked_scatter", "source", source)?;
    let mask = bool_mask("masked_scatter", inputs)?;
    let source = T::moved(&source.view());
    moved_op(x, |x| typed::masked_scatter(&x, &mask, &source))
}

pub(crate) fn masked_scatter_inplace(
    _args: &Args,
    target: &mut TensorViewMut<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    let source = input(inputs, "source")?;
    with_view_mut!(*target, dst => scatter_inplace_typed(dst, &source, inputs))
}

fn scatter_inplace_typed<T: TensorElem + Moved>(
    dst: &mut ArrayViewMutD<'_, T>,
    source: &TensorView<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    let source = same_dtype::<T>("masked_scatter_", "source", source)?;
    let mask = bool_mask("masked_scatter_", inputs)?;
    let mut d = dst.view_mut();
    typed::masked_scatter_inplace(&mut T::moved_mut(&mut d), &mask, &T::moved(&source.view()))
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;
    use crate::dynamic::{Args, Tensor, Tensors, call, call_inplace};
    use ndarray::array;

    fn inputs(pairs: Vec<(&str, Tensor)>) -> Tensors {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn masks_must_be_bool() {
        let x = Tensor::from(array![1.0f64, 2.0].into_dyn());
        let ins = inputs(vec![
            ("input", x.clone()),
            ("mask", Tensor::from(array![1u8, 0].into_dyn())),
        ]);
        let e = call("masked_select", &Args::default(), &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let ins = inputs(vec![
            ("input", x.clone()),
            ("mask", Tensor::from(array![true, false].into_dyn())),
        ]);
        let out = call("masked_select", &Args::default(), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![1.0f64].into_dyn()));
    }

    #[test]
    fn masked_scatter_broadcasts_out_of_place_but_not_in_place() {
        let x = Tensor::from(array![1i16, 2].into_dyn());
        let ins = inputs(vec![
            ("input", x.clone()),
            (
                "mask",
                Tensor::from(array![[true, false], [false, true]].into_dyn()),
            ),
            ("source", Tensor::from(array![7i16, 8].into_dyn())),
        ]);
        let out = call("masked_scatter", &Args::default(), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![[7i16, 2], [1, 8]].into_dyn()));
        let mut target = x.clone();
        let e =
            call_inplace("masked_scatter", &Args::default(), target.view_mut(), &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert_eq!(target, x);
    }
}
