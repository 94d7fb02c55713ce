//! `gather run`: one op of the library on files, every op and every dtype, through
//! `gather::dynamic::call` (so an op works here as soon as the library has it).
//!
//! Inputs are `.npy` files, tensors of `.safetensors` files (`file.safetensors:name`) or inline
//! literals; outputs (`-o`) are `.npy` or `.safetensors` files, written atomically: every output
//! is first written completely to a temporary file beside its target and renamed into place
//! only when all of them are complete, so a failure leaves no partial file and an existing file
//! untouched. Reading, running and writing show a progress bar when they take more than a
//! second.
//!
//! ```
//! use gather_cli::opargs::{OpOptions, TensorOptions};
//! use gather_cli::run::{run, RunRequest};
//! let dir = tempfile::tempdir().unwrap();
//! let out = dir.path().join("out.npy");
//! let req = RunRequest {
//!     op: "gather".into(),
//!     tensors: TensorOptions {
//!         input: Some("[[10, 20, 30], [40, 50, 60]]".into()),
//!         index: Some("[[0, 2], [1, 0]]".into()),
//!         ..Default::default()
//!     },
//!     opts: OpOptions { dim: Some("1".into()), ..Default::default() },
//!     outputs: vec![out.to_str().unwrap().to_string()],
//!     progress: false,
//! };
//! let mut log = Vec::new();
//! run(&req, &mut log).unwrap();
//! let t = gather_cli::tensor_io::load(out.to_str().unwrap(), gather_cli::tensor_io::Role::Data, &Default::default()).unwrap();
//! assert_eq!(gather_cli::tensor_io::show_tensor(&t), "[[10, 30], [50, 40]]");
//! ```

use std::io::Write;

use gather::dynamic::{self, Tensor};

use crate::explain::load_inputs;
use crate::fail::{CliResult, Failure};
use crate::opargs::{self, OpOptions, TensorOptions};
use crate::progress::{Kind, Progress};
use crate::tensor_io::{Pending, Source, describe, output_target, prepare_output};

/// One `gather run` call.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The op's PyTorch name.
    pub op: String,
    /// Its tensors.
    pub tensors: TensorOptions,
    /// Its other arguments.
    pub opts: OpOptions,
    /// The `-o` files.
    pub outputs: Vec<String>,
    /// Show progress bars on slow steps.
    pub progress: bool,
}

/// Which outputs go to which file: `(target, output names)`.
fn plan_outputs(
    op: &str,
    names: &[&str],
    files: &[String],
) -> CliResult<Vec<(Source, Vec<String>)>> {
    let targets: Vec<Source> = files
        .iter()
        .map(|f| output_target(f))
        .collect::<CliResult<_>>()?;
    let list = names.join(" and ");
    match (targets.len(), names.len()) {
        (0, _) => Err(Failure::input(format!("{op}: where should the result go? give -o FILE"))
            .with_hint(if names.len() == 1 {
                "e.g. -o out.npy or -o out.safetensors:name".to_string()
            } else {
                format!("{op} returns {list}: give -o values.npy -o indices.npy, or one -o out.safetensors")
            })),
        (a, b) if a == b => Ok(targets.into_iter().zip(names).map(|(t, n)| (t, vec![n.to_string()])).collect()),
        (1, _) => match &targets[0] {
            Source::Safetensors(_, None) => Ok(vec![(targets[0].clone(), names.iter().map(|n| n.to_string()).collect())]),
            _ => Err(Failure::input(format!(
                "{op} returns {} tensors ({list}) but one -o file was given",
                names.len()
            ))
            .with_hint(format!(
                "give one -o per output, in the order {list}, or a single .safetensors file without `:name` to hold them all"
            ))),
        },
        (a, b) => Err(Failure::input(format!("{op} returns {b} tensor(s) ({list}) but {a} -o files were given"))
            .with_hint(format!("give one -o per output, in the order {list}"))),
    }
}

fn target_name(t: &Source) -> String {
    match t {
        Source::Npy(p) => p.display().to_string(),
        Source::Safetensors(p, Some(n)) => format!("{}:{n}", p.display()),
        Source::Safetensors(p, None) => p.display().to_string(),
        Source::Inline(s) => s.clone(),
    }
}

/// Runs the op and writes its outputs; prints one line per file written to `log`.
pub fn run(req: &RunRequest, log: &mut dyn Write) -> CliResult<()> {
    let spec = opargs::spec(&req.op)?;
    let plan = plan_outputs(&req.op, spec.outputs, &req.outputs)?;
    let inputs = load_inputs(&req.op, &req.tensors, &req.opts, req.progress)?;
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    let args = req.opts.to_args(spec, &names)?;
    let bar = Progress::start(&format!("running {}", req.op), Kind::Spinner, req.progress);
    let result = dynamic::call(&req.op, &args, &inputs);
    bar.finish();
    let outputs: Vec<(String, Tensor)> = result?;
    let bar = Progress::start("writing", Kind::Spinner, req.progress);
    let mut pending: Vec<(Pending, String, Vec<String>)> = Vec::new();
    for (target, wanted) in &plan {
        let tensors: Vec<(String, Tensor)> = wanted
            .iter()
            .map(|w| {
                outputs
                    .iter()
                    .find(|(n, _)| n == w)
                    .cloned()
                    .ok_or_else(|| Failure::input(format!("{} returned no `{w}`", req.op)))
            })
            .collect::<CliResult<_>>()?;
        let what: Vec<String> = tensors
            .iter()
            .map(|(n, t)| format!("{n} {}", describe(t)))
            .collect();
        pending.push((prepare_output(target, &tensors)?, target_name(target), what));
    }
    // Every file is complete: put them all in place.
    for (p, name, what) in pending {
        p.commit()?;
        writeln!(log, "wrote {name}: {}", what.join(", "))?;
    }
    bar.finish();
    Ok(())
}
