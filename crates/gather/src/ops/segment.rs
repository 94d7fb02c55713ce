//! Segment reductions along any axis of an N-D array, and `bincount` (with an axis).
//!
//! A segment is a run of consecutive positions along `axis`. Segments are given as CSR offsets
//! (`S + 1` positions), as sorted segment ids (one per position, COO), or as lengths:
//!
//! ```text
//! segment_reduce(src, axis=1, segments, Sum)          src [2, 6] → out [2, S=3]
//!
//!   position along axis   0   1   2   3   4   5
//!   offsets  [0, 2, 2, 6]   ├─s0──┤├──────s2──────┤     (s1 = 2..2 is empty)
//!   ids      [0, 0, 2, 2, 2, 2]                         (the same segments, COO)
//!   lengths  [2, 0, 4]                                  (the same segments, torch.segment_reduce)
//!
//!   src row 0:  1   2   3   4   5   6     →  out row 0:  3   fill   18
//!   src row 1:  1   1   1   1   1   1     →  out row 1:  2   fill    4
//! ```
//!
//! - Every lane along `axis` (every position of the other axes) is reduced with the same
//!   segments; the output has `src`'s shape with `axis` replaced by the number of segments `S`.
//! - Offsets must be non-decreasing and within `0..=src.shape[axis]`; positions before
//!   `offsets[0]` or after `offsets[S]` belong to no segment and are ignored (as in
//!   pytorch_scatter's `segment_csr`). Lengths must be non-negative and sum to
//!   `src.shape[axis]` (as `torch.segment_reduce`). Ids must be non-negative and sorted; the number
//!   of segments is `num_segments` or the largest id + 1.
//! - The reductions are the [`GroupReduce`]s of [`reduce`](super::reduce), with the same fill for
//!   empty segments, plus `softmax`/`log_softmax` (output shaped like `src`) and `any`/`all`. They
//!   run through the same implementation as [`scatter_groups`](super::reduce::scatter_groups): a
//!   segment op is a scatter with a sorted 1-D index. Each segment is reduced in order by one
//!   thread, so results are bitwise the same for any thread count.
//! - Empty segments hold the fill: [`EmptyFill::Identity`] gives `0` for sum and mean, `-inf`
//!   for amax (pytorch_scatter gives `0` for an empty max: pass [`EmptyFill::Zero`];
//!   `torch.segment_reduce` gives NaN for an empty mean: pass [`EmptyFill::Nan`]).
//!
//! `bincount(input)` counts each value of a non-negative integer array; `bincount_axis` does it
//! along one axis of an N-D array (NumPy's long-requested `bincount(axis=)`), and the `_weighted`
//! forms sum weights instead of counting.

use ndarray::{
    Array, Array1, ArrayBase, ArrayD, ArrayView, ArrayView1, Axis, Data, Dimension, Ix1, IxDyn,
    Slice,
};

use super::reduce::{
    AnyAll, ArgReduce, EmptyFill, GroupReduce, NO_ARG, ReduceElement, arg_fold, bool_fill,
    check_grouped, check_reduce_dtype, fill_value, fold_any_all, into_dim, reduce_groups,
    softmax_groups, spread, truth, try_full,
};
use crate::dims::normalize_dim;
use crate::element::Element;
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::grad::GradFloat;
use crate::index::IndexElem;

