//! [`Options`]: what PyTorch has no word for, chosen per call, as the CPU library's
//! [`gather::Options`]: a bounds policy ([`OutOfBounds`], the same table) and broadcasting
//! (the same rules). The fill value of `Fill` is a [`Scalar`], converted to the tensor's dtype.
//!
//! ```text
//! Options::new().bounds(Fill(0)).gather(input=[10, 20, 30], dim=0, index=[-1, 1, 5])
//!                                                          fill → 20  fill   = [0, 20, 0]
//! Options::new().bounds(Drop).scatter_add(self=[0, 0, 0], dim=0, index=[-1, 1, 5], src=[1, 2, 4])
//!                                                       skipped → +2 skipped = [0, 2, 0]
//! Options::new().broadcast(true).gather(input [B, N, D], dim=1, index [B, K, 1]) → [B, K, D]
//! ```
//!
//! How it runs: one kernel maps the index under the policy (each stored value once: a stride-0
//! axis stays stride 0), then the op's own kernels run on the mapped index. Fill writes the fill
//! value over the filled positions afterwards; Drop sends the dropped writes to one extra
//! scratch slice of a copy of the input, so that every reduction (`mean` and `include_self`
//! included) sees exactly the kept writes. When no value is out of range neither costs more
//! than the mapping.

use gather::backend::{self, Bounds};
use gather::{DType, OutOfBounds, Reduce, Scalar};

use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::{
    as_1d, copy_into, gather_op, index_operand, index_suffix, intern, read_index, unravel,
    width_name,
};
use crate::scatter::scatter_op;
use crate::scatter::{R_SET, R_SUM, Src, code, copy_of, reshape_like, same_dtype, scalar_bits};
use crate::tensor::{CudaTensor, width};

/// The choices PyTorch has no word for, for one call on the GPU: a bounds policy and
/// broadcasting. `Options::new()` is PyTorch's behaviour; each method is the op of the same
/// name under these options.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// // -1 marks padding: Fill reads 0.0 there; Wrap counts from the end.
/// let emb = CudaTensor::from_host(&gpu, &array![[0.5f32, 1.0], [2.0, 4.0]])?;
/// let idx = CudaTensor::from_host(&gpu, &array![[1i64, -1], [0, 1]])?;
/// let fill = Options::new().bounds(OutOfBounds::Fill(0.0.into()));
/// assert_eq!(fill.gather(&emb, 1, &idx)?.to_host::<f32>()?, array![[1.0f32, 0.0], [2.0, 4.0]].into_dyn());
/// let wrap = Options::new().bounds(OutOfBounds::Wrap);
/// assert_eq!(wrap.gather(&emb, 1, &idx)?.to_host::<f32>()?, array![[1.0f32, 1.0], [2.0, 4.0]].into_dyn());
/// assert!(Options::new().gather(&emb, 1, &idx).is_err()); // PyTorch's rule
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Options {
    /// What an index value outside its dimension does.
    pub bounds: OutOfBounds<Scalar>,
    /// Whether the index and `src` broadcast against the input (gather and the scatter ops).
    pub broadcast: bool,
    /// Whether `scatter_add` and `scatter_reduce` give bitwise the same result on every run (the
    /// default: a sorted fold in index order). `false` opts into device atomics, PyTorch's
    /// default on CUDA: no sort, but a float sum's or product's rounding then changes from run
    /// to run. Sums of floats and 32/64-bit integers, products, maxima and minima of floats and
    /// signed integers, means of floats; the others stay sorted.
    pub deterministic: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options::new()
    }
}

/// An index mapped into range under a policy: `index` has the original's shape (stride 0 where
/// the original was), `missing` marks where Fill and Drop found a value out of range (`None`
/// when nowhere).
pub(crate) struct Mapped {
    pub(crate) index: CudaTensor,
    pub(crate) missing: Option<CudaTensor>,
}

// The policy codes of `bounds_map` (`P_WRAP` ... in bounds.cu).
const P_WRAP: i32 = 1;
const P_CLIP: i32 = 3;
const P_MISSING: i32 = 4;

