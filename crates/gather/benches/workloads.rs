//! Criterion benches of the workloads of `../shared/bench/WORKLOADS.md` (W0–W11), with
//! candle-core (CPU) side by side where candle has the op.
//!
//! ```sh
//! cargo bench -p gather --bench workloads                     # all, WORKLOADS.md's shapes
//! cargo bench -p gather --bench workloads --features candle   # with candle beside the library
//! cargo bench -p gather --bench workloads -- W3               # criterion's name filter
//! GATHER_BENCH_SCALE=0.1 cargo bench -p gather --bench workloads   # shrunk shapes
//! ```
//!
//! - The workloads (data, calls, minimal bytes, checks) are exactly those of `gather bench`: the
//!   module is `crates/gather-cli/src/workloads.rs`, included here by path (the library cannot
//!   depend on its own command-line crate).
//! - Everything runs on the global rayon pool with 2 threads (the thread count of the issue's
//!   targets; `GATHER_BENCH_THREADS` changes it). Outputs are dropped outside the timed region
//!   (`iter_with_large_drop`), as `gather bench` does.
//! - The shapes are WORKLOADS.md's. The big random ones (W5, W6, W9: 100–700 ms a call for some
//!   peers) take 10 samples; criterion stretches its 3-second measurement window for them, so a
//!   full run takes a few minutes. `GATHER_BENCH_SCALE` shrinks the large dims (as
//!   `gather bench --scale` does).
//! - candle (with `--features candle`, which CI does not enable: candle's dependencies add
//!   minutes to a cold build): `gather` (W0 W1 W2 W5 W10), `index_select` (W8, and W9 as the 1-D
//!   take), `scatter` (W11a), `scatter_add` (W11b). Where candle refuses the workload's call
//!   because the index is a stride-0 expanded view, it runs the flat equivalent WORKLOADS.md
//!   measured: W3 and W4 as an `index_select` of the rows of the input viewed 2-D with flat row
//!   ids `b·N + i`, W6 as `index_add` with the unexpanded row index. W7 (scatter amax) has no
//!   candle op. Each candle result is compared once with the library's before it is timed.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "../../gather-cli/src/workloads.rs"]
#[allow(dead_code, unused_imports)]
mod workloads;

use workloads::{ALL, Data, Id, Workload};

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// candle's side: its call for each workload, checked once against the library's result.
#[cfg(feature = "candle")]
mod candle {
    use candle_core::{Device, Tensor, WithDType};
    use criterion::BenchmarkGroup;
    use criterion::measurement::WallTime;
    use ndarray::{Array, Dimension};

    use super::workloads::{Data, Id};

    /// A candle tensor holding a copy of a standard-layout array.
    fn tensor<T: WithDType, D: Dimension>(a: &Array<T, D>) -> Tensor {
        let data = a
            .as_slice()
            .expect("the workloads' arrays are standard layout");
        Tensor::from_slice(data, a.shape(), &Device::Cpu).expect("a candle tensor")
    }

    /// Flat row ids `row · n + index[row][j]` of a `[rows, k]` index into an input of `n` rows per
    /// batch, as a 1-D tensor.
    fn flat_rows(index: &[i64], k: usize, n: usize) -> Tensor {
        let ids: Vec<i64> = index
            .iter()
            .enumerate()
            .map(|(p, &i)| (p / k * n) as i64 + i)
            .collect();
        Tensor::from_vec(ids.clone(), ids.len(), &Device::Cpu).expect("a candle tensor")
    }

    type CandleCall = Box<dyn Fn() -> candle_core::Result<Tensor>>;

