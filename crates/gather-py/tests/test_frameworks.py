"""Arrays of other frameworks through DLPack: PyTorch CPU tensors and JAX arrays go in without a
copy and results come back as the caller's type. CI installs both frameworks (see .ci/run)."""

import numpy as np
import pytest

import gather

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = jax.numpy


def test_torch_in_torch_out_with_the_values_of_the_numpy_call():
    x = torch.arange(12.0).reshape(3, 4)
    idx = torch.tensor([[0, 3], [1, 1], [2, 0]])
    out = gather.gather(x, 1, idx)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    np.testing.assert_array_equal(out.numpy(), gather.gather(x.numpy(), 1, idx.numpy()))
    values, indices = gather.sort(torch.tensor([3.0, 1.0, 2.0]))
    assert isinstance(values, torch.Tensor) and isinstance(indices, torch.Tensor)
    assert indices.tolist() == [1, 2, 0]


def test_torch_result_is_handed_over_without_a_copy():
    # The result tensor's memory is the array the library allocated: DLPack moves it.
    out = gather.take(torch.arange(10), torch.tensor([9, 0]))
    assert np.from_dlpack(out).ctypes.data == out.data_ptr()
    assert out.tolist() == [9, 0]


def test_torch_inplace_form_writes_into_the_tensors_own_memory():
    x = torch.zeros(3)
    ptr = x.data_ptr()
    out = gather.scatter_add_(x, 0, torch.tensor([0, 2, 0]), torch.tensor([1.0, 2.0, 3.0]))
    assert out is x and x.data_ptr() == ptr
    assert x.tolist() == [4.0, 0.0, 2.0]


def test_torch_inplace_form_writes_through_a_non_contiguous_view():
    base = torch.zeros(4, 6)
    view = base[:, ::2]
    assert not view.is_contiguous()
    gather.index_fill_(view, 1, torch.tensor([1]), 5.0)
    expect = torch.zeros(4, 6)
    expect[:, 2] = 5.0
    assert torch.equal(base, expect)


def test_torch_inputs_are_read_in_place_not_copied():
    # A non-contiguous tensor is read through its strides: the result matches the contiguous copy.
    t = torch.arange(24.0).reshape(4, 6).t()
    idx = torch.tensor([[3, 0, 1, 2]])
    assert torch.equal(gather.gather(t, 0, idx), gather.gather(t.contiguous(), 0, idx))


def test_torch_bfloat16_in_and_out():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    out = gather.take(x, torch.tensor([2, 0]))
    assert out.dtype == torch.bfloat16 and out.tolist() == [3.0, 1.0]
    gather.scatter_add_(x, 0, torch.tensor([0, 0]), torch.tensor([0.5, 0.25], dtype=torch.bfloat16))
    assert x.tolist() == [1.75, 2.0, 3.0]


@pytest.mark.parametrize("view", ["columns", "transposed", "every_other_row"])
def test_strided_torch_bfloat16_views_give_what_their_contiguous_copies_give(view):
    g = torch.Generator().manual_seed(3)
    base = torch.randn(40, 50, generator=g).to(torch.bfloat16)
    src = torch.randn(40, 50, generator=g).to(torch.bfloat16)
    pick = {"columns": lambda t: t[:, 5:35], "transposed": lambda t: t[:30, :40].T,
            "every_other_row": lambda t: t[::2, :30]}[view]
    x, s = pick(base), pick(src)
    assert not x.is_contiguous()
    idx = torch.randint(0, x.shape[1], (x.shape[0], 9), generator=g)
    want = gather.scatter_add(x.contiguous(), 1, idx, s.contiguous())
    got = gather.scatter_add(x, 1, idx, s)
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    before = base.clone()
    gather.scatter_add_(x, 1, idx, s)  # in place through the view, into base's memory
    assert torch.equal(x, want) and torch.equal(pick(base), want)
    outside = torch.ones(base.shape, dtype=torch.bool)
    pick(outside).fill_(False)
    assert torch.equal(base[outside], before[outside])


def test_torch_failing_inplace_call_leaves_the_tensor_unchanged():
    x = torch.ones(3)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_add_(x, 0, torch.tensor([0, 3]), torch.ones(2))
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_jax_in_jax_out():
    x = jnp.arange(6.0).reshape(2, 3)
    out = gather.gather(x, 1, jnp.array([[2], [0]]))
    assert isinstance(out, jax.Array)
    np.testing.assert_array_equal(np.asarray(out), [[2.0], [3.0]])
    b = gather.take(jnp.array([1.0, 2.0, 3.0], dtype=jnp.bfloat16), jnp.array([2, 0]))
    assert isinstance(b, jax.Array) and b.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(b.astype(jnp.float32)), [3.0, 1.0])


