//! Gradients checked by finite differences, in f64, on random shapes and indices: for a random
//! upstream gradient `v`, every VJP must equal the central difference of `<v, f(x)>` along each
//! input coordinate. Reductions are tested away from their kinks (amax/amin on distinct values);
//! ties and zeros are tested with constructed cases whose exact gradients are known
//! (torch_semantics.md §A).

mod common;

use common::positions;
use gather::Reduce;
use gather::grad::{self, Parity};
use gather::ops::scatter::LegacyReduce;
use ndarray::{ArrayD, IxDyn, array};
use proptest::prelude::*;

const H: f64 = 1e-6;

/// `<v, f(x)>`'s central differences along every coordinate of `x`, against `analytic`.
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
            (numeric - a).abs() <= 1e-6 * (1.0 + a.abs().max(numeric.abs())),
            "{}: at {:?}: analytic {} vs finite difference {}",
            what,
            pos,
            a,
            numeric
        );
    }
    Ok(())
}

/// A random scatter/gather-shaped problem: input, index (values valid along `dim`), src at least
/// as large as the index, and upstream gradients.
#[derive(Debug, Clone)]
struct Problem {
    x_shape: Vec<usize>,
    idx_shape: Vec<usize>,
    src_shape: Vec<usize>,
    dim: usize,
    seeds: Vec<u32>,
    values: Vec<f64>,
}

fn problem() -> impl Strategy<Value = Problem> {
    (1usize..=3)
        .prop_flat_map(|nd| {
            (
                proptest::collection::vec(1usize..=4, nd),
                proptest::collection::vec(1usize..=4, nd),
                proptest::collection::vec(0usize..=1, nd),
                0..nd,
                proptest::collection::vec(any::<u32>(), 64),
                proptest::collection::vec(-2.0f64..2.0, 256),
            )
        })
        .prop_map(|(x_shape, raw, extra, dim, seeds, values)| {
            let idx_shape: Vec<usize> = (0..x_shape.len())
                .map(|a| {
                    if a == dim {
                        raw[a]
                    } else {
                        raw[a].min(x_shape[a])
                    }
                })
                .collect();
            let src_shape = idx_shape.iter().zip(&extra).map(|(i, e)| i + e).collect();
            Problem {
                x_shape,
                idx_shape,
                src_shape,
                dim,
                seeds,
                values,
            }
        })
}

impl Problem {
    fn seed(&self, i: usize) -> u32 {
        self.seeds[i % self.seeds.len()]
            .wrapping_mul(2654435761)
            .wrapping_add(i as u32)
    }

    fn index(&self) -> ArrayD<i64> {
        let n = self.x_shape[self.dim] as u32;
        let mut k = 0;
        ArrayD::from_shape_fn(IxDyn(&self.idx_shape), |_| {
            k += 1;
            (self.seed(k) % n) as i64
        })
    }

    /// An index whose targets are distinct within each lane along `dim` (no duplicate writes):
    /// the lane length is capped at the input's size along `dim`.
    fn unique_index(&self) -> ArrayD<i64> {
        let n = self.x_shape[self.dim];
        let mut shape = self.idx_shape.clone();
        shape[self.dim] = shape[self.dim].min(n);
        let mut out = ArrayD::zeros(IxDyn(&shape));
        for (lane_no, mut lane) in out
            .lanes_mut(ndarray::Axis(self.dim))
            .into_iter()
            .enumerate()
        {
            let mut perm: Vec<i64> = (0..n as i64).collect();
            for i in (1..n).rev() {
                let j = self.seed(lane_no * 7 + i) as usize % (i + 1);
                perm.swap(i, j);
            }
            for (slot, v) in lane.iter_mut().zip(perm) {
                *slot = v;
            }
        }
        out
    }

    fn array(&self, shape: &[usize], offset: usize) -> ArrayD<f64> {
        let mut k = offset;
        ArrayD::from_shape_fn(IxDyn(shape), |_| {
            k += 1;
            self.values[k % self.values.len()]
        })
    }

