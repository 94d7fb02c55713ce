"""The CUDA-array path (DLPack import, the ops on the GPU, errors, in-place writes, export) on the
CPU emulator of the CUDA driver (crates/gather-cuda/emu), where device memory is host memory.

The producer here is a NumPy array whose DLPack export says it lives on GPU 0: its capsule is
NumPy's with the device type changed, so the kernels read and write the array's own buffer.
Results come back as `gather.CudaArray` (the producer is no framework gather knows) and are read
through their own DLPack export. Runs where GATHER_CUDA_EMU=1 and the emulator's libcuda.so is
on the library path (.ci/run); tests/test_cuda.py covers the frameworks on a real GPU."""

import ctypes
import inspect
import os
import sys

import numpy as np
import pytest

import gather

pytestmark = pytest.mark.skipif(
    os.environ.get("GATHER_CUDA_EMU") != "1",
    reason="needs the CUDA emulator (GATHER_CUDA_EMU=1, its libcuda.so on LD_LIBRARY_PATH)")

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

KDL_CPU, KDL_CUDA = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


def _managed(capsule):
    name = _api.PyCapsule_GetName(capsule)
    kind = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    return kind.from_address(_api.PyCapsule_GetPointer(capsule, name))


class EmuCudaArray:
    """A NumPy array presented as a CUDA array of GPU 0; records the streams it was asked for."""

    def __init__(self, a):
        self.a = a
        self.streams = []

    def __dlpack_device__(self):
        return (KDL_CUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        capsule = self.a.__dlpack__(max_version=max_version)
        _managed(capsule).dl_tensor.device.device_type = KDL_CUDA
        return capsule


DTYPES = {(2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64, (0, 8): np.int8,
          (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8,
          (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64, (6, 8): np.bool_,
          (4, 16): np.uint16}  # bfloat16, read as its bits


def host(r):
    """A copy, in a NumPy array, of a `gather.CudaArray` result (read through its DLPack export,
    which the emulator keeps in host memory)."""
    assert isinstance(r, gather.CudaArray), type(r)
    capsule = r.__dlpack__()
    m = _managed(capsule)
    t = m.dl_tensor
    assert (t.device.device_type, t.device.device_id) == (KDL_CUDA, 0)
    dtype = np.dtype(DTYPES[(t.dtype.code, t.dtype.bits)])
    shape = [t.shape[i] for i in range(t.ndim)]
    if t.strides:
        strides = [t.strides[i] for i in range(t.ndim)]
    else:
        strides = list(np.cumprod([1] + shape[:0:-1])[::-1]) if shape else []
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    base = np.frombuffer((ctypes.c_char * (span * dtype.itemsize)).from_address(
        t.data + t.byte_offset), dtype=dtype) if span else np.zeros(0, dtype)
    out = np.lib.stride_tricks.as_strided(
        base, shape, [s * dtype.itemsize for s in strides]).copy() if span else np.zeros(shape, dtype)
    m.deleter(ctypes.addressof(m))
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return out


def dev(a):
    return EmuCudaArray(np.asarray(a))


class LegacyCudaArray(EmuCudaArray):
    """A producer that answers every request with a legacy (unversioned) capsule, as JAX does."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        capsule = self.a.__dlpack__()
        _managed(capsule).dl_tensor.device.device_type = KDL_CUDA
        return capsule


class CopyingCudaArray(EmuCudaArray):
    """A producer whose versioned export says it is a copy (DLPack's IS_COPIED flag)."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = super().__dlpack__(stream=stream, max_version=max_version)
        _managed(capsule).flags |= 2
        return capsule


def test_the_ops_run_on_the_gpu_and_equal_the_numpy_results():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 33)).astype(np.float32)
    idx = rng.integers(0, 33, (64, 7))
    gx, gi = dev(x), dev(idx)
    out = gather.gather(gx, 1, gi)
    np.testing.assert_array_equal(host(out), gather.gather(x, 1, idx))
    # Our stream went to the producer, so that its pending writes come first.
    assert gx.streams and all(isinstance(s, int) and s != 0 for s in gx.streams), gx.streams
    src = rng.standard_normal((64, 7)).astype(np.float32)
    got = gather.scatter_add(dev(np.zeros((64, 33), np.float32)), 1, gi, dev(src))
    np.testing.assert_array_equal(host(got), gather.scatter_add(np.zeros((64, 33), np.float32), 1, idx, src))
    got = gather.scatter_reduce(gx, 1, gi, dev(src), "amax", include_self=False)
    np.testing.assert_array_equal(host(got), gather.scatter_reduce(x, 1, idx, src, "amax", include_self=False))
    values, indices = gather.sort(gx, 1)
    want_v, want_i = gather.sort(x, 1)
    np.testing.assert_array_equal(host(values), want_v)
    np.testing.assert_array_equal(host(indices), want_i)
    rows = gather.index_select(gx, 0, dev(np.array([5, 0, 63])))
    np.testing.assert_array_equal(host(rows), x[[5, 0, 63]])


def test_every_dtype_equals_the_numpy_result():
    idx = np.array([[5, 0], [1, 1], [2, 3], [0, 0]])
    for dt in [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]:
        x = (np.arange(24) % 7).astype(dt).reshape(4, 6)
        got = host(gather.gather(dev(x), 1, dev(idx)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, gather.gather(x, 1, idx), err_msg=str(dt))
    # An int32 index too.
    x = np.arange(24.0).reshape(4, 6)
    np.testing.assert_array_equal(host(gather.gather(dev(x), 1, dev(idx.astype(np.int32)))),
                                  gather.gather(x, 1, idx))


def test_strided_and_broadcast_views_are_read_through_their_strides():
    x = np.arange(60.0).reshape(6, 10)
    view = x[:, ::2].T  # [5, 6], element strides (2, 10)
    idx = np.broadcast_to(np.array([[0], [4]]), (2, 6))  # stride 0 along dim 1
    np.testing.assert_array_equal(host(gather.gather(dev(view), 0, dev(idx))),
                                  gather.gather(view, 0, idx))


def test_inplace_forms_write_into_the_producers_memory_and_fail_atomically():
    a = np.zeros(3, np.float32)
    x = dev(a)
    out = gather.scatter_add_(x, 0, dev(np.array([0, 2, 0])), dev(np.array([1.0, 2.0, 3.0], np.float32)))
    assert out is x
    assert a.tolist() == [4.0, 0.0, 2.0]
    base = np.zeros((4, 6), np.float32)
    gather.index_fill_(dev(base[:, ::2]), 1, dev(np.array([2])), 7.0)
    want = np.zeros((4, 6), np.float32)
    want[:, 4] = 7.0
    np.testing.assert_array_equal(base, want)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_add_(x, 0, dev(np.array([0, 3])), dev(np.ones(2, np.float32)))
    assert a.tolist() == [4.0, 0.0, 2.0]


def test_a_bad_index_gives_the_cpu_error():
    x, idx = np.arange(6.0).reshape(2, 3), np.array([[0, 3]])
    with pytest.raises(gather.IndexOutOfBoundsError) as cpu:
        gather.gather(x, 1, idx)
    with pytest.raises(gather.IndexOutOfBoundsError) as gpu:
        gather.gather(dev(x), 1, dev(idx))
    assert str(gpu.value) == str(cpu.value)


def test_bounds_policies_by_keyword_run_on_the_gpu():
    x = np.array([10.0, 20.0, 30.0])
    idx = np.array([-1, 1, 5])
    got = gather.take(dev(x), dev(idx), bounds="fill", fill_value=0.5)
    np.testing.assert_array_equal(host(got), [0.5, 20.0, 0.5])
    np.testing.assert_array_equal(host(gather.take(dev(x), dev(idx), bounds="clip")), [10.0, 20.0, 30.0])
    target = np.zeros(3)
    gather.scatter_add_(dev(target), 0, dev(idx), dev(x), bounds="drop")
    assert target.tolist() == [0.0, 20.0, 0.0]
    g = np.array([1.0, 2.0, 3.0])
    gi, gs = gather.grad.scatter_add(dev(g), dev(x), 0, dev(idx), dev(x), bounds="drop")
    np.testing.assert_array_equal(host(gi), g)
    np.testing.assert_array_equal(host(gs), [0.0, 2.0, 0.0])
    with pytest.raises(gather.InvalidArgumentError, match="Drop policy is for writes"):
        gather.gather(dev(x), 0, dev(idx), bounds="drop")


def test_mixed_devices_are_errors_that_say_so():
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        gather.gather(dev(np.ones(3)), 0, np.array([0]))
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        gather.grad.gather(np.ones(1), dev(np.ones(3)), 0, dev(np.array([0])))


def test_gradients_run_on_the_gpu_and_equal_the_cpu_gradients():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5))
    idx = rng.integers(0, 5, (6, 4))
    src = rng.standard_normal((6, 4))
    src[0, :2] = x[0].max()  # ties for amax
    go = rng.standard_normal((6, 4))
    np.testing.assert_allclose(host(gather.grad.gather(dev(go), dev(x), 1, dev(idx))),
                               gather.grad.gather(go, x, 1, idx))
    go = rng.standard_normal((6, 5))
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            want = gather.grad.scatter_reduce(go, x, 1, idx, src, reduce, include_self=include_self)
            got = gather.grad.scatter_reduce(dev(go), dev(x), 1, dev(idx), dev(src), reduce,
                                             include_self=include_self)
            for g, w in zip(got, want):
                np.testing.assert_allclose(host(g), w, rtol=1e-12, err_msg=f"{reduce} {include_self}")


def test_legacy_capsules_are_taken_and_copies_are_refused():
    x, idx = np.arange(12.0).reshape(3, 4), np.array([[3], [0], [1]])
    got = gather.gather(LegacyCudaArray(x), 1, LegacyCudaArray(idx))
    np.testing.assert_array_equal(host(got), gather.gather(x, 1, idx))
    a = np.zeros(3)
    gather.scatter_add_(LegacyCudaArray(a), 0, LegacyCudaArray(np.array([2, 2])), LegacyCudaArray(np.ones(2)))
    assert a.tolist() == [0.0, 0.0, 2.0]
    with pytest.raises(ValueError, match="exported a copy"):
        gather.gather(CopyingCudaArray(x), 1, dev(idx))


def test_the_group_and_segment_ops_by_name_run_on_the_gpu():
    # gather.torch_scatter reaches these through _native._call, with CUDA tensors on a GPU.
    from gather import _native
    rng = np.random.default_rng(5)
    src = rng.standard_normal((9, 3))
    idx = np.repeat(rng.integers(0, 4, (9, 1)), 3, axis=1)
    out = np.zeros((5, 3))
    args = {"dim": 0, "reduce": "amax", "include_self": False}
    got = _native._call("scatter_reduce_arg", {"input": dev(out), "src": dev(src)}, {"index": dev(idx)}, args)
    want = _native._call("scatter_reduce_arg", {"input": out, "src": src}, {"index": idx}, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(host(g), w)
    off = np.array([0, 2, 2, 9])
    args = {"dim": 0, "reduce": "mean", "fill": "nan"}
    got = _native._call("segment_reduce", {"src": dev(src)}, {"offsets": dev(off)}, args)
    want = _native._call("segment_reduce", {"src": src}, {"offsets": off}, args)
    np.testing.assert_allclose(host(got[0]), want[0], rtol=1e-12)
    got = _native._call("scatter_softmax", {"src": dev(src)}, {"index": dev(idx)}, {"dim": 0})
    want = _native._call("scatter_softmax", {"src": src}, {"index": idx}, {"dim": 0})
    np.testing.assert_allclose(host(got[0]), want[0], rtol=1e-12)


def test_a_plan_built_from_a_cuda_index_runs_on_the_gpu():
    rng = np.random.default_rng(12)
    ids = rng.integers(0, 40, 900)
    plan = gather.ScatterPlan(dev(ids), 40)
    assert (len(plan), plan.size, plan.device) == (900, 40, "cuda:0")
    dst = rng.standard_normal((40, 16)).astype(np.float32)
    src = rng.standard_normal((900, 16)).astype(np.float32)
    idx = np.broadcast_to(ids[:, None], src.shape)
    got = host(plan.scatter_add(dev(dst), dev(src)))
    assert got.tobytes() == host(gather.scatter_add(dev(dst), 0, dev(idx), dev(src))).tobytes()
    np.testing.assert_allclose(got, gather.scatter_add(dst, 0, idx, src), rtol=1e-5, atol=1e-5)
    for r in ["prod", "mean", "amax", "amin"]:
        got = host(plan.scatter_reduce(dev(dst), dev(src), r, include_self=False))
        want = gather.scatter_reduce(dst, 0, idx, src, r, include_self=False)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Host arrays into a GPU plan, and a host plan given GPU arrays: errors that say so.
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        plan.scatter_add(dst, src)
    with pytest.raises(gather.InvalidArgumentError, match="cuda:0"):
        gather.ScatterPlan(ids, 40).scatter_add(dev(dst), dev(src))
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.ScatterPlan(dev(np.array([0, 40])), 40)


def _sweep_calls(dt):
    """Every public op (and in-place form) of the package, on arrays of dtype `dt`: valid calls,
    bad indices, negative ones, bad dims and shapes, and the scalar arguments (value, alpha,
    reduce names, include_self, accumulate). Each is (name, function, args, kwargs); arrays are
    NumPy arrays that the sweep hands over as they are or as CUDA arrays."""
    rng = np.random.default_rng(21)
    def arr(shape):
        return (rng.standard_normal(shape) * 3).astype(dt)
    x, s, s_rows, s_two = arr((3, 4)), arr((3, 2)), arr((3, 4)), arr((2, 4))
    s_flat, big = arr(3), arr((3, 4))
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    bad = np.array([[0, 4], [1, 1], [2, 0]])
    neg = np.array([[0, -1], [1, 1], [2, 0]])
    rows, rows_bad, rows_two = np.array([2, 0, 2]), np.array([2, 3, 0]), np.array([2, 0])
    flat, flat_bad, flat_neg = np.array([0, 11, 5]), np.array([0, 12, 5]), np.array([0, -1, 5])
    mask = rng.integers(0, 2, (3, 4)).astype(bool)
    rep = np.array([1, 0, 2])
    g = gather
    calls = []
    for i, label in [(idx, "idx"), (bad, "bad"), (neg, "neg")]:
        calls += [
            (f"gather {label}", g.gather, (x, 1, i), {}),
            (f"take_along_dim {label}", g.take_along_dim, (x, i, 1), {}),
            (f"select_batched {label}", g.select_batched, (x, 1, i, 1), {}),
            (f"scatter src {label}", g.scatter, (x, 1, i, s), {}),
            (f"scatter value {label}", g.scatter, (x, 1, i), {"value": 2}),
            (f"scatter add {label}", g.scatter, (x, 1, i, s), {"reduce": "add"}),
            (f"scatter multiply {label}", g.scatter, (x, 1, i, s), {"reduce": "multiply"}),
            (f"scatter_add {label}", g.scatter_add, (x, 1, i, s), {}),
            (f"scatter_ {label}", g.scatter_, (x, 1, i, s), {}),
            (f"scatter_add_ {label}", g.scatter_add_, (x, 1, i, s), {}),
        ]
        for r in ["sum", "prod", "mean", "amax", "amin"]:
            for incl in [True, False]:
                calls.append((f"scatter_reduce {r} {incl} {label}", g.scatter_reduce, (x, 1, i, s, r),
                              {"include_self": incl}))
        calls.append((f"scatter_reduce_ amax {label}", g.scatter_reduce_, (x, 1, i, s, "amax"), {}))
    for i, label in [(rows, "rows"), (rows_bad, "bad"), (-rows - 1, "neg")]:
        calls += [
            (f"index_select {label}", g.index_select, (x, 0, i), {}),
            (f"index_add {label}", g.index_add, (x, 0, i, s_rows), {"alpha": 2}),
            (f"index_add_ {label}", g.index_add_, (x, 0, i, s_rows), {}),
            (f"index_fill {label}", g.index_fill, (x, 0, i, 1), {}),
            (f"index_fill_ {label}", g.index_fill_, (x, 0, i, 1), {}),
        ]
        for r in ["prod", "mean", "amax", "amin"]:
            calls.append((f"index_reduce {r} {label}", g.index_reduce, (x, 0, i, s_rows, r),
                          {"include_self": False}))
        calls.append((f"index_reduce_ amin {label}", g.index_reduce_, (x, 0, i, s_rows, "amin"), {}))
    for i, label in [(rows_two, "rows"), (np.array([1, 3]), "bad")]:
        calls += [
            (f"index_copy {label}", g.index_copy, (x, 0, i, s_two), {}),
            (f"index_copy_ {label}", g.index_copy_, (x, 0, i, s_two), {}),
        ]
    for i, label in [(flat, "flat"), (flat_bad, "bad"), (flat_neg, "neg")]:
        calls += [
            (f"take {label}", g.take, (x, i), {}),
            (f"take_along_dim None {label}", g.take_along_dim, (x, i), {}),
            (f"put {label}", g.put, (x, i, s_flat), {}),
            (f"put accumulate {label}", g.put, (x, i, s_flat, True), {}),
            (f"put_ {label}", g.put_, (x, i, s_flat), {}),
        ]
    # The same calls of the ops that take a bounds policy, under each policy (and PyTorch's rule
    # by name): the public keywords, forwards, in-place forms and, in the gradient sweep, grads.
    bounded = [c for c in calls if "bounds" in inspect.signature(c[1]).parameters]
    assert len(bounded) > 100, len(bounded)
    for policy in [{"bounds": "wrap"}, {"bounds": "clip"}, {"bounds": "fill", "fill_value": 2},
                   {"bounds": "drop"}, {"bounds": "error"}]:
        calls += [(f"{name} {policy}", f, args, {**kw, **policy}) for name, f, args, kw in bounded]
    calls += [
        ("gather bad dim", g.gather, (x, -3, idx), {}),
        ("gather rank", g.gather, (x, 1, idx[0]), {}),
        ("index_select dim", g.index_select, (x, 2, rows), {}),
        ("index_add bad source", g.index_add, (x, 0, rows, s_two), {}),
        ("scatter_add short src", g.scatter_add, (x, 1, idx, s[:, :1]), {}),
        ("scatter_reduce bad name", g.scatter_reduce, (x, 1, idx, s, "max_"), {}),
        ("index_reduce sum", g.index_reduce, (x, 0, rows, s_rows, "sum"), {}),
        ("masked_select", g.masked_select, (x, mask), {}),
        ("masked_select broadcast", g.masked_select, (x, mask[0]), {}),
        ("masked_scatter", g.masked_scatter, (x, mask, big), {}),
        ("masked_scatter short", g.masked_scatter, (x, mask, s_flat[:0]), {}),
        ("masked_scatter_", g.masked_scatter_, (x, mask, big), {}),
        ("sort", g.sort, (x, 1), {"stable": True}),
        ("sort descending", g.sort, (x, 0, True), {"stable": True}),
        ("argsort", g.argsort, (x,), {"stable": True}),
        ("topk", g.topk, (x, 2, 1), {}),
        ("topk smallest", g.topk, (x, 3, 0, False), {}),
        ("topk k", g.topk, (x, 5, 1), {}),
        ("repeat_interleave", g.repeat_interleave, (x, rep, 0), {}),
        ("repeat_interleave count", g.repeat_interleave, (x, 2, 1), {}),
        ("repeat_interleave flat", g.repeat_interleave, (x, 2), {}),
        ("repeat_interleave length", g.repeat_interleave, (x, rep, 1), {}),
        ("repeat_interleave negative", g.repeat_interleave, (x, -rep, 0), {}),
        ("repeat_interleave output_size", g.repeat_interleave, (x, rep, 0), {"output_size": 4}),
        ("select_batched dims", g.select_batched, (x, 1, idx, 3), {}),
    ]
    # An empty input: only an empty index is valid for it.
    xe = x[:0]
    calls += [
        ("take empty input", g.take, (xe, flat), {}),
        ("take empty input and index", g.take, (xe, flat[:0]), {}),
        ("take_along_dim None empty input", g.take_along_dim, (xe, flat), {}),
        ("put empty input", g.put, (xe, flat, s_flat), {}),
        ("index_select empty input", g.index_select, (xe, 0, rows), {}),
        ("gather empty input", g.gather, (xe, 0, idx), {}),
    ]
    # Faults that a gradient meets before its own checks, as the forward would: a src or source
    # of another dtype than the input, a mask that is not bool, a negative count of copies, a dim
    # that does not exist (alone and with another fault).
    other = np.float32 if dt == np.float64 else np.float64
    calls += [
        ("scatter src dtype", g.scatter, (x, 1, idx, s.astype(other)), {}),
        ("scatter add src dtype", g.scatter, (x, 1, idx, s.astype(other)), {"reduce": "add"}),
        ("scatter_add src dtype", g.scatter_add, (x, 1, idx, s.astype(other)), {}),
        ("scatter_reduce src dtype", g.scatter_reduce, (x, 1, idx, s.astype(other), "amax"), {}),
        ("index_add source dtype", g.index_add, (x, 0, rows, s_rows.astype(other)), {}),
        ("index_copy source dtype", g.index_copy, (x, 0, rows_two, s_two.astype(other)), {}),
        ("index_reduce source dtype", g.index_reduce, (x, 0, rows, s_rows.astype(other), "amax"), {}),
        ("put source dtype", g.put, (x, flat, s_flat.astype(other)), {}),
        ("masked_scatter source dtype", g.masked_scatter, (x, mask, big.astype(other)), {}),
        ("masked_select uint8 mask", g.masked_select, (x, mask.astype(np.uint8)), {}),
        ("masked_scatter float mask", g.masked_scatter, (x, mask.astype(np.float32), big), {}),
        ("masked_scatter float mask, source dtype", g.masked_scatter,
         (x, mask.astype(np.float32), big.astype(other)), {}),
        ("repeat_interleave negative count", g.repeat_interleave, (x, -1), {}),
        ("repeat_interleave count, bad dim", g.repeat_interleave, (x, 2, 2), {}),
        ("repeat_interleave negative count, bad dim", g.repeat_interleave, (x, -1, -3), {}),
        ("scatter_add bad dim", g.scatter_add, (x, 2, idx, s), {}),
        ("scatter_add bad dim, src dtype", g.scatter_add, (x, 2, idx, s.astype(other)), {}),
        ("scatter_reduce bad dim", g.scatter_reduce, (x, -3, idx, s, "sum"), {}),
        ("index_add bad dim", g.index_add, (x, 2, rows, s_rows), {}),
        ("index_select bad dim, bad index", g.index_select, (x, 2, rows_bad), {}),
        ("take_along_dim bad dim", g.take_along_dim, (x, idx, 2), {}),
        ("select_batched bad dim", g.select_batched, (x, 2, idx, 1), {}),
        ("sort bad dim", g.sort, (x, 2), {"stable": True}),
        ("topk bad dim", g.topk, (x, 2, -3), {}),
    ]
    return calls


def _outcome(f, args, kwargs, on_gpu, wrap=None):
    """A call's result (host arrays) and its inputs after it, or its error's type and text.
    `wrap` presents a NumPy argument as a CUDA array (default `dev`)."""
    held = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    given = [(wrap or dev)(a) if on_gpu and isinstance(a, np.ndarray) else a for a in held]
    try:
        out = f(*given, **kwargs)
    except Exception as e:  # noqa: BLE001 - the sweep compares whatever is raised
        return ("error", type(e).__name__, str(e)), _written_back(held, given)
    outs = out if isinstance(out, tuple) else (out,)
    res = []
    for o in outs:
        if on_gpu:
            # In-place forms return their target: the producer here, whose buffer is `held`'s.
            res.append(o.a.copy() if isinstance(o, EmuCudaArray) else host(o))
        else:
            res.append(np.array(o, copy=True))
    return ("ok", res), _written_back(held, given)


def _written_back(held, given):
    """`held`, with the device arrays of `given` that do not share its buffers (a real GPU's, as
    tests/test_cuda.py runs these sweeps) copied back, so that in-place writes show."""
    for h, g in zip(held, given):
        if isinstance(h, np.ndarray) and g is not h and getattr(g, "a", None) is not h:
            h[...] = host(g)
    return held


def _same_outcome(got, want, dt, rounded, inputs=((), ())):
    """Asserts that two outcomes of `_outcome` agree: the same error, or results of the same dtypes
    and shapes, equal (within rounding where `rounded`: float arithmetic that adds); and the
    calls' `inputs` (GPU's, NumPy's) left alike."""
    for g, w in zip(*inputs):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w, err_msg="inputs after the call")
    assert got[0] == want[0], f"GPU {got}, NumPy {want}"
    if want[0] == "error":
        assert got == want, f"GPU {got[1:]}, NumPy {want[1:]}"
        return
    assert len(got[1]) == len(want[1])
    for g, w in zip(got[1], want[1]):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), (g.dtype, g.shape, w.dtype, w.shape)
        if rounded:
            tol = 1e-2 if dt == np.float16 else 1e-5
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, w)


