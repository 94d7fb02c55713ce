"""The DLPack path without any other framework installed: an object that offers only
``__dlpack__``/``__dlpack_device__`` (here over NumPy's own) is read without a copy, and the
in-place forms write into its memory."""

import numpy as np
import pytest

import gather


class OnlyDLPack:
    """A foreign tensor type: all it offers is the DLPack protocol."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_a_dlpack_only_object_is_read_without_a_copy_and_gives_numpy_back():
    x = np.arange(12.0).reshape(3, 4)
    out = gather.gather(OnlyDLPack(x), 1, OnlyDLPack(np.array([[3], [0], [1]])))
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, [[3.0], [4.0], [9.0]])


def test_inplace_form_writes_into_the_memory_behind_a_dlpack_object():
    base = np.zeros((4, 6))
    view = base[:, ::2]  # non-contiguous: the strides travel through DLPack
    gather.index_fill_(OnlyDLPack(view), 1, np.array([2]), 7.0)
    expect = np.zeros((4, 6))
    expect[:, 4] = 7.0
    np.testing.assert_array_equal(base, expect)
    x = np.zeros(3)
    gather.scatter_add_(OnlyDLPack(x), 0, np.array([0, 2, 0]), OnlyDLPack(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(x, [4.0, 0.0, 2.0])


def test_failing_inplace_call_through_dlpack_changes_nothing():
    x = np.ones(3)
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_add_(OnlyDLPack(x), 0, np.array([0, 3]), np.ones(2))
    np.testing.assert_array_equal(x, np.ones(3))


def test_read_only_memory_behind_dlpack_is_not_written():
    x = np.zeros(3)
    x.flags.writeable = False
    with pytest.raises((gather.InvalidArgumentError, BufferError, TypeError)):
        gather.index_fill_(OnlyDLPack(x), 0, np.array([0]), 1.0)
    np.testing.assert_array_equal(x, np.zeros(3))


def test_misaligned_and_empty_arrays_are_read_through_an_aligned_copy():
    # Arrays unpickled from a buffer (as Dask's workers receive them) may be misaligned.
    buf = np.frombuffer(bytearray(8 * 10 + 1), np.uint8)[1:]
    x = buf.view(np.float64)
    x_vals = np.arange(10.0)
    buf[:] = x_vals.view(np.uint8)
    assert not x.flags.aligned
    np.testing.assert_array_equal(gather.take(x, np.array([9, 0])), [9.0, 0.0])
    idx = np.frombuffer(bytearray(8 * 2 + 1), np.uint8)[1:].view(np.int64)
    np.testing.assert_array_equal(gather.take(x_vals, idx), [0.0, 0.0])
    empty = np.frombuffer(bytearray(9), np.uint8)[1:1].view(np.int64)
    assert gather.take(x_vals, empty).shape == (0,)
    with pytest.raises(gather.InvalidArgumentError, match="misaligned"):
        gather.index_fill_(x, 0, np.array([0]), 1.0)
