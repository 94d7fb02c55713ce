//! Bounds policies: what an op does with an index value outside the dimension it indexes, chosen
//! per call and the same for the forward and its gradient ([`crate::grad::GradOptions`]).
//!
//! ```text
//! gather_bounded(input=[10, 20, 30], dim=0, index=[-1, 1, 5], policy)
//!
//!  policy      valid values     -1          1      5          out
//!  Error       0..3 (PyTorch)   error                         Err(IndexOutOfBounds)
//!  Wrap        -3..3            → 2 (30)    → 20   error      Err(IndexOutOfBounds)
//!  Clip        any              → 0 (10)    → 20   → 2 (30)   [10, 20, 30]
//!  Fill(0)     0..3, else fill  → 0         → 20   → 0        [0, 20, 0]
//!
//! scatter_add_bounded(input=[0, 0, 0], dim=0, index=[-1, 1, 5], src=[1, 2, 4], Drop)
//!                                skipped     → +2   skipped    [0, 2, 0]
//! ```
//!
//! | policy | reads (gather, take_along_dim, index_select, take, select_batched) | writes (scatter, scatter_add, scatter_reduce, index_add/copy/fill/reduce, put) | gradient |
//! |---|---|---|---|
//! | [`OutOfBounds::Error`] (default) | PyTorch's rule for the op (take wraps `-n..n`, take_along_dim with a dim wraps modulo `n`, the rest want `0..n`) | PyTorch's (put and index_fill wrap `-n..n`, the rest want `0..n`) | the op's |
//! | [`OutOfBounds::Wrap`] | `-n..n`, negatives count from the end (NumPy, ONNX); others are errors | same | to the wrapped element |
//! | [`OutOfBounds::Clip`] | clamped into `0..n`: negatives read element 0, large values element `n-1` (NumPy's and JAX's `clip`) | same | to the clamped element |
//! | [`OutOfBounds::Fill`]`(v)` | `0..n` read normally, everything else (negatives included) reads `v` (TF/JAX `fill`, the `-1` padding idiom) | InvalidArgument | zero for filled positions |
//! | [`OutOfBounds::Drop`] | InvalidArgument | `0..n` write normally, everything else is skipped (JAX `drop`) | zero for dropped sources |
//!
//! Clip and Fill need at least one element to read: on a dimension of size 0 a non-empty index
//! is an error under every policy. In-place forms stay atomic: every check runs before the first
//! write.
//!
//! How it runs: the index values are mapped once into `0..n` (only the distinct elements of a
//! stride-0 broadcast index), then the op's own kernel runs; Fill writes the fill value over the
//! filled positions afterwards, and Drop routes the dropped writes to one extra scratch slice of
//! a copy of the destination (so every reduction, `include_self` and `mean` included, sees
//! exactly the kept writes). Drop thus costs one copy of the destination when some value is out
//! of range, and nothing extra when none is.

use ndarray::{
    Array, ArrayBase, ArrayD, ArrayView, ArrayViewMut, Axis, Data, DataMut, Dimension, IxDyn, Slice,
};

use crate::dims::normalize_dim;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::index::{Bounds, IndexElem, check_bounds, out_of_bounds_error};
use crate::ops::scatter::Reduce;

/// What an op does with an index value outside the dimension it indexes. `T` is the element
/// type (for `Fill`). See the [module docs](self) for the table.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let x = array![10, 20, 30];
/// let idx = array![-1, 1, 5];
/// assert!(gather::Options::new().bounds(OutOfBounds::Error).gather(&x, 0, &idx).is_err());
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Clip).gather(&x, 0, &idx)?, array![10, 20, 30]);
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Fill(0)).gather(&x, 0, &idx)?, array![0, 20, 0]);
/// assert_eq!(OutOfBounds::<i32>::default(), OutOfBounds::Error);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum OutOfBounds<T> {
    /// PyTorch's behaviour: an error naming the value and its position (the default).
    #[default]
    Error,
    /// Negative values count from the end (`-1` is the last); values outside `-n..n` are errors.
    Wrap,
    /// Values are clamped into `0..n` (negatives to 0).
    Clip,
    /// Reads only: positions whose value is outside `0..n` read this value.
    Fill(T),
    /// Writes only: writes whose value is outside `0..n` are skipped.
    Drop,
}

impl<T> OutOfBounds<T> {
    /// The policy's name (`error`, `wrap`, `clip`, `fill`, `drop`).
    ///
    /// ```
    /// assert_eq!(gather::OutOfBounds::<f32>::Fill(0.0).name(), "fill");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            OutOfBounds::Error => "error",
            OutOfBounds::Wrap => "wrap",
            OutOfBounds::Clip => "clip",
            OutOfBounds::Fill(_) => "fill",
            OutOfBounds::Drop => "drop",
        }
    }

    /// The same policy for another element type (a `Fill` value is converted by `f`).
    ///
    /// ```
    /// use gather::OutOfBounds;
    /// assert_eq!(OutOfBounds::Fill(1.5f64).map(|v| v as f32), OutOfBounds::Fill(1.5f32));
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> OutOfBounds<U> {
        match self {
            OutOfBounds::Error => OutOfBounds::Error,
            OutOfBounds::Wrap => OutOfBounds::Wrap,
            OutOfBounds::Clip => OutOfBounds::Clip,
            OutOfBounds::Fill(v) => OutOfBounds::Fill(f(v)),
            OutOfBounds::Drop => OutOfBounds::Drop,
        }
    }
}

/// An index mapped into `0..n` under a policy. Stride-0 axes of the original stay stride 0: only
/// the distinct values are stored.
pub(crate) struct Resolved {
    compact: ArrayD<i64>,
    missing: Option<ArrayD<bool>>,
    shape: Vec<usize>,
}

impl Resolved {
    /// The mapped index, with the original's shape.
    pub(crate) fn index(&self) -> ArrayView<'_, i64, IxDyn> {
        self.compact
            .broadcast(IxDyn(&self.shape))
            .expect("collapsed axes broadcast back")
    }

    /// Where the original value was outside `0..n` (Fill and Drop), if anywhere.
    pub(crate) fn missing(&self) -> Option<ArrayView<'_, bool, IxDyn>> {
        self.missing.as_ref().map(|m| {
            m.broadcast(IxDyn(&self.shape))
                .expect("collapsed axes broadcast back")
        })
    }
}

