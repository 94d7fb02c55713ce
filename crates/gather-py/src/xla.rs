//! The ops as an XLA FFI handler, which `jax.jit` calls in its compiled program (`jax.ffi`).
//!
//! A traced JAX array has no memory to hand over; under `jax.jit`, `jax.grad` or `jax.vmap` an
//! op is a custom call, and XLA calls [`handle_cpu`] or [`handle_cuda`] with its buffers: in
//! host memory on the CPU, in device memory with XLA's stream on a GPU. So the ops run on the
//! arrays where they are, without a Python callback and without a copy to the host.
//!
//! The structs mirror XLA's C ABI (`xla/ffi/api/c_api.h`, API version 0.3; `jax.ffi.include_dir()`
//! has the header). One handler serves every op: its attributes name the op (`_op`), the
//! library's name of each operand (`_inputs`) and result (`_outputs`), the kind of call
//! (`_mode`: `call`; `inplace` into the first result, which aliases `input`; `grad`; `plan`, a
//! `ScatterPlan` found by its key `_plan`), the unbatched ranks (`_ranks`, `_out_ranks`: under
//! `jax.vmap` the buffers have batch axes in front, and the op runs once per element), and the
//! op's own arguments under their library names. An index result of JAX's int32 (no
//! `jax_enable_x64`) is declared as int32 pairs, one more axis of 2, that the library fills with
//! int64 values: JAX keeps the low words, so no device kernel converts them.
//!
//! `torch.func.vmap` runs the same host code on NumPy arrays ([`_batched`]).

use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;

use ::gather as lib;
use ::gather::DType;
use ::gather::Reduce;
use ::gather::dynamic::{self, Arg, Args, Tensor, TensorView, TensorViewMut, TensorViews};
use ::gather::grad::Parity;
use ::gather::with_tensor;
use gather_cuda::{Cuda, CudaTensor};
use std::sync::Arc;

use crate::hints::{Dialect, respell};
use crate::plan::{Plan, host_apply, plan_of};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

#[repr(C)]
struct ExtensionBase {
    struct_size: usize,
    kind: i32,
    next: *mut ExtensionBase,
}

const EXTENSION_METADATA: i32 = 1;

#[repr(C)]
struct ApiVersion {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    major: i32,
    minor: i32,
}

#[repr(C)]
struct Buffer {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    dtype: i32,
    data: *mut c_void,
    rank: i64,
    dims: *const i64,
}

#[repr(C)]
struct ByteSpan {
    ptr: *const u8,
    len: usize,
}

#[repr(C)]
struct Scalar {
    dtype: i32,
    value: *const c_void,
}

/// `XLA_FFI_Args` and `XLA_FFI_Rets`, which have the same layout.
#[repr(C)]
struct Operands {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    size: i64,
    types: *const i32,
    items: *const *mut c_void,
}

#[repr(C)]
struct Attrs {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    size: i64,
    types: *const i32,
    names: *const *const ByteSpan,
    attrs: *const *const c_void,
}

#[repr(C)]
struct CallFrame {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    api: *const Api,
    ctx: *mut c_void,
    stage: i32,
    args: Operands,
    rets: Operands,
    attrs: Attrs,
    future: *mut c_void,
}

/// `XLA_FFI_CallFrame_STRUCT_SIZE`: up to and including `attrs`.
const CALL_FRAME_SIZE: usize = std::mem::offset_of!(CallFrame, future);

#[repr(C)]
struct Metadata {
    struct_size: usize,
    api_version: ApiVersion,
    traits: u32,
    state_type_id: i64,
}

#[repr(C)]
struct MetadataExtension {
    base: ExtensionBase,
    metadata: *mut Metadata,
}

#[repr(C)]
struct ErrorCreateArgs {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    message: *const c_char,
    errc: i32,
}

/// `XLA_FFI_Stream_Get_Args` and `XLA_FFI_DeviceOrdinal_Get_Args`: the context and one output.
#[repr(C)]
struct ContextQuery<T> {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    ctx: *mut c_void,
    out: T,
}

type Fn = Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

#[repr(C)]
struct Api {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    api_version: ApiVersion,
    internal_api: *const c_void,
    error_create: Option<unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut c_void>,
    error_get_message: Fn,
    error_destroy: Fn,
    handler_register: Fn,
    stream_get: Fn,
    type_register: Fn,
    execution_context_get: Fn,
    state_set: Fn,
    state_get: Fn,
    device_memory_allocate: Fn,
    device_memory_free: Fn,
    thread_pool_schedule: Fn,
    thread_pool_num_threads: Fn,
    future_create: Fn,
    future_set_available: Fn,
    future_set_error: Fn,
    run_id_get: Fn,
    device_ordinal_get: Fn,
}

const STAGE_EXECUTE: i32 = 3;
const ERROR_INVALID_ARGUMENT: i32 = 3;
const ERROR_OUT_OF_RANGE: i32 = 11;
const ERROR_INTERNAL: i32 = 13;

/// A failed call: XLA's error code and the message JAX raises.
struct Failure {
    code: i32,
    message: String,
    /// The library's error, for a Python caller's exception class and fields.
    error: Option<Box<lib::Error>>,
    /// The batch element of a vmapped call it came from.
    element: Option<Vec<usize>>,
}

