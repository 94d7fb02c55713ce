//! The lane walk of sort, argsort and topk: every lane along `dim` becomes `(key, position)` pairs
//! whose integer order is the elements' order, the `k` best are selected and sorted, and their
//! positions (and values) are written to the lanes of the outputs.
//!
//! ```text
//! lane  3 NaN 1 3    keys  k3 kNaN k1 k3    sorted pairs (k1,2) (k3,0) (k3,3) (kNaN,1)
//!                                           indices 2 0 3 1    values 1 3 3 NaN
//! ```
//!
//! Where `k` is a small part of the lane (topk), the pairs are not all made: a scan keeps only
//! those that beat the `k`-th best key seen so far (see [`best`]), and a lane alone is scanned in
//! pieces on every thread.
//!
//! The walk is compiled once: it reaches the elements through two functions chosen per call, the
//! keys of a lane (per element type) and the copy of the values (per byte width).

use std::any::Any;
use std::ops::Range;

use ndarray::{ArrayView, ArrayViewMut, IxDyn};
use rayon::prelude::*;

use super::SharedPtr;
use super::words::Plain;
use crate::element::Element;
use crate::plan::{GRAIN, Nest};

/// Lanes at least this long are sorted with rayon's parallel sort.
pub(crate) const PAR_SORT_MIN: usize = 32 * 1024;

/// An element as a `u64` whose unsigned order is [`Element::sort_cmp`]'s order: NaN (any payload)
/// maps to `u64::MAX`, `-0.0` and `0.0` to the same key.
#[inline(always)]
pub(crate) fn sort_key<T: Element>(x: T) -> u64 {
    // The two 64-bit integer types do not convert to f64 exactly; the type test is resolved at
    // compile time for each `T`.
    let any = &x as &dyn Any;
    if let Some(&v) = any.downcast_ref::<i64>() {
        return (v as u64) ^ (1 << 63);
    }
    if let Some(&v) = any.downcast_ref::<u64>() {
        return v;
    }
    if let Some(k) = half_key(any) {
        return k.map_or(u64::MAX, u64::from);
    }
    // Every other element type converts to f64 exactly (bool as 0/1).
    let v = x.to_f64();
    if v.is_nan() {
        return u64::MAX;
    }
    // `-0.0 + 0.0` is `+0.0`: signed zeros get one key. Negative values flip every bit, the
    // others the sign bit: without a branch, which random signs would mispredict half the time.
    let bits = (v + 0.0).to_bits();
    bits ^ (((bits as i64) >> 63) as u64 | (1 << 63))
}

/// The order key of an `f16` or `bf16` (`None` for another type; `Some(None)` for a NaN), from
/// its bits: no conversion to a wider float, which costs more than the key (`f16` has no
/// conversion instruction in the baseline x86-64).
#[inline(always)]
fn half_key(any: &dyn Any) -> Option<Option<u16>> {
    let (bits, inf) = if let Some(v) = any.downcast_ref::<half::f16>() {
        (v.to_bits(), 0x7c00)
    } else if let Some(v) = any.downcast_ref::<half::bf16>() {
        (v.to_bits(), 0x7f80)
    } else {
        return None;
    };
    if bits & 0x7fff > inf {
        return Some(None);
    }
    Some(Some(crate::element::half_order(bits)))
}

/// [`sort_key`]'s order on 32 bits, for the types of at most 4 bytes: four keys to a 128-bit
/// vector where `sort_key`'s take two, with a compare the baseline x86-64 has (unsigned 64-bit
/// compares are emulated there).
#[inline(always)]
fn sort_key32<T: Element>(x: T) -> u32 {
    let any = &x as &dyn Any;
    if let Some(&v) = any.downcast_ref::<i32>() {
        return (v as u32) ^ (1 << 31);
    }
    if let Some(&v) = any.downcast_ref::<u32>() {
        return v;
    }
    if let Some(k) = half_key(any) {
        return k.map_or(u32::MAX, u32::from);
    }
    // The other types of at most 4 bytes are exact in f32 (the round trip through f64 of an f32
    // folds away).
    let v = x.to_f64() as f32;
    if v.is_nan() {
        return u32::MAX;
    }
    let bits = (v + 0.0).to_bits();
    bits ^ (((bits as i32) >> 31) as u32 | (1 << 31))
}