pub(crate) fn reads_only<T>(op: &str, policy: &OutOfBounds<T>) -> Result<()> {
    if matches!(policy, OutOfBounds::Drop) {
        return Err(Error::invalid(format!(
            "{op}: the Drop policy is for writes, but {op} reads"
        ))
        .with_hint("a read must produce a value at every position: use OutOfBounds::Fill(value) to read a value for out-of-range indices, or OutOfBounds::Clip"));
    }
    Ok(())
}

pub(crate) fn writes_only<T>(op: &str, policy: &OutOfBounds<T>) -> Result<()> {
    if matches!(policy, OutOfBounds::Fill(_)) {
        return Err(Error::invalid(format!(
            "{op}: the Fill policy is for reads, but {op} writes"
        ))
        .with_hint("a write has no value to fill in: use OutOfBounds::Drop to skip out-of-range writes, or OutOfBounds::Clip"));
    }
    Ok(())
}

/// Maps `index` (for a dimension `dim` of `size`) into `0..size` under `policy` (not `Error`);
/// values Fill/Drop treat as missing become `placeholder`.
pub(crate) fn resolve<T: Copy, I: IndexElem>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    size: usize,
    policy: &OutOfBounds<T>,
    placeholder: i64,
) -> Result<Resolved> {
    // The fill value plays no part here: the body is compiled per index type only.
    resolve_index(op, index, dim, size, policy.map(|_| ()), placeholder)
}

fn resolve_index<I: IndexElem>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    size: usize,
    policy: OutOfBounds<()>,
    placeholder: i64,
) -> Result<Resolved> {
    let mut v = index.view();
    for ax in 0..v.ndim() {
        if v.strides()[ax] == 0 && v.shape()[ax] > 1 {
            v.collapse_axis(Axis(ax), 0);
        }
    }
    let n = size as i64;
    if size == 0 && !v.is_empty() && !matches!(policy, OutOfBounds::Drop) {
        let (value, coord) = v
            .indexed_iter()
            .next()
            .map(|(c, x)| (x.to_i64(), c.slice().to_vec()))
            .expect("non-empty");
        return Err(empty_dim_error(op, value, coord, dim));
    }
    let (compact, missing) = match policy {
        OutOfBounds::Error | OutOfBounds::Wrap => {
            check_bounds(op, &v, dim, size, Bounds::Wrap)?;
            (
                crate::kernels::zip::map(&v, |x| {
                    let x = x.to_i64();
                    if x < 0 { x + n } else { x }
                }),
                None,
            )
        }
        OutOfBounds::Clip => (
            crate::kernels::zip::map(&v, |x| x.to_i64().clamp(0, (n - 1).max(0))),
            None,
        ),
        OutOfBounds::Fill(_) | OutOfBounds::Drop => {
            let inside = |x: i64| x >= 0 && x < n;
            let missing = crate::kernels::zip::map(&v, |x| !inside(x.to_i64()));
            let any = missing.iter().any(|&m| m);
            (
                crate::kernels::zip::map(&v, |x| {
                    let x = x.to_i64();
                    if inside(x) { x } else { placeholder }
                }),
                any.then_some(missing),
            )
        }
    };
    Ok(Resolved {
        compact,
        missing,
        shape: index.shape().to_vec(),
    })
}

/// The error for a non-empty index into an empty dimension under a policy other than Drop.
pub(crate) fn empty_dim_error(op: &str, value: i64, coord: Vec<usize>, dim: usize) -> Error {
    out_of_bounds_error(op, value, coord, dim, 0, Bounds::Strict).with_hint(format!(
        "dimension {dim} is empty: there is no element to read, wrap or clip to, under any policy but Drop"
    ))
}

/// How the positions of an index map onto the positions of a read's output.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Layout {
    /// One output element per index element, both in row-major order (gather, take, flat
    /// take_along_dim).
    Same,
    /// The index broadcasts to the output's shape (take_along_dim with a dim).
    Broadcast,
    /// Index element `j` gives the slice `j` of the output along `dim` (index_select).
    Lanes(usize),
    /// select_batched: index `[b.., k..]` gives the output slice with those coordinates at axes
    /// `0..b` and `axis..axis + k`.
    Batched { axis: usize, b: usize },
}

/// Writes `value` at the output positions of the `missing` index positions. An `out` whose shape
/// does not fit the layout (a gradient of the wrong shape, rejected later) is left as it is.
pub(crate) fn fill_missing<T: Copy>(
    out: &mut ArrayViewMut<'_, T, IxDyn>,
    missing: &ArrayView<'_, bool, IxDyn>,
    layout: Layout,
    value: T,
) {
    match layout {
        Layout::Same => {
            for (o, &m) in out.iter_mut().zip(missing.iter()) {
                if m {
                    *o = value;
                }
            }
        }
        Layout::Broadcast => {
            let Some(m) = missing.broadcast(out.raw_dim()) else {
                return;
            };
            crate::kernels::zip::zip2(out, &m, |o, &m| {
                if m {
                    *o = value;
                }
            });
        }
        Layout::Lanes(d) => {
            if out.ndim() == 0 {
                if missing.iter().any(|&m| m) {
                    out.fill(value);
                }
                return;
            }
            for (j, &m) in missing.iter().enumerate() {
                if m && d < out.ndim() && j < out.shape()[d] {
                    out.index_axis_mut(Axis(d), j).fill(value);
                }
            }
        }
        Layout::Batched { axis, b } => {
            let k = missing.ndim() - b;
            for (c, &m) in missing.indexed_iter() {
                let c = c.slice();
                let fits = (0..b).all(|a| a < out.ndim() && c[a] < out.shape()[a])
                    && (0..k).all(|j| axis + j < out.ndim() && c[b + j] < out.shape()[axis + j]);
                if !m || !fits {
                    continue;
                }
                out.slice_each_axis_mut(|ad| {
                    let a = ad.axis.index();
                    if a < b {
                        Slice::from(c[a]..c[a] + 1)
                    } else if a >= axis && a < axis + k {
                        let cc = c[b + a - axis];
                        Slice::from(cc..cc + 1)
                    } else {
                        Slice::from(..)
                    }
                })
                .fill(value);
            }
        }
    }
}

