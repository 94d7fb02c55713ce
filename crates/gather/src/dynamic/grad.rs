//! Gradients by op name, dynamically typed: [`call_grad`] runs the vector-Jacobian product of an
//! op (see [`crate::grad`]) on [`Tensor`]s.

use ndarray::ArrayViewD;

use super::scatter::empty_index_or_error;
use super::with_index_tensor;
use super::{Arg, Args, Inputs, Tensor, TensorElem, TensorView, input};
use crate::element::{DType, Scalar};
use crate::error::{Error, Result};
use crate::grad::{self, GradFloat, Parity};
use crate::index::IndexElem;
use crate::ops::index::{check_dim_and_vector, check_select_shapes, parse_index_reduce};
use crate::ops::scatter::{LegacyReduce, Reduce};

/// Runs `$body` with `$a` bound to the typed array of a float [`Tensor`]; other dtypes are an
/// error (they have no gradient).
macro_rules! with_float_tensor {
    ($op:expr, $t:expr, $a:ident => $body:expr) => {
        match &$t {
            TensorView::F16($a) => $body,
            TensorView::BF16($a) => $body,
            TensorView::F32($a) => $body,
            TensorView::F64($a) => $body,
            other => Err(crate::grad::not_float($op, other.dtype())),
        }
    };
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
    ("index_select", &["input"]),
    ("take", &["input"]),
    ("take_along_dim", &["input"]),
    ("index_add", &["input", "source"]),
    ("index_copy", &["input", "source"]),
    ("index_fill", &["input"]),
    ("index_reduce", &["input", "source"]),
    ("masked_select", &["input"]),
    ("masked_scatter", &["input", "source"]),
    ("put", &["input", "source"]),
    ("topk", &["input"]),
    ("sort", &["input"]),
    ("repeat_interleave", &["input"]),
    ("select_batched", &["input"]),
];

/// The dtype checks of [`call_grad`] once the input is known to be a float: `grad_output` must
/// have the input's dtype, a mask must be bool, and the other differentiable inputs of `op`
/// ([`GRAD_OPS`]: src, source) the input's dtype, the last two in the forward's words.
/// `dtype_of(name)` is the dtype of the input so named, `None` where there is none. Public for
/// the crates that run the gradients on other devices (`gather-cuda`), so that a bad call fails
/// there with the same error, checked in the same order.
///
/// ```
/// use gather::DType;
/// use gather::dynamic::check_grad_dtypes;
/// let dtypes = |name: &str| (name == "src").then_some(DType::F64);
/// let e = check_grad_dtypes("scatter_add", DType::F32, DType::F32, &dtypes).unwrap_err();
/// assert!(e.message().starts_with("scatter_add: expected self and src to have the same dtype"));
/// assert!(check_grad_dtypes("gather", DType::F32, DType::F32, &dtypes).is_ok());
/// ```
pub fn check_grad_dtypes(
    op: &str,
    input: DType,
    grad_output: DType,
    dtype_of: &dyn Fn(&str) -> Option<DType>,
) -> Result<()> {
    if grad_output != input {
        return Err(Error::invalid(format!(
            "{op}: grad_output must have the input's dtype {input}, but got {grad_output}"
        )));
    }
    if matches!(op, "masked_select" | "masked_scatter") {
        if let Some(m) = dtype_of("mask").filter(|&m| m != DType::Bool) {
            return Err(crate::error::mask_dtype(op, m));
        }
    }
    // put's forward names this error as PyTorch does.
    let forward = if op == "put" { "put_()" } else { op };
    let others = GRAD_OPS
        .iter()
        .find(|(n, _)| *n == op)
        .map_or(&[][..], |(_, i)| i);
    for &name in others.iter().filter(|&&n| n != "input") {
        if let Some(d) = dtype_of(name).filter(|&d| d != input) {
            return Err(crate::error::dtype_mismatch(forward, name, input, d));
        }
    }
    Ok(())
}

