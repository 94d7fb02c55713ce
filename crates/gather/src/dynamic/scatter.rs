//! gather and the scatter family, dynamically typed.

use ndarray::{ArrayViewD, ArrayViewMutD};

use ndarray::ArrayD;

use super::Read;
use super::{
    Arg, Args, Inputs, Tensor, TensorElem, TensorView, TensorViewMut, index_dtype_error, input,
    same_dtype,
};
use super::{with_index_tensor, with_view, with_view_mut};
use crate::dims::normalize_dim;
use crate::error::{Error, Result};
use crate::index::IndexElem;
use crate::kernels::words::Moved;
use crate::ops::scatter::{self as legacy, LegacyReduce, Reduce, ScatterSrc};

/// An index tensor of a non-integer dtype is accepted only when it is empty (PyTorch skips the
/// dtype check then); it is replaced by an empty `i64` index of the same shape.
pub(crate) fn empty_index_or_error(
    op: &str,
    index: &TensorView<'_>,
    ndim: usize,
    dim: isize,
) -> Result<ArrayD<i64>> {
    normalize_dim(op, dim, ndim)?;
    if index.is_empty() {
        Ok(ArrayD::zeros(index.shape()))
    } else {
        Err(index_dtype_error(op, "index", index))
    }
}

pub(crate) fn gather(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    if let (TensorView::I32(i), 4 | 8) = (&index, x.dtype().size_of()) {
        return match crate::dynamic::materialised_broadcast(i) {
            Some(c) => Read::Gather32(dim, &crate::dynamic::spread(&c, i)).on(&x),
            None => Read::Gather32(dim, i).on(&x),
        };
    }
    with_index_tensor!(index, i => Read::Gather(dim, i).on(&x),
    _ => {
        let i = empty_index_or_error("gather", &index, x.shape().len(), dim)?;
        Read::Gather(dim, &i.view()).on(&x)
    })
}

pub(crate) fn scatter_family(
    op: &str,
    args: &Args,
    target: &mut TensorViewMut<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    normalize_dim(op, dim, target.shape().len())?;
    with_view_mut!(*target, dst => {
        with_index_tensor!(index, i => scatter_typed(op, args, Dst::Into(dst), dim, i, inputs),
            _ => {
                let i = empty_index_or_error(op, &index, dst.ndim(), dim)?;
                scatter_typed(op, args, Dst::Into(dst), dim, &i.view(), inputs)
            })
        .map(|_| ())
    })
}

/// The out-of-place scatter, scatter_add and scatter_reduce: the typed out-of-place functions,
/// which copy `input` and scatter in one pass where they can.
pub(crate) fn scatter_fresh(op: &str, args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    normalize_dim(op, dim, x.shape().len())?;
    with_view!(x, x => {
        let out = with_index_tensor!(index, i => scatter_typed(op, args, Dst::Fresh(x), dim, i, inputs),
            _ => {
                let i = empty_index_or_error(op, &index, x.ndim(), dim)?;
                scatter_typed(op, args, Dst::Fresh(x), dim, &i.view(), inputs)
            })?;
        Ok(Tensor::from(out.unwrap_or_else(|| unreachable!("a fresh scatter returns its result"))))
    })
}

/// Where a scatter writes: into the caller's array, or into a new copy of `input`.
enum Dst<'t, 'a, T> {
    Into(&'t mut ArrayViewMutD<'a, T>),
    Fresh(&'t ArrayViewD<'a, T>),
}

/// The plain write of `src` into `dst`. It only moves elements, so it runs on the moved type
/// (see [`Moved`]).
fn set<T: TensorElem + Moved, I: IndexElem>(
    dst: Dst<'_, '_, T>,
    dim: isize,
    index: &ArrayViewD<'_, I>,
    src: impl ScatterSrc<T::As>,
) -> Result<Option<ArrayD<T>>> {
    match dst {
        Dst::Into(d) => {
            crate::scatter_inplace(&mut T::moved_mut(&mut d.view_mut()), dim, index, src)
                .map(|_| None)
        }
        Dst::Fresh(x) => {
            crate::scatter(&T::moved(x), dim, index, src).map(|o| Some(T::from_moved(o)))
        }
    }
}

