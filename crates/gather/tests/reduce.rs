//! The group reductions (`ops::reduce`), segment ops (`ops::segment`) and their gradients,
//! against plain reference implementations written here: a row-major walk over the index that
//! collects each group's values in index order, then reduces each list directly. Random shapes,
//! dims, 1-D (broadcast) and N-D indices, duplicates, empty groups, NaN/inf, f16/bf16; plus the
//! worked examples of pytorch_scatter's docs and PyTorch's scatter_reduce table.

mod common;

use common::positions;
use gather::grad;
use gather::ops::reduce::{
    ArgReduce, EmptyFill, GroupOptions, GroupReduce, ReduceElement, scatter_all, scatter_any,
    scatter_groups, scatter_log_softmax, scatter_reduce_arg, scatter_reduce_arg_inplace,
    scatter_softmax,
};
use gather::ops::segment::{
    Segments, bincount, bincount_axis, bincount_weighted, bincount_weighted_axis, segment_all,
    segment_any, segment_arg_reduce, segment_log_softmax, segment_reduce, segment_softmax,
};
use gather::{Element, ErrorKind, Reduce};
use half::{bf16, f16};
use ndarray::{Array1, ArrayD, Axis, IxDyn, array};
use proptest::prelude::*;

// ------------------------------------------------------------------------------------------------
// Random problems and the reference.

/// A random scatter-style problem: src shape, dim, index (N-D, or 1-D when `one_d`), group count.
#[derive(Debug, Clone)]
struct Case {
    src_shape: Vec<usize>,
    dim: usize,
    idx_shape: Vec<usize>,
    one_d: bool,
    dim_size: usize,
    idx_vals: Vec<u32>,
    codes: Vec<u8>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3)
        .prop_flat_map(|nd| {
            (
                proptest::collection::vec(0usize..=4, nd),
                0..nd,
                proptest::collection::vec(0usize..=4, nd),
                any::<bool>(),
                1usize..=5,
                proptest::collection::vec(any::<u32>(), 64),
                proptest::collection::vec(any::<u8>(), 128),
            )
        })
        .prop_map(|(src_shape, dim, raw, one_d, dim_size, idx_vals, codes)| {
            let one_d = one_d && src_shape.len() > 1;
            let idx_shape: Vec<usize> = if one_d {
                vec![raw[dim].min(src_shape[dim])]
            } else {
                raw.iter()
                    .zip(&src_shape)
                    .map(|(&r, &s)| r.min(s))
                    .collect()
            };
            Case {
                src_shape,
                dim,
                idx_shape,
                one_d,
                dim_size,
                idx_vals,
                codes,
            }
        })
}

impl Case {
    fn index(&self) -> ArrayD<i64> {
        let mut k = 0;
        ArrayD::from_shape_fn(IxDyn(&self.idx_shape), |_| {
            k += 1;
            (self.idx_vals[(k - 1) % self.idx_vals.len()] % self.dim_size as u32) as i64
        })
    }

    /// Values from the codes: small integers (ties), and with `specials` NaN, inf, -inf.
    fn src<T: Element>(&self, specials: bool) -> ArrayD<T> {
        let mut k = 0;
        ArrayD::from_shape_fn(IxDyn(&self.src_shape), |_| {
            k += 1;
            let c = self.codes[(k - 1) % self.codes.len()] % 16;
            let v = match c {
                13 if specials => f64::NAN,
                14 if specials => f64::INFINITY,
                15 if specials => f64::NEG_INFINITY,
                _ => (c % 13) as f64 - 6.0,
            };
            from_f64::<T>(v)
        })
    }

    /// The index seen with src's rank (the 1-D index spread along `dim`).
    fn logical_shape(&self) -> Vec<usize> {
        if self.one_d {
            let mut s = self.src_shape.clone();
            s[self.dim] = self.idx_shape[0];
            s
        } else {
            self.idx_shape.clone()
        }
    }

    fn logical_index(&self, index: &ArrayD<i64>, p: &[usize]) -> usize {
        if self.one_d {
            index[[p[self.dim]].as_slice()] as usize
        } else {
            index[p] as usize
        }
    }

    /// Each output position's values (and their positions along dim), in index order.
    fn groups<T: Copy>(&self, src: &ArrayD<T>, index: &ArrayD<i64>) -> Vec<Vec<(T, usize)>> {
        let mut out_shape = self.src_shape.clone();
        out_shape[self.dim] = self.dim_size;
        let n: usize = out_shape.iter().product();
        let mut groups = vec![Vec::new(); n];
        for p in positions(&self.logical_shape()) {
            let g = self.logical_index(index, &p);
            let mut o = p.clone();
            o[self.dim] = g;
            let flat = flat(&out_shape, &o);
            groups[flat].push((src[p.as_slice()], p[self.dim]));
        }
        groups
    }

    fn out_shape(&self) -> Vec<usize> {
        let mut s = self.src_shape.clone();
        s[self.dim] = self.dim_size;
        s
    }
}

fn flat(shape: &[usize], p: &[usize]) -> usize {
    p.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

fn from_f64<T: Element>(v: f64) -> T {
    if T::DTYPE.is_float() {
        T::from_scalar(gather::Scalar::Float(v)).unwrap()
    } else if T::DTYPE == gather::DType::Bool {
        T::from_scalar(gather::Scalar::Bool(v > 0.0)).unwrap()
    } else if T::DTYPE.name().starts_with('u') {
        T::from_scalar(gather::Scalar::Int(v.abs() as i64)).unwrap()
    } else {
        T::from_scalar(gather::Scalar::Int(v as i64)).unwrap()
    }
}

/// The exact reductions of one group, folded left to right with PyTorch's element arithmetic.
fn ref_exact<T: Element>(vals: &[T], r: GroupReduce) -> T {
    let acc = |init: T::Acc, f: fn(T::Acc, T::Acc) -> T::Acc| {
        vals.iter().fold(init, |a, v| f(a, v.to_acc()))
    };
    match r {
        GroupReduce::Sum => T::from_acc(acc(T::acc_zero(), T::acc_add)),
        GroupReduce::Prod => T::from_acc(acc(T::acc_one(), T::acc_mul)),
        GroupReduce::Mean => {
            T::from_acc(T::acc_div_count(acc(T::acc_zero(), T::acc_add), vals.len()))
        }
        GroupReduce::Amax => T::from_acc(acc(T::max_identity().to_acc(), T::acc_max)),
        GroupReduce::Amin => T::from_acc(acc(T::min_identity().to_acc(), T::acc_min)),
        GroupReduce::First => vals[0],
        GroupReduce::Last => vals[vals.len() - 1],
        _ => unreachable!("float-only reductions have their own reference"),
    }
}

/// The float-only reductions of one group, in f64, two-pass.
fn ref_float(vals: &[f64], r: GroupReduce) -> f64 {
    let n = vals.len() as f64;
    match r {
        GroupReduce::LogSumExp => {
            if vals.iter().any(|v| v.is_nan()) {
                return f64::NAN;
            }
            let m = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if m.is_infinite() {
                return m;
            }
            m + vals.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        }
        GroupReduce::Var { correction } | GroupReduce::Std { correction } => {
            let mean = vals.iter().sum::<f64>() / n;
            let ss: f64 = vals.iter().map(|v| (v - mean) * (v - mean)).sum();
            let var = ss / (n - correction as f64).max(0.0);
            if matches!(r, GroupReduce::Std { .. }) {
                var.sqrt()
            } else {
                var
            }
        }
        _ => unreachable!(),
    }
}

fn same<T: Element>(a: T, b: T) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
}

