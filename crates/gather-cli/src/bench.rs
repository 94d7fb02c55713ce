//! `gather bench`: times the workloads of `../shared/bench/WORKLOADS.md` (see
//! [`crate::workloads`]) on a rayon pool of a chosen size, next to the memory bandwidth it
//! measures itself, and reports time, throughput, share of the bandwidth and memory.
//!
//! For each workload, in a fresh state:
//!
//! 1. the inputs are generated (deterministic, in parallel, untimed), each of 4 MiB or more on
//!    transparent huge pages where the system allows it, as NumPy allocates the peers' inputs
//!    (see [`gather::memory`]);
//! 2. RSS is read, the RSS high-water mark is reset (`5` written to `/proc/self/clear_refs`),
//!    and the call runs once: its result is checked against the definition, and the growth of
//!    the high-water mark over the RSS before it, less the file-backed pages the call paged in
//!    (the growth of `RssFile`: the program's own code, read from the executable on first
//!    use), is the call's **extra memory** (the output and whatever the call allocates on top of
//!    the inputs);
//! 3. more untimed warm-up calls, then the timed calls: each creates its output (out of place,
//!    as the peers do) and is timed from the call to its return (dropping the output is not
//!    timed). The number of timed calls is `--repeat`, or as many as fit in `--budget` seconds
//!    (at least 7, at most 1000). W0 is a latency: the calls run in batches of 1000 and each
//!    batch gives one per-call time.
//!
//! The report gives the median and minimum time, **GB/s** = the workload's minimal bytes / the
//! median time, **%bw** = that over the measured bandwidth, and the **limit** time = minimal bytes
//! / bandwidth. The bandwidth is a copy of `--bandwidth-mib` MiB (1 GiB by default) with
//! `copy_from_slice` on 2 threads, in parallel halves, counting the bytes read plus the bytes
//! written (as the minimal bytes do: input read + index read + output written), on 4 KiB pages
//! and on transparent huge pages (`madvise`); the faster one is the limit.
//!
//! ```no_run
//! use gather_cli::bench::{Options, run};
//! let report = run(&Options { only: Some("W0,W1".into()), ..Options::default() }).unwrap();
//! println!("{}", report.to_json());
//! ```

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use rayon::prelude::*;

use crate::fail::{CliResult, Failure};
use crate::progress::{Kind, Progress};
use crate::workloads::{Data, Id, Workload, select};

/// What to run and how (the flags of `gather bench`).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `--only`: a comma-separated list of workloads (`W3`, `W3_topk_patches`); `None` = all.
    pub only: Option<String>,
    /// `--threads`: size of the rayon pool every workload runs in.
    pub threads: usize,
    /// `--repeat`: timed calls per workload (`None`: as many as fit in `budget_s`, 7 to
    /// 1000).
    pub repeat: Option<usize>,
    /// `--warmup`: untimed calls before the timed ones (the first is the checked one); ≥ 1.
    pub warmup: usize,
    /// `--budget`: seconds of timed calls per workload when `repeat` is `None`.
    pub budget_s: f64,
    /// `--scale`: factor on the workloads' large dims (1 = WORKLOADS.md's shapes).
    pub scale: f64,
    /// `--bandwidth-mib`: size of the copy that measures the bandwidth.
    pub bandwidth_mib: usize,
    /// `--bandwidth-gbps`: use this bandwidth instead of measuring it.
    pub bandwidth_gbps: Option<f64>,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Run each workload in a fresh process (this executable with `bench --worker`), so that
    /// memory freed by earlier workloads cannot hide a call's allocations, and each workload's
    /// peak RSS is its own. `false` runs them in this process.
    pub isolate: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            only: None,
            threads: 2,
            repeat: None,
            warmup: 2,
            budget_s: 0.5,
            scale: 1.0,
            bandwidth_mib: 1024,
            bandwidth_gbps: None,
            progress: false,
            isolate: false,
        }
    }
}

