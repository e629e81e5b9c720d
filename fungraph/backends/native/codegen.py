"""C source for fused elementwise regions: one function per region, one loop (nest) over the
region's elements computing every equation of its body in registers, with numpy's semantics.

A region's body is a graph of elementwise equations of one output shape; its inputs are that
shape or broadcast to it (numpy's right-aligned rules). The loop nest has one loop per axis
left after merging the axes every operand walks contiguously (a region of same-shape inputs is
one flat loop), the innermost marked ``omp simd``, the outermost split across threads by
fgpool.h when the region is large and threads are asked for. Each iteration loads all its
inputs before it stores any output, so an output may take an input's buffer (the plan's
in-place placements). Shapes are static, so every extent and stride is a constant the
compiler sees.

:func:`region_source` returns None for a body it cannot express (complex or narrow floats,
the special functions): that region keeps the numpy engine.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from fungraph.ir import Eqn, Graph, Literal, Var
from fungraph.primitives.special import maclaurin_coefficient

#: numpy dtype -> C type; bool is numpy's one byte holding 0 or 1.
C_TYPES = {
    np.dtype(np.bool_): "uint8_t",
    np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t",
    np.dtype(np.uint8): "uint8_t", np.dtype(np.uint16): "uint16_t",
    np.dtype(np.uint32): "uint32_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
}

#: Elements from which a region's loop is split across cores when threads are asked for
#: (below, the threads' start-up costs more than they save).
PARALLEL_MIN_ELEMENTS = 1 << 15

#: Elements per chunk a thread claims at a time from a split region (fgpool.h).
CHUNK_ELEMENTS = 1 << 14

#: ``FUNGRAPH_NATIVE_THREADS``: threads per large region (default: the cores this process may
#: run on), split by the process's one pool (fgpool.h), whose caller takes every chunk a worker
#: has not claimed (an OpenMP region's closing barrier waited a whole scheduler time slice, about
#: 20 ms, for a descheduled worker on the loaded 2-core development machine).
THREADS_ENV = "FUNGRAPH_NATIVE_THREADS"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """Threads a large region's loop is split across: ``FUNGRAPH_NATIVE_THREADS`` (at least 1),
    else :func:`usable_cores`."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return usable_cores()
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"{THREADS_ENV}={os.environ[THREADS_ENV]!r}: expected a positive integer") from None


def ctype(dt: np.dtype) -> str:
    return C_TYPES[np.dtype(dt)]


def type_suffix(dt: np.dtype) -> str:
    """The type in helper names: ``f32``, ``i64``, ``u8``, ``b``."""
    dt = np.dtype(dt)
    return "b" if dt.kind == "b" else f"{dt.kind}{dt.itemsize * 8}"


def _wide(dt: np.dtype) -> str:
    """The unsigned type integer arithmetic of ``dt`` wraps in (no signed overflow, no
    promotion of narrow types to signed int)."""
    return "uint64_t" if np.dtype(dt).itemsize == 8 else "uint32_t"


def literal(value: np.ndarray) -> str:
    """A 0-d array as an exact C constant of its dtype."""
    dt = value.dtype
    if dt.kind == "b":
        return "1" if bool(value) else "0"
    if dt.kind == "f":
        bits = int(value.view(np.uint32 if dt.itemsize == 4 else np.uint64))
        if not np.isfinite(value):
            return f"fg_f32_bits(0x{bits:08x}u)" if dt.itemsize == 4 else f"fg_f64_bits(0x{bits:016x}ull)"
        text = float(value).hex()
        return f"{text}f" if dt.itemsize == 4 else text
    mask = (1 << (8 * dt.itemsize)) - 1
    return f"(({ctype(dt)})0x{int(value) & mask:x}ull)"


@dataclass(frozen=True)
class Term:
    """One equation's operands as C expressions (names or constants, safe to repeat), with
    its input and output dtypes and parameters, and ``fresh`` to name a sub-expression."""

    args: tuple[str, ...]
    ins: tuple[np.dtype, ...]
    out: np.dtype
    params: dict
    fresh: Callable[[str, str], str]

    @property
    def t(self) -> str:
        return ctype(self.out)


Rule = Callable[[Term], str]


