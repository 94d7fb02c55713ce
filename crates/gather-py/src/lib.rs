//! Python bindings of the `gather` library: PyTorch's gather/scatter family on NumPy arrays.
//!
//! This is the native half of the `gather` Python package (`gather._native`); the Python half
//! (`python/gather/`) re-exports these functions, defines the exception classes and ships the type
//! stubs. Build and install it with `pip install ./crates/gather-py` (maturin does the rest).
//!
//! How a call runs:
//!
//! 1. Every array argument is borrowed from NumPy without a copy ([`numpy::PyReadonlyArrayDyn`]
//!    gives an `ndarray` view with the array's own strides: the stride-0 axes of
//!    `np.broadcast_to` as they are, and negative strides too — numpy 0.30 builds the view on the
//!    lowest address and then inverts those axes, so no data moves). bfloat16 arrays
//!    (`dtype="bfloat16"`: `uint16` bit patterns) are viewed as `half::bf16` values in place
//!    ([`TensorView::bf16_from_bits`]). Only two kinds of array are copied first: non-arrays
//!    (lists, scalars: `np.asarray`) and arrays NumPy itself would not hand out as a typed view
//!    (non-native byte order, misaligned data, strides that are not a multiple of the item size).
//! 2. The GIL is released ([`Python::detach`]) and [`dynamic::call`] runs on the views: the same
//!    dispatch, results and errors as the `gather` command and the conformance runner (an index
//!    of an integer type other than int64 is widened to an int64 copy that keeps broadcast axes
//!    at length 1).
//! 3. Results are moved into new NumPy arrays without a copy (bfloat16 results become `uint16`).
//!
//! Errors become Python exceptions of `gather`'s own classes, which derive from `RuntimeError` (as
//! PyTorch's do) and from `IndexError`, `ValueError` or `TypeError` (see
//! `python/gather/_errors.py`); a panic is caught and raised as a plain `RuntimeError`, so no call
//! can take the interpreter down.

use std::panic::{AssertUnwindSafe, catch_unwind};

mod cuda;
mod hints;
mod plan;
mod xla;

