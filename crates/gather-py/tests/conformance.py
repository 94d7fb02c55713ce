"""A runner of the shared conformance suite through the Python API.

It applies the rules of shared/conformance/README.md (R1-R7, errors, gradients) the way the Rust
runner (crates/gather-cli/src/conformance.rs and compare.rs) does, but every call goes through
``import gather``: NumPy arrays in, NumPy arrays (or exceptions) out.

Not applicable here: R4b (atomic failure of in-place forms), because the Python API has only the
out-of-place forms. Gradients: a gradient that differs from PyTorch's numbers with the default
``parity="correct"`` must match them exactly with ``parity="pytorch"`` (the library's documented
divergences: see crates/gather/src/grad); the Rust runner additionally derives the corrected
numbers from PyTorch's.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import gather

HERE = Path(__file__).resolve().parent


def suite_dir() -> Optional[Path]:
    """The conformance cases: $GATHER_CONFORMANCE, else ../shared/conformance/cases beside the
    checkout."""
    env = os.environ.get("GATHER_CONFORMANCE")
    candidates = [Path(env)] if env else []
    # crates/gather-py/tests -> repository root -> its parent
    root = HERE.parent.parent.parent
    candidates += [root.parent / "shared" / "conformance" / "cases", root / "shared" / "conformance" / "cases"]
    for c in candidates:
        if c.is_dir() and (c / "cases").is_dir():
            c = c / "cases"
        if c.is_dir():
            return c
    return None


def case_dirs() -> List[Path]:
    d = suite_dir()
    if d is None:
        return []
    return sorted(p for p in d.iterdir() if (p / "case.json").is_file())


class CaseFailure(AssertionError):
    pass


class Case:
    def __init__(self, folder: Path):
        self.folder = folder
        self.spec = json.loads((folder / "case.json").read_text())
        self.op: str = self.spec["op"]
        self.args: Dict[str, Any] = self.spec.get("args") or {}
        self.file_dtypes: Dict[str, str] = self.spec.get("file_dtypes") or {}
        self.bf16 = self.spec.get("dtype") == "bfloat16"

    def load(self, file: str) -> np.ndarray:
        a = np.load(self.folder / file, allow_pickle=False)
        return a

    def logical(self, file: str) -> str:
        return self.file_dtypes.get(file, str(np.load(self.folder / file, mmap_mode="r").dtype))

    def inputs(self) -> Dict[str, np.ndarray]:
        return {name: self.load(f) for name, f in self.spec["inputs"].items()}

    def expected(self) -> Dict[str, Tuple[np.ndarray, str]]:
        return {name: (self.load(f), self.logical(f)) for name, f in (self.spec["expected"] or {}).items()}


def scalar(v: Any) -> Any:
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return v


def call(case: Case, ins: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Runs the case's op through the Python API; returns its named outputs."""
    a, op = case.args, case.op
    kw = {"dtype": "bfloat16"} if case.bf16 else {}
    x = ins.get("input")
    if op == "gather":
        return {"output": gather.gather(x, a["dim"], ins["index"], **kw)}
    if op == "scatter":
        extra = {}
        if a.get("reduce") is not None:
            extra["reduce"] = a["reduce"]
        if "src" in ins:
            out = gather.scatter(x, a["dim"], ins["index"], ins["src"], **extra, **kw)
        else:
            out = gather.scatter(x, a["dim"], ins["index"], value=scalar(a["value"]), **extra, **kw)
        return {"output": out}
    if op == "scatter_add":
        return {"output": gather.scatter_add(x, a["dim"], ins["index"], ins["src"], **kw)}
    if op == "scatter_reduce":
        return {
            "output": gather.scatter_reduce(
                x, a["dim"], ins["index"], ins["src"], a["reduce"], include_self=a.get("include_self", True), **kw
            )
        }
    if op == "index_select":
        return {"output": gather.index_select(x, a["dim"], ins["index"], **kw)}
    if op == "take":
        return {"output": gather.take(x, ins["index"], **kw)}
    if op == "take_along_dim":
        return {"output": gather.take_along_dim(x, ins["index"], a.get("dim"), **kw)}
    if op == "index_add":
        extra = {"alpha": scalar(a["alpha"])} if "alpha" in a else {}
        return {"output": gather.index_add(x, a["dim"], ins["index"], ins["source"], **extra, **kw)}
    if op == "index_copy":
        return {"output": gather.index_copy(x, a["dim"], ins["index"], ins["source"], **kw)}
    if op == "index_fill":
        return {"output": gather.index_fill(x, a["dim"], ins["index"], scalar(a["value"]), **kw)}
    if op == "index_reduce":
        return {
            "output": gather.index_reduce(
                x, a["dim"], ins["index"], ins["source"], a["reduce"], include_self=a.get("include_self", True), **kw
            )
        }
    if op == "masked_select":
        return {"output": gather.masked_select(x, ins["mask"], **kw)}
    if op == "masked_scatter":
        return {"output": gather.masked_scatter(x, ins["mask"], ins["source"], **kw)}
    if op == "put":
        return {"output": gather.put(x, ins["index"], ins["source"], a.get("accumulate", False), **kw)}
    if op == "topk":
        v, i = gather.topk(x, a["k"], a.get("dim", -1), a.get("largest", True), a.get("sorted", True), **kw)
        return {"values": v, "indices": i}
    if op == "sort":
        v, i = gather.sort(x, a.get("dim", -1), a.get("descending", False), stable=a.get("stable", False), **kw)
        return {"values": v, "indices": i}
    if op == "argsort":
        return {"output": gather.argsort(x, a.get("dim", -1), a.get("descending", False), stable=a.get("stable", False), **kw)}
    if op == "repeat_interleave":
        size = {"output_size": a["output_size"]} if a.get("output_size") is not None else {}
        if x is None:
            return {"output": gather.repeat_interleave(ins["repeats"], **size)}
        reps = ins["repeats"] if "repeats" in ins else a["repeats"]
        return {"output": gather.repeat_interleave(x, reps, a.get("dim"), **size, **kw)}
    raise CaseFailure(f"unknown op {op}")


