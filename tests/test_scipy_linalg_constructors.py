"""``fungraph.scipy.linalg``'s structured-matrix constructors against JAX 0.10's: values and
dtypes in both dtype modes (eagerly and under ``jit`` for the vector arguments), gradients and
``vmap``/leading-axis batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy import linalg as fsl
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsl = jax.scipy.linalg

V = np.asarray([1.5, -2.0, 0.5, 3.0])
W = np.asarray([0.3, 0.7, 0.9])
STACK = np.stack([V, V[::-1] * 2.0])

VECTOR_CASES = [("circulant", (V,)), ("companion", (V,)), ("fiedler", (V,)), ("leslie", (V, W)),
                ("circulant", (STACK,)), ("companion", (STACK,)), ("fiedler", (STACK,)),
                ("leslie", (STACK, W)), ("fiedler_companion", (V,)), ("fiedler_companion", (STACK,)),
                ("fiedler_companion", (np.asarray([2.0, -3.0, 1.0, 0.5, -1.0, 4.0]),)),
                ("fiedler_companion", (W[:2],)), ("fiedler_companion", (W[:1],))]
SIZE_CASES = [("hadamard", (4,), {}), ("hadamard", (8,), {"dtype": np.float32}), ("helmert", (5,), {}),
              ("helmert", (4,), {"full": True}), ("pascal", (5,), {}), ("pascal", (4,), {"kind": "lower"}),
              ("pascal", (4,), {"kind": "upper"}), ("invpascal", (5,), {}), ("invpascal", (4,), {"kind": "lower"}),
              ("invpascal", (4,), {"kind": "upper"}), ("dft", (5,), {}), ("dft", (4,), {"scale": "sqrtn"}),
              ("dft", (6,), {"scale": "n"}), ("invhilbert", (1,), {}),
              ("invhilbert", (4,), {}), ("invhilbert", (7,), {})]


def _close(got: Any, want: Any, x64: bool, what: str, tol32: float = 2e-6) -> None:
    """Within float64 or float32 rounding (the result's dtype decides: JAX's ``pascal`` is float32
    in both modes, computed through lgamma and so 1e-6 off; ``test_pascal_is_exact`` checks ours)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != JAX's {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != JAX's {want.shape}"
    tol = 1e-12 if x64 and want.dtype in (np.float64, np.complex128) else tol32
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("name, args", VECTOR_CASES)
def test_vector_constructors_match_jax(name: str, args: tuple, x64: bool) -> None:
    args = args if x64 else tuple(v.astype(np.float32) for v in args)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        want = getattr(jsl, name)(*args)
        _close(getattr(fsl, name)(*args), want, x64, f"{name} eager")
        _close(fg.jit(getattr(fsl, name))(*args), want, x64, f"{name} under jit")


@pytest.mark.parametrize("name, args", VECTOR_CASES[:4] + VECTOR_CASES[8:9])
def test_vector_constructors_gradients_and_vmap_match_jax(name: str, args: tuple) -> None:
    weight = np.random.default_rng(0).standard_normal(np.shape(getattr(jsl, name)(*args)))
    argnums = tuple(range(len(args)))
    want = jax.grad(lambda *v: jnp.sum(getattr(jsl, name)(*v) * weight), argnums=argnums)(*args)
    got = fg.grad(lambda *v: fg.numpy.sum(getattr(fsl, name)(*v) * weight), argnums=argnums)(*args)
    for g, w in zip(got, want):
        _close(g, w, True, f"grad of {name}")
    in_axes = (0,) + (None,) * (len(args) - 1)
    _close(fg.vmap(getattr(fsl, name), in_axes=in_axes)(STACK, *args[1:]),
           jax.vmap(getattr(jsl, name), in_axes=in_axes)(STACK, *args[1:]), True, f"vmap({name})")


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("name, args, kwargs", SIZE_CASES)
def test_size_constructors_match_jax(name: str, args: tuple, kwargs: dict, x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        got = getattr(fsl, name)(*args, **kwargs)
        # JAX's float32 binomials (exp of lgamma) are a few ulps off; ours are nearer the exact value
        _close(got, getattr(jsl, name)(*args, **kwargs), x64, f"{name}{args}{kwargs}",
               tol32=2e-5 if name == "invhilbert" else 2e-6)
    if name == "invhilbert":
        exact = pytest.importorskip("scipy.linalg").invhilbert(*args, exact=True).astype(np.float64)
        np.testing.assert_allclose(got, exact, rtol=1e-10 if x64 else 5e-6)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("a, n", [(V, 3), (V, 6), (W, 3), (np.asarray([4, -1, 2]), 5), (STACK, 2)],
                         ids=["long", "short", "equal", "int", "batch"])
def test_convolution_matrix_matches_jax_and_convolve(a: np.ndarray, n: int, mode: str, x64: bool) -> None:
    a = a if x64 or a.dtype.kind == "i" else a.astype(np.float32)
    with fg.enable_x64(x64), jax.enable_x64(x64):
        got = fsl.convolution_matrix(a, n, mode)
        _close(got, jsl.convolution_matrix(a, n, mode), x64, f"convolution_matrix({mode})")
        _close(fg.jit(fsl.convolution_matrix, static_argnums=(1, 2))(a, n, mode), got, x64, "under jit")
    v = np.arange(1.0, n + 1)
    if a.ndim == 1:
        np.testing.assert_allclose(np.asarray(got) @ v, np.convolve(a, v, mode), rtol=1e-6)
    shape = np.shape(fsl.convolution_matrix(V, n, mode))
    w = np.cos(np.arange(np.prod(shape))).reshape(shape)
    grad = fg.grad(lambda x: fg.numpy.sum(fsl.convolution_matrix(x, n, mode) * w))(V)
    _close(grad, jax.grad(lambda x: jnp.sum(jsl.convolution_matrix(x, n, mode) * w))(V), True, "gradient")


def test_bad_arguments_raise_like_jax() -> None:
    calls = [lambda m: m.convolution_matrix(V, 0), lambda m: m.convolution_matrix(V, 2, "wide"),
             lambda m: m.convolution_matrix(np.float32(1.0), 2), lambda m: m.fiedler_companion(np.ones(0)),
             lambda m: m.hadamard(6), lambda m: m.helmert(0), lambda m: m.pascal(3, kind="diag"),
             lambda m: m.dft(3, scale="half"), lambda m: m.companion(np.ones(1)),
             lambda m: m.leslie(np.ones(3), np.ones(3))]
    for call in calls:
        with pytest.raises(ValueError):
            call(jsl)
        with pytest.raises(ValueError):
            call(fsl)


def test_pascal_is_exact() -> None:
    scipy_linalg = pytest.importorskip("scipy.linalg")
    for kind in ("symmetric", "lower", "upper"):
        np.testing.assert_array_equal(fsl.pascal(6, kind), scipy_linalg.pascal(6, kind).astype(np.float32))
        np.testing.assert_array_equal(fsl.invpascal(6, kind), scipy_linalg.invpascal(6, kind).astype(np.float64))
