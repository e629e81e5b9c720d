"""Mathematical functions of ``fungraph.numpy`` beyond the one-primitive ones in ``_elementwise``
(inverse trigonometric and hyperbolic functions, exponentials and logarithms, rounding,
NaN-aware comparisons, complex parts, rational routines, ``i0``, ``unwrap``, interpolation and
integration), each a composition of existing primitives chosen to stay accurate (so
derivatives and batching come from the primitives' rules)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph.core import weak_array
from fungraph.lax import _elementwise as lax_ew
from fungraph.numpy import _reductions as red
from fungraph.numpy._elementwise import maximum, minimum
from fungraph.numpy._shape import moveaxis
from fungraph.numpy._sorting import searchsorted
from fungraph.numpy._util import asarray, cast, int_pair, namespace, normalize_axes, promote, promote_args, take_static
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives import special as sp
from fungraph.primitives.indexing import take as take_prim


def _f(x: Any) -> Any:
    (x,) = promote(x, to_inexact=True)
    return x


def _c(value: float, like: Any) -> np.ndarray:
    return np.asarray(value, like.dtype)


def _weak_c(value: float, like: Any) -> np.ndarray:
    """A weakly typed constant of ``like``'s dtype, for the functions whose result JAX keeps weak
    for a weak operand (``sinc``, ``deg2rad``; ``log2``'s constant is strong in JAX)."""
    return weak_array(np.asarray(value, like.dtype))


# --- inverse trigonometric and hyperbolic ------------------------------------------------------


def arcsin(x: Any) -> Any:
    return ew.asin_p.bind(_f(x))


def arccos(x: Any) -> Any:
    return ew.acos_p.bind(_f(x))


def arcsinh(x: Any) -> Any:
    return lax_ew.asinh(_f(x))


def arccosh(x: Any) -> Any:
    return lax_ew.acosh(_f(x))


def arctanh(x: Any) -> Any:
    return lax_ew.atanh(_f(x))

asin = arcsin
acos = arccos
asinh = arcsinh
acosh = arccosh
atanh = arctanh


# --- exponentials and logarithms ----------------------------------------------------------------


def exp2(x: Any) -> Any:
    return lax_ew.exp2(_f(x))


def log2(x: Any) -> Any:
    x = _f(x)
    return ew.div(ew.log(x), _c(math.log(2), x))


def log10(x: Any) -> Any:
    x = _f(x)
    return ew.div(ew.log(x), _c(math.log(10), x))


def logaddexp(x1: Any, x2: Any) -> Any:
    """log(e^a + e^b) = max + log1p(e^-|a - b|); ties (also both infinite) give a + log 2."""
    return ew.logaddexp(*promote_args("logaddexp", x1, x2, to_inexact=True))


def logaddexp2(x1: Any, x2: Any) -> Any:
    a, b = promote_args("logaddexp2", x1, x2, to_inexact=True)
    return ew.log_add(a, b, lambda d: ew.div(ew.log1p_p.bind(ew.pow_(_c(2, d), d)), _c(math.log(2), d)))


def hypot(x1: Any, x2: Any) -> Any:
    """sqrt(a^2 + b^2) scaled by the larger magnitude so it neither overflows nor underflows."""
    a, b = promote_args("hypot", x1, x2, to_inexact=True)
    a_smaller = ew.le_p.bind(ew.abs_p.bind(a), ew.abs_p.bind(b))       # one side each, also at a tie,
    big = ew.abs_p.bind(ew.select(a_smaller, b, a))                     # and the smaller signed: its ratio
    small = ew.select(a_smaller, a, b)                                  # squared is smooth at 0
    zero = ew.eq(big, _c(0, big))
    safe = ew.select(zero, _weak_c(1, big), big)
    ratio = ew.div(small, safe)
    out = ew.mul(big, ew.sqrt_p.bind(ew.add(_weak_c(1, big), ew.mul(ratio, ratio))))
    inf = ew.eq(big, _c(np.inf, big))
    return ew.select(inf, big, out)


def sinc(x: Any) -> Any:
    """sin(pi x) / (pi x), with its limit 1 at 0 from ``maclaurin`` so that every derivative
    there is exact too (sinc''(0) = -pi^2/3, as JAX)."""
    x = _f(x)
    zero = ew.eq(x, _c(0, x))
    px = ew.mul(_weak_c(math.pi, x), x)
    safe = ew.select(zero, _weak_c(1, x), px)
    return ew.select(zero, sp.maclaurin_p.bind(px, series="sinc", k=0), ew.div(ew.sin(safe), safe))


def cbrt(x: Any) -> Any:
    return lax_ew.cbrt(_f(x))


def deg2rad(x: Any) -> Any:
    x = _f(x)
    return ew.mul(x, _weak_c(math.pi / 180, x))


def rad2deg(x: Any) -> Any:
    x = _f(x)
    return ew.mul(x, _weak_c(180 / math.pi, x))


radians = deg2rad
degrees = rad2deg


def fabs(x: Any) -> Any:
    return ew.abs_p.bind(_f(x))


def positive(x: Any) -> Any:
    return asarray(x)


def float_power(x1: Any, x2: Any) -> Any:
    return ew.pow_(*promote_args("float_power", x1, x2, to_inexact=True))


def heaviside(x1: Any, x2: Any) -> Any:
    """0 below zero, ``x2`` at zero, 1 above (NaN stays NaN)."""
    a, b = promote_args("heaviside", x1, x2, to_inexact=True)
    out = ew.select(ew.lt(a, _c(0, a)), _weak_c(0, a), ew.select(ew.eq(a, _c(0, a)), b, _weak_c(1, a)))
    return ew.select(_isnan(a), a, out)


# --- rounding (piecewise constant: zero derivatives) ---------------------------------------------


def ceil(x: Any) -> Any:
    return lax_ew.ceil(_f(x))


def trunc(x: Any) -> Any:
    return lax_ew.trunc(_f(x))


fix = trunc


_rint = ew.round_half_even


def rint(x: Any) -> Any:
    return _rint(_f(x))


def round(a: Any, decimals: int = 0) -> Any:  # noqa: A001
    """numpy's round: half to even after scaling by 10**decimals; weakly typed where ``a`` is,
    as JAX's one ``round`` primitive."""
    out = _round(asarray(a), decimals)
    return ew.weak(out) if dtypes.is_weak(a) else out


def _round(x: Any, decimals: int) -> Any:
    if dtypes.is_complex(x.dtype):                                       # each part on its own
        return ew.complex_(_round(ew.real(x), decimals), _round(ew.imag(x), decimals))
    if not dtypes.is_float(x.dtype):
        if decimals >= 0:
            return x
        scale = np.asarray(10 ** -decimals, x.dtype)
        return ew.mul(cast(_rint(ew.div(cast(x, dtypes.float64), cast(scale, dtypes.float64))), x.dtype), scale)
    if decimals == 0:
        return _rint(x)
    if decimals > 0:
        scale = _c(10.0 ** decimals, x)
        return ew.div(_rint(ew.mul(x, scale)), scale)
    scale = _c(10.0 ** -decimals, x)
    return ew.mul(_rint(ew.div(x, scale)), scale)


around = round
round_ = round


# --- NaN-aware and comparisons --------------------------------------------------------------------


def _isnan(x: Any) -> Any:
    return ew.ne_p.bind(x, x)


def fmax(x1: Any, x2: Any) -> Any:
    """The larger value, ignoring a NaN operand (NaN only when both are); complex numbers in
    numpy's lexicographic order."""
    a, b = promote_args("fmax", x1, x2)
    if not dtypes.is_inexact(a.dtype):
        return ew.max_p.bind(a, b)
    return ew.select(_isnan(b), a, ew.select(_isnan(a), b, maximum(a, b)))


def fmin(x1: Any, x2: Any) -> Any:
    a, b = promote_args("fmin", x1, x2)
    if not dtypes.is_inexact(a.dtype):
        return ew.min_p.bind(a, b)
    return ew.select(_isnan(b), a, ew.select(_isnan(a), b, minimum(a, b)))


def fmod(x1: Any, x2: Any) -> Any:
    """Remainder with the sign of the dividend (C's fmod): ``lax.rem`` after promotion."""
    return lax_ew.fmod(*promote_args("fmod", x1, x2, to_numeric=True))


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    x = asarray(x)
    if not dtypes.is_float(x.dtype):
        return x
    info = np.finfo(x.dtype)
    hi = _c(info.max if posinf is None else posinf, x)
    lo = _c(info.min if neginf is None else neginf, x)
    out = ew.select(_isnan(x), _c(nan, x), x)
    out = ew.select(ew.eq(x, _c(np.inf, x)), hi, out)
    return ew.select(ew.eq(x, _c(-np.inf, x)), lo, out)


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    """|a - b| <= atol + rtol |b| for finite values; infinities must be equal. Complex values
    compare by the modulus of their difference, with real tolerances (as JAX and numpy)."""
    x, y = promote(a, b, to_inexact=True)
    finite = ew.and_p.bind(_finite(x), _finite(y))
    abs_y = ew.abs_p.bind(y)
    close = ew.le_p.bind(ew.abs_p.bind(ew.sub(x, y)), ew.add(_c(atol, abs_y), ew.mul(_c(rtol, abs_y), abs_y)))
    out = ew.select(finite, close, ew.eq(x, y))
    if equal_nan:
        out = ew.or_p.bind(out, ew.and_p.bind(_isnan(x), _isnan(y)))
    return out


def _finite(x: Any) -> Any:
    magnitude = ew.abs_p.bind(x)
    return ew.lt(magnitude, _c(np.inf, magnitude))


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    from fungraph.numpy._reductions import all as all_

    return all_(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    from fungraph.numpy._reductions import all as all_

    x, y = asarray(a1), asarray(a2)
    if x.shape != y.shape:
        return np.asarray(False)
    x, y = promote(x, y)
    eq = ew.eq(x, y)
    if equal_nan and dtypes.is_float(x.dtype):
        eq = ew.or_p.bind(eq, ew.and_p.bind(_isnan(x), _isnan(y)))
    return all_(eq)


def array_equiv(a1: Any, a2: Any) -> Any:
    from fungraph.numpy._reductions import all as all_

    x, y = promote(a1, a2)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return np.asarray(False)
    return all_(ew.eq(x, y))


def isneginf(x: Any) -> Any:
    x = _f(x)
    return ew.eq(x, _c(-np.inf, x))


def isposinf(x: Any) -> Any:
    x = _f(x)
    return ew.eq(x, _c(np.inf, x))


def isreal(x: Any) -> Any:
    x = asarray(x)
    if dtypes.is_complex(x.dtype):
        return ew.eq(ew.imag(x), _c(0, ew.imag(x)))
    return np.ones(x.shape, bool)


def iscomplex(x: Any) -> Any:
    x = asarray(x)
    if dtypes.is_complex(x.dtype):
        return ew.ne_p.bind(ew.imag(x), _c(0, ew.imag(x)))
    return np.zeros(x.shape, bool)


def real(x: Any) -> Any:
    x = asarray(x)
    return ew.real(x) if dtypes.is_complex(x.dtype) else x


def imag(x: Any) -> Any:
    x = asarray(x)
    if dtypes.is_complex(x.dtype):
        return ew.imag(x)
    return np.zeros(x.shape, x.dtype)


def conjugate(x: Any) -> Any:
    x = asarray(x)
    return ew.conj(x) if dtypes.is_complex(x.dtype) else x


def angle(z: Any, deg: bool = False) -> Any:
    """The argument of ``z``: ``atan2(imag, real)`` (0 or pi for real input, as numpy)."""
    z = asarray(z)
    if dtypes.is_complex(z.dtype):
        re, im = ew.real(z), ew.imag(z)
    else:
        (re,) = promote(z, to_inexact=True)
        im = np.zeros((), re.dtype)
    out = ew.atan2_p.bind(im, re)
    return ew.mul(out, _c(180 / math.pi, out)) if deg else out


conj = conjugate


def divmod_(x1: Any, x2: Any) -> tuple[Any, Any]:
    a, b = promote_args("divmod", x1, x2, to_numeric=True)
    return ew.floor_divide_p.bind(a, b), ew.mod_p.bind(a, b)


def modf(x: Any) -> tuple[Any, Any]:
    x = _f(x)
    whole = trunc(x)
    return ew.sub(x, whole), whole


# --- rational routines ----------------------------------------------------------------------------


def gcd(x1: Any, x2: Any) -> Any:
    """The greatest common divisor, non-negative (Euclid's algorithm as a while_loop over the
    whole array, at most ~90 steps for int64)."""
    fnp = namespace()
    a, b = int_pair(x1, x2, "gcd")
    a, b = fnp.abs(a), fnp.abs(b)

    def step(c: tuple) -> tuple:
        p, q = c
        nz = q != 0
        return fnp.where(nz, q, p), fnp.where(nz, p % fnp.where(nz, q, 1), 0)

    return lax.while_loop(lambda c: fnp.any(c[1] != 0), step, (a, b))[0]


def lcm(x1: Any, x2: Any) -> Any:
    """The least common multiple, non-negative; 0 when either operand is 0."""
    fnp = namespace()
    a, b = int_pair(x1, x2, "lcm")
    g = gcd(a, b)
    return fnp.where(g == 0, 0, fnp.abs(a // fnp.where(g == 0, 1, g) * b))


# --- special functions and angles -----------------------------------------------------------------


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0 (``scipy.special.i0``)."""
    (x,) = promote(x, to_inexact=True)
    return sp.bessel_i0_p.bind(x)


def unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * np.pi) -> Any:
    """``p`` with jumps larger than ``max(discont, period/2)`` between neighbours along ``axis``
    replaced by their ``period``-complement."""
    fnp = namespace()
    x = asarray(p)
    x = x.astype(np.promote_types(x.dtype, np.float64)) if not dtypes.is_float(x.dtype) else x
    half = period / 2
    disc = half if discont is None else discont
    dd = fnp.diff(x, axis=axis)
    ddmod = (dd + half) % period - half
    ddmod = fnp.where((ddmod == -half) & (dd > 0), half, ddmod)
    correction = fnp.where(fnp.abs(dd) < disc, 0, ddmod - dd)
    zero = fnp.zeros_like(fnp.take(x, np.array([0]), axis=axis))
    return x + fnp.concatenate([zero, fnp.cumsum(correction, axis=axis)], axis=axis)


# --- interpolation and integration ----------------------------------------------------------------


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """Piecewise-linear interpolation on increasing ``xp`` (differentiable in x, xp and fp);
    ``left``/``right`` may be ``"extrapolate"`` (JAX's), and ``period`` wraps as numpy does."""
    for name, end in (("left", left), ("right", right)):
        if isinstance(end, str) and end != "extrapolate":
            raise ValueError(f"interp: {name} must be a value, None or 'extrapolate', got {end!r}")
    xs, xps, fps = promote(x, xp, fp, to_inexact=True)
    if xps.ndim != 1 or fps.shape != xps.shape:
        raise ValueError(f"interp: xp and fp must be 1-d of the same length, got shapes {xps.shape} and {fps.shape}")
    if period is not None:
        xs, xps, fps = _periodic(xs, xps, fps, period)
        left = right = None
    n = xps.shape[0]
    if n == 1:
        return sh.broadcast_to(fps, xs.shape)
    i = searchsorted(xps, xs, side="right")
    index = i.dtype
    i = ew.min_p.bind(ew.max_p.bind(ew.sub(i, np.asarray(1, index)), np.asarray(0, index)), np.asarray(n - 2, index))
    j = ew.add(i, np.asarray(1, index))
    x0, x1 = take_prim(xps, i, 0), take_prim(xps, j, 0)
    f0, f1 = take_prim(fps, i, 0), take_prim(fps, j, 0)
    t = ew.div(ew.sub(xs, x0), ew.sub(x1, x0))
    out = ew.add(f0, ew.mul(t, ew.sub(f1, f0)))
    first, last = take_static(fps, 0, 0), take_static(fps, n - 1, 0)
    if right != "extrapolate":
        hi = last if right is None else np.asarray(right, xs.dtype)
        out = ew.select(ew.eq(xs, take_static(xps, n - 1, 0)), sh.broadcast_to(last, xs.shape), out)
        out = ew.select(ew.gt(xs, take_static(xps, n - 1, 0)), sh.broadcast_to(asarray(hi), xs.shape), out)
    if left != "extrapolate":
        lo = first if left is None else np.asarray(left, xs.dtype)
        out = ew.select(ew.lt(xs, take_static(xps, 0, 0)), sh.broadcast_to(asarray(lo), xs.shape), out)
    return out


def _periodic(xs: Any, xps: Any, fps: Any, period: Any) -> tuple[Any, Any, Any]:
    """numpy's ``interp(period=)``: coordinates reduced modulo the period, ``xp`` sorted, and one
    point wrapped onto each end."""
    fnp = namespace()
    if fnp.ndim(period) != 0:
        raise ValueError(f"interp: period must be a scalar, got shape {fnp.shape(period)}")
    p = fnp.abs(fnp.asarray(period, dtype=xs.dtype))
    xs, xps = fnp.mod(xs, p), fnp.mod(xps, p)
    order = fnp.argsort(xps)
    xps, fps = fnp.take(xps, order), fnp.take(fps, order)
    return xs, fnp.concatenate([xps[-1:] - p, xps, xps[:1] + p]), fnp.concatenate([fps[-1:], fps, fps[:1]])


def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
    (yy,) = promote(y, to_inexact=True)
    (ax,) = normalize_axes(axis, yy.ndim, "trapezoid")
    yy = moveaxis(yy, ax, -1)
    n = yy.shape[-1]
    lo, hi = yy[..., :n - 1], yy[..., 1:]
    if x is None:
        widths = np.asarray(dx, yy.dtype)
    else:
        from fungraph.numpy._manip import diff

        xx = asarray(x)
        widths = diff(xx) if xx.ndim == 1 else moveaxis(diff(xx, axis=ax), ax, -1)
        widths = cast(widths, yy.dtype)
    return red.sum(ew.mul(widths, ew.div(ew.add(lo, hi), np.asarray(2, yy.dtype))), axis=-1)
