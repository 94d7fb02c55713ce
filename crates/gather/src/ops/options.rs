//! [`Options`]: what PyTorch has no word for, chosen per call. One value, two choices:
//!
//! - `bounds`: what an index value outside its dimension does ([`OutOfBounds`]; the default,
//!   `Error`, is PyTorch's rule). See [`crate::ops::bounds`] for the policy table.
//! - `broadcast`: the index and `src` of `gather`/`scatter`/`scatter_add`/`scatter_reduce`
//!   broadcast against the input, NumPy-style (default off, PyTorch's shape rules). See
//!   [`crate::ops::broadcast`] for the rules.
//!
//! The ops are methods of the value, with PyTorch's names, argument order and return types; the
//! default `Options` gives exactly the op of the crate root.
//!
//! ```text
//! Options::new().bounds(Fill(0)).gather(input=[10, 20, 30], dim=0, index=[-1, 1, 5])
//!                                                          fill  → 20  fill  = [0, 20, 0]
//!
//! Options::new().broadcast(true).scatter_add(self [3, 2], dim=0, index [4, 1], src [4, 2])
//!     index [4, 1] repeats along axis 1: whole rows of src add into the rows index names
//! ```

use ndarray::{Array, ArrayBase, ArrayD, ArrayView, ArrayViewMut, Data, DataMut, Dimension, IxDyn};

use super::bounds::{self, Layout, OutOfBounds, dim_size, fill_missing, reads_only, resolve};
use super::broadcast;
use super::scatter::{Mode, Reduce, ScatterSrc, scatter_view_inplace};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::index::IndexElem;

/// The choices PyTorch has no word for: a bounds policy and broadcasting, for one call.
///
/// `Options::default()` (or [`Options::new`]) is PyTorch's behaviour; each method is the op of
/// the same name at the crate root under these options.
///
/// ```
/// use gather::{Options, OutOfBounds};
/// use ndarray::array;
///
/// // -1 marks padding: Fill reads 0.0 there; Wrap counts from the end.
/// let emb = array![[0.5f32, 1.0], [2.0, 4.0]];
/// let idx = array![[1, -1], [0, 1]];
/// let fill = Options::new().bounds(OutOfBounds::Fill(0.0));
/// assert_eq!(fill.gather(&emb, 1, &idx)?, array![[1.0, 0.0], [2.0, 4.0]]);
/// assert_eq!(Options::new().bounds(OutOfBounds::Wrap).gather(&emb, 1, &idx)?, array![[1.0, 1.0], [2.0, 4.0]]);
/// assert!(Options::default().gather(&emb, 1, &idx).is_err()); // PyTorch's rule
///
/// // Whole rows by [N, 1] row ids, without expanding the index (the GNN edge → node sum).
/// let msgs = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let dst = array![[2i64], [0], [2]];
/// let nodes = Options::new().broadcast(true).scatter_add(&ndarray::Array2::zeros((3, 2)), 0, &dst, &msgs)?;
/// assert_eq!(nodes, array![[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]]);
///
/// // Both at once: out-of-range edges are dropped.
/// let both = Options::new().broadcast(true).bounds(OutOfBounds::Drop);
/// let nodes = both.scatter_add(&ndarray::Array2::zeros((3, 2)), 0, &array![[2i64], [7], [2]], &msgs)?;
/// assert_eq!(nodes, array![[0.0, 0.0], [0.0, 0.0], [6.0, 8.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Options<T> {
    /// What an index value outside its dimension does.
    pub bounds: OutOfBounds<T>,
    /// Whether the index and `src` broadcast against the input (gather and the scatter ops).
    pub broadcast: bool,
}

impl<T> Options<T> {
    /// PyTorch's behaviour: `OutOfBounds::Error`, no broadcasting.
    ///
    /// ```
    /// assert_eq!(gather::Options::<f32>::new(), gather::Options::default());
    /// ```
    pub fn new() -> Self {
        Options {
            bounds: OutOfBounds::Error,
            broadcast: false,
        }
    }

