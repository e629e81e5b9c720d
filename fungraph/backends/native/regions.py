"""The native engine's part of the CPU engine: the fused regions of one graph, generated as C
(:mod:`.codegen`), built together into one shared object with one compiler call
(:mod:`.toolchain`), each bound as the lowering of its ``fusion`` equation.

A lowering passes the region's inputs and its planned output buffers to the C function as
pointers: outputs are written where the memory plan put them (in place over an input where
the plan says so). An operand that is not a C-contiguous array of its type (a transposed or
broadcast view) is copied first, an output buffer that is not one is written through a
temporary.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph._config import NATIVE_CPU
from fungraph.backends.native.codegen import INCLUDES, has_trig, prelude, region_source, supported
from fungraph.backends.native.reducers import has_reduction, reducible
from fungraph.backends.native.reductions import reduction_source
from fungraph.backends.native.toolchain import build, find_compiler
from fungraph.ir import Eqn, Graph

Lowering = Callable[..., Any]


def native_enabled() -> bool:
    """Whether the CPU engine compiles regions: ``fungraph_native_cpu`` is on and a C compiler
    is found."""
    return bool(NATIVE_CPU.on) and find_compiler() is not None


def runs_natively(eqn: Eqn) -> bool:
    """Whether the CPU engine runs ``eqn`` (a ``fusion`` region) as native code, so that it
    needs none of the numpy engine's chunk scratch."""
    if eqn.primitive.name != "fusion" or not native_enabled():
        return False
    body = eqn.params["call"]
    return reduction_source(body, "f") is not None if has_reduction(body) else supported(body)


def reduces_natively(eqn: Eqn) -> bool:
    """Whether a region may hold reduction ``eqn``: the engine is on and generates it (the
    CPU engine's ``FusionCapability.reduces``)."""
    return reducible(eqn) and native_enabled()


def _region_source(body: Graph, name: str) -> str | None:
    """The region's C function(s): a region holding reductions row by row
    (:mod:`.reductions`), else one loop (:mod:`.codegen`) and, when it calls sin, cos or tan,
    its version with the fast trigonometric functions."""
    if has_reduction(body):
        return reduction_source(body, name)
    src = region_source(body, name)
    if src is None or not has_trig(body):
        return src
    return src + (region_source(body, f"{name}_small", small_trig=True) or "")


def native_regions(graph: Graph) -> dict[int, Lowering]:
    """The lowering of each region of ``graph`` the native engine runs, by equation index:
    all of them from one shared object (built once, or found in the disk cache); empty when
    the engine is off, no region is supported, or the build failed."""
    if not native_enabled():
        return {}
    sources: dict[int, str] = {}
    for i, e in enumerate(graph.eqns):
        if e.primitive.name == "fusion":
            src = _region_source(e.params["call"], f"fg_region_{len(sources)}")
            if src is not None:
                sources[i] = src
    if not sources:
        return {}
    text = prelude() + "\n" + "\n".join(sources.values())
    lib = build(text, INCLUDES)
    if lib is None:
        return {}
    lowerings = {}
    for k, i in enumerate(sources):
        body = graph.eqns[i].params["call"]
        small = getattr(lib, f"fg_region_{k}_small") if has_trig(body) and not has_reduction(body) else None
        lowerings[i] = _lowering(getattr(lib, f"fg_region_{k}"), small, body)
    return lowerings


def returned(outs: Sequence[Any], targets: Sequence[np.ndarray]) -> list[Any]:
    """The planned outputs ``outs`` after native code wrote ``targets``: a missing one is its
    target, one that is another buffer gets a copy."""
    result = list(outs)
    for j, o in enumerate(outs):
        if o is None:
            result[j] = targets[j]
        elif o is not targets[j]:
            np.copyto(o, targets[j])
    return result


def _lowering(fn: Any, small: Any, body: Graph) -> Lowering:
    """``fn`` (the region's C function) as a lowering; with ``small`` (its version with fast
    trigonometric functions, which says whether their arguments were in range) that runs
    first, and ``fn`` again only when it says no. An output taking an input's buffer would
    have overwritten the input by then, so such an input is copied first."""
    in_dtypes = [np.dtype(v.aval.dtype) for v in body.invars]
    out_avals = [(o.aval.shape, np.dtype(o.aval.dtype)) for o in body.outvars]
    fn.argtypes = [ctypes.c_void_p] * (len(in_dtypes) + len(out_avals))
    fn.restype = None
    if small is not None:
        small.argtypes = fn.argtypes
        small.restype = ctypes.c_int
    n_in = len(in_dtypes)

    def run(outs: Sequence[np.ndarray | None], *ins: Any, **_: Any) -> Sequence[np.ndarray]:
        held = []
        ptrs = []
        for x, dt in zip(ins, in_dtypes):
            if type(x) is not np.ndarray or not x.flags.c_contiguous or x.dtype != dt:
                x = np.ascontiguousarray(x, dtype=dt)
                held.append(x)
            ptrs.append(x.ctypes.data)
        targets = list(outs)
        for j, o in enumerate(outs):
            if o is None or not o.flags.c_contiguous:
                targets[j] = np.empty(*out_avals[j])
            ptrs.append(targets[j].ctypes.data)
        if small is None:
            fn(*ptrs)
        else:
            shared = set(ptrs[:n_in]) & set(ptrs[n_in:])
            for k in (k for k in range(n_in) if ptrs[k] in shared):
                held.append(np.array(ins[k], dtype=in_dtypes[k]))
                ptrs[k] = held[-1].ctypes.data
            if not small(*ptrs):
                fn(*ptrs)
        return returned(outs, targets)

    return run
