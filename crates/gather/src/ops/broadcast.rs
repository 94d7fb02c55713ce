//! Broadcasting `gather` and `scatter` (opt-in): the index and src broadcast against the input on
//! every axis but `dim`, NumPy-style, without being materialised. PyTorch asks for
//! `x.gather(dim, index.expand(...))` (pytorch/pytorch#9407); here a size-1 axis simply repeats.
//!
//! ```text
//! gather_broadcast(input, dim=1, index)        out[b][k][d] = input[b][index[b][k][0]][d]
//!
//!  input [2, 3, 2]       index [2, 2, 1]      out [2, 2, 2]
//!  b=0 ┌────┬────┐       ┌───┐                ┌────┬────┐
//!   n=0│ 00 │ 01 │       │ 2 │ ─────────────→ │ 20 │ 21 │   the one index value of [0][0]
//!   n=1│ 10 │ 11 │       │ 0 │ ─────────────→ │ 00 │ 01 │   is used for every d (size 1 repeats)
//!   n=2│ 20 │ 21 │       ├───┤                ├────┼────┤
//!  b=1 ├────┼────┤       │ 1 │ ─────────────→ │ 40 │ 41 │
//!   n=0│ 30 │ 31 │       │ 1 │ ─────────────→ │ 40 │ 41 │
//!   n=1│ 40 │ 41 │       └───┘                └────┴────┘
//!   n=2│ 50 │ 51 │
//!      └────┴────┘
//!
//! crate::Options::new().broadcast(true).scatter_add(self, dim=0, index, src)     self[index[e][0]][d] += src[e][d]
//!
//!  self [3, 2] (zeros)    index [4, 1]   src [4, 2]       result
//!  ┌───┬───┐              ┌───┐          ┌───┬───┐        ┌───┬───┐
//!  │ 0 │ 0 │              │ 2 │          │ 1 │ 2 │        │ 3 │ 4 │  ← rows 1 and 3 of src
//!  │ 0 │ 0 │      ←       │ 0 │          │ 3 │ 4 │   →    │ 0 │ 0 │
//!  │ 0 │ 0 │              │ 2 │          │ 5 │ 6 │        │ 6 │ 8 │  ← rows 0 and 2 of src
//!  └───┴───┘              │ 0 │          │ 0 │ 0 │        └───┴───┘
//!                         └───┘          └───┴───┘
//!                 whole rows move: the GNN "edge → node" sum without expand
//! ```
//!
//! ## The rules
//!
//! All arrays have the same number of dims (a 0-d array counts as 1-d). `dim` is the axis the index
//! values select along.
//!
//! **gather_broadcast(input, dim, index)**: on every axis `d != dim`, `input.shape[d]` and
//! `index.shape[d]` are equal, or one of them is 1. The output has the broadcast size there
//! (the larger one) and `index.shape[dim]` on `dim`; `input.shape[dim]` is unconstrained.
//! `out[p] = input[p with p[dim] := index[p]]`, where a size-1 axis of `input` or `index` is read at
//! coordinate 0. This is exactly `torch.gather(input.expand(Ein), dim, index.expand(Eout))` with
//! `Eout` the output shape and `Ein` the same with `input.shape[dim]` on `dim`.
//!
//! **scatter_*_broadcast(self, dim, index, src)**: `self` is never broadcast (it is written). The
//! extent of the scatter is `E = self.shape` with `E[dim] = index.shape[dim]`; then
//! - on every axis `d != dim`, `index.shape[d]` is `self.shape[d]` or 1;
//! - on every axis `d` (`dim` included), `src.shape[d]` is `E[d]` or 1;
//! - the result is `torch.scatter_*(self, dim, index.expand(E), src.expand(E))`: for every `p` in
//!   `E`, `self[p with p[dim] := index[p]] (op)= src[p]`, size-1 axes read at coordinate 0.
//!
//! So `[N, 1]` row ids with `src [N, D]` scatter whole rows into `self [M, D]` along dim 0, and a
//! `src` of all size-1 axes writes one value everywhere the index points. Unlike
//! [`scatter()`](crate::scatter()), a size-1 index axis covers the whole of `self` rather than its
//! first element, and neither the index nor `src` may be *smaller or larger* than their partner
//! without being 1: to write a part of `self`, scatter into a slice of it (`self.slice_mut(..)`),
//! and to read a part of `src`, slice it. That makes the rule the same as `expand`'s, with nothing
//! implicit.
//!
//! Index values are in `0..input.shape[dim]` (gather) or `0..self.shape[dim]` (scatter); negative
//! values are errors, and only the values that the broadcast reads are checked (an index whose
//! broadcast extent is empty reads none). Every check runs before the first write, so a failed
//! in-place call leaves `self` unchanged. Duplicates behave as in the non-broadcasting ops: updates
//! to one element happen in index order, `scatter` keeps the last write, and `f16`/`bf16` sums
//! accumulate in `f32`.
//!
//! ## Speed
//!
//! The broadcast axes are stride-0 views handed to the same kernels as `gather`/`scatter`, so the
//! fast paths apply: an index of size 1 on the trailing axes copies whole rows, and `[N, 1]` row
//! ids take the row-index fast path of `scatter_add`/`scatter_reduce`. Memory is the output only.

