//! The device array: a buffer on one GPU with a shape, element strides and a dtype. Views
//! (permuted axes, broadcasts, slices) share the buffer and copy nothing.

use std::sync::Arc;

use cudarc::driver::DeviceRepr;
use gather::{DType, Element};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::device::Cuda;
use crate::error::{Error, Result};
use crate::memory::Buffer;

/// The most axes a kernel walks; views with more are refused (after merging axes that are
/// contiguous with each other).
pub(crate) const MAX_DIMS: usize = 8;

/// A tensor on a GPU: any dtype of the CPU library, any shape, any element strides (negative
/// ones and 0 included), on a buffer that views share.
///
/// ```no_run
/// use gather_cuda::{Cuda, CudaTensor};
/// use ndarray::array;
/// let gpu = Cuda::new(0)?;
/// let x = CudaTensor::from_host(&gpu, &array![[1.0f32, 2.0], [3.0, 4.0]])?;
/// let t = x.permuted_axes(&[1, 0])?; // a view: no copy
/// assert_eq!(t.to_host::<f32>()?, array![[1.0f32, 3.0], [2.0, 4.0]].into_dyn());
/// # Ok::<(), gather_cuda::Error>(())
/// ```
#[derive(Clone)]
pub struct CudaTensor {
    pub(crate) buf: Arc<Buffer>,
    /// Offset of the first element, in elements.
    pub(crate) offset: isize,
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<isize>,
    pub(crate) dtype: DType,
    pub(crate) dev: Cuda,
}

impl std::fmt::Debug for CudaTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaTensor({}, shape {:?}, strides {:?}, {:?})",
            self.dtype, self.shape, self.strides, self.dev
        )
    }
}

fn row_major(shape: &[usize]) -> Vec<isize> {
    gather::dims::row_major_strides(shape)
}

