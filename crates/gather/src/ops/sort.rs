//! `sort`, `argsort`, `topk`: order the elements of every 1-d slice (lane) along one dim.
//!
//! ```text
//! sort(input, dim=1)                      values[i][j] = input[i][indices[i][j]]
//!
//!  input                   values                   indices
//!  ┌───┬─────┬────┬───┐    ┌────┬───┬───┬─────┐     ┌───┬───┬───┬───┐
//!  │ 3 │ NaN │  1 │ 3 │ →  │  1 │ 3 │ 3 │ NaN │     │ 2 │ 0 │ 3 │ 1 │  NaN last; the two 3s keep
//!  ├───┼─────┼────┼───┤    ├────┼───┼───┼─────┤     ├───┼───┼───┼───┤  their order (index 0, then 3)
//!  │ 0 │  5  │ -0 │ 2 │ →  │  0 │-0 │ 2 │  5  │     │ 0 │ 2 │ 3 │ 1 │  -0.0 == 0.0: a tie
//!  └───┴─────┴────┴───┘    └────┴───┴───┴─────┘     └───┴───┴───┴───┘
//!
//! topk(input, k=2, dim=1)  (largest first)  values [[NaN, 3], [5, 2]]   indices [[1, 0], [1, 3]]
//! ```
//!
//! The order, as PyTorch's ([`Element::sort_cmp`]): NaN is larger than every number (ascending puts
//! NaNs last, descending first, `topk(largest)` picks them first), and `-0.0 == 0.0`.
//!
//! **Deterministic, always stable.** Every result is the *stable* order: equal elements keep the
//! order of their indices, in both directions, whatever `stable` says and on any number of threads.
//! PyTorch leaves the order of ties unspecified for `stable = false`, so the stable order is one of
//! the answers it allows. `topk` likewise picks, among tied candidates, the ones with the lowest
//! indices, and returns its `k` results sorted (best first) also for `sorted = false` (PyTorch's
//! order is unspecified then).
//!
//! Shapes: the outputs have the input's shape with `dim` replaced by the lane length (`sort`,
//! `argsort`) or `k` (`topk`); indices are `i64`. A 0-d input counts as one element: `sort` returns
//! `(input, 0)`, and `topk` accepts `k` 0 or 1 and returns 0-d `(input, 0)` for both, as PyTorch does.
//! Empty lanes are fine. The input may have any strides; lanes are read in place (the only copy is
//! a per-lane scratch buffer), and big inputs are split across threads by lanes.
//!
//! Element types: `sort`/`argsort` take all thirteen; `topk` rejects `bool`
//! ([`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)), as PyTorch does, and accepts
//! `u16`/`u32`/`u64`, where PyTorch has no kernel.
//!
//! Algorithms: each lane is turned into `(key, index)` pairs whose integer order is the order above
//! (so comparisons are single integer compares, and pairs are all distinct, which makes the
//! unstable sorts deterministic and stable); `sort` sorts them (lanes of more than 32768 elements
//! with a parallel sort); `topk` selects the best `k` with a linear-time selection
//! (`select_nth_unstable`) and sorts only those.

use std::any::Any;

use ndarray::{Array, ArrayBase, ArrayView, ArrayView1, ArrayViewMut, Axis, Data, Dimension, IxDyn, Zip};
use rayon::prelude::*;

use super::view_1d_if_scalar;
use crate::dims::normalize_dim;
use crate::element::{DType, Element};
use crate::error::{fmt_shape, Error, Result};
use crate::plan::GRAIN;

/// Lanes at least this long are sorted with rayon's parallel sort.
const PAR_SORT_MIN: usize = 32 * 1024;