def test_every_public_op_gives_the_numpy_outcome_on_cuda_arrays():
    """Each public op and in-place form, on each dtype, valid and invalid: a CUDA array call gives
    the NumPy call's result (ints, bools and selections exactly, float arithmetic within rounding)
    and leaves its inputs as the NumPy call leaves them, or raises the same error with the same
    message."""
    sums = ("scatter add", "scatter_add", "scatter_reduce sum", "scatter_reduce mean", "index_add",
            "index_reduce mean", "put accumulate")
    count, differ = 0, []
    for dt in [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]:
        for name, f, args, kwargs in _sweep_calls(dt):
            what = f"{name} ({np.dtype(dt).name})"
            want, want_in = _outcome(f, args, kwargs, on_gpu=False)
            got, got_in = _outcome(f, args, kwargs, on_gpu=True)
            count += 1
            try:
                rounded = np.dtype(dt).kind == "f" and name.startswith(sums)
                _same_outcome(got, want, dt, rounded, (got_in, want_in))
            except AssertionError as e:
                differ.append(f"{what}: {e}")
    assert count > 900, count
    assert not differ, f"{len(differ)} of {count} calls differ:\n" + "\n".join(differ)


def _forward_shape(f, args, kwargs):
    """The shape of the forward's output, the grad_output a gradient takes; the input's where the
    forward fails, or, for an empty input, the forward's on a filled one (so that the gradient
    reaches its own check of the empty input)."""
    def shape_of(a):
        out = f(*a, **kwargs)
        return (out[0] if isinstance(out, tuple) else out).shape
    try:
        return shape_of(args)
    except gather.GatherError:
        pass
    if args[0].size == 0:
        try:
            return shape_of((np.zeros((3,) + args[0].shape[1:], args[0].dtype),) + tuple(args[1:]))
        except gather.GatherError:
            pass
    return args[0].shape


