//! Segment reductions along any axis: the CPU library's `segment_reduce` and
//! `segment_arg_reduce`, with the segments (CSR offsets, sorted ids or lengths) on the GPU.
//!
//! ```text
//! segment_reduce(src, axis=1, segments, Sum)          src [2, 6] → out [2, S=3]
//!
//!   position along axis   0   1   2   3   4   5
//!   offsets  [0, 2, 2, 6]   ├─s0──┤├──────s2──────┤     (s1 = 2..2 is empty)
//!   ids      [0, 0, 2, 2, 2, 2]                         (the same segments, COO)
//!   lengths  [2, 0, 4]                                  (the same segments, torch.segment_reduce)
//!
//!   src row 0:  1   2   3   4   5   6     →  out row 0:  3   fill   18
//!   src row 1:  1   1   1   1   1   1     →  out row 1:  2   fill    4
//! ```
//!
//! A segment op is a scatter with a sorted 1-D index, spread over the other axes with stride 0,
//! into an output that holds the fill: the deterministic scatter's kernels reduce it, so the
//! results are those of the CPU library (bitwise for integers and amax/amin). Offsets and ids
//! are checked on the GPU (one flag read per call); only a bad value brings them to the host,
//! where the CPU library words the error. Lengths are read to the host (their sum is checked
//! there, as PyTorch does), then run as offsets.

use gather::DType;
use gather::backend;
use gather::ops::reduce::{ArgReduce, EmptyFill, GroupReduce};
use ndarray::Array1;

use crate::Scalar;
use crate::device::{Source, launch};
use crate::error::Result;
use crate::gather::{host_i64, index_operand, index_suffix, intern, read_index};
use crate::reduce::{How, fold_into, how, reduce_code, softmax_into, truths};
use crate::scatter::copy_of;
use crate::tensor::{CudaTensor, invalid};

/// How the positions along the axis split into segments (the CPU library's
/// [`gather::Segments`], with the segments on the GPU). Any integer dtype; 1-D.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let offsets = CudaTensor::from_host(&gpu, &array![0i64, 2, 2, 6])?;
/// let ids = CudaTensor::from_host(&gpu, &array![0i32, 0, 2, 2, 2, 2])?;
/// let lengths = CudaTensor::from_host(&gpu, &array![2i64, 0, 4])?;
/// // Three ways to say the same thing.
/// let (a, b, c) = (Segments::Offsets(&offsets), Segments::ids(&ids), Segments::Lengths(&lengths));
/// # let _ = (a, b, c);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Segments<'a> {
    /// CSR offsets (`indptr`): `S + 1` non-decreasing positions; segment `s` is
    /// `offsets[s]..offsets[s + 1]`; positions outside `offsets[0]..offsets[S]` are ignored.
    Offsets(&'a CudaTensor),
    /// Sorted segment ids (COO), one per position along the axis.
    Ids {
        /// The id of each position; non-decreasing and non-negative.
        ids: &'a CudaTensor,
        /// The number of segments; `None`: the largest id + 1.
        num_segments: Option<usize>,
    },
    /// The length of each segment, in order; they sum to the axis length.
    Lengths(&'a CudaTensor),
}

impl<'a> Segments<'a> {
    /// Sorted ids; the number of segments is the largest id + 1.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0, 1])?;
    /// let s = gather_cuda::Segments::ids(&ids);
    /// # let _ = s;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn ids(ids: &'a CudaTensor) -> Self {
        Segments::Ids {
            ids,
            num_segments: None,
        }
    }

    /// Sorted ids with a given number of segments (JAX's `num_segments`).
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::array![0i64, 0])?;
    /// let s = gather_cuda::Segments::ids_with(&ids, 3);
    /// # let _ = s;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn ids_with(ids: &'a CudaTensor, num_segments: usize) -> Self {
        Segments::Ids {
            ids,
            num_segments: Some(num_segments),
        }
    }

    fn parts(&self) -> (&'static str, &'a CudaTensor) {
        match *self {
            Segments::Offsets(t) => ("offsets", t),
            Segments::Ids { ids, .. } => ("ids", ids),
            Segments::Lengths(t) => ("lengths", t),
        }
    }
}