use ::gather as lib;
use ::gather::dynamic::{self, Arg, Args, Tensor, TensorView, TensorViewMut};
use ::gather::grad::Parity;
use ::gather::{ErrorKind, with_tensor};
use half::f16;
use hints::Dialect;
use ndarray::ArrayD;
use numpy::{
    BorrowError, PyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyReadwriteArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

/// A borrowed NumPy array of one of the supported element types (bfloat16 as its uint16 bit
/// patterns, read as bf16 values in any layout).
enum Arr<'py> {
    Bool(PyReadonlyArrayDyn<'py, bool>),
    U8(PyReadonlyArrayDyn<'py, u8>),
    I8(PyReadonlyArrayDyn<'py, i8>),
    I16(PyReadonlyArrayDyn<'py, i16>),
    I32(PyReadonlyArrayDyn<'py, i32>),
    I64(PyReadonlyArrayDyn<'py, i64>),
    U16(PyReadonlyArrayDyn<'py, u16>),
    U32(PyReadonlyArrayDyn<'py, u32>),
    U64(PyReadonlyArrayDyn<'py, u64>),
    F16(PyReadonlyArrayDyn<'py, f16>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
    BF16(PyReadonlyArrayDyn<'py, u16>),
}

impl Arr<'_> {
    /// A view of the array: any strides, no copy.
    fn view(&self) -> TensorView<'_> {
        match self {
            Arr::Bool(a) => a.as_array().into(),
            Arr::U8(a) => a.as_array().into(),
            Arr::I8(a) => a.as_array().into(),
            Arr::I16(a) => a.as_array().into(),
            Arr::I32(a) => a.as_array().into(),
            Arr::I64(a) => a.as_array().into(),
            Arr::U16(a) => a.as_array().into(),
            Arr::U32(a) => a.as_array().into(),
            Arr::U64(a) => a.as_array().into(),
            Arr::F16(a) => a.as_array().into(),
            Arr::F32(a) => a.as_array().into(),
            Arr::F64(a) => a.as_array().into(),
            Arr::BF16(a) => TensorView::bf16_from_bits(a.as_array()),
        }
    }
}

/// An output of a call: in host memory (NumPy's), or on the GPU of its CUDA inputs.
enum Out {
    Host(Tensor),
    Gpu(gather_cuda::CudaTensor),
}

/// The Python exception for a library error: the class of `gather._errors` for its kind, with
/// the message and hint as text and `category`, `hint`, `index_value` and `coordinate` attributes.
/// The hint's Rust calls are written as `dialect`'s (see [`hints`]); `_rust_hint` keeps them as
/// the library wrote them, for `gather._errors` to write for another framework.
fn to_pyerr(py: Python<'_>, e: &lib::Error, dialect: Dialect) -> PyErr {
    let class = match e.kind() {
        ErrorKind::DimOutOfRange => "DimOutOfRangeError",
        ErrorKind::IndexOutOfBounds => "IndexOutOfBoundsError",
        ErrorKind::RankMismatch => "RankMismatchError",
        ErrorKind::ShapeMismatch => "ShapeMismatchError",
        ErrorKind::InvalidArgument if e.message().contains("dtype") => "DTypeError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        _ => "GatherError",
    };
    let build = || -> PyResult<PyErr> {
        let errors = py.import("gather._errors")?;
        let hint = e.hint().map(|h| hints::respell(h, dialect));
        let text = match &hint {
            Some(h) => format!("{}\nhint: {h}", e.message()),
            None => e.message().to_string(),
        };
        let obj = errors.getattr(class)?.call1((text,))?;
        obj.setattr("category", e.kind().category())?;
        obj.setattr("hint", hint)?;
        obj.setattr("_rust_hint", e.hint())?;
        obj.setattr("index_value", e.index_value())?;
        obj.setattr("coordinate", e.coordinate().map(|c| c.to_vec()))?;
        Ok(PyErr::from_value(obj))
    };
    build().unwrap_or_else(|err| err)
}

/// An exception of class `class` of `gather._errors` with `category`, raised by the bindings
/// themselves (a bad `dtype=`, `parity=`, or bfloat16 data that is not uint16), and `hint`
/// where the message ends in one, as the library's errors have them.
fn py_error(py: Python<'_>, class: &str, category: &str, message: String) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let obj = py
            .import("gather._errors")?
            .getattr(class)?
            .call1((message.clone(),))?;
        obj.setattr("category", category)?;
        obj.setattr("hint", message.split_once("\nhint: ").map(|(_, h)| h))?;
        Ok(PyErr::from_value(obj))
    };
    build().unwrap_or_else(|err| err)
}

/// One call being assembled: its arrays (borrowed) and its other arguments.
struct Call<'py> {
    py: Python<'py>,
    op: &'static str,
    bf16: bool,
    arrays: Vec<(&'static str, Arr<'py>)>,
    args: Args,
    /// The framework module of the first data argument that is not a NumPy array (PyTorch,
    /// JAX): results are handed back as its type.
    like: Option<Bound<'py, PyAny>>,
    /// A data argument was a bfloat16 tensor of that framework: bfloat16 results go back as
    /// its bfloat16 too (NumPy has no bfloat16, so they travel as uint16 bit patterns).
    like_bf16: bool,
    /// The CUDA arrays (DLPack producers on a GPU), imported without a copy, and whether each
    /// is read-only. A call with any runs on their GPU, and then every array must be there.
    gpu: Vec<(&'static str, gather_cuda::CudaTensor, bool)>,
}

impl<'py> Call<'py> {
    fn new(py: Python<'py>, op: &'static str, dtype: Option<&str>) -> PyResult<Self> {
        let bf16 = match dtype {
            None => false,
            Some("bfloat16") => true,
            Some(other) => {
                return Err(py_error(
                    py,
                    "InvalidArgumentError",
                    "invalid_argument",
                    format!(
                        "{op}: dtype must be None or \"bfloat16\", got {other:?}\nhint: every \
                         NumPy dtype is taken as it is; dtype=\"bfloat16\" says that uint16 \
                         arrays hold bfloat16 bit patterns"
                    ),
                ));
            }
        };
        Ok(Call {
            py,
            op,
            bf16,
            arrays: Vec::new(),
            args: Args::default(),
            like: None,
            like_bf16: false,
            gpu: Vec::new(),
        })
    }

    fn arg(&mut self, name: &str, value: Arg) -> &mut Self {
        self.args.set(name, value);
        self
    }

    /// The bounds policy of the call (`bounds=`, `fill_value=`), when either is given: the
    /// library checks them against the op, on either device.
    fn bounds(
        mut self,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        if let Some(b) = bounds {
            self.arg("bounds", Arg::Str(b.to_string()));
        }
        if let Some(v) = fill_value {
            self.arg("fill_value", scalar_arg("fill_value", v)?);
        }
        Ok(self)
    }

    /// A data array (`input`, `src`, `source`, `grad_output`): bfloat16 bit patterns under
    /// `dtype="bfloat16"`.
    fn data(&mut self, name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<&mut Self> {
        let obj = &readable(obj)?;
        if self.like.is_none() {
            self.like = framework(self.py, obj)?;
        }
        if self.cuda_input(name, obj)? {
            return Ok(self);
        }
        let arr = if let Some(bits) = framework_bf16_bits(self.py, obj)? {
            self.like_bf16 = true;
            bf16_bits(self.py, self.op, name, &bits)?
        } else if self.bf16 {
            bf16_bits(self.py, self.op, name, obj)?
        } else {
            borrow(self.py, self.op, name, obj)?
        };
        self.arrays.push((name, arr));
        Ok(self)
    }

    /// An index, mask or repeats array (never bfloat16).
    fn plain(&mut self, name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<&mut Self> {
        let obj = &readable(obj)?;
        if self.cuda_input(name, obj)? {
            return Ok(self);
        }
        let arr = borrow(self.py, self.op, name, obj)?;
        self.arrays.push((name, arr));
        Ok(self)
    }

    /// Imports `obj` when it is a CUDA array (no copy): true when it was.
    fn cuda_input(&mut self, name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<bool> {
        let Some(ordinal) = cuda::device_of(obj)? else {
            return Ok(false);
        };
        let invalid = |m: String| py_error(self.py, "InvalidArgumentError", "invalid_argument", m);
        if self.bf16 {
            return Err(invalid(format!(
                "{}: dtype=\"bfloat16\" reads NumPy uint16 arrays as bfloat16, but `{name}` is a CUDA array\nhint: CUDA bfloat16 tensors are taken as they are: leave dtype out",
                self.op
            )));
        }
        let gpu = match self.gpu.first() {
            Some((first, t, _)) if t.device().ordinal() != ordinal => {
                return Err(invalid(format!(
                    "{}: `{first}` is on cuda:{} but `{name}` on cuda:{ordinal}\nhint: move them to one GPU first",
                    self.op,
                    t.device().ordinal()
                )));
            }
            Some((_, t, _)) => t.device().clone(),
            None => cuda::gpu(ordinal)?,
        };
        let (t, read_only) = cuda::import(self.op, name, &gpu, obj)?;
        self.gpu.push((name, t, read_only));
        Ok(true)
    }

    /// An error unless every array is on the GPU of the CUDA arrays.
    fn one_device(&self) -> PyResult<()> {
        if let (Some((host, _)), Some((dev, t, _))) = (self.arrays.first(), self.gpu.first()) {
            return Err(py_error(
                self.py,
                "InvalidArgumentError",
                "invalid_argument",
                format!(
                    "{}: `{dev}` is on cuda:{} but `{host}` is in host memory\nhint: move them to one device first (e.g. torch's `.cuda()` or `.cpu()`)",
                    self.op,
                    t.device().ordinal()
                ),
            ));
        }
        Ok(())
    }

    /// The CUDA arrays by name, but `except`.
    fn gpu_inputs(&self, except: &str) -> gather_cuda::dynamic::CudaTensors {
        self.gpu
            .iter()
            .filter(|(n, _, _)| *n != except)
            .map(|(n, t, _)| (n.to_string(), t.clone()))
            .collect()
    }

    /// Runs the op on the GPU of the CUDA arrays; the outputs stay there.
    fn run_gpu(&self) -> PyResult<Vec<(String, Out)>> {
        self.one_device()?;
        let inputs = self.gpu_inputs("");
        let gpu = self.gpu.first().map(|(_, t, _)| t.device().clone());
        let (op, args) = (self.op, &self.args);
        let result = self.py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let out = gather_cuda::dynamic::call(op, args, &inputs);
                // The borrowed inputs may be freed (and their memory reused by their framework)
                // once the call returns, failed or not: their last reader finishes first.
                if let Some(g) = &gpu {
                    cuda::wait(g).map_err(|e| {
                        lib::Error::new(ErrorKind::InvalidArgument, format!("{op}: {e}"))
                    })?;
                }
                out
            }))
        });
        let out = self.finish(result)?;
        Ok(out.into_iter().map(|(n, t)| (n, Out::Gpu(t))).collect())
    }

    /// The arrays as the library's named inputs: a list, as a call has two or three, where a
    /// map would allocate a key and a node for each.
    fn views(&self) -> Vec<(&'static str, TensorView<'_>)> {
        self.arrays.iter().map(|(n, a)| (*n, a.view())).collect()
    }

    fn run(&self) -> PyResult<Vec<(String, Out)>> {
        if !self.gpu.is_empty() {
            return self.run_gpu();
        }
        let views = self.views();
        let (op, args) = (self.op, &self.args);
        let result = self
            .py
            .detach(|| catch_unwind(AssertUnwindSafe(|| dynamic::call(op, args, &views))));
        let out = self.finish(result)?;
        Ok(out.into_iter().map(|(n, t)| (n, Out::Host(t))).collect())
    }

    fn run_grad(
        &self,
        grad_output: &Bound<'py, PyAny>,
        parity: &str,
    ) -> PyResult<Vec<(String, Out)>> {
        let parity = parse_parity(self.op, parity)
            .map_err(|m| py_error(self.py, "InvalidArgumentError", "invalid_argument", m))?;
        let grad_output = &readable(grad_output)?;
        let on_gpu = cuda::device_of(grad_output)?;
        if !self.gpu.is_empty() || on_gpu.is_some() {
            return self.run_grad_gpu(grad_output, on_gpu, parity);
        }
        let g = if let Some(bits) = framework_bf16_bits(self.py, grad_output)? {
            // A framework's own bfloat16 (torch's backward hands one over), as for `data`.
            bf16_bits(self.py, self.op, "grad_output", &bits)?
        } else if self.bf16 {
            bf16_bits(self.py, self.op, "grad_output", grad_output)?
        } else {
            borrow(self.py, self.op, "grad_output", grad_output)?
        };
        let views = self.views();
        let gv = g.view();
        let (op, args) = (self.op, &self.args);
        let result = self.py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                dynamic::call_grad_with(op, args, &views, &gv, parity)
            }))
        });
        let out = self.finish(result)?;
        Ok(out.into_iter().map(|(n, t)| (n, Out::Host(t))).collect())
    }

    /// The gradients on the GPU of the CUDA arrays (`grad_output` one of them too); they stay
    /// there.
    fn run_grad_gpu(
        &self,
        grad_output: &Bound<'py, PyAny>,
        on_gpu: Option<usize>,
        parity: Parity,
    ) -> PyResult<Vec<(String, Out)>> {
        self.one_device()?;
        let invalid = |m: String| py_error(self.py, "InvalidArgumentError", "invalid_argument", m);
        let op = self.op;
        let Some((first, t, _)) = self.gpu.first() else {
            return Err(invalid(format!(
                "{op}: `grad_output` is a CUDA array but the inputs are in host memory\nhint: move them to one device first (e.g. torch's `.cuda()` or `.cpu()`)"
            )));
        };
        let ordinal = t.device().ordinal();
        match on_gpu {
            None => {
                return Err(invalid(format!(
                    "{op}: `{first}` is on cuda:{ordinal} but `grad_output` is in host memory\nhint: move them to one device first (e.g. torch's `.cuda()` or `.cpu()`)"
                )));
            }
            Some(o) if o != ordinal => {
                return Err(invalid(format!(
                    "{op}: `{first}` is on cuda:{ordinal} but `grad_output` on cuda:{o}\nhint: move them to one GPU first"
                )));
            }
            Some(_) => {}
        }
        let gpu = t.device().clone();
        let (g, _) = cuda::import(op, "grad_output", &gpu, grad_output)?;
        let inputs = self.gpu_inputs("");
        let args = &self.args;
        let result = self.py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let out = gather_cuda::dynamic::call_grad_with(op, args, &inputs, &g, parity);
                // The borrowed arrays may be freed once the call returns: wait for their readers.
                cuda::wait(&gpu).map_err(|e| {
                    lib::Error::new(ErrorKind::InvalidArgument, format!("{op}: {e}"))
                })?;
                out
            }))
        });
        let out = self.finish(result)?;
        Ok(out.into_iter().map(|(n, t)| (n, Out::Gpu(t))).collect())
    }

    /// The framework the call's errors are written for: that of its first data argument.
    fn dialect(&self) -> Dialect {
        let module = self.like.as_ref().and_then(|m| m.getattr("__name__").ok());
        module.map_or(Dialect::NumPy, |m| {
            Dialect::of_module(&m.extract::<String>().unwrap_or_default())
        })
    }

    /// Refuses a target whose elements share memory (an expanded or broadcast view): what
    /// one write leaves would depend on the order of the others, and Rust's `&mut` views
    /// promise distinct elements.
    fn writable(&self, overlaps_itself: bool) -> PyResult<()> {
        if !overlaps_itself {
            return Ok(());
        }
        Err(py_error(
            self.py,
            "InvalidArgumentError",
            "invalid_argument",
            format!(
                "{op}_: `input` has elements that share memory (an expanded, broadcast or \
                 overlapping strided view), so what the call writes into one it writes into \
                 others\nhint: write into a copy (NumPy: `x = x.copy()`, torch: `x = x.clone()`), \
                 or call the out-of-place {op}",
                op = self.op
            ),
        ))
    }

    fn finish<T>(&self, result: std::thread::Result<lib::Result<T>>) -> PyResult<T> {
        match result {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(to_pyerr(self.py, &e, self.dialect())),
            Err(_) => Err(PyRuntimeError::new_err(format!(
                "{}: internal error (a panic in the library); this is a bug in gather, please \
                 report it with the call's shapes and dtypes",
                self.op
            ))),
        }
    }

    /// Runs the in-place form of the op on `input`, the caller's own array, and returns it.
    fn into_input(mut self, input: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let torch = is_torch(input);
        if torch && input.call_method0("is_neg")?.is_truthy()? {
            return Err(py_error(
                self.py,
                "InvalidArgumentError",
                "invalid_argument",
                format!(
                    "{op}_: `input` is a view with the negative bit set (as `z.conj().imag` is), which the library cannot write through\nhint: write into a tensor without it (`x = x.resolve_neg()` copies), or call the out-of-place {op}",
                    op = self.op
                ),
            ));
        }
        if !self.gpu.is_empty() {
            self.into_gpu_input(input)?;
            return written(input, torch);
        }
        // The read-only borrow of `input` ends here: the target is borrowed for writing.
        self.arrays.retain(|(n, _)| *n != "input");
        let views = self.views();
        let (op, args) = (self.op, &self.args);
        // Tested on NumPy's description of the target before a `&mut` view of it exists, and
        // also where NumPy's borrow checker refuses it, as that error cannot name the argument.
        let check = |written: Option<Span>| {
            let Some(written) = written else {
                return Ok(());
            };
            self.writable(written.overlaps_itself)?;
            for (name, v) in &views {
                let read = lib::with_elem!(TensorView, v, a => Span::of(a.as_ptr(), a.shape(), a.strides()));
                if read.is_some_and(|r| r.meets(&written)) {
                    return Err(py_error(
                        self.py,
                        "InvalidArgumentError",
                        "invalid_argument",
                        format!(
                            "{op}_: `input` shares memory with `{name}`, which the call would read while writing it\nhint: pass a copy of `{name}` (NumPy: `{name}.copy()`, torch: `{name}.clone()`)"
                        ),
                    ));
                }
            }
            Ok(())
        };
        let mut target = borrow_mut(self.py, op, input, self.bf16, &check)?;
        let tv = target.view_mut();
        let result = self.py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                dynamic::call_inplace(op, args, tv, &views)
            }))
        });
        self.finish(result)?;
        written(input, torch)
    }

    /// The in-place form on the GPU ([`gather_cuda::dynamic::call_inplace`]: the op out of
    /// place, then its result written into the caller's CUDA array, so a failed call changes
    /// nothing), waited for before returning.
    fn into_gpu_input(self, input: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        self.one_device()?;
        let target = self.gpu.iter().find(|(n, _, _)| *n == "input").cloned();
        let Some((_, target, read_only)) = target else {
            return Err(PyRuntimeError::new_err("in-place call without an input"));
        };
        let (shape, strides) = (target.shape(), target.strides());
        let span = Span::of(target.device_ptr() as *const u8, shape, strides);
        self.writable(span.is_some_and(|s| s.overlaps_itself))?;
        if read_only {
            return Err(py_error(
                self.py,
                "InvalidArgumentError",
                "invalid_argument",
                format!(
                    "{}_: `input` is read-only (its DLPack export says so; JAX arrays are immutable)\nhint: call the out-of-place {}",
                    self.op, self.op
                ),
            ));
        }
        let inputs = self.gpu_inputs("input");
        let (op, args) = (self.op, &self.args);
        let result = self.py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let r = gather_cuda::dynamic::call_inplace(op, args, &target, &inputs);
                cuda::wait(target.device()).map_err(|e| {
                    lib::Error::new(ErrorKind::InvalidArgument, format!("{op}_: {e}"))
                })?;
                r
            }))
        });
        self.finish(result)?;
        Ok(input.clone().unbind())
    }

    /// A result as a new array of the caller's framework: NumPy, or the type of the first data
    /// argument that came through DLPack (moved, not copied); a GPU result goes to that
    /// framework's `from_dlpack` as it is.
    fn result(&self, out: Out) -> PyResult<Py<PyAny>> {
        let t = match out {
            Out::Host(t) => t,
            Out::Gpu(t) => {
                let arr = Py::new(self.py, cuda::CudaArray::new(t))?;
                return match &self.like {
                    Some(module) => Ok(module.call_method1("from_dlpack", (arr,))?.unbind()),
                    None => Ok(arr.into_any()),
                };
            }
        };
        let bf16 = t.dtype() == lib::DType::BF16;
        let arr = to_numpy(self.py, t);
        let Some(module) = &self.like else {
            return Ok(arr);
        };
        // torch's `from_numpy` is the same hand-over as its `from_dlpack`, without the latter's
        // Python-level checks.
        let torch = module.getattr("__name__")?.extract::<String>()? == "torch";
        let out = module.call_method1(if torch { "from_numpy" } else { "from_dlpack" }, (arr,))?;
        if !(bf16 && self.like_bf16) {
            return Ok(out.unbind());
        }
        let as_bf16 = if torch {
            out.call_method1("view", (module.getattr("bfloat16")?,))?
        } else {
            let lax = self.py.import("jax.lax")?;
            lax.call_method1("bitcast_convert_type", (out, module.getattr("bfloat16")?))?
        };
        Ok(as_bf16.unbind())
    }

    /// Runs the op and returns its single output.
    fn output(&self) -> PyResult<Py<PyAny>> {
        let out = self.run()?;
        let t = out.into_iter().next().map(|(_, t)| t);
        let t = t.ok_or_else(|| PyRuntimeError::new_err("no output"))?;
        self.result(t)
    }

    /// Runs the op and returns `(values, indices)`.
    fn pair(&self) -> PyResult<Py<PyAny>> {
        let out = self.run()?;
        let items = out
            .into_iter()
            .map(|(_, t)| self.result(t))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(self.py, items)?.into_any().unbind())
    }

    /// Runs the gradient: one array, or a tuple `(grad_input, grad_src/grad_source)`.
    fn grads(&self, grad_output: &Bound<'py, PyAny>, parity: &str) -> PyResult<Py<PyAny>> {
        let out = self.run_grad(grad_output, parity)?;
        let mut items: Vec<Py<PyAny>> = out
            .into_iter()
            .map(|(_, t)| self.result(t))
            .collect::<PyResult<_>>()?;
        if items.len() == 1 {
            return Ok(items.remove(0));
        }
        Ok(PyTuple::new(self.py, items)?.into_any().unbind())
    }
}

