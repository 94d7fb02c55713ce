//! `scatter`, `scatter_add`, `scatter_reduce`: write along one dim at positions given by an index.
//!
//! ```text
//! scatter_add(self, dim=1, index, src)      self[i][index[i][j]] += src[i][j]
//!
//!  self (zeros)          index          src
//!  ┌───┬───┬───┬───┐     ┌───┬───┬───┐  ┌───┬───┬───┐      result
//!  │ 0 │ 0 │ 0 │ 0 │  ←  │ 3 │ 0 │ 3 │  │ 1 │ 2 │ 3 │  →   │ 2 │ 0 │ 0 │ 4 │   (1 and 3 both land on [0][3])
//!  ├───┼───┼───┼───┤     ├───┼───┼───┤  ├───┼───┼───┤      ├───┼───┼───┼───┤
//!  │ 0 │ 0 │ 0 │ 0 │  ←  │ 1 │ 1 │ 2 │  │ 4 │ 5 │ 6 │  →   │ 0 │ 9 │ 6 │ 0 │   (4 and 5 both land on [1][1])
//!  └───┴───┴───┴───┘     └───┴───┴───┘  └───┴───┴───┘
//! ```
//!
//! The rules, as PyTorch's:
//! - index, self and src have the same number of dims (a 0-d array counts as 1-d);
//! - the index is no larger than src on every dim, and no larger than self on every dim but `dim`;
//!   only the leading index-shaped block of src is read;
//! - every index value is in `0..self.shape[dim]`; negative values are errors;
//! - an index with no elements skips the shape checks and leaves self unchanged.
//!
//! Duplicates are deterministic: updates to one element happen in ascending index order along
//! `dim`, by one thread. So `scatter` keeps the **last** write, and float sums add in index order,
//! bitwise the same for any number of threads. `f16`/`bf16` reductions accumulate in `f32` and round
//! once. In-place forms check everything (bounds included) before the first write: a failed call
//! leaves the destination exactly as it was.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use ndarray::{Array, ArrayBase, ArrayD, ArrayView, ArrayViewMut, Data, DataMut, Dimension, IxDyn};

use super::{check_index_fits, check_index_rank};
use crate::dims::normalize_dim;
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;
use crate::kernels::scatter::Update;
use crate::kernels::zip::zip2;

/// The reductions of `scatter_reduce` (and `index_reduce`, which has no `Sum`).
///
/// Parsing accepts PyTorch's names, including the aliases `max`/`min` of `amax`/`amin`:
///
/// ```
/// use gather::Reduce;
/// assert_eq!("amax".parse::<Reduce>().unwrap(), Reduce::Amax);
/// assert_eq!("max".parse::<Reduce>().unwrap(), Reduce::Amax);
/// assert!("add".parse::<Reduce>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reduce {
    /// Sum of the contributors.
    Sum,
    /// Product of the contributors.
    Prod,
    /// Mean of the contributors (floor division for integers); `self` counts as one contributor
    /// when included.
    Mean,
    /// Maximum; NaN propagates.
    Amax,
    /// Minimum; NaN propagates.
    Amin,
}

impl Reduce {
    /// PyTorch's name (`sum`, `prod`, `mean`, `amax`, `amin`).
    ///
    /// ```
    /// assert_eq!(gather::Reduce::Mean.name(), "mean");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Prod => "prod",
            Reduce::Mean => "mean",
            Reduce::Amax => "amax",
            Reduce::Amin => "amin",
        }
    }
}

impl FromStr for Reduce {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" | "max" => Reduce::Amax,
            "amin" | "min" => Reduce::Amin,
            _ => {
                return Err(Error::invalid(format!("reduce argument must be either sum, prod, mean, amax or amin, got {s}"))
                    .with_hint("for a plain write use scatter; `max`/`min` are accepted as aliases of `amax`/`amin`"))
            }
        })
    }
}

/// The reductions of the legacy `scatter(..., reduce=)` form: `"add"` and `"multiply"`.
///
/// ```
/// use gather::ops::scatter::LegacyReduce;
/// assert_eq!("multiply".parse::<LegacyReduce>().unwrap(), LegacyReduce::Multiply);
/// assert!("mean".parse::<LegacyReduce>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LegacyReduce {
    /// `reduce="add"`: like `scatter_add`.
    Add,
    /// `reduce="multiply"`: like `scatter_reduce(.., "prod", include_self=true)`.
    Multiply,
}

impl FromStr for LegacyReduce {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "add" => Ok(LegacyReduce::Add),
            "multiply" => Ok(LegacyReduce::Multiply),
            _ => Err(Error::invalid(format!(
                "reduce argument must be either add or multiply, got {s}"
            ))
            .with_hint("for sum, prod, mean, amax or amin use scatter_reduce")),
        }
    }
}

impl From<LegacyReduce> for Reduce {
    fn from(r: LegacyReduce) -> Reduce {
        match r {
            LegacyReduce::Add => Reduce::Sum,
            LegacyReduce::Multiply => Reduce::Prod,
        }
    }
}

/// What a scatter writes: a plain set, or a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Set,
    Reduce(Reduce, bool),
}

/// What a scatter writes: an array `src` (`scatter(dim, index, src)`) or one value
/// (`scatter(dim, index, value)`), as PyTorch's two overloads of the same name.
///
/// ```
/// use ndarray::array;
/// let x = array![1, 2, 3];
/// assert_eq!(gather::scatter(&x, 0, &array![0, 2], &array![7, 8])?, array![7, 2, 8]);
/// assert_eq!(gather::scatter(&x, 0, &array![0, 2], 9)?, array![9, 2, 9]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait ScatterSrc<T>: sealed::Sealed {
    /// The values as an array, and whether they are one value for every position.
    #[doc(hidden)]
    fn as_src(&self) -> (ArrayView<'_, T, IxDyn>, bool);
}

