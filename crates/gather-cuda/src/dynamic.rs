//! The ops by name on the GPU: [`gather::dynamic::call`]'s op names, arguments (`dim`,
//! `reduce`, `include_self`, `bounds` ...) and errors, with the tensors on the GPU. The `gather`
//! command's `--device cuda` and the Python package's CUDA arrays run through it.
//!
//! ```no_run
//! use gather::dynamic::{Arg, Args};
//! use gather_cuda::{Cuda, CudaTensor};
//! let gpu = Cuda::new(0)?;
//! let mut inputs = gather_cuda::dynamic::CudaTensors::new();
//! inputs.insert("input".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f32, 2.0]))?);
//! inputs.insert("index".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[1i64]))?);
//! let mut args = Args::default();
//! args.set("dim", Arg::Int(0));
//! let out = gather_cuda::dynamic::call("gather", &args, &inputs)?;
//! assert_eq!(out[0].1.to_host::<f32>()?, ndarray::arr1(&[2.0f32]).into_dyn());
//! # Ok::<(), gather_cuda::Error>(())
//! ```

use std::collections::BTreeMap;

use gather::dynamic::{Arg, Args};
use gather::{Error, Reduce, Scalar};

use crate::{CudaTensor, Options, OutOfBounds, Src};

/// Named tensors on the GPU, as the ops take them (`input`, `index`, `src`, `source`, `mask`,
/// `repeats`).
pub type CudaTensors = BTreeMap<String, CudaTensor>;

/// Named outputs (`output`, or `values` and `indices`).
pub type Outputs = Vec<(String, CudaTensor)>;

/// The ops [`call`] runs on the GPU; the others fail with an error that says so.
pub const OPS: &[&str] = &[
    "gather",
    "index_select",
    "take",
    "take_along_dim",
    "put",
    "masked_select",
    "masked_scatter",
    "repeat_interleave",
    "sort",
    "argsort",
    "topk",
    "select_batched",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "gather_broadcast",
    "scatter_broadcast",
    "scatter_add_broadcast",
    "scatter_reduce_broadcast",
    "scatter_groups",
    "scatter_any",
    "scatter_all",
    "scatter_softmax",
    "scatter_log_softmax",
    "scatter_reduce_arg",
    "segment_reduce",
    "segment_arg_reduce",
    "segment_any",
    "segment_all",
    "segment_softmax",
    "segment_log_softmax",
];

