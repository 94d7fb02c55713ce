"""Derivatives of gather's ops along a direction (Jacobian-vector products), made of the ops
themselves, so that they can be differentiated again: forward mode, and the gradient of a
gradient.

Every op is piecewise linear in its data (``input``, ``src``, ``source``), except the products
(``reduce="prod"``, scatter's ``reduce="multiply"``):

- most ops are linear in their data taken together, a constant aside (scatter's scalar,
  ``index_fill``'s ``value``, ``fill_value``): the derivative along ``t`` is the op on ``t``,
  the constants zero;
- ``sort`` and ``topk`` select: their values' derivative is ``t`` at the forward's indices;
- the other reductions (amax, amin, prod, multiply) send each element to one output element:
  the derivative is ``t`` times the weights ``d out / d x`` (the gradient of an output of ones,
  which splits ties evenly, as the gradient does), summed into place by ``scatter_add`` or
  ``index_add``.

The gradient of a gradient follows: ``<grad(g, x), v> = <g, J(x) v>``, so the gradient with
respect to ``g`` is the derivative along ``v``, and with respect to ``x`` it is zero (selections
and weights are piecewise constant), except for the products (:func:`curved`), whose
Hessian-vector product :func:`curvature` gives.
"""

import gather as _ops  # the package's differentiable ops (imported after they are defined)

DATA = ("input", "src", "source", "dst")
# Reductions whose derivative is a weighted sum (the others are linear).
_WEIGHTED = {"amax", "amin", "prod", "multiply"}


def curved(values):
    """Whether the op's gradient depends on its data's values (its second derivative with
    respect to them is not zero): the products."""
    return values.get("reduce") in ("prod", "multiply")


def tangent(call, values, tangents, xp, run_grad, is_array):
    """``J(x) t`` of ``call``'s op at ``values`` (its bound arguments) along ``tangents`` (data
    name -> tangent; missing or None is zero). ``xp`` makes zeros and ones (torch, jax.numpy);
    ``run_grad(g, values)`` is the op's gradient by data name; ``is_array`` tells arrays apart.
    The result is the output's tangent (that of ``values`` for sort and topk)."""
    op = call["op"]
    data = [n for n in DATA if is_array(values.get(n))]
    t = {n: xp.zeros_like(values[n]) if tangents.get(n) is None else tangents[n] for n in data}
    reduce = values.get("reduce")
    if "plan" in call:
        return _plan_tangent(call["plan"], values, t, xp, run_grad)
    if op in ("sort", "topk"):
        _, indices = getattr(_ops, op)(**values)
        dim = values.get("dim", -1)
        return _ops.gather(t["input"], -1 if dim is Ellipsis else dim, indices)
    if reduce in _WEIGHTED:
        w = run_grad(xp.ones_like(values["input"]), values)
        out = w["input"] * t["input"]
        other = "src" if "src" in t else "source" if "source" in t else None
        if other is None:  # scatter's scalar form: only input has a derivative
            return out
        into = _ops.scatter_add if op.startswith("scatter") else _ops.index_add
        return into(out, values["dim"], values["index"], w[other] * t[other], bounds=values.get("bounds"))
    args = dict(values, **t)
    if op == "scatter" and not is_array(values.get("src")) and values.get("src") is not None:
        args["src"] = 0
    if values.get("value") is not None:  # scatter's value=, index_fill's value
        args["value"] = 0
    if values.get("fill_value") is not None:
        args["fill_value"] = 0
    return getattr(_ops, op)(**args)


def _plan_tangent(plan, values, t, xp, run_grad):
    """A ScatterPlan call's derivative: the plan applied to the tangents (sums, means), or
    their weighted sum."""
    reduce, include_self = values.get("reduce"), values.get("include_self", True)
    if reduce is None:
        return plan.scatter_add(t["dst"], t["src"])
    if reduce in ("sum", "mean"):
        return plan.scatter_reduce(t["dst"], t["src"], reduce, include_self=include_self)
    w = run_grad(xp.ones_like(values["dst"]), values)
    return plan.scatter_add(w["dst"] * t["dst"], w["src"] * t["src"])



