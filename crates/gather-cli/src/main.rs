//! The `gather` command: see `gather --help`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gather_cli::check::{CheckRequest, check, parse_shape};
use gather_cli::conformance::{Options, run_suite};
use gather_cli::explain::{explain, load_inputs};
use gather_cli::fail::{CliResult, EXIT_NO, Failure};
use gather_cli::infer::{chosen_index, infer};
use gather_cli::opargs::{OpOptions, TensorOptions, parse_dtype};
use gather_cli::run::{RunRequest, run};
use gather_cli::tensor_io::{LoadOptions, Pending, Role, load, output_target, prepare_output};

/// PyTorch's gather/scatter family for Rust: explain, check, infer and run the ops; demo;
/// conformance runner.
#[derive(Parser)]
#[command(name = "gather", version, about, long_about = None, after_help = "\
Examples:
  gather explain gather --input '[[10,20,30],[40,50,60]]' --index '[[0,2],[1,0]]' --dim 1
  gather check gather --input-shape 128,21,4 --index-shape 128 --dim 1
  gather infer --input a.npy --output b.npy
  gather run scatter_add --input x.npy --index i.npy --src s.npy --dim 0 -o out.npy
  gather demo
  gather conformance ../shared/conformance/cases
  gather bench --only W3,W6 --json bench.json

