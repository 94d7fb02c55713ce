"""The Python API itself: zero-copy views, dtypes, bfloat16, exceptions, the GIL, docstrings."""

import doctest
import threading
import time

import numpy as np
import pytest

import gather


def test_gather_reads_a_huge_broadcast_view_in_place():
    # 10**9 x 4 float64 = 32 GB if it were copied; a stride-0 view costs nothing.
    row = np.arange(4.0).reshape(1, 4)
    x = np.broadcast_to(row, (10**9, 4))
    idx = np.array([[5, 10**9 - 1, 0, 7]])
    out = gather.gather(x, 0, idx)
    np.testing.assert_array_equal(out, [[0.0, 1.0, 2.0, 3.0]])
    # An error on such an input does not copy it either.
    with pytest.raises(IndexError):
        gather.gather(x, 0, np.array([[10**9, 0, 0, 0]]))


def test_negative_strides_are_read_in_place_with_the_right_values():
    x = np.arange(12).reshape(3, 4)
    v = x[::-1, ::-2]
    assert v.strides[0] < 0 and v.strides[1] < 0
    idx = np.array([[1, 0], [0, 1], [1, 1]])
    np.testing.assert_array_equal(gather.gather(v, 1, idx), np.take_along_axis(v, idx, 1))
    np.testing.assert_array_equal(
        gather.scatter_add(v, 1, idx, np.ones((3, 2), dtype=v.dtype)),
        _scatter_add_ref(v, 1, idx, np.ones((3, 2), dtype=v.dtype)),
    )


def _scatter_add_ref(x, dim, index, src):
    out = np.array(x, copy=True)
    for p in np.ndindex(*index.shape):
        t = list(p)
        t[dim] = index[p]
        out[tuple(t)] += src[p]
    return out


def test_the_mae_random_masking_example():
    rng = np.random.default_rng(0)
    N, L, D, len_keep = 2, 6, 3, 2
    x = rng.standard_normal((N, L, D)).astype(np.float32)
    noise = rng.random((N, L))
    ids_shuffle = gather.argsort(noise, 1)
    ids_keep = ids_shuffle[:, :len_keep]
    x_masked = gather.gather(x, 1, np.broadcast_to(ids_keep[..., None], (N, len_keep, D)))
    np.testing.assert_array_equal(ids_shuffle, np.argsort(noise, 1, kind="stable"))
    np.testing.assert_array_equal(x_masked, np.take_along_axis(x, ids_keep[..., None], 1))


@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64,
     np.float16, np.float32, np.float64],
)
def test_every_numpy_dtype_is_taken_and_returned(dtype):
    x = np.arange(6).reshape(2, 3).astype(dtype)
    out = gather.gather(x, 1, np.array([[2, 0], [1, 1]]))
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.take_along_axis(x, np.array([[2, 0], [1, 1]]), 1))


@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64,
     np.float16, np.float32, np.float64],
)
def test_every_numpy_dtype_is_written_in_place(dtype):
    x = np.zeros((2, 3), dtype)
    src = np.ones((1, 3), dtype)
    assert gather.scatter_(x, 0, np.array([[1, 0, 1]]), src) is x
    np.testing.assert_array_equal(x, np.array([[0, 1, 0], [1, 0, 1]]).astype(dtype))


@pytest.mark.parametrize(
    "dtype", [np.complex64, np.complex128, np.longdouble, "datetime64[s]", "timedelta64[s]", object,
              "S4", [("a", np.int32)]],
)
def test_dtypes_outside_the_library_are_refused_by_name_in_and_out_of_place(dtype):
    x = np.zeros((2, 3), dtype)
    if np.dtype(dtype) == np.dtype(np.float64):
        pytest.skip("long double is double on this platform")
    for call in (lambda: gather.gather(x, 1, np.array([[0]])),
                 lambda: gather.index_fill_(x, 0, np.array([0]), 0)):
        with pytest.raises(gather.DTypeError) as e:
            call()
        assert str(np.dtype(dtype)) in str(e.value)


def test_every_integer_index_dtype_is_taken():
    x = np.arange(6.0).reshape(2, 3)
    for it in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        np.testing.assert_array_equal(gather.gather(x, 1, np.array([[2], [0]], dtype=it)), [[2.0], [3.0]])


