//! The writing ops: `scatter`, `scatter_add`, `scatter_reduce` and `index_add`, out of place.
//! Deterministic: the index rows are sorted by destination (a stable radix sort), and each
//! destination folds its contributions in index order, so every run gives the same bits.
//!
//! ```text
//! scatter_add(self, dim=0, index, src), index expanded over the columns (stride 0):
//!   index = [1, 0, 1]     src = [s0, s1, s2]   (rows)
//!   out[0] = self[0] + s1
//!   out[1] = self[1] + s0 + s2     (always in this order)
//! ```

use gather::backend::{self, Bounds};
use gather::ops::reduce::{EmptyFill, GroupReduce};
use gather::{DType, Element, Reduce, Scalar};

use crate::device::{Source, launch};
use crate::error::{Error, Result};
use crate::gather::{
    as_1d, copy_into, index_operand, index_suffix, intern, read_index, require_int_index, unravel,
};
use crate::sort;
use crate::tensor::{CudaTensor, Layout, width};

/// What a scatter writes: the elements of a tensor, or one value everywhere.
///
/// ```
/// let v: gather_cuda::Src = gather::Scalar::Float(1.5).into();
/// assert!(matches!(v, gather_cuda::Src::Value(_)));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Src<'a> {
    /// `src[p]` for index position `p`.
    Tensor(&'a CudaTensor),
    /// The same value for every position (converted to the tensor's dtype as PyTorch does).
    Value(Scalar),
}

impl<'a> From<&'a CudaTensor> for Src<'a> {
    fn from(t: &'a CudaTensor) -> Self {
        Src::Tensor(t)
    }
}

impl From<Scalar> for Src<'_> {
    fn from(v: Scalar) -> Self {
        Src::Value(v)
    }
}

// The reduction codes of the kernels (`R_SUM` ... in scatter.cu).
pub(crate) const R_SUM: i32 = 0;
const R_MEAN: i32 = 2;
pub(crate) const R_SET: i32 = 5;
const R_AMAX: i32 = 3;

pub(crate) fn code(r: Reduce) -> i32 {
    match r {
        Reduce::Sum => 0,
        Reduce::Prod => 1,
        Reduce::Mean => R_MEAN,
        Reduce::Amax => 3,
        Reduce::Amin => 4,
        _ => R_SUM,
    }
}

/// `torch.scatter(input, dim, index, src)`: a copy of `input` with
/// `out[p with p[dim] := index[p]] = src[p]` for every position `p` of the index (or the one
/// value); with duplicate targets the last write in index order wins.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![0, 0, 0])?;
/// let i = CudaTensor::from_host(&gpu, &array![2i64, 0, 2])?;
/// let s = CudaTensor::from_host(&gpu, &array![7, 8, 9])?;
/// assert_eq!(gather_cuda::scatter(&x, 0, &i, &s)?.to_host::<i32>()?, array![8, 0, 9].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter<'a>(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: impl Into<Src<'a>>,
) -> Result<CudaTensor> {
    scatter_op("scatter", input, dim, index, src.into(), R_SET, true, false)
}

/// `torch.scatter_add(input, dim, index, src)`: a copy of `input` with
/// `out[p with p[dim] := index[p]] += src[p]`; each target adds its contributions in index order.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![1.0f32, 1.0])?;
/// let i = CudaTensor::from_host(&gpu, &array![1i64, 1, 0])?;
/// let s = CudaTensor::from_host(&gpu, &array![2.0f32, 3.0, 4.0])?;
/// let out = gather_cuda::scatter_add(&x, 0, &i, &s)?;
/// assert_eq!(out.to_host::<f32>()?, array![5.0f32, 6.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_add(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
) -> Result<CudaTensor> {
    scatter_op(
        "scatter_add",
        input,
        dim,
        index,
        Src::Tensor(src),
        R_SUM,
        true,
        false,
    )
}

/// `torch.scatter_reduce(input, dim, index, src, reduce, include_self=...)`: each target of the
/// index folds its contributions (and its own value when `include_self`) with `reduce`; targets
/// that no index value names keep `input`'s value. A value instead of `src` contributes itself at
/// every index position (PyTorch's legacy `scatter(..., value, reduce="add"|"multiply")` is this
/// with `Sum`/`Prod` and `include_self`).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Reduce};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![0.0f32, 9.0])?;
/// let i = CudaTensor::from_host(&gpu, &array![0i64, 0, 0])?;
/// let s = CudaTensor::from_host(&gpu, &array![2.0f32, 7.0, 4.0])?;
/// let out = gather_cuda::scatter_reduce(&x, 0, &i, &s, Reduce::Amax, false)?;
/// assert_eq!(out.to_host::<f32>()?, array![7.0f32, 9.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_reduce<'a>(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: impl Into<Src<'a>>,
    reduce: Reduce,
    include_self: bool,
) -> Result<CudaTensor> {
    scatter_op(
        "scatter_reduce",
        input,
        dim,
        index,
        src.into(),
        code(reduce),
        include_self,
        false,
    )
}

/// `torch.index_add(input, dim, index, source, alpha=alpha)`: a copy of `input` with
/// `out.select(dim, index[i]) += alpha * source.select(dim, i)`; duplicates add in index order.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Scalar};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((3, 2)))?;
/// let i = CudaTensor::from_host(&gpu, &array![0i64, 0, 2])?;
/// let s = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::ones((3, 2)))?;
/// let out = gather_cuda::index_add(&x, 0, &i, &s, Scalar::Int(2))?;
/// assert_eq!(out.to_host::<f32>()?, array![[4.0f32, 4.0], [0.0, 0.0], [2.0, 2.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_add(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source: &CudaTensor,
    alpha: Scalar,
) -> Result<CudaTensor> {
    let op = "index_add";
    // dim and the index's rank, the dtypes, then the shapes, in the CPU library's order.
    backend::check_index_dim(op, input.shape(), dim, index.shape(), index.dtype())?;
    require_int_index(op, index)?;
    same_dtype(op, "source", input, source)?;
    let alpha = scalar_bits(op, alpha, input.dtype())?;
    let d = backend::check_index_source(
        op,
        input.shape(),
        dim,
        index.shape(),
        index.dtype(),
        source.shape(),
    )?;
    let index = index_operand(op, "index", index)?;
    index_family(
        op,
        input,
        d,
        &index,
        Src::Tensor(source),
        R_SUM,
        true,
        Some(alpha),
        Bounds::Strict,
    )
}

