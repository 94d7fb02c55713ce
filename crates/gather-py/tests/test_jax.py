"""JAX's transformations through gather's ops: under jax.jit, jax.grad and jax.vmap the ops give
what they give eagerly, their gradients pass JAX's finite-difference check, and what cannot be
traced (a length that depends on values, a write into an immutable array) is refused with a fix."""

import numpy as np
import pytest

import gather
import op_cases

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax.test_util import check_grads  # noqa: E402

RNG = np.random.default_rng(5)


def rand(*shape):
    return jnp.asarray(RNG.standard_normal(shape))


def cases():
    """(name, function of (x, s)): every op, with the arrays it is traced through."""
    return op_cases.cases(jnp.array, jnp.concatenate)


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_jit_gives_the_eager_result_and_grad_passes_finite_differences(name, f):
    x, s = rand(3, 4), rand(3, 2)
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x, s)), np.asarray(f(x, s)))
    with jax.enable_x64(True):
        x, s = rand(3, 4), rand(3, 2)
        assert x.dtype == jnp.float64
        check_grads(f, (x, s), order=1, modes=["rev"])
        check_grads(jax.jit(f), (x, s), order=1, modes=["rev"])


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_traced_calls_are_custom_calls_of_the_library_not_host_callbacks(name, f):
    x, s = rand(3, 4), rand(3, 2)
    for traced in (jax.jit(f), jax.jit(jax.grad(lambda x, s: f(x, s).sum(), (0, 1)))):
        text = traced.lower(x, s).as_text()
        assert "gather_op" in text and "callback" not in text


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.int8, jnp.uint32, jnp.bool_])
def test_every_dtype_gives_the_eager_result_under_jit(dtype):
    x = jnp.asarray(RNG.standard_normal((4, 5)) * 20).astype(dtype)
    i = jnp.array([[3, 0, 1, 1, 2]])
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: gather.gather(x, 0, i))(x)),
                                  np.asarray(gather.gather(x, 0, i)))
    s = jnp.ones((1, 5), dtype)
    got = jax.jit(lambda x, s: gather.scatter(x, 0, i, s))(x, s)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(gather.scatter(x, 0, i, s)))


def test_what_the_handler_cannot_take_runs_as_a_callback_with_the_same_result():
    x, idx = rand(3, 4), jnp.array([2, 0])
    f = jax.jit(lambda x, v: gather.index_fill(x, 1, idx, v))  # a traced scalar
    assert "callback" in f.lower(x, 2.5).as_text()
    np.testing.assert_array_equal(np.asarray(f(x, 2.5)), np.asarray(gather.index_fill(x, 1, idx, 2.5)))
    bits = jnp.asarray(np.array([[16256, 16384], [16448, 0]], np.uint16))  # bfloat16 1, 2, 3, 0
    g = jax.jit(lambda b: gather.take(b, jnp.array([2, 0]), dtype="bfloat16"))
    assert "callback" in g.lower(bits).as_text()
    np.testing.assert_array_equal(np.asarray(g(bits)), [16448, 16256])


def test_a_jaxlib_that_refuses_the_handler_keeps_the_callbacks_and_says_so(monkeypatch):
    from gather import _jax_ops

    def refuse(*args, **kwargs):
        raise ValueError("handler's API version (0.3) is incompatible")

    _jax_ops._ffi_platforms.cache_clear()
    monkeypatch.setattr(jax.ffi, "register_ffi_target", refuse)
    try:
        x, idx = rand(3, 4), jnp.array([[2], [0], [1]])
        with pytest.warns(RuntimeWarning, match="refused gather's cpu handler"):
            f = jax.jit(lambda x: gather.gather(x, 1, idx))
            assert "callback" in f.lower(x).as_text()
        np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(gather.gather(x, 1, idx)))
    finally:
        monkeypatch.undo()
        _jax_ops._ffi_platforms.cache_clear()


def test_an_in_place_call_into_a_donated_input_gives_the_eager_result():
    x, s = rand(4, 3), rand(2, 3)
    i = jnp.array([[3, 0, 3], [1, 3, 0]])
    want = np.asarray(gather.scatter_add(x, 0, i, s))
    f = jax.jit(lambda x, s: gather.scatter_add(x, 0, i, s), donate_argnums=0)
    np.testing.assert_array_equal(np.asarray(f(jnp.array(x), s)), want)


