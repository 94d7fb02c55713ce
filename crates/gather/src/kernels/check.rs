//! The scan of an index for a value out of range, which every op that must fail before it writes
//! runs ahead of its loop.
//!
//! The scan is branch-free in blocks so that it vectorises. SSE2, the x86-64 baseline, has no
//! 64-bit comparison, so for `i64` indices the blocks ran one value a compare; where the CPU has
//! AVX2 (tested at run time) they run in a function compiled for it, four values an instruction.

use crate::index::IndexElem;

/// Whether `bad` holds for any value of `s`, split over the thread pool for long slices.
pub(crate) fn any_bad<I: IndexElem>(s: &[I], bad: impl Fn(i64) -> bool + Sync) -> bool {
    use rayon::prelude::*;
    const PARALLEL: usize = 256 * 1024;
    if s.len() >= PARALLEL && rayon::current_num_threads() > 1 {
        s.par_chunks(PARALLEL / 4).any(|c| scan(c, &bad))
    } else {
        scan(s, &bad)
    }
}

fn scan<I: IndexElem>(s: &[I], bad: &impl Fn(i64) -> bool) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has the feature the function is compiled for (just tested).
        return unsafe { scan_avx2(s, bad) };
    }
    blocks(s, bad)
}

/// The scan proper: blocks of values folded without a branch, a branch per block.
#[inline(always)]
fn blocks<I: IndexElem>(s: &[I], bad: &impl Fn(i64) -> bool) -> bool {
    const BLOCK: usize = 1024;
    s.chunks(BLOCK)
        .any(|c| c.iter().fold(false, |acc, v| acc | bad(v.to_i64())))
}

/// [`blocks`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2")]
unsafe fn scan_avx2<I: IndexElem>(s: &[I], bad: &impl Fn(i64) -> bool) -> bool {
    blocks(s, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_bad_value_at_any_place_in_any_block() {
        let n = 1000i64;
        let strict = |v: i64| (v as u64) >= (n as u64);
        // Long enough for several blocks and, with `PARALLEL`, for the pool.
        let len = crate::kernels::sized(300_000, 3000);
        let good: Vec<i64> = (0..len as i64).map(|i| i % n).collect();
        assert!(!any_bad(&good, strict));
        for at in [0, 1, 1023, 1024, len / 2, len - 1] {
            for bad in [-1, n, i64::MIN, i64::MAX] {
                let mut s = good.clone();
                s[at] = bad;
                assert!(any_bad(&s, strict), "{bad} at {at}");
            }
        }
        let narrow: Vec<i32> = good.iter().map(|&v| v as i32).collect();
        assert!(!any_bad(&narrow, strict));
        let mut s = narrow.clone();
        s[len - 1] = -1;
        assert!(any_bad(&s, strict));
    }
}