/// How the positions along the axis split into segments.
///
/// ```
/// use gather::ops::segment::Segments;
/// use ndarray::array;
/// let offsets = array![0i64, 2, 2, 6];
/// let ids = array![0u32, 0, 2, 2, 2, 2];
/// let lengths = array![2i32, 0, 4];
/// // Three ways to say the same thing.
/// let a = Segments::offsets(&offsets);
/// let b = Segments::ids(&ids);
/// let c = Segments::lengths(&lengths);
/// # let _ = (a, b, c);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Segments<'a, I: IndexElem> {
    /// CSR offsets (`indptr`): `S + 1` non-decreasing positions; segment `s` is
    /// `offsets[s]..offsets[s + 1]`.
    Offsets(ArrayView1<'a, I>),
    /// Sorted segment ids (COO), one per position along the axis.
    Ids {
        /// The id of each position; non-decreasing and non-negative.
        ids: ArrayView1<'a, I>,
        /// The number of segments; `None`: the largest id + 1.
        num_segments: Option<usize>,
    },
    /// The length of each segment, in order; they sum to the axis length.
    Lengths(ArrayView1<'a, I>),
}

impl<'a, I: IndexElem> Segments<'a, I> {
    /// CSR offsets (pytorch_scatter's `segment_csr(src, indptr)`).
    ///
    /// ```
    /// use gather::ops::segment::{segment_reduce, Segments};
    /// use gather::ops::reduce::{EmptyFill, GroupReduce};
    /// use ndarray::array;
    /// let out = segment_reduce(&array![1, 2, 3, 4], 0, Segments::offsets(&array![0, 1, 4]), GroupReduce::Sum, EmptyFill::Identity)?;
    /// assert_eq!(out, array![1, 9]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn offsets<S: Data<Elem = I>>(offsets: &'a ArrayBase<S, Ix1>) -> Self {
        Segments::Offsets(offsets.view())
    }

    /// Sorted segment ids; the number of segments is the largest id + 1 (pytorch_scatter's
    /// `segment_coo(src, index)`).
    ///
    /// ```
    /// use gather::ops::segment::{segment_reduce, Segments};
    /// use gather::ops::reduce::{EmptyFill, GroupReduce};
    /// use ndarray::array;
    /// let out = segment_reduce(&array![1, 2, 3, 4], 0, Segments::ids(&array![0, 2, 2, 2]), GroupReduce::Amax, EmptyFill::Zero)?;
    /// assert_eq!(out, array![1, 0, 4]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn ids<S: Data<Elem = I>>(ids: &'a ArrayBase<S, Ix1>) -> Self {
        Segments::Ids {
            ids: ids.view(),
            num_segments: None,
        }
    }

    /// Sorted segment ids with a given number of segments (JAX's `num_segments`).
    ///
    /// ```
    /// use gather::ops::segment::{segment_reduce, Segments};
    /// use gather::ops::reduce::{EmptyFill, GroupReduce};
    /// use ndarray::array;
    /// let out = segment_reduce(&array![1, 2], 0, Segments::ids_with(&array![0, 0], 3), GroupReduce::Sum, EmptyFill::Identity)?;
    /// assert_eq!(out, array![3, 0, 0]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn ids_with<S: Data<Elem = I>>(ids: &'a ArrayBase<S, Ix1>, num_segments: usize) -> Self {
        Segments::Ids {
            ids: ids.view(),
            num_segments: Some(num_segments),
        }
    }

    /// Segment lengths (`torch.segment_reduce(data, reduce, lengths=)`).
    ///
    /// ```
    /// use gather::ops::segment::{segment_reduce, Segments};
    /// use gather::ops::reduce::{EmptyFill, GroupReduce};
    /// use ndarray::array;
    /// let out = segment_reduce(&array![1.0, 2.0, 3.0], 0, Segments::lengths(&array![1, 2]), GroupReduce::Mean, EmptyFill::Identity)?;
    /// assert_eq!(out, array![1.0, 2.5]);
    /// # Ok::<(), gather::Error>(())
    /// ```
    pub fn lengths<S: Data<Elem = I>>(lengths: &'a ArrayBase<S, Ix1>) -> Self {
        Segments::Lengths(lengths.view())
    }
}

/// Segments checked against an axis of length `n`: the covered range `start..end` of the axis,
/// the segment of every covered position, and the number of segments. The ids are `i64`, the
/// index type the group folds are compiled for anyway (the dtype-dispatched ops widen every
/// index to it), so that segments add no instance of them.
pub(crate) struct Resolved {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) ids: Vec<i64>,
    pub(crate) num: usize,
}

fn bad_value(op: &str, what: &str, k: usize, v: i64, msg: String, hint: String) -> Error {
    Error::new(
        ErrorKind::IndexOutOfBounds,
        format!("{op}: {what}[{k}] = {v} {msg}"),
    )
    .with_hint(hint)
    .with_index(v, vec![k])
}