    /// The same options with bounds policy `policy`.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Clip).take(&array![10, 20, 30], &array![-4, 1, 9])?;
    /// assert_eq!(out, array![10, 20, 30]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn bounds(self, policy: OutOfBounds<T>) -> Self {
        Options {
            bounds: policy,
            ..self
        }
    }

    /// The same options with broadcasting on or off.
    ///
    /// ```
    /// use gather::Options;
    /// use ndarray::array;
    /// // One column per row, picked by a [2, 1] index.
    /// let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// assert_eq!(Options::new().broadcast(true).gather(&x, 1, &array![[2i64], [0]])?, array![[3.0], [4.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn broadcast(self, on: bool) -> Self {
        Options {
            broadcast: on,
            ..self
        }
    }

    /// An error for an op that has no broadcasting form.
    pub(crate) fn no_broadcast(&self, op: &str) -> Result<()> {
        if !self.broadcast {
            return Ok(());
        }
        Err(no_broadcast_form(op))
    }
}

impl<T: Element> Options<T> {
    /// Runs a write: `strict` on the index as it is under `Error`, else `mapped` on the index
    /// mapped under the policy (see [`bounds::write_bounded`]).
    fn write<S, D, I, SI, DI>(
        &self,
        op: &str,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        strict: impl FnOnce(&mut ArrayBase<S, D>, &ArrayBase<SI, DI>) -> Result<()>,
        mapped: impl FnOnce(&mut ArrayViewMut<'_, T, IxDyn>, &ArrayView<'_, i64, IxDyn>) -> Result<()>,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        if let OutOfBounds::Error = self.bounds {
            return strict(dst, index);
        }
        let (dst, index) = (dst.view_mut().into_dyn(), index.view().into_dyn());
        bounds::write_bounded(op, dst, Some(dim), index, &self.bounds, mapped)
    }
}

/// The error for `broadcast(true)` on an op that has no broadcasting form.
pub(crate) fn no_broadcast_form(op: &str) -> Error {
    Error::invalid(format!(
        "{op}: broadcasting is an option of gather, scatter, scatter_add and scatter_reduce, not of {op}"
    ))
    .with_hint(format!(
        "call {op} with `.broadcast(false)`; its index already selects whole slices where that makes sense"
    ))
}

/// A broadcast gather's output with the index's array type (a 0-d index reads one element).
fn with_rank<T, D: Dimension>(a: ArrayD<T>) -> Array<T, D> {
    if D::NDIM == Some(0) && a.len() == 1 {
        let a = a.into_shape_with_order(IxDyn(&[])).expect("one element");
        return bounds::into_dim(a);
    }
    bounds::into_dim(a)
}

// ---------------------------------------------------------------------------------------------
// Reads

