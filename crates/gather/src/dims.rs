//! Dims and shapes: negative dims, the 0-d convention, broadcasting.
//!
//! `dim` is an `isize` and counts from the end when negative, as in PyTorch. For the gather family a
//! 0-d array behaves as a 1-d array of one element, so dims `0` and `-1` are valid for it.
//!
//! ```
//! use gather::dims::{normalize_dim, broadcast_shapes};
//! assert_eq!(normalize_dim("gather", -1, 3).unwrap(), 2);
//! assert_eq!(normalize_dim("gather", 0, 0).unwrap(), 0);
//! assert!(normalize_dim("gather", 3, 3).is_err());
//! assert_eq!(broadcast_shapes(&[3, 1], &[1, 4]).unwrap(), vec![3, 4]);
//! ```

use crate::error::{Error, ErrorKind, Result, fmt_shape};

/// Wraps `dim` against a tensor of `ndim` dimensions (a 0-d tensor counts as 1-d).
///
/// The error is PyTorch's `Dimension out of range (expected to be in range of [-N, N-1], but got D)`,
/// with a hint for the usual off-by-one.
///
/// ```
/// let e = gather::dims::normalize_dim("gather", 2, 2).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::DimOutOfRange);
/// assert!(e.to_string().contains("[-2, 1], but got 2"));
/// ```
pub fn normalize_dim(op: &str, dim: isize, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as isize;
    if dim >= -n && dim < n {
        return Ok(if dim < 0 {
            (dim + n) as usize
        } else {
            dim as usize
        });
    }
    Err(dim_error(op, dim, ndim))
}

/// The error for a `dim` outside `[-ndim, ndim)`.
pub(crate) fn dim_error(op: &str, dim: isize, ndim: usize) -> Error {
    let n = ndim.max(1) as isize;
    let msg = format!(
        "{op}: Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
        -n,
        n - 1
    );
    let hint = if dim == n {
        format!(
            "dims count from 0, so the last dim of a {ndim}-d array is {} (or -1)",
            n - 1
        )
    } else if dim == -n - 1 {
        format!("negative dims count from the end: -1 is the last dim and -{n} the first")
    } else {
        format!("a {ndim}-d array has dims 0..{n} (or -{n}..-1 counting from the end)")
    };
    Error::new(ErrorKind::DimOutOfRange, msg).with_hint(hint)
}

/// NumPy/PyTorch broadcasting of two shapes (aligned at the end; sizes equal or one of them 1).
///
/// ```
/// use gather::dims::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
/// assert!(broadcast_shapes(&[3], &[2]).is_err());
/// // Where several dims differ, the last one is named, as PyTorch names it.
/// let e = broadcast_shapes(&[2, 3], &[0, 0]).unwrap_err();
/// assert!(e.message().contains("tensor b (0) at non-singleton dimension 1"), "{e}");
/// ```
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    // From the last dim, as PyTorch's `infer_size` checks: the error names the dim it names.
    for i in (0..n).rev() {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::new(
                ErrorKind::ShapeMismatch,
                format!(
                    "The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i} (shapes {} and {})",
                    fmt_shape(a),
                    fmt_shape(b)
                ),
            )
            .with_hint("broadcasting aligns shapes at their last dims; each pair of sizes must be equal or one of them 1"));
        };
    }
    Ok(out)
}

/// The number of elements of `shape`, or an error when no array can have that shape: ndarray
/// requires the product of the *nonzero* lengths to fit in `isize`, even for an empty array.
///
/// ```
/// assert_eq!(gather::dims::checked_numel(&[2, 3]).unwrap(), 6);
/// assert!(gather::dims::checked_numel(&[usize::MAX, 2]).is_err());
/// // Empty, but still not a shape ndarray accepts (2^62 * 2^62 overflows), wherever the 0 is.
/// assert!(gather::dims::checked_numel(&[0, 1 << 62, 1 << 62]).is_err());
/// assert!(gather::dims::checked_numel(&[1 << 62, 1 << 62, 0]).is_err());
/// assert_eq!(gather::dims::checked_numel(&[0, 1 << 40]).unwrap(), 0);
/// ```
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    numel(shape).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "shape {} has more elements than fit in memory",
                fmt_shape(shape)
            ),
        )
    })
}

/// The element count of `shape` if ndarray accepts it (the product of the nonzero lengths fits in
/// `isize`), else `None`.
pub(crate) fn numel(shape: &[usize]) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= isize::MAX as usize)?;
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// Row-major (C-order) strides of `shape`, in elements.
///
/// ```
/// assert_eq!(gather::dims::row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
/// ```
pub fn row_major_strides(shape: &[usize]) -> Vec<isize> {
    Small::row_major(shape).to_vec()
}

