"""Concrete eager autodiff (#32 section 2): outside ``jit`` the derivative transformations run
on concrete primal values, as JAX's do, so Python control flow on values works inside the
differentiated function; under ``jit`` values stay abstract. Each case is checked against JAX."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


def absolute(x):
    return x if x > 0 else -x


def doubling(m):
    """A Python ``while`` on a value: how many doublings depends on ``x``."""

    def f(x):
        y = x
        while y < 10.0:
            y = y * 2.0 + m.sin(x)
        return y * x

    return f


def branchy(m):
    def f(x):
        return m.sin(x) * x if x > 0 else x ** 3 - m.cos(x)

    return f


def vector_branch(m):
    def f(x):
        if m.sum(x) > 0:
            return m.sum(m.tanh(x) * x ** 2)
        return m.sum(m.exp(x))

    return f


@pytest.mark.parametrize("x", [1.5, -2.0])
def test_grad_of_a_python_branch_matches_jax(x: float) -> None:
    assert float(fg.grad(absolute)(x)) == float(jax.grad(absolute)(x))
    got = fg.value_and_grad(branchy(fnp))(x)
    want = jax.value_and_grad(branchy(jnp))(x)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


@pytest.mark.parametrize("x", [0.7, 3.0, 12.0])
def test_python_while_on_a_value_matches_jax(x: float) -> None:
    np.testing.assert_allclose(fg.grad(doubling(fnp))(x), jax.grad(doubling(jnp))(x), rtol=1e-12)
    p, t = fg.jvp(doubling(fnp), (x,), (1.0,))
    pj, tj = jax.jvp(doubling(jnp), (x,), (1.0,))
    np.testing.assert_allclose([p, t], [pj, tj], rtol=1e-12)


@pytest.mark.parametrize("x", [1.0, -1.0])
def test_nested_grads_with_python_branches_match_jax(x: float) -> None:
    for order in (2, 3):
        f, g = branchy(fnp), branchy(jnp)
        for _ in range(order):
            f, g = fg.grad(f), jax.grad(g)
        np.testing.assert_allclose(f(x), g(x), rtol=1e-12)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_jacobians_and_hessian_with_python_branches_match_jax(sign: float) -> None:
    x = sign * np.array([0.3, -0.1, 0.8])
    for fg_t, jax_t in [(fg.jacfwd, jax.jacfwd), (fg.jacrev, jax.jacrev), (fg.hessian, jax.hessian),
                        (lambda f: fg.jacfwd(fg.grad(f)), lambda f: jax.jacfwd(jax.grad(f)))]:
        np.testing.assert_allclose(fg_t(vector_branch(fnp))(x), jax_t(vector_branch(jnp))(x), rtol=1e-12)
    out, f_vjp = fg.vjp(vector_branch(fnp), x)
    out_j, f_vjp_j = jax.vjp(vector_branch(jnp), x)
    np.testing.assert_allclose(out, out_j, rtol=1e-12)
    np.testing.assert_allclose(f_vjp(2.0)[0], f_vjp_j(2.0)[0], rtol=1e-12)
    y, f_jvp = fg.linearize(vector_branch(fnp), x)
    y_j, f_jvp_j = jax.linearize(vector_branch(jnp), x)
    np.testing.assert_allclose([y, f_jvp(np.ones(3))], [y_j, f_jvp_j(jnp.ones(3))], rtol=1e-12)


def test_int_and_item_of_a_differentiated_value_are_concrete_as_in_jax() -> None:
    table = np.arange(5.0) ** 2

    def pick(m):
        return lambda x: m.asarray(table)[int(x)] * x + x.item() * x

    np.testing.assert_allclose(fg.grad(pick(fnp))(3.0), jax.grad(pick(jnp))(3.0), rtol=1e-12)


def test_float_of_a_differentiated_value_is_a_constant() -> None:
    """``float(x)`` gives ``x``'s value, a constant to the derivative (JAX refuses ``float`` of
    a value carrying a tangent; ``float`` of a value without one, as here, agrees with it)."""
    np.testing.assert_allclose(fg.grad(lambda x: x * float(x))(3.0), 3.0)

    def scaled(m, L):
        return lambda x: x * x * float(L.stop_gradient(x) > 1.0) + float(L.stop_gradient(x)) * x

    np.testing.assert_allclose(fg.grad(scaled(fnp, lax))(3.0), jax.grad(scaled(jnp, jax.lax))(3.0), rtol=1e-12)


def test_control_flow_primitives_and_jit_inside_eager_grad_match_jax() -> None:
    def prog(m, L, jit):
        inner = jit(lambda v: L.fori_loop(0, 3, lambda i, c: m.sin(c) * 1.1 + v, v))

        def f(x):
            y = L.cond(x > 0.5, lambda v: v * v, lambda v: m.exp(v), x)
            z = L.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 0.9 + m.cos(x)), (0, y))[1]
            return inner(z) if float(L.stop_gradient(z)) > 0 else -z

        return f

    for x in (0.3, 1.2):
        got = fg.grad(prog(fnp, lax, fg.jit))(x)
        want = jax.jacfwd(prog(jnp, jax.lax, jax.jit))(x)
        np.testing.assert_allclose(got, want, rtol=1e-10)


def test_under_jit_control_flow_on_a_value_names_jit_static_args_and_the_line() -> None:
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(jax.grad(absolute))(1.0)
    with pytest.raises(fg.ConcretizationError) as info:
        fg.jit(fg.grad(absolute))(1.0)
    msg = str(info.value)
    assert "`jit`" in msg and "static_argnums" in msg and "static_argnames" in msg
    assert "test_eager_autodiff.py" in msg and "absolute" in msg
    with pytest.raises(fg.ConcretizationError, match="static_argnums"):
        fg.grad(fg.jit(absolute))(1.0)


def test_under_vmap_control_flow_on_a_value_fails_as_in_jax() -> None:
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.vmap(jax.grad(absolute))(jnp.ones(2))
    with pytest.raises(fg.ConcretizationError):
        fg.vmap(fg.grad(absolute))(np.ones(2))


def _twenty_ops(x, w):
    for _ in range(4):
        x = fnp.tanh(x * w + 0.1) - fnp.sin(x) * 0.5
    return fnp.sum(x * x)


def test_eager_gradients_equal_the_staged_ones() -> None:
    """The eager path and the staged one (``jit``) give the same gradients, to rounding."""
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=8), rng.normal(size=8)
    eager = fg.grad(_twenty_ops, argnums=(0, 1))(x, w)
    staged = fg.jit(fg.grad(_twenty_ops, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(np.array(eager), np.array(staged), rtol=1e-13, atol=1e-15)
    want = jax.grad(lambda x, w: jnp.sum(_jax_twenty_ops(x, w)), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(np.array(eager), np.array(want), rtol=1e-12)


def _jax_twenty_ops(x, w):
    for _ in range(4):
        x = jnp.tanh(x * w + 0.1) - jnp.sin(x) * 0.5
    return x * x


def test_eager_vjp_does_not_hash_its_residuals(monkeypatch) -> None:
    """The tangent graph of an eager ``vjp`` is run, never looked up in a cache: hashing its
    residuals (every intermediate array) into a structural key was a sixth of an MLP step. A
    caller's writeable array is still copied, so changing it afterwards changes no gradient."""
    from fungraph import ir

    def no_key(self, *args):
        raise AssertionError("eager vjp built a structural key")

    monkeypatch.setattr(ir.Graph, "key_from_rows", no_key)
    x = np.array([1.0, 2.0, 3.0])
    w = fnp.asarray([0.5, 1.0, 2.0])
    out, f_vjp = fg.vjp(lambda x: fnp.sum(fnp.tanh(x * w) * x), x)
    x[:] = 100.0
    (got,) = f_vjp(1.0)
    x0 = np.array([1.0, 2.0, 3.0])
    want = jax.grad(lambda x: jnp.sum(jnp.tanh(x * np.asarray(w)) * x))(x0)
    np.testing.assert_allclose(got, want, rtol=1e-12)
