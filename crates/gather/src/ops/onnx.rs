//! The ONNX indexing operators: GatherElements, ScatterElements, Gather, GatherND and ScatterND,
//! with ONNX's semantics. They are the library's ops with one difference from PyTorch's: **a
//! negative index counts from the end** (`-1` is the last element), as in NumPy. Values outside
//! `-size..size` are errors.
//!
//! ```text
//! onnx_gather_elements(data, indices, axis=0)       out[i][j] = data[wrap(indices[i][j])][j]
//!
//!  data            indices          out
//!  ┌───┬───┬───┐   ┌────┬────┬───┐  ┌───┬───┬───┐
//!  │ 1 │ 2 │ 3 │   │ -1 │ -2 │ 0 │  │ 7 │ 5 │ 3 │   -1 → row 2, -2 → row 1
//!  │ 4 │ 5 │ 6 │   │ -2 │  0 │ 0 │  │ 4 │ 2 │ 3 │
//!  │ 7 │ 8 │ 9 │   └────┴────┴───┘  └───┴───┴───┘
//!  └───┴───┴───┘
//! ```
//!
//! | ONNX operator | function | the library op it runs |
//! |---|---|---|
//! | GatherElements | [`onnx_gather_elements`] | [`gather`](crate::gather()) |
//! | ScatterElements | [`onnx_scatter_elements`] | [`scatter`](crate::scatter()) / [`scatter_reduce`](crate::scatter_reduce()) with `include_self = true` |
//! | Gather | [`onnx_gather`] | [`select_batched`](crate::select_batched()) with `batch_dims = 0` (index_select for any index rank) |
//! | GatherND | [`onnx_gather_nd`] | [`gather_nd`](crate::gather_nd()) |
//! | ScatterND | [`onnx_scatter_nd`] | [`scatter_nd`](crate::scatter_nd()) |
//!
//! The index is never copied to wrap it: the kernels map each value as they read it.

use ndarray::{Array, ArrayBase, ArrayD, Data, Dimension};

use super::nd::{Reduction, gather_nd_bounded, scatter_nd_bounded};
use super::scatter::{Mode, Reduce, scatter_into};
use crate::element::Element;
use crate::error::{Error, Result, fmt_shape};
use crate::index::{Bounds, IndexElem};

/// ONNX GatherElements: `gather` along `axis` with negative indices wrapped. The output has the
/// shape of `indices`, which has the rank of `data` and is no larger on the other axes.
///
/// ```
/// use ndarray::array;
/// let data = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]];
/// let out = gather::onnx::gather_elements(&data, &array![[-1, -2, 0], [-2, 0, 0]], 0)?;
/// assert_eq!(out, array![[7.0, 5.0, 3.0], [4.0, 2.0, 3.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn onnx_gather_elements<T, S, D, I, SI, DI>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    axis: isize,
) -> Result<Array<T, DI>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    super::gather::gather_mapped("onnx_gather_elements", data, axis, indices, Bounds::Wrap)
}

/// ONNX ScatterElements: a copy of `data` with `updates[p]` written (or reduced) at `p` with
/// `p[axis] := wrap(indices[p])`. `updates` has the shape of `indices`. The reductions include
/// the element of `data` (`add` = `scatter_reduce(.., "sum", include_self=true)`, `mul` = prod,
/// `max`/`min` = amax/amin); with `Reduction::None` the last of duplicate writes wins.
///
/// ```
/// use gather::ops::nd::Reduction;
/// use ndarray::array;
/// let data = array![[1.0f32, 2.0, 3.0, 4.0, 5.0]];
/// let out = gather::onnx::scatter_elements(&data, &array![[1, -3]], &array![[1.1f32, 2.1]], 1, Reduction::None)?;
/// assert_eq!(out, array![[1.0, 1.1, 2.1, 4.0, 5.0]]);
/// let out = gather::onnx::scatter_elements(&data, &array![[1, 1]], &array![[1.1f32, 2.1]], 1, Reduction::Add)?;
/// assert_eq!(out, array![[1.0, 5.2, 3.0, 4.0, 5.0]]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn onnx_scatter_elements<T, S, D, I, SI, DI, SU, DU>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    updates: &ArrayBase<SU, DU>,
    axis: isize,
    reduction: Reduction,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SU: Data<Elem = T>,
    DU: Dimension,
{
    let op = "onnx_scatter_elements";
    if updates.shape() != indices.shape() {
        return Err(Error::shape(format!(
            "{op}: updates has shape {} but indices has shape {}; ONNX requires them equal",
            fmt_shape(updates.shape()),
            fmt_shape(indices.shape())
        ))
        .with_hint("each index position writes the update at the same position: slice updates to the index's shape (PyTorch's scatter allows a larger src, ONNX does not)"));
    }
    let mode = match reduction {
        Reduction::None => Mode::Set,
        Reduction::Add => Mode::Reduce(Reduce::Sum, true),
        Reduction::Mul => Mode::Reduce(Reduce::Prod, true),
        Reduction::Max => Mode::Reduce(Reduce::Amax, true),
        Reduction::Min => Mode::Reduce(Reduce::Amin, true),
    };
    let mut out = super::try_to_owned(op, data)?;
    scatter_into(
        op,
        out.view_mut().into_dyn(),
        axis,
        indices.view().into_dyn(),
        updates.view().into_dyn(),
        false,
        mode,
        Bounds::Wrap,
    )?;
    Ok(out)
}

