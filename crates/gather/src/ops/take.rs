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
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;

/// take's error for a non-empty index into an empty input.
pub(crate) fn take_from_empty(input_shape: &[usize], index_shape: &[usize]) -> Error {
    Error::bounds(format!(
        "take(): tried to take from an empty tensor (input shape {}, index shape {})",
        fmt_shape(input_shape),
        fmt_shape(index_shape)
    ))
    .with_hint("an empty input has no element to take; only an empty index is valid for it")
}

/// The gradients' error (take's, and take_along_dim's without a dim) for a non-empty index into
/// an empty input: there is no position to add a gradient at.
pub(crate) fn grad_from_empty(op: &str, input_shape: &[usize], index_len: usize) -> Error {
    Error::bounds(format!(
        "{op}: the input is empty (shape {}) but the index has {index_len} elements",
        fmt_shape(input_shape),
    ))
    .with_hint("an empty input has no element to take; only an empty index is valid for it")
}

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
    Error::bounds(msg)
        .with_hint(hint)
        .with_index(value, coord.to_vec())
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
    // Under the strict and wrapping policies the kernel checks each value as it reads it (no
    // separate pass over the index); if one is out of range (or the output cannot be allocated),
    // the full check below finds the first such value for the error.
    let data = match bounds {
        Bounds::Strict | Bounds::Wrap => super::try_vec(op, idx.len())
            .ok()
            .and_then(|out| kernels::take::take_checking(&x, &idx, bounds, out)),
        Bounds::Modulo => None,
    };
    if let Some(data) = data {
        return Ok(data);
    }
    let checked = CheckedIndex::new(op, idx, 0, x.len(), bounds)?;
    let out = super::try_vec(op, checked.view().len())?;
    Ok(kernels::take::take(&x, &checked, out))
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
        return Err(take_from_empty(input.shape(), index.shape()));
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
    let (d, x_shape, idx_shape) = along_dim_shapes(OP, input.shape(), index.shape(), dim)?;
    let x = input.view().into_dyn();
    let idx = index.view().into_dyn();
    let internal = || {
        Error::shape(format!(
            "{OP}: broadcasting failed (input {}, index {})",
            fmt_shape(input.shape()),
            fmt_shape(index.shape())
        ))
    };
    let xb = x.broadcast(IxDyn(&x_shape)).ok_or_else(internal)?;
    let ib = idx.broadcast(IxDyn(&idx_shape)).ok_or_else(internal)?;
    let size = x_shape[d];
    // In-range values (the usual case) take the plain lookup, checked as they are read; if one is
    // not, the lookup runs again with every value reduced modulo `size`.
    let fused = super::try_vec(OP, ib.len())
        .ok()
        .and_then(|out| kernels::gather::gather_checking(&xb, d, &ib, out));
    let data = match fused {
        Some(data) => data,
        None => {
            let checked = CheckedIndex::new(OP, ib, d, size, Bounds::Modulo)?;
            let out = super::try_vec(OP, checked.view().len())?;
            kernels::gather::gather(&xb, d, &checked, out)
        }
    };
    Ok(ArrayD::from_shape_vec(IxDyn(&idx_shape), data).expect("output has the broadcast shape"))
}