    /// Values of every element of `x` and `src` pairwise distinct, at least 0.1 apart (so that
    /// amax/amin have no ties within a finite-difference step).
    fn distinct(&self, x_shape: &[usize], src_shape: &[usize]) -> (ArrayD<f64>, ArrayD<f64>) {
        let nx: usize = x_shape.iter().product();
        let ns: usize = src_shape.iter().product();
        let mut perm: Vec<usize> = (0..nx + ns).collect();
        for i in (1..perm.len()).rev() {
            let j = self.seed(1000 + i) as usize % (i + 1);
            perm.swap(i, j);
        }
        let val = |r: usize| (r as f64) * 0.1 - 1.5;
        let x =
            ArrayD::from_shape_vec(IxDyn(x_shape), perm[..nx].iter().map(|&r| val(r)).collect());
        let s = ArrayD::from_shape_vec(
            IxDyn(src_shape),
            perm[nx..].iter().map(|&r| val(r)).collect(),
        );
        (x.unwrap(), s.unwrap())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn gather_vjp_matches_finite_differences(p in problem()) {
        let idx = p.index();
        let x = p.array(&p.x_shape, 0);
        let v = p.array(&p.idx_shape, 7);
        let d = p.dim as isize;
        let gx = grad::gather(&v, x.raw_dim(), d, &idx).unwrap();
        check_fd("gather", &x, |x| gather::gather(x, d, &idx).unwrap(), &v, &gx)?;
    }

    #[test]
    fn scatter_and_scatter_add_vjps_match_finite_differences(p in problem()) {
        let d = p.dim as isize;
        let x = p.array(&p.x_shape, 0);
        let v = p.array(&p.x_shape, 11);
        // scatter (set) with distinct targets; src larger than the index.
        let uidx = p.unique_index();
        let mut src_shape = p.src_shape.clone();
        src_shape[p.dim] = uidx.shape()[p.dim] + (p.src_shape[p.dim] - p.idx_shape[p.dim]);
        let src = p.array(&src_shape, 5);
        let g = grad::scatter(&v, d, &uidx, src.raw_dim()).unwrap();
        check_fd("scatter input", &x, |x| gather::scatter(x, d, &uidx, &src).unwrap(), &v, &g.input)?;
        check_fd("scatter src", &src, |s| gather::scatter(&x, d, &uidx, s).unwrap(), &v, &g.src)?;
        let gv = grad::scatter_value(&v, d, &uidx).unwrap();
        check_fd("scatter value", &x, |x| gather::scatter(x, d, &uidx, 0.5).unwrap(), &v, &gv)?;
        // scatter_add with duplicates.
        let idx = p.index();
        let src = p.array(&p.src_shape, 5);
        let g = grad::scatter_add(&v, d, &idx, src.raw_dim()).unwrap();
        check_fd("scatter_add input", &x, |x| gather::scatter_add(x, d, &idx, &src).unwrap(), &v, &g.input)?;
        check_fd("scatter_add src", &src, |s| gather::scatter_add(&x, d, &idx, s).unwrap(), &v, &g.src)?;
        // The legacy reduce= form, which PyTorch does not differentiate.
        for r in [LegacyReduce::Add, LegacyReduce::Multiply] {
            let out = gather::scatter_reduce(&x, d, &idx, &src, gather::Reduce::from(r), true).unwrap();
            let g = grad::scatter_legacy(&v, &x, d, &idx, &src, r, &out).unwrap();
            let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| gather::scatter_reduce(x, d, &idx, s, gather::Reduce::from(r), true).unwrap();
            check_fd("scatter legacy input", &x, |x| f(x, &src), &v, &g.input)?;
            check_fd("scatter legacy src", &src, |s| f(&x, s), &v, &g.src)?;
            let out = gather::scatter_reduce(&x, d, &idx, 1.25, gather::Reduce::from(r), true).unwrap();
            let gi = grad::scatter_value_legacy(&v, &x, d, &idx, 1.25, r, &out).unwrap();
            check_fd("scatter value legacy", &x, |x| gather::scatter_reduce(x, d, &idx, 1.25, gather::Reduce::from(r), true).unwrap(), &v, &gi)?;
        }
    }

    #[test]
    fn scatter_reduce_vjps_match_finite_differences(p in problem(), zeros in any::<bool>()) {
        let d = p.dim as isize;
        let idx = p.index();
        let v = p.array(&p.x_shape, 11);
        for reduce in [Reduce::Sum, Reduce::Mean, Reduce::Prod, Reduce::Amax, Reduce::Amin] {
            let (x, src) = match reduce {
                // Away from the kinks: no ties anywhere.
                Reduce::Amax | Reduce::Amin => p.distinct(&p.x_shape, &p.src_shape),
                // prod is multilinear, so finite differences are exact at zeros too.
                Reduce::Prod if zeros => {
                    let z = |a: ArrayD<f64>| a.mapv(|t| if t.abs() < 0.5 { 0.0 } else { t });
                    (z(p.array(&p.x_shape, 0)), z(p.array(&p.src_shape, 5)))
                }
                _ => (p.array(&p.x_shape, 0), p.array(&p.src_shape, 5)),
            };
            for include_self in [true, false] {
                let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| {
                    gather::scatter_reduce(x, d, &idx, s, reduce, include_self).unwrap()
                };
                let out = f(&x, &src);
                let g = grad::scatter_reduce(&v, &x, d, &idx, &src, reduce, include_self, &out).unwrap();
                let what = format!("scatter_reduce {reduce:?} include_self={include_self}");
                check_fd(&format!("{what} input"), &x, |x| f(x, &src), &v, &g.input)?;
                check_fd(&format!("{what} src"), &src, |s| f(&x, s), &v, &g.src)?;
                // Without ties PyTorch's formulas and ours agree exactly.
                let t = grad::scatter_reduce_with(&v, &x, d, &idx, &src, reduce, include_self, &out, Parity::PyTorch).unwrap();
                prop_assert_eq!(&t.src, &g.src);
            }
        }
    }
}

impl Problem {
    /// A 1-d index of `n` values in `0..size` (duplicates allowed), from the seeds.
    fn vector(&self, n: usize, size: usize, salt: usize) -> ndarray::Array1<i64> {
        ndarray::Array1::from_shape_fn(n, |k| (self.seed(salt + k) as usize % size) as i64)
    }

