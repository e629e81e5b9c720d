"""A ``cond`` whose every branch is elementwise over one shape as one native C function: the
index picks a branch in C, which computes its scalar equations once and walks the elements
once (:func:`.loops._element_pass`, large passes split across the pool's threads), so the
CPU engine runs no branch executable from Python. All the conds of one graph are built into
one shared object (:func:`native_conds`).

A cond with a branch that is not elementwise (a reduction, a matrix product, another shape, a
literal output), or smaller than :data:`MIN_BYTES`, keeps the CPU engine's ``cond``.
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph.backends.native.codegen import INCLUDES, TRIG, ctype, emit_eqns, prelude, threads
from fungraph.backends.native.loops import _element_pass, _elementwise, _Split
from fungraph.backends.native.regions import native_enabled, returned
from fungraph.backends.native.toolchain import build
from fungraph.ir import Eqn, Graph, Var

Lowering = Callable[..., Any]

#: Conds run natively (``runs``); the tests read it to see the path taken.
NATIVE_COND_STATS = {"runs": 0}

#: The smallest widest output (bytes) of a cond run natively: the CPU engine's region size (two
#: of ``cpu_regions.CHUNK_BYTES``, not imported, as the CPU engine imports this module). Each
#: shape costs a compiler call (0.2-0.4 s) and a loaded object, which a smaller cond's few
#: microseconds per call do not repay (1,000 shapes of a small cond compiled for minutes and
#: held 1 MiB past ``clear_caches``).
MIN_BYTES = 512 * 1024


def _shape(branches: Sequence[Graph]) -> tuple[int, ...] | None:
    """The one shape every branch's array outputs have (``()`` when all are scalars), or None."""
    shapes = {tuple(o.aval.shape) for b in branches for o in b.outvars} - {()}
    return next(iter(shapes), ()) if len(shapes) <= 1 else None


def cond_source(name: str, index_dtype: np.dtype, branches: Sequence[Graph]) -> str | None:
    """``void name(const I *a0, const T *a1..., T *o0...)``: the branch the index ``a0[0]``
    names (clamped to the branches, as ``lax.switch``) over the operands ``a1...``, writing
    the outputs; None when a branch is not elementwise over one shape."""
    shape = _shape(branches)
    if shape is None or not branches:
        return None
    if any(b.constvars or not _elementwise(b, shape, broadcast=b.invars) for b in branches):
        return None
    operands = branches[0].invars
    params = [f"const {ctype(index_dtype)} *a0"]
    params += [f"const {ctype(v.aval.dtype)} *a{j + 1}" for j, v in enumerate(operands)]
    params += [f"{ctype(o.aval.dtype)} *o{j}" for j, o in enumerate(branches[0].outvars)]
    last = len(branches) - 1
    lines = [f"const int64_t k = a0[0] < 0 ? 0 : a0[0] > {last} ? {last} : (int64_t)a0[0];"]
    lines += [f"const {ctype(v.aval.dtype)} c{j} = a{j + 1}[0];" for j, v in enumerate(operands) if v.aval.shape == ()]
    counter = itertools.count()
    helpers: list[str] = []
    split = _Split(name, threads(), helpers)
    for k, b in enumerate(branches):
        head = "if (k == 0) {" if k == 0 else f"}} else if (k == {k}) {{" if k < last else "} else {"
        lines += [head, *("    " + x for x in _branch(b, shape, counter, split))]
    lines.append("}")
    function = [f"void {name}({', '.join(params)})", "{", *("    " + x for x in lines), "}", ""]
    return "\n".join([*helpers, *function])


