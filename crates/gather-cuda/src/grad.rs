//! Gradients on the GPU: the vector-Jacobian products of [`gather::grad`], with the same names,
//! formulas and arguments, on [`CudaTensor`]s.
//!
//! Each function takes the gradient of the op's output (`grad_out`) and what the forward call
//! saw, and returns the gradient of each differentiable input, of that input's shape and dtype.
//! The formulas are the CPU library's (see [`gather::grad`]), built from this crate's forward
//! ops, so that they are deterministic like them:
//!
//! ```text
//! gather(x, d, i)          d x = zeros(x).scatter_add(d, i, g)
//!
//!  x = [a, b, c]   i = [2, 0, 2]   g = [g0, g1, g2]   →   d x = [g1, 0, g0 + g2]
//! ```
//!
//! The arguments are those of a forward call that succeeded: a bad index value is reported by
//! the op that reads it (the dynamic `call_grad` (feature `dynamic`) runs the forward
//! first, so its errors are the forward's). `f16` and `bf16` gradients are computed in `f32` and
//! rounded once at the end; `f32` and `f64` in their own type. [`Parity`] chooses between the
//! library's `scatter_reduce` gradients and PyTorch's numbers, as on the CPU.
//!
//! ```no_run
//! use gather_cuda::{Cuda, CudaTensor};
//! use ndarray::array;
//! let gpu = Cuda::new(0)?;
//! let g = CudaTensor::from_host(&gpu, &array![1.0f32, 2.0, 4.0])?;
//! let i = CudaTensor::from_host(&gpu, &array![2i64, 0, 2])?;
//! let dx = gather_cuda::grad::gather(&g, &[3], 0, &i)?;
//! assert_eq!(dx.to_host::<f32>()?, array![2.0f32, 0.0, 5.0].into_dyn());
//! # Ok::<(), gather_cuda::Error>(())
//! ```

use gather::backend::{self, Bounds, GradOutputOf};
use gather::{DType, Reduce, Scalar};

pub use gather::grad::Parity;
pub use groups::{
    scatter_groups, scatter_log_softmax, scatter_reduce_arg, scatter_softmax, segment_arg_reduce,
    segment_log_softmax, segment_reduce, segment_softmax,
};
pub use options::GradOptions;

mod groups;
mod options;

use crate::CudaTensor;
use crate::device::{Source, launch};
use crate::error::{Error, Result};
use crate::gather::as_1d;
use crate::options::{full, splat};
use crate::scatter::{Fold, R_SUM, copy_of, reshape_like, run, scalar_bits};

/// The gradients of a scatter-like op with respect to `input` (`self`) and `src`, each of its
/// input's shape.
#[derive(Clone)]
pub struct ScatterGrad {
    /// The gradient of `input`, of its shape.
    pub input: CudaTensor,
    /// The gradient of `src`, of its shape (zero outside the index-shaped block the op read).
    pub src: CudaTensor,
}

/// The gradients of an op with an `input` and a `source` (`index_add`, `index_copy`,
/// `index_reduce`, `put`).
#[derive(Clone)]
pub struct SourceGrad {
    /// The gradient of `input`, of its shape.
    pub input: CudaTensor,
    /// The gradient of `source`, of its shape.
    pub source: CudaTensor,
}

const EW_EQ: i32 = 0;
const EW_MUL: i32 = 1;
const EW_DIV: i32 = 2;
const EW_SELECT: i32 = 3;
const EW_SUB: i32 = 4;
const EW_EXP: i32 = 5;
const EW_EQN: i32 = 6;
const EW_MAX: i32 = 7;

/// The gradient's arithmetic type for `dtype`, or the CPU library's error for a non-float.
fn wide_dtype(op: &str, dtype: DType) -> Result<DType> {
    match dtype {
        DType::F16 | DType::BF16 | DType::F32 => Ok(DType::F32),
        DType::F64 => Ok(DType::F64),
        other => Err(backend::not_float(op, other).into()),
    }
}

/// `t` converted between a 2-byte float and f32 (or itself when it already has `to`), row-major.
fn cast(t: &CudaTensor, to: DType) -> Result<CudaTensor> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    let name = match (t.dtype(), to) {
        (DType::F16, DType::F32) => "widen_f16",
        (DType::BF16, DType::F32) => "widen_bf16",
        (DType::F32, DType::F16) => "narrow_f16",
        (DType::F32, DType::BF16) => "narrow_bf16",
        (from, to) => {
            return Err(crate::tensor::invalid(format!(
                "gradients convert between the 2-byte floats and float32 only, not {from} to {to}"
            )));
        }
    };
    let dev = t.device();
    let out = CudaTensor::empty(dev, t.shape(), to)?;
    let n = t.len();
    if n > 0 {
        let f = dev.function(Source::Grad, name)?;
        let (op_, ap, al, n64) = (out.ptr(), t.ptr(), t.layout()?, n as i64);
        launch!(dev, &f, name, dev.grid(n, 256), &op_, &ap, &al, &n64)?;
    }
    Ok(out)
}

/// `t` in the gradient's arithmetic type.
fn widen(op: &str, t: &CudaTensor) -> Result<CudaTensor> {
    cast(t, wide_dtype(op, t.dtype())?)
}

/// `value` in `like`'s dtype, seen over `shape` with stride 0.
fn constant(like: &CudaTensor, value: f64, shape: &[usize]) -> Result<CudaTensor> {
    let bits = scalar_bits("grad", Scalar::Float(value), like.dtype())?;
    splat(like.device(), bits, like.dtype(), shape)
}

/// `shape` with a 0-d shape seen as `[1]` (the gather family's convention).
fn as_1d_shape(shape: &[usize]) -> Vec<usize> {
    if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    }
}

fn zeros(like: &CudaTensor, shape: &[usize]) -> Result<CudaTensor> {
    full(like.device(), shape, like.dtype(), 0)
}

