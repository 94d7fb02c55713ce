//! Gradients under [`Options`]: the methods of [`GradOptions`], with the forward's bounds policy
//! and broadcasting, as the CPU library's `gather::grad::GradOptions`.
//!
//! ```text
//! forward  gather(x=[a, b, c], 0, index=[-1, 1, 5]) under policy
//! backward d x for g = [g0, g1, g2]
//!
//!  Clip     [g0, g1, g2]      -1 read x[0], 5 read x[2]
//!  Fill(v)  [0,  g1, 0 ]      filled positions read no element: their gradient goes nowhere
//!
//! scatter_add under Drop: a dropped source wrote nothing, so its gradient is 0.
//! ```
//!
//! The index is mapped under the policy by the forward's own kernel; a read under Fill zeroes
//! the gradient where it filled; a write under Drop sends the dropped positions to one more
//! slice of zeros along the axis (where the forward sent them), cut off afterwards.

use gather::backend::{self, GradOutputOf};
use gather::{OutOfBounds, Reduce, Scalar};

use super::{ScatterGrad, SourceGrad, as_1d_shape, cast, sum_to, widen, zeros};
use crate::error::Result;
use crate::gather::{as_1d, batched_spread, index_operand};
use crate::options::{fill_where, resolve};
use crate::scatter::{copy_of, reshape_like};
use crate::{CudaTensor, Options};

/// A write's gradient on (grad_out, mapped index): the input's, and src's or source's if any.
type WriteGrad<'a> =
    dyn Fn(&CudaTensor, &CudaTensor) -> Result<(CudaTensor, Option<CudaTensor>)> + 'a;

/// [`Options`] for gradients: each method is the gradient of the op of the same name under the
/// options, with the arguments of the function of the same name in [`crate::grad`].
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
/// let gpu = Cuda::new(0)?;
/// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 4.0])?;
/// let i = CudaTensor::from_host(&gpu, &ndarray::array![-1i64, 1, 5])?;
/// let fill = Options::new().bounds(OutOfBounds::Fill(0.0.into())).grad();
/// assert_eq!(fill.gather(&g, &[3], 0, &i)?.to_host::<f32>()?, ndarray::array![0.0f32, 2.0, 0.0].into_dyn());
/// let clip = Options::new().bounds(OutOfBounds::Clip).grad();
/// assert_eq!(clip.gather(&g, &[3], 0, &i)?.to_host::<f32>()?, ndarray::array![1.0f32, 2.0, 4.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradOptions {
    opts: Options,
    parity: super::Parity,
}

impl Options {
    /// The gradients of the ops under these options.
    ///
    /// ```
    /// let go = gather_cuda::Options::new().grad();
    /// assert_eq!(go, gather_cuda::Options::default().grad());
    /// ```
    pub fn grad(self) -> GradOptions {
        GradOptions {
            opts: self,
            parity: super::Parity::Correct,
        }
    }
}

impl GradOptions {
    /// The gradients of `scatter_reduce` and `index_reduce` with the choice of
    /// [`Parity`](super::Parity) (default `Correct`), under the bounds policy as without one, as
    /// the CPU library's `GradOptions::parity`. `Parity::PyTorch` with broadcasting is an error.
    ///
    /// ```
    /// use gather_cuda::{grad::Parity, Options};
    /// let go = Options::new().grad();
    /// assert_ne!(go.parity(Parity::PyTorch), go);
    /// assert_eq!(go.parity(Parity::Correct), go);
    /// ```
    pub fn parity(self, parity: super::Parity) -> Self {
        GradOptions { parity, ..self }
    }

    fn no_broadcast(&self, op: &str) -> Result<()> {
        if self.opts.broadcast {
            return Err(backend::no_broadcast_form(op).into());
        }
        Ok(())
    }