impl Failure {
    fn new(code: i32, message: String) -> Self {
        Failure {
            code,
            message,
            error: None,
            element: None,
        }
    }

    /// The message, and the batch element where there is one.
    fn text(&self) -> String {
        match &self.element {
            Some(e) => format!("{}\n(in vmap's batch element {e:?})", self.message),
            None => self.message.clone(),
        }
    }
}

impl From<lib::Error> for Failure {
    fn from(e: lib::Error) -> Self {
        let code = match e.kind() {
            lib::ErrorKind::IndexOutOfBounds => ERROR_OUT_OF_RANGE,
            _ => ERROR_INVALID_ARGUMENT,
        };
        // JAX raises the message: the hint is written as JAX's calls.
        let message = match e.hint() {
            Some(h) => format!("{}\nhint: {}", e.message(), respell(h, Dialect::Jax)),
            None => e.message().to_string(),
        };
        Failure {
            error: Some(Box::new(e.clone())),
            ..Failure::new(code, message)
        }
    }
}

impl From<gather_cuda::Error> for Failure {
    fn from(e: gather_cuda::Error) -> Self {
        Failure::from(lib::Error::from(e))
    }
}

fn invalid(message: String) -> Failure {
    Failure::new(ERROR_INVALID_ARGUMENT, message)
}

/// XLA's dtype codes (`XLA_FFI_DataType`) of the library's dtypes.
fn dtype_of(code: i32) -> Option<DType> {
    Some(match code {
        1 => DType::Bool,
        2 => DType::I8,
        3 => DType::I16,
        4 => DType::I32,
        5 => DType::I64,
        6 => DType::U8,
        7 => DType::U16,
        8 => DType::U32,
        9 => DType::U64,
        10 => DType::F16,
        11 => DType::F32,
        12 => DType::F64,
        16 => DType::BF16,
        _ => return None,
    })
}

/// One operand or result: its dtype (XLA's code), address and row-major shape.
struct Raw {
    code: i32,
    data: *mut c_void,
    shape: Vec<usize>,
}

impl Raw {
    fn dtype(&self, what: &str) -> Result<DType, Failure> {
        dtype_of(self.code).ok_or_else(|| {
            invalid(format!(
                "{what} has XLA dtype code {}, which gather does not support",
                self.code
            ))
        })
    }

    /// Element `coord` of the leading `batch.len()` axes (each of its size in `batch`, or 1 where
    /// the operand is the same for every element): the buffer of one call of a vmapped op.
    fn element(&self, coord: &[usize]) -> Result<Raw, Failure> {
        let lead = coord.len();
        let inner: usize = self.shape[lead..].iter().product();
        let mut block = 0;
        for (d, &c) in coord.iter().enumerate() {
            block = block * self.shape[d] + if self.shape[d] == 1 { 0 } else { c };
        }
        let size = self.dtype("a batched buffer")?.size_of();
        Ok(Raw {
            code: self.code,
            data: self
                .data
                .cast::<u8>()
                .wrapping_add(block * inner * size)
                .cast(),
            shape: self.shape[lead..].to_vec(),
        })
    }

    /// The address as a valid pointer for a slice or view: XLA may give null for no elements.
    fn ptr<T>(&self) -> *mut T {
        if self.data.is_null() {
            NonNull::<T>::dangling().as_ptr()
        } else {
            self.data.cast()
        }
    }
}

/// What the attributes say.
struct Request {
    op: String,
    mode: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// The rank of each operand and result in an unbatched call (`_ranks`, `_out_ranks`):
    /// under `jax.vmap` the buffers have leading batch axes beyond them.
    ranks: Vec<usize>,
    out_ranks: Vec<usize>,
    args: Args,
}

/// The call frame's contents, read once.
struct Frame {
    api: *const Api,
    ctx: *mut c_void,
    args: Vec<Raw>,
    rets: Vec<Raw>,
    request: Request,
}

/// Reads one buffer operand.
///
/// # Safety
/// `kind` and `item` come from a call frame that XLA built for this call.
unsafe fn raw(kind: i32, item: *mut c_void, what: &str) -> Result<Raw, Failure> {
    if kind != 1 || item.is_null() {
        return Err(invalid(format!("{what} is not a buffer")));
    }
    // SAFETY: XLA passes an `XLA_FFI_Buffer` for an operand of type BUFFER; `dims` has `rank`
    // entries (and may be null for rank 0).
    let b = unsafe { &*(item as *const Buffer) };
    let shape = if b.rank == 0 {
        Vec::new()
    } else {
        // SAFETY: see above.
        unsafe { std::slice::from_raw_parts(b.dims, b.rank as usize) }
            .iter()
            .map(|&d| d as usize)
            .collect()
    };
    Ok(Raw {
        code: b.dtype,
        data: b.data,
        shape,
    })
}

/// # Safety
/// `ops` is a call frame's `args` or `rets`.
unsafe fn operands(ops: &Operands, what: &str) -> Result<Vec<Raw>, Failure> {
    (0..ops.size.max(0) as usize)
        .map(|i| {
            // SAFETY: `types` and `items` have `size` entries.
            unsafe { raw(*ops.types.add(i), *ops.items.add(i), &format!("{what} {i}")) }
        })
        .collect()
}