mod sealed {
    pub trait Sealed {}
}

impl<S: Data, D: Dimension> sealed::Sealed for &ArrayBase<S, D> {}
impl<T, S: Data<Elem = T>, D: Dimension> ScatterSrc<T> for &ArrayBase<S, D> {
    fn as_src(&self) -> (ArrayView<'_, T, IxDyn>, bool) {
        ((**self).view().into_dyn(), false)
    }
}

impl<T: Element> sealed::Sealed for T {}
impl<T: Element> ScatterSrc<T> for T {
    fn as_src(&self) -> (ArrayView<'_, T, IxDyn>, bool) {
        (ndarray::aview0(self).into_dyn(), true)
    }
}

/// A scatter of `src` (one value when `value`) into `dst` under `mode`, strict bounds: the body
/// of every in-place scatter entry point, and of `Options`' writes under `OutOfBounds::Error`.
pub(crate) fn scatter_view_inplace<T, S, D, I, SI, DI>(
    op: &str,
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: ArrayView<'_, T, IxDyn>,
    value: bool,
    mode: Mode,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (dst, index) = (dst.view_mut().into_dyn(), index.view().into_dyn());
    scatter_into(op, dst, dim, index, src, value, mode, Bounds::Strict)
}

/// Checks the shapes of a scatter-like call and returns the normalised dim, or `None` when the
/// index is empty (nothing to do).
pub(crate) fn check_scatter_shapes(
    op: &str,
    dst_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    src_shape: Option<&[usize]>,
) -> Result<Option<usize>> {
    let d = normalize_dim(op, dim, dst_shape.len())?;
    if index_shape.iter().product::<usize>() == 0 {
        return Ok(None);
    }
    check_index_rank(op, "self", dst_shape, index_shape, d)?;
    if let Some(s) = src_shape {
        if s.len().max(1) != index_shape.len().max(1) {
            return Err(Error::rank(format!(
                "{op}: Index tensor must have the same number of dimensions as src tensor (index has {} dims, src has {})",
                index_shape.len(),
                s.len()
            ))
            .with_hint("src must have the index's rank; only its leading index-shaped block is read"));
        }
    }
    let one = [1usize];
    let fix = |s: &'_ [usize]| -> Vec<usize> {
        if s.is_empty() {
            one.to_vec()
        } else {
            s.to_vec()
        }
    };
    let src_fixed = src_shape.map(fix);
    check_index_fits(
        op,
        &fix(dst_shape),
        &fix(index_shape),
        src_fixed.as_deref(),
        d,
    )?;
    Ok(Some(d))
}

pub(crate) fn check_dtype_supported<T: Element>(op: &str, mode: Mode) -> Result<()> {
    check_mode_dtype(op, T::DTYPE, mode)
}

pub(crate) fn check_mode_dtype(op: &str, dtype: DType, mode: Mode) -> Result<()> {
    if dtype == DType::Bool && matches!(mode, Mode::Reduce(Reduce::Mean, _)) {
        return Err(Error::invalid(format!("{op}: reduce=\"mean\" is not implemented for bool (as in PyTorch)"))
            .with_hint("convert the array to an integer or float dtype first, or use \"amax\"/\"sum\" (logical or)"));
    }
    Ok(())
}

/// The core of every scatter-like op, on dynamic-rank views. `dst` is modified only after every
/// check has passed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_into<T, I>(
    op: &str,
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    src_is_value: bool,
    mode: Mode,
    bounds: Bounds,
) -> Result<()>
where
    T: Element,
    I: IndexElem,
{
    scatter_into_with(op, dst, dim, index, src, src_is_value, mode, bounds, false)
}

/// The out-of-place form: a standard-layout copy of `input` with the scatter applied. Because the
/// copy is dropped on error, the element loop checks the index values as it goes where that loop
/// is the one that runs (not for row indices, whose grouped loops need them checked first),
/// instead of a separate pass over the index.
fn scatter_fresh<T, S, D, I>(
    op: &str,
    input: &ArrayBase<S, D>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    src_is_value: bool,
    mode: Mode,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    if let Some(out) = scatter_fresh_fused(op, input, dim, &index, &src, src_is_value, mode)? {
        return Ok(out);
    }
    let mut out = super::try_to_owned(op, input)?;
    let dst = out.view_mut().into_dyn();
    scatter_into_with(
        op,
        dst,
        dim,
        index,
        src,
        src_is_value,
        mode,
        Bounds::Strict,
        true,
    )?;
    Ok(out)
}

