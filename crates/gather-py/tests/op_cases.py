"""Every differentiable op form as a function of ``(x, s)`` (x of shape (3, 4), s of (3, 2)),
for the tests of a framework's transforms (tests/test_jax.py, tests/test_torch_func.py):
``array`` and ``concatenate`` are the framework's."""

import gather


def cases(array, concatenate):
    """(name, function of (x, s)) for every op form whose output length the shapes give."""
    t = array
    idx = t([[0, 3], [1, 2], [2, 0]])
    return [
        ("gather", lambda x, s: gather.gather(x, 1, idx, bounds="clip")),
        ("take", lambda x, s: gather.take(x, idx)),
        ("index_select", lambda x, s: gather.index_select(x, 0, t([2, 0, 2]))),
        ("take_along_dim", lambda x, s: gather.take_along_dim(x, t([[1], [0], [3]]), 1)),
        ("select_batched", lambda x, s: gather.select_batched(x, 1, t([3, 0, 1]), 1)),
        ("scatter", lambda x, s: gather.scatter(x, 1, idx, s)),
        ("scatter value", lambda x, s: gather.scatter(x, 1, idx, value=2.5)),
        ("scatter_add", lambda x, s: gather.scatter_add(x, 1, idx, s)),
        ("scatter_reduce", lambda x, s: gather.scatter_reduce(x, 1, idx, s, "amax", include_self=False)),
        ("index_add", lambda x, s: gather.index_add(x, 1, t([3, 0]), s, alpha=2.0)),
        ("index_copy", lambda x, s: gather.index_copy(x, 1, t([3, 0]), s)),
        ("index_fill", lambda x, s: gather.index_fill(x, 1, t([2]), -1.5)),
        ("index_reduce", lambda x, s: gather.index_reduce(x, 1, t([3, 3]), s, "prod")),
        ("put", lambda x, s: gather.put(x, t([11, 0]), s[0], accumulate=True)),
        ("masked_scatter", lambda x, s: gather.masked_scatter(x, x > 0, concatenate([s.ravel()] * 2))),
        ("sort", lambda x, s: gather.sort(x, 1)[0]),
        ("topk", lambda x, s: gather.topk(x, 2, 0)[0]),
        ("repeat_interleave", lambda x, s: gather.repeat_interleave(x, 2, 1)),
        ("repeat_interleave sized", lambda x, s: gather.repeat_interleave(x, t([1, 0, 2]), 0, output_size=3)),
    ]
