"""Epilogues: the elementwise equations that consume a matrix product (a bias add and ReLU,
the SGD update ``w - lr * g``, a ReLU mask in the backward pass), evaluated by the product's
own kernels on each register block before it is stored, or that consume a reduction (a
mean's division, a bias update), evaluated where the reduction stores. The result then never
goes to memory and the equations need no kernel of their own.

An epilogue is a fused elementwise region over the product's shape whose other inputs exist
when the product runs. The packed kernels evaluate it on each row of a block as one 16-lane
vector (booleans as lane masks), the scalar corner kernel on one element; values are bitwise
those of the separate kernels, since the same operations run in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fungraph import dtypes
from fungraph.backends.opencl.codegen import INDEX_OPS, Access, c_literal, ctype, merged_stride
from fungraph.interpreters.fusion_model import FusionPlan, Region
from fungraph.interpreters.rewrite import use_counts
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var

#: Primitives an epilogue evaluates on vectors; inputs and outputs must be of the product's
#: float dtype or bool.
LANE_OPS = frozenset({"add", "sub", "mul", "div", "neg", "abs", "max", "min", "fma", "select", "stop_gradient",
                      "convert_element_type", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not"})
_BOOL_OPS = frozenset({"add", "mul", "select", "stop_gradient", "convert_element_type", "eq", "ne", "and", "or",
                       "xor", "not"})
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class Epilogue:
    """``eqns`` applied to ``product``; ``outputs`` are stored in place of the product.
    Every access has the product's shape and is seen like the kernels' ``out``: ``inputs``
    are broadcast to it (stride 0 along broadcast axes), and a transposed product sees them
    all transposed."""

    product: Var
    eqns: tuple[Eqn, ...]
    inputs: tuple[tuple[Var, Access], ...]
    outputs: tuple[tuple[Var, Access], ...]

    @property
    def note(self) -> str:
        outs = len(self.outputs)
        return f"epilogue {', '.join(e.primitive.name for e in self.eqns)}" + (f" ({outs} outputs)" if outs > 1 else "")

    def own(self, out: Access, operands: Sequence[int]) -> dict[str, frozenset[int]]:
        """``own_loads``/``own_stores`` of a product kernel: each work-item stores the outputs
        only at its block's elements, after loading the inputs laid out like ``out`` at those
        same elements, so a donated input can be overwritten in place, unless an output shares
        a slot with an operand (other work-items read operands everywhere)."""
        stores = frozenset(a.slot for _, a in self.outputs)
        if stores & set(operands):
            return {}
        loads = frozenset(a.slot for _, a in self.inputs if a.slot not in operands
                          and a.strides == out.strides and a.offset == out.offset)
        return {"own_loads": loads, "own_stores": stores}


def lane_ok(e: Eqn, dtype: np.dtype) -> bool:
    """Whether an epilogue can evaluate ``e`` for a product of ``dtype``."""
    name = e.primitive.name
    if name not in LANE_OPS or len(e.outputs) != 1:
        return False
    kinds = {dtypes.check(a.aval.dtype) for a in (*e.inputs, *e.outputs)}
    if not kinds <= {dtypes.check(dtype), dtypes.bool_}:
        return False
    boolean = dtypes.check(e.inputs[-1].aval.dtype) == dtypes.bool_
    return not boolean or name in _BOOL_OPS


def lane_epilogue(eqns: Sequence[Eqn], dtype: np.dtype) -> bool:
    """Whether the 16-column sum of ``dtype`` can evaluate epilogue ``eqns`` on its 16 lanes:
    ``LANE_OPS`` on that dtype, and reshapes that only add or drop axes of length 1."""
    return all(lane_ok(q, dtype) or (q.primitive.name == "reshape" and squeezed(q.outputs[0].aval.shape)
                                     == squeezed(q.inputs[0].aval.shape)) for q in eqns)


def find_epilogues(g: Graph, fusion: FusionPlan) -> dict[int, tuple[Region, tuple[Eqn, ...]]]:
    """Products whose every use lies in one fused elementwise region of the product's shape,
    all of whose equations come after the product, are :data:`LANE_OPS` on the product's float
    dtype or bool, and write only values of the product's shape: product index -> (that
    region, the free views to take early). The region may read only values computed before
    the product, or free views of them (``c[0]`` of an input ``c``), which are then taken
    when the product runs."""
    sites = _Sites(g, fusion)
    found: dict[int, tuple[Region, tuple[Eqn, ...]]] = {}
    for i, e in enumerate(g.eqns):
        if e.primitive.name != "dot_general" or not dtypes.is_float(e.outputs[0].aval.dtype):
            continue
        p = e.outputs[0]
        site = sites.consumer(i, p, lambda m: lane_ok(g.eqns[m], p.aval.dtype))
        if site is not None:
            found[i] = site
    return found


def find_reduce_epilogues(g: Graph, fusion: FusionPlan) -> dict[int, tuple[Region, tuple[Eqn, ...]]]:
    """Reductions (roots of fused reduce regions) whose result is used only by fused
    elementwise regions over the result's shape (one, or several of one shape; ``keepdims``
    allowed) that read it at its own index (a mean's division, a bias update
    ``b - lr * sum(g, 0)``), directly or through one free reshape that adds or drops axes of
    length 1 (``keepdims`` spelled out: a softmax's ``log(sum)`` and ``1 / sum``): reduction
    index -> (those regions as one, the reshape among its members; the free views to take
    early), on the same terms as :func:`find_epilogues`. The reduction's kernel then evaluates
    the region where it would store the result."""
    sites = _Sites(g, fusion)
    found: dict[int, tuple[Region, tuple[Eqn, ...]]] = {}
    for i, e in enumerate(g.eqns):
        region = fusion.region_of.get(i)
        if region is None or region.kind != "reduce" or region.root != i or len(e.outputs) != 1:
            continue
        y = e.outputs[0]
        site = sites.consumer(i, y, lambda m: True, keepdims=True, several=True) or _through_reshape(sites, i, y)
        if site is not None and _element_aligned(g, site[0], y):
            found[i] = site
    return found


def _through_reshape(sites: _Sites, i: int, y: Var) -> tuple[Region, tuple[Eqn, ...]] | None:
    """The epilogue site of ``y`` (computed by equation ``i``) when its one use is a free
    reshape adding or dropping axes of length 1 whose result the site consumes: that site with
    the reshape as one more member."""
    users = sites.users.get(y)
    if not users or len(users) != 1 or sites.counts[y] != 1:
        return None
    j = users[0]
    view = sites.g.eqns[j]
    if (j not in sites.fusion.aliases or view.primitive.name != "reshape"
            or squeezed(view.outputs[0].aval.shape) != squeezed(y.aval.shape)):
        return None
    site = sites.consumer(i, view.outputs[0], lambda m: True, keepdims=True, several=True)
    if site is None:
        return None
    region, views = site
    merged = Region(region.root, region.kind, region.shape, {*region.members, j}, region.outputs)
    return merged, views


def _element_aligned(g: Graph, region: Region, y: Var) -> bool:
    """Whether every value of ``region`` computed from ``y`` is computed from ``y``'s element at
    the same position (axes of length 1 aside): elementwise equations, ``stop_gradient`` and
    reshapes that add or drop axes of length 1, no transpose, ``rev``, slice or broadcast on the way. The reduction's
    kernel can then evaluate the region at each element it stores."""
    derived = {y}
    for m in sorted(region.members):
        q = g.eqns[m]
        if not any(isinstance(a, Var) and a in derived for a in q.inputs):
            continue
        if q.primitive.name in INDEX_OPS and q.primitive.name not in ("reshape", "stop_gradient"):
            return False
        if any(squeezed(o.aval.shape) != squeezed(y.aval.shape) for o in q.outputs):
            return False
        if any(isinstance(a, Var) and a in derived and squeezed(a.aval.shape) != squeezed(y.aval.shape)
               for a in q.inputs):
            return False
        derived.update(q.outputs)
    return True


class _Sites:
    """Who uses what in ``g``, for finding the region that consumes one value."""

    def __init__(self, g: Graph, fusion: FusionPlan) -> None:
        self.g, self.fusion = g, fusion
        self.counts = use_counts(g)
        self.producer = {o: j for j, e in enumerate(g.eqns) for o in e.outputs}
        self.users: dict[Var, list[int]] = {}
        for j, e in enumerate(g.eqns):
            for a in e.inputs:
                if isinstance(a, Var):
                    self.users.setdefault(a, []).append(j)

    def early_views(self, v: Var, i: int) -> list[int] | None:
        """The free views after index ``i`` that compute ``v`` from values before it."""
        j = self.producer.get(v, -1)
        if j < i:
            return []
        src = self.g.eqns[j].inputs[0]
        rest = self.early_views(src, i) if j in self.fusion.aliases and isinstance(src, Var) else None
        return None if rest is None else [*rest, j]

    def consumer(self, i: int, v: Var, member_ok: Callable[[int], bool],
                 keepdims: bool = False, several: bool = False) -> tuple[Region, tuple[Eqn, ...]] | None:
        """The fused elementwise region of ``v``'s shape (with ``keepdims``, of its elements in
        the same order, axes of length 1 aside) holding every use of ``v`` (the value equation
        ``i`` computes), after ``i``, writing only values of the region's shape, each member
        passing ``member_ok``; with the free views its inputs need taken early. Else None.
        With ``several``, the uses may lie in several such regions of one shape, returned as
        one region (a sum that feeds both a ``log`` and a division), and members may come
        before ``i`` (a reshape of an earlier value): what matters is that every input exists
        when ``i`` runs."""
        users = self.users.get(v)
        if not users or self.counts[v] != len(users):
            return None
        regions: list[Region] = []
        for j in users:
            r = self.fusion.region_of.get(j)
            if r is None or r.kind != "elementwise" or (regions and tuple(r.shape) != tuple(regions[0].shape)):
                return None
            if all(r is not q for q in regions):
                regions.append(r)
        if len(regions) > 1 and not several:
            return None
        shape = tuple(regions[0].shape)
        if shape != v.aval.shape and not (keepdims and squeezed(shape) == squeezed(v.aval.shape)):
            return None
        region = regions[0] if len(regions) == 1 else Region(
            max(r.root for r in regions), "elementwise", shape, set().union(*(r.members for r in regions)),
            [o for r in regions for o in r.outputs])
        members = sorted(region.members)
        if (members[0] < i and not several) or any(m in self.fusion.aliases or not member_ok(m) for m in members):
            return None
        if not region.outputs or any(o.aval.shape != tuple(region.shape) for o in region.outputs):
            return None
        views = [self.early_views(x, i) for x in region_inputs(self.g, region, v)]
        if any(x is None for x in views):
            return None
        return region, tuple(self.g.eqns[j] for j in sorted({j for x in views for j in x or ()}))


def squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` without its axes of length 1 (equal for ``x`` and ``x`` with ``keepdims``)."""
    return tuple(n for n in shape if n != 1)