/// # Safety
/// `span` points to an `XLA_FFI_ByteSpan` of the call frame.
unsafe fn text(span: *const ByteSpan) -> String {
    // SAFETY: XLA's byte spans point to `len` bytes that live as long as the call.
    let s = unsafe { &*span };
    let bytes = unsafe { std::slice::from_raw_parts(s.ptr, s.len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The attributes as a request: the reserved names, and every other one as an argument of the
/// op (booleans, integers, floats, strings).
///
/// # Safety
/// `attrs` is a call frame's `attrs`.
unsafe fn request(attrs: &Attrs) -> Result<Request, Failure> {
    let mut r = Request {
        op: String::new(),
        mode: "call".into(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        ranks: Vec::new(),
        out_ranks: Vec::new(),
        args: Args::default(),
    };
    for i in 0..attrs.size.max(0) as usize {
        // SAFETY: `types`, `names` and `attrs` have `size` entries; a SCALAR is an
        // `XLA_FFI_Scalar` whose value has its dtype, a STRING an `XLA_FFI_ByteSpan`.
        let (kind, name, attr) = unsafe {
            (
                *attrs.types.add(i),
                text(*attrs.names.add(i)),
                *attrs.attrs.add(i),
            )
        };
        let value = match kind {
            4 => Arg::Str(unsafe { text(attr as *const ByteSpan) }),
            3 => {
                let s = unsafe { &*(attr as *const Scalar) };
                match s.dtype {
                    1 => Arg::Bool(unsafe { *(s.value as *const u8) } != 0),
                    4 => Arg::Int(unsafe { *(s.value as *const i32) } as i64),
                    5 => Arg::Int(unsafe { *(s.value as *const i64) }),
                    11 => Arg::Float(unsafe { *(s.value as *const f32) } as f64),
                    12 => Arg::Float(unsafe { *(s.value as *const f64) }),
                    d => return Err(invalid(format!("attribute {name}: scalar dtype code {d}"))),
                }
            }
            k => return Err(invalid(format!("attribute {name}: attribute kind {k}"))),
        };
        let list = |v: &Arg| match v {
            Arg::Str(s) if !s.is_empty() => s.split(',').map(str::to_string).collect(),
            _ => Vec::new(),
        };
        match name.as_str() {
            "_op" => r.op = list(&value).concat(),
            "_mode" => r.mode = list(&value).concat(),
            "_inputs" => r.inputs = list(&value),
            "_outputs" => r.outputs = list(&value),
            "_ranks" => r.ranks = numbers(&name, list(&value))?,
            "_out_ranks" => r.out_ranks = numbers(&name, list(&value))?,
            _ => r.args.set(&name, value),
        }
    }
    Ok(r)
}

fn numbers(name: &str, items: Vec<String>) -> Result<Vec<usize>, Failure> {
    items
        .iter()
        .map(|v| {
            v.parse()
                .map_err(|_| invalid(format!("attribute {name}: {v:?} is not a rank")))
        })
        .collect()
}

/// Reads the call frame, or answers XLA's metadata query (`Ok(None)`).
///
/// # Safety
/// `frame` is the call frame XLA passed to the handler.
unsafe fn enter(frame: *mut CallFrame) -> Result<Option<Frame>, Failure> {
    // SAFETY: XLA passes a valid call frame, whose struct_size says how much of it there is.
    let f = unsafe { &*frame };
    if f.struct_size < CALL_FRAME_SIZE {
        return Err(invalid(format!(
            "XLA's call frame has {} bytes, gather's handler reads {CALL_FRAME_SIZE}",
            f.struct_size
        )));
    }
    if !f.extension_start.is_null() {
        // SAFETY: an extension chain starts with an `XLA_FFI_Extension_Base`.
        let ext = unsafe { &*f.extension_start };
        if ext.kind == EXTENSION_METADATA {
            // SAFETY: an extension of type Metadata is an `XLA_FFI_Metadata_Extension`.
            let m = unsafe { &mut *(*(f.extension_start as *mut MetadataExtension)).metadata };
            m.api_version = ApiVersion {
                struct_size: std::mem::size_of::<ApiVersion>(),
                extension_start: std::ptr::null_mut(),
                major: 0,
                minor: 3,
            };
            m.traits = 0; // not for command buffers: a call waits for its error flag
            return Ok(None);
        }
    }
    if f.stage != STAGE_EXECUTE {
        return Err(invalid(format!(
            "gather's handler runs at the execute stage, called at stage {}",
            f.stage
        )));
    }
    // SAFETY: the frame's operand and attribute lists are XLA's for this call.
    let (args, rets, request) = unsafe {
        (
            operands(&f.args, "operand")?,
            operands(&f.rets, "result")?,
            request(&f.attrs)?,
        )
    };
    if request.inputs.len() != args.len() || request.outputs.len() != rets.len() {
        return Err(invalid(format!(
            "{}: {} operands and {} results, but the attributes name {} and {}",
            request.op,
            args.len(),
            rets.len(),
            request.inputs.len(),
            request.outputs.len()
        )));
    }
    Ok(Some(Frame {
        api: f.api,
        ctx: f.ctx,
        args,
        rets,
        request,
    }))
}

/// `failure` as an XLA error (null when XLA's API has no way to make one).
///
/// # Safety
/// `api` is the call frame's API.
unsafe fn error(api: *const Api, failure: Failure) -> *mut c_void {
    let (errc, message) = (failure.code, failure.text());
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let mut args = ErrorCreateArgs {
        struct_size: std::mem::size_of::<ErrorCreateArgs>(),
        extension_start: std::ptr::null_mut(),
        message: message.as_ptr(),
        errc,
    };
    // SAFETY: XLA's API table outlives the call; Error_Create copies the message.
    match unsafe { api.as_ref().and_then(|a| a.error_create) } {
        Some(create) => unsafe { create(&mut args) },
        None => std::ptr::null_mut(),
    }
}

/// Runs `body` on the frame, turning its failure or panic into XLA's error.
///
/// # Safety
/// `frame` is the call frame XLA passed to the handler.
unsafe fn handle(
    frame: *mut CallFrame,
    body: impl FnOnce(&Frame) -> Result<(), Failure>,
) -> *mut c_void {
    // SAFETY: the caller's frame; `api` is read before anything else can fail.
    let api = unsafe { (*frame).api };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: see above.
        match unsafe { enter(frame) }? {
            Some(f) => body(&f),
            None => Ok(()),
        }
    }));
    let failure = match result {
        Ok(Ok(())) => return std::ptr::null_mut(),
        Ok(Err(f)) => f,
        Err(_) => Failure::new(
            ERROR_INTERNAL,
            "internal error (a panic in gather's XLA handler); this is a bug in gather, please \
             report it with the call's shapes and dtypes"
                .into(),
        ),
    };
    // SAFETY: the frame's API.
    unsafe { error(api, failure) }
}

/// The XLA FFI handler of the ops on the CPU.
///
/// # Safety
/// Called by XLA with a call frame of its FFI ABI.
unsafe extern "C" fn handle_cpu(frame: *mut c_void) -> *mut c_void {
    // SAFETY: XLA's call frame.
    unsafe { handle(frame.cast(), run_cpu) }
}

/// The XLA FFI handler of the ops on an NVIDIA GPU, in XLA's stream order.
///
/// # Safety
/// Called by XLA with a call frame of its FFI ABI.
unsafe extern "C" fn handle_cuda(frame: *mut c_void) -> *mut c_void {
    // SAFETY: XLA's call frame.
    unsafe { handle(frame.cast(), run_cuda) }
}

macro_rules! view_of {
    ($kind:ident, $view:ident, $raw:expr, $dtype:expr) => {{
        let r = $raw;
        let shape = IxDyn(&r.shape);
        // SAFETY: XLA's buffer holds len() row-major elements of this dtype for the whole call,
        // and no other view of it is alive while this one is.
        unsafe {
            match $dtype {
                DType::Bool => $kind::Bool($view::from_shape_ptr(shape, r.ptr())),
                DType::U8 => $kind::U8($view::from_shape_ptr(shape, r.ptr())),
                DType::I8 => $kind::I8($view::from_shape_ptr(shape, r.ptr())),
                DType::I16 => $kind::I16($view::from_shape_ptr(shape, r.ptr())),
                DType::I32 => $kind::I32($view::from_shape_ptr(shape, r.ptr())),
                DType::I64 => $kind::I64($view::from_shape_ptr(shape, r.ptr())),
                DType::U16 => $kind::U16($view::from_shape_ptr(shape, r.ptr())),
                DType::U32 => $kind::U32($view::from_shape_ptr(shape, r.ptr())),
                DType::U64 => $kind::U64($view::from_shape_ptr(shape, r.ptr())),
                DType::F16 => $kind::F16($view::from_shape_ptr(shape, r.ptr())),
                DType::BF16 => $kind::BF16($view::from_shape_ptr(shape, r.ptr())),
                DType::F32 => $kind::F32($view::from_shape_ptr(shape, r.ptr())),
                DType::F64 => $kind::F64($view::from_shape_ptr(shape, r.ptr())),
                other => return Err(invalid(format!("gather has no XLA buffers of {other}"))),
            }
        }
    }};
}

/// Checks that a result of the library (`dtype`, `shape`) fits XLA's `ret`: of its dtype and
/// shape, or int32 pairs for an int64 index (one more axis of 2).
fn target(op: &str, name: &str, ret: &Raw, dtype: DType, shape: &[usize]) -> Result<(), Failure> {
    let same = ret.dtype(name).ok() == Some(dtype) && ret.shape == shape;
    let pairs = dtype == DType::I64
        && ret.code == 4
        && ret.shape.len() == shape.len() + 1
        && ret.shape[..shape.len()] == *shape
        && ret.shape[shape.len()] == 2;
    if same || pairs {
        return Ok(());
    }
    Err(invalid(format!(
        "{op}: `{name}` is {dtype} {shape:?}, but XLA's result {name} is dtype code {} {:?}",
        ret.code, ret.shape
    )))
}

/// Copies `t` into `ret` (see [`target`]) as bytes, so that one loop serves every dtype: one
/// copy for a row-major `t`, else element by element in row-major order.
fn write(op: &str, name: &str, t: &Tensor, ret: &Raw) -> Result<(), Failure> {
    target(op, name, ret, t.dtype(), t.shape())?;
    let size = t.dtype().size_of();
    let (src, strides, row_major): (*const u8, Vec<isize>, bool) = with_tensor!(t, a => (
        a.as_ptr().cast(),
        a.strides().to_vec(),
        a.is_standard_layout()
    ));
    let (shape, dst) = (t.shape(), ret.ptr::<u8>());
    if t.is_empty() {
        return Ok(());
    }
    if row_major {
        // SAFETY: `t`'s elements are the `t.len()` in a row from `src`; `ret` holds as many.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, t.len() * size) };
        return Ok(());
    }
    let mut coord = vec![0usize; shape.len()];
    for n in 0..t.len() {
        let offset: isize = coord
            .iter()
            .zip(&strides)
            .map(|(&c, &s)| c as isize * s)
            .sum();
        // SAFETY: `offset` is an element of `t` (its coordinates are within its shape), and
        // element `n` of `ret` is within its `t.len()` elements (checked by `target`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.offset(offset * size as isize),
                dst.add(n * size),
                size,
            )
        };
        for d in (0..shape.len()).rev() {
            coord[d] += 1;
            if coord[d] < shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(())
}

fn parity(op: &str, args: &Args) -> Result<Parity, Failure> {
    match args.get("parity") {
        None | Some(Arg::None) => Ok(Parity::Correct),
        Some(Arg::Str(s)) => crate::parse_parity(op, s).map_err(invalid),
        Some(other) => Err(invalid(format!(
            "{op}: parity must be \"correct\" or \"pytorch\", got {other:?}"
        ))),
    }
}

/// The leading batch axes of a call under `jax.vmap` (empty for an unbatched call), checked
/// against every buffer: each has them, of their sizes or of size 1.
fn batch_axes(r: &Request, args: &[Raw], rets: &[Raw]) -> Result<Vec<usize>, Failure> {
    let (Some(&out_rank), Some(ret)) = (r.out_ranks.first(), rets.first()) else {
        return Ok(Vec::new());
    };
    let lead = ret.shape.len().saturating_sub(out_rank);
    let batch = ret.shape[..lead].to_vec();
    let fits = |raw: &Raw, rank: Option<&usize>, broadcast: bool| {
        rank.is_some_and(|&k| raw.shape.len() == k + lead)
            && (0..lead).all(|d| raw.shape[d] == batch[d] || (broadcast && raw.shape[d] == 1))
    };
    let ok = args
        .iter()
        .enumerate()
        .all(|(i, a)| fits(a, r.ranks.get(i), true))
        && rets
            .iter()
            .enumerate()
            .all(|(i, a)| fits(a, r.out_ranks.get(i), false));
    if !ok {
        return Err(invalid(format!(
            "{}: buffers of shapes {:?} -> {:?} do not share {lead} leading batch axes over ranks {:?} -> {:?}",
            r.op,
            args.iter().map(|a| &a.shape).collect::<Vec<_>>(),
            rets.iter().map(|a| &a.shape).collect::<Vec<_>>(),
            r.ranks,
            r.out_ranks
        )));
    }
    Ok(batch)
}

/// Runs `body` once per element of the batch axes (once for an unbatched call), on that
/// element's buffers; an error names the element.
fn each_element(
    r: &Request,
    args: &[Raw],
    rets: &[Raw],
    mut body: impl FnMut(&[Raw], &[Raw]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let batch = batch_axes(r, args, rets)?;
    if batch.is_empty() {
        return body(args, rets);
    }
    let mut coord = vec![0; batch.len()];
    for b in 0..batch.iter().product::<usize>() {
        let mut rest = b;
        for d in (0..batch.len()).rev() {
            coord[d] = rest % batch[d];
            rest /= batch[d];
        }
        let a: Vec<Raw> = args
            .iter()
            .map(|x| x.element(&coord))
            .collect::<Result<_, _>>()?;
        let o: Vec<Raw> = rets
            .iter()
            .map(|x| x.element(&coord))
            .collect::<Result<_, _>>()?;
        body(&a, &o).map_err(|f| Failure {
            element: Some(coord.clone()),
            ..f
        })?;
    }
    Ok(())
}

/// The op on host buffers.
fn run_cpu(f: &Frame) -> Result<(), Failure> {
    each_element(&f.request, &f.args, &f.rets, |args, rets| {
        run_host(&f.request, args, rets)
    })
}

/// One call on host buffers.
fn run_host(r: &Request, args: &[Raw], rets: &[Raw]) -> Result<(), Failure> {
    let mut views = TensorViews::new();
    for (name, raw) in r.inputs.iter().zip(args) {
        // In place, the first result aliases `input`: it is only read through the target.
        if r.mode == "inplace" && name == "input" {
            continue;
        }
        views.insert(
            name.clone(),
            view_of!(TensorView, ArrayViewD, raw, raw.dtype(name)?),
        );
    }
    let outputs = match r.mode.as_str() {
        "inplace" => {
            let ret = &rets[0];
            let target = view_of!(TensorViewMut, ArrayViewMutD, ret, ret.dtype("input")?);
            return Ok(dynamic::call_inplace(&r.op, &r.args, target, &views)?);
        }
        "grad" => {
            let g = views
                .remove("grad_output")
                .ok_or_else(|| invalid(format!("grad::{}: no grad_output operand", r.op)))?;
            let p = parity(&r.op, &r.args)?;
            dynamic::call_grad_with(&r.op, &r.args, &views, &g, p)?
        }
        "plan" => {
            let (op, plan, reduce) = plan_call(r)?;
            let Plan::Host(plan) = &*plan else {
                return Err(plan_elsewhere(op, &plan, "dst and src are in host memory"));
            };
            let (dst, src) = (operand(&views, op, "dst")?, operand(&views, op, "src")?);
            vec![("output".into(), host_apply(plan, op, dst, src, reduce)?)]
        }
        _ => dynamic::call(&r.op, &r.args, &views)?,
    };
    for (name, ret) in r.outputs.iter().zip(rets) {
        let t = outputs
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| invalid(format!("{}: gives no output `{name}`", r.op)))?;
        write(&r.op, name, &t.1, ret)?;
    }
    Ok(())
}

type PlanCall = (&'static str, Arc<Plan>, Option<(Reduce, bool)>);

/// A plan's call (`_mode` `plan`): the op's name for messages, the plan of the `_plan` key, and
/// the reduction (`None`: `scatter_add`).
fn plan_call(r: &Request) -> Result<PlanCall, Failure> {
    let (op, reduce) = match r.op.as_str() {
        "scatter_add" => ("ScatterPlan::scatter_add", None),
        "scatter_reduce" => {
            let reduce: Reduce = r.args.str("reduce")?.parse()?;
            let include_self = r.args.bool_or("include_self", true)?;
            ("ScatterPlan::scatter_reduce", Some((reduce, include_self)))
        }
        other => return Err(invalid(format!("a plan has no call {other:?}"))),
    };
    let key = r.args.int("_plan")?;
    let plan = plan_of(key as u64).ok_or_else(|| {
        invalid(format!(
            "{op}: the plan this program was compiled with no longer exists\nhint: keep the \
             ScatterPlan alive as long as the jitted function that uses it"
        ))
    })?;
    Ok((op, plan, reduce))
}

fn plan_elsewhere(op: &str, plan: &Plan, what: &str) -> Failure {
    let (on, hint) = match plan {
        Plan::Host(_) => ("cpu", "build the plan from the index on that GPU"),
        Plan::Gpu(p) => (
            &*format!("cuda:{}", p.device().ordinal()),
            "build the plan from a host index for host arrays, or from the index on the arrays' GPU",
        ),
    };
    invalid(format!(
        "{op}: the plan is on {on} but {what}\nhint: {hint}"
    ))
}

/// The operand `name` of a call.
fn operand<'m, T>(
    map: &'m std::collections::BTreeMap<String, T>,
    op: &str,
    name: &str,
) -> Result<&'m T, Failure> {
    map.get(name)
        .ok_or_else(|| invalid(format!("{op}: no `{name}` operand")))
}

