"""Batching (vmap) as a trace: each tracer carries a value and the position of its batch axis.

Every primitive has a batching rule beside it that maps the whole batch at once; none loops
over examples in Python (pure_callback calls the host function per example, on the host).

A ``vmap`` may name its axis (``axis_name``): the active vmaps form the axis environment,
innermost last, and collectives (``fungraph.primitives.collectives``) find the trace of the
axis they name there, whatever trace their operands belong to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import (
    MainTrace,
    Primitive,
    RuleTable,
    Trace,
    Tracer,
    find_top_trace,
    full_lower,
    full_raise,
    new_main,
    user_source,
    weakened,
)
from fungraph.ir import Params, ShapedArray, aval_of
from fungraph.primitives._batching import broadcast_batch
from fungraph.primitives._rules import register_transform
from fungraph.primitives.elementwise import weak
from fungraph.primitives.shape import transpose


@dataclass(frozen=True)
class AxisFrame:
    """The axis a batch trace maps: its size, the name collectives refer to it by, and the
    trace whose batched values it takes as its own (``vmap_flat``'s ``adopt``)."""

    size: int
    name: Hashable | None
    adopts: MainTrace | None = None


class _AxisEnv(threading.local):
    """Per thread: the mains of the active vmaps (innermost last), and the frames whose
    batching rules are running (innermost last; None while a mapped function runs)."""

    def __init__(self) -> None:
        self.mains: list[MainTrace] = []
        self.rules: list[AxisFrame | None] = [None]


_ENV = _AxisEnv()


@contextmanager
def _running(frame: AxisFrame | None) -> Iterator[None]:
    _ENV.rules.append(frame)
    try:
        yield
    finally:
        _ENV.rules.pop()


def rule_frame() -> AxisFrame:
    """The axis whose batching rule is running: what a collective's rule reduces over."""
    frame = _ENV.rules[-1]
    if frame is None:
        raise RuntimeError("rule_frame() called outside a batching rule")
    return frame


def batching_axis_name() -> Hashable | None:
    """The name of the axis whose batching rule is running (None outside rules or for an
    unnamed vmap). A rule that maps a sub-graph keeps it, so a cache of batched sub-graphs
    must key on it: the sub-graph's collectives over this name become reductions."""
    frame = _ENV.rules[-1]
    return None if frame is None else frame.name


def axis_main(name: Hashable) -> MainTrace:
    """The innermost vmap that binds ``name``, or an error naming the user's source line."""
    for main in reversed(_ENV.mains):
        if main.global_data.name == name:
            return main
    bound = [m.global_data.name for m in _ENV.mains if m.global_data.name is not None]
    if not _ENV.mains:
        where = "outside any vmap"
    elif not bound:
        where = "inside vmaps that name no axis"
    else:
        where = "inside vmaps that bind " + ", ".join(repr(n) for n in bound)
    src = user_source()
    raise NameError(f"unbound axis name {name!r}: a collective over it was called {where}; bind it with "
                    f"vmap(..., axis_name={name!r})" + (f"\n  at {src}" if src else ""))


def is_vmap_axis(name: Hashable) -> bool:
    """Whether an active vmap binds ``name`` (else a collective over it may name a mesh axis)."""
    return any(m.global_data.name == name for m in _ENV.mains)


def axis_frame(name: Hashable) -> AxisFrame:
    return axis_main(name).global_data


class NamedAxisPrimitive(Primitive):
    """A collective: a primitive with an ``axis_name`` parameter. It is bound at the innermost
    of its operands' traces and the trace of its axis, so that a collective over an outer
    axis, or of a value that does not depend on the axis, still reaches that axis's trace."""

    def bind(self, *args: Any, **params: Any) -> Any:
        named = axis_main(params["axis_name"])
        levels = [a._trace.main.level for a in args if isinstance(a, Tracer)]
        main = named if named.level >= max(levels, default=-1) else find_top_trace(args).main
        trace = main.trace_type(main)
        tracers = [full_raise(trace, a) for a in args]
        outs = [full_lower(o) for o in trace.process_primitive(self, tracers, Params(params))]
        return tuple(outs) if self.multiple_results else outs[0]


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

    def lift(self, val: Any) -> BatchTracer:
        """A value of an outer trace: unbatched, or, from the trace this one adopts, batched as it is."""
        adopts = self.main.global_data.adopts
        if adopts is None or not isinstance(val, BatchTracer) or val._trace.main is not adopts:
            return BatchTracer(self, val, None)
        out = BatchTracer(self, val.val, val.bdim)
        return weakened(out) if dtypes.is_weak(val) else out

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> list[BatchTracer]:
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        frame = self.main.global_data
        names_me = isinstance(prim, NamedAxisPrimitive) and params["axis_name"] == frame.name
        if all(d is None for d in dims) and not names_me:
            out = prim.bind(*vals, **params.kwargs())
            outs = out if prim.multiple_results else (out,)
            return [BatchTracer(self, o, None) for o in outs]
        with _running(frame):
            out, out_dims = prim.rule("batch")(vals, dims, **params.kwargs())
        if not prim.multiple_results:
            out, out_dims = (out,), (out_dims,)
        return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]