/// One elementwise step over `a`'s shape (`b` and `c` have it too, or broadcast to it).
fn ew(op: i32, a: &CudaTensor, b: &CudaTensor, c: Option<&CudaTensor>) -> Result<CudaTensor> {
    let dev = a.device();
    let out = CudaTensor::empty(dev, a.shape(), a.dtype())?;
    let n = a.len();
    if n == 0 {
        return Ok(out);
    }
    let name = match a.dtype() {
        DType::F64 => "ew_double",
        _ => "ew_float",
    };
    let c = c.unwrap_or(a);
    let f = dev.function(Source::Grad, name)?;
    let (op_, ap, al, bp, bl, cp, cl, n64) = (
        out.ptr(),
        a.ptr(),
        a.layout()?,
        b.ptr(),
        b.layout()?,
        c.ptr(),
        c.layout()?,
        n as i64,
    );
    launch!(
        dev,
        &f,
        name,
        dev.grid(n, 256),
        &op,
        &op_,
        &ap,
        &al,
        &bp,
        &bl,
        &cp,
        &cl,
        &n64
    )?;
    Ok(out)
}

fn eq(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_EQ, a, b, None)
}
fn mul(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_MUL, a, b, None)
}
fn div(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_DIV, a, b, None)
}
/// `cond != 0 ? a : b`, elementwise.
fn select(cond: &CudaTensor, a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_SELECT, a, b, Some(cond))
}

fn sub(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_SUB, a, b, None)
}
fn exp(a: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_EXP, a, a, None)
}
/// Equal, or both NaN.
fn eq_nan(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_EQN, a, b, None)
}
fn max(a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    ew(EW_MAX, a, b, None)
}

/// `a == b ? g : 0` elementwise, for i64 positions `a` and `b` of `g`'s shape (or broadcast to
/// it); `g` in the wide type.
fn keep_eq(g: &CudaTensor, a: &CudaTensor, b: &CudaTensor) -> Result<CudaTensor> {
    let dev = g.device();
    let out = CudaTensor::empty(dev, g.shape(), g.dtype())?;
    let n = g.len();
    if n == 0 {
        return Ok(out);
    }
    let name = match g.dtype() {
        DType::F64 => "keep_eq_double",
        _ => "keep_eq_float",
    };
    let f = dev.function(Source::Grad, name)?;
    let (op_, gp, gl, ap, al, bp, bl, n64) = (
        out.ptr(),
        g.ptr(),
        g.layout()?,
        a.ptr(),
        a.layout()?,
        b.ptr(),
        b.layout()?,
        n as i64,
    );
    launch!(
        dev,
        &f,
        name,
        dev.grid(n, 256),
        &op_,
        &gp,
        &gl,
        &ap,
        &al,
        &bp,
        &bl,
        &n64
    )
    .map(|()| out)
}

/// `v` where it is nonzero, else 1.
fn nonzero_or_one(v: &CudaTensor) -> Result<CudaTensor> {
    let (zero, one) = (constant(v, 0.0, v.shape())?, constant(v, 1.0, v.shape())?);
    select(&eq(v, &zero)?, &one, v)
}

/// `block` at the leading corner of a zero tensor of `shape` (the gradient of reading only the
/// leading block of a larger tensor).
fn embed(block: &CudaTensor, shape: &[usize]) -> Result<CudaTensor> {
    if block.shape() == shape {
        return Ok(block.clone());
    }
    let out = zeros(block, shape)?;
    let b = as_1d(block);
    let mut corner = as_1d(&out);
    for (a, &n) in b.shape().iter().enumerate() {
        corner = corner.slice_axis(a, 0, n, 1)?;
    }
    corner.assign(&b)?;
    Ok(out)
}

/// The leading `shape`-sized block of `t` (both 1-d if 0-d).
fn leading(t: &CudaTensor, shape: &[usize]) -> Result<CudaTensor> {
    let mut v = as_1d(t);
    for (a, &n) in shape.iter().enumerate() {
        v = v.slice_axis(a, 0, n, 1)?;
    }
    Ok(v)
}

fn check_shape(op: &str, what: &str, got: &[usize], want_what: &str, want: &[usize]) -> Result<()> {
    backend::check_grad_shape(op, what, got, want_what, want).map_err(Into::into)
}

/// `zeros(shape).scatter_add(dim, index, g)` in the wide type, rounded to `g`'s dtype.
fn scatter_into_zeros(
    op: &str,
    g: &CudaTensor,
    shape: &[usize],
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    let w = widen(op, g)?;
    let dx = crate::scatter_add(&zeros(&w, shape)?, dim, index, &w)?;
    cast(&dx, g.dtype())
}

/// `body` (given the gradient's name `op`), its bad index or dim reported under that name.
fn grad_op<T>(op: &'static str, body: impl FnOnce(&'static str) -> Result<T>) -> Result<T> {
    named(op, body(op))
}

/// A bad index or dim that an op run by the gradient found, reported under the gradient's name
/// as the CPU library reports it (`grad::scatter_add: index 5 is out of bounds ...`, not
/// `gather: ...`).
pub(crate) fn named<T>(op: &str, r: Result<T>) -> Result<T> {
    r.map_err(|e| match e {
        Error::Op(inner)
            if matches!(
                inner.kind(),
                gather::ErrorKind::IndexOutOfBounds | gather::ErrorKind::DimOutOfRange
            ) =>
        {
            let message = inner.message();
            let (from, rest) = message.split_once(": ").unwrap_or(("", message));
            let mut renamed = gather::Error::new(inner.kind(), format!("{op}: {rest}"));
            if let Some(hint) = inner.hint() {
                // Some hints name the op too ("take indexes the row-major flattening ...").
                renamed = renamed.with_hint(match hint.strip_prefix(from) {
                    Some(tail) if !from.is_empty() && tail.starts_with(' ') => {
                        format!("{op}{tail}")
                    }
                    _ => hint.to_string(),
                });
            }
            if let (Some(v), Some(c)) = (inner.index_value(), inner.coordinate()) {
                renamed = renamed.with_index(v, c.to_vec());
            }
            Error::Op(renamed)
        }
        e => e,
    })
}