/// Asks XLA's context for something through one of its API's getters.
///
/// # Safety
/// `f` is the frame of the running call; `get` one of its API's context getters.
unsafe fn query<T: Copy>(f: &Frame, get: Fn, what: &str, zero: T) -> Result<T, Failure> {
    let get = get.ok_or_else(|| invalid(format!("XLA's FFI API has no {what} getter")))?;
    let mut q = ContextQuery {
        struct_size: std::mem::size_of::<ContextQuery<T>>(),
        extension_start: std::ptr::null_mut(),
        ctx: f.ctx,
        out: zero,
    };
    // SAFETY: the getter fills `out` from the call's context; it returns an XLA error or null.
    let err = unsafe { get((&mut q as *mut ContextQuery<T>).cast()) };
    if !err.is_null() {
        return Err(invalid(format!("XLA could not give the call's {what}")));
    }
    Ok(q.out)
}

/// The op on device buffers: after the work XLA queued before it, and before the work XLA
/// queues after it.
fn run_cuda(f: &Frame) -> Result<(), Failure> {
    // SAFETY: `f.api` is XLA's table for this call, read up to the size it reports.
    let api = unsafe { &*f.api };
    let has_ordinal = api.struct_size >= std::mem::size_of::<Api>();
    // SAFETY: the getters of XLA's API for this call's context.
    let stream = unsafe { query(f, api.stream_get, "stream", std::ptr::null_mut::<c_void>())? };
    let ordinal = if has_ordinal {
        unsafe { query(f, api.device_ordinal_get, "device ordinal", 0i32)? }
    } else {
        0
    };
    let gpu = Cuda::new(ordinal.max(0) as usize)?;
    // SAFETY: XLA's stream of this call, on this device.
    unsafe { gpu.wait_for(stream as u64)? };
    let r = &f.request;
    let result = each_element(r, &f.args, &f.rets, |args, rets| {
        run_device(r, &gpu, ordinal, args, rets)
    });
    // Ordered whether the call failed or not: XLA may reuse the operands' memory after it.
    // SAFETY: XLA's stream of this call, on this device.
    unsafe { gpu.order_before(stream as u64)? };
    result
}

