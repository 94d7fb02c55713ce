//! Gradients by op name, dynamically typed: [`call_grad`] runs the vector-Jacobian product of an
//! op (see [`crate::grad`]) on [`Tensor`]s.

use ndarray::ArrayD;

use super::scatter::empty_index_or_error;
use super::{Arg, Args, Tensor, TensorElem, Tensors, input};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::grad::{self, GradFloat, Parity};
use crate::index::IndexElem;
use crate::ops::scatter::{LegacyReduce, Reduce};
use crate::with_index_tensor;

/// Runs `$body` with `$a` bound to the typed array of a float [`Tensor`]; other dtypes are an
/// error (they have no gradient).
macro_rules! with_float_tensor {
    ($op:expr, $t:expr, $a:ident => $body:expr) => {
        match $t {
            Tensor::F16($a) => $body,
            Tensor::BF16($a) => $body,
            Tensor::F32($a) => $body,
            Tensor::F64($a) => $body,
            other => Err(not_float($op, other.dtype())),
        }
    };
}

fn not_float(op: &str, dtype: DType) -> Error {
    Error::invalid(format!(
        "{op}: gradients need a floating-point input, but got {dtype}"
    ))
    .with_hint("only float16, bfloat16, float32 and float64 arrays have gradients; convert the input first")
}

/// The ops [`call_grad`] differentiates, with their differentiable inputs.
///
/// ```
/// let (_, inputs) = gather::dynamic::GRAD_OPS.iter().find(|(op, _)| *op == "scatter_add").unwrap();
/// assert_eq!(*inputs, &["input", "src"][..]);
/// ```
pub const GRAD_OPS: &[(&str, &[&str])] = &[
    ("gather", &["input"]),
    ("scatter", &["input", "src"]),
    ("scatter_add", &["input", "src"]),
    ("scatter_reduce", &["input", "src"]),
];

/// The gradients of `op` (PyTorch's name) called with `args` and `inputs`, given the gradient of
/// its output: one `grad_<name>` tensor per differentiable input (`grad_input`, `grad_src`,
/// `grad_source`), each of that input's shape and dtype. Same as [`call_grad_with`] with
/// [`Parity::Correct`].
///
/// `grad_output` has the output's shape and the input's dtype. The forward is re-run where the
/// gradient needs its result. Index and mask inputs have no gradient; integer and bool inputs
/// neither (an error).
///
/// ```
/// use gather::dynamic::{call_grad, Arg, Args, Tensor};
/// use ndarray::array;
/// use std::collections::BTreeMap;
///
/// let mut inputs = BTreeMap::new();
/// inputs.insert("input".to_string(), Tensor::from(array![[1.0f64, 2.0, 3.0]].into_dyn()));
/// inputs.insert("index".to_string(), Tensor::from(array![[2i64, 2]].into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(1));
/// let g = Tensor::from(array![[1.0f64, 10.0]].into_dyn());
/// let grads = call_grad("gather", &args, &inputs, &g)?;
/// assert_eq!(grads[0].0, "grad_input");
/// assert_eq!(grads[0].1, Tensor::from(array![[0.0f64, 0.0, 11.0]].into_dyn()));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn call_grad(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    grad_output: &Tensor,
) -> Result<Vec<(String, Tensor)>> {
    call_grad_with(op, args, inputs, grad_output, Parity::Correct)
}

/// [`call_grad`] with the choice of [`Parity`] (`Parity::PyTorch` reproduces PyTorch's
/// `include_self = false` tie bug of `amax`/`amin`).
///
/// ```
/// use gather::dynamic::{call_grad_with, Arg, Args, Tensor};
/// use gather::grad::Parity;
/// use ndarray::array;
/// use std::collections::BTreeMap;
///
/// let mut inputs = BTreeMap::new();
/// inputs.insert("input".to_string(), Tensor::from(array![3.0f64, 5.0].into_dyn()));
/// inputs.insert("index".to_string(), Tensor::from(array![0i64, 0].into_dyn()));
/// inputs.insert("src".to_string(), Tensor::from(array![3.0f64, 1.0].into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// args.set("reduce", Arg::Str("amax".into()));
/// args.set("include_self", Arg::Bool(false));
/// let g = Tensor::from(array![1.0f64, 1.0].into_dyn());
/// let torch = call_grad_with("scatter_reduce", &args, &inputs, &g, Parity::PyTorch)?;
/// assert_eq!(torch[1], ("grad_src".to_string(), Tensor::from(array![0.5f64, 0.0].into_dyn())));
/// let ours = call_grad_with("scatter_reduce", &args, &inputs, &g, Parity::Correct)?;
/// assert_eq!(ours[1], ("grad_src".to_string(), Tensor::from(array![1.0f64, 0.0].into_dyn())));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn call_grad_with(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    grad_output: &Tensor,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    if !GRAD_OPS.iter().any(|(n, _)| *n == op) {
        return Err(no_grad(op));
    }
    let x = input(inputs, "input")?;
    with_float_tensor!(op, x, x => typed(op, args, inputs, x, grad_output, parity))
}

