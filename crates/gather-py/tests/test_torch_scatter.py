"""gather.torch_scatter against pytorch_scatter's semantics: its README example, and plain-Python
references of each function (written from pytorch_scatter 2.1's definitions)."""

import math

import numpy as np
import pytest

from gather import torch_scatter as ts


def groups_ref(src, index, dim_size, reduce):
    """pytorch_scatter's scatter along dim 0 of a 2-D src with a 1-D index, in plain Python:
    (values, arg) with empty groups 0 (1 for mul) and arg src.shape[0] where nothing won."""
    n, f = src.shape
    out = np.zeros((dim_size, f), src.dtype)
    arg = np.full((dim_size, f), n, np.int64)
    for g in range(dim_size):
        rows = [j for j in range(n) if index[j] == g]
        for c in range(f):
            vals = [src[j, c] for j in rows]
            if reduce == "mul":
                out[g, c] = math.prod(vals) if vals else 1
            elif not vals:
                continue
            elif reduce == "sum":
                out[g, c] = sum(vals)
            elif reduce == "mean":
                s = sum(vals)
                out[g, c] = s / len(vals) if np.issubdtype(src.dtype, np.floating) else s // len(vals)
            else:
                best = max(vals) if reduce == "max" else min(vals)
                out[g, c] = best
                arg[g, c] = rows[vals.index(best)]
    return out, arg


SRC = np.array([[1.0, -2.0], [3.0, 5.0], [-1.0, 0.5], [7.0, 2.0], [2.0, 2.0], [3.0, -4.0]])
INDEX = np.array([0, 2, 0, 2, 4, 0])  # groups 1 and 3 are empty


@pytest.mark.parametrize("reduce", ["sum", "mul", "mean", "min", "max"])
def test_scatter_matches_the_reference_with_empty_groups(reduce):
    want, _ = groups_ref(SRC, INDEX, 5, reduce)
    np.testing.assert_allclose(ts.scatter(SRC, INDEX, 0, dim_size=5, reduce=reduce), want, rtol=1e-12)
    # The default dim_size is index.max() + 1.
    np.testing.assert_allclose(ts.scatter(SRC, INDEX, 0, reduce=reduce), want, rtol=1e-12)


def test_integer_mean_rounds_toward_negative_infinity():
    src = np.array([[-3], [0], [4], [1]], np.int64)
    got = ts.scatter_mean(src, np.array([0, 0, 1, 1]), 0)
    np.testing.assert_array_equal(got, [[-2], [2]])


@pytest.mark.parametrize("fn,reduce", [(ts.scatter_max, "max"), (ts.scatter_min, "min")])
def test_scatter_min_max_return_the_winners_positions_and_the_sentinel(fn, reduce):
    want, want_arg = groups_ref(SRC, INDEX, 5, reduce)
    out, arg = fn(SRC, INDEX, 0, dim_size=5)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(arg, want_arg)


def test_the_pytorch_scatter_readme_example():
    src = np.array([[2, 0, 1, 4, 3], [0, 2, 1, 3, 4]])
    index = np.array([[4, 5, 4, 2, 3], [0, 0, 2, 2, 1]])
    out, argmax = ts.scatter_max(src, index, dim=-1)
    np.testing.assert_array_equal(out, [[0, 0, 4, 3, 2, 0], [2, 4, 3, 0, 0, 0]])
    np.testing.assert_array_equal(argmax, [[5, 5, 3, 4, 0, 1], [1, 4, 3, 5, 5, 5]])


def test_given_out_takes_part_and_is_written_in_place():
    out = np.ones((5, 2))
    got = ts.scatter_sum(SRC, INDEX, 0, out=out)
    assert got is out
    np.testing.assert_allclose(out, groups_ref(SRC, INDEX, 5, "sum")[0] + 1)
    out = np.full((5, 2), 4.0)
    got, arg = ts.scatter_max(SRC, INDEX, 0, out=out)
    assert got is out
    want = np.maximum(groups_ref(SRC, INDEX, 5, "max")[0], 4.0)
    want[[1, 3]] = 4.0
    np.testing.assert_array_equal(out, want)
    # Where out's own value won, arg is the sentinel.
    assert arg[1, 0] == 6 and arg[0, 0] == 6


