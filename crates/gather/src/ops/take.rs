//! `take` and `take_along_dim`: read elements by their flat (row-major) position, or along one dim
//! with the other dims broadcast.
//!
//! ```text
//! take(input, index)                 out[q] = input.flatten()[index[q]]     (out has index's shape)
//!
//!  input (3×4)            row-major flattening                index        out
//!  ┌───┬───┬────┬────┐
//!  │ 0 │ 1 │  2 │  3 │    0 1 2 3 4 5 6 7 8 9 10 11          ┌────┬─────┐  ┌────┬────┐
//!  ├───┼───┼────┼────┤    ▲                      ▲           │  0 │  11 │→ │  0 │ 11 │
//!  │ 4 │ 5 │  6 │  7 │    │                      └─ 11 or -1 ├────┼─────┤  ├────┼────┤
//!  ├───┼───┼────┼────┤    └─ 0 or -12                        │ -1 │ -12 │→ │ 11 │  0 │
//!  │ 8 │ 9 │ 10 │ 11 │                                       └────┴─────┘  └────┴────┘
//!  └───┴───┴────┴────┘
//!
//! take_along_dim(input, index, Some(1))   out[i][j] = input[i][index[i][j] mod 4]
//!
//!  input (3×4)            index (1×2, broadcast over the 3 rows)    out (3×2)
//!  ┌───┬───┬────┬────┐    ┌───┬───┐                                  ┌───┬────┐
//!  │ 0 │ 1 │  2 │  3 │    │ 0 │ 3 │                                  │ 0 │  3 │
//!  │ 4 │ 5 │  6 │  7 │    └───┴───┘                                  │ 4 │  7 │
//!  │ 8 │ 9 │ 10 │ 11 │                                               │ 8 │ 11 │
//!  └───┴───┴────┴────┘                                               └───┴────┘
//! ```
//!
//! The rules, as PyTorch 2.15's:
//! - `take` indexes the **logical** row-major order of the input, not its memory order (a
//!   transposed view reads its transposed elements); negative indices count from the end (valid
//!   range `-numel..numel`); the output has the index's shape; an empty input with a non-empty
//!   index is an error.
//! - `take_along_dim` with `Some(dim)`: input and index have the same number of dims; every dim
//!   but `dim` broadcasts NumPy-style in both directions (never materialised: stride-0 views); index
//!   values are taken **modulo** the size of `dim` with a non-negative result (`-5` and `3` both
//!   pick the last of 4), so they never go out of range, except that an empty `dim` has nothing to
//!   pick from. A 0-d input has no dim to take along.
//! - `take_along_dim` with `None`: the input is flattened and the output is 1-d with one element
//!   per index element; here negative values are errors (no wrapping), as in PyTorch.
//!
//! Every integer type is accepted as index (PyTorch requires `int64` for these two ops).

use ndarray::{Array, ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::dims::{broadcast_shapes, normalize_dim};
use crate::element::Element;
use crate::error::{fmt_shape, Error, ErrorKind, Result};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;

/// Rewrites a bounds error of a flat index (checked as "dimension 0" of the flattening) into
/// PyTorch's wording for take/put, keeping the value and its coordinate.
pub(crate) fn flat_index_error(op: &str, e: Error, shape: &[usize]) -> Error {
    let (Some(value), Some(coord)) = (e.index_value(), e.coordinate()) else {
        return e;
    };
    if e.kind() != ErrorKind::IndexOutOfBounds {
        return e;
    }
    let numel: usize = shape.iter().product();
    let msg = format!(
        "{op}: out of range: tried to access index {value} on a tensor of {numel} elements (shape {}, at index position {})",
        fmt_shape(shape),
        fmt_shape(coord)
    );
    let hint = if value == numel as i64 {
        format!(
            "flat indices count from 0: valid values are -{numel}..{numel}, so the last element is {} (or -1)",
            numel - 1
        )
    } else {
        format!(
            "{op} indexes the row-major flattening of the array: valid values are -{numel}..{numel}, negative ones counting from the end"
        )
    };
    Error::bounds(msg).with_hint(hint).with_index(value, coord.to_vec())
}

/// Reads `input.flatten()[index[q]]` for every position `q` of the index, in row-major order.
fn take_flat<T, S, D, I, SI, DI>(
    op: &str,
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    bounds: Bounds,
) -> Result<Vec<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let x = input.view().into_dyn();
    let idx = index.view().into_dyn();
    let checked = CheckedIndex::new(op, idx, 0, x.len(), bounds)?;
    Ok(kernels::take::take(&x, &checked))
}

