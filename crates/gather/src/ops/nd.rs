//! `gather_nd` and `scatter_nd`: index with tuples of coordinates, as ONNX's GatherND/ScatterND and
//! TensorFlow's `gather_nd`/`tensor_scatter_nd_*`. The last axis of `indices` holds a tuple of `k`
//! coordinates into the leading axes of `data`; each tuple picks (or writes) one slice of the
//! remaining axes.
//!
//! ```text
//! gather_nd(data, indices)             out[m] = data[indices[m][0]][indices[m][1]][..]
//!
//!  data [2, 2, 2]           indices [2, 1, 2]       out [2, 1, 2]
//!  d0=0 ┌───┬───┐            ┌───────┐               ┌───┬───┐
//!   d1=0│ 0 │ 1 │            │ (0,1) │ ──────────→   │ 2 │ 3 │  data[0][1][..]
//!   d1=1│ 2 │ 3 │            ├───────┤               ├───┼───┤
//!  d0=1 ├───┼───┤            │ (1,0) │ ──────────→   │ 4 │ 5 │  data[1][0][..]
//!   d1=0│ 4 │ 5 │            └───────┘               └───┴───┘
//!   d1=1│ 6 │ 7 │   each tuple of k = 2 coordinates picks a slice of data.shape[2..] = [2]
//!       └───┴───┘
//!
//! scatter_nd(data, indices, updates, reduction)   out[indices[m]..] = f(out[indices[m]..], updates[m])
//! ```
//!
//! The rules (ONNX's):
//! - `data` and `indices` have at least one axis; `k = indices.shape[-1]` is between 1 and
//!   `data.ndim() - batch_dims`;
//! - `gather_nd`: the first `batch_dims` axes of `data` and `indices` are paired one to one (equal
//!   sizes), `batch_dims < min(data.ndim(), indices.ndim())`; the output shape is
//!   `indices.shape[..q-1] + data.shape[batch_dims + k..]`;
//! - `scatter_nd`: `updates.shape == indices.shape[..q-1] + data.shape[k..]`; writes go in the
//!   row-major order of the tuples, so with duplicate tuples `Reduction::None` keeps the last and
//!   the reductions apply in that order (f16/bf16 round after each step, as ONNX's reference does);
//! - every coordinate `indices[.., j]` is in `0..data.shape[batch_dims + j]` (negative values are
//!   errors; the `onnx_*` forms in [`crate::ops::onnx`] wrap them from the end, as ONNX does).
//!
//! `scatter_nd_inplace` checks everything, every coordinate included, before its first write.

use std::str::FromStr;

use ndarray::{
    Array, ArrayBase, ArrayD, ArrayView, ArrayViewMut, Axis, Data, DataMut, Dimension, IxDyn, Zip,
};

use crate::dims::checked_numel;
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, find_out_of_bounds, out_of_bounds_error};

/// How `scatter_nd` (and [`onnx_scatter_elements`](crate::ops::onnx::onnx_scatter_elements))
/// combine an update with the element it lands on: ONNX's `reduction` attribute.
///
/// ```
/// use gather::ops::nd::Reduction;
/// assert_eq!("mul".parse::<Reduction>().unwrap(), Reduction::Mul);
/// assert_eq!(Reduction::default(), Reduction::None);
/// assert!("sum".parse::<Reduction>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Reduction {
    /// Overwrite (the last of duplicate writes wins).
    #[default]
    None,
    /// Add into the element.
    Add,
    /// Multiply into the element.
    Mul,
    /// Keep the larger (NaN propagates).
    Max,
    /// Keep the smaller (NaN propagates).
    Min,
}

impl Reduction {
    /// ONNX's name (`none`, `add`, `mul`, `max`, `min`).
    ///
    /// ```
    /// assert_eq!(gather::ops::nd::Reduction::Max.name(), "max");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Add => "add",
            Reduction::Mul => "mul",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }

    /// `f(old, update)` for one element.
    fn apply<T: Element>(self, old: T, new: T) -> T {
        match self {
            Reduction::None => new,
            Reduction::Add => T::from_acc(T::acc_add(old.to_acc(), new.to_acc())),
            Reduction::Mul => T::from_acc(T::acc_mul(old.to_acc(), new.to_acc())),
            Reduction::Max => T::from_acc(T::acc_max(old.to_acc(), new.to_acc())),
            Reduction::Min => T::from_acc(T::acc_min(old.to_acc(), new.to_acc())),
        }
    }
}

