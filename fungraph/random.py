"""``fungraph.random``: ``jax.random``'s functional PRNG, bit-exact with JAX's default threefry2x32.

A key is a raw integer array of shape (2,) holding two uint32 words, exactly the words of JAX's
legacy ``jax.random.PRNGKey``; fungraph has no uint32, so keys and ``bits`` are int64 arrays with
values in [0, 2**32). Typed key arrays (``jax.random.key`` returning a scalar of a key dtype) are
not modelled: ``key`` returns the same raw array as ``PRNGKey``. Every function is written with
``fungraph.numpy`` operations, so keys may be traced (``jit``, ``vmap`` over split keys, OpenCL).

The bits, ``split``, ``fold_in``, ``uniform``, ``bernoulli``, ``randint``, ``permutation`` and
``choice`` match JAX (``jax_enable_x64``) bit for bit, and so do float64 ``gumbel`` and
``categorical`` in the tests. Samplers that pass uniforms through ``log1p``, ``erf``/``erfinv`` or
a float32 ``log`` (``normal``, ``truncated_normal``, ``exponential``, float32 ``gumbel``) use JAX's
formulas, but XLA's CPU backend has its own ``log1p`` and float32 ``log`` and fuses multiply-adds,
so their floats can differ from JAX's in the last few bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import _threefry, dtypes
from fungraph import lax as _lax
from fungraph import numpy as fnp
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, aval
from fungraph.primitives.callback import stop_gradient

__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "choice", "exponential", "fold_in", "gumbel", "key",
           "normal", "permutation", "randint", "split", "truncated_normal", "uniform"]

_UNSIGNED_WIDTHS = {np.dtype(np.uint8): 8, np.dtype(np.uint16): 16, np.dtype(np.uint32): 32}


def PRNGKey(seed: Any) -> Any:  # noqa: N802  (jax.random's name)
    """The raw key of an integer seed: ``[seed >> 32, seed & 0xFFFFFFFF]`` as int64, as JAX's."""
    return _threefry.seed_key(seed, "PRNGKey")


def key(seed: Any) -> Any:
    """Like ``jax.random.key``, but returns the raw (2,) key of :func:`PRNGKey` (no key dtypes)."""
    return _threefry.seed_key(seed, "key")


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (a shape if a tuple), stacked on a leading axis."""
    shape = _shape(num if isinstance(num, Sequence) else (num,), "split")
    return _threefry.split(key, shape)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and an integer (taken modulo 2**32, as JAX's uint32 conversion)."""
    return _threefry.fold_in(key, data)


