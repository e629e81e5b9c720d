"""lax.rng_bit_generator and rng_uniform against JAX (issue #32): bit for bit in both dtype modes,
under jit and vmap."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest

import fungraph as fg
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

KEYS = [np.array([1, 2, 3, 4], np.uint32), np.array([0xFFFFFFFF, 7, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32),
        np.array([0, 0, 0, 0], np.uint32)]
SHAPES = [(), (1,), (5,), (2, 3), (3, 5), (3, 1, 7), (4, 6), (0,)]


@contextlib.contextmanager
def both_modes(x64: bool) -> Iterator[None]:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        yield


def _same(got: object, want: object) -> None:
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("algorithm", list(lax.RandomAlgorithm))
def test_rng_bit_generator_bit_exact(x64: bool, algorithm: lax.RandomAlgorithm) -> None:
    dts = [np.uint8, np.uint16, np.uint32] + ([np.uint64] if x64 else [])
    with both_modes(x64):
        for key in KEYS:
            for shape in SHAPES:
                for dt in dts:
                    want = jax.lax.rng_bit_generator(key, shape, dt, jax.lax.RandomAlgorithm(int(algorithm)))
                    _same(lax.rng_bit_generator(key, shape, dt, algorithm), want)


def test_rng_bit_generator_jit_vmap_and_u64_key() -> None:
    """Under vmap, JAX's batching rule: every example's bits are one draw from the first key,
    split along the batch, and only the first key advances; also under jit either way round,
    a batch axis other than 0, nested vmap, and a uint64[2] key."""
    keys = np.stack(KEYS)
    for alg in (lax.RandomAlgorithm.RNG_PHILOX, lax.RandomAlgorithm.RNG_THREE_FRY):
        ja = jax.lax.RandomAlgorithm(int(alg))
        got = fg.jit(fg.vmap(lambda k: lax.rng_bit_generator(k, (3, 4), np.uint32, alg)))(keys)
        _same(got, jax.jit(jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (3, 4), np.uint32, ja)))(keys))
        key64 = np.array([2**40 + 3, 2**63 + 5], np.uint64)
        _same(lax.rng_bit_generator(key64, (7,), np.uint64, alg),
              jax.lax.rng_bit_generator(jnp.asarray(key64), (7,), np.uint64, ja))
    nested = np.stack([keys, keys + 1])
    for api, rbg in ((fg, lax.rng_bit_generator), (jax, jax.lax.rng_bit_generator)):
        outs = [api.vmap(api.jit(lambda k: rbg(k, (2,), np.uint8)), in_axes=1, out_axes=1)(keys.T),  # noqa: B023
                api.vmap(api.vmap(lambda k: rbg(k, (2,))))(nested)]  # noqa: B023
        if api is fg:
            got = outs
    for a, b in zip(got, outs, strict=True):
        _same(a, b)


def test_rng_bit_generator_errors() -> None:
    with pytest.raises(TypeError, match="unsupported dtype"):
        lax.rng_bit_generator(KEYS[0], (3,), np.int32)
    with pytest.raises(TypeError, match="uint32\\[4\\]"):
        lax.rng_bit_generator(KEYS[0][:2], (3,))
    assert str(lax.RandomAlgorithm.RNG_PHILOX) == str(jax.lax.RandomAlgorithm.RNG_PHILOX)


@pytest.mark.parametrize("x64", [True, False])
def test_rng_uniform(x64: bool) -> None:
    with both_modes(x64):
        for a, b in [(0.0, 1.0), (np.float32(-2), np.float32(3)), (np.int32(0), np.int32(10))]:
            want = jax.lax.rng_uniform(a, b, (500,))
            got = lax.rng_uniform(a, b, (500,))
            assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == (500,)
            assert float(np.min(got)) >= float(a) and float(np.max(got)) < float(b)
        f = fg.jit(lambda lo: lax.rng_uniform(lo, lo + 1.0, (64,)))
        first, second = np.asarray(f(np.float32(1))), np.asarray(f(np.float32(1)))
        assert not np.array_equal(first, second)  # stateful: fresh numbers on every call
    with pytest.raises(ValueError, match="identical dtypes"):
        lax.rng_uniform(np.float32(0), np.int32(1), (2,))
    with pytest.raises(ValueError, match="must be scalars"):
        lax.rng_uniform(np.zeros(2, np.float32), np.float32(1), (2,))