/// Runs `op` on the named GPU tensors with the arguments of [`gather::dynamic::call`]; the
/// outputs stay on the GPU.
pub fn call(op: &str, args: &Args, inputs: &CudaTensors) -> gather::Result<Outputs> {
    if !OPS.contains(&op) {
        return Err(Error::new(
            gather::ErrorKind::InvalidArgument,
            format!(
                "{op}: does not run on the GPU yet (gather-cuda has {})",
                OPS.join(", ")
            ),
        ));
    }
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    // With a bounds policy the CPU library reads the index's dtype before the policy and dim.
    if gather::dynamic::takes_bounds_policy(op, args) {
        if let (Some(_), Some(i)) = (inputs.get("input"), inputs.get("index")) {
            crate::gather::require_int_index(op, i)?;
        }
    }
    let policy = gather::dynamic::bounds_policy(op, args, &names)?;
    // Before `input` is required: most group ops have none.
    if let Some(out) = group_op(op, args, inputs, &names)? {
        return Ok(out);
    }
    let opts = Options::new()
        .bounds(policy.unwrap_or(OutOfBounds::Error))
        .broadcast(op.ends_with("_broadcast"));
    let full = op;
    let op = op.strip_suffix("_broadcast").unwrap_or(op);
    let get = |name: &str| input(inputs, name).cloned();
    // The broadcasting ops read the index's dtype (and the scatters src's) before the dim,
    // named in full, as the CPU library does.
    let broadcast_dtypes = |x: &CudaTensor, index: &CudaTensor| -> gather::Result<()> {
        if full != op {
            crate::gather::require_int_index(full, index)?;
            if op != "gather" {
                crate::scatter::same_dtype(full, "src", x, &get("src")?)?;
            }
        }
        Ok(())
    };
    if op == "repeat_interleave" {
        let (dim, output_size) = gather::dynamic::repeat_interleave_args(args)?;
        let out = match (inputs.get("input"), inputs.get("repeats")) {
            (None, Some(r)) => crate::repeat_interleave_repeats(&r.clone(), output_size),
            (Some(x), Some(r)) => {
                crate::repeat_interleave(&x.clone(), &r.clone(), dim, output_size)
            }
            _ => {
                let x = get("input")?;
                let r = gather::dynamic::repeat_interleave_count(op, args, x.ndim(), dim)?;
                crate::repeat_interleave_scalar(&x, r, dim, output_size)
            }
        };
        return Ok(vec![(
            "output".to_string(),
            out.map_err(gather::Error::from)?,
        )]);
    }
    let x = get("input")?;
    if matches!(op, "sort" | "argsort" | "topk") {
        let (dim, flip) = gather::dynamic::order_args(op, args)?;
        let named = |(v, i): (CudaTensor, CudaTensor)| -> gather::Result<Outputs> {
            Ok(vec![("values".to_string(), v), ("indices".to_string(), i)])
        };
        return match op {
            "sort" => named(crate::sort(&x, dim, flip, true).map_err(gather::Error::from)?),
            "argsort" => {
                let i = crate::argsort(&x, dim, flip, true).map_err(gather::Error::from)?;
                Ok(vec![("output".to_string(), i)])
            }
            _ => {
                let k = args.int("k")?;
                gather::backend::check_topk(x.shape(), k, dim, x.dtype())?;
                named(crate::topk(&x, k as usize, dim, flip, true).map_err(gather::Error::from)?)
            }
        };
    }
    let masked = match op {
        "masked_select" => Some(crate::masked_select(&x, &get("mask")?)),
        "masked_scatter" => Some(crate::masked_scatter(&x, &get("mask")?, &get("source")?)),
        _ => None,
    };
    if let Some(out) = masked {
        return Ok(vec![(
            "output".to_string(),
            out.map_err(gather::Error::from)?,
        )]);
    }
    let index = get("index")?;
    let scalar_or = |name: &str, default: Scalar| -> gather::Result<Scalar> {
        match args.get(name) {
            None | Some(Arg::None) => Ok(default),
            Some(_) => args.scalar(name),
        }
    };
    let out = match op {
        "gather" => {
            broadcast_dtypes(&x, &index)?;
            opts.gather(&x, args.dim()?, &index)
        }
        "index_select" => opts.index_select(&x, args.dim()?, &index),
        "take" => opts.take(&x, &index),
        "select_batched" => {
            let b = gather::dynamic::batch_dims(args)?;
            opts.select_batched(&x, args.dim()?, &index, b)
        }
        "take_along_dim" => {
            let dim = match args.get("dim") {
                None | Some(Arg::None) => None,
                Some(_) => Some(args.dim()?),
            };
            opts.take_along_dim(&x, &index, dim)
        }
        "put" => {
            let accumulate = args.bool_or("accumulate", false)?;
            opts.put(&x, &index, &get("source")?, accumulate)
        }
        // `deterministic=false` opts into the atomic folds (CPU calls are always in order).
        "scatter_add" => {
            broadcast_dtypes(&x, &index)?;
            let opts = opts.deterministic(args.bool_or("deterministic", true)?);
            opts.scatter_add(&x, args.dim()?, &index, &get("src")?)
        }
        "scatter_reduce" => {
            let reduce: Reduce = match args.str("reduce")?.parse() {
                Err(e) if full != op => Err(gather::backend::prefixed(full, e)),
                r => r,
            }?;
            let include_self = args.bool_or("include_self", true)?;
            broadcast_dtypes(&x, &index)?;
            let opts = opts.deterministic(args.bool_or("deterministic", true)?);
            opts.scatter_reduce(&x, args.dim()?, &index, &get("src")?, reduce, include_self)
        }
        "index_add" => {
            let alpha = scalar_or("alpha", Scalar::Int(1))?;
            opts.index_add(&x, args.dim()?, &index, &get("source")?, alpha)
        }
        "index_copy" => opts.index_copy(&x, args.dim()?, &index, &get("source")?),
        "index_fill" => opts.index_fill(&x, args.dim()?, &index, args.scalar("value")?),
        "index_reduce" => {
            let reduce = gather::dynamic::index_reduce_arg(args)?;
            let include_self = args.bool_or("include_self", true)?;
            opts.index_reduce(&x, args.dim()?, &index, &get("source")?, reduce, include_self)
        }
        _ => {
            // scatter: src or value, with PyTorch's legacy reduce="add"|"multiply".
            broadcast_dtypes(&x, &index)?;
            let s = match inputs.get("src") {
                Some(t) => Src::Tensor(t),
                None => Src::Value(args.scalar("value")?),
            };
            match args.get("reduce") {
                None | Some(Arg::None) => opts.scatter(&x, args.dim()?, &index, s),
                Some(Arg::Str(r)) => {
                    let reduce = match r.as_str() {
                        "add" => Reduce::Sum,
                        "multiply" => Reduce::Prod,
                        other => {
                            return Err(Error::new(
                                gather::ErrorKind::InvalidArgument,
                                format!("scatter: reduce argument must be either add or multiply, got {other}"),
                            ));
                        }
                    };
                    let r = crate::scatter::code(reduce);
                    opts.scatter_family("scatter", &x, args.dim()?, &index, s, r, true)
                }
                Some(other) => {
                    return Err(Error::new(
                        gather::ErrorKind::InvalidArgument,
                        format!("scatter: reduce must be a string, got {other:?}"),
                    ));
                }
            }
        }
    }
    .map_err(gather::Error::from)?;
    Ok(vec![("output".to_string(), out)])
}