/// Validates `segments` against an axis of length `n` (axis number `axis`, for the messages).
pub(crate) fn resolve<I: IndexElem>(
    op: &str,
    segments: &Segments<'_, I>,
    axis: usize,
    n: usize,
) -> Result<Resolved> {
    match segments {
        Segments::Offsets(off) => {
            if off.is_empty() {
                return Err(Error::shape(format!(
                    "{op}: offsets is empty; S segments need S + 1 offsets"
                ))
                .with_hint("for no segments pass one offset, e.g. [0]; for one segment over the whole axis pass [0, len]"));
            }
            let vals: Vec<i64> = off.iter().map(|v| v.to_i64()).collect();
            for (k, &v) in vals.iter().enumerate() {
                if v < 0 || v > n as i64 {
                    return Err(bad_value(
                        op,
                        "offsets",
                        k,
                        v,
                        format!("is out of range for dimension {axis} with size {n}"),
                        format!(
                            "offsets are positions along axis {axis}: 0 <= offsets[0] <= .. <= offsets[S] <= {n}"
                        ),
                    ));
                }
                if k > 0 && v < vals[k - 1] {
                    return Err(Error::invalid(format!(
                        "{op}: offsets must be non-decreasing, but offsets[{}] = {} > offsets[{k}] = {v}",
                        k - 1,
                        vals[k - 1]
                    ))
                    .with_hint("offsets are cumulative segment lengths (CSR indptr): [0, n0, n0+n1, ...]; pass Segments::lengths for lengths, or Segments::ids for one id per position"));
                }
            }
            let start = vals[0] as usize;
            let end = *vals.last().expect("non-empty") as usize;
            let mut ids = Vec::with_capacity(end - start);
            for s in 0..vals.len() - 1 {
                ids.extend(std::iter::repeat_n(
                    s as i64,
                    (vals[s + 1] - vals[s]) as usize,
                ));
            }
            Ok(Resolved {
                start,
                end,
                ids,
                num: vals.len() - 1,
            })
        }
        Segments::Lengths(len) => {
            if let Some((k, v)) = len.iter().map(|v| v.to_i64()).enumerate().find(|e| e.1 < 0) {
                return Err(Error::invalid(format!("{op}: lengths[{k}] = {v} is negative"))
                    .with_hint("segment lengths count positions along the axis; use 0 for an empty segment"));
            }
            let total: i64 = len.iter().fold(0i64, |a, v| a.saturating_add(v.to_i64()));
            if total != n as i64 {
                return Err(Error::shape(format!(
                    "{op}: lengths sum to {total} but src has {n} positions along dimension {axis}"
                ))
                .with_hint(format!(
                    "the lengths of all segments must add up to {n}; to reduce only part of the axis, pass Segments::offsets"
                )));
            }
            let mut ids = Vec::with_capacity(n);
            for (k, v) in len.iter().enumerate() {
                ids.extend(std::iter::repeat_n(k as i64, v.to_i64() as usize));
            }
            Ok(Resolved {
                start: 0,
                end: n,
                ids,
                num: len.len(),
            })
        }
        Segments::Ids { ids, num_segments } => {
            if ids.len() != n {
                return Err(Error::shape(format!(
                    "{op}: ids has {} elements but src has {n} positions along dimension {axis}",
                    ids.len()
                ))
                .with_hint("give one segment id per position along the axis"));
            }
            let mut out = Vec::with_capacity(n);
            let mut prev: i64 = 0;
            for (k, v) in ids.iter().enumerate() {
                let v = v.to_i64();
                if v < 0 || num_segments.is_some_and(|m| v >= m as i64) {
                    let hint = match num_segments {
                        Some(m) => format!("segment ids are in 0..{m} (num_segments = {m})"),
                        None => "segment ids count from 0".to_string(),
                    };
                    return Err(bad_value(
                        op,
                        "ids",
                        k,
                        v,
                        "is not a valid segment id".into(),
                        hint,
                    ));
                }
                if v < prev {
                    return Err(Error::invalid(format!(
                        "{op}: segment ids must be sorted (non-decreasing), but ids[{k}] = {v} comes after ids[{}] = {prev}",
                        k - 1
                    ))
                    .with_hint("sort src along the axis by id first (argsort the ids, then index_select), or use scatter_groups, which takes ids in any order"));
                }
                prev = v;
                out.push(v);
            }
            let num = num_segments.unwrap_or_else(|| out.last().map_or(0, |&m| m as usize + 1));
            Ok(Resolved {
                start: 0,
                end: n,
                ids: out,
                num,
            })
        }
    }
}