def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits as an int64 array: values in [0, 2**32) for uint32 (the default here;
    JAX with x64 defaults to uint64), [0, 2**16) for uint16, [0, 2**8) for uint8. 64-bit widths
    are refused: their values do not fit int64."""
    shape = _shape(shape, "bits")
    dt = np.dtype(np.uint32 if dtype is None else dtype)
    if dt not in _UNSIGNED_WIDTHS:
        raise TypeError(f"random.bits: dtype is uint8, uint16 or uint32 (fungraph has no uint64), got {dt}")
    words = _threefry.bits32(key, shape, "bits")
    return fnp.bitwise_and(words, np.int64(2 ** _UNSIGNED_WIDTHS[dt] - 1))


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
    dt = dtypes.canonical(dtype)
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
    """Integers in [minval, maxval) as JAX draws them: two words per value (two 64-bit draws for
    int64), combined modulo the span in wrapping unsigned arithmetic."""
    key = _threefry.check_key(key, "randint")
    shape = _shape(shape, "randint")
    dt = dtypes.canonical(dtype)
    if dt.kind != "i":
        raise TypeError(f"random.randint: dtype must be int32 or int64, got {dt}")
    lo, hi = (_as_int64(v, "randint", name) for v, name in ((minval, "minval"), (maxval, "maxval")))
    _check_param_shapes("randint", shape, minval=lo, maxval=hi)
    info = np.iinfo(dt)
    out_of_range = fnp.greater(hi, np.int64(info.max))
    lo = fnp.clip(lo, np.int64(info.min), np.int64(info.max))
    hi = fnp.clip(hi, np.int64(info.min), np.int64(info.max))
    span = fnp.where(fnp.less_equal(hi, lo), np.int64(1), fnp.subtract(hi, lo))
    span = fnp.where(fnp.logical_and(out_of_range, fnp.greater(hi, lo)), fnp.add(span, np.int64(1)), span)
    k1, k2 = _pair(key)
    if dt.itemsize == 4:
        span = fnp.bitwise_and(span, _threefry.MASK32)
        offset = _offset32(_threefry.bits32(k1, shape, "randint"), _threefry.bits32(k2, shape, "randint"), span)
    else:
        offset = _offset64(_words64(k1, shape), _words64(k2, shape), span)
    return fnp.asarray(fnp.add(lo, offset), dtype=dt)


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
        ind = randint(key, shape, 0, n_inputs)
    else:
        ind = _choice_index(key, p, shape, n_inputs, n_draws, replace)
    out = ind if scalar else fnp.take(arr, ind, axis=axis)
    return fnp.reshape(out, _choice_shape(arr, shape, axis, scalar))


def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = dtypes.float64) -> Any:
    """Standard Gumbel samples ``-log(-log(u))``, ``u`` uniform in [tiny, 1) (JAX's ``mode="low"``)."""
    key = _threefry.check_key(key, "gumbel")
    shape = _shape(shape, "gumbel")
    dt = _float_dtype(dtype, "gumbel")
    u = uniform(key, shape, dt, np.finfo(dt).tiny, 1.0)
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


def _shape(shape: Any, name: str, prefix: str = "random.") -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{prefix}{name}: shape must be a sequence of ints, got {shape!r}") from None
    if any(isinstance(d, Tracer) for d in dims):
        raise TypeError(f"{prefix}{name}: shape must be concrete, got a traced dimension in {shape!r}")
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"{prefix}{name}: shape must hold non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _float_dtype(dtype: Any, name: str) -> np.dtype:
    dt = dtypes.canonical(dtype)
    if not dtypes.is_float(dt):
        raise TypeError(f"random.{name}: dtype must be float32 or float64, got {dt}")
    return dt


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"random.{name}: axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim


def _check_param_shapes(name: str, shape: tuple[int, ...], **params: Any) -> None:
    """Parameters must broadcast to ``shape`` exactly (JAX's rule for sampler parameters)."""
    shapes = {k: aval(v).shape for k, v in params.items()}
    if not _broadcasts_to(shape, *shapes.values()):
        named = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise ShapeError(f"random.{name}: parameter shapes ({named}) must broadcast to the shape argument {shape}")


def _broadcasts_to(shape: tuple[int, ...], *others: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, *others) == shape
    except ValueError:
        return False


def _pair(key: Any) -> tuple[Any, Any]:
    keys = _threefry.split(key, (2,))
    return keys[0], keys[1]


def _words64(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """A 64-bit draw per element as its (high, low) uint32 words (JAX: ``w0 << 32 | w1``)."""
    return _threefry.hash_counters(key, shape, "random")


def _unit_floats(key: Any, shape: tuple[int, ...], dt: np.dtype, name: str) -> Any:
    """[0, 1) from the top mantissa-many bits: what JAX's exponent-bit trick computes, in arithmetic."""
    if dt == dtypes.float32:
        mant = fnp.floor_divide(_threefry.bits32(key, shape, name), np.int64(2**9))
        return fnp.multiply(fnp.asarray(mant, dtype=dt), np.float32(2.0**-23))
    high, low = _threefry.hash_counters(key, shape, name)
    mant = fnp.add(fnp.multiply(high, np.int64(2**20)), fnp.floor_divide(low, np.int64(2**12)))
    return fnp.multiply(fnp.asarray(mant, dtype=dt), np.float64(2.0**-52))


def _fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once, as XLA's CPU backend fuses it: float32 through exact float64
    products; float64 with a Dekker product and a two-sum (exact up to rare double roundings)."""
    dt = aval(a).dtype
    if dt == dtypes.float32:
        wide = [fnp.asarray(v, dtype=np.float64) for v in (a, b, c)]
        return fnp.asarray(fnp.add(fnp.multiply(wide[0], wide[1]), wide[2]), dtype=dt)
    prod = fnp.multiply(a, b)
    a_hi, a_lo = _dekker_split(a)
    b_hi, b_lo = _dekker_split(b)
    prod_err = fnp.add(fnp.add(fnp.add(fnp.subtract(fnp.multiply(a_hi, b_hi), prod), fnp.multiply(a_hi, b_lo)),
                               fnp.multiply(a_lo, b_hi)), fnp.multiply(a_lo, b_lo))
    total = fnp.add(prod, c)
    back = fnp.subtract(total, prod)
    sum_err = fnp.add(fnp.subtract(prod, fnp.subtract(total, back)), fnp.subtract(c, back))
    fused = fnp.add(total, fnp.add(sum_err, prod_err))
    return fnp.where(fnp.isfinite(fused), fused, total)


def _dekker_split(x: Any) -> tuple[Any, Any]:
    t = fnp.multiply(x, np.float64(2.0**27 + 1))
    hi = fnp.subtract(t, fnp.subtract(t, x))
    return hi, fnp.subtract(x, hi)


# Giles' single- and double-precision erfinv polynomials (highest degree first), the ones XLA uses.
_ERFINV32 = ((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941),
             (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682))
_ERFINV64 = ((-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
              1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
              6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
              2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
              1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
              4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
              0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
              0.24015818242558961693, 1.6536545626831027356),
             (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
              1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
              2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
              6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
              0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
              -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334, 3.0838856104922207635),
             (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
              -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
              2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
              -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
              7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
              1.0103004648645343977, 4.8499064014085844221))


def _horner(coefs: Sequence[float], w: Any) -> Any:
    dt = aval(w).dtype
    p = fnp.full(aval(w).shape, coefs[0], dt)
    for c in coefs[1:]:
        p = fnp.add(fnp.multiply(p, w), np.asarray(c, dt))
    return p


def _erf_inv(x: Any) -> Any:
    """XLA's erfinv: a polynomial in ``-log1p(-x*x)`` (float32: 2 ranges, float64: 3), written in
    elementwise operations so that every backend computes the same expression."""
    dt = aval(x).dtype
    w = fnp.negative(fnp.log1p(fnp.negative(fnp.multiply(x, x))))
    root = fnp.sqrt(w)
    if dt == dtypes.float32:
        low, high = _ERFINV32
        small = fnp.less(w, np.float32(5))
        p = fnp.where(small, _horner(low, fnp.subtract(w, np.float32(2.5))),
                      _horner(high, fnp.subtract(root, np.float32(3))))
    else:
        low, mid, high = _ERFINV64
        p = fnp.where(fnp.less(w, 6.25), _horner(low, fnp.subtract(w, 3.125)),
                      fnp.where(fnp.less(w, 16.0), _horner(mid, fnp.subtract(root, 3.25)),
                                _horner(high, fnp.subtract(root, 5.0))))
    edge = fnp.equal(fnp.abs(x), np.asarray(1, dt))
    return fnp.where(edge, fnp.multiply(x, np.asarray(np.inf, dt)), fnp.multiply(p, x))


def _normal_real(key: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    lo = np.nextafter(np.asarray(-1.0, dt), np.asarray(0.0, dt))
    u = uniform(key, shape, dt, lo, 1.0)
    return fnp.multiply(np.asarray(np.sqrt(2), dt), _erf_inv(u))


def _next_toward(x: Any, direction: int) -> Any:
    """The float next to ``x`` toward ``direction * inf`` (Rump's successor, from arithmetic only)."""
    dt = aval(x).dtype
    info = np.finfo(dt)
    step = fnp.maximum(fnp.multiply(fnp.abs(x), np.asarray(info.epsneg * (1 + info.eps), dt)),
                       np.asarray(info.smallest_subnormal, dt))
    moved = fnp.add(x, step) if direction > 0 else fnp.subtract(x, step)
    return fnp.where(fnp.isinf(x), x, moved)


def _as_int64(v: Any, name: str, what: str) -> Any:
    v = asarray(v)
    kind = aval(v).dtype.kind
    if kind not in "iub":
        if kind != "f":
            raise TypeError(f"random.{name}: {what} must be an integer, got {aval(v).dtype}")
        v = fnp.trunc(v)
    return fnp.asarray(v, dtype=np.int64)


def _urem(x: Any, span: Any) -> Any:
    """Unsigned remainder as XLA defines it: ``x`` itself for a zero divisor."""
    zero = fnp.equal(span, np.int64(0))
    return fnp.where(zero, x, fnp.remainder(x, fnp.where(zero, np.int64(1), span)))


def _mul32(a: Any, b: Any) -> Any:
    """``a * b mod 2**32`` for uint32-valued int64s, in 16-bit halves so nothing overflows."""
    b_lo = fnp.bitwise_and(b, np.int64(0xFFFF))
    b_hi = fnp.floor_divide(b, np.int64(2**16))
    cross = fnp.multiply(fnp.bitwise_and(fnp.multiply(a, b_hi), np.int64(0xFFFF)), np.int64(2**16))
    return fnp.bitwise_and(fnp.add(fnp.multiply(a, b_lo), cross), _threefry.MASK32)


def _offset32(high: Any, low: Any, span: Any) -> Any:
    """JAX's ``(high % span * (2**32 % span) + low % span) % span`` in wrapping uint32 arithmetic."""
    mult = _urem(np.int64(2**16), span)
    mult = _urem(_mul32(mult, mult), span)
    total = fnp.bitwise_and(fnp.add(_mul32(_urem(high, span), mult), _urem(low, span)), _threefry.MASK32)
    return _urem(total, span)


_SIGN = np.int64(-(2**63))


def _addmod(a: Any, b: Any, s: Any) -> Any:
    """``(a + b) % s`` for ``0 <= a, b < s < 2**63``, without overflowing."""
    gap = fnp.subtract(s, b)
    return fnp.where(fnp.greater_equal(a, gap), fnp.subtract(a, gap), fnp.add(a, b))


def _urem64(x: Any, s: Any) -> Any:
    """``x % s`` for uint64 values held in int64 bits (XLA: ``x`` for a zero divisor). A
    divisor of 2**63 or more (negative here) exceeds half of any dividend: one subtraction.
    Below, a dividend of 2**63 or more (negative) is ``x + 2**64`` (int64 floor remainder
    gives ``x % s``; ``2**64 % s`` is added back)."""
    big = fnp.less(s, np.int64(0))
    below = fnp.less(fnp.bitwise_xor(x, _SIGN), fnp.bitwise_xor(s, _SIGN))
    r_big = fnp.where(below, x, fnp.subtract(x, s))
    safe = fnp.where(fnp.logical_or(big, fnp.equal(s, np.int64(0))), np.int64(1), s)
    half = fnp.remainder(fnp.add(fnp.remainder(np.int64(2**63 - 1), safe), np.int64(1)), safe)
    r_small = fnp.remainder(x, safe)
    r_small = fnp.where(fnp.less(x, np.int64(0)), _addmod(r_small, _addmod(half, half, safe), safe), r_small)
    return fnp.where(fnp.equal(s, np.int64(0)), x, fnp.where(big, r_big, r_small))


def _offset64(high: tuple[Any, Any], low: tuple[Any, Any], span: Any) -> Any:
    """JAX's ``(high % span * (2**64 % span) + low % span) % span`` for 64-bit draws given as
    word pairs, in wrapping uint64 arithmetic on int64 bits (int64 products and sums wrap as
    uint64 ones do), exact for every span."""
    def word64(words: tuple[Any, Any]) -> Any:
        return fnp.add(fnp.multiply(words[0], np.int64(2**32)), words[1])

    with np.errstate(over="ignore"):
        mult = _urem64(np.int64(2**32), span)
        mult = _urem64(fnp.multiply(mult, mult), span)
        total = fnp.add(fnp.multiply(_urem64(word64(high), span), mult), _urem64(word64(low), span))
        return _urem64(total, span)


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
