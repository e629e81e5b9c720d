"""``jax.checkpoint_policies`` for ``fungraph.checkpoint(fun, policy=...)``.

A policy answers, for each equation ``prim(*avals, **params)`` of the checkpointed function,
whether its outputs are saved for the backward pass (a true value) or recomputed there (a
false one). ``checkpoint`` puts a ``remat_saved`` marker after each saved output; the forward
pass returns those values, and the backward pass recomputes only what the saved values and the
inputs do not give. ``fungraph.ad_checkpoint.print_saved_residuals`` lists what a policy keeps.

There is one memory space, so the ``offload`` policies save where JAX would offload to host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Policy = Callable[..., Any]


class _Answer:
    """What JAX's richer policies return instead of a bool: ``Saveable`` and ``Recompute``."""

    def __init__(self, name: str, save: bool) -> None:
        self.name, self.save = name, save

    def __bool__(self) -> bool:
        return self.save

    def __repr__(self) -> str:
        return self.name


Saveable = _Answer("Saveable", True)
Recompute = _Answer("Recompute", False)


@dataclass(frozen=True)
class Offloadable:
    """Save to memory space ``dst`` (JAX: host memory). There is one memory space here, so an
    offloadable value is saved."""

    src: Any = None
    dst: Any = None

    def __bool__(self) -> bool:
        return True


def everything_saveable(*_: Any, **__: Any) -> bool:
    """Save every intermediate: the same as not checkpointing."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Save nothing but the inputs; recompute the rest in the backward pass (the default)."""
    return False


def dots_saveable(prim: Any, *_: Any, **__: Any) -> bool:
    """Save the outputs of products (``dot_general``) and convolutions."""
    return prim.name in ("dot_general", "conv")


def dots_with_no_batch_dims_saveable(prim: Any, *_: Any, **params: Any) -> bool:
    """Save the outputs of ``dot_general`` equations without batch dimensions (plain matrix
    products, the common choice for transformers)."""
    if prim.name != "dot_general":
        return False
    _, (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


checkpoint_dots = dots_saveable
checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def _named(prim: Any, params: dict[str, Any]) -> str | None:
    return params["name"] if prim.name == "checkpoint_name" else None


def _names(what: str, names: tuple) -> frozenset[str]:
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{what}: names must be strings, got {bad[0]!r}")
    return frozenset(names)


@dataclass(frozen=True)
class _OnlyNames:
    names: frozenset[str]

    def __call__(self, prim: Any, *_: Any, **params: Any) -> bool:
        return _named(prim, params) in self.names


@dataclass(frozen=True)
class _NamesBut:
    names: frozenset[str]

    def __call__(self, prim: Any, *_: Any, **params: Any) -> bool:
        name = _named(prim, params)
        return name is not None and name not in self.names


@dataclass(frozen=True)
class _AnythingBut:
    excluded_names: frozenset[str]

    def __call__(self, prim: Any, *_: Any, **params: Any) -> bool:
        return _named(prim, params) not in self.excluded_names


def save_only_these_names(*names: str) -> Policy:
    """Save the values labelled by ``checkpoint_name`` with one of ``names``; nothing else."""
    return _OnlyNames(_names("save_only_these_names", names))


def save_any_names_but_these(*names: str) -> Policy:
    """Save every value labelled by ``checkpoint_name`` except those with one of ``names``."""
    return _NamesBut(_names("save_any_names_but_these", names))


def save_anything_except_these_names(*names: str) -> Policy:
    """Save every intermediate except the values labelled with one of ``names``: those (and the
    values the labels were put on) are recomputed."""
    return _AnythingBut(_names("save_anything_except_these_names", names))


def save_from_both_policies(policy_1: Policy, policy_2: Policy) -> Policy:
    """Save what either policy saves."""
    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return bool(policy_1(prim, *avals, **params)) or bool(policy_2(prim, *avals, **params))

    return policy


def save_and_offload_only_these_names(*, names_which_can_be_saved: Any, names_which_can_be_offloaded: Any,
                                      offload_src: Any = None, offload_dst: Any = None) -> Policy:
    """``save_only_these_names`` over both lists (there is no host memory to offload to); the
    lists must not share a name, as in JAX."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
        raise ValueError("save_and_offload_only_these_names: names_which_can_be_saved and "
                         f"names_which_can_be_offloaded share {sorted(saved & offloaded)}")
    return save_only_these_names(*saved, *offloaded)


def offload_dot_with_no_batch_dims(offload_src: Any = None, offload_dst: Any = None) -> Policy:
    """``dots_with_no_batch_dims_saveable`` (saving stands in for offloading to host)."""
    return dots_with_no_batch_dims_saveable