/// The gradient of [`gather()`](crate::gather()) with respect to `input`:
/// `zeros(input_shape).scatter_add(dim, index, grad_out)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64, 10.0]])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![[2i64, 2]])?;
/// let dx = gather_cuda::grad::gather(&g, &[1, 3], 1, &i)?;
/// assert_eq!(dx.to_host::<f64>()?, ndarray::array![[0.0, 0.0, 11.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn gather(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    grad_op("grad::gather", |op| {
        // The dim before the shapes, as the CPU library checks them.
        gather::dims::normalize_dim(op, dim, input_shape.len())?;
        backend::check_grad_output(op, GradOutputOf::Gather, grad_out.shape(), index.shape())?;
        scatter_into_zeros(op, grad_out, input_shape, dim, index)
    })
}

/// The gradients of [`scatter()`](crate::scatter()) with a src tensor:
/// `input = g.scatter(dim, index, 0)`, `src = g.gather(dim, index)` (zero outside the block read).
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0, 1.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let r = gather_cuda::grad::scatter(&g, 0, &i, &[2])?;
/// assert_eq!(r.input.to_host::<f64>()?, ndarray::array![0.0, 1.0, 1.0].into_dyn());
/// assert_eq!(r.src.to_host::<f64>()?, ndarray::array![1.0, 1.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter(
    grad_out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src_shape: &[usize],
) -> Result<ScatterGrad> {
    grad_op("grad::scatter", |op| {
        wide_dtype(op, grad_out.dtype())?;
        // src's gradient first: it checks the forward's shapes, src's included.
        let src = src_grad(op, grad_out, dim, index, src_shape)?;
        Ok(ScatterGrad {
            input: scatter_value(grad_out, dim, index)?,
            src,
        })
    })
}

/// The gradient of [`scatter()`](crate::scatter()) with a value, with respect to `input`:
/// `g.scatter(dim, index, 0)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f32, 2.0], [3.0, 4.0]])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![[1i64], [0]])?;
/// let dx = gather_cuda::grad::scatter_value(&g, 1, &i)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![[1.0f32, 0.0], [0.0, 4.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_value(grad_out: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    grad_op("grad::scatter_value", |op| {
        wide_dtype(op, grad_out.dtype())?;
        backend::check_scatter(op, grad_out.shape(), dim, index.shape(), None)?;
        crate::scatter(grad_out, dim, index, Scalar::Int(0))
    })
}

/// `g.gather(dim, index)` placed in zeros of `src_shape`.
fn src_grad(
    op: &str,
    g: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src_shape: &[usize],
) -> Result<CudaTensor> {
    // The forward's shapes first (src at least the index's size off dim), as the CPU checks them.
    backend::check_scatter(op, g.shape(), dim, index.shape(), Some(src_shape))?;
    if index.is_empty() {
        return zeros(g, src_shape);
    }
    let block = crate::gather(g, dim, index)?;
    embed(&block, src_shape)
}

/// The gradients of [`scatter_add()`](crate::scatter_add()): `input = g`,
/// `src = g.gather(dim, index)` (zero outside the block read).
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![2i64, 2])?;
/// let r = gather_cuda::grad::scatter_add(&g, 0, &i, &[2])?;
/// assert_eq!(r.src.to_host::<f32>()?, ndarray::array![3.0f32, 3.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_add(
    grad_out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src_shape: &[usize],
) -> Result<ScatterGrad> {
    grad_op("grad::scatter_add", |op| {
        wide_dtype(op, grad_out.dtype())?;
        Ok(ScatterGrad {
            input: copy_of(grad_out)?,
            src: src_grad(op, grad_out, dim, index, src_shape)?,
        })
    })
}

/// The gradients of [`scatter_reduce()`](crate::scatter_reduce()) with respect to `input` and
/// `src`; `result` is the forward's output. Same as [`scatter_reduce_with`] with
/// [`Parity::Correct`].
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::{CudaTensor, Reduce};
/// // out[0] = max(self[0], src[0], src[1], src[2]) = max(5, 5, 5, 1): a three-way tie.
/// let x = CudaTensor::from_host(&gpu, &ndarray::array![5.0f64, 1.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 0])?;
/// let s = CudaTensor::from_host(&gpu, &ndarray::array![5.0f64, 5.0, 1.0])?;
/// let out = gather_cuda::scatter_reduce(&x, 0, &i, &s, Reduce::Amax, true)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![12.0f64, 1.0])?;
/// let r = gather_cuda::grad::scatter_reduce(&g, &x, 0, &i, &s, Reduce::Amax, true, &out)?;
/// assert_eq!(r.input.to_host::<f64>()?, ndarray::array![4.0, 1.0].into_dyn());
/// assert_eq!(r.src.to_host::<f64>()?, ndarray::array![4.0, 4.0, 0.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce(
    grad_out: &CudaTensor,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
    result: &CudaTensor,
) -> Result<ScatterGrad> {
    scatter_reduce_with(
        grad_out,
        input,
        dim,
        index,
        src,
        reduce,
        include_self,
        result,
        Parity::Correct,
    )
}

