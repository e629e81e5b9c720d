"""``fungraph.random``'s keys and the samplers that transform uniform bits in closed form
(``uniform``, ``normal``, ``randint``, ``permutation``, ``choice``, ``gumbel``, ...): the module
docstring of :mod:`fungraph.random` says which match JAX bit for bit. Written in 64-bit words;
``fungraph.random`` wraps each for JAX's 32-bit mode."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import _threefry, dtypes
from fungraph import lax as _lax
from fungraph import numpy as fnp
from fungraph._key_array import KeyArray
from fungraph._random_args import (
    _as_int64,
    _axis,
    _broadcast,
    _broadcasts_to,
    _check_param_shapes,
    _check_range,
    _float_dtype,
    _key_array,
    _param_args,
    _plain_args,
    _sample_shape,
    _shape,
)
from fungraph._random_arith import _erf_inv, _fma, _next_toward, _offset32, _offset64, _word64
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, aval
from fungraph.primitives.callback import stop_gradient

_UNSIGNED = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


class _CallerMode(threading.local):
    """The default int and float of the mode a public sampler was called in (the samplers run in
    x64; ``fungraph.random`` sets them): what a Python constant inside a sampler is in JAX, e.g.
    ``choice``'s index draw (``randint``'s default int) and ``rademacher``'s ``bernoulli(key, 0.5)``."""

    int_dtype = dtypes.int64
    float_dtype = dtypes.float64


CALLER_MODE = _CallerMode()


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:  # noqa: N802  (jax.random's name)
    """The raw key of an integer seed: ``[seed >> 32, seed & 0xFFFFFFFF]`` as uint32, as JAX's."""
    _impl(impl, "PRNGKey")
    return _threefry.seed_key(seed, "PRNGKey")


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed key of shape () and dtype ``key<fry>`` over the words of ``PRNGKey(seed)``, as JAX's."""
    return KeyArray(_threefry.seed_key(seed, "key"), _impl(_spec(impl, dtype, "key"), "key"))


def _spec(impl: Any, dtype: Any, name: str) -> Any:
    """The one of ``impl`` and a key ``dtype`` that was given (JAX takes either)."""
    if impl is not None and dtype is not None:
        raise ValueError(f"random.{name}: give impl or dtype, not both")
    return impl if dtype is None else dtype


_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32", "threefry4x32")


def _impl(impl: Any, name: str) -> dtypes.KeyDType:
    """The key dtype of an ``impl`` argument: only threefry2x32 (JAX's default) is implemented."""
    if impl is None or impl == "threefry2x32" or impl == dtypes.THREEFRY_KEY:
        return dtypes.THREEFRY_KEY
    if impl in _IMPLS:
        raise ValueError(f"random.{name}: fungraph implements only threefry2x32 keys, not {impl!r}")
    known = ", ".join(f'"{i}"' for i in _IMPLS)
    raise ValueError(f'random.{name}: unrecognized PRNG implementation "{impl}". Did you mean one of: {known}?')


def _like(key: Any, words: Any) -> Any:
    """``words`` as keys of ``key``'s kind: typed if ``key`` is, else raw."""
    return KeyArray(words, key.dtype) if isinstance(key, KeyArray) else words


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (a shape if a tuple), stacked on a leading axis."""
    shape = _shape(num if isinstance(num, Sequence) else (num,), "split")
    return _like(key, _threefry.split(key, shape))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and an integer (taken modulo 2**32, as JAX's uint32 conversion)."""
    return _like(key, _threefry.fold_in(key, data))


