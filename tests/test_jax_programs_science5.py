"""Scientific and machine-learning programs as people write them in JAX, run on JAX and on
fungraph with only the import changed, in both dtype modes: a variational quantum eigensolver on
complex state vectors, a Fourier neural operator, a denoising diffusion model, Stein variational
gradient descent, NeRF-style volume rendering, a mixture density network, an SDF ray marcher,
``scipy.optimize.minimize`` fits and finite differences on uneven grids. Plus focused checks of
what these programs exposed: ``vmap``'s unmapped arguments, ``gradient``'s coordinate arrays,
and requests for Python's scalar types as dtypes."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from functools import partial, reduce
from typing import Any

import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program, program_cases

jax, jnp = jax_or_skip()


def _quantum_vqe(lib: Any, np_: Any) -> Any:
    # after state-vector circuit simulators in JAX: complex64 gates composed by kron, the energy of
    # a 3-qubit transverse-field Ising Hamiltonian, its gradient in the angles, and expm
    eye, x_gate = np_.eye(2, dtype=np_.complex64), np_.array([[0, 1], [1, 0]], dtype=np_.complex64)
    z_gate = np_.array([[1, 0], [0, -1]], dtype=np_.complex64)

    def ry(t: Any) -> Any:
        c, s = np_.cos(t / 2), np_.sin(t / 2)
        return np_.array([[c, -s], [s, c]]).astype(np_.complex64)

    def on(gate: Any, q: int) -> Any:
        return reduce(np_.kron, [gate if i == q else eye for i in range(3)])

    cnot = np_.eye(4, dtype=np_.complex64)[np_.array([0, 1, 3, 2])]
    H = sum(on(z_gate, q) @ on(z_gate, (q + 1) % 3) for q in range(3)) + 0.5 * sum(on(x_gate, q) for q in range(3))

    def state(theta: Any) -> Any:
        psi = np_.zeros(8, np_.complex64).at[0].set(1.)
        for q in range(3):
            psi = on(ry(theta[q, 0]), q) @ psi
            psi = on(np_.diag(np_.exp(np_.array([-0.5j, 0.5j]) * theta[q, 1])), q) @ psi
        return np_.kron(eye, cnot) @ (np_.kron(cnot, eye) @ psi)

    def energy(theta: Any) -> Any:
        psi = state(theta)
        return np_.real(np_.vdot(psi, H @ psi))

    theta = np_.linspace(0.1, 1.2, 6).reshape(3, 2)
    e, g = lib.value_and_grad(energy)(theta)
    theta = theta - 0.1 * lib.jit(lib.grad(energy))(theta)
    U = lib.scipy.linalg.expm(-1j * 0.3 * H)
    return e, g, energy(theta), np_.abs(state(theta)) ** 2, np_.abs(U @ state(theta)) ** 2, np_.linalg.eigvalsh(H)[:2]


def _fourier_neural_operator(lib: Any, np_: Any) -> Any:
    # after Fourier neural operators in JAX: rfft, complex spectral weights on the low modes built
    # from real parameters, irfft, and gradient steps under jit
    k1, k2, k3 = lib.random.split(lib.random.PRNGKey(0), 3)
    modes, width, n = 3, 2, 8
    params = {"wr": lib.random.normal(k1, (modes, width, width)) * 0.3,
              "wi": lib.random.normal(k2, (modes, width, width)) * 0.3, "lift": lib.random.normal(k3, (1, width))}

    def model(p: Any, u: Any) -> Any:
        v = u[:, None] @ p["lift"]
        vh = np_.fft.rfft(v, axis=0)
        out = np_.einsum("mi,mio->mo", vh[:modes], p["wr"] + 1j * p["wi"])
        full = np_.zeros((n // 2 + 1, width), dtype=out.dtype).at[:modes].set(out)
        return lib.nn.gelu(np_.fft.irfft(full, n=n, axis=0) + v).mean(-1)

    xs = np_.linspace(0, 2 * np_.pi, n, endpoint=False)
    u = np_.sin(xs) + 0.3 * np_.cos(3 * xs)
    loss = lambda p: np_.mean((model(p, u) - np_.roll(u, 2) * 0.8) ** 2)
    l0, g = lib.value_and_grad(loss)(params)
    params = lib.jit(lambda p: lib.tree.map(lambda a, b: a - 0.05 * b, p, lib.grad(loss)(p)))(params)
    return l0, g, loss(params)


def _diffusion_model(lib: Any, np_: Any) -> Any:
    # after "diffusion models from scratch" in JAX: a cosine schedule, q_sample at random steps,
    # an MLP noise model with sinusoidal time embeddings, and ancestral sampling in a jitted scan
    T = 6
    t = np_.arange(T + 1) / T
    abar = np_.cos((t + 0.008) / 1.008 * np_.pi / 2) ** 2
    betas = np_.clip(1 - abar[1:] / abar[:-1], 0., 0.999)
    alphas, acum = 1. - betas, np_.cumprod(1. - betas)

    def eps_model(p: Any, x: Any, t: Any) -> Any:
        a = t[..., None] * np_.exp(-np_.log(100.) * np_.arange(2) / 2)
        h = lib.nn.silu(np_.concatenate([x, np_.sin(a), np_.cos(a)], axis=-1) @ p[0])
        return h @ p[1]

    def loss(p: Any, key: Any, x0: Any) -> Any:
        k1, k2 = lib.random.split(key)
        tt = lib.random.randint(k1, (x0.shape[0],), 0, T)
        noise = lib.random.normal(k2, x0.shape)
        xt = np_.sqrt(acum[tt])[:, None] * x0 + np_.sqrt(1 - acum[tt])[:, None] * noise
        return np_.mean((eps_model(p, xt, tt.astype(np_.float32)) - noise) ** 2)

    key = lib.random.PRNGKey(0)
    k1, k2 = lib.random.split(key)
    p = [lib.random.normal(k1, (6, 8)) * 0.3, lib.random.normal(k2, (8, 2)) * 0.3]
    x0 = lib.random.normal(key, (6, 2)) * np_.array([1., 0.3]) + 1.
    loss0, g = lib.jit(lib.value_and_grad(loss))(p, key, x0)
    p = lib.tree.map(lambda a, b: a - 0.1 * b, p, g)

    @lib.jit
    def sample(p: Any, key: Any) -> Any:
        def step(x: Any, inp: Any) -> Any:
            i, k = inp
            eps = eps_model(p, x, np_.full((x.shape[0],), i, np_.float32))
            mean = (x - betas[i] / np_.sqrt(1 - acum[i]) * eps) / np_.sqrt(alphas[i])
            return mean + (i > 0) * np_.sqrt(betas[i]) * lib.random.normal(k, x.shape), None

        return lib.lax.scan(step, lib.random.normal(key, (3, 2)), (np_.arange(T)[::-1], lib.random.split(key, T)))[0]

    return betas, loss0, sample(p, lib.random.PRNGKey(5))


def _stein_variational_gd(lib: Any, np_: Any) -> Any:
    # after Stein variational gradient descent in JAX: an RBF kernel with the median heuristic,
    # the kernel's gradient by nested vmap(grad), particles moved toward a Gaussian mixture
    def logp(x: Any) -> Any:
        return lib.scipy.special.logsumexp(np_.array([-0.5 * np_.sum((x - 1.5) ** 2), -0.5 * np_.sum((x + 1.) ** 2)]))

    def kernel(x: Any, y: Any, h: Any) -> Any:
        return np_.exp(-np_.sum((x - y) ** 2) / h)

    @lib.jit
    def step(xs: Any) -> Any:
        h = np_.median(np_.sum((xs[:, None] - xs[None]) ** 2, -1)) / np_.log(xs.shape[0] + 1.)
        K = lib.vmap(lambda x: lib.vmap(lambda y: kernel(x, y, h))(xs))(xs)
        gK = lib.vmap(lambda x: lib.vmap(lambda y: lib.grad(kernel)(y, x, h))(xs))(xs)
        return xs + 0.3 * (K @ lib.vmap(lib.grad(logp))(xs) + gK.sum(1)) / xs.shape[0]

    xs = lib.random.normal(lib.random.PRNGKey(2), (5, 2))
    for _ in range(2):
        xs = step(xs)
    return xs, lib.vmap(logp)(xs)


def _volume_rendering(lib: Any, np_: Any) -> Any:
    # after tiny-NeRF volume rendering in JAX: positional encoding, stratified samples along rays,
    # alpha compositing by cumprod and roll, and the gradient of a photometric loss
    def mlp(p: Any, x: Any) -> Any:
        xb = x[..., None, :] * 2. ** np_.arange(2)[:, None]
        enc = np_.concatenate([x, np_.sin(xb).reshape(*x.shape[:-1], -1), np_.cos(xb).reshape(*x.shape[:-1], -1)], -1)
        out = lib.nn.relu(enc @ p[0]) @ p[1]
        return lib.nn.sigmoid(out[..., :3]), lib.nn.softplus(out[..., 3])

    def render(p: Any, dirs: Any, key: Any, n: int = 6) -> Any:
        t = np_.linspace(2., 6., n) + lib.random.uniform(key, dirs.shape[:-1] + (n,)) * (4. / n)
        rgb, sigma = mlp(p, dirs[..., None, :] * t[..., :, None])
        delta = np_.concatenate([np_.diff(t, axis=-1), np_.broadcast_to(1e10, t[..., :1].shape)], -1)
        alpha = 1. - np_.exp(-sigma * delta)
        trans = np_.roll(np_.cumprod(1. - alpha + 1e-10, axis=-1), 1, axis=-1).at[..., 0].set(1.)
        w = alpha * trans
        return np_.sum(w[..., None] * rgb, -2), np_.sum(w * t, -1)

    key = lib.random.PRNGKey(0)
    k1, k2 = lib.random.split(key)
    p = [lib.random.normal(k1, (15, 8)) * 0.2, lib.random.normal(k2, (8, 4)) * 0.2]
    dirs = lib.nn.standardize(lib.random.normal(key, (4, 3)), axis=-1) / np_.sqrt(3.)
    loss = lambda p: np_.mean((render(p, dirs, k2)[0] - np_.linspace(0., 1., 12).reshape(4, 3)) ** 2)
    return render(p, dirs, k2), lib.value_and_grad(loss)(p), lib.jit(loss)(p)


def _mixture_density_network(lib: Any, np_: Any) -> Any:
    # after mixture density networks in JAX: log-softmax mixture weights, a logsumexp likelihood
    # of Gaussian components, a jitted gradient step, sampling by categorical and take_along_axis
    key = lib.random.PRNGKey(0)
    x = np_.linspace(-1., 1., 8)[:, None]
    y = np_.sin(3 * x[:, 0]) + 0.1 * lib.random.normal(key, (8,))
    p = {"w1": lib.random.normal(key, (1, 6)), "w2": lib.random.normal(lib.random.split(key)[0], (6, 9)) * 0.3}

    def heads(p: Any, x: Any) -> Any:
        logits, mu, log_sigma = np_.split(np_.tanh(x @ p["w1"]) @ p["w2"], 3, axis=-1)
        return lib.nn.log_softmax(logits), mu, np_.exp(log_sigma)

    def nll(p: Any) -> Any:
        logpi, mu, sigma = heads(p, x)
        return -np_.mean(lib.nn.logsumexp(logpi + lib.scipy.stats.norm.logpdf(y[:, None], mu, sigma), axis=-1))

    p = lib.jit(lambda p: lib.tree.map(lambda a, g: a - 0.05 * g, p, lib.grad(nll)(p)))(p)
    logpi, mu, sigma = heads(p, x)
    k1, k2 = lib.random.split(key)
    comp = lib.random.categorical(k1, logpi, axis=-1)
    pick = lambda a: np_.take_along_axis(a, comp[:, None], axis=-1)[:, 0]
    return nll(p), comp, pick(mu) + pick(sigma) * lib.random.normal(k2, (8,))


def _sdf_ray_marching(lib: Any, np_: Any) -> Any:
    # after signed-distance ray marchers in JAX: sphere tracing in a vmapped lax.while_loop,
    # normals by grad of the SDF, Lambertian shading
    def sdf(p: Any) -> Any:
        sphere = np_.linalg.norm(p - np_.array([0., 0., 3.])) - 1.
        box = np_.linalg.norm(np_.maximum(np_.abs(p - np_.array([1.5, 0., 4.])) - 0.5, 0.))
        return np_.minimum(sphere, box)

    def march(d: Any) -> Any:
        cond = lambda s: (s[1] < 24) & (sdf(s[0] * d) > 1e-3) & (s[0] < 10.)
        return lib.lax.while_loop(cond, lambda s: (s[0] + sdf(s[0] * d), s[1] + 1), (0., 0))

    xs, ys = np_.meshgrid(np_.linspace(-0.5, 0.5, 3), np_.linspace(-0.5, 0.5, 2))
    dirs = np_.stack([xs, ys, np_.ones_like(xs)], -1).reshape(-1, 3)
    dirs = dirs / np_.linalg.norm(dirs, axis=-1, keepdims=True)
    t, steps = lib.jit(lib.vmap(march))(dirs)
    normals = lib.vmap(lib.grad(sdf))(t[:, None] * dirs)
    return t, steps, np_.clip(normals @ np_.array([0.5, 0.5, -1.]), 0., 1.) * (t < 10.)


def _minimize_fits(lib: Any, np_: Any) -> Any:
    # jax.scipy.optimize.minimize with BFGS: Rosenbrock eagerly, a regularised logistic regression
    # under jit to a gradient norm float32 reaches; the gradient at the optimum is rounding noise,
    # so only its size is compared
    minimize = importlib.import_module(lib.__name__ + ".scipy.optimize").minimize
    rosen = lambda x: np_.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)
    r = minimize(rosen, np_.array([-1.2, 1.0, 0.5]), method="BFGS")
    X = np_.array([[0.5, 1.0], [1.5, -0.3], [-1.0, 0.2], [0.3, 0.8], [-0.7, -1.1]])
    y = np_.array([1., 1., 0., 1., 0.])

    def nll(w: Any) -> Any:
        logits = X @ w[:2] + w[2]
        return np_.mean(np_.logaddexp(0., logits) - y * logits) + 0.1 * np_.sum(w ** 2)

    r2 = lib.jit(lambda w0: minimize(nll, w0, method="BFGS", options={"gtol": 1e-3}))(np_.zeros(3))
    return r.x, r.fun, r.success, r.nit, r2.x, r2.fun, r2.status, np_.linalg.norm(r2.jac) < 1e-3, r2.hess_inv


def _uneven_finite_differences(lib: Any, np_: Any) -> Any:
    # jax.numpy.gradient's API page: numerical derivatives on uneven sample coordinates along each
    # axis, compared with automatic ones, and gradient's own derivative under jit and vmap
    x = np_.array([0., 0.3, 0.5, 1.1, 1.7, 2.0])
    y = np_.sin(x) * 3
    m = np_.outer(y, x[:4])
    return (np_.gradient(y, x), np_.gradient(y, 0.5), np_.gradient(m), np_.gradient(m, x, x[:4] ** 2),
            np_.gradient(m, axis=()), np_.gradient(np_.arange(5)), np_.gradient(m, x[:4], axis=-1),
            lib.vmap(lib.grad(lambda v: 3 * np_.sin(v)))(x), lib.jit(np_.gradient)(y, x),
            lib.grad(lambda v: (np_.gradient(y, v) ** 2).sum())(x), lib.vmap(lambda r: np_.gradient(r, x[:4]))(m))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "quantum_vqe": _quantum_vqe, "fourier_neural_operator": _fourier_neural_operator,
    "diffusion_model": _diffusion_model, "stein_variational_gd": _stein_variational_gd,
    "volume_rendering": _volume_rendering, "mixture_density_network": _mixture_density_network,
    "sdf_ray_marching": _sdf_ray_marching, "minimize_fits": _minimize_fits,
    "uneven_finite_differences": _uneven_finite_differences,
}

#: The quantum program computes in complex64 with x64 on (its gates ask for it); the diffusion
#: sampler divides by small noise levels, which amplifies last-bit differences.
TOL64 = {"quantum_vqe": 1e-6, "diffusion_model": 1e-7}


#: The cases the suite runs (the programs that exposed a fix, and the cheapest); every program
#: passes in both modes, checked with ``FUNGRAPH_ALL_JAX_PROGRAMS=1``.
IN_SUITE = [("uneven_finite_differences", True), ("uneven_finite_differences", False),
            ("stein_variational_gd", False), ("sdf_ray_marching", False)]


@pytest.mark.parametrize(("name", "x64"), program_cases(PROGRAMS, IN_SUITE))
def test_science_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=1e-4, rtol64=TOL64.get(name, 1e-9))


def test_vmap_passes_unmapped_arguments_as_given() -> None:
    """As JAX's: an argument with ``in_axes=None`` reaches the function as it was passed, so a
    Python int can be a jitted function's static argument, also through a jit of the vmap
    that names it in ``static_argnames`` and gets it by position."""
    seen = []

    def show(x: Any, n: Any, name: Any) -> Any:
        seen.append((type(n), type(name)))
        return x[:n]

    for lib, np_ in ((fg, fnp), (jax, jnp)):
        inner = partial(lib.jit, static_argnames=["n"])(lambda x, n=2: x[:n] * 2)
        outer = lib.jit(lib.vmap(inner, in_axes=(0, None)), static_argnames=["n"])
        x = np_.arange(12.).reshape(3, 4)
        assert lib.vmap(inner, in_axes=(0, None))(x, 3).shape == (3, 3)
        assert outer(x, 2).shape == (3, 2)
        lib.vmap(show, in_axes=(0, None, None))(x, 1, "s")
    assert seen[0] == seen[1] == (int, str)


@pytest.mark.parametrize("lib", [fnp, jnp])
def test_gradient_checks_its_spacing_as_jax_does(lib: Any) -> None:
    y = lib.arange(5.) ** 2
    with pytest.raises(ValueError, match="same length"):
        lib.gradient(y, lib.arange(4.))
    with pytest.raises(TypeError, match="spacing"):
        lib.gradient(y.reshape(5, 1) * lib.ones((1, 3)), 1., 2., 3.)


def test_python_scalar_types_as_dtypes_truncate_silently_as_jax_s() -> None:
    """With x64 off, ``dtype=float`` (``int``, ``complex``) names the default dtype without JAX's
    truncation warning, which a numpy 64-bit dtype still gets."""
    def requests(lib: Any, np_: Any) -> list[Callable[[], Any]]:
        key = lib.random.PRNGKey(0)
        return [lambda: lib.random.normal(key, (2,), dtype=float), lambda: np_.zeros(2, float),
                lambda: np_.arange(3, dtype=float), lambda: np_.ones(2).astype(complex), lambda: np_.full(2, 1, int),
                lambda: np_.zeros(2, "float64"), lambda: np_.zeros(2, np_.float64), lambda: np_.array([1.], float)]

    def warned(lib: Any, np_: Any, mode: Any) -> list[tuple[int, str]]:
        out = []
        with mode(False):
            for request in requests(lib, np_):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    result = request()
                out.append((len(caught), str(result.dtype)))
        return out

    ours, theirs = warned(fg, fnp, fg.enable_x64), warned(jax, jnp, jax.enable_x64)
    assert ours == theirs
    assert [n for n, _ in ours] == [0, 0, 0, 0, 0, 1, 1, 0]


@pytest.mark.parametrize("lib", [fnp, jnp])
def test_eager_shape_errors_are_the_type_errors_jax_raises(lib: Any) -> None:
    """The "Autobatching log-densities" notebook catches the error of a batch passed to an
    unbatched function: an eager `@`, `dot` or `reshape` of mismatched shapes raises JAX's
    TypeError, and broadcasting its ValueError (fungraph's ShapeError is both)."""
    for bad in (lambda: lib.ones(3) @ lib.ones(4), lambda: lib.ones((2, 3)).dot(lib.ones((2, 3))),
                lambda: lib.ones(3).reshape(4)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(ValueError):
        lib.ones(3) + lib.ones((2, 2))
