"""Property tests: every gradient of `gather.grad` against PyTorch's autograd on the same random
float64 tensors (the strategies of test_torch_props.py: strided views, int32 and int64 indices,
duplicate targets). Values are small integers, so that amax/amin ties, zeros in products and
repeated targets are common; the gradients are PyTorch's formulas, so they must agree to the last
bits (`parity="pytorch"` where the library's default corrects PyTorch's tie rule).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gather
from test_torch_props import SETTINGS, flat_problem, index_problem, problem

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F64 = [torch.float64]


def autograd(fn, tensors, g):
    """PyTorch's gradients of `fn(*tensors)` (its first output) for the output gradient `g`; zeros
    for a tensor the output does not depend on."""
    ts = [t.detach().clone().requires_grad_() for t in tensors]
    out = fn(*ts)
    out = out[0] if isinstance(out, tuple) else out
    grads = torch.autograd.grad(out, ts, g, allow_unused=True)
    return [torch.zeros_like(t) if d is None else d for t, d in zip(ts, grads)]


def output_grad(fn, tensors, seed):
    """An integer-valued output gradient of `fn(*tensors)`'s shape."""
    out = fn(*tensors)
    out = out[0] if isinstance(out, tuple) else out
    rng = np.random.default_rng(seed)
    return torch.from_numpy(np.asarray(rng.integers(-3, 4, size=tuple(out.shape)))).double()