impl Options {
    /// PyTorch's behaviour: `OutOfBounds::Error`, no broadcasting.
    ///
    /// ```
    /// assert_eq!(gather_cuda::Options::new(), gather_cuda::Options::default());
    /// ```
    pub fn new() -> Self {
        Options {
            bounds: OutOfBounds::Error,
            broadcast: false,
            deterministic: true,
        }
    }

    /// The same options with bounds policy `policy`.
    ///
    /// ```
    /// use gather_cuda::{Options, OutOfBounds};
    /// let o = Options::new().bounds(OutOfBounds::Fill(gather::Scalar::Int(-1)));
    /// assert_eq!(o.bounds.name(), "fill");
    /// ```
    pub fn bounds(self, policy: OutOfBounds<Scalar>) -> Self {
        Options {
            bounds: policy,
            ..self
        }
    }

    /// The same options with broadcasting on or off.
    ///
    /// ```
    /// assert!(gather_cuda::Options::new().broadcast(true).broadcast);
    /// ```
    pub fn broadcast(self, on: bool) -> Self {
        Options {
            broadcast: on,
            ..self
        }
    }

    /// The same options with deterministic scatter reductions on (the default) or off (device
    /// atomics for `scatter_add` and `scatter_reduce`, as `torch.use_deterministic_algorithms`
    /// off).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options};
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &ndarray::array![0.0f32, 0.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![1i64, 1, 0])?;
    /// let s = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 4.0])?;
    /// let out = Options::new().deterministic(false).scatter_add(&x, 0, &i, &s)?;
    /// assert_eq!(out.to_host::<f32>()?, ndarray::array![4.0f32, 3.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn deterministic(self, on: bool) -> Self {
        Options {
            deterministic: on,
            ..self
        }
    }

    fn no_broadcast(&self, op: &str) -> Result<()> {
        if self.broadcast {
            return Err(backend::no_broadcast_form(op).into());
        }
        Ok(())
    }

    /// The fill value's bits in `dtype` for a read (after the read's own policy check).
    fn read_policy(&self, op: &str, dtype: DType) -> Result<Option<u64>> {
        backend::reads_only(op, &self.bounds)?;
        match self.bounds {
            OutOfBounds::Fill(v) => Ok(Some(scalar_bits(op, v, dtype)?)),
            _ => Ok(None),
        }
    }

    /// Runs a read on the index mapped under the policy (not `Error`), then writes the fill value
    /// (`fill`: its bits, from [`Options::read_policy`]) where the index was out of range.
    /// `spread` views the missing marks with the output's shape (or its element count, in the
    /// output's row-major order).
    fn read(
        &self,
        op: &str,
        fill: Option<u64>,
        index: &CudaTensor,
        (dim, size): (usize, usize),
        run: &dyn Fn(&CudaTensor) -> Result<CudaTensor>,
        spread: &dyn Fn(&CudaTensor, &CudaTensor) -> Result<CudaTensor>,
    ) -> Result<CudaTensor> {
        let index = index_operand(op, "index", index)?;
        let m = resolve(op, &index, dim, size, &self.bounds, 0)?;
        let out = run(&m.index)?;
        if let (Some(bits), Some(missing)) = (fill, m.missing) {
            fill_where(&out, &spread(&missing, &out)?, bits)?;
        }
        Ok(out)
    }

    /// Runs a write on the index mapped under the policy (not `Error`). `axis` is the indexed
    /// dim, `None` for `put`'s flat index. Under Drop with a value out of range, `run` writes into
    /// a copy of `input` with one scratch slice more along the axis, which takes the dropped
    /// writes and is cut off afterwards.
    fn write(
        &self,
        op: &str,
        input: &CudaTensor,
        axis: Option<isize>,
        index: &CudaTensor,
        run: &dyn Fn(&CudaTensor, &CudaTensor) -> Result<CudaTensor>,
    ) -> Result<CudaTensor> {
        if self.bounds == OutOfBounds::Error {
            return run(input, index);
        }
        backend::writes_only(op, &self.bounds)?;
        let index = index_operand(op, "index", index)?;
        let x = as_1d(input);
        let (d, n) = match axis {
            Some(a) => {
                let d = gather::dims::normalize_dim(op, a, x.ndim())?;
                (d, x.shape()[d])
            }
            None => (0, input.len()),
        };
        let m = resolve(op, &index, d, n, &self.bounds, n as i64)?;
        if m.missing.is_none() {
            return run(input, &m.index);
        }
        let dev = input.device();
        let out = match axis {
            Some(_) => {
                // The extended copy is allocated with the axis first, so that its first n slices
                // are one row-major block that the copy kernel can write; the op sees it through
                // the permuted view.
                let nd = x.ndim();
                let front: Vec<usize> = std::iter::once(d)
                    .chain((0..nd).filter(|&a| a != d))
                    .collect();
                let mut back = vec![0; nd];
                for (i, &a) in front.iter().enumerate() {
                    back[a] = i;
                }
                let xf = x.permuted_axes(&front)?;
                let mut shape = xf.shape().to_vec();
                shape[0] += 1;
                let ext = CudaTensor::empty(dev, &shape, input.dtype())?;
                copy_into(&xf, &ext.slice_axis(0, 0, n, 1)?)?;
                zero_from(&ext, xf.len())?;
                let out = run(&ext.permuted_axes(&back)?, &m.index)?;
                copy_of(&out.slice_axis(d, 0, n, 1)?)?
            }
            None => {
                let ext = CudaTensor::empty(dev, &[n + 1], input.dtype())?;
                copy_into(&input.reshape(&[n])?, &ext.slice_axis(0, 0, n, 1)?)?;
                zero_from(&ext, n)?;
                let out = run(&ext, &m.index)?;
                out.slice_axis(0, 0, n, 1)?.reshape(input.shape())?
            }
        };
        Ok(reshape_like(out, input))
    }
}