/// The memory bandwidth the workloads are compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// GB/s (bytes read + bytes written, 10^9): the faster of the two copies, or the figure given.
    pub gbps: f64,
    /// The copy on 4 KiB pages (`None` when the figure was given).
    pub pages_4k_gbps: Option<f64>,
    /// The copy on transparent huge pages (`None` when unavailable or given).
    pub huge_gbps: Option<f64>,
    /// Bytes copied (each of source and destination).
    pub bytes: usize,
    /// Threads of the copy.
    pub threads: usize,
}

/// The result of one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The workload (its name is WORKLOADS.md's).
    pub id: Id,
    /// Its shapes at the scale run.
    pub shapes: String,
    /// Median of the timed calls, seconds (W0: per call).
    pub median_s: f64,
    /// Fastest timed call, seconds (W0: fastest batch, per call).
    pub min_s: f64,
    /// Timed calls (W0: timed batches).
    pub reps: usize,
    /// Calls per timed sample (1; W0: the batch size).
    pub calls_per_rep: usize,
    /// Minimal bytes (WORKLOADS.md's formula).
    pub min_bytes: f64,
    /// Bytes of the output.
    pub out_bytes: usize,
    /// RSS before the first call, bytes.
    pub rss_before: u64,
    /// RSS high-water mark over every call of the workload (inputs included), bytes.
    pub peak_rss: u64,
    /// Growth of the high-water mark during the first call over the RSS before it, less
    /// `paged_in_bytes`, bytes.
    pub extra_bytes: u64,
    /// Growth of the file-backed RSS (`RssFile`) during the first call, bytes: code of the
    /// program paged in on its first use, not memory the call allocated. W0's first call pages
    /// in about 1 MB of it, which alone went over the 1 MiB slack of a 16-byte output.
    ///
    /// Subtracting it can under-count the peak by the code paged in after the allocations'
    /// peak (the high-water mark is of anonymous and file pages together), never by more than
    /// this.
    pub paged_in_bytes: u64,
    /// Memory the target allows beyond the output (the CSR of W6/W7).
    pub csr_allowance: usize,
    /// What the check of the first result found: `Ok(what was checked)` or `Err(the mismatch)`.
    pub check: Result<String, String>,
    /// Whether the RSS high-water mark was reset before the workload (see [`reset_hwm`]).
    pub hwm_reset: bool,
}

impl Record {
    /// Minimal bytes / median time, GB/s.
    pub fn gbps(&self) -> f64 {
        self.min_bytes / self.median_s / 1e9
    }

    /// The share of the bandwidth reached, in %.
    pub fn pct_bandwidth(&self, bw: &Bandwidth) -> f64 {
        100.0 * self.gbps() / bw.gbps
    }

    /// The time the minimal bytes take at the bandwidth, seconds.
    pub fn limit_s(&self, bw: &Bandwidth) -> f64 {
        self.min_bytes / (bw.gbps * 1e9)
    }

    /// Whether the extra memory is within the issue's target: the output + 10% (+ the CSR),
    /// plus [`RSS_SLACK`] for what RSS cannot resolve.
    pub fn memory_ok(&self) -> bool {
        self.extra_bytes as f64
            <= 1.1 * self.out_bytes as f64 + (self.csr_allowance + RSS_SLACK) as f64
    }
}

/// Extra memory below this is not counted against the memory target: RSS moves in pages, and
/// the allocator and the thread pool grow their own arenas on first use (a few hundred KiB).
pub const RSS_SLACK: usize = 1 << 20;

/// Everything `gather bench` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The bandwidth.
    pub bandwidth: Bandwidth,
    /// Threads of the pool the workloads ran in.
    pub threads: usize,
    /// The scale of the shapes (1 = WORKLOADS.md).
    pub scale: f64,
    /// The options' budget, warm-up and repeat, for the record.
    pub options: Options,
    /// Whether the RSS high-water mark could be reset before each workload (if not, peak RSS is
    /// the process's peak so far and the extra memory is an upper bound).
    pub hwm_reset: bool,
    /// One record per workload, in WORKLOADS.md's order.
    pub records: Vec<Record>,
}

// ---------------------------------------------------------------------------------------------
// Memory: /proc/self/status and clear_refs
// ---------------------------------------------------------------------------------------------

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes; 0 where there is none.
pub fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(str::to_string))
        })
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets the RSS high-water mark to the current RSS; false where that is not permitted.
pub fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