/// ONNX Gather: entries of `data` along `axis` for an index of any rank, negative values wrapped.
/// The output shape is `data.shape[..axis] + indices.shape + data.shape[axis+1..]` (NumPy's
/// `take(data, indices, axis)`; PyTorch's `index_select` for a 1-d index).
///
/// ```
/// use ndarray::array;
/// let data = array![[1.0f32, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]];
/// let out = gather::onnx::gather(&data, &array![[0, 2]], 1)?;
/// assert_eq!(out, array![[[1.0f32, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]].into_dyn());
/// let out = gather::onnx::gather(&array![10, 11, 12], &array![0, -1, -3], 0)?;
/// assert_eq!(out, array![10, 12, 10].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn onnx_gather<T, S, D, I, SI, DI>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    axis: isize,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    super::select::select_mapped("onnx_gather", data, axis, indices, 0, Bounds::Wrap)
}

/// ONNX GatherND: [`gather_nd`](crate::gather_nd()) with negative coordinates wrapped.
///
/// ```
/// use ndarray::array;
/// let data = array![[[0.0f32, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]];
/// let out = gather::onnx::gather_nd(&data, &array![[[0, 1]], [[1, 0]]], 0)?;
/// assert_eq!(out, array![[[2.0f32, 3.0]], [[4.0, 5.0]]].into_dyn());
/// assert_eq!(gather::onnx::gather_nd(&data, &array![[-1, -1, -1]], 0)?, array![7.0f32].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn onnx_gather_nd<T, S, D, I, SI, DI>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    batch_dims: usize,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    gather_nd_bounded(
        "onnx_gather_nd",
        data.view().into_dyn(),
        indices.view().into_dyn(),
        batch_dims,
        Bounds::Wrap,
    )
}

