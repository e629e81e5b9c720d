"""The exponential, sine, cosine and Fresnel integrals and Spence's function of
``scipy.special``: ``expi``, ``exp1``, ``expn``, ``sici``, ``fresnel`` and ``spence``, as JAX 0.10
computes them.

The approximations are Cephes' (``ei.c``, ``expn.c``, ``sici.c``, ``fresnl.c`` and in single
precision ``fresnlf.c``, ``spence.c``), which JAX ports too: rational approximations on fixed
intervals, and for ``expn`` a power series below ``x = 1`` and a continued fraction above, both
iterated over the whole array in one ``while_loop`` until every element has converged. The
derivatives are JAX's rules (``custom_jvp``); ``spence`` differentiates through its
composition, as in JAX.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.custom_derivatives import custom_jvp
from fungraph.numpy._util import promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import special as sp
from fungraph.scipy._special_util import const, eps, horner, iterate, ratio, real_floats, where_safe

__all__ = ["exp1", "expi", "expn", "fresnel", "sici", "spence"]

_EULER = 0.57721566490153286061

# --- expi: Cephes ei.c ----------------------------------------------------------------------------

#: On (0, 2]: Ei(x) = euler + log x + x A(x) / B(x).
_EI_A = [-5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
         5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6]
_EI_B = [1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
         1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6]

#: Above 2: Ei(x) = e^x / x (1 + w A(w) / B(w)), w = 1/x, one (A, B) per interval (2, 4], (4, 8], ...,
#: (64, inf).
_EI_TAIL = [
    ([1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
      2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
      -1.545042679673485262580e-3, 7.059980605299617478514e-5],
     [1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
      2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
      3.953167195549672482304e-5]),
    ([-1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
      -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
      4.371064420753005429514e-5, 2.141783679522602903795e-6],
     [1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
      2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
      -4.729848351866523044863e-6, 2.665195537390710170105e-6]),
    ([-2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
      2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
      1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
      6.176407863710360207074e-10],
     [1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1, -1.566542966630792353556e-2,
      2.761106850817352773874e-3, -2.089148012284048449115e-4, 1.708528938807675304186e-5,
      -4.459311796356686423199e-7, 1.394634930353847498145e-8, 6.150865933977338354138e-10]),
    ([-2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
      -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
      2.644179518984235952241e-6, -4.239473659313765177195e-8],
     [1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1, 9.695000254621984627876e-2,
      -1.601745692712991078208e-2, 1.496414899205908021882e-3, -8.462452563778485013756e-5,
      2.728938403476726394024e-6, -4.239462431819542051337e-8]),
    ([1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
      -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5],
     [1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
      1.560544881127388842819e-3, -2.523137093603234562648e-5]),
    ([-7.657847078286127362028e-1, 6.886192415566705051750e-1, -2.132598113545206124553e-1,
      3.346107552384193813594e-2, -3.076541477344756050249e-3, 1.747119316454907477380e-4,
      -6.103711682274170530369e-6, 1.218032765428652199087e-7, -1.086076102793290233007e-9],
     [1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
      3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
      -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9]),
]


def _expi_positive(x: Any) -> Any:
    """Ei(x) for x > 0 from the interval's rational approximation (nan elsewhere, as JAX at 0)."""
    near = fnp.logical_and(x > 0, x <= const(2.0, x))
    xs = where_safe(near, x, 1.0)
    value = fnp.where(near, ew.add(ew.add(ew.mul(xs, ratio(_EI_A, _EI_B, xs)), const(_EULER, x)), ew.log(xs)),
                      const(np.nan, x))
    for i, (num, den) in enumerate(_EI_TAIL):
        low, high = 2.0 ** (i + 1), 2.0 ** (i + 2)
        inside = x > const(low, x)
        if i < len(_EI_TAIL) - 1:
            inside = fnp.logical_and(inside, x <= const(high, x))
        xs = where_safe(inside, x, 1.5 * low if i < len(_EI_TAIL) - 1 else low + 1.0)
        w = ew.div(const(1.0, x), xs)
        tail = ew.mul(ew.mul(ew.exp(xs), w), ew.add(const(1.0, x), ew.mul(w, ratio(num, den, w))))
        value = fnp.where(inside, tail, value)
    return value