/// `input`, the target of an in-place call that wrote into it, after its version counter has
/// moved on where it is a torch tensor: a backward that saved it then refuses to run on the new
/// values, as after torch's own in-place ops (the Python wrappers do the same for the NumPy
/// views they pass).
fn written(input: &Bound<'_, PyAny>, torch: bool) -> PyResult<Py<PyAny>> {
    if torch {
        let graph = input.py().import("torch.autograd.graph")?;
        graph.call_method1("increment_version", (input,))?;
    }
    Ok(input.clone().unbind())
}

/// The target of an in-place call, borrowed for writing.
enum ArrMut<'py> {
    Bool(PyReadwriteArrayDyn<'py, bool>),
    U8(PyReadwriteArrayDyn<'py, u8>),
    I8(PyReadwriteArrayDyn<'py, i8>),
    I16(PyReadwriteArrayDyn<'py, i16>),
    I32(PyReadwriteArrayDyn<'py, i32>),
    I64(PyReadwriteArrayDyn<'py, i64>),
    U16(PyReadwriteArrayDyn<'py, u16>),
    U32(PyReadwriteArrayDyn<'py, u32>),
    U64(PyReadwriteArrayDyn<'py, u64>),
    F16(PyReadwriteArrayDyn<'py, f16>),
    F32(PyReadwriteArrayDyn<'py, f32>),
    F64(PyReadwriteArrayDyn<'py, f64>),
    /// bfloat16 bit patterns, written as bf16 values in place.
    BF16(PyReadwriteArrayDyn<'py, u16>),
}

impl ArrMut<'_> {
    fn view_mut(&mut self) -> TensorViewMut<'_> {
        match self {
            ArrMut::Bool(a) => a.as_array_mut().into(),
            ArrMut::U8(a) => a.as_array_mut().into(),
            ArrMut::I8(a) => a.as_array_mut().into(),
            ArrMut::I16(a) => a.as_array_mut().into(),
            ArrMut::I32(a) => a.as_array_mut().into(),
            ArrMut::I64(a) => a.as_array_mut().into(),
            ArrMut::U16(a) => a.as_array_mut().into(),
            ArrMut::U32(a) => a.as_array_mut().into(),
            ArrMut::U64(a) => a.as_array_mut().into(),
            ArrMut::F16(a) => a.as_array_mut().into(),
            ArrMut::F32(a) => a.as_array_mut().into(),
            ArrMut::F64(a) => a.as_array_mut().into(),
            ArrMut::BF16(a) => TensorViewMut::bf16_from_bits(a.as_array_mut()),
        }
    }
}

/// `$as!(type, variant)` for the element type of a dtype's `(kind, item size)` ([`element`]),
/// `None` for the dtypes the library does not take: the one table of [`borrow`] and
/// [`borrow_mut`].
macro_rules! by_element {
    ($kind_size:expr, $as:ident) => {
        match $kind_size {
            Some((b'f', 4)) => $as!(f32, F32),
            Some((b'f', 8)) => $as!(f64, F64),
            Some((b'f', 2)) => $as!(f16, F16),
            Some((b'i', 8)) => $as!(i64, I64),
            Some((b'i', 4)) => $as!(i32, I32),
            Some((b'i', 2)) => $as!(i16, I16),
            Some((b'i', 1)) => $as!(i8, I8),
            Some((b'u', 8)) => $as!(u64, U64),
            Some((b'u', 4)) => $as!(u32, U32),
            Some((b'u', 2)) => $as!(u16, U16),
            Some((b'u', 1)) => $as!(u8, U8),
            Some((b'b', 1)) => $as!(bool, Bool),
            _ => None,
        }
    };
}

/// The kind (`b'f'`, `b'i'`, `b'u'`, `b'b'`) and item size of an array's dtype, read from the
/// descriptor: one match picks the element type, where trying each type in turn cost a failed
/// conversion (and its error) per type before the right one.
fn element(a: &Bound<'_, PyAny>) -> Option<(u8, usize)> {
    let d = a.cast::<PyUntypedArray>().ok()?.dtype();
    Some((d.kind(), d.itemsize()))
}

/// Borrows `obj`, the target of an in-place call, for writing: a NumPy array (or a tensor seen
/// as one through DLPack) that can be written without a copy. `check` is given the memory the
/// elements occupy first (see [`Span`]), and may refuse it.
fn borrow_mut<'py>(
    py: Python<'py>,
    op: &str,
    obj: &Bound<'py, PyAny>,
    bf16: bool,
    check: &dyn Fn(Option<Span>) -> PyResult<()>,
) -> PyResult<ArrMut<'py>> {
    let fail = |why: &str, hint: &str| {
        py_error(
            py,
            "InvalidArgumentError",
            "invalid_argument",
            format!("{op}_: `input` {why}\nhint: {hint}"),
        )
    };
    if let Some(bits) = framework_bf16_bits(py, obj)? {
        return borrow_mut(py, op, &bits, true, check);
    }
    let a = match obj.cast::<PyUntypedArray>() {
        Ok(_) => obj.clone(),
        Err(_) if obj.hasattr("__dlpack__")? => from_dlpack(py, obj)?,
        Err(_) => {
            return Err(fail(
                "must be an array to be written in place",
                &format!(
                    "pass a NumPy array (or a tensor with __dlpack__), or call the out-of-place {op}"
                ),
            ));
        }
    };
    // Nothing to write into an empty array, whose pointer may be unaligned (see `ndarray_of`):
    // a fresh empty one stands in for it.
    let a = if a.cast::<PyUntypedArray>()?.is_empty() {
        ndarray_of(py, &a)?
    } else {
        a
    };
    let arr = a.cast::<PyUntypedArray>()?;
    let native = arr.dtype().is_native_byteorder().unwrap_or(true);
    if !native || !arr.is_aligned() {
        return Err(fail(
            "has a non-native byte order or is misaligned, so it cannot be written in place",
            &format!("call the out-of-place {op}, which reads a converted copy"),
        ));
    }
    let borrowed = |e: BorrowError| match e {
        BorrowError::NotWriteable => fail(
            "is read-only",
            &format!("pass a writable array (e.g. `x.copy()`), or call the out-of-place {op}"),
        ),
        _ => fail(
            "shares memory with another argument of the call",
            "pass a copy of the other argument (e.g. `src.copy()`)",
        ),
    };
    if bf16 {
        let bits = a.cast::<PyArrayDyn<u16>>().map_err(|_| {
            py_error(
                py,
                "DTypeError",
                "invalid_argument",
                format!(
                    "{op}_: with dtype=\"bfloat16\", `input` must be a uint16 array of bfloat16 \
                     bit patterns, but got {}",
                    describe_dtype(&a)
                ),
            )
        })?;
        return borrow_checked(bits, check, borrowed).map(ArrMut::BF16);
    }
    macro_rules! as_ {
        ($t:ty, $v:ident) => {
            a.cast::<PyArrayDyn<$t>>()
                .ok()
                .map(|x| borrow_checked(x, check, borrowed).map(ArrMut::$v))
        };
    }
    let found = by_element!(element(&a), as_);
    if let Some(target) = found {
        return target;
    }
    Err(py_error(
        py,
        "DTypeError",
        "invalid_argument",
        format!(
            "{op}_: `input` has dtype {}, which gather does not support",
            describe_dtype(&a)
        ),
    ))
}

/// `a` borrowed for writing, once `check` has passed the memory its elements occupy (see
/// [`Span`]); `check` also runs when NumPy's borrow checker finds another argument's borrow,
/// so that the error names the argument.
fn borrow_checked<'py, T: numpy::Element>(
    a: &Bound<'py, PyArrayDyn<T>>,
    check: &dyn Fn(Option<Span>) -> PyResult<()>,
    refused: impl Fn(BorrowError) -> PyErr,
) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    let span = || Span::of_bytes(a.data() as usize, a.shape(), a.strides(), size_of::<T>());
    match a.try_readwrite() {
        Ok(w) => check(span()).map(|()| w),
        Err(e @ BorrowError::AlreadyBorrowed) => check(span()).and(Err(refused(e))),
        Err(e) => Err(refused(e)),
    }
}

/// A uint16 array of bfloat16 bit patterns, borrowed to be read as bf16 values (no copy).
fn bf16_bits<'py>(
    py: Python<'py>,
    op: &str,
    name: &str,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Arr<'py>> {
    let a = ndarray_of(py, obj)?;
    match a.extract::<PyReadonlyArrayDyn<u16>>() {
        Ok(bits) => Ok(Arr::BF16(bits)),
        Err(_) => Err(py_error(
            py,
            "DTypeError",
            "invalid_argument",
            format!(
                "{op}: with dtype=\"bfloat16\", `{name}` must be a uint16 array of bfloat16 bit \
                 patterns, but got {}\nhint: pass `x.view(np.uint16)` of a bfloat16 array, or \
                 leave out dtype= for the other dtypes",
                describe_dtype(&a)
            ),
        )),
    }
}

fn describe_dtype(a: &Bound<'_, PyAny>) -> String {
    a.getattr("dtype")
        .and_then(|d| d.str())
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "an unknown dtype".to_string())
}

/// `obj` as a NumPy array, converted (copied) only when it is not an ndarray NumPy would hand
/// out as a typed view: lists and scalars, non-native byte order, misaligned data, strides that
/// are not multiples of the item size.
fn ndarray_of<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let Ok(arr) = obj.cast::<PyUntypedArray>() else {
        let a = if obj.hasattr("__dlpack__")? {
            from_dlpack(py, obj)?
        } else {
            py.import("numpy")?.call_method1("asarray", (obj,))?
        };
        // Checked like any array: DLPack may hand over an empty array's odd pointer.
        return match a.cast::<PyUntypedArray>() {
            Ok(_) => ndarray_of(py, &a),
            Err(_) => Ok(a),
        };
    };
    let dtype = arr.dtype();
    if arr.is_empty() {
        // NumPy calls an empty array aligned whatever its pointer (one unpickled from a buffer
        // may have any), and a Rust view needs an aligned one: a fresh empty array has it.
        let native_dtype = dtype.call_method1("newbyteorder", ("=",))?;
        return py
            .import("numpy")?
            .call_method1("empty", (arr.shape().to_vec(), native_dtype));
    }
    let itemsize = dtype.itemsize() as isize;
    let strides_ok = itemsize > 0 && arr.strides().iter().all(|s| s % itemsize == 0);
    // `None` for single-byte types, which have no byte order.
    let native = dtype.is_native_byteorder().unwrap_or(true);
    if strides_ok && native && arr.is_aligned() {
        return Ok(obj.clone());
    }
    // A new array: `ascontiguousarray` would hand back a misaligned contiguous one as it is (an
    // array unpickled from a buffer, as Dask's workers receive them, may be one).
    let native_dtype = dtype.call_method1("newbyteorder", ("=",))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", native_dtype)?;
    kwargs.set_item("order", "C")?;
    kwargs.set_item("copy", true)?;
    py.import("numpy")?
        .call_method("array", (obj,), Some(&kwargs))
}

/// A NumPy array sharing the memory of `obj`, a tensor of another framework on the CPU
/// (PyTorch, JAX, ...), through the DLPack protocol: no copy. A torch tensor's own `numpy()`
/// is the same view at a tenth of the cost (torch's DLPack export is Python code), where it
/// has one (not for bfloat16 or a tensor that requires grad: DLPack's error then).
fn from_dlpack<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if is_torch(obj) {
        if let Ok(view) = obj.call_method0("numpy") {
            return Ok(view);
        }
    }
    py.import("numpy")?.call_method1("from_dlpack", (obj,))
}

/// Whether `obj` is a torch tensor (its type is torch's, or a subclass in torch's modules).
pub(crate) fn is_torch(obj: &Bound<'_, PyAny>) -> bool {
    // A NumPy array is the common argument: answered by a type check, without looking up its
    // type's `__module__` (a dictionary lookup and a string compare per array).
    if obj.cast::<PyUntypedArray>().is_ok() {
        return false;
    }
    let Ok(module) = obj.get_type().getattr("__module__") else {
        return false;
    };
    let Ok(module) = module.cast_into::<PyString>() else {
        return false;
    };
    module
        .to_cow()
        .is_ok_and(|m| m == "torch" || m.starts_with("torch."))
}

/// `obj` to be read: a torch tensor with the negative bit (as `z.conj().imag` has it) resolved
/// into a copy, as torch's DLPack export drops the bit and the values' signs would flip.
fn readable<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if is_torch(obj) && obj.call_method0("is_neg")?.is_truthy()? {
        return obj.call_method0("resolve_neg");
    }
    Ok(obj.clone())
}

/// The bit patterns of `obj` as a uint16 NumPy array sharing its memory, when `obj` is a
/// bfloat16 tensor of another framework (NumPy has no bfloat16, so DLPack cannot bring it as
/// it is).
fn framework_bf16_bits<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if obj.cast::<PyUntypedArray>().is_ok()
        || !obj.hasattr("__dlpack__")?
        || !obj.hasattr("dtype")?
    {
        return Ok(None);
    }
    let dtype = obj.getattr("dtype")?.str()?.to_string();
    let np = py.import("numpy")?;
    let bits = match dtype.as_str() {
        "torch.bfloat16" => {
            let int16 = py.import("torch")?.getattr("int16")?;
            from_dlpack(py, &obj.call_method1("view", (int16,))?)?
        }
        "bfloat16" => np.call_method1("asarray", (obj,))?,
        _ => return Ok(None),
    };
    Ok(Some(bits.call_method1("view", (np.getattr("uint16")?,))?))
}