/// Appends to `pairs` the `(key ^ mask, position)` of the elements `first..first + len` of a lane
/// of `T`s at `p`, `stride` elements apart, whose key is at most `bar`.
///
/// # Safety
/// `p + i * stride` (`first <= i < first + len`) must be elements of `T` that are not written
/// meanwhile.
unsafe fn keys<T: Element>(
    p: *const u8,
    stride: isize,
    first: usize,
    len: usize,
    mask: u64,
    bar: u64,
    pairs: &mut Vec<(u64, usize)>,
) {
    let p = p.cast::<T>();
    // Branch-free: every pair is written past the end, and the end moves over the kept ones.
    pairs.reserve(len);
    let spare = pairs.spare_capacity_mut().as_mut_ptr();
    let mut n = 0;
    for i in first..first + len {
        // SAFETY: the caller's contract for the element; `n <= i - first < len`, and `len` slots
        // of spare capacity were reserved, so slot `n` is inside it.
        unsafe {
            let key = sort_key(*p.offset(i as isize * stride)) ^ mask;
            (*spare.add(n)).write((key, i));
            n += usize::from(key <= bar);
        }
    }
    // SAFETY: the first `n` spare slots were written above.
    unsafe { pairs.set_len(pairs.len() + n) };
}

/// `to[j * ts] = from[p_j * fs]` for the positions `p_j` of `pairs`, on words of width `W`.
///
/// # Safety
/// Every such offset must be inside its buffer, holding elements of `W`'s width; `to` is written by
/// no one else meanwhile and does not overlap `from`.
unsafe fn copy_values<W: Copy>(
    from: *const u8,
    fs: isize,
    to: *mut u8,
    ts: isize,
    pairs: &[(u64, usize)],
) {
    let (from, to) = (from.cast::<W>(), to.cast::<W>());
    for (j, &(_, i)) in pairs.iter().enumerate() {
        // SAFETY: the caller's contract.
        unsafe { *to.offset(j as isize * ts) = *from.offset(i as isize * fs) };
    }
}

/// The lowest `(key ^ mask, position)` of the elements `range` of a lane of `T`s at `p`, `stride`
/// elements apart, ties to the first position: the scan of `k = 1`. Each chunk's lowest key is
/// found without a store (a loop the compiler can vectorise), and only a chunk that beats the best
/// so far is read again for the position, which in a lane of random values happens a few times.
///
/// The chunks compare keys `K` ([`LaneKey`]); the pair returned has [`sort_key`]'s.
///
/// # Safety
/// As [`keys`], for the elements of `range`.
unsafe fn least<T: Element, K: LaneKey>(
    p: *const u8,
    stride: isize,
    range: Range<usize>,
    mask: u64,
) -> (u64, usize) {
    let p = p.cast::<T>();
    // SAFETY: the closures are called below for positions of `range` only, the caller's contract.
    let at = |i: usize| unsafe { *p.offset(i as isize * stride) };
    let pos = lowest(range, K::MAX, |i| K::of(at(i)) ^ K::mask(mask));
    (sort_key(at(pos)) ^ mask, pos)
}

/// The first position of `range` with the lowest `key`, by chunks (see [`least`]); `range.start`
/// when every key is `max`.
#[inline(always)]
fn lowest<K: Ord + Copy>(range: Range<usize>, max: K, key: impl Fn(usize) -> K) -> usize {
    const CHUNK: usize = 64;
    let (mut best, mut pos) = (max, range.start);
    let mut at = range.start;
    while at < range.end {
        let end = (at + CHUNK).min(range.end);
        let low = (at..end).map(&key).fold(max, K::min);
        if low < best {
            best = low;
            pos = (at..end)
                .find(|&i| key(i) == low)
                .unwrap_or_else(|| unreachable!("the chunk holds its lowest key"));
        }
        at = end;
    }
    pos
}

/// How many adjacent lanes [`across`] scans at once: its bests (a key and a `u32` a lane) stay
/// in L1, and each of their rows is a contiguous read of up to 8 KiB.
const ACROSS: usize = 1024;

/// The keys [`least`] and [`across`] compare: [`sort_key32`]'s for the types of at most 4 bytes
/// (four to a vector, with compares the baseline x86-64 has), [`sort_key`]'s for the others
/// ([`order_lanes`] picks them).
trait LaneKey:
    Copy
    + Ord
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
    const MAX: Self;
    fn of<T: Element>(x: T) -> Self;
    /// All ones where `on`, else zero.
    fn ones(on: bool) -> Self;
    /// The low bits of a [`sort_key`] mask.
    fn mask(m: u64) -> Self;
}