/// The axis of a segment op on a `src` of `shape` (not 0-d).
pub(crate) fn segment_axis(op: &str, shape: &[usize], axis: isize) -> Result<usize> {
    if shape.is_empty() {
        return Err(Error::rank(format!(
            "{op}: src is 0-d; a segment reduction needs at least one axis"
        ))
        .with_hint("give src an axis first: `src.insert_axis(Axis(0))`"));
    }
    normalize_dim(op, axis, shape.len())
}

/// The error for a segments tensor `name` (offsets, ids, lengths) that is not 1-D.
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn segments_rank_error(op: &str, name: &str, shape: &[usize]) -> Error {
    Error::rank(format!(
        "{op}: {name} must be 1-D, but got {} dims {}",
        shape.len(),
        fmt_shape(shape)
    ))
    .with_hint(format!(
        "{name} describes the positions along dim, the same for every lane: flatten it (`.into_shape_with_order(n)`)"
    ))
}

/// The checked segment call: the axis, the resolved segments, and the covered part of `src`.
fn check_segment<'a, T, I: IndexElem>(
    op: &str,
    src: ArrayView<'a, T, IxDyn>,
    axis: isize,
    segments: &Segments<'_, I>,
) -> Result<(usize, Resolved, ArrayView<'a, T, IxDyn>)> {
    let d = segment_axis(op, src.shape(), axis)?;
    let r = resolve(op, segments, d, src.shape()[d])?;
    let mut s = src;
    s.slice_axis_inplace(Axis(d), Slice::from(r.start..r.end));
    Ok((d, r, s))
}

/// Reduces each segment of `src` along `axis` (pytorch_scatter's `segment_csr`/`segment_coo`,
/// `torch.segment_reduce`, JAX's `segment_*` with sorted ids), for every lane of an N-D array.
///
/// The output has `src`'s shape with `axis` replaced by the number of segments; empty segments
/// hold `fill`. See the [module docs](self) for the rules.
///
/// ```
/// use gather::ops::segment::{segment_reduce, Segments};
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// use ndarray::array;
///
/// // pytorch_scatter's segment_csr example: src [2, 6], indptr [0, 2, 5, 6] along the last axis.
/// let src = array![[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]];
/// let indptr = array![0, 2, 5, 6];
/// let out = segment_reduce(&src, -1, Segments::offsets(&indptr), GroupReduce::Sum, EmptyFill::Identity)?;
/// assert_eq!(out, array![[3.0, 12.0, 6.0], [15.0, 30.0, 12.0]]);
///
/// // Empty segments get the fill; errors say what is wrong and how to fix it.
/// let out = segment_reduce(&src, 1, Segments::lengths(&array![2, 0, 4]), GroupReduce::Amax, EmptyFill::Nan)?;
/// assert!(out[[0, 1]].is_nan());
/// let err = segment_reduce(&src, 1, Segments::ids(&array![0, 1, 1, 0, 2, 2]), GroupReduce::Sum, EmptyFill::Identity).unwrap_err();
/// assert!(err.to_string().contains("ids[3] = 0 comes after ids[2] = 1"));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_reduce<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
    reduce: GroupReduce,
    fill: EmptyFill<T>,
) -> Result<Array<T, D>>
where
    T: ReduceElement,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let op = "segment_reduce";
    let (d, r, s) = check_segment(op, src.view().into_dyn(), axis, &segments)?;
    check_reduce_dtype::<T>(op, reduce)?;
    let fill = fill_value(op, reduce, fill)?;
    let mut shape = src.shape().to_vec();
    shape[d] = r.num;
    let mut out = try_full(op, &shape, fill)?;
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, s.ndim());
    reduce_groups(reduce, d, s, ids, out.view_mut());
    Ok(into_dim(out))
}

