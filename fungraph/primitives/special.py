"""Special-function primitives behind ``fungraph.scipy.special`` and ``fungraph.lax``: gamma
family, error-function inverses, modified Bessel functions, Hurwitz zeta and the regularised
incomplete gamma (with ``igamma_grad_a``, its derivative in ``a``) and beta functions.

Implementations are numpy only (``math.lgamma``/``math.erfc`` per element, recurrences plus
asymptotic series, continued fractions), computed in float64 and cast back to the operand dtype.
Each derivative is one line of maths beside its primitive. The incomplete gamma functions are
differentiable in ``a`` (by ``igamma_grad_a``) and ``x``, as JAX's ``lax.igamma``; derivatives
with respect to the incomplete beta function's ``a``, ``b``, ``igamma_grad_a``'s ``a`` and the
order of ``polygamma`` are not implemented, as in JAX: differentiating through them raises
``NotImplementedError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from fungraph.core import Primitive
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import elementwise_batch
from fungraph.primitives._rules import (
    aval,
    broadcast_shapes,
    lit,
    require_float,
    require_same_dtype,
)
from fungraph.primitives.elementwise import (
    _unary,
    add,
    div,
    eq,
    exp,
    log,
    log1p_p,
    mul,
    neg,
    require_inexact,
    select,
    sign,
    sub,
)
from fungraph.primitives.shape import broadcast_to

_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)
_TINY = 1e-300
_EPS = 1e-16
_CF_EPS = 3e-16  # a continued fraction has converged when its factor is within an ulp of 1


# --- numpy kernels (float64 in, float64 out) ---------------------------------------------------


def _per_element(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    uf = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(uf(x), dtype=np.float64)


def _lgamma_scalar(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # poles and overflow: +inf, as scipy.special.gammaln
        return math.inf


def _gamma_scalar(v: float) -> float:
    try:
        return math.gamma(v)
    except ValueError:  # 0 gives a signed infinity, negative integers nan (scipy's convention)
        return math.copysign(math.inf, v) if v == 0 else math.nan
    except OverflowError:
        return math.inf


_lgamma64 = _per_element(_lgamma_scalar)
_gamma64 = _per_element(_gamma_scalar)
_erfc64 = _per_element(math.erfc)
_erf64 = _per_element(math.erf)

# B_2, B_4, ..., B_20: Bernoulli numbers for the asymptotic series of digamma and Hurwitz zeta.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
              -174611 / 330)


def _digamma64(x: np.ndarray) -> np.ndarray:
    """psi(x): reflection below 1/2, recurrence up to 10, then ln z - 1/2z - sum B_2k / (2k z^2k)."""
    pole = (x <= 0) & (x == np.floor(x))
    reflect = x < 0.5
    z = np.where(reflect, 1.0 - x, x)
    acc = np.zeros_like(z)
    for _ in range(10):  # psi(z) = psi(z + 1) - 1/z
        small = z < 10.0
        acc -= np.where(small, 1.0 / np.where(small, z, 1.0), 0.0)
        z = np.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = np.zeros_like(z)
    for k in range(len(_BERNOULLI) - 3, 0, -1):
        series = (series + _BERNOULLI[k - 1] / (2 * k)) * inv2
    out = acc + np.log(z) - 0.5 / z - series
    r = x - np.round(x)  # exact, so tan(pi x) = tan(pi r) keeps its precision for large |x|
    out = np.where(reflect, out - math.pi / np.tan(math.pi * np.where(pole, 0.5, r)), out)
    at_zero = np.where(np.signbit(x), np.inf, -np.inf)
    return np.where(pole, np.where(x == 0, at_zero, np.nan), out)


def _hurwitz_zeta64(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """zeta(s, q) = sum_k (q + k)^-s for integer s >= 2: direct terms up to q >= 20 + s, then
    Euler-Maclaurin (integral, half term, Bernoulli corrections)."""
    target = 20.0 + s
    acc = np.zeros_like(q)
    while True:
        low = q < target
        if not low.any():
            break
        acc += np.where(low, np.power(np.where(low, q, 1.0), -s), 0.0)
        q = np.where(low, q + 1.0, q)
    tail = np.power(q, 1.0 - s) / (s - 1.0) + 0.5 * np.power(q, -s)
    poch = s.copy()                   # (s)_{2j-1}
    qpow = np.power(q, -s - 1.0)      # q^{-(s + 2j - 1)}
    fact = 2.0                        # (2j)!
    for j, b in enumerate(_BERNOULLI, start=1):
        tail += b / fact * poch * qpow
        poch = poch * (s + 2 * j - 1) * (s + 2 * j)
        qpow = qpow / (q * q)
        fact *= (2 * j + 1) * (2 * j + 2)
    return acc + tail


def _polygamma64(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x); psi^(0) = digamma."""
    valid = (n >= 0) & (n == np.floor(n))
    order = np.where(valid & (n >= 1), n, 1.0)
    pole = (x <= 0) & (x == np.floor(x))
    finite_x = np.where(pole | ~np.isfinite(x), 0.5, x)
    sign_n = np.where(order % 2 == 1, 1.0, -1.0)
    val = sign_n * np.exp(_lgamma64(order + 1.0)) * _hurwitz_zeta64(order + 1.0, finite_x)
    val = np.where(pole, sign_n * np.inf, val)
    val = np.where(x == np.inf, 0.0, np.where(np.isnan(x) | (x == -np.inf), np.nan, val))
    out = np.where(n == 0, _digamma64(x), val)
    return np.where(valid, out, np.nan)


