//! `put`: write (or add) source elements at flat (row-major) positions of an array.
//!
//! ```text
//! put_inplace(self, index, source, accumulate)   self.flatten()[index[q]] (+)= source.flatten()[q]
//!
//!  self (3×4, zeros)        index        source        result, accumulate = true
//!  ┌───┬───┬───┬───┐        ┌───┐        ┌───┐         ┌───┬───┬───┬───┐
//!  │ 0 │ 0 │ 0 │ 0 │   ←    │ 0 │   ←    │ 1 │         │ 6 │ 0 │ 0 │ 0 │  1 + 2 + 3 all land on flat 0
//!  ├───┼───┼───┼───┤        │ 0 │   ←    │ 2 │         ├───┼───┼───┼───┤
//!  │ 0 │ 0 │ 0 │ 0 │        │-12│   ←    │ 3 │         │ 0 │ 0 │ 0 │ 0 │  (-12 wraps to 0)
//!  ├───┼───┼───┼───┤        └───┘        └───┘         ├───┼───┼───┼───┤
//!  │ 0 │ 0 │ 0 │ 0 │                                   │ 0 │ 0 │ 0 │ 0 │  accumulate = false: 3
//!  └───┴───┴───┴───┘                                   └───┴───┴───┴───┘  (the last write wins)
//! ```
//!
//! The rules, as PyTorch's:
//! - index and source are paired element by element in their row-major orders: only their
//!   numbers of elements must match, their shapes may differ;
//! - positions address the **logical** row-major flattening of self, whatever its memory layout;
//!   negative positions count from the end (valid range `-numel..numel`);
//! - an empty index does nothing; a non-empty index into an empty array is an error.
//!
//! Where PyTorch leaves things unspecified or differs, this crate chooses (and guarantees):
//! - without `accumulate`, duplicates are resolved deterministically: the **last** write in index
//!   order wins (PyTorch's parallel kernel picks an arbitrary one);
//! - with `accumulate`, additions happen in index order, starting from the value in self; integers
//!   wrap, bool adds with logical or, and `f16`/`bf16` accumulate in `f32` and round once per
//!   element (PyTorch rounds after every addition: 3000 `f16` ones give 2048 there, 3000 here);
//! - every index type is accepted (PyTorch requires `int64`);
//! - the in-place form checks everything, bounds included, before its first write: a failed call
//!   leaves self exactly as it was.

use ndarray::{Array, ArrayBase, ArrayView, ArrayViewMut, Data, DataMut, Dimension, IxDyn};

use super::take::flat_index_error;
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;

/// `self.put_(index, source, accumulate)`: `self.flatten()[index[q]] = source.flatten()[q]` (or
/// `+=` with `accumulate`) for every position `q` of the index, in row-major order.
///
/// Duplicates: without `accumulate` the last write in index order wins; with it, the additions
/// happen in index order (`f16`/`bf16` in `f32`, rounding once).
///
/// ```
/// use gather::ops::put::put_inplace;
/// use ndarray::{array, Array2};
/// let mut x = Array2::<f32>::zeros((3, 4));
/// put_inplace(&mut x, &array![0, 0, -12], &array![1.0, 2.0, 3.0], true)?;
/// assert_eq!(x[[0, 0]], 6.0);
///
/// // Shapes of index and source may differ; only their sizes must match.
/// let mut y = array![[0, 0], [0, 0]];
/// put_inplace(&mut y, &array![[3, 1]], &array![7, 8], false)?;
/// assert_eq!(y, array![[0, 8], [0, 7]]);
///
/// // A failed call changes nothing.
/// let e = put_inplace(&mut y, &array![0, 4], &array![1, 1], false).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::IndexOutOfBounds);
/// assert_eq!(y, array![[0, 8], [0, 7]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn put_inplace<T, S, D, I, SI, DI, SS, DS>(
    dst: &mut ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    accumulate: bool,
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
    put_dyn(
        dst.view_mut().into_dyn(),
        index.view().into_dyn(),
        source.view().into_dyn(),
        accumulate,
    )
}