/// The input tensor `name`, or the error that says it is missing.
fn input<'a>(inputs: &'a CudaTensors, name: &str) -> gather::Result<&'a CudaTensor> {
    inputs.get(name).ok_or_else(|| {
        Error::new(
            gather::ErrorKind::InvalidArgument,
            format!("missing input tensor `{name}`"),
        )
    })
}

/// The group reductions beyond PyTorch (`scatter_groups` & co, the segment ops) when `op` is
/// one, else `None`. Their arguments go through the CPU library's parsers, in the CPU's order,
/// so that a call fails with the CPU's error; `names` are the names of the input tensors.
fn group_op(
    op: &str,
    args: &Args,
    inputs: &CudaTensors,
    names: &[&str],
) -> gather::Result<Option<Outputs>> {
    use gather::dynamic::{arg_reduce, bool_fill, group_fill, group_reduce, opt_size};
    use gather::ops::reduce::GroupOptions;
    let get = |name: &str| input(inputs, name);
    let one = |t: crate::Result<CudaTensor>| -> gather::Result<Option<Outputs>> {
        Ok(Some(vec![("output".to_string(), t?)]))
    };
    let two = |r: crate::Result<(CudaTensor, CudaTensor)>| -> gather::Result<Option<Outputs>> {
        let (v, i) = r?;
        Ok(Some(vec![
            ("values".to_string(), v),
            ("indices".to_string(), i),
        ]))
    };
    // The CPU library reads an index (or the segments) after the arguments and before the
    // shapes, and a softmax's src dtype before either.
    let int_index = |what: &str, t: &CudaTensor| -> gather::Result<()> {
        if t.dtype().is_integer() {
            Ok(())
        } else {
            Err(gather::backend::index_dtype(op, what, t.dtype()))
        }
    };
    let softmax_src = |src: &CudaTensor| match op.ends_with("softmax") {
        true => gather::backend::softmax_dtype(op, src.dtype()),
        false => Ok(()),
    };
    if op.starts_with("segment_") {
        let src = get("src")?;
        let (name, dim, num_segments) = gather::dynamic::segment_args(op, args, names)?;
        let t = get(name)?;
        let segments_first = || -> gather::Result<()> {
            softmax_src(src)?;
            int_index(name, t)?;
            match t.ndim() {
                1 => Ok(()),
                _ => Err(gather::backend::segments_rank(op, name, t.shape())),
            }
        };
        let segments = match name {
            "offsets" => crate::Segments::Offsets(t),
            "ids" => crate::Segments::Ids {
                ids: t,
                num_segments,
            },
            _ => crate::Segments::Lengths(t),
        };
        return match op {
            "segment_reduce" => {
                let reduce = group_reduce(op, args)?;
                let fill = group_fill(op, args)?;
                segments_first()?;
                one(crate::segment_reduce(src, dim, segments, reduce, fill))
            }
            "segment_arg_reduce" => {
                let reduce = arg_reduce(op, args)?;
                let fill = group_fill(op, args)?;
                segments_first()?;
                two(crate::segment_arg_reduce(src, dim, segments, reduce, fill))
            }
            "segment_any" | "segment_all" => {
                let fill = bool_fill(op, args)?;
                segments_first()?;
                one(match op {
                    "segment_all" => crate::segment_all(src, dim, segments, fill),
                    _ => crate::segment_any(src, dim, segments, fill),
                })
            }
            "segment_softmax" | "segment_log_softmax" => {
                segments_first()?;
                one(match op {
                    "segment_log_softmax" => crate::segment_log_softmax(src, dim, segments),
                    _ => crate::segment_softmax(src, dim, segments),
                })
            }
            _ => Ok(None),
        };
    }
    match op {
        "scatter_groups" => {
            let (src, index) = (get("src")?, get("index")?);
            let dim = args.dim()?;
            let reduce = group_reduce(op, args)?;
            let opts = GroupOptions {
                dim_size: opt_size(op, args, "dim_size")?,
                fill: group_fill(op, args)?,
            };
            int_index("index", index)?;
            one(crate::scatter_groups(src, dim, index, reduce, opts))
        }
        "scatter_any" | "scatter_all" => {
            let (src, index) = (get("src")?, get("index")?);
            let dim = args.dim()?;
            let opts = GroupOptions {
                dim_size: opt_size(op, args, "dim_size")?,
                fill: bool_fill(op, args)?,
            };
            int_index("index", index)?;
            one(if op == "scatter_all" {
                crate::scatter_all(src, dim, index, opts)
            } else {
                crate::scatter_any(src, dim, index, opts)
            })
        }
        "scatter_softmax" | "scatter_log_softmax" => {
            let (src, index) = (get("src")?, get("index")?);
            let dim = args.dim()?;
            softmax_src(src)?;
            int_index("index", index)?;
            one(if op == "scatter_log_softmax" {
                crate::scatter_log_softmax(src, dim, index)
            } else {
                crate::scatter_softmax(src, dim, index)
            })
        }
        "scatter_reduce_arg" => {
            let (x, index, src) = (get("input")?, get("index")?, get("src")?);
            let dim = args.dim()?;
            let reduce = arg_reduce(op, args)?;
            let include_self = args.bool_or("include_self", true)?;
            int_index("index", index)?;
            crate::scatter::same_dtype(op, "src", x, src)?;
            two(crate::scatter_reduce_arg(
                x,
                dim,
                index,
                src,
                reduce,
                include_self,
            ))
        }
        _ => Ok(None),
    }
}