// ---------------------------------------------------------------------------------------------
// Bandwidth
// ---------------------------------------------------------------------------------------------

/// Median GB/s (read + write) of copying `src` into `dst` in `pool.current_num_threads()`
/// contiguous parts, over 5 copies after one untimed copy.
fn copy_gbps(src: &[u8], dst: &mut [u8], pool: &rayon::ThreadPool) -> f64 {
    let part = src.len().div_ceil(pool.current_num_threads()).max(1);
    let mut times = Vec::new();
    for rep in 0..6 {
        let t = Instant::now();
        pool.install(|| {
            dst.par_chunks_mut(part)
                .zip(src.par_chunks(part))
                .for_each(|(d, s)| d.copy_from_slice(s));
        });
        if rep > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    2.0 * src.len() as f64 / median(&mut times) / 1e9
}

/// Copy bandwidth on transparent huge pages; `None` where the mapping fails.
#[cfg(target_os = "linux")]
fn huge_page_copy(bytes: usize, pool: &rayon::ThreadPool) -> Option<f64> {
    use memmap2::{Advice, MmapMut};
    let map = |fill: u8| -> Option<MmapMut> {
        let mut m = MmapMut::map_anon(bytes).ok()?;
        // Advice only: without THP the copy simply runs on 4 KiB pages.
        let _ = m.advise(Advice::HugePage);
        pool.install(|| m.par_chunks_mut(1 << 21).for_each(|c| c.fill(fill)));
        Some(m)
    };
    let src = map(1)?;
    let mut dst = map(0)?;
    Some(copy_gbps(&src, &mut dst, pool))
}

#[cfg(not(target_os = "linux"))]
fn huge_page_copy(_bytes: usize, _pool: &rayon::ThreadPool) -> Option<f64> {
    None
}

/// Measures the copy bandwidth with 2 threads on `bytes` bytes (4 KiB pages and huge pages).
///
/// # Errors
/// When the 2-thread pool cannot be built.
pub fn measure_bandwidth(bytes: usize) -> CliResult<Bandwidth> {
    let threads = 2;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Failure::input(format!("cannot start 2 threads for the copy: {e}")))?;
    let small = {
        let src = vec![1u8; bytes];
        let mut dst = vec![0u8; bytes];
        copy_gbps(&src, &mut dst, &pool)
    };
    let huge = huge_page_copy(bytes, &pool);
    Ok(Bandwidth {
        gbps: huge.map_or(small, |h| h.max(small)),
        pages_4k_gbps: Some(small),
        huge_gbps: huge,
        bytes,
        threads,
    })
}

// ---------------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------------

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Calls per timed batch of the latency workload.
const BATCH: usize = 1000;

/// The most timed calls of a workload under `--budget`. With 100, W1's timed calls (~0.1 ms
/// each) all fell inside 10 ms, and one disturbance of the shared machine that long moved the
/// whole sample: in 4 runs of `gather bench --only W0,W1,...`, W1's median was 168, 126, 198 and
/// 105 µs, the 198 with a minimum of 195 µs (every call at one-thread speed), while its usual
/// minimum is 103 µs. With up to 1000 the calls of the fast workloads spread over 0.1 s or more
/// (the budget), and the median is the middle of a sample that a passing disturbance no longer
/// fills. The slow workloads (W5, W9: 30-80 ms) are bound by the budget as before.
const MAX_REPS: usize = 1000;

fn reps_for(opts: &Options, one_s: f64, max: usize) -> usize {
    opts.repeat
        .unwrap_or_else(|| ((opts.budget_s / one_s.max(1e-9)) as usize).clamp(7, max))
        .max(1)
}