/// The gradients of `op` (PyTorch's name) called with `args` and `inputs`, given the gradient of
/// its output: one `grad_<name>` tensor per differentiable input (`grad_input`, `grad_src`,
/// `grad_source`; `grad_data` and `grad_updates` for the ONNX ops), each of that input's shape
/// and dtype. Same as [`call_grad_with`] with
/// [`Parity::Correct`].
///
/// `grad_output` has the output's shape and the input's dtype (for `sort`/`topk`: the shape of
/// `values`). The forward is re-run where the gradient needs its result (the reductions) or its
/// indices (`sort`, `topk`). Index, mask and repeats inputs have no gradient; integer and bool
/// inputs neither (an error), nor does `argsort` (its output is an index). The scatter value form
/// and `index_fill` give `grad_input` only (the value is a scalar).
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
/// let grads = call_grad("gather", &args, &inputs, &g.view())?;
/// assert_eq!(grads[0].0, "grad_input");
/// assert_eq!(grads[0].1, Tensor::from(array![[0.0f64, 0.0, 11.0]].into_dyn()));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn call_grad(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    grad_output: &TensorView<'_>,
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
/// let torch = call_grad_with("scatter_reduce", &args, &inputs, &g.view(), Parity::PyTorch)?;
/// assert_eq!(torch[1], ("grad_src".to_string(), Tensor::from(array![0.5f64, 0.0].into_dyn())));
/// let ours = call_grad_with("scatter_reduce", &args, &inputs, &g.view(), Parity::Correct)?;
/// assert_eq!(ours[1], ("grad_src".to_string(), Tensor::from(array![1.0f64, 0.0].into_dyn())));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn call_grad_with(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    grad_output: &TensorView<'_>,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    if super::ONNX_OPS.contains(&op) {
        return super::onnx::grad(op, args, inputs, grad_output);
    }
    if !GRAD_OPS.iter().any(|(n, _)| *n == op) {
        return Err(no_grad(op));
    }
    if op == "repeat_interleave" && inputs.tensor("input").is_none() {
        return Err(Error::invalid(
            "repeat_interleave (repeats only) is not differentiable: its output is an integer index",
        ));
    }
    let x = input(inputs, "input")?;
    if let Some(dx) = gather_f32_i32(op, args, inputs, &x, grad_output) {
        return Ok(vec![named("grad_input", dx?)]);
    }
    with_float_tensor!(op, x, x => typed(op, args, inputs, x, grad_output, parity))
}

/// The gradient of gather on float32 values and an int32 index (JAX's default types): a
/// scatter_add on the index as it is, the instance the forward scatter_add of these types runs
/// (see `dynamic::scatter`), where the other types widen the index to an int64 copy first.
fn gather_f32_i32(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &TensorView<'_>,
    grad_output: &TensorView<'_>,
) -> Option<Result<ndarray::ArrayD<f32>>> {
    if op != "gather" || super::bounds::requested(args) {
        return None;
    }
    let (TensorView::F32(x), TensorView::F32(g), Some(TensorView::I32(i))) =
        (x, grad_output, inputs.tensor("index"))
    else {
        return None;
    };
    Some(
        args.dim()
            .and_then(|dim| super::on_compact(&i, |i| grad::gather(g, x.raw_dim(), dim, i))),
    )
}

fn no_grad(op: &str) -> Error {
    if super::OPS.iter().any(|(n, _)| *n == op) {
        Error::invalid(format!(
            "{op} is not differentiable: its output is an integer index"
        ))
        .with_hint("differentiate through the op that uses the index (gather, sort, topk ...)")
    } else {
        super::unknown_op(op)
    }
}

fn named<T: TensorElem>(name: &str, a: ndarray::Array<T, ndarray::IxDyn>) -> (String, Tensor) {
    (name.to_string(), T::wrap(a))
}

/// `t` as an array of `T`, or an error naming `what`.
fn same<'a, T: TensorElem>(op: &str, what: &str, t: &TensorView<'a>) -> Result<ArrayViewD<'a, T>> {
    T::view_ref(t).cloned().ok_or_else(|| {
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
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    grad_output: &TensorView<'_>,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    check_grad_dtypes(op, T::DTYPE, grad_output.dtype(), &|name| {
        inputs.tensor(name).map(|t| t.dtype())
    })?;
    let g = same::<T>(op, "grad_output", grad_output)?;
    match op {
        "masked_select" | "masked_scatter" => return masked(op, inputs, x, &g),
        "sort" | "topk" => return sort_like(op, args, x, &g),
        "repeat_interleave" => return repeat(args, inputs, x, &g),
        _ => {}
    }
    let index = input(inputs, "index")?;
    let scatter_like = matches!(op, "gather" | "scatter" | "scatter_add" | "scatter_reduce");
    with_index_tensor!(index, i => {
        if super::bounds::requested(args) {
            super::bounds::grad(op, args, inputs, x, &g, i, parity)
        } else if scatter_like {
            scatter_family(op, args, inputs, x, &g, args.dim()?, i, parity)
        } else {
            indexed(op, args, inputs, x, &g, i, parity)
        }
    },
        _ => {
            if scatter_like {
                let dim = args.dim()?;
                let i = empty_index_or_error(op, &index, x.ndim(), dim)?;
                scatter_family(op, args, inputs, x, &g, dim, &i.view(), parity)
            } else {
                Err(super::index_dtype_error(op, "index", &index))
            }
        })
}

