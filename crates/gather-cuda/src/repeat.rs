//! `repeat_interleave`: the counts are read to the host (they size the output, as in PyTorch)
//! and checked there by the CPU library's rules; the GPU turns their prefix sums into the source
//! position of every output slice, and `index_select` copies the slices.
//!
//! ```text
//! repeat_interleave(x, repeats=[1, 0, 2], dim=0)
//!   x      = [r0, r1, r2]          (slices along dim 0)
//!   starts = [0, 1, 1]   total 3
//!   pos    = [0, 2, 2]
//!   out    = [r0, r2, r2]
//! ```

use gather::DType;
use gather::backend;

use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::{host_i64, index_operand, index_select};
use crate::tensor::CudaTensor;

const OP: &str = "repeat_interleave";

/// `torch.repeat_interleave(input, repeats, dim, output_size)` with a repeats tensor: slice `i`
/// of `input` along `dim` is repeated `repeats[i]` times. `repeats` is 1-d with one count per
/// slice, or one count (0-d or one element) for all; any integer dtype, no negative count.
/// `dim = None` flattens the input first (a 1-d result). `output_size`, when given, must be
/// the sum of the counts.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[10, 11], [20, 21], [30, 31]])?;
/// let r = CudaTensor::from_host(&gpu, &array![1i64, 0, 2])?;
/// let out = gather_cuda::repeat_interleave(&x, &r, Some(0), None)?;
/// assert_eq!(out.to_host::<i32>()?, array![[10, 11], [30, 31], [30, 31]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn repeat_interleave(
    input: &CudaTensor,
    repeats: &CudaTensor,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<CudaTensor> {
    let values = host_counts(repeats)?;
    let (d, counts, total) = backend::repeat_plan(
        OP,
        input.shape(),
        repeats.shape(),
        &values,
        dim,
        output_size,
    )?;
    expand(input, d, &counts, total)
}

/// `torch.repeat_interleave(input, repeats, dim, output_size)` with one count: every slice of
/// `input` along `dim` is repeated `repeats` times (`dim = None`: the flattened input).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1, 2], [3, 4]])?;
/// let out = gather_cuda::repeat_interleave_scalar(&x, 2, None, None)?;
/// assert_eq!(out.to_host::<i32>()?, array![1, 1, 2, 2, 3, 3, 4, 4].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn repeat_interleave_scalar(
    input: &CudaTensor,
    repeats: usize,
    dim: Option<isize>,
    output_size: Option<usize>,
) -> Result<CudaTensor> {
    let (d, size, total) =
        backend::repeat_plan_scalar(OP, input.shape(), repeats, dim, output_size)?;
    expand(input, d, &vec![repeats; size], total)
}

/// `torch.repeat_interleave(repeats, output_size)`: `[0] * repeats[0] + [1] * repeats[1] + ...`,
/// in the repeats' dtype (as PyTorch; positions past the dtype's range are an error).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let nodes_per_graph = CudaTensor::from_host(&gpu, &array![2i64, 0, 3])?;
/// let batch = gather_cuda::repeat_interleave_repeats(&nodes_per_graph, None)?;
/// assert_eq!(batch.to_host::<i64>()?, array![0, 0, 2, 2, 2].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn repeat_interleave_repeats(
    repeats: &CudaTensor,
    output_size: Option<usize>,
) -> Result<CudaTensor> {
    let values = host_counts(repeats)?;
    let (counts, total) = backend::repeat_plan_repeats(repeats.shape(), &values, output_size)?;
    let last = counts.len().saturating_sub(1);
    // The narrow dtypes (rare as repeats) are spread on the host, whose counts these are.
    macro_rules! narrow {
        ($($v:ident => $t:ty),*) => {
            match repeats.dtype() {
                DType::I64 => positions(repeats.device(), &counts, total, DType::I64),
                DType::I32 if i32::try_from(last).is_ok() => {
                    positions(repeats.device(), &counts, total, DType::I32)
                }
                $(DType::$v if <$t>::try_from(last).is_ok() => {
                    let spread: Vec<$t> = counts
                        .iter()
                        .enumerate()
                        .flat_map(|(p, &c)| std::iter::repeat_n(p as $t, c))
                        .collect();
                    CudaTensor::from_host(repeats.device(), &ndarray::Array1::from(spread))
                })*
                other => Err(crate::tensor::invalid(format!(
                    "{OP}: the positions (up to {last}) do not fit in {other} (pass the repeats as int64)"
                ))),
            }
        };
    }
    narrow!(I8 => i8, I16 => i16, U8 => u8, U16 => u16, U32 => u32, U64 => u64)
}

/// The counts, read to the host as i64 (an integer dtype is required).
pub(crate) fn host_counts(repeats: &CudaTensor) -> Result<Vec<i64>> {
    host_i64(&index_operand(OP, "repeats", repeats)?)
}

/// Slice `pos[j]` of `input` along `d` becomes output slice `j` (`d = None`: element `pos[j]`
/// of the row-major flattening).
fn expand(
    input: &CudaTensor,
    d: Option<usize>,
    counts: &[usize],
    total: usize,
) -> Result<CudaTensor> {
    let (x, d) = match d {
        Some(d) => (input.clone(), d),
        None => (input.reshape(&[input.len()])?, 0),
    };
    let pos = positions(input.device(), counts, total, DType::I64)?;
    index_select(&x, d as isize, &pos)
}

/// The `total` positions `[0] * counts[0] + [1] * counts[1] + ...` on the GPU, as `dtype`
/// (i64 or i32).
pub(crate) fn positions(
    dev: &crate::Cuda,
    counts: &[usize],
    total: usize,
    dtype: DType,
) -> Result<CudaTensor> {
    let out = CudaTensor::empty(dev, &[total], dtype)?;
    if total == 0 {
        return Ok(out);
    }
    let mut starts = Vec::with_capacity(counts.len());
    let mut at = 0i64;
    for &c in counts {
        starts.push(at);
        at += c as i64;
    }
    let starts = CudaTensor::from_host(dev, &ndarray::Array1::from(starts))?;
    let name = if dtype == DType::I32 {
        "repeat_positions_i32"
    } else {
        "repeat_positions_i64"
    };
    let f = dev.function(Source::Repeat, name)?;
    let (op_, sp) = (out.ptr(), starts.ptr());
    let (n, t) = (counts.len() as i64, total as i64);
    launch!(dev, &f, name, dev.grid(total, 256), &op_, &sp, &n, &t)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_kernel_repeat_interleave_launches_is_compiled() {
        let Some(entries) = compiled_entries(Source::Repeat) else {
            return;
        };
        for name in ["repeat_positions_i64", "repeat_positions_i32"] {
            assert_eq!(entries.get(name), Some(&4), "{name}");
        }
    }
}
