//! Gradients under [`Options`](crate::Options): the methods of [`GradOptions`], with the same
//! bounds policy and broadcasting as the forward ([`crate::ops::bounds`],
//! [`crate::ops::broadcast`]).

use ndarray::{
    Array, ArrayBase, ArrayD, ArrayView, Axis, CowArray, Data, Dimension, IntoDimension, IxDyn,
    Slice,
};

use super::output::{GradOutputOf, check_grad_output};
use super::{GradFloat, ScatterGrad, SourceGrad};
use crate::error::{Error, Result};
use crate::index::IndexElem;
use crate::ops::bounds::{
    Layout, OutOfBounds, dim_size, extend_axis, fill_missing, into_dim, reads_only, resolve,
    writes_only,
};
use crate::ops::scatter::Reduce;

/// `grad_out` with zeros at the positions a Fill read filled (a copy only when there are some).
fn zero_filled<'a, T: GradFloat>(
    grad_out: ArrayView<'a, T, IxDyn>,
    policy: &OutOfBounds<T>,
    missing: Option<ArrayView<'_, bool, IxDyn>>,
    layout: Layout,
) -> ndarray::CowArray<'a, T, IxDyn> {
    match (policy, missing) {
        (OutOfBounds::Fill(_), Some(m)) => {
            let mut g = crate::kernels::copy::owned(&grad_out);
            fill_missing(&mut g.view_mut(), &m, layout, T::default());
            g.into()
        }
        _ => grad_out.into(),
    }
}

/// `a` with one more slice of zeros along `d` (a 0-d `a` seen as 1-d): the scratch slice that
/// the writes dropped under Drop go to.
fn with_scratch<T: GradFloat>(a: &ArrayView<'_, T, IxDyn>, d: usize) -> Result<ArrayD<T>> {
    let a1 = if a.ndim() == 0 {
        a.view().insert_axis(Axis(0))
    } else {
        a.view()
    };
    extend_axis(&a1, d, T::default())
}

/// The input as a gradient of shape `g_shape` sees it: itself, or under Drop with the scratch
/// slice too (its value does not matter: the scratch slice's gradient is zero).
fn input_like<'a, T: GradFloat>(
    op: &str,
    x: &ArrayView<'a, T, IxDyn>,
    g_shape: &[usize],
    dim: isize,
) -> Result<CowArray<'a, T, IxDyn>> {
    if g_shape == x.shape() {
        return Ok(x.clone().into());
    }
    let d = dim_size(op, x.shape(), dim)?.0;
    Ok(with_scratch(x, d)?.into())
}

/// [`write_grad`] for a reduction's gradient, which also reads the forward's input: `grad_out`
/// must have the input's shape, and `f` gets the input with the scratch slice of Drop when
/// `grad_out` has one (see [`input_like`]).
fn reduce_grad<T, S, D, I, SI, DI, R, F>(
    op: &str,
    grad_out: &ArrayBase<S, D>,
    x: &ArrayView<'_, T, IxDyn>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    policy: &OutOfBounds<T>,
    f: F,
) -> Result<(ArrayD<T>, R)>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    F: FnOnce(
        &ArrayView<'_, T, IxDyn>,
        &ArrayView<'_, T, IxDyn>,
        &ArrayView<'_, i64, IxDyn>,
    ) -> Result<(ArrayD<T>, R)>,
{
    check_grad_output(op, GradOutputOf::Input, grad_out.shape(), x.shape())?;
    write_grad(
        op,
        grad_out.view().into_dyn(),
        Some(dim),
        index.view().into_dyn(),
        policy,
        |g, i| {
            let xe = input_like(op, x, g.shape(), dim)?;
            f(g, &xe.view(), i)
        },
    )
}

/// Runs the write gradient `f` with the index mapped under `policy` (not `Error`). Under Drop with
/// some value out of range, `f` gets `grad_out` with one more zero slice along the axis (`None`:
/// flattened with one more zero), where the dropped writes went in the forward; the input
/// gradient comes back without it.
fn write_grad<T, I, R, F>(
    op: &str,
    grad_out: ArrayView<'_, T, IxDyn>,
    axis: Option<isize>,
    index: ArrayView<'_, I, IxDyn>,
    policy: &OutOfBounds<T>,
    f: F,
) -> Result<(ArrayD<T>, R)>
where
    T: GradFloat,
    I: IndexElem,
    F: FnOnce(&ArrayView<'_, T, IxDyn>, &ArrayView<'_, i64, IxDyn>) -> Result<(ArrayD<T>, R)>,
{
    writes_only(op, policy)?;
    let (d, n) = match axis {
        Some(a) => dim_size(op, grad_out.shape(), a)?,
        None => (0, grad_out.len()),
    };
    let r = resolve(op, &index, d, n, policy, n as i64)?;
    if r.missing().is_none() {
        return f(&grad_out, &r.index());
    }
    match axis {
        Some(_) => {
            let ext = with_scratch(&grad_out, d)?;
            let (gi, rest) = f(&ext.view(), &r.index())?;
            let gi = crate::kernels::copy::owned(&gi.slice_axis(Axis(d), Slice::from(0..n)));
            let gi = gi
                .into_shape_with_order(grad_out.raw_dim())
                .expect("the input's shape");
            Ok((gi, rest))
        }
        None => {
            let mut flat = crate::kernels::copy::copy_into(&grad_out, Vec::with_capacity(n + 1));
            flat.push(T::default());
            let ext = ArrayD::from_shape_vec(IxDyn(&[n + 1]), flat).expect("n + 1");
            let (gi, rest) = f(&ext.view(), &r.index())?;
            let mut gi = crate::kernels::copy::copy_into(&gi.view(), Vec::with_capacity(gi.len()));
            gi.truncate(n);
            Ok((
                ArrayD::from_shape_vec(grad_out.raw_dim(), gi).expect("n elements"),
                rest,
            ))
        }
    }
}

