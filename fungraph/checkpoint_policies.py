"""``jax.checkpoint_policies`` for ``fungraph.checkpoint(fun, policy=...)``.

A policy answers, for each equation ``prim(*avals, **params)`` of the checkpointed function,
whether its output may be saved for the backward pass. ``fungraph.checkpoint`` honours the two
extremes: ``everything_saveable`` (no rematerialisation: the function is differentiated as if
not checkpointed) and ``nothing_saveable`` (only the inputs are kept, the default). Any other
policy, the ``dots`` ones included, is accepted and recomputes everything as
``nothing_saveable`` does; the predicates still say what they would save.
"""

from __future__ import annotations

from typing import Any


def everything_saveable(*_: Any, **__: Any) -> bool:
    """Save every intermediate: the same as not checkpointing."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Save nothing but the inputs; recompute the rest in the backward pass."""
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