// ---------------------------------------------------------------------------------------------
// Reads

impl Options {
    /// [`gather()`](crate::gather()) under these options (bounds: Error, Wrap, Clip or Fill;
    /// broadcasting: on every axis but `dim`, input and index sizes are equal or one of them is
    /// 1, as [`gather::ops::broadcast`]).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![[10, 20, 30], [40, 50, 60]])?;
    /// // A [2, 1] index broadcast over the 3 columns, with -1 reading 0.
    /// let i = CudaTensor::from_host(&gpu, &array![[1i64], [-1]])?;
    /// let opts = Options::new().broadcast(true).bounds(OutOfBounds::Fill(0.into()));
    /// assert_eq!(opts.gather(&x, 0, &i)?.to_host::<i32>()?, array![[40, 50, 60], [0, 0, 0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn gather(&self, input: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
        let op = if self.broadcast {
            "gather_broadcast"
        } else {
            "gather"
        };
        let plain = |i: &CudaTensor| match self.broadcast {
            true => gather_broadcast(input, dim, i),
            false => crate::gather(input, dim, i),
        };
        if self.bounds == OutOfBounds::Error {
            return plain(index);
        }
        let fill = self.read_policy(op, input.dtype())?;
        let ds = dim_size(op, input, dim)?;
        let spread = |m: &CudaTensor, out: &CudaTensor| match self.broadcast {
            true => m.broadcast(out.shape()),
            false => Ok(m.clone()),
        };
        self.read(op, fill, index, ds, &plain, &spread)
    }

    /// [`take_along_dim()`](crate::take_along_dim()) under a bounds policy (Error, Wrap, Clip or
    /// Fill). Under Error, PyTorch wraps values modulo the size when a dim is given and wants
    /// `0..n` without one.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![[10, 20, 30], [40, 50, 60]])?;
    /// let i = CudaTensor::from_host(&gpu, &array![[2i64], [7]])?;
    /// let clip = Options::new().bounds(OutOfBounds::Clip).take_along_dim(&x, &i, Some(1))?;
    /// assert_eq!(clip.to_host::<i32>()?, array![[30], [60]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn take_along_dim(
        &self,
        input: &CudaTensor,
        index: &CudaTensor,
        dim: Option<isize>,
    ) -> Result<CudaTensor> {
        let op = "take_along_dim";
        self.no_broadcast(op)?;
        if self.bounds == OutOfBounds::Error {
            return crate::take_along_dim(input, index, dim);
        }
        let fill = self.read_policy(op, input.dtype())?;
        let ds = match dim {
            Some(dim) => dim_size(op, input, dim)?,
            None => (0, input.len()),
        };
        let spread = |m: &CudaTensor, out: &CudaTensor| match dim {
            Some(_) => m.broadcast(out.shape()),
            None => Ok(m.clone()),
        };
        let run = |i: &CudaTensor| crate::take_along_dim(input, i, dim);
        self.read(op, fill, index, ds, &run, &spread)
    }

    /// [`index_select()`](crate::index_select()) under a bounds policy (Error, Wrap, Clip or
    /// Fill: a filled index reads a whole slice of the fill value).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let table = CudaTensor::from_host(&gpu, &array![[1, 2], [3, 4]])?;
    /// let ids = CudaTensor::from_host(&gpu, &array![1i64, -1])?;
    /// let out = Options::new().bounds(OutOfBounds::Fill(0.into())).index_select(&table, 0, &ids)?;
    /// assert_eq!(out.to_host::<i32>()?, array![[3, 4], [0, 0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_select(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
    ) -> Result<CudaTensor> {
        let op = "index_select";
        self.no_broadcast(op)?;
        if self.bounds == OutOfBounds::Error {
            return crate::index_select(input, dim, index);
        }
        let fill = self.read_policy(op, input.dtype())?;
        let (d, n) = dim_size(op, input, dim)?;
        // Index element j gives the output's slice j along d.
        let spread = |m: &CudaTensor, out: &CudaTensor| match out.ndim() {
            0 => Ok(as_1d(m)),
            _ => Ok(as_1d(m).spread(out.shape(), d)),
        };
        let run = |i: &CudaTensor| crate::index_select(input, dim, i);
        self.read(op, fill, index, (d, n), &run, &spread)
    }

    /// [`take()`](crate::take()) under a bounds policy (Error: PyTorch's `-n..n`; Wrap, Clip or
    /// Fill), on the flattened input.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![10, 20, 30])?;
    /// let i = CudaTensor::from_host(&gpu, &array![-1i64, 7])?;
    /// let out = Options::new().bounds(OutOfBounds::Fill(0.into())).take(&x, &i)?;
    /// assert_eq!(out.to_host::<i32>()?, array![0, 0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn take(&self, input: &CudaTensor, index: &CudaTensor) -> Result<CudaTensor> {
        let op = "take";
        self.no_broadcast(op)?;
        if self.bounds == OutOfBounds::Error {
            return crate::take(input, index);
        }
        let fill = self.read_policy(op, input.dtype())?;
        let run = |i: &CudaTensor| crate::take(input, i);
        let same = |m: &CudaTensor, _: &CudaTensor| Ok(m.clone());
        self.read(op, fill, index, (0, input.len()), &run, &same)
    }

    /// [`select_batched()`](crate::select_batched()) under a bounds policy (Error, Wrap, Clip
    /// or Fill: a filled index reads a whole slice of the fill value).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![[[1, 1], [2, 2]], [[3, 3], [4, 4]]])?; // [B, N, D]
    /// let i = CudaTensor::from_host(&gpu, &array![[1i64, -1], [0, 0]])?;                 // -1: padding
    /// let out = Options::new().bounds(OutOfBounds::Fill(0.into())).select_batched(&x, 1, &i, 1)?;
    /// assert_eq!(out.to_host::<i32>()?, array![[[2, 2], [0, 0]], [[3, 3], [3, 3]]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn select_batched(
        &self,
        input: &CudaTensor,
        axis: isize,
        index: &CudaTensor,
        batch_dims: usize,
    ) -> Result<CudaTensor> {
        let op = "select_batched";
        self.no_broadcast(op)?;
        if self.bounds == OutOfBounds::Error {
            return crate::select_batched(input, axis, index, batch_dims);
        }
        let fill = self.read_policy(op, input.dtype())?;
        let (a, _, _) =
            backend::check_select_batched(op, input.shape(), axis, index.shape(), batch_dims)?;
        // Index [b.., k..] gives the output's slice with those coordinates on axes 0..b and
        // a..a + k.
        let spread = |m: &CudaTensor, out: &CudaTensor| {
            let mut v = m.clone();
            v.shape = out.shape().to_vec();
            v.strides = vec![0; out.ndim()];
            v.strides[..batch_dims].copy_from_slice(&m.strides()[..batch_dims]);
            let own = &m.strides()[batch_dims..];
            v.strides[a..a + own.len()].copy_from_slice(own);
            Ok(v)
        };
        let run = |i: &CudaTensor| crate::select_batched(input, axis, i, batch_dims);
        self.read(op, fill, index, (a, input.shape()[a]), &run, &spread)
    }
}