def _arith(op: str, bool_op: str | None = None) -> Rule:
    def rule(e: Term) -> str:
        a, b = e.args
        dt = e.ins[0]
        if dt.kind == "f":
            return f"({a} {op} {b})"
        if dt.kind == "b":
            return f"(uint8_t)({a} {bool_op} {b})"
        w = _wide(dt)
        return f"({e.t})(({w}){a} {op} ({w}){b})"

    return rule


def _fma(e: Term) -> str:
    a, b, c = e.args
    dt = e.ins[0]
    if dt.kind == "f":
        return f"({a} * {b} + {c})"
    if dt.kind == "b":
        return f"(uint8_t)(({a} & {b}) | {c})"
    w = _wide(dt)
    return f"({e.t})(({w}){a} * ({w}){b} + ({w}){c})"


def _extreme(op: str) -> Rule:
    """numpy's maximum/minimum: a NaN in either operand propagates, and of two equal values
    (-0.0 and 0.0) the second is taken."""

    def rule(e: Term) -> str:
        a, b = e.args
        if e.ins[0].kind == "f":
            return f"(({a} != {a} || {a} {op} {b}) ? {a} : {b})"
        return f"(({a} {op} {b}) ? {a} : {b})"

    return rule


def _compare(op: str) -> Rule:
    return lambda e: f"(uint8_t)({e.args[0]} {op} {e.args[1]})"


def _bitwise(op: str) -> Rule:
    return lambda e: f"({e.t})({e.args[0]} {op} {e.args[1]})"


def _not(e: Term) -> str:
    return f"(uint8_t)(!{e.args[0]})" if e.out.kind == "b" else f"({e.t})(~{e.args[0]})"


def _neg(e: Term) -> str:
    (a,) = e.args
    if e.out.kind == "f":
        return f"(-{a})"
    return f"({e.t})(0 - ({_wide(e.out)}){a})"


def _abs(e: Term) -> str:
    (a,) = e.args
    if e.out.kind == "f":
        return f"fabs{'f' if e.out.itemsize == 4 else ''}({a})"
    if e.out.kind == "u":
        return a
    return f"({a} < 0 ? ({e.t})(0 - ({_wide(e.out)}){a}) : {a})"


def _sign(e: Term) -> str:
    """numpy's sign: -0.0 gives +0.0, NaN gives NaN."""
    (a,) = e.args
    t = e.t
    if e.out.kind == "f":
        return f"({a} > 0 ? ({t})1 : ({a} < 0 ? ({t})-1 : ({a} == 0 ? ({t})0 : {a})))"
    if e.out.kind == "u":
        return f"({t})({a} > 0)"
    return f"({t})(({a} > 0) - ({a} < 0))"


def _libm(name: str) -> Rule:
    return lambda e: f"{name}{'f' if e.out.itemsize == 4 else ''}({e.args[0]})"


def _fg(name: str) -> Rule:
    """A function of fgmath.h: ``fg_<name>_f32`` / ``fg_<name>_f64``."""
    return lambda e: f"fg_{name}_{type_suffix(e.out)}({', '.join(e.args)})"


def _select(e: Term) -> str:
    p, x, y = e.args
    return f"({p} ? {x} : {y})"


def _convert(e: Term) -> str:
    """A C cast, except float to integer, which saturates and sends NaN to 0 as XLA's does (C
    leaves an out-of-range cast undefined)."""
    (a,) = e.args
    if e.out.kind == "b":
        return f"(uint8_t)({a} != 0)"
    if e.ins[0].kind == "f" and e.out.kind in "iu":
        info = np.iinfo(e.out)
        above = float(2 ** (info.bits - (info.min < 0))).hex()
        top, bottom = literal(np.asarray(info.max, e.out)), literal(np.asarray(info.min, e.out))
        return (f"(({a}) >= {above} ? {top} : ({a}) < {float(info.min).hex()} ? {bottom} : "
                f"({a}) == ({a}) ? ({e.t})({a}) : ({e.t})0)")
    return f"({e.t})({a})"


