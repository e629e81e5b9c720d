"""Whole elementwise loops as one native C function: a ``while`` (or a ``scan`` without
scanned inputs or outputs, which a ``fori_loop`` with static bounds becomes) whose cond and
body are elementwise over one carry shape, with scalar carries (counters) alongside, runs its
iterations in C with no Python dispatch per iteration.

The generated function keeps scalar carries in locals and array carries in the loop's planned
output buffers, updated in place: each iteration evaluates the cond on the scalars, computes
the body's scalar equations once, then walks the elements once computing every array equation
in registers (an element's loads all come before its stores, so carries swapping places or
passing through are safe); a walk over at least ``PARALLEL_MIN_ELEMENTS`` elements computing
a transcendental function is a chunk function each iteration hands to the process's pool
(fgpool.h), split across its threads. A cond that reads an array carry needs a reduction, and
any other shape or primitive keeps the CPU engine's loop (:func:`loop_lowering` returns None).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph.backends.native.codegen import (
    CHUNK_ELEMENTS,
    INCLUDES,
    PARALLEL_MIN_ELEMENTS,
    RANGED,
    TRANSCENDENTAL,
    ctype,
    emit_eqns,
    loop_axes,
    prelude,
    supported,
    threads,
)
from fungraph.backends.native.reducers import has_reduction
from fungraph.backends.native.reductions import reduction_source, row_axes
from fungraph.backends.native.regions import native_enabled, returned
from fungraph.backends.native.toolchain import build
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, ShapedArray, Var
from fungraph.primitives.elementwise import ge_p, select_p
from fungraph.primitives.graph_utils import LOOP_STATS

Lowering = Callable[..., Any]

#: Loops run natively (``runs``); the tests read it to see the path taken.
NATIVE_LOOP_STATS = {"runs": 0}


def _elementwise(graph: Graph, shape: tuple[int, ...], scalar_only: bool = False,
                 broadcast: Sequence[Var] = ()) -> bool:
    """Whether every value of ``graph`` is a scalar or of ``shape`` (only scalars with
    ``scalar_only``; the inputs ``broadcast`` of any shape that broadcasts to it), with
    scalar literals, and the code generator knows every equation."""
    ok = {()} if scalar_only else {(), shape}
    if not supported(graph) or any(tuple(o.aval.shape) not in ok for e in graph.eqns for o in e.outputs):
        return False
    literals = [a for e in graph.eqns for a in e.inputs if isinstance(a, Literal)]
    spread = set(broadcast)
    return all(np.ndim(a.array) == 0 for a in literals) and all(
        tuple(v.aval.shape) in {(), shape} or (v in spread and _broadcasts(tuple(v.aval.shape), shape))
        for v in graph.invars)


def _broadcasts(own: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return len(own) <= len(shape) and all(d in (1, s) for d, s in zip(own[::-1], shape[::-1]))


@dataclass(frozen=True)
class Scanned:
    """A scan's scanned inputs and outputs: the body's slices of the inputs (its invars after
    the carries), how many of its outputs after the carries are slices of outputs, and the
    order the iterations take them in."""

    xs: tuple[Var, ...] = ()
    n_ys: int = 0
    reverse: bool = False


def loop_source(name: str, carries: Sequence[Var], cond: Graph | None, n_cc: int, body: Graph,
                length: int | None, scanned: Scanned = Scanned()) -> str | None:
    """``int64_t name(const T *in..., T *out...)``, returning the iterations run: inputs are
    the cond's constants, the body's constants, the initial carries, then a scan's scanned
    inputs (a ``scan`` passes no cond and its ``length``); outputs are the final carries,
    then a scan's stacked outputs. None when the loop is not elementwise.

    A cond or body holding reductions over the carries (``max(abs(x)) > tol``) is a function
    of its own (:mod:`.reductions`) the loop calls each iteration, on the carries where
    they lie."""
    nc = len(carries)
    ys = list(body.outvars[nc:nc + scanned.n_ys])
    shapes = {tuple(v.aval.shape) for v in [*carries, *scanned.xs, *ys]} - {()}
    rows = None
    if len(shapes) == 2:
        big, small = sorted(shapes, key=math.prod, reverse=True)
        axes = row_axes(big, small)
        if axes is None:
            return None
        rows = (big, axes)
    elif len(shapes) > 2:
        return None
    shape = next(iter(shapes), ()) if rows is None else rows[0]
    if cond is not None and (cond.outvars[0].aval.shape != () or np.dtype(cond.outvars[0].aval.dtype) != np.bool_):
        return None
    helpers: list[str] = []
    if cond is not None and has_reduction(cond):
        src = reduction_source(cond, f"{name}_cond")
        if src is None:
            return None
        helpers.append(_static(src))
    elif cond is not None and not _elementwise(cond, shape, scalar_only=True):
        return None
    if has_reduction(body) or rows is not None:
        src = reduction_source(body, f"{name}_body", rows if not has_reduction(body) else None)
        if src is None:
            return None
        helpers.append(_static(src))
    elif not _elementwise(body, shape, broadcast=body.invars[nc + len(scanned.xs):]):
        return None
    n_xs = len(scanned.xs)
    n_bc = len(body.invars) - nc - n_xs
    cc = list(cond.invars[nc:]) if cond is not None else []
    bc = list(body.invars[nc + n_xs:])
    ins = cc + bc + list(carries) + list(scanned.xs)
    x_from = len(cc) + len(bc) + nc
    params = [f"const {ctype(v.aval.dtype)} *a{k}" for k, v in enumerate(ins)]
    params += [f"{ctype(v.aval.dtype)} *o{j}" for j, v in enumerate([*carries, *ys])]
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
            lines.append(f"for (int64_t i = 0; i < {v.aval.size}; i++) o{j}[i] = {src}[i];")
    pointers = [f"&{n}" if n.startswith("s") else n for n in carry_name]
    const_name = {}
    for k, v in enumerate(cc + bc):
        if v.aval.shape == ():
            lines.append(f"const {ctype(v.aval.dtype)} c{k} = a{k}[0];")
            const_name[k] = f"c{k}"
    lines.append("int64_t it = 0;")
    loop = [f"for (; it < {length}; it++) {{"] if cond is None else ["for (;; it++) {"]
    step: list[str] = []
    if scanned.xs or ys:
        step.append(f"const int64_t ix = {f'{length} - 1 - it' if scanned.reverse else 'it'};")
    if cond is not None and has_reduction(cond):
        args = [*pointers, *(f"a{k}" for k in range(n_cc))]
        step += ["uint8_t go;", f"{name}_cond({', '.join(args)}, &go);", "if (!go) break;"]
    elif cond is not None:
        names = {v: carry_name[j] for j, v in enumerate(cond.invars[:nc]) if v.aval.shape == ()}
        names.update({v: const_name[k] for k, v in enumerate(cc) if v.aval.shape == ()})
        emit_eqns(cond.eqns, names, step, counter)
        step.append(f"if (!{names[cond.outvars[0]]}) break;")
    if has_reduction(body) or rows is not None:
        xs = [f"(a{x_from + k} + ix * {v.aval.size})" for k, v in enumerate(scanned.xs)]
        ys_at = [f"(o{nc + k} + ix * {y.aval.size})" for k, y in enumerate(ys)]
        args = [*pointers, *xs, *(f"a{n_cc + k}" for k in range(n_bc)), *pointers, *ys_at]
        step.append(f"{name}_body({', '.join(args)});")
    else:
        split = _Split(name, threads(), helpers)
        step += _element_step(body, carries, carry_name, const_name, n_cc, scanned, x_from, shape, counter, split)
    lines += loop + ["    " + x for x in step] + ["}"]
    lines += [f"o{j}[0] = s{j};" for j, v in enumerate(carries) if v.aval.shape == ()]
    lines.append("return it;")
    function = [f"int64_t {name}({', '.join(params)})", "{", *("    " + x for x in lines), "}", ""]
    return "\n".join([*helpers, *function])


def _static(source: str) -> str:
    """A generated function (and the chunk function it may hand to the pool) file-local."""
    return "\n".join("static " + line if line.startswith("void ") else line for line in source.split("\n"))


def _element_step(body: Graph, carries: Sequence[Var], carry_name: list[str], const_name: dict[int, str], n_cc: int,
                  scanned: Scanned, x_from: int, shape: tuple[int, ...], counter: Iterator[int],
                  split: _Split | None = None) -> list[str]:
    """One iteration of an elementwise body: its scalar equations once, then one pass over
    the elements computing the array ones and storing the carries and a scan's outputs."""
    size = math.prod(shape)
    nc = len(carries)
    n_xs = len(scanned.xs)
    bc = list(body.invars[nc + n_xs:])
    step: list[str] = []
    names: dict[Var, str] = {}
    element: dict[Var, str] = {}
    for j, v in enumerate(body.invars[:nc]):
        (names if v.aval.shape == () else element)[v] = carry_name[j]
    for k, v in enumerate(scanned.xs):
        if v.aval.shape == ():
            names[v] = f"x{k}"
            step.append(f"const {ctype(v.aval.dtype)} x{k} = a{x_from + k}[ix];")
        else:
            element[v] = f"(a{x_from + k} + ix * {size})"
    for k, v in enumerate(bc):
        (names if v.aval.shape == () else element)[v] = const_name.get(n_cc + k, f"a{n_cc + k}")
    scalar_eqns = [e for e in body.eqns if e.outputs[0].aval.shape == ()]
    array_eqns = [e for e in body.eqns if e.outputs[0].aval.shape != ()]
    emit_eqns(scalar_eqns, names, step, counter)
    stores = [(f"o{j}", body.outvars[j]) for j, v in enumerate(carries) if v.aval.shape != ()]
    ys = body.outvars[nc:nc + scanned.n_ys]
    stores += [(f"(o{nc + k} + ix * {size})", y) for k, y in enumerate(ys) if y.aval.shape != ()]
    if stores and size > 0:
        variants = _uniform_variants(array_eqns, stores)
        for k, (picks, eqns, kept) in enumerate(variants):
            test = " && ".join(names[p] if taken else f"!{names[p]}" for p, taken in picks)
            head = [] if len(variants) == 1 else [f"{'if' if k == 0 else '} else if'} ({test or '1'}) {{"]
            body_lines = _element_pass(eqns, element, dict(names), counter, shape, kept, split)
            step += head + [("    " if head else "") + x for x in body_lines]
        step += ["}"] if len(variants) > 1 else []
    step += [f"o{nc + k}[ix] = {names[y]};" for k, y in enumerate(ys) if y.aval.shape == ()]
    scalars = [j for j, v in enumerate(carries) if v.aval.shape == ()]
    news = [names[body.outvars[j]] for j in scalars]
    step += [f"const {ctype(carries[j].aval.dtype)} n{j} = {n};" for j, n in zip(scalars, news)]
    step += [f"s{j} = n{j};" for j in scalars]
    return step


