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
    let policy = gather::dynamic::bounds_policy(op, args, &names)?;
    let opts = Options::new()
        .bounds(policy.unwrap_or(OutOfBounds::Error))
        .broadcast(op.ends_with("_broadcast"));
    let op = op.strip_suffix("_broadcast").unwrap_or(op);
    let get = |name: &str| -> gather::Result<CudaTensor> {
        inputs.get(name).cloned().ok_or_else(|| {
            Error::new(
                gather::ErrorKind::InvalidArgument,
                format!("missing input tensor `{name}`"),
            )
        })
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
                let r = gather::dynamic::repeat_interleave_count(args, x.ndim(), dim)?;
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
        "gather" => opts.gather(&x, args.dim()?, &index),
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
        "scatter_add" => opts.scatter_add(&x, args.dim()?, &index, &get("src")?),
        "scatter_reduce" => {
            let reduce: Reduce = args.str("reduce")?.parse()?;
            let include_self = args.bool_or("include_self", true)?;
            opts.scatter_reduce(&x, args.dim()?, &index, &get("src")?, reduce, include_self)
        }
        "index_add" => {
            let alpha = scalar_or("alpha", Scalar::Int(1))?;
            opts.index_add(&x, args.dim()?, &index, &get("source")?, alpha)
        }
        "index_copy" => opts.index_copy(&x, args.dim()?, &index, &get("source")?),
        "index_fill" => opts.index_fill(&x, args.dim()?, &index, args.scalar("value")?),
        "index_reduce" => {
            let reduce = match args.str("reduce")? {
                r @ ("prod" | "mean" | "amax" | "amin") => r.parse::<Reduce>()?,
                other => {
                    return Err(Error::new(
                        gather::ErrorKind::InvalidArgument,
                        format!("index_reduce: Expected reduce to be one of prod, mean, amax or amin but got {other}."),
                    ));
                }
            };
            let include_self = args.bool_or("include_self", true)?;
            opts.index_reduce(&x, args.dim()?, &index, &get("source")?, reduce, include_self)
        }
        _ => {
            // scatter: src or value, with PyTorch's legacy reduce="add"|"multiply".
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
                    opts.scatter_reduce(&x, args.dim()?, &index, s, reduce, true)
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
