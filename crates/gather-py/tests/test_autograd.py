"""Torch autograd through gather's ops: tensors that require grad get the same outputs and
gradients as PyTorch's own ops (and pass torch.autograd.gradcheck's finite differences), no
gradient is recorded under torch.no_grad(), and the in-place forms refuse to drop one silently."""

import numpy as np
import pytest

import gather

torch = pytest.importorskip("torch")

GEN = torch.Generator().manual_seed(7)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=GEN)


def perm(n, k):
    """k distinct positions below n (duplicate-free indices, where PyTorch picks no winner)."""
    return torch.randperm(n, generator=GEN)[:k]


def same_as_torch(ours, theirs, *tensors):
    """Output and gradients of ``ours`` equal PyTorch's ``theirs`` for the same tensors and the
    same weighted loss."""
    mine = [t.clone().requires_grad_() for t in tensors]
    ref = [t.clone().requires_grad_() for t in tensors]
    out, want = ours(*mine), theirs(*ref)
    assert isinstance(out, torch.Tensor) and out.requires_grad
    torch.testing.assert_close(out, want)
    w = rand(*want.shape)
    (out * w).sum().backward()
    (want * w).sum().backward()
    for a, b in zip(mine, ref):
        torch.testing.assert_close(a.grad, b.grad)


def test_reads_have_pytorchs_gradients():
    x = rand(4, 5)
    idx = torch.randint(0, 5, (4, 3), generator=GEN)
    same_as_torch(lambda a: gather.gather(a, 1, idx), lambda a: torch.gather(a, 1, idx), x)
    rows = torch.tensor([3, 0, 3, 1])
    same_as_torch(lambda a: gather.index_select(a, 0, rows), lambda a: torch.index_select(a, 0, rows), x)
    flat = torch.tensor([[19, 0], [-1, 7]])
    same_as_torch(lambda a: gather.take(a, flat), lambda a: torch.take(a, flat), x)
    same_as_torch(lambda a: gather.take_along_dim(a, idx, 1), lambda a: torch.take_along_dim(a, idx, 1), x)
    mask = torch.rand(4, 5, generator=GEN) > 0.5
    same_as_torch(lambda a: gather.masked_select(a, mask), lambda a: torch.masked_select(a, mask), x)
    reps = torch.tensor([2, 0, 1, 3])
    same_as_torch(lambda a: gather.repeat_interleave(a, reps, 0), lambda a: torch.repeat_interleave(a, reps, 0), x)
    same_as_torch(lambda a: gather.sort(a, 1, True)[0], lambda a: torch.sort(a, 1, True)[0], x)
    same_as_torch(lambda a: gather.topk(a, 2, 0)[0], lambda a: torch.topk(a, 2, 0)[0], x)


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
def test_writes_have_pytorchs_gradients_for_input_and_src():
    x, src = rand(6, 3), rand(4, 3)
    rows = torch.stack([perm(6, 4) for _ in range(3)], 1)  # per column distinct: one writer a row
    same_as_torch(lambda a, s: gather.scatter(a, 0, rows, s), lambda a, s: torch.scatter(a, 0, rows, s), x, src)
    same_as_torch(lambda a: gather.scatter(a, 0, rows, value=2.5), lambda a: torch.scatter(a, 0, rows, 2.5), x)
    dup = torch.randint(0, 6, (4, 3), generator=GEN)
    same_as_torch(lambda a, s: gather.scatter_add(a, 0, dup, s), lambda a, s: torch.scatter_add(a, 0, dup, s),
                  x, src)
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            same_as_torch(lambda a, s: gather.scatter_reduce(a, 0, dup, s, reduce, include_self=include_self),
                          lambda a, s: torch.scatter_reduce(a, 0, dup, s, reduce, include_self=include_self),
                          x, src)
            if reduce != "sum":  # index_reduce has no sum (index_add is its sum)
                same_as_torch(lambda a, s: gather.index_reduce(a, 0, dup[:, 0], s, reduce, include_self=include_self),
                              lambda a, s: torch.index_reduce(a, 0, dup[:, 0], s, reduce, include_self=include_self),
                              x, src)
    ids = perm(6, 4)
    same_as_torch(lambda a, s: gather.index_add(a, 0, dup[:, 0], s, alpha=2.0),
                  lambda a, s: torch.index_add(a, 0, dup[:, 0], s, alpha=2.0), x, src)
    same_as_torch(lambda a, s: gather.index_copy(a, 0, ids, s), lambda a, s: torch.index_copy(a, 0, ids, s), x, src)
    same_as_torch(lambda a: gather.index_fill(a, 1, torch.tensor([2, 0]), -1.0),
                  lambda a: torch.index_fill(a, 1, torch.tensor([2, 0]), -1.0), x)
    flat = perm(18, 5)
    five = rand(5)
    for accumulate in [False, True]:
        same_as_torch(lambda a, s: gather.put(a, flat, s, accumulate),
                      lambda a, s: torch.put(a, flat, s, accumulate), x, five)
    mask = torch.rand(6, 3, generator=GEN) > 0.4
    source = rand(18)
    same_as_torch(lambda a, s: gather.masked_scatter(a, mask, s), lambda a, s: torch.masked_scatter(a, mask, s),
                  x, source)


