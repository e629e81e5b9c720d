"""The confluent and Gauss hypergeometric functions ``hyp1f1`` and ``hyp2f1`` of
``scipy.special``, real arguments only, as JAX 0.10 computes them (after Pearson, Olver and
Porter, "Numerical methods for the computation of the confluent and Gauss hypergeometric
functions", 2014): Taylor series summed until the next term is below the dtype's epsilon (at
most 250 terms), an asymptotic series for ``hyp1f1`` at ``|x| >= 100``, and for ``hyp2f1``
the terminating series, the linear transformations and the digamma expansion near ``x = 1``.

Each series runs over the whole array in one ``while_loop``; the derivatives in every argument
are JAX's series (``custom_jvp``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.custom_derivatives import custom_jvp
from fungraph.primitives import elementwise as ew
from fungraph.primitives import special as sp
from fungraph.scipy._special_util import const, eps, iterate, real_floats

__all__ = ["hyp1f1"]

_MAX_TERMS = 250


def _sum_terms(first: Any, start: Any, ratio_at: Any, weight_at: Any = None) -> Any:
    """start + sum_{k >= 1} w_k t_k with t_1 = ``first``, t_{k+1} = t_k ratio_at(k) and
    w_k = weight_at(k) (1 without it), stopped where |t_k| <= eps |partial sum| or after 250 terms."""
    tol = const(eps(first), first)

    def step(i: Any, s: tuple) -> tuple:
        total, term = s
        k = ew.add(fnp.asarray(i).astype(first.dtype), const(1.0, first))
        weighted = term if weight_at is None else ew.mul(term, weight_at(k))
        return ew.add(total, weighted), ew.mul(term, ratio_at(k))

    def active(s: tuple) -> Any:
        total, term = s
        return fnp.abs(term) > ew.mul(tol, fnp.abs(total))

    total, _ = iterate(step, (fnp.broadcast_to(start, first.shape), first), active, _MAX_TERMS - 1)
    return total


# --- 1F1 ------------------------------------------------------------------------------------------


def _hyp1f1_series(a: Any, b: Any, x: Any) -> Any:
    one = const(1.0, x)
    return _sum_terms(ew.mul(ew.div(a, b), x), fnp.ones_like(x),
                      lambda k: ew.div(ew.mul(ew.div(ew.add(a, k), ew.add(b, k)), x), ew.add(k, one)))


def _hyp1f1_asymptotic(a: Any, b: Any, x: Any) -> Any:
    one = const(1.0, x)
    first = ew.div(ew.mul(ew.sub(b, a), ew.sub(one, a)), x)
    series = _sum_terms(first, fnp.ones_like(x), lambda k: ew.div(ew.div(
        ew.mul(ew.add(ew.sub(b, a), k), ew.add(ew.sub(one, a), k)), ew.add(k, one)), x))
    scale = ew.mul(ew.div(sp.gamma_p.bind(b), sp.gamma_p.bind(a)), ew.exp(x))
    return ew.mul(ew.mul(scale, fnp.power(x, ew.sub(a, b))), series)


@custom_jvp
def _hyp1f1(a: Any, b: Any, x: Any) -> Any:
    near = fnp.abs(x) < const(100.0, x)
    series = _hyp1f1_series(a, b, fnp.where(near, x, const(0.0, x)))
    asymptotic = _hyp1f1_asymptotic(a, b, fnp.where(near, const(100.0, x), x))
    value = fnp.where(near, series, asymptotic)
    a_zero = fnp.equal(a, const(0.0, a))
    return fnp.select([a_zero, fnp.equal(a, b), fnp.equal(b, const(0.0, b))],
                      [fnp.ones_like(x), ew.exp(x), fnp.full_like(x, np.inf)], value)


def _hyp1f1_weighted(a: Any, b: Any, x: Any, weight_at: Any) -> Any:
    one = const(1.0, x)
    return _sum_terms(ew.mul(ew.div(a, b), x), fnp.zeros_like(x),
                      lambda k: ew.div(ew.mul(ew.div(ew.add(a, k), ew.add(b, k)), x), ew.add(k, one)), weight_at)


def _hyp1f1_da(t: Any, out: Any, a: Any, b: Any, x: Any) -> Any:
    psi_a = sp.digamma_p.bind(a)
    d = _hyp1f1_weighted(a, b, x, lambda k: ew.sub(sp.digamma_p.bind(ew.add(a, k)), psi_a))
    return ew.mul(t, d)


def _hyp1f1_db(t: Any, out: Any, a: Any, b: Any, x: Any) -> Any:
    psi_b = sp.digamma_p.bind(b)
    d = _hyp1f1_weighted(a, b, x, lambda k: ew.sub(psi_b, sp.digamma_p.bind(ew.add(b, k))))
    return ew.mul(t, d)


def _hyp1f1_dx(t: Any, out: Any, a: Any, b: Any, x: Any) -> Any:
    one = const(1.0, x)
    return ew.mul(t, ew.mul(ew.div(a, b), _hyp1f1(ew.add(a, one), ew.add(b, one), x)))


_hyp1f1.defjvps(_hyp1f1_da, _hyp1f1_db, _hyp1f1_dx)


def hyp1f1(a: Any, b: Any, x: Any) -> Any:
    """Kummer's confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!, real
    arguments; 1 at a == 0 (also a == b == 0, unlike SciPy), e^x at a == b, inf at b == 0."""
    a, b, x = real_floats("hyp1f1", a, b, x)
    a, b, x = fnp.broadcast_arrays(a, b, x)
    return _hyp1f1(a, b, x)
