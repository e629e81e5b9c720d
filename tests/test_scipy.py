"""``fungraph.scipy.special`` and ``fungraph.scipy.stats`` (``fungraph.testing.op_records_scipy``):
every row against SciPy eagerly and staged, its derivatives against finite differences
(float64, first and second order), under jit, and under vmap against a Python loop; plus the
special functions' kernels over wide ranges, edge values, and the undefined derivatives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special as ss
import scipy.stats as sst
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
import fungraph.scipy
from fungraph import dtypes
from fungraph.scipy import special as fs
from fungraph.scipy import stats as fst
from fungraph.testing import check_grads
from fungraph.testing.op_records_scipy import SCIPY_RECORDS
from tests.helpers import (
    assert_tree_matches,
    check_derivatives,
    check_jit_against_eager,
    check_values,
    check_vmap_against_loop,
    draw_args,
    jax_or_skip,
)

RECORDS = {r.name: r for r in SCIPY_RECORDS}
DIFFERENTIABLE = [r.name for r in SCIPY_RECORDS if r.differentiable and "no_grad" not in r.tags]


def _wrt(tags: tuple[str, ...]) -> tuple[int, ...] | None:
    for tag in tags:
        if tag.startswith("wrt:"):
            return tuple(int(i) for i in tag[4:].split(","))
    return None


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=6)
@given(data=st.data())
def test_matches_scipy_eager_and_staged(name: str, data: st.DataObject) -> None:
    check_values(data, RECORDS[name])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=2)
@given(data=st.data())
def test_derivatives_match_finite_differences(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    order = 1 if "grad1" in rec.tags else rec.grad_order
    wrt = _wrt(rec.tags)
    if wrt is None:
        check_derivatives(data, rec, order)
        return
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)

    def f(*diff: Any) -> Any:
        full = list(args)
        for i, a in zip(wrt, diff):
            full[i] = a
        return rec.fun(*full)

    check_grads(f, [args[i] for i in wrt], order=order)


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=3)
@given(data=st.data())
def test_jit_matches_eager(name: str, data: st.DataObject) -> None:
    check_jit_against_eager(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=4)
@given(data=st.data())
def test_vmap_matches_a_python_loop(name: str, data: st.DataObject) -> None:
    check_vmap_against_loop(data, RECORDS[name])


# --- the kernels over wide ranges, in float64 ----------------------------------------------------

_RNG = np.random.default_rng(1234)
_WIDE = np.concatenate([_RNG.uniform(-30, 30, 400), _RNG.uniform(0, 300, 100), [1e-300, 1e-8, 0.5, 1.0, 2.0]])
_UNIT = np.concatenate([_RNG.uniform(-1, 1, 300), 1 - np.logspace(-15, -1, 30), -1 + np.logspace(-15, -1, 30),
                        np.logspace(-300, -1, 30)])
_PROB = np.concatenate([_RNG.uniform(0, 1, 300), np.logspace(-300, -1, 60), 1 - np.logspace(-15, -1, 30)])


@pytest.mark.parametrize("fun, ref, xs, rtol", [
    (fs.gammaln, ss.gammaln, _WIDE, 1e-11),
    (fs.gamma, ss.gamma, _WIDE[np.abs(_WIDE) < 170], 1e-12),
    (fs.digamma, ss.digamma, _WIDE, 1e-11),
    (lambda x: fs.polygamma(1, x), lambda x: ss.polygamma(1, x), _WIDE, 1e-12),
    (lambda x: fs.polygamma(4, x), lambda x: ss.polygamma(4, x), _WIDE, 1e-12),
    (fs.erfinv, ss.erfinv, _UNIT, 1e-13),
    (fs.ndtri, ss.ndtri, _PROB, 1e-13),
    (fs.log_ndtr, ss.log_ndtr, np.concatenate([_WIDE, -_WIDE * 10]), 1e-11),
    (fs.erfc, ss.erfc, _WIDE / 3, 1e-11),
    (fs.i0, ss.i0, _WIDE, 1e-13),
    (fs.i1, ss.i1, _WIDE, 1e-13),
    (fs.i0e, ss.i0e, np.concatenate([_WIDE, _WIDE * 10]), 1e-13),
    (fs.i1e, ss.i1e, np.concatenate([_WIDE, _WIDE * 10]), 1e-13),
])
def test_kernels_match_scipy_over_wide_ranges(fun: Any, ref: Any, xs: np.ndarray, rtol: float) -> None:
    with np.errstate(all="ignore"):
        want = ref(xs)
        got = fun(xs)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=1e-300)


def test_incomplete_gamma_beta_and_t_cdf_over_wide_ranges() -> None:
    rng = np.random.default_rng(5)
    a, x = rng.uniform(0.01, 60, 800), rng.uniform(0, 120, 800)
    np.testing.assert_allclose(fs.gammainc(a, x), ss.gammainc(a, x), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(fs.gammaincc(a, x), ss.gammaincc(a, x), rtol=1e-10, atol=1e-300)
    a, b, x = rng.uniform(0.05, 30, 800), rng.uniform(0.05, 30, 800), rng.uniform(0, 1, 800)
    np.testing.assert_allclose(fs.betainc(a, b, x), ss.betainc(a, b, x), rtol=1e-10, atol=1e-300)
    df, t = rng.uniform(0.2, 50, 800), rng.standard_normal(800) * rng.choice([0.01, 1, 30, 1e4], 800)
    np.testing.assert_allclose(fs.stdtr(df, t), ss.stdtr(df, t), rtol=1e-10, atol=1e-300)


# --- edge values: SciPy's conventions --------------------------------------------------------------


def test_edge_values_follow_scipy() -> None:
    edges = {
        fs.logit: [0.0, 1.0, 1.5, -0.5],
        fs.gammaln: [0.0, -0.0, -1.0, -2.5, -3.5, 1e308, np.inf],
        fs.gamma: [0.0, -0.0, -1.0, -2.5, 172.0],
        fs.digamma: [0.0, -0.0, -1.0, -2.5, np.inf, -np.inf],
        fs.erfinv: [1.0, -1.0, 1.5, 0.0],
        fs.ndtri: [0.0, 1.0, -0.1, 0.5],
        fs.log_ndtr: [-np.inf, np.inf, -1e4, 40.0],
        fs.entr: [-1.0, 0.0, 1.0],
        fs.erfc: [-np.inf, np.inf, 30.0],
    }
    with np.errstate(all="ignore"):
        for fun, xs in edges.items():
            xs = np.array(xs)
            np.testing.assert_allclose(fun(xs), getattr(ss, fun.__name__)(xs), rtol=1e-13, err_msg=fun.__name__)
        for fun in (fs.gammainc, fs.gammaincc, fs.xlogy, fs.xlog1py):
            a = np.array([0.0, 1.0, 0.0, 2.0, 1.0, -1.0])
            x = np.array([1.0, 0.0, 0.0, np.inf, -1.0, 1.0])
            np.testing.assert_array_equal(fun(a, x), getattr(ss, fun.__name__)(a, x), err_msg=fun.__name__)
        x = np.array([0.0, 1.0, -0.1, 1.1])
        np.testing.assert_array_equal(fs.betainc(2.0, 3.0, x), ss.betainc(2.0, 3.0, x))
        np.testing.assert_array_equal(fs.polygamma(np.array([1, 2, 1]), np.array([0.0, 0.0, -2.0])),
                                      ss.polygamma(np.array([1, 2, 1]), np.array([0.0, 0.0, -2.0])))


def test_stats_outside_the_support() -> None:
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fst.gamma.logpdf(np.array([-1.0, 0.0]), 2.0), sst.gamma.logpdf([-1.0, 0.0], 2.0))
        np.testing.assert_array_equal(fst.gamma.cdf(-1.0, 2.0), 0.0)
        np.testing.assert_array_equal(fst.beta.logpdf(np.array([-0.5, 1.5]), 2.0, 3.0), [-np.inf, -np.inf])
        np.testing.assert_array_equal(fst.beta.cdf(np.array([-0.5, 1.5]), 2.0, 3.0), [0.0, 1.0])
        np.testing.assert_array_equal(fst.poisson.logpmf(np.array([-1.0, 1.5]), 2.0), [-np.inf, -np.inf])
        np.testing.assert_array_equal(fst.poisson.cdf(np.array([-1, -0.5]), 2.0), [0.0, 0.0])
        np.testing.assert_allclose(fst.poisson.cdf(2.7, 1.5), sst.poisson.cdf(2.7, 1.5), rtol=1e-13)
        np.testing.assert_array_equal(fst.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), np.ones(3)), -np.inf)
        np.testing.assert_allclose(fst.norm.logcdf(-40.0), sst.norm.logcdf(-40.0), rtol=1e-13)
    with pytest.raises(ValueError, match="entries along its first axis"):
        fst.dirichlet.logpdf(np.ones(5) / 5, np.ones(3))


def test_nn_and_scipy_special_share_one_softmax_family() -> None:
    """``nn.logsumexp`` is ``scipy.special.logsumexp`` (as in JAX), like the softmaxes: one
    implementation below both namespaces, so neither imports the other."""
    assert fg.nn.logsumexp is fs.logsumexp and fg.nn.softmax is fs.softmax and fg.nn.log_softmax is fs.log_softmax
    x = np.array([[0.5, -1.0, 3.0], [2.0, 2.0, -np.inf]])
    np.testing.assert_allclose(fg.nn.logsumexp(x, axis=1, b=np.array([1.0, 2.0, 0.5])),
                               ss.logsumexp(x, axis=1, b=np.array([1.0, 2.0, 0.5])), rtol=1e-14)


def test_log_softmax_takes_one_maximum_and_keeps_its_values() -> None:
    """log_softmax shifts by the maximum once (as JAX's): logsumexp of the shifted values would
    take a second maximum, which is 0 or shifts by 0; the values are those of the two-maximum
    form, bit for bit, at finite, infinite and NaN rows."""
    x = np.array([[0.5, -1.0, 3.0], [2.0, 2.0, -np.inf], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [np.nan, 1.0, 2.0], [1e30, -1e30, 7.0]], np.float32)
    graph = fg.make_graph(lambda v: fg.nn.log_softmax(v, axis=1))(x)
    assert [e.primitive.name for e in graph.eqns].count("reduce_max") == 1, graph
    with np.errstate(all="ignore"):
        got = np.asarray(fg.nn.log_softmax(x, axis=1))
        m = np.max(x, axis=1, keepdims=True)
        shifted = x - np.where(np.isfinite(m), m, 0)
        m2 = np.max(shifted, axis=1, keepdims=True)
        m2 = np.where(np.isfinite(m2), m2, 0)
        two_maxima = shifted - (np.log(np.sum(np.exp(shifted - m2), axis=1, keepdims=True)) + m2)
    np.testing.assert_array_equal(got, two_maxima)


def test_logsumexp_options_like_scipy() -> None:
    a = np.array([[1.0, 2.0, -np.inf], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0]])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fs.logsumexp(a, axis=1), ss.logsumexp(a, axis=1))
        b = np.array([1.0, 0.0, -1.0])
        x = np.array([[1.0, 50.0, 2.0], [3.0, -2.0, 3.0]])
        for keepdims in (False, True):
            got = fs.logsumexp(x, axis=-1, b=b, keepdims=keepdims, return_sign=True)
            want = ss.logsumexp(x, axis=-1, b=b, keepdims=keepdims, return_sign=True)
            assert_tree_matches(got, tuple(np.asarray(w) for w in want), 1e-13, "logsumexp return_sign")
        assert np.isnan(fs.logsumexp(np.array([0.0, 1.0]), b=np.array([1.0, -2.0])))
        ignored = (np.array([np.inf, 1.0]), np.array([0.0, 1.0]))  # b == 0 drops even an infinite term
        np.testing.assert_array_equal(fs.logsumexp(ignored[0], b=ignored[1]), ss.logsumexp(ignored[0], b=ignored[1]))
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(fg.grad(fs.logsumexp)(x), np.exp(x) / np.exp(x).sum(), rtol=1e-14)


# --- derivatives: the undefined ones raise, the delicate ones are finite ----------------------------


@pytest.mark.parametrize("fun, argnum, param", [
    (lambda a, x: fs.betainc(a, 2.0, x), 0, "a"),
    (lambda b, x: fs.betainc(2.0, b, x), 0, "b"),
    (lambda df, x: fs.stdtr(df, x), 0, "df"),
    (lambda n, x: fs.polygamma(n, x), 0, "n"),
    (lambda df, x: fst.t.cdf(x, df), 0, "df"),
    (lambda b, x: fst.beta.cdf(x, 2.0, b), 0, "b"),
])
def test_shape_parameter_derivatives_raise(fun: Any, argnum: int, param: str) -> None:
    a, x = np.float64(2.0), np.float64(0.4)
    with pytest.raises(NotImplementedError, match=f"derivative with respect to `{param}` is not implemented"):
        fg.grad(fun, argnums=argnum)(a, x)
    with pytest.raises(NotImplementedError, match=f"`{param}`"):
        fg.jvp(fun, (a, x), (np.float64(1.0), np.float64(0.0)))
    g = fg.grad(fun, argnums=1)(a, x)  # the other operand still differentiates
    assert np.isfinite(g)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_differentiates_in_a_as_jax(name: str) -> None:
    """``gammainc``/``gammaincc`` bind the primitive ``lax.igamma``/``igammac`` binds, so they have
    its derivative in ``a`` (``igamma_grad_a``): JAX's jvp in each operand, and central
    differences in ``a``."""
    jax, _ = jax_or_skip()
    a, x = np.array([0.5, 2.0, 7.5]), np.array([0.3, 2.5, 6.0])
    fun, jfun = getattr(fs, name), getattr(jax.scipy.special, name)
    got = fg.grad(lambda a, x: fnp.sum(fun(a, x)), argnums=(0, 1))(a, x)
    ones, zeros = np.ones_like(a), np.zeros_like(a)
    want = (jax.jvp(jfun, (a, x), (ones, zeros))[1], jax.jvp(jfun, (a, x), (zeros, ones))[1])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-14)
    h = 1e-6
    central = (getattr(ss, name)(a + h, x) - getattr(ss, name)(a - h, x)) / (2 * h)
    np.testing.assert_allclose(np.asarray(got[0]), central, rtol=1e-6)
    g_cdf = fg.grad(lambda a: fst.gamma.cdf(np.float64(2.5), a))(np.float64(2.0))
    np.testing.assert_allclose(g_cdf, (ss.gammainc(2.0 + h, 2.5) - ss.gammainc(2.0 - h, 2.5)) / (2 * h), rtol=1e-6)


def test_derivatives_at_delicate_points() -> None:
    assert fg.grad(fs.i1)(0.0) == 0.5
    assert fg.grad(fs.i1e)(0.0) == 0.5
    np.testing.assert_allclose(fg.grad(fs.xlogy, argnums=(0, 1))(0.0, 2.0), (np.log(2.0), 0.0))
    np.testing.assert_allclose(fg.grad(fs.xlogy, argnums=1)(0.0, 0.0), 0.0)
    assert fg.grad(fs.entr)(-1.0) == 0.0
    h = 1e-5  # SciPy's pdf / cdf underflows this far out: compare with a central difference of log_ndtr
    np.testing.assert_allclose(fg.grad(fs.log_ndtr)(-50.0), (ss.log_ndtr(-50.0 + h) - ss.log_ndtr(-50.0 - h)) / (2 * h),
                               rtol=1e-7)
    np.testing.assert_allclose(fg.grad(fs.erfinv)(0.5), np.sqrt(np.pi) / 2 * np.exp(ss.erfinv(0.5) ** 2), rtol=1e-14)
    np.testing.assert_allclose(fg.grad(lambda x: fs.gammainc(2.5, x))(1.2), sst.gamma.pdf(1.2, 2.5), rtol=1e-13)
    np.testing.assert_allclose(fg.grad(lambda x: fst.t.cdf(x, 3.0))(0.7), sst.t.pdf(0.7, 3.0), rtol=1e-13)
    np.testing.assert_allclose(fg.grad(lambda x: fst.beta.cdf(x, 2.0, 3.0))(0.3), sst.beta.pdf(0.3, 2.0, 3.0),
                               rtol=1e-13)
    np.testing.assert_allclose(fg.grad(lambda mu: fst.poisson.cdf(3, mu))(2.0),
                               -sst.poisson.pmf(3, 2.0), rtol=1e-13)  # dQ(k+1, mu)/dmu = -pmf(k)
    for n in range(4):  # d/dx psi^(n) = psi^(n+1), checked against SciPy at third order
        x = np.float64(1.7)
        np.testing.assert_allclose(fg.grad(lambda x: fs.polygamma(n, x))(x), ss.polygamma(n + 1, x), rtol=1e-12)


def test_per_example_gradients_of_a_likelihood() -> None:
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((5, 4))

    def nll(params: Any, x: Any) -> Any:
        loc, log_scale = params
        return -fnp.sum(fst.norm.logpdf(x, loc, fnp.exp(log_scale))) - fst.gamma.logpdf(fnp.exp(log_scale), 2.0)

    params = (np.float64(0.2), np.float64(-0.1))
    got = fg.jit(fg.vmap(fg.grad(nll), in_axes=(None, 0)))(params, xs)
    want = [fg.grad(nll)(params, x) for x in xs]
    for i in range(2):
        np.testing.assert_allclose(got[i], [w[i] for w in want], rtol=1e-12)


def test_dtypes_and_namespaces() -> None:
    assert fs.gammaln(np.float32(2.5)).dtype == np.float32
    assert fs.erfinv(np.array([0.5], np.float32)).dtype == np.float32
    assert fs.gammaln(np.int32(3)).dtype == np.float32  # JAX's: integers up to 32 bits take float32
    assert fs.gammaln(np.int64(3)).dtype == np.float64
    assert fs.gammaln(3).dtype == np.float64
    assert fs.polygamma(1, np.float32(2.0)).dtype == np.float32
    assert fst.norm.logpdf(np.float32(0.5)).dtype == np.float32
    assert fs.psi is fs.digamma
    assert fungraph.scipy.stats.norm.logpdf is fst.norm.logpdf
    assert fungraph.scipy.special.expit is fs.expit
    np.testing.assert_allclose(fs.softmax(np.array([1.0, 2.0])), ss.softmax([1.0, 2.0]), rtol=1e-15)
