"""The library's view of a call of ``gather._native``: which arguments are arrays, under the
library's names, and which are the op's other arguments. The batched paths that reach the
library without the Python wrappers use it: the XLA handler under JAX's transformations
(``gather._jax_ops``) and ``torch.func.vmap``'s rule (``gather._autograd``). And the library's
checks of a call from its arguments' shapes and dtypes alone (:func:`check`), for the paths that
build a computation before any data exists (``jax.jit``, Dask graphs). Imports neither torch
nor jax."""

import math

import numpy as np

from ._errors import GatherError, IndexOutOfBoundsError

# The library's names of the array arguments (gather._native's `indices` and `axis` are
# take_along_dim's and select_batched's PyTorch and JAX names for them).
ARRAYS = {"input", "src", "source", "index", "mask", "repeats"}
RENAME = {"indices": "index", "axis": "dim"}
# Ops whose in-place form a batched call runs into its result, which holds `input` first.
IN_PLACE = {"scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
            "index_reduce", "put", "masked_scatter"}


def describe(op, values, is_array):
    """``(library name of each array argument, the other arguments by library name)`` of
    ``op`` called with ``values`` (its bound arguments; ``is_array`` tells arrays apart), or
    None where only the wrappers can run it (``dtype="bfloat16"`` bit patterns, an array where
    the library takes a number)."""
    if values.get("dtype") is not None:
        return None
    arrays, args = {}, {}
    for name, v in values.items():
        lib = RENAME.get(name, name)
        if name == "dtype" or v is None:
            continue
        if op == "repeat_interleave" and name == "input" and values.get("repeats") is None:
            lib = "repeats"  # the repeats-only form
        if is_array(v) and lib in ARRAYS:
            arrays[name] = lib
        elif op == "scatter" and name == "src":
            args["value"] = v  # scatter's scalar form
        elif is_array(v):
            return None  # a traced or batched scalar (index_fill's value, say)
        else:
            args[lib] = v
    return arrays, args


def output_names(count):
    """The library's names of an op's outputs."""
    return ["output"] if count == 1 else ["values", "indices"]


# Ops whose errors, other than a bad index value, follow from shapes, dtypes and arguments
# alone (repeat_interleave's output_size, say, is checked against the repeats' values), and
# compare sizes, never element counts (put's index and source must hold as many elements: the
# stand-ins' sizes keep order and equality, not products).
CHECKED = {"gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add", "index_copy",
           "index_fill", "index_reduce", "take", "take_along_dim", "masked_scatter", "sort", "argsort",
           "topk", "select_batched"}
# Arguments that are sizes, compared with the arrays' (topk's k).
SIZES = ("k",)


def check(native, values, names):
    """The library's own checks of ``native(**values)`` (dims, ranks, shapes, dtypes, arguments,
    policies) without the arrays' data: ``names`` are the array arguments, anything with a shape
    and a NumPy dtype. They run on stand-ins, stride-0 arrays of the same dtypes whose sizes keep
    their order, their equalities and their 0s and 1s, so that every shape rule decides as on the
    real arrays, at a few elements. An error is raised again from stride-0 stand-ins of the real
    shapes (the library checks before it reads or allocates), so that it names the real sizes.
    A bad index value is left to the run, which reports the real value at its position; a dtype
    NumPy does not have (JAX's bfloat16) leaves the whole check to the run."""
    if "grad_output" in values and values.get("dim", 0) is None:
        return  # a flat gradient's grad_output holds as many elements as the index
    shapes = {n: tuple(np.shape(values[n])) for n in names}
    dtypes = {n: np.dtype(values[n].dtype) for n in names}
    if any(isinstance(s, float) and math.isnan(s) for shape in shapes.values() for s in shape):
        return  # unknown sizes (a Dask array after boolean indexing)
    if any(d.type.__module__ != "numpy" for d in dtypes.values()):
        return
    scalars = [n for n in SIZES if isinstance(values.get(n), int) and values[n] > 1]
    sizes = sorted({s for shape in shapes.values() for s in shape if s > 1} | {values[n] for n in scalars})
    small = {0: 0, 1: 1, **{s: i + 2 for i, s in enumerate(sizes)}}

    def run(size):
        stand = dict(values)
        for n in names:
            stand[n] = np.broadcast_to(np.zeros((), dtypes[n]), tuple(size(s) for s in shapes[n]))
        for n in scalars:
            stand[n] = size(values[n])
        native(**stand)

    try:
        run(small.__getitem__)
    except IndexOutOfBoundsError:
        return
    except GatherError:
        run(int)
        raise
