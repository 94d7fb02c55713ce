//! The ops, one file per family. Shared shape checks and hints live here.

pub mod bounds;
pub mod broadcast;
pub mod gather;
pub mod index;
pub mod masked;
pub mod nd;
pub mod onnx;
pub mod options;
pub mod put;
pub mod reduce;
pub mod repeat;
pub mod scatter;
pub mod scatter_plan;
pub mod segment;
pub mod select;
pub mod sort;
pub mod take;

use ndarray::{Array, ArrayBase, ArrayView, Axis, Data, Dimension, IxDyn};

use crate::error::{Error, Result, fmt_shape};

/// A dynamic-rank view of `a`, with a 0-d array seen as 1-d of one element (PyTorch's
/// "nonempty" convention of the gather family).
pub(crate) fn view_1d_if_scalar<S: Data, D: Dimension>(
    a: &ArrayBase<S, D>,
) -> ArrayView<'_, S::Elem, IxDyn> {
    let v = a.view().into_dyn();
    if v.ndim() == 0 {
        v.insert_axis(Axis(0))
    } else {
        v
    }
}

/// The element count of an output of `shape`, or the error [`try_vec`] gives when no buffer can
/// hold that many elements, or no array can have that shape (the product of its nonzero lengths
/// overflows `isize`, which ndarray refuses even for an empty array).
pub(crate) fn output_len(op: &str, shape: &[usize]) -> Result<usize> {
    crate::dims::numel(shape).ok_or_else(|| {
        if shape.contains(&0) {
            Error::invalid(format!(
                "{op}: cannot create an output of shape {}: it is empty, but ndarray needs the product of its nonzero lengths to fit in isize",
                fmt_shape(shape)
            ))
            .with_hint("an empty result has no data: skip the call when an input has a zero-length axis, or make the huge (broadcast) axes smaller")
        } else {
            Error::invalid(format!(
                "{op}: cannot allocate an output of shape {}: its element count overflows",
                fmt_shape(shape)
            ))
            .with_hint("the output is too large for memory; work on smaller pieces (e.g. slices along the first axis)")
        }
    })
}

/// An empty `Vec` with room for `n` elements, or an error (not an abort) when that much memory
/// cannot be had. A large buffer is advised to be backed by huge pages, which makes its first
/// touch several times cheaper.
pub(crate) fn try_vec<T>(op: &str, n: usize) -> Result<Vec<T>> {
    crate::memory::huge_page_vec(n).map_err(|_| output_too_large(op, n, std::mem::size_of::<T>()))
}

/// [`try_vec`]'s error, out of line: compiled once, not per element type.
#[cold]
#[inline(never)]
fn output_too_large(op: &str, n: usize, elem: usize) -> Error {
    Error::invalid(format!(
        "{op}: cannot allocate an output of {n} elements ({} bytes)",
        n.saturating_mul(elem)
    ))
    .with_hint("the output is too large for memory; work on smaller pieces (e.g. slices along the first axis)")
}

/// A standard-layout copy of `a` (the starting point of every out-of-place write op), failing with
/// an error instead of aborting when it does not fit in memory. Large copies run in parallel.
pub(crate) fn try_to_owned<T, S, D>(op: &str, a: &ArrayBase<S, D>) -> Result<Array<T, D>>
where
    T: crate::kernels::words::Plain,
    S: Data<Elem = T>,
    D: Dimension,
{
    let v = try_vec(op, a.len())?;
    let v = crate::kernels::copy::copy_into(&a.view().into_dyn(), v);
    Ok(Array::from_shape_vec(a.raw_dim(), v).expect("same shape"))
}

