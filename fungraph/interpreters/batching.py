"""Batching (vmap) as a trace: each tracer carries a value and the position of its batch axis.

Every primitive has a batching rule beside it that maps the whole batch at once; none loops
over examples in Python (pure_callback calls the host function per example, on the host).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fungraph.core import Primitive, Trace, Tracer, full_raise, new_main
from fungraph.ir import Params, ShapedArray, aval_of


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    def __init__(self, trace: BatchTrace, val: Any, bdim: int | None) -> None:
        self._trace = trace
        self.val = val
        self.bdim = bdim

    @property
    def aval(self) -> ShapedArray:
        a = aval_of(self.val)
        if self.bdim is None:
            return a
        return ShapedArray(a.shape[:self.bdim] + a.shape[self.bdim + 1:], a.dtype)

    def full_lower(self) -> Any:
        return self.val if self.bdim is None else self


class BatchTrace(Trace):
    def pure(self, val: Any) -> BatchTracer:
        return BatchTracer(self, val, None)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> list[BatchTracer]:
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        if all(d is None for d in dims):
            out = prim.bind(*vals, **params.kwargs())
            outs = out if prim.multiple_results else (out,)
            return [BatchTracer(self, o, None) for o in outs]
        out, out_dims = prim.rule("batch")(vals, dims, **params.kwargs())
        if not prim.multiple_results:
            out, out_dims = (out,), (out_dims,)
        return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]


def vmap_flat(fun: Callable[..., Sequence[Any]], args: Sequence[Any], in_dims: Sequence[int | None],
              out_dims: Sequence[int | None] | Callable[[list[Any]], Sequence[int | None]], size: int) -> list[Any]:
    """Map ``fun`` over axis ``in_dims[i]`` of each argument; outputs get axis ``out_dims[j]``
    (``out_dims`` may be a function of the outputs, for specs that follow their structure)."""
    from fungraph.primitives._batching import broadcast_batch
    from fungraph.primitives.shape import transpose

    with new_main(BatchTrace, size) as main:
        trace = BatchTrace(main)
        tracers = [BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
        raw = list(fun(*tracers))
        outs = [full_raise(trace, o) for o in raw]
        dims = out_dims(raw) if callable(out_dims) else out_dims
        results = []
        for o, od in zip(outs, dims):
            val, bd = o.val, o.bdim
            if od is None:
                if bd is not None:
                    raise ValueError("vmap: out_axes is None for an output that depends on the mapped axis")
                results.append(val)
                continue
            front = broadcast_batch(val, bd, size)
            nd = aval_of(front).ndim
            od = od % nd
            perm = tuple(range(1, od + 1)) + (0,) + tuple(range(od + 1, nd))
            results.append(transpose(front, perm))
    return results
