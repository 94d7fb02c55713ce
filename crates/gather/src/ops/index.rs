//! `index_select`, `index_add`, `index_copy`, `index_fill`, `index_reduce`: whole slices along one
//! dim, picked by a 1-d list of positions.
//!
//! ```text
//! index_select(input, dim=0, index)                 index_add(self, dim=0, index, source)
//! out row i = input row index[i]                    self row index[i] += source row i
//!
//!  input        index   out                         source      index   self (zeros before)
//!  │ 1 2 3 │      2     │ 7 8 9 │ ← input row 2      │ 1 1 1 │    0     │ 3 3 3 │ ← source rows 0 + 1
//!  │ 4 5 6 │      0     │ 1 2 3 │ ← input row 0      │ 2 2 2 │    0     │ 0 0 0 │ ← no index is 1
//!  │ 7 8 9 │      2     │ 7 8 9 │ ← input row 2      │ 5 5 5 │    2     │ 5 5 5 │ ← source row 2
//! ```
//!
//! The index is 0-d or 1-d, and `index[i]` names a whole slice along `dim`:
//!
//! - `index_select` reads slice `index[i]` of the input into slice `i` of the output (the output is
//!   the input's shape with `index.len()` along `dim`);
//! - `index_add` adds `alpha * source.select(dim, i)` to slice `index[i]`; `index_copy` writes it;
//!   `index_reduce` combines it with `prod`, `mean`, `amax` or `amin`; `index_fill` writes `value`
//!   over the whole slice `index[i]`.
//!
//! The rules, as PyTorch's:
//!
//! - `source` has `self`'s shape except along `dim`, where it has one entry per index;
//! - index values are in `0..size` (negative values are errors), except for `index_fill`, which
//!   wraps them like Python (`-size..size`);
//! - a 0-d array behaves like a 1-element 1-d array, with PyTorch's exceptions: `index_select` of a
//!   0-d input takes exactly one index and gives a 0-d output; `index_add`/`index_reduce` accept a
//!   0-d source only for a 0-d `self`; `index_copy` accepts a 0-d source for a 1-element slice;
//! - `index_reduce` has no `sum` (use `index_add`); `mean` is not implemented for bool, and bool
//!   works only for arrays of two or more dims with `include_self = true` (as in PyTorch).
//!
//! Duplicate indices are deterministic, whatever the number of threads: updates to one slice
//! happen in index order, so `index_copy` keeps the **last** write (PyTorch leaves the winner
//! unspecified), and `index_add` adds in index order. `f16`/`bf16` sums and products accumulate in
//! `f32` and round once (PyTorch rounds after every addition in `index_add`/`index_reduce`, so
//! results can differ in the last bits; 3000 ones add up to 3000 here, to 2048 in PyTorch).
//!
//! The index is broadcast over the slices (a stride-0 view, never materialised) and the work runs
//! on the same read and write kernels as `gather` and `scatter`. In-place forms check everything,
//! bounds included, before the first write: a failed call leaves `self` exactly as it was.

use ndarray::{
    Array, ArrayBase, ArrayView, ArrayViewMut, Axis, CowArray, Data, DataMut, Dimension, IxDyn,
};

use super::{try_to_owned, try_vec, view_1d_if_scalar};
use crate::dims::normalize_dim;
use crate::element::{DType, Element};
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;
use crate::kernels::scatter::Update;
use crate::ops::scatter::Reduce;

// ---------------------------------------------------------------------------------------------
// Checks shared with the dynamic layer
// ---------------------------------------------------------------------------------------------

/// The first checks of the index_* ops that write (and of their gradients): `dim` for `shape`,
/// then a 0-d or 1-d index, before the index's dtype and the source. Returns the normalised dim.
pub(crate) fn check_dim_and_vector(
    op: &str,
    shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
) -> Result<usize> {
    let d = normalize_dim(op, dim, shape.len())?;
    check_index_vector(op, index_shape, index_dtype)?;
    Ok(d)
}

/// The rule every op of the family shares: the index is 0-d or 1-d. `dtype` is the index's element
/// type (PyTorch prints it for `index_add`/`index_reduce`).
pub(crate) fn check_index_vector(op: &str, index_shape: &[usize], dtype: DType) -> Result<()> {
    if index_shape.len() <= 1 {
        return Ok(());
    }
    let nd = index_shape.len();
    let shape = fmt_shape(index_shape);
    let msg = match op {
        "index_select" => format!(
            "index_select: Index is supposed to be a vector (got an index of {nd} dims, shape {shape})"
        ),
        "index_copy" => {
            format!("index_copy: Index should have dimension 1 or 0 (got {nd}, shape {shape})")
        }
        "index_fill" => {
            format!("index_fill: Index has to be a vector/scalar (got {nd} dims, shape {shape})")
        }
        _ => format!(
            "{op}: Index is supposed to be a vector, but got dim: {nd} with type: {} and size: {shape}",
            dtype.torch_name()
        ),
    };
    let mut hint = format!(
        "{op} takes one position per slice along dim, as a 0-d or 1-d index; flatten this one \
         (`Array1::from_iter(index.iter().copied())`)"
    );
    hint.push_str(match op {
        "index_select" => {
            " and reshape the result, or use gather for an index of the input's rank (one position per element)"
        }
        "index_fill" => {
            ", or use scatter with a value for an index of self's rank (one position per element)"
        }
        _ => {
            " with the source to match, or use the scatter family for an index of self's rank (one position per element)"
        }
    });
    Err(Error::rank(msg).with_hint(hint))
}

/// The checks of `index_select` before the index's values are looked at: `dim`, the index's rank,
/// and the one-value rule of a 0-d input. Returns the normalised dim.
pub(crate) fn check_select_shapes(
    op: &str,
    input_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    dtype: DType,
) -> Result<usize> {
    let d = normalize_dim(op, dim, input_shape.len())?;
    check_index_vector(op, index_shape, dtype)?;
    let n: usize = index_shape.iter().product();
    if input_shape.is_empty() && n != 1 {
        return Err(Error::shape(format!("{op}: Index to scalar can have only 1 value, got {n} value(s)")).with_hint(
            "a 0-d input has exactly one element, so the index must hold exactly one value (0); to repeat it, \
             give the input an axis first (`input.insert_axis(Axis(0))`)",
        ));
    }
    Ok(d)
}

/// Parses `index_reduce`'s reduction name: `prod`, `mean`, `amax` or `amin` only (no `sum`, and no
/// `max`/`min` aliases, as in PyTorch). Only ops called by name need it.
#[cfg(any(test, feature = "dynamic"))]
pub(crate) fn parse_index_reduce(name: &str) -> Result<Reduce> {
    match name {
        "prod" => Ok(Reduce::Prod),
        "mean" => Ok(Reduce::Mean),
        "amax" => Ok(Reduce::Amax),
        "amin" => Ok(Reduce::Amin),
        _ => Err(bad_reduce(name)),
    }
}

pub(crate) fn bad_reduce(name: &str) -> Error {
    let mut hint = String::from("index_reduce knows prod, mean, amax and amin");
    match name {
        "sum" => hint.push_str("; for a sum use index_add (alpha 1)"),
        "max" | "min" => hint.push_str(&format!(
            "; write `a{name}` (index_reduce has no `{name}` alias)"
        )),
        _ => {}
    }
    Error::invalid(format!(
        "index_reduce: Expected reduce to be one of prod, mean, amax or amin but got {name}."
    ))
    .with_hint(hint)
}