def test_gradients_pass_gradcheck_also_for_ops_and_policies_pytorch_lacks():
    x = rand(3, 4).requires_grad_()
    s = rand(3, 2).requires_grad_()
    idx = torch.tensor([[0, 3], [1, 1], [2, 0]])
    batch = rand(2, 5, 3).requires_grad_()
    picks = torch.tensor([[4, 0], [2, 2]])
    checks = [
        (lambda a, b: gather.scatter_add(a, 1, idx, b), (x, s)),
        (lambda a, b: gather.scatter_reduce(a, 1, idx, b, "amax", include_self=False), (x, s)),
        (lambda a: gather.select_batched(a, 1, picks, 1), (batch,)),
        (lambda a: gather.gather(a, 1, torch.tensor([[5, -1], [0, 9], [3, 3]]), bounds="fill", fill_value=0.0), (x,)),
        (lambda a, b: gather.scatter_add(a, 1, torch.tensor([[7, -1], [0, 1], [3, 3]]), b, bounds="drop"), (x, s)),
        (lambda a: gather.take(a, torch.tensor([-20, 5, 30]), bounds="clip"), (x,)),
    ]
    for f, inputs in checks:
        assert torch.autograd.gradcheck(f, inputs)


def test_policy_gradients_reach_the_element_each_index_reached():
    x = rand(3, 4)
    idx = torch.tensor([[-9, 2], [7, 0], [3, 3]])
    clipped = idx.clamp(0, 3)
    same_as_torch(lambda a: gather.gather(a, 1, idx, bounds="clip"), lambda a: torch.gather(a, 1, clipped), x)
    wrapped = torch.tensor([[-1, 2], [-4, 0], [3, -2]])
    same_as_torch(lambda a: gather.gather(a, 1, wrapped, bounds="wrap"),
                  lambda a: torch.gather(a, 1, wrapped % 4), x)


def test_a_training_step_updates_a_parameter_through_the_ops():
    emb = torch.nn.Parameter(rand(10, 4))
    opt = torch.optim.SGD([emb], lr=0.5)
    ids = torch.tensor([1, 7, 1])
    before = emb.detach().clone()
    rows = gather.index_select(emb, 0, ids)
    per_node = gather.scatter_add(torch.zeros(2, 4, dtype=torch.float64), 0,
                                  torch.tensor([[0], [1], [0]]).expand(3, 4), rows)
    per_node.pow(2).sum().backward()
    opt.step()
    # d/d emb[1] of |emb1 + emb1|^2 + |emb7|^2 is 8 emb1; of emb7, 2 emb7; the rest stays.
    torch.testing.assert_close(emb.detach()[1], before[1] - 0.5 * 8 * before[1])
    torch.testing.assert_close(emb.detach()[7], before[7] - 0.5 * 2 * before[7])
    changed = (emb.detach() != before).any(1)
    assert changed.tolist() == [i in (1, 7) for i in range(10)]


