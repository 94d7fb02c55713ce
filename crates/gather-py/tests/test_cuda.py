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
    # In a gradient call too: an error, not a crash.
    with pytest.raises(ValueError):
        gather.grad.gather(np.ones(1), FakeCudaArray(), 0, np.array([0]))
    with pytest.raises(ValueError):
        gather.grad.gather(FakeCudaArray(), np.ones(3), 0, np.array([0]))


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
    assert torch.equal(values, torch.sort(x, dim=1, stable=True).values)
    assert torch.equal(indices, torch.sort(x, dim=1, stable=True).indices)
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
    idx = torch.tensor([[0], [4]]).cuda().expand(2, 6)  # stride 0 along dim 1
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
def test_mixed_devices_are_errors_that_say_so():
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        gather.gather(torch.ones(3).cuda(), 0, torch.tensor([0]))
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        gather.grad.gather(torch.ones(1), torch.ones(3).cuda(), 0, torch.tensor([0]).cuda())


def _autograd(f, *tensors):
    """torch's gradients of f(*tensors) at a random upstream gradient, on the GPU."""
    leaves = [t.detach().clone().cuda().requires_grad_() for t in tensors]
    out = f(*leaves)
    go = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(7)).cuda()
    out.backward(go)
    return go, [t.grad for t in leaves]


@gpu
def test_gradients_of_cuda_arrays_run_on_the_gpu_and_equal_torch_autograd():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 5, dtype=torch.float64, generator=g)
    idx = torch.randint(0, 5, (6, 4), generator=g)
    src = torch.randn(6, 4, dtype=torch.float64, generator=g)
    src[0, :2] = x[0].max()  # ties for amax
    src[1, 0] = 0.0  # a zero for prod
    ci = idx.cuda()
    go, (dx,) = _autograd(lambda a: torch.gather(a, 1, ci), x)
    got = gather.grad.gather(go, x.cuda(), 1, ci)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    torch.testing.assert_close(got, dx)
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            go, (dx, ds) = _autograd(
                lambda a, s: a.scatter_reduce(1, ci, s, reduce, include_self=include_self), x, src)
            gi, gs = gather.grad.scatter_reduce(go, x.cuda(), 1, ci, src.cuda(), reduce,
                                                include_self=include_self, parity="pytorch")
            torch.testing.assert_close(gi, dx, msg=f"{reduce} {include_self}")
            torch.testing.assert_close(gs, ds, msg=f"{reduce} {include_self}")
    rows = cuda([4, 0, 4])
    go, (dx,) = _autograd(lambda a: a.index_select(0, rows), x)
    torch.testing.assert_close(gather.grad.index_select(go, x.cuda(), 0, rows), dx)
    flat = cuda([29, -1, 3])
    go, (dx,) = _autograd(lambda a: torch.take(a, flat), x)
    torch.testing.assert_close(gather.grad.take(go, x.cuda(), flat), dx)
    along = torch.randint(0, 5, (1, 3), generator=g).cuda()
    go, (dx,) = _autograd(lambda a: torch.take_along_dim(a, along, 1), x[:1])
    torch.testing.assert_close(gather.grad.take_along_dim(go, x[:1].cuda(), along, 1), dx)
    source = torch.randn(3, 5, dtype=torch.float64, generator=g)
    go, (dx, dsrc) = _autograd(lambda a, s: a.index_add(0, rows, s, alpha=2.5), x, source)
    gi, gs = gather.grad.index_add(go, x.cuda(), 0, rows, source.cuda(), alpha=2.5)
    torch.testing.assert_close(gi, dx)
    torch.testing.assert_close(gs, dsrc)
    mask = cuda([[True, False, True, True, False]])
    go, (dx,) = _autograd(lambda a: torch.masked_select(a, mask), x)
    torch.testing.assert_close(gather.grad.masked_select(go, x.cuda(), mask), dx)
    fill = torch.randn(40, dtype=torch.float64, generator=g)
    go, (dx, ds) = _autograd(lambda a, s: a.masked_scatter(mask, s), x, fill)
    gi, gs = gather.grad.masked_scatter(go, x.cuda(), mask, fill.cuda())
    torch.testing.assert_close(gi, dx)
    torch.testing.assert_close(gs, ds)
    reps = cuda([2, 0, 1, 3, 1, 0])
    go, (dx,) = _autograd(lambda a: torch.repeat_interleave(a, reps, dim=0), x)
    torch.testing.assert_close(gather.grad.repeat_interleave(go, x.cuda(), reps, 0), dx)
    go, (dx,) = _autograd(lambda a: torch.repeat_interleave(a, 3), x)
    torch.testing.assert_close(gather.grad.repeat_interleave(go, x.cuda(), 3), dx)
    go, (dx,) = _autograd(lambda a: torch.sort(a, dim=1, stable=True).values, x)
    torch.testing.assert_close(gather.grad.sort(go, x.cuda(), 1, stable=True), dx)
    labels = torch.randint(0, 5, (6, 2), generator=g)
    picked = torch.randn(6, 2, dtype=torch.float64, generator=g)
    want = gather.grad.select_batched(picked.numpy(), x.numpy(), 1, labels.numpy(), 1)
    got = gather.grad.select_batched(picked.cuda(), x.cuda(), 1, labels.cuda(), 1)
    np.testing.assert_allclose(got.cpu().numpy(), want)
    half = x.float().half()
    go, (dx,) = _autograd(lambda a: torch.gather(a, 1, ci), half)
    got = gather.grad.gather(go, half.cuda(), 1, ci)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, dx)


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
def test_the_emulator_sweeps_give_the_numpy_outcomes_on_torch_cuda_tensors(monkeypatch):
    """The sweeps of test_cuda_emu.py (about 24,000 calls: every op, in-place form and gradient,
    and the ops by name, valid and with one or two faults at once) on torch CUDA tensors, with
    the GPU's own kernels and bad-index flag: each call gives the NumPy call's result, or the same
    error with the same message, and leaves its inputs as the NumPy call leaves them."""
    import test_cuda_emu as emu

    monkeypatch.setattr(emu, "dev", lambda a: torch.as_tensor(np.array(a)).cuda())
    monkeypatch.setattr(emu, "host", lambda r: r.detach().cpu().numpy())
    failed = []
    for sweep in emu.SWEEPS:
        try:
            sweep()
        except AssertionError as e:
            failed.append(f"{sweep.__name__}: {str(e)[:4000]}")
    assert not failed, "\n\n".join(failed)


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
    # Under jax.jit and jax.grad the op is a custom call of the CUDA handler (below).
    outj = jax.jit(lambda x: gather.gather(x, 1, ij))(xj)
    assert np.asarray(outj).ravel().tolist() == [3.0, 4.0, 9.0]
    grad = jax.grad(lambda x: gather.gather(x, 1, ij).sum())(xj)
    assert np.asarray(grad).ravel().tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0]