/// The source rules of `index_add` and `index_reduce` (PyTorch's `index_func_meta_impl`), in
/// PyTorch's order: `dim` exists in the source, one source entry per index along `dim`, and equal
/// shapes apart from `dim`.
pub(crate) fn check_func_source(
    op: &str,
    self_shape: &[usize],
    d: usize,
    n: usize,
    source_shape: &[usize],
) -> Result<()> {
    let expected = |n: usize| {
        if self_shape.is_empty() {
            "[] (0-d, like self)".to_string()
        } else {
            let mut e = self_shape.to_vec();
            e[d] = n;
            fmt_shape(&e)
        }
    };
    if d != 0 && d >= source_shape.len() {
        return Err(Error::rank(format!(
            "{op}: Indexing dim {d} is out of bounds of the source tensor with dim {} (self {}, source {})",
            source_shape.len(),
            fmt_shape(self_shape),
            fmt_shape(source_shape)
        ))
        .with_hint(format!("source needs self's {} dims: give it the shape {}", self_shape.len(), expected(n))));
    }
    let src_n = if source_shape.is_empty() {
        1
    } else {
        source_shape[d]
    };
    if n != src_n {
        return Err(Error::shape(format!(
            "{op}: Number of indices ({n}) should be equal to source.size(dim): ({src_n}), for dim: {d}"
        ))
        .with_hint(format!(
            "source holds one slice per index along dim {d}: pass {src_n} indices, or a source of shape {}",
            expected(n)
        )));
    }
    let both = !self_shape.is_empty() && !source_shape.is_empty();
    let erase = |s: &[usize]| -> Vec<usize> {
        let mut v = s.to_vec();
        if both {
            v.remove(d);
        }
        v
    };
    if erase(self_shape) != erase(source_shape) {
        let kind = if both && self_shape.len() != source_shape.len() {
            ErrorKind::RankMismatch
        } else {
            ErrorKind::ShapeMismatch
        };
        let msg = format!(
            "{op}: source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {} source.shape = {} (dim {d})",
            fmt_shape(self_shape),
            fmt_shape(source_shape)
        );
        let mut hint = format!(
            "source must have the shape {}: self's shape with the number of indices at dim {d}",
            expected(n)
        );
        if self_shape.len() == 1 && source_shape.is_empty() {
            hint.push_str("; a 0-d source fits only a 0-d self here: write it as a 1-element array (`source.insert_axis(Axis(0))`)");
        }
        return Err(Error::new(kind, msg).with_hint(hint));
    }
    Ok(())
}

/// The source rules of `index_copy`, in PyTorch's order.
pub(crate) fn check_copy_source(
    self_shape: &[usize],
    d: usize,
    n: usize,
    source_shape: &[usize],
) -> Result<()> {
    if source_shape.is_empty() && n != 1 {
        return Err(Error::shape(format!(
            "index_copy: When source is scalar, index should have one element (got {n})"
        ))
        .with_hint(
            "a 0-d source fills one slice: pass one index, or a source with one slice per index",
        ));
    }
    if source_shape.len() != self_shape.len() && !source_shape.is_empty() && !self_shape.is_empty()
    {
        return Err(Error::rank(format!(
            "index_copy: When source and destination are not scalars, their dimensionality must match. Source dimensionality ({}), destination dimensionality ({}) (source {}, self {})",
            source_shape.len(),
            self_shape.len(),
            fmt_shape(source_shape),
            fmt_shape(self_shape)
        ))
        .with_hint(format!("source needs self's {} dims, with one entry per index along dim {d}", self_shape.len())));
    }
    let slice = |s: &[usize]| -> Vec<usize> {
        let mut v = s.to_vec();
        if !v.is_empty() {
            v.remove(d);
        }
        v
    };
    let (ds, ss) = (slice(self_shape), slice(source_shape));
    if ds != ss {
        let mut want = self_shape.to_vec();
        if !want.is_empty() {
            want[d] = n;
        }
        return Err(Error::shape(format!(
            "index_copy: Source/destination tensor must have same slice shapes. Destination slice shape: {} at dimension {d} and source slice shape: {} at dimension 0. (self {}, source {})",
            fmt_shape(&ds),
            fmt_shape(&ss),
            fmt_shape(self_shape),
            fmt_shape(source_shape)
        ))
        .with_hint(format!("source must have the shape {}: self's shape with the number of indices at dim {d}", fmt_shape(&want))));
    }
    if !source_shape.is_empty() && n != source_shape[d] {
        return Err(Error::shape(format!(
            "index_copy: Number of indices ({n}) should be equal to source.size(dim) ({})",
            source_shape[d]
        ))
        .with_hint(format!(
            "source holds one slice per index along dim {d}: pass {} indices",
            source_shape[d]
        )));
    }
    Ok(())
}

/// PyTorch's dtype gaps of `index_reduce`: `mean` on bool, and bool outside `ndim >= 2` with
/// `include_self = true`.
pub(crate) fn check_reduce_dtype(
    dtype: DType,
    ndim: usize,
    reduce: Reduce,
    include_self: bool,
) -> Result<()> {
    if dtype != DType::Bool {
        return Ok(());
    }
    if reduce == Reduce::Mean {
        return Err(Error::invalid("index_reduce: reduce=\"mean\" is not implemented for bool (\"index_func_\" not implemented for 'Bool')")
            .with_hint("convert the array to an integer or float dtype first (e.g. `mapv(|b| b as u8)`)"));
    }
    if ndim < 2 || !include_self {
        let why = if ndim < 2 {
            format!("a {ndim}-d bool array")
        } else {
            "bool with include_self=false".to_string()
        };
        return Err(Error::invalid(format!(
            "index_reduce: not implemented for {why} (\"index_func_\" not implemented for 'Bool'), as in PyTorch"
        ))
        .with_hint(
            "PyTorch reduces bool only for arrays of two or more dims with include_self=true; convert to u8 \
             (`mapv(|b| b as u8)`), where amax/amin/prod give the same result",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Cores, on dynamic-rank views
// ---------------------------------------------------------------------------------------------

/// Checks `index` (0-d or 1-d) against a dim of `size`, broadcasts it along `dim` over `shape`
/// (stride 0 on every other axis, no copy), and runs `f` with the checked view.
fn with_spread_index<I: IndexElem, R>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    size: usize,
    shape: &[usize],
    bounds: Bounds,
    f: impl FnOnce(&CheckedIndex<'_, I>) -> R,
) -> Result<R> {
    // Checked on the index itself, so that an error names the position in the index (and so that
    // an index into an empty output is still checked, as in PyTorch).
    let checked = CheckedIndex::new(op, index.view(), dim, size, bounds)?;
    super::output_len(op, shape)?;
    let out = checked
        .spread(dim, shape, f)
        .expect("the index has shape[dim] entries, every other axis is 1");
    Ok(out)
}

fn select_dyn<T: Element, I: IndexElem>(
    input: &ArrayView<'_, T, IxDyn>,
    dim: isize,
    index: &ArrayView<'_, I, IxDyn>,
) -> Result<(usize, Vec<T>)> {
    let d = check_select_shapes("index_select", input.shape(), dim, index.shape(), I::DTYPE)?;
    let x = view_1d_if_scalar(input);
    let mut out_shape = x.shape().to_vec();
    out_shape[d] = index.len();
    let data = with_spread_index(
        "index_select",
        index,
        d,
        x.shape()[d],
        &out_shape,
        Bounds::Strict,
        |checked| {
            let out = try_vec("index_select", checked.view().len())?;
            Ok::<_, Error>(kernels::gather::gather(&x, d, checked, out))
        },
    )??;
    Ok((d, data))
}

/// Prepared operands of a write: `self` and `source` with 0-d seen as 1-d.
fn as_1d_mut<'a, T>(a: ArrayViewMut<'a, T, IxDyn>) -> ArrayViewMut<'a, T, IxDyn> {
    if a.ndim() == 0 {
        a.insert_axis(Axis(0))
    } else {
        a
    }
}

fn as_1d<'a, T>(a: ArrayView<'a, T, IxDyn>) -> ArrayView<'a, T, IxDyn> {
    if a.ndim() == 0 {
        a.insert_axis(Axis(0))
    } else {
        a
    }
}

/// `source` as the `index_*` kernels read it: itself, or a row-major copy where it is large and
/// strided along its innermost axis (a transposed view, say). The kernels walk the source along
/// its last axis, a line per element when that axis is strided, where the copy kernel transposes
/// by tiles (docs/performance.md, "Transposed sources of the index_* ops"). A broadcast source
/// (a stride 0) is never copied: that would materialise the expansion.
fn row_major_source<'a, T: Element>(
    op: &str,
    source: ArrayView<'a, T, IxDyn>,
) -> Result<CowArray<'a, T, IxDyn>> {
    let axes = || {
        source
            .shape()
            .iter()
            .zip(source.strides())
            .filter(|(len, _)| **len > 1)
    };
    // A lone long axis is read once either way: only a source with another axis to walk by
    // tiles (a transposition) gains from the copy.
    let strided = axes().count() > 1
        && crate::dims::inner_stride(source.shape(), source.strides())
            .is_some_and(|s| s.unsigned_abs() > 1);
    let large = source.len().saturating_mul(std::mem::size_of::<T>()) >= SOURCE_COPY_MIN_BYTES;
    if strided && large && axes().all(|(_, s)| *s != 0) {
        return Ok(CowArray::from(try_to_owned(op, &source)?));
    }
    Ok(CowArray::from(source))
}

/// Sources of at least this many bytes are copied to row-major order when they are strided along
/// their innermost axis ([`row_major_source`]): smaller ones stay in L2, whose lines a strided walk
/// reuses.
const SOURCE_COPY_MIN_BYTES: usize = 1 << 20;