// ---------------------------------------------------------------------------------------------
// Writes: each returns a new tensor; a failed call leaves its inputs as they were.

impl Options {
    /// [`scatter()`](crate::scatter()) under these options (bounds: Error, Wrap, Clip or Drop;
    /// broadcasting: the index is self's size or 1 on every axis but `dim`, src the extent's size
    /// or 1 on every axis, as [`gather::ops::broadcast`]). `src` is a tensor or one value.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![0, 0, 0])?;
    /// let i = CudaTensor::from_host(&gpu, &array![-1i64, 1, 5])?;
    /// let s = CudaTensor::from_host(&gpu, &array![1, 2, 4])?;
    /// let out = Options::new().bounds(OutOfBounds::Drop).scatter(&x, 0, &i, &s)?;
    /// assert_eq!(out.to_host::<i32>()?, array![0, 2, 0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter<'a>(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src: impl Into<Src<'a>>,
    ) -> Result<CudaTensor> {
        self.scatter_family("scatter", input, dim, index, src.into(), R_SET, true)
    }

    /// [`scatter_add()`](crate::scatter_add()) under these options (bounds: Error, Wrap, Clip or
    /// Drop; broadcasting as [`Options::scatter`]).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// // Whole rows by [N, 1] row ids, without expanding the index (the GNN edge → node sum).
    /// let msgs = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
    /// let dst = CudaTensor::from_host(&gpu, &array![[2i64], [0], [2]])?;
    /// let zeros = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((3, 2)))?;
    /// let nodes = Options::new().broadcast(true).scatter_add(&zeros, 0, &dst, &msgs)?;
    /// assert_eq!(nodes.to_host::<f32>()?, array![[3.0f32, 4.0], [0.0, 0.0], [6.0, 8.0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter_add(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src: &CudaTensor,
    ) -> Result<CudaTensor> {
        self.scatter_family(
            "scatter_add",
            input,
            dim,
            index,
            Src::Tensor(src),
            R_SUM,
            true,
        )
    }

    /// [`scatter_reduce()`](crate::scatter_reduce()) under these options (bounds: Error, Wrap,
    /// Clip or Drop; broadcasting as [`Options::scatter`]). Under Drop every reduction, `mean`
    /// and `include_self` included, sees exactly the kept writes.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![1.0f32, 1.0])?;
    /// let i = CudaTensor::from_host(&gpu, &array![0i64, 5, 0])?;
    /// let s = CudaTensor::from_host(&gpu, &array![4.0f32, 9.0, 7.0])?;
    /// let drop = Options::new().bounds(OutOfBounds::Drop);
    /// let out = drop.scatter_reduce(&x, 0, &i, &s, Reduce::Mean, true)?;
    /// assert_eq!(out.to_host::<f32>()?, array![4.0f32, 1.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter_reduce<'a>(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src: impl Into<Src<'a>>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<CudaTensor> {
        let r = code(reduce);
        self.scatter_family(
            "scatter_reduce",
            input,
            dim,
            index,
            src.into(),
            r,
            include_self,
        )
    }

    /// The scatter ops under these options, `op` naming the call in errors (PyTorch's legacy
    /// `scatter(..., reduce="add")` is `scatter_reduce` named `scatter`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scatter_family(
        &self,
        op: &'static str,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src: Src<'_>,
        reduce: i32,
        include_self: bool,
    ) -> Result<CudaTensor> {
        let op = match (self.broadcast, op) {
            (false, _) => op,
            (true, "scatter") => "scatter_broadcast",
            (true, "scatter_add") => "scatter_add_broadcast",
            _ => "scatter_reduce_broadcast",
        };
        let (broadcast, atomic) = (self.broadcast, !self.deterministic);
        self.write(op, input, Some(dim), index, &|x, i| match broadcast {
            true => scatter_broadcast(op, x, dim, i, src, reduce, include_self, atomic),
            false => scatter_op(op, x, dim, i, src, reduce, include_self, atomic),
        })
    }

    /// [`index_add()`](crate::index_add()) under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Scalar};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![[0, 0], [0, 0]])?;
    /// let i = CudaTensor::from_host(&gpu, &array![1i64, -1])?;
    /// let s = CudaTensor::from_host(&gpu, &array![[1, 1], [2, 2]])?;
    /// let out = Options::new().bounds(OutOfBounds::Wrap).index_add(&x, 0, &i, &s, Scalar::Int(1))?;
    /// assert_eq!(out.to_host::<i32>()?, array![[0, 0], [3, 3]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_add(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source: &CudaTensor,
        alpha: Scalar,
    ) -> Result<CudaTensor> {
        self.no_broadcast("index_add")?;
        self.write("index_add", input, Some(dim), index, &|x, i| {
            crate::index_add(x, dim, i, source, alpha)
        })
    }

    /// [`index_copy()`](crate::index_copy()) under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![0, 0, 0])?;
    /// let i = CudaTensor::from_host(&gpu, &array![2i64, 9])?;
    /// let s = CudaTensor::from_host(&gpu, &array![5, 6])?;
    /// let out = Options::new().bounds(OutOfBounds::Drop).index_copy(&x, 0, &i, &s)?;
    /// assert_eq!(out.to_host::<i32>()?, array![0, 0, 5].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_copy(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source: &CudaTensor,
    ) -> Result<CudaTensor> {
        self.no_broadcast("index_copy")?;
        self.write("index_copy", input, Some(dim), index, &|x, i| {
            crate::index_copy(x, dim, i, source)
        })
    }

    /// [`index_fill()`](crate::index_fill()) under a bounds policy (Error: PyTorch's `-n..n`;
    /// Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Scalar};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![0, 0, 0])?;
    /// let i = CudaTensor::from_host(&gpu, &array![-7i64, 1])?;
    /// let out = Options::new().bounds(OutOfBounds::Clip).index_fill(&x, 0, &i, Scalar::Int(1))?;
    /// assert_eq!(out.to_host::<i32>()?, array![1, 1, 0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_fill(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        value: Scalar,
    ) -> Result<CudaTensor> {
        self.no_broadcast("index_fill")?;
        self.write("index_fill", input, Some(dim), index, &|x, i| {
            crate::index_fill(x, dim, i, value)
        })
    }

    /// [`index_reduce()`](crate::index_reduce()) under a bounds policy (Error, Wrap, Clip or
    /// Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![1.0f32, 1.0])?;
    /// let i = CudaTensor::from_host(&gpu, &array![0i64, 4])?;
    /// let s = CudaTensor::from_host(&gpu, &array![3.0f32, 9.0])?;
    /// let out = Options::new().bounds(OutOfBounds::Drop).index_reduce(&x, 0, &i, &s, Reduce::Amax, true)?;
    /// assert_eq!(out.to_host::<f32>()?, array![3.0f32, 1.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_reduce(
        &self,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source: &CudaTensor,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<CudaTensor> {
        self.no_broadcast("index_reduce")?;
        self.write("index_reduce", input, Some(dim), index, &|x, i| {
            crate::index_reduce(x, dim, i, source, reduce, include_self)
        })
    }

    /// [`put()`](crate::put()) under a bounds policy (Error: PyTorch's `-n..n`; Wrap, Clip or
    /// Drop), on the flattened input.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &array![[0, 0], [0, 0]])?;
    /// let i = CudaTensor::from_host(&gpu, &array![3i64, 4, 3])?;
    /// let s = CudaTensor::from_host(&gpu, &array![1, 2, 4])?;
    /// let out = Options::new().bounds(OutOfBounds::Drop).put(&x, &i, &s, true)?;
    /// assert_eq!(out.to_host::<i32>()?, array![[0, 0], [0, 5]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn put(
        &self,
        input: &CudaTensor,
        index: &CudaTensor,
        source: &CudaTensor,
        accumulate: bool,
    ) -> Result<CudaTensor> {
        self.no_broadcast("put")?;
        self.write("put", input, None, index, &|x, i| {
            crate::put(x, i, source, accumulate)
        })
    }
}