@gpu
def test_torch_func_per_example_gradients_on_cuda_tensors_equal_the_cpus(monkeypatch):
    """vmap and its gradient are one batched call each on the GPU (_batched_cuda, in torch's
    stream), and equal the CPU's."""
    from gather import _native

    calls = []
    real = _native._batched_cuda
    monkeypatch.setattr(_native, "_batched_cuda", lambda *a: calls.append(a[:2]) or real(*a))
    x = torch.randn(6, 5, 3, dtype=torch.float64)
    i = torch.randint(0, 5, (6, 2, 3))
    loss = lambda x, i: (gather.scatter_reduce(x, 0, i, x[:2] * 2, "amax", include_self=False) ** 2).sum()  # noqa: E731
    on_gpu = torch.func.vmap(torch.func.grad(loss))(x.cuda(), i.cuda())
    assert on_gpu.is_cuda
    assert calls == [("scatter_reduce", "inplace"), ("scatter_reduce", "grad")]
    torch.testing.assert_close(on_gpu.cpu(), torch.func.vmap(torch.func.grad(loss))(x, i))
    # The batch that follows reads what the calls wrote, in torch's stream order.
    xs = torch.randn(300, 64, 8, device="cuda")
    idx = torch.randint(0, 64, (300, 16, 8), device="cuda")
    got = torch.func.vmap(lambda r, j: gather.gather(r, 0, j))(xs, idx) + 1.0
    torch.testing.assert_close(got, torch.gather(xs, 1, idx) + 1.0, rtol=0, atol=0)


