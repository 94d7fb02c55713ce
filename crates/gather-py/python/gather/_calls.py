"""The library's view of a call of ``gather._native``: which arguments are arrays, under the
library's names, and which are the op's other arguments. The batched paths that reach the
library without the Python wrappers use it: the XLA handler under JAX's transformations
(``gather._jax_ops``) and ``torch.func.vmap``'s rule (``gather._autograd``). Imports neither
torch nor jax."""

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
