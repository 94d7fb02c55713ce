//! The read ops (gather, take_along_dim, select_batched, index_select, take, gather_broadcast) on
//! random shapes,
//! layouts, dims, index types and index values. Every call must return Ok or a typed error;
//! small Ok results of gather, index_select, take and gather_broadcast are checked against a plain
//! reference, and a gather or gather_broadcast that fails although its call was valid is a bug too.
#![no_main]

use gather::IndexElem;
use gather_fuzz::{Backing, Bytes, Mode};
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayViewD, Dimension, IxDyn};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    match b.below(4) {
        0 => run::<i64>(&mut b, |v| v),
        1 => run::<i32>(&mut b, |v| v as i32),
        2 => run::<u8>(&mut b, |v| v as u8),
        _ => run::<i16>(&mut b, |v| v as i16),
    }
});

/// Lengths of broadcast axes that no buffer could hold: the op must refuse, not abort.
/// (2^40 f32 elements are 4 TiB; an output of a few GiB would be legitimate, just slow.)
const HUGE: [usize; 3] = [1 << 40, 1 << 44, 1 << 62];

fn run<I: IndexElem>(b: &mut Bytes, conv: fn(i64) -> I) {
    let nd = b.below(5);
    let in_shape = b.shape(nd);
    let in_layout = b.layout(nd, true);
    let input = Backing::new(&in_shape, &in_layout, |k| k as f32);
    let op = b.below(6);
    let dim = b.dim(nd);
    let d = if nd == 0 {
        0
    } else {
        dim.rem_euclid(nd as isize) as usize
    };
    let size_d = in_shape.get(d).copied().unwrap_or(1);

    // The index: usually shaped to fit (same rank, non-dim axes within the input's), sometimes
    // anything.
    let (idx_nd, mut idx_shape) = match (op, b.below(8)) {
        (3, _) => {
            let nd = b.below(2);
            (nd, b.shape(nd))
        }
        (_, 0) => {
            let nd = b.below(5);
            (nd, b.shape(nd))
        }
        // gather_broadcast: off `dim`, each axis the input's size or 1 (any size where the
        // input's is 1).
        (5, _) => {
            let s: Vec<usize> = (0..nd)
                .map(|a| match (a == d, in_shape[a], b.below(3)) {
                    (true, _, _) => b.below(6),
                    (false, 1, _) => b.below(4),
                    (false, _, 0) => 1,
                    (false, n, _) => n,
                })
                .collect();
            (nd, s)
        }
        _ => {
            let mut s: Vec<usize> = in_shape.iter().map(|&n| b.below(n + 1)).collect();
            if nd > 0 {
                s[d] = b.below(6);
            }
            (nd, s)
        }
    };
    let mut idx_layout = b.layout(idx_nd, true);
    if idx_nd > 0 && b.below(16) == 0 {
        let a = b.below(idx_nd);
        idx_shape[a] = HUGE[b.below(HUGE.len())];
        idx_layout.modes[a] = Mode::Broadcast;
    }
    let values: Vec<i64> = (0..64).map(|_| b.index_value(size_d)).collect();
    let index = Backing::new(&idx_shape, &idx_layout, |k| conv(values[k % values.len()]));
    let batch_dims = b.below(3);

    input.with_view(|x| {
        index.with_view(|i| match op {
            0 => {
                let r = gather::gather(&x, dim, &i);
                check_gather(&x, dim, &i, r.as_ref().ok());
                if r.is_err() && gather_is_valid(&x, dim, &i) {
                    panic!("gather refused a valid call: {}", r.unwrap_err());
                }
            }
            1 => {
                let _ = gather::take_along_dim(&x, &i, Some(dim));
                let _ = gather::take_along_dim(&x, &i, None);
            }
            2 => {
                if let Ok(out) = gather::select_batched(&x, dim, &i, batch_dims) {
                    // input.shape[:axis] + index.shape[batch_dims:] + input.shape[axis+1:]
                    let mut want = in_shape[..d].to_vec();
                    want.extend_from_slice(&i.shape()[batch_dims.min(i.ndim())..]);
                    want.extend_from_slice(&in_shape[(d + 1).min(nd)..]);
                    assert_eq!(out.shape(), &want[..], "select_batched output shape");
                }
            }
            3 => {
                if let Ok(out) = gather::index_select(&x, dim, &i) {
                    check_index_select(&x, d, &i, &out);
                }
            }
            4 => {
                if let Ok(out) = gather::take(&x, &i) {
                    check_take(&x, &i, &out);
                }
            }
            _ => {
                let r = gather::Options::new().broadcast(true).gather(&x, dim, &i);
                let valid = broadcast_is_valid(&x, dim, &i);
                match r {
                    Ok(out) => check_gather_broadcast(&x, dim, &i, &out),
                    Err(e) if valid => panic!("gather_broadcast refused a valid call: {e}"),
                    Err(_) => {}
                }
            }
        })
    });
}

