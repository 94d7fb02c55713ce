//! index_add / index_copy / index_fill / index_reduce, put and masked_scatter, in place on
//! strided destinations, with strided (and stride-0) index, source and mask. Every call returns
//! Ok or a typed error, and a failed call leaves the destination bitwise unchanged (rule R4b); a
//! small successful index_add is checked against a plain reference.
#![no_main]

use gather::{IndexElem, Reduce};
use gather_fuzz::{Backing, Bytes};
use libfuzzer_sys::fuzz_target;
use ndarray::{Axis, IxDyn};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    match b.below(3) {
        0 => run::<i64>(&mut b, |v| v),
        1 => run::<i32>(&mut b, |v| v as i32),
        _ => run::<i8>(&mut b, |v| v as i8),
    }
});

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
    let op = b.below(8);
    let total: usize = dst_shape.iter().product();
    // index_*: a 1-D (sometimes 0-d or 2-D) index; put: any shape over the flattened destination.
    let idx_nd = match b.below(8) {
        0 => 0,
        1 => 2,
        _ => 1,
    };
    let idx_shape = b.shape(idx_nd);
    let idx_layout = b.layout(idx_nd, true);
    let bound = if op == 5 || op == 6 { total } else { size_d };
    let values: Vec<i64> = (0..64).map(|_| b.index_value(bound)).collect();
    let index = Backing::new(&idx_shape, &idx_layout, |k| conv(values[k % values.len()]));
    let len = index.with_view(|i| i.len());
    // The source: the destination's shape with the index's length along dim (or off by one).
    let mut src_shape = if op == 5 || op == 6 || op == 7 {
        vec![len + b.below(2)]
    } else {
        let mut s = dst_shape.clone();
        if nd > 0 {
            s[d] = len;
        }
        s
    };
    if b.below(6) == 0 && !src_shape.is_empty() {
        let a = b.below(src_shape.len());
        src_shape[a] = src_shape[a].saturating_sub(1);
    }
    let src_layout = b.layout(src_shape.len(), true);
    let src = Backing::new(&src_shape, &src_layout, |k| (k % 9) as i64 - 4);
    let mask_layout = b.layout(nd, true);
    let bits: Vec<bool> = (0..32).map(|_| b.flag()).collect();
    let mask = Backing::new(&dst_shape, &mask_layout, |k| bits[k % bits.len()]);
    let reduce = [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin][b.below(4)];
    let include_self = b.flag();
    let accumulate = b.flag();

    let mut dst = Backing::new(&dst_shape, &dst_layout, |k| (k % 13) as i64 - 6);
    let before = dst.view_mut().to_owned();
    index.with_view(|i| {
        src.with_view(|s| {
            mask.with_view(|m| {
                let mut view = dst.view_mut();
                let r = match op {
                    0 => gather::index_add_inplace(&mut view, dim, &i, &s, 3),
                    1 => gather::index_copy_inplace(&mut view, dim, &i, &s),
                    2 => gather::index_fill_inplace(&mut view, dim, &i, -1),
                    3 | 4 => {
                        gather::index_reduce_inplace(&mut view, dim, &i, &s, reduce, include_self)
                    }
                    5 | 6 => gather::put_inplace(&mut view, &i, &s, accumulate),
                    _ => gather::masked_scatter_inplace(&mut view, &m, &s),
                };
                match r {
                    Err(e) => {
                        assert!(!e.to_string().is_empty());
                        assert_eq!(
                            view.to_owned(),
                            before,
                            "destination changed by failed op {op}: {e}"
                        );
                    }
                    Ok(()) if op == 0 && nd > 0 && i.ndim() == 1 && i.len() <= 256 => {
                        let mut want = before.clone();
                        for (j, v) in i.iter().enumerate() {
                            let v = v.to_i64();
                            assert!(v >= 0 && (v as usize) < size_d, "index_add accepted {v}");
                            let mut t = want.index_axis_mut(Axis(d), v as usize);
                            let sj = s.index_axis(Axis(d), j);
                            t.zip_mut_with(&sj, |a, &x| *a = a.wrapping_add(3i64.wrapping_mul(x)));
                        }
                        assert_eq!(
                            view.to_owned(),
                            want,
                            "index_add differs from the reference"
                        );
                        let _ = IxDyn(&[]);
                    }
                    Ok(()) => {}
                }
            })
        })
    });
}