fn add_dyn<T: Element, I: IndexElem>(
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    source: ArrayView<'_, T, IxDyn>,
    alpha: T,
) -> Result<()> {
    let op = "index_add";
    let d = normalize_dim(op, dim, dst.ndim())?;
    check_index_vector(op, index.shape(), I::DTYPE)?;
    check_func_source(op, dst.shape(), d, index.len(), source.shape())?;
    let mut dst = as_1d_mut(dst);
    let source = row_major_source(op, as_1d(source))?;
    let source = source.view();
    let size = dst.shape()[d];
    let a = alpha.to_acc();
    with_spread_index(
        op,
        &index,
        d,
        size,
        source.shape(),
        Bounds::Strict,
        |checked| {
            let target = kernels::scatter::Target::Index {
                dim: d,
                index: checked,
            };
            // With `alpha = 1` (the default) this is scatter_add's computation, and runs on its
            // kernels.
            let one = a == T::acc_one();
            if T::WIDE_ACC {
                // One rounding per element: the sums run in f32.
                let op = kernels::scatter::Wide {
                    prod: false,
                    alpha: (!one).then_some(a),
                    init: None,
                    mean: None,
                };
                target.reduce_wide(&mut dst, &source, op);
            } else if one {
                target.reduce_as(&mut dst, &source, None, Update::Add);
            } else {
                // `alpha * s` rounds in the type (its own accumulator) before the sum, as in the
                // update `x + alpha * s`.
                let scaled =
                    kernels::zip::map(&source, |&s| T::from_acc(T::acc_mul(a, s.to_acc())));
                target.reduce_as(&mut dst, &scaled.view(), None, Update::Add);
            }
        },
    )
}

fn copy_dyn<T: Element, I: IndexElem>(
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    source: ArrayView<'_, T, IxDyn>,
) -> Result<()> {
    let op = "index_copy";
    let d = normalize_dim(op, dim, dst.ndim())?;
    check_index_vector(op, index.shape(), I::DTYPE)?;
    check_copy_source(dst.shape(), d, index.len(), source.shape())?;
    let mut dst = as_1d_mut(dst);
    let source = row_major_source(op, as_1d(source))?;
    let source = source.view();
    let size = dst.shape()[d];
    with_spread_index(
        op,
        &index,
        d,
        size,
        source.shape(),
        Bounds::Strict,
        |checked| kernels::scatter::scatter_set(&mut dst, d, checked, &source),
    )
}

fn fill_dyn<T: Element, I: IndexElem>(
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    value: T,
) -> Result<()> {
    let op = "index_fill";
    let d = normalize_dim(op, dim, dst.ndim())?;
    check_index_vector(op, index.shape(), I::DTYPE)?;
    let mut dst = as_1d_mut(dst);
    let size = dst.shape()[d];
    let mut region = dst.shape().to_vec();
    region[d] = index.len();
    let values = crate::dims::splat(&value, &region);
    // Negative positions are mapped here, on the short index vector, so that the scatter kernels
    // only ever see strict positions.
    let strict = crate::index::strict_positions(op, &index, d, size, Bounds::Wrap)?;
    with_spread_index(
        op,
        &strict.view(),
        d,
        size,
        &region,
        Bounds::Strict,
        |checked| kernels::scatter::scatter_set(&mut dst, d, checked, &values),
    )
}

fn reduce_dyn<T: Element, I: IndexElem>(
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    source: ArrayView<'_, T, IxDyn>,
    reduce: Reduce,
    include_self: bool,
) -> Result<()> {
    let op = "index_reduce";
    if reduce == Reduce::Sum {
        return Err(bad_reduce("sum"));
    }
    let d = normalize_dim(op, dim, dst.ndim())?;
    check_index_vector(op, index.shape(), I::DTYPE)?;
    check_func_source(op, dst.shape(), d, index.len(), source.shape())?;
    check_reduce_dtype(T::DTYPE, dst.ndim(), reduce, include_self)?;
    let mut dst = as_1d_mut(dst);
    let source = row_major_source(op, as_1d(source))?;
    let source = source.view();
    let size = dst.shape()[d];
    with_spread_index(
        op,
        &index,
        d,
        size,
        source.shape(),
        Bounds::Strict,
        |checked| {
            let target = kernels::scatter::Target::Index {
                dim: d,
                index: checked,
            };
            crate::ops::scatter::reduce_into(&mut dst, &target, &source, reduce, include_self)
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// `torch.index_select(input, dim, index)`: `out.select(dim, i) = input.select(dim, index[i])`.
///
/// The index is 0-d or 1-d; the output has the input's shape with `index.len()` along `dim` (a 0-d
/// index counts as one value, and the output keeps the input's rank). A 0-d input takes exactly one
/// index and gives a 0-d output. Negative index values are errors. The index is never copied: it
/// is broadcast over the slices, and each slice is copied as a contiguous row where the layout
/// allows it.
///
/// ```
/// use ndarray::{array, arr0};
/// // Embedding lookup: rows of a table.
/// let table = array![[0.0f32, 0.1], [1.0, 1.1], [2.0, 2.1]];
/// let rows = gather::ops::index::index_select(&table, 0, &array![2, 0, 2]).unwrap();
/// assert_eq!(rows, array![[2.0, 2.1], [0.0, 0.1], [2.0, 2.1]]);
/// // Columns, with a negative dim; a 0-d index keeps the axis.
/// let col = gather::ops::index::index_select(&table, -1, &arr0(1)).unwrap();
/// assert_eq!(col, array![[0.1], [1.1], [2.1]]);
/// ```
pub fn index_select<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let x = input.view().into_dyn();
    let (d, data) = select_dyn(&x, dim, &index.view().into_dyn())?;
    let mut shape = input.raw_dim();
    if input.ndim() > 0 {
        shape[d] = index.len();
    }
    Ok(Array::from_shape_vec(shape, data)
        .expect("the output has the input's shape with the index's length at dim"))
}

/// `self.index_add_(dim, index, source, alpha=alpha)`:
/// `self.select(dim, index[i]) += alpha * source.select(dim, i)`.
///
/// `source` has `self`'s shape with `index.len()` along `dim`. Duplicate indices accumulate, in
/// index order. Integers wrap, bool adds with logical or (`alpha` and-ed in), `f16`/`bf16`
/// accumulate in `f32` and round once. `alpha` is an element value; a float `alpha` for an integer
/// array is truncated first in PyTorch (`2.5` means `2`), which the caller does when converting it
/// (see [`Element::from_scalar`]). Atomic: on error `self` is unchanged.
///
/// ```
/// use ndarray::{array, Array2};
/// // torch: zeros(3,4).index_add_(0, [0,0,2], ones(3,4), alpha=2)
/// let mut x = Array2::<f32>::zeros((3, 4));
/// gather::ops::index::index_add_inplace(&mut x, 0, &array![0, 0, 2], &Array2::ones((3, 4)), 2.0).unwrap();
/// assert_eq!(x, array![[4., 4., 4., 4.], [0., 0., 0., 0.], [2., 2., 2., 2.]]);
/// ```
pub fn index_add_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    alpha: T,
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
    add_dyn(
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        source.view().into_dyn(),
        alpha,
    )
}

/// Out-of-place [`index_add_inplace`]: returns a copy of `input` with the slices added.
///
/// ```
/// use ndarray::array;
/// // Gradient of an embedding lookup: scatter the rows back, adding duplicates.
/// let grad = array![[1, 1], [2, 2], [3, 3]];
/// let table = gather::ops::index::index_add(&ndarray::Array2::<i32>::zeros((4, 2)), 0, &array![3, 0, 3], &grad, 1).unwrap();
/// assert_eq!(table, array![[2, 2], [0, 0], [0, 0], [4, 4]]);
/// ```
pub fn index_add<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    alpha: T,
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
    let mut out = try_to_owned("index_add", input)?;
    index_add_inplace(&mut out, dim, index, source, alpha)?;
    Ok(out)
}

/// `self.index_copy_(dim, index, source)`: `self.select(dim, index[i]) = source.select(dim, i)`.
///
/// With duplicate indices the **last** write in index order wins, deterministically (PyTorch
/// leaves the winner unspecified unless deterministic mode is on, where it is also the last). A
/// 0-d `source` fills a one-element slice (one index). Atomic: on error `self` is unchanged.
///
/// ```
/// use ndarray::array;
/// let mut x = array![[0, 0, 0], [0, 0, 0]];
/// gather::ops::index::index_copy_inplace(&mut x, 1, &array![2, 0, 2], &array![[1, 2, 3], [4, 5, 6]]).unwrap();
/// assert_eq!(x, array![[2, 0, 3], [5, 0, 6]]); // column 2 got 1 then 3: the last write wins
/// ```
pub fn index_copy_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
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
    copy_dyn(
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        source.view().into_dyn(),
    )
}

