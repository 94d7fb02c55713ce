//! `select_batched`: pick entries along one axis with an index that shares the input's leading
//! (batch) axes, as `tf.gather(params, indices, axis, batch_dims)`. It replaces PyTorch's
//! `unsqueeze(..).expand(..)` idioms around `gather`: the index keeps its natural shape.
//!
//! ```text
//! select_batched(input, axis=1, index, batch_dims=1)     out[b][k][d] = input[b][index[b][k]][d]
//!
//!  input [2, 3, 2]              index [2, 2]     out [2, 2, 2]
//!  b=0 ┌────┬────┐              ┌───┬───┐        ┌────┬────┐
//!   n=0│ 00 │ 01 │              │ 2 │ 0 │ b=0 →  │ 20 │ 21 │ k=0: input[0][2]
//!   n=1│ 10 │ 11 │              ├───┼───┤        │ 00 │ 01 │ k=1: input[0][0]
//!   n=2│ 20 │ 21 │              │ 1 │ 1 │ b=1 →  ├────┼────┤
//!  b=1 ├────┼────┤              └───┴───┘        │ 50 │ 51 │ k=0: input[1][1]
//!   n=0│ 30 │ 31 │                               │ 50 │ 51 │ k=1: input[1][1]
//!   n=1│ 40 │ 41 │   ← whole rows move: the      └────┴────┘
//!   n=2│ 50 │ 51 │     trailing axis is copied
//!      └────┴────┘
//! ```
//!
//! The rules:
//! - `batch_dims <= axis` and `batch_dims <= index.ndim()`; the index's first `batch_dims` axes
//!   have the input's sizes;
//! - the output shape is `input.shape[..axis] + index.shape[batch_dims..] + input.shape[axis+1..]`;
//! - every index value is in `0..input.shape[axis]` (negative values are errors, as in PyTorch).
//!
//! The three idioms it replaces:
//!
//! | scenario | input | index | call | output |
//! |---|---|---|---|---|
//! | top-k patches | `[B, N, D]` | `[B, K]` | `axis=1, batch_dims=1` | `[B, K, D]` |
//! | token logits | `[B, L, V]` | `[B, L]` | `axis=2, batch_dims=2` | `[B, L]` |
//! | ROI labels | `[128, 21, 4]` | `[128]` | `axis=1, batch_dims=1` | `[128, 4]` |
//!
//! It runs as `gather` over the index seen through stride-0 axes (never materialised), so it takes
//! gather's row-copy fast path, and its gradient ([`grad::select_batched`](crate::grad::select_batched))
//! is gather's.

use ndarray::{ArrayBase, ArrayD, ArrayView, Axis, CowArray, Data, Dimension, IxDyn};

use crate::dims::{checked_numel, normalize_dim};
use crate::element::Element;
use crate::error::{Error, ErrorKind, Result, fmt_shape};
use crate::index::{Bounds, IndexElem, check_bounds};

/// The shapes of one `select_batched` call, validated.
pub(crate) struct SelectPlan {
    /// The selected axis of the input.
    pub axis: usize,
    /// The number of leading axes shared by the input and the index.
    pub batch_dims: usize,
    /// The shape `gather` produces: `input[..axis] + [M] + input[axis+1..]`, where `M` is the
    /// number of elements of `index.shape[batch_dims..]`.
    pub gather_shape: Vec<usize>,
    /// The shape of the result: `input[..axis] + index[batch_dims..] + input[axis+1..]`.
    pub out_shape: Vec<usize>,
}

