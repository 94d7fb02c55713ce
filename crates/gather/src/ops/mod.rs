//! The ops, one file per family. Shared shape checks and hints live here.

pub mod gather;
pub mod repeat;
pub mod scatter;
pub mod sort;

use ndarray::{ArrayBase, ArrayView, Axis, Data, Dimension, IxDyn};

use crate::error::{fmt_shape, Error, Result};

/// A dynamic-rank view of `a`, with a 0-d array seen as 1-d of one element (PyTorch's
/// "nonempty" convention of the gather family).
pub(crate) fn view_1d_if_scalar<S: Data, D: Dimension>(a: &ArrayBase<S, D>) -> ArrayView<'_, S::Elem, IxDyn> {
    let v = a.view().into_dyn();
    if v.ndim() == 0 {
        v.insert_axis(Axis(0))
    } else {
        v
    }
}

/// How to turn an index of the wrong rank into one of `input_shape`'s rank for `dim`: the axes to
/// insert and the shape to broadcast to, written as ndarray calls.
pub(crate) fn rank_fix_hint(op: &str, input_shape: &[usize], index_shape: &[usize], dim: usize) -> Option<String> {
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
    // Assign the index's axes, in order, to the input's non-dim axes they fit.
    let mut assigned = vec![None; n];
    let mut k = 0;
    for (a, slot) in assigned.iter_mut().enumerate() {
        if k < index_shape.len() && a != dim && index_shape[k] <= input_shape[a] {
            *slot = Some(index_shape[k]);
            k += 1;
        }
    }
    if k < index_shape.len() {
        return None;
    }
    let target: Vec<usize> = (0..n)
        .map(|a| match assigned[a] {
            Some(s) => s,
            None if a == dim => 1,
            None => input_shape[a],
        })
        .collect();
    let mut call = String::from("index");
    for (a, s) in assigned.iter().enumerate() {
        if s.is_none() {
            call.push_str(&format!(".insert_axis(Axis({a}))"));
        }
    }
    let needs_broadcast = (0..n).any(|a| assigned[a].is_none() && a != dim && input_shape[a] > 1);
    if needs_broadcast {
        let dims: Vec<String> = target.iter().map(|s| s.to_string()).collect();
        call.push_str(&format!(".broadcast(({},)).unwrap()", dims.join(", ")));
    }
    let picked = input_shape[dim];
    Some(format!(
        "{op} needs an index with the input's {n} dims; to pick one of the {picked} entries along dim {dim} for each position, give the index the shape {}: `{call}` (no copy is made); the output then has that shape too",
        fmt_shape(&target)
    ))
}

/// The rank rule of gather/scatter: `max(a.ndim, 1) == max(index.ndim, 1)`.
pub(crate) fn check_index_rank(op: &str, what: &str, input_shape: &[usize], index_shape: &[usize], dim: usize) -> Result<()> {
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
    if let Some(h) = rank_fix_hint(op, input_shape, index_shape, dim.min(input_shape.len().saturating_sub(1))) {
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
        None => format!("{op}: expected index {} to be no larger than {what} {} apart from dimension {dim}", fmt_shape(index_shape), fmt_shape(input_shape)),
    };
    if let Some(s) = src_shape {
        msg.push_str(&format!(" and to be no larger than src {}", fmt_shape(s)));
        if let Some(d) = bad_src {
            msg.push_str(&format!(" (index is {} but src is {} at dimension {d})", index_shape[d], s[d]));
        }
    }
    let mut hint = String::new();
    if let Some(d) = bad_self {
        let alt: Vec<usize> = (0..input_shape.len())
            .filter(|&a| a != dim && (0..input_shape.len()).all(|x| x == a || index_shape[x] <= input_shape[x]))
            .collect();
        hint = format!(
            "the index may be larger than the {what} only along dim {dim}; at dimension {d} it is {} but the {what} has {}",
            index_shape[d], input_shape[d]
        );
        if let Some(a) = alt.first() {
            hint.push_str(&format!("; did you mean dim={a}? (dims count from 0, or from -1 at the end)"));
        }
    } else if let Some(d) = bad_src {
        hint = format!("src must be at least as large as the index on every dim; slice the index to {} at dimension {d}, or pass a larger src", src_shape.unwrap()[d]);
    }
    Err(Error::shape(msg).with_hint(hint))
}