/// Out-of-place [`index_copy_inplace`].
///
/// ```
/// use ndarray::{array, arr0};
/// let out = gather::ops::index::index_copy(&array![1.0, 2.0, 3.0], 0, &arr0(1), &arr0(9.0)).unwrap();
/// assert_eq!(out, array![1.0, 9.0, 3.0]);
/// ```
pub fn index_copy<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
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
    let mut out = try_to_owned("index_copy", input)?;
    index_copy_inplace(&mut out, dim, index, source)?;
    Ok(out)
}

/// `self.index_fill_(dim, index, value)`: every slice `self.select(dim, index[i])` is set to
/// `value`.
///
/// Unlike the rest of the family, negative index values count from the end, as in Python
/// (valid values are `-size..size`). `value` is an element value (convert a Python-style scalar
/// with [`Element::from_scalar`], which fails when it does not fit). Atomic: on error `self` is
/// unchanged.
///
/// ```
/// use ndarray::{array, Array2};
/// // torch: zeros(3,4).index_fill_(1, [0,-1], 5.)
/// let mut x = Array2::<f32>::zeros((3, 4));
/// gather::ops::index::index_fill_inplace(&mut x, 1, &array![0, -1], 5.0).unwrap();
/// assert_eq!(x, array![[5., 0., 0., 5.], [5., 0., 0., 5.], [5., 0., 0., 5.]]);
/// ```
pub fn index_fill_inplace<T, S, D, I, SI, DI>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    value: T,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    fill_dyn(
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        value,
    )
}

/// Out-of-place [`index_fill_inplace`].
///
/// ```
/// use ndarray::array;
/// let out = gather::ops::index::index_fill(&array![[1, 2], [3, 4]], 0, &array![-1], 0).unwrap();
/// assert_eq!(out, array![[1, 2], [0, 0]]);
/// ```
pub fn index_fill<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    value: T,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let mut out = try_to_owned("index_fill", input)?;
    index_fill_inplace(&mut out, dim, index, value)?;
    Ok(out)
}

/// `self.index_reduce_(dim, index, source, reduce, include_self=include_self)`: combines
/// `source.select(dim, i)` into `self.select(dim, index[i])` with `prod`, `mean`, `amax` or `amin`.
///
/// [`Reduce::Sum`] is an error, as in PyTorch (use [`index_add`]). With `include_self = false` the
/// referenced slices are reduced over the source slices only; slices no index refers to keep their
/// value. `mean` counts `self` as one contributor when it is included and floors for integers;
/// `amax`/`amin` propagate NaN. Bool works only for arrays of two or more dims with `include_self =
/// true` and not for `mean` (PyTorch's dtype gaps, reported as
/// [`ErrorKind::InvalidArgument`]). Atomic: on error `self` is unchanged.
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// let mut x = array![[1, 2], [3, 4], [5, 6]];
/// let src = array![[10, -1], [20, -2], [30, -3]];
/// gather::ops::index::index_reduce_inplace(&mut x, 0, &array![0, 0, 2], &src, Reduce::Prod, true).unwrap();
/// assert_eq!(x, array![[200, 4], [3, 4], [150, -18]]);
/// ```
pub fn index_reduce_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
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
    SS: Data<Elem = T>,
    DS: Dimension,
{
    reduce_dyn(
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        source.view().into_dyn(),
        reduce,
        include_self,
    )
}

/// Out-of-place [`index_reduce_inplace`].
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// let x = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
/// let src = array![[10.0, -1.0], [20.0, -2.0], [30.0, -3.0]];
/// let out = gather::ops::index::index_reduce(&x, 0, &array![0, 0, 2], &src, Reduce::Amax, false).unwrap();
/// assert_eq!(out, array![[20.0, -1.0], [3.0, 4.0], [30.0, -3.0]]);
/// ```
pub fn index_reduce<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
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
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let mut out = try_to_owned("index_reduce", input)?;
    index_reduce_inplace(&mut out, dim, index, source, reduce, include_self)?;
    Ok(out)
}

/// Method forms of the out-of-place index ops, on any ndarray array.
///
/// ```
/// use gather::prelude::*;
/// use gather::ops::index::IndexExt;
/// use ndarray::array;
/// let x = array![[1, 2, 3], [4, 5, 6]];
/// assert_eq!(x.index_select(1, &array![2, 0])?, array![[3, 1], [6, 4]]);
/// assert_eq!(x.index_add(0, &array![1], &array![[10, 10, 10]], 1)?, array![[1, 2, 3], [14, 15, 16]]);
/// assert_eq!(x.index_copy(0, &array![0], &array![[7, 8, 9]])?, array![[7, 8, 9], [4, 5, 6]]);
/// assert_eq!(x.index_fill(1, &array![-1], 0)?, array![[1, 2, 0], [4, 5, 0]]);
/// assert_eq!(x.index_reduce(1, &array![0, 0], &array![[5, 0], [3, 9]], Reduce::Amax, true)?, array![[5, 2, 3], [9, 5, 6]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait IndexExt<T: Element, D: Dimension> {
    /// See [`index_select()`].
    fn index_select<I, SI, DI>(&self, dim: isize, index: &ArrayBase<SI, DI>) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;

    /// See [`index_add()`].
    fn index_add<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`index_copy()`].
    fn index_copy<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`index_fill()`].
    fn index_fill<I, SI, DI>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;

    /// See [`index_reduce()`].
    fn index_reduce<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> IndexExt<T, D> for ArrayBase<S, D> {
    fn index_select<I, SI, DI>(&self, dim: isize, index: &ArrayBase<SI, DI>) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        index_select(self, dim, index)
    }

    fn index_add<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_add(self, dim, index, source, alpha)
    }

    fn index_copy<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_copy(self, dim, index, source)
    }

    fn index_fill<I, SI, DI>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        index_fill(self, dim, index, value)
    }

    fn index_reduce<I, SI, DI, SS, DS>(
        &self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<Array<T, D>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_reduce(self, dim, index, source, reduce, include_self)
    }
}

/// Method forms of the in-place index ops, on any mutable ndarray array (owned arrays and
/// `view_mut()`s alike).
///
/// ```
/// use gather::ops::index::IndexInplaceExt;
/// use gather::Reduce;
/// use ndarray::{array, s};
/// let mut x = ndarray::Array2::<f64>::zeros((3, 4));
/// x.index_fill_inplace(0, &array![1], 1.0)?;
/// x.index_add_inplace(1, &array![3, 3], &ndarray::Array2::ones((3, 2)), 0.5)?;
/// x.index_copy_inplace(0, &array![2], &array![[7.0, 7.0, 7.0, 7.0]])?;
/// // A strided view works too: every other column of row 1, reduced with amin.
/// x.slice_mut(s![.., ..;2]).index_reduce_inplace(0, &array![1], &array![[-1.0, 5.0]], Reduce::Amin, true)?;
/// assert_eq!(x, array![[0., 0., 0., 1.], [-1., 1., 1., 2.], [7., 7., 7., 7.]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait IndexInplaceExt<T: Element> {
    /// See [`index_add_inplace()`].
    fn index_add_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`index_copy_inplace()`].
    fn index_copy_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`index_fill_inplace()`].
    fn index_fill_inplace<I, SI, DI>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;

    /// See [`index_reduce_inplace()`].
    fn index_reduce_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;
}