/// [`scatter_reduce`](fn@scatter_reduce)'s gradients with the choice of [`Parity`]:
/// `Parity::PyTorch` gives PyTorch's numbers, including its `include_self = false` tie bug.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::{CudaTensor, Reduce, grad::Parity};
/// let x = CudaTensor::from_host(&gpu, &ndarray::array![3.0f64, 5.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let s = CudaTensor::from_host(&gpu, &ndarray::array![3.0f64, 1.0])?;
/// let out = gather_cuda::scatter_reduce(&x, 0, &i, &s, Reduce::Amax, false)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0])?;
/// let torch = gather_cuda::grad::scatter_reduce_with(&g, &x, 0, &i, &s, Reduce::Amax, false, &out, Parity::PyTorch)?;
/// assert_eq!(torch.src.to_host::<f64>()?, ndarray::array![0.5, 0.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scatter_reduce_with(
    grad_out: &CudaTensor,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
    result: &CudaTensor,
    parity: Parity,
) -> Result<ScatterGrad> {
    grad_op("grad::scatter_reduce", |op| {
        backend::check_grad_output(
            op,
            GradOutputOf::ScatterReduce,
            grad_out.shape(),
            input.shape(),
        )?;
        check_shape(op, "result", result.shape(), "input", input.shape())?;
        let d = backend::check_scatter(op, input.shape(), dim, index.shape(), Some(src.shape()))?;
        let (g, x, r) = (
            as_1d(&widen(op, grad_out)?),
            as_1d(&widen(op, input)?),
            as_1d(&widen(op, result)?),
        );
        let Some(d) = d else {
            let gi = unreferenced(&g, &x, &r, reduce, parity)?;
            return Ok(ScatterGrad {
                input: reshape_like(cast(&gi, input.dtype())?, input),
                src: zeros(src, src.shape())?,
            });
        };
        let idx = as_1d(index);
        let s = widen(op, &leading(src, idx.shape())?)?;
        let (gi, gs) = reduce_core(&g, &x, d, &idx, &s, &r, reduce, include_self, parity)?;
        let gs = cast(&gs, src.dtype())?;
        let gs = if src.ndim() == 0 {
            reshape_like(gs, src)
        } else {
            embed(&gs, src.shape())?
        };
        Ok(ScatterGrad {
            input: reshape_like(cast(&gi, input.dtype())?, input),
            src: gs,
        })
    })
}

/// The input gradient where nothing was scattered (an empty index).
fn unreferenced(
    g: &CudaTensor,
    x: &CudaTensor,
    r: &CudaTensor,
    reduce: Reduce,
    parity: Parity,
) -> Result<CudaTensor> {
    match (parity, reduce) {
        (Parity::PyTorch, Reduce::Amax | Reduce::Amin) => {
            let e = eq(x, r)?;
            mul(&e, &div(g, &e)?)
        }
        (Parity::PyTorch, Reduce::Prod) => {
            let m = nonzero_or_one(x)?;
            div(&mul(g, &m)?, &m)
        }
        _ => copy_of(g),
    }
}

/// The formulas of `scatter_reduce_backward`, step for step as the CPU library's `reduce_core`:
/// `g`, `x`, `r` have the input's shape, `idx` and `s` (the block of src that was read) the
/// index's, all in the wide type and at least 1-d. Returns `(d input, d src block)`.
#[allow(clippy::too_many_arguments)]
fn reduce_core(
    g: &CudaTensor,
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    s: &CudaTensor,
    r: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
    parity: Parity,
) -> Result<(CudaTensor, CudaTensor)> {
    let dim = d as isize;
    let (xs, is) = (x.shape(), idx.shape());
    let zero = Scalar::Int(0);
    let (mut gi, gs) = match reduce {
        Reduce::Sum => (copy_of(g)?, crate::gather(g, dim, idx)?),
        Reduce::Mean => {
            // Contributors per output element: the hits, plus self when included.
            let base = constant(x, if include_self { 1.0 } else { 0.0 }, xs)?;
            let n = crate::scatter_add(&base, dim, idx, &constant(x, 1.0, is)?)?;
            let gi = div(g, &nonzero_or_one(&n)?)?;
            let gs = crate::gather(&gi, dim, idx)?;
            (gi, gs)
        }
        Reduce::Amax | Reduce::Amin => {
            let value = crate::gather(r, dim, idx)?;
            let mut self_is = eq(x, r)?;
            if !include_self && parity == Parity::Correct {
                // An excluded self did not contribute: it takes no share of the gradient.
                self_is = crate::scatter(&self_is, dim, idx, zero)?;
            }
            let src_is = eq(s, &value)?;
            let n = crate::scatter_add(&self_is, dim, idx, &src_is)?;
            let share = div(g, &n)?;
            let gi = mul(&self_is, &share)?;
            let gs = mul(&crate::gather(&share, dim, idx)?, &src_is)?;
            (gi, gs)
        }
        Reduce::Prod => {
            let masked_self = nonzero_or_one(x)?;
            let msr = crate::scatter_reduce(&masked_self, dim, idx, s, Reduce::Prod, include_self)?;
            let gi = div(&mul(g, &msr)?, &masked_self)?;
            // How many src zeros land on each output element, seen from each src position.
            let zero_f = eq(s, &constant(s, 0.0, is)?)?;
            let zeros_at = crate::scatter_add(&zeros(x, xs)?, dim, idx, &zero_f)?;
            let zeros_seen = crate::gather(&zeros_at, dim, idx)?;
            let single = mul(&zero_f, &eq(&zeros_seen, &constant(s, 1.0, is)?)?)?;
            let masked_src = select(&single, &constant(s, 1.0, is)?, s)?;
            let msrc = crate::scatter_reduce(x, dim, idx, &masked_src, Reduce::Prod, include_self)?;
            let with_zero = crate::gather(&mul(g, &msrc)?, dim, idx)?;
            let plain = crate::gather(&mul(g, r)?, dim, idx)?;
            let gs = select(&single, &with_zero, &div(&plain, &nonzero_or_one(s)?)?)?;
            (gi, gs)
        }
        other => {
            return Err(crate::tensor::invalid(format!(
                "grad::scatter_reduce: no gradient for the reduction {other:?}"
            )));
        }
    };
    if !include_self {
        gi = crate::scatter(&gi, dim, idx, zero)?;
    }
    if parity == Parity::Correct && matches!(reduce, Reduce::Amax | Reduce::Amin | Reduce::Prod) {
        // Output elements no index refers to are `x` itself: the gradient passes through (the
        // formulas above give NaN there for a non-finite `x`).
        let hit = crate::scatter(&zeros(x, xs)?, dim, idx, Scalar::Int(1))?;
        gi = select(&hit, &gi, g)?;
    }
    Ok((gi, gs))
}

