"""gather.ScatterPlan on host arrays: each call equals the op with the index expanded over src's
shape (bitwise), for every reduction and dtype; errors are the library's; the frameworks' CPU
tensors come back as their own type. tests/test_cuda_emu.py runs the plan on the GPU."""

import numpy as np
import pytest

import gather

REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def expanded(ids, shape):
    return np.broadcast_to(ids.reshape((-1,) + (1,) * (len(shape) - 1)), shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.int32,
                                   np.uint8, np.bool_])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint8])
def test_a_plan_is_bitwise_the_op_for_every_reduction(dtype, index_dtype):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 50, 700).astype(index_dtype)
    plan = gather.ScatterPlan(ids, 50)
    assert (len(plan), plan.size, plan.device) == (700, 50, "cpu")
    dst = rng.integers(0, 4, (50, 3, 4)).astype(dtype)
    for _ in range(2):
        src = rng.integers(0, 4, (700, 2, 4)).astype(dtype)
        idx = expanded(ids.astype(np.int64), src.shape)
        np.testing.assert_array_equal(plan.scatter_add(dst, src), gather.scatter_add(dst, 0, idx, src))
        for r in REDUCES:
            for incl in (True, False):
                if dtype == np.bool_ and r == "mean":
                    with pytest.raises(gather.InvalidArgumentError):
                        plan.scatter_reduce(dst, src, r, include_self=incl)
                    continue
                got = plan.scatter_reduce(dst, src, r, include_self=incl)
                want = gather.scatter_reduce(dst, 0, idx, src, r, include_self=incl)
                assert got.dtype == want.dtype
                assert got.tobytes() == want.tobytes(), (r, incl)


def test_bfloat16_bits_and_strided_views():
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 9, 40)[::2]
    plan = gather.ScatterPlan(ids, 9)
    src = rng.standard_normal((6, 20)).astype(np.float32).T
    dst = np.ones((9, 6), np.float32)
    np.testing.assert_array_equal(plan.scatter_add(dst, src),
                                  gather.scatter_add(dst, 0, expanded(ids, src.shape), src))
    bits = (src.view(np.uint32) >> 16).astype(np.uint16)
    dbits = (dst.view(np.uint32) >> 16).astype(np.uint16)
    got = plan.scatter_reduce(dbits, bits, "amax", dtype="bfloat16")
    want = gather.scatter_reduce(dbits, 0, expanded(ids, bits.shape), bits, "amax", dtype="bfloat16")
    np.testing.assert_array_equal(got, want)


def test_errors_name_the_numbers():
    with pytest.raises(gather.IndexOutOfBoundsError) as e:
        gather.ScatterPlan(np.array([0, 7, 1]), 4)
    assert e.value.index_value == 7 and e.value.coordinate == [1]
    with pytest.raises(gather.RankMismatchError):
        gather.ScatterPlan(np.zeros((2, 2), np.int64), 4)
    with pytest.raises(gather.DTypeError):
        gather.ScatterPlan(np.zeros(3), 4)
    plan = gather.ScatterPlan(np.array([1, 1, 0]), 2)
    with pytest.raises(gather.ShapeMismatchError, match="validated for a dimension of size 2"):
        plan.scatter_add(np.zeros((3, 2)), np.ones((3, 2)))
    with pytest.raises(gather.ShapeMismatchError, match="positions"):
        plan.scatter_add(np.zeros((2, 2)), np.ones((4, 2)))
    with pytest.raises(gather.DTypeError):
        plan.scatter_add(np.zeros((2, 2)), np.ones((3, 2), np.float32))
    with pytest.raises(gather.InvalidArgumentError):
        plan.scatter_reduce(np.zeros((2, 2)), np.ones((3, 2)), "median")
    # An empty plan leaves dst as it is.
    empty = gather.ScatterPlan(np.zeros(0, np.int64), 2)
    assert len(empty) == 0
    np.testing.assert_array_equal(empty.scatter_add(np.eye(2), np.zeros((0, 2))), np.eye(2))
    assert repr(plan) == "ScatterPlan(len=3, size=2, device=\"cpu\")"


def test_torch_cpu_tensors_come_back_as_torch_tensors():
    torch = pytest.importorskip("torch")
    ids = torch.tensor([2, 0, 2])
    plan = gather.ScatterPlan(ids, 3)
    src = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    out = plan.scatter_add(torch.zeros(3, 2), src)
    assert isinstance(out, torch.Tensor)
    want = torch.zeros(3, 2).scatter_add(0, ids[:, None].expand(3, 2), src)
    assert torch.equal(out, want)