def test_every_gradient_gives_the_numpy_outcome_on_cuda_arrays():
    """`gather.grad` of each call of the sweep above that has a gradient, with a grad_output of
    the forward's output shape and one of a wrong shape: the same gradients (within rounding:
    they add) or the same error, on every dtype (the non-float ones are errors)."""
    count, differ = 0, []
    for dt in [np.float32, np.float64, np.float16, np.int64, np.bool_]:
        rng = np.random.default_rng(4)
        for name, f, args, kwargs in _sweep_calls(dt):
            grad_f = getattr(gather.grad, f.__name__, None)
            if f.__name__.endswith("_") or grad_f is None:
                continue
            shape = _forward_shape(f, args, kwargs)
            wrong = shape[:-1] + (shape[-1] + 1,) if shape else (2,)
            for go_shape, how in [(shape, ""), (wrong, ", grad_output of a wrong shape")]:
                go = (rng.standard_normal(go_shape) * 3).astype(dt)
                what = f"grad {name} ({np.dtype(dt).name}){how}"
                want, _ = _outcome(grad_f, (go,) + tuple(args), kwargs, on_gpu=False)
                got, _ = _outcome(grad_f, (go,) + tuple(args), kwargs, on_gpu=True)
                count += 1
                try:
                    _same_outcome(got, want, dt, True)
                except AssertionError as e:
                    differ.append(f"{what}: {e}")
    assert count > 500, count
    assert not differ, f"{len(differ)} of {count} calls differ:\n" + "\n".join(differ)