def bf16_bits(values):
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("view", ["reversed", "stepped", "transposed_reversed"])
def test_bfloat16_bits_in_strided_views_give_what_their_contiguous_copies_give(view):
    # Read and written with the views' own strides (negative ones included), without a copy.
    rng = np.random.default_rng(2)
    bits = bf16_bits(rng.standard_normal((30, 40)))
    pick = {"reversed": lambda b: b[::-1, ::-1][:15], "stepped": lambda b: b[:, ::-3][:15],
            "transposed_reversed": lambda b: b.T[::-1][:15]}[view]
    base = bits.copy()
    x = pick(base)
    idx = rng.integers(0, x.shape[1], (15, 5))
    src = pick(bits.copy())[:, :5]
    want = gather.scatter_add(np.ascontiguousarray(x), 1, idx, np.ascontiguousarray(src), dtype="bfloat16")
    np.testing.assert_array_equal(gather.scatter_add(x, 1, idx, src, dtype="bfloat16"), want)
    before = base.copy()
    gather.scatter_add_(x, 1, idx, src, dtype="bfloat16")
    np.testing.assert_array_equal(x, want)
    outside = np.ones(base.shape, bool)
    pick(outside)[...] = False
    np.testing.assert_array_equal(base[outside], before[outside])


def test_bfloat16_travels_as_uint16_bit_patterns():
    x = bf16_bits([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    src = bf16_bits([[0.5, 0.25], [8.0, 1.5]])
    idx = np.array([[0, 0], [2, 2]])
    out = gather.scatter_reduce(x, 1, idx, src, "sum", dtype="bfloat16")
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(bf16_values(out), [[1.75, 2.0, 3.0], [4.0, 5.0, 15.5]])
    # Without dtype= the same arrays are plain uint16 numbers.
    plain = gather.scatter_reduce(x, 1, idx, src, "sum")
    assert not np.array_equal(plain, out)
    # Indices stay integers; sort returns bf16 values and int64 indices.
    v, i = gather.sort(bf16_bits([3.0, -1.0, 2.0]), dtype="bfloat16")
    np.testing.assert_array_equal(bf16_values(v), [-1.0, 2.0, 3.0])
    assert i.dtype == np.int64
    with pytest.raises(TypeError, match="uint16"):
        gather.gather(np.zeros(3, np.float32), 0, np.array([0]), dtype="bfloat16")
    with pytest.raises(ValueError):
        gather.gather(np.zeros(3, np.float32), 0, np.array([0]), dtype="float8")


def test_float16_is_native():
    x = np.array([1.0, 2.0, 65504.0], dtype=np.float16)
    out = gather.scatter_reduce(x, 0, np.array([0, 0]), np.array([0.5, 0.25], np.float16), "sum")
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, np.array([1.75, 2.0, 65504.0], np.float16))


@pytest.mark.parametrize("cls,numpy_base", [
    (gather.DimOutOfRangeError, IndexError), (gather.IndexOutOfBoundsError, IndexError),
    (gather.RankMismatchError, ValueError), (gather.ShapeMismatchError, ValueError),
    (gather.InvalidArgumentError, ValueError), (gather.DTypeError, TypeError)])
def test_every_error_is_a_runtime_error_as_pytorchs_and_its_numpy_class(cls, numpy_base):
    # `except RuntimeError`, written for torch's ops, catches them, and so does NumPy's class.
    assert issubclass(cls, gather.GatherError) and issubclass(cls, RuntimeError)
    assert issubclass(cls, numpy_base)
    with pytest.raises(RuntimeError):
        gather.gather(np.zeros((2, 3)), 1, np.array([[0, 7]]))


def test_errors_are_typed_and_carry_the_hint():
    x = np.zeros((2, 3))
    with pytest.raises(gather.IndexOutOfBoundsError) as e:
        gather.gather(x, 1, np.array([[0, 7]]))
    assert isinstance(e.value, IndexError)
    assert e.value.category == "index_out_of_bounds"
    assert e.value.index_value == 7 and e.value.coordinate == [0, 1]
    assert "7" in str(e.value)
    with pytest.raises(gather.DimOutOfRangeError) as e:
        gather.gather(x, 2, np.array([[0]]))
    assert isinstance(e.value, IndexError)
    with pytest.raises(gather.RankMismatchError) as e:
        gather.gather(x, 1, np.array([0]))
    assert isinstance(e.value, ValueError)
    with pytest.raises(gather.ShapeMismatchError):
        gather.gather(x, 1, np.zeros((3, 1), np.int64))
    with pytest.raises(gather.DTypeError) as e:
        gather.gather(x, 1, np.array([[0.0]]))
    assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    assert e.value.hint
    with pytest.raises(gather.InvalidArgumentError) as e:
        gather.scatter_reduce(x, 1, np.array([[0]]), np.array([[1.0]]), "median")
    assert "hint:" in str(e.value)
    with pytest.raises(TypeError):
        gather.scatter_add(x, 1, np.array([[0]]), np.array([[1]], np.int32))
    with pytest.raises(TypeError):
        gather.gather(np.array(["a", "b"]), 0, np.array([0]))


def _hint_code(e):
    """The code between the backticks of an error's hint."""
    import re
    return re.findall(r"`([^`]*)`", e.hint)


def test_hints_show_the_fix_in_numpy_and_the_fix_works():
    """A Python caller's hints write the fix as NumPy calls (the library's own are Rust), and
    that code, run on the caller's arrays, makes the call succeed."""
    import re
    x = np.arange(4 * 8 * 16, dtype=np.float32).reshape(4, 8, 16)
    # The top-k idiom: [B, K] positions along dim 1 of [B, N, D].
    index = np.array([[7, 0, 3, 3, 1]] * 4)
    with pytest.raises(gather.RankMismatchError) as e:
        gather.gather(x, 1, index)
    (fix,) = [c for c in _hint_code(e.value) if "np." in c]
    assert fix == "np.broadcast_to(np.expand_dims(index, 2), (4, 5, 16))", e.value.hint
    out = gather.gather(x, 1, eval(fix))
    np.testing.assert_array_equal(out, x[np.arange(4)[:, None], index])
    # The token-logit idiom: one position per (batch, token), dim 2 of [B, T, V].
    logits, labels = np.zeros((2, 3, 10)), np.array([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(gather.RankMismatchError) as e:
        gather.gather(logits, 2, labels)
    (fix,) = [c for c in _hint_code(e.value) if "np." in c]
    assert gather.gather(logits, 2, eval(fix.replace("index", "labels"))).shape == (2, 3, 1)
    # A float index: convert it.
    with pytest.raises(gather.DTypeError) as e:
        gather.gather(x, 1, np.zeros((4, 5, 16)))
    assert "`.astype(np.int64)`" in e.value.hint and "mapv" not in str(e.value)
    # A mask of ints, a src of another dtype.
    with pytest.raises(gather.DTypeError) as e:
        gather.masked_select(x[0, 0], np.ones(16, np.int64))
    mask = np.ones(16, np.int64)
    (fix,) = _hint_code(e.value)
    assert gather.masked_select(x[0, 0], eval(fix)).shape == (16,)
    src = np.ones((4, 5, 16))
    with pytest.raises(gather.DTypeError) as e:
        gather.scatter_add(x, 1, np.zeros((4, 5, 16), np.int64), src)
    (fix,) = _hint_code(e.value)
    input = x  # noqa: A001 - the name the hint uses
    gather.scatter_add(x, 1, np.zeros((4, 5, 16), np.int64), eval(fix))
    # No Rust left in the hints the sweep of an index of the wrong rank meets.
    for idx in [np.zeros((2, 2, 2, 2), np.int64), np.zeros((4,), np.int64)]:
        with pytest.raises(gather.RankMismatchError) as e:
            gather.gather(x, 1, idx)
        assert not re.search(r"Axis\(|mapv|unwrap|into_shape|insert_axis|index_axis", str(e.value)), e.value


@pytest.mark.parametrize("rust, python", [
    ("`index.view().insert_axis(Axis(0)).insert_axis(Axis(2))`", "`np.expand_dims(index, (0, 2))`"),
    ("`index.view().insert_axis(Axis(1)).broadcast((2, 3, 4)).unwrap()`",
     "`np.broadcast_to(np.expand_dims(index, 1), (2, 3, 4))`"),
    ("`src.insert_axis(Axis(0))`", "`np.expand_dims(src, 0)`"),
    ("`index.index_axis(Axis(0), 0)` or `into_shape`, or `insert_axis`",
     "`index.take(0, axis=0)` or `reshape`, or `np.expand_dims`"),
    ("`mapv(|v| v as i64)`", "`.astype(np.int64)`"),
    ("`x.mapv(|b| b as u8)`", "`x.astype(np.uint8)`"),
    ("`src.mapv(|v| v as _)`", "`src.astype(input.dtype)`"),
    ("`mask.mapv(|v| v != 0)`", "`mask != 0`"),
    ("`index.mapv(|i| if i < 0 { i + 7 } else { i })`", "`np.where(index < 0, index + 7, index)`"),
    ("`Array1::from_iter(index.iter().copied())`", "`index.ravel()`"),
    ("`src.slice_axis(Axis(1), Slice::from(..3))`", "`src.take(range(3), axis=1)`"),
    ("`self.slice_mut(s![..])`", "`self[...]`"),
    ("`x.into_shape_with_order(n)`", "`x.reshape(n)`"),
    ("pass dim None", "pass dim None"),
])
def test_hints_are_rewritten_from_rust_to_numpy(rust, python):
    assert gather._native._respell(rust, "numpy") == python


def test_scatter_takes_a_value_or_src_and_the_legacy_reduce():
    x = np.zeros((2, 3), np.float32)
    idx = np.array([[0, 2], [1, 1]])
    np.testing.assert_array_equal(gather.scatter(x, 1, idx, 5.0), [[5, 0, 5], [0, 5, 0]])
    np.testing.assert_array_equal(gather.scatter(x, 1, idx, value=2), [[2, 0, 2], [0, 2, 0]])
    src = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(gather.scatter(x, 1, idx, src, reduce="add"), [[1, 0, 2], [0, 7, 0]])
    with pytest.raises(ValueError):
        gather.scatter(np.zeros(3, np.uint8), 0, np.array([0]), 300)


def test_sort_and_topk_return_tuples():
    x = np.array([[3.0, 1.0, 2.0]])
    v, i = gather.topk(x, 2)
    np.testing.assert_array_equal(v, [[3.0, 2.0]])
    np.testing.assert_array_equal(i, [[0, 2]])
    v, i = gather.sort(x, descending=True)
    np.testing.assert_array_equal(i, [[0, 2, 1]])
    np.testing.assert_array_equal(gather.repeat_interleave(np.array([2, 1])), [0, 0, 1])
    np.testing.assert_array_equal(gather.repeat_interleave(np.array([5, 6]), 2), [5, 5, 6, 6])


def test_select_batched():
    logits = np.array([[[0.1, 0.9], [0.6, 0.4]]], np.float32)
    np.testing.assert_array_equal(gather.select_batched(logits, -1, np.array([[1, 0]]), 2), logits[:, [0, 1], [1, 0]])
    g = gather.grad.select_batched(np.array([[1.0, 2.0]], np.float32), logits, -1, np.array([[1, 0]]), 2)
    np.testing.assert_array_equal(g, [[[0.0, 1.0], [2.0, 0.0]]])


def test_gradients_have_the_torch_names_and_shapes():
    x = np.array([3.0, 5.0])
    idx = np.array([0, 0])
    src = np.array([3.0, 1.0])
    gi, gs = gather.grad.scatter_reduce(np.ones(2), x, 0, idx, src, "amax", include_self=False)
    np.testing.assert_array_equal(gs, [1.0, 0.0])
    _, gs = gather.grad.scatter_reduce(np.ones(2), x, 0, idx, src, "amax", include_self=False, parity="pytorch")
    np.testing.assert_array_equal(gs, [0.5, 0.0])
    with pytest.raises(gather.InvalidArgumentError):
        gather.grad.gather(np.ones(1, np.int64), np.arange(3), 0, np.array([0]))


def test_gradient_errors_name_the_gradient_with_the_numbers_of_the_forward_check():
    # The reductions' gradients run the forward first: its bounds errors read as the gradient's.
    x, go, src = np.ones((3, 4)), np.ones((3, 4)), np.ones((1, 4))
    calls = [
        ("grad::scatter_reduce", lambda: gather.grad.scatter_reduce(go, x, 0, np.array([[0, 5, 1, 2]]), src, "sum")),
        ("grad::index_reduce", lambda: gather.grad.index_reduce(go, x, 0, np.array([7]), src, "prod")),
        ("grad::scatter", lambda: gather.grad.scatter(go, x, 0, np.array([[0, 5, 1, 2]]), src, reduce="multiply")),
        ("grad::scatter_add", lambda: gather.grad.scatter_add(go, x, 0, np.array([[0, 5, 1, 2]]), src)),
    ]
    for name, call in calls:
        with pytest.raises(gather.IndexOutOfBoundsError) as e:
            call()
        assert str(e.value).startswith(f"{name}: index "), str(e.value)
        assert e.value.index_value in (5, 7)
    # A negative value's hint names the gradient too, as every gradient's does.
    with pytest.raises(gather.IndexOutOfBoundsError) as e:
        gather.grad.scatter_reduce(go, x, 0, np.array([[0, -5, 1, 2]]), src, "sum")
    assert "hint: grad::scatter_reduce does not wrap" in str(e.value), str(e.value)


def test_the_gil_is_released_during_the_kernels():
    rng = np.random.default_rng(1)
    n = 4_000_000
    x = np.zeros(1000)
    idx = rng.integers(0, 1000, n)
    src = rng.random(n)
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.05)
        best = 0
        for _ in range(3):
            before = counter[0]
            t0 = time.perf_counter()
            gather.scatter_reduce(x, 0, idx, src, "sum")
            gather.scatter_reduce(x, 0, idx, src, "amax")
            elapsed = time.perf_counter() - t0
            best = max(best, counter[0] - before)
    finally:
        stop.set()
        t.join()
    # With the GIL held the counting thread could not run at all while the kernels ran (it would
    # get only the slices at the call boundaries).
    assert elapsed > 0
    assert best > 1000, f"the counting thread advanced only {best} times"


def test_a_panic_or_bad_argument_never_crashes_the_interpreter():
    with pytest.raises(TypeError):
        gather.gather(np.zeros(3), 0)  # missing argument
    with pytest.raises(OverflowError):
        gather.gather(np.zeros(3), 2**70, np.array([0]))
    with pytest.raises(gather.GatherError):
        gather.topk(np.zeros(3), -1)


@pytest.mark.parametrize("name", ["gather", "gather.grad", "gather._errors", "gather.torch_scatter", "gather.dask"])
def test_docstring_examples_run(name):
    import importlib

    if name == "gather.dask":
        pytest.importorskip("dask.array")
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(mod, name, globs={"np": np, "gather": gather})
    objs = [getattr(mod, n) for n in getattr(mod, "__all__", [])]
    for obj in objs:
        if callable(obj) and obj.__doc__:
            tests += finder.find(obj, f"{name}.{obj.__name__}", module=False, globs={"np": np, "gather": gather})
    assert tests, f"no docstring examples in {name}"
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def test_empty_arrays_with_any_strides_are_taken():
    # NumPy may give an empty array any strides (here stride 0 along the empty axis).
    empty16 = np.broadcast_to(np.zeros((1, 3), np.uint16), (0, 3))
    out = gather.gather(empty16, 1, np.zeros((0, 2), np.int64), dtype="bfloat16")
    assert out.shape == (0, 2) and out.dtype == np.uint16
    idx8 = np.broadcast_to(np.zeros((1, 2), np.uint8), (0, 2))
    assert gather.gather(np.zeros((2, 3)), 1, idx8).shape == (0, 2)
    # An empty float index is accepted by the gather family (as in PyTorch).
    assert gather.gather(np.zeros((2, 3)), 1, np.zeros((0, 2), np.float32)).shape == (0, 2)


def test_foreign_byte_order_and_odd_strides_are_converted_first():
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    np.testing.assert_array_equal(gather.gather(x, 1, np.array([[2], [0]])), [[2.0], [3.0]])
    # A field of a packed structured array: stride 5 bytes for 4-byte ints, misaligned.
    s = np.zeros(3, dtype=[("a", "u1"), ("b", "<i4")])
    s["b"] = [5, 6, 7]
    assert s["b"].strides == (5,)
    np.testing.assert_array_equal(gather.take(s["b"], np.array([2, 0])), [7, 5])
    # Lists are converted with np.asarray.
    np.testing.assert_array_equal(gather.gather([[1, 2], [3, 4]], 1, [[1], [0]]), [[2], [3]])


@pytest.mark.parametrize("module,stub", [
    ("gather", "__init__.pyi"), ("gather.grad", "grad.pyi"),
    ("gather.torch_scatter", "torch_scatter.pyi"), ("gather.dask", "dask.pyi"),
])
def test_type_stubs_declare_every_public_function_with_its_parameters(module, stub):
    import ast
    import importlib
    import inspect
    import pathlib

    if module == "gather.dask":
        pytest.importorskip("dask.array")
    mod = importlib.import_module(module)
    tree = ast.parse((pathlib.Path(gather.__file__).parent / stub).read_text())
    stubbed = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for name in mod.__all__:
        obj = getattr(mod, name)
        if not callable(obj) or inspect.isclass(obj):
            continue
        assert name in stubbed, f"{module}.{name} has no stub"
        f = stubbed[name]
        declared = [a.arg for a in f.args.posonlyargs + f.args.args + f.args.kwonlyargs]
        declared += [a.arg for a in (f.args.vararg, f.args.kwarg) if a is not None]
        try:
            real = list(inspect.signature(obj).parameters)
        except ValueError:
            continue
        real = [p for p in real if p not in ("args", "kwargs", "rest", "kw")]
        assert declared[: len(real)] == real or set(real) <= set(declared), (name, declared, real)


def test_scatter_add_deterministic_false_sums_host_arrays_in_index_order_as_usual():
    x, idx, src = np.zeros(3), np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0])
    want = gather.scatter_add(x, 0, idx, src)
    np.testing.assert_array_equal(gather.scatter_add(x, 0, idx, src, deterministic=False), want)
    y = np.zeros(3)
    assert gather.scatter_add_(y, 0, idx, src, deterministic=False) is y
    np.testing.assert_array_equal(y, want)
    z = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(
        gather.scatter_reduce(z, 0, idx, src, "amax", include_self=False, deterministic=False),
        gather.scatter_reduce(z, 0, idx, src, "amax", include_self=False),
    )


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_an_index_that_is_a_materialised_broadcast_gives_what_its_broadcast_view_gives(dtype):
    # jnp.broadcast_to under jax.jit and torch's expand(...).contiguous() hand over such indices.
    rng = np.random.default_rng(2)
    src = rng.standard_normal((600, 128)).astype(np.float32)
    rows = rng.integers(0, 90, 600).astype(dtype)
    view = np.broadcast_to(rows[:, None], src.shape)
    full = np.ascontiguousarray(view)
    x = rng.standard_normal((90, 128)).astype(np.float32)
    assert np.array_equal(gather.scatter_add(x, 0, full, src), gather.scatter_add(x, 0, view, src))
    for reduce in ("prod", "mean", "amax"):
        assert np.array_equal(gather.scatter_reduce(x, 0, full, src, reduce, include_self=False),
                              gather.scatter_reduce(x, 0, view, src, reduce, include_self=False))
    assert np.array_equal(gather.gather(src, 0, full[:300] * 6), gather.gather(src, 0, view[:300] * 6))
    full[599] = 90  # a bad row, constant too: the error names its first position
    with pytest.raises(gather.IndexOutOfBoundsError, match=r"index 90 .* position \[599, 0\]"):
        gather.scatter_add(x, 0, full, src)
    full[599, 7] = 3
    with pytest.raises(gather.IndexOutOfBoundsError, match=r"index 90 .* position \[599, 0\]"):
        gather.scatter_add(x, 0, full, src)


def test_a_bool_where_a_dim_or_a_count_goes_is_a_type_error_as_in_pytorch():
    # bool is an int to Python; PyTorch refuses it there, and so do the bindings: a flag in a
    # dim's place is arguments out of order (topk(x, 2, True) meant largest=True).
    x = np.arange(12.0).reshape(3, 4)
    i = np.zeros((3, 1), np.int64)
    calls = [
        lambda: gather.topk(x, True),
        lambda: gather.topk(x, 2, True),
        lambda: gather.gather(x, True, i),
        lambda: gather.index_select(x, False, i[:, 0]),
        lambda: gather.take_along_dim(x, i, dim=True),
        lambda: gather.repeat_interleave(x, 2, dim=True),
        lambda: gather.repeat_interleave(x, 2, 0, output_size=True),
        lambda: gather.grad.gather(np.ones((3, 1)), x, True, i),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="not bool"):
            call()
    # NumPy integers and None (where a dim may be left out) are taken as before.
    assert gather.gather(x, np.int64(1), i).shape == (3, 1)
    assert gather.topk(x, np.int32(2), -1)[0].shape == (3, 2)
    assert gather.take_along_dim(x, np.array([0, 11]), dim=None).tolist() == [0.0, 11.0]