impl LaneKey for u32 {
    const MAX: Self = u32::MAX;
    #[inline(always)]
    fn of<T: Element>(x: T) -> Self {
        sort_key32(x)
    }
    #[inline(always)]
    fn ones(on: bool) -> Self {
        0u32.wrapping_sub(u32::from(on))
    }
    #[inline(always)]
    fn mask(m: u64) -> Self {
        m as u32
    }
}

impl LaneKey for u64 {
    const MAX: Self = u64::MAX;
    #[inline(always)]
    fn of<T: Element>(x: T) -> Self {
        sort_key(x)
    }
    #[inline(always)]
    fn ones(on: bool) -> Self {
        0u64.wrapping_sub(u64::from(on))
    }
    #[inline(always)]
    fn mask(m: u64) -> Self {
        m
    }
}

/// For `lanes` adjacent lanes of `len` elements of `T` at `p` (lane `b`'s element `j` at
/// `b + j * stride`), the first position of each lane's lowest key `^ mask` into `pos`: the
/// `k = 1` scan of lanes that run across memory (along a dim other than the last), one pass
/// over rows of adjacent elements instead of a strided walk per lane. Keys `K` as
/// [`LaneKey`] says for `T`; `lanes <= ACROSS`, `len <= u32::MAX`.
///
/// # Safety
/// `p + b + j * stride` (`b < lanes`, `j < len`) must be elements of `T` that are not written
/// meanwhile.
unsafe fn across<T: Element, K: LaneKey>(
    p: *const u8,
    stride: isize,
    lanes: usize,
    len: usize,
    mask: u64,
    pos: &mut [u32],
) {
    assert!(
        lanes <= ACROSS && lanes <= pos.len(),
        "order kernel: across takes at most ACROSS lanes"
    );
    let (p, mask) = (p.cast::<T>(), K::mask(mask));
    let mut best = [K::MAX; ACROSS];
    let (best, pos) = (&mut best[..lanes], &mut pos[..lanes]);
    // A lane whose keys are all MAX (NaNs, smallest first) keeps its first position.
    pos.fill(0);
    for j in 0..len {
        // SAFETY: row `j` of the block, `lanes` adjacent elements: the caller's contract.
        let row = unsafe { std::slice::from_raw_parts(p.offset(j as isize * stride), lanes) };
        // Masks rather than `if`s: LLVM makes a select of the old value a store under a branch
        // per lane, which short lanes of random values mispredict (3x slower on 21 classes).
        for ((b, q), &v) in best.iter_mut().zip(pos.iter_mut()).zip(row) {
            let key = K::of(v) ^ mask;
            let less = key < *b;
            let m = K::ones(less);
            *b = (key & m) | (*b & !m);
            let m = 0u32.wrapping_sub(u32::from(less));
            *q = (j as u32 & m) | (*q & !m);
        }
    }
}

type Keys = unsafe fn(*const u8, isize, usize, usize, u64, u64, &mut Vec<(u64, usize)>);
type Least = unsafe fn(*const u8, isize, Range<usize>, u64) -> (u64, usize);
type Across = unsafe fn(*const u8, isize, usize, usize, u64, &mut [u32]);
type Values = unsafe fn(*const u8, isize, *mut u8, isize, &[(u64, usize)]);

/// Whether the `k` best of a lane of `len` are found by a [`best`] scan rather than by ordering
/// every pair: when they are a small part of it.
fn scans(k: usize, len: usize) -> bool {
    k.saturating_mul(8) <= len
}

/// How many pairs a [`best`] scan keeps before it cuts them to the `k` best.
fn room(k: usize) -> usize {
    k.saturating_mul(2).max(k + 256)
}

