"""Vector arithmetic on pytrees of arrays for the Krylov solvers: inner products, norms,
scaled sums, and the operator (a matrix or a function) as a matvec."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.tree_util import tree_leaves, tree_map, tree_structure


def vdot_real(x: Any, y: Any) -> Any:
    """The real part of ``<x, y>`` summed over the leaves of two pytrees."""
    def one(a: Any, b: Any) -> Any:
        out = fnp.vdot(fnp.real(a), fnp.real(b))
        if fnp.iscomplexobj(a) or fnp.iscomplexobj(b):
            out = out + fnp.vdot(fnp.imag(a), fnp.imag(b))
        return out

    return sum(tree_leaves(tree_map(one, x, y)))


def vdot(x: Any, y: Any) -> Any:
    """``<x, y>`` (``x`` conjugated) summed over the leaves of two pytrees."""
    return sum(tree_leaves(tree_map(fnp.vdot, x, y)))


def norm(x: Any) -> Any:
    return fnp.sqrt(vdot_real(x, x))


def scale(scalar: Any, tree: Any) -> Any:
    return tree_map(lambda leaf: scalar * leaf, tree)


def add(x: Any, y: Any) -> Any:
    return tree_map(operator.add, x, y)


def sub(x: Any, y: Any) -> Any:
    return tree_map(operator.sub, x, y)


def identity(x: Any) -> Any:
    return x


def as_matvec(A: Any) -> Callable[[Any], Any]:  # noqa: N803
    """``A`` as a function: itself when callable, else the product with the square matrix ``A``."""
    if callable(A):
        return A
    if isinstance(A, np.ndarray) or (hasattr(A, "__matmul__") and hasattr(A, "shape")):
        if len(A.shape) != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: {A.shape}")
        return lambda x: fnp.dot(A, x)
    raise TypeError(f"linear operator must be either a function or ndarray: {A}")


def shapes(tree: Any) -> list[tuple[int, ...]]:
    return [tuple(fnp.shape(leaf)) for leaf in tree_leaves(tree)]


def check_start(x0: Any, b: Any) -> None:
    """The starting guess must have ``b``'s structure and shapes."""
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs {tree_structure(b)}")
    if shapes(x0) != shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: {shapes(x0)} vs {shapes(b)}")
