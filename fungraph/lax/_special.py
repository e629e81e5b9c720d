"""``jax.lax``'s special functions, each the primitive ``fungraph.scipy.special`` binds (so the same
derivative rules): the logistic and error functions, log-gamma and digamma, Hurwitz zeta,
polygamma, the incomplete gamma functions (differentiable in ``a`` by ``igamma_grad_a``), the
incomplete beta function and the exponentially scaled Bessel functions."""

from __future__ import annotations

from typing import Any

from fungraph.lax._elementwise import _floats, _unary
from fungraph.primitives import special as sp


def _special() -> Any:
    """``fungraph.scipy.special``, imported on first use as ``fungraph.scipy`` intends."""
    from fungraph.scipy import special

    return special


logistic = _unary("logistic", lambda x: _special().expit(x))
erf = _unary("erf", lambda x: _special().erf(x))
erfc = _unary("erfc", lambda x: _special().erfc(x))
erf_inv = _unary("erf_inv", lambda x: _special().erfinv(x))
lgamma = _unary("lgamma", lambda x: _special().gammaln(x))
digamma = _unary("digamma", lambda x: _special().digamma(x))


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
