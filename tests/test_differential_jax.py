"""Differential tests against JAX (a test dependency only; fungraph never imports it):
control flow and a few compositions, values, jvp, vmap and gradients where JAX supports them."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

XS = np.array([-1.3, -0.2, 0.4, 1.7])


# Each program is written once against a numpy-like module ``m`` and its ``lax`` ``L``.


def cond_prog(m, L):
    return lambda x: L.cond(x > 0, lambda y: m.sin(y) * y, lambda y: m.cos(y) - y, x)


def switch_prog(m, L):
    return lambda x: L.switch(2, [lambda v: v * 2.0, lambda v: m.exp(v), lambda v: -v * v], x)


def scan_prog(m, L):
    def f(x):
        c, ys = L.scan(lambda c, xi: (c * xi + m.sin(c), c * 2.0), x, np.arange(1.0, 4.0))
        return c + m.sum(ys)

    return f


def fori_prog(m, L):
    return lambda x: L.fori_loop(0, 5, lambda i, v: m.sin(v) * 1.5 + i, x)


def while_prog(m, L):
    return lambda x: L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, m.sin(c[1]) * x), (0, x))[1]


PROGRAMS = {"cond": cond_prog, "switch": switch_prog, "scan": scan_prog, "fori": fori_prog, "while": while_prog}
REVERSE_IN_JAX = {"cond", "switch", "scan", "fori"}  # JAX refuses reverse mode through while_loop


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_values_jvp_and_vmap_match_jax(name: str) -> None:
    ours, theirs = PROGRAMS[name](fnp, lax), PROGRAMS[name](jnp, jax.lax)
    for x in XS:
        np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jit(ours)(x), theirs(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jvp(ours, (x,), (1.0,))[1], jax.jvp(theirs, (x,), (1.0,))[1], rtol=1e-10)
    np.testing.assert_allclose(fg.vmap(ours)(XS), jax.vmap(theirs)(XS), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(REVERSE_IN_JAX))
def test_gradients_match_jax(name: str) -> None:
    ours, theirs = PROGRAMS[name](fnp, lax), PROGRAMS[name](jnp, jax.lax)
    for x in XS:
        want = jax.grad(theirs)(x)
        np.testing.assert_allclose(fg.grad(ours)(x), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(fg.jit(fg.grad(ours))(x), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fg.vmap(fg.grad(ours))(XS), jax.vmap(jax.grad(theirs))(XS), rtol=1e-10, atol=1e-12)


def test_while_gradient_where_jax_has_none_equals_jax_forward_mode() -> None:
    ours, theirs = while_prog(fnp, lax), while_prog(jnp, jax.lax)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(theirs)(0.5)
    for x in XS:
        np.testing.assert_allclose(fg.grad(ours)(x), jax.jacfwd(theirs)(x), rtol=1e-10, atol=1e-12)


def test_mlp_loss_and_per_example_gradients_match_jax() -> None:
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    xs, ys = rng.standard_normal((6, 5)), np.eye(3)[rng.integers(0, 3, 6)]

    def loss(m, nn_log_softmax):
        return lambda w1, w2, x, y: -m.sum(y * nn_log_softmax(m.tanh(x @ w1) @ w2))

    ours = loss(fnp, fg.nn.log_softmax)
    theirs = loss(jnp, jax.nn.log_softmax)
    got = fg.jit(fg.vmap(fg.grad(ours, argnums=(0, 1)), in_axes=(None, None, 0, 0)))(w1, w2, xs, ys)
    want = jax.vmap(jax.grad(theirs, argnums=(0, 1)), in_axes=(None, None, 0, 0))(w1, w2, xs, ys)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
