//! The broadcasting ops (`gather_broadcast`, `scatter*_broadcast`) against plain references: a
//! definition loop for gather, and for the scatters the existing ops on the index and src
//! materialised to the broadcast extent (done here, in the test only). Random shapes with size-1
//! and size-0 axes, every reduction, `i64`/`f32`/`f16`, negative-stride and stride-0 views; every
//! error kind, failed in-place calls leaving the destination unchanged; the gradients by finite
//! differences.

mod common;

use std::fmt::Debug;

use common::{Layout, Strided, layout, positions};
use gather::{Element, ErrorKind, Options, Reduce};
use half::f16;
use ndarray::{Array2, Array3, ArrayD, ArrayViewD, Axis, IxDyn, array, s};
use proptest::prelude::*;

/// A random broadcasting problem. `full` is the broadcast extent on the non-dim axes (the
/// destination's shape there); each of input/index/src has on each such axis either that size or
/// 1. Along `dim` the input/destination has `x_dim`, the index `k`, src `k` or 1.
#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    neg_dim: bool,
    full: Vec<usize>,
    x_dim: usize,
    k: usize,
    x_one: Vec<bool>,
    idx_one: Vec<bool>,
    src_one: Vec<bool>,
    layouts: [Layout; 3],
    seeds: Vec<u32>,
    values: Vec<i64>,
}

fn case(max_full: usize, min_full: usize) -> impl Strategy<Value = Case> {
    (1usize..=4)
        .prop_flat_map(move |nd| {
            (
                0..nd,
                any::<bool>(),
                proptest::collection::vec(min_full..=max_full, nd),
                1usize..=5,
                min_full..=4,
                proptest::collection::vec(any::<bool>(), nd),
                proptest::collection::vec(any::<bool>(), nd),
                proptest::collection::vec(any::<bool>(), nd),
                [layout(nd), layout(nd), layout(nd)],
                proptest::collection::vec(any::<u32>(), 16),
                proptest::collection::vec(-5i64..=5, 64),
            )
        })
        .prop_map(
            |(dim, neg_dim, full, x_dim, k, x_one, idx_one, src_one, layouts, seeds, values)| {
                Case {
                    dim,
                    neg_dim,
                    full,
                    x_dim,
                    k,
                    x_one,
                    idx_one,
                    src_one,
                    layouts,
                    seeds,
                    values,
                }
            },
        )
}

impl Case {
    fn nd(&self) -> usize {
        self.full.len()
    }
    fn dim_arg(&self) -> isize {
        if self.neg_dim {
            self.dim as isize - self.nd() as isize
        } else {
            self.dim as isize
        }
    }
    fn sized(&self, one: &[bool], on_dim: usize) -> Vec<usize> {
        (0..self.nd())
            .map(|d| {
                if d == self.dim {
                    on_dim
                } else if one[d] {
                    1
                } else {
                    self.full[d]
                }
            })
            .collect()
    }
    /// gather: the input's shape.
    fn x_shape(&self) -> Vec<usize> {
        self.sized(&self.x_one, self.x_dim)
    }
    fn idx_shape(&self) -> Vec<usize> {
        self.sized(&self.idx_one, self.k)
    }
    /// scatter: the destination's shape.
    fn dst_shape(&self) -> Vec<usize> {
        self.sized(&vec![false; self.nd()], self.x_dim)
    }
    fn src_shape(&self) -> Vec<usize> {
        let on_dim = if self.src_one[self.dim] { 1 } else { self.k };
        self.sized(&self.src_one, on_dim)
    }
    /// The scatter extent: `full` with `k` on `dim`.
    fn extent(&self) -> Vec<usize> {
        self.sized(&vec![false; self.nd()], self.k)
    }
    /// Index values, valid along `dim`.
    fn index_values(&self) -> Vec<i64> {
        (0..64)
            .map(|i| {
                (self.seeds[i % 16]
                    .wrapping_mul(2654435761)
                    .wrapping_add(i as u32)
                    % self.x_dim as u32) as i64
            })
            .collect()
    }
}

/// The logical view of a `Strided` (stride-0 axes included).
fn logical<T: Clone>(s: &Strided<T>) -> ArrayD<T> {
    s.sliced().broadcast(s.shape()).unwrap().to_owned()
}