def test_indices_are_int64_with_jax_enable_x64_and_the_repeats_only_form_traces():
    x = rand(3, 4)
    with jax.enable_x64(True):
        values, indices = jax.jit(lambda x: gather.topk(x, 2, 1))(x)
        assert indices.dtype == jnp.int64
        np.testing.assert_array_equal(np.asarray(indices), np.asarray(gather.topk(x, 2, 1)[1]))
    r = jnp.array([1, 0, 2])
    got = jax.jit(lambda r: gather.repeat_interleave(r, output_size=3))(r)
    np.testing.assert_array_equal(np.asarray(got), [0, 2, 2])


def test_gradients_equal_the_library_gradients_called_by_hand():
    x, s = rand(3, 4), rand(3, 2)
    idx = jnp.array([[0, 3], [1, 1], [2, 0]])
    g = rand(3, 4)
    gx, gs = jax.grad(lambda x, s: (gather.scatter_reduce(x, 1, idx, s, "mean") * g).sum(), (0, 1))(x, s)
    want = gather.grad.scatter_reduce(g, x, 1, idx, s, "mean")
    np.testing.assert_array_equal(np.asarray(gx), np.asarray(want[0]))
    np.testing.assert_array_equal(np.asarray(gs), np.asarray(want[1]))


def test_indices_come_back_as_jaxs_index_dtype_and_are_not_differentiated():
    x = rand(3, 4)
    values, indices = jax.jit(lambda x: gather.sort(x, 1, descending=True))(x)
    assert indices.dtype == jnp.int32  # without jax_enable_x64
    np.testing.assert_array_equal(np.asarray(values), np.asarray(jnp.sort(x, 1)[:, ::-1]))
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(jnp.argsort(-x, 1, stable=True)))
    order = jax.jit(lambda x: gather.argsort(x, 0))(x)
    np.testing.assert_array_equal(np.asarray(order), np.asarray(jnp.argsort(x, 0, stable=True)))
    # A loss through argsort's indices: the gradient flows through the take only.
    grad = jax.grad(lambda x: gather.take_along_dim(x, gather.argsort(x, 1)[:, :1], 1).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(x == x.min(1, keepdims=True), dtype=np.float32))


@pytest.mark.parametrize("call", [
    lambda x, i: gather.gather(x, 0, i),
    lambda x, i: gather.gather(x, 2, i),
    lambda x, i: gather.scatter_add(x, 0, i, x[:2]),
    lambda x, i: gather.scatter_reduce(x, 0, i, x[:3], "median"),
    lambda x, i: gather.index_select(x, 0, i[:2, :2]),
    lambda x, i: gather.take_along_dim(x, i[:, :3], 1),
    lambda x, i: gather.topk(x, 60, 1),
    lambda x, i: gather.index_add(x, 1, i[0], x),
], ids=["larger index", "dim", "small src", "reduce", "2-d index_select", "broadcast", "k", "source rows"])
def test_shape_and_argument_errors_come_when_tracing_as_the_eager_calls(call):
    x, i = jnp.zeros((700, 50)), jnp.zeros((3, 60), jnp.int32)
    with pytest.raises(gather.GatherError) as eager:
        call(np.asarray(x), np.asarray(i))
    with pytest.raises(type(eager.value)) as traced:
        jax.eval_shape(call, x, i)  # traces only: nothing runs
    assert str(traced.value).split("\nhint:")[0] == str(eager.value).split("\nhint:")[0]


def test_a_bad_index_value_is_left_to_the_run_when_tracing():
    x = jnp.arange(6.0)
    assert jax.eval_shape(lambda a, i: gather.take(a, i), x, jnp.array([9])).shape == (1,)


def test_calls_whose_arrays_compare_by_element_count_trace_and_run():
    # put's index and source hold as many elements in other shapes; the flat gradient of
    # take_along_dim has the index's element count: the trace-time check must not refuse them.
    x = rand(4, 5)
    got = jax.jit(lambda x: gather.put(x, jnp.array([[0, 7], [19, 3]]), jnp.arange(4.0)))(x)
    np.testing.assert_array_equal(np.asarray(got), gather.put(np.asarray(x), np.array([[0, 7], [19, 3]]),
                                                               np.arange(4.0, dtype=np.float32)))
    grad = jax.grad(lambda x: gather.take_along_dim(x, jnp.array([[1, 2], [2, 19]])).sum())(x)
    assert float(grad.sum()) == 4.0 and float(grad.reshape(-1)[2]) == 2.0


