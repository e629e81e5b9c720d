"""Algebraic simplification as a table of rewrite rules, each with its identity beside it.

A rule sees the equation (inputs already substituted) and returns the atom that replaces its
output, or None. Rules never change an output's shape or dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fungraph.interpreters.rewrite import Rewriter
from fungraph.ir import Atom, Eqn, Graph, Literal
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh


def _is(a: Atom, value: float) -> bool:
    if isinstance(a, Literal):
        return a.value == value
    return False


def _fits(a: Atom, e: Eqn) -> bool:
    return a.aval == e.outputs[0].aval


def _add_zero(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    if _is(y, 0) and _fits(x, e):
        return x
    if _is(x, 0) and _fits(y, e):
        return y
    return None


def _all_positive_zeros(rw: Rewriter, a: Atom) -> bool:
    """Whether ``a`` is a constant array of +0 (or a broadcast of a literal one)."""
    p = rw.producer(a)
    if p is not None and p.primitive is sh.broadcast_in_dim_p:
        a = p.inputs[0]
    if isinstance(a, Literal):
        return _is(a, 0) and not np.signbit(np.real(a.value))
    value = rw.const_value(a)
    return value is not None and value.size > 0 and not np.any(value) and not np.any(np.signbit(np.real(value)))


#: Primitives whose outputs, viewed through these, hold what the scatter-add wrote.
_SAME_ELEMENTS = ("reshape", "slice", "squeeze", "expand_dims", "broadcast_in_dim", "transpose")


def _no_negative_zero(rw: Rewriter, a: Atom) -> bool:
    """Whether ``a`` cannot hold -0: an integer or bool, or a scatter-add's sums (each starts
    at +0, and no sum starting there rounds to -0), seen through reshapes and slices."""
    if np.dtype(a.aval.dtype).kind in "biu":
        return True
    p = rw.producer(a)
    while p is not None and p.primitive.name in _SAME_ELEMENTS:
        p = rw.producer(p.inputs[0])
    return p is not None and p.primitive.name == "scatter_add"


def _zeros_plus_scatter(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    """``zeros(...).at[i].add(v)``: the zeros' addition is the identity on a scatter-add's sums."""
    for z, s in ((x, y), (y, x)):
        if _fits(s, e) and _all_positive_zeros(rw, z) and _no_negative_zero(rw, s):
            return s
    return None


def _sub_zero(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    return x if _is(y, 0) and _fits(x, e) else None


def _mul_one(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    if _is(y, 1) and _fits(x, e):
        return x
    if _is(x, 1) and _fits(y, e):
        return y
    return None


def _mul_zero(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    """Only for integers and bools: a float ``x * 0`` is NaN for an infinite or NaN ``x`` and
    -0 for a negative one, which XLA's simplifier keeps too."""
    out = e.outputs[0].aval
    if np.dtype(out.dtype).kind not in "biu" or not (_is(x, 0) or _is(y, 0)):
        return None
    zero = Literal(np.zeros((), out.dtype).item(), type(out)((), out.dtype))
    if out.shape == ():
        return zero
    (v,) = rw.emit(sh.broadcast_in_dim_p, [zero], {"shape": out.shape, "broadcast_dimensions": ()}, e.source)
    return v