/// The gradient of [`index_select()`](crate::index_select()) with respect to `input`:
/// `zeros(input_shape).index_add(dim, index, grad_out)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![1i64, 1])?;
/// let dx = gather_cuda::grad::index_select(&g, &[3], 0, &i)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![0.0f32, 3.0, 0.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_select(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    grad_op("grad::index_select", |op| {
        wide_dtype(op, grad_out.dtype())?;
        // Shapes before values, as the CPU library checks them.
        let d = backend::check_index_select(op, input_shape, dim, index.shape(), index.dtype())?;
        let mut want = input_shape.to_vec();
        if let Some(n) = want.get_mut(d) {
            *n = index.len();
        }
        backend::check_grad_output(op, GradOutputOf::IndexSelect, grad_out.shape(), &want)?;
        let w = widen(op, grad_out)?;
        let dx = crate::index_add(&zeros(&w, input_shape)?, dim, index, &w, Scalar::Int(1))?;
        cast(&dx, grad_out.dtype())
    })
}

/// `g.index_select(dim, index)` (times `alpha`, in the wide type), reshaped to `source_shape`.
fn source_grad(
    op: &str,
    g: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source_shape: &[usize],
    alpha: Option<Scalar>,
) -> Result<CudaTensor> {
    let mut sel = crate::index_select(g, dim, index)?;
    if let Some(a) = alpha {
        // The CPU library rounds alpha to the gradient's dtype first, then multiplies widened.
        let a = crate::scatter::scalar_bits(op, a, g.dtype())?;
        let a = widen(op, &full(g.device(), &[], g.dtype(), a)?)?;
        let w = widen(op, &sel)?;
        sel = cast(&mul(&w, &a.broadcast(w.shape())?)?, g.dtype())?;
    }
    if sel.len() != source_shape.iter().product::<usize>() {
        use gather::error::fmt_shape;
        let d = gather::dims::normalize_dim(op, dim, g.ndim())?;
        return Err(gather::Error::new(gather::ErrorKind::ShapeMismatch, format!(
            "{op}: source has shape {} but the forward's source must have {} elements (self {}, {} indices along dim {d})",
            fmt_shape(source_shape),
            sel.len(),
            fmt_shape(g.shape()),
            index.len()
        ))
        .with_hint("pass the shape of the source the forward call took")
        .into());
    }
    sel.reshape(source_shape)
}

/// The gradients of [`index_add()`](crate::index_add()): `input = g`,
/// `source = alpha * g.index_select(dim, index)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::{CudaTensor, Scalar};
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64, 2.0], [5.0, 6.0]])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let r = gather_cuda::grad::index_add(&g, 0, &i, &[2, 2], Scalar::Float(3.0))?;
/// assert_eq!(r.source.to_host::<f64>()?, ndarray::array![[3.0, 6.0], [3.0, 6.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_add(
    grad_out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source_shape: &[usize],
    alpha: Scalar,
) -> Result<SourceGrad> {
    grad_op("grad::index_add", |op| {
        wide_dtype(op, grad_out.dtype())?;
        backend::check_index_dim(op, grad_out.shape(), dim, index.shape(), index.dtype())?;
        Ok(SourceGrad {
            input: copy_of(grad_out)?,
            source: source_grad(op, grad_out, dim, index, source_shape, Some(alpha))?,
        })
    })
}

/// The gradients of [`index_copy()`](crate::index_copy()): `input = g.index_fill(dim, index, 0)`,
/// `source = g.index_select(dim, index)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![2i64, 0])?;
/// let r = gather_cuda::grad::index_copy(&g, 0, &i, &[2])?;
/// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![0.0f32, 2.0, 0.0].into_dyn());
/// assert_eq!(r.source.to_host::<f32>()?, ndarray::array![3.0f32, 1.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_copy(
    grad_out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source_shape: &[usize],
) -> Result<SourceGrad> {
    grad_op("grad::index_copy", |op| {
        backend::check_index_dim(op, grad_out.shape(), dim, index.shape(), index.dtype())?;
        // The source's gradient first: it checks the index as index_copy does (no negative
        // values), index_fill would take them.
        let source = source_grad(op, grad_out, dim, index, source_shape, None)?;
        Ok(SourceGrad {
            input: index_fill(grad_out, dim, index)?,
            source,
        })
    })
}

/// The gradient of [`index_fill()`](crate::index_fill()) with respect to `input`:
/// `g.index_fill(dim, index, 0)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![1i64])?;
/// let dx = gather_cuda::grad::index_fill(&g, 0, &i)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![1.0f32, 0.0, 3.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_fill(grad_out: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    grad_op("grad::index_fill", |op| {
        wide_dtype(op, grad_out.dtype())?;
        backend::check_index_dim(op, grad_out.shape(), dim, index.shape(), index.dtype())?;
        crate::index_fill(grad_out, dim, index, Scalar::Int(0))
    })
}

