"""PyTorch's ``out=``: every op whose torch function takes it writes its result into the caller's
array and returns it, with torch's rules (dtype, resizing, no autograd), on NumPy and torch."""

import warnings

import numpy as np
import pytest

import gather

torch = pytest.importorskip("torch")

X = np.arange(12.0).reshape(3, 4)
IDX = np.array([[0, 3], [2, 1], [1, 1]])
ROWS = np.array([2, 0])
SRC = np.full((3, 2), 0.5)
SOURCE = np.full((2, 4), 0.25)

# Each op with out=, as (the call with the arrays given, torch's own function on tensors).
CALLS = {
    "gather": (lambda a, **k: gather.gather(a(X), 1, a(IDX), **k),
               lambda a, **k: torch.gather(a(X), 1, a(IDX), **k)),
    "scatter": (lambda a, **k: gather.scatter(a(X), 1, a(IDX), a(SRC), **k),
                lambda a, **k: torch.scatter(a(X), 1, a(IDX), a(SRC), **k)),
    "scatter_add": (lambda a, **k: gather.scatter_add(a(X), 1, a(IDX), a(SRC), **k),
                    lambda a, **k: torch.scatter_add(a(X), 1, a(IDX), a(SRC), **k)),
    "scatter_reduce": (lambda a, **k: gather.scatter_reduce(a(X), 1, a(IDX), a(SRC), "amin", **k),
                       lambda a, **k: torch.scatter_reduce(a(X), 1, a(IDX), a(SRC), "amin", **k)),
    "index_select": (lambda a, **k: gather.index_select(a(X), 0, a(ROWS), **k),
                     lambda a, **k: torch.index_select(a(X), 0, a(ROWS), **k)),
    "index_add": (lambda a, **k: gather.index_add(a(X), 0, a(ROWS), a(SOURCE), **k),
                  lambda a, **k: torch.index_add(a(X), 0, a(ROWS), a(SOURCE), **k)),
    "index_copy": (lambda a, **k: gather.index_copy(a(X), 0, a(ROWS), a(SOURCE), **k),
                   lambda a, **k: torch.index_copy(a(X), 0, a(ROWS), a(SOURCE), **k)),
    "index_reduce": (lambda a, **k: gather.index_reduce(a(X), 0, a(ROWS), a(SOURCE), "prod", **k),
                     lambda a, **k: torch.index_reduce(a(X), 0, a(ROWS), a(SOURCE), "prod", **k)),
    "take": (lambda a, **k: gather.take(a(X), a(IDX), **k),
             lambda a, **k: torch.take(a(X), a(IDX), **k)),
    "take_along_dim": (lambda a, **k: gather.take_along_dim(a(X), a(IDX), 1, **k),
                       lambda a, **k: torch.take_along_dim(a(X), a(IDX), 1, **k)),
    "masked_select": (lambda a, **k: gather.masked_select(a(X), a(X % 3 == 1), **k),
                      lambda a, **k: torch.masked_select(a(X), a(X % 3 == 1), **k)),
    "sort": (lambda a, **k: gather.sort(a(X), 1, True, **k),
             lambda a, **k: torch.sort(a(X), 1, True, **k)),
    "topk": (lambda a, **k: gather.topk(a(X), 2, 1, **k),
             lambda a, **k: torch.topk(a(X), 2, 1, **k)),
}
PAIRS = {"sort", "topk"}


def _np(v):
    return np.asarray(v)


def _torch(v):
    return torch.from_numpy(np.ascontiguousarray(v))


def _buffers(result, make):
    """Buffers of the result's shape and dtype, made by ``make(shape, dtype)``."""
    if isinstance(result, tuple):
        return tuple(make(r.shape, r.dtype) for r in result)
    return make(result.shape, result.dtype)


