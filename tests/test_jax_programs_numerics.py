"""Numerical snippets from JAX's tutorials and API pages, run on JAX and on fungraph with only
the import changed, in both dtype modes: ``lax.scan`` (cumulative sums, an RNN trained through
``jit(grad)``, ``reverse``, ``length``, ``unroll``), ``lax.associative_scan`` (a linear
recurrence), the loop primitives, ``einsum`` (both forms), ``fft``, ``linalg``, ``jax.nn`` and
its initializers, ``lax`` convolutions and windows, ``scipy.linalg``, Gaussian process
regression, a neural ODE (``experimental.ode.odeint`` under ``jit(grad)``), ``scipy.stats``
distributions and ``scipy.sparse.linalg.cg``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _scans(lib: Any, np_: Any) -> Any:
    lax = lib.lax

    def cumsum(res: Any, el: Any) -> Any:
        res = res + el
        return res, res

    def loss(params: Any, xs: Any) -> Any:
        W, U, b = params
        _, hs = lax.scan(lambda h, x: (np_.tanh(W @ h + U @ x + b),) * 2, np_.zeros(4), xs)
        return np_.sum(hs ** 2)

    k = lib.random.split(lib.random.PRNGKey(0), 3)
    params = (lib.random.normal(k[0], (4, 4)) * 0.3, lib.random.normal(k[1], (4, 2)), np_.zeros(4))
    xs = lib.random.normal(k[2], (5, 2))
    a = np_.arange(6.)
    return (lax.scan(cumsum, 0., a), lib.jit(lib.value_and_grad(loss))(params, xs),
            lax.scan(cumsum, 0., a, reverse=True), lax.scan(lambda c, _: (c * 2, c), 1., None, length=4),
            lax.scan(cumsum, 0., a, unroll=2), lax.fori_loop(0, 4, lambda i, c: c * 1.5, 1., unroll=True))


def _associative_scans(lib: Any, np_: Any) -> Any:
    lax = lib.lax

    def linear_recurrence(e1: Any, e2: Any) -> Any:
        a1, b1 = e1
        a2, b2 = e2
        return a1 * a2, a2 * b1 + b2

    x = np_.arange(1., 9.)
    a, b = np_.linspace(0.5, 0.9, 8), np_.linspace(-1., 1., 8)
    return (lax.associative_scan(np_.add, x), lax.associative_scan(np_.multiply, x, reverse=True),
            lax.associative_scan(np_.maximum, x.reshape(2, 4), axis=1), lax.associative_scan(linear_recurrence, (a, b)),
            lib.grad(lambda b: np_.sum(lax.associative_scan(linear_recurrence, (a, b))[1]))(b))


def _control_flow(lib: Any, np_: Any) -> Any:
    lax = lib.lax
    return (lax.fori_loop(0, 10, lambda i, c: c + i * 0.5, 0.),
            lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1), (0, 1.)),
            [lax.switch(i, [lambda x: x + 1, lambda x: x * 2, lambda x: -x], 3.) for i in range(4)],
            lax.cond(True, lambda x, y: x + y, lambda x, y: x - y, 1., 2.), lax.map(lambda x: x ** 2, np_.arange(4.)),
            lax.map(np_.sum, np_.arange(12.).reshape(6, 2), batch_size=2),
            lib.grad(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, 1.))(2.),
            lib.vmap(lambda x: lax.cond(x.sum() > 3, lambda v: v * 2, lambda v: -v, x))(np_.arange(6.).reshape(2, 3)),
            lib.vmap(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c * 2, x))(np_.array([1., 3., 7.])))


def _einsums(lib: Any, np_: Any) -> Any:
    ks = lib.random.split(lib.random.PRNGKey(0), 4)
    A, B = lib.random.normal(ks[0], (2, 3, 4)), lib.random.normal(ks[1], (2, 4, 5))
    M, v = lib.random.normal(ks[2], (4, 4)), lib.random.normal(ks[3], (4,))
    return (np_.einsum('bij,bjk->bik', A, B), np_.einsum('ii->i', M), np_.einsum('ii', M), np_.einsum('i,i->', v, v),
            np_.einsum('...ij,...jk->...ik', A, B, optimize=True), np_.einsum('i,j->ij', v, v),
            np_.einsum(A, [0, 1, 2], B, [0, 2, 3], [0, 1, 3]), np_.einsum(M, [0, 1], v, [1]),
            np_.einsum(A, [Ellipsis, 1, 2], M, [2, 3]), np_.einsum('bij,jk,bkl->bil', A, M, B, optimize='greedy'),
            lib.grad(lambda M: np_.einsum('ij,j,i->', M, v, v))(M), lib.vmap(lambda a: np_.einsum('ij,jk', a, M))(A),
            np_.einsum('ij,ij->i', M, M, precision=lib.lax.Precision.HIGHEST))


def _ffts(lib: Any, np_: Any) -> Any:
    x = np_.sin(np_.linspace(0., 6., 16)) + np_.cos(np_.arange(16.) * 0.3)
    m = np_.arange(12.).reshape(3, 4)
    return (np_.fft.fft(x), np_.fft.ifft(np_.fft.fft(x)), np_.fft.irfft(np_.fft.rfft(x)), np_.fft.fft2(m),
            np_.fft.fftfreq(8, 0.1), np_.fft.rfftfreq(7), np_.fft.fftfreq(5, dtype=np_.float32),
            np_.fft.fftshift(np_.arange(6)), np_.fft.ifftshift(np_.arange(6.)), np_.fft.rfft(x, n=10),
            np_.fft.fft(x, norm="ortho"), lib.grad(lambda x: np_.sum(np_.abs(np_.fft.rfft(x)) ** 2))(x),
            np_.fft.irfft2(np_.fft.rfft2(m), s=m.shape))


def _linalg(lib: Any, np_: Any) -> Any:
    la = np_.linalg
    A = lib.random.normal(lib.random.PRNGKey(1), (4, 4))
    S = A @ A.T + 4 * np_.eye(4)
    b = np_.arange(4.)

    @lib.jit
    def gradients(A: Any, S: Any) -> Any:
        return (lib.grad(lambda S: la.slogdet(S)[1])(S), lib.grad(lambda A: np_.sum(la.svd(A, compute_uv=False)))(A),
                lib.grad(lambda S: np_.sum(la.solve(S, b)))(S), lib.grad(lambda S: np_.sum(la.eigh(S)[0] ** 2))(S))

    return (la.norm(A), la.norm(b, ord=1), la.norm(A, axis=0), la.inv(S), la.solve(S, b), la.det(S),
            la.slogdet(S),
            la.eigvalsh(S), la.svd(A, compute_uv=False), la.pinv(A[:, :3]), la.matrix_power(A, 3), la.cholesky(S),
            la.matrix_rank(A), la.lstsq(A[:, :3], b)[0], la.multi_dot([A, S, A]), gradients(A, S),
            lib.vmap(la.inv)(np_.stack([S, 2 * S])))


def _nn(lib: Any, np_: Any) -> Any:
    nn = lib.nn
    x = np_.linspace(-3., 3., 12).reshape(3, 4)
    q = x[None, :, None, :]
    return (nn.softmax(x), nn.softmax(x, axis=0), nn.log_softmax(x), nn.one_hot(np_.array([0, 2, 5]), 4),
            nn.one_hot(np_.array([1, 0]), 3, dtype=np_.int32), nn.logsumexp(x, axis=1),
            lib.scipy.special.logsumexp(x, b=np_.ones(4) * 0.5, axis=-1),
            lib.scipy.special.logsumexp(x, return_sign=True),
            nn.gelu(x), nn.gelu(x, approximate=False), nn.silu(x), nn.glu(x), nn.standardize(x, axis=-1),
            lib.grad(lambda x: np_.sum(nn.softmax(x) * np_.arange(4.)))(x), nn.softmax(x, where=x > -1.),
            nn.dot_product_attention(q, q, q), nn.dot_product_attention(q, q, q, is_causal=True))


def _initializers(lib: Any, np_: Any) -> Any:
    ini = lib.nn.initializers
    key = lib.random.PRNGKey(0)
    return (ini.glorot_normal()(key, (3, 4)), ini.he_uniform()(key, (4, 3)), ini.lecun_normal()(key, (3, 4)),
            ini.zeros(key, (2,)), ini.ones(key, (2, 2)), ini.normal(stddev=0.5)(key, (3,)),
            ini.constant(3.)(key, (2,)), ini.variance_scaling(2.0, "fan_avg", "truncated_normal")(key, (5, 6)),
            ini.orthogonal()(key, (4, 4)), ini.glorot_normal(in_axis=0, out_axis=1)(key, (2, 3, 4)),
            ini.zeros(key, (2,), np_.int32))


def _convolutions_and_windows(lib: Any, np_: Any) -> Any:
    lax = lib.lax
    img = np_.arange(2. * 5 * 5 * 3).reshape(2, 5, 5, 3) / 100
    ker = np_.ones((3, 3, 3, 4)) * 0.1
    dn = lax.conv_dimension_numbers(img.shape, ker.shape, ("NHWC", "HWIO", "NHWC"))
    return (lax.conv_general_dilated(img, ker, (1, 1), "SAME", dimension_numbers=dn),
            lax.reduce_window(img, -np_.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
            lax.conv(np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3)), (1, 1), "VALID"),
            lax.top_k(np_.array([3., 1., 4., 1., 5.]), 2),
            lax.dot_general(img[0, 0], ker[0, 0], (((1,), (0,)), ((), ()))),
            lax.dynamic_update_slice(img[0, 0], np_.ones((1, 2)), (1, 1)),
            lax.sort_key_val(np_.array([3, 1, 2]), np_.arange(3.)))


def _gaussian_process(lib: Any, np_: Any) -> Any:
    sl = lib.scipy.linalg

    def cov_map(xs: Any, xs2: Any) -> Any:
        return lib.vmap(lambda x: lib.vmap(lambda y: np_.exp(-np_.sum((x - y) ** 2)))(xs))(xs2).T

    def marginal_likelihood(params: Any, x: Any, y: Any) -> Any:
        noise, amp, ls = (np_.logaddexp(params[k], 0.) for k in ("noise", "amplitude", "lengthscale"))
        y, x = y - np_.mean(y), x / ls
        chol = sl.cholesky(amp * cov_map(x, x) + np_.eye(x.shape[0]) * (noise + 1e-6), lower=True)
        kinvy = sl.solve_triangular(chol.T, sl.solve_triangular(chol, y, lower=True))
        return 0.5 * np_.dot(y, kinvy) + np_.sum(np_.log(np_.diag(chol)))

    params = {"amplitude": np_.zeros(()), "noise": np_.zeros(()) - 5., "lengthscale": np_.zeros(())}
    x = np_.linspace(-1, 1, 8)[:, None]
    y = np_.sin(x[:, 0] * 3)
    A = np_.array([[4., 1., 0.5], [1., 3., 1.], [0.5, 1., 2.]])
    return (lib.jit(lib.value_and_grad(marginal_likelihood))(params, x, y), sl.cho_solve(sl.cho_factor(A), y[:3]),
            sl.expm(A * 0.1), sl.lu_solve(sl.lu_factor(A), y[:3]), sl.block_diag(A[:2, :2], np_.ones((1, 1))))


def _distributions(lib: Any, np_: Any) -> Any:
    st = lib.scipy.stats
    x = np_.linspace(-1.5, 2.5, 9)
    q = np_.linspace(0., 1., 5)

    def log_likelihood(theta: Any) -> Any:
        loc, log_scale, p = theta
        scale = np_.exp(log_scale)
        return (np_.sum(st.laplace.logpdf(x, loc, scale)) + np_.sum(st.logistic.logpdf(x, loc, scale))
                + np_.sum(st.expon.logpdf(x, loc - 2., scale)) + np_.sum(st.bernoulli.logpmf(x > 0, p))
                + np_.sum(st.norm.logpdf(x, loc, scale)))

    theta = np_.array([0.2, 0.1, 0.3])
    return (st.uniform.logpdf(x, -1., 2.), st.uniform.cdf(x, -1., 2.), st.uniform.ppf(q, -1., 2.),
            st.expon.cdf(x), st.expon.sf(x, 0.5), st.expon.logcdf(x + 2.), st.expon.logsf(x), st.expon.ppf(q, 1., 2.),
            st.laplace.pdf(x, 0.5), st.laplace.cdf(x, 0.5, 2.), st.logistic.cdf(x), st.logistic.sf(x, 1.),
            st.logistic.ppf(q), st.logistic.isf(q, 1., 2.), st.bernoulli.pmf(np_.array([0, 1, 2]), 0.3),
            st.bernoulli.cdf(x, 0.3), st.bernoulli.ppf(q, 0.3), st.bernoulli.logpmf(np_.array([1, 2]), 0.3, loc=1),
            lib.value_and_grad(log_likelihood)(theta))


def _conjugate_gradients(lib: Any, np_: Any) -> Any:
    cg = importlib.import_module(lib.__name__ + ".scipy.sparse.linalg").cg
    A = np_.array([[4., 1., 0.], [1., 3., 1.], [0., 1., 2.]])
    b = np_.array([1., 2., 3.])

    def solution_norm(scale: Any, b: Any) -> Any:
        x, _ = cg(lambda v: scale * (A @ v), b, tol=1e-10)
        return np_.sum(x ** 2)

    tree_x, _ = cg(lambda t: {"u": A @ t["u"], "w": 2. * t["w"]}, {"u": b, "w": np_.ones(2)})
    return (cg(A, b)[0], cg(A, b, M=np_.diag(1. / np_.diag(A)), maxiter=2)[0], tree_x,
            lib.grad(solution_norm, (0, 1))(1.5, b))


def _neural_ode(lib: Any, np_: Any) -> Any:
    odeint = importlib.import_module(lib.__name__ + ".experimental.ode").odeint

    def dynamics(state: Any, t: Any, params: Any) -> Any:
        W, b = params
        return {"x": np_.tanh(state["x"] @ W + b) - 0.1 * state["v"], "v": state["x"] * np_.cos(t)}

    def loss(params: Any, y0: Any) -> Any:
        ys = odeint(dynamics, y0, ts, params)
        return np_.sum(ys["x"][-1] ** 2) + np_.sum(ys["v"])

    def decay(scale: Any) -> Any:
        return np_.sum(odeint(lambda y, t: -scale * y, np_.ones(2), ts)[-1])

    k1, k2 = lib.random.split(lib.random.PRNGKey(0))
    params = (lib.random.normal(k1, (3, 3)) * 0.5, lib.random.normal(k2, (3,)) * 0.1)
    y0 = {"x": np_.array([1., 0., -1.]), "v": np_.zeros(3)}
    ts = np_.linspace(0., 1., 4)
    return odeint(dynamics, y0, ts, params), lib.jit(lib.grad(loss, (0, 1)))(params, y0), lib.grad(decay)(0.7)


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "scans": _scans, "associative_scans": _associative_scans, "control_flow": _control_flow, "einsums": _einsums,
    "ffts": _ffts, "linalg": _linalg, "nn": _nn, "initializers": _initializers,
    "convolutions_and_windows": _convolutions_and_windows, "gaussian_process": _gaussian_process,
    "neural_ode": _neural_ode, "distributions": _distributions, "conjugate_gradients": _conjugate_gradients,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numerical_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=2e-4, rtol64=1e-8)


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("n, d", [(8, 0.1), (7, 0.3), (1, 2.0), (10, 3)])
def test_fft_frequencies_are_arrays_of_the_mode_s_float(n: int, d: float, x64: bool) -> None:
    for name in ("fftfreq", "rfftfreq"):
        with fg.enable_x64(x64):
            ours = getattr(fnp.fft, name)(n, d)
        with jax.enable_x64(x64):
            theirs = getattr(jnp.fft, name)(n, d)
        assert isinstance(ours, fg.Array) and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-6 if not x64 else 1e-15)


def test_scan_unroll_is_checked_as_jax_checks_it() -> None:
    with pytest.raises(ValueError):
        jax.lax.scan(lambda c, x: (c, x), 0., jnp.ones(2), unroll=-1)
    with pytest.raises(ValueError, match="`unroll` must be a `bool` or a non-negative `int`, got -1"):
        fg.lax.scan(lambda c, x: (c, x), 0., fnp.ones(2), unroll=-1)
    with pytest.raises(TypeError, match="`unroll` expects a concrete"):
        fg.jit(lambda n: fg.lax.scan(lambda c, x: (c, x), 0., fnp.ones(2), unroll=n))(2)


def test_einsum_interleaved_labels_are_checked() -> None:
    with pytest.raises(ValueError, match=r"ints in \[0, 52\) or Ellipsis, got 'i'"):
        fnp.einsum(fnp.ones(2), ["i"])


def test_attention_softmax_runs_in_float32_as_jax_s() -> None:
    """JAX's attention takes its softmax in float32 whatever the inputs' dtype: two float64
    logits 1e-9 apart weigh the same there."""
    q = np.ones((1, 1, 1, 1))
    k = np.array([1.0, 1.0 + 1e-9]).reshape(1, 2, 1, 1)
    v = np.array([0.0, 1.0]).reshape(1, 2, 1, 1)
    with fg.enable_x64(True):
        ours = fg.nn.dot_product_attention(q, k, v, scale=1.0)
    with jax.enable_x64(True):
        theirs = jax.nn.dot_product_attention(q, k, v, scale=1.0)
    assert ours.dtype == theirs.dtype == np.float64
    assert float(ours[0, 0, 0, 0]) == float(theirs[0, 0, 0, 0]) == 0.5


def test_odeint_gradient_in_the_times_matches_jax_s() -> None:
    from jax.experimental.ode import odeint as jax_odeint

    from fungraph.experimental.ode import odeint

    ts = np.array([0.1, 0.4, 1.0])
    with fg.enable_x64(True):
        ours = fg.grad(lambda ts: fnp.sum(odeint(lambda y, t: -y * t, fnp.ones(2), ts)))(ts)
    with jax.enable_x64(True):
        theirs = jax.grad(lambda ts: jnp.sum(jax_odeint(lambda y, t: -y * t, jnp.ones(2), ts)))(ts)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_odeint_refuses_integer_times() -> None:
    from fungraph.experimental.ode import odeint

    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(lambda y, t: -y, fnp.ones(2), np.arange(3))


def test_cg_refuses_mismatched_x0() -> None:
    from fungraph.scipy.sparse.linalg import cg

    with pytest.raises(ValueError, match="matching tree structure"):
        cg(np.eye(2), {"a": np.ones(2)}, x0=[np.ones(2)])
    with pytest.raises(TypeError, match="must be either a function or ndarray"):  # as JAX
        cg("A", np.ones(2))
