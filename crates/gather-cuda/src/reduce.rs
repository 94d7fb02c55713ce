//! The arg-reductions: `scatter_reduce` amax/amin that also return the winning source's
//! position, with the CPU library's rules (first winner on ties, the first NaN for a NaN
//! result, `-1` where self kept its value or nothing arrived).
//!
//! ```text
//! scatter_reduce_arg(self=[10, 20, 30, 40], dim=0, index=[0, 0, 1, 1, 1],
//!                    src=[1, 2, 25, 50, 50], Amax, include_self=true)
//!   values = [10, 50, 30, 40]      self won [0]; the first 50 (position 3) won [1]
//!   arg    = [-1,  3, -1, -1]
//! ```

use gather::DType;
use gather::backend::{self, Bounds};
use gather::ops::reduce::ArgReduce;

use crate::error::Result;
use crate::gather::{as_1d, index_operand, read_index, unravel};
use crate::scatter::{Fold, copy_of, reshape_like, run, same_dtype};
use crate::tensor::CudaTensor;

/// `scatter_reduce(input, dim, index, src, "amax"|"amin", include_self)` and, for each element
/// of the output, the position along `dim` of the source that won (`-1` where none did). The
/// values are bitwise those of [`scatter_reduce()`](crate::scatter_reduce()).
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use gather::ops::reduce::ArgReduce;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// // Node features [V=3] ← edge messages, include_self = false (pytorch_scatter's scatter_max).
/// let x = CudaTensor::from_host(&gpu, &array![0i32, 0, 0])?;
/// let i = CudaTensor::from_host(&gpu, &array![2i64, 0, 2, 2])?;
/// let s = CudaTensor::from_host(&gpu, &array![4i32, 7, 9, 9])?;
/// let (out, arg) = gather_cuda::scatter_reduce_arg(&x, 0, &i, &s, ArgReduce::Amax, false)?;
/// assert_eq!(out.to_host::<i32>()?, array![7, 0, 9].into_dyn());
/// assert_eq!(arg.to_host::<i64>()?, array![1, -1, 2].into_dyn()); // the first 9
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn scatter_reduce_arg(
    input: &CudaTensor,
    dim: isize,
    index: &CudaTensor,
    src: &CudaTensor,
    reduce: ArgReduce,
    include_self: bool,
) -> Result<(CudaTensor, CudaTensor)> {
    let op = "scatter_reduce";
    gather::dims::normalize_dim(op, dim, input.ndim())?;
    let index = index_operand(op, "index", index)?;
    same_dtype(op, "src", input, src)?;
    let arg = no_args(input)?;
    let Some(d) = backend::check_scatter(op, input.shape(), dim, index.shape(), Some(src.shape()))?
    else {
        return Ok((copy_of(input)?, arg));
    };
    let (x, idx, s) = (as_1d(input), as_1d(&index), as_1d(src));
    let size = x.shape()[d];
    let out = run(
        op,
        &x,
        d,
        &idx,
        Some(&s),
        0,
        reduce_code(reduce),
        include_self,
        None,
        Bounds::Strict,
        &|pos| {
            let coord = unravel(pos, idx.shape());
            let v = read_index(&idx, &coord)?;
            let coord = if index.ndim() == 0 { Vec::new() } else { coord };
            Ok(backend::out_of_bounds(op, v, coord, d, size, Bounds::Strict).into())
        },
        Fold::Arg(&arg),
    )?;
    Ok((reshape_like(out, input), arg))
}

/// The kernels' reduction code of an arg-reduction (`R_AMAX`, `R_AMIN`).
pub(crate) fn reduce_code(r: ArgReduce) -> i32 {
    match r {
        ArgReduce::Amax => 3,
        _ => 4,
    }
}

/// A row-major i64 tensor of `like`'s shape, all `-1` (no winner).
pub(crate) fn no_args(like: &CudaTensor) -> Result<CudaTensor> {
    let arg = CudaTensor::empty(like.device(), like.shape(), DType::I64)?;
    like.device().memset(arg.ptr(), 0xff, 8 * arg.len())?;
    Ok(arg)
}

#[cfg(test)]
mod tests {
    use crate::device::{Source, compiled_entries};

    #[test]
    fn every_arg_kernel_is_compiled() {
        let Some(entries) = compiled_entries(Source::Arg) else {
            return;
        };
        for t in [
            "f32", "f64", "f16", "bf16", "bool", "u8", "i8", "i16", "u16", "i32", "u32", "i64",
            "u64",
        ] {
            assert_eq!(entries.get(&format!("arg_{t}")), Some(&16), "arg_{t}");
        }
    }
}