Exit codes: 0 success; 1 a negative answer (check: invalid call, infer: no dim,
conformance: failing cases, bench: a wrong result); 2 bad input (files, arguments, an op's error).")]
struct Cli {
    /// Never show progress bars (they appear on stderr, only when it is a terminal and a step
    /// takes more than a second).
    #[arg(long, global = true)]
    no_progress: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one op on small tensors and print where every output element comes from, in the
    /// tutorials' form: out[0][1] = input[0][index[0][1]] = input[0][2] = 30.
    #[command(after_help = "\
Tensors are inline literals (JSON nested lists: integers are int64, numbers with a
point float32, true/false bool; --dtype converts), .npy files, or
file.safetensors:name. Scatter-like ops print where each source element lands
and how duplicates were reduced. Tensors of up to 200000 elements; each section
prints at most --max-lines lines unless --all.

Examples:
  gather explain gather --input '[[10,20,30],[40,50,60]]' --index '[[0,2],[1,0]]' --dim 1
  gather explain scatter_add --input '[[0,0,0],[0,0,0]]' --index '[[0,2],[2,0]]' \\
      --src '[[1,2],[3,4]]' --dim 1
  gather explain scatter_reduce --input '[5,5,5]' --index '[0,0,2]' --src '[1,9,3]' \\
      --dim 0 --reduce amax --include-self false
  gather explain take_along_dim --input x.npy --index i.npy --dim -1 --svg map.svg
  gather explain sort --input '[[3,1,2]]' --descending")]
    Explain {
        /// The op: gather, scatter, scatter_add, scatter_reduce, index_select, take,
        /// take_along_dim, index_add, index_copy, index_fill, index_reduce, masked_select,
        /// masked_scatter, put, topk, sort, argsort, repeat_interleave, select_batched (the
        /// library's other ops run with `gather run`).
        op: String,
        #[command(flatten)]
        tensors: TensorOptions,
        #[command(flatten)]
        opts: OpOptions,
        /// Also draw the mapping as an SVG picture (tensors of 0 to 3 dims).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Print every line (the default cuts each section to --max-lines).
        #[arg(long)]
        all: bool,
        /// The most lines printed per section.
        #[arg(long, value_name = "N", default_value_t = 48)]
        max_lines: usize,
    },
    /// Say whether a call is valid for these shapes and what the output shape is; when it is
    /// not, propose fixes as concrete calls.
    #[command(after_help = "\
Shapes are sizes separated by commas (128,21,4) or lists ([128, 21, 4]; [] for
0-d). The call runs on zero-filled tensors of those shapes, so the verdict and
the error are the library's own. Every fix shown was checked the same way.
Exits with 0 when the call is valid, 1 when it is not.

Examples:
  gather check gather --input-shape 128,21,4 --index-shape 128 --dim 1
  gather check gather --input-shape 2,5,3 --index-shape 2,2 --dim 1
  gather check scatter_add --input-shape 4,3 --index-shape 2,3 --src-shape 2,3 --dim 0
  gather check index_select --input-shape 10,4 --index-shape 3 --dim 0")]
    Check {
        /// The op (see `gather explain --help` for the list).
        op: String,
        /// Shape of the input.
        #[arg(long, value_name = "SHAPE")]
        input_shape: Option<String>,
        /// Shape of the index.
        #[arg(long, value_name = "SHAPE")]
        index_shape: Option<String>,
        /// Shape of src (scatter, scatter_add, scatter_reduce).
        #[arg(long, value_name = "SHAPE")]
        src_shape: Option<String>,
        /// Shape of source (index_add, index_copy, index_reduce, masked_scatter, put).
        #[arg(long, value_name = "SHAPE")]
        source_shape: Option<String>,
        /// Shape of the mask (masked_select, masked_scatter).
        #[arg(long, value_name = "SHAPE")]
        mask_shape: Option<String>,
        /// Shape of a repeats tensor (repeat_interleave).
        #[arg(long, value_name = "SHAPE")]
        repeats_shape: Option<String>,
        /// Shape of the offsets (segment ops).
        #[arg(long, value_name = "SHAPE")]
        offsets_shape: Option<String>,
        /// Shape of the ids (segment ops).
        #[arg(long, value_name = "SHAPE")]
        ids_shape: Option<String>,
        /// Shape of the lengths (segment ops).
        #[arg(long, value_name = "SHAPE")]
        lengths_shape: Option<String>,
        /// Shape of the weights (bincount).
        #[arg(long, value_name = "SHAPE")]
        weights_shape: Option<String>,
        /// Element type of input/src/source.
        #[arg(long, value_name = "DTYPE", default_value = "float32")]
        dtype: String,
        /// Element type of the index.
        #[arg(long, value_name = "DTYPE", default_value = "int64")]
        index_dtype: String,
        #[command(flatten)]
        opts: OpOptions,
    },
    /// Find every dim and an index with gather(input, dim, index) == output, or explain why
    /// there is none.
    #[command(after_help = "\
Reports each dim of the input: the index that works, or the first output
element that cannot be found along that dim. Says when the answer is not
unique (repeated values, or several dims). An output with one dim fewer than
the input is tried as gather(...).squeeze(dim). Exits with 0 when a dim works,
1 when none does.

Examples:
  gather infer --input a.npy --output b.npy
  gather infer --input '[[10,20,30],[40,50,60]]' --output '[[10,30],[50,40]]'
  gather infer --input logits.npy --output picked.npy --dim -1 -o labels.npy")]
    Infer {
        /// The input A: a .npy file, file.safetensors:name, or an inline tensor.
        #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
        input: String,
        /// The wanted output B.
        #[arg(long, allow_hyphen_values = true, value_name = "TENSOR")]
        output: String,
        /// Save the index of this dim (default: of the dim that works; the first if several).
        #[arg(long, allow_negative_numbers = true, value_name = "D")]
        dim: Option<i64>,
        /// Write the index found to this file (.npy or .safetensors), as int64.
        #[arg(short = 'o', long = "save-index", value_name = "FILE")]
        save_index: Option<String>,
        /// Read `<u2` .npy files as bfloat16 bit patterns.
        #[arg(long)]
        bf16_npy: bool,
    },
    /// Run any op of the library on .npy / .safetensors files (every dtype) and write the
    /// result atomically.
    #[command(after_help = "\
Tensors: x.npy, x.safetensors:name (the name may be left out when the file
holds one tensor), or inline literals. bfloat16 has no .npy type: use
.safetensors, or --bf16-npy to read <u2 .npy data as bfloat16 bit patterns
(bfloat16 results go to .npy the same way). sort and topk return values and
indices: give two -o files, or one .safetensors file holding both.
Outputs appear only when complete (temporary file, then rename).

Examples:
  gather run gather --input x.npy --index i.npy --dim 1 -o out.npy
  gather run scatter_reduce --input x.npy --index i.npy --src s.npy --dim 0 \\
      --reduce amax --include-self false -o out.npy
  gather run index_select --input emb.safetensors:weight --index ids.npy --dim 0 \\
      -o rows.safetensors:rows
  gather run topk --input scores.npy -k 5 -o values.npy -o indices.npy
  gather run sort --input x.safetensors:x --descending -o sorted.safetensors
  gather run scatter_groups --src msgs.npy --index dst.npy --dim 0 --reduce logsumexp \\
      --dim-size 100 -o nodes.npy
  gather run segment_reduce --src x.npy --offsets '[0, 2, 5]' --dim 0 --reduce amax -o out.npy
  gather run gather_broadcast --input patches.npy --index keep.npy --dim 1 -o picked.npy")]
    Run {
        /// The op (see `gather explain --help` for the list).
        op: String,
        #[command(flatten)]
        tensors: TensorOptions,
        #[command(flatten)]
        opts: OpOptions,
        /// Output file(s): out.npy or out.safetensors[:name]; one per output.
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: Vec<String>,
    },
    /// Show the typical uses (DESIGN.md's scenarios) on small data: the input, the call as Rust
    /// code, and the output; and one error with its hint.
    #[command(after_help = "\
Scenarios: basic 2-D gather, top-k patch selection, MAE random masking, token
scores, per-region box regression, attention-head selection, scatter_add as
the gradient of gather, and the error for a label index without its axis.

Example:
  gather demo | less")]
    Demo,
    /// Run a conformance suite: every case folder of DIR (in the format of
    /// shared/conformance/README.md), checked by the rules R1-R7.
    #[command(after_help = "\
Prints one line per failing case, then `N passed, N failed`.
Exits with 1 when a case failed, 2 when DIR cannot be read.

Examples:
  gather conformance ../shared/conformance/cases
  gather conformance ../shared/conformance/cases --filter scatter_reduce__
  gather conformance ../shared/conformance/cases --filter topk --verbose")]
    Conformance {
        /// The folder holding the case folders (or the suite's root, with a `cases` folder).
        dir: PathBuf,
        /// Run only the cases whose folder name contains this text.
        #[arg(long, value_name = "SUBSTRING")]
        filter: Option<String>,
        /// Also list the cases that pass, and print the notes of failing ones.
        #[arg(long, short)]
        verbose: bool,
        /// Where the ops run: `cpu`, or `cuda` (GPU 0, through gather-cuda: forward results and
        /// errors; gradients and in-place forms are checked on the CPU only).
        #[arg(long, value_name = "DEVICE", default_value = "cpu")]
        device: String,
    },
    /// Time the benchmark workloads of WORKLOADS.md (W0-W11) next to the memory bandwidth:
    /// median and minimum time, GB/s against each workload's minimal bytes, % of the
    /// bandwidth, output size and extra memory; each result is checked first.
    #[command(after_help = "\
Each workload's data is generated with fixed seeds (untimed), its first result
is checked against the definition on a sample of positions (a wrong result
makes the exit code 1), then it runs --warmup untimed calls and the timed ones.
Calls are out of place, on the typed API, with expanded indices as stride-0
views. W0 (the 2x3 seed example) is a per-call latency, timed in batches.

Minimal bytes (WORKLOADS.md): distinct input elements touched + the index as
stored + the output; for scatters, src + index + 2 x the destination. GB/s =
minimal bytes / median time. The bandwidth is a 2-thread copy_from_slice of
--bandwidth-mib MiB counting bytes read + written, on 4 KiB and on huge pages
(the faster is used). Memory: peak RSS (VmHWM, reset through
/proc/self/clear_refs before each workload) and the extra RSS of the first
call over the RSS before it. Each workload runs in a fresh process unless
--in-process; for /usr/bin/time -v, give --in-process and --bandwidth-gbps so
that the process holds one workload and no copy buffers.

Examples:
  gather bench
  gather bench --only W3,W6 --threads 2 --json bench.json
  gather bench --only W0,W1 --scale 0.1 --repeat 3   # a quick smoke run
  /usr/bin/time -v gather bench --only W6 --in-process --bandwidth-gbps 40")]
    Bench {
        /// Workloads to run, comma-separated: short names (W3), full names (W3_topk_patches),
        /// or W11 for W11a and W11b. Default: all.
        #[arg(long, value_name = "LIST")]
        only: Option<String>,
        /// Threads of the rayon pool the workloads run in. Default 2 (not the number of cores):
        /// the performance targets are measured with 2 threads.
        #[arg(long, value_name = "N", default_value_t = 2)]
        threads: usize,
        /// Also write the results as JSON: {"bandwidth_gbps", "threads", "workloads": [{"name",
        /// "median_s", "min_s", "gbps", "peak_rss_bytes", ...}], ...}.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Timed calls per workload (default: as many as fit in --budget, 7 to 1000; W0: batches
        /// of 1000 calls, up to 1000 batches).
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
        /// Untimed calls before the timed ones; the first is the checked one.
        #[arg(long, value_name = "N", default_value_t = 2)]
        warmup: usize,
        /// Seconds of timed calls per workload, when --repeat is not given.
        #[arg(long, value_name = "SECONDS", default_value_t = 0.5)]
        budget: f64,
        /// Factor on the workloads' large dims, for quick runs (the JSON records it); 1 is
        /// WORKLOADS.md's shapes.
        #[arg(long, value_name = "F", default_value_t = 1.0)]
        scale: f64,
        /// Size of the copy that measures the bandwidth, MiB.
        #[arg(long, value_name = "MIB", default_value_t = 1024)]
        bandwidth_mib: usize,
        /// Use this bandwidth (GB/s, read + write) instead of measuring it.
        #[arg(long, value_name = "GBPS")]
        bandwidth_gbps: Option<f64>,
        /// Run every workload in this process (faster to start, but memory freed by an earlier
        /// workload can hide a later one's allocations). By default each workload runs in a
        /// fresh process.
        #[arg(long)]
        in_process: bool,
        /// Internal: run the workloads here and print one JSON record per line (what the
        /// fresh processes do).
        #[arg(long, hide = true)]
        worker: bool,
        /// Where the workloads run: `cpu`, or `cuda` (GPU 0: each call timed with CUDA events,
        /// --repeat calls, default 50).
        #[arg(long, value_name = "DEVICE", default_value = "cpu")]
        device: String,
        /// With --device cuda: also the large workloads W6x16 (16M edges x 64 floats into 1M
        /// rows), W8x20 (1M ids into a 2M x 256 table) and W9x16 (take of 2^28 positions);
        /// --only may also name them.
        #[arg(long)]
        large: bool,
    },
}

/// What a subcommand printed, and its exit code.
type Outcome = CliResult<(Vec<u8>, u8)>;

/// The GPU that `--device` names: `None` for `cpu`, GPU 0 for `cuda`.
fn device(name: &str) -> CliResult<Option<gather_cuda::Cuda>> {
    match name {
        "cpu" => Ok(None),
        "cuda" => gather_cuda::Cuda::new(0)
            .map(Some)
            .map_err(|e| Failure::input(e.to_string())),
        other => Err(Failure::input(format!(
            "unknown device `{other}`: the devices are cpu and cuda"
        ))),
    }
}

fn cmd_conformance(
    dir: &std::path::Path,
    filter: Option<String>,
    verbose: bool,
    device_name: &str,
    progress: bool,
) -> Outcome {
    let gpu = device(device_name)?;
    let on_gpu = gpu
        .as_ref()
        .map(|g| g.name().unwrap_or_else(|_| "the GPU".into()));
    let options = Options {
        filter,
        verbose,
        progress,
        gpu,
    };
    let report = run_suite(dir, &options).map_err(Failure::input)?;
    let mut text = Vec::new();
    report.print(&mut text, verbose)?;
    if let Some(name) = on_gpu {
        use std::io::Write;
        writeln!(
            text,
            "cuda: results, errors, in-place forms and gradients checked on {name}"
        )?;
    }
    Ok((text, if report.failed() > 0 { 1 } else { 0 }))
}

/// `gather bench --device cuda`: each workload checked against the CPU library, then timed
/// with CUDA events; one line per workload as it finishes.
fn cmd_bench_cuda(
    gpu: &gather_cuda::Cuda,
    only: Option<&str>,
    large: bool,
    warmup: usize,
    repeat: usize,
    json: Option<&std::path::Path>,
) -> Outcome {
    use std::io::Write;
    let name = gpu.name().unwrap_or_default();
    println!("GPU: {name}");
    println!(
        "{:<22} {:>11} {:>11} {:>9}  check",
        "workload", "median µs", "min µs", "GB/s"
    );
    let rows = gather_cli::cuda::bench(gpu, only, large, warmup, repeat, |t| {
        println!(
            "{:<22} {:>11.1} {:>11.1} {:>9.0}  {}",
            t.name,
            t.median_s * 1e6,
            t.min_s * 1e6,
            t.min_bytes / t.median_s / 1e9,
            t.check
        );
        let _ = std::io::stdout().flush();
    })
    .map_err(|e| Failure {
        message: e,
        hint: None,
        code: 1,
    })?;
    if let Some(path) = json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|t| {
                serde_json::json!({"name": t.name, "median_s": t.median_s, "min_s": t.min_s,
                    "min_bytes": t.min_bytes, "check": t.check})
            })
            .collect();
        let doc = serde_json::json!({"device": name, "workloads": list});
        std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default())
            .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok((Vec::new(), 0))
}