/// Reduces each segment of `src` along `axis` (pytorch_scatter's `segment_csr`/`segment_coo`,
/// `torch.segment_reduce`), for every lane of an N-D tensor: the output has `src`'s shape with
/// `axis` replaced by the number of segments, and empty segments hold `fill`. On the GPU the
/// reductions are all of the CPU library's: sum, prod, mean, amax, amin, first, last, logsumexp,
/// var and std.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::{EmptyFill, GroupReduce};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]])?;
/// let indptr = CudaTensor::from_host(&gpu, &array![0i64, 2, 5, 6])?;
/// let out = gather_cuda::segment_reduce(&src, -1, Segments::Offsets(&indptr), GroupReduce::Sum, EmptyFill::Identity)?;
/// assert_eq!(out.to_host::<f32>()?, array![[3.0f32, 12.0, 6.0], [15.0, 30.0, 12.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_reduce(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    reduce: GroupReduce,
    fill: EmptyFill<Scalar>,
) -> Result<CudaTensor> {
    let op = "segment_reduce";
    let how = || how(op, reduce);
    let (out, _) = segment_op(op, src, axis, segments, reduce, fill, how)?;
    Ok(out)
}

/// The maximum (or minimum) of each segment and the position along `axis` of the source that
/// holds it: the first one, or the first NaN for a NaN result; `-1` for an empty segment, which
/// holds `fill`. The values are bitwise those of [`segment_reduce()`] with amax/amin.
///
/// ```no_run
/// use gather_cuda::{ArgReduce, Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::EmptyFill;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![[3.0f32, 9.0, 9.0, 1.0, 4.0]])?;
/// let off = CudaTensor::from_host(&gpu, &array![1i64, 3, 3, 5])?;
/// let (out, arg) = gather_cuda::segment_arg_reduce(&src, 1, Segments::Offsets(&off), ArgReduce::Amax, EmptyFill::Zero)?;
/// assert_eq!(out.to_host::<f32>()?, array![[9.0f32, 0.0, 4.0]].into_dyn());
/// assert_eq!(arg.to_host::<i64>()?, array![[1i64, -1, 4]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_arg_reduce(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    reduce: ArgReduce,
    fill: EmptyFill<Scalar>,
) -> Result<(CudaTensor, CudaTensor)> {
    let op = "segment_arg_reduce";
    let group = match reduce {
        ArgReduce::Amax => GroupReduce::Amax,
        _ => GroupReduce::Amin,
    };
    let how = || Ok(How::Arg(reduce_code(reduce)));
    let (out, arg) = segment_op(op, src, axis, segments, group, fill, how)?;
    Ok((out, arg.expect("asked for")))
}

/// Whether any element of each segment is nonzero (NaN counts, -0.0 does not); empty segments
/// hold `fill` (`Identity`: false). A bool tensor.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::EmptyFill;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![0u8, 0, 3])?;
/// let lengths = CudaTensor::from_host(&gpu, &array![2i64, 1, 0])?;
/// let out = gather_cuda::segment_any(&src, 0, Segments::Lengths(&lengths), EmptyFill::Identity)?;
/// assert_eq!(out.to_host::<bool>()?, array![false, true, false].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_any(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    fill: EmptyFill<bool>,
) -> Result<CudaTensor> {
    segment_bool("segment_any", false, src, axis, segments, fill)
}

/// Whether every element of each segment is nonzero; empty segments hold `fill` (`Identity`:
/// true). See [`segment_any()`].
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use gather::ops::reduce::EmptyFill;
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![1.0f32, 2.0, 0.0])?;
/// let off = CudaTensor::from_host(&gpu, &array![0i64, 2, 3])?;
/// let out = gather_cuda::segment_all(&src, 0, Segments::Offsets(&off), EmptyFill::Identity)?;
/// assert_eq!(out.to_host::<bool>()?, array![true, false].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_all(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    fill: EmptyFill<bool>,
) -> Result<CudaTensor> {
    segment_bool("segment_all", true, src, axis, segments, fill)
}