/// The `k` best pairs (lowest keys) of the elements `range` of a lane into `kept` (cleared
/// first), unordered: a pair goes in while fewer than `k` pairs are known to be better, and
/// `kept` is cut to its `k` best whenever it reaches [`room`] (unless a whole stretch after a cut
/// beat the bar: then the rest goes in whole, to be cut once). A pair whose key equals the
/// `k`-th best one's may go in too: the pairs' order (positions break ties) decides at the cut.
///
/// # Safety
/// As [`keys`], for the elements of `range`.
unsafe fn best(
    keys: Keys,
    p: *const u8,
    stride: isize,
    range: Range<usize>,
    mask: u64,
    k: usize,
    kept: &mut Vec<(u64, usize)>,
) {
    kept.clear();
    let mut room = room(k);
    // The k-th best key so far, once `kept` has been cut to k.
    let mut bar = u64::MAX;
    let mut at = range.start;
    while at < range.end {
        let (before, n) = (kept.len(), (room - kept.len()).min(range.end - at));
        // SAFETY: the caller's contract, for `at..at + n` inside `range`.
        unsafe { keys(p, stride, at, n, mask, bar, kept) };
        if bar != u64::MAX && before == k && n == room - k && kept.len() - before == n {
            // A whole stretch after a cut beat the bar (an ascending lane for the largest): the
            // rest is kept whole and ordered once, rather than cut every `room - k` elements.
            room = usize::MAX;
        } else if kept.len() >= room {
            kept.select_nth_unstable(k - 1);
            kept.truncate(k);
            bar = kept[k - 1].0;
        }
        at += n;
    }
    if kept.len() > k {
        kept.select_nth_unstable(k - 1);
        kept.truncate(k);
    }
}

/// [`best`] over a lane of `len` in `ways` pieces on rayon's threads, their pairs together in
/// `kept`.
///
/// # Safety
/// As [`keys`], for the elements `0..len`.
#[allow(clippy::too_many_arguments)]
unsafe fn split_best(
    (keys, least): (Keys, Least),
    p: SharedPtr<u8>,
    stride: isize,
    len: usize,
    mask: u64,
    k: usize,
    ways: usize,
    kept: &mut Vec<(u64, usize)>,
) {
    let step = len.div_ceil(ways.max(1)).max(room(k));
    let mut parts: Vec<Vec<(u64, usize)>> = (0..len.div_ceil(step)).map(|_| Vec::new()).collect();
    let slots = SharedPtr(parts.as_mut_ptr());
    crate::plan::each((0..parts.len()).collect(), true, |w: usize| {
        let (p, slots) = (p, slots);
        // SAFETY: task `w` alone writes slot `w` of `parts`, which outlives the tasks; the scan
        // reads the elements of its piece, inside `0..len` (the caller's contract).
        unsafe {
            let range = w * step..((w + 1) * step).min(len);
            let slot = &mut *slots.0.add(w);
            if k == 1 {
                slot.clear();
                slot.push(least(p.0.cast_const(), stride, range, mask));
            } else {
                best(keys, p.0.cast_const(), stride, range, mask, k, slot);
            }
        }
    });
    kept.clear();
    for part in parts {
        kept.extend(part);
    }
}

/// Orders the pairs of one lane, keeping the `k` best (lowest keys) first; ties cannot occur
/// (the positions differ), so every order below is fully determined and stable.
fn order(pairs: &mut Vec<(u64, usize)>, k: usize) {
    if k < pairs.len() {
        if k == 0 {
            pairs.clear();
            return;
        }
        pairs.select_nth_unstable(k - 1);
        pairs.truncate(k);
    }
    if pairs.len() >= PAR_SORT_MIN {
        pairs.par_sort_unstable();
    } else {
        pairs.sort_unstable();
    }
}

/// Orders every lane of `x` along `dim`, keeping the `k` best of each (ascending, or descending
/// when `flip`), into `indices` and `values` (if given), whose shapes are `x`'s with `dim`'s
/// length `k`. Big inputs are split between threads by lanes; each lane is ordered the same way
/// whichever thread runs it.
///
/// Preconditions (asserted): equal ranks, `dim` an axis, `k` no more than the lane length, and
/// the outputs' shapes as said.
pub(crate) fn order_lanes<T: Element>(
    x: &ArrayView<'_, T, IxDyn>,
    dim: usize,
    k: usize,
    flip: bool,
    values: Option<&mut ArrayViewMut<'_, T, IxDyn>>,
    indices: &mut ArrayViewMut<'_, i64, IxDyn>,
) {
    let vals = values.map(|v| {
        assert_eq!(v.shape(), indices.shape(), "order kernel: values shape");
        (SharedPtr(v.as_mut_ptr().cast::<u8>()), v.strides().to_vec())
    });
    let walk = Walk {
        shape: x.shape(),
        x: (SharedPtr(x.as_ptr() as *mut u8), x.strides()),
        size: std::mem::size_of::<T>() as isize,
        values: vals.as_ref().map(|(p, s)| (*p, &s[..])),
        indices: (
            SharedPtr(indices.as_mut_ptr()),
            indices.strides(),
            indices.shape(),
        ),
        dim,
        k,
        mask: if flip { u64::MAX } else { 0 },
    };
    let (least, across): (Least, Across) = if std::mem::size_of::<T>() <= 4 {
        (least::<T, u32>, across::<T, u32>)
    } else {
        (least::<T, u64>, across::<T, u64>)
    };
    walk.run(
        (keys::<T>, least, across),
        copy_values::<<T as Plain>::Word>,
    );
}