fn main() -> ExitCode {
    install_panic_hook();
    let cli = Cli::parse();
    let progress = !cli.no_progress;
    let outcome = match cli.command {
        Command::Explain {
            op,
            tensors,
            opts,
            svg,
            all,
            max_lines,
        } => cmd_explain(
            &op,
            &tensors,
            &opts,
            svg,
            (!all).then_some(max_lines),
            progress,
        ),
        Command::Check {
            op,
            input_shape,
            index_shape,
            src_shape,
            source_shape,
            mask_shape,
            repeats_shape,
            offsets_shape,
            ids_shape,
            lengths_shape,
            weights_shape,
            dtype,
            index_dtype,
            opts,
        } => {
            let shapes = [
                ("input", input_shape),
                ("index", index_shape),
                ("src", src_shape),
                ("source", source_shape),
                ("mask", mask_shape),
                ("repeats", repeats_shape),
                ("offsets", offsets_shape),
                ("ids", ids_shape),
                ("lengths", lengths_shape),
                ("weights", weights_shape),
            ];
            cmd_check(op, &shapes, &dtype, &index_dtype, opts)
        }
        Command::Infer {
            input,
            output,
            dim,
            save_index,
            bf16_npy,
        } => cmd_infer(
            &input,
            &output,
            dim,
            save_index.as_deref(),
            bf16_npy,
            progress,
        ),
        Command::Run {
            op,
            tensors,
            opts,
            out,
        } => {
            let req = RunRequest {
                op,
                tensors,
                opts,
                outputs: out,
                progress,
            };
            let mut log = Vec::new();
            run(&req, &mut log).map(|()| (log, 0))
        }
        Command::Demo => {
            let mut text = Vec::new();
            gather_cli::demo::run(&mut text)
                .map(|()| (text, 0))
                .map_err(|e| Failure {
                    message: e,
                    hint: None,
                    code: 1,
                })
        }
        Command::Conformance {
            dir,
            filter,
            verbose,
            device,
        } => cmd_conformance(&dir, filter, verbose, &device, progress),
        Command::Bench {
            only,
            threads,
            json,
            repeat,
            warmup,
            budget,
            scale,
            bandwidth_mib,
            bandwidth_gbps,
            in_process,
            worker,
            device: device_name,
            large,
        } => match device(&device_name) {
            Err(e) => Err(e),
            Ok(Some(gpu)) => cmd_bench_cuda(
                &gpu,
                only.as_deref(),
                large,
                warmup.max(1),
                repeat.unwrap_or(50),
                json.as_deref(),
            ),
            Ok(None) => {
                let opts = gather_cli::bench::Options {
                    only,
                    threads,
                    repeat,
                    warmup: warmup.max(1),
                    budget_s: budget,
                    scale,
                    bandwidth_mib,
                    bandwidth_gbps,
                    progress,
                    isolate: !in_process,
                };
                if worker {
                    gather_cli::bench::worker(&opts).map(|text| (text, 0))
                } else {
                    cmd_bench(&opts, json)
                }
            }
        },
    };
    match outcome {
        Ok((text, code)) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`gather explain ... | head`) is not an error.
            let _ = out.write_all(&text).and_then(|()| out.flush());
            ExitCode::from(code)
        }
        Err(f) => {
            eprintln!("{f}");
            ExitCode::from(f.code)
        }
    }
}

