//! Gradients: one vector-Jacobian product (VJP) per op and differentiable input.
//!
//! Every function here takes the gradient of the op's output (`grad_out`, the "upstream"
//! gradient) plus what the forward call saw, and returns the gradient of each differentiable
//! input, with that input's shape. Index and mask arguments are not differentiable. The formulas
//! are PyTorch's (`derivatives.yaml`), written with the forward ops of this crate:
//!
//! ```text
//! op                            d input                              d src / source
//! gather(x, d, i)               zeros(x).scatter_add(d, i, g)        -
//! scatter(x, d, i, s)           g.scatter(d, i, 0)                   g.gather(d, i)
//! scatter_add(x, d, i, s)       g                                    g.gather(d, i)
//! scatter_reduce sum            g   (0 where written, !include_self) g.gather(d, i)
//!                mean           g / N                                (g / N).gather(d, i)
//!                amax/amin      g / T where x is the result          g / T where s is the result
//!                prod           g * (product of the others)          g * (product of the others)
//! index_select(x, d, i)         zeros(x).index_add(d, i, g)          -
//! index_add(x, d, i, s, a)      g                                    a * g.index_select(d, i)
//! index_copy(x, d, i, s)        g.index_fill(d, i, 0)                g.index_select(d, i)
//! index_fill(x, d, i, v)        g.index_fill(d, i, 0)                (v: sum of g over the slices)
//! index_reduce                  as scatter_reduce, slice by slice
//! select_batched(x, a, i, b)    gather's, index seen with stride 0   -
//! broadcasting gather(x, d, i)  gather's on x expanded, summed       -
//! broadcasting scatter*         as scatter*, index expanded          as scatter*, summed
//! take(x, i)                    zeros(x).put(i, g, accumulate)       -
//! take_along_dim(x, i, d)       gather's, summed over broadcast axes -
//! put(x, i, s, acc)             acc ? g : g.put(i, 0)                g.take(i)
//! masked_select(x, m)           zeros.masked_scatter(m, g), summed   -
//! masked_scatter(x, m, s)       g.masked_fill(m, 0), summed          g.masked_select(m), 0-padded
//! sort / topk → (values, idx)   zeros(x).scatter(d, idx, g_values)   -
//! repeat_interleave(x, r, d)    sum of g over each slice's copies    -
//! scatter_groups / segment ops  -                                    per group, see below
//! scatter_reduce_arg(x, d, i, s) g where arg = -1                     g at the arg (one winner)
//! ```
//!
//! "Summed" means summed over the axes along which the input was broadcast.
//!
//! The gradients of the ops under [`Options`](crate::Options) (a bounds policy, broadcasting)
//! are the methods of [`GradOptions`], made by [`Options::grad`](crate::Options::grad): the
//! gradient goes where the forward under the same options read or wrote.
//!
//! ```text
//! forward  gather(x=[a, b, c], 0, index=[-1, 1, 5]) under policy
//! backward d x for g = [g0, g1, g2]
//!
//!  Wrap     error (5)
//!  Clip     [g0, g1, g2]      -1 read x[0], 5 read x[2]
//!  Fill(v)  [0,  g1, 0 ]      filled positions read no element: their gradient goes nowhere
//!
//! scatter_add under Drop: a dropped source wrote nothing, so its gradient is 0.
//! ```
//!
//! The group reductions of [`ops::reduce`](crate::ops::reduce) and
//! [`ops::segment`](crate::ops::segment) ([`scatter_groups`], [`segment_reduce`],
//! [`scatter_softmax`], [`segment_log_softmax`] ...): each source element `x` of group `G` gets
//! `g[G]` (sum), `g[G] / n` (mean), `g[G] / t` where `x` ties the result (amax/amin),
//! `g[G] * exp(x - out[G])` (logsumexp), `g[G] * 2 (x - mean) / (n - c)` (var),
//! `g[G] * (x - mean) / ((n - c) * out[G])` (std), `g[G] * (product of the others)` (prod), `g[G]`
//! at the first/last element (first/last); softmax `y (g - Σ_G g y)`, log_softmax
//! `g - exp(y) Σ_G g`.
//!
//! For `mean`, `N` counts the contributors of each output element (self included when
//! `include_self`). For `amax`/`amin`, `T` counts the contributors equal to the result: ties split
//! the gradient evenly. For `prod`, "the product of the others" is `result / value` for a nonzero
//! value; a group with exactly one zero gives that zero the exact product of the others, and with
//! two or more zeros every contributor gets zero. Positions of the input that no index refers to
//! pass the gradient through unchanged.
//!
//! ```
//! use gather::{grad, Reduce};
//! use ndarray::array;
//!
//! // out[0] = max(self[0], src[0], src[1], src[2]) = max(5, 5, 5, 1): three-way tie.
//! let x = array![5.0f64, 1.0];
//! let (idx, src) = (array![0, 0, 0], array![5.0f64, 5.0, 1.0]);
//! let out = gather::scatter_reduce(&x, 0, &idx, &src, Reduce::Amax, true)?;
//! let g = grad::scatter_reduce(&array![12.0, 1.0], &x, 0, &idx, &src, Reduce::Amax, true, &out)?;
//! assert_eq!(g.input, array![4.0, 1.0]);
//! assert_eq!(g.src, array![4.0, 4.0, 0.0]);
//! # Ok::<(), gather::Error>(())
//! ```
//!
//! ## Where this module does better than PyTorch
//!
//! - **`include_self = false` ties in `amax`/`amin`** (scatter_reduce and index_reduce). PyTorch
//!   counts an excluded `self` that happens to equal the result as one of the tied contributors,
//!   then zeroes its share: the src gradient is too small (`self = [3, 5]`, `src = [3, 1]`,
//!   `index = [0, 0]`, amax → PyTorch gives `src.grad = [0.5, 0]`). Here only the real contributors
//!   share it (`[1, 0]`). [`Parity::PyTorch`] reproduces PyTorch's numbers where bit parity
//!   matters.
//! - **src larger than the index.** The forward ops read only the leading index-shaped block of
//!   `src`; PyTorch's backward then fails ("returned an invalid gradient"). Here the src gradient
//!   has src's shape, zero outside the block that was read.
//! - **The `max`/`min` aliases** of `amax`/`amin`: PyTorch's backward rejects them; [`Reduce`]
//!   parses them as `Amax`/`Amin`, so they have a gradient like any other name.
//! - **The legacy `scatter(..., reduce="add"|"multiply")`** has no derivative in PyTorch; here
//!   [`scatter_legacy`] and [`scatter_value_legacy`] give it (the gradients of `scatter_add` and of
//!   `scatter_reduce(prod, include_self=true)`).
//! - **Non-finite inputs at positions no index refers to.** PyTorch computes `g * x / x` (prod)
//!   and `g / (x == result)` (amax/amin) there too, which gives NaN for an infinite or NaN `x`; here
//!   the gradient passes through, as the output element is `x` itself.
//!
//! ## Element types
//!
//! The four float types. `f16` and `bf16` gradients are computed in `f32` (every sum, division
//! and product) and rounded once at the end; `f32` and `f64` in their own type.
//!
//! [`Reduce`]: crate::Reduce