use ndarray::{ArrayBase, ArrayD, ArrayView, ArrayViewMut, Data, DataMut, Dimension, IxDyn};

use super::gather::gather_mapped;
use super::scatter::{Mode, Reduce, scatter_into};
use super::view_1d_if_scalar;
use crate::dims::normalize_dim;
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem};

/// The error for two arrays of different ranks.
fn rank_error(op: &str, what: &str, a: &[usize], idx: &[usize], partner: &str) -> Error {
    let msg = format!(
        "{op}: {partner} must have the same number of dims as {what} ({partner} has {} dims {}, {what} has {} dims {})",
        idx.len(),
        fmt_shape(idx),
        a.len(),
        fmt_shape(a)
    );
    let hint = if idx.len() < a.len() {
        let mut call = format!("{partner}.view()");
        let mut shape = idx.to_vec();
        for k in idx.len()..a.len() {
            call.push_str(&format!(".insert_axis(Axis({k}))"));
            shape.push(1);
        }
        format!(
            "{op} broadcasts size-1 axes, so add the missing axes with size 1 where {partner} should repeat, e.g. `{call}` gives {} (no copy)",
            fmt_shape(&shape)
        )
    } else {
        format!(
            "{partner} has more dims than {what}: remove size-1 axes (`{partner}.index_axis(Axis(a), 0)`) or give {what} more axes (`insert_axis`)"
        )
    };
    Error::rank(msg).with_hint(hint)
}

/// The shapes of a broadcasting gather of `input` (shape `x`, 0-d seen as 1-d) by an index of shape
/// `idx` (same rank) along `dim`: the output shape and the shape the input is viewed as (the output
/// shape with `x[dim]` on `dim`).
pub(crate) fn gather_shapes(
    op: &str,
    x: &[usize],
    idx: &[usize],
    dim: usize,
) -> Result<(Vec<usize>, Vec<usize>)> {
    if x.len() != idx.len() {
        return Err(rank_error(op, "input", x, idx, "index"));
    }
    let mut out = idx.to_vec();
    for d in (0..x.len()).filter(|&d| d != dim) {
        let (a, b) = (x[d], idx[d]);
        out[d] = if a == b || a == 1 {
            b
        } else if b == 1 {
            a
        } else {
            return Err(Error::shape(format!(
                "{op}: index has size {b} on axis {d} but input has {a}; sizes must be equal or 1 to broadcast (input {}, index {}, dim {dim})",
                fmt_shape(x),
                fmt_shape(idx)
            ))
            .with_hint(format!(
                "on every axis but dim {dim}, input and index broadcast NumPy-style: give one of them size 1 on axis {d} to repeat it (`insert_axis`, or `slice_axis(Axis({d}), Slice::from(..1))`), or slice the larger to the other's size; along dim {dim} the sizes are independent"
            )));
        };
    }
    let mut xs = out.clone();
    xs[dim] = x[dim];
    Ok((out, xs))
}

