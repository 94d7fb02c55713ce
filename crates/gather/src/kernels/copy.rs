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
    // SAFETY (of the copies in `copy_nest`): `base + j * stride` for `j` in the inner range
    // are offsets of positions of the source's shape: inside the source view (ndarray vouches for
    // its strides), and inside the output, whose strides are the row-major strides of that shape
    // and whose capacity is `n`. The planner hands every position to exactly one task, so writes
    // never overlap; the source is only read, and it cannot alias the freshly allocated output.
    unsafe {
        copy_nest(
            &nest,
            SharedPtr(out.as_mut_ptr()),
            SharedPtr(src.as_ptr() as *mut T),
        )
    };
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
    // SAFETY (of the copies in `copy_nest`): `base + j * stride` for `j` in the inner range are
    // offsets of positions of the common shape: inside both views (ndarray vouches for their
    // strides). Distinct positions of `dst`, a `&mut` view, are distinct memory, and the planner
    // hands every position to one task, so writes never overlap; `src` is only read, and being
    // borrowed while `dst` is borrowed mutably, it is not `dst`'s memory.
    unsafe {
        copy_nest(
            &nest,
            SharedPtr(dst.as_mut_ptr()),
            SharedPtr(src.as_ptr() as *mut T),
        )
    };
}

/// Positions of the inner axis per tile of a transposing copy: a tile's reads (or writes) along
/// the strided side are one line per position, kept in L1 while the tile walks the outer positions.
const TILE: usize = 64;

/// Copies every position of `nest` from operand 1 (`src`) to operand 0 (`dst`), in parallel.
///
/// A transposing copy, contiguous along the inner axis on one side and strided on the other, is
/// tiled: each task walks the outer positions for one tile of the inner axis, so that the lines
/// of the strided side that one outer position touches are still in L1 for the next, which reads
/// (or writes) their neighbouring elements. Walking whole inner rows, every line was fetched
/// again for each of its elements. Where the strided side's lines would share L1 sets, and the
/// other side is contiguous along an outer axis, the copy runs in square blocks instead
/// ([`transpose_nest`]).
///
/// # Safety
/// The offsets `base + j * stride` that `nest` produces must be in bounds for both pointers, the
/// destination's distinct for distinct positions, and the source not written meanwhile.
unsafe fn copy_nest<T: Word>(nest: &Nest<2>, dst: SharedPtr<T>, src: SharedPtr<T>) {
    let [ds, ss] = nest.inner.strides;
    // The operand that is strided along the inner axis (`side`) may be contiguous along an outer
    // one; blocks only pay where its stride makes the tiled walk's lines share L1 sets.
    let side = usize::from(ds == 1);
    if (ds == 1) != (ss == 1)
        && nest.inner.len >= block::<T>()
        && aliases::<T>(nest.inner.strides[side])
    {
        let across = nest
            .outer
            .iter()
            .rposition(|a| a.strides[side].unsigned_abs() == 1 && a.len >= block::<T>());
        if let Some(p) = across {
            // SAFETY: the function's contract, for the same positions.
            return unsafe { transpose_nest(nest, p, dst, src) };
        }
    }
    let body = move |base: [isize; 2], r: std::ops::Range<usize>| {
        let (d, s) = (dst, src);
        // SAFETY: the function's contract.
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
    };
    if (ds == 1) != (ss == 1) && !nest.outer.is_empty() && nest.inner.len > TILE {
        nest.for_each_tiled(TILE, crate::plan::GRAIN, body);
    } else if ds == 1 && ss == 1 {
        nest.for_each_grain(super::copy_grain::<T>(nest.total), body);
    } else {
        nest.for_each(body);
    }
}

