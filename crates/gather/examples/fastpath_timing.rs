//! A quick timing loop over the benchmark workloads W0–W11 of `shared/bench/WORKLOADS.md`, for
//! working on the kernels (the `gather bench` command is the measurement of record).
//!
//! ```text
//! cargo run --release -p gather --example fastpath_timing -- [--threads N] [--only W1,W6] [--reps R]
//! ```
//!
//! Prints the median and minimum time of each workload over repeated calls after a warm-up, run in
//! a rayon pool of N threads (default 2). Expanded indices are stride-0 views, never materialised.
//! The output of each call is dropped outside the timed region.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gather::Reduce;
use ndarray::{Array1, Array2, Array3, Axis};

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> i64 {
        ((self.next() >> 11) % n as u64) as i64
    }
    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

fn index1(rng: &mut Rng, n: usize, hi: usize) -> Array1<i64> {
    Array1::from_shape_simple_fn(n, || rng.below(hi))
}

fn index2(rng: &mut Rng, shape: (usize, usize), hi: usize) -> Array2<i64> {
    Array2::from_shape_simple_fn(shape, || rng.below(hi))
}

fn floats2(rng: &mut Rng, shape: (usize, usize)) -> Array2<f32> {
    Array2::from_shape_simple_fn(shape, || rng.f32())
}

fn floats3(rng: &mut Rng, shape: (usize, usize, usize)) -> Array3<f32> {
    Array3::from_shape_simple_fn(shape, || rng.f32())
}

struct Timing {
    median: Duration,
    min: Duration,
    reps: usize,
}

/// Calls `f` once to warm up, then until `reps` calls or about a second have passed (at least 3).
fn time<R>(reps: usize, mut f: impl FnMut() -> R) -> Timing {
    drop(black_box(f()));
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < reps && (times.len() < 3 || start.elapsed() < Duration::from_secs(2)) {
        let t = Instant::now();
        let r = black_box(f());
        times.push(t.elapsed());
        drop(r);
    }
    times.sort();
    Timing {
        median: times[times.len() / 2],
        min: times[0],
        reps: times.len(),
    }
}

fn report(name: &str, t: Timing) {
    println!(
        "{name:<22} median {:>10.4} ms   min {:>10.4} ms   ({} runs)",
        t.median.as_secs_f64() * 1e3,
        t.min.as_secs_f64() * 1e3,
        t.reps
    );
}