/// One call on device buffers, queued on our stream.
fn run_device(
    r: &Request,
    gpu: &Cuda,
    ordinal: i32,
    args: &[Raw],
    rets: &[Raw],
) -> Result<(), Failure> {
    let wrap = |raw: &Raw, dtype: DType, shape: &[usize]| -> Result<CudaTensor, Failure> {
        let mut strides = vec![1isize; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1].max(1) as isize;
        }
        // SAFETY: XLA's buffer holds these row-major elements on this device until its stream
        // passes this call, which waits for ours (run_cuda).
        let t = unsafe {
            CudaTensor::from_device_ptr(gpu, raw.data as u64, shape, &strides, dtype, Box::new(()))
        };
        Ok(t?)
    };
    let mut inputs = gather_cuda::dynamic::CudaTensors::new();
    for (name, raw) in r.inputs.iter().zip(args) {
        if !(r.mode == "inplace" && name == "input") {
            inputs.insert(name.clone(), wrap(raw, raw.dtype(name)?, &raw.shape)?);
        }
    }
    let outputs = match r.mode.as_str() {
        "inplace" => {
            let ret = &rets[0];
            let target = wrap(ret, ret.dtype("input")?, &ret.shape)?;
            return Ok(gather_cuda::dynamic::call_inplace(
                &r.op, &r.args, &target, &inputs,
            )?);
        }
        "grad" => {
            let g = inputs
                .remove("grad_output")
                .ok_or_else(|| invalid(format!("grad::{}: no grad_output operand", r.op)))?;
            let p = parity(&r.op, &r.args)?;
            gather_cuda::dynamic::call_grad_with(&r.op, &r.args, &inputs, &g, p)?
        }
        "plan" => {
            let (op, plan, reduce) = plan_call(r)?;
            let on = format!("dst and src are on cuda:{ordinal}");
            let plan = match &*plan {
                Plan::Gpu(p) if p.device().ordinal() == gpu.ordinal() => p,
                _ => return Err(plan_elsewhere(op, &plan, &on)),
            };
            let (dst, src) = (operand(&inputs, op, "dst")?, operand(&inputs, op, "src")?);
            let out = match reduce {
                None => plan.scatter_add(dst, src)?,
                Some((reduce, include_self)) => {
                    plan.scatter_reduce(dst, src, reduce, include_self)?
                }
            };
            vec![("output".into(), out)]
        }
        _ => gather_cuda::dynamic::call(&r.op, &r.args, &inputs)?,
    };
    for (name, ret) in r.outputs.iter().zip(rets) {
        let t = outputs
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| invalid(format!("{}: gives no output `{name}`", r.op)))?;
        target(&r.op, name, ret, t.1.dtype(), t.1.shape())?;
        wrap(ret, t.1.dtype(), t.1.shape())?.assign(&t.1)?;
    }
    Ok(())
}