def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits of an unsigned dtype, the caller's mode's default unsigned integer
    (uint64 with x64, else uint32) unless given, as JAX's: a 64-bit value is the two hash words
    ``w0 << 32 | w1``, a narrower one the low bits of ``w0 ^ w1``."""
    shape = _shape(shape, "bits")
    default = dtypes.uint64 if CALLER_MODE.int_dtype == dtypes.int64 else dtypes.uint32
    dt = default if dtype is None else np.dtype(dtype)
    if dt not in _UNSIGNED:
        raise TypeError(f"random.bits: dtype is an unsigned integer dtype (uint8, uint16, uint32 or uint64), got {dt}")
    if dt.itemsize == 8:
        return fnp.asarray(_word64(_words64(key, shape)), dtype=dt)
    return fnp.asarray(_low_bits(_threefry.bits32(key, shape, "bits"), dt.itemsize * 8), dtype=dt)


def _low_bits(words: Any, nbits: int) -> Any:
    return fnp.bitwise_and(words, np.int64(2**nbits - 1))


def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64, minval: Any = 0.0,
            maxval: Any = 1.0) -> Any:
    """Uniform floats in [minval, maxval): the top mantissa bits of random words scaled into [0, 1),
    then ``max(minval, u * (maxval - minval) + minval)`` with JAX's fused multiply-add."""
    shape = _shape(shape, "uniform")
    dt = _float_dtype(dtype, "uniform")
    lo = fnp.asarray(minval, dtype=dt)
    hi = fnp.asarray(maxval, dtype=dt)
    _check_param_shapes("uniform", shape, minval=lo, maxval=hi)
    unit = _unit_floats(key, shape, dt, "uniform")
    return fnp.maximum(lo, _fma(unit, fnp.subtract(hi, lo), lo))


def normal(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard normal samples ``sqrt(2) * erfinv(u)``, ``u`` uniform in (-1, 1); complex dtypes
    take real and imaginary parts from two split keys, scaled by ``1 / sqrt(2)``."""
    key = _threefry.check_key(key, "normal")
    shape = _shape(shape, "normal")
    dt = dtypes.canonicalize(dtype)
    if dtypes.is_complex(dt):
        real = dtypes.real_for(dt)
        k_re, k_im = _pair(key)
        parts = [fnp.asarray(_normal_real(k, shape, real), dtype=dt) for k in (k_re, k_im)]
        return fnp.divide(fnp.add(parts[0], fnp.multiply(parts[1], np.asarray(1j, dt))), np.asarray(np.sqrt(2), dt))
    return _normal_real(key, shape, _float_dtype(dt, "normal"))


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = dtypes.float64) -> Any:
    """Standard normal samples conditioned on (lower, upper), by inverting erf on a uniform draw."""
    key = _threefry.check_key(key, "truncated_normal")
    dt = _float_dtype(dtype, "truncated_normal")
    lower = fnp.asarray(lower, dtype=dt)
    upper = fnp.asarray(upper, dtype=dt)
    bounds = np.broadcast_shapes(aval(lower).shape, aval(upper).shape)
    shape = bounds if shape is None else _shape(shape, "truncated_normal")
    _check_param_shapes("truncated_normal", shape, lower=lower, upper=upper)
    sqrt2 = np.asarray(np.sqrt(2), dt)
    a = _lax.erf(fnp.divide(lower, sqrt2))
    b = _lax.erf(fnp.divide(upper, sqrt2))
    out = fnp.multiply(sqrt2, _erf_inv(uniform(key, shape, dt, a, b)))
    return fnp.clip(out, _next_toward(stop_gradient(lower), 1), _next_toward(stop_gradient(upper), -1))


def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> Any:
    """Booleans that are True with probability ``p``: ``uniform(key, shape, p.dtype) < p``."""
    key = _threefry.check_key(key, "bernoulli")
    p = asarray(p)
    if not dtypes.is_float(aval(p).dtype):
        raise TypeError(f"random.bernoulli: p must have a float dtype, got {aval(p).dtype}")
    shape = aval(p).shape if shape is None else _shape(shape, "bernoulli")
    _check_param_shapes("bernoulli", shape, p=p)
    return fnp.less(uniform(key, shape, aval(p).dtype), p)


def randint(key: Any, shape: Sequence[int], minval: Any, maxval: Any, dtype: Any = dtypes.int64) -> Any:
    """Integers in [minval, maxval) as JAX draws them, for every integer dtype: two draws of the
    dtype's width per value (8- and 16-bit dtypes are drawn as int32 in their range, then cast,
    as JAX does), combined modulo the span in wrapping unsigned arithmetic."""
    key = _threefry.check_key(key, "randint")
    shape = _shape(shape, "randint")
    dt = dtypes.canonicalize(dtype)
    if dt.kind not in "iu":
        raise TypeError(f"random.randint: dtype must be an integer dtype, got {dt}")
    lo, hi = (_as_int64(v, "randint", name) for v, name in ((minval, "minval"), (maxval, "maxval")))
    _check_param_shapes("randint", shape, minval=lo, maxval=hi)
    if dt.itemsize < 4:
        info = np.iinfo(dt)
        lo = fnp.clip(_wrap32(lo), np.int64(info.min), np.int64(info.max))
        hi = fnp.clip(_wrap32(hi), np.int64(info.min), np.int64(info.max) + 1)
        return fnp.asarray(_randint_values(key, shape, lo, hi, dtypes.int32), dtype=dt)
    return fnp.asarray(_randint_values(key, shape, lo, hi, dt), dtype=dt)


def _wrap32(v: Any) -> Any:
    """int64 values wrapped to int32's range (numpy's and JAX's ``astype(int32)``)."""
    return fnp.subtract(fnp.bitwise_and(fnp.add(v, np.int64(2**31)), _threefry.MASK32), np.int64(2**31))