/// Runs `op` on `dst`; the result is `Some` for [`Dst::Fresh`].
fn scatter_typed<T: TensorElem + Moved, I: IndexElem>(
    op: &str,
    args: &Args,
    dst: Dst<'_, '_, T>,
    dim: isize,
    index: &ArrayViewD<'_, I>,
    inputs: &dyn Inputs,
) -> Result<Option<ArrayD<T>>> {
    match op {
        "scatter" => {
            let reduce = match args.get("reduce") {
                None | Some(Arg::None) => None,
                Some(Arg::Str(s)) => Some(s.parse::<LegacyReduce>()?),
                Some(other) => {
                    return Err(Error::invalid(format!(
                        "scatter: reduce must be a string, got {other:?}"
                    )));
                }
            };
            let src = match inputs.tensor("src") {
                Some(src) => Some(same_dtype::<T>(op, "src", &src)?),
                None => None,
            };
            match (src, reduce) {
                (Some(src), None) => set(dst, dim, index, &T::moved(&src)),
                (None, None) => {
                    let value = T::from_scalar(args.scalar("value")?)?.to_moved();
                    set(dst, dim, index, value)
                }
                (Some(src), Some(r)) => match dst {
                    Dst::Into(d) => {
                        legacy::scatter_legacy_inplace(d, dim, index, &src, r).map(|_| None)
                    }
                    Dst::Fresh(x) => legacy::scatter_legacy(x, dim, index, &src, r).map(Some),
                },
                (None, Some(r)) => {
                    let value = T::from_scalar(args.scalar("value")?)?;
                    match dst {
                        Dst::Into(d) => {
                            legacy::scatter_legacy_inplace(d, dim, index, value, r).map(|_| None)
                        }
                        Dst::Fresh(x) => legacy::scatter_legacy(x, dim, index, value, r).map(Some),
                    }
                }
            }
        }
        "scatter_add" => {
            let src = same_dtype::<T>(op, "src", &input(inputs, "src")?)?;
            match dst {
                Dst::Into(d) => crate::scatter_add_inplace(d, dim, index, &src).map(|_| None),
                Dst::Fresh(x) => crate::scatter_add(x, dim, index, &src).map(Some),
            }
        }
        "scatter_reduce" => {
            let src = same_dtype::<T>(op, "src", &input(inputs, "src")?)?;
            let reduce: Reduce = args.str("reduce")?.parse()?;
            let include_self = args.bool_or("include_self", true)?;
            match dst {
                Dst::Into(d) => {
                    crate::scatter_reduce_inplace(d, dim, index, &src, reduce, include_self)
                        .map(|_| None)
                }
                Dst::Fresh(x) => {
                    crate::scatter_reduce(x, dim, index, &src, reduce, include_self).map(Some)
                }
            }
        }
        _ => unreachable!("scatter_family is called for scatter ops only"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Arg, Args, Tensor, Tensors, call, call_inplace};
    use half::f16;
    use ndarray::array;

    fn ins(pairs: Vec<(&str, Tensor)>) -> Tensors {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// The bits of element `k` of a 1-D tensor.
    fn bits(t: &Tensor, k: usize) -> u64 {
        match t {
            Tensor::I32(a) => a[[k]] as u32 as u64,
            Tensor::I64(a) => a[[k]] as u64,
            Tensor::F16(a) => a[[k]].to_bits() as u64,
            Tensor::Bool(a) => a[[k]] as u64,
            other => panic!("no bits helper for {:?}", other.dtype()),
        }
    }

    /// The data-moving ops run on words of the element's width in the dynamic layer: integer
    /// values whose bits are float NaNs (signalling or with a payload), f16 NaN payloads, the
    /// extremes and bool all come through gather, take, index_select, the ONNX gathers, scatter,
    /// index_fill, masked_select and repeat_interleave bit for bit, and as the dtype they went in
    /// as.
    #[test]
    fn moved_elements_keep_their_bits_and_dtype() {
        let ints = array![0x7f80_0001i32, -1, i32::MIN, 7].into_dyn(); // sNaN and NaN bits as f32
        let longs = array![0x7ff0_0000_0000_0001i64, -1, i64::MAX, 3].into_dyn();
        let halves = array![
            f16::from_bits(0x7c01),
            f16::from_bits(0xfe00),
            f16::MIN,
            f16::ONE
        ]
        .into_dyn();
        let bools = array![true, false, true, false].into_dyn();
        let idx = Tensor::from(array![3i64, 0, 1, 2, 0].into_dyn());
        let mut dim0 = Args::default();
        dim0.set("dim", Arg::Int(0));
        for t in [
            Tensor::from(ints),
            Tensor::from(longs),
            Tensor::from(halves),
            Tensor::from(bools),
        ] {
            let want: Vec<u64> = [3usize, 0, 1, 2, 0].iter().map(|&k| bits(&t, k)).collect();
            for op in ["gather", "take", "index_select"] {
                let out = call(
                    op,
                    &dim0,
                    &ins(vec![("input", t.clone()), ("index", idx.clone())]),
                )
                .unwrap();
                let out = &out[0].1;
                assert_eq!(out.dtype(), t.dtype(), "{op}");
                let got: Vec<u64> = (0..5).map(|k| bits(out, k)).collect();
                assert_eq!(got, want, "{op} {:?}", t.dtype());
            }
            for op in ["onnx_gather", "onnx_gather_elements"] {
                let out = call(
                    op,
                    &Args::default(),
                    &ins(vec![("data", t.clone()), ("indices", idx.clone())]),
                )
                .unwrap();
                assert_eq!(out[0].1.dtype(), t.dtype(), "{op}");
                let got: Vec<u64> = (0..5).map(|k| bits(&out[0].1, k)).collect();
                assert_eq!(got, want, "{op} {:?}", t.dtype());
            }
            // scatter the elements back in reverse order: position 3 - k gets element k.
            let mut target = t.clone();
            let rev = Tensor::from(array![3i64, 2, 1, 0].into_dyn());
            call_inplace(
                "scatter",
                &dim0,
                target.view_mut(),
                &ins(vec![("index", rev), ("src", t.clone())]),
            )
            .unwrap();
            let got: Vec<u64> = (0..4).map(|k| bits(&target, k)).collect();
            let want: Vec<u64> = (0..4).map(|k| bits(&t, 3 - k)).collect();
            assert_eq!(got, want, "scatter {:?}", t.dtype());
            // masked_select keeps positions 0, 2, 3; repeat_interleave doubles every element.
            let mask = Tensor::from(array![true, false, true, true].into_dyn());
            let out = call(
                "masked_select",
                &Args::default(),
                &ins(vec![("input", t.clone()), ("mask", mask)]),
            )
            .unwrap();
            assert_eq!(out[0].1.dtype(), t.dtype());
            let got: Vec<u64> = (0..3).map(|k| bits(&out[0].1, k)).collect();
            let want: Vec<u64> = [0usize, 2, 3].iter().map(|&k| bits(&t, k)).collect();
            assert_eq!(got, want, "masked_select {:?}", t.dtype());
            let mut twice = Args::default();
            twice.set("repeats", Arg::Int(2));
            let out = call(
                "repeat_interleave",
                &twice,
                &ins(vec![("input", t.clone())]),
            )
            .unwrap();
            assert_eq!(out[0].1.dtype(), t.dtype());
            let got: Vec<u64> = (0..8).map(|k| bits(&out[0].1, k)).collect();
            let want: Vec<u64> = (0..8).map(|k| bits(&t, k / 2)).collect();
            assert_eq!(got, want, "repeat_interleave {:?}", t.dtype());
        }
        // A filled value arrives as the dtype's value, not as a reinterpreted float.
        let mut a = dim0.clone();
        a.set("value", Arg::Int(-2));
        let mut target = Tensor::from(array![1i32, 1, 1].into_dyn());
        let index = Tensor::from(array![0i64, 2].into_dyn());
        call_inplace(
            "index_fill",
            &a,
            target.view_mut(),
            &ins(vec![("index", index.clone())]),
        )
        .unwrap();
        assert_eq!(target, Tensor::from(array![-2i32, 1, -2].into_dyn()));
        let mut target = Tensor::from(array![1i64, 1, 1].into_dyn());
        call_inplace(
            "scatter",
            &a,
            target.view_mut(),
            &ins(vec![("index", index)]),
        )
        .unwrap();
        assert_eq!(target, Tensor::from(array![-2i64, 1, -2].into_dyn()));
    }
}