@gpu
def test_second_derivatives_and_forward_mode_of_cuda_tensors_equal_the_cpus():
    """create_graph, forward AD and torch.func.hessian on CUDA tensors: the derivatives are the
    ops themselves on the GPU (the products' curvature included) and equal the CPU's."""
    x, s = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    x[1, 2], s[2, 0] = 0.0, 0.0  # zeros in the products' groups
    i = torch.tensor([[0, 4, 4], [1, 1, 2], [3, 0, 0], [2, 2, 1]])
    forms = [
        lambda x, s, i: gather.gather(x, 1, i),
        lambda x, s, i: gather.scatter_reduce(x, 1, i, s, "amax"),
        lambda x, s, i: gather.scatter_reduce(x, 1, i, s, "prod"),
        lambda x, s, i: gather.sort(x, 1)[0] * gather.index_add(x, 1, i[0], s, alpha=2.0),
    ]
    for f in forms:
        loss = lambda x, s, i, f=f: (f(x, s, i) ** 3).sum()  # noqa: E731
        runs = {}
        for dev in ("cuda", "cpu"):
            a, b, j = x.to(dev), s.to(dev), i.to(dev)
            h = torch.func.hessian(loss, (0, 1))(a, b, j)
            t = torch.func.jvp(lambda a, b: f(a, b, j), (a, b), (torch.ones_like(a), torch.ones_like(b)))[1]
            a = a.clone().requires_grad_()
            (g,) = torch.autograd.grad(loss(a, b, j), a, create_graph=True)
            (gg,) = torch.autograd.grad(g.pow(2).sum(), a)
            assert all(v.device.type == dev for v in (h[0][0], t, gg))
            runs[dev] = (h, t, gg)
        torch.testing.assert_close(tuple(v.cpu() for v in torch.utils._pytree.tree_leaves(runs["cuda"])),
                                   tuple(torch.utils._pytree.tree_leaves(runs["cpu"])))


def _jax_on_gpu():
    """(jax, jax.numpy, JAX's GPUs, its CPU device), or the test skips."""
    jax = pytest.importorskip("jax")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    return jax, jax.numpy, gpus, jax.devices("cpu")[0]


@gpu
def test_jax_jit_hessians_and_jvps_on_the_gpu_equal_the_cpus():
    """jax.hessian and jax.jvp under jit on the GPU: the derivative ("lin"), gradient and
    curvature calls run on the GPU and equal the CPU's (runs with -k jax_jit)."""
    jax, jnp, gpus, cpu = _jax_on_gpu()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    s = rng.standard_normal((6, 3)).astype(np.float32)
    x[1, 2], s[2, 0] = 0.0, 0.0
    i = rng.integers(0, 5, (6, 3))

    def loss(x, s, i):
        return ((gather.scatter_reduce(x, 1, i, s, "prod") ** 2).sum() + (gather.gather(x, 1, i) ** 3).sum()
                + (gather.scatter_reduce(x, 1, i, s, "amax") * gather.sort(x, 1)[0]).sum())

    h = jax.jit(jax.hessian(loss, (0, 1)))
    t = jax.jit(lambda x, s, i: jax.jvp(lambda x, s: loss(x, s, i), (x, s), (jnp.ones_like(x), jnp.ones_like(s))))
    on = [jax.device_put(a, gpus[0]) for a in (x, s, i)]
    assert "callback" not in h.lower(*on).as_text()
    got, want = (h(*on), t(*on)), (h(*[jax.device_put(a, cpu) for a in (x, s, i)]),
                                   t(*[jax.device_put(a, cpu) for a in (x, s, i)]))
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.devices() == {gpus[0]}
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


