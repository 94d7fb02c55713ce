//! Group reductions beyond `scatter_reduce`: arg-reductions, `logsumexp`, `softmax`,
//! `log_softmax`, `var`/`std`, `any`/`all`, `first`/`last`, and a chosen fill for empty groups.
//!
//! A **group** is the set of source elements that one output element reduces. Along `dim`, every
//! source position `j` of a lane sends `src[.., j, ..]` to group `index[.., j, ..]`:
//!
//! ```text
//! scatter_groups(src, dim=0, index, Amax, dim_size=4)
//!
//!   position j    0   1   2   3
//!   index         1   3   0   0
//!   src           5   7   9   4
//!
//!   group 0 ← src[2], src[3]   →  out[0] = max(9, 4) = 9
//!   group 1 ← src[0]           →  out[1] = 5
//!   group 2 ← (nothing)        →  out[2] = fill (by default the identity, -inf)
//!   group 3 ← src[1]           →  out[3] = 7
//!
//! scatter_softmax(src, dim=0, index): out has src's shape, each element normalised in its group
//!   out[j] = exp(src[j]) / Σ_{k : index[k] = index[j]} exp(src[k])
//!   out[2] = exp(9) / (exp(9) + exp(4)),   out[0] = exp(5) / exp(5) = 1
//! ```
//!
//! - `index` has `src`'s number of dims and is no larger than `src` on any dim (only the leading
//!   index-shaped block of `src` is read, as in PyTorch), or it is **1-D**: one group id per
//!   position along `dim`, shared by every lane (pytorch_scatter's broadcast; nothing is copied).
//! - The output has `src`'s shape with `dim` replaced by `dim_size` (default: largest index + 1).
//!   Output elements no source reaches are **empty groups** and get the [`EmptyFill`].
//! - Each group is reduced in ascending index order by one thread, so results (float sums
//!   included) are bitwise identical for any number of threads. `f16`/`bf16` accumulate in `f32`.
//! - Work runs in parallel over independent lanes, or, for an index shared by every lane (1-D, or
//!   broadcast) along a non-contiguous `dim` (the graph case: `[E, F]` messages into `[V, F]`
//!   nodes), over groups: a counting sort of the index gives each group its rows, which are folded
//!   whole. Both orders give the same bits.
//! - [`scatter_reduce_arg`] is PyTorch's `scatter_reduce` (amax/amin, `include_self`) that also
//!   returns, for each output element, the position along `dim` of the source that won.
//!
//! The same reductions run over sorted segments in [`segment`](super::segment): the two families
//! share one implementation (a segment op is a scatter with a 1-D, sorted index).

use std::str::FromStr;

use ndarray::{
    Array, ArrayBase, ArrayD, ArrayView, ArrayView1, ArrayViewMut, ArrayViewMut1, Axis, Data,
    DataMut, Dimension, IxDyn, Slice,
};
use num_traits::{Float, NumCast, One, Zero};

use crate::dims::normalize_dim;
use crate::element::{DType, Element};
use crate::error::{Error, Result, fmt_shape};
use crate::grad::GradFloat;
use crate::index::{Bounds, CheckedIndex, IndexElem};
pub(crate) use crate::kernels::fold::Fold;
use crate::kernels::fold::{self, PAR_MIN_WORK};

/// The element types of the grouped reductions: every [`Element`].
///
/// The float-only reductions (`logsumexp`, `var`, `std`) are compiled for the float types alone:
/// on an integer or bool array they are an [`ErrorKind::InvalidArgument`] before any arithmetic
/// runs, and the softmax functions ask for a float element type
/// ([`GradFloat`]) at compile time. `f16`/`bf16` compute in `f32`.
///
/// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
///
/// ```
/// use gather::ops::reduce::{scatter_groups, GroupOptions, GroupReduce};
/// use ndarray::array;
/// let e = scatter_groups(&array![1i32, 2], 0, &array![0, 0], GroupReduce::LogSumExp, GroupOptions::default());
/// assert!(e.unwrap_err().to_string().contains("needs a float dtype"));
/// ```
pub trait ReduceElement: Element {
    /// NaN for the float types, `None` for the others.
    #[doc(hidden)]
    fn nan() -> Option<Self>;
    /// Runs a float-only reduction (`logsumexp`, `var`, `std`) over the groups; `None`, having
    /// run nothing, for the types that are not floats.
    #[doc(hidden)]
    fn float_groups<I: IndexElem>(
        reduce: GroupReduce,
        dim: usize,
        src: ArrayView<'_, Self, IxDyn>,
        index: ArrayView<'_, I, IxDyn>,
        out: ArrayViewMut<'_, Self, IxDyn>,
    ) -> Option<()>;
    /// Whether sum, prod, amax and amin run in a carrier type (see [`CarriedGroups`]).
    #[doc(hidden)]
    const CARRY_ARITH: bool;
    /// Whether mean runs in a carrier type.
    #[doc(hidden)]
    const CARRY_MEAN: bool;
    /// Runs `reduce` over the groups in the carrier type (see [`CarriedGroups`]).
    #[doc(hidden)]
    fn carried_groups<I: IndexElem>(
        reduce: GroupReduce,
        dim: usize,
        src: ArrayView<'_, Self, IxDyn>,
        index: ArrayView<'_, I, IxDyn>,
        out: ArrayViewMut<'_, Self, IxDyn>,
    );
    /// Runs an arg-reduction in the carrier type (where `CARRY_ARITH`; see [`arg_fold`]).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn carried_arg<I: IndexElem>(
        reduce: ArgReduce,
        include_self: bool,
        dim: usize,
        out: ArrayViewMut<'_, Self, IxDyn>,
        arg: ArrayViewMut<'_, i64, IxDyn>,
        index: ArrayView<'_, I, IxDyn>,
        src: ArrayView<'_, Self, IxDyn>,
        shift: i64,
    );
}

/// The group folds are compiled for a few carrier types only, so that each is not compiled once
/// per element type: every reduction of `u64`, `i64`, `f32` and `f64` (the carriers),
/// plus `Mean` of the narrow integers (floor division of the sum wrapped in the type itself) and
/// the float-only reductions of `f16`/`bf16` (whose wide type differs from `f32`'s). The rest is
/// carried:
///
/// ```text
/// i8, i16, i32   sum prod amax amin → i64 (wrapping sums and products truncate back exactly)
/// u8, u16, u32   sum prod amax amin → u64
/// f16, bf16      sum prod mean amax amin → f32 (their own accumulator: rounded once, as before)
/// bool           sum prod amax amin → u64 (or and and: a sum or product of 0s and 1s is 0 or not;
///                mean, an error for bool before any fold, is carried so as not to be compiled)
/// ```
///
/// First and last, which move elements and compute nothing, run on words of the type's width
/// (`kernels::fold::pick`).
///
/// The flags are constants so that [`reduce_groups`] does not compile the folds a type carries.
trait CarriedGroups: Sized {
    /// sum, prod, amax and amin are carried.
    const ARITH: bool;
    /// mean is carried.
    const MEAN: bool;
    fn carried<I: IndexElem>(
        reduce: GroupReduce,
        dim: usize,
        src: ArrayView<'_, Self, IxDyn>,
        index: ArrayView<'_, I, IxDyn>,
        out: ArrayViewMut<'_, Self, IxDyn>,
    );
    /// An arg-reduction in the carrier of sum, prod, amax and amin: the conversions keep the
    /// order, the equalities and the NaNs, so the values and the args are those of the type.
    #[allow(clippy::too_many_arguments)]
    fn carried_arg<I: IndexElem>(
        reduce: ArgReduce,
        include_self: bool,
        dim: usize,
        out: ArrayViewMut<'_, Self, IxDyn>,
        arg: ArrayViewMut<'_, i64, IxDyn>,
        index: ArrayView<'_, I, IxDyn>,
        src: ArrayView<'_, Self, IxDyn>,
        shift: i64,
    );
}

macro_rules! carry {
    ($($t:ty: [$arith_on:expr, $mean_on:expr] $arith:ty, $to:expr, $from:expr;)*) => {$(
        impl CarriedGroups for $t {
            const ARITH: bool = $arith_on;
            const MEAN: bool = $mean_on;
            fn carried<I: IndexElem>(
                r: GroupReduce,
                dim: usize,
                src: ArrayView<'_, $t, IxDyn>,
                index: ArrayView<'_, I, IxDyn>,
                out: ArrayViewMut<'_, $t, IxDyn>,
            ) {
                via::<$t, $arith, I>(r, dim, src, index, out, $to, $from)
            }
            fn carried_arg<I: IndexElem>(
                reduce: ArgReduce,
                include_self: bool,
                dim: usize,
                mut out: ArrayViewMut<'_, $t, IxDyn>,
                arg: ArrayViewMut<'_, i64, IxDyn>,
                index: ArrayView<'_, I, IxDyn>,
                src: ArrayView<'_, $t, IxDyn>,
                shift: i64,
            ) {
                let to: fn($t) -> $arith = $to;
                let from: fn($arith) -> $t = $from;
                let src = crate::kernels::zip::map(&src, |&x| to(x));
                let mut acc = crate::kernels::zip::map(&out.view(), |&x| to(x));
                arg_fold(reduce, include_self, dim, acc.view_mut(), arg, index, src.view(), shift);
                crate::kernels::zip::zip2(&mut out, &acc.view(), |o, &c| *o = from(c));
            }
        }
    )*};
}