/// The maximum (or minimum) of each segment and the position along `axis` of the source that
/// holds it (pytorch_scatter's `segment_csr(src, indptr, reduce="max")` → `(out, arg)`).
///
/// The values are bitwise those of [`segment_reduce`] with `Amax`/`Amin`. The arg is the
/// position in `src` along `axis` (offsets included) of the **first** source holding the result
/// (for a NaN result, the first NaN); empty segments hold `fill` and the arg
/// [`NO_ARG`] (`-1`; pytorch_scatter uses `src.shape[axis]`). Its
/// gradient is [`grad::segment_arg_reduce`](crate::grad::segment_arg_reduce).
///
/// ```
/// use gather::ops::segment::{segment_arg_reduce, Segments};
/// use gather::ops::reduce::{ArgReduce, EmptyFill};
/// use ndarray::array;
/// let src = array![[3.0f32, 9.0, 9.0, 1.0, 4.0]];
/// let (out, arg) = segment_arg_reduce(&src, 1, Segments::offsets(&array![1, 3, 3, 5]), ArgReduce::Amax, EmptyFill::Zero)?;
/// assert_eq!(out, array![[9.0, 0.0, 4.0]]);
/// assert_eq!(arg, array![[1, -1, 4]]); // the first 9; segment 1 is empty
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_arg_reduce<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
    reduce: ArgReduce,
    fill: EmptyFill<T>,
) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: ReduceElement,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let op = "segment_arg_reduce";
    let (d, r, s) = check_segment(op, src.view().into_dyn(), axis, &segments)?;
    let as_group = match reduce {
        ArgReduce::Amax => GroupReduce::Amax,
        ArgReduce::Amin => GroupReduce::Amin,
    };
    let fill = fill_value(op, as_group, fill)?;
    let mut shape = src.shape().to_vec();
    shape[d] = r.num;
    let mut out = try_full(op, &shape, fill)?;
    let mut arg = try_full(op, &shape, NO_ARG)?;
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, s.ndim());
    arg_fold(
        reduce,
        false,
        d,
        out.view_mut(),
        arg.view_mut(),
        ids,
        s,
        r.start as i64,
    );
    Ok((into_dim(out), into_dim(arg)))
}

/// segment_any / segment_all on the truths of src (see [`truth`]).
fn segment_bool<I: IndexElem>(
    op: &str,
    which: AnyAll,
    src: ArrayView<'_, bool, IxDyn>,
    axis: isize,
    segments: &Segments<'_, I>,
    fill: EmptyFill<bool>,
) -> Result<ArrayD<bool>> {
    let full = src.shape().to_vec();
    let (d, r, s) = check_segment(op, src, axis, segments)?;
    let fill = bool_fill(op, fill, which == AnyAll::All)?;
    let mut shape = full;
    shape[d] = r.num;
    let mut out = try_full(op, &shape, fill)?;
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, s.ndim());
    fold_any_all(which, d, s, ids, out.view_mut());
    Ok(out)
}

/// Whether any element of each segment is nonzero (NaN counts as nonzero). Empty segments hold
/// `fill` (`Identity`: `false`).
///
/// ```
/// use gather::ops::segment::{segment_any, Segments};
/// use gather::ops::reduce::EmptyFill;
/// use ndarray::array;
/// let out = segment_any(&array![0u8, 0, 3], 0, Segments::lengths(&array![2, 1, 0]), EmptyFill::Identity)?;
/// assert_eq!(out, array![false, true, false]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_any<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
    fill: EmptyFill<bool>,
) -> Result<Array<bool, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let out = segment_bool(
        "segment_any",
        AnyAll::Any,
        truth(&src.view().into_dyn()).view(),
        axis,
        &segments,
        fill,
    )?;
    Ok(into_dim(out))
}

