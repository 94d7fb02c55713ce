//! Index elements and bounds: any primitive integer indexes, every value is checked once, before
//! any kernel runs and before any write.
//!
//! Offsets are computed in 64 bits whatever the index type. Values are read through
//! [`IndexElem::to_i64`]; unsigned values above `i64::MAX` saturate, which is out of bounds for any
//! array that fits in memory.
//!
//! ```
//! use gather::prelude::*;
//! use ndarray::array;
//! let x = array![[10, 20, 30], [40, 50, 60]];
//! // u8, i32, usize ... indices all work, for every op.
//! assert_eq!(x.gather(1, &array![[0u8, 2], [1, 0]]).unwrap(), array![[10, 30], [50, 40]]);
//! assert_eq!(x.gather(1, &array![[0usize, 2], [1, 0]]).unwrap(), array![[10, 30], [50, 40]]);
//! ```

use ndarray::{ArrayView, Dimension, IxDyn};

use crate::element::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::kernels::check::any_bad;

/// A primitive integer usable as an index.
///
/// ```
/// use gather::IndexElem;
/// assert_eq!(u64::MAX.to_i64(), i64::MAX);
/// assert_eq!((-3i8).to_i64(), -3);
/// ```
pub trait IndexElem:
    crate::kernels::words::Plain + Copy + Send + Sync + std::fmt::Debug + 'static
{
    /// The dtype tag of the index type (`usize`/`isize` report their 64-bit equivalent).
    const DTYPE: DType;
    /// The value as `i64`, saturating for unsigned values above `i64::MAX`.
    fn to_i64(self) -> i64;
}

macro_rules! index_elem {
    ($t:ty, $dt:expr) => {
        impl IndexElem for $t {
            const DTYPE: DType = $dt;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                #[allow(clippy::unnecessary_cast, irrefutable_let_patterns)]
                if let Ok(v) = i64::try_from(self) {
                    v
                } else {
                    i64::MAX
                }
            }
        }
    };
}

index_elem!(i8, DType::I8);
index_elem!(i16, DType::I16);
index_elem!(i32, DType::I32);
index_elem!(i64, DType::I64);
index_elem!(isize, DType::I64);
index_elem!(u8, DType::U8);
index_elem!(u16, DType::U16);
index_elem!(u32, DType::U32);
index_elem!(u64, DType::U64);
index_elem!(usize, DType::U64);

/// How index values map onto positions `0..size` of the indexed dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bounds {
    /// `0 <= i < size`; negative values are errors (gather, scatter, index_select, index_add ...).
    Strict,
    /// `-size <= i < size`; negative values count from the end (take, put, index_fill).
    Wrap,
    /// Any value, taken modulo `size` with a non-negative result (take_along_dim with a `dim`).
    Modulo,
}

impl Bounds {
    /// The position `value` selects in a dimension of `size`, or `None` when it is out of bounds.
    #[inline(always)]
    pub fn map(self, value: i64, size: usize) -> Option<usize> {
        let n = size as i64;
        match self {
            Bounds::Strict => (value >= 0 && value < n).then_some(value as usize),
            Bounds::Wrap => {
                if value >= 0 && value < n {
                    Some(value as usize)
                } else if value < 0 && value >= -n {
                    Some((value + n) as usize)
                } else {
                    None
                }
            }
            Bounds::Modulo => (n > 0).then(|| value.rem_euclid(n) as usize),
        }
    }
}

/// An index array whose every value has been checked against the size of the dimension it
/// indexes. Kernels take this token, so they never see an unchecked value.
#[derive(Debug)]
pub struct CheckedIndex<'a, I: IndexElem> {
    view: ArrayView<'a, I, IxDyn>,
    size: usize,
    bounds: Bounds,
}

impl<'a, I: IndexElem> CheckedIndex<'a, I> {
    /// Checks `view` against a dimension `dim` of `size` under `bounds`; `op` names the op in the
    /// error.
    pub(crate) fn new(
        op: &str,
        view: ArrayView<'a, I, IxDyn>,
        dim: usize,
        size: usize,
        bounds: Bounds,
    ) -> Result<Self> {
        check_bounds(op, &view, dim, size, bounds)?;
        Ok(CheckedIndex { view, size, bounds })
    }

