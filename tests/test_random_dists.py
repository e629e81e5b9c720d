"""``fungraph.random``'s distribution samplers against ``jax.random`` (threefry2x32, x64).

The closed-form transforms of uniform, normal and exponential draws, ``multivariate_normal`` and
``orthogonal`` are compared with JAX live, to a few ulps (XLA's CPU ``log``, ``log1p``, ``pow``
and fused multiply-adds round differently from numpy's); integer results exactly. XLA takes
seconds to compile each rejection sampler (gamma and the samplers built on it, poisson, binomial,
multinomial), so those are compared with draws recorded from JAX 0.10.2 (``GOLDEN``; run this file
as a script to record them again). Then moments and Kolmogorov-Smirnov statistics with fixed
seeds, the gradient of ``gamma`` against finite differences of the inverse CDF, jit and vmap over
keys, and the errors."""

from __future__ import annotations

import pprint
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special as ss
import scipy.stats as sst

import fungraph as fg
from fungraph import dtypes
from fungraph import random as fr
from tests.helpers import jax_or_skip

F32, F64 = np.float32, np.float64
A = np.array([0.4, 1.7, 9.0])
A6 = np.array([[0.05, 0.4, 1.0], [2.5, 9.0, 300.0]])
COV = np.eye(3) + 0.5

Sample = Callable[[Any, Any], Any]  # sample(module, key) for module in (jax.random, fungraph.random)

# The closed forms and the linear-algebra samplers, with the ulps they may differ from XLA's by.
# Each costs JAX a compilation, so dtypes are spread over the cases rather than crossed.
CLOSED: dict[str, tuple[Sample, float]] = {
    "laplace": (lambda m, k: m.laplace(k, (7, 3), F64), 128),
    "logistic": (lambda m, k: m.logistic(k, (7, 3), F64), 128),
    "cauchy": (lambda m, k: m.cauchy(k, (7, 3), F32), 16),
    "maxwell": (lambda m, k: m.maxwell(k, (7, 3), F64), 16),
    "double_sided_maxwell": (lambda m, k: m.double_sided_maxwell(k, A.astype(F32), F32(2), (7,), F32), 64),
    "weibull_min": (lambda m, k: m.weibull_min(k, 2.0, A, (7, 3), F64), 512),
    "pareto": (lambda m, k: m.pareto(k, A.astype(F32), (7, 3), F32), 128),
    "rayleigh": (lambda m, k: m.rayleigh(k, A, (7, 3), F64), 16),
    "wald": (lambda m, k: m.wald(k, A, (7, 3), F64), 1024),  # x cancels for large normal draws
    "triangular": (lambda m, k: m.triangular(k, F32(-1), A.astype(F32) - 1, F32(9), (7, 3), F32), 32),
    "lognormal": (lambda m, k: m.lognormal(k, A.astype(F32), (7, 3), F32), 64),
    "multivariate_normal": (lambda m, k: m.multivariate_normal(k, np.ones(3), COV, (7,)), 16),
    "multivariate_normal eigh": (lambda m, k: m.multivariate_normal(k, A.astype(F32), COV.astype(F32), (2, 4),
                                                                   method="eigh"), 16),
    "multivariate_normal svd": (lambda m, k: m.multivariate_normal(k, A, COV, method="svd"), 16),
    "orthogonal wide": (lambda m, k: m.orthogonal(k, 3, (2,), F32, m=5), 16),
}
EXACT: dict[str, Sample] = {
    "rademacher": lambda m, k: m.rademacher(k, (7, 3)),
    "geometric": lambda m, k: m.geometric(k, np.array([0.05, 0.5, 1.0]), (7, 3)),
    "geometric float32 p": lambda m, k: m.geometric(k, np.array([0.01, 0.3], F32), (4, 2), np.int32),
}


def _keys(jax: Any) -> list[tuple[Any, Any]]:
    pairs = [(jax.random.PRNGKey(s), fr.PRNGKey(s)) for s in (0, 2**31 - 1)]
    pairs.append((jax.random.fold_in(jax.random.PRNGKey(1), 12345), fr.fold_in(fr.PRNGKey(1), 12345)))
    return pairs


def _close(got: Any, want: Any, what: str, ulps: float) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}"
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=ulps * eps, atol=ulps * eps, err_msg=what)