/// Whether every element of each segment is nonzero. Empty segments hold `fill` (`Identity`:
/// `true`).
///
/// ```
/// use gather::ops::segment::{segment_all, Segments};
/// use gather::ops::reduce::EmptyFill;
/// use ndarray::array;
/// let out = segment_all(&array![true, false, true], 0, Segments::offsets(&array![0, 2, 3, 3]), EmptyFill::Identity)?;
/// assert_eq!(out, array![false, true, true]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_all<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
    fill: EmptyFill<bool>,
) -> Result<Array<bool, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let out = segment_bool(
        "segment_all",
        AnyAll::All,
        truth(&src.view().into_dyn()).view(),
        axis,
        &segments,
        fill,
    )?;
    Ok(into_dim(out))
}

/// The error of a softmax whose offsets cover only `start..end` of the `n` positions along `d`.
pub(crate) fn uncovered(op: &str, start: usize, end: usize, n: usize, d: usize) -> Error {
    Error::shape(format!(
        "{op}: the offsets cover positions {start}..{end} but src has {n} along dimension {d}; every element must belong to a segment"
    ))
    .with_hint(format!("start the offsets at 0 and end them at {n}"))
}

fn segment_softmax_call<T: GradFloat, I: IndexElem>(
    op: &str,
    log: bool,
    src: ArrayView<'_, T, IxDyn>,
    axis: isize,
    segments: &Segments<'_, I>,
) -> Result<ArrayD<T>> {
    let full = src.shape().to_vec();
    let (d, r, s) = check_segment(op, src, axis, segments)?;
    if r.start != 0 || r.end != full[d] {
        return Err(uncovered(op, r.start, r.end, full[d], d));
    }
    let mut out = try_full(op, &full, T::default())?;
    let ids = ArrayView::from(&r.ids[..]).into_dyn();
    let ids = spread(ids, d, s.ndim());
    softmax_groups(log, d, r.num, s, ids, out.view_mut());
    Ok(out)
}

/// Softmax of every element of `src` within its segment along `axis`, numerically stable, in
/// two passes and no intermediate arrays (see
/// [`scatter_softmax`](super::reduce::scatter_softmax)). The segments must cover the axis.
///
/// ```
/// use gather::ops::segment::{segment_softmax, Segments};
/// use ndarray::array;
/// let out = segment_softmax(&array![[0.0f64, 0.0, 7.0]], 1, Segments::lengths(&array![2, 1]))?;
/// assert_eq!(out, array![[0.5, 0.5, 1.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_softmax<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let out = segment_softmax_call(
        "segment_softmax",
        false,
        src.view().into_dyn(),
        axis,
        &segments,
    )?;
    Ok(into_dim(out))
}

/// Log-softmax of every element of `src` within its segment along `axis` (see
/// [`segment_softmax`]).
///
/// ```
/// use gather::ops::segment::{segment_log_softmax, Segments};
/// use ndarray::array;
/// let out = segment_log_softmax(&array![3.0f32, 3.0], 0, Segments::ids(&array![0, 0]))?;
/// assert_eq!(out, array![-std::f32::consts::LN_2, -std::f32::consts::LN_2]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn segment_log_softmax<T, S, D, I>(
    src: &ArrayBase<S, D>,
    axis: isize,
    segments: Segments<'_, I>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    let out = segment_softmax_call(
        "segment_log_softmax",
        true,
        src.view().into_dyn(),
        axis,
        &segments,
    )?;
    Ok(into_dim(out))
}

// ---------------------------------------------------------------------------------------------
// bincount

/// The number of bins: the largest value + 1, at least `minlength`; negative values are errors.
fn bins<I: IndexElem>(
    op: &str,
    input: &ArrayView<'_, I, IxDyn>,
    minlength: usize,
) -> Result<usize> {
    let mut max: i64 = -1;
    for (pos, v) in input.indexed_iter() {
        let v = v.to_i64();
        if v < 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{op}: only supports non-negative integral inputs, but input{} = {v}",
                    fmt_shape(pos.slice())
                ),
            )
            .with_hint("bincount counts values 0, 1, 2, ...; shift the values (e.g. subtract the minimum) or drop the negative ones first")
            .with_index(v, pos.slice().to_vec()));
        }
        max = max.max(v);
    }
    let n = usize::try_from(max + 1).unwrap_or(usize::MAX);
    Ok(n.max(minlength))
}