/// The in-place form of `op` on `target` (which plays the part of `input`; the other inputs come
/// from `inputs`): the op out of place, then its result written into `target`'s memory, so that
/// a failed call leaves `target` as it was (the CPU's rule).
///
/// ```no_run
/// use gather::dynamic::{Arg, Args};
/// use gather_cuda::{Cuda, CudaTensor};
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f32, 1.0, 1.0]))?;
/// let mut inputs = gather_cuda::dynamic::CudaTensors::new();
/// inputs.insert("index".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[2i64, 2]))?);
/// inputs.insert("src".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[5.0f32, 7.0]))?);
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// gather_cuda::dynamic::call_inplace("scatter_add", &args, &x, &inputs)?;
/// assert_eq!(x.to_host::<f32>()?, ndarray::arr1(&[1.0f32, 1.0, 13.0]).into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn call_inplace(
    op: &str,
    args: &Args,
    target: &CudaTensor,
    inputs: &CudaTensors,
) -> gather::Result<()> {
    if !gather::dynamic::has_inplace(op) {
        return Err(Error::new(
            gather::ErrorKind::InvalidArgument,
            format!("{op} has no in-place form"),
        ));
    }
    let mut with = inputs.clone();
    with.insert("input".to_string(), target.clone());
    let out = call(op, args, &with)?;
    let (_, result) = out.into_iter().next().ok_or_else(|| {
        Error::new(
            gather::ErrorKind::InvalidArgument,
            format!("{op}: no output"),
        )
    })?;
    target.assign(&result).map_err(gather::Error::from)
}