def test_take_along_dim_without_dim_gives_one_axis_under_jit_as_torch_does():
    x = rand(3, 4)
    idx = jnp.array([[5, 0], [11, 3]])
    got = jax.jit(lambda x: gather.take_along_dim(x, idx))(x)
    assert got.shape == (4,)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x).reshape(-1)[[5, 0, 11, 3]])


def test_vmap_runs_the_op_once_per_batch_element():
    x = rand(5, 3, 4)
    idx = jnp.array([[2], [0], [3]])
    got = jax.vmap(lambda x: gather.take_along_dim(x, idx, 1))(x)
    want = np.stack([np.asarray(gather.take_along_dim(x[b], idx, 1)) for b in range(5)])
    np.testing.assert_array_equal(np.asarray(got), want)
    per_row = jnp.array([[0, 1], [3, 3], [2, 0], [1, 1], [0, 0]])
    got = jax.vmap(lambda x, i: gather.index_select(x, 1, i))(x, per_row)
    want = np.stack([np.asarray(gather.index_select(x[b], 1, per_row[b])) for b in range(5)])
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_vmap_and_per_example_gradients_equal_a_loop_of_eager_calls(name, f):
    # The handler loops over the batch axes itself; x batched, s shared (one broadcast axis).
    xs, s = rand(4, 3, 4), rand(3, 2)
    batched = jax.jit(jax.vmap(f, in_axes=(0, None)))
    assert "while" not in batched.lower(xs, s).as_text()  # no loop of custom calls in XLA
    got = batched(xs, s)
    want = np.stack([np.asarray(f(xs[b], s)) for b in range(4)])
    np.testing.assert_array_equal(np.asarray(got), want)
    with jax.enable_x64(True):
        xs, s = rand(4, 3, 4), rand(3, 2)
        loss = lambda x, s: (f(x, s) ** 2).sum()  # noqa: E731
        got = jax.jit(jax.vmap(jax.grad(loss, (0, 1)), in_axes=(0, None)))(xs, s)
        for b in range(4):
            want = jax.grad(loss, (0, 1))(xs[b], s)
            np.testing.assert_allclose(np.asarray(got[0][b]), np.asarray(want[0]), rtol=1e-12)
            np.testing.assert_allclose(np.asarray(got[1][b]), np.asarray(want[1]), rtol=1e-12)


def test_nested_vmap_with_sort_and_a_plan_equal_eager_calls():
    xs = rand(2, 3, 5, 4)
    got_v, got_i = jax.jit(jax.vmap(jax.vmap(lambda x: gather.topk(x, 2, 1))))(xs)
    assert got_i.dtype == jnp.int32
    for a in range(2):
        for b in range(3):
            v, i = gather.topk(xs[a, b], 2, 1)
            np.testing.assert_array_equal(np.asarray(got_v[a, b]), np.asarray(v))
            np.testing.assert_array_equal(np.asarray(got_i[a, b]), np.asarray(i))
    plan = gather.ScatterPlan(jnp.array([2, 0, 2, 1]), 3)
    dst, srcs = rand(3, 2), rand(5, 4, 2)
    got = jax.jit(jax.vmap(lambda s: plan.scatter_reduce(dst, s, "mean"), in_axes=0))(srcs)
    want = np.stack([np.asarray(plan.scatter_reduce(dst, srcs[b], "mean")) for b in range(5)])
    np.testing.assert_array_equal(np.asarray(got), want)
    # An in-place form's result aliases input, which then gets the batch axis too.
    idx = jnp.array([[0, 1], [2, 2]])
    got = jax.jit(jax.vmap(lambda s: gather.scatter_add(jnp.ones((3, 2)), 0, idx, s)))(srcs[:, :2])
    want = np.stack([np.asarray(gather.scatter_add(jnp.ones((3, 2)), 0, idx, srcs[b, :2])) for b in range(5)])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_a_bad_index_in_one_batch_element_names_the_element():
    x, idx = rand(3, 4), jnp.array([[1], [2], [30]])
    f = jax.jit(jax.vmap(lambda i: gather.take(x, i)))
    with pytest.raises(Exception, match=r"(?s)tried to access index 30.*batch element \[2\]"):
        f(idx).block_until_ready()