def test_a_gpu_plan_gives_the_host_plans_outcome():
    """`ScatterPlan` built from a CUDA index and from the same NumPy index, applied to the same
    dst and src on every dtype and reduction (and to wrong shapes, dtypes and names): the same
    results (float sums within rounding) or the same errors; and both plans' own errors alike."""
    rng = np.random.default_rng(31)
    ids = rng.integers(0, 6, 40)
    count, differ = 0, []
    calls = []
    for dt in [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_]:
        dst = (rng.standard_normal((6, 3)) * 3).astype(dt)
        src = (rng.standard_normal((40, 3)) * 3).astype(dt)
        calls += [(dt, "scatter_add", (dst, src), {})]
        for r in ["sum", "prod", "mean", "amax", "amin", "max"]:
            for incl in [True, False]:
                calls.append((dt, f"scatter_reduce {r}", (dst, src, r), {"include_self": incl}))
        calls += [
            (dt, "scatter_add short dst", (dst[:5], src), {}),
            (dt, "scatter_add long src", (dst, np.concatenate([src, src[:1]])), {}),
            (dt, "scatter_add other dtype", (dst, src.astype(np.float64 if dt != np.float64 else np.float32)), {}),
            (dt, "scatter_reduce bad name", (dst, src, "median"), {}),
        ]
    gpu_plan, host_plan = gather.ScatterPlan(dev(ids), 6), gather.ScatterPlan(ids, 6)
    for dt, name, args, kwargs in calls:
        method = name.split()[0]
        what = f"{name} ({np.dtype(dt).name})"
        want, _ = _outcome(getattr(host_plan, method), args, kwargs, on_gpu=False)
        got, _ = _outcome(getattr(gpu_plan, method), args, kwargs, on_gpu=True)
        count += 1
        try:
            rounded = np.dtype(dt).kind == "f" and ("add" in name or "sum" in name or "mean" in name)
            _same_outcome(got, want, dt, rounded)
        except AssertionError as e:
            differ.append(f"{what}: {e}")
    for bad_ids, size in [(np.array([0, 6]), 6), (np.array([-1, 2]), 6), (np.zeros((2, 2), np.int64), 6),
                          (np.array([0.0, 1.0]), 6), (np.array([0, 1]), -1)]:
        def build(ids_, on_gpu):
            try:
                gather.ScatterPlan(dev(ids_) if on_gpu else ids_, size)
                return ("ok",)
            except Exception as e:  # noqa: BLE001 - compared whatever it is
                return ("error", type(e).__name__, str(e))
        count += 1
        if build(bad_ids, True) != build(bad_ids, False):
            differ.append(f"ScatterPlan({bad_ids.tolist()}, {size}): GPU {build(bad_ids, True)}, "
                          f"NumPy {build(bad_ids, False)}")
    assert count > 120, count
    assert not differ, f"{len(differ)} of {count} calls differ:\n" + "\n".join(differ)


