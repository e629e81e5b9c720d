"""``fungraph.numpy``'s mathematical functions, floating-point routines and bit operations:
the conventions an op-record row cannot show (NaN and infinity edge cases, rounding halves,
derivatives at ties) and the functions checked against numpy on special values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads, shapes
from tests.helpers import SPECIAL_FLOATS, assert_same, check_jit_and_vmap, jax_or_skip


def test_round_is_half_to_even() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(fnp.round(x), np.round(x))
    np.testing.assert_array_equal(fg.jit(fnp.round)(x), np.round(x))


def test_fmax_fmin_nan_conventions() -> None:
    x = np.array([np.nan, 1.0, np.nan, 2.0])
    y = np.array([0.0, np.nan, np.nan, 3.0])
    np.testing.assert_array_equal(fnp.fmax(x, y), np.fmax(x, y))
    np.testing.assert_array_equal(fnp.fmin(x, y), np.fmin(x, y))
    np.testing.assert_array_equal(fnp.maximum(x, y), np.maximum(x, y))


def test_logaddexp_infinities_and_tie_gradient() -> None:
    x = np.array([-np.inf, np.inf, 0.0, -np.inf])
    y = np.array([-np.inf, np.inf, -np.inf, 1.0])
    np.testing.assert_array_equal(fnp.logaddexp(x, y), np.logaddexp(x, y))
    gx, gy = fg.grad(lambda a, b: fnp.sum(fnp.logaddexp(a, b)), argnums=(0, 1))(np.zeros(2), np.zeros(2))
    np.testing.assert_allclose(gx, 0.5)
    np.testing.assert_allclose(gy, 0.5)


# --- floating-point decomposition -----------------------------------------------------------------


@settings(max_examples=8)
@given(st.sampled_from([np.float32, np.float64]), shapes(1, 2, 1, 6), st.integers(0, 2**31 - 1))
def test_frexp_nextafter_spacing_match_numpy(dtype: Any, shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = np.concatenate([SPECIAL_FLOATS, rng.normal(size=8) * 10.0 ** rng.integers(-40, 40, 8)])
    with np.errstate(all="ignore"):
        x = rng.choice(pool, shape).astype(dtype)
        y = rng.choice(pool, shape).astype(dtype)
        want_next, want_spacing = np.nextafter(x, y), np.spacing(x)
    m, e = fnp.frexp(x)
    wm, we = np.frexp(x)
    assert_same(m, wm, exact=True)
    assert_same(e, we, exact=True)
    assert (m.dtype, e.dtype) == (wm.dtype, we.dtype)
    got = fnp.nextafter(x, y)
    assert_same(got, want_next, exact=True)
    assert_same(np.signbit(got), np.signbit(want_next))
    assert_same(fg.jit(fnp.nextafter)(x, y), want_next, exact=True)
    assert_same(fnp.spacing(x), want_spacing, exact=True)
    check_jit_and_vmap(fnp.frexp, (x[None].repeat(2, 0),), exact=True)
    check_jit_and_vmap(fnp.spacing, (x[None].repeat(2, 0),), exact=True)


def test_float_decomposition_derivatives_and_integer_inputs() -> None:
    x = np.array([0.3, -2.5, 7.0, 1e-3])
    check_grads(lambda v: fnp.frexp(v)[0], (x,), order=2)
    assert_same(fg.grad(lambda v: fnp.frexp(v)[0].sum())(x), 2.0 ** -np.frexp(x)[1])
    assert_same(fg.grad(lambda v: (fnp.nextafter(v, 9.0) + fnp.spacing(v)).sum())(x), np.zeros(4))
    assert fnp.frexp(np.arange(3))[0].dtype == np.float64 and fnp.nextafter(1, 2) == np.nextafter(1.0, 2.0)
    with pytest.raises(TypeError, match="complex"):
        fnp.frexp(np.array([1j]))


# --- bits -----------------------------------------------------------------------------------------


@settings(max_examples=8)
@given(shapes(1, 3, 1, 11), st.sampled_from([None, 0, -1]), st.sampled_from(["big", "little"]),
       st.integers(0, 2**31 - 1))
def test_packbits_unpackbits_bitwise_count_match_numpy(shape: tuple[int, ...], axis: Any, order: str,
                                                       seed: int) -> None:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, shape)
    packed = fnp.packbits(bits, axis, order)
    want = np.packbits(bits.astype(np.uint8), axis, bitorder=order)
    assert_same(packed, want)
    assert packed.dtype == np.uint8
    data = rng.integers(0, 256, shape).astype(np.uint8)
    unpacked = fnp.unpackbits(data, axis, bitorder=order)
    assert_same(unpacked, np.unpackbits(data.astype(np.uint8), axis, bitorder=order))
    assert unpacked.dtype == np.uint8
    for count in (3, -5, 20):
        assert_same(fnp.unpackbits(data, axis, count, order), np.unpackbits(data.astype(np.uint8), axis, count, order))
    for dt in (np.int32, np.int64):
        info = np.iinfo(dt)
        v = np.concatenate([rng.integers(info.min, info.max, 20, dtype=dt), [info.min, info.max, -1, 0]]).astype(dt)
        got = fnp.bitwise_count(v)
        assert_same(got, np.bitwise_count(v))
        assert got.dtype == np.uint8
    assert_same(fnp.bitwise_count(bits > 0), np.bitwise_count(bits > 0))


@pytest.mark.parametrize("mode", ["x64", "x32"])
@pytest.mark.parametrize("dt", ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"])
def test_bit_packing_dtypes_match_jax(dt: str, mode: str, request: pytest.FixtureRequest) -> None:
    jax, jnp = jax_or_skip()
    if mode == "x32":
        request.getfixturevalue("x32")
    x = np.array([1, 0, 3, 5, 7, 0, 1, 2, 9], dtype=dt)
    with jax.enable_x64(mode == "x64"):
        for name in ("packbits", "bitwise_count", "unpackbits"):
            try:
                want = np.asarray(getattr(jnp, name)(x))
            except TypeError:
                with pytest.raises(TypeError, match="uint8"):
                    getattr(fnp, name)(x)
                continue
            for got in (getattr(fnp, name)(x), fg.jit(getattr(fnp, name))(x)):
                assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
                np.testing.assert_array_equal(got, want)


def test_bit_functions_trace() -> None:
    rng = np.random.default_rng(5)
    check_jit_and_vmap(lambda b: fnp.packbits(b, axis=-1, bitorder="little"), (rng.integers(0, 2, (3, 2, 11)),))
    check_jit_and_vmap(lambda b: fnp.unpackbits(b, count=5), (rng.integers(0, 256, (3, 2)).astype(np.uint8),))
    check_jit_and_vmap(fnp.bitwise_count, (rng.integers(-(2**40), 2**40, (3, 5)),))
    with pytest.raises(TypeError, match="integer"):
        fnp.packbits(np.ones(3))
    with pytest.raises(TypeError, match="byte"):
        fnp.unpackbits(np.ones(3))