/// The operands of [`order_lanes`] as addresses and strides (in elements).
struct Walk<'a> {
    shape: &'a [usize],
    x: (SharedPtr<u8>, &'a [isize]),
    /// The size of an element of x and of values, in bytes.
    size: isize,
    values: Option<(SharedPtr<u8>, &'a [isize])>,
    indices: (SharedPtr<i64>, &'a [isize], &'a [usize]),
    dim: usize,
    k: usize,
    mask: u64,
}

impl Walk<'_> {
    fn run(&self, (keys, least, across): (Keys, Least, Across), values: Values) {
        let (dim, k) = (self.dim, self.k);
        let nd = self.shape.len();
        let (ip, istrides, ishape) = self.indices;
        assert!(
            dim < nd && ishape.len() == nd && self.x.1.len() == nd && k <= self.shape[dim],
            "order kernel: rank, dim or k"
        );
        assert!(
            (0..nd).all(|d| ishape[d] == if d == dim { k } else { self.shape[d] }),
            "order kernel: output shape"
        );
        let vstrides = self.values.map_or(vec![0; nd], |(_, s)| s.to_vec());
        assert_eq!(vstrides.len(), nd, "order kernel: values rank");
        let without =
            |s: &[isize]| -> Vec<isize> { (0..nd).filter(|&d| d != dim).map(|d| s[d]).collect() };
        let lanes_shape: Vec<usize> = (0..nd)
            .filter(|&d| d != dim)
            .map(|d| self.shape[d])
            .collect();
        let lanes = Nest::<3>::new(
            &lanes_shape,
            [&without(self.x.1), &without(istrides), &without(&vstrides)],
            None,
        );
        let len = self.shape[dim];
        if lanes.total == 0 || k == 0 {
            return;
        }
        let parallel = lanes.total.saturating_mul(len) >= 2 * GRAIN
            && lanes.total > 1
            && rayon::current_num_threads() > 1;
        let tasks = if parallel {
            rayon::current_num_threads() * 4
        } else {
            1
        };
        let parts = lanes.pieces(tasks, 1);
        // A long lane alone (or one of fewer lanes than threads, which run one after the other
        // then): its scan is split between the threads, whose k best are merged.
        let split =
            !parallel && rayon::current_num_threads() > 1 && scans(k, len) && len >= 2 * GRAIN;
        let ways = rayon::current_num_threads() * 4;
        let [xi, ii, vi] = lanes.inner.strides;
        let (xd, id, vd) = (self.x.1[dim], istrides[dim], vstrides[dim]);
        let (xp, vp, size, mask) = (self.x.0, self.values.map(|(p, _)| p), self.size, self.mask);
        // `k = 1` over lanes adjacent in memory (along a dim other than the last) scans blocks
        // of them at once.
        let across = (k == 1 && xi == 1 && !split && len <= u32::MAX as usize).then_some(across);
        let body = |pieces: Vec<([isize; 3], Range<usize>)>| {
            let (xp, ip, vp) = (xp, ip, vp);
            let mut pairs = Vec::with_capacity(if scans(k, len) { room(k).min(len) } else { len });
            let mut pos = vec![0u32; if across.is_some() { ACROSS } else { 0 }];
            // Writes the positions of `pairs` (and their values) to the outputs' lane `l`.
            let write = |base: [isize; 3], l: isize, pairs: &[(u64, usize)]| {
                // SAFETY: called below only with a lane `l` of this task's pieces, their offsets
                // `base`, and at most `k` pairs of positions below `len`: offsets inside x and
                // the outputs, in lanes no other task writes (see the loop's comment).
                unsafe {
                    let xl = xp.0.offset((base[0] + l * xi) * size).cast_const();
                    let il = ip.0.offset(base[1] + l * ii);
                    for (j, &(_, p)) in pairs.iter().enumerate() {
                        *il.offset(j as isize * id) = p as i64;
                    }
                    if let Some(vp) = vp {
                        let vl = vp.0.offset((base[2] + l * vi) * size);
                        values(xl, xd, vl, vd, pairs);
                    }
                }
            };
            for (base, r) in pieces {
                let mut l = r.start;
                while l < r.end {
                    let block = if across.is_some() {
                        (r.end - l).min(ACROSS)
                    } else {
                        1
                    };
                    // SAFETY: `base + l * inner` is the offset (in elements) of a position of the
                    // lanes' shape, x's without `dim`, which the outputs share (asserted); along
                    // `dim`, x has `len` positions and the outputs `k` (asserted), and `order`
                    // keeps at most `k` pairs, each with a position below `len` (as `across`
                    // gives). x's and the values' offsets are scaled by the size of their
                    // elements, which `keys`, `across` and `copy_values` read and write as `T`
                    // and as words of its width; `across` reads lanes `l..l + block` of this
                    // piece, adjacent (inner stride 1). Pieces cover each lane once, so no two
                    // tasks write one element of the outputs (`&mut` views, not x); x is only
                    // read.
                    unsafe {
                        let xl = xp.0.offset((base[0] + l as isize * xi) * size).cast_const();
                        if let (Some(across), true) = (across, block > 1) {
                            across(xl, xd, block, len, mask, &mut pos);
                            for (b, &p) in pos[..block].iter().enumerate() {
                                write(base, (l + b) as isize, &[(0, p as usize)]);
                            }
                            l += block;
                            continue;
                        }
                        if split {
                            split_best(
                                (keys, least),
                                SharedPtr(xl.cast_mut()),
                                xd,
                                len,
                                mask,
                                k,
                                ways,
                                &mut pairs,
                            );
                        } else if k == 1 {
                            pairs.clear();
                            pairs.push(least(xl, xd, 0..len, mask));
                        } else if scans(k, len) {
                            best(keys, xl, xd, 0..len, mask, k, &mut pairs);
                        } else {
                            pairs.clear();
                            keys(xl, xd, 0, len, mask, u64::MAX, &mut pairs);
                        }
                        order(&mut pairs, k);
                        write(base, l as isize, &pairs);
                    }
                    l += 1;
                }
            }
        };
        crate::plan::each(parts, parallel, body);
    }
}