impl CudaTensor {
    /// Copies a host array (any layout) to the GPU, row-major.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1i64, 2, 3]))?;
    /// assert_eq!(x.shape(), &[3]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn from_host<T: Element, S: Data<Elem = T>, D: Dimension>(
        dev: &Cuda,
        a: &ArrayBase<S, D>,
    ) -> Result<CudaTensor> {
        let std = a.as_standard_layout();
        let data = std.as_slice().expect("standard layout is contiguous");
        Self::from_bytes(dev, as_bytes(data), a.shape(), T::DTYPE)
    }

    /// A tensor from the row-major bytes of elements of `dtype`.
    pub(crate) fn from_bytes(
        dev: &Cuda,
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
    ) -> Result<CudaTensor> {
        let mut buf = dev.alloc(bytes.len())?;
        if !bytes.is_empty() {
            dev.stream()
                .memcpy_htod(bytes, &mut buf.slice_mut(..bytes.len()))?;
        }
        Ok(Self::over_buffer(dev, buf, shape, dtype))
    }

    /// A tensor over device memory of another library (a DLPack import, a PyTorch or CuPy
    /// tensor): no copy. `ptr` is the address of the element at offset 0, `strides` are in
    /// elements (any, as the shape's views), and `owner` keeps the memory alive: it is dropped
    /// with the last view of the tensor, from any thread.
    ///
    /// # Safety
    ///
    /// The memory must be on this GPU (in its primary context), hold valid elements of `dtype`
    /// (bools 0 or 1) at every position the shape and strides reach from `ptr`, stay allocated
    /// while `owner` lives, and not be written by anyone else while the ops run, except in an
    /// order the caller arranges with the GPU's stream ([`Cuda::stream_handle`]).
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1.0f32, 2.0]))?;
    /// // SAFETY: a view of x's own memory, kept alive by a clone of x.
    /// let v = unsafe {
    ///     gather_cuda::CudaTensor::from_device_ptr(&gpu, x.device_ptr(), &[2], &[1], gather::DType::F32, Box::new(x.clone()))?
    /// };
    /// assert_eq!(v.to_host::<f32>()?, ndarray::arr1(&[1.0f32, 2.0]).into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub unsafe fn from_device_ptr(
        dev: &Cuda,
        ptr: u64,
        shape: &[usize],
        strides: &[isize],
        dtype: DType,
        owner: Box<dyn Send + Sync>,
    ) -> Result<CudaTensor> {
        if shape.len() != strides.len() || shape.len() > MAX_DIMS {
            return Err(invalid(format!(
                "from_device_ptr: shape {shape:?} and strides {strides:?} must have one entry per axis, at most {MAX_DIMS}"
            )));
        }
        let buf = Buffer::borrowed(ptr, owner, dev.inner.cache.clone());
        Ok(CudaTensor {
            buf: Arc::new(buf),
            offset: 0,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            dtype,
            dev: dev.clone(),
        })
    }

    /// Writes the elements of `src` (same shape and dtype, any strides) into this tensor's
    /// memory, in stream order: the in-place form of an op is the op, then this. The tensor must
    /// not repeat an element (a stride-0 axis of more than one element).
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[0i32, 0]))?;
    /// x.assign(&gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[3i32, 4]))?)?;
    /// assert_eq!(x.to_host::<i32>()?, ndarray::arr1(&[3, 4]).into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn assign(&self, src: &CudaTensor) -> Result<()> {
        if src.shape != self.shape || src.dtype != self.dtype {
            return Err(invalid(format!(
                "assign: {} {:?} into {} {:?}: shapes and dtypes must be equal",
                src.dtype, src.shape, self.dtype, self.shape
            )));
        }
        if (0..self.ndim()).any(|a| self.strides[a] == 0 && self.shape[a] > 1) {
            return Err(invalid(format!(
                "assign: the target repeats elements (strides {:?}); write into a tensor that owns each element once",
                self.strides
            )));
        }
        let n = self.len();
        if n == 0 {
            return Ok(());
        }
        let dev = &self.dev;
        let name = crate::gather::width_name("assign", self.dtype);
        let f = dev.function(crate::device::Source::Gather, name)?;
        let (op_, ol, xp, xl, n64) = (
            self.ptr(),
            self.layout()?,
            src.ptr(),
            src.layout()?,
            n as i64,
        );
        crate::device::launch!(dev, &f, name, dev.grid(n, 256), &op_, &ol, &xp, &xl, &n64)
    }

    /// This 1-d tensor seen over `shape`, its one axis at `d` (where `shape` has its length)
    /// and stride 0 on every other axis: an index shared by every other coordinate, never copied.
    pub(crate) fn spread(&self, shape: &[usize], d: usize) -> CudaTensor {
        let mut t = self.clone();
        t.shape = shape.to_vec();
        t.strides = vec![0; shape.len()];
        t.strides[d] = self.strides[0];
        t
    }

    /// The device address of the element at offset 0 (the first element of a view whose
    /// strides are not negative): what a DLPack export hands out.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1u8, 2]))?;
    /// assert_ne!(x.device_ptr(), 0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn device_ptr(&self) -> u64 {
        self.ptr()
    }

    /// A new row-major tensor whose elements the caller will write in full.
    pub(crate) fn empty(dev: &Cuda, shape: &[usize], dtype: DType) -> Result<CudaTensor> {
        let n: usize = shape.iter().product();
        let buf = dev.alloc(n * width(dtype))?;
        Ok(Self::over_buffer(dev, buf, shape, dtype))
    }

    /// The row-major tensor of `shape` over the whole of `buf`.
    fn over_buffer(dev: &Cuda, buf: Buffer, shape: &[usize], dtype: DType) -> CudaTensor {
        CudaTensor {
            buf: Arc::new(buf),
            offset: 0,
            shape: shape.to_vec(),
            strides: row_major(shape),
            dtype,
            dev: dev.clone(),
        }
    }

    /// Copies the tensor to the host as a row-major array; `T` must be its dtype.
    ///
    /// ```no_run
    /// let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1u8, 2]))?;
    /// assert!(x.to_host::<f32>().is_err()); // it holds u8
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn to_host<T: Element>(&self) -> Result<ArrayD<T>> {
        let bytes = self.host_bytes(T::DTYPE)?;
        let n = self.len();
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `bytes` holds exactly `n` elements of T (checked dtype, row-major copy), the
        // vector has room for them, and every bit pattern the GPU wrote is a valid T: the
        // element types are plain numbers, and bool buffers only ever hold 0 or 1 (uploaded
        // from bools or written as 0/1 by the kernels).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len());
            v.set_len(n);
        }
        Ok(ArrayD::from_shape_vec(IxDyn(&self.shape), v).expect("n elements"))
    }

    /// The row-major bytes of the elements, which must be of `dtype` ([`CudaTensor::to_host`]'s
    /// part that is the same for every element type).
    fn host_bytes(&self, dtype: DType) -> Result<Vec<u8>> {
        if dtype != self.dtype {
            return Err(Error::Op(gather::Error::new(
                gather::ErrorKind::InvalidArgument,
                format!("to_host: the tensor holds {}, not {}", self.dtype, dtype),
            )));
        }
        self.to_bytes()
    }

    /// The row-major bytes of the elements.
    pub(crate) fn to_bytes(&self) -> Result<Vec<u8>> {
        let c = self.contiguous()?;
        let n = c.len() * width(c.dtype);
        if n == 0 {
            return Ok(Vec::new());
        }
        self.dev.read_bytes(c.ptr(), n)
    }

    /// The shape.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
    /// assert_eq!(x.shape(), &[2, 3]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element strides (0 for broadcast axes).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
    /// assert_eq!(x.strides(), &[3, 1]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The element type.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1i32]))?;
    /// assert_eq!(x.dtype(), gather::DType::I32);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of axes.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// assert_eq!(gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr0(1i32))?.ndim(), 0);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
    /// assert_eq!(x.len(), 6);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 0)))?;
    /// assert!(x.is_empty());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The GPU the tensor lives on.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[1i32]))?;
    /// x.device().synchronize()?;
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn device(&self) -> &Cuda {
        &self.dev
    }

    /// A view with the axes in the order `axes` (like `Tensor.permute`).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
    /// assert_eq!(x.permuted_axes(&[1, 0])?.shape(), &[3, 2]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn permuted_axes(&self, axes: &[usize]) -> Result<CudaTensor> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        if axes.len() != n
            || axes
                .iter()
                .any(|&a| a >= n || std::mem::replace(&mut seen[a], true))
        {
            return Err(invalid(format!(
                "permuted_axes: {axes:?} is not a permutation of the {n} axes"
            )));
        }
        let mut t = self.clone();
        t.shape = axes.iter().map(|&a| self.shape[a]).collect();
        t.strides = axes.iter().map(|&a| self.strides[a]).collect();
        Ok(t)
    }

    /// A view broadcast to `shape` (like `Tensor.expand`): axes of size 1 repeat with stride
    /// 0, new leading axes too. No copy is made.
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let ids = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr2(&[[0i64], [2]]))?;
    /// assert_eq!(ids.broadcast(&[2, 64])?.strides(), &[1, 0]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn broadcast(&self, shape: &[usize]) -> Result<CudaTensor> {
        let n = shape.len();
        if n < self.ndim() {
            return Err(shape_err(self, shape));
        }
        let lead = n - self.ndim();
        let mut strides = vec![0isize; n];
        for d in 0..self.ndim() {
            let (have, want) = (self.shape[d], shape[lead + d]);
            if have == want {
                strides[lead + d] = self.strides[d];
            } else if have != 1 {
                return Err(shape_err(self, shape));
            }
        }
        let mut t = self.clone();
        t.shape = shape.to_vec();
        t.strides = strides;
        Ok(t)
    }

    /// The view of positions `start..end` along `axis`, every `step`-th (step ≥ 1).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::arr1(&[0i32, 1, 2, 3, 4]))?;
    /// assert_eq!(x.slice_axis(0, 1, 5, 2)?.to_host::<i32>()?, ndarray::arr1(&[1, 3]).into_dyn());
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn slice_axis(
        &self,
        axis: usize,
        start: usize,
        end: usize,
        step: usize,
    ) -> Result<CudaTensor> {
        if axis >= self.ndim() || start > end || end > self.shape[axis] || step == 0 {
            return Err(invalid(format!(
                "slice_axis: {start}..{end} step {step} does not fit axis {axis} of {:?}",
                self.shape
            )));
        }
        let mut t = self.clone();
        if end > start {
            t.offset += start as isize * self.strides[axis];
        }
        t.shape[axis] = (end - start).div_ceil(step);
        t.strides[axis] *= step as isize;
        Ok(t)
    }

    /// A view with `shape`, for a row-major tensor (like `Tensor.view`).
    ///
    /// ```no_run
    /// # let gpu = gather_cuda::Cuda::new(0)?;
    /// let x = gather_cuda::CudaTensor::from_host(&gpu, &ndarray::Array2::<f32>::zeros((2, 3)))?;
    /// assert_eq!(x.reshape(&[3, 2])?.shape(), &[3, 2]);
    /// # Ok::<(), gather_cuda::Error>(())
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Result<CudaTensor> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(shape_err(self, shape));
        }
        let c = self.contiguous()?;
        let mut t = c;
        t.shape = shape.to_vec();
        t.strides = row_major(shape);
        Ok(t)
    }

    /// Whether the elements are row-major and dense.
    pub(crate) fn is_standard(&self) -> bool {
        let mut want = 1isize;
        for d in (0..self.ndim()).rev() {
            if self.shape[d] != 1 && self.strides[d] != want {
                return false;
            }
            want *= self.shape[d] as isize;
        }
        true
    }

    /// The tensor itself if row-major, else a row-major copy.
    pub(crate) fn contiguous(&self) -> Result<CudaTensor> {
        if self.is_standard() {
            return Ok(self.clone());
        }
        let out = CudaTensor::empty(&self.dev, &self.shape, self.dtype)?;
        crate::gather::copy_into(self, &out)?;
        Ok(out)
    }

    /// The device address of the first element.
    pub(crate) fn ptr(&self) -> u64 {
        let base = self.buf.base;
        base.wrapping_add((self.offset * width(self.dtype) as isize) as u64)
    }

    /// The kernel layout of this view, with axes merged where they are contiguous.
    pub(crate) fn layout(&self) -> Result<Layout> {
        Layout::new(&self.shape, &self.strides)
    }
}

