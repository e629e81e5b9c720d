"""C source for regions holding reductions (``find_regions`` under the CPU engine's
``reduces``): softmax's ``exp(x - max(x)) / sum(...)``, layer norm's mean and variance, a sum
of an elementwise chain, ``x / sum(x)``.

Every reduction of such a region reduces the same trailing axes of the region's shape, so
the region is a loop over *rows* (the kept axes), each row a contiguous run of ``L``
elements (a region reducing *leading* axes, a bias gradient's ``sum(g, axis=0)``, is walked
by columns instead: :mod:`.columns`). A value of the body is an *element* value (one per element of a row) or a *row*
value (one per row: a reduction's result, what is computed from it, a keep-dims broadcast of
it). Per row, the generated code runs one pass over the row's elements per level of
reductions: a pass computes the element values its reductions need (in registers, as a
region does) and accumulates them; between passes the row values are computed once; the
last pass stores the region's outputs of its shape. Softmax is three passes over a row (max;
exp and sum; exp and divide), each from cache once the first has read the row.

An element value needed in two passes (``exp`` in softmax) is kept for the later one in an
array of the row's length on the stack (:data:`STASH_ELEMENTS`), or computed again in longer
rows: nothing is stored but the outputs, so an output may take an input's buffer as in any
region (every read of a row comes before the last pass writes it).

Sums are accumulated in ``double`` (float32 operands too), in blocks of :data:`SUM_BLOCK`
elements whose sums are added pairwise, as numpy's pairwise summation does: the error of a
float64 sum of ``n`` terms is at most ``(SUM_BLOCK + 2 ceil(log2 ceil(n / SUM_BLOCK)) + 1)
eps sum |x|`` (numpy's own bound has 128 + log2(n / 128)), and a float32 sum is the double
sum rounded once. Integer sums wrap as numpy's do; ``max`` and ``min`` propagate NaN.

A large region hands ranges of its rows to the process's pool (fgpool.h); a region of one long
row whose reductions all take one pass (a reducing ``while``'s cond over a large carry) hands
it chunks of the row instead, each a power of two sum blocks, whose partial values it
combines in chunk order: the same bits as one thread.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from fungraph.backends.native.codegen import (
    C_TYPES,
    CHUNK_ELEMENTS,
    PARALLEL_MIN_ELEMENTS,
    RULES,
    ctype,
    emit_eqns,
    pool_arguments,
    threads,
)
from fungraph.backends.native.columns import column_source
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
from fungraph.interpreters.regions import broadcasts_by_row, expanded_shape, row_layout, trailing_axes
from fungraph.ir import Eqn, Graph, Literal, Var

#: Elements per block of a sum; the blocks' sums are added pairwise (module docstring).
SUM_BLOCK = 128

#: The longest row whose element values a later pass loads from a stash on the stack (one
#: array of a row's length per stashed value) instead of computing them again.
STASH_ELEMENTS = 4096

def reduction_source(body: Graph, name: str, rows: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> str | None:
    """``void name(const T0 *a0, ..., T *o0, ...)``: region ``body`` (holding reductions) over
    C-contiguous inputs and outputs, row by row (module docstring); None when the generator
    cannot express it, which leaves the region to the numpy engine. ``rows`` (a shape and
    its trailing axes) gives the rows of a body without reductions whose values are of that
    shape or one per row (a loop body under ``vmap``: its batched counter beside its carry)."""
    text = _source(body, rows, threads())
    return None if text is None else text.replace(NAME, name)


@functools.lru_cache(maxsize=256)
def _source(body: Graph, rows: tuple[tuple[int, ...], tuple[int, ...]] | None, n_threads: int) -> str | None:
    """The source for ``body``'s structure (graphs compare structurally) split across
    ``n_threads``, named ``NAME``: row by row, or column by column when its reductions
    reduce leading axes (:class:`_Columns`)."""
    try:
        return _Rows(body, rows, n_threads).source()
    except Unsupported:
        pass
    if rows is not None:
        return None
    return column_source(body, n_threads)


def row_axes(big: tuple[int, ...], small: tuple[int, ...]) -> tuple[int, ...] | None:
    """The trailing axes of ``big`` whose rows ``small`` holds one value of each, or None."""
    for start in range(len(big) - 1, 0, -1):
        axes = tuple(range(start, len(big)))
        if trailing_axes(big, axes) and row_layout(small, big, axes):
            return axes
    return None


class _Rows:
    """One region's analysis and source: ``kind`` (``"row"`` or ``"elem"``) and ``level`` (the
    reductions a value waits for) per value, each input's element strides over the domain."""

    def __init__(self, body: Graph, rows: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
                 n_threads: int = 1) -> None:
        self.n_threads = n_threads
        reds = [e for e in body.eqns if e.primitive.name in REDUCERS]
        values = [*body.invars, *(o for e in body.eqns for o in e.outputs)]
        literals = [a for e in body.eqns for a in e.inputs if isinstance(a, Literal)]
        if ((not reds and rows is None) or body.constvars or not all(isinstance(o, Var) for o in body.outvars)
                or any(np.dtype(v.aval.dtype) not in C_TYPES for v in [*values, *literals])
                or any(len(e.outputs) != 1 for e in body.eqns)
                or any(np.ndim(a.array) != 0 for a in literals)):
            raise Unsupported
        self.body = body
        if rows is None:
            widest = max(reds, key=lambda e: e.inputs[0].aval.size)
            self.domain = tuple(widest.inputs[0].aval.shape)
            self.axes = tuple(sorted(widest.params["axes"]))
        else:
            self.domain, self.axes = rows
        for e in reds:
            operand = e.inputs[0]
            if not reducible(e) or not isinstance(operand, Var):
                raise Unsupported
            if tuple(operand.aval.shape) == self.domain and tuple(sorted(e.params["axes"])) == self.axes:
                continue
            if e.outputs[0].aval.shape != () or tuple(sorted(e.params["axes"])) != tuple(range(operand.aval.ndim)):
                raise Unsupported
        if not trailing_axes(self.domain, self.axes):
            raise Unsupported
        self.kept = [k for k, d in enumerate(self.domain) if k not in self.axes and d > 1]
        self.row_len = math.prod(self.domain[a] for a in self.axes)
        self.kind: dict[Var, str] = {}
        self.level: dict[Var, int] = {}
        self.strides: dict[Var, list[int]] = {}
        self._inputs()
        for e in body.eqns:
            self._classify(e)

    # --- analysis ---------------------------------------------------------------------------

    def _inputs(self) -> None:
        """Each input's strides over the domain's axes, aligned as its readers see it: against
        the domain for members of its shape and reductions, in row layout for row members."""
        readers: dict[Var, set[str]] = {v: set() for v in self.body.invars}
        for e in self.body.eqns:
            out = tuple(e.outputs[0].aval.shape)
            full = out == self.domain or e.primitive.name in REDUCERS
            for a in e.inputs:
                if isinstance(a, Var) and a in readers:
                    if e.primitive.name in MOVES:
                        raise Unsupported
                    readers[a].add("full" if full else "row")
        for o in self.body.outvars:
            if o in readers:
                readers[o].add("full" if tuple(o.aval.shape) == self.domain else "row")
        for v, how in readers.items():
            shape = tuple(v.aval.shape)
            if not how:
                self.strides[v], self.kind[v], self.level[v] = [0] * len(self.domain), "unused", 0
                continue
            if math.prod(shape) == 1:
                strides = [0] * len(self.domain)
            elif how == {"row"}:
                strides = self._row_strides(shape)
            elif how == {"full"}:
                strides = self._broadcast_strides(shape)
            else:
                raise Unsupported
            self.strides[v] = strides
            along = [strides[a] for a in self.axes if self.domain[a] > 1]
            if not any(along):
                self.kind[v] = "row"
            elif along == contiguous([self.domain[a] for a in self.axes if self.domain[a] > 1]):
                self.kind[v] = "elem"
            else:
                raise Unsupported
            self.level[v] = 0

    def _broadcast_strides(self, shape: tuple[int, ...]) -> list[int]:
        if len(shape) > len(self.domain):
            raise Unsupported
        own = contiguous(shape)
        pad = len(self.domain) - len(shape)
        strides = []
        for k, d in enumerate(self.domain):
            if k < pad or shape[k - pad] == 1:
                strides.append(0)
            elif shape[k - pad] == d:
                strides.append(own[k - pad])
            else:
                raise Unsupported
        return strides

    def _row_strides(self, shape: tuple[int, ...]) -> list[int]:
        strides = [0] * len(self.domain)
        if math.prod(shape) == 1:
            return strides
        if not row_layout(shape, self.domain, self.axes):
            raise Unsupported
        for k, s in zip(self.kept, contiguous([d for d in self.domain if d > 1][:len(self.kept)])):
            strides[k] = s
        return strides

    def _classify(self, e: Eqn) -> None:
        out = e.outputs[0]
        shape = tuple(out.aval.shape)
        ins = [a for a in e.inputs if isinstance(a, Var)]
        level = max((self.level[a] for a in ins), default=0)
        name = e.primitive.name
        if any(self.kind[a] == "global" for a in ins) or (name in REDUCERS and tuple(ins[0].aval.shape) != self.domain):
            self._classify_global(e, ins)
            return
        if name in REDUCERS:
            self.kind[out], self.level[out] = "row", level + 1
            return
        if name in MOVES:
            (a,) = ins
            spread = name == "broadcast_in_dim" and shape == self.domain
            ok = self.kind[a] == "row" and (row_layout(shape, self.domain, self.axes) or (
                spread and broadcasts_by_row(expanded_shape(e), self.domain, self.axes)))
            if not ok:
                raise Unsupported
            self.kind[out], self.level[out] = "row", level
            return
        if name not in RULES:
            raise Unsupported
        if shape == self.domain:
            for a in ins:
                if a in self.body.invars:
                    continue
                a_shape = tuple(a.aval.shape)
                if self.kind[a] == "row" and a_shape != self.domain and not broadcasts_by_row(a_shape, self.domain,
                                                                                              self.axes):
                    raise Unsupported
            self.kind[out] = "elem" if any(self.kind[a] == "elem" for a in ins) else "row"
        else:
            if not row_layout(shape, self.domain, self.axes):
                raise Unsupported
            for a in ins:
                if self.kind[a] != "row" or (a not in self.body.invars and tuple(a.aval.shape) != shape):
                    raise Unsupported
            self.kind[out] = "row"
        self.level[out] = level

    def _classify_global(self, e: Eqn, ins: list[Var]) -> None:
        """A *global* value: a reduction of a row value over all rows (``any`` over a batch of
        rows), or a scalar computed from such values. It is known once every row is done, so
        only other global values and the outputs read it."""
        out = e.outputs[0]
        if e.primitive.name in REDUCERS:
            (a,) = ins
            if self.kind[a] != "row" or not row_layout(tuple(a.aval.shape), self.domain, self.axes):
                raise Unsupported
        elif out.aval.shape != () or not (e.primitive.name in RULES or e.primitive.name in MOVES) or any(
                self.kind[a] != "global" and a.aval.size != 1 for a in ins):
            raise Unsupported
        for a in ins:
            if self.kind[a] != "global" and e.primitive.name not in REDUCERS and a not in self.body.invars:
                raise Unsupported
        self.kind[out], self.level[out] = "global", -1

    # --- source -----------------------------------------------------------------------------

    def source(self) -> str:
        """The function: per row, the row values of each level, then the pass over the row's
        elements that the next level's reductions (or the outputs) wait for."""
        body = self.body
        counter = itertools.count()
        names: dict[Var, str] = {}
        outer = [f"r{k}" for k in range(len(self.kept))]
        row_strides = contiguous([self.domain[k] for k in self.kept])
        row = " + ".join(f"{v} * {s}" for v, s in zip(outer, row_strides)) or "0"
        lines = [f"const int64_t row = {row};"]
        pre: list[str] = []
        stores: set[str] = set()
        marks: tuple[int, ...] = ()
        post: list[str] = []

        def base(v: Var) -> str:
            st = self.strides[v]
            return " + ".join(f"{o} * {st[k]}" for o, k in zip(outer, self.kept) if st[k]) or "0"

        for j, v in enumerate(body.invars):
            if self.kind[v] == "unused":
                continue
            if not any(self.strides[v]):
                names[v] = f"x{j}"
                pre.append(f"const {ctype(v.aval.dtype)} x{j} = a{j}[0];")
            elif self.kind[v] == "row":
                names[v] = f"x{j}"
                lines.append(f"const {ctype(v.aval.dtype)} x{j} = a{j}[{base(v)}];")
            else:
                lines.append(f"const {ctype(v.aval.dtype)} *p{j} = a{j} + {base(v)};")
        outs = {o: j for j, o in enumerate(body.outvars)}
        reds = [k for k, e in enumerate(body.eqns) if e.primitive.name in REDUCERS and self.kind[e.outputs[0]] == "row"]
        across = [k for k, e in enumerate(body.eqns) if e.primitive.name in REDUCERS and k not in reds]
        for k in across:
            pre += _global_start(body.eqns[k], f"g{k}")
        full_outs = [o for o in body.outvars if tuple(o.aval.shape) == self.domain]
        last = max([self.level[body.eqns[k].inputs[0]] for k in reds] + [self.level[o] for o in full_outs])
        self._plan_passes(last, reds, full_outs)
        made = {e.outputs[0]: k for k, e in enumerate(body.eqns)}
        lines += [f"{ctype(v.aval.dtype)} h{made[v]}[{self.row_len}];" for v in sorted(self.stash, key=made.get)]
        for p in range(last + 2):
            for k in reds:
                e = body.eqns[k]
                if self.level[e.inputs[0]] == p - 1:
                    names[e.outputs[0]] = f"v{next(counter)}"
                    lines += _finish(e, f"q{k}", names[e.outputs[0]])
            for e in body.eqns:
                out = e.outputs[0]
                if self.kind[out] != "row" or self.level[out] != p or e.primitive.name in REDUCERS:
                    continue
                if e.primitive.name in MOVES:
                    names[out] = names[e.inputs[0]]  # type: ignore[index]
                else:
                    emit_eqns([e], names, lines, counter)
            for o in body.outvars:
                if self.kind[o] == "row" and self.level[o] == p and tuple(o.aval.shape) != self.domain:
                    lines.append(f"o{outs[o]}[row] = {names[o]};")
                    stores.add(lines[-1])
            for k in across:
                if self.level[body.eqns[k].inputs[0]] == p:
                    lines += _global_add(body.eqns[k], f"g{k}", names[body.eqns[k].inputs[0]])  # type: ignore[index]
            if p <= last:
                mine = [k for k in reds if self.level[body.eqns[k].inputs[0]] == p]
                marks = (len(lines), mine)
                lines += self._pass(p, mine, names, counter, outs)
                marks = (marks[0], len(lines), marks[1])
        for k, e in enumerate(body.eqns):
            out = e.outputs[0]
            if k in across:
                names[out] = f"v{next(counter)}"
                post += _global_finish(e, f"g{k}", names[out])
            elif self.kind[out] == "global":
                if e.primitive.name in MOVES:
                    names[out] = names[e.inputs[0]]  # type: ignore[index]
                else:
                    emit_eqns([e], names, post, counter)
        post += [f"o{j}[0] = {names[o]};" for j, o in enumerate(body.outvars) if self.kind[o] == "global"]
        if not outer and not across and last == 0 and self._row_chunk() is not None:
            start, end, mine = marks  # type: ignore[misc]
            before = [x for x in lines[:start] if x not in stores]
            chunk = self._pass(0, mine, names, counter, outs, ("begin", "end"))
            return self._split_row(pre, before, chunk, lines[end:], mine, lines[:start])
        return self._function(pre, lines, post, outer, parallel=not across)

    def _row_chunk(self) -> int | None:
        """Elements per chunk of a region of one long row split across threads: ``SUM_BLOCK``
        times a power of two, about four chunks per thread; None below the size a split pays."""
        if self.n_threads < 2 or self.row_len < PARALLEL_MIN_ELEMENTS:
            return None
        chunk = SUM_BLOCK
        while 2 * chunk <= self.row_len // (4 * self.n_threads):
            chunk *= 2
        return chunk

    def _split_row(self, pre: list[str], before: list[str], chunk: list[str], after: list[str], mine: list[int],
                   head: list[str]) -> str:
        """One long row (a reducing ``while``'s cond over a large carry) split across threads:
        ``NAME_part`` runs the row's one pass over each chunk of its range (the pool may hand
        it several, or all of them), storing each reduction's partial value; the function
        combines them in chunk order (sums with the binary counter, over chunks of a power of
        two blocks: the bits of one thread's pairwise sum), then runs ``after`` (the row values
        and outputs)."""
        body = self.body
        size = self._row_chunk()
        assert size is not None
        n = -(-self.row_len // size)
        params = [f"const {ctype(v.aval.dtype)} *a{j}" for j, v in enumerate(body.invars)]
        params += [f"{ctype(o.aval.dtype)} *o{j}" for j, o in enumerate(body.outvars)]
        unpack, pointers = pool_arguments(params)
        parts, save, combine = [], [], []
        for k in mine:
            e = body.eqns[k]
            dt = np.dtype(e.inputs[0].aval.dtype)
            acc, slot = f"q{k}", len(pointers)
            if e.primitive.name == "reduce_sum" and dt.kind == "f":
                parts.append(f"double {acc}_part[{n}];")
                pointers.append(f"(void *){acc}_part")
                save += [f"double {acc}_r = {acc}_t ? {acc}_s[{acc}_t - 1] : 0.0;",
                         f"for (int q = {acc}_t - 2; q >= 0; q--) {acc}_r = {acc}_s[q] + {acc}_r;",
                         f"((double *)args[{slot}])[begin / {size}] = {acc}_r;"]
                combine += [f"double {acc}_s[64];", f"int {acc}_t = 0;",
                            f"for (int64_t n = 0; n < {n}; n++) {{", f"    double {acc}_p = {acc}_part[n];",
                            f"    for (int64_t c = n + 1; !(c & 1); c >>= 1) {acc}_p = {acc}_s[--{acc}_t] + {acc}_p;",
                            f"    {acc}_s[{acc}_t++] = {acc}_p;", "}"]
            elif e.primitive.name == "reduce_sum":
                w = wide_sum(dt)
                parts.append(f"{w} {acc}_part[{n}];")
                pointers.append(f"(void *){acc}_part")
                save.append(f"(({w} *)args[{slot}])[begin / {size}] = {acc};")
                combine += [f"{w} {acc} = 0;", f"for (int64_t n = 0; n < {n}; n++) {acc} += {acc}_part[n];"]
            else:
                t, (op, sign) = ctype(dt), ((">", "max") if e.primitive.name == "reduce_max" else ("<", "min"))
                parts.append(f"{t} {acc}_part[{n}];")
                pointers.append(f"(void *){acc}_part")
                save.append(f"(({t} *)args[{slot}])[begin / {size}] = {acc};")
                pick = f"{acc} = {acc}_part[n] {op} {acc} ? {acc}_part[n] : {acc};"
                combine += [f"{t} {acc} = {identity(dt, sign)};", f"for (int64_t n = 0; n < {n}; n++) {pick}"]
                if dt.kind == "f":
                    parts.append(f"uint8_t {acc}_nan[{n}];")
                    pointers.append(f"(void *){acc}_nan")
                    save.append(f"((uint8_t *)args[{slot + 1}])[begin / {size}] = {acc}_n;")
                    combine += [f"uint8_t {acc}_n = 0;", f"for (int64_t n = 0; n < {n}; n++) {acc}_n |= {acc}_nan[n];"]
        part = [f"static void {NAME}_part(void *const *args, int64_t from, int64_t to)", "{",
                *("    " + x for x in [*unpack, *pre, *before]),
                f"    for (int64_t begin = from; begin < to; begin += {size}) {{",
                f"        const int64_t end = begin + {size} < to ? begin + {size} : to;",
                *("        " + x for x in [*chunk, *save]), "    }", "}", ""]
        main = [f"void {NAME}({', '.join(params)})", "{", *("    " + x for x in parts),
                f"    void *const args[] = {{{', '.join(pointers)}}};",
                f"    fg_parallel({NAME}_part, args, {self.row_len}, {size}, {self.n_threads});",
                *("    " + x for x in [*pre, *head, *combine, *after]), "}", ""]
        return "\n".join(part + main)

    def _plan_passes(self, last: int, reds: list[int], full_outs: list[Var]) -> None:
        """Per pass, the element values it computes and those it loads from the row's stash
        (``self.passes``), and the values stashed (``self.stash``): a value an earlier pass
        computed is stored there and loaded again rather than recomputed (softmax's ``exp``),
        when a row's stash is small (:data:`STASH_ELEMENTS`)."""
        self.passes: dict[int, tuple[set[Var], set[Var]]] = {}
        self.stash: set[Var] = set()
        computed: set[Var] = set()
        for p in range(last + 1):
            wanted = [self.body.eqns[k].inputs[0] for k in reds if self.level[self.body.eqns[k].inputs[0]] == p]
            wanted += full_outs if p == last else []
            needed, loads = self._needed(wanted, computed if self.row_len <= STASH_ELEMENTS else set())
            self.passes[p] = (needed, loads)
            self.stash |= loads
            computed |= needed

    def _pass(self, p: int, mine: list[int], names: dict[Var, str], counter: Iterator[int],
              outs: dict[Var, int], span: tuple[str, str] | None = None) -> list[str]:
        """Pass ``p`` over a row's elements: the reductions ``mine`` (equation indices)
        accumulated, and in the last pass the outputs of the domain's shape stored; over the
        elements ``span`` (C expressions) of the row when given, else all of them."""
        first, stop = span or ("0", str(self.row_len))
        body = self.body
        stored = [o for o in body.outvars if p == max(self.passes) and tuple(o.aval.shape) == self.domain]
        if not mine and not stored:
            return []
        needed, loads = self.passes[p]
        made = {e.outputs[0]: k for k, e in enumerate(body.eqns)}
        inner: list[str] = []
        local = dict(names)
        for j, v in enumerate(body.invars):
            if v in needed:
                local[v] = f"e{next(counter)}"
                inner.append(f"const {ctype(v.aval.dtype)} {local[v]} = p{j}[i];")
        for v in sorted(loads, key=made.get):
            local[v] = f"e{next(counter)}"
            inner.append(f"const {ctype(v.aval.dtype)} {local[v]} = h{made[v]}[i];")
        eqns = [e for e in body.eqns if e.outputs[0] in needed]
        emit_eqns(eqns, local, inner, counter)
        inner += [f"h{made[v]}[i] = {local[v]};" for v in sorted(self.stash & needed, key=made.get)]
        head: list[str] = []
        clauses: list[str] = []
        sums = []
        for k in mine:
            e = body.eqns[k]
            acc, v, dt = f"q{k}", local[e.inputs[0]], np.dtype(e.inputs[0].aval.dtype)  # type: ignore[index]
            if e.primitive.name == "reduce_sum" and dt.kind == "f":
                sums.append(acc)
                inner.append(f"{acc}_b += (double){v};")
                clauses.append(f"reduction(+:{acc}_b)")
                head += [f"double {acc}_s[64];", f"int {acc}_t = 0;"]
            elif e.primitive.name == "reduce_sum":
                w = "uint64_t" if dt.itemsize == 8 else "uint32_t"
                head.append(f"{w} {acc} = 0;")
                inner.append(f"{acc} += ({w}){v};")
                clauses.append(f"reduction(+:{acc})")
            else:
                op, sign = (">", "max") if e.primitive.name == "reduce_max" else ("<", "min")
                head.append(f"{ctype(dt)} {acc} = {identity(dt, sign)};")
                inner.append(f"{acc} = {v} {op} {acc} ? {v} : {acc};")
                clauses.append(f"reduction({sign}:{acc})")
                if dt.kind == "f":
                    head.append(f"uint8_t {acc}_n = 0;")
                    inner.append(f"{acc}_n |= {v} != {v};")
                    clauses.append(f"reduction(|:{acc}_n)")
        inner += [f"o{outs[o]}[row * {self.row_len} + i] = {local[o]};" for o in stored]
        loop = [" ".join(["#pragma omp simd", *clauses]), "for (int64_t i = lo; i < hi; i++) {",
                *("    " + x for x in inner), "}"]
        if not sums:
            return [*head, "{", f"    const int64_t lo = {first}, hi = {stop};", *("    " + x for x in loop), "}"]
        block = [f"const int64_t hi = lo + {SUM_BLOCK} < {stop} ? lo + {SUM_BLOCK} : {stop};"]
        block += [f"double {acc}_b = 0;" for acc in sums]
        block += loop
        for acc in sums:
            block += [f"double {acc}_p = {acc}_b;",
                      f"for (int64_t c = n + 1; !(c & 1); c >>= 1) {acc}_p = {acc}_s[--{acc}_t] + {acc}_p;",
                      f"{acc}_s[{acc}_t++] = {acc}_p;"]
        return [*head, f"for (int64_t lo = {first}, n = 0; lo < {stop}; lo += {SUM_BLOCK}, n++) {{",
                *("    " + x for x in block), "}"]

    def _needed(self, wanted: Sequence[Var], earlier: set[Var]) -> tuple[set[Var], set[Var]]:
        """The element values (inputs and equations) a pass computes to have ``wanted``, and
        those of ``earlier`` passes it loads from the stash instead (inputs are read again);
        row values are computed before it."""
        made = {e.outputs[0]: e for e in self.body.eqns}
        needed: set[Var] = set()
        loads: set[Var] = set()
        stack = list(wanted)
        while stack:
            v = stack.pop()
            if v in needed or v in loads or self.kind[v] == "row":
                continue
            if v in earlier and v in made:
                loads.add(v)
                continue
            needed.add(v)
            if v in made:
                stack += [a for a in made[v].inputs if isinstance(a, Var)]
        return needed, loads

    def _function(self, pre: list[str], lines: list[str], post: list[str], outer: list[str], parallel: bool) -> str:
        """The function: ``pre``, the loop over rows running ``lines``, then ``post``. With
        ``parallel`` (no value accumulates across rows), a large region's rows are split
        across threads: ``NAME_rows`` runs a range of rows and the pool (fgpool.h) runs it."""
        body = self.body
        params = [f"const {ctype(v.aval.dtype)} *a{j}" for j, v in enumerate(body.invars)]
        params += [f"{ctype(o.aval.dtype)} *o{j}" for j, o in enumerate(body.outvars)]
        head = f"void {NAME}({', '.join(params)})"
        extents = [self.domain[k] for k in self.kept]
        n_threads = self.n_threads
        rows = math.prod(extents)
        if not (parallel and outer and n_threads > 1 and rows > 1 and math.prod(self.domain) >= PARALLEL_MIN_ELEMENTS):
            out = [head, "{", *("    " + x for x in pre)]
            for k, (v, d) in enumerate(zip(outer, extents)):
                out.append("    " * (k + 1) + f"for (int64_t {v} = 0; {v} < {d}; {v}++)")
            depth = len(outer) + 1
            out += ["    " * depth + "{", *("    " * (depth + 1) + x for x in lines), "    " * depth + "}"]
            return "\n".join([*out, *("    " + x for x in post), "}", ""])
        unpack, pointers = pool_arguments(params)
        index = []
        for k, v in enumerate(outer):
            after = math.prod(extents[k + 1:])
            value = "r" if after == 1 else f"(r / {after})"
            index.append(f"const int64_t {v} = {value} % {extents[k]};" if k else f"const int64_t {v} = {value};")
        chunk = max(1, CHUNK_ELEMENTS // self.row_len)
        out = [f"static void {NAME}_rows(void *const *args, int64_t lo, int64_t hi)", "{",
               *("    " + x for x in unpack),
               *("    " + x for x in pre), "    for (int64_t r = lo; r < hi; r++) {",
               *("        " + x for x in [*index, *lines]), "    }", "}", "", head, "{",
               f"    void *const args[] = {{{', '.join(pointers)}}};",
               f"    fg_parallel({NAME}_rows, args, {rows}, {chunk}, {n_threads});", "}", ""]
        return "\n".join(out)


def _finish(e: Eqn, acc: str, name: str) -> list[str]:
    """Row value ``name`` of reduction ``e`` from its accumulator ``acc``: a float sum's
    pairwise stack added from the top, a float max or min NaN when a NaN was seen."""
    t = ctype(e.outputs[0].aval.dtype)
    dt = np.dtype(e.inputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum" and dt.kind == "f":
        return [f"double {acc}_r = {acc}_t ? {acc}_s[{acc}_t - 1] : 0.0;",
                f"for (int q = {acc}_t - 2; q >= 0; q--) {acc}_r = {acc}_s[q] + {acc}_r;",
                f"const {t} {name} = ({t}){acc}_r;"]
    if e.primitive.name == "reduce_sum" or dt.kind != "f":
        return [f"const {t} {name} = ({t}){acc};"]
    return [f"const {t} {name} = {acc}_n ? ({t})NAN : {acc};"]


def _global_start(e: Eqn, acc: str) -> list[str]:
    """The accumulator of reduction ``e`` across rows (a sum in double, or the wide unsigned
    type an integer sum wraps in; a max or min and whether a NaN was seen)."""
    dt = np.dtype(e.inputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum":
        return [f"double {acc} = 0;" if dt.kind == "f" else f"{wide_sum(dt)} {acc} = 0;"]
    sign = "max" if e.primitive.name == "reduce_max" else "min"
    return [f"{ctype(dt)} {acc} = {identity(dt, sign)};", f"uint8_t {acc}_n = 0;"]


def _global_add(e: Eqn, acc: str, v: str) -> list[str]:
    dt = np.dtype(e.inputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum":
        return [f"{acc} += {'(double)' if dt.kind == 'f' else f'({wide_sum(dt)})'}{v};"]
    op = ">" if e.primitive.name == "reduce_max" else "<"
    return [f"{acc} = {v} {op} {acc} ? {v} : {acc};", f"{acc}_n |= {v} != {v};"]


def _global_finish(e: Eqn, acc: str, name: str) -> list[str]:
    t = ctype(e.outputs[0].aval.dtype)
    if e.primitive.name == "reduce_sum" or np.dtype(e.inputs[0].aval.dtype).kind != "f":
        return [f"const {t} {name} = ({t}){acc};"]
    return [f"const {t} {name} = {acc}_n ? ({t})NAN : {acc};"]