carry! {
    i8: [true, false] i64, |x| x as i64, |c| c as i8;
    i16: [true, false] i64, |x| x as i64, |c| c as i16;
    i32: [true, false] i64, |x| x as i64, |c| c as i32;
    u8: [true, false] u64, |x| x as u64, |c| c as u8;
    u16: [true, false] u64, |x| x as u64, |c| c as u16;
    u32: [true, false] u64, |x| x as u64, |c| c as u32;
    u64: [false, false] u64, |x| x, |c| c;
    i64: [false, false] i64, |x| x, |c| c;
    f32: [false, false] f32, |x| x, |c| c;
    f64: [false, false] f64, |x| x, |c| c;
    half::f16: [true, true] f32, half::f16::to_acc, half::f16::from_acc;
    half::bf16: [true, true] f32, half::bf16::to_acc, half::bf16::from_acc;
    bool: [true, true] u64, |x| x as u64, |c| c != 0;
}

/// Runs `reduce` on `src` and `out` converted to `C`, then writes the result back (see
/// [`CarriedGroups`]). The conversions cost a copy of `src` and two passes over `out`.
fn via<T: Copy, C: ReduceElement, I: IndexElem>(
    reduce: GroupReduce,
    dim: usize,
    src: ArrayView<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    mut out: ArrayViewMut<'_, T, IxDyn>,
    to: fn(T) -> C,
    from: fn(C) -> T,
) {
    let src = crate::kernels::zip::map(&src, |&x| to(x));
    let mut acc = crate::kernels::zip::map(&out.view(), |&x| to(x));
    reduce_groups(reduce, dim, src.view(), index, acc.view_mut());
    crate::kernels::zip::zip2(&mut out, &acc.view(), |o, &c| *o = from(c));
}

/// The carrier items of [`ReduceElement`], from [`CarriedGroups`].
macro_rules! carried_items {
    ($t:ty) => {
        const CARRY_ARITH: bool = <$t as CarriedGroups>::ARITH;
        const CARRY_MEAN: bool = <$t as CarriedGroups>::MEAN;
        fn carried_groups<I: IndexElem>(
            reduce: GroupReduce,
            dim: usize,
            src: ArrayView<'_, $t, IxDyn>,
            index: ArrayView<'_, I, IxDyn>,
            out: ArrayViewMut<'_, $t, IxDyn>,
        ) {
            <$t as CarriedGroups>::carried(reduce, dim, src, index, out)
        }
        fn carried_arg<I: IndexElem>(
            reduce: ArgReduce,
            include_self: bool,
            dim: usize,
            out: ArrayViewMut<'_, $t, IxDyn>,
            arg: ArrayViewMut<'_, i64, IxDyn>,
            index: ArrayView<'_, I, IxDyn>,
            src: ArrayView<'_, $t, IxDyn>,
            shift: i64,
        ) {
            <$t as CarriedGroups>::carried_arg(
                reduce,
                include_self,
                dim,
                out,
                arg,
                index,
                src,
                shift,
            )
        }
    };
}

macro_rules! reduce_other {
    ($($t:ty),*) => {$(
        impl ReduceElement for $t {
            fn nan() -> Option<$t> {
                None
            }
            fn float_groups<I: IndexElem>(
                _: GroupReduce,
                _: usize,
                _: ArrayView<'_, $t, IxDyn>,
                _: ArrayView<'_, I, IxDyn>,
                _: ArrayViewMut<'_, $t, IxDyn>,
            ) -> Option<()> {
                None
            }
            carried_items!($t);
        }
    )*};
}
reduce_other!(bool, u8, i8, i16, i32, i64, u16, u32, u64);

macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl ReduceElement for $t {
            fn nan() -> Option<$t> {
                Some(<$t as GradFloat>::narrow(Float::nan()))
            }
            fn float_groups<I: IndexElem>(
                reduce: GroupReduce,
                dim: usize,
                src: ArrayView<'_, $t, IxDyn>,
                index: ArrayView<'_, I, IxDyn>,
                out: ArrayViewMut<'_, $t, IxDyn>,
            ) -> Option<()> {
                float_groups(reduce, dim, src, index, out);
                Some(())
            }
            carried_items!($t);
        }
    )*};
}
reduce_float!(f32, f64, half::f16, half::bf16);

/// How a group of source elements reduces to one output element.
///
/// | reduce | result of a group `x_1 .. x_n` (index order) | dtypes | identity (empty group) |
/// |---|---|---|---|
/// | `Sum` | `x_1 + .. + x_n` | all (bool: or) | `0` |
/// | `Prod` | `x_1 * .. * x_n` | all (bool: and) | `1` |
/// | `Mean` | sum / n (floor division for integers) | all but bool | `0` |
/// | `Amax` / `Amin` | largest / smallest; NaN propagates | all | `-inf`/`+inf`, or the type's lowest/highest |
/// | `First` / `Last` | `x_1` / `x_n` | all | `0` |
/// | `LogSumExp` | `log(exp(x_1) + .. + exp(x_n))`, stable | floats | `-inf` |
/// | `Var { correction }` | `Σ (x_i - mean)² / max(0, n - correction)` | floats | NaN |
/// | `Std { correction }` | `sqrt(Var)` | floats | NaN |
///
/// `correction: 1` is the unbiased (sample) estimate, `0` the population one (PyTorch's
/// `correction`, default 1). A group of `n <= correction` elements gives NaN or `inf`, as in
/// PyTorch. `LogSumExp`, `Var` and `Std` are computed in one pass (a running maximum with a
/// rescaled sum; Welford's update) in `f32` for `f16`/`bf16`/`f32` and `f64` for `f64`.
///
/// ```
/// use gather::ops::reduce::GroupReduce;
/// assert_eq!("logsumexp".parse::<GroupReduce>().unwrap(), GroupReduce::LogSumExp);
/// assert_eq!("std".parse::<GroupReduce>().unwrap(), GroupReduce::Std { correction: 1 });
/// assert_eq!("max".parse::<GroupReduce>().unwrap(), GroupReduce::Amax);
/// assert!("median".parse::<GroupReduce>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GroupReduce {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Mean (floor division for integers, as PyTorch's `scatter_reduce`).
    Mean,
    /// Maximum; NaN propagates.
    Amax,
    /// Minimum; NaN propagates.
    Amin,
    /// The first element of the group in index order (a deterministic "set").
    First,
    /// The last element of the group in index order (what `scatter` keeps).
    Last,
    /// `log(Σ exp(x))`, numerically stable (floats only).
    LogSumExp,
    /// Variance with `correction` (floats only).
    Var {
        /// Subtracted from the group size in the denominator: 1 unbiased, 0 population.
        correction: usize,
    },
    /// Standard deviation with `correction` (floats only).
    Std {
        /// Subtracted from the group size in the denominator: 1 unbiased, 0 population.
        correction: usize,
    },
}

impl GroupReduce {
    /// The name (`sum`, `prod`, `mean`, `amax`, `amin`, `first`, `last`, `logsumexp`, `var`,
    /// `std`).
    ///
    /// ```
    /// assert_eq!(gather::ops::reduce::GroupReduce::LogSumExp.name(), "logsumexp");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            GroupReduce::Sum => "sum",
            GroupReduce::Prod => "prod",
            GroupReduce::Mean => "mean",
            GroupReduce::Amax => "amax",
            GroupReduce::Amin => "amin",
            GroupReduce::First => "first",
            GroupReduce::Last => "last",
            GroupReduce::LogSumExp => "logsumexp",
            GroupReduce::Var { .. } => "var",
            GroupReduce::Std { .. } => "std",
        }
    }

    /// True for the reductions that need a float dtype (`logsumexp`, `var`, `std`).
    ///
    /// ```
    /// use gather::ops::reduce::GroupReduce;
    /// assert!(GroupReduce::Var { correction: 0 }.needs_float());
    /// assert!(!GroupReduce::First.needs_float());
    /// ```
    pub fn needs_float(self) -> bool {
        matches!(
            self,
            GroupReduce::LogSumExp | GroupReduce::Var { .. } | GroupReduce::Std { .. }
        )
    }
}

impl FromStr for GroupReduce {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "sum" | "add" => GroupReduce::Sum,
            "prod" | "mul" => GroupReduce::Prod,
            "mean" => GroupReduce::Mean,
            "amax" | "max" => GroupReduce::Amax,
            "amin" | "min" => GroupReduce::Amin,
            "first" => GroupReduce::First,
            "last" => GroupReduce::Last,
            "logsumexp" => GroupReduce::LogSumExp,
            "var" => GroupReduce::Var { correction: 1 },
            "std" => GroupReduce::Std { correction: 1 },
            _ => {
                return Err(Error::invalid(format!(
                    "reduce must be one of sum, prod, mean, amax, amin, first, last, logsumexp, var, std; got {s}"
                ))
                .with_hint("softmax and log_softmax have their own functions (scatter_softmax, segment_softmax), as their output has src's shape"));
            }
        })
    }
}

