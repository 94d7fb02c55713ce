"""The XLA FFI handlers that jax.jit calls (gather._native._xla_handler), driven through XLA's C
ABI by a stand-in for XLA (tests/xla_frame.py): the metadata query, results equal to the eager
op's, in-place calls into the aliased result, int64 indices as int32 pairs, gradients, and the
library's errors as XLA errors with its words. The CUDA handler runs on the emulator, where
device memory is host memory (GATHER_CUDA_EMU=1, as .ci/run runs this file a second time)."""

import os

import numpy as np
import pytest

import gather
from xla_frame import INTERNAL, INVALID_ARGUMENT, OUT_OF_RANGE, Xla

PLATFORMS = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    os.environ.get("GATHER_CUDA_EMU") != "1", reason="needs the CUDA emulator (GATHER_CUDA_EMU=1)"))]
RNG = np.random.default_rng(11)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_metadata_query_gets_api_version_0_3_and_no_traits(platform):
    xla = Xla(platform)
    err, meta = xla.metadata()
    assert err is None
    assert (meta.api_version.major, meta.api_version.minor, meta.traits) == (0, 3, 0)
    assert xla.stream_gets == 0  # a query runs nothing


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_call_writes_the_eager_result_into_xlas_buffer(platform):
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    i = RNG.integers(0, 5, (3, 4)).astype(np.int32)
    out = np.full((3, 4), np.nan, np.float32)
    xla = Xla(platform)
    assert xla([x, i], [out], _op="gather", _inputs="input,index", _outputs="output", dim=0) is None
    np.testing.assert_array_equal(out, gather.gather(x, 0, i))
    if platform == "cuda":  # in XLA's stream order, on XLA's device
        assert (xla.stream_gets, xla.ordinal_gets) == (1, 1)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float64])
