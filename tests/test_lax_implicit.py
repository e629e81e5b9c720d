"""``fungraph.lax.custom_root`` and ``custom_linear_solve``: implicit differentiation, pytrees
with aux, JAX's values and gradients, and reverse mode refused without a transpose solve."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(1)


def _newton_sqrt(lib: Any, m: Any) -> Callable[[Any], Any]:
    """sqrt(a) as the root of x^2 - a, by 20 Newton steps, differentiated implicitly."""
    def sqrt(a: Any) -> Any:
        def solve(f: Any, x0: Any) -> Any:
            return lib.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0)

        return lib.custom_root(lambda x: x * x - a, m.ones_like(a), solve, lambda g, y: y / g(m.ones_like(y)))
    return sqrt


def test_custom_root_differentiates_implicitly() -> None:
    a = np.array([2.0, 9.0, 0.25])
    got_f, want_f = _newton_sqrt(lax, fnp), _newton_sqrt(jax.lax, jnp)
    np.testing.assert_allclose(got_f(a), np.sqrt(a), rtol=1e-12)
    loss = lambda f, m: lambda a: m.sum(m.sin(f(a)) * a)  # noqa: E731
    np.testing.assert_allclose(fg.grad(loss(got_f, fnp))(a), jax.jit(jax.grad(loss(want_f, jnp)))(a), rtol=1e-10)
    np.testing.assert_allclose(fg.jvp(got_f, (a,), (np.ones(3),))[1], 0.5 / np.sqrt(a), rtol=1e-10)
    np.testing.assert_allclose(fg.grad(lambda a: fg.grad(lambda b: fnp.sum(got_f(b)))(a).sum())(a),
                               jax.jit(jax.grad(lambda a: jax.grad(lambda b: jnp.sum(want_f(b)))(a).sum()))(a),
                               rtol=1e-9)
    np.testing.assert_allclose(fg.jit(fg.vmap(fg.grad(lambda s: got_f(s))))(a), 0.5 / np.sqrt(a), rtol=1e-10)


def test_custom_root_of_a_pytree_with_aux() -> None:
    """The cube root of ``a`` as a dict, the solver's iteration count as an (integer) aux output."""
    def cbrt(a: Any) -> Any:
        def solve(f: Any, x: Any) -> Any:
            y = lax.fori_loop(0, 30, lambda i, y: {"p": y["p"] - f(y)["p"] / (3 * y["p"] ** 2)}, x)
            return y, np.int32(30)

        return lax.custom_root(lambda x: {"p": x["p"] ** 3 - a}, {"p": fnp.ones_like(a)}, solve,
                               lambda g, y: {"p": y["p"] / g({"p": fnp.ones_like(y["p"])})["p"]}, has_aux=True)

    a = np.array([8.0, 27.0])
    (root, steps) = cbrt(a)
    np.testing.assert_allclose(root["p"], [2.0, 3.0], rtol=1e-12)
    assert int(steps) == 30
    np.testing.assert_allclose(fg.grad(lambda a: cbrt(a)[0]["p"].sum())(a), a ** (-2 / 3) / 3, rtol=1e-12)


def _linear_solve(lib: Any, m: Any, symmetric: bool) -> Callable[[Any, Any], Any]:
    """A(theta) x = b with A = theta theta^T + 3 I (symmetric) or theta + 3 I, solved by
    numpy's solve on the materialised matrix; the aux output counts calls."""
    def run(theta: Any, b: Any) -> Any:
        mat = theta @ theta.T + 3 * m.eye(3) if symmetric else theta + 3 * m.eye(3)

        def solve(matvec: Any, rhs: Any) -> Any:
            dense = m.stack([matvec(e) for e in m.eye(3)], axis=1)
            return m.linalg.solve(dense, rhs), m.array(1)

        def transpose_solve(vecmat: Any, rhs: Any) -> Any:
            dense = m.stack([vecmat(e) for e in m.eye(3)], axis=1)
            return m.linalg.solve(dense, rhs), m.array(2)

        x, count = lib.custom_linear_solve(lambda v: mat @ v, b, lambda f, r: solve(f, r),
                                           None if symmetric else transpose_solve, symmetric=symmetric,
                                           has_aux=True)
        return x * count
    return run


@pytest.mark.parametrize("symmetric", [False, True])
def test_custom_linear_solve_matches_jax(symmetric: bool) -> None:
    theta, b = RNG.standard_normal((3, 3)), RNG.standard_normal(3)
    got_f, want_f = _linear_solve(lax, fnp, symmetric), _linear_solve(jax.lax, jnp, symmetric)
    loss = lambda f, m: lambda t, b: m.sum(m.sin(f(t, b)))  # noqa: E731
    want_all = jax.jit(lambda t, b: (want_f(t, b), jax.grad(loss(want_f, jnp), argnums=(0, 1))(t, b)))
    value, grads = want_all(theta, b)
    np.testing.assert_allclose(got_f(theta, b), value, rtol=1e-12)
    for g, w in zip(fg.grad(loss(got_f, fnp), argnums=(0, 1))(theta, b), grads):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    check_grads(got_f, (theta, b), order=2)
    thetas = np.stack([theta, theta.T, 2 * theta])
    got = fg.jit(fg.vmap(fg.grad(loss(got_f, fnp)), in_axes=(0, None)))(thetas, b)
    want = np.stack([want_all(t, b)[1][0] for t in thetas])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_custom_linear_solve_without_transpose_refuses_reverse_mode() -> None:
    mat = np.diag([2.0, 4.0])
    f = lambda b: lax.custom_linear_solve(lambda v: mat @ v, b, lambda mv, r: r / np.diag(mat))  # noqa: E731
    np.testing.assert_allclose(f(np.ones(2)), [0.5, 0.25])
    np.testing.assert_allclose(fg.jvp(f, (np.ones(2),), (np.ones(2),))[1], [0.5, 0.25])
    with pytest.raises(TypeError, match="transpose_solve"):
        fg.grad(lambda b: f(b).sum())(np.ones(2))