/// The index_* family, take, take_along_dim and put.
fn indexed<T: GradFloat + TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
    index: &ArrayViewD<'_, I>,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    let source =
        || -> Result<ArrayViewD<'_, T>> { same::<T>(op, "source", &input(inputs, "source")?) };
    // dim and the index's rank before the gradients see the index widened to i64, so that the
    // error names the index's own dtype, as the forwards' do.
    let index_dtype = input(inputs, "index")?.dtype();
    let vector = |name: &str, shape: &[usize], dim: isize| {
        check_dim_and_vector(name, shape, dim, index.shape(), index_dtype).map(|_| ())
    };
    let pair = |r: grad::SourceGrad<T, ndarray::IxDyn, ndarray::IxDyn>| {
        Ok(vec![
            named("grad_input", r.input),
            named("grad_source", r.source),
        ])
    };
    match op {
        "index_select" => {
            let dim = args.dim()?;
            let op = "grad::index_select";
            check_select_shapes(op, x.shape(), dim, index.shape(), index_dtype)?;
            Ok(vec![named(
                "grad_input",
                grad::index_select(g, x.raw_dim(), dim, index)?,
            )])
        }
        "index_add" => {
            let alpha = match args.get("alpha") {
                None => Scalar::Int(1),
                Some(_) => args.scalar("alpha")?,
            };
            let alpha = T::from_scalar(alpha)?;
            let (dim, source_shape) = (args.dim()?, source()?.raw_dim());
            vector("grad::index_add", g.shape(), dim)?;
            pair(grad::index_add(g, dim, index, source_shape, alpha)?)
        }
        "index_copy" => {
            let (dim, source_shape) = (args.dim()?, source()?.raw_dim());
            vector("grad::index_copy", g.shape(), dim)?;
            pair(grad::index_copy(g, dim, index, source_shape)?)
        }
        "index_fill" => {
            let dim = args.dim()?;
            vector("grad::index_fill", g.shape(), dim)?;
            Ok(vec![named("grad_input", grad::index_fill(g, dim, index)?)])
        }
        "index_reduce" => {
            let reduce = parse_index_reduce(args.str("reduce")?)
                .map_err(|e| crate::error::in_grad("index_reduce", e))?;
            let include_self = args.bool_or("include_self", true)?;
            let dim = args.dim()?;
            let source = source()?;
            vector("grad::index_reduce", x.shape(), dim)?;
            let out = crate::index_reduce(x, dim, index, &source, reduce, include_self)
                .map_err(|e| crate::error::in_grad("index_reduce", e))?;
            pair(grad::index_reduce_with(
                g,
                x,
                dim,
                index,
                &source,
                reduce,
                include_self,
                &out,
                parity,
            )?)
        }
        "take" => Ok(vec![named(
            "grad_input",
            grad::take(g, x.raw_dim(), index)?,
        )]),
        "take_along_dim" => {
            let dim = args.opt_int("dim")?.map(|d| d as isize);
            Ok(vec![named(
                "grad_input",
                grad::take_along_dim(g, x.raw_dim(), index, dim)?,
            )])
        }
        "select_batched" => Ok(vec![named(
            "grad_input",
            grad::select_batched(
                g,
                x.raw_dim(),
                args.dim()?,
                index,
                super::take::batch_dims(args)?,
            )?,
        )]),
        "put" => {
            let accumulate = args.bool_or("accumulate", false)?;
            pair(grad::put(g, index, source()?.raw_dim(), accumulate)?)
        }
        _ => Err(no_grad(op)),
    }
}

