//! The command on a GPU (`--device cuda`): the conformance calls run by `gather-cuda`, and the
//! benchmark workloads timed with CUDA events beside their CPU results.

use gather::dynamic::{Args, Tensor, Tensors};
use gather::{DType, Reduce, with_tensor};
use gather_cuda::{Cuda, CudaTensor};

/// The ops [`call`] runs on the GPU; the others fail with an error that says so.
pub use gather_cuda::dynamic::OPS;

fn up(gpu: &Cuda, t: &Tensor) -> gather::Result<CudaTensor> {
    with_tensor!(t, a => CudaTensor::from_host(gpu, a)).map_err(gather::Error::from)
}

fn down(t: &CudaTensor) -> gather::Result<Tensor> {
    let r = match t.dtype() {
        DType::Bool => t.to_host::<bool>().map(Tensor::from),
        DType::U8 => t.to_host::<u8>().map(Tensor::from),
        DType::I8 => t.to_host::<i8>().map(Tensor::from),
        DType::I16 => t.to_host::<i16>().map(Tensor::from),
        DType::I32 => t.to_host::<i32>().map(Tensor::from),
        DType::I64 => t.to_host::<i64>().map(Tensor::from),
        DType::U16 => t.to_host::<u16>().map(Tensor::from),
        DType::U32 => t.to_host::<u32>().map(Tensor::from),
        DType::U64 => t.to_host::<u64>().map(Tensor::from),
        DType::F16 => t.to_host::<half::f16>().map(Tensor::from),
        DType::BF16 => t.to_host::<half::bf16>().map(Tensor::from),
        DType::F32 => t.to_host::<f32>().map(Tensor::from),
        _ => t.to_host::<f64>().map(Tensor::from),
    };
    r.map_err(gather::Error::from)
}

/// `gather::dynamic::call` on the GPU: uploads the inputs, runs the op with
/// [`gather_cuda::dynamic::call`], and brings the outputs back.
///
/// ```no_run
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// let gpu = gather_cuda::Cuda::new(0).unwrap();
/// let mut inputs = Tensors::new();
/// inputs.insert("input".into(), Tensor::from(ndarray::arr1(&[1.0f32, 2.0]).into_dyn()));
/// inputs.insert("index".into(), Tensor::from(ndarray::arr1(&[1i64]).into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let out = gather_cli::cuda::call(&gpu, "gather", &args, &inputs).unwrap();
/// assert_eq!(out[0].1.to_f64_vec(), vec![2.0]);
/// ```
pub fn call(
    gpu: &Cuda,
    op: &str,
    args: &Args,
    inputs: &Tensors,
) -> gather::Result<Vec<(String, Tensor)>> {
    if !OPS.contains(&op) {
        // Before any upload: the op's own error.
        return gather_cuda::dynamic::call(op, args, &Default::default()).map(|_| Vec::new());
    }
    let mut on_gpu = gather_cuda::dynamic::CudaTensors::new();
    for (name, t) in inputs {
        on_gpu.insert(name.clone(), up(gpu, t)?);
    }
    let out = gather_cuda::dynamic::call(op, args, &on_gpu)?;
    out.iter()
        .map(|(name, t)| Ok((name.clone(), down(t)?)))
        .collect()
}

/// `gather::dynamic::call_inplace` on the GPU: uploads `target` and the inputs, runs the in-place
/// form ([`gather_cuda::dynamic::call_inplace`]), and returns `target` as the call left it
/// (changed only when it succeeded) with the call's result.
///
/// ```no_run
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// let gpu = gather_cuda::Cuda::new(0).unwrap();
/// let mut inputs = Tensors::new();
/// inputs.insert("index".into(), Tensor::from(ndarray::arr1(&[1i64]).into_dyn()));
/// inputs.insert("src".into(), Tensor::from(ndarray::arr1(&[5.0f32]).into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let x = Tensor::from(ndarray::arr1(&[1.0f32, 2.0]).into_dyn());
/// let (after, result) = gather_cli::cuda::call_inplace(&gpu, "scatter_add", &args, &x, &inputs).unwrap();
/// assert!(result.is_ok());
/// assert_eq!(after.to_f64_vec(), vec![1.0, 7.0]);
/// ```
pub fn call_inplace(
    gpu: &Cuda,
    op: &str,
    args: &Args,
    target: &Tensor,
    inputs: &Tensors,
) -> gather::Result<(Tensor, gather::Result<()>)> {
    let mut on_gpu = gather_cuda::dynamic::CudaTensors::new();
    for (name, t) in inputs.iter().filter(|(n, _)| *n != "input") {
        on_gpu.insert(name.clone(), up(gpu, t)?);
    }
    let t = up(gpu, target)?;
    let result = gather_cuda::dynamic::call_inplace(op, args, &t, &on_gpu);
    Ok((down(&t)?, result))
}