def test_no_grad_mode_runs_on_tensors_that_require_grad_and_records_nothing():
    x = rand(3, 4).requires_grad_()
    with torch.no_grad():
        out = gather.gather(x, 1, torch.tensor([[1], [0], [3]]))
        values, indices = gather.sort(x)
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, torch.gather(x.detach(), 1, torch.tensor([[1], [0], [3]])))
    assert not values.requires_grad
    # argsort's output is indices: never differentiable, and read without a copy of x.
    order = gather.argsort(x, 1)
    assert order.dtype == torch.int64 and not order.requires_grad
    assert torch.equal(order, torch.argsort(x.detach(), dim=1, stable=True))


def test_sort_and_topk_indices_are_not_differentiable():
    x = rand(5).requires_grad_()
    values, indices = gather.topk(x, 3)
    assert values.requires_grad and not indices.requires_grad
    values.sum().backward()
    assert x.grad.tolist() == [1.0 if i in indices.tolist() else 0.0 for i in range(5)]


def test_in_place_forms_refuse_a_tensor_that_requires_grad_unless_under_no_grad():
    x = rand(4).requires_grad_()
    src = torch.ones(2, dtype=torch.float64)
    idx = torch.tensor([0, 3])
    with pytest.raises(gather.InvalidArgumentError, match="scatter_add_: input requires grad") as e:
        gather.scatter_add_(x, 0, idx, src)
    assert "gather.scatter_add (out of place)" in e.value.hint
    before = x.detach().clone()
    with torch.no_grad():
        assert gather.scatter_add_(x, 0, idx, src) is x
    torch.testing.assert_close(x.detach(), before + torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64))
    plain = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(gather.InvalidArgumentError, match="index_copy_: source requires grad"):
        gather.index_copy_(plain, 0, idx, src.clone().requires_grad_())


def test_backward_reports_an_input_changed_in_place_after_the_forward():
    x = rand(3).requires_grad_()
    y = x * 2
    out = gather.take(y, torch.tensor([2, 0]))
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_the_wrappers_keep_the_ops_names_signatures_and_docs():
    import inspect

    # PyTorch's keyword-only `out` (and gather's `sparse_grad`) come on top of the extension's.
    extra = {"gather": ["sparse_grad", "out"], "scatter_reduce": ["out"]}
    for name in ["gather", "scatter_reduce", "index_add_", "argsort", "select_batched"]:
        f = getattr(gather, name)
        assert f.__name__ == name and f.__doc__ == getattr(gather._native, name).__doc__
        native = list(inspect.signature(getattr(gather._native, name)).parameters)
        assert [p for p in inspect.signature(f).parameters if p not in extra.get(name, [])] == native
    # NumPy arrays take the direct path and come back as NumPy arrays.
    assert isinstance(gather.gather(np.arange(3.0), 0, np.array([2])), np.ndarray)


