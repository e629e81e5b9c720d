"""Whole elementwise loops as one native C function: a ``while`` (or a ``scan`` without
scanned inputs or outputs, which a ``fori_loop`` with static bounds becomes) whose cond and
body are elementwise over one carry shape, with scalar carries (counters) alongside, runs its
iterations in C with no Python dispatch per iteration.

The generated function keeps scalar carries in locals and array carries in the loop's planned
output buffers, updated in place: each iteration evaluates the cond on the scalars, computes
the body's scalar equations once, then walks the elements once computing every array equation
in registers (an element's loads all come before its stores, so carries swapping places or
passing through are safe). A cond that reads an array carry needs a reduction, and any other
shape or primitive keeps the CPU engine's loop (:func:`loop_lowering` returns None).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph.backends.native.codegen import INCLUDES, TRIG, ctype, emit_eqns, prelude, supported
from fungraph.backends.native.regions import native_enabled, returned
from fungraph.backends.native.toolchain import build
from fungraph.ir import Eqn, Graph, Literal, Var
from fungraph.primitives.graph_utils import LOOP_STATS

Lowering = Callable[..., Any]

#: Loops run natively (``runs``); the tests read it to see the path taken.
NATIVE_LOOP_STATS = {"runs": 0}


def _elementwise(graph: Graph, shape: tuple[int, ...], scalar_only: bool = False) -> bool:
    """Whether every value of ``graph`` is a scalar or of ``shape`` (only scalars with
    ``scalar_only``), with scalar literals, and the code generator knows every equation."""
    ok = {()} if scalar_only else {(), shape}
    values = [*graph.invars, *(o for e in graph.eqns for o in e.outputs)]
    if not supported(graph) or any(tuple(o.aval.shape) not in ok for e in graph.eqns for o in e.outputs):
        return False
    literals = [a for e in graph.eqns for a in e.inputs if isinstance(a, Literal)]
    return all(np.ndim(a.array) == 0 for a in literals) and all(tuple(v.aval.shape) in {(), shape} for v in values)


def loop_source(name: str, carries: Sequence[Var], cond: Graph | None, n_cc: int, body: Graph,
                length: int | None) -> str | None:
    """``int64_t name(const T *in..., T *out...)``, returning the iterations run: inputs are
    the cond's constants, the body's constants, then the initial carries (a ``while``'s order;
    a ``scan`` passes no cond and its ``length``); outputs are the final carries. None when
    the loop is not elementwise."""
    shapes = {tuple(v.aval.shape) for v in carries} - {()}
    if len(shapes) > 1:
        return None
    shape = next(iter(shapes), ())
    if not _elementwise(body, shape) or (cond is not None and not _elementwise(cond, shape, scalar_only=True)):
        return None
    if cond is not None and (cond.outvars[0].aval.shape != () or np.dtype(cond.outvars[0].aval.dtype) != np.bool_):
        return None
    nc = len(carries)
    n_bc = len(body.invars) - nc
    cc = list(cond.invars[nc:]) if cond is not None else []
    bc = list(body.invars[nc:])
    ins = cc + bc + list(carries)
    params = [f"const {ctype(v.aval.dtype)} *a{k}" for k, v in enumerate(ins)]
    params += [f"{ctype(v.aval.dtype)} *o{j}" for j, v in enumerate(carries)]
    size = math.prod(shape)
    counter = itertools.count()
    lines: list[str] = []
    carry_name: list[str] = []
    for j, v in enumerate(carries):
        t, src = ctype(v.aval.dtype), f"a{n_cc + n_bc + j}"
        if v.aval.shape == ():
            carry_name.append(f"s{j}")
            lines.append(f"{t} s{j} = {src}[0];")
        else:
            carry_name.append(f"o{j}")
            lines.append(f"for (int64_t i = 0; i < {size}; i++) o{j}[i] = {src}[i];")
    const_name = {}
    for k, v in enumerate(cc + bc):
        if v.aval.shape == ():
            lines.append(f"const {ctype(v.aval.dtype)} c{k} = a{k}[0];")
            const_name[k] = f"c{k}"
    lines.append("int64_t it = 0;")
    loop = [f"for (; it < {length}; it++) {{"] if cond is None else ["for (;; it++) {"]
    step: list[str] = []
    if cond is not None:
        names = {v: carry_name[j] for j, v in enumerate(cond.invars[:nc]) if v.aval.shape == ()}
        names.update({v: const_name[k] for k, v in enumerate(cc) if v.aval.shape == ()})
        emit_eqns(cond.eqns, names, step, counter)
        step.append(f"if (!{names[cond.outvars[0]]}) break;")
    names = {}
    element: dict[Var, str] = {}
    for j, v in enumerate(body.invars[:nc]):
        (names if v.aval.shape == () else element)[v] = carry_name[j]
    for k, v in enumerate(bc):
        (names if v.aval.shape == () else element)[v] = const_name.get(n_cc + k, f"a{n_cc + k}")
    scalar_eqns = [e for e in body.eqns if e.outputs[0].aval.shape == ()]
    array_eqns = [e for e in body.eqns if e.outputs[0].aval.shape != ()]
    emit_eqns(scalar_eqns, names, step, counter)
    arrays = [j for j, v in enumerate(carries) if v.aval.shape != ()]
    if arrays and size > 0:
        if any(e.primitive.name in TRIG for e in array_eqns):
            check = _element_loop(array_eqns, element, dict(names), counter, size, "check", ())
            small = _element_loop(array_eqns, element, dict(names), counter, size, "small", body.outvars, arrays)
            full = _element_loop(array_eqns, element, names, counter, size, "full", body.outvars, arrays)
            step += ["int ok = 1;", *check, "if (ok) {", *("    " + x for x in small), "} else {",
                     *("    " + x for x in full), "}"]
        else:
            step += _element_loop(array_eqns, element, names, counter, size, "full", body.outvars, arrays)
    scalars = [j for j, v in enumerate(carries) if v.aval.shape == ()]
    news = [names[body.outvars[j]] for j in scalars]
    step += [f"const {ctype(carries[j].aval.dtype)} n{j} = {n};" for j, n in zip(scalars, news)]
    step += [f"s{j} = n{j};" for j in scalars]
    lines += loop + ["    " + x for x in step] + ["}"]
    lines += [f"o{j}[0] = s{j};" for j in scalars]
    lines.append("return it;")
    return "\n".join([f"int64_t {name}({', '.join(params)})", "{", *("    " + x for x in lines), "}", ""])


def _element_loop(eqns: Sequence[Eqn], element: dict[Var, str], names: dict[Var, str], counter: Any, size: int,
                  trig: str, outvars: Sequence[Var], arrays: Sequence[int] = ()) -> list[str]:
    """One pass over the elements computing ``eqns`` (:func:`_emit`'s ``trig``) and storing the
    array carries ``arrays`` of ``outvars``; a ``check`` pass stores nothing and AND-reduces
    ``ok`` (so the compiler keeps only what the trig arguments need)."""
    inner: list[str] = []
    for v, ptr in element.items():
        names[v] = f"e{next(counter)}"
        inner.append(f"const {ctype(v.aval.dtype)} {names[v]} = {ptr}[i];")
    emit_eqns(eqns, names, inner, counter, trig)
    inner += [f"o{j}[i] = {names[outvars[j]]};" for j in arrays]
    pragma = "#pragma omp simd reduction(&:ok)" if trig == "check" else "#pragma omp simd"
    return [pragma, f"for (int64_t i = 0; i < {size}; i++) {{", *("    " + x for x in inner), "}"]


def _bind(fn: Any, ins: Sequence[Var], outs: Sequence[Var], carry_from: int, counted: bool) -> Lowering:
    """``fn`` as a lowering: inputs as contiguous arrays of their dtypes, outputs written into
    the planned buffers (through a temporary when one is not contiguous). An input sharing a
    buffer with an output other than its own carry's is copied first, since the function
    copies the initial carries into the outputs before it reads the constants. ``counted``
    adds the iterations to ``LOOP_STATS`` as the CPU engine's while loop does."""
    in_dtypes = [np.dtype(v.aval.dtype) for v in ins]
    out_avals = [(v.aval.shape, np.dtype(v.aval.dtype)) for v in outs]
    fn.argtypes = [ctypes.c_void_p] * (len(ins) + len(outs))
    fn.restype = ctypes.c_int64

    def run(outputs: Sequence[np.ndarray | None], *args: Any, **_: Any) -> Sequence[np.ndarray]:
        targets = [o if o is not None and o.flags.c_contiguous else np.empty(*a)
                   for o, a in zip(outputs, out_avals)]
        out_ptrs = [t.ctypes.data for t in targets]
        held, ptrs = [], []
        for k, (x, dt) in enumerate(zip(args, in_dtypes)):
            x = np.asarray(x)
            if not x.flags.c_contiguous or x.dtype != dt:
                x = np.ascontiguousarray(x, dtype=dt)
            own = k - carry_from
            if x.nbytes and x.ctypes.data in out_ptrs and not (own >= 0 and out_ptrs[own] == x.ctypes.data):
                x = x.copy()
            held.append(x)
            ptrs.append(x.ctypes.data)
        iterations = fn(*ptrs, *out_ptrs)
        NATIVE_LOOP_STATS["runs"] += 1
        if counted:
            LOOP_STATS["iterations"] += iterations
        return returned(outputs, targets)

    return run


def _built(source: str | None, ins: Sequence[Var], outs: Sequence[Var], carry_from: int,
           counted: bool) -> Lowering | None:
    if source is None:
        return None
    lib = build(prelude() + "\n" + source, INCLUDES)
    return None if lib is None else _bind(lib.fg_loop, ins, outs, carry_from, counted)


def loop_lowering(eqn: Eqn) -> Lowering | None:
    """The native lowering of a ``while`` or ``scan`` equation whose whole loop is elementwise
    (module docstring); None when the engine is off, the loop is not, or the build failed."""
    if not native_enabled():
        return None
    p = eqn.params
    if eqn.primitive.name == "while":
        body, cond = p["body_graph"], p["cond_graph"]
        nc = len(body.outvars)
        if len(cond.invars) - nc != p["n_cc"] or len(body.invars) - nc != p["n_bc"]:
            return None
        ins = list(cond.invars[nc:]) + list(body.invars[nc:]) + list(body.invars[:nc])
        src = loop_source("fg_loop", body.invars[:nc], cond, p["n_cc"], body, None)
        return _built(src, ins, body.invars[:nc], p["n_cc"] + p["n_bc"], True)
    if eqn.primitive.name == "scan":
        body, nc = p["body"], p["num_carry"]
        if p["num_xs"] or len(body.outvars) != nc:
            return None
        consts = list(body.invars[nc:])
        # a scan's arguments are carries first, then constants
        src = loop_source("fg_loop", body.invars[:nc], None, 0, body, int(p["length"]))
        if src is None:
            return None
        lowering = _built(src, consts + list(body.invars[:nc]), body.invars[:nc], len(consts), False)
        if lowering is None:
            return None
        return lambda outs, *args, **kw: lowering(outs, *args[nc:], *args[:nc], **kw)
    return None