#[cfg(test)]
mod tests {
    use super::super::sized;
    use super::*;
    use ndarray::{ArrayD, Axis, Dimension};

    #[test]
    fn half_keys_order_every_value_as_sort_cmp() {
        // Sorted by the comparator, each pair of neighbours must compare the same by both keys:
        // by transitivity every pair does (NaNs of any payload and sign last, -0.0 = 0.0).
        fn check<T: Element>(mut all: Vec<T>) {
            all.sort_by(|a, b| T::sort_cmp(*a, *b));
            for w in all.windows(2) {
                let want = T::sort_cmp(w[0], w[1]);
                assert_eq!(sort_key(w[0]).cmp(&sort_key(w[1])), want, "{:?}", w);
                assert_eq!(sort_key32(w[0]).cmp(&sort_key32(w[1])), want, "{:?}", w);
            }
        }
        check((0..=u16::MAX).map(half::f16::from_bits).collect());
        check((0..=u16::MAX).map(half::bf16::from_bits).collect());
    }

    /// The definition: each lane's positions sorted by (key, position), the first `k` kept.
    fn reference(x: &ArrayD<i16>, dim: usize, k: usize, flip: bool) -> (ArrayD<i16>, ArrayD<i64>) {
        let mut shape = x.shape().to_vec();
        shape[dim] = k;
        let mut values = ArrayD::from_elem(shape.clone(), 0i16);
        let mut indices = ArrayD::from_elem(shape, 0i64);
        for ((lane, mut v), mut i) in x
            .lanes(Axis(dim))
            .into_iter()
            .zip(values.lanes_mut(Axis(dim)))
            .zip(indices.lanes_mut(Axis(dim)))
        {
            let mut p: Vec<(i16, usize)> = lane.iter().copied().zip(0..).collect();
            p.sort_by_key(|&(x, j)| (if flip { -i32::from(x) } else { i32::from(x) }, j));
            for (j, &(x, at)) in p.iter().take(k).enumerate() {
                v[j] = x;
                i[j] = at as i64;
            }
        }
        (values, indices)
    }