impl FromStr for Reduction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "none" => Reduction::None,
            "add" => Reduction::Add,
            "mul" => Reduction::Mul,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            _ => {
                return Err(Error::invalid(format!(
                    "reduction must be one of none, add, mul, max, min, got `{s}`"
                ))
                .with_hint(
                    "these are ONNX's names; PyTorch's sum/prod/amax/amin are add/mul/max/min here",
                ));
            }
        })
    }
}

/// The shapes of a `gather_nd` call: `k` and the output shape.
fn plan_gather(
    op: &str,
    data: &[usize],
    indices: &[usize],
    batch_dims: usize,
) -> Result<(usize, Vec<usize>)> {
    let (r, q) = (data.len(), indices.len());
    if r == 0 || q == 0 {
        return Err(Error::rank(format!(
            "{op}: data and indices need at least one dim each, but got data {} and indices {}",
            fmt_shape(data),
            fmt_shape(indices)
        ))
        .with_hint("indices holds one tuple of coordinates per row of its last axis: a single tuple (1, 2) is the 1-d array [1, 2]"));
    }
    if batch_dims >= r.min(q) {
        return Err(Error::invalid(format!(
            "{op}: batch_dims {batch_dims} must be smaller than both ranks (data {r}, indices {q})"
        ))
        .with_hint(format!(
            "batch_dims counts the leading axes data and indices share; here it can be at most {}",
            r.min(q) - 1
        )));
    }
    if let Some(d) = (0..batch_dims).find(|&d| data[d] != indices[d]) {
        return Err(Error::shape(format!(
            "{op}: batch axis {d} has size {} in indices but {} in data (data {}, indices {}, batch_dims {batch_dims})",
            indices[d],
            data[d],
            fmt_shape(data),
            fmt_shape(indices)
        ))
        .with_hint("the first batch_dims axes of data and indices are paired one to one, so their sizes must match"));
    }
    let k = indices[q - 1];
    if k == 0 || k > r - batch_dims {
        return Err(Error::shape(format!(
            "{op}: the last axis of indices has size {k}, but each tuple must hold between 1 and {} coordinates (data {}, indices {}, batch_dims {batch_dims})",
            r - batch_dims,
            fmt_shape(data),
            fmt_shape(indices)
        ))
        .with_hint(format!(
            "the last axis of indices is the tuple: its size k says how many leading axes of data (after the {batch_dims} batch axes) each tuple addresses; the output gets data's remaining axes"
        )));
    }
    let mut out = indices[..q - 1].to_vec();
    out.extend_from_slice(&data[batch_dims + k..]);
    checked_numel(&out)?;
    Ok((k, out))
}

/// Checks every coordinate `indices[.., j]` against `data.shape[first + j]` under `bounds`; the
/// error gives the value and its coordinate in `indices`.
fn check_tuples<I: IndexElem>(
    op: &str,
    indices: &ArrayView<'_, I, IxDyn>,
    data: &[usize],
    first: usize,
    bounds: Bounds,
) -> Result<()> {
    let q = indices.ndim();
    for j in 0..indices.shape()[q - 1] {
        let col = indices.index_axis(Axis(q - 1), j);
        let size = data[first + j];
        if let Some((value, mut coord)) = find_out_of_bounds(&col, size, bounds) {
            coord.push(j);
            return Err(out_of_bounds_error(
                op,
                value,
                coord,
                first + j,
                size,
                bounds,
            ));
        }
    }
    Ok(())
}

/// The row-major coordinates of flat position `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for (d, &s) in shape.iter().enumerate().rev() {
        out[d] = i % s.max(1);
        i /= s.max(1);
    }
}