/// What an empty group (an output element no source reaches) holds.
///
/// `Identity` is the reduction's identity (see [`GroupReduce`]; `false` for `any`, `true` for
/// `all`); reductions without one use `0` (`mean`, `first`, `last`, as pytorch_scatter) or NaN
/// (`var`, `std`, as PyTorch). `Nan` needs a float dtype.
///
/// ```
/// use gather::ops::reduce::{EmptyFill, GroupOptions, GroupReduce, scatter_groups};
/// use ndarray::array;
/// let src = array![5.0f32, 7.0];
/// let idx = array![0, 2];
/// let opts = |fill| GroupOptions { dim_size: None, fill };
/// let out = scatter_groups(&src, 0, &idx, GroupReduce::Amax, opts(EmptyFill::Identity))?;
/// assert_eq!(out, array![5.0, f32::NEG_INFINITY, 7.0]);
/// let out = scatter_groups(&src, 0, &idx, GroupReduce::Amax, opts(EmptyFill::Zero))?;
/// assert_eq!(out, array![5.0, 0.0, 7.0]);
/// let out = scatter_groups(&src, 0, &idx, GroupReduce::Amax, opts(EmptyFill::Value(-1.0)))?;
/// assert_eq!(out, array![5.0, -1.0, 7.0]);
/// let out = scatter_groups(&src, 0, &idx, GroupReduce::Amax, opts(EmptyFill::Nan))?;
/// assert!(out[1].is_nan());
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum EmptyFill<T> {
    /// The reduction's identity (the default).
    #[default]
    Identity,
    /// Zero (`false` for bool).
    Zero,
    /// NaN (float dtypes only).
    Nan,
    /// A given value.
    Value(T),
}

#[cfg(any(feature = "backend", feature = "dynamic"))]
impl EmptyFill<crate::Scalar> {
    /// The fill in the element type `T`, for callers that keep a value as a [`Scalar`] until
    /// the dtype is known (the dynamic layer, the GPU backend); one that does not fit is `op`'s
    /// error.
    pub(crate) fn to_element<T: Element>(self, op: &str) -> Result<EmptyFill<T>> {
        Ok(match self {
            EmptyFill::Identity => EmptyFill::Identity,
            EmptyFill::Zero => EmptyFill::Zero,
            EmptyFill::Nan => EmptyFill::Nan,
            EmptyFill::Value(s) => {
                EmptyFill::Value(T::from_scalar(s).map_err(|e| crate::error::prefixed(op, e))?)
            }
        })
    }
}

/// Options of the create-style group reductions: the output size along `dim` and the fill of
/// empty groups.
///
/// ```
/// use gather::ops::reduce::{EmptyFill, GroupOptions};
/// let o = GroupOptions::<f32>::default().dim_size(5).fill(EmptyFill::Zero);
/// assert_eq!(o.dim_size, Some(5));
/// assert_eq!(o.fill, EmptyFill::Zero);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupOptions<T> {
    /// The output's size along `dim` (segment ops: the number of segments for sorted ids). `None`:
    /// the largest index value + 1 (0 for an empty index).
    pub dim_size: Option<usize>,
    /// What empty groups hold.
    pub fill: EmptyFill<T>,
}

// Not derived: the default needs no `T: Default` (a fill given as a `Scalar` has none).
impl<T> Default for GroupOptions<T> {
    fn default() -> Self {
        GroupOptions {
            dim_size: None,
            fill: EmptyFill::Identity,
        }
    }
}

impl<T> GroupOptions<T> {
    /// Sets [`GroupOptions::dim_size`].
    ///
    /// ```
    /// assert_eq!(gather::ops::reduce::GroupOptions::<i32>::default().dim_size(3).dim_size, Some(3));
    /// ```
    pub fn dim_size(mut self, n: usize) -> Self {
        self.dim_size = Some(n);
        self
    }

    /// Sets [`GroupOptions::fill`].
    ///
    /// ```
    /// use gather::ops::reduce::{EmptyFill, GroupOptions};
    /// assert_eq!(GroupOptions::default().fill(EmptyFill::Value(2)).fill, EmptyFill::Value(2));
    /// ```
    pub fn fill(mut self, fill: EmptyFill<T>) -> Self {
        self.fill = fill;
        self
    }
}

/// The reductions that return the winning source position: `amax` and `amin`.
///
/// ```
/// use gather::ops::reduce::ArgReduce;
/// assert_eq!("max".parse::<ArgReduce>().unwrap(), ArgReduce::Amax);
/// assert!("sum".parse::<ArgReduce>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgReduce {
    /// Maximum; the arg is the first source (in index order) holding it.
    Amax,
    /// Minimum; the arg is the first source (in index order) holding it.
    Amin,
}

impl FromStr for ArgReduce {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "amax" | "max" => Ok(ArgReduce::Amax),
            "amin" | "min" => Ok(ArgReduce::Amin),
            _ => Err(
                Error::invalid(format!("arg-reductions are amax and amin, got {s}")).with_hint(
                    "sum, prod and mean have no winning position; use scatter_reduce for them",
                ),
            ),
        }
    }
}

/// The sentinel of [`scatter_reduce_arg`]'s arg array where no source won.
///
/// ```
/// assert_eq!(gather::ops::reduce::NO_ARG, -1);
/// ```
pub const NO_ARG: i64 = -1;

// ---------------------------------------------------------------------------------------------
// The lane driver: every op of this file and of `segment` runs through it.

/// Runs `f` over the lanes along `dim` of two outputs and two inputs whose shapes agree on every
/// axis but `dim` (an input may have size 1 there: it is broadcast), in row-major lane order. Lanes are independent, so chunks of lanes run in
/// parallel; each lane is handled by one thread, start to end, so results do not depend on the
/// thread count. `scratch` makes one work buffer per chunk.
#[allow(clippy::too_many_arguments)]
pub(crate) fn for_each_lane<O1, O2, A, B, W>(
    dim: usize,
    mut o1: ArrayViewMut<'_, O1, IxDyn>,
    mut o2: ArrayViewMut<'_, O2, IxDyn>,
    a: ArrayView<'_, A, IxDyn>,
    b: ArrayView<'_, B, IxDyn>,
    scratch: impl Fn() -> W + Sync,
    f: impl Fn(
        &mut W,
        ArrayViewMut1<'_, O1>,
        ArrayViewMut1<'_, O2>,
        ArrayView1<'_, A>,
        ArrayView1<'_, B>,
    ) + Sync,
) where
    O1: Send,
    O2: Send,
    A: Sync,
    B: Sync,
{
    let nd = o1.ndim();
    debug_assert!(nd == o2.ndim() && nd == a.ndim() && nd == b.ndim());
    debug_assert!((0..nd).all(|ax| ax == dim || o1.shape()[ax] == o2.shape()[ax]));
    if (0..nd).any(|ax| ax != dim && o1.shape()[ax] == 0) {
        return;
    }
    let like = |len: usize| {
        let mut s = o1.shape().to_vec();
        s[dim] = len;
        IxDyn(&s)
    };
    let (Some(a), Some(b)) = (
        a.broadcast(like(a.shape()[dim])),
        b.broadcast(like(b.shape()[dim])),
    ) else {
        debug_assert!(false, "lane inputs do not broadcast to the output's lanes");
        return;
    };
    let run = |w: &mut W,
               mut o1: ArrayViewMut<'_, O1, IxDyn>,
               mut o2: ArrayViewMut<'_, O2, IxDyn>,
               a: ArrayView<'_, A, IxDyn>,
               b: ArrayView<'_, B, IxDyn>| {
        let lanes = o1
            .lanes_mut(Axis(dim))
            .into_iter()
            .zip(o2.lanes_mut(Axis(dim)))
            .zip(a.lanes(Axis(dim)))
            .zip(b.lanes(Axis(dim)));
        for (((l1, l2), la), lb) in lanes {
            f(w, l1, l2, la, lb);
        }
    };
    let work = a.len() + o1.len();
    let split = (0..nd)
        .filter(|&ax| ax != dim)
        .max_by_key(|&ax| (o1.shape()[ax], usize::MAX - ax));
    let threads = rayon::current_num_threads();
    let (parallel, parts) = match split {
        Some(ax) if work >= PAR_MIN_WORK && threads > 1 && o1.shape()[ax] > 1 => {
            let len = o1.shape()[ax];
            let chunk = len.div_ceil(threads * 4).max(1);
            let parts: Vec<_> = o1
                .axis_chunks_iter_mut(Axis(ax), chunk)
                .zip(o2.axis_chunks_iter_mut(Axis(ax), chunk))
                .zip(a.axis_chunks_iter(Axis(ax), chunk))
                .zip(b.axis_chunks_iter(Axis(ax), chunk))
                .collect();
            (true, parts)
        }
        _ => (false, vec![(((o1, o2), a.view()), b.view())]),
    };
    crate::plan::each(parts, parallel, |(((p1, p2), pa), pb)| {
        let mut w = scratch();
        run(&mut w, p1, p2, pa, pb);
    });
}

/// An empty array whose lanes along `dim` match `like`'s (a placeholder second output).
pub(crate) fn no_output(like: &[usize], dim: usize) -> ArrayD<u8> {
    let mut s = like.to_vec();
    s[dim] = 0;
    ArrayD::zeros(IxDyn(&s))
}