class Bf16CudaArray(EmuCudaArray):
    """A uint16 NumPy array of bfloat16 bits presented as a bfloat16 CUDA array (DLPack's
    kDLBfloat)."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = super().__dlpack__(stream=stream, max_version=max_version)
        t = _managed(capsule).dl_tensor
        t.dtype.code, t.dtype.bits = 4, 16
        return capsule


def _bf16(a):
    """float32 values as bfloat16 bits (uint16), other arrays as they are."""
    if isinstance(a, np.ndarray) and a.dtype == np.float32:
        return (a.view(np.uint32) >> 16).astype(np.uint16)
    return a


def test_bfloat16_cuda_arrays_give_the_numpy_outcome():
    """The op and gradient sweeps above in bfloat16: NumPy's uint16 bits with dtype="bfloat16"
    against bfloat16 CUDA arrays (results compared as values, within bfloat16's rounding for
    the sums)."""
    def as_float(r):
        return [(x.astype(np.uint32) << 16).view(np.float32) if x.dtype == np.uint16 else x for x in r]
    wrap = lambda a: Bf16CudaArray(a) if a.dtype == np.uint16 else dev(a)  # noqa: E731
    rng = np.random.default_rng(8)
    count, differ = 0, []
    for name, f, args, kwargs in _sweep_calls(np.float32):
        if "dtype" in name or "float mask" in name:
            # Another dtype beside bfloat16's bits is refused by NumPy's dtype="bfloat16" form
            # in its own words, and a float32 mask would turn into bfloat16 bits here.
            continue
        args = tuple(_bf16(a) for a in args)
        calls = [(name, f, args)]
        grad_f = getattr(gather.grad, f.__name__, None)
        if grad_f is not None and not f.__name__.endswith("_"):
            shape = _forward_shape(f, args, {**kwargs, "dtype": "bfloat16"})
            go = _bf16((rng.standard_normal(shape) * 3).astype(np.float32))
            calls.append((f"grad {name}", grad_f, (go,) + args))
        for what, fn, a in calls:
            want, want_in = _outcome(fn, a, {**kwargs, "dtype": "bfloat16"}, on_gpu=False)
            got, got_in = _outcome(fn, a, kwargs, on_gpu=True, wrap=wrap)
            count += 1
            try:
                if want[0] == "ok" and got[0] == "ok":
                    got, want = ("ok", as_float(got[1])), ("ok", as_float(want[1]))
                _same_outcome(got, want, np.float16, True, (got_in, want_in))
            except AssertionError as e:
                differ.append(f"{what} (bfloat16): {e}")
    assert count > 240, count
    assert not differ, f"{len(differ)} of {count} calls differ:\n" + "\n".join(differ)


def _call_outcome(op, data, plain, args, on_gpu):
    """`_native._call(op, data, plain, args)` (the ops by name, as gather.torch_scatter calls
    them): its outputs as host arrays, or its error's type and text."""
    from gather import _native
    wrap = dev if on_gpu else (lambda a: a)
    try:
        out = _native._call(op, {k: wrap(v) for k, v in data.items()},
                            {k: wrap(v) for k, v in plain.items()}, args)
    except Exception as e:  # noqa: BLE001 - the sweep compares whatever is raised
        return ("error", type(e).__name__, str(e))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return ("ok", [host(o) if on_gpu else np.array(o) for o in outs])


