//! `repeat_interleave`: repeat every slice along one dim a given number of times, keeping order.
//!
//! ```text
//! repeat_interleave(input, repeats=[1, 0, 2], dim=Some(0))
//!
//!  input           repeats        output
//!  ┌────┬────┐                    ┌────┬────┐
//!  │ 10 │ 11 │    row 0 × 1   →   │ 10 │ 11 │   output row 0 = input row 0
//!  ├────┼────┤                    ├────┼────┤
//!  │ 20 │ 21 │    row 1 × 0       │ 30 │ 31 │   output row 1 = input row 2
//!  ├────┼────┤                    ├────┼────┤
//!  │ 30 │ 31 │    row 2 × 2   →   │ 30 │ 31 │   output row 2 = input row 2
//!  └────┴────┘                    └────┴────┘
//!
//! repeat_interleave_repeats([1, 0, 2])               = [0, 2, 2]   (the input row of each output row)
//! repeat_interleave_scalar([[1, 2], [3, 4]], 2, None) = [1, 1, 2, 2, 3, 3, 4, 4]   (flattened first)
//! ```
//!
//! The three forms of PyTorch's `torch.repeat_interleave`:
//!
//! | PyTorch | here |
//! |---|---|
//! | `repeat_interleave(repeats, output_size=)` | [`repeat_interleave_repeats`]`(&repeats, output_size)` → `i64` positions |
//! | `repeat_interleave(input, repeats: Tensor, dim, output_size=)` | [`repeat_interleave`]`(&input, &repeats, dim, output_size)` |
//! | `repeat_interleave(input, repeats: int, dim, output_size=)` | [`repeat_interleave_scalar`]`(&input, repeats, dim, output_size)` |
//!
//! The rules, as PyTorch's:
//! - `dim = None` flattens the input (row-major) and returns a 1-d array; otherwise the output has
//!   the input's shape with `input.shape[dim]` replaced by the sum of the repeats;
//! - a repeats array is 1-d with one count per slice along `dim`, or 0-d / one element, which then
//!   applies to every slice; it may hold any integer type; counts must be non-negative;
//! - `output_size`, when given, must equal the output length along `dim` (PyTorch uses it to skip a
//!   synchronisation; here it is only checked);
//! - quirk: a 0-d input with any `dim` is [`ErrorKind::DimOutOfRange`] (PyTorch unsqueezes at
//!   `dim + 1`); with `dim = None` it works and returns a 1-d array.
//!
//! The input may have any strides and is never copied: the output is read from it with the
//! parallel `gather` kernel, through an index that is broadcast (not materialised) over the other
//! dims. The output is a new standard-layout array.
//!
//! [`ErrorKind::DimOutOfRange`]: crate::ErrorKind::DimOutOfRange

use ndarray::{Array, Array1, ArrayBase, ArrayD, ArrayView, Data, Dimension, IxDyn};

use crate::dims::{checked_numel, normalize_dim};
use crate::element::Element;
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::index::IndexElem;
use crate::ops::try_vec;

const OP: &str = "repeat_interleave";

/// Checks that `values` are non-negative counts and returns them with their sum.
fn counts_of(op: &str, values: impl IntoIterator<Item = i64>) -> Result<(Vec<usize>, usize)> {
    let mut counts = Vec::new();
    let mut total: usize = 0;
    for (pos, v) in values.into_iter().enumerate() {
        let c = usize::try_from(v).map_err(|_| {
            Error::invalid(format!("{op}: repeats can not be negative (repeats[{pos}] = {v})"))
                .with_hint("every entry counts the copies of one slice, so it must be >= 0; use 0 to drop a slice")
        })?;
        total = total.checked_add(c).ok_or_else(|| too_large(op))?;
        counts.push(c);
    }
    Ok((counts, total))
}

