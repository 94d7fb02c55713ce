//! The broadcasting gather and scatters (`gather_broadcast`, `scatter_broadcast`,
//! `scatter_add_broadcast`, `scatter_reduce_broadcast`), dynamically typed.
//!
//! Arguments: tensors `input`, `index` and (the scatters) `src`; `dim`; `scatter_reduce_broadcast`
//! also `reduce` (`sum`, `prod`, `mean`, `amax`, `amin`) and `include_self` (default true). The
//! scatters have in-place forms (see [`call_inplace`](super::call_inplace)); a failed call leaves
//! the target unchanged.

use super::{Args, Inputs, Tensor, TensorViewMut, index_dtype_error, input, same_dtype};
use super::{with_index_tensor, with_view_mut};
use crate::error::{Error, Result};
use crate::ops::scatter::Reduce;

use crate::error::prefixed;

pub(crate) fn gather_broadcast(args: &Args, inputs: &dyn Inputs) -> Result<Tensor> {
    const OP: &str = "gather_broadcast";
    let x = input(inputs, "input")?;
    let index = input(inputs, "index")?;
    let dim = args.dim()?;
    with_index_tensor!(index, i => super::Read::GatherBroadcast(dim, i).on(&x),
        _ => Err(index_dtype_error(OP, "index", &index)))
}