#: The most scalar predicates of array ``select``s (a ``cond``'s branch choice) whose every
#: combination gets an element pass of its own.
UNIFORM_PICKS = 2


def _uniform_variants(eqns: Sequence[Eqn], stores: Sequence[tuple[str, Var]]
                      ) -> list[tuple[tuple[tuple[Var, bool], ...], list[Eqn], list[tuple[str, Var]]]]:
    """The element pass specialised on the scalar predicates of its ``select``s (a ``cond``
    in the body, :func:`inline_conds`): one variant per combination of their values, each
    computing only the branch it takes, as ``(predicates and values, equations, stores)``.
    One unspecialised variant when there are none, more than :data:`UNIFORM_PICKS`, or a
    branch returns a literal."""
    selects = [e for e in eqns if e.primitive.name == "select" and isinstance(e.inputs[0], Var)
               and e.inputs[0].aval.shape == ()]
    preds = list(dict.fromkeys(e.inputs[0] for e in selects))
    if not preds or len(preds) > UNIFORM_PICKS or any(isinstance(a, Literal) for e in selects for a in e.inputs[1:]):
        return [((), list(eqns), list(stores))]
    variants = []
    for values in itertools.product((True, False), repeat=len(preds)):
        taken = dict(zip(preds, values))
        alias: dict[Var, Var] = {}
        kept: list[Eqn] = []
        for e in eqns:
            ins = tuple(alias.get(a, a) if isinstance(a, Var) else a for a in e.inputs)
            if e in selects:
                alias[e.outputs[0]] = ins[1] if taken[e.inputs[0]] else ins[2]  # type: ignore[assignment]
            else:
                kept.append(Eqn(e.primitive, ins, e.outputs, e.params, e.source))
        out = [(ptr, alias.get(v, v)) for ptr, v in stores]
        variants.append((tuple(taken.items()), _live(kept, [v for _, v in out]), out))
    return variants


