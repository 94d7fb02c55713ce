//! # gather
//!
//! PyTorch's gather/scatter family of tensor indexing ops for [`ndarray`]: the same results as
//! PyTorch (checked by a conformance suite), errors that teach instead of panics, and parallel,
//! deterministic kernels.
//!
//! ## A training step: `gather` forward, [`grad::gather`] backward
//!
//! Each row of a score table `w` picks the score of its label; the loss pulls the picked scores
//! toward targets. The backward pass of `gather` is [`grad::gather`] (a `scatter_add` of the
//! upstream gradient into zeros of `w`'s shape), so the scores that were not picked get no update:
//!
//! ```
//! use gather::prelude::*;
//! use ndarray::array;
//!
//! let mut w = array![[0.5f64, 2.0, -1.0], [1.0, 0.0, 3.0]];   // [B, V] scores
//! let labels = array![[1i64], [0]];                          // [B, 1]: one label per row
//! let target = array![[1.0], [2.0]];
//! let lr = 0.5;
//!
//! let loss = |w: &ndarray::Array2<f64>| -> gather::Result<f64> {
//!     let picked = w.gather(1, &labels)?;                     // [[2.0], [1.0]] at first
//!     Ok(0.5 * (&picked - &target).mapv(|r| r * r).sum())
//! };
//! assert_eq!(loss(&w)?, 1.0);
//!
//! // Forward, then backward: d loss / d picked = picked - target, then through gather.
//! let picked = w.gather(1, &labels)?;
//! let d_picked = &picked - &target;                          // [[1.0], [-1.0]]
//! let d_w = gather::grad::gather(&d_picked, w.raw_dim(), 1, &labels)?;
//! assert_eq!(d_w, array![[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]);
//!
//! // The step: only the picked scores move, and the loss drops from 1.0 to 0.25.
//! w.scaled_add(-lr, &d_w);
//! assert_eq!(w, array![[0.5, 1.5, -1.0], [1.5, 0.0, 3.0]]);
//! assert_eq!(loss(&w)?, 0.25);
//! # Ok::<(), gather::Error>(())
//! ```
//!
//! Every differentiable op of the family has its vector-Jacobian product in [`grad`], with
//! PyTorch's formulas, and the correct gradient where PyTorch's is wrong or missing.
//!
//! ## The mental model
//!
//! `gather` reads, `scatter` writes. Both walk the **index**: for every position `p` of the index,
//! the op replaces the coordinate along `dim` by the index value found at `p`.
//!
//! ```text
//!   gather(input, dim=1, index)                scatter(self, dim=1, index, src)
//!   out[i][j] = input[i][ index[i][j] ]        self[i][ index[i][j] ] = src[i][j]
//!
//!   input            index      out           src       index      self (zeros before)
//!   10 20 30    ←    0 2   →   10 30          1 2   →   0 2   →    1 0 2
//!   40 50 60    ←    1 0   →   50 40          3 4   →   1 0   →    4 3 0
//! ```
//!
//! - The index has the same number of dims as the input; the output has the index's shape.
//! - Along every other dim the index may be smaller than the input (it reads a leading block).
//! - The usual "one label per row" index needs a size-1 axis at `dim`:
//!   `labels.insert_axis(Axis(1))`; an index that picks whole rows of features is broadcast (no
//!   copy) with `.broadcast(...)`. Errors print exactly this fix when the rank is wrong.
//!
//! ```
//! use gather::prelude::*;
//! use ndarray::{array, Axis};
//!
//! let x = array![[10, 20, 30], [40, 50, 60]];
//! assert_eq!(x.gather(1, &array![[0, 2], [1, 0]])?, array![[10, 30], [50, 40]]);
//!
//! // The logit of each target token: logits [B, V], labels [B].
//! let logits = array![[0.1f32, 2.0, 0.3], [1.5, 0.2, 0.1]];
//! let labels = array![1i64, 0];
//! let picked = logits.gather(1, &labels.view().insert_axis(Axis(1)))?;
//! assert_eq!(picked, array![[2.0], [1.5]]);
//!
//! // Forgetting the axis is an error that says how to fix it.
//! let err = logits.gather(1, &labels).unwrap_err();
//! assert!(err.to_string().contains("insert_axis(Axis(1))"));
//! # Ok::<(), gather::Error>(())
//! ```
//!
//! ## What you get
//!
//! - Every element type PyTorch's family supports: `f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64
//!   bool`, and any primitive integer as index (`i64`, `i32`, `u32`, `usize`, `u8` ...).
//! - Any layout: views, transposes, negative strides, stride-0 broadcast views; inputs are never
//!   copied and broadcast indices never materialised.
//! - `Result` everywhere: no input panics. In-place forms (`*_inplace`) check everything before the
//!   first write, so a failed call changes nothing (PyTorch leaves the tensor half written).
//! - Deterministic results: bitwise the same for any number of threads; `scatter` keeps the last
//!   write in index order.
//!
//! ## Beyond PyTorch
//!
//! - [`select_batched`] (`tf.gather` with `batch_dims`): `[B, N, D]` with `[B, K]` gives
//!   `[B, K, D]` without unsqueeze/expand.
//! - [`Options`]: what PyTorch has no word for, per call, on the op of the same name. A bounds
//!   policy ([`OutOfBounds`]: `Error`, `Wrap`, `Clip`, `Fill(v)` for reads, `Drop` for writes) on
//!   every indexing op (see [`ops::bounds`]; the gradients by [`Options::grad`]), and
//!   NumPy-style broadcasting of the index and `src` of gather and the scatters (see
//!   [`ops::broadcast`]).
//! - [`gather_nd`]/[`scatter_nd`] (tuples of coordinates, with `batch_dims`), and the ONNX
//!   operators in [`onnx`] (negative indices wrap).
//! - Grouped reductions beyond PyTorch's five ([`scatter_groups`]: first, last, logsumexp, var,
//!   std; [`scatter_softmax`]), arg-reductions ([`scatter_reduce_arg`]), segment reductions over
//!   sorted ids, offsets or lengths ([`ops::segment`]), and a reusable [`ScatterPlan`].
//!
//! ```
//! use gather::{Options, OutOfBounds};
//! use ndarray::array;
//! let x = array![10, 20, 30];
//! assert_eq!(Options::new().bounds(OutOfBounds::Fill(0)).take(&x, &array![-1, 7])?, array![0, 0]);
//! assert_eq!(gather::onnx::gather(&x, &array![-1, 0], 0)?, array![30, 10].into_dyn());
//! # Ok::<(), gather::Error>(())
//! ```
//!
//! ## Choices where PyTorch is silent or inconsistent
//!
//! - Index dtypes: every op accepts every integer index type (PyTorch rejects `int32` for some ops).
//! - `u16`/`u32`/`u64` elements work for every op, also where PyTorch has no kernel.
//! - Reductions of `f16`/`bf16` accumulate in `f32` for every op (PyTorch rounds per addition in
//!   `index_add`, `index_reduce` and `put`).
//! - Memory-overlap checks are unnecessary: `&mut` arrays cannot alias their inputs in Rust.
//! - A `mean` divides by the exact count of its values. PyTorch keeps the count in the element
//!   type: past 127 (`i8`) or 255 (`u8`) values into one element it wraps, past 256 (`bf16`) or
//!   2048 (`f16`) it rounds, and its mean differs.
//! - Where `amax`/`amin` tie `0.0` with `-0.0`, the first of them is kept (self, then the sources
//!   in index order), on every path, as PyTorch's generic kernel does; PyTorch's path for
//!   expanded float indices with rows of 16 or more keeps the last.
//! - The gradient of `amax`/`amin` with `include_self = false` shares an element's gradient among
//!   the sources tied at its result; PyTorch also counts `self` among them when it equals the
//!   result, though it was left out, so its shares add up to less than the gradient.
//! - An index value out of range is an error even where no element would be written (an input
//!   with no elements): PyTorch's `index_add`, `index_copy` and `index_fill` skip the check there.