def test_mean_with_out_adds_then_divides_by_the_counts():
    out = np.ones((5, 2))
    ts.scatter_mean(SRC, INDEX, 0, out=out)
    sums = groups_ref(SRC, INDEX, 5, "sum")[0] + 1
    counts = np.maximum(np.bincount(INDEX, minlength=5), 1)[:, None]
    np.testing.assert_allclose(out, sums / counts)


def test_segments_and_their_inverses():
    src = np.arange(12.0).reshape(6, 2)
    indptr = np.array([0, 2, 2, 6])
    np.testing.assert_array_equal(ts.segment_csr(src, indptr), [[2, 4], [0, 0], [28, 32]])
    np.testing.assert_array_equal(ts.segment_csr(src, indptr, reduce="mean"), [[1, 2], [0, 0], [7, 8]])
    values, arg = ts.segment_csr(src, indptr, reduce="max")
    np.testing.assert_array_equal(values, [[2, 3], [0, 0], [10, 11]])
    np.testing.assert_array_equal(arg, [[1, 1], [6, 6], [5, 5]])
    ids = np.array([0, 0, 2, 2, 2, 2])
    np.testing.assert_array_equal(ts.segment_coo(src, ids), ts.segment_csr(src, indptr))
    np.testing.assert_array_equal(ts.segment_coo(src, ids, dim_size=4)[3], [0, 0])
    np.testing.assert_array_equal(ts.gather_csr(np.array([[1.0], [2.0], [3.0]]), indptr), [[1], [1], [3], [3], [3], [3]])
    np.testing.assert_array_equal(ts.gather_coo(np.array([[1.0], [2.0], [3.0]]), ids), [[1], [1], [3], [3], [3], [3]])
    with pytest.raises(ValueError, match="1-D"):
        ts.segment_csr(src, indptr[None, :])


def test_softmax_logsumexp_and_std_follow_pytorch_scatter():
    x = np.array([1.0, 2.0, 3.0, 0.5])
    idx = np.array([0, 0, 2, 2])
    sm = ts.scatter_softmax(x, idx, 0)
    e = np.exp(x - np.array([2.0, 2.0, 3.0, 3.0]))
    np.testing.assert_allclose(sm, e / np.array([e[:2].sum()] * 2 + [e[2:].sum()] * 2))
    np.testing.assert_allclose(ts.scatter_log_softmax(x, idx, 0), np.log(sm))
    lse = ts.scatter_logsumexp(x, idx, 0)
    np.testing.assert_allclose(lse, [np.log(np.exp(1) + np.exp(2)), np.log(1e-12), np.log(np.exp(3) + np.exp(0.5))])
    std = ts.scatter_std(np.array([1.0, 3.0, 5.0]), np.array([0, 0, 1]), 0)
    np.testing.assert_allclose(std, [np.sqrt(2.0), 0.0])  # one-element group: 0, not NaN
    std = ts.scatter_std(np.array([1.0, 3.0]), np.array([0, 0]), 0, unbiased=False)
    np.testing.assert_allclose(std, [1.0])


