"""The bounds policies (`bounds=`, `fill_value=`) of the indexing ops, their in-place forms and
their gradients, against plain NumPy references written here, and by finite differences."""

import itertools

import numpy as np
import pytest

import gather

RNG = np.random.default_rng(5)
READ_POLICIES = [{"bounds": "wrap"}, {"bounds": "clip"}, {"bounds": "fill", "fill_value": -7}]
WRITE_POLICIES = [{"bounds": "wrap"}, {"bounds": "clip"}, {"bounds": "drop"}]


def mapped(index, n, policy):
    """`index` (values for a dimension of size `n`) under `policy`: the positions it reaches and
    whether each is kept (False where fill reads its value or drop skips the write). Wrap takes
    values in -n..n only; the references below use no others."""
    index = np.asarray(index)
    if policy["bounds"] == "wrap":
        assert ((index >= -n) & (index < n)).all(), "the references give wrap values in -n..n"
        return np.where(index < 0, index + n, index), np.ones(index.shape, bool)
    if policy["bounds"] == "clip":
        return np.clip(index, 0, n - 1), np.ones(index.shape, bool)
    keep = (index >= 0) & (index < n)
    return np.where(keep, index, 0), keep


def some_index(shape, n, policy):
    """Random values in -n..2n (or -n..n under wrap): some in range, some not."""
    hi = n if policy["bounds"] == "wrap" else 2 * n
    return RNG.integers(-n, hi, shape)


# --- reads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", READ_POLICIES, ids=lambda p: p["bounds"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_reads_each_position_under_the_policy(policy, dim):
    x = RNG.integers(0, 100, (4, 5))
    d = dim % 2
    shape = (3, 5) if d == 0 else (4, 6)
    index = some_index(shape, x.shape[d], policy)
    pos, keep = mapped(index, x.shape[d], policy)
    want = np.empty(shape, x.dtype)
    for i, j in itertools.product(range(shape[0]), range(shape[1])):
        at = (pos[i, j], j) if d == 0 else (i, pos[i, j])
        want[i, j] = x[at] if keep[i, j] else policy.get("fill_value", 0)
    np.testing.assert_array_equal(gather.gather(x, dim, index, **policy), want)


@pytest.mark.parametrize("policy", READ_POLICIES, ids=lambda p: p["bounds"])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.int16])
def test_take_and_flat_take_along_dim_read_the_flattened_input_under_the_policy(policy, index_dtype):
    x = RNG.standard_normal((3, 4))
    index = some_index((2, 5), x.size, policy).astype(index_dtype)
    pos, keep = mapped(index, x.size, policy)
    want = np.where(keep, x.ravel()[pos], policy.get("fill_value", 0))
    np.testing.assert_array_equal(gather.take(x, index, **policy), want)
    np.testing.assert_array_equal(gather.take_along_dim(x, index.ravel(), **policy), want.ravel())


@pytest.mark.parametrize("policy", READ_POLICIES, ids=lambda p: p["bounds"])
def test_index_select_and_take_along_dim_read_slices_under_the_policy(policy):
    x = RNG.standard_normal((4, 3))
    index = some_index(6, 4, policy)
    pos, keep = mapped(index, 4, policy)
    fill = policy.get("fill_value", 0)
    want = np.where(keep[:, None], x[pos], fill)
    np.testing.assert_array_equal(gather.index_select(x, 0, index, **policy), want)
    np.testing.assert_array_equal(gather.index_select(x.T, 1, index, **policy), want.T)
    per_column = some_index((5, 3), 4, policy)
    pos, keep = mapped(per_column, 4, policy)
    want = np.where(keep, np.take_along_axis(x, pos, 0), fill)
    np.testing.assert_array_equal(gather.take_along_dim(x, per_column, 0, **policy), want)


