//! The shape rules and error messages of the ops, for crates that run the ops on other devices
//! (`gather-cuda`): they check arguments before any data moves and report a bad index exactly as
//! this crate does. Behind the `backend` feature; the typed API does not need it.
//!
//! ```
//! use gather::backend::check_gather;
//! // torch.gather(x[2,3], dim=1, index[2,2]) is fine; dim 2 does not exist.
//! assert_eq!(check_gather("gather", &[2, 3], 1, &[2, 2]).unwrap(), Some(1));
//! assert!(check_gather("gather", &[2, 3], 2, &[2, 2]).is_err());
//! ```

use crate::element::DType;
use crate::error::{Error, Result};
use crate::ops::bounds::OutOfBounds;
use crate::ops::scatter::Reduce;
use crate::ops::{check_index_fits, check_index_rank};

pub use crate::grad::output::GradOutputOf;
pub use crate::index::Bounds;

/// The error of the forward call that a gradient of `op` makes for the forward's output
/// (`scatter_reduce`, `index_reduce`, the legacy `scatter(reduce=)`), named as the gradient's own
/// checks name their errors: `grad::op: ...`, with the kind, hint, index value and coordinate
/// kept.
///
/// ```
/// let e = gather::backend::check_gather("scatter_reduce", &[2], 3, &[1]).unwrap_err();
/// let e = gather::backend::grad_forward_error("scatter_reduce", e);
/// assert!(e.message().starts_with("grad::scatter_reduce: "), "{}", e.message());
/// ```
pub fn grad_forward_error(op: &str, e: Error) -> Error {
    crate::error::in_grad(op, e)
}

/// The checks of `gather(input, dim, index)` before the index's values are read: the normalised
/// dim, or `None` when the index is empty (the output is then empty and nothing else is checked).
///
/// ```
/// let e = gather::backend::check_gather("gather", &[4, 5], 0, &[2]).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::RankMismatch);
/// ```
pub fn check_gather(
    op: &str,
    input_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
) -> Result<Option<usize>> {
    let d = crate::dims::normalize_dim(op, dim, input_shape.len())?;
    if index_shape.iter().product::<usize>() == 0 {
        return Ok(None);
    }
    check_index_rank(op, "input", input_shape, index_shape, d)?;
    let one = |s: &[usize]| if s.is_empty() { vec![1] } else { s.to_vec() };
    check_index_fits(op, &one(input_shape), &one(index_shape), None, d)?;
    Ok(Some(d))
}

/// The checks of the scatter ops (`scatter`, `scatter_add`, `scatter_reduce`) before the index's
/// values are read; `src_shape` is `None` for the value form. `None` when the index is empty.
///
/// ```
/// let d = gather::backend::check_scatter("scatter_add", &[3, 4], -1, &[3, 2], Some(&[3, 2]));
/// assert_eq!(d.unwrap(), Some(1));
/// ```
pub fn check_scatter(
    op: &str,
    self_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    src_shape: Option<&[usize]>,
) -> Result<Option<usize>> {
    crate::ops::scatter::check_scatter_shapes(op, self_shape, dim, index_shape, src_shape)
}

/// The dtype rule of `scatter_reduce`, checked after its shapes: a `mean` of bool is an error,
/// as in PyTorch.
///
/// ```
/// use gather::{DType, Reduce};
/// use gather::backend::check_scatter_reduce_dtype;
/// assert!(check_scatter_reduce_dtype("scatter_reduce", Reduce::Mean, DType::Bool).is_err());
/// assert!(check_scatter_reduce_dtype("scatter_reduce", Reduce::Amax, DType::Bool).is_ok());
/// ```
pub fn check_scatter_reduce_dtype(op: &str, reduce: Reduce, dtype: DType) -> Result<()> {
    crate::ops::scatter::check_mode_dtype(
        op,
        dtype,
        crate::ops::scatter::Mode::Reduce(reduce, true),
    )
}

/// The checks of a scatter plan's index (`ScatterPlan::new`) before its values are read: 1-d,
/// at most `u32::MAX` positions, into a dimension of at most 2^32 rows.
///
/// ```
/// use gather::backend::check_scatter_plan_index;
/// assert!(check_scatter_plan_index("ScatterPlan::new", &[10], 4).is_ok());
/// assert!(check_scatter_plan_index("ScatterPlan::new", &[10], 1 << 40).is_err());
/// assert!(check_scatter_plan_index("ScatterPlan::new", &[2, 5], 4).is_err());
/// ```
pub fn check_scatter_plan_index(op: &str, index_shape: &[usize], size: usize) -> Result<()> {
    crate::ops::scatter_plan::check_index(op, index_shape, size)
}

