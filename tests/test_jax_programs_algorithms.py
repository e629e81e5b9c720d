"""Algorithms as public JAX notebooks and blog posts write them, run on JAX and on fungraph with
only the import changed, in both dtype modes: MAML (a gradient through an inner SGD step), the
empirical neural tangent kernel (JAX's NTK cookbook: ``vmap(jacrev)`` contractions and
``vjp``/``jvp`` products), Hutchinson's trace estimator, Sinkhorn iterations in log space,
k-means under ``while_loop``, a bootstrap particle filter resampling with ``categorical``, the
game of life by ``convolve2d``, the Mandelbrot set on complex arrays, an explicit heat equation,
a spectral Poisson solver, an LSTM over ``scan``, Gumbel-softmax, and gradients with respect to
integer inputs (``allow_int``, ``float0`` tangents)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _maml(lib: Any, np_: Any) -> Any:
    # after Eric Jang's "Meta-learning in 50 lines of JAX" (MAML on sinusoid regression)
    def net(params: Any, x: Any) -> Any:
        (w1, b1), (w2, b2) = params
        return np_.tanh(x @ w1 + b1) @ w2 + b2

    def mse(params: Any, x: Any, y: Any) -> Any:
        return np_.mean((net(params, x) - y) ** 2)

    def inner_update(params: Any, x: Any, y: Any, alpha: float = 0.1) -> Any:
        grads = lib.grad(mse)(params, x, y)
        return lib.tree.map(lambda p, g: p - alpha * g, params, grads)

    def maml_loss(params: Any, x1: Any, y1: Any, x2: Any, y2: Any) -> Any:
        return mse(inner_update(params, x1, y1), x2, y2)

    def batch_maml_loss(params: Any, x1: Any, y1: Any, x2: Any, y2: Any) -> Any:
        return np_.mean(lib.vmap(maml_loss, in_axes=(None, 0, 0, 0, 0))(params, x1, y1, x2, y2))

    k = lib.random.split(lib.random.PRNGKey(0), 4)
    params = [(lib.random.normal(k[0], (1, 8)), np_.zeros(8)), (lib.random.normal(k[1], (8, 1)) * 0.3, np_.zeros(1))]
    phases = lib.random.uniform(k[2], (3, 1, 1)) * np_.pi
    xs = lib.random.uniform(k[3], (3, 10, 1), minval=-5., maxval=5.)
    ys = np_.sin(xs + phases)
    step = lib.jit(lib.value_and_grad(batch_maml_loss))
    value, grads = step(params, xs[:, :5], ys[:, :5], xs[:, 5:], ys[:, 5:])
    return value, grads, lib.grad(maml_loss)(params, xs[0, :5], ys[0, :5], xs[0, 5:], ys[0, 5:])


def _neural_tangent_kernel(lib: Any, np_: Any) -> Any:
    # JAX docs, "Neural Tangent Kernels" cookbook: empirical NTKs by Jacobian contraction and by products
    def f(params: Any, x: Any) -> Any:
        (w1, b1), (w2, b2) = params
        return np_.tanh(x @ w1 + b1) @ w2 + b2

    def empirical_ntk_jacobian_contraction(f: Any, params: Any, x1: Any, x2: Any) -> Any:
        jac1 = lib.vmap(lib.jacrev(f), (None, 0))(params, x1)
        jac2 = lib.vmap(lib.jacrev(f), (None, 0))(params, x2)
        jac1, jac2 = lib.tree.leaves(jac1), lib.tree.leaves(jac2)
        return sum(np_.einsum("Naf,Mbf->NMab", j1.reshape(j1.shape[:2] + (-1,)), j2.reshape(j2.shape[:2] + (-1,)))
                   for j1, j2 in zip(jac1, jac2))

    def empirical_ntk_ntk_vp(f: Any, params: Any, x1: Any, x2: Any) -> Any:
        def get_ntk(x1: Any, x2: Any) -> Any:
            def func_x1(params: Any) -> Any:
                return f(params, x1)

            def func_x2(params: Any) -> Any:
                return f(params, x2)

            output, vjp_fn = lib.vjp(func_x1, params)

            def get_ntk_slice(vec: Any) -> Any:
                vjps = vjp_fn(vec)
                _, jvps = lib.jvp(func_x2, (params,), vjps)
                return jvps

            basis = np_.eye(output.size, dtype=output.dtype).reshape(-1, *output.shape)
            return lib.vmap(get_ntk_slice)(basis)

        return lib.vmap(lib.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)

    k = lib.random.split(lib.random.PRNGKey(1), 4)
    params = [(lib.random.normal(k[0], (3, 5)) / 2, lib.random.normal(k[1], (5,)) * 0.1),
              (lib.random.normal(k[2], (5, 2)) / 2, np_.zeros(2))]
    x1 = lib.random.normal(k[3], (4, 3))
    x2 = x1[:3] * 0.5
    return (empirical_ntk_jacobian_contraction(f, params, x1, x2), empirical_ntk_ntk_vp(f, params, x1, x2),
            lib.jit(empirical_ntk_jacobian_contraction, static_argnums=0)(f, params, x1, x1))


def _hutchinson_trace(lib: Any, np_: Any) -> Any:
    # after Hutchinson trace estimators of Jacobians (continuous normalising flows, FFJORD-style)
    def f(x: Any) -> Any:
        return np_.tanh(np_.array([[1., .5, 0.], [.2, 1., .3], [0., -.4, 1.]]) @ x) * x

    def hutchinson(key: Any, x: Any, n: int = 16) -> Any:
        vs = lib.random.rademacher(key, (n,) + x.shape, dtype=x.dtype)
        _, f_vjp = lib.vjp(f, x)
        return np_.mean(lib.vmap(lambda v: np_.vdot(f_vjp(v)[0], v))(vs))

    def jvp_trace(key: Any, x: Any, n: int = 16) -> Any:
        vs = lib.random.normal(key, (n,) + x.shape)
        return np_.mean(lib.vmap(lambda v: np_.vdot(lib.jvp(f, (x,), (v,))[1], v))(vs))

    x = np_.array([0.3, -0.2, 0.8])
    key = lib.random.PRNGKey(0)
    return (np_.trace(lib.jacfwd(f)(x)), hutchinson(key, x), lib.jit(jvp_trace)(key, x),
            lib.grad(lambda x: hutchinson(key, x))(x))


def _sinkhorn(lib: Any, np_: Any) -> Any:
    # after log-domain Sinkhorn iterations for entropic optimal transport in JAX
    logsumexp = lib.scipy.special.logsumexp

    def sinkhorn(a: Any, b: Any, C: Any, eps: float = 0.1, n_iter: int = 50) -> Any:
        log_a, log_b = np_.log(a), np_.log(b)

        def body(i: Any, fg_: Any) -> Any:
            f, g = fg_
            f = eps * (log_a - logsumexp((g[None, :] - C) / eps, axis=1))
            g = eps * (log_b - logsumexp((f[:, None] - C) / eps, axis=0))
            return f, g

        f, g = lib.lax.fori_loop(0, n_iter, body, (np_.zeros_like(a), np_.zeros_like(b)))
        P = np_.exp((f[:, None] + g[None, :] - C) / eps)
        return np_.sum(P * C), P

    x = np_.linspace(0., 1., 5)[:, None]
    y = np_.linspace(0.2, 1.3, 4)[:, None]
    C = np_.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    a, b = np_.ones(5) / 5, np_.ones(4) / 4
    cost, P = lib.jit(sinkhorn)(a, b, C)
    return cost, P, P.sum(0), lib.grad(lambda C: sinkhorn(a, b, C)[0])(C)


def _k_means(lib: Any, np_: Any) -> Any:
    # after k-means clustering in JAX (vmap distances, segment means, while_loop to convergence)
    def assign(points: Any, centroids: Any) -> Any:
        d = lib.vmap(lambda p: np_.sum((centroids - p) ** 2, axis=1))(points)
        return np_.argmin(d, axis=1), np_.min(d, axis=1)

    def update(points: Any, labels: Any, k: int) -> Any:
        one_hot = lib.nn.one_hot(labels, k)
        return (one_hot.T @ points) / np_.maximum(one_hot.sum(0), 1.)[:, None]

    def kmeans(points: Any, centroids: Any, k: int = 3, tol: float = 1e-6) -> Any:
        def cond(state: Any) -> Any:
            _, prev, cur, i = state
            return (prev - cur > tol) & (i < 20)

        def body(state: Any) -> Any:
            centroids, _, cur, i = state
            labels, d = assign(points, centroids)
            return update(points, labels, k), cur, np_.mean(d), i + 1

        return lib.lax.while_loop(cond, body, (centroids, np_.inf, 1e10, 0))

    key = lib.random.PRNGKey(0)
    centres = np_.array([[0., 0.], [3., 3.], [0., 4.]])
    points = (centres[np_.arange(30) % 3] + 0.5 * lib.random.normal(key, (30, 2)))
    centroids, _, distortion, iterations = lib.jit(kmeans)(points, points[:3])
    return centroids, distortion, iterations, assign(points, centroids)[0]


def _particle_filter(lib: Any, np_: Any) -> Any:
    # after bootstrap particle filters in JAX (random.categorical resampling inside scan)
    random = lib.random
    n = 64

    def step(carry: Any, inputs: Any) -> Any:
        particles, log_z = carry
        y, key = inputs
        k1, k2 = random.split(key)
        particles = 0.9 * particles + 0.5 * random.normal(k1, (n,))
        log_w = lib.scipy.stats.norm.logpdf(y, particles, 0.4)
        log_z = log_z + lib.scipy.special.logsumexp(log_w) - np_.log(n)
        idx = random.categorical(k2, log_w, shape=(n,))
        return (particles[idx], log_z), np_.mean(particles[idx])

    ys = np_.sin(np_.arange(8.) / 2)
    keys = random.split(random.PRNGKey(0), 8)
    (particles, log_z), means = lib.jit(lambda ys, keys: lib.lax.scan(step, (np_.zeros(n), 0.), (ys, keys)))(ys, keys)
    return np_.sort(particles)[::16], log_z, means


def _cellular_automata_and_fractals(lib: Any, np_: Any) -> Any:
    # after JAX ports of Conway's game of life (convolve2d) and the Mandelbrot set (complex fori_loop)
    convolve2d = lib.scipy.signal.convolve2d

    def life_step(board: Any) -> Any:
        neighbours = convolve2d(board, np_.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]]), mode="same")
        return ((neighbours == 3) | (board & (neighbours == 2))).astype(board.dtype)

    board = np_.zeros((8, 8), dtype=np_.int32).at[1, 2].set(1).at[2, 3].set(1).at[3, 1:4].set(1)
    boards = [board]
    for _ in range(4):
        boards.append(lib.jit(life_step)(boards[-1]))

    def mandelbrot(c: Any, max_iter: int = 20) -> Any:
        def body(i: Any, state: Any) -> Any:
            z, count = state
            z = np_.where(np_.abs(z) <= 2., z * z + c, z)
            return z, count + (np_.abs(z) <= 2.)
        return lib.lax.fori_loop(0, max_iter, body, (np_.zeros_like(c), np_.zeros(c.shape, np_.int32)))[1]

    re, im = np_.meshgrid(np_.arange(-8., 3.) / 4, np_.arange(-4., 5.) / 4)
    return boards, mandelbrot(re + 1j * im), lib.jit(mandelbrot)(re + 1j * im)


def _pde_solvers(lib: Any, np_: Any) -> Any:
    # after finite-difference and spectral PDE solvers written with jnp.roll and jnp.fft
    def heat_step(u: Any, alpha: float = 0.2) -> Any:
        lap = np_.roll(u, 1, 0) + np_.roll(u, -1, 0) + np_.roll(u, 1, 1) + np_.roll(u, -1, 1) - 4 * u
        return u + alpha * lap

    u0 = np_.zeros((8, 8)).at[3:5, 3:5].set(1.0)
    u = lib.lax.fori_loop(0, 10, lambda i, u: heat_step(u), u0)

    def poisson_periodic(f: Any) -> Any:
        n = f.shape[0]
        k = np_.fft.fftfreq(n, d=1. / n) * 2 * np_.pi
        kx, ky = np_.meshgrid(k, k, indexing="ij")
        k2 = kx ** 2 + ky ** 2
        f_hat = np_.fft.fft2(f)
        u_hat = np_.where(k2 == 0, 0., -f_hat / np_.where(k2 == 0, 1., k2))
        return np_.real(np_.fft.ifft2(u_hat))

    g = np_.linspace(0., 1., 8, endpoint=False)
    X, Y = np_.meshgrid(g, g, indexing="ij")
    f = np_.sin(2 * np_.pi * X) * np_.cos(4 * np_.pi * Y)
    peak_gradient = lib.grad(lambda a: heat_step(u0, a).max())(0.2)
    return u, u.sum(), poisson_periodic(f), lib.jit(poisson_periodic)(f), peak_gradient


def _lstm(lib: Any, np_: Any) -> Any:
    # after LSTM cells written with lax.scan in pure JAX
    def lstm_cell(params: Any, carry: Any, x: Any) -> Any:
        h, c = carry
        gates = np_.concatenate([x, h]) @ params["W"] + params["b"]
        i, f, g, o = np_.split(gates, 4)
        c = lib.nn.sigmoid(f) * c + lib.nn.sigmoid(i) * np_.tanh(g)
        h = lib.nn.sigmoid(o) * np_.tanh(c)
        return (h, c), h

    def loss(params: Any, xs: Any, ys: Any) -> Any:
        hidden = params["b"].shape[0] // 4
        _, hs = lib.lax.scan(lambda carry, x: lstm_cell(params, carry, x), (np_.zeros(hidden), np_.zeros(hidden)), xs)
        return np_.mean((hs @ params["out"] - ys) ** 2)

    k = lib.random.split(lib.random.PRNGKey(0), 3)
    params = {"W": lib.random.normal(k[0], (2 + 4, 16)) * 0.3, "b": np_.zeros(16),
              "out": lib.random.normal(k[1], (4, 1)) * 0.3}
    xs = lib.random.normal(k[2], (3, 7, 2))
    ys = np_.cumsum(xs[..., :1], axis=1)
    batched = lambda p: np_.mean(lib.vmap(loss, (None, 0, 0))(p, xs, ys))  # noqa: E731
    return lib.jit(lib.value_and_grad(batched))(params)


def _gumbel_softmax(lib: Any, np_: Any) -> Any:
    # after Gumbel-softmax / straight-through relaxations in JAX
    def gumbel_softmax(key: Any, logits: Any, tau: float = 0.5, hard: bool = False) -> Any:
        g = lib.random.gumbel(key, logits.shape)
        y = lib.nn.softmax((logits + g) / tau, axis=-1)
        if hard:
            y_hard = lib.nn.one_hot(np_.argmax(y, axis=-1), logits.shape[-1])
            y = y_hard - lib.lax.stop_gradient(y) + y
        return y

    logits = np_.log(np_.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))
    key = lib.random.PRNGKey(4)
    objective = lambda lg, hard: np_.sum(gumbel_softmax(key, lg, hard=hard) * np_.arange(3.))  # noqa: E731
    return (gumbel_softmax(key, logits), gumbel_softmax(key, logits, hard=True), lib.grad(objective)(logits, False),
            lib.grad(objective)(logits, True))


def _integer_inputs(lib: Any, np_: Any) -> Any:
    # JAX docs: differentiating functions with integer arguments (allow_int, float0 tangents)
    def f(x: Any, n: Any) -> Any:
        return np_.sum(x ** 2) * n

    gx, _ = lib.grad(f, argnums=(0, 1), allow_int=True)(np_.arange(3.), 2)
    value, (vgx, _) = lib.value_and_grad(f, argnums=(0, 1), allow_int=True)(np_.arange(3.), np_.int32(2))
    primal, tangent = lib.jvp(lambda x, n: x * n, (np_.arange(3.), 2), (np_.ones(3), np.zeros((), lib.dtypes.float0)))
    _, f_vjp = lib.vjp(f, np_.arange(3.), np_.int32(3))
    return gx, value, vgx, primal, tangent, f_vjp(1.)[0]


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "maml": _maml, "neural_tangent_kernel": _neural_tangent_kernel, "hutchinson_trace": _hutchinson_trace,
    "sinkhorn": _sinkhorn, "k_means": _k_means, "particle_filter": _particle_filter,
    "cellular_automata_and_fractals": _cellular_automata_and_fractals, "pde_solvers": _pde_solvers, "lstm": _lstm,
    "gumbel_softmax": _gumbel_softmax, "integer_inputs": _integer_inputs,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_algorithm_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=5e-4, rtol64=1e-9)


@pytest.mark.parametrize("x64", [True, False])
def test_integer_inputs_get_float0_gradients(x64: bool) -> None:
    """As JAX: ``grad(..., allow_int=True)`` and ``vjp`` give float0 zeros for integer and bool
    inputs, eagerly, under ``jit`` and under ``vmap`` (batched); ``jacrev`` gives zeros of the
    input's dtype."""
    def f(x: Any, n: Any) -> Any:
        return x * n

    for lib in (fg, jax):
        with fg.enable_x64(x64), jax.enable_x64(x64):
            g = lib.grad(f, argnums=(0, 1), allow_int=True)
            _, pull = lib.vjp(f, np.float32(1.0), np.int32(2))
            results = [g(1.0, 2), lib.jit(g)(1.0, 2), lib.vmap(g)(np.arange(3.0), np.arange(3)), pull(np.float32(1.0)),
                       lib.grad(f, argnums=(0, 1), allow_int=True)(1.0, True),
                       lib.jacrev(f, argnums=(0, 1), allow_int=True)(np.ones(2), np.arange(2))]
            got = [[(np.dtype(a.dtype), np.shape(a)) for a in r] for r in results]
        if lib is fg:
            ours = got
    assert ours == got


def test_grad_refuses_integer_inputs_without_allow_int() -> None:
    with pytest.raises(TypeError, match="pass allow_int=True"):
        fg.grad(lambda x, n: x * n, argnums=(0, 1))(1.0, 2)