/// The framework of `obj` when it is a DLPack tensor rather than a NumPy array: the module
/// whose `from_dlpack` turns a result back into the caller's type.
fn framework<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    if obj.cast::<PyUntypedArray>().is_ok() || !obj.hasattr("__dlpack__")? {
        return Ok(None);
    }
    let module: String = obj.get_type().getattr("__module__")?.extract()?;
    let root = module.split('.').next().unwrap_or_default();
    let name = match root {
        "torch" => "torch",
        "cupy" => "cupy",
        "jax" | "jaxlib" => "jax.numpy",
        _ => return Ok(None),
    };
    Ok(Some(py.import(name)?.into_any()))
}

/// Borrows `obj` as a typed array of one of the supported dtypes.
fn borrow<'py>(
    py: Python<'py>,
    op: &str,
    name: &str,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Arr<'py>> {
    let a = ndarray_of(py, obj)?;
    macro_rules! as_ {
        ($t:ty, $v:ident) => {
            a.extract::<PyReadonlyArrayDyn<'py, $t>>().ok().map(Arr::$v)
        };
    }
    let found = by_element!(element(&a), as_);
    if let Some(arr) = found {
        return Ok(arr);
    }
    Err(py_error(
        py,
        "DTypeError",
        "invalid_argument",
        format!(
            "{op}: `{name}` has dtype {}, which gather does not support\nhint: the dtypes are \
             bool, uint8/16/32/64, int8/16/32/64, float16/32/64, and bfloat16 as uint16 bit \
             patterns with dtype=\"bfloat16\"",
            describe_dtype(&a)
        ),
    ))
}

/// A result as a new NumPy array (moved, not copied; bfloat16 as uint16 bit patterns).
fn to_numpy(py: Python<'_>, t: Tensor) -> Py<PyAny> {
    match t {
        Tensor::BF16(a) => {
            let bits = if a.is_standard_layout() {
                let (dim, n) = (a.raw_dim(), a.len());
                // Standard layout: the elements are `data[off..off + n]`, in order.
                let (mut data, off) = a.into_raw_vec_and_offset();
                let off = off.unwrap_or(0);
                if off != 0 || data.len() != n {
                    data = data[off..off + n].to_vec();
                }
                let data: Vec<u16> = bytemuck::allocation::cast_vec(data);
                ArrayD::from_shape_vec(dim, data).expect("the same elements in the same shape")
            } else {
                a.mapv(|v| v.to_bits())
            };
            PyArray::from_owned_array(py, bits).into_any().unbind()
        }
        other => with_tensor!(other, a => PyArray::from_owned_array(py, a).into_any().unbind()),
    }
}