/// The checks of `take_along_dim(input, index, dim)` with an integer `dim`, from the shapes: the
/// normalised dim and the shapes that input and index broadcast to (they differ along `dim`
/// only).
pub(crate) fn along_dim_shapes(
    op: &str,
    input_shape: &[usize],
    index_shape: &[usize],
    dim: isize,
) -> Result<(usize, Vec<usize>, Vec<usize>)> {
    let nd = input_shape.len();
    if index_shape.len() != nd {
        return Err(Error::rank(format!(
            "{op}: input and indices should have the same number of dimensions, but got {nd} dimensions for input, and {} dimensions for indices (input {}, indices {}, dim {dim})",
            index_shape.len(),
            fmt_shape(input_shape),
            fmt_shape(index_shape)
        ))
        .with_hint(rank_hint(input_shape, index_shape)));
    }
    if nd == 0 {
        return Err(Error::new(
            ErrorKind::DimOutOfRange,
            format!("{op}: Dimension specified as {dim} but tensor has no dimensions"),
        )
        .with_hint("a 0-d input has no dim to take along: pass dim None to index its single element, or give it an axis with `input.insert_axis(Axis(0))`"));
    }
    let d = normalize_dim(op, dim, nd)?;
    let bcast_hint = |e: Error| {
        e.with_hint(format!(
            "{op} broadcasts input and index on every dim but {d}: there, each pair of sizes must be equal or one of them 1 (input {}, index {})",
            fmt_shape(input_shape),
            fmt_shape(index_shape)
        ))
    };
    let mut self_sizes = input_shape.to_vec();
    self_sizes[d] = index_shape[d];
    let idx_shape = broadcast_shapes(&self_sizes, index_shape).map_err(bcast_hint)?;
    let mut idx_sizes = index_shape.to_vec();
    idx_sizes[d] = input_shape[d];
    let x_shape = broadcast_shapes(&idx_sizes, input_shape).map_err(bcast_hint)?;
    Ok((d, x_shape, idx_shape))
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
            "the index has {} dims more than the input: remove size-1 axes with `index.index_axis(Axis(a), 0)`, or pass dim None to index the flattened input",
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

/// Random shapes and the memory layouts the tests run every op on.
#[cfg(test)]
pub(crate) mod test_layouts {
    use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn, Slice};

    /// A small deterministic generator (xorshift64*).
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        /// Uniform in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// Uniform in `lo..hi`.
        pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
            lo + (self.next() % (hi - lo) as u64) as i64
        }
        /// A shape of rank `0..=max_rank` with sizes `0..=max_len` (sizes 0 only when `empty_ok`).
        pub(crate) fn shape(
            &mut self,
            max_rank: usize,
            max_len: usize,
            empty_ok: bool,
        ) -> Vec<usize> {
            let rank = self.below(max_rank + 1);
            let lo = usize::from(!empty_ok);
            (0..rank)
                .map(|_| lo + self.below(max_len + 1 - lo))
                .collect()
        }
    }

    /// Layout kinds: 0 standard, 1 every axis reversed (negative strides), 2 transposed,
    /// 3 every other row of a larger array, 4 broadcast (stride 0; read-only).
    pub(crate) const KINDS: usize = 5;
    /// The kinds that can be written through.
    pub(crate) const MUT_KINDS: usize = 4;

    fn effective(kind: usize, shape: &[usize]) -> usize {
        if shape.is_empty() && kind >= 3 {
            0
        } else {
            kind
        }
    }

    /// The array to view, filled with random values, for `kind` and the logical `shape`.
    pub(crate) fn backing(kind: usize, shape: &[usize], rng: &mut Rng) -> ArrayD<i32> {
        let mut b = shape.to_vec();
        match effective(kind, shape) {
            2 => b.reverse(),
            3 => b[0] = 2 * b[0] + 1,
            4 => {
                let a = rng.below(b.len());
                b[a] = 1;
            }
            _ => {}
        }
        ArrayD::from_shape_fn(IxDyn(&b), |_| rng.range(-1000, 1000) as i32)
    }

    /// The view of `b` with the logical `shape`.
    pub(crate) fn view<'a>(
        kind: usize,
        b: &'a ArrayD<i32>,
        shape: &[usize],
    ) -> ArrayViewD<'a, i32> {
        match effective(kind, shape) {
            1 => b.slice_each_axis(|_| Slice::new(0, None, -1)),
            2 => b.view().reversed_axes(),
            3 => b.slice_axis(Axis(0), Slice::new(1, None, 2)),
            4 => b.broadcast(IxDyn(shape)).expect("broadcastable"),
            _ => b.view(),
        }
    }

    /// The mutable view of `b` with the logical `shape` (`kind < MUT_KINDS`).
    pub(crate) fn view_mut<'a>(
        kind: usize,
        b: &'a mut ArrayD<i32>,
        shape: &[usize],
    ) -> ArrayViewMutD<'a, i32> {
        match effective(kind, shape) {
            1 => b.slice_each_axis_mut(|_| Slice::new(0, None, -1)),
            2 => b.view_mut().reversed_axes(),
            3 => b.slice_axis_mut(Axis(0), Slice::new(1, None, 2)),
            _ => b.view_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_layouts::{KINDS, Rng, backing, view};
    use super::*;
    use ndarray::{Array1, Array2, ArrayViewD, arr0, array};

    fn flat<T: Copy>(a: &ArrayViewD<'_, T>) -> Vec<T> {
        a.iter().copied().collect()
    }

    #[test]
    fn take_matches_pytorch_worked_example() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let out = take(&x, &array![[0i64, 11], [-1, -12]]).unwrap();
        assert_eq!(out, array![[0.0, 11.0], [11.0, 0.0]]);
    }

    #[test]
    fn take_reads_the_logical_order_of_every_layout() {
        let mut rng = Rng(0x5eed_0001);
        for case in 0..600 {
            let shape = rng.shape(4, 4, case % 7 != 0);
            let kind = case % KINDS;
            let b = backing(kind, &shape, &mut rng);
            let x = view(kind, &b, &shape);
            let n = x.len() as i64;
            let ishape = rng.shape(3, 4, true);
            let ikind = rng.below(KINDS);
            let mut ib = backing(ikind, &ishape, &mut rng);
            ib.mapv_inplace(|v| {
                if n == 0 {
                    v
                } else {
                    (v as i64).rem_euclid(2 * n) as i32 - n as i32
                }
            });
            let idx = view(ikind, &ib, &ishape);
            let got = take(&x, &idx);
            if n == 0 && !idx.is_empty() {
                assert_eq!(got.unwrap_err().kind(), ErrorKind::IndexOutOfBounds);
                continue;
            }
            let got = got.unwrap();
            assert_eq!(got.shape(), idx.shape());
            let xs = flat(&x);
            let want: Vec<i32> = idx
                .iter()
                .map(|&v| xs[if v < 0 { v as i64 + n } else { v as i64 } as usize])
                .collect();
            assert_eq!(
                got.iter().copied().collect::<Vec<_>>(),
                want,
                "case {case}: {shape:?} kind {kind}"
            );
        }
    }

    #[test]
    fn take_accepts_every_index_type_and_zero_d_arrays() {
        let x = array![[1u8, 2], [3, 4]];
        assert_eq!(take(&x, &array![3u8, 0]).unwrap(), array![4, 1]);
        assert_eq!(take(&x, &array![-1i8]).unwrap(), array![4]);
        assert_eq!(take(&x, &arr0(2usize)).unwrap(), arr0(3));
        assert_eq!(
            take(&arr0(true), &array![0i64, -1, 0]).unwrap(),
            array![true, true, true]
        );
    }

    #[test]
    fn take_out_of_range_reports_pytorch_text_value_and_position() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = take(&x, &array![[0i64, 1], [12, 2]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(
            e.message()
                .contains("out of range: tried to access index 12 on a tensor of 12 elements"),
            "{e}"
        );
        assert_eq!(
            (e.index_value(), e.coordinate()),
            (Some(12), Some(&[1usize, 0][..]))
        );
        assert!(e.hint().unwrap().contains("11 (or -1)"));
        let e = take(&x, &array![-13i64]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.message().contains("index -13"));
    }

    #[test]
    fn take_from_empty_input_needs_an_empty_index() {
        let x = Array1::<i16>::zeros(0);
        let e = take(&x, &array![0i64]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.message().contains("take from an empty tensor"));
        let out = take(&x, &Array2::<i64>::zeros((2, 0))).unwrap();
        assert_eq!(out.shape(), &[2, 0]);
    }

    #[test]
    fn take_is_the_same_on_one_thread_and_many() {
        let b = Array2::from_shape_fn((400, 300), |(i, j)| (i * 1000 + j) as f64);
        let x = b.t();
        let mut rng = Rng(7);
        let idx = Array1::from_shape_fn(150_000, |_| rng.range(-120_000, 120_000));
        let many = take(&x, &idx).unwrap();
        let one = crate::kernels::test_pool(1).install(|| take(&x, &idx).unwrap());
        assert_eq!(many, one);
        let xs: Vec<f64> = x.iter().copied().collect();
        for (k, &v) in idx.iter().enumerate().step_by(997) {
            assert_eq!(many[k], xs[if v < 0 { v + 120_000 } else { v } as usize]);
        }
    }

    #[test]
    fn take_along_dim_matches_pytorch_worked_example() {
        let x = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as f32);
        let out = take_along_dim(&x, &array![[0i64, 3]], Some(1)).unwrap();
        assert_eq!(out, array![[0.0, 3.0], [4.0, 7.0], [8.0, 11.0]].into_dyn());
    }

    #[test]
    fn take_along_dim_wraps_modulo_the_dim_size() {
        let x = array![[0, 1, 2, 3], [4, 5, 6, 7]];
        let out = take_along_dim(&x, &array![[-1i64, -5, 4, 9]], Some(1)).unwrap();
        assert_eq!(out, array![[3, 3, 0, 1], [7, 7, 4, 5]].into_dyn());
        let out = take_along_dim(&x, &array![[i64::MIN], [i64::MAX]], Some(0)).unwrap();
        assert_eq!(out, x.clone().into_dyn());
    }

    /// The reference: broadcast by hand, coordinate by coordinate.
    fn reference_along_dim(
        x: &ArrayViewD<'_, i32>,
        idx: &ArrayViewD<'_, i32>,
        d: usize,
    ) -> ArrayD<i32> {
        let nd = x.ndim();
        let out_shape: Vec<usize> = (0..nd)
            .map(|a| {
                if a == d {
                    idx.shape()[a]
                } else {
                    x.shape()[a].max(idx.shape()[a])
                }
            })
            .collect();
        ArrayD::from_shape_fn(IxDyn(&out_shape), |c| {
            let ic: Vec<usize> = (0..nd)
                .map(|a| if idx.shape()[a] == 1 { 0 } else { c[a] })
                .collect();
            let v = idx[IxDyn(&ic)] as i64;
            let xc: Vec<usize> = (0..nd)
                .map(|a| {
                    if a == d {
                        v.rem_euclid(x.shape()[d] as i64) as usize
                    } else if x.shape()[a] == 1 {
                        0
                    } else {
                        c[a]
                    }
                })
                .collect();
            x[IxDyn(&xc)]
        })
    }

    #[test]
    fn take_along_dim_broadcasts_both_ways_on_every_layout() {
        let mut rng = Rng(0x5eed_0002);
        for case in 0..600 {
            let nd = 1 + rng.below(4);
            let d = rng.below(nd);
            let (mut xs, mut is) = (vec![0; nd], vec![0; nd]);
            for a in 0..nd {
                let s = 1 + rng.below(4);
                (xs[a], is[a]) = match rng.below(3) {
                    0 => (s, s),
                    1 => (1, s),
                    _ => (s, 1),
                };
            }
            xs[d] = 1 + rng.below(4);
            is[d] = rng.below(5);
            let (xk, ik) = (case % KINDS, rng.below(KINDS));
            let xb = backing(xk, &xs, &mut rng);
            let mut ib = backing(ik, &is, &mut rng);
            ib.mapv_inplace(|v| v % 11);
            let (x, idx) = (view(xk, &xb, &xs), view(ik, &ib, &is));
            let dim = if rng.below(2) == 0 {
                d as isize
            } else {
                d as isize - nd as isize
            };
            let got = take_along_dim(&x, &idx, Some(dim)).unwrap();
            assert_eq!(
                got,
                reference_along_dim(&x, &idx, d),
                "case {case}: x {xs:?} idx {is:?} dim {dim}"
            );
        }
    }

    #[test]
    fn take_along_dim_without_dim_reads_the_flattening_and_rejects_negatives() {
        let b = Array2::from_shape_fn((3, 4), |(i, j)| (4 * i + j) as i64);
        let x = b.t();
        assert_eq!(
            take_along_dim(&x, &array![[1i64, 4], [11, 0]], None).unwrap(),
            array![4, 5, 11, 0].into_dyn()
        );
        assert_eq!(
            take_along_dim(&arr0(5u8), &arr0(0i64), None).unwrap(),
            array![5u8].into_dyn()
        );
        let e = take_along_dim(&x, &array![-1i64], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(
            e.message()
                .contains("index -1 is out of bounds for dimension 0 with size 12"),
            "{e}"
        );
        assert_eq!(
            take_along_dim(&x, &array![12i64], None).unwrap_err().kind(),
            ErrorKind::IndexOutOfBounds
        );
        assert_eq!(
            take_along_dim(&x, &Array1::<i64>::zeros(0), None)
                .unwrap()
                .shape(),
            &[0]
        );
    }

    #[test]
    fn take_along_dim_errors_follow_pytorch() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = take_along_dim(&x, &array![0i64, 1], Some(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        assert!(
            e.message()
                .contains("2 dimensions for input, and 1 dimensions for indices")
        );
        let e = take_along_dim(&arr0(1.0f32), &arr0(0i64), Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
        assert_eq!(
            take_along_dim(&arr0(1.0f32), &arr0(0i64), Some(-1))
                .unwrap_err()
                .kind(),
            ErrorKind::DimOutOfRange
        );
        assert_eq!(
            take_along_dim(&x, &array![[0i64]], Some(2))
                .unwrap_err()
                .kind(),
            ErrorKind::DimOutOfRange
        );
        let e = take_along_dim(&x, &Array2::<i64>::zeros((2, 2)), Some(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.message().contains("The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"), "{e}");
        let empty = Array2::<f32>::zeros((3, 0));
        let e = take_along_dim(&empty, &Array2::<i64>::zeros((3, 2)), Some(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(
            take_along_dim(&empty, &Array2::<i64>::zeros((3, 0)), Some(1))
                .unwrap()
                .shape(),
            &[3, 0]
        );
    }
}
