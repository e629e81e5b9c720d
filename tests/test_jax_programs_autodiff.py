"""Public JAX programs' autodiff idioms, run on JAX and on fungraph with only the import changed,
in both dtype modes: ADVI's ``jit(grad(objective))`` seeding ``random.PRNGKey`` from a traced
step, the VAE example's ``vmap`` over ``random.split`` keys under ``jit(grad)``, and the
autodiff cookbook's holomorphic Jacobians."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

MODES = [True, False]


def _in_mode(x64: bool, program: Callable[[Any, Any], Any]) -> tuple[list[Any], list[Any]]:
    """The program's leaves on fungraph and on JAX, both in the x64 mode given."""
    with fg.enable_x64(x64):
        ours = fg.tree_util.tree_leaves(program(fg, fnp))
    with jax.enable_x64(x64):
        theirs = jax.tree_util.tree_leaves(program(jax, jnp))
    return ours, theirs


def _assert_same(ours: list[Any], theirs: list[Any], rtol: float) -> None:
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def _advi(lib: Any, np_: Any) -> Any:
    norm = lib.scipy.stats.norm

    def log_density(x: Any) -> Any:
        mu, log_sigma = x
        return norm.logpdf(log_sigma, 0, 1.35) + norm.logpdf(mu, 0, np_.exp(log_sigma))

    def elbo(rng: Any, mean: Any, log_std: Any) -> Any:
        sample = mean + np_.exp(log_std) * lib.random.normal(rng, mean.shape)
        return log_density(sample) - np_.sum(lib.vmap(norm.logpdf)(sample, mean, np_.exp(log_std)))

    @lib.jit
    def objective(params: Any, t: Any) -> Any:
        rngs = lib.random.split(lib.random.PRNGKey(t), 4)
        return -np_.mean(lib.vmap(elbo, in_axes=(0, None, None))(rngs, *params))

    params = (np_.zeros(2), np_.zeros(2))
    for t in range(2):
        grads = lib.jit(lib.grad(objective))(params, t)
        params = lib.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return params, objective(params, 0)


def _vae_elbo(lib: Any, np_: Any) -> Any:
    def elbo(rng: Any, params: Any, images: Any) -> Any:
        w1, w2 = params
        h = images @ w1
        mu, sigmasq = h[:, :2], lib.nn.softplus(h[:, 2:])
        z = mu + np_.sqrt(sigmasq) * lib.random.normal(rng, mu.shape)
        logits = z @ w2
        kl = -0.5 * np_.sum(1. + np_.log(sigmasq) - mu ** 2. - sigmasq)
        return -np_.sum(np_.logaddexp(0., np_.where(images, -1., 1.) * logits)) - kl

    def batch_elbo(rng: Any, params: Any, images: Any) -> Any:
        rngs = lib.random.split(rng, images.shape[0])
        return np_.mean(lib.vmap(elbo, in_axes=(0, None, 0))(rngs, params, images[:, None, :]))

    k1, k2, k3 = lib.random.split(lib.random.PRNGKey(0), 3)
    params = (lib.random.normal(k1, (6, 4)) * 0.1, lib.random.normal(k2, (2, 6)) * 0.1)
    images = lib.random.bernoulli(k3, 0.5, (5, 6))
    return lib.jit(lib.value_and_grad(batch_elbo, argnums=1))(lib.random.PRNGKey(1), params, images)


@pytest.mark.parametrize("x64", MODES)
@pytest.mark.parametrize("program", [_advi, _vae_elbo])
def test_random_keys_from_traced_values_under_jit_grad(program: Callable[[Any, Any], Any], x64: bool) -> None:
    _assert_same(*_in_mode(x64, program), rtol=2e-4 if not x64 else 1e-9)


def _holomorphic(lib: Any, np_: Any) -> Any:
    z = np_.array([1 + 2j, 3j, -0.5 + 0.25j])
    square_sin = lambda z: np_.sin(z) * z ** 2  # noqa: E731
    return (lib.jacrev(square_sin, holomorphic=True)(z), lib.jacfwd(square_sin, holomorphic=True)(z),
            lib.hessian(lambda z: np_.sum(square_sin(z)), holomorphic=True)(z),
            lib.jacfwd(partial(lib.jacrev(square_sin, holomorphic=True)), holomorphic=True)(z[:2]))


@pytest.mark.parametrize("x64", MODES)
def test_holomorphic_jacobians(x64: bool) -> None:
    _assert_same(*_in_mode(x64, _holomorphic), rtol=1e-5 if not x64 else 1e-12)


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("arg", [np.float64(2.0), np.complex128(2.0)])
def test_holomorphic_jacobians_refuse_what_jax_refuses(jac: str, arg: Any) -> None:
    double = lambda x: x * 2  # noqa: E731
    real_out = (lambda x: fnp.real(x) * 2) if np.iscomplexobj(arg) else double
    theirs_real_out = (lambda x: jnp.real(x) * 2) if np.iscomplexobj(arg) else double
    with pytest.raises(TypeError) as theirs:
        getattr(jax, jac)(theirs_real_out, holomorphic=True)(arg)
    with pytest.raises(TypeError, match="holomorphic=True requires") as ours:
        getattr(fg, jac)(real_out, holomorphic=True)(arg)
    assert str(ours.value).split(",")[0] == str(theirs.value).split(",")[0]