pub(crate) struct SumF;
impl<T: Element> Fold<T> for SumF {
    type State = T::Acc;
    type Out = T;
    fn init(&self) -> T::Acc {
        T::acc_zero()
    }
    #[inline(always)]
    fn push(&self, s: &mut T::Acc, x: T, _j: usize) {
        *s = T::acc_add(*s, x.to_acc());
    }
    fn finish(&self, s: T::Acc, _n: usize) -> T {
        T::from_acc(s)
    }
}

pub(crate) struct ProdF;
impl<T: Element> Fold<T> for ProdF {
    type State = T::Acc;
    type Out = T;
    fn init(&self) -> T::Acc {
        T::acc_one()
    }
    #[inline(always)]
    fn push(&self, s: &mut T::Acc, x: T, _j: usize) {
        *s = T::acc_mul(*s, x.to_acc());
    }
    fn finish(&self, s: T::Acc, _n: usize) -> T {
        T::from_acc(s)
    }
}

pub(crate) struct MeanF;
impl<T: Element> Fold<T> for MeanF {
    type State = T::Acc;
    type Out = T;
    fn init(&self) -> T::Acc {
        T::acc_zero()
    }
    #[inline(always)]
    fn push(&self, s: &mut T::Acc, x: T, _j: usize) {
        *s = T::acc_add(*s, x.to_acc());
    }
    fn finish(&self, s: T::Acc, n: usize) -> T {
        T::from_acc(T::acc_div_count(s, n))
    }
}

struct MaxF;
impl<T: Element> Fold<T> for MaxF {
    type State = T::Acc;
    type Out = T;
    fn init(&self) -> T::Acc {
        T::max_identity().to_acc()
    }
    #[inline(always)]
    fn push(&self, s: &mut T::Acc, x: T, _j: usize) {
        *s = T::acc_max(*s, x.to_acc());
    }
    fn finish(&self, s: T::Acc, _n: usize) -> T {
        T::from_acc(s)
    }
}

struct MinF;
impl<T: Element> Fold<T> for MinF {
    type State = T::Acc;
    type Out = T;
    fn init(&self) -> T::Acc {
        T::min_identity().to_acc()
    }
    #[inline(always)]
    fn push(&self, s: &mut T::Acc, x: T, _j: usize) {
        *s = T::acc_min(*s, x.to_acc());
    }
    fn finish(&self, s: T::Acc, _n: usize) -> T {
        T::from_acc(s)
    }
}

/// The shift of the running log-sum-exp: the running maximum when finite, else 0 (so that an
/// infinite maximum never meets `inf - inf`).
#[inline(always)]
fn lse_shift<R: Float>(m: R) -> R {
    if m.is_finite() { m } else { R::zero() }
}

/// One-pass log-sum-exp state: running maximum `m`, `s = Σ exp(x - shift(m))`, and whether a NaN
/// was seen.
#[derive(Clone, Copy)]
pub(crate) struct Lse<R> {
    m: R,
    s: R,
    nan: bool,
}

impl<R: Float> Lse<R> {
    pub(crate) fn new() -> Self {
        Lse {
            m: R::neg_infinity(),
            s: R::zero(),
            nan: false,
        }
    }
    #[inline(always)]
    pub(crate) fn push(&mut self, x: R) {
        if x.is_nan() {
            self.nan = true;
            return;
        }
        let old = lse_shift(self.m);
        let m = if x > self.m { x } else { self.m };
        let new = lse_shift(m);
        let kept = if self.s == R::zero() || old == new {
            self.s
        } else {
            self.s * (old - new).exp()
        };
        self.s = kept + (x - new).exp();
        self.m = m;
    }
    /// `log Σ exp(x)`.
    pub(crate) fn value(&self) -> R {
        if self.nan {
            R::nan()
        } else {
            lse_shift(self.m) + self.s.ln()
        }
    }
    /// `exp(x) / Σ exp(x)` for a member `x` of the group.
    #[inline(always)]
    pub(crate) fn softmax(&self, x: R) -> R {
        if self.nan || self.m == R::infinity() {
            return R::nan();
        }
        (x - lse_shift(self.m)).exp() / self.s
    }
    /// `x - log Σ exp(x)` for a member `x` of the group.
    #[inline(always)]
    pub(crate) fn log_softmax(&self, x: R) -> R {
        if self.nan || self.m == R::infinity() {
            return R::nan();
        }
        x - self.value()
    }
}

struct LseF;
impl<T: GradFloat> Fold<T> for LseF {
    type State = Lse<T::Wide>;
    type Out = T;
    fn init(&self) -> Lse<T::Wide> {
        Lse::new()
    }
    #[inline(always)]
    fn push(&self, s: &mut Lse<T::Wide>, x: T, _j: usize) {
        s.push(x.widen());
    }
    fn finish(&self, s: Lse<T::Wide>, _n: usize) -> T {
        T::narrow(s.value())
    }
}

/// The running log-sum-exp state itself, as a fold result (softmax's first pass).
struct LseStateF;
impl<T: GradFloat> Fold<T> for LseStateF {
    type State = Lse<T::Wide>;
    type Out = Lse<T::Wide>;
    fn init(&self) -> Lse<T::Wide> {
        Lse::new()
    }
    #[inline(always)]
    fn push(&self, s: &mut Lse<T::Wide>, x: T, _j: usize) {
        s.push(x.widen());
    }
    fn finish(&self, s: Lse<T::Wide>, _n: usize) -> Lse<T::Wide> {
        s
    }
}

/// Welford's one-pass mean and sum of squared deviations.
struct VarF {
    correction: usize,
    std: bool,
}
impl<T: GradFloat> Fold<T> for VarF {
    type State = (T::Wide, T::Wide, T::Wide);
    type Out = T;
    fn init(&self) -> Self::State {
        let z = T::Wide::zero();
        (z, z, z)
    }
    #[inline(always)]
    fn push(&self, s: &mut Self::State, x: T, _j: usize) {
        let x = x.widen();
        let (k, mean, m2) = *s;
        let k = k + T::Wide::one();
        let d = x - mean;
        let mean = mean + d / k;
        let m2 = m2 + d * (x - mean);
        *s = (k, mean, m2);
    }
    fn finish(&self, s: Self::State, n: usize) -> T {
        let denom = n.saturating_sub(self.correction);
        let denom = <T::Wide as NumCast>::from(denom).unwrap_or_else(T::Wide::infinity);
        let var = s.2 / denom;
        T::narrow(if self.std { var.sqrt() } else { var })
    }
}

struct AnyF;
impl<T: Element> Fold<T> for AnyF {
    type State = bool;
    type Out = bool;
    fn init(&self) -> bool {
        false
    }
    #[inline(always)]
    fn push(&self, s: &mut bool, x: T, _j: usize) {
        *s |= x != T::default();
    }
    fn finish(&self, s: bool, _n: usize) -> bool {
        s
    }
}

struct AllF;
impl<T: Element> Fold<T> for AllF {
    type State = bool;
    type Out = bool;
    fn init(&self) -> bool {
        true
    }
    #[inline(always)]
    fn push(&self, s: &mut bool, x: T, _j: usize) {
        *s &= x != T::default();
    }
    fn finish(&self, s: bool, _n: usize) -> bool {
        s
    }
}

/// `any` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnyAll {
    Any,
    All,
}

/// Each element's truth (nonzero; NaN counts as nonzero): `any`/`all` see nothing else, so
/// everything after this map (checks, fills, group walks) is compiled once, for bool, instead of
/// once per element type.
pub(crate) fn truth<T: Element>(src: &ArrayView<'_, T, IxDyn>) -> ArrayD<bool> {
    crate::kernels::zip::map(src, |&x| x != T::default())
}

/// Runs `any`/`all` over the groups of the truths `src` (see [`truth`], [`fold_groups`]).
pub(crate) fn fold_any_all<I: IndexElem>(
    which: AnyAll,
    dim: usize,
    src: ArrayView<'_, bool, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    out: ArrayViewMut<'_, bool, IxDyn>,
) {
    match which {
        AnyAll::Any => fold_groups(&AnyF, dim, src, index, out),
        AnyAll::All => fold_groups(&AllF, dim, src, index, out),
    }
}

/// scatter_any / scatter_all on the truths of src.
fn any_all_groups<I: IndexElem>(
    which: AnyAll,
    src: ArrayView<'_, bool, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    opts: GroupOptions<bool>,
) -> Result<ArrayD<bool>> {
    let (op, identity) = match which {
        AnyAll::Any => ("scatter_any", false),
        AnyAll::All => ("scatter_all", true),
    };
    grouped_call(
        op,
        src,
        dim,
        index,
        opts.dim_size,
        || bool_fill(op, opts.fill, identity),
        |d, s, i, o| fold_any_all(which, d, s, i, o),
    )
}