/// A Python scalar (`bool`, `int`, `float`, or a NumPy scalar) as an [`Arg`].
fn scalar_arg(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Arg> {
    let np_bool = v.py().import("numpy")?.getattr("bool_")?;
    if v.is_instance_of::<PyBool>() || v.is_instance(&np_bool)? {
        return Ok(Arg::Bool(v.is_truthy()?));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().map(Arg::Int).map_err(|_| {
            PyValueError::new_err(format!("{name}: the integer {v} does not fit in int64"))
        });
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Arg::Float(v.extract::<f64>()?));
    }
    // NumPy scalars: integers have __index__, floats convert with __float__.
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Arg::Int(i));
    }
    if let Ok(x) = v.extract::<f64>() {
        return Ok(Arg::Float(x));
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be a number (bool, int or float), got {}",
        v.get_type().name()?
    )))
}

/// True when `v` is a scalar rather than an array (for scatter's `src`/`value` overload).
fn is_scalar(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()
    {
        return Ok(true);
    }
    let np = v.py().import("numpy")?;
    v.is_instance(&np.getattr("generic")?)
}

/// An `int` argument (a dim, `k`, a size), refusing `bool`, which Python counts as an `int`, as
/// PyTorch does: a flag where a dim goes is arguments out of order (`topk(x, 2, True)`).
fn int_not_bool(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    if v.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err("must be int, not bool"));
    }
    v.extract()
}

/// [`int_not_bool`] for an argument that may be `None`.
fn opt_int_not_bool(v: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if v.is_none() {
        return Ok(None);
    }
    int_not_bool(v).map(Some)
}

fn opt_int(v: Option<i64>) -> Arg {
    v.map_or(Arg::None, Arg::Int)
}

// ---------------------------------------------------------------------------------------------
// The forward functions; their doc comments are the Python docstrings (run by tests/test_api.py).

/// gather(input, dim, index, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.gather: ``out[i][j] = input[index[i][j]][j]`` for dim 0 (``input[i][index[i][j]]`` for
/// dim 1); the output has the index's shape. ``index.ndim == input.ndim`` and
/// ``index.shape[d] <= input.shape[d]`` off ``dim``. Any dtype, any strides, no copy.
///
/// >>> x = np.array([[10, 20, 30], [40, 50, 60]])
/// >>> gather.gather(x, 1, np.array([[0, 2], [1, 0]]))
/// array([[10, 30],
///        [50, 40]])
/// >>> gather.gather(x, 0, np.array([[1, 0, 1]]))
/// array([[40, 20, 60]])
///
/// ``bounds=`` chooses what an index outside ``dim`` does (see :mod:`gather`): ``-1`` as padding
/// that reads ``fill_value``, say.
///
/// >>> gather.gather(x, 1, np.array([[2, -1], [0, -1]]), bounds="fill", fill_value=0)
/// array([[30,  0],
///        [40,  0]])
#[pyfunction]
#[pyo3(signature = (input, dim, index, *, bounds=None, fill_value=None, dtype=None))]
fn gather<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "gather", dtype)?.bounds(bounds, fill_value)?;
    c.data("input", input)?.plain("index", index)?;
    c.arg("dim", Arg::Int(dim)).output()
}

/// scatter(input, dim, index, src=None, *, value=None, reduce=None, bounds=None, fill_value=None, dtype=None)
///
/// torch.scatter (out of place): a copy of ``input`` with ``out[index[i][j]][j] = src[i][j]``
/// (dim 0). ``src`` may be an array or a scalar (``value=``); ``reduce="add"``/``"multiply"`` is
/// PyTorch's legacy form. With duplicate targets the last one in index order wins (PyTorch leaves
/// the winner unspecified; gather guarantees it, whatever the number of threads).
///
/// >>> x = np.zeros((2, 3))
/// >>> gather.scatter(x, 1, np.array([[2], [0]]), np.array([[1.0], [2.0]]))
/// array([[0., 0., 1.],
///        [2., 0., 0.]])
/// >>> gather.scatter(x, 1, np.array([[1]]), 7.0)
/// array([[0., 7., 0.],
///        [0., 0., 0.]])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src=None, *, value=None, reduce=None, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: Option<&Bound<'py, PyAny>>,
    value: Option<&Bound<'py, PyAny>>,
    reduce: Option<&str>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    scatter_call(py, input, dim, index, src, value, reduce, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// scatter_(input, dim, index, src=None, *, value=None, reduce=None, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`scatter`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.scatter_(x, 0, np.array([2, 0]), np.array([5.0, 6.0])) is x
/// True
/// >>> x
/// array([6., 0., 5.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src=None, *, value=None, reduce=None, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: Option<&Bound<'py, PyAny>>,
    value: Option<&Bound<'py, PyAny>>,
    reduce: Option<&str>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    scatter_call(py, input, dim, index, src, value, reduce, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `scatter` and `scatter_`.
#[allow(clippy::too_many_arguments)]
fn scatter_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    src: Option<&Bound<'py, PyAny>>,
    value: Option<&Bound<'py, PyAny>>,
    reduce: Option<&str>,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "scatter", dtype)?;
    c.data("input", input)?.plain("index", index)?;
    c.arg("dim", Arg::Int(dim));
    match (src, value) {
        (Some(s), None) if is_scalar(s)? => {
            c.arg("value", scalar_arg("value", s)?);
        }
        (Some(s), None) => {
            c.data("src", s)?;
        }
        (None, Some(v)) => {
            c.arg("value", scalar_arg("value", v)?);
        }
        (Some(_), Some(_)) => {
            return Err(PyTypeError::new_err(
                "scatter: give either src (an array) or value (a scalar), not both",
            ));
        }
        (None, None) => {
            return Err(PyTypeError::new_err(
                "scatter: missing src (an array) or value (a scalar)",
            ));
        }
    }
    if let Some(r) = reduce {
        c.arg("reduce", Arg::Str(r.to_string()));
    }
    Ok(c)
}

/// scatter_add(input, dim, index, src, *, deterministic=True, bounds=None, fill_value=None, dtype=None)
///
/// torch.scatter_add: ``out[index[i][j]][j] += src[i][j]`` (dim 0), on a copy of ``input``.
/// Deterministic: float sums run in index order (float16/bfloat16 accumulate in float32).
/// ``deterministic=False`` lets CUDA arrays (float32/64, 32/64-bit integers) be summed with
/// device atomics, PyTorch's default on CUDA: faster, but a float sum's rounding then changes
/// from run to run. Host arrays are always summed in index order.
///
/// >>> gather.scatter_add(np.zeros(3), 0, np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0]))
/// array([4., 0., 2.])
/// >>> gather.scatter_add(np.zeros(3), 0, np.array([0, 9, 0]), np.array([1.0, 2.0, 3.0]),
/// ...                    bounds="drop")
/// array([4., 0., 0.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src, *, deterministic=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter_add<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    deterministic: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    scatter_add_call(py, input, dim, index, src, deterministic, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// scatter_add_(input, dim, index, src, *, deterministic=True, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`scatter_add`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.scatter_add_(x, 0, np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0])) is x
/// True
/// >>> x
/// array([4., 0., 2.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src, *, deterministic=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter_add_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    deterministic: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    scatter_add_call(py, input, dim, index, src, deterministic, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `scatter_add` and `scatter_add_`.
fn scatter_add_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    deterministic: bool,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "scatter_add", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("src", src)?;
    c.arg("dim", Arg::Int(dim));
    if !deterministic {
        c.arg("deterministic", Arg::Bool(false));
    }
    Ok(c)
}

/// scatter_reduce(input, dim, index, src, reduce, *, include_self=True, deterministic=True, bounds=None, fill_value=None, dtype=None)
///
/// torch.scatter_reduce with ``reduce`` one of "sum", "prod", "mean", "amax", "amin" ("max"/"min"
/// are accepted too). ``include_self=False`` reduces the referenced positions over ``src`` only.
/// The fast ``np.add.at`` / ``np.maximum.at``, with mean, prod and include_self.
/// ``deterministic=False`` lets CUDA arrays be reduced with device atomics (as
/// :func:`scatter_add`); host arrays are always reduced in index order.
///
/// >>> x = np.array([1.0, 2.0, 3.0])
/// >>> gather.scatter_reduce(x, 0, np.array([0, 0, 2]), np.array([5.0, 4.0, 0.5]), "amax")
/// array([5., 2., 3.])
/// >>> gather.scatter_reduce(x, 0, np.array([0, 0, 2]), np.array([5.0, 4.0, 0.5]), "mean",
/// ...                       include_self=False)
/// array([4.5, 2. , 0.5])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src, reduce, *, include_self=true, deterministic=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter_reduce<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    reduce: &str,
    include_self: bool,
    deterministic: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let how = (reduce, include_self, deterministic);
    scatter_reduce_call(py, input, dim, index, src, how, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// scatter_reduce_(input, dim, index, src, reduce, *, include_self=True, deterministic=True, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`scatter_reduce`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.array([1.0, 2.0, 3.0])
/// >>> gather.scatter_reduce_(x, 0, np.array([0, 0]), np.array([5.0, 4.0]), "amax") is x
/// True
/// >>> x
/// array([5., 2., 3.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, src, reduce, *, include_self=true, deterministic=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn scatter_reduce_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    reduce: &str,
    include_self: bool,
    deterministic: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let how = (reduce, include_self, deterministic);
    scatter_reduce_call(py, input, dim, index, src, how, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `scatter_reduce` and `scatter_reduce_`.
#[allow(clippy::too_many_arguments)]
fn scatter_reduce_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    src: &Bound<'py, PyAny>,
    (reduce, include_self, deterministic): (&str, bool, bool),
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "scatter_reduce", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("src", src)?;
    c.arg("dim", Arg::Int(dim))
        .arg("reduce", Arg::Str(reduce.to_string()))
        .arg("include_self", Arg::Bool(include_self));
    if !deterministic {
        c.arg("deterministic", Arg::Bool(false));
    }
    Ok(c)
}

/// index_select(input, dim, index, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.index_select: the slices ``index[k]`` of ``input`` along ``dim`` (a 0-d or 1-d index).
///
/// >>> gather.index_select(np.array([[1, 2], [3, 4], [5, 6]]), 0, np.array([2, 0]))
/// array([[5, 6],
///        [1, 2]])
#[pyfunction]
#[pyo3(signature = (input, dim, index, *, bounds=None, fill_value=None, dtype=None))]
fn index_select<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "index_select", dtype)?.bounds(bounds, fill_value)?;
    c.data("input", input)?.plain("index", index)?;
    c.arg("dim", Arg::Int(dim)).output()
}