/// `torch.index_copy(input, dim, index, source)`: a copy of `input` with
/// `out.select(dim, index[i]) = source.select(dim, i)`; with duplicates the last in index order
/// wins.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &ndarray::Array2::<i32>::zeros((3, 2)))?;
/// let i = CudaTensor::from_host(&gpu, &array![2i64, 0])?;
/// let s = CudaTensor::from_host(&gpu, &array![[1, 2], [3, 4]])?;
/// let out = gather_cuda::index_copy(&x, 0, &i, &s)?;
/// assert_eq!(out.to_host::<i32>()?, array![[3, 4], [0, 0], [1, 2]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_copy(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source: &CudaTensor,
) -> Result<CudaTensor> {
    let op = "index_copy";
    // dim and the index's rank, the dtypes, then the shapes, in the CPU library's order.
    backend::check_index_dim(op, input.shape(), dim, index.shape(), index.dtype())?;
    require_int_index(op, index)?;
    same_dtype(op, "source", input, source)?;
    let d = backend::check_index_copy(
        input.shape(),
        dim,
        index.shape(),
        index.dtype(),
        source.shape(),
    )?;
    let index = index_operand(op, "index", index)?;
    index_family(
        op,
        input,
        d,
        &index,
        Src::Tensor(source),
        R_SET,
        true,
        None,
        Bounds::Strict,
    )
}

/// `torch.index_fill(input, dim, index, value)`: a copy of `input` with
/// `out.select(dim, index[i]) = value`; index values in `-n..n` (negative ones count from the
/// end).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Scalar};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
/// let i = CudaTensor::from_host(&gpu, &array![-1i64])?;
/// let out = gather_cuda::index_fill(&x, 1, &i, Scalar::Float(7.0))?;
/// assert_eq!(out.to_host::<f32>()?, array![[0.0f32, 0.0, 7.0], [0.0, 0.0, 7.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_fill(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    value: Scalar,
) -> Result<CudaTensor> {
    let op = "index_fill";
    let d = backend::check_index_fill(input.shape(), dim, index.shape(), index.dtype())?;
    require_int_index(op, index)?;
    let index = index_operand(op, "index", index)?;
    index_family(
        op,
        input,
        d,
        &index,
        Src::Value(value),
        R_SET,
        true,
        None,
        Bounds::Wrap,
    )
}

/// `torch.index_reduce(input, dim, index, source, reduce, include_self=...)`: each selected
/// slice folds the source slices aimed at it (prod, mean, amax or amin; PyTorch has no sum here,
/// use [`index_add()`]), and its own values when `include_self`.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Reduce};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1.0f32, 1.0], [1.0, 1.0]])?;
/// let i = CudaTensor::from_host(&gpu, &array![0i64, 0])?;
/// let s = CudaTensor::from_host(&gpu, &array![[2.0f32, 3.0], [4.0, 5.0]])?;
/// let out = gather_cuda::index_reduce(&x, 0, &i, &s, Reduce::Prod, true)?;
/// assert_eq!(out.to_host::<f32>()?, array![[8.0f32, 15.0], [1.0, 1.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn index_reduce(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    source: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
) -> Result<CudaTensor> {
    let op = "index_reduce";
    if reduce == Reduce::Sum {
        // PyTorch's first check: index_reduce has no sum.
        backend::check_index_reduce(&[], 0, &[], DType::I64, &[], input.dtype(), reduce, true)?;
    }
    backend::check_index_dim(op, input.shape(), dim, index.shape(), index.dtype())?;
    require_int_index(op, index)?;
    same_dtype(op, "source", input, source)?;
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
    let index = index_operand(op, "index", index)?;
    index_family(
        op,
        input,
        d,
        &index,
        Src::Tensor(source),
        code(reduce),
        include_self,
        None,
        Bounds::Strict,
    )
}

/// The index ops as scatters: the 0-d or 1-d index is spread over the written region (source's
/// shape, or self's with the index's length along dim) with stride 0 on every other axis.
#[allow(clippy::too_many_arguments)]
fn index_family(
    op: &str,
    input: &CudaTensor,
    d: usize,
    index: &CudaTensor,
    src: Src<'_>,
    reduce: i32,
    include_self: bool,
    alpha: Option<u64>,
    rule: Bounds,
) -> Result<CudaTensor> {
    let x = as_1d(input);
    let index1 = as_1d(index);
    let size = x.shape()[d];
    let (source, value) = match src {
        Src::Tensor(t) => (Some(as_1d(t)), 0u64),
        Src::Value(v) => (None, scalar_bits(op, v, input.dtype())?),
    };
    let region: Vec<usize> = match &source {
        Some(s) => s.shape().to_vec(),
        None => {
            let mut r = x.shape().to_vec();
            r[d] = index.len();
            r
        }
    };
    let error = |j: usize| -> Result<Error> {
        let value = read_index(&index1, &[j])?;
        let coord = if index.ndim() == 0 {
            Vec::new()
        } else {
            vec![j]
        };
        Ok(backend::out_of_bounds(op, value, coord, d, size, rule).into())
    };
    if region.iter().product::<usize>() == 0 {
        // Nothing is written, but the index is still checked, as in PyTorch.
        if !index.is_empty() {
            if let Some(j) = crate::gather::check_values(&index1, size, rule)? {
                return Err(error(j as usize)?);
            }
        }
        return Ok(reshape_like(copy_of(input)?, input));
    }
    let spread = index1.spread(&region, d);
    let out = run(
        op,
        &x,
        d,
        &spread,
        source.as_ref(),
        value,
        reduce,
        include_self,
        alpha,
        rule,
        &|pos| error(unravel(pos, &region)[d]),
        Fold::Apply,
    )?;
    Ok(reshape_like(out, input))
}