fn too_large(op: &str) -> Error {
    Error::invalid(format!(
        "{op}: the repeats ask for more elements than fit in memory"
    ))
    .with_hint(
        "check the repeats for huge values (an unsigned value above i64::MAX counts as i64::MAX)",
    )
}

/// The error for an `output_size` that differs from the sum of a repeats array.
fn check_output_size_tensor(op: &str, output_size: Option<usize>, total: usize) -> Result<()> {
    match output_size {
        Some(o) if o != total => Err(Error::invalid(format!(
            "{op}: allocated size does not match required size (output_size = {o}, but the repeats sum to {total})"
        ))
        .with_hint(format!("output_size must be the sum of the repeats ({total}), or None"))),
        _ => Ok(()),
    }
}

/// `[0] * c0 + [1] * c1 + ...`; an error named `op` (not an abort) when it does not fit in
/// memory.
pub(crate) fn positions(op: &str, counts: &[usize], total: usize) -> Result<Vec<i64>> {
    let mut out = try_vec(op, total)?;
    for (i, &c) in counts.iter().enumerate() {
        out.extend(std::iter::repeat_n(i as i64, c));
    }
    Ok(out)
}

/// `torch.repeat_interleave(repeats, output_size=)`: the position each output slice reads,
/// `[0] * repeats[0] + [1] * repeats[1] + ...`, as `i64`.
///
/// `repeats` must be 1-d ([`ErrorKind::RankMismatch`] otherwise; PyTorch rejects 0-d here too),
/// of any integer type, with non-negative values ([`ErrorKind::InvalidArgument`]); `output_size`,
/// when given, must equal the sum ([`ErrorKind::InvalidArgument`]).
///
/// [`ErrorKind::RankMismatch`]: crate::ErrorKind::RankMismatch
/// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
///
/// ```
/// use ndarray::array;
/// // Which graph each node belongs to, from the node count of each graph.
/// let nodes_per_graph = array![2u32, 0, 3];
/// let batch = gather::ops::repeat::repeat_interleave_repeats(&nodes_per_graph, None)?;
/// assert_eq!(batch, array![0i64, 0, 2, 2, 2]);
/// assert!(gather::ops::repeat::repeat_interleave_repeats(&nodes_per_graph, Some(4)).is_err());
/// assert!(gather::ops::repeat::repeat_interleave_repeats(&array![1, -1], None).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn repeat_interleave_repeats<I, S, D>(
    repeats: &ArrayBase<S, D>,
    output_size: Option<usize>,
) -> Result<Array1<i64>>
where
    I: IndexElem,
    S: Data<Elem = I>,
    D: Dimension,
{
    let (counts, total) = plan_repeats_only(
        repeats.shape(),
        repeats.iter().map(|v| v.to_i64()),
        output_size,
    )?;
    Ok(Array1::from(positions(OP, &counts, total)?))
}

/// The checks of the repeats-only form from the repeats' shape and values: one count per
/// position and their sum.
pub(crate) fn plan_repeats_only(
    repeats_shape: &[usize],
    values: impl IntoIterator<Item = i64>,
    output_size: Option<usize>,
) -> Result<(Vec<usize>, usize)> {
    if repeats_shape.len() != 1 {
        let hint = if repeats_shape.is_empty() {
            "wrap the single count in a 1-d array: `repeats.insert_axis(Axis(0))`".to_string()
        } else {
            format!(
                "flatten the repeats first (e.g. `repeats.flatten()`, {} counts)",
                repeats_shape.iter().product::<usize>()
            )
        };
        return Err(Error::rank(format!(
            "{OP}: repeat_interleave only accept 1D vector as repeat (repeats has {} dims, shape {})",
            repeats_shape.len(),
            fmt_shape(repeats_shape)
        ))
        .with_hint(hint));
    }
    let (counts, total) = counts_of(OP, values)?;
    check_output_size_tensor(OP, output_size, total)?;
    Ok((counts, total))
}

