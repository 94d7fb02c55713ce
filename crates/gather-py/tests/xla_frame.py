"""A stand-in for XLA that calls the extension's FFI handlers (``gather._native._xla_handler``)
the way XLA's runtime does: a call frame of XLA's C ABI (``xla/ffi/api/c_api.h``, version 0.3)
with buffers, attributes and an API table whose error, stream and device getters it records.

``jax.jit`` drives the CPU handler in tests/test_jax.py; this drives both handlers without JAX,
the CUDA one on the emulator (tests/test_cuda_emu.py), where device memory is host memory."""

import ctypes as C

import numpy as np

from gather import _native


class Span(C.Structure):
    _fields_ = [("ptr", C.c_char_p), ("len", C.c_size_t)]


class Buffer(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("dtype", C.c_int32),
                ("data", C.c_void_p), ("rank", C.c_int64), ("dims", C.POINTER(C.c_int64))]


class Scalar(C.Structure):
    _fields_ = [("dtype", C.c_int32), ("value", C.c_void_p)]


class Operands(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int32)), ("items", C.POINTER(C.c_void_p))]


class Attrs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("size", C.c_int64),
                ("types", C.POINTER(C.c_int32)), ("names", C.POINTER(C.POINTER(Span))),
                ("attrs", C.POINTER(C.c_void_p))]


class ApiVersion(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("major", C.c_int),
                ("minor", C.c_int)]


Call = C.CFUNCTYPE(C.c_void_p, C.c_void_p)

_API_FUNCTIONS = ["error_create", "error_get_message", "error_destroy", "handler_register",
                  "stream_get", "type_register", "execution_context_get", "state_set",
                  "state_get", "device_memory_allocate", "device_memory_free",
                  "thread_pool_schedule", "thread_pool_num_threads", "future_create",
                  "future_set_available", "future_set_error", "run_id_get", "device_ordinal_get"]


class Api(C.Structure):
    _fields_ = ([("struct_size", C.c_size_t), ("ext", C.c_void_p), ("api_version", ApiVersion),
                 ("internal", C.c_void_p)] + [(n, Call) for n in _API_FUNCTIONS])


class CallFrame(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("api", C.POINTER(Api)),
                ("ctx", C.c_void_p), ("stage", C.c_int32), ("args", Operands), ("rets", Operands),
                ("attrs", Attrs), ("future", C.c_void_p)]


class ErrorCreateArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("message", C.c_char_p),
                ("errc", C.c_int32)]


class StreamGetArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("ctx", C.c_void_p),
                ("stream", C.c_void_p)]


class OrdinalGetArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("ext", C.c_void_p), ("ctx", C.c_void_p),
                ("ordinal", C.c_int32)]


class Metadata(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("api_version", ApiVersion), ("traits", C.c_uint32),
                ("state_type_id", C.c_int64)]


class MetadataExtension(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("type", C.c_int32), ("next", C.c_void_p),
                ("metadata", C.POINTER(Metadata))]


# XLA_FFI_DataType codes.
CODES = {np.dtype(np.bool_): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
         np.dtype(np.int64): 5, np.dtype(np.uint8): 6, np.dtype(np.uint16): 7,
         np.dtype(np.uint32): 8, np.dtype(np.uint64): 9, np.dtype(np.float16): 10,
         np.dtype(np.float32): 11, np.dtype(np.float64): 12, np.dtype(np.complex64): 15}
OUT_OF_RANGE, INVALID_ARGUMENT, INTERNAL = 11, 3, 13

_capsule = C.pythonapi
_capsule.PyCapsule_GetPointer.restype = C.c_void_p
_capsule.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
_capsule.PyCapsule_GetName.restype = C.c_char_p
_capsule.PyCapsule_GetName.argtypes = [C.py_object]


