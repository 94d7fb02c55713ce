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

use ndarray::{Array, ArrayBase, ArrayViewMut, Axis, Data, Dimension, IxDyn};

use super::{try_vec, view_1d_if_scalar};
use crate::dims::normalize_dim;
use crate::element::{DType, Element};
use crate::error::{Error, Result, fmt_shape};
use crate::kernels::order::order_lanes;

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

/// A new standard-layout array of `shape` filled with `fill`; an error (not an abort) when it does
/// not fit in memory.
fn try_filled<A: Clone, D: Dimension>(op: &str, shape: D, fill: A) -> Result<Array<A, D>> {
    let n = shape.size();
    let mut v = try_vec(op, n)?;
    v.resize(n, fill);
    Array::from_shape_vec(shape, v)
        .map_err(|e| Error::invalid(format!("{op}: internal error: {e}")))
}

/// The shared body of sort, argsort and topk: `dim` already normalised, `k` already checked;
/// `indices` (and `values`) have the output shape.
fn order_into<T, S, D>(
    input: &ArrayBase<S, D>,
    dim: usize,
    k: usize,
    flip: bool,
    values: Option<&mut Array<T, D>>,
    indices: &mut Array<i64, D>,
) where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let x = view_1d_if_scalar(input);
    let lane_k = if input.ndim() == 0 { 1 } else { k };
    let mut values = values.map(view_mut_1d_if_scalar);
    order_lanes(
        &x,
        dim,
        lane_k,
        flip,
        values.as_mut(),
        &mut view_mut_1d_if_scalar(indices),
    );
}

/// Allocates the `(values, indices)` of the `k` best per lane and computes them.
fn values_and_indices<T, S, D>(
    op: &str,
    input: &ArrayBase<S, D>,
    dim: usize,
    k: usize,
    flip: bool,
) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let shape = out_dim(&input.raw_dim(), dim, k);
    let mut values = try_filled(op, shape.clone(), T::default())?;
    let mut indices = try_filled(op, shape, 0i64)?;
    order_into(input, dim, k, flip, Some(&mut values), &mut indices);
    Ok((values, indices))
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
pub fn sort<T, S, D>(
    input: &ArrayBase<S, D>,
    dim: isize,
    descending: bool,
    stable: bool,
) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    // Every sort here is stable, so `stable = false` gets the stable order too.
    let _ = stable;
    let d = normalize_dim("sort", dim, input.ndim())?;
    let len = if input.ndim() == 0 {
        1
    } else {
        input.shape()[d]
    };
    values_and_indices("sort", input, d, len, descending)
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
pub fn argsort<T, S, D>(
    input: &ArrayBase<S, D>,
    dim: isize,
    descending: bool,
    stable: bool,
) -> Result<Array<i64, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let _ = stable;
    let d = normalize_dim("argsort", dim, input.ndim())?;
    let len = if input.ndim() == 0 {
        1
    } else {
        input.shape()[d]
    };
    let mut indices = try_filled("argsort", out_dim(&input.raw_dim(), d, len), 0i64)?;
    order_into(input, d, len, descending, None, &mut indices);
    Ok(indices)
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
pub fn topk<T, S, D>(
    input: &ArrayBase<S, D>,
    k: usize,
    dim: isize,
    largest: bool,
    sorted: bool,
) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    // The results are always sorted; `sorted = false` allows any order, so this is one of them.
    let _ = sorted;
    let k64 = i64::try_from(k).unwrap_or(i64::MAX);
    let d = check_topk(input.shape(), k64, dim, T::DTYPE)?;
    values_and_indices("topk", input, d, k, largest)
}

