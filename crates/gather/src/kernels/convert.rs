//! Runs of `f16` and `bf16` converted to and from `f32`: the widening and rounding of the
//! 16-bit float reductions, which add in `f32`.
//!
//! `half`'s slice conversions test for F16C once per run but then call a function per 8
//! elements (a `#[target_feature]` function cannot be inlined into baseline code). Here the
//! whole run is one `#[target_feature]` function whose loop converts 8 lanes an instruction.
//! Where F16C is missing (or under Miri) `half`'s own conversions run. The instructions round to
//! nearest even and quiet NaNs as `half` does: the tests compare every `f16` bit pattern and
//! `f32` values around every `f16` boundary.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// `dst[i] = src[i] as f32` for runs of one length.
pub(crate) fn widen_f16(src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "a run of two lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has the features the function is compiled for (just tested).
        unsafe { x86::widen(src, dst) };
        return;
    }
    src.convert_to_f32_slice(dst);
}

/// `dst[i] = f16::from_f32(src[i])` (to nearest even) for runs of one length.
pub(crate) fn narrow_f16(src: &[f32], dst: &mut [f16]) {
    assert_eq!(src.len(), dst.len(), "a run of two lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: as in `widen_f16`.
        unsafe { x86::narrow(src, dst) };
        return;
    }
    dst.convert_from_f32_slice(src);
}

/// `dst[i] = src[i] as f32` for `bf16` runs of one length.
pub(crate) fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "a run of two lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has the feature the function is compiled for (just tested).
        unsafe { x86::widen_bf16(src, dst) };
        return;
    }
    widen_bf16_loop(src, dst);
}

/// `dst[i] = bf16::from_f32(src[i])` (to nearest even) for runs of one length.
pub(crate) fn narrow_bf16(src: &[f32], dst: &mut [bf16]) {
    assert_eq!(src.len(), dst.len(), "a run of two lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: as in `widen_bf16`.
        unsafe { x86::narrow_bf16(src, dst) };
        return;
    }
    narrow_bf16_loop(src, dst);
}