def region_inputs(g: Graph, region: Region, product: Var) -> list[Var]:
    """The vars the region's equations read that it does not compute, other than the product."""
    inner = {o for m in region.members for o in g.eqns[m].outputs}
    out: list[Var] = []
    for m in sorted(region.members):
        for a in g.eqns[m].inputs:
            if isinstance(a, Var) and a is not product and a not in inner and all(a is not b for b in out):
                out.append(a)
    return out


def broadcast_access(a: Access, aval_shape: tuple[int, ...]) -> Access:
    """``a`` seen at ``aval_shape`` with numpy's broadcasting (trailing axes aligned)."""
    lead = len(aval_shape) - len(a.shape)
    strides = (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(a.shape, a.strides))
    return Access(a.slot, ShapedArray(aval_shape, a.aval.dtype), a.offset, strides)


def kernel_strides(a: Access, nb: int, nf: int) -> tuple[int, int, int] | None:
    """One stride each for the batch, row and column axis groups of a product-shaped access
    (the first ``nb`` axes, the next ``nf``, the rest), or None when a group does not merge."""
    groups = (range(nb), range(nb, nb + nf), range(nb + nf, len(a.shape)))
    strides = tuple(merged_stride(a, g) for g in groups)
    return None if any(s is None for s in strides) else strides  # type: ignore[return-value]