def test_closed_forms_match_jax() -> None:
    """One JAX compilation for all the cases, run on three keys."""
    jax, _ = jax_or_skip()
    names = [*CLOSED, *EXACT]
    samples = [CLOSED[n][0] if n in CLOSED else EXACT[n] for n in names]
    reference = jax.jit(lambda k: tuple(s(jax.random, k) for s in samples))
    for i, (jk, fk) in enumerate(_keys(jax)):
        for name, sample, want in zip(names, samples, reference(jk)):
            got, what = np.asarray(sample(fr, fk)), f"{name} (key {i})"
            if name in CLOSED:
                _close(got, want, what, CLOSED[name][1])
            else:
                assert got.dtype == want.dtype, what
                np.testing.assert_array_equal(got, want, err_msg=what)


def test_key_utilities_match_jax() -> None:
    jax, _ = jax_or_skip()
    jk, fk = jax.random.PRNGKey(2**40 + 3), fr.PRNGKey(2**40 + 3)
    np.testing.assert_array_equal(fr.key_data(fk), jax.random.key_data(jk))
    np.testing.assert_array_equal(fr.clone(fk), fk)
    words = np.asarray(jax.random.split(jk, 3))
    wrapped = fr.wrap_key_data(words)
    np.testing.assert_array_equal(fr.key_data(wrapped), fr.split(fk, 3))
    np.testing.assert_array_equal(fr.uniform(wrapped[1], (3,)), jax.random.uniform(jax.random.split(jk, 3)[1], (3,)))
    for lib in (fr, jax.random):
        with pytest.raises(TypeError, match="expected key_data.dtype = uint32; got dtype=int32"):
            lib.wrap_key_data(words.view(np.int32))


# --- the rejection samplers against draws recorded from JAX ------------------------------

LAM = np.array([[0.5, 3.0, 9.9, 0.0], [10.0, 25.0, 300.0, 5000.0]])
N = np.array([[5.0, 20.0, 40.0, 0.0], [60.0, 1000.0, 3.0, 1e5]])
P = np.array([[0.3, 0.8, 0.2, 0.5], [0.5, 0.35, 1.0, 0.01]])
P3 = np.array([[0.2, 0.3, 0.5], [0.1, 0.0, 0.9]])


def _golden_cases(m: Any) -> dict[str, Callable[[Any], Any]]:
    """Every gamma draw has shape (2, 3), so fungraph compiles gamma and loggamma once per dtype."""
    return {
        "gamma float64": lambda k: m.gamma(k, A6, None, F64),
        "gamma float32": lambda k: m.gamma(k, A6.astype(F32), None, F32),
        "loggamma float64": lambda k: m.loggamma(k, A6, None, F64),
        "beta": lambda k: m.beta(k, A6, A6[::-1]),
        "dirichlet": lambda k: m.dirichlet(k, A6[0], (2,)),
        "t": lambda k: m.t(k, A6),
        "chisquare": lambda k: m.chisquare(k, A6),
        "f": lambda k: m.f(k, A6, A6[::-1]),
        "generalized_normal": lambda k: m.generalized_normal(k, 1.5, (2, 3)),
        "ball": lambda k: m.ball(k, 3, 1.5, (2,)),
        "poisson": lambda k: m.poisson(k, LAM, (3, 2, 4)),
        "binomial": lambda k: m.binomial(k, N, P, (3, 2, 4)),
        "multinomial": lambda k: m.multinomial(k, np.array([10.0, 200.0]), P3, shape=(2, 2, 3)),
    }


def _jax_reference() -> dict[str, Any]:
    """The draws of ``_golden_cases`` with JAX and ``PRNGKey(7)``, and ``d/da sum(gamma(key, A6))``."""
    jax, _ = jax_or_skip()
    key = jax.random.PRNGKey(7)
    out = {name: np.asarray(jax.jit(f)(key)).tolist() for name, f in _golden_cases(jax.random).items()}
    out["gamma grad"] = np.asarray(jax.grad(lambda a: jax.random.gamma(key, a).sum())(A6)).tolist()
    return out


