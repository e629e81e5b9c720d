"""``isclose``/``allclose`` on complex inputs, against JAX (issue #32 item 7; a ShapeError before)."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

A = np.array([1 + 1j, 2 - 1j, np.nan + 0j, np.inf + 1j, 1 + np.inf * 1j, 1e-9j, 3 + 0j, np.nan * 1j])
B = np.array([1 + 1j + 1e-9, 2 - 1.1j, np.nan + 0j, np.inf + 1j, 1 + np.inf * 1j, 0, 3 + 1e-4j, 1 + 0j])


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_isclose_complex_matches_jax(equal_nan: bool, dtype: type) -> None:
    a, b = A.astype(dtype), B.astype(dtype)
    want = np.asarray(jnp.isclose(a, b, equal_nan=equal_nan))
    np.testing.assert_array_equal(fnp.isclose(a, b, equal_nan=equal_nan), want)
    np.testing.assert_array_equal(fg.jit(lambda x, y: fnp.isclose(x, y, equal_nan=equal_nan))(a, b), want)


def test_isclose_mixed_real_and_complex_and_tolerances_match_jax() -> None:
    real = np.array([1.0, 2.0, 3.0])
    cplx = np.array([1 + 1e-6j, 2 + 0.1j, 3.0 + 0j])
    for rtol, atol in ((1e-5, 1e-8), (0.1, 0.0), (0.0, 1e-3)):
        np.testing.assert_array_equal(fnp.isclose(real, cplx, rtol, atol), jnp.isclose(real, cplx, rtol, atol))
    assert bool(fnp.allclose(cplx, cplx + 1e-12)) is bool(jnp.allclose(cplx, cplx + 1e-12)) is True
    assert bool(fnp.allclose(cplx, real)) is bool(jnp.allclose(cplx, real)) is False
    assert bool(fg.jit(fnp.allclose)(cplx, cplx)) is True
