"""The ``custom_vmap_call`` primitive: a staged function whose batching rule is given by its caller
(``custom_batching.custom_vmap``'s user rule, or lax's own, such as ``rng_bit_generator``'s JAX
rule). Below lax, so that lax's compositions can carry a rule; differentiation goes through the
function itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fungraph.core import Primitive
from fungraph.custom_derivatives import _call_aval, _call_impl, _inline_batch
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.jvp import jvp_flat
from fungraph.ir import Graph
from fungraph.primitives._batching import batch_size, to_front

custom_vmap_call_p = Primitive("custom_vmap_call", impl=_call_impl, abstract_eval=_call_aval, multiple_results=True)
"""Operands: the function's arguments, then its closure (``num_consts``); ``rule(size, leaves,
batched) -> (outs, out_dims)`` batches the arguments (batch axis first), ``out_dims`` 0 or None."""


@custom_vmap_call_p.def_jvp
def _custom_vmap_jvp(primals: tuple, tangents: tuple, *, call: Graph, rule: Callable[..., Any],
                     num_consts: int) -> tuple:
    return jvp_flat(lambda *args: eval_graph(call, *args), primals, tangents)


@custom_vmap_call_p.def_batch
def _custom_vmap_batch(args: Sequence[Any], dims: Sequence[int | None], *, call: Graph, rule: Callable[..., Any],
                       num_consts: int) -> tuple:
    """The user's rule on the arguments with their batch axis first; when the function closes
    over a batched value (which the rule cannot see), its equations are batched instead."""
    n = len(args) - num_consts
    if any(d is not None for d in dims[n:]):
        return _inline_batch(args, dims, call)
    size = batch_size(args, dims)
    leaves = [a if d is None else to_front(a, d) for a, d in zip(args[:n], dims[:n])]
    outs, out_dims = rule(size, leaves, [d is not None for d in dims[:n]])
    for o, a, d in zip(outs, call.out_avals, out_dims):
        shape, want = tuple(getattr(o, "shape", ())), a.shape if d is None else (size, *a.shape)
        if shape != want:
            raise TypeError(f"the vmap rule of custom_vmap function {getattr(rule, 'name', rule)} returned shape "
                            f"{shape} for an output of shape {a.shape} marked {'un' if d is None else ''}batched "
                            f"(expected {want})")
    return outs, out_dims
