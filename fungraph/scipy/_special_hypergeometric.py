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

__all__ = ["hyp1f1", "hyp2f1"]

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


# --- 2F1 ------------------------------------------------------------------------------------------


def _near_integer(v: Any) -> Any:
    return fnp.abs(ew.sub(v, fnp.round(v))) < const(50 * eps(v), v)


def _hyp2f1_series(a: Any, b: Any, c: Any, x: Any) -> Any:
    """sum_k (a)_k (b)_k / (c)_k x^k / k!."""
    one = const(1.0, x)

    def ratio_at(k: Any) -> Any:
        km1 = ew.sub(k, one)
        return ew.mul(ew.div(ew.div(ew.mul(ew.add(a, km1), ew.add(b, km1)), ew.add(c, km1)), k), x)

    return _sum_terms(fnp.ones_like(x), fnp.zeros_like(x), ratio_at)


def _hyp2f1_terminating(a: Any, b: Any, c: Any, x: Any) -> Any:
    """The series when ``a`` (or ``b``, swapped in when it is the longer usable one) is a
    non-positive integer: |a| + 1 terms."""
    zero = const(0.0, x)
    swap = fnp.logical_and(fnp.logical_and(b < a, _near_integer(b)), fnp.logical_not(fnp.logical_and(
        fnp.logical_and(fnp.equal(fnp.mod(c, const(1.0, c)), zero), c <= zero), c > b)))
    a, b = fnp.where(swap, b, a), fnp.where(swap, a, b)
    a = fnp.abs(a)
    one = const(1.0, x)

    def step(_: Any, s: tuple) -> tuple:
        i, total, term = s
        factor = ew.mul(ew.div(ew.neg(ew.add(ew.sub(a, i), one)), ew.add(c, ew.sub(i, one))),
                        ew.mul(ew.div(ew.add(b, ew.sub(i, one)), i), x))
        term = ew.mul(term, factor)
        return ew.add(i, one), ew.add(total, term), term

    state = (fnp.ones_like(x), fnp.ones_like(x), fnp.ones_like(x))
    return iterate(step, state, lambda s: s[0] < ew.add(a, one), 2 ** 31 - 1)[1]