_INHERIT: Any = object()


def vmap_flat(fun: Callable[..., Sequence[Any]], args: Sequence[Any], in_dims: Sequence[int | None],
              out_dims: Sequence[int | None] | Callable[[list[Any]], Sequence[int | None]], size: int,
              axis_name: Hashable | None = _INHERIT, adopt: MainTrace | None = None) -> list[Any]:
    """Map ``fun`` over axis ``in_dims[i]`` of each argument; outputs get axis ``out_dims[j]``
    (``out_dims`` may be a function of the outputs, for specs that follow their structure).

    ``axis_name`` names the axis for collectives; by default a batching rule that maps a
    sub-graph over its batch keeps the name of the axis it is batching. ``adopt``, a batch
    trace over the same axis, makes the values of that trace which ``fun`` closes over batched
    values of this map (JAX's batch subtrace with its parent's tag): how a ``custom_jvp``
    function and its rule, closing over values a ``vmap`` batches, are mapped together.
    """
    if axis_name is _INHERIT:
        axis_name = batching_axis_name()
    with new_main(BatchTrace, AxisFrame(size, axis_name, adopt)) as main:
        _ENV.mains.append(main)
        try:
            with _running(None):
                trace = BatchTrace(main)
                tracers = [weakened(BatchTracer(trace, a, d)) if dtypes.is_weak(a) else BatchTracer(trace, a, d)
                           for a, d in zip(args, in_dims)]
                raw = list(fun(*tracers))
        finally:
            _ENV.mains.pop()
        outs = [full_raise(trace, o) for o in raw]
        dims = out_dims(raw) if callable(out_dims) else out_dims
        results = []
        for o, od in zip(outs, dims):
            val, bd = o.val, o.bdim
            if dtypes.is_weak(o):
                val = weak(val)
            if od is None:
                if bd is not None:
                    raise ValueError("vmap: out_axes is None for an output that depends on the mapped axis")
                results.append(val)
                continue
            front = broadcast_batch(val, bd, size)
            nd = aval_of(front).ndim
            if isinstance(od, bool) or not isinstance(od, (int, np.integer)):
                raise TypeError(f"vmap out_axes must be an int or None, got {od!r}")
            if not -nd <= od < nd:
                raise ValueError(f"vmap out_axes {od} is out of bounds for an output of rank {nd} "
                                 f"(shape {aval_of(front).shape}, the mapped axis included)")
            od = od % nd
            perm = tuple(range(1, od + 1)) + (0,) + tuple(range(od + 1, nd))
            results.append(transpose(front, perm))
    return results


register_transform("vmap", vmap_flat)


#: JAX's ``batching.not_mapped``: the batch dimension of a value that has none.
not_mapped = None
#: JAX's ``batching.primitive_batchers``: ``primitive_batchers[p] = rule``, ``rule(args, dims,
#: **params) -> (out, out_dim)``, the convention of fungraph's own batching rules.
primitive_batchers = RuleTable("batch")
