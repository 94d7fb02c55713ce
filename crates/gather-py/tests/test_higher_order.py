"""Forward mode and second derivatives through gather's ops in torch: every op form's
derivative along a direction (torch.autograd.forward_ad, torch.func.jvp) and its gradient's
gradient (create_graph=True, torch.func.grad of grad) equal finite differences, hessian and
jacfwd equal those of PyTorch's own ops, plans included; the products' second derivatives
hold where their groups have zeros, and their third derivative is refused with the reason."""

import pytest

import gather
import op_cases

torch = pytest.importorskip("torch")
func = torch.func
fwAD = torch.autograd.forward_ad
# gradcheck's own use of torch.jit.script (torch 2.15).
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")

G = torch.Generator().manual_seed(11)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=G)


def cases():
    return op_cases.cases(torch.tensor, torch.cat) + [
        ("masked_select", lambda x, s: gather.masked_select(x, x > 0)),
        ("scatter_reduce prod", lambda x, s: gather.scatter_reduce(x, 1, torch.tensor([[0, 3], [1, 1], [2, 0]]),
                                                                   s, "prod")),
        ("scatter multiply", lambda x, s: gather.scatter(x, 1, torch.tensor([[0, 3], [1, 1], [2, 0]]), s,
                                                         reduce="multiply")),
        ("scatter_reduce mean", lambda x, s: gather.scatter_reduce(x, 0, torch.tensor([[2, 0], [2, 2], [0, 1]]),
                                                                   s, "mean")),
        ("index_reduce amin", lambda x, s: gather.index_reduce(x, 1, torch.tensor([3, 3]), s, "amin")),
        ("gather fill", lambda x, s: gather.gather(x, 1, torch.tensor([[0, 9], [1, 2], [-7, 0]]), bounds="fill",
                                                   fill_value=4.0)),
    ]


def inputs():
    # Away from zero: masked_scatter's mask is x > 0, and finite differences must not cross it.
    x = rand(3, 4)
    x = x + 0.5 * torch.sign(x)
    return x.requires_grad_(), rand(3, 2).requires_grad_()


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_forward_mode_and_the_gradients_gradient_equal_finite_differences(name, f):
    x, s = inputs()
    assert torch.autograd.gradcheck(f, (x, s), check_forward_ad=True, check_batched_forward_grad=False)
    assert torch.autograd.gradgradcheck(f, (x, s), check_fwd_over_rev=True)


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_torch_func_jvp_jacfwd_and_hessian_equal_torch_autograds(name, f):
    x, s = (t.detach() for t in inputs())
    tx, ts = rand(3, 4), rand(3, 2)
    out, tangent = func.jvp(f, (x, s), (tx, ts))
    torch.testing.assert_close(out, f(x, s))
    with fwAD.dual_level():  # tensors that carry a tangent and do not require grad
        dual = fwAD.unpack_dual(f(fwAD.make_dual(x, tx), fwAD.make_dual(s, ts)))
    torch.testing.assert_close(tangent, dual.tangent)
    torch.testing.assert_close(func.jacfwd(f, (0, 1))(x, s), func.jacrev(f, (0, 1))(x, s))
    if name == "masked_select":  # a length per element: no batched shape for jacfwd's vmap
        return
    loss = lambda x, s: (f(x, s) ** 3).sum()  # noqa: E731
    by_func = func.hessian(loss, (0, 1))(x, s)
    by_autograd = torch.autograd.functional.hessian(loss, (x, s))
    torch.testing.assert_close(by_func, by_autograd)