/// The gradients of [`index_reduce()`](crate::index_reduce()) (prod, mean, amax, amin): those of
/// `scatter_reduce` with the index spread over each slice; `result` is the forward's output.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::{CudaTensor, Reduce, grad::Parity};
/// let x = CudaTensor::from_host(&gpu, &ndarray::array![2.0f64, 1.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
/// let s = CudaTensor::from_host(&gpu, &ndarray::array![3.0f64, 4.0])?;
/// let out = gather_cuda::index_reduce(&x, 0, &i, &s, Reduce::Prod, true)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0])?;
/// let r = gather_cuda::grad::index_reduce_with(&g, &x, 0, &i, &s, Reduce::Prod, true, &out, Parity::Correct)?;
/// assert_eq!(r.source.to_host::<f64>()?, ndarray::array![8.0, 6.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn index_reduce_with(
    grad_out: &CudaTensor,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
    result: &CudaTensor,
    parity: Parity,
) -> Result<SourceGrad> {
    grad_op("grad::index_reduce", |op| {
        let d = backend::check_index_reduce(
            input.shape(),
            dim,
            index.shape(),
            index.dtype(),
            source.shape(),
            input.dtype(),
            reduce,
            include_self,
        )?;
        backend::check_grad_output(
            op,
            GradOutputOf::IndexReduce,
            grad_out.shape(),
            input.shape(),
        )?;
        let index = crate::gather::index_operand(op, "index", index)?;
        let spread = as_1d(&index).spread(as_1d(source).shape(), d);
        let r = scatter_reduce_with(
            grad_out,
            input,
            dim,
            &spread,
            source,
            reduce,
            include_self,
            result,
            parity,
        )?;
        Ok(SourceGrad {
            input: r.input,
            source: r.src,
        })
    })
}

/// The gradient of [`take()`](crate::take()) with respect to `input`:
/// `zeros(input_shape).put(index, grad_out, accumulate = true)` (negative values wrap).
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 2.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![3i64, -1])?;
/// let dx = gather_cuda::grad::take(&g, &[2, 2], &i)?;
/// assert_eq!(dx.to_host::<f64>()?, ndarray::array![[0.0, 0.0], [0.0, 3.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn take(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    index: &CudaTensor,
) -> Result<CudaTensor> {
    grad_op("grad::take", |op| {
        backend::check_grad_output(op, GradOutputOf::Take, grad_out.shape(), index.shape())?;
        if input_shape.contains(&0) && !index.is_empty() {
            return Err(backend::take_grad_from_empty(op, input_shape, index.len()).into());
        }
        let w = widen(op, grad_out)?;
        let dx = crate::put(&zeros(&w, input_shape)?, index, &w, true)?;
        cast(&dx, grad_out.dtype())
    })
}

/// The gradient of [`take_along_dim()`](crate::take_along_dim()) with respect to `input`. With a
/// dim: gather's gradient into the input broadcast against the index (index values modulo the
/// size of `dim`, as in the forward), summed over the axes along which the input was broadcast.
/// With `None`: take's gradient on the flattened input.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// // The input [1, 4] was broadcast over the 3 rows of the index: their gradients add up.
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64], [2.0], [4.0]])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![[1i64], [1], [-1]])?;
/// let dx = gather_cuda::grad::take_along_dim(&g, &[1, 4], &i, Some(1))?;
/// assert_eq!(dx.to_host::<f64>()?, ndarray::array![[0.0, 3.0, 0.0, 4.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn take_along_dim(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    index: &CudaTensor,
    dim: Option<isize>,
) -> Result<CudaTensor> {
    grad_op("grad::take_along_dim", |op| {
        let Some(dim) = dim else {
            backend::check_grad_output(
                op,
                GradOutputOf::TakeAlongDimFlat,
                grad_out.shape(),
                &[index.len()],
            )?;
            return flat_sum(op, grad_out, input_shape, index);
        };
        // `wide`: the input as the forward read it, broadcast against the index off `dim`.
        let (d, wide, out_shape) =
            backend::check_take_along_dim(op, input_shape, index.shape(), dim)?;
        backend::check_grad_output(op, GradOutputOf::TakeAlongDim, grad_out.shape(), &out_shape)?;
        let index = crate::gather::index_operand(op, "index", index)?;
        let g = widen(op, grad_out)?;
        if g.is_empty() {
            return cast(&zeros(&g, input_shape)?, grad_out.dtype());
        }
        let ib = index.broadcast(&out_shape)?;
        let size = wide[d];
        let dx = run(
            op,
            &zeros(&g, &wide)?,
            d,
            &ib,
            Some(&g),
            0,
            R_SUM,
            true,
            None,
            Bounds::Modulo,
            &|pos| crate::scatter::strict_error(op, &ib, false, d, size, pos),
            Fold::Apply,
        )?;
        cast(&sum_to(&dx, input_shape)?, grad_out.dtype())
    })
}

/// take_along_dim's gradient with `dim = None`: `grad_out` added at the flat positions of the
/// input, which are not wrapped (a negative one is the forward's error, as on the CPU).
fn flat_sum(
    op: &str,
    g: &CudaTensor,
    input_shape: &[usize],
    index: &CudaTensor,
) -> Result<CudaTensor> {
    let n: usize = input_shape.iter().product();
    let index = crate::gather::index_operand(op, "indices", index)?;
    if n == 0 && !index.is_empty() {
        return Err(backend::take_grad_from_empty(op, input_shape, index.len()).into());
    }
    if index.is_empty() {
        return zeros(g, input_shape);
    }
    let w = widen(op, g)?;
    let k = index.len();
    let flat = run(
        op,
        &zeros(&w, &[n])?,
        0,
        &index.reshape(&[k])?,
        Some(&w.reshape(&[k])?),
        0,
        R_SUM,
        true,
        None,
        Bounds::Strict,
        &|pos| {
            let coord = crate::gather::unravel(pos, index.shape());
            let v = crate::gather::read_index(&index, &coord)?;
            Ok(backend::out_of_bounds(op, v, coord, 0, n, Bounds::Strict).into())
        },
        Fold::Apply,
    )?;
    cast(&flat.reshape(input_shape)?, g.dtype())
}