/// [`scatter_fresh`] with the copy of `input` made inside the scatter's own tasks
/// ([`kernels::scatter::scatter_checking_fresh`]), where that is the same computation and pays:
/// the element loop with an in-loop check (not a row index), and a reduction with `include_self`
/// that needs neither a wider accumulator nor counts, whose every update reads the destination
/// element it writes, or a plain write. A plain write does not read the element, but each task's
/// row of the copy is still in L1 when the loop writes into it, where after one large copy (more
/// than L2) the loop's writes go back to L3 for their lines (see docs/performance.md,
/// "ops/scatter.rs: scatter_fresh_fused"). `None` where it does not apply, before any work.
fn scatter_fresh_fused<T, S, D, I>(
    op: &str,
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayView<'_, I, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
    src_is_value: bool,
    mode: Mode,
) -> Result<Option<Array<T, D>>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
{
    // The reduction, or `None` for a plain write.
    let reduce = match mode {
        Mode::Set => None,
        Mode::Reduce(r, true) if r != Reduce::Mean && !wide::<T>(r) => Some(r),
        Mode::Reduce(..) => return Ok(None),
    };
    if input.ndim() == 0 {
        return Ok(None);
    }
    let prepared = prepare(
        op,
        input.shape(),
        dim,
        index.view(),
        src.view(),
        src_is_value,
        mode,
    )?;
    let Some((d, index, src)) = prepared else {
        return Ok(None);
    };
    let size = input.shape()[d];
    if !checks_in_loop(&index, d, size, walk_of::<T>(mode)) {
        return Ok(None);
    }
    let from = input.view().into_dyn();
    let bad = AtomicBool::new(false);
    let out = super::try_vec(op, input.len())?;
    let out = match reduce {
        // `f16`/`bf16` come here with `amax`/`amin` alone (`wide` above).
        Some(r) if T::WIDE_ACC => {
            kernels::scatter::fresh_order_as(&from, out, d, &index, &src, &bad, r == Reduce::Amax)
        }
        Some(r) => kernels::scatter::scatter_checking_fresh_as(
            &from,
            out,
            d,
            &index,
            &src,
            &bad,
            update_of(r),
        ),
        None => kernels::scatter::scatter_checking_fresh_set(&from, out, d, &index, &src, &bad),
    };
    if bad.load(Ordering::Relaxed) {
        return Err(first_bad_value(op, &index, d, size));
    }
    Ok(Some(
        Array::from_shape_vec(input.raw_dim(), out).expect("a buffer of the input's length"),
    ))
}

/// Whether a reduction of `T` runs through an `f32` buffer (`f16`/`bf16` sums, products and
/// means, so that they round once).
fn wide<T: Element>(r: Reduce) -> bool {
    T::WIDE_ACC && !matches!(r, Reduce::Amax | Reduce::Amin)
}

/// The element update of `r` (`mean` sums, and divides later).
fn update_of(r: Reduce) -> Update {
    match r {
        Reduce::Sum | Reduce::Mean => Update::Add,
        Reduce::Prod => Update::Mul,
        Reduce::Amax => Update::Max,
        Reduce::Amin => Update::Min,
    }
}

/// Runs `mode` into `dst` at `target`.
fn apply<T: Element, I: IndexElem>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    target: &kernels::scatter::Target<'_, '_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    mode: Mode,
) {
    match mode {
        Mode::Set => target.set(dst, src),
        Mode::Reduce(r, include_self) => reduce_into(dst, target, src, r, include_self),
    }
}

/// The error for an index an in-loop check found a value of outside `0..size` in: the full check
/// names the first such value.
fn first_bad_value<I: IndexElem>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    d: usize,
    size: usize,
) -> Error {
    match CheckedIndex::new(op, index.view(), d, size, Bounds::Strict) {
        Err(e) => e,
        Ok(_) => Error::invalid(format!(
            "{op}: internal error: an index value failed the in-loop check but passed the full one"
        )),
    }
}

/// The checks and views every scatter starts from: the shapes against a destination of
/// `dst_shape` and the dtype against `mode` (errors), then `dim` normalised, and the index and src
/// as the kernels take them (0-d as 1-d; a one-element `src_is_value` broadcast to the index).
/// `None` for an empty index, which writes nothing (PyTorch still rejects an unsupported
/// dtype/reduce pair for it).
#[allow(clippy::type_complexity)]
fn prepare<'i, 's, T: Element, I: IndexElem>(
    op: &str,
    dst_shape: &[usize],
    dim: isize,
    index: ArrayView<'i, I, IxDyn>,
    src: ArrayView<'s, T, IxDyn>,
    src_is_value: bool,
    mode: Mode,
) -> Result<Option<(usize, ArrayView<'i, I, IxDyn>, ArrayView<'s, T, IxDyn>)>> {
    let src_shape = (!src_is_value).then(|| src.shape());
    let Some(d) = check_scatter_shapes(op, dst_shape, dim, index.shape(), src_shape)? else {
        check_dtype_supported::<T>(op, mode)?;
        return Ok(None);
    };
    check_dtype_supported::<T>(op, mode)?;
    let index = if index.ndim() == 0 {
        index.insert_axis(ndarray::Axis(0))
    } else {
        index
    };
    let src = if src_is_value {
        let value = src
            .into_iter()
            .next()
            .expect("a scalar form's src has one element");
        crate::dims::splat(value, index.shape())
    } else if src.ndim() == 0 {
        src.insert_axis(ndarray::Axis(0))
    } else {
        src
    };
    Ok(Some((d, index, src)))
}

/// Whether a scatter into a fresh copy checks its index values in the element loop
/// ([`kernels::scatter::Target::Checking`]) rather than in a pass before it: where that loop is
/// the one that runs (not for a row index, whose grouped loops and walks need checked values
/// first) and there is a row to send a bad value to. `walk`: the size of an element and whether
/// rows start from an initial value, where the row walk could take the call (see [`walk_of`]).
fn checks_in_loop<I: IndexElem>(
    index: &ArrayView<'_, I, IxDyn>,
    d: usize,
    size: usize,
    walk: Option<(usize, bool)>,
) -> bool {
    let walked = walk.is_some_and(|(elem, init)| {
        kernels::scatter::walks_narrow_rows(index, d, size, elem, init)
    });
    size > 0 && !kernels::scatter::is_row_index(index, d) && !walked
}

/// What [`checks_in_loop`] needs of a scatter in `mode` of `T` that the row walk could take: a
/// reduction (a plain write keeps the last), whose update does not convert; its element size
/// and whether rows start from an initial value (`include_self = false`).
fn walk_of<T: Element>(mode: Mode) -> Option<(usize, bool)> {
    match mode {
        Mode::Reduce(_, include_self) if !T::WIDE_ACC => {
            Some((std::mem::size_of::<T>(), !include_self))
        }
        _ => None,
    }
}