def _same(got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("op", sorted(CALLS))
def test_numpy_out_receives_the_result_and_is_returned(op):
    ours, _ = CALLS[op]
    want = ours(_np)
    out = _buffers(want, lambda s, d: np.full(s, 99, d))
    got = ours(_np, out=out)
    if op in PAIRS:
        assert got[0] is out[0] and got[1] is out[1]
    else:
        assert got is out
    _same(out, want)


@pytest.mark.parametrize("op", sorted(CALLS))
def test_torch_out_is_written_as_torchs_own_out_is(op):
    ours, theirs = CALLS[op]
    # An empty out is resized silently, as torch resizes it.
    out = _buffers(ours(_torch), lambda s, d: torch.empty(0, dtype=d))
    expect = _buffers(ours(_torch), lambda s, d: torch.empty(0, dtype=d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ours(_torch, out=out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce's beta warning
        theirs(_torch, out=expect)
    for g, o in zip(got if op in PAIRS else (got,), out if op in PAIRS else (out,)):
        assert g is o
    _same(out, expect)


def test_torch_out_of_another_shape_is_resized_with_torchs_warning():
    out, theirs = torch.full((5,), 7.0, dtype=torch.float64), torch.full((5,), 7.0, dtype=torch.float64)
    with pytest.warns(UserWarning, match="was resized since it had shape \\[5\\]") as ours_w:
        gather.gather(_torch(X), 1, _torch(IDX), out=out)
    with pytest.warns(UserWarning) as torch_w:
        torch.gather(_torch(X), 1, _torch(IDX), out=theirs)
    # torch's ends with where in its C++ it was raised.
    assert str(torch_w[0].message).startswith(str(ours_w[0].message))
    assert torch.equal(out, theirs) and out.shape == (3, 2)


def test_torch_out_keeps_its_own_strides():
    # A transposed buffer stays transposed: the values land through its strides, as in torch.
    out = torch.empty(2, 3, dtype=torch.float64).T
    gather.gather(_torch(X), 1, _torch(IDX), out=out)
    assert out.stride() == (1, 3)
    assert torch.equal(out, torch.gather(_torch(X), 1, _torch(IDX)))


def test_numpy_out_of_another_shape_or_dtype_is_an_error_and_stays_unchanged():
    out = np.zeros((2, 3))
    with pytest.raises(gather.ShapeMismatchError, match=r"out has shape \(2, 3\), but the result's is \(3, 2\)") as e:
        gather.gather(X, 1, IDX, out=out)
    assert e.value.hint.startswith("pass out of shape (3, 2)")
    out = np.zeros((3, 2), np.float32)
    with pytest.raises(gather.DTypeError, match="out has dtype float32, but the result's dtype is float64"):
        gather.gather(X, 1, IDX, out=out)
    assert not out.any()
    with pytest.raises(gather.DTypeError, match="dtype torch.float32"):
        gather.gather(_torch(X), 1, _torch(IDX), out=torch.empty(3, 2, dtype=torch.float32))


def test_out_that_cannot_be_written_is_refused_before_the_op_runs():
    ro = np.zeros((3, 2))
    ro.flags.writeable = False
    with pytest.raises(gather.InvalidArgumentError, match="read-only"):
        gather.gather(X, 1, IDX, out=ro)
    with pytest.raises(gather.InvalidArgumentError, match="read-only"):
        gather.gather(X, 1, IDX, out=np.broadcast_to(np.zeros(2), (3, 2)))
    with pytest.raises(gather.InvalidArgumentError, match="must be an array"):
        gather.gather(X, 1, IDX, out=[[0, 0]] * 3)
    with pytest.raises(gather.InvalidArgumentError, match="the result is a torch.Tensor"):
        gather.gather(_torch(X), 1, _torch(IDX), out=np.zeros((3, 2)))
    with pytest.raises(gather.InvalidArgumentError, match="pair"):
        gather.sort(X, out=np.zeros((3, 4)))


def test_failing_call_leaves_out_unchanged():
    out = np.full((3, 2), 5.0)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.gather(X, 1, IDX + 2, out=out)
    assert (out == 5.0).all()


def test_out_sharing_memory_with_the_input_gets_the_right_values():
    # The op runs out of place first, so out may be an argument (PyTorch refuses this case).
    x = np.arange(6.0).reshape(3, 2)
    want = gather.gather(x, 1, np.array([[1, 0], [1, 1], [0, 0]]))
    assert gather.gather(x, 1, np.array([[1, 0], [1, 1], [0, 0]]), out=x) is x
    np.testing.assert_array_equal(x, want)


def test_out_is_not_recorded_by_autograd_as_in_pytorch():
    x = _torch(X).requires_grad_()
    with pytest.raises(gather.InvalidArgumentError, match="not recorded by autograd") as e:
        gather.gather(x, 1, _torch(IDX), out=torch.empty(0, dtype=torch.float64))
    assert "torch.no_grad()" in e.value.hint
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.gather(x, 1, _torch(IDX), out=torch.empty(0, dtype=torch.float64))
    out = torch.empty(0, dtype=torch.float64)
    with torch.no_grad():
        gather.gather(x, 1, _torch(IDX), out=out)
    assert torch.equal(out, torch.gather(x.detach(), 1, _torch(IDX)))
    with pytest.raises(gather.InvalidArgumentError, match="requires grad"):
        gather.gather(_torch(X), 1, _torch(IDX), out=torch.zeros(3, 2, dtype=torch.float64, requires_grad=True))


def test_immutable_outs_are_refused_with_the_fix():
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(gather.InvalidArgumentError, match="JAX array, which is immutable") as e:
        gather.gather(jnp.asarray(X), 1, jnp.asarray(IDX), out=jnp.zeros((3, 2)))
    assert "take the array gather.gather returns" in e.value.hint
    da = pytest.importorskip("dask.array")
    with pytest.raises(gather.InvalidArgumentError, match="Dask array, which is immutable"):
        gather.gather(X, 1, IDX, out=da.zeros((3, 2)))


def test_gather_takes_sparse_grad_false_and_refuses_true():
    np.testing.assert_array_equal(gather.gather(X, 1, IDX, sparse_grad=False), gather.gather(X, 1, IDX))
    with pytest.raises(gather.InvalidArgumentError, match="sparse_grad=True"):
        gather.gather(X, 1, IDX, sparse_grad=True)


def test_ops_without_out_in_pytorch_do_not_take_it():
    with pytest.raises(TypeError):
        gather.put(X, ROWS, np.ones(2), out=np.zeros((3, 4)))
    with pytest.raises(TypeError):
        gather.argsort(X, out=np.zeros((3, 4), np.int64))


def test_out_works_inside_torch_compile_with_fullgraph():
    x, i = _torch(X), _torch(IDX)

    @torch.compile(fullgraph=True)
    def f(x, i, out):
        gather.gather(x, 1, i, out=out)
        return out * 2

    out = torch.empty(3, 2, dtype=torch.float64)
    assert torch.equal(f(x, i, out), 2 * torch.gather(x, 1, i))
    assert torch.equal(out, torch.gather(x, 1, i))


def test_an_inference_out_is_refused_outside_inference_mode():
    with torch.inference_mode():
        out = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(gather.InvalidArgumentError, match="inference tensor"):
        gather.gather(_torch(X), 1, _torch(IDX), out=out)
    assert not out.any()
    with torch.inference_mode():
        gather.gather(_torch(X), 1, _torch(IDX), out=out)
    assert torch.equal(out, torch.gather(_torch(X), 1, _torch(IDX)))