/// XLA's dtype code (`XLA_FFI_DataType`) of a NumPy array's dtype, by kind and size.
fn numpy_code(a: &Bound<'_, PyUntypedArray>) -> Option<i32> {
    let d = a.dtype();
    Some(match (d.kind(), d.itemsize()) {
        (b'b', 1) => 1,
        (b'i', 1) => 2,
        (b'i', 2) => 3,
        (b'i', 4) => 4,
        (b'i', 8) => 5,
        (b'u', 1) => 6,
        (b'u', 2) => 7,
        (b'u', 4) => 8,
        (b'u', 8) => 9,
        (b'f', 2) => 10,
        (b'f', 4) => 11,
        (b'f', 8) => 12,
        _ => return None,
    })
}

/// Buffers a batched call runs on without the GIL.
struct HostBuffers(Vec<Raw>, Vec<Raw>);

// SAFETY: the buffers (NumPy arrays, or GPU memory for `_batched_cuda`) are kept alive, and
// untouched, by the caller until the call returns; they are only read (and the results written)
// by the call.
unsafe impl Send for HostBuffers {}

/// _batched(op, mode, inputs, outputs, args, ranks, out_ranks)
///
/// The op run once per element of the leading batch axes of C-contiguous NumPy arrays, as the
/// XLA handler runs a vmapped call (``inputs`` and ``outputs`` are ``(library name, array)``
/// pairs; an input's batch axes may have size 1, shared by every element; ``mode`` is
/// ``"call"``, ``"inplace"`` (into ``outputs[0]``, which is also the input named ``input``) or
/// ``"grad"``). For ``torch.func.vmap`` (``gather._autograd``).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _batched(
    py: Python<'_>,
    op: String,
    mode: String,
    inputs: Vec<(String, Bound<'_, PyUntypedArray>)>,
    outputs: Vec<(String, Bound<'_, PyUntypedArray>)>,
    args: &Bound<'_, PyDict>,
    ranks: Vec<usize>,
    out_ranks: Vec<usize>,
) -> PyResult<()> {
    let raw = |name: &str, a: &Bound<'_, PyUntypedArray>, write: bool| -> PyResult<Raw> {
        let code = numpy_code(a).ok_or_else(|| {
            PyTypeError::new_err(format!("_batched: `{name}` has dtype {}", a.dtype()))
        })?;
        // SAFETY: a NumPy array object; its flags and data pointer are read, not changed.
        let fields = unsafe { &(*a.as_array_ptr()).fields };
        let (flags, data) = (fields.flags, fields.data);
        let (contiguous, aligned, writeable) = (0x1, 0x100, 0x400); // NPY_ARRAY_C_CONTIGUOUS, ALIGNED, WRITEABLE
        if flags & contiguous == 0 || flags & aligned == 0 || (write && flags & writeable == 0) {
            return Err(PyValueError::new_err(format!(
                "_batched: `{name}` must be a C-contiguous, aligned{} array",
                if write { ", writeable" } else { "" }
            )));
        }
        Ok(Raw {
            code,
            data: data.cast(),
            shape: a.shape().to_vec(),
        })
    };
    let request = Request {
        op,
        mode,
        inputs: inputs.iter().map(|(n, _)| n.clone()).collect(),
        outputs: outputs.iter().map(|(n, _)| n.clone()).collect(),
        ranks,
        out_ranks,
        args: crate::py_args(args)?,
    };
    let buffers = HostBuffers(
        inputs
            .iter()
            .map(|(n, a)| raw(n, a, false))
            .collect::<PyResult<_>>()?,
        outputs
            .iter()
            .map(|(n, a)| raw(n, a, true))
            .collect::<PyResult<_>>()?,
    );
    let r = &request;
    let result = py.detach(move || {
        let buffers = buffers;
        catch_unwind(AssertUnwindSafe(|| {
            each_element(r, &buffers.0, &buffers.1, |a, o| run_host(r, a, o))
        }))
    });
    batched_result(py, r, result)
}