    /// A read's gradient: `run` on `grad_out` (zero where Fill filled; `spread` views the
    /// missing marks over `grad_out`'s positions, or gives `None` where grad_output is not of
    /// the forward output's shape) and the index mapped under the policy.
    fn read(
        &self,
        op: &str,
        grad_out: &CudaTensor,
        index: &CudaTensor,
        (dim, size): (usize, usize),
        spread: &dyn Fn(&CudaTensor, &CudaTensor) -> Result<Option<CudaTensor>>,
        run: &dyn Fn(&CudaTensor, &CudaTensor) -> Result<CudaTensor>,
    ) -> Result<CudaTensor> {
        backend::reads_only(op, &self.opts.bounds)?;
        let index = index_operand(op, "index", index)?;
        let m = resolve(op, &index, dim, size, &self.opts.bounds, 0)?;
        let r = match (&self.opts.bounds, &m.missing) {
            (OutOfBounds::Fill(_), Some(missing)) => match spread(missing, grad_out)? {
                // fill_where reads one mark per position of grad_out.
                Some(marks) if marks.len() == grad_out.len() => {
                    let g = copy_of(grad_out)?;
                    fill_where(&g, &marks, 0)?;
                    run(&g, &m.index)
                }
                // A grad_output the marks do not fit: the plain gradient refuses it, in the
                // words the CPU library's (which also checks it after the policy) uses.
                _ => run(grad_out, &m.index),
            },
            _ => run(grad_out, &m.index),
        };
        super::named(op, r)
    }

    /// A write's gradient: `run` on `grad_out` and the index mapped under the policy (as given
    /// under `OutOfBounds::Error`: then `run` is the plain gradient). Under Drop with a value
    /// out of range, `run` gets `grad_out` with one more slice of zeros along the axis (`None`:
    /// flattened with one more zero), where the dropped writes went; the input's gradient comes
    /// back without it (the reductions extend their input alike, `input_like`).
    fn write(
        &self,
        op: &str,
        grad_out: &CudaTensor,
        axis: Option<isize>,
        index: &CudaTensor,
        run: &WriteGrad<'_>,
    ) -> Result<(CudaTensor, Option<CudaTensor>)> {
        if self.opts.bounds == OutOfBounds::Error {
            return super::named(op, run(grad_out, index));
        }
        backend::writes_only(op, &self.opts.bounds)?;
        let index = index_operand(op, "index", index)?;
        let g1 = as_1d(grad_out);
        let (d, n) = match axis {
            Some(a) => {
                let d = gather::dims::normalize_dim(op, a, g1.ndim())?;
                (d, g1.shape()[d])
            }
            None => (0, grad_out.len()),
        };
        let m = resolve(op, &index, d, n, &self.opts.bounds, n as i64)?;
        if m.missing.is_none() {
            return run(grad_out, &m.index);
        }
        let (gi, rest) = match axis {
            Some(_) => {
                let (gi, rest) = run(&extended(&g1, d)?, &m.index)?;
                (copy_of(&gi.slice_axis(d, 0, n, 1)?)?, rest)
            }
            None => {
                let flat = extended(&grad_out.reshape(&[n])?, 0)?;
                let (gi, rest) = run(&flat, &m.index)?;
                (gi.slice_axis(0, 0, n, 1)?.reshape(&[n])?, rest)
            }
        };
        Ok((reshape_like(gi.reshape(g1.shape())?, grad_out), rest))
    }

