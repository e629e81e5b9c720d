"""``jax.lax``'s special functions, each the primitive ``fungraph.scipy.special`` binds (so the same
derivative rules): the logistic and error functions, log-gamma and digamma, Hurwitz zeta,
polygamma, the incomplete gamma functions (differentiable in ``a`` by ``igamma_grad_a``), the
incomplete beta function, the exponentially scaled Bessel functions, and the derivative of
gamma samples (``random_gamma_grad``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.ir import aval_of
from fungraph.lax._elementwise import _floats, _inexact, _unary
from fungraph.primitives import elementwise as ew
from fungraph.primitives import special as sp

logistic = _unary("logistic", _inexact(ew.logistic_p), accepts="fc")
erf = _unary("erf", _inexact(ew.erf_p), accepts="f")
erfc = _unary("erfc", _inexact(sp.erfc_p), accepts="f")
erf_inv = _unary("erf_inv", _inexact(sp.erf_inv_p), accepts="f")
lgamma = _unary("lgamma", _inexact(sp.lgamma_p), accepts="f")
digamma = _unary("digamma", _inexact(sp.digamma_p), accepts="f")


def zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta function sum_k (q + k)^-x; differentiable in ``q``."""
    return sp.zeta_p.bind(*_floats("zeta", x, q))


def polygamma(m: Any, x: Any) -> Any:
    """The m-th derivative of digamma; differentiable in ``x``."""
    return sp.polygamma_p.bind(*_floats("polygamma", m, x))


def igamma_grad_a(a: Any, x: Any) -> Any:
    """dP(a, x)/da, P the regularised lower incomplete gamma function."""
    return sp.igamma_grad_a_p.bind(*_floats("igamma_grad_a", a, x))


def igamma(a: Any, x: Any) -> Any:
    """The regularised lower incomplete gamma function P(a, x), differentiable in both."""
    return sp.igamma_p.bind(*_floats("igamma", a, x))


def igammac(a: Any, x: Any) -> Any:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), differentiable in both."""
    return sp.igammac_p.bind(*_floats("igammac", a, x))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularised incomplete beta function I_x(a, b); differentiable in ``x``."""
    return sp.betainc_p.bind(*_floats("betainc", a, b, x))


def bessel_i0e(x: Any) -> Any:
    """exp(-|x|) I0(x)."""
    return sp.bessel_i0e_p.bind(*_floats("bessel_i0e", x))


def bessel_i1e(x: Any) -> Any:
    """exp(-|x|) I1(x)."""
    return sp.bessel_i1e_p.bind(*_floats("bessel_i1e", x))


def random_gamma_grad(a: Any, x: Any) -> Any:
    """d x / d a for a sample ``x`` of Gamma(a, 1) held at its quantile (implicit
    reparameterisation): ``-(dP/da) / (dP/dx)`` with ``dP/dx = x^(a-1) e^-x / Gamma(a)``; 0 at
    ``x = 0``, nan outside ``a > 0, x >= 0``."""
    a, x = _floats("random_gamma_grad", a, x)
    dt = aval_of(a).dtype
    zero, nan = np.asarray(0, dt), np.asarray(np.nan, dt)
    x_is_zero = ew.eq(x, zero)
    safe_x = ew.select(ew.le_p.bind(x, zero), np.asarray(1, dt), x)
    safe_a = ew.select(ew.le_p.bind(a, zero), np.asarray(1, dt), a)
    log_density = ew.sub(ew.sub(ew.mul(ew.sub(safe_a, np.asarray(1, dt)), ew.log(safe_x)), safe_x),
                         sp.lgamma_p.bind(safe_a))
    out = ew.neg(ew.div(sp.igamma_grad_a_p.bind(safe_a, safe_x), ew.exp(log_density)))
    out = ew.select(x_is_zero, zero, out)
    bad = ew.or_p.bind(ew.lt(x, zero), ew.le_p.bind(a, zero))
    bad = ew.or_p.bind(bad, ew.or_p.bind(ew.ne_p.bind(a, a), ew.ne_p.bind(x, x)))
    return ew.select(bad, nan, out)
