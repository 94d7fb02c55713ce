//! `masked_select` and `masked_scatter`: read or write the positions where a boolean mask is true,
//! in row-major order.
//!
//! ```text
//! masked_select(input, mask)             out = [input[p] for p in row-major order if mask[p]]
//! masked_scatter(self, mask, source)     self[p] = source.flatten()[k++] for p in row-major order if mask[p]
//!
//!  input / self          mask                masked_select → [2, 4, 5]
//!  ┌───┬───┬───┐         ┌───┬───┬───┐
//!  │ 1 │ 2 │ 3 │         │ F │ T │ F │       masked_scatter with source [7, 8, 9, 10]:
//!  ├───┼───┼───┤         ├───┼───┼───┤       ┌───┬───┬───┐
//!  │ 4 │ 5 │ 6 │         │ T │ T │ F │       │ 1 │ 7 │ 3 │   source is consumed in order;
//!  └───┴───┴───┘         └───┴───┴───┘       ├───┼───┼───┤   10 is left over (allowed)
//!                                            │ 8 │ 9 │ 6 │
//!                                            └───┴───┴───┘
//! ```
//!
//! The rules, as PyTorch's:
//! - the mask is a `bool` array (PyTorch rejects other mask dtypes; so does the dynamic layer);
//! - `masked_select` and the out-of-place `masked_scatter` broadcast input and mask against each
//!   other in both directions (as stride-0 views, never copied); the order is the logical
//!   row-major order of the broadcast shape. `masked_select` returns a 1-d array;
//!   `masked_scatter` returns an array of the broadcast shape;
//! - `masked_scatter_inplace` needs the mask to broadcast to self's shape;
//! - `source` is read in its own row-major order, whatever its shape; it needs at least as many
//!   elements as the mask has true positions (extra elements are ignored).
//!
//! The in-place form checks everything (mask shape, number of source elements) before its first
//! write: a failed call leaves self exactly as it was (PyTorch detects a short source mid-write).
//! Large calls run in parallel over pieces of the array, with the same result for any number of
//! threads.

use ndarray::{Array, Array1, ArrayBase, ArrayD, ArrayView, ArrayViewMut, Axis, Data, DataMut, Dimension, IxDyn};
use rayon::prelude::*;

use crate::dims::broadcast_shapes;
use crate::element::Element;
use crate::error::{fmt_shape, Error, Result};
use crate::plan::GRAIN;

/// A view that can be cut in two along an axis (for splitting work in row-major order).
trait Piece: Sized {
    fn dims(&self) -> &[usize];
    fn cut(self, axis: usize, at: usize) -> (Self, Self);
}

impl<A> Piece for ArrayView<'_, A, IxDyn> {
    fn dims(&self) -> &[usize] {
        self.shape()
    }
    fn cut(self, axis: usize, at: usize) -> (Self, Self) {
        self.split_at(Axis(axis), at)
    }
}

impl<A> Piece for ArrayViewMut<'_, A, IxDyn> {
    fn dims(&self) -> &[usize] {
        self.shape()
    }
    fn cut(self, axis: usize, at: usize) -> (Self, Self) {
        self.split_at(Axis(axis), at)
    }
}

/// Cuts two views of the same shape into pieces of at most about `leaf` elements. The pieces come
/// out in row-major order: each cut splits the outermost axis longer than 1, so every element of
/// the first half precedes every element of the second in the row-major order of the whole.
fn pieces<P: Piece, Q: Piece>(p: P, q: Q, leaf: usize, out: &mut Vec<(P, Q)>) {
    let n: usize = p.dims().iter().product();
    match p.dims().iter().position(|&len| len > 1) {
        Some(axis) if n > leaf => {
            let at = p.dims()[axis] / 2;
            let (p1, p2) = p.cut(axis, at);
            let (q1, q2) = q.cut(axis, at);
            pieces(p1, q1, leaf, out);
            pieces(p2, q2, leaf, out);
        }
        _ => out.push((p, q)),
    }
}

/// Whether a call over `n` elements should run in parallel, and the piece size if so.
fn parallel_leaf(n: usize) -> Option<usize> {
    let threads = rayon::current_num_threads();
    (n >= 2 * GRAIN && threads > 1).then(|| (n / (threads * 8)).max(GRAIN))
}