fn segment_bool(
    op: &str,
    all: bool,
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    fill: EmptyFill<bool>,
) -> Result<CudaTensor> {
    let d = backend::segment_axis(op, src.shape(), axis)?;
    let r = resolve(op, segments, d, src.shape()[d])?;
    let fill = backend::group_bool_fill(op, fill, all)?;
    let how = How::Reduce(if all { 4 } else { 3 });
    let (out, _) = segment_fold(op, &truths(src)?, d, &r, fill as u64, how)?;
    Ok(out)
}

/// Softmax of every element of `src` within its segment along `axis`, numerically stable (see
/// [`scatter_softmax()`](crate::scatter_softmax())). The segments must cover the axis; floats
/// only.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![1.0f64, 1.0, 5.0])?;
/// let lengths = CudaTensor::from_host(&gpu, &array![2i64, 1])?;
/// let out = gather_cuda::segment_softmax(&src, 0, Segments::Lengths(&lengths))?;
/// assert_eq!(out.to_host::<f64>()?, array![0.5, 0.5, 1.0].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_softmax(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    segment_softmax_op("segment_softmax", false, src, axis, segments)
}

/// `log` of [`segment_softmax()`], computed as `x - logsumexp(segment)`.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor, Segments};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let src = CudaTensor::from_host(&gpu, &array![0.0f32, 0.0])?;
/// let ids = CudaTensor::from_host(&gpu, &array![0i64, 0])?;
/// let out = gather_cuda::segment_log_softmax(&src, 0, Segments::ids(&ids))?.to_host::<f32>()?;
/// assert!((out[0] + std::f32::consts::LN_2).abs() < 1e-6);
/// # Ok::<(), gather_cuda::Error>(())
/// ```
pub fn segment_log_softmax(
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    segment_softmax_op("segment_log_softmax", true, src, axis, segments)
}

fn segment_softmax_op(
    op: &str,
    log: bool,
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
) -> Result<CudaTensor> {
    backend::softmax_dtype(op, src.dtype())?;
    let d = backend::segment_axis(op, src.shape(), axis)?;
    let n = src.shape()[d];
    let r = resolve(op, segments, d, n)?;
    if let Segments::Offsets(off) = segments {
        // Offsets may leave positions out; a softmax needs every one in a segment.
        let off = index_operand(op, "offsets", off)?;
        let first = read_index(&off, &[0])?;
        let last = read_index(&off, &[off.len() - 1])?;
        if first != 0 || last != n as i64 {
            return Err(
                backend::segments_uncovered(op, first as usize, last as usize, n, d).into(),
            );
        }
    }
    softmax_into(
        op,
        log,
        src,
        d,
        &spread_ids(&r, src, d),
        r.num + r.scratch as usize,
    )
}

/// The segment ids spread over src's shape: stride 0 on every other axis, never copied.
fn spread_ids(r: &Resolved, src: &CudaTensor, d: usize) -> CudaTensor {
    r.ids.spread(src.shape(), d)
}

/// Folds `src` by the resolved segments into a tensor that holds the fill (`bits`) where a
/// segment is empty, the scratch segment cut off (and the winners' positions, for an
/// arg-reduction).
fn segment_fold(
    op: &str,
    src: &CudaTensor,
    d: usize,
    r: &Resolved,
    bits: u64,
    how: How,
) -> Result<(CudaTensor, Option<CudaTensor>)> {
    let mut shape = src.shape().to_vec();
    shape[d] = r.num + r.scratch as usize;
    let (out, arg) = fold_into(op, src, d, &spread_ids(r, src, d), &shape, bits, how)?;
    if !r.scratch {
        return Ok((out, arg));
    }
    let cut = |t: &CudaTensor| copy_of(&t.slice_axis(d, 0, r.num, 1)?);
    Ok((cut(&out)?, arg.as_ref().map(cut).transpose()?))
}

