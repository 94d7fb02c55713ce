//! CUDA arrays (PyTorch, CuPy, JAX on a GPU) through DLPack: imported without a copy, run by
//! `gather-cuda` (the same dispatch, names and errors as on the CPU), and handed back to the
//! caller's framework through DLPack.
//!
//! Streams: an import passes our stream to the producer's `__dlpack__(stream=...)`, so the
//! producer orders its pending work before ours; an export makes the consumer's stream wait for
//! ours (an event, no host wait). A call waits for its kernels before it returns ([`wait`]), so
//! that the inputs it borrowed are not freed (and their memory reused by the producer) while a
//! kernel may still read them, and in-place writes are done when the call returns, as on the
//! CPU. The reverse holds for results: when the consumer drops one, its kernels may still be
//! reading it, so its memory is retired and comes back only after a device-wide wait.

use std::ffi::c_void;
use std::sync::Mutex;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::python::{
    CudaStreamRequest, DlpackExporter, DlpackStream, ExportRequest, ImportRequest, StreamArg,
    export_dlpack,
};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use gather::DType;
use gather_cuda::{Cuda, CudaTensor};
use numpy::PyUntypedArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The CUDA ordinal of `obj` when it is a DLPack producer on an NVIDIA GPU, else `None` (NumPy
/// arrays, CPU tensors, lists and scalars).
pub(crate) fn device_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if obj.cast::<PyUntypedArray>().is_ok() || !obj.hasattr("__dlpack_device__")? {
        return Ok(None);
    }
    // torch's `__dlpack_device__` is Python code (about 5 µs); `is_cuda` and `get_device()`
    // give the same answer.
    if crate::is_torch(obj) {
        if !obj.getattr("is_cuda")?.is_truthy()? {
            return Ok(None);
        }
        return Ok(Some(
            obj.call_method0("get_device")?.extract::<i64>()?.max(0) as usize,
        ));
    }
    let d = dlpark::python::dlpack_device(obj.as_borrowed())?;
    Ok(matches!(
        d.device_type,
        DLDeviceType::CUDA | DLDeviceType::CUDAMANAGED
    )
    .then_some(d.device_id.max(0) as usize))
}

/// Results that their consumer has dropped, waiting for a device-wide wait (see the module
/// docs) before their memory is reused.
static RETIRED: Mutex<Vec<CudaTensor>> = Mutex::new(Vec::new());

/// The context of an export: the result's tensor, retired rather than freed when the consumer
/// drops it.
struct Retiring(CudaTensor);

impl Drop for Retiring {
    fn drop(&mut self) {
        let t = self.0.clone();
        RETIRED.lock().unwrap_or_else(|p| p.into_inner()).push(t);
    }
}

/// Waits for this call's kernels on `gpu`; with results of `gpu` retired, for everything on the
/// device (the consumers' kernels too), after which their memory can be reused.
pub(crate) fn wait(gpu: &Cuda) -> gather_cuda::Result<()> {
    let retired: Vec<CudaTensor> = {
        let mut all = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
        let (here, elsewhere) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|t| t.device().ordinal() == gpu.ordinal());
        *all = elsewhere;
        here
    };
    if retired.is_empty() {
        return gpu.synchronize();
    }
    gpu.synchronize_all()?;
    drop(retired);
    Ok(())
}

