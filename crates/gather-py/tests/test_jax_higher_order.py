"""Forward mode and second derivatives through gather's ops in JAX: for every op form jax.jvp,
jax.grad and their compositions to second order equal finite differences (jax.test_util's
check_grads), hessian equals that of JAX's own ops, vmap composes with them, plans included;
the products' second derivatives hold with zeros in their groups, and their third derivative is
refused with the reason."""

import numpy as np
import pytest

import gather
import op_cases

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax.test_util import check_grads  # noqa: E402

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def rand(*shape):
    return jnp.asarray(RNG.standard_normal(shape))


def cases():
    t = jnp.array
    return op_cases.cases(t, jnp.concatenate) + [
        ("scatter_reduce prod", lambda x, s: gather.scatter_reduce(x, 1, t([[0, 3], [1, 1], [2, 0]]), s, "prod")),
        ("scatter multiply", lambda x, s: gather.scatter(x, 1, t([[0, 3], [1, 1], [2, 0]]), s, reduce="multiply")),
        ("scatter_reduce mean", lambda x, s: gather.scatter_reduce(x, 0, t([[2, 0], [2, 2], [0, 1]]), s, "mean")),
        ("index_reduce amin", lambda x, s: gather.index_reduce(x, 1, t([3, 3]), s, "amin")),
        ("gather fill", lambda x, s: gather.gather(x, 1, t([[0, 9], [1, 2], [-7, 0]]), bounds="fill", fill_value=4.0)),
    ]