fn bincount_call<T, I>(
    op: &str,
    input: ArrayView<'_, I, IxDyn>,
    axis: isize,
    weights: ArrayView<'_, T, IxDyn>,
    minlength: usize,
) -> Result<ArrayD<T>>
where
    T: ReduceElement,
    I: IndexElem,
{
    if input.ndim() == 0 {
        return Err(Error::rank(format!(
            "{op}: input is 0-d; bincount needs at least one axis"
        ))
        .with_hint("give the input an axis first: `input.insert_axis(Axis(0))`"));
    }
    let d = normalize_dim(op, axis, input.ndim())?;
    let n = bins(op, &input, minlength)?;
    let full = input.shape().to_vec();
    let g = check_grouped(op, weights, d as isize, input, Some(n))?;
    let mut shape = full;
    shape[d] = n;
    let mut out = try_full(op, &shape, T::from_acc(T::acc_zero()))?;
    reduce_groups(GroupReduce::Sum, g.dim, g.src, g.index, out.view_mut());
    Ok(out)
}

fn check_weights(op: &str, input: &[usize], weights: &[usize]) -> Result<()> {
    if input == weights {
        return Ok(());
    }
    Err(Error::shape(format!(
        "{op}: weights {} must have the shape of input {}",
        fmt_shape(weights),
        fmt_shape(input)
    ))
    .with_hint("give one weight per input value"))
}

/// `torch.bincount(input, minlength=)`: how often each value `0..n` occurs in a 1-D array of
/// non-negative integers; `n` is the largest value + 1, at least `minlength`.
///
/// ```
/// use ndarray::array;
/// assert_eq!(gather::ops::segment::bincount(&array![1u8, 3, 1, 0], 0)?, array![1, 2, 0, 1]);
/// assert_eq!(gather::ops::segment::bincount(&ndarray::Array1::<i64>::zeros(0), 3)?, array![0, 0, 0]);
/// assert!(gather::ops::segment::bincount(&array![1, -2], 0).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bincount<I, S>(input: &ArrayBase<S, Ix1>, minlength: usize) -> Result<Array1<i64>>
where
    I: IndexElem,
    S: Data<Elem = I>,
{
    bincount_axis(input, 0, minlength)
}

/// `torch.bincount(input, weights, minlength)`: the sum of the weights of each value. Sums run
/// in index order in the accumulation type (`f32` for `f16`/`bf16`); the output has the
/// weights' type (PyTorch returns `f64` for non-`f32` weights).
///
/// ```
/// use ndarray::array;
/// let w = array![0.5f32, 1.0, 2.0];
/// assert_eq!(gather::ops::segment::bincount_weighted(&array![2, 0, 2], &w, 0)?, array![1.0, 0.0, 2.5]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bincount_weighted<I, S, T, SW>(
    input: &ArrayBase<S, Ix1>,
    weights: &ArrayBase<SW, Ix1>,
    minlength: usize,
) -> Result<Array1<T>>
where
    I: IndexElem,
    S: Data<Elem = I>,
    T: ReduceElement,
    SW: Data<Elem = T>,
{
    bincount_weighted_axis(input, 0, weights, minlength)
}

/// `bincount` along `axis` of an N-D array: every lane along `axis` is counted separately; the
/// output has the input's shape with `axis` replaced by the number of bins (the largest value in
/// the whole array + 1, at least `minlength`).
///
/// ```
/// use ndarray::array;
/// let x = array![[0u8, 1, 1], [2, 2, 2]];
/// assert_eq!(gather::ops::segment::bincount_axis(&x, 1, 0)?, array![[1, 2, 0], [0, 0, 3]]);
/// assert_eq!(gather::ops::segment::bincount_axis(&x, 0, 0)?, array![[1, 0, 0], [0, 1, 1], [1, 1, 1]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bincount_axis<I, S, D>(
    input: &ArrayBase<S, D>,
    axis: isize,
    minlength: usize,
) -> Result<Array<i64, D>>
where
    I: IndexElem,
    S: Data<Elem = I>,
    D: Dimension,
{
    let shape = if input.ndim() == 0 {
        vec![1]
    } else {
        input.shape().to_vec()
    };
    let ones = crate::dims::splat(&1i64, &shape);
    let out = bincount_call("bincount", input.view().into_dyn(), axis, ones, minlength)?;
    Ok(into_dim(out))
}