GOLDEN: dict[str, Any] = {
    'gamma float64': [[3.4059370241041012e-37, 0.009746102422810488, 0.2466636724616406],
                      [2.101213150405273, 9.74624596137439, 311.1594610809627]],
    'gamma float32': [[0.0, 0.230890691280365, 0.2527778446674347],
                      [4.322722434997559, 6.350759506225586, 290.89447021484375]],
    'loggamma float64': [[-83.97012834840358, -4.630887825400931, -1.3997295201947302],
                         [0.7425148685995362, 2.2768821812641993, 5.740305517369477]],
    'beta': [[0.0011287061131153955, 0.12045555616494404, 0.006846635663458456],
             [1.0, 0.8786956247322361, 0.989600277005939]],
    'dirichlet': [[1.328317933916116e-36, 0.0380098708296222, 0.961990129170378],
                  [3.984259787755072e-07, 0.029305540292482377, 0.9706940612815389]],
    't': [[1038.9485547568881, -20.5402098515806, -0.025681182985155867],
          [0.5618106879617283, 0.5603834834882233, 1.0469637222695978]],
    'chisquare': [[9.076207862392221e-74, 0.00036265379295611, 0.24908418564358736],
                  [1.7486519147021657, 9.856659963203963, 315.66244817699004]],
    'f': [[4.6297757441834827e-07, 0.001705134297415045, 2.952660626310377],
          [3.8352172918700393, 1.3332285945021813, 5.516073663621915]],
    'generalized_normal': [[0.5439039346929253, 1.6858098474160517, -0.911702031002198],
                           [-1.151603750198218, 1.8360392412052227, 0.3659738051665205]],
    'ball': [[-0.425435596399028, 0.06823731819371592, 0.7072533444693516],
             [-0.09727601467021407, 0.8056738745010795, -0.19364792645737683]],
    'poisson': [[[2, 1, 9, 0], [9, 25, 317, 4900]],
                [[2, 1, 6, 0], [9, 21, 306, 5048]],
                [[1, 1, 6, 0], [12, 28, 305, 5028]]],
    'binomial': [[[2.0, 16.0, 9.0, 0.0], [31.0, 366.0, 3.0, 961.0]],
                 [[0.0, 18.0, 3.0, 0.0], [36.0, 371.0, 3.0, 983.0]],
                 [[1.0, 17.0, 4.0, 0.0], [33.0, 341.0, 3.0, 1005.0]]],
    'multinomial': [[[3.0, 4.0, 3.0], [17.0, 0.0, 183.0]], [[1.0, 2.0, 7.0], [23.0, 0.0, 177.0]]],
    'gamma grad': [[5.686026807449361e-34, 0.11223728563411967, 0.5273182329971831],
                   [0.9781997792317426, 1.0598280545894991, 1.0189386090308181]],
}


@pytest.mark.parametrize("name", list(_golden_cases(fr)))
def test_rejection_samplers_match_recorded_jax_draws(name: str) -> None:
    """Relative to a few ulps (``f`` divides small chi-squares: more); float32 gamma with
    a = 0.05 underflows to a subnormal that XLA's CPU backend flushes to zero, hence ``atol``."""
    got = np.asarray(_golden_cases(fr)[name](fr.PRNGKey(7)))
    want = np.asarray(GOLDEN[name], dtype=got.dtype)
    if name in ("poisson", "binomial", "multinomial"):
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    info = np.finfo(got.dtype)
    ulps = 1024 if name == "f" else 64
    np.testing.assert_allclose(got, want, rtol=ulps * info.eps, atol=info.tiny, err_msg=name)


# --- gradients -------------------------------------------------------------------------