def test_torch_tensors_in_and_out_and_pytorch_agrees():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    src = torch.rand(1000, 16, generator=g)
    index = torch.randint(0, 100, (1000,), generator=g)
    out = ts.scatter(src, index, 0, dim_size=100, reduce="sum")
    assert isinstance(out, torch.Tensor)
    ref = torch.zeros(100, 16).index_add_(0, index, src)
    torch.testing.assert_close(out, ref)
    mx = ts.scatter(src, index, 0, dim_size=100, reduce="max")
    full = index[:, None].expand_as(src)
    ref = torch.zeros(100, 16).scatter_reduce(0, full, src, "amax", include_self=False)
    assert torch.equal(mx, ref)
    values, arg = ts.scatter_max(src, index, 0, dim_size=100)
    assert isinstance(arg, torch.Tensor) and arg.dtype == torch.int64
    hit = arg < 1000
    assert torch.equal(src.gather(0, arg.clamp(max=999))[hit], values[hit])
    o = torch.zeros(100, 16)
    assert ts.scatter_sum(src, index, 0, out=o) is o
    torch.testing.assert_close(o, torch.zeros(100, 16).index_add_(0, index, src))


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize(
    "call",
    [
        lambda ts_, x, i: ts_.scatter(x, i, 0, dim_size=6, reduce="sum"),
        lambda ts_, x, i: ts_.scatter(x, i, 0, dim_size=6, reduce="mean"),
        lambda ts_, x, i: ts_.scatter(x, i, 0, dim_size=6, reduce="max"),
        lambda ts_, x, i: ts_.scatter_min(x, i, 0, dim_size=6)[0],
        lambda ts_, x, i: ts_.scatter_mul(x, i, 0, dim_size=6),
        lambda ts_, x, i: ts_.scatter_softmax(x, i, 0),
        lambda ts_, x, i: ts_.scatter_log_softmax(x, i, 0),
        lambda ts_, x, i: ts_.scatter_logsumexp(x, i, 0, dim_size=6),
        lambda ts_, x, i: ts_.scatter_std(x, i, 0, dim_size=6),
        lambda ts_, x, i: ts_.segment_coo(x, i.sort().values, dim_size=6, reduce="mean"),
        lambda ts_, x, i: ts_.gather_coo(x, i.sort().values),
        lambda ts_, x, i: ts_.segment_csr(x, __import__("torch").tensor([0, 3, 3, 7, 10])),
        lambda ts_, x, i: ts_.gather_csr(x[:4], __import__("torch").tensor([0, 3, 3, 7, 10])),
    ],
)
def test_gradients_and_their_gradients_match_finite_differences(call):
    torch = _torch()
    g = torch.Generator().manual_seed(3)
    # Distinct values away from 0: no ties for max/min, no division by 0 for mul.
    x = (torch.randperm(30, generator=g).double().reshape(10, 3) / 7 + 0.5).requires_grad_()
    i = torch.tensor([0, 2, 0, 5, 2, 2, 1, 0, 5, 2])
    assert torch.autograd.gradcheck(lambda t: call(ts, t, i), (x,))
    assert torch.autograd.gradgradcheck(lambda t: call(ts, t, i), (x,))


def test_pyg_style_message_passing_matches_pytorch_forward_and_backward():
    torch = _torch()
    g = torch.Generator().manual_seed(4)
    n, e, f = 50, 400, 8
    x = torch.randn(n, f, generator=g, requires_grad=True)
    w = torch.randn(f, f, generator=g, requires_grad=True)
    edge = torch.randint(0, n, (2, e), generator=g)
    for reduce, torch_reduce in [("sum", "sum"), ("mean", "mean"), ("max", "amax")]:
        msgs = (x @ w)[edge[0]]
        ours = ts.scatter(msgs, edge[1], dim=0, dim_size=n, reduce=reduce)
        (ours.sin().sum()).backward()
        gx, gw = x.grad.clone(), w.grad.clone()
        x.grad, w.grad = None, None
        msgs = (x @ w)[edge[0]]
        idx = edge[1][:, None].expand(e, f)
        ref = torch.zeros(n, f).scatter_reduce(0, idx, msgs, torch_reduce, include_self=False)
        (ref.sin().sum()).backward()
        torch.testing.assert_close(ours, ref)
        torch.testing.assert_close(gx, x.grad, msg=reduce)
        torch.testing.assert_close(gw, w.grad, msg=reduce)
        x.grad, w.grad = None, None