def _hyp2f1_near_one(a: Any, b: Any, c: Any, x: Any) -> Any:
    """The expansion around x = 1 with digamma terms when c - a - b is (near) an integer
    (Abramowitz and Stegun 15.3.10-12)."""
    one, zero = const(1.0, x), const(0.0, x)
    tol = const(eps(x), x)
    psi, gam = sp.digamma_p.bind, sp.gamma_p.bind
    d = ew.sub(ew.sub(c, a), b)
    s = ew.sub(one, x)
    rd = fnp.round(d)
    nonneg = rd >= 0
    e = fnp.where(nonneg, d, ew.neg(d))
    d1 = fnp.where(nonneg, d, zero)
    d2 = fnp.where(nonneg, zero, d)
    ard = fnp.abs(rd)
    log_s = ew.log(s)
    ad1, bd1 = ew.add(a, d1), ew.add(b, d1)
    y = ew.sub(ew.sub(ew.sub(ew.add(psi(one), psi(ew.add(one, e))), psi(ad1)),
                      psi(bd1)), log_s)
    y = ew.div(y, gam(ew.add(e, one)))
    p = ew.div(ew.mul(ew.mul(ad1, bd1), s), gam(ew.add(e, const(2.0, x))))

    def step(k: Any, st: tuple) -> tuple:
        p, _, y = st
        t = ew.add(fnp.asarray(k).astype(x.dtype), one)
        r = ew.sub(ew.sub(ew.sub(ew.add(psi(ew.add(one, t)), psi(ew.add(ew.add(one, t), e))), psi(ew.add(ad1, t))),
                          psi(ew.add(bd1, t))), log_s)
        q = ew.mul(p, r)
        p = ew.mul(p, ew.div(ew.mul(s, ew.add(ad1, t)), ew.add(t, one)))
        p = ew.mul(p, ew.div(ew.add(bd1, t), ew.add(ew.add(t, one), e)))
        return p, q, ew.add(y, q)

    _, _, y = iterate(step, (p, y, y), lambda st: fnp.abs(st[1]) >= ew.mul(tol, fnp.abs(st[2])), _MAX_TERMS - 1)

    def finite_step(_: Any, st: tuple) -> tuple:
        p, y1, t = st
        p = ew.div(ew.mul(p, ew.div(ew.mul(ew.mul(s, ew.add(ew.add(a, t), d2)), ew.add(ew.add(b, t), d2)),
                                    ew.add(ew.sub(one, e), t))), ew.add(t, one))
        return p, ew.add(y1, p), ew.add(t, one)

    finite = (fnp.ones_like(x), fnp.ones_like(x), fnp.zeros_like(x))
    _, y1, _ = iterate(finite_step, finite, lambda st: ew.add(st[2], one) < ard, 2 ** 31 - 1)
    gc = gam(c)
    y1 = ew.mul(y1, ew.div(ew.mul(gam(e), gc), ew.mul(gam(ad1), gam(bd1))))
    y_scaled = ew.mul(y, ew.div(gc, ew.mul(gam(ew.add(a, d2)), gam(ew.add(b, d2)))))
    odd = fnp.equal(fnp.mod(ard, const(2.0, x)), one)
    y_scaled = fnp.where(odd, ew.neg(y_scaled), y_scaled)
    q = fnp.power(s, rd)
    summed = fnp.where(rd > 0, ew.add(ew.mul(y_scaled, q), y1), ew.add(y_scaled, ew.mul(y1, q)))
    return fnp.where(fnp.equal(rd, zero), ew.mul(y, ew.div(gc, ew.mul(gam(a), gam(b)))), summed)


def _hyp2f1_by_case(a: Any, b: Any, c: Any, x: Any) -> Any:
    """The terminating series for a non-positive integer a or b, the digamma expansion for
    x > 0.9 with c - a - b near an integer, the Taylor series otherwise (each loop fed harmless
    arguments where its value is not used)."""
    zero = const(0.0, x)
    neg_int = fnp.logical_or(fnp.logical_and(a <= zero, _near_integer(a)),
                             fnp.logical_and(b <= zero, _near_integer(b)))
    d = ew.sub(ew.sub(c, a), b)
    near_one = fnp.logical_and(fnp.logical_and(x > const(0.9, x), fnp.logical_not(neg_int)), _near_integer(d))
    series = _hyp2f1_series(a, b, c, x)
    terminating = _hyp2f1_terminating(fnp.where(neg_int, a, zero), fnp.where(neg_int, b, zero), c, x)
    keep = [fnp.where(near_one, v, const(fill, v)) for v, fill in ((a, 0.5), (b, 0.5), (c, 2.0), (x, 0.95))]
    transformed = _hyp2f1_near_one(*keep)
    return fnp.select([near_one, neg_int], [transformed, terminating], series)