/// The dim and size an axis-wise op indexes (a 0-d array counts as 1-d).
pub(crate) fn dim_size(op: &str, shape: &[usize], dim: isize) -> Result<(usize, usize)> {
    let d = normalize_dim(op, dim, shape.len().max(1))?;
    Ok((d, shape.get(d).copied().unwrap_or(1)))
}

pub(crate) fn into_dim<T, D: Dimension>(a: ArrayD<T>) -> Array<T, D> {
    a.into_dimensionality::<D>()
        .expect("the output has the documented rank")
}

// ---------------------------------------------------------------------------------------------
// Reads

/// [`gather()`](crate::gather()) under a bounds policy (Error, Wrap, Clip or Fill).
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// // -1 marks padding: Fill reads 0.0 there.
/// let emb = array![[0.5f32, 1.0], [2.0, 4.0]];
/// let idx = array![[1, -1], [0, 1]];
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Fill(0.0)).gather(&emb, 1, &idx)?, array![[1.0, 0.0], [2.0, 4.0]]);
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Wrap).gather(&emb, 1, &idx)?, array![[1.0, 1.0], [2.0, 4.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn gather_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    policy: OutOfBounds<T>,
) -> Result<Array<T, DI>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "gather";
    if let OutOfBounds::Error = policy {
        return crate::gather(input, dim, index);
    }
    reads_only(op, &policy)?;
    let (d, n) = dim_size(op, input.shape(), dim)?;
    let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
    let mut out = crate::gather(input, dim, &r.index())?;
    if let (OutOfBounds::Fill(v), Some(m)) = (policy, r.missing()) {
        fill_missing(&mut out.view_mut(), &m, Layout::Same, v);
    }
    Ok(into_dim(out))
}

/// [`take_along_dim()`](crate::take_along_dim()) under a bounds policy (Error, Wrap, Clip or
/// Fill). Under Error, PyTorch wraps values modulo the size when a dim is given and wants `0..n`
/// without one; the other policies follow the table of the [module docs](self).
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let x = array![[10, 20, 30], [40, 50, 60]];
/// let idx = array![[2], [7]];
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Clip).take_along_dim(&x, &idx, Some(1))?, array![[30], [60]].into_dyn());
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Fill(-1)).take_along_dim(&x, &idx, Some(1))?, array![[30], [-1]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn take_along_dim_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    dim: Option<isize>,
    policy: OutOfBounds<T>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "take_along_dim";
    if let OutOfBounds::Error = policy {
        return crate::take_along_dim(input, index, dim);
    }
    reads_only(op, &policy)?;
    let (d, n, layout) = match dim {
        Some(dim) => {
            let (d, n) = dim_size(op, input.shape(), dim)?;
            (d, n, Layout::Broadcast)
        }
        None => (0, input.len(), Layout::Same),
    };
    let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
    let mut out = crate::take_along_dim(input, &r.index(), dim)?;
    if let (OutOfBounds::Fill(v), Some(m)) = (policy, r.missing()) {
        fill_missing(&mut out.view_mut(), &m, layout, v);
    }
    Ok(out)
}

/// [`index_select()`](crate::index_select()) under a bounds policy (Error, Wrap, Clip or Fill).
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let table = array![[1.0f32, 1.0], [2.0, 2.0], [3.0, 3.0]];
/// let ids = array![2, -1, 0];
/// let out = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).index_select(&table, 0, &ids)?;
/// assert_eq!(out, array![[3.0, 3.0], [0.0, 0.0], [1.0, 1.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_select_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "index_select";
    if let OutOfBounds::Error = policy {
        return crate::index_select(input, dim, index);
    }
    reads_only(op, &policy)?;
    let (d, n) = dim_size(op, input.shape(), dim)?;
    let r = resolve(op, &index.view().into_dyn(), d, n, &policy, 0)?;
    let mut out = crate::index_select(input, dim, &r.index())?;
    if let (OutOfBounds::Fill(v), Some(m)) = (policy, r.missing()) {
        fill_missing(&mut out.view_mut().into_dyn(), &m, Layout::Lanes(d), v);
    }
    Ok(out)
}

/// [`take()`](crate::take()) under a bounds policy (Error, Wrap, Clip or Fill), over the
/// flattened input. Under Error, PyTorch already wraps `-n..n`; Fill treats negatives as missing.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Clip).take(&x, &array![0, 9, -1])?, array![1, 4, 1]);
/// assert_eq!(gather::Options::new().bounds(OutOfBounds::Fill(0)).take(&x, &array![0, 9, -1])?, array![1, 0, 0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn take_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    policy: OutOfBounds<T>,
) -> Result<Array<T, DI>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "take";
    if let OutOfBounds::Error = policy {
        return crate::take(input, index);
    }
    reads_only(op, &policy)?;
    let r = resolve(op, &index.view().into_dyn(), 0, input.len(), &policy, 0)?;
    let mut out = crate::take(input, &r.index())?;
    if let (OutOfBounds::Fill(v), Some(m)) = (policy, r.missing()) {
        fill_missing(&mut out.view_mut(), &m, Layout::Same, v);
    }
    Ok(into_dim(out))
}