# Acklam's rational approximations of the normal quantile (relative error ~1e-9), then Halley steps.
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
      4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)


def _horner(coeffs: Sequence[float], x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for c in coeffs:
        out = out * x + c
    return out


def _ndtri_lower64(p: np.ndarray) -> np.ndarray:
    """Phi^-1(p) for 0 < p <= 1/2: Acklam's guess refined by Halley steps on Phi(x) = erfc(-x/sqrt2)/2."""
    p = np.clip(p, 5e-324, 0.5)
    q = np.sqrt(-2.0 * np.log(p))
    tail = _horner(_C, q) / (_horner(_D, q) * q + 1.0)
    r0 = p - 0.5
    r = r0 * r0
    central = _horner(_A, r) * r0 / (_horner(_B, r) * r + 1.0)
    x = np.where(p < 0.02425, tail, central)
    for _ in range(2):
        density = np.exp(-0.5 * x * x) / _SQRT2PI
        err = 0.5 * _erfc64(-x / _SQRT2) - p
        u = np.where(density > 0, err / np.where(density > 0, density, 1.0), 0.0)
        x = x - u / (1.0 + 0.5 * x * u)
    return x


def _erfinv_small64(y: np.ndarray) -> np.ndarray:
    """erf^-1(y) for 0 <= y <= 1/2: Halley on erf(x) = y from the Taylor guess sqrt(pi)/2 y."""
    x = 0.5 * math.sqrt(math.pi) * y
    for _ in range(4):
        ratio = (_erf64(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
        x = x - ratio / (1.0 + x * ratio)
    return x


def _erfinv64(y: np.ndarray) -> np.ndarray:
    a = np.abs(y)
    small = _erfinv_small64(np.minimum(a, 0.5))
    large = -_ndtri_lower64(np.where(a > 0.5, 0.5 * (1.0 - a), 0.25)) / _SQRT2  # 1 - a is exact here
    out = np.sign(y) * np.where(a <= 0.5, small, large)
    out = np.where(a == 1, np.sign(y) * np.inf, out)
    return np.where(a > 1, np.nan, out)


def _ndtri64(p: np.ndarray) -> np.ndarray:
    mid = (p >= 0.25) & (p <= 0.75)
    central = _SQRT2 * _erfinv64(np.where(mid, 2.0 * p - 1.0, 0.0))  # 2p - 1 is exact here
    lower = np.minimum(p, 1.0 - p)  # 1 - p is exact for p >= 1/2
    tails = np.where(p < 0.5, 1.0, -1.0) * _ndtri_lower64(np.where(mid, 0.25, lower))
    out = np.where(mid, central, tails)
    out = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, out))
    return np.where((p < 0) | (p > 1), np.nan, out)


def _log_ndtr64(x: np.ndarray) -> np.ndarray:
    """log Phi(x): log of erfc for moderate x, log1p on the right, the asymptotic series below -30."""
    mid = np.log(0.5 * _erfc64(-np.clip(x, -30.0, 0.0) / _SQRT2))
    right = np.log1p(-0.5 * _erfc64(np.maximum(x, 0.0) / _SQRT2))
    z = np.minimum(x, -30.0)
    inv2 = 1.0 / (z * z)
    series = np.zeros_like(z)
    term = np.ones_like(z)
    for k in range(1, 12):  # 1 - 1/z^2 + 3/z^4 - 15/z^6 ...
        term = -term * (2 * k - 1) * inv2
        series += term
    far = -0.5 * z * z - np.log(-z) - 0.5 * math.log(2 * math.pi) + np.log1p(series)
    return np.where(x < -30.0, far, np.where(x <= 0, mid, right))


_BESSEL_SWITCH = 30.0


def _bessel_ie64(nu: int, x: np.ndarray) -> np.ndarray:
    """exp(-|x|) I_nu(|x|), nu in {0, 1}: power series up to 30, Hankel's asymptotic series above."""
    a = np.abs(x)
    s = np.minimum(a, _BESSEL_SWITCH)
    quarter = 0.25 * s * s
    term = np.power(0.5 * s, nu)
    total = term.copy()
    for k in range(1, 60):  # (s/2)^(2k + nu) / (k! (k + nu)!)
        term = term * quarter / (k * (k + nu))
        total += term
    series = total * np.exp(-s)
    big = np.maximum(a, _BESSEL_SWITCH)
    mu = 4.0 * nu * nu
    term = np.ones_like(big)
    acc = np.ones_like(big)
    for k in range(1, 40):  # prod (mu - (2j - 1)^2) / (k! (8x)^k), alternating
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
        acc += term
    asym = acc / np.sqrt(2.0 * math.pi * big)
    return np.where(a <= _BESSEL_SWITCH, series, asym)


def _i0e64(x: np.ndarray) -> np.ndarray:
    return _bessel_ie64(0, x)


def _i1e64(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * _bessel_ie64(1, x)


def _i0_64(x: np.ndarray) -> np.ndarray:
    return _bessel_ie64(0, x) * np.exp(np.abs(x))


def _i1_64(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * _bessel_ie64(1, x) * np.exp(np.abs(x))


_FPMIN = 1e-300
_MAXIT = 10000


def _igamma64(a: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(a, x), Q(a, x)): the series for x < a + 1, Lentz's continued fraction for Q otherwise."""
    bad = (a < 0) | (x < 0) | np.isnan(a) | np.isnan(x)
    edge = (a == 0) | (x == 0) | np.isinf(x) | np.isinf(a)
    aa = np.where(bad | edge, 1.0, a)
    xx = np.where(bad | edge, 0.5, x)
    prefactor = np.exp(-xx + aa * np.log(xx) - _lgamma64(aa))
    use_series = xx < aa + 1.0
    # series: P = prefactor / a * sum x^n / ((a + 1) ... (a + n))
    term = np.where(use_series, 1.0 / aa, 0.0)
    total = term.copy()
    denom = aa.copy()
    for _ in range(_MAXIT):
        denom = denom + 1.0
        term = term * xx / denom
        total += term
        if np.all(np.abs(term) <= np.abs(total) * _EPS):
            break
    p_series = prefactor * total
    # continued fraction for Q (modified Lentz)
    b = np.where(use_series, 1.0, xx + 1.0 - aa)
    c = np.full_like(b, 1.0 / _FPMIN)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, _MAXIT):
        an = -i * (i - aa)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < _FPMIN, _FPMIN, d)
        c = b + an / c
        c = np.where(np.abs(c) < _FPMIN, _FPMIN, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0)[~use_series] <= _CF_EPS):
            break
    q_frac = prefactor * h
    p = np.where(use_series, p_series, 1.0 - q_frac)
    q = np.where(use_series, 1.0 - p_series, q_frac)
    # edges: P(0, x > 0) = 1, P(a, 0) = 0, P(a, inf) = 1
    p_edge = np.where(x == 0, 0.0, np.where((a == 0) | np.isinf(x), 1.0, np.where(np.isinf(a), 0.0, np.nan)))
    p = np.where(edge, p_edge, p)
    q = np.where(edge, 1.0 - p_edge, q)
    both_zero = (a == 0) & (x == 0)
    p = np.where(bad | both_zero, np.nan, p)
    q = np.where(bad | both_zero, np.nan, q)
    return p, q