fn no_grad(op: &str) -> Error {
    if super::OPS.iter().any(|(n, _)| *n == op) {
        let why = match op {
            "argsort" => "its output is an integer index".to_string(),
            _ => format!("no gradient of {op} is available"),
        };
        Error::invalid(format!("{op} is not differentiable: {why}"))
    } else {
        super::unknown_op(op)
    }
}

fn named<T: TensorElem>(name: &str, a: ndarray::Array<T, ndarray::IxDyn>) -> (String, Tensor) {
    (name.to_string(), T::wrap(a))
}

/// `t` as an array of `T`, or an error naming `what`.
fn same<'a, T: TensorElem>(op: &str, what: &str, t: &'a Tensor) -> Result<&'a ArrayD<T>> {
    T::unwrap_ref(t).ok_or_else(|| {
        Error::invalid(format!(
            "{op}: {what} must have the input's dtype {}, but got {}",
            T::DTYPE,
            t.dtype()
        ))
    })
}

fn typed<T: GradFloat + TensorElem>(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    x: &ArrayD<T>,
    grad_output: &Tensor,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    let g = same::<T>(op, "grad_output", grad_output)?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    with_index_tensor!(index, i => scatter_family(op, args, inputs, x, g, dim, i, parity),
    _ => {
        let i = empty_index_or_error(op, index, x.ndim(), dim)?;
        scatter_family(op, args, inputs, x, g, dim, &i, parity)
    })
}

#[allow(clippy::too_many_arguments)]
fn scatter_family<T: GradFloat + TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &Tensors,
    x: &ArrayD<T>,
    g: &ArrayD<T>,
    dim: isize,
    index: &ArrayD<I>,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    let src = || -> Result<&ArrayD<T>> { same::<T>(op, "src", input(inputs, "src")?) };
    let pair = |r: grad::ScatterGrad<T, ndarray::IxDyn, ndarray::IxDyn>| {
        Ok(vec![named("grad_input", r.input), named("grad_src", r.src)])
    };
    match op {
        "gather" => Ok(vec![named(
            "grad_input",
            grad::gather(g, x.raw_dim(), dim, index)?,
        )]),
        "scatter" => {
            let reduce = match args.get("reduce") {
                None | Some(Arg::None) => None,
                Some(Arg::Str(s)) => Some(s.parse::<LegacyReduce>()?),
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "scatter: reduce must be a string, got {other:?}"
                    )));
                }
            };
            match (inputs.contains_key("src"), reduce) {
                (true, None) => pair(grad::scatter(g, dim, index, src()?.raw_dim())?),
                (true, Some(r)) => {
                    let src = src()?;
                    let out = crate::scatter_legacy(x, dim, index, src, r)?;
                    pair(grad::scatter_legacy(g, x, dim, index, src, r, &out)?)
                }
                (false, None) => Ok(vec![named(
                    "grad_input",
                    grad::scatter_value(g, dim, index)?,
                )]),
                (false, Some(r)) => {
                    let value = T::from_scalar(args.scalar("value")?)?;
                    let out = crate::scatter_value_legacy(x, dim, index, value, r)?;
                    Ok(vec![named(
                        "grad_input",
                        grad::scatter_value_legacy(g, x, dim, index, value, r, &out)?,
                    )])
                }
            }
        }
        "scatter_add" => pair(grad::scatter_add(g, dim, index, src()?.raw_dim())?),
        "scatter_reduce" => {
            let src = src()?;
            let reduce: Reduce = args.str("reduce")?.parse()?;
            let include_self = args.bool_or("include_self", true)?;
            let out = crate::scatter_reduce(x, dim, index, src, reduce, include_self)?;
            pair(grad::scatter_reduce_with(
                g,
                x,
                dim,
                index,
                src,
                reduce,
                include_self,
                &out,
                parity,
            )?)
        }
        _ => Err(no_grad(op)),
    }
}
