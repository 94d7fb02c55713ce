//! The `gather` command's library: `explain`, `check`, `infer` and `run` of the ops, the
//! conformance runner with its comparison rules, tensor files (`.npy`, `.safetensors`, inline
//! literals), the demo, and the benchmark workloads with their runner (`bench`). `main.rs` only
//! parses the command line and calls into here, so the tests call the same code directly.

#![warn(missing_docs)]

pub mod bench;
pub mod case;
pub mod check;
pub mod compare;
pub mod conformance;
pub mod cuda;
pub mod demo;
pub mod explain;
pub mod fail;
pub mod infer;
pub mod npy;
pub mod opargs;
pub mod progress;
pub mod run;
pub mod svg;
pub mod tensor_io;
pub mod workloads;