def test_arguments_by_position_or_name_are_recorded_alike_and_bad_calls_raise_type_errors():
    # The recorded path binds arguments by name itself (not by inspect.signature): every mix
    # of positions and keywords gives the same output and gradients, keyword-only options and
    # defaults included, and a call that does not bind raises Python's TypeError as before.
    x, src = rand(4, 5), rand(4, 3)
    idx = torch.randint(0, 5, (4, 3), generator=GEN)
    calls = [
        lambda a, s: gather.scatter_reduce(a, 1, idx, s, "amax"),
        lambda a, s: gather.scatter_reduce(a, 1, idx, s, reduce="amax", include_self=True),
        lambda a, s: gather.scatter_reduce(a, 1, index=idx, reduce="amax", src=s),
        lambda a, s: gather.scatter_reduce(src=s, reduce="amax", index=idx, dim=1, input=a),
        lambda a, s: gather.scatter_reduce(a, dim=1, index=idx, src=s, reduce="amax", deterministic=True),
    ]
    for f in calls:
        same_as_torch(f, lambda a, s: torch.scatter_reduce(a, 1, idx, s, "amax"), x, src)
    same_as_torch(lambda a: gather.gather(a, 1, idx, bounds="clip"),
                  lambda a: torch.gather(a, 1, idx.clamp(0, 4)), x)
    a, s = x.clone().requires_grad_(), src.clone().requires_grad_()
    bad = [
        lambda: gather.gather(a, 1),  # index missing
        lambda: gather.gather(a, 1, idx, "clip"),  # bounds is keyword-only
        lambda: gather.gather(a, 1, idx, dim=1),  # dim twice
        lambda: gather.gather(a, 1, idx, bound="clip"),  # no such argument
        lambda: gather.scatter_add(a, 1, idx),  # src missing
        lambda: gather.scatter_add(a, 1, idx, src=s, input=a),  # input twice
    ]
    for f in bad:
        with pytest.raises(TypeError):
            f()


def test_a_scatter_plan_is_recorded_with_the_ops_gradients():
    ids = torch.tensor([2, 0, 2, 1, 2])
    plan = gather.ScatterPlan(ids, 3)
    dst, src = rand(3, 4), rand(5, 4)
    spread = ids[:, None].expand(5, 4)
    same_as_torch(lambda d, s: plan.scatter_add(d, s), lambda d, s: torch.scatter_add(d, 0, spread, s), dst, src)
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        same_as_torch(lambda d, s: plan.scatter_reduce(d, s, reduce, include_self=False),
                      lambda d, s: torch.scatter_reduce(d, 0, spread, s, reduce, include_self=False), dst, src)
    # Each src row's gradient is its target row's: the plan's rows, read again by backward.
    s = src.clone().requires_grad_()
    per_row = torch.tensor([[1.0], [10.0], [100.0]], dtype=torch.float64)
    (plan.scatter_add(dst, s) * per_row).sum().backward()
    want = torch.tensor([100.0, 1.0, 100.0, 10.0, 100.0], dtype=torch.float64)[:, None].expand(5, 4)
    torch.testing.assert_close(s.grad, want)
    assert torch.autograd.gradcheck(lambda d, s: plan.scatter_reduce(d, s, "amax"),
                                    (dst.clone().requires_grad_(), src.clone().requires_grad_()))
    # An index changed in place since the plan was built is an error in backward, not a gradient
    # that differs from the forward.
    out = plan.scatter_add(dst, src.clone().requires_grad_())
    ids[0] = 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_half_and_single_precision_tensors_get_gradients_of_their_own_dtype(dtype):
    x = rand(3, 4).to(dtype)
    src = rand(3, 2).to(dtype)
    idx = torch.tensor([[0, 0], [1, 2], [3, 3]])
    # assert_close allows each dtype its rounding (gather accumulates half precision in float32).
    same_as_torch(lambda a: gather.gather(a, 1, idx), lambda a: torch.gather(a, 1, idx), x)
    same_as_torch(lambda a, s: gather.scatter_add(a, 1, idx, s), lambda a, s: torch.scatter_add(a, 1, idx, s),
                  x, src)
    # gather.grad itself takes the framework's bfloat16 as grad_output.
    g = gather.grad.gather(torch.ones(3, 2, dtype=dtype), x, 1, idx)
    assert g.dtype == dtype and g.tolist() == [[2, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 2]]


def test_gather_grad_reads_tensors_that_require_grad_as_a_custom_functions_backward_has_them():
    class Pick(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, idx):
            ctx.save_for_backward(x, idx)
            return gather.gather(x.detach(), 1, idx)

        @staticmethod
        def backward(ctx, g):
            x, idx = ctx.saved_tensors  # x requires grad here
            return gather.grad.gather(g, x, 1, idx), None

    x = rand(2, 3).requires_grad_()
    idx = torch.tensor([[2, 2], [0, 1]])
    Pick.apply(x, idx).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 2.0], [1.0, 1.0, 0.0]]
    assert gather.grad.gather.__module__ == "gather.grad" and gather.grad.gather.__name__ == "gather"