def _randint_values(key: Any, shape: tuple[int, ...], lo: Any, hi: Any, dt: np.dtype) -> Any:
    """JAX's ``_randint`` for a 32- or 64-bit ``dt``, as int64 values."""
    info = np.iinfo(dt)
    top = np.int64(min(info.max, np.iinfo(np.int64).max))
    out_of_range = fnp.greater(hi, top)
    lo = fnp.clip(lo, np.int64(info.min), top)
    hi = fnp.clip(hi, np.int64(info.min), top)
    span = fnp.where(fnp.less_equal(hi, lo), np.int64(1), fnp.subtract(hi, lo))
    span = fnp.where(fnp.logical_and(out_of_range, fnp.greater(hi, lo)), fnp.add(span, np.int64(1)), span)
    k1, k2 = _pair(key)
    if dt.itemsize == 4:
        span = fnp.bitwise_and(span, _threefry.MASK32)
        offset = _offset32(_threefry.bits32(k1, shape, "randint"), _threefry.bits32(k2, shape, "randint"), span)
    else:
        offset = _offset64(_words64(k1, shape), _words64(k2, shape), span)
    return fnp.add(lo, offset)


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A shuffled copy of ``x`` along ``axis`` (or of ``arange(x)`` for an integer), by sorting on
    random words as JAX does; ``independent`` shuffles each slice along ``axis`` separately."""
    key = _threefry.check_key(key, "permutation")
    if isinstance(x, Tracer) and aval(x).shape == ():
        raise TypeError("random.permutation: an integer x must be concrete (it sets the output length)")
    arr = asarray(x)
    if aval(arr).shape == ():
        if aval(arr).dtype.kind not in "iu":
            raise TypeError(f"random.permutation: x must be an integer or an array, got {aval(arr)}")
        return _shuffle(key, fnp.arange(int(arr), dtype=np.int64), 0)
    axis = _axis(axis, aval(arr).ndim, "permutation")
    if independent or aval(arr).ndim == 1:
        return _shuffle(key, arr, axis)
    order = _shuffle(key, fnp.arange(aval(arr).shape[axis], dtype=np.int64), 0)
    return fnp.take(arr, order, axis=axis)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0) -> Any:
    """Samples of ``a`` (or of ``arange(a)``) along ``axis``: uniform ``randint`` indices, inverse-CDF
    search with ``p``, a permutation prefix without replacement, Gumbel top-k for both."""
    key = _threefry.check_key(key, "choice")
    if not isinstance(shape, Sequence):
        raise TypeError(f"random.choice: shape must be a sequence of ints, got {shape!r}")
    shape = _shape(shape, "choice")
    arr = asarray(a)
    scalar = aval(arr).shape == ()
    if scalar:
        if isinstance(a, Tracer):
            raise TypeError("random.choice: an integer a must be concrete (it sets the population)")
        n_inputs = int(arr)
    else:
        axis = _axis(axis, aval(arr).ndim, "choice")
        n_inputs = aval(arr).shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return fnp.zeros(shape, aval(arr).dtype)
    if n_inputs <= 0:
        raise ValueError(f"random.choice: the population is empty (a = {a if scalar else aval(arr)})")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"random.choice: cannot take {n_draws} samples (shape {shape}) without replacement "
                         f"from a population of {n_inputs}")
    if p is None and not replace:
        prefix = (slice(None),) * (0 if scalar else axis) + (slice(n_draws),)
        return fnp.reshape(permutation(key, n_inputs if scalar else arr, axis)[prefix],
                           _choice_shape(arr, shape, axis, scalar))
    if p is None:
        ind = randint(key, shape, 0, n_inputs, dtype=CALLER_MODE.int_dtype)
    else:
        ind = _choice_index(key, p, shape, n_inputs, n_draws, replace)
    out = ind if scalar else fnp.take(arr, ind, axis=axis)
    return fnp.reshape(out, _choice_shape(arr, shape, axis, scalar))


def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard Gumbel samples ``-log(-log(u))``, ``u`` uniform in [tiny, 1) (JAX's ``mode="low"``)."""
    key = _threefry.check_key(key, "gumbel")
    shape = _shape(shape, "gumbel")
    dt = _float_dtype(dtype, "gumbel")
    u = uniform(key, shape, dt, dtypes.finfo(dt).tiny, 1.0)
    return fnp.negative(fnp.log(fnp.negative(fnp.log(u))))