def test_out_with_the_negative_bit_is_written_with_its_sign():
    # z.conj().imag is a view whose memory holds the values negated; a NumPy or DLPack view of
    # it drops the bit, so writes through one would land with the wrong sign.
    torch = _torch()
    src, index = torch.from_numpy(SRC), torch.from_numpy(INDEX)
    ids, ptr = index.sort().values, torch.tensor([0, 2, 2, 5, 6])
    calls = [
        (5, lambda out: ts.scatter_sum(src, index, 0, out=out)),
        (5, lambda out: ts.scatter_mean(src, index, 0, out)),
        (5, lambda out: ts.scatter_max(src, index, 0, out=out)),
        (5, lambda out: ts.scatter(src, index, 0, out=out, reduce="mul")),
        (5, lambda out: ts.segment_coo(src, ids, out=out, reduce="mean")),
        (4, lambda out: ts.segment_csr(src, ptr, out=out, reduce="min")),
    ]
    for rows, call in calls:
        z = torch.complex(torch.zeros(rows, 2, dtype=torch.float64), torch.full((rows, 2), 2.0, dtype=torch.float64))
        plain = torch.full((rows, 2), 2.0, dtype=torch.float64)
        view = z.conj().imag  # -2 everywhere, through the negative bit
        plain.neg_()
        assert view.is_neg()
        got, want = call(view), call(plain)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert got[0] is view
        torch.testing.assert_close(view, plain, rtol=0, atol=0)
        torch.testing.assert_close(z.imag, -plain, rtol=0, atol=0)
        for g, w in zip(got[1:], want[1:]):
            torch.testing.assert_close(g, w)


def test_out_with_gradients_is_a_clear_error():
    torch = _torch()
    x = torch.ones(3, 2, requires_grad=True)
    with pytest.raises(TypeError, match="out="):
        ts.scatter_sum(x, torch.tensor([0, 1, 0]), 0, out=torch.zeros(2, 2))


def _device_calls(torch):
    """Calls of every function, on torch tensors: (name, call(module, src, int_src))."""
    g = torch.Generator().manual_seed(5)
    index = torch.randint(0, 7, (40,), generator=g)
    index2d = torch.randint(0, 6, (40, 3), generator=g)
    ids = index.sort().values
    ptr = torch.tensor([0, 5, 5, 22, 40])
    return [
        ("sum", lambda m, s, i: m.scatter(s, index, 0, reduce="sum")),
        ("sum 2-d index", lambda m, s, i: m.scatter(s, index2d, 0, dim_size=8)),
        ("mean", lambda m, s, i: m.scatter(s, index, 0, dim_size=9, reduce="mean")),
        ("int mean", lambda m, s, i: m.scatter_mean(i, index2d, 0)),
        ("mul", lambda m, s, i: m.scatter_mul(s, index, 0)),
        ("max", lambda m, s, i: m.scatter_max(s, index, 0, dim_size=8)),
        ("min", lambda m, s, i: m.scatter(s, index2d, 0, reduce="min")),
        ("max out", lambda m, s, i: m.scatter_max(s, index, 0, out=torch.full((7, 3), 0.5, dtype=s.dtype))),
        ("sum out", lambda m, s, i: m.scatter_sum(s, index, 0, out=torch.ones(7, 3, dtype=s.dtype))),
        ("mean out", lambda m, s, i: m.scatter_mean(s, index, 0, out=torch.ones(7, 3, dtype=s.dtype))),
        ("std", lambda m, s, i: m.scatter_std(s, index, 0, dim_size=8)),
        ("logsumexp", lambda m, s, i: m.scatter_logsumexp(s, index, 0)),
        ("softmax", lambda m, s, i: m.scatter_softmax(s, index, 0)),
        ("log_softmax", lambda m, s, i: m.scatter_log_softmax(s, index2d, 0)),
        ("segment_csr", lambda m, s, i: m.segment_csr(s, ptr, reduce="mean")),
        ("segment_csr max", lambda m, s, i: m.segment_csr(s, ptr, reduce="max")),
        ("segment_coo", lambda m, s, i: m.segment_coo(s, ids, dim_size=9)),
        ("segment_coo out", lambda m, s, i: m.segment_coo(s, ids, out=torch.zeros(7, 3, dtype=s.dtype))),
        ("gather_csr", lambda m, s, i: m.gather_csr(s[:4], ptr)),
        ("gather_coo", lambda m, s, i: m.gather_coo(s, ids[:9])),
    ]


def _same(a, b, what):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), what
        for x, y in zip(a, b):
            _same(x, y, what)
        return
    import torch

    assert isinstance(b, torch.Tensor), f"{what}: {type(b)}"
    torch.testing.assert_close(b, a, msg=what)


