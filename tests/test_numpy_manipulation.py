"""``fungraph.numpy``'s array manipulation beyond the op records: ``block``, ``trim_zeros``, and the
aliases, windows and constructors that share their conventions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.core import ConcretizationError
from fungraph.testing import shapes
from tests.helpers import assert_same, jax_or_skip


def test_block_shift_aliases_window_and_array_constructors() -> None:
    np.testing.assert_array_equal(fnp.block([[1, 2], [3, 4]]), np.block([[1, 2], [3, 4]]))
    with pytest.raises(TypeError, match="tuples"):
        fnp.block((np.ones(2), np.ones(2)))
    v, s = np.array([5, -5, 1 << 40]), np.array([1, 2, 63])
    np.testing.assert_array_equal(fnp.bitwise_left_shift(v, s), np.left_shift(v, s))
    np.testing.assert_array_equal(fnp.bitwise_right_shift(v, s), np.right_shift(v, s))
    for m, beta in ((1, 3.0), (8, 0.0), (11, 8.6)):
        np.testing.assert_allclose(fnp.kaiser(m, beta), np.kaiser(m, beta), rtol=1e-12)
    assert fnp.ascontiguousarray([1, 2]).dtype == np.int64
    assert fnp.asanyarray(np.float32(1)).dtype == np.float32
    np.testing.assert_allclose(fg.grad(lambda b: fnp.sum(fnp.kaiser(6, b)))(2.0),
                               (np.sum(np.kaiser(6, 2.0 + 1e-6)) - np.sum(np.kaiser(6, 2.0 - 1e-6))) / 2e-6,
                               rtol=1e-6)



def test_shifts_of_bools_are_integer_shifts_as_in_jax() -> None:
    """numpy's shifts are ``lax``'s after promotion; bools shift as integers (JAX: int32)."""
    _, jnp = jax_or_skip()
    for x1, x2 in ((True, True), (np.array([True, False]), True), (np.array([True]), np.array([False]))):
        for name in ("left_shift", "right_shift"):
            got, want = getattr(fnp, name)(x1, x2), getattr(jnp, name)(x1, x2)
            np.testing.assert_array_equal(got, np.asarray(want))
            assert got.dtype == want.dtype, (name, x1, x2, got.dtype, want.dtype)

@settings(max_examples=6)
@given(shapes(1, 3, 1, 5), st.sampled_from(["fb", "f", "b", "F"]), st.integers(0, 2**31 - 1))
def test_trim_zeros_matches_numpy(shape: tuple[int, ...], trim: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, shape) * (rng.uniform(size=shape) < 0.3)
    assert_same(fnp.trim_zeros(x, trim), np.trim_zeros(x, trim))
    assert_same(fnp.trim_zeros(x, trim, axis=-1), np.trim_zeros(x, trim, axis=-1))
    with pytest.raises(ConcretizationError):
        fg.jit(fnp.trim_zeros)(x)


def test_joining_with_dtype_matches_jax() -> None:
    """``concatenate``/``stack``/``hstack``/``vstack``/``dstack`` take JAX's ``dtype=`` (issue #32)."""
    _, jnp = jax_or_skip()
    parts = [np.arange(3, dtype=np.int32), np.array([0.5, 1.5, 2.5], np.float32)]
    for dtype in (None, np.float32, np.int32, np.complex64, np.bool_):
        for name in ("concatenate", "stack", "hstack", "vstack", "dstack"):
            got = getattr(fnp, name)(parts, dtype=dtype)
            want = getattr(jnp, name)(parts, dtype=dtype)
            assert np.asarray(got).dtype == np.asarray(want).dtype, (name, dtype)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(NotImplementedError, match="'out' argument"):
        fnp.stack(parts, out=np.zeros((2, 3)))