impl<T: Element> Options<T> {
    /// [`gather()`](crate::gather()) under these options (bounds: Error, Wrap, Clip or Fill;
    /// broadcasting as [`crate::ops::broadcast`]).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let x = array![[10, 20, 30], [40, 50, 60]];
    /// // A [2, 1] index broadcast over the 3 columns' worth of rows, with -1 reading 0.
    /// let opts = Options::new().broadcast(true).bounds(OutOfBounds::Fill(0));
    /// assert_eq!(opts.gather(&x, 0, &array![[1], [-1]])?, array![[40, 50, 60], [0, 0, 0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn gather<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, DI>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        if !self.broadcast {
            return bounds::gather_bounded(input, dim, index, self.bounds);
        }
        let op = "gather_broadcast";
        if let OutOfBounds::Error = self.bounds {
            return broadcast::gather_broadcast(input, dim, index).map(with_rank);
        }
        reads_only(op, &self.bounds)?;
        let (d, n) = dim_size(op, input.shape(), dim)?;
        let r = resolve(op, &index.view().into_dyn(), d, n, &self.bounds, 0)?;
        let mut out = broadcast::gather_broadcast(input, dim, &r.index())?;
        if let (OutOfBounds::Fill(v), Some(m)) = (self.bounds, r.missing()) {
            fill_missing(&mut out.view_mut(), &m, Layout::Broadcast, v);
        }
        Ok(with_rank(out))
    }

    /// [`take_along_dim()`](crate::take_along_dim()) under a bounds policy (Error, Wrap, Clip or
    /// Fill). Under Error, PyTorch wraps values modulo the size when a dim is given and wants
    /// `0..n` without one.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let x = array![[10, 20, 30], [40, 50, 60]];
    /// let idx = array![[2], [7]];
    /// assert_eq!(Options::new().bounds(OutOfBounds::Clip).take_along_dim(&x, &idx, Some(1))?, array![[30], [60]].into_dyn());
    /// assert_eq!(Options::new().bounds(OutOfBounds::Fill(-1)).take_along_dim(&x, &idx, Some(1))?, array![[30], [-1]].into_dyn());
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn take_along_dim<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        index: &ArrayBase<SI, DI>,
        dim: Option<isize>,
    ) -> Result<ArrayD<T>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("take_along_dim")?;
        bounds::take_along_dim_bounded(input, index, dim, self.bounds)
    }

    /// [`index_select()`](crate::index_select()) under a bounds policy (Error, Wrap, Clip or
    /// Fill: a filled index reads a whole slice of the fill value).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let table = array![[1, 2], [3, 4]];
    /// let out = Options::new().bounds(OutOfBounds::Fill(0)).index_select(&table, 0, &array![1, -1])?;
    /// assert_eq!(out, array![[3, 4], [0, 0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_select<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("index_select")?;
        bounds::index_select_bounded(input, dim, index, self.bounds)
    }

    /// [`take()`](crate::take()) under a bounds policy (Error: PyTorch's `-n..n`; Wrap, Clip or
    /// Fill), on the flattened input.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let x = array![10, 20, 30];
    /// assert_eq!(Options::new().bounds(OutOfBounds::Fill(0)).take(&x, &array![-1, 7])?, array![0, 0]);
    /// assert_eq!(Options::new().bounds(OutOfBounds::Wrap).take(&x, &array![-1, 2])?, array![30, 30]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn take<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, DI>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("take")?;
        bounds::take_bounded(input, index, self.bounds)
    }

    /// [`select_batched()`](crate::select_batched()) under a bounds policy (Error, Wrap, Clip or
    /// Fill: a filled index reads a whole slice of the fill value).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let x = array![[[1, 1], [2, 2]], [[3, 3], [4, 4]]];      // [B=2, N=2, D=2]
    /// let idx = array![[1, -1], [0, 0]];                       // [B, K=2], -1 is padding
    /// let out = Options::new().bounds(OutOfBounds::Fill(0)).select_batched(&x, 1, &idx, 1)?;
    /// assert_eq!(out, array![[[2, 2], [0, 0]], [[3, 3], [3, 3]]].into_dyn());
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn select_batched<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        axis: isize,
        index: &ArrayBase<SI, DI>,
        batch_dims: usize,
    ) -> Result<ArrayD<T>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("select_batched")?;
        bounds::select_batched_bounded(input, axis, index, batch_dims, self.bounds)
    }
}

// ---------------------------------------------------------------------------------------------
// Writes: every in-place form checks everything before its first write, so a failed call
// changes nothing; the out-of-place form writes into a copy of `input`.