/// Times one workload on its data (inside the caller's pool).
fn time_workload(w: &Workload, data: &Data, opts: &Options, bar: &Progress) -> Record {
    let name = w.id.name();
    let rss_before = status_bytes("VmRSS");
    let file_before = status_bytes("RssFile");
    let hwm_reset = reset_hwm();
    // 1. the checked call, which also gives the extra memory of one call
    let first = w.run(data);
    let growth = status_bytes("VmHWM").saturating_sub(rss_before);
    let paged_in_bytes = status_bytes("RssFile").saturating_sub(file_before);
    let extra_bytes = growth.saturating_sub(paged_in_bytes);
    let check = first.and_then(|out| w.verify(data, &out));
    let failed = |check: Result<String, String>| Record {
        id: w.id,
        shapes: w.shapes(),
        median_s: f64::NAN,
        min_s: f64::NAN,
        reps: 0,
        calls_per_rep: 1,
        min_bytes: w.min_bytes(),
        out_bytes: w.out_bytes(),
        rss_before,
        peak_rss: status_bytes("VmHWM"),
        extra_bytes,
        paged_in_bytes,
        csr_allowance: w.csr_allowance(),
        check,
        hwm_reset,
    };
    if check.is_err() {
        return failed(check);
    }
    let mut times = Vec::new();
    let calls_per_rep;
    if w.id.is_latency() {
        let Data::Gather2 { x, index } = data else {
            return failed(Err(format!("{name}: the data of another workload")));
        };
        let batch = |n: usize| {
            let t = Instant::now();
            for _ in 0..n {
                black_box(gather::gather(black_box(x), 1, black_box(index)).ok());
            }
            t.elapsed().as_secs_f64()
        };
        let mut warm = f64::INFINITY;
        for _ in 0..opts.warmup.saturating_sub(1).max(1) {
            warm = warm.min(batch(BATCH));
        }
        let reps = reps_for(opts, warm, 1000);
        for i in 0..reps {
            times.push(batch(BATCH) / BATCH as f64);
            if i % 64 == 0 {
                bar.bar()
                    .set_message(format!("{name}: batch {}/{reps}", i + 1));
            }
        }
        calls_per_rep = BATCH;
    } else {
        let mut warm = f64::INFINITY;
        for i in 1..opts.warmup {
            bar.bar()
                .set_message(format!("{name}: warm-up {}/{}", i + 1, opts.warmup));
            let t = Instant::now();
            let out = w.run(data);
            warm = warm.min(t.elapsed().as_secs_f64());
            if let Err(e) = out {
                return failed(Err(e));
            }
        }
        if !warm.is_finite() {
            // no warm-up beyond the checked call: time one more to size the repetitions
            let t = Instant::now();
            let out = w.run(data);
            warm = t.elapsed().as_secs_f64();
            drop(black_box(out));
        }
        let reps = reps_for(opts, warm, MAX_REPS);
        for i in 0..reps {
            bar.bar()
                .set_message(format!("{name}: timing {}/{reps}", i + 1));
            let t = Instant::now();
            let out = w.run(data);
            let dt = t.elapsed().as_secs_f64();
            match out {
                Ok(out) => drop(black_box(out)),
                Err(e) => return failed(Err(e)),
            }
            times.push(dt);
        }
        calls_per_rep = 1;
    }
    let min_s = times.iter().copied().fold(f64::INFINITY, f64::min);
    Record {
        id: w.id,
        shapes: w.shapes(),
        median_s: median(&mut times),
        min_s,
        reps: times.len(),
        calls_per_rep,
        min_bytes: w.min_bytes(),
        out_bytes: w.out_bytes(),
        rss_before,
        peak_rss: status_bytes("VmHWM"),
        extra_bytes,
        paged_in_bytes,
        csr_allowance: w.csr_allowance(),
        check,
        hwm_reset,
    }
}

fn validate(opts: &Options) -> CliResult<()> {
    if opts.threads == 0 {
        return Err(Failure::input("--threads must be at least 1"));
    }
    if !(opts.scale > 0.0 && opts.scale <= 4.0) {
        return Err(
            Failure::input(format!("--scale must be in (0, 4], got {}", opts.scale))
                .with_hint("1 runs WORKLOADS.md's shapes; 0.01 is a quick smoke test"),
        );
    }
    if !(opts.budget_s > 0.0 && opts.budget_s.is_finite()) {
        return Err(Failure::input(format!(
            "--budget must be a positive number of seconds, got {}",
            opts.budget_s
        )));
    }
    if opts.repeat == Some(0) {
        return Err(Failure::input("--repeat must be at least 1"));
    }
    if opts.bandwidth_mib == 0 {
        return Err(Failure::input("--bandwidth-mib must be at least 1"));
    }
    if let Some(g) = opts.bandwidth_gbps {
        if !(g > 0.0 && g.is_finite()) {
            return Err(Failure::input(format!(
                "--bandwidth-gbps must be positive, got {g}"
            )));
        }
    }
    Ok(())
}