    /// A 1-d index of distinct values in `0..size`, at most `size` of them.
    fn distinct_vector(&self, n: usize, size: usize, salt: usize) -> ndarray::Array1<i64> {
        let mut perm: Vec<i64> = (0..size as i64).collect();
        for i in (1..size).rev() {
            let j = self.seed(salt + i) as usize % (i + 1);
            perm.swap(i, j);
        }
        perm.truncate(n.min(size));
        ndarray::Array1::from_vec(perm)
    }

    /// `x_shape` with `n` along `dim`.
    fn with_dim(&self, n: usize) -> Vec<usize> {
        let mut s = self.x_shape.clone();
        s[self.dim] = n;
        s
    }

    fn bools(&self, shape: &[usize], salt: usize) -> ArrayD<bool> {
        let mut k = salt;
        ArrayD::from_shape_fn(IxDyn(shape), |_| {
            k += 1;
            self.seed(k) % 3 != 0
        })
    }

    /// `shape` with some axes turned to 1 (so that it broadcasts against `shape`).
    fn squeezed(&self, shape: &[usize], salt: usize) -> Vec<usize> {
        shape
            .iter()
            .enumerate()
            .map(|(a, &n)| if self.seed(salt + a) % 3 == 0 { 1 } else { n })
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn index_family_vjps_match_finite_differences(p in problem(), n in 1usize..=5, alpha in -2.0f64..2.0) {
        let d = p.dim as isize;
        let size = p.x_shape[p.dim];
        let x = p.array(&p.x_shape, 0);
        // index_select
        let idx = p.vector(n, size, 300);
        let v = p.array(&p.with_dim(n), 9);
        let gx = grad::index_select(&v, x.raw_dim(), d, &idx).unwrap();
        check_fd("index_select", &x, |x| gather::index_select(x, d, &idx).unwrap(), &v, &gx)?;
        // index_add, with duplicates and alpha
        let src = p.array(&p.with_dim(n), 3);
        let v = p.array(&p.x_shape, 13);
        let g = grad::index_add(&v, d, &idx, src.raw_dim(), alpha).unwrap();
        let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| gather::index_add(x, d, &idx, s, alpha).unwrap();
        check_fd("index_add input", &x, |x| f(x, &src), &v, &g.input)?;
        check_fd("index_add source", &src, |s| f(&x, s), &v, &g.source)?;
        // index_copy, distinct slices
        let uidx = p.distinct_vector(n, size, 500);
        let usrc = p.array(&p.with_dim(uidx.len()), 3);
        let g = grad::index_copy(&v, d, &uidx, usrc.raw_dim()).unwrap();
        let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| gather::index_copy(x, d, &uidx, s).unwrap();
        check_fd("index_copy input", &x, |x| f(x, &usrc), &v, &g.input)?;
        check_fd("index_copy source", &usrc, |s| f(&x, s), &v, &g.source)?;
        // index_fill (negative values wrap), and the fill value's gradient
        let fidx = idx.mapv(|i| if i % 2 == 1 { i - size as i64 } else { i });
        let gi = grad::index_fill(&v, d, &fidx).unwrap();
        check_fd("index_fill", &x, |x| gather::index_fill(x, d, &fidx, 0.75).unwrap(), &v, &gi)?;
        let gv = grad::index_fill_value(&v, d, &fidx).unwrap();
        let val = ndarray::arr1(&[0.75]).into_dyn();
        let f = |t: &ArrayD<f64>| gather::index_fill(&x, d, &fidx, t[[0]]).unwrap();
        check_fd("index_fill value", &val, f, &v, &ndarray::arr1(&[gv]).into_dyn())?;
        // index_reduce, every reduction, both include_self
        for reduce in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            let (x, src) = match reduce {
                Reduce::Amax | Reduce::Amin => p.distinct(&p.x_shape, &p.with_dim(n)),
                _ => (x.clone(), src.clone()),
            };
            for include_self in [true, false] {
                let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| {
                    gather::index_reduce(x, d, &idx, s, reduce, include_self).unwrap()
                };
                let out = f(&x, &src);
                let g = grad::index_reduce(&v, &x, d, &idx, &src, reduce, include_self, &out).unwrap();
                let what = format!("index_reduce {reduce:?} include_self={include_self}");
                check_fd(&format!("{what} input"), &x, |x| f(x, &src), &v, &g.input)?;
                check_fd(&format!("{what} source"), &src, |s| f(&x, s), &v, &g.source)?;
            }
        }
    }