/// _batched_cuda(op, mode, inputs, outputs, args, ranks, out_ranks, ordinal, stream)
///
/// `_batched` on GPU memory: ``inputs`` and ``outputs`` are ``(library name, device pointer,
/// shape, XLA dtype code)`` of row-major buffers on GPU ``ordinal``, which the caller keeps
/// alive; the calls are queued in the order of CUDA ``stream`` (torch's current stream): ours
/// waits for it, and it waits for ours after them. For ``torch.func.vmap`` on CUDA tensors.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _batched_cuda(
    py: Python<'_>,
    op: String,
    mode: String,
    inputs: Vec<(String, u64, Vec<usize>, i32)>,
    outputs: Vec<(String, u64, Vec<usize>, i32)>,
    args: &Bound<'_, PyDict>,
    ranks: Vec<usize>,
    out_ranks: Vec<usize>,
    ordinal: usize,
    stream: u64,
) -> PyResult<()> {
    let raw = |(name, ptr, shape, code): &(String, u64, Vec<usize>, i32)| -> PyResult<Raw> {
        dtype_of(*code).ok_or_else(|| {
            PyTypeError::new_err(format!("_batched_cuda: `{name}` has dtype code {code}"))
        })?;
        Ok(Raw {
            code: *code,
            data: *ptr as *mut c_void,
            shape: shape.clone(),
        })
    };
    let request = Request {
        op,
        mode,
        inputs: inputs.iter().map(|i| i.0.clone()).collect(),
        outputs: outputs.iter().map(|o| o.0.clone()).collect(),
        ranks,
        out_ranks,
        args: crate::py_args(args)?,
    };
    let buffers = HostBuffers(
        inputs.iter().map(raw).collect::<PyResult<_>>()?,
        outputs.iter().map(raw).collect::<PyResult<_>>()?,
    );
    let r = &request;
    let result = py.detach(move || {
        let buffers = buffers;
        catch_unwind(AssertUnwindSafe(|| -> Result<(), Failure> {
            let gpu = Cuda::new(ordinal)?;
            // SAFETY: the caller's stream on this device (torch's current stream).
            unsafe { gpu.wait_for(stream)? };
            let result = each_element(r, &buffers.0, &buffers.1, |a, o| {
                run_device(r, &gpu, ordinal as i32, a, o)
            });
            // Ordered whether the calls failed or not: the caller's allocator may reuse the
            // buffers' memory after its stream passes this point.
            // SAFETY: the caller's stream on this device.
            unsafe { gpu.order_before(stream)? };
            result
        }))
    });
    batched_result(py, r, result)
}

