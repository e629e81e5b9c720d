"""JAX's ``jax.interpreters.ad`` for user-defined primitives: the jvp and transpose tables,
symbolic zeros and undefined primals.

fungraph's own rules write a zero tangent or cotangent as ``None``; JAX's write ``Zero(aval)``.
A rule given through :data:`primitive_jvps`, :func:`defjvp` or :data:`primitive_transposes` is
JAX's kind, so the table wraps it: its ``None`` tangents arrive as ``Zero`` and the ``Zero``
values it returns leave as ``None``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fungraph.core import Primitive, RuleTable
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives._rules import UndefinedPrimal, is_undefined, zeros
from fungraph.primitives.elementwise import add


@dataclass(frozen=True)
class Zero:
    """A symbolic zero tangent or cotangent of type ``aval`` (JAX's ``ad.Zero``)."""

    aval: ShapedArray

    @staticmethod
    def from_primal_value(x: Any) -> Zero:
        return Zero(aval_of(x))


def is_undefined_primal(x: Any) -> bool:
    """Whether a transpose rule's argument is the linear input it must give a cotangent for."""
    return is_undefined(x)


def instantiate_zeros(t: Any) -> Any:
    """``t``, with a symbolic zero made an array of zeros."""
    return zeros(t.aval) if isinstance(t, Zero) else t


def _none(t: Any) -> Any:
    return None if isinstance(t, Zero) else t


def _outs(prim: Primitive, ts: Any) -> Any:
    return [_none(t) for t in ts] if prim.multiple_results else _none(ts)


def _jvp_rule(prim: Primitive, rule: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(rule)
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        ts = [Zero.from_primal_value(p) if t is None else t for p, t in zip(primals, tangents)]
        out, t_out = rule(primals, ts, **params)
        return out, _outs(prim, t_out)

    return jvp


def _transpose_rule(prim: Primitive, rule: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(rule)
    def transpose(ct: Any, *args: Any, **params: Any) -> list[Any]:
        return [_none(c) for c in rule(ct, *args, **params)]

    return transpose


#: ``primitive_jvps[p] = rule``: ``rule(primals, tangents, **params) -> (primal_out, tangent_out)``.
primitive_jvps = RuleTable("jvp", _jvp_rule)
#: ``primitive_transposes[p] = rule``: ``rule(ct, *args, **params) -> a cotangent or None per arg``,
#: where the linear args are ``UndefinedPrimal``.
primitive_transposes = RuleTable("transpose", _transpose_rule)


def defjvp(primitive: Primitive, *jvprules: Callable[..., Any] | None) -> None:
    """Give ``primitive`` a jvp rule made of one rule per input, ``jvprule(tangent, *primals,
    **params)``, the input's share of the output tangent (None: the input has none)."""
    if primitive.multiple_results:
        raise TypeError(f"defjvp: `{primitive.name}` has several results; register a rule in primitive_jvps")

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        if len(jvprules) != len(primals):
            raise TypeError(f"defjvp: `{primitive.name}` got {len(primals)} inputs but {len(jvprules)} jvp rules")
        out = primitive.bind(*primals, **params)
        terms = [r(t, *primals, **params) for r, t in zip(jvprules, tangents)
                 if r is not None and not isinstance(t, Zero)]
        return out, functools.reduce(add, terms) if terms else Zero.from_primal_value(out)

    primitive_jvps[primitive] = jvp


__all__ = ["UndefinedPrimal", "Zero", "defjvp", "instantiate_zeros", "is_undefined_primal", "primitive_jvps",
           "primitive_transposes"]
