"""``fungraph.scipy.signal`` (convolve/correlate, 1-d to 3-d, and the 2-d variants with
boundaries) against ``scipy.signal``: values for hypothesis-drawn shapes and dtypes, derivatives
against finite differences, jit, and vmap against a Python loop. ``fungraph.scipy.integrate``
(odeint with its adjoint gradient) against SciPy, closed forms and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph.scipy import signal as fs
from fungraph.testing import arrays, check_grads

MODES = ("full", "same", "valid")
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _tol(dtype: np.dtype) -> float:
    return 2e-4 if dtype == np.float32 else 1e-10


@st.composite
def _pair(draw: st.DrawFn, ndims: tuple[int, ...] = (1, 2, 3), modes: tuple[str, ...] = MODES) -> tuple:
    """(in1, in2, mode) of one rank and dtype; "valid" gets shapes where one input is at least
    as large as the other in every dimension (in either order)."""
    nd = draw(st.sampled_from(ndims), label="ndim")
    dtype = draw(st.sampled_from(FLOATS), label="dtype")
    mode = draw(st.sampled_from(modes), label="mode")
    s1 = draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd), label="shape1")
    s2 = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd), label="shape2")
    if mode == "valid":
        big = [max(a, b) for a, b in zip(s1, s2)]
        small = [min(a, b) for a, b in zip(s1, s2)]
        s1, s2 = (big, small) if draw(st.booleans(), label="in1 larger") else (small, big)
    a = draw(arrays(dtype, tuple(s1), -2.0, 2.0), label="in1")
    b = draw(arrays(dtype, tuple(s2), -2.0, 2.0), label="in2")
    return a, b, mode


def _scipy(name: str, a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    return getattr(ss, name)(a, b, mode, method="direct")


# --- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=25)
@given(case=_pair())
def test_nd_values_match_scipy(name: str, case: tuple) -> None:
    a, b, mode = case
    got = getattr(fs, name)(a, b, mode)
    want = _scipy(name, a, b, mode)
    assert np.asarray(got).dtype == a.dtype
    assert np.shape(got) == want.shape, (a.shape, b.shape, mode)
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@settings(max_examples=25)
@given(case=_pair(ndims=(2,)), boundary=st.sampled_from(["fill", "wrap", "symm"]),
       fillvalue=st.sampled_from([0.0, 1.5]))
def test_2d_values_match_scipy(name: str, case: tuple, boundary: str, fillvalue: float) -> None:
    a, b, mode = case
    got = getattr(fs, name)(a, b, mode, boundary, fillvalue)
    want = getattr(ss, name)(a, b, mode, boundary, fillvalue)
    assert np.asarray(got).dtype == a.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


def test_mixed_and_integer_dtypes_promote() -> None:
    a32 = np.arange(5, dtype=np.float32)
    assert np.asarray(fs.convolve(a32, np.ones(3))).dtype == np.float64
    assert np.asarray(fs.convolve(a32, 2.0 * np.ones(3, np.float32))).dtype == np.float32
    got = fs.correlate(np.arange(6), np.array([1, 2]), "valid")
    np.testing.assert_array_equal(np.asarray(got), ss.correlate(np.arange(6), np.array([1, 2]), "valid"))
    assert np.asarray(got).dtype == np.float64


def test_scalars_multiply() -> None:
    assert float(fs.convolve(np.float64(3.0), np.float64(2.0))) == 6.0


# --- errors -----------------------------------------------------------------------------------


def test_valid_mode_error_names_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"'valid' mode.*\(3, 5\) and \(4, 2\)"):
        fs.convolve(np.ones((3, 5)), np.ones((4, 2)), "valid")
    with pytest.raises(ValueError, match=r"'valid' mode.*\(3, 5\) and \(4, 2\)"):
        fs.correlate2d(np.ones((3, 5)), np.ones((4, 2)), "valid")


def test_bad_arguments_raise_clearly() -> None:
    with pytest.raises(ValueError, match=r"same dimensionality.*\(3,\) and \(2, 2\)"):
        fs.convolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="mode flags"):
        fs.correlate(np.ones(3), np.ones(2), "circular")
    with pytest.raises(ValueError, match="method flags"):
        fs.correlate(np.ones(3), np.ones(2), method="overlap")
    with pytest.raises(ValueError, match=r"cannot be empty.*\(0,\)"):
        fs.convolve(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match=r"2-D arrays.*\(3,\)"):
        fs.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="boundary flags"):
        fs.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")


# --- transformations --------------------------------------------------------------------------


def _f64(case: tuple) -> tuple:
    a, b, mode = case
    return a.astype(np.float64), b.astype(np.float64), mode


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=8)
@given(case=_pair())
def test_nd_derivatives_match_finite_differences(name: str, case: tuple) -> None:
    a, b, mode = _f64(case)
    fun = getattr(fs, name)
    check_grads(lambda x, y: fun(x, y, mode), (a, b), order=2)


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@settings(max_examples=6)
@given(case=_pair(ndims=(2,)), boundary=st.sampled_from(["fill", "wrap", "symm"]))
def test_2d_derivatives_match_finite_differences(name: str, case: tuple, boundary: str) -> None:
    a, b, mode = _f64(case)
    fun = getattr(fs, name)
    check_grads(lambda x, y, v: fun(x, y, mode, boundary, v), (a, b, np.float64(0.7)), order=1)


@pytest.mark.parametrize("name", ["convolve", "correlate", "convolve2d", "correlate2d"])
@settings(max_examples=6)
@given(case=_pair(ndims=(2,)))
def test_jit_matches_eager(name: str, case: tuple) -> None:
    a, b, mode = case
    fun = getattr(fs, name)
    got = fg.jit(lambda x, y: fun(x, y, mode))(a, b)
    np.testing.assert_allclose(np.asarray(got), np.asarray(fun(a, b, mode)), rtol=_tol(a.dtype), atol=_tol(a.dtype))
    g = fg.jit(fg.grad(lambda x, y: (fun(x, y, mode) ** 2).sum(), argnums=(0, 1)))(a, b)
    want = fg.grad(lambda x, y: (fun(x, y, mode) ** 2).sum(), argnums=(0, 1))(a, b)
    for gi, wi in zip(g, want):
        np.testing.assert_allclose(np.asarray(gi), np.asarray(wi), rtol=10 * _tol(a.dtype), atol=10 * _tol(a.dtype))


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@settings(max_examples=10)
@given(case=_pair(ndims=(1, 2)), size=st.integers(1, 3), which=st.sampled_from(["in1", "in2", "both"]),
       seed=st.integers(0, 2**31 - 1))
def test_vmap_matches_a_loop(name: str, case: tuple, size: int, which: str, seed: int) -> None:
    a, b, mode = case
    fun = getattr(fs, name)
    rng = np.random.default_rng(seed)
    a_batch = np.stack([a + rng.standard_normal(a.shape).astype(a.dtype) for _ in range(size)])
    b_batch = np.stack([b + rng.standard_normal(b.shape).astype(b.dtype) for _ in range(size)])
    axes = {"in1": (0, None), "in2": (None, 0), "both": (0, 0)}[which]
    args = (a_batch if axes[0] == 0 else a, b_batch if axes[1] == 0 else b)
    got = fg.vmap(lambda x, y: fun(x, y, mode), in_axes=axes)(*args)
    want = np.stack([_scipy(name, a_batch[k] if axes[0] == 0 else a, b_batch[k] if axes[1] == 0 else b, mode)
                     for k in range(size)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(a.dtype), atol=_tol(a.dtype))


def test_gradient_of_a_1d_convolution_is_a_correlation() -> None:
    """d/dx sum(c * convolve(x, w)) = correlate(c, w, "valid") (the adjoint of full convolution)."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(7), rng.standard_normal(3)
    c = rng.standard_normal(9)
    g = fg.grad(lambda x: (c * fs.convolve(x, w)).sum())(x)
    np.testing.assert_allclose(np.asarray(g), ss.correlate(c, w, "valid"), rtol=1e-12, atol=1e-12)