/// A batched call's outcome as Python sees it: the library's exception with a note naming the
/// batch element, or a panic's internal error.
fn batched_result(
    py: Python<'_>,
    r: &Request,
    result: std::thread::Result<Result<(), Failure>>,
) -> PyResult<()> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(f)) => {
            let err = match &f.error {
                // torch.func.vmap's calls: the arrays are torch tensors.
                Some(e) => crate::to_pyerr(py, e, Dialect::Torch),
                None => PyValueError::new_err(f.message.clone()),
            };
            if let Some(e) = &f.element {
                let note = format!("in vmap's batch element {e:?}");
                let _ = err.value(py).call_method1("add_note", (note,));
            }
            Err(err)
        }
        Err(_) => Err(PyRuntimeError::new_err(format!(
            "{}: internal error (a panic in the library); this is a bug in gather, please report \
             it with the call's shapes and dtypes",
            r.op
        ))),
    }
}

/// The handler of `platform` (`"cpu"` or `"cuda"`) in a capsule, as
/// `jax.ffi.register_ffi_target` takes it.
pub(crate) fn capsule<'py>(py: Python<'py>, platform: &str) -> PyResult<Bound<'py, PyCapsule>> {
    let f: unsafe extern "C" fn(*mut c_void) -> *mut c_void = match platform {
        "cpu" => handle_cpu,
        "cuda" => handle_cuda,
        other => {
            return Err(PyValueError::new_err(format!(
                "no XLA handler for platform {other:?} (gather has \"cpu\" and \"cuda\")"
            )));
        }
    };
    let ptr = NonNull::new(f as *mut c_void).expect("a function's address is not null");
    // SAFETY: the capsule holds the address of a function that lives as long as the module.
    unsafe { PyCapsule::new_with_pointer(py, ptr, c"gather.xla_handler") }
}