    #[test]
    fn take_and_put_vjps_match_finite_differences(p in problem(), n in 1usize..=6, acc in any::<bool>()) {
        let x = p.array(&p.x_shape, 0);
        let numel = x.len();
        // take: negative values wrap; duplicates accumulate.
        let idx = p.vector(n, 2 * numel, 700).mapv(|i| i - numel as i64).into_shape_with_order(IxDyn(&[n, 1])).unwrap();
        let v = p.array(&[n, 1], 17);
        let gx = grad::take(&v, x.raw_dim(), &idx).unwrap();
        check_fd("take", &x, |x| gather::take(x, &idx).unwrap(), &v, &gx)?;
        // take_along_dim, dim None
        let fidx = p.vector(n, numel, 800);
        let v1 = p.array(&[n], 19);
        let gx = grad::take_along_dim(&v1, x.raw_dim(), &fidx, None).unwrap();
        check_fd("take_along_dim None", &x, |x| gather::take_along_dim(x, &fidx, None).unwrap(), &v1, &gx)?;
        // take_along_dim with a dim: input and index broadcast on the other axes; values wrap.
        let xs = p.squeezed(&p.x_shape, 900);
        let mut is = p.squeezed(&p.x_shape, 950);
        for a in 0..is.len() {
            if xs[a] == 1 && a != p.dim { is[a] = p.x_shape[a]; }
        }
        is[p.dim] = n;
        let xb = p.array(&xs, 1);
        let mut k = 0;
        let tidx = ArrayD::from_shape_fn(IxDyn(&is), |_| { k += 1; p.seed(1100 + k) as i64 % 9 - 4 });
        let d = p.dim as isize;
        let out = gather::take_along_dim(&xb, &tidx, Some(d)).unwrap();
        let v = p.array(out.shape(), 23);
        let gx = grad::take_along_dim(&v, xb.raw_dim(), &tidx, Some(d)).unwrap();
        check_fd("take_along_dim dim", &xb, |x| gather::take_along_dim(x, &tidx, Some(d)).unwrap(), &v, &gx)?;
        // put: accumulate with duplicates, or plain writes to distinct positions.
        let pidx = if acc { p.vector(n, numel, 1200) } else { p.distinct_vector(n, numel, 1200) };
        let pidx = pidx.mapv(|i| if i % 3 == 0 { i - numel as i64 } else { i });
        let src = p.array(&[pidx.len()], 29);
        let v = p.array(&p.x_shape, 31);
        let g = grad::put(&v, &pidx, src.raw_dim(), acc).unwrap();
        let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| gather::put(x, &pidx, s, acc).unwrap();
        check_fd("put input", &x, |x| f(x, &src), &v, &g.input)?;
        check_fd("put source", &src, |s| f(&x, s), &v, &g.source)?;
    }

