//! Rule R4b, property-tested: an in-place op that fails changes nothing.
//!
//! Every case is built to fail in one of the ways users hit (an out-of-range index value placed
//! *last*, after many valid ones that a non-atomic kernel would already have written; a dim out of
//! range; a source smaller than the index; an index of the wrong rank; a mask that does not
//! broadcast; too few source elements), on random shapes. Each in-place op must return the error
//! of the right kind and leave the destination bitwise as it was.
//!
//! The inputs (index, source, mask) are borrowed immutably by every op, so the type system already
//! guarantees an error cannot consume or corrupt them; the tests still compare them with copies
//! taken before the call, so that a future `unsafe` shortcut that broke this would be caught.

use gather::ops::scatter::LegacyReduce;
use gather::{ErrorKind, Reduce};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

/// A small deterministic generator, so that one proptest seed describes a whole case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn shape(&mut self, nd: usize, lo: usize) -> Vec<usize> {
        (0..nd).map(|_| lo + self.below(5)).collect()
    }
    fn floats(&mut self, shape: &[usize]) -> ArrayD<f32> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| self.below(2000) as f32 * 0.25 - 250.0)
    }
}

/// How a case is made to fail.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The last index value in row-major order is out of range (one of several bad values).
    Value,
    /// `dim` is out of range.
    Dim,
    /// The source is smaller than the index along one axis.
    SmallSource,
    /// The index has another rank than the destination.
    Rank,
}

const FAULTS: [Fault; 4] = [Fault::Value, Fault::Dim, Fault::SmallSource, Fault::Rank];

fn bad_value(rng: &mut Rng, size: usize) -> i64 {
    let n = size as i64;
    match rng.below(6) {
        0 => n,
        1 => n + 1 + rng.below(1000) as i64,
        2 => i64::MAX,
        3 => i64::MIN,
        4 => -n - 1,
        _ => -1,
    }
}

fn bitwise_eq(a: &ArrayD<f32>, b: &ArrayD<f32>) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The destination after a failed call must equal the snapshot, and the call must have failed
/// with one of `kinds`.
fn assert_unchanged(
    op: &str,
    fault: Fault,
    result: gather::Result<()>,
    kinds: &[ErrorKind],
    before: &ArrayD<f32>,
    after: &ArrayD<f32>,
) -> Result<(), TestCaseError> {
    let err = match result {
        Ok(()) => return Err(TestCaseError::fail(format!("{op} {fault:?}: succeeded"))),
        Err(e) => e,
    };
    prop_assert!(
        kinds.contains(&err.kind()),
        "{op} {fault:?}: unexpected kind {:?}: {err}",
        err.kind()
    );
    prop_assert!(
        bitwise_eq(before, after),
        "{op} {fault:?}: the destination changed on error ({err})"
    );
    Ok(())
}

/// A scatter-family case: destination, dim, index and source (same rank, index within source).
struct ScatterCase {
    dst: ArrayD<f32>,
    dim: isize,
    index: ArrayD<i64>,
    src: ArrayD<f32>,
    kinds: Vec<ErrorKind>,
}

fn scatter_case(rng: &mut Rng, fault: Fault) -> ScatterCase {
    let nd = 1 + rng.below(3);
    let dst_shape = rng.shape(nd, 1);
    let d = rng.below(nd);
    // The index fits in the destination on the non-dim axes; any length along dim.
    let mut index_shape: Vec<usize> = dst_shape.iter().map(|&n| 1 + rng.below(n)).collect();
    index_shape[d] = 1 + rng.below(6);
    let size = dst_shape[d];
    let mut index = ArrayD::from_shape_fn(IxDyn(&index_shape), |_| rng.below(size) as i64);
    let mut src_shape = index_shape.clone();
    let mut dim = d as isize;
    let kinds;
    match fault {
        Fault::Value => {
            let last = index.len() - 1;
            let v = bad_value(rng, size);
            index.as_slice_mut().unwrap()[last] = v;
            kinds = vec![ErrorKind::IndexOutOfBounds];
        }
        Fault::Dim => {
            dim = if rng.below(2) == 0 {
                nd as isize + rng.below(3) as isize
            } else {
                -(nd as isize) - 1 - rng.below(3) as isize
            };
            kinds = vec![ErrorKind::DimOutOfRange];
        }
        Fault::SmallSource => {
            // One axis of the index gets at least 2 entries and the source one fewer. Along a
            // non-dim axis the index must stay within the destination, so a size-1 destination
            // axis falls back to dim.
            let mut a = rng.below(nd);
            if a != d && dst_shape[a] < 2 {
                a = d;
            }
            index_shape[a] = index_shape[a].max(2);
            index = ArrayD::from_shape_fn(IxDyn(&index_shape), |_| rng.below(size) as i64);
            src_shape = index_shape.clone();
            src_shape[a] -= 1;
            kinds = vec![ErrorKind::ShapeMismatch];
        }
        Fault::Rank => {
            let extra = if nd == 1 { 2 } else { nd - 1 };
            let shape: Vec<usize> = (0..extra).map(|_| 1).collect();
            index = ArrayD::from_shape_fn(IxDyn(&shape), |_| 0);
            src_shape = dst_shape.clone();
            kinds = vec![ErrorKind::RankMismatch];
        }
    }
    let dst = rng.floats(&dst_shape);
    let src = rng.floats(&src_shape);
    ScatterCase {
        dst,
        dim,
        index,
        src,
        kinds,
    }
}