/// `torch.take(input, index)`: `out[q] = input.flatten()[index[q]]`, with the index's shape.
///
/// The flattening is the logical row-major order of `input`, whatever its memory layout;
/// negative indices count from the end.
///
/// ```
/// use gather::ops::take::take;
/// use ndarray::array;
/// let x = array![[0.0f32, 1., 2., 3.], [4., 5., 6., 7.], [8., 9., 10., 11.]];
/// assert_eq!(take(&x, &array![[0, 11], [-1, -12]])?, array![[0.0, 11.0], [11.0, 0.0]]);
///
/// // A transposed view is read in its own (logical) order.
/// assert_eq!(take(&x.t(), &array![1, 3])?, array![4.0, 1.0]);
///
/// // Out of range: the error names the value, its position in the index and the valid range.
/// let e = take(&x, &array![3, 12]).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::IndexOutOfBounds);
/// assert_eq!(e.coordinate(), Some(&[1usize][..]));
/// # Ok::<(), gather::Error>(())
/// ```
pub fn take<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, DI>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    if input.is_empty() && !index.is_empty() {
        return Err(Error::bounds(format!(
            "take(): tried to take from an empty tensor (input shape {}, index shape {})",
            fmt_shape(input.shape()),
            fmt_shape(index.shape())
        ))
        .with_hint("an empty input has no element to take; only an empty index is valid for it"));
    }
    let data = take_flat("take", input, index, Bounds::Wrap)
        .map_err(|e| flat_index_error("take", e, input.shape()))?;
    Ok(Array::from_shape_vec(index.raw_dim(), data).expect("output has the index's shape"))
}