fn count_true(mask: &ArrayView<'_, bool, IxDyn>) -> usize {
    match mask.as_slice_memory_order() {
        Some(s) => s.iter().filter(|&&m| m).count(),
        None => mask.iter().filter(|&&m| m).count(),
    }
}

fn select_serial<T: Copy>(x: &ArrayView<'_, T, IxDyn>, m: &ArrayView<'_, bool, IxDyn>, out: &mut Vec<T>) {
    match (x.as_slice(), m.as_slice()) {
        (Some(xs), Some(ms)) => out.extend(xs.iter().zip(ms).filter(|(_, &m)| m).map(|(&v, _)| v)),
        _ => out.extend(x.iter().zip(m.iter()).filter(|(_, &m)| m).map(|(&v, _)| v)),
    }
}

/// `torch.masked_select(input, mask)`: the elements of `input` where `mask` is true, as a 1-d
/// array in the row-major order of the broadcast shape of input and mask.
///
/// ```
/// use gather::ops::masked::masked_select;
/// use ndarray::array;
/// let x = array![[1, 2, 3], [4, 5, 6]];
/// let m = array![[false, true, false], [true, true, false]];
/// assert_eq!(masked_select(&x, &m)?, array![2, 4, 5]);
///
/// // The mask broadcasts: one row of it selects the same columns of every row.
/// assert_eq!(masked_select(&x, &array![true, false, true])?, array![1, 3, 4, 6]);
/// // And the input broadcasts too: [3] against a [2, 3] mask.
/// assert_eq!(masked_select(&array![7, 8, 9], &m)?, array![8, 7, 8]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn masked_select<T, S, D, SM, DM>(input: &ArrayBase<S, D>, mask: &ArrayBase<SM, DM>) -> Result<Array1<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
{
    let shape = broadcast_shapes(input.shape(), mask.shape()).map_err(|e| broadcast_hint("masked_select", e))?;
    let x = input.view().into_dyn();
    let m = mask.view().into_dyn();
    let (xb, mb) = match (x.broadcast(IxDyn(&shape)), m.broadcast(IxDyn(&shape))) {
        (Some(xb), Some(mb)) => (xb, mb),
        _ => return Err(internal_broadcast("masked_select", input.shape(), mask.shape())),
    };
    let Some(leaf) = parallel_leaf(xb.len()) else {
        let mut out = Vec::new();
        select_serial(&xb, &mb, &mut out);
        return Ok(Array1::from_vec(out));
    };
    let mut parts = Vec::new();
    pieces(xb, mb, leaf, &mut parts);
    let counts: Vec<usize> = parts.par_iter().map(|(_, m)| count_true(m)).collect();
    let mut out = vec![T::default(); counts.iter().sum()];
    let mut slots: Vec<&mut [T]> = Vec::with_capacity(parts.len());
    let mut rest = &mut out[..];
    for &c in &counts {
        let (head, tail) = rest.split_at_mut(c);
        slots.push(head);
        rest = tail;
    }
    parts.into_par_iter().zip(slots).for_each(|((x, m), slot)| {
        let it = x.iter().zip(m.iter()).filter(|(_, &m)| m).map(|(&v, _)| v);
        slot.iter_mut().zip(it).for_each(|(o, v)| *o = v);
    });
    Ok(Array1::from_vec(out))
}