def _assert_calls_agree(calls, at_least, outcome=lambda *call, on_gpu: _outcome(*call, on_gpu)[0]):
    """Each (what, *call) of `calls` gives on CUDA arrays what it gives on NumPy arrays, as
    `outcome(*call, on_gpu=...)` sees it (default `_outcome` of (function, args, kwargs)): the
    same outputs (float sums within rounding) or the same error."""
    differ = []
    for what, *call in calls:
        want = outcome(*call, on_gpu=False)
        got = outcome(*call, on_gpu=True)
        try:
            _same_outcome(got, want, np.float32, True)
        except AssertionError as e:
            differ.append(f"{what}: {e}")
    assert len(calls) > at_least, len(calls)
    assert not differ, f"{len(differ)} of {len(calls)} calls differ:\n" + "\n".join(differ[:40])


def _arrays(seed):
    """A maker of random arrays (of a shape and dtype, values of a few units) from `seed`."""
    rng = np.random.default_rng(seed)

    def arr(shape, dt=np.float32):
        return np.asarray((rng.standard_normal(shape) * 3).astype(dt))
    return arr


def _faulty_calls(faults, index_dtype):
    """The index ops with `faults` (a set of: dim, val, idtype, sshape, sdtype, rank), each as
    (name, function, args, kwargs) on float32 arrays; the index in `index_dtype` unless `idtype`
    makes it float."""
    arr = _arrays(5)
    x = arr((3, 4))

    def index(kind):
        i = {"rows": np.array([2, 0, 2]), "flat": np.array([0, 11, 5]),
             "idx": np.array([[0, 3], [1, 1], [2, 0]])}[kind]
        if "val" in faults:
            i = {"rows": np.array([2, 7, 2]), "flat": np.array([0, 12, 5]),
                 "idx": np.array([[0, 4], [1, 1], [2, 0]])}[kind]
        if "rank" in faults:
            i = i[0] if kind == "idx" else i.reshape(3, 1)
        return i.astype(np.float32 if "idtype" in faults else index_dtype)

    def src(shape):
        return arr(shape[:-1] + (1,) if "sshape" in faults else shape,
                   np.float64 if "sdtype" in faults else np.float32)

    def dim(d):
        return 5 if "dim" in faults else d
    g = gather
    return [
        ("gather", g.gather, (x, dim(1), index("idx")), {}),
        ("take_along_dim", g.take_along_dim, (x, index("idx"), dim(1)), {}),
        ("select_batched", g.select_batched, (x, dim(1), index("idx"), 1), {}),
        ("scatter", g.scatter, (x, dim(1), index("idx"), src((3, 2))), {}),
        ("scatter value", g.scatter, (x, dim(1), index("idx")), {"value": 2.0}),
        ("scatter multiply", g.scatter, (x, dim(1), index("idx"), src((3, 2))), {"reduce": "multiply"}),
        ("scatter_add", g.scatter_add, (x, dim(1), index("idx"), src((3, 2))), {}),
        ("scatter_reduce", g.scatter_reduce, (x, dim(1), index("idx"), src((3, 2)), "amax"),
         {"include_self": False}),
        ("index_select", g.index_select, (x, dim(0), index("rows")), {}),
        ("index_add", g.index_add, (x, dim(0), index("rows"), src((3, 4))), {}),
        ("index_copy", g.index_copy, (x, dim(0), index("rows"), src((3, 4))), {}),
        ("index_fill", g.index_fill, (x, dim(0), index("rows"), 1.0), {}),
        ("index_reduce", g.index_reduce, (x, dim(0), index("rows"), src((3, 4)), "mean"), {}),
        ("take", g.take, (x, index("flat")), {}),
        ("put", g.put, (x, index("flat"), src((3,))), {"accumulate": True}),
    ]


def test_calls_with_one_or_two_faults_fail_alike_on_cuda_arrays():
    """Each index op and its gradient with one fault or two at once (a bad dim, index value,
    index dtype or rank, a src of a wrong shape or dtype), with int64, int16, uint8 and int32
    indices, and a grad_output of the right shape, a wrong one or another dtype: a CUDA array call fails with the NumPy call's error (the same check comes first) or
    gives its result."""
    import itertools
    kinds = ["dim", "val", "idtype", "sshape", "sdtype", "rank"]
    arr = _arrays(6)
    calls = []
    for index_dtype in (np.int64, np.int16, np.uint8, np.int32):
        for k in (1, 2):
            for faults in itertools.combinations(kinds, k):
                for name, f, args, kwargs in _faulty_calls(set(faults), index_dtype):
                    what = f"{name} {faults} index {np.dtype(index_dtype).name}"
                    grad_f = getattr(gather.grad, f.__name__)
                    shape = _forward_shape(f, args, kwargs)
                    calls.append((what, f, args, kwargs))
                    for go_shape, go_dtype, how in [(shape, np.float32, ""), ((5, 5), np.float32, ", wrong shape"),
                                                    (shape, np.float64, ", wrong dtype")]:
                        go = arr(go_shape, go_dtype)
                        calls.append((f"grad {what}{how}", grad_f, (go,) + args, kwargs))
    _assert_calls_agree(calls, at_least=4500)


def test_sort_repeat_masked_and_batched_calls_fail_alike_on_cuda_arrays():
    """sort, argsort, topk, repeat_interleave, masked_select/scatter, take_along_dim and
    select_batched on float, int, bool, 0-d and empty inputs, over good and bad dims, k,
    repeats (counts, negative, of a wrong length or rank or dtype), output sizes, masks (of
    other shapes, not bool), sources and indices, each with its gradient given a grad_output
    of the forward's shape and of a wrong one: a CUDA array call gives the NumPy call's
    outcome (result, or the same error)."""
    arr = _arrays(7)
    g = gather
    inputs = {"float32": arr((3, 4)), "int64": arr((3, 4), np.int64), "bool": arr((3, 4)) > 0,
              "0-d": np.array(1.5, dtype=np.float32), "empty": arr((0, 4))}
    repeats = [2, -1, np.array([1, 0, 2]), np.array([1, -1, 2]), np.array([1, 2]),
               np.array([[1, 2, 0]]), np.array([1.0, 2.0, 0.0]), np.array([3])]
    masks = [arr((3, 4)) > 0, arr((4,)) > 0, arr((3,)) > 0, (arr((3, 4)) > 0).astype(np.uint8),
             arr((1, 4)) > 0]
    indices = [np.array([[0, 3], [1, 1], [2, 0]]), np.array([[0], [1], [2]]), np.array([0, 1]),
               np.array([[[0]]]), np.array([[0, 9]])]
    calls = []
    for xn, x in inputs.items():
        for d in [0, 1, -1, 2, -3]:
            calls += [(f"sort {xn} dim {d}", g.sort, (x, d), {"stable": True}),
                      (f"argsort {xn} dim {d}", g.argsort, (x, d, True), {"stable": True})]
            for k in [-1, 0, 2, 5]:
                calls.append((f"topk {xn} k {k} dim {d}", g.topk, (x, k, d), {}))
                calls.append((f"topk smallest {xn} k {k} dim {d}", g.topk, (x, k, d, False), {}))
            for r in repeats:
                for size in [None, 4, 3]:
                    calls.append((f"repeat_interleave {xn} {r!r} dim {d} output_size {size}",
                                  g.repeat_interleave, (x, r, d), {"output_size": size}))
        for m in masks:
            for s in [arr((12,)).astype(x.dtype), arr((2,)).astype(x.dtype), arr((12,), np.float64)]:
                calls.append((f"masked_scatter {xn} mask {m.shape} {m.dtype} source {s.shape} {s.dtype}",
                              g.masked_scatter, (x, m, s), {}))
            calls.append((f"masked_select {xn} mask {m.shape} {m.dtype}", g.masked_select, (x, m), {}))
        for i in indices:
            for d in [None, 0, 1, 2]:
                calls.append((f"take_along_dim {xn} index {i.shape} dim {d}", g.take_along_dim, (x, i, d), {}))
            for axis, batch in [(1, 1), (0, 0), (1, 0), (2, 1), (1, 2), (-1, 1)]:
                calls.append((f"select_batched {xn} index {i.shape} axis {axis} batch_dims {batch}",
                              g.select_batched, (x, axis, i, batch), {}))
    runs = []
    for name, f, args, kwargs in calls:
        runs.append((name, f, args, kwargs))
        grad_f = getattr(g.grad, f.__name__, None)
        if grad_f is not None:
            shape = _forward_shape(f, args, kwargs)
            dt = args[0].dtype if args[0].dtype.kind == "f" else np.float32
            runs += [(f"grad {name}", grad_f, (arr(shape, dt),) + args, kwargs),
                     (f"grad {name}, grad_output of a wrong shape", grad_f, (arr((5, 5), dt),) + args, kwargs)]
    _assert_calls_agree(runs, at_least=3000)