/// [`select_batched()`](crate::select_batched()) under a bounds policy (Error, Wrap, Clip or
/// Fill).
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// // Token logits [B, L, V] with labels [B, L]; -100 marks ignored tokens (PyTorch's ignore_index).
/// let logits = array![[[0.1f32, 0.9], [0.6, 0.4]]];
/// let labels = array![[1, -100]];
/// let picked = gather::Options::new().bounds(OutOfBounds::Fill(0.0)).select_batched(&logits, -1, &labels, 2)?;
/// assert_eq!(picked, array![[0.9, 0.0]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn select_batched_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    axis: isize,
    index: &ArrayBase<SI, DI>,
    batch_dims: usize,
    policy: OutOfBounds<T>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "select_batched";
    if let OutOfBounds::Error = policy {
        return crate::select_batched(input, axis, index, batch_dims);
    }
    reads_only(op, &policy)?;
    let p = super::select::plan(op, input.shape(), axis, index.shape(), batch_dims)?;
    let n = input.shape()[p.axis];
    let r = resolve(op, &index.view().into_dyn(), p.axis, n, &policy, 0)?;
    let mut out = crate::select_batched(input, axis, &r.index(), batch_dims)?;
    if let (OutOfBounds::Fill(v), Some(m)) = (policy, r.missing()) {
        let layout = Layout::Batched {
            axis: p.axis,
            b: batch_dims,
        };
        fill_missing(&mut out.view_mut(), &m, layout, v);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Writes

/// Runs the write `f` on `dst` with the index mapped under `policy` (not `Error`). `axis` is the
/// indexed dim, `None` for the flat index of `put`. Under Drop with some value out of range, `f`
/// runs on a copy of `dst` with one scratch slice more along the axis, which receives the dropped
/// writes; `dst` gets the rest only when `f` succeeds.
pub(crate) fn write_bounded<T, I, F>(
    op: &str,
    dst: ArrayViewMut<'_, T, IxDyn>,
    axis: Option<isize>,
    index: ArrayView<'_, I, IxDyn>,
    policy: &OutOfBounds<T>,
    f: F,
) -> Result<()>
where
    T: Element,
    I: IndexElem,
    F: FnOnce(&mut ArrayViewMut<'_, T, IxDyn>, &ArrayView<'_, i64, IxDyn>) -> Result<()>,
{
    // The body is compiled once per element and index type, not once per op: it takes the op as
    // a trait object.
    let mut f = Some(f);
    write_bounded_dyn(op, dst, axis, index, policy, &mut |d, i| {
        f.take().expect("the write runs once")(d, i)
    })
}

#[allow(clippy::type_complexity)]
fn write_bounded_dyn<T: Element, I: IndexElem>(
    op: &str,
    mut dst: ArrayViewMut<'_, T, IxDyn>,
    axis: Option<isize>,
    index: ArrayView<'_, I, IxDyn>,
    policy: &OutOfBounds<T>,
    f: &mut dyn FnMut(&mut ArrayViewMut<'_, T, IxDyn>, &ArrayView<'_, i64, IxDyn>) -> Result<()>,
) -> Result<()> {
    writes_only(op, policy)?;
    let (d, n) = match axis {
        Some(a) => dim_size(op, dst.shape(), a)?,
        None => (0, dst.len()),
    };
    let r = resolve(op, &index, d, n, policy, n as i64)?;
    if r.missing.is_none() {
        return f(&mut dst, &r.index());
    }
    match axis {
        Some(_) => {
            let mut dst1 = if dst.ndim() == 0 {
                dst.insert_axis(Axis(0))
            } else {
                dst
            };
            let mut ext = extend_axis(&dst1.view(), d, T::default())?;
            f(&mut ext.view_mut(), &r.index())?;
            crate::kernels::copy::assign(&mut dst1, &ext.slice_axis(Axis(d), Slice::from(0..n)));
        }
        None => {
            let mut flat = crate::kernels::copy::copy_into(&dst.view(), super::try_vec(op, n + 1)?);
            flat.push(T::default());
            let mut ext = ArrayD::from_shape_vec(IxDyn(&[n + 1]), flat).expect("n + 1 elements");
            f(&mut ext.view_mut(), &r.index())?;
            let back =
                ArrayView::from_shape(dst.raw_dim(), &ext.as_slice().expect("contiguous")[..n])
                    .expect("n elements");
            crate::kernels::copy::assign(&mut dst, &back);
        }
    }
    Ok(())
}

/// `a` with one more slice of `fill` at the end of axis `d`.
pub(crate) fn extend_axis<T: crate::kernels::words::Plain>(
    a: &ArrayView<'_, T, IxDyn>,
    d: usize,
    fill: T,
) -> Result<ArrayD<T>> {
    let mut shape = a.shape().to_vec();
    shape[d] += 1;
    let n = shape.iter().product::<usize>();
    super::try_vec::<T>("bounds", n)?;
    let mut ext = ArrayD::from_elem(IxDyn(&shape), fill);
    crate::kernels::copy::assign(
        &mut ext.slice_axis_mut(Axis(d), Slice::from(0..a.shape()[d])),
        a,
    );
    Ok(ext)
}

// One in-place and one out-of-place form per write op.

/// [`index_add_inplace()`](crate::index_add_inplace()) under a bounds policy (Error, Wrap, Clip or Drop; Fill
/// is an error for a write). The same checks as the op run before the first write.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let mut x = array![[0, 0], [0, 0]];
/// gather::Options::new().bounds(OutOfBounds::Wrap).index_add_inplace(&mut x, 0, &array![1, -1], &array![[1, 1], [2, 2]], 1)?;
/// assert_eq!(x, array![[0, 0], [3, 3]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_add_inplace_bounded<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    alpha: T,
    policy: OutOfBounds<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    if let OutOfBounds::Error = policy {
        return crate::index_add_inplace(dst, dim, index, source, alpha);
    }
    write_bounded(
        "index_add",
        dst.view_mut().into_dyn(),
        Some(dim),
        index.view().into_dyn(),
        &policy,
        |d, i| crate::index_add_inplace(d, dim, i, source, alpha),
    )
}

/// Out-of-place [`index_add_inplace_bounded`]: a new array.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let out = gather::Options::new().bounds(OutOfBounds::Drop).index_add(&array![[0, 0], [0, 0]], 0, &array![1, -1], &array![[1, 1], [2, 2]], 1)?;
/// assert_eq!(out, array![[0, 0], [1, 1]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_add_bounded<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    alpha: T,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = super::try_to_owned("index_add", input)?;
    index_add_inplace_bounded(&mut out, dim, index, source, alpha, policy)?;
    Ok(out)
}
/// [`index_copy_inplace()`](crate::index_copy_inplace()) under a bounds policy (Error, Wrap, Clip or Drop; Fill
/// is an error for a write). The same checks as the op run before the first write.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let mut x = array![0, 0, 0];
/// gather::Options::new().bounds(OutOfBounds::Clip).index_copy_inplace(&mut x, 0, &array![5, -2], &array![7, 8])?;
/// assert_eq!(x, array![8, 0, 7]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_copy_inplace_bounded<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    policy: OutOfBounds<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    if let OutOfBounds::Error = policy {
        return crate::index_copy_inplace(dst, dim, index, source);
    }
    write_bounded(
        "index_copy",
        dst.view_mut().into_dyn(),
        Some(dim),
        index.view().into_dyn(),
        &policy,
        |d, i| crate::index_copy_inplace(d, dim, i, source),
    )
}