    #[test]
    fn masked_sort_and_repeat_vjps_match_finite_differences(p in problem(), extra in 0usize..3, r in 0usize..3) {
        // masked_select / masked_scatter with input and mask broadcast against each other.
        let xs = p.squeezed(&p.x_shape, 40);
        let ms = p.squeezed(&p.x_shape, 60);
        let x = p.array(&xs, 0);
        let mask = p.bools(&ms, 80);
        let out = gather::masked_select(&x, &mask).unwrap();
        let v = p.array(out.shape(), 7).into_dimensionality::<ndarray::Ix1>().unwrap();
        let gx = grad::masked_select(&v, x.raw_dim(), &mask).unwrap();
        check_fd("masked_select", &x, |x| gather::masked_select(x, &mask).unwrap().into_dyn(), &v.clone().into_dyn(), &gx)?;
        let src = p.array(&[out.len() + extra], 5);
        let outs = gather::masked_scatter(&x, &mask, &src).unwrap();
        let v = p.array(outs.shape(), 11);
        let g = grad::masked_scatter(&v, x.raw_dim(), &mask, src.raw_dim()).unwrap();
        let f = |x: &ArrayD<f64>, s: &ArrayD<f64>| gather::masked_scatter(x, &mask, s).unwrap();
        check_fd("masked_scatter input", &x, |x| f(x, &src), &v, &g.input)?;
        check_fd("masked_scatter source", &src, |s| f(&x, s), &v, &g.source)?;
        // sort / topk on distinct values (no ties: locally a fixed permutation).
        let (x, _) = p.distinct(&p.x_shape, &[0]);
        let d = p.dim as isize;
        for descending in [false, true] {
            let (vals, idx) = gather::sort(&x, d, descending, true).unwrap();
            let v = p.array(vals.shape(), 13);
            let gx = grad::sort(&v, x.raw_dim(), d, &idx).unwrap();
            check_fd("sort", &x, |x| gather::sort(x, d, descending, true).unwrap().0, &v, &gx)?;
            let k = (p.seed(77) as usize) % (p.x_shape[p.dim] + 1);
            let (vals, idx) = gather::topk(&x, k, d, descending, true).unwrap();
            let v = p.array(vals.shape(), 17);
            let gx = grad::topk(&v, x.raw_dim(), d, &idx).unwrap();
            check_fd("topk", &x, |x| gather::topk(x, k, d, descending, true).unwrap().0, &v, &gx)?;
        }
        // repeat_interleave: per-slice counts, a single count, and dim None.
        let x = p.array(&p.x_shape, 3);
        let size = p.x_shape[p.dim];
        let reps = p.vector(size, 3, 1300);
        let out = gather::repeat_interleave(&x, &reps, Some(d), None).unwrap();
        let v = p.array(out.shape(), 19);
        let gx = grad::repeat_interleave(&v, x.raw_dim(), &reps, Some(d)).unwrap();
        check_fd("repeat_interleave", &x, |x| gather::repeat_interleave(x, &reps, Some(d), None).unwrap(), &v, &gx)?;
        let out = gather::ops::repeat::repeat_interleave_scalar(&x, r, None, None).unwrap();
        let v = p.array(out.shape(), 21);
        let gx = grad::repeat_interleave_scalar(&v, x.raw_dim(), r, None).unwrap();
        check_fd("repeat_interleave scalar", &x, |x| gather::ops::repeat::repeat_interleave_scalar(x, r, None, None).unwrap(), &v, &gx)?;
    }
}

#[test]
fn index_reduce_excluded_self_tie_is_corrected() {
    let (x, idx, src) = (array![3.0f64, 5.0], array![0i64, 0], array![3.0f64, 1.0]);
    let out = gather::index_reduce(&x, 0, &idx, &src, Reduce::Amax, false).unwrap();
    let g = array![1.0, 1.0];
    let ours = grad::index_reduce(&g, &x, 0, &idx, &src, Reduce::Amax, false, &out).unwrap();
    assert_eq!(ours.source, array![1.0, 0.0]);
    let torch = grad::index_reduce_with(
        &g,
        &x,
        0,
        &idx,
        &src,
        Reduce::Amax,
        false,
        &out,
        Parity::PyTorch,
    )
    .unwrap();
    assert_eq!(torch.source, array![0.5, 0.0]);
}

#[test]
fn worked_examples_of_the_other_families() {
    // torch_semantics.md §A.4: index_select with [0, 0, 2] → [2, 0, 1].
    let gx = grad::index_select(&array![1.0f64, 1.0, 1.0], [3], 0, &array![0i64, 0, 2]).unwrap();
    assert_eq!(gx, array![2.0, 0.0, 1.0]);
    // §A.5: index_add alpha 3 with duplicates [0, 0]: each source row gets 3 * grad[0].
    let g = grad::index_add(
        &array![[1.0f64, 2.0], [7.0, 8.0]],
        0,
        &array![0i64, 0],
        (2, 2),
        3.0,
    )
    .unwrap();
    assert_eq!(g.source, array![[3.0, 6.0], [3.0, 6.0]]);
    // §A.5: index_fill with a duplicate index counts the slice once for the value.
    let v = grad::index_fill_value(&array![1.0f64, 10.0, 100.0], 0, &array![1i64, 1]).unwrap();
    assert_eq!(v, 10.0);
    // §A.6: masked_select of [1, 2] with mask [[T, F], [T, T]] → [2, 1].
    let gx = grad::masked_select(
        &array![1.0f64, 1.0, 1.0],
        [2],
        &array![[true, false], [true, true]],
    )
    .unwrap();
    assert_eq!(gx, array![2.0, 1.0]);
    // §A.7: repeat_interleave repeats [2, 0, 1], grad [10, 20, 30] → [30, 0, 30].
    let gx = grad::repeat_interleave(
        &array![10.0f64, 20.0, 30.0],
        [3],
        &array![2i64, 0, 1],
        Some(0),
    )
    .unwrap();
    assert_eq!(gx, array![30.0, 0.0, 30.0]);
    // §A.6: put without accumulate, duplicates: every source at a duplicate index gets the grad.
    let g = grad::put(&array![5.0f64, 7.0], &array![1i64, 1], [2], false).unwrap();
    assert_eq!(g.source, array![7.0, 7.0]);
    assert_eq!(g.input, array![5.0, 0.0]);
    // §A.4: take_along_dim(a, [[0], [0]], dim=0) on 2×2 → [[2, 2], [0, 0]].
    let gx = grad::take_along_dim(
        &ndarray::Array2::<f64>::ones((2, 2)),
        (2, 2),
        &array![[0i64], [0]],
        Some(0),
    )
    .unwrap();
    assert_eq!(gx, array![[2.0, 2.0], [0.0, 0.0]]);
}

/// Runs scatter_reduce forward and backward on 1-d f64 data.
fn sr(
    x: &[f64],
    idx: &[i64],
    src: &[f64],
    g: &[f64],
    reduce: Reduce,
    include_self: bool,
    parity: Parity,
) -> (Vec<f64>, Vec<f64>) {
    let (x, idx, src, g) = (
        ndarray::arr1(x),
        ndarray::arr1(idx),
        ndarray::arr1(src),
        ndarray::arr1(g),
    );
    let out = gather::scatter_reduce(&x, 0, &idx, &src, reduce, include_self).unwrap();
    let r = grad::scatter_reduce_with(&g, &x, 0, &idx, &src, reduce, include_self, &out, parity)
        .unwrap();
    (r.input.to_vec(), r.src.to_vec())
}

#[test]
fn amax_tie_with_self_splits_three_ways() {
    // torch_semantics.md §A.3: self [5,1], idx [0,0,0], src [5,5,1], grad [12,1].
    let (gi, gs) = sr(
        &[5.0, 1.0],
        &[0, 0, 0],
        &[5.0, 5.0, 1.0],
        &[12.0, 1.0],
        Reduce::Amax,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![4.0, 1.0], vec![4.0, 4.0, 0.0]));
    // amin mirror.
    let (gi, gs) = sr(
        &[1.0, 9.0],
        &[0, 0, 0],
        &[1.0, 1.0, 5.0],
        &[12.0, 1.0],
        Reduce::Amin,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![4.0, 1.0], vec![4.0, 4.0, 0.0]));
}