/// The extent `E` of a broadcasting scatter into `dst` (shapes with 0-d seen as 1-d, all of one
/// rank after the rank checks): `dst` with `index[dim]` on `dim`. Checks that the index and src
/// expand to it.
pub(crate) fn scatter_extent(
    op: &str,
    dst: &[usize],
    idx: &[usize],
    src: Option<&[usize]>,
    dim: usize,
) -> Result<Vec<usize>> {
    if idx.len() != dst.len() {
        return Err(rank_error(op, "self", dst, idx, "index"));
    }
    if let Some(s) = src {
        if s.len() != idx.len() {
            return Err(rank_error(op, "self", dst, s, "src"));
        }
    }
    let mut e = dst.to_vec();
    e[dim] = idx[dim];
    for d in (0..dst.len()).filter(|&d| d != dim) {
        if idx[d] != 1 && idx[d] != dst[d] {
            return Err(Error::shape(format!(
                "{op}: index has size {} on axis {d} but self has {}; sizes must be equal or 1 to broadcast (self {}, index {}, dim {dim})",
                idx[d],
                dst[d],
                fmt_shape(dst),
                fmt_shape(idx)
            ))
            .with_hint(format!(
                "self is written in place, so it never broadcasts: give the index self's size {} on axis {d}, or size 1 to use each index value along the whole axis; to write only part of self, scatter into a slice of it (`self.slice_mut(s![..])`)",
                dst[d]
            )));
        }
    }
    if let Some(s) = src {
        for d in 0..e.len() {
            if s[d] != 1 && s[d] != e[d] {
                let (msg, hint) = if d == dim {
                    (
                        format!(
                            "{op}: src has size {} on axis {d} (the scatter dim) but index has {}; sizes must be equal or 1 to broadcast (src {}, index {})",
                            s[d],
                            e[d],
                            fmt_shape(s),
                            fmt_shape(idx)
                        ),
                        format!(
                            "along dim {dim} each src element pairs with one index position: slice src to the index's {} (`slice_axis(Axis({dim}), Slice::from(..{}))`), or give it size 1 to scatter one value per lane",
                            e[d], e[d]
                        ),
                    )
                } else {
                    (
                        format!(
                            "{op}: src has size {} on axis {d} but self has {}; sizes must be equal or 1 to broadcast (self {}, src {}, dim {dim})",
                            s[d],
                            e[d],
                            fmt_shape(dst),
                            fmt_shape(s)
                        ),
                        format!(
                            "on every axis but dim {dim}, src has self's size ({}) or 1 (one value repeated along the axis); slice src or scatter into a slice of self",
                            e[d]
                        ),
                    )
                };
                return Err(Error::shape(msg).with_hint(hint));
            }
        }
    }
    Ok(e)
}

/// `shape` with a 0-d shape seen as `[1]`.
pub(crate) fn nonempty(shape: &[usize]) -> Vec<usize> {
    if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    }
}

/// The error for a view that does not broadcast although the checks passed (not reachable).
fn broadcast_failed(op: &str, from: &[usize], to: &[usize]) -> Error {
    Error::shape(format!(
        "{op}: internal error: {} does not broadcast to {}",
        fmt_shape(from),
        fmt_shape(to)
    ))
}

