//! The copy kernel: a standard-layout copy of any view, in parallel.
//!
//! Every out-of-place write op (`scatter`, `scatter_add`, `index_add` ...) starts from a copy of
//! its input. For a large input the copy is split over the thread pool, row by row as the planner
//! merges them (one `memcpy` per contiguous run).

use ndarray::{ArrayView, IxDyn};

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
}