def curvature(call, values, grad_output, along, xp, is_array):
    """``H v`` of a product: the Hessian of ``<grad_output, op(x)>`` in the data ``x`` (input and
    src or source together) times ``along`` (data name -> direction; missing or None is zero),
    by data name. It is the second-order part of the gradient's gradient (with respect to the
    data) and of the gradient's derivative along a direction (the Hessian is symmetric).

    Each output element is the product of its group (``self``, where it takes part, and the
    elements scattered to it). For a member ``m`` of a group with ``z`` zeros, ``Q`` the product
    of its other members that are not zero, and ``r_i = v_i / x_i``::

        z = 0:  (Hv)_m = g Q / x_m (sum_i r_i - r_m)          (sum over the group)
        z = 1:  (Hv)_m = g Q sum_i r_i          where x_m = 0 (sum over the non-zeros)
                (Hv)_m = g Q v_zero / x_m       elsewhere
        z = 2:  (Hv)_m = g Q v_other_zero       where x_m = 0, and 0 elsewhere
        z > 2:  0
    """
    group = _Groups(call, values, xp, is_array)
    x = {n: values[n] for n in group.data}
    v = {n: xp.zeros_like(x[n]) if along.get(n) is None else along[n] for n in group.data}
    zero = {n: x[n] == 0 for n in group.data}
    safe = {n: xp.where(zero[n], xp.ones_like(x[n]), x[n]) for n in group.data}

    def each(fn):
        return {n: fn(n) for n in group.data}

    z = group.total(each(lambda n: xp.where(zero[n], xp.ones_like(x[n]), xp.zeros_like(x[n]))), "sum")
    q = group.total(safe, "prod")
    r = group.total(each(lambda n: xp.where(zero[n], xp.zeros_like(x[n]), v[n] / safe[n])), "sum")
    vz = group.total(each(lambda n: xp.where(zero[n], v[n], xp.zeros_like(x[n]))), "sum")
    g, z, q, r, vz = (group.spread(a) for a in (grad_output, z, q, r, vz))
    out = {}
    for n in group.data:
        none = xp.zeros_like(x[n])
        gq = g[n] * q[n]
        no_zero = gq / safe[n] * (r[n] - v[n] / safe[n])
        one_zero = xp.where(zero[n], gq * r[n], gq * vz[n] / safe[n])
        two_zeros = xp.where(zero[n], gq * (vz[n] - v[n]), none)
        hv = xp.where(z[n] == 0, no_zero, xp.where(z[n] == 1, one_zero, xp.where(z[n] == 2, two_zeros, none)))
        out[n] = group.member(n, hv)
    return out


class _Groups:
    """The groups of a product's output: which elements of ``input`` and ``src`` (``source``,
    a plan's ``dst``) multiply into each output element."""

    def __init__(self, call, values, xp, is_array):
        self.xp, self.values = xp, values
        self.plan = call.get("plan")
        self.op = call["op"]
        self.own = "dst" if self.plan is not None else "input"
        other = [n for n in ("src", "source") if is_array(values.get(n))]
        self.other = other[0] if other else None
        self.data = [self.own] + other
        bounds = values.get("bounds")
        self.bounds = bounds
        self.read = {"bounds": "fill", "fill_value": 0} if bounds == "drop" else {"bounds": bounds}
        # With include_self=False `self` takes no part where others are reduced into it, and
        # elsewhere the output is `self` itself, whose curvature is zero: it never counts.
        self.without_self = not values.get("include_self", True) and self.other is not None

    def _into(self, own, other, reduce):
        """``own`` with ``other`` reduced into its groups (include_self)."""
        if self.plan is not None:
            return self.plan.scatter_add(own, other) if reduce == "sum" else \
                self.plan.scatter_reduce(own, other, reduce)
        v = self.values
        if self.op == "index_reduce":
            if reduce == "sum":
                return _ops.index_add(own, v["dim"], v["index"], other, bounds=self.bounds)
            return _ops.index_reduce(own, v["dim"], v["index"], other, reduce, bounds=self.bounds)
        if reduce == "sum":
            return _ops.scatter_add(own, v["dim"], v["index"], other, bounds=self.bounds)
        return _ops.scatter_reduce(own, v["dim"], v["index"], other, reduce, bounds=self.bounds)

    def total(self, per, reduce):
        """Each group's sum or product of ``per`` (data name -> per-element values)."""
        xp = self.xp
        own = per[self.own]
        if self.without_self:
            own = xp.zeros_like(own) if reduce == "sum" else xp.ones_like(own)
        return own if self.other is None else self._into(own, per[self.other], reduce)

    def spread(self, per_group):
        """A per-group array at every member's place (data name -> array)."""
        out = {self.own: per_group}
        if self.other is not None:
            v, shape = self.values, self.values[self.other].shape
            if self.plan is not None:
                out[self.other] = _ops.index_select(per_group, 0, self.plan._index)
            elif self.op == "index_reduce":
                out[self.other] = _ops.index_select(per_group, v["dim"], v["index"], **self.read)
            else:
                out[self.other] = _pad_to(self.xp, _ops.gather(per_group, v["dim"], v["index"], **self.read), shape)
        return out

    def member(self, name, hv):
        """``hv``, or zero for a ``self`` that takes no part."""
        return self.xp.zeros_like(hv) if name == self.own and self.without_self else hv


def _pad_to(xp, a, shape):
    """``a`` padded with zeros at the end of each axis to ``shape`` (src beyond index's extent
    takes no part in a scatter)."""
    widths = [(0, n - m) for n, m in zip(shape, a.shape)]
    if not any(w for _, w in widths):
        return a
    if hasattr(xp, "nn"):  # torch
        return xp.nn.functional.pad(a, [p for w in reversed(widths) for p in w])
    return xp.pad(a, widths)