/// `torch.put(input, index, source, accumulate)`: a copy of `input` with
/// `out.flatten()[index[q]] = source[q]` for every position `q` of the index (index and source
/// paired element by element in row-major order), or `+=` with `accumulate`. Values in `-n..n`
/// (negative ones count from the end). With duplicate targets the last write in index order
/// wins; accumulated contributions are added in index order, so every run gives the same bits.
///
/// ```text
/// input = [[a b c]      index  = [5, -6, 5]     out = [[y b c]
///          [d e f]]     source = [x, y, z]             [d e z]]    (accumulate: f+x+z at 5)
/// ```
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[0, 0, 0], [0, 0, 0]])?;
/// let i = CudaTensor::from_host(&gpu, &array![5i64, -6, 5])?;
/// let s = CudaTensor::from_host(&gpu, &array![1, 2, 3])?;
/// let out = gather_cuda::put(&x, &i, &s, true)?;
/// assert_eq!(out.to_host::<i32>()?, array![[2, 0, 0], [0, 0, 4]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn put(
    input: &CudaTensor,
    index: &CudaTensor,
    source: &CudaTensor,
    accumulate: bool,
) -> Result<CudaTensor> {
    let op = "put";
    let index = index_operand(op, "index", index)?;
    // Named as PyTorch (and the CPU library) name this error.
    same_dtype("put_()", "source", input, source)?;
    if !backend::check_put(input.shape(), index.shape(), source.shape())? {
        return copy_of(input);
    }
    let (n, k) = (input.len(), index.len());
    let x = input.reshape(&[n])?;
    let flat_index = index.reshape(&[k])?;
    let flat_source = source.reshape(&[k])?;
    let reduce = if accumulate { R_SUM } else { R_SET };
    let out = run(
        op,
        &x,
        0,
        &flat_index,
        Some(&flat_source),
        0,
        reduce,
        true,
        None,
        Bounds::Wrap,
        &|pos| {
            let coord = unravel(pos, index.shape());
            let v = read_index(&index, &coord)?;
            Ok(backend::flat_out_of_bounds(op, v, coord, input.shape()).into())
        },
        Fold::Apply,
    )?;
    out.reshape(input.shape())
}

/// The scatter ops: the checks, then the sorted fold, or with `atomic`
/// (`Options::deterministic(false)`) the atomic one where a kernel has the reduction.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_op(
    op: &str,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: Src<'_>,
    reduce: i32,
    include_self: bool,
    atomic: bool,
) -> Result<CudaTensor> {
    gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    let (src_t, value) = match src {
        Src::Tensor(t) => {
            same_dtype(op, "src", input, t)?;
            (Some(t), 0u64)
        }
        Src::Value(v) => (None, scalar_bits(op, v, input.dtype())?),
    };
    let checked = backend::check_scatter(
        op,
        input.shape(),
        dim,
        index.shape(),
        src_t.map(|t| t.shape()),
    )?;
    if reduce == R_MEAN {
        backend::check_scatter_reduce_dtype(op, Reduce::Mean, input.dtype())?;
    }
    let Some(d) = checked else {
        return copy_of(input);
    };
    let x = as_1d(input);
    let idx = as_1d(&index);
    let src1 = src_t.map(as_1d);
    let zero_d = index.ndim() == 0;
    if let Some(s) = src1
        .as_ref()
        .filter(|_| atomic && atomic_supported(x.dtype(), reduce))
    {
        let out = fold_atomic(op, &x, d, &idx, s, reduce, include_self, zero_d)?;
        return Ok(reshape_like(out, input));
    }
    let size = x.shape()[d];
    let out = run(
        op,
        &x,
        d,
        &idx,
        src1.as_ref(),
        value,
        reduce,
        include_self,
        None,
        Bounds::Strict,
        &|pos| strict_error(op, &idx, zero_d, d, size, pos),
        Fold::Apply,
    )?;
    Ok(reshape_like(out, input))
}

/// Whether the opt-in atomics have a kernel for `reduce` (a code) on `dtype`: sums of floats and
/// 32/64-bit integers (unsigned ones add as signed); products, maxima and minima of floats and
/// signed integers; means of floats. The others take the sorted path whatever the option says.
pub(crate) fn atomic_supported(dtype: DType, reduce: i32) -> bool {
    match reduce {
        R_SUM => matches!(
            dtype,
            DType::F32 | DType::F64 | DType::I32 | DType::U32 | DType::I64 | DType::U64
        ),
        1 | 3 | 4 => matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64),
        2 => matches!(dtype, DType::F32 | DType::F64),
        _ => false,
    }
}

/// The atomic fold of [`scatter_op`] (`Options::deterministic(false)`, `reduce` an
/// [`atomic_supported`] one): one thread per index position folding `s` into a copy of `x` (all
/// checked and at least 1-d). A float sum's or product's rounding depends on the order the
/// contributions land in, which changes between runs.
#[allow(clippy::too_many_arguments)]
fn fold_atomic(
    op: &str,
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    s: &CudaTensor,
    reduce: i32,
    include_self: bool,
    zero_d: bool,
) -> Result<CudaTensor> {
    let out = copy_of(x)?;
    let kind = match x.dtype() {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 | DType::U32 => "i32",
        _ => "i64",
    };
    let suffix = index_suffix(idx.dtype());
    let dev = x.device();
    let ishape = idx.shape().to_vec();
    let mut ostrides = gather::dims::row_major_strides(x.shape());
    let ostride = ostrides[d] as i64;
    ostrides[d] = 0;
    let (sl, il, ol) = (
        Layout::exact(&ishape, s.strides())?,
        Layout::exact(&ishape, idx.strides())?,
        Layout::exact(&ishape, &ostrides)?,
    );
    let (op_, sp, ip) = (out.ptr(), s.ptr(), idx.ptr());
    let (size, n, cfg) = (
        x.shape()[d] as i64,
        idx.len() as i64,
        dev.grid(idx.len(), 256),
    );
    if !include_self {
        // The targets the index names start from the reduction's identity, as the group
        // reductions' empty groups do.
        let group = match reduce {
            1 => GroupReduce::Prod,
            3 => GroupReduce::Amax,
            4 => GroupReduce::Amin,
            _ => GroupReduce::Sum,
        };
        let bits = backend::group_fill_bits(op, group, EmptyFill::Identity, x.dtype())?;
        let name = intern(format!("atomic_reset_{kind}_{suffix}"));
        let f = dev.function(Source::Atomic, name)?;
        macro_rules! reset {
            ($t:ty) => {{
                let identity = bits as $t;
                launch!(
                    dev, &f, name, cfg, &op_, &ip, &il, &ol, &ostride, &size, &n, &identity
                )
            }};
        }
        match width(x.dtype()) {
            4 => reset!(u32),
            _ => reset!(u64),
        }?;
    }
    // A mean counts its contributions (self as one when included), then divides.
    let counts = match reduce {
        2 => Some(crate::options::full(
            dev,
            x.shape(),
            DType::I32,
            include_self as u64,
        )?),
        _ => None,
    };
    let cp = counts.as_ref().map_or(0u64, |c| c.ptr());
    let name = intern(format!("atomic_reduce_{kind}_{suffix}"));
    let f = dev.function(Source::Atomic, name)?;
    let flagged = dev.with_flag(|flag| {
        launch!(
            dev, &f, name, cfg, &op_, &sp, &sl, &ip, &il, &ol, &ostride, &size, &n, &reduce, &cp,
            &flag
        )
    })?;
    if let Some(pos) = flagged {
        return Err(strict_error(op, idx, zero_d, d, x.shape()[d], pos)?);
    }
    if let Some(c) = counts {
        let name = intern(format!("atomic_mean_{kind}"));
        let f = dev.function(Source::Atomic, name)?;
        let (ccp, len) = (c.ptr(), out.len() as i64);
        launch!(dev, &f, name, dev.grid(out.len(), 256), &op_, &ccp, &len)?;
    }
    Ok(out)
}

