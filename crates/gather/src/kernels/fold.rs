//! The group folds: along `dim`, every source position `j` of a lane folds `src[.., j, ..]` into
//! the state of group `index[.., j, ..]`, in index order, and each group that met a source
//! writes its result to `out[.., group, ..]`.
//!
//! ```text
//! index  1 3 0 0      group 0 ← src[2], src[3]   out[0] = fold(9, 4)
//! src    5 7 9 4      group 1 ← src[0]           out[1] = fold(5)
//!                     group 2 ← nothing          out[2] kept
//!                     group 3 ← src[1]           out[3] = fold(7)
//! ```
//!
//! Two walks give bitwise the same result (each group meets its sources in index order, on one
//! thread): lane by lane ([`fold_lanes`]), or, for an index shared by every lane, group by group
//! over whole rows ([`fold_rows`]). The walks are written on offsets, without ndarray's
//! iterators, so that what each type and fold compiles is little more than its loops.

use std::ops::Range;

use ndarray::{ArrayView, ArrayViewMut, IxDyn};

use super::SharedPtr;
use super::words::{self, Plain};
use crate::index::IndexElem;
use crate::plan::Nest;

/// One reduction, as a fold over a group in index order.
pub(crate) trait Fold<T>: Sync {
    type State: Copy + Send + Sync;
    type Out: Copy + Send + Sync;
    fn init(&self) -> Self::State;
    /// Folds `x`, at position `j` along `dim`, into its group's state.
    fn push(&self, s: &mut Self::State, x: T, j: usize);
    /// The result of a group of `n >= 1` elements.
    fn finish(&self, s: Self::State, n: usize) -> Self::Out;
}

/// `shape` (or strides) without axis `dim`.
fn without<X: Copy>(shape: &[X], dim: usize) -> Vec<X> {
    (0..shape.len())
        .filter(|&d| d != dim)
        .map(|d| shape[d])
        .collect()
}

/// A stable counting sort of `ids` (each below `groups`, else a panic): the CSR offsets of every
/// group and the positions of its members in ascending order.
fn csr_order(ids: &[usize], groups: usize) -> (Vec<usize>, Vec<usize>) {
    let mut off = vec![0usize; groups + 1];
    for &g in ids {
        off[g + 1] += 1;
    }
    for g in 0..groups {
        off[g + 1] += off[g];
    }
    let mut next = off.clone();
    let mut perm = vec![0usize; ids.len()];
    for (j, &g) in ids.iter().enumerate() {
        perm[next[g]] = j;
        next[g] += 1;
    }
    (off, perm)
}

/// Work below which a group walk stays on the calling thread.
pub(crate) const PAR_MIN_WORK: usize = 1 << 15;

/// Whether a grouped loop over `groups` groups and `work` elements runs in parallel, and how many
/// groups each task takes (four tasks per thread, for balance).
fn group_chunks(groups: usize, work: usize) -> (bool, usize) {
    let threads = rayon::current_num_threads();
    let parallel = work >= PAR_MIN_WORK && threads > 1;
    let chunk = if parallel {
        groups.div_ceil(threads * 4).max(1)
    } else {
        groups
    };
    (parallel, chunk)
}

/// The offsets of a lane walk (see [`fold_lanes`]): not generic, so that only the loops are
/// compiled per type and fold.
struct LaneWalk {
    /// The lanes (positions of the output's shape off `dim`), in parts for the tasks: offsets
    /// of (out, index, src).
    parts: Vec<Vec<([isize; 3], Range<usize>)>>,
    /// Inner strides of the lanes' nest, and strides along `dim` (out, index, src).
    inner: [isize; 3],
    along: [isize; 3],
    /// Length of the lanes of `index` and `src`, and of `out` (the groups).
    len: usize,
    groups: usize,
}