def compiled_same_as_eager(f, cases):
    """``torch.compile(f, fullgraph=True)`` (a graph break is an error) gives eager ``f``'s
    value and gradients for each case of inputs, among them transposed ones: the library's
    results are C-contiguous whatever the inputs' layout, and the fakes must say so."""
    same = torch.compile(f, fullgraph=True)
    for case in cases:
        mine = [t.clone().requires_grad_() for t in case]
        ref = [t.clone().requires_grad_() for t in case]
        got, want = same(*mine), f(*ref)
        torch.testing.assert_close(got, want)
        got.backward()
        want.backward()
        for a, b in zip(mine, ref):
            torch.testing.assert_close(a.grad, b.grad)


def test_torch_compile_keeps_the_core_ops_in_one_graph_with_their_gradients():
    idx = torch.tensor([[0, 3], [1, 1], [2, 0]])
    rows = torch.tensor([2, 0, 2])

    w2, w4 = rand(3, 2), rand(3, 4)  # weights that tell every element apart, whatever its layout

    def f(x, s):
        a = gather.gather(x, 1, idx, bounds="clip")
        b = gather.scatter_add(x, 1, idx, s)
        c = gather.index_select(x, 0, rows)
        d = gather.scatter_reduce(x, 1, idx, s, "amax", include_self=False)
        e = gather.index_add(x, 0, rows, c, alpha=2.0)
        t = gather.take(x, idx)
        return (a * w2).sum() + (b * b * w4).sum() + (c * w4).sum() + (d * w4).sum() + (e * w4).sum() + (t * w2).sum()

    compiled_same_as_eager(f, [(rand(3, 4), rand(3, 2)), (rand(4, 3).t(), rand(2, 3).t())])
    # The graph holds gather's custom operators, which call the library at run time.
    x = rand(3, 4)
    assert torch.ops.gather.gather(x, 1, idx).tolist() == torch.gather(x, 1, idx).tolist()


def test_torch_compile_keeps_the_index_family_put_and_take_along_dim_in_one_graph():
    rows, flat, along = torch.tensor([2, 0, 3]), torch.tensor([5, 0, 11]), torch.tensor([[1], [0], [3]])
    w4 = rand(4, 3)

    def f(x, src):
        a = gather.index_copy(x, 0, rows, src)
        b = gather.index_fill(x, 1, torch.tensor([2]), -1.5)
        c = gather.index_reduce(x, 0, torch.tensor([1, 1, 3]), src, "prod", include_self=False)
        d = gather.put(x, flat, src[0], accumulate=True)
        e = gather.take_along_dim(x, along, 0)  # broadcast off dim: (3, 1) against (4, 3)
        g = gather.take_along_dim(x, flat)  # dim=None: the flattened input
        h = gather.take_along_dim(x, flat.view(3, 1))  # one axis, whatever the index's shape
        return ((a * w4).sum() + (b * w4).sum() + (c * w4).sum() + (d * w4).sum() + (e * w4[:3]).sum()
                + (g * g).sum() + (h * g).sum())

    compiled_same_as_eager(f, [(rand(4, 3), rand(3, 3)), (rand(3, 4).t(), rand(3, 3).t())])