/// The segment op: segments checked, then the fill (and the reduction's dtype), then `how` (or
/// its error), then the scatter of `src` by the segment ids into the filled output (and the
/// winners' positions, for an arg-reduction).
fn segment_op(
    op: &str,
    src: &CudaTensor,
    axis: isize,
    segments: Segments<'_>,
    reduce: GroupReduce,
    fill: EmptyFill<Scalar>,
    how: impl FnOnce() -> Result<How>,
) -> Result<(CudaTensor, Option<CudaTensor>)> {
    let d = backend::segment_axis(op, src.shape(), axis)?;
    let n = src.shape()[d];
    let r = resolve(op, segments, d, n)?;
    let bits = backend::group_fill_bits(op, reduce, fill, src.dtype())?;
    let how = how()?;
    segment_fold(op, src, d, &r, bits, how)
}

/// Checked segments: the segment of every position along the axis (i64 or i32, `[n]`), the
/// number of segments, and whether some positions belong to none (they then hold `num`, a
/// scratch segment).
struct Resolved {
    ids: CudaTensor,
    num: usize,
    scratch: bool,
}

/// The segments read to the host and resolved by the CPU library's rules: the positions
/// `start..end` they cover, the segment of each, and the number of segments (or the CPU's error).
pub(crate) fn on_host(
    op: &str,
    segments: Segments<'_>,
    axis: usize,
    n: usize,
) -> Result<(usize, usize, Vec<i64>, usize)> {
    let (name, t) = segments.parts();
    let v = Array1::from(host_i64(&index_operand(op, name, t)?)?);
    let host = match segments {
        Segments::Offsets(_) => gather::Segments::offsets(&v),
        Segments::Lengths(_) => gather::Segments::lengths(&v),
        Segments::Ids { num_segments, .. } => match num_segments {
            Some(m) => gather::Segments::ids_with(&v, m),
            None => gather::Segments::ids(&v),
        },
    };
    Ok(backend::resolve_segments(op, &host, axis, n)?)
}

fn resolve(op: &str, segments: Segments<'_>, axis: usize, n: usize) -> Result<Resolved> {
    let (name, t) = segments.parts();
    let t = index_operand(op, name, t)?;
    if t.ndim() != 1 {
        return Err(backend::segments_rank(op, name, t.shape()).into());
    }
    let dev = t.device();
    let count = t.len();
    let suffix = index_suffix(t.dtype());
    let host_error = || -> Result<crate::Error> {
        Ok(match on_host(op, segments, axis, n) {
            Err(e) => e,
            Ok(_) => invalid(format!(
                "{op}: the GPU flagged {name} that the CPU library accepts (a bug of gather-cuda)"
            )),
        })
    };
    match segments {
        Segments::Offsets(_) => {
            if count == 0 {
                return Err(host_error()?);
            }
            let name_k = intern(format!("check_offsets_{suffix}"));
            let f = dev.function(Source::Segment, name_k)?;
            let (tp, tl, c64, n64) = (t.ptr(), t.layout()?, count as i64, n as i64);
            let cfg = dev.grid(count, 256);
            let flagged =
                dev.with_flag(|flag| launch!(dev, &f, name_k, cfg, &tp, &tl, &c64, &n64, &flag))?;
            if flagged.is_some() {
                return Err(host_error()?);
            }
            segment_ids(&t, count - 1, n)
        }
        Segments::Ids { num_segments, .. } => {
            if count != n {
                return Err(host_error()?);
            }
            let name_k = intern(format!("check_ids_{suffix}"));
            let f = dev.function(Source::Segment, name_k)?;
            let num = num_segments.map_or(-1, |m| m as i64);
            let (tp, tl, c64) = (t.ptr(), t.layout()?, count as i64);
            let flagged = if count == 0 {
                None
            } else {
                let cfg = dev.grid(count, 256);
                dev.with_flag(|flag| launch!(dev, &f, name_k, cfg, &tp, &tl, &c64, &num, &flag))?
            };
            if flagged.is_some() {
                return Err(host_error()?);
            }
            let num = match num_segments {
                Some(m) => m,
                None if count == 0 => 0,
                // Sorted: the last id is the largest.
                None => read_index(&t, &[count - 1])? as usize + 1,
            };
            Ok(Resolved {
                ids: t,
                num,
                scratch: false,
            })
        }
        Segments::Lengths(_) => {
            // The lengths size nothing on the GPU but their sum must be the axis length: they
            // are checked on the host (as PyTorch does) and run as offsets.
            let host = Array1::from(host_i64(&t)?);
            backend::check_segments(op, &gather::Segments::lengths(&host), axis, n)?;
            let mut off = Vec::with_capacity(count + 1);
            off.push(0i64);
            for &l in &host {
                off.push(off.last().copied().unwrap_or(0) + l);
            }
            let off = CudaTensor::from_host(dev, &Array1::from(off))?;
            let mut r = segment_ids(&off, count, n)?;
            r.scratch = false;
            Ok(r)
        }
    }
}

