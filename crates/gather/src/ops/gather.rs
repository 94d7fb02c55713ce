//! `gather`: read along one dim at positions given by an index of the input's rank.
//!
//! ```text
//! gather(input, dim=1, index)            out[i][j] = input[i][index[i][j]]
//!
//!  input               index        out
//!  ┌────┬────┬────┐    ┌───┬───┐    ┌────┬────┐
//!  │ 10 │ 20 │ 30 │    │ 0 │ 2 │ →  │ 10 │ 30 │   out[0][1] = input[0][index[0][1]] = input[0][2]
//!  ├────┼────┼────┤    ├───┼───┤    ├────┼────┤
//!  │ 40 │ 50 │ 60 │    │ 1 │ 0 │ →  │ 50 │ 40 │   out[1][0] = input[1][index[1][0]] = input[1][1]
//!  └────┴────┴────┘    └───┴───┘    └────┴────┘
//! ```
//!
//! The rules, as PyTorch's:
//! - the index has the input's number of dims (a 0-d array counts as 1-d);
//! - on every dim but `dim` the index is no larger than the input (it may be larger along `dim`);
//! - the output has the index's shape; every index value is in `0..input.shape[dim]`.
//!
//! An index with no elements skips every check but `dim`'s and gives an empty output.

use ndarray::{Array, ArrayBase, ArrayView, Data, Dimension, IxDyn};

use super::{check_index_fits, check_index_rank, view_1d_if_scalar};
use crate::dims::normalize_dim;
use crate::element::Element;
use crate::error::Result;
use crate::index::{Bounds, CheckedIndex, IndexElem};
use crate::kernels;

/// `torch.gather(input, dim, index)`: `out[p] = input[p with p[dim] := index[p]]`.
///
/// ```
/// use ndarray::array;
/// let x = array![[10, 20, 30], [40, 50, 60]];
/// let out = gather::gather(&x, 1, &array![[0, 2], [1, 0]]).unwrap();
/// assert_eq!(out, array![[10, 30], [50, 40]]);
///
/// // Top-k patches: an expanded (stride-0) index is never materialised.
/// let patches = ndarray::Array::from_shape_fn((2, 4, 3), |(b, n, d)| (100 * b + 10 * n + d) as f32);
/// let keep = array![[3, 1], [0, 2]];
/// let idx = keep.view().insert_axis(ndarray::Axis(2));
/// let idx = idx.broadcast((2, 2, 3)).unwrap();
/// let picked = gather::gather(&patches, 1, &idx).unwrap();
/// assert_eq!(picked.shape(), &[2, 2, 3]);
/// assert_eq!(picked[[0, 0, 2]], 32.0);
/// assert_eq!(picked[[1, 1, 0]], 120.0);
/// ```
pub fn gather<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    dim: isize,
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
    gather_mapped("gather", input, dim, index, Bounds::Strict)
}

/// [`gather()`] with the index values mapped under `bounds`; `op` names the op in errors.
pub(crate) fn gather_mapped<T, S, D, I, SI, DI>(
    op: &str,
    input: &ArrayBase<S, D>,
    dim: isize,
    index: &ArrayBase<SI, DI>,
    bounds: Bounds,
) -> Result<Array<T, DI>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let data = gather_flat(
        op,
        &input.view().into_dyn(),
        dim,
        &index.view().into_dyn(),
        bounds,
    )?;
    Ok(Array::from_shape_vec(index.raw_dim(), data).expect("output has the index's shape"))
}

/// [`gather_mapped`] on dynamic-rank views, into the row-major data of the index's shape:
/// compiled per element and index type, not per storage and rank of each operand.
fn gather_flat<T: Element, I: IndexElem>(
    op: &str,
    input: &ArrayView<'_, T, IxDyn>,
    dim: isize,
    index: &ArrayView<'_, I, IxDyn>,
    bounds: Bounds,
) -> Result<Vec<T>> {
    let dim = normalize_dim(op, dim, input.ndim())?;
    if index.is_empty() {
        return Ok(Vec::new());
    }
    check_index_rank(op, "input", input.shape(), index.shape(), dim)?;
    let (x1, idx1);
    let x = if input.ndim() == 0 {
        x1 = view_1d_if_scalar(input);
        &x1
    } else {
        input
    };
    let idx = if index.ndim() == 0 {
        idx1 = view_1d_if_scalar(index);
        &idx1
    } else {
        index
    };
    check_index_fits(op, x.shape(), idx.shape(), None, dim)?;
    // Under the default policy the kernel checks each value as it reads it (no separate pass over
    // the index); if one is out of range (or the output cannot be allocated), the full check
    // below finds the first such value for the error.
    let data = match bounds {
        Bounds::Strict => super::try_vec(op, idx.len())
            .ok()
            .and_then(|out| kernels::gather::gather_checking(x, dim, idx, out)),
        _ => None,
    };
    let data = match data {
        Some(data) => data,
        None => {
            let checked = CheckedIndex::new(op, idx.view(), dim, x.shape()[dim], bounds)?;
            let out = super::try_vec(op, checked.view().len())?;
            kernels::gather::gather(x, dim, &checked, out)
        }
    };
    Ok(data)
}

