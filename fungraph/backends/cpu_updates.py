"""Weight updates folded into their matrix product on the CPU engine: ``w - c * (x.T @ g)``,
written in place over ``w``, runs as one BLAS call that adds the product to ``w``
(``fungraph._blas.gemm_update``, beta 1, alpha ``-c``).

Why: SGD's update of a weight matrix is otherwise a product into a buffer of its own and a
pass that reads it back and subtracts it from ``w`` (0.2-0.25 ms for the MLP's 784x1024 and
1024x1024 weights), and the learning rate the simplifier moved onto the product's smaller
factor is a pass of its own over that factor; folded, the BLAS call reads ``w`` as its
accumulator. A 784x1024 update took 4.43 ms of CPU time against 4.69-4.83 ms as product,
scale and subtraction (one thread, medians). XLA's CPU backend folds an addend into a product
the same way.

The pattern, on the optimised graph in its final order: ``p = dot_general(a, b)`` (2-d
operands, one contracted axis each) read only by the next equation, ``u = sub(w, p)`` or
``add``, which the plan writes in place over ``w`` (a donated weight) or into a graph output
of its own (then ``w`` is copied there first, as the subtraction would have read it); ``a`` or
``b`` may be ``mul(x, scalar)``
read only by the product, with ``x`` a graph input that is not donated or a constant (so
it is unchanged at the update's step). The product and the scale then run nothing at their
own steps; the update's step runs the BLAS call, or, where that call cannot be made on the
arrays of this call (another BLAS, an odd layout), the product and subtraction in numpy.
A product the engine starts early (``MemoryPlan.early``) is folded only when the engine runs
the equations in order (``cpu_overlap.worth_overlapping``): started early, its weight is still
read by the steps it runs beside.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import _blas
from fungraph.interpreters.memory import MemoryPlan
from fungraph.ir import Eqn, Graph, Literal, Var


@dataclass(frozen=True)
class Fold:
    """The update at one step: ``w + alpha * (lhs' @ rhs')``, where ``lhs'`` is ``lhs`` or
    its transpose as ``transposed`` says (the product's contracted axes)."""

    product: int
    scale: int | None
    weight: Var
    lhs: Var | Literal
    rhs: Var | Literal
    alpha: float
    transposed: tuple[bool, bool]


def _uses(graph: Graph) -> dict[Var, int]:
    counts: dict[Var, int] = {}
    for e in graph.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                counts[a] = counts.get(a, 0) + 1
    for a in graph.outvars:
        if isinstance(a, Var):
            counts[a] = counts.get(a, 0) + 1
    return counts


def _scalar(a: Any) -> float | None:
    return float(a.array) if isinstance(a, Literal) and np.ndim(a.array) == 0 else None


def _unchanging(graph: Graph, v: Any, donated: tuple[bool, ...]) -> bool:
    """Whether ``v`` is a constant or an input that is not donated (never written over)."""
    if v in graph.constvars:
        return True
    return any(v is x and not (i < len(donated) and donated[i]) for i, x in enumerate(graph.invars))


def _scaled(graph: Graph, producer: dict[Var, int], uses: dict[Var, int], operand: Any,
            donated: tuple[bool, ...]) -> tuple[int, Var, float] | None:
    """``(step, x, c)`` when ``operand`` is ``mul(x, c)`` read only by the product."""
    if not isinstance(operand, Var) or uses.get(operand) != 1 or operand not in producer:
        return None
    i = producer[operand]
    e = graph.eqns[i]
    if e.primitive.name != "mul" or len(e.inputs) != 2:
        return None
    for x, c in (e.inputs, e.inputs[::-1]):
        scale = _scalar(c)
        if scale is not None and isinstance(x, Var) and x.aval == operand.aval and _unchanging(graph, x, donated):
            return i, x, scale
    return None


def _fold_at(graph: Graph, plan: MemoryPlan, u: int, producer: dict[Var, int], uses: dict[Var, int],
             donated: tuple[bool, ...]) -> Fold | None:
    e = graph.eqns[u]
    if e.primitive.name not in ("sub", "add") or len(e.inputs) != 2 or u == 0:
        return None
    out = e.outputs[0]
    p_eqn: Eqn = graph.eqns[u - 1]
    if p_eqn.primitive.name != "dot_general":
        return None
    p = p_eqn.outputs[0]
    orders = [(0, 1)] if e.primitive.name == "sub" else [(0, 1), (1, 0)]
    for wi, pi in orders:
        w = e.inputs[wi]
        if e.inputs[pi] is not p or not isinstance(w, Var) or uses.get(p) != 1:
            continue
        place = plan.placements.get(out)
        if place is None or not (place.kind == "inplace" and place.origin is w or place.kind == "pinned"):
            continue
        if not (w.aval == p.aval == out.aval) or np.dtype(out.aval.dtype).char not in "fd":
            continue
        (lc, rc), (lb, rb) = p_eqn.params["dimension_numbers"]
        lhs, rhs = p_eqn.inputs
        if lb or rb or len(lc) != 1 or len(rc) != 1 or lhs.aval.ndim != 2 or rhs.aval.ndim != 2 or w in (lhs, rhs):
            continue
        alpha = -1.0 if e.primitive.name == "sub" else 1.0
        scale_step = None
        for k, operand in enumerate((lhs, rhs)):
            scaled = _scaled(graph, producer, uses, operand, donated)
            if scaled is not None and scale_step is None:
                scale_step, x, c = scaled
                alpha *= c
                lhs, rhs = (x, rhs) if k == 0 else (lhs, x)
        return Fold(u - 1, scale_step, w, lhs, rhs, alpha, (lc == (0,), rc == (1,)))
    return None


def update_folds(graph: Graph, plan: MemoryPlan, donated: tuple[bool, ...]) -> dict[int, Fold]:
    """The updates of ``graph`` folded into their products, by the update's step."""
    producer = {o: i for i, e in enumerate(graph.eqns) for o in e.outputs}
    uses = _uses(graph)
    folds = {}
    for u in range(len(graph.eqns)):
        fold = _fold_at(graph, plan, u, producer, uses, donated)
        if fold is not None:
            folds[u] = fold
    return folds


def skipped(out: Any, *_: Any, **__: Any) -> None:
    """The lowering of a step whose work a folded update does."""
    return None


def folded_update(alpha: float, transposed: tuple[bool, bool]) -> Callable[..., np.ndarray]:
    """The lowering of a folded update's step: ``out(w, lhs, rhs)``."""

    def run(out: np.ndarray, w: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        a = lhs.T if transposed[0] else lhs
        b = rhs.T if transposed[1] else rhs
        if np.may_share_memory(out, a) or np.may_share_memory(out, b):
            np.add(w, np.matmul(a, b) * out.dtype.type(alpha), out=out)
            return out
        if out is not w:
            np.copyto(out, w)
        if not _blas.gemm_update(out, a, b, alpha):
            out += np.matmul(a, b) * out.dtype.type(alpha)
        return out

    return run