/// The core of the broadcasting scatters, on dynamic-rank views.
pub(crate) fn scatter_broadcast_into<T: Element, I: IndexElem>(
    op: &str,
    dst: ArrayViewMut<'_, T, IxDyn>,
    dim: isize,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    mode: Mode,
) -> Result<()> {
    let d = normalize_dim(op, dim, dst.ndim())?;
    let ds = nonempty(dst.shape());
    let idx = view_1d_if_scalar(&index);
    let s = view_1d_if_scalar(&src);
    let e = scatter_extent(op, &ds, idx.shape(), Some(s.shape()), d)?;
    if e.contains(&0) {
        // Nothing to write (what an empty index does in scatter_into). The broadcast views need
        // not exist: an empty extent's other sizes can overflow what ndarray can index.
        return super::scatter::check_dtype_supported::<T>(op, mode);
    }
    let ib = idx
        .broadcast(IxDyn(&e))
        .ok_or_else(|| broadcast_failed(op, idx.shape(), &e))?;
    let sb = s
        .broadcast(IxDyn(&e))
        .ok_or_else(|| broadcast_failed(op, s.shape(), &e))?;
    scatter_into(op, dst, d as isize, ib, sb, false, mode, Bounds::Strict)
}

/// `torch.gather(input.expand(..), dim, index.expand(..))` without the expands: on every axis
/// but `dim`, `input` and `index` broadcast (sizes equal, or one of them 1); the output has the
/// broadcast shape there and `index.shape[dim]` on `dim`. See the [module docs](self) for the rule.
///
/// ```text
///  input [B, N, D]   index [B, K, 1]   →  out [B, K, D]     (top-k patches, no expand)
///  input [1, N, D]   index [B, K, D]   →  out [B, K, D]     (one table shared by the batch)
/// ```
///
/// ```
/// use ndarray::{array, Array3, Axis};
/// // Top-k patches: [B, N, D] with [B, K] ids, viewed [B, K, 1]: whole rows of D move.
/// let patches = Array3::from_shape_fn((2, 4, 3), |(b, n, d)| (100 * b + 10 * n + d) as f32);
/// let keep = array![[3i64, 1], [0, 2]];
/// let picked = gather::Options::new().broadcast(true).gather(&patches, 1, &keep.view().insert_axis(Axis(2)))?;
/// assert_eq!(picked.shape(), &[2, 2, 3]);
/// assert_eq!(picked[[0, 0, 2]], 32.0); // patches[0][3][2]
/// assert_eq!(picked[[1, 1, 0]], 120.0); // patches[1][2][0]
///
/// // A table shared by the batch: input [1, 3] broadcast over the index's 2 rows.
/// let table = array![[10, 20, 30]];
/// let out = gather::Options::new().broadcast(true).gather(&table, 1, &array![[2i64, 0], [1, 1]])?;
/// assert_eq!(out, array![[30, 10], [20, 20]]);
///
/// // Sizes that neither match nor are 1 are an error that names the axis.
/// let e = gather::Options::new().broadcast(true).gather(&patches, 1, &ndarray::Array3::<i64>::zeros((3, 2, 1))).unwrap_err();
/// assert!(e.to_string().contains("index has size 3 on axis 0 but input has 2"));
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn gather_broadcast<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    const OP: &str = "gather_broadcast";
    let d = normalize_dim(OP, dim, input.ndim())?;
    let x = view_1d_if_scalar(input);
    let idx = view_1d_if_scalar(index);
    let (out_shape, x_shape) = gather_shapes(OP, x.shape(), idx.shape(), d)?;
    if super::output_len(OP, &out_shape)? == 0 {
        // Nothing to read. The input's broadcast view need not exist: with the input's size on
        // `dim` where the output has 0, its shape can overflow what ndarray can index.
        let out = ArrayD::from_shape_vec(IxDyn(&out_shape), Vec::new());
        return Ok(out.expect("an empty shape that output_len accepts"));
    }
    let xb = x.broadcast(IxDyn(&x_shape)).ok_or_else(|| {
        Error::invalid(format!(
            "{OP}: the input would be viewed as {} (its size {} on dim {d}, the output's sizes elsewhere), more elements than ndarray can index (isize::MAX)",
            fmt_shape(&x_shape),
            x_shape[d]
        ))
        .with_hint(format!(
            "gather from the slice of the input along dim {d} that the index reaches, or split the call along an axis where the input has size 1"
        ))
    })?;
    let ib = idx
        .broadcast(IxDyn(&out_shape))
        .ok_or_else(|| broadcast_failed(OP, idx.shape(), &out_shape))?;
    let out = gather_mapped(OP, &xb, d as isize, &ib, Bounds::Strict)?;
    if index.ndim() == 0 {
        // A 0-d index (with a 1-d or 0-d input) gives a 0-d output, as in gather.
        return Ok(out.into_shape_with_order(IxDyn(&[])).expect("one element"));
    }
    Ok(out)
}