/// Zeroes the elements of the row-major `t` from element `start` on (the scratch slice of a Drop
/// copy: the dropped writes land there, and every element of a new tensor is written before it
/// is read).
fn zero_from(t: &CudaTensor, start: usize) -> Result<()> {
    let w = width(t.dtype());
    t.device()
        .memset(t.ptr() + (start * w) as u64, 0, (t.len() - start) * w)
}

/// The dim an axis-wise op indexes and its size (a 0-d input counts as 1-d).
fn dim_size(op: &str, input: &CudaTensor, dim: isize) -> Result<(usize, usize)> {
    let x = as_1d(input);
    let d = gather::dims::normalize_dim(op, dim, x.ndim())?;
    Ok((d, x.shape()[d]))
}

/// Maps `index` (an `index_operand`: i64 or i32) for a dimension `dim` of `size` under `policy`
/// (not `Error`); values Fill and Drop find out of range become `placeholder`.
pub(crate) fn resolve(
    op: &str,
    index: &CudaTensor,
    dim: usize,
    size: usize,
    policy: &OutOfBounds<Scalar>,
    placeholder: i64,
) -> Result<Mapped> {
    // Each stored value once: a repeated (stride-0) axis is mapped at its one position.
    let mut compact = index.clone();
    for a in 0..compact.ndim() {
        if compact.strides[a] == 0 && compact.shape[a] > 1 {
            compact.shape[a] = 1;
        }
    }
    let n = compact.len();
    if size == 0 && n > 0 && *policy != OutOfBounds::Drop {
        let coord = vec![0; compact.ndim()];
        let value = read_index(&compact, &coord)?;
        return Err(backend::bounds_empty_dim(op, value, coord, dim).into());
    }
    let code = match policy {
        OutOfBounds::Clip => P_CLIP,
        OutOfBounds::Fill(_) | OutOfBounds::Drop => P_MISSING,
        _ => P_WRAP,
    };
    let dev = index.device();
    let mapped = CudaTensor::empty(dev, compact.shape(), DType::I64)?;
    let missing = match code {
        P_MISSING => Some(CudaTensor::empty(dev, compact.shape(), DType::Bool)?),
        _ => None,
    };
    let flagged = if n == 0 {
        None
    } else {
        let name = intern(format!("bounds_map_{}", index_suffix(index.dtype())));
        let f = dev.function(Source::Bounds, name)?;
        let (op_, mp) = (mapped.ptr(), missing.as_ref().map_or(0, |m| m.ptr()));
        let (ip, il) = (compact.ptr(), compact.layout()?);
        let (size64, n64) = (size as i64, n as i64);
        dev.with_flag(|flag| {
            launch!(
                dev,
                &f,
                name,
                dev.grid(n, 256),
                &op_,
                &mp,
                &ip,
                &il,
                &size64,
                &code,
                &placeholder,
                &n64,
                &flag
            )
        })?
    };
    if let (Some(pos), P_WRAP) = (flagged, code) {
        let coord = unravel(pos, compact.shape());
        let value = read_index(&compact, &coord)?;
        return Err(backend::out_of_bounds(op, value, coord, dim, size, Bounds::Wrap).into());
    }
    let back = |t: CudaTensor| t.broadcast(index.shape());
    Ok(Mapped {
        index: back(mapped)?,
        missing: match flagged {
            Some(_) => missing.map(back).transpose()?,
            None => None,
        },
    })
}