/// The ops [`call_grad`] differentiates on the GPU: those of [`gather::dynamic::GRAD_OPS`], all
/// of them.
pub const GRAD_OPS: &[&str] = &[
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_select",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "take",
    "take_along_dim",
    "put",
    "sort",
    "topk",
    "masked_select",
    "masked_scatter",
    "repeat_interleave",
    "select_batched",
];

/// [`gather::dynamic::call_grad`] on the GPU: the gradients of `op` given the gradient of its
/// output, one `grad_<name>` tensor per differentiable input, on the GPU. Same as
/// [`call_grad_with`] with [`Parity::Correct`](crate::grad::Parity::Correct).
///
/// The forward runs first only where the gradient needs what it gives (`sort`'s and `topk`'s
/// indices, the result of a reduction without a bounds policy or of PyTorch's legacy
/// `scatter(reduce=)`), as on the CPU; the other gradients check their own arguments, so that
/// a bad call fails with the CPU library's words (`grad::gather: index 5 is out of bounds ...`).
///
/// ```no_run
/// use gather::dynamic::{Arg, Args};
/// use gather_cuda::{Cuda, CudaTensor};
/// let gpu = Cuda::new(0)?;
/// let mut inputs = gather_cuda::dynamic::CudaTensors::new();
/// inputs.insert("input".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f32, 2.0, 3.0]))?);
/// inputs.insert("index".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[2i64, 2]))?);
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let g = CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f32, 10.0]))?;
/// let grads = gather_cuda::dynamic::call_grad("gather", &args, &inputs, &g)?;
/// assert_eq!(grads[0].0, "grad_input");
/// assert_eq!(grads[0].1.to_host::<f32>()?, ndarray::arr1(&[0.0f32, 0.0, 11.0]).into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn call_grad(
    op: &str,
    args: &Args,
    inputs: &CudaTensors,
    grad_output: &CudaTensor,
) -> gather::Result<Outputs> {
    call_grad_with(op, args, inputs, grad_output, crate::grad::Parity::Correct)
}