/// The error of `Parity::PyTorch` with broadcasting: PyTorch has no broadcasting form whose
/// numbers there would be to match.
pub(crate) fn no_broadcast_parity(op: &str) -> Error {
    Error::invalid(format!(
        "{op}: PyTorch has no broadcasting scatter_reduce, so there are no PyTorch numbers to match"
    ))
    .with_hint("use parity=\"correct\" with broadcasting, or expand the index to src's shape")
}

/// Gradients under [`Options`](crate::Options): made by [`Options::grad`](crate::Options::grad),
/// one method per op, with the names and arguments of the free functions of [`crate::grad`].
/// The gradient goes where the forward under the same options read or wrote.
///
/// ```
/// use gather::{Options, OutOfBounds};
/// use ndarray::array;
/// // -1 read 0.0 in the forward (Fill): its gradient goes nowhere.
/// let g = array![1.0f32, 10.0, 100.0];
/// let d = Options::new().bounds(OutOfBounds::Fill(0.0)).grad().gather(&g, 3, 0, &array![-1, 1, 1])?;
/// assert_eq!(d, array![0.0, 110.0, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradOptions<T> {
    opts: crate::Options<T>,
    parity: super::Parity,
}

impl<T> crate::Options<T> {
    /// The gradients of the ops under these options (see [`GradOptions`]).
    ///
    /// ```
    /// use gather::{Options, OutOfBounds};
    /// use ndarray::array;
    /// let g = Options::new().bounds(OutOfBounds::Clip).grad().take(&array![1.0f64, 2.0], 3, &array![5, -9])?;
    /// assert_eq!(g, array![2.0, 0.0, 1.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn grad(self) -> GradOptions<T> {
        GradOptions {
            opts: self,
            parity: super::Parity::Correct,
        }
    }
}

impl<T> GradOptions<T> {
    /// The gradients of `scatter_reduce` and `index_reduce` with the choice of
    /// [`Parity`](super::Parity) (default `Correct`), under the bounds policy as without one.
    /// PyTorch has no broadcasting form, so `Parity::PyTorch` with broadcasting is an error.
    ///
    /// ```
    /// use gather::{grad::Parity, Options, OutOfBounds, Reduce};
    /// use ndarray::array;
    /// // amax with include_self=false: x[0] ties the result 5; PyTorch still gives it a share.
    /// let (x, idx, src) = (array![5.0f64, 1.0], array![0, 9], array![5.0, 2.0]);
    /// let go = Options::new().bounds(OutOfBounds::Drop).grad();
    /// let g = go.scatter_reduce(&array![1.0, 1.0], &x, 0, &idx, &src, Reduce::Amax, false)?;
    /// assert_eq!(g.src, array![1.0, 0.0]);
    /// let g = go.parity(Parity::PyTorch).scatter_reduce(&array![1.0, 1.0], &x, 0, &idx, &src, Reduce::Amax, false)?;
    /// assert_eq!(g.src, array![0.5, 0.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn parity(self, parity: super::Parity) -> Self {
        GradOptions { parity, ..self }
    }
}

