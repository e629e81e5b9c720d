"""Identity equations that label a value for ``checkpoint``'s policies.

``checkpoint_name`` (JAX's ``name_p``) lets a policy such as ``save_only_these_names`` pick
the value by name. ``remat_saved`` is the marker ``checkpoint`` puts after each equation its
policy saves: the forward pass returns the marked values, and the backward pass reads them
instead of recomputing them. Both are removed after CSE under ``jit``
(:func:`fungraph.interpreters.cse.strip_barriers`), so engines never run them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.core import Primitive, as_operand
from fungraph.ir import ShapedArray
from fungraph.tree_util import tree_map


def _impl(x: Any, **_: Any) -> np.ndarray:
    return np.asarray(x)


def _aval(x: ShapedArray, **_: Any) -> ShapedArray:
    return x


def _identity_rules(p: Primitive) -> Primitive:
    """Differentiate and batch ``p`` as the identity; the primal keeps its label, the tangent
    (a different value) does not."""

    @p.def_jvp
    def _jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
        return p.bind(primals[0], **params), tangents[0]

    @p.def_transpose
    def _transpose(ct: Any, x: Any, **_: Any) -> tuple:
        return (ct,)

    @p.def_batch
    def _batch(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        return p.bind(args[0], **params), dims[0]

    return p


name_p = _identity_rules(Primitive("checkpoint_name", impl=_impl, abstract_eval=_aval))
saved_p = _identity_rules(Primitive("remat_saved", impl=_impl, abstract_eval=_aval, mergeable=False))


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` (any pytree of arrays) unchanged, each leaf labelled ``name`` for the policies of
    ``checkpoint`` (``save_only_these_names``, ``save_any_names_but_these``), as JAX's."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {type(name).__name__}")
    return tree_map(lambda leaf: name_p.bind(as_operand(leaf), name=name), x)