def _betacf64(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of I_x(a, b) (modified Lentz), for x < (a + 1) / (a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < _FPMIN, _FPMIN, d)
    h = d.copy()
    for m in range(1, _MAXIT):
        m2 = 2 * m
        num = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + num * d
        d = 1.0 / np.where(np.abs(d) < _FPMIN, _FPMIN, d)
        c = 1.0 + num / c
        c = np.where(np.abs(c) < _FPMIN, _FPMIN, c)
        h = h * d * c
        num = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + num * d
        d = 1.0 / np.where(np.abs(d) < _FPMIN, _FPMIN, d)
        c = 1.0 + num / c
        c = np.where(np.abs(c) < _FPMIN, _FPMIN, c)
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) <= _CF_EPS):
            break
    return h


def _betainc64(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """I_x(a, b) with the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) past the mean."""
    bad = (a <= 0) | (b <= 0) | (x < 0) | (x > 1) | np.isnan(a) | np.isnan(b) | np.isnan(x)
    edge = (x == 0) | (x == 1)
    aa = np.where(bad, 1.0, a)
    bb = np.where(bad, 1.0, b)
    xx = np.where(bad | edge, 0.5, x)
    log_front = (_lgamma64(aa + bb) - _lgamma64(aa) - _lgamma64(bb) + aa * np.log(xx) + bb * np.log1p(-xx))
    front = np.exp(log_front)
    flip = xx >= (aa + 1.0) / (aa + bb + 2.0)
    lo = np.where(flip, bb, aa)
    hi = np.where(flip, aa, bb)
    frac = _betacf64(lo, hi, np.where(flip, 1.0 - xx, xx))
    direct = front * frac / lo
    out = np.where(flip, 1.0 - direct, direct)
    out = np.where(edge, x, out)
    return np.where(bad, np.nan, out)


def _stdtr64(df: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Student's t cdf: half the two-sided tail from I_{x}(df/2, 1/2), without cancellation."""
    t2 = t * t
    near = t2 < df
    z = np.where(near, t2 / (df + t2), df / (df + t2))
    half_df = 0.5 * df
    i_near = _betainc64(np.full_like(z, 0.5), half_df, np.where(near, z, 0.5))
    i_far = _betainc64(half_df, np.full_like(z, 0.5), np.where(near, 0.5, z))
    tail = np.where(near, 0.5 - 0.5 * i_near, 0.5 * i_far)
    tail = np.where(np.isinf(t), 0.0, tail)
    out = np.where(t < 0, tail, 1.0 - tail)
    return np.where((df <= 0) | np.isnan(df) | np.isnan(t), np.nan, out)


# --- primitives --------------------------------------------------------------------------------


def _impl(kernel: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """Run a float64 kernel on broadcast operands and cast back to the operands' dtype."""

    def impl(*xs: np.ndarray) -> np.ndarray:
        dtype = np.asarray(xs[0]).dtype
        args = [np.array(b, dtype=np.float64) for b in np.broadcast_arrays(*xs)]
        with np.errstate(all="ignore"):
            out = kernel(*args)
        return np.asarray(out, dtype=np.float64).astype(dtype)

    return impl


def _c(value: float, x: Any) -> np.ndarray:
    return lit(value, aval(x).dtype)


def _xlogy(x: Any, y: Any) -> Any:
    """x log y with 0 where x == 0 (and a zero derivative through the masked log)."""
    zero = eq(x, _c(0, x))
    safe_y = select(zero, _c(1, y), y)
    return select(zero, _c(0, x), mul(x, log(safe_y)))


def _safe_div(num: Any, den: Any, at_zero: float) -> Any:
    """num / den, with ``at_zero`` where den == 0 (and no NaN in either derivative)."""
    zero = eq(den, _c(0, den))
    return select(zero, _c(at_zero, num), div(num, select(zero, _c(1, den), den)))


def _nary_aval(name: str, *avals: ShapedArray) -> ShapedArray:
    dtype = require_same_dtype(name, *avals)
    require_float(name, avals[0])
    return ShapedArray(broadcast_shapes(name, *avals), dtype)


Partial = Callable[..., Any]


def _nary_jvp(prim: Primitive, partials: Sequence[Partial | None], argnames: Sequence[str],
              primals: tuple, tangents: tuple) -> tuple:
    out = prim.bind(*primals)
    t_out = None
    for t, d, argname in zip(tangents, partials, argnames):
        if t is None:
            continue
        if d is None:
            raise NotImplementedError(
                f"{prim.name}: the derivative with respect to `{argname}` is not implemented (as in "
                f"jax.scipy.special); differentiate with respect to the other operand only, or hold "
                f"`{argname}` constant with stop_gradient")
        term = mul(t, d(*primals, out))
        t_out = term if t_out is None else add(t_out, term)
    if t_out is not None and aval(t_out).shape != aval(out).shape:
        t_out = broadcast_to(t_out, aval(out).shape)
    return out, t_out


def _nary(name: str, kernel: Callable[..., Any], partials: Sequence[Partial | None],
          argnames: Sequence[str]) -> Primitive:
    p = Primitive(name, impl=_impl(kernel), abstract_eval=partial(_nary_aval, name), arity=len(partials),
                  elementwise=True)
    p.jvp = partial(_nary_jvp, p, tuple(partials), tuple(argnames))
    p.batch = elementwise_batch(p)
    return p


def _float_unary(name: str, kernel: Callable[..., Any], deriv: Callable[[Any, Any], Any]) -> Primitive:
    return _unary(name, _impl(kernel), deriv, kind="float")


def _polygamma(n: int, x: Any) -> Any:
    return polygamma_p.bind(_c(n, x), x)


lgamma_p = _float_unary("lgamma", _lgamma64, lambda x, y: digamma_p.bind(x))          # lgamma' = psi
gamma_p = _float_unary("gamma", _gamma64, lambda x, y: mul(y, digamma_p.bind(x)))      # Gamma' = Gamma psi
digamma_p = _float_unary("digamma", _digamma64, lambda x, y: _polygamma(1, x))        # psi' = psi^(1)
polygamma_p = _nary("polygamma", _polygamma64,                                         # psi^(n)' = psi^(n+1)
                    (None, lambda n, x, y: polygamma_p.bind(add(n, _c(1, n)), x)), ("n", "x"))
erfc_p = _float_unary("erfc", _erfc64,                                                 # -2/sqrt(pi) e^{-x^2}
                      lambda x, y: mul(_c(-2 / math.sqrt(math.pi), x), exp(neg(mul(x, x)))))
erf_inv_p = _float_unary("erf_inv", _erfinv64,                                         # sqrt(pi)/2 e^{y^2}
                         lambda x, y: mul(_c(math.sqrt(math.pi) / 2, y), exp(mul(y, y))))
ndtri_p = _float_unary("ndtri", _ndtri64,                                              # sqrt(2 pi) e^{y^2/2}
                       lambda x, y: mul(_c(_SQRT2PI, y), exp(mul(_c(0.5, y), mul(y, y)))))
log_ndtr_p = _float_unary("log_ndtr", _log_ndtr64,                                     # phi(x) / Phi(x)
                          lambda x, y: div(exp(sub(mul(_c(-0.5, x), mul(x, x)), y)), _c(_SQRT2PI, x)))
bessel_i0_p = _float_unary("bessel_i0", _i0_64, lambda x, y: bessel_i1_p.bind(x))     # I0' = I1
bessel_i1_p = _float_unary("bessel_i1", _i1_64,                                        # I1' = I0 - I1/x
                           lambda x, y: sub(bessel_i0_p.bind(x), _over_x(y, x, "i1_over_x")))
bessel_i0e_p = _float_unary("bessel_i0e", _i0e64,                                      # I1e - sign(x) I0e
                            lambda x, y: sub(bessel_i1e_p.bind(x), mul(sign(x), y)))
bessel_i1e_p = _float_unary("bessel_i1e", _i1e64,                                      # I0e - I1e (sign + 1/x)
                            lambda x, y: sub(sub(bessel_i0e_p.bind(x), mul(sign(x), y)), _safe_div(y, x, 0.5)))


def _xlogx64(x: np.ndarray) -> np.ndarray:
    return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, x)))


