//! The scatter family, in place on strided destinations: scatter (src and value), scatter_add,
//! scatter_reduce (every reduction, include_self both ways), the legacy reduce= forms and the
//! broadcasting scatter, scatter_add and scatter_reduce. Every
//! call returns Ok or a typed error; a failed call leaves the destination bitwise unchanged (rule
//! R4b); small successful scatter_add and amax calls are checked against a plain reference (on
//! integers, so that the sum is exact in any order).
#![no_main]

use gather::{IndexElem, Reduce};
use gather_fuzz::{Backing, Bytes, Mode};
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    match b.below(3) {
        0 => run::<i64>(&mut b, |v| v),
        1 => run::<i32>(&mut b, |v| v as i32),
        _ => run::<u16>(&mut b, |v| v as u16),
    }
});

const REDUCES: [Reduce; 5] = [
    Reduce::Sum,
    Reduce::Prod,
    Reduce::Mean,
    Reduce::Amax,
    Reduce::Amin,
];

fn run<I: IndexElem>(b: &mut Bytes, conv: fn(i64) -> I) {
    let nd = b.below(5);
    let dst_shape = b.shape(nd);
    let dst_layout = b.layout(nd, false);
    let dim = b.dim(nd);
    let d = if nd == 0 {
        0
    } else {
        dim.rem_euclid(nd as isize) as usize
    };
    let size_d = dst_shape.get(d).copied().unwrap_or(1);
    // A quarter of the cases call the broadcasting ops, with shapes mostly fit for them: off `dim`
    // the index is the destination's size or 1.
    let bcast = b.below(4) == 0;
    let (idx_nd, mut idx_shape) = if bcast && b.below(8) != 0 {
        let s: Vec<usize> = (0..nd)
            .map(|a| match (a == d, b.below(3)) {
                (true, _) => b.below(6),
                (false, 0) => 1,
                (false, _) => dst_shape[a],
            })
            .collect();
        (nd, s)
    } else if b.below(8) == 0 {
        let k = b.below(5);
        (k, b.shape(k))
    } else {
        let mut s: Vec<usize> = dst_shape.iter().map(|&n| b.below(n + 1)).collect();
        if nd > 0 {
            s[d] = b.below(6);
        }
        (nd, s)
    };
    let mut idx_layout = b.layout(idx_nd, true);
    // Now and then a long stride-0 axis: a million positions hitting a few destinations.
    if idx_nd > 0 && b.below(32) == 0 {
        let a = b.below(idx_nd);
        idx_shape[a] = 1 << 20;
        idx_layout.modes[a] = Mode::Broadcast;
    }
    let values: Vec<i64> = (0..64).map(|_| b.index_value(size_d)).collect();
    let index = Backing::new(&idx_shape, &idx_layout, |k| conv(values[k % values.len()]));
    // The source: shaped like the index, or off by one somewhere; for the broadcasting ops the
    // extent E (the destination's shape with the index's size on `dim`) or 1 on each axis.
    let mut src_shape = idx_shape.clone();
    if bcast && idx_nd == nd {
        for (a, n) in src_shape.iter_mut().enumerate() {
            if a != d {
                *n = dst_shape[a];
            }
            if b.below(3) == 0 {
                *n = 1;
            }
        }
    }
    if b.below(6) == 0 && !src_shape.is_empty() {
        let a = b.below(src_shape.len());
        src_shape[a] = src_shape[a].saturating_sub(1);
    }
    let mut src_layout = b.layout(src_shape.len(), true);
    // A long axis of src is stride 0 as well: materialised, it would take the fuzzer's time
    // filling hundreds of MB (a 16 s unit, and a timeout, under AddressSanitizer).
    for (a, &n) in src_shape.iter().enumerate() {
        if n >= 1 << 16 {
            src_layout.modes[a] = Mode::Broadcast;
        }
    }
    let src = Backing::new(&src_shape, &src_layout, |k| (k % 7) as i32 - 3);
    let op = if bcast { 9 + b.below(3) } else { b.below(9) };
    let include_self = b.flag();
    let reduce = REDUCES[b.below(5)];

    let mut dst = Backing::new(&dst_shape, &dst_layout, |k| (k % 11) as i32 - 5);
    let before = dst.view_mut().to_owned();
    index.with_view(|i| {
        src.with_view(|s| {
            let mut view = dst.view_mut();
            let r = match op {
                0 => gather::scatter_inplace(&mut view, dim, &i, &s),
                1 => gather::scatter_inplace(&mut view, dim, &i, 9),
                2 => gather::scatter_add_inplace(&mut view, dim, &i, &s),
                3 => gather::scatter_reduce_inplace(
                    &mut view,
                    dim,
                    &i,
                    &s,
                    gather::Reduce::Sum,
                    true,
                ),
                4 => gather::scatter_reduce_inplace(
                    &mut view,
                    dim,
                    &i,
                    &s,
                    gather::Reduce::Prod,
                    true,
                ),
                5 => gather::scatter_reduce_inplace(
                    &mut view,
                    dim,
                    &i,
                    2,
                    gather::Reduce::Prod,
                    true,
                ),
                9 => gather::Options::new()
                    .broadcast(true)
                    .scatter_inplace(&mut view, dim, &i, &s),
                10 => gather::Options::new()
                    .broadcast(true)
                    .scatter_add_inplace(&mut view, dim, &i, &s),
                11 => gather::Options::new()
                    .broadcast(true)
                    .scatter_reduce_inplace(&mut view, dim, &i, &s, reduce, include_self),
                _ => gather::scatter_reduce_inplace(&mut view, dim, &i, &s, reduce, include_self),
            };
            match r {
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    assert_eq!(
                        view.to_owned(),
                        before,
                        "destination changed by a failed {op}: {e}"
                    );
                }
                Ok(()) if op == 2 => check(&before, d, &i, &s, &view.to_owned(), |acc, v| {
                    acc.wrapping_add(v)
                }),
                Ok(()) if op == 10 => {
                    let (bi, bs) = expanded(&before, d, &i, &s);
                    check(&before, d, &bi, &bs, &view.to_owned(), |acc, v| {
                        acc.wrapping_add(v)
                    })
                }
                Ok(()) if op == 11 && reduce == Reduce::Amax && include_self => {
                    let (bi, bs) = expanded(&before, d, &i, &s);
                    check(&before, d, &bi, &bs, &view.to_owned(), |acc, v| acc.max(v))
                }
                Ok(()) if (6..9).contains(&op) && reduce == Reduce::Amax && include_self => {
                    check(&before, d, &i, &s, &view.to_owned(), |acc, v| acc.max(v))
                }
                Ok(()) => {}
            }
        })
    });
}