@gpu
def test_jax_jit_runs_the_ops_on_the_gpu_in_xlas_stream_order():
    """jax.jit lowers the ops to the CUDA FFI handler: results equal the CPU handler's, stay on
    the GPU, follow XLA's stream order from call to call, and a bad index is XLA's error.
    scripts/gpu_check.sh runs this in a pytest of its own (-k jax_jit)."""
    jax, jnp, gpus, cpu = _jax_on_gpu()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 64)).astype(np.float32)
    s = rng.standard_normal((500, 64)).astype(np.float32)
    i = rng.integers(0, 300, (500, 64))

    def step(x, s, i):
        y = gather.scatter_add(x, 0, i, s)  # in place into the result that aliases x
        v, k = gather.topk(y, 3, 1)  # int64 indices as int32 pairs
        z = gather.gather(y, 1, k) * v
        return (z ** 2).sum() + gather.scatter_reduce(x, 0, i, s, "amax", include_self=False).sum()

    f = jax.jit(jax.value_and_grad(step, (0, 1)))
    on = [jax.device_put(a, gpus[0]) for a in (x, s, i)]
    text = f.lower(*on).as_text()
    assert "gather_op" in text and "callback" not in text
    got = f(*on)
    want = f(*[jax.device_put(a, cpu) for a in (x, s, i)])
    assert got[0].devices() == {gpus[0]} and got[1][0].devices() == {gpus[0]}
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    # Each call reads what the one before wrote: XLA's stream waits for ours, ours for XLA's.
    perm = jax.device_put(rng.permutation(300), gpus[0])
    shift = jax.jit(lambda y: gather.index_select(y, 0, perm) + 1.0)
    y, ref, p = on[0], x.copy(), np.asarray(perm)
    for _ in range(50):
        y, ref = shift(y), ref[p] + 1.0
    np.testing.assert_array_equal(np.asarray(y), ref)
    # A plan built from a GPU index applies there, with its gradient.
    plans = {"gpu": gather.ScatterPlan(on[2][:, 0], 300), "cpu": gather.ScatterPlan(i[:, 0], 300)}
    for reduce in ("sum", "amax"):
        runs = {}
        for where, dev in (("gpu", gpus[0]), ("cpu", cpu)):
            loss = lambda d, s, p=plans[where]: (p.scatter_reduce(d, s, reduce) ** 2).sum()  # noqa: E731
            runs[where] = jax.jit(jax.value_and_grad(loss, (0, 1)))(*[jax.device_put(a, dev) for a in (x, s)])
        assert "callback" not in jax.jit(lambda d, s: plans["gpu"].scatter_add(d, s)).lower(*on[:2]).as_text()
        np.testing.assert_allclose(np.asarray(runs["gpu"][0]), np.asarray(runs["cpu"][0]), rtol=1e-5)
        for g, w in zip(runs["gpu"][1], runs["cpu"][1]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    batched = jax.jit(jax.vmap(lambda r, j: gather.take(r, j)))(on[0][:4], on[2][:4, :5] % 64)
    np.testing.assert_array_equal(np.asarray(batched), np.take_along_axis(x[:4], i[:4, :5] % 64, 1))
    with pytest.raises(Exception, match="out of bounds|tried to access index"):
        jax.jit(lambda x: gather.take(x, jnp.array([10**6])))(on[0]).block_until_ready()


@gpu
def test_torch_scatter_keeps_cuda_tensors_on_the_gpu_and_equals_the_cpu_results():
    from gather import torch_scatter as ts

    g = torch.Generator().manual_seed(8)
    src = torch.randn(40, 3, dtype=torch.float64, generator=g)
    index = torch.randint(0, 7, (40,), generator=g)
    ids, ptr = index.sort().values, torch.tensor([0, 5, 5, 22, 40])
    calls = [
        lambda s, i, d, p: ts.scatter(s, i, 0, reduce="sum"),
        lambda s, i, d, p: ts.scatter(s, i, 0, dim_size=9, reduce="mean"),
        lambda s, i, d, p: ts.scatter_mul(s, i, 0),
        lambda s, i, d, p: ts.scatter_max(s, i, 0, dim_size=8),
        lambda s, i, d, p: ts.scatter_std(s, i, 0),
        lambda s, i, d, p: ts.scatter_logsumexp(s, i, 0),
        lambda s, i, d, p: ts.scatter_softmax(s, i, 0),
        lambda s, i, d, p: ts.segment_csr(s, p, reduce="max"),
        lambda s, i, d, p: ts.segment_coo(s, d, dim_size=9, reduce="mean"),
        lambda s, i, d, p: ts.gather_csr(s[:4], p),
        lambda s, i, d, p: ts.gather_coo(s, d[:9]),
    ]
    for k, call in enumerate(calls):
        want = call(src, index, ids, ptr)
        got = call(src.cuda(), index.cuda(), ids.cuda(), ptr.cuda())
        for w, o in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert isinstance(o, torch.Tensor) and o.is_cuda, k
            torch.testing.assert_close(o.cpu(), w, msg=str(k))
    # Gradients (the autograd Function) on the GPU, against the CPU's.
    for reduce in ["sum", "mean", "max"]:
        grads = []
        for dev in ["cpu", "cuda"]:
            x = src.clone().to(dev).requires_grad_()
            ts.scatter(x, index.to(dev), 0, dim_size=8, reduce=reduce).sin().sum().backward()
            grads.append(x.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], msg=reduce)