    /// [`crate::grad::gather`] under these options (bounds: Error, Wrap, Clip or Fill; with
    /// broadcasting, the gradient of the input as the forward viewed it, summed over the axes
    /// along which it was broadcast).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options};
    /// let gpu = Cuda::new(0)?;
    /// // The [1, 3] table was shared by both index rows: their gradients add up.
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64], [2.0]])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![[2i64], [2]])?;
    /// let dx = Options::new().broadcast(true).grad().gather(&g, &[1, 3], 1, &i)?;
    /// assert_eq!(dx.to_host::<f64>()?, ndarray::array![[0.0, 0.0, 3.0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn gather(
        &self,
        grad_out: &CudaTensor,
        input_shape: &[usize],
        dim: isize,
        index: &CudaTensor,
    ) -> Result<CudaTensor> {
        let broadcast = self.opts.broadcast;
        let plain = |g: &CudaTensor, i: &CudaTensor| match broadcast {
            true => gather_broadcast(g, input_shape, dim, i),
            false => super::gather(g, input_shape, dim, i),
        };
        if self.opts.bounds == OutOfBounds::Error {
            return plain(grad_out, index);
        }
        let op = "grad::gather";
        let d = gather::dims::normalize_dim(op, dim, input_shape.len().max(1))?;
        let size = as_1d_shape(input_shape)[d];
        self.read(
            op,
            grad_out,
            index,
            (d, size),
            &|m, g| match broadcast {
                true => Ok(as_1d(m).broadcast(as_1d(g).shape()).ok()),
                false => Ok(Some(m.clone())),
            },
            &plain,
        )
    }

    /// [`crate::grad::index_select`] under a bounds policy (Error, Wrap, Clip or Fill).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![-1i64, 0])?;
    /// let dx = Options::new().bounds(OutOfBounds::Wrap).grad().index_select(&g, &[3], 0, &i)?;
    /// assert_eq!(dx.to_host::<f32>()?, ndarray::array![2.0f32, 0.0, 1.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_select(
        &self,
        grad_out: &CudaTensor,
        input_shape: &[usize],
        dim: isize,
        index: &CudaTensor,
    ) -> Result<CudaTensor> {
        let op = "grad::index_select";
        self.no_broadcast(op)?;
        if self.opts.bounds == OutOfBounds::Error {
            return super::index_select(grad_out, input_shape, dim, index);
        }
        let d = gather::dims::normalize_dim(op, dim, input_shape.len().max(1))?;
        let size = as_1d_shape(input_shape)[d];
        self.read(
            op,
            grad_out,
            index,
            (d, size),
            // One mark per index value, along dim: only where grad_output has that many there.
            &|m, g| {
                let g1 = as_1d(g);
                Ok((g1.shape().get(d) == Some(&m.len())).then(|| as_1d(m).spread(g1.shape(), d)))
            },
            &|g, i| super::index_select(g, input_shape, dim, i),
        )
    }

    /// [`crate::grad::take`] under a bounds policy (Error, Wrap, Clip or Fill).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![9i64, 0])?;
    /// let dx = Options::new().bounds(OutOfBounds::Clip).grad().take(&g, &[2, 2], &i)?;
    /// assert_eq!(dx.to_host::<f32>()?, ndarray::array![[2.0f32, 0.0], [0.0, 1.0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn take(
        &self,
        grad_out: &CudaTensor,
        input_shape: &[usize],
        index: &CudaTensor,
    ) -> Result<CudaTensor> {
        let op = "grad::take";
        self.no_broadcast(op)?;
        if self.opts.bounds == OutOfBounds::Error {
            return super::take(grad_out, input_shape, index);
        }
        let n = input_shape.iter().product();
        self.read(
            op,
            grad_out,
            index,
            (0, n),
            &|m, _| Ok(Some(m.clone())),
            &|g, i| super::take(g, input_shape, i),
        )
    }

    /// [`crate::grad::take_along_dim`] under a bounds policy (Error, Wrap, Clip or Fill).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f64, 2.0]])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![[3i64, 0]])?;
    /// let fill = Options::new().bounds(OutOfBounds::Fill(9.0.into())).grad();
    /// let dx = fill.take_along_dim(&g, &[1, 2], &i, Some(1))?;
    /// assert_eq!(dx.to_host::<f64>()?, ndarray::array![[2.0, 0.0]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn take_along_dim(
        &self,
        grad_out: &CudaTensor,
        input_shape: &[usize],
        index: &CudaTensor,
        dim: Option<isize>,
    ) -> Result<CudaTensor> {
        let op = "grad::take_along_dim";
        self.no_broadcast(op)?;
        if self.opts.bounds == OutOfBounds::Error {
            return super::take_along_dim(grad_out, input_shape, index, dim);
        }
        let (d, n) = match dim {
            Some(dim) => {
                let d = gather::dims::normalize_dim(op, dim, input_shape.len().max(1))?;
                (d, as_1d_shape(input_shape)[d])
            }
            None => (0, input_shape.iter().product()),
        };
        self.read(
            op,
            grad_out,
            index,
            (d, n),
            &|m, g| match dim {
                Some(_) => Ok(m.broadcast(g.shape()).ok()),
                None => Ok(Some(m.clone())),
            },
            &|g, i| super::take_along_dim(g, input_shape, i, dim),
        )
    }

    /// [`crate::grad::select_batched`] under a bounds policy (Error, Wrap, Clip or Fill).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![[1.0f32], [2.0]])?;
    /// let labels = CudaTensor::from_host(&gpu, &ndarray::array![-1i64, 0])?;
    /// let wrap = Options::new().bounds(OutOfBounds::Wrap).grad();
    /// let dx = wrap.select_batched(&g, &[2, 2, 1], 1, &labels, 1)?;
    /// assert_eq!(dx.to_host::<f32>()?, ndarray::array![[[0.0f32], [1.0]], [[2.0], [0.0]]].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn select_batched(
        &self,
        grad_out: &CudaTensor,
        input_shape: &[usize],
        axis: isize,
        index: &CudaTensor,
        batch_dims: usize,
    ) -> Result<CudaTensor> {
        let op = "grad::select_batched";
        self.no_broadcast(op)?;
        if self.opts.bounds == OutOfBounds::Error {
            return super::select_batched(grad_out, input_shape, axis, index, batch_dims);
        }
        let (a, gather_shape, out_shape) =
            backend::check_select_batched(op, input_shape, axis, index.shape(), batch_dims)?;
        self.read(
            op,
            grad_out,
            index,
            (a, input_shape[a]),
            &|m, g| {
                // The marks as the gather saw the index, over g's elements in its order.
                if g.shape() != out_shape.as_slice() {
                    return Ok(None);
                }
                batched_spread(m, &gather_shape, batch_dims, a).map(Some)
            },
            &|g, i| super::select_batched(g, input_shape, axis, i, batch_dims),
        )
    }

    /// [`crate::grad::scatter_add`] under these options (bounds: Error, Wrap, Clip or Drop;
    /// with broadcasting, src's gradient summed over the axes along which it was broadcast).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![1i64, 7])?;
    /// let r = Options::new().bounds(OutOfBounds::Drop).grad().scatter_add(&g, 0, &i, &[2])?;
    /// assert_eq!(r.src.to_host::<f32>()?, ndarray::array![2.0f32, 0.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter_add(
        &self,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src_shape: &[usize],
    ) -> Result<ScatterGrad> {
        self.scatter_like("grad::scatter_add", grad_out, dim, index, src_shape, false)
    }

    /// [`crate::grad::scatter`] (the src form) under these options (bounds: Error, Wrap, Clip or
    /// Drop; broadcasting as [`GradOptions::scatter_add`]).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![-1i64])?;
    /// let r = Options::new().bounds(OutOfBounds::Wrap).grad().scatter(&g, 0, &i, &[1])?;
    /// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![1.0f32, 2.0, 0.0].into_dyn());
    /// assert_eq!(r.src.to_host::<f32>()?, ndarray::array![3.0f32].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn scatter(
        &self,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src_shape: &[usize],
    ) -> Result<ScatterGrad> {
        self.scatter_like("grad::scatter", grad_out, dim, index, src_shape, true)
    }

    fn scatter_like(
        &self,
        op: &str,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src_shape: &[usize],
        set: bool,
    ) -> Result<ScatterGrad> {
        let broadcast = self.opts.broadcast;
        let plain = |g: &CudaTensor, i: &CudaTensor| -> Result<(CudaTensor, Option<CudaTensor>)> {
            let r = match (broadcast, set) {
                (true, _) => scatter_broadcast(g, dim, i, src_shape, set)?,
                (false, true) => super::scatter(g, dim, i, src_shape)?,
                (false, false) => super::scatter_add(g, dim, i, src_shape)?,
            };
            Ok((r.input, Some(r.src)))
        };
        let (input, src) = self.write(op, grad_out, Some(dim), index, &plain)?;
        Ok(ScatterGrad {
            input,
            src: src.expect("the scatters give a src gradient"),
        })
    }

    /// [`crate::grad::scatter_reduce`] under these options (bounds: Error, Wrap, Clip or Drop;
    /// broadcasting as [`GradOptions::scatter_add`]). The forward's result is recomputed under the
    /// same options.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Reduce};
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 5, 0])?;
    /// let s = CudaTensor::from_host(&gpu, &ndarray::array![4.0f64, 9.0, 7.0])?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0])?;
    /// let drop = Options::new().bounds(OutOfBounds::Drop).grad();
    /// let r = drop.scatter_reduce(&g, &x, 0, &i, &s, Reduce::Amax, true)?;
    /// assert_eq!(r.src.to_host::<f64>()?, ndarray::array![0.0, 0.0, 1.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_reduce(
        &self,
        grad_out: &CudaTensor,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        src: &CudaTensor,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<ScatterGrad> {
        let op = "grad::scatter_reduce";
        let (broadcast, parity) = (self.opts.broadcast, self.parity);
        if broadcast && parity == super::Parity::PyTorch {
            return Err(backend::no_broadcast_parity(op).into());
        }
        backend::check_grad_output(op, GradOutputOf::Input, grad_out.shape(), input.shape())?;
        let strict = |g: &CudaTensor, i: &CudaTensor| -> Result<(CudaTensor, Option<CudaTensor>)> {
            let x = input_like(input, g, dim)?;
            let fwd = Options::new().broadcast(broadcast);
            let out = fwd.scatter_reduce(&x, dim, i, src, reduce, include_self)?;
            let r = match broadcast {
                true => scatter_reduce_broadcast(g, &x, dim, i, src, reduce, include_self, &out)?,
                false => super::scatter_reduce_with(
                    g,
                    &x,
                    dim,
                    i,
                    src,
                    reduce,
                    include_self,
                    &out,
                    parity,
                )?,
            };
            Ok((r.input, Some(r.src)))
        };
        let (input, src) = self.write(op, grad_out, Some(dim), index, &strict)?;
        Ok(ScatterGrad {
            input,
            src: src.expect("scatter_reduce gives a src gradient"),
        })
    }

    /// [`crate::grad::index_reduce_with`] (with [`GradOptions::parity`]) under a bounds policy
    /// (Error, Wrap, Clip or Drop); the forward's result is recomputed under the same policy.
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Reduce};
    /// let gpu = Cuda::new(0)?;
    /// let x = CudaTensor::from_host(&gpu, &ndarray::array![2.0f64, 1.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![-2i64, 0])?;
    /// let s = CudaTensor::from_host(&gpu, &ndarray::array![3.0f64, 4.0])?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f64, 1.0])?;
    /// let wrap = Options::new().bounds(OutOfBounds::Wrap).grad();
    /// let r = wrap.index_reduce(&g, &x, 0, &i, &s, Reduce::Prod, true)?;
    /// assert_eq!(r.source.to_host::<f64>()?, ndarray::array![8.0, 6.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn index_reduce(
        &self,
        grad_out: &CudaTensor,
        input: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source: &CudaTensor,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<SourceGrad> {
        let op = "grad::index_reduce";
        self.no_broadcast(op)?;
        backend::check_grad_output(op, GradOutputOf::Input, grad_out.shape(), input.shape())?;
        let strict = |g: &CudaTensor, i: &CudaTensor| -> Result<(CudaTensor, Option<CudaTensor>)> {
            let x = input_like(input, g, dim)?;
            let out = crate::index_reduce(&x, dim, i, source, reduce, include_self)?;
            let r = super::index_reduce_with(
                g,
                &x,
                dim,
                i,
                source,
                reduce,
                include_self,
                &out,
                self.parity,
            )?;
            Ok((r.input, Some(r.source)))
        };
        let (input, source) = self.write(op, grad_out, Some(dim), index, &strict)?;
        Ok(SourceGrad {
            input,
            source: source.expect("index_reduce gives a source gradient"),
        })
    }

    /// [`crate::grad::index_add`] under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds, Scalar};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![4i64, 1])?;
    /// let drop = Options::new().bounds(OutOfBounds::Drop).grad();
    /// let r = drop.index_add(&g, 0, &i, &[2], Scalar::Int(3))?;
    /// assert_eq!(r.source.to_host::<f32>()?, ndarray::array![0.0f32, 6.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_add(
        &self,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source_shape: &[usize],
        alpha: Scalar,
    ) -> Result<SourceGrad> {
        self.source_write("grad::index_add", grad_out, Some(dim), index, &|g, i| {
            let r = super::index_add(g, dim, i, source_shape, alpha)?;
            Ok((r.input, Some(r.source)))
        })
    }

    /// [`crate::grad::index_copy`] under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![5i64])?;
    /// let r = Options::new().bounds(OutOfBounds::Clip).grad().index_copy(&g, 0, &i, &[1])?;
    /// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![1.0f32, 2.0, 0.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_copy(
        &self,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
        source_shape: &[usize],
    ) -> Result<SourceGrad> {
        self.source_write("grad::index_copy", grad_out, Some(dim), index, &|g, i| {
            let r = super::index_copy(g, dim, i, source_shape)?;
            Ok((r.input, Some(r.source)))
        })
    }

    /// [`crate::grad::index_fill`] under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0, 3.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![-3i64])?;
    /// let dx = Options::new().bounds(OutOfBounds::Wrap).grad().index_fill(&g, 0, &i)?;
    /// assert_eq!(dx.to_host::<f32>()?, ndarray::array![0.0f32, 2.0, 3.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn index_fill(
        &self,
        grad_out: &CudaTensor,
        dim: isize,
        index: &CudaTensor,
    ) -> Result<CudaTensor> {
        let op = "grad::index_fill";
        self.no_broadcast(op)?;
        let run = |g: &CudaTensor, i: &CudaTensor| Ok((super::index_fill(g, dim, i)?, None));
        Ok(self.write(op, grad_out, Some(dim), index, &run)?.0)
    }

    /// [`crate::grad::put`] under a bounds policy (Error, Wrap, Clip or Drop).
    ///
    /// ```no_run
    /// use gather_cuda::{Cuda, CudaTensor, Options, OutOfBounds};
    /// let gpu = Cuda::new(0)?;
    /// let g = CudaTensor::from_host(&gpu, &ndarray::array![1.0f32, 2.0])?;
    /// let i = CudaTensor::from_host(&gpu, &ndarray::array![0i64, 9])?;
    /// let drop = Options::new().bounds(OutOfBounds::Drop).grad();
    /// let r = drop.put(&g, &i, &[2], false)?;
    /// assert_eq!(r.input.to_host::<f32>()?, ndarray::array![0.0f32, 2.0].into_dyn());
    /// assert_eq!(r.source.to_host::<f32>()?, ndarray::array![1.0f32, 0.0].into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn put(
        &self,
        grad_out: &CudaTensor,
        index: &CudaTensor,
        source_shape: &[usize],
        accumulate: bool,
    ) -> Result<SourceGrad> {
        self.source_write("grad::put", grad_out, None, index, &|g, i| {
            let r = super::put(g, i, source_shape, accumulate)?;
            Ok((r.input, Some(r.source)))
        })
    }

    fn source_write(
        &self,
        op: &str,
        grad_out: &CudaTensor,
        axis: Option<isize>,
        index: &CudaTensor,
        run: &WriteGrad<'_>,
    ) -> Result<SourceGrad> {
        self.no_broadcast(op)?;
        let (input, source) = self.write(op, grad_out, axis, index, run)?;
        Ok(SourceGrad {
            input,
            source: source.expect("the op gives a source gradient"),
        })
    }
}