@custom_jvp
def _expi(x: Any) -> Any:
    negative = x < 0
    from_exp1 = ew.neg(_expn_value(fnp.ones_like(x), ew.neg(where_safe(negative, x, -1.0))))
    return fnp.where(negative, from_exp1, _expi_positive(x))


_expi.defjvps(lambda t, out, x: ew.mul(t, ew.div(ew.exp(x), x)))


def expi(x: Any) -> Any:
    """The exponential integral Ei(x) = int_{-inf}^x e^t / t dt (nan at 0, as JAX)."""
    (x,) = real_floats("expi", x)
    return _expi(x)


# --- expn: Cephes expn.c --------------------------------------------------------------------------


def _expn_series(n: Any, x: Any) -> Any:
    """E_n(x) for 0 < x <= 1: (-x)^(n-1) psi(n) / Gamma(n) - sum_k' (-x)^k / ((k - n + 1) k!)."""
    one, zero = const(1.0, x), const(0.0, x)
    psi = ew.sub(ew.add(sp.digamma_p.bind(fnp.ceil(n)), const(_EULER, x)), ew.add(const(_EULER, x), ew.log(x)))
    is_one = fnp.equal(n, one)
    ans = fnp.where(is_one, zero, ew.div(one, ew.sub(one, where_safe(fnp.logical_not(is_one), n, 2.0))))
    tol = eps(x)

    def step(s: tuple) -> tuple:
        xk, yk, pk, total, _ = s
        xk = ew.add(xk, one)
        yk = ew.mul(yk, ew.div(ew.neg(x), xk))
        pk = ew.add(pk, one)
        total = ew.add(total, fnp.where(fnp.not_equal(pk, zero), ew.div(yk, where_safe(pk != 0, pk, 1.0)), zero))
        rel = fnp.where(fnp.not_equal(total, zero), fnp.abs(ew.div(yk, where_safe(total != 0, total, 1.0))), one)
        return xk, yk, pk, total, rel

    state = (fnp.zeros_like(x), fnp.ones_like(x), ew.sub(one, n), ans, fnp.full_like(x, np.inf))
    _, _, _, total, _ = iterate(lambda _, s: step(s), state, lambda s: s[4] > const(tol, x), 2000)
    lead = ew.div(ew.mul(fnp.power(ew.neg(x), ew.sub(n, one)), psi), ew.exp(sp.lgamma_p.bind(n)))
    return ew.sub(lead, total)


def _expn_fraction(n: Any, x: Any) -> Any:
    """E_n(x) for x > 1 by its continued fraction, e^-x / (x + n / (1 + 1 / (x + (n + 1) / (1 + ...))))."""
    one, zero, two = const(1.0, x), const(0.0, x), const(2.0, x)
    big, tol = const(1.44115188075855872e17, x), eps(x)

    def step(s: tuple) -> tuple:
        k, pkm2, qkm2, pkm1, qkm1, ans, _ = s
        k = ew.add(k, one)
        odd = fnp.equal(fnp.mod(k, two), one)
        yk = fnp.where(odd, one, x)
        xk = fnp.where(odd, ew.add(n, ew.div(ew.sub(k, one), two)), ew.div(k, two))
        pk = ew.add(ew.mul(pkm1, yk), ew.mul(pkm2, xk))
        qk = ew.add(ew.mul(qkm1, yk), ew.mul(qkm2, xk))
        nonzero = fnp.not_equal(qk, zero)
        r = ew.div(pk, where_safe(nonzero, qk, 1.0))
        rel = fnp.where(nonzero, fnp.abs(ew.div(ew.sub(ans, r), where_safe(r != 0, r, 1.0))), one)
        ans = fnp.where(nonzero, r, ans)
        rescale = fnp.abs(pk) > big
        scaled = [fnp.where(rescale, ew.div(v, big), v) for v in (pkm1, qkm1, pk, qk)]
        return k, scaled[0], scaled[1], scaled[2], scaled[3], ans, rel

    state = (fnp.ones_like(x), fnp.ones_like(x), x, fnp.ones_like(x), ew.add(x, n), ew.div(one, ew.add(x, n)),
             fnp.full_like(x, np.inf))
    ans = iterate(lambda _, s: step(s), state, lambda s: s[6] > const(tol, x), 2000)[5]
    return ew.mul(ans, ew.exp(ew.neg(x)))