/// An index_* case: destination, dim, 1-D index and a source shaped like the destination with
/// the index's length along dim.
struct IndexCase {
    dst: ArrayD<f32>,
    dim: isize,
    index: ArrayD<i64>,
    src: ArrayD<f32>,
    kinds: Vec<ErrorKind>,
}

fn index_case(rng: &mut Rng, fault: Fault) -> IndexCase {
    let nd = 1 + rng.below(3);
    let dst_shape = rng.shape(nd, 1);
    let d = rng.below(nd);
    let size = dst_shape[d];
    let len = 1 + rng.below(6);
    let mut index = ArrayD::from_shape_fn(IxDyn(&[len]), |_| rng.below(size) as i64);
    let mut src_shape = dst_shape.clone();
    src_shape[d] = len;
    let mut dim = d as isize;
    let kinds;
    match fault {
        Fault::Value => {
            // index_fill wraps negatives (-size..size is valid), so use non-negative bad values
            // or values below -size.
            let v = match rng.below(4) {
                0 => size as i64,
                1 => i64::MAX,
                2 => i64::MIN,
                _ => -(size as i64) - 1,
            };
            index[[len - 1]] = v;
            kinds = vec![ErrorKind::IndexOutOfBounds];
        }
        Fault::Dim => {
            dim = nd as isize + rng.below(3) as isize;
            kinds = vec![ErrorKind::DimOutOfRange];
        }
        Fault::SmallSource => {
            // The source disagrees with the destination on a non-dim axis, or with the index
            // length along dim.
            let a = rng.below(nd);
            src_shape[a] += 1;
            kinds = vec![ErrorKind::ShapeMismatch];
        }
        Fault::Rank => {
            index = ArrayD::from_shape_fn(IxDyn(&[1, len]), |_| 0);
            kinds = vec![ErrorKind::RankMismatch];
        }
    }
    IndexCase {
        dst: rng.floats(&dst_shape),
        dim,
        index,
        src: rng.floats(&src_shape),
        kinds,
    }
}

