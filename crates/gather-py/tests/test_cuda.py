"""CUDA arrays through DLPack: PyTorch, CuPy and JAX tensors on an NVIDIA GPU run on that GPU
(gather-cuda), without a copy in either direction, and come back as the caller's type.

Where no GPU is usable (CI), only the first test runs: a CUDA array is then a clear error, never
a crash. The others run on a lent GPU (scripts/gpu_check.sh) and are skipped elsewhere."""

import numpy as np
import pytest

import gather


class FakeCudaArray:
    """Says it lives on GPU 0; must not be read where no GPU is usable."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("__dlpack__ called although the GPU is unusable")


def _gpu_usable():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(_gpu_usable(), reason="checks the machine without a GPU")
def test_a_cuda_array_without_a_usable_gpu_is_an_error_not_a_crash():
    with pytest.raises(ValueError) as e:
        gather.gather(FakeCudaArray(), 0, np.array([0]))
    assert "CUDA" in str(e.value) or "GPU" in str(e.value)


def test_the_result_type_of_gpu_calls_is_exported():
    assert "CudaArray" in gather.__all__
    assert hasattr(gather.CudaArray, "__dlpack__")


torch = pytest.importorskip("torch")
gpu = pytest.mark.skipif(not _gpu_usable(), reason="needs a CUDA GPU (run by scripts/gpu_check.sh)")


def cuda(a):
    return torch.as_tensor(np.asarray(a)).cuda()


@gpu
def test_torch_cuda_in_torch_cuda_out_equal_to_torch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 33, generator=g).cuda()
    idx = torch.randint(0, 33, (64, 7), generator=g).cuda()
    out = gather.gather(x, 1, idx)
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.device == x.device
    assert torch.equal(out, torch.gather(x, 1, idx))
    src = torch.randn(64, 7, generator=g).cuda()
    got = gather.scatter_add(torch.zeros(64, 33).cuda(), 1, idx, src)
    want = torch.zeros(64, 33).cuda().scatter_add(1, idx, src)
    torch.testing.assert_close(got, want)
    values, indices = gather.sort(x, 1)
    assert torch.equal(values, torch.sort(x, 1, stable=True).values)
    assert torch.equal(indices, torch.sort(x, 1, stable=True).indices)
    rows = gather.index_select(x, 0, cuda([5, 0, 63]))
    assert torch.equal(rows, x[[5, 0, 63]])


@gpu
def test_gpu_results_equal_the_numpy_results_for_every_dtype():
    for dt in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
               torch.int8, torch.uint8, torch.bool]:
        x = (torch.arange(24) % 7).to(dt).reshape(4, 6)
        idx = torch.tensor([[5, 0], [1, 1], [2, 3], [0, 0]])
        got = gather.gather(x.cuda(), 1, idx.cuda())
        assert got.dtype == dt and got.is_cuda
        assert torch.equal(got.cpu(), gather.gather(x, 1, idx)), dt


@gpu
def test_strided_and_broadcast_cuda_views_are_read_without_a_copy():
    x = torch.arange(60.0).reshape(6, 10).cuda()
    view = x[:, ::2].t()  # [5, 6], strides (2, 10)
    idx = torch.tensor([[0], [5]]).cuda().expand(2, 6)  # stride 0 along dim 1
    assert torch.equal(gather.gather(view, 0, idx), torch.gather(view, 0, idx))


@gpu
def test_inplace_form_writes_into_the_cuda_tensors_own_memory_and_fails_atomically():
    x = torch.zeros(3).cuda()
    ptr = x.data_ptr()
    out = gather.scatter_add_(x, 0, cuda([0, 2, 0]), cuda([1.0, 2.0, 3.0]).float())
    assert out is x and x.data_ptr() == ptr
    assert x.tolist() == [4.0, 0.0, 2.0]
    base = torch.zeros(4, 6).cuda()
    gather.index_fill_(base[:, ::2], 1, cuda([2]), 7.0)
    want = torch.zeros(4, 6)
    want[:, 4] = 7.0
    assert torch.equal(base.cpu(), want)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_add_(x, 0, cuda([0, 3]), torch.ones(2).cuda())
    assert x.tolist() == [4.0, 0.0, 2.0]


@gpu
def test_bad_index_gives_the_cpu_error_on_the_gpu():
    x, idx = np.arange(6.0).reshape(2, 3), np.array([[0, 3]])
    with pytest.raises(gather.IndexOutOfBoundsError) as cpu:
        gather.gather(x, 1, idx)
    with pytest.raises(gather.IndexOutOfBoundsError) as dev:
        gather.gather(cuda(x), 1, cuda(idx))
    assert str(dev.value) == str(cpu.value)


@gpu
def test_mixed_devices_and_gpu_gradients_are_errors_that_say_so():
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        gather.gather(torch.ones(3).cuda(), 0, torch.tensor([0]))
    with pytest.raises(gather.InvalidArgumentError, match="GPU yet"):
        gather.grad.gather(torch.ones(1).cuda(), torch.ones(3).cuda(), 0, torch.tensor([0]).cuda())


@gpu
def test_work_on_a_side_stream_is_ordered_before_and_after_the_call():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.arange(1 << 20, device="cuda", dtype=torch.float32) * 2  # queued on s
        idx = torch.randint(0, 1 << 20, (1 << 18,), device="cuda")
        out = gather.take(x, idx)
        doubled = out * 2  # runs on s after the hand-off
        want = torch.take(x, idx) * 2
    torch.cuda.synchronize()
    assert torch.equal(doubled, want)


@gpu
def test_ten_thousand_gpu_calls_leave_torchs_memory_where_it_started():
    x = torch.randn(256, 64).cuda()
    idx = torch.randint(0, 256, (512, 1)).cuda().expand(512, 64)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(10_000):
        out = gather.gather(x, 0, idx)
    del out
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@gpu
def test_cupy_and_jax_gpu_arrays_come_back_as_their_own_type():
    cp = pytest.importorskip("cupy")
    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    out = gather.gather(x, 1, cp.array([[3], [0], [1]]))
    assert isinstance(out, cp.ndarray)
    assert out.get().ravel().tolist() == [3.0, 4.0, 9.0]
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    jnp = jax.numpy
    xj = jax.device_put(jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4), jax.devices("gpu")[0])
    ij = jax.device_put(jnp.array([[3], [0], [1]]), jax.devices("gpu")[0])
    outj = gather.gather(xj, 1, ij)
    assert isinstance(outj, jax.Array)
    assert np.asarray(outj).ravel().tolist() == [3.0, 4.0, 9.0]
    with pytest.raises(gather.InvalidArgumentError, match="read-only"):
        gather.scatter_(xj, 1, ij, 0.0)