/// [`scatter_into`]; `fresh`: `dst` is a copy the caller drops on error (see [`scatter_fresh`]).
#[allow(clippy::too_many_arguments)]
fn scatter_into_with<T, I>(
    op: &str,
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    src_is_value: bool,
    mode: Mode,
    bounds: Bounds,
    fresh: bool,
) -> Result<()>
where
    T: Element,
    I: IndexElem,
{
    let Some((d, index, src)) = prepare(op, dst.shape(), dim, index, src, src_is_value, mode)?
    else {
        return Ok(());
    };
    let mut dst = if dst.ndim() == 0 {
        dst.insert_axis(ndarray::Axis(0))
    } else {
        dst
    };
    let size = dst.shape()[d];
    if fresh && bounds == Bounds::Strict && checks_in_loop(&index, d, size, walk_of::<T>(mode)) {
        let bad = AtomicBool::new(false);
        let target = kernels::scatter::Target::Checking {
            dim: d,
            index: &index,
            size,
            bad: &bad,
        };
        apply(&mut dst, &target, &src, mode);
        if !bad.load(Ordering::Relaxed) {
            return Ok(());
        }
        // A value is out of range: the full check finds the first one for the error.
        return Err(first_bad_value(op, &index, d, size));
    }
    if bounds != Bounds::Strict {
        // The positions the values select, mapped once (ONNX's wrapped scatter, the gradients of
        // wrapping reads): the kernels are compiled for strict positions only.
        let strict = crate::index::strict_positions(op, &index, d, size, bounds)?;
        apply_checked(dst, d, &strict.checked(), src, mode);
        return Ok(());
    }
    let checked = CheckedIndex::new(op, index, d, size, Bounds::Strict)?;
    apply_checked(dst, d, &checked, src, mode);
    Ok(())
}

/// Runs `mode` into `dst` along `d` at a checked index.
fn apply_checked<T: Element, I: IndexElem>(
    mut dst: ArrayViewMut<'_, T, IxDyn>,
    d: usize,
    checked: &CheckedIndex<'_, I>,
    src: ArrayView<'_, T, IxDyn>,
    mode: Mode,
) {
    match mode {
        Mode::Set => kernels::scatter::scatter_set(&mut dst, d, checked, &src),
        Mode::Reduce(r, include_self) => {
            let target = kernels::scatter::Target::Index {
                dim: d,
                index: checked,
            };
            reduce_into(&mut dst, &target, &src, r, include_self)
        }
    }
}

/// Runs a checked reduction into `dst` at `target` (a checked index, or a plan's segments).
/// `f16`/`bf16` go through an `f32` buffer so that sums and products round once; every other type
/// reduces in place.
pub(crate) fn reduce_into<T: Element, I: IndexElem>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    target: &kernels::scatter::Target<'_, '_, I>,
    src: &ArrayView<'_, T, IxDyn>,
    r: Reduce,
    include_self: bool,
) {
    // Without self, every element the index reaches starts from the reduction's identity.
    let identity = || match r {
        Reduce::Sum | Reduce::Mean => T::acc_zero(),
        Reduce::Prod => T::acc_one(),
        Reduce::Amax => T::max_identity().to_acc(),
        Reduce::Amin => T::min_identity().to_acc(),
    };
    // Float means, too, where the destination is reduced in parts: a part's contributor counts
    // stay in the caches, where counts of the whole destination are a `u64` per element,
    // written and read again from memory.
    let float_mean = const { matches!(T::DTYPE, DType::F32 | DType::F64) }
        && r == Reduce::Mean
        && target.reduces_in_parts(src.shape());
    if (T::WIDE_ACC && wide::<T>(r)) || float_mean {
        let op = kernels::scatter::Wide {
            prod: r == Reduce::Prod,
            alpha: None,
            init: (!include_self).then(identity),
            mean: (r == Reduce::Mean).then_some(include_self as u64),
        };
        target.reduce_wide(dst, src, op);
    } else {
        let counts = (r == Reduce::Mean).then(|| {
            let mut c = crate::memory::zeroed::<u64>(dst.raw_dim());
            let ones = crate::dims::splat(&0u8, src.shape());
            target.reduce(&mut c.view_mut(), &ones, None, kernels::scatter::count_one);
            c
        });
        let init = (!include_self).then(|| T::from_acc(identity()));
        if T::WIDE_ACC {
            // `amax`/`amin` alone come here for `f16`/`bf16` (`wide`).
            target.reduce_order_as(dst, src, init, r == Reduce::Amax);
        } else {
            target.reduce_as(dst, src, init, update_of(r));
        }
        finish::<T>(dst, counts.as_ref(), include_self);
    }
}

/// Divides means by their contributor counts.
fn finish<T: Element>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    counts: Option<&ArrayD<u64>>,
    include_self: bool,
) {
    let extra = include_self as u64;
    if let Some(c) = counts {
        zip2(dst, &c.view(), |d, &n| {
            if n > 0 {
                *d = T::from_acc(T::acc_div_count(d.to_acc(), (n + extra) as usize))
            }
        });
    }
}

/// `self.scatter_(dim, index, src)`: `self[p with p[dim] := index[p]] = src[p]` for every position
/// `p` of the index; with duplicates the last write in index order wins.
///
/// ```
/// use ndarray::array;
/// let mut x = ndarray::Array2::<f32>::zeros((3, 4));
/// let src = ndarray::Array::range(1.0, 13.0, 1.0).into_shape_with_order((3, 4)).unwrap();
/// gather::scatter_inplace(&mut x, 0, &array![[0, 1, 2, 0]], &src).unwrap();
/// assert_eq!(x, array![[1., 0., 0., 4.], [0., 2., 0., 0.], [0., 0., 3., 0.]]);
/// // Duplicates: the last write wins.
/// let mut y = ndarray::Array1::<i32>::zeros(2);
/// gather::scatter_inplace(&mut y, 0, &array![0, 0, 0], &array![1, 2, 3]).unwrap();
/// assert_eq!(y, array![3, 0]);
/// ```
pub fn scatter_inplace<T, S, D, I, SI, DI>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    scatter_view_inplace("scatter", dst, dim, index, src, value, Mode::Set)
}