def _live(eqns: Sequence[Eqn], wanted: Sequence[Var]) -> list[Eqn]:
    """The equations of ``eqns`` that ``wanted`` depends on, in order."""
    need = set(wanted)
    kept = []
    for e in reversed(eqns):
        if e.outputs[0] in need:
            kept.append(e)
            need.update(a for a in e.inputs if isinstance(a, Var))
    return kept[::-1]


def _element_pass(eqns: Sequence[Eqn], element: dict[Var, str], names: dict[Var, str], counter: Iterator[int],
                  shape: tuple[int, ...], stores: Sequence[tuple[str, Var]], split: _Split | None = None,
                  ranged: frozenset[str] = RANGED) -> list[str]:
    """The element pass of one iteration: with a function of ``ranged`` (sin, cos, tan, tanh:
    :data:`~.codegen.RANGED`), a check of their arguments and the fast or the full-range
    versions (:func:`_element_loop`). The check, a few operations per element, stays on one
    thread (see :meth:`_Split.splits`): split, its job often lost to the pool's overhead,
    and the pool's back-off then ran the large passes after it alone too."""
    if not any(e.primitive.name in ranged for e in eqns):
        return _element_loop(eqns, element, names, counter, shape, "full", stores, split, ranged)
    check = _element_loop(eqns, element, dict(names), counter, shape, "check", (), None, ranged)
    small = _element_loop(eqns, element, dict(names), counter, shape, "small", stores, split, ranged)
    full = _element_loop(eqns, element, names, counter, shape, "full", stores, split, ranged)
    return ["int ok = 1;", *check, "if (ok) {", *("    " + x for x in small), "} else {",
            *("    " + x for x in full), "}"]