def test_torch_compile_keeps_scatter_selection_sorting_masks_and_repeats_in_one_graph():
    idx = torch.tensor([[0, 3], [1, 2], [2, 0]])
    w4 = rand(3, 4)

    def f(x, s):
        a = gather.scatter(x, 1, idx, s)
        b = gather.scatter(x, 1, idx, value=2.5)  # the number form: another operator
        c = gather.select_batched(x, 1, torch.tensor([[3, 0], [1, 1], [2, 2]]), 1)
        v, i = gather.sort(x, 1, stable=True)
        tv, ti = gather.topk(x, 2, 0)
        o = gather.argsort(x, 0, descending=True)
        m = gather.masked_select(x, x > 0)  # a length known only at run time
        ms = gather.masked_scatter(x, x > 0, torch.cat([s.flatten(), s.flatten()]))
        r = gather.repeat_interleave(x, torch.tensor([1, 0, 2]), 0)  # run-time length too
        ro = gather.repeat_interleave(x, torch.tensor([1, 0, 2]), 0, output_size=3)
        ri = gather.repeat_interleave(x, 2, 1)  # the integer form
        return ((a * w4).sum() + (b * w4).sum() + (c * c).sum() + (v * w4).sum() + (tv * w4[:2]).sum()
                + (torch.gather(x, 0, o) * w4).sum() + (m * m).sum() + (ms * w4).sum() + (r * r).sum()
                + (ro * ro).sum() + (ri * ri).sum() + i.sum() + ti.sum())

    compiled_same_as_eager(f, [(rand(3, 4), rand(3, 2)), (rand(4, 3).t(), rand(2, 3).t())])


def test_torch_compile_keeps_the_in_place_forms_in_one_graph_writing_through_views():
    idx = torch.tensor([[0, 3], [1, 2], [2, 0]])

    def f(x, s):
        y = x.clone()
        gather.scatter_(y, 1, idx, s)
        gather.scatter_(y, 1, torch.tensor([[1], [2], [3]]), 7.0)
        gather.scatter_add_(y, 1, idx, s)
        gather.scatter_reduce_(y, 1, idx, s, "amin", include_self=False)
        gather.index_add_(y.t(), 1, torch.tensor([2, 0]), torch.cat([s, s[:1]]))  # through a view
        gather.index_copy_(y, 0, torch.tensor([1]), s.flatten()[:4].reshape(1, 4))
        gather.index_fill_(y, 1, torch.tensor([0]), -3.0)
        gather.index_reduce_(y, 0, torch.tensor([2, 2]), torch.cat([s.flatten(), s.flatten()[:2]]).reshape(2, 4),
                             "mean")
        gather.put_(y, torch.tensor([11, 0]), s[0], accumulate=True)
        assert gather.masked_scatter_(y, y > 1, s.flatten().repeat(2)) is y
        return y

    same = torch.compile(f, fullgraph=True)
    for x, s in [(rand(3, 4), rand(3, 2)), (rand(4, 3).t(), rand(2, 3).t())]:
        torch.testing.assert_close(same(x, s), f(x, s))

    # An optimizer's update of a parameter under no_grad, compiled.
    w, rows = torch.nn.Parameter(torch.zeros(4, 2)), torch.tensor([1, 3])

    @torch.compile(fullgraph=True)
    def step(g):
        with torch.no_grad():
            gather.index_add_(w, 0, rows, g, alpha=-0.5)

    step(torch.ones(2, 2))
    assert w.tolist() == [[0, 0], [-0.5, -0.5], [0, 0], [-0.5, -0.5]]


def _operator_cases():
    t = torch.tensor
    x, idx, s = rand(3, 4), t([[0, 3], [1, 1], [2, 0]]), rand(3, 2)
    return {
        "gather": ((x, 1, idx), {"bounds": "clip"}),
        "take": ((x, idx), {}),
        "index_select": ((x, 0, t([2, 0])), {}),
        "take_along_dim": ((x, t([[1], [0], [2]]), 1), {}),
        "select_batched": ((rand(2, 3, 4), 2, t([[1, 0], [3, 3]]), 1), {}),
        "scatter": ((x, 1, t([[0, 3], [1, 2], [2, 0]]), s), {}),
        "scatter_value": ((x, 1, idx, 2.5), {"reduce": "add"}),
        "scatter_add": ((x, 1, idx, s), {}),
        "scatter_reduce": ((x, 1, idx, s, "amax"), {"include_self": False}),
        "index_add": ((x, 0, t([2, 0]), rand(2, 4)), {"alpha": 2.0}),
        "index_copy": ((x, 0, t([2, 0]), rand(2, 4)), {}),
        "index_fill": ((x, 1, t([2]), -1.5), {}),
        "index_reduce": ((x, 0, t([1, 1]), rand(2, 4), "prod"), {}),
        "put": ((x, t([5, 0]), rand(2)), {"accumulate": True}),
        "masked_select": ((x, x > 0), {}),
        "masked_scatter": ((x, x > 0, rand(12)), {}),
        "sort": ((x, 1), {"stable": True}),
        "topk": ((x, 2, 0), {}),
        "argsort": ((x,), {"descending": True}),
        "repeat_interleave": ((x, t([1, 0, 2]), 0), {}),
        "repeat_interleave_int": ((x, 2, 1), {}),
    }