#[test]
fn excluded_self_tie_gives_the_correct_gradient_and_pytorch_parity_its_bug() {
    // torch_semantics.md §A.3: s=[3,5], src=[3,1], idx [0,0], amax, include_self=false.
    let run = |parity| {
        sr(
            &[3.0, 5.0],
            &[0, 0],
            &[3.0, 1.0],
            &[1.0, 1.0],
            Reduce::Amax,
            false,
            parity,
        )
    };
    assert_eq!(run(Parity::Correct), (vec![0.0, 1.0], vec![1.0, 0.0]));
    assert_eq!(run(Parity::PyTorch), (vec![0.0, 1.0], vec![0.5, 0.0]));
    // Two tied src with an excluded tied self: each gets half (PyTorch: a third).
    let (_, gs) = sr(
        &[3.0],
        &[0, 0],
        &[3.0, 3.0],
        &[6.0],
        Reduce::Amax,
        false,
        Parity::Correct,
    );
    assert_eq!(gs, vec![3.0, 3.0]);
    // The aliases `max`/`min` (rejected by PyTorch's backward) differentiate like amax/amin.
    let max: Reduce = "max".parse().unwrap();
    let (_, gs) = sr(
        &[3.0, 5.0],
        &[0, 0],
        &[3.0, 1.0],
        &[1.0, 1.0],
        max,
        false,
        Parity::Correct,
    );
    assert_eq!(gs, vec![1.0, 0.0]);
}