/// [`call_grad`] with the choice of [`Parity`](crate::grad::Parity) (`Parity::PyTorch`
/// reproduces PyTorch's `include_self = false` tie bug of `amax`/`amin`).
///
/// ```no_run
/// use gather::dynamic::{Arg, Args};
/// use gather_cuda::{Cuda, CudaTensor, grad::Parity};
/// let gpu = Cuda::new(0)?;
/// let mut inputs = gather_cuda::dynamic::CudaTensors::new();
/// inputs.insert("input".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[3.0f64, 5.0]))?);
/// inputs.insert("index".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[0i64, 0]))?);
/// inputs.insert("src".into(), CudaTensor::from_host(&gpu, &ndarray::arr1(&[3.0f64, 1.0]))?);
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// args.set("reduce", Arg::Str("amax".into()));
/// args.set("include_self", Arg::Bool(false));
/// let g = CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f64, 1.0]))?;
/// let torch = gather_cuda::dynamic::call_grad_with("scatter_reduce", &args, &inputs, &g, Parity::PyTorch)?;
/// assert_eq!(torch[1].1.to_host::<f64>()?, ndarray::arr1(&[0.5, 0.0]).into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn call_grad_with(
    op: &str,
    args: &Args,
    inputs: &CudaTensors,
    grad_output: &CudaTensor,
    parity: crate::grad::Parity,
) -> gather::Result<Outputs> {
    let invalid = |msg: String| Error::new(gather::ErrorKind::InvalidArgument, msg);
    if !GRAD_OPS.contains(&op) {
        // The CPU library's words for an op without a gradient (argsort) or an unknown one.
        let empty = gather::dynamic::Tensors::new();
        let g = gather::dynamic::Tensor::from(ndarray::arr0(0.0f32).into_dyn());
        return Err(gather::dynamic::call_grad(op, args, &empty, &g.view())
            .err()
            .unwrap_or_else(|| invalid(format!("{op} has no gradient"))));
    }
    let get = |name: &str| input(inputs, name);
    if op == "repeat_interleave" && !inputs.contains_key("input") {
        return Err(invalid(
            "repeat_interleave (repeats only) is not differentiable: its output is an integer index".into(),
        ));
    }
    let x = get("input")?;
    if !matches!(
        x.dtype(),
        gather::DType::F16 | gather::DType::BF16 | gather::DType::F32 | gather::DType::F64
    ) {
        return Err(gather::backend::not_float(op, x.dtype()));
    }
    gather::dynamic::check_grad_dtypes(op, x.dtype(), grad_output.dtype(), &|name| {
        inputs.get(name).map(|t| t.dtype())
    })?;
    // An index of another dtype than the integers is the forward's error, before the shapes
    // (but an empty one is taken where the forward takes it, as PyTorch's scatters do).
    let scatter_like = matches!(op, "gather" | "scatter" | "scatter_add" | "scatter_reduce");
    if let Some(i) = inputs
        .get("index")
        .filter(|i| !(scatter_like && i.is_empty()))
    {
        if scatter_like && !i.dtype().is_integer() {
            // The scatter family's dim comes before its index's dtype, as in its forwards.
            gather::dims::normalize_dim(op, args.dim()?, x.ndim())?;
        }
        crate::gather::require_int_index(op, i)?;
    }
    // After the dtypes, and only its name and fill value, as the CPU library's gradients read it.
    let policy = gather::dynamic::grad_bounds_policy(op, args)?;
    let legacy = op == "scatter" && !matches!(args.get("reduce"), None | Some(Arg::None));
    let with_result =
        policy.is_none() && (legacy || matches!(op, "scatter_reduce" | "index_reduce"));
    let forward = if matches!(op, "sort" | "topk") || with_result {
        // A gradient's forward call fails in the gradient's name, as the CPU library's does.
        let forward = call(op, args, inputs).map_err(|e| {
            if with_result {
                gather::backend::grad_forward_error(op, e)
            } else {
                e
            }
        })?;
        // The legacy reduce runs through scatter_reduce's gradient: its grad_output is checked
        // here, in the words of the CPU library's legacy gradients.
        if legacy {
            let name = match inputs.get("src") {
                Some(_) => "grad::scatter_legacy",
                None => "grad::scatter_value_legacy",
            };
            gather::backend::check_grad_output(
                name,
                gather::backend::GradOutputOf::Scatter,
                grad_output.shape(),
                x.shape(),
            )?;
        }
        Some(forward)
    } else {
        None
    };
    differentiate(
        op,
        args,
        inputs,
        grad_output,
        x,
        forward.as_ref(),
        policy,
        parity,
    )
    .map_err(gather::Error::from)
}