@pytest.mark.parametrize("policy", READ_POLICIES, ids=lambda p: p["bounds"])
def test_select_batched_reads_one_row_per_batch_under_the_policy(policy):
    x = RNG.standard_normal((3, 5, 2))
    index = some_index((3, 4), 5, policy)
    pos, keep = mapped(index, 5, policy)
    want = np.where(keep[..., None], x[np.arange(3)[:, None], pos], policy.get("fill_value", 0))
    np.testing.assert_array_equal(gather.select_batched(x, 1, index, 1, **policy), want)


def test_a_float_fill_value_is_converted_to_the_input_dtype_as_pytorch_converts_scalars():
    x = np.array([1.5, 2.5], np.float32)
    out = gather.take(x, np.array([0, 9]), bounds="fill", fill_value=np.float64(0.25))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.5, 0.25])
    out = gather.take(np.array([True, False]), np.array([5, 1]), bounds="fill", fill_value=True)
    np.testing.assert_array_equal(out, [True, False])


# --- writes -------------------------------------------------------------------------------------


def reduce_ref(out, targets, values, reduce, include_self):
    """`out` with each target (a tuple) reduced over its values, in order."""
    out = out.astype(np.float64)
    groups = {}
    for t, v in zip(targets, values):
        groups.setdefault(t, []).append(v)
    for t, vs in groups.items():
        vs = ([out[t]] if include_self else []) + vs
        out[t] = {"sum": sum, "prod": np.prod, "mean": np.mean, "amax": max, "amin": min}[reduce](vs)
    return out


def element_targets(index, src, dim, n, policy):
    """The (target, value) pairs of an element-wise scatter along `dim` (2-d), in index order,
    without the dropped ones."""
    pos, keep = mapped(index, n, policy)
    pairs = []
    for i, j in itertools.product(range(index.shape[0]), range(index.shape[1])):
        if keep[i, j]:
            pairs.append(((pos[i, j], j) if dim == 0 else (i, pos[i, j]), src[i, j]))
    return pairs


