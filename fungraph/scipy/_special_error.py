"""The error-function family of ``scipy.special`` beyond ``erf``/``erfc``: the scaled
complementary error function ``erfcx``, the Faddeeva function ``wofz``, Dawson's integral
``dawsn`` and Owen's T function ``owens_t``, as JAX 0.10 computes them.

Each is composed of ``fungraph.numpy`` operations with a hand-written derivative (JAX's rule),
so it differentiates, batches and compiles like any other code. The approximations are the
classical ones JAX uses too: an asymptotic series for ``erfcx`` where ``exp(x^2)`` overflows,
Weideman's 32-term rational approximation for ``wofz``, the rational approximations of Cody,
Paciorek and Thacher for ``dawsn`` and a 13-point quadrature (Patefield and Tandy's T5) for
``owens_t``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import lax
from fungraph import numpy as fnp
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy._util import promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import special as sp
from fungraph.scipy._special_util import const, horner, ratio, real_floats, where_safe

__all__ = ["dawsn", "erfcx", "owens_t", "wofz"]

_SQRT_PI = math.sqrt(math.pi)

#: erfcx(x) ~ P(1/x^2) / (sqrt(pi) x), P's coefficients (-1)^k (2k-1)!! / 2^k, highest first.
_ERFCX_ASYMPTOTIC = [(-1) ** k * math.prod(range(1, 2 * k, 2)) / 2 ** k for k in range(8, -1, -1)]


def _erfcx_real(x: Any) -> Any:
    """e^{x^2} erfc(x) directly while e^{x^2} is finite, by the asymptotic series above that
    (9 terms in float64, 5 in float32: the first term left out is below the dtype's epsilon)."""
    threshold = math.sqrt(math.log(float(np.finfo(x.dtype).max)))
    nterms = 9 if x.dtype == np.float64 else 5
    large = x > const(threshold, x)
    safe_x = where_safe(fnp.logical_not(large), x, 1.0)
    direct = ew.mul(ew.exp(ew.mul(safe_x, safe_x)), sp.erfc_p.bind(safe_x))
    big_x = where_safe(large, x, threshold + 1.0)
    series = horner(_ERFCX_ASYMPTOTIC[-nterms:], ew.div(const(1.0, x), ew.mul(big_x, big_x)))
    asymptotic = ew.div(series, ew.mul(big_x, const(_SQRT_PI, x)))
    return fnp.where(large, asymptotic, direct)


@custom_jvp
def _erfcx(x: Any) -> Any:
    if x.dtype in (np.float32, np.float64):
        return _erfcx_real(x)
    return _erfcx_real(x.astype(np.float32)).astype(x.dtype)


_erfcx.defjvps(lambda t, out, x: ew.mul(t, ew.sub(ew.mul(ew.mul(const(2.0, x), x), out),
                                                  const(2 / _SQRT_PI, x))))


def erfcx(x: Any) -> Any:
    """The scaled complementary error function e^{x^2} erfc(x), finite for large positive x;
    for complex x, wofz(i x)."""
    (x,) = promote(x, to_inexact=True)
    x = fnp.asarray(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        return _wofz(lax.complex(ew.neg(fnp.imag(x)), fnp.real(x)))
    return _erfcx(x)


# --- the Faddeeva function ------------------------------------------------------------------------

#: Weideman (1994), N = 32: w(z) = 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz)), Z = (L + iz) / (L - iz)
#: for Im z >= 0, with p's coefficients below (highest degree first).
_WOFZ_L = 4.7568284600108841
_WOFZ_P = [
    -1.3034426067909105e-12, 3.7411838373738471e-12, 8.030427700497756e-12, -2.1543593557490879e-11,
    -5.5442449963237932e-11, 1.165824698850374e-10, 4.1537441121999766e-10, -5.2310202114920615e-10,
    -3.2080151339721323e-09, 8.1248864216535907e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
    -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07, 4.4015317312832251e-06,
    6.8210319443575151e-06, -2.1409619201999998e-05, -0.00013075449254579421, -0.00024532980270038237,
    0.00039259136070109705, 0.0045195411053493093, 0.019006155784845501, 0.057304403529837282,
    0.14060716226893755, 0.29544451071508743, 0.54601397206393376, 0.9019254893648001,
    1.3455441692345449, 1.8256696296324815, 2.2635372999002676, 2.5722534081245696,
]


def _wofz_upper_half(z: Any) -> Any:
    iz = ew.mul(z, const(1j, z))
    denom = ew.sub(const(_WOFZ_L, z), iz)
    big_z = ew.div(ew.add(const(_WOFZ_L, z), iz), denom)
    poly = horner(_WOFZ_P, big_z)
    return ew.add(ew.div(ew.mul(const(2.0, z), poly), ew.mul(denom, denom)),
                  ew.div(const(1 / _SQRT_PI, z), denom))


@custom_jvp
def _wofz(z: Any) -> Any:
    upper = fnp.imag(z) >= 0
    w_upper = _wofz_upper_half(fnp.where(upper, z, ew.neg(z)))
    reflected = ew.sub(ew.mul(const(2.0, z), ew.exp(ew.neg(ew.mul(z, z)))), w_upper)
    return fnp.where(upper, w_upper, reflected)


_wofz.defjvps(lambda t, out, z: ew.mul(t, ew.add(ew.neg(ew.mul(ew.mul(const(2.0, z), z), out)),
                                                 const(2j / _SQRT_PI, z))))


def wofz(z: Any) -> Any:
    """The Faddeeva function e^{-z^2} erfc(-i z), complex valued (complex64 for 32-bit inputs)."""
    (z,) = promote(z, to_inexact=True)
    z = fnp.asarray(z)
    if not np.issubdtype(z.dtype, np.complexfloating):
        z = lax.complex(z, fnp.zeros_like(z))
    return _wofz(z)


# --- Dawson's integral ----------------------------------------------------------------------------

#: Cody, Paciorek and Thacher (1970), on |x|: below 3.25, |x| AN(x^2) / AD(x^2); from 3.25 to 6.25
#: (BN, BD) and above (CN, CD), (1 + t N(t) / D(t)) / (2 |x|) with t = 1/x^2. Highest degree first.
_DAWSN_AN = [1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
             9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
             -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
             9.99999999999999994612e-1]
_DAWSN_AD = [2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
             1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
             3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
             5.74918629489320327824e-1, 1.00000000000000000539e0]
_DAWSN_BN = [5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
             -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
             3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
             -2.40274520828250956942e-9, 3.59233385440928410398e-11]
_DAWSN_BD = [1.00000000000000000000e0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
             -5.31806367003223277662e-2, 8.48041718586295374409e-3, -9.47996768486665330168e-4,
             7.81025592944552338085e-5, -4.55875153252442634831e-6, 1.89100358111421846170e-7,
             -4.91324691331920606875e-9, 7.18466403235734541950e-11]
_DAWSN_CN = [-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
             1.64837047825189632310e-2, -4.86827613020462700845e-4]
_DAWSN_CD = [1.00000000000000000000e0, -2.69820057197544900361e0, 1.73270799045947845857e0,
             -3.93708582281939493482e-1, 3.44278924041233391079e-2, -9.73655226040941223894e-4]


def _dawsn_tail(ax: Any, mask: Any, num: list[float], den: list[float]) -> Any:
    safe = where_safe(mask, ax, 1.0)
    t = ew.div(const(1.0, ax), ew.mul(safe, safe))
    return ew.mul(ew.div(const(0.5, ax), safe), ew.add(const(1.0, ax), ew.mul(t, ratio(num, den, t))))


def _dawsn_real(x: Any) -> Any:
    ax = fnp.abs(x)
    low = ax < const(3.25, x)
    mid = fnp.logical_and(fnp.logical_not(low), ax < const(6.25, x))
    high = ax >= const(6.25, x)
    small = where_safe(low, ax, 1.0)
    near = ew.mul(small, ratio(_DAWSN_AN, _DAWSN_AD, ew.mul(small, small)))
    value = fnp.select([low, mid], [near, _dawsn_tail(ax, mid, _DAWSN_BN, _DAWSN_BD)],
                       _dawsn_tail(ax, high, _DAWSN_CN, _DAWSN_CD))
    return ew.mul(fnp.sign(x), value)


@custom_jvp
def _dawsn(x: Any) -> Any:
    if x.dtype in (np.float32, np.float64):
        return _dawsn_real(x)
    return _dawsn_real(x.astype(np.float32)).astype(x.dtype)


_dawsn.defjvps(lambda t, out, x: ew.mul(t, ew.sub(const(1.0, x), ew.mul(ew.mul(const(2.0, x), x), out))))


def dawsn(x: Any) -> Any:
    """Dawson's integral e^{-x^2} int_0^x e^{t^2} dt (real x)."""
    (x,) = real_floats("dawsn", x)
    return _dawsn(x)


# --- Owen's T function ----------------------------------------------------------------------------

#: T(h, a) ~ a sum_i w_i exp(-h^2 (1 + a^2 t_i) / 2) / (1 + a^2 t_i) for |a| <= 1 (Patefield and
#: Tandy 2000, method T5, with 1/(2 pi) and the Jacobian folded into the weights).
_OWENS_T_NODES = [0.0035082039676451715, 0.031279042338030754, 0.085266826283219451, 0.16245071730812277,
                  0.25851196049125435, 0.36807553840697534, 0.48501092905604697, 0.60277514152618577,
                  0.71477884217753227, 0.81475510988760099, 0.89711029755948966, 0.95723808085944262,
                  0.99178832974629704]
_OWENS_T_WEIGHTS = [0.018831438115323503, 0.018567086243977649, 0.018042093461223386, 0.017263829606398753,
                    0.016243219975989857, 0.014994592034116705, 0.013535474469662088, 0.011886351605820165,
                    0.010070377242777432, 0.0081130545742299587, 0.0060419009528470239, 0.0038862217010742058,
                    0.0016793031084546090]


def _owens_t_quadrature(h: Any, a: Any) -> Any:
    a2, half_h2 = ew.mul(a, a), ew.mul(const(0.5, h), ew.mul(h, h))
    total = fnp.zeros_like(a)
    for node, weight in zip(_OWENS_T_NODES, _OWENS_T_WEIGHTS):
        r = ew.add(const(1.0, a), ew.mul(a2, const(node, a)))
        total = ew.add(total, ew.mul(const(weight, a), ew.div(ew.exp(ew.neg(ew.mul(half_h2, r))), r)))
    return ew.mul(a, total)


@custom_jvp
def _owens_t(h: Any, a: Any) -> Any:
    h_abs, a_abs = fnp.abs(h), fnp.abs(a)
    root2 = const(math.sqrt(2.0), h)
    inner = a_abs <= const(1.0, a)
    small_a = fnp.where(inner, a_abs, ew.div(const(1.0, a), a_abs))
    scaled_h = fnp.where(inner, h_abs, ew.mul(a_abs, h_abs))
    value = _owens_t_quadrature(scaled_h, small_a)
    value = fnp.where(fnp.equal(scaled_h, const(0.0, h)), ew.div(fnp.arctan(small_a), const(2 * math.pi, a)), value)
    erfc_pair = ew.mul(sp.erfc_p.bind(ew.div(ew.neg(scaled_h), root2)), sp.erfc_p.bind(ew.div(scaled_h, root2)))
    value = fnp.where(fnp.equal(small_a, const(1.0, a)), ew.mul(const(0.125, a), erfc_pair), value)
    h_over_root2 = ew.div(h_abs, root2)
    ah_over_root2 = ew.mul(a_abs, h_over_root2)
    erf_form = ew.sub(ew.sub(const(0.25, h), ew.mul(const(0.25, h), ew.mul(ew.erf_p.bind(h_over_root2),
                                                                         ew.erf_p.bind(ah_over_root2)))), value)
    q_h, q_ah = sp.erfc_p.bind(h_over_root2), sp.erfc_p.bind(ah_over_root2)
    erfc_form = ew.sub(ew.mul(const(0.25, h), ew.sub(ew.add(q_h, q_ah), ew.mul(q_h, q_ah))), value)
    outer = fnp.where(ew.mul(a_abs, h_abs) <= const(0.67, h), erf_form, erfc_form)
    value = ew.mul(fnp.sign(a), fnp.where(inner, value, outer))
    return fnp.where(fnp.logical_or(fnp.isnan(a), fnp.isnan(h)), const(np.nan, h), value)


def _owens_t_dh(t: Any, out: Any, h: Any, a: Any) -> Any:
    gauss = ew.exp(ew.mul(const(-0.5, h), ew.mul(h, h)))
    d = ew.div(ew.neg(ew.mul(gauss, ew.erf_p.bind(ew.div(ew.mul(a, h), const(math.sqrt(2.0), h))))),
               const(2 * math.sqrt(2 * math.pi), h))
    return ew.mul(t, d)


def _owens_t_da(t: Any, out: Any, h: Any, a: Any) -> Any:
    one_a2 = ew.add(const(1.0, a), ew.mul(a, a))
    d = ew.div(ew.exp(ew.mul(const(-0.5, h), ew.mul(one_a2, ew.mul(h, h)))), ew.mul(const(2 * math.pi, a), one_a2))
    return ew.mul(t, d)


_owens_t.defjvps(_owens_t_dh, _owens_t_da)


def owens_t(h: Any, a: Any) -> Any:
    """Owen's T function (1 / 2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx."""
    h, a = real_floats("owens_t", h, a)
    h, a = fnp.broadcast_arrays(h, a)
    return _owens_t(h, a)
