//! Property tests: gather and the scatter family against plain reference loops, on random shapes,
//! random layouts (strided, reversed, transposed, stride-0 broadcast) and random indices, including
//! out-of-bounds values that must be errors leaving in-place destinations untouched.

mod common;

use common::{Layout, Strided, layout, positions, shape};
use gather::{ErrorKind, Reduce};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    in_shape: Vec<usize>,
    idx_shape: Vec<usize>,
    dim: usize,
    neg_dim: bool,
    in_layout: Layout,
    idx_layout: Layout,
    src_layout: Layout,
    src_extra: Vec<usize>,
    idx_values: Vec<i64>,
    data: Vec<i64>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=4)
        .prop_flat_map(|nd| {
            (
                shape(nd, 4),
                0..nd,
                proptest::collection::vec(0usize..=4, nd),
                0usize..=5,
                layout(nd),
                layout(nd),
                layout(nd),
                proptest::collection::vec(0usize..=1, nd),
                any::<bool>(),
                proptest::collection::vec(-2i64..9, 1..40),
                proptest::collection::vec(-9i64..10, 1..50),
            )
        })
        .prop_map(
            |(
                in_shape,
                dim,
                extra,
                dimlen,
                in_layout,
                idx_layout,
                src_layout,
                src_extra,
                neg_dim,
                raw,
                data,
            )| {
                let idx_shape: Vec<usize> = (0..in_shape.len())
                    .map(|d| {
                        if d == dim {
                            dimlen
                        } else {
                            extra[d] % (in_shape[d] + 1)
                        }
                    })
                    .collect();
                // Mostly valid values; raw values -2, -1 and >= size make some cases fail.
                let size = in_shape[dim] as i64;
                let idx_values = raw
                    .iter()
                    .map(|&v| {
                        if v >= 0 && size > 0 && v < 7 {
                            v % size
                        } else {
                            v
                        }
                    })
                    .collect();
                Case {
                    in_shape,
                    idx_shape,
                    dim,
                    neg_dim,
                    in_layout,
                    idx_layout,
                    src_layout,
                    src_extra,
                    idx_values,
                    data,
                }
            },
        )
}

impl Case {
    fn dim_arg(&self) -> isize {
        if self.neg_dim {
            self.dim as isize - self.in_shape.len() as isize
        } else {
            self.dim as isize
        }
    }
    fn src_shape(&self) -> Vec<usize> {
        self.idx_shape
            .iter()
            .zip(&self.src_extra)
            .map(|(a, b)| a + b)
            .collect()
    }
    /// The first out-of-bounds index value, in row-major order, if any.
    fn bad_index(&self, idx: &ndarray::ArrayViewD<'_, i64>) -> Option<i64> {
        let size = self.in_shape[self.dim] as i64;
        idx.iter().copied().find(|&v| v < 0 || v >= size)
    }
}

