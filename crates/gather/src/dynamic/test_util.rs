//! Builders shared by the dynamic layer's unit tests.

use ndarray::{Array, Dimension};

use super::{Arg, Args, Tensor, TensorElem, Tensors, call};

/// Named arguments from `(name, value)` pairs.
pub(crate) fn args(list: &[(&str, Arg)]) -> Args {
    let mut a = Args::default();
    for (n, v) in list {
        a.set(n, v.clone());
    }
    a
}

/// Named tensors from `(name, tensor)` pairs.
pub(crate) fn tensors(list: Vec<(&str, Tensor)>) -> Tensors {
    list.into_iter().map(|(n, t)| (n.to_string(), t)).collect()
}

/// A typed array as a run-time tensor.
pub(crate) fn t<T: TensorElem, D: Dimension>(a: Array<T, D>) -> Tensor {
    T::wrap(a.into_dyn())
}

/// The single `output` of an op that must succeed.
pub(crate) fn one(op: &str, a: &Args, ins: &Tensors) -> Tensor {
    let out = call(op, a, ins).unwrap();
    assert_eq!(out.len(), 1, "{op}");
    assert_eq!(out[0].0, "output");
    out[0].1.clone()
}