/// Folds every group of every lane: `out` (already holding the fill) gets the result of each
/// non-empty group. `index` is checked against `out.shape()[dim]` and has `src`'s shape (or size
/// 1 on the axes where it is the same for every lane).
///
/// Two traversals give bitwise the same result (each group folds its sources in index order):
/// lane by lane (the general case), or, when the index is the same for every lane and `dim` is
/// not `src`'s contiguous axis (the `[E, F]` rows → `[V, F]` case), group by group over whole
/// rows through a counting sort of the index (CSR), parallel over groups.
pub(crate) fn fold_groups<T, I, F>(
    fold: &F,
    dim: usize,
    src: ArrayView<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    mut out: ArrayViewMut<'_, F::Out, IxDyn>,
) where
    T: Element,
    I: IndexElem,
    F: Fold<T>,
{
    match walk_of(dim, &src, &index, &out) {
        (Some(ids), _) => fold::fold_rows(fold, dim, &src, &ids, &mut out),
        (None, parallel) => fold::fold_lanes(fold, dim, &src, &index, &mut out, parallel),
    }
}

/// Which walk [`fold_groups`] takes: the group of each position along `dim` when the index is the
/// same for every lane and `dim` is not `src`'s contiguous axis (the row walk), else `None` (the
/// lane walk); and whether the lane walk runs in parallel.
fn walk_of<T, I: IndexElem, O>(
    dim: usize,
    src: &ArrayView<'_, T, IxDyn>,
    index: &ArrayView<'_, I, IxDyn>,
    out: &ArrayViewMut<'_, O, IxDyn>,
) -> (Option<Vec<usize>>, bool) {
    let rows = src.ndim() > 1 && src.strides()[dim].unsigned_abs() != 1;
    let ids = if rows {
        lane_invariant(index, dim)
    } else {
        None
    };
    (ids, src.len() + out.len() >= PAR_MIN_WORK)
}

/// The group of each position along `dim` when `index` is the same for every lane (a spread 1-D
/// index, or a broadcast view); `None` otherwise.
fn lane_invariant<I: IndexElem>(index: &ArrayView<'_, I, IxDyn>, dim: usize) -> Option<Vec<usize>> {
    let varies =
        (0..index.ndim()).any(|ax| ax != dim && index.shape()[ax] > 1 && index.strides()[ax] != 0);
    if varies {
        return None;
    }
    let lane = index.lanes(Axis(dim)).into_iter().next()?;
    Some(lane.iter().map(|i| i.to_i64() as usize).collect())
}

/// Runs `reduce` over the groups (see [`fold_groups`]).
pub(crate) fn reduce_groups<T: ReduceElement, I: IndexElem>(
    reduce: GroupReduce,
    dim: usize,
    src: ArrayView<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    out: ArrayViewMut<'_, T, IxDyn>,
) {
    // `if` on the constants (not a match guard), so that a carried type's own folds are not
    // compiled at all.
    match reduce {
        GroupReduce::Sum | GroupReduce::Prod | GroupReduce::Amax | GroupReduce::Amin => {
            if T::CARRY_ARITH {
                T::carried_groups(reduce, dim, src, index, out)
            } else {
                match reduce {
                    GroupReduce::Sum => fold_groups(&SumF, dim, src, index, out),
                    GroupReduce::Prod => fold_groups(&ProdF, dim, src, index, out),
                    GroupReduce::Amax => fold_groups(&MaxF, dim, src, index, out),
                    _ => fold_groups(&MinF, dim, src, index, out),
                }
            }
        }
        GroupReduce::Mean => {
            if T::CARRY_MEAN {
                T::carried_groups(reduce, dim, src, index, out)
            } else {
                fold_groups(&MeanF, dim, src, index, out)
            }
        }
        GroupReduce::First | GroupReduce::Last => {
            let last = reduce == GroupReduce::Last;
            let (ids, parallel) = walk_of(dim, &src, &index, &out);
            fold::pick(last, dim, &src, &index, out, ids.as_deref(), parallel)
        }
        GroupReduce::LogSumExp | GroupReduce::Var { .. } | GroupReduce::Std { .. } => {
            T::float_groups(reduce, dim, src, index, out)
                .expect("the dtype check lets only floats reach a float-only reduction")
        }
    }
}

/// The float-only reductions over the groups (see [`fold_groups`]).
fn float_groups<T: GradFloat, I: IndexElem>(
    reduce: GroupReduce,
    dim: usize,
    src: ArrayView<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    out: ArrayViewMut<'_, T, IxDyn>,
) {
    match reduce {
        GroupReduce::LogSumExp => fold_groups(&LseF, dim, src, index, out),
        GroupReduce::Var { correction } | GroupReduce::Std { correction } => {
            let std = matches!(reduce, GroupReduce::Std { .. });
            fold_groups(&VarF { correction, std }, dim, src, index, out)
        }
        _ => unreachable!("{} is not a float-only reduction", reduce.name()),
    }
}

/// A chunk of rows along `dim` (its first row's number, output rows, source rows).
type RowChunk<'a, T> = (usize, (ArrayViewMut<'a, T, IxDyn>, ArrayView<'a, T, IxDyn>));

/// Softmax (`log = false`) or log-softmax of every element within its group, in two passes over
/// `src`: one to build each group's running log-sum-exp, one to write `out` (src's shape).
pub(crate) fn softmax_groups<T: GradFloat, I: IndexElem>(
    log: bool,
    dim: usize,
    dim_size: usize,
    src: ArrayView<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    mut out: ArrayViewMut<'_, T, IxDyn>,
) {
    let apply = move |st: &Lse<T::Wide>, x: T| -> T {
        let x = x.widen();
        T::narrow(if log {
            st.log_softmax(x)
        } else {
            st.softmax(x)
        })
    };
    if src.ndim() > 1 && src.strides()[dim].unsigned_abs() != 1 {
        if let Some(ids) = lane_invariant(&index, dim) {
            // Whole rows: each group's state over all lanes (CSR), then each row from its group's.
            let mut shape = src.shape().to_vec();
            shape[dim] = dim_size;
            let mut states = ArrayD::from_elem(IxDyn(&shape), Lse::new());
            fold::fold_rows(&LseStateF, dim, &src, &ids, &mut states.view_mut());
            let rows = out.shape()[dim];
            let threads = rayon::current_num_threads();
            let parallel = src.len() >= PAR_MIN_WORK && threads > 1;
            let chunk = if parallel {
                rows.div_ceil(threads * 4).max(1)
            } else {
                rows.max(1)
            };
            let parts: Vec<_> = out
                .axis_chunks_iter_mut(Axis(dim), chunk)
                .zip(src.axis_chunks_iter(Axis(dim), chunk))
                .enumerate()
                .collect();
            let body = |(c, (mut o, s)): RowChunk<'_, T>| {
                for (k, (mut orow, srow)) in o
                    .axis_iter_mut(Axis(dim))
                    .zip(s.axis_iter(Axis(dim)))
                    .enumerate()
                {
                    let st = states.index_axis(Axis(dim), ids[c * chunk + k]);
                    ndarray::Zip::from(&mut orow)
                        .and(&srow)
                        .and(&st)
                        .for_each(|o, &x, st| *o = apply(st, x));
                }
            };
            crate::plan::each(parts, parallel, body);
            return;
        }
    }
    let mut none = no_output(out.shape(), dim);
    for_each_lane(
        dim,
        out,
        none.view_mut(),
        index,
        src,
        Vec::<Lse<T::Wide>>::new,
        |states, mut o, _, idx, s| {
            states.clear();
            states.resize(dim_size, Lse::new());
            for (i, &x) in idx.iter().zip(s.iter()) {
                states[i.to_i64() as usize].push(x.widen());
            }
            for ((o, i), &x) in o.iter_mut().zip(idx.iter()).zip(s.iter()) {
                *o = apply(&states[i.to_i64() as usize], x);
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the scatter-style entry points.

/// The value empty groups of `reduce` hold under `fill`.
pub(crate) fn fill_value<T: ReduceElement>(
    op: &str,
    reduce: GroupReduce,
    fill: EmptyFill<T>,
) -> Result<T> {
    Ok(match fill {
        EmptyFill::Value(v) => v,
        EmptyFill::Zero => T::default(),
        EmptyFill::Nan => {
            let Some(nan) = T::nan() else {
                return Err(Error::invalid(format!(
                    "{op}: a NaN fill needs a float dtype, got {}",
                    T::DTYPE.name()
                ))
                .with_hint(
                    "use EmptyFill::Value(..) with a value of the element type, or EmptyFill::Zero",
                ));
            };
            nan
        }
        EmptyFill::Identity => match reduce {
            GroupReduce::Sum | GroupReduce::Mean | GroupReduce::First | GroupReduce::Last => {
                T::from_acc(T::acc_zero())
            }
            GroupReduce::Prod => T::from_acc(T::acc_one()),
            GroupReduce::Amax | GroupReduce::LogSumExp => T::max_identity(),
            GroupReduce::Amin => T::min_identity(),
            GroupReduce::Var { .. } | GroupReduce::Std { .. } => {
                // Only floats get here (the dtype check runs first); NaN is their fill.
                T::nan().unwrap_or_default()
            }
        },
    })
}

/// Rejects the dtype/reduction pairs that have no meaning.
pub(crate) fn check_reduce_dtype<T: Element>(op: &str, reduce: GroupReduce) -> Result<()> {
    check_reduce_dtype_of(op, reduce, T::DTYPE)
}

/// [`check_reduce_dtype`] for a dtype known at run time.
pub(crate) fn check_reduce_dtype_of(op: &str, reduce: GroupReduce, dtype: DType) -> Result<()> {
    if reduce.needs_float() && !dtype.is_float() {
        return Err(Error::invalid(format!(
            "{op}: reduce=\"{}\" needs a float dtype, got {}",
            reduce.name(),
            dtype.name()
        ))
        .with_hint("convert src to a float type first, e.g. `src.mapv(|v| v as f32)`"));
    }
    if dtype == DType::Bool && reduce == GroupReduce::Mean {
        return Err(Error::invalid(format!(
            "{op}: reduce=\"mean\" is not implemented for bool (as in PyTorch)"
        ))
        .with_hint("use \"any\"/\"all\", or convert to an integer or float dtype first"));
    }
    Ok(())
}

/// The error of softmax/log_softmax on a dtype that is not a float (the dynamic layer's; the
/// typed functions take float types only).
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn softmax_dtype_error(op: &str, dtype: DType) -> Error {
    Error::invalid(format!("{op}: needs a float dtype, got {}", dtype.name()))
        .with_hint("convert src to a float type first, e.g. `src.mapv(|v| v as f32)`")
}

/// A scatter-style call, checked: the dim, the index seen with `src`'s rank (a 1-D index spread
/// along `dim` with stride 0), the leading index-shaped block of `src`, and the output size.
pub(crate) struct Grouped<'a, T, I> {
    pub(crate) dim: usize,
    pub(crate) src: ArrayView<'a, T, IxDyn>,
    pub(crate) index: ArrayView<'a, I, IxDyn>,
    pub(crate) dim_size: usize,
}

/// `index` (1-D) as an array of `ndim` dims: along `dim`, size 1 on every other axis (the lane
/// driver broadcasts it; nothing is copied).
pub(crate) fn spread<I>(
    index: ArrayView<'_, I, IxDyn>,
    dim: usize,
    ndim: usize,
) -> ArrayView<'_, I, IxDyn> {
    let mut v = index;
    for _ in 0..dim {
        v = v.insert_axis(Axis(0));
    }
    while v.ndim() < ndim {
        let k = v.ndim();
        v = v.insert_axis(Axis(k));
    }
    v
}

/// The checks of every scatter-style group op, in this order: src rank, dim, index rank, index
/// sizes, `dim_size` (or the largest index), index bounds.
pub(crate) fn check_grouped<'a, T, I: IndexElem>(
    op: &str,
    src: ArrayView<'a, T, IxDyn>,
    dim: isize,
    index: ArrayView<'a, I, IxDyn>,
    dim_size: Option<usize>,
) -> Result<Grouped<'a, T, I>> {
    let (d, index, shape, dim_size) = plan_grouped(op, src.shape(), dim, index, dim_size)?;
    let mut src = src;
    src.slice_each_axis_inplace(|ax| Slice::from(0..shape[ax.axis.index()]));
    Ok(Grouped {
        dim: d,
        src,
        index,
        dim_size,
    })
}