/// `torch.take_along_dim(input, index, dim)`.
///
/// With `Some(dim)`: `out[p] = input_b[p with p[dim] := index_b[p] mod input.shape[dim]]`, where
/// `input_b` and `index_b` are the two broadcast against each other on every dim but `dim` (as
/// stride-0 views, never copied). The output has the broadcast shape with `index`'s size along
/// `dim`. Values are taken modulo the size of `dim` (Python-style, never negative), as PyTorch
/// 2.15 does, so no value is out of range unless that dim is empty.
///
/// With `None`: the input is flattened and indexed along its one dim with no wrapping (negative
/// values are errors); the output is 1-d with `index.len()` elements.
///
/// ```
/// use gather::ops::take::take_along_dim;
/// use ndarray::array;
/// let x = array![[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]];
///
/// // One index row broadcast over every row of x.
/// let out = take_along_dim(&x, &array![[0, 3]], Some(1))?;
/// assert_eq!(out, array![[0, 3], [4, 7], [8, 11]].into_dyn());
///
/// // The usual top-k pattern: sorted positions per row, values picked along the same dim.
/// let top = take_along_dim(&x, &array![[3], [2], [-1]], Some(-1))?;
/// assert_eq!(top, array![[3], [6], [11]].into_dyn());
///
/// // dim = None reads the flattening.
/// assert_eq!(take_along_dim(&x, &array![[5, 0]], None)?, array![5, 0].into_dyn());
/// assert!(take_along_dim(&x, &array![-1], None).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn take_along_dim<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    dim: Option<isize>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    const OP: &str = "take_along_dim";
    let Some(dim) = dim else {
        let data = take_flat(OP, input, index, Bounds::Strict)?;
        return Ok(ArrayD::from_shape_vec(IxDyn(&[data.len()]), data).expect("1-d output"));
    };
    let nd = input.ndim();
    if index.ndim() != nd {
        return Err(Error::rank(format!(
            "{OP}: input and indices should have the same number of dimensions, but got {nd} dimensions for input, and {} dimensions for indices (input {}, indices {}, dim {dim})",
            index.ndim(),
            fmt_shape(input.shape()),
            fmt_shape(index.shape())
        ))
        .with_hint(rank_hint(input.shape(), index.shape())));
    }
    if nd == 0 {
        return Err(Error::new(
            ErrorKind::DimOutOfRange,
            format!("{OP}: Dimension specified as {dim} but tensor has no dimensions"),
        )
        .with_hint("a 0-d input has no dim to take along: pass dim None to index its single element, or give it an axis with `insert_axis(Axis(0))`"));
    }
    let d = normalize_dim(OP, dim, nd)?;
    let bcast_hint = |e: Error| {
        e.with_hint(format!(
            "{OP} broadcasts input and index on every dim but {d}: there, each pair of sizes must be equal or one of them 1 (input {}, index {})",
            fmt_shape(input.shape()),
            fmt_shape(index.shape())
        ))
    };
    let mut self_sizes = input.shape().to_vec();
    self_sizes[d] = index.shape()[d];
    let idx_shape = broadcast_shapes(&self_sizes, index.shape()).map_err(bcast_hint)?;
    let mut idx_sizes = index.shape().to_vec();
    idx_sizes[d] = input.shape()[d];
    let x_shape = broadcast_shapes(&idx_sizes, input.shape()).map_err(bcast_hint)?;
    let x = input.view().into_dyn();
    let idx = index.view().into_dyn();
    let internal = || Error::shape(format!("{OP}: broadcasting failed (input {}, index {})", fmt_shape(input.shape()), fmt_shape(index.shape())));
    let xb = x.broadcast(IxDyn(&x_shape)).ok_or_else(internal)?;
    let ib = idx.broadcast(IxDyn(&idx_shape)).ok_or_else(internal)?;
    let size = x_shape[d];
    // In-range values (the usual case) take the plain lookup; others are reduced modulo `size`.
    let checked = match CheckedIndex::new(OP, ib.clone(), d, size, Bounds::Strict) {
        Ok(c) => c,
        Err(_) => CheckedIndex::new(OP, ib, d, size, Bounds::Modulo)?,
    };
    let data = kernels::gather::gather(&xb, d, &checked);
    Ok(ArrayD::from_shape_vec(IxDyn(&idx_shape), data).expect("output has the broadcast shape"))
}

/// The hint for an index of the wrong rank: which axes to add.
fn rank_hint(input_shape: &[usize], index_shape: &[usize]) -> String {
    let (n, k) = (input_shape.len(), index_shape.len());
    if k < n {
        format!(
            "give the index {} more axis/axes of size 1 where input and index should broadcast (e.g. `index.insert_axis(Axis(0))`), or pass dim None to index the flattened input",
            n - k
        )
    } else {
        format!(
            "the index has {} dims more than the input: remove size-1 axes with `index_axis(Axis(a), 0)`, or pass dim None to index the flattened input",
            k - n
        )
    }
}

/// Method forms of [`take()`] and [`take_along_dim()`], on any ndarray array.
///
/// ```
/// use gather::ops::take::TakeExt;
/// use ndarray::array;
/// let x = array![[1.0f32, 2.0], [3.0, 4.0]];
/// assert_eq!(x.take(&array![3, 0])?, array![4.0, 1.0]);
/// assert_eq!(x.take_along_dim(&array![[1], [0]], Some(1))?, array![[2.0], [3.0]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub trait TakeExt<T: Element> {
    /// See [`take()`].
    fn take<I, SI, DI>(&self, index: &ArrayBase<SI, DI>) -> Result<Array<T, DI>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;

    /// See [`take_along_dim()`].
    fn take_along_dim<I, SI, DI>(
        &self,
        index: &ArrayBase<SI, DI>,
        dim: Option<isize>,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> TakeExt<T> for ArrayBase<S, D> {
    fn take<I, SI, DI>(&self, index: &ArrayBase<SI, DI>) -> Result<Array<T, DI>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        take(self, index)
    }

    fn take_along_dim<I, SI, DI>(
        &self,
        index: &ArrayBase<SI, DI>,
        dim: Option<isize>,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        take_along_dim(self, index, dim)
    }
}