def _inverse_cdf_slope(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``d/da gammaincinv(a, u)`` at ``u = gammainc(a, x)``, by central differences in float64."""
    u = ss.gammainc(a, x)
    h = 1e-5 * a
    return (ss.gammaincinv(a + h, u) - ss.gammaincinv(a - h, u)) / (2 * h)


def test_gamma_grad_matches_jax_and_the_inverse_cdf() -> None:
    """``dx/da`` with the quantile ``u = P(a, x)`` fixed (under jit): JAX's recorded gradient, and
    central differences of scipy's inverse CDF."""
    key = fr.PRNGKey(7)
    grad = np.asarray(fg.jit(fg.grad(lambda a: fr.gamma(key, a).sum()))(A6))
    np.testing.assert_allclose(grad, GOLDEN["gamma grad"], rtol=1e-12)
    x = np.asarray(fr.gamma(key, A6))
    slope = _inverse_cdf_slope(A6, x)
    np.testing.assert_allclose(grad, slope, rtol=1e-6)


def test_gamma_jvp_in_float32_and_for_tiny_a() -> None:
    """Float32 derivatives are computed in float64. For a = 0.01 some float32 samples underflow to
    0 (their derivative is then 0), while ``loggamma``'s derivative, ``(dx/da) / x``, stays finite
    and right."""
    a = np.broadcast_to(np.array([0.01, 0.3, 2.0, 40.0], F32), (100, 4))
    ones = np.ones_like(a)
    key = fr.PRNGKey(3)
    x, dx = (np.asarray(v) for v in fg.jvp(lambda a: fr.gamma(key, a, dtype=F32), (a,), (ones,)))
    log_x, dlog_x = (np.asarray(v) for v in fg.jvp(lambda a: fr.loggamma(key, a, dtype=F32), (a,), (ones,)))
    assert dx.dtype == dlog_x.dtype == F32 and (x[:, 0] == 0).any()
    x64 = np.exp(log_x.astype(F64))
    slope = _inverse_cdf_slope(a.astype(F64), x64)
    np.testing.assert_allclose(dlog_x, slope / x64, rtol=1e-5)
    np.testing.assert_allclose(dx, np.where(x == 0, 0, slope), rtol=1e-5, atol=np.finfo(F32).tiny)


# --- distributions, with fixed seeds ----------------------------------------------------

def _ks_bound(n: int) -> float:
    """The Kolmogorov-Smirnov statistic that a correct sampler exceeds with probability 1e-4 (a
    few dozen such tests then fail by chance with probability below 0.5%)."""
    return 2.22 / np.sqrt(n)


N_KS = 4000
CONTINUOUS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "gamma 0.3": (lambda k: fr.gamma(k, 0.3, (N_KS,)), sst.gamma(0.3).cdf),
    "gamma 4": (lambda k: fr.gamma(k, 4.0, (N_KS,)), sst.gamma(4.0).cdf),
    "beta": (lambda k: fr.beta(k, 0.5, 2.0, (N_KS,)), sst.beta(0.5, 2.0).cdf),
    "t": (lambda k: fr.t(k, 3.0, (N_KS,)), sst.t(3.0).cdf),
    "chisquare": (lambda k: fr.chisquare(k, 3.0, (N_KS,)), sst.chi2(3.0).cdf),
    "f": (lambda k: fr.f(k, 5.0, 7.0, (N_KS,)), sst.f(5.0, 7.0).cdf),
    "generalized_normal": (lambda k: fr.generalized_normal(k, 1.5, (N_KS,)), sst.gennorm(1.5).cdf),
    "laplace": (lambda k: fr.laplace(k, (N_KS,)), sst.laplace().cdf),
    "logistic": (lambda k: fr.logistic(k, (N_KS,)), sst.logistic().cdf),
    "cauchy": (lambda k: fr.cauchy(k, (N_KS,)), sst.cauchy().cdf),
    "maxwell": (lambda k: fr.maxwell(k, (N_KS,)), sst.maxwell().cdf),
    "double_sided_maxwell": (lambda k: fr.double_sided_maxwell(k, 1.0, 2.0, (N_KS,)),
                             lambda x: 0.5 + 0.5 * np.sign(x - 1) * sst.maxwell().cdf(np.abs(x - 1) / 2)),
    "weibull_min": (lambda k: fr.weibull_min(k, 2.0, 1.5, (N_KS,)), sst.weibull_min(1.5, scale=2.0).cdf),
    "pareto": (lambda k: fr.pareto(k, 3.0, (N_KS,)), sst.pareto(3.0).cdf),
    "rayleigh": (lambda k: fr.rayleigh(k, 2.0, (N_KS,)), sst.rayleigh(scale=2.0).cdf),
    "wald": (lambda k: fr.wald(k, 1.5, (N_KS,)), sst.invgauss(1.5).cdf),
    "triangular": (lambda k: fr.triangular(k, 0.0, 1.0, 3.0, (N_KS,)), sst.triang(1 / 3, scale=3.0).cdf),
    "lognormal": (lambda k: fr.lognormal(k, 0.5, (N_KS,)), sst.lognorm(0.5).cdf),
}


@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_samplers_follow_their_distribution(name: str) -> None:
    sample, cdf = CONTINUOUS[name]
    draws = np.asarray(sample(fr.PRNGKey(5)))
    statistic = sst.kstest(draws, cdf).statistic
    assert statistic < _ks_bound(draws.size), f"{name}: KS statistic {statistic:.4f} over {draws.size} draws"