def test_mixed_frameworks_return_the_type_of_the_data_argument():
    # The data argument decides: a NumPy index with a torch input gives a torch result.
    out = gather.index_select(torch.arange(5), 0, np.array([4, 1]))
    assert isinstance(out, torch.Tensor) and out.tolist() == [4, 1]
    out = gather.index_select(np.arange(5), 0, torch.tensor([4, 1]))
    assert isinstance(out, np.ndarray) and out.tolist() == [4, 1]


def test_repeat_interleave_of_repeats_alone_returns_the_repeats_framework():
    # torch.repeat_interleave(repeats) has no data argument: the repeats decide the type.
    out = gather.repeat_interleave(torch.tensor([1, 0, 2]))
    assert isinstance(out, torch.Tensor) and out.tolist() == torch.repeat_interleave(torch.tensor([1, 0, 2])).tolist()
    out = gather.repeat_interleave(jnp.array([2, 1]))
    assert isinstance(out, jax.Array) and out.tolist() == [0, 0, 1]
    assert isinstance(gather.repeat_interleave(np.array([1, 1])), np.ndarray)


def test_torch_cpu_tensors_go_through_numpy_views_with_the_dlpack_results():
    # The wrappers hand CPU tensors over as NumPy views (faster than DLPack's export); the
    # results, their types and the writes of the in-place forms are those of the DLPack path.
    x, idx = torch.arange(12.0).reshape(3, 4), torch.tensor([[3, 0], [1, 1], [0, 2]])
    out = gather.gather(x, 1, idx)
    assert isinstance(out, torch.Tensor) and torch.equal(out, gather._native.gather(x, 1, idx))
    values, order = gather.topk(x, 2, 1)
    assert isinstance(order, torch.Tensor) and order.dtype == torch.int64
    y = torch.zeros(3, 4)
    assert gather.scatter_add_(y, 1, idx, torch.ones(3, 2)) is y and y.sum().item() == 6.0
    # A NumPy input keeps the NumPy result, whatever the other arguments are.
    assert isinstance(gather.gather(x.numpy(), 1, idx), np.ndarray)


_TORCH_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64] + [
    getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)]

# Layouts of a [6, 5] tensor of `base`'s: every stride and offset a view can have on the CPU.
_TORCH_LAYOUTS = {
    "contiguous": lambda b: b[:6, :5],
    "transposed": lambda b: b[:5, :6].T,
    "offset_columns": lambda b: b[1:7, 2:7],
    "stepped": lambda b: b[::2, 1::2][:6, :5],
    "expanded_row": lambda b: b[3, :5].expand(6, 5),
    "scalar_expanded": lambda b: b[2, 4].expand(6, 5),
}


def _torch_values(dtype, shape, g):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 8).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("layout", sorted(_TORCH_LAYOUTS))
@pytest.mark.parametrize("dtype", _TORCH_DTYPES, ids=str)
def test_torch_tensors_of_every_dtype_and_layout_are_read_as_torch_reads_them(dtype, layout):
    g = torch.Generator().manual_seed(5)
    x = _TORCH_LAYOUTS[layout](_torch_values(dtype, (12, 12), g))
    idx = torch.randint(0, 5, (6, 3), generator=g)
    rows = torch.tensor([5, 0, 3, 3])
    exact = lambda a: a.to(torch.float64) if dtype in (torch.uint16, torch.uint32, torch.uint64) else a
    got = gather.gather(x, 1, idx)
    assert got.dtype == dtype and torch.equal(exact(got), exact(torch.gather(exact(x), 1, idx)))
    got = gather.index_select(x, 0, rows)
    assert got.dtype == dtype and torch.equal(exact(got), exact(torch.index_select(exact(x), 0, rows)))
    # The index read in place too, in a layout of its own (int32, transposed).
    idx32 = idx.to(torch.int32).T.contiguous().T
    assert torch.equal(exact(gather.gather(x, 1, idx32)), exact(torch.gather(exact(x), 1, idx)))