/// `self.masked_scatter_(mask, source)`: writes `source`'s elements, in their row-major order, to
/// the positions of `dst` where `mask` (broadcast to `dst`'s shape) is true, in row-major order.
///
/// `source` needs at least as many elements as there are true positions; extra ones are ignored.
/// Every check runs before the first write.
///
/// ```
/// use gather::ops::masked::masked_scatter_inplace;
/// use ndarray::{array, Array2};
/// // zeros(3, 4).masked_scatter_(x > 5, arange(100, 110)) from PyTorch's docs.
/// let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
/// let mut z = Array2::<f32>::zeros((3, 4));
/// let src = ndarray::Array::range(100.0, 110.0, 1.0);
/// masked_scatter_inplace(&mut z, &x.mapv(|v| v > 5.0), &src)?;
/// assert_eq!(z, array![[0., 0., 0., 0.], [0., 0., 100., 101.], [102., 103., 104., 105.]]);
///
/// // Too few source elements: an error, and z is unchanged.
/// let e = masked_scatter_inplace(&mut z, &x.mapv(|v| v > 1.0), &src).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::ShapeMismatch);
/// assert_eq!(z[[1, 2]], 100.0);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn masked_scatter_inplace<T, S, D, SM, DM, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    mask: &ArrayBase<SM, DM>,
    source: &ArrayBase<SS, DS>,
) -> Result<()>
where
    T: Element,
    S: DataMut<Elem = T>,
    D: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    let m = mask.view().into_dyn();
    let Some(mb) = m.broadcast(IxDyn(dst.shape())) else {
        return Err(inplace_broadcast_error(dst.shape(), mask.shape()));
    };
    if dst.is_empty() {
        return Ok(());
    }
    let src = source.view().into_dyn();
    let self_shape = dst.shape().to_vec();
    let short = |ones: usize| {
        Error::shape(format!(
            "masked_scatter_: Number of elements of source < number of ones in mask (source has {} elements, shape {}; the mask has {ones} true positions over self {})",
            src.len(),
            fmt_shape(src.shape()),
            fmt_shape(&self_shape)
        ))
        .with_hint("source is read in row-major order, one element per true position of the mask: pass a source with at least that many elements")
    };
    let d = dst.view_mut().into_dyn();
    match (parallel_leaf(d.len()), src.as_slice()) {
        (Some(leaf), Some(sv)) => {
            let mut parts = Vec::new();
            pieces(d, mb, leaf, &mut parts);
            let counts: Vec<usize> = parts.par_iter().map(|(_, m)| count_true(m)).collect();
            let ones: usize = counts.iter().sum();
            if ones > sv.len() {
                return Err(short(ones));
            }
            let mut starts = Vec::with_capacity(counts.len());
            let mut acc = 0;
            for &c in &counts {
                starts.push(acc);
                acc += c;
            }
            parts.into_par_iter().zip(starts).for_each(|((mut d, m), start)| {
                let mut s = sv[start..].iter();
                for (o, &on) in d.iter_mut().zip(m.iter()) {
                    if on {
                        if let Some(&v) = s.next() {
                            *o = v;
                        }
                    }
                }
            });
        }
        _ => {
            let ones = count_true(&mb);
            if ones > src.len() {
                return Err(short(ones));
            }
            let mut d = d;
            let mut s = src.iter();
            for (o, &on) in d.iter_mut().zip(mb.iter()) {
                if on {
                    if let Some(&v) = s.next() {
                        *o = v;
                    }
                }
            }
        }
    }
    Ok(())
}

/// `torch.masked_scatter(input, mask, source)`: input and mask broadcast against each other; the
/// result has the broadcast shape (standard layout) and is [`masked_scatter_inplace`] applied to
/// the broadcast input.
///
/// ```
/// use gather::ops::masked::masked_scatter;
/// use ndarray::array;
/// // input [3] and mask [2, 3] broadcast to [2, 3].
/// let out = masked_scatter(&array![1, 2, 3], &array![[true, false, false], [false, true, true]], &array![7, 8, 9])?;
/// assert_eq!(out, array![[7, 2, 3], [1, 8, 9]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn masked_scatter<T, S, D, SM, DM, SS, DS>(
    input: &ArrayBase<S, D>,
    mask: &ArrayBase<SM, DM>,
    source: &ArrayBase<SS, DS>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
    SS: Data<Elem = T>,
    DS: Dimension,
{
    // PyTorch broadcasts (mask, self), so "tensor a" in the message is the mask.
    let shape = broadcast_shapes(mask.shape(), input.shape()).map_err(|e| broadcast_hint("masked_scatter", e))?;
    let x = input.view().into_dyn();
    let Some(xb) = x.broadcast(IxDyn(&shape)) else {
        return Err(internal_broadcast("masked_scatter", input.shape(), mask.shape()));
    };
    let mut out: ArrayD<T> = Array::from_shape_vec(IxDyn(&shape), xb.iter().copied().collect()).expect("broadcast shape");
    masked_scatter_inplace(&mut out, mask, source)?;
    Ok(out)
}

