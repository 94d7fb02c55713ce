//! The ONNX ops of the conformance format, dynamically typed: inputs `data`, `indices`,
//! `updates`; arguments `axis` (default 0), `reduction` (default `none`), `batch_dims` (default 0).

use ndarray::ArrayViewD;

use ndarray::ArrayD;

use super::Read;
use super::{Args, Inputs, Tensor, TensorElem, TensorView, index_dtype_error, input, same_dtype};
use super::{with_index_tensor, with_view};
use crate::error::{Error, Result};
use crate::index::IndexElem;
use crate::kernels::words::Moved;
use crate::ops::nd::Reduction;
use crate::ops::onnx as typed;

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

pub(crate) fn call(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let data = input(inputs, "data")?;
    let indices = input(inputs, "indices")?;
    // The reads only move elements: they run on the moved type (see `Read`).
    if matches!(
        op,
        "onnx_gather_elements" | "onnx_gather" | "onnx_gather_nd"
    ) {
        return with_index_tensor!(indices, i => {
            let read = match op {
                "onnx_gather_elements" => Read::OnnxGatherElements(axis(args)?, i),
                "onnx_gather" => Read::OnnxGather(axis(args)?, i),
                _ => Read::OnnxGatherNd(batch_dims(op, args)?, i),
            };
            read.on(&data)
        }, _ => Err(index_dtype_error(op, "indices", &indices)));
    }
    with_view!(data, x => {
        with_index_tensor!(indices, i => typed_call(op, args, inputs, x, i),
            _ => Err(index_dtype_error(op, "indices", &indices)))
    })
}

fn typed_call<T: TensorElem + Moved, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    i: &ArrayViewD<'_, I>,
) -> Result<Tensor> {
    let updates = || same_dtype::<T>(op, "updates", &input(inputs, "updates")?);
    Ok(match op {
        "onnx_scatter_elements" => T::wrap(typed::onnx_scatter_elements(
            x,
            i,
            &updates()?,
            axis(args)?,
            reduction(args)?,
        )?),
        "onnx_scatter_nd" => T::wrap(typed::onnx_scatter_nd(x, i, &updates()?, reduction(args)?)?),
        _ => return Err(super::unknown_op(op)),
    })
}

/// The gradients of an ONNX op: `grad_data` (and `grad_updates` for the scatters), with
/// negative indices wrapped as in the forward. ScatterND's mul/max/min have none.
pub(crate) fn grad(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    g: &TensorView<'_>,
) -> Result<Vec<(String, Tensor)>> {
    let data = input(inputs, "data")?;
    let indices = input(inputs, "indices")?;
    macro_rules! float {
        ($x:ident => $body:expr) => {
            match &data {
                TensorView::F16($x) => $body,
                TensorView::BF16($x) => $body,
                TensorView::F32($x) => $body,
                TensorView::F64($x) => $body,
                other => Err(Error::invalid(format!(
                    "{op}: gradients need a floating-point data tensor, but got {}",
                    other.dtype()
                ))),
            }
        };
    }
    float!(x => with_index_tensor!(indices, i => typed_grad(op, args, inputs, x, i, g),
        _ => Err(index_dtype_error(op, "indices", &indices))))
}

/// `indices` (tuples in the last axis) with every coordinate wrapped into `0..data.shape[first + j]`
/// (out-of-range values are left for the op to report).
fn wrap_tuples<I: IndexElem>(
    indices: &ArrayViewD<'_, I>,
    shape: &[usize],
    first: usize,
) -> ArrayD<i64> {
    let q = indices.ndim();
    ArrayD::from_shape_fn(indices.raw_dim(), |c| {
        let v = indices[&c].to_i64();
        let n = q
            .checked_sub(1)
            .and_then(|l| shape.get(first + c[l]))
            .copied()
            .unwrap_or(0) as i64;
        if v < 0 && v >= -n { v + n } else { v }
    })
}