/// [`put_inplace`] on dynamic-rank views: compiled per element and index type, not per storage
/// and rank of each operand.
fn put_dyn<T: Element, I: IndexElem>(
    mut dst: ArrayViewMut<'_, T, IxDyn>,
    index: ArrayView<'_, I, IxDyn>,
    src: ArrayView<'_, T, IxDyn>,
    accumulate: bool,
) -> Result<()> {
    if !check_put_shapes(dst.shape(), index.shape(), src.shape())? {
        return Ok(());
    }
    let shape = dst.shape().to_vec();
    let checked = CheckedIndex::new("put", index, 0, dst.len(), Bounds::Wrap)
        .map_err(|e| flat_index_error("put", e, &shape))?;
    if !accumulate {
        kernels::take::put(&mut dst, &checked, &src, false, kernels::scatter::set::<T>);
    } else if T::WIDE_ACC {
        accumulate_wide(&mut dst, &checked, &src)?;
    } else {
        kernels::take::put(&mut dst, &checked, &src, true, |d: &mut T, s: T| {
            *d = T::from_acc(T::acc_add(d.to_acc(), s.to_acc()))
        });
    }
    Ok(())
}

/// The checks of `put(self, index, source)` from the shapes, before the index's values are read:
/// `false` when there is nothing to do (an empty index).
pub(crate) fn check_put_shapes(
    self_shape: &[usize],
    index_shape: &[usize],
    source_shape: &[usize],
) -> Result<bool> {
    let (src_len, index_len) = (
        source_shape.iter().product::<usize>(),
        index_shape.iter().product::<usize>(),
    );
    if src_len != index_len {
        return Err(Error::shape(format!(
            "put_(): Expected source and index to have the same number of elements, but got source.numel() = {}, index.numel() = {} (source {}, index {})",
            src_len,
            index_len,
            fmt_shape(source_shape),
            fmt_shape(index_shape)
        ))
        .with_hint("put pairs index and source element by element in row-major order: their shapes may differ, but their sizes must match"));
    }
    if index_len == 0 {
        return Ok(false);
    }
    if self_shape.contains(&0) {
        return Err(Error::bounds(format!(
            "put_(): Tried to put elements into an empty tensor (self {}, index {})",
            fmt_shape(self_shape),
            fmt_shape(index_shape)
        ))
        .with_hint(
            "an empty array has no position to write to; only an empty index is valid for it",
        ));
    }
    Ok(true)
}

/// Accumulation for types whose `Acc` is wider than themselves (`f16`, `bf16`): every target
/// element is summed in `Acc`, starting from its value in `dst`, adding its contributions in index
/// order, and rounded once. Reads and sums happen before the single write pass.
fn accumulate_wide<T: Element, I: IndexElem>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    index: &CheckedIndex<'_, I>,
    src: &ArrayView<'_, T, IxDyn>,
) -> Result<()> {
    // An index of an eighth of dst or more: dst widened whole, the additions in index order
    // through the put kernel, and one rounding pass back (two passes over dst, where sorting the
    // contributions took most of the call: 138 ms for 2M into 4M elements, PyTorch 15 ms).
    if index.view().len().saturating_mul(8) >= dst.len() {
        let mut acc = kernels::scatter::widened(&dst.view());
        kernels::take::put(
            &mut acc.view_mut(),
            index,
            src,
            true,
            kernels::scatter::add_wide::<T>,
        );
        kernels::zip::zip2_runs(dst, &acc.view(), |d, a| T::narrow_run(a, d));
        return Ok(());
    }
    let (bounds, size) = (index.bounds(), index.size());
    let mut hits: Vec<(i64, T::Acc)> = index
        .view()
        .iter()
        .zip(src.iter())
        .map(|(v, s)| {
            (
                kernels::position(bounds, v.to_i64(), size) as i64,
                s.to_acc(),
            )
        })
        .collect();
    // Stable: contributions to one element keep their index order.
    hits.sort_by_key(|h| h.0);
    let mut targets: Vec<i64> = hits.iter().map(|h| h.0).collect();
    targets.dedup();
    let targets = ArrayView::from(&targets[..]).into_dyn();
    let targets = CheckedIndex::new("put", targets, 0, size, Bounds::Strict)?;
    let old = kernels::take::take(
        &dst.view(),
        &targets,
        super::try_vec("put", targets.view().len())?,
    );
    let mut sums: Vec<T> = Vec::with_capacity(old.len());
    let mut k = 0;
    for start in old {
        let p = hits[k].0;
        let mut acc = start.to_acc();
        while k < hits.len() && hits[k].0 == p {
            acc = T::acc_add(acc, hits[k].1);
            k += 1;
        }
        sums.push(T::from_acc(acc));
    }
    let sums = ArrayView::from(&sums[..]).into_dyn();
    kernels::take::put(dst, &targets, &sums, false, kernels::scatter::set::<T>);
    Ok(())
}