/// `a` with its size-1 axes read at 0: the element of `a` at position `p` of a broadcast shape.
fn at<T: Copy>(a: &ArrayViewD<'_, T>, p: &[usize]) -> T {
    let q: Vec<usize> = p
        .iter()
        .zip(a.shape())
        .map(|(&i, &n)| if n == 1 { 0 } else { i })
        .collect();
    a[IxDyn(&q)]
}

/// `a` materialised (copied) to `shape`.
fn materialise<T: Clone>(a: &ArrayViewD<'_, T>, shape: &[usize]) -> ArrayD<T> {
    a.broadcast(IxDyn(shape)).unwrap().to_owned()
}

/// A copy of `a` (logically equal) whose axis 0 has a negative stride.
fn reversed_layout<T: Clone>(a: &ArrayD<T>) -> ArrayD<T> {
    if a.ndim() == 0 || a.shape()[0] == 0 {
        return a.clone();
    }
    let mut r = a
        .slice_axis(Axis(0), ndarray::Slice::new(0, None, -1))
        .to_owned();
    r.invert_axis(Axis(0));
    r
}

fn check_gather<T: Element + Debug>(
    c: &Case,
    conv: impl Fn(i64) -> T,
) -> Result<(), TestCaseError> {
    let data: Vec<T> = c.values.iter().map(|&v| conv(v)).collect();
    let x_s = Strided::new(&c.x_shape(), &c.layouts[0], &data);
    let i_s = Strided::new(&c.idx_shape(), &c.layouts[1], &c.index_values());
    let (x0, i0) = (x_s.sliced(), i_s.sliced());
    let (x, idx) = (
        x0.broadcast(x_s.shape()).unwrap(),
        i0.broadcast(i_s.shape()).unwrap(),
    );
    let got = gather::Options::new()
        .broadcast(true)
        .gather(&x, c.dim_arg(), &idx)
        .unwrap();
    // The definition, with the output shape worked out here.
    let out_shape: Vec<usize> = (0..c.nd())
        .map(|d| {
            if d == c.dim {
                c.k
            } else if x.shape()[d] == 1 {
                idx.shape()[d]
            } else {
                x.shape()[d]
            }
        })
        .collect();
    prop_assert_eq!(got.shape(), &out_shape[..]);
    for p in positions(&out_shape) {
        // The input's coordinate: the index value on dim, 0 on the input's size-1 axes.
        let q: Vec<usize> = p
            .iter()
            .zip(x.shape())
            .enumerate()
            .map(|(d, (&i, &n))| {
                if d == c.dim {
                    at(&idx, &p) as usize
                } else if n == 1 {
                    0
                } else {
                    i
                }
            })
            .collect();
        prop_assert_eq!(got[IxDyn(&p)], x[IxDyn(&q)]);
    }
    // And torch's spelling: gather over the materialised expands.
    let mut xs = out_shape.clone();
    xs[c.dim] = c.x_dim;
    let expect = gather::gather(
        &materialise(&x, &xs),
        c.dim_arg(),
        &materialise(&idx, &out_shape),
    )
    .unwrap();
    prop_assert_eq!(got, expect);
    Ok(())
}

/// 0: scatter, 1: scatter_add, 2..12: scatter_reduce (5 reductions x include_self).
fn mode(which: usize) -> (Option<Reduce>, bool) {
    let reduces = [
        Reduce::Sum,
        Reduce::Prod,
        Reduce::Mean,
        Reduce::Amax,
        Reduce::Amin,
    ];
    match which {
        0 => (None, true),
        1 => (Some(Reduce::Sum), true),
        w => (Some(reduces[(w - 2) / 2]), w % 2 == 0),
    }
}

