"""The threefry2x32 counter-based hash behind ``fungraph.random``, bit for bit as JAX computes it.

Keys are uint32 arrays, as JAX's. There is no shift primitive, so the hash computes each uint32
word in an int64 array with a value in [0, 2**32): addition wraps with ``& 0xFFFFFFFF``, ``x << r`` is a multiplication
by ``2**r`` (below 2**63 for the rotations used) and ``x >> r`` a floor division. Counters follow
JAX's default "partitionable" layout: element ``i`` of an output of any shape hashes the 64-bit
counter ``i`` split into two words (high word 0 for fewer than 2**32 elements).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph._key_array import KeyArray
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, aval

MASK32 = np.int64(0xFFFFFFFF)
_PARITY = np.int64(0x1BD11BDA)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _add(x: Any, y: Any) -> Any:
    return fnp.bitwise_and(fnp.add(x, y), MASK32)


def _rotate_left(x: Any, r: int) -> Any:
    high = fnp.bitwise_and(fnp.multiply(x, np.int64(2**r)), MASK32)
    return fnp.bitwise_or(high, fnp.floor_divide(x, np.int64(2 ** (32 - r))))


def hash2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """Threefry-2x32 with 20 rounds: two key words and two counter words (broadcast together) to
    two uint32-valued words."""
    schedule = (k0, k1, fnp.bitwise_xor(fnp.bitwise_xor(k0, k1), _PARITY))
    x0, x1 = _add(x0, k0), _add(x1, k1)
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = _add(x0, x1)
            x1 = fnp.bitwise_xor(_rotate_left(x1, r), x0)
        x0 = _add(x0, schedule[(block + 1) % 3])
        x1 = _add(x1, _add(schedule[(block + 2) % 3], np.int64(block + 1)))
    return x0, x1


def check_key(key: Any, name: str) -> Any:
    """The words of one key: a typed key of shape (), or a raw key (an integer array of shape (2,))."""
    if isinstance(key, KeyArray):
        if key.shape != ():
            raise ValueError(f"random.{name} accepts a single key, but was given a key array of shape {key.shape} "
                             f"!= (). Use fungraph.vmap for batching.")
        return key.words
    key = asarray(key)
    a = aval(key)
    if a.dtype.kind not in "iu":
        raise TypeError(f"random.{name}: a key is an integer array of shape (2,) (from PRNGKey, split or "
                        f"fold_in), got dtype {a.dtype}")
    if a.shape != (2,):
        hint = "; map over a batch of keys with fungraph.vmap" if a.shape[-1:] == (2,) else ""
        raise ShapeError(f"random.{name}: a key has shape (2,), got shape {a.shape}{hint}")
    return key


def key_words(key: Any, name: str) -> tuple[Any, Any]:
    """The two uint32 words of a raw key, wrapped to [0, 2**32)."""
    key = fnp.bitwise_and(fnp.asarray(check_key(key, name), dtype=np.int64), MASK32)
    return key[0], key[1]


def hash_counters(key: Any, shape: tuple[int, ...], name: str) -> tuple[Any, Any]:
    """Both hash words for counters ``0 .. prod(shape) - 1`` laid out in ``shape``."""
    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"random.{name}: at most 2**32 - 1 values per call, asked for shape {shape}")
    k0, k1 = key_words(key, name)
    counts = fnp.reshape(fnp.arange(size, dtype=np.int64), shape)
    return hash2x32(k0, k1, fnp.zeros(shape, np.int64), counts)


def bits32(key: Any, shape: tuple[int, ...], name: str) -> Any:
    """32 random bits per element (JAX's ``random_bits(key, 32, shape)``)."""
    w0, w1 = hash_counters(key, shape, name)
    return fnp.bitwise_xor(w0, w1)


def split(key: Any, shape: tuple[int, ...]) -> Any:
    w0, w1 = hash_counters(key, shape, "split")
    return fnp.asarray(fnp.stack([w0, w1], axis=len(shape)), dtype=np.uint32)


def fold_in(key: Any, data: Any) -> Any:
    """The key hashed with counter ``(0, data mod 2**32)``: JAX's seed-then-hash reduces to this."""
    k0, k1 = key_words(key, "fold_in")
    data = asarray(data)
    if aval(data).shape != () or aval(data).dtype.kind not in "iub":
        raise TypeError(f"random.fold_in: data is an integer scalar, got {aval(data)}; map over an "
                        f"array of data with fungraph.vmap")
    word = fnp.bitwise_and(fnp.asarray(data, dtype=np.int64), MASK32)
    w0, w1 = hash2x32(k0, k1, np.int64(0), word)
    return fnp.asarray(fnp.stack([w0, w1]), dtype=np.uint32)


def seed_key(seed: Any, name: str) -> Any:
    """The raw key of an integer seed: its high and low 32 bits (a 32-bit seed has high word 0)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer, np.ndarray, Tracer)):
        raise TypeError(f"random.{name}: the seed is an integer scalar, got {type(seed).__name__}")
    if isinstance(seed, int) and not -(2**63) <= seed < 2**63:
        raise ValueError(f"random.{name}: seed {seed} does not fit in int64 (JAX refuses it too)")
    seed = asarray(seed)
    a = aval(seed)
    if a.shape != () or a.dtype.kind not in "iu":
        raise TypeError(f"random.{name}: the seed is an integer scalar, got {a}; map over an array of "
                        f"seeds with fungraph.vmap")
    wide = fnp.asarray(seed, dtype=np.int64)
    low = fnp.bitwise_and(wide, MASK32)
    if a.dtype.itemsize < 8:
        return fnp.asarray(fnp.stack([fnp.zeros((), np.int64), low]), dtype=np.uint32)
    high = fnp.bitwise_and(fnp.floor_divide(wide, np.int64(2**32)), MASK32)
    return fnp.asarray(fnp.stack([high, low]), dtype=np.uint32)