fn target(p: &[usize], dim: usize, v: i64) -> Vec<usize> {
    let mut q = p.to_vec();
    q[dim] = v as usize;
    q
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn gather_matches_reference(c in case()) {
        let x = Strided::new(&c.in_shape, &c.in_layout, &c.data);
        let idx = Strided::new(&c.idx_shape, &c.idx_layout, &c.idx_values);
        let (x0, idx0) = (x.sliced(), idx.sliced());
        let (x, idx) = (x0.broadcast(x.shape()).unwrap(), idx0.broadcast(idx.shape()).unwrap());
        let got = gather::gather(&x, c.dim_arg(), &idx);
        let n: usize = c.idx_shape.iter().product();
        match c.bad_index(&idx) {
            Some(v) if n > 0 => {
                let e = got.unwrap_err();
                prop_assert_eq!(e.kind(), ErrorKind::IndexOutOfBounds);
                prop_assert_eq!(e.index_value(), Some(v));
            }
            _ => {
                let got = got.unwrap();
                prop_assert_eq!(got.shape(), &c.idx_shape[..]);
                for p in positions(&c.idx_shape) {
                    let q = target(&p, c.dim, idx[IxDyn(&p)]);
                    prop_assert_eq!(got[IxDyn(&p)], x[IxDyn(&q)]);
                }
            }
        }
    }

    #[test]
    fn scatter_family_matches_reference(c in case(), which in 0usize..12) {
        let dst0 = Strided::new(&c.in_shape, &c.in_layout, &c.data);
        let mut dst = dst0.sliced().broadcast(dst0.shape()).unwrap().to_owned();
        let before = dst.clone();
        let idx_s = Strided::new(&c.idx_shape, &c.idx_layout, &c.idx_values);
        let idx0 = idx_s.sliced();
        let idx = idx0.broadcast(idx_s.shape()).unwrap();
        let src_s = Strided::new(&c.src_shape(), &c.src_layout, &c.data.iter().rev().copied().collect::<Vec<_>>());
        let src0 = src_s.sliced();
        let src_i = src0.broadcast(src_s.shape()).unwrap();
        let src_f: ArrayD<f64> = src_i.mapv(|v| v as f64 * 0.75);
        let mut dst_f: ArrayD<f64> = dst.mapv(|v| v as f64 * 1.5);
        let before_f = dst_f.clone();
        let reduces = [Reduce::Sum, Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin];
        let d = c.dim_arg();
        // 0: scatter set (i64), 1: scatter_add (f64), 2..12: scatter_reduce (5 reduces x include_self), f64 and i64 alternating.
        let (res, is_float) = match which {
            0 => (gather::scatter_inplace(&mut dst, d, &idx, &src_i), false),
            1 => (gather::scatter_add_inplace(&mut dst_f, d, &idx, &src_f), true),
            w => {
                let r = reduces[(w - 2) / 2];
                let incl = w % 2 == 0;
                if w % 4 < 2 {
                    (gather::scatter_reduce_inplace(&mut dst, d, &idx, &src_i, r, incl), false)
                } else {
                    (gather::scatter_reduce_inplace(&mut dst_f, d, &idx, &src_f, r, incl), true)
                }
            }
        };
        let n: usize = c.idx_shape.iter().product();
        if n > 0 && c.bad_index(&idx).is_some() {
            prop_assert_eq!(res.unwrap_err().kind(), ErrorKind::IndexOutOfBounds);
            prop_assert_eq!(&dst, &before);
            prop_assert!(dst_f.iter().zip(before_f.iter()).all(|(a, b)| a.to_bits() == b.to_bits()));
            return Ok(());
        }
        res.unwrap();
        let (r, incl) = match which {
            0 => (None, true),
            1 => (Some(Reduce::Sum), true),
            w => (Some(reduces[(w - 2) / 2]), w % 2 == 0),
        };
        if is_float {
            let expect = reference(&before_f, &c, &idx, &src_f.view(), r, incl, |a, n| a / n as f64);
            for (a, b) in dst_f.iter().zip(expect.iter()) {
                prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{} vs {}", a, b);
            }
        } else {
            let expect = reference(&before, &c, &idx, &src_i, r, incl, |a: i64, n| a.div_euclid(n as i64));
            prop_assert_eq!(dst, expect);
        }
    }
}

/// The plain sequential scatter: walk the index in row-major order and apply each update.
fn reference<
    T: Copy + PartialOrd + std::ops::Add<Output = T> + std::ops::Mul<Output = T> + From<i8>,
>(
    before: &ArrayD<T>,
    c: &Case,
    idx: &ndarray::ArrayViewD<'_, i64>,
    src: &ndarray::ArrayViewD<'_, T>,
    r: Option<Reduce>,
    include_self: bool,
    div: impl Fn(T, usize) -> T,
) -> ArrayD<T> {
    let mut out = before.clone();
    let mut count = ArrayD::<usize>::zeros(before.raw_dim());
    let targets: Vec<(Vec<usize>, Vec<usize>)> = positions(&c.idx_shape)
        .into_iter()
        .map(|p| (target(&p, c.dim, idx[IxDyn(&p)]), p))
        .collect();
    if !include_self {
        for (q, _) in &targets {
            out[IxDyn(q)] = match r.unwrap() {
                Reduce::Sum | Reduce::Mean => T::from(0),
                Reduce::Prod => T::from(1),
                _ => out[IxDyn(q)],
            };
        }
    }
    let mut first = ArrayD::<bool>::from_elem(before.raw_dim(), !include_self);
    for (q, p) in &targets {
        let s = src[IxDyn(p)];
        let cur = out[IxDyn(q)];
        let fresh = std::mem::replace(&mut first[IxDyn(q)], false);
        out[IxDyn(q)] = match r {
            None => s,
            Some(Reduce::Sum) | Some(Reduce::Mean) => cur + s,
            Some(Reduce::Prod) => cur * s,
            Some(Reduce::Amax) => {
                if fresh || cur < s {
                    s
                } else {
                    cur
                }
            }
            Some(Reduce::Amin) => {
                if fresh || s < cur {
                    s
                } else {
                    cur
                }
            }
            Some(other) => panic!("the reference has no rule for {other:?}"),
        };
        count[IxDyn(q)] += 1;
    }
    if r == Some(Reduce::Mean) {
        for (o, &n) in out.iter_mut().zip(count.iter()) {
            if n > 0 {
                *o = div(*o, n + include_self as usize);
            }
        }
    }
    out
}