fn check_scatter<T: Element + Debug>(
    c: &Case,
    which: usize,
    conv: impl Fn(i64) -> T,
) -> Result<(), TestCaseError> {
    let data: Vec<T> = c.values.iter().map(|&v| conv(v)).collect();
    let rdata: Vec<T> = c.values.iter().rev().map(|&v| conv(v)).collect();
    let before = logical(&Strided::new(&c.dst_shape(), &c.layouts[0], &data));
    let i_s = Strided::new(&c.idx_shape(), &c.layouts[1], &c.index_values());
    let s_s = Strided::new(&c.src_shape(), &c.layouts[2], &rdata);
    let (i0, s0) = (i_s.sliced(), s_s.sliced());
    let (idx, src) = (
        i0.broadcast(i_s.shape()).unwrap(),
        s0.broadcast(s_s.shape()).unwrap(),
    );
    let d = c.dim_arg();
    let e = c.extent();
    let (ie, se) = (materialise(&idx, &e), materialise(&src, &e));
    let (r, incl) = mode(which);
    let expect = match (which, r) {
        (0, _) => gather::scatter(&before, d, &ie, &se),
        (1, _) => gather::scatter_add(&before, d, &ie, &se),
        (_, Some(r)) => gather::scatter_reduce(&before, d, &ie, &se, r, incl),
        _ => unreachable!(),
    }
    .unwrap();
    // In place, into a destination with a negative stride.
    let mut dst = reversed_layout(&before);
    match (which, r) {
        (0, _) => gather::Options::new()
            .broadcast(true)
            .scatter_inplace(&mut dst, d, &idx, &src),
        (1, _) => gather::Options::new()
            .broadcast(true)
            .scatter_add_inplace(&mut dst, d, &idx, &src),
        (_, Some(r)) => gather::Options::new()
            .broadcast(true)
            .scatter_reduce_inplace(&mut dst, d, &idx, &src, r, incl),
        _ => unreachable!(),
    }
    .unwrap();
    prop_assert_eq!(&dst, &expect);
    // Out of place.
    let out = match (which, r) {
        (0, _) => gather::Options::new()
            .broadcast(true)
            .scatter(&before, d, &idx, &src),
        (1, _) => gather::Options::new()
            .broadcast(true)
            .scatter_add(&before, d, &idx, &src),
        (_, Some(r)) => gather::Options::new()
            .broadcast(true)
            .scatter_reduce(&before, d, &idx, &src, r, incl),
        _ => unreachable!(),
    }
    .unwrap();
    prop_assert_eq!(&out, &expect);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn gather_broadcast_matches_the_definition_and_gather_over_expands(c in case(4, 0)) {
        check_gather(&c, |v| v)?;
        check_gather(&c, |v| v as f32 * 0.5)?;
        check_gather(&c, |v| f16::from_f32(v as f32 * 0.25))?;
    }

    #[test]
    fn scatter_family_broadcast_matches_scatter_over_expands(c in case(4, 0), which in 0usize..12) {
        check_scatter(&c, which, |v| v)?;
        check_scatter(&c, which, |v| v as f32 * 0.5 + 0.25)?;
        check_scatter(&c, which, |v| f16::from_f32(v as f32 * 0.75))?;
    }

    #[test]
    fn a_bad_index_value_is_reported_and_changes_nothing(c in case(3, 1), which in 0usize..12, neg in any::<bool>(), at_ in any::<u16>()) {
        // Every axis non-empty and k >= 1, so the broadcast reads every index value.
        prop_assume!(c.k >= 1);
        let mut values = c.index_values();
        let bad = if neg { -1 } else { c.x_dim as i64 };
        let base = Strided::new(&c.idx_shape(), &c.layouts[1], &values);
        // `Strided` cycles the 64 values over its base, which can hold more elements than that.
        let n0 = base.sliced().len().min(values.len());
        values[at_ as usize % n0] = bad;
        let i_s = Strided::new(&c.idx_shape(), &c.layouts[1], &values);
        let i0 = i_s.sliced();
        let idx = i0.broadcast(i_s.shape()).unwrap();
        prop_assume!(idx.iter().any(|&v| v == bad));

        let e = gather::Options::new().broadcast(true).gather(&logical(&Strided::new(&c.x_shape(), &c.layouts[0], &c.values)), c.dim_arg(), &idx).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        prop_assert_eq!(e.index_value(), Some(bad));
        let coord = e.coordinate().unwrap();
        prop_assert_eq!(idx[IxDyn(coord)], bad, "coordinate {:?} is a position of the index holding the bad value", coord);

        let before: ArrayD<f32> = logical(&Strided::new(&c.dst_shape(), &c.layouts[0], &c.values)).mapv(|v| v as f32);
        let src: ArrayD<f32> = ArrayD::ones(IxDyn(&c.src_shape()));
        let mut dst = reversed_layout(&before);
        let (r, incl) = mode(which);
        let res = match (which, r) {
            (0, _) => gather::Options::new().broadcast(true).scatter_inplace(&mut dst, c.dim_arg(), &idx, &src),
            (1, _) => gather::Options::new().broadcast(true).scatter_add_inplace(&mut dst, c.dim_arg(), &idx, &src),
            (_, Some(r)) => gather::Options::new().broadcast(true).scatter_reduce_inplace(&mut dst, c.dim_arg(), &idx, &src, r, incl),
            _ => unreachable!(),
        };
        let e = res.unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
        prop_assert_eq!(e.index_value(), Some(bad));
        prop_assert_eq!(&dst, &before);
    }
}