class Xla:
    """Calls the handler of ``platform`` as XLA would; records the errors it creates and the
    getters it asks (``stream_gets``, ``ordinal_gets``)."""

    def __init__(self, platform, stream=0, ordinal=0):
        capsule = _native._xla_handler(platform)
        self.handler = Call(_capsule.PyCapsule_GetPointer(capsule, _capsule.PyCapsule_GetName(capsule)))
        self.errors, self.stream_gets, self.ordinal_gets = [], 0, 0

        def create(p):
            a = ErrorCreateArgs.from_address(p)
            self.errors.append((a.errc, a.message.decode()))
            return len(self.errors)  # the error's address, as far as the handler knows

        def stream_get(p):
            StreamGetArgs.from_address(p).stream = stream
            self.stream_gets += 1
            return None

        def ordinal_get(p):
            OrdinalGetArgs.from_address(p).ordinal = ordinal
            self.ordinal_gets += 1
            return None

        self._functions = {"error_create": Call(create), "stream_get": Call(stream_get),
                           "device_ordinal_get": Call(ordinal_get)}
        self.api = Api(struct_size=C.sizeof(Api))
        self.api.api_version = ApiVersion(C.sizeof(ApiVersion), None, 0, 3)
        for name, f in self._functions.items():
            setattr(self.api, name, f)

    def frame(self, operands, results, attrs, stage=3):
        """A call frame over NumPy arrays (their memory is the buffers') and ``attrs`` (str, bool,
        int, float values); the objects it points into are kept on the frame."""
        keep = []

        def buffers(arrays):
            items = []
            for a in arrays:
                dims = (C.c_int64 * max(a.ndim, 1))(*a.shape)
                b = Buffer(C.sizeof(Buffer), None, CODES[a.dtype], a.ctypes.data if a.size else None,
                           a.ndim, dims)
                keep.extend([dims, b])
                items.append(C.addressof(b))
            n = len(items)
            types, ptrs = (C.c_int32 * max(n, 1))(*[1] * n), (C.c_void_p * max(n, 1))(*items)
            keep.extend([types, ptrs])
            return Operands(C.sizeof(Operands), None, n, types, ptrs)

        names, kinds, values = [], [], []
        for k, v in sorted(attrs.items()):
            key = k.encode()
            span = Span(key, len(key))
            keep.extend([key, span])
            names.append(C.pointer(span))
            if isinstance(v, str):
                text = v.encode()
                value = Span(text, len(text))
                keep.append(text)
                kinds.append(4)
            else:
                code, ctype = ((1, C.c_uint8) if isinstance(v, bool) else (5, C.c_int64)
                               if isinstance(v, int) else (12, C.c_double))
                cell = ctype(v)
                keep.append(cell)
                value = Scalar(code, C.cast(C.pointer(cell), C.c_void_p))
                kinds.append(3)
            keep.append(value)
            values.append(C.addressof(value))
        n = len(names)
        attrs = Attrs(C.sizeof(Attrs), None, n, (C.c_int32 * max(n, 1))(*kinds),
                      (C.POINTER(Span) * max(n, 1))(*names), (C.c_void_p * max(n, 1))(*values))
        frame = CallFrame(C.sizeof(CallFrame), None, C.pointer(self.api), None, stage,
                          buffers(operands), buffers(results), attrs, None)
        frame._keep = (keep, attrs)
        return frame

    def __call__(self, operands, results, stage=3, **attrs):
        """Runs the handler; returns None, or the (code, message) of the error it returned."""
        frame = self.frame(operands, results, attrs, stage)
        err = self.handler(C.addressof(frame))
        return None if not err else self.errors[err - 1]

    def metadata(self):
        """Asks the handler for its metadata, as XLA does when it registers a handler."""
        meta = Metadata(C.sizeof(Metadata))
        ext = MetadataExtension(C.sizeof(MetadataExtension), 1, None, C.pointer(meta))
        frame = self.frame([], [], {})
        frame.ext = C.addressof(ext)
        err = self.handler(C.addressof(frame))
        return (None if not err else self.errors[err - 1]), meta