def inputs():
    x = rand(3, 4)
    return x + 0.5 * jnp.sign(x), rand(3, 2)  # away from masked_scatter's x > 0 boundary


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_forward_reverse_and_second_order_equal_finite_differences(name, f):
    x, s = inputs()
    check_grads(f, (x, s), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    check_grads(jax.jit(f), (x, s), order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_hessian_jacfwd_and_vmap_compose(name, f):
    x, s = inputs()
    loss = lambda x, s: (f(x, s) ** 3).sum()  # noqa: E731
    h = jax.hessian(loss, (0, 1))(x, s)
    twice = jax.jacrev(jax.jacrev(loss, (0, 1)), (0, 1))(x, s)
    fwd = jax.jacfwd(jax.jacfwd(loss, (0, 1)), (0, 1))(x, s)
    for a, b, c in zip(jax.tree.leaves(h), jax.tree.leaves(twice), jax.tree.leaves(fwd)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(jax.jit(jax.jacfwd(f))(x, s), jax.jacrev(f)(x, s), rtol=1e-12, atol=1e-12)
    # jvp of a vmapped op (a batched primitive's derivative) and vmap of jvp.
    xs, ts = jnp.stack([x, x * 2]), jnp.stack([rand(3, 4), rand(3, 4)])
    by_vmap = jax.jvp(jax.vmap(f, (0, None)), (xs, s), (ts, jnp.zeros_like(s)))[1]
    per = jax.vmap(lambda x, t: jax.jvp(lambda x: f(x, s), (x,), (t,))[1])(xs, ts)
    loop = jnp.stack([jax.jvp(lambda x: f(x, s), (xs[b],), (ts[b],))[1] for b in range(2)])
    np.testing.assert_allclose(by_vmap, loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(per, loop, rtol=1e-12, atol=1e-12)


def test_hessians_equal_those_of_jaxs_own_ops():
    x, s = inputs()
    idx = jnp.array([[0, 3], [1, 2], [2, 0]])
    rows = jnp.arange(3)[:, None]
    for ours, theirs in [
        (lambda x, s: gather.gather(x, 1, idx), lambda x, s: jnp.take_along_axis(x, idx, 1)),
        (lambda x, s: gather.scatter_add(x, 1, idx, s), lambda x, s: x.at[rows, idx].add(s)),
        (lambda x, s: gather.scatter_reduce(x, 1, idx, s, "amax"), lambda x, s: x.at[rows, idx].max(s)),
        (lambda x, s: gather.scatter_reduce(x, 1, idx, s, "prod"), lambda x, s: x.at[rows, idx].multiply(s, unique_indices=True)),
        (lambda x, s: gather.sort(x, 1)[0], lambda x, s: jnp.sort(x, 1)),
        (lambda x, s: gather.index_select(x, 1, idx[0]), lambda x, s: jnp.take(x, idx[0], 1)),
    ]:
        def loss(fn):
            return lambda x, s: (jnp.tanh(fn(x, s)) * fn(x, s) ** 2).sum()

        for a, b in zip(jax.tree.leaves(jax.hessian(loss(ours), (0, 1))(x, s)),
                        jax.tree.leaves(jax.hessian(loss(theirs), (0, 1))(x, s))):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduce", [None, "sum", "mean", "amax", "amin", "prod"])
def test_a_plans_forward_mode_and_second_derivatives(reduce):
    plan = gather.ScatterPlan(np.array([2, 0, 2, 1]), 3)
    dst, src = rand(3, 2), rand(4, 2)

    def f(d, s):
        return plan.scatter_add(d, s) if reduce is None else plan.scatter_reduce(d, s, reduce)

    check_grads(f, (dst, src), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    assert "gather_op" in jax.jit(jax.hessian(lambda d, s: (f(d, s) ** 3).sum())).lower(dst, src).as_text()


@pytest.mark.parametrize("include_self", [True, False])
def test_products_second_derivatives_hold_with_zeros_in_their_groups(include_self):
    x = jnp.array([[2.0, 0.0, 1.5, 0.0, -1.0], [0.5, 3.0, -2.0, 1.0, 0.0]])
    src = jnp.array([[0.0, 1.25, -0.5], [0.0, 0.0, 2.0]])
    idx = jnp.array([[1, 3], [0, 3]])  # src (2, 3) reaches beyond index's extent
    for fn in (lambda x, s: gather.scatter_reduce(x, 1, idx, s, "prod", include_self=include_self),
               lambda x, s: gather.index_reduce(x, 1, jnp.array([3, 1, 3]), s, "prod", include_self=include_self)):
        check_grads(fn, (x, src), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_a_products_third_derivative_is_refused_with_the_reason():
    x, idx = rand(2, 3), jnp.array([[0, 0], [2, 1]])
    f = lambda x: (gather.scatter_reduce(x, 1, idx, x[:, :2], "prod") ** 2).sum()  # noqa: E731
    jax.hessian(f)(x)
    with pytest.raises(gather.InvalidArgumentError, match="third derivative of a product"):
        jax.jacfwd(jax.hessian(f))(x)
    third = jax.jacrev(jax.jacrev(jax.jacrev(lambda x: gather.gather(x, 1, idx) ** 3)))(x)
    assert third.shape == (2, 2, 2, 3, 2, 3, 2, 3)  # the piecewise-linear ops have every order


def test_reverse_mode_costs_one_gradient_call_as_before():
    """jax.grad's program holds the op and its gradient, and no derivative along tangents."""
    x, s = inputs()
    idx = jnp.array([[0, 3], [1, 2], [2, 0]])
    loss = lambda x, s: (gather.scatter_reduce(x, 1, idx, s, "amax") ** 2).sum()  # noqa: E731
    text = jax.jit(jax.grad(loss, (0, 1))).lower(x, s).as_text()
    assert text.count("gather_op") == 2
    assert '_mode = "inplace"' in text and '_mode = "grad"' in text


def test_linear_transpose_of_a_linear_op_is_its_gradient():
    x, s = inputs()
    idx = jnp.array([[0, 3], [1, 2], [2, 0]])
    ct = rand(3, 4)
    (got,) = jax.linear_transpose(lambda s: gather.scatter_add(jnp.zeros((3, 4)), 1, idx, s), s)(ct)
    np.testing.assert_array_equal(got, jnp.take_along_axis(ct, idx, 1))
    (back,) = jax.linear_transpose(lambda x: gather.gather(x, 1, idx), x)(s)
    np.testing.assert_array_equal(back, jnp.zeros((3, 4)).at[jnp.arange(3)[:, None], idx].add(s))