/// The gradients of [`put()`](crate::put()): `input = g` when accumulating, else
/// `g.put(index, 0)`; `source = g.take(index)`, of the source's shape.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![-1i64])?;
/// let r = gather_cuda::grad::put(&g, &i, &[1], false)?;
/// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![1.0f32, 2.0, 0.0].into_dyn());
/// assert_eq!(r.source.to_host::<f32>()?, ndarray::array![3.0f32].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn put(
    grad_out: &CudaTensor,
    index: &CudaTensor,
    source_shape: &[usize],
    accumulate: bool,
) -> Result<SourceGrad> {
    grad_op("grad::put", |op| {
        wide_dtype(op, grad_out.dtype())?;
        backend::check_put_grad(op, source_shape, index.shape())?;
        backend::check_put(grad_out.shape(), index.shape(), source_shape)?;
        let input = if accumulate || index.is_empty() {
            copy_of(grad_out)?
        } else {
            let zero = splat(grad_out.device(), 0, grad_out.dtype(), index.shape())?;
            crate::put(grad_out, index, &zero, false)?
        };
        let source = if index.is_empty() {
            zeros(grad_out, source_shape)?
        } else {
            crate::take(grad_out, index)?.reshape(source_shape)?
        };
        Ok(SourceGrad { input, source })
    })
}

/// The gradient of [`sort()`](crate::sort()) (on its values) with respect to `input`: each
/// value's gradient goes back to the element it came from, `zeros(input).scatter(dim, indices, g)`.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![10.0f32, 20.0, 30.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![1i64, 2, 0])?;
/// let dx = gather_cuda::grad::sort(&g, &[3], 0, &i)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![30.0f32, 10.0, 20.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn sort(
    grad_values: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    indices: &CudaTensor,
) -> Result<CudaTensor> {
    value_selecting("grad::sort", grad_values, input_shape, dim, indices)
}

/// The gradient of [`topk()`](crate::topk()) (on its values) with respect to `input`: as
/// [`sort`](fn@sort)'s; elements topk did not pick get zero.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![5.0f32])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![2i64])?;
/// let dx = gather_cuda::grad::topk(&g, &[3], 0, &i)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![0.0f32, 0.0, 5.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn topk(
    grad_values: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    indices: &CudaTensor,
) -> Result<CudaTensor> {
    value_selecting("grad::topk", grad_values, input_shape, dim, indices)
}

/// Each value's gradient back to the element it came from: `zeros(input).scatter_add(dim,
/// indices, g)` (the indices of one slice are distinct, so adding is writing).
fn value_selecting(
    op: &str,
    grad_values: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    indices: &CudaTensor,
) -> Result<CudaTensor> {
    check_shape(
        op,
        "grad_values",
        grad_values.shape(),
        "the indices",
        indices.shape(),
    )?;
    scatter_into_zeros(op, grad_values, input_shape, dim, indices)
}

/// `t` summed down to `shape` over the axes it was broadcast along (NumPy's rules: new leading
/// axes, and axes where `shape` has 1), each a scatter_add of every position to position 0, so
/// that the sums are deterministic.
fn sum_to(t: &CudaTensor, shape: &[usize]) -> Result<CudaTensor> {
    let lead = t.ndim() - shape.len();
    let mut target = vec![1; lead];
    target.extend_from_slice(shape);
    let mut dx = t.clone();
    for (a, &n) in target.iter().enumerate() {
        if n == 1 && dx.shape()[a] != 1 {
            let mut to = dx.shape().to_vec();
            to[a] = 1;
            let at0 = splat(t.device(), 0, DType::I64, dx.shape())?;
            dx = crate::scatter_add(&zeros(&dx, &to)?, a as isize, &at0, &dx)?;
        }
    }
    dx.reshape(shape)
}

/// The gradient of [`masked_select()`](crate::masked_select()) with respect to `input`:
/// `grad_out` (one element per true position of the broadcast mask) put back at those positions
/// in row-major order, summed over the axes along which the input was broadcast.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0, 1.0])?;
/// let mask = CudaTensor::from_host(&gpu, &ndarray::array![[true, false], [true, true]])?;
/// let dx = gather_cuda::grad::masked_select(&g, &[2], &mask)?;
/// assert_eq!(dx.to_host::<f64>()?, ndarray::array![2.0, 1.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn masked_select(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    mask: &CudaTensor,
) -> Result<CudaTensor> {
    let op = "grad::masked_select";
    // The forward's mask check, in its words, before the shapes.
    crate::masked::bool_mask("masked_select", mask)?;
    let b = backend::check_masked(op, input_shape, mask.shape())?;
    let w = widen(op, grad_out)?;
    let full = crate::masked::scatter_at_mask(&zeros(&w, &b)?, mask, &w, &|count| {
        backend::check_grad_output(op, GradOutputOf::MaskedSelect, grad_out.shape(), &[count])
            .map_err(Into::into)
    })?;
    cast(&sum_to(&full, input_shape)?, grad_out.dtype())
}