N_MOM = 20000
DISCRETE: dict[str, tuple[Callable[[Any], Any], float, float]] = {  # sample(key), mean, variance
    "poisson knuth": (lambda k: fr.poisson(k, 3.5, (N_MOM,)), 3.5, 3.5),
    "poisson ptrs": (lambda k: fr.poisson(k, 70.0, (N_MOM,)), 70.0, 70.0),
    "binomial inversion": (lambda k: fr.binomial(k, 20.0, 0.3, (N_MOM,)), 6.0, 4.2),
    "binomial btrs": (lambda k: fr.binomial(k, 300.0, 0.6, (N_MOM,)), 180.0, 72.0),
    "binomial p > 1/2": (lambda k: fr.binomial(k, 50.0, 0.97, (N_MOM,)), 48.5, 1.455),
    "multinomial": (lambda k: fr.multinomial(k, 30.0, np.array([0.2, 0.3, 0.5]), shape=(N_MOM // 3, 3))[:, 1],
                    9.0, 6.3),
    "geometric": (lambda k: fr.geometric(k, 0.2, (N_MOM,)), 5.0, 20.0),
    "rademacher": (lambda k: fr.rademacher(k, (N_MOM,)), 0.0, 1.0),
}


@pytest.mark.parametrize("name", list(DISCRETE))
def test_samplers_have_their_mean_and_variance(name: str) -> None:
    """The mean within 5 standard errors; the variance within 5% (about 5 standard errors here)."""
    sample, mean, var = DISCRETE[name]
    draws = np.asarray(sample(fr.PRNGKey(9)), np.float64)
    assert abs(draws.mean() - mean) < 5 * np.sqrt(var / draws.size), f"{name}: mean {draws.mean()} vs {mean}"
    assert abs(draws.var() / var - 1) < 0.05, f"{name}: variance {draws.var()} vs {var}"


def test_counts_and_points_respect_their_support() -> None:
    """With the shapes of the recorded cases, so that nothing new is compiled."""
    counts = np.asarray(fr.multinomial(fr.PRNGKey(0), np.array([7.0, 30.0]), np.array([[0.5, 0.5, 0.0], P3[1]]),
                                       shape=(2, 2, 3)))
    np.testing.assert_array_equal(counts.sum(-1), [[7.0, 30.0], [7.0, 30.0]])
    assert (counts[:, 0, 2] == 0).all() and (counts >= 0).all()
    np.testing.assert_allclose(np.asarray(fr.dirichlet(fr.PRNGKey(1), np.full(3, 0.01), (2,))).sum(-1), 1.0)
    points = np.asarray(fr.ball(fr.PRNGKey(2), 3, 1.0, (2,)))
    assert points.shape == (2, 3) and (np.abs(points).sum(-1) <= 1).all()
    n, p = np.array([[0.0, 12.0, np.inf, 5.0]] * 2), np.array([0.5, 1.0, 0.5, 0.0])
    edge = np.asarray(fr.binomial(fr.PRNGKey(4), n, p, (3, 2, 4)))
    np.testing.assert_array_equal(edge, np.broadcast_to([0.0, 12.0, np.inf, 0.0], (3, 2, 4)))


@pytest.mark.parametrize("n, m", [(4, 4), (3, 5), (5, 2)])
def test_orthogonal_has_orthonormal_rows_or_columns(n: int, m: int) -> None:
    for dtype in (F64, np.complex64):
        q = np.asarray(fr.orthogonal(fr.PRNGKey(n), n, (2,), dtype, m))
        assert q.shape == (2, n, m) and q.dtype == dtype
        gram = q @ np.conj(np.swapaxes(q, -1, -2)) if n <= m else np.conj(np.swapaxes(q, -1, -2)) @ q
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(min(n, m)), gram.shape), atol=1e-5)
    init = fg.nn.initializers.orthogonal()(fr.PRNGKey(0), (3, 5))
    np.testing.assert_array_equal(init, fr.orthogonal(fr.PRNGKey(0), 3, (), dtypes.default_float(), 5))


# --- jit and vmap over keys ----------------------------------------------------------------

