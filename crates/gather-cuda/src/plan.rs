//! [`ScatterPlan`] on the GPU: a row index checked and sorted by destination row once, then
//! applied to many `scatter_add` / `scatter_reduce` calls along dim 0, as the CPU library's
//! plan is.
//!
//! A graph network scatters the same edges in every layer and every step. The deterministic
//! scatter's sort of the index is most of a call when the rows are short; a plan sorts once,
//! and each later call is only the fold, in index order per destination element: bitwise the
//! same result as the op.
//!
//! ```text
//! ScatterPlan::new(&ids, 4)     ids = [2, 0, 2, 1, 0, 2]     (checked: every id in 0..4)
//!   sorted once:  row 0 ← src rows [1, 4]
//!                 row 1 ← src rows [3]
//!                 row 2 ← src rows [0, 2, 5]
//!                 row 3 ← (none: keeps dst's row)
//! plan.scatter_add(&dst[4, F], &src[6, F])   out[ids[e], f] = dst[ids[e], f] + src[e, f] + ...
//!                                            (in order of e within each row)
//! ```

use std::sync::Arc;

use gather::backend::{self, Bounds};
use gather::{ErrorKind, Reduce};

use crate::device::Cuda;
use crate::error::{Error, Result};
use crate::gather::{copy_into, require_int_index};
use crate::memory::Buffer;
use crate::scatter::{Fold, Geometry, RowMap, Runs, code, same_dtype, sort_rows, strict_error};
use crate::sort::u32_bytes;
use crate::tensor::CudaTensor;

/// A 1-d row index on the GPU, checked against a dimension size and sorted by destination row,
/// ready to be applied to many `scatter_add` / `scatter_reduce` calls along dim 0.
///
/// `plan.scatter_add(&dst, &src)` is `scatter_add(&dst, 0, &ids expanded to src's shape,
/// &src)` (and `index_add(&dst, 0, &ids, &src)`), bitwise, without the per-call check and
/// sort. The plan keeps the sorted rows on the GPU (4 bytes per position and per row of the
/// dimension); clones share them.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, ScatterPlan};
/// use ndarray::{array, Array2};
/// let gpu = Cuda::new(0)?;
/// let ids = CudaTensor::from_host(&gpu, &array![2i64, 0, 2])?;
/// let plan = ScatterPlan::new(&ids, 3)?;
/// let dst = CudaTensor::from_host(&gpu, &Array2::<f32>::zeros((3, 2)))?;
/// let src = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
/// let out = plan.scatter_add(&dst, &src)?;
/// assert_eq!(out.to_host::<f32>()?, array![[3.0f32, 4.0], [0.0, 0.0], [6.0, 8.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Clone)]
pub struct ScatterPlan {
    /// The sorted rows, their keys (none where every row of the dimension is a run), the run
    /// starts and the run count; `None` for an empty index.
    sorted: Option<(Arc<Buffer>, Runs)>,
    dev: Cuda,
    len: usize,
    size: usize,
}

impl std::fmt::Debug for ScatterPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScatterPlan({} positions into {} rows, {:?})",
            self.len, self.size, self.dev
        )
    }
}