/// Out-of-place [`index_copy_inplace_bounded`]: a new array.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let out = gather::Options::new().bounds(OutOfBounds::Drop).index_copy(&array![0, 0, 0], 0, &array![5, 1], &array![7, 8])?;
/// assert_eq!(out, array![0, 8, 0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_copy_bounded<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = super::try_to_owned("index_copy", input)?;
    index_copy_inplace_bounded(&mut out, dim, index, source, policy)?;
    Ok(out)
}
/// [`index_fill_inplace()`](crate::index_fill_inplace()) under a bounds policy (Error, Wrap, Clip or Drop; Fill
/// is an error for a write). The same checks as the op run before the first write.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let mut x = array![1, 2, 3];
/// gather::Options::new().bounds(OutOfBounds::Drop).index_fill_inplace(&mut x, 0, &array![0, 9], -1)?;
/// assert_eq!(x, array![-1, 2, 3]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_fill_inplace_bounded<T, S, D, I, SI, DI>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    value: T,
    policy: OutOfBounds<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    if let OutOfBounds::Error = policy {
        return crate::index_fill_inplace(dst, dim, index, value);
    }
    write_bounded(
        "index_fill",
        dst.view_mut().into_dyn(),
        Some(dim),
        index.view().into_dyn(),
        &policy,
        |d, i| crate::index_fill_inplace(d, dim, i, value),
    )
}

/// Out-of-place [`index_fill_inplace_bounded`]: a new array.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let out = gather::Options::new().bounds(OutOfBounds::Clip).index_fill(&array![1, 2, 3], 0, &array![0, 9], -1)?;
/// assert_eq!(out, array![-1, 2, -1]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_fill_bounded<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    value: T,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let mut out = super::try_to_owned("index_fill", input)?;
    index_fill_inplace_bounded(&mut out, dim, index, value, policy)?;
    Ok(out)
}
/// [`index_reduce_inplace()`](crate::index_reduce_inplace()) under a bounds policy (Error, Wrap, Clip or Drop; Fill
/// is an error for a write). The same checks as the op run before the first write.
///
/// ```
/// use gather::OutOfBounds;
/// use gather::Reduce;
/// use ndarray::array;
/// let mut x = array![2.0, 3.0];
/// gather::Options::new().bounds(OutOfBounds::Clip).index_reduce_inplace(&mut x, 0, &array![0, -1, 7], &array![4.0, 5.0, 6.0], Reduce::Prod, true)?;
/// assert_eq!(x, array![2.0 * 4.0 * 5.0, 3.0 * 6.0]); // -1 -> 0 and 7 -> 1
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_reduce_inplace_bounded<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    policy: OutOfBounds<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    if let OutOfBounds::Error = policy {
        return crate::index_reduce_inplace(dst, dim, index, source, reduce, include_self);
    }
    write_bounded(
        "index_reduce",
        dst.view_mut().into_dyn(),
        Some(dim),
        index.view().into_dyn(),
        &policy,
        |d, i| crate::index_reduce_inplace(d, dim, i, source, reduce, include_self),
    )
}

/// Out-of-place [`index_reduce_inplace_bounded`]: a new array.
///
/// ```
/// use gather::OutOfBounds;
/// use gather::Reduce;
/// use ndarray::array;
/// let out = gather::Options::new().bounds(OutOfBounds::Drop).index_reduce(&array![2.0, 3.0], 0, &array![0, -1, 7], &array![4.0, 5.0, 6.0], Reduce::Prod, true)?;
/// assert_eq!(out, array![8.0, 3.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn index_reduce_bounded<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    reduce: Reduce,
    include_self: bool,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = super::try_to_owned("index_reduce", input)?;
    index_reduce_inplace_bounded(&mut out, dim, index, source, reduce, include_self, policy)?;
    Ok(out)
}
/// [`put_inplace()`](crate::put_inplace()) under a bounds policy (Error, Wrap, Clip or Drop; Fill
/// is an error for a write). The same checks as the op run before the first write.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let mut x = array![[1, 2], [3, 4]];
/// gather::Options::new().bounds(OutOfBounds::Drop).put_inplace(&mut x, &array![0, 4, -1], &array![9, 8, 7], false)?;
/// assert_eq!(x, array![[9, 2], [3, 4]]); // 4 and -1 are outside 0..4
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn put_inplace_bounded<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    accumulate: bool,
    policy: OutOfBounds<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    if let OutOfBounds::Error = policy {
        return crate::put_inplace(dst, index, source, accumulate);
    }
    write_bounded(
        "put",
        dst.view_mut().into_dyn(),
        None,
        index.view().into_dyn(),
        &policy,
        |d, i| crate::put_inplace(d, i, source, accumulate),
    )
}