#[test]
fn prod_zeros_get_the_exact_product_of_the_others() {
    // One zero in src: [3,0,4] into self [2] → src.grad [0, 24, 0].
    let (gi, gs) = sr(
        &[2.0],
        &[0, 0, 0],
        &[3.0, 0.0, 4.0],
        &[1.0],
        Reduce::Prod,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![0.0], vec![0.0, 24.0, 0.0]));
    // A zero in self: self [0], src [3,4] → self.grad 12.
    let (gi, gs) = sr(
        &[0.0],
        &[0, 0],
        &[3.0, 4.0],
        &[1.0],
        Reduce::Prod,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![12.0], vec![0.0, 0.0]));
    // Two zeros: every contributor gets zero.
    let (gi, gs) = sr(
        &[2.0],
        &[0, 0, 0],
        &[0.0, 7.0, 0.0],
        &[1.0],
        Reduce::Prod,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![0.0], vec![0.0, 0.0, 0.0]));
    // A zero in self and one in src: the src zero gets self * others = 0, self gets 0.
    let (gi, gs) = sr(
        &[0.0],
        &[0, 0],
        &[0.0, 5.0],
        &[1.0],
        Reduce::Prod,
        true,
        Parity::Correct,
    );
    assert_eq!((gi, gs), (vec![0.0], vec![0.0, 0.0]));
}