/// The segment of every position from checked offsets (`s + 1` of them).
fn segment_ids(off: &CudaTensor, s: usize, n: usize) -> Result<Resolved> {
    let dev = off.device();
    let ids = CudaTensor::empty(dev, &[n], DType::I64)?;
    if n > 0 {
        let name = intern(format!("segment_ids_{}", index_suffix(off.dtype())));
        let f = dev.function(Source::Segment, name)?;
        let (op_, ol, s64, n64, ip) = (off.ptr(), off.layout()?, s as i64, n as i64, ids.ptr());
        launch!(dev, &f, name, dev.grid(n, 256), &op_, &ol, &s64, &n64, &ip)?;
    }
    Ok(Resolved {
        ids,
        num: s,
        scratch: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::compiled_entries;

    #[test]
    fn every_segment_kernel_is_compiled() {
        let Some(entries) = compiled_entries(Source::Segment) else {
            return;
        };
        for t in ["i64", "i32"] {
            assert_eq!(entries.get(&format!("check_offsets_{t}")), Some(&5));
            assert_eq!(entries.get(&format!("check_ids_{t}")), Some(&5));
            assert_eq!(entries.get(&format!("segment_ids_{t}")), Some(&5));
        }
    }

    #[test]
    fn every_group_fold_kernel_is_compiled() {
        let Some(entries) = compiled_entries(Source::Groups) else {
            return;
        };
        for w in ["u8", "u16", "u32", "u64"] {
            assert_eq!(entries.get(&format!("first_{w}")), Some(&11), "first_{w}");
        }
        for t in ["f32", "f64", "f16", "bf16"] {
            let name = format!("float_group_{t}");
            assert_eq!(entries.get(&name), Some(&13), "{name}");
            let name = format!("softmax_{t}");
            assert_eq!(entries.get(&name), Some(&11), "{name}");
        }
        for w in ["u8", "u16", "u32", "u64"] {
            assert_eq!(entries.get(&format!("truth_{w}")), Some(&5), "truth_{w}");
        }
    }

    #[test]
    fn every_group_reduction_has_its_fold() {
        let op = "segment_reduce";
        assert_eq!(how(op, GroupReduce::Sum).unwrap(), How::Reduce(0));
        assert_eq!(how(op, GroupReduce::Last).unwrap(), How::Reduce(5));
        assert_eq!(how(op, GroupReduce::First).unwrap(), How::First);
        assert_eq!(how(op, GroupReduce::LogSumExp).unwrap(), How::Float(0, 0));
        let var = how(op, GroupReduce::Var { correction: 1 }).unwrap();
        assert_eq!(var, How::Float(1, 1));
        let std = how(op, GroupReduce::Std { correction: 0 }).unwrap();
        assert_eq!(std, How::Float(2, 0));
    }
}
