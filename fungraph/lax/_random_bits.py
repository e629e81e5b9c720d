"""``jax.lax``'s low-level random bits: ``rng_bit_generator`` (XLA's RngBitGenerator: Philox4x32
or Threefry2x32 over a 128-bit state held as four uint32 words) and the stateful ``rng_uniform``.

``rng_bit_generator`` is composed of unsigned integer primitives (shifts by constants are
multiplications and floor divisions by powers of two), so ``jit`` and ``vmap`` over keys come
free, and follows XLA's CPU expansion bit for bit."""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph._custom_vmap import custom_vmap_call_p
from fungraph.api import pure_callback
from fungraph.core import Tracer
from fungraph.custom_derivatives import _stage_call
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.operands import asarray

U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)


class RandomAlgorithm(enum.IntEnum):
    """Which algorithm ``rng_bit_generator`` runs (``jax.lax.RandomAlgorithm``); the default is
    the CPU platform's, Philox."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


# --- unsigned words: constants, wrapping arithmetic, constant shifts --------------------------------


def _u(value: int, dtype: np.dtype) -> np.ndarray:
    return np.asarray(value, dtype)


def _shr(x: Any, k: int) -> Any:
    dt = aval_of(x).dtype
    return ew.floor_divide_p.bind(x, _u(1 << k, dt))


def _shl(x: Any, k: int) -> Any:
    dt = aval_of(x).dtype
    return ew.mul(x, _u(1 << k, dt))


def _low32(x64: Any) -> Any:
    return ew.convert(ew.and_p.bind(x64, _u(0xFFFFFFFF, U64)), U32)


def _high32(x64: Any) -> Any:
    return ew.convert(_shr(x64, 32), U32)


def _join64(lo: Any, hi: Any) -> Any:
    return ew.or_p.bind(ew.convert(lo, U64), _shl(ew.convert(hi, U64), 32))


def _rotl32(x: Any, r: int) -> Any:
    return ew.or_p.bind(_shl(x, r), _shr(x, 32 - r))


# --- the two block functions -------------------------------------------------------------------------

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry2x32(key: tuple[Any, Any], x: tuple[Any, Any]) -> tuple[Any, Any]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), as XLA's."""
    ks = (key[0], key[1], ew.xor_p.bind(ew.xor_p.bind(key[0], key[1]), _u(0x1BD11BDA, U32)))
    x0, x1 = ew.add(x[0], ks[0]), ew.add(x[1], ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = ew.add(x0, x1)
            x1 = ew.xor_p.bind(x0, _rotl32(x1, r))
        x0 = ew.add(x0, ks[(i + 1) % 3])
        x1 = ew.add(ew.add(x1, ks[(i + 2) % 3]), _u(i + 1, U32))
    return x0, x1


def _mul_hi_lo(x: Any, m: int) -> tuple[Any, Any]:
    product = ew.mul(ew.convert(x, U64), _u(m, U64))
    return _high32(product), _low32(product)


def _philox4x32(x: tuple[Any, Any, Any, Any], key: tuple[Any, Any]) -> tuple[Any, Any, Any, Any]:
    """Philox-4x32 with 10 rounds (Salmon et al. 2011), as XLA's."""
    k0, k1 = key
    for _ in range(10):
        hi0, lo0 = _mul_hi_lo(x[0], 0xD2511F53)
        hi1, lo1 = _mul_hi_lo(x[2], 0xCD9E8D57)
        x = (ew.xor_p.bind(ew.xor_p.bind(hi1, x[1]), k0), lo1, ew.xor_p.bind(ew.xor_p.bind(hi0, x[3]), k1), lo0)
        k0, k1 = ew.add(k0, _u(0x9E3779B9, U32)), ew.add(k1, _u(0xBB67AE85, U32))
    return x


# --- counters and layouts ----------------------------------------------------------------------------


def _iota64(n: int) -> np.ndarray:
    return np.arange(n, dtype=U64)


def _interleave(parts: Sequence[Any], count: int) -> Any:
    """The words of ``parts`` (each of length L) in round-robin order, cut to ``count``."""
    length = aval_of(parts[0]).shape[0]
    cols = [sh.reshape(p, (length, 1)) for p in parts]
    flat = sh.reshape(sh.concatenate(cols, 1), (length * len(parts),))
    return sh.slice_(flat, (0,), (count,), None) if count != length * len(parts) else flat


def _philox(words: Sequence[Any], shape: tuple[int, ...], wide: bool) -> tuple[Any, Any]:
    """XLA's PhiloxRngBit32/64: 128-bit blocks counted up from the state read as one 128-bit
    counter (low half ``k2 | k3 << 32``, high half ``k0 | k1 << 32``) under the key ``(k0, k1)``,
    round-robin over each block's words."""
    count = math.prod(shape)
    blocks = -(-count * (2 if wide else 1) // 4)
    low, high = _join64(words[2], words[3]), _join64(words[0], words[1])
    lows = ew.add(low, _iota64(blocks))
    highs = ew.add(high, ew.convert(ew.lt(lows, low), U64))
    out = _philox4x32((_low32(lows), _high32(lows), _low32(highs), _high32(highs)), (words[0], words[1]))
    if wide:
        parts = [_join64(out[0], out[1]), _join64(out[2], out[3])]
    else:
        parts = list(out)
    bits = sh.reshape(_interleave(parts, count), shape)
    new_low = ew.add(low, _u(blocks, U64))  # the key half does not take the carry, as in XLA
    return (words[0], words[1], _low32(new_low), _high32(new_low)), bits


def _split_shape(shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """XLA's SplitShapeIntoHalves: the first even axis, else the largest, halved (rounded up)."""
    if not shape:
        return 0, (1,)
    even = [i for i, d in enumerate(shape) if d % 2 == 0]
    axis = even[0] if even else max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = list(shape)
    half[axis] = -(-shape[axis] // 2)
    return axis, tuple(half)


def _threefry(words: Sequence[Any], shape: tuple[int, ...], wide: bool) -> tuple[Any, Any]:
    """XLA's ThreeFryRngBit32/64: the counter plus each element's row-major index, split into
    two words and hashed; 32-bit outputs use both hash words for two halves of the shape."""
    axis, half = (None, shape) if wide else _split_shape(shape)
    n = math.prod(half)
    counter = _join64(words[2], words[3])
    inputs = ew.add(counter, _iota64(n))
    x0, x1 = _threefry2x32((words[0], words[1]), (_low32(inputs), _high32(inputs)))
    if wide:
        bits = sh.reshape(_join64(x0, x1), shape)
    else:
        full = list(half)
        full[axis] = 2 * half[axis]
        pair = [sh.reshape(x, (*half[:axis + 1], 1, *half[axis + 1:])) for x in (x0, x1)]
        joined = sh.reshape(sh.concatenate(pair, axis + 1), tuple(full))
        limit = shape or (1,)
        bits = joined if tuple(full) == limit else sh.slice_(joined, (0,) * len(limit), limit, None)
        bits = sh.reshape(bits, shape)
    new_counter = ew.add(counter, _u(n, U64))
    return (words[0], words[1], _low32(new_counter), _high32(new_counter)), bits


_BIT_DTYPES = tuple(np.dtype(d) for d in (np.uint8, np.uint16, np.uint32, np.uint64))


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: RandomAlgorithm = RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding: Any = None) -> tuple[Any, Any]:
    """``(new_key, bits)``: uniformly random unsigned ``bits`` of ``shape`` and ``dtype`` from a
    ``uint32[4]`` (or ``uint64[2]``) ``key``, and the key to pass next (``jax.lax.rng_bit_generator``).
    8- and 16-bit outputs are the low bits of the 32-bit ones, as in JAX."""
    del out_sharding
    shape = tuple(int(d) for d in shape)
    want = np.dtype(dtypes.canonicalize(dtype, "rng_bit_generator"))
    if want not in _BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {want}")
    algorithm = RandomAlgorithm(algorithm)
    key = asarray(key)
    key_aval = aval_of(key)
    if (key_aval.shape, key_aval.dtype) not in (((4,), U32), ((2,), U64)):
        raise TypeError(f"rng_bit_generator: key must be uint32[4] or uint64[2], got {key_aval}")
    if not isinstance(key, Tracer):
        return _generate(key, shape, want, algorithm)
    rule = _BatchRule(shape, want, algorithm)
    leaves, graph, closure, _, _, _ = _stage_call(lambda k: _generate(k, shape, want, algorithm), (key,))
    new_key, bits = custom_vmap_call_p.bind(*leaves, *closure, call=graph, rule=rule, num_consts=len(closure))
    return new_key, bits


@dataclass(frozen=True)
class _BatchRule:
    """JAX's batching rule of ``rng_bit_generator``: every example's bits come from the first
    key, one draw of ``(batch, *shape)`` split along the batch, and only the first key is
    advanced (the others are returned as they were)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    algorithm: RandomAlgorithm
    name: str = "rng_bit_generator"

    def __call__(self, size: int, leaves: Sequence[Any], batched: Sequence[bool]) -> tuple[list[Any], list[int]]:
        keys = leaves[0]
        n = aval_of(keys).shape[1]
        first = sh.reshape(sh.slice_(keys, (0, 0), (1, n), None), (n,))
        new_key, bits = rng_bit_generator(first, (size, *self.shape), self.dtype, self.algorithm)
        rest = [sh.slice_(keys, (1, 0), (size, n), None)] if size > 1 else []
        return [sh.concatenate([sh.reshape(new_key, (1, n)), *rest], 0), bits], [0, 0]


def _generate(key: Any, shape: tuple[int, ...], want: np.dtype, algorithm: RandomAlgorithm) -> tuple[Any, Any]:
    """``rng_bit_generator`` of one checked key, composed of unsigned integer operations."""
    key_aval = aval_of(key)
    if key_aval.dtype == U64:
        pairs = [sh.reshape(sh.slice_(key, (i,), (i + 1,), None), ()) for i in range(2)]
        words = list(itertools.chain.from_iterable((_low32(p), _high32(p)) for p in pairs))
    else:
        words = [sh.reshape(sh.slice_(key, (i,), (i + 1,), None), ()) for i in range(4)]
    wide = want == U64
    run = _threefry if algorithm == RandomAlgorithm.RNG_THREE_FRY else _philox
    previous = dtypes.set_x64_override(True)  # the words are uint64 in 32-bit mode too, as XLA's
    try:
        new_words, bits = run(words, shape, wide)
    finally:
        dtypes.set_x64_override(previous)
    if want.itemsize < 4:
        bits = ew.convert(ew.and_p.bind(bits, _u((1 << (8 * want.itemsize)) - 1, U32)), want)
    if key_aval.dtype == U64:
        new_key = sh.concatenate([sh.reshape(_join64(new_words[2 * i], new_words[2 * i + 1]), (1,))
                                  for i in range(2)], 0)
    else:
        new_key = sh.concatenate([sh.reshape(w, (1,)) for w in new_words], 0)
    return new_key, bits


# --- rng_uniform: stateful, from the host -----------------------------------------------------------

_HOST_RNG = np.random.default_rng()


def _draw_uniform(a: np.ndarray, b: np.ndarray, *, shape: tuple[int, ...]) -> np.ndarray:
    dt = np.asarray(a).dtype
    if dtypes.is_int(dt):
        return _HOST_RNG.integers(int(a), int(b), size=shape, dtype=dt, endpoint=False)
    return (np.asarray(a) + (np.asarray(b) - np.asarray(a)) * _HOST_RNG.random(size=shape)).astype(dt)


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Any:
    """Random numbers in ``[a, b)`` drawn afresh on every call, eager or jitted
    (``jax.lax.rng_uniform``: stateful and implementation defined; fungraph draws them on the
    host, so its numbers are not XLA's). ``a`` and ``b`` are scalars of one float or integer dtype."""
    a, b = asarray(a), asarray(b)
    av, bv = aval_of(a), aval_of(b)
    if av.dtype != bv.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got {av.dtype} and {bv.dtype}.")
    if av.shape != () or bv.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {av.shape} and {bv.shape}.")
    if not (dtypes.is_float(av.dtype) or dtypes.is_int(av.dtype)):
        raise TypeError(f"rng_uniform: needs a floating-point or integer dtype, got {av.dtype}")
    shape = tuple(int(d) for d in shape)
    out = ShapedArray(shape, av.dtype)
    return pure_callback(lambda x, y: _draw_uniform(x, y, shape=shape), out, a, b, vmap_method="sequential")
