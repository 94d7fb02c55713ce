"""The exceptions `gather` raises.

Every failure of an op is a :class:`GatherError`. That is a ``RuntimeError``, which is what
PyTorch raises for most failures of these ops, so code written for torch's ops catches them.
Each class also derives from the built-in exception a NumPy user would catch for it:

====================== =================================== ============================
class                  built-in bases (and RuntimeError)   library error kind
====================== =================================== ============================
DimOutOfRangeError     IndexError (as PyTorch)             DimOutOfRange
IndexOutOfBoundsError  IndexError                          IndexOutOfBounds
RankMismatchError      ValueError                          RankMismatch
ShapeMismatchError     ValueError                          ShapeMismatch
InvalidArgumentError   ValueError                          InvalidArgument
DTypeError             TypeError (and InvalidArgumentError) InvalidArgument about a dtype
====================== =================================== ============================

PyTorch raises ``IndexError`` for a dim out of range and for some bad index values
(``index_select``, ``take``, ``put``), both ``IndexError`` here too; its one other
``IndexError`` of these ops, ``index_select`` with an index that is not 1-d, is a
:class:`RankMismatchError` (a ``ValueError`` and a ``RuntimeError``) here.

The message is the library's one-line message followed by a ``hint:`` line where there is a
fix, with the fix's code written as calls of the framework whose arrays the call was given:
NumPy's (``np.expand_dims(index, 2)``, ``index.astype(np.int64)``), torch's
(``index.unsqueeze(2)``, ``index.to(torch.int64)``), JAX's or CuPy's (the Rust library's hints
show ndarray's). Under ``jax.jit`` the error reaches the caller as JAX's runtime error, with the
same message. The attributes carry the same facts for programs: ``category`` (the conformance suite's name:
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

from typing import List, Optional

from . import _native

__all__ = [
    "GatherError",
    "DimOutOfRangeError",
    "IndexOutOfBoundsError",
    "RankMismatchError",
    "ShapeMismatchError",
    "InvalidArgumentError",
    "DTypeError",
]


class GatherError(RuntimeError):
    """Base class of every error an op of `gather` raises (a ``RuntimeError``, as PyTorch's)."""

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


def respell(err, dialect):
    """Writes the hint of ``err`` (a library error) as ``dialect``'s calls (``"numpy"``,
    ``"torch"``, ``"jax"``, ``"cupy"``), in its message and ``hint``: for the tensors of a
    framework that reached the library as NumPy views, whose errors were written for NumPy."""
    rust, hint = getattr(err, "_rust_hint", None), getattr(err, "hint", None)
    if rust is None or hint is None or not err.args or not str(err.args[0]).endswith(hint):
        return
    spelled = _native._respell(rust, dialect)
    err.args = (err.args[0][:len(err.args[0]) - len(hint)] + spelled,) + err.args[1:]
    err.hint = spelled


def refused(message: str, hint: str, cls: type = InvalidArgumentError) -> GatherError:
    """The error of a call the Python layer refuses itself, shaped as the library's own: the
    message, a ``hint:`` line, and ``hint`` set (an :class:`InvalidArgumentError` unless ``cls``
    says which)."""
    err = cls(f"{message}\nhint: {hint}")
    err.hint = hint
    return err