/// Weighted `bincount` along `axis` of an N-D array (see [`bincount_axis`],
/// [`bincount_weighted`]). `weights` has the input's shape.
///
/// ```
/// use ndarray::array;
/// let x = array![[0, 1], [1, 1]];
/// let w = array![[1.5f64, 2.0], [3.0, 4.0]];
/// assert_eq!(gather::ops::segment::bincount_weighted_axis(&x, 1, &w, 0)?, array![[1.5, 2.0], [0.0, 7.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn bincount_weighted_axis<I, S, D, T, SW, DW>(
    input: &ArrayBase<S, D>,
    axis: isize,
    weights: &ArrayBase<SW, DW>,
    minlength: usize,
) -> Result<Array<T, D>>
where
    I: IndexElem,
    S: Data<Elem = I>,
    D: Dimension,
    T: ReduceElement,
    SW: Data<Elem = T>,
    DW: Dimension,
{
    let op = "bincount";
    check_weights(op, input.shape(), weights.shape())?;
    let out = bincount_call(
        op,
        input.view().into_dyn(),
        axis,
        weights.view().into_dyn(),
        minlength,
    )?;
    Ok(into_dim(out))
}

/// The segment reductions as methods: `use gather::prelude::*;`.
///
/// ```
/// use gather::prelude::*;
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// use gather::ops::segment::Segments;
/// use ndarray::array;
/// let x = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let out = x.segment_reduce(1, Segments::offsets(&array![0, 1, 3]), GroupReduce::Last, EmptyFill::Identity)?;
/// assert_eq!(out, array![[1.0, 3.0], [4.0, 6.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait SegmentExt<T: ReduceElement, D: Dimension> {
    /// See [`segment_reduce()`].
    fn segment_reduce<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        reduce: GroupReduce,
        fill: EmptyFill<T>,
    ) -> Result<Array<T, D>>;
    /// See [`segment_arg_reduce()`].
    fn segment_arg_reduce<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        reduce: ArgReduce,
        fill: EmptyFill<T>,
    ) -> Result<(Array<T, D>, Array<i64, D>)>;
    /// See [`segment_softmax()`].
    fn segment_softmax<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat;
    /// See [`segment_log_softmax()`].
    fn segment_log_softmax<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat;
    /// See [`segment_any()`].
    fn segment_any<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        fill: EmptyFill<bool>,
    ) -> Result<Array<bool, D>>;
    /// See [`segment_all()`].
    fn segment_all<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        fill: EmptyFill<bool>,
    ) -> Result<Array<bool, D>>;
}

impl<T: ReduceElement, S: Data<Elem = T>, D: Dimension> SegmentExt<T, D> for ArrayBase<S, D> {
    fn segment_reduce<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        reduce: GroupReduce,
        fill: EmptyFill<T>,
    ) -> Result<Array<T, D>> {
        segment_reduce(self, axis, segments, reduce, fill)
    }
    fn segment_arg_reduce<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        reduce: ArgReduce,
        fill: EmptyFill<T>,
    ) -> Result<(Array<T, D>, Array<i64, D>)> {
        segment_arg_reduce(self, axis, segments, reduce, fill)
    }
    fn segment_softmax<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat,
    {
        segment_softmax(self, axis, segments)
    }
    fn segment_log_softmax<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat,
    {
        segment_log_softmax(self, axis, segments)
    }
    fn segment_any<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        fill: EmptyFill<bool>,
    ) -> Result<Array<bool, D>> {
        segment_any(self, axis, segments, fill)
    }
    fn segment_all<I: IndexElem>(
        &self,
        axis: isize,
        segments: Segments<'_, I>,
        fill: EmptyFill<bool>,
    ) -> Result<Array<bool, D>> {
        segment_all(self, axis, segments, fill)
    }
}