#[test]
fn the_topk_and_shared_table_idioms_need_no_expand() {
    let patches = Array3::from_shape_fn((3, 7, 5), |(b, n, d)| (100 * b + 10 * n + d) as f32);
    let keep = array![[6i64, 0], [3, 3], [1, 5]];
    let got = gather::Options::new()
        .broadcast(true)
        .gather(&patches, 1, &keep.view().insert_axis(Axis(2)))
        .unwrap();
    let expanded = keep.view().insert_axis(Axis(2));
    let expanded = expanded.broadcast((3, 2, 5)).unwrap();
    assert_eq!(got, gather::gather(&patches, 1, &expanded).unwrap());
    // The same through select_batched.
    assert_eq!(
        got.into_dyn(),
        gather::select_batched(&patches, 1, &keep, 1).unwrap()
    );

    // input [1, N, D] shared by a batch of index [B, K, D].
    let table = Array3::from_shape_fn((1, 4, 2), |(_, n, d)| (10 * n + d) as i32);
    let idx = Array3::from_shape_fn((3, 2, 2), |(b, k, d)| ((b + k + d) % 4) as i64);
    let got = gather::Options::new()
        .broadcast(true)
        .gather(&table, 1, &idx)
        .unwrap();
    for ((b, k, d), &v) in got
        .clone()
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap()
        .indexed_iter()
    {
        assert_eq!(v, table[[0, idx[[b, k, d]] as usize, d]]);
    }
}