/// Bytes per element.
pub(crate) fn width(d: DType) -> usize {
    d.size_of()
}

fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: the element types are plain numbers (and bool) without padding, so their memory
    // is `len * size_of::<T>()` initialised bytes, borrowed for as long as `s`.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

pub(crate) fn invalid(msg: String) -> Error {
    Error::Op(gather::Error::new(gather::ErrorKind::InvalidArgument, msg))
}

fn shape_err(t: &CudaTensor, shape: &[usize]) -> Error {
    Error::Op(gather::Error::new(
        gather::ErrorKind::ShapeMismatch,
        format!("cannot view a tensor of shape {:?} as {:?}", t.shape, shape),
    ))
}

/// A view's shape and element strides as a kernel reads them (`struct Layout` in the kernels).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Layout {
    pub ndim: i64,
    pub shape: [i64; MAX_DIMS],
    pub stride: [i64; MAX_DIMS],
}

// SAFETY: a plain #[repr(C)] struct of integers, laid out as the kernels' `struct Layout`.
unsafe impl DeviceRepr for Layout {}

impl Layout {
    /// The layout of `shape`/`strides` as given, one axis per axis (so that coordinates keep
    /// their meaning); an error past MAX_DIMS axes.
    pub(crate) fn exact(shape: &[usize], strides: &[isize]) -> Result<Layout> {
        if shape.len() > MAX_DIMS {
            return Err(invalid(format!(
                "the CUDA kernels take at most {MAX_DIMS} axes; this tensor has {} ({shape:?})",
                shape.len()
            )));
        }
        let mut l = Layout {
            ndim: shape.len() as i64,
            ..Default::default()
        };
        for d in 0..shape.len() {
            l.shape[d] = shape[d] as i64;
            l.stride[d] = strides[d] as i64;
        }
        Ok(l)
    }