// `half`'s bf16 conversions are shifts and selects that vectorize; compiled for the baseline
// they take four lanes at a time, in an AVX2 function eight.
#[inline(always)]
fn widen_bf16_loop(src: &[bf16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

#[inline(always)]
fn narrow_bf16_loop(src: &[f32], dst: &mut [bf16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16::from_f32(*s);
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86 {
    use core::arch::x86_64::{
        __m128i, _MM_FROUND_TO_NEAREST_INT, _mm_loadu_si128, _mm_storeu_si128, _mm256_cvtph_ps,
        _mm256_cvtps_ph, _mm256_loadu_ps, _mm256_storeu_ps,
    };
    use half::{bf16, f16};

    /// [`super::widen_f16`] with F16C. The caller checked that the CPU has `f16c` and `avx`, and
    /// that the runs have one length.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn widen(src: &[f16], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `i + 8 <= n`: eight elements of each run from `i` (unaligned loads and
            // stores); the features are the caller's promise.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        for (d, s) in dst[i..n].iter_mut().zip(&src[i..n]) {
            *d = s.to_f32();
        }
    }

    /// [`super::widen_bf16`] compiled for AVX2. The caller checked that the CPU has it.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
        super::widen_bf16_loop(src, dst);
    }

    /// [`super::narrow_bf16`] compiled for AVX2. The caller checked that the CPU has it.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn narrow_bf16(src: &[f32], dst: &mut [bf16]) {
        super::narrow_bf16_loop(src, dst);
    }

    /// [`super::narrow_f16`] with F16C, rounding to nearest even (as `half` does). The caller
    /// checked the features and the lengths.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn narrow(src: &[f32], dst: &mut [f16]) {
        let n = src.len().min(dst.len());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: as in `widen`.
            unsafe {
                let v = _mm256_loadu_ps(src.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm_storeu_si128(dst.as_mut_ptr().add(i).cast::<__m128i>(), h);
            }
            i += 8;
        }
        for (d, s) in dst[i..n].iter_mut().zip(&src[i..n]) {
            *d = f16::from_f32(*s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `f16` bit pattern (every 251st under Miri), in runs whose lengths leave tails of every size.
    #[test]
    fn widening_gives_halfs_value_for_every_bit_pattern() {
        let step = crate::kernels::sized(1, 251);
        let all: Vec<f16> = (0..=u16::MAX).step_by(step).map(f16::from_bits).collect();
        let want: Vec<u32> = all.iter().map(|h| h.to_f32().to_bits()).collect();
        let soft: Vec<u32> = all
            .iter()
            .map(|&h| crate::element::f16_to_f32(h).to_bits())
            .collect();
        assert!(soft == want);
        let mut got = vec![0f32; all.len()];
        for len in [all.len(), all.len() - 5, 7, 9, 1] {
            for (s, d) in all.chunks(len).zip(got.chunks_mut(len)) {
                widen_f16(s, d);
            }
            let bits: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
            assert!(bits == want, "runs of {len}");
        }
    }

    /// Every `bf16` bit pattern widened, and `f32` values at, beside and between every `bf16`
    /// value (the ties) rounded back, in runs that leave tails of every size: `half`'s results.
    #[test]
    fn bf16_runs_convert_as_half_does() {
        let step = crate::kernels::sized(1, 251);
        let all: Vec<bf16> = (0..=u16::MAX).step_by(step).map(bf16::from_bits).collect();
        let want: Vec<u32> = all.iter().map(|h| h.to_f32().to_bits()).collect();
        let mut wide = vec![0f32; all.len()];
        let mut values = vec![
            f32::MAX,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffc1_2345),
        ];
        for &h in &all {
            let x = h.to_f32();
            let mid =
                (x as f64 + bf16::from_bits(h.to_bits().wrapping_add(1)).to_f32() as f64) / 2.0;
            for v in [x, mid as f32] {
                values.extend([
                    v,
                    f32::from_bits(v.to_bits() + 1),
                    f32::from_bits(v.to_bits().wrapping_sub(1)),
                ]);
            }
        }
        let round: Vec<u16> = values
            .iter()
            .map(|&v| bf16::from_f32(v).to_bits())
            .collect();
        let mut narrow = vec![bf16::ZERO; values.len()];
        for len in [all.len(), 13, 8, 3] {
            for (s, d) in all.chunks(len).zip(wide.chunks_mut(len)) {
                widen_bf16(s, d);
            }
            let bits: Vec<u32> = wide.iter().map(|x| x.to_bits()).collect();
            assert!(bits == want, "widened in runs of {len}");
            for (s, d) in values.chunks(len).zip(narrow.chunks_mut(len)) {
                narrow_bf16(s, d);
            }
            let bits: Vec<u16> = narrow.iter().map(|h| h.to_bits()).collect();
            assert!(bits == round, "rounded in runs of {len}");
        }
    }

    /// `f32` values at, just below and just above every `f16` value and every midpoint between
    /// neighbours (the ties), NaNs with payloads, infinities and overflow: `half`'s rounding.
    #[test]
    fn narrowing_rounds_as_half_does_at_every_boundary() {
        let mut values = vec![
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::MAX,
            65520.0,
        ];
        values.push(f32::from_bits(0xffc1_2345));
        for b in (0..=u16::MAX).step_by(crate::kernels::sized(1, 251)) {
            let x = f16::from_bits(b).to_f32();
            let next = f16::from_bits(b.wrapping_add(1)).to_f32();
            let mid = (x as f64 + next as f64) / 2.0;
            for v in [x, mid as f32] {
                values.extend([
                    v,
                    f32::from_bits(v.to_bits() + 1),
                    f32::from_bits(v.to_bits().wrapping_sub(1)),
                ]);
            }
        }
        let want: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
        // The crate's own integer rounding agrees, so the expectation is not F16C's alone.
        let soft: Vec<u16> = values
            .iter()
            .map(|&v| crate::element::f32_to_f16(v).to_bits())
            .collect();
        assert!(soft == want);
        let mut got = vec![f16::ZERO; values.len()];
        for len in [values.len(), 13, 8, 3] {
            for (s, d) in values.chunks(len).zip(got.chunks_mut(len)) {
                narrow_f16(s, d);
            }
            let bits: Vec<u16> = got.iter().map(|h| h.to_bits()).collect();
            assert!(bits == want, "runs of {len}");
        }
    }
}
