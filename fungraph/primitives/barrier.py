"""``optimization_barrier``: its operands unchanged, in an equation CSE never merges, so a
value computed from the barrier's outputs is never merged with the same computation from its
inputs. ``checkpoint`` fences its recomputation with it; ``strip_barriers`` removes it after
CSE, so engines never run it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.core import Primitive
from fungraph.ir import ShapedArray


def _impl(*xs: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in xs]


def _aval(*avals: ShapedArray) -> tuple[ShapedArray, ...]:
    return avals


optimization_barrier_p = Primitive("optimization_barrier", impl=_impl, abstract_eval=_aval,
                                   multiple_results=True, mergeable=False)


def optimization_barrier(xs: Sequence[Any]) -> list[Any]:
    """The arrays ``xs`` unchanged, behind one barrier equation."""
    return list(optimization_barrier_p.bind(*xs)) if xs else []


@optimization_barrier_p.def_jvp
def _jvp(primals: tuple, tangents: tuple) -> tuple:
    return optimization_barrier(primals), list(tangents)


@optimization_barrier_p.def_transpose
def _transpose(cts: Sequence[Any], *xs: Any) -> tuple:
    return tuple(cts)


@optimization_barrier_p.def_batch
def _batch(args: Sequence[Any], dims: Sequence[int | None]) -> tuple:
    return optimization_barrier(args), list(dims)