fn opts<T>(c: &Case, fill: EmptyFill<T>) -> GroupOptions<T> {
    GroupOptions {
        dim_size: Some(c.dim_size),
        fill,
    }
}

fn run_groups<T: ReduceElement>(
    c: &Case,
    src: &ArrayD<T>,
    index: &ArrayD<i64>,
    r: GroupReduce,
    fill: EmptyFill<T>,
) -> ArrayD<T> {
    if c.one_d {
        let idx1 = index.clone().into_dimensionality::<ndarray::Ix1>().unwrap();
        scatter_groups(src, c.dim as isize, &idx1, r, opts(c, fill)).unwrap()
    } else {
        scatter_groups(src, c.dim as isize, index, r, opts(c, fill)).unwrap()
    }
}

/// Checks every exact reduction of `T` on the case against the reference (bitwise), and against
/// `scatter_reduce(include_self=false)` on a self filled with the fill value.
fn check_exact<T: ReduceElement>(c: &Case, specials: bool) -> Result<(), TestCaseError> {
    let src = c.src::<T>(specials);
    let index = c.index();
    let groups = c.groups(&src, &index);
    let fill = from_f64::<T>(3.0);
    let mut reduces = vec![
        GroupReduce::Sum,
        GroupReduce::Prod,
        GroupReduce::Amax,
        GroupReduce::Amin,
        GroupReduce::First,
        GroupReduce::Last,
    ];
    if T::DTYPE != gather::DType::Bool {
        reduces.push(GroupReduce::Mean);
    }
    for r in reduces {
        let out = run_groups(c, &src, &index, r, EmptyFill::Value(fill));
        prop_assert_eq!(out.shape().to_vec(), c.out_shape());
        for (k, (o, g)) in out.iter().zip(&groups).enumerate() {
            let vals: Vec<T> = g.iter().map(|v| v.0).collect();
            let want = if vals.is_empty() {
                fill
            } else {
                ref_exact(&vals, r)
            };
            prop_assert!(
                same(*o, want),
                "{:?} {:?} at flat {}: got {:?}, want {:?} (group {:?})",
                T::DTYPE,
                r,
                k,
                o,
                want,
                vals
            );
        }
        let torch = match r {
            GroupReduce::Sum => Some(Reduce::Sum),
            GroupReduce::Prod => Some(Reduce::Prod),
            GroupReduce::Mean => Some(Reduce::Mean),
            GroupReduce::Amax => Some(Reduce::Amax),
            GroupReduce::Amin => Some(Reduce::Amin),
            _ => None,
        };
        if let (Some(tr), false) = (torch, c.one_d) {
            let base = ArrayD::from_elem(IxDyn(&c.out_shape()), fill);
            let want = gather::scatter_reduce(&base, c.dim as isize, &index, &src, tr, false);
            if let Ok(want) = want {
                for (o, w) in out.iter().zip(want.iter()) {
                    prop_assert!(
                        same(*o, *w),
                        "{:?} vs scatter_reduce: {:?} vs {:?}",
                        r,
                        o,
                        w
                    );
                }
            }
        }
    }
    Ok(())
}

/// Checks the float-only reductions and softmax of `T` against the f64 reference.
fn check_float<T: ReduceElement + gather::grad::GradFloat>(
    c: &Case,
    tol: f64,
) -> Result<(), TestCaseError> {
    let index = c.index();
    for specials in [false, true] {
        let src = c.src::<T>(specials);
        let groups = c.groups(&src, &index);
        let mut reduces = vec![GroupReduce::LogSumExp];
        if !specials {
            reduces.extend([
                GroupReduce::Var { correction: 1 },
                GroupReduce::Var { correction: 0 },
                GroupReduce::Std { correction: 1 },
                GroupReduce::Std { correction: 2 },
            ]);
        }
        for r in reduces {
            let out = run_groups(c, &src, &index, r, EmptyFill::Nan);
            for (o, g) in out.iter().zip(&groups) {
                let vals: Vec<f64> = g.iter().map(|v| v.0.to_f64()).collect();
                let want = if vals.is_empty() {
                    f64::NAN
                } else {
                    ref_float(&vals, r)
                };
                let got = o.to_f64();
                let want_t = from_f64::<T>(want).to_f64();
                prop_assert!(
                    close(got, want_t, tol) || close(got, want, tol),
                    "{:?} {:?}: got {}, want {} (group {:?})",
                    T::DTYPE,
                    r,
                    got,
                    want,
                    vals
                );
            }
        }
    }
    // softmax / log_softmax need an index covering src.
    if c.logical_shape() == c.src_shape {
        let src = c.src::<T>(false);
        let (sm, lsm) = if c.one_d {
            let idx1 = index.clone().into_dimensionality::<ndarray::Ix1>().unwrap();
            (
                scatter_softmax(&src, c.dim as isize, &idx1).unwrap(),
                scatter_log_softmax(&src, c.dim as isize, &idx1).unwrap(),
            )
        } else {
            (
                scatter_softmax(&src, c.dim as isize, &index).unwrap(),
                scatter_log_softmax(&src, c.dim as isize, &index).unwrap(),
            )
        };
        for p in positions(&c.src_shape) {
            let g = c.logical_index(&index, &p);
            let mut o = p.clone();
            o[c.dim] = g;
            let members: Vec<f64> = positions(&c.src_shape)
                .into_iter()
                .filter(|q| {
                    c.logical_index(&index, q) == g
                        && (0..q.len()).all(|a| a == c.dim || q[a] == p[a])
                })
                .map(|q| src[q.as_slice()].to_f64())
                .collect();
            let lse = ref_float(&members, GroupReduce::LogSumExp);
            let x = src[p.as_slice()].to_f64();
            let (want_sm, want_lsm) = ((x - lse).exp(), x - lse);
            prop_assert!(
                close(sm[p.as_slice()].to_f64(), want_sm, tol),
                "softmax at {:?}",
                p
            );
            prop_assert!(
                close(lsm[p.as_slice()].to_f64(), want_lsm, tol),
                "log_softmax at {:?}: {} vs {}",
                p,
                lsm[p.as_slice()].to_f64(),
                want_lsm
            );
        }
    }
    Ok(())
}