def test_group_segment_and_bounded_calls_fail_alike_on_cuda_arrays():
    """The group and segment reductions by name (every reduce and fill, bad dims, indices of
    bad values, shapes or dtypes; segments as offsets, lengths and ids, unsorted, negative, of
    a wrong rank or dtype; float, int, bool and empty src) and the index ops under each bounds
    policy (with bad, negative and float indices and bad dims, and misused policy arguments):
    a CUDA array call gives the NumPy call's outcome (result, or the same error)."""
    arr = _arrays(8)
    x, src = arr((3, 4)), arr((3, 4))
    ok = np.array([[0, 2, 1, 0], [1, 1, 0, 2], [2, 0, 0, 1]])
    bad, neg = ok.copy(), ok.copy()
    bad[1, 2], neg[2, 3] = 7, -1
    indices = [(ok, "ok"), (bad, "bad"), (neg, "negative"), (ok[:2], "short"),
               (ok.astype(np.float32), "float"), (ok[0], "1-d")]
    calls = []
    for s in [src, arr((3, 4), np.int64), arr((3, 4)) > 0, arr((3, 4), np.float64), arr((3, 4), np.float16)]:
        for i, iname in indices:
            for d in [0, 1, 2]:
                what = f"{s.dtype} src, {iname} index, dim {d}"
                for red in ["sum", "prod", "mean", "amax", "amin", "first", "last", "logsumexp", "var", "std",
                            "max", "median"]:
                    for fill in [None, "nan", "zero", 2.5]:
                        a = {"dim": d, "reduce": red, **({} if fill is None else {"fill": fill})}
                        calls.append((f"scatter_groups {red} fill {fill}, {what}", "scatter_groups",
                                      {"src": s}, {"index": i}, a))
                    calls.append((f"scatter_groups {red} dim_size 2, {what}", "scatter_groups",
                                  {"src": s}, {"index": i}, {"dim": d, "reduce": red, "dim_size": 2}))
                for op in ["scatter_any", "scatter_all", "scatter_softmax", "scatter_log_softmax"]:
                    calls.append((f"{op}, {what}", op, {"src": s}, {"index": i}, {"dim": d}))
                for red in ["amax", "amin", "sum"]:
                    for incl in [True, False]:
                        a = {"dim": d, "reduce": red, "include_self": incl}
                        calls.append((f"scatter_reduce_arg {red} {incl}, {what}", "scatter_reduce_arg",
                                      {"input": x.astype(s.dtype), "src": s}, {"index": i}, a))
                        calls.append((f"scatter_reduce_arg {red} {incl} float64 input, {what}",
                                      "scatter_reduce_arg", {"input": x.astype(np.float64), "src": s},
                                      {"index": i}, a))
    segments = {"offsets": [np.array([0, 1, 3]), np.array([0, 2, 1]), np.array([1, 3]), np.array([0, 4]),
                            np.array([[0, 3]]), np.array([0.0, 3.0])],
                "lengths": [np.array([1, 2]), np.array([1, 1]), np.array([2, -1, 2]), np.array([4])],
                "ids": [np.array([0, 0, 2]), np.array([0, 2, 1]), np.array([0, 0, 5]), np.array([-1, 0, 0])]}
    reduces = {"segment_reduce": ["sum", "mean", "amax", "var", "first"],
               "segment_arg_reduce": ["amax", "amin", "sum"]}
    for s in [src, arr((3, 4), np.int64), arr((3, 4)) > 0, arr((0, 4))]:
        for kind, given in segments.items():
            for seg in given:
                for d in [0, 1, -3]:
                    for op in ["segment_reduce", "segment_arg_reduce", "segment_any", "segment_all",
                               "segment_softmax", "segment_log_softmax"]:
                        for red in reduces.get(op, [None]):
                            a = {"dim": d, **({"reduce": red} if red else {}),
                                 **({"num_segments": 3} if kind == "ids" else {})}
                            calls.append((f"{op} {red}, {s.dtype} src {s.shape}, {kind} {seg.tolist()}, dim {d}",
                                          op, {"src": s}, {kind: seg}, a))
    for policy in [{"bounds": "wrap"}, {"bounds": "clip"}, {"bounds": "fill", "fill_value": 0.5},
                   {"bounds": "drop"}, {"bounds": "fill"}, {"bounds": "nope"}, {"fill_value": 1.0}]:
        for i, iname in indices[:3] + indices[4:5]:
            for d in [1, 5]:
                what = f"{policy}, {iname} index, dim {d}"
                calls += [
                    (f"gather {what}", "gather", {"input": x}, {"index": i}, {"dim": d, **policy}),
                    (f"scatter_add {what}", "scatter_add", {"input": x, "src": src}, {"index": i},
                     {"dim": d, **policy}),
                    (f"scatter {what}", "scatter", {"input": x, "src": src}, {"index": i}, {"dim": d, **policy}),
                    (f"scatter_reduce {what}", "scatter_reduce", {"input": x, "src": src}, {"index": i},
                     {"dim": d, "reduce": "amax", **policy}),
                    (f"index_select {what}", "index_select", {"input": x}, {"index": i[0]}, {"dim": d, **policy}),
                    (f"index_add {what}", "index_add", {"input": x, "source": src}, {"index": i[0]},
                     {"dim": d, **policy}),
                    (f"take {what}", "take", {"input": x}, {"index": i * 3}, dict(policy)),
                    (f"put {what}", "put", {"input": x, "source": src}, {"index": i * 3}, dict(policy)),
                    (f"take_along_dim {what}", "take_along_dim", {"input": x}, {"index": i}, {"dim": d, **policy}),
                    (f"select_batched {what}", "select_batched", {"input": x}, {"index": i},
                     {"dim": d, "batch_dims": 1, **policy}),
                ]
    _assert_calls_agree(calls, at_least=9000, outcome=_call_outcome)