xlogx_p = _float_unary("xlogx", _xlogx64, lambda x, y: add(log(x), _c(1, x)))            # (x log x)' = log x + 1


# --- a removable singularity's value with all its derivatives (JAX's sinc) ---------------------

#: The k-th derivative at 0 of each function whose removable singularity at 0 a ``select``
#: patches: sin(y) / y, and I1(x) / x = sum_m x^(2m) / (2^(2m+1) m! (m+1)!).
MACLAURIN = {
    "sinc": lambda k: 0.0 if k % 2 else (-1) ** (k // 2) / (k + 1),
    "i1_over_x": lambda k: 0.0 if k % 2 else math.factorial(k) / (2 ** (k + 1) * math.factorial(k // 2)
                                                                   * math.factorial(k // 2 + 1)),
}


def maclaurin_coefficient(series: str, k: int) -> float:
    return float(MACLAURIN[series](k))


def _maclaurin_aval(y: ShapedArray, *, series: str, k: int) -> ShapedArray:
    require_inexact("maclaurin", y)
    if series not in MACLAURIN:
        raise ValueError(f"maclaurin: unknown series {series!r}; known: {sorted(MACLAURIN)}")
    return y


#: ``maclaurin(y, series, k)`` is the k-th derivative of ``series`` at 0, whatever ``y``, and its
#: own derivative is the next one: under ``select(y == 0, maclaurin(y, "sinc", 0), sin(y) / y)``
#: every derivative at 0 is exact (a constant 1 there made sinc''(0) zero, not -pi^2/3).
maclaurin_p = Primitive("maclaurin", abstract_eval=_maclaurin_aval, arity=1, elementwise=True,
                        impl=lambda y, *, series, k: np.full_like(y, maclaurin_coefficient(series, k)))
maclaurin_p.jvp = lambda primals, tangents, *, series, k: (
    maclaurin_p.bind(primals[0], series=series, k=k),
    mul(tangents[0], maclaurin_p.bind(primals[0], series=series, k=k + 1)))
maclaurin_p.batch = elementwise_batch(maclaurin_p)


def _over_x(y: Any, x: Any, series: str) -> Any:
    """y / x where y(0) = 0, its value and every derivative at x = 0 from ``series``."""
    zero = eq(x, _c(0, x))
    return select(zero, maclaurin_p.bind(x, series=series, k=0), div(y, select(zero, _c(1, x), x)))


def _igamma_dx(a: Any, x: Any, out: Any) -> Any:
    """dP(a, x)/dx = x^(a-1) e^-x / Gamma(a)."""
    return exp(sub(sub(_xlogy(sub(a, _c(1, a)), x), x), lgamma_p.bind(a)))


igamma_p = _nary("igamma", lambda a, x: _igamma64(a, x)[0],                            # dP/da, dP/dx
                 (lambda a, x, out: igamma_grad_a_p.bind(a, x), _igamma_dx), ("a", "x"))
igammac_p = _nary("igammac", lambda a, x: _igamma64(a, x)[1],                          # Q = 1 - P
                  (lambda a, x, out: neg(igamma_grad_a_p.bind(a, x)), lambda a, x, out: neg(_igamma_dx(a, x, out))),
                  ("a", "x"))


def _betainc_dx(a: Any, b: Any, x: Any, out: Any) -> Any:
    """dI_x(a, b)/dx = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    one = _c(1, a)
    log_beta = sub(add(lgamma_p.bind(a), lgamma_p.bind(b)), lgamma_p.bind(add(a, b)))
    log_1mx = log1p_p.bind(neg(x))
    zero_b = eq(sub(b, one), _c(0, b))
    b_term = select(zero_b, _c(0, b), mul(sub(b, one), log_1mx))
    return exp(sub(add(_xlogy(sub(a, one), x), b_term), log_beta))


betainc_p = _nary("betainc", _betainc64, (None, None, _betainc_dx), ("a", "b", "x"))


def _stdtr_dt(df: Any, t: Any, out: Any) -> Any:
    """The t density: Gamma((df+1)/2) / (sqrt(df pi) Gamma(df/2)) (1 + t^2/df)^(-(df+1)/2)."""
    half = _c(0.5, df)
    half_df1 = mul(half, add(df, _c(1, df)))
    log_norm = sub(sub(lgamma_p.bind(half_df1), lgamma_p.bind(mul(half, df))),
                   mul(half, log(mul(df, _c(math.pi, df)))))
    return exp(sub(log_norm, mul(half_df1, log1p_p.bind(div(mul(t, t), df)))))


stdtr_p = _nary("stdtr", _stdtr64, (None, _stdtr_dt), ("df", "t"))


# --- Hurwitz zeta and dP(a, x)/da -----------------------------------------------------------------


def _zeta64(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta(x, q) = sum_k (q + k)^-x, with JAX's values off its domain: nan for x < 1
    or a non-finite operand, nan for q < 0 unless x is an integer, and at the poles
    q = 0, -1, ... inf for an even x and nan otherwise."""
    int_x = x == np.floor(x)
    pole = (q <= 0) & (q == np.floor(q))
    bad = (x < 1) | ~np.isfinite(x) | ~np.isfinite(q) | ((q < 0) & ~int_x)
    ok = ~(bad | pole | (x == 1))
    val = _hurwitz_zeta64(np.where(ok, x, 2.0), np.where(ok, q, 1.0))
    at_pole = np.where(int_x & (np.mod(x, 2) == 0), np.inf, np.nan)
    out = np.where(x == 1, np.inf, np.where(pole, at_pole, val))
    return np.where(bad, np.nan, out)


zeta_p = _nary("zeta", _zeta64,                                           # d/dq zeta(x, q) = -x zeta(x + 1, q)
               (None, lambda x, q, y: neg(mul(x, zeta_p.bind(add(x, np.asarray(1, aval(x).dtype)), q)))),
               ("x", "q"))


def _igamma_grad_a64(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dP(a, x)/da: the series (x < a + 1) or Lentz's continued fraction for Q, each carried in
    forward mode (every recurrence variable beside its derivative in ``a``). nan for a <= 0
    or a non-finite operand, 0 at x = 0, as JAX gives."""
    bad = (a <= 0) | (x < 0) | ~np.isfinite(a) | ~np.isfinite(x)
    zero = (x == 0) & ~bad
    aa = np.where(bad | zero, 1.0, a)
    xx = np.where(bad | zero, 0.5, x)
    pref = np.exp(-xx + aa * np.log(xx) - _lgamma64(aa))
    dlog_pref = np.log(xx) - _digamma64(aa)
    series = xx < aa + 1.0
    # P = pref * sum t_n with t_0 = 1/a, t_n = t_{n-1} x / (a + n)
    t = np.where(series, 1.0 / aa, 0.0)
    dt = np.where(series, -1.0 / (aa * aa), 0.0)
    s, ds, denom = t.copy(), dt.copy(), aa.copy()
    for _ in range(_MAXIT):
        denom = denom + 1.0
        dt = (dt - t / denom) * xx / denom
        t = t * xx / denom
        s += t
        ds += dt
        if np.all((np.abs(t) <= np.abs(s) * _EPS) & (np.abs(dt) <= np.abs(ds) * _EPS)):
            break
    dp_series = pref * (dlog_pref * s + ds)
    # Q = pref * h, h the continued fraction with a_i = -i (i - a), b_i = x + 1 - a + 2 i
    b = np.where(series, 1.0, xx + 1.0 - aa)
    c = np.full_like(b, 1.0 / _FPMIN)
    dc = np.zeros_like(b)
    d = 1.0 / b
    dd = d * d
    h, dh = d.copy(), dd.copy()
    for i in range(1, _MAXIT):
        an = -i * (i - aa)
        b = b + 2.0
        den = an * d + b
        dden = i * d + an * dd - 1.0
        tiny = np.abs(den) < _FPMIN
        den, dden = np.where(tiny, _FPMIN, den), np.where(tiny, 0.0, dden)
        cn = b + an / c
        dcn = -1.0 + i / c - an * dc / c / c
        tiny = np.abs(cn) < _FPMIN
        c, dc = np.where(tiny, _FPMIN, cn), np.where(tiny, 0.0, dcn)
        d = 1.0 / den
        dd = -dden * d * d
        delta = d * c
        ddelta = dd * c + d * dc
        dh = dh * delta + h * ddelta
        h = h * delta
        done = (np.abs(delta - 1.0) <= _CF_EPS) & (np.abs(h * ddelta) <= _CF_EPS * np.abs(dh))
        if np.all(done[~series]):
            break
    dp_cf = -pref * (dlog_pref * h + dh)
    out = np.where(series, dp_series, dp_cf)
    return np.where(bad, np.nan, np.where(zero, 0.0, out))


def _igamma_grad_a_dx(a: Any, x: Any, y: Any) -> Any:
    """d/dx dP/da = d/da dP/dx = dP/dx (log x - psi(a))."""
    return mul(_igamma_dx(a, x, None), sub(log(x), digamma_p.bind(a)))


igamma_grad_a_p = _nary("igamma_grad_a", _igamma_grad_a64, (None, _igamma_grad_a_dx), ("a", "x"))
