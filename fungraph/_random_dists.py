"""The samplers of ``fungraph.random`` built on rejection loops and on other samplers: gamma and
what derives from it (beta, dirichlet, t, chisquare, f, generalized_normal, ball), poisson,
binomial, multinomial, and the linear-algebra ones (multivariate_normal, orthogonal).

They follow JAX's algorithms and key splitting step by step, so with the same key they draw the
same proposals as ``jax.random``, and the floats agree as far as ``normal``, ``log``, ``pow`` and
LAPACK do: a few ulp. Integer draws are equal unless such a rounding flips an acceptance test:
never seen for binomial and multinomial or below ``lam = 10`` for poisson; above, poisson compares
float32 ``lgamma`` values that XLA rounds a few ulp apart, which flips about 1 draw in 7000 for
rates up to 3000 and about 1 in 60 near 5e4. ``gamma`` and ``loggamma`` are differentiable in
``a`` by implicit reparameterisation: ``dx/da = -(dP/da) / (dP/dx)`` at ``P(a, x) = u`` fixed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import _threefry, dtypes
from fungraph import lax as _lax
from fungraph import numpy as fnp
from fungraph._random_args import _broadcasts_to, _check_range, _float_dtype, _sample_shape, _shape
from fungraph._random_arith import _fma
from fungraph._random_samplers import _pair, exponential, normal, rademacher, uniform
from fungraph.api import vmap
from fungraph.core import ShapeError, Tracer
from fungraph.custom_derivatives import custom_jvp
from fungraph.jit import jit
from fungraph.numpy._util import asarray, aval

__all__ = ["ball", "beta", "binomial", "chisquare", "dirichlet", "f", "gamma", "generalized_normal", "loggamma",
           "multinomial", "multivariate_normal", "orthogonal", "poisson", "t"]


def _c(value: float, dt: np.dtype) -> np.ndarray:
    return np.asarray(value, dt)


def _jit_when_concrete(fun: Callable[..., Any], static_argnums: tuple[int, ...] = ()) -> Callable[..., Any]:
    """``fun`` compiled for concrete arguments, so that eager calls trace its loops once per shape
    and dtype (JAX jits its samplers likewise); traced arguments go straight to ``fun``. Lanes
    that a loop has finished with, or a branch that ``where`` discards, may compute inf or nan
    without numpy warning about it."""
    jitted = jit(fun, static_argnums=static_argnums)

    @functools.wraps(fun)
    def call(*args: Any) -> Any:
        if any(isinstance(a, Tracer) for a in args):
            return fun(*args)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return jitted(*args)

    return call


# --- gamma: Marsaglia and Tsang's rejection loop per element, as JAX runs it ----------------

def _gamma_one(key: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) draw (its log with ``log_space``). Below alpha = 1 it draws
    Gamma(alpha + 1) and multiplies by ``u ** (1 / alpha)``."""
    dt = aval(alpha).dtype
    one, third = _c(1, dt), _c(1 / 3, dt)
    boost = fnp.greater_equal(alpha, one)
    a = fnp.where(boost, alpha, fnp.add(alpha, one))
    d = fnp.subtract(a, third)
    c = fnp.divide(third, fnp.sqrt(d))

    def proposal(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k, sub = _pair(state[0])
        x = normal(sub, (), dt)
        return k, x, _fma(x, c, one)

    def rejected(state: tuple[Any, Any, Any, Any]) -> Any:
        _, x2, v3, u = state
        squeeze = fnp.greater_equal(u, fnp.subtract(one, fnp.multiply(_c(0.0331, dt), fnp.multiply(x2, x2))))
        bound = fnp.add(fnp.multiply(x2, _c(0.5, dt)), fnp.multiply(d, fnp.add(fnp.subtract(one, v3), fnp.log(v3))))
        return fnp.logical_and(squeeze, fnp.greater_equal(fnp.log(u), bound))

    def draw(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        keys = _threefry.split(state[0], (3,))
        _, x, v = _lax.while_loop(lambda s: fnp.less_equal(s[2], _c(0, dt)), proposal,
                                  (keys[1], _c(0, dt), _c(-1, dt)))
        return keys[0], fnp.multiply(x, x), fnp.multiply(fnp.multiply(v, v), v), uniform(keys[2], (), dt)

    key, sub = _pair(key)
    _, _, v3, _ = _lax.while_loop(rejected, draw, (key, _c(0, dt), one, _c(2, dt)))
    if log_space:
        log_u = fnp.negative(exponential(sub, (), dt))
        keep = fnp.logical_or(boost, fnp.equal(log_u, _c(0, dt)))
        log_boost = fnp.where(keep, _c(0, dt), fnp.multiply(log_u, fnp.divide(one, alpha)))
        return fnp.add(fnp.add(fnp.log(d), fnp.log(v3)), log_boost)
    u = fnp.subtract(one, uniform(sub, (), dt))
    factor = fnp.where(boost, one, fnp.power(u, fnp.divide(one, alpha)))
    return fnp.multiply(fnp.multiply(d, v3), factor)


def _gamma_draws(key: Any, a: Any, log_space: bool) -> Any:
    """One key per element (``split(key, a.size)``), each running its own loop."""
    shape = aval(a).shape
    size = math.prod(shape)
    if size == 0:
        return fnp.zeros(shape, aval(a).dtype)
    keys = _threefry.split(key, (size,))
    flat = vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, fnp.reshape(a, (size,)))
    return fnp.reshape(flat, shape)


def _series_dlog(a: Any, x: Any, log_x: Any, active: Any) -> Any:
    """``d log x / d a`` from the series ``P(a, x) / density = x T``, ``T = sum_n t_n``,
    ``t_0 = 1/a``, ``t_n = t_{n-1} x / (a + n)``: ``-(log x - digamma(a)) T - dT/da``."""
    eps = np.finfo(np.float64).eps

    def step(s: tuple[Any, ...]) -> tuple[Any, ...]:
        n, t, dt_da, total, dtotal, on = s
        r = fnp.add(a, n)
        t_next = fnp.multiply(t, fnp.divide(x, r))
        dt_da = fnp.where(on, fnp.subtract(fnp.multiply(dt_da, fnp.divide(x, r)), fnp.divide(t_next, r)), dt_da)
        t = fnp.where(on, t_next, t)
        total = fnp.add(total, fnp.where(on, t, 0.0))
        dtotal = fnp.add(dtotal, fnp.where(on, dt_da, 0.0))
        small = fnp.logical_and(fnp.less_equal(t, eps * total), fnp.less_equal(fnp.abs(dt_da), eps * fnp.abs(dtotal)))
        return fnp.add(n, 1.0), t, dt_da, total, dtotal, fnp.logical_and(on, fnp.logical_not(small))

    t0 = fnp.divide(1.0, a)
    dt0 = fnp.negative(fnp.multiply(t0, t0))
    init = (np.float64(1), t0, dt0, t0, dt0, active)
    _, _, _, total, dtotal, _ = _lax.while_loop(lambda s: fnp.any(s[5]), step, init)
    return fnp.subtract(fnp.negative(fnp.multiply(fnp.subtract(log_x, _lax.digamma(a)), total)), dtotal)


def _fraction_dlog(a: Any, x: Any, log_x: Any, active: Any) -> Any:
    """``d log x / d a`` from Legendre's continued fraction ``Q(a, x) / density = x F``,
    ``F = 1/(x+1-a - 1(1-a)/(x+3-a - 2(2-a)/(x+5-a - ...)))``: ``(log x - digamma(a)) F + dF/da``.
    The convergents ``A_k / B_k`` and their derivatives in ``a`` follow the same three-term
    recurrence; every step divides them all by ``|B_k|``, which leaves ``F`` and ``dF/da`` alone."""
    eps = np.finfo(np.float64).eps

    def recur(bk: Any, ak: Any, k: Any, prev: Any, cur: Any, dprev: Any, dcur: Any) -> tuple[Any, Any]:
        """``X_k = b_k X_{k-1} + a_k X_{k-2}`` and its derivative (``b_k' = -1``, ``a_k' = k - 1``)."""
        new = fnp.add(fnp.multiply(bk, cur), fnp.multiply(ak, prev))
        dnew = fnp.add(fnp.subtract(fnp.multiply(bk, dcur), cur), fnp.add(fnp.multiply(k - 1.0, prev),
                                                                         fnp.multiply(ak, dprev)))
        return new, dnew

    def step(s: tuple[Any, ...]) -> tuple[Any, ...]:
        k, num0, num1, den0, den1, dnum0, dnum1, dden0, dden1, frac, dfrac, on, it = s
        bk = fnp.subtract(fnp.add(x, 2.0 * k - 1.0), a)
        ak = fnp.negative(fnp.multiply(k - 1.0, fnp.subtract(k - 1.0, a)))
        num2, dnum2 = recur(bk, ak, k, num0, num1, dnum0, dnum1)
        den2, dden2 = recur(bk, ak, k, den0, den1, dden0, dden1)
        scale = fnp.where(fnp.equal(den2, 0.0), 1.0, fnp.abs(den2))
        scaled = [fnp.divide(v, scale) for v in (num1, num2, den1, den2, dnum1, dnum2, dden1, dden2)]
        f_new = fnp.divide(scaled[1], scaled[3])
        df_new = fnp.divide(fnp.subtract(scaled[5], fnp.multiply(f_new, scaled[7])), scaled[3])
        done = fnp.logical_and(fnp.less_equal(fnp.abs(fnp.subtract(f_new, frac)), eps * fnp.abs(f_new)),
                               fnp.less_equal(fnp.abs(fnp.subtract(df_new, dfrac)), eps * fnp.abs(df_new)))
        kept = [fnp.where(on, new, old) for new, old in zip((*scaled, f_new, df_new), s[1:11])]
        return (k + 1.0, *kept, fnp.logical_and(on, fnp.logical_not(done)), it + 1)

    b1 = fnp.subtract(fnp.add(x, 1.0), a)
    zeros = fnp.zeros_like(x)
    ones = fnp.ones_like(x)
    frac = fnp.divide(1.0, b1)
    init = (np.float64(2), zeros, ones, ones, b1, zeros, zeros, zeros, fnp.negative(ones), frac,
            fnp.multiply(frac, frac), active, np.int64(0))
    out = _lax.while_loop(lambda s: fnp.logical_and(fnp.any(s[11]), fnp.less(s[12], 2000)), step, init)
    return fnp.add(fnp.multiply(fnp.subtract(log_x, _lax.digamma(a)), out[9]), out[10])


def _gamma_dlog_da(a: Any, log_x: Any) -> Any:
    """``d log x / d a`` for a Gamma(a) sample ``x`` (given as ``log x``) with its quantile held
    fixed, in float64: the series below ``max(1, a)``, the continued fraction above."""
    a64 = fnp.asarray(a, dtype=np.float64)
    log_x = fnp.asarray(log_x, dtype=np.float64)
    x = fnp.exp(log_x)
    ok = fnp.logical_and(fnp.greater(a64, 0.0), fnp.isfinite(log_x))
    upper = fnp.logical_and(fnp.greater(x, 1.0), fnp.greater(x, a64))
    on_series = fnp.logical_and(ok, fnp.logical_not(upper))
    on_fraction = fnp.logical_and(ok, upper)
    series = _series_dlog(fnp.where(on_series, a64, 1.0), fnp.where(on_series, x, 0.5),
                          fnp.where(on_series, log_x, np.log(0.5)), on_series)
    fraction = _fraction_dlog(fnp.where(on_fraction, a64, 1.0), fnp.where(on_fraction, x, 2.0),
                              fnp.where(on_fraction, log_x, np.log(2.0)), on_fraction)
    out = fnp.where(upper, fraction, series)
    return fnp.asarray(fnp.where(ok, out, 0.0), dtype=aval(a).dtype)


def _gamma_primal(key: Any, a: Any) -> Any:
    return _gamma_draws(key, a, False)


def _loggamma_primal(key: Any, a: Any) -> Any:
    return _gamma_draws(key, a, True)


_gamma_sample = custom_jvp(_gamma_primal)
_loggamma_sample = custom_jvp(_loggamma_primal)
_gamma_cached = _jit_when_concrete(_gamma_sample)
_loggamma_cached = _jit_when_concrete(_loggamma_sample)


@_gamma_sample.defjvp
def _gamma_sample_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[Any, Any]:
    x = _gamma_primal(*primals)
    zero = fnp.equal(x, 0)
    dx_da = fnp.multiply(x, _gamma_dlog_da(primals[1], fnp.log(fnp.where(zero, fnp.ones_like(x), x))))
    return x, fnp.multiply(tangents[1], fnp.where(zero, fnp.zeros_like(x), dx_da))


@_loggamma_sample.defjvp
def _loggamma_sample_jvp(primals: tuple[Any, Any], tangents: tuple[Any, Any]) -> tuple[Any, Any]:
    log_x = _loggamma_primal(*primals)
    return log_x, fnp.multiply(tangents[1], _gamma_dlog_da(primals[1], log_x))


def _gamma_args(name: str, key: Any, a: Any, shape: Sequence[int] | None, dtype: Any) -> tuple[Any, Any]:
    key = _threefry.check_key(key, name)
    dt = _float_dtype(dtype, name)
    a = asarray(a)
    shape = _sample_shape(name, shape, a=a)
    _check_range(name, "a", a, low=0, low_open=True)
    return key, fnp.broadcast_to(fnp.asarray(a, dtype=dt), shape)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Gamma(a) samples (unit scale), by JAX's per-element Marsaglia-Tsang loop; differentiable in
    ``a`` (implicit reparameterisation). Matches JAX to a few ulp with the same key."""
    key, a = _gamma_args("gamma", key, a, shape, dtype)
    return _gamma_cached(key, a)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """``log`` of Gamma(a) samples computed in log space, accurate where ``gamma`` underflows to 0
    (small ``a``); the same draws as :func:`gamma` with the same key."""
    key, a = _gamma_args("loggamma", key, a, shape, dtype)
    return _loggamma_cached(key, a)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Beta(a, b) samples ``G_a / (G_a + G_b)`` from two log-gamma draws, scaled by their maximum so
    that small parameters do not underflow to 0/0."""
    key = _threefry.check_key(key, "beta")
    dt = _float_dtype(dtype, "beta")
    a, b = asarray(a), asarray(b)
    shape = _sample_shape("beta", shape, a=a, b=b)
    _check_range("beta", "a", a, low=0, low_open=True)
    _check_range("beta", "b", b, low=0, low_open=True)
    key_a, key_b = _pair(key)
    log_a = loggamma(key_a, fnp.broadcast_to(fnp.asarray(a, dtype=dt), shape), shape, dt)
    log_b = loggamma(key_b, fnp.broadcast_to(fnp.asarray(b, dtype=dt), shape), shape, dt)
    log_max = fnp.maximum(log_a, log_b)
    scaled_a = fnp.exp(fnp.subtract(log_a, log_max))
    scaled_b = fnp.exp(fnp.subtract(log_b, log_max))
    return fnp.divide(scaled_a, fnp.add(scaled_a, scaled_b))


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Dirichlet(alpha) samples along the last axis: the softmax of log-gamma draws. ``shape`` is
    the batch shape, to which ``alpha.shape[:-1]`` must broadcast."""
    key = _threefry.check_key(key, "dirichlet")
    dt = _float_dtype(dtype, "dirichlet")
    alpha = asarray(alpha)
    if aval(alpha).ndim < 1:
        raise ShapeError(f"random.dirichlet: alpha needs a category axis (ndim >= 1), got shape {aval(alpha).shape}")
    batch = aval(alpha).shape[:-1]
    shape = batch if shape is None else _shape(shape, "dirichlet")
    if not _broadcasts_to(shape, batch):
        raise ShapeError(f"random.dirichlet: alpha's batch shape {batch} (alpha {aval(alpha).shape} without its "
                         f"last axis) must broadcast to the shape argument {shape}")
    _check_range("dirichlet", "alpha", alpha, low=0, low_open=True)
    log_g = loggamma(key, fnp.asarray(alpha, dtype=dt), (*shape, aval(alpha).shape[-1]), dt)
    weights = fnp.exp(fnp.subtract(log_g, _lax.stop_gradient(fnp.max(log_g, axis=-1, keepdims=True))))
    return fnp.divide(weights, fnp.sum(weights, axis=-1, keepdims=True))


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Student's t samples ``z * sqrt((df/2) / G)``, ``z`` normal and ``G`` Gamma(df/2)."""
    key = _threefry.check_key(key, "t")
    dt = _float_dtype(dtype, "t")
    df = asarray(df)
    shape = _sample_shape("t", shape, df=df)
    _check_range("t", "df", df, low=0, low_open=True)
    key_n, key_g = _pair(key)
    z = normal(key_n, shape, dt)
    half_df = fnp.divide(fnp.asarray(df, dtype=dt), _c(2, dt))
    g = gamma(key_g, half_df, shape, dt)
    return fnp.multiply(z, fnp.sqrt(fnp.divide(half_df, g)))


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Chi-square samples ``2 G``, ``G`` Gamma(df/2) drawn in log space."""
    key = _threefry.check_key(key, "chisquare")
    dt = _float_dtype(dtype, "chisquare")
    df = asarray(df)
    shape = _sample_shape("chisquare", shape, df=df)
    _check_range("chisquare", "df", df, low=0, low_open=True)
    half_df = fnp.divide(fnp.asarray(df, dtype=dt), _c(2, dt))
    return fnp.multiply(fnp.exp(loggamma(key, half_df, shape, dt)), _c(2, dt))


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """F samples: the ratio of two chi-squares, each divided by its degrees of freedom."""
    key = _threefry.check_key(key, "f")
    dt = _float_dtype(dtype, "f")
    dfnum, dfden = asarray(dfnum), asarray(dfden)
    shape = _sample_shape("f", shape, dfnum=dfnum, dfden=dfden)
    _check_range("f", "dfnum", dfnum, low=0, low_open=True)
    _check_range("f", "dfden", dfden, low=0, low_open=True)
    dfnum, dfden = fnp.asarray(dfnum, dtype=dt), fnp.asarray(dfden, dtype=dt)
    key_den, key_num = _pair(key)
    num = fnp.divide(chisquare(key_num, dfnum, shape, dt), dfnum)
    den = fnp.divide(chisquare(key_den, dfden, shape, dt), dfden)
    return fnp.divide(num, den)


def generalized_normal(key: Any, p: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Samples with density proportional to ``exp(-|x|**p)``: a random sign times ``G**(1/p)``,
    ``G`` Gamma(1/p)."""
    key = _threefry.check_key(key, "generalized_normal")
    shape = _shape(shape, "generalized_normal")
    dt = _float_dtype(dtype, "generalized_normal")
    p = asarray(p)
    _check_range("generalized_normal", "p", p, low=0, low_open=True)
    inv_p = fnp.asarray(fnp.divide(1.0, p), dtype=dt)
    key_g, key_s = _pair(key)
    g = gamma(key_g, inv_p, shape, dt)
    return fnp.multiply(rademacher(key_s, shape, dt), fnp.power(g, inv_p))


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Points uniform in the unit ``p``-norm ball of dimension ``d`` (a last axis of size ``d``):
    generalized-normal coordinates divided by ``(sum |g|**p + e) ** (1/p)``, ``e`` exponential."""
    key = _threefry.check_key(key, "ball")
    shape = _shape(shape, "ball")
    dt = _float_dtype(dtype, "ball")
    if isinstance(d, Tracer) or not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0:
        raise TypeError(f"random.ball: d must be a concrete non-negative int (the dimension), got {d!r}")
    _check_range("ball", "p", asarray(p), low=0, low_open=True)
    key_g, key_e = _pair(key)
    g = generalized_normal(key_g, p, (*shape, int(d)), dt)
    e = exponential(key_e, shape, dt)
    norm = fnp.add(fnp.sum(fnp.power(fnp.abs(g), fnp.asarray(p, dtype=dt)), axis=-1), e)
    inv_p = fnp.asarray(fnp.divide(1.0, asarray(p)), dtype=dt)
    return fnp.divide(g, fnp.expand_dims(fnp.power(norm, inv_p), -1))


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.int64) -> Any:
    """Poisson(lam) counts, drawn in float32 as JAX does: Knuth's product of uniforms below
    ``lam = 10``, Hormann's transformed rejection (PTRS) from there up. Equal to JAX's with the
    same key unless a float32 ``log``/``lgamma`` rounding flips an acceptance test (rare)."""
    key = _threefry.check_key(key, "poisson")
    dt = _int_dtype(dtype, "poisson")
    lam = asarray(lam)
    shape = _sample_shape("poisson", shape, lam=lam)
    _check_range("poisson", "lam", lam, low=0)
    return _poisson_cached(key, fnp.asarray(fnp.broadcast_to(lam, shape), dtype=np.float32), dt)


def _poisson_draws(key: Any, lam: Any, dt: np.dtype) -> Any:
    shape = aval(lam).shape
    small = fnp.logical_or(fnp.isnan(lam), fnp.less(lam, np.float32(10)))
    knuth = _poisson_knuth(key, fnp.where(small, lam, np.float32(0)), shape, dt)
    ptrs = _poisson_ptrs(key, fnp.where(small, np.float32(1e5), lam), shape, dt)
    out = fnp.where(small, knuth, ptrs)
    return fnp.where(fnp.equal(lam, np.float32(0)), fnp.zeros_like(out), out)


_poisson_cached = _jit_when_concrete(_poisson_draws, static_argnums=(2,))


def _poisson_knuth(key: Any, lam: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    """Count the uniforms whose running product stays above ``exp(-lam)`` (in logs)."""
    def going(s: tuple[Any, Any, Any]) -> Any:
        return fnp.any(fnp.greater(s[2], fnp.negative(lam)))

    def step(s: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        count, key, log_prod = s
        key, sub = _pair(key)
        count = fnp.where(fnp.greater(log_prod, fnp.negative(lam)), fnp.add(count, _c(1, dt)), count)
        return count, key, fnp.add(log_prod, fnp.log(uniform(sub, shape, np.float32)))

    init = (fnp.zeros(shape, dt), key, fnp.zeros(shape, np.float32))
    return fnp.subtract(_lax.while_loop(going, step, init)[0], _c(1, dt))


def _poisson_ptrs(key: Any, lam: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    """Hormann (1993): ``k = floor((2a/us + b) u + lam + 0.43)`` from two uniforms, accepted by a
    squeeze or by comparing the log hat with ``log P(k)``. As JAX, every lane redraws until all
    have accepted once, and a later acceptance replaces an earlier one."""
    f32 = np.float32
    log_lam = fnp.log(lam)
    b = fnp.add(f32(0.931), fnp.multiply(f32(2.53), fnp.sqrt(lam)))
    a = fnp.add(f32(-0.059), fnp.multiply(f32(0.02483), b))
    inv_alpha = fnp.add(f32(1.1239), fnp.divide(f32(1.1328), fnp.subtract(b, f32(3.4))))
    v_r = fnp.subtract(f32(0.9277), fnp.divide(f32(3.6224), fnp.subtract(b, f32(2))))

    def step(s: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k_out, accepted, key = s
        keys = _threefry.split(key, (3,))
        u = fnp.subtract(uniform(keys[1], shape, f32), f32(0.5))
        v = uniform(keys[2], shape, f32)
        us = fnp.subtract(f32(0.5), fnp.abs(u))
        k = fnp.floor(fnp.add(fnp.add(fnp.multiply(fnp.add(fnp.divide(fnp.multiply(f32(2), a), us), b), u), lam),
                              f32(0.43)))
        hat = fnp.log(fnp.divide(fnp.multiply(v, inv_alpha), fnp.add(fnp.divide(a, fnp.multiply(us, us)), b)))
        target = fnp.subtract(_fma(k, log_lam, fnp.negative(lam)),
                              _lax.lgamma(fnp.add(k, f32(1))))
        squeeze = fnp.logical_and(fnp.greater_equal(us, f32(0.07)), fnp.less_equal(v, v_r))
        reject = fnp.logical_or(fnp.less(k, f32(0)),
                                fnp.logical_and(fnp.less(us, f32(0.013)), fnp.greater(v, us)))
        accept = fnp.logical_or(squeeze, fnp.logical_and(fnp.logical_not(reject), fnp.less_equal(hat, target)))
        return fnp.where(accept, k, k_out), fnp.logical_or(accepted, accept), keys[0]

    init = (fnp.full(shape, -1, np.float32), fnp.zeros(shape, np.bool_), key)
    out = _lax.while_loop(lambda s: fnp.any(fnp.logical_not(s[1])), step, init)
    return fnp.asarray(out[0], dtype=dt)


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Binomial(n, p) counts as floats, as JAX draws them (in ``p``'s float dtype): with
    ``q = min(p, 1 - p)``, summed geometric waiting times while ``n q <= 10``, Hormann's BTRS
    rejection above; for ``p > 1/2`` the count of failures is drawn and subtracted from ``n``.
    ``n`` is floored; infinite ``n`` gives inf. Equal to JAX's draws with the same key unless a
    ``log`` rounding flips an acceptance test (rare). BTRS keeps JAX's Stirling-correction table,
    including JAX's evaluation of the k > 9 tail at k = 9."""
    key = _threefry.check_key(key, "binomial")
    dt = _float_dtype(dtype, "binomial")
    n, p = asarray(n), asarray(p)
    shape = _sample_shape("binomial", shape, n=n, p=p)
    _check_range("binomial", "n", n, low=0)
    _check_range("binomial", "p", p, low=0, high=1)
    if not dtypes.is_float(aval(p).dtype):
        p = fnp.asarray(p, dtype=np.float64)
    count = fnp.broadcast_to(fnp.asarray(n, dtype=aval(p).dtype), shape)
    return _binomial_cached(key, count, fnp.broadcast_to(p, shape), dt)


def _binomial_draws(key: Any, count: Any, p: Any, dt: np.dtype) -> Any:
    shape = aval(p).shape
    pt = aval(p).dtype
    below_half = fnp.less(p, _c(0.5, pt))
    q = fnp.where(below_half, p, fnp.subtract(_c(1, pt), p))
    bad_count = fnp.logical_or(fnp.isnan(count), fnp.less(count, _c(0, pt)))
    inf_count = fnp.isinf(count)
    bad_q = fnp.logical_or(fnp.isnan(q), fnp.less(q, _c(0, pt)))
    q = fnp.where(bad_q, _c(0.01, pt), q)
    inversion = fnp.logical_or(bad_count, fnp.less_equal(fnp.multiply(count, q), _c(10, pt)))
    count = fnp.floor(count)
    by_inversion = _binomial_inversion(key, fnp.where(inversion, count, _c(0, pt)), q, shape)
    by_btrs = _btrs(key, fnp.where(inversion, _c(1e4, pt), count), fnp.where(inversion, _c(0.5, pt), q), shape)
    samples = fnp.asarray(fnp.where(inversion, by_inversion, by_btrs), dtype=dt)
    invalid = fnp.logical_or(bad_q, bad_count)
    samples = fnp.where(invalid, _c(np.nan, dt), samples)
    samples = fnp.where(fnp.logical_and(inf_count, fnp.logical_not(invalid)), _c(np.inf, dt), samples)
    direct = fnp.logical_or(fnp.logical_or(below_half, bad_count), fnp.logical_or(bad_q, inf_count))
    return fnp.where(direct, samples, fnp.subtract(fnp.asarray(count, dtype=dt), samples))


_binomial_cached = _jit_when_concrete(_binomial_draws, static_argnums=(3,))


def _binomial_inversion(key: Any, count: Any, q: Any, shape: tuple[int, ...]) -> Any:
    """The number of geometric(q) waiting times whose sum stays within ``count`` (for q = 0 the
    first wait is infinite: no successes)."""
    pt = aval(q).dtype
    never = fnp.equal(q, _c(0, pt))
    log1m_q = fnp.log1p(fnp.negative(fnp.where(never, _c(0.5, pt), q)))

    def step(s: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        num, total, key = s
        keys = _threefry.split(key, (2,))
        num = fnp.where(fnp.less_equal(total, count), fnp.add(num, _c(1, pt)), num)
        wait = fnp.where(never, _c(np.inf, pt), fnp.ceil(fnp.divide(fnp.log(uniform(keys[0], shape, pt)), log1m_q)))
        return num, fnp.add(total, wait), keys[1]

    init = (fnp.zeros(shape, pt), fnp.zeros(shape, pt), key)
    out = _lax.while_loop(lambda s: fnp.any(fnp.less_equal(s[1], count)), step, init)
    return fnp.subtract(out[0], _c(1, pt))


# What Stirling's formula leaves of log k!, log k! - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2), for
# k = 0..9: JAX's table.
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: Any) -> Any:
    """The table below 10; above, the series ``(1/12 - (1/360 - 1/1260/m^2)/m^2)/m`` at
    ``m = min(k, 9) + 1`` (JAX clamps before evaluating it)."""
    pt = aval(k).dtype
    clamped = fnp.clip(k, _c(0, pt), _c(9, pt))
    m2 = fnp.multiply(fnp.add(clamped, _c(1, pt)), fnp.add(clamped, _c(1, pt)))
    inner = fnp.subtract(_c(1 / 360, pt), fnp.divide(_c(1 / 1260, pt), m2))
    series = fnp.divide(fnp.subtract(_c(1 / 12, pt), fnp.divide(inner, m2)), fnp.add(clamped, _c(1, pt)))
    table = fnp.take(np.asarray(_STIRLING_TAIL, pt), fnp.asarray(fnp.floor(clamped), dtype=np.int64), mode="clip")
    return fnp.where(fnp.less_equal(k, _c(9, pt)), table, series)


def _btrs(key: Any, count: Any, q: Any, shape: tuple[int, ...]) -> Any:
    """Hormann's BTRS (1993): transformed rejection with a Stirling-corrected log-ratio bound."""
    pt = aval(q).dtype
    one, half = _c(1, pt), _c(0.5, pt)
    stddev = fnp.sqrt(fnp.multiply(fnp.multiply(count, q), fnp.subtract(one, q)))
    b = fnp.add(_c(1.15, pt), fnp.multiply(_c(2.53, pt), stddev))
    a = fnp.add(fnp.add(_c(-0.0873, pt), fnp.multiply(_c(0.0248, pt), b)), fnp.multiply(_c(0.01, pt), q))
    c = fnp.add(fnp.multiply(count, q), half)
    v_r = fnp.subtract(_c(0.92, pt), fnp.divide(_c(4.2, pt), b))
    r = fnp.divide(q, fnp.subtract(one, q))
    alpha = fnp.multiply(fnp.add(_c(2.83, pt), fnp.divide(_c(5.1, pt), b)), stddev)
    m = fnp.floor(fnp.multiply(fnp.add(count, one), q))
    n_m1 = fnp.add(fnp.subtract(count, m), one)
    m_term = fnp.multiply(fnp.add(m, half), fnp.log(fnp.divide(fnp.add(m, one), fnp.multiply(r, n_m1))))
    m_tails = (_stirling_tail(m), _stirling_tail(fnp.subtract(count, m)))

    def step(s: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k_out, accepted, key = s
        keys = _threefry.split(key, (3,))
        u = fnp.subtract(uniform(keys[1], shape, pt), half)
        v = uniform(keys[2], shape, pt)
        us = fnp.subtract(half, fnp.abs(u))
        squeeze = fnp.logical_and(fnp.greater_equal(us, _c(0.07, pt)), fnp.less_equal(v, v_r))
        k = fnp.floor(fnp.add(fnp.multiply(fnp.add(fnp.divide(fnp.multiply(_c(2, pt), a), us), b), u), c))
        reject = fnp.logical_or(fnp.less(k, _c(0, pt)), fnp.greater(k, count))
        log_v = fnp.log(fnp.divide(fnp.multiply(v, alpha), fnp.add(fnp.divide(a, fnp.multiply(us, us)), b)))
        n_k1 = fnp.add(fnp.subtract(count, k), one)
        bound = fnp.add(m_term, fnp.multiply(fnp.add(count, one), fnp.log(fnp.divide(n_m1, n_k1))))
        bound = fnp.add(bound, fnp.multiply(fnp.add(k, half), fnp.log(fnp.divide(fnp.multiply(r, n_k1),
                                                                                 fnp.add(k, one)))))
        bound = fnp.add(fnp.add(bound, m_tails[0]), m_tails[1])
        bound = fnp.subtract(fnp.subtract(bound, _stirling_tail(k)), _stirling_tail(fnp.subtract(count, k)))
        accept = fnp.logical_or(squeeze, fnp.logical_and(fnp.logical_not(reject), fnp.less_equal(log_v, bound)))
        return fnp.where(accept, k, k_out), fnp.logical_or(accepted, accept), keys[0]

    init = (fnp.full(shape, -1, pt), fnp.zeros(shape, np.bool_), key)
    return _lax.while_loop(lambda s: fnp.any(fnp.logical_not(s[1])), step, init)[0]


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64,
                unroll: int | bool = 1) -> Any:
    """Multinomial(n, p) counts along the last axis, one binomial per category on what the
    earlier ones left (``p`` renormalized over the remaining categories). ``shape`` is the whole
    output shape, ending with the category axis (as JAX computes it; its docstring calls it the
    batch shape); ``unroll`` is accepted for JAX's signature and has no effect here."""
    key = _threefry.check_key(key, "multinomial")
    dt = _float_dtype(dtype, "multinomial")
    n, p = asarray(n), asarray(p)
    if aval(p).ndim < 1:
        raise ShapeError(f"random.multinomial: p needs a category axis (ndim >= 1), got shape {aval(p).shape}")
    _check_range("multinomial", "n", n, low=0)
    _check_range("multinomial", "p", p, low=0)
    shape = aval(p).shape if shape is None else _shape(shape, "multinomial")
    if not shape or not _broadcasts_to(shape, aval(p).shape) or not _broadcasts_to(shape[:-1], aval(n).shape):
        raise ShapeError(f"random.multinomial: p {aval(p).shape} must broadcast to the shape argument {shape} and n "
                         f"{aval(n).shape} to its batch part {shape[:-1]}")
    pt = np.result_type(dtypes.canonicalize(aval(n).dtype) if dtypes.is_float(aval(n).dtype) else np.float64,
                        aval(p).dtype if dtypes.is_float(aval(p).dtype) else np.float64)
    remainder = fnp.broadcast_to(fnp.asarray(n, dtype=pt), shape[:-1])
    return _multinomial_cached(key, remainder, fnp.broadcast_to(fnp.asarray(p, dtype=pt), shape), dt)


def _multinomial_draws(key: Any, remainder: Any, p: Any, dt: np.dtype) -> Any:
    pt = aval(p).dtype
    probs = fnp.moveaxis(p, -1, 0)
    rest = _lax.cumsum(probs, 0, reverse=True)
    ratios = fnp.divide(probs, fnp.where(fnp.equal(rest, _c(0, pt)), _c(1, pt), rest))

    def category(left: Any, ratio_key: tuple[Any, Any]) -> tuple[Any, Any]:
        ratio, k = ratio_key
        drawn = binomial(k, left, fnp.clip(ratio, _c(0, pt), _c(1, pt)), dtype=pt)
        return fnp.subtract(left, drawn), drawn

    _, counts = _lax.scan(category, remainder, (ratios, _threefry.split(key, aval(probs).shape[:1])))
    return fnp.asarray(fnp.moveaxis(counts, 0, -1), dtype=dt)


_multinomial_cached = _jit_when_concrete(_multinomial_draws, static_argnums=(3,))


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None, dtype: Any = None,
                        method: str = "cholesky") -> Any:
    """Normal vectors ``mean + F z`` with ``F F^T = cov``: ``F`` the Cholesky factor, or from the
    eigendecomposition (``eigh``) or SVD (``svd``) for singular covariances. ``shape`` is the batch
    shape; the default ``dtype`` is that of ``mean`` and ``cov`` promoted to a float."""
    key = _threefry.check_key(key, "multivariate_normal")
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"random.multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', got {method!r}")
    mean, cov = asarray(mean), asarray(cov)
    pt = np.result_type(*(a.dtype if dtypes.is_inexact(a.dtype) else np.float64 for a in (aval(mean), aval(cov))))
    mean, cov = fnp.asarray(mean, dtype=pt), fnp.asarray(cov, dtype=pt)
    dt = _float_dtype(pt if dtype is None else dtype, "multivariate_normal")
    ms, cs = aval(mean).shape, aval(cov).shape
    if len(ms) < 1 or len(cs) < 2 or cs[-2:] != (ms[-1], ms[-1]):
        raise ShapeError(f"random.multivariate_normal: need mean (..., n) and cov (..., n, n), got mean {ms} and "
                         f"cov {cs}")
    if shape is None:
        shape = _broadcast_batch(ms[:-1], cs[:-2])
    else:
        shape = _shape(shape, "multivariate_normal")
        if not _broadcasts_to(shape, ms[:-1], cs[:-2]):
            raise ShapeError(f"random.multivariate_normal: the batch shapes of mean {ms[:-1]} and cov {cs[:-2]} must "
                             f"broadcast to the shape argument {shape}")
    if method == "svd":
        u, s, _ = fnp.linalg.svd(cov)
        factor = fnp.multiply(u, fnp.expand_dims(fnp.sqrt(s), -2))
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = fnp.multiply(v, fnp.expand_dims(fnp.sqrt(w), -2))
    else:
        factor = fnp.linalg.cholesky(cov)
    z = normal(key, (*shape, ms[-1]), dt)
    return fnp.add(mean, fnp.einsum("...ij,...j->...i", factor, z))