/// An element as a `u64` whose unsigned order is [`Element::sort_cmp`]'s order: NaN (any payload)
/// maps to `u64::MAX`, `-0.0` and `0.0` to the same key.
#[inline(always)]
fn sort_key<T: Element>(x: T) -> u64 {
    // The two 64-bit integer types do not convert to f64 exactly; the type test is resolved at
    // compile time for each `T`.
    let any = &x as &dyn Any;
    if let Some(&v) = any.downcast_ref::<i64>() {
        return (v as u64) ^ (1 << 63);
    }
    if let Some(&v) = any.downcast_ref::<u64>() {
        return v;
    }
    // Every other element type converts to f64 exactly (bool as 0/1).
    let v = x.to_f64();
    if v.is_nan() {
        return u64::MAX;
    }
    // `-0.0 + 0.0` is `+0.0`: signed zeros get one key.
    let bits = (v + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Fills `pairs` with the `k` best `(key, index)` pairs of `lane`, best first: ascending keys, or
/// descending keys when `flip` (ties in ascending index order either way).
fn order_lane<T: Element>(lane: &ArrayView1<'_, T>, k: usize, flip: bool, pairs: &mut Vec<(u64, usize)>) {
    let mask = if flip { u64::MAX } else { 0 };
    pairs.clear();
    pairs.extend(lane.iter().enumerate().map(|(i, &v)| (sort_key(v) ^ mask, i)));
    let n = pairs.len();
    // The pairs are distinct, so every order below is fully determined.
    if k < n {
        if k == 0 {
            pairs.clear();
            return;
        }
        pairs.select_nth_unstable(k - 1);
        pairs.truncate(k);
    }
    if pairs.len() >= PAR_SORT_MIN {
        pairs.par_sort_unstable();
    } else {
        pairs.sort_unstable();
    }
}

/// Runs [`order_lane`] over every lane along `dim` of `x` (serially) and writes the results.
fn lanes_serial<T: Element>(
    x: ArrayView<'_, T, IxDyn>,
    dim: usize,
    k: usize,
    flip: bool,
    values: Option<ArrayViewMut<'_, T, IxDyn>>,
    mut indices: ArrayViewMut<'_, i64, IxDyn>,
) {
    let ax = Axis(dim);
    let mut pairs = Vec::with_capacity(x.shape()[dim]);
    match values {
        Some(mut values) => {
            Zip::from(x.lanes(ax)).and(values.lanes_mut(ax)).and(indices.lanes_mut(ax)).for_each(|xl, mut vl, mut il| {
                order_lane(&xl, k, flip, &mut pairs);
                for ((&(_, i), v), o) in pairs.iter().zip(vl.iter_mut()).zip(il.iter_mut()) {
                    *v = xl[i];
                    *o = i as i64;
                }
            })
        }
        None => Zip::from(x.lanes(ax)).and(indices.lanes_mut(ax)).for_each(|xl, mut il| {
            order_lane(&xl, k, flip, &mut pairs);
            for (&(_, i), o) in pairs.iter().zip(il.iter_mut()) {
                *o = i as i64;
            }
        }),
    }
}

/// Orders every lane of `x` along `dim`, keeping the `k` best of each, into `values` (optional)
/// and `indices`, whose shape is `x`'s with `dim` replaced by `k`. Big inputs are split into
/// chunks of whole lanes along the longest other axis and run on rayon's pool; every lane is
/// computed the same way whichever thread runs it, so the result does not depend on threads.
fn order_lanes<T: Element>(
    x: ArrayView<'_, T, IxDyn>,
    dim: usize,
    k: usize,
    flip: bool,
    mut values: Option<ArrayViewMut<'_, T, IxDyn>>,
    mut indices: ArrayViewMut<'_, i64, IxDyn>,
) {
    if indices.is_empty() {
        return;
    }
    let split = (0..x.ndim()).filter(|&a| a != dim && x.shape()[a] > 1).max_by_key(|&a| x.shape()[a]);
    let split = match split {
        Some(a) if x.len() >= 2 * GRAIN => a,
        _ => return lanes_serial(x, dim, k, flip, values, indices),
    };
    let per_step = x.len() / x.shape()[split];
    let chunk = GRAIN.div_ceil(per_step.max(1)).max(1);
    let xs: Vec<_> = x.axis_chunks_iter(Axis(split), chunk).collect();
    let is: Vec<_> = indices.axis_chunks_iter_mut(Axis(split), chunk).collect();
    let vs: Vec<Option<ArrayViewMut<'_, T, IxDyn>>> = match values.as_mut() {
        Some(v) => v.axis_chunks_iter_mut(Axis(split), chunk).map(Some).collect(),
        None => (0..xs.len()).map(|_| None).collect(),
    };
    xs.into_par_iter()
        .zip(is)
        .zip(vs)
        .for_each(|((xc, ic), vc)| lanes_serial(xc, dim, k, flip, vc, ic));
}

/// The output shape: `input`'s with `dim` replaced by `len` (a 0-d shape stays 0-d).
fn out_dim<D: Dimension>(input: &D, dim: usize, len: usize) -> D {
    let mut d = input.clone();
    if d.ndim() > 0 {
        d[dim] = len;
    }
    d
}

/// A dynamic-rank mutable view of `a`, with a 0-d array seen as 1-d of one element.
fn view_mut_1d_if_scalar<A, D: Dimension>(a: &mut Array<A, D>) -> ArrayViewMut<'_, A, IxDyn> {
    let v = a.view_mut().into_dyn();
    if v.ndim() == 0 {
        v.insert_axis(Axis(0))
    } else {
        v
    }
}