/// Checks the shapes of a `select_batched` call (not the index values).
pub(crate) fn plan(
    op: &str,
    input_shape: &[usize],
    axis: isize,
    index_shape: &[usize],
    batch_dims: usize,
) -> Result<SelectPlan> {
    let r = input_shape.len();
    if r == 0 {
        return Err(Error::new(
            ErrorKind::DimOutOfRange,
            format!("{op}: the input is 0-d, so it has no axis {axis} to select along"),
        )
        .with_hint("give the input at least one axis, e.g. `x.insert_axis(Axis(0))`"));
    }
    let a = normalize_dim(op, axis, r)?;
    let q = index_shape.len();
    if batch_dims > q {
        return Err(Error::rank(format!(
            "{op}: batch_dims {batch_dims} is larger than the index's number of dims ({q}, shape {})",
            fmt_shape(index_shape)
        ))
        .with_hint(format!(
            "batch_dims counts the leading axes the index shares with the input; it can be at most {q} here"
        )));
    }
    if batch_dims > a {
        return Err(Error::invalid(format!(
            "{op}: batch_dims {batch_dims} must be at most axis {a}: the batch axes come before the selected axis"
        ))
        .with_hint(format!(
            "to select along axis {a} with one index per position of the first {a} axes, use batch_dims={a}; or move the selected axis later with `permuted_axes`"
        )));
    }
    if let Some(d) = (0..batch_dims).find(|&d| index_shape[d] != input_shape[d]) {
        return Err(Error::shape(format!(
            "{op}: the index's batch axis {d} has size {} but the input's has size {} (index {}, input {}, batch_dims {batch_dims})",
            index_shape[d],
            input_shape[d],
            fmt_shape(index_shape),
            fmt_shape(input_shape)
        ))
        .with_hint(format!(
            "the first {batch_dims} axes of the index and of the input are paired one to one, so their sizes must match; a size-1 index axis can be broadcast first with `index.broadcast(..)`"
        )));
    }
    let own = &index_shape[batch_dims..];
    let m = checked_numel(own)?;
    let mut gather_shape = input_shape[..a].to_vec();
    gather_shape.push(m);
    gather_shape.extend_from_slice(&input_shape[a + 1..]);
    let mut out_shape = input_shape[..a].to_vec();
    out_shape.extend_from_slice(own);
    out_shape.extend_from_slice(&input_shape[a + 1..]);
    super::output_len(op, &out_shape)?;
    Ok(SelectPlan {
        axis: a,
        batch_dims,
        gather_shape,
        out_shape,
    })
}

/// The index with its own axes flattened into one: `index.shape[..batch_dims] + [M]`. A copy is
/// made only when those axes cannot be merged in place (two or more own axes whose strides do not
/// chain, a broadcast axis among them say); it is allocated fallibly, like an output, so an index
/// view too large to copy is an error that names `op`, never an abort.
pub(crate) fn flatten_own_axes<'a, I: IndexElem>(
    op: &str,
    index: &'a ArrayView<'a, I, IxDyn>,
    batch_dims: usize,
) -> Result<CowArray<'a, I, IxDyn>> {
    let q = index.ndim();
    Ok(match q - batch_dims {
        0 => CowArray::from(index.view().insert_axis(Axis(q))),
        1 => CowArray::from(index.view()),
        _ => {
            let mut shape = index.shape()[..batch_dims].to_vec();
            shape.push(index.shape()[batch_dims..].iter().product());
            reshaped(op, index, &shape)?
        }
    })
}

/// `view` in `shape` (same element count, row-major order): the view itself when its strides
/// allow, else a standard-layout copy allocated fallibly (an error naming `op`, not an abort, when
/// it does not fit: a broadcast view can be far larger than its memory).
pub(crate) fn reshaped<'a, T: crate::kernels::words::Plain>(
    op: &str,
    view: &ArrayView<'a, T, IxDyn>,
    shape: &[usize],
) -> Result<CowArray<'a, T, IxDyn>> {
    Ok(match view.clone().into_shape_with_order(IxDyn(shape)) {
        Ok(merged) => CowArray::from(merged),
        Err(_) => CowArray::from(
            super::try_to_owned(op, view)?
                .into_shape_with_order(IxDyn(shape))
                .expect("a standard-layout copy takes any shape of its length"),
        ),
    })
}

/// The flattened index with size-1 axes for the input's non-batch axes before `axis` and for its
/// axes after `axis`: it broadcasts (stride 0) to `plan.gather_shape`.
pub(crate) fn with_unit_axes<'a, I: IndexElem>(
    flat: ArrayView<'a, I, IxDyn>,
    plan: &SelectPlan,
) -> ArrayView<'a, I, IxDyn> {
    let mut v = flat;
    for _ in plan.batch_dims..plan.axis {
        v = v.insert_axis(Axis(plan.batch_dims));
    }
    while v.ndim() < plan.gather_shape.len() {
        let end = v.ndim();
        v = v.insert_axis(Axis(end));
    }
    v
}