def _closed_forms(k: Any) -> tuple[Any, ...]:
    keys = fr.split(k, 19)
    return (fr.laplace(keys[0], (3,)), fr.logistic(keys[1], (3,), F32), fr.cauchy(keys[2], (3,)),
            fr.rademacher(keys[3], (3,)), fr.maxwell(keys[4], (3,)), fr.double_sided_maxwell(keys[5], A, 2.0, (2,)),
            fr.weibull_min(keys[6], 2.0, 1.5, (3,)), fr.pareto(keys[7], A), fr.rayleigh(keys[8], A),
            fr.wald(keys[9], A), fr.geometric(keys[10], 0.3, (3,)), fr.triangular(keys[11], 0.0, 1.0, 3.0, (3,)),
            fr.lognormal(keys[12], 0.5, (3,)), fr.multivariate_normal(keys[13], A, COV, (2,)),
            fr.multivariate_normal(keys[14], A, COV, method="svd"), fr.orthogonal(keys[15], 3, (), F64, 2),
            fr.clone(keys[16]), fr.key_data(keys[17]), fr.wrap_key_data(keys[18]))


def _built_on_gamma(k: Any) -> tuple[Any, ...]:
    """``chisquare`` runs inside ``f``, ``generalized_normal`` inside ``ball``."""
    keys = fr.split(k, 5)
    return (fr.beta(keys[0], A6, 2.0), fr.dirichlet(keys[1], A6[0], (2,)), fr.t(keys[2], A6), fr.f(keys[3], A6, 3.0),
            fr.ball(keys[4], 3, 1.5, (2,)))