/// Whether lines `stride` elements of `T` apart fall in at most 4 of the 64 sets of a 32 KiB,
/// 8-way L1 data cache (the common size): a multiple of 1 KiB, so that the tiled
/// walk's `TILE` lines of the strided side need 16 or more ways of one set and are evicted
/// before their next element is read. Other strides spread the lines over 8 sets or more,
/// where the tiled walk is faster than the blocks.
fn aliases<T>(stride: isize) -> bool {
    (stride.unsigned_abs() * std::mem::size_of::<T>()) % 1024 == 0
}

/// Positions per side of [`transpose_nest`]'s square blocks: a cache line of `T`, kept between 8
/// (`u64`) and 32 (bytes) so that a block is at most 1 KiB.
fn block<T>() -> usize {
    (64 / std::mem::size_of::<T>()).clamp(8, 32)
}

/// A transposing copy in square blocks through a buffer: [`copy_nest`]'s positions where `dst` is
/// contiguous along one axis and `src` along another (`nest.outer[p]`).
///
/// A block is read line by line along `src`'s contiguous axis into the buffer, then written line
/// by line along `dst`'s: each line of either side is used whole the one time it is touched. The
/// tiled walk instead keeps a tile's worth of the strided side's lines in L1 for the next outer
/// position; when that side's stride is a multiple of 1 KiB (a power-of-two row length, as
/// `[1024, 1024]` `f32`) those lines crowd into a few sets of the L1 cache ([`aliases`]) and
/// every element was a miss. A piece walks its blocks a `TILE` of `along` at a time, so that the
/// strided rows it reads stay few (in the TLB too) while it steps `across`.
///
/// ```text
/// src (contiguous along o)        buf [o][k]           dst (contiguous along k)
///   k0: o0 o1 o2 ..  --read k by k-->  ...  --write o by o-->  o0: k0 k1 k2 ..
/// ```
///
/// # Safety
/// As [`copy_nest`].
unsafe fn transpose_nest<T: Word>(nest: &Nest<2>, p: usize, dst: SharedPtr<T>, src: SharedPtr<T>) {
    let b = block::<T>();
    let along = nest.inner;
    let mut outer = nest.outer.clone();
    let across = outer.remove(p);
    // `across` becomes the splittable inner axis and `along` the axis each piece runs whole, so
    // that every piece holds whole blocks along `along`.
    let blocks = Nest {
        outer,
        mid: Some(along),
        inner: across,
        inner_splittable: true,
        total: nest.total,
    };
    let [dk, sk] = along.strides;
    let [dop, sop] = across.strides;
    // Which way each side is contiguous: `dst` along `along` and `src` along `across`, or the
    // reverse.
    let dst_along = dk == 1;
    blocks.for_each(move |base, r| {
        let (d, s) = (dst, src);
        let mut buf = [std::mem::MaybeUninit::<T>::uninit(); 32 * 32];
        let buf = buf.as_mut_ptr();
        for t0 in (0..along.len).step_by(TILE) {
            for o0 in r.clone().step_by(b) {
                let on = b.min(r.end - o0);
                for k0 in (t0..along.len.min(t0 + TILE)).step_by(b) {
                    let kn = b.min(along.len - k0);
                    let (o0i, k0i) = (o0 as isize, k0 as isize);
                    // SAFETY: the positions `(k0 + k, o0 + o)`, `k < kn`, `o < on`, are positions of
                    // the nest (`o0 + on <= r.end`, `k0 + kn <= along.len`), so their offsets are in
                    // bounds for both operands (the function's contract); `buf` holds `32 * 32 >=
                    // b * b` elements and `o * b + k < b * b`. Every slot the second loop reads was
                    // written by the first.
                    unsafe {
                        let dp = d.0.offset(base[0] + k0i * dk + o0i * dop);
                        let sp = s.0.offset(base[1] + k0i * sk + o0i * sop).cast_const();
                        let at = |o: usize, k: usize| buf.add(o * b + k);
                        if dst_along {
                            for k in 0..kn {
                                for o in 0..on {
                                    (*at(o, k))
                                        .write(*sp.offset(k as isize * sk + o as isize * sop));
                                }
                            }
                            for o in 0..on {
                                for k in 0..kn {
                                    *dp.offset(k as isize * dk + o as isize * dop) =
                                        (*at(o, k)).assume_init();
                                }
                            }
                        } else {
                            for o in 0..on {
                                for k in 0..kn {
                                    (*at(o, k))
                                        .write(*sp.offset(k as isize * sk + o as isize * sop));
                                }
                            }
                            for k in 0..kn {
                                for o in 0..on {
                                    *dp.offset(k as isize * dk + o as isize * dop) =
                                        (*at(o, k)).assume_init();
                                }
                            }
                        }
                    }
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
    fn transposing_copies_walk_tiles_and_copy_every_position_for_any_pool() {
        // Inner axes longer than a tile and not a multiple of it, strided on one side: the tiled
        // walk, in parallel, for copies out of and assignments into transposed views.
        let (rows, cols) = (sized(300, 70), sized(203, 67));
        let x = ndarray::Array2::from_shape_fn((rows, cols), |(a, b)| (a * 1000 + b) as u16);
        let x3 = Array3::from_shape_fn((rows, 7, cols / 7), |(a, b, c)| {
            (a * 1000 + b * 100 + c) as u64
        });
        for threads in [1, 2, 3] {
            let pool = crate::kernels::test_pool(threads);
            pool.install(|| {
                let t = x.t().into_dyn();
                assert_eq!(owned(&t), t, "{threads} threads");
                let p = x3.view().permuted_axes([2, 0, 1]).into_dyn();
                assert_eq!(owned(&p), p, "{threads} threads");
                let mut back = ndarray::Array2::<u16>::zeros((cols, rows));
                assign(
                    &mut back.view_mut().reversed_axes().into_dyn(),
                    &x.view().into_dyn(),
                );
                assert_eq!(back.t(), x, "{threads} threads");
            });
        }
    }

    /// Transposed views whose strided side steps 1 KiB: the square blocks, for each word width.
    fn check_blocks<T: Plain + PartialEq + std::fmt::Debug>(of: impl Fn(usize) -> T + Sync) {
        let cols = 1024 / std::mem::size_of::<T>();
        // Not a multiple of any block side, and long enough to be split over threads.
        let rows = sized(601, 37);
        let x = ndarray::Array2::from_shape_fn((rows, cols), |(a, b)| of(a * cols + b));
        let x3 = Array3::from_shape_fn((3, rows / 3, cols), |(a, b, c)| {
            of((a * rows + b) * cols + c)
        });
        for threads in [1, 2, 3] {
            let pool = crate::kernels::test_pool(threads);
            pool.install(|| {
                let xt = x.t();
                let views = [
                    xt.into_dyn(),
                    xt.slice(s![..;-1, ..]).into_dyn(),
                    xt.slice(s![3.., 5..]).into_dyn(),
                    x3.view().permuted_axes([0, 2, 1]).into_dyn(),
                ];
                for v in views {
                    let got = owned(&v);
                    assert_eq!(got, v, "{threads} threads, strides {:?}", v.strides());
                }
                // Written through a transposed destination whose rows are 1 KiB apart.
                let src = ndarray::Array2::from_shape_fn((cols, 45), |(a, b)| of(a * 45 + b));
                let mut back = ndarray::Array2::from_shape_fn((45, cols), |_| of(0));
                assign(
                    &mut back.view_mut().reversed_axes().into_dyn(),
                    &src.view().into_dyn(),
                );
                assert_eq!(back.t(), src, "{threads} threads");
            });
        }
    }

    #[test]
    fn transposing_copies_with_strides_of_a_kib_run_in_blocks_for_every_width() {
        check_blocks(|i| i as u8);
        check_blocks(|i| i as u16);
        check_blocks(|i| i as u32);
        check_blocks(|i| i as u64);
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