/// Runs the bench: the bandwidth, then every selected workload in a pool of `opts.threads`.
///
/// # Errors
/// Bad options (exit code 2). A workload whose result is wrong does not stop the bench: its
/// record carries the mismatch (see [`Report::all_verified`]).
pub fn run(opts: &Options) -> CliResult<Report> {
    validate(opts)?;
    let ids = select(opts.only.as_deref())
        .map_err(|e| Failure::input(e).with_hint("e.g. --only W3,W6 or --only W3_topk_patches"))?;
    let bar = Progress::start("bench", Kind::Count(ids.len() as u64 + 1), opts.progress);
    let bandwidth = match opts.bandwidth_gbps {
        Some(gbps) => Bandwidth {
            gbps,
            pages_4k_gbps: None,
            huge_gbps: None,
            bytes: 0,
            threads: 2,
        },
        None => {
            bar.bar().set_message(format!(
                "bandwidth: 2-thread copy of {} MiB",
                opts.bandwidth_mib
            ));
            measure_bandwidth(opts.bandwidth_mib << 20)?
        }
    };
    bar.inc(1);
    let records = if opts.isolate {
        let mut records = Vec::new();
        for &id in &ids {
            bar.bar()
                .set_message(format!("{}: running in a fresh process", id.name()));
            records.push(run_worker(id, opts, &bandwidth));
            bar.inc(1);
        }
        records
    } else {
        run_in_process(&ids, opts, &bar)?
    };
    bar.finish();
    Ok(Report {
        bandwidth,
        threads: opts.threads,
        scale: opts.scale,
        options: opts.clone(),
        hwm_reset: records.iter().all(|r| r.hwm_reset),
        records,
    })
}

/// Runs the workloads one after the other in this process, in a pool of `opts.threads`
/// (W6/W7 and W11a/W11b share their data).
fn run_in_process(ids: &[Id], opts: &Options, bar: &Progress) -> CliResult<Vec<Record>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build()
        .map_err(|e| Failure::input(format!("cannot start {} threads: {e}", opts.threads)))?;
    let mut records = Vec::new();
    pool.install(|| {
        let mut cached: Option<(Id, Data)> = None;
        for &id in ids {
            let w = Workload::new(id, opts.scale);
            if cached.as_ref().map(|c| c.0) != Some(id.data_key()) {
                drop(cached.take()); // free the previous inputs first
                bar.bar()
                    .set_message(format!("{}: generating {}", id.name(), w.shapes()));
                cached = Some((id.data_key(), w.make()));
            }
            let Some((_, data)) = cached.as_ref() else {
                continue;
            };
            records.push(time_workload(&w, data, opts, bar));
            bar.inc(1);
        }
    });
    Ok(records)
}

/// `gather bench --worker`: runs the workloads in this process and returns one JSON line per
/// record (what [`run`] reads back from its worker processes).
///
/// # Errors
/// Bad options.
pub fn worker(opts: &Options) -> CliResult<Vec<u8>> {
    let opts = Options {
        isolate: false,
        progress: false,
        bandwidth_gbps: Some(opts.bandwidth_gbps.unwrap_or(1.0)),
        ..opts.clone()
    };
    let report = run(&opts)?;
    let mut out = String::new();
    for r in &report.records {
        out.push_str(&r.to_json(&report.bandwidth));
        out.push('\n');
    }
    Ok(out.into_bytes())
}

