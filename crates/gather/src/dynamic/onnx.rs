//! The ONNX ops of the conformance format, dynamically typed: inputs `data`, `indices`,
//! `updates`; arguments `axis` (default 0), `reduction` (default `none`), `batch_dims` (default 0).

use ndarray::ArrayD;

use super::{Args, Tensor, TensorElem, Tensors, index_dtype_error, input, same_dtype};
use crate::error::{Error, Result};
use crate::index::IndexElem;
use crate::ops::nd::Reduction;
use crate::ops::onnx as typed;
use crate::{with_index_tensor, with_tensor};

/// The ONNX ops [`call`](super::call) runs (none has an in-place form).
pub const ONNX_OPS: &[&str] = &[
    "onnx_gather_elements",
    "onnx_scatter_elements",
    "onnx_gather",
    "onnx_gather_nd",
    "onnx_scatter_nd",
];

fn axis(args: &Args) -> Result<isize> {
    Ok(args.opt_int("axis")?.unwrap_or(0) as isize)
}

fn reduction(args: &Args) -> Result<Reduction> {
    match args.get("reduction") {
        None | Some(super::Arg::None) => Ok(Reduction::None),
        _ => args.str("reduction")?.parse(),
    }
}

fn batch_dims(op: &str, args: &Args) -> Result<usize> {
    let b = args.opt_int("batch_dims")?.unwrap_or(0);
    usize::try_from(b).map_err(|_| {
        Error::invalid(format!(
            "{op}: batch_dims must be non-negative, but got {b}"
        ))
    })
}

pub(crate) fn call(op: &str, args: &Args, inputs: &Tensors) -> Result<Tensor> {
    let data = input(inputs, "data")?;
    let indices = input(inputs, "indices")?;
    with_tensor!(data, x => {
        with_index_tensor!(indices, i => typed_call(op, args, inputs, x, i),
            _ => Err(index_dtype_error(op, "indices", indices)))
    })
}

fn typed_call<T: TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    x: &ArrayD<T>,
    i: &ArrayD<I>,
) -> Result<Tensor> {
    let updates = || same_dtype::<T>(op, "updates", input(inputs, "updates")?);
    Ok(match op {
        "onnx_gather_elements" => T::wrap(typed::onnx_gather_elements(x, i, axis(args)?)?),
        "onnx_scatter_elements" => T::wrap(typed::onnx_scatter_elements(
            x,
            i,
            updates()?,
            axis(args)?,
            reduction(args)?,
        )?),
        "onnx_gather" => T::wrap(typed::onnx_gather(x, i, axis(args)?)?),
        "onnx_gather_nd" => T::wrap(typed::onnx_gather_nd(x, i, batch_dims(op, args)?)?),
        "onnx_scatter_nd" => T::wrap(typed::onnx_scatter_nd(x, i, updates()?, reduction(args)?)?),
        _ => return Err(super::unknown_op(op)),
    })
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;
    use crate::dynamic::{Arg, Args, Tensor, Tensors, call};
    use ndarray::array;

    fn inputs(pairs: Vec<(&str, Tensor)>) -> Tensors {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn onnx_ops_run_by_name_with_their_onnx_input_names() {
        let data = Tensor::from(array![[1.0f32, 2.0, 3.0, 4.0, 5.0]].into_dyn());
        let ins = inputs(vec![
            ("data", data.clone()),
            ("indices", Tensor::from(array![[1i64, -3]].into_dyn())),
            ("updates", Tensor::from(array![[1.1f32, 2.1]].into_dyn())),
        ]);
        let mut args = Args::default();
        args.set("axis", Arg::Int(1));
        args.set("reduction", Arg::Str("none".into()));
        let out = call("onnx_scatter_elements", &args, &ins).unwrap();
        assert_eq!(out[0].0, "output");
        assert_eq!(
            out[0].1,
            Tensor::from(array![[1.0f32, 1.1, 2.1, 4.0, 5.0]].into_dyn())
        );
        let out = call("onnx_gather_elements", &args, &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![[2.0f32, 3.0]].into_dyn()));
        let out = call("onnx_gather", &args, &ins).unwrap();
        assert_eq!(out[0].1.shape(), &[1, 1, 2]);
        let ins = inputs(vec![
            ("data", Tensor::from(array![[0i32, 1], [2, 3]].into_dyn())),
            (
                "indices",
                Tensor::from(array![[0i32, 0], [-1, -1]].into_dyn()),
            ),
            ("updates", Tensor::from(array![5i32, 6].into_dyn())),
        ]);
        let out = call("onnx_gather_nd", &Args::default(), &ins).unwrap();
        assert_eq!(out[0].1, Tensor::from(array![0i32, 3].into_dyn()));
        let mut args = Args::default();
        args.set("reduction", Arg::Str("mul".into()));
        let out = call("onnx_scatter_nd", &args, &ins).unwrap();
        assert_eq!(
            out[0].1,
            Tensor::from(array![[0i32, 1], [2, 18]].into_dyn())
        );
        args.set("reduction", Arg::Str("sum".into()));
        let e = call("onnx_scatter_nd", &args, &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let ins = inputs(vec![
            ("data", Tensor::from(array![[0i32, 1], [2, 3]].into_dyn())),
            ("indices", Tensor::from(array![[0i32, 0]].into_dyn())),
            ("updates", Tensor::from(array![5i64].into_dyn())),
        ]);
        args.set("reduction", Arg::Str("add".into()));
        let e = call("onnx_scatter_nd", &args, &ins).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