def exponential(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard exponential samples ``-log1p(-u)``, ``u`` uniform in [0, 1)."""
    key = _threefry.check_key(key, "exponential")
    shape = _shape(shape, "exponential")
    dt = _float_dtype(dtype, "exponential")
    return fnp.negative(fnp.log1p(fnp.negative(uniform(key, shape, dt))))


def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None,
                replace: bool = True) -> Any:
    """Indices drawn with probabilities ``softmax(logits, axis)``: the Gumbel-max trick, or Gumbel
    top-k without replacement, as JAX."""
    key = _threefry.check_key(key, "categorical")
    logits = asarray(logits)
    la = aval(logits)
    if not dtypes.is_float(la.dtype):
        raise TypeError(f"random.categorical: logits must have a float dtype, got {la.dtype}")
    axis = _axis(axis, la.ndim, "categorical")
    batch = la.shape[:axis] + la.shape[axis + 1:]
    shape = batch if shape is None else _shape(shape, "categorical")
    if not _broadcasts_to(shape, batch):
        raise ShapeError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch} "
                         f"(logits {la.shape} without axis {axis})")
    prefix = shape[:len(shape) - len(batch)]
    if replace:
        sample = prefix + shape[len(prefix):len(prefix) + axis] + la.shape[axis:axis + 1] + shape[len(prefix) + axis:]
        return fnp.argmax(fnp.add(gumbel(key, sample, la.dtype), logits), axis=len(prefix) + axis)
    k = math.prod(prefix)
    if k > la.shape[axis]:
        raise ValueError(f"random.categorical: {k} samples without replacement exceed the {la.shape[axis]} "
                         f"categories along axis {axis}")
    scores = fnp.moveaxis(fnp.add(logits, gumbel(key, la.shape, la.dtype)), axis, -1)
    _, idx = _lax.top_k(scores, k)
    return fnp.reshape(fnp.moveaxis(idx, -1, 0), shape)


def laplace(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard Laplace samples ``sign(u) * log1p(-|u|)``, ``u`` uniform in (-1, 1)."""
    key, shape, dt = _plain_args("laplace", key, shape, dtype)
    u = uniform(key, shape, dt, -1.0 + dtypes.finfo(dt).epsneg, 1.0)
    return fnp.multiply(fnp.sign(u), fnp.log1p(fnp.negative(fnp.abs(u))))


def logistic(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard logistic samples ``log(u) - log1p(-u)``, ``u`` uniform in [tiny, 1)."""
    key, shape, dt = _plain_args("logistic", key, shape, dtype)
    u = uniform(key, shape, dt, dtypes.finfo(dt).tiny, 1.0)
    return fnp.subtract(fnp.log(u), fnp.log1p(fnp.negative(u)))


def cauchy(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard Cauchy samples ``tan(pi * (u - 1/2))``, ``u`` uniform in [eps, 1)."""
    key, shape, dt = _plain_args("cauchy", key, shape, dtype)
    u = uniform(key, shape, dt, dtypes.finfo(dt).eps, 1.0)
    return fnp.tan(fnp.multiply(np.asarray(np.pi, dt), fnp.subtract(u, np.asarray(0.5, dt))))


def rademacher(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.int64) -> Any:
    """-1 or +1 with equal probability: ``2 * bernoulli(key, 0.5) - 1`` in ``dtype``."""
    key = _threefry.check_key(key, "rademacher")
    shape = _shape(shape, "rademacher")
    dt = dtypes.canonicalize(dtype)
    b = fnp.asarray(bernoulli(key, np.asarray(0.5, CALLER_MODE.float_dtype), shape), dtype=dt)
    return fnp.subtract(fnp.multiply(np.asarray(2, dt), b), np.asarray(1, dt))


def maxwell(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Maxwell samples: the length of a standard normal vector in three dimensions."""
    key, shape, dt = _plain_args("maxwell", key, shape, dtype)
    z = normal(key, (*shape, 3), dt)
    return fnp.sqrt(fnp.sum(fnp.multiply(z, z), axis=-1))


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] = (),
                         dtype: Any = dtypes.float64) -> Any:
    """``loc + scale * s * m``, ``m`` Maxwell and ``s`` a random sign, of shape ``shape`` followed
    by the parameters' broadcast shape. (JAX repeats that shape when ``shape`` is empty, giving
    ``(3, 3)`` for parameters of shape ``(3,)``; here the result then has the parameters' shape.)"""
    key, shape, dt = _plain_args("double_sided_maxwell", key, shape, dtype)
    loc, scale = (fnp.asarray(v, dtype=dt) for v in (loc, scale))
    _check_range("double_sided_maxwell", "scale", scale, low=0)
    out_shape = shape + _broadcast("double_sided_maxwell", loc=aval(loc).shape, scale=aval(scale).shape)
    key_m, key_s = _pair(key)
    draws = fnp.multiply(rademacher(key_s, out_shape, dt), maxwell(key_m, out_shape, dt))
    return fnp.add(fnp.multiply(draws, scale), loc)


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] = (),
                dtype: Any = dtypes.float64) -> Any:
    """Weibull samples by the inverse CDF, ``scale * (-log1p(-u)) ** (1 / concentration)``; the
    result has the broadcast shape of ``shape`` and the parameters, as in JAX."""
    key, shape, dt = _plain_args("weibull_min", key, shape, dtype)
    scale, concentration = asarray(scale), asarray(concentration)
    _check_range("weibull_min", "scale", scale, low=0, low_open=True)
    _check_range("weibull_min", "concentration", concentration, low=0, low_open=True)
    _broadcast("weibull_min", shape=shape, scale=aval(scale).shape, concentration=aval(concentration).shape)
    power = fnp.asarray(fnp.divide(1.0, concentration), dtype=dt)
    u = uniform(key, shape, dt)
    return fnp.multiply(fnp.power(fnp.negative(fnp.log1p(fnp.negative(u))), power), fnp.asarray(scale, dtype=dt))


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Pareto samples with shape parameter ``b`` (support [1, inf)): ``exp(e / b)``, ``e`` exponential."""
    key, dt, (b,) = _param_args("pareto", key, dtype, b=b)
    shape = _sample_shape("pareto", shape, b=b)
    _check_range("pareto", "b", b, low=0, low_open=True)
    return fnp.exp(fnp.divide(exponential(key, shape, dt), b))


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Rayleigh samples ``scale * sqrt(-2 log u)``, ``u`` uniform in [0, 1)."""
    key, dt, (scale,) = _param_args("rayleigh", key, dtype, scale=scale)
    shape = _sample_shape("rayleigh", shape, scale=scale)
    _check_range("rayleigh", "scale", scale, low=0)
    u = uniform(key, shape, dt)
    return fnp.multiply(scale, fnp.sqrt(fnp.multiply(fnp.log(u), np.asarray(-2, dt))))


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Wald (inverse Gaussian, unit shape) samples by Michael, Schucany and Haas' transformation of
    a normal draw ``v`` and a uniform ``z``: the smaller root ``x`` of the quadratic, kept with
    probability ``mean / (mean + x)``, else ``mean**2 / x``."""
    key, dt, (mean,) = _param_args("wald", key, dtype, mean=mean)
    shape = _sample_shape("wald", shape, mean=mean)
    _check_range("wald", "mean", mean, low=0, low_open=True)
    key_v, key_z = _pair(key)
    mean = fnp.broadcast_to(mean, shape)
    v = normal(key_v, shape, dt)
    z = uniform(key_z, shape, dt)
    y = fnp.multiply(v, v)
    mean_sq = fnp.multiply(mean, mean)
    root = fnp.sqrt(fnp.add(fnp.multiply(fnp.multiply(np.asarray(4, dt), mean), y),
                            fnp.multiply(mean_sq, fnp.multiply(y, y))))
    half = np.asarray(2, dt)
    x = fnp.subtract(fnp.add(mean, fnp.divide(fnp.multiply(mean_sq, y), half)),
                     fnp.multiply(fnp.divide(mean, half), root))
    return fnp.where(fnp.less_equal(z, fnp.divide(mean, fnp.add(mean, x))), x, fnp.divide(mean_sq, x))


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = dtypes.int64) -> Any:
    """The number of Bernoulli(p) trials up to the first success (values 1, 2, ...):
    ``floor(log u / log1p(-p)) + 1``, with ``u`` drawn in ``p``'s float dtype."""
    key = _threefry.check_key(key, "geometric")
    dt = dtypes.canonicalize(dtype)
    if dt.kind != "i":
        raise TypeError(f"random.geometric: dtype must be int32 or int64, got {dt}")
    p = asarray(p)
    if not dtypes.is_float(aval(p).dtype):
        p = fnp.asarray(p, dtype=np.float64)
    shape = _sample_shape("geometric", shape, p=p)
    _check_range("geometric", "p", p, low=0, high=1, low_open=True)
    u = uniform(key, shape, aval(p).dtype)
    u = fnp.where(fnp.equal(u, 0), np.asarray(1, aval(p).dtype), u)
    with np.errstate(divide="ignore"):
        log_fail = fnp.broadcast_to(fnp.log1p(fnp.negative(p)), shape)
    trials = fnp.floor(fnp.divide(fnp.log(u), log_fail))
    return fnp.asarray(fnp.add(trials, np.asarray(1, aval(p).dtype)), dtype=dt)


def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Sequence[int] | None = None,
               dtype: Any = dtypes.float64) -> Any:
    """Triangular samples on [left, right] peaking at ``mode``, by inverting the piecewise
    quadratic CDF on a uniform draw."""
    key, dt, (left, mode, right) = _param_args("triangular", key, dtype, left=left, mode=mode, right=right)
    shape = _sample_shape("triangular", shape, left=left, mode=mode, right=right)
    if not any(isinstance(v, Tracer) for v in (left, mode, right)):
        lo, mid, hi = np.broadcast_arrays(left, mode, right)
        bad = (mid < lo) | (mid > hi)
        if np.any(bad):
            at = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
            raise ValueError(f"random.triangular: need left <= mode <= right, got left={lo[at]}, mode={mid[at]}, "
                             f"right={hi[at]}" + (f" at index {at}" if at else ""))
    left, mode, right = (fnp.broadcast_to(v, shape) for v in (left, mode, right))
    width = fnp.subtract(right, left)
    u = uniform(key, shape, dt)
    rising = fnp.add(left, fnp.sqrt(fnp.multiply(fnp.multiply(u, width), fnp.subtract(mode, left))))
    falling = fnp.subtract(right, fnp.sqrt(fnp.multiply(fnp.multiply(fnp.subtract(np.asarray(1, dt), u), width),
                                                        fnp.subtract(right, mode))))
    return fnp.where(fnp.less(u, fnp.divide(fnp.subtract(mode, left), width)), rising, falling)