def call_grad(case: Case, ins: Dict[str, np.ndarray], g: np.ndarray, parity: Optional[str]) -> Dict[str, np.ndarray]:
    """The gradients of the case's op through gather.grad, named grad_<input>."""
    a, op = case.args, case.op
    kw: Dict[str, Any] = {"dtype": "bfloat16"} if case.bf16 else {}
    if parity is not None:
        kw["parity"] = parity
    x = ins["input"]
    if op == "gather":
        r = gather.grad.gather(g, x, a["dim"], ins["index"], **kw)
    elif op == "scatter":
        if "src" in ins:
            r = gather.grad.scatter(g, x, a["dim"], ins["index"], ins["src"], **kw)
        else:
            r = gather.grad.scatter(g, x, a["dim"], ins["index"], value=scalar(a["value"]), **kw)
    elif op == "scatter_add":
        r = gather.grad.scatter_add(g, x, a["dim"], ins["index"], ins["src"], **kw)
    elif op == "scatter_reduce":
        r = gather.grad.scatter_reduce(
            g, x, a["dim"], ins["index"], ins["src"], a["reduce"], include_self=a.get("include_self", True), **kw
        )
    elif op == "index_select":
        r = gather.grad.index_select(g, x, a["dim"], ins["index"], **kw)
    elif op == "take":
        r = gather.grad.take(g, x, ins["index"], **kw)
    elif op == "take_along_dim":
        r = gather.grad.take_along_dim(g, x, ins["index"], a.get("dim"), **kw)
    elif op == "index_add":
        extra = {"alpha": scalar(a["alpha"])} if "alpha" in a else {}
        r = gather.grad.index_add(g, x, a["dim"], ins["index"], ins["source"], **extra, **kw)
    else:
        raise CaseFailure(f"no gradient runner for {op}")
    names = {
        "scatter": ["grad_input", "grad_src"],
        "scatter_add": ["grad_input", "grad_src"],
        "scatter_reduce": ["grad_input", "grad_src"],
        "index_add": ["grad_input", "grad_source"],
    }.get(op, ["grad_input"])
    if isinstance(r, tuple):
        return dict(zip(names, r))
    return {"grad_input": r}