/// index_add(input, dim, index, source, *, alpha=1, bounds=None, fill_value=None, dtype=None)
///
/// torch.index_add: slice ``index[k]`` of a copy of ``input`` along ``dim`` gets
/// ``alpha * source[k]`` added.
///
/// >>> gather.index_add(np.zeros((3, 2)), 0, np.array([0, 0]), np.ones((2, 2)), alpha=2)
/// array([[4., 4.],
///        [0., 0.],
///        [0., 0.]])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, *, alpha=None, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_add<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    alpha: Option<&Bound<'py, PyAny>>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_add_call(py, input, dim, index, source, alpha, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// index_add_(input, dim, index, source, *, alpha=None, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`index_add`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.index_add_(x, 0, np.array([1, 1]), np.array([2.0, 3.0])) is x
/// True
/// >>> x
/// array([0., 5., 0.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, *, alpha=None, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_add_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    alpha: Option<&Bound<'py, PyAny>>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_add_call(py, input, dim, index, source, alpha, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `index_add` and `index_add_`.
fn index_add_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    alpha: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "index_add", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("source", source)?;
    c.arg("dim", Arg::Int(dim));
    if let Some(a) = alpha {
        c.arg("alpha", scalar_arg("alpha", a)?);
    }
    Ok(c)
}

/// index_copy(input, dim, index, source, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.index_copy: slice ``index[k]`` of a copy of ``input`` along ``dim`` becomes ``source[k]``.
///
/// >>> gather.index_copy(np.zeros((3, 2)), 0, np.array([2]), np.array([[7.0, 8.0]]))
/// array([[0., 0.],
///        [0., 0.],
///        [7., 8.]])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_copy<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_copy_call(py, input, dim, index, source, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// index_copy_(input, dim, index, source, *, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`index_copy`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.index_copy_(x, 0, np.array([2]), np.array([7.0])) is x
/// True
/// >>> x
/// array([0., 0., 7.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_copy_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_copy_call(py, input, dim, index, source, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `index_copy` and `index_copy_`.
fn index_copy_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "index_copy", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("source", source)?;
    c.arg("dim", Arg::Int(dim));
    Ok(c)
}

/// index_fill(input, dim, index, value, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.index_fill: the slices ``index[k]`` along ``dim`` of a copy of ``input`` are set to
/// ``value``; negative indices wrap.
///
/// >>> gather.index_fill(np.zeros((2, 3), np.int32), 1, np.array([-1]), 9)
/// array([[0, 0, 9],
///        [0, 0, 9]], dtype=int32)
#[pyfunction]
#[pyo3(signature = (input, dim, index, value, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_fill<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    value: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_fill_call(py, input, dim, index, value, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// index_fill_(input, dim, index, value, *, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`index_fill`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.index_fill_(x, 0, np.array([0, 2]), 9.0) is x
/// True
/// >>> x
/// array([9., 0., 9.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, value, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_fill_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    value: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_fill_call(py, input, dim, index, value, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `index_fill` and `index_fill_`.
fn index_fill_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    value: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "index_fill", dtype)?;
    c.data("input", input)?.plain("index", index)?;
    c.arg("dim", Arg::Int(dim))
        .arg("value", scalar_arg("value", value)?);
    Ok(c)
}

/// index_reduce(input, dim, index, source, reduce, *, include_self=True, bounds=None, fill_value=None, dtype=None)
///
/// torch.index_reduce with ``reduce`` one of "prod", "mean", "amax", "amin".
///
/// >>> gather.index_reduce(np.ones(3), 0, np.array([0, 0]), np.array([2.0, 5.0]), "prod")
/// array([10.,  1.,  1.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, reduce, *, include_self=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_reduce<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    reduce: &str,
    include_self: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_reduce_call(py, input, dim, index, source, reduce, include_self, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// index_reduce_(input, dim, index, source, reduce, *, include_self=True, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`index_reduce`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.ones(3)
/// >>> gather.index_reduce_(x, 0, np.array([0, 0]), np.array([2.0, 5.0]), "prod") is x
/// True
/// >>> x
/// array([10.,  1.,  1.])
#[pyfunction]
#[pyo3(signature = (input, dim, index, source, reduce, *, include_self=true, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn index_reduce_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    reduce: &str,
    include_self: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    index_reduce_call(py, input, dim, index, source, reduce, include_self, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `index_reduce` and `index_reduce_`.
#[allow(clippy::too_many_arguments)]
fn index_reduce_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    dim: i64,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    reduce: &str,
    include_self: bool,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "index_reduce", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("source", source)?;
    c.arg("dim", Arg::Int(dim))
        .arg("reduce", Arg::Str(reduce.to_string()))
        .arg("include_self", Arg::Bool(include_self));
    Ok(c)
}

/// take(input, index, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.take: ``input`` flattened in row-major order, read at ``index`` (negative indices wrap);
/// the output has the index's shape.
///
/// >>> gather.take(np.array([[1, 2], [3, 4]]), np.array([[3, -4]]))
/// array([[4, 1]])
#[pyfunction]
#[pyo3(signature = (input, index, *, bounds=None, fill_value=None, dtype=None))]
fn take<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "take", dtype)?.bounds(bounds, fill_value)?;
    c.data("input", input)?.plain("index", index)?;
    c.output()
}

/// take_along_dim(input, indices, dim=None, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.take_along_dim: like gather, broadcasting ``input`` and ``indices`` off ``dim`` (and
/// indices taken modulo the size); ``dim=None`` reads the flattened input.
///
/// >>> gather.take_along_dim(np.array([[1, 2, 3], [4, 5, 6]]), np.array([[2], [0]]), 1)
/// array([[3],
///        [4]])
#[pyfunction]
#[pyo3(signature = (input, indices, dim=None, *, bounds=None, fill_value=None, dtype=None))]
fn take_along_dim<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = opt_int_not_bool)] dim: Option<i64>,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "take_along_dim", dtype)?.bounds(bounds, fill_value)?;
    c.data("input", input)?.plain("index", indices)?;
    c.arg("dim", opt_int(dim)).output()
}

/// put(input, index, source, accumulate=False, *, bounds=None, fill_value=None, dtype=None)
///
/// torch.put (out of place): a copy of ``input`` with its row-major flattening written (or, with
/// ``accumulate=True``, added to) at ``index``; negative indices wrap.
///
/// >>> gather.put(np.zeros((2, 2)), np.array([0, -1, 0]), np.array([1.0, 2.0, 3.0]), True)
/// array([[4., 0.],
///        [0., 2.]])
#[pyfunction]
#[pyo3(signature = (input, index, source, accumulate=false, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn put<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    accumulate: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    put_call(py, input, index, source, accumulate, dtype)?
        .bounds(bounds, fill_value)?
        .output()
}

/// put_(input, index, source, accumulate=False, *, bounds=None, fill_value=None, dtype=None)
///
/// In-place :func:`put`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(3)
/// >>> gather.put_(x, np.array([-1]), np.array([4.0])) is x
/// True
/// >>> x
/// array([0., 0., 4.])
#[pyfunction]
#[pyo3(signature = (input, index, source, accumulate=false, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn put_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    accumulate: bool,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    put_call(py, input, index, source, accumulate, dtype)?
        .bounds(bounds, fill_value)?
        .into_input(input)
}

/// The call of `put` and `put_`.
fn put_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    index: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    accumulate: bool,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "put", dtype)?;
    c.data("input", input)?
        .plain("index", index)?
        .data("source", source)?;
    c.arg("accumulate", Arg::Bool(accumulate));
    Ok(c)
}

/// masked_select(input, mask, *, dtype=None)
///
/// torch.masked_select: the elements of ``input`` where the boolean ``mask`` is true (the two
/// broadcast together), as a 1-d array.
///
/// >>> gather.masked_select(np.array([[1, 2], [3, 4]]), np.array([True, False]))
/// array([1, 3])
#[pyfunction]
#[pyo3(signature = (input, mask, *, dtype=None))]
fn masked_select<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "masked_select", dtype)?;
    c.data("input", input)?.plain("mask", mask)?;
    c.output()
}

/// masked_scatter(input, mask, source, *, dtype=None)
///
/// torch.masked_scatter (out of place): where ``mask`` is true, the next element of ``source``
/// (read flattened, in order).
///
/// >>> gather.masked_scatter(np.zeros(4), np.array([False, True, False, True]), np.array([7.0, 8.0]))
/// array([0., 7., 0., 8.])
#[pyfunction]
#[pyo3(signature = (input, mask, source, *, dtype=None))]
fn masked_scatter<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    masked_scatter_call(py, input, mask, source, dtype)?.output()
}

/// masked_scatter_(input, mask, source, *, dtype=None)
///
/// In-place :func:`masked_scatter`: writes into ``input`` (a writable NumPy array, or a tensor that
/// shares its memory through DLPack) and returns it. On error ``input`` is unchanged.
///
/// >>> x = np.zeros(4)
/// >>> gather.masked_scatter_(x, np.array([False, True, False, True]), np.array([7.0, 8.0])) is x
/// True
/// >>> x
/// array([0., 7., 0., 8.])
#[pyfunction]
#[pyo3(signature = (input, mask, source, *, dtype=None))]
fn masked_scatter_<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    masked_scatter_call(py, input, mask, source, dtype)?.into_input(input)
}

/// The call of `masked_scatter` and `masked_scatter_`.
fn masked_scatter_call<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    mask: &Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Call<'py>> {
    let mut c = Call::new(py, "masked_scatter", dtype)?;
    c.data("input", input)?
        .plain("mask", mask)?
        .data("source", source)?;
    Ok(c)
}

/// sort(input, dim=-1, descending=False, *, stable=False, dtype=None)
///
/// torch.sort: ``(values, indices)``; NaN sorts as the largest value; always stable.
///
/// >>> gather.sort(np.array([3.0, np.nan, 1.0]))
/// (array([ 1.,  3., nan]), array([2, 0, 1]))
#[pyfunction]
#[pyo3(signature = (input, dim=-1, descending=false, *, stable=false, dtype=None))]
fn sort<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    descending: bool,
    stable: bool,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "sort", dtype)?;
    c.data("input", input)?;
    c.arg("dim", Arg::Int(dim))
        .arg("descending", Arg::Bool(descending))
        .arg("stable", Arg::Bool(stable))
        .pair()
}