def _integer_pow(e: Term) -> str:
    """Square-and-multiply, as JAX's ``integer_pow``: the exponent's bits from the lowest,
    a reciprocal for a negative one; integers wrap."""
    (x,) = e.args
    y = int(e.params["y"])
    if y == 0:
        return f"({e.t})1"
    dt = e.out

    def mul(a: str, b: str) -> str:
        if dt.kind == "f":
            return e.fresh(f"{a} * {b}", e.t)
        w = _wide(dt)
        return e.fresh(f"({e.t})(({w}){a} * ({w}){b})", e.t)

    n = abs(y)
    acc = None
    while n > 0:
        if n & 1:
            acc = x if acc is None else mul(acc, x)
        n >>= 1
        if n > 0:
            x = mul(x, x)
    assert acc is not None
    return f"(({e.t})1 / {acc})" if y < 0 else acc


def _maclaurin(e: Term) -> str:
    return literal(np.asarray(maclaurin_coefficient(e.params["series"], e.params["k"]), e.out))


#: The primitives fgmath.h computes with polynomials: tens of operations per element, where
#: the other rules take one or a few.
TRANSCENDENTAL = frozenset({"exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "sinh", "cosh", "atan",
                            "asin", "acos", "acosh", "atanh", "erf", "logistic", "pow", "atan2"})

#: primitive name -> rule; each maps its operands to one C expression of its output dtype.
RULES: dict[str, Rule] = {
    "add": _arith("+", "|"), "sub": _arith("-"), "mul": _arith("*", "&"), "div": _arith("/"),
    "fma": _fma,
    "max": _extreme(">"), "min": _extreme("<"),
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="),
    "and": _bitwise("&"), "or": _bitwise("|"), "xor": _bitwise("^"), "not": _not,
    "neg": _neg, "abs": _abs, "sign": _sign, "floor": _libm("floor"), "sqrt": _libm("sqrt"),
    "select": _select, "convert_element_type": _convert, "integer_pow": _integer_pow, "maclaurin": _maclaurin,
    "mod": _fg("mod"), "floor_divide": _fg("floordiv"),
    **{name: _fg(name) for name in sorted(TRANSCENDENTAL)},
}

#: What every generated source includes: fgmath.h (vectorisable transcendentals with tested
#: ulp bounds, docs/native_math.md), fgops.h (numpy's division semantics) and fgpool.h (the
#: threads a large region is split across).
INCLUDES = ("fgmath.h", "fgops.h", "fgpool.h")


def prelude() -> str:
    lines = ["#include <stdint.h>", "#include <math.h>", *(f'#include "{h}"' for h in INCLUDES)]
    return "\n".join(lines) + "\n"


def supported(body: Graph) -> bool:
    """Whether :func:`region_source` can express ``body``: known primitives over C's types."""
    avals = [v.aval for v in body.invars] + [o.aval for e in body.eqns for o in e.outputs]
    avals += [a.aval for e in body.eqns for a in e.inputs if isinstance(a, Literal)]
    return (not body.constvars and all(np.dtype(a.dtype) in C_TYPES for a in avals)
            and all(e.primitive.name in RULES and len(e.outputs) == 1 for e in body.eqns)
            and all(isinstance(o, Var) for o in body.outvars) and len(body.outvars) > 0)


def emit_eqns(eqns: Sequence[Eqn], names: dict[Var, str], lines: list[str], counter: Iterator[int],
              trig: str = "full", ranged: frozenset[str] | None = None) -> None:
    """C statements computing ``eqns`` (operands named in ``names``), appended to ``lines``.
    ``trig`` picks fgmath.h's versions of the functions in ``ranged`` (default :data:`TRIG`):
    ``full`` (every argument), ``small`` (their fast ``_small`` versions, right within their
    range only: up to FG_TRIG_SMALL_MAX for sin, cos and tan, below 1 for tanh), or ``check``
    (``small``, AND-ing into ``ok`` whether each argument is within its range)."""
    ranged = TRIG if ranged is None else ranged

    def fresh(expr: str, t: str) -> str:
        n = f"t{next(counter)}"
        lines.append(f"const {t} {n} = {expr};")
        return n

    for e in eqns:
        args = tuple(names[a] if isinstance(a, Var) else literal(a.array) for a in e.inputs)
        out = e.outputs[0]
        term = Term(args, tuple(np.dtype(a.aval.dtype) for a in e.inputs), np.dtype(out.aval.dtype),
                    dict(e.params), fresh)
        if trig != "full" and e.primitive.name in ranged:
            sfx = type_suffix(out.aval.dtype)
            if trig == "check":
                lines.append(f"ok &= fg_{SMALL_OK[e.primitive.name]}_small_ok_{sfx}({args[0]}) != 0;")
            expr = f"fg_{e.primitive.name}_small_{sfx}({args[0]})"
        else:
            expr = RULES[e.primitive.name](term)
        names[out] = f"v{next(counter)}"
        lines.append(f"const {ctype(out.aval.dtype)} {names[out]} = {expr};")