def _expn_large_order(n: Any, x: Any) -> Any:
    """E_n(x) for n >= 5000 by its asymptotic expansion in 1 / (x + n)."""
    xk = ew.add(x, n)
    yk = ew.div(const(1.0, x), ew.mul(xk, xk))
    ans = ew.mul(ew.mul(yk, n), ew.add(ew.sub(ew.mul(const(6.0, x), ew.mul(x, x)),
                                              ew.mul(const(8.0, x), ew.mul(n, x))), ew.mul(n, n)))
    ans = ew.mul(yk, ew.add(ans, ew.mul(n, ew.sub(n, ew.mul(const(2.0, x), x)))))
    ans = ew.mul(yk, ew.add(ans, n))
    return ew.div(ew.mul(ew.add(ans, const(1.0, x)), ew.exp(ew.neg(x))), xk)


def _expn_value(n: Any, x: Any) -> Any:
    """E_n(x) by cases, tested in JAX's order where several hold (x > 1 first: the continued
    fraction, then the large-order expansion, n == 0, x == 0 (inf for n < 2), invalid arguments,
    the series)."""
    one, zero = const(1.0, x), const(0.0, x)
    far = x > one
    large = fnp.logical_and(n >= const(5000.0, x), fnp.logical_not(far))
    taken = fnp.logical_or(far, large)
    order_zero = fnp.logical_and(fnp.logical_and(fnp.equal(n, zero), x > 0), fnp.logical_not(taken))
    taken = fnp.logical_or(taken, order_zero)
    at_zero = fnp.logical_and(fnp.equal(x, zero), fnp.logical_not(taken))
    invalid = fnp.logical_and(fnp.logical_or(n < 0, x < 0), fnp.logical_not(fnp.logical_or(taken, at_zero)))
    near = fnp.logical_not(fnp.logical_or(fnp.logical_or(taken, at_zero), invalid))
    series = _expn_series(where_safe(near, n, 1.0), where_safe(near, x, 0.5))
    fraction = _expn_fraction(where_safe(far, n, 1.0), where_safe(far, x, 2.0))
    asymptotic = _expn_large_order(where_safe(large, n, 5000.0), where_safe(large, x, 1.0))
    x_pos = where_safe(order_zero, x, 1.0)
    at_zero_value = fnp.where(n < const(2.0, x), const(np.inf, x),
                              ew.div(one, where_safe(fnp.not_equal(n, one), n, 2.0)))
    return fnp.select([far, large, order_zero, at_zero, invalid],
                      [fraction, asymptotic, ew.div(ew.exp(ew.neg(x_pos)), x_pos), at_zero_value, const(np.nan, x)],
                      series)


@custom_jvp
def _expn(n: Any, x: Any) -> Any:
    return _expn_value(n, x)


_expn.defjvps(None, lambda t, out, n, x: ew.mul(ew.neg(t), _expn(ew.sub(n, const(1.0, n)), x)))


def expn(n: Any, x: Any) -> Any:
    """The generalised exponential integral E_n(x) = int_1^inf e^{-x t} / t^n dt, differentiable in
    ``x`` (zero in ``n``). As JAX, E_n(0) is 1/n for n >= 2 (SciPy: 1/(n - 1))."""
    n, x = real_floats("expn", n, x)
    n, x = fnp.broadcast_arrays(n, x)
    return _expn(n, x)


def exp1(x: Any) -> Any:
    """The exponential integral E_1(x) = int_x^inf e^{-t} / t dt (nan for x < 0)."""
    (x,) = real_floats("exp1", x)
    return expn(fnp.ones_like(x), x)


# --- sici: Cephes sici.c --------------------------------------------------------------------------

#: 0 < x <= 4: Si = x SN(x^2) / SD(x^2), Ci = euler + log x + x^2 CN(x^2) / CD(x^2).
_SI_N = [-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
         9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0]
_SI_D = [2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
         9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1]
_CI_N = [2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
         -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0]
_CI_D = [4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
         3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0]
#: 4 < x <= 1e9: the auxiliary functions f = FN(z) / (x FD(z)), g = z GN(z) / GD(z), z = 1/x^2, one
#: table below 8 and one above.
_F4_N = [4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0, 1.67006611831323023771e-1,
         6.81020132472518137426e-3, 1.08936580650328664411e-4, 5.48900223421373614008e-7]