/// The error for the first bad value (row-major position `pos`) of `idx` (the index as the
/// kernels saw it, 1-d for a 0-d one) of a scatter along `d` of `size` under the strict rule.
pub(crate) fn strict_error(
    op: &str,
    idx: &CudaTensor,
    zero_d: bool,
    d: usize,
    size: usize,
    pos: u64,
) -> Result<Error> {
    let coord = unravel(pos, idx.shape());
    let v = read_index(idx, &coord)?;
    let coord = if zero_d { Vec::new() } else { coord };
    Ok(backend::out_of_bounds(op, v, coord, d, size, Bounds::Strict).into())
}

/// `out` with `like`'s shape (they differ only for a 0-d `like`).
pub(crate) fn reshape_like(mut out: CudaTensor, like: &CudaTensor) -> CudaTensor {
    if like.ndim() == 0 {
        out.shape.clear();
        out.strides.clear();
    }
    out
}

pub(crate) fn same_dtype(
    op: &str,
    what: &str,
    input: &CudaTensor,
    other: &CudaTensor,
) -> Result<()> {
    if input.dtype() == other.dtype() {
        return Ok(());
    }
    Err(backend::dtype_mismatch(op, what, input.dtype(), other.dtype()).into())
}

/// A row-major copy of `t`.
pub(crate) fn copy_of(t: &CudaTensor) -> Result<CudaTensor> {
    let out = CudaTensor::empty(t.device(), t.shape(), t.dtype())?;
    copy_into(t, &out)?;
    Ok(out)
}

/// The value's bits in `dtype`, as the kernels take it (a u64 whose low bytes are the value).
pub(crate) fn scalar_bits(op: &str, v: Scalar, dtype: DType) -> Result<u64> {
    fn bits<T: Element>(v: Scalar) -> gather::Result<u64> {
        let t = T::from_scalar(v)?;
        let mut b = [0u8; 8];
        let n = std::mem::size_of::<T>();
        // SAFETY: T is a plain number (or bool) of n ≤ 8 bytes; its bytes are copied out.
        unsafe { std::ptr::copy_nonoverlapping(&t as *const T as *const u8, b.as_mut_ptr(), n) };
        Ok(u64::from_le_bytes(b))
    }
    let r = match dtype {
        DType::Bool => bits::<bool>(v),
        DType::U8 => bits::<u8>(v),
        DType::I8 => bits::<i8>(v),
        DType::I16 => bits::<i16>(v),
        DType::I32 => bits::<i32>(v),
        DType::I64 => bits::<i64>(v),
        DType::U16 => bits::<u16>(v),
        DType::U32 => bits::<u32>(v),
        DType::U64 => bits::<u64>(v),
        DType::F16 => bits::<half::f16>(v),
        DType::BF16 => bits::<half::bf16>(v),
        DType::F32 => bits::<f32>(v),
        DType::F64 => bits::<f64>(v),
        other => {
            return Err(gather::Error::new(
                gather::ErrorKind::InvalidArgument,
                format!("{op}: no CUDA kernel for {other}"),
            )
            .into());
        }
    };
    r.map_err(Error::Op)
}

/// What the scatter does with each sorted run of contributions: the apply kernels' reduction
/// (`reduce`), that and the winners' positions, or one of the group folds the apply kernels
/// have not (`src` is then a tensor and `include_self` false).
#[derive(Clone, Copy)]
pub(crate) enum Fold<'a> {
    /// The reduction `reduce` (or the last write, `R_SET`).
    Apply,
    /// `reduce` (amax or amin), and each target's winning position along dim into the i64
    /// tensor of the output's shape (all -1 on entry).
    Arg(&'a CudaTensor),
    /// The first contribution in index order.
    First,
    /// logsumexp (0), var (1) or std (2, with the correction), floats only.
    Float(i32, i64),
    /// softmax (or log_softmax, `true`) of every contribution within its target's run, into the
    /// tensor of src's shape (floats only); `x` then only gives the targets' extent.
    Softmax(&'a CudaTensor, bool),
}

/// Builds the kernels' RowMap (`struct RowMap` in scatter.cu).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RowMap {
    ndim: i64,
    shape: [i64; 8],
    istride: [i64; 8],
    kstride: [i64; 8],
    pstride: [i64; 8],
}

// SAFETY: a plain #[repr(C)] struct of integers, laid out as the kernels' `struct RowMap`.
unsafe impl cudarc::driver::DeviceRepr for RowMap {}

impl RowMap {
    /// A 1-d index of `len` positions `stride` elements apart, each value the key of its row.
    pub(crate) fn plain(len: usize, stride: isize) -> RowMap {
        let mut m = RowMap {
            ndim: 1,
            ..Default::default()
        };
        (m.shape[0], m.istride[0], m.kstride[0], m.pstride[0]) = (len as i64, stride as i64, 1, 1);
        m
    }
}