def _branch(b: Graph, shape: tuple[int, ...], counter: itertools.count, split: _Split) -> list[str]:
    """One branch: its scalar equations, one pass over the elements storing the array
    outputs, then the scalar outputs (every scalar operand was read before any store)."""
    names: dict[Var, str] = {}
    element: dict[Var, str] = {}
    for j, v in enumerate(b.invars):
        if v.aval.shape == ():
            names[v] = f"c{j}"
        else:
            element[v] = f"a{j + 1}"
    lines: list[str] = []
    emit_eqns([e for e in b.eqns if e.outputs[0].aval.shape == ()], names, lines, counter)
    array_eqns = [e for e in b.eqns if e.outputs[0].aval.shape != ()]
    stores = [(f"o{j}", o) for j, o in enumerate(b.outvars) if o.aval.shape != ()]
    if stores and math.prod(shape) > 0:
        lines += _element_pass(array_eqns, element, dict(names), counter, shape, stores, split, TRIG)
    lines += [f"o{j}[0] = {names[o]};" for j, o in enumerate(b.outvars) if o.aval.shape == ()]
    return lines


def _bind(fn: Any, index_dtype: np.dtype, in_dtypes: Sequence[np.dtype], out_avals: Sequence[Any]) -> Lowering:
    """``fn`` as the cond's lowering: operands as contiguous arrays of their dtypes, outputs
    written into the planned buffers (through a temporary when one is not contiguous). An
    element's loads come before its stores, so an output may take an operand's buffer of the
    same size (the plan's in-place placements); any other sharing is copied first."""
    fn.argtypes = [ctypes.c_void_p] * (1 + len(in_dtypes) + len(out_avals))
    fn.restype = None
    shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in out_avals]
    dtypes = [np.dtype(index_dtype), *in_dtypes]

    def run(outputs: Sequence[np.ndarray | None], index: Any, *args: Any, **_: Any) -> Sequence[np.ndarray]:
        targets = [o if o is not None and o.flags.c_contiguous else np.empty(*a) for o, a in zip(outputs, shapes)]
        out_ptrs = [t.ctypes.data for t in targets]
        held = []
        ptrs = []
        for x, dt in zip((index, *args), dtypes):
            if type(x) is not np.ndarray or not x.flags.c_contiguous or x.dtype != dt:
                x = np.ascontiguousarray(x, dtype=dt)
                held.append(x)
            ptr = x.ctypes.data
            if ptr in out_ptrs and x.nbytes and targets[out_ptrs.index(ptr)].nbytes != x.nbytes:
                x = x.copy()
                held.append(x)
                ptr = x.ctypes.data
            ptrs.append(ptr)
        fn(*ptrs, *out_ptrs)
        NATIVE_COND_STATS["runs"] += 1
        return returned(outputs, targets)

    return run


def _source(eqn: Eqn, name: str) -> str | None:
    """The C function ``name`` running ``cond`` equation ``eqn``, or None (module docstring)."""
    branches = list(eqn.params["branches"])
    index_dtype = np.dtype(eqn.inputs[0].aval.dtype)
    if index_dtype.kind not in "iu" or any(len(b.invars) != len(eqn.inputs) - 1 for b in branches):
        return None
    if max((o.aval.nbytes for o in eqn.outputs), default=0) < MIN_BYTES:
        return None
    return cond_source(name, index_dtype, branches)


def runs_natively(eqn: Eqn) -> bool:
    """Whether the CPU engine runs ``eqn`` (a ``cond``) as native code, so that it needs no
    scratch block for branch executables."""
    return eqn.primitive.name == "cond" and native_enabled() and _source(eqn, "f") is not None


def native_conds(graph: Graph) -> dict[int, Lowering]:
    """The lowering of each ``cond`` of ``graph`` the native engine runs, by equation index,
    all from one shared object; empty when the engine is off, none is elementwise, or the
    build failed."""
    if not native_enabled():
        return {}
    sources: dict[int, str] = {}
    for i, e in enumerate(graph.eqns):
        if e.primitive.name == "cond":
            src = _source(e, f"fg_cond_{len(sources)}")
            if src is not None:
                sources[i] = src
    if not sources:
        return {}
    lib = build(prelude() + "\n" + "\n".join(sources.values()), INCLUDES)
    if lib is None:
        return {}
    lowerings = {}
    for k, i in enumerate(sources):
        e = graph.eqns[i]
        lowerings[i] = _bind(getattr(lib, f"fg_cond_{k}"), np.dtype(e.inputs[0].aval.dtype),
                             [np.dtype(v.aval.dtype) for v in e.params["branches"][0].invars],
                             [o.aval for o in e.outputs])
    return lowerings