    /// The layout with neighbouring axes merged where a row-major walk of the pair is one
    /// strided walk; the walk's order is unchanged.
    pub(crate) fn new(shape: &[usize], strides: &[isize]) -> Result<Layout> {
        let mut s: Vec<usize> = Vec::new();
        let mut st: Vec<isize> = Vec::new();
        for (&n, &k) in shape.iter().zip(strides) {
            if n == 1 {
                continue;
            }
            if let (Some(&pn), Some(&pk)) = (s.last(), st.last()) {
                if pk == k * n as isize {
                    *s.last_mut().unwrap() = pn * n;
                    *st.last_mut().unwrap() = k;
                    continue;
                }
            }
            s.push(n);
            st.push(k);
        }
        Layout::exact(&s, &st)
    }

    /// This layout with its axes merged as [`Layout::new`] merges them.
    pub(crate) fn merged(&self) -> Result<Layout> {
        let n = self.ndim as usize;
        let shape: Vec<usize> = self.shape[..n].iter().map(|&v| v as usize).collect();
        let strides: Vec<isize> = self.stride[..n].iter().map(|&v| v as isize).collect();
        Layout::new(&shape, &strides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_merges_axes_that_walk_as_one() {
        // Row-major [2, 3, 4] is one walk of 24.
        let l = Layout::new(&[2, 3, 4], &[12, 4, 1]).unwrap();
        assert_eq!((l.ndim, l.shape[0], l.stride[0]), (1, 24, 1));
        // A transposed [3, 2] keeps both axes; size-1 axes vanish.
        let l = Layout::new(&[3, 1, 2], &[1, 7, 3]).unwrap();
        assert_eq!(
            (l.ndim, &l.shape[..2], &l.stride[..2]),
            (2, &[3i64, 2][..], &[1i64, 3][..])
        );
        // A broadcast axis merges with nothing but other stride-0 axes.
        let l = Layout::new(&[4, 5, 6], &[0, 0, 1]).unwrap();
        assert_eq!(
            (l.ndim, &l.shape[..2], &l.stride[..2]),
            (2, &[20i64, 6][..], &[0i64, 1][..])
        );
    }

    #[test]
    fn more_axes_than_the_kernels_walk_is_an_error() {
        let shape = [2usize; 9];
        let strides = gather::dims::row_major_strides(&shape);
        assert!(Layout::exact(&shape, &strides).is_err());
        // ... unless they merge.
        assert_eq!(Layout::new(&shape, &strides).unwrap().ndim, 1);
    }
}