/// The deterministic scatter of `src` (or `value`) into a copy of `x` along `d`, where `idx`
/// (same rank as x; `src` at least as large) names the targets. `bad` turns the first bad
/// index position into the op's error.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    op: &str,
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    src: Option<&CudaTensor>,
    value: u64,
    reduce: i32,
    include_self: bool,
    alpha: Option<u64>,
    rule: Bounds,
    bad: &dyn Fn(u64) -> Result<Error>,
    fold: Fold<'_>,
) -> Result<CudaTensor> {
    let dev = x.device();
    // The output starts as a copy of x, made below unless the row kernel writes every row. A
    // softmax writes its own output; `x` only gives the groups' extent.
    let out = match fold {
        Fold::Softmax(..) => x.clone(),
        _ => CudaTensor::empty(dev, x.shape(), x.dtype())?,
    };
    let nd = x.ndim();
    if idx.is_empty() {
        copy_into(x, &out)?;
        return Ok(out);
    }
    if nd > 8 {
        return Err(crate::tensor::invalid(format!(
            "{op}: the CUDA kernels take at most 8 axes; this tensor has {nd}"
        )));
    }
    let m = idx.shape[d];
    if m <= FIBER_MAX && matches!(fold, Fold::Apply) {
        return run_fibers(
            x,
            d,
            idx,
            src,
            value,
            reduce,
            include_self,
            alpha,
            rule,
            out,
            bad,
        );
    }
    // Lane axes: the index repeats along them (stride 0), so one sorted row serves them all.
    let lane = |a: usize| a != d && idx.shape[a] > 1 && idx.strides[a] == 0;
    let g = Geometry::new(
        op,
        x,
        d,
        idx.shape(),
        &lane,
        src,
        matches!(fold, Fold::Apply),
    )?;
    // The key of a row: its target's row-major position among x's non-lane positions.
    let mut m = RowMap {
        ndim: nd as i64,
        ..Default::default()
    };
    let full = gather::dims::row_major_strides(idx.shape());
    let mut k = 1i64;
    for a in (0..nd).rev() {
        m.shape[a] = if lane(a) { 1 } else { idx.shape[a] as i64 };
        m.istride[a] = idx.strides[a] as i64;
        m.pstride[a] = full[a] as i64;
        if !lane(a) {
            m.kstride[a] = k;
            k *= x.shape[a] as i64;
        }
    }
    // Lives until the folds are queued.
    let sorted = sort_rows(
        idx,
        &m,
        d,
        x.shape[d],
        rule,
        (g.n_rows, g.n_keys),
        g.row_kernel,
        bad,
    )?;
    g.fold(
        x,
        out,
        sorted.runs,
        fold,
        (reduce, include_self),
        value,
        alpha,
    )
}

/// How a sorted scatter's contributions map into x (and `out`, its row-major copy) and src:
/// the row axes are sorted by their target's key; along the lane axes the index repeats, so
/// one sorted row serves them all.
pub(crate) struct Geometry {
    d: usize,
    /// The index's shape (src's extent of the scatter).
    ishape: Vec<usize>,
    rows_axes: Vec<usize>,
    lane_axes: Vec<usize>,
    pub(crate) n_rows: usize,
    pub(crate) n_keys: usize,
    lanes: usize,
    /// Keys walk x's extents on the row axes; rows walk the index's.
    kmap: Layout,
    lout: Layout,
    lsrc: Layout,
    rmap: Layout,
    /// kmap and rmap with their axes merged.
    km: Layout,
    rm: Layout,
    sp: u64,
    /// Whether [`Geometry::fold`] takes the row kernel, which orders runs of up to 32 rows
    /// itself (so that its sort may leave them as placed).
    pub(crate) row_kernel: bool,
}

impl Geometry {
    /// The geometry of a scatter of `src` (or a value) into x along `d`, where the index has
    /// shape `ishape` and repeats along the axes `lane` names; `apply`: the fold is
    /// [`Fold::Apply`].
    pub(crate) fn new(
        op: &str,
        x: &CudaTensor,
        d: usize,
        ishape: &[usize],
        lane: &dyn Fn(usize) -> bool,
        src: Option<&CudaTensor>,
        apply: bool,
    ) -> Result<Geometry> {
        let nd = x.ndim();
        let rows_axes: Vec<usize> = (0..nd).filter(|&a| !lane(a)).collect();
        let lane_axes: Vec<usize> = (0..nd).filter(|&a| lane(a)).collect();
        let n_rows: usize = rows_axes.iter().map(|&a| ishape[a]).product();
        let lanes: usize = lane_axes.iter().map(|&a| ishape[a]).product();
        let n_keys: usize = rows_axes.iter().map(|&a| x.shape[a]).product();
        if n_rows > u32::MAX as usize || n_keys > u32::MAX as usize {
            return Err(crate::tensor::invalid(format!(
                "{op}: the CUDA scatter sorts 32-bit keys; this call has {n_rows} index rows into {n_keys} targets"
            )));
        }
        let out_strides = gather::dims::row_major_strides(x.shape());
        let mut g = Geometry {
            d,
            ishape: ishape.to_vec(),
            rows_axes,
            lane_axes,
            n_rows,
            n_keys,
            lanes,
            kmap: Layout::default(),
            lout: Layout::default(),
            lsrc: Layout::default(),
            rmap: Layout::default(),
            km: Layout::default(),
            rm: Layout::default(),
            sp: 0,
            row_kernel: false,
        };
        g.kmap = {
            let shape: Vec<usize> = g.rows_axes.iter().map(|&a| x.shape[a]).collect();
            let st: Vec<isize> = g.rows_axes.iter().map(|&a| out_strides[a]).collect();
            Layout::exact(&shape, &st)?
        };
        g.lout = g.lanes_layout(&out_strides)?;
        if let Some(s) = src {
            g.lsrc = g.lanes_layout(s.strides())?;
            g.rmap = g.rows_layout(s.strides())?;
            g.sp = s.ptr();
        }
        // Row scatters (plain row keys and rows, contiguous columns as lanes) take a kernel
        // that keeps a run's columns in registers and orders the rows of each run of up to 32
        // itself, so that the counting sort leaves those runs as they were placed. On the
        // counting sort's runs (every key, empty ones too) with whole rows as lanes and a
        // row-major x, it also writes the rows that nothing targets, reading self from x: no
        // copy of x first.
        let (lo, ls) = (g.lout.merged()?, g.lsrc.merged()?);
        (g.km, g.rm) = (g.kmap.merged()?, g.rmap.merged()?);
        let unit = |l: &Layout| l.ndim == 1 && l.stride[0] == 1;
        g.row_kernel = apply
            && src.is_some()
            && (16..=128).contains(&lanes)
            && g.km.ndim == 1
            && g.rm.ndim == 1
            && unit(&lo)
            && unit(&ls);
        Ok(g)
    }

    /// The lane axes (never dim) of a tensor of the index's extent and these `strides`.
    fn lanes_layout(&self, strides: &[isize]) -> Result<Layout> {
        let shape: Vec<usize> = self.lane_axes.iter().map(|&a| self.ishape[a]).collect();
        let st: Vec<isize> = self.lane_axes.iter().map(|&a| strides[a]).collect();
        Layout::exact(&shape, &st)
    }

    /// The row axes of a tensor of the index's extent and these `strides`.
    fn rows_layout(&self, strides: &[isize]) -> Result<Layout> {
        let shape: Vec<usize> = self.rows_axes.iter().map(|&a| self.ishape[a]).collect();
        let st: Vec<isize> = self.rows_axes.iter().map(|&a| strides[a]).collect();
        Layout::exact(&shape, &st)
    }