/// Checks `after` against folding every source element into `before` with `f`.
fn check<I: IndexElem>(
    before: &ArrayD<i32>,
    d: usize,
    i: &ArrayViewD<I>,
    s: &ArrayViewD<i32>,
    after: &ArrayD<i32>,
    f: impl Fn(i32, i32) -> i32,
) {
    if i.len() > 4096 || before.ndim() == 0 {
        return;
    }
    let mut want = before.clone();
    for (p, v) in i.indexed_iter() {
        let v = v.to_i64();
        assert!(
            v >= 0 && (v as usize) < before.shape()[d],
            "scatter accepted index {v}"
        );
        // A 0-d index (with a 1-d destination) has one position, [0].
        let mut c = if p.ndim() == 0 {
            vec![0]
        } else {
            p.slice().to_vec()
        };
        c[d] = v as usize;
        let t = &mut want[IxDyn(&c)];
        *t = f(*t, s[&p]);
    }
    assert_eq!(&want, after, "scatter result differs from the reference");
}

/// The index and src of a successful broadcasting scatter, expanded (as stride-0 views) to its
/// extent: the destination's shape with the index's size on `d`. Panics if they do not broadcast,
/// since the op accepted them.
fn expanded<'a, I: IndexElem>(
    before: &ArrayD<i32>,
    d: usize,
    i: &'a ArrayViewD<'a, I>,
    s: &'a ArrayViewD<'a, i32>,
) -> (ArrayViewD<'a, I>, ArrayViewD<'a, i32>) {
    let mut e = before.shape().to_vec();
    if e.is_empty() {
        e.push(1);
    }
    e[d] = i.shape().get(d).copied().unwrap_or(1);
    let bi = i.broadcast(IxDyn(&e));
    let bs = s.broadcast(IxDyn(&e));
    match (bi, bs) {
        (Some(bi), Some(bs)) => (bi, bs),
        _ => panic!(
            "a broadcasting scatter accepted index {:?} and src {:?} for extent {e:?}",
            i.shape(),
            s.shape()
        ),
    }
}