/// The shape checks of a group reduction of a `src` of `src_shape` by an index of `index_shape`
/// along `dim`: the normalised dim and the block of src the index covers (a 1-D index is spread
/// over src's other axes).
pub(crate) fn grouped_shapes(
    op: &str,
    src_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
) -> Result<(usize, Vec<usize>)> {
    if src_shape.is_empty() {
        return Err(Error::rank(format!(
            "{op}: src is 0-d; a group reduction needs at least one dim to reduce along"
        ))
        .with_hint("give src an axis first: `src.insert_axis(Axis(0))`"));
    }
    let d = normalize_dim(op, dim, src_shape.len())?;
    let shape = if index_shape.len() == src_shape.len() {
        index_shape.to_vec()
    } else if index_shape.len() == 1 {
        let mut shape = src_shape.to_vec();
        shape[d] = index_shape[0];
        shape
    } else {
        return Err(Error::rank(format!(
            "{op}: index has {} dims {} but src has {} dims {} (dim {d})",
            index_shape.len(),
            fmt_shape(index_shape),
            src_shape.len(),
            fmt_shape(src_shape)
        ))
        .with_hint(format!(
            "give the index src's {} dims, or make it 1-D: one group id per position along dim {d}, shared by every other axis",
            src_shape.len()
        )));
    };
    if let Some(a) = (0..src_shape.len()).find(|&a| shape[a] > src_shape[a]) {
        return Err(Error::shape(format!(
            "{op}: index {} is larger than src {} at dimension {a} ({} > {})",
            fmt_shape(&shape),
            fmt_shape(src_shape),
            shape[a],
            src_shape[a]
        ))
        .with_hint(
            "every source element needs one group id: the index may not be larger than src on any dim (a smaller index reads src's leading block)",
        ));
    }
    Ok((d, shape))
}

/// The checks of [`check_grouped`], which need only src's shape: compiled per index type, not
/// per element type. Returns the dim, the index (spread if 1-D), its shape and `dim_size`.
#[allow(clippy::type_complexity)]
fn plan_grouped<'a, I: IndexElem>(
    op: &str,
    src_shape: &[usize],
    dim: isize,
    index: ArrayView<'a, I, IxDyn>,
    dim_size: Option<usize>,
) -> Result<(usize, ArrayView<'a, I, IxDyn>, Vec<usize>, usize)> {
    let (d, shape) = grouped_shapes(op, src_shape, dim, index.shape())?;
    let given = index.clone();
    let index = if index.ndim() == src_shape.len() {
        index
    } else {
        spread(index, d, src_shape.len())
    };
    let dim_size = match dim_size {
        Some(n) => n,
        None => {
            let mut v = index.view();
            for ax in 0..v.ndim() {
                if v.strides()[ax] == 0 && v.shape()[ax] > 1 {
                    v.collapse_axis(Axis(ax), 0);
                }
            }
            v.iter()
                .map(|i| i.to_i64())
                .max()
                .map_or(0, |m| (m.max(-1) + 1) as usize)
        }
    };
    // Checked as given, so that an error names the position in the caller's index.
    CheckedIndex::new(op, given, d, dim_size, Bounds::Strict)?;
    Ok((d, index, shape, dim_size))
}

/// An array of `shape` filled with `value`, or an error when it does not fit in memory.
pub(crate) fn try_full<T: Clone>(op: &str, shape: &[usize], value: T) -> Result<ArrayD<T>> {
    let n = crate::dims::checked_numel(shape)?;
    let mut v = super::try_vec(op, n)?;
    v.resize(n, value);
    Ok(ArrayD::from_shape_vec(IxDyn(shape), v).expect("length is the shape's product"))
}

/// The leading block of `out` that the index's lanes write (all of `dim`).
pub(crate) fn block_mut<'a, T>(
    out: ArrayViewMut<'a, T, IxDyn>,
    dim: usize,
    block: &[usize],
) -> ArrayViewMut<'a, T, IxDyn> {
    let mut o = out;
    o.slice_each_axis_inplace(|ax| {
        let a = ax.axis.index();
        if a == dim {
            Slice::from(..)
        } else {
            Slice::from(0..block[a])
        }
    });
    o
}

/// Converts a dynamic-rank result to the caller's dimension type (same rank by construction).
pub(crate) fn into_dim<T, D: Dimension>(a: ArrayD<T>) -> Array<T, D> {
    a.into_dimensionality::<D>()
        .expect("the output has the input's rank")
}