def lognormal(key: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None, dtype: Any = dtypes.float64) -> Any:
    """Log-normal samples ``exp(sigma * z)``, ``z`` standard normal (complex dtypes allowed)."""
    key = _threefry.check_key(key, "lognormal")
    dt = dtypes.canonicalize(dtype)
    if not dtypes.is_inexact(dt):
        raise TypeError(f"random.lognormal: dtype must be a float or complex dtype, got {dt}")
    sigma = fnp.asarray(sigma, dtype=dt)
    shape = _sample_shape("lognormal", shape, sigma=sigma)
    return fnp.exp(fnp.multiply(normal(key, shape, dt), sigma))


def clone(key: Any) -> Any:
    """The key itself (JAX's ``clone`` marks a key for reuse; fungraph checks no key reuse)."""
    return key if isinstance(key, KeyArray) else _key_array(key, "clone")


def key_data(keys: Any) -> Any:
    """The uint32 words of a key or batch of keys, shape ``keys.shape + (2,)``; a raw key is its own words."""
    return _key_array(keys, "key_data")


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """Typed keys over uint32 words of shape ``(..., 2)``, refusing other dtypes as JAX does."""
    dtype = _impl(_spec(impl, dtype, "wrap_key_data"), "wrap_key_data")
    if isinstance(key_bits_array, KeyArray):
        raise TypeError("random.wrap_key_data: expected uint32 key data, got a key array; it is wrapped already")
    words = asarray(key_bits_array)
    a = aval(words)
    if a.dtype != np.uint32:
        raise TypeError(f"random.wrap_key_data: invalid PRNG key data: expected key_data.dtype = uint32; got "
                        f"dtype={a.dtype}")
    if a.shape[-1:] != dtype.key_shape:
        raise TypeError(f"random.wrap_key_data: invalid PRNG key data: expected key_data.shape to end with "
                        f"{dtype.key_shape}; got shape={a.shape} for impl={dtype.impl}")
    return KeyArray(words, dtype)