/// How to turn an index of the wrong rank into one of `input_shape`'s rank for `dim`: the axes to
/// insert and the shape to broadcast to, written as ndarray calls.
pub(crate) fn rank_fix_hint(
    op: &str,
    input_shape: &[usize],
    index_shape: &[usize],
    dim: usize,
) -> Option<String> {
    let n = input_shape.len();
    if index_shape.len() >= n {
        if index_shape.len() > n {
            let extra = index_shape.len() - n;
            return Some(format!(
                "the index has {extra} more dim(s) than the input; {op} needs equal ranks: drop the extra axes (e.g. `index.index_axis(Axis(0), 0)` or `into_shape`), or give the input more axes with `insert_axis`"
            ));
        }
        return None;
    }
    let k_idx = index_shape.len();
    let mut assigned = vec![None; n];
    let prefix_with_dim = k_idx == dim + 1 && (0..dim).all(|d| index_shape[d] <= input_shape[d]);
    if prefix_with_dim {
        // The top-k / MAE idiom: `[B, K]` picks K entries along dim 1 of `[B, N, D]`; the missing
        // trailing axes are broadcast.
        for (a, slot) in assigned.iter_mut().enumerate().take(k_idx) {
            *slot = Some(index_shape[a]);
        }
    } else {
        // The token-logit / ROI idiom: one entry per position; the index's axes are the input's
        // non-dim axes, in order, and dim gets size 1.
        let mut k = 0;
        for (a, slot) in assigned.iter_mut().enumerate() {
            if k < k_idx && a != dim && index_shape[k] <= input_shape[a] {
                *slot = Some(index_shape[k]);
                k += 1;
            }
        }
        if k < k_idx {
            return None;
        }
    }
    let target: Vec<usize> = (0..n)
        .map(|a| match assigned[a] {
            Some(s) => s,
            None if a == dim => 1,
            None => input_shape[a],
        })
        .collect();
    let mut call = String::from("index.view()");
    for (a, s) in assigned.iter().enumerate() {
        if s.is_none() {
            call.push_str(&format!(".insert_axis(Axis({a}))"));
        }
    }
    let needs_broadcast = (0..n).any(|a| assigned[a].is_none() && a != dim && input_shape[a] > 1);
    if needs_broadcast {
        let dims: Vec<String> = target.iter().map(|s| s.to_string()).collect();
        let tuple = if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        };
        call.push_str(&format!(".broadcast({tuple}).unwrap()"));
    }
    let picked = input_shape[dim];
    let what = if prefix_with_dim {
        format!(
            "to pick {} of the {picked} entries along dim {dim} and keep every other axis whole",
            index_shape[dim]
        )
    } else {
        format!("to pick one of the {picked} entries along dim {dim} for each position")
    };
    Some(format!(
        "{op} needs an index with the input's {n} dims; {what}, give the index the shape {}: `{call}` (no copy is made); the output then has that shape too",
        fmt_shape(&target)
    ))
}

/// The rank rule of gather/scatter: `max(a.ndim, 1) == max(index.ndim, 1)`.
pub(crate) fn check_index_rank(
    op: &str,
    what: &str,
    input_shape: &[usize],
    index_shape: &[usize],
    dim: usize,
) -> Result<()> {
    if input_shape.len().max(1) == index_shape.len().max(1) {
        return Ok(());
    }
    let msg = format!(
        "{op}: Index tensor must have the same number of dimensions as {what} tensor (index has {} dims {}, {what} has {} dims {}, dim {dim})",
        index_shape.len(),
        fmt_shape(index_shape),
        input_shape.len(),
        fmt_shape(input_shape)
    );
    let mut e = Error::rank(msg);
    if let Some(h) = rank_fix_hint(
        op,
        input_shape,
        index_shape,
        dim.min(input_shape.len().saturating_sub(1)),
    ) {
        e = e.with_hint(h);
    }
    Err(e)
}

/// The size rule of gather/scatter: `index.shape[d] <= other.shape[d]` for every `d` (except `dim`
/// when `skip_dim`). Both shapes have the same rank.
pub(crate) fn check_index_fits(
    op: &str,
    input_shape: &[usize],
    index_shape: &[usize],
    src_shape: Option<&[usize]>,
    dim: usize,
) -> Result<()> {
    let bad_self = (0..input_shape.len()).find(|&d| d != dim && index_shape[d] > input_shape[d]);
    let bad_src = src_shape.and_then(|s| (0..s.len()).find(|&d| index_shape[d] > s[d]));
    if bad_self.is_none() && bad_src.is_none() {
        return Ok(());
    }
    let what = if src_shape.is_some() { "self" } else { "input" };
    let mut msg = match bad_self {
        Some(d) => format!(
            "{op}: Size does not match at dimension {d}: expected index {} to be no larger than {what} {} apart from dimension {dim}",
            fmt_shape(index_shape),
            fmt_shape(input_shape)
        ),
        None => format!(
            "{op}: expected index {} to be no larger than {what} {} apart from dimension {dim}",
            fmt_shape(index_shape),
            fmt_shape(input_shape)
        ),
    };
    if let Some(s) = src_shape {
        msg.push_str(&format!(" and to be no larger than src {}", fmt_shape(s)));
        if let Some(d) = bad_src {
            msg.push_str(&format!(
                " (index is {} but src is {} at dimension {d})",
                index_shape[d], s[d]
            ));
        }
    }
    let mut hint = String::new();
    if let Some(d) = bad_self {
        let alt: Vec<usize> = (0..input_shape.len())
            .filter(|&a| {
                a != dim
                    && (0..input_shape.len()).all(|x| x == a || index_shape[x] <= input_shape[x])
            })
            .collect();
        hint = format!(
            "the index may be larger than the {what} only along dim {dim}; at dimension {d} it is {} but the {what} has {}",
            index_shape[d], input_shape[d]
        );
        if let Some(a) = alt.first() {
            hint.push_str(&format!(
                "; did you mean dim={a}? (dims count from 0, or from -1 at the end)"
            ));
        }
    } else if let Some(d) = bad_src {
        hint = format!(
            "src must be at least as large as the index on every dim; slice the index to {} at dimension {d}, or pass a larger src",
            src_shape.unwrap()[d]
        );
    }
    Err(Error::shape(msg).with_hint(hint))
}