def _broadcast_batch(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"random.multivariate_normal: batch shapes {shapes} do not broadcast together") from None


def orthogonal(key: Any, n: int, shape: Sequence[int] = (), dtype: Any = dtypes.float64, m: int | None = None) -> Any:
    """Uniformly random (Haar) ``n x m`` matrices (``m = n`` by default), unitary for complex
    dtypes, with orthonormal rows or columns, whichever are fewer (Mezzadri 2007): Q of the QR of
    a normal draw, each column multiplied by the sign (phase) of R's diagonal entry."""
    key = _threefry.check_key(key, "orthogonal")
    shape = _shape(shape, "orthogonal")
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_inexact(dt):
        raise TypeError(f"random.orthogonal: dtype must be a float or complex dtype, got {dt}")
    rows = _dimension(n, "n")
    cols = rows if m is None else _dimension(m, "m")
    if rows == 0 or cols == 0:
        return fnp.zeros((*shape, rows, cols), dt)
    z = normal(key, (*shape, max(rows, cols), min(rows, cols)), dt)
    q, r = fnp.linalg.qr(z)
    q = fnp.multiply(q, fnp.expand_dims(fnp.sign(fnp.diagonal(r, axis1=-2, axis2=-1)), -2))
    return fnp.swapaxes(q, -1, -2) if rows < cols else q


def _dimension(v: Any, arg: str) -> int:
    if isinstance(v, Tracer) or not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
        raise TypeError(f"random.orthogonal: {arg} must be a concrete non-negative int, got {v!r}")
    return int(v)


def _int_dtype(dtype: Any, name: str) -> np.dtype:
    dt = dtypes.canonicalize(dtype)
    if dt.kind != "i":
        raise TypeError(f"random.{name}: dtype must be int32 or int64, got {dt}")
    return dt