/// Whether a gather call satisfies every PyTorch rule (so it must succeed).
fn gather_is_valid<I: IndexElem>(x: &ArrayViewD<f32>, dim: isize, i: &ArrayViewD<I>) -> bool {
    let nd = x.ndim().max(1) as isize;
    if dim < -nd || dim >= nd || x.ndim().max(1) != i.ndim().max(1) {
        return false;
    }
    if i.is_empty() {
        return true;
    }
    if i.len() > 1 << 24 {
        // Too big to check here (and maybe to allocate): either answer is acceptable.
        return false;
    }
    let d = dim.rem_euclid(nd) as usize;
    let xs = if x.ndim() == 0 {
        vec![1]
    } else {
        x.shape().to_vec()
    };
    let is = if i.ndim() == 0 {
        vec![1]
    } else {
        i.shape().to_vec()
    };
    let fits = (0..xs.len()).all(|a| a == d || is[a] <= xs[a]);
    fits && i.iter().all(|v| (0..xs[d] as i64).contains(&v.to_i64()))
}

fn check_gather<I: IndexElem>(
    x: &ArrayViewD<f32>,
    dim: isize,
    i: &ArrayViewD<I>,
    out: Option<&ndarray::ArrayD<f32>>,
) {
    let Some(out) = out else { return };
    assert_eq!(out.shape(), i.shape(), "gather output shape");
    if out.len() > 4096 {
        return;
    }
    let nd = x.ndim().max(1) as isize;
    let d = dim.rem_euclid(nd) as usize;
    for (p, &got) in out.indexed_iter() {
        let v = i[&p].to_i64();
        let want = if x.ndim() == 0 {
            assert_eq!(v, 0, "gather accepted index {v} on a 0-d input");
            x[IxDyn(&[])]
        } else {
            // A 0-d index (with a 1-d input) gives a 0-d output: its one position is [0].
            let mut c = if p.ndim() == 0 {
                vec![0]
            } else {
                p.slice().to_vec()
            };
            assert!(
                v >= 0 && (v as usize) < x.shape()[d],
                "gather accepted index {v} for size {}",
                x.shape()[d]
            );
            c[d] = v as usize;
            x[IxDyn(&c)]
        };
        assert_eq!(got.to_bits(), want.to_bits(), "gather at {:?}", p.slice());
    }
}

fn check_index_select<I: IndexElem>(
    x: &ArrayViewD<f32>,
    d: usize,
    i: &ArrayViewD<I>,
    out: &ndarray::ArrayD<f32>,
) {
    // (An empty output can come from an index of 2^44 broadcast positions: not collected here.)
    if out.len() > 4096 || out.is_empty() || i.len() > 4096 || x.ndim() == 0 {
        return;
    }
    let ids: Vec<i64> = i.iter().map(|v| v.to_i64()).collect();
    for (p, &got) in out.indexed_iter() {
        let mut c = p.slice().to_vec();
        let v = ids[c[d]];
        assert!(
            v >= 0 && (v as usize) < x.shape()[d],
            "index_select accepted {v}"
        );
        c[d] = v as usize;
        assert_eq!(got.to_bits(), x[IxDyn(&c)].to_bits(), "index_select");
    }
}