#![warn(missing_docs)]

#[cfg(feature = "backend")]
pub mod backend;
pub mod dims;
#[cfg(feature = "dynamic")]
pub mod dynamic;
pub mod element;
pub mod error;
pub mod grad;
mod index;
mod kernels;
#[doc(hidden)]
pub mod memory;
pub mod ops;
mod plan;

pub use element::{DType, Element, Scalar};
pub use error::{Error, ErrorKind, Result};
pub use index::IndexElem;
pub use ops::bounds::OutOfBounds;
pub use ops::gather::gather;
pub use ops::index::{
    index_add, index_add_inplace, index_copy, index_copy_inplace, index_fill, index_fill_inplace,
    index_reduce, index_reduce_inplace, index_select,
};
pub use ops::masked::{masked_scatter, masked_scatter_inplace, masked_select};
pub use ops::nd::{gather_nd, scatter_nd, scatter_nd_inplace};
pub use ops::options::Options;
pub use ops::put::{put, put_inplace};
pub use ops::reduce::{
    ArgReduce, EmptyFill, GroupOptions, GroupReduce, scatter_all, scatter_any, scatter_groups,
    scatter_log_softmax, scatter_reduce_arg, scatter_reduce_arg_inplace, scatter_softmax,
};
pub use ops::repeat::repeat_interleave;
pub use ops::scatter::{
    Reduce, ScatterSrc, scatter, scatter_add, scatter_add_inplace, scatter_inplace, scatter_reduce,
    scatter_reduce_inplace,
};
pub use ops::scatter_plan::ScatterPlan;
pub use ops::segment::{Segments, bincount};
pub use ops::select::select_batched;
pub use ops::sort::{argsort, sort, topk};
pub use ops::take::{take, take_along_dim};

/// The ONNX operators, with ONNX's rules: negative indices count from the end, and shapes follow
/// the operator specs rather than PyTorch's. See [`ops::onnx`] for each
/// operator's table.
///
/// ```
/// use ndarray::array;
/// let x = array![10, 20, 30];
/// assert_eq!(gather::onnx::gather(&x, &array![-1, 0], 0)?, array![30, 10].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub mod onnx {
    pub use crate::ops::onnx::{
        onnx_gather as gather, onnx_gather_elements as gather_elements,
        onnx_gather_nd as gather_nd, onnx_scatter_elements as scatter_elements,
        onnx_scatter_nd as scatter_nd,
    };
}

/// Everything needed to call the ops as methods: `use gather::prelude::*;`.
pub mod prelude {
    pub use crate::element::{DType, Element, Scalar};
    pub use crate::error::{Error, ErrorKind, Result};
    pub use crate::index::IndexElem;
    pub use crate::ops::bounds::OutOfBounds;
    pub use crate::ops::gather::GatherExt;
    pub use crate::ops::index::{IndexExt, IndexInplaceExt};
    pub use crate::ops::masked::MaskedExt;
    pub use crate::ops::options::Options;
    pub use crate::ops::put::PutExt;
    pub use crate::ops::reduce::{ArgReduce, ReduceExt};
    pub use crate::ops::repeat::RepeatExt;
    pub use crate::ops::scatter::{Reduce, ScatterExt, ScatterInplaceExt};
    pub use crate::ops::segment::SegmentExt;
    pub use crate::ops::select::SelectExt;
    pub use crate::ops::sort::SortExt;
    pub use crate::ops::take::TakeExt;
}

/// The README's examples, run as doc tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
