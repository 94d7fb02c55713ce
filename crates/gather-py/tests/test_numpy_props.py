"""Property tests: gather's ops against NumPy's own on random inputs (hypothesis).

take_along_dim / gather      vs np.take_along_axis
scatter                      vs np.put_along_axis (distinct targets: PyTorch leaves the winner of
                                duplicate targets unspecified)
scatter_add / scatter_reduce vs np.add.at, np.maximum.at, np.minimum.at, np.multiply.at
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import gather

# No example database: the tests leave no .hypothesis folder in the checkout.
SETTINGS = settings(max_examples=60, deadline=None, database=None)

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int16, np.uint8, np.float16]


@st.composite
def problem(draw, distinct=False):
    """An input, a dim, an index (same rank, sizes <= the input's off `dim`) and a src of the
    index's shape."""
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    dim = draw(st.integers(-ndim, ndim - 1))
    d = dim % ndim
    ishape = list(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    for k in range(ndim):
        if k != d:
            ishape[k] = min(ishape[k], shape[k])
    if distinct:
        ishape[d] = min(ishape[d], shape[d])
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = (rng.integers(-50, 50, size=shape) if np.dtype(dtype).kind != "u" else rng.integers(0, 100, size=shape)).astype(dtype)
    src = (rng.integers(-50, 50, size=ishape) if np.dtype(dtype).kind != "u" else rng.integers(0, 100, size=ishape)).astype(dtype)
    if distinct:
        # A permutation prefix along dim for every lane: no two writes to one element.
        perm = np.argsort(rng.random(shape), axis=d)
        index = np.take(perm, np.arange(ishape[d]), axis=d)
        sl = tuple(slice(0, ishape[k]) for k in range(ndim))
        index = index[sl]
    else:
        index = rng.integers(0, shape[d], size=ishape)
    index_dtype = draw(st.sampled_from([np.int64, np.int32]))
    return x, dim, index.astype(index_dtype), src


def bit_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@SETTINGS
@given(problem())
def test_gather_is_take_along_axis(p):
    x, dim, index, _ = p
    if any(index.shape[k] != x.shape[k] for k in range(x.ndim) if k != dim % x.ndim):
        # take_along_axis broadcasts instead; compare on the index-shaped block of x.
        sl = tuple(slice(0, index.shape[k]) if k != dim % x.ndim else slice(None) for k in range(x.ndim))
        ref = np.take_along_axis(x[sl], index, axis=dim)
    else:
        ref = np.take_along_axis(x, index, axis=dim)
    bit_equal(gather.gather(x, dim, index), ref)


@SETTINGS
@given(problem(), st.integers(0, 2**32 - 1))
def test_take_along_dim_is_take_along_axis_with_broadcasting(p, seed):
    x, dim, _, _ = p
    d = dim % x.ndim
    rng = np.random.default_rng(seed)
    # Size 1 on some axes off `dim`: both libraries broadcast the index there.
    shape = [1 if (k != d and rng.random() < 0.5) else x.shape[k] for k in range(x.ndim)]
    shape[d] = int(rng.integers(1, 6))
    idx = rng.integers(0, x.shape[d], size=shape)
    bit_equal(gather.take_along_dim(x, idx, dim), np.take_along_axis(x, idx, axis=d))


@SETTINGS
@given(problem(distinct=True))
def test_scatter_with_distinct_targets_is_put_along_axis(p):
    x, dim, index, src = p
    d = dim % x.ndim
    ref = x.copy()
    if index.size:
        # put_along_axis needs index and values of the same shape over the whole of x off `dim`.
        sl = tuple(slice(0, index.shape[k]) if k != d else slice(None) for k in range(x.ndim))
        block = ref[sl]
        np.put_along_axis(block, index, src, axis=d)
        ref[sl] = block
    bit_equal(gather.scatter(x, dim, index, src), ref)


def at_reference(ufunc, x, dim, index, src, include_self, init):
    """scatter_reduce by NumPy's unbuffered ufunc.at."""
    d = dim % x.ndim
    out = x.copy()
    coords = np.indices(index.shape)
    target = [coords[k] for k in range(x.ndim)]
    target[d] = index
    target = tuple(t.reshape(-1) for t in target)
    if not include_self:
        hit = np.zeros(x.shape, dtype=bool)
        hit[target] = True
        out[hit] = init
    ufunc.at(out, target, src.reshape(-1))
    return out


@SETTINGS
@given(problem())
def test_scatter_add_is_add_at(p):
    x, dim, index, src = p
    ref = at_reference(np.add, x, dim, index, src, True, 0)
    got = gather.scatter_add(x, dim, index, src)
    if x.dtype.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-2 if x.dtype == np.float16 else 1e-6)
    else:
        bit_equal(got, ref)


@SETTINGS
@given(problem(), st.booleans())
def test_scatter_reduce_sum_is_add_at(p, include_self):
    x, dim, index, src = p
    ref = at_reference(np.add, x, dim, index, src, include_self, 0)
    got = gather.scatter_reduce(x, dim, index, src, "sum", include_self=include_self)
    if x.dtype.kind == "f":
        np.testing.assert_allclose(got, ref, rtol=1e-2 if x.dtype == np.float16 else 1e-6)
    else:
        bit_equal(got, ref)


def lowest(dtype):
    return np.finfo(dtype).min if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def highest(dtype):
    return np.finfo(dtype).max if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max


@SETTINGS
@given(problem(), st.booleans())
def test_scatter_reduce_amax_is_maximum_at(p, include_self):
    x, dim, index, src = p
    ref = at_reference(np.maximum, x, dim, index, src, include_self, lowest(x.dtype))
    bit_equal(gather.scatter_reduce(x, dim, index, src, "amax", include_self=include_self), ref)


@SETTINGS
@given(problem(), st.booleans())
def test_scatter_reduce_amin_is_minimum_at(p, include_self):
    x, dim, index, src = p
    ref = at_reference(np.minimum, x, dim, index, src, include_self, highest(x.dtype))
    bit_equal(gather.scatter_reduce(x, dim, index, src, "amin", include_self=include_self), ref)


@SETTINGS
@given(problem())
def test_strided_views_give_the_same_results_as_copies(p):
    """Negative strides, transposes and stride-0 broadcasts are read in place, with the same
    results as contiguous copies."""
    x, dim, index, src = p
    xr = x[..., ::-1]
    xt = np.ascontiguousarray(x.T).T  # Fortran order
    for view in (xr, xt):
        bit_equal(gather.gather(view, dim, index), gather.gather(np.ascontiguousarray(view), dim, index))
        bit_equal(
            gather.scatter_reduce(view, dim, index, src, "amax"),
            gather.scatter_reduce(np.ascontiguousarray(view), dim, index, src, "amax"),
        )
    if index.size:
        row = index.reshape(-1)[:1].reshape((1,) * index.ndim)
        b = np.broadcast_to(row, index.shape)
        assert 0 in b.strides or b.size <= 1
        bit_equal(gather.gather(x, dim, b), gather.gather(x, dim, np.ascontiguousarray(b)))