def key_impl(keys: Any) -> str:
    """The name of the PRNG implementation of typed or raw keys: ``"threefry2x32"``."""
    if isinstance(keys, KeyArray):
        return keys.dtype.impl
    _key_array(keys, "key_impl")
    return dtypes.THREEFRY_KEY.impl


def key_dtype(impl: Any = None) -> dtypes.KeyDType:
    """The dtype of ``key(seed, impl=impl)``'s keys (``key<fry>``: threefry2x32, the one
    implementation fungraph has)."""
    if impl not in (None, "threefry2x32", "threefry", dtypes.THREEFRY_KEY):
        raise ValueError(f"key_dtype: unknown PRNG implementation {impl!r}; fungraph has threefry2x32")
    return dtypes.THREEFRY_KEY


def _pair(key: Any) -> tuple[Any, Any]:
    keys = _threefry.split(key, (2,))
    return keys[0], keys[1]


def _words64(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """A 64-bit draw per element as its (high, low) uint32 words (JAX: ``w0 << 32 | w1``)."""
    return _threefry.hash_counters(key, shape, "random")


def _unit_floats(key: Any, shape: tuple[int, ...], dt: np.dtype, name: str) -> Any:
    """[0, 1) from the top mantissa-many bits: what JAX's exponent-bit trick computes, in arithmetic
    (floats of 16 bits or fewer from the low 16 bits of a word, or the low 8 when nmant < 8)."""
    if dt == dtypes.float32:
        mant = fnp.floor_divide(_threefry.bits32(key, shape, name), np.int64(2**9))
        return fnp.multiply(fnp.asarray(mant, dtype=dt), np.float32(2.0**-23))
    if dt.itemsize <= 2:
        nmant = dtypes.finfo(dt).nmant
        rng_bits = 8 if nmant < 8 else 8 * dt.itemsize
        low = fnp.bitwise_and(_threefry.bits32(key, shape, name), np.uint32(2**rng_bits - 1))
        mant = fnp.floor_divide(low, np.uint32(2 ** (rng_bits - nmant)))
        return fnp.asarray(fnp.multiply(fnp.asarray(mant, dtype=np.float32), np.float32(2.0**-nmant)), dtype=dt)
    high, low = _threefry.hash_counters(key, shape, name)
    mant = fnp.add(fnp.multiply(high, np.int64(2**20)), fnp.floor_divide(low, np.int64(2**12)))
    return fnp.multiply(fnp.asarray(mant, dtype=dt), np.float64(2.0**-52))


def _normal_real(key: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    lo = np.nextafter(np.asarray(-1.0, dt), np.asarray(0.0, dt))
    u = uniform(key, shape, dt, lo, 1.0)
    return fnp.multiply(np.asarray(np.sqrt(2), dt), _erf_inv(u))


def _shuffle(key: Any, x: Any, axis: int) -> Any:
    """Sort ``x`` along ``axis`` on fresh 32-bit random keys, repeated as often as JAX repeats it."""
    size = math.prod(aval(x).shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(2**32 - 1)))
    for _ in range(rounds):
        key, sub = _pair(key)
        order = fnp.argsort(_threefry.bits32(sub, aval(x).shape, "permutation"), axis=axis, stable=True)
        x = fnp.take_along_axis(x, order, axis=axis)
    return x


def _choice_index(key: Any, p: Any, shape: tuple[int, ...], n_inputs: int, n_draws: int, replace: bool) -> Any:
    p = asarray(p)
    if not dtypes.is_inexact(aval(p).dtype):
        p = fnp.asarray(p, dtype=np.float64)
    if aval(p).shape != (n_inputs,):
        raise ShapeError(f"random.choice: p must be a vector of the population size ({n_inputs},), got shape "
                         f"{aval(p).shape}")
    dt = aval(p).dtype
    if replace:
        cdf = fnp.cumsum(p)
        r = fnp.multiply(cdf[-1], fnp.subtract(np.asarray(1, dt), uniform(key, shape, dt)))
        return fnp.asarray(fnp.searchsorted(cdf, r), dtype=np.int64)
    scores = fnp.add(gumbel(key, (n_inputs,), dt), fnp.log(p))
    return fnp.asarray(_lax.top_k(scores, n_draws)[1], dtype=np.int64)


def _choice_shape(arr: Any, shape: tuple[int, ...], axis: int, scalar: bool) -> tuple[int, ...]:
    if scalar:
        return shape
    full = aval(arr).shape
    return full[:axis] + shape + full[axis + 1:]