/// Batched select, as `tf.gather(input, index, axis, batch_dims)`:
/// `out[b.., k.., t..] = input[b.., p.., index[b.., k..], t..]`, where `b` runs over the first
/// `batch_dims` axes (shared by input and index), `p` over the input's other axes before `axis`,
/// `k` over the index's own axes and `t` over the input's axes after `axis`.
///
/// The output shape is `input.shape[..axis] + index.shape[batch_dims..] + input.shape[axis+1..]`.
/// With `batch_dims = 0` this is NumPy's `take(input, index, axis)` / PyTorch's `index_select`
/// for a 1-d index. `axis` may be negative (from the end).
///
/// ```
/// use ndarray::{Array, array};
///
/// // ROI labels: one box of 4 numbers per class, pick each ROI's labelled class.
/// let roi = Array::from_shape_fn((3, 21, 4), |(r, c, k)| (1000 * r + 10 * c + k) as f32);
/// let labels = array![7, 0, 20];
/// let boxes = gather::select_batched(&roi, 1, &labels, 1)?;
/// assert_eq!(boxes.shape(), &[3, 4]);
/// assert_eq!(boxes[[0, 3]], 73.0);
/// assert_eq!(boxes[[2, 0]], 2200.0);
///
/// // Token logits: [B, L, V] with labels [B, L] gives [B, L].
/// let logits = array![[[0.1f32, 0.9], [0.6, 0.4]]];
/// let picked = gather::select_batched(&logits, -1, &array![[1, 0]], 2)?;
/// assert_eq!(picked, array![[0.9, 0.6]].into_dyn());
///
/// // Top-k patches: [B, N, D] with [B, K] gives [B, K, D].
/// let patches = Array::from_shape_fn((2, 5, 3), |(b, n, d)| (100 * b + 10 * n + d) as i32);
/// let kept = gather::select_batched(&patches, 1, &array![[4, 1], [0, 3]], 1)?;
/// assert_eq!(kept.shape(), &[2, 2, 3]);
/// assert_eq!(kept[[1, 1, 2]], 132);
/// # Ok::<(), gather::Error>(())
/// ```
pub fn select_batched<T, S, D, I, SI, DI>(
    input: &ArrayBase<S, D>,
    axis: isize,
    index: &ArrayBase<SI, DI>,
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
    select_mapped(
        "select_batched",
        input,
        axis,
        index,
        batch_dims,
        Bounds::Strict,
    )
}

/// [`select_batched()`] with the index values mapped under `bounds`; `op` names the op in errors.
pub(crate) fn select_mapped<T, S, D, I, SI, DI>(
    op: &str,
    input: &ArrayBase<S, D>,
    axis: isize,
    index: &ArrayBase<SI, DI>,
    batch_dims: usize,
    bounds: Bounds,
) -> Result<ArrayD<T>>
where
    T: Element,
    S: Data<Elem = T>,
    D: Dimension,
    I: IndexElem,
    SI: Data<Elem = I>,
    DI: Dimension,
{
    let plan = plan(op, input.shape(), axis, index.shape(), batch_dims)?;
    let idx = index.view().into_dyn();
    check_bounds(op, &idx, plan.axis, input.shape()[plan.axis], bounds)?;
    super::output_len(op, &plan.gather_shape)?;
    if plan.out_shape.contains(&0) {
        return Ok(ArrayD::from_shape_vec(IxDyn(&plan.out_shape), Vec::new()).expect("empty"));
    }
    let flat = flatten_own_axes(op, &idx, batch_dims)?;
    let unit = with_unit_axes(flat.view(), &plan);
    let full = unit
        .broadcast(IxDyn(&plan.gather_shape))
        .expect("size-1 axes broadcast to the plan's shape");
    let out = super::gather::gather_mapped(op, input, plan.axis as isize, &full, bounds)?;
    Ok(out
        .into_shape_with_order(IxDyn(&plan.out_shape))
        .expect("gather's output is in standard layout"))
}

