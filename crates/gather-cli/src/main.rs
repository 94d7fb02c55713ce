//! The `gather` command: see `gather --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gather_cli::conformance::{Options, run_suite};

/// PyTorch's gather/scatter family for Rust: demo, conformance runner.
#[derive(Parser)]
#[command(name = "gather", version, about, long_about = None, after_help = "\
Examples:
  gather demo
  gather conformance ../shared/conformance/cases
  gather conformance --help")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// Also list the cases that pass, and print the notes of failing cases.
        #[arg(long, short)]
        verbose: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo => match gather_cli::demo::run(&mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Conformance {
            dir,
            filter,
            verbose,
        } => {
            let options = Options { filter, verbose };
            match run_suite(&dir, &options) {
                Ok(report) => {
                    let mut out = std::io::stdout().lock();
                    if let Err(e) = report.print(&mut out, verbose) {
                        eprintln!("error: cannot write the report: {e}");
                        return ExitCode::from(2);
                    }
                    if report.failed() > 0 {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
