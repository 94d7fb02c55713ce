//! Elementwise loops over views of one shape and any strides, serial, in row-major order: the
//! nest plans the walk (code that sees no element type), so that what each element type and
//! closure compiles is the loop alone. ndarray's `Zip` over `IxDyn` compiles its dimension
//! handling again for every instance, a few KB each.
//!
//! ```text
//! a  [a00 a01 a02]      f(&mut a00, &b00)  f(&mut a01, &b01)  ...
//! b  [b00 b01 b02]      (b may be a broadcast view: stride 0)
//! ```

use ndarray::{ArrayD, ArrayView, ArrayViewMut, IxDyn};

use crate::plan::Nest;

/// Calls `f` with the offsets (in elements) of every position of `shape` in each of `N`
/// operands of the given strides, in row-major order: the one loop of this module.
fn walk<const N: usize>(shape: &[usize], strides: [&[isize]; N], mut f: impl FnMut([isize; N])) {
    let nest = Nest::<N>::new(shape, strides, None);
    let inner = nest.inner.strides;
    // Row-major order: the nest keeps the axes in order (it only merges contiguous ones).
    nest.for_each_serial(|base, r| {
        for j in r {
            let j = j as isize;
            f(std::array::from_fn(|k| base[k] + j * inner[k]));
        }
    });
}

/// `f(&mut a[p], &b[p])` for every position `p`. Panics if the shapes differ.
pub(crate) fn zip2<A, B>(
    a: &mut ArrayViewMut<'_, A, IxDyn>,
    b: &ArrayView<'_, B, IxDyn>,
    mut f: impl FnMut(&mut A, &B),
) {
    // Loops over two slices, which LLVM vectorizes (the walk's offsets, with strides known only
    // at run time, it does not).
    zip2_runs(a, b, |x, y| {
        for (x, y) in x.iter_mut().zip(y) {
            f(x, y);
        }
    });
}

/// `f(a_run, b_run)` over runs of positions adjacent in both `a` and `b` (of one length), which
/// together cover every position once, in row-major order: one run for two row-major views, a
/// run per row of a block of rows or of a strip of columns, and runs of one element where the
/// last axis is not contiguous in both. Panics if the shapes differ.
pub(crate) fn zip2_runs<A, B>(
    a: &mut ArrayViewMut<'_, A, IxDyn>,
    b: &ArrayView<'_, B, IxDyn>,
    mut f: impl FnMut(&mut [A], &[B]),
) {
    assert_eq!(a.shape(), b.shape(), "zip kernel: shapes differ");
    let (pa, pb) = (a.as_mut_ptr(), b.as_ptr());
    // The nest merges axes contiguous in both: two row-major views are one run.
    let nest = Nest::<2>::new(a.shape(), [a.strides(), b.strides()], None);
    let [sa, sb] = nest.inner.strides;
    let adjacent = sa == 1 && sb == 1;
    nest.for_each_serial(|[oa, ob], r| {
        // A run at once, or one element at a time: one call of `f` in the loop, so that it is
        // compiled once.
        let (runs, len) = if adjacent { (1, r.len()) } else { (r.len(), 1) };
        for k in 0..runs {
            let j = (r.start + k) as isize;
            // SAFETY: the nest gives the offsets of a run's first position in each view; `j`
            // is a position of the run, and with `len > 1` the run's positions are adjacent
            // in both (inner strides 1): all inside the views (ndarray vouches for their
            // strides). Each position is visited once and distinct positions of `a`, a `&mut`
            // view, are distinct memory; `b` is only read and is not `a`'s memory (borrowed
            // while `a` is borrowed mutably).
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts_mut(pa.offset(oa + j * sa), len),
                    std::slice::from_raw_parts(pb.offset(ob + j * sb), len),
                )
            };
            f(x, y);
        }
    });
}

/// `f(&mut a[p], &mut b[p], &c[p])` for every position `p`. Panics if the shapes differ.
pub(crate) fn zip3<A, B, C>(
    a: &mut ArrayViewMut<'_, A, IxDyn>,
    b: &mut ArrayViewMut<'_, B, IxDyn>,
    c: &ArrayView<'_, C, IxDyn>,
    mut f: impl FnMut(&mut A, &mut B, &C),
) {
    assert!(
        a.shape() == b.shape() && a.shape() == c.shape(),
        "zip kernel: shapes differ"
    );
    let (pa, pb, pc) = (a.as_mut_ptr(), b.as_mut_ptr(), c.as_ptr());
    walk(
        a.shape(),
        [a.strides(), b.strides(), c.strides()],
        |[oa, ob, oc]| {
            // SAFETY: as in `zip2`; `a` and `b` are both borrowed mutably, so they are distinct
            // memory, and neither is `c`'s.
            unsafe { f(&mut *pa.offset(oa), &mut *pb.offset(ob), &*pc.offset(oc)) }
        },
    );
}

/// `f(&a[p])` for every position `p`, into a new array of `a`'s shape (row-major).
pub(crate) fn map<A, B>(a: &ArrayView<'_, A, IxDyn>, mut f: impl FnMut(&A) -> B) -> ArrayD<B> {
    // Row-major: a loop over the slice (see `zip2`).
    if let Some(s) = a.as_slice() {
        let out: Vec<B> = s.iter().map(f).collect();
        return ArrayD::from_shape_vec(a.raw_dim(), out).expect("one value per position");
    }
    let mut out = Vec::with_capacity(a.len());
    let pa = a.as_ptr();
    // SAFETY: `walk` gives the offset of a position of `a`'s shape, inside the view; only read.
    walk(a.shape(), [a.strides()], |[oa]| {
        out.push(f(unsafe { &*pa.offset(oa) }))
    });
    ArrayD::from_shape_vec(a.raw_dim(), out).expect("one value per position")
}

