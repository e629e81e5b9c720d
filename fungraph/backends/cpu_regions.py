"""The CPU engine's lowering of ``fusion`` regions: stream the region's body through chunks of
rows small enough to stay in cache.

Every op of the chain runs on rows ``[i, i + k)`` before the next chunk starts, so the
region's intermediates live in a chunk-sized block of the parent's scratch (planned like any
body) and its inputs and outputs cross main memory once. ``k`` is chosen so one chunk of the
widest value in the body is about :data:`CHUNK_BYTES`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.memory import MemoryPlan, plan_memory
from fungraph.interpreters.staging import stage
from fungraph.ir import Eqn, Graph, ShapedArray

CHUNK_BYTES = 256 * 1024


def region_shape(body: Graph) -> tuple[int, ...]:
    return body.outvars[0].aval.shape


def chunk_rows(body: Graph) -> int:
    """Rows per chunk along axis 0 of the region's shape (all rows when it cannot be split)."""
    shape = region_shape(body)
    if len(shape) == 0 or shape[0] < 2:
        return shape[0] if shape else 1
    itemsize = max(o.aval.dtype.itemsize for e in body.eqns for o in e.outputs)
    row_bytes = max(1, math.prod(shape[1:]) * itemsize)
    return int(min(shape[0], max(1, CHUNK_BYTES // row_bytes)))


def _split(body: Graph) -> tuple[bool, ...]:
    """Which inputs are sliced per chunk: those that span axis 0 of the region's shape."""
    shape = region_shape(body)
    return tuple(len(shape) > 0 and shape[0] > 1 and v.aval.ndim == len(shape) and v.aval.shape[0] == shape[0]
                 for v in body.invars)


@functools.lru_cache(maxsize=512)
def _chunk_body(body: Graph, rows: int) -> tuple[Graph, MemoryPlan]:
    """The body restaged for ``rows`` rows, and its plan."""
    avals = [ShapedArray((rows,) + v.aval.shape[1:], v.aval.dtype) if s else v.aval
             for v, s in zip(body.invars, _split(body))]
    g, _ = stage(lambda *xs: eval_graph(body, *xs), avals)
    return g, plan_memory(g)


def _chunk_plans(body: Graph) -> list[tuple[int, Graph, MemoryPlan]]:
    n = region_shape(body)[0] if region_shape(body) else 1
    rows = chunk_rows(body)
    sizes = {rows} | ({n % rows} if n % rows else set())
    return [(k, *_chunk_body(body, k)) for k in sorted(sizes, reverse=True)]


def fusion_scratch_bytes(eqn: Eqn) -> int:
    """The block a region needs: the arena of its chunk-sized body (the tail chunk's is smaller);
    never 0, so the engine always binds the chunked lowering."""
    return max(64, *(plan.arena_bytes for _, _, plan in _chunk_plans(eqn.params["call"])))


def lower_fusion(eqn: Eqn, block: np.ndarray) -> Callable[..., Any]:
    from fungraph.backends.cpu import CpuExecutable

    body = eqn.params["call"]
    exes = {k: CpuExecutable(g, plan, arena=block) for k, g, plan in _chunk_plans(body)}
    split = _split(body)
    shape = region_shape(body)
    n = shape[0] if shape else 1
    rows = max(exes)
    if rows >= n:
        exe = exes[rows]

        def run_whole(outs: list[np.ndarray], *ins: Any, **_: Any) -> list[np.ndarray]:
            return exe.run(list(ins), into=outs)

        return run_whole

    def run(outs: list[np.ndarray], *ins: Any, **_: Any) -> Sequence[np.ndarray]:
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            args = [x[start:stop] if s else x for x, s in zip(ins, split)]
            exes[stop - start].run(args, into=[o[start:stop] for o in outs])
        return outs

    return run