impl<T: Element, S: DataMut<Elem = T>, D: Dimension> IndexInplaceExt<T> for ArrayBase<S, D> {
    fn index_add_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        alpha: T,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_add_inplace(self, dim, index, source, alpha)
    }

    fn index_copy_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_copy_inplace(self, dim, index, source)
    }

    fn index_fill_inplace<I, SI, DI>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        value: T,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        index_fill_inplace(self, dim, index, value)
    }

    fn index_reduce_inplace<I, SI, DI, SS, DS>(
        &mut self,
        dim: isize,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        reduce: Reduce,
        include_self: bool,
    ) -> Result<()>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        index_reduce_inplace(self, dim, index, source, reduce, include_self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use ndarray::{Array1, Array2, Array3, ArrayD, AxisDescription, Slice, arr0, array};

    // ---- helpers: a tiny deterministic generator, layouts, exact comparison --------------------

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Every other element, backwards on even axes: a view with negative and non-unit strides.
    fn step(ax: AxisDescription) -> Slice {
        Slice::new(0, None, if ax.axis.index() % 2 == 0 { -2 } else { 2 })
    }

    /// A storage array whose `slice_each_axis(step)` view holds the values of `a`.
    fn strided_storage<T: Element>(a: &ArrayD<T>, fill: T) -> ArrayD<T> {
        let big: Vec<usize> = a.shape().iter().map(|&s| 2 * s).collect();
        let mut storage = ArrayD::from_elem(big, fill);
        storage.slice_each_axis_mut(step).assign(a);
        storage
    }

    fn random_array<T: Element>(
        rng: &mut Rng,
        shape: &[usize],
        value: &impl Fn(&mut Rng) -> T,
    ) -> ArrayD<T> {
        let n: usize = shape.iter().product();
        ArrayD::from_shape_vec(shape, (0..n).map(|_| value(rng)).collect()).unwrap()
    }

    fn assert_same<T: Element, S: Data<Elem = T>, S2: Data<Elem = T>>(
        actual: &ArrayBase<S, IxDyn>,
        expected: &ArrayBase<S2, IxDyn>,
        what: &str,
    ) {
        assert_eq!(actual.shape(), expected.shape(), "{what}: shape");
        for (c, e) in expected.indexed_iter() {
            let a = &actual[&c];
            let same = (a.is_nan() && e.is_nan()) || a.to_f64().to_bits() == e.to_f64().to_bits();
            assert!(same, "{what}: at {:?} got {a:?}, expected {e:?}", c.slice());
        }
    }

    /// A random problem: self's shape, the dim, and an index (values valid for that dim).
    fn random_problem(rng: &mut Rng) -> (Vec<usize>, usize, Vec<i64>) {
        let rank = 1 + rng.below(4);
        let mut shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        if rng.below(8) == 0 {
            let a = rng.below(rank);
            shape[a] = 0;
        }
        let d = rng.below(rank);
        let n = if shape[d] == 0 { 0 } else { rng.below(6) };
        let idx = (0..n).map(|_| rng.below(shape[d]) as i64).collect();
        (shape, d, idx)
    }

    // ---- plain reference implementations -------------------------------------------------------

    fn target(c: &[usize], d: usize, idx: &[i64]) -> IxDyn {
        let mut t = c.to_vec();
        let v = idx[c[d]];
        t[d] = v as usize;
        IxDyn(&t)
    }

    fn ref_select<T: Element>(x: &ArrayD<T>, d: usize, idx: &[i64]) -> ArrayD<T> {
        let mut shape = x.shape().to_vec();
        shape[d] = idx.len();
        ArrayD::from_shape_fn(shape, |c| x[target(c.slice(), d, idx)])
    }

    fn ref_add<T: Element>(
        x: &ArrayD<T>,
        d: usize,
        idx: &[i64],
        src: &ArrayD<T>,
        alpha: T,
    ) -> ArrayD<T> {
        let mut acc = x.map(|v| v.to_acc());
        for (c, s) in src.indexed_iter() {
            let t = target(c.slice(), d, idx);
            acc[&t] = T::acc_add(acc[&t], T::acc_mul(alpha.to_acc(), s.to_acc()));
        }
        acc.map(|&a| T::from_acc(a))
    }

    fn ref_copy<T: Element>(x: &ArrayD<T>, d: usize, idx: &[i64], src: &ArrayD<T>) -> ArrayD<T> {
        let mut out = x.clone();
        for (c, s) in src.indexed_iter() {
            out[target(c.slice(), d, idx)] = *s;
        }
        out
    }

    fn ref_fill<T: Element>(x: &ArrayD<T>, d: usize, idx: &[i64], value: T) -> ArrayD<T> {
        let size = x.shape()[d] as i64;
        let rows: Vec<usize> = idx
            .iter()
            .map(|&i| if i < 0 { i + size } else { i } as usize)
            .collect();
        let mut out = x.clone();
        for (c, v) in out.indexed_iter_mut() {
            if rows.contains(&c[d]) {
                *v = value;
            }
        }
        out
    }

    fn ref_reduce<T: Element>(
        x: &ArrayD<T>,
        d: usize,
        idx: &[i64],
        src: &ArrayD<T>,
        r: Reduce,
        incl: bool,
    ) -> ArrayD<T> {
        let mut acc = x.map(|v| v.to_acc());
        let mut count = ArrayD::<usize>::zeros(x.raw_dim());
        for (c, s) in src.indexed_iter() {
            let t = target(c.slice(), d, idx);
            if count[&t] == 0 && !incl {
                acc[&t] = match r {
                    Reduce::Prod => T::acc_one(),
                    Reduce::Amax => T::max_identity().to_acc(),
                    Reduce::Amin => T::min_identity().to_acc(),
                    _ => T::acc_zero(),
                };
            }
            count[&t] += 1;
            let (a, s) = (acc[&t], s.to_acc());
            acc[&t] = match r {
                Reduce::Prod => T::acc_mul(a, s),
                Reduce::Amax => T::acc_max(a, s),
                Reduce::Amin => T::acc_min(a, s),
                _ => T::acc_add(a, s),
            };
        }
        ArrayD::from_shape_fn(x.raw_dim(), |c| {
            let (a, n) = (acc[&c], count[&c]);
            T::from_acc(if r == Reduce::Mean && n > 0 {
                T::acc_div_count(a, n + incl as usize)
            } else {
                a
            })
        })
    }

    // ---- random comparisons against the references, on every layout ----------------------------

    /// Runs `check(x_view_variant, source_variant, index_variant)` over the layouts: standard,
    /// strided with negative strides, and (for the read-only operands) stride-0 broadcasts.
    fn select_case<T: Element>(seed: u64, value: impl Fn(&mut Rng) -> T) {
        let mut rng = Rng(seed);
        for round in 0..60 {
            let (shape, d, idx) = random_problem(&mut rng);
            let x = random_array(&mut rng, &shape, &value);
            let expected = ref_select(&x, d, &idx);
            let index = Array1::from(idx.clone());
            // Standard layout, and a negative-dim spelling.
            let neg = d as isize - shape.len() as isize;
            assert_same(
                &index_select(&x, neg, &index).unwrap(),
                &expected,
                "standard",
            );
            // Strided input with negative strides, reversed (strided) index.
            let storage = strided_storage(&x, value(&mut rng));
            let xv = storage.slice_each_axis(step);
            let rev: Array1<i64> = index.iter().rev().copied().collect();
            let iv = rev.slice(ndarray::s![..;-1]);
            assert_same(
                &index_select(&xv, d as isize, &iv).unwrap(),
                &expected,
                "strided",
            );
            // A broadcast input: one row repeated along axis 0.
            if !x.is_empty() && d != 0 {
                let row = x.index_axis(Axis(0), 0).insert_axis(Axis(0)).to_owned();
                let b = row.broadcast(x.raw_dim()).unwrap();
                assert_same(
                    &index_select(&b, d as isize, &index).unwrap(),
                    &ref_select(&b.to_owned(), d, &idx),
                    "broadcast",
                );
            }
            let _ = round;
        }
    }

    #[test]
    fn index_select_matches_reference_on_strided_and_broadcast_layouts() {
        select_case::<f64>(7, |r| r.below(1000) as f64 - 500.0);
        select_case::<i8>(8, |r| r.next() as i8);
        select_case::<bool>(9, |r| r.below(2) == 1);
        select_case::<bf16>(10, |r| bf16::from_f32(r.below(64) as f32 / 8.0));
    }

    /// The write ops on random problems: `run(dst_view, index, source)` must equal
    /// `reference(dst, index, source)`, for a standard dst and a strided dst view (whose
    /// surroundings must stay untouched), and standard, strided and broadcast sources.
    fn write_case<T: Element>(
        seed: u64,
        value: impl Fn(&mut Rng) -> T,
        run: impl Fn(
            &mut ArrayViewMut<'_, T, IxDyn>,
            usize,
            &ArrayView<'_, i64, IxDyn>,
            &ArrayView<'_, T, IxDyn>,
        ) -> Result<()>,
        reference: impl Fn(&ArrayD<T>, usize, &[i64], &ArrayD<T>) -> ArrayD<T>,
    ) {
        let mut rng = Rng(seed);
        for _ in 0..60 {
            let (shape, d, idx) = random_problem(&mut rng);
            let x = random_array(&mut rng, &shape, &value);
            let mut src_shape = shape.clone();
            src_shape[d] = idx.len();
            let src = random_array(&mut rng, &src_shape, &value);
            let index = Array1::from(idx.clone()).into_dyn();
            let expected = reference(&x, d, &idx, &src);

            let mut out = x.clone();
            run(&mut out.view_mut(), d, &index.view(), &src.view()).unwrap();
            assert_same(&out, &expected, "standard");

            let fill = value(&mut rng);
            let mut storage = strided_storage(&x, fill);
            let src_storage = strided_storage(&src, value(&mut rng));
            run(
                &mut storage.slice_each_axis_mut(step),
                d,
                &index.view(),
                &src_storage.slice_each_axis(step),
            )
            .unwrap();
            assert_same(&storage.slice_each_axis(step), &expected, "strided");
            let mut outside = storage.clone();
            outside.slice_each_axis_mut(step).fill(fill);
            assert!(
                outside
                    .iter()
                    .all(|v| *v == fill || (v.is_nan() && fill.is_nan())),
                "wrote outside the view"
            );

            // A broadcast source: its first slice along a non-dim axis repeated.
            if let Some(a) = (0..shape.len()).find(|&a| a != d && src_shape[a] > 1) {
                let base = src.index_axis(Axis(a), 0).insert_axis(Axis(a)).to_owned();
                let b = base.broadcast(src.raw_dim()).unwrap();
                let mut out = x.clone();
                run(&mut out.view_mut(), d, &index.view(), &b).unwrap();
                assert_same(
                    &out,
                    &reference(&x, d, &idx, &b.to_owned()),
                    "broadcast source",
                );
            }
        }
    }

    #[test]
    fn index_add_matches_reference_on_every_layout() {
        for alpha in [1.0, -0.5, 2.5] {
            write_case::<f64>(
                11,
                |r| r.below(2000) as f64 / 7.0 - 100.0,
                |x, d, i, s| index_add_inplace(x, d as isize, i, s, alpha),
                |x, d, i, s| ref_add(x, d, i, s, alpha),
            );
        }
        write_case::<i32>(
            12,
            |r| r.next() as i32,
            |x, d, i, s| index_add_inplace(x, d as isize, i, s, -3),
            |x, d, i, s| ref_add(x, d, i, s, -3),
        );
        write_case::<u8>(
            13,
            |r| r.next() as u8,
            |x, d, i, s| index_add_inplace(x, d as isize, i, s, 7),
            |x, d, i, s| ref_add(x, d, i, s, 7),
        );
        write_case::<bool>(
            14,
            |r| r.below(3) == 0,
            |x, d, i, s| index_add_inplace(x, d as isize, i, s, true),
            |x, d, i, s| ref_add(x, d, i, s, true),
        );
        let h = f16::from_f32(0.5);
        write_case::<f16>(
            15,
            |r| f16::from_f32(r.below(4000) as f32 / 3.0),
            |x, d, i, s| index_add_inplace(x, d as isize, i, s, h),
            |x, d, i, s| ref_add(x, d, i, s, h),
        );
    }

    #[test]
    fn index_copy_matches_reference_on_every_layout() {
        write_case::<f32>(
            21,
            |r| r.below(100) as f32,
            |x, d, i, s| index_copy_inplace(x, d as isize, i, s),
            ref_copy,
        );
        write_case::<u64>(
            22,
            |r| r.next(),
            |x, d, i, s| index_copy_inplace(x, d as isize, i, s),
            ref_copy,
        );
    }

    #[test]
    fn index_fill_matches_reference_with_wrapped_indices_on_every_layout() {
        let mut rng = Rng(31);
        for _ in 0..60 {
            let (shape, d, mut idx) = random_problem(&mut rng);
            let size = shape[d] as i64;
            for v in idx.iter_mut() {
                if rng.below(2) == 0 {
                    *v -= size; // the same slice, counted from the end
                }
            }
            let x = random_array(&mut rng, &shape, &|r: &mut Rng| r.below(50) as i16);
            let expected = ref_fill(&x, d, &idx, -7);
            let index = Array1::from(idx.clone());
            assert_same(
                &index_fill(&x, d as isize, &index, -7).unwrap(),
                &expected,
                "out of place",
            );
            let mut storage = strided_storage(&x, 99);
            index_fill_inplace(
                &mut storage.slice_each_axis_mut(step),
                d as isize,
                &index,
                -7,
            )
            .unwrap();
            assert_same(&storage.slice_each_axis(step), &expected, "strided");
            storage.slice_each_axis_mut(step).fill(99);
            assert!(storage.iter().all(|&v| v == 99), "wrote outside the view");
        }
    }

    #[test]
    fn index_reduce_matches_reference_on_every_layout() {
        for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            for incl in [true, false] {
                let nan_sometimes = |g: &mut Rng| {
                    if g.below(15) == 0 {
                        f32::NAN
                    } else {
                        g.below(9) as f32 / 4.0 - 1.0
                    }
                };
                write_case::<f32>(
                    41,
                    nan_sometimes,
                    |x, d, i, s| index_reduce_inplace(x, d as isize, i, s, r, incl),
                    |x, d, i, s| ref_reduce(x, d, i, s, r, incl),
                );
                write_case::<i64>(
                    42,
                    |g| g.below(21) as i64 - 10,
                    |x, d, i, s| index_reduce_inplace(x, d as isize, i, s, r, incl),
                    |x, d, i, s| ref_reduce(x, d, i, s, r, incl),
                );
                write_case::<f16>(
                    43,
                    |g| f16::from_f32(g.below(9) as f32 / 4.0 - 1.0),
                    |x, d, i, s| index_reduce_inplace(x, d as isize, i, s, r, incl),
                    |x, d, i, s| ref_reduce(x, d, i, s, r, incl),
                );
            }
        }
    }

    // ---- PyTorch's worked examples and the quirks the conformance cases pin down ---------------

    #[test]
    fn large_transposed_sources_give_what_their_row_major_copies_give() {
        // Sources past SOURCE_COPY_MIN_BYTES, transposed (copied to row-major order first) and
        // broadcast along rows (never copied), along both dims: bitwise the results of the same
        // values in a standard-layout source.
        let (r, c) = (
            crate::kernels::sized(512, 16),
            crate::kernels::sized(600, 24),
        );
        let x = Array2::from_shape_fn((r, c), |(i, j)| ((i * 31 + j * 7) % 97) as f32 * 0.25 - 9.0);
        let backing =
            Array2::from_shape_fn((c, r), |(j, i)| ((i * 13 + j * 5) % 89) as f32 * 0.5 - 20.0);
        let row = Array2::from_shape_fn((1, c), |(_, j)| j as f32 * 0.125 - 3.0);
        for dim in [0usize, 1] {
            let n = [r, c][dim];
            let index = Array1::from_shape_fn(n, |k| ((k * 7919) % n) as i64);
            let sources = [backing.t(), row.broadcast((r, c)).unwrap()];
            for src in sources {
                let standard = src.as_standard_layout().into_owned();
                assert!(
                    src.len() * 4 >= SOURCE_COPY_MIN_BYTES || cfg!(miri),
                    "a source large enough to be copied"
                );
                let d = dim as isize;
                for alpha in [1.0f32, 2.5] {
                    assert_eq!(
                        index_add(&x, d, &index, &src, alpha).unwrap(),
                        index_add(&x, d, &index, &standard, alpha).unwrap()
                    );
                }
                assert_eq!(
                    index_copy(&x, d, &index, &src).unwrap(),
                    index_copy(&x, d, &index, &standard).unwrap()
                );
                for reduce in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
                    for include_self in [true, false] {
                        assert_eq!(
                            index_reduce(&x, d, &index, &src, reduce, include_self).unwrap(),
                            index_reduce(&x, d, &index, &standard, reduce, include_self).unwrap(),
                            "{reduce:?} {include_self} dim {dim}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn index_select_of_a_0d_index_keeps_the_axis() {
        // torch: arange(3.).index_select(0, tensor(1)) -> tensor([1.])
        assert_eq!(
            index_select(&array![0.0, 1.0, 2.0], 0, &arr0(1)).unwrap(),
            array![1.0]
        );
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as i32);
        assert_eq!(
            index_select(&x, -2, &arr0(2u8)).unwrap(),
            array![[8, 9, 10, 11]]
        );
    }

    #[test]
    fn index_select_of_a_0d_input_takes_exactly_one_index_and_stays_0d() {
        let x = arr0(3.5f32);
        assert_eq!(index_select(&x, 0, &array![0]).unwrap(), arr0(3.5));
        assert_eq!(index_select(&x, -1, &arr0(0)).unwrap(), arr0(3.5));
        let e = index_select(&x, 0, &array![0, 0]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.to_string().contains("only 1 value, got 2"), "{e}");
        assert_eq!(
            index_select(&x, 0, &array![1]).unwrap_err().kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            index_select(&x, 1, &array![0]).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
    }

    #[test]
    fn index_select_rejects_negative_and_too_large_values_with_their_position() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = index_select(&x, 1, &array![0, 2, -1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(
            (e.index_value(), e.coordinate()),
            (Some(-1), Some(&[2usize][..]))
        );
        assert!(e.hint().unwrap().contains("negative"), "{e}");
        let e = index_select(&x, 1, &array![0, 4]).unwrap_err();
        assert_eq!(
            (e.index_value(), e.coordinate()),
            (Some(4), Some(&[1usize][..]))
        );
        assert!(
            e.to_string()
                .contains("index 4 is out of bounds for dimension 1 with size 4"),
            "{e}"
        );
    }

    #[test]
    fn index_select_rank_two_index_is_a_rank_error_with_a_hint() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = index_select(&x, 1, &array![[1, 0]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(
            e.to_string().contains("Index is supposed to be a vector"),
            "{e}"
        );
        assert!(e.hint().unwrap().contains("gather"), "{e}");
    }

    #[test]
    fn index_select_empty_index_and_empty_input() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (i + j) as u8);
        assert_eq!(
            index_select(&x, 0, &Array1::<i64>::zeros(0))
                .unwrap()
                .shape(),
            &[0, 4]
        );
        // An empty input still has its index checked; selecting from an empty dim is out of bounds.
        let empty = Array2::<u8>::zeros((0, 3));
        assert_eq!(
            index_select(&empty, 1, &array![2, 0]).unwrap().shape(),
            &[0, 2]
        );
        assert_eq!(
            index_select(&empty, 1, &array![3]).unwrap_err().kind(),
            ErrorKind::IndexOutOfBounds
        );
        let e = index_select(&empty, 0, &array![0]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.hint().unwrap().contains("empty"), "{e}");
        assert_eq!(
            index_select(&empty, 0, &Array1::<i32>::zeros(0))
                .unwrap()
                .shape(),
            &[0, 3]
        );
    }

    #[test]
    fn index_add_appendix_b_example() {
        // torch: zeros(3,4).index_add_(0, [0,0,2], ones(3,4), alpha=2)
        let out = index_add(
            &Array2::<f32>::zeros((3, 4)),
            0,
            &array![0, 0, 2],
            &Array2::ones((3, 4)),
            2.0,
        )
        .unwrap();
        assert_eq!(
            out,
            array![[4., 4., 4., 4.], [0., 0., 0., 0.], [2., 2., 2., 2.]]
        );
    }

    #[test]
    fn index_add_half_accumulates_in_f32() {
        let src = Array1::from_elem(3000, f16::ONE);
        let out = index_add(
            &Array1::<f16>::zeros(2),
            0,
            &Array1::<i64>::zeros(3000),
            &src,
            f16::ONE,
        )
        .unwrap();
        assert_eq!(out, array![f16::from_f32(3000.0), f16::ZERO]);
        let src = Array2::from_elem((3000, 2), bf16::ONE);
        let out = index_add(
            &Array2::<bf16>::zeros((1, 2)),
            0,
            &Array1::<u16>::zeros(3000),
            &src,
            bf16::ONE,
        )
        .unwrap();
        assert_eq!(out[[0, 1]], bf16::from_f32(3008.0));
    }

    #[test]
    fn index_add_integers_wrap_and_bool_is_or() {
        let out = index_add(&array![100i8, 0], 0, &array![0, 0], &array![50i8, 50], 2).unwrap();
        assert_eq!(out, array![100i8.wrapping_add(100).wrapping_add(100), 0]);
        let out = index_add(
            &array![false, false, true],
            0,
            &array![0, 1, 1],
            &array![true, false, false],
            true,
        )
        .unwrap();
        assert_eq!(out, array![true, false, true]);
        let out = index_add(&array![false, false], 0, &array![0], &array![true], false).unwrap();
        assert_eq!(out, array![false, false]);
    }

    #[test]
    fn index_add_zero_d_rules_follow_pytorch() {
        // 0-d self with a 0-d source and one index.
        assert_eq!(
            index_add(&arr0(1.0), 0, &array![0], &arr0(2.0), 2.5).unwrap(),
            arr0(6.0)
        );
        // 1-d self, 0-d index, one-element source.
        assert_eq!(
            index_add(&array![1, 2, 3, 4], 0, &arr0(2), &array![10], -2).unwrap(),
            array![1, 2, -17, 4]
        );
        // A 0-d source does not fit a 1-d self, nor a 1-d source a 0-d self.
        let e = index_add(&array![1.0, 2.0], 0, &arr0(1), &arr0(5.0), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.hint().unwrap().contains("insert_axis"), "{e}");
        assert_eq!(
            index_add(&arr0(1.0), 0, &array![0], &array![5.0], 1.0)
                .unwrap_err()
                .kind(),
            ErrorKind::ShapeMismatch
        );
    }

    #[test]
    fn index_add_source_checks_in_pytorch_order() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = index_add(&x, 0, &array![0, 1], &Array3::<f32>::ones((2, 4, 1)), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        let e = index_add(&x, 0, &array![0, 1], &Array2::<f32>::ones((2, 3)), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.hint().unwrap().contains("[2, 4]"), "{e}");
        let e = index_add(&x, 0, &array![0, 1], &Array2::<f32>::ones((1, 4)), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.to_string()
                .contains("Number of indices (2) should be equal to source.size(dim): (1)"),
            "{e}"
        );
        let e = index_add(&x, 1, &array![0], &array![1.0f32], 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert_eq!(
            index_add(&x, -3, &array![0], &x, 1.0).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        let e = index_add(&x, 0, &array![[0]], &Array2::<f32>::ones((1, 4)), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(
            e.to_string().contains("with type: Int and size: [1, 1]"),
            "{e}"
        );
        let e = index_add(&x, 0, &array![3], &Array2::<f32>::ones((1, 4)), 1.0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }

    #[test]
    fn index_copy_duplicates_keep_the_last_write() {
        let out = index_copy(
            &Array1::<i32>::zeros(4),
            0,
            &array![1, 1, 1, 1],
            &array![7, 8, 9, 2],
        )
        .unwrap();
        assert_eq!(out, array![0, 2, 0, 0]);
        let src = Array2::from_shape_fn((2, 5), |(i, j)| (10 * i + j) as i64);
        let out = index_copy(
            &Array2::<i64>::zeros((2, 3)),
            1,
            &array![2, 0, 2, 0, 2],
            &src,
        )
        .unwrap();
        assert_eq!(out, array![[3, 0, 4], [13, 0, 14]]);
    }

    #[test]
    fn index_copy_scalar_source_rules_follow_pytorch() {
        // A 0-d source fills the one slice of a 1-d self, and a 1-element source a 0-d self.
        assert_eq!(
            index_copy(&array![1, 2, 3], 0, &arr0(2), &arr0(9)).unwrap(),
            array![1, 2, 9]
        );
        assert_eq!(
            index_copy(&arr0(1.0), 0, &array![0], &array![4.0]).unwrap(),
            arr0(4.0)
        );
        assert_eq!(
            index_copy(&arr0(1.0), 0, &array![0], &arr0(4.0)).unwrap(),
            arr0(4.0)
        );
        let e = index_copy(&array![1, 2, 3], 0, &array![0, 1], &arr0(9)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.to_string().contains("When source is scalar"), "{e}");
        let e = index_copy(&Array2::<i32>::zeros((2, 2)), 0, &array![0], &arr0(9)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = index_copy(
            &Array2::<i32>::zeros((2, 2)),
            0,
            &array![0],
            &Array3::<i32>::zeros((1, 2, 1)),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        let e = index_copy(
            &Array2::<i32>::zeros((3, 4)),
            0,
            &array![0, 1],
            &Array2::<i32>::zeros((2, 3)),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.to_string().contains(
                "Destination slice shape: [4] at dimension 0 and source slice shape: [3]"
            ),
            "{e}"
        );
        let e = index_copy(
            &Array2::<i32>::zeros((3, 4)),
            0,
            &array![0, 1],
            &Array2::<i32>::zeros((3, 4)),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = index_copy(
            &Array2::<i32>::zeros((3, 4)),
            0,
            &array![0, 3],
            &Array2::<i32>::zeros((2, 4)),
        )
        .unwrap_err();
        assert_eq!(
            (e.kind(), e.index_value()),
            (ErrorKind::IndexOutOfBounds, Some(3))
        );
    }

    #[test]
    fn index_fill_appendix_b_example_wraps_negative_indices() {
        // torch: zeros(3,4).index_fill_(1, [0,-1], 5.)
        let out = index_fill(&Array2::<f64>::zeros((3, 4)), 1, &array![0, -1], 5.0).unwrap();
        assert_eq!(
            out,
            array![[5., 0., 0., 5.], [5., 0., 0., 5.], [5., 0., 0., 5.]]
        );
        let e = index_fill(&Array2::<f64>::zeros((3, 4)), 1, &array![-5], 5.0).unwrap_err();
        assert_eq!(
            (e.kind(), e.index_value()),
            (ErrorKind::IndexOutOfBounds, Some(-5))
        );
        assert!(e.hint().unwrap().contains("-4..4"), "{e}");
        assert_eq!(
            index_fill(&Array2::<f64>::zeros((3, 4)), 1, &array![4], 5.0)
                .unwrap_err()
                .kind(),
            ErrorKind::IndexOutOfBounds
        );
        // 0-d self: a one-element vector.
        assert_eq!(index_fill(&arr0(1u8), 0, &array![-1], 7).unwrap(), arr0(7));
        assert_eq!(
            index_fill(&array![1, 2], 0, &array![[0]], 7)
                .unwrap_err()
                .kind(),
            ErrorKind::RankMismatch
        );
        assert_eq!(
            index_fill(&array![1, 2], 1, &array![0], 7)
                .unwrap_err()
                .kind(),
            ErrorKind::DimOutOfRange
        );
    }

    #[test]
    fn index_reduce_section_11_results_table() {
        let x = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
        let idx = array![0, 0, 2];
        let src = array![[10.0, -1.0], [20.0, -2.0], [30.0, -3.0]];
        let r = |red, incl| index_reduce(&x, 0, &idx, &src, red, incl).unwrap();
        assert_eq!(
            r(Reduce::Prod, true),
            array![[200.0, 4.0], [3.0, 4.0], [150.0, -18.0]]
        );
        assert_eq!(
            r(Reduce::Prod, false),
            array![[200.0, 2.0], [3.0, 4.0], [30.0, -3.0]]
        );
        assert_eq!(
            r(Reduce::Mean, true),
            array![[31.0 / 3.0, -1.0 / 3.0], [3.0, 4.0], [17.5, 1.5]]
        );
        assert_eq!(
            r(Reduce::Mean, false),
            array![[15.0, -1.5], [3.0, 4.0], [30.0, -3.0]]
        );
        assert_eq!(
            r(Reduce::Amax, true),
            array![[20.0, 2.0], [3.0, 4.0], [30.0, 6.0]]
        );
        assert_eq!(
            r(Reduce::Amax, false),
            array![[20.0, -1.0], [3.0, 4.0], [30.0, -3.0]]
        );
        assert_eq!(
            r(Reduce::Amin, true),
            array![[1.0, -2.0], [3.0, 4.0], [5.0, -3.0]]
        );
        assert_eq!(
            r(Reduce::Amin, false),
            array![[10.0, -2.0], [3.0, 4.0], [30.0, -3.0]]
        );
    }

    #[test]
    fn index_reduce_integer_mean_floors_and_nan_propagates() {
        assert_eq!(
            index_reduce(
                &array![0i64],
                0,
                &array![0, 0],
                &array![-3i64, -4],
                Reduce::Mean,
                false
            )
            .unwrap(),
            array![-4]
        );
        assert_eq!(
            index_reduce(
                &array![1i8, 5],
                0,
                &array![0, 0],
                &array![-3i8, -4],
                Reduce::Mean,
                true
            )
            .unwrap(),
            array![-2, 5]
        );
        let out = index_reduce(
            &array![0.0f32, f32::NAN],
            0,
            &array![0, 1],
            &array![f32::NAN, 1.0],
            Reduce::Amax,
            true,
        )
        .unwrap();
        assert!(out[0].is_nan() && out[1].is_nan());
        // include_self=false drops a NaN already in self.
        let out = index_reduce(
            &array![f32::NAN],
            0,
            &array![0],
            &array![1.0f32],
            Reduce::Amin,
            false,
        )
        .unwrap();
        assert_eq!(out, array![1.0]);
    }

    #[test]
    fn index_reduce_rejects_sum_and_follows_pytorchs_bool_gaps() {
        let e =
            index_reduce(&array![1.0], 0, &array![0], &array![1.0], Reduce::Sum, true).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.hint().unwrap().contains("index_add"), "{e}");
        assert!(parse_index_reduce("max").is_err() && parse_index_reduce("amin").is_ok());
        let b2 = array![[true, false], [true, true]];
        let src = array![[false, false]];
        assert_eq!(
            index_reduce(&b2, 0, &array![1], &src, Reduce::Amax, true).unwrap(),
            b2
        );
        assert_eq!(
            index_reduce(&b2, 0, &array![1], &src, Reduce::Prod, true).unwrap(),
            array![[true, false], [false, false]]
        );
        for (r, incl) in [
            (Reduce::Amax, false),
            (Reduce::Mean, true),
            (Reduce::Amin, false),
        ] {
            let e = index_reduce(&b2, 0, &array![1], &src, r, incl).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{r:?} {incl}");
        }
        let e = index_reduce(
            &array![true, false],
            0,
            &array![1],
            &array![true],
            Reduce::Amax,
            true,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        // The dtype gap is reported before a bad index, as in PyTorch.
        let e = index_reduce(
            &array![true, false],
            0,
            &array![9],
            &array![true],
            Reduce::Amax,
            true,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn failed_inplace_calls_change_nothing() {
        let fresh = || Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let bad = array![0, 2, 1, 3]; // the last value is out of bounds, after valid ones
        let src = Array2::<f32>::ones((4, 4));
        let mut x = fresh();
        assert_eq!(
            index_add_inplace(&mut x, 0, &bad, &src, 1.0)
                .unwrap_err()
                .kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            index_copy_inplace(&mut x, 0, &bad, &src)
                .unwrap_err()
                .kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            index_fill_inplace(&mut x, 0, &array![0, -4], 9.0)
                .unwrap_err()
                .kind(),
            ErrorKind::IndexOutOfBounds
        );
        for r in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            for incl in [true, false] {
                let e = index_reduce_inplace(&mut x, 0, &bad, &src, r, incl).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
            }
        }
        assert_eq!(
            index_add_inplace(&mut x, 0, &array![0, 1], &src, 1.0)
                .unwrap_err()
                .kind(),
            ErrorKind::ShapeMismatch
        );
        assert_eq!(x, fresh());
        // The same through a strided view, and for f16 (which reduces through an f32 buffer).
        let mut h = Array2::from_shape_fn((3, 4), |(i, j)| f16::from_f32((i * j) as f32));
        let before = h.clone();
        let hsrc = Array2::from_elem((4, 2), f16::ONE);
        let mut view = h.slice_mut(ndarray::s![.., ..;-2]);
        assert!(view.index_add_inplace(0, &bad, &hsrc, f16::ONE).is_err());
        assert!(
            view.index_reduce_inplace(0, &bad, &hsrc, Reduce::Mean, false)
                .is_err()
        );
        assert_eq!(h, before);
    }

    #[test]
    fn out_of_place_results_are_standard_layout_for_any_input_layout() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as i32);
        let rev = x.slice(ndarray::s![..;-1, ..]);
        for out in [
            index_fill(&rev, 1, &array![0], 0).unwrap(),
            index_add(&rev.t(), 0, &array![0], &array![[1, 1, 1]], 1)
                .unwrap()
                .reversed_axes()
                .as_standard_layout()
                .into_owned(),
            index_select(&rev, 0, &array![0, 1, 2]).unwrap(),
        ] {
            assert!(out.is_standard_layout());
        }
        assert!(
            index_fill(&rev, 1, &array![0], 0)
                .unwrap()
                .is_standard_layout()
        );
        assert!(
            index_copy(&rev.t(), 1, &array![0], &array![[7], [7], [7], [7]])
                .unwrap()
                .is_standard_layout()
        );
    }

    #[test]
    fn methods_mirror_the_free_functions() -> Result<()> {
        let x = array![[1.0f64, 2.0], [3.0, 4.0]];
        assert_eq!(
            x.index_select(0, &array![1])?,
            index_select(&x, 0, &array![1])?
        );
        assert_eq!(
            x.view().index_fill(-1, &array![0], 0.0)?,
            array![[0.0, 2.0], [0.0, 4.0]]
        );
        let mut y = x.clone();
        y.index_copy_inplace(1, &arr0(0), &array![[8.0], [9.0]])?;
        assert_eq!(y, array![[8.0, 2.0], [9.0, 4.0]]);
        Ok(())
    }
}
