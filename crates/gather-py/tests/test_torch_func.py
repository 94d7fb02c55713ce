"""torch.func's transforms through gather's ops: vmap gives a loop of eager calls, grad and
per-example gradients (vmap of grad) equal torch.autograd's through the same ops, jacrev equals
PyTorch's own ops' Jacobian, transforms nest, and the in-place forms are refused with words
that say so (forward mode and second derivatives: tests/test_higher_order.py)."""

import pytest

import gather
import op_cases

torch = pytest.importorskip("torch")
func = torch.func

G = torch.Generator().manual_seed(7)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=G)


def cases():
    """(name, function of (x, s)): every differentiable op, x (3, 4) and s (3, 2); eagerly (and
    under grad) also masked_select, whose length depends on the values."""
    return op_cases.cases(torch.tensor, torch.cat) + [
        ("masked_select", lambda x, s: gather.masked_select(x, x > 0)),
    ]


def grads_by_autograd(f, x, s):
    """d(sum f(x, s)^2) / d(x, s) by torch.autograd through the same op (not torch.func)."""
    x, s = x.clone().requires_grad_(), s.clone().requires_grad_()
    (f(x, s) ** 2).sum().backward()
    return (x.grad if x.grad is not None else torch.zeros_like(x),
            s.grad if s.grad is not None else torch.zeros_like(s))


@pytest.mark.parametrize("name,f", cases(), ids=[c[0] for c in cases()])
def test_vmap_and_per_example_gradients_equal_a_loop_over_the_batch(name, f):
    xs, s = rand(4, 3, 4), rand(3, 2)
    before = xs.clone()
    if name != "masked_select":  # a length per element: no batched shape
        got = func.vmap(f, in_dims=(0, None))(xs, s)
        torch.testing.assert_close(xs, before, rtol=0, atol=0)  # the in-place forms write into a copy
        torch.testing.assert_close(got, torch.stack([f(xs[b], s) for b in range(4)]), rtol=0, atol=0)
    loss = lambda x, s: (f(x, s) ** 2).sum()  # noqa: E731
    gx, gs = func.grad(loss, (0, 1))(xs[0], s)
    want = grads_by_autograd(f, xs[0], s)
    torch.testing.assert_close((gx, gs), want)
    if name != "masked_select":
        per_example = func.vmap(func.grad(loss, (0, 1)), in_dims=(0, None))(xs, s)
        for b in range(4):
            torch.testing.assert_close((per_example[0][b], per_example[1][b]), grads_by_autograd(f, xs[b], s))


def test_vmap_and_its_gradient_are_one_call_of_the_library_each(monkeypatch):
    from gather import _native

    calls = []
    real = _native._batched
    monkeypatch.setattr(_native, "_batched", lambda *a: calls.append(a[:2]) or real(*a))
    x, idx = rand(200, 6, 3), torch.randint(0, 6, (200, 2, 3), generator=G)
    loss = lambda x, i: (gather.gather(x, 0, i) ** 2).sum()  # noqa: E731
    per_example = func.vmap(func.grad(loss))(x, idx)
    assert calls == [("gather", "call"), ("gather", "grad")]
    want = torch.stack([torch.func.grad(lambda x: (torch.gather(x, 0, idx[b]) ** 2).sum())(x[b]) for b in range(200)])
    torch.testing.assert_close(per_example, want)


def test_jacrev_equals_the_jacobian_of_pytorchs_own_ops():
    x, s = rand(3, 4), rand(3, 2)
    idx = torch.tensor([[0, 3], [1, 2], [2, 0]])
    for ours, theirs in [
        (lambda x: gather.gather(x, 1, idx), lambda x: torch.gather(x, 1, idx)),
        (lambda x: gather.scatter_reduce(x, 1, idx, s, "mean"), lambda x: torch.scatter_reduce(x, 1, idx, s, "mean")),
        (lambda x: gather.index_select(x, 1, idx[0]), lambda x: torch.index_select(x, 1, idx[0])),
    ]:
        torch.testing.assert_close(func.jacrev(ours)(x), func.jacrev(theirs)(x))


def test_a_batched_index_nested_vmaps_and_sort_indices():
    x = rand(5, 4)
    per_row = torch.tensor([[0, 1], [3, 3], [2, 0]])
    got = func.vmap(lambda i: gather.index_select(x, 1, i))(per_row)
    torch.testing.assert_close(got, torch.stack([torch.index_select(x, 1, i) for i in per_row]))
    xs = rand(2, 3, 5)
    values, indices = func.vmap(func.vmap(lambda r: gather.sort(r, 0, descending=True)))(xs)
    want = torch.sort(xs, stable=True, dim=-1, descending=True)
    torch.testing.assert_close(values, want.values)
    assert indices.dtype == torch.int64 and torch.equal(indices, want.indices)


def test_a_plans_per_example_gradients_equal_those_of_the_expanded_index():
    idx = torch.tensor([2, 0, 2, 1])
    plan = gather.ScatterPlan(idx, 3)
    dst, src = rand(5, 3, 2), rand(5, 4, 2)
    expanded = idx[:, None].expand(4, 2)
    ours = func.vmap(func.grad(lambda d, s: (plan.scatter_reduce(d, s, "mean") ** 2).sum(), (0, 1)))(dst, src)
    theirs = func.vmap(func.grad(lambda d, s: (torch.scatter_reduce(d, 0, expanded, s, "mean") ** 2).sum(),
                                 (0, 1)))(dst, src)
    torch.testing.assert_close(ours, theirs)


def test_in_place_forms_are_refused_with_the_reason():
    idx = torch.tensor([[0], [2], [1]])
    with pytest.raises(gather.InvalidArgumentError, match="call gather.scatter_add \\(out of place\\)"):
        func.vmap(lambda r: gather.scatter_add_(r, 0, idx[:, 0], r[:3]))(rand(2, 4))


def test_a_bad_index_in_one_batch_element_is_the_librarys_error_naming_the_element():
    x, idx = rand(3, 4), torch.tensor([[1], [2], [30]])
    with pytest.raises(gather.IndexOutOfBoundsError, match="tried to access index 30") as caught:
        func.vmap(lambda i: gather.take(x, i))(idx)
    assert caught.value.index_value == 30
    assert "in vmap's batch element [2]" in getattr(caught.value, "__notes__", [])