/// argsort(input, dim=-1, descending=False, *, stable=False, dtype=None)
///
/// torch.argsort: the int64 indices that sort ``input`` along ``dim`` (stable).
///
/// >>> gather.argsort(np.array([[3, 1, 2]]), 1, descending=True)
/// array([[0, 2, 1]])
#[pyfunction]
#[pyo3(signature = (input, dim=-1, descending=false, *, stable=false, dtype=None))]
fn argsort<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    descending: bool,
    stable: bool,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "argsort", dtype)?;
    c.data("input", input)?;
    c.arg("dim", Arg::Int(dim))
        .arg("descending", Arg::Bool(descending))
        .arg("stable", Arg::Bool(stable))
        .output()
}

/// topk(input, k, dim=-1, largest=True, sorted=True, *, dtype=None)
///
/// torch.topk: ``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``.
///
/// >>> gather.topk(np.array([1.0, 5.0, 3.0, 4.0]), 2)
/// (array([5., 4.]), array([1, 3]))
#[pyfunction]
#[pyo3(signature = (input, k, dim=-1, largest=true, sorted=true, *, dtype=None))]
fn topk<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] k: i64,
    #[pyo3(from_py_with = int_not_bool)] dim: i64,
    largest: bool,
    sorted: bool,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "topk", dtype)?;
    c.data("input", input)?;
    c.arg("k", Arg::Int(k))
        .arg("dim", Arg::Int(dim))
        .arg("largest", Arg::Bool(largest))
        .arg("sorted", Arg::Bool(sorted))
        .pair()
}

/// repeat_interleave(input, repeats=None, dim=None, *, output_size=None, dtype=None)
///
/// torch.repeat_interleave: every element (or slice along ``dim``) repeated ``repeats`` times
/// (an int, or an array of counts). With a single argument, ``repeat_interleave(repeats)`` gives
/// ``[0]*r0 + [1]*r1 + ...``.
///
/// >>> gather.repeat_interleave(np.array([[1, 2], [3, 4]]), np.array([1, 2]), 0)
/// array([[1, 2],
///        [3, 4],
///        [3, 4]])
/// >>> gather.repeat_interleave(np.array([2, 0, 1]))
/// array([0, 0, 2])
#[pyfunction]
#[pyo3(signature = (input, repeats=None, dim=None, *, output_size=None, dtype=None))]
fn repeat_interleave<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    repeats: Option<&Bound<'py, PyAny>>,
    #[pyo3(from_py_with = opt_int_not_bool)] dim: Option<i64>,
    #[pyo3(from_py_with = opt_int_not_bool)] output_size: Option<i64>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "repeat_interleave", dtype)?;
    match repeats {
        // torch.repeat_interleave(repeats): the only argument is the repeats, whose framework
        // the result takes (torch in, torch out), as a data argument's.
        None => {
            c.like = framework(py, input)?;
            c.plain("repeats", input)?;
        }
        Some(r) if r.is_instance_of::<PyInt>() && !r.is_instance_of::<PyBool>() => {
            c.data("input", input)?;
            c.arg("repeats", Arg::Int(r.extract()?));
        }
        Some(r) => {
            c.data("input", input)?.plain("repeats", r)?;
        }
    }
    c.arg("dim", opt_int(dim))
        .arg("output_size", opt_int(output_size))
        .output()
}

/// select_batched(input, axis, index, batch_dims=0, *, bounds=None, fill_value=None, dtype=None)
///
/// One position per batch row: the output is ``input`` with ``axis`` replaced by the index's
/// trailing dims; the first ``batch_dims`` dims of ``index`` and ``input`` are the batch
/// (ROI labels, token logits, top-k patches; TensorFlow's ``gather(batch_dims=)``).
///
/// >>> logits = np.array([[[0.1, 0.9], [0.6, 0.4]]])
/// >>> gather.select_batched(logits, -1, np.array([[1, 0]]), 2)
/// array([[0.9, 0.6]])
#[pyfunction]
#[pyo3(signature = (input, axis, index, batch_dims=0, *, bounds=None, fill_value=None, dtype=None))]
#[allow(clippy::too_many_arguments)]
fn select_batched<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] axis: i64,
    index: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = int_not_bool)] batch_dims: i64,
    bounds: Option<&str>,
    fill_value: Option<&Bound<'py, PyAny>>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let mut c = Call::new(py, "select_batched", dtype)?.bounds(bounds, fill_value)?;
    c.data("input", input)?.plain("index", index)?;
    c.arg("dim", Arg::Int(axis))
        .arg("batch_dims", Arg::Int(batch_dims))
        .output()
}

// ---------------------------------------------------------------------------------------------
// Gradients (`gather.grad`): the vector-Jacobian products of crates/gather/src/grad, each taking
// the gradient of the output first, then the forward call's arguments.

mod grad_fns {
    use super::*;

    /// grad.gather(grad_output, <the arguments of gather.gather>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn gather<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "gather", dtype)?.bounds(bounds, fill_value)?;
        c.data("input", input)?.plain("index", index)?;
        c.arg("dim", Arg::Int(dim)).grads(grad_output, "correct")
    }

    /// grad.scatter(grad_output, <the arguments of gather.scatter>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, src=None, *, value=None, reduce=None, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn scatter<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        src: Option<&Bound<'py, PyAny>>,
        value: Option<&Bound<'py, PyAny>>,
        reduce: Option<&str>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        scatter_call(py, input, dim, index, src, value, reduce, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.scatter_add(grad_output, <the arguments of gather.scatter_add>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, src, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_add<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        src: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        scatter_add_call(py, input, dim, index, src, true, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.scatter_reduce(grad_output, <the arguments of gather.scatter_reduce>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, src, reduce, *, include_self=true, parity="correct", bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_reduce<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        src: &Bound<'py, PyAny>,
        reduce: &str,
        include_self: bool,
        parity: &str,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let how = (reduce, include_self, true);
        scatter_reduce_call(py, input, dim, index, src, how, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, parity)
    }

    /// grad.index_select(grad_output, <the arguments of gather.index_select>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn index_select<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "index_select", dtype)?.bounds(bounds, fill_value)?;
        c.data("input", input)?.plain("index", index)?;
        c.arg("dim", Arg::Int(dim)).grads(grad_output, "correct")
    }

    /// grad.index_add(grad_output, <the arguments of gather.index_add>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, source, *, alpha=None, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn index_add<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        source: &Bound<'py, PyAny>,
        alpha: Option<&Bound<'py, PyAny>>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        index_add_call(py, input, dim, index, source, alpha, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.index_copy(grad_output, <the arguments of gather.index_copy>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, source, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn index_copy<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        source: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        index_copy_call(py, input, dim, index, source, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.index_fill(grad_output, <the arguments of gather.index_fill>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, value, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn index_fill<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        index_fill_call(py, input, dim, index, value, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.index_reduce(grad_output, <the arguments of gather.index_reduce>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim, index, source, reduce, *, include_self=true, parity="correct", bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn index_reduce<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        index: &Bound<'py, PyAny>,
        source: &Bound<'py, PyAny>,
        reduce: &str,
        include_self: bool,
        parity: &str,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        index_reduce_call(py, input, dim, index, source, reduce, include_self, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, parity)
    }

    /// grad.take(grad_output, <the arguments of gather.take>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, index, *, bounds=None, fill_value=None, dtype=None))]
    pub fn take<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        index: &Bound<'py, PyAny>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "take", dtype)?.bounds(bounds, fill_value)?;
        c.data("input", input)?.plain("index", index)?;
        c.grads(grad_output, "correct")
    }

    /// grad.take_along_dim(grad_output, <the arguments of gather.take_along_dim>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, indices, dim=None, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn take_along_dim<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        indices: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = opt_int_not_bool)] dim: Option<i64>,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "take_along_dim", dtype)?.bounds(bounds, fill_value)?;
        c.data("input", input)?.plain("index", indices)?;
        c.arg("dim", opt_int(dim)).grads(grad_output, "correct")
    }

    /// grad.put(grad_output, <the arguments of gather.put>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, index, source, accumulate=false, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn put<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        index: &Bound<'py, PyAny>,
        source: &Bound<'py, PyAny>,
        accumulate: bool,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        put_call(py, input, index, source, accumulate, dtype)?
            .bounds(bounds, fill_value)?
            .grads(grad_output, "correct")
    }

    /// grad.masked_select(grad_output, <the arguments of gather.masked_select>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, mask, *, dtype=None))]
    pub fn masked_select<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        mask: &Bound<'py, PyAny>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "masked_select", dtype)?;
        c.data("input", input)?.plain("mask", mask)?;
        c.grads(grad_output, "correct")
    }

    /// grad.masked_scatter(grad_output, <the arguments of gather.masked_scatter>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, mask, source, *, dtype=None))]
    pub fn masked_scatter<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        mask: &Bound<'py, PyAny>,
        source: &Bound<'py, PyAny>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        masked_scatter_call(py, input, mask, source, dtype)?.grads(grad_output, "correct")
    }

    /// grad.sort(grad_output, <the arguments of gather.sort>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, dim=-1, descending=false, *, stable=false, dtype=None))]
    pub fn sort<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        descending: bool,
        stable: bool,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "sort", dtype)?;
        c.data("input", input)?;
        c.arg("dim", Arg::Int(dim))
            .arg("descending", Arg::Bool(descending))
            .arg("stable", Arg::Bool(stable))
            .grads(grad_output, "correct")
    }

    /// grad.topk(grad_output, <the arguments of gather.topk>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, k, dim=-1, largest=true, sorted=true, *, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn topk<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] k: i64,
        #[pyo3(from_py_with = int_not_bool)] dim: i64,
        largest: bool,
        sorted: bool,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "topk", dtype)?;
        c.data("input", input)?;
        c.arg("k", Arg::Int(k))
            .arg("dim", Arg::Int(dim))
            .arg("largest", Arg::Bool(largest))
            .arg("sorted", Arg::Bool(sorted))
            .grads(grad_output, "correct")
    }

    /// grad.repeat_interleave(grad_output, <the arguments of gather.repeat_interleave>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, repeats, dim=None, *, output_size=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn repeat_interleave<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        repeats: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = opt_int_not_bool)] dim: Option<i64>,
        #[pyo3(from_py_with = opt_int_not_bool)] output_size: Option<i64>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "repeat_interleave", dtype)?;
        c.data("input", input)?;
        if repeats.is_instance_of::<PyInt>() && !repeats.is_instance_of::<PyBool>() {
            c.arg("repeats", Arg::Int(repeats.extract()?));
        } else {
            c.plain("repeats", repeats)?;
        }
        c.arg("dim", opt_int(dim))
            .arg("output_size", opt_int(output_size))
            .grads(grad_output, "correct")
    }

    /// grad.select_batched(grad_output, <the arguments of gather.select_batched>): the gradient of every differentiable input
    /// (one array, or a tuple (grad_input, grad_src/grad_source)); see gather.grad.
    #[pyfunction]
    #[pyo3(signature = (grad_output, input, axis, index, batch_dims=0, *, bounds=None, fill_value=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn select_batched<'py>(
        py: Python<'py>,
        grad_output: &Bound<'py, PyAny>,
        input: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] axis: i64,
        index: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = int_not_bool)] batch_dims: i64,
        bounds: Option<&str>,
        fill_value: Option<&Bound<'py, PyAny>>,
        dtype: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let mut c = Call::new(py, "select_batched", dtype)?.bounds(bounds, fill_value)?;
        c.data("input", input)?.plain("index", index)?;
        c.arg("dim", Arg::Int(axis))
            .arg("batch_dims", Arg::Int(batch_dims))
            .grads(grad_output, "correct")
    }
}