fn masked<T: GradFloat + TensorElem>(
    op: &str,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
) -> Result<Vec<(String, Tensor)>> {
    let mask = match input(inputs, "mask")? {
        TensorView::Bool(m) => m,
        other => return Err(crate::error::mask_dtype(op, other.dtype())),
    };
    if op == "masked_select" {
        return Ok(vec![named(
            "grad_input",
            grad::masked_select(g, x.raw_dim(), &mask)?,
        )]);
    }
    let source = same::<T>(op, "source", &input(inputs, "source")?)?;
    let r = grad::masked_scatter(g, x.raw_dim(), &mask, source.raw_dim())?;
    Ok(vec![
        named("grad_input", r.input),
        named("grad_source", r.source),
    ])
}

fn opt_bool(args: &Args, name: &str, default: bool) -> Result<bool> {
    match args.get(name) {
        None | Some(Arg::None) => Ok(default),
        _ => args.bool_or(name, default),
    }
}

/// sort and topk: the forward gives the indices the values came from.
fn sort_like<T: GradFloat + TensorElem>(
    op: &str,
    args: &Args,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
) -> Result<Vec<(String, Tensor)>> {
    let dim = args.opt_int("dim")?.map_or(-1, |d| d as isize);
    let indices = if op == "sort" {
        let descending = opt_bool(args, "descending", false)?;
        let stable = opt_bool(args, "stable", false)?;
        crate::sort(x, dim, descending, stable)?.1
    } else {
        let k = args.int("k")?;
        // The forward's check of k, in its words (k is then in 0..=size).
        crate::ops::sort::check_topk(x.shape(), k, dim, T::DTYPE)?;
        let k = k as usize;
        let largest = opt_bool(args, "largest", true)?;
        let sorted = opt_bool(args, "sorted", true)?;
        crate::topk(x, k, dim, largest, sorted)?.1
    };
    let dx = if op == "sort" {
        grad::sort(g, x.raw_dim(), dim, &indices)?
    } else {
        grad::topk(g, x.raw_dim(), dim, &indices)?
    };
    Ok(vec![named("grad_input", dx)])
}

fn repeat<T: GradFloat + TensorElem>(
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
) -> Result<Vec<(String, Tensor)>> {
    let op = "repeat_interleave";
    let (dim, _) = super::repeat_interleave_args(args)?;
    let dx = match inputs.tensor("repeats") {
        Some(r) => with_index_tensor!(r, ri => grad::repeat_interleave(g, x.raw_dim(), ri, dim)?,
            _ => return Err(super::index_dtype_error(op, "repeats", &r))),
        None => {
            let grad_op = "grad::repeat_interleave";
            let r = super::repeat_interleave_count(grad_op, args, x.ndim(), dim)?;
            grad::repeat_interleave_scalar(g, x.raw_dim(), r, dim)?
        }
    };
    Ok(vec![named("grad_input", dx)])
}

#[allow(clippy::too_many_arguments)]
fn scatter_family<T: GradFloat + TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    inputs: &dyn Inputs,
    x: &ArrayViewD<'_, T>,
    g: &ArrayViewD<'_, T>,
    dim: isize,
    index: &ArrayViewD<'_, I>,
    parity: Parity,
) -> Result<Vec<(String, Tensor)>> {
    let src = || -> Result<ArrayViewD<'_, T>> { same::<T>(op, "src", &input(inputs, "src")?) };
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
            match (inputs.tensor("src").is_some(), reduce) {
                (true, None) => pair(grad::scatter(g, dim, index, src()?.raw_dim())?),
                (true, Some(r)) => {
                    let src = src()?;
                    let out = crate::ops::scatter::scatter_legacy(x, dim, index, &src, r)
                        .map_err(|e| crate::error::in_grad("scatter", e))?;
                    pair(grad::scatter_legacy(g, x, dim, index, &src, r, &out)?)
                }
                (false, None) => Ok(vec![named(
                    "grad_input",
                    grad::scatter_value(g, dim, index)?,
                )]),
                (false, Some(r)) => {
                    let value = T::from_scalar(args.scalar("value")?)?;
                    let out = crate::ops::scatter::scatter_legacy(x, dim, index, value, r)
                        .map_err(|e| crate::error::in_grad("scatter", e))?;
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
            let out = crate::scatter_reduce(x, dim, index, &src, reduce, include_self)
                .map_err(|e| crate::error::in_grad("scatter_reduce", e))?;
            pair(grad::scatter_reduce_with(
                g,
                x,
                dim,
                index,
                &src,
                reduce,
                include_self,
                &out,
                parity,
            )?)
        }
        _ => Err(no_grad(op)),
    }
}
