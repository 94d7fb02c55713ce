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

use ndarray::{
    Array1, ArrayBase, ArrayD, ArrayView, ArrayView1, ArrayViewMut, Axis, Data, DataMut, Dimension,
    IxDyn,
};

use crate::dims::broadcast_shapes;
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::plan::{GRAIN, par_each, par_map};

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

fn count_true(mask: ArrayView<'_, bool, IxDyn>) -> usize {
    if let Some(s) = mask.as_slice_memory_order() {
        return s.iter().filter(|&&m| m).count();
    }
    let mask = at_least_1d(mask);
    let last = Axis(mask.ndim() - 1);
    let count = |s: &[bool]| s.iter().filter(|&&m| m).count();
    mask.lanes(last)
        .into_iter()
        .map(|l| {
            l.as_slice()
                .map_or_else(|| l.iter().filter(|&&m| m).count(), count)
        })
        .sum()
}

/// `a` itself, or a 0-d `a` as one element of 1-d: the loops below walk lanes along the last
/// axis. A mask broadcast along rows (stride 0 on the axes before) is a slice in each lane,
/// where the iterators over the whole view paid their dynamic-rank stepping per element.
fn at_least_1d<A>(a: ArrayView<'_, A, IxDyn>) -> ArrayView<'_, A, IxDyn> {
    if a.ndim() > 0 {
        return a;
    }
    a.into_shape_with_order(IxDyn(&[1])).expect("one element")
}

/// Writes the elements of `x` where `m` is set, in row-major order, into `out` (one slot each).
fn select_piece<T: Copy>(x: ArrayView<'_, T, IxDyn>, m: ArrayView<'_, bool, IxDyn>, out: &mut [T]) {
    let mut k = 0;
    if let (Some(xs), Some(ms)) = (x.as_slice(), m.as_slice()) {
        select_run(xs, ms, out, &mut k);
        return;
    }
    let (x, m) = (at_least_1d(x), at_least_1d(m));
    let last = Axis(x.ndim() - 1);
    for (xl, ml) in x.lanes(last).into_iter().zip(m.lanes(last)) {
        match (xl.as_slice(), ml.as_slice()) {
            (Some(xs), Some(ms)) => select_run(xs, ms, out, &mut k),
            // A mask broadcast along the lane (a column of it): all of the lane or none.
            _ if ml.strides()[0] == 0 => {
                if ml[0] {
                    for (o, &v) in out[k..k + xl.len()].iter_mut().zip(xl) {
                        *o = v;
                    }
                    k += xl.len();
                }
            }
            _ => {
                for (&v, &on) in xl.iter().zip(ml.iter()) {
                    if on {
                        out[k] = v;
                        k += 1;
                    }
                }
            }
        }
    }
}

/// `out[k..]` takes the elements of `xs` where `ms` is set, `k` advancing past them. Every
/// element is stored at `out[k]` and a set one moves `k` on: a store and an add where a branch
/// on each (random) mask value mispredicted half the time. `out` has exactly one slot per set
/// value, so an element past the last slot is an unset one and is not stored.
fn select_run<T: Copy>(xs: &[T], ms: &[bool], out: &mut [T], k: &mut usize) {
    let mut j = *k;
    for (&v, &on) in xs.iter().zip(ms) {
        if let Some(o) = out.get_mut(j) {
            *o = v;
        }
        j += on as usize;
    }
    *k = j;
}

/// Writes `src`'s elements in order to the positions of `d` where `m` is set, in row-major
/// order; `src` holds at least as many elements as `m` has set values.
fn scatter_piece<T: Copy>(d: ArrayViewMut<'_, T, IxDyn>, m: ArrayView<'_, bool, IxDyn>, src: &[T]) {
    let mut k = 0;
    let mut d = d;
    if let (true, Some(ms)) = (d.is_standard_layout(), m.as_slice()) {
        let ds = d.as_slice_mut().expect("a standard-layout view is a slice");
        scatter_run(ds, ms, src, &mut k);
        return;
    }
    let mut d = if d.ndim() > 0 {
        d
    } else {
        d.into_shape_with_order(IxDyn(&[1])).expect("one element")
    };
    let m = at_least_1d(m);
    let last = Axis(d.ndim() - 1);
    for (mut dl, ml) in d.lanes_mut(last).into_iter().zip(m.lanes(last)) {
        match (dl.as_slice_mut(), ml.as_slice()) {
            (Some(ds), Some(ms)) => scatter_run(ds, ms, src, &mut k),
            _ if ml.strides()[0] == 0 => {
                if ml[0] {
                    let len = dl.len();
                    dl.assign(&ArrayView1::from(&src[k..k + len]));
                    k += len;
                }
            }
            _ => {
                for (o, &on) in dl.iter_mut().zip(ml.iter()) {
                    if on {
                        *o = src[k];
                        k += 1;
                    }
                }
            }
        }
    }
}

/// `ds[p] = src[k++]` where `ms[p]` is set: a select instead of a branch on each (random) mask
/// value. `src[k]` exists wherever the mask is set (its set values were counted).
fn scatter_run<T: Copy>(ds: &mut [T], ms: &[bool], src: &[T], k: &mut usize) {
    let mut j = *k;
    for (o, &on) in ds.iter_mut().zip(ms) {
        let v = src.get(j).copied().unwrap_or(*o);
        *o = if on { v } else { *o };
        j += on as usize;
    }
    *k = j;
}

/// `src`'s elements in row-major order: its own memory where it is in standard layout, else a
/// copy (the copy kernel's, in parallel).
fn row_major<'a, T: Element>(src: &'a ArrayView<'_, T, IxDyn>) -> std::borrow::Cow<'a, [T]> {
    match src.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(crate::kernels::copy::copy_into(
            src,
            Vec::with_capacity(src.len()),
        )),
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
pub fn masked_select<T, S, D, SM, DM>(
    input: &ArrayBase<S, D>,
    mask: &ArrayBase<SM, DM>,
) -> Result<Array1<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    SM: Data<Elem = bool>,
    DM: Dimension,
{
    let shape = broadcast_shape("masked_select", input.shape(), mask.shape())?;
    let x = input.view().into_dyn();
    let m = mask.view().into_dyn();
    let (xb, mb) = match (x.broadcast(IxDyn(&shape)), m.broadcast(IxDyn(&shape))) {
        (Some(xb), Some(mb)) => (xb, mb),
        _ => {
            return Err(internal_broadcast(
                "masked_select",
                input.shape(),
                mask.shape(),
            ));
        }
    };
    let Some(leaf) = parallel_leaf(xb.len()) else {
        let mut out = vec![T::default(); count_true(mb.view())];
        select_piece(xb, mb, &mut out);
        return Ok(Array1::from_vec(out));
    };
    let mut parts = Vec::new();
    pieces(xb, mb, leaf, &mut parts);
    let counts = par_map(parts.len(), |i| count_true(parts[i].1.view()));
    let mut out = vec![T::default(); counts.iter().sum()];
    let mut slots: Vec<&mut [T]> = Vec::with_capacity(parts.len());
    let mut rest = &mut out[..];
    for &c in &counts {
        let (head, tail) = rest.split_at_mut(c);
        slots.push(head);
        rest = tail;
    }
    let work: Vec<_> = parts.into_iter().zip(slots).collect();
    par_each(work, |((x, m), slot)| select_piece(x, m, slot));
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
/// let e = masked_scatter_inplace(&mut z, &x.mapv(|v| v > 0.0), &src).unwrap_err(); // 11 > 10
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
    let short = |ones: usize| source_short(src.shape(), ones, &self_shape);
    let d = dst.view_mut().into_dyn();
    let Some(leaf) = parallel_leaf(d.len()) else {
        let ones = count_true(mb.view());
        if ones > src.len() {
            return Err(short(ones));
        }
        scatter_piece(d, mb, &row_major(&src));
        return Ok(());
    };
    let mut parts = Vec::new();
    pieces(d, mb, leaf, &mut parts);
    let counts = par_map(parts.len(), |i| count_true(parts[i].1.view()));
    let ones: usize = counts.iter().sum();
    if ones > src.len() {
        return Err(short(ones));
    }
    let sv = row_major(&src);
    let mut starts = Vec::with_capacity(counts.len());
    let mut acc = 0;
    for &c in &counts {
        starts.push(acc);
        acc += c;
    }
    let work: Vec<_> = parts.into_iter().zip(starts).collect();
    par_each(work, |((d, m), start)| scatter_piece(d, m, &sv[start..]));
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
    let shape = broadcast_shape("masked_scatter", input.shape(), mask.shape())?;
    let x = input.view().into_dyn();
    let Some(xb) = x.broadcast(IxDyn(&shape)) else {
        return Err(internal_broadcast(
            "masked_scatter",
            input.shape(),
            mask.shape(),
        ));
    };
    let mut out: ArrayD<T> = super::try_to_owned("masked_scatter", &xb)?;
    masked_scatter_inplace(&mut out, mask, source)?;
    Ok(out)
}

/// The shape that input and mask broadcast to (`masked_select`, the out-of-place
/// `masked_scatter`), or the error that says why they do not.
pub(crate) fn broadcast_shape(
    op: &str,
    input_shape: &[usize],
    mask_shape: &[usize],
) -> Result<Vec<usize>> {
    // PyTorch broadcasts (mask, input), so "tensor a" in the message is the mask.
    broadcast_shapes(mask_shape, input_shape).map_err(|e| {
        e.with_hint(format!(
            "{op} broadcasts input and mask: aligned at their last dims, each pair of sizes must be equal or one of them 1"
        ))
    })
}

/// `masked_scatter`'s error for a source of `source_shape` with fewer elements than the mask's
/// `ones` true positions over self's `self_shape`.
pub(crate) fn source_short(source_shape: &[usize], ones: usize, self_shape: &[usize]) -> Error {
    Error::shape(format!(
        "masked_scatter_: Number of elements of source < number of ones in mask (source has {} elements, shape {}; the mask has {ones} true positions over self {})",
        source_shape.iter().product::<usize>(),
        fmt_shape(source_shape),
        fmt_shape(self_shape)
    ))
    .with_hint("source is read in row-major order, one element per true position of the mask: pass a source with at least that many elements")
}

fn internal_broadcast(op: &str, a: &[usize], b: &[usize]) -> Error {
    Error::shape(format!(
        "{op}: cannot broadcast input {} and mask {}",
        fmt_shape(a),
        fmt_shape(b)
    ))
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
        let d = (0..mask_shape.len())
            .find(|&i| mask_shape[i] != 1 && mask_shape[i] != self_shape[k + i])
            .unwrap_or(0);
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
    fn masked_scatter<SM, DM, SS, DS>(
        &self,
        mask: &ArrayBase<SM, DM>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<ArrayD<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`masked_scatter_inplace()`].
    fn masked_scatter_inplace<SM, DM, SS, DS>(
        &mut self,
        mask: &ArrayBase<SM, DM>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<()>
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

    fn masked_scatter<SM, DM, SS, DS>(
        &self,
        mask: &ArrayBase<SM, DM>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<ArrayD<T>>
    where
        S: Data,
        SM: Data<Elem = bool>,
        DM: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        masked_scatter(self, mask, source)
    }

    fn masked_scatter_inplace<SM, DM, SS, DS>(
        &mut self,
        mask: &ArrayBase<SM, DM>,
        source: &ArrayBase<SS, DS>,
    ) -> Result<()>
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::ops::take::test_layouts::{KINDS, MUT_KINDS, Rng, backing, view, view_mut};
    use ndarray::{Array2, ArrayViewD, arr0, array};

    #[test]
    fn masked_scatter_matches_pytorch_worked_example() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let mut z = Array2::<f32>::zeros((3, 4));
        masked_scatter_inplace(
            &mut z,
            &x.mapv(|v| v > 5.0),
            &ndarray::Array::range(100.0, 110.0, 1.0),
        )
        .unwrap();
        assert_eq!(
            z,
            array![
                [0., 0., 0., 0.],
                [0., 0., 100., 101.],
                [102., 103., 104., 105.]
            ]
        );
    }

    /// Two shapes that broadcast against each other, of ranks up to 4.
    fn broadcast_pair(rng: &mut Rng) -> (Vec<usize>, Vec<usize>) {
        let rank = rng.below(5);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..rank {
            let s = rng.below(4);
            match rng.below(3) {
                0 => (a.push(s), b.push(s)),
                1 => (a.push(1), b.push(s)),
                _ => (a.push(s), b.push(1)),
            };
        }
        let drop_a = rng.below(rank + 1).min(a.len());
        let drop_b = if drop_a == 0 { rng.below(rank + 1) } else { 0 };
        (a[drop_a..].to_vec(), b[drop_b..].to_vec())
    }

    fn bool_mask(shape: &[usize], rng: &mut Rng) -> ArrayD<bool> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| rng.below(3) != 0)
    }

    /// Element at `c` of the broadcast shape `out` of `a` (aligned at the end, size-1 axes fixed).
    fn at<T: Copy>(a: &ArrayViewD<'_, T>, c: &[usize]) -> T {
        let k = c.len() - a.ndim();
        let ac: Vec<usize> = (0..a.ndim())
            .map(|i| if a.shape()[i] == 1 { 0 } else { c[k + i] })
            .collect();
        a[IxDyn(&ac)]
    }

    fn row_major_coords(shape: &[usize]) -> Vec<Vec<usize>> {
        ArrayD::from_elem(IxDyn(shape), 0u8)
            .indexed_iter()
            .map(|(c, _)| c.slice().to_vec())
            .collect()
    }

    #[test]
    fn masked_select_and_scatter_match_a_reference_on_every_layout() {
        let mut rng = Rng(0x5eed_0004);
        for case in 0..800 {
            let (xs, ms) = broadcast_pair(&mut rng);
            let shape = broadcast_shapes(&xs, &ms).unwrap();
            let (xk, mk) = (case % KINDS, rng.below(KINDS));
            let xb = backing(xk, &xs, &mut rng);
            let x = view(xk, &xb, &xs);
            let mb = bool_mask(&ms, &mut rng);
            let mview = match mk {
                1 => mb.slice_each_axis(|_| ndarray::Slice::new(0, None, -1)),
                _ => mb.view(),
            };
            let coords = row_major_coords(&shape);
            let selected: Vec<i32> = coords
                .iter()
                .filter(|c| at(&mview, c))
                .map(|c| at(&x, c))
                .collect();
            assert_eq!(
                masked_select(&x, &mview).unwrap().to_vec(),
                selected,
                "case {case}: {xs:?} {ms:?}"
            );

            let extra = rng.below(3);
            let sshape = vec![selected.len() + extra];
            let sk = rng.below(KINDS);
            let sb = backing(sk, &sshape, &mut rng);
            let src = view(sk, &sb, &sshape);
            let srcv: Vec<i32> = src.iter().copied().collect();
            let mut next = 0;
            let want = ArrayD::from_shape_vec(
                IxDyn(&shape),
                coords
                    .iter()
                    .map(|c| {
                        if at(&mview, c) {
                            next += 1;
                            srcv[next - 1]
                        } else {
                            at(&x, c)
                        }
                    })
                    .collect(),
            )
            .unwrap();
            assert_eq!(
                masked_scatter(&x, &mview, &src).unwrap(),
                want,
                "case {case}"
            );
        }
    }

    #[test]
    fn masked_scatter_inplace_writes_through_any_layout() {
        let mut rng = Rng(0x5eed_0005);
        for case in 0..400 {
            let shape = rng.shape(4, 4, true);
            let kind = case % MUT_KINDS;
            let mut b = backing(kind, &shape, &mut rng);
            let before: Vec<i32> = view(kind, &b, &shape).iter().copied().collect();
            // A mask that broadcasts to self: drop leading axes, set some to 1.
            let skip = rng.below(shape.len() + 1);
            let ms: Vec<usize> = shape[skip..]
                .iter()
                .map(|&s| if rng.below(3) == 0 { 1 } else { s })
                .collect();
            let m = bool_mask(&ms, &mut rng);
            let mb = m.broadcast(IxDyn(&shape)).unwrap();
            let ones = mb.iter().filter(|&&v| v).count();
            let src = Array2::from_shape_fn((1, ones + rng.below(2)), |(_, j)| 10_000 + j as i32);
            let mut next = 0;
            let want: Vec<i32> = before
                .iter()
                .zip(mb.iter())
                .map(|(&v, &on)| {
                    if on {
                        next += 1;
                        10_000 + next - 1
                    } else {
                        v
                    }
                })
                .collect();
            let mut dst = view_mut(kind, &mut b, &shape);
            masked_scatter_inplace(&mut dst, &m, &src).unwrap();
            assert_eq!(
                dst.iter().copied().collect::<Vec<_>>(),
                want,
                "case {case}: {shape:?} kind {kind}"
            );
        }
    }

    #[test]
    fn large_calls_are_the_same_on_one_thread_and_many() {
        let mut rng = Rng(11);
        let x = Array2::from_shape_fn((300, 700), |(i, j)| (i * 700 + j) as i64);
        let xt = x.t();
        let m = ArrayD::from_shape_fn(IxDyn(&[700, 1]), |_| rng.below(2) == 0);
        let pool = crate::kernels::test_pool(1);
        let many = masked_select(&xt, &m).unwrap();
        let one = pool.install(|| masked_select(&xt, &m).unwrap());
        assert_eq!(many, one);
        let want: Vec<i64> = xt
            .indexed_iter()
            .filter(|((r, _), _)| m[[*r, 0]])
            .map(|(_, &v)| v)
            .collect();
        assert_eq!(many.to_vec(), want);

        let src = ndarray::Array1::from_shape_fn(want.len(), |k| -(k as i64));
        let mut a = x.clone();
        let mut b = x.clone();
        masked_scatter_inplace(&mut a.view_mut().reversed_axes(), &m, &src).unwrap();
        pool.install(|| {
            masked_scatter_inplace(&mut b.view_mut().reversed_axes(), &m, &src).unwrap()
        });
        assert_eq!(a, b);
        assert_eq!(masked_select(&a.t(), &m).unwrap(), src);
        // A non-contiguous source (copied in row-major order first) gives the same result.
        let src2 = ndarray::Array2::from_shape_fn((want.len(), 2), |(k, _)| -(k as i64));
        let mut c = x.clone();
        masked_scatter_inplace(&mut c.view_mut().reversed_axes(), &m, &src2.column(0)).unwrap();
        assert_eq!(a, c);
        // Standard-layout dst and mask (the pieces' slice loop), against a plain loop.
        let full = Array2::from_shape_fn((300, 700), |_| rng.below(2) == 0);
        let ones = full.iter().filter(|&&b| b).count();
        let src3 = ndarray::Array1::from_shape_fn(ones + 3, |k| 1_000_000 + k as i64);
        let mut k = 0;
        let want3 = Array2::from_shape_fn((300, 700), |p| {
            if full[p] {
                k += 1;
                src3[k - 1]
            } else {
                x[p]
            }
        });
        for threads in [1, 3] {
            let pool = crate::kernels::test_pool(threads);
            let mut e = x.clone();
            pool.install(|| masked_scatter_inplace(&mut e, &full, &src3).unwrap());
            assert_eq!(e, want3, "{threads} threads");
        }
        // A mask broadcast along the rows (one row of it, as 2-d and as 1-d), over a standard and
        // a transposed dst: lanes whose mask is a slice, against a plain loop.
        let row = Array2::from_shape_fn((1, 700), |_| rng.below(2) == 0);
        let per_row = row.iter().filter(|&&b| b).count();
        let src4 = ndarray::Array1::from_shape_fn(300 * per_row + 1, |k| -7 - k as i64);
        let xt_owned = x.t().to_owned();
        for mask in [row.view().into_dyn(), row.row(0).into_dyn()] {
            for dst in [x.view(), xt_owned.t()] {
                let mut k = 0;
                let want4 = Array2::from_shape_fn((300, 700), |(i, j)| {
                    if row[[0, j]] {
                        k += 1;
                        src4[k - 1]
                    } else {
                        dst[[i, j]]
                    }
                });
                let picked: Vec<i64> = dst
                    .indexed_iter()
                    .filter(|((_, j), _)| row[[0, *j]])
                    .map(|(_, &v)| v)
                    .collect();
                for threads in [1, 3] {
                    let pool = crate::kernels::test_pool(threads);
                    let got = pool.install(|| masked_scatter(&dst, &mask, &src4).unwrap());
                    assert_eq!(got, want4.clone().into_dyn(), "{threads} threads");
                    let mut e = dst.to_owned();
                    pool.install(|| masked_scatter_inplace(&mut e, &mask, &src4).unwrap());
                    assert_eq!(e, want4, "{threads} threads");
                    let sel = pool.install(|| masked_select(&dst, &mask).unwrap());
                    assert_eq!(sel.to_vec(), picked, "{threads} threads");
                }
            }
        }
    }

    #[test]
    fn zero_d_and_empty_arrays_work() {
        assert_eq!(
            masked_select(&arr0(3.0f32), &arr0(true)).unwrap(),
            array![3.0]
        );
        assert_eq!(
            masked_select(&arr0(3.0f32), &array![[true, false, true]]).unwrap(),
            array![3.0, 3.0]
        );
        assert_eq!(
            masked_select(
                &Array2::<u8>::zeros((0, 3)),
                &Array2::from_elem((0, 3), true)
            )
            .unwrap()
            .len(),
            0
        );
        let mut z = arr0(1i16);
        masked_scatter_inplace(&mut z, &arr0(true), &array![[5i16], [6]]).unwrap();
        assert_eq!(z, arr0(5));
        let out = masked_scatter(&array![1u8, 2], &arr0(true), &array![7u8, 8, 9]).unwrap();
        assert_eq!(out, array![7, 8].into_dyn());
        let mut e = Array2::<i64>::zeros((0, 3));
        masked_scatter_inplace(
            &mut e,
            &Array2::from_elem((0, 3), true),
            &ndarray::Array1::<i64>::zeros(0),
        )
        .unwrap();
    }

    #[test]
    fn errors_are_classified_and_leave_self_unchanged() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let e = masked_select(&x, &array![true, false]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("The size of tensor a (2) must match the size of tensor b (4)"),
            "{e}"
        );
        let e = masked_scatter(&x, &array![true, false], &x).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("The size of tensor a (2) must match the size of tensor b (4)"),
            "{e}"
        );

        let mut y = x.clone();
        let e = masked_scatter_inplace(&mut y, &array![true, false], &x).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let mut v = array![1.0f32, 2.0, 3.0, 4.0];
        let e = masked_scatter_inplace(&mut v, &Array2::from_elem((2, 4), true), &x).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.message().contains("more dimensions"), "{e}");
        assert!(e.hint().unwrap().contains("out-of-place"));
        let e =
            masked_scatter_inplace(&mut y, &x.mapv(|v| v > 2.0), &array![9.0f32, 9.0]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("Number of elements of source < number of ones in mask")
        );
        assert!(e.message().contains("the mask has 9 true positions"), "{e}");
        assert_eq!(y, x);
        assert_eq!(v, array![1.0, 2.0, 3.0, 4.0]);
    }
}