/// The shared body of sort, argsort and topk: `dim` already normalised, `k` already checked.
fn order_along<T, S, D>(input: &ArrayBase<S, D>, dim: usize, k: usize, flip: bool, want_values: bool) -> (Option<Array<T, D>>, Array<i64, D>)
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let shape = out_dim(&input.raw_dim(), dim, k);
    let mut indices = Array::<i64, D>::zeros(shape.clone());
    let mut values = want_values.then(|| Array::<T, D>::from_elem(shape, T::default()));
    let x = view_1d_if_scalar(input);
    let lane_k = if input.ndim() == 0 { 1 } else { k };
    order_lanes(x, dim, lane_k, flip, values.as_mut().map(view_mut_1d_if_scalar), view_mut_1d_if_scalar(&mut indices));
    (values, indices)
}

/// `torch.sort(input, dim, descending, stable=stable)`: every lane along `dim` sorted, with the
/// position each value came from.
///
/// Ascending puts NaNs last, descending first; `-0.0` and `0.0` are equal. The result is always
/// the stable order (equal values keep their index order), also for `stable = false`, where
/// PyTorch allows any order of ties: `stable` is accepted for parity and changes nothing.
///
/// ```
/// use ndarray::array;
/// let x = array![3.0f32, f32::NAN, 1.0, 3.0, f32::NEG_INFINITY, 2.0, f32::NAN, 3.0];
/// let (values, indices) = gather::sort(&x, 0, false, true)?;
/// assert_eq!(indices, array![4, 2, 5, 0, 3, 7, 1, 6]);
/// assert_eq!(values.slice(ndarray::s![..6]), array![f32::NEG_INFINITY, 1.0, 2.0, 3.0, 3.0, 3.0]);
/// assert!(values[6].is_nan() && values[7].is_nan());
///
/// // Descending, along the rows of a 2-d array; dims may be negative.
/// let m = array![[1, 5, 3], [9, 9, 0]];
/// let (v, i) = gather::sort(&m, -1, true, false)?;
/// assert_eq!(v, array![[5, 3, 1], [9, 9, 0]]);
/// assert_eq!(i, array![[1, 2, 0], [0, 1, 2]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn sort<T, S, D>(input: &ArrayBase<S, D>, dim: isize, descending: bool, stable: bool) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    // Every sort here is stable, so `stable = false` gets the stable order too.
    let _ = stable;
    let d = normalize_dim("sort", dim, input.ndim())?;
    let len = if input.ndim() == 0 { 1 } else { input.shape()[d] };
    let (values, indices) = order_along(input, d, len, descending, true);
    let values = values.ok_or_else(|| Error::invalid("sort: internal error: values were not computed"))?;
    Ok((values, indices))
}

/// `torch.argsort(input, dim, descending, stable=stable)`: the indices of [`sort()`] alone.
///
/// The same order as [`sort()`] (stable always; NaN largest; `-0.0 == 0.0`), without computing the
/// sorted values.
///
/// ```
/// use ndarray::array;
/// // MAE random masking: shuffle with argsort(noise), restore with argsort(ids_shuffle).
/// let noise = array![[0.7f32, 0.1, 0.4, 0.9]];
/// let ids_shuffle = gather::argsort(&noise, 1, false, false)?;
/// assert_eq!(ids_shuffle, array![[1, 2, 0, 3]]);
/// let ids_restore = gather::argsort(&ids_shuffle, 1, false, false)?;
/// assert_eq!(ids_restore, array![[2, 0, 1, 3]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn argsort<T, S, D>(input: &ArrayBase<S, D>, dim: isize, descending: bool, stable: bool) -> Result<Array<i64, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let _ = stable;
    let d = normalize_dim("argsort", dim, input.ndim())?;
    let len = if input.ndim() == 0 { 1 } else { input.shape()[d] };
    Ok(order_along(input, d, len, descending, false).1)
}

/// The error for a `k` outside `0..=size` (PyTorch's `selected index k out of range`).
pub(crate) fn k_out_of_range(k: i64, shape: &[usize], dim: usize) -> Error {
    let size = if shape.is_empty() { 1 } else { shape[dim] };
    let msg = format!(
        "topk: selected index k out of range (k = {k}, but dim {dim} of the input {} has {size} element(s))",
        fmt_shape(shape)
    );
    let hint = if k < 0 {
        "k counts the elements to keep, so it cannot be negative".to_string()
    } else if shape.is_empty() {
        "a 0-d input has one element: k must be 0 or 1 (both return the element)".to_string()
    } else {
        format!("k must be in 0..={size}; k = {size} keeps every element (sorted, like `sort`)")
    };
    Error::invalid(msg).with_hint(hint)
}