/// Method form of [`gather()`], on any ndarray array.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let logits = array![[0.1f32, 0.7, 0.2], [0.5, 0.3, 0.2]];
/// let labels = array![[1], [0]]; // one label per row, shape [2, 1]
/// assert_eq!(logits.gather(-1, &labels).unwrap(), array![[0.7], [0.5]]);
/// ```
pub trait GatherExt<T: Element> {
    /// See [`gather()`].
    fn gather<I, SI, DI>(&self, dim: isize, index: &ArrayBase<SI, DI>) -> Result<Array<T, DI>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> GatherExt<T> for ArrayBase<S, D> {
    fn gather<I, SI, DI>(&self, dim: isize, index: &ArrayBase<SI, DI>) -> Result<Array<T, DI>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        gather(self, dim, index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{Array3, ArrayD, IxDyn, arr0, array, s};

    /// An index that is a materialised broadcast reads bitwise what its stride-0 form reads (the
    /// dynamic layer hands the kernels the one for the other), and a bad value in either is
    /// reported at the same position.
    #[test]
    fn a_materialised_broadcast_index_reads_what_its_stride_zero_form_reads() {
        let x = ndarray::Array2::from_shape_fn((50, 128), |(i, j)| (i * 128 + j) as f64);
        let rows = ndarray::Array1::from_shape_fn(300, |i| ((i * 7) % 50) as i32);
        let spread = rows.view().insert_axis(ndarray::Axis(1));
        let spread = spread.broadcast((300, 128)).unwrap();
        let mut full = spread.to_owned();
        assert_eq!(
            gather(&x, 0, &full).unwrap(),
            gather(&x, 0, &spread).unwrap()
        );
        full[[299, 127]] = 50;
        let e = gather(&x, 0, &full).unwrap_err();
        assert_eq!(
            (e.index_value(), e.coordinate()),
            (Some(50), Some(&[299usize, 127][..]))
        );
        full.row_mut(299).fill(50);
        let rows = full.column(0).to_owned().insert_axis(ndarray::Axis(1));
        for e in [
            gather(&x, 0, &full).unwrap_err(),
            gather(&x, 0, &rows.broadcast((300, 128)).unwrap()).unwrap_err(),
        ] {
            assert_eq!(
                (e.index_value(), e.coordinate()),
                (Some(50), Some(&[299usize, 0][..]))
            );
        }
    }

    #[test]
    fn seed_example_matches_pytorch() {
        let x = array![[10, 20, 30], [40, 50, 60]];
        assert_eq!(
            gather(&x, 1, &array![[0i64, 2], [1, 0]]).unwrap(),
            array![[10, 30], [50, 40]]
        );
        assert_eq!(
            gather(&x, -1, &array![[0i64, 2], [1, 0]]).unwrap(),
            array![[10, 30], [50, 40]]
        );
    }

    #[test]
    fn zero_d_input_acts_as_one_element_vector() {
        let x = arr0(5.0f32);
        assert_eq!(gather(&x, 0, &arr0(0i64)).unwrap(), arr0(5.0));
        assert_eq!(gather(&x, 0, &array![0i64, 0]).unwrap(), array![5.0, 5.0]);
        assert_eq!(
            gather(&array![5.0f32, 6.0], 0, &arr0(1i64)).unwrap(),
            arr0(6.0)
        );
        let two_d = ArrayD::<i64>::zeros(IxDyn(&[1, 1]));
        assert_eq!(
            gather(&x, 0, &two_d).unwrap_err().kind(),
            ErrorKind::RankMismatch
        );
    }

    #[test]
    fn index_may_be_longer_than_input_along_dim() {
        let x = Array3::from_shape_fn((2, 3, 4), |(a, b, c)| (a * 100 + b * 10 + c) as i64);
        let idx = Array3::from_shape_fn((2, 9, 4), |(_, b, _)| b % 3);
        let out = gather(&x, 1, &idx).unwrap();
        assert_eq!(out[[1, 7, 3]], 113);
    }

    #[test]
    fn negative_and_reversed_strides_read_the_logical_elements() {
        let x = Array3::from_shape_fn((3, 4, 5), |(a, b, c)| (a * 100 + b * 10 + c) as i32);
        let xv = x.slice(s![..;-1, .., ..;2]);
        let idx = array![[[3i64, 0, 1], [2, 2, 2]], [[1, 1, 0], [0, 3, 3]]];
        let idx_t = idx.t(); // shape [3, 2, 2], strided
        let out = gather(&xv, 1, &idx_t).unwrap();
        for ((a, b, c), v) in out.indexed_iter() {
            assert_eq!(*v, xv[[a, idx_t[[a, b, c]] as usize, c]]);
        }
    }

    #[test]
    fn errors_name_the_numbers_and_the_fix() {
        let roi = Array3::<f32>::zeros((128, 21, 4));
        let labels = ndarray::Array1::<i64>::zeros(128);
        let e = gather(&roi, 1, &labels).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        let text = e.to_string();
        assert!(text.contains("[128, 1, 4]"), "{text}");
        assert!(
            text.contains(".insert_axis(Axis(1)).insert_axis(Axis(2)).broadcast((128, 1, 4))"),
            "{text}"
        );

        let x = array![[1.0f32, 2.0], [3.0, 4.0]];
        let e = gather(&x, 1, &array![[0i64, -1]]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.coordinate(), Some(&[0usize, 1][..]));
        assert!(e.hint().unwrap().contains("negative"));
        assert_eq!(
            gather(&x, 2, &array![[0i64]]).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
        assert_eq!(
            gather(&x, 1, &array![[0i64], [0], [0]]).unwrap_err().kind(),
            ErrorKind::ShapeMismatch
        );
    }

    #[test]
    fn empty_index_skips_shape_checks() {
        let x = array![[1.0f32, 2.0], [3.0, 4.0]];
        let idx = ArrayD::<u8>::zeros(IxDyn(&[0, 5, 2]));
        assert_eq!(gather(&x, 1, &idx).unwrap().shape(), &[0, 5, 2]);
        assert_eq!(
            gather(&x, 5, &idx).unwrap_err().kind(),
            ErrorKind::DimOutOfRange
        );
    }
}
