//! `sort`, `argsort` and `topk`: every lane along `dim` ordered as the CPU library orders it
//! (NaN largest, `-0.0 == 0.0`, always the stable order, best first), by a stable LSD radix
//! sort of order keys on the GPU.
//!
//! ```text
//! sort(x, dim=1)                 keys (f32 bits made unsigned; NaN the largest)
//!   x = [[3 NaN 1 3]             pass 1..k: by the key's words, lowest first (stable)
//!        [0  5 -0 2]]            last pass: by lane (stable), so each lane stays in key order
//!   values  = [[1 3 3 NaN] [0 -0 2 5]]     indices = [[2 0 3 1] [0 2 3 1]]
//! ```

use gather::{DType, backend};

use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::{as_1d, width_name};
use crate::sort::{self, Scratch};
use crate::tensor::CudaTensor;

/// `torch.sort(input, dim, descending, stable)`: every lane along `dim` sorted, with the
/// position each value came from (i64). Ascending puts NaNs last, descending first; `-0.0` and
/// `0.0` are equal; equal values keep their index order (`stable` changes nothing). A 0-d input
/// gives `(input, 0)`.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1, 5, 3], [9, 9, 0]])?;
/// let (v, i) = gather_cuda::sort(&x, -1, true, false)?;
/// assert_eq!(v.to_host::<i32>()?, array![[5, 3, 1], [9, 9, 0]].into_dyn());
/// assert_eq!(i.to_host::<i64>()?, array![[1, 2, 0], [0, 1, 2]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn sort(
    input: &CudaTensor,
    dim: isize,
    descending: bool,
    stable: bool,
) -> Result<(CudaTensor, CudaTensor)> {
    let _ = stable;
    let d = gather::dims::normalize_dim("sort", dim, input.ndim())?;
    let len = lane_len(input, d);
    let (v, i) = order(input, d, len, descending, true)?;
    Ok((v.expect("values were asked for"), i))
}

/// `torch.argsort(input, dim, descending, stable)`: the indices of [`sort()`] alone.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let noise = CudaTensor::from_host(&gpu, &array![[0.7f32, 0.1, 0.4, 0.9]])?;
/// let ids = gather_cuda::argsort(&noise, 1, false, false)?;
/// assert_eq!(ids.to_host::<i64>()?, array![[1, 2, 0, 3]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn argsort(
    input: &CudaTensor,
    dim: isize,
    descending: bool,
    stable: bool,
) -> Result<CudaTensor> {
    let _ = stable;
    let d = gather::dims::normalize_dim("argsort", dim, input.ndim())?;
    let len = lane_len(input, d);
    Ok(order(input, d, len, descending, false)?.1)
}

/// `torch.topk(input, k, dim, largest, sorted)`: the `k` largest (or smallest) elements of every
/// lane along `dim` and their positions, best first (also for `sorted = false`); among tied
/// candidates the lowest indices win, and NaN counts as the largest. `k` must be in
/// `0..=input.shape[dim]`; bool is refused; a 0-d input takes `k` 0 or 1 and gives 0-d
/// `(input, 0)` for both, as the CPU library and PyTorch do.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let scores = CudaTensor::from_host(&gpu, &array![[0.1f32, 0.9, 0.3, 0.7], [0.8, 0.2, 0.6, 0.4]])?;
/// let (v, i) = gather_cuda::topk(&scores, 2, 1, true, true)?;
/// assert_eq!(v.to_host::<f32>()?, array![[0.9f32, 0.7], [0.8, 0.6]].into_dyn());
/// assert_eq!(i.to_host::<i64>()?, array![[1, 3], [0, 2]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn topk(
    input: &CudaTensor,
    k: usize,
    dim: isize,
    largest: bool,
    sorted: bool,
) -> Result<(CudaTensor, CudaTensor)> {
    let _ = sorted;
    let k64 = i64::try_from(k).unwrap_or(i64::MAX);
    let d = backend::check_topk(input.shape(), k64, dim, input.dtype())?;
    let (v, i) = order(input, d, k, largest, true)?;
    Ok((v.expect("values were asked for"), i))
}

/// The lane length along `d` (one element for a 0-d input).
fn lane_len(input: &CudaTensor, d: usize) -> usize {
    if input.ndim() == 0 {
        1
    } else {
        input.shape()[d]
    }
}

