"""The distributions of ``fungraph.scipy.stats`` against JAX 0.10's ``jax.scipy.stats``: values
and dtypes in both dtype modes (eagerly and under ``jit``), gradients with respect to every
continuous argument, and ``vmap``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy import stats as fstats
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jstats = jax.scipy.stats


def a(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


X = a(-2.5, -0.7, 0.0, 0.3, 1.0, 2.2, 4.0)
XPOS = a(0.2, 0.9, 1.0, 1.7, 3.5)
K = a(-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.0)
Q = a(0.0, 0.05, 0.3, 0.5, 0.9, 1.0)
QIN = a(0.05, 0.3, 0.5, 0.9)
ANGLE = a(-0.5, 0.0, 1.0, 3.0, 6.0, 7.0)
LOC, SCALE = a(0.4), a(1.7)

#: (distribution, functions, arguments, argnums to differentiate, points to differentiate at)
#: the last entry replaces the first argument for the gradient checks when the values include
#: points where the function is not differentiable (edges of the support).
CASES: list[tuple[str, tuple[str, ...], tuple[np.ndarray, ...], tuple[int, ...], np.ndarray | None]] = [
    ("bernoulli", ("logpmf", "pmf"), (a(-1.0, 0.0, 1.0, 2.0), a(0.3)), (1,), a(0.0, 1.0)),
    ("bernoulli", ("cdf",), (a(-1.0, 0.0, 0.5, 1.0, 2.0), a(0.3)), (1,), None),
    ("bernoulli", ("ppf",), (Q, a(0.3)), (), None),
    ("binom", ("logpmf", "pmf"), (K, a(6.0), a(0.35)), (2,), a(0.0, 2.0, 6.0)),
    ("binom", ("logpmf",), (K, a(6.0), a(0.35), a(1.0)), (2,), None),
    ("betabinom", ("logpmf", "pmf"), (K, a(6.0), a(1.5), a(2.5)), (2, 3), a(0.0, 2.0, 6.0)),
    ("geom", ("logpmf", "pmf"), (K, a(0.3)), (1,), a(1.0, 2.0, 5.0)),
    ("geom", ("logpmf",), (K, a(0.3), a(2.0)), (1,), None),
    ("nbinom", ("logpmf", "pmf"), (K, a(3.0), a(0.4)), (1, 2), a(0.0, 2.0, 5.0)),
    ("cauchy", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, LOC, SCALE), (0, 1, 2), None),
    ("cauchy", ("ppf", "isf"), (QIN, LOC, SCALE), (0, 1, 2), None),
    ("expon", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, LOC, SCALE), (0, 1, 2), XPOS),
    ("expon", ("ppf",), (Q, LOC, SCALE), (0, 1, 2), QIN),
    ("laplace", ("logpdf", "pdf", "cdf"), (X, LOC, SCALE), (0, 1, 2), None),
    ("logistic", ("logpdf", "pdf", "cdf", "sf"), (X, LOC, SCALE), (0, 1, 2), None),
    ("logistic", ("ppf", "isf"), (QIN, LOC, SCALE), (0, 1, 2), None),
    ("uniform", ("logpdf", "pdf", "cdf"), (X, LOC, SCALE), (1, 2), a(0.5, 1.0, 1.5)),
    ("uniform", ("ppf",), (Q, LOC, SCALE), (0, 1, 2), None),
    ("pareto", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, a(2.5), LOC, a(0.5)), (0, 1, 2, 3),
     a(1.0, 2.2, 4.0)),
    ("pareto", ("ppf",), (Q, a(2.5), LOC, a(0.5)), (0, 1, 2, 3), QIN),
    ("gumbel_l", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, LOC, SCALE), (0, 1, 2), None),
    ("gumbel_l", ("ppf",), (Q, LOC, SCALE), (0, 1, 2), QIN),
    ("gumbel_r", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, LOC, SCALE), (0, 1, 2), None),
    ("gumbel_r", ("ppf",), (Q, LOC, SCALE), (0, 1, 2), QIN),
    ("gumbel_l", ("logpdf", "cdf"), (X, LOC, a(-1.0)), (), None),
    ("truncnorm", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (X, a(-1.0), a(2.0), LOC, SCALE),
     (0, 1, 2, 3, 4), a(-0.7, 0.0, 0.3, 1.0, 2.2)),
    ("truncnorm", ("logpdf",), (a(-12.0, -9.0, -8.5), a(-13.0), a(-8.0)), (0, 1, 2), None),
    ("truncnorm", ("logpdf",), (a(8.5, 9.0, 12.0), a(8.0), a(13.0)), (0, 1, 2), None),
    ("truncnorm", ("logcdf", "logsf"), (a(-12.0, -9.0, -8.5, 8.5, 9.0, 12.0), a(-13.0, -13.0, -13.0, 8.0, 8.0, 8.0),
                                       a(-8.0, -8.0, -8.0, 13.0, 13.0, 13.0)), (), None),
    ("truncnorm", ("logpdf", "cdf"), (X, a(1.0), a(1.0)), (), None),
    ("vonmises", ("logpdf", "pdf"), (ANGLE, a(2.5)), (0, 1), None),
    ("vonmises", ("logpdf",), (ANGLE, a(0.0)), (), None),
    ("wrapcauchy", ("logpdf", "pdf"), (ANGLE, a(0.4)), (0, 1), a(0.0, 1.0, 3.0, 6.0)),
    ("wrapcauchy", ("logpdf",), (ANGLE, a(1.2)), (), None),
    ("gennorm", ("logpdf", "pdf", "cdf"), (X, a(1.5)), (0, 1), a(-2.5, -0.7, 0.3, 1.0, 2.2)),
    ("beta", ("logsf",), (a(0.1, 0.4, 0.8), a(2.0), a(3.0)), (0,), None),
    ("gamma", ("logsf",), (XPOS, a(2.0)), (0, 1), None),
    ("chi2", ("logsf",), (XPOS, a(3.0)), (0, 1), None),
    ("norm", ("isf",), (Q, LOC, SCALE), (0, 1, 2), QIN),
    ("poisson", ("entropy",), (a(0.0, 0.5, 3.0, 9.9, 10.0, 42.0, 99.0, 100.0, 350.0),), (), None),
]

#: JAX's own error where it is larger than ours (``test_betabinom_matches_scipy`` checks ours).
JAX_TOL64 = {"betabinom": 2e-6}  # JAX's betaln is off by ~1e-6 relative, e.g. betaln(1.5, 8.5)

#: Functions JAX cannot differentiate (its xlogy(-1, scale) / xlog1py(-1, -p) meet a float0
#: tangent for the integer -1): checked against finite differences instead.
JAX_NO_GRAD = {("gumbel_l", "logpdf"), ("gumbel_l", "pdf"), ("gumbel_l", "ppf"), ("gumbel_r", "logpdf"),
               ("gumbel_r", "pdf"), ("gumbel_r", "ppf")}

IDS = [f"{d}.{'/'.join(fs)}-{i}" for i, (d, fs, *_rest) in enumerate(CASES)]


def _mode_args(args: tuple[np.ndarray, ...], x64: bool) -> tuple[np.ndarray, ...]:
    return args if x64 else tuple(v.astype(np.float32) for v in args)


def _close(got: Any, want: Any, x64: bool, what: str, tol64: float = 1e-10) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != JAX's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != JAX's {want.shape}"
    tol = tol64 if x64 else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def _funs(dist: str, name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    return getattr(getattr(fstats, dist), name), getattr(getattr(jstats, dist), name)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_and_dtypes_match_jax(case: tuple, x64: bool) -> None:
    dist, names, args, _, _ = case
    args = _mode_args(args, x64)
    for name in names:
        ours, theirs = _funs(dist, name)
        with fg.enable_x64(x64), jax.enable_x64(x64), np.errstate(all="ignore"):
            want = theirs(*args)
            tol64 = JAX_TOL64.get(dist, 1e-10)
            _close(ours(*args), want, x64, f"{dist}.{name} eager", tol64)
            _close(fg.jit(ours)(*args), want, x64, f"{dist}.{name} under jit", tol64)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_python_scalars_and_integers_follow_jax_promotion(x64: bool) -> None:
    counts = np.arange(1, 4, dtype=np.int64 if x64 else np.int32)
    calls = [("expon", "logpdf", (1, 0, 2)), ("cauchy", "cdf", (3, 1.0)), ("binom", "pmf", (2, 5, 0.5)),
             ("uniform", "ppf", (0.25,)), ("poisson", "entropy", (counts,)),
             ("gennorm", "pdf", (0.5, 2))]
    for dist, name, args in calls:
        ours, theirs = _funs(dist, name)
        with fg.enable_x64(x64), jax.enable_x64(x64):
            _close(ours(*args), theirs(*args), x64, f"{dist}.{name}{args}")


@pytest.mark.parametrize("case", [c for c in CASES if c[3]], ids=[i for c, i in zip(CASES, IDS) if c[3]])
def test_gradients_match_jax(case: tuple) -> None:
    dist, names, args, argnums, grad_x = case
    if grad_x is not None:
        args = (grad_x,) + args[1:]
    for name in names:
        ours, theirs = _funs(dist, name)
        if (dist, name) in JAX_NO_GRAD:
            with pytest.raises(TypeError, match="float0"):
                jax.grad(lambda *v: jnp.sum(theirs(*v)), argnums=argnums)(*args)
            check_grads(lambda *v: ours(*v), args, order=2, rev_vs_numerical=True)
            continue
        want = jax.grad(lambda *v: jnp.sum(theirs(*v)), argnums=argnums)(*args)
        got = fg.grad(lambda *v: fg.numpy.sum(ours(*v)), argnums=argnums)(*args)
        for i, g, w in zip(argnums, got, want):
            assert np.all(np.isfinite(np.asarray(w))), f"{dist}.{name}: JAX's gradient is not finite here"
            _close(g, w, True, f"grad of {dist}.{name} in argument {i}", JAX_TOL64.get(dist, 1e-10))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_matches_jax(case: tuple) -> None:
    dist, names, args, _, _ = case
    first = np.stack([args[0], args[0][::-1] * 0.75])
    in_axes = (0,) + (None,) * (len(args) - 1)
    for name in names:
        ours, theirs = _funs(dist, name)
        with np.errstate(all="ignore"):
            want = jax.vmap(theirs, in_axes=in_axes)(first, *args[1:])
            _close(fg.vmap(ours, in_axes=in_axes)(first, *args[1:]), want, True, f"vmap({dist}.{name})",
                   JAX_TOL64.get(dist, 1e-10))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_multinomial_matches_jax(x64: bool) -> None:
    itype, ftype = (np.int64, np.float64) if x64 else (np.int32, np.float32)
    p = np.asarray([0.2, 0.5, 0.3], ftype)
    counts = np.asarray([[1, 2, 3], [0, 6, 0], [2, 2, 1]], itype)
    for name in ("logpmf", "pmf"):
        ours, theirs = _funs("multinomial", name)
        with fg.enable_x64(x64), jax.enable_x64(x64):
            for x in counts:
                _close(ours(x, itype(6), p), theirs(x, itype(6), p), x64, f"multinomial.{name}({x})")
            _close(fg.vmap(ours, in_axes=(0, None, None))(counts, itype(6), p),
                   jax.vmap(theirs, in_axes=(0, None, None))(counts, itype(6), p), x64, f"vmap(multinomial.{name})")
    x = counts[0]
    want = jax.grad(lambda q: jstats.multinomial.logpmf(x, 6, q))(p.astype(np.float64))
    _close(fg.grad(lambda q: fstats.multinomial.logpmf(x, 6, q))(p.astype(np.float64)), want, True, "grad")
    with pytest.raises(ValueError, match="integer"):
        fstats.multinomial.logpmf(x.astype(np.float32), 6, p)


def test_every_jax_function_of_these_distributions_exists() -> None:
    missing = []
    for dist in fstats.__all__:
        module = getattr(jstats, dist)
        for name in dir(module):
            if name in {"logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "logpmf", "pmf", "entropy"}:
                if not hasattr(getattr(fstats, dist), name):
                    missing.append(f"{dist}.{name}")
    assert not missing, missing
    assert math.isclose(float(fstats.norm.isf(0.5)), 0.0, abs_tol=1e-12)


def test_betabinom_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    k = np.arange(-1.0, 8.0)
    for n, aa, bb in [(6.0, 1.5, 2.5), (10.0, 0.7, 3.0), (3.0, 20.0, 0.5)]:
        got = fstats.betabinom.logpmf(k, n, aa, bb)
        np.testing.assert_allclose(got, scipy_stats.betabinom.logpmf(k, n, aa, bb), rtol=1e-12)