/// `torch.topk(input, k, dim, largest, sorted)`: the `k` largest (or smallest) elements of every
/// lane along `dim`, with their positions.
///
/// NaN counts as larger than every number, so `largest` picks NaNs first; `-0.0 == 0.0`. Among
/// tied candidates the lowest indices win, and the results come best first (largest first, or
/// smallest first), also for `sorted = false`, where PyTorch's order is unspecified.
///
/// `k` must be in `0..=input.shape[dim]`, else [`ErrorKind::InvalidArgument`]; a 0-d input takes
/// `k` 0 or 1 and returns 0-d `(input, 0)` for both (PyTorch's quirk). `bool` input is
/// [`ErrorKind::InvalidArgument`] (as PyTorch; convert to `u8` first).
///
/// Cost per lane of `n`: `O(n + k log k)` (a selection, then a sort of the `k` kept).
///
/// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
///
/// ```
/// use ndarray::array;
/// // Keep the 2 best-scoring patches of each image.
/// let scores = array![[0.1f32, 0.9, 0.3, 0.7], [0.8, 0.2, 0.6, 0.4]];
/// let (v, i) = gather::topk(&scores, 2, 1, true, true)?;
/// assert_eq!(v, array![[0.9, 0.7], [0.8, 0.6]]);
/// assert_eq!(i, array![[1, 3], [0, 2]]);
///
/// // NaN is the largest.
/// let x = array![3.0f64, f64::NAN, 1.0, 3.0, f64::NEG_INFINITY, 2.0, f64::NAN, 3.0];
/// let (v, i) = gather::topk(&x, 3, 0, true, true)?;
/// assert_eq!(i, array![1, 6, 0]);
/// assert!(v[0].is_nan() && v[1].is_nan() && v[2] == 3.0);
///
/// assert!(gather::topk(&x, 9, 0, true, true).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn topk<T, S, D>(input: &ArrayBase<S, D>, k: usize, dim: isize, largest: bool, sorted: bool) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    // The results are always sorted; `sorted = false` allows any order, so this is one of them.
    let _ = sorted;
    let d = normalize_dim("topk", dim, input.ndim())?;
    let size = if input.ndim() == 0 { 1 } else { input.shape()[d] };
    if k > size {
        return Err(k_out_of_range(i64::try_from(k).unwrap_or(i64::MAX), input.shape(), d));
    }
    if T::DTYPE == DType::Bool {
        return Err(Error::invalid("topk does not support bool dtypes (as PyTorch on the CPU)")
            .with_hint("convert to an integer type first, e.g. `x.mapv(|b| b as u8)`; `sort` and `argsort` do take bool"));
    }
    let (values, indices) = order_along(input, d, k, largest, true);
    let values = values.ok_or_else(|| Error::invalid("topk: internal error: values were not computed"))?;
    Ok((values, indices))
}

/// Method forms of [`sort()`], [`argsort()`] and [`topk()`], on any ndarray array.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let x = array![[2, 7, 1], [5, 0, 5]];
/// let (v, i) = x.sort(1, false, false)?;
/// assert_eq!((v, i), (array![[1, 2, 7], [0, 5, 5]], array![[2, 0, 1], [1, 0, 2]]));
/// assert_eq!(x.argsort(0, true, false)?, array![[1, 0, 1], [0, 1, 0]]);
/// let (v, i) = x.topk(1, -1, true, true)?;
/// assert_eq!((v, i), (array![[7], [5]], array![[1], [0]]));
/// # Ok::<(), gather::Error>(())
/// ```
pub trait SortExt<T: Element, D: Dimension> {
    /// See [`sort()`].
    fn sort(&self, dim: isize, descending: bool, stable: bool) -> Result<(Array<T, D>, Array<i64, D>)>;
    /// See [`argsort()`].
    fn argsort(&self, dim: isize, descending: bool, stable: bool) -> Result<Array<i64, D>>;
    /// See [`topk()`].
    fn topk(&self, k: usize, dim: isize, largest: bool, sorted: bool) -> Result<(Array<T, D>, Array<i64, D>)>;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> SortExt<T, D> for ArrayBase<S, D> {
    fn sort(&self, dim: isize, descending: bool, stable: bool) -> Result<(Array<T, D>, Array<i64, D>)> {
        sort(self, dim, descending, stable)
    }
    fn argsort(&self, dim: isize, descending: bool, stable: bool) -> Result<Array<i64, D>> {
        argsort(self, dim, descending, stable)
    }
    fn topk(&self, k: usize, dim: isize, largest: bool, sorted: bool) -> Result<(Array<T, D>, Array<i64, D>)> {
        topk(self, k, dim, largest, sorted)
    }
}