class BlockStore:
    """The lines that store a block of a product held as ``width``-lane values (16: one vector
    per row; 1: one element) at the block origin (``coords``: C expressions of its batch
    index, first row and first column): ``lines`` set up one pointer per access, then
    :meth:`block` stores. Without an epilogue the product itself is stored into ``out``."""

    def __init__(self, epilogue: Epilogue | None, out: Access, groups: tuple[int, int],
                 params: Callable[[int, np.dtype], tuple[str, str]], coords: tuple[str, str, str], width: int) -> None:
        self.ep = epilogue
        self.dtype = dtypes.check((out if epilogue is None else epilogue.product).aval.dtype)
        self.width = width
        self.lines: list[str] = []
        accesses = [out] if epilogue is None else [a for _, a in (*epilogue.inputs, *epilogue.outputs)]
        self.ptr: dict[Access, tuple[str, tuple[int, int, int]]] = {}
        for n, a in enumerate(accesses):
            if a in self.ptr:
                continue
            strides = kernel_strides(a, *groups)
            if strides is None:
                raise ValueError(f"product epilogue: access strides {a.strides} of shape {a.shape} do not merge")
            p, o = params(a.slot, a.aval.dtype)
            sb, sm, sn = strides
            name = f"q{n}"
            self.lines.append(f"  __global {ctype(a.aval.dtype)}* {name} = {p} + {o} + {a.offset} + "
                              f"(long)({coords[0]}) * {sb} + (long)({coords[1]}) * {sm} + (long)({coords[2]}) * {sn};")
            self.ptr[a] = (name, strides)
        self.counter = 0

    # types ----------------------------------------------------------------------------

    def _vt(self, dt: np.dtype) -> str:
        """The C type of a ``width``-lane value of ``dt``; bools are lane masks (-1/0 in
        vectors, 1/0 in scalars) as wide as the product's float lanes so ``select`` takes them."""
        if dtypes.check(dt) == dtypes.bool_:
            base = "int" if self.width == 1 or self.dtype == dtypes.float32 else "long"
        else:
            base = ctype(dt)
        return base if self.width == 1 else f"{base}{self.width}"

    def _fresh(self, out: list[str], dt: np.dtype, expr: str) -> str:
        name = f"e{self.counter}"
        self.counter += 1
        out.append(f"    const {self._vt(dt)} {name} = {expr};")
        return name

    # loads and stores --------------------------------------------------------------------

    def _lanes(self, a: Access, r: int, cols: int) -> tuple[str, list[str] | None]:
        """(pointer expression of lane 0, or per-lane element expressions when the lanes are
        not adjacent or not all present)."""
        name, (_, sm, sn) = self.ptr[a]
        if self.width == 1 or (sn == 1 and cols == self.width):
            return f"{name} + {r * sm}", None
        return "", [f"{name}[{r * sm + j * sn}]" for j in range(cols)]

    def _load(self, out: list[str], a: Access, r: int, cols: int, cond: str | None) -> str:
        dt = dtypes.check(a.aval.dtype)
        boolean = dt == dtypes.bool_
        name, (_, sm, sn) = self.ptr[a]
        base, lanes = self._lanes(a, r, cols)
        w, vt = self.width, self._vt(dt)
        if w == 1:
            expr = f"(int)({name}[{r * sm}] != 0)" if boolean else f"{name}[{r * sm}]"
        elif sn == 0:
            expr = f"({vt})({name}[{r * sm}] ? -1 : 0)" if boolean else f"({vt})({name}[{r * sm}])"
        else:
            if lanes is None:
                expr = f"vload{w}(0, {base})"
            else:
                zero = "0" if boolean else c_literal(0, dt)
                expr = f"({ctype(dt)}{w})({', '.join(lanes + [zero] * (w - cols))})"
            if boolean:
                expr = f"convert_{vt}({expr} != (uchar{w})(0))"
        return self._fresh(out, dt, f"({cond}) ? {expr} : ({vt})(0)" if cond else expr)

    def _store(self, out: list[str], a: Access, value: str, r: int, cols: int) -> None:
        boolean = dtypes.check(a.aval.dtype) == dtypes.bool_
        base, lanes = self._lanes(a, r, cols)
        if self.width == 1:
            out.append(f"    *({base}) = {f'(uchar)({value} & 1)' if boolean else value};")
        elif lanes is None:
            w = self.width
            out.append(f"    vstore{w}({f'convert_uchar{w}({value} & 1)' if boolean else value}, 0, {base});")
        else:
            out += [f"    {x} = {f'(uchar)({value}.s{j:x} & 1)' if boolean else f'{value}.s{j:x}'};"
                    for j, x in enumerate(lanes)]

    # equations --------------------------------------------------------------------------

    def _literal(self, a: Literal) -> str:
        dt = dtypes.check(a.aval.dtype)
        if dt == dtypes.bool_:
            truth = bool(np.asarray(a.value))
            return f"({self._vt(dt)})({-1 if truth and self.width > 1 else int(truth)})"
        value = c_literal(a.value, dt)
        return value if self.width == 1 else f"({self._vt(dt)})({value})"

    def _select(self, pred: str, yes: str, no: str) -> str:
        return f"({pred} ? {yes} : {no})" if self.width == 1 else f"select({no}, {yes}, {pred})"

    def _eqn(self, out: list[str], e: Eqn, args: list[str]) -> str:
        name = e.primitive.name
        i_dt = dtypes.check(e.inputs[-1].aval.dtype)
        o_dt = dtypes.check(e.outputs[0].aval.dtype)
        boolean = i_dt == dtypes.bool_
        if name in ("stop_gradient", "reshape") or (name == "convert_element_type" and i_dt == o_dt):
            return args[0]  # a reshape here only adds or drops axes of length 1 (``lane_epilogue``)
        if name == "convert_element_type":
            if o_dt == dtypes.bool_:
                expr = f"({args[0]} != ({self._vt(i_dt)})(0))"
            else:
                expr = f"({ctype(o_dt)})({args[0]})" if self.width == 1 else \
                    f"convert_{self._vt(o_dt)}(-{args[0]})"
        elif name in _COMPARE:
            expr = f"({args[0]} {_COMPARE[name]} {args[1]})"
        elif name in ("add", "or"):
            expr = f"({args[0]} | {args[1]})" if boolean else f"({args[0]} + {args[1]})"
        elif name in ("mul", "and"):
            expr = f"({args[0]} & {args[1]})" if boolean else f"({args[0]} * {args[1]})"
        elif name in ("sub", "div"):
            expr = f"({args[0]} {'-' if name == 'sub' else '/'} {args[1]})"
        elif name == "xor":
            expr = f"({args[0]} ^ {args[1]})"
        elif name == "not":
            expr = f"(!{args[0]})"
        elif name == "neg":
            expr = f"(-{args[0]})"
        elif name == "abs":
            expr = f"fabs({args[0]})"
        elif name in ("max", "min"):
            x, y = args
            expr = self._select(f"(({x} {'>' if name == 'max' else '<'} {y}) | isnan({x}))", x, y)
        elif name == "fma":
            expr = f"({args[0]} * {args[1]} + {args[2]})"
        elif name == "select":
            expr = self._select(*args)
        else:
            raise NotImplementedError(name)
        return self._fresh(out, o_dt, expr)

    def block(self, accs: Sequence[str], cols: int, guard: Callable[[int], str | None] = lambda r: None) -> list[str]:
        """The lines computing and storing each row ``r`` of the block from its accumulator
        ``accs[r]``; ``guard(r)``, when not None, is the condition under which row ``r`` is
        read and stored. Every row's loads come first, so their cache misses overlap: a store
        may alias a later load, so the compiler would not move the loads above the stores (a
        load after each row's store had cost ~10% of a 1024 x 256 x 1024 product)."""
        loads: list[str] = []
        body: list[str] = []
        for r, acc in enumerate(accs):
            cond = guard(r)
            lines: list[str] = []
            if self.ep is None:
                (a,) = self.ptr
                self._store(lines, a, acc, r, cols)
            else:
                values: dict[Var, str] = {self.ep.product: acc}
                inputs = dict(self.ep.inputs)

                def value(x: Var | Literal, r: int = r, cond: str | None = cond) -> str:
                    if isinstance(x, Literal):
                        return self._literal(x)
                    if x not in values:
                        values[x] = self._load(loads, inputs[x], r, cols, cond)
                    return values[x]

                for e in self.ep.eqns:
                    values[e.outputs[0]] = self._eqn(lines, e, [value(x) for x in e.inputs])
                for v, a in self.ep.outputs:
                    self._store(lines, a, values[v], r, cols)
            body += [f"  if ({cond}) {{", *lines, "  }"] if cond else lines
        return loads + body