def test_unusual_torch_tensors_give_torchs_results():
    # A subclass, a misaligned tensor (copied to be read), an empty one and a 0-d one.
    class Tagged(torch.Tensor):
        pass

    x = torch.arange(20.0).reshape(4, 5)
    idx = torch.tensor([[4, 0], [1, 1], [2, 3], [0, 0]])
    tagged = x.as_subclass(Tagged)
    assert torch.equal(torch.as_tensor(gather.gather(tagged, 1, idx)), torch.gather(x, 1, idx))
    raw = bytearray(4 * 20 + 1)
    odd = torch.frombuffer(raw, dtype=torch.float32, offset=1, count=20).reshape(4, 5)
    assert odd.data_ptr() % 4 != 0
    odd.copy_(x)
    assert torch.equal(gather.gather(odd, 1, idx), torch.gather(x, 1, idx))
    empty = torch.zeros(0, 5)
    assert gather.index_select(empty, 1, torch.tensor([4, 0])).shape == (0, 2)
    assert gather.take(torch.tensor(7.0), torch.tensor([0, 0])).tolist() == [7.0, 7.0]


@pytest.mark.parametrize("op", ["scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_",
                                "index_fill_", "index_reduce_", "put_", "masked_scatter_"])
def test_torch_inplace_forms_move_the_version_counter_as_torchs_own_do(op):
    # A backward that saved the tensor must refuse to run once the library has written it, as
    # after torch's own in-place ops, instead of using the new values silently.
    rows, ones = torch.tensor([0, 2]), torch.ones(2, 3)
    args = {
        "scatter_": (0, rows[:, None].expand(2, 3), ones), "scatter_add_": (0, rows[:, None].expand(2, 3), ones),
        "scatter_reduce_": (0, rows[:, None].expand(2, 3), ones, "amax"), "index_add_": (0, rows, ones),
        "index_copy_": (0, rows, ones), "index_fill_": (0, rows, 5.0), "index_reduce_": (0, rows, ones, "prod"),
        "put_": (rows, torch.tensor([3.0, 4.0])), "masked_scatter_": (torch.eye(3, dtype=torch.bool), torch.ones(9)),
    }[op]
    w = torch.ones(3, 3, requires_grad=True)
    t = torch.full((3, 3), 2.0)
    y = (w * t).sum()
    before = t._version
    assert getattr(gather, op)(t, *args) is t
    assert t._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_torch_inplace_write_under_no_grad_moves_the_version_counter():
    # A leaf that requires grad, written under torch.no_grad() (an optimizer's update): a graph
    # that saved it refuses its backward afterwards, as with torch's own in-place ops.
    w = torch.ones(3, requires_grad=True)
    y = (w * w).sum()
    with torch.no_grad():
        gather.index_add_(w, 0, torch.tensor([1]), torch.ones(1))
    assert w.tolist() == [1.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    # A bfloat16 target goes through DLPack rather than a NumPy view: the same.
    b, v = torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.bfloat16, requires_grad=True)
    y = (v * b).sum()
    gather.put_(b, torch.tensor([0]), torch.tensor([3.0], dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_torch_failing_inplace_call_keeps_the_version_counter():
    t = torch.zeros(3)
    before = t._version
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_add_(t, 0, torch.tensor([5]), torch.ones(1))
    assert t._version == before and t.tolist() == [0.0, 0.0, 0.0]


def test_torch_negative_views_are_read_with_their_sign():
    # z.conj().imag is a view with the negative bit, which torch's DLPack export drops: it is
    # resolved before the library reads it, and refused as an in-place target.
    z = torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j])
    view, rows = z.conj().imag, torch.tensor([2, 0])
    assert view.is_neg()
    assert torch.equal(gather.index_select(view, 0, rows), torch.index_select(view, 0, rows))
    assert torch.equal(gather.take(view, rows), torch.take(view, rows))
    assert torch.equal(gather.index_select(torch.arange(3.0), 0, rows), torch.tensor([2.0, 0.0]))
    with pytest.raises(gather.InvalidArgumentError, match="negative bit"):
        gather.index_fill_(view, 0, rows, 1.0)


# The rank error of a 1-d index for a 2-d input: its hint's fix, as each framework writes it.
_RANK = (np.zeros((3, 4), np.float32), np.array([0, 1, 2]))


def _hint(call):
    with pytest.raises(gather.RankMismatchError) as e:
        call()
    assert str(e.value).endswith("hint: " + e.value.hint)
    return e.value.hint


def test_hints_are_written_as_numpy_calls_for_numpy_arrays():
    assert "`np.expand_dims(index, 1)`" in _hint(lambda: gather.gather(_RANK[0], 1, _RANK[1]))


