"""What the native engine's two generators of reducing regions share (:mod:`.reductions`,
row by row; :mod:`.columns`, column by column): the reductions a region may hold, their
accumulators' start values and integer types, and the region's placeholder name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fungraph.backends.native.codegen import C_TYPES, literal
from fungraph.ir import Eqn, Graph

#: The reductions a region may hold, by primitive name.
REDUCERS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})

#: Members that only move row (or column) values into keep-dims form.
MOVES = frozenset({"reshape", "broadcast_in_dim"})
#: The function name a generated source carries until the caller names it.
NAME = "FG_REDUCTION_REGION"


def reducible(e: Eqn) -> bool:
    """Whether the generator can compute reduction ``e`` in a region (its dtype a C type; a
    bool sum is numpy's ``or`` and is left out)."""
    if e.primitive.name not in REDUCERS:
        return False
    dt = np.dtype(e.inputs[0].aval.dtype)
    return dt in C_TYPES and not (dt.kind == "b" and e.primitive.name == "reduce_sum")


def has_reduction(body: Graph) -> bool:
    return any(e.primitive.name in REDUCERS for e in body.eqns)


class Unsupported(Exception):
    """The body is outside what the generator expresses."""


def contiguous(extents: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(extents):
        strides.append(step)
        step *= d
    return strides[::-1]


def wide_sum(dt: np.dtype) -> str:
    return "uint64_t" if dt.itemsize == 8 else "uint32_t"


def identity(dt: np.dtype, sign: str) -> str:
    """The start of a max (``sign="max"``) or min accumulator of ``dt``."""
    if dt.kind == "f":
        value = -np.inf if sign == "max" else np.inf
    elif dt.kind == "b":
        value = sign != "max"
    else:
        value = np.iinfo(dt).min if sign == "max" else np.iinfo(dt).max
    return literal(np.asarray(value, dt))
