"""``fungraph.scipy.stats``' ``mode``, ``rankdata``, ``sem`` and ``gaussian_kde`` against JAX 0.10's
``jax.scipy.stats``: values, shapes and dtypes in both dtype modes, the keyword variants, jit,
vmap and gradients, and the refusals JAX makes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy import stats as fstats
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jstats = jax.scipy.stats

INTS = np.array([[1, 2, 1, 3, 2, 1], [3, 1, 3, 2, 1, 3], [1, 2, 2, 3, 1, 2]])
FLOATS = np.array([[1.5, 2.0, 1.0, 3.0, 2.0, 1.0], [3.0, 1.0, np.nan, 2.0, 1.0, 3.0], [1.0, 2.0, 2.0, 3.0, 1.0, 2.0]])
TIES = np.array([10.0, 30.0, 20.0, 30.0, 10.0, 10.0, -1.0])
AXES: list[dict[str, Any]] = [{}, {"axis": 1}, {"axis": -1}, {"axis": None}, {"axis": 1, "keepdims": True},
                              {"axis": None, "keepdims": True}]
RNG = np.random.default_rng(0)
DATA_1D = RNG.standard_normal(30)
DATA_2D = RNG.standard_normal((2, 40))
WEIGHTS = RNG.uniform(0.5, 2.0, 40)


def _same(got: Any, want: Any, x64: bool, what: str, exact: bool = False) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != JAX's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != JAX's {want.shape}"
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12 if got.dtype == np.float64 else 2e-5, atol=0, err_msg=what)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("data", [INTS, FLOATS.astype(np.float32)], ids=["int", "float32"])
def test_mode_and_sem_match_jax(data: np.ndarray, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for kw in AXES:
            for g, w in zip(fstats.mode(data, **kw), jstats.mode(data, **kw)):
                _same(g, w, x64, f"mode {kw}", exact=True)
            for policy in ("propagate", "omit"):
                _same(fstats.sem(data, nan_policy=policy, **kw), jstats.sem(data, nan_policy=policy, **kw), x64,
                      f"sem {policy} {kw}")
        _same(fstats.sem(data, ddof=0), jstats.sem(data, ddof=0), x64, "sem ddof=0")
        for g, w in zip(fg.jit(fstats.mode)(data), jstats.mode(data)):
            _same(g, w, x64, "mode under jit", exact=True)
        for g, w in zip(fg.vmap(fstats.mode)(data), jax.vmap(jstats.mode)(data)):
            _same(g, w, x64, "vmap(mode)", exact=True)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata_matches_jax(method: str, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for data in (INTS, FLOATS.astype(np.float32), TIES):
            for kw in ({}, {"axis": 0}, {"axis": -1}):
                if data.ndim == 1 and kw.get("axis", 0) != 0 and kw:
                    continue
                _same(fstats.rankdata(data, method, **kw), jstats.rankdata(data, method, **kw), x64,
                      f"rankdata {method} {kw}", exact=True)
        _same(fg.jit(lambda v: fstats.rankdata(v, method))(TIES), jstats.rankdata(TIES, method), x64,
              "rankdata under jit", exact=True)
        _same(fg.vmap(lambda v: fstats.rankdata(v, method))(INTS), jax.vmap(lambda v: jstats.rankdata(v, method))(INTS),
              x64, "vmap(rankdata)", exact=True)


def test_sem_gradient_matches_jax() -> None:
    x = np.array([0.5, 1.0, 3.0, -2.0, 0.25])
    _same(fg.grad(lambda v: fstats.sem(v))(x), jax.grad(lambda v: jstats.sem(v))(x), True, "grad of sem")


def test_refusals_follow_jax() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        fstats.rankdata(TIES, "median")
    for fun in (fstats.rankdata, fstats.mode):
        with pytest.raises(ValueError, match="nan_policy"):
            fun(TIES, nan_policy="ignore")
        for policy in ("omit", "raise"):
            with pytest.raises(NotImplementedError):
                fun(TIES, nan_policy=policy)
    with pytest.raises(ValueError, match="not supported"):
        fstats.sem(TIES, nan_policy="raise")


KDE_CASES: list[tuple[np.ndarray, dict[str, Any], np.ndarray]] = [
    (DATA_1D, {}, np.linspace(-3.0, 3.0, 7)),
    (DATA_2D, {"weights": WEIGHTS}, RNG.standard_normal((2, 5))),
    (DATA_2D, {"bw_method": "silverman"}, RNG.standard_normal((2, 5))),
    (DATA_1D, {"bw_method": 0.3}, np.linspace(-3.0, 3.0, 7)),
    (DATA_2D, {"bw_method": lambda kde: 0.5}, np.array([0.3, -0.2])),
]


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("case", range(len(KDE_CASES)))
def test_gaussian_kde_matches_jax(case: int, x64: bool) -> None:
    data, kw, points = KDE_CASES[case]
    with fg.enable_x64(x64), jax.enable_x64(x64):
        ours, theirs = fstats.gaussian_kde(data, **kw), jstats.gaussian_kde(data, **kw)
        for name in ("neff", "dataset", "weights", "covariance", "inv_cov"):
            _same(getattr(ours, name), getattr(theirs, name), x64, name)
        assert (ours.d, ours.n) == (theirs.d, theirs.n)
        for name in ("evaluate", "pdf", "logpdf", "__call__"):
            _same(getattr(ours, name)(points), getattr(theirs, name)(points), x64, name)
        eye = np.eye(ours.d)
        _same(ours.integrate_gaussian(np.zeros(ours.d), eye), theirs.integrate_gaussian(np.zeros(ours.d), eye), x64,
              "integrate_gaussian")
        _same(ours.integrate_kde(fstats.gaussian_kde(data[..., :7])),
              theirs.integrate_kde(jstats.gaussian_kde(data[..., :7])), x64, "integrate_kde")
        if ours.d == 1:
            _same(ours.integrate_box_1d(-0.5, 1.0), theirs.integrate_box_1d(-0.5, 1.0), x64, "integrate_box_1d")
        drawn = ours.resample(fg.random.PRNGKey(3), (4,))
        want = theirs.resample(jax.random.PRNGKey(3), (4,))
        assert np.asarray(drawn).shape == np.asarray(want).shape == (ours.d, 4)
        np.testing.assert_allclose(np.asarray(drawn), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_gaussian_kde_is_a_pytree_through_jit_and_grad() -> None:
    points = np.linspace(-3.0, 3.0, 7)
    got = fg.jit(lambda kde, p: kde.evaluate(p))(fstats.gaussian_kde(DATA_1D), points)
    _same(got, jstats.gaussian_kde(DATA_1D).evaluate(points), True, "evaluate under jit")
    got = fg.grad(lambda d: fstats.gaussian_kde(d).logpdf(points).sum())(DATA_1D)
    want = jax.grad(lambda d: jstats.gaussian_kde(d).logpdf(points).sum())(DATA_1D)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10)
    leaves = fg.tree_util.tree_leaves(fstats.gaussian_kde(DATA_1D))
    assert len(leaves) == 5
    with pytest.raises(AttributeError, match="immutable"):
        fstats.gaussian_kde(DATA_1D).neff = 3.0


def test_gaussian_kde_refusals_follow_jax() -> None:
    kde = fstats.gaussian_kde(DATA_2D)
    with pytest.raises(ValueError, match="multiple elements"):
        fstats.gaussian_kde(np.array([1.0]))
    with pytest.raises(ValueError, match="length n"):
        fstats.gaussian_kde(DATA_2D, weights=WEIGHTS[:5])
    with pytest.raises(ValueError, match="bw_method"):
        fstats.gaussian_kde(DATA_1D, bw_method="wide")
    with pytest.raises(ValueError, match="dimension 3, dataset has dimension 2"):
        kde.evaluate(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="1D pdfs"):
        kde.integrate_box_1d(0.0, 1.0)
    with pytest.raises(NotImplementedError):
        kde.integrate_box(np.zeros(2), np.ones(2))
    with pytest.raises(NotImplementedError):
        fstats.gaussian_kde(DATA_1D + 0j)