/// The gradients of [`masked_scatter()`](crate::masked_scatter()): `input = g` with the masked
/// positions zeroed (summed over the axes along which the input was broadcast), `source = g` at
/// the true positions in row-major order, zero for the source elements the forward did not use.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
/// let mask = CudaTensor::from_host(&gpu, &ndarray::array![false, true, true])?;
/// let r = gather_cuda::grad::masked_scatter(&g, &[3], &mask, &[3])?;
/// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![1.0f32, 0.0, 0.0].into_dyn());
/// assert_eq!(r.source.to_host::<f32>()?, ndarray::array![2.0f32, 3.0, 0.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn masked_scatter(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    mask: &CudaTensor,
    source_shape: &[usize],
) -> Result<SourceGrad> {
    let op = "grad::masked_scatter";
    // The forward's mask check, in its words, before the shapes.
    crate::masked::bool_mask("masked_scatter", mask)?;
    let b = backend::check_masked(op, input_shape, mask.shape())?;
    backend::check_grad_output(op, GradOutputOf::MaskedScatter, grad_out.shape(), &b)?;
    // g where the mask is false, 0 where it is true: elementwise, without numbering the mask's
    // true positions (masked_select below does that once).
    let w = widen(op, grad_out)?;
    let kept = if w.dtype() == grad_out.dtype() {
        copy_of(&w)?
    } else {
        w
    };
    crate::options::fill_where(&kept, &mask.broadcast(&b)?, 0)?;
    let input = cast(&sum_to(&kept, input_shape)?, grad_out.dtype())?;
    let picked = crate::masked_select(grad_out, mask)?;
    let n: usize = source_shape.iter().product();
    if picked.len() > n {
        return Err(backend::masked_grad_source_short(source_shape, picked.len()).into());
    }
    let source = embed(&picked, &[n])?.reshape(source_shape)?;
    Ok(SourceGrad { input, source })
}

/// The gradient of [`repeat_interleave()`](crate::repeat_interleave()) with respect to `input`:
/// each slice gets the sum of the gradients of its copies (`dim = None`: of the flattened input).
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![10.0f32, 20.0, 30.0])?;
/// let r = CudaTensor::from_host(&gpu, &ndarray::array![2i64, 0, 1])?;
/// let dx = gather_cuda::grad::repeat_interleave(&g, &[3], &r, Some(0))?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![30.0f32, 0.0, 30.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn repeat_interleave(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    repeats: &CudaTensor,
    dim: Option<isize>,
) -> Result<CudaTensor> {
    let op = "grad::repeat_interleave";
    let values = crate::repeat::host_counts(repeats)?;
    let (d, counts, total) =
        backend::repeat_plan(op, input_shape, repeats.shape(), &values, dim, None)?;
    sum_copies(op, grad_out, input_shape, d, &counts, total)
}

/// [`repeat_interleave`](fn@repeat_interleave)'s gradient for one count for every slice.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0, 4.0])?;
/// let dx = gather_cuda::grad::repeat_interleave_scalar(&g, &[2], 2, None)?;
/// assert_eq!(dx.to_host::<f32>()?, ndarray::array![3.0f32, 7.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn repeat_interleave_scalar(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    repeats: usize,
    dim: Option<isize>,
) -> Result<CudaTensor> {
    let op = "grad::repeat_interleave";
    let (d, size, total) = backend::repeat_plan_scalar(op, input_shape, repeats, dim, None)?;
    sum_copies(op, grad_out, input_shape, d, &vec![repeats; size], total)
}

/// `zeros(input).index_add(d, [j repeated counts[j] times], g)` (`d = None`: on the flattening).
fn sum_copies(
    op: &str,
    g: &CudaTensor,
    shape: &[usize],
    d: Option<usize>,
    counts: &[usize],
    total: usize,
) -> Result<CudaTensor> {
    let (flat, d) = match d {
        Some(d) => (shape.to_vec(), d),
        None => (vec![shape.iter().product()], 0),
    };
    let mut want = flat.clone();
    want[d] = total;
    backend::check_grad_output(op, GradOutputOf::RepeatInterleave, g.shape(), &want)?;
    let w = widen(op, g)?;
    let pos = crate::repeat::positions(g.device(), counts, total, DType::I64)?;
    let dx = crate::index_add(&zeros(&w, &flat)?, d as isize, &pos, &w, Scalar::Int(1))?;
    cast(&dx.reshape(shape)?, g.dtype())
}

/// The gradient of [`select_batched()`](crate::select_batched()) with respect to `input`: rows
/// read several times get the sum of their gradients, rows never read get zero.
///
/// ```no_run
/// # let gpu = gather_cuda::Cuda::new(0)?;
/// use gather_cuda::CudaTensor;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64, 2.0], [3.0, 4.0]])?;
/// let labels = CudaTensor::from_host(&gpu, &ndarray::array![2i64, 1])?;
/// let d = gather_cuda::grad::select_batched(&g, &[2, 3, 2], 1, &labels, 1)?;
/// assert_eq!(d.to_host::<f64>()?, ndarray::array![[[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]],
///                                                  [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn select_batched(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    axis: isize,
    index: &CudaTensor,
    batch_dims: usize,
) -> Result<CudaTensor> {
    grad_op("grad::select_batched", |op| {
        let index = crate::gather::index_operand(op, "index", index)?;
        let (a, gather_shape, out_shape) =
            backend::check_select_batched(op, input_shape, axis, index.shape(), batch_dims)?;
        backend::check_grad_output(
            op,
            GradOutputOf::SelectBatched,
            grad_out.shape(),
            &out_shape,
        )?;
        crate::gather::check_own_values(op, &index, a, input_shape[a])?;
        if grad_out.is_empty() {
            return cast(
                &zeros(&widen(op, grad_out)?, input_shape)?,
                grad_out.dtype(),
            );
        }
        let spread = crate::gather::batched_spread(&index, &gather_shape, batch_dims, a)?;
        scatter_into_zeros(
            op,
            &grad_out.reshape(&gather_shape)?,
            input_shape,
            a as isize,
            &spread,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_kernel_the_gradients_launch_is_compiled() {
        let Some(entries) = compiled_entries(Source::Grad) else {
            return;
        };
        for name in ["ew_float", "ew_double"] {
            assert_eq!(entries.get(name), Some(&9), "{name}");
        }
        for name in ["widen_f16", "widen_bf16", "narrow_f16", "narrow_bf16"] {
            assert_eq!(entries.get(name), Some(&4), "{name}");
        }
        for name in ["keep_eq_float", "keep_eq_double"] {
            assert_eq!(entries.get(name), Some(&8), "{name}");
        }
    }
}