@custom_jvp
def _hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    one, zero = const(1.0, x), const(0.0, x)
    d = ew.sub(ew.sub(c, a), b)
    s = ew.sub(one, x)
    ca, cb = ew.sub(c, a), ew.sub(c, b)
    trivial = fnp.logical_or(fnp.equal(x, zero), fnp.logical_and(
        fnp.logical_or(fnp.equal(a, zero), fnp.equal(b, zero)), fnp.not_equal(c, zero)))
    pole = fnp.logical_or(fnp.equal(c, zero), fnp.logical_and(c < zero, fnp.equal(fnp.mod(c, one), zero)))
    euler = fnp.logical_and(d <= const(-1.0, x), fnp.logical_not(fnp.logical_and(
        fnp.abs(ew.sub(d, fnp.round(d))) >= const(50 * eps(x), x), s < zero)))
    diverges = fnp.logical_and(d <= zero, fnp.equal(x, one))
    b_is_c = fnp.logical_and(x < one, fnp.equal(b, c))
    a_is_c = fnp.logical_and(x < one, fnp.equal(a, c))
    beyond = x > one
    at_one = fnp.equal(x, one)
    gauss = ew.div(ew.mul(sp.gamma_p.bind(c), sp.gamma_p.bind(d)), ew.mul(sp.gamma_p.bind(ca), sp.gamma_p.bind(cb)))
    special_case = fnp.logical_or(fnp.logical_or(fnp.logical_or(trivial, pole), fnp.logical_or(diverges, b_is_c)),
                                  fnp.logical_or(fnp.logical_or(a_is_c, beyond), at_one))
    general = fnp.logical_and(fnp.logical_not(special_case), fnp.logical_not(euler))
    euler_only = fnp.logical_and(euler, fnp.logical_not(fnp.logical_or(trivial, pole)))
    safe = [(v, fill) for v, fill in ((a, 0.5), (b, 0.5), (c, 2.0), (x, 0.5))]
    direct = _hyp2f1_by_case(*(fnp.where(general, v, const(f, v)) for v, f in safe))
    euler_args = [fnp.where(euler_only, v, const(f, v)) for v, f in ((ca, 1.5), (cb, 0.5), (c, 2.0), (x, 0.5))]
    transformed = ew.mul(fnp.power(s, d), _hyp2f1_by_case(*euler_args))
    return fnp.select(
        [trivial, pole, euler, diverges, b_is_c, a_is_c, beyond, at_one],
        [fnp.ones_like(x), fnp.full_like(x, np.inf), transformed, fnp.full_like(x, np.inf),
         fnp.power(s, ew.neg(a)), fnp.power(s, ew.neg(b)), fnp.full_like(x, np.inf), gauss],
        direct)


def _hyp2f1_weighted(a: Any, b: Any, c: Any, x: Any, weight_at: Any) -> Any:
    one = const(1.0, x)
    first = ew.mul(ew.div(ew.mul(a, b), c), x)
    return _sum_terms(first, fnp.zeros_like(x), lambda k: ew.mul(ew.div(ew.div(
        ew.mul(ew.add(a, k), ew.add(b, k)), ew.add(c, k)), ew.add(k, one)), x), weight_at)


def _hyp2f1_dparam(which: int) -> Any:
    def rule(t: Any, out: Any, a: Any, b: Any, c: Any, x: Any) -> Any:
        v = (a, b, c)[which]
        psi_v = sp.digamma_p.bind(v)
        if which == 2:
            weight = lambda k: ew.sub(psi_v, sp.digamma_p.bind(ew.add(v, k)))  # noqa: E731
        else:
            weight = lambda k: ew.sub(sp.digamma_p.bind(ew.add(v, k)), psi_v)  # noqa: E731
        return ew.mul(t, _hyp2f1_weighted(a, b, c, x, weight))

    return rule


def _hyp2f1_dx(t: Any, out: Any, a: Any, b: Any, c: Any, x: Any) -> Any:
    one = const(1.0, x)
    scale = ew.div(ew.mul(a, b), c)
    return ew.mul(t, ew.mul(scale, _hyp2f1(ew.add(a, one), ew.add(b, one), ew.add(c, one), x)))


_hyp2f1.defjvps(_hyp2f1_dparam(0), _hyp2f1_dparam(1), _hyp2f1_dparam(2), _hyp2f1_dx)


def hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    """Gauss's hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!, real
    arguments and x <= 1 (inf beyond, as JAX)."""
    a, b, c, x = real_floats("hyp2f1", a, b, c, x)
    a, b, c, x = fnp.broadcast_arrays(a, b, c, x)
    return _hyp2f1(a, b, c, x)