_F4_D = [1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
         1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4, 5.48900252756255700982e-7]
_G4_N = [8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1, 7.48527737628469092119e-2,
         5.38868681462177273157e-3, 1.61999794598934024525e-4, 1.97963874140963632189e-6, 7.82579040744090311069e-9]
_G4_D = [1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
         6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6, 7.82579218933534490868e-9]
_F8_N = [4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1, 1.16064229408124407915e-2,
         3.49556442447859055605e-4, 4.86215430826454749482e-6, 3.20092790091004902806e-8, 9.41779576128512936592e-11,
         9.70507110881952024631e-14]
_F8_D = [1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1, 1.22253594771971293032e-2,
         3.58696481881851580297e-4, 4.92435064317881464393e-6, 3.21956939101046018377e-8, 9.43720590350276732376e-11,
         9.70507110881952025725e-14]
_G8_N = [6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2, 1.71718239052347903558e-3,
         3.48941165502279436777e-5, 3.47131167084116673800e-7, 1.70404452782044526189e-9, 3.85945925430276600453e-12,
         3.14040098946363334640e-15]
_G8_D = [1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1, 4.67913194259625806320e-2,
         1.90284426674399523638e-3, 3.68475504442561108162e-5, 3.57043223443740838771e-7, 1.72693748966316146736e-9,
         3.87830166023954706752e-12, 3.14040098946363335242e-15]


def _sici_small(x: Any) -> tuple[Any, Any]:
    t = ew.mul(x, x)
    si = ew.mul(x, ratio(_SI_N, _SI_D, t))
    ci = ew.add(ew.add(const(_EULER, x), ew.log(x)), ew.mul(t, ratio(_CI_N, _CI_D, t)))
    return si, ci


def _sici_large(x: Any) -> tuple[Any, Any]:
    z = ew.div(const(1.0, x), ew.mul(x, x))
    below8 = x < const(8.0, x)
    f = fnp.where(below8, ew.div(ratio(_F4_N, _F4_D, z), x), ew.div(ratio(_F8_N, _F8_D, z), x))
    g = fnp.where(below8, ew.mul(z, ratio(_G4_N, _G4_D, z)), ew.mul(z, ratio(_G8_N, _G8_D, z)))
    s, c = ew.sin(x), ew.cos(x)
    si = ew.sub(ew.sub(const(math.pi / 2, x), ew.mul(f, c)), ew.mul(g, s))
    return si, ew.sub(ew.mul(f, s), ew.mul(g, c))


def _sici_huge(x: Any) -> tuple[Any, Any]:
    infinite = fnp.isposinf(x)
    si = ew.sub(const(math.pi / 2, x), ew.div(ew.cos(x), x))
    return fnp.where(infinite, const(math.pi / 2, x), si), fnp.where(infinite, const(0.0, x), ew.div(ew.sin(x), x))


@custom_jvp
def _sici(x: Any) -> tuple[Any, Any]:
    ax = fnp.abs(x)
    small = ax <= const(4.0, x)
    medium = fnp.logical_and(fnp.logical_not(small), ax <= const(1e9, x))
    si_s, ci_s = _sici_small(where_safe(fnp.logical_and(small, ax > 0), ax, 1.0))
    si_s = fnp.where(fnp.equal(ax, const(0.0, x)), const(0.0, x), si_s)
    ci_s = fnp.where(fnp.equal(ax, const(0.0, x)), const(-np.inf, x), ci_s)
    si_m, ci_m = _sici_large(where_safe(medium, ax, 5.0))
    si_h, ci_h = _sici_huge(ax)
    si = fnp.select([small, medium], [si_s, si_m], si_h)
    ci = fnp.select([small, medium], [ci_s, ci_m], ci_h)
    return ew.mul(fnp.sign(x), si), fnp.where(fnp.isneginf(x), const(np.nan, x), ci)


def _sici_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    return _sici(x), (ew.mul(fnp.sinc(ew.div(x, const(math.pi, x))), t), ew.mul(ew.div(ew.cos(x), x), t))


_sici.defjvp(_sici_jvp)


def sici(x: Any) -> tuple[Any, Any]:
    """The sine and cosine integrals (Si(x), Ci(x)): Si = int_0^x sin t / t dt, Ci = euler + log x +
    int_0^x (cos t - 1) / t dt; for x < 0, Si is odd and Ci is Ci(|x|) (nan at -inf), as JAX."""
    (x,) = real_floats("sici", x)
    return _sici(x)


