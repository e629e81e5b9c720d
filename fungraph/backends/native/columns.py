"""C source for regions reducing *leading* axes (a bias gradient's ``sum(g, axis=0)``, a mean
over a batch): the domain is ``R`` slices of ``C`` contiguous columns, and each reduction's
result holds one value per column. See :class:`_Columns`; the region pass keeps elements that
read column values out of such regions, so one pass over the slices computes them all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from fungraph.backends.native.codegen import (
    C_TYPES,
    CHUNK_ELEMENTS,
    PARALLEL_MIN_ELEMENTS,
    RULES,
    ctype,
    emit_eqns,
    pool_arguments,
)
from fungraph.backends.native.reducers import (
    MOVES,
    NAME,
    REDUCERS,
    Unsupported,
    contiguous,
    identity,
    reducible,
    wide_sum,
)
from fungraph.interpreters.regions import leading_axes, row_layout
from fungraph.ir import Eqn, Graph, Literal, Var


def column_source(body: Graph, n_threads: int) -> str | None:
    """``void NAME(const T0 *a0, ..., T *o0, ...)`` for region ``body`` walked by columns,
    split across ``n_threads`` when large; None when it is not such a region."""
    try:
        return _Columns(body, n_threads).source()
    except Unsupported:
        return None


#: Columns a column region accumulates at a time (arrays of this length on the stack).
COLUMN_BLOCK = 64


class _Columns:
    """A region reducing *leading* axes (a bias gradient's ``sum(g, axis=0)``): the domain is
    ``R`` slices of ``C`` contiguous columns, each reduction's result a *column value* (one per
    column). One pass walks the slices over a block of columns, computing the element values,
    storing the outputs of the domain's shape and accumulating the reductions per column;
    then the column values are computed and stored. Elements never read column values (the
    region pass keeps such readers out), so one pass suffices; blocks of columns are
    independent, and a large region hands them to the pool. Float sums accumulate in
    ``double`` one slice after another (numpy's own order for a leading axis)."""

    def __init__(self, body: Graph, n_threads: int) -> None:
        reds = [e for e in body.eqns if e.primitive.name in REDUCERS]
        values = [*body.invars, *(o for e in body.eqns for o in e.outputs)]
        literals = [a for e in body.eqns for a in e.inputs if isinstance(a, Literal)]
        if (not reds or body.constvars or not all(isinstance(o, Var) for o in body.outvars)
                or any(np.dtype(v.aval.dtype) not in C_TYPES for v in [*values, *literals])
                or any(len(e.outputs) != 1 for e in body.eqns) or any(np.ndim(a.array) != 0 for a in literals)):
            raise Unsupported
        self.body, self.n_threads = body, n_threads
        self.domain = tuple(reds[0].inputs[0].aval.shape)
        self.axes = tuple(sorted(reds[0].params["axes"]))
        if not leading_axes(self.domain, self.axes) or any(
                not reducible(e) or not isinstance(e.inputs[0], Var) or tuple(e.inputs[0].aval.shape) != self.domain
                or tuple(sorted(e.params["axes"])) != self.axes for e in reds):
            raise Unsupported
        self.rows = math.prod(self.domain[a] for a in self.axes)
        self.cols = math.prod(self.domain) // self.rows
        self.kind: dict[Var, str] = {}
        self.strides: dict[Var, tuple[int, int]] = {}
        readers: dict[Var, set[str]] = {v: set() for v in body.invars}
        for e in body.eqns:
            elem = tuple(e.outputs[0].aval.shape) == self.domain or e.primitive.name in REDUCERS
            for a in e.inputs:
                if isinstance(a, Var) and a in readers:
                    readers[a].add("elem" if elem else "col")
        for v in body.outvars:
            if v in readers:
                readers[v].add("col")
        self.readers_col = {v for v, how in readers.items() if "col" in how}
        for v, how in readers.items():
            self._input(v, how)
        for e in body.eqns:
            self._classify(e)

    def _input(self, v: Var, how: set[str]) -> None:
        """An input's kind: ``scalar`` (one element), else ``input``, with its strides over
        slices and columns when elements read it (broadcast as numpy aligns it) and in column
        layout when column values do."""
        shape = tuple(v.aval.shape)
        if math.prod(shape) == 1:
            self.kind[v] = "scalar"
            return
        if "col" in how and not row_layout(shape, self.domain, self.axes):
            raise Unsupported
        self.kind[v] = "input"
        if "elem" not in how:
            return
        if len(shape) > len(self.domain):
            raise Unsupported
        padded = (1,) * (len(self.domain) - len(shape)) + shape
        if any(p not in (1, d) for p, d in zip(padded, self.domain)):
            raise Unsupported
        strides = [0 if p == 1 else st for p, st in zip(padded, contiguous(padded))]
        reduced = [(strides[k], self.domain[k]) for k in range(len(self.domain)) if k in self.axes]
        kept = [(strides[k], self.domain[k]) for k in range(len(self.domain)) if k not in self.axes]
        self.strides[v] = (_flat(reduced), _flat(kept))

    def _classify(self, e: Eqn) -> None:
        out = e.outputs[0]
        ins = [a for a in e.inputs if isinstance(a, Var)]
        kinds = {self.kind[a] for a in ins}
        shape = tuple(out.aval.shape)
        if e.primitive.name in REDUCERS:
            if not kinds <= {"elem", "input"}:
                raise Unsupported
            self.kind[out] = "col"
        elif e.primitive.name in MOVES:
            if kinds != {"col"} or not row_layout(shape, self.domain, self.axes):
                raise Unsupported
            self.kind[out] = "col"
        elif e.primitive.name not in RULES:
            raise Unsupported
        elif shape == self.domain and kinds <= {"elem", "scalar", "input"}:
            self.kind[out] = "elem"
        elif shape != self.domain and row_layout(shape, self.domain, self.axes) and kinds <= {"col", "scalar", "input"}:
            self.kind[out] = "col"
        else:
            raise Unsupported

    def source(self) -> str:
        body = self.body
        counter = itertools.count()
        params = [f"const {ctype(v.aval.dtype)} *a{j}" for j, v in enumerate(body.invars)]
        params += [f"{ctype(o.aval.dtype)} *o{j}" for j, o in enumerate(body.outvars)]
        names: dict[Var, str] = {}
        pre = []
        for j, v in enumerate(body.invars):
            if self.kind[v] == "scalar":
                names[v] = f"x{j}"
                pre.append(f"const {ctype(v.aval.dtype)} x{j} = a{j}[0];")
        outs = {o: j for j, o in enumerate(body.outvars)}
        reds = [k for k, e in enumerate(body.eqns) if e.primitive.name in REDUCERS]
        block = [q for k in reds for q in _column_start(body.eqns[k], f"q{k}")]
        inner: list[str] = []
        local = dict(names)
        for j, v in enumerate(body.invars):
            if v in self.strides:
                s_row, s_col = self.strides[v]
                at = " + ".join(t for t in (f"r * {s_row}" if s_row else "", f"(c0 + c) * {s_col}" if s_col else "")
                                if t) or "0"
                local[v] = f"e{next(counter)}"
                inner.append(f"const {ctype(v.aval.dtype)} {local[v]} = a{j}[{at}];")
        emit_eqns([e for e in body.eqns if self.kind[e.outputs[0]] == "elem" and e.primitive.name not in REDUCERS],
                  local, inner, counter)
        inner += [f"o{outs[o]}[r * {self.cols} + c0 + c] = {local[o]};" for o in body.outvars if self.kind[o] == "elem"]
        for k in reds:
            inner += _column_add(body.eqns[k], f"q{k}", local[body.eqns[k].inputs[0]])  # type: ignore[index]
        block += [f"for (int64_t r = 0; r < {self.rows}; r++) {{", "    #pragma omp simd",
                  "    for (int64_t c = 0; c < n; c++) {", *("        " + x for x in inner), "    }", "}"]
        finish: list[str] = []
        cols = dict(names)
        for j, v in enumerate(body.invars):
            if self.kind[v] == "input" and v in self.readers_col:
                cols[v] = f"e{next(counter)}"
                finish.append(f"const {ctype(v.aval.dtype)} {cols[v]} = a{j}[c0 + c];")
        for k, e in enumerate(body.eqns):
            out = e.outputs[0]
            if k in reds:
                cols[out] = f"v{next(counter)}"
                finish += _column_finish(e, f"q{k}", cols[out])
            elif self.kind[out] == "col" and e.primitive.name in MOVES:
                cols[out] = cols[e.inputs[0]]  # type: ignore[index]
            elif self.kind[out] == "col":
                emit_eqns([e], cols, finish, counter)
        finish += [f"o{outs[o]}[c0 + c] = {cols[o]};" for o in body.outvars if self.kind[o] == "col"]
        block += ["#pragma omp simd", "for (int64_t c = 0; c < n; c++) {", *("    " + x for x in finish), "}"]
        unpack, pointers = pool_arguments(params)
        chunk = max(1, -(-CHUNK_ELEMENTS // self.rows // COLUMN_BLOCK)) * COLUMN_BLOCK
        split = self.n_threads > 1 and math.prod(self.domain) >= PARALLEL_MIN_ELEMENTS and self.cols > chunk
        call = (f"fg_parallel({NAME}_cols, args, {self.cols}, {chunk}, {self.n_threads});" if split
                else f"{NAME}_cols(args, 0, {self.cols});")
        out = [f"static void {NAME}_cols(void *const *args, int64_t lo, int64_t hi)", "{",
               *("    " + x for x in unpack),
               *("    " + x for x in pre), f"    for (int64_t c0 = lo; c0 < hi; c0 += {COLUMN_BLOCK}) {{",
               f"        const int64_t n = hi - c0 < {COLUMN_BLOCK} ? hi - c0 : {COLUMN_BLOCK};",
               *("        " + x for x in block), "    }", "}", "",
               f"void {NAME}({', '.join(params)})", "{", f"    void *const args[] = {{{', '.join(pointers)}}};",
               f"    {call}", "}", ""]
        return "\n".join(out)


def _flat(axes: Sequence[tuple[int, int]]) -> int:
    """One stride walking ``axes`` (``(stride, extent)`` pairs) as one flat index: 0 when none
    moves, else the innermost moving stride, when the others are its contiguous multiples."""
    moving = [(s, d) for s, d in axes if d > 1]
    if not any(s for s, _ in moving):
        return 0
    step = moving[-1][0]
    for s, d in reversed(moving):
        if s != step:
            raise Unsupported
        step *= d
    return moving[-1][0]


def _column_start(e: Eqn, acc: str) -> list[str]:
    """Reduction ``e``'s accumulators of a block of columns, started."""
    dt = np.dtype(e.inputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum":
        t = "double" if dt.kind == "f" else wide_sum(dt)
        return [f"{t} {acc}[{COLUMN_BLOCK}];", f"for (int64_t c = 0; c < n; c++) {acc}[c] = 0;"]
    sign = "max" if e.primitive.name == "reduce_max" else "min"
    return [f"{ctype(dt)} {acc}[{COLUMN_BLOCK}];", f"uint8_t {acc}_n[{COLUMN_BLOCK}];",
            f"for (int64_t c = 0; c < n; c++) {{ {acc}[c] = {identity(dt, sign)}; {acc}_n[c] = 0; }}"]


def _column_add(e: Eqn, acc: str, v: str) -> list[str]:
    dt = np.dtype(e.inputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum":
        return [f"{acc}[c] += {'(double)' if dt.kind == 'f' else f'({wide_sum(dt)})'}{v};"]
    op = ">" if e.primitive.name == "reduce_max" else "<"
    lines = [f"{acc}[c] = {v} {op} {acc}[c] ? {v} : {acc}[c];"]
    return lines + ([f"{acc}_n[c] |= {v} != {v};"] if dt.kind == "f" else [])


def _column_finish(e: Eqn, acc: str, name: str) -> list[str]:
    t = ctype(e.outputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum" or np.dtype(e.inputs[0].aval.dtype).kind != "f":
        return [f"const {t} {name} = ({t}){acc}[c];"]
    return [f"const {t} {name} = {acc}_n[c] ? ({t})NAN : {acc}[c];"]