def test_hessians_equal_those_of_pytorchs_own_ops():
    x, s = (t.detach() for t in inputs())
    idx = torch.tensor([[0, 3], [1, 2], [2, 0]])
    for ours, theirs in [
        (lambda x, s: gather.gather(x, 1, idx), lambda x, s: torch.gather(x, 1, idx)),
        (lambda x, s: gather.scatter_add(x, 1, idx, s), lambda x, s: torch.scatter_add(x, 1, idx, s)),
        (lambda x, s: gather.scatter_reduce(x, 1, idx, s, "amax"),
         lambda x, s: torch.scatter_reduce(x, 1, idx, s, "amax")),
        (lambda x, s: gather.sort(x, 1)[0] * gather.topk(x, 4, 1)[0], lambda x, s: torch.sort(x, 1)[0] * torch.topk(x, 4, 1)[0]),
        (lambda x, s: gather.index_add(x, 1, idx[0], s, alpha=3.0), lambda x, s: torch.index_add(x, 1, idx[0], s, alpha=3.0)),
    ]:
        def loss(fn):
            return lambda x, s: (torch.tanh(fn(x, s)) * fn(x, s) ** 2).sum()

        torch.testing.assert_close(func.hessian(loss(ours), (0, 1))(x, s), func.hessian(loss(theirs), (0, 1))(x, s))


def test_a_gradient_penalty_trains_through_the_ops_like_pytorchs_own():
    """WGAN-GP's penalty: the norm of a gradient, differentiated again with create_graph=True."""
    idx = torch.tensor([[0, 3], [1, 2], [2, 0]])

    def penalty(op, x, w):
        (g,) = torch.autograd.grad((op(x * w, 1, idx) ** 2).sum(), x, create_graph=True)
        return ((g.norm() - 1) ** 2)

    x, w = rand(3, 4).requires_grad_(), rand(3, 4).requires_grad_()
    (ours,) = torch.autograd.grad(penalty(gather.gather, x, w), w)
    (theirs,) = torch.autograd.grad(penalty(torch.gather, x, w), w)
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("reduce", [None, "sum", "mean", "amax", "amin", "prod"])
def test_a_plans_forward_mode_and_second_derivatives(reduce):
    idx = torch.tensor([2, 0, 2, 1])
    plan = gather.ScatterPlan(idx, 3)
    dst, src = rand(3, 2).requires_grad_(), rand(4, 2).requires_grad_()

    def f(d, s):
        return plan.scatter_add(d, s) if reduce is None else plan.scatter_reduce(d, s, reduce)

    assert torch.autograd.gradcheck(f, (dst, src), check_forward_ad=True, check_batched_forward_grad=False)
    assert torch.autograd.gradgradcheck(f, (dst, src), check_fwd_over_rev=True)
    expanded = idx[:, None].expand(4, 2)

    def theirs(d, s):
        return torch.scatter_add(d, 0, expanded, s) if reduce is None else torch.scatter_reduce(d, 0, expanded, s, reduce)

    loss = lambda fn: lambda d, s: (fn(d, s) ** 3).sum()  # noqa: E731
    d, s = dst.detach(), src.detach()
    # Reverse over reverse for PyTorch's: its forward mode of scatter_reduce "prod" gives zeros
    # (torch 2.15), so its jacfwd-over-jacrev hessian is wrong there.
    twice = func.jacrev(func.jacrev(loss(theirs), (0, 1)), (0, 1))(d, s)
    torch.testing.assert_close(func.hessian(loss(f), (0, 1))(d, s), twice)


def test_forward_mode_ties_split_the_tangent_as_the_gradient_splits_the_gradient():
    """amax over tied elements: the output moves by the tangents' mean (PyTorch's forward mode
    and the gradient's even split say the same)."""
    x = torch.tensor([1.0, 0.0], dtype=torch.float64)
    src = torch.tensor([1.0, 1.0, -2.0], dtype=torch.float64)
    idx = torch.tensor([0, 0, 1])
    tx, ts = torch.tensor([3.0, 5.0], dtype=torch.float64), torch.tensor([6.0, 9.0, 7.0], dtype=torch.float64)
    ours = func.jvp(lambda x, s: gather.scatter_reduce(x, 0, idx, s, "amax"), (x, src), (tx, ts))[1]
    theirs = func.jvp(lambda x, s: torch.scatter_reduce(x, 0, idx, s, "amax"), (x, src), (tx, ts))[1]
    torch.testing.assert_close(ours, torch.tensor([6.0, 5.0], dtype=torch.float64))
    torch.testing.assert_close(ours, theirs)