# --- spence: Cephes spence.c ----------------------------------------------------------------------

_SPENCE_A = [4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
             8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
             3.29771340985225106936e0, 1.00000000000000000126e0]
_SPENCE_B = [6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
             1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
             3.54771340985225096217e0, 9.99999999999999998740e-1]


def _spence_positive(x: Any) -> Any:
    """spence(x) for x > 0 (x != 1): the rational approximation in w around 1, after x -> 1/x
    above 2 and the reflection formulas below 1/2 and above 3/2."""
    inverted = x > const(2.0, x)
    x = fnp.where(inverted, ew.div(const(1.0, x), x), x)
    above = x > const(1.5, x)
    below = x < const(0.5, x)
    w = fnp.select([above, below], [ew.sub(ew.div(const(1.0, x), x), const(1.0, x)), ew.neg(x)],
                   ew.sub(x, const(1.0, x)))
    y = ew.neg(ew.mul(w, ratio(_SPENCE_A, _SPENCE_B, w)))
    reflected = ew.sub(ew.sub(const(math.pi ** 2 / 6, x), ew.mul(ew.log(x), fnp.log1p(ew.neg(
        where_safe(below, x, 0.25))))), y)
    y = fnp.where(below, reflected, y)
    log_x = ew.log(x)
    return fnp.where(fnp.logical_or(inverted, above), ew.sub(ew.mul(const(-0.5, x), ew.mul(log_x, log_x)), y), y)


def spence(x: Any) -> Any:
    """Spence's function int_1^x log t / (1 - t) dt for real x >= 0 (nan below 0, as JAX; SciPy
    also takes complex x). Only float32 and float64 inputs, as JAX."""
    x = fnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
    positive = x > 0
    value = _spence_positive(where_safe(fnp.logical_and(positive, fnp.not_equal(x, const(1.0, x))), x, 0.5))
    return fnp.select([fnp.logical_or(x < 0, fnp.isnan(x)), fnp.equal(x, const(1.0, x)), fnp.equal(x, const(0.0, x))],
                      [const(np.nan, x), const(0.0, x), const(math.pi ** 2 / 6, x)], value)


# --- fresnel: Cephes fresnl.c (fresnlf.c in single precision) -------------------------------------

_FRESNEL64 = {
    "sn": [-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7, 2.54890880573376359104e9,
           -4.42979518059697779103e10, 3.18016297876567817986e11],
    "sd": [1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
           4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11],
    "cn": [-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
           1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1],
    "cd": [3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
           1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
           1.00000000000000000118e0],
    "fn": [4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
           3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
           1.02304514164907233465e-10, 1.72010743268161828879e-13, 1.34283276233062758925e-16,
           3.76329711269987889006e-20],
    "fd": [1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
           1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
           3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
           1.25443237090011264384e-20],
    "gn": [5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
           6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
           4.45344415861750144738e-10, 1.08268041139020870318e-12, 1.37555460633261799868e-15,
           8.36354435630677421531e-19, 1.86958710162783235106e-22],
    "gd": [1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
           8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
           4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
           8.39158816283118707363e-19, 1.86958710162783236342e-22],
}
#: Single precision: polynomials only (no denominators).
_FRESNEL32 = {
    "sn": [1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6, -3.120693124703272e-4,
           7.244727626597022e-3, -9.228055941124598e-2, 5.235987735681432e-1],
    "cn": [1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5, -1.604381798862293e-3,
           2.818489036795073e-2, -2.467398198317899e-1, 9.999999760004487e-1],
    "fn": [-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9, 7.343848463587323e7,
           -8.732356681548485e5, 8.560515466275470e3, -1.032877601091159e2, 2.999401847870011e0],
    "gn": [-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8, 6.492611570598858e6,
           -7.787789623358162e4, 8.602931494734327e2, -1.493439396592284e1, 9.999841934744914e-1],
}