def test_broadcasting_calls_fail_alike_on_cuda_arrays():
    """gather_broadcast and the broadcasting scatters by name: indices and srcs that broadcast
    along the other dims or do not, of bad values, ranks and dtypes, every reduction (and a bad
    name), good and bad dims, with and without bounds policies: a CUDA array call gives the
    NumPy call's outcome (result, or the same error)."""
    arr = _arrays(9)
    x = arr((3, 4))
    indices = [(np.array([[0, 3]]), "row"), (np.array([[0], [2], [1]]), "column"),
               (np.array([[0, 3], [1, 1], [2, 0]]), "full"), (np.array([[0, 4]]), "bad"),
               (np.array([[0, -1]]), "negative"), (np.array([[0.0, 3.0]]), "float"), (np.array([0, 3]), "1-d"),
               (np.array([[[0]]]), "3-d"), (np.array([[0, 3, 1]]), "wide")]
    srcs = [arr((3, 2)), arr((1, 2)), arr((3, 1)), arr(()), arr((2, 2)), arr((3, 2), np.float64),
            arr((3, 2), np.int64)]
    calls = []
    for i, iname in indices:
        for d in [0, 1, -1, 2]:
            calls.append((f"gather_broadcast {iname} index, dim {d}", "gather_broadcast", {"input": x},
                          {"index": i}, {"dim": d}))
            for s in srcs:
                what = f"{iname} index, src {s.shape} {s.dtype}, dim {d}"
                for op in ["scatter_broadcast", "scatter_add_broadcast"]:
                    calls.append((f"{op} {what}", op, {"input": x, "src": s}, {"index": i}, {"dim": d}))
                for red in ["sum", "amax", "mean", "nope"]:
                    for incl in [True, False]:
                        calls.append((f"scatter_reduce_broadcast {red} {incl} {what}", "scatter_reduce_broadcast",
                                      {"input": x, "src": s}, {"index": i},
                                      {"dim": d, "reduce": red, "include_self": incl}))
            for policy in [{"bounds": "clip"}, {"bounds": "fill", "fill_value": 0.0}, {"bounds": "drop"}]:
                calls.append((f"gather_broadcast {policy} {iname} index, dim {d}", "gather_broadcast",
                              {"input": x}, {"index": i}, {"dim": d, **policy}))
                calls.append((f"scatter_add_broadcast {policy} {iname} index, dim {d}", "scatter_add_broadcast",
                              {"input": x, "src": arr((3, 2))}, {"index": i}, {"dim": d, **policy}))
    _assert_calls_agree(calls, at_least=2500, outcome=_call_outcome)


# The sweeps that tests/test_cuda.py runs again on a real GPU, with CuPy arrays for `dev`.
SWEEPS = [
    test_every_public_op_gives_the_numpy_outcome_on_cuda_arrays,
    test_every_gradient_gives_the_numpy_outcome_on_cuda_arrays,
    test_calls_with_one_or_two_faults_fail_alike_on_cuda_arrays,
    test_sort_repeat_masked_and_batched_calls_fail_alike_on_cuda_arrays,
    test_group_segment_and_bounded_calls_fail_alike_on_cuda_arrays,
    test_broadcasting_calls_fail_alike_on_cuda_arrays,
]


def test_the_sweeps_see_in_place_writes_on_device_arrays_that_are_copies(monkeypatch):
    """The sweeps as test_cuda.py runs them on a GPU, where the device array is a copy of the
    NumPy one: played here by producers over copies, whose writes `_outcome` copies back. The
    op sweep (in-place forms among its calls) agrees; a lost write back would fail it."""
    emu_host = host
    monkeypatch.setattr(sys.modules[__name__], "dev", lambda a: EmuCudaArray(np.array(a, copy=True)))
    monkeypatch.setattr(sys.modules[__name__], "host",
                        lambda r: r.a.copy() if isinstance(r, EmuCudaArray) else emu_host(r))
    test_every_public_op_gives_the_numpy_outcome_on_cuda_arrays()


def test_batched_calls_on_gpu_memory_equal_the_host_ones():
    """torch.func.vmap's one call of the library on CUDA tensors (_batched_cuda: device pointers,
    torch's stream) gives what the host's _batched gives, with a size-1 batch axis shared and the
    error of a bad element named."""
    from gather import _native

    rng = np.random.default_rng(9)
    codes = {np.dtype(np.float32): 11, np.dtype(np.float64): 12, np.dtype(np.int64): 5}

    def on_gpu(pairs):  # the emulator's device memory is host memory
        return [(n, a.ctypes.data, a.shape, codes[a.dtype]) for n, a in pairs]

    def both(op, mode, inputs, outputs, args, ranks):
        host = [(n, np.zeros_like(a)) for n, a in outputs]
        dev = [(n, np.zeros_like(a)) for n, a in outputs]
        if mode == "inplace":  # into the result, which holds input first
            host[0][1][...] = inputs[0][1]
            dev[0][1][...] = inputs[0][1]
            h_in, d_in = [host[0]] + inputs[1:], [dev[0]] + inputs[1:]
        else:
            h_in = d_in = inputs
        out_ranks = [a.ndim - 1 for _, a in outputs]
        _native._batched(op, mode, h_in, host, args, ranks, out_ranks)
        _native._batched_cuda(op, mode, on_gpu(d_in), on_gpu(dev), args, ranks, out_ranks, 0, 0)
        for (_, h), (_, d) in zip(host, dev):
            np.testing.assert_array_equal(d, h)
        return [d for _, d in dev]

    x = rng.standard_normal((4, 5, 3))
    idx = rng.integers(0, 5, (1, 2, 3))  # one index shared by the 4 elements
    got = both("gather", "call", [("input", x), ("index", idx)], [("output", np.empty((4, 2, 3)))], {"dim": 0},
               [2, 2])
    np.testing.assert_array_equal(got[0], np.stack([np.take_along_axis(x[b], idx[0], 0) for b in range(4)]))
    src = rng.standard_normal((4, 2, 3))
    both("scatter_add", "inplace", [("input", x), ("index", idx), ("src", src)], [("output", np.empty_like(x))],
         {"dim": 0}, [2, 2, 2])
    g = rng.standard_normal((4, 2, 3))
    both("gather", "grad", [("grad_output", g), ("input", x), ("index", idx)], [("grad_input", np.empty_like(x))],
         {"dim": 0}, [2, 2, 2])
    bad = idx.repeat(4, 0)
    bad[2, 1, 0] = 50
    with pytest.raises(gather.IndexOutOfBoundsError, match="index 50 is out of bounds") as caught:
        _native._batched_cuda("gather", "call", on_gpu([("input", x), ("index", bad)]),
                              on_gpu([("output", np.empty((4, 2, 3)))]), {"dim": 0}, [2, 2], [2], 0, 0)
    assert "in vmap's batch element [2]" in caught.value.__notes__