/// `scatter_broadcast`, `scatter_add_broadcast`, `scatter_reduce_broadcast` into `target`.
pub(crate) fn scatter_family(
    op: &str,
    args: &Args,
    target: &mut TensorViewMut<'_>,
    inputs: &dyn Inputs,
) -> Result<()> {
    let index = input(inputs, "index")?;
    let src = input(inputs, "src")?;
    let dim = args.dim()?;
    let reduce = match op {
        "scatter_reduce_broadcast" => Some((
            args.str("reduce")?
                .parse::<Reduce>()
                .map_err(|e| prefixed(op, e))?,
            args.bool_or("include_self", true)?,
        )),
        _ => None,
    };
    with_view_mut!(*target, dst => {
        with_index_tensor!(index, i => {
            let s = same_dtype(op, "src", &src)?;
            match (op, reduce) {
                ("scatter_broadcast", _) => crate::ops::broadcast::scatter_broadcast_inplace(dst, dim, i, &s),
                ("scatter_add_broadcast", _) => crate::ops::broadcast::scatter_add_broadcast_inplace(dst, dim, i, &s),
                ("scatter_reduce_broadcast", Some((r, include_self))) => {
                    crate::ops::broadcast::scatter_reduce_broadcast_inplace(dst, dim, i, &s, r, include_self)
                }
                _ => Err(Error::invalid(format!("{op} is not a broadcasting scatter"))),
            }
        }, _ => Err(index_dtype_error(op, "index", &index)))
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{args, one, t, tensors};
    use super::super::{Arg, call, call_inplace};
    use super::*;
    use crate::ErrorKind;
    use crate::dynamic::Tensors;
    use ndarray::{Array2, Array3, array};

    #[test]
    fn gather_broadcast_matches_the_typed_function_for_two_dtypes_and_index_dtypes() {
        let xf = Array3::from_shape_fn((2, 4, 3), |(b, n, d)| (100 * b + 10 * n + d) as f32);
        let xi = xf.mapv(|v| v as i64);
        let idx = array![[[3i64], [1]], [[0], [2]]];
        let idx32 = idx.mapv(|v| v as i32);
        let idx16 = idx.mapv(|v| v as i16);
        let a = args(&[("dim", Arg::Int(1))]);
        let ins = |x: Tensor, i: Tensor| tensors(vec![("input", x), ("index", i)]);
        let gb = |x: Tensor, i: Tensor| one("gather_broadcast", &a, &ins(x, i));
        let gb_err = |x: Tensor, i: Tensor| call("gather_broadcast", &a, &ins(x, i)).unwrap_err();
        let want = crate::ops::broadcast::gather_broadcast(&xf, 1, &idx).unwrap();
        assert_eq!(want.shape(), &[2, 2, 3]);
        assert_eq!(gb(t(xf.clone()), t(idx.clone())), t(want.clone()));
        assert_eq!(gb(t(xf.clone()), t(idx16)), t(want));
        assert_eq!(
            gb(t(xi.clone()), t(idx32.clone())),
            t(crate::ops::broadcast::gather_broadcast(&xi, 1, &idx32).unwrap())
        );
        // Errors: the broadcast rule with the sizes, bad index dtype, bound, missing dim.
        let e = gb_err(t(xf.clone()), t(Array3::<i64>::zeros((3, 2, 1))));
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(
            e.message()
                .contains("index has size 3 on axis 0 but input has 2"),
            "{e}"
        );
        let e = gb_err(t(xf.clone()), t(idx.mapv(|v| v as f64)));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("gather_broadcast") && e.message().contains("float64"),
            "{e}"
        );
        let e = gb_err(t(xf.clone()), t(array![[[4i64]]]));
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert!(e.message().contains('4'), "{e}");
        let e = call(
            "gather_broadcast",
            &Args::default(),
            &tensors(vec![("input", t(xf)), ("index", t(idx))]),
        )
        .unwrap_err();
        assert!(e.message().contains("`dim`"), "{e}");
    }

    #[test]
    fn broadcast_scatters_match_the_typed_functions_out_of_and_in_place() {
        let xf = Array2::<f32>::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f32);
        let xi = xf.mapv(|v| v as i32);
        let idx = array![[2i64], [0], [2], [0]];
        let idx32 = idx.mapv(|v| v as i32);
        let srcf = array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0], [0.5, 0.5]];
        let srci = srcf.mapv(|v| v as i32);
        let dim0 = args(&[("dim", Arg::Int(0))]);
        let ins =
            |x: Tensor, i: Tensor, s: Tensor| tensors(vec![("input", x), ("index", i), ("src", s)]);
        assert_eq!(
            one(
                "scatter_broadcast",
                &dim0,
                &ins(t(xf.clone()), t(idx.clone()), t(srcf.clone()))
            ),
            t(crate::Options::new()
                .broadcast(true)
                .scatter(&xf, 0, &idx, &srcf)
                .unwrap())
        );
        assert_eq!(
            one(
                "scatter_add_broadcast",
                &dim0,
                &ins(t(xi.clone()), t(idx32.clone()), t(srci.clone()))
            ),
            t(crate::Options::new()
                .broadcast(true)
                .scatter_add(&xi, 0, &idx32, &srci)
                .unwrap())
        );
        for (name, r) in [
            ("sum", Reduce::Sum),
            ("prod", Reduce::Prod),
            ("mean", Reduce::Mean),
            ("amax", Reduce::Amax),
            ("amin", Reduce::Amin),
        ] {
            for include_self in [true, false] {
                let a = args(&[
                    ("dim", Arg::Int(0)),
                    ("reduce", Arg::Str(name.into())),
                    ("include_self", Arg::Bool(include_self)),
                ]);
                let sr = |x: Tensor, i: Tensor, s: Tensor| {
                    one("scatter_reduce_broadcast", &a, &ins(x, i, s))
                };
                assert_eq!(
                    sr(t(xf.clone()), t(idx32.clone()), t(srcf.clone())),
                    t(crate::Options::new()
                        .broadcast(true)
                        .scatter_reduce(&xf, 0, &idx32, &srcf, r, include_self)
                        .unwrap())
                );
                assert_eq!(
                    sr(t(xi.clone()), t(idx.clone()), t(srci.clone())),
                    t(crate::Options::new()
                        .broadcast(true)
                        .scatter_reduce(&xi, 0, &idx, &srci, r, include_self)
                        .unwrap())
                );
            }
        }
        // include_self defaults to true.
        let a = args(&[("dim", Arg::Int(0)), ("reduce", Arg::Str("amax".into()))]);
        assert_eq!(
            one(
                "scatter_reduce_broadcast",
                &a,
                &ins(t(xf.clone()), t(idx.clone()), t(srcf.clone()))
            ),
            t(crate::Options::new()
                .broadcast(true)
                .scatter_reduce(&xf, 0, &idx, &srcf, Reduce::Amax, true)
                .unwrap())
        );
        // In place: the target plays `input`.
        let mut target = t(xi.clone());
        call_inplace(
            "scatter_add_broadcast",
            &dim0,
            target.view_mut(),
            &tensors(vec![("index", t(idx.clone())), ("src", t(srci.clone()))]),
        )
        .unwrap();
        let mut want = xi.clone();
        crate::ops::broadcast::scatter_add_broadcast_inplace(&mut want, 0, &idx, &srci).unwrap();
        assert_eq!(target, t(want));
        let mut target = t(xf.clone());
        call_inplace(
            "scatter_broadcast",
            &args(&[("dim", Arg::Int(1))]),
            target.view_mut(),
            &tensors(vec![
                ("index", t(array![[1i64], [0], [1]])),
                ("src", t(array![[9.0f32]])),
            ]),
        )
        .unwrap();
        assert_eq!(
            target,
            t(crate::Options::new()
                .broadcast(true)
                .scatter(&xf, 1, &array![[1i64], [0], [1]], &array![[9.0f32]])
                .unwrap())
        );
    }

    #[test]
    fn broadcast_scatter_errors_are_typed_and_leave_the_target_unchanged() {
        let x = array![[1.0f64, 2.0], [3.0, 4.0]];
        let src = array![[7.0f64, 8.0]];
        let run = |op: &str, a: &Args, ins: Tensors| {
            let mut target = t(x.clone());
            let e = call_inplace(op, a, target.view_mut(), &ins).unwrap_err();
            assert_eq!(
                target,
                t(x.clone()),
                "{op} changed its target on error: {e}"
            );
            e
        };
        let dim0 = args(&[("dim", Arg::Int(0))]);
        // An index value out of range, after a valid one.
        let e = run(
            "scatter_add_broadcast",
            &dim0,
            tensors(vec![
                ("index", t(array![[0i64], [2]])),
                ("src", t(src.clone())),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        assert_eq!(e.index_value(), Some(2));
        // src of another dtype.
        let e = run(
            "scatter_broadcast",
            &dim0,
            tensors(vec![
                ("index", t(array![[0i64]])),
                ("src", t(array![[7.0f32, 8.0]])),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("scatter_broadcast")
                && e.message().contains("float64 and float32"),
            "{e}"
        );
        assert!(e.hint().is_some());
        // Sizes that do not broadcast.
        let e = run(
            "scatter_broadcast",
            &dim0,
            tensors(vec![
                ("index", t(array![[0i64]])),
                ("src", t(array![[7.0f64, 8.0, 9.0]])),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
        assert!(e.message().contains('3'), "{e}");
        // Unknown reduce; missing reduce; float index; missing src.
        let ok_ins = || tensors(vec![("index", t(array![[0i64]])), ("src", t(src.clone()))]);
        let e = run(
            "scatter_reduce_broadcast",
            &args(&[("dim", Arg::Int(0)), ("reduce", Arg::Str("median".into()))]),
            ok_ins(),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.message().starts_with("scatter_reduce_broadcast: ") && e.message().contains("median"),
            "{e}"
        );
        let e = run("scatter_reduce_broadcast", &dim0, ok_ins());
        assert!(e.message().contains("`reduce`"), "{e}");
        let e = run(
            "scatter_add_broadcast",
            &dim0,
            tensors(vec![
                ("index", t(array![[0.0f32]])),
                ("src", t(src.clone())),
            ]),
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("float32"), "{e}");
        let e = run(
            "scatter_add_broadcast",
            &dim0,
            tensors(vec![("index", t(array![[0i64]]))]),
        );
        assert!(e.message().contains("missing input tensor `src`"), "{e}");
        let e = run(
            "scatter_add_broadcast",
            &args(&[("dim", Arg::Int(2))]),
            ok_ins(),
        );
        assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
        // mean on bool is an error, as in scatter_reduce.
        let mut target = t(array![true, false]);
        let e = call_inplace(
            "scatter_reduce_broadcast",
            &args(&[("dim", Arg::Int(0)), ("reduce", Arg::Str("mean".into()))]),
            target.view_mut(),
            &tensors(vec![("index", t(array![1i64])), ("src", t(array![true]))]),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(target, t(array![true, false]));
    }
}
