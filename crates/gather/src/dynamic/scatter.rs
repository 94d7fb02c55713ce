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
    if let TensorView::I32(i) = &index {
        return crate::dynamic::on_compact(i, |i| Read::Gather32(dim, i).on(&x));
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
    if let (TensorView::I32(i), TensorViewMut::F32(dst), true) = (&index, &mut *target, is_sum(op))
    {
        return sums_i32(op, args, Dst::Into(dst), dim, i, inputs).map(|_| ());
    }
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
    if let (TensorView::I32(i), TensorView::F32(x), true) = (&index, &x, is_sum(op)) {
        let out = sums_i32(op, args, Dst::Fresh(x), dim, i, inputs)?;
        return Ok(Tensor::from(out.unwrap_or_else(|| {
            unreachable!("a fresh scatter returns its result")
        })));
    }
    with_view!(x, x => {
        let out = with_index_tensor!(index, i => scatter_typed(op, args, Dst::Fresh(x), dim, i, inputs),
            _ => {
                let i = empty_index_or_error(op, &index, x.ndim(), dim)?;
                scatter_typed(op, args, Dst::Fresh(x), dim, &i.view(), inputs)
            })?;
        Ok(Tensor::from(out.unwrap_or_else(|| unreachable!("a fresh scatter returns its result"))))
    })
}

/// scatter_add and scatter_reduce of float32 values on an int32 index, JAX's default types,
/// run on the index as it is: widening it first copies it to twice its bytes, which cost a
/// 4M-element scatter_add more than the scatter itself. Other types and ops take the widened
/// copy, which keeps the kernels compiled for one index type apart from this pair.
fn sums_i32(
    op: &str,
    args: &Args,
    dst: Dst<'_, '_, f32>,
    dim: isize,
    index: &ArrayViewD<'_, i32>,
    inputs: &dyn Inputs,
) -> Result<Option<ArrayD<f32>>> {
    crate::dynamic::on_compact(index, |i| sums(op, args, dst, dim, i, inputs))
}

/// Whether `op` is one of the scatters that do arithmetic (see [`sums`]).
fn is_sum(op: &str) -> bool {
    matches!(op, "scatter_add" | "scatter_reduce")
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
        _ if is_sum(op) => sums(op, args, dst, dim, index, inputs),
        _ => unreachable!("scatter_family is called for scatter ops only"),
    }
}

/// scatter_add and scatter_reduce, the scatters that do arithmetic.
fn sums<T: TensorElem, I: IndexElem>(
    op: &str,
    args: &Args,
    dst: Dst<'_, '_, T>,
    dim: isize,
    index: &ArrayViewD<'_, I>,
    inputs: &dyn Inputs,
) -> Result<Option<ArrayD<T>>> {
    match op {
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
        _ => unreachable!("sums is called for scatter_add and scatter_reduce only"),
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

    /// float32 scatter_add and scatter_reduce read an int32 index as it is (JAX's default
    /// types), and the gradient of gather too; every other pair widens the index to int64. Both
    /// give bitwise the same: in place and out of place, every reduction with and without self,
    /// a materialised broadcast of row ids (past the size where the dynamic layer looks for
    /// one), and the same errors for values out of range.
    #[test]
    fn float32_sums_on_an_int32_index_equal_the_widened_int64_ones() {
        use super::super::call_grad;
        use ndarray::Array2;
        let mut seed = 12345u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        let (rows, cols, n) = (50usize, 40usize, 900usize);
        let x = Array2::from_shape_simple_fn((rows, cols), || (next() % 1000) as f32 / 7.0);
        let src = Array2::from_shape_simple_fn((n, cols), || (next() % 1000) as f32 / 3.0 - 100.0);
        let random = Array2::from_shape_simple_fn((n, cols), || next() % rows as i64);
        let ids = Array2::from_shape_simple_fn((n, 1), || next() % rows as i64);
        let materialised = ids.broadcast((n, cols)).unwrap().to_owned();
        assert!(materialised.len() >= crate::plan::GRAIN);
        let f32_bits = |t: &Tensor| match t {
            Tensor::F32(a) => a.mapv(f32::to_bits),
            other => panic!("expected float32, got {:?}", other.dtype()),
        };
        let narrow = |i: &Array2<i64>| Tensor::from(i.mapv(|v| v as i32).into_dyn());
        let wide = |i: &Array2<i64>| Tensor::from(i.clone().into_dyn());
        let mut cases: Vec<(&str, Option<(&str, bool)>)> = vec![("scatter_add", None)];
        for r in ["sum", "prod", "mean", "amax", "amin"] {
            for include_self in [true, false] {
                cases.push(("scatter_reduce", Some((r, include_self))));
            }
        }
        for index in [&random, &materialised] {
            for &(op, reduce) in &cases {
                let mut args = Args::default();
                args.set("dim", Arg::Int(0));
                if let Some((r, include_self)) = reduce {
                    args.set("reduce", Arg::Str(r.into()));
                    args.set("include_self", Arg::Bool(include_self));
                }
                let run = |i: Tensor| {
                    let inputs = ins(vec![
                        ("input", Tensor::from(x.clone().into_dyn())),
                        ("index", i.clone()),
                        ("src", Tensor::from(src.clone().into_dyn())),
                    ]);
                    let fresh = call(op, &args, &inputs).unwrap().remove(0).1;
                    let mut target = Tensor::from(x.clone().into_dyn());
                    let inputs = ins(vec![
                        ("index", i),
                        ("src", Tensor::from(src.clone().into_dyn())),
                    ]);
                    call_inplace(op, &args, target.view_mut(), &inputs).unwrap();
                    (f32_bits(&fresh), f32_bits(&target))
                };
                let (fresh, into) = run(narrow(index));
                assert_eq!(
                    (&fresh, &into),
                    (&run(wide(index)).0, &run(wide(index)).1),
                    "{op} {reduce:?}"
                );
                assert_eq!(fresh, into, "{op} {reduce:?}");
            }
            // The gradient of gather: grad_output has the index's shape.
            let mut args = Args::default();
            args.set("dim", Arg::Int(0));
            let g = Tensor::from(src.clone().into_dyn());
            let grad = |i: Tensor| {
                let inputs = ins(vec![
                    ("input", Tensor::from(x.clone().into_dyn())),
                    ("index", i),
                ]);
                f32_bits(&call_grad("gather", &args, &inputs, &g.view()).unwrap()[0].1)
            };
            assert_eq!(grad(narrow(index)), grad(wide(index)));
        }
        // Values out of range: the int32 read and the widened one give one message.
        for v in [rows as i64, -1] {
            let mut bad = random.clone();
            bad[[n - 1, cols - 1]] = v;
            let mut args = Args::default();
            args.set("dim", Arg::Int(0));
            let error = |i: Tensor| {
                let inputs = ins(vec![
                    ("input", Tensor::from(x.clone().into_dyn())),
                    ("index", i),
                    ("src", Tensor::from(src.clone().into_dyn())),
                ]);
                call("scatter_add", &args, &inputs).unwrap_err().to_string()
            };
            assert_eq!(error(narrow(&bad)), error(wide(&bad)));
            let message = error(narrow(&bad));
            assert!(
                message.contains(&format!("index {v} is out of bounds")),
                "{message}"
            );
        }
    }
}