    /// Folds the sorted `runs` into `out` (a new row-major tensor of x's shape, filled here
    /// with x first unless the row kernel writes every row): `reduce` with or without self, or
    /// the group fold `fold`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fold(
        &self,
        x: &CudaTensor,
        out: CudaTensor,
        runs: Runs,
        fold: Fold<'_>,
        (reduce, include_self): (i32, bool),
        value: u64,
        alpha: Option<u64>,
    ) -> Result<CudaTensor> {
        let dev = x.device();
        let (kp, rp, stp, np) = (runs.keys, runs.rows, runs.starts, runs.count);
        let (kmap, lout, lsrc, rmap, sp) = (self.kmap, self.lout, self.lsrc, self.rmap, self.sp);
        let (n_rows, lanes) = (self.n_rows, self.lanes);
        let whole_rows = self.row_kernel
            && runs.every_key
            && self.km.stride[0] == lanes as i64
            && x.is_standard();
        if !whole_rows && !matches!(fold, Fold::Softmax(..)) {
            copy_into(x, &out)?;
        }
        let cfg = dev.grid(n_rows.saturating_mul(lanes), 256);
        let l64 = lanes as i64;
        match fold {
            Fold::First => {
                let name = crate::gather::width_name("first", x.dtype());
                let f = dev.function(Source::Groups, name)?;
                let op_ = out.ptr();
                launch!(
                    dev, &f, name, cfg, &op_, &sp, &kp, &rp, &stp, &np, &kmap, &lout, &lsrc, &rmap,
                    &l64
                )?;
                return Ok(out);
            }
            Fold::Float(kind, correction) => {
                let name = intern(format!("float_group_{}", dtype_suffix(x.dtype())));
                let f = dev.function(Source::Groups, name)?;
                let op_ = out.ptr();
                launch!(
                    dev,
                    &f,
                    name,
                    cfg,
                    &op_,
                    &sp,
                    &kp,
                    &rp,
                    &stp,
                    &np,
                    &kmap,
                    &lout,
                    &lsrc,
                    &rmap,
                    &l64,
                    &kind,
                    &correction
                )?;
                return Ok(out);
            }
            Fold::Softmax(o, log) => {
                // The output has src's shape: rows and lanes map into it as into src.
                let rout = self.rows_layout(o.strides())?;
                let lo = self.lanes_layout(o.strides())?;
                let name = intern(format!("softmax_{}", dtype_suffix(x.dtype())));
                let f = dev.function(Source::Groups, name)?;
                let (op_, log) = (o.ptr(), log as i32);
                launch!(
                    dev, &f, name, cfg, &op_, &sp, &rp, &stp, &np, &lo, &lsrc, &rout, &rmap, &l64,
                    &log
                )?;
                return Ok(o.clone());
            }
            Fold::Apply | Fold::Arg(_) => {}
        }
        if let Fold::Arg(arg) = fold {
            // Before the values are folded: the arg kernel reads self from `out`.
            let name = intern(format!("arg_{}", dtype_suffix(x.dtype())));
            let f = dev.function(Source::Arg, name)?;
            let at = self
                .rows_axes
                .iter()
                .position(|&a| a == self.d)
                .expect("dim is a row axis");
            let jdiv: i64 = self.rows_axes[at + 1..]
                .iter()
                .map(|&a| self.ishape[a] as i64)
                .product();
            let jmod = self.ishape[self.d] as i64;
            let (ap, op_) = (arg.ptr(), out.ptr());
            let (is_max, incl) = ((reduce == R_AMAX) as i32, include_self as i32);
            launch!(
                dev, &f, name, cfg, &ap, &op_, &sp, &kp, &rp, &stp, &np, &kmap, &lout, &lsrc,
                &rmap, &l64, &jdiv, &jmod, &is_max, &incl
            )?;
        }

        let (alpha_bits, use_alpha) = (alpha.unwrap_or(0), alpha.is_some() as i32);
        if self.row_kernel {
            let (op_, out_row, src_row) = (out.ptr(), self.km.stride[0], self.rm.stride[0]);
            // f32 rows read as 8-byte pairs, 8 rows ahead (apply_rows_impl), where every pair is
            // whole and aligned, unless GATHER_CUDA_APPLY=narrow.
            let pairs =
                x.dtype() == DType::F32 && lanes % 2 == 0 && src_row % 2 == 0 && sp % 8 == 0;
            let way = if pairs { apply_way() } else { ApplyWay::Narrow };
            let name = match way {
                ApplyWay::Ahead => "apply_rows_ahead_f32",
                ApplyWay::Wide => "apply_rows_wide_f32",
                ApplyWay::Narrow => apply_rows_name(x.dtype()),
            };
            let f = dev.function(Source::Scatter, name)?;
            let mut cfg = dev.grid(n_rows.saturating_mul(32), 256);
            if way == ApplyWay::Ahead {
                // One wave of resident blocks (its launch bounds: 4 per multiprocessor), so that each
                // warp folds many runs and reads each next one during the one before.
                cfg.grid_dim.0 = cfg.grid_dim.0.min(dev.sms() as u32 * 4);
            }
            let self_rows = if whole_rows { x.ptr() } else { 0u64 };
            let (l32, red, incl) = (lanes as i32, reduce, include_self as i32);
            macro_rules! rows {
                ($t:ty) => {{
                    let a = alpha_bits as $t;
                    launch!(
                        dev, &f, name, cfg, &op_, &self_rows, &sp, &a, &use_alpha, &kp, &rp, &stp,
                        &np, &out_row, &src_row, &l32, &red, &incl
                    )
                }};
            }
            match width(x.dtype()) {
                1 => rows!(u8),
                2 => rows!(u16),
                4 => rows!(u32),
                _ => rows!(u64),
            }?;
            return Ok(out);
        }
        let name = apply_name(x.dtype());
        let f = dev.function(Source::Scatter, name)?;
        let warp = lanes >= 16;
        let cfg = if warp {
            dev.grid(n_rows.saturating_mul(32), 256)
        } else {
            dev.grid(n_rows.saturating_mul(lanes), 256)
        };
        let op_ = out.ptr();
        let (l64, red, incl, wm) = (lanes as i64, reduce, include_self as i32, warp as i32);
        // The kernels take `value` and `alpha` as elements of the tensor's own width.
        macro_rules! apply {
            ($t:ty) => {{
                let (v, a) = (value as $t, alpha_bits as $t);
                launch!(
                    dev, &f, name, cfg, &op_, &sp, &v, &a, &use_alpha, &kp, &rp, &stp, &np, &kmap,
                    &lout, &lsrc, &rmap, &l64, &red, &incl, &wm
                )
            }};
        }
        match width(x.dtype()) {
            1 => apply!(u8),
            2 => apply!(u16),
            4 => apply!(u32),
            _ => apply!(u64),
        }?;
        Ok(out)
    }
}