def _contiguous(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def _input_strides(shape: tuple[int, ...], region: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous input of ``shape`` walked over ``region`` (numpy's
    broadcasting: right-aligned, a 1 or a missing axis repeats)."""
    own = _contiguous(shape)
    pad = len(region) - len(shape)
    return [0 if k < pad or shape[k - pad] == 1 else own[k - pad] for k in range(len(region))]


def loop_axes(region: tuple[int, ...], inputs: Sequence[tuple[int, ...]]) -> tuple[list[int], list[list[int]]]:
    """The loop nest's extents and each operand's stride per loop (inputs, then the output
    layout last): axes of extent 1 dropped, neighbours every operand walks as one merged."""
    operands = [_input_strides(s, region) for s in inputs] + [_contiguous(region)]
    extents: list[int] = []
    strides: list[list[int]] = [[] for _ in operands]
    for k, d in enumerate(region):
        if d == 1:
            continue
        if extents and all(st[-1] == op[k] * d for st, op in zip(strides, operands)):
            extents[-1] *= d
            for st, op in zip(strides, operands):
                st[-1] = op[k]
            continue
        extents.append(d)
        for st, op in zip(strides, operands):
            st.append(op[k])
    return extents, strides


#: The trigonometric functions whose fgmath.h versions come in two kinds: full-range (a
#: Payne-Hanek reduction, about 10x slower) and ``_small`` (exact up to FG_TRIG_SMALL_MAX).
TRIG = frozenset({"sin", "cos", "tan"})


#: The functions with fast ``_small`` versions (fgmath.h) a loop checks its arguments for
#: each iteration (:mod:`.loops`): the trigonometric ones, and tanh below 1 (its rational
#: branch alone, half the work). Regions take only :data:`TRIG`: a region whose check fails
#: runs again in full, and tanh's arguments are often beyond 1.
RANGED = TRIG | {"tanh"}

#: Each ranged function's check: ``fg_<name>_small_ok_<type>``.
SMALL_OK = {"sin": "trig", "cos": "trig", "tan": "trig", "tanh": "tanh"}


def has_trig(body: Graph) -> bool:
    return any(e.primitive.name in TRIG for e in body.eqns)


def region_source(body: Graph, name: str, small_trig: bool = False) -> str | None:
    """``void name(const T0 *a0, ..., T *o0, ...)``: the region ``body`` over C-contiguous
    inputs (of their own shapes) and outputs (of the region's shape); None when unsupported.

    With ``small_trig``, ``int name(...)`` instead: sin, cos and tan take fgmath.h's fast
    ``_small`` versions, and the function returns whether every argument was within their
    range (else the caller runs the full-range function over the same inputs)."""
    if not supported(body):
        return None
    region = body.outvars[0].aval.shape
    extents, strides = loop_axes(region, [v.aval.shape for v in body.invars])
    index_vars = [f"i{k}" for k in range(len(extents))]

    def index(st: Sequence[int]) -> str:
        terms = [v if s == 1 else f"{v} * {s}" for v, s in zip(index_vars, st) if s != 0]
        return " + ".join(terms) or "0"

    names: dict[Var, str] = {}
    lines: list[str] = []
    for j, v in enumerate(body.invars):
        names[v] = f"x{j}"
        lines.append(f"const {ctype(v.aval.dtype)} x{j} = a{j}[{index(strides[j])}];")
    emit_eqns(body.eqns, names, lines, itertools.count(), "check" if small_trig else "full")
    out_index = index(strides[-1])
    lines += [f"o{j}[{out_index}] = {names[o]};" for j, o in enumerate(body.outvars)]

    params = [f"const {ctype(v.aval.dtype)} *a{j}" for j, v in enumerate(body.invars)]
    params += [f"{ctype(o.aval.dtype)} *o{j}" for j, o in enumerate(body.outvars)]
    head = [f"{'int' if small_trig else 'void'} {name}({', '.join(params)})", "{"]
    head += ["    int ok = 1;"] if small_trig else []
    tail = ["    return ok;", "}"] if small_trig else ["}"]
    reduction = " reduction(&:ok)" if small_trig else ""
    size = math.prod(region)
    if size == 0:
        return "\n".join(head + tail) + "\n"
    if not extents:
        return "\n".join([*head, *("    " + line for line in lines), *tail, ""])
    n_threads = threads()
    if n_threads < 2 or size < PARALLEL_MIN_ELEMENTS or extents[0] < 2:
        return "\n".join([*head, *_nest(extents, index_vars, lines, reduction, "0"), *tail, ""])
    return _parallel(name, params, small_trig, extents, _nest(extents, index_vars, lines, reduction, "lo"), n_threads)


def _nest(extents: Sequence[int], index_vars: Sequence[str], body: Sequence[str], reduction: str,
          lo: str) -> list[str]:
    """The loop nest over ``extents`` around ``body``, the outermost loop from ``lo`` (to its
    extent, or to ``hi`` when ``lo`` is not "0"), the innermost ``omp simd``."""
    out: list[str] = []
    depth = len(extents)
    for k, d in enumerate(extents):
        if k == depth - 1:
            out.append("    " * (k + 1) + f"#pragma omp simd{reduction}")
        start, stop = (lo, "hi" if lo != "0" else str(d)) if k == 0 else ("0", str(d))
        out.append("    " * (k + 1) + f"for (int64_t {index_vars[k]} = {start}; {index_vars[k]} < {stop}; "
                   f"{index_vars[k]}++)" + (" {" if k == depth - 1 else ""))
    out += ["    " * (depth + 1) + line for line in body]
    out.append("    " * depth + "}")
    return out


def pool_arguments(params: Sequence[str]) -> tuple[list[str], list[str]]:
    """For a function of pointer parameters ``params`` (``T *name``) handing them to the pool:
    the chunk function's statements taking each back from ``args``, and the ``(void *)``
    pointers the function packs into ``args``, in order."""
    unpack, pointers = [], []
    for k, p in enumerate(params):
        cut = p.rindex("*") + 1
        unpack.append(f"{p[:cut]}{p[cut:]} = ({p[:cut]})args[{k}];")
        pointers.append(f"(void *){p[cut:]}")
    return unpack, pointers


def _parallel(name: str, params: Sequence[str], small_trig: bool, extents: Sequence[int], nest: Sequence[str],
              n_threads: int) -> str:
    """A region split across threads by fgpool.h's ``fg_parallel``: ``name_chunk`` runs the nest
    over a range of its outermost index, and ``name`` hands its pointers (and, for the fast
    trigonometric version, the flag every chunk clears when an argument is out of range) to
    the pool."""
    unpack, pointers = pool_arguments(params)
    chunk = max(1, CHUNK_ELEMENTS // math.prod(extents[1:]))
    pointers += ["&ok"] if small_trig else []
    body = [f"static void {name}_chunk(void *const *args, int64_t lo, int64_t hi)", "{",
            *("    " + x for x in unpack)]
    clear = f"    if (!ok) __atomic_store_n((int *)args[{len(params)}], 0, __ATOMIC_RELAXED);"
    body += ["    int ok = 1;", *nest, clear, "}"] if small_trig else [*nest, "}"]
    body += [f"{'int' if small_trig else 'void'} {name}({', '.join(params)})", "{"]
    body += ["    int ok = 1;"] if small_trig else []
    body += [f"    void *const args[] = {{{', '.join(pointers)}}};",
             f"    fg_parallel({name}_chunk, args, {extents[0]}, {chunk}, {n_threads});"]
    body += ["    return ok;", "}"] if small_trig else ["}"]
    return "\n".join(body) + "\n"