/// The create-style driver: checks, fills, then folds with `run`.
fn grouped_call<T, O, I>(
    op: &str,
    src: ArrayView<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    dim_size: Option<usize>,
    fill: impl FnOnce() -> Result<O>,
    run: impl FnOnce(
        usize,
        ArrayView<'_, T, IxDyn>,
        ArrayView<'_, I, IxDyn>,
        ArrayViewMut<'_, O, IxDyn>,
    ),
) -> Result<ArrayD<O>>
where
    O: Clone,
    I: IndexElem,
{
    let full_shape = src.shape().to_vec();
    let g = check_grouped(op, src, dim, index, dim_size)?;
    let fill = fill()?;
    let mut out_shape = full_shape;
    out_shape[g.dim] = g.dim_size;
    let mut out = try_full(op, &out_shape, fill)?;
    let block = g.src.shape().to_vec();
    run(
        g.dim,
        g.src,
        g.index,
        block_mut(out.view_mut(), g.dim, &block),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Public entry points.

/// Reduces the groups of `src` that `index` defines along `dim` (pytorch_scatter's
/// `scatter(src, index, dim, dim_size, reduce)`, with more reductions and a chosen fill).
///
/// `out[.., g, ..]` reduces every `src[.., j, ..]` with `index[.., j, ..] == g`, in index order.
/// The output has `src`'s shape with `dim` replaced by `opts.dim_size` (default: largest index
/// + 1); empty groups hold `opts.fill`. See the [module docs](self) for the shape rules.
///
/// ```
/// use gather::ops::reduce::{scatter_groups, EmptyFill, GroupOptions, GroupReduce};
/// use ndarray::array;
///
/// // pytorch_scatter's README example: scatter max of src into 4 groups along the last dim.
/// let src = array![[2.0f32, 0.0, 1.0, 4.0, 3.0], [0.0, 2.0, 1.0, 3.0, 4.0]];
/// let index = array![[4, 5, 4, 2, 3], [0, 0, 2, 2, 1]];
/// let opts = GroupOptions::default().fill(EmptyFill::Zero);
/// let out = scatter_groups(&src, -1, &index, GroupReduce::Amax, opts)?;
/// assert_eq!(out, array![[0.0, 0.0, 4.0, 3.0, 2.0, 0.0], [2.0, 4.0, 3.0, 0.0, 0.0, 0.0]]);
///
/// // A 1-D index is shared by every lane (graph messages [E, F] → nodes [V, F]).
/// let msgs = array![[1.0f64, 10.0], [2.0, 20.0], [4.0, 40.0]];
/// let dst = array![1, 0, 1];
/// let opts = GroupOptions::default().dim_size(3);
/// let out = scatter_groups(&msgs, 0, &dst, GroupReduce::Mean, opts)?;
/// assert_eq!(out, array![[2.0, 20.0], [2.5, 25.0], [0.0, 0.0]]);
/// let out = scatter_groups(&msgs, 0, &dst, GroupReduce::Std { correction: 0 }, opts)?;
/// assert_eq!(out.row(1), array![1.5, 15.0]);
/// assert!(out[[2, 0]].is_nan()); // empty group: NaN by default for std
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_groups<T, S, D, I, SI, DI>(
    src: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    reduce: GroupReduce,
    opts: GroupOptions<T>,
) -> Result<Array<T, D>>
where
    T: ReduceElement,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let op = "scatter_groups";
    check_reduce_dtype::<T>(op, reduce)?;
    let out = grouped_call(
        op,
        src.view().into_dyn(),
        dim,
        index.view().into_dyn(),
        opts.dim_size,
        || fill_value(op, reduce, opts.fill),
        |d, s, i, o| reduce_groups(reduce, d, s, i, o),
    )?;
    Ok(into_dim(out))
}

/// Whether any element of each group is nonzero (`true` for bool; NaN counts as nonzero).
/// Empty groups hold `opts.fill` (`Identity`: `false`).
///
/// ```
/// use gather::ops::reduce::{scatter_any, GroupOptions};
/// use ndarray::array;
/// let out = scatter_any(&array![0, 3, 0, 0], 0, &array![0, 0, 1, 1], GroupOptions::default().dim_size(3))?;
/// assert_eq!(out, array![true, false, false]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_any<T, S, D, I, SI, DI>(
    src: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    opts: GroupOptions<bool>,
) -> Result<Array<bool, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let truths = truth(&src.view().into_dyn());
    let out = any_all_groups(
        AnyAll::Any,
        truths.view(),
        dim,
        index.view().into_dyn(),
        opts,
    )?;
    Ok(into_dim(out))
}

/// Whether every element of each group is nonzero. Empty groups hold `opts.fill` (`Identity`:
/// `true`).
///
/// ```
/// use gather::ops::reduce::{scatter_all, GroupOptions};
/// use ndarray::array;
/// let out = scatter_all(&array![1.0, 2.0, 0.0, 5.0], 0, &array![0, 0, 1, 1], GroupOptions::default().dim_size(3))?;
/// assert_eq!(out, array![true, false, true]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_all<T, S, D, I, SI, DI>(
    src: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    opts: GroupOptions<bool>,
) -> Result<Array<bool, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let truths = truth(&src.view().into_dyn());
    let out = any_all_groups(
        AnyAll::All,
        truths.view(),
        dim,
        index.view().into_dyn(),
        opts,
    )?;
    Ok(into_dim(out))
}

/// The fill of `any`/`all` (`identity` is their identity).
pub(crate) fn bool_fill(op: &str, fill: EmptyFill<bool>, identity: bool) -> Result<bool> {
    match fill {
        EmptyFill::Identity => Ok(identity),
        EmptyFill::Zero => Ok(false),
        EmptyFill::Value(v) => Ok(v),
        EmptyFill::Nan => Err(Error::invalid(format!(
            "{op}: a NaN fill needs a float dtype, but any/all return bool"
        ))
        .with_hint("use EmptyFill::Value(true|false) or EmptyFill::Identity")),
    }
}

/// The softmax/log_softmax rule that the index (its `block` of src) covers all of `src`.
pub(crate) fn softmax_covers(op: &str, block: &[usize], full: &[usize], dim: usize) -> Result<()> {
    if block == full {
        return Ok(());
    }
    Err(Error::shape(format!(
        "{op}: index {} must cover src {} (every element is normalised within its group)",
        fmt_shape(block),
        fmt_shape(full)
    ))
    .with_hint(format!(
        "give the index src's shape, or a 1-D index of length {} (one group id per position along dim {dim})",
        full[dim]
    )))
}

/// The softmax/log_softmax checks and driver: the index must cover all of `src`.
fn softmax_call<T: GradFloat, I: IndexElem>(
    op: &str,
    log: bool,
    src: ArrayView<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
) -> Result<ArrayD<T>> {
    let full = src.shape().to_vec();
    let g = check_grouped(op, src, dim, index, None)?;
    softmax_covers(op, g.src.shape(), &full, g.dim)?;
    let mut out = try_full(op, &full, T::default())?;
    softmax_groups(log, g.dim, g.dim_size, g.src, g.index, out.view_mut());
    Ok(out)
}

/// Softmax of every element of `src` within its group (pytorch_scatter's `scatter_softmax`):
/// `out[j] = exp(src[j]) / Σ_{k in j's group} exp(src[k])`, numerically stable.
///
/// Two passes over `src` and no intermediate arrays: the first keeps, per group, a running
/// maximum and a rescaled sum of exponentials; the second writes the output. The index has
/// `src`'s shape, or is 1-D along `dim`. Floats only (`f16`/`bf16` computed in `f32`). A group
/// containing NaN or `+inf` gives NaN, as PyTorch's softmax does.
///
/// ```
/// use gather::ops::reduce::scatter_softmax;
/// use ndarray::array;
/// let src = array![1.0f64, 1.0, 2.0, 1000.0];
/// let out = scatter_softmax(&src, 0, &array![0, 0, 1, 1])?;
/// assert_eq!(out.slice(ndarray::s![..2]), array![0.5, 0.5]);
/// assert_eq!(out[3], 1.0); // no overflow: exp is taken relative to the group's maximum
/// # Ok::<(), gather::Error>(())
/// ```
///
/// Integer and bool arrays have no softmax: the call does not compile.
///
/// ```compile_fail
/// let _ = gather::scatter_softmax(&ndarray::array![1i32, 2], 0, &ndarray::array![0, 0]);
/// ```
pub fn scatter_softmax<T, S, D, I, SI, DI>(
    src: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let out = softmax_call(
        "scatter_softmax",
        false,
        src.view().into_dyn(),
        dim,
        index.view().into_dyn(),
    )?;
    Ok(into_dim(out))
}

/// Log-softmax of every element of `src` within its group: `src[j] - logsumexp(group of j)`, in
/// two passes (see [`scatter_softmax`]).
///
/// ```
/// use gather::ops::reduce::scatter_log_softmax;
/// use ndarray::array;
/// let out = scatter_log_softmax(&array![0.0f32, 0.0, 5.0], 0, &array![0, 0, 1])?;
/// assert_eq!(out, array![-std::f32::consts::LN_2, -std::f32::consts::LN_2, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_log_softmax<T, S, D, I, SI, DI>(
    src: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: GradFloat,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let out = softmax_call(
        "scatter_log_softmax",
        true,
        src.view().into_dyn(),
        dim,
        index.view().into_dyn(),
    )?;
    Ok(into_dim(out))
}

/// An arg-reduction over the sources alone (no `self`), in index order: the running value and
/// the position along `dim` of the source that set it (`UNTOUCHED` before the first source).
/// A NaN source was seen exactly when the value is NaN: a NaN is never replaced by a number.
#[derive(Clone, Copy)]
struct ArgState<A> {
    v: A,
    arg: usize,
}

const UNTOUCHED: usize = usize::MAX;

/// The fold of [`arg_fold`]: `amax` (`max`) or `amin`. The first source of a group takes it; a
/// later one takes the position when it is the first NaN, or when it changes a value that is not
/// NaN (so among equal values the first wins).
struct ArgF {
    max: bool,
}

impl<T: Element> Fold<T> for ArgF {
    type State = ArgState<T::Acc>;
    type Out = ArgState<T::Acc>;
    fn init(&self) -> Self::State {
        let identity = if self.max {
            T::max_identity()
        } else {
            T::min_identity()
        };
        ArgState {
            v: identity.to_acc(),
            arg: UNTOUCHED,
        }
    }
    #[inline(always)]
    fn push(&self, st: &mut Self::State, x: T, j: usize) {
        let nv = if self.max {
            T::acc_max(st.v, x.to_acc())
        } else {
            T::acc_min(st.v, x.to_acc())
        };
        let was_nan = T::from_acc(st.v).is_nan();
        if st.arg == UNTOUCHED || (x.is_nan() && !was_nan) || (!was_nan && nv != st.v) {
            st.arg = j;
        }
        st.v = nv;
    }
    fn finish(&self, s: Self::State, _n: usize) -> Self::State {
        s
    }
}