def check(ours, theirs, tensors, seed):
    """`ours(g)` (one gradient, or one per tensor) equals PyTorch's gradients of `theirs`; where
    PyTorch's forward raises, the gradient raises too."""
    try:
        g = output_grad(theirs, tensors, seed)
    except RuntimeError:
        with pytest.raises(gather.GatherError):
            ours(torch.zeros(0, dtype=torch.float64))
        return
    want = autograd(theirs, tensors, g)
    got = ours(g)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert isinstance(a, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, (a, b)
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@SETTINGS
@given(problem(dtypes=F64, finite=True), st.integers(0, 2**32 - 1))
def test_gather_and_scatter_add_gradients_equal_pytorchs(p, seed):
    x, dim, index, src = p
    # PyTorch's backward requires src of the index's shape (the library's does not).
    src = src[tuple(slice(0, n) for n in index.shape)]
    check(lambda g: gather.grad.gather(g, x, dim, index), lambda x: torch.gather(x, dim, index), [x], seed)
    check(
        lambda g: gather.grad.scatter_add(g, x, dim, index, src),
        lambda x, s: torch.scatter_add(x, dim, index, s),
        [x, src],
        seed,
    )
    check(lambda g: gather.grad.scatter(g, x, dim, index, src), lambda x, s: torch.scatter(x, dim, index, s), [x, src], seed)
    check(lambda g: gather.grad.scatter(g, x, dim, index, value=2.0), lambda x: torch.scatter(x, dim, index, 2.0), [x], seed)


@SETTINGS
@given(problem(dtypes=F64, small=True, finite=True), st.sampled_from(["sum", "prod", "mean", "amax", "amin"]), st.booleans(), st.integers(0, 2**32 - 1))
def test_scatter_reduce_gradients_equal_pytorchs(p, reduce, include_self, seed):
    x, dim, index, src = p
    src = src[tuple(slice(0, n) for n in index.shape)]
    check(
        lambda g: gather.grad.scatter_reduce(g, x, dim, index, src, reduce, include_self=include_self, parity="pytorch"),
        lambda x, s: torch.scatter_reduce(x, dim, index, s, reduce, include_self=include_self),
        [x, src],
        seed,
    )


@SETTINGS
@given(index_problem(dtypes=F64, small=True, finite=True), st.sampled_from([None, 2.0, -0.5]), st.integers(0, 2**32 - 1))
def test_index_family_gradients_equal_pytorchs(p, alpha, seed):
    x, dim, index, source = p
    check(lambda g: gather.grad.index_select(g, x, dim, index), lambda x: torch.index_select(x, dim, index), [x], seed)
    kw = {} if alpha is None else {"alpha": alpha}
    check(
        lambda g: gather.grad.index_add(g, x, dim, index, source, **kw),
        lambda x, s: torch.index_add(x, dim, index, s, **kw),
        [x, source],
        seed,
    )
    check(lambda g: gather.grad.index_fill(g, x, dim, index, 3.0), lambda x: torch.index_fill(x, dim, index, 3.0), [x], seed)
    distinct = torch.unique(index) if index.numel() else index
    d = dim % x.dim()
    keep = source.index_select(d, torch.arange(len(distinct)))
    check(
        lambda g: gather.grad.index_copy(g, x, dim, distinct, keep),
        lambda x, s: torch.index_copy(x, dim, distinct, s),
        [x, keep],
        seed,
    )


@SETTINGS
@given(index_problem(dtypes=F64, small=True, finite=True), st.sampled_from(["prod", "mean", "amax", "amin"]), st.booleans(), st.integers(0, 2**32 - 1))
def test_index_reduce_gradients_equal_pytorchs(p, reduce, include_self, seed):
    x, dim, index, source = p
    check(
        lambda g: gather.grad.index_reduce(g, x, dim, index, source, reduce, include_self=include_self, parity="pytorch"),
        lambda x, s: torch.index_reduce(x, dim, index, s, reduce, include_self=include_self),
        [x, source],
        seed,
    )


@SETTINGS
@given(flat_problem(dtypes=F64, finite=True), st.booleans(), st.integers(0, 2**32 - 1))
def test_take_and_put_gradients_equal_pytorchs(p, accumulate, seed):
    x, index, source = p
    check(lambda g: gather.grad.take(g, x, index), lambda x: torch.take(x, index), [x], seed)
    if not accumulate:
        keep = np.unique(np.asarray(index) % max(x.numel(), 1), return_index=True)[1]
        index, source = index[keep], source[keep]
    check(
        lambda g: gather.grad.put(g, x, index, source, accumulate),
        lambda x, s: torch.put(x, index, s, accumulate),
        [x, source],
        seed,
    )


@SETTINGS
@given(problem(dtypes=F64, finite=True), st.booleans(), st.integers(0, 2**32 - 1))
def test_take_along_dim_masks_and_repeats_gradients_equal_pytorchs(p, flat, seed):
    x, dim, index, _ = p
    index = index.long()
    if flat:
        index = index.flatten().contiguous() % max(x.numel(), 1)
        check(lambda g: gather.grad.take_along_dim(g, x, index), lambda x: torch.take_along_dim(x.contiguous(), index), [x], seed)
    else:
        check(lambda g: gather.grad.take_along_dim(g, x, index, dim), lambda x: torch.take_along_dim(x, index, dim), [x], seed)
    rng = np.random.default_rng(seed)
    mask = torch.from_numpy(rng.random(tuple(x.shape)) < 0.5)
    check(lambda g: gather.grad.masked_select(g, x, mask), lambda x: torch.masked_select(x, mask), [x], seed)
    source = torch.arange(x.numel() + 1, dtype=torch.float64)
    check(
        lambda g: gather.grad.masked_scatter(g, x, mask, source),
        lambda x, s: torch.masked_scatter(x, mask, s),
        [x, source],
        seed,
    )
    repeats = torch.from_numpy(rng.integers(0, 3, size=x.shape[dim]))
    check(
        lambda g: gather.grad.repeat_interleave(g, x, repeats, dim),
        lambda x: torch.repeat_interleave(x, repeats, dim),
        [x],
        seed,
    )


@SETTINGS
@given(problem(dtypes=F64, finite=True, min_size=0), st.booleans(), st.data())
def test_sort_and_topk_gradients_equal_pytorchs(p, descending, data):
    x, dim, _, _ = p
    seed = data.draw(st.integers(0, 2**32 - 1))
    check(
        lambda g: gather.grad.sort(g, x, dim, descending, stable=True),
        lambda x: torch.sort(x, dim=dim, descending=descending, stable=True),
        [x],
        seed,
    )
    # Distinct values: topk leaves the order of ties, and so which one gets the gradient, open.
    distinct = torch.randperm(x.numel(), generator=torch.Generator().manual_seed(seed)).double().reshape(x.shape)
    k = data.draw(st.integers(0, x.shape[dim]))
    check(
        lambda g: gather.grad.topk(g, distinct, k, dim, descending),
        lambda x: torch.topk(x, k, dim, descending),
        [distinct],
        seed,
    )