const REDUCES: [Reduce; 5] = [
    Reduce::Sum,
    Reduce::Prod,
    Reduce::Mean,
    Reduce::Amax,
    Reduce::Amin,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn failed_scatter_family_calls_leave_the_destination_untouched(seed in any::<u64>(), f in 0..4usize) {
        let fault = FAULTS[f];
        let mut rng = Rng(seed);
        let c = scatter_case(&mut rng, fault);
        let (index0, src0) = (c.index.clone(), c.src.clone());
        let kinds = c.kinds.clone();

        let mut d = c.dst.clone();
        let r = gather::scatter_inplace(&mut d, c.dim, &c.index, &c.src);
        assert_unchanged("scatter_", fault, r, &kinds, &c.dst, &d)?;

        let mut d = c.dst.clone();
        let r = gather::scatter_add_inplace(&mut d, c.dim, &c.index, &c.src);
        assert_unchanged("scatter_add_", fault, r, &kinds, &c.dst, &d)?;

        for reduce in REDUCES {
            for include_self in [true, false] {
                let mut d = c.dst.clone();
                let r = gather::scatter_reduce_inplace(&mut d, c.dim, &c.index, &c.src, reduce, include_self);
                assert_unchanged(&format!("scatter_reduce_ {reduce:?} {include_self}"), fault, r, &kinds, &c.dst, &d)?;
            }
        }
        for reduce in [LegacyReduce::Add, LegacyReduce::Multiply] {
            let mut d = c.dst.clone();
            let r = gather::scatter_reduce_inplace(&mut d, c.dim, &c.index, &c.src, gather::Reduce::from(reduce), true);
            assert_unchanged(&format!("scatter_ reduce={reduce:?}"), fault, r, &kinds, &c.dst, &d)?;
        }
        if fault != Fault::SmallSource {
            // The value forms have no source.
            let mut d = c.dst.clone();
            let r = gather::scatter_inplace(&mut d, c.dim, &c.index, 7.5);
            assert_unchanged("scatter_ (value)", fault, r, &kinds, &c.dst, &d)?;
            let mut d = c.dst.clone();
            let r = gather::scatter_reduce_inplace(&mut d, c.dim, &c.index, 7.5, gather::Reduce::Sum, true);
            assert_unchanged("scatter_ (value, reduce=add)", fault, r, &kinds, &c.dst, &d)?;
        }
        prop_assert_eq!(index0, c.index);
        prop_assert!(bitwise_eq(&src0, &c.src));
    }

    #[test]
    fn failed_index_family_calls_leave_the_destination_untouched(seed in any::<u64>(), f in 0..4usize) {
        let fault = FAULTS[f];
        let mut rng = Rng(seed);
        let c = index_case(&mut rng, fault);
        let (index0, src0) = (c.index.clone(), c.src.clone());

        let mut d = c.dst.clone();
        let r = gather::index_add_inplace(&mut d, c.dim, &c.index, &c.src, 2.0);
        assert_unchanged("index_add_", fault, r, &c.kinds, &c.dst, &d)?;

        let mut d = c.dst.clone();
        let r = gather::index_copy_inplace(&mut d, c.dim, &c.index, &c.src);
        assert_unchanged("index_copy_", fault, r, &c.kinds, &c.dst, &d)?;

        for reduce in [Reduce::Prod, Reduce::Mean, Reduce::Amax, Reduce::Amin] {
            for include_self in [true, false] {
                let mut d = c.dst.clone();
                let r = gather::index_reduce_inplace(&mut d, c.dim, &c.index, &c.src, reduce, include_self);
                assert_unchanged(&format!("index_reduce_ {reduce:?}"), fault, r, &c.kinds, &c.dst, &d)?;
            }
        }
        if fault != Fault::SmallSource {
            let mut d = c.dst.clone();
            let r = gather::index_fill_inplace(&mut d, c.dim, &c.index, -3.0);
            assert_unchanged("index_fill_", fault, r, &c.kinds, &c.dst, &d)?;
        }
        prop_assert_eq!(index0, c.index);
        prop_assert!(bitwise_eq(&src0, &c.src));
    }

    #[test]
    fn failed_put_calls_leave_the_destination_untouched(seed in any::<u64>(), small_source in any::<bool>()) {
        let mut rng = Rng(seed);
        let nd = 1 + rng.below(3);
        let shape = rng.shape(nd, 1);
        let dst = rng.floats(&shape);
        let n = dst.len();
        let len = 1 + rng.below(12);
        // put wraps negatives: -n..n is valid.
        let mut index = ArrayD::from_shape_fn(IxDyn(&[len]), |_| rng.below(2 * n) as i64 - n as i64);
        let (src, kind) = if small_source {
            (rng.floats(&[len - 1]), ErrorKind::ShapeMismatch)
        } else {
            let v = match rng.below(4) { 0 => n as i64, 1 => -(n as i64) - 1, 2 => i64::MIN, _ => i64::MAX };
            index[[len - 1]] = v;
            (rng.floats(&[len]), ErrorKind::IndexOutOfBounds)
        };
        for accumulate in [false, true] {
            let mut d = dst.clone();
            let r = gather::put_inplace(&mut d, &index, &src, accumulate);
            assert_unchanged(&format!("put_ accumulate={accumulate}"), Fault::Value, r, &[kind], &dst, &d)?;
        }
    }

    #[test]
    fn failed_masked_scatter_calls_leave_the_destination_untouched(seed in any::<u64>(), bad_shape in any::<bool>()) {
        let mut rng = Rng(seed);
        let nd = 1 + rng.below(3);
        let shape = rng.shape(nd, 1);
        let dst = rng.floats(&shape);
        let (mask, src) = if bad_shape {
            // A mask that does not broadcast against the destination.
            let mut mshape = shape.clone();
            mshape[rng.below(nd)] += 1;
            let mask = ArrayD::from_shape_fn(IxDyn(&mshape), |_| rng.below(2) == 0);
            (mask, rng.floats(&[dst.len() + 5]))
        } else {
            // At least one true; one source element too few.
            let mut mask = ArrayD::from_shape_fn(IxDyn(&shape), |_| rng.below(2) == 0);
            let last = mask.len() - 1;
            mask.as_slice_mut().unwrap()[last] = true;
            let count = mask.iter().filter(|&&m| m).count();
            (mask, rng.floats(&[count - 1]))
        };
        let mut d = dst.clone();
        let r = gather::masked_scatter_inplace(&mut d, &mask, &src);
        assert_unchanged("masked_scatter_", Fault::SmallSource, r, &[ErrorKind::ShapeMismatch], &dst, &d)?;
    }
}