/// `t` (at least 1-d) with one more slice of zeros along `d`.
fn extended(t: &CudaTensor, d: usize) -> Result<CudaTensor> {
    let mut shape = t.shape().to_vec();
    let n = shape[d];
    shape[d] += 1;
    let out = zeros(t, &shape)?;
    out.slice_axis(d, 0, n, 1)?.assign(t)?;
    Ok(out)
}

/// The input as a gradient `g` sees it: itself, or under Drop extended by the scratch slice
/// (its value does not matter: the scratch slice's gradient is cut off).
fn input_like(input: &CudaTensor, g: &CudaTensor, dim: isize) -> Result<CudaTensor> {
    if g.shape() == input.shape() {
        return Ok(input.clone());
    }
    let x = as_1d(input);
    let d = gather::dims::normalize_dim("grad::scatter_reduce", dim, x.ndim())?;
    extended(&x, d)
}

/// The gradient of a broadcasting gather: gather's into the input as the forward viewed it
/// (broadcast to the output's shape off `dim`), summed down to the input's shape.
fn gather_broadcast(
    grad_out: &CudaTensor,
    input_shape: &[usize],
    dim: isize,
    index: &CudaTensor,
) -> Result<CudaTensor> {
    let op = "grad::gather_broadcast";
    let x1 = as_1d_shape(input_shape);
    let d = gather::dims::normalize_dim(op, dim, x1.len())?;
    let index = index_operand(op, "index", index)?;
    let idx = as_1d(&index);
    let (out_shape, x_shape) = backend::broadcast_gather_shapes(op, &x1, idx.shape(), d)?;
    let g = as_1d(grad_out);
    backend::check_grad_output(op, GradOutputOf::GatherBroadcast, g.shape(), &out_shape)?;
    let w = widen(op, &g)?;
    let wide = if out_shape.contains(&0) {
        zeros(&w, &x_shape)?
    } else {
        crate::scatter_add(
            &zeros(&w, &x_shape)?,
            d as isize,
            &idx.broadcast(&out_shape)?,
            &w,
        )?
    };
    let dx = sum_to(&wide, &x1)?.reshape(input_shape)?;
    cast(&dx, grad_out.dtype())
}

