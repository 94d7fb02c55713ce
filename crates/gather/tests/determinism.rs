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

/// W6/W7-like data with the index as the workloads pass it: `ids[E]` expanded (stride 0) to
/// `[E, F]`, never materialised, so the row-index (segment) path runs.
fn expanded_rows(e: usize, v: usize, f: usize) -> (Array1<i64>, Array2<f32>) {
    let mut s = 11u64;
    let ids = Array1::from_shape_fn(e, |_| (lcg(&mut s) % v as u64) as i64);
    let src = Array2::from_shape_fn((e, f), |_| (lcg(&mut s) % 1000) as f32 * 1e-3 - 0.5);
    (ids, src)
}

fn bitwise_same<T: gather::Element>(a: &ndarray::ArrayD<T>, b: &ndarray::ArrayD<T>) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.to_f64().to_bits() == y.to_f64().to_bits())
}

/// Runs `f` in pools of 1, 2 and 3 threads and checks that the results are bitwise identical.
fn same_for_1_2_3_threads<T: gather::Element>(
    what: &str,
    f: impl Fn() -> ndarray::ArrayD<T> + Send + Sync,
) {
    let one = in_pool(1, &f);
    for threads in [2, 3] {
        let other = in_pool(threads, &f);
        assert!(bitwise_same(&one, &other), "{what}: 1 vs {threads} threads");
    }
}

#[test]
fn w6_like_scatter_add_with_an_expanded_row_index_is_bitwise_identical_for_1_2_3_threads() {
    let (ids, src) = expanded_rows(300_000, 20_000, 64);
    let idx = ids.view().insert_axis(Axis(1));
    let idx = idx.broadcast(src.dim()).unwrap();
    let dst = Array2::<f32>::zeros((20_000, 64));
    same_for_1_2_3_threads("scatter_add", || {
        gather::scatter_add(&dst, 0, &idx, &src).unwrap().into_dyn()
    });
    // index_add is the same row scatter with a 1-d index.
    same_for_1_2_3_threads("index_add", || {
        gather::index_add(&dst, 0, &ids, &src, 1.0)
            .unwrap()
            .into_dyn()
    });
}

#[test]
fn w7_like_scatter_reduce_with_an_expanded_row_index_is_bitwise_identical_for_1_2_3_threads() {
    let (ids, src) = expanded_rows(300_000, 20_000, 64);
    let idx = ids.view().insert_axis(Axis(1));
    let idx = idx.broadcast(src.dim()).unwrap();
    let dst = Array2::from_shape_fn((20_000, 64), |(a, b)| ((a * 7 + b) % 13) as f32 * 0.1);
    for r in [
        Reduce::Amax,
        Reduce::Amin,
        Reduce::Sum,
        Reduce::Prod,
        Reduce::Mean,
    ] {
        for include_self in [false, true] {
            same_for_1_2_3_threads(&format!("{r:?} include_self={include_self}"), || {
                gather::scatter_reduce(&dst, 0, &idx, &src, r, include_self)
                    .unwrap()
                    .into_dyn()
            });
        }
    }
}

#[test]
fn row_scatters_into_a_destination_past_the_caches_are_bitwise_identical_for_1_2_3_threads() {
    // A 10 MB destination, past the two cores' L2 caches: one thread walks the sources in order
    // (requesting destination rows well ahead), two and three group the rows; every destination
    // row still sees its sources in index order.
    let (ids, src) = expanded_rows(120_000, 40_000, 64);
    let idx = ids.view().insert_axis(Axis(1));
    let idx = idx.broadcast(src.dim()).unwrap();
    let dst = Array2::from_shape_fn((40_000, 64), |(a, b)| ((a * 5 + b) % 11) as f32 * 0.25);
    same_for_1_2_3_threads("scatter_add", || {
        gather::scatter_add(&dst, 0, &idx, &src).unwrap().into_dyn()
    });
    // And the serial loop of the definition, on 2 threads.
    let mut want = dst.clone();
    for (e, &row) in ids.iter().enumerate() {
        for f in 0..64 {
            want[[row as usize, f]] += src[[e, f]];
        }
    }
    let two = in_pool(2, || gather::scatter_add(&dst, 0, &idx, &src).unwrap());
    assert!(bitwise_same(&two.into_dyn(), &want.into_dyn()));
    for (r, include_self) in [(Reduce::Amax, false), (Reduce::Prod, true)] {
        same_for_1_2_3_threads(&format!("{r:?} include_self={include_self}"), || {
            gather::scatter_reduce(&dst, 0, &idx, &src, r, include_self)
                .unwrap()
                .into_dyn()
        });
    }
}

#[test]
fn f16_and_bf16_scatter_add_with_an_expanded_row_index_are_bitwise_identical_for_1_2_3_threads() {
    let (ids, src) = expanded_rows(200_000, 5_000, 32);
    let idx = ids.view().insert_axis(Axis(1));
    let idx = idx.broadcast(src.dim()).unwrap();
    let src16 = src.mapv(f16::from_f32);
    let dst16 = Array2::<f16>::zeros((5_000, 32));
    same_for_1_2_3_threads("f16", || {
        gather::scatter_add(&dst16, 0, &idx, &src16)
            .unwrap()
            .into_dyn()
    });
    let srcb = src.mapv(half::bf16::from_f32);
    let dstb = Array2::<half::bf16>::zeros((5_000, 32));
    same_for_1_2_3_threads("bf16", || {
        gather::scatter_add(&dstb, 0, &idx, &srcb)
            .unwrap()
            .into_dyn()
    });
}

#[test]
fn large_gathers_and_takes_are_identical_for_1_2_3_threads() {
    // Inputs beyond the caches take the prefetched (and, along dim 0, tiled) loops.
    let mut s = 5u64;
    let x = Array2::from_shape_fn((2048, 1024), |_| (lcg(&mut s) % 1000) as f32);
    let idx = Array2::from_shape_fn((1024, 1024), |_| (lcg(&mut s) % 2048) as i64);
    same_for_1_2_3_threads("gather dim 0", || {
        gather::gather(&x, 0, &idx).unwrap().into_dyn()
    });
    let flat = Array1::from_shape_fn(1 << 21, |_| (lcg(&mut s) % (1 << 21)) as i64);
    same_for_1_2_3_threads("take", || gather::take(&x, &flat).unwrap().into_dyn());
}