#[test]
fn row_ids_scatter_whole_rows_bitwise_like_the_expanded_index() {
    // Large enough for the row-index fast path of the scatter (slices of 64, n * 64 >= GRAIN): the
    // result must equal the general loop over a materialised index, bit for bit.
    let (n, m, dd) = (3000usize, 211usize, 64usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let ids: ndarray::Array2<i64> = Array2::from_shape_fn((n, 1), |_| (next() % m as u64) as i64);
    let msgs = Array2::from_shape_fn((n, dd), |_| (next() % 2001) as f32 / 997.0 - 1.0);
    let zeros = Array2::<f32>::zeros((m, dd));
    let wide = ids.broadcast((n, dd)).unwrap().to_owned();
    for (r, incl) in [
        (Reduce::Sum, true),
        (Reduce::Mean, false),
        (Reduce::Amax, false),
        (Reduce::Prod, true),
    ] {
        let got = gather::Options::new()
            .broadcast(true)
            .scatter_reduce(&zeros, 0, &ids, &msgs, r, incl)
            .unwrap();
        let expect = gather::scatter_reduce(&zeros, 0, &wide, &msgs, r, incl).unwrap();
        assert!(
            got.iter()
                .zip(expect.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{r:?}"
        );
    }
    let got = gather::Options::new()
        .broadcast(true)
        .scatter_add(&zeros, 0, &ids, &msgs)
        .unwrap();
    assert_eq!(got, gather::scatter_add(&zeros, 0, &wide, &msgs).unwrap());
    // The same bits on one thread.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let serial = one.install(|| {
        gather::Options::new()
            .broadcast(true)
            .scatter_add(&zeros, 0, &ids, &msgs)
            .unwrap()
    });
    assert!(
        got.iter()
            .zip(serial.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    let got = gather::Options::new()
        .broadcast(true)
        .scatter(&zeros, 0, &ids, &msgs)
        .unwrap();
    assert_eq!(got, gather::scatter(&zeros, 0, &wide, &msgs).unwrap());
}

#[test]
fn every_error_kind_with_its_numbers() {
    let x = Array3::<f32>::zeros((5, 4, 2));
    // DimOutOfRange.
    let e = gather::Options::new()
        .broadcast(true)
        .gather(&x, -4, &Array3::<i64>::zeros((1, 1, 1)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    let mut d = Array2::<f32>::zeros((4, 3));
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_add_inplace(&mut d, 2, &array![[0i64]], &array![[1.0f32]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DimOutOfRange);
    // RankMismatch: index, then src.
    let e = gather::Options::new()
        .broadcast(true)
        .gather(&x, 1, &array![[0i64, 1]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RankMismatch);
    assert!(
        e.to_string()
            .contains("index has 2 dims [1, 2], input has 3 dims [5, 4, 2]"),
        "{e}"
    );
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_inplace(&mut d, 0, &array![0i64], &array![[1.0f32]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RankMismatch);
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_inplace(&mut d, 0, &array![[0i64]], &array![1.0f32])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RankMismatch);
    assert!(e.to_string().contains("src"), "{e}");
    // ShapeMismatch: gather non-dim, scatter index non-dim, src non-dim, src along dim.
    let e = gather::Options::new()
        .broadcast(true)
        .gather(&x, 1, &Array3::<i64>::zeros((3, 2, 1)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert_eq!(
        e.message(),
        "gather_broadcast: index has size 3 on axis 0 but input has 5; sizes must be equal or 1 to broadcast (input [5, 4, 2], index [3, 2, 1], dim 1)"
    );
    assert!(e.hint().is_some());
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_add_inplace(&mut d, 0, &array![[0i64, 1]], &array![[1.0f32]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(
        e.to_string()
            .contains("index has size 2 on axis 1 but self has 3"),
        "{e}"
    );
    assert!(e.hint().unwrap().contains("slice_mut"));
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_add_inplace(
            &mut d,
            0,
            &array![[0i64], [1]],
            &Array2::<f32>::ones((3, 3)),
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("src has size 3 on axis 0 (the scatter dim) but index has 2"),
        "{e}"
    );
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_add_inplace(&mut d, 0, &array![[0i64]], &Array2::<f32>::ones((1, 2)))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("src has size 2 on axis 1 but self has 3"),
        "{e}"
    );
    // PyTorch's scatter accepts an index smaller than self; the broadcasting form does not.
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_inplace(&mut d, 0, &array![[0i64, 1]], &array![[1.0f32, 2.0]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    // ...but a slice of self is fine.
    gather::Options::new()
        .broadcast(true)
        .scatter_inplace(
            &mut d.slice_mut(s![.., ..2]),
            0,
            &array![[0i64, 1]],
            &array![[1.0f32, 2.0]],
        )
        .unwrap();
    assert_eq!(
        d,
        array![
            [1.0, 0.0, 0.0],
            [0.0, 2.0, 0.0],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0]
        ]
    );
    // IndexOutOfBounds, with the value and its position.
    let e = gather::Options::new()
        .broadcast(true)
        .gather(&x, 1, &array![[[0i64], [4]]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    assert_eq!(e.index_value(), Some(4));
    assert_eq!(e.coordinate(), Some(&[0usize, 1, 0][..]));
    // InvalidArgument: mean of bool, as scatter_reduce.
    let mut b = array![[false, true]];
    let e = gather::Options::new()
        .broadcast(true)
        .scatter_reduce_inplace(
            &mut b,
            0,
            &array![[0i64]],
            &array![[true]],
            Reduce::Mean,
            true,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(b, array![[false, true]]);
}

#[test]
fn empty_extents_do_nothing_and_read_no_index_value() {
    // self has 0 columns: the [2, 1] index broadcasts to [2, 0], so its (bad) values are never read.
    let mut d = Array2::<i32>::zeros((3, 0));
    gather::Options::new()
        .broadcast(true)
        .scatter_add_inplace(&mut d, 0, &array![[7i64], [9]], &array![[1]])
        .unwrap();
    let out = gather::Options::new()
        .broadcast(true)
        .gather(&Array2::<i32>::zeros((3, 0)), 0, &array![[7i64], [9]])
        .unwrap();
    assert_eq!(out.shape(), &[2, 0]);
    // An index with 0 entries along dim.
    let out = gather::Options::new()
        .broadcast(true)
        .gather(&array![[1, 2]], 1, &Array2::<i64>::zeros((1, 0)))
        .unwrap();
    assert_eq!(out.shape(), &[1, 0]);
}

// ---- Gradients, by finite differences in f64. ----

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

/// Pairwise distinct values, 0.013 apart (no ties within a finite-difference step), from a running
/// count that starts at `offset`: arrays made with offsets far apart share no value.
fn distinct(shape: &[usize], offset: usize) -> ArrayD<f64> {
    let mut k = offset;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        k += 1;
        k as f64 * 0.013 - 2.0
    })
}

/// An index whose values are distinct within each lane along `dim` (no overwritten writes).
fn unique_index(c: &Case, shape: &[usize]) -> ArrayD<i64> {
    let n = c.x_dim;
    let mut out = ArrayD::<i64>::zeros(IxDyn(shape));
    for (lane_no, mut lane) in out.lanes_mut(Axis(c.dim)).into_iter().enumerate() {
        let mut perm: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            let j = (c.seeds[(lane_no + i) % 16] as usize + lane_no) % (i + 1);
            perm.swap(i, j);
        }
        for (slot, v) in lane.iter_mut().zip(perm) {
            *slot = v;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn gather_broadcast_vjp_matches_finite_differences(c in case(3, 1)) {
        let xs = c.x_shape();
        let idx = ArrayD::from_shape_vec(IxDyn(&c.idx_shape()), {
            let n: usize = c.idx_shape().iter().product();
            c.index_values().into_iter().cycle().take(n).collect()
        }).unwrap();
        let x = distinct(&xs, 0);
        let out = gather::Options::new().broadcast(true).gather(&x, c.dim_arg(), &idx).unwrap();
        let v = distinct(out.shape(), 500);
        let dx = Options::new().broadcast(true).grad().gather(&v, x.raw_dim(), c.dim_arg(), &idx).unwrap();
        check_fd("gather_broadcast", &x, |x| gather::Options::new().broadcast(true).gather(x, c.dim_arg(), &idx).unwrap(), &v, &dx)?;
    }

    #[test]
    fn scatter_broadcast_vjps_match_finite_differences(c in case(3, 1), which in 0usize..12) {
        let mut c = c;
        c.k = c.k.min(c.x_dim);
        let idx = unique_index(&c, &c.idx_shape());
        let (x, src) = (distinct(&c.dst_shape(), 0), distinct(&c.src_shape(), 300));
        let d = c.dim_arg();
        let (r, incl) = mode(which);
        let fwd = |x: &ArrayD<f64>, s: &ArrayD<f64>| match (which, r) {
            (0, _) => gather::Options::new().broadcast(true).scatter(x, d, &idx, s).unwrap(),
            (1, _) => gather::Options::new().broadcast(true).scatter_add(x, d, &idx, s).unwrap(),
            (_, Some(r)) => gather::Options::new().broadcast(true).scatter_reduce(x, d, &idx, s, r, incl).unwrap(),
            _ => unreachable!(),
        };
        let out = fwd(&x, &src);
        let v = distinct(out.shape(), 700);
        let g = match (which, r) {
            (0, _) => Options::new().broadcast(true).grad().scatter(&v, d, &idx, src.raw_dim()).unwrap(),
            (1, _) => Options::new().broadcast(true).grad().scatter_add(&v, d, &idx, src.raw_dim()).unwrap(),
            (_, Some(r)) => Options::new().broadcast(true).grad().scatter_reduce(&v, &x, d, &idx, &src, r, incl).unwrap(),
            _ => unreachable!(),
        };
        check_fd("d self", &x, |x| fwd(x, &src), &v, &g.input)?;
        check_fd("d src", &src, |s| fwd(&x, s), &v, &g.src)?;
    }
}

#[test]
fn half_gradients_sum_broadcast_axes_in_f32() {
    // src [1, 1] broadcast over 3000 rows, all landing on self[0][0]: d src = 3000 exactly.
    let g = ndarray::Array2::from_elem((1, 1), f16::ONE);
    let idx = Array2::<i64>::zeros((3000, 1));
    let r = Options::new()
        .broadcast(true)
        .grad()
        .scatter_add(&g, 0, &idx, (1, 1))
        .unwrap();
    assert_eq!(r.src[[0, 0]], f16::from_f32(3000.0));
    // A shared table read 3000 times.
    let g = ndarray::Array2::from_elem((3000, 1), f16::ONE);
    let dx = Options::new()
        .broadcast(true)
        .grad()
        .gather(&g, (1, 2), 1, &Array2::<i64>::ones((3000, 1)))
        .unwrap();
    assert_eq!(dx, array![[f16::ZERO, f16::from_f32(3000.0)]]);
}

#[test]
fn gradient_errors_name_the_gradient_op() {
    let e = Options::new()
        .broadcast(true)
        .grad()
        .gather(&array![[1.0f64]], (2, 3), 1, &array![[0i64], [1]])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
    assert!(
        e.to_string()
            .contains("grad::gather_broadcast: grad_output"),
        "{e}"
    );
    let e = Options::new()
        .broadcast(true)
        .grad()
        .scatter_add(&array![[1.0f64, 2.0]], 0, &array![[3i64]], (1, 1))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
    let e = Options::new()
        .broadcast(true)
        .grad()
        .scatter(&array![[1.0f64, 2.0]], 0, &array![[0i64]], (1, 3))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ShapeMismatch);
}