@pytest.mark.parametrize("path", ["views", "autograd", "in_place", "grad"])
def test_hints_are_written_as_torch_calls_for_torch_tensors(path):
    x, idx = torch.from_numpy(_RANK[0]), torch.from_numpy(_RANK[1])
    call = {
        "views": lambda: gather.gather(x, 1, idx),
        "autograd": lambda: gather.gather(x.clone().requires_grad_(), 1, idx),
        "in_place": lambda: gather.scatter_(x.clone(), 1, idx, 1.0),
        "grad": lambda: gather.grad.gather(torch.zeros(3), x, 1, idx),
    }[path]
    hint = _hint(call)
    assert "`index.unsqueeze(1)`" in hint and "np." not in hint, hint


def test_dtype_hints_name_the_frameworks_dtypes():
    x = np.zeros((3, 4), np.float32)
    bad = np.array([[0.0], [1.0], [2.0]])
    for given, want in [(lambda a: a, "`.astype(np.int64)`"),
                        (torch.from_numpy, "`.to(torch.int64)`"),
                        (jnp.asarray, "`.astype(jnp.int32)`")]:
        with pytest.raises(gather.DTypeError) as e:
            gather.gather(given(x), 1, given(bad))
        assert want in e.value.hint, e.value.hint


def test_torch_func_vmap_hints_are_torch_calls():
    x, idx = torch.zeros(2, 3, 4), torch.zeros(2, 3, 1, 1, dtype=torch.int64)
    with pytest.raises(gather.RankMismatchError) as e:
        torch.func.vmap(lambda a, i: gather.gather(a, 1, i))(x, idx)
    assert "`index.select(0, 0)`" in e.value.hint and "Axis(" not in str(e.value), e.value


def test_jax_hints_are_jax_calls_eager_and_under_jit():
    x, idx = jnp.asarray(_RANK[0]), jnp.asarray(_RANK[1])
    assert "`jnp.expand_dims(index, 1)`" in _hint(lambda: gather.gather(x, 1, idx))
    # Under jit the library's error comes when tracing, as the eager call's.
    with pytest.raises(gather.RankMismatchError, match=r"(?s)Index tensor must have the same number.*"
                                                       r"`jnp\.expand_dims\(index, 1\)`") as e:
        jax.jit(lambda a, i: gather.gather(a, 1, i))(x, idx).block_until_ready()
    assert "Axis(" not in str(e.value) and "np.expand_dims" not in str(e.value).replace("jnp.", "")


def test_respell_writes_a_numpy_errors_hint_for_another_framework():
    from gather._errors import respell
    with pytest.raises(gather.RankMismatchError) as e:
        gather.gather(*_RANK[:1], 1, _RANK[1])
    err = e.value
    respell(err, "cupy")
    assert "`cp.expand_dims(index, 1)`" in err.hint and str(err).endswith("hint: " + err.hint)
    respell(err, "numpy")
    assert "`np.expand_dims(index, 1)`" in err.hint and str(err).endswith("hint: " + err.hint)
    with pytest.raises(ValueError, match="no dialect"):
        gather._native._respell("x", "tensorflow")


def test_torch_inplace_source_sharing_the_targets_memory_is_refused_and_nothing_changes():
    # Each tensor.numpy() has a base of its own, so NumPy's borrow checker cannot relate two
    # views of one storage: the bindings compare the memory the arrays span (PyTorch refuses
    # these calls too, "unsupported operation: some elements ... refer to a single memory location").
    x = torch.arange(4.0)
    with pytest.raises(gather.InvalidArgumentError, match="shares memory with `source`") as e:
        gather.index_copy_(x, 0, torch.tensor([1, 2, 3, 0]), x)
    assert ".clone()" in str(e.value)
    b = torch.arange(6.0)
    with pytest.raises(gather.InvalidArgumentError, match="shares memory with `source`"):
        gather.put_(b[1:5], torch.tensor([1, 2, 3, 0]), b[0:4])
    i = torch.arange(3)
    with pytest.raises(gather.InvalidArgumentError, match="shares memory with `index`"):
        gather.scatter_add_(i, 0, i, torch.ones(3, dtype=torch.long))
    assert i.tolist() == [0, 1, 2]
    torch.testing.assert_close(x, torch.arange(4.0))
    torch.testing.assert_close(b, torch.arange(6.0))
    # Disjoint parts of one storage (other rows, the other column) are read and written.
    m = torch.arange(8.0).reshape(4, 2)
    gather.index_copy_(m[:2], 0, torch.tensor([1, 0]), m[2:])
    gather.index_copy_(m[:, 0], 0, torch.tensor([3]), m[:1, 1])
    torch.testing.assert_close(m, torch.tensor([[6.0, 7.0], [4.0, 5.0], [4.0, 5.0], [7.0, 7.0]]))


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(1, 3).expand(2, 3),
    lambda: torch.zeros(6).as_strided((3, 3), (1, 1)),
])
def test_torch_inplace_target_whose_elements_share_memory_is_refused(make):
    x = make()
    for call in [
        lambda: gather.scatter_add_(x, 1, torch.tensor([[0], [0]]), torch.ones(2, 1)),
        lambda: gather.index_fill_(x, 1, torch.tensor([0]), 1.0),
        lambda: gather.masked_scatter_(x, torch.ones(x.shape, dtype=torch.bool), torch.ones(9)),
    ]:
        with pytest.raises(gather.InvalidArgumentError, match="share memory") as e:
            call()
        assert "clone()" in str(e.value)
    assert not x.any()