/// The gradients of a call (`forward`: its outputs, where the gradient needs them), through
/// [`GradOptions`](crate::grad::GradOptions) where the op takes a bounds policy (with none,
/// its methods are the plain gradients).
#[allow(clippy::too_many_arguments)]
fn differentiate(
    op: &str,
    args: &Args,
    inputs: &CudaTensors,
    g: &CudaTensor,
    x: &CudaTensor,
    forward: Option<&Outputs>,
    policy: Option<OutOfBounds<Scalar>>,
    parity: crate::grad::Parity,
) -> crate::Result<Outputs> {
    use crate::grad;
    let get = |name: &str| -> crate::Result<&CudaTensor> { Ok(input(inputs, name)?) };
    let one = |t: CudaTensor| Ok(vec![("grad_input".to_string(), t)]);
    let two = |second: &str, (a, b): (CudaTensor, CudaTensor)| {
        Ok(vec![("grad_input".to_string(), a), (second.to_string(), b)])
    };
    let go = Options::new()
        .bounds(policy.unwrap_or(OutOfBounds::Error))
        .grad()
        .parity(parity);
    let shape = x.shape();
    match op {
        "sort" | "topk" => {
            let dim = args.opt_int("dim")?.map_or(-1, |d| d as isize);
            let indices = &forward.expect("sort and topk run their forward")[1].1;
            one(match op {
                "sort" => grad::sort(g, shape, dim, indices)?,
                _ => grad::topk(g, shape, dim, indices)?,
            })
        }
        "masked_select" => one(grad::masked_select(g, shape, get("mask")?)?),
        "masked_scatter" => {
            let r = grad::masked_scatter(g, shape, get("mask")?, get("source")?.shape())?;
            two("grad_source", (r.input, r.source))
        }
        "repeat_interleave" => {
            let (dim, _) = gather::dynamic::repeat_interleave_args(args)?;
            one(match inputs.get("repeats") {
                Some(r) => grad::repeat_interleave(g, shape, r, dim)?,
                None => {
                    let r = gather::dynamic::repeat_interleave_count(
                        "grad::repeat_interleave",
                        args,
                        x.ndim(),
                        dim,
                    )?;
                    grad::repeat_interleave_scalar(g, shape, r, dim)?
                }
            })
        }
        "take" => one(go.take(g, shape, get("index")?)?),
        "take_along_dim" => {
            let dim = match args.get("dim") {
                None | Some(Arg::None) => None,
                Some(_) => Some(args.dim()?),
            };
            one(go.take_along_dim(g, shape, get("index")?, dim)?)
        }
        "put" => {
            let accumulate = args.bool_or("accumulate", false)?;
            let r = go.put(g, get("index")?, get("source")?.shape(), accumulate)?;
            two("grad_source", (r.input, r.source))
        }
        _ => {
            let (dim, index) = (args.dim()?, get("index")?);
            match op {
                "gather" => one(go.gather(g, shape, dim, index)?),
                "index_select" => one(go.index_select(g, shape, dim, index)?),
                "select_batched" => {
                    let b = gather::dynamic::batch_dims(args)?;
                    one(go.select_batched(g, shape, dim, index, b)?)
                }
                "index_fill" => one(go.index_fill(g, dim, index)?),
                "index_add" => {
                    let alpha = match args.get("alpha") {
                        None | Some(Arg::None) => Scalar::Int(1),
                        Some(_) => args.scalar("alpha")?,
                    };
                    let r = go.index_add(g, dim, index, get("source")?.shape(), alpha)?;
                    two("grad_source", (r.input, r.source))
                }
                "index_copy" => {
                    let r = go.index_copy(g, dim, index, get("source")?.shape())?;
                    two("grad_source", (r.input, r.source))
                }
                "scatter_add" => {
                    let r = go.scatter_add(g, dim, index, get("src")?.shape())?;
                    two("grad_src", (r.input, r.src))
                }
                "index_reduce" | "scatter_reduce" => {
                    let reduce: Reduce = match op {
                        "index_reduce" => gather::dynamic::index_reduce_arg(args)?,
                        _ => args.str("reduce")?.parse()?,
                    };
                    let incl = args.bool_or("include_self", true)?;
                    // The forward's result where it ran (no policy), else the gradient
                    // recomputes it under the policy.
                    let result = forward.map(|f| &f[0].1);
                    let r = match (op, result) {
                        ("index_reduce", None) => {
                            go.index_reduce(g, x, dim, index, get("source")?, reduce, incl)?
                        }
                        ("index_reduce", Some(out)) => grad::index_reduce_with(
                            g,
                            x,
                            dim,
                            index,
                            get("source")?,
                            reduce,
                            incl,
                            out,
                            parity,
                        )?,
                        (_, None) => {
                            let r =
                                go.scatter_reduce(g, x, dim, index, get("src")?, reduce, incl)?;
                            return two("grad_src", (r.input, r.src));
                        }
                        (_, Some(out)) => {
                            let r = grad::scatter_reduce_with(
                                g,
                                x,
                                dim,
                                index,
                                get("src")?,
                                reduce,
                                incl,
                                out,
                                parity,
                            )?;
                            return two("grad_src", (r.input, r.src));
                        }
                    };
                    two("grad_source", (r.input, r.source))
                }
                _ if policy.is_some() => {
                    gather::dynamic::check_policy_form(op, args, inputs.contains_key("src"))?;
                    let r = go.scatter(g, dim, index, get("src")?.shape())?;
                    two("grad_src", (r.input, r.src))
                }
                _ => scatter_grad(args, inputs, g, x, dim, index, forward.map(|f| &f[0].1)),
            }
        }
    }
}