/// `gather::dynamic::call_grad_with` on the GPU: uploads the inputs and `grad_output`, runs
/// [`gather_cuda::dynamic::call_grad_with`], and brings the gradients back.
///
/// ```no_run
/// use gather::dynamic::{Arg, Args, Tensor, Tensors};
/// use gather::grad::Parity;
/// let gpu = gather_cuda::Cuda::new(0).unwrap();
/// let mut inputs = Tensors::new();
/// inputs.insert("input".into(), Tensor::from(ndarray::arr1(&[1.0f64, 2.0]).into_dyn()));
/// inputs.insert("index".into(), Tensor::from(ndarray::arr1(&[1i64, 1]).into_dyn()));
/// let mut args = Args::default();
/// args.set("dim", Arg::Int(0));
/// let g = Tensor::from(ndarray::arr1(&[1.0f64, 2.0]).into_dyn());
/// let grads = gather_cli::cuda::call_grad(&gpu, "gather", &args, &inputs, &g, Parity::Correct).unwrap();
/// assert_eq!(grads[0].1.to_f64_vec(), vec![0.0, 3.0]);
/// ```
pub fn call_grad(
    gpu: &Cuda,
    op: &str,
    args: &Args,
    inputs: &Tensors,
    grad_output: &Tensor,
    parity: gather::grad::Parity,
) -> gather::Result<Vec<(String, Tensor)>> {
    let mut on_gpu = gather_cuda::dynamic::CudaTensors::new();
    for (name, t) in inputs {
        on_gpu.insert(name.clone(), up(gpu, t)?);
    }
    let g = up(gpu, grad_output)?;
    let out = gather_cuda::dynamic::call_grad_with(op, args, &on_gpu, &g, parity)?;
    out.iter()
        .map(|(name, t)| Ok((name.clone(), down(t)?)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// gather bench --device cuda
// ---------------------------------------------------------------------------------------------

use crate::workloads::{self, Data, Id, Workload};
use ndarray::{Array1, Array2, ArrayD};

/// One timed workload on the GPU.
#[derive(Debug, Clone)]
pub struct GpuTiming {
    /// WORKLOADS.md's name (or the large ones' names: W6x16, W8x20, W9x16).
    pub name: String,
    /// Median of the timed calls, seconds (CUDA events around each call, the bounds check's
    /// read-back included).
    pub median_s: f64,
    /// Fastest timed call, seconds.
    pub min_s: f64,
    /// Minimal bytes (WORKLOADS.md's rule).
    pub min_bytes: f64,
    /// What the check of the first result found.
    pub check: String,
}

/// The large workloads of the CUDA issue, beyond WORKLOADS.md.
pub const LARGE: &[&str] = &["W6x16", "W8x20", "W9x16"];

type Op<'a> = Box<dyn Fn() -> gather_cuda::Result<CudaTensor> + 'a>;

fn gpu_err(e: gather_cuda::Error) -> String {
    e.to_string()
}

fn upload<T: gather::Element, D: ndarray::Dimension>(
    gpu: &Cuda,
    a: &ndarray::Array<T, D>,
) -> Result<CudaTensor, String> {
    CudaTensor::from_host(gpu, a).map_err(gpu_err)
}

/// Compares a GPU result with the CPU library's, element for element (flattened), exactly or
/// within a relative tolerance.
fn compare(got: &CudaTensor, want: &ArrayD<f32>, rtol: f32) -> Result<String, String> {
    let g = got.to_host::<f32>().map_err(gpu_err)?;
    if g.len() != want.len() {
        return Err(format!(
            "{} elements, the CPU gives {}",
            g.len(),
            want.len()
        ));
    }
    // Sums in another order differ by a few roundings of their terms (in [-1, 1) here), not of
    // the result, which cancellation can make tiny: hence the floor of the scale at 1.
    let mut worst = 0f32;
    for (k, (a, b)) in g.iter().zip(want.iter()).enumerate() {
        let d = (a - b).abs();
        let ok = a.to_bits() == b.to_bits() || d <= rtol * b.abs().max(1.0);
        if !ok {
            return Err(format!("element {k}: {a} on the GPU, {b} on the CPU"));
        }
        worst = worst.max(d / b.abs().max(1.0));
    }
    Ok(if rtol == 0.0 {
        "= CPU (bitwise)".into()
    } else {
        format!("= CPU (max rel {worst:.1e})")
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn time(gpu: &Cuda, op: &Op<'_>, warmup: usize, repeat: usize) -> Result<(f64, f64), String> {
    for _ in 0..warmup {
        op().map_err(gpu_err)?;
    }
    gpu.take_profile();
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let (_, s) = gpu.timed(op).map_err(gpu_err)?;
        times.push(s);
    }
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    // With GATHER_CUDA_PROFILE=1 (which waits after every step): where a call's time goes.
    for (what, s, n) in gpu.take_profile().into_iter().take(12) {
        eprintln!(
            "    {what:<22} {:>9.1} µs per call, {:>5.1} per call",
            s / repeat as f64 * 1e6,
            n as f64 / repeat as f64
        );
    }
    Ok((median(times), min))
}

/// Runs the workloads `only` (WORKLOADS.md's, W1-W11, and the large ones when `large` or when
/// `only` names them) on the GPU: each first result is compared with the CPU library's, then
/// `repeat` calls are timed.
pub fn bench(
    gpu: &Cuda,
    only: Option<&str>,
    large: bool,
    warmup: usize,
    repeat: usize,
    mut report: impl FnMut(&GpuTiming),
) -> Result<Vec<GpuTiming>, String> {
    let mut out = Vec::new();
    let skip = [Id::W0, Id::W6p, Id::W3s, Id::W3b];
    // Large names in `only` pick those; the rest picks among WORKLOADS.md's.
    let named: Vec<&str> = only
        .map(|o| {
            o.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let (big, small): (Vec<&str>, Vec<&str>) = named
        .iter()
        .partition(|n| LARGE.iter().any(|l| l.eq_ignore_ascii_case(n)));
    let chosen = match (named.is_empty(), small.is_empty()) {
        (true, _) => workloads::select(None)?,
        (false, true) => Vec::new(),
        (false, false) => workloads::select(Some(&small.join(",")))?,
    };
    for id in chosen {
        if skip.contains(&id) {
            continue;
        }
        let w = Workload::new(id, 1.0);
        let data = w.make();
        let want = w.run(&data)?;
        let t = standard(gpu, &w, &data, &want, warmup, repeat, Way::Op)?;
        report(&t);
        out.push(t);
        if matches!(id, Id::W6 | Id::W7) {
            // The opt-in atomics beside the default sorted fold (PyTorch's two modes), and the
            // fold alone through a plan of the index.
            for way in [Way::Atomic, Way::Plan] {
                let t = standard(gpu, &w, &data, &want, warmup, repeat, way)?;
                report(&t);
                out.push(t);
            }
        }
    }
    for name in LARGE {
        if large || big.iter().any(|b| b.eq_ignore_ascii_case(name)) {
            for t in large_one(gpu, name, warmup, repeat)? {
                report(&t);
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// How W6 and W7 scatter.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// The op, deterministic.
    Op,
    /// `Options::deterministic(false)`: the atomics.
    Atomic,
    /// A [`gather_cuda::ScatterPlan`] of the index, built once before the timed calls.
    Plan,
}

/// One workload timed on the GPU, W6 and W7 the `way` given.
fn standard(
    gpu: &Cuda,
    w: &Workload,
    data: &Data,
    want: &ArrayD<f32>,
    warmup: usize,
    repeat: usize,
    way: Way,
) -> Result<GpuTiming, String> {
    let atomic = way == Way::Atomic;
    let mut rtol = 0.0;
    let op: Op<'_> = match (w.id, data) {
        (Id::W1 | Id::W5, Data::Gather2 { x, index }) => {
            let (x, i) = (upload(gpu, x)?, upload(gpu, index)?);
            let d = if w.id == Id::W1 { 1 } else { 0 };
            Box::new(move || gather_cuda::gather(&x, d, &i))
        }
        (Id::W10, Data::Cube { x, index }) => {
            let (x, i) = (upload(gpu, x)?, upload(gpu, index)?);
            Box::new(move || gather_cuda::gather(&x, 1, &i))
        }
        (Id::W2, Data::Logits { logits, labels }) => {
            let (b, l) = labels.dim();
            let x = upload(gpu, logits)?;
            let i = upload(gpu, labels)?.reshape(&[b, l, 1]).map_err(gpu_err)?;
            Box::new(move || gather_cuda::gather(&x, -1, &i))
        }
        (Id::W3, Data::Patches { patches, indices }) => {
            let (b, k) = indices.dim();
            let d = patches.shape()[2];
            let x = upload(gpu, patches)?;
            let i = upload(gpu, indices)?
                .reshape(&[b, k, 1])
                .and_then(|i| i.broadcast(&[b, k, d]))
                .map_err(gpu_err)?;
            Box::new(move || gather_cuda::gather(&x, 1, &i))
        }
        (Id::W4, Data::Roi { roi_loc, labels }) => {
            let r = labels.len();
            let x = upload(gpu, roi_loc)?;
            let i = upload(gpu, labels)?
                .reshape(&[r, 1, 1])
                .and_then(|i| i.broadcast(&[r, 1, 4]))
                .map_err(gpu_err)?;
            Box::new(move || gather_cuda::gather(&x, 1, &i))
        }
        (
            Id::W6 | Id::W7,
            Data::Rows {
                dst, src, index, ..
            },
        ) => {
            let (e, f) = src.dim();
            let (d, s) = (upload(gpu, dst)?, upload(gpu, src)?);
            let ids = upload(gpu, index)?;
            if w.id == Id::W6 {
                rtol = 1e-4;
            }
            if way == Way::Plan {
                let plan = gather_cuda::ScatterPlan::new(&ids, dst.nrows()).map_err(gpu_err)?;
                if w.id == Id::W6 {
                    Box::new(move || plan.scatter_add(&d, &s))
                } else {
                    Box::new(move || plan.scatter_reduce(&d, &s, Reduce::Amax, false))
                }
            } else {
                let i = ids
                    .reshape(&[e, 1])
                    .and_then(|i| i.broadcast(&[e, f]))
                    .map_err(gpu_err)?;
                let opts = gather_cuda::Options::new().deterministic(!atomic);
                if w.id == Id::W6 {
                    Box::new(move || opts.scatter_add(&d, 0, &i, &s))
                } else {
                    Box::new(move || opts.scatter_reduce(&d, 0, &i, &s, Reduce::Amax, false))
                }
            }
        }
        (Id::W8, Data::Table { table, ids }) => {
            let (x, i) = (upload(gpu, table)?, upload(gpu, ids)?);
            Box::new(move || gather_cuda::index_select(&x, 0, &i))
        }
        (Id::W9, Data::Flat { x, idx }) => {
            let (x, i) = (upload(gpu, x)?, upload(gpu, idx)?);
            Box::new(move || gather_cuda::take(&x, &i))
        }
        (Id::W11a | Id::W11b, Data::Scatter2 { dst, index, src }) => {
            let (d, i, s) = (upload(gpu, dst)?, upload(gpu, index)?, upload(gpu, src)?);
            if w.id == Id::W11a {
                Box::new(move || gather_cuda::scatter(&d, 1, &i, &s))
            } else {
                rtol = 1e-4;
                Box::new(move || gather_cuda::scatter_add(&d, 1, &i, &s))
            }
        }
        (id, _) => return Err(format!("{}: no GPU form", id.name())),
    };
    let first = op().map_err(gpu_err)?;
    let check = compare(&first, want, rtol).map_err(|e| format!("{}: {e}", w.id.name()))?;
    let check = if rtol > 0.0 && !atomic {
        let again = op().map_err(gpu_err)?;
        let same = again
            .to_host::<f32>()
            .map_err(gpu_err)?
            .iter()
            .zip(first.to_host::<f32>().map_err(gpu_err)?.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        if !same {
            return Err(format!("{}: two runs differ", w.id.name()));
        }
        format!("{check}, repeatable")
    } else {
        check
    };
    drop(first);
    let (median_s, min_s) = time(gpu, &op, warmup, repeat)?;
    let name = w.id.name();
    Ok(GpuTiming {
        name: match way {
            Way::Op => name.to_string(),
            Way::Atomic => format!("{name}_atomic"),
            Way::Plan => format!("{name}_plan"),
        },
        median_s,
        min_s,
        min_bytes: w.min_bytes(),
        check,
    })
}

/// A large workload timed on the GPU (W6x16 also through a plan of its index).
fn large_one(
    gpu: &Cuda,
    name: &str,
    warmup: usize,
    repeat: usize,
) -> Result<Vec<GpuTiming>, String> {
    let key = |k: u64| 0x6C61_7267_6500_0000u64 ^ k;
    let mut plan_op: Option<Op<'_>> = None;
    let (op, want, min_bytes, rtol): (Op<'_>, ArrayD<f32>, f64, f32) = match name {
        "W6x16" => {
            let (v, e, f) = (1usize << 20, 16usize << 20, 64usize);
            let index = Array1::from(workloads::random_index(e, v, key(1)));
            let src = Array2::from_shape_vec((e, f), workloads::random_f32(e * f, key(2))).unwrap();
            let dst = Array2::<f32>::zeros((v, f));
            let full = index.view().insert_axis(ndarray::Axis(1));
            let want = gather::scatter_add(&dst, 0, &full.broadcast((e, f)).unwrap(), &src)
                .map_err(|e| e.to_string())?
                .into_dyn();
            let (d, s) = (upload(gpu, &dst)?, upload(gpu, &src)?);
            let ids = upload(gpu, &index)?;
            let plan = gather_cuda::ScatterPlan::new(&ids, v).map_err(gpu_err)?;
            let (dp, sp) = (d.clone(), s.clone());
            plan_op = Some(Box::new(move || plan.scatter_add(&dp, &sp)));
            let i = ids
                .reshape(&[e, 1])
                .and_then(|i| i.broadcast(&[e, f]))
                .map_err(gpu_err)?;
            let bytes = (e * f * 4 + e * 8 + 2 * v * f * 4) as f64;
            (
                Box::new(move || gather_cuda::scatter_add(&d, 0, &i, &s)) as Op<'_>,
                want,
                bytes,
                1e-4,
            )
        }
        "W8x20" => {
            let (v, n, f) = (2usize << 20, 1usize << 20, 256usize);
            let table =
                Array2::from_shape_vec((v, f), workloads::random_f32(v * f, key(3))).unwrap();
            let ids = Array1::from(workloads::random_index(n, v, key(4)));
            let want = gather::index_select(&table, 0, &ids)
                .map_err(|e| e.to_string())?
                .into_dyn();
            let (x, i) = (upload(gpu, &table)?, upload(gpu, &ids)?);
            let distinct = workloads::expected_distinct(v as f64, n as f64);
            let bytes = distinct * f as f64 * 4.0 + n as f64 * 8.0 + (n * f * 4) as f64;
            (
                Box::new(move || gather_cuda::index_select(&x, 0, &i)) as Op<'_>,
                want,
                bytes,
                0.0,
            )
        }
        _ => {
            let n = 1usize << 28;
            let x = Array1::from(workloads::random_f32(n, key(5)));
            let idx = Array1::from(workloads::random_index(n, n, key(6)));
            let want = gather::take(&x, &idx)
                .map_err(|e| e.to_string())?
                .into_dyn();
            let (xg, i) = (upload(gpu, &x)?, upload(gpu, &idx)?);
            let distinct = workloads::expected_distinct(n as f64, n as f64);
            let bytes = distinct * 4.0 + n as f64 * 8.0 + n as f64 * 4.0;
            (
                Box::new(move || gather_cuda::take(&xg, &i)) as Op<'_>,
                want,
                bytes,
                0.0,
            )
        }
    };
    let mut out = Vec::new();
    for (label, op) in [
        (name.to_string(), Some(op)),
        (format!("{name}_plan"), plan_op),
    ] {
        let Some(op) = op else { continue };
        let first = op().map_err(gpu_err)?;
        let check = compare(&first, &want, rtol).map_err(|e| format!("{label}: {e}"))?;
        drop(first);
        let (median_s, min_s) = time(gpu, &op, warmup, repeat)?;
        out.push(GpuTiming {
            name: label,
            median_s,
            min_s,
            min_bytes,
            check,
        });
    }
    Ok(out)
}