/// `data` with its leading axes fixed to `batch` then to the (mapped) coordinates of `tuple`.
fn slice_at<'a, T, I: IndexElem>(
    data: ArrayView<'a, T, IxDyn>,
    batch: &[usize],
    tuple: &ArrayView<'_, I, ndarray::Ix1>,
    bounds: Bounds,
) -> ArrayView<'a, T, IxDyn> {
    let mut v = data;
    for &c in batch {
        v = v.index_axis_move(Axis(0), c);
    }
    for &t in tuple.iter() {
        let size = v.shape()[0];
        let p = bounds.map(t.to_i64(), size).expect("checked before");
        v = v.index_axis_move(Axis(0), p);
    }
    v
}

pub(crate) fn gather_nd_bounded<T, I>(
    op: &str,
    data: ArrayView<'_, T, IxDyn>,
    indices: ArrayView<'_, I, IxDyn>,
    batch_dims: usize,
    bounds: Bounds,
) -> Result<ArrayD<T>>
where
    T: Element,
    I: IndexElem,
{
    let (_, out_shape) = plan_gather(op, data.shape(), indices.shape(), batch_dims)?;
    check_tuples(op, &indices, data.shape(), batch_dims, bounds)?;
    let n = checked_numel(&out_shape)?;
    let mut out = super::try_vec(op, n)?;
    if n > 0 {
        let q = indices.ndim();
        let m: usize = indices.shape()[batch_dims..q - 1].iter().product();
        let batch_shape = &indices.shape()[..batch_dims];
        let mut batch = vec![0; batch_dims];
        for (p, tuple) in indices.lanes(Axis(q - 1)).into_iter().enumerate() {
            unravel(p / m.max(1), batch_shape, &mut batch);
            let s = slice_at(data.view(), &batch, &tuple, bounds);
            match s.as_slice() {
                Some(c) => out.extend_from_slice(c),
                None => out.extend(s.iter().copied()),
            }
        }
    }
    Ok(Array::from_shape_vec(IxDyn(&out_shape), out).expect("one slice per tuple"))
}

/// Gathers slices of `data` addressed by tuples of coordinates (ONNX GatherND, `tf.gather_nd`):
/// `out[b.., m.., t..] = data[b.., indices[b.., m.., 0], .., indices[b.., m.., k-1], t..]`.
///
/// `indices.shape[-1] = k` coordinates per tuple address the `k` axes of `data` after the first
/// `batch_dims` (which `data` and `indices` share). The output shape is
/// `indices.shape[..q-1] + data.shape[batch_dims + k..]`. Coordinates must be in
/// `0..size` (see [`onnx_gather_nd`](crate::ops::onnx::onnx_gather_nd) for ONNX's wrapping of
/// negative values).
///
/// ```
/// use ndarray::array;
/// let data = array![[0, 1], [2, 3]];
/// // Whole elements: k = 2 = data's rank.
/// assert_eq!(gather::gather_nd(&data, &array![[0, 0], [1, 1]], 0)?, array![0, 3].into_dyn());
/// // Rows: k = 1.
/// assert_eq!(gather::gather_nd(&data, &array![[1], [0]], 0)?, array![[2, 3], [0, 1]].into_dyn());
/// // One row per batch entry.
/// let cube = array![[[0, 1], [2, 3]], [[4, 5], [6, 7]]];
/// assert_eq!(gather::gather_nd(&cube, &array![[1], [0]], 1)?, array![[2, 3], [4, 5]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn gather_nd<T, S, D, I, SI, DI>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    batch_dims: usize,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    gather_nd_bounded(
        "gather_nd",
        data.view().into_dyn(),
        indices.view().into_dyn(),
        batch_dims,
        Bounds::Strict,
    )
}