fn typed_grad<T: crate::grad::GradFloat + TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    i: &ArrayViewD<'_, I>,
    g: &TensorView<'_>,
) -> Result<Vec<(String, Tensor)>> {
    use crate::grad;
    use crate::ops::bounds::OutOfBounds::Wrap;
    let go = crate::Options::new().bounds(Wrap).grad();
    let g = same_dtype::<T>(op, "grad_output", g)?;
    let named = |n: &str, a: ArrayD<T>| (n.to_string(), T::wrap(a));
    let updates = || same_dtype::<T>(op, "updates", &input(inputs, "updates")?);
    Ok(match op {
        "onnx_gather_elements" => vec![named(
            "grad_data",
            go.gather(&g, x.raw_dim(), axis(args)?, i)?,
        )],
        "onnx_gather" => vec![named(
            "grad_data",
            go.select_batched(&g, x.raw_dim(), axis(args)?, i, 0)?,
        )],
        "onnx_scatter_elements" => {
            let u = updates()?;
            let r = match reduction(args)? {
                Reduction::None => go.scatter(&g, axis(args)?, i, u.raw_dim())?,
                Reduction::Add => go.scatter_add(&g, axis(args)?, i, u.raw_dim())?,
                red => {
                    let reduce = match red {
                        Reduction::Mul => crate::Reduce::Prod,
                        Reduction::Max => crate::Reduce::Amax,
                        _ => crate::Reduce::Amin,
                    };
                    go.scatter_reduce(&g, x, axis(args)?, i, &u, reduce, true)?
                }
            };
            vec![named("grad_data", r.input), named("grad_updates", r.src)]
        }
        "onnx_gather_nd" => {
            let b = batch_dims(op, args)?;
            let w = wrap_tuples(i, x.shape(), b);
            vec![named("grad_data", grad::gather_nd(&g, x.raw_dim(), &w, b)?)]
        }
        "onnx_scatter_nd" => {
            let w = wrap_tuples(i, x.shape(), 0);
            let (dd, du) = grad::scatter_nd(&g, &w, updates()?.raw_dim(), reduction(args)?)?;
            vec![named("grad_data", dd), named("grad_updates", du)]
        }
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
    fn onnx_gradients_follow_the_wrapped_indices() {
        use crate::dynamic::call_grad;
        let ins = inputs(vec![
            ("data", Tensor::from(array![[1.0f64, 2.0, 3.0]].into_dyn())),
            ("indices", Tensor::from(array![[-1i64, 0]].into_dyn())),
            ("updates", Tensor::from(array![[5.0f64, 6.0]].into_dyn())),
        ]);
        let mut args = Args::default();
        args.set("axis", Arg::Int(1));
        let g = Tensor::from(array![[1.0f64, 10.0]].into_dyn());
        let d = call_grad("onnx_gather_elements", &args, &ins, &g.view()).unwrap();
        assert_eq!(d[0].0, "grad_data");
        assert_eq!(d[0].1, Tensor::from(array![[10.0f64, 0.0, 1.0]].into_dyn()));
        args.set("reduction", Arg::Str("mul".into()));
        let g3 = Tensor::from(array![[1.0f64, 1.0, 1.0]].into_dyn());
        let d = call_grad("onnx_scatter_elements", &args, &ins, &g3.view()).unwrap();
        // out = [1 * 6, 2, 3 * 5]: d data = [6, 1, 5], d updates = [3, 1].
        assert_eq!(d[0].1, Tensor::from(array![[6.0f64, 1.0, 5.0]].into_dyn()));
        assert_eq!(d[1].1, Tensor::from(array![[3.0f64, 1.0]].into_dyn()));
        let ins = inputs(vec![
            (
                "data",
                Tensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn()),
            ),
            (
                "indices",
                Tensor::from(array![[-1i64, -1], [0, 1]].into_dyn()),
            ),
            ("updates", Tensor::from(array![5.0f32, 6.0].into_dyn())),
        ]);
        let g = Tensor::from(array![1.0f32, 10.0].into_dyn());
        let d = call_grad("onnx_gather_nd", &Args::default(), &ins, &g.view()).unwrap();
        assert_eq!(
            d[0].1,
            Tensor::from(array![[0.0f32, 10.0], [0.0, 1.0]].into_dyn())
        );
        let g = Tensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].into_dyn());
        let d = call_grad("onnx_scatter_nd", &Args::default(), &ins, &g.view()).unwrap();
        assert_eq!(
            d[0].1,
            Tensor::from(array![[1.0f32, 0.0], [3.0, 0.0]].into_dyn())
        );
        assert_eq!(d[1].1, Tensor::from(array![4.0f32, 2.0].into_dyn()));
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