def test_every_byte_width_comes_back_as_it_is(platform, dtype):
    x = (RNG.standard_normal((4, 6)) * 50).astype(dtype)
    i = np.array([[3, 0, 1, 1, 2, 0]], np.int64)
    out = np.zeros((1, 6), dtype)
    assert Xla(platform)([x, i], [out], _op="gather", _inputs="input,index", _outputs="output",
                         dim=0) is None
    np.testing.assert_array_equal(out, gather.gather(x, 0, i))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_in_place_call_writes_into_the_result_that_aliases_input(platform):
    x = RNG.standard_normal((4, 3))
    i = np.array([[3, 0, 3], [1, 3, 0]])
    s = RNG.standard_normal((2, 3))
    want = gather.scatter_reduce(x, 0, i, s, "amax", include_self=False)
    buf = x.copy()  # XLA gives the handler input's buffer as the result too
    assert Xla(platform)([buf, i, s], [buf], _op="scatter_reduce", _mode="inplace",
                         _inputs="input,index,src", _outputs="output", dim=0, reduce="amax",
                         include_self=False) is None
    np.testing.assert_array_equal(buf, want)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_int64_indices_fill_int32_pairs_whose_low_words_are_the_indices(platform):
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    values, pairs = np.zeros((3, 2), np.float32), np.zeros((3, 2, 2), np.int32)
    assert Xla(platform)([x], [values, pairs], _op="topk", _inputs="input",
                         _outputs="values,indices", k=2, dim=1, largest=True, sorted=True) is None
    want_values, want_indices = gather.topk(x, 2, 1)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(pairs[..., 0], want_indices)
    assert not pairs[..., 1].any()  # the high words of small non-negative indices


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_grad_call_gives_the_librarys_gradients_by_name(platform):
    x, s = RNG.standard_normal((4, 3)), RNG.standard_normal((2, 3))
    i = np.array([[3, 0, 3], [1, 3, 0]])
    g = RNG.standard_normal((4, 3))
    gx, gs = np.zeros_like(x), np.zeros_like(s)
    assert Xla(platform)([g, x, i, s], [gs, gx], _op="scatter_add", _mode="grad",
                         _inputs="grad_output,input,index,src", _outputs="grad_src,grad_input",
                         dim=0) is None
    want = gather.grad.scatter_add(g, x, 0, i, s)
    np.testing.assert_array_equal(gx, want[0])
    np.testing.assert_array_equal(gs, want[1])


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_bad_index_is_an_out_of_range_error_with_the_librarys_words(platform):
    x, out = np.arange(12.0).reshape(3, 4), np.zeros(2)
    err = Xla(platform)([x, np.array([5, 30])], [out], _op="take", _inputs="input,index",
                        _outputs="output")
    assert err[0] == OUT_OF_RANGE
    with pytest.raises(gather.IndexOutOfBoundsError) as eager:
        gather.take(x, np.array([5, 30]))
    assert err[1].splitlines()[0] == str(eager.value).splitlines()[0]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_calls_the_handler_cannot_run_are_invalid_argument_errors_that_say_why(platform):
    xla = Xla(platform)
    x, i, out = np.zeros((2, 2)), np.zeros((1, 2), np.int64), np.zeros((1, 2))
    code, message = xla([x, i], [out], stage=0, _op="gather", _inputs="input,index",
                        _outputs="output", dim=0)
    assert code == INVALID_ARGUMENT and "execute stage" in message
    code, message = xla([x, i], [out], _op="gather", _inputs="input", _outputs="output", dim=0)
    assert code == INVALID_ARGUMENT and "2 operands" in message
    code, message = xla([x.astype(np.complex64), i], [out.astype(np.complex64)], _op="gather",
                        _inputs="input,index", _outputs="output", dim=0)
    assert code == INVALID_ARGUMENT and "dtype code 15" in message
    code, message = xla([x, i], [np.zeros((2, 2))], _op="gather", _inputs="input,index",
                        _outputs="output", dim=0)
    assert code == INVALID_ARGUMENT and "[1, 2]" in message and "[2, 2]" in message
    code, message = xla([x, i], [out], _op="gather", _inputs="input,index", _outputs="output")
    assert code == INVALID_ARGUMENT and "dim" in message
    assert INTERNAL not in [c for c, _ in xla.errors]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_empty_and_zero_dimensional_buffers(platform):
    xla = Xla(platform)
    x = np.arange(6.0).reshape(2, 3)
    empty = np.zeros((0, 3))
    assert xla([x, np.zeros((0, 3), np.int64)], [empty], _op="gather", _inputs="input,index",
               _outputs="output", dim=0) is None
    scalar = np.zeros(())
    assert xla([x, np.array(4)], [scalar], _op="take", _inputs="input,index",
               _outputs="output") is None
    assert scalar == 4.0


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_plan_call_finds_the_plan_by_its_key_on_its_device(platform):
    index = np.array([2, 0, 2, 1])
    if platform == "cuda":
        from test_cuda_emu import dev  # a NumPy array presented as GPU memory

        plan = gather.ScatterPlan(dev(index), 3)
    else:
        plan = gather.ScatterPlan(index, 3)
    dst, src = RNG.standard_normal((3, 2)), RNG.standard_normal((4, 2))
    out = np.zeros((3, 2))
    xla = Xla(platform)
    assert xla([dst, src], [out], _op="scatter_reduce", _mode="plan", _inputs="dst,src",
               _outputs="output", _plan=plan._plan._key, reduce="amax", include_self=False) is None
    np.testing.assert_array_equal(out, gather.ScatterPlan(index, 3).scatter_reduce(dst, src, "amax", include_self=False))
    other = gather.ScatterPlan(index, 3) if platform == "cuda" else None
    if other is not None:  # a host plan called with device buffers
        code, message = xla([dst, src], [out], _op="scatter_add", _mode="plan", _inputs="dst,src",
                            _outputs="output", _plan=other._plan._key)
        assert code == INVALID_ARGUMENT and "the plan is on cpu but dst and src are on cuda:0" in message
    key = plan._plan._key
    del plan
    code, message = xla([dst, src], [out], _op="scatter_add", _mode="plan", _inputs="dst,src",
                        _outputs="output", _plan=key)
    assert code == INVALID_ARGUMENT and "no longer exists" in message


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_vmapped_call_runs_once_per_batch_element_with_shared_operands_of_size_one(platform):
    # jax.vmap(..., vmap_method="expand_dims"): batch axes (2, 3) lead; the table is shared
    # (axes of size 1), the index batched on both.
    x = RNG.standard_normal((1, 1, 5, 4))
    i = RNG.integers(0, 5, (2, 3, 2, 4))
    out = np.zeros((2, 3, 2, 4))
    assert Xla(platform)([x, i], [out], _op="gather", _inputs="input,index", _outputs="output",
                         _ranks="2,2", _out_ranks="2", dim=0) is None
    for a in range(2):
        for b in range(3):
            np.testing.assert_array_equal(out[a, b], gather.gather(x[0, 0], 0, i[a, b]))
    bad = i.copy()
    bad[1, 2, 0, 0] = 9
    code, message = Xla(platform)([x, bad], [out], _op="gather", _inputs="input,index",
                                  _outputs="output", _ranks="2,2", _out_ranks="2", dim=0)
    assert code == OUT_OF_RANGE and "batch element [1, 2]" in message
    code, message = Xla(platform)([x, i[:, :2]], [out], _op="gather", _inputs="input,index",
                                  _outputs="output", _ranks="2,2", _out_ranks="2", dim=0)
    assert code == INVALID_ARGUMENT and "leading batch axes" in message