/// Where a sort left a scatter's contributions, on the GPU: the sorted keys (0 where run k is
/// key k and the row kernel needs none), the rows, the run starts and the run count.
#[derive(Clone, Copy)]
pub(crate) struct Runs {
    pub(crate) keys: u64,
    pub(crate) rows: u64,
    pub(crate) starts: u64,
    pub(crate) count: u64,
    /// Whether the runs are every key in order, empty ones too (the counting sort's).
    pub(crate) every_key: bool,
}

/// Sorted runs and the scratch they live in.
pub(crate) struct Sorted {
    pub(crate) runs: Runs,
    _scratch: sort::Scratch,
    _radix: Option<sort::Scratch>,
}

/// Sorts the index's rows (`m` maps a row to its target's key) by key, stably, each value
/// checked against `size` under `rule`: the first bad position becomes `bad`'s error.
/// `as_placed`: for the row kernel, which orders runs of up to 32 rows itself, the counting
/// sort leaves those as placed and writes no keys.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sort_rows(
    idx: &CudaTensor,
    m: &RowMap,
    d: usize,
    size: usize,
    rule: Bounds,
    (n_rows, n_keys): (usize, usize),
    as_placed: bool,
    bad: &dyn Fn(u64) -> Result<Error>,
) -> Result<Sorted> {
    let dev = idx.device();
    // The counting sort's scratch holds the keys, the rows and its own temporaries; the radix
    // sort's temporaries are allocated only if a long run sends the call there.
    let counting = sort::counting_fits(n_rows, n_keys) && !radix_only();
    let bytes = if counting {
        2 * sort::u32_bytes(n_rows) + sort::count_bytes(n_rows, n_keys)
    } else {
        sort::sort_bytes(n_rows)
    };
    let mut scratch = sort::Scratch::new(dev, bytes)?;
    let mut radix_scratch = None;
    let (kp, rp) = (scratch.u32s(n_rows), scratch.u32s(n_rows));
    let counts = if counting {
        sort::count_zeroed(dev, &mut scratch, n_keys)?
    } else {
        0
    };
    // The keys of runs past 32 rows, which the row kernel needs sorted (None: sort every run).
    let listed =
        (counting && as_placed).then(|| sort::count_listed(&mut scratch, n_rows, n_keys, counts));
    // The keys kernel takes the list and its count as pointers, null for none.
    let (list, n_listed) = listed.unwrap_or((0, 0));
    let keys_name = keys_name(idx.dtype());
    let f = dev.function(Source::Scatter, keys_name)?;
    let ip = idx.ptr();
    let (dim, size, rule, n64) = (
        d as i32,
        size as i64,
        crate::gather::rule(rule),
        n_rows as i64,
    );
    let keys = |counts: u64, list: u64| {
        dev.with_flag(|flag| {
            launch!(
                dev,
                &f,
                keys_name,
                dev.grid_batched(n_rows, 256, sort::KEYS_BATCH),
                &ip,
                m,
                &dim,
                &size,
                &rule,
                &n64,
                &kp,
                &rp,
                &counts,
                &list,
                &n_listed,
                &flag
            )
        })
    };
    let long = match keys(counts, list)? {
        Some(sort::LONG_RUN) => true,
        Some(pos) => return Err(bad(pos)?),
        None => false,
    };
    let (kp, rp, stp, np) = if counting && !long {
        sort::count_runs(dev, &mut scratch, kp, rp, n_rows, n_keys, counts, listed)?
    } else {
        if counting {
            // The counting keys kernel left ranks where the radix sort needs the rows.
            keys(0, 0)?;
        }
        let s = if counting {
            radix_scratch.insert(sort::Scratch::new(dev, sort::sort_bytes(n_rows))?)
        } else {
            &mut scratch
        };
        let bits = usize::BITS - (n_keys.max(2) - 1).leading_zeros();
        let (kp, rp) = sort::sort_pairs(dev, s, kp, rp, n_rows, bits)?;
        let (stp, np) = sort::runs(dev, s, kp, n_rows)?;
        (kp, rp, stp, np)
    };
    Ok(Sorted {
        runs: Runs {
            keys: kp,
            rows: rp,
            starts: stp,
            count: np,
            every_key: counting && !long,
        },
        _scratch: scratch,
        _radix: radix_scratch,
    })
}

/// Whether `GATHER_CUDA_SCATTER_SORT=radix` keeps the scatters on the radix sort (the counting
/// sort's A/B in `scripts/gpu_check.sh`, and a way around it).
fn radix_only() -> bool {
    static RADIX: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RADIX
        .get_or_init(|| std::env::var_os("GATHER_CUDA_SCATTER_SORT").is_some_and(|v| v == "radix"))
}

/// How f32 rows are folded (`GATHER_CUDA_APPLY`).
#[derive(Clone, Copy, PartialEq)]
enum ApplyWay {
    /// A column at a time (`narrow`: the A/B's other way, and CI's).
    Narrow,
    /// Pairs of columns, 8 rows ahead: 2% faster than a column at a time on W6, W7 and W6x16
    /// on an H200 (docs/performance.md). The default.
    Wide,
    /// As Wide, and each warp reads the next run's bounds and row numbers during its run
    /// (`ahead`: an experiment for the A/B).
    Ahead,
}

fn apply_way() -> ApplyWay {
    static WAY: std::sync::OnceLock<ApplyWay> = std::sync::OnceLock::new();
    *WAY.get_or_init(|| match std::env::var("GATHER_CUDA_APPLY").as_deref() {
        Ok("narrow") => ApplyWay::Narrow,
        Ok("ahead") => ApplyWay::Ahead,
        _ => ApplyWay::Wide,
    })
}

/// The longest fiber (index positions along dim) that one block sorts in shared memory
/// (`FIBER_MAX` in fiber.cu).
const FIBER_MAX: usize = 2048;