#[test]
fn mean_gradients_divide_by_the_contributor_count() {
    // torch_semantics.md §A.3: self [2,0,5,7], idx [0,0,1,1,1], src [3,4,0,6,0], grad [10,20,30,40].
    let args = (
        [2.0, 0.0, 5.0, 7.0],
        [0i64, 0, 1, 1, 1],
        [3.0, 4.0, 0.0, 6.0, 0.0],
        [10.0, 20.0, 30.0, 40.0],
    );
    let (gi, gs) = sr(
        &args.0,
        &args.1,
        &args.2,
        &args.3,
        Reduce::Mean,
        true,
        Parity::Correct,
    );
    assert_eq!(gi, vec![10.0 / 3.0, 5.0, 30.0, 40.0]);
    assert_eq!(gs, vec![10.0 / 3.0, 10.0 / 3.0, 5.0, 5.0, 5.0]);
    let (gi, gs) = sr(
        &args.0,
        &args.1,
        &args.2,
        &args.3,
        Reduce::Mean,
        false,
        Parity::Correct,
    );
    assert_eq!(gi, vec![0.0, 0.0, 30.0, 40.0]);
    assert_eq!(gs, vec![5.0, 5.0, 20.0 / 3.0, 20.0 / 3.0, 20.0 / 3.0]);
}

#[test]
fn gather_duplicates_accumulate() {
    // torch_semantics.md §A.1.
    let idx = array![[0i64, 0], [1, 3], [3, 3]];
    let gx = grad::gather(&ndarray::Array2::<f64>::ones((3, 2)), (3, 4), 1, &idx).unwrap();
    assert_eq!(
        gx,
        array![
            [2.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 1.0],
            [0.0, 0.0, 0.0, 2.0]
        ]
    );
}

#[test]
fn scatter_duplicates_each_get_the_gradient() {
    // torch_semantics.md §A.2: zeros(3).scatter(0, [0,0], [1,2]) → src.grad [1, 1].
    let g = grad::scatter(&array![1.0f64, 1.0, 1.0], 0, &array![0i64, 0], [2]).unwrap();
    assert_eq!(g.src, array![1.0, 1.0]);
    assert_eq!(g.input, array![0.0, 1.0, 1.0]);
}