/// The checks of `topk(input, k, dim)` from the input's shape and dtype: the normalised dim.
/// `k` must be in `0..=input.shape[dim]` (a 0-d input has one element), and bool is refused.
pub(crate) fn check_topk(shape: &[usize], k: i64, dim: isize, dtype: DType) -> Result<usize> {
    let d = normalize_dim("topk", dim, shape.len())?;
    let size = if shape.is_empty() { 1 } else { shape[d] };
    if k < 0 || k as u64 > size as u64 {
        return Err(k_out_of_range(k, shape, d));
    }
    if dtype == DType::Bool {
        return Err(Error::invalid("topk does not support bool dtypes (as PyTorch on the CPU)")
            .with_hint("convert to an integer type first, e.g. `x.mapv(|b| b as u8)`; `sort` and `argsort` do take bool"));
    }
    Ok(d)
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
    fn sort(
        &self,
        dim: isize,
        descending: bool,
        stable: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)>;
    /// See [`argsort()`].
    fn argsort(&self, dim: isize, descending: bool, stable: bool) -> Result<Array<i64, D>>;
    /// See [`topk()`].
    fn topk(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)>;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> SortExt<T, D> for ArrayBase<S, D> {
    fn sort(
        &self,
        dim: isize,
        descending: bool,
        stable: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)> {
        sort(self, dim, descending, stable)
    }
    fn argsort(&self, dim: isize, descending: bool, stable: bool) -> Result<Array<i64, D>> {
        argsort(self, dim, descending, stable)
    }
    fn topk(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)> {
        topk(self, k, dim, largest, sorted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::kernels::order::{PAR_SORT_MIN, sort_key};
    use half::{bf16, f16};
    use ndarray::{Array1, ArrayD, ArrayViewD, Slice, arr0, array, s};
    use proptest::prelude::*;
    use std::cmp::Ordering;

    const NAN: f32 = f32::NAN;
    const INF: f32 = f32::INFINITY;

    /// Every coordinate of `shape` in row-major order.
    fn coords(shape: &[usize]) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        if shape.contains(&0) {
            return out;
        }
        let mut c = vec![0; shape.len()];
        loop {
            out.push(c.clone());
            let mut a = shape.len();
            loop {
                if a == 0 {
                    return out;
                }
                a -= 1;
                c[a] += 1;
                if c[a] < shape[a] {
                    break;
                }
                c[a] = 0;
            }
        }
    }

    /// The plain reference: for every lane, a stable insertion sort of `(value, index)` with
    /// PyTorch's comparator, then the first `k` (all when `None`). 0-d counts as one element.
    fn reference<T: Element>(
        x: &ArrayViewD<'_, T>,
        dim: usize,
        k: Option<usize>,
        flip: bool,
    ) -> (ArrayD<T>, ArrayD<i64>) {
        let x1 = if x.ndim() == 0 {
            x.clone().insert_axis(Axis(0))
        } else {
            x.clone()
        };
        let n = x1.shape()[dim];
        // A 0-d input returns its element for k = 0 too (PyTorch's quirk).
        let k = if x.ndim() == 0 {
            n
        } else {
            k.unwrap_or(n).min(n)
        };
        let mut out_shape = x1.shape().to_vec();
        out_shape[dim] = k;
        let mut values = ArrayD::from_elem(out_shape.clone(), T::default());
        let mut indices = ArrayD::<i64>::zeros(out_shape);
        let mut lane_shape = x1.shape().to_vec();
        lane_shape[dim] = 1;
        let before = |a: T, b: T| {
            let o = T::sort_cmp(a, b);
            if flip {
                o == Ordering::Greater
            } else {
                o == Ordering::Less
            }
        };
        for start in coords(&lane_shape) {
            let mut sorted: Vec<(T, usize)> = Vec::new();
            for j in 0..n {
                let mut c = start.clone();
                c[dim] = j;
                let v = x1[IxDyn(&c)];
                let p = sorted
                    .iter()
                    .position(|&(w, _)| before(v, w))
                    .unwrap_or(sorted.len());
                sorted.insert(p, (v, j));
            }
            for (j, &(v, i)) in sorted.iter().take(k).enumerate() {
                let mut c = start.clone();
                c[dim] = j;
                values[IxDyn(&c)] = v;
                indices[IxDyn(&c)] = i as i64;
            }
        }
        if x.ndim() == 0 {
            (
                values.index_axis_move(Axis(0), 0),
                indices.index_axis_move(Axis(0), 0),
            )
        } else {
            (values, indices)
        }
    }

    fn same<T: Element>(a: &ArrayD<T>, b: &ArrayD<T>) -> bool {
        a.shape() == b.shape()
            && a.iter()
                .zip(b.iter())
                .all(|(&p, &q)| p == q || (p.is_nan() && q.is_nan()))
    }

    #[test]
    fn appendix_b_sort_puts_nan_last_ascending_and_first_descending() {
        let x = array![3.0f32, NAN, 1.0, 3.0, -INF, 2.0, NAN, 3.0];
        let (v, i) = sort(&x, 0, false, true).unwrap();
        assert_eq!(i, array![4, 2, 5, 0, 3, 7, 1, 6]);
        assert_eq!(v.slice(s![..6]), array![-INF, 1.0, 2.0, 3.0, 3.0, 3.0]);
        assert!(v[6].is_nan() && v[7].is_nan());
        let (v, i) = sort(&x, 0, true, true).unwrap();
        assert_eq!(i, array![1, 6, 0, 3, 7, 5, 2, 4]);
        assert_eq!(v.slice(s![2..]), array![3.0, 3.0, 3.0, 2.0, 1.0, -INF]);
        assert_eq!(
            argsort(&x, -1, true, false).unwrap(),
            array![1, 6, 0, 3, 7, 5, 2, 4]
        );
    }

    #[test]
    fn appendix_b_topk_picks_nan_first() {
        let x = array![3.0f32, NAN, 1.0, 3.0, -INF, 2.0, NAN, 3.0];
        let (v, i) = topk(&x, 3, 0, true, true).unwrap();
        assert_eq!(i, array![1, 6, 0]);
        assert!(v[0].is_nan() && v[1].is_nan() && v[2] == 3.0);
        // Smallest: NaNs are never picked before numbers.
        let (v, i) = topk(&x, 3, 0, false, true).unwrap();
        assert_eq!((v, i), (array![-INF, 1.0, 2.0], array![4, 2, 5]));
    }

    #[test]
    fn signed_zeros_are_ties_and_keep_index_order() {
        let x = array![0.0f64, -0.0, 0.0, -0.0];
        let (v, i) = sort(&x, 0, false, false).unwrap();
        assert_eq!(i, array![0, 1, 2, 3]);
        let signs: Vec<bool> = v.iter().map(|z| z.is_sign_negative()).collect();
        assert_eq!(signs, vec![false, true, false, true]);
        assert_eq!(argsort(&x, 0, true, false).unwrap(), array![0, 1, 2, 3]);
    }

    #[test]
    fn ties_keep_index_order_in_both_directions_and_for_topk() {
        let x = Array1::<f32>::zeros(100);
        let ident: Array1<i64> = (0..100).collect();
        assert_eq!(argsort(&x, 0, false, false).unwrap(), ident);
        assert_eq!(argsort(&x, 0, true, false).unwrap(), ident);
        let (_, i) = topk(&array![1, 1, 1, 1, 0], 2, 0, true, true).unwrap();
        assert_eq!(i, array![0, 1]);
        let (_, i) = topk(&Array1::<f32>::zeros(200), 3, 0, true, false).unwrap();
        assert_eq!(i, array![0, 1, 2]);
    }

    #[test]
    fn sort_key_orders_like_sort_cmp_for_every_type() {
        fn check<T: Element>(vals: &[T]) {
            for &a in vals {
                for &b in vals {
                    assert_eq!(
                        sort_key(a).cmp(&sort_key(b)),
                        T::sort_cmp(a, b),
                        "{a:?} vs {b:?}"
                    );
                }
            }
        }
        check(&[false, true]);
        check(&[0u8, 1, 127, 128, 255]);
        check(&[i8::MIN, -1, 0, 1, i8::MAX]);
        check(&[i16::MIN, -300, 0, 300, i16::MAX]);
        check(&[i32::MIN, -1, 0, 1, i32::MAX]);
        check(&[
            i64::MIN,
            i64::MIN + 1,
            -(1 << 53) - 1,
            -1,
            0,
            1,
            (1 << 53) + 1,
            i64::MAX - 1,
            i64::MAX,
        ]);
        check(&[0u16, 1, u16::MAX]);
        check(&[0u32, 1, u32::MAX]);
        check(&[0u64, 1, (1 << 53) + 1, 1 << 63, u64::MAX - 1, u64::MAX]);
        check(&[
            f32::NAN,
            -f32::NAN,
            f32::NEG_INFINITY,
            f32::MIN,
            -1.0,
            -f32::MIN_POSITIVE * 0.5,
            -0.0,
            0.0,
            1e-45,
            1.0,
            f32::MAX,
            f32::INFINITY,
        ]);
        check(&[
            f64::NAN,
            f64::NEG_INFINITY,
            -5e-324,
            -0.0,
            0.0,
            5e-324,
            1.0,
            f64::INFINITY,
        ]);
        check(&[
            f16::NAN,
            f16::NEG_INFINITY,
            f16::MIN,
            f16::NEG_ZERO,
            f16::ZERO,
            f16::MIN_POSITIVE_SUBNORMAL,
            f16::MAX,
            f16::INFINITY,
        ]);
        check(&[
            bf16::NAN,
            bf16::NEG_INFINITY,
            bf16::MIN,
            bf16::NEG_ZERO,
            bf16::ZERO,
            bf16::MAX,
            bf16::INFINITY,
        ]);
    }

    #[test]
    fn zero_d_input_sorts_as_one_element_and_topk_accepts_k_0_and_1() {
        let x = arr0(2.5f32);
        let (v, i) = sort(&x, 0, false, false).unwrap();
        assert_eq!((v, i), (arr0(2.5), arr0(0)));
        assert_eq!(argsort(&x, -1, true, true).unwrap(), arr0(0));
        for k in [0, 1] {
            let (v, i) = topk(&x, k, 0, true, true).unwrap();
            assert_eq!((v, i), (arr0(2.5), arr0(0)));
        }
        let e = topk(&x, 2, 0, true, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("selected index k out of range"));
        assert_eq!(
            sort(&x, 1, false, false).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
    }

    #[test]
    fn errors_follow_pytorch_order_dim_then_k_then_dtype() {
        let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        assert_eq!(
            sort(&x, 2, false, false).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        assert_eq!(
            argsort(&x, -3, false, false).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        assert_eq!(
            topk(&x, 1, 2, true, true).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        let e = topk(&x, 4, 1, true, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string().contains("k = 4") && e.hint().unwrap().contains("0..=3"),
            "{e}"
        );
        let b = array![true, false];
        assert_eq!(
            topk(&b, 3, 1, true, true).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        let e = topk(&b, 1, 0, true, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("bool"));
        // bool sorts fine.
        assert_eq!(
            sort(&b, 0, false, true).unwrap(),
            (array![false, true], array![1, 0])
        );
    }

    #[test]
    fn empty_lanes_and_empty_outputs() {
        let x = ArrayD::<i16>::zeros(IxDyn(&[3, 0]));
        let (v, i) = sort(&x, 1, true, true).unwrap();
        assert_eq!((v.shape(), i.shape()), (&[3, 0][..], &[3, 0][..]));
        let x = ArrayD::<f32>::zeros(IxDyn(&[4, 0]));
        let (v, i) = topk(&x, 0, 1, false, true).unwrap();
        assert_eq!((v.shape(), i.shape()), (&[4, 0][..], &[4, 0][..]));
        assert!(topk(&x, 1, 1, false, true).is_err());
        let (v, _) = topk(&array![1u8, 2, 3], 0, 0, true, false).unwrap();
        assert_eq!(v.len(), 0);
        assert_eq!(
            argsort(&Array1::<u8>::zeros(0), 0, false, false)
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn extreme_64_bit_integers_sort_exactly() {
        let x = array![i64::MAX, i64::MIN, i64::MAX - 1, -1, (1 << 53) + 1, 1 << 53];
        let (v, i) = sort(&x, 0, false, true).unwrap();
        assert_eq!(
            v,
            array![i64::MIN, -1, 1 << 53, (1 << 53) + 1, i64::MAX - 1, i64::MAX]
        );
        assert_eq!(i, array![1, 3, 5, 4, 2, 0]);
        let u = array![u64::MAX, 0, u64::MAX - 1, 1 << 63];
        assert_eq!(argsort(&u, 0, true, true).unwrap(), array![0, 2, 3, 1]);
        let (v, _) = topk(&u, 2, 0, false, true).unwrap();
        assert_eq!(v, array![0, 1 << 63]);
    }

    #[test]
    fn half_types_order_like_f32() {
        let raw = [3.0f32, NAN, -0.0, 0.0, -INF, 1.5, INF];
        let h: Array1<f16> = raw.iter().map(|&v| f16::from_f32(v)).collect();
        let b: Array1<bf16> = raw.iter().map(|&v| bf16::from_f32(v)).collect();
        let f: Array1<f32> = raw.iter().copied().collect();
        let want = argsort(&f, 0, true, true).unwrap();
        assert_eq!(argsort(&h, 0, true, true).unwrap(), want);
        assert_eq!(argsort(&b, 0, true, true).unwrap(), want);
        assert_eq!(want, array![1, 6, 0, 5, 2, 3, 4]);
    }

    #[test]
    fn strided_and_reversed_views_are_read_in_place() {
        let base = ndarray::Array3::from_shape_fn((4, 5, 6), |(a, b, c)| {
            ((a * 7 + b * 3 + c * 5) % 4) as f32
        });
        let views = [
            base.slice(s![..;-1, 1.., ..;2]).into_dyn(),
            base.view().permuted_axes([2, 0, 1]).into_dyn(),
            base.slice(s![.., ..;-2, 3]).into_dyn(),
        ];
        for x in views {
            for dim in 0..x.ndim() {
                for flip in [false, true] {
                    let (rv, ri) = reference(&x, dim, None, flip);
                    let (v, i) = sort(&x, dim as isize, flip, false).unwrap();
                    assert!(same(&v, &rv) && i == ri, "sort dim {dim} flip {flip}");
                    let k = x.shape()[dim] / 2;
                    let (rv, ri) = reference(&x, dim, Some(k), !flip);
                    let (v, i) = topk(&x, k, dim as isize, !flip, true).unwrap();
                    assert!(same(&v, &rv) && i == ri, "topk dim {dim} largest {}", !flip);
                }
            }
        }
    }

    #[test]
    fn big_inputs_run_in_parallel_and_match_the_reference_bitwise_for_any_thread_count() {
        // 300 x 257 floats with many ties and NaNs: above the parallel threshold along both dims.
        let x = ndarray::Array2::from_shape_fn((300, 257), |(a, b)| match (a * 31 + b * 17) % 23 {
            0 => f32::NAN,
            1 => -0.0,
            r => (r % 9) as f32 - 4.0,
        })
        .into_dyn();
        let run = |threads: usize| {
            let pool = crate::kernels::test_pool(threads);
            pool.install(|| {
                (0..2)
                    .map(|dim| {
                        (
                            sort(&x, dim, true, false).unwrap(),
                            topk(&x, 5, dim, false, false).unwrap(),
                            argsort(&x, dim, false, true).unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        };
        let one = run(1);
        let four = run(4);
        for dim in 0..2 {
            let (rv, ri) = reference(&x.view(), dim, None, true);
            let ((v, i), _, _) = &one[dim];
            assert!(same(v, &rv) && *i == ri, "sort dim {dim}");
            let (rv, ri) = reference(&x.view(), dim, Some(5), false);
            let (_, (v, i), _) = &one[dim];
            assert!(same(v, &rv) && *i == ri, "topk dim {dim}");
            let (_, ri) = reference(&x.view(), dim, None, false);
            assert_eq!(one[dim].2, ri);
            let bits = |a: &ArrayD<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&one[dim].0.0), bits(&four[dim].0.0));
            assert_eq!(one[dim].0.1, four[dim].0.1);
            assert_eq!(one[dim].1.1, four[dim].1.1);
            assert_eq!(one[dim].2, four[dim].2);
        }
    }

    #[test]
    fn one_long_lane_uses_the_parallel_sort_and_stays_stable() {
        let n = 3 * PAR_SORT_MIN + 7;
        let x: Array1<i32> = (0..n).map(|i| ((i * 7919) % 1000) as i32).collect();
        let mut want: Vec<(i32, usize)> = x.iter().copied().zip(0..).collect();
        want.sort_by_key(|p| std::cmp::Reverse(p.0)); // std's stable sort, descending
        let (v, i) = sort(&x, 0, true, false).unwrap();
        assert!(v.iter().zip(&want).all(|(a, b)| *a == b.0));
        assert!(i.iter().zip(&want).all(|(a, b)| *a == b.1 as i64));
        let (v, i) = topk(&x, 10, 0, true, true).unwrap();
        assert_eq!(
            v.to_vec(),
            want[..10].iter().map(|p| p.0).collect::<Vec<_>>()
        );
        assert_eq!(
            i.to_vec(),
            want[..10].iter().map(|p| p.1 as i64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn method_forms_match_the_free_functions() {
        let x = array![[4u16, 1, 3], [2, 2, 0]];
        assert_eq!(
            x.sort(1, false, false).unwrap(),
            sort(&x, 1, false, false).unwrap()
        );
        assert_eq!(
            x.view().argsort(0, true, true).unwrap(),
            argsort(&x, 0, true, true).unwrap()
        );
        assert_eq!(
            x.topk(2, 1, true, false).unwrap(),
            topk(&x, 2, 1, true, false).unwrap()
        );
    }

    const PALETTE: [f32; 10] = [NAN, -INF, -1.5, -0.0, 0.0, 1.0, 1.0, 2.5, INF, 2.5];

    /// A random array viewed four ways: a sub-block, every other element, reversed with steps,
    /// and transposed.
    fn arb_case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, usize, isize, bool, usize)> {
        prop::collection::vec(0usize..5, 0..4).prop_flat_map(|shape| {
            let n: usize = shape.iter().map(|s| 2 * s).product();
            let rank = shape.len().max(1) as isize;
            (
                Just(shape),
                prop::collection::vec(0usize..PALETTE.len(), n),
                0usize..4,
                -rank..rank,
                any::<bool>(),
                0usize..8,
            )
        })
    }

    fn make_view<'a, T>(base: &'a ArrayD<T>, kind: usize) -> ArrayViewD<'a, T> {
        match kind {
            0 => base.slice_each_axis(|ax| Slice::new(0, Some((ax.len / 2) as isize), 1)),
            1 => base.slice_each_axis(|_| Slice::new(0, None, 2)),
            2 => base.slice_each_axis(|_| Slice::new(0, None, -2)),
            _ => base
                .slice_each_axis(|ax| Slice::new((ax.len / 2) as isize, None, 1))
                .reversed_axes(),
        }
    }

    proptest! {
        #[test]
        fn random_views_match_the_reference((shape, vals, kind, dim, flip, kseed) in arb_case()) {
            let big: Vec<usize> = shape.iter().map(|s| 2 * s).collect();
            let base = ArrayD::from_shape_vec(IxDyn(&big), vals.iter().map(|&i| PALETTE[i]).collect()).unwrap();
            let x = make_view(&base, kind);
            let d = normalize_dim("t", dim, x.ndim()).unwrap();
            let (rv, ri) = reference(&x, d, None, flip);
            let (v, i) = sort(&x, dim, flip, kseed % 2 == 0).unwrap();
            prop_assert!(same(&v, &rv));
            prop_assert_eq!(&i, &ri);
            prop_assert_eq!(argsort(&x, dim, flip, false).unwrap(), ri);
            let size = if x.ndim() == 0 { 1 } else { x.shape()[d] };
            let k = kseed.min(size);
            let (rv, ri) = reference(&x, d, Some(k), flip);
            let (v, i) = topk(&x, k, dim, flip, kseed % 2 == 1).unwrap();
            if x.ndim() == 0 {
                prop_assert_eq!(v.shape(), &[] as &[usize]);
            }
            prop_assert!(same(&v, &rv));
            prop_assert_eq!(i, ri);
            // Integers, through the 64-bit key path.
            let xi = x.mapv(|f| match f {
                f if f.is_nan() => i64::MAX,
                f if f == INF => i64::MAX - 1,
                f if f == -INF => i64::MIN,
                f => (f * 2.0) as i64,
            });
            let (rv, ri) = reference(&xi.view(), d, None, flip);
            prop_assert_eq!(sort(&xi, dim, flip, true).unwrap(), (rv, ri));
        }
    }
}