use half::{bf16, f16};
use ndarray::{Array, ArrayBase, ArrayD, ArrayView, Axis, Data, Dimension, IxDyn, Slice};

use crate::dims::{checked_numel, normalize_dim};
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, check_bounds};
use crate::ops::{check_index_fits, check_index_rank, try_vec};

mod bounds;
#[cfg(feature = "backend")]
pub(crate) use bounds::no_broadcast_parity;
mod broadcast;
mod gather;
mod index;
pub(crate) mod masked;
mod nd;
pub(crate) mod output;
pub(crate) mod put;
mod reduce;
mod repeat;
mod scatter;
mod select;
mod sort;
mod take;

pub use bounds::GradOptions;
pub use gather::gather;
pub use index::{
    index_add, index_copy, index_fill, index_fill_value, index_reduce, index_reduce_with,
    index_select,
};
pub use masked::{masked_scatter, masked_select};
pub use nd::{gather_nd, scatter_nd};
pub use put::put;
pub use reduce::{
    bincount_weighted_axis, scatter_groups, scatter_log_softmax, scatter_reduce_arg,
    scatter_softmax, segment_arg_reduce, segment_log_softmax, segment_reduce, segment_softmax,
};
pub use repeat::{repeat_interleave, repeat_interleave_scalar};
pub use scatter::{
    ScatterGrad, scatter, scatter_add, scatter_legacy, scatter_reduce, scatter_reduce_with,
    scatter_value, scatter_value_legacy,
};
pub use select::select_batched;
pub use sort::{sort, topk};
pub use take::{take, take_along_dim};