impl<T: Element> Options<T> {
    /// [`scatter_inplace()`](crate::scatter_inplace()) under these options (bounds: Error, Wrap,
    /// Clip or Drop; broadcasting as [`crate::ops::broadcast`]). `src` is an array or one value.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![0, 0, 0];
    /// Options::new().bounds(OutOfBounds::Clip).scatter_inplace(&mut x, 0, &array![-1, 1, 5], &array![1, 2, 4])?;
    /// assert_eq!(x, array![1, 2, 4]); // -1 -> 0, 5 -> 2
    /// Options::new().bounds(OutOfBounds::Drop).scatter_inplace(&mut x, 0, &array![9, 1], 7)?;
    /// assert_eq!(x, array![1, 7, 4]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_inplace<S, D, I, SI, DI>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        let (src, value) = src.as_src();
        if self.broadcast {
            let src = broadcast::value_src(src, value, dst.ndim());
            return self.write(
                "scatter_broadcast",
                dst,
                dim,
                index,
                |d, i| broadcast::scatter_broadcast_inplace(d, dim, i, &src),
                |d, i| broadcast::scatter_broadcast_inplace(d, dim, i, &src),
            );
        }
        self.write(
            "scatter",
            dst,
            dim,
            index,
            |d, i| scatter_view_inplace("scatter", d, dim, i, src.view(), value, Mode::Set),
            |d, i| scatter_view_inplace("scatter", d, dim, i, src.view(), value, Mode::Set),
        )
    }

    /// Out-of-place [`Options::scatter_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Drop).scatter(&array![0, 0, 0], 0, &array![-1, 1, 5], &array![1, 2, 4])?;
    /// assert_eq!(out, array![0, 2, 0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// With broadcasting:
    ///
    /// ```
    /// use ndarray::array;
    /// // One label per row, index [2, 1], marks a one-hot row: src [1, 1] is a single value.
    /// let onehot = gather::Options::new().broadcast(true).scatter(&ndarray::Array2::<f32>::zeros((2, 3)), 1, &array![[2i64], [0]], &array![[1.0f32]])?;
    /// assert_eq!(onehot, array![[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        if *self == Options::new() {
            return crate::scatter(input, dim, index, src);
        }
        let mut out = super::try_to_owned("scatter", input)?;
        self.scatter_inplace(&mut out, dim, index, src)?;
        Ok(out)
    }

    /// [`scatter_add_inplace()`](crate::scatter_add_inplace()) under these options (bounds:
    /// Error, Wrap, Clip or Drop; broadcasting as [`crate::ops::broadcast`]).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![0, 0, 0];
    /// Options::new().bounds(OutOfBounds::Wrap).scatter_add_inplace(&mut x, 0, &array![-1, 1, 2], &array![1, 2, 4])?;
    /// assert_eq!(x, array![0, 2, 5]); // -1 -> 2
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// Another example:
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let mut x = array![0, 0, 0];
    /// gather::Options::new().bounds(OutOfBounds::Wrap).scatter_add_inplace(&mut x, 0, &array![-1, 1, 2], &array![1, 2, 4])?;
    /// assert_eq!(x, array![0, 2, 5]); // -1 -> 2
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_add_inplace<S, D, I, SI, DI, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        if self.broadcast {
            return self.write(
                "scatter_add_broadcast",
                dst,
                dim,
                index,
                |d, i| broadcast::scatter_add_broadcast_inplace(d, dim, i, src),
                |d, i| broadcast::scatter_add_broadcast_inplace(d, dim, i, src),
            );
        }
        self.write(
            "scatter_add",
            dst,
            dim,
            index,
            |d, i| crate::scatter_add_inplace(d, dim, i, src),
            |d, i| crate::scatter_add_inplace(d, dim, i, src),
        )
    }

    /// Out-of-place [`Options::scatter_add_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Drop).scatter_add(&array![1.0, 1.0], 0, &array![0, 2, 0], &array![0.5, 9.0, 0.25])?;
    /// assert_eq!(out, array![1.75, 1.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// With broadcasting:
    ///
    /// ```
    /// use ndarray::array;
    /// // Counting: src [1] is one 1 per index position (a bincount along dim 0).
    /// let counts = gather::Options::new().broadcast(true).scatter_add(&array![0i64, 0, 0], 0, &array![2i64, 0, 2, 2], &array![1i64])?;
    /// assert_eq!(counts, array![1, 0, 3]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// Another example:
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// // Edges whose target is -1 (no target) are skipped.
    /// let out = gather::Options::new().bounds(OutOfBounds::Drop).scatter_add(&array![0.0, 0.0], 0, &array![1, -1, 1], &array![1.0, 2.0, 4.0])?;
    /// assert_eq!(out, array![0.0, 5.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_add<S, D, I, SI, DI, SS, DS>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        if *self == Options::new() {
            return crate::scatter_add(input, dim, index, src);
        }
        let mut out = super::try_to_owned("scatter_add", input)?;
        self.scatter_add_inplace(&mut out, dim, index, src)?;
        Ok(out)
    }

    /// [`scatter_reduce_inplace()`](crate::scatter_reduce_inplace()) under these options
    /// (bounds: Error, Wrap, Clip or Drop; broadcasting as [`crate::ops::broadcast`]). Under Drop
    /// every reduction, `mean` and `include_self` included, sees exactly the kept writes.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let mut x = array![1.0, 1.0];
    /// let drop = Options::new().bounds(OutOfBounds::Drop);
    /// drop.scatter_reduce_inplace(&mut x, 0, &array![0, 5, 0], &array![4.0, 9.0, 7.0], Reduce::Mean, true)?;
    /// assert_eq!(x, array![4.0, 1.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// Another example:
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use gather::Reduce;
    /// use ndarray::array;
    /// let mut x = array![1.0, 1.0];
    /// gather::Options::new().bounds(OutOfBounds::Drop).scatter_reduce_inplace(&mut x, 0, &array![0, 3, 0], &array![5.0, 7.0, 2.0], Reduce::Amax, false)?;
    /// assert_eq!(x, array![5.0, 1.0]); // 7.0 is dropped, so element 1 keeps its value
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_reduce_inplace<S, D, I, SI, DI>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        let (src, value) = src.as_src();
        if self.broadcast {
            let src = broadcast::value_src(src, value, dst.ndim());
            return self.write(
                "scatter_reduce_broadcast",
                dst,
                dim,
                index,
                |d, i| {
                    broadcast::scatter_reduce_broadcast_inplace(
                        d,
                        dim,
                        i,
                        &src,
                        reduce,
                        include_self,
                    )
                },
                |d, i| {
                    broadcast::scatter_reduce_broadcast_inplace(
                        d,
                        dim,
                        i,
                        &src,
                        reduce,
                        include_self,
                    )
                },
            );
        }
        let mode = Mode::Reduce(reduce, include_self);
        self.write(
            "scatter_reduce",
            dst,
            dim,
            index,
            |d, i| scatter_view_inplace("scatter_reduce", d, dim, i, src.view(), value, mode),
            |d, i| scatter_view_inplace("scatter_reduce", d, dim, i, src.view(), value, mode),
        )
    }

    /// Out-of-place [`Options::scatter_reduce_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let opts = Options::new().bounds(OutOfBounds::Clip);
    /// let out = opts.scatter_reduce(&array![0, 0], 0, &array![-3, 8], &array![5, 6], Reduce::Amax, false)?;
    /// assert_eq!(out, array![5, 6]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// With broadcasting:
    ///
    /// ```
    /// use gather::Reduce;
    /// use ndarray::array;
    /// // Mean of each group's rows; self included as one contributor.
    /// let out = gather::Options::new().broadcast(true).scatter_reduce(&array![[0.0f64, 0.0]], 0, &array![[0i64], [0]], &array![[2.0, 4.0], [4.0, 8.0]], Reduce::Mean, true)?;
    /// assert_eq!(out, array![[2.0, 4.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    ///
    /// Another example:
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use gather::Reduce;
    /// use ndarray::array;
    /// let out = gather::Options::new().bounds(OutOfBounds::Clip).scatter_reduce(&array![1.0, 1.0], 0, &array![0, 3, 0], &array![5.0, 7.0, 2.0], Reduce::Mean, true)?;
    /// assert_eq!(out, array![(1.0 + 5.0 + 2.0) / 3.0, (1.0 + 7.0) / 2.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_reduce<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        if *self == Options::new() {
            return crate::scatter_reduce(input, dim, index, src, reduce, include_self);
        }
        let mut out = super::try_to_owned("scatter_reduce", input)?;
        self.scatter_reduce_inplace(&mut out, dim, index, src, reduce, include_self)?;
        Ok(out)
    }
}