/// The GPU `ordinal`, as a Python error where there is none usable.
pub(crate) fn gpu(ordinal: usize) -> PyResult<Cuda> {
    Cuda::new(ordinal).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Our stream, as a DLPack consumer hands it to a producer.
struct OurStream(Cuda);

// SAFETY: the handle is this GPU's live stream (it lives as long as the `Cuda`, which outlives
// the `__dlpack__` call), passed with CUDA's Python DLPack convention; `wait_for_producer` makes
// it wait for the producer's live stream with an event, as the trait asks.
unsafe impl DlpackStream for OurStream {
    fn as_python_arg(&self, _py: Python<'_>, _device: DLDevice) -> PyResult<StreamArg> {
        Ok(dlpark::python::consumer::stream::cuda(
            self.0.stream_handle() as *mut c_void,
        ))
    }

    unsafe fn wait_for_producer(&self, _device: DLDevice, producer: *mut c_void) -> PyResult<bool> {
        // SAFETY: `producer` is the producer's live stream (the trait's contract).
        unsafe { self.0.wait_for(producer as u64) }
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(true)
    }
}

/// The gather dtype of a DLPack dtype, if gather has it.
fn dtype_of(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (DLDataTypeCode::BOOL, 8) => DType::Bool,
        (DLDataTypeCode::UINT, 8) => DType::U8,
        (DLDataTypeCode::UINT, 16) => DType::U16,
        (DLDataTypeCode::UINT, 32) => DType::U32,
        (DLDataTypeCode::UINT, 64) => DType::U64,
        (DLDataTypeCode::INT, 8) => DType::I8,
        (DLDataTypeCode::INT, 16) => DType::I16,
        (DLDataTypeCode::INT, 32) => DType::I32,
        (DLDataTypeCode::INT, 64) => DType::I64,
        (DLDataTypeCode::FLOAT, 16) => DType::F16,
        (DLDataTypeCode::FLOAT, 32) => DType::F32,
        (DLDataTypeCode::FLOAT, 64) => DType::F64,
        (DLDataTypeCode::BFLOAT, 16) => DType::BF16,
        _ => return None,
    })
}

/// The DLPack dtype of a gather dtype.
fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Bool => (DLDataTypeCode::BOOL, 8),
        DType::U8 => (DLDataTypeCode::UINT, 8),
        DType::U16 => (DLDataTypeCode::UINT, 16),
        DType::U32 => (DLDataTypeCode::UINT, 32),
        DType::U64 => (DLDataTypeCode::UINT, 64),
        DType::I8 => (DLDataTypeCode::INT, 8),
        DType::I16 => (DLDataTypeCode::INT, 16),
        DType::I32 => (DLDataTypeCode::INT, 32),
        DType::I64 => (DLDataTypeCode::INT, 64),
        DType::F16 => (DLDataTypeCode::FLOAT, 16),
        DType::BF16 => (DLDataTypeCode::BFLOAT, 16),
        DType::F32 => (DLDataTypeCode::FLOAT, 32),
        _ => (DLDataTypeCode::FLOAT, 64),
    };
    DLDataType::scalar(code, bits)
}

/// `obj` (a CUDA DLPack producer on `gpu`) as a tensor over its memory, no copy, and whether
/// its export is read-only. The import keeps the producer's tensor alive until the last view of
/// the tensor is dropped.
pub(crate) fn import(
    op: &str,
    name: &str,
    gpu: &Cuda,
    obj: &Bound<'_, PyAny>,
) -> PyResult<(CudaTensor, bool)> {
    let request = ImportRequest::new(obj.as_borrowed())?;
    // No copy preference: a producer that answers with a legacy capsule (JAX) cannot say whether
    // it copied, and dlpark refuses such an answer to copy=False. Legacy exports never copy; a
    // versioned one that did is refused below, since in-place ops must write the caller's memory.
    let imported = request.import(Some(&OurStream(gpu.clone())), None)?;
    if imported.flags().contains(DlpackFlags::IS_COPIED) {
        return Err(PyValueError::new_err(format!(
            "{op}: `{name}`: its producer exported a copy, not its own memory; gather works on the array itself"
        )));
    }
    let read_only = imported.flags().contains(DlpackFlags::READ_ONLY);
    let t = imported.validate().map_err(|e| {
        PyValueError::new_err(format!("{op}: `{name}` is not a valid DLPack tensor: {e}"))
    })?;
    let dtype = dtype_of(t.dtype()).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{op}: `{name}` has a DLPack dtype (code {}, {} bits, {} lanes) that gather does not support",
            t.dtype().code.0,
            t.dtype().bits,
            t.dtype().lanes
        ))
    })?;
    let shape: Vec<usize> = t.shape().iter().map(|&v| v as usize).collect();
    let strides: Vec<isize> = t
        .strides_or_compact()
        .map_err(|e| PyValueError::new_err(format!("{op}: `{name}`: {e}")))?
        .iter()
        .map(|&v| v as isize)
        .collect();
    let ptr = (t.data_ptr() as u64).wrapping_add(t.byte_offset());
    // SAFETY: the DLPack descriptor says the memory is on this GPU (device checked by the
    // caller), holds elements of `dtype` at every position of its shape and strides from
    // `ptr`, and stays allocated while the managed tensor (the owner) lives; the producer
    // ordered its pending writes before our stream (the import's stream argument).
    let t = unsafe {
        CudaTensor::from_device_ptr(gpu, ptr, &shape, &strides, dtype, Box::new(imported))
    };
    let t = t.map_err(|e| PyValueError::new_err(format!("{op}: `{name}`: {e}")))?;
    Ok((t, read_only))
}

