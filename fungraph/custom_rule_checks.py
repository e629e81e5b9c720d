"""Checks of what users' ``custom_jvp`` and ``custom_vjp`` rules return, as JAX makes them: the
container structure, and each leaf's shape and dtype against the type the transformation
expects. A wrong rule output otherwise surfaces later as a broadcast, a partly zero gradient or
an internal error far from the rule that caused it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.dtypes import float0
from fungraph.ir import ShapedArray, aval_of
from fungraph.tree_util import PyTreeDef, tree_flatten, tree_map


def is_float0(x: Any) -> bool:
    return getattr(x, "dtype", None) == float0


def type_str(x: Any) -> str:
    """``f32[3]``-style text of a leaf (``float0[3]`` for float0 arrays)."""
    if is_float0(x):
        return f"float0[{','.join(map(str, np.shape(x)))}]"
    return str(aval_of(x))


def tangent_type_str(a: ShapedArray) -> str:
    """The type a tangent of a value of type ``a`` must have."""
    return str(a) if dtypes.is_inexact(a.dtype) else f"float0[{','.join(map(str, a.shape))}]"


def float0_zeros(a: ShapedArray) -> np.ndarray:
    return np.zeros(a.shape, float0)


def _is_python_scalar(x: Any) -> bool:
    return isinstance(x, (int, float, complex)) and not isinstance(x, bool)


# --- custom_jvp ---------------------------------------------------------------------------------


def jvp_pair(out: Any, rule: str, fun: str) -> tuple[Any, Any]:
    if not isinstance(out, (list, tuple)) or len(out) != 2:
        raise TypeError(f"Custom JVP rule {rule} for function {fun} must produce a pair (list or tuple of length "
                        f"two) representing primal and tangent outputs, but got {out!r}.")
    return out[0], out[1]


def check_rule_primals(what: str, fun: str, out_tree: PyTreeDef, outs: Sequence[Any],
                       expected_tree: PyTreeDef, expected: Sequence[ShapedArray]) -> None:
    """A rule's primal output (``what``: "Custom JVP rule f", "Custom VJP fwd rule f") must have
    the structure and types of the function's output."""
    if out_tree != expected_tree:
        raise TypeError(f"{what} for function {fun} must produce a primal output with the "
                        f"container (pytree) structure of {fun}'s output, {expected_tree}, but got {out_tree}.")
    got = [aval_of(o) for o in outs]
    if any(g != e for g, e in zip(got, expected)):
        raise TypeError(f"{what} for function {fun} must produce a primal output with the "
                        f"shapes/dtypes of {fun}'s output, {[str(e) for e in expected]}, but got "
                        f"{[str(g) for g in got]}.")


def checked_tangents(rule: str, fun: str, outs: Sequence[Any], tangents: Sequence[Any]) -> list[Any]:
    """Each tangent checked against its primal output's tangent type (the primal's own type for
    inexact values, float0 for integer and boolean ones). Python scalars take the primal's dtype,
    as JAX's weak types do; float0 tangents become zeros of the primal's type (dropped later)."""
    result = []
    bad = []
    for p, t in zip(outs, tangents):
        a = aval_of(p)
        if not dtypes.is_inexact(a.dtype):
            if not is_float0(t) or np.shape(t) != a.shape:
                bad.append((a, t))
            result.append(np.zeros(a.shape, a.dtype))
            continue
        if _is_python_scalar(t) and a.shape == ():
            t = np.asarray(t, a.dtype)
        if is_float0(t) or aval_of(t) != a:
            bad.append((a, t))
        result.append(t)
    if bad:
        what = "; ".join(f"expected {tangent_type_str(a)} (tangent type of {a}) but got {type_str(t)}"
                         for a, t in bad)
        raise TypeError(f"Custom JVP rule {rule} for function {fun} must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes: {what}.")
    return result


# --- custom_vjp ---------------------------------------------------------------------------------


def fwd_pair(out: Any, rule: str, fun: str) -> tuple[Any, Any]:
    if not isinstance(out, (list, tuple)) or len(out) != 2:
        raise TypeError(f"Custom VJP fwd rule {rule} for function {fun} must produce a pair (list or tuple of "
                        f"length two) where the first element represents the primal output and the second the "
                        f"residuals, but got {out!r}.")
    return out[0], out[1]


def bwd_cotangents(rule: str, fun: str, out: Any, in_tree: PyTreeDef,
                   in_avals: Sequence[ShapedArray]) -> list[Any]:
    """The flat cotangents of a bwd rule's output: one entry per input leaf, None for a zero
    (a ``None`` in place of an argument or of any subtree of one, or an integer input).
    Inexact cotangents must have their input's shape; their dtype becomes the input's."""
    if isinstance(out, list) and len(out) == len(in_tree.children):
        out = tuple(out)
    zero = object()
    dummy = in_tree.unflatten([object()] * in_tree.num_leaves)
    flat: list[Any] = []

    def append(x: Any, d: Any) -> None:
        n = len(tree_flatten(d)[0])
        flat.extend([zero if x is None else x] * n)

    try:
        if not isinstance(out, tuple):
            raise ValueError
        tree_map(append, out, dummy, is_leaf=lambda x: x is None)
    except (ValueError, TypeError):
        raise TypeError(f"Custom VJP bwd rule {rule} for function {fun} must produce an output with the same "
                        f"container (pytree) structure as the args tuple of the primal function, and in particular "
                        f"a tuple with one entry per argument ({len(in_tree.children)}), but got bwd output "
                        f"structure {tree_flatten(out)[1]} for primal input structure {in_tree}.") from None
    result: list[Any] = []
    for i, (a, ct) in enumerate(zip(in_avals, flat)):
        if ct is zero or not dtypes.is_inexact(a.dtype):
            result.append(None)
            continue
        got = np.shape(ct) if is_float0(ct) else aval_of(ct).shape
        if got != a.shape or is_float0(ct):
            raise ValueError(f"Custom VJP bwd rule {rule} for function {fun} must produce an output with the same "
                             f"type as the args tuple of the primal function, but at input leaf {i} it produced "
                             f"an output of type {type_str(ct)} for an input of type {a}.")
        result.append(ct)
    return result
