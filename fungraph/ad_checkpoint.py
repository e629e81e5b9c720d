"""``jax.ad_checkpoint``: ``checkpoint`` with its policies, ``checkpoint_name``, and
``saved_residuals``/``print_saved_residuals``, which list what the backward pass of a
function keeps from its forward pass (the memory a policy trades against recomputation)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fungraph import checkpoint_policies
from fungraph.checkpoint_policies import Offloadable, Recompute, Saveable
from fungraph.custom_derivatives import checkpoint, remat
from fungraph.ir import Graph, Literal, ShapedArray, Var
from fungraph.primitives.names import checkpoint_name

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name", "checkpoint_policies",
           "print_saved_residuals", "remat", "saved_residuals"]


def _arg_names(f: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> list[str]:
    """A name per flattened leaf of ``(args, kwargs)``: the parameter's name and the leaf's path."""
    from fungraph.tree_util import keystr, tree_flatten_with_path

    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"args[{i}]"
        names += [base + keystr(p) for p, _ in tree_flatten_with_path(a)[0]]
    for k in sorted(kwargs):
        names += [k + keystr(p) for p, _ in tree_flatten_with_path(kwargs[k])[0]]
    return names


def _origin(v: Var, graph: Graph) -> str:
    """Where ``v`` comes from in ``graph``: the equation that computes it, looking through
    labels and into the calls (``checkpoint``, nested ``jit``) that return it."""
    for e in graph.eqns:
        if v not in e.outputs:
            continue
        if e.primitive.name == "checkpoint_name":
            return f"named '{e.params['name']}' from {e.source}"
        if e.primitive.name == "remat_saved" and isinstance(e.inputs[0], Var):
            return _origin(e.inputs[0], graph)
        if e.primitive.name in ("remat", "jit_call"):
            inner = e.params["call"]
            out = inner.outvars[e.outputs.index(v)]
            if isinstance(out, Var) and out not in inner.invars:
                return _origin(out, inner)
            if e.primitive.name == "jit_call":
                return f"output of jitted function '{e.params['name']}' from {e.source}"
        return f"output of {e.primitive.name} from {e.source}"
    return "from a constant"


def saved_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[ShapedArray, str]]:
    """The values ``vjp(f, *args, **kwargs)`` keeps for the backward pass, each as ``(aval,
    where it comes from)``: an argument, a constant, or an equation's output with its source
    line (named if ``checkpoint_name`` labelled it)."""
    from fungraph.api import _linearize
    from fungraph.tree_util import tree_flatten

    leaves, _ = tree_flatten((args, kwargs))
    _, _, lin, _, _, _, _, _, _ = _linearize(lambda a, k: f(*a, **k), (args, kwargs), "saved_residuals",
                                         staged=True)
    known = lin.known
    names = _arg_names(f, args, kwargs)
    args_in = known.invars[:len(leaves)]
    out = []
    for r in known.outvars[len(known.outvars) - lin.num_residuals:]:
        if isinstance(r, Literal):
            out.append((r.aval, "from a literal"))
        elif r in args_in:
            out.append((r.aval, f"from the argument {names[args_in.index(r)]}"))
        else:
            out.append((r.aval, _origin(r, known)))
    return out


def print_saved_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Print :func:`saved_residuals`, one residual per line."""
    for a, where in saved_residuals(f, *args, **kwargs):
        print(f"{a} {where}")