/// The checks of a `scatter_nd` call (all before any write).
fn check_scatter<I: IndexElem>(
    op: &str,
    data: &[usize],
    indices: &ArrayView<'_, I, IxDyn>,
    updates: &[usize],
    bounds: Bounds,
) -> Result<()> {
    let (r, q) = (data.len(), indices.ndim());
    if r == 0 || q == 0 {
        return Err(Error::rank(format!(
            "{op}: data and indices need at least one dim each, but got data {} and indices {}",
            fmt_shape(data),
            fmt_shape(indices.shape())
        ))
        .with_hint("indices holds one tuple of coordinates per row of its last axis: a single tuple (1, 2) is the 1-d array [1, 2]"));
    }
    let k = indices.shape()[q - 1];
    if k == 0 || k > r {
        return Err(Error::shape(format!(
            "{op}: the last axis of indices has size {k}, but each tuple must hold between 1 and {r} coordinates (data {}, indices {})",
            fmt_shape(data),
            fmt_shape(indices.shape())
        ))
        .with_hint("the last axis of indices is the tuple: its size k says how many leading axes of data each tuple addresses"));
    }
    let mut want = indices.shape()[..q - 1].to_vec();
    want.extend_from_slice(&data[k..]);
    if updates != want.as_slice() {
        return Err(Error::shape(format!(
            "{op}: updates has shape {} but must have shape {} = indices.shape[..-1] {} + data.shape[{k}..] {} (data {}, indices {})",
            fmt_shape(updates),
            fmt_shape(&want),
            fmt_shape(&indices.shape()[..q - 1]),
            fmt_shape(&data[k..]),
            fmt_shape(data),
            fmt_shape(indices.shape())
        ))
        .with_hint("each tuple of indices writes one slice of data's remaining axes, so updates holds one such slice per tuple"));
    }
    check_tuples(op, indices, data, 0, bounds)
}

pub(crate) fn scatter_nd_bounded<T, I>(
    op: &str,
    mut data: ArrayViewMut<'_, T, IxDyn>,
    indices: ArrayView<'_, I, IxDyn>,
    updates: ArrayView<'_, T, IxDyn>,
    reduction: Reduction,
    bounds: Bounds,
) -> Result<()>
where
    T: Element,
    I: IndexElem,
{
    check_scatter(op, data.shape(), &indices, updates.shape(), bounds)?;
    let q = indices.ndim();
    let outer = &indices.shape()[..q - 1];
    let mut at = vec![0; q - 1];
    for (p, tuple) in indices.lanes(Axis(q - 1)).into_iter().enumerate() {
        let mut dst = data.view_mut();
        for &t in tuple.iter() {
            let size = dst.shape()[0];
            let pos = bounds.map(t.to_i64(), size).expect("checked before");
            dst = dst.index_axis_move(Axis(0), pos);
        }
        unravel(p, outer, &mut at);
        let mut src = updates.view();
        for &c in &at {
            src = src.index_axis_move(Axis(0), c);
        }
        Zip::from(&mut dst)
            .and(&src)
            .for_each(|d, &u| *d = reduction.apply(*d, u));
    }
    Ok(())
}

/// Writes `updates` into `data` at slices addressed by tuples of coordinates (ONNX ScatterND,
/// `tf.tensor_scatter_nd_update`/`_add`/`_max`/`_min`), combining with `reduction`:
/// `data[indices[m]..] = f(data[indices[m]..], updates[m..])` for each tuple `m` in row-major
/// order.
///
/// `updates.shape` must be `indices.shape[..q-1] + data.shape[k..]`, `k = indices.shape[-1]`.
/// Every check runs before the first write: on error `data` is unchanged.
///
/// ```
/// use gather::ops::nd::Reduction;
/// use ndarray::array;
/// let mut data = array![[1.0, 2.0], [3.0, 4.0]];
/// gather::scatter_nd_inplace(&mut data, &array![[0, 0], [1, 1], [0, 0]], &array![5.0, 1.0, 2.0], Reduction::Add)?;
/// assert_eq!(data, array![[8.0, 2.0], [3.0, 5.0]]);
/// // Rows (k = 1): replace row 1.
/// gather::scatter_nd_inplace(&mut data, &array![[1]], &array![[0.0, 0.0]], Reduction::None)?;
/// assert_eq!(data, array![[8.0, 2.0], [0.0, 0.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_nd_inplace<T, S, D, I, SI, DI, SU, DU>(
    data: &mut ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    updates: &ArrayBase<SU, DU>,
    reduction: Reduction,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SU: Data<Elem = T>,
    DU: Dimension,
{
    scatter_nd_bounded(
        "scatter_nd",
        data.view_mut().into_dyn(),
        indices.view().into_dyn(),
        updates.view().into_dyn(),
        reduction,
        Bounds::Strict,
    )
}

