"""The CPU engine's lowering of ``fusion`` regions: stream the region's body through chunks of
rows small enough to stay in cache.

Every op of the chain runs on rows ``[i, i + k)`` of the chunk axis (the first axis longer
than 1) before the next chunk starts, so the
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

from fungraph._caches import on_clear
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.memory import MemoryPlan, plan_memory
from fungraph.interpreters.staging import stage
from fungraph.ir import Eqn, Graph, ShapedArray

CHUNK_BYTES = 256 * 1024


def region_shape(body: Graph) -> tuple[int, ...]:
    return body.outvars[0].aval.shape


def chunk_axis(body: Graph) -> int:
    """The axis chunks split: the first of the region's shape longer than 1 (axis 0 unless
    leading axes are 1, as a batch of one image is), or 0 when none is."""
    return next((k for k, d in enumerate(region_shape(body)) if d > 1), 0)


def chunk_rows(body: Graph) -> int:
    """Rows per chunk along :func:`chunk_axis` (all of them when it cannot be split, or when
    the region holds a reduction, whose rows are not the output's)."""
    shape = region_shape(body)
    k = chunk_axis(body)
    if len(shape) == 0 or shape[k] < 2 or not all(e.primitive.elementwise for e in body.eqns):
        return shape[k] if shape else 1
    itemsize = max(o.aval.dtype.itemsize for e in body.eqns for o in e.outputs)
    row_bytes = max(1, math.prod(shape[k + 1:]) * itemsize)
    return int(min(shape[k], max(1, CHUNK_BYTES // row_bytes)))


def _split(body: Graph) -> tuple[int | None, ...]:
    """For each input, its axis that chunks slice (the region's chunk axis, right-aligned as
    numpy broadcasts), or None when it is broadcast along that axis."""
    shape = region_shape(body)
    k = chunk_axis(body)
    out: list[int | None] = []
    for v in body.invars:
        j = k - (len(shape) - v.aval.ndim)
        ok = len(shape) > 0 and shape[k] > 1 and j >= 0 and v.aval.shape[j] == shape[k]
        out.append(j if ok else None)
    return tuple(out)


@functools.lru_cache(maxsize=512)
def _chunk_body(body: Graph, rows: int) -> tuple[Graph, MemoryPlan]:
    """The body restaged for ``rows`` rows, and its plan (with the CPU engine's scratch)."""
    # the CPU engine imports this module to lower its regions
    from fungraph.backends.cpu import scratch_bytes

    avals = [v.aval if j is None else ShapedArray(v.aval.shape[:j] + (rows,) + v.aval.shape[j + 1:], v.aval.dtype)
             for v, j in zip(body.invars, _split(body))]
    g, _ = stage(lambda *xs: eval_graph(body, *xs), avals)
    return g, plan_memory(g, scratch_bytes=scratch_bytes)


on_clear(_chunk_body.cache_clear)


def _chunk_plans(body: Graph) -> list[tuple[int, Graph, MemoryPlan]]:
    shape = region_shape(body)
    n = shape[chunk_axis(body)] if shape else 1
    rows = chunk_rows(body)
    sizes = {rows} | ({n % rows} if rows and n % rows else set())
    return [(k, *_chunk_body(body, k)) for k in sorted(sizes, reverse=True)]


def fusion_scratch_bytes(eqn: Eqn) -> int:
    """The block a region needs: the arena of its chunk-sized body (the tail chunk's is smaller);
    never 0, so the engine always binds the chunked lowering."""
    return max(64, *(plan.arena_bytes for _, _, plan in _chunk_plans(eqn.params["call"])))


def lower_fusion(eqn: Eqn, block: np.ndarray) -> Callable[..., Any]:
    # the CPU engine imports this module to lower its regions
    from fungraph.backends.cpu import CpuExecutable

    body = eqn.params["call"]
    exes = {k: CpuExecutable(g, plan, arena=block) for k, g, plan in _chunk_plans(body)}
    split = _split(body)
    shape = region_shape(body)
    axis = chunk_axis(body)
    n = shape[axis] if shape else 1
    rows = max(exes)
    if rows >= n:
        exe = exes[rows]

        def run_whole(outs: list[np.ndarray], *ins: Any, **_: Any) -> list[np.ndarray]:
            return exe.run(list(ins), into=outs)

        return run_whole

    def run(outs: list[np.ndarray], *ins: Any, **_: Any) -> Sequence[np.ndarray]:
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            part = slice(start, stop)
            args = [x if j is None else x[(slice(None),) * j + (part,)] for x, j in zip(ins, split)]
            exes[stop - start].run(args, into=[o[(slice(None),) * axis + (part,)] for o in outs])
        return outs

    return run