/// The first `k` of every lane along `d` in order (`flip`: descending): the values (when
/// `values`) and the positions in the lane. A 0-d input gives 0-d results of its one element.
fn order(
    input: &CudaTensor,
    d: usize,
    k: usize,
    flip: bool,
    values: bool,
) -> Result<(Option<CudaTensor>, CudaTensor)> {
    let scalar = input.ndim() == 0;
    let k = if scalar { 1 } else { k };
    let x = as_1d(input);
    let dev = x.device();
    let len = x.shape()[d];
    let mut out_shape = x.shape().to_vec();
    out_shape[d] = k;
    let mut vals = if values {
        Some(CudaTensor::empty(dev, &out_shape, x.dtype())?)
    } else {
        None
    };
    let mut idx = CudaTensor::empty(dev, &out_shape, DType::I64)?;
    let n = x.len();
    if n > 0 && k > 0 {
        // The sorted dim last: position p = lane * len + j.
        let mut axes: Vec<usize> = (0..x.ndim()).filter(|&a| a != d).collect();
        axes.push(d);
        let xp = x.permuted_axes(&axes)?;
        let ip = idx.permuted_axes(&axes)?;
        let vp = match &vals {
            Some(v) => Some(v.permuted_axes(&axes)?),
            None => None,
        };
        let (_scratch, perm) = sorted_positions(&xp, n, len, flip)?;
        let name = width_name("sort_take", x.dtype());
        let f = dev.function(Source::Sort, name)?;
        let il = ip.layout()?;
        let (vptr, vl) = match &vp {
            Some(v) => (v.ptr(), v.layout()?),
            None => (0u64, il),
        };
        let (iptr, xptr, xl) = (ip.ptr(), xp.ptr(), xp.layout()?);
        let (n64, len64, k64) = (n as i64, len as i64, k as i64);
        launch!(
            dev,
            &f,
            name,
            dev.grid(n, 256),
            &vptr,
            &vl,
            &iptr,
            &il,
            &xptr,
            &xl,
            &perm,
            &n64,
            &len64,
            &k64
        )?;
    }
    if scalar {
        for t in vals.iter_mut().chain(std::iter::once(&mut idx)) {
            t.shape.clear();
            t.strides.clear();
        }
    }
    Ok((vals, idx))
}

/// Sorts the `n` positions of `xp` (its last axis the lanes, of `len`) by (lane, key), stably:
/// the scratch holding the result and the address of the `n` sorted positions (u32).
fn sorted_positions(xp: &CudaTensor, n: usize, len: usize, flip: bool) -> Result<(Scratch, u64)> {
    if n >= u32::MAX as usize {
        return Err(crate::tensor::invalid(format!(
            "sort on the GPU numbers the positions in 32 bits; this input has {n} elements"
        )));
    }
    let dev = xp.device();
    let (keys_name, key_bits) = keys_name(xp.dtype())?;
    let words = key_bits.div_ceil(32) as usize;
    let lanes = n / len;
    let lane_bits = usize::BITS - (lanes - 1).leading_zeros();
    let passes = words + usize::from(lane_bits > 0);
    let mut s = Scratch::new(dev, 2 * sort::u32_bytes(n) + passes * sort::sort_bytes(n))?;
    let keys = s.u32s(n);
    let mut perm = s.u32s(n);
    let n64 = n as i64;
    let f = dev.function(Source::Sort, "sort_iota")?;
    launch!(dev, &f, "sort_iota", dev.grid(n, 256), &perm, &n64)?;
    let f = dev.function(Source::Sort, keys_name)?;
    let (xptr, xl, flip) = (xp.ptr(), xp.layout()?, i32::from(flip));
    for word in 0..words as i32 {
        launch!(
            dev,
            &f,
            keys_name,
            dev.grid(n, 256),
            &keys,
            &xptr,
            &xl,
            &perm,
            &n64,
            &word,
            &flip
        )?;
        let bits = key_bits.min(32);
        perm = sort::sort_pairs(dev, &mut s, keys, perm, n, bits)?.1;
    }
    if lane_bits > 0 {
        let f = dev.function(Source::Sort, "sort_lanes")?;
        let len64 = len as i64;
        launch!(
            dev,
            &f,
            "sort_lanes",
            dev.grid(n, 256),
            &keys,
            &perm,
            &n64,
            &len64
        )?;
        perm = sort::sort_pairs(dev, &mut s, keys, perm, n, lane_bits)?.1;
    }
    Ok((s, perm))
}

/// The key kernel of a dtype and the bits of its keys.
fn keys_name(dtype: DType) -> Result<(&'static str, u32)> {
    Ok(match dtype {
        DType::Bool | DType::U8 => ("sort_keys_u8", 8),
        DType::I8 => ("sort_keys_i8", 8),
        DType::I16 => ("sort_keys_i16", 16),
        DType::U16 => ("sort_keys_u16", 16),
        DType::F16 => ("sort_keys_f16", 16),
        DType::BF16 => ("sort_keys_bf16", 16),
        DType::I32 => ("sort_keys_i32", 32),
        DType::U32 => ("sort_keys_u32", 32),
        DType::F32 => ("sort_keys_f32", 32),
        DType::I64 => ("sort_keys_i64", 64),
        DType::U64 => ("sort_keys_u64", 64),
        DType::F64 => ("sort_keys_f64", 64),
        other => {
            return Err(crate::tensor::invalid(format!(
                "sort: no CUDA kernel for {other}"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_kernel_the_sorts_launch_is_compiled() {
        let Some(entries) = compiled_entries(Source::Sort) else {
            return;
        };
        assert_eq!(entries.get("sort_iota"), Some(&2));
        assert_eq!(entries.get("sort_lanes"), Some(&4));
        for d in [
            DType::Bool,
            DType::U8,
            DType::I8,
            DType::I16,
            DType::U16,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::F32,
            DType::I64,
            DType::U64,
            DType::F64,
        ] {
            let (name, _) = keys_name(d).unwrap();
            assert_eq!(entries.get(name), Some(&7), "{name}");
            assert_eq!(entries.get(width_name("sort_take", d)), Some(&10), "{d}");
        }
    }
}