/// `self.scatter_(dim, index.expand(E), src.expand(E))` without the expands, where
/// `E = self.shape` with `index.shape[dim]` on `dim`: `index` is `self`'s size or 1 on every axis
/// but `dim`, and `src` is `E`'s size or 1 on every axis. With duplicates the last write in index
/// order wins. See the [module docs](self) for the rule.
///
/// ```
/// use ndarray::array;
/// // Row ids [3, 1] write whole rows of src [3, 2] into self [4, 2] along dim 0.
/// let mut x = ndarray::Array2::<i32>::zeros((4, 2));
/// gather::Options::new().broadcast(true).scatter_inplace(&mut x, 0, &array![[3i64], [0], [3]], &array![[1, 2], [3, 4], [5, 6]])?;
/// assert_eq!(x, array![[3, 4], [0, 0], [0, 0], [5, 6]]); // row 3: the last write wins
///
/// // src of size 1 everywhere: one value written wherever the index points.
/// gather::Options::new().broadcast(true).scatter_inplace(&mut x, 1, &array![[0i64], [1], [0], [1]], &array![[9]])?;
/// assert_eq!(x, array![[9, 4], [0, 9], [9, 0], [5, 9]]);
///
/// // A failed call changes nothing.
/// assert!(gather::Options::new().broadcast(true).scatter_inplace(&mut x, 0, &array![[0i64], [4]], &array![[7, 7]]).is_err());
/// assert_eq!(x, array![[9, 4], [0, 9], [9, 0], [5, 9]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn scatter_broadcast_inplace<T, S, D, I, SI, DI, SS, DS>(
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
    scatter_broadcast_into(
        "scatter_broadcast",
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        src.view().into_dyn(),
        Mode::Set,
    )
}

/// `self.scatter_add_(dim, index.expand(E), src.expand(E))` without the expands (`E` as in
/// [`scatter_broadcast_inplace`]): adds in index order (integers wrap, bool is logical or,
/// `f16`/`bf16` accumulate in `f32`). Row ids `[N, 1]` with `src [N, D]` take the row-index fast path.
///
/// ```
/// use ndarray::array;
/// // The GNN "edge → node" sum: messages [4, 2], target node of each edge [4, 1].
/// let mut nodes = ndarray::Array2::<f32>::zeros((3, 2));
/// let msgs = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0], [0.5, 0.5]];
/// gather::Options::new().broadcast(true).scatter_add_inplace(&mut nodes, 0, &array![[2i64], [0], [2], [0]], &msgs)?;
/// assert_eq!(nodes, array![[3.5, 4.5], [0.0, 0.0], [6.0, 8.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn scatter_add_broadcast_inplace<T, S, D, I, SI, DI, SS, DS>(
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
    scatter_broadcast_into(
        "scatter_add_broadcast",
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        src.view().into_dyn(),
        Mode::Reduce(Reduce::Sum, true),
    )
}

/// `self.scatter_reduce_(dim, index.expand(E), src.expand(E), reduce, include_self)` without the
/// expands (`E` as in [`scatter_broadcast_inplace`]); the reductions behave as in
/// [`scatter_reduce_inplace`](crate::scatter_reduce_inplace) (`Mean` on bool is an error).
///
/// ```
/// use gather::Reduce;
/// use ndarray::array;
/// // Per-node max over incoming edge features, row ids [4, 1].
/// let mut nodes = ndarray::Array2::<f32>::zeros((2, 2));
/// let feats = array![[1.0f32, -2.0], [3.0, -4.0], [-5.0, 6.0], [0.5, 0.5]];
/// let ids = array![[1i64], [1], [0], [1]];
/// gather::Options::new().broadcast(true).scatter_reduce_inplace(&mut nodes, 0, &ids, &feats, Reduce::Amax, false)?;
/// assert_eq!(nodes, array![[-5.0, 6.0], [3.0, 0.5]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub(crate) fn scatter_reduce_broadcast_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    src: &ArrayBase<SS, DS>,
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
    scatter_broadcast_into(
        "scatter_reduce_broadcast",
        dst.view_mut().into_dyn(),
        dim,
        index.view().into_dyn(),
        src.view().into_dyn(),
        Mode::Reduce(reduce, include_self),
    )
}