@dataclass(frozen=True)
class _Split:
    """Where a loop's large element passes go to be split across ``threads`` threads by
    fgpool.h: each becomes a chunk function ``<name>_pass<k>`` (appended to ``helpers``) that
    an iteration hands to ``fg_parallel``, the pool's workers spinning between iterations."""

    name: str
    threads: int
    helpers: list[str]

    def splits(self, extents: Sequence[int], eqns: Sequence[Eqn]) -> bool:
        """Whether a pass over ``extents`` computing ``eqns`` is split: a large one whose
        elements cost a polynomial (:data:`~.codegen.TRANSCENDENTAL`). Split, a pass of a few
        operations per element took twice as long (``x * 0.99 + 1e-3`` over 40,000 to 1M
        float64: each iteration's chunks land on the other core's cache), where ``tanh`` took
        half the time."""
        return (self.threads > 1 and bool(extents) and extents[0] > 1 and math.prod(extents) >= PARALLEL_MIN_ELEMENTS
                and any(e.primitive.name in TRANSCENDENTAL for e in eqns))

    def chunk(self, extents: Sequence[int]) -> int:
        """Outer indices per chunk: about :data:`CHUNK_ELEMENTS` elements, as many chunks per
        thread each (an iteration waits for its last chunk), a multiple of 16 in a flat loop."""
        inner = math.prod(extents[1:])
        per_thread = -(-extents[0] * inner // (self.threads * CHUNK_ELEMENTS))
        rows = -(-extents[0] // (self.threads * max(1, per_thread)))
        return max(1, -(-rows // 16) * 16 if inner == 1 else rows)


def _element_loop(eqns: Sequence[Eqn], element: dict[Var, str], names: dict[Var, str], counter: Iterator[int],
                  shape: tuple[int, ...], trig: str, stores: Sequence[tuple[str, Var]],
                  split: _Split | None = None, ranged: frozenset[str] = RANGED) -> list[str]:
    """One pass over the elements of ``shape`` computing ``eqns`` (:func:`emit_eqns`'s
    ``trig``) and storing each value of ``stores`` at its pointer; a ``check`` pass stores
    nothing and AND-reduces ``ok`` (so the compiler keeps only what the trig arguments need).
    A loop nest as a region's (:func:`~.codegen.loop_axes`): one flat loop unless a constant
    is broadcast. A large pass under ``split`` runs as a chunk function through the pool."""
    extents, strides = loop_axes(shape, [tuple(v.aval.shape) for v in element])
    if split is not None and split.splits(extents, eqns):
        return _outlined(eqns, element, names, counter, extents, strides, trig, stores, split, ranged)
    return _nest(eqns, element, names, counter, extents, strides, trig, stores, "0", ranged)


def _nest(eqns: Sequence[Eqn], element: dict[Var, str], names: dict[Var, str], counter: Iterator[int],
          extents: Sequence[int], strides: Sequence[Sequence[int]], trig: str, stores: Sequence[tuple[str, Var]],
          lo: str, ranged: frozenset[str] = RANGED) -> list[str]:
    """The loop nest of :func:`_element_loop`, its outermost loop from ``lo`` (to ``hi``
    unless ``lo`` is "0")."""
    index_vars = [f"i{k}" for k in range(len(extents))]

    def index(st: Sequence[int]) -> str:
        return " + ".join(v if s == 1 else f"{v} * {s}" for v, s in zip(index_vars, st) if s != 0) or "0"

    inner: list[str] = []
    for (v, ptr), st in zip(element.items(), strides):
        names[v] = f"e{next(counter)}"
        inner.append(f"const {ctype(v.aval.dtype)} {names[v]} = {ptr}[{index(st)}];")
    emit_eqns(eqns, names, inner, counter, trig, ranged)
    inner += [f"{ptr}[{index(strides[-1])}] = {names[v]};" for ptr, v in stores]
    pragma = "#pragma omp simd reduction(&:ok)" if trig == "check" else "#pragma omp simd"
    out: list[str] = []
    for k, (v, d) in enumerate(zip(index_vars, extents)):
        pad = "    " * k
        if k == len(extents) - 1:
            out.append(pad + pragma)
        start, stop = (lo, "hi") if k == 0 and lo != "0" else ("0", d)
        out.append(pad + f"for (int64_t {v} = {start}; {v} < {stop}; {v}++) {{")
    out += ["    " * len(extents) + x for x in inner]
    out += ["    " * k + "}" for k in reversed(range(len(extents)))]
    return out


def _outlined(eqns: Sequence[Eqn], element: dict[Var, str], names: dict[Var, str], counter: Iterator[int],
              extents: Sequence[int], strides: Sequence[Sequence[int]], trig: str, stores: Sequence[tuple[str, Var]],
              split: _Split, ranged: frozenset[str] = RANGED) -> list[str]:
    """The pass as chunk function ``<name>_pass<k>`` over a range of its outermost index
    (added to ``split.helpers``) and the iteration's call handing it to the pool: the element
    pointers, the stores' pointers and the scalars the pass reads travel as ``args`` (a
    ``check`` pass also gets ``ok``, which a chunk clears when an argument is out of range)."""
    fn = f"{split.name}_pass{len(split.helpers)}"
    made = {o for e in eqns for o in e.outputs}
    scalars = dict.fromkeys(names[a] + " " + ctype(a.aval.dtype) for e in eqns for a in e.inputs
                            if isinstance(a, Var) and a not in made and a not in element)
    args, unpack = [], []
    local: dict[Var, str] = {}
    for j, (v, ptr) in enumerate(element.items()):
        t = ctype(v.aval.dtype)
        local[v] = f"p{j}"
        unpack.append(f"const {t} *p{j} = (const {t} *)args[{len(args)}];")
        args.append(f"(void *)({ptr})")
    out_ptrs = []
    for j, (ptr, v) in enumerate(stores):
        t = ctype(v.aval.dtype)
        out_ptrs.append((f"w{j}", v))
        unpack.append(f"{t} *w{j} = ({t} *)args[{len(args)}];")
        args.append(f"(void *)({ptr})")
    for item in scalars:
        n, t = item.split(" ", 1)
        unpack.append(f"const {t} {n} = *(const {t} *)args[{len(args)}];")
        args.append(f"(void *)&{n}")
    nest = _nest(eqns, local, dict(names), counter, extents, strides, trig, out_ptrs, "lo", ranged)
    lines = [f"static void {fn}(void *const *args, int64_t lo, int64_t hi)", "{", *("    " + x for x in unpack)]
    if trig == "check":
        lines.append("    int ok = 1;")
        args.append("(void *)&ok")
    lines += ["    " + x for x in nest]
    if trig == "check":
        lines.append(f"    if (!ok) __atomic_store_n((int *)args[{len(args) - 1}], 0, __ATOMIC_RELAXED);")
    split.helpers.append("\n".join([*lines, "}", ""]))
    return [f"void *const args_{fn}[] = {{{', '.join(args)}}};",
            f"fg_parallel({fn}, args_{fn}, {extents[0]}, {split.chunk(extents)}, {split.threads});"]


def inline_conds(graph: Graph) -> Graph | None:
    """``graph`` with every ``cond`` replaced by all its branches' equations and, per output,
    a ``select`` on the clamped index (``index >= k`` picks branch ``k`` over the ones
    before): what an elementwise loop body computes in one pass over the elements, each
    element taking the branch the iteration's index names. None when a branch has
    constants of its own."""
    if not any(e.primitive.name == "cond" for e in graph.eqns):
        return graph
    sub: dict[Var, Atom] = {}

    def atom(a: Atom) -> Atom:
        return a if isinstance(a, Literal) else sub.get(a, a)

    eqns: list[Eqn] = []
    for e in graph.eqns:
        if e.primitive.name != "cond":
            eqns.append(Eqn(e.primitive, tuple(map(atom, e.inputs)), e.outputs, e.params, e.source))
            continue
        index, *operands = map(atom, e.inputs)
        branches = [inline_conds(b) for b in e.params["branches"]]
        if any(b is None or b.constvars for b in branches):
            return None
        results = []
        for b in branches:
            assert b is not None
            rename: dict[Var, Atom] = dict(zip(b.invars, operands))
            for q in b.eqns:
                outs = tuple(Var(o.aval) for o in q.outputs)
                ins = tuple(a if isinstance(a, Literal) else rename[a] for a in q.inputs)
                rename.update(zip(q.outputs, outs))
                eqns.append(Eqn(q.primitive, ins, outs, q.params, q.source))
            results.append([a if isinstance(a, Literal) else rename[a] for a in b.outvars])
        for j, o in enumerate(e.outputs):
            chosen = results[0][j]
            for k in range(1, len(branches)):
                pick, out = Var(ShapedArray((), np.dtype(np.bool_))), Var(o.aval)
                bound = Literal(k, ShapedArray((), np.dtype(index.aval.dtype)))
                eqns.append(Eqn(ge_p, (index, bound), (pick,), Params({}), e.source))
                eqns.append(Eqn(select_p, (pick, results[k][j], chosen), (out,), Params({}), e.source))
                chosen = out
            sub[o] = chosen
    return Graph(graph.invars, graph.constvars, graph.consts, tuple(eqns), tuple(map(atom, graph.outvars)))


def _bind(fn: Any, in_dtypes: Sequence[np.dtype], out_avals: Sequence[ShapedArray], carry_from: int, n_carry: int,
          counted: bool) -> Lowering:
    """``fn`` as a lowering: inputs as contiguous arrays of their dtypes, outputs written into
    the planned buffers (through a temporary when one is not contiguous). An input sharing a
    buffer with an output other than its own carry's is copied first, since the function
    copies the initial carries into the outputs before it reads the constants. ``counted``
    adds the iterations to ``LOOP_STATS`` as the CPU engine's while loop does."""
    fn.argtypes = [ctypes.c_void_p] * (len(in_dtypes) + len(out_avals))
    fn.restype = ctypes.c_int64
    shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in out_avals]

    def run(outputs: Sequence[np.ndarray | None], *args: Any, **_: Any) -> Sequence[np.ndarray]:
        targets = [o if o is not None and o.flags.c_contiguous else np.empty(*a)
                   for o, a in zip(outputs, shapes)]
        out_ptrs = [t.ctypes.data for t in targets]
        held, ptrs = [], []
        for k, (x, dt) in enumerate(zip(args, in_dtypes)):
            x = np.asarray(x)
            if not x.flags.c_contiguous or x.dtype != dt:
                x = np.ascontiguousarray(x, dtype=dt)
            own = k - carry_from
            if x.nbytes and x.ctypes.data in out_ptrs and not (0 <= own < n_carry
                                                                and out_ptrs[own] == x.ctypes.data):
                x = x.copy()
            held.append(x)
            ptrs.append(x.ctypes.data)
        iterations = fn(*ptrs, *out_ptrs)
        NATIVE_LOOP_STATS["runs"] += 1
        if counted:
            LOOP_STATS["iterations"] += iterations
        return returned(outputs, targets)

    return run


def _built(source: str | None, ins: Sequence[Any], outs: Sequence[ShapedArray], carry_from: int, n_carry: int,
           counted: bool) -> Lowering | None:
    """The loop ``source`` built and bound (``ins``: the C function's inputs, as values with
    avals, in its order)."""
    if source is None:
        return None
    lib = build(prelude() + "\n" + source, INCLUDES)
    if lib is None:
        return None
    return _bind(lib.fg_loop, [np.dtype(v.aval.dtype) for v in ins], outs, carry_from, n_carry, counted)


def loop_lowering(eqn: Eqn) -> Lowering | None:
    """The native lowering of a ``while`` or ``scan`` equation whose whole loop is elementwise
    (module docstring); None when the engine is off, the loop is not, or the build failed."""
    if not native_enabled():
        return None
    p = eqn.params
    outs = [o.aval for o in eqn.outputs]
    if eqn.primitive.name == "while":
        body, cond = inline_conds(p["body_graph"]), inline_conds(p["cond_graph"])
        if body is None or cond is None:
            return None
        nc = len(body.outvars)
        if len(cond.invars) - nc != p["n_cc"] or len(body.invars) - nc != p["n_bc"]:
            return None
        ins = list(cond.invars[nc:]) + list(body.invars[nc:]) + list(body.invars[:nc])
        src = loop_source("fg_loop", body.invars[:nc], cond, p["n_cc"], body, None)
        return _built(src, ins, outs, p["n_cc"] + p["n_bc"], nc, True)
    if eqn.primitive.name == "scan":
        body, nc, nx = inline_conds(p["body"]), p["num_carry"], p["num_xs"]
        if body is None:
            return None
        consts = list(body.invars[nc + nx:])
        scanned = Scanned(tuple(body.invars[nc:nc + nx]), len(body.outvars) - nc, bool(p["reverse"]))
        src = loop_source("fg_loop", body.invars[:nc], None, 0, body, int(p["length"]), scanned)
        # a scan's arguments are carries, scanned inputs, then constants
        xs = list(eqn.inputs[nc:nc + nx])
        lowering = _built(src, consts + list(body.invars[:nc]) + xs, outs, len(consts), nc, False)
        if lowering is None:
            return None
        return lambda outs, *args, **kw: lowering(outs, *args[nc + nx:], *args[:nc], *args[nc:nc + nx], **kw)
    return None
