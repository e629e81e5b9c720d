"""``searchsorted`` (binary search, NaN last), ``interp`` (``period``, ``"extrapolate"``) and
``nn.one_hot`` (``axis``), against JAX in both dtype modes."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.complex64])
def test_searchsorted_matches_jax(x64: bool, dtype: type) -> None:
    jax, jnp = jax_or_skip()
    a = np.sort(RNG.integers(-4, 5, 9)).astype(dtype)
    v = RNG.integers(-6, 7, (3, 4)).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        a = np.append(a, [np.inf, np.nan]).astype(dtype)
        v.flat[:3] = [np.nan, -np.inf, np.inf]
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for side in ("left", "right"):
            ours, theirs = fnp.searchsorted(a, v, side=side), jnp.searchsorted(a, v, side=side)
            np.testing.assert_array_equal(ours, theirs)
            assert ours.dtype == theirs.dtype
            np.testing.assert_array_equal(fg.jit(lambda p, q: fnp.searchsorted(p, q, side=side))(a, v), theirs)
        order = RNG.permutation(a.shape[0])
        np.testing.assert_array_equal(fnp.searchsorted(a[order], v, sorter=np.argsort(a[order], kind="stable")),
                                      np.searchsorted(a[order], v, sorter=np.argsort(a[order], kind="stable")))


def test_searchsorted_memory_is_the_queries_size() -> None:
    """The search takes log2(len(a)) steps over ``v``: 10^6 queries into 10^5 sorted values
    would need 10^11 comparisons held at once by a compare-all search."""
    a = np.sort(RNG.random(100_000))
    v = RNG.random(1_000_000)
    np.testing.assert_array_equal(fnp.searchsorted(a, v), np.searchsorted(a, v))
    graph = fg.make_graph(lambda p, q: fnp.searchsorted(p, q))(a, v)
    assert max(int(np.prod(var.aval.shape)) for e in graph.eqns for var in e.outputs) <= v.size


@pytest.mark.parametrize("kw", [{}, {"left": -1.0, "right": 2.0}, {"left": "extrapolate"},
                                {"right": "extrapolate"}, {"left": "extrapolate", "right": "extrapolate"},
                                {"period": 3.0}, {"period": -4.0}])
def test_interp_matches_jax(kw: dict) -> None:
    jax, jnp = jax_or_skip()
    x = RNG.uniform(-5, 15, 40)
    xp, fp = np.sort(RNG.uniform(0, 10, 7)), RNG.normal(size=7)
    np.testing.assert_allclose(fnp.interp(x, xp, fp, **kw), jnp.interp(x, xp, fp, **kw), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fg.jit(lambda x: fnp.interp(x, xp, fp, **kw))(x), jnp.interp(x, xp, fp, **kw),
                               rtol=1e-12, atol=1e-12)
    ours = fg.grad(lambda x, f: (fnp.interp(x, xp, f, **kw) ** 2).sum(), argnums=(0, 1))(x, fp)
    theirs = jax.grad(lambda x, f: (jnp.interp(x, xp, f, **kw) ** 2).sum(), argnums=(0, 1))(x, fp)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="'extrapolate'"):
        fnp.interp(x, xp, fp, left="nearest")


@pytest.mark.parametrize("x64", [False, True])
def test_one_hot_axis_and_dtype_match_jax(x64: bool) -> None:
    jax, _ = jax_or_skip()
    labels = np.array([[0, 2, 5], [1, -1, 3]])
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for kw in ({}, {"axis": 0}, {"axis": 1}, {"axis": -2}, {"dtype": np.int32}, {"axis": 2, "dtype": bool}):
            ours, theirs = fg.nn.one_hot(labels, 4, **kw), jax.nn.one_hot(labels, 4, **kw)
            assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype), kw
            np.testing.assert_array_equal(ours, theirs)
