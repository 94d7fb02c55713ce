"""PyTorch's ``out=``: the ops whose torch function takes it write their result into the
caller's array and return that array, as ``torch.gather(x, 1, i, out=buf)`` does.

The op runs out of place first and its result is then copied into ``out``, so a failing call
leaves ``out`` unchanged, and an ``out`` that shares memory with an argument gets the right
values (PyTorch refuses that case). As in PyTorch:

* ``out`` must have the result's dtype and be on its device;
* a torch ``out`` of another shape is resized (with torch's warning when it had elements); a
  NumPy or CuPy array cannot be resized, so there its shape must be the result's;
* nothing is recorded for autograd: with grad mode on, an argument (or ``out``) that requires
  grad is an error;
* ``sort`` and ``topk`` take a pair ``(values, indices)``.

JAX and Dask arrays are immutable: their ``out=`` is an error that says to take the returned
array. The rules of writing into a caller's torch tensor (:func:`not_inference`,
:func:`written`) are here too, for the in-place forms and ``gather.torch_scatter``'s ``out=``.
Imports neither torch nor jax.
"""

import sys
import warnings

import numpy as np

from ._errors import DTypeError, ShapeMismatchError, refused

# The ops whose torch function has `out=`, and those among them that return a pair.
OPS = {"gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
       "index_copy", "index_reduce", "take", "take_along_dim", "masked_select", "sort", "topk"}
PAIRS = {"sort", "topk"}


def call(op, run, args, kwargs):
    """``run(*args, **kwargs)`` written into ``kwargs["out"]`` (and ``gather``'s ``sparse_grad``
    taken), returning ``out``; ``kwargs`` is the call's own dictionary."""
    if op == "gather" and kwargs.pop("sparse_grad", False):
        raise refused("gather: sparse_grad=True asks for a sparse gradient, and the library's "
                      "gradients are dense", "leave sparse_grad out: the dense gradient has the same values")
    out = kwargs.pop("out", None)
    if out is None:
        return run(*args, **kwargs)
    targets = _targets(op, out)
    torch = sys.modules.get("torch")
    if torch is not None and torch.is_grad_enabled():
        given = [*args, *kwargs.values(), *targets]
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in given):
            raise refused(f"{op}: an argument requires grad, and calls with out= are not recorded "
                          "by autograd (as in PyTorch)",
                          f"call gather.{op} without out= (the result is recorded), or under "
                          "`with torch.no_grad():`")
    for t in targets:
        _writable(op, t)
    result = run(*args, **kwargs)
    results = result if op in PAIRS else (result,)
    for name, t, r in zip(("out[0]", "out[1]") if op in PAIRS else ("out",), targets, results):
        _check(op, name, t, r)
    for t, r in zip(targets, results):
        _copy(t, r)
    return tuple(targets) if op in PAIRS else out


def not_inference(t, what):
    """Refuses to write into ``t`` (``what``, as the error names it) where it is a torch
    inference tensor (made under ``torch.inference_mode()``) and inference mode is off: torch's
    own in-place ops refuse it, as it has no version counter to move on."""
    torch = sys.modules.get("torch")
    # Dynamo cannot trace is_inference() (a graph break even without fullgraph): compiled code
    # goes without this check.
    if torch is None or not isinstance(t, torch.Tensor) or torch.compiler.is_compiling():
        return t
    if t.is_inference() and not torch.is_inference_mode_enabled():
        raise refused(f"{what} is an inference tensor, which torch does not let in-place ops update "
                      "outside inference mode",
                      "write under `with torch.inference_mode():`, or into a copy made outside it "
                      "(`.clone()`)")
    return t


def written(t):
    """``t`` after the library wrote into its memory, with its version counter moved on where it
    is a torch tensor, as torch's own in-place ops move it: a backward that saved it then refuses
    to run on the new values instead of using them silently. (A tensor handed to the extension
    itself is moved on there; this is for the writes through a NumPy view of it.)"""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(t, torch.Tensor):
        torch.autograd.graph.increment_version(t)
    return t


def _targets(op, out):
    if op not in PAIRS:
        return (out,)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise refused(f"{op}: out must be a pair (values, indices), got {type(out).__name__}",
                      f"pass out=(values, indices), two arrays for {op}'s two results")
    return tuple(out)


def _root(a):
    return type(a).__module__.split(".")[0]


def _writable(op, t):
    """Refuses an ``out`` that cannot be written, before the op runs."""
    root = _root(t)
    if root in ("jax", "jaxlib") or root == "dask":
        raise refused(f"{op}: out is a {'JAX' if root != 'dask' else 'Dask'} array, which is immutable",
                      f"leave out= out and take the array gather.{op} returns")
    if isinstance(t, np.ndarray) and not t.flags.writeable:
        raise refused(f"{op}: out is read-only (or a broadcast view, whose elements alias each other)",
                      "pass a writable array (e.g. `np.empty_like(...)`)")
    not_inference(t, f"{op}: out")
    if not (isinstance(t, np.ndarray) or root in ("torch", "cupy")):
        raise refused(f"{op}: out must be an array of the result's framework, got {type(t).__name__}",
                      "pass a NumPy array, or a tensor of the framework of `input`")


def _check(op, name, t, r):
    """Refuses ``t`` where the result ``r`` cannot be written into it as it is."""
    if _root(t) != _root(r) and not (isinstance(t, np.ndarray) and isinstance(r, np.ndarray)):
        raise refused(f"{op}: {name} is a {type(t).__module__}.{type(t).__name__}, but the result is a "
                      f"{type(r).__module__}.{type(r).__name__} (the type of `input`)",
                      f"pass {name} of the result's type")
    if t.dtype != r.dtype:
        raise refused(f"{op}: {name} has dtype {t.dtype}, but the result's dtype is {r.dtype}",
                      f"pass {name} of dtype {r.dtype}", DTypeError)
    if _root(t) == "torch":
        if t.device != r.device:
            raise refused(f"{op}: {name} is on {t.device}, but the result on {r.device}",
                          f"pass {name} on {r.device}")
        return
    if tuple(t.shape) != tuple(r.shape):
        raise refused(f"{op}: {name} has shape {tuple(t.shape)}, but the result's is {tuple(r.shape)}",
                      f"pass {name} of shape {tuple(r.shape)} (NumPy and CuPy arrays cannot be resized)",
                      ShapeMismatchError)


def _copy(t, r):
    if isinstance(t, np.ndarray):
        np.copyto(t, r, casting="no")
        return
    if _root(t) == "torch":
        if t.shape != r.shape:
            if t.numel():
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(t.shape)}, which does not match the required output shape {list(r.shape)}. "
                    "This behavior is deprecated, and in a future PyTorch release outputs will not be "
                    "resized unless they have zero elements. You can explicitly reuse an out tensor t "
                    "by resizing it, inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=4)
            t.resize_(r.shape)
        t.copy_(r)
        return
    t[...] = r  # CuPy