def test_every_custom_operator_passes_torchs_opcheck():
    """torch.library.opcheck: the fakes give the real outputs' shapes, strides and dtypes, the
    schemas say what is mutated, and autograd is registered as AOTAutograd traces it."""
    from gather import _torch_ops

    cases = _operator_cases()
    for op, operator in _torch_ops._OPS.items():
        args, kwargs = cases[op.rstrip("_")]
        if op.endswith("_"):
            args = (args[0].clone(),) + args[1:]
        torch.library.opcheck(operator, args, kwargs)


def test_every_op_and_in_place_form_is_a_custom_operator_under_compile():
    from gather import _torch_ops

    ops = {n for n in gather.__all__ if getattr(getattr(gather, n), "__wrapped__", None) is not None}
    assert ops == _torch_ops.COMPILED and len(ops) == 28
    for op in _torch_ops._SPECS:
        assert hasattr(torch.ops.gather, op)
        assert hasattr(torch.ops.gather, op + "_backward") == (_torch_ops._SPECS[op].diff not in (None, ()))


def test_the_operators_are_defined_when_dynamo_loads_whatever_the_import_order():
    import subprocess
    import sys

    step = (
        "f = torch.compile(lambda x: gather.take(x, torch.tensor([1])), fullgraph=True)\n"
        "print(hasattr(torch.ops.gather, 'take'), f(torch.arange(3.0)).tolist())\n"
    )
    for first in ("import gather\nimport torch\n", "import torch\nimport gather\n",
                  "import torch._dynamo\nimport gather\n"):
        # Neither import defines them (about 0.1 s), unless Dynamo was loaded already.
        code = first + "print(hasattr(torch.ops.gather, 'take'))\n" + step
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == [str("_dynamo" in first), "True", "[1.0]"], (first, out.stderr)


def test_torch_compile_keeps_a_scatter_plans_calls_in_the_graph_with_their_gradients():
    from gather import _torch_ops

    plan = gather.ScatterPlan(torch.tensor([2, 0, 2, 1, 2]), 3)
    w = rand(3, 4)

    def f(x, s):
        a = plan.scatter_add(x, s)
        b = plan.scatter_reduce(x, s * 2, "amax", include_self=False)
        c = plan.scatter_reduce(x, s, "mean")
        return (a * w).sum() + (b * w).sum() + (c * w).sum()

    compiled_same_as_eager(f, [(rand(3, 4), rand(5, 4)), (rand(4, 3).t(), rand(4, 5).t())])
    torch.library.opcheck(_torch_ops._PLAN_OPS["scatter_add"], (plan._key, rand(3, 4), rand(5, 4)), {})
    torch.library.opcheck(_torch_ops._PLAN_OPS["scatter_reduce"], (plan._key, rand(3, 4), rand(5, 4), "prod"),
                          {"include_self": False})

    # Another plan through the same compiled function: its own edges, not the first plan's.
    other = gather.ScatterPlan(torch.tensor([0, 0, 1, 1, 1]), 2)
    apply = torch.compile(lambda p, x, s: p.scatter_add(x, s), fullgraph=True)
    assert apply(plan, torch.zeros(3, 1), torch.ones(5, 1)).flatten().tolist() == [1, 1, 3]
    assert apply(other, torch.zeros(2, 1), torch.ones(5, 1)).flatten().tolist() == [2, 3]
