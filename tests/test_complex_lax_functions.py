"""``lax``'s inverse trigonometric and hyperbolic functions, ``logistic`` and ``cumlogsumexp``
(and their ``fungraph.numpy`` counterparts) of complex operands, as JAX defines them: numpy's
principal branches, and JAX's holomorphic derivatives, in both dtype modes."""

import numpy as np
import pytest

import fungraph as fg
import fungraph.lax as flax
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

#: points off every branch cut (the real axis beyond +-1, the imaginary axis beyond +-i)
Z = np.array([0.3 + 0.4j, -0.5 + 0.2j, 1.5 - 0.7j, -2.0 - 1.5j, 0.1 - 3.0j, 4.0 + 0.5j])
LAX = ("acos", "asin", "asinh", "acosh", "atanh", "atan", "logistic")
NUMPY = {"arccos": np.arccos, "arcsin": np.arcsin, "arcsinh": np.arcsinh, "arccosh": np.arccosh,
         "arctanh": np.arctanh, "arctan": np.arctan}
REFERENCE = {"acos": np.arccos, "asin": np.arcsin, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
             "atan": np.arctan, "logistic": lambda z: 1 / (1 + np.exp(-z))}


def _tol(dtype: np.dtype) -> float:
    return 1e-5 if dtype == np.complex64 else 1e-12


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", LAX)
def test_lax_function_of_complex_values_and_holomorphic_gradient_match_jax(name: str, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        z = Z.astype(np.complex128 if x64 else np.complex64)
        ours, theirs = getattr(flax, name), getattr(jax.lax, name)
        want = theirs(z)
        tol = _tol(z.dtype)
        for got in (ours(z), fg.jit(ours)(z)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.asarray(ours(z)), REFERENCE[name](Z).astype(z.dtype), rtol=tol, atol=tol)
        grad_want = jax.vmap(jax.grad(theirs, holomorphic=True))(z)
        for grad_got in (fg.vmap(fg.grad(ours, holomorphic=True))(z),
                         fg.jit(fg.vmap(fg.grad(ours, holomorphic=True)))(z)):
            assert grad_got.dtype == grad_want.dtype
            np.testing.assert_allclose(np.asarray(grad_got), np.asarray(grad_want), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_numpy_inverse_functions_of_complex_values_match_jax(name: str) -> None:
    ours, theirs = getattr(fnp, name), getattr(jnp, name)
    np.testing.assert_allclose(np.asarray(ours(Z)), np.asarray(theirs(Z)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ours(Z)), NUMPY[name](Z), rtol=1e-12, atol=1e-12)
    grad_got = fg.grad(lambda z: ours(z).sum(), holomorphic=True)(Z)
    grad_want = jax.grad(lambda z: theirs(z).sum(), holomorphic=True)(Z)
    np.testing.assert_allclose(np.asarray(grad_got), np.asarray(grad_want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumlogsumexp_and_logaddexp_of_complex_values_match_jax(x64: bool, reverse: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        z = (Z * np.array([1, 1, 1, 1, 3, 2])).astype(np.complex128 if x64 else np.complex64)
        tol = _tol(z.dtype) * 10
        want = jax.lax.cumlogsumexp(z, reverse=reverse)
        got = flax.cumlogsumexp(z, reverse=reverse)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)

        def loss(m: object, lax: object) -> object:
            return lambda v: m.sum(lax.cumlogsumexp(v, reverse=reverse) * m.arange(1, 7))

        grad_want = jax.jit(jax.grad(loss(jnp, jax.lax), holomorphic=True))(z)  # one compile, not one per operation
        grad_got = fg.grad(loss(fnp, flax), holomorphic=True)(z)
        np.testing.assert_allclose(np.asarray(grad_got), np.asarray(grad_want), rtol=tol, atol=tol)
        pair = fnp.logaddexp(z, z[::-1])
        np.testing.assert_allclose(np.asarray(pair), np.asarray(jnp.logaddexp(z, z[::-1])), rtol=tol, atol=tol)


#: pairs (y, x) off atan2's branch cut (where (x + i y) / sqrt(x^2 + y^2) is a negative real)
Y = np.array([1 + 2j, -1 - 0.5j, 0.3 - 0.2j, 2.0 + 0.0j, -0.7 + 1.1j])
X = np.array([0.5 - 1j, 2 + 0j, 1j, 1.0 + 0.0j, -1.5 - 0.4j])


@pytest.mark.parametrize("x64", [True, False])
def test_atan2_of_complex_operands_matches_jax(x64: bool) -> None:
    """JAX computes ``atan2`` of complex numbers as -i log((x + i y) / sqrt(x^2 + y^2)), with
    its real rule's holomorphic derivatives; fungraph refused complex operands."""
    with fg.enable_x64(x64), jax.enable_x64(x64):
        dt = np.complex128 if x64 else np.complex64
        y, x = Y.astype(dt), X.astype(dt)
        tol = _tol(np.dtype(dt)) * 10
        want = jax.lax.atan2(y, x)
        for got in (flax.atan2(y, x), fg.jit(flax.atan2)(y, x), fnp.arctan2(y, x)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.asarray(jnp.arctan2(y, x)), np.asarray(want), rtol=tol, atol=tol)

        def loss(m: object, lax: object) -> object:
            return lambda a, b: m.sum(m.real(lax.atan2(a, b)) + 2 * m.imag(lax.atan2(a, b)))

        grad_want = jax.grad(loss(jnp, jax.lax), argnums=(0, 1))(y, x)
        holo_want = jax.vmap(jax.grad(jax.lax.atan2, argnums=(0, 1), holomorphic=True))(y, x)
        for grads, wants in ((fg.grad(loss(fnp, flax), argnums=(0, 1))(y, x), grad_want),
                             (fg.vmap(fg.grad(flax.atan2, argnums=(0, 1), holomorphic=True))(y, x), holo_want)):
            for g, w in zip(grads, wants):
                assert g.dtype == w.dtype
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("x64", [True, False])
def test_sinc_of_complex_values_matches_jax(x64: bool) -> None:
    """``jnp.sinc`` of complex numbers (1 at 0, with JAX's derivatives there); fungraph refused
    them. A Python complex is weak, as JAX's."""
    with fg.enable_x64(x64), jax.enable_x64(x64):
        dt = np.complex128 if x64 else np.complex64
        z = np.concatenate([Z, [0j, 0.5 + 0j, 1j]]).astype(dt)
        tol = _tol(np.dtype(dt)) * 10
        want = jnp.sinc(z)
        for got in (fnp.sinc(z), fg.jit(fnp.sinc)(z)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)
        got, want = fnp.sinc(1 + 1j), jnp.sinc(1 + 1j)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol)
        grad_want = jax.grad(lambda v: jnp.sinc(v).real.sum())(z)
        np.testing.assert_allclose(np.asarray(fg.grad(lambda v: fnp.sinc(v).real.sum())(z)), np.asarray(grad_want),
                                   rtol=tol, atol=tol)
        for point in (dt(0.3 + 0.2j), dt(0j)):
            for order in (1, 2):
                theirs, ours = jnp.sinc, fnp.sinc
                for _ in range(order):
                    theirs, ours = jax.grad(theirs, holomorphic=True), fg.grad(ours, holomorphic=True)
                np.testing.assert_allclose(np.asarray(ours(point)), np.asarray(theirs(point)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,args", [("sinc", (0.5,)), ("sinc", (0.0,)), ("deg2rad", (30.0,)), ("rad2deg", (1.0,)),
                                       ("hypot", (3.0, 4.0)), ("heaviside", (0.0, 0.5)), ("log2", (8.0,))])
def test_math_functions_of_python_scalars_are_weak_as_jax_s(name: str, args: tuple) -> None:
    """JAX's ``sinc``, ``deg2rad``, ``hypot``, ... of Python floats are weakly typed (their
    constants keep a weak operand weak); ``log2``'s are not."""
    want = getattr(jnp, name)(*args)
    got = getattr(fnp, name)(*args)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