/// `out[p] = value` (its bits in out's dtype) where `missing[p]`, for every row-major position
/// `p` (the two views have the same number of elements).
pub(crate) fn fill_where(out: &CudaTensor, missing: &CudaTensor, bits: u64) -> Result<()> {
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    let dev = out.device();
    let name = width_name("fill_where", out.dtype());
    let f = dev.function(Source::Bounds, name)?;
    let (op_, ol, mp, ml, n64) = (
        out.ptr(),
        out.layout()?,
        missing.ptr(),
        missing.layout()?,
        n as i64,
    );
    let cfg = dev.grid(n, 256);
    macro_rules! go {
        ($t:ty) => {{
            let v = bits as $t;
            launch!(dev, &f, name, cfg, &op_, &ol, &mp, &ml, &v, &n64)
        }};
    }
    match width(out.dtype()) {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => go!(u64),
    }
}

/// One element of `bits` (a value's bytes in `dtype`) seen over `shape` with stride 0: a
/// constant operand, never copied.
pub(crate) fn splat(
    dev: &crate::Cuda,
    bits: u64,
    dtype: DType,
    shape: &[usize],
) -> Result<CudaTensor> {
    full(dev, &[], dtype, bits)?.broadcast(shape)
}

/// A new row-major tensor of `shape` with every element `bits` (the value's bytes in `dtype`).
pub(crate) fn full(
    dev: &crate::Cuda,
    shape: &[usize],
    dtype: DType,
    bits: u64,
) -> Result<CudaTensor> {
    let out = CudaTensor::empty(dev, shape, dtype)?;
    if out.is_empty() {
        return Ok(out);
    }
    // fill_where with one true mark seen everywhere (stride 0).
    let mut all = CudaTensor::empty(dev, &[1], DType::Bool)?;
    dev.memset(all.ptr(), 1, 1)?;
    all.shape = shape.to_vec();
    all.strides = vec![0; shape.len()];
    fill_where(&out, &all, bits)?;
    Ok(out)
}