/// Out-of-place [`put_inplace_bounded`]: a new array.
///
/// ```
/// use gather::OutOfBounds;
/// use ndarray::array;
/// let out = gather::Options::new().bounds(OutOfBounds::Clip).put(&array![[1, 2], [3, 4]], &array![0, 4, -1], &array![9, 8, 7], true)?;
/// assert_eq!(out, array![[1 + 9 + 7, 2], [3, 4 + 8]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn put_bounded<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    accumulate: bool,
    policy: OutOfBounds<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = super::try_to_owned("put", input)?;
    put_inplace_bounded(&mut out, index, source, accumulate, policy)?;
    Ok(out)
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

    /// The policy table, one value at a time: `Err` for an error, `Ok(None)` for a missing
    /// (filled or dropped) value. `native` is the op's own rule under Error.
    fn map(v: i64, n: usize, policy: &OutOfBounds<f64>, native: Bounds) -> Option<Option<usize>> {
        let n = n as i64;
        match policy {
            OutOfBounds::Error => native.map(v, n as usize).map(Some),
            OutOfBounds::Wrap => Bounds::Wrap.map(v, n as usize).map(Some),
            OutOfBounds::Clip => (n > 0).then(|| Some(v.clamp(0, n - 1) as usize)),
            OutOfBounds::Fill(_) | OutOfBounds::Drop => {
                Some((v >= 0 && v < n).then_some(v as usize))
            }
        }
    }

    fn policies(write: bool) -> Vec<OutOfBounds<f64>> {
        let last = if write {
            OutOfBounds::Drop
        } else {
            OutOfBounds::Fill(-7.0)
        };
        vec![
            OutOfBounds::Error,
            OutOfBounds::Wrap,
            OutOfBounds::Clip,
            last,
        ]
    }

    fn random_shape(seed: &mut u64, rank: usize) -> Vec<usize> {
        (0..rank).map(|_| 1 + (lcg(seed) % 4) as usize).collect()
    }

    fn values(shape: &[usize], seed: &mut u64) -> ArrayD<f64> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| (lcg(seed) % 19) as f64 - 9.0)
    }

    fn index(shape: &[usize], n: usize, seed: &mut u64) -> ArrayD<i64> {
        let span = n as u64 * 2 + 5;
        ArrayD::from_shape_fn(IxDyn(shape), |_| (lcg(seed) % span) as i64 - n as i64 - 2)
    }

    /// Checks `got` against the reference `want` (None: an IndexOutOfBounds error expected).
    fn same(got: Result<ArrayD<f64>>, want: Option<ArrayD<f64>>, what: &str) {
        match (got, want) {
            (Ok(g), Some(w)) => assert_eq!(g, w, "{what}"),
            (Err(e), None) => assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds, "{what}: {e}"),
            (Ok(g), None) => panic!("{what}: expected an error, got {g}"),
            (Err(e), Some(w)) => panic!("{what}: expected {w}, got {e}"),
        }
    }

    #[test]
    fn reads_match_the_policy_table_on_random_shapes_and_values() {
        let mut seed = 5u64;
        for round in 0..400 {
            let r = 1 + (round % 3);
            let xs = random_shape(&mut seed, r);
            let x = values(&xs, &mut seed);
            let d = (lcg(&mut seed) % r as u64) as usize;
            let n = xs[d];
            // gather / take_along_dim(dim): an index no larger than x off `dim`.
            let mut is: Vec<usize> = xs
                .iter()
                .map(|&s| 1 + (lcg(&mut seed) as usize % s))
                .collect();
            is[d] = 1 + (lcg(&mut seed) % 4) as usize;
            let idx = index(&is, n, &mut seed);
            for p in policies(false) {
                let fill = if let OutOfBounds::Fill(v) = p { v } else { 0.0 };
                let reference = |native: Bounds| -> Option<ArrayD<f64>> {
                    let mut bad = false;
                    let out =
                        ArrayD::from_shape_fn(IxDyn(&is), |c| match map(idx[&c], n, &p, native) {
                            None => {
                                bad = true;
                                0.0
                            }
                            Some(None) => fill,
                            Some(Some(q)) => {
                                let mut xc = c.clone();
                                xc[d] = q;
                                x[xc]
                            }
                        });
                    (!bad).then_some(out)
                };
                let what = format!("{p:?} x {xs:?} d {d} idx {idx}");
                same(
                    gather_bounded(&x, d as isize, &idx, p),
                    reference(Bounds::Strict),
                    &format!("gather {what}"),
                );
                // take_along_dim(dim): the index broadcasts against x off `dim` (size 1 or x's).
                let ts: Vec<usize> = (0..r)
                    .map(|a| {
                        if a == d {
                            is[d]
                        } else if lcg(&mut seed) % 2 == 0 {
                            1
                        } else {
                            xs[a]
                        }
                    })
                    .collect();
                let tidx = index(&ts, n, &mut seed);
                let os: Vec<usize> = (0..r).map(|a| if a == d { ts[d] } else { xs[a] }).collect();
                let mut bad = false;
                let want = ArrayD::from_shape_fn(IxDyn(&os), |c| {
                    let ic: Vec<usize> =
                        (0..r).map(|a| if ts[a] == 1 { 0 } else { c[a] }).collect();
                    match map(tidx[IxDyn(&ic)], n, &p, Bounds::Modulo) {
                        None => {
                            bad = true;
                            0.0
                        }
                        Some(None) => fill,
                        Some(Some(q)) => {
                            let mut xc = c.clone();
                            xc[d] = q;
                            x[xc]
                        }
                    }
                });
                same(
                    take_along_dim_bounded(&x, &tidx, Some(d as isize), p),
                    (!bad).then_some(want),
                    &format!("take_along_dim {what} tidx {tidx}"),
                );
                // take: the flat input.
                let flat: Vec<f64> = x.iter().copied().collect();
                let mut bad = false;
                let want = idx.mapv(|v| match map(v, flat.len(), &p, Bounds::Wrap) {
                    None => {
                        bad = true;
                        0.0
                    }
                    Some(None) => fill,
                    Some(Some(q)) => flat[q],
                });
                same(
                    take_bounded(&x, &idx, p),
                    (!bad).then_some(want),
                    &format!("take {what}"),
                );
                // take_along_dim without a dim: the flat input, 0..n under Error.
                let mut bad = false;
                let want = idx.mapv(|v| match map(v, flat.len(), &p, Bounds::Strict) {
                    None => {
                        bad = true;
                        0.0
                    }
                    Some(None) => fill,
                    Some(Some(q)) => flat[q],
                });
                same(
                    take_along_dim_bounded(&x, &idx, None, p),
                    (!bad).then(|| want.into_shape_with_order(IxDyn(&[idx.len()])).unwrap()),
                    &format!("take_along_dim(None) {what}"),
                );
                // index_select and select_batched with a 1-d index.
                let ids = idx.iter().copied().collect::<Vec<_>>();
                let ids = ArrayD::from_shape_vec(IxDyn(&[ids.len()]), ids).unwrap();
                let mut os = xs.clone();
                os[d] = ids.len();
                let mut bad = false;
                let want = ArrayD::from_shape_fn(IxDyn(&os), |c| {
                    match map(ids[[c[d]]], n, &p, Bounds::Strict) {
                        None => {
                            bad = true;
                            0.0
                        }
                        Some(None) => fill,
                        Some(Some(q)) => {
                            let mut xc = c.clone();
                            xc[d] = q;
                            x[xc]
                        }
                    }
                });
                let want = (!bad).then_some(want);
                same(
                    index_select_bounded(&x, d as isize, &ids, p),
                    want.clone(),
                    &format!("index_select {what}"),
                );
                same(
                    select_batched_bounded(&x, d as isize, &ids, 0, p),
                    want,
                    &format!("select_batched {what}"),
                );
                // select_batched with batch axes: index [xs[..d]] + [k].
                let mut bs = xs[..d].to_vec();
                bs.push(2);
                let bidx = index(&bs, n, &mut seed);
                let mut os = xs[..d].to_vec();
                os.push(2);
                os.extend_from_slice(&xs[d + 1..]);
                let mut bad = false;
                let want = ArrayD::from_shape_fn(IxDyn(&os), |c| {
                    let mut ic = c.slice()[..=d].to_vec();
                    ic[d] = c[d];
                    match map(bidx[IxDyn(&ic)], n, &p, Bounds::Strict) {
                        None => {
                            bad = true;
                            0.0
                        }
                        Some(None) => fill,
                        Some(Some(q)) => {
                            let mut xc = c.clone();
                            xc[d] = q;
                            x[xc]
                        }
                    }
                });
                same(
                    select_batched_bounded(&x, d as isize, &bidx, d, p),
                    (!bad).then_some(want),
                    &format!("select_batched(batch_dims {d}) {what} bidx {bidx}"),
                );
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Red {
        Set,
        Sum,
        Prod,
        Mean,
        Max,
        Min,
    }

    /// Applies the contributions `(target coordinate, value)` in order, as the definition says.
    fn apply(
        dst: &ArrayD<f64>,
        contrib: &[(Vec<usize>, f64)],
        red: Red,
        include_self: bool,
    ) -> ArrayD<f64> {
        let mut out = dst.clone();
        let mut groups: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
        for (c, v) in contrib {
            match groups.iter_mut().find(|(g, _)| g == c) {
                Some((_, vs)) => vs.push(*v),
                None => groups.push((c.clone(), vec![*v])),
            }
        }
        for (c, vs) in groups {
            let c = IxDyn(&c);
            let mut all = if include_self { vec![dst[&c]] } else { vec![] };
            all.extend(vs);
            out[&c] = match red {
                Red::Set => *all.last().unwrap(),
                Red::Sum => all.iter().sum(),
                Red::Prod => all.iter().product(),
                Red::Mean => all.iter().sum::<f64>() / all.len() as f64,
                Red::Max => all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Red::Min => all.iter().copied().fold(f64::INFINITY, f64::min),
            };
        }
        out
    }

    #[test]
    fn writes_match_the_policy_table_on_random_shapes_and_values() {
        let mut seed = 9u64;
        let reduces = [
            (Reduce::Sum, Red::Sum),
            (Reduce::Prod, Red::Prod),
            (Reduce::Mean, Red::Mean),
            (Reduce::Amax, Red::Max),
            (Reduce::Amin, Red::Min),
        ];
        for round in 0..300 {
            let r = 1 + (round % 3);
            let xs = random_shape(&mut seed, r);
            let x = values(&xs, &mut seed);
            let d = (lcg(&mut seed) % r as u64) as usize;
            let n = xs[d];
            let mut is: Vec<usize> = xs
                .iter()
                .map(|&s| 1 + (lcg(&mut seed) as usize % s))
                .collect();
            is[d] = 1 + (lcg(&mut seed) % 5) as usize;
            let idx = index(&is, n, &mut seed);
            let src = values(&is, &mut seed);
            let ids: Vec<i64> = idx
                .iter()
                .copied()
                .take(1 + (lcg(&mut seed) % 4) as usize)
                .collect();
            let ids = ArrayD::from_shape_vec(IxDyn(&[ids.len()]), ids).unwrap();
            let mut ss = xs.clone();
            ss[d] = ids.len();
            let source = values(&ss, &mut seed);
            for p in policies(true) {
                let what = format!("{p:?} x {xs:?} d {d} idx {idx} ids {ids}");
                // The scatter family: one contribution per index position, in row-major order.
                let scatter_contrib = |native: Bounds| -> Option<Vec<(Vec<usize>, f64)>> {
                    let mut v = Vec::new();
                    for (c, &i) in idx.indexed_iter() {
                        match map(i, n, &p, native)? {
                            None => {}
                            Some(q) => {
                                let mut t = c.slice().to_vec();
                                t[d] = q;
                                v.push((t, src[&c]));
                            }
                        }
                    }
                    Some(v)
                };
                let sc = scatter_contrib(Bounds::Strict);
                let dd = d as isize;
                let mut y = x.clone();
                let res = crate::Options::new()
                    .bounds(p)
                    .scatter_inplace(&mut y, dd, &idx, &src)
                    .map(|_| y.clone());
                same(
                    res,
                    sc.as_ref().map(|c| apply(&x, c, Red::Set, false)),
                    &format!("scatter {what}"),
                );
                if sc.is_none() {
                    assert_eq!(y, x, "a failed in-place scatter changes nothing: {what}");
                }
                same(
                    crate::Options::new()
                        .bounds(p)
                        .scatter_add(&x, dd, &idx, &src),
                    sc.as_ref().map(|c| apply(&x, c, Red::Sum, true)),
                    &format!("scatter_add {what}"),
                );
                for (red, rr) in reduces {
                    for incl in [true, false] {
                        same(
                            crate::Options::new()
                                .bounds(p)
                                .scatter_reduce(&x, dd, &idx, &src, red, incl),
                            sc.as_ref().map(|c| apply(&x, c, rr, incl)),
                            &format!("scatter_reduce {red:?} {incl} {what}"),
                        );
                    }
                }
                // The index_* family: index entry j moves the slice j of source.
                let index_contrib =
                    |native: Bounds, scale: f64| -> Option<Vec<(Vec<usize>, f64)>> {
                        let mut v = Vec::new();
                        let targets: Vec<Option<usize>> = ids
                            .iter()
                            .map(|&i| map(i, n, &p, native))
                            .collect::<Option<_>>()?;
                        for (j, t) in targets.iter().enumerate() {
                            let Some(q) = t else { continue };
                            for (c, &s) in source.indexed_iter() {
                                if c[d] == j {
                                    let mut tc = c.slice().to_vec();
                                    tc[d] = *q;
                                    v.push((tc, s * scale));
                                }
                            }
                        }
                        Some(v)
                    };
                let ic = index_contrib(Bounds::Strict, 2.0);
                same(
                    index_add_bounded(&x, dd, &ids, &source, 2.0, p),
                    ic.as_ref().map(|c| apply(&x, c, Red::Sum, true)),
                    &format!("index_add {what}"),
                );
                let ic = index_contrib(Bounds::Strict, 1.0);
                same(
                    index_copy_bounded(&x, dd, &ids, &source, p),
                    ic.as_ref().map(|c| apply(&x, c, Red::Set, false)),
                    &format!("index_copy {what}"),
                );
                for (red, rr) in reduces.iter().skip(1) {
                    for incl in [true, false] {
                        same(
                            index_reduce_bounded(&x, dd, &ids, &source, *red, incl, p),
                            ic.as_ref().map(|c| apply(&x, c, *rr, incl)),
                            &format!("index_reduce {red:?} {incl} {what}"),
                        );
                    }
                }
                // index_fill (PyTorch wraps -n..n under Error).
                let fill_contrib = ids
                    .iter()
                    .map(|&i| map(i, n, &p, Bounds::Wrap))
                    .collect::<Option<Vec<_>>>()
                    .map(|ts| {
                        let mut v = Vec::new();
                        for q in ts.into_iter().flatten() {
                            for (c, _) in x.indexed_iter() {
                                if c[d] == q {
                                    v.push((c.slice().to_vec(), 42.0));
                                }
                            }
                        }
                        v
                    });
                same(
                    index_fill_bounded(&x, dd, &ids, 42.0, p),
                    fill_contrib.as_ref().map(|c| apply(&x, c, Red::Set, false)),
                    &format!("index_fill {what}"),
                );
                // put: flat positions (PyTorch wraps -n..n under Error).
                let nn = x.len();
                let put_contrib = idx
                    .iter()
                    .zip(src.iter())
                    .map(|(&i, &s)| map(i, nn, &p, Bounds::Wrap).map(|t| (t, s)))
                    .collect::<Option<Vec<_>>>()
                    .map(|v| {
                        v.into_iter()
                            .filter_map(|(t, s)| t.map(|t| (unravel(t, &xs), s)))
                            .collect::<Vec<_>>()
                    });
                for acc in [false, true] {
                    same(
                        put_bounded(&x, &idx, &src, acc, p),
                        put_contrib
                            .as_ref()
                            .map(|c| apply(&x, c, if acc { Red::Sum } else { Red::Set }, acc)),
                        &format!("put {acc} {what}"),
                    );
                }
            }
        }
    }

    fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
        let mut c = vec![0; shape.len()];
        for (k, &s) in shape.iter().enumerate().rev() {
            c[k] = i % s;
            i /= s;
        }
        c
    }

    #[test]
    fn a_policy_that_makes_no_sense_for_the_op_is_an_invalid_argument_with_a_hint() {
        let x = array![1.0, 2.0];
        let e = gather_bounded(&x, 0, &array![0], OutOfBounds::Drop).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.hint().unwrap().contains("Fill"), "{e}");
        let mut y = x.clone();
        let e = crate::Options::new()
            .bounds(OutOfBounds::Fill(0.0))
            .scatter_add_inplace(&mut y, 0, &array![0], &array![1.0])
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.hint().unwrap().contains("Drop"), "{e}");
        assert_eq!(y, x);
    }

    #[test]
    fn in_place_writes_that_fail_change_nothing_under_every_policy() {
        let x = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        for p in [OutOfBounds::Wrap, OutOfBounds::Drop, OutOfBounds::Clip] {
            let mut y = x.clone();
            // a shape error after the index is mapped: src is smaller than the index
            let e = crate::Options::new()
                .bounds(p)
                .scatter_add_inplace(&mut y, 1, &array![[0, -1, 1]], &array![[1.0]])
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{p:?}");
            assert_eq!(y, x);
            let e =
                index_add_inplace_bounded(&mut y, 1, &array![0, -1], &array![[1.0, 1.0]], 1.0, p)
                    .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ShapeMismatch, "{p:?}");
            assert_eq!(y, x);
        }
        let mut y = x.clone();
        let e = put_inplace_bounded(
            &mut y,
            &array![0, 6, -7],
            &array![1.0, 1.0, 1.0],
            false,
            OutOfBounds::Wrap,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.index_value(), Some(6));
        assert_eq!(y, x);
    }

    #[test]
    fn broadcast_indices_are_mapped_without_being_materialised() {
        let row = array![-1i64, 0, 9];
        let wide = row.broadcast((1000, 3)).unwrap().into_dyn();
        let r = resolve("gather", &wide, 1, 3, &OutOfBounds::<f32>::Clip, 0).unwrap();
        assert_eq!(r.compact.len(), 3);
        assert_eq!(r.index().shape(), &[1000, 3]);
        assert_eq!(r.index()[[999, 2]], 2);
        assert_eq!(r.index()[[5, 0]], 0);
    }

    #[test]
    fn an_empty_dimension_rejects_reads_and_drops_every_write() {
        let x = ndarray::Array2::<f32>::zeros((2, 0));
        let e = gather_bounded(&x, 1, &array![[0i64], [1]], OutOfBounds::Fill(1.0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        let out = crate::Options::new().bounds(OutOfBounds::Drop).scatter_add(
            &x,
            1,
            &array![[3i64], [-1]],
            &array![[1.0f32], [2.0]],
        );
        assert_eq!(out.unwrap().shape(), &[2, 0]);
    }
}
