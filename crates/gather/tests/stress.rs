//! Concurrency under load: the ops called from many OS threads at once, from inside rayon tasks
//! (nested parallelism), and from inside nested thread pools, finish without deadlock and give
//! bitwise the results of serial calls.
//!
//! The data is large enough that every op splits its work over the pool, so the ops' own parallel
//! loops run nested inside the callers' parallelism. A watchdog fails the test if a scenario takes
//! longer than `DEADLINE` (a deadlock would otherwise hang the run). `scripts/stress.sh` runs this
//! test 100 times in a row.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use gather::Reduce;
use ndarray::{Array1, Array2, Array3, Axis};
use rayon::prelude::*;

const DEADLINE: Duration = Duration::from_secs(240);

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// The inputs every caller shares (read-only).
struct Inputs {
    x: Array2<f32>,
    idx_dim1: Array2<i64>,
    rows: Array1<i64>,
    src: Array2<f32>,
    table: Array2<f32>,
    ids: Array1<i32>,
    flat: Array1<f32>,
    flat_idx: Array1<i64>,
    patches: Array3<f32>,
    keep: Array2<i64>,
}

fn inputs() -> Inputs {
    let mut s = 42u64;
    let mut f = |n: u64| lcg(&mut s) % n;
    let x = Array2::from_shape_fn((300, 400), |_| f(10_000) as f32 * 0.01 - 50.0);
    let idx_dim1 = Array2::from_shape_fn((300, 200), |_| f(400) as i64);
    let rows = Array1::from_shape_fn(40_000, |_| f(700) as i64);
    let src = Array2::from_shape_fn((40_000, 16), |_| f(10_000) as f32 * 1e-3 - 5.0);
    let table = Array2::from_shape_fn((5000, 64), |_| f(10_000) as f32);
    let ids = Array1::from_shape_fn(20_000, |_| f(5000) as i32);
    let flat = Array1::from_shape_fn(200_000, |_| f(1_000_000) as f32);
    let flat_idx = Array1::from_shape_fn(200_000, |_| f(400_000) as i64 - 200_000);
    let patches = Array3::from_shape_fn((16, 196, 64), |_| f(1000) as f32);
    let keep = Array2::from_shape_fn((16, 49), |_| f(196) as i64);
    Inputs {
        x,
        idx_dim1,
        rows,
        src,
        table,
        ids,
        flat,
        flat_idx,
        patches,
        keep,
    }
}

/// Runs a mix of ops and returns the bit patterns of all their outputs.
fn run_all(inp: &Inputs) -> Vec<Vec<u32>> {
    fn bits<'a>(a: impl IntoIterator<Item = &'a f32>) -> Vec<u32> {
        a.into_iter().map(|v| v.to_bits()).collect()
    }
    // Row ids expanded (stride 0) along the feature axis, as in a GNN's scatter.
    let column = inp.rows.view().insert_axis(Axis(1));
    let expanded = column.broadcast((inp.rows.len(), 16)).unwrap();
    let dst = Array2::<f32>::zeros((700, 16));
    let (values, indices) = gather::topk(&inp.x, 10, 1, true, true).unwrap();
    let (sorted, _) = gather::sort(&inp.x, 0, false, true).unwrap();
    vec![
        bits(&gather::gather(&inp.x, 1, &inp.idx_dim1).unwrap()),
        bits(&gather::scatter_add(&dst, 0, &expanded, &inp.src).unwrap()),
        bits(&gather::scatter_reduce(&dst, 0, &expanded, &inp.src, Reduce::Amax, false).unwrap()),
        bits(&gather::scatter_reduce(&dst, 0, &expanded, &inp.src, Reduce::Mean, true).unwrap()),
        bits(&gather::index_select(&inp.table, 0, &inp.ids).unwrap()),
        bits(&gather::index_add(&dst, 0, &inp.rows, &inp.src, 0.5).unwrap()),
        bits(&gather::take(&inp.flat, &inp.flat_idx).unwrap()),
        bits(&gather::select_batched(&inp.patches, 1, &inp.keep, 1).unwrap()),
        bits(&values),
        indices.iter().map(|&i| i as u32).collect(),
        bits(&sorted),
    ]
}

/// Runs `scenario` on its own thread and fails if it does not finish within `DEADLINE`.
fn with_watchdog(name: &str, scenario: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        scenario();
        let _ = tx.send(());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(()) => handle.join().expect("scenario panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The scenario panicked before sending: re-raise its panic.
            if let Err(p) = handle.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: not finished after {DEADLINE:?}: deadlock or livelock suspected")
        }
    }
}

fn serial_reference(inp: &Inputs) -> Vec<Vec<u32>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| run_all(inp))
}

fn check(name: &str, got: &[Vec<u32>], want: &[Vec<u32>]) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w, "{name}: output {k} differs from the serial result");
    }
}

#[test]
fn many_os_threads_calling_at_once_get_the_serial_results() {
    with_watchdog("os threads", || {
        let inp = std::sync::Arc::new(inputs());
        let want = std::sync::Arc::new(serial_reference(&inp));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (inp, want) = (inp.clone(), want.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        check("os thread", &run_all(&inp), &want);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn calls_from_inside_rayon_tasks_get_the_serial_results() {
    with_watchdog("rayon tasks", || {
        let inp = inputs();
        let want = serial_reference(&inp);
        (0..16)
            .into_par_iter()
            .for_each(|_| check("rayon task", &run_all(&inp), &want));
        // rayon::join and scope nest the same way.
        rayon::scope(|s| {
            for _ in 0..4 {
                s.spawn(|_| {
                    let (a, b) = rayon::join(|| run_all(&inp), || run_all(&inp));
                    check("scope/join a", &a, &want);
                    check("scope/join b", &b, &want);
                });
            }
        });
    });
}

#[test]
fn calls_from_nested_thread_pools_get_the_serial_results() {
    with_watchdog("nested pools", || {
        let inp = inputs();
        let want = serial_reference(&inp);
        let outer = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let inner = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        outer.install(|| {
            (0..6).into_par_iter().for_each(|k| {
                // Half the tasks hop into the other pool (blocking this worker meanwhile), half
                // run in the outer pool directly.
                let got = if k % 2 == 0 {
                    inner.install(|| run_all(&inp))
                } else {
                    run_all(&inp)
                };
                check("nested pool", &got, &want);
            })
        });
        // Several OS threads, each with its own pool, at once.
        thread::scope(|s| {
            for threads in 1..=4 {
                let (inp, want) = (&inp, &want);
                s.spawn(move || {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    check("own pool", &pool.install(|| run_all(inp)), want);
                });
            }
        });
    });
}
