"""``jax.custom_batching``: ``custom_vmap`` (a function with its own batching rule) and
``sequential_vmap`` (one whose batch runs as a loop over examples, ``lax.map``).

A ``custom_vmap`` call stages the function into a ``custom_vmap_call`` equation that runs the
function's graph; under ``vmap`` the equation is replaced by the user's rule,
``rule(axis_size, in_batched, *args) -> (out, out_batched)``, called on the arguments with their
batch axis first. Differentiation goes through the function itself, so the derivative of a
``custom_vmap`` function is batched as its equations are (JAX keeps the rule for its jvp;
``docs/differences_from_jax.md``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fungraph._custom_vmap import custom_vmap_call_p
from fungraph.core import weak_outputs
from fungraph.custom_derivatives import _stage_call
from fungraph.lax import map as lax_map
from fungraph.tree_util import PyTreeDef, tree_flatten, tree_map, tree_structure, tree_unflatten

__all__ = ["custom_vmap", "sequential_vmap"]

@dataclass(frozen=True)
class _FlatRule:
    """The user's rule over flat operands: unflattened arguments (batch axis first) and batched
    flags in, flat outputs and their batch axes (0 or None) out."""

    rule: Callable[..., Any]
    in_tree: PyTreeDef
    out_tree: PyTreeDef
    name: str

    def __call__(self, size: int, leaves: Sequence[Any], batched: Sequence[bool]) -> tuple[list[Any], list[int | None]]:
        args = tree_unflatten(self.in_tree, list(leaves))
        in_batched = tree_unflatten(self.in_tree, list(batched))
        result = self.rule(size, list(in_batched), *args)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"the vmap rule of custom_vmap function {self.name} must return (out, out_batched), "
                            f"got {type(result).__name__}")
        out, out_batched = result
        if tree_structure(out) != self.out_tree:
            raise TypeError(f"the vmap rule of custom_vmap function {self.name} returned outputs of structure "
                            f"{tree_structure(out)}, but the function returns {self.out_tree}")
        flags = self.out_tree.flatten_up_to(out_batched)
        outs = tree_flatten(out)[0]
        for b in flags:
            if not isinstance(b, bool):
                raise TypeError(f"the vmap rule of custom_vmap function {self.name}: out_batched must hold bools, "
                                f"got {type(b).__name__}")
        return outs, [0 if b else None for b in flags]


class custom_vmap:  # noqa: N801 - JAX's name
    """A function with a custom batching rule: ``@custom_vmap`` then ``@f.def_vmap`` on
    ``rule(axis_size, in_batched, *args) -> (out, out_batched)``."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable[..., Any] | None = None

    def def_vmap(self, vmap_rule: Callable[..., Any]) -> Callable[..., Any]:
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", repr(self.fun))
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        if kwargs:
            raise TypeError(f"custom_vmap function {name}: pass its arguments positionally (got keywords "
                            f"{sorted(kwargs)})")
        leaves, graph, closure, in_tree, out_tree, weak = _stage_call(self.fun, args)
        flat_rule = _FlatRule(self.vmap_rule, tree_structure(list(args)), out_tree, name)
        outs = custom_vmap_call_p.bind(*leaves, *closure, call=graph, rule=flat_rule, num_consts=len(closure))
        return tree_unflatten(out_tree, weak_outputs(outs, weak))


def sequential_vmap(f: Callable[..., Any]) -> custom_vmap:
    """``f`` batched as a loop over the examples (``lax.map``), unbatched arguments shared."""
    fun = custom_vmap(f)

    @fun.def_vmap
    def rule(axis_size: int, in_batched: list[Any], *args: Any) -> tuple[Any, Any]:
        flags = tree_flatten(in_batched)[0]
        leaves, tree = tree_flatten(list(args))
        mapped = [x for x, b in zip(leaves, flags) if b]

        def one(xs: list[Any]) -> Any:
            it = iter(xs)
            return f(*tree_unflatten(tree, [next(it) if b else x for x, b in zip(leaves, flags)]))

        out = lax_map(one, mapped)
        return out, tree_map(lambda _: True, out)

    return fun