impl<T: Element> Options<T> {
    /// [`index_add_inplace()`](crate::index_add_inplace()) under a bounds policy (Error, Wrap, Clip or
    /// Drop).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![[0, 0], [0, 0]];
    /// Options::new().bounds(OutOfBounds::Drop).index_add_inplace(&mut x, 0, &array![1, 4], &array![[1, 2], [3, 4]], 10)?;
    /// assert_eq!(x, array![[0, 0], [10, 20]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_add_inplace<S, D, I, SI, DI, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_add")?;
        bounds::index_add_inplace_bounded(dst, dim, index, source, alpha, self.bounds)
    }

    /// Out-of-place [`Options::index_add_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Wrap).index_add(&array![0, 0, 0], 0, &array![-1], &array![5], 1)?;
    /// assert_eq!(out, array![0, 0, 5]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_add<S, D, I, SI, DI, SS, DS>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_add")?;
        bounds::index_add_bounded(input, dim, index, source, alpha, self.bounds)
    }

    /// [`index_copy_inplace()`](crate::index_copy_inplace()) under a bounds policy (Error, Wrap, Clip or
    /// Drop).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![0, 0, 0];
    /// Options::new().bounds(OutOfBounds::Clip).index_copy_inplace(&mut x, 0, &array![7], &array![5])?;
    /// assert_eq!(x, array![0, 0, 5]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_copy_inplace<S, D, I, SI, DI, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_copy")?;
        bounds::index_copy_inplace_bounded(dst, dim, index, source, self.bounds)
    }

    /// Out-of-place [`Options::index_copy_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Drop).index_copy(&array![0, 0], 0, &array![1, 2], &array![5, 6])?;
    /// assert_eq!(out, array![0, 5]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_copy<S, D, I, SI, DI, SS, DS>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_copy")?;
        bounds::index_copy_bounded(input, dim, index, source, self.bounds)
    }

    /// [`index_fill_inplace()`](crate::index_fill_inplace()) under a bounds policy (Error, Wrap, Clip or
    /// Drop).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![[1, 1], [1, 1]];
    /// Options::new().bounds(OutOfBounds::Drop).index_fill_inplace(&mut x, 1, &array![1, 3], 0)?;
    /// assert_eq!(x, array![[1, 0], [1, 0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_fill_inplace<S, D, I, SI, DI>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("index_fill")?;
        bounds::index_fill_inplace_bounded(dst, dim, index, value, self.bounds)
    }

    /// Out-of-place [`Options::index_fill_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Clip).index_fill(&array![1, 1, 1], 0, &array![-5], 9)?;
    /// assert_eq!(out, array![9, 1, 1]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_fill<S, D, I, SI, DI>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        self.no_broadcast("index_fill")?;
        bounds::index_fill_bounded(input, dim, index, value, self.bounds)
    }

    /// [`index_reduce_inplace()`](crate::index_reduce_inplace()) under a bounds policy (Error, Wrap, Clip or
    /// Drop).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let mut x = array![1.0, 1.0];
    /// Options::new().bounds(OutOfBounds::Drop).index_reduce_inplace(&mut x, 0, &array![1, 9], &array![4.0, 8.0], Reduce::Prod, true)?;
    /// assert_eq!(x, array![1.0, 4.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_reduce_inplace<S, D, I, SI, DI, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_reduce")?;
        bounds::index_reduce_inplace_bounded(
            dst,
            dim,
            index,
            source,
            reduce,
            include_self,
            self.bounds,
        )
    }

    /// Out-of-place [`Options::index_reduce_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Wrap).index_reduce(&array![1, 1], 0, &array![-1, -1], &array![3, 7], Reduce::Amax, false)?;
    /// assert_eq!(out, array![1, 7]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_reduce<S, D, I, SI, DI, SS, DS>(
        &self,
        input: &ArrayBase<S, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("index_reduce")?;
        bounds::index_reduce_bounded(input, dim, index, source, reduce, include_self, self.bounds)
    }

    /// [`put_inplace()`](crate::put_inplace()) under a bounds policy (Error: PyTorch's `-n..n`;
    /// Wrap, Clip or Drop), on the flattened destination.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let mut x = array![[0, 0], [0, 0]];
    /// Options::new().bounds(OutOfBounds::Drop).put_inplace(&mut x, &array![3, 4, -9], &array![1, 2, 3], false)?;
    /// assert_eq!(x, array![[0, 0], [0, 1]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn put_inplace<S, D, I, SI, DI, SS, DS>(
        &self,
        dst: &mut ArrayBase<S, D>,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("put")?;
        bounds::put_inplace_bounded(dst, index, source, accumulate, self.bounds)
    }

    /// Out-of-place [`Options::put_inplace`]: a new array.
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let out = Options::new().bounds(OutOfBounds::Clip).put(&array![0, 0, 0], &array![5, 5], &array![1, 2], true)?;
    /// assert_eq!(out, array![0, 0, 3]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn put<S, D, I, SI, DI, SS, DS>(
        &self,
        input: &ArrayBase<S, D>,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<Array<T, D>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.no_broadcast("put")?;
        bounds::put_bounded(input, index, source, accumulate, self.bounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{Array2, Array3, array};

    /// Broadcasting and a bounds policy together give what the policy gives on the index and
    /// `src` expanded by hand, for reads (Clip, Fill, Wrap) and writes (Clip, Drop, Wrap).
    #[test]
    fn broadcasting_with_a_policy_equals_the_policy_on_expanded_arrays() {
        let x = Array3::from_shape_fn((2, 4, 3), |(b, n, d)| (100 * b + 10 * n + d) as f64);
        let idx = array![[[3i64], [-1], [9]], [[0], [-5], [2]]]; // [2, 3, 1]
        let expanded = idx.broadcast((2, 3, 3)).unwrap();
        for p in [
            OutOfBounds::Clip,
            OutOfBounds::Fill(-7.0),
            OutOfBounds::Wrap,
        ] {
            let got = Options::new().broadcast(true).bounds(p).gather(&x, 1, &idx);
            let want = Options::new().bounds(p).gather(&x, 1, &expanded);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "{p:?}"),
                (Err(g), Err(w)) => assert_eq!(g.kind(), w.kind(), "{p:?}"),
                (g, w) => panic!("{p:?}: {g:?} against {w:?}"),
            }
        }

        let dst = Array2::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f64);
        let rows = array![[2i64], [7], [-1], [0]]; // [4, 1]
        let src = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]];
        let rows_x = rows.broadcast((4, 2)).unwrap();
        for p in [OutOfBounds::Clip, OutOfBounds::Drop, OutOfBounds::Wrap] {
            for r in [Reduce::Sum, Reduce::Mean, Reduce::Amax] {
                let opts = Options::new().bounds(p);
                let got = opts
                    .broadcast(true)
                    .scatter_reduce(&dst, 0, &rows, &src, r, true);
                let want = opts.scatter_reduce(&dst, 0, &rows_x, &src, r, true);
                match (got, want) {
                    (Ok(g), Ok(w)) => assert_eq!(g, w, "{p:?} {r:?}"),
                    (Err(g), Err(w)) => assert_eq!(g.kind(), w.kind(), "{p:?} {r:?}"),
                    (g, w) => panic!("{p:?} {r:?}: {g:?} against {w:?}"),
                }
            }
            let got = Options::new()
                .broadcast(true)
                .bounds(p)
                .scatter(&dst, 0, &rows, 9.5);
            let want = Options::new().bounds(p).scatter(&dst, 0, &rows_x, 9.5);
            assert_eq!(got.ok(), want.ok(), "{p:?} value");
        }
    }

    /// A failed write under options changes nothing, broadcast or not.
    #[test]
    fn a_failed_write_under_options_changes_nothing() {
        let mut dst = array![[1.0f32, 2.0], [3.0, 4.0]];
        let before = dst.clone();
        let opts = Options::new().broadcast(true).bounds(OutOfBounds::Wrap);
        let e = opts
            .scatter_add_inplace(&mut dst, 0, &array![[0i64], [-3]], &array![[1.0f32, 1.0]])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(dst, before);
    }

    /// Ops without a broadcasting form say so instead of ignoring the option, and a policy
    /// that makes no sense for the op (Fill for a write, Drop for a read) is refused.
    #[test]
    fn options_an_op_cannot_honour_are_errors_with_a_hint() {
        let x = array![[1, 2], [3, 4]];
        let e = Options::new()
            .broadcast(true)
            .index_select(&x, 0, &array![1])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string()
                .contains("broadcasting is an option of gather")
        );
        assert!(e.hint().is_some());
        let e = Options::new()
            .bounds(OutOfBounds::Fill(0))
            .scatter(&x, 0, &array![[0]], 5)
            .unwrap_err();
        assert!(e.to_string().contains("Fill policy is for reads"), "{e}");
        let e = Options::new()
            .broadcast(true)
            .bounds(OutOfBounds::Drop)
            .gather(&x, 0, &array![[0]])
            .unwrap_err();
        assert!(e.to_string().contains("Drop policy is for writes"), "{e}");
    }

    /// The default options are exactly the root ops, a 0-d index included.
    #[test]
    fn default_options_are_the_root_ops() {
        let x = array![10, 20, 30];
        let i0 = ndarray::arr0(2i64);
        let o = Options::default();
        assert_eq!(
            o.gather(&x, 0, &i0).unwrap(),
            crate::gather(&x, 0, &i0).unwrap()
        );
        let ob = o.broadcast(true);
        assert_eq!(
            ob.gather(&x, 0, &i0).unwrap(),
            crate::gather(&x, 0, &i0).unwrap()
        );
        assert_eq!(
            o.scatter(&x, 0, &array![0, 0], &array![5, 6]).unwrap(),
            crate::scatter(&x, 0, &array![0, 0], &array![5, 6]).unwrap()
        );
    }
}