fn check_take<I: IndexElem>(x: &ArrayViewD<f32>, i: &ArrayViewD<I>, out: &ndarray::ArrayD<f32>) {
    assert_eq!(out.shape(), i.shape(), "take output shape");
    if out.len() > 4096 {
        return;
    }
    let flat: Vec<f32> = x.iter().copied().collect();
    let n = flat.len() as i64;
    for (v, &got) in i.iter().zip(out.iter()) {
        let v = v.to_i64();
        assert!(v >= -n && v < n, "take accepted {v} for {n} elements");
        let want = flat[v.rem_euclid(n) as usize];
        assert_eq!(got.to_bits(), want.to_bits(), "take");
    }
}

/// Whether a gather_broadcast call satisfies its rule (so it must succeed), for calls small enough
/// to check.
fn broadcast_is_valid<I: IndexElem>(x: &ArrayViewD<f32>, dim: isize, i: &ArrayViewD<I>) -> bool {
    let nd = x.ndim().max(1) as isize;
    if dim < -nd || dim >= nd || x.ndim().max(1) != i.ndim().max(1) || i.len() > 1 << 24 {
        return false;
    }
    let d = dim.rem_euclid(nd) as usize;
    let (xs, is) = (shape_1d(x.shape()), shape_1d(i.shape()));
    let out: Vec<usize> = (0..xs.len())
        .map(|a| if a == d || xs[a] == 1 { is[a] } else { xs[a] })
        .collect();
    let fits = (0..xs.len()).all(|a| a == d || xs[a] == is[a] || xs[a] == 1 || is[a] == 1);
    // ndarray refuses a shape whose nonzero lengths multiply past isize::MAX, even an empty one
    // ([2^62, 0, 5]): such an output is an error, and a big one may be; neither is checked here.
    let nonzero = out
        .iter()
        .filter(|&&n| n != 0)
        .fold(1usize, |acc, &n| acc.saturating_mul(n));
    if !fits || nonzero > 1 << 24 {
        return false;
    }
    // Only the index values that the broadcast reads must be in range.
    out.iter().product::<usize>() == 0 || i.iter().all(|v| (0..xs[d] as i64).contains(&v.to_i64()))
}

fn shape_1d(s: &[usize]) -> Vec<usize> {
    if s.is_empty() { vec![1] } else { s.to_vec() }
}

/// `out[p] = x[p with p[dim] := i[p]]`, size-1 axes of `x` and `i` read at coordinate 0.
fn check_gather_broadcast<I: IndexElem>(
    x: &ArrayViewD<f32>,
    dim: isize,
    i: &ArrayViewD<I>,
    out: &ndarray::ArrayD<f32>,
) {
    let nd = x.ndim().max(1) as isize;
    let d = dim.rem_euclid(nd) as usize;
    let (xs, is) = (shape_1d(x.shape()), shape_1d(i.shape()));
    let want: Vec<usize> = (0..xs.len())
        .map(|a| if a == d || xs[a] == 1 { is[a] } else { xs[a] })
        .collect();
    assert_eq!(shape_1d(out.shape()), want, "gather_broadcast output shape");
    if out.len() > 4096 {
        return;
    }
    let x1 = x.to_shape(IxDyn(&xs)).unwrap();
    let i1 = i.to_shape(IxDyn(&is)).unwrap();
    let out1 = out.to_shape(IxDyn(&want)).unwrap();
    for (p, &got) in out1.indexed_iter() {
        let q: Vec<usize> = (0..is.len())
            .map(|a| if is[a] == 1 { 0 } else { p[a] })
            .collect();
        let v = i1[IxDyn(&q)].to_i64();
        assert!(
            v >= 0 && (v as usize) < xs[d],
            "gather_broadcast accepted index {v} for size {}",
            xs[d]
        );
        let mut c: Vec<usize> = (0..xs.len())
            .map(|a| if xs[a] == 1 { 0 } else { p[a] })
            .collect();
        c[d] = v as usize;
        assert_eq!(
            got.to_bits(),
            x1[IxDyn(&c)].to_bits(),
            "gather_broadcast at {:?}",
            p.slice()
        );
    }
}