fn check_any_all<T: ReduceElement>(c: &Case) -> Result<(), TestCaseError> {
    let src = c.src::<T>(T::DTYPE.is_float());
    let index = c.index();
    let groups = c.groups(&src, &index);
    let o = GroupOptions {
        dim_size: Some(c.dim_size),
        fill: EmptyFill::Identity,
    };
    let (any, all) = if c.one_d {
        let idx1 = index.clone().into_dimensionality::<ndarray::Ix1>().unwrap();
        (
            scatter_any(&src, c.dim as isize, &idx1, o).unwrap(),
            scatter_all(&src, c.dim as isize, &idx1, o).unwrap(),
        )
    } else {
        (
            scatter_any(&src, c.dim as isize, &index, o).unwrap(),
            scatter_all(&src, c.dim as isize, &index, o).unwrap(),
        )
    };
    for ((a, l), g) in any.iter().zip(all.iter()).zip(&groups) {
        prop_assert_eq!(*a, g.iter().any(|v| v.0 != T::default()));
        prop_assert_eq!(*l, g.iter().all(|v| v.0 != T::default()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn scatter_groups_match_the_reference_for_every_exact_reduction(c in case()) {
        check_exact::<f32>(&c, true)?;
        check_exact::<f64>(&c, true)?;
        check_exact::<i32>(&c, false)?;
        check_exact::<u8>(&c, false)?;
        check_exact::<i64>(&c, false)?;
        check_exact::<f16>(&c, true)?;
        check_exact::<bf16>(&c, true)?;
        check_exact::<bool>(&c, false)?;
        check_exact::<i8>(&c, false)?;
        check_exact::<i16>(&c, false)?;
        check_exact::<u16>(&c, false)?;
        check_exact::<u32>(&c, false)?;
        check_exact::<u64>(&c, false)?;
    }

    #[test]
    fn logsumexp_var_std_softmax_match_the_f64_reference(c in case()) {
        check_float::<f64>(&c, 1e-12)?;
        check_float::<f32>(&c, 2e-6)?;
        check_float::<f16>(&c, 2e-3)?;
        check_float::<bf16>(&c, 1e-2)?;
    }

    #[test]
    fn any_all_match_the_reference(c in case()) {
        check_any_all::<f32>(&c)?;
        check_any_all::<i16>(&c)?;
        check_any_all::<bool>(&c)?;
    }

    #[test]
    fn scatter_reduce_arg_values_are_scatter_reduce_and_args_name_the_first_winner(
        c in case(), include_self in any::<bool>(), amax in any::<bool>(),
    ) {
        prop_assume!(!c.one_d);
        check_arg::<f32>(&c, include_self, amax, true)?;
        check_arg::<i32>(&c, include_self, amax, false)?;
        check_arg::<f16>(&c, include_self, amax, true)?;
    }

    #[test]
    fn scatter_reduce_arg_with_an_index_shared_by_every_lane_equals_the_materialised_index(
        c in case(), include_self in any::<bool>(), amax in any::<bool>(),
    ) {
        prop_assume!(c.one_d);
        check_arg_shared::<f32>(&c, include_self, amax)?;
        check_arg_shared::<i64>(&c, include_self, amax)?;
    }

    #[test]
    fn segment_offsets_ids_and_lengths_agree_with_the_reference(
        lens in proptest::collection::vec(0usize..=3, 0..=4),
        before in 0usize..=2,
        after in 0usize..=2,
        lanes in proptest::collection::vec(1usize..=3, 0..=2),
        axis_pos in 0usize..=2,
        codes in proptest::collection::vec(any::<u8>(), 64),
    ) {
        check_segments(&lens, before, after, &lanes, axis_pos, &codes)?;
    }
}

#[test]
fn scatter_reduce_arg_with_a_shared_index_names_the_first_of_tied_winners() {
    // Rows 0, 2, 4 and 5 tie in group 0 on lane 0; row 3 beats row 1 in group 1 on lane 1.
    let src = array![
        [5.0f32, 1.0],
        [2.0, 1.0],
        [5.0, 0.0],
        [1.0, 4.0],
        [5.0, 3.0],
        [5.0, 3.0]
    ];
    let ids = array![0i64, 1, 0, 1, 0, 0];
    let spread = ids.view().insert_axis(Axis(1));
    let spread = spread.broadcast((6, 2)).unwrap();
    let base = array![[0.0f32, 0.0], [0.0, 0.0], [9.0, 9.0]];
    let (out, arg) = scatter_reduce_arg(&base, 0, &spread, &src, ArgReduce::Amax, false).unwrap();
    assert_eq!(out, array![[5.0, 3.0], [2.0, 4.0], [9.0, 9.0]]);
    assert_eq!(arg, array![[0, 4], [1, 3], [-1, -1]]);
    let (_, arg) =
        scatter_reduce_arg(&base, 0, &spread.to_owned(), &src, ArgReduce::Amax, false).unwrap();
    assert_eq!(arg, array![[0, 4], [1, 3], [-1, -1]]);
}

/// The 1-D index spread along `dim` (stride 0 elsewhere, the grouped loop) against the same
/// values materialised (the lane loop): the same values and args, bit for bit.
fn check_arg_shared<T: ReduceElement>(
    c: &Case,
    include_self: bool,
    amax: bool,
) -> Result<(), TestCaseError> {
    let src = c.src::<T>(true);
    let ids = c.index();
    let shape = c.logical_shape();
    let mut spread_shape = vec![1usize; shape.len()];
    spread_shape[c.dim] = ids.len();
    let spread = ids
        .view()
        .into_shape_with_order(IxDyn(&spread_shape))
        .unwrap();
    let spread = spread.broadcast(IxDyn(&shape)).unwrap();
    let copy = spread.to_owned();
    let base = {
        let mut shifted = c.clone();
        shifted.codes.rotate_left(5);
        shifted.src_shape = c.out_shape();
        shifted.src::<T>(true)
    };
    let ar = if amax {
        ArgReduce::Amax
    } else {
        ArgReduce::Amin
    };
    let d = c.dim as isize;
    let (o1, a1) = scatter_reduce_arg(&base, d, &spread, &src, ar, include_self).unwrap();
    let (o2, a2) = scatter_reduce_arg(&base, d, &copy, &src, ar, include_self).unwrap();
    prop_assert_eq!(a1, a2);
    for (x, y) in o1.iter().zip(o2.iter()) {
        prop_assert_eq!(x.to_f64().to_bits(), y.to_f64().to_bits());
    }
    Ok(())
}

fn check_arg<T: ReduceElement>(
    c: &Case,
    include_self: bool,
    amax: bool,
    specials: bool,
) -> Result<(), TestCaseError> {
    let src = c.src::<T>(specials);
    let index = c.index();
    let base = {
        let mut shifted = c.clone();
        shifted.codes.rotate_left(7);
        shifted.src_shape = c.out_shape();
        shifted.src::<T>(specials)
    };
    let (ar, tr) = if amax {
        (ArgReduce::Amax, Reduce::Amax)
    } else {
        (ArgReduce::Amin, Reduce::Amin)
    };
    let d = c.dim as isize;
    let (out, arg) = scatter_reduce_arg(&base, d, &index, &src, ar, include_self).unwrap();
    let want = gather::scatter_reduce(&base, d, &index, &src, tr, include_self).unwrap();
    for (o, w) in out.iter().zip(want.iter()) {
        prop_assert!(
            o.to_f64().to_bits() == w.to_f64().to_bits(),
            "values differ: {:?} vs {:?}",
            o,
            w
        );
    }
    let groups = c.groups(&src, &index);
    for (k, ((o, a), g)) in out.iter().zip(arg.iter()).zip(&groups).enumerate() {
        let selfv = base.iter().nth(k).copied().unwrap();
        let want_arg = if g.is_empty() {
            -1
        } else if o.is_nan() {
            match g.iter().find(|v| v.0.is_nan()) {
                Some(v) => v.1 as i64,
                None => -1,
            }
        } else if include_self && selfv == *o {
            -1
        } else {
            g.iter().find(|v| v.0 == *o).map_or(-2, |v| v.1 as i64)
        };
        prop_assert_eq!(
            *a,
            want_arg,
            "flat {}: value {:?}, group {:?}, self {:?}",
            k,
            o,
            g,
            selfv
        );
    }
    Ok(())
}

fn check_segments(
    lens: &[usize],
    before: usize,
    after: usize,
    lanes: &[usize],
    axis_pos: usize,
    codes: &[u8],
) -> Result<(), TestCaseError> {
    let n: usize = lens.iter().sum();
    let len_total = before + n + after;
    let axis = axis_pos.min(lanes.len());
    let mut shape = lanes.to_vec();
    shape.insert(axis, len_total);
    let mut k = 0;
    let src = ArrayD::from_shape_fn(IxDyn(&shape), |_| {
        k += 1;
        (codes[(k - 1) % codes.len()] % 13) as f64 - 6.0
    });
    let mut offsets = vec![before as i64];
    for &l in lens {
        offsets.push(offsets.last().unwrap() + l as i64);
    }
    let offsets = Array1::from(offsets);
    let ids: Array1<i64> = lens
        .iter()
        .enumerate()
        .flat_map(|(s, &l)| std::iter::repeat_n(s as i64, l))
        .collect();
    let lengths: Array1<u32> = lens.iter().map(|&l| l as u32).collect();
    let core = src
        .slice_axis(Axis(axis), ndarray::Slice::from(before..before + n))
        .to_owned();
    let s = lens.len();
    for r in [
        GroupReduce::Sum,
        GroupReduce::Mean,
        GroupReduce::Amax,
        GroupReduce::Amin,
        GroupReduce::Prod,
        GroupReduce::First,
        GroupReduce::Last,
        GroupReduce::LogSumExp,
        GroupReduce::Std { correction: 0 },
    ] {
        let a = segment_reduce(
            &src,
            axis as isize,
            Segments::offsets(&offsets),
            r,
            EmptyFill::Nan,
        )
        .unwrap();
        let want = scatter_groups(
            &core,
            axis as isize,
            &ids,
            r,
            GroupOptions {
                dim_size: Some(s),
                fill: EmptyFill::Nan,
            },
        )
        .unwrap();
        let same_arr = |x: &ArrayD<f64>| x.iter().zip(want.iter()).all(|(p, q)| same(*p, *q));
        prop_assert!(same_arr(&a), "{:?} offsets: {:?} vs {:?}", r, a, want);
        // Reference: reduce each lane's segment directly.
        for p in positions(want.shape()) {
            let seg = p[axis];
            let vals: Vec<f64> = (offsets[seg] as usize..offsets[seg + 1] as usize)
                .map(|j| {
                    let mut q = p.clone();
                    q[axis] = j;
                    src[q.as_slice()]
                })
                .collect();
            let w = if vals.is_empty() {
                f64::NAN
            } else if r.needs_float() {
                ref_float(&vals, r)
            } else {
                ref_exact(&vals, r)
            };
            prop_assert!(
                close(want[p.as_slice()], w, 1e-12),
                "{:?} ref at {:?}",
                r,
                p
            );
        }
        if before == 0 && after == 0 {
            let b = segment_reduce(
                &src,
                axis as isize,
                Segments::ids_with(&ids, s),
                r,
                EmptyFill::Nan,
            )
            .unwrap();
            let c = segment_reduce(
                &src,
                axis as isize,
                Segments::lengths(&lengths),
                r,
                EmptyFill::Nan,
            )
            .unwrap();
            prop_assert!(same_arr(&b), "{:?} ids", r);
            prop_assert!(same_arr(&c), "{:?} lengths", r);
        }
    }
    for (ar, gr) in [
        (ArgReduce::Amax, GroupReduce::Amax),
        (ArgReduce::Amin, GroupReduce::Amin),
    ] {
        let srcn = src.mapv(|v| if v == 5.0 { f64::NAN } else { v });
        let (vals, arg) = segment_arg_reduce(
            &srcn,
            axis as isize,
            Segments::offsets(&offsets),
            ar,
            EmptyFill::Zero,
        )
        .unwrap();
        let want = segment_reduce(
            &srcn,
            axis as isize,
            Segments::offsets(&offsets),
            gr,
            EmptyFill::Zero,
        )
        .unwrap();
        prop_assert!(
            vals.iter()
                .zip(want.iter())
                .all(|(p, q)| p.to_bits() == q.to_bits())
        );
        for p in positions(want.shape()) {
            let seg = p[axis];
            let js = offsets[seg] as usize..offsets[seg + 1] as usize;
            let at = |j: usize| {
                let mut q = p.clone();
                q[axis] = j;
                srcn[q.as_slice()]
            };
            let v = want[p.as_slice()];
            let w = if js.is_empty() {
                -1
            } else if v.is_nan() {
                js.clone().find(|&j| at(j).is_nan()).unwrap() as i64
            } else {
                js.clone().find(|&j| at(j) == v).unwrap() as i64
            };
            prop_assert_eq!(arg[p.as_slice()], w, "{:?} at {:?}", ar, p);
        }
    }
    if before == 0 && after == 0 {
        let sm = segment_softmax(&src, axis as isize, Segments::lengths(&lengths)).unwrap();
        let want = scatter_softmax(&src, axis as isize, &ids).unwrap();
        prop_assert_eq!(sm, want);
        let lsm = segment_log_softmax(&src, axis as isize, Segments::offsets(&offsets)).unwrap();
        let want = scatter_log_softmax(&src, axis as isize, &ids).unwrap();
        prop_assert_eq!(lsm, want);
        let any = segment_any(
            &src,
            axis as isize,
            Segments::ids(&ids),
            EmptyFill::Identity,
        )
        .unwrap();
        let all = segment_all(
            &src,
            axis as isize,
            Segments::ids(&ids),
            EmptyFill::Identity,
        )
        .unwrap();
        let o = GroupOptions {
            dim_size: ids.last().map(|&m| m as usize + 1),
            fill: EmptyFill::Identity,
        };
        prop_assert_eq!(any, scatter_any(&src, axis as isize, &ids, o).unwrap());
        prop_assert_eq!(all, scatter_all(&src, axis as isize, &ids, o).unwrap());
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Worked examples.

#[test]
fn pytorch_scatter_readme_scatter_max_with_argmax() {
    // pytorch_scatter README: out, argmax = scatter_max(src, index, dim=-1).
    let src = array![[2.0f32, 0.0, 1.0, 4.0, 3.0], [0.0, 2.0, 1.0, 3.0, 4.0]];
    let index = array![[4, 5, 4, 2, 3], [0, 0, 2, 2, 1]];
    let base = ndarray::Array2::<f32>::zeros((2, 6));
    let (out, arg) = scatter_reduce_arg(&base, -1, &index, &src, ArgReduce::Amax, false).unwrap();
    assert_eq!(
        out,
        array![
            [0.0, 0.0, 4.0, 3.0, 2.0, 0.0],
            [2.0, 4.0, 3.0, 0.0, 0.0, 0.0]
        ]
    );
    // pytorch_scatter gives [[5, 5, 3, 4, 0, 1], [1, 4, 3, 5, 5, 5]]: 5 (= src.size(-1)) marks
    // the empty groups; the sentinel here is -1.
    assert_eq!(arg, array![[-1, -1, 3, 4, 0, 1], [1, 4, 3, -1, -1, -1]]);
}

#[test]
fn pytorch_scatter_segment_csr_example() {
    // segment_csr(src [10, 6, 64], indptr [0, 2, 5, 6], dim 1) → [10, 3, 64].
    let src =
        ndarray::Array3::from_shape_fn((10, 6, 64), |(a, b, c)| (a * 1000 + b * 64 + c) as f64);
    let indptr = array![0, 2, 5, 6];
    let out = segment_reduce(
        &src,
        1,
        Segments::offsets(&indptr),
        GroupReduce::Sum,
        EmptyFill::Identity,
    )
    .unwrap();
    assert_eq!(out.shape(), &[10, 3, 64]);
    for a in 0..10 {
        for c in 0..64 {
            let col = |b: usize| src[[a, b, c]];
            assert_eq!(out[[a, 0, c]], col(0) + col(1));
            assert_eq!(out[[a, 1, c]], col(2) + col(3) + col(4));
            assert_eq!(out[[a, 2, c]], col(5));
        }
    }
    // segment_coo with the same segments as sorted ids.
    let ids = array![0, 0, 1, 1, 1, 2];
    let coo = segment_reduce(
        &src,
        1,
        Segments::ids(&ids),
        GroupReduce::Sum,
        EmptyFill::Identity,
    )
    .unwrap();
    assert_eq!(coo, out);
}

#[test]
fn torch_scatter_reduce_table_with_args() {
    // torch_semantics.md §4: base [10,20,30,40], idx [0,0,1,1,1], src [1,2,3,4,5].
    let base = array![10.0f64, 20.0, 30.0, 40.0];
    let idx = array![0, 0, 1, 1, 1];
    let src = array![1.0, 2.0, 3.0, 4.0, 5.0];
    let run = |r, s| scatter_reduce_arg(&base, 0, &idx, &src, r, s).unwrap();
    assert_eq!(
        run(ArgReduce::Amax, true),
        (array![10.0, 20.0, 30.0, 40.0], array![-1, -1, -1, -1])
    );
    assert_eq!(
        run(ArgReduce::Amax, false),
        (array![2.0, 5.0, 30.0, 40.0], array![1, 4, -1, -1])
    );
    assert_eq!(
        run(ArgReduce::Amin, true),
        (array![1.0, 3.0, 30.0, 40.0], array![0, 2, -1, -1])
    );
    assert_eq!(
        run(ArgReduce::Amin, false),
        (array![1.0, 3.0, 30.0, 40.0], array![0, 2, -1, -1])
    );
}

#[test]
fn nan_results_point_at_the_first_nan_source() {
    // torch_semantics.md §4: zeros(3).scatter_reduce(0, [0,0,1,1,2,2], [1,nan,-inf,-inf,2,inf],
    // 'amax', include_self=False) → [nan, -inf, inf].
    let base = ndarray::Array1::<f32>::zeros(3);
    let idx = array![0, 0, 1, 1, 2, 2];
    let src = array![
        1.0,
        f32::NAN,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        2.0,
        f32::INFINITY
    ];
    let (out, arg) = scatter_reduce_arg(&base, 0, &idx, &src, ArgReduce::Amax, false).unwrap();
    assert!(out[0].is_nan());
    assert_eq!((out[1], out[2]), (f32::NEG_INFINITY, f32::INFINITY));
    assert_eq!(arg, array![1, 2, 5]);
    // A NaN in self wins (arg -1) until a NaN source arrives.
    let mut x = array![f32::NAN, f32::NAN];
    let arg = scatter_reduce_arg_inplace(
        &mut x,
        0,
        &array![0, 1, 1, 1],
        &array![5.0, 1.0, f32::NAN, f32::NAN],
        ArgReduce::Amax,
        true,
    )
    .unwrap();
    assert!(x[0].is_nan() && x[1].is_nan());
    assert_eq!(arg, array![-1, 2]);
}

#[test]
fn arg_reduce_is_atomic_on_error() {
    let mut x = array![1.0f32, 2.0];
    let err = scatter_reduce_arg_inplace(
        &mut x,
        0,
        &array![0, 2],
        &array![9.0, 9.0],
        ArgReduce::Amax,
        true,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::IndexOutOfBounds);
    assert_eq!(x, array![1.0, 2.0]);
}

#[test]
fn softmax_is_stable_and_handles_non_finite_groups_like_torch() {
    let src = array![
        1000.0f32,
        1000.0,
        -1000.0,
        f32::INFINITY,
        0.0,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY
    ];
    let idx = array![0, 0, 1, 2, 2, 3, 3];
    let sm = scatter_softmax(&src, 0, &idx).unwrap();
    assert_eq!(sm.slice(ndarray::s![..3]), array![0.5, 0.5, 1.0]);
    // +inf in a group: NaN (torch.softmax([inf, 0]) is [nan, nan]); all -inf: NaN (0/0).
    assert!(sm.slice(ndarray::s![3..]).iter().all(|v| v.is_nan()));
    let lse = scatter_groups(
        &src,
        0,
        &idx,
        GroupReduce::LogSumExp,
        GroupOptions::default(),
    )
    .unwrap();
    assert_eq!(lse[0], 1000.0 + std::f32::consts::LN_2);
    assert_eq!(lse[1], -1000.0);
    assert_eq!(lse[2], f32::INFINITY);
    assert_eq!(lse[3], f32::NEG_INFINITY);
}

/// The narrow types reduce in a wider carrier (i64, u64, f32) or as their bits (first/last): the
/// results must still be those of the type's own arithmetic, wrapping and rounding included.
#[test]
fn carried_reductions_keep_the_arithmetic_and_the_bits_of_the_type() {
    let index = array![0i64, 0, 0, 1];
    let run =
        |src: &ArrayD<i8>, r| scatter_groups(src, 0, &index, r, GroupOptions::default()).unwrap();
    let src = array![100i8, 100, 27, -128].into_dyn();
    assert_eq!(run(&src, GroupReduce::Sum), array![-29i8, -128].into_dyn()); // 227 wraps
    assert_eq!(
        run(&src, GroupReduce::Prod),
        array![(100i8).wrapping_mul(100).wrapping_mul(27), -128].into_dyn()
    );
    assert_eq!(run(&src, GroupReduce::Mean), array![-10i8, -128].into_dyn()); // floor(-29 / 3)
    assert_eq!(run(&src, GroupReduce::Amax), array![100i8, -128].into_dyn());
    let src = array![250u8, 10, 1, 0].into_dyn();
    let out = scatter_groups(&src, 0, &index, GroupReduce::Sum, GroupOptions::default()).unwrap();
    assert_eq!(out, array![5u8, 0].into_dyn()); // 261 wraps
    let out = scatter_groups(&src, 0, &index, GroupReduce::Amin, GroupOptions::default()).unwrap();
    assert_eq!(out, array![1u8, 0].into_dyn());
    // f16 sums round once, from f32: 2048 + 1 + 1 is 2050 in f32, while f16 steps would stay 2048.
    let src = array![f16::from_f32(2048.0), f16::ONE, f16::ONE, f16::ZERO].into_dyn();
    let out = scatter_groups(&src, 0, &index, GroupReduce::Sum, GroupOptions::default()).unwrap();
    assert_eq!(out[0], f16::from_f32(2050.0));
    // first/last move bits: a signalling NaN's payload and -0.0 come through untouched.
    let snan = f16::from_bits(0x7c01);
    let src = array![snan, f16::ONE, f16::NEG_ZERO, f16::NEG_ZERO].into_dyn();
    let first =
        scatter_groups(&src, 0, &index, GroupReduce::First, GroupOptions::default()).unwrap();
    let last = scatter_groups(&src, 0, &index, GroupReduce::Last, GroupOptions::default()).unwrap();
    assert_eq!(first[0].to_bits(), 0x7c01);
    assert_eq!(last[0].to_bits(), f16::NEG_ZERO.to_bits());
    let src = array![f64::from_bits(0x7ff0_0000_0000_0001), 1.0, 2.0, 3.0].into_dyn();
    let first =
        scatter_groups(&src, 0, &index, GroupReduce::First, GroupOptions::default()).unwrap();
    assert_eq!(first[0].to_bits(), 0x7ff0_0000_0000_0001);
}

#[test]
fn fills_for_empty_groups() {
    let src = array![[1i32, 2], [3, 4]];
    let idx = array![0, 0];
    let o = |fill| GroupOptions {
        dim_size: Some(3),
        fill,
    };
    let run = |r, fill| scatter_groups(&src, 1, &idx, r, o(fill)).unwrap();
    assert_eq!(
        run(GroupReduce::Amax, EmptyFill::Identity),
        array![[2, i32::MIN, i32::MIN], [4, i32::MIN, i32::MIN]]
    );
    assert_eq!(
        run(GroupReduce::Amin, EmptyFill::Identity).column(2),
        array![i32::MAX, i32::MAX]
    );
    assert_eq!(
        run(GroupReduce::Prod, EmptyFill::Identity),
        array![[2, 1, 1], [12, 1, 1]]
    );
    assert_eq!(
        run(GroupReduce::Mean, EmptyFill::Identity),
        array![[1, 0, 0], [3, 0, 0]]
    );
    assert_eq!(
        run(GroupReduce::Mean, EmptyFill::Value(-7)),
        array![[1, -7, -7], [3, -7, -7]]
    );
    assert_eq!(
        run(GroupReduce::Amax, EmptyFill::Zero),
        array![[2, 0, 0], [4, 0, 0]]
    );
    let f = array![1.0f64, 2.0];
    let out = scatter_groups(
        &f,
        0,
        &idx,
        GroupReduce::Var { correction: 1 },
        GroupOptions::default().dim_size(2),
    )
    .unwrap();
    assert_eq!(out[0], 0.5);
    assert!(out[1].is_nan());
    let out = scatter_groups(
        &f,
        0,
        &idx,
        GroupReduce::LogSumExp,
        GroupOptions::default().dim_size(2),
    )
    .unwrap();
    assert_eq!(out[1], f64::NEG_INFINITY);
    // var of one element with correction 1 is NaN (0/0), as torch.var.
    let out = scatter_groups(
        &f,
        0,
        &array![0, 1],
        GroupReduce::Var { correction: 1 },
        GroupOptions::default(),
    )
    .unwrap();
    assert!(out.iter().all(|v| v.is_nan()));
}

#[test]
fn errors_teach() {
    let x = array![1, 2, 3];
    let e = scatter_groups(
        &x,
        0,
        &array![0, 1, 0],
        GroupReduce::LogSumExp,
        GroupOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string().contains("needs a float dtype, got int32"),
        "{e}"
    );
    let e = scatter_groups(
        &x,
        0,
        &array![0, 1, 0],
        GroupReduce::Amax,
        GroupOptions::default().fill(EmptyFill::Nan),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = scatter_groups(
        &x,
        0,
        &array![0, 5, 0],
        GroupReduce::Sum,
        GroupOptions::default().dim_size(3),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    assert_eq!(e.index_value(), Some(5));
    let e = scatter_groups(
        &x,
        0,
        &array![0, 1, 0, 1],
        GroupReduce::Sum,
        GroupOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    let e =
        scatter_groups(&x, 2, &array![0], GroupReduce::Sum, GroupOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    let b = array![true, false];
    let e = scatter_groups(
        &b,
        0,
        &array![0, 0],
        GroupReduce::Mean,
        GroupOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = scatter_softmax(&array![1.0f32, 2.0], 0, &array![0]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(e.hint().unwrap().contains("1-D index of length 2"));

    let src = array![1.0f32, 2.0, 3.0, 4.0];
    let seg = |s: Segments<'_, i64>| {
        segment_reduce(&src, 0, s, GroupReduce::Sum, EmptyFill::Identity).unwrap_err()
    };
    let e = seg(Segments::offsets(&array![0, 3, 2]));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string().contains("offsets[1] = 3 > offsets[2] = 2"),
        "{e}"
    );
    let e = seg(Segments::offsets(&array![0, 5]));
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    assert!(
        e.to_string()
            .contains("offsets[1] = 5 is out of range for dimension 0 with size 4"),
        "{e}"
    );
    let e = seg(Segments::offsets(&array![]));
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    let e = seg(Segments::lengths(&array![1, 2]));
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(
        e.to_string().contains("lengths sum to 3 but src has 4"),
        "{e}"
    );
    let e = seg(Segments::lengths(&array![5, -1]));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = seg(Segments::ids(&array![0, 1, 0, 1]));
    assert!(
        e.to_string().contains("ids[2] = 0 comes after ids[1] = 1"),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("scatter_groups"));
    let e = seg(Segments::ids(&array![0, 1, 1]));
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    let e = seg(Segments::ids_with(&array![0, 1, 1, 2], 2));
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    let e = segment_softmax(&src, 0, Segments::offsets(&array![1, 4])).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);

    let e = bincount(&array![0, -3], 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(e.coordinate(), Some(&[1usize][..]));
    let e = bincount_weighted(&array![0, 1], &array![1.0f32], 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
}

#[test]
fn bincount_matches_a_counting_loop() {
    let x = array![3u16, 1, 1, 0, 7, 3, 3];
    let mut want = vec![0i64; 8];
    for &v in &x {
        want[v as usize] += 1;
    }
    assert_eq!(bincount(&x, 0).unwrap().to_vec(), want);
    assert_eq!(bincount(&x, 10).unwrap().len(), 10);
    let w = x.mapv(|v| f16::from_f32(v as f32 * 0.5));
    let bw = bincount_weighted(&x, &w, 0).unwrap();
    assert_eq!(bw[3], f16::from_f32(4.5));
    let x2 = array![[0, 2, 2], [1, 1, 1]];
    assert_eq!(
        bincount_axis(&x2, -1, 4).unwrap(),
        array![[1, 0, 2, 0], [0, 3, 0, 0]]
    );
    let w2 = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
    assert_eq!(
        bincount_weighted_axis(&x2, 0, &w2, 0).unwrap(),
        array![[1.0, 0.0, 0.0], [4.0, 5.0, 6.0], [0.0, 2.0, 3.0]]
    );
}

#[test]
fn results_are_bitwise_identical_for_1_and_4_threads() {
    let (e, f, v) = (60_000usize, 8usize, 300usize);
    let mut s = 11u64;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    };
    let ids: Array1<i64> = (0..e).map(|_| (next() % v as u64) as i64).collect();
    let src = ndarray::Array2::from_shape_fn((e, f), |_| (next() % 1000) as f32 * 1e-3 - 0.5);
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let run = || {
        let a = scatter_groups(
            &src,
            0,
            &ids,
            GroupReduce::Std { correction: 1 },
            GroupOptions::default(),
        )
        .unwrap();
        let b = scatter_softmax(&src, 0, &ids).unwrap();
        let t = src.t();
        let c = scatter_groups(&t, 1, &ids, GroupReduce::Sum, GroupOptions::default()).unwrap();
        let mut sorted = ids.to_vec();
        sorted.sort();
        let sorted = Array1::from(sorted);
        let d = segment_reduce(
            &src,
            0,
            Segments::ids(&sorted),
            GroupReduce::LogSumExp,
            EmptyFill::Identity,
        )
        .unwrap();
        // An index that differs per lane takes the lane-by-lane path.
        let per_lane =
            ndarray::Array2::from_shape_fn((e, f), |(r, c)| ((r * 7 + c * 3) % 5) as i64);
        let e2 = scatter_groups(
            &src,
            1,
            &per_lane,
            GroupReduce::LogSumExp,
            GroupOptions::default(),
        )
        .unwrap();
        (a, b, c, d, e2)
    };
    let one = pool(1).install(run);
    let four = pool(4).install(run);
    let bits = |a: &ndarray::Array2<f32>| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&one.0), bits(&four.0));
    assert_eq!(bits(&one.1), bits(&four.1));
    assert_eq!(bits(&one.2), bits(&four.2));
    assert_eq!(bits(&one.3), bits(&four.3));
    assert_eq!(bits(&one.4), bits(&four.4));
    // The sum along dim 1 of the transpose is the sum along dim 0.
    assert_eq!(
        one.2.t(),
        scatter_groups(&src, 0, &ids, GroupReduce::Sum, GroupOptions::default()).unwrap()
    );
}

// ------------------------------------------------------------------------------------------------
// Gradients by finite differences (f64).

const H: f64 = 1e-6;

fn check_fd(
    what: &str,
    x: &ArrayD<f64>,
    f: impl Fn(&ArrayD<f64>) -> ArrayD<f64>,
    v: &ArrayD<f64>,
    analytic: &ArrayD<f64>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(analytic.shape(), x.shape(), "{}: gradient shape", what);
    let dot = |y: &ArrayD<f64>| -> f64 { y.iter().zip(v.iter()).map(|(a, b)| a * b).sum() };
    for pos in positions(x.shape()) {
        let p = IxDyn(&pos);
        let mut xp = x.clone();
        xp[&p] += H;
        let mut xm = x.clone();
        xm[&p] -= H;
        let numeric = (dot(&f(&xp)) - dot(&f(&xm))) / (2.0 * H);
        let a = analytic[&p];
        prop_assert!(
            (numeric - a).abs() <= 1e-5 * (1.0 + a.abs().max(numeric.abs())),
            "{}: at {:?}: analytic {} vs finite difference {}",
            what,
            pos,
            a,
            numeric
        );
    }
    Ok(())
}

/// Continuous random values, distinct almost surely (no ties, no zeros): `vals` repeats past
/// its length, and two arrays drawn from overlapping slices of it would share values exactly
/// (a tie between `self` and `src` puts the arg gradient on its discontinuity), so each position
/// adds its own step.
fn values(c: &Case, vals: &[f64], shape: &[usize]) -> ArrayD<f64> {
    let _ = c;
    let mut k = 0;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        k += 1;
        let v = vals[(k - 1) % vals.len()];
        v + v.signum() * k as f64 * 1e-3
    })
}

fn grad_case(c: &Case, vals: &[f64], r: GroupReduce) -> Result<(), TestCaseError> {
    let src = values(c, vals, &c.src_shape);
    let index = c.index();
    let d = c.dim as isize;
    let o = GroupOptions {
        dim_size: Some(c.dim_size),
        fill: EmptyFill::Zero,
    };
    let f = |x: &ArrayD<f64>| scatter_groups(x, d, &index, r, o).unwrap();
    let out = f(&src);
    let v = values(c, &vals[7..], out.shape());
    let analytic = grad::scatter_groups(&v, &src, d, &index, r, &out).unwrap();
    check_fd(r.name(), &src, f, &v, &analytic)
}

fn fd_vals() -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(0.1f64..2.0, 64).prop_map(|mut v| {
        // Random signs, magnitudes away from zero.
        for (k, x) in v.iter_mut().enumerate() {
            if k % 3 == 1 {
                *x = -*x;
            }
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn scatter_groups_gradients_match_finite_differences(c in case(), vals in fd_vals()) {
        prop_assume!(!c.one_d);
        for r in [
            GroupReduce::Sum,
            GroupReduce::Mean,
            GroupReduce::Amax,
            GroupReduce::Amin,
            GroupReduce::Prod,
            GroupReduce::First,
            GroupReduce::Last,
            GroupReduce::LogSumExp,
            GroupReduce::Var { correction: 0 },
        ] {
            grad_case(&c, &vals, r)?;
        }
    }

    #[test]
    fn softmax_gradients_match_finite_differences(c in case(), vals in fd_vals()) {
        prop_assume!(c.logical_shape() == c.src_shape);
        let src = values(&c, &vals, &c.src_shape);
        let index = c.index();
        let d = c.dim as isize;
        let v = values(&c, &vals[5..], &c.src_shape);
        if c.one_d {
            let idx = index.clone().into_dimensionality::<ndarray::Ix1>().unwrap();
            let f = |x: &ArrayD<f64>| scatter_softmax(x, d, &idx).unwrap();
            let y = f(&src);
            check_fd("softmax", &src, f, &v, &grad::scatter_softmax(&v, &y, d, &idx).unwrap())?;
            let f = |x: &ArrayD<f64>| scatter_log_softmax(x, d, &idx).unwrap();
            let y = f(&src);
            check_fd("log_softmax", &src, f, &v, &grad::scatter_log_softmax(&v, &y, d, &idx).unwrap())?;
        } else {
            let f = |x: &ArrayD<f64>| scatter_softmax(x, d, &index).unwrap();
            let y = f(&src);
            check_fd("softmax", &src, f, &v, &grad::scatter_softmax(&v, &y, d, &index).unwrap())?;
            let f = |x: &ArrayD<f64>| scatter_log_softmax(x, d, &index).unwrap();
            let y = f(&src);
            check_fd("log_softmax", &src, f, &v, &grad::scatter_log_softmax(&v, &y, d, &index).unwrap())?;
        }
    }

    #[test]
    fn arg_gradient_matches_finite_differences(c in case(), vals in fd_vals(), include_self in any::<bool>()) {
        prop_assume!(!c.one_d);
        let src = values(&c, &vals, &c.src_shape);
        let base = values(&c, &vals[11..], &c.out_shape());
        let index = c.index();
        let d = c.dim as isize;
        let (out, arg) = scatter_reduce_arg(&base, d, &index, &src, ArgReduce::Amax, include_self).unwrap();
        let v = values(&c, &vals[3..], out.shape());
        let g = grad::scatter_reduce_arg(&v, &arg, d, &index, IxDyn(&c.src_shape)).unwrap();
        let f = |x: &ArrayD<f64>| scatter_reduce_arg(&base, d, &index, x, ArgReduce::Amax, include_self).unwrap().0;
        check_fd("arg src", &src, f, &v, &g.src)?;
        let f = |b: &ArrayD<f64>| scatter_reduce_arg(b, d, &index, &src, ArgReduce::Amax, include_self).unwrap().0;
        check_fd("arg self", &base, f, &v, &g.input)?;
    }

    #[test]
    fn segment_gradients_match_finite_differences(
        lens in proptest::collection::vec(0usize..=3, 1..=4),
        before in 0usize..=1,
        lanes in 1usize..=3,
        vals in fd_vals(),
    ) {
        let n: usize = lens.iter().sum();
        let mut offsets = vec![before as i64];
        for &l in &lens {
            offsets.push(offsets.last().unwrap() + l as i64);
        }
        let offsets = Array1::from(offsets);
        let shape = [lanes, before + n + 1];
        let src = ArrayD::from_shape_fn(IxDyn(&shape), |p| vals[(p[0] * 7 + p[1]) % vals.len()] * (1.0 + p[0] as f64));
        for r in [GroupReduce::Sum, GroupReduce::Mean, GroupReduce::Amax, GroupReduce::Amin, GroupReduce::LogSumExp, GroupReduce::Std { correction: 0 }] {
            let f = |x: &ArrayD<f64>| segment_reduce(x, 1, Segments::offsets(&offsets), r, EmptyFill::Zero).unwrap();
            let out = f(&src);
            // std of a one-element segment is not differentiable (sqrt at 0).
            if matches!(r, GroupReduce::Std { .. }) && lens.contains(&1) {
                continue;
            }
            let v = ArrayD::from_shape_fn(out.raw_dim(), |p| vals[(p[0] + 3 * p[1] + 5) % vals.len()]);
            let g = grad::segment_reduce(&v, &src, 1, Segments::offsets(&offsets), r, &out).unwrap();
            check_fd(r.name(), &src, f, &v, &g)?;
        }
        for ar in [ArgReduce::Amax, ArgReduce::Amin] {
            let f = |x: &ArrayD<f64>| {
                segment_arg_reduce(x, 1, Segments::offsets(&offsets), ar, EmptyFill::Zero).unwrap().0
            };
            let (out, arg) =
                segment_arg_reduce(&src, 1, Segments::offsets(&offsets), ar, EmptyFill::Zero).unwrap();
            let v = ArrayD::from_shape_fn(out.raw_dim(), |p| vals[(p[0] + 2 * p[1] + 1) % vals.len()]);
            let g = grad::segment_arg_reduce(&v, &arg, 1, IxDyn(&shape)).unwrap();
            check_fd("segment_arg", &src, f, &v, &g)?;
        }
        let full = src.slice_axis(Axis(1), ndarray::Slice::from(before..before + n)).to_owned();
        let lengths = Array1::from(lens.clone());
        let v = ArrayD::from_shape_fn(full.raw_dim(), |p| vals[(2 * p[0] + p[1] + 1) % vals.len()]);
        let f = |x: &ArrayD<f64>| segment_softmax(x, 1, Segments::lengths(&lengths)).unwrap();
        let y = f(&full);
        check_fd("segment_softmax", &full, f, &v, &grad::segment_softmax(&v, &y, 1, Segments::lengths(&lengths)).unwrap())?;
        let f = |x: &ArrayD<f64>| segment_log_softmax(x, 1, Segments::lengths(&lengths)).unwrap();
        let y = f(&full);
        check_fd("segment_log_softmax", &full, f, &v, &grad::segment_log_softmax(&v, &y, 1, Segments::lengths(&lengths)).unwrap())?;
    }
}

#[test]
fn std_gradient_matches_finite_differences_on_pairs() {
    // Groups of exactly two (std is not differentiable at a one-element group).
    let src = ArrayD::from_shape_fn(IxDyn(&[3, 6]), |p| {
        ((p[0] * 6 + p[1]) as f64 * 0.37).sin() * 2.0
    });
    let idx = array![0, 2, 0, 1, 2, 1];
    for r in [
        GroupReduce::Std { correction: 1 },
        GroupReduce::Var { correction: 1 },
    ] {
        let f = |x: &ArrayD<f64>| scatter_groups(x, 1, &idx, r, GroupOptions::default()).unwrap();
        let out = f(&src);
        let v = ArrayD::from_shape_fn(out.raw_dim(), |p| 1.0 + p[0] as f64 - 0.5 * p[1] as f64);
        let g = grad::scatter_groups(&v, &src, 1, &idx, r, &out).unwrap();
        check_fd(r.name(), &src, f, &v, &g).unwrap();
    }
}

#[test]
fn bincount_weight_gradient_is_the_bin_gradient() {
    let x = array![[0, 2, 2], [1, 1, 0]];
    let w = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |p| (p[0] + 2 * p[1]) as f64 * 0.3);
    let xd = x.clone().into_dyn();
    let f = |w: &ArrayD<f64>| bincount_weighted_axis(&xd, 1, w, 0).unwrap();
    let out = f(&w);
    let v = ArrayD::from_shape_fn(out.raw_dim(), |p| (1 + p[0] * 3 + p[1]) as f64);
    let g = grad::bincount_weighted_axis(&v, &xd, 1).unwrap();
    check_fd("bincount", &w, f, &v, &g).unwrap();
}

#[test]
fn amax_gradient_splits_ties_and_arg_gradient_does_not() {
    let src = array![3.0f64, 1.0, 3.0, 7.0];
    let idx = array![0, 0, 0, 1];
    let out = scatter_groups(&src, 0, &idx, GroupReduce::Amax, GroupOptions::default()).unwrap();
    let g =
        grad::scatter_groups(&array![10.0, 20.0], &src, 0, &idx, GroupReduce::Amax, &out).unwrap();
    assert_eq!(g, array![5.0, 0.0, 5.0, 20.0]);
    let (_, arg) =
        scatter_reduce_arg(&array![0.0, 0.0], 0, &idx, &src, ArgReduce::Amax, false).unwrap();
    let ga = grad::scatter_reduce_arg(&array![10.0, 20.0], &arg, 0, &idx, [4]).unwrap();
    assert_eq!(ga.src, array![10.0, 0.0, 0.0, 20.0]);
    assert_eq!(ga.input, array![0.0, 0.0]);
    // prod with one zero: the zero gets the product of the others.
    let src = array![3.0f64, 0.0, 4.0];
    let idx = array![0, 0, 0];
    let out = scatter_groups(&src, 0, &idx, GroupReduce::Prod, GroupOptions::default()).unwrap();
    let g = grad::scatter_groups(&array![1.0], &src, 0, &idx, GroupReduce::Prod, &out).unwrap();
    assert_eq!(g, array![0.0, 12.0, 0.0]);
}

#[test]
fn any_layout_gives_the_result_of_its_standard_copy() {
    let base = ndarray::Array3::from_shape_fn((4, 6, 5), |(a, b, c)| {
        ((a * 37 + b * 11 + c * 5) % 17) as f32 - 8.0
    });
    let first = base.slice(ndarray::s![0..1, .., ..]);
    let views = [
        base.slice(ndarray::s![..;-1, .., ..]).into_dyn(),
        base.slice(ndarray::s![.., ..;2, ..;-2]).into_dyn(),
        base.view().permuted_axes([2, 0, 1]).into_dyn(),
        first.broadcast((3, 6, 5)).unwrap().into_dyn(),
    ];
    for v in views {
        let owned = v.to_owned();
        for dim in 0..3 {
            let n = v.shape()[dim];
            let ids: Array1<i64> = (0..n as i64).map(|j| (j * 5 + 1) % 3).collect();
            let full = ArrayD::from_shape_fn(v.raw_dim(), |p| ((p[dim] * 2 + p[0]) % 3) as i64);
            let fullv = full.view();
            let rev = fullv.slice_each_axis(|ax| {
                if ax.axis.index() == dim {
                    ndarray::Slice::new(0, None, -1)
                } else {
                    ndarray::Slice::from(..)
                }
            });
            for r in [
                GroupReduce::Sum,
                GroupReduce::Amax,
                GroupReduce::Std { correction: 1 },
            ] {
                let o = GroupOptions::default().dim_size(3);
                let a = scatter_groups(&v, dim as isize, &ids, r, o).unwrap();
                let b = scatter_groups(&owned, dim as isize, &ids, r, o).unwrap();
                assert!(
                    a.iter().zip(b.iter()).all(|(x, y)| same(*x, *y)),
                    "{r:?} dim {dim}"
                );
                let a = scatter_groups(&v, dim as isize, &rev, r, o).unwrap();
                let b = scatter_groups(&owned, dim as isize, &rev.to_owned(), r, o).unwrap();
                assert!(
                    a.iter().zip(b.iter()).all(|(x, y)| same(*x, *y)),
                    "{r:?} dim {dim} N-D"
                );
            }
            assert_eq!(
                scatter_softmax(&v, dim as isize, &ids).unwrap(),
                scatter_softmax(&owned, dim as isize, &ids).unwrap()
            );
            let (x, y) = (
                scatter_reduce_arg(&owned, dim as isize, &rev, &v, ArgReduce::Amin, true).unwrap(),
                scatter_reduce_arg(
                    &owned,
                    dim as isize,
                    &rev.to_owned(),
                    &owned,
                    ArgReduce::Amin,
                    true,
                )
                .unwrap(),
            );
            assert_eq!(x, y);
        }
    }
}