def test_memory_sharing_is_found_for_every_pair_of_strided_views_that_share_an_element():
    # Views of one storage: targets are stepped, flipped or transposed slices (elements of
    # their own), sources any as_strided view. A pair that shares an element (NumPy's exact
    # np.shares_memory) is always refused, and a pair whose byte ranges are apart always runs.
    rng = np.random.default_rng(5)
    base = torch.zeros(40)

    def span(a):
        start = a.__array_interface__["data"][0]
        reach = [(n - 1) * s for n, s in zip(a.shape, a.strides)]
        return start + sum(r for r in reach if r < 0), start + sum(r for r in reach if r > 0) + a.itemsize

    def target():
        rows, cols = (int(v) for v in rng.integers(1, 5, 2))
        o = int(rng.integers(0, 40 - rows * cols))
        t = base[o:o + rows * cols].reshape(rows, cols)[::int(rng.integers(1, 3)), ::int(rng.integers(1, 3))]
        t = t.flip(int(rng.integers(0, 2))) if rng.random() < 0.3 else t
        return t.T if rng.random() < 0.3 else t

    def source():
        n = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 4, n))
        strides = tuple(int(v) for v in rng.integers(0, 6, n))
        reach = sum((a - 1) * b for a, b in zip(shape, strides))
        v = base.as_strided(shape, strides, int(rng.integers(0, 40 - reach)))
        return v.flip(0) if rng.random() < 0.3 else v

    refused = ran = 0
    for _ in range(600):
        t, s = target(), source()
        tn, sn = t.numpy(), s.numpy()
        try:
            gather.masked_scatter_(t, torch.zeros(t.shape, dtype=torch.bool), s)
            ran += 1
            assert not np.shares_memory(tn, sn)
        except gather.InvalidArgumentError as e:
            assert "shares memory with `source`" in str(e)
            refused += 1
            (tlo, thi), (slo, shi) = span(tn), span(sn)
            assert tlo < shi and slo < thi
    assert refused > 40 and ran > 100, (refused, ran)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.uint8, torch.int32, torch.int64])
def test_repeat_interleave_of_repeats_alone_keeps_their_dtype_as_pytorch(dtype):
    r = torch.tensor([2, 0, 1, 3], dtype=dtype)
    got, want = gather.repeat_interleave(r), torch.repeat_interleave(r)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_inference_tensors_are_not_written_outside_inference_mode_as_in_torch():
    with torch.inference_mode():
        t, theirs = torch.zeros(3), torch.zeros(3)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        theirs.index_fill_(0, torch.tensor([0]), 5.0)
    with pytest.raises(gather.InvalidArgumentError, match="inference tensor") as e:
        gather.index_fill_(t, 0, torch.tensor([1]), 5.0)
    assert "torch.inference_mode()" in e.value.hint and t[1] == 0.0
    with pytest.raises(gather.InvalidArgumentError, match="inference tensor"):
        gather.torch_scatter.scatter_sum(torch.ones(2), torch.tensor([0, 2]), out=t)
    with pytest.raises(gather.InvalidArgumentError, match="inference tensor"):
        gather.torch_scatter.scatter_max(torch.ones(2), torch.tensor([0, 2]), out=t)
    assert t[2] == 0.0
    with torch.inference_mode():
        gather.index_fill_(t, 0, torch.tensor([1]), 5.0)
        gather.torch_scatter.scatter_sum(torch.ones(2), torch.tensor([0, 2]), out=t)
    assert t.tolist() == [1.0, 5.0, 1.0]