/// The checks of applying a scatter plan of `len` positions, validated for a dimension of
/// `size` rows, to `dst` and `src` of these shapes and `dtype` with `reduce`
/// (`ScatterPlan::scatter_reduce`), before anything is written.
///
/// ```
/// use gather::{DType, Reduce};
/// use gather::backend::check_scatter_plan_apply;
/// let op = "ScatterPlan::scatter_reduce";
/// assert!(check_scatter_plan_apply(op, 6, 4, &[4, 8], &[6, 8], DType::F32, Reduce::Sum).is_ok());
/// // dst has another number of rows than the plan was built for:
/// assert!(check_scatter_plan_apply(op, 6, 4, &[5, 8], &[6, 8], DType::F32, Reduce::Sum).is_err());
/// ```
pub fn check_scatter_plan_apply(
    op: &str,
    len: usize,
    size: usize,
    dst_shape: &[usize],
    src_shape: &[usize],
    dtype: DType,
    reduce: Reduce,
) -> Result<()> {
    crate::ops::scatter_plan::check_apply(op, len, size, dst_shape, src_shape, dtype, reduce)
}

/// The checks of `index_select(input, dim, index)` before the index's values are read: the
/// normalised dim. Errors are named `op` (`"index_select"`, or a gradient's name).
///
/// ```
/// use gather::DType;
/// assert_eq!(gather::backend::check_index_select("index_select", &[4, 5], -1, &[3], DType::I64).unwrap(), 1);
/// ```
pub fn check_index_select(
    op: &str,
    input_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
) -> Result<usize> {
    crate::ops::index::check_select_shapes(op, input_shape, dim, index_shape, index_dtype)
}

/// The checks of `take_along_dim(input, index, dim)` with an integer `dim`: the normalised dim,
/// then the shapes that input and index broadcast to (equal but along `dim`); the output has the
/// index's. Errors are named `op` (`"take_along_dim"`, or a gradient's name).
///
/// ```
/// let (d, x, i) = gather::backend::check_take_along_dim("take_along_dim", &[4, 1], &[2, 3], 0).unwrap();
/// assert_eq!((d, x, i), (0, vec![4, 3], vec![2, 3]));
/// assert!(gather::backend::check_take_along_dim("take_along_dim", &[4, 2], &[2, 3], 0).is_err());
/// ```
pub fn check_take_along_dim(
    op: &str,
    input_shape: &[usize],
    index_shape: &[usize],
    dim: isize,
) -> Result<(usize, Vec<usize>, Vec<usize>)> {
    crate::ops::take::along_dim_shapes(op, input_shape, index_shape, dim)
}

/// The checks of `put(self, index, source)` before the index's values are read: `false` when
/// the index is empty (the result is then `self`).
///
/// ```
/// assert!(gather::backend::check_put(&[2, 3], &[4], &[2, 2]).unwrap());
/// assert!(gather::backend::check_put(&[2, 3], &[4], &[3]).is_err());
/// assert!(!gather::backend::check_put(&[0], &[0], &[0]).unwrap());
/// ```
pub fn check_put(
    self_shape: &[usize],
    index_shape: &[usize],
    source_shape: &[usize],
) -> Result<bool> {
    crate::ops::put::check_put_shapes(self_shape, index_shape, source_shape)
}

/// The shape that input and mask broadcast to, for `masked_select` and `masked_scatter`.
///
/// ```
/// let s = gather::backend::check_masked("masked_select", &[2, 3], &[3]).unwrap();
/// assert_eq!(s, vec![2, 3]);
/// assert!(gather::backend::check_masked("masked_select", &[2, 3], &[2]).is_err());
/// ```
pub fn check_masked(op: &str, input_shape: &[usize], mask_shape: &[usize]) -> Result<Vec<usize>> {
    crate::ops::masked::broadcast_shape(op, input_shape, mask_shape)
}

/// The error for a mask of a dtype other than bool.
///
/// ```
/// let e = gather::backend::mask_dtype("masked_select", gather::DType::U8);
/// assert_eq!(e.kind(), gather::ErrorKind::InvalidArgument);
/// ```
pub fn mask_dtype(op: &str, dtype: DType) -> Error {
    crate::error::mask_dtype(op, dtype)
}

/// `masked_scatter`'s error for a source of `source_shape` with fewer elements than the `ones`
/// true positions of the mask over self's `self_shape`.
///
/// ```
/// let e = gather::backend::masked_source_short(&[2], 3, &[4]);
/// assert_eq!(e.kind(), gather::ErrorKind::ShapeMismatch);
/// ```
pub fn masked_source_short(source_shape: &[usize], ones: usize, self_shape: &[usize]) -> Error {
    crate::ops::masked::source_short(source_shape, ones, self_shape)
}

/// `grad::masked_scatter`'s error for a forward source shape with fewer elements than the
/// `ones` true positions of the mask.
///
/// ```
/// let e = gather::backend::masked_grad_source_short(&[2], 3);
/// assert!(e.message().starts_with("grad::masked_scatter: "));
/// ```
pub fn masked_grad_source_short(source_shape: &[usize], ones: usize) -> Error {
    crate::grad::masked::source_short(source_shape, ones)
}