/// The gradients of an op with an `input` (`self`) and a `source`, each of its input's shape
/// (`index_add`, `index_copy`, `index_reduce`, `masked_scatter`, `put`).
///
/// ```
/// use ndarray::array;
/// let g = gather::grad::index_add(&array![[1.0f32, 2.0], [3.0, 4.0]], 0, &array![1, 1], (2, 2), 2.0)?;
/// assert_eq!(g.input, array![[1.0, 2.0], [3.0, 4.0]]);
/// assert_eq!(g.source, array![[6.0, 8.0], [6.0, 8.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SourceGrad<T, D: Dimension, DS: Dimension> {
    /// The gradient of `input` (`self`), of its shape.
    pub input: Array<T, D>,
    /// The gradient of `source`, of its shape.
    pub source: Array<T, DS>,
}

/// A float type that has gradients: `f32`, `f64`, `f16`, `bf16`.
///
/// `Wide` is the type the gradient arithmetic runs in: `f32` for `f16`, `bf16` and `f32`; `f64`
/// for `f64`.
///
/// ```
/// use gather::grad::GradFloat;
/// use half::f16;
/// let w: f32 = f16::from_f32(1.5).widen();
/// assert_eq!(w, 1.5);
/// assert_eq!(f16::narrow(w), f16::from_f32(1.5));
/// ```
pub trait GradFloat: Element {
    /// The type gradients are computed in.
    type Wide: GradFloat<Wide = Self::Wide> + num_traits::Float;
    /// Widens exactly to [`GradFloat::Wide`].
    fn widen(self) -> Self::Wide;
    /// Rounds from [`GradFloat::Wide`] to nearest.
    fn narrow(w: Self::Wide) -> Self;
}

impl GradFloat for f32 {
    type Wide = f32;
    fn widen(self) -> f32 {
        self
    }
    fn narrow(w: f32) -> f32 {
        w
    }
}

impl GradFloat for f64 {
    type Wide = f64;
    fn widen(self) -> f64 {
        self
    }
    fn narrow(w: f64) -> f64 {
        w
    }
}

impl GradFloat for f16 {
    type Wide = f32;
    #[inline(always)]
    fn widen(self) -> f32 {
        crate::element::f16_to_f32(self)
    }
    #[inline(always)]
    fn narrow(w: f32) -> f16 {
        crate::element::f32_to_f16(w)
    }
}

impl GradFloat for bf16 {
    type Wide = f32;
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(w: f32) -> bf16 {
        bf16::from_f32(w)
    }
}

/// Which gradient to give where PyTorch's is wrong.
///
/// The only difference today is the `include_self = false` tie rule of `amax`/`amin` (and
/// non-finite inputs at unreferenced positions); see the [module docs](self).
///
/// ```
/// use gather::{grad::{self, Parity}, Reduce};
/// use ndarray::array;
/// let (x, idx, src) = (array![3.0f64, 5.0], array![0, 0], array![3.0f64, 1.0]);
/// let out = gather::scatter_reduce(&x, 0, &idx, &src, Reduce::Amax, false)?;
/// let g = array![1.0, 1.0];
/// let ours = grad::scatter_reduce(&g, &x, 0, &idx, &src, Reduce::Amax, false, &out)?;
/// assert_eq!(ours.src, array![1.0, 0.0]);
/// let torch = grad::scatter_reduce_with(&g, &x, 0, &idx, &src, Reduce::Amax, false, &out, Parity::PyTorch)?;
/// assert_eq!(torch.src, array![0.5, 0.0]);
/// # Ok::<(), gather::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Parity {
    /// The mathematically correct gradient (the default).
    #[default]
    Correct,
    /// PyTorch 2.15's numbers, bugs included, for bit parity with PyTorch-trained references.
    PyTorch,
}