def test_a_scatter_plan_is_traced_with_its_gradient():
    plan = gather.ScatterPlan(jnp.array([2, 0, 2, 1]), 3)
    dst, src = rand(3, 2), rand(4, 2)
    f = jax.jit(lambda d, s: plan.scatter_reduce(d, s, "sum"))
    np.testing.assert_array_equal(np.asarray(f(dst, src)), np.asarray(plan.scatter_reduce(dst, src, "sum")))
    with jax.enable_x64(True):
        check_grads(lambda d, s: plan.scatter_add(d, s), (rand(3, 2), rand(4, 2)), order=1, modes=["rev"])


@pytest.mark.parametrize("reduce,include_self", [(None, True), ("sum", True), ("prod", True), ("mean", False),
                                                  ("amax", True), ("amin", False), ("sum", False)])
def test_plan_calls_are_custom_calls_with_the_gradients_of_the_expanded_index(reduce, include_self):
    index = jnp.array([2, 0, 2, 1, 2])
    plan = gather.ScatterPlan(index, 4)
    if reduce is None:
        f = lambda d, s: plan.scatter_add(d, s)  # noqa: E731
        eager = lambda d, s, i: gather.scatter_add(d, 0, i, s)  # noqa: E731
        grad = lambda g, d, s, i: gather.grad.scatter_add(g, d, 0, i, s)  # noqa: E731
    else:
        f = lambda d, s: plan.scatter_reduce(d, s, reduce, include_self=include_self)  # noqa: E731
        eager = lambda d, s, i: gather.scatter_reduce(d, 0, i, s, reduce, include_self=include_self)  # noqa: E731
        grad = lambda g, d, s, i: gather.grad.scatter_reduce(g, d, 0, i, s, reduce, include_self=include_self)  # noqa: E731
    with jax.enable_x64(True):
        dst, src, g = rand(4, 3), rand(5, 3), rand(4, 3)
        expanded = np.broadcast_to(np.asarray(index)[:, None], (5, 3))
        text = jax.jit(f).lower(dst, src).as_text()
        assert ("callback" in text) == (reduce == "sum" and not include_self)  # index_add has no include_self
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(dst, src)), np.asarray(eager(dst, src, expanded)))
        got = jax.jit(jax.vjp(f, dst, src)[1])(g)
        want = grad(g, dst, src, expanded)
        np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-12)
        check_grads(jax.jit(f), (dst, src), order=1, modes=["rev"])


def test_a_plan_that_no_longer_exists_is_an_error_of_the_compiled_call():
    plan = gather.ScatterPlan(jnp.array([1, 0]), 2)
    f = jax.jit(lambda d, s: plan.scatter_add(d, s))
    dst, src = rand(2, 3), rand(2, 3)
    f(dst, src).block_until_ready()
    compiled = f.lower(dst, src).compile()
    del plan, f
    import gc

    gc.collect()
    with pytest.raises(Exception, match="no longer exists"):
        compiled(dst, src).block_until_ready()


def test_a_value_dependent_length_is_refused_when_tracing_with_the_fix():
    x = rand(3, 4)
    with pytest.raises(gather.InvalidArgumentError, match="output_size"):
        jax.jit(lambda x: gather.repeat_interleave(x, jnp.array([1, 0, 2]), 0))(x)
    with pytest.raises(gather.InvalidArgumentError, match="masked_select's depends on the values"):
        jax.jit(lambda x: gather.masked_select(x, x > 0))(x)


def test_in_place_forms_refuse_a_traced_array_with_the_out_of_place_fix():
    with pytest.raises(gather.InvalidArgumentError, match="gather.index_fill"):
        jax.jit(lambda x: gather.index_fill_(x, 0, jnp.array([0]), 1.0))(rand(3))


def test_a_bad_index_is_reported_when_the_computation_runs():
    f = jax.jit(lambda x, i: gather.take(x, i))
    with pytest.raises(Exception, match="tried to access index 30"):
        f(rand(3, 4), jnp.array([30])).block_until_ready()