/// A panic is a bug of the command: say so in one line, without a backtrace.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "error: internal error (a bug in gather): {msg}{at}\nhint: please report the command line that caused it"
        );
    }));
}

fn cmd_explain(
    op: &str,
    tensors: &TensorOptions,
    opts: &OpOptions,
    svg: Option<PathBuf>,
    max_lines: Option<usize>,
    progress: bool,
) -> Outcome {
    let inputs = load_inputs(op, tensors, opts, progress)?;
    let e = explain(op, opts, inputs)?;
    let mut text = Vec::new();
    e.print(&mut text, max_lines)?;
    if let Some(path) = svg {
        let picture = gather_cli::svg::render(&e)?;
        Pending::write(&path, picture.as_bytes())?.commit()?;
        writeln!(text, "picture: {}", path.display())?;
    }
    Ok((text, 0))
}

fn cmd_bench(opts: &gather_cli::bench::Options, json: Option<PathBuf>) -> Outcome {
    let report = gather_cli::bench::run(opts)?;
    let mut text = Vec::new();
    report.print(&mut text)?;
    if let Some(path) = json {
        Pending::write(&path, report.to_json().as_bytes())?.commit()?;
        writeln!(text, "wrote {}", path.display())?;
    }
    let code = if report.all_verified() { 0 } else { EXIT_NO };
    Ok((text, code))
}