def _div_one(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    return x if _is(y, 1) and _fits(x, e) else None


def _neg_neg(rw: Rewriter, e: Eqn, x: Atom) -> Atom | None:
    p = rw.producer(x)
    return p.inputs[0] if p is not None and p.primitive is ew.neg_p else None


def _pow_small(rw: Rewriter, e: Eqn, x: Atom, *rest: Atom) -> Atom | None:
    n = e.params["y"] if e.primitive is ew.integer_pow_p else (rest[0].value if isinstance(rest[0], Literal) else None)
    if n == 1 and _fits(x, e):
        return x
    if n == 2 and _fits(x, e):
        (v,) = rw.emit(ew.mul_p, [x, x], None, e.source)
        return v
    return None


def _transpose_transpose(rw: Rewriter, e: Eqn, x: Atom) -> Atom | None:
    p = rw.producer(x)
    if p is None or p.primitive is not sh.transpose_p:
        return None
    inner, outer = p.params["permutation"], e.params["permutation"]
    perm = tuple(inner[i] for i in outer)
    if perm == tuple(range(len(perm))):
        return p.inputs[0]
    (v,) = rw.emit(sh.transpose_p, [p.inputs[0]], {"permutation": perm}, e.source)
    return v


def _transpose_dot(rw: Rewriter, e: Eqn, x: Atom) -> Atom | None:
    """A product whose two free axes are swapped is the product of the operands in the other
    order, batch axes included: (AB)^T = B^T A^T."""
    p = rw.producer(x)
    if p is None or p.primitive.name != "dot_general":
        return None
    (lc, rc), (lb, rb) = p.params["dimension_numbers"]
    lhs, rhs = p.inputs
    nb = len(lb)
    swapped = tuple(range(nb)) + (nb + 1, nb)
    if e.params["permutation"] != swapped:
        return None
    if lhs.aval.ndim - len(lc) - nb != 1 or rhs.aval.ndim - len(rc) - nb != 1:
        return None
    (v,) = rw.emit(p.primitive, [rhs, lhs], {"dimension_numbers": ((rc, lc), (rb, lb))}, e.source)
    return v


def _scale_smaller_factor(rw: Rewriter, e: Eqn, x: Atom, y: Atom) -> Atom | None:
    """A scalar times a product scales the smaller factor instead (fewer elements touched; an
    SGD step's ``lr * (h^T g)`` scales ``h``, not the weight-sized gradient)."""
    for k, d in ((x, y), (y, x)):
        p = rw.producer(d)
        if not isinstance(k, Literal) or p is None or p.primitive.name != "dot_general" or rw.uses(d) != 1:
            continue
        if not _fits(d, e) or k.aval.dtype != d.aval.dtype:
            continue
        i = min((0, 1), key=lambda j: p.inputs[j].aval.size)
        small = p.inputs[i]
        if small.aval.size >= d.aval.size:
            continue
        (scaled,) = rw.emit(ew.mul_p, [small, k], None, e.source)
        ins = [scaled, p.inputs[1]] if i == 0 else [p.inputs[0], scaled]
        (v,) = rw.emit(p.primitive, ins, p.params, e.source)
        return v
    return None


def _reshape_reshape(rw: Rewriter, e: Eqn, x: Atom) -> Atom | None:
    p = rw.producer(x)
    if p is not None and p.primitive is sh.reshape_p:
        src = p.inputs[0]
        if src.aval == e.outputs[0].aval:
            return src
        (v,) = rw.emit(sh.reshape_p, [src], e.params, e.source)
        return v
    return x if _fits(x, e) else None


def _drop_broadcast(rw: Rewriter, e: Eqn, *ins: Atom) -> Atom | None:
    """An operand made by a numpy-style broadcast_in_dim can feed the broadcasting op directly."""
    new = list(ins)
    changed = False
    for i, a in enumerate(ins):
        p = rw.producer(a)
        if p is None or p.primitive is not sh.broadcast_in_dim_p:
            continue
        src = p.inputs[0]
        out_rank = len(p.params["shape"])
        if p.params["broadcast_dimensions"] != tuple(range(out_rank - src.aval.ndim, out_rank)):
            continue
        trial = new[:i] + [src] + new[i + 1:]
        try:
            shape = tuple(np.broadcast_shapes(*(t.aval.shape for t in trial)))
        except ValueError:
            continue
        if shape == e.outputs[0].aval.shape:
            new = trial
            changed = True
    if not changed:
        return None
    (v,) = rw.emit(e.primitive, new, e.params, e.source)
    return v


@dataclass(frozen=True)
class Rule:
    primitive: str
    identity: str
    apply: Callable[..., Atom | None]


RULES: tuple[Rule, ...] = (
    Rule("add", "x + 0 = 0 + x = x", _add_zero),
    Rule("add", "zeros + y = y + zeros = y for y without -0 (an integer, a scatter-add's sums)",
         _zeros_plus_scatter),
    Rule("sub", "x - 0 = x", _sub_zero),
    Rule("mul", "x * 1 = 1 * x = x", _mul_one),
    Rule("mul", "x * 0 = 0 for integers and bools (broadcast to the output shape)", _mul_zero),
    Rule("mul", "k * dot(a, b) = dot(k * a, b) for a scalar k and the smaller factor a", _scale_smaller_factor),
    Rule("div", "x / 1 = x", _div_one),
    Rule("neg", "-(-x) = x", _neg_neg),
    Rule("integer_pow", "x ** 1 = x,  x ** 2 = x * x", _pow_small),
    Rule("pow", "x ** 1.0 = x,  x ** 2.0 = x * x", _pow_small),
    Rule("transpose", "transpose(transpose(x, p), q) = transpose(x, p o q)", _transpose_transpose),
    Rule("transpose", "transpose(dot(a, b)) = dot(b, a)   (AB)^T = B^T A^T", _transpose_dot),
    Rule("reshape", "reshape(reshape(x)) = reshape(x)", _reshape_reshape),
    *(Rule(name, f"{name}(x, broadcast(y)) = {name}(x, y) when {name} broadcasts", _drop_broadcast)
      for name in ("add", "sub", "mul", "div", "max", "min", "select", "fma")),
)

_BY_PRIM: dict[str, tuple[Rule, ...]] = {}
for _r in RULES:
    _BY_PRIM[_r.primitive] = _BY_PRIM.get(_r.primitive, ()) + (_r,)


def simplify(graph: Graph, max_rounds: int = 4, scale_factors: bool = True) -> Graph:
    """Apply the rules until nothing changes (a rewrite can expose another, e.g. dropping a
    broadcast of 1.0 leaves ``x * 1.0``). Without ``scale_factors`` a scalar times a product
    stays where it is, for a backend that computes it inside the product's consumer for free."""
    skip = () if scale_factors else (_scale_smaller_factor,)
    for _ in range(max_rounds):
        new = _simplify_once(graph, skip)
        if new.eqns == graph.eqns:
            return new
        graph = new
    return graph


def _simplify_once(graph: Graph, skip: tuple[Callable[..., Atom | None], ...] = ()) -> Graph:
    rw = Rewriter(graph)
    for e in graph.eqns:
        ins = rw.inputs(e)
        rules = _BY_PRIM.get(e.primitive.name, ())
        replacement = None
        if len(e.outputs) == 1:
            for rule in rules:
                if rule.apply in skip:
                    continue
                replacement = rule.apply(rw, e, *ins)
                if replacement is not None:
                    break
        if replacement is None:
            rw.keep(e)
        else:
            rw.replace(e.outputs[0], replacement)
    return rw.finish()