/// Method form of [`select_batched()`], on any ndarray array.
///
/// ```
/// use gather::prelude::*;
/// use ndarray::array;
/// let x = array![[1, 2, 3], [4, 5, 6]];
/// assert_eq!(x.select_batched(1, &array![2, 0], 1)?, array![3, 4].into_dyn());
/// # Ok::<(), gather::Error>(())
/// ```
pub trait SelectExt<T: Element> {
    /// See [`select_batched()`].
    fn select_batched<I, SI, DI>(
        &self,
        axis: isize,
        index: &ArrayBase<SI, DI>,
        batch_dims: usize,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension;
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> SelectExt<T> for ArrayBase<S, D> {
    fn select_batched<I, SI, DI>(
        &self,
        axis: isize,
        index: &ArrayBase<SI, DI>,
        batch_dims: usize,
    ) -> Result<ArrayD<T>>
    where
        I: IndexElem,
        SI: Data<Elem = I>,
        DI: Dimension,
    {
        select_batched(self, axis, index, batch_dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array, Array3, ArrayD, IxDyn, array, s};

    /// The definition, written out with explicit coordinates.
    fn reference<T: Copy>(
        x: &ArrayD<T>,
        axis: usize,
        index: &ArrayD<i64>,
        batch_dims: usize,
    ) -> ArrayD<T> {
        let xs = x.shape();
        let is = index.shape();
        let mut shape = xs[..axis].to_vec();
        shape.extend_from_slice(&is[batch_dims..]);
        shape.extend_from_slice(&xs[axis + 1..]);
        let k = is.len() - batch_dims;
        ArrayD::from_shape_fn(IxDyn(&shape), |c| {
            let c = c.slice();
            let mut ic: Vec<usize> = c[..batch_dims].to_vec();
            ic.extend_from_slice(&c[axis..axis + k]);
            let v = index[IxDyn(&ic)] as usize;
            let mut xc = c[..axis].to_vec();
            xc.push(v);
            xc.extend_from_slice(&c[axis + k..]);
            x[IxDyn(&xc)]
        })
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn matches_the_definition_over_random_shapes_axes_and_batch_dims() {
        let mut seed = 7u64;
        for _ in 0..300 {
            let r = 1 + (lcg(&mut seed) % 4) as usize;
            let xs: Vec<usize> = (0..r).map(|_| 1 + (lcg(&mut seed) % 4) as usize).collect();
            let axis = (lcg(&mut seed) % r as u64) as usize;
            let b = (lcg(&mut seed) % (axis as u64 + 1)) as usize;
            let own: Vec<usize> = (0..lcg(&mut seed) % 3)
                .map(|_| (lcg(&mut seed) % 4) as usize)
                .collect();
            let mut is = xs[..b].to_vec();
            is.extend_from_slice(&own);
            let n = xs[axis] as u64;
            let x = ArrayD::from_shape_fn(IxDyn(&xs), |c| {
                c.slice().iter().fold(0i64, |acc, &v| acc * 10 + v as i64)
            });
            let index = ArrayD::from_shape_fn(IxDyn(&is), |_| (lcg(&mut seed) % n) as i64);
            let got = select_batched(&x, axis as isize, &index, b).unwrap();
            assert_eq!(
                got,
                reference(&x, axis, &index, b),
                "x {xs:?} axis {axis} index {is:?} b {b}"
            );
            // Negative axis and a reversed, strided input view give the same logical result.
            let neg = select_batched(&x, axis as isize - r as isize, &index, b).unwrap();
            assert_eq!(neg, got);
        }
    }

    #[test]
    fn strided_and_broadcast_operands_read_their_logical_elements() {
        let x = Array3::from_shape_fn((4, 6, 5), |(a, b, c)| (a * 100 + b * 10 + c) as f64);
        let xv = x.slice(s![..;-1, .., ..;2]); // [4, 6, 3], negative and step strides
        let idx = array![[5i64, 0, 2], [1, 1, 4], [3, 2, 0], [0, 5, 5]];
        let idx_t = idx.t(); // [3, 4]: not standard layout
        let idx_b = idx_t.t(); // back to [4, 3], doubly transposed view
        let got = select_batched(&xv, 1, &idx_b, 1).unwrap();
        let want = reference(&xv.to_owned().into_dyn(), 1, &idx.clone().into_dyn(), 1);
        assert_eq!(got, want);
        // An index whose own axes are a stride-0 broadcast view: [4] labels seen as [4, 2, 3].
        let labels = array![1i64, 4, 0, 2];
        let wide = labels.view().insert_axis(Axis(1)).insert_axis(Axis(2));
        let wide = wide.broadcast((4, 2, 3)).unwrap();
        let got = select_batched(&xv, 1, &wide, 1).unwrap();
        assert_eq!(got.shape(), &[4, 2, 3, 3]);
        let want = reference(&xv.to_owned().into_dyn(), 1, &wide.to_owned().into_dyn(), 1);
        assert_eq!(got, want);
    }

    #[test]
    fn the_three_idioms_equal_gather_with_an_expanded_index() {
        // Top-k patches [B, N, D] + [B, K] -> [B, K, D].
        let p = Array::from_shape_fn((3, 7, 5), |(b, n, d)| (b * 100 + n * 10 + d) as f32);
        let keep = array![[6i64, 1], [0, 0], [3, 5]];
        let expanded = keep.view().insert_axis(Axis(2));
        let expanded = expanded.broadcast((3, 2, 5)).unwrap();
        assert_eq!(
            select_batched(&p, 1, &keep, 1).unwrap(),
            crate::gather(&p, 1, &expanded).unwrap().into_dyn()
        );
        // Token logits [B, L, V] + [B, L] -> [B, L].
        let labels = Array::from_shape_fn((3, 7), |(a, b)| ((a * 3 + b) % 5) as i64);
        let via_gather = crate::gather(&p, 2, &labels.view().insert_axis(Axis(2))).unwrap();
        assert_eq!(
            select_batched(&p, 2, &labels, 2).unwrap(),
            via_gather.index_axis_move(Axis(2), 0).into_dyn()
        );
        // ROI labels [R, C, 4] + [R] -> [R, 4].
        let roi = Array::from_shape_fn((5, 21, 4), |(r, c, k)| (r * 1000 + c * 10 + k) as i32);
        let cls = array![20i64, 0, 7, 7, 13];
        let got = select_batched(&roi, 1, &cls, 1).unwrap();
        assert_eq!(got.shape(), &[5, 4]);
        for r in 0..5 {
            for k in 0..4 {
                assert_eq!(got[[r, k]], roi[[r, cls[r] as usize, k]]);
            }
        }
    }

    #[test]
    fn batch_dims_zero_is_index_select_for_a_1d_index_and_numpy_take_otherwise() {
        let x = Array::from_shape_fn((4, 3), |(a, b)| (a * 10 + b) as u8);
        let ids = array![3i32, 0, 3];
        assert_eq!(
            select_batched(&x, 0, &ids, 0).unwrap(),
            crate::index_select(&x, 0, &ids).unwrap().into_dyn()
        );
        let ids2 = array![[2u16, 1], [0, 0]];
        let got = select_batched(&x, 0, &ids2, 0).unwrap();
        assert_eq!(got.shape(), &[2, 2, 3]);
        assert_eq!(got[[0, 1, 2]], 12);
        // A 0-d index drops the axis.
        let got = select_batched(&x, 1, &ndarray::arr0(2i64), 0).unwrap();
        assert_eq!(got, array![2u8, 12, 22, 32].into_dyn());
    }

    #[test]
    fn errors_name_the_numbers_and_the_fix() {
        let x = Array3::<f32>::zeros((128, 21, 4));
        let e = select_batched(&x, 1, &Array::<i64, _>::zeros((127,)), 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.to_string().contains("127") && e.to_string().contains("128"),
            "{e}"
        );
        let e = select_batched(&x, 3, &Array::<i64, _>::zeros((128,)), 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
        let e = select_batched(&x, 1, &Array::<i64, _>::zeros((128,)), 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RankMismatch);
        let e = select_batched(&x, 0, &Array::<i64, _>::zeros((128,)), 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.hint().unwrap().contains("batch_dims=0"), "{e}");
        let mut labels = Array::<i64, _>::zeros((128,));
        labels[77] = 21;
        let e = select_batched(&x, 1, &labels, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.coordinate(), Some(&[77usize][..]));
        assert_eq!(e.index_value(), Some(21));
        labels[77] = -1;
        let e = select_batched(&x, 1, &labels, 1).unwrap_err();
        assert!(e.hint().unwrap().contains("negative"), "{e}");
        let e = select_batched(&ndarray::arr0(1.0f32), 0, &ndarray::arr0(0i64), 0).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    }

    #[test]
    fn empty_output_whose_shape_no_array_can_have_is_an_error_not_a_panic() {
        // Found by the gather_family fuzz target: the output [2^62, 0, 3] is empty, but ndarray
        // refuses it (3 * 2^62 overflows isize), so building it panicked.
        let x = Array::from_shape_fn((4, 3), |(i, j)| (i * 3 + j) as f32);
        let one = array![0i64];
        let index = one.broadcast((1usize << 62, 0)).unwrap();
        let e = select_batched(&x, 0, &index, 0).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("[4611686018427387904, 0, 3]"), "{e}");
        // The same index into a narrower input gives an empty output that does exist.
        let narrow = Array::from_shape_fn((4, 1), |(i, _)| i as f32);
        let out = select_batched(&narrow, 0, &index, 0).unwrap();
        assert_eq!(out.shape(), &[1 << 62, 0, 1]);
    }

    #[test]
    fn a_broadcast_index_too_large_to_flatten_is_an_error_not_an_abort() {
        // Found by the gather_family fuzz target: two own axes that cannot be merged in place (a
        // broadcast one among them) were flattened by an infallible copy of 2^42 values, and the
        // failed allocation aborted the process.
        let x = Array::from_shape_fn((4, 3), |(i, j)| (i * 3 + j) as f32);
        let one = array![[1i32, 2]];
        let huge = one.broadcast((1usize << 40, 4, 2)).unwrap();
        let e = select_batched(&x, 1, &huge, 0).unwrap_err();
        assert!(e.to_string().contains("cannot allocate"), "{e}");
        // Its gradient too, for a broadcast grad_output of the output's shape.
        let zero = array![0.0f32];
        let g = zero.broadcast((4, 1usize << 40, 4, 2)).unwrap();
        let e = crate::grad::select_batched(&g, (4, 3), 1, &huge, 0).unwrap_err();
        assert!(e.to_string().contains("cannot allocate"), "{e}");
        // The same layout at a size that fits is flattened by a copy and selects correctly.
        let small = one.broadcast((3, 4, 2)).unwrap();
        let got = select_batched(&x, 1, &small, 0).unwrap();
        assert_eq!(got.shape(), &[4, 3, 4, 2]);
        for i in 0..4 {
            for (a, b, c) in [(0, 0, 0), (2, 3, 1), (1, 2, 0)] {
                assert_eq!(got[[i, a, b, c]], x[[i, one[[0, c]] as usize]]);
            }
        }
        // A standard-layout index with two own axes merges in place: same values.
        let owned = small.to_owned();
        assert_eq!(select_batched(&x, 1, &owned, 0).unwrap(), got);
    }

    #[test]
    fn empty_outputs_have_the_documented_shape() {
        let x = Array3::<f32>::zeros((2, 0, 3));
        let got = select_batched(&x, 1, &Array::<i64, _>::zeros((2, 0)), 1).unwrap();
        assert_eq!(got.shape(), &[2, 0, 3]);
        let x = Array3::<f32>::zeros((0, 5, 3));
        let got = select_batched(&x, 1, &Array::<i64, _>::zeros((0, 4)), 1).unwrap();
        assert_eq!(got.shape(), &[0, 4, 3]);
        // Selecting from an empty axis with a non-empty index is an error.
        let x = Array3::<f32>::zeros((2, 0, 3));
        let e = select_batched(&x, 1, &Array::<i64, _>::zeros((2, 1)), 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    }
}