/// The gradients of a broadcasting scatter (`set`) or scatter_add: the input's as without
/// broadcasting; src's gathered at the index expanded to the extent, summed down to src's shape.
fn scatter_broadcast(
    grad_out: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src_shape: &[usize],
    set: bool,
) -> Result<ScatterGrad> {
    let op = if set {
        "grad::scatter_broadcast"
    } else {
        "grad::scatter_add_broadcast"
    };
    let g = as_1d(grad_out);
    let d = gather::dims::normalize_dim(op, dim, g.ndim())?;
    let index = index_operand(op, "index", index)?;
    let idx = as_1d(&index);
    let s1 = as_1d_shape(src_shape);
    let e = backend::broadcast_scatter_extent(op, g.shape(), idx.shape(), Some(&s1), d)?;
    let w = widen(op, grad_out)?;
    if e.contains(&0) {
        return Ok(ScatterGrad {
            input: copy_of(grad_out)?,
            src: cast(&zeros(&w, src_shape)?, grad_out.dtype())?,
        });
    }
    let ib = idx.broadcast(&e)?;
    let input = match set {
        true => reshape_like(
            crate::scatter(&g, d as isize, &ib, Scalar::Int(0))?,
            grad_out,
        ),
        false => copy_of(grad_out)?,
    };
    let picked = crate::gather(&as_1d(&w), d as isize, &ib)?;
    let src = cast(&sum_to(&picked, &s1)?.reshape(src_shape)?, grad_out.dtype())?;
    Ok(ScatterGrad { input, src })
}