    /// `f` of this vector index (0-d or 1-d) spread over `shape`: its values along axis `dim`,
    /// repeated along every other axis (a stride-0 view). The values are the checked ones, so
    /// they are not checked again. `None` when the index does not have `shape[dim]` values, or
    /// `shape` has no axis `dim`.
    pub(crate) fn spread<R>(
        &self,
        dim: usize,
        shape: &[usize],
        f: impl FnOnce(&CheckedIndex<'_, I>) -> R,
    ) -> Option<R> {
        let mut v = self.view.view();
        if v.ndim() > 1 || dim >= shape.len() {
            return None;
        }
        if v.ndim() == 0 {
            v = v.insert_axis(ndarray::Axis(0));
        }
        for _ in 0..dim {
            v = v.insert_axis(ndarray::Axis(0));
        }
        while v.ndim() < shape.len() {
            let k = v.ndim();
            v = v.insert_axis(ndarray::Axis(k));
        }
        let spread = CheckedIndex {
            view: v.broadcast(shape)?,
            size: self.size,
            bounds: self.bounds,
        };
        Some(f(&spread))
    }

    /// The values at `range` along `axis`: a part of checked values, so checked too.
    pub(crate) fn slice_axis(
        &self,
        axis: usize,
        range: std::ops::Range<usize>,
    ) -> CheckedIndex<'_, I> {
        CheckedIndex {
            view: self
                .view
                .slice_axis(ndarray::Axis(axis), ndarray::Slice::from(range)),
            size: self.size,
            bounds: self.bounds,
        }
    }

    /// The checked values.
    pub fn view(&self) -> &ArrayView<'a, I, IxDyn> {
        &self.view
    }

    /// The size every value was checked against.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The bounds policy the values were checked under.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }
}

/// The positions the values of `index` select under `bounds`, as strict `i64` positions, after
/// [`check_bounds`]: for the few ops whose policy moves values (negative positions counting from
/// the end), ahead of kernels compiled for strict positions only.
pub(crate) fn strict_positions<I: IndexElem>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    size: usize,
    bounds: Bounds,
) -> Result<StrictPositions> {
    check_bounds(op, index, dim, size, bounds)?;
    let positions = index.mapv(|v| crate::kernels::position(bounds, v.to_i64(), size) as i64);
    Ok(StrictPositions { positions, size })
}

/// The result of [`strict_positions`]: positions in `0..size` by construction, so that the
/// kernels take them without a second pass over them.
pub(crate) struct StrictPositions {
    positions: ndarray::ArrayD<i64>,
    size: usize,
}

impl StrictPositions {
    /// The positions.
    pub(crate) fn view(&self) -> ArrayView<'_, i64, IxDyn> {
        self.positions.view()
    }

    /// The positions as a [`CheckedIndex`] (strict, against the size they were mapped into).
    pub(crate) fn checked(&self) -> CheckedIndex<'_, i64> {
        CheckedIndex {
            view: self.positions.view(),
            size: self.size,
            bounds: Bounds::Strict,
        }
    }
}

/// Finds the first index value (in row-major order of `index`) that `bounds` rejects for a
/// dimension of `size`, and returns it with its coordinate. Axes of stride 0 (broadcast views) are
/// checked once, not once per repetition.
pub(crate) fn find_out_of_bounds<I: IndexElem>(
    index: &ArrayView<'_, I, IxDyn>,
    size: usize,
    bounds: Bounds,
) -> Option<(i64, Vec<usize>)> {
    if index.is_empty() {
        return None;
    }
    // Check only the distinct elements: collapse stride-0 axes to length 1.
    let mut view = index.view();
    for ax in 0..view.ndim() {
        if view.strides()[ax] == 0 && view.shape()[ax] > 1 {
            view.collapse_axis(ndarray::Axis(ax), 0);
        }
    }
    let n = size as i64;
    let bad = |v: i64| match bounds {
        Bounds::Strict => (v as u64) >= (n as u64),
        Bounds::Wrap => v < -n || v >= n,
        Bounds::Modulo => n == 0,
    };
    // Fast vectorisable scan on contiguous memory (in parallel when large); the coordinate is
    // searched only on failure.
    let found = if let Some(s) = view.as_slice_memory_order() {
        match bounds {
            Bounds::Strict => any_bad(s, |v| (v as u64) >= (n as u64)),
            // -n <= v < n, as one unsigned comparison.
            Bounds::Wrap => any_bad(s, |v| (v.wrapping_add(n) as u64) >= 2 * (n as u64)),
            Bounds::Modulo => n == 0,
        }
    } else {
        match crate::dims::as_line(&view) {
            Some(line) => line.iter().any(|v| bad(v.to_i64())),
            None => view.iter().any(|v| bad(v.to_i64())),
        }
    };
    if !found {
        return None;
    }
    view.indexed_iter()
        .find(|(_, v)| bad(v.to_i64()))
        .map(|(c, v)| (v.to_i64(), c.slice().to_vec()))
}

