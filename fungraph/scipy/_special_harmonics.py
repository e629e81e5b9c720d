"""Spherical harmonics ``sph_harm_y`` of ``scipy.special``, as JAX 0.10 defines them: orthonormal
on the sphere, with the Condon-Shortley phase. The normalised associated Legendre function
P_n^|m|(cos theta) comes from the stable recurrences in the degree (up from P_|m|^|m|), unrolled
to the concrete maximum degree ``n_max``, so it differentiates and batches like any other code."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.numpy._util import promote
from fungraph.primitives import elementwise as ew
from fungraph.scipy._special_util import const

__all__ = ["sph_harm_y"]


def _legendre_normalized(n: Any, m: Any, x: Any, s: Any, n_max: int) -> Any:
    """The orthonormal P_n^m(x) (times 1 / sqrt(2 pi)) for 0 <= m <= n <= n_max, s = sqrt(1 - x^2)."""
    pmm = fnp.full_like(x, 1 / math.sqrt(4 * math.pi))
    for k in range(1, n_max + 1):
        pmm = fnp.where(const(k, m) <= m, ew.mul(const(-math.sqrt((2 * k + 1) / (2 * k)), x), ew.mul(s, pmm)), pmm)
    m2 = ew.mul(m, m)
    result = fnp.where(fnp.equal(n, m), pmm, fnp.zeros_like(pmm))
    prev2, prev1 = fnp.zeros_like(pmm), pmm
    for degree in range(1, n_max + 1):
        active = const(degree, m) > m
        coef = fnp.sqrt(ew.div(const(4 * degree * degree - 1, x),
                               fnp.where(active, ew.sub(const(degree * degree, m), m2), const(1.0, x))))
        below = const(degree - 1, m) > m
        coef_below = fnp.sqrt(ew.div(fnp.where(below, const(4 * (degree - 1) ** 2 - 1, x), const(1.0, x)),
                                     fnp.where(below, ew.sub(const((degree - 1) ** 2, m), m2), const(1.0, x))))
        new = ew.mul(coef, ew.sub(ew.mul(x, prev1), ew.div(prev2, coef_below)))
        prev2, prev1 = fnp.where(active, prev1, prev2), fnp.where(active, new, prev1)
        result = fnp.where(fnp.logical_and(active, fnp.equal(n, const(degree, n))), new, result)
    return result


def sph_harm_y(n: Any, m: Any, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """Y_n^m(theta, phi) for degree n >= 0, order |m| <= n, colatitude theta and longitude phi
    (broadcast together); ``n_max`` (concrete, default max(n)) bounds the degrees: larger
    degrees and orders are clipped to it in the Legendre factor, as JAX. ``diff_n`` is not supported, as in JAX."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n)))
        except Exception as err:  # a traced n
            raise TypeError("The `n_max` argument of `sph_harm_y` must be statically specified to use `sph_harm_y` "
                            "within transformations.") from err
    n_max = int(n_max)
    theta = fnp.atleast_1d(fnp.asarray(theta))
    (theta,) = promote(theta, to_inexact=True)
    n_arr, m_arr = fnp.asarray(n), fnp.asarray(m)
    x = fnp.cos(theta)
    s = fnp.sin(theta)
    m_abs = fnp.clip(fnp.abs(m_arr), 0, n_max).astype(x.dtype)
    degree = fnp.clip(n_arr, 0, n_max).astype(x.dtype)
    degree, m_abs, x, s = fnp.broadcast_arrays(degree, m_abs, x, s)
    legendre = _legendre_normalized(degree, m_abs, x, s, n_max)
    angle = fnp.abs(m_arr) * fnp.asarray(phi)
    harmonic = lax.complex(legendre * fnp.cos(angle), legendre * fnp.sin(angle))
    sign_dtype = m_arr.dtype if np.issubdtype(m_arr.dtype, np.floating) else fnp.zeros(0).dtype
    odd = fnp.not_equal(fnp.mod(fnp.abs(m_arr), 2), 0)
    sign = fnp.where(odd, np.asarray(-1.0, sign_dtype), np.asarray(1.0, sign_dtype))  # (-1)^|m|, a strong float
    return fnp.where(m_arr < 0, sign * fnp.conjugate(harmonic), harmonic)