/// The checks of the form with a repeats array, from the input's shape and the repeats' shape
/// and values: the dim (`None`: flattened), one count per slice, and their sum.
pub(crate) fn plan_tensor(
    op: &str,
    input_shape: &[usize],
    repeats_shape: &[usize],
    values: impl IntoIterator<Item = i64>,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<(Option<usize>, Vec<usize>, usize)> {
    let (d, size) = resolve_dim(op, input_shape, dim)?;
    let shown = d.unwrap_or(0);
    let (counts, total) = if repeats_shape.is_empty() || repeats_shape == [1] {
        // One count for every slice (PyTorch expands it, so it is not checked when there are none).
        let r = values.into_iter().next().unwrap_or(0);
        if size == 0 {
            (Vec::new(), 0)
        } else {
            let (c, _) = counts_of(op, [r])?;
            let total = c[0].checked_mul(size).ok_or_else(|| too_large(op))?;
            (vec![c[0]; size], total)
        }
    } else if repeats_shape.len() == 1 {
        if repeats_shape[0] != size {
            return Err(Error::shape(format!(
                "{op}: repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({shown}) = {size} (input {})",
                repeats_shape[0],
                fmt_shape(input_shape)
            ))
            .with_hint(format!(
                "give one count per slice along dim {shown} ({size} counts), or a single count (0-d or one element) for all of them"
            )));
        }
        counts_of(op, values)?
    } else {
        return Err(Error::rank(format!(
            "{op}: repeats must be 0-dim or 1-dim tensor (repeats has {} dims, shape {})",
            repeats_shape.len(),
            fmt_shape(repeats_shape)
        ))
        .with_hint(format!("give one count per slice along dim {shown} as a 1-d array ({size} counts), or a single count")));
    };
    check_output_size_tensor(op, output_size, total)?;
    Ok((d, counts, total))
}

/// The checks of the form with one count, from the input's shape: the dim (`None`:
/// flattened), the number of slices along it, and the output's length there.
pub(crate) fn plan_scalar(
    op: &str,
    input_shape: &[usize],
    repeats: usize,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<(Option<usize>, usize, usize)> {
    let (d, size) = resolve_dim(op, input_shape, dim)?;
    let total = size.checked_mul(repeats).ok_or_else(|| too_large(op))?;
    if let Some(o) = output_size {
        if o != total {
            return Err(Error::invalid(format!(
                "{op}: Invalid output_size, expected {total} but got {o}"
            ))
            .with_hint(format!(
                "output_size must be {size} slices × {repeats} repeats = {total}, or None"
            )));
        }
    }
    Ok((d, size, total))
}

/// The dim to repeat along (`None`: flatten), checked; and the number of slices along it.
fn resolve_dim(
    op: &str,
    input_shape: &[usize],
    dim: Option<isize>,
) -> Result<(Option<usize>, usize)> {
    match dim {
        None => Ok((None, input_shape.iter().product())),
        Some(d) if input_shape.is_empty() => {
            // PyTorch wraps dim against 0 dims (only 0 and -1 pass), then unsqueezes at dim + 1 = 1.
            let got = if d == 0 || d == -1 { 1 } else { d };
            Err(Error::new(
                ErrorKind::DimOutOfRange,
                format!("{op}: Dimension out of range (expected to be in range of [-1, 0], but got {got}) for a 0-d input with dim {d}"),
            )
            .with_hint("PyTorch rejects every dim for a 0-d input here (it unsqueezes at dim + 1): pass dim = None to repeat the single element into a 1-d array, or give the input an axis first with `input.insert_axis(Axis(0))`"))
        }
        Some(d) => {
            let d = normalize_dim(op, d, input_shape.len())?;
            Ok((Some(d), input_shape[d]))
        }
    }
}

/// Builds the output: slice `pos[j]` of `input` along `dim` becomes output slice `j` (`dim = None`:
/// element `pos[j]` of the row-major flattening).
fn expand<T, S, D>(
    input: &ArrayBase<S, D>,
    dim: Option<usize>,
    counts: &[usize],
    total: usize,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let x = input.view().into_dyn();
    let (x, d): (ArrayView<'_, T, IxDyn>, usize) = match dim {
        Some(d) => (x, d),
        None => match input
            .view()
            .into_dyn()
            .into_shape_with_order(IxDyn(&[input.len()]))
        {
            Ok(flat) => (flat, 0),
            Err(_) => {
                // A non-contiguous input: walk it in row-major order (no copy of the input).
                let mut out = try_vec(OP, total)?;
                for (v, &c) in input.iter().zip(counts) {
                    out.extend(std::iter::repeat_n(*v, c));
                }
                return Array::from_shape_vec(IxDyn(&[total]), out)
                    .map_err(|e| internal(&e.to_string()));
            }
        },
    };
    let mut out_shape = x.shape().to_vec();
    out_shape[d] = total;
    checked_numel(&out_shape)?;
    let pos = Array1::from(positions(OP, counts, total)?);
    let mut along = vec![1usize; x.ndim()];
    along[d] = total;
    let pos = pos
        .into_shape_with_order(IxDyn(&along))
        .map_err(|e| internal(&e.to_string()))?;
    let index = pos
        .broadcast(IxDyn(&out_shape))
        .ok_or_else(|| internal("index broadcast"))?;
    crate::ops::gather::gather(&x, d as isize, &index)
}

fn internal(what: &str) -> Error {
    Error::invalid(format!("{OP}: internal error ({what})"))
}

/// `torch.repeat_interleave(input, repeats, dim, output_size=)` with a repeats array: slice `i`
/// of `input` along `dim` is repeated `repeats[i]` times.
///
/// - `dim = None` flattens the input (row-major) first and returns a 1-d array.
/// - `repeats` is 1-d with `input.shape[dim]` entries ([`ErrorKind::ShapeMismatch`] otherwise), or
///   0-d / one element, applied to every slice; 2-d or more is [`ErrorKind::RankMismatch`]. Any
///   integer type; negative counts are [`ErrorKind::InvalidArgument`].
/// - `output_size`, when given, must equal the sum of the repeats ([`ErrorKind::InvalidArgument`]).
/// - A 0-d input with any `dim` is [`ErrorKind::DimOutOfRange`] (PyTorch's quirk).
///
/// [`ErrorKind::ShapeMismatch`]: crate::ErrorKind::ShapeMismatch
/// [`ErrorKind::RankMismatch`]: crate::ErrorKind::RankMismatch
/// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
/// [`ErrorKind::DimOutOfRange`]: crate::ErrorKind::DimOutOfRange
///
/// ```
/// use ndarray::{array, arr0};
/// let x = array![[10, 11], [20, 21], [30, 31]];
/// let out = gather::repeat_interleave(&x, &array![1, 0, 2], Some(0), None)?;
/// assert_eq!(out, array![[10, 11], [30, 31], [30, 31]].into_dyn());
///
/// // One count for every slice, along the last dim.
/// let out = gather::repeat_interleave(&x, &arr0(2u8), Some(-1), None)?;
/// assert_eq!(out, array![[10, 10, 11, 11], [20, 20, 21, 21], [30, 30, 31, 31]].into_dyn());
///
/// // dim = None flattens first.
/// let out = gather::repeat_interleave(&array![[1, 2], [3, 4]], &array![0, 1, 2, 0], None, Some(3))?;
/// assert_eq!(out, array![2, 3, 3].into_dyn());
///
/// assert!(gather::repeat_interleave(&x, &array![1, 2], Some(0), None).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn repeat_interleave<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    repeats: &ArrayBase<SI, DI>,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let (d, counts, total) = plan_tensor(
        OP,
        input.shape(),
        repeats.shape(),
        repeats.iter().map(|v| v.to_i64()),
        dim,
        output_size,
    )?;
    expand(input, d, &counts, total)
}

