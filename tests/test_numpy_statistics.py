"""``fungraph.numpy``'s sorting, cumulative functions, statistics and histograms: sizes under a
trace, edges and out-of-range values, all-NaN slices, empty axes, and derivatives through
sorting and cumulative sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.testing import check_grads
from tests.helpers import assert_same, check_jit_and_vmap, jax_or_skip


def test_sort_gradient_follows_the_permutation() -> None:
    x = np.array([3.0, -1.0, 2.0, 0.5])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    g = fg.grad(lambda x: fnp.sum(fnp.sort(x) * w))(x)
    np.testing.assert_array_equal(g, w[np.argsort(np.argsort(x))])


def test_cumsum_transpose_is_reversed_cumsum() -> None:
    x = np.arange(5.0)
    ct = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    _, pullback = fg.vjp(lambda x: fnp.cumsum(x), x)
    (g,) = pullback(ct)
    np.testing.assert_array_equal(g, np.cumsum(ct[::-1])[::-1])


def test_nanquantile_of_an_all_nan_slice_is_nan() -> None:
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(fnp.nanmedian(x, axis=1), [np.nan, 1.0])
    np.testing.assert_array_equal(fg.jit(lambda v: fnp.nanquantile(v, 0.3, axis=1))(x), [np.nan, 1.0])


@pytest.mark.parametrize("shape", [(2, 0), (0, 3), (2, 3), ()])
def test_all_and_any_of_empty_axes_match_numpy(shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(0).random(shape) < 0.5
    for name in ("all", "any"):
        for axis in (None, 0, 1, (0, 1), -1) if shape else (None,):
            for keep in (False, True):
                want = getattr(np, name)(a, axis=axis, keepdims=keep)
                for got in (getattr(fnp, name)(a, axis=axis, keepdims=keep),
                            fg.jit(lambda x: getattr(fnp, name)(x, axis=axis, keepdims=keep))(a)):
                    got = np.asarray(got)
                    assert got.shape == want.shape and got.dtype == want.dtype, (name, axis, keep)
                    np.testing.assert_array_equal(got, want)


# --- histograms -----------------------------------------------------------------------------------


def test_bincount_sizes_like_numpy_eagerly_and_needs_length_under_jit() -> None:
    x = np.array([0, 3, 3, 1, 9])
    np.testing.assert_array_equal(fnp.bincount(x), np.bincount(x))
    np.testing.assert_array_equal(fnp.bincount(x, minlength=12), np.bincount(x, minlength=12))
    np.testing.assert_array_equal(fg.jit(lambda v: fnp.bincount(v, length=4))(x), [1, 1, 0, 2])
    with pytest.raises(TypeError, match="length="):
        fg.jit(fnp.bincount)(x)
    with pytest.raises(ValueError, match="non-negative"):
        fnp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="integer"):
        fnp.bincount(np.array([1.0]))
    w = np.array([0.5, 1.0, 2.0, 4.0, 8.0], np.float32)
    assert fnp.bincount(x, w).dtype == np.float32


def test_histogram_edges_and_out_of_range_values() -> None:
    a = np.array([-5.0, 0.0, 0.5, 1.0, 1.0, 2.0, 7.0])
    for bins, rng in ((np.array([0.0, 0.5, 1.0, 2.0]), None), (3, (0.0, 2.0)), (4, None)):
        got, want = fnp.histogram(a, bins, rng), np.histogram(a, bins, rng)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1])
    np.testing.assert_array_equal(fnp.histogram(np.full(3, 2.0), 2)[1], np.histogram(np.full(3, 2.0), 2)[1])
    with pytest.raises(NotImplementedError, match="auto"):
        fnp.histogram(a, "auto")
    with pytest.raises(ValueError, match="range"):
        fnp.histogram(a, 3, (2.0, 1.0))


@settings(max_examples=6)
@given(st.integers(1, 3), st.integers(1, 30), st.integers(1, 4), st.booleans(), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_histogramdd_matches_numpy(d: int, n: int, nbins: int, weighted: bool, ranged: bool,
                                           seed: int) -> None:
    rng = np.random.default_rng(seed)
    sample = np.round(rng.normal(size=(n, d)), 1)
    w = rng.uniform(size=n) if weighted else None
    rng_ = [(-1.0, 1.0)] * d if ranged else None
    bins = [nbins + k for k in range(d)]
    for density in (None, True):
        got, edges = fnp.histogramdd(sample, bins, rng_, w, density)
        want, wedges = np.histogramdd(sample, bins, rng_, weights=w, density=density)
        assert_same(got, want)
        assert got.dtype == (np.int64 if w is None and not density else np.float64)
        for e, we in zip(edges, wedges):
            assert_same(e, we)
    if d == 2:
        got2 = fnp.histogram2d(sample[:, 0], sample[:, 1], nbins, rng_, w)
        want2 = np.histogram2d(sample[:, 0], sample[:, 1], nbins, rng_, weights=w)
        for g, wv in zip(got2, want2):
            assert_same(g, wv)
        edges = np.linspace(-2, 2, 6)
        got_e = fnp.histogram2d(sample[:, 0], sample[:, 1], edges)[0]
        assert_same(got_e, np.histogram2d(sample[:, 0], sample[:, 1], edges)[0])


def test_histogramdd_traces_and_differentiates_in_the_weights() -> None:
    rng = np.random.default_rng(3)
    pts, w = rng.uniform(size=(3, 20, 2)), rng.uniform(size=(3, 20))
    f = lambda s, v: fnp.histogramdd(s, [2, 3], [(0, 1), (0, 1)], v, density=True)[0]
    check_jit_and_vmap(f, (pts, w))
    check_jit_and_vmap(lambda x, y: fnp.histogram2d(x, y, 3)[0], (pts[..., 0], pts[..., 1]))
    check_grads(lambda v: f(pts[0], v), (w[0],), order=2)


def test_var_std_with_given_mean_match_jax() -> None:
    """``var``/``std``/``nanvar``/``nanstd`` take JAX's ``mean=`` (the mean, shaped as with keepdims)."""
    _, jnp_ = jax_or_skip()
    x = np.random.default_rng(7).normal(size=(4, 5))
    x[1, 2] = np.nan
    for name in ("var", "std", "nanvar", "nanstd"):
        for axis in (0, 1, None):
            m = np.nanmean(x, axis=axis, keepdims=True) + 0.25
            for ddof in (0, 1):
                got = getattr(fnp, name)(x, axis=axis, mean=m, ddof=ddof)
                want = getattr(jnp_, name)(x, axis=axis, mean=m, ddof=ddof)
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, equal_nan=True)