SAMPLERS: dict[str, Callable[[Any], Any]] = {  # the shapes of the recorded cases: eager calls compile nothing new
    "gamma": lambda k: fr.gamma(k, A6),
    "poisson": lambda k: fr.poisson(k, LAM, (3, 2, 4)),
    "binomial": lambda k: fr.binomial(k, N, P, (3, 2, 4)),
    "multinomial": lambda k: fr.multinomial(k, np.array([10.0, 200.0]), P3, shape=(2, 2, 3)),
    "closed forms": _closed_forms,
    "built on gamma": _built_on_gamma,
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_jit_and_vmap_over_keys_match_eager(name: str) -> None:
    """``jit(vmap)`` for all, and gamma's nested loops under an eager ``vmap`` too. (Eager calls of
    the loop samplers run compiled already, as JAX's do.)"""
    f = SAMPLERS[name]
    keys = fr.split(fr.PRNGKey(11), 3)
    stacked = fg.tree_map(lambda *xs: np.stack(xs), *[fg.tree_map(np.asarray, f(k)) for k in keys])
    modes = {"jit(vmap)": fg.jit(fg.vmap(f))}
    if name == "gamma":
        modes["vmap"] = fg.vmap(f)
    for mode, mapped in modes.items():
        for i, (got, want) in enumerate(zip(fg.tree_leaves(mapped(keys)), fg.tree_leaves(stacked))):
            _same(got, want, f"{mode}({name}) output {i}")


def test_gamma_under_vmap_over_a() -> None:
    a = np.stack([A6, A6 + 1])
    mapped = fg.vmap(lambda a: fr.gamma(fr.PRNGKey(2), a))(a)
    np.testing.assert_array_equal(mapped, np.stack([fr.gamma(fr.PRNGKey(2), row) for row in a]))


def _same(got: Any, want: Any, what: str) -> None:
    """Equal, floats up to a few ulps (batched linear algebra and fused code may round apart)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}"
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(got.dtype).eps, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# --- errors -------------------------------------------------------------------------------

K = fr.PRNGKey(0)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: fr.gamma(K, -1.0), ValueError, r"random.gamma: a must be > 0, got -1.0"),
    (lambda: fr.gamma(K, np.array([1.0, 0.0])), ValueError, r"a must be > 0, got 0.0 \(in an array of shape \(2,\)\)"),
    (lambda: fr.gamma(K, np.ones(2), (3,)), fg.ShapeError, r"a \(2,\)\) must broadcast to the shape argument \(3,\)"),
    (lambda: fr.gamma(K, 1.0, dtype=np.int32), TypeError, "float32 or float64, got int32"),
    (lambda: fr.loggamma(K, 0.0), ValueError, "loggamma: a must be > 0"),
    (lambda: fr.beta(K, 1.0, -2.0), ValueError, "beta: b must be > 0"),
    (lambda: fr.dirichlet(K, 1.0), fg.ShapeError, "category axis"),
    (lambda: fr.dirichlet(K, np.ones((2, 3)), (4,)), fg.ShapeError, r"batch shape \(2,\)"),
    (lambda: fr.t(K, 0.0), ValueError, "t: df must be > 0"),
    (lambda: fr.chisquare(K, -3.0), ValueError, "chisquare: df must be > 0"),
    (lambda: fr.f(K, 2.0, 0.0), ValueError, "f: dfden must be > 0"),
    (lambda: fr.poisson(K, -1.0), ValueError, "poisson: lam must be >= 0"),
    (lambda: fr.poisson(K, 1.0, dtype=np.float32), TypeError, "int32 or int64, got float32"),
    (lambda: fr.binomial(K, -3, 0.5), ValueError, "binomial: n must be >= 0, got -3"),
    (lambda: fr.binomial(K, 5, 1.5), ValueError, r"binomial: p must be in \[0, 1\], got 1.5"),
    (lambda: fr.binomial(K, np.ones(3), 0.5, (2,)), fg.ShapeError, r"n \(3,\)"),
    (lambda: fr.multinomial(K, 10.0, 0.5), fg.ShapeError, "category axis"),
    (lambda: fr.multinomial(K, -1.0, np.ones(3) / 3), ValueError, "multinomial: n must be >= 0"),
    (lambda: fr.multinomial(K, 10.0, np.ones(3) / 3, shape=(4,)), fg.ShapeError, r"shape argument \(4,\)"),
    (lambda: fr.pareto(K, 0.0), ValueError, "pareto: b must be > 0"),
    (lambda: fr.rayleigh(K, -1.0), ValueError, "rayleigh: scale must be >= 0"),
    (lambda: fr.wald(K, 0.0), ValueError, "wald: mean must be > 0"),
    (lambda: fr.weibull_min(K, 1.0, 0.0), ValueError, "weibull_min: concentration must be > 0"),
    (lambda: fr.weibull_min(K, np.ones(2), 1.0, (3,)), fg.ShapeError, "do not broadcast together"),
    (lambda: fr.double_sided_maxwell(K, 0.0, -1.0), ValueError, "scale must be >= 0"),
    (lambda: fr.geometric(K, 0.0), ValueError, r"geometric: p must be in \(0, 1\]"),
    (lambda: fr.geometric(K, 0.5, dtype=np.float64), TypeError, "int32 or int64"),
    (lambda: fr.triangular(K, 0.0, 2.0, 1.0), ValueError, "need left <= mode <= right, got left=0.0, mode=2.0"),
    (lambda: fr.generalized_normal(K, -1.0), ValueError, "generalized_normal: p must be > 0"),
    (lambda: fr.ball(K, -2), TypeError, "d must be a concrete non-negative int"),
    (lambda: fr.ball(K, 3, 0.0), ValueError, "ball: p must be > 0"),
    (lambda: fr.orthogonal(K, 2.5), TypeError, "n must be a concrete non-negative int"),
    (lambda: fr.orthogonal(K, 3, dtype=np.int32), TypeError, "float or complex dtype"),
    (lambda: fr.multivariate_normal(K, np.zeros(3), np.eye(2)), fg.ShapeError, r"mean \(3,\) and cov \(2, 2\)"),
    (lambda: fr.multivariate_normal(K, np.zeros(3), np.eye(3), method="qr"), ValueError, "'cholesky', 'eigh'"),
    (lambda: fr.multivariate_normal(K, np.zeros((2, 3)), np.eye(3), (4,)), fg.ShapeError, r"shape argument \(4,\)"),
    (lambda: fr.lognormal(K, 1.0, dtype=np.int64), TypeError, "float or complex dtype"),
    (lambda: fr.laplace(K, (-1,)), ValueError, "non-negative ints"),
    (lambda: fr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg"), ValueError, "only threefry2x32"),
    (lambda: fr.key_data(np.zeros(3, np.int64)), TypeError, r"shape \(..., 2\)"),
    (lambda: fr.gamma(np.zeros(3, np.int64), 1.0), fg.ShapeError, r"key has shape \(2,\)"),
])
def test_errors_name_the_argument(call: Callable[[], Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()


if __name__ == "__main__":  # record GOLDEN again: python -m tests.test_random_dists
    print("GOLDEN: dict[str, Any] = {")
    for name, value in _jax_reference().items():
        head = f"    {name!r}: "
        print(head + pprint.pformat(value, width=118 - len(head), compact=True).replace("\n", "\n" + " " * len(head))
              + ",")
    print("}")