/// `torch.put(input, index, source, accumulate)`: a copy of `input` (in standard layout) with
/// [`put_inplace`] applied.
///
/// ```
/// use gather::ops::put::put;
/// use ndarray::array;
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(put(&x, &array![-1, 0], &array![9, 8], false)?, array![[8, 2], [3, 9]]);
/// // Duplicates without accumulate: the last write in index order wins.
/// assert_eq!(put(&x, &array![1, 1], &array![5, 6], false)?, array![[1, 6], [3, 4]]);
/// assert_eq!(put(&x, &array![1, 1], &array![5, 6], true)?, array![[1, 13], [3, 4]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn put<T, S, D, I, SI, DI, SS, DS>(
    input: &ArrayBase<S, D>,
    index: &ArrayBase<SI, DI>,
    source: &ArrayBase<SS, DS>,
    accumulate: bool,
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
    let mut out = super::try_to_owned("put", input)?;
    put_inplace(&mut out, index, source, accumulate)?;
    Ok(out)
}

/// Method forms of [`put()`] and [`put_inplace()`], on any ndarray array (`put_inplace` needs a
/// mutable one).
///
/// ```
/// use gather::ops::put::PutExt;
/// use ndarray::array;
/// let mut x = array![0u8, 0, 0];
/// x.put_inplace(&array![2, 2], &array![1, 1], true)?;
/// assert_eq!(x, array![0, 0, 2]);
/// assert_eq!(x.put(&array![0], &array![7], false)?, array![7, 0, 2]);
/// # Ok::<(), gather::Error>(())
/// ```
pub trait PutExt<T: Element, S: ndarray::RawData<Elem = T>, D: Dimension> {
    /// See [`put()`].
    fn put<I, SI, DI, SS, DS>(
        &self,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<Array<T, D>>
    where
        S: Data,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;

    /// See [`put_inplace()`].
    fn put_inplace<I, SI, DI, SS, DS>(
        &mut self,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<()>
    where
        S: DataMut,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension;
}

impl<T: Element, S: ndarray::RawData<Elem = T>, D: Dimension> PutExt<T, S, D> for ArrayBase<S, D> {
    fn put<I, SI, DI, SS, DS>(
        &self,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<Array<T, D>>
    where
        S: Data,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        put(self, index, source, accumulate)
    }

    fn put_inplace<I, SI, DI, SS, DS>(
        &mut self,
        index: &ArrayBase<SI, DI>,
        source: &ArrayBase<SS, DS>,
        accumulate: bool,
    ) -> Result<()>
    where
        S: DataMut,
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
        SS: Data<Elem = T>,
        DS: Dimension,
    {
        put_inplace(self, index, source, accumulate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::ops::take::test_layouts::{KINDS, MUT_KINDS, Rng, backing, view, view_mut};
    use half::{bf16, f16};
    use ndarray::{Array1, Array2, ArrayD, arr0, array};

    #[test]
    fn put_matches_pytorch_worked_example() {
        let mut x = Array2::<f32>::zeros((3, 4));
        put_inplace(
            &mut x,
            &array![0i64, 0, -12],
            &array![1.0f32, 2.0, 3.0],
            true,
        )
        .unwrap();
        let mut want = Array2::<f32>::zeros((3, 4));
        want[[0, 0]] = 6.0;
        assert_eq!(x, want);
    }

    /// The reference: a serial loop over the flattening.
    fn reference(dst: &[i32], index: &[i32], src: &[i32], accumulate: bool) -> Vec<i32> {
        let mut out = dst.to_vec();
        let n = dst.len() as i64;
        for (&v, &s) in index.iter().zip(src) {
            let p = if v < 0 { v as i64 + n } else { v as i64 } as usize;
            out[p] = if accumulate {
                out[p].wrapping_add(s)
            } else {
                s
            };
        }
        out
    }

    #[test]
    fn put_writes_the_logical_order_of_every_layout() {
        let mut rng = Rng(0x5eed_0003);
        for case in 0..800 {
            let shape = rng.shape(4, 4, false);
            let kind = case % MUT_KINDS;
            let mut b = backing(kind, &shape, &mut rng);
            let before: Vec<i32> = view(kind, &b, &shape).iter().copied().collect();
            let n = before.len() as i64;
            // Index and source: the same number of elements, different shapes and layouts.
            let k = rng.below(9);
            let ishape = if rng.below(2) == 0 {
                vec![k]
            } else {
                vec![1, k]
            };
            let sshape = if k % 2 == 0 && k > 0 && rng.below(2) == 0 {
                vec![2, k / 2]
            } else {
                vec![k]
            };
            let (ik, sk) = (rng.below(KINDS), rng.below(KINDS));
            let mut ib = backing(ik, &ishape, &mut rng);
            ib.mapv_inplace(|v| ((v as i64).rem_euclid(2 * n) - n) as i32);
            let sb = backing(sk, &sshape, &mut rng);
            let (idx, src) = (view(ik, &ib, &ishape), view(sk, &sb, &sshape));
            let accumulate = rng.below(2) == 0;
            let want = reference(
                &before,
                &idx.iter().copied().collect::<Vec<_>>(),
                &src.iter().copied().collect::<Vec<_>>(),
                accumulate,
            );
            let mut dst = view_mut(kind, &mut b, &shape);
            put_inplace(&mut dst, &idx, &src, accumulate).unwrap();
            assert_eq!(
                dst.iter().copied().collect::<Vec<_>>(),
                want,
                "case {case}: {shape:?} kind {kind}"
            );
        }
    }

    #[test]
    fn duplicates_without_accumulate_keep_the_last_write() {
        let mut x = array![0i64, 0, 0];
        put_inplace(&mut x, &array![[1, -2], [1, 0]], &array![1, 2, 3, 4], false).unwrap();
        assert_eq!(x, array![4, 3, 0]);
    }

    #[test]
    fn half_accumulation_rounds_once() {
        let idx = Array1::<i64>::zeros(3000);
        let mut h = Array1::<f16>::zeros(2);
        put_inplace(&mut h, &idx, &Array1::from_elem(3000, f16::ONE), true).unwrap();
        assert_eq!(h, array![f16::from_f32(3000.0), f16::ZERO]);
        let mut b = Array2::<bf16>::from_elem((2, 2), bf16::ONE);
        let idx = array![3i64, -1, 0, 3];
        let src = array![
            bf16::from_f32(0.5),
            bf16::from_f32(0.25),
            bf16::from_f32(2.0),
            bf16::from_f32(0.125)
        ];
        put_inplace(&mut b.view_mut().reversed_axes(), &idx, &src, true).unwrap();
        assert_eq!(
            b,
            array![
                [bf16::from_f32(3.0), bf16::ONE],
                [bf16::ONE, bf16::from_f32(1.875)]
            ]
        );
    }

    #[test]
    fn half_accumulation_sums_in_f32_whether_dst_is_widened_or_the_hits_sorted() {
        // An index of an eighth of dst or more widens dst; a shorter one sorts its hits.
        for (len, n) in [(64usize, 1000usize), (100_000, 3000)] {
            let mut seed = len as u64;
            let mut next = |m: usize| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 33) as usize) % m
            };
            let dst0 = Array1::from_shape_fn(len, |i| f16::from_f32((i % 7) as f32 * 0.3));
            let idx = Array1::from_shape_fn(n, |_| next(40) as i64 - 20);
            let src = Array1::from_shape_fn(n, |_| f16::from_f32(next(1000) as f32 / 7.0));
            let mut want: Vec<f32> = dst0.iter().map(|v| v.to_f32()).collect();
            for (&i, s) in idx.iter().zip(&src) {
                let p = if i < 0 { i + len as i64 } else { i } as usize;
                want[p] += s.to_f32();
            }
            let mut dst = dst0.clone();
            put_inplace(&mut dst, &idx, &src, true).unwrap();
            for (p, (d, w)) in dst.iter().zip(&want).enumerate() {
                assert_eq!(
                    d.to_bits(),
                    f16::from_f32(*w).to_bits(),
                    "len {len}, at {p}"
                );
            }
        }
    }

    #[test]
    fn bool_accumulates_with_or_and_integers_wrap() {
        let mut x = array![false, true, false];
        put_inplace(&mut x, &array![0, 1, 1], &array![false, false, true], true).unwrap();
        assert_eq!(x, array![false, true, false]);
        put_inplace(&mut x, &array![2], &array![true], true).unwrap();
        assert_eq!(x, array![false, true, true]);
        let mut y = array![100i8];
        put_inplace(&mut y, &array![0, 0], &array![20i8, 10], true).unwrap();
        assert_eq!(y, array![-126]);
    }

    #[test]
    fn errors_leave_self_unchanged() {
        let mut x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let orig = x.clone();
        let e = put_inplace(
            &mut x,
            &array![0i64, 5, -13],
            &array![1.0f32, 2.0, 3.0],
            true,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(
            e.message()
                .contains("tried to access index -13 on a tensor of 12 elements"),
            "{e}"
        );
        assert_eq!(e.coordinate(), Some(&[2usize][..]));
        assert_eq!(x, orig);
        let e = put_inplace(&mut x, &array![0i64, 1], &array![1.0f32], false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("source.numel() = 1, index.numel() = 2")
        );
        let mut empty = Array1::<f32>::zeros(0);
        let e = put_inplace(&mut empty, &array![0i64], &array![1.0f32], false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        put_inplace(
            &mut empty,
            &Array1::<i64>::zeros(0),
            &Array1::<f32>::zeros(0),
            true,
        )
        .unwrap();
        assert_eq!(x, orig);
    }

    #[test]
    fn out_of_place_put_returns_standard_layout_and_zero_d_works() {
        let b = Array2::from_shape_fn((2, 3), |(i, j)| (3 * i + j) as i32);
        let out = put(&b.t(), &array![1], &array![-1], false).unwrap();
        assert!(out.is_standard_layout());
        assert_eq!(out, array![[0, -1], [1, 4], [2, 5]]);
        assert_eq!(
            put(&arr0(1.5f64), &array![-1], &array![2.0], true).unwrap(),
            arr0(3.5)
        );
        let scalar_index: ArrayD<i64> = arr0(4).into_dyn();
        let out = put(&Array1::<u8>::zeros(5), &scalar_index, &array![9u8], false).unwrap();
        assert_eq!(out, array![0, 0, 0, 0, 9]);
    }
}
