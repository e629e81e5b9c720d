"""``jax.lax``'s helpers for values and their staging: ``dtype``, ``shape_as_value``, ``stage``
(lift a value into the current trace), and the ordering tokens ``create_token``, ``after_all``
and ``dce_sink``. fungraph orders effects by data dependence and keeps effectful equations
from dead-code elimination itself, so tokens carry nothing and ``dce_sink`` has nothing to do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.array import hosted
from fungraph.core import Tracer
from fungraph.primitives.operands import asarray


def dtype(x: Any) -> np.dtype:
    """The dtype of ``x`` (an array, a Python scalar or a dtype) in the current mode, as
    ``jax.lax.dtype`` (``jax.dtypes.dtype``): 64-bit types narrowed with x64 off, with JAX's
    warning for a 64-bit dtype asked for by name or type."""
    if isinstance(x, (list, tuple, dict)):
        raise TypeError(f"Cannot determine dtype of {x}")
    if isinstance(x, type) or isinstance(x, (np.dtype, str)):
        return dtypes.canonicalize(x, "dtype", depth=3)
    return dtypes.result_type(x)


def shape_as_value(shape: Sequence[int]) -> Any:
    """``shape`` as an integer array: int32, or int64 for sizes past int32's range."""
    dims = [int(d) for d in shape]
    big = any(d > np.iinfo(np.int32).max for d in dims)
    return np.asarray(dims, np.int64 if big else np.int32)


def stage(x: Any, /) -> Any:
    """``x`` lifted into the active trace: a traced value as it is, anything else as a fungraph
    array (``jax.lax.stage``)."""
    value = asarray(x)
    return value if isinstance(value, Tracer) else hosted(np.array(value))


class Token:
    """An ordering token (``jax.lax.create_token``): fungraph sequences effects itself, so a token
    only stands for "after these"."""

    def __repr__(self) -> str:
        return "Token()"


def create_token(_: Any = None) -> Token:
    """A new token with no preconditions; the argument is ignored, as in JAX."""
    return Token()


def after_all(*operands: Token) -> Token:
    """A token ordered after all ``operands`` (tokens)."""
    for t in operands:
        if not isinstance(t, Token):
            raise TypeError(f"lax.after_all: operands must be tokens, got {type(t).__name__}")
    return Token()


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Mark ``val`` (a pytree) as used, so dead-code elimination keeps what computes it; fungraph
    has nothing to keep for an unused value outside an effect, so this returns None, as JAX's."""
    del val, prevent_mlir_dce
