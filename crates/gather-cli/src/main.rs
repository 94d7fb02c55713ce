//! The `gather` command: see `gather --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gather_cli::conformance::{run_suite, Options};

/// PyTorch's gather/scatter family for Rust: demo, conformance runner.
#[derive(Parser)]
#[command(name = "gather", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