/// scatter: src or value, plain or with the legacy reduce ("add" and "multiply" have the
/// gradients of scatter_reduce sum and prod with include_self, as on the CPU, whatever `parity`).
#[allow(clippy::too_many_arguments)]
fn scatter_grad(
    args: &Args,
    inputs: &CudaTensors,
    g: &CudaTensor,
    x: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    out: Option<&CudaTensor>,
) -> crate::Result<Outputs> {
    use crate::grad::{self, Parity};
    // The forward accepted the name ("add" or "multiply") and gave its result.
    let out = || out.expect("the legacy reduce runs its forward");
    let legacy = match args.get("reduce") {
        Some(Arg::Str(r)) if r == "add" => Some(Reduce::Sum),
        Some(Arg::Str(_)) => Some(Reduce::Prod),
        _ => None,
    };
    let r = match (inputs.get("src"), legacy) {
        (Some(s), None) => grad::scatter(g, dim, index, s.shape())?,
        (Some(s), Some(r)) => {
            grad::scatter_reduce_with(g, x, dim, index, s, r, true, out(), Parity::Correct)?
        }
        (None, None) => {
            let dx = grad::scatter_value(g, dim, index)?;
            return Ok(vec![("grad_input".to_string(), dx)]);
        }
        (None, Some(r)) => {
            let bits = crate::scatter::scalar_bits("scatter", args.scalar("value")?, x.dtype())?;
            let v = crate::options::splat(x.device(), bits, x.dtype(), index.shape())?;
            let r =
                grad::scatter_reduce_with(g, x, dim, index, &v, r, true, out(), Parity::Correct)?;
            return Ok(vec![("grad_input".to_string(), r.input)]);
        }
    };
    Ok(vec![
        ("grad_input".to_string(), r.input),
        ("grad_src".to_string(), r.src),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_op_with_a_cpu_gradient_has_one_on_the_gpu() {
        let cpu: Vec<&str> = gather::dynamic::GRAD_OPS.iter().map(|(n, _)| *n).collect();
        let mut gpu = super::GRAD_OPS.to_vec();
        let mut want = cpu.clone();
        gpu.sort_unstable();
        want.sort_unstable();
        assert_eq!(gpu, want);
    }
}