/// Runs one workload in a fresh process (`<this executable> bench --worker --only ID ...`) and
/// reads its record back. A worker that fails gives a record whose check says why.
fn run_worker(id: Id, opts: &Options, bw: &Bandwidth) -> Record {
    let w = Workload::new(id, opts.scale);
    let failed = |why: String| Record {
        id,
        shapes: w.shapes(),
        median_s: f64::NAN,
        min_s: f64::NAN,
        reps: 0,
        calls_per_rep: 1,
        min_bytes: w.min_bytes(),
        out_bytes: w.out_bytes(),
        rss_before: 0,
        peak_rss: 0,
        extra_bytes: 0,
        paged_in_bytes: 0,
        csr_allowance: w.csr_allowance(),
        check: Err(why),
        hwm_reset: true,
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return failed(format!(
                "cannot find this executable to start a worker: {e}"
            ));
        }
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", "--worker", "--no-progress", "--only", id.short()])
        .args(["--threads", &opts.threads.to_string()])
        .args(["--warmup", &opts.warmup.to_string()])
        .args(["--budget", &opts.budget_s.to_string()])
        .args(["--scale", &opts.scale.to_string()])
        .args(["--bandwidth-gbps", &bw.gbps.to_string()]);
    if let Some(r) = opts.repeat {
        cmd.args(["--repeat", &r.to_string()]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => return failed(format!("cannot start a worker process: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| Record::from_json(&v).ok());
    match parsed {
        Some(r) if out.status.success() => r,
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            failed(format!(
                "the worker process failed ({}){}",
                out.status,
                last.map(|l| format!(": {l}")).unwrap_or_default()
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

/// A JSON number (`null` for NaN and infinities).
fn num(v: f64) -> String {
    serde_json::Number::from_f64(v).map_or_else(|| "null".to_string(), |n| n.to_string())
}

fn text(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_string(), num)
}

/// A time with a readable unit.
fn fmt_time(s: f64) -> String {
    if !s.is_finite() {
        "—".into()
    } else if s < 1e-6 {
        format!("{:.0} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.2} µs", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

impl Record {
    /// The record as one JSON object: `name`, `median_s`, `min_s`, `gbps`, `peak_rss_bytes`
    /// first, then the extra fields.
    pub fn to_json(&self, bw: &Bandwidth) -> String {
        let (verified, check) = match &self.check {
            Ok(c) => (true, c.as_str()),
            Err(e) => (false, e.as_str()),
        };
        format!(
            "{{\"name\": {}, \"median_s\": {}, \"min_s\": {}, \"gbps\": {}, \
             \"peak_rss_bytes\": {}, \"reps\": {}, \"calls_per_rep\": {}, \"min_bytes\": {}, \
             \"pct_bandwidth\": {}, \"limit_s\": {}, \"out_bytes\": {}, \"rss_before_bytes\": {}, \
             \"extra_bytes\": {}, \"paged_in_bytes\": {}, \"csr_allowance_bytes\": {}, \
             \"memory_ok\": {}, \"rss_hwm_reset\": {}, \"verified\": {}, \"check\": {}, \
             \"shapes\": {}}}",
            text(self.id.name()),
            num(self.median_s),
            num(self.min_s),
            num(self.gbps()),
            self.peak_rss,
            self.reps,
            self.calls_per_rep,
            num(self.min_bytes.round()),
            num(self.pct_bandwidth(bw)),
            num(self.limit_s(bw)),
            self.out_bytes,
            self.rss_before,
            self.extra_bytes,
            self.paged_in_bytes,
            self.csr_allowance,
            self.memory_ok(),
            self.hwm_reset,
            verified,
            text(check),
            text(&self.shapes),
        )
    }

    /// Reads back what [`Record::to_json`] wrote (the fields that are not derived).
    ///
    /// # Errors
    /// A missing or malformed field, or an unknown workload name.
    pub fn from_json(v: &serde_json::Value) -> Result<Record, String> {
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let u = |k: &str| v[k].as_u64().ok_or(format!("record without `{k}`"));
        let name = v["name"].as_str().ok_or("record without `name`")?;
        let id = *select(Some(name))?
            .first()
            .ok_or("record without a workload")?;
        let check = v["check"].as_str().unwrap_or_default().to_string();
        Ok(Record {
            id,
            shapes: v["shapes"].as_str().unwrap_or_default().to_string(),
            median_s: f("median_s"),
            min_s: f("min_s"),
            reps: u("reps")? as usize,
            calls_per_rep: u("calls_per_rep")? as usize,
            min_bytes: f("min_bytes"),
            out_bytes: u("out_bytes")? as usize,
            rss_before: u("rss_before_bytes")?,
            peak_rss: u("peak_rss_bytes")?,
            extra_bytes: u("extra_bytes")?,
            paged_in_bytes: v["paged_in_bytes"].as_u64().unwrap_or(0),
            csr_allowance: u("csr_allowance_bytes")? as usize,
            check: if v["verified"].as_bool() == Some(true) {
                Ok(check)
            } else {
                Err(check)
            },
            hwm_reset: v["rss_hwm_reset"].as_bool().unwrap_or(false),
        })
    }
}

impl Report {
    /// True when every workload's result passed its check.
    pub fn all_verified(&self) -> bool {
        self.records.iter().all(|r| r.check.is_ok())
    }

    /// The JSON of the issue: `{"bandwidth_gbps", "threads", "workloads": [{"name", "median_s",
    /// "min_s", "gbps", "peak_rss_bytes", ...}], ...}`, the documented fields first, extra fields
    /// after them.
    pub fn to_json(&self) -> String {
        let bw = &self.bandwidth;
        let mut s = String::new();
        s.push_str(&format!(
            "{{\"bandwidth_gbps\": {}, \"threads\": {}, \"workloads\": [",
            num(bw.gbps),
            self.threads
        ));
        for (i, r) in self.records.iter().enumerate() {
            s.push_str(if i > 0 { ",\n  " } else { "\n  " });
            s.push_str(&r.to_json(bw));
        }
        let o = &self.options;
        s.push_str(&format!(
            "\n], \"scale\": {}, \"bandwidth_bytes\": {}, \"bandwidth_threads\": {}, \
             \"bandwidth_4k_gbps\": {}, \"bandwidth_huge_gbps\": {}, \"bandwidth_given\": {}, \
             \"rss_hwm_reset\": {}, \"isolated\": {}, \"repeat\": {}, \"warmup\": {}, \
             \"budget_s\": {}, \"version\": {}}}\n",
            num(self.scale),
            bw.bytes,
            bw.threads,
            opt(bw.pages_4k_gbps),
            opt(bw.huge_gbps),
            o.bandwidth_gbps.is_some(),
            self.hwm_reset,
            o.isolate,
            o.repeat.map_or("null".into(), |r| r.to_string()),
            o.warmup,
            num(o.budget_s),
            text(env!("CARGO_PKG_VERSION")),
        ));
        s
    }

    /// The human-readable table.
    ///
    /// # Errors
    /// When `w` fails.
    pub fn print(&self, w: &mut dyn Write) -> std::io::Result<()> {
        let bw = &self.bandwidth;
        if bw.pages_4k_gbps.is_some() {
            let huge = bw
                .huge_gbps
                .map_or("unavailable".to_string(), |h| format!("{h:.1}"));
            writeln!(
                w,
                "bandwidth: {:.1} GB/s (copy of {} MiB on {} threads, bytes read + written; \
                 4 KiB pages {:.1}, huge pages {huge})",
                bw.gbps,
                bw.bytes >> 20,
                bw.threads,
                bw.pages_4k_gbps.unwrap_or(f64::NAN),
            )?;
        } else {
            writeln!(w, "bandwidth: {:.1} GB/s (given)", bw.gbps)?;
        }
        writeln!(
            w,
            "threads: {}{}",
            self.threads,
            if self.scale == 1.0 {
                String::new()
            } else {
                format!(", scale {} (shapes shrunk: not WORKLOADS.md's)", self.scale)
            }
        )?;
        writeln!(w)?;
        writeln!(
            w,
            "{:<25} {:>11} {:>11} {:>5} {:>8} {:>6} {:>11} {:>9} {:>9} {:>9} {:>4}  check",
            "workload",
            "median",
            "min",
            "reps",
            "GB/s",
            "%bw",
            "limit",
            "out MB",
            "extra MB",
            "peak MB",
            "mem"
        )?;
        for r in &self.records {
            let check = match &r.check {
                Ok(c) => format!("ok ({c})"),
                Err(e) => format!("WRONG: {e}"),
            };
            writeln!(
                w,
                "{:<25} {:>11} {:>11} {:>5} {:>8.2} {:>6.1} {:>11} {:>9.2} {:>9.2} {:>9.1} {:>4}  {check}",
                r.id.name(),
                fmt_time(r.median_s),
                fmt_time(r.min_s),
                r.reps,
                r.gbps(),
                r.pct_bandwidth(bw),
                fmt_time(r.limit_s(bw)),
                r.out_bytes as f64 / 1e6,
                r.extra_bytes as f64 / 1e6,
                r.peak_rss as f64 / 1e6,
                if r.memory_ok() { "ok" } else { "OVER" },
            )?;
        }
        writeln!(w)?;
        writeln!(
            w,
            "GB/s = minimal bytes / median; %bw = GB/s / bandwidth; limit = minimal bytes / \
             bandwidth. extra = RSS high-water mark during the first call - RSS before it \
             - code paged in by it (mem: extra <= output + 10% + 1 MiB, + the CSR for W6/W7). \
             W0 times are per call (batches of {BATCH}). A %bw over 100 means the working set \
             stayed in the CPU caches between calls (it fits in a 32 MiB L3)."
        )?;
        if !self.hwm_reset {
            writeln!(
                w,
                "note: /proc/self/clear_refs could not reset the RSS high-water mark: peak and \
                 extra memory are the process's peaks so far (upper bounds)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn proc_status_is_read_in_bytes() {
        let rss = status_bytes("VmRSS");
        assert!(rss > 1 << 20, "{rss}");
        assert_eq!(rss % 1024, 0);
        assert_eq!(status_bytes("NoSuchField"), 0);
    }

    #[test]
    fn a_report_serialises_to_the_documented_json() {
        let opts = Options {
            only: Some("W0,W9".into()),
            scale: 0.001,
            repeat: Some(2),
            warmup: 1,
            bandwidth_gbps: Some(40.0),
            ..Options::default()
        };
        let report = run(&opts).unwrap();
        assert!(report.all_verified());
        let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(v["bandwidth_gbps"], 40.0);
        assert_eq!(v["threads"], 2);
        assert_eq!(v["scale"], 0.001);
        let ws = v["workloads"].as_array().unwrap();
        assert_eq!(ws.len(), 2);
        assert_eq!(ws[0]["name"], "W0_tiny");
        assert_eq!(ws[1]["name"], "W9_take_1d");
        for w in ws {
            let med = w["median_s"].as_f64().unwrap();
            let min = w["min_s"].as_f64().unwrap();
            assert!(min > 0.0 && min <= med, "{w}");
            assert!(w["gbps"].as_f64().unwrap() > 0.0);
            assert!(w["peak_rss_bytes"].as_u64().unwrap() > 0);
            assert_eq!(w["verified"], true);
        }
        let mut table = Vec::new();
        report.print(&mut table).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert!(table.contains("W9_take_1d"), "{table}");
        assert!(table.contains("scale 0.001"), "{table}");
    }

    #[test]
    fn bad_options_are_input_errors() {
        for opts in [
            Options {
                threads: 0,
                ..Options::default()
            },
            Options {
                scale: 0.0,
                ..Options::default()
            },
            Options {
                only: Some("W1,W42".into()),
                ..Options::default()
            },
            Options {
                repeat: Some(0),
                ..Options::default()
            },
        ] {
            let e = run(&opts).unwrap_err();
            assert_eq!(e.code, 2, "{e}");
        }
    }

    #[test]
    fn a_small_copy_measures_a_positive_bandwidth() {
        let bw = measure_bandwidth(8 << 20).unwrap();
        assert!(bw.gbps > 0.0 && bw.gbps.is_finite());
        assert!(bw.gbps >= bw.pages_4k_gbps.unwrap());
        assert_eq!(bw.threads, 2);
    }
}
