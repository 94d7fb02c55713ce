//! The `gather` command's library: the conformance runner, its comparison rules, `.npy` reading
//! and the demo. `main.rs` only parses the command line and calls into here, so the tests call the
//! same code directly.

#![warn(missing_docs)]

pub mod case;
pub mod compare;
pub mod conformance;
pub mod demo;
pub mod npy;