/// `shape` with a 0-d shape seen as `[1]` (the gather family's convention).
pub(crate) fn nonempty(shape: &[usize]) -> Vec<usize> {
    if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    }
}

/// A dynamic-rank view with a 0-d array seen as 1-d of one element.
pub(crate) fn view_nonempty<S: Data, D: Dimension>(
    a: &ArrayBase<S, D>,
) -> ArrayView<'_, S::Elem, IxDyn> {
    crate::ops::view_1d_if_scalar(a)
}

/// The error for a gradient (or saved tensor) of the wrong shape.
pub(crate) fn check_shape(
    op: &str,
    what: &str,
    got: &[usize],
    want_what: &str,
    want: &[usize],
) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(Error::shape(format!(
        "{op}: {what} has shape {} but {want_what} has shape {}",
        fmt_shape(got),
        fmt_shape(want)
    ))
    .with_hint(format!(
        "{what} must have exactly the shape of {want_what}; pass the tensors of the same forward call"
    )))
}

/// The checks `gather` makes of its index, against an input of `input_shape`; `None` for an
/// empty index (which skips every check but `dim`'s).
pub(crate) fn check_gather_index<I: IndexElem>(
    op: &str,
    input_shape: &[usize],
    dim: isize,
    index: &ArrayView<'_, I, IxDyn>,
) -> Result<Option<usize>> {
    let d = normalize_dim(op, dim, input_shape.len())?;
    if index.is_empty() {
        return Ok(None);
    }
    check_index_rank(op, "input", input_shape, index.shape(), d)?;
    let xs = nonempty(input_shape);
    let idx = if index.ndim() == 0 {
        index.view().insert_axis(Axis(0))
    } else {
        index.view()
    };
    check_index_fits(op, &xs, idx.shape(), None, d)?;
    check_bounds(op, &idx, d, xs[d], Bounds::Strict)?;
    Ok(Some(d))
}

/// The error for a gradient asked of a non-float `dtype`.
#[cfg(any(feature = "dynamic", feature = "backend"))]
pub(crate) fn not_float(op: &str, dtype: crate::DType) -> Error {
    Error::invalid(format!(
        "{op}: gradients need a floating-point input, but got {dtype}"
    ))
    .with_hint("only float16, bfloat16, float32 and float64 arrays have gradients; convert the input first")
}

/// An array of zeros, or an error (not an abort) when it does not fit in memory.
pub(crate) fn try_zeros<T: Element, D: Dimension>(op: &str, shape: D) -> Result<Array<T, D>> {
    let n = checked_numel(shape.slice())?;
    let mut v = try_vec(op, n)?;
    v.resize(n, T::default());
    Ok(Array::from_shape_vec(shape, v).expect("length is the shape's product"))
}

/// `a` widened to the gradient arithmetic type, as a dynamic-rank array (0-d seen as 1-d).
pub(crate) fn widen<T: GradFloat, S: Data<Elem = T>, D: Dimension>(
    a: &ArrayBase<S, D>,
) -> ArrayD<T::Wide> {
    crate::kernels::zip::map(&view_nonempty(a), |v| v.widen())
}

/// Rounds `a` (in logical order) into an array of `shape`, which has `a`'s number of elements.
pub(crate) fn narrow_to<T: GradFloat, D: Dimension>(a: &ArrayD<T::Wide>, shape: D) -> Array<T, D> {
    let v = crate::kernels::zip::map(&a.view(), |&w| T::narrow(w))
        .into_raw_vec_and_offset()
        .0;
    Array::from_shape_vec(shape, v).expect("same number of elements")
}