/// `torch.gather(input.expand(..), dim, index.expand(..))` on broadcast views (stride 0, never
/// copied), under the CPU library's broadcasting rule.
fn gather_broadcast(input: &CudaTensor, dim: isize, index: &CudaTensor) -> Result<CudaTensor> {
    let op = "gather_broadcast";
    let d = gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    let (x, idx) = (as_1d(input), as_1d(&index));
    let (out_shape, x_shape) = backend::broadcast_gather_shapes(op, x.shape(), idx.shape(), d)?;
    if out_shape.contains(&0) {
        return CudaTensor::empty(input.device(), &out_shape, input.dtype());
    }
    let out = gather_op(
        op,
        &x.broadcast(&x_shape)?,
        d as isize,
        &idx.broadcast(&out_shape)?,
    )?;
    Ok(match index.ndim() {
        // A 0-d index (with a 1-d or 0-d input) gives a 0-d output, as in gather.
        0 => reshape_like(out, &index),
        _ => out,
    })
}

/// A scatter with the index and src broadcast to the extent (self's shape with the index's
/// size along `dim`) as stride-0 views.
#[allow(clippy::too_many_arguments)]
fn scatter_broadcast(
    op: &str,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: Src<'_>,
    reduce: i32,
    include_self: bool,
    atomic: bool,
) -> Result<CudaTensor> {
    let d = gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    let s = match src {
        Src::Tensor(t) => {
            same_dtype(op, "src", input, t)?;
            Some(as_1d(t))
        }
        Src::Value(_) => None,
    };
    let (x, idx) = (as_1d(input), as_1d(&index));
    let e = backend::broadcast_scatter_extent(
        op,
        x.shape(),
        idx.shape(),
        s.as_ref().map(|t| t.shape()),
        d,
    )?;
    if e.contains(&0) {
        return copy_of(input);
    }
    let sb = s.map(|t| t.broadcast(&e)).transpose()?;
    let src = match &sb {
        Some(t) => Src::Tensor(t),
        None => src,
    };
    let out = scatter_op(
        op,
        &x,
        d as isize,
        &idx.broadcast(&e)?,
        src,
        reduce,
        include_self,
        atomic,
    )?;
    Ok(reshape_like(out, input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_kernel_the_options_launch_is_compiled() {
        let Some(entries) = compiled_entries(Source::Bounds) else {
            return;
        };
        for name in ["bounds_map_i64", "bounds_map_i32"] {
            assert_eq!(entries.get(name), Some(&9), "{name}");
        }
        for d in [DType::Bool, DType::F16, DType::F32, DType::I64] {
            let name = width_name("fill_where", d);
            assert_eq!(entries.get(name), Some(&6), "{name}");
        }
    }
}