/// `src` as the scatter's source: a value (`value`) becomes an array of one element with `ndim`
/// axes of size 1, which the broadcasting rules repeat everywhere.
pub(crate) fn value_src<T>(
    src: ArrayView<'_, T, IxDyn>,
    value: bool,
    ndim: usize,
) -> ArrayView<'_, T, IxDyn> {
    if !value {
        return src;
    }
    src.into_shape_with_order(IxDyn(&vec![1; ndim.max(1)]))
        .expect("one value has one element")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{Array2, Array3, Axis, arr0, array};

    #[test]
    fn zero_d_arrays_act_as_one_element_vectors() {
        assert_eq!(
            gather_broadcast(&arr0(5), 0, &array![0i64, 0]).unwrap(),
            array![5, 5].into_dyn()
        );
        assert_eq!(
            gather_broadcast(&array![5, 6], 0, &arr0(1i64)).unwrap(),
            arr0(6).into_dyn()
        );
        let out = crate::Options::new()
            .broadcast(true)
            .scatter_add(&arr0(1.0f64), 0, &arr0(0i64), &arr0(2.0f64))
            .unwrap();
        assert_eq!(out, arr0(3.0));
    }

    #[test]
    fn huge_broadcast_shapes_give_an_empty_output_or_a_typed_error_never_an_internal_one() {
        // Found by the gather_family fuzz target: input [1, 3], index [2^62, 0] along dim 1 is an
        // empty [2^62, 0] output, but viewing the input as [2^62, 3] overflows isize, and the
        // call failed with an "internal error".
        let x = array![[1.0f32, 2.0, 3.0]];
        let zero = ndarray::Array2::<i64>::zeros((1, 0));
        let idx = zero.broadcast((1usize << 62, 0)).unwrap();
        let out = gather_broadcast(&x, 1, &idx).unwrap();
        assert_eq!(out.shape(), &[1 << 62, 0]);
        // A non-empty output whose input view cannot exist: a typed error with the sizes.
        let one = array![[0i64]];
        let idx = one.broadcast((1usize << 40, 1)).unwrap();
        let wide = ndarray::Array2::<u8>::zeros((1, 1 << 24));
        let e = gather_broadcast(&wide, 1, &idx).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(!e.to_string().contains("internal"), "{e}");
        assert!(e.to_string().contains("[1099511627776, 16777216]"), "{e}");
        // The scatters: an empty extent [2^62, 0, 3] (index [2^62, 0, 1] into [1, 0, 3]) writes
        // nothing and leaves the destination as it was.
        let mut dst = ndarray::Array3::<f32>::zeros((1, 0, 3));
        let zero = ndarray::Array3::<i64>::zeros((1, 0, 1));
        let idx3 = zero.broadcast((1usize << 62, 0, 1)).unwrap();
        let src = ndarray::Array3::<f32>::zeros((1, 1, 1));
        scatter_add_broadcast_inplace(&mut dst, 0, &idx3, &src).unwrap();
        scatter_broadcast_inplace(&mut dst, 0, &idx3, &src).unwrap();
        assert_eq!(dst.shape(), &[1, 0, 3]);
        // An empty output that ndarray cannot represent (index [2^62, 0, 0, 1] against input
        // [1, 0, 0, 5] is [2^62, 0, 0, 5], whose nonzero lengths multiply past isize::MAX; found
        // by the fuzz target) is an error that says so.
        let x4 = ndarray::Array4::<f32>::zeros((1, 0, 0, 5));
        let zero4 = ndarray::Array4::<i64>::zeros((1, 0, 0, 1));
        let idx4 = zero4.broadcast((1usize << 62, 0, 0, 1)).unwrap();
        let e = gather_broadcast(&x4, 1, &idx4).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("it is empty, but ndarray"), "{e}");
        // An output too large to allocate is the usual 'cannot allocate' error.
        let idx = one.broadcast((1usize << 62, 1)).unwrap();
        let e = gather_broadcast(&array![[1.0f32]], 1, &idx).unwrap_err();
        assert!(e.to_string().contains("allocate"), "{e}");
    }

    #[test]
    fn the_module_diagrams_hold() {
        let input = Array3::from_shape_fn((2, 3, 2), |(b, n, d)| (30 * b + 10 * n + d) as i32);
        let index = array![[[2i64], [0]], [[1], [1]]];
        let out = gather_broadcast(&input, 1, &index).unwrap();
        assert_eq!(
            out,
            array![[[20, 21], [0, 1]], [[40, 41], [40, 41]]].into_dyn()
        );

        let index = array![[2i64], [0], [2], [0]];
        let src = array![[1, 2], [3, 4], [5, 6], [0, 0]];
        let out = crate::Options::new()
            .broadcast(true)
            .scatter_add(&Array2::<i32>::zeros((3, 2)), 0, &index, &src)
            .unwrap();
        assert_eq!(out, array![[3, 4], [0, 0], [6, 8]]);
    }

    #[test]
    fn row_ids_broadcast_to_the_whole_row_unlike_scatter() {
        let dst = Array2::<i32>::zeros((2, 3));
        let ids = array![[1i64]];
        let src = array![[1, 2, 3]];
        // scatter reads the leading block: only column 0.
        assert_eq!(
            crate::scatter_add(&dst, 0, &ids, &src).unwrap(),
            array![[0, 0, 0], [1, 0, 0]]
        );
        // the broadcasting form writes the whole row.
        assert_eq!(
            crate::Options::new()
                .broadcast(true)
                .scatter_add(&dst, 0, &ids, &src)
                .unwrap(),
            array![[0, 0, 0], [1, 2, 3]]
        );
    }

    #[test]
    fn errors_name_the_axis_the_sizes_and_the_fix() {
        let x = Array3::<f32>::zeros((5, 4, 2));
        let e = gather_broadcast(&x, 1, &Array3::<i64>::zeros((3, 2, 1))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.to_string()
                .contains("index has size 3 on axis 0 but input has 5; sizes must be equal or 1"),
            "{e}"
        );
        assert!(e.hint().unwrap().contains("size 1"));
        let e = gather_broadcast(&x, 1, &array![[0i64, 1]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(e.hint().unwrap().contains("insert_axis(Axis(2))"), "{e:?}");
        let e = gather_broadcast(&x, 3, &Array3::<i64>::zeros((1, 1, 1))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);

        let mut d = Array2::<f32>::zeros((4, 3));
        let e = scatter_add_broadcast_inplace(&mut d, 0, &array![[0i64, 1]], &array![[1.0f32]])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("index has size 2 on axis 1 but self has 3"),
            "{e}"
        );
        let e = scatter_add_broadcast_inplace(
            &mut d,
            0,
            &array![[0i64], [1]],
            &Array2::<f32>::ones((3, 3)),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("src has size 3 on axis 0 (the scatter dim)"),
            "{e}"
        );
        let e =
            scatter_add_broadcast_inplace(&mut d, 0, &array![[0i64]], &Array2::<f32>::ones((1, 2)))
                .unwrap_err();
        assert!(
            e.to_string()
                .contains("src has size 2 on axis 1 but self has 3"),
            "{e}"
        );
        let e = scatter_broadcast_inplace(
            &mut d,
            0,
            &array![[0i64]].insert_axis(Axis(2)),
            &array![[1.0f32]],
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert_eq!(d, Array2::<f32>::zeros((4, 3)));
    }
}