/// The checks of `repeat_interleave(input, repeats, dim, output_size)` with a repeats tensor,
/// from the input's shape and the repeats' shape and values: the dim (`None`: the input
/// flattened), one count per slice along it, and their sum. Errors are named `op`
/// (`"repeat_interleave"`, or a gradient's name).
///
/// ```
/// use gather::backend::repeat_plan;
/// let (d, counts, total) = repeat_plan("repeat_interleave", &[3, 2], &[3], &[1, 0, 2], Some(0), None).unwrap();
/// assert_eq!((d, counts, total), (Some(0), vec![1, 0, 2], 3));
/// assert!(repeat_plan("repeat_interleave", &[3, 2], &[3], &[1, -1, 2], Some(0), None).is_err());
/// assert!(repeat_plan("repeat_interleave", &[3, 2], &[3], &[1, 0, 2], Some(0), Some(4)).is_err());
/// ```
pub fn repeat_plan(
    op: &str,
    input_shape: &[usize],
    repeats_shape: &[usize],
    repeats: &[i64],
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<(Option<usize>, Vec<usize>, usize)> {
    crate::ops::repeat::plan_tensor(
        op,
        input_shape,
        repeats_shape,
        repeats.iter().copied(),
        dim,
        output_size,
    )
}

/// The checks of `repeat_interleave(input, repeats, dim, output_size)` with one count: the dim
/// (`None`: the input flattened), the number of slices along it, and the output's length there.
/// Errors are named `op`.
///
/// ```
/// let plan = gather::backend::repeat_plan_scalar("repeat_interleave", &[3, 2], 2, Some(1), None).unwrap();
/// assert_eq!(plan, (Some(1), 2, 4));
/// assert!(gather::backend::repeat_plan_scalar("repeat_interleave", &[], 2, Some(0), None).is_err());
/// ```
pub fn repeat_plan_scalar(
    op: &str,
    input_shape: &[usize],
    repeats: usize,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<(Option<usize>, usize, usize)> {
    crate::ops::repeat::plan_scalar(op, input_shape, repeats, dim, output_size)
}

/// The checks of `repeat_interleave(repeats, output_size)` (the positions form): one count per
/// position and their sum.
///
/// ```
/// let plan = gather::backend::repeat_plan_repeats(&[3], &[2, 0, 1], None).unwrap();
/// assert_eq!(plan, (vec![2, 0, 1], 3));
/// assert!(gather::backend::repeat_plan_repeats(&[], &[2], None).is_err());
/// ```
pub fn repeat_plan_repeats(
    repeats_shape: &[usize],
    repeats: &[i64],
    output_size: Option<usize>,
) -> Result<(Vec<usize>, usize)> {
    crate::ops::repeat::plan_repeats_only(repeats_shape, repeats.iter().copied(), output_size)
}

/// The checks of `topk(input, k, dim)`: the normalised dim; `k` must be in
/// `0..=input.shape[dim]` (a 0-d input has one element), and a bool input is refused.
///
/// ```
/// use gather::DType;
/// assert_eq!(gather::backend::check_topk(&[2, 5], 3, -1, DType::F32).unwrap(), 1);
/// assert!(gather::backend::check_topk(&[2, 5], 6, -1, DType::F32).is_err());
/// assert!(gather::backend::check_topk(&[2, 5], 1, -1, DType::Bool).is_err());
/// ```
pub fn check_topk(shape: &[usize], k: i64, dim: isize, dtype: DType) -> Result<usize> {
    crate::ops::sort::check_topk(shape, k, dim, dtype)
}

/// The checks of `select_batched(input, axis, index, batch_dims)` from the shapes: the
/// normalised axis, the shape of the `gather` it runs as (`input[..axis] + [M] +
/// input[axis+1..]`, `M` the number of the index's own positions) and the output's shape
/// (`input[..axis] + index[batch_dims..] + input[axis+1..]`).
///
/// ```
/// let (a, g, out) = gather::backend::check_select_batched("select_batched", &[2, 5, 3], 1, &[2, 4], 1).unwrap();
/// assert_eq!((a, g, out), (1, vec![2, 4, 3], vec![2, 4, 3]));
/// assert!(gather::backend::check_select_batched("select_batched", &[2, 5, 3], 1, &[3, 4], 1).is_err());
/// ```
pub fn check_select_batched(
    op: &str,
    input_shape: &[usize],
    axis: isize,
    index_shape: &[usize],
    batch_dims: usize,
) -> Result<(usize, Vec<usize>, Vec<usize>)> {
    let plan = crate::ops::select::plan(op, input_shape, axis, index_shape, batch_dims)?;
    crate::ops::output_len(op, &plan.gather_shape)?;
    Ok((plan.axis, plan.gather_shape, plan.out_shape))
}

/// The error for an index `value` at `coord` (its position in the index) that `bounds` rejects
/// for a dimension `dim` of `size`, worded as this crate's ops word it.
///
/// ```
/// use gather::backend::{out_of_bounds, Bounds};
/// let e = out_of_bounds("gather", 5, vec![1, 0], 1, 5, Bounds::Strict);
/// assert_eq!(e.index_value(), Some(5));
/// assert!(e.hint().unwrap().contains("off by one"));
/// ```
pub fn out_of_bounds(
    op: &str,
    value: i64,
    coord: Vec<usize>,
    dim: usize,
    size: usize,
    bounds: Bounds,
) -> Error {
    crate::index::out_of_bounds_error(op, value, coord, dim, size, bounds)
}

/// The error of `take`-like ops (which index the row-major flattening of an input of `shape`) for
/// an index `value` at `coord`.
///
/// ```
/// let e = gather::backend::flat_out_of_bounds("take", 6, vec![0], &[2, 3]);
/// assert!(e.message().contains("6 elements"));
/// ```
pub fn flat_out_of_bounds(op: &str, value: i64, coord: Vec<usize>, shape: &[usize]) -> Error {
    let numel = shape.iter().product();
    let e = out_of_bounds(op, value, coord, 0, numel, Bounds::Wrap);
    crate::ops::take::flat_index_error(op, e, shape)
}

/// `take`'s error for a non-empty index into an empty input.
///
/// ```
/// let e = gather::backend::take_from_empty(&[0, 3], &[2]);
/// assert_eq!(e.kind(), gather::ErrorKind::IndexOutOfBounds);
/// ```
pub fn take_from_empty(input_shape: &[usize], index_shape: &[usize]) -> Error {
    crate::ops::take::take_from_empty(input_shape, index_shape)
}

/// The error of take's gradient, and of take_along_dim's without a dim, for a non-empty index
/// into an empty input.
///
/// ```
/// let e = gather::backend::take_grad_from_empty("grad::take", &[0, 3], 2);
/// assert!(e.message().contains("the input is empty (shape [0, 3])"));
/// ```
pub fn take_grad_from_empty(op: &str, input_shape: &[usize], index_len: usize) -> Error {
    crate::ops::take::grad_from_empty(op, input_shape, index_len)
}

/// The checks of `index_add`/`index_reduce` (`self`, `dim`, a 0-d or 1-d index, `source`) before
/// the index's values are read: the normalised dim.
///
/// ```
/// use gather::DType;
/// let d = gather::backend::check_index_source("index_add", &[3, 2], 0, &[4], DType::I64, &[4, 2]);
/// assert_eq!(d.unwrap(), 0);
/// ```
pub fn check_index_source(
    op: &str,
    self_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
    source_shape: &[usize],
) -> Result<usize> {
    let d = crate::dims::normalize_dim(op, dim, self_shape.len())?;
    crate::ops::index::check_index_vector(op, index_shape, index_dtype)?;
    let n = index_shape.iter().product();
    crate::ops::index::check_func_source(op, self_shape, d, n, source_shape)?;
    Ok(d)
}

/// The checks of `index_copy(self, dim, index, source)` before the index's values are read: the
/// normalised dim.
///
/// ```
/// use gather::DType;
/// let d = gather::backend::check_index_copy(&[3, 2], 0, &[2], DType::I64, &[2, 2]);
/// assert_eq!(d.unwrap(), 0);
/// ```
pub fn check_index_copy(
    self_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
    source_shape: &[usize],
) -> Result<usize> {
    let op = "index_copy";
    let d = crate::dims::normalize_dim(op, dim, self_shape.len())?;
    crate::ops::index::check_index_vector(op, index_shape, index_dtype)?;
    let n = index_shape.iter().product();
    crate::ops::index::check_copy_source(self_shape, d, n, source_shape)?;
    Ok(d)
}

/// The checks of `index_fill(self, dim, index, value)` before the index's values are read: the
/// normalised dim.
///
/// ```
/// use gather::DType;
/// assert_eq!(gather::backend::check_index_fill(&[3, 2], -1, &[2], DType::I64).unwrap(), 1);
/// ```
pub fn check_index_fill(
    self_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
) -> Result<usize> {
    let op = "index_fill";
    let d = crate::dims::normalize_dim(op, dim, self_shape.len())?;
    crate::ops::index::check_index_vector(op, index_shape, index_dtype)?;
    Ok(d)
}

/// The checks of `index_reduce(self, dim, index, source, reduce, include_self)` on a `self` of
/// `dtype` before the index's values are read (PyTorch's reductions: prod, mean, amax, amin):
/// the normalised dim.
///
/// ```
/// use gather::{DType, Reduce};
/// let ok = gather::backend::check_index_reduce(&[3, 2], 0, &[2], DType::I64, &[2, 2], DType::F32, Reduce::Amax, true);
/// assert_eq!(ok.unwrap(), 0);
/// let sum = gather::backend::check_index_reduce(&[3, 2], 0, &[2], DType::I64, &[2, 2], DType::F32, Reduce::Sum, true);
/// assert!(sum.is_err());
/// ```
#[allow(clippy::too_many_arguments)]
pub fn check_index_reduce(
    self_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
    source_shape: &[usize],
    dtype: DType,
    reduce: crate::Reduce,
    include_self: bool,
) -> Result<usize> {
    let op = "index_reduce";
    if reduce == crate::Reduce::Sum {
        return Err(crate::ops::index::bad_reduce("sum"));
    }
    let d = crate::dims::normalize_dim(op, dim, self_shape.len())?;
    crate::ops::index::check_index_vector(op, index_shape, index_dtype)?;
    let n = index_shape.iter().product();
    crate::ops::index::check_func_source(op, self_shape, d, n, source_shape)?;
    crate::ops::index::check_reduce_dtype(dtype, self_shape.len(), reduce, include_self)?;
    Ok(d)
}

/// The error for a gradient asked of a non-float `dtype`, as the gradients word it.
///
/// ```
/// let e = gather::backend::not_float("grad::gather", gather::DType::I64);
/// assert!(e.message().contains("floating-point"));
/// ```
pub fn not_float(op: &str, dtype: DType) -> Error {
    crate::grad::not_float(op, dtype)
}

/// The gradients' error for a tensor `what` whose shape is not `want` (the shape of
/// `want_what`), as the gradients word it.
///
/// ```
/// let e = gather::backend::check_grad_shape("grad::gather", "grad_output", &[2], "the index", &[3]);
/// assert_eq!(e.unwrap_err().kind(), gather::ErrorKind::ShapeMismatch);
/// ```
pub fn check_grad_shape(
    op: &str,
    what: &str,
    got: &[usize],
    want_what: &str,
    want: &[usize],
) -> Result<()> {
    crate::grad::check_shape(op, what, got, want_what, want)
}

/// The first checks of `index_add`, `index_copy`, `index_fill` and `index_reduce` and of their
/// gradients (`op` names which): `dim` for `shape` (self's, or the gradient's), then a 0-d or 1-d
/// index, before the index's dtype and the source. Returns the normalised dim.
///
/// ```
/// use gather::DType;
/// use gather::backend::check_index_dim;
/// assert_eq!(check_index_dim("grad::index_add", &[3, 4], -1, &[2], DType::I64).unwrap(), 1);
/// let e = check_index_dim("index_add", &[3, 4], 0, &[2, 1], DType::I64).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::RankMismatch);
/// ```
pub fn check_index_dim(
    op: &str,
    shape: &[usize],
    dim: isize,
    index_shape: &[usize],
    index_dtype: DType,
) -> Result<usize> {
    crate::ops::index::check_dim_and_vector(op, shape, dim, index_shape, index_dtype)
}

/// The check of `put`'s gradient on the forward's source shape: as many elements as the index.
///
/// ```
/// assert!(gather::backend::check_put_grad("grad::put", &[3], &[3, 1]).is_ok());
/// assert!(gather::backend::check_put_grad("grad::put", &[2], &[3]).is_err());
/// ```
pub fn check_put_grad(op: &str, source_shape: &[usize], index_shape: &[usize]) -> Result<()> {
    crate::grad::put::check_source_numel(op, source_shape, index_shape)
}

/// `e` with `op: ` in front of its message, for the errors of parsers that do not know the op
/// (`"nope".parse::<Reduce>()`).
///
/// ```
/// let e = "nope".parse::<gather::Reduce>().unwrap_err();
/// let e = gather::backend::prefixed("scatter_reduce_broadcast", e);
/// assert!(e.message().starts_with("scatter_reduce_broadcast: reduce argument"));
/// ```
pub fn prefixed(op: &str, e: Error) -> Error {
    crate::error::prefixed(op, e)
}

/// The gradients' error for `Parity::PyTorch` with broadcasting, which PyTorch has no form of.
///
/// ```
/// let e = gather::backend::no_broadcast_parity("grad::scatter_reduce");
/// assert_eq!(e.kind(), gather::ErrorKind::InvalidArgument);
/// ```
pub fn no_broadcast_parity(op: &str) -> Error {
    crate::grad::no_broadcast_parity(op)
}

/// The gradients' error for a `grad_output` of shape `got` where the forward output `of` has
/// shape `want`, in the words of the CPU library's gradient `op`.
///
/// ```
/// use gather::backend::{GradOutputOf, check_grad_output};
/// assert!(check_grad_output("grad::take", GradOutputOf::Take, &[3], &[3]).is_ok());
/// let e = check_grad_output("grad::take", GradOutputOf::Take, &[2], &[3]).unwrap_err();
/// assert_eq!(e.kind(), gather::ErrorKind::ShapeMismatch);
/// ```
pub fn check_grad_output(op: &str, of: GradOutputOf, got: &[usize], want: &[usize]) -> Result<()> {
    crate::grad::output::check_grad_output(op, of, got, want)
}

/// The error for an index tensor `what` of a non-integer `dtype`, as the ops word it.
///
/// ```
/// let e = gather::backend::index_dtype("gather", "index", gather::DType::F32);
/// assert!(e.message().contains("integer dtype"));
/// ```
pub fn index_dtype(op: &str, what: &str, dtype: DType) -> Error {
    crate::error::index_dtype(op, what, dtype)
}

/// The error for a `what` (src, source) whose dtype differs from self's, as the ops word it.
///
/// ```
/// use gather::DType;
/// let e = gather::backend::dtype_mismatch("scatter_add", "src", DType::F32, DType::F64);
/// assert!(e.hint().unwrap().contains("float32"));
/// ```
pub fn dtype_mismatch(op: &str, what: &str, self_dtype: DType, other: DType) -> Error {
    crate::error::dtype_mismatch(op, what, self_dtype, other)
}

/// Under a bounds `policy`, the error of a read (`gather`, `take` ...) that is given `Drop`.
///
/// ```
/// use gather::OutOfBounds;
/// assert!(gather::backend::reads_only("gather", &OutOfBounds::<f32>::Drop).is_err());
/// assert!(gather::backend::reads_only("gather", &OutOfBounds::Fill(0.0)).is_ok());
/// ```
pub fn reads_only<T>(op: &str, policy: &OutOfBounds<T>) -> Result<()> {
    crate::ops::bounds::reads_only(op, policy)
}

/// Under a bounds `policy`, the error of a write (`scatter`, `index_add` ...) that is given
/// `Fill`.
///
/// ```
/// use gather::OutOfBounds;
/// assert!(gather::backend::writes_only("scatter_add", &OutOfBounds::Fill(0)).is_err());
/// assert!(gather::backend::writes_only("scatter_add", &OutOfBounds::<i32>::Drop).is_ok());
/// ```
pub fn writes_only<T>(op: &str, policy: &OutOfBounds<T>) -> Result<()> {
    crate::ops::bounds::writes_only(op, policy)
}

/// The error for a non-empty index (its first `value`, at `coord`) into a dimension `dim` of size
/// 0 under Wrap, Clip or Fill: there is no element to map a value to.
///
/// ```
/// let e = gather::backend::bounds_empty_dim("gather", 3, vec![0, 0], 1);
/// assert!(e.hint().unwrap().contains("dimension 1 is empty"));
/// ```
pub fn bounds_empty_dim(op: &str, value: i64, coord: Vec<usize>, dim: usize) -> Error {
    crate::ops::bounds::empty_dim_error(op, value, coord, dim)
}

/// The error for `broadcast(true)` on an op without a broadcasting form (all but gather and the
/// scatters).
///
/// ```
/// let e = gather::backend::no_broadcast_form("take");
/// assert!(e.message().contains("not of take"));
/// ```
pub fn no_broadcast_form(op: &str) -> Error {
    crate::ops::options::no_broadcast_form(op)
}

/// The shapes of a broadcasting gather (`Options::broadcast`) of an input of shape `x` by an
/// index of shape `idx` (both 0-d seen as `[1]`) along the normalised `dim`: the output's shape
/// and the shape the input is viewed as (the output's, with `x[dim]` on `dim`).
///
/// ```
/// let (out, xs) = gather::backend::broadcast_gather_shapes("gather_broadcast", &[2, 5, 3], &[2, 4, 1], 1).unwrap();
/// assert_eq!((out, xs), (vec![2, 4, 3], vec![2, 5, 3]));
/// ```
pub fn broadcast_gather_shapes(
    op: &str,
    x: &[usize],
    idx: &[usize],
    dim: usize,
) -> Result<(Vec<usize>, Vec<usize>)> {
    crate::ops::broadcast::gather_shapes(op, x, idx, dim)
}

/// The extent of a broadcasting scatter (`Options::broadcast`) into `dst` by an index of shape
/// `idx` and a `src` (shapes with 0-d seen as `[1]`) along the normalised `dim`: `dst`'s shape
/// with `idx[dim]` on `dim`, after checking that the index and src expand to it.
///
/// ```
/// let e = gather::backend::broadcast_scatter_extent("scatter_add_broadcast", &[3, 2], &[4, 1], Some(&[4, 2]), 0);
/// assert_eq!(e.unwrap(), vec![4, 2]);
/// ```
pub fn broadcast_scatter_extent(
    op: &str,
    dst: &[usize],
    idx: &[usize],
    src: Option<&[usize]>,
    dim: usize,
) -> Result<Vec<usize>> {
    crate::ops::broadcast::scatter_extent(op, dst, idx, src, dim)
}

/// The checks of a segment op's `src` (of `shape`, not 0-d) and `axis`: the normalised axis.
///
/// ```
/// assert_eq!(gather::backend::segment_axis("segment_reduce", &[2, 6], -1).unwrap(), 1);
/// assert!(gather::backend::segment_axis("segment_reduce", &[], 0).is_err());
/// ```
pub fn segment_axis(op: &str, shape: &[usize], axis: isize) -> Result<usize> {
    crate::ops::segment::segment_axis(op, shape, axis)
}

/// The error for a segments tensor `name` (`offsets`, `ids`, `lengths`) that is not 1-D.
///
/// ```
/// let e = gather::backend::segments_rank("segment_reduce", "offsets", &[2, 2]);
/// assert!(e.message().contains("offsets must be 1-D"));
/// ```
pub fn segments_rank(op: &str, name: &str, shape: &[usize]) -> Error {
    crate::ops::segment::segments_rank_error(op, name, shape)
}

/// Checks `segments` (values read to the host) against an axis `axis` of length `n` as the
/// segment ops do: the number of segments, or the error that names the first bad value.
///
/// ```
/// use gather::Segments;
/// use ndarray::array;
/// let ok = gather::backend::check_segments("segment_reduce", &Segments::offsets(&array![0i64, 2, 6]), 1, 6);
/// assert_eq!(ok.unwrap(), 2);
/// let bad = gather::backend::check_segments("segment_reduce", &Segments::offsets(&array![0i64, 3, 2]), 1, 6);
/// assert!(bad.unwrap_err().message().contains("non-decreasing"));
/// ```
pub fn check_segments(
    op: &str,
    segments: &crate::Segments<'_, i64>,
    axis: usize,
    n: usize,
) -> Result<usize> {
    crate::ops::segment::resolve(op, segments, axis, n).map(|r| r.num)
}

/// `segments` (values read to the host) resolved against an axis of length `n` as the segment
/// ops resolve them: the positions `start..end` the segments cover, the segment of each of those
/// positions, and the number of segments; or the error that names the first bad value.
///
/// ```
/// use gather::Segments;
/// use ndarray::array;
/// let r = gather::backend::resolve_segments("segment_reduce", &Segments::offsets(&array![1i64, 2, 4]), 0, 5);
/// assert_eq!(r.unwrap(), (1, 4, vec![0, 1, 1], 2));
/// ```
pub fn resolve_segments(
    op: &str,
    segments: &crate::Segments<'_, i64>,
    axis: usize,
    n: usize,
) -> Result<(usize, usize, Vec<i64>, usize)> {
    crate::ops::segment::resolve(op, segments, axis, n).map(|r| (r.start, r.end, r.ids, r.num))
}

/// The fill of empty groups and segments for a group `reduce` on a `dtype` (its value, for
/// `EmptyFill::Value`, a [`Scalar`](crate::Scalar)), as the value's little-endian bytes in the low
/// bytes of a `u64`; first the checks of the reduction's dtype.
///
/// ```
/// use gather::DType;
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// let b = gather::backend::group_fill_bits("segment_reduce", GroupReduce::Amax, EmptyFill::Identity, DType::F32);
/// assert_eq!(b.unwrap(), f32::NEG_INFINITY.to_bits() as u64);
/// let e = gather::backend::group_fill_bits("segment_reduce", GroupReduce::Sum, EmptyFill::Nan, DType::I32);
/// assert!(e.is_err());
/// ```
pub fn group_fill_bits(
    op: &str,
    reduce: crate::ops::reduce::GroupReduce,
    fill: crate::ops::reduce::EmptyFill<crate::Scalar>,
    dtype: DType,
) -> Result<u64> {
    use crate::ops::reduce::{EmptyFill, ReduceElement, check_reduce_dtype, fill_value};
    fn value<T: ReduceElement>(
        op: &str,
        reduce: crate::ops::reduce::GroupReduce,
        fill: EmptyFill<crate::Scalar>,
    ) -> Result<T> {
        check_reduce_dtype::<T>(op, reduce)?;
        fill_value(op, reduce, fill.to_element::<T>(op)?)
    }
    fn le<const N: usize>(b: [u8; N]) -> u64 {
        let mut a = [0u8; 8];
        a[..N].copy_from_slice(&b);
        u64::from_le_bytes(a)
    }
    Ok(match dtype {
        DType::Bool => value::<bool>(op, reduce, fill)? as u64,
        DType::U8 => le(value::<u8>(op, reduce, fill)?.to_le_bytes()),
        DType::I8 => le(value::<i8>(op, reduce, fill)?.to_le_bytes()),
        DType::I16 => le(value::<i16>(op, reduce, fill)?.to_le_bytes()),
        DType::U16 => le(value::<u16>(op, reduce, fill)?.to_le_bytes()),
        DType::I32 => le(value::<i32>(op, reduce, fill)?.to_le_bytes()),
        DType::U32 => le(value::<u32>(op, reduce, fill)?.to_le_bytes()),
        DType::I64 => le(value::<i64>(op, reduce, fill)?.to_le_bytes()),
        DType::U64 => le(value::<u64>(op, reduce, fill)?.to_le_bytes()),
        DType::F16 => le(value::<half::f16>(op, reduce, fill)?.to_le_bytes()),
        DType::BF16 => le(value::<half::bf16>(op, reduce, fill)?.to_le_bytes()),
        DType::F32 => le(value::<f32>(op, reduce, fill)?.to_le_bytes()),
        DType::F64 => le(value::<f64>(op, reduce, fill)?.to_le_bytes()),
    })
}

/// The shape checks of a group reduction (`scatter_groups`) of a `src` of `src_shape` by an index
/// of `index_shape` along `dim`: the normalised dim and the block of src that the index covers
/// (a 1-D index is shared by every other axis: the block is src's shape with its length on `dim`).
///
/// ```
/// let (d, block) = gather::backend::grouped_shapes("scatter_groups", &[3, 4], 0, &[2]).unwrap();
/// assert_eq!((d, block), (0, vec![2, 4]));
/// assert!(gather::backend::grouped_shapes("scatter_groups", &[3, 4], 0, &[5]).is_err());
/// ```
pub fn grouped_shapes(
    op: &str,
    src_shape: &[usize],
    dim: isize,
    index_shape: &[usize],
) -> Result<(usize, Vec<usize>)> {
    crate::ops::reduce::grouped_shapes(op, src_shape, dim, index_shape)
}

/// The dtype checks of a group reduction: `reduce` on elements of `dtype` (floats for
/// logsumexp, var and std; no mean of bools).
///
/// ```
/// use gather::ops::reduce::GroupReduce;
/// assert!(gather::backend::check_group_reduce("scatter_groups", GroupReduce::LogSumExp, gather::DType::I32).is_err());
/// assert!(gather::backend::check_group_reduce("scatter_groups", GroupReduce::Sum, gather::DType::I32).is_ok());
/// ```
pub fn check_group_reduce(
    op: &str,
    reduce: crate::ops::reduce::GroupReduce,
    dtype: DType,
) -> Result<()> {
    crate::ops::reduce::check_reduce_dtype_of(op, reduce, dtype)
}

/// The dtype check of the softmax ops: floats only.
///
/// ```
/// assert!(gather::backend::softmax_dtype("scatter_softmax", gather::DType::F16).is_ok());
/// assert!(gather::backend::softmax_dtype("scatter_softmax", gather::DType::I32).is_err());
/// ```
pub fn softmax_dtype(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        return Ok(());
    }
    Err(crate::ops::reduce::softmax_dtype_error(op, dtype))
}

/// The rule of a group softmax that its index (covering `block` of src) covers all of a src of
/// `src_shape`: every element is normalised within its group.
///
/// ```
/// assert!(gather::backend::softmax_covers("scatter_softmax", &[3, 4], &[3, 4], 1).is_ok());
/// assert!(gather::backend::softmax_covers("scatter_softmax", &[3, 2], &[3, 4], 1).is_err());
/// ```
pub fn softmax_covers(op: &str, block: &[usize], src_shape: &[usize], dim: usize) -> Result<()> {
    crate::ops::reduce::softmax_covers(op, block, src_shape, dim)
}

/// The error of a segment softmax whose offsets cover only `start..end` of the `n` positions
/// along the axis `axis`.
///
/// ```
/// let e = gather::backend::segments_uncovered("segment_softmax", 1, 6, 6, 0);
/// assert!(e.message().contains("cover positions 1..6"));
/// ```
pub fn segments_uncovered(op: &str, start: usize, end: usize, n: usize, axis: usize) -> Error {
    crate::ops::segment::uncovered(op, start, end, n, axis)
}

/// The fill of empty groups of `any` (`all: false`) or `all` (`all: true`), or the error for a
/// NaN fill.
///
/// ```
/// use gather::ops::reduce::EmptyFill;
/// assert_eq!(gather::backend::group_bool_fill("scatter_all", EmptyFill::Identity, true).unwrap(), true);
/// assert!(gather::backend::group_bool_fill("scatter_any", EmptyFill::Nan, false).is_err());
/// ```
pub fn group_bool_fill(
    op: &str,
    fill: crate::ops::reduce::EmptyFill<bool>,
    all: bool,
) -> Result<bool> {
    crate::ops::reduce::bool_fill(op, fill, all)
}