impl ScatterPlan {
    /// Checks every value of the 1-d integer `index` against a dimension of `size` rows
    /// (`0 <= id < size`, as PyTorch's `scatter_add`) and sorts the positions by row, stably.
    ///
    /// # Errors
    /// `IndexOutOfBounds` for a value outside `0..size`, with its position (the first one);
    /// `RankMismatch` for an index that is not 1-d; `InvalidArgument` for a float index, or
    /// more than `u32::MAX` positions or rows.
    ///
    /// ```no_run
    /// use gather::ErrorKind;
    /// use gather_cuda::{Cuda, CudaTensor, ScatterPlan};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let plan = ScatterPlan::new(&CudaTensor::from_host(&gpu, &array![1u32, 1, 0])?, 2)?;
    /// assert_eq!((plan.len(), plan.size()), (3, 2));
    /// let bad = CudaTensor::from_host(&gpu, &array![0i64, 5])?;
    /// let err = ScatterPlan::new(&bad, 4).unwrap_err();
    /// assert_eq!(err.op().unwrap().kind(), ErrorKind::IndexOutOfBounds);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn new(index: &CudaTensor, size: usize) -> Result<ScatterPlan> {
        let op = "ScatterPlan::new";
        require_int_index(op, index)?;
        backend::check_scatter_plan_index(op, index.shape(), size)?;
        let len = index.len();
        if size > u32::MAX as usize {
            return Err(crate::tensor::invalid(format!(
                "{op}: the CUDA scatter sorts 32-bit keys; a dimension of {size} rows is past them"
            )));
        }
        let dev = index.device().clone();
        let bad = |pos: u64| strict_error(op, index, false, 0, size, pos);
        if len == 0 {
            return Ok(ScatterPlan {
                sorted: None,
                dev,
                len,
                size,
            });
        }
        if size == 0 {
            // Every value is out of range; the first is the error.
            return Err(bad(0)?);
        }
        let m = RowMap::plain(len, index.strides()[0]);
        // Every run sorted, keys written: the plan serves the row kernel and the general fold.
        let sorted = sort_rows(index, &m, 0, size, Bounds::Strict, (len, size), false, &bad)?;
        let r = sorted.runs;
        // Kept: the rows, the keys unless run k is row k, the starts (a run per row of the
        // dimension, or at most one per position) and the count; the sort's scratch goes back.
        let n_starts = if r.every_key { size + 1 } else { len + 1 };
        let keys_bytes = if r.every_key { 0 } else { u32_bytes(len) };
        let (rows_at, keys_at) = (0, u32_bytes(len));
        let starts_at = keys_at + keys_bytes;
        let count_at = starts_at + u32_bytes(n_starts);
        let buf = dev.alloc(count_at + u32_bytes(1))?;
        let base = buf.base;
        dev.copy_bytes(base + rows_at as u64, r.rows, 4 * len)?;
        if !r.every_key {
            dev.copy_bytes(base + keys_at as u64, r.keys, 4 * len)?;
        }
        dev.copy_bytes(base + starts_at as u64, r.starts, 4 * n_starts)?;
        dev.copy_bytes(base + count_at as u64, r.count, 4)?;
        let runs = Runs {
            keys: if r.every_key {
                0
            } else {
                base + keys_at as u64
            },
            rows: base + rows_at as u64,
            starts: base + starts_at as u64,
            count: base + count_at as u64,
            every_key: r.every_key,
        };
        Ok(ScatterPlan {
            sorted: Some((Arc::new(buf), runs)),
            dev,
            len,
            size,
        })
    }

    /// The GPU the plan lives on, where `dst` and `src` must be.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::array![0i64, 1])?;
    /// assert_eq!(gather_cuda::ScatterPlan::new(&ids, 2)?.device().ordinal(), 0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn device(&self) -> &Cuda {
        &self.dev
    }

    /// The number of index positions (rows of `src` the plan reads).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 1])?;
    /// assert_eq!(gather_cuda::ScatterPlan::new(&ids, 5)?.len(), 3);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index had no positions (applying the plan then changes nothing).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array1::<i64>::zeros(0))?;
    /// assert!(gather_cuda::ScatterPlan::new(&ids, 5)?.is_empty());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the dimension the index was validated for: the number of rows a destination
    /// must have.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 1])?;
    /// assert_eq!(gather_cuda::ScatterPlan::new(&ids, 5)?.size(), 5);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// `dst` with `dst[ids[e], ..] += src[e, ..]` for every position `e`, as a new tensor,
    /// adding in index order per row (integers wrap, bool is logical or, `f16`/`bf16`
    /// accumulate in `f32`): bitwise `scatter_add(dst, 0, ids expanded to src's shape, src)`.
    ///
    /// # Errors
    /// See [`ScatterPlan::scatter_reduce`].
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, ScatterPlan};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let plan = ScatterPlan::new(&CudaTensor::from_host(&gpu, &array![1i64, 1])?, 2)?;
    /// let dst = CudaTensor::from_host(&gpu, &array![[1, 1], [1, 1]])?;
    /// let src = CudaTensor::from_host(&gpu, &array![[1, 2], [10, 20]])?;
    /// let out = plan.scatter_add(&dst, &src)?;
    /// assert_eq!(out.to_host::<i32>()?, array![[1, 1], [12, 23]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter_add(&self, dst: &CudaTensor, src: &CudaTensor) -> Result<CudaTensor> {
        self.apply("ScatterPlan::scatter_add", dst, src, Reduce::Sum, true)
    }

    /// `scatter_reduce(dst, 0, ids expanded to src's shape, src, reduce, include_self)` with
    /// the plan's index, as a new tensor: every reduction of [`Reduce`], both `include_self`,
    /// with the op's exact semantics and bits (and its dtype rules: `mean` of bool is an error).
    ///
    /// # Errors
    /// Checked before anything runs, with the CPU library's words:
    /// - `RankMismatch`: `dst` is 0-d, or `src` has another number of dims;
    /// - `ShapeMismatch`: `dst` has another number of rows than the plan's size, `src` another
    ///   number of rows than the plan's positions, or `src` is larger than `dst` on another dim;
    /// - `InvalidArgument`: `src` has another dtype than `dst`, `mean` of bool, or `dst` and `src`
    ///   on another GPU than the plan.
    ///
    /// ```no_run
    /// use gather::ErrorKind;
    /// use gather_cuda::{Cuda, CudaTensor, Reduce, ScatterPlan};
    /// use ndarray::array;
    /// let gpu = Cuda::new(0)?;
    /// let plan = ScatterPlan::new(&CudaTensor::from_host(&gpu, &array![1i64, 1, 0])?, 2)?;
    /// let dst = CudaTensor::from_host(&gpu, &array![[0.0f32, 9.0], [5.0, 5.0]])?;
    /// let src = CudaTensor::from_host(&gpu, &array![[1.0f32, 7.0], [3.0, 2.0], [4.0, 4.0]])?;
    /// let out = plan.scatter_reduce(&dst, &src, Reduce::Amax, false)?;
    /// assert_eq!(out.to_host::<f32>()?, array![[4.0f32, 4.0], [3.0, 7.0]].into_dyn());
    /// // A destination with another number of rows than the plan was built for:
    /// let other = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((3, 2)))?;
    /// let err = plan.scatter_reduce(&other, &src, Reduce::Sum, true).unwrap_err();
    /// assert_eq!(err.op().unwrap().kind(), ErrorKind::ShapeMismatch);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter_reduce(
        &self,
        dst: &CudaTensor,
        src: &CudaTensor,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<CudaTensor> {
        self.apply(
            "ScatterPlan::scatter_reduce",
            dst,
            src,
            reduce,
            include_self,
        )
    }

    fn apply(
        &self,
        op: &str,
        dst: &CudaTensor,
        src: &CudaTensor,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<CudaTensor> {
        for (what, t) in [("dst", dst), ("src", src)] {
            if !Arc::ptr_eq(&t.device().inner, &self.dev.inner) {
                let on = t.device().ordinal();
                return Err(Error::Op(
                    gather::Error::new(
                        ErrorKind::InvalidArgument,
                        format!(
                            "{op}: the plan is on GPU {}, {what} on GPU {on}",
                            self.dev.ordinal()
                        ),
                    )
                    .with_hint("build the plan from an index on the GPU that holds dst and src"),
                ));
            }
        }
        same_dtype(op, "src", dst, src)?;
        backend::check_scatter_plan_apply(
            op,
            self.len,
            self.size,
            dst.shape(),
            src.shape(),
            dst.dtype(),
            reduce,
        )?;
        let out = CudaTensor::empty(&self.dev, dst.shape(), dst.dtype())?;
        let Some((_, runs)) = self.sorted.as_ref().filter(|_| !src.is_empty()) else {
            copy_into(dst, &out)?;
            return Ok(out);
        };
        // Every axis after dim 0 is a lane: the index repeats along it.
        let lane = |a: usize| a != 0;
        let g = Geometry::new(op, dst, 0, src.shape(), &lane, Some(src), true)?;
        g.fold(
            dst,
            out,
            *runs,
            Fold::Apply,
            (code(reduce), include_self),
            0,
            None,
        )
    }
}