    /// A repeatable stream of `n` distinct values around 0 (many ties).
    fn values(mut seed: u64, n: u64) -> impl FnMut() -> i16 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 40) % n) as i16 - (n / 2) as i16
        }
    }

    /// `order_lanes` into fresh outputs: `(values, indices)`.
    fn ordered(
        x: &ArrayView<'_, i16, IxDyn>,
        dim: usize,
        k: usize,
        flip: bool,
    ) -> (ArrayD<i16>, ArrayD<i64>) {
        let mut shape = x.shape().to_vec();
        shape[dim] = k;
        let mut values = ArrayD::from_elem(shape.clone(), 9i16);
        let mut indices = ArrayD::from_elem(shape, -1i64);
        order_lanes(
            x,
            dim,
            k,
            flip,
            Some(&mut values.view_mut()),
            &mut indices.view_mut(),
        );
        (values, indices)
    }

    #[test]
    fn scans_of_long_lanes_keep_the_k_best_with_ties_in_position_order() {
        // Few distinct values, so that ties straddle every block and every cut of the kept
        // pairs; one lane alone (split between threads) and a few lanes of one thread each.
        let mut next = values(11, 5);
        for shape in [vec![sized(100_000, 700)], vec![3, sized(20_000, 500)]] {
            let dim = shape.len() - 1;
            let x = ArrayD::from_shape_fn(shape.clone(), |_| next());
            let len = shape[dim];
            for k in [1, 7, sized(100, 20), len / 8] {
                for flip in [false, true] {
                    assert!(scans(k, len));
                    let (want_v, want_i) = reference(&x, dim, k, flip);
                    let (values, indices) = ordered(&x.view(), dim, k, flip);
                    assert_eq!(indices, want_i, "{shape:?}, k {k}, flip {flip}");
                    assert_eq!(values, want_v, "{shape:?}, k {k}, flip {flip}");
                }
            }
        }
    }

    #[test]
    fn every_lane_keeps_its_k_best_in_stable_order_whatever_the_layout() {
        let (a, len, b) = (sized(40, 3), sized(300, 9), sized(30, 4));
        let mut next = values(5, 7);
        for dim in 0..3 {
            let mut shape = vec![a, b];
            shape.insert(dim, len);
            let x = ArrayD::from_shape_fn(shape.clone(), |_| next());
            // The same values, transposed in memory.
            let xt = x.t().as_standard_layout().into_owned();
            let xt = xt.t();
            for (k, flip) in [
                (len, false),
                (len, true),
                (len / 3, true),
                (1, false),
                (0, true),
            ] {
                let (want_v, want_i) = reference(&x, dim, k, flip);
                for view in [x.view(), xt.view()] {
                    let mut oshape = shape.clone();
                    oshape[dim] = k;
                    let (values, indices) = ordered(&view, dim, k, flip);
                    assert_eq!(values, want_v, "dim {dim}, k {k}, flip {flip}");
                    assert_eq!(indices, want_i, "dim {dim}, k {k}, flip {flip}");
                    // Indices alone, into a transposed output.
                    let mut it = ArrayD::from_elem(oshape.clone(), -1i64);
                    let mut it_view = it.view_mut();
                    it_view.invert_axis(Axis(0));
                    order_lanes(&view, dim, k, flip, None, &mut it_view);
                    it.invert_axis(Axis(0));
                    assert_eq!(it, want_i, "indices alone, dim {dim}, k {k}");
                }
            }
        }
    }

    /// The first position of the best element of each lane by the definition (`sort_cmp`, the
    /// largest when `flip`, ties to the first position).
    fn first_best<T: Element>(x: &ArrayD<T>, dim: usize, flip: bool) -> ArrayD<i64> {
        let lanes = x.lanes(Axis(dim)).into_iter().map(|lane| {
            let mut at = 0;
            for (j, &v) in lane.iter().enumerate() {
                let o = T::sort_cmp(v, lane[at]);
                let better = if flip { o.is_gt() } else { o.is_lt() };
                if better {
                    at = j;
                }
            }
            at as i64
        });
        let mut shape = x.shape().to_vec();
        shape[dim] = 1;
        ArrayD::from_shape_vec(shape, lanes.collect()).unwrap()
    }

    /// `k = 1` runs its own scan (`least`): 32-bit keys for the types of at most 4 bytes, 64-bit
    /// ones for the others. Both find the first position of the best element, NaN the largest and
    /// `-0.0` equal to `0.0`, wherever in the lane it is (first, last, on either side of a chunk
    /// boundary), in a lane alone (split between threads) and in many, along either axis.
    #[test]
    fn one_best_is_the_first_position_of_the_best_element_for_every_width() {
        fn check<T: Element>(values: &[T], name: &str) {
            let len = sized(70_000, 300);
            for (lanes, special) in [(1usize, 0usize), (3, 63), (5, 64), (2, len - 1), (4, 1)] {
                // Values from the list, with NaN-free repeats, and the list's extremes planted at
                // `special` (and once more later, to check ties keep the first).
                let mut seed = (lanes * 31 + special) as u64;
                let x = ArrayD::from_shape_fn(vec![lanes, len], |ix| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let pick = if ix[1] == special || ix[1] == (special + len / 2) % len {
                        ix[0] % 2
                    } else {
                        2 + (seed >> 33) as usize % (values.len() - 2)
                    };
                    values[pick]
                });
                // The lanes along dim 1, along dim 0 a lane apart in memory, and along dim 0
                // side by side (scanned as a block, `across`).
                let side = x.t().as_standard_layout().into_owned();
                for flip in [false, true] {
                    for (view, dim) in [(x.view(), 1), (x.t().into_dyn(), 0), (side.view(), 0)] {
                        let mut shape = view.shape().to_vec();
                        shape[dim] = 1;
                        let mut got = ArrayD::from_elem(shape.clone(), -1i64);
                        order_lanes(&view, dim, 1, flip, None, &mut got.view_mut());
                        let want = first_best(&view.to_owned(), dim, flip);
                        let what = format!("{name}: lanes {lanes}, special {special}, flip {flip}");
                        assert_eq!(got, want, "{what}, dim {dim}");
                        // With the values, which are those at the positions.
                        let mut vals = ArrayD::from_elem(shape, values[2]);
                        order_lanes(
                            &view,
                            dim,
                            1,
                            flip,
                            Some(&mut vals.view_mut()),
                            &mut got.view_mut(),
                        );
                        // Bits tell -0.0 from 0.0; any NaN is one (a conversion of a NaN may
                        // give another NaN, as Miri's do).
                        let bits = |v: T| {
                            if v.is_nan() {
                                u64::MAX
                            } else {
                                v.to_f64().to_bits()
                            }
                        };
                        let at = want.indexed_iter().map(|(ix, &p)| {
                            let mut ix = ix.slice().to_vec();
                            ix[dim] = p as usize;
                            bits(view[IxDyn(&ix)])
                        });
                        let got_bits: Vec<u64> = vals.iter().map(|&v| bits(v)).collect();
                        assert_eq!(
                            got_bits,
                            at.collect::<Vec<_>>(),
                            "{what}, dim {dim}: values"
                        );
                    }
                }
            }
            // More adjacent lanes than one block holds.
            let x = ArrayD::from_shape_fn(vec![sized(40, 9), ACROSS * 2 + 37], |ix| {
                values[(ix[0] * 7 + ix[1] * 13) % values.len()]
            });
            for flip in [false, true] {
                let mut got = ArrayD::from_elem(vec![1, ACROSS * 2 + 37], -1i64);
                order_lanes(&x.view(), 0, 1, flip, None, &mut got.view_mut());
                assert_eq!(
                    got,
                    first_best(&x, 0, flip),
                    "{name}: many lanes, flip {flip}"
                );
            }
        }
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        check(&[-inf, nan, -0.0, 0.0, 1.5, -2.25, 3.0, inf], "f32");
        check(
            &[f64::NEG_INFINITY, f64::NAN, -0.0, 0.0, 1e300, -7.5],
            "f64",
        );
        check(&[i32::MIN, i32::MAX, -1, 0, 1, 7], "i32");
        check(&[0u32, u32::MAX, 1, 1 << 31, (1 << 31) - 1], "u32");
        check(&[i64::MIN, i64::MAX, -1, 0, 1 << 62], "i64");
        check(&[0u64, u64::MAX, 1, 1 << 63, (1 << 63) - 1], "u64");
        check(&[i8::MIN, i8::MAX, -1, 0, 5], "i8");
        let h = |v: f32| half::f16::from_f32(v);
        check(
            &[h(-65504.0), h(f32::NAN), h(-0.0), h(0.0), h(0.5), h(-1.0)],
            "f16",
        );
        check(&[false, true, false, true], "bool");
    }
}