@pytest.mark.parametrize("policy", WRITE_POLICIES, ids=lambda p: p["bounds"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_scatter_add_and_scatter_reduce_write_each_position_under_the_policy(policy, dim):
    x = RNG.standard_normal((4, 5))
    src = RNG.standard_normal((4, 5))
    index = some_index((3, 4), x.shape[dim], policy)
    pairs = element_targets(index, src, dim, x.shape[dim], policy)
    targets, values = [t for t, _ in pairs], [v for _, v in pairs]
    want = x.copy()
    for t, v in pairs:  # the last write in index order wins
        want[t] = v
    np.testing.assert_array_equal(gather.scatter(x, dim, index, src, **policy), want)
    want = reduce_ref(x, targets, values, "sum", True)
    np.testing.assert_allclose(gather.scatter_add(x, dim, index, src, **policy), want, rtol=1e-12)
    for reduce, include_self in itertools.product(["sum", "prod", "mean", "amax", "amin"], [True, False]):
        want = reduce_ref(x, targets, values, reduce, include_self)
        got = gather.scatter_reduce(x, dim, index, src, reduce, include_self=include_self, **policy)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{reduce} {include_self}")


@pytest.mark.parametrize("policy", WRITE_POLICIES, ids=lambda p: p["bounds"])
def test_the_index_ops_write_slices_under_the_policy(policy):
    x = RNG.standard_normal((5, 3))
    index = some_index(6, 5, policy)
    source = RNG.standard_normal((6, 3))
    pos, keep = mapped(index, 5, policy)
    kept = [(p, k) for k, p in enumerate(pos) if keep[k]]
    want = x.copy()
    for p, k in kept:
        want[p] += 2.0 * source[k]
    np.testing.assert_allclose(gather.index_add(x, 0, index, source, alpha=2.0, **policy), want, rtol=1e-12)
    want = x.copy()
    for p, _ in kept:
        want[p] = 9.0
    np.testing.assert_array_equal(gather.index_fill(x, 0, index, 9.0, **policy), want)
    for reduce, include_self in itertools.product(["prod", "mean", "amax", "amin"], [True, False]):
        want = x.copy()
        for col in range(3):
            targets = [(p, col) for p, _ in kept]
            values = [source[k, col] for _, k in kept]
            want[:, col] = reduce_ref(x, targets, values, reduce, include_self)[:, col]
        got = gather.index_reduce(x, 0, index, source, reduce, include_self=include_self, **policy)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{reduce} {include_self}")
    # index_copy with distinct targets (duplicates leave the winner to the implementation).
    distinct = {"wrap": [-1, 0, 2], "clip": [9, 0, 2], "drop": [9, 0, -3]}[policy["bounds"]]
    pos, keep = mapped(distinct, 5, policy)
    want = x.copy()
    for k in range(3):
        if keep[k]:
            want[pos[k]] = source[k]
    np.testing.assert_array_equal(gather.index_copy(x, 0, np.array(distinct), source[:3], **policy), want)


@pytest.mark.parametrize("policy", WRITE_POLICIES, ids=lambda p: p["bounds"])
def test_put_writes_and_accumulates_into_the_flattened_input_under_the_policy(policy):
    x = RNG.standard_normal((3, 4))
    index = some_index(9, x.size, policy)
    source = RNG.standard_normal(9)
    pos, keep = mapped(index, x.size, policy)
    want = x.copy().ravel()
    np.add.at(want, pos[keep], source[keep])
    np.testing.assert_allclose(gather.put(x, index, source, True, **policy), want.reshape(3, 4), rtol=1e-12)
    distinct = {"wrap": [-1, 0, 5], "clip": [40, 0, 5], "drop": [40, 0, -20]}[policy["bounds"]]
    pos, keep = mapped(distinct, x.size, policy)
    want = x.copy().ravel()
    want[pos[keep]] = source[:3][keep]
    np.testing.assert_array_equal(gather.put(x, np.array(distinct), source[:3], **policy), want.reshape(3, 4))


# --- in-place forms -----------------------------------------------------------------------------


INPLACE = [
    ("scatter", lambda x, i, s: ((x, 1, i, s), {})),
    ("scatter_add", lambda x, i, s: ((x, 1, i, s), {})),
    ("scatter_reduce", lambda x, i, s: ((x, 1, i, s, "amax"), {"include_self": False})),
    ("index_add", lambda x, i, s: ((x, 1, i[0], s), {"alpha": 3})),
    ("index_copy", lambda x, i, s: ((x, 1, np.array([i[0, 0]]), s[:, :1]), {})),
    ("index_fill", lambda x, i, s: ((x, 1, i[0], 5), {})),
    ("index_reduce", lambda x, i, s: ((x, 1, i[0], s, "amin"), {})),
    ("put", lambda x, i, s: ((x, i * 3, s), {"accumulate": True})),
]


@pytest.mark.parametrize("name,args", INPLACE, ids=[n for n, _ in INPLACE])
@pytest.mark.parametrize("policy", WRITE_POLICIES, ids=lambda p: p["bounds"])
def test_in_place_forms_equal_the_out_of_place_ones_and_change_nothing_when_they_fail(name, args, policy):
    x = RNG.standard_normal((3, 4))
    src = RNG.standard_normal((3, 4))
    index = np.array([[0, 3, -4, 2], [-1, 1, 0, -2], [3, 2, -3, 1]])
    if policy["bounds"] != "wrap":
        index = index * 3
    a, kw = args(x, index, src)
    want = getattr(gather, name)(*a, **kw, **policy)
    target = x.copy()
    assert getattr(gather, name + "_")(target, *a[1:], **kw, **policy) is target
    np.testing.assert_array_equal(target, want)
    # Under wrap a value outside -n..n is an error; under any policy a bad fill_value is.
    bad = index.copy()
    bad[0, 0] = 99  # read by every case, index_copy's one value included
    a, kw = args(x, bad, src)
    target = x.copy()
    extra = {"bounds": "wrap"} if policy["bounds"] == "wrap" else {**policy, "fill_value": 1}
    with pytest.raises(gather.GatherError):
        getattr(gather, name + "_")(target, *a[1:], **kw, **extra)
    np.testing.assert_array_equal(target, x)


# --- gradients ----------------------------------------------------------------------------------


def numeric_grads(f, args, wrt, grad_output, h=1e-6):
    """The vector-Jacobian products sum(grad_output * f(args)) by central differences, for the
    positional arguments `wrt`."""
    out = []
    for k in wrt:
        g = np.zeros_like(args[k])
        for pos in np.ndindex(args[k].shape):
            vals = []
            for step in (h, -h):
                a = list(args)
                a[k] = args[k].copy()
                a[k][pos] += step
                vals.append(np.sum(grad_output * f(*a)))
            g[pos] = (vals[0] - vals[1]) / (2 * h)
        out.append(g)
    return out


def gradient_cases(policy):
    """(name, args, kwargs, indices of the differentiable args) of every op under `policy`."""
    reads = policy["bounds"] != "drop"
    x = RNG.standard_normal((3, 4))
    src = RNG.standard_normal((3, 4))
    lo, hi = (-3, 3) if policy["bounds"] == "wrap" else (-3, 7)
    idx = RNG.integers(lo, hi, (3, 4))
    rows = np.array([2, -1, 0, 5 if policy["bounds"] != "wrap" else 1])
    flat = RNG.integers(-12, 12 if policy["bounds"] == "wrap" else 30, 5)
    if reads:
        yield "gather", (x, 1, idx), {}, [0]
        yield "index_select", (x, 0, rows[:3]), {}, [0]
        yield "take", (x, flat), {}, [0]
        yield "take_along_dim", (x, idx, 1), {}, [0]
        yield "select_batched", (x, 1, idx, 1), {}, [0]
    if policy["bounds"] != "fill":
        source = RNG.standard_normal((4, 4))
        # Distinct targets in each row: with duplicates PyTorch's gradient (which the library
        # keeps) gives every writer the gradient, not only the one whose write stays.
        row = {"wrap": [0, -3, 2, -1], "clip": [-5, 1, 2, 9], "drop": [9, 1, -1, 3]}[policy["bounds"]]
        distinct = np.array([RNG.permutation(row) for _ in range(3)])
        yield "scatter", (x, 1, distinct, src), {}, [0, 3]
        yield "scatter_add", (x, 1, idx, src), {}, [0, 3]
        for reduce in ["sum", "prod", "mean", "amax", "amin"]:
            for include_self in [True, False]:
                yield "scatter_reduce", (x, 1, idx, src, reduce), {"include_self": include_self}, [0, 3]
        yield "index_add", (x, 0, rows[:3], source[:3]), {"alpha": 1.5}, [0, 3]
        yield "index_copy", (x, 0, np.array([rows[0], rows[2]]), source[:2]), {}, [0, 3]
        yield "index_fill", (x, 0, rows, 4.0), {}, [0]
        for reduce in ["prod", "mean", "amax", "amin"]:
            yield "index_reduce", (x, 0, rows[:3], source[:3], reduce), {"include_self": False}, [0, 3]
        yield "put", (x, flat, RNG.standard_normal(5)), {"accumulate": True}, [0, 2]


@pytest.mark.parametrize("policy", READ_POLICIES + WRITE_POLICIES[2:], ids=lambda p: p["bounds"])
def test_gradients_under_each_policy_equal_finite_differences(policy):
    count = 0
    for name, args, kw, wrt in gradient_cases(policy):
        forward = getattr(gather, name)
        f = lambda *a: forward(*a, **kw, **policy)  # noqa: E731
        out = f(*args)
        go = RNG.standard_normal(out.shape)
        got = getattr(gather.grad, name)(go, *args, **kw, **policy)
        got = got if isinstance(got, tuple) else (got,)
        want = numeric_grads(f, args, wrt, go)
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{name} {kw} {policy}")
        count += 1
    assert count >= 5


def test_gradients_flow_to_the_wrapped_or_clipped_element_and_not_from_filled_positions():
    x = np.array([1.0, 2.0, 3.0])
    g = np.array([1.0, 10.0, 100.0])
    index = np.array([-1, 1, 5])
    np.testing.assert_array_equal(gather.grad.take(g, x, index, bounds="clip"), [1.0, 10.0, 100.0])
    np.testing.assert_array_equal(gather.grad.take(g, x, index, bounds="fill", fill_value=0.0), [0.0, 10.0, 0.0])
    gi, gs = gather.grad.scatter_add(g, x, 0, index, np.ones(3), bounds="drop")
    np.testing.assert_array_equal(gi, g)
    np.testing.assert_array_equal(gs, [0.0, 10.0, 0.0])


@pytest.mark.parametrize("policy,index", [("wrap", [0, -1]), ("clip", [0, 7]), ("drop", [0, 1])])
def test_parity_pytorch_gives_pytorchs_numbers_under_a_policy_as_without_one(policy, index):
    # x[0] ties its group's amax with include_self=False: PyTorch still gives it a share.
    x, src, g = np.array([5.0, 1.0]), np.array([5.0, 2.0]), np.ones(2)
    for parity in ("correct", "pytorch"):
        want = gather.grad.scatter_reduce(g, x, 0, np.array([0, 1]), src, "amax", include_self=False, parity=parity)
        got = gather.grad.scatter_reduce(g, x, 0, np.array(index), src, "amax", include_self=False, parity=parity,
                                         bounds=policy)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    _, shares = gather.grad.scatter_reduce(g, x, 0, np.array(index), src, "amax", include_self=False,
                                           parity="pytorch", bounds=policy)
    np.testing.assert_array_equal(shares, [0.5, 1.0])


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,message,hint", [
    (lambda: gather.gather(np.zeros(3), 0, np.array([1]), bounds="nope"),
     "gather: unknown bounds policy `nope`", "error (PyTorch's), wrap, clip, fill"),
    (lambda: gather.take(np.zeros(3), np.array([1]), bounds="fill"),
     "take: bounds=fill needs a fill_value", "fill_value=0"),
    (lambda: gather.take(np.zeros(3), np.array([1]), fill_value=0),
     "take: fill_value goes with bounds=fill only, but bounds is error", "bounds=fill"),
    (lambda: gather.gather(np.zeros(3), 0, np.array([1]), bounds="drop"),
     "gather: the Drop policy is for writes, but gather reads", 'bounds="fill", fill_value=value'),
    (lambda: gather.scatter_add(np.zeros(3), 0, np.array([1]), np.ones(1), bounds="fill", fill_value=0),
     "scatter_add: the Fill policy is for reads, but scatter_add writes", 'use bounds="drop"'),
    (lambda: gather.scatter(np.zeros(3), 0, np.array([1]), 2.0, bounds="clip"),
     "scatter: a bounds policy applies to the src form without reduce", "index_fill"),
    (lambda: gather.grad.scatter(np.zeros(3), np.zeros(3), 0, np.array([1]), value=2.0, bounds="wrap"),
     "scatter: a bounds policy applies to the src form without reduce", "index_fill"),
    (lambda: gather.grad.scatter(np.zeros(3), np.zeros(3), 0, np.array([1]), np.ones(1), reduce="add", bounds="wrap"),
     "scatter: a bounds policy applies to the src form without reduce", "index_fill"),
    (lambda: gather.take(np.zeros(3), np.array([1, -4]), bounds="wrap"),
     "take: index -4 is out of bounds", None),
])
def test_misused_policies_are_errors_in_python_words(call, message, hint):
    with pytest.raises(gather.GatherError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)
    if hint is not None:
        assert hint in e.value.hint, e.value.hint
        assert "OutOfBounds::" not in e.value.hint


def test_a_fill_value_that_is_not_a_number_is_a_type_error():
    with pytest.raises(TypeError, match="fill_value must be a number"):
        gather.take(np.zeros(3), np.array([5]), bounds="fill", fill_value="0")


def test_the_ops_without_a_policy_refuse_the_keywords():
    with pytest.raises(TypeError):
        gather.sort(np.zeros(3), bounds="clip")
    with pytest.raises(TypeError):
        gather.masked_select(np.zeros(3), np.ones(3, bool), bounds="clip")
