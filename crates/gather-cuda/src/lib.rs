//! The gather/scatter family of the [`gather`] crate on NVIDIA GPUs, with the same names,
//! semantics and errors, and deterministic scatter reductions.
//!
//! - [`Cuda`] is a GPU; [`CudaTensor`] an array on it (any dtype of the CPU library, any
//!   strides, views that share the buffer).
//! - The ops take PyTorch's names and arguments: [`gather()`], [`index_select()`], [`take()`],
//!   [`take_along_dim()`], [`put()`], [`scatter()`], [`scatter_add()`], [`scatter_reduce()`],
//!   [`index_add()`], [`index_copy()`], [`index_fill()`], [`index_reduce()`],
//!   [`masked_select()`], [`masked_scatter()`], [`repeat_interleave()`] (and its
//!   [`repeat_interleave_scalar()`] and [`repeat_interleave_repeats()`] forms, as in the CPU
//!   library), [`sort()`], [`argsort()`], [`topk()`], [`select_batched()`].
//! - The group reductions: [`scatter_groups()`] (every reduction of the CPU library's
//!   `GroupReduce`), [`scatter_reduce_arg()`], [`scatter_softmax()`],
//!   [`scatter_log_softmax()`], [`scatter_any()`], [`scatter_all()`], and the segment forms over
//!   CSR offsets, sorted ids or lengths on the GPU: [`segment_reduce()`],
//!   [`segment_arg_reduce()`], [`segment_softmax()`], [`segment_log_softmax()`],
//!   [`segment_any()`], [`segment_all()`].
//! - [`ScatterPlan`]: a row index checked and sorted once, then applied to many `scatter_add` /
//!   `scatter_reduce` calls (a graph network's edges in every layer and step), as in the CPU
//!   library.
//! - [`Options`] is the CPU library's options value: a bounds policy per call on every indexing
//!   op ([`OutOfBounds`]: Error, Wrap, Clip, Fill, Drop) and broadcasting gather and scatters.
//! - A bad index value is reported with its value and coordinate, worded as the CPU library
//!   words it; no kernel touches memory out of bounds. The check is one flag on the GPU, read
//!   once per call.
//! - The scatter reductions sort the index (a counting sort when the targets are few, else a
//!   stable radix sort) and reduce each output's contributions in index order: every run gives
//!   bitwise the same result.
//! - The crate builds without CUDA. The driver and NVRTC are loaded at run time; without them
//!   [`Cuda::new`] is an error. Kernels are CUDA C compiled by NVRTC on first use, once per
//!   process and GPU, and kept on disk for the next process (`$XDG_CACHE_HOME/gather-cuda` or
//!   `~/.cache/gather-cuda`; `GATHER_CUDA_CACHE=<folder>` moves it, `GATHER_CUDA_CACHE=off`
//!   keeps nothing), keyed by the source text, the GPU's architecture and NVRTC's version.
//!   `emu/` in the repository is a CPU emulator of the driver on which the GPU tests run
//!   without a GPU.
//! - Environment variables, for checking and measuring: `GATHER_CUDA_SYNC=1` waits after every
//!   launch (a failing kernel is named); `GATHER_CUDA_PROFILE=1` books the time per kernel;
//!   `GATHER_CUDA_EXACT_ALLOC=1` allocates exactly the bytes asked for (for memory checkers);
//!   `GATHER_CUDA_SCATTER_SORT=radix` keeps the scatters on the radix sort;
//!   `GATHER_CUDA_APPLY=narrow` folds f32 rows a column at a time (not pairs of columns), and
//!   `=ahead` reads each run's bounds and row numbers during the run before (an experiment);
//!   `GATHER_CUDA_FLAG=copy` copies the bad-index flag back after every call, instead of only
//!   after a call whose kernels marked the mapped host word; `GATHER_CUDA_OFFSETS=64` keeps
//!   gathers and takes on their 64-bit kernels where the 32-bit ones would do;
//!   `GATHER_CUDA_TILE=off` never stages tiles of x in shared memory for a gather (`=on`
//!   wherever they fit, not only where they are expected to pay), and `GATHER_CUDA_TILE_KB`
//!   sets a tile's shared memory (64 KB).
//!
//! ```no_run
//! use gather_cuda::{Cuda, CudaTensor};
//! use ndarray::array;
//! let gpu = Cuda::new(0)?;
//! let dst = CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 2)))?;
//! let src = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
//! let rows = CudaTensor::from_host(&gpu, &array![[1i64], [0], [1]])?.broadcast(&[3, 2])?;
//! let out = gather_cuda::scatter_add(&dst, 0, &rows, &src)?;
//! assert_eq!(out.to_host::<f32>()?, array![[3.0f32, 4.0], [6.0, 8.0]].into_dyn());
//! # Ok::<(), gather_cuda::Error>(())
//! ```

#![warn(missing_docs)]

mod device;
#[cfg(feature = "dynamic")]
pub mod dynamic;
mod error;
mod gather;
pub mod grad;
mod masked;
mod memory;
mod options;
mod plan;
mod ptx_cache;
mod reduce;
mod repeat;
mod scatter;
mod segment;
mod sort;
mod sorting;
mod tensor;

pub use crate::device::{Cuda, compile_all};
pub use crate::error::{Error, Result};
pub use crate::gather::{gather, index_select, select_batched, take, take_along_dim};
pub use crate::masked::{masked_scatter, masked_select};
pub use crate::options::Options;
pub use crate::plan::ScatterPlan;
pub use crate::reduce::{
    scatter_all, scatter_any, scatter_groups, scatter_log_softmax, scatter_reduce_arg,
    scatter_softmax,
};
pub use crate::repeat::{repeat_interleave, repeat_interleave_repeats, repeat_interleave_scalar};
pub use crate::scatter::{
    Src, index_add, index_copy, index_fill, index_reduce, put, scatter, scatter_add, scatter_reduce,
};
pub use crate::segment::{
    Segments, segment_all, segment_any, segment_arg_reduce, segment_log_softmax, segment_reduce,
    segment_softmax,
};
pub use crate::sorting::{argsort, sort, topk};
pub use crate::tensor::CudaTensor;
pub use ::gather::ops::reduce::ArgReduce;
pub use ::gather::{OutOfBounds, Reduce, Scalar};