/// Out-of-place [`scatter_nd_inplace`]: a new array.
///
/// ```
/// use gather::ops::nd::Reduction;
/// use ndarray::array;
/// let data = array![[1, 2], [3, 4]];
/// let out = gather::scatter_nd(&data, &array![[0, 0], [1, 1]], &array![5, 1], Reduction::Max)?;
/// assert_eq!(out, array![[5, 2], [3, 4]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_nd<T, S, D, I, SI, DI, SU, DU>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    updates: &ArrayBase<SU, DU>,
    reduction: Reduction,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SU: Data<Elem = T>,
    DU: Dimension,
{
    let mut out = super::try_to_owned("scatter_nd", data)?;
    scatter_nd_inplace(&mut out, indices, updates, reduction)?;
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

    /// ONNX's reference, written with explicit coordinates.
    fn gather_ref(x: &ArrayD<i64>, idx: &ArrayD<i64>, b: usize) -> ArrayD<i64> {
        let q = idx.ndim();
        let k = idx.shape()[q - 1];
        let mut shape = idx.shape()[..q - 1].to_vec();
        shape.extend_from_slice(&x.shape()[b + k..]);
        ArrayD::from_shape_fn(IxDyn(&shape), |c| {
            let c = c.slice();
            let mut xc = c[..b].to_vec();
            let mut ic = c[..q - 1].to_vec();
            for j in 0..k {
                ic.push(j);
                xc.push(idx[IxDyn(&ic)] as usize);
                ic.pop();
            }
            xc.extend_from_slice(&c[q - 1..]);
            x[IxDyn(&xc)]
        })
    }

    #[test]
    fn gather_nd_matches_the_definition_on_random_shapes() {
        let mut seed = 3u64;
        for _ in 0..300 {
            let r = 1 + (lcg(&mut seed) % 4) as usize;
            let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 3) as usize).collect();
            let b = (lcg(&mut seed) % r as u64) as usize;
            let k = 1 + (lcg(&mut seed) % (r - b) as u64) as usize;
            let mut is = xs[..b].to_vec();
            for _ in 0..lcg(&mut seed) % 3 {
                is.push((lcg(&mut seed) % 3) as usize);
            }
            is.push(k);
            if b >= is.len() {
                continue;
            }
            let x = ArrayD::from_shape_fn(IxDyn(&xs), |c| {
                c.slice().iter().fold(0i64, |a, &v| a * 10 + v as i64)
            });
            let idx = ArrayD::from_shape_fn(IxDyn(&is), |c| {
                let j = c[c.ndim() - 1];
                (lcg(&mut seed) % xs[b + j] as u64) as i64
            });
            let got = gather_nd(&x, &idx, b).unwrap();
            assert_eq!(got, gather_ref(&x, &idx, b), "x {xs:?} idx {is:?} b {b}");
            // A transposed (non-standard) data view reads the same logical elements.
            let xt = x.t().to_owned();
            let xtt = xt.t();
            assert_eq!(gather_nd(&xtt, &idx, b).unwrap(), got);
        }
    }

    #[test]
    fn scatter_nd_matches_a_plain_loop_for_every_reduction() {
        let mut seed = 11u64;
        for red in [
            Reduction::None,
            Reduction::Add,
            Reduction::Mul,
            Reduction::Max,
            Reduction::Min,
        ] {
            for _ in 0..100 {
                let r = 1 + (lcg(&mut seed) % 3) as usize;
                let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 3) as usize).collect();
                let k = 1 + (lcg(&mut seed) % r as u64) as usize;
                let m = (lcg(&mut seed) % 5) as usize;
                let idx = ArrayD::from_shape_fn(IxDyn(&[m, k]), |c| {
                    (lcg(&mut seed) % xs[c[1]] as u64) as i64
                });
                let mut us = vec![m];
                us.extend_from_slice(&xs[k..]);
                let upd = ArrayD::from_shape_fn(IxDyn(&us), |_| (lcg(&mut seed) % 7) as i64 - 3);
                let x = ArrayD::from_shape_fn(IxDyn(&xs), |_| (lcg(&mut seed) % 7) as i64 - 3);
                let got = scatter_nd(&x, &idx, &upd, red).unwrap();
                let mut want = x.clone();
                for t in 0..m {
                    let mut c = Vec::new();
                    for j in 0..k {
                        c.push(idx[[t, j]] as usize);
                    }
                    let tail = &xs[k..];
                    let n: usize = tail.iter().product();
                    for e in 0..n {
                        let mut tc = vec![0; tail.len()];
                        unravel(e, tail, &mut tc);
                        let mut full = c.clone();
                        full.extend_from_slice(&tc);
                        let mut uc = vec![t];
                        uc.extend_from_slice(&tc);
                        let (o, u) = (want[IxDyn(&full)], upd[IxDyn(&uc)]);
                        want[IxDyn(&full)] = match red {
                            Reduction::None => u,
                            Reduction::Add => o + u,
                            Reduction::Mul => o * u,
                            Reduction::Max => o.max(u),
                            Reduction::Min => o.min(u),
                        };
                    }
                }
                assert_eq!(got, want, "{red:?} x {xs:?} k {k} m {m}");
            }
        }
    }

    #[test]
    fn errors_name_the_numbers_and_a_failed_scatter_changes_nothing() {
        let x = array![[1.0f32, 2.0], [3.0, 4.0]];
        let e = gather_nd(&x, &array![[0i64, 2]], 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.coordinate(), Some(&[0usize, 1][..]));
        assert!(
            e.to_string()
                .contains("index 2 is out of bounds for dimension 1 with size 2"),
            "{e}"
        );
        let e = gather_nd(&x, &array![[0i64, -1]], 0).unwrap_err();
        assert!(e.hint().unwrap().contains("negative"), "{e}");
        let e = gather_nd(&x, &array![[0i64, 0, 0]], 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.to_string().contains("between 1 and 2"), "{e}");
        let e = gather_nd(&x, &array![[0i64]], 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = gather_nd(&x, &array![[0i64], [1], [0]], 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = gather_nd(&x, &ndarray::arr0(0i64), 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);

        let mut y = x.clone();
        let e = scatter_nd_inplace(
            &mut y,
            &array![[0i64, 0], [1, 5]],
            &array![9.0f32, 9.0],
            Reduction::None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.coordinate(), Some(&[1usize, 1][..]));
        assert_eq!(y, x, "nothing was written");
        let e = scatter_nd_inplace(&mut y, &array![[0i64]], &array![9.0f32], Reduction::Add)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.to_string().contains("must have shape [1, 2]"), "{e}");
        assert_eq!(y, x);
        assert!(
            "sum"
                .parse::<Reduction>()
                .unwrap_err()
                .hint()
                .unwrap()
                .contains("add")
        );
    }

    #[test]
    fn empty_tuples_and_empty_slices_give_empty_outputs() {
        let x = ArrayD::<f32>::zeros(IxDyn(&[3, 0]));
        let got = gather_nd(&x, &array![[1i64], [2]], 0).unwrap();
        assert_eq!(got.shape(), &[2, 0]);
        let none = ArrayD::<i64>::zeros(IxDyn(&[0, 1]));
        let got = gather_nd(&array![1, 2, 3], &none, 0).unwrap();
        assert_eq!(got.shape(), &[0]);
        let out = scatter_nd(
            &array![1, 2, 3],
            &none,
            &ArrayD::<i32>::zeros(IxDyn(&[0])),
            Reduction::Add,
        )
        .unwrap();
        assert_eq!(out, array![1, 2, 3]);
    }
}