/// Checks every value of `index` against a dimension of `size`; the error names the op, the value,
/// its coordinate in the index array, and how to fix it.
pub(crate) fn check_bounds<I: IndexElem>(
    op: &str,
    index: &ArrayView<'_, I, IxDyn>,
    dim: usize,
    size: usize,
    bounds: Bounds,
) -> Result<()> {
    match find_out_of_bounds(index, size, bounds) {
        None => Ok(()),
        Some((value, coord)) => Err(out_of_bounds_error(op, value, coord, dim, size, bounds)),
    }
}

/// The error for an index value that `bounds` rejects.
pub(crate) fn out_of_bounds_error(
    op: &str,
    value: i64,
    coord: Vec<usize>,
    dim: usize,
    size: usize,
    bounds: Bounds,
) -> Error {
    let at = crate::error::fmt_shape(&coord);
    let msg = format!(
        "{op}: index {value} is out of bounds for dimension {dim} with size {size} (at index position {at})"
    );
    let hint = if size == 0 {
        format!(
            "dimension {dim} is empty, so no index can select from it; an empty index is the only valid one"
        )
    } else if value < 0 && bounds == Bounds::Strict {
        format!(
            "{op} does not wrap negative indices as Python does; valid values are 0..{size}: add {size} to negative values first (e.g. `index.mapv(|i| if i < 0 {{ i + {size} }} else {{ i }})`)"
        )
    } else if value == size as i64 {
        format!(
            "valid values are 0..{size} (the last is {}): indices count from 0, so this looks off by one",
            size - 1
        )
    } else {
        match bounds {
            Bounds::Wrap => format!("valid values are -{size}..{size}"),
            _ => format!("valid values are 0..{size}"),
        }
    };
    Error::new(ErrorKind::IndexOutOfBounds, msg)
        .with_hint(hint)
        .with_index(value, coord)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, array};

    #[test]
    fn each_bounds_rule_maps_negative_values_its_own_way() {
        assert_eq!(Bounds::Wrap.map(-1, 4), Some(3));
        assert_eq!(Bounds::Wrap.map(-5, 4), None);
        assert_eq!(Bounds::Modulo.map(-5, 4), Some(3));
        assert_eq!(Bounds::Strict.map(-1, 4), None);
    }

    #[test]
    fn first_bad_value_is_reported_with_its_coordinate() {
        let idx = array![[0i64, 1], [5, -1]].into_dyn();
        let (v, c) = find_out_of_bounds(&idx.view(), 4, Bounds::Strict).unwrap();
        assert_eq!((v, c), (5, vec![1, 0]));
        assert!(find_out_of_bounds(&idx.view(), 6, Bounds::Wrap).is_none());
    }

    #[test]
    fn broadcast_index_is_checked_through_its_stride_zero_axes() {
        let row = array![0u32, 9];
        let idx = row.broadcast((1000, 2)).unwrap().into_dyn();
        let (v, c) = find_out_of_bounds(&idx, 4, Bounds::Strict).unwrap();
        assert_eq!((v, c), (9, vec![0, 1]));
        let ok: Array2<u32> = Array2::zeros((3, 3));
        assert!(find_out_of_bounds(&ok.view().into_dyn(), 1, Bounds::Strict).is_none());
    }

    #[test]
    fn strided_vectors_are_checked_value_by_value() {
        // A column of a matrix with a length-1 axis after it (the compact form of a materialised
        // broadcast): every value is checked, the first bad one named with its coordinate.
        let mut m = Array2::from_shape_fn((50, 16), |(i, j)| (i % 7) as i64 + j as i64 * 100);
        let col = |m: &Array2<i64>| m.slice(ndarray::s![.., 0..1]).to_owned();
        assert!(
            find_out_of_bounds(
                &m.slice(ndarray::s![.., 0..1]).into_dyn(),
                7,
                Bounds::Strict
            )
            .is_none()
        );
        m[[33, 0]] = 7;
        m[[40, 0]] = -8;
        let view = m.slice(ndarray::s![.., 0..1]).into_dyn();
        assert!(view.as_slice_memory_order().is_none());
        let found = find_out_of_bounds(&view, 7, Bounds::Strict);
        assert_eq!(found, Some((7, vec![33, 0])));
        assert_eq!(
            found,
            find_out_of_bounds(&col(&m).into_dyn().view(), 7, Bounds::Strict)
        );
        let wrap = find_out_of_bounds(&view, 8, Bounds::Wrap);
        assert_eq!(wrap, None);
        assert_eq!(
            find_out_of_bounds(&view, 7, Bounds::Wrap),
            Some((7, vec![33, 0]))
        );
    }

    #[test]
    fn unsigned_values_beyond_i64_are_out_of_bounds_not_negative() {
        let idx = array![u64::MAX].into_dyn();
        let (v, _) = find_out_of_bounds(&idx.view(), 4, Bounds::Wrap).unwrap();
        assert_eq!(v, i64::MAX);
    }
}
