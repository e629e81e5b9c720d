"""``jax.experimental.jet``: Taylor-mode derivatives with JAX's conventions.

``jet(f, primals, series)`` pushes the curve ``x(t) = x0 + x1 t + x2 t^2/2! + ...`` through
``f`` and returns ``g(0)`` and ``g'(0), g''(0), ...`` of ``g(t) = f(x(t))``. fungraph computes
them by forward mode nested in the scalar ``t``: order ``K`` evaluates ``K`` nested ``jvp``s of
``g``, about ``2^K`` times the cost of ``f`` (JAX's dedicated Taylor rules cost ``O(K^2)``), so it
is meant for the low orders (up to about 5) that programs ask of it. The results are exact
derivatives (no finite differences), so they agree with JAX's to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.api import jvp
from fungraph.numpy import asarray, result_type
from fungraph.tree_util import tree_flatten, tree_structure, tree_unflatten

__all__ = ["jet", "jet2"]


def jet(fun: Callable[..., Any], primals: Sequence[Any], series: Sequence[Sequence[Any]],
        factorial_scaled: bool = True) -> tuple[Any, Any]:
    """``(fun(*primals), series_out)``: the Taylor coefficients of ``fun`` along the curve that
    ``primals`` and ``series`` define. Term ``k`` (from 0) of ``series[i]`` is the derivative of
    order ``k + 1`` of argument ``i``'s curve at ``t = 0``, and ``series_out`` holds the same of
    ``fun``'s output (with ``factorial_scaled=False``: plain Taylor coefficients, divided by
    ``(k + 1)!``). Every argument needs the same number of terms."""
    primals, series = _checked(primals, series)
    order = len(series[0]) if series else 0
    if not factorial_scaled:
        series = [[t * math.factorial(k + 1) for k, t in enumerate(ts)] for ts in series]
    t_dtype = _curve_dtype(primals)

    def g(t: Any) -> list[Any]:
        args = [_curve(x0, xs, t) for x0, xs in zip(primals, series)]
        leaves, tree = tree_flatten(fun(*args))
        out_tree.append(tree)
        return leaves

    out_tree: list[Any] = []
    derivatives = _derivatives(g, order)(asarray(0, t_dtype))
    tree = out_tree[-1]
    primal_out = derivatives[0]
    terms = [[d[j] for d in derivatives[1:]] for j in range(len(primal_out))]
    if not factorial_scaled:
        terms = [[t / math.factorial(k + 1) for k, t in enumerate(ts)] for ts in terms]
    return tree_unflatten(tree, primal_out), tree_unflatten(tree, terms)


def jet2(fun: Callable[..., Any], primals: Sequence[Any], series: Sequence[Sequence[Any]]) -> tuple[Any, Any]:
    """:func:`jet` on plain Taylor coefficients (``factorial_scaled=False``), as JAX's ``jet2``."""
    return jet(fun, primals, series, factorial_scaled=False)


def _checked(primals: Sequence[Any], series: Sequence[Sequence[Any]]) -> tuple[list[Any], list[list[Any]]]:
    if len({len(s) for s in series}) > 1:
        raise ValueError("jet terms have inconsistent lengths for different arguments")
    if len(primals) != len(series):
        raise ValueError(f"jet: {len(primals)} primals but {len(series)} series")
    for i, (x, terms) in enumerate(zip(primals, series)):
        if tree_structure(x).num_leaves != 1 or not tree_structure(x).num_nodes == 1:
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not tree_structure(t).num_nodes == 1:
                raise ValueError(f"term {j} for argument {i} is not an array")
            if np.shape(t) != np.shape(x):
                raise ValueError(f"jet: term {j} for argument {i} has shape {np.shape(t)}, but the primal has "
                                 f"shape {np.shape(x)}")
    return [asarray(x) for x in primals], [[asarray(t) for t in ts] for ts in series]


def _curve_dtype(primals: Sequence[Any]) -> Any:
    """The dtype of the curve parameter ``t``: the arguments' floating type."""
    dt = result_type(*primals) if primals else dtypes.canonicalize(np.float64)
    return dt if dtypes.is_float(dt) or dtypes.is_complex(dt) else dtypes.canonicalize(np.float64)


def _curve(x0: Any, terms: Sequence[Any], t: Any) -> Any:
    """``x0 + sum_k terms[k] t^(k+1) / (k+1)!``: the argument's curve, exact in its derivatives at 0."""
    x = x0
    for k, term in enumerate(terms):
        x = x + term * (t ** (k + 1) / math.factorial(k + 1)).astype(term.dtype)
    return x


def _derivatives(g: Callable[[Any], list[Any]], order: int) -> Callable[[Any], list[list[Any]]]:
    """A function of ``t`` giving ``[g(t), g'(t), ..., g^(order)(t)]`` (each a list of leaves),
    by one ``jvp`` in ``t`` per order on top of the lower orders."""
    if order == 0:
        return lambda t: [g(t)]
    lower = _derivatives(g, order - 1)

    def all_orders(t: Any) -> list[list[Any]]:
        values, tangents = jvp(lower, (t,), (asarray(1, t.dtype),))
        return [*values, tangents[-1]]

    return all_orders