/// The gradients of a broadcasting scatter_reduce: the plain ones with the index and src
/// expanded to the extent (in the wide type), src's summed down to its shape.
#[allow(clippy::too_many_arguments)]
fn scatter_reduce_broadcast(
    grad_out: &CudaTensor,
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
    reduce: Reduce,
    include_self: bool,
    result: &CudaTensor,
) -> Result<ScatterGrad> {
    let op = "grad::scatter_reduce_broadcast";
    let x = as_1d(input);
    let d = gather::dims::normalize_dim(op, dim, x.ndim())?;
    let index = index_operand(op, "index", index)?;
    let idx = as_1d(&index);
    let s1 = as_1d(src);
    let e = backend::broadcast_scatter_extent(op, x.shape(), idx.shape(), Some(s1.shape()), d)?;
    let (gw, xw, rw, sw) = (
        widen(op, grad_out)?,
        widen(op, input)?,
        widen(op, result)?,
        widen(op, &s1)?,
    );
    let r = super::scatter_reduce(
        &gw,
        &xw,
        dim,
        &idx.broadcast(&e)?,
        &sw.broadcast(&e)?,
        reduce,
        include_self,
        &rw,
    )?;
    let ds = sum_to(&r.src, s1.shape())?.reshape(src.shape())?;
    Ok(ScatterGrad {
        input: cast(&r.input, grad_out.dtype())?,
        src: cast(&ds, src.dtype())?,
    })
}
