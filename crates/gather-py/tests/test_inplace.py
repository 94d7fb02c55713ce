"""The in-place forms (PyTorch's trailing underscore): they write into the caller's own array."""

import numpy as np
import pytest

import gather

# Each in-place op with arguments for a 2-D float input of shape (4, 3): (name, args, kwargs).
CASES = [
    ("scatter", (0, np.array([[3, 1, 0]]), np.array([[7.0, 8.0, 9.0]])), {}),
    ("scatter", (1, np.array([[2], [0], [1], [2]]), 5.0), {}),
    ("scatter", (0, np.array([[1, 1, 1]]), np.array([[2.0, 3.0, 4.0]])), {"reduce": "multiply"}),
    ("scatter_add", (0, np.array([[0, 0, 3], [0, 2, 3]]), np.ones((2, 3))), {}),
    ("scatter_reduce", (0, np.array([[1, 1, 1], [1, 2, 1]]), np.full((2, 3), 9.0), "amax"), {}),
    ("scatter_reduce", (1, np.array([[0, 0]]), np.array([[4.0, 6.0]]), "mean"), {"include_self": False}),
    ("index_add", (0, np.array([3, 3]), np.ones((2, 3))), {"alpha": 2}),
    ("index_copy", (1, np.array([2, 0]), np.arange(8.0).reshape(4, 2)), {}),
    ("index_fill", (1, np.array([-1]), -3.5), {}),
    ("index_reduce", (0, np.array([0, 0, 2]), np.full((3, 3), 2.0), "prod"), {}),
    ("put", (np.array([0, 11, 0]), np.array([1.0, 2.0, 3.0])), {"accumulate": True}),
    ("masked_scatter", (np.arange(12).reshape(4, 3) % 5 == 0, np.arange(100.0, 110.0)), {}),
]


def base():
    return np.arange(12.0).reshape(4, 3)


@pytest.mark.parametrize("name,args,kwargs", CASES)
def test_inplace_form_writes_the_out_of_place_result_into_the_callers_array_and_returns_it(name, args, kwargs):
    want = getattr(gather, name)(base(), *args, **kwargs)
    x = base()
    got = getattr(gather, name + "_")(x, *args, **kwargs)
    assert got is x
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("name,args,kwargs", CASES)
def test_inplace_form_writes_through_a_strided_view_into_its_base(name, args, kwargs):
    want = getattr(gather, name)(base(), *args, **kwargs)
    big = np.zeros((8, 6))
    big[::2, ::2] = base()
    view = big[::2, ::2]
    getattr(gather, name + "_")(view, *args, **kwargs)
    np.testing.assert_array_equal(big[::2, ::2], want)
    # The elements between the view's are untouched.
    assert not big[1::2].any() and not big[:, 1::2].any()


def test_failing_inplace_call_leaves_the_array_unchanged():
    x = base()
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.scatter_add_(x, 0, np.array([[0, 1, 9]]), np.ones((1, 3)))
    np.testing.assert_array_equal(x, base())
    with pytest.raises(gather.IndexOutOfBoundsError):
        gather.index_copy_(x, 0, np.array([0, 4]), np.ones((2, 3)))
    np.testing.assert_array_equal(x, base())
    with pytest.raises(gather.DTypeError):
        gather.scatter_add_(x, 0, np.array([[0, 1, 2]]), np.ones((1, 3), np.float32))
    np.testing.assert_array_equal(x, base())


def test_read_only_target_is_a_clear_error_and_stays_unchanged():
    x = base()
    x.flags.writeable = False
    with pytest.raises(gather.InvalidArgumentError, match="read-only") as e:
        gather.scatter_add_(x, 0, np.array([[0]]), np.ones((1, 1)))
    assert "x.copy()" in str(e.value)
    np.testing.assert_array_equal(x, base())
    # A broadcast view is read-only too: its elements alias each other.
    b = np.broadcast_to(np.zeros(3), (4, 3))
    with pytest.raises(gather.InvalidArgumentError, match="read-only"):
        gather.index_fill_(b, 0, np.array([0]), 1.0)


def test_target_that_shares_memory_with_another_argument_is_an_error_that_names_it():
    # NumPy's borrow checker finds these first; the error still names the argument and its fix.
    x = base()
    with pytest.raises(gather.InvalidArgumentError, match="shares memory with `src`") as e:
        gather.scatter_add_(x, 0, np.array([[0, 1, 2]]), x[:1])
    assert e.value.hint == "pass a copy of `src` (NumPy: `src.copy()`, torch: `src.clone()`)"
    np.testing.assert_array_equal(x, base())
    with pytest.raises(gather.InvalidArgumentError, match="shares memory with `source`"):
        gather.index_copy_(x, 0, np.array([1, 0]), x)
    np.testing.assert_array_equal(x, base())


def test_target_that_is_not_an_array_is_an_error():
    with pytest.raises(gather.InvalidArgumentError, match="must be an array"):
        gather.index_fill_([1.0, 2.0], 0, np.array([0]), 5.0)


def test_bfloat16_bits_are_updated_in_place():
    bits = (np.array([1.0, 2.0, 3.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    out = gather.scatter_add_(bits, 0, np.array([2, 2]), bits[:2].copy(), dtype="bfloat16")
    assert out is bits
    np.testing.assert_array_equal((bits.astype(np.uint32) << 16).view(np.float32), [1.0, 2.0, 6.0])


def test_every_inplace_form_is_exported_and_documented():
    names = ["scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_", "index_fill_",
             "index_reduce_", "put_", "masked_scatter_"]
    for n in names:
        f = getattr(gather, n)
        assert n in gather.__all__
        assert f.__doc__.startswith(n + "(")
        assert "In-place" in f.__doc__