@gpu
def test_deterministic_false_reduces_by_atomics_on_cuda():
    g = torch.Generator().manual_seed(9)
    idx = torch.randint(0, 100, (5000, 1), generator=g).expand(5000, 16).cuda()
    src = torch.randn(5000, 16, generator=g).cuda()
    dst = torch.zeros(100, 16).cuda()
    got = gather.scatter_add(dst, 0, idx, src, deterministic=False)
    torch.testing.assert_close(got, dst.scatter_add(0, idx, src))
    x = torch.zeros(100, 16, dtype=torch.int64).cuda()
    ints = torch.randint(-9, 9, (5000, 16), generator=g).cuda()
    assert torch.equal(gather.scatter_add(x, 0, idx, ints, deterministic=False), x.scatter_add(0, idx, ints))
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.scatter_add(dst, 0, idx + 100, src, deterministic=False)
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            got = gather.scatter_reduce(dst + 1, 0, idx, src.tanh(), reduce, include_self=include_self,
                                        deterministic=False)
            want = (dst + 1).scatter_reduce(0, idx, src.tanh(), reduce, include_self=include_self)
            torch.testing.assert_close(got, want, msg=f"{reduce} {include_self}")


@gpu
def test_a_plan_of_a_cuda_index_runs_on_its_gpu_and_equals_torch():
    g = torch.Generator().manual_seed(8)
    ids = torch.randint(0, 1000, (50_000,), generator=g).cuda()
    plan = gather.ScatterPlan(ids, 1000)
    assert (len(plan), plan.size, plan.device) == (50_000, 1000, "cuda:0")
    dst = torch.randn(1000, 64, generator=g).cuda()
    idx = ids[:, None].expand(50_000, 64)
    for _ in range(2):
        src = torch.randn(50_000, 64, generator=g).cuda()
        out = plan.scatter_add(dst, src)
        assert out.is_cuda and out.dtype == torch.float32
        assert torch.equal(out, gather.scatter_add(dst, 0, idx, src))
        torch.testing.assert_close(out, dst.scatter_add(0, idx, src), rtol=1e-4, atol=1e-4)
        got = plan.scatter_reduce(dst, src, "amax", include_self=False)
        assert torch.equal(got, dst.scatter_reduce(0, idx, src, "amax", include_self=False))
    with pytest.raises(gather.InvalidArgumentError, match="host memory"):
        plan.scatter_add(dst.cpu(), src.cpu())


@gpu
def test_torch_autograd_records_the_ops_on_cuda_tensors_with_torchs_gradients():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(50, 8, dtype=torch.float64, generator=g).cuda().requires_grad_()
    src = torch.randn(300, 8, dtype=torch.float64, generator=g).cuda().requires_grad_()
    rows = torch.randint(0, 50, (300, 1), generator=g).cuda().expand(300, 8)
    out = gather.scatter_add(x, 0, rows, src)  # deterministic by default, on the GPU
    assert out.is_cuda and out.grad_fn is not None
    w = torch.randn(50, 8, dtype=torch.float64, generator=g).cuda()
    (out * w).sum().backward()
    x2, s2 = x.detach().clone().requires_grad_(), src.detach().clone().requires_grad_()
    (torch.scatter_add(x2, 0, rows, s2) * w).sum().backward()
    torch.testing.assert_close(out, torch.scatter_add(x2, 0, rows, s2))
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(src.grad, s2.grad)
    assert src.grad.is_cuda
    assert torch.autograd.gradcheck(lambda a: gather.gather(a, 0, rows[:20]), (x,))


@gpu
def test_torch_compile_keeps_the_ops_and_a_plan_in_the_graph_on_cuda():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(40, 8, dtype=torch.float32, generator=g).cuda()
    src = torch.randn(200, 8, dtype=torch.float32, generator=g).cuda()
    rows = torch.randint(0, 40, (200, 1), generator=g).cuda().expand(200, 8)

    plan = gather.ScatterPlan(rows[:, 0].contiguous(), 40)

    def step(a, s):
        v, _ = gather.sort(a, 1)
        return ((gather.scatter_add(a, 0, rows, s) * gather.gather(a, 0, rows[:40])).sum()
                + (plan.scatter_reduce(a, s, "amax") * v).sum() + gather.masked_select(a, a > 0).sum())

    mine = [x.clone().requires_grad_(), src.clone().requires_grad_()]
    ref = [x.clone().requires_grad_(), src.clone().requires_grad_()]
    got = torch.compile(step, fullgraph=True)(*mine)
    want = step(*ref)
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    for a, b in zip(mine, ref):
        torch.testing.assert_close(a.grad, b.grad)
        assert a.grad.is_cuda