fn run(only: &[String], reps: usize) {
    let want = |w: &str| only.is_empty() || only.iter().any(|o| o == w);
    let mut rng = Rng(42);
    if want("W0") {
        let x = ndarray::array![[10.0f32, 20.0, 30.0], [40.0, 50.0, 60.0]];
        let idx = ndarray::array![[0i64, 2], [1, 0]];
        let calls = 100_000;
        let t = time(reps, || {
            for _ in 0..calls {
                black_box(gather::gather(black_box(&x), 1, black_box(&idx)).unwrap());
            }
        });
        println!(
            "{:<22} median {:>10.4} us per call   min {:>10.4} us",
            "W0_tiny",
            t.median.as_secs_f64() * 1e6 / calls as f64,
            t.min.as_secs_f64() * 1e6 / calls as f64
        );
    }
    if want("W1") {
        let x = floats2(&mut rng, (1000, 1000));
        let idx = index2(&mut rng, (1000, 500), 1000);
        report(
            "W1_seed",
            time(reps, || gather::gather(&x, 1, &idx).unwrap()),
        );
    }
    if want("W2") {
        let logits = Array3::from_shape_fn((8, 512, 32000), |(a, b, c)| (a + b + c) as f32);
        let labels = index2(&mut rng, (8, 512), 32000);
        let l3 = labels.view().insert_axis(Axis(2));
        report(
            "W2_token_logits",
            time(reps, || {
                gather::gather(&logits, -1, &l3)
                    .unwrap()
                    .index_axis_move(Axis(2), 0)
            }),
        );
    }
    if want("W3") {
        let patches = floats3(&mut rng, (64, 196, 768));
        // Distinct per row: a partial shuffle of 0..196.
        let mut idx = Array2::<i64>::zeros((64, 49));
        for mut row in idx.rows_mut() {
            let mut perm: Vec<i64> = (0..196).collect();
            for k in 0..49 {
                let j = k + rng.below(196 - k) as usize;
                perm.swap(k, j);
                row[k] = perm[k];
            }
        }
        let e = idx.view().insert_axis(Axis(2));
        let e = e.broadcast((64, 49, 768)).unwrap();
        report(
            "W3_topk_patches",
            time(reps, || gather::gather(&patches, 1, &e).unwrap()),
        );
    }
    if want("W4") {
        let roi = floats3(&mut rng, (65536, 21, 4));
        let labels = index1(&mut rng, 65536, 21);
        let l = labels.view().into_shape_with_order((65536, 1, 1)).unwrap();
        let l = l.broadcast((65536, 1, 4)).unwrap();
        report(
            "W4_roi_labels",
            time(reps, || {
                gather::gather(&roi, 1, &l)
                    .unwrap()
                    .index_axis_move(Axis(1), 0)
            }),
        );
    }
    if want("W5") {
        let x = floats2(&mut rng, (4096, 4096));
        let idx = index2(&mut rng, (4096, 4096), 4096);
        report(
            "W5_dim0_random",
            time(reps, || gather::gather(&x, 0, &idx).unwrap()),
        );
    }
    if want("W6") || want("W7") {
        let src = floats2(&mut rng, (1_000_000, 64));
        let dst = Array2::<f32>::zeros((100_000, 64));
        let ids = index1(&mut rng, 1_000_000, 100_000);
        let e = ids.view().insert_axis(Axis(1));
        let e = e.broadcast((1_000_000, 64)).unwrap();
        if want("W6") {
            report(
                "W6_scatter_add_rows",
                time(reps, || gather::scatter_add(&dst, 0, &e, &src).unwrap()),
            );
        }
        if want("W7") {
            report(
                "W7_scatter_amax_rows",
                time(reps, || {
                    gather::scatter_reduce(&dst, 0, &e, &src, Reduce::Amax, false).unwrap()
                }),
            );
        }
    }
    if want("W8") {
        let table = floats2(&mut rng, (100_000, 256));
        let ids = index1(&mut rng, 50_000, 100_000);
        report(
            "W8_index_select_rows",
            time(reps, || gather::index_select(&table, 0, &ids).unwrap()),
        );
    }
    if want("W9") {
        let n = 16_777_216;
        let x = Array1::from_shape_simple_fn(n, || rng.f32());
        let idx = index1(&mut rng, n, n);
        report(
            "W9_take_1d",
            time(reps, || gather::take(&x, &idx).unwrap()),
        );
    }
    if want("W10") {
        let x = floats3(&mut rng, (100, 100, 100));
        let idx = Array3::from_shape_simple_fn((100, 100, 100), || rng.below(100));
        report(
            "W10_cube",
            time(reps, || gather::gather(&x, 1, &idx).unwrap()),
        );
    }
    if want("W11a") || want("W11b") {
        let s = Array2::<f32>::zeros((1000, 1000));
        let idx = index2(&mut rng, (1000, 500), 1000);
        let src = floats2(&mut rng, (1000, 500));
        if want("W11a") {
            report(
                "W11a_scatter_2d_set",
                time(reps, || gather::scatter(&s, 1, &idx, &src).unwrap()),
            );
        }
        if want("W11b") {
            report(
                "W11b_scatter_2d_add",
                time(reps, || gather::scatter_add(&s, 1, &idx, &src).unwrap()),
            );
        }
    }
}

fn main() {
    let mut threads = 2;
    let mut only: Vec<String> = Vec::new();
    let mut reps = 30;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => threads = args.next().and_then(|v| v.parse().ok()).unwrap_or(2),
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).unwrap_or(30),
            "--only" => {
                only = args
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect()
            }
            other => {
                eprintln!("unknown argument {other}; use --threads N, --only W1,W6, --reps R");
                std::process::exit(2);
            }
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon pool");
    println!("threads: {threads}");
    pool.install(|| run(&only, reps));
}