/// `strides` of an input of `shape` broadcast to `out`'s shape off `dim` (size 1 → stride 0),
/// without `dim`. Panics if the shapes do not broadcast.
fn lane_strides(shape: &[usize], strides: &[isize], out: &[usize], dim: usize) -> Vec<isize> {
    (0..out.len())
        .filter(|&d| d != dim)
        .map(|d| match shape[d] {
            n if n == out[d] => strides[d],
            1 => 0,
            _ => panic!("fold kernel: inputs do not broadcast to the output's lanes"),
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn plan_lanes(
    dim: usize,
    out: (&[usize], &[isize]),
    index: (&[usize], &[isize]),
    src: (&[usize], &[isize]),
    parallel: bool,
) -> LaneWalk {
    let nd = out.0.len();
    assert!(
        src.0.len() == nd && index.0.len() == nd && dim < nd,
        "fold kernel: rank mismatch"
    );
    let len = src.0[dim];
    assert_eq!(index.0[dim], len, "fold kernel: index and src lengths");
    let lanes = Nest::<3>::new(
        &without(out.0, dim),
        [
            &without(out.1, dim),
            &lane_strides(index.0, index.1, out.0, dim),
            &lane_strides(src.0, src.1, out.0, dim),
        ],
        None,
    );
    let threads = if parallel {
        rayon::current_num_threads()
    } else {
        1
    };
    LaneWalk {
        parts: lanes.pieces(threads * 4, 1),
        inner: lanes.inner.strides,
        along: [out.1[dim], index.1[dim], src.1[dim]],
        len,
        groups: out.0[dim],
    }
}

/// The fold lane by lane: each lane along `dim` keeps one state per group (`out.shape()[dim]`
/// of them), folds its sources in order, and writes the groups it met. Lanes are independent:
/// parallel over lanes when `parallel`, each lane on one thread.
///
/// Preconditions (asserted): equal ranks, `dim` an axis; `src` and `index` have the same length
/// along `dim` and broadcast to `out`'s shape off `dim`. An index value outside
/// `0..out.shape()[dim]` panics before anything is read with it.
pub(crate) fn fold_lanes<T, I, F>(
    fold: &F,
    dim: usize,
    src: &ArrayView<'_, T, IxDyn>,
    index: &ArrayView<'_, I, IxDyn>,
    out: &mut ArrayViewMut<'_, F::Out, IxDyn>,
    parallel: bool,
) where
    T: Copy + Send + Sync,
    I: IndexElem,
    F: Fold<T>,
{
    let walk = plan_lanes(
        dim,
        (out.shape(), out.strides()),
        (index.shape(), index.strides()),
        (src.shape(), src.strides()),
        parallel,
    );
    let parallel = walk.parts.len() > 1;
    let LaneWalk {
        parts,
        inner: [oi, ii, si],
        along: [od, id, sd],
        len,
        groups,
    } = walk;
    let op = SharedPtr(out.as_mut_ptr());
    let ip = SharedPtr(index.as_ptr() as *mut I);
    let sp = SharedPtr(src.as_ptr() as *mut T);
    let body = |pieces: Vec<([isize; 3], Range<usize>)>| {
        let (op, ip, sp) = (op, ip, sp);
        let mut states = vec![fold.init(); groups];
        let mut counts = vec![0usize; groups];
        for (base, r) in pieces {
            for l in r {
                let l = l as isize;
                states.fill(fold.init());
                counts.fill(0);
                // SAFETY: `base + l * inner` is the offset of a position of the lanes' shape (the
                // output's without `dim`), to which `index` and `src` broadcast (their strides
                // are 0 where they have size 1); along `dim`, `e < len` is inside both, and `g`
                // is inside `out` once the bounds-checked `counts[g]` has passed (`groups ==
                // out.shape()[dim]`). Pieces cover each lane once, so no two tasks write one
                // element of `out` (a `&mut` view, whose distinct positions are distinct
                // memory); `src` and `index` are only read.
                unsafe {
                    let (o, i, s) = (
                        op.0.offset(base[0] + l * oi),
                        ip.0.offset(base[1] + l * ii).cast_const(),
                        sp.0.offset(base[2] + l * si).cast_const(),
                    );
                    for e in 0..len as isize {
                        let g = (*i.offset(e * id)).to_i64() as usize;
                        counts[g] += 1;
                        fold.push(&mut states[g], *s.offset(e * sd), e as usize);
                    }
                    for (g, (&n, &st)) in counts.iter().zip(&states).enumerate() {
                        if n > 0 {
                            *o.offset(g as isize * od) = fold.finish(st, n);
                        }
                    }
                }
            }
        }
    };
    crate::plan::each(parts, parallel, body);
}

/// The offsets of a row walk (see [`fold_rows`]); `None` when there is nothing to fold.
struct RowWalk {
    /// CSR offsets and members of the groups.
    off: Vec<usize>,
    perm: Vec<usize>,
    /// Every piece of the slice off `dim` (one, for a contiguous slice): offsets of (src, out).
    pieces: Vec<([isize; 2], Range<usize>)>,
    /// Positions of the slice, inner strides of its nest, strides along `dim` (src, out).
    lanes: usize,
    inner: [isize; 2],
    along: [isize; 2],
    /// The groups of each task, and whether the tasks run in parallel.
    chunks: Vec<Range<usize>>,
    parallel: bool,
}

fn plan_rows(
    dim: usize,
    src: (&[usize], &[isize]),
    ids: &[usize],
    out: (&[usize], &[isize]),
) -> Option<RowWalk> {
    let nd = out.0.len();
    assert!(
        src.0.len() == nd && dim < nd && ids.len() == src.0[dim],
        "fold kernel: rank or length mismatch"
    );
    let slice_shape = without(out.0, dim);
    assert_eq!(
        without(src.0, dim),
        slice_shape,
        "fold kernel: shapes off dim"
    );
    let groups = out.0[dim];
    let slice_len: usize = slice_shape.iter().product();
    if groups == 0 || slice_len == 0 {
        return None;
    }
    let (off, perm) = csr_order(ids, groups);
    let slice = Nest::<2>::new(
        &slice_shape,
        [&without(src.1, dim), &without(out.1, dim)],
        None,
    );
    let (parallel, chunk) = group_chunks(groups, (ids.len() + groups) * slice_len);
    Some(RowWalk {
        off,
        perm,
        pieces: slice.pieces(1, 1).pop().unwrap_or_default(),
        lanes: slice.total,
        inner: slice.inner.strides,
        along: [src.1[dim], out.1[dim]],
        chunks: (0..groups)
            .step_by(chunk)
            .map(|g| g..(g + chunk).min(groups))
            .collect(),
        parallel,
    })
}

/// The fold group by group, for an index shared by every lane (`ids`, one group per position
/// along `dim`, each below `out.shape()[dim]`): a counting sort of `ids` gives each group its
/// rows `src[.., j, ..]`, which it folds whole in ascending `j`, over all lanes at once. Parallel
/// over chunks of groups; every group is folded by one thread.
///
/// Preconditions (asserted): equal ranks, `dim` an axis, `src`'s shape off `dim` that of `out`,
/// and one id per position of `src` along `dim`.
pub(crate) fn fold_rows<T, F>(
    fold: &F,
    dim: usize,
    src: &ArrayView<'_, T, IxDyn>,
    ids: &[usize],
    out: &mut ArrayViewMut<'_, F::Out, IxDyn>,
) where
    T: Copy + Send + Sync,
    F: Fold<T>,
{
    let Some(walk) = plan_rows(
        dim,
        (src.shape(), src.strides()),
        ids,
        (out.shape(), out.strides()),
    ) else {
        return;
    };
    let RowWalk {
        off,
        perm,
        pieces,
        lanes,
        inner: [si, oi],
        along: [sd, od],
        chunks,
        parallel,
    } = walk;
    let sp = SharedPtr(src.as_ptr() as *mut T);
    let op = SharedPtr(out.as_mut_ptr());
    let body = |gs: Range<usize>| {
        let (sp, op) = (sp, op);
        let mut states: Vec<F::State> = Vec::with_capacity(lanes);
        for g in gs {
            let rows = &perm[off[g]..off[g + 1]];
            if rows.is_empty() {
                continue;
            }
            states.clear();
            states.resize(lanes, fold.init());
            // SAFETY: every `j` of `perm` is a position below `ids.len() == src.shape()[dim]`,
            // and the pieces' offsets are those of positions of the slice shape, `src`'s and
            // `out`'s off `dim`: in bounds of both. `g < groups == out.shape()[dim]`. Each group
            // belongs to one chunk, so no two tasks write one element of `out` (a `&mut` view);
            // `src` is only read. `states` has one state per position of the slice, which the
            // pieces cover once each, in the same order for the reads and the writes.
            unsafe {
                for &j in rows {
                    let row = sp.0.offset(j as isize * sd).cast_const();
                    let mut k = 0;
                    for (base, r) in &pieces {
                        let st = &mut states[k..k + r.len()];
                        k += r.len();
                        let at = row.offset(base[0]);
                        if si == 1 {
                            let s = std::slice::from_raw_parts(at.add(r.start), r.len());
                            for (st, &x) in st.iter_mut().zip(s) {
                                fold.push(st, x, j);
                            }
                        } else {
                            for (st, p) in st.iter_mut().zip(r.clone()) {
                                fold.push(st, *at.offset(p as isize * si), j);
                            }
                        }
                    }
                }
                let dst = op.0.offset(g as isize * od);
                let mut k = 0;
                for (base, r) in &pieces {
                    for (st, p) in states[k..k + r.len()].iter().zip(r.clone()) {
                        *dst.offset(base[1] + p as isize * oi) = fold.finish(*st, rows.len());
                    }
                    k += r.len();
                }
            }
        }
    };
    crate::plan::each(chunks, parallel, body);
}

/// The first (`last = false`) or the last element of each group, in index order. It moves
/// elements and computes nothing.
pub(crate) struct Pick {
    pub(crate) last: bool,
}

impl<T: Copy + Send + Sync> Fold<T> for Pick {
    type State = Option<T>;
    type Out = T;
    fn init(&self) -> Option<T> {
        None
    }
    #[inline(always)]
    fn push(&self, s: &mut Option<T>, x: T, _j: usize) {
        if self.last || s.is_none() {
            *s = Some(x);
        }
    }
    fn finish(&self, s: Option<T>, _n: usize) -> T {
        s.expect("a group of at least one element")
    }
}

/// The first or the last element of each group into `out`, on words of `T`'s width, so that it
/// is compiled once per width: by the row walk with `ids` ([`fold_rows`]), else by the lane walk
/// ([`fold_lanes`], parallel when `parallel`). Preconditions as theirs.
pub(crate) fn pick<T: Plain, I: IndexElem>(
    last: bool,
    dim: usize,
    src: &ArrayView<'_, T, IxDyn>,
    index: &ArrayView<'_, I, IxDyn>,
    mut out: ArrayViewMut<'_, T, IxDyn>,
    ids: Option<&[usize]>,
    parallel: bool,
) {
    let src = words::view(src);
    // SAFETY: `Pick` writes only words it read from `src`, each the bits of a `T`.
    let mut out = unsafe { words::view_mut(&mut out) };
    let fold = Pick { last };
    match ids {
        Some(ids) => fold_rows(&fold, dim, &src, ids, &mut out),
        None => fold_lanes(&fold, dim, &src, index, &mut out, parallel),
    }
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use ndarray::{ArrayD, Axis};

    /// A fold whose result depends on the order, the positions and the number of its elements.
    struct Trace;
    impl Fold<u32> for Trace {
        type State = u64;
        type Out = u64;
        fn init(&self) -> u64 {
            7
        }
        fn push(&self, s: &mut u64, x: u32, j: usize) {
            *s = s.wrapping_mul(1_000_003).wrapping_add(u64::from(x)) ^ ((j as u64) << 40);
        }
        fn finish(&self, s: u64, n: usize) -> u64 {
            s ^ ((n as u64) << 56)
        }
    }

    /// The definition: every lane folds its positions along `dim` in order, per group.
    fn reference(dim: usize, src: &ArrayD<u32>, index: &ArrayD<i64>, groups: usize) -> ArrayD<u64> {
        let mut shape = src.shape().to_vec();
        shape[dim] = groups;
        let mut out = ArrayD::from_elem(shape, u64::MAX);
        for (mut o, (s, i)) in out
            .lanes_mut(Axis(dim))
            .into_iter()
            .zip(src.lanes(Axis(dim)).into_iter().zip(index.lanes(Axis(dim))))
        {
            let mut st = vec![None::<(u64, usize)>; groups];
            for (j, (&x, &g)) in s.iter().zip(i.iter()).enumerate() {
                let (mut v, n) = st[g as usize].unwrap_or((Trace.init(), 0));
                Trace.push(&mut v, x, j);
                st[g as usize] = Some((v, n + 1));
            }
            for (o, st) in o.iter_mut().zip(st) {
                if let Some((v, n)) = st {
                    *o = Trace.finish(v, n);
                }
            }
        }
        out
    }

    #[test]
    fn lane_and_row_walks_fold_each_group_in_index_order_whatever_the_layout() {
        let (a, len, b, groups) = (sized(9, 3), sized(300, 20), sized(70, 5), 6);
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for dim in 0..3 {
            let mut shape = vec![a, b, 4];
            shape.insert(dim, len);
            shape.remove(3);
            let src = ArrayD::from_shape_fn(shape.clone(), |_| next() as u32);
            let index = ArrayD::from_shape_fn(shape.clone(), |_| (next() % groups as u64) as i64);
            let want = reference(dim, &src, &index, groups);
            let mut oshape = shape.clone();
            oshape[dim] = groups;
            // The inputs transposed in memory (a reversed-axes copy viewed back).
            let src_t = src.t().as_standard_layout().into_owned();
            let src_t = src_t.t();
            for parallel in [false, true] {
                for s in [src.view(), src_t.view()] {
                    let mut out = ArrayD::from_elem(oshape.clone(), u64::MAX);
                    fold_lanes(
                        &Trace,
                        dim,
                        &s,
                        &index.view(),
                        &mut out.view_mut(),
                        parallel,
                    );
                    assert_eq!(out, want, "lanes, dim {dim}, parallel {parallel}");
                }
            }
            // One index for every lane: broadcast, and the ids of the row walk.
            let ids: Vec<usize> = (0..len)
                .map(|_| (next() % groups as u64) as usize)
                .collect();
            let mut one = vec![1; 3];
            one[dim] = len;
            let lane = ArrayD::from_shape_vec(one, ids.iter().map(|&g| g as i64).collect())
                .expect("one lane");
            let full = lane.broadcast(shape.clone()).expect("broadcast").to_owned();
            let want = reference(dim, &src, &full, groups);
            for s in [src.view(), src_t.view()] {
                let mut out = ArrayD::from_elem(oshape.clone(), u64::MAX);
                fold_lanes(&Trace, dim, &s, &lane.view(), &mut out.view_mut(), true);
                assert_eq!(out, want, "broadcast lanes, dim {dim}");
                let mut out = ArrayD::from_elem(oshape.clone(), u64::MAX);
                fold_rows(&Trace, dim, &s, &ids, &mut out.view_mut());
                assert_eq!(out, want, "rows, dim {dim}");
            }
        }
    }

    #[test]
    #[should_panic]
    fn a_group_outside_the_output_panics_before_it_is_read() {
        let src = ArrayD::from_elem(vec![4], 1u32);
        let index = ArrayD::from_shape_vec(vec![4], vec![0i64, 1, 5, 0]).expect("shape");
        let mut out = ArrayD::from_elem(vec![3], 0u64);
        fold_lanes(
            &Trace,
            0,
            &src.view(),
            &index.view(),
            &mut out.view_mut(),
            false,
        );
    }
}