fn broadcast_hint(op: &str, e: Error) -> Error {
    e.with_hint(format!(
        "{op} broadcasts input and mask: aligned at their last dims, each pair of sizes must be equal or one of them 1"
    ))
}

fn internal_broadcast(op: &str, a: &[usize], b: &[usize]) -> Error {
    Error::shape(format!("{op}: cannot broadcast input {} and mask {}", fmt_shape(a), fmt_shape(b)))
}

fn inplace_broadcast_error(self_shape: &[usize], mask_shape: &[usize]) -> Error {
    let msg = if mask_shape.len() > self_shape.len() {
        format!(
            "masked_scatter_: the mask {} has more dimensions ({}) than self {} ({}); in place, the mask must broadcast to self's shape",
            fmt_shape(mask_shape),
            mask_shape.len(),
            fmt_shape(self_shape),
            self_shape.len()
        )
    } else {
        let k = self_shape.len() - mask_shape.len();
        let d = (0..mask_shape.len()).find(|&i| mask_shape[i] != 1 && mask_shape[i] != self_shape[k + i]).unwrap_or(0);
        format!(
            "masked_scatter_: The expanded size of the mask ({}) must match the existing size of self ({}) at non-singleton dimension {} (self {}, mask {})",
            mask_shape.get(d).copied().unwrap_or(0),
            self_shape.get(k + d).copied().unwrap_or(0),
            k + d,
            fmt_shape(self_shape),
            fmt_shape(mask_shape)
        )
    };
    Error::shape(msg).with_hint(
        "in place, self keeps its shape, so the mask must broadcast to it (sizes equal or 1, aligned at the last dims); the out-of-place masked_scatter broadcasts both instead",
    )
}

/// Method forms of [`masked_select()`], [`masked_scatter()`] and [`masked_scatter_inplace()`], on
/// any ndarray array (`masked_scatter_inplace` needs a mutable one).
///
/// ```
/// use gather::ops::masked::MaskedExt;
/// use ndarray::array;
/// let mut x = array![1.0f32, -2.0, 3.0, -4.0];
/// let neg = x.mapv(|v| v < 0.0);
/// assert_eq!(x.masked_select(&neg)?, array![-2.0, -4.0]);
/// x.masked_scatter_inplace(&neg, &array![0.5f32, 0.25])?;
/// assert_eq!(x, array![1.0, 0.5, 3.0, 0.25]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait MaskedExt<T: Element, S: ndarray::RawData<Elem = T>> {
    /// See [`masked_select()`].
    fn masked_select<SM, DM>(&self, mask: &ArrayBase<SM, DM>) -> Result<Array1<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension;

    /// See [`masked_scatter()`].
    fn masked_scatter<SM, DM, SS, DS>(&self, mask: &ArrayBase<SM, DM>, source: &ArrayBase<SS, DS>) -> Result<ArrayD<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`masked_scatter_inplace()`].
    fn masked_scatter_inplace<SM, DM, SS, DS>(&mut self, mask: &ArrayBase<SM, DM>, source: &ArrayBase<SS, DS>) -> Result<()>
    where
        S: DataMut,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;
}

impl<T: Element, S: ndarray::RawData<Elem = T>, D: Dimension> MaskedExt<T, S> for ArrayBase<S, D> {
    fn masked_select<SM, DM>(&self, mask: &ArrayBase<SM, DM>) -> Result<Array1<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension,
    {
        masked_select(self, mask)
    }

    fn masked_scatter<SM, DM, SS, DS>(&self, mask: &ArrayBase<SM, DM>, source: &ArrayBase<SS, DS>) -> Result<ArrayD<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        masked_scatter(self, mask, source)
    }

    fn masked_scatter_inplace<SM, DM, SS, DS>(&mut self, mask: &ArrayBase<SM, DM>, source: &ArrayBase<SS, DS>) -> Result<()>
    where
        S: DataMut,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        masked_scatter_inplace(self, mask, source)
    }
}