/// `torch.repeat_interleave(input, repeats, dim, output_size=)` with one count: every slice of
/// `input` along `dim` is repeated `repeats` times.
///
/// `dim = None` flattens the input (row-major) first and returns a 1-d array. `output_size`, when
/// given, must equal the output length along `dim` ([`ErrorKind::InvalidArgument`]). A 0-d input
/// with any `dim` is [`ErrorKind::DimOutOfRange`] (PyTorch's quirk). `repeats` is a `usize`, so
/// PyTorch's "Repeats must be non-negative" cannot happen here (the dynamic layer reports it).
///
/// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
/// [`ErrorKind::DimOutOfRange`]: crate::ErrorKind::DimOutOfRange
///
/// ```
/// use ndarray::{array, arr0};
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(gather::ops::repeat::repeat_interleave_scalar(&x, 2, None, None)?, array![1, 1, 2, 2, 3, 3, 4, 4].into_dyn());
/// assert_eq!(gather::ops::repeat::repeat_interleave_scalar(&x, 2, Some(0), Some(4))?, array![[1, 2], [1, 2], [3, 4], [3, 4]].into_dyn());
/// assert_eq!(gather::ops::repeat::repeat_interleave_scalar(&arr0(7), 3, None, None)?, array![7, 7, 7].into_dyn());
/// assert!(gather::ops::repeat::repeat_interleave_scalar(&arr0(7), 3, Some(0), None).is_err());
/// # Ok::<(), gather::Error>(())
/// ```
pub fn repeat_interleave_scalar<T, S, D>(
    input: &ArrayBase<S, D>,
    repeats: usize,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
{
    let (d, size, total) = plan_scalar(OP, input.shape(), repeats, dim, output_size)?;
    expand(input, d, &vec![repeats; size], total)
}

/// Method forms of [`repeat_interleave()`] and [`repeat_interleave_scalar()`], on any ndarray
/// array.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let x = array![[1, 2], [3, 4]];
/// assert_eq!(x.repeat_interleave(&array![2, 1], Some(1), None)?, array![[1, 1, 2], [3, 3, 4]].into_dyn());
/// assert_eq!(x.repeat_interleave_scalar(2, Some(0), None)?, array![[1, 2], [1, 2], [3, 4], [3, 4]].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub trait RepeatExt<T: Element> {
    /// See [`repeat_interleave()`].
    fn repeat_interleave<I, SI, DI>(
        &self,
        repeats: &ArrayBase<SI, DI>,
        dim: Option<isize>,
        output_size: Option<usize>,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;
    /// See [`repeat_interleave_scalar()`].
    fn repeat_interleave_scalar(
        &self,
        repeats: usize,
        dim: Option<isize>,
        output_size: Option<usize>,
    ) -> Result<ArrayD<T>>;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> RepeatExt<T> for ArrayBase<S, D> {
    fn repeat_interleave<I, SI, DI>(
        &self,
        repeats: &ArrayBase<SI, DI>,
        dim: Option<isize>,
        output_size: Option<usize>,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        repeat_interleave(self, repeats, dim, output_size)
    }
    fn repeat_interleave_scalar(
        &self,
        repeats: usize,
        dim: Option<isize>,
        output_size: Option<usize>,
    ) -> Result<ArrayD<T>> {
        repeat_interleave_scalar(self, repeats, dim, output_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, ArrayViewD, Slice, arr0, array, s};
    use proptest::prelude::*;

    /// The plain reference: the positions by nested loops, then every output element read from
    /// its source coordinate (`dim = None`: from the row-major list of elements).
    fn reference<T: Element>(
        x: &ArrayViewD<'_, T>,
        counts: &[usize],
        dim: Option<usize>,
    ) -> ArrayD<T> {
        let mut pos = Vec::new();
        for (i, &c) in counts.iter().enumerate() {
            for _ in 0..c {
                pos.push(i);
            }
        }
        match dim {
            None => {
                let flat: Vec<T> = x.iter().copied().collect();
                ArrayD::from_shape_vec(IxDyn(&[pos.len()]), pos.iter().map(|&p| flat[p]).collect())
                    .unwrap()
            }
            Some(d) => {
                let mut shape = x.shape().to_vec();
                shape[d] = pos.len();
                ArrayD::from_shape_fn(IxDyn(&shape), |c| {
                    let mut c = c.slice().to_vec();
                    c[d] = pos[c[d]];
                    x[IxDyn(&c)]
                })
            }
        }
    }

    #[test]
    fn appendix_b_example() {
        let out = repeat_interleave(&array![1, 2, 3], &array![1, 0, 2], Some(0), None).unwrap();
        assert_eq!(out, array![1, 3, 3].into_dyn());
        let out = repeat_interleave(&array![1, 2, 3], &array![1i64, 0, 2], None, Some(3)).unwrap();
        assert_eq!(out, array![1, 3, 3].into_dyn());
    }

    #[test]
    fn repeats_only_form_lists_positions() {
        assert_eq!(
            repeat_interleave_repeats(&array![2i64, 0, 1, 3], None).unwrap(),
            array![0, 0, 2, 3, 3, 3]
        );
        assert_eq!(
            repeat_interleave_repeats(&array![2u8, 1], Some(3)).unwrap(),
            array![0, 0, 1]
        );
        assert_eq!(
            repeat_interleave_repeats(&Array1::<i32>::zeros(0), None)
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            repeat_interleave_repeats(&Array1::<i32>::zeros(0), Some(0))
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn repeats_only_form_errors() {
        let e = repeat_interleave_repeats(&array![1, -2], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("repeats can not be negative")
                && e.message().contains("repeats[1] = -2"),
            "{e}"
        );
        let e = repeat_interleave_repeats(&array![1, 2], Some(4)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message()
                .contains("allocated size does not match required size")
        );
        assert_eq!(
            repeat_interleave_repeats(&arr0(3), None)
                .unwrap_err()
                .kind(),
            ErrorKind::RankMismatch
        );
        assert_eq!(
            repeat_interleave_repeats(&array![[1, 2]], None)
                .unwrap_err()
                .kind(),
            ErrorKind::RankMismatch
        );
        // Unsigned counts above i64::MAX cannot be allocated: an error, not a panic or a wrap.
        let e = repeat_interleave_repeats(&array![u64::MAX, u64::MAX], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn tensor_form_checks_in_pytorch_order() {
        let x = Array2::<f32>::zeros((3, 4));
        let e = repeat_interleave(&x, &array![1, 2], Some(0), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("repeats.size(0) = 2 and input.size(0) = 3"),
            "{e}"
        );
        assert_eq!(
            repeat_interleave(&x, &array![[1, 2, 3]], Some(0), None)
                .unwrap_err()
                .kind(),
            ErrorKind::RankMismatch
        );
        assert_eq!(
            repeat_interleave(&x, &array![1, -1, 1], Some(0), None)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
        let e = repeat_interleave(&x, &array![1, 1, 1], Some(0), Some(4)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            repeat_interleave(&x, &array![1, 1, 1], Some(2), None)
                .unwrap_err()
                .kind(),
            ErrorKind::DimOutOfRange
        );
        // The shape is checked before the values.
        assert_eq!(
            repeat_interleave(&x, &array![-1, 1], Some(0), None)
                .unwrap_err()
                .kind(),
            ErrorKind::ShapeMismatch
        );
        // A broadcast negative count over no slices is never used, so it is fine (as PyTorch).
        let empty = Array2::<f32>::zeros((0, 4));
        assert_eq!(
            repeat_interleave(&empty, &arr0(-1), Some(0), None)
                .unwrap()
                .shape(),
            &[0, 4]
        );
        assert_eq!(
            repeat_interleave(&x, &arr0(-1), Some(0), None)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn zero_d_input_rejects_every_dim_but_flattens_without_one() {
        let x = arr0(5i8);
        for dim in [0, -1, 1] {
            assert_eq!(
                repeat_interleave_scalar(&x, 2, Some(dim), None)
                    .unwrap_err()
                    .kind(),
                ErrorKind::DimOutOfRange
            );
            assert_eq!(
                repeat_interleave(&x, &array![2], Some(dim), None)
                    .unwrap_err()
                    .kind(),
                ErrorKind::DimOutOfRange
            );
        }
        let e = repeat_interleave_scalar(&x, 2, Some(0), None).unwrap_err();
        assert!(e.message().contains("but got 1"), "{e}");
        assert_eq!(
            repeat_interleave_scalar(&x, 3, None, None).unwrap(),
            array![5, 5, 5].into_dyn()
        );
        assert_eq!(
            repeat_interleave(&x, &arr0(2), None, None).unwrap(),
            array![5, 5].into_dyn()
        );
        assert_eq!(
            repeat_interleave(&x, &array![0], None, None)
                .unwrap()
                .shape(),
            &[0]
        );
    }

    #[test]
    fn one_count_applies_to_every_slice() {
        let x = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let a = repeat_interleave(&x, &arr0(2i16), Some(1), None).unwrap();
        let b = repeat_interleave(&x, &array![2u8], Some(1), None).unwrap();
        let c = repeat_interleave_scalar(&x, 2, Some(1), Some(6)).unwrap();
        assert_eq!(
            a,
            array![
                [1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
                [4.0, 4.0, 5.0, 5.0, 6.0, 6.0]
            ]
            .into_dyn()
        );
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(
            repeat_interleave_scalar(&x, 0, Some(-1), None)
                .unwrap()
                .shape(),
            &[2, 0]
        );
    }

    #[test]
    fn scalar_form_output_size_error_names_both_sizes() {
        let x = Array2::<u8>::zeros((2, 3));
        let e = repeat_interleave_scalar(&x, 2, Some(0), Some(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message()
                .contains("Invalid output_size, expected 4 but got 5"),
            "{e}"
        );
        assert_eq!(
            repeat_interleave_scalar(&x, usize::MAX, None, None)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn empty_inputs() {
        let x = Array2::<bool>::from_elem((0, 3), true);
        assert_eq!(
            repeat_interleave_scalar(&x, 2, Some(0), None)
                .unwrap()
                .shape(),
            &[0, 3]
        );
        assert_eq!(
            repeat_interleave(&x, &Array1::<i64>::zeros(0), Some(0), None)
                .unwrap()
                .shape(),
            &[0, 3]
        );
        assert_eq!(
            repeat_interleave(&x, &array![1, 2, 3], Some(1), None)
                .unwrap()
                .shape(),
            &[0, 6]
        );
        assert_eq!(
            repeat_interleave_scalar(&x, 4, None, None).unwrap().shape(),
            &[0]
        );
    }

    #[test]
    fn strided_inputs_are_read_in_place_for_every_form() {
        let base =
            ndarray::Array3::from_shape_fn((4, 5, 6), |(a, b, c)| (a * 100 + b * 10 + c) as i32);
        let x = base.slice(s![..;-1, 1..;2, ..;-3]).into_dyn();
        for d in 0..3 {
            let counts: Vec<usize> = (0..x.shape()[d]).map(|i| (i * 2 + 1) % 3).collect();
            let reps: Array1<u16> = counts.iter().map(|&c| c as u16).collect();
            assert_eq!(
                repeat_interleave(&x, &reps, Some(d as isize), None).unwrap(),
                reference(&x.view(), &counts, Some(d))
            );
            assert_eq!(
                repeat_interleave_scalar(&x, 2, Some(d as isize - 3), None).unwrap(),
                reference(&x.view(), &vec![2; x.shape()[d]], Some(d))
            );
        }
        let counts: Vec<usize> = (0..x.len()).map(|i| i % 3).collect();
        let reps: Array1<i64> = counts.iter().map(|&c| c as i64).collect();
        assert_eq!(
            repeat_interleave(&x, &reps, None, None).unwrap(),
            reference(&x.view(), &counts, None)
        );
        assert_eq!(
            repeat_interleave_scalar(&x, 3, None, None).unwrap(),
            reference(&x.view(), &vec![3; x.len()], None)
        );
        // The same through a transposed (F-order) view.
        let t = base.view().reversed_axes().into_dyn();
        assert_eq!(
            repeat_interleave_scalar(&t, 2, None, None).unwrap(),
            reference(&t.view(), &vec![2; t.len()], None)
        );
    }

    #[test]
    fn method_forms_match_the_free_functions() {
        use crate::prelude::*;
        let x = array![[1, 2], [3, 4]];
        assert_eq!(
            x.repeat_interleave(&array![1, 3], Some(0), None).unwrap(),
            repeat_interleave(&x, &array![1, 3], Some(0), None).unwrap()
        );
        assert_eq!(
            x.repeat_interleave_scalar(2, None, Some(8)).unwrap(),
            repeat_interleave_scalar(&x, 2, None, Some(8)).unwrap()
        );
    }

    #[test]
    fn big_input_along_a_middle_dim_matches_the_reference() {
        let x = ndarray::Array3::from_shape_fn((40, 30, 50), |(a, b, c)| {
            (a * 10000 + b * 100 + c) as f64
        });
        let counts: Vec<usize> = (0..30).map(|i| i % 4).collect();
        let reps: Array1<i32> = counts.iter().map(|&c| c as i32).collect();
        let xv = x.view().into_dyn();
        assert_eq!(
            repeat_interleave(&x, &reps, Some(1), None).unwrap(),
            reference(&xv, &counts, Some(1))
        );
        let xs = x.slice(s![.., .., ..;-1]).into_dyn();
        assert_eq!(
            repeat_interleave(&xs, &reps, Some(-2), None).unwrap(),
            reference(&xs, &counts, Some(1))
        );
    }

    proptest! {
        #[test]
        fn random_views_match_the_reference(
            shape in prop::collection::vec(0usize..4, 0..4),
            seed in any::<u64>(),
            step in prop_oneof![Just(1isize), Just(-1), Just(2), Just(-2)],
            dim_pick in any::<u8>(),
        ) {
            let big: Vec<usize> = shape.iter().map(|s| s * step.unsigned_abs()).collect();
            let base = ArrayD::from_shape_fn(IxDyn(&big), |c| c.slice().iter().fold(seed % 97, |acc, &v| acc * 7 + v as u64) as i64);
            let x = base.slice_each_axis(|_| Slice::new(0, None, step));
            let dim = if x.ndim() == 0 { None } else { Some(dim_pick as usize % x.ndim()) };
            let n = dim.map_or(x.len(), |d| x.shape()[d]);
            let counts: Vec<usize> = (0..n).map(|i| ((seed >> (i % 60)) % 4) as usize).collect();
            let reps: Array1<i64> = counts.iter().map(|&c| c as i64).collect();
            let want = reference(&x, &counts, dim);
            let total = counts.iter().sum::<usize>();
            prop_assert_eq!(repeat_interleave(&x, &reps, dim.map(|d| d as isize), Some(total)).unwrap(), want);
            prop_assert_eq!(repeat_interleave(&x, &reps, dim.map(|d| d as isize - x.ndim() as isize), None).unwrap(), reference(&x, &counts, dim));
            let r = (seed % 3) as usize;
            prop_assert_eq!(repeat_interleave_scalar(&x, r, dim.map(|d| d as isize), None).unwrap(), reference(&x, &vec![r; n], dim));
            prop_assert_eq!(repeat_interleave_scalar(&x, r, None, None).unwrap(), reference(&x, &vec![r; x.len()], None));
        }
    }
}