# ----------------------------------------------------------------------------------------------
# Comparison rules.


def logical_of(arr: np.ndarray, bf16: bool) -> str:
    if bf16 and arr.dtype == np.uint16:
        return "bfloat16"
    return str(arr.dtype)


def as_f64(arr: np.ndarray, logical: str) -> np.ndarray:
    if logical == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def is_float(logical: str) -> bool:
    return logical in ("float16", "bfloat16", "float32", "float64")


def bits(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "f":
        return arr.view(np.dtype(f"u{arr.dtype.itemsize}"))
    return arr


def nan_mask(arr: np.ndarray, logical: str) -> np.ndarray:
    if not is_float(logical):
        return np.zeros(arr.shape, dtype=bool)
    return np.isnan(as_f64(arr, logical))


def check_r1(actual: np.ndarray, expected: np.ndarray, logical: str, bf16: bool, what: str) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise CaseFailure(f"{what}: shape {actual.shape}, expected {expected.shape}")
    got = logical_of(actual, bf16)
    if got != logical:
        raise CaseFailure(f"{what}: dtype {got}, expected {logical}")


def same_elems(a: np.ndarray, e: np.ndarray, logical: str) -> np.ndarray:
    """Elementwise R2 equality: same bits, or both NaN."""
    eq = bits(a) == bits(e)
    return eq | (nan_mask(a, logical) & nan_mask(e, logical))


def check_exact(actual: np.ndarray, expected: np.ndarray, logical: str, bf16: bool, what: str) -> None:
    check_r1(actual, expected, logical, bf16, what)
    ok = same_elems(actual, expected, logical)
    if not np.all(ok):
        pos = tuple(int(p[0]) for p in np.nonzero(~ok)) if ok.ndim else ()
        raise CaseFailure(f"{what}: at {list(pos)} got {actual[pos]!r}, expected {expected[pos]!r}")


def close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(e)
        inf = np.isinf(a) | np.isinf(e)
        fin = ~np.isnan(a) & ~np.isnan(e) & ~inf
        ok_fin = np.zeros(a.shape, dtype=bool)
        ok_fin[fin] = np.abs(a[fin] - e[fin]) <= atol + rtol * np.abs(e[fin])
        ok_inf = inf & (a == e)
        return both_nan | ok_fin | ok_inf


def check_tolerance(actual, expected, logical, bf16, rtol, atol, what):
    check_r1(actual, expected, logical, bf16, what)
    if not is_float(logical):
        return check_exact(actual, expected, logical, bf16, what)
    a, e = as_f64(actual, logical), as_f64(expected, logical)
    ok = close(a, e, rtol, atol)
    if not np.all(ok):
        pos = tuple(int(p[0]) for p in np.nonzero(~ok)) if ok.ndim else ()
        raise CaseFailure(f"{what}: at {list(pos)} got {a[pos]!r}, expected {e[pos]!r} (rtol {rtol}, atol {atol})")


def norm_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    return dim + n if dim < 0 else dim


def check_any_of_duplicates(case: Case, ins: Dict[str, np.ndarray], out: np.ndarray, logical: str) -> None:
    """R5: unwritten elements equal input; written ones equal one of the values written there."""
    x = ins["input"]
    x1 = x.reshape(-1) if x.ndim == 0 else x
    o1 = out.reshape(-1) if out.ndim == 0 else out
    writes: Dict[Tuple[int, ...], List[Any]] = {}
    op, a = case.op, case.args
    if op == "scatter":
        index, src = ins["index"], ins["src"]
        index1 = index.reshape(-1) if index.ndim == 0 else index
        src1 = src.reshape(-1) if src.ndim == 0 else src
        d = norm_dim(a["dim"], x.ndim)
        for p in np.ndindex(*index1.shape):
            t = list(p)
            t[d] = int(index1[p])
            writes.setdefault(tuple(t), []).append(src1[p])
    elif op == "index_copy":
        index, source = ins["index"].reshape(-1), ins["source"]
        source1 = source.reshape(-1) if source.ndim == 0 else source
        d = norm_dim(a["dim"], x.ndim)
        for j, i in enumerate(index):
            src_slice = np.take(source1, j, axis=d) if source1.ndim else source1
            for q in np.ndindex(*src_slice.shape):
                t = list(q)
                t.insert(d, int(i))
                writes.setdefault(tuple(t), []).append(src_slice[q])
    elif op == "put":
        index, source = ins["index"].reshape(-1), ins["source"].reshape(-1)
        n = x.size
        for j, i in enumerate(index):
            i = int(i)
            if i < 0:
                i += n
            t = np.unravel_index(i, x1.shape)
            writes.setdefault(tuple(int(v) for v in t), []).append(source[j])
    else:
        raise CaseFailure(f"any_of_duplicates on {op}")
    for p in np.ndindex(*x1.shape):
        got = np.asarray(o1[p])
        cands = writes.get(tuple(p))
        if cands is None:
            if not same_elems(got, np.asarray(x1[p]), logical):
                raise CaseFailure(f"R5: unwritten element {list(p)} is {got!r}, input has {x1[p]!r}")
        elif not any(bool(same_elems(got, np.asarray(c), logical)) for c in cands):
            raise CaseFailure(f"R5: element {list(p)} is {got!r}, not one of the written values {cands!r}")


def as_1d(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1) if a.ndim == 0 else a


def sort_dim(case: Case, x: np.ndarray) -> int:
    return norm_dim(case.args.get("dim", -1), x.ndim)


def check_unordered(actual, want, dim, logical, bf16):
    """R6: sort the (value, index) pairs of every slice by index, then R2."""
    (av, ai), (ev, ei) = actual, want
    check_r1(av, ev, logical, bf16, "values")
    check_r1(ai, ei, "int64", False, "indices")
    av, ai, ev, ei = map(as_1d, (av, ai, ev, ei))
    oa = np.argsort(ai, axis=dim, kind="stable")
    oe = np.argsort(ei, axis=dim, kind="stable")
    check_exact(np.take_along_axis(av, oa, dim), np.take_along_axis(ev, oe, dim), logical, bf16, "values")
    check_exact(np.take_along_axis(ai, oa, dim), np.take_along_axis(ei, oe, dim), "int64", False, "indices")


def check_indices_valid(x1: np.ndarray, dim: int, idx: np.ndarray) -> None:
    size = x1.shape[dim]
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise CaseFailure(f"R7: an index outside [0, {size})")
    s = np.sort(idx, axis=dim)
    if s.shape[dim] > 1 and np.any(np.diff(s, axis=dim) == 0):
        raise CaseFailure("R7: repeated index within a slice")


def check_ties(x, dim, unordered, actual, want, logical, bf16):
    """R7: values match (after R6 when unordered); indices valid, distinct, and select the values."""
    (av, ai), (ev, ei) = actual, want
    check_r1(av, ev, logical, bf16, "values")
    check_r1(ai, ei, "int64", False, "indices")
    x1, av1, ai1, ev1 = as_1d(x), as_1d(av), as_1d(ai), as_1d(ev)
    if unordered:
        # Compare the multisets of values per slice: sort both by value bits.
        check_exact(np.sort(bits(av1), axis=dim), np.sort(bits(ev1), axis=dim), logical if not is_float(logical) else str(bits(av1).dtype), False, "values")
    else:
        check_exact(av1, ev1, logical, bf16, "values")
    check_indices_valid(x1, dim, ai1)
    check_exact(np.take_along_axis(x1, ai1, dim), av1, logical, bf16, "input.gather(indices) vs values")


def check_argsort_ties(x, dim, out, exp, bf16):
    check_r1(out, exp, "int64", False, "output")
    x1, o1, e1 = as_1d(x), as_1d(out), as_1d(exp)
    logical = "bfloat16" if bf16 else str(x.dtype)
    check_indices_valid(x1, dim, o1)
    check_exact(np.take_along_axis(x1, o1, dim), np.take_along_axis(x1, e1, dim), logical, bf16, "input gathered at output")


def run_case(folder: Path) -> str:
    """Runs one case; returns "passed", "passed+grad", "passed+grad(pytorch parity)", or raises
    CaseFailure."""
    case = Case(folder)
    ins = case.inputs()
    error = case.spec.get("error")
    bf16 = case.bf16
    try:
        outs = call(case, ins)
    except gather.GatherError as e:
        if error is None:
            raise CaseFailure(f"failed with {e.category}: {e}") from None
        if e.category != error:
            raise CaseFailure(f"expected error {error}, got {e.category}: {e}") from None
        return "passed"
    if error is not None:
        div = case.spec.get("index_dtype_divergence")
        if not div:
            raise CaseFailure(f"expected error {error}, but the op succeeded")
        for name, f in div.items():
            check_exact(outs[name], case.load(f), case.logical(f), bf16, f"{name} (R4a)")
        return "passed"
    expected = case.expected()
    if set(outs) != set(expected):
        raise CaseFailure(f"outputs {sorted(outs)}, expected {sorted(expected)}")
    if case.spec.get("any_of_duplicates"):
        e, logical = expected["output"]
        check_r1(outs["output"], e, logical, bf16, "output")
        check_any_of_duplicates(case, ins, outs["output"], logical)
    elif case.spec.get("unordered") or case.spec.get("ties_any_index"):
        x = ins["input"]
        dim = sort_dim(case, x)
        if case.op == "argsort":
            check_argsort_ties(x, dim, outs["output"], expected["output"][0], bf16)
        else:
            logical = expected["values"][1]
            actual = (outs["values"], outs["indices"])
            want = (expected["values"][0], expected["indices"][0])
            if case.spec.get("ties_any_index"):
                check_ties(x, dim, bool(case.spec.get("unordered")), actual, want, logical, bf16)
            else:
                check_unordered(actual, want, dim, logical, bf16)
    else:
        tol = case.spec.get("tolerance") or {"rtol": 0.0, "atol": 0.0}
        for name, (e, logical) in expected.items():
            if tol["rtol"] == 0.0 and tol["atol"] == 0.0:
                check_exact(outs[name], e, logical, bf16, name)
            else:
                check_tolerance(outs[name], e, logical, bf16, tol["rtol"], tol["atol"], name)
    g = case.spec.get("grad")
    if not g:
        return "passed"
    g_out = case.load(g["grad_output"])
    tol = g["tolerance"]
    want = {k[len("expected_"):]: case.load(v) for k, v in g.items() if k.startswith("expected_grad_")}

    def compare(grads: Dict[str, np.ndarray]) -> Optional[str]:
        try:
            for name, e in want.items():
                if name not in grads:
                    return f"no {name}"
                check_tolerance(grads[name], e, case.logical(g[f"expected_{name}"]), bf16, tol["rtol"], tol["atol"], name)
        except CaseFailure as err:
            return str(err)
        return None

    why = compare(call_grad(case, ins, g_out, None))
    if why is None:
        return "passed+grad"
    if case.op not in ("scatter_reduce", "index_reduce"):
        raise CaseFailure(f"gradient: {why}")
    why2 = compare(call_grad(case, ins, g_out, "pytorch"))
    if why2 is not None:
        raise CaseFailure(f"gradient: {why}; with parity='pytorch': {why2}")
    return "passed+grad(pytorch parity)"
