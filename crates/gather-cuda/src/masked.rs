//! `masked_select` and `masked_scatter`: the true positions of the mask are numbered by a scan
//! of their flags, then one kernel moves the elements (as words of their byte width).
//!
//! ```text
//! masked_select(x, mask)                 masked_scatter(x, mask, source)
//!   x    = [a b c d]                       x      = [a b c d]
//!   mask = [0 1 1 0]   flags scanned:      mask   = [0 1 1 0]
//!   pos  = [0 0 1 2 | 2]                   source = [s t u]
//!   out  = [b c]       (2 true)            out    = [a s t d]
//! ```

use gather::DType;
use gather::backend;

use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::width_name;
use crate::scatter::same_dtype;
use crate::sort::{self, Scratch};
use crate::tensor::CudaTensor;

/// `torch.masked_select(input, mask)`: the elements of `input` where the bool `mask` is true, as
/// a 1-d tensor in the row-major order of the shape that input and mask broadcast to.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1, 2, 3], [4, 5, 6]])?;
/// let m = CudaTensor::from_host(&gpu, &array![true, false, true])?;
/// let out = gather_cuda::masked_select(&x, &m)?;
/// assert_eq!(out.to_host::<i32>()?, array![1, 3, 4, 6].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn masked_select(input: &CudaTensor, mask: &CudaTensor) -> Result<CudaTensor> {
    let op = "masked_select";
    bool_mask(op, mask)?;
    let shape = backend::check_masked(op, input.shape(), mask.shape())?;
    let n: usize = shape.iter().product();
    let dev = input.device();
    if n == 0 {
        return CudaTensor::empty(dev, &[0], input.dtype());
    }
    let xb = input.broadcast(&shape)?;
    let (_scratch, pos, count) = positions(&mask.broadcast(&shape)?, n)?;
    let out = CudaTensor::empty(dev, &[count as usize], input.dtype())?;
    if count > 0 {
        let name = width_name("masked_select", input.dtype());
        let f = dev.function(Source::Masked, name)?;
        let (op_, xp, xl, n64) = (out.ptr(), xb.ptr(), xb.layout()?, n as i64);
        launch!(dev, &f, name, dev.grid(n, 256), &op_, &xp, &xl, &pos, &n64)?;
    }
    Ok(out)
}

/// `torch.masked_scatter(input, mask, source)`: input and the bool mask broadcast against each
/// other; the result has that shape, with `source`'s elements (in its row-major order) written
/// to the true positions of the mask, in row-major order. `source` needs at least as many
/// elements as there are true positions; extra ones are ignored.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![1, 2, 3])?;
/// let m = CudaTensor::from_host(&gpu, &array![[true, false, false], [false, true, true]])?;
/// let s = CudaTensor::from_host(&gpu, &array![7, 8, 9])?;
/// let out = gather_cuda::masked_scatter(&x, &m, &s)?;
/// assert_eq!(out.to_host::<i32>()?, array![[7, 2, 3], [1, 8, 9]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn masked_scatter(
    input: &CudaTensor,
    mask: &CudaTensor,
    source: &CudaTensor,
) -> Result<CudaTensor> {
    scatter_at_mask(input, mask, source, &|_| Ok(()))
}

/// [`masked_scatter`], with `check` given the number of true positions before anything is
/// written (masked_select's gradient checks its grad_output there: one element per position).
pub(crate) fn scatter_at_mask(
    input: &CudaTensor,
    mask: &CudaTensor,
    source: &CudaTensor,
    check: &dyn Fn(usize) -> Result<()>,
) -> Result<CudaTensor> {
    let op = "masked_scatter";
    same_dtype(op, "source", input, source)?;
    bool_mask(op, mask)?;
    let shape = backend::check_masked(op, input.shape(), mask.shape())?;
    let n: usize = shape.iter().product();
    let dev = input.device();
    let out = CudaTensor::empty(dev, &shape, input.dtype())?;
    if n == 0 {
        check(0)?;
        return Ok(out);
    }
    let (_scratch, pos, count) = positions(&mask.broadcast(&shape)?, n)?;
    check(count as usize)?;
    crate::gather::copy_into(&input.broadcast(&shape)?, &out)?;
    if count as usize > source.len() {
        return Err(backend::masked_source_short(source.shape(), count as usize, &shape).into());
    }
    if count > 0 {
        let name = width_name("masked_scatter", input.dtype());
        let f = dev.function(Source::Masked, name)?;
        let (op_, sp, sl, n64) = (out.ptr(), source.ptr(), source.layout()?, n as i64);
        launch!(dev, &f, name, dev.grid(n, 256), &op_, &sp, &sl, &pos, &n64)?;
    }
    Ok(out)
}

/// An error unless the mask is bool.
pub(crate) fn bool_mask(op: &str, mask: &CudaTensor) -> Result<()> {
    match mask.dtype() {
        DType::Bool => Ok(()),
        other => Err(backend::mask_dtype(op, other).into()),
    }
}

/// The exclusive scan of the flags of the `n` positions of `mask` (a view of the full shape):
/// the scratch that holds it, the address of its `n + 1` u32 (`pos[n]` is the count) and the
/// number of true positions.
fn positions(mask: &CudaTensor, n: usize) -> Result<(Scratch, u64, u32)> {
    if n >= u32::MAX as usize {
        return Err(crate::tensor::invalid(format!(
            "masked ops on the GPU number the positions in 32 bits; this mask has {n}"
        )));
    }
    let dev = mask.device();
    let mut scratch = Scratch::new(dev, sort::u32_bytes(n + 1) + sort::scan_bytes(n + 1))?;
    let flags = scratch.u32s(n + 1);
    let f = dev.function(Source::Masked, "mask_flags")?;
    let (mp, ml, n64) = (mask.ptr(), mask.layout()?, n as i64);
    launch!(
        dev,
        &f,
        "mask_flags",
        dev.grid(n + 1, 256),
        &mp,
        &ml,
        &n64,
        &flags
    )?;
    sort::exclusive_scan(dev, &mut scratch, flags, n + 1)?;
    let count = dev.read_u32(flags + 4 * n as u64)?;
    Ok((scratch, flags, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_kernel_the_masked_ops_launch_is_compiled() {
        let Some(entries) = compiled_entries(Source::Masked) else {
            return;
        };
        assert_eq!(entries.get("mask_flags"), Some(&4));
        for d in [DType::Bool, DType::I16, DType::F32, DType::F64] {
            for family in ["masked_select", "masked_scatter"] {
                let name = width_name(family, d);
                assert_eq!(entries.get(name), Some(&5), "{name}");
            }
        }
    }
}