/// `f(&a[p], &b[p])` for every position `p`, into a new array of their shape (row-major).
/// Panics if the shapes differ.
pub(crate) fn map2<A, B, C>(
    a: &ArrayView<'_, A, IxDyn>,
    b: &ArrayView<'_, B, IxDyn>,
    mut f: impl FnMut(&A, &B) -> C,
) -> ArrayD<C> {
    assert_eq!(a.shape(), b.shape(), "zip kernel: shapes differ");
    let mut out = Vec::with_capacity(a.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    walk(a.shape(), [a.strides(), b.strides()], |[oa, ob]| {
        // SAFETY: offsets of one position of the common shape in each view, only read.
        out.push(unsafe { f(&*pa.offset(oa), &*pb.offset(ob)) });
    });
    ArrayD::from_shape_vec(a.raw_dim(), out).expect("one value per position")
}

/// `f(&a[p], &b[p], &c[p])` for every position `p`, into a new array of their shape
/// (row-major). Panics if the shapes differ.
pub(crate) fn map3<A, B, C, E>(
    a: &ArrayView<'_, A, IxDyn>,
    b: &ArrayView<'_, B, IxDyn>,
    c: &ArrayView<'_, C, IxDyn>,
    mut f: impl FnMut(&A, &B, &C) -> E,
) -> ArrayD<E> {
    assert!(
        a.shape() == b.shape() && a.shape() == c.shape(),
        "zip kernel: shapes differ"
    );
    let mut out = Vec::with_capacity(a.len());
    let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), c.as_ptr());
    walk(
        a.shape(),
        [a.strides(), b.strides(), c.strides()],
        |[oa, ob, oc]| {
            // SAFETY: offsets of one position of the common shape in each view, only read.
            out.push(unsafe { f(&*pa.offset(oa), &*pb.offset(ob), &*pc.offset(oc)) });
        },
    );
    ArrayD::from_shape_vec(a.raw_dim(), out).expect("one value per position")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array3, s};

    #[test]
    fn zip2_runs_hands_over_adjacent_runs_single_elements_and_a_0d_array() {
        // Rows of a strip (adjacent in both): one run per row, in row-major order.
        let mut big = Array3::<i64>::zeros((2, 3, 8));
        let src = Array3::from_shape_fn((2, 3, 4), |(a, b, c)| (a * 100 + b * 10 + c) as i64);
        let mut lens = Vec::new();
        let mut strip = big.slice_mut(s![.., .., 2..6]).into_dyn();
        zip2_runs(&mut strip, &src.view().into_dyn(), |x, y| {
            lens.push(x.len());
            x.copy_from_slice(y);
        });
        assert_eq!(lens, [4; 6]);
        assert_eq!(big.slice(s![.., .., 2..6]), src);
        assert!(big.slice(s![.., .., ..2]).iter().all(|&v| v == 0));
        // A transposed partner: one element at a time, every position once.
        let t = src.t().to_owned();
        let mut out = Array3::<i64>::zeros((4, 3, 2));
        let mut calls = 0;
        zip2_runs(
            &mut out.view_mut().into_dyn(),
            &src.t().into_dyn(),
            |x, y| {
                calls += x.len();
                x.copy_from_slice(y);
            },
        );
        assert_eq!((out, calls), (t, 24));
        // A 0-d array is one run of one element.
        let mut a = ndarray::arr0(1i64).into_dyn();
        zip2(
            &mut a.view_mut(),
            &ndarray::arr0(5i64).into_dyn().view(),
            |x, &y| *x += y,
        );
        assert_eq!(a[[]], 6);
    }

    #[test]
    fn zips_visit_each_position_once_with_its_partners_in_any_layout() {
        let x = Array3::from_shape_fn((5, 4, 6), |(a, b, c)| (a * 100 + b * 10 + c) as i64);
        let xt = x.t().as_standard_layout().into_owned();
        let row = ndarray::Array1::from_shape_fn(6, |c| c as i64 * 1000);
        let wide = row.broadcast((5, 4, 6)).unwrap();
        let mut big = Array3::<i64>::zeros((10, 4, 12));
        let mut other = Array3::<i64>::zeros((5, 4, 6));
        for src in [
            x.view().into_dyn(),
            xt.t().into_dyn(),
            x.slice(s![..;-1, .., ..]).into_dyn(),
        ] {
            big.fill(-1);
            let mut dst = big.slice_mut(s![..;2, .., ..;-2]).into_dyn();
            zip2(&mut dst, &src, |d, &v| *d = v + 1);
            assert_eq!(dst, src.mapv(|v| v + 1));
            assert!(big.slice(s![1..;2, .., ..]).iter().all(|&v| v == -1));
            let mut dst = big.slice_mut(s![..;2, .., ..;-2]).into_dyn();
            zip3(
                &mut dst,
                &mut other.view_mut().into_dyn(),
                &wide.view().into_dyn(),
                |d, o, &w| {
                    *o = *d + w;
                    *d = 0;
                },
            );
            assert!(big.slice(s![..;2, .., ..;-2]).iter().all(|&v| v == 0));
            assert_eq!(
                other.view().into_dyn(),
                src.mapv(|v| v + 1) + &wide.view().into_dyn()
            );
        }
    }
}
