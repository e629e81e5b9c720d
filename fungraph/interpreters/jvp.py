"""Forward-mode differentiation as a trace: each tracer carries a primal and a tangent.

A tangent of ``None`` is a symbolic zero, so constants and integer values cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, Trace, Tracer, full_raise, new_main, weakened
from fungraph.ir import Params, ShapedArray, aval_of
from fungraph.primitives._rules import register_transform, zeros
from fungraph.primitives.elementwise import weak


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    def __init__(self, trace: JVPTrace, primal: Any, tangent: Any) -> None:
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> ShapedArray:
        return aval_of(self.primal)

    def to_concrete_value(self) -> Any:
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p


class JVPTrace(Trace):
    def pure(self, val: Any) -> JVPTracer:
        return JVPTracer(self, val, None)

    lift = pure

    def process_primitive(self, prim: Primitive, tracers: Sequence[Any], params: Params) -> list[JVPTracer]:
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(t is None for t in tangents) or prim.jvp is NOT_DIFFERENTIABLE:
            out = prim.bind(*primals, **params)
            outs = out if prim.multiple_results else (out,)
            return [JVPTracer(self, o, None) for o in outs]
        primal_out, tangent_out = prim.rule("jvp")(primals, tangents, **params)
        if not prim.multiple_results:
            primal_out, tangent_out = (primal_out,), (tangent_out,)
        return [JVPTracer(self, p, t if t is not None and dtypes.is_inexact(aval_of(p).dtype) else None)
                for p, t in zip(primal_out, tangent_out)]


def jvp_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any], tangents: Sequence[Any | None],
             instantiate: bool = True, trace_type: type[JVPTrace] = JVPTrace) -> tuple[list[Any], list[Any]]:
    """Push ``tangents`` forward through ``fun``; ``None`` tangents are zeros."""
    with new_main(trace_type) as main:
        trace = trace_type(main)
        ins = [_typed_as(JVPTracer(trace, p, t), p) for p, t in zip(primals, tangents)]
        outs = [full_raise(trace, o) for o in fun(*ins)]
        primals_out = [weak(o.primal) if dtypes.is_weak(o) else o.primal for o in outs]
        tangents_out = [o.tangent for o in outs]
    if instantiate:
        tangents_out = [zeros(_canonical_aval(p)) if t is None else t for p, t in zip(primals_out, tangents_out)]
    return primals_out, tangents_out


def _canonical_aval(x: Any) -> ShapedArray:
    """``x``'s aval in the current dtype mode (a Python float returned as it is is float32 with x64 off)."""
    a = aval_of(x)
    return ShapedArray(a.shape, dtypes.canonicalize(a.dtype), a.vma)


def _typed_as(tracer: JVPTracer, primal: Any) -> JVPTracer:
    """``tracer`` weakly typed where its primal is (a Python scalar, a weak array), as JAX's."""
    return weakened(tracer) if dtypes.is_weak(primal) else tracer


register_transform("jvp", jvp_flat)