/// A result on the GPU, handed to the caller's framework through DLPack (`torch.from_dlpack`,
/// `cupy.from_dlpack`, `jax.numpy.from_dlpack` take it as it is).
#[pyclass(module = "gather._native", frozen)]
pub(crate) struct CudaArray {
    t: CudaTensor,
}

impl CudaArray {
    pub(crate) fn new(t: CudaTensor) -> Self {
        CudaArray { t }
    }

    fn export<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.t.shape().iter().map(|&v| v as i64).collect();
        let strides: Vec<i64> = self.t.strides().iter().map(|&v| v as i64).collect();
        let prepared = Dynamic::new(shape.as_slice(), strides.as_slice())
            .prepare_as::<M>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut init = prepared.initialize(Box::new(Retiring(self.t.clone())));
        init.set_device(DLDevice::cuda(self.t.device().ordinal() as i32));
        init.set_dtype(dl_dtype(self.t.dtype()));
        init.set_data(self.t.device_ptr() as *mut c_void);
        // SAFETY: the descriptor is complete (device, dtype, data, shape and strides of a view
        // of the tensor that the context owns, so the memory outlives the managed tensor).
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for CudaArray {
    fn device(&self) -> DLDevice {
        DLDevice::cuda(self.t.device().ordinal() as i32)
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let gpu = self.t.device();
        let to = match request.cuda_stream()? {
            CudaStreamRequest::NoSync => return Ok(()),
            CudaStreamRequest::Omitted => {
                return gpu
                    .synchronize()
                    .map_err(|e| PyValueError::new_err(e.to_string()));
            }
            CudaStreamRequest::LegacyDefault => 1,
            CudaStreamRequest::PerThreadDefault => 2,
            CudaStreamRequest::Pointer(p) => p as u64,
        };
        // SAFETY: the consumer passed its live stream of this device (or a CUDA sentinel), as
        // the DLPack protocol requires of `stream`.
        unsafe { gpu.order_before(to) }.map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.export()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.export()
    }
}

#[pymethods]
impl CudaArray {
    /// The DLPack export (a one-shot capsule), ordered on the consumer's `stream`.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        export_dlpack(self, py, request)
    }

    /// `(2, ordinal)`: a CUDA device.
    fn __dlpack_device__(&self) -> (u32, i32) {
        (DLDeviceType::CUDA.0, self.t.device().ordinal() as i32)
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.t.shape().to_vec()
    }

    /// The dtype's name (`float32`, `int64`, `bfloat16` ...).
    #[getter]
    fn dtype(&self) -> String {
        self.t.dtype().name().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "gather.CudaArray(shape={:?}, dtype={}, device=cuda:{})",
            self.t.shape(),
            self.t.dtype().name(),
            self.t.device().ordinal()
        )
    }
}
