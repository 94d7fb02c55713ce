//! The copy kernel: a standard-layout copy of any view, in parallel.
//!
//! Every out-of-place write op (`scatter`, `scatter_add`, `index_add` ...) starts from a copy of
//! its input. For a large input the copy is split over the thread pool, row by row as the planner
//! merges them (one `memcpy` per contiguous run).

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

use super::SharedPtr;
use super::words::{self, Plain, Word};
use crate::plan::Nest;

/// Copies `src` in row-major order into `out` (empty, with capacity for `src.len()` elements).
pub(crate) fn copy_into<T: Plain>(src: &ArrayView<'_, T, IxDyn>, out: Vec<T>) -> Vec<T> {
    let out = copy_words(&words::view(src), words::vec(out));
    // SAFETY: the kernel only copies words of `src`, i.e. elements of `T`, into `out`.
    unsafe { words::unvec(out) }
}

fn copy_words<T: Word>(src: &ArrayView<'_, T, IxDyn>, mut out: Vec<T>) -> Vec<T> {
    let n = src.len();
    assert!(
        out.is_empty() && out.capacity() >= n,
        "copy kernel: output buffer too small"
    );
    if n == 0 {
        return out;
    }
    let shape = src.shape().to_vec();
    let out_strides = crate::dims::row_major_strides(&shape);
    let nest = Nest::<2>::new(&shape, [&out_strides, src.strides()], None);
    let [os, ss] = nest.inner.strides;
    let optr = SharedPtr(out.as_mut_ptr());
    let sptr = SharedPtr(src.as_ptr() as *mut T);
    nest.for_each(move |base, r| {
        let (o, s) = (optr, sptr);
        // SAFETY: `base + j * stride` for `j` in the inner range are offsets of positions of the
        // source's shape: inside the source view (ndarray vouches for its strides), and inside the
        // output, whose strides are the row-major strides of that shape and whose capacity is
        // `n`. The planner hands every position to exactly one task, so writes never overlap; the
        // source is only read, and it cannot alias the freshly allocated output.
        unsafe {
            let op = o.0.offset(base[0]);
            let sp = s.0.offset(base[1]).cast_const();
            if os == 1 && ss == 1 {
                std::ptr::copy_nonoverlapping(sp.add(r.start), op.add(r.start), r.len());
            } else {
                for j in r {
                    let j = j as isize;
                    *op.offset(j * os) = *sp.offset(j * ss);
                }
            }
        }
    });
    // SAFETY: the nest covers every position of the shape once, and the output offsets are the
    // row-major offsets of those positions, so each of the `n` slots was written.
    unsafe { out.set_len(n) };
    out
}

/// A row-major copy of `a` (ndarray's `to_owned`), on words: see [`copy_into`].
pub(crate) fn owned<T: Plain>(a: &ArrayView<'_, T, IxDyn>) -> ndarray::ArrayD<T> {
    let v = copy_into(a, Vec::with_capacity(a.len()));
    ndarray::ArrayD::from_shape_vec(a.raw_dim(), v).expect("a buffer of the view's length")
}

/// `dst[p] = src[p]` for every position `p` (ndarray's `assign` for equal shapes), on words of
/// `T`'s width: compiled once per width, not once per element type. Panics if the shapes differ.
pub(crate) fn assign<T: Plain>(
    dst: &mut ArrayViewMut<'_, T, IxDyn>,
    src: &ArrayView<'_, T, IxDyn>,
) {
    // SAFETY: the kernel stores only words of `src`, i.e. elements of `T`.
    let mut d = unsafe { words::view_mut(dst) };
    assign_words(&mut d, &words::view(src));
}

fn assign_words<T: Word>(dst: &mut ArrayViewMut<'_, T, IxDyn>, src: &ArrayView<'_, T, IxDyn>) {
    assert_eq!(dst.shape(), src.shape(), "assign kernel: shapes differ");
    if dst.is_empty() {
        return;
    }
    let shape = dst.shape().to_vec();
    let nest = Nest::<2>::new(&shape, [dst.strides(), src.strides()], None);
    let [ds, ss] = nest.inner.strides;
    let dptr = SharedPtr(dst.as_mut_ptr());
    let sptr = SharedPtr(src.as_ptr() as *mut T);
    nest.for_each(move |base, r| {
        let (d, s) = (dptr, sptr);
        // SAFETY: `base + j * stride` for `j` in the inner range are offsets of positions of the
        // common shape: inside both views (ndarray vouches for their strides). Distinct positions
        // of `dst`, a `&mut` view, are distinct memory, and the planner hands every position to
        // one task, so writes never overlap; `src` is only read, and being borrowed while `dst`
        // is borrowed mutably, it is not `dst`'s memory.
        unsafe {
            let dp = d.0.offset(base[0]);
            let sp = s.0.offset(base[1]).cast_const();
            if ds == 1 && ss == 1 {
                std::ptr::copy_nonoverlapping(sp.add(r.start), dp.add(r.start), r.len());
            } else {
                for j in r {
                    let j = j as isize;
                    *dp.offset(j * ds) = *sp.offset(j * ss);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use ndarray::{Array3, s};

    #[test]
    fn copies_any_layout_in_row_major_order() {
        let shape = (sized(40, 6), sized(30, 8), sized(70, 20));
        let x = Array3::from_shape_fn(shape, |(a, b, c)| (a * 10000 + b * 100 + c) as i32);
        let views = [
            x.view().into_dyn(),
            x.slice(s![..;-1, .., 1..]).into_dyn(),
            x.view().permuted_axes([2, 0, 1]).into_dyn(),
            x.slice(s![.., 2..3, ..;-2]).into_dyn(),
        ];
        for v in views {
            let got = copy_into(&v, Vec::with_capacity(v.len()));
            let want: Vec<i32> = v.iter().copied().collect();
            assert_eq!(got, want, "shape {:?} strides {:?}", v.shape(), v.strides());
        }
    }

    #[test]
    fn assign_writes_every_position_whatever_both_layouts() {
        let shape = (sized(40, 6), sized(30, 8), sized(70, 20));
        let x = Array3::from_shape_fn(shape, |(a, b, c)| (a * 10000 + b * 100 + c) as i64);
        let (p, q, r) = shape;
        let mut big = Array3::<i64>::zeros((2 * p, q, 2 * r));
        // The same values with the axes reversed in memory.
        let xt = x.t().as_standard_layout().into_owned();
        let srcs = [
            x.view().into_dyn(),
            x.slice(s![..;-1, .., ..]).into_dyn(),
            xt.t().into_dyn(),
        ];
        for src in srcs {
            big.fill(-1);
            let mut dst = big.slice_mut(s![..;2, .., ..;-2]);
            assert_eq!(dst.shape(), src.shape());
            assign(&mut dst.view_mut().into_dyn(), &src);
            assert_eq!(dst.into_dyn(), src);
            // The positions outside the view are untouched.
            assert!(big.slice(s![1..;2, .., ..]).iter().all(|&v| v == -1));
            assert!(big.slice(s![.., .., ..;2]).iter().all(|&v| v == -1));
        }
    }
}