/// Places `block` at the leading corner of a zero array of `shape` (both seen with the 0-d → 1-d
/// convention; `block` is no larger than `shape` on any axis). This is the gradient of reading
/// only the leading block of a larger array.
pub(crate) fn embed_leading<T: Element, D: Dimension>(
    op: &str,
    block: ArrayView<'_, T, IxDyn>,
    shape: D,
) -> Result<Array<T, D>> {
    if block.shape() == shape.slice() {
        let v: Vec<T> = block.iter().copied().collect();
        return Ok(Array::from_shape_vec(shape, v).expect("same shape"));
    }
    let mut out = try_zeros::<T, D>(op, shape)?;
    if block.is_empty() {
        return Ok(out);
    }
    let block = if block.ndim() == 0 {
        block.insert_axis(Axis(0))
    } else {
        block
    };
    {
        let mut o = out.view_mut().into_dyn();
        if o.ndim() == 0 {
            o = o.insert_axis(Axis(0));
        }
        let mut o = o.slice_each_axis_mut(|ax| Slice::from(0..block.shape()[ax.axis.index()]));
        crate::kernels::copy::assign(&mut o, &block.view().into_dyn());
    }
    Ok(out)
}

/// `a` summed down to `shape` over the axes it was broadcast along (NumPy broadcasting: extra
/// leading axes, and axes where `shape` has 1), in the wide type.
pub(crate) fn sum_to<W: GradFloat<Wide = W> + num_traits::Float>(
    a: ArrayD<W>,
    shape: &[usize],
) -> ArrayD<W> {
    let mut a = a;
    while a.ndim() > shape.len() {
        a = a.sum_axis(Axis(0));
    }
    for (ax, &n) in shape.iter().enumerate() {
        if n == 1 && a.shape()[ax] != 1 {
            a = a.sum_axis(Axis(ax)).insert_axis(Axis(ax));
        }
    }
    a
}

/// Runs `f` with a 0-d or 1-d index seen as an array of `shape` (the index along `dim`, broadcast
/// with stride 0 over every other axis; no copy). `shape[dim]` is the index's length.
pub(crate) fn with_spread_index<I, R>(
    index: ArrayView<'_, I, IxDyn>,
    dim: usize,
    shape: &[usize],
    f: impl FnOnce(ArrayView<'_, I, IxDyn>) -> R,
) -> Option<R> {
    let mut v = index;
    if v.ndim() == 0 {
        v = v.insert_axis(Axis(0));
    }
    for _ in 0..dim {
        v = v.insert_axis(Axis(0));
    }
    while v.ndim() < shape.len() {
        let k = v.ndim();
        v = v.insert_axis(Axis(k));
    }
    v.broadcast(shape).map(f)
}

/// Reshapes `a` (row-major) into `shape`, which must have as many elements.
pub(crate) fn reshape_to<T: Clone, D: Dimension>(
    op: &str,
    a: ArrayD<T>,
    shape: D,
) -> Result<Array<T, D>> {
    let n = a.len();
    let want = shape.size();
    if n != want {
        return Err(Error::shape(format!(
            "{op}: expected a shape of {n} elements, got {} ({want} elements)",
            fmt_shape(shape.slice())
        ))
        .with_hint("pass the shape of the tensor the forward call took"));
    }
    // A row-major array takes the shape as it is; only another layout is copied.
    let a = if a.is_standard_layout() {
        a
    } else {
        a.as_standard_layout().into_owned()
    };
    Ok(a.into_shape_with_order(shape)
        .expect("a row-major array of the same number of elements"))
}

/// The leading index-shaped block of `src` (both seen with the 0-d → 1-d convention).
pub(crate) fn leading_block<'a, T>(
    src: ArrayView<'a, T, IxDyn>,
    index_shape: &[usize],
) -> ArrayView<'a, T, IxDyn> {
    let mut v = src;
    v.slice_each_axis_inplace(|ax| Slice::from(0..index_shape[ax.axis.index()]));
    v
}
