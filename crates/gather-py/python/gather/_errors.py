"""The exceptions `gather` raises.

Every failure of an op is a :class:`GatherError`, which also derives from the built-in exception a
NumPy or PyTorch user would catch for it:

====================== =================================== ============================
class                  built-in bases                      library error kind
====================== =================================== ============================
DimOutOfRangeError     IndexError (as PyTorch)             DimOutOfRange
IndexOutOfBoundsError  IndexError                          IndexOutOfBounds
RankMismatchError      ValueError                          RankMismatch
ShapeMismatchError     ValueError                          ShapeMismatch
InvalidArgumentError   ValueError                          InvalidArgument
DTypeError             TypeError (and InvalidArgumentError) InvalidArgument about a dtype
====================== =================================== ============================

The message is the library's one-line message followed by a ``hint:`` line where there is a
fix, with the fix's code written as NumPy calls (``np.expand_dims(index, 2)``,
``index.astype(np.int64)``; the Rust library's hints show ndarray's). The attributes carry the same facts for programs: ``category`` (the conformance suite's name:
``dim_out_of_range``, ``rank_mismatch``, ``shape_mismatch``, ``index_out_of_bounds``,
``invalid_argument``), ``hint`` (or None), and for a bad index value ``index_value`` and
``coordinate`` (its position in the index array), else None.

>>> import numpy as np, gather
>>> try:
...     gather.gather(np.zeros((2, 3)), 1, np.array([[0, 7]]))
... except IndexError as e:
...     print(e.category, e.index_value, e.coordinate)
index_out_of_bounds 7 [0, 1]
"""

import re
from typing import List, Optional

__all__ = [
    "GatherError",
    "DimOutOfRangeError",
    "IndexOutOfBoundsError",
    "RankMismatchError",
    "ShapeMismatchError",
    "InvalidArgumentError",
    "DTypeError",
]


class GatherError(Exception):
    """Base class of every error an op of `gather` raises."""

    category: str = "invalid_argument"
    hint: Optional[str] = None
    index_value: Optional[int] = None
    coordinate: Optional[List[int]] = None


class DimOutOfRangeError(GatherError, IndexError):
    """``dim`` outside ``[-ndim, ndim)`` (an IndexError, as in PyTorch)."""

    category = "dim_out_of_range"


class IndexOutOfBoundsError(GatherError, IndexError):
    """An index value outside the valid range of its dimension."""

    category = "index_out_of_bounds"


class RankMismatchError(GatherError, ValueError):
    """An array argument has the wrong number of dimensions."""

    category = "rank_mismatch"


class ShapeMismatchError(GatherError, ValueError):
    """Sizes are incompatible (non-dim sizes, element counts, broadcasting)."""

    category = "shape_mismatch"


class InvalidArgumentError(GatherError, ValueError):
    """Anything else: a bad ``reduce`` name, ``k`` out of range, a scalar that does not fit."""

    category = "invalid_argument"


class DTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong dtype (a float index, mismatched input and src dtypes ...)."""


_DTYPES = {"i64": "np.int64", "i32": "np.int32", "u8": "np.uint8", "f32": "np.float32",
           "f64": "np.float64", "_": "input.dtype"}


def _expand(m):
    """`name.view().insert_axis(Axis(a))...[.broadcast((s,)).unwrap()]` as NumPy calls."""
    axes = re.findall(r"insert_axis\(Axis\((\d+)\)\)", m.group(2))
    call = f"np.expand_dims({m.group(1)}, {axes[0] if len(axes) == 1 else '(' + ', '.join(axes) + ')'})"
    return f"np.broadcast_to({call}, {m.group(4)})" if m.group(3) else call


# The library's hints show the fix as Rust (ndarray) calls; a Python caller gets NumPy's.
_RULES = [
    (re.compile(r"(\w+)\.view\(\)((?:\.insert_axis\(Axis\(\d+\)\))+)(\.broadcast\((\([^)]*\))\)\.unwrap\(\))?"),
     _expand),
    (re.compile(r"(\w+)\.insert_axis\(Axis\((\d+)\)\)"), r"np.expand_dims(\1, \2)"),
    (re.compile(r"(\w+)\.index_axis\(Axis\((\w+)\), 0\)"), r"\1.take(0, axis=\2)"),
    (re.compile(r"(\w+)\.mapv\(\|\w+\| \w+ != 0\)"), r"\1 != 0"),
    (re.compile(r"(\w+)\.mapv\(\|(\w+)\| if \2 < 0 \{ \2 \+ (\d+) \} else \{ \2 \}\)"),
     r"np.where(\1 < 0, \1 + \3, \1)"),
    (re.compile(r"(\w*)\.?mapv\(\|\w+\| \w+ as (\w+)\)"),
     lambda m: f"{m.group(1)}.astype({_DTYPES.get(m.group(2), m.group(2))})"),
    (re.compile(r"Array1::from_iter\((\w+)\.iter\(\)\.copied\(\)\)"), r"\1.ravel()"),
    (re.compile(r"slice_axis\(Axis\((\d+)\), Slice::from\(\.\.(\d+)\)\)"), r"take(range(\2), axis=\1)"),
    (re.compile(r"(\w+)\.slice_mut\(s!\[\.\.\]\)"), r"\1[...]"),
    (re.compile(r"\.into_shape_with_order\("), ".reshape("),
    (re.compile(r"`into_shape`"), "`reshape`"),
    (re.compile(r"`insert_axis`"), "`np.expand_dims`"),
    (re.compile(r"`mapv`"), "`astype`"),
    (re.compile(r"OutOfBounds::Fill\((\w+)\)"), r'bounds="fill", fill_value=\1'),
    (re.compile(r"OutOfBounds::(\w+)"), lambda m: f'bounds="{m.group(1).lower()}"'),
]


def _python_hint(hint: str) -> str:
    """`hint` with its Rust calls written as NumPy's (the bindings call this for every error)."""
    for pattern, repl in _RULES:
        hint = pattern.sub(repl, hint)
    return hint


def refused(message: str, hint: str) -> InvalidArgumentError:
    """The error of a call the Python layer refuses itself, shaped as the library's own: the
    message, a ``hint:`` line, and ``hint`` set."""
    err = InvalidArgumentError(f"{message}\nhint: {hint}")
    err.hint = hint
    return err