/// ONNX ScatterND: [`scatter_nd`](crate::scatter_nd()) with negative coordinates wrapped.
///
/// ```
/// use gather::ops::nd::Reduction;
/// use ndarray::array;
/// let data = array![1, 2, 3, 4, 5, 6, 7, 8];
/// let out = gather::onnx::scatter_nd(&data, &array![[4], [3], [1], [-1]], &array![9, 10, 11, 12], Reduction::None)?;
/// assert_eq!(out, array![1, 11, 3, 10, 9, 6, 7, 12]);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn onnx_scatter_nd<T, S, D, I, SI, DI, SU, DU>(
    data: &ArrayBase<S, D>,
    indices: &ArrayBase<SI, DI>,
    updates: &ArrayBase<SU, DU>,
    reduction: Reduction,
) -> Result<Array<T, D>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
    SU: Data<Elem = T>,
    DU: Dimension,
{
    let op = "onnx_scatter_nd";
    let mut out = super::try_to_owned(op, data)?;
    scatter_nd_bounded(
        op,
        out.view_mut().into_dyn(),
        indices.view().into_dyn(),
        updates.view().into_dyn(),
        reduction,
        Bounds::Wrap,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use ndarray::{Array, array};

    #[test]
    fn the_onnx_spec_examples() {
        // GatherElements.
        let d = array![[1.0f32, 2.0], [3.0, 4.0]];
        assert_eq!(
            onnx_gather_elements(&d, &array![[0i64, 0], [1, 0]], 1).unwrap(),
            array![[1.0, 1.0], [4.0, 3.0]]
        );
        let d = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]];
        assert_eq!(
            onnx_gather_elements(&d, &array![[1i32, 2, 0], [2, 0, 0]], 0).unwrap(),
            array![[4.0, 8.0, 3.0], [7.0, 2.0, 3.0]]
        );
        // ScatterElements without axis and with reductions.
        let z = Array::<f32, _>::zeros((3, 3));
        let out = onnx_scatter_elements(
            &z,
            &array![[1i64, 0, 2], [0, 2, 1]],
            &array![[1.0f32, 1.1, 1.2], [2.0, 2.1, 2.2]],
            0,
            Reduction::None,
        )
        .unwrap();
        assert_eq!(
            out,
            array![[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]]
        );
        let row = array![[1.0f32, 2.0, 3.0, 4.0, 5.0]];
        let upd = array![[1.1f32, 2.1]];
        let r = |red| onnx_scatter_elements(&row, &array![[1i64, 1]], &upd, 1, red).unwrap();
        assert_eq!(r(Reduction::Max), array![[1.0, 2.1, 3.0, 4.0, 5.0]]);
        assert_eq!(r(Reduction::Min), array![[1.0, 1.1, 3.0, 4.0, 5.0]]);
        assert_eq!(r(Reduction::Mul)[[0, 1]], 2.0 * 1.1 * 2.1);
        // Gather.
        let x = Array::from_shape_fn((5, 4, 3, 2), |(a, b, c, e)| {
            (a * 1000 + b * 100 + c * 10 + e) as f32
        });
        let out = onnx_gather(&x, &array![0i64, 1, 3], 1).unwrap();
        assert_eq!(out.shape(), &[5, 3, 3, 2]);
        assert_eq!(out[[4, 2, 1, 1]], 4311.0);
        assert_eq!(
            onnx_gather(&Array::from_iter(0..10i64), &array![0i64, -9, -10], 0).unwrap(),
            array![0i64, 1, 0].into_dyn()
        );
        assert_eq!(
            onnx_gather(&array![5, 6], &ndarray::arr0(-1i64), 0).unwrap(),
            ndarray::arr0(6).into_dyn()
        );
        // GatherND, int32 data and a batch dim.
        let d = array![[0i32, 1], [2, 3]];
        assert_eq!(
            onnx_gather_nd(&d, &array![[0i64, 0], [1, 1]], 0).unwrap(),
            array![0, 3].into_dyn()
        );
        let d = array![[[0i32, 1], [2, 3]], [[4, 5], [6, 7]]];
        assert_eq!(
            onnx_gather_nd(&d, &array![[1i64], [0]], 1).unwrap(),
            array![[2, 3], [4, 5]].into_dyn()
        );
        // ScatterND add with duplicate rows.
        let out = onnx_scatter_nd(
            &array![[1.0f32, 2.0], [3.0, 4.0]],
            &array![[0i64], [0]],
            &array![[5.0f32, 5.0], [1.0, 1.0]],
            Reduction::Add,
        )
        .unwrap();
        assert_eq!(out, array![[7.0, 8.0], [3.0, 4.0]]);
    }

    #[test]
    fn values_outside_minus_size_to_size_are_errors_that_name_the_range() {
        let d = array![[1.0f32, 2.0, 3.0]];
        let e = onnx_gather_elements(&d, &array![[-4i64]], 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.hint().unwrap().contains("-3..3"), "{e}");
        let e = onnx_gather(&d, &array![3i64], 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        let e = onnx_gather_nd(&d, &array![[0i64, -4]], 0).unwrap_err();
        assert_eq!(e.coordinate(), Some(&[0usize, 1][..]));
        let e =
            onnx_scatter_nd(&d, &array![[1i64, 0]], &array![1.0f32], Reduction::None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        let e = onnx_scatter_elements(
            &d,
            &array![[0i64, 1]],
            &array![[1.0f32]],
            1,
            Reduction::None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        let e = onnx_scatter_elements(&d, &array![[3i64]], &array![[1.0f32]], 1, Reduction::Add)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }
}