/// The native module `gather._native`; the `gather` package re-exports it.
/// The names `_call` accepts for its arrays (`Call` keeps names as static strings).
const ARRAY_NAMES: &[&str] = &[
    "input", "src", "source", "index", "mask", "repeats", "offsets", "ids", "lengths", "weights",
];

/// _call(op, data, plain, args, *, dtype=None)
///
/// Any op of the library by name, as the ``gather`` command runs it: ``data`` and ``plain`` map
/// argument names to the data arrays and to the index-like arrays, ``args`` the other arguments.
/// Returns a tuple of the outputs. For the pure-Python modules (``gather.torch_scatter``).
#[pyfunction]
#[pyo3(signature = (op, data, plain, args, *, dtype=None))]
fn _call<'py>(
    py: Python<'py>,
    op: &str,
    data: &Bound<'py, PyDict>,
    plain: &Bound<'py, PyDict>,
    args: &Bound<'py, PyDict>,
    dtype: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let op = dynamic::OPS
        .iter()
        .map(|(n, _)| *n)
        .find(|n| *n == op)
        .ok_or_else(|| PyValueError::new_err(format!("_call: unknown op {op:?}")))?;
    let name = |k: &Bound<'py, PyAny>| -> PyResult<&'static str> {
        let k: String = k.extract()?;
        ARRAY_NAMES
            .iter()
            .copied()
            .find(|n| *n == k)
            .ok_or_else(|| PyValueError::new_err(format!("_call: unknown array argument {k:?}")))
    };
    let mut c = Call::new(py, op, dtype)?;
    for (k, v) in data.iter() {
        c.data(name(&k)?, &v)?;
    }
    for (k, v) in plain.iter() {
        c.plain(name(&k)?, &v)?;
    }
    c.args = py_args(args)?;
    c.pair()
}

/// `parity=` of a gradient (`"correct"`, `"pytorch"`), or the message that refuses it.
fn parse_parity(op: &str, parity: &str) -> Result<Parity, String> {
    match parity {
        "correct" => Ok(Parity::Correct),
        "pytorch" => Ok(Parity::PyTorch),
        other => Err(format!(
            "{op}: parity must be \"correct\" or \"pytorch\", got {other:?}"
        )),
    }
}

/// A dict of non-array arguments as the library's: None, strings, numbers.
fn py_args(args: &Bound<'_, PyDict>) -> PyResult<Args> {
    let mut out = Args::default();
    for (k, v) in args.iter() {
        let k: String = k.extract()?;
        let arg = if v.is_none() {
            Arg::None
        } else if let Ok(s) = v.extract::<String>() {
            Arg::Str(s)
        } else {
            scalar_arg(&k, &v)?
        };
        out.set(&k, arg);
    }
    Ok(out)
}

/// _xla_handler(platform)
///
/// The XLA FFI handler of every op on ``platform`` (``"cpu"`` or ``"cuda"``) as a capsule, for
/// ``jax.ffi.register_ffi_target`` (see ``gather._jax_ops``).
#[pyfunction]
fn _xla_handler<'py>(
    py: Python<'py>,
    platform: &str,
) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
    xla::capsule(py, platform)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<cuda::CudaArray>()?;
    m.add_class::<plan::ScatterPlan>()?;
    m.add_function(wrap_pyfunction!(hints::_respell, m)?)?;
    m.add_function(wrap_pyfunction!(crate::gather, m)?)?;
    m.add_function(wrap_pyfunction!(scatter, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_add, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(index_select, m)?)?;
    m.add_function(wrap_pyfunction!(index_add, m)?)?;
    m.add_function(wrap_pyfunction!(index_copy, m)?)?;
    m.add_function(wrap_pyfunction!(index_fill, m)?)?;
    m.add_function(wrap_pyfunction!(index_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(take, m)?)?;
    m.add_function(wrap_pyfunction!(take_along_dim, m)?)?;
    m.add_function(wrap_pyfunction!(put, m)?)?;
    m.add_function(wrap_pyfunction!(masked_select, m)?)?;
    m.add_function(wrap_pyfunction!(masked_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(sort, m)?)?;
    m.add_function(wrap_pyfunction!(argsort, m)?)?;
    m.add_function(wrap_pyfunction!(topk, m)?)?;
    m.add_function(wrap_pyfunction!(repeat_interleave, m)?)?;
    m.add_function(wrap_pyfunction!(select_batched, m)?)?;
    m.add_function(wrap_pyfunction!(_call, m)?)?;
    m.add_function(wrap_pyfunction!(_xla_handler, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_batched, m)?)?;
    m.add_function(wrap_pyfunction!(xla::_batched_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_add_, m)?)?;
    m.add_function(wrap_pyfunction!(scatter_reduce_, m)?)?;
    m.add_function(wrap_pyfunction!(index_add_, m)?)?;
    m.add_function(wrap_pyfunction!(index_copy_, m)?)?;
    m.add_function(wrap_pyfunction!(index_fill_, m)?)?;
    m.add_function(wrap_pyfunction!(index_reduce_, m)?)?;
    m.add_function(wrap_pyfunction!(put_, m)?)?;
    m.add_function(wrap_pyfunction!(masked_scatter_, m)?)?;

    let g = PyModule::new(m.py(), "grad")?;
    g.add_function(wrap_pyfunction!(grad_fns::gather, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::scatter, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::scatter_add, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::scatter_reduce, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::index_select, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::index_add, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::index_copy, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::index_fill, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::index_reduce, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::take, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::take_along_dim, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::put, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::masked_select, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::masked_scatter, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::sort, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::topk, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::repeat_interleave, &g)?)?;
    g.add_function(wrap_pyfunction!(grad_fns::select_batched, &g)?)?;
    m.add_submodule(&g)?;
    Ok(())
}

/// The bytes an array's elements occupy, to tell whether two arrays (or one array's own
/// elements) can share memory without walking them: the bindings see arrays whose memory
/// NumPy's borrow checker cannot relate (each `tensor.numpy()` has a base of its own).
struct Span {
    /// The lowest byte and one past the highest.
    lo: usize,
    hi: usize,
    /// The first element's address, and the gcd of the byte strides of the axes longer than 1
    /// (0: one element): every element starts at `first` plus a multiple of `gcd`.
    first: usize,
    gcd: usize,
    item: usize,
    /// Whether two of its elements may share a byte (a sufficient test: the axes sorted by
    /// stride, each steps past everything the shorter ones reach).
    overlaps_itself: bool,
}

impl Span {
    /// `None` for an array without elements, which shares nothing. `strides` count elements.
    fn of<T>(ptr: *const T, shape: &[usize], strides: &[isize]) -> Option<Span> {
        let item = std::mem::size_of::<T>().max(1);
        let bytes: Vec<isize> = strides.iter().map(|&s| s * item as isize).collect();
        Span::of_bytes(ptr as usize, shape, &bytes, item)
    }

    /// [`Span::of`] with `strides` in bytes, as NumPy gives them.
    fn of_bytes(first: usize, shape: &[usize], strides: &[isize], item: usize) -> Option<Span> {
        if shape.contains(&0) {
            return None;
        }
        let item = item.max(1);
        let (mut below, mut above, mut gcd) = (0usize, 0usize, 0usize);
        let mut axes = Vec::with_capacity(shape.len());
        for (&n, &s) in shape.iter().zip(strides) {
            if n > 1 {
                let reach = s.unsigned_abs() * (n - 1);
                if s < 0 {
                    below += reach
                } else {
                    above += reach
                }
                gcd = gcd_of(gcd, s.unsigned_abs());
                axes.push((s.unsigned_abs(), n));
            }
        }
        axes.sort_unstable();
        let mut reach = 0usize;
        let mut overlaps_itself = false;
        for (s, n) in axes {
            if s < reach + item {
                overlaps_itself = true;
                break;
            }
            reach += s * (n - 1);
        }
        Some(Span {
            lo: first - below,
            hi: first + above + item,
            first,
            gcd,
            item,
            overlaps_itself,
        })
    }

    /// Whether an element of `self` may share a byte with one of `other`: their ranges meet,
    /// and element starts `k * gcd` apart can come within an item of each other.
    fn meets(&self, other: &Span) -> bool {
        if self.hi <= other.lo || other.hi <= self.lo {
            return false;
        }
        let g = gcd_of(self.gcd, other.gcd) as i128;
        if g == 0 {
            return true;
        }
        let diff = self.first as i128 - other.first as i128;
        // Starts `diff + k * g` apart overlap when that lies in (-self.item, other.item).
        (-(self.item as i128 - 1)..other.item as i128).any(|t| (t - diff).rem_euclid(g) == 0)
    }
}

fn gcd_of(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd_of(b, a % b) }
}