    /// candle's call for a workload (its name, and the call on tensors prepared outside the timed
    /// region), or `None` where candle has no such op.
    fn candle_call(id: Id, data: &Data) -> Option<(&'static str, CandleCall)> {
        let call: (&'static str, CandleCall) = match (id, data) {
            (Id::W0 | Id::W1, Data::Gather2 { x, index }) => {
                let (x, i) = (tensor(x), tensor(index));
                ("candle_gather", Box::new(move || x.gather(&i, 1)))
            }
            (Id::W5, Data::Gather2 { x, index }) => {
                let (x, i) = (tensor(x), tensor(index));
                ("candle_gather", Box::new(move || x.gather(&i, 0)))
            }
            (Id::W10, Data::Cube { x, index }) => {
                let (x, i) = (tensor(x), tensor(index));
                ("candle_gather", Box::new(move || x.gather(&i, 1)))
            }
            (Id::W2, Data::Logits { logits, labels }) => {
                let x = tensor(logits);
                let i = tensor(labels).unsqueeze(2).ok()?;
                (
                    "candle_gather",
                    Box::new(move || x.gather(&i, 2)?.squeeze(2)),
                )
            }
            (Id::W3, Data::Patches { patches, indices }) => {
                let (b, n, d) = patches.dim();
                let k = indices.ncols();
                let x = tensor(patches).reshape((b * n, d)).ok()?;
                let ids = flat_rows(indices.as_slice()?, k, n);
                (
                    "candle_flat_index_select",
                    Box::new(move || x.index_select(&ids, 0)?.reshape((b, k, d))),
                )
            }
            (Id::W4, Data::Roi { roi_loc, labels }) => {
                let (r, c, f) = roi_loc.dim();
                let x = tensor(roi_loc).reshape((r * c, f)).ok()?;
                let ids = flat_rows(labels.as_slice()?, 1, c);
                (
                    "candle_flat_index_select",
                    Box::new(move || x.index_select(&ids, 0)),
                )
            }
            (Id::W6, Data::Rows { dst, src, index }) => {
                let (d, s, i) = (tensor(dst), tensor(src), tensor(index));
                ("candle_index_add", Box::new(move || d.index_add(&i, &s, 0)))
            }
            (Id::W8, Data::Table { table, ids }) => {
                let (t, i) = (tensor(table), tensor(ids));
                (
                    "candle_index_select",
                    Box::new(move || t.index_select(&i, 0)),
                )
            }
            (Id::W9, Data::Flat { x, idx }) => {
                let (x, i) = (tensor(x), tensor(idx));
                (
                    "candle_index_select",
                    Box::new(move || x.index_select(&i, 0)),
                )
            }
            (Id::W11a | Id::W11b, Data::Scatter2 { dst, index, src }) => {
                let (d, i, s) = (tensor(dst), tensor(index), tensor(src));
                if id == Id::W11a {
                    ("candle_scatter", Box::new(move || d.scatter(&i, &s, 1)))
                } else {
                    (
                        "candle_scatter_add",
                        Box::new(move || d.scatter_add(&i, &s, 1)),
                    )
                }
            }
            _ => return None,
        };
        Some(call)
    }

    /// Compares candle's result with the library's once; a difference is reported, not timed.
    fn candle_agrees(id: Id, ours: &ndarray::ArrayD<f32>, theirs: &Tensor) -> Result<(), String> {
        let theirs = theirs
            .flatten_all()
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| e.to_string())?;
        let ours = ours.as_slice().ok_or("non-standard output")?;
        if ours.len() != theirs.len() {
            return Err(format!("{} vs {} elements", theirs.len(), ours.len()));
        }
        let bad = ours
            .iter()
            .zip(&theirs)
            .filter(|&(&a, &b)| match id {
                // sums in another order round differently
                Id::W6 | Id::W11b => (a - b).abs() > 1e-5 + 1e-5 * a.abs(),
                _ => a.to_bits() != b.to_bits(),
            })
            .count();
        if bad > 0 {
            return Err(format!("{bad} elements differ"));
        }
        Ok(())
    }

    /// Adds candle's call for `id` to the group, when candle has one that agrees with `ours`.
    pub fn bench(
        group: &mut BenchmarkGroup<'_, WallTime>,
        id: Id,
        data: &Data,
        ours: &ndarray::ArrayD<f32>,
    ) {
        let Some((name, call)) = candle_call(id, data) else {
            return;
        };
        match call() {
            Ok(theirs) => {
                // W11a: duplicate indices, and candle keeps another duplicate than the
                // library's documented last write; the other results must agree.
                if id != Id::W11a {
                    if let Err(e) = candle_agrees(id, ours, &theirs) {
                        eprintln!("{}: candle's result differs: {e}", id.name());
                    }
                }
                group.bench_function(name, |b| b.iter_with_large_drop(&call));
            }
            Err(e) => eprintln!("{}: candle refuses: {e}", id.name()),
        }
    }
}

fn bench_workloads(c: &mut Criterion) {
    let threads = env_f64("GATHER_BENCH_THREADS", 2.0) as usize;
    let scale = env_f64("GATHER_BENCH_SCALE", 1.0);
    // Fails only when a global pool exists already (then that one is used).
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build_global();
    for id in ALL {
        let w = Workload::new(id, scale);
        let data = w.make();
        let ours = w.run(&data).expect("the workload runs");
        if let Err(e) = w.verify(&data, &ours) {
            panic!("{}: the library's result is wrong: {e}", id.name());
        }
        let mut group = c.benchmark_group(id.name());
        group.throughput(Throughput::BytesDecimal(w.min_bytes().round() as u64));
        if let (Id::W0, Data::Gather2 { x, index }) = (id, &data) {
            group.bench_function("gather", |b| {
                b.iter(|| gather::gather(black_box(x), 1, black_box(index)))
            });
        } else {
            group.bench_function("gather", |b| {
                b.iter_with_large_drop(|| w.run(black_box(&data)))
            });
        }
        #[cfg(feature = "candle")]
        candle::bench(&mut group, id, &data, &ours);
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_workloads
}
criterion_main!(benches);
