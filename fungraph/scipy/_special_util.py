"""Small helpers shared by the composed special functions: constants in an operand's dtype,
Horner evaluation of fixed coefficient tables, and rational approximations on masked inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.numpy._util import promote
from fungraph.primitives import elementwise as ew


def const(value: complex, like: Any) -> np.ndarray:
    """``value`` as a 0-d array of ``like``'s dtype."""
    return np.asarray(value, dtype=like.dtype)


def horner(coeffs: Sequence[float], x: Any) -> Any:
    """sum_k coeffs[k] x^(n-1-k), highest degree first, in ``x``'s dtype."""
    out = fnp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = ew.add(ew.mul(out, x), const(c, x))
    return out


def ratio(num: Sequence[float], den: Sequence[float], x: Any) -> Any:
    """horner(num, x) / horner(den, x)."""
    return ew.div(horner(num, x), horner(den, x))


def where_safe(mask: Any, x: Any, fill: float) -> Any:
    """``x`` where ``mask`` holds, ``fill`` elsewhere: the operand of a branch whose value is
    discarded outside ``mask`` but whose derivative must stay finite there."""
    return fnp.where(mask, x, const(fill, x))


def real_floats(name: str, *args: Any) -> list[Any]:
    """The arguments promoted to one real floating dtype, as JAX's ``promote_args_inexact``,
    refusing complex operands as JAX's real-only special functions do."""
    out = [fnp.asarray(v) for v in promote(*args, to_inexact=True)]
    if np.issubdtype(out[0].dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs, got {out[0].dtype}.")
    return out


def eps(x: Any) -> float:
    return float(np.finfo(x.dtype).eps)


def iterate(step: Callable[[Any, tuple], tuple], state: tuple, active: Callable[[tuple], Any], limit: int) -> tuple:
    """Apply ``step(k, state)`` (k = 0, 1, ...) to the elements still ``active`` (a boolean array
    function of the state) until none is, or ``limit`` times: an elementwise while loop run on
    the whole array at once, as ``vmap`` of a scalar loop would."""

    def cond(carry: tuple) -> Any:
        k, *rest = carry
        return fnp.logical_and(k < limit, fnp.any(active(tuple(rest))))

    def body(carry: tuple) -> tuple:
        k, *rest = carry
        old = tuple(rest)
        on = active(old)
        new = step(k, old)
        return (k + 1, *(fnp.where(on, n, o) for n, o in zip(new, old)))

    _, *out = lax.while_loop(cond, body, (np.int32(0), *state))
    return tuple(out)
