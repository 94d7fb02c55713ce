//! Results are bitwise identical for 1 and for N threads: float reductions add in index order per
//! destination, whatever the split of the work.

use gather::Reduce;
use half::f16;
use ndarray::{Array1, Array2, Axis};

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// A GNN-like row scatter (W6/W7 shape, scaled down): `[E, F]` rows into `[V, F]`.
fn rows(e: usize, v: usize, f: usize) -> (Array2<i64>, Array2<f32>) {
    let mut s = 7u64;
    let ids = Array1::from_shape_fn(e, |_| (lcg(&mut s) % v as u64) as i64);
    let idx = ids
        .insert_axis(Axis(1))
        .broadcast((e, f))
        .unwrap()
        .to_owned();
    let src = Array2::from_shape_fn((e, f), |_| (lcg(&mut s) % 1000) as f32 * 1e-3 - 0.5);
    (idx, src)
}

#[test]
fn scatter_add_rows_is_bitwise_identical_for_1_and_2_threads() {
    let (idx, src) = rows(200_000, 1000, 16);
    let dst = Array2::<f32>::zeros((1000, 16));
    let one = in_pool(1, || gather::scatter_add(&dst, 0, &idx, &src).unwrap());
    let two = in_pool(2, || gather::scatter_add(&dst, 0, &idx, &src).unwrap());
    let four = in_pool(4, || gather::scatter_add(&dst, 0, &idx, &src).unwrap());
    assert!(
        one.iter()
            .zip(two.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert!(
        one.iter()
            .zip(four.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[test]
fn scatter_amax_rows_is_bitwise_identical_for_1_and_2_threads() {
    let (idx, src) = rows(200_000, 1000, 16);
    let dst = Array2::<f32>::zeros((1000, 16));
    let run = || gather::scatter_reduce(&dst, 0, &idx, &src, Reduce::Amax, false).unwrap();
    let one = in_pool(1, run);
    let two = in_pool(2, run);
    assert!(
        one.iter()
            .zip(two.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[test]
fn f16_scatter_add_is_bitwise_identical_for_1_and_2_threads() {
    let (idx, src) = rows(100_000, 300, 64);
    let src = src.mapv(f16::from_f32);
    let dst = Array2::<f16>::zeros((300, 64));
    // dim 1 as well as dim 0, so that both the serial-dim and the row layouts are exercised.
    let idx1 = idx.t().to_owned().mapv(|v| v % 64);
    let src1 = src.t().to_owned();
    let dst1 = Array2::<f16>::zeros((64, 300));
    let run = || {
        (
            gather::scatter_add(&dst, 0, &idx, &src).unwrap(),
            gather::scatter_add(&dst1, 1, &idx1.slice(ndarray::s![.., ..300]), &src1).unwrap(),
        )
    };
    let one = in_pool(1, run);
    let two = in_pool(2, run);
    assert!(
        one.0
            .iter()
            .zip(two.0.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert!(
        one.1
            .iter()
            .zip(two.1.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}
