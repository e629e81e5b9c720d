"""``fungraph.scipy.special``: the special functions of ``scipy.special`` that statistical code
reaches for, differentiable and batchable like ``jax.scipy.special``.

Functions with their own primitive (``fungraph/primitives/special.py``) carry exact derivative
rules; the others are compositions. Integer inputs take JAX's float (float32 up to 32 bits), float32 stays float32.
See docs/scipy.md for the derivative status of every function and the differences from SciPy.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph._softmax import log_softmax, logsumexp, softmax
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy._util import cast, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import special as sp
from fungraph.scipy._special_bessel import bessel_jn
from fungraph.scipy._special_error import dawsn, erfcx, owens_t, wofz
from fungraph.scipy._special_harmonics import sph_harm_y
from fungraph.scipy._special_hypergeometric import hyp1f1, hyp2f1
from fungraph.scipy._special_integrals import exp1, expi, expn, fresnel, sici, spence

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma", "entr",
    "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn", "factorial", "fresnel", "gamma", "gammainc",
    "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma",
    "psi", "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "stdtr", "wofz", "xlog1py", "xlogy", "zeta",
]


def _c(value: float, x: Any) -> np.ndarray:
    return np.asarray(value, dtype=x.dtype)


def _unary(prim: Any, name: str, doc: str) -> Any:
    def f(x: Any) -> Any:
        (x,) = promote(x, to_inexact=True)
        return prim.bind(x)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


erf = _unary(ew.erf_p, "erf", "The error function 2/sqrt(pi) int_0^x e^{-t^2} dt.")
erfc = _unary(sp.erfc_p, "erfc", "1 - erf(x), accurate where erf(x) is close to 1.")
erfinv = _unary(sp.erf_inv_p, "erfinv", "The inverse of erf on (-1, 1); +-inf at +-1, nan outside.")
expit = _unary(ew.logistic_p, "expit", "The logistic sigmoid 1 / (1 + e^-x).")
gamma = _unary(sp.gamma_p, "gamma", "Gamma(x); +-inf at +-0, nan at the negative integers.")
gammaln = _unary(sp.lgamma_p, "gammaln", "log|Gamma(x)|; +inf at the poles.")
digamma = _unary(sp.digamma_p, "digamma", "psi(x) = d/dx log Gamma(x).")
psi = digamma
i0 = _unary(sp.bessel_i0_p, "i0", "The modified Bessel function of the first kind of order 0.")
i1 = _unary(sp.bessel_i1_p, "i1", "The modified Bessel function of the first kind of order 1.")
i0e = _unary(sp.bessel_i0e_p, "i0e", "exp(-|x|) i0(x).")
i1e = _unary(sp.bessel_i1e_p, "i1e", "exp(-|x|) i1(x).")
ndtri = _unary(sp.ndtri_p, "ndtri", "The standard normal quantile (inverse of ndtr).")
log_ndtr = _unary(sp.log_ndtr_p, "log_ndtr", "log of the standard normal cdf, accurate far into both tails.")


def logit(p: Any) -> Any:
    """log(p / (1 - p)); -inf at 0, +inf at 1, nan outside [0, 1]."""
    (p,) = promote(p, to_inexact=True)
    return ew.sub(ew.log(p), ew.log1p_p.bind(ew.neg(p)))


def ndtr(x: Any) -> Any:
    """The standard normal cdf erfc(-x / sqrt 2) / 2."""
    (x,) = promote(x, to_inexact=True)
    return ew.mul(_c(0.5, x), sp.erfc_p.bind(ew.mul(x, _c(-1 / math.sqrt(2), x))))


def polygamma(n: Any, x: Any) -> Any:
    """The n-th derivative of digamma (n a non-negative integer; nan otherwise)."""
    (x,) = promote(x, to_inexact=True)
    return sp.polygamma_p.bind(cast(n, x.dtype), x)


def gammainc(a: Any, x: Any) -> Any:
    """The regularised lower incomplete gamma function P(a, x): ``lax.igamma``'s primitive, so
    differentiable in both (in ``a`` by ``igamma_grad_a``)."""
    a, x = promote(a, x, to_inexact=True)
    return sp.igamma_p.bind(a, x)


def gammaincc(a: Any, x: Any) -> Any:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), differentiable in both."""
    a, x = promote(a, x, to_inexact=True)
    return sp.igammac_p.bind(a, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularised incomplete beta function I_x(a, b); differentiable in x only."""
    a, b, x = promote(a, b, x, to_inexact=True)
    return sp.betainc_p.bind(a, b, x)


def stdtr(df: Any, t: Any) -> Any:
    """Student's t cdf with ``df`` degrees of freedom; differentiable in t only."""
    df, t = promote(df, t, to_inexact=True)
    return sp.stdtr_p.bind(df, t)


def betaln(a: Any, b: Any) -> Any:
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    a, b = promote(a, b, to_inexact=True)
    return ew.sub(ew.add(sp.lgamma_p.bind(a), sp.lgamma_p.bind(b)), sp.lgamma_p.bind(ew.add(a, b)))


def _gamma_sign(x: Any) -> Any:
    """The sign of Gamma(x): +1 for x > 0, alternating between the negative poles."""
    even = fnp.equal(fnp.mod(ew.floor(x), _c(2, x)), _c(0, x))
    return fnp.where(fnp.logical_or(x > 0, even), _c(1, x), _c(-1, x))


def beta(a: Any, b: Any) -> Any:
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as sign * exp(betaln) so it does not overflow early."""
    a, b = promote(a, b, to_inexact=True)
    sign = ew.mul(ew.mul(_gamma_sign(a), _gamma_sign(b)), _gamma_sign(ew.add(a, b)))
    return ew.mul(sign, ew.exp(betaln(a, b)))


def multigammaln(a: Any, d: int) -> Any:
    """log of the multivariate gamma function of dimension ``d`` (a concrete integer).

    Unlike SciPy it does not check ``a > (d - 1) / 2`` (the value may be traced)."""
    (a,) = promote(a, to_inexact=True)
    d = int(d)
    out = fnp.full_like(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        out = ew.add(out, sp.lgamma_p.bind(ew.sub(a, _c(j / 2, a))))
    return out


def _x_times(x: Any, log_term: Any, y: Any, low: float) -> Any:
    """x * log_term(y), with 0 where x == 0 even if the log is infinite or undefined (y <= low or
    y = inf; nan y stays nan). The derivative in x at x == 0 is log_term(y) where that is finite."""
    outside = fnp.logical_not(fnp.logical_and(y > low, y < np.inf))
    masked = fnp.logical_and(fnp.equal(x, _c(0, x)), fnp.logical_and(outside, fnp.logical_not(fnp.isnan(y))))
    safe_y = fnp.where(masked, _c(1, y), y)
    return fnp.where(masked, _c(0, x), ew.mul(x, log_term(safe_y)))


def xlogy(x: Any, y: Any) -> Any:
    """x * log(y), 0 where x == 0."""
    x, y = promote(x, y, to_inexact=True)
    return _x_times(x, ew.log, y, 0.0)


def xlog1py(x: Any, y: Any) -> Any:
    """x * log1p(y), 0 where x == 0."""
    x, y = promote(x, y, to_inexact=True)
    return _x_times(x, ew.log1p_p.bind, y, -1.0)


def entr(x: Any) -> Any:
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    (x,) = promote(x, to_inexact=True)
    negative = x < 0
    xs = fnp.where(negative, _c(1, x), x)  # keeps the unused branch (and its derivative) finite
    return fnp.where(negative, _c(-np.inf, x), ew.neg(sp.xlogx_p.bind(xs)))  # entr'(0) = -(log 0 + 1) = inf




def rel_entr(p: Any, q: Any) -> Any:
    """p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf otherwise."""
    p, q = promote(p, q, to_inexact=True)
    both_positive = fnp.logical_and(p > 0, q > 0)
    p_zero = fnp.logical_and(fnp.equal(p, _c(0, p)), q >= 0)
    safe_p = fnp.where(both_positive, p, _c(1, p))
    safe_q = fnp.where(both_positive, q, _c(1, q))
    val = ew.sub(sp.xlogx_p.bind(safe_p), xlogy(safe_p, safe_q))
    return fnp.where(both_positive, val, fnp.where(p_zero, _c(0, p), _c(np.inf, p)))


def kl_div(p: Any, q: Any) -> Any:
    """rel_entr(p, q) - p + q, the elementwise term of the Kullback-Leibler divergence."""
    p, q = promote(p, q, to_inexact=True)
    return ew.add(ew.sub(rel_entr(p, q), p), q)


def gammasgn(x: Any) -> Any:
    """The sign of Gamma(x): nan at the poles (and for nan), -1 between odd and even negative
    integers and at -0, +1 elsewhere."""
    (x,) = promote(x, to_inexact=True)
    floor_x = ew.floor(x)
    negative = x < 0
    pole = fnp.logical_or(fnp.logical_and(negative, fnp.equal(x, floor_x)), fnp.isnan(x))
    odd = fnp.not_equal(fnp.mod(floor_x, _c(2, x)), _c(0, x))
    minus = fnp.logical_or(fnp.logical_and(negative, odd), fnp.logical_and(fnp.equal(x, _c(0, x)), fnp.signbit(x)))
    return fnp.select([pole, minus], [_c(np.nan, x), _c(-1, x)], _c(1, x))


def loggamma(x: Any) -> Any:
    """The principal branch of log Gamma for real x: gammaln(x) for x > 0, nan otherwise."""
    (x,) = promote(x, to_inexact=True)
    return fnp.where(x > 0, sp.lgamma_p.bind(x), _c(np.nan, x))


def factorial(n: Any, exact: bool = False) -> Any:
    """Gamma(n + 1) in floating point, 0 for n < 0 (``exact=True`` is not supported, as in JAX)."""
    if exact:
        raise NotImplementedError("factorial with exact=True (Python integers) is not supported in traced code")
    (n,) = promote(n, to_inexact=True)
    return fnp.where(n < 0, _c(0, n), ew.exp(sp.lgamma_p.bind(ew.add(n, _c(1, n)))))


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:  # noqa: N803 - SciPy's name
    """The binomial coefficient N choose k as exp(gammaln), 0 outside 0 <= k <= N; with
    ``repetition``, (N + k - 1) choose k."""
    N, k = promote(N, k, to_inexact=True)  # noqa: N806
    if repetition:
        result = comb(ew.sub(ew.add(N, k), _c(1, N)), k)
        return fnp.where(fnp.logical_and(fnp.equal(k, _c(0, k)), N >= 0), _c(1, N), result)
    ok = fnp.logical_and(fnp.logical_and(k <= N, N >= 0), k >= 0)
    safe_n = fnp.where(ok, N, _c(0, N))
    safe_k = fnp.where(ok, k, _c(0, k))
    one = _c(1, N)
    log_val = ew.sub(ew.sub(sp.lgamma_p.bind(ew.add(safe_n, one)), sp.lgamma_p.bind(ew.add(safe_k, one))),
                     sp.lgamma_p.bind(ew.sub(ew.add(safe_n, one), safe_k)))
    return fnp.where(ok, ew.exp(log_val), _c(0, N))


@custom_jvp
def _poch(z: Any, m: Any) -> Any:
    ratio = ew.div(sp.gamma_p.bind(ew.add(z, m)), sp.gamma_p.bind(z))
    return fnp.where(fnp.equal(m, _c(0, m)), _c(1, z), ratio)


_poch.defjvps(  # d/dz = (psi(z + m) - psi(z)) poch, d/dm = psi(z + m) poch, also at m == 0
    lambda t, out, z, m: ew.mul(ew.mul(ew.sub(sp.digamma_p.bind(ew.add(z, m)), sp.digamma_p.bind(z)), out), t),
    lambda t, out, z, m: ew.mul(ew.mul(sp.digamma_p.bind(ew.add(z, m)), out), t),
)


def poch(z: Any, m: Any) -> Any:
    """The rising factorial Gamma(z + m) / Gamma(z), 1 where m == 0."""
    z, m = promote(z, m, to_inexact=True)
    return _poch(z, m)


def _boxcox_of(log_x: Any, lmbda: Any) -> Any:
    zero = fnp.equal(lmbda, _c(0, lmbda))
    safe = fnp.where(zero, _c(1, lmbda), lmbda)
    return fnp.where(zero, log_x, ew.div(fnp.expm1(ew.mul(safe, log_x)), safe))


def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform (x^lmbda - 1) / lmbda, log x at lmbda == 0."""
    x, lmbda = promote(x, lmbda, to_inexact=True)
    return _boxcox_of(ew.log(x), lmbda)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """boxcox(1 + x, lmbda), accurate for small x."""
    x, lmbda = promote(x, lmbda, to_inexact=True)
    return _boxcox_of(ew.log1p_p.bind(x), lmbda)


def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function sum_k (q + k)^-x; differentiable in q. As in JAX, ``q`` is
    required (the Riemann zeta function is not implemented)."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute the "
                                  "Hurwitz Zeta function.")
    x, q = promote(x, q, to_inexact=True)
    return sp.zeta_p.bind(x, q)


def bernoulli(n: int) -> Any:
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2) in the default float dtype; ``n`` concrete."""
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"bernoulli: n must be a concrete non-negative integer, got {n!r}") from err
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    values = [float(v) for v in _bernoulli_fractions(n)]
    return fnp.asarray(np.asarray(values), dtype=fnp.zeros(0).dtype)


def _bernoulli_fractions(n: int) -> list[Fraction]:
    """B_0 .. B_n exactly, by the recurrence sum_{j<=m} C(m + 1, j) B_j = 0."""
    b: list[Fraction] = []
    for m in range(n + 1):
        b.append(Fraction(1) if m == 0 else -sum(math.comb(m + 1, j) * b[j] for j in range(m)) / (m + 1))
    return b
