"""Fusion passes: ``mul`` + ``add`` into ``fma``, and Owl's Adagrad update pattern into one
``adagrad`` equation. A producer is fused only when the pattern is its sole reader."""

from __future__ import annotations

from collections import Counter

from fungraph.interpreters.rewrite import Rewriter, use_counts
from fungraph.ir import Atom, Eqn, Graph, Literal, Var
from fungraph.primitives import elementwise as ew
from fungraph.primitives.fused import adagrad_p, fma_p


def _single_use_producer(rw: Rewriter, a: Atom, uses: Counter[Var], prim: object) -> Eqn | None:
    p = rw.producer(a)
    if p is None or p.primitive is not prim or uses[p.outputs[0]] != 1:
        return None
    return p


def fuse_fma(graph: Graph) -> Graph:
    """``add(mul(a, b), c)`` -> ``fma(a, b, c)`` (either add operand), and ``c - k * b`` with a
    literal ``k`` -> ``fma(-k, b, c)``; the output type is unchanged."""
    uses = use_counts(graph)
    rw = Rewriter(graph)
    for e in graph.eqns:
        ins = rw.inputs(e)
        if e.primitive is ew.sub_p:
            p = _single_use_producer(rw, ins[1], uses, ew.mul_p)
            lits = [a for a in p.inputs if isinstance(a, Literal)] if p is not None else []
            if lits:
                k = lits[0]
                other = p.inputs[1] if p.inputs[0] is k else p.inputs[0]
                neg_k = Literal(-k.value, k.aval)
                try:
                    rw.emit(fma_p, [neg_k, other, ins[0]], None, e.source, outputs=e.outputs)
                    continue
                except (TypeError, ValueError):
                    pass
        if e.primitive is ew.add_p:
            for k in (0, 1):
                p = _single_use_producer(rw, ins[k], uses, ew.mul_p)
                if p is None:
                    continue
                try:
                    rw.emit(fma_p, [*p.inputs, ins[1 - k]], None, e.source, outputs=e.outputs)
                except (TypeError, ValueError):
                    continue
                break
            else:
                rw.keep(e)
            continue
        rw.keep(e)
    return rw.finish()


def _match_adagrad(rw: Rewriter, e: Eqn, uses: Counter[Var]) -> tuple[list[Atom], Var] | None:
    """Match ``w - lr * (g / sqrt(acc + g*g + eps))``; returns (w, acc, g, lr, eps) and the new acc."""
    if e.primitive is not ew.sub_p:
        return None
    w, scaled = rw.inputs(e)
    mul_e = _single_use_producer(rw, scaled, uses, ew.mul_p)
    if mul_e is None:
        return None
    for lr, quotient in (mul_e.inputs, mul_e.inputs[::-1]):
        div_e = _single_use_producer(rw, quotient, uses, ew.div_p)
        if div_e is None:
            continue
        g, root = div_e.inputs
        sqrt_e = _single_use_producer(rw, root, uses, ew.sqrt_p)
        if sqrt_e is None:
            continue
        add_e = _single_use_producer(rw, sqrt_e.inputs[0], uses, ew.add_p)
        if add_e is None:
            continue
        for new_acc, eps in (add_e.inputs, add_e.inputs[::-1]):
            acc_e = rw.producer(new_acc)
            if acc_e is None or acc_e.primitive is not ew.add_p:
                continue
            for acc, sq in (acc_e.inputs, acc_e.inputs[::-1]):
                sq_e = _single_use_producer(rw, sq, uses, ew.mul_p)
                if sq_e is not None and sq_e.inputs[0] is g and sq_e.inputs[1] is g:
                    return [w, acc, g, lr, eps], acc_e.outputs[0]
    return None


def fuse_adagrad(graph: Graph) -> Graph:
    uses = use_counts(graph)
    rw = Rewriter(graph)
    for e in graph.eqns:
        match = _match_adagrad(rw, e, uses)
        if match is None:
            rw.keep(e)
            continue
        ins, new_acc = match
        try:
            w_out, acc_out = rw.emit(adagrad_p, ins, None, e.source)
        except (TypeError, ValueError):
            rw.keep(e)
            continue
        if w_out.aval != e.outputs[0].aval or acc_out.aval != new_acc.aval:
            rw.eqns.pop()
            rw.keep(e)
            continue
        rw.replace(e.outputs[0], w_out)
        rw.replace(new_acc, acc_out)
    return rw.finish()