impl<T: GradFloat> GradOptions<T> {
    /// The gradient of the forward under the same options with respect to `input`.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = array![1.0f32, 10.0, 100.0];
    /// let idx = array![-1, 1, 5];
    /// let d = gather::Options::new().bounds(OutOfBounds::Clip).grad().gather(&g, 3, 0, &idx)?;
    /// assert_eq!(d, array![1.0, 10.0, 100.0]);
    /// let d = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).grad().gather(&g, 3, 0, &idx)?;
    /// assert_eq!(d, array![0.0, 10.0, 0.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn gather<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        input_shape: Sh,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        let policy = self.opts.bounds;
        let shape = input_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            if self.opts.broadcast {
                return super::broadcast::gather_broadcast(grad_out, shape, dim, index);
            }
            return super::gather(grad_out, shape, dim, index);
        }
        let op = "grad::gather";
        reads_only(op, &policy)?;
        let (d, n) = dim_size(op, shape.slice(), dim)?;
        let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
        if self.opts.broadcast {
            let g = zero_filled(
                grad_out.view().into_dyn(),
                &policy,
                r.missing(),
                Layout::Broadcast,
            );
            return super::broadcast::gather_broadcast(&g.view(), shape, dim, &r.index());
        }
        let g = zero_filled(
            grad_out.view().into_dyn(),
            &policy,
            r.missing(),
            Layout::Same,
        );
        super::gather(&g.view(), shape, dim, &r.index())
    }

    /// The gradient of the forward under the same options with respect to
    /// `input`.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = array![[1.0f64, 1.0], [2.0, 2.0], [4.0, 4.0]];
    /// let d = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).grad().index_select(&g, (2, 2), 0, &array![1, -1, 1])?;
    /// assert_eq!(d, array![[0.0, 0.0], [5.0, 5.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_select<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        input_shape: Sh,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::index_select")?;
        let policy = self.opts.bounds;
        let shape = input_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::index_select(grad_out, shape, dim, index);
        }
        let op = "grad::index_select";
        reads_only(op, &policy)?;
        let (d, n) = dim_size(op, shape.slice(), dim)?;
        let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
        let g = zero_filled(
            grad_out.view().into_dyn(),
            &policy,
            r.missing(),
            Layout::Lanes(d),
        );
        super::index_select(&g.view(), shape, dim, &r.index())
    }

    /// The gradient of the forward under the same options with respect to `input`.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let d = gather::Options::new().bounds(OutOfBounds::Clip).grad().take(&array![1.0f32, 2.0, 4.0], (2, 2), &array![0, 9, -1])?;
    /// assert_eq!(d, array![[5.0, 0.0], [0.0, 2.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn take<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        input_shape: Sh,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::take")?;
        let policy = self.opts.bounds;
        let shape = input_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::take(grad_out, shape, index);
        }
        let op = "grad::take";
        reads_only(op, &policy)?;
        let n = shape.slice().iter().product();
        let r = resolve(op, &index.view().into_dyn(), 0, n, &policy, 0)?;
        let g = zero_filled(
            grad_out.view().into_dyn(),
            &policy,
            r.missing(),
            Layout::Same,
        );
        super::take(&g.view(), shape, &r.index())
    }

    /// The gradient of the forward under the same options with respect to
    /// `input`.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = array![[1.0f32], [2.0]];
    /// let d = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).grad().take_along_dim(&g, (2, 3), &array![[2], [7]], Some(1))?;
    /// assert_eq!(d, array![[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn take_along_dim<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        input_shape: Sh,
        index: &ArrayBase<SI, DI>,
        dim: Option<isize>,
    ) -> Result<Array<T, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::take_along_dim")?;
        let policy = self.opts.bounds;
        let shape = input_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::take_along_dim(grad_out, shape, index, dim);
        }
        let op = "grad::take_along_dim";
        reads_only(op, &policy)?;
        let (d, n, layout) = match dim {
            Some(dim) => {
                let (d, n) = dim_size(op, shape.slice(), dim)?;
                (d, n, Layout::Broadcast)
            }
            None => (0, shape.slice().iter().product(), Layout::Same),
        };
        let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
        let g = zero_filled(grad_out.view().into_dyn(), &policy, r.missing(), layout);
        super::take_along_dim(&g.view(), shape, &r.index(), dim)
    }

    /// The gradient of the forward under the same options with respect to
    /// `input`.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// // Token logits [1, 2, 2]; label -100 is ignored: its gradient goes nowhere.
    /// let g = array![[1.0f32, 1.0]];
    /// let d = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).grad().select_batched(&g, (1, 2, 2), -1, &array![[1, -100]], 2)?;
    /// assert_eq!(d, array![[[0.0, 1.0], [0.0, 0.0]]].into_dyn());
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn select_batched<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        input_shape: Sh,
        axis: isize,
        index: &ArrayBase<SI, DI>,
        batch_dims: usize,
    ) -> Result<ArrayD<T>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::select_batched")?;
        let policy = self.opts.bounds;
        let shape = input_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::select_batched(grad_out, shape, axis, index, batch_dims);
        }
        let op = "grad::select_batched";
        reads_only(op, &policy)?;
        let p = crate::ops::select::plan(op, shape.slice(), axis, index.shape(), batch_dims)?;
        let n = shape.slice()[p.axis];
        let r = resolve(op, &index.view().into_dyn(), p.axis, n, &policy, 0)?;
        let layout = Layout::Batched {
            axis: p.axis,
            b: batch_dims,
        };
        let g = zero_filled(grad_out.view().into_dyn(), &policy, r.missing(), layout);
        super::select_batched(&g.view(), shape, axis, &r.index(), batch_dims)
    }

    /// The gradients of the forward under the same options: `grad.input` is
    /// `grad_out`, `grad.src` reads it where each source landed (zero where it was dropped).
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = gather::Options::new().bounds(OutOfBounds::Drop).grad().scatter_add(&array![1.0f32, 2.0], 0, &array![1, -1, 1], 3)?;
    /// assert_eq!(g.input, array![1.0, 2.0]);
    /// assert_eq!(g.src, array![2.0, 0.0, 2.0]);
    /// let g = gather::Options::new().bounds(OutOfBounds::Wrap).grad().scatter_add(&array![1.0f32, 2.0], 0, &array![1, -1, 1], 3)?;
    /// assert_eq!(g.src, array![2.0, 2.0, 2.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter_add<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src_shape: Sh,
    ) -> Result<ScatterGrad<T, DG, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        let policy = self.opts.bounds;
        let ss = src_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            if self.opts.broadcast {
                return super::broadcast::scatter_add_broadcast(grad_out, dim, index, ss);
            }
            return super::scatter_add(grad_out, dim, index, ss);
        }
        let (gi, gs) = write_grad(
            "grad::scatter_add",
            grad_out.view().into_dyn(),
            Some(dim),
            index.view().into_dyn(),
            &policy,
            |g, i| {
                let r = if self.opts.broadcast {
                    super::broadcast::scatter_add_broadcast(g, dim, i, ss.clone())?
                } else {
                    super::scatter_add(g, dim, i, ss.clone())?
                };
                Ok((r.input, r.src))
            },
        )?;
        Ok(ScatterGrad {
            input: into_dim(gi),
            src: gs,
        })
    }

    /// The gradients of the forward under the same options: overwritten elements of the
    /// input get zero, each kept source the gradient of where it landed (the last write of
    /// duplicates), dropped sources zero.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = gather::Options::new().bounds(OutOfBounds::Clip).grad().scatter(&array![1.0f32, 2.0, 4.0], 0, &array![5, 1], 2)?;
    /// assert_eq!(g.input, array![1.0, 0.0, 0.0]);
    /// assert_eq!(g.src, array![4.0, 2.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn scatter<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src_shape: Sh,
    ) -> Result<ScatterGrad<T, DG, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        let policy = self.opts.bounds;
        let ss = src_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            if self.opts.broadcast {
                return super::broadcast::scatter_broadcast(grad_out, dim, index, ss);
            }
            return super::scatter(grad_out, dim, index, ss);
        }
        let (gi, gs) = write_grad(
            "grad::scatter",
            grad_out.view().into_dyn(),
            Some(dim),
            index.view().into_dyn(),
            &policy,
            |g, i| {
                let r = if self.opts.broadcast {
                    super::broadcast::scatter_broadcast(g, dim, i, ss.clone())?
                } else {
                    super::scatter(g, dim, i, ss.clone())?
                };
                Ok((r.input, r.src))
            },
        )?;
        Ok(ScatterGrad {
            input: into_dim(gi),
            src: gs,
        })
    }

    /// The gradients of the forward under the same options (the forward
    /// is recomputed from `input` and `src`).
    ///
    /// ```
    /// use gather::{OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let x = array![1.0f64, 1.0];
    /// let g = gather::Options::new().bounds(OutOfBounds::Drop).grad()
    ///     .scatter_reduce(&array![1.0, 1.0], &x, 0, &array![0, 3, 0], &array![5.0, 7.0, 2.0], Reduce::Prod, true)?;
    /// assert_eq!(g.input, array![10.0, 1.0]);
    /// assert_eq!(g.src, array![2.0, 0.0, 5.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_reduce<S, D, SX, I, SI, DI, SS, DS>(
        &self,
        grad_out: &ArrayBase<S, D>,
        input: &ArrayBase<SX, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<ScatterGrad<T, D, DS>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        SX: Data<Elem = T>,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        let policy = self.opts.bounds;
        let op = "grad::scatter_reduce";
        if self.opts.broadcast && self.parity == super::Parity::PyTorch {
            return Err(no_broadcast_parity(op));
        }
        if let OutOfBounds::Error = policy {
            let x = input.view();
            return self.scatter_reduce_strict(grad_out, &x, dim, index, src, reduce, include_self);
        }
        let x = input.view().into_dyn();
        let (gi, gs) = reduce_grad(op, grad_out, &x, dim, index, &policy, |g, xe, i| {
            let r = self.scatter_reduce_strict(g, xe, dim, i, src, reduce, include_self)?;
            Ok((r.input, r.src))
        })?;
        Ok(ScatterGrad {
            input: into_dim(gi),
            src: gs,
        })
    }

    /// The gradients of the forward under the same options (the forward is
    /// recomputed from `input` and `source`).
    ///
    /// ```
    /// use gather::{OutOfBounds, Reduce};
    /// use ndarray::array;
    /// let x = array![2.0f64, 3.0];
    /// let g = gather::Options::new().bounds(OutOfBounds::Drop).grad()
    ///     .index_reduce(&array![1.0, 1.0], &x, 0, &array![0, -1, 7], &array![4.0, 5.0, 6.0], Reduce::Prod, true)?;
    /// assert_eq!(g.input, array![4.0, 1.0]);
    /// assert_eq!(g.source, array![2.0, 0.0, 0.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn index_reduce<S, D, SX, I, SI, DI, SS, DS>(
        &self,
        grad_out: &ArrayBase<S, D>,
        input: &ArrayBase<SX, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<SourceGrad<T, D, DS>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        SX: Data<Elem = T>,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        self.opts.no_broadcast("grad::index_reduce")?;
        let policy = self.opts.bounds;
        let op = "grad::index_reduce";
        let parity = self.parity;
        if let OutOfBounds::Error = policy {
            let out = crate::index_reduce(input, dim, index, source, reduce, include_self)?;
            return super::index_reduce_with(
                grad_out,
                input,
                dim,
                index,
                source,
                reduce,
                include_self,
                &out,
                parity,
            );
        }
        let x = input.view().into_dyn();
        let (gi, gs) = reduce_grad(op, grad_out, &x, dim, index, &policy, |g, xe, i| {
            let out = crate::index_reduce(xe, dim, i, source, reduce, include_self)?;
            let r = super::index_reduce_with(
                g,
                xe,
                dim,
                i,
                source,
                reduce,
                include_self,
                &out,
                parity,
            )?;
            Ok((r.input, r.source))
        })?;
        Ok(SourceGrad {
            input: into_dim(gi),
            source: gs,
        })
    }

    /// The gradients of the forward under the same options.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = array![[1.0f32, 1.0], [2.0, 2.0]];
    /// let r = gather::Options::new().bounds(OutOfBounds::Drop).grad().index_add(&g, 0, &array![1, 7], (2, 2), 3.0)?;
    /// assert_eq!(r.input, g);
    /// assert_eq!(r.source, array![[6.0, 6.0], [0.0, 0.0]]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_add<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source_shape: Sh,
        alpha: T,
    ) -> Result<SourceGrad<T, DG, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::index_add")?;
        let policy = self.opts.bounds;
        let ss = source_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::index_add(grad_out, dim, index, ss, alpha);
        }
        let (gi, gs) = write_grad(
            "grad::index_add",
            grad_out.view().into_dyn(),
            Some(dim),
            index.view().into_dyn(),
            &policy,
            |g, i| {
                let r = super::index_add(g, dim, i, ss.clone(), alpha)?;
                Ok((r.input, r.source))
            },
        )?;
        Ok(SourceGrad {
            input: into_dim(gi),
            source: gs,
        })
    }

    /// The gradients of the forward under the same options.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let r = gather::Options::new().bounds(OutOfBounds::Drop).grad().index_copy(&array![1.0f32, 2.0, 4.0], 0, &array![5, 1], 2)?;
    /// assert_eq!(r.input, array![1.0, 0.0, 4.0]);
    /// assert_eq!(r.source, array![0.0, 2.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_copy<S, DG, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, DG>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source_shape: Sh,
    ) -> Result<SourceGrad<T, DG, Sh::Dim>>
    where
        S: Data<Elem = T>,
        DG: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::index_copy")?;
        let policy = self.opts.bounds;
        let ss = source_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::index_copy(grad_out, dim, index, ss);
        }
        let (gi, gs) = write_grad(
            "grad::index_copy",
            grad_out.view().into_dyn(),
            Some(dim),
            index.view().into_dyn(),
            &policy,
            |g, i| {
                let r = super::index_copy(g, dim, i, ss.clone())?;
                Ok((r.input, r.source))
            },
        )?;
        Ok(SourceGrad {
            input: into_dim(gi),
            source: gs,
        })
    }

    /// The gradient of the forward under the same options with respect to `input`:
    /// zero on the filled slices.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let d = gather::Options::new().bounds(OutOfBounds::Drop).grad().index_fill(&array![1.0f32, 2.0, 4.0], 0, &array![0, 9])?;
    /// assert_eq!(d, array![0.0, 2.0, 4.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn index_fill<S, D, I, SI, DI>(
        &self,
        grad_out: &ArrayBase<S, D>,
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
        self.opts.no_broadcast("grad::index_fill")?;
        let policy = self.opts.bounds;
        if let OutOfBounds::Error = policy {
            return super::index_fill(grad_out, dim, index);
        }
        let (gi, ()) = write_grad(
            "grad::index_fill",
            grad_out.view().into_dyn(),
            Some(dim),
            index.view().into_dyn(),
            &policy,
            |g, i| Ok((super::index_fill(g, dim, i)?, ())),
        )?;
        Ok(into_dim(gi))
    }

    /// The gradients of the forward under the same options.
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// use ndarray::array;
    /// let g = array![[1.0f32, 2.0], [3.0, 4.0]];
    /// let r = gather::Options::new().bounds(OutOfBounds::Drop).grad().put(&g, &array![0, 4, -1], 3, true)?;
    /// assert_eq!(r.input, g);
    /// assert_eq!(r.source, array![1.0, 0.0, 0.0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn put<S, D, I, SI, DI, Sh>(
        &self,
        grad_out: &ArrayBase<S, D>,
        index: &ArrayBase<SI, DI>,
        source_shape: Sh,
        accumulate: bool,
    ) -> Result<SourceGrad<T, D, Sh::Dim>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        Sh: IntoDimension,
    {
        self.opts.no_broadcast("grad::put")?;
        let policy = self.opts.bounds;
        let ss = source_shape.into_dimension();
        if let OutOfBounds::Error = policy {
            return super::put(grad_out, index, ss, accumulate);
        }
        let (gi, gs) = write_grad(
            "grad::put",
            grad_out.view().into_dyn(),
            None,
            index.view().into_dyn(),
            &policy,
            |g, i| {
                let r = super::put(g, i, ss.clone(), accumulate)?;
                Ok((r.input, r.source))
            },
        )?;
        Ok(SourceGrad {
            input: into_dim(gi),
            source: gs,
        })
    }

    /// The strict (`Error`) gradient of scatter_reduce, broadcasting or not, from the forward
    /// recomputed under the same broadcasting.
    #[allow(clippy::too_many_arguments)]
    fn scatter_reduce_strict<S, D, SX, I, SI, DI, SS, DS>(
        &self,
        grad_out: &ArrayBase<S, D>,
        input: &ArrayBase<SX, D>,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<ScatterGrad<T, D, DS>>
    where
        S: Data<Elem = T>,
        D: Dimension,
        SX: Data<Elem = T>,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        let strict = crate::Options::new().broadcast(self.opts.broadcast);
        let out = strict.scatter_reduce(input, dim, index, src, reduce, include_self)?;
        if self.opts.broadcast {
            return super::broadcast::scatter_reduce_broadcast(
                grad_out,
                input,
                dim,
                index,
                src,
                reduce,
                include_self,
                &out,
            );
        }
        super::scatter_reduce_with(
            grad_out,
            input,
            dim,
            index,
            src,
            reduce,
            include_self,
            &out,
            self.parity,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{ArrayD, IxDyn, array};

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn rand(shape: &[usize], seed: &mut u64) -> ArrayD<f64> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| {
            (lcg(seed) % 100_000) as f64 / 25_000.0 - 2.0
        })
    }

    fn index(shape: &[usize], n: usize, seed: &mut u64, wrap_only: bool) -> ArrayD<i64> {
        let (lo, span) = if wrap_only {
            (n as i64, 2 * n as u64)
        } else {
            (n as i64 + 2, 2 * n as u64 + 5)
        };
        ArrayD::from_shape_fn(IxDyn(shape), |_| (lcg(seed) % span) as i64 - lo)
    }

    /// Compares `grad` with central differences of `f` at `x`.
    fn check_fd(f: &dyn Fn(&ArrayD<f64>) -> f64, x: &ArrayD<f64>, grad: &ArrayD<f64>, what: &str) {
        assert_eq!(x.shape(), grad.shape(), "{what}");
        let h = 1e-6;
        for (c, &g) in grad.indexed_iter() {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[&c] += h;
            xm[&c] -= h;
            let fd = (f(&xp) - f(&xm)) / (2.0 * h);
            assert!(
                (fd - g).abs() < 1e-5 * (1.0 + g.abs()),
                "{what} at {c:?}: fd {fd} grad {g}"
            );
        }
    }

    fn dot(a: &ArrayD<f64>, w: &ArrayD<f64>) -> f64 {
        (a * w).sum()
    }

    #[test]
    fn read_gradients_match_finite_differences_under_every_read_policy() {
        let mut seed = 21u64;
        for round in 0..60 {
            let r = 1 + round % 3;
            let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 3) as usize).collect();
            let x = rand(&xs, &mut seed);
            let d = (lcg(&mut seed) % r as u64) as usize;
            let n = xs[d];
            for p in [OutOfBounds::Wrap, OutOfBounds::Clip, OutOfBounds::Fill(3.5)] {
                let wrap = matches!(p, OutOfBounds::Wrap);
                let what = format!("{p:?} x {xs:?} d {d}");
                let dd = d as isize;
                // gather
                let mut is = xs.clone();
                is[d] = 1 + (lcg(&mut seed) % 3) as usize;
                let idx = index(&is, n, &mut seed, wrap);
                let w = rand(&is, &mut seed);
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::gather_bounded(x, dd, &idx, p).unwrap(),
                        &w,
                    )
                };
                check_fd(
                    &f,
                    &x,
                    &crate::Options::new()
                        .bounds(p)
                        .grad()
                        .gather(&w, x.raw_dim(), dd, &idx)
                        .unwrap(),
                    &format!("gather {what}"),
                );
                // take_along_dim with and without a dim
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::take_along_dim_bounded(x, &idx, Some(dd), p).unwrap(),
                        &w,
                    )
                };
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .take_along_dim(&w, x.raw_dim(), &idx, Some(dd))
                    .unwrap();
                check_fd(&f, &x, &g, &format!("take_along_dim {what}"));
                let flat_idx = index(&[4], x.len(), &mut seed, wrap);
                let w4 = rand(&[4], &mut seed);
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::take_along_dim_bounded(x, &flat_idx, None, p).unwrap(),
                        &w4,
                    )
                };
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .take_along_dim(&w4, x.raw_dim(), &flat_idx, None)
                    .unwrap();
                check_fd(&f, &x, &g, &format!("take_along_dim(None) {what}"));
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::take_bounded(x, &flat_idx, p).unwrap(),
                        &w4,
                    )
                };
                check_fd(
                    &f,
                    &x,
                    &crate::Options::new()
                        .bounds(p)
                        .grad()
                        .take(&w4, x.raw_dim(), &flat_idx)
                        .unwrap(),
                    &format!("take {what}"),
                );
                // index_select and select_batched (batch_dims = d)
                let ids = index(&[3], n, &mut seed, wrap);
                let mut os = xs.clone();
                os[d] = 3;
                let wo = rand(&os, &mut seed);
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::index_select_bounded(x, dd, &ids, p).unwrap(),
                        &wo,
                    )
                };
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .index_select(&wo, x.raw_dim(), dd, &ids)
                    .unwrap();
                check_fd(&f, &x, &g, &format!("index_select {what}"));
                let mut bs = xs[..d].to_vec();
                bs.push(2);
                let bidx = index(&bs, n, &mut seed, wrap);
                let mut os = bs.clone();
                os.extend_from_slice(&xs[d + 1..]);
                let wb = rand(&os, &mut seed);
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::select_batched_bounded(x, dd, &bidx, d, p).unwrap(),
                        &wb,
                    )
                };
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .select_batched(&wb, x.raw_dim(), dd, &bidx, d)
                    .unwrap();
                check_fd(&f, &x, &g, &format!("select_batched {what}"));
            }
        }
    }

    #[test]
    fn broadcast_and_bounds_together_match_finite_differences() {
        let mut seed = 45u64;
        // gather: an input [1, 4] shared by three [1]-wide index rows.
        let x = rand(&[1, 4], &mut seed);
        for (p, idx) in [
            (OutOfBounds::Clip, array![[-1i64], [2], [9]]),
            (OutOfBounds::Fill(2.5), array![[-1i64], [2], [9]]),
            (OutOfBounds::Wrap, array![[-1i64], [2], [-4]]),
        ] {
            let opts = crate::Options::new().broadcast(true).bounds(p);
            let shape = opts.gather(&x, 1, &idx).unwrap().raw_dim();
            let w = rand(shape.slice(), &mut seed);
            let f = |x: &ArrayD<f64>| dot(&opts.gather(x, 1, &idx).unwrap().into_dyn(), &w);
            let g = opts.grad().gather(&w, x.raw_dim(), 1, &idx).unwrap();
            check_fd(&f, &x, &g, &format!("broadcast gather {p:?}"));
        }
        // scatter_add and scatter_reduce: [4, 1] row ids, src [4, 2], into [3, 2].
        let x = rand(&[3, 2], &mut seed);
        let src = rand(&[4, 2], &mut seed);
        let w = rand(&[3, 2], &mut seed);
        for (p, idx) in [
            (OutOfBounds::Drop, array![[-1i64], [1], [5], [2]]),
            (OutOfBounds::Clip, array![[-1i64], [1], [5], [2]]),
            (OutOfBounds::Wrap, array![[-1i64], [1], [-3], [2]]),
        ] {
            let opts = crate::Options::new().broadcast(true).bounds(p);
            let go = opts.grad();
            let g = go.scatter_add(&w, 0, &idx, src.raw_dim()).unwrap();
            let f = |x: &ArrayD<f64>| dot(&opts.scatter_add(x, 0, &idx, &src).unwrap(), &w);
            check_fd(
                &f,
                &x,
                &g.input,
                &format!("broadcast scatter_add input {p:?}"),
            );
            let f = |s: &ArrayD<f64>| dot(&opts.scatter_add(&x, 0, &idx, s).unwrap(), &w);
            check_fd(
                &f,
                &src,
                &g.src,
                &format!("broadcast scatter_add src {p:?}"),
            );
            let g = go
                .scatter_reduce(&w, &x, 0, &idx, &src, Reduce::Prod, true)
                .unwrap();
            let fwd = |x: &ArrayD<f64>, s: &ArrayD<f64>| {
                opts.scatter_reduce(x, 0, &idx, s, Reduce::Prod, true)
                    .unwrap()
            };
            check_fd(
                &|x| dot(&fwd(x, &src), &w),
                &x,
                &g.input,
                &format!("prod input {p:?}"),
            );
            check_fd(
                &|s| dot(&fwd(&x, s), &w),
                &src,
                &g.src,
                &format!("prod src {p:?}"),
            );
        }
    }

    #[test]
    fn the_parity_holds_under_every_write_policy_as_without_one() {
        use super::super::{Parity, scatter_reduce_with};
        // x[0] ties the amax of its group with include_self false: the parities differ there.
        let x = array![5.0f64, 1.0];
        let g = array![1.0, 1.0];
        let strict_idx = array![0i64, 1];
        let src = array![5.0, 2.0];
        for parity in [Parity::Correct, Parity::PyTorch] {
            let out = crate::scatter_reduce(&x, 0, &strict_idx, &src, Reduce::Amax, false).unwrap();
            let want = scatter_reduce_with(
                &g,
                &x,
                0,
                &strict_idx,
                &src,
                Reduce::Amax,
                false,
                &out,
                parity,
            )
            .unwrap();
            for (policy, idx) in [
                (OutOfBounds::Wrap, array![0i64, -1]),
                (OutOfBounds::Clip, array![0, 7]),
                (OutOfBounds::Drop, array![0, 1]),
            ] {
                let go = crate::Options::new().bounds(policy).grad().parity(parity);
                let got = go
                    .scatter_reduce(&g, &x, 0, &idx, &src, Reduce::Amax, false)
                    .unwrap();
                assert_eq!(
                    (&got.input, &got.src),
                    (&want.input, &want.src),
                    "{policy:?} {parity:?}"
                );
                let got = go
                    .index_reduce(&g, &x, 0, &idx, &src, Reduce::Amax, false)
                    .unwrap();
                assert_eq!(
                    (&got.input, &got.source),
                    (&want.input, &want.src),
                    "{policy:?} {parity:?}"
                );
            }
        }
        // A dropped write takes no share under either parity.
        let go = crate::Options::new()
            .bounds(OutOfBounds::Drop)
            .grad()
            .parity(Parity::PyTorch);
        let got = go
            .scatter_reduce(&g, &x, 0, &array![0i64, 9], &src, Reduce::Amax, false)
            .unwrap();
        assert_eq!(got.src, array![0.5, 0.0]);
        let e = crate::Options::new()
            .broadcast(true)
            .grad()
            .parity(Parity::PyTorch)
            .scatter_reduce(&g, &x, 0, &array![0i64], &array![5.0], Reduce::Amax, false)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn ops_without_a_broadcasting_form_refuse_it_in_their_gradients_too() {
        let bc = crate::Options::<f64>::new().broadcast(true).grad();
        let e = bc
            .index_select(&array![1.0, 2.0], 3, 0, &array![0, 1])
            .unwrap_err();
        assert!(e.to_string().contains("grad::index_select"), "{e}");
        let e = bc.take(&array![1.0, 2.0], 3, &array![0, 1]).unwrap_err();
        assert!(
            e.to_string().contains("broadcasting is an option of"),
            "{e}"
        );
    }

    #[test]
    fn write_gradients_match_finite_differences_under_every_write_policy() {
        let mut seed = 33u64;
        for round in 0..60 {
            let r = 1 + round % 3;
            let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 3) as usize).collect();
            let x = rand(&xs, &mut seed);
            let d = (lcg(&mut seed) % r as u64) as usize;
            let dd = d as isize;
            let n = xs[d];
            for p in [OutOfBounds::Wrap, OutOfBounds::Clip, OutOfBounds::Drop] {
                let wrap = matches!(p, OutOfBounds::Wrap);
                let what = format!("{p:?} x {xs:?} d {d}");
                let mut is = xs.clone();
                is[d] = 1 + (lcg(&mut seed) % 4) as usize;
                let idx = index(&is, n, &mut seed, wrap);
                let src = rand(&is, &mut seed);
                let w = rand(&xs, &mut seed);
                // scatter_add
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .scatter_add(&w, dd, &idx, src.raw_dim())
                    .unwrap();
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::Options::new()
                            .bounds(p)
                            .scatter_add(x, dd, &idx, &src)
                            .unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &x, &g.input, &format!("scatter_add input {what}"));
                let f = |s: &ArrayD<f64>| {
                    dot(
                        &crate::Options::new()
                            .bounds(p)
                            .scatter_add(&x, dd, &idx, s)
                            .unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &src, &g.src, &format!("scatter_add src {what}"));
                // scatter (set): PyTorch's gradient gives every source, overwritten duplicates
                // included, the gradient of its target; finite differences agree when targets
                // are distinct.
                let mut seen = std::collections::BTreeSet::new();
                let distinct_targets = idx.indexed_iter().all(|(c, &i)| {
                    let t = match p {
                        OutOfBounds::Wrap => Some(if i < 0 { i + n as i64 } else { i }),
                        OutOfBounds::Clip => Some(i.clamp(0, n as i64 - 1)),
                        _ => (i >= 0 && i < n as i64).then_some(i),
                    };
                    match t {
                        None => true,
                        Some(t) => {
                            let mut c = c.slice().to_vec();
                            c[d] = t as usize;
                            seen.insert(c)
                        }
                    }
                });
                if distinct_targets {
                    let g = crate::Options::new()
                        .bounds(p)
                        .grad()
                        .scatter(&w, dd, &idx, src.raw_dim())
                        .unwrap();
                    let f = |x: &ArrayD<f64>| {
                        dot(
                            &crate::Options::new()
                                .bounds(p)
                                .scatter(x, dd, &idx, &src)
                                .unwrap(),
                            &w,
                        )
                    };
                    check_fd(&f, &x, &g.input, &format!("scatter input {what}"));
                    let f = |s: &ArrayD<f64>| {
                        dot(
                            &crate::Options::new()
                                .bounds(p)
                                .scatter(&x, dd, &idx, s)
                                .unwrap(),
                            &w,
                        )
                    };
                    check_fd(&f, &src, &g.src, &format!("scatter src {what}"));
                }
                // scatter_reduce
                for red in [
                    Reduce::Sum,
                    Reduce::Prod,
                    Reduce::Mean,
                    Reduce::Amax,
                    Reduce::Amin,
                ] {
                    for incl in [true, false] {
                        let g = crate::Options::new()
                            .bounds(p)
                            .grad()
                            .scatter_reduce(&w, &x, dd, &idx, &src, red, incl)
                            .unwrap();
                        let f = |x: &ArrayD<f64>| {
                            dot(
                                &crate::Options::new()
                                    .bounds(p)
                                    .scatter_reduce(x, dd, &idx, &src, red, incl)
                                    .unwrap(),
                                &w,
                            )
                        };
                        check_fd(
                            &f,
                            &x,
                            &g.input,
                            &format!("scatter_reduce {red:?} {incl} input {what}"),
                        );
                        let f = |s: &ArrayD<f64>| {
                            dot(
                                &crate::Options::new()
                                    .bounds(p)
                                    .scatter_reduce(&x, dd, &idx, s, red, incl)
                                    .unwrap(),
                                &w,
                            )
                        };
                        check_fd(
                            &f,
                            &src,
                            &g.src,
                            &format!("scatter_reduce {red:?} {incl} src {what}"),
                        );
                    }
                }
                // index_add, index_copy (distinct targets), index_fill
                let ids = index(&[2], n, &mut seed, wrap);
                let mut ss = xs.clone();
                ss[d] = 2;
                let source = rand(&ss, &mut seed);
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .index_add(&w, dd, &ids, source.raw_dim(), 1.5)
                    .unwrap();
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::index_add_bounded(x, dd, &ids, &source, 1.5, p)
                            .unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &x, &g.input, &format!("index_add input {what}"));
                let f = |s: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::index_add_bounded(&x, dd, &ids, s, 1.5, p).unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &source, &g.source, &format!("index_add source {what}"));
                for red in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
                    for incl in [true, false] {
                        let g = crate::Options::new()
                            .bounds(p)
                            .grad()
                            .index_reduce(&w, &x, dd, &ids, &source, red, incl)
                            .unwrap();
                        let f = |x: &ArrayD<f64>| {
                            dot(
                                &crate::ops::bounds::index_reduce_bounded(
                                    x, dd, &ids, &source, red, incl, p,
                                )
                                .unwrap(),
                                &w,
                            )
                        };
                        check_fd(
                            &f,
                            &x,
                            &g.input,
                            &format!("index_reduce {red:?} {incl} input {what}"),
                        );
                        let f = |s: &ArrayD<f64>| {
                            dot(
                                &crate::ops::bounds::index_reduce_bounded(
                                    &x, dd, &ids, s, red, incl, p,
                                )
                                .unwrap(),
                                &w,
                            )
                        };
                        check_fd(
                            &f,
                            &source,
                            &g.source,
                            &format!("index_reduce {red:?} {incl} source {what}"),
                        );
                    }
                }
                let targets: Vec<Option<usize>> = ids
                    .iter()
                    .map(|&i| match p {
                        OutOfBounds::Wrap => Some(if i < 0 {
                            (i + n as i64) as usize
                        } else {
                            i as usize
                        }),
                        OutOfBounds::Clip => Some(i.clamp(0, n as i64 - 1) as usize),
                        _ => (i >= 0 && i < n as i64).then_some(i as usize),
                    })
                    .collect();
                let distinct =
                    targets[0].is_none() || targets[1].is_none() || targets[0] != targets[1];
                if distinct {
                    let g = crate::Options::new()
                        .bounds(p)
                        .grad()
                        .index_copy(&w, dd, &ids, source.raw_dim())
                        .unwrap();
                    let f = |x: &ArrayD<f64>| {
                        dot(
                            &crate::ops::bounds::index_copy_bounded(x, dd, &ids, &source, p)
                                .unwrap(),
                            &w,
                        )
                    };
                    check_fd(&f, &x, &g.input, &format!("index_copy input {what}"));
                    let f = |s: &ArrayD<f64>| {
                        dot(
                            &crate::ops::bounds::index_copy_bounded(&x, dd, &ids, s, p).unwrap(),
                            &w,
                        )
                    };
                    check_fd(&f, &source, &g.source, &format!("index_copy source {what}"));
                }
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .index_fill(&w, dd, &ids)
                    .unwrap();
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::index_fill_bounded(x, dd, &ids, 0.25, p).unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &x, &g, &format!("index_fill {what}"));
                // put with accumulate
                let pidx = index(&[3], x.len(), &mut seed, wrap);
                let psrc = rand(&[3], &mut seed);
                let g = crate::Options::new()
                    .bounds(p)
                    .grad()
                    .put(&w, &pidx, psrc.raw_dim(), true)
                    .unwrap();
                let f = |x: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::put_bounded(x, &pidx, &psrc, true, p).unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &x, &g.input, &format!("put input {what}"));
                let f = |s: &ArrayD<f64>| {
                    dot(
                        &crate::ops::bounds::put_bounded(&x, &pidx, s, true, p).unwrap(),
                        &w,
                    )
                };
                check_fd(&f, &psrc, &g.source, &format!("put source {what}"));
            }
        }
    }

    #[test]
    fn gradients_reject_the_policy_of_the_other_kind_and_bad_values() {
        let g = array![1.0f32, 2.0];
        let e = crate::Options::new()
            .bounds(OutOfBounds::Drop)
            .grad()
            .gather(&g, 2, 0, &array![0, 1])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = crate::Options::new()
            .bounds(OutOfBounds::Fill(0.0))
            .grad()
            .scatter_add(&g, 0, &array![0], 1)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = crate::Options::new()
            .bounds(OutOfBounds::Wrap)
            .grad()
            .gather(&g, 2, 0, &array![0, 2])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        // A gradient of the wrong shape is an error, not a panic, under Fill too.
        let e = crate::Options::new()
            .bounds(OutOfBounds::Fill(0.0))
            .grad()
            .take_along_dim(
                &array![[1.0f32, 2.0, 3.0]],
                (2, 3),
                &array![[0], [9]],
                Some(1),
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    }
}