/// The arg-reduction over every group of every lane: `out` holds `self` (or the fill) and is
/// updated where a source arrives; `arg` (all `NO_ARG` on entry) gets the winning position
/// along `dim`, plus `shift`.
///
/// The sources are folded alone (by the group walks of [`fold_groups`]), then each group meets
/// its `self`, which comes before every source: a NaN source wins over it (the first NaN's
/// position), a NaN `self` over every other source, and otherwise the sources' value only if it
/// differs from `self`'s (so `self` wins ties). This is the sequential rule with `self` first,
/// since a running max or min changes value (and position) only where it changes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn arg_fold<T: ReduceElement, I: IndexElem>(
    reduce: ArgReduce,
    include_self: bool,
    dim: usize,
    mut out: ArrayViewMut<'_, T, IxDyn>,
    mut arg: ArrayViewMut<'_, i64, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    shift: i64,
) {
    // A constant `if`: the carried types' own folds are not compiled.
    if T::CARRY_ARITH {
        return T::carried_arg(reduce, include_self, dim, out, arg, index, src, shift);
    }
    let fold = ArgF {
        max: reduce == ArgReduce::Amax,
    };
    let mut states = ArrayD::from_elem(out.raw_dim(), <ArgF as Fold<T>>::init(&fold));
    fold_groups(&fold, dim, src, index, states.view_mut());
    let max = fold.max;
    crate::kernels::zip::zip3(&mut out, &mut arg, &states.view(), |o, a, st| {
        if st.arg == UNTOUCHED {
            return;
        }
        if include_self && !T::from_acc(st.v).is_nan() {
            let sv = o.to_acc();
            let nv = if max {
                T::acc_max(sv, st.v)
            } else {
                T::acc_min(sv, st.v)
            };
            if o.is_nan() || nv == sv {
                // What the sequential fold leaves: `self` through the accumulator.
                *o = T::from_acc(sv);
                return;
            }
        }
        *o = T::from_acc(st.v);
        *a = st.arg as i64 + shift;
    });
}

/// `self.scatter_reduce_(dim, index, src, "amax"|"amin", include_self)` that also returns, for
/// each element of `self`, the position along `dim` (in `src`/`index`) of the source that won.
///
/// The values are bitwise those of [`scatter_reduce_inplace`](crate::scatter_reduce_inplace).
/// The arg array has `self`'s shape and holds:
///
/// - `j`, the position along `dim` of the winning source in its lane: among equal values the
///   **first** in index order wins; a NaN result points to the **first** NaN source;
/// - [`NO_ARG`] (`-1`) where no source won: no index refers to the element (it keeps `self`), or
///   `include_self` is true and `self`'s value was kept. `self` comes before every source, so it
///   also wins ties, and a NaN in `self` wins until a NaN source arrives (PyTorch's NaN rule).
///
/// The gradient routed through the arg (one winner per group, as pytorch_scatter's
/// `scatter_max`) is [`grad::scatter_reduce_arg`](crate::grad::scatter_reduce_arg). Every check
/// runs before the first write.
///
/// ```
/// use gather::ops::reduce::{scatter_reduce_arg_inplace, ArgReduce};
/// use ndarray::array;
/// let mut x = array![10.0f32, 20.0, 30.0, 40.0];
/// let idx = array![0, 0, 1, 1, 1];
/// let src = array![1.0, 2.0, 25.0, 50.0, 50.0];
/// let arg = scatter_reduce_arg_inplace(&mut x, 0, &idx, &src, ArgReduce::Amax, true)?;
/// assert_eq!(x, array![10.0, 50.0, 30.0, 40.0]);
/// assert_eq!(arg, array![-1, 3, -1, -1]); // self won [0]; the first 50 won [1]
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_reduce_arg_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: ArgReduce,
    include_self: bool,
) -> Result<Array<i64, D>>
where
    T: ReduceElement,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let op = "scatter_reduce";
    let mut arg = Array::from_elem(dst.raw_dim(), NO_ARG);
    let Some(d) = super::scatter::check_scatter_shapes(
        op,
        dst.shape(),
        dim,
        index.shape(),
        Some(src.shape()),
    )?
    else {
        return Ok(arg);
    };
    let index = super::view_1d_if_scalar(index);
    let src = super::view_1d_if_scalar(src);
    let mut dstv = dst.view_mut().into_dyn();
    if dstv.ndim() == 0 {
        dstv = dstv.insert_axis(Axis(0));
    }
    let checked = CheckedIndex::new(op, index, d, dstv.shape()[d], Bounds::Strict)?;
    let index = checked.view().clone();
    let block = index.shape().to_vec();
    let mut src = src;
    src.slice_each_axis_inplace(|ax| Slice::from(0..block[ax.axis.index()]));
    let mut argv = arg.view_mut().into_dyn();
    if argv.ndim() == 0 {
        argv = argv.insert_axis(Axis(0));
    }
    arg_fold(
        reduce,
        include_self,
        d,
        block_mut(dstv, d, &block),
        block_mut(argv, d, &block),
        index,
        src,
        0,
    );
    Ok(arg)
}

/// Out-of-place [`scatter_reduce_arg_inplace`]: returns `(values, arg)`.
///
/// ```
/// use gather::ops::reduce::{scatter_reduce_arg, ArgReduce};
/// use ndarray::array;
/// // Node features [V=3] ← edge messages, include_self = false (pytorch_scatter's scatter_max).
/// let x = array![0i32, 0, 0];
/// let (out, arg) = scatter_reduce_arg(&x, 0, &array![2, 0, 2, 2], &array![4, 7, 9, 9], ArgReduce::Amax, false)?;
/// assert_eq!(out, array![7, 0, 9]);
/// assert_eq!(arg, array![1, -1, 2]); // node 1 got nothing; node 2: the first 9 (position 2)
/// # Ok::<(), gather::Error>(())
/// ```
pub fn scatter_reduce_arg<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
    reduce: ArgReduce,
    include_self: bool,
) -> Result<(Array<T, D>, Array<i64, D>)>
where
    T: ReduceElement,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = super::try_to_owned("scatter_reduce", input)?;
    let arg = scatter_reduce_arg_inplace(&mut out, dim, index, src, reduce, include_self)?;
    Ok((out, arg))
}

/// The group reductions as methods: `use gather::prelude::*;`.
///
/// ```
/// use gather::prelude::*;
/// use gather::ops::reduce::{GroupOptions, GroupReduce};
/// use ndarray::array;
/// let src = array![1.0f64, 2.0, 3.0];
/// let lse = src.scatter_groups(0, &array![0, 0, 1], GroupReduce::LogSumExp, GroupOptions::default())?;
/// assert!((lse[0] - (1f64.exp() + 2f64.exp()).ln()).abs() < 1e-12);
/// let (m, arg) = array![0.0f64].scatter_reduce_arg(0, &array![0, 0, 0], &src, ArgReduce::Amax, false)?;
/// assert_eq!((m[0], arg[0]), (3.0, 2));
/// # Ok::<(), gather::Error>(())
/// ```
pub trait ReduceExt<T: ReduceElement, D: Dimension> {
    /// See [`scatter_groups()`].
    fn scatter_groups<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        reduce: GroupReduce,
        opts: GroupOptions<T>,
    ) -> Result<Array<T, D>>;
    /// See [`scatter_softmax()`].
    fn scatter_softmax<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat;
    /// See [`scatter_log_softmax()`].
    fn scatter_log_softmax<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat;
    /// See [`scatter_any()`].
    fn scatter_any<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        opts: GroupOptions<bool>,
    ) -> Result<Array<bool, D>>;
    /// See [`scatter_all()`].
    fn scatter_all<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        opts: GroupOptions<bool>,
    ) -> Result<Array<bool, D>>;
    /// See [`scatter_reduce_arg()`].
    fn scatter_reduce_arg<
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
        reduce: ArgReduce,
        include_self: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)>;
}

impl<T: ReduceElement, S: Data<Elem = T>, D: Dimension> ReduceExt<T, D> for ArrayBase<S, D> {
    fn scatter_groups<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        reduce: GroupReduce,
        opts: GroupOptions<T>,
    ) -> Result<Array<T, D>> {
        scatter_groups(self, dim, index, reduce, opts)
    }
    fn scatter_softmax<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat,
    {
        scatter_softmax(self, dim, index)
    }
    fn scatter_log_softmax<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
    ) -> Result<Array<T, D>>
    where
        T: GradFloat,
    {
        scatter_log_softmax(self, dim, index)
    }
    fn scatter_any<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        opts: GroupOptions<bool>,
    ) -> Result<Array<bool, D>> {
        scatter_any(self, dim, index, opts)
    }
    fn scatter_all<I: IndexElem, SI: Data<Elem = I>, DI: Dimension>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        opts: GroupOptions<bool>,
    ) -> Result<Array<bool, D>> {
        scatter_all(self, dim, index, opts)
    }
    fn scatter_reduce_arg<
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
        reduce: ArgReduce,
        include_self: bool,
    ) -> Result<(Array<T, D>, Array<i64, D>)> {
        scatter_reduce_arg(self, dim, index, src, reduce, include_self)
    }
}