fn cmd_check(
    op: String,
    shapes: &[(&str, Option<String>)],
    dtype: &str,
    index_dtype: &str,
    opts: OpOptions,
) -> Outcome {
    let mut list = Vec::new();
    for (name, s) in shapes {
        if let Some(s) = s {
            list.push((
                name.to_string(),
                parse_shape(s).map_err(|e| e.context(&format!("--{name}-shape")))?,
            ));
        }
    }
    let req = CheckRequest {
        op,
        shapes: list,
        dtype: parse_dtype(Some(dtype))?.unwrap_or(gather::DType::F32),
        index_dtype: parse_dtype(Some(index_dtype))?.unwrap_or(gather::DType::I64),
        opts,
    };
    let mut text = Vec::new();
    let valid = check(&req, &mut text)?;
    Ok((text, if valid { 0 } else { EXIT_NO }))
}

fn cmd_infer(
    input: &str,
    output: &str,
    dim: Option<i64>,
    save: Option<&str>,
    bf16_npy: bool,
    progress: bool,
) -> Outcome {
    let opts = LoadOptions {
        dtype: None,
        bf16_npy,
        progress,
    };
    let a = load(input, Role::Data, &opts).map_err(|e| e.context("--input"))?;
    let b = load(output, Role::Data, &opts).map_err(|e| e.context("--output"))?;
    let target = save.map(output_target).transpose()?;
    let r = infer(&a, &b)?;
    let mut text = Vec::new();
    writeln!(
        text,
        "input {}, output {}",
        gather_cli::tensor_io::describe(&a),
        gather_cli::tensor_io::describe(&b)
    )?;
    r.print(&mut text)?;
    let works = !r.working_dims().is_empty();
    if let Some(t) = target {
        if works || dim.is_some() {
            let (d, index) = chosen_index(&r, dim)?;
            prepare_output(
                &t,
                &[("index".to_string(), gather::dynamic::Tensor::from(index))],
            )?
            .commit()?;
            writeln!(
                text,
                "saved the index of dim {d} to {}",
                save.unwrap_or_default()
            )?;
        }
    }
    Ok((text, if works { 0 } else { EXIT_NO }))
}