/// Out-of-place [`scatter_inplace`]: returns a scattered copy of `input`.
///
/// ```
/// use ndarray::array;
/// let x = array![0, 0, 0];
/// assert_eq!(gather::scatter(&x, 0, &array![2, 0], &array![7, 8]).unwrap(), array![8, 0, 7]);
/// ```
pub fn scatter<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    let index = index.view().into_dyn();
    scatter_fresh("scatter", input, dim, index, src, value, Mode::Set)
}

/// The legacy `self.scatter_(dim, index, src, reduce="add"|"multiply")`: always includes self.
/// The typed API says it as `scatter_reduce_inplace(.., Reduce::Sum | Reduce::Prod, true)`; the
/// dynamic layer calls this for the op name PyTorch's messages use.
#[cfg(feature = "dynamic")]
pub(crate) fn scatter_legacy_inplace<T, S, D, I, SI, DI>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
    reduce: LegacyReduce,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    let mode = Mode::Reduce(reduce.into(), true);
    scatter_view_inplace("scatter", dst, dim, index, src, value, mode)
}

/// Out-of-place [`scatter_legacy_inplace`].
#[cfg(any(test, feature = "dynamic"))]
pub(crate) fn scatter_legacy<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
    reduce: LegacyReduce,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    let index = index.view().into_dyn();
    let mode = Mode::Reduce(reduce.into(), true);
    scatter_fresh("scatter", input, dim, index, src, value, mode)
}

/// `self.scatter_add_(dim, index, src)`: `self[p with p[dim] := index[p]] += src[p]`, adding in
/// index order (integers wrap, bool is logical or, `f16`/`bf16` accumulate in `f32`).
///
/// This is also the gradient of [`gather()`](crate::gather()).
///
/// ```
/// use ndarray::array;
/// let mut x = ndarray::Array2::<f32>::zeros((3, 4));
/// let src = ndarray::Array::range(1.0, 13.0, 1.0).into_shape_with_order((3, 4)).unwrap();
/// gather::scatter_add_inplace(&mut x, 0, &array![[0, 0, 0, 0], [0, 1, 2, 0]], &src).unwrap();
/// assert_eq!(x, array![[6., 2., 3., 12.], [0., 6., 0., 0.], [0., 0., 7., 0.]]);
/// ```
pub fn scatter_add_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
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
    let mode = Mode::Reduce(Reduce::Sum, true);
    scatter_view_inplace(
        "scatter_add",
        dst,
        dim,
        index,
        src.view().into_dyn(),
        false,
        mode,
    )
}

/// Out-of-place [`scatter_add_inplace`].
///
/// ```
/// use ndarray::array;
/// let out = gather::scatter_add(&array![[0, 0, 0, 0], [0, 0, 0, 0]], 1, &array![[3, 0, 3], [1, 1, 2]], &array![[1, 2, 3], [4, 5, 6]]).unwrap();
/// assert_eq!(out, array![[2, 0, 0, 4], [0, 9, 6, 0]]);
/// ```
pub fn scatter_add<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
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
    let (index, src) = (index.view().into_dyn(), src.view().into_dyn());
    let mode = Mode::Reduce(Reduce::Sum, true);
    scatter_fresh("scatter_add", input, dim, index, src, false, mode)
}

/// `self.scatter_reduce_(dim, index, src, reduce, include_self)`.
///
/// With `include_self = false` the positions the index refers to are reduced over the src
/// elements only; positions no index refers to keep their value, for every reduction. `Mean`
/// counts self as one contributor when it is included, and divides integers rounding toward
/// negative infinity. `Amax`/`Amin` propagate NaN. `Mean` on bool is an error (as in PyTorch); the
/// other reductions also work on `u16`/`u32`/`u64`, which PyTorch lacks.
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// let base = array![10.0f32, 20.0, 30.0, 40.0];
/// let idx = array![0, 0, 1, 1, 1];
/// let src = array![1.0f32, 2.0, 3.0, 4.0, 5.0];
/// let r = |red, incl| gather::scatter_reduce(&base, 0, &idx, &src, red, incl).unwrap();
/// assert_eq!(r(Reduce::Sum, true), array![13.0, 32.0, 30.0, 40.0]);
/// assert_eq!(r(Reduce::Prod, false), array![2.0, 60.0, 30.0, 40.0]);
/// assert_eq!(r(Reduce::Mean, false), array![1.5, 4.0, 30.0, 40.0]);
/// assert_eq!(r(Reduce::Amax, false), array![2.0, 5.0, 30.0, 40.0]);
/// assert_eq!(r(Reduce::Amin, true), array![1.0, 3.0, 30.0, 40.0]);
/// ```
pub fn scatter_reduce_inplace<T, S, D, I, SI, DI>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
    reduce: Reduce,
    include_self: bool,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    let mode = Mode::Reduce(reduce, include_self);
    scatter_view_inplace("scatter_reduce", dst, dim, index, src, value, mode)
}

/// Out-of-place [`scatter_reduce_inplace`].
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// // Integer mean floors: (-3 + -4) / 2 = -4.
/// let out = gather::scatter_reduce(&array![0i64], 0, &array![0, 0], &array![-3i64, -4], Reduce::Mean, false).unwrap();
/// assert_eq!(out, array![-4]);
/// ```
pub fn scatter_reduce<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: impl ScatterSrc<T>,
    reduce: Reduce,
    include_self: bool,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (src, value) = src.as_src();
    let index = index.view().into_dyn();
    let mode = Mode::Reduce(reduce, include_self);
    scatter_fresh("scatter_reduce", input, dim, index, src, value, mode)
}