def test_a_first_gradient_alone_records_no_second_graph():
    """Without create_graph the backward calls the library directly (no Function of the
    gradient is recorded), as before forward mode and second derivatives existed."""
    x = rand(3, 4).requires_grad_()
    y = gather.gather(x, 1, torch.tensor([[0], [2], [1]])).sum()
    (g,) = torch.autograd.grad(y, x)
    assert g.grad_fn is None and not g.requires_grad
    (g2,) = torch.autograd.grad(gather.gather(x, 1, torch.tensor([[0], [2], [1]])).sum(), x, create_graph=True)
    assert g2.grad_fn is not None


@pytest.mark.parametrize("include_self", [True, False])
def test_products_second_derivatives_hold_with_zeros_in_their_groups(include_self):
    """Groups with no zero, one, two and three zeros (self among them or not), and src beyond
    index's extent: finite differences, forward over reverse, reverse over reverse."""
    x = torch.tensor([[2.0, 0.0, 1.5, 0.0, -1.0], [0.5, 3.0, -2.0, 1.0, 0.0]], dtype=torch.float64)
    src = torch.tensor([[0.0, 1.25, -0.5], [0.0, 0.0, 2.0], [0.75, -1.5, 0.0]], dtype=torch.float64)
    idx = torch.tensor([[1, 3], [0, 3]])  # into dim 1 of x (2, 5); src (2, 3) reaches beyond it

    def f(x, s):
        return gather.scatter_reduce(x, 1, idx, s[:2], "prod", include_self=include_self)

    def g(x, s):
        return gather.index_reduce(x, 1, torch.tensor([3, 1, 3]), s[:2], "prod", include_self=include_self)

    for fn in (f, g):
        args = (x.clone().requires_grad_(), src.clone().requires_grad_())
        assert torch.autograd.gradgradcheck(fn, args, check_fwd_over_rev=True)
        loss = lambda x, s: (fn(x, s) * torch.arange(10.0, dtype=torch.float64).reshape(2, 5)).sum()  # noqa: E731
        by_rev = func.hessian(loss, (0, 1))(x, src)
        by_double_rev = func.jacrev(func.jacrev(loss, (0, 1)), (0, 1))(x, src)
        torch.testing.assert_close(by_double_rev, by_rev)
    # PyTorch's gradient takes src of index's shape only.
    theirs = lambda x, s: (torch.scatter_reduce(x, 1, idx, s[:2, :2], "prod", include_self=include_self) ** 2).sum()  # noqa: E731
    ours = lambda x, s: (f(x, s[:, :2]) ** 2).sum()  # noqa: E731
    x1, s1 = x + 3.0, src + 3.0  # no zeros: PyTorch's double backward refuses src groups with several
    twice = func.jacrev(func.jacrev(theirs, (0, 1)), (0, 1))(x1, s1)  # PyTorch's forward mode of prod is zero
    torch.testing.assert_close(func.hessian(ours, (0, 1))(x1, s1), twice)


def test_a_products_third_derivative_is_refused_with_the_reason():
    x = rand(2, 3).requires_grad_()
    idx = torch.tensor([[0, 0], [2, 1]])
    y = (gather.scatter_reduce(x, 1, idx, x[:, :2], "prod") ** 2).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="third derivative of a product .* is not supported"):
        torch.autograd.grad(gg.sum(), x)
    third = func.jacrev(func.jacrev(func.jacrev(lambda x: gather.gather(x, 1, idx) ** 3)))(x.detach())
    assert third.shape == (2, 2, 2, 3, 2, 3, 2, 3)  # the piecewise-linear ops have every order


def test_forward_mode_over_forward_mode_is_refused_rather_than_silently_zero():
    """torch.func drops a custom Function's jvp rule from an outer jvp's view: PyTorch's own
    Functions get a zero second derivative there; gather's ops refuse."""
    x, idx = rand(2, 3), torch.tensor([[0, 0], [2, 1]])
    f = lambda x: (gather.scatter_reduce(x, 1, idx, x[:, :2], "prod") ** 2).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match="forward mode over forward mode .* is not supported"):
        func.jacfwd(func.jacfwd(f))(x)
    torch.testing.assert_close(func.jvp(func.grad(f), (x,), (torch.ones_like(x),))[1],
                               func.hessian(f)(x).reshape(6, 6).sum(1).reshape(2, 3))