/// The scatter with one block per fiber (the positions along dim at one coordinate of the other
/// axes): each block sorts its fiber in shared memory and folds the runs. `out` starts as a
/// copy of x: when the fibers cover every line of `out` along `d`, each block copies its line
/// first; otherwise x is copied before the launch.
#[allow(clippy::too_many_arguments)]
fn run_fibers(
    x: &CudaTensor,
    d: usize,
    idx: &CudaTensor,
    src: Option<&CudaTensor>,
    value: u64,
    reduce: i32,
    include_self: bool,
    alpha: Option<u64>,
    rule: Bounds,
    out: CudaTensor,
    bad: &dyn Fn(u64) -> Result<Error>,
) -> Result<CudaTensor> {
    let dev = x.device();
    let nd = x.ndim();
    let others: Vec<usize> = (0..nd).filter(|&a| a != d).collect();
    let fshape: Vec<usize> = others.iter().map(|&a| idx.shape[a]).collect();
    let fibers: usize = fshape.iter().product();
    let pick = |strides: &[isize]| -> Result<Layout> {
        let st: Vec<isize> = others.iter().map(|&a| strides[a]).collect();
        Layout::exact(&fshape, &st)
    };
    let out_strides = gather::dims::row_major_strides(x.shape());
    let full = gather::dims::row_major_strides(idx.shape());
    let fidx = pick(idx.strides())?;
    let fout = pick(&out_strides)?;
    let fpos = pick(&full)?;
    let covers = others.iter().all(|&a| idx.shape[a] == x.shape[a]);
    let (fx, x_sd, xp) = if covers {
        (pick(x.strides())?, x.strides()[d] as i64, x.ptr())
    } else {
        copy_into(x, &out)?;
        (Layout::default(), 0, 0u64)
    };
    let (fsrc, src_sd, sp) = match src {
        Some(s) => (pick(s.strides())?, s.strides()[d] as i64, s.ptr()),
        None => (Layout::default(), 0, 0u64),
    };
    let m = idx.shape[d];
    let mp = m.next_power_of_two().max(2);
    let name = fiber_name(x.dtype(), idx.dtype());
    let f = dev.function(Source::Fiber, name)?;
    // The block sort holds two keys per thread.
    let threads = (mp / 2).clamp(32, 1024) as u32;
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (fibers.clamp(1, dev.sms() * 16) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let (op_, ip) = (out.ptr(), idx.ptr());
    let (idx_sd, out_sd, pos_sd) = (
        idx.strides()[d] as i64,
        out_strides[d] as i64,
        full[d] as i64,
    );
    let (nf, m32, mp32, size) = (fibers as i64, m as i32, mp as i32, x.shape[d] as i64);
    let rule = crate::gather::rule(rule);
    let (red, incl) = (reduce, include_self as i32);
    let (alpha_bits, use_alpha) = (alpha.unwrap_or(0), alpha.is_some() as i32);
    macro_rules! fold {
        ($t:ty) => {{
            let (v, a) = (value as $t, alpha_bits as $t);
            dev.with_flag(|flag| {
                launch!(
                    dev, &f, name, cfg, &op_, &xp, &fx, &x_sd, &sp, &v, &a, &use_alpha, &ip, &fidx,
                    &idx_sd, &fsrc, &src_sd, &fout, &out_sd, &fpos, &pos_sd, &nf, &m32, &mp32,
                    &size, &rule, &red, &incl, &flag
                )
            })
        }};
    }
    let flagged = match width(x.dtype()) {
        1 => fold!(u8),
        2 => fold!(u16),
        4 => fold!(u32),
        _ => fold!(u64),
    }?;
    if let Some(pos) = flagged {
        return Err(bad(pos)?);
    }
    Ok(out)
}

/// The kernels' name for an element type (`apply_f32`, `fiber_bf16_i64`, ...).
fn dtype_suffix(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::Bool => "bool",
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::U16 => "u16",
        DType::I32 => "i32",
        DType::U32 => "u32",
        DType::I64 => "i64",
        _ => "u64",
    }
}

fn fiber_name(d: DType, index: DType) -> &'static str {
    intern(format!("fiber_{}_{}", dtype_suffix(d), index_suffix(index)))
}

fn apply_rows_name(d: DType) -> &'static str {
    intern(format!("apply_rows_{}", dtype_suffix(d)))
}

fn apply_name(d: DType) -> &'static str {
    intern(format!("apply_{}", dtype_suffix(d)))
}

fn keys_name(index: DType) -> &'static str {
    intern(format!("keys_{}", index_suffix(index)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Source, compiled_entries};

    /// Every kernel name the scatter ops launch exists in the compiled PTX (needs NVRTC, no GPU:
    /// `.ci/run` provides it; elsewhere a missing NVRTC skips the check with a note).
    #[test]
    fn every_kernel_the_scatters_launch_is_compiled() {
        let Some(scatter) = compiled_entries(Source::Scatter) else {
            return;
        };
        let Some(fiber) = compiled_entries(Source::Fiber) else {
            return;
        };
        assert_eq!(scatter.get("apply_rows_wide_f32"), Some(&14));
        assert_eq!(scatter.get("apply_rows_ahead_f32"), Some(&14));
        for d in DType::ALL {
            assert!(scatter.contains_key(apply_name(d)), "{}", apply_name(d));
            assert!(
                scatter.contains_key(apply_rows_name(d)),
                "{}",
                apply_rows_name(d)
            );
            for i in [DType::I64, DType::I32] {
                assert!(fiber.contains_key(fiber_name(d, i)), "{}", fiber_name(d, i));
                assert!(scatter.contains_key(keys_name(i)), "{}", keys_name(i));
            }
        }
        if let Some(atomic) = compiled_entries(Source::Atomic) {
            for kind in ["float", "double", "i32", "i64"] {
                for i in [DType::I64, DType::I32] {
                    let name = format!("atomic_reduce_{kind}_{}", index_suffix(i));
                    assert_eq!(atomic.get(&name), Some(&12), "{name}");
                    let name = format!("atomic_reset_{kind}_{}", index_suffix(i));
                    assert_eq!(atomic.get(&name), Some(&8), "{name}");
                }
            }
            for kind in ["float", "double"] {
                let name = format!("atomic_mean_{kind}");
                assert_eq!(atomic.get(&name), Some(&3), "{name}");
            }
        }
        for (k, params) in [
            ("scan_block", 3),
            ("scan_add", 3),
            ("scan_sums", 3),
            ("scan_tiles", 3),
            ("radix_count", 5),
            ("radix_scatter", 8),
            ("run_flags", 3),
            ("run_starts", 5),
            ("count_place", 8),
            ("count_sort_runs", 5),
            ("count_sort_long", 4),
            ("keys_i64", 12),
            ("keys_i32", 12),
        ] {
            assert_eq!(scatter.get(k), Some(&params), "{k}");
        }
    }
}
