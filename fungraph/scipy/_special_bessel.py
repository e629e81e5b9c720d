"""Bessel functions of the first kind of integer order, ``bessel_jn``, as JAX 0.10 computes
them: Miller's backward recurrence from a fixed starting order (Zhang and Jin, "Computation of
Special Functions", 1996), normalised by J_0 + 2 (J_2 + J_4 + ...) = 1. A ``lax.scan`` over the
orders, so it differentiates and batches like any other code."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.numpy._util import promote
from fungraph.primitives import elementwise as ew
from fungraph.scipy._special_util import const

__all__ = ["bessel_jn"]


def _concrete_int(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError as err:
        raise TypeError(f"{what} of bessel_jn must be a concrete integer, got {value!r}") from err


def bessel_jn(z: Any, *, v: int, n_iter: int = 50) -> Any:
    """J_0(z) .. J_v(z) for real z, stacked on a new leading axis (shape ``(v + 1, *z.shape)``).
    The recurrence starts at order ``n_iter`` (concrete), which must exceed v and grow with |z|
    (about |z| + 20 for double precision)."""
    (z,) = promote(fnp.asarray(z), to_inexact=True)
    z = fnp.asarray(z)
    if np.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    v = _concrete_int(v, "Argument v")
    n_iter = _concrete_int(n_iter, "Argument n_iter")
    zero = fnp.zeros_like(z)

    def down(carry: tuple, k: Any) -> tuple:
        f0, f1, even_sum = carry
        f = ew.sub(ew.div(ew.mul(ew.mul(const(2.0, z), ew.add(k, const(1.0, z))), f1), z), f0)
        even = fnp.equal(fnp.mod(k, const(2.0, z)), const(0.0, z))
        even_sum = fnp.where(even, ew.add(even_sum, ew.mul(const(2.0, z), f)), even_sum)
        return (f1, f, even_sum), f

    init = (zero, fnp.full_like(z, 1e-16), zero)
    (_, _, even_sum), values = lax.scan(down, init, fnp.arange(n_iter + 1, dtype=z.dtype), reverse=True)
    return values[: v + 1] / (even_sum - values[0])