/// Method forms of the out-of-place scatter ops, on any ndarray array.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let grad = array![[1.0f32, 2.0], [3.0, 4.0]];
/// let idx = array![[0, 0], [2, 1]];
/// // gather's gradient: scatter_add into zeros of the input's shape.
/// let dx = ndarray::Array2::<f32>::zeros((2, 3)).scatter_add(1, &idx, &grad)?;
/// assert_eq!(dx, array![[3.0, 0.0, 0.0], [0.0, 4.0, 3.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait ScatterExt<T: Element, D: Dimension> {
    /// See [`scatter()`].
    fn scatter<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<Array<T, D>>;
    /// See [`scatter_add()`].
    fn scatter_add<
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    >(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>;
    /// See [`scatter_reduce()`].
    fn scatter_reduce<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> ScatterExt<T, D> for ArrayBase<S, D> {
    fn scatter<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<Array<T, D>> {
        scatter(self, dim, index, src)
    }
    fn scatter_add<
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    >(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>> {
        scatter_add(self, dim, index, src)
    }
    fn scatter_reduce<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>> {
        scatter_reduce(self, dim, index, src, reduce, include_self)
    }
}

/// Method forms of the in-place scatter ops, on any mutable ndarray array. A failed call leaves the
/// array unchanged.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let mut x = array![1.0f32, 1.0, 1.0];
/// x.scatter_reduce_inplace(0, &array![0, 0, 2], &array![4.0, 2.0, 5.0], Reduce::Prod, true)?;
/// assert_eq!(x, array![8.0, 1.0, 5.0]);
/// assert!(x.scatter_add_inplace(0, &array![3], &array![1.0]).is_err());
/// assert_eq!(x, array![8.0, 1.0, 5.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait ScatterInplaceExt<T: Element> {
    /// See [`scatter_inplace`].
    fn scatter_inplace<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<()>;
    /// See [`scatter_add_inplace`].
    fn scatter_add_inplace<
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    >(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<()>;
    /// See [`scatter_reduce_inplace`].
    fn scatter_reduce_inplace<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>;
}

impl<T: Element, S: DataMut<Elem = T>, D: Dimension> ScatterInplaceExt<T> for ArrayBase<S, D> {
    fn scatter_inplace<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
    ) -> Result<()> {
        scatter_inplace(self, dim, index, src)
    }
    fn scatter_add_inplace<
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    >(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: &ArrayBase<SS, DS>,
    ) -> Result<()> {
        scatter_add_inplace(self, dim, index, src)
    }
    fn scatter_reduce_inplace<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        src: impl ScatterSrc<T>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()> {
        scatter_reduce_inplace(self, dim, index, src, reduce, include_self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use half::{bf16, f16};
    use ndarray::{Array1, Array2, arr0, array};

    /// An index that is a materialised broadcast (the same value along the non-dim axes) gives
    /// bitwise what its stride-0 form gives (the dynamic layer hands the kernels the one for the
    /// other), out of place and in place, for every reduction, and what a plain loop gives.
    #[test]
    fn a_materialised_broadcast_index_gives_the_stride_zero_result() {
        let (n, w, rows) = (400usize, 96usize, 40usize); // the stride-0 form takes the row loops
        let src =
            Array2::from_shape_fn((n, w), |(i, j)| ((i * 7 + j * 13) % 17) as f32 * 0.37 - 2.0);
        let ids = Array1::from_shape_fn(n, |i| ((i * 31) % rows) as i64);
        let spread = ids.view().insert_axis(ndarray::Axis(1));
        let spread = spread.broadcast((n, w)).unwrap();
        let full = spread.to_owned();
        let x = Array2::from_shape_fn((rows, w), |(i, j)| (i + j) as f32 * 0.5);
        for r in [
            Reduce::Sum,
            Reduce::Prod,
            Reduce::Mean,
            Reduce::Amax,
            Reduce::Amin,
        ] {
            for incl in [true, false] {
                let a = scatter_reduce(&x, 0, &full, &src, r, incl).unwrap();
                let b = scatter_reduce(&x, 0, &spread, &src, r, incl).unwrap();
                assert_eq!(a, b, "{r:?} {incl}");
                let mut c = x.clone();
                scatter_reduce_inplace(&mut c, 0, &full, &src, r, incl).unwrap();
                assert_eq!(c, b, "in place {r:?} {incl}");
            }
        }
        let mut want = x.clone();
        for i in 0..n {
            for j in 0..w {
                want[[ids[i] as usize, j]] += src[[i, j]];
            }
        }
        assert_eq!(scatter_add(&x, 0, &full, &src).unwrap(), want);
        let mut set = x.clone();
        scatter_inplace(&mut set, 0, &full, &src).unwrap();
        assert_eq!(set, scatter(&x, 0, &spread, &src).unwrap());
    }

    /// Out of place, a row index with slices of 3 (which the row walk takes where it runs, after
    /// a check of the values) gives what a plain loop gives and what the in-place call gives,
    /// for every reduction; a bad value gives the in-place call's error, in pools of 1, 2 and 3
    /// threads.
    #[test]
    fn narrow_row_scatters_out_of_place_equal_the_definition_and_the_in_place_call() {
        let (n, w, rows) = (12_000usize, 3usize, 500usize);
        let src =
            Array2::from_shape_fn((n, w), |(i, j)| ((i * 7 + j * 13) % 17) as f32 * 0.37 - 2.0);
        let ids = Array1::from_shape_fn(n, |i| ((i * 31 + i / 7) % rows) as i64);
        let spread = ids.view().insert_axis(ndarray::Axis(1));
        let spread = spread.broadcast((n, w)).unwrap();
        let x = Array2::from_shape_fn((rows, w), |(i, j)| (i + j) as f32 * 0.5);
        let mut sums = x.clone();
        for i in 0..n {
            for j in 0..w {
                sums[[ids[i] as usize, j]] += src[[i, j]];
            }
        }
        let mut bad = ids.clone();
        bad[n / 2] = rows as i64;
        let bad = bad.view().insert_axis(ndarray::Axis(1));
        let bad = bad.broadcast((n, w)).unwrap();
        for threads in [1, 2, 3] {
            let pool = crate::kernels::test_pool(threads);
            pool.install(|| {
                assert_eq!(
                    scatter_add(&x, 0, &spread, &src).unwrap(),
                    sums,
                    "{threads}"
                );
                for r in [Reduce::Sum, Reduce::Prod, Reduce::Amax, Reduce::Amin] {
                    for incl in [true, false] {
                        let got = scatter_reduce(&x, 0, &spread, &src, r, incl).unwrap();
                        let mut want = x.clone();
                        scatter_reduce_inplace(&mut want, 0, &spread, &src, r, incl).unwrap();
                        assert_eq!(got, want, "{r:?} {incl}, {threads} threads");
                    }
                }
                // Rows start from the first source they get without self: the maxima of the
                // sources alone, and self where no source goes.
                let mut maxima = x.clone();
                let mut reached = vec![false; rows];
                for i in 0..n {
                    let row = ids[i] as usize;
                    for j in 0..w {
                        let v = src[[i, j]];
                        let m = &mut maxima[[row, j]];
                        *m = if reached[row] { m.max(v) } else { v };
                    }
                    reached[row] = true;
                }
                let got = scatter_reduce(&x, 0, &spread, &src, Reduce::Amax, false).unwrap();
                assert_eq!(got, maxima, "amax without self, {threads} threads");
                let fresh = scatter_add(&x, 0, &bad, &src).unwrap_err();
                let mut t = x.clone();
                let inplace = scatter_add_inplace(&mut t, 0, &bad, &src).unwrap_err();
                assert_eq!(fresh.to_string(), inplace.to_string());
                assert_eq!(fresh.index_value(), Some(rows as i64));
                assert_eq!(t, x);
            });
        }
    }

    /// The out-of-place scatters and reductions whose copy of the input is made inside the
    /// scatter's tasks (and those that keep a separate copy) give bitwise the in-place result on
    /// a copy, on a parallel-sized call, a transposed input, dim 0 and dim 1, and a narrower
    /// index; plain writes with duplicate positions keep the last one in index order.
    #[test]
    fn out_of_place_scatters_equal_in_place_ones_on_a_copy() {
        fn case<T: Element>(x: ArrayView<'_, T, ndarray::Ix2>, to: impl Fn(f64) -> T) {
            let (rows, cols) = x.dim();
            let mut s = 77u64;
            let mut next = |hi: usize| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((s >> 33) % hi as u64) as usize
            };
            for (dim, shape) in [
                (1, (rows, cols / 2)),
                (0, (rows / 2, cols)),
                (1, (rows - 3, 9)),
            ] {
                let size = if dim == 1 { cols } else { rows };
                let idx = Array2::from_shape_simple_fn(shape, || next(size) as i64);
                let src =
                    Array2::from_shape_simple_fn(shape, || to(next(2001) as f64 / 700.0 - 1.4));
                let d = dim as isize;
                let mut want = x.to_owned();
                scatter_inplace(&mut want, d, &idx, &src).unwrap();
                let got = scatter(&x, d, &idx, &src).unwrap();
                assert!(
                    got == want,
                    "{:?} scatter dim {dim} index {shape:?}",
                    T::DTYPE
                );
                let v = to(0.75);
                let mut want = x.to_owned();
                scatter_inplace(&mut want, d, &idx, v).unwrap();
                let got = scatter(&x, d, &idx, v).unwrap();
                assert!(
                    got == want,
                    "{:?} scatter_value dim {dim} index {shape:?}",
                    T::DTYPE
                );
                for r in [
                    Reduce::Sum,
                    Reduce::Prod,
                    Reduce::Amax,
                    Reduce::Amin,
                    Reduce::Mean,
                ] {
                    for include_self in [true, false] {
                        let got =
                            scatter_reduce(&x, dim as isize, &idx, &src, r, include_self).unwrap();
                        let mut want = x.to_owned();
                        scatter_reduce_inplace(
                            &mut want,
                            dim as isize,
                            &idx,
                            &src,
                            r,
                            include_self,
                        )
                        .unwrap();
                        assert!(got.is_standard_layout());
                        // No NaN arises (finite inputs), so `==` is the bitwise comparison here
                        // but for the sign of a zero.
                        assert!(
                            got == want,
                            "{:?} {r:?} include_self {include_self} dim {dim} index {shape:?}",
                            T::DTYPE
                        );
                    }
                }
            }
        }
        let x = Array2::from_shape_fn((300, 400), |(i, j)| {
            ((i * 7 + j * 13) % 101) as f64 / 50.0 - 1.0
        });
        case(x.mapv(|v| v as f32).view(), |v| v as f32);
        case(x.mapv(|v| v as f32).t(), |v| v as f32);
        case(x.mapv(|v| (v * 50.0) as i32).view(), |v| (v * 50.0) as i32);
        case(x.mapv(f16::from_f64).view(), f16::from_f64);
    }

    #[test]
    fn half_sums_accumulate_in_f32() {
        let x = Array1::<f16>::zeros(1);
        let src = Array1::from_elem(3000, f16::ONE);
        let idx = Array1::<i64>::zeros(3000);
        assert_eq!(
            scatter_add(&x, 0, &idx, &src).unwrap()[0],
            f16::from_f32(3000.0)
        );
        let xb = Array1::<bf16>::zeros(1);
        let srcb = Array1::from_elem(3000, bf16::ONE);
        assert_eq!(
            scatter_add(&xb, 0, &idx, &srcb).unwrap()[0],
            bf16::from_f32(3008.0)
        );
    }

    #[test]
    fn integer_sums_wrap() {
        let out = scatter_add(
            &array![0i8],
            0,
            &Array1::<i64>::zeros(200),
            &Array1::<i8>::ones(200),
        )
        .unwrap();
        assert_eq!(out[0], -56);
    }

    #[test]
    fn nan_propagates_through_amax_and_stays_in_self() {
        let idx = array![0, 0, 1, 1, 2, 2];
        let src = array![
            1.0f32,
            f32::NAN,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
            2.0,
            f32::INFINITY
        ];
        let out =
            scatter_reduce(&Array1::<f32>::zeros(3), 0, &idx, &src, Reduce::Amax, false).unwrap();
        assert!(out[0].is_nan());
        assert_eq!(out[1], f32::NEG_INFINITY);
        assert_eq!(out[2], f32::INFINITY);
        let kept = scatter_reduce(
            &array![f32::NAN],
            0,
            &array![0],
            &array![5.0f32],
            Reduce::Amax,
            true,
        )
        .unwrap();
        assert!(kept[0].is_nan());
    }

    #[test]
    fn out_of_place_calls_report_the_same_first_bad_value_as_in_place_ones() {
        // Out-of-place calls on a general (not row) index check the values inside the element
        // loop; a bad value must still give the in-place call's error, naming the first one.
        let mut seed = 5u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 33) as i64
        };
        // The small case runs on the calling thread, the large one in tasks on the pool.
        for (rows, cols, k) in [(64, 40, 30), (300, 400, 250)] {
            let x = Array2::from_shape_fn((rows, cols), |(i, j)| (i * cols + j) as f64);
            let src = Array2::from_shape_fn((rows, k), |(i, j)| (i + j) as f64 * 0.5);
            let good = Array2::from_shape_fn((rows, k), |_| next().rem_euclid(cols as i64));
            let last = (rows - 1, k - 1);
            for (bad_at, bad_value) in [
                ((0, 0), -1i64),
                ((rows / 3, 7), cols as i64),
                (last, i64::MIN),
            ] {
                let mut idx = good.clone();
                idx[bad_at] = bad_value;
                idx[last] = if bad_at == last {
                    bad_value
                } else {
                    cols as i64 + 1
                };
                let inplace = |f: &dyn Fn(&mut Array2<f64>) -> Result<()>| {
                    let mut t = x.clone();
                    let e = f(&mut t).unwrap_err();
                    assert_eq!(t, x);
                    e
                };
                let same = |fresh: Error, inpl: Error| {
                    assert_eq!(fresh.kind(), ErrorKind::IndexOutOfBounds);
                    assert_eq!(fresh.index_value(), Some(bad_value), "{fresh}");
                    assert_eq!(fresh.to_string(), inpl.to_string());
                };
                same(
                    scatter(&x, 1, &idx, &src).unwrap_err(),
                    inplace(&|t| scatter_inplace(t, 1, &idx, &src)),
                );
                same(
                    scatter_add(&x, 1, &idx, &src).unwrap_err(),
                    inplace(&|t| scatter_add_inplace(t, 1, &idx, &src)),
                );
                same(
                    scatter(&x, 1, &idx, 2.5).unwrap_err(),
                    inplace(&|t| scatter_inplace(t, 1, &idx, 2.5)),
                );
                for r in [Reduce::Mean, Reduce::Amax] {
                    same(
                        scatter_reduce(&x, 1, &idx, &src, r, false).unwrap_err(),
                        inplace(&|t| scatter_reduce_inplace(t, 1, &idx, &src, r, false)),
                    );
                }
            }
            // Valid: the out-of-place results equal the in-place ones.
            let mut t = x.clone();
            scatter_reduce_inplace(&mut t, 1, &good, &src, Reduce::Mean, false).unwrap();
            assert_eq!(
                scatter_reduce(&x, 1, &good, &src, Reduce::Mean, false).unwrap(),
                t
            );
            let mut t = x.clone();
            scatter_inplace(&mut t, 1, &good, &src).unwrap();
            assert_eq!(scatter(&x, 1, &good, &src).unwrap(), t);
        }
    }

    #[test]
    fn failed_inplace_call_changes_nothing() {
        let mut x = Array1::<f32>::zeros(6);
        let e =
            scatter_inplace(&mut x, 0, &array![0, 1, 9, 3], &Array1::<f32>::ones(4)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(x, Array1::<f32>::zeros(6));
    }

    #[test]
    fn empty_index_leaves_self_unchanged_even_with_odd_shapes() {
        let x = array![[1, 2], [3, 4]];
        let idx = Array2::<i64>::zeros((0, 7));
        assert_eq!(scatter(&x, 1, &idx, &Array1::<i32>::zeros(1)).unwrap(), x);
        let e = scatter_reduce(
            &array![true],
            0,
            &Array1::<i64>::zeros(0),
            &array![true],
            Reduce::Mean,
            true,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn zero_d_self_acts_as_one_element_vector() {
        let out = scatter_add(&arr0(1.0f64), 0, &arr0(0i64), &arr0(2.0f64)).unwrap();
        assert_eq!(out, arr0(3.0));
    }

    #[test]
    fn src_larger_than_index_reads_the_leading_block() {
        let src = Array2::from_shape_fn((4, 5), |(a, b)| (a * 10 + b) as i32);
        let out = scatter(
            &Array2::<i32>::zeros((3, 4)),
            0,
            &array![[2, 1, 0, 2]],
            &src,
        )
        .unwrap();
        assert_eq!(out, array![[0, 0, 2, 0], [0, 1, 0, 0], [0, 0, 0, 3]]);
    }
}