def _sin_cos_half_pi_square(x: Any) -> tuple[Any, Any]:
    """sin(pi x^2 / 2) and cos(pi x^2 / 2), with the argument reduced mod 2 exactly first
    (r = (x^2 / 2) mod 2 = (s (x - s/2)) mod 2 with s = x mod 2)."""
    x = fnp.abs(x)
    two = const(2.0, x)
    s = fnp.fmod(x, two)
    r = fnp.fmod(ew.mul(s, ew.sub(x, ew.div(s, two))), two)

    def sin_pi(v: Any) -> Any:
        return ew.sin(ew.mul(const(math.pi, x), v))

    sin_part = fnp.where(r < const(0.5, x), sin_pi(r), fnp.where(
        r > const(1.5, x), sin_pi(ew.sub(r, two)), ew.neg(sin_pi(ew.sub(r, const(1.0, x))))))
    cos_part = fnp.where(fnp.equal(r, const(0.5, x)), const(0.0, x), fnp.where(
        r < const(1.0, x), ew.neg(sin_pi(ew.sub(r, const(0.5, x)))), sin_pi(ew.sub(r, const(1.5, x)))))
    return sin_part, cos_part


def _fresnel_abs(x: Any) -> tuple[Any, Any]:
    """(S, C) at |x|: power series (a rational approximation in double precision) for x^2 < 2.5625,
    the auxiliary functions f, g above, the leading asymptotic terms above 36974."""
    single = x.dtype == np.float32
    table = _FRESNEL32 if single else _FRESNEL64
    one, half = const(1.0, x), const(0.5, x)
    x2 = ew.mul(x, x)
    t = ew.mul(x2, x2)
    if single:
        s_small = ew.mul(ew.mul(x, x2), horner(table["sn"], t))
        c_small = ew.mul(x, horner(table["cn"], t))
    else:
        s_small = ew.mul(ew.mul(x, x2), ratio(table["sn"], table["sd"], t))
        c_small = ew.mul(x, ratio(table["cn"], table["cd"], t))
    sin_part, cos_part = _sin_cos_half_pi_square(x)
    pix = ew.mul(const(math.pi, x), x)
    if single:
        c_large, s_large = half, half
    else:
        c_large = ew.add(half, ew.div(sin_part, pix))
        s_large = ew.sub(half, ew.div(cos_part, pix))
    t = ew.div(one, ew.mul(const(math.pi, x), x2))
    u = ew.mul(t, t)
    if single:
        f = ew.sub(one, ew.mul(u, horner(table["fn"], u)))
        g = ew.mul(t, horner(table["gn"], u))
    else:
        f = ew.sub(one, ew.mul(u, ratio(table["fn"], table["fd"], u)))
        g = ew.mul(t, ratio(table["gn"], table["gd"], u))
    c_mid = ew.add(half, ew.div(ew.sub(ew.mul(f, sin_part), ew.mul(g, cos_part)), pix))
    s_mid = ew.sub(half, ew.div(ew.add(ew.mul(f, cos_part), ew.mul(g, sin_part)), pix))
    small = x2 < const(2.5625, x)
    large = x > const(36974.0, x)
    s = fnp.select([fnp.isinf(x), small, large], [half, s_small, s_large], s_mid)
    c = fnp.select([fnp.isinf(x), small, large], [half, c_small, c_large], c_mid)
    return s, c


@custom_jvp
def _fresnel(x: Any) -> tuple[Any, Any]:
    wide = x.dtype not in (np.float32, np.float64)
    xs = x.astype(np.float32) if wide else x
    s, c = _fresnel_abs(fnp.abs(xs))
    negative = xs < 0
    s, c = fnp.where(negative, ew.neg(s), s), fnp.where(negative, ew.neg(c), c)
    return (s.astype(x.dtype), c.astype(x.dtype)) if wide else (s, c)


def _fresnel_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    sin_part, cos_part = _sin_cos_half_pi_square(x)
    return _fresnel(x), (ew.mul(sin_part, t), ew.mul(cos_part, t))


_fresnel.defjvp(_fresnel_jvp)


def fresnel(x: Any) -> tuple[Any, Any]:
    """The Fresnel integrals (S(x), C(x)) = int_0^x (sin, cos)(pi t^2 / 2) dt for real x (accurate
    on [-10, 10] and asymptotically beyond, as Cephes)."""
    (x,) = promote(fnp.asarray(x), to_inexact=True)
    x = fnp.asarray(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        raise NotImplementedError("Support for complex-valued inputs is not implemented yet.")
    return _fresnel(x)