def test_the_gpu_arrays_path_gives_the_numpy_paths_results(monkeypatch):
    """The steps a GPU src takes (its framework's array operations between the library's
    kernels, nothing through NumPy), run here on torch CPU tensors, against the NumPy path."""
    torch = _torch()
    g = torch.Generator().manual_seed(6)
    src = torch.randn(40, 3, dtype=torch.float64, generator=g)
    isrc = torch.randint(-9, 9, (40, 3), generator=g)
    calls = _device_calls(torch)
    want = [call(ts, src, isrc) for _, call in calls]
    monkeypatch.setattr(ts, "_on_device", lambda x: isinstance(x, torch.Tensor))
    for (name, call), w in zip(calls, want):
        _same(w, call(ts, src, isrc), name)
    # The gradients on that path too.
    x = (torch.randperm(30, generator=g).double().reshape(10, 3) / 7 + 0.5).requires_grad_()
    i = torch.tensor([0, 2, 0, 5, 2, 2, 1, 0, 5, 2])
    for name, call in [
        ("mean", lambda t: ts.scatter(t, i, 0, dim_size=6, reduce="mean")),
        ("max", lambda t: ts.scatter(t, i, 0, dim_size=6, reduce="max")),
        ("std", lambda t: ts.scatter_std(t, i, 0, dim_size=6)),
        ("segment_csr", lambda t: ts.segment_csr(t, torch.tensor([0, 3, 3, 7, 10]))),
        ("gather_csr", lambda t: ts.gather_csr(t[:4], torch.tensor([0, 3, 3, 7, 10]))),
    ]:
        assert torch.autograd.gradcheck(call, (x,)), name
        assert torch.autograd.gradgradcheck(call, (x,)), name


@pytest.mark.parametrize("fn", ["scatter_add", "segment_coo", "scatter_max"])
def test_errors_write_their_fix_in_the_framework_of_src(fn):
    import gather

    torch = pytest.importorskip("torch")
    f = getattr(ts, fn)
    for src, idx, fix in [(torch.zeros(3, 4), torch.tensor([0.0, 1.0, 1.0]), "`.to(torch.int64)`"),
                          (np.zeros((3, 4)), np.array([0.0, 1.0, 1.0]), "`.astype(np.int64)`")]:
        with pytest.raises(gather.DTypeError) as e:
            f(src, idx, 0) if fn != "segment_coo" else f(src, idx)
        assert fix in e.value.hint and str(e.value).endswith(e.value.hint), e.value


_OUT_CALLS = {
    "scatter_sum": lambda t, out: ts.scatter_sum(t.src, t.index, 0, out=out),
    "scatter_mul": lambda t, out: ts.scatter_mul(t.src, t.index, 0, out=out),
    "scatter_mean": lambda t, out: ts.scatter_mean(t.src, t.index, 0, out=out),
    "scatter_min": lambda t, out: ts.scatter_min(t.src, t.index, 0, out=out),
    "scatter_max": lambda t, out: ts.scatter_max(t.src, t.index, 0, out=out),
    "scatter": lambda t, out: ts.scatter(t.src, t.index, 0, out=out, reduce="sum"),
    "segment_coo": lambda t, out: ts.segment_coo(t.src, t.sorted, out=out),
    "segment_csr": lambda t, out: ts.segment_csr(t.src, t.indptr, out=out),
}


@pytest.mark.parametrize("name", sorted(_OUT_CALLS))
def test_a_torch_out_written_in_place_moves_its_version_counter(name):
    # pytorch_scatter writes `out` with torch's in-place ops, which move its version: a backward
    # that saved `out` refuses to run afterwards rather than read the new values.
    torch = pytest.importorskip("torch")

    class T:
        src = torch.tensor(SRC)
        index = torch.tensor(INDEX)
        sorted = torch.tensor([0, 0, 0, 2, 2, 4])
        indptr = torch.tensor([0, 3, 3, 5, 5, 6])

    out = torch.ones(5, 2, dtype=torch.float64)
    w = torch.ones(5, 2, dtype=torch.float64, requires_grad=True)
    y = (w * out).sum()
    before = out._version
    got = _OUT_CALLS[name](T, out)
    assert (got[0] if isinstance(got, tuple) else got) is out and out._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