/// A short list of per-axis numbers (positions, strides): on the stack up to 8 axes, so that
/// a small call pays no allocation for it.
pub(crate) enum Small<T> {
    Stack([T; 8], usize),
    Heap(Vec<T>),
}

impl<T: Copy + Default> Small<T> {
    /// `n` copies of `T::default()`.
    pub(crate) fn zeros(n: usize) -> Small<T> {
        if n <= 8 {
            Small::Stack([T::default(); 8], n)
        } else {
            Small::Heap(vec![T::default(); n])
        }
    }

    /// A copy of `v`.
    pub(crate) fn from_slice(v: &[T]) -> Small<T> {
        let mut s = Small::zeros(v.len());
        s.copy_from_slice(v);
        s
    }
}

impl Small<isize> {
    /// Row-major (C-order) strides of `shape`, in elements ([`row_major_strides`] on the
    /// stack).
    pub(crate) fn row_major(shape: &[usize]) -> Small<isize> {
        let mut strides = Small::zeros(shape.len());
        let mut acc = 1isize;
        for i in (0..shape.len()).rev() {
            strides[i] = acc;
            acc = acc.wrapping_mul(shape[i].max(1) as isize);
        }
        strides
    }
}

impl<T> std::ops::Deref for Small<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Small::Stack(a, n) => &a[..*n],
            Small::Heap(v) => v,
        }
    }
}

impl<T> std::ops::DerefMut for Small<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Small::Stack(a, n) => &mut a[..*n],
            Small::Heap(v) => v,
        }
    }
}

/// `value` over `shape` without copying it: a read-only view whose strides are all 0 (the
/// element of an op's scalar form, or the one that every position of an index counts).
pub(crate) fn splat<'a, T>(
    value: &'a T,
    shape: &[usize],
) -> ndarray::ArrayView<'a, T, ndarray::IxDyn> {
    use ndarray::ShapeBuilder;
    let zeros = ndarray::IxDyn(&vec![0; shape.len()]);
    ndarray::ArrayView::from_shape(
        ndarray::IxDyn(shape).strides(zeros),
        std::slice::from_ref(value),
    )
    .expect("a read-only view may repeat its one element (ndarray 0.16 and later)")
}

/// The stride of the innermost axis longer than 1: the step along a view's rows, by which a
/// transposed view is told from a row-major one. `None` for a view of at most one element.
pub(crate) fn inner_stride(shape: &[usize], strides: &[isize]) -> Option<isize> {
    shape
        .iter()
        .zip(strides)
        .rev()
        .find(|&(&len, _)| len > 1)
        .map(|(_, &s)| s)
}

/// `a` as a 1-d view where at most one of its axes is longer than 1 (the others dropped): a
/// strided vector, such as the compact form of a materialised broadcast, walked with a plain
/// loop where ndarray's iterator over a dynamic-rank view steps a coordinate per element.
/// `None` for a 0-d view or one with two axes longer than 1.
pub(crate) fn as_line<'a, T>(
    a: &ndarray::ArrayView<'a, T, ndarray::IxDyn>,
) -> Option<ndarray::ArrayView1<'a, T>> {
    let mut line = a.clone();
    for ax in (0..line.ndim()).rev() {
        if line.shape()[ax] == 1 && line.ndim() > 1 {
            line = line.index_axis_move(ndarray::Axis(ax), 0);
        }
    }
    line.into_dimensionality::<ndarray::Ix1>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_line_drops_length_one_axes_around_one_longer_axis() {
        let m = ndarray::Array2::from_shape_fn((4, 3), |(i, j)| i * 3 + j).into_dyn();
        let col = m
            .slice(ndarray::s![.., 1..2])
            .insert_axis(ndarray::Axis(0))
            .into_dyn();
        assert_eq!(as_line(&col).unwrap().to_vec(), vec![1, 4, 7, 10]);
        let one = m.slice(ndarray::s![2..3, 0..1]).into_dyn();
        assert_eq!(as_line(&one).unwrap().to_vec(), vec![6]);
        assert!(as_line(&m.view()).is_none());
        assert!(as_line(&ndarray::arr0(5).into_dyn().view()).is_none());
    }

    #[test]
    fn splat_repeats_one_element_over_any_shape() {
        for shape in [&[][..], &[0, 3], &[5], &[2, 3, 4]] {
            let v = splat(&2.5f32, shape);
            assert_eq!(v.shape(), shape);
            assert!(v.strides().iter().all(|&s| s == 0));
            assert_eq!(v.len(), shape.iter().product::<usize>());
            assert!(v.iter().all(|&x| x == 2.5));
        }
    }
}
