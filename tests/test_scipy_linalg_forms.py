"""``fungraph.scipy.linalg``'s condensed forms, matrix functions and matrix equations against JAX
0.10's: ``hessenberg``, ``qr_multiply``, ``rsf2csf``, ``funm``, ``solve_sylvester`` and
``eigh_tridiagonal``: values and dtypes in both dtype modes, ``jit``, ``vmap`` and leading-axis
batches, and derivatives refused as JAX refuses them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.scipy import linalg as fsl
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsl = jax.scipy.linalg

RNG = np.random.default_rng(11)
A = RNG.standard_normal((5, 5))
AC = A + 1j * RNG.standard_normal((5, 5))
B = RNG.standard_normal((3, 3))
C = RNG.standard_normal((5, 3))
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))
HESS = np.array([[1.0, 2, 3, 4], [1, 4, 2, 3], [3, 2, 1, 4], [2, 3, 2, 2]])
D = RNG.standard_normal(6)
E = RNG.standard_normal(5)


def _close(got: Any, want: Any, tol: float) -> None:
    got_l, want_l = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _schur_of(m: Any, a: np.ndarray) -> tuple[Any, Any]:
    return m.schur(a)


# (name, function of the library's scipy.linalg, arguments)
CASES: list[tuple[str, Callable[[Any], Callable[..., Any]], tuple]] = [
    ("hessenberg", lambda sl: lambda a: sl.hessenberg(a), (A,)),
    ("hessenberg_q", lambda sl: lambda a: sl.hessenberg(a, calc_q=True), (A,)),
    ("hessenberg_docs", lambda sl: lambda a: sl.hessenberg(a, calc_q=True), (HESS,)),
    ("hessenberg_complex", lambda sl: lambda a: sl.hessenberg(a, calc_q=True), (AC,)),
    ("qr_multiply_right", lambda sl: lambda a, c: sl.qr_multiply(a, c), (TALL, C.T)),
    ("qr_multiply_left", lambda sl: lambda a, c: sl.qr_multiply(a, c, mode="left"), (TALL, C[:3])),
    ("qr_multiply_wide_vector", lambda sl: lambda a, c: sl.qr_multiply(a, c), (WIDE, C[:3, 0])),
    ("qr_multiply_left_vector_conj", lambda sl: lambda a, c: sl.qr_multiply(a, c, mode="left", conjugate=True),
     (AC, C[:, 0])),
    ("qr_multiply_pivoting", lambda sl: lambda a, c: sl.qr_multiply(a, c, pivoting=True), (A, C.T)),
    ("rsf2csf", lambda sl: lambda t, z: sl.rsf2csf(t, z), jsl.schur(A)),
    ("funm_exp", lambda sl: lambda a: sl.funm(a, (fnp if sl is fsl else jnp).exp), (A,)),
    ("funm_sin_disp", lambda sl: lambda a: sl.funm(a, (fnp if sl is fsl else jnp).sin, disp=False), (A * 0.5,)),
    ("funm_complex", lambda sl: lambda a: sl.funm(a, lambda x: x ** 2 + 1), (AC,)),
    ("solve_sylvester", lambda sl: lambda a, b, c: sl.solve_sylvester(a, b, c), (A, B, C)),
    ("solve_sylvester_eigen", lambda sl: lambda a, b, c: sl.solve_sylvester(a, b, c, method="eigen"), (A, B, C)),
    ("solve_sylvester_complex", lambda sl: lambda a, b, c: sl.solve_sylvester(a, b, c + 1j), (AC, B, C)),
    ("solve_sylvester_singular", lambda sl: lambda a, b, c: sl.solve_sylvester(a, b, c), (np.eye(5), -np.eye(3), C)),
    ("eigh_tridiagonal_values", lambda sl: lambda d, e: sl.eigh_tridiagonal(d, e, eigvals_only=True), (D, E)),
    ("eigh_tridiagonal_select", lambda sl: lambda d, e: sl.eigh_tridiagonal(d, e, eigvals_only=True, select="i",
                                                                          select_range=(1, 3)), (D, E)),
    ("eigh_tridiagonal_tol", lambda sl: lambda d, e: sl.eigh_tridiagonal(d, e, eigvals_only=True, tol=1e-3),
     (D, E)),
    ("eigh_tridiagonal_complex", lambda sl: lambda d, e: sl.eigh_tridiagonal(d, e, eigvals_only=True),
     (D + 0j, E + 0.5j)),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, make, args", CASES, ids=IDS)
def test_values_and_jit_match_jax(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    want = make(jsl)(*args)
    _close(make(fsl)(*args), want, 1e-9)
    _close(fg.jit(make(fsl))(*args), want, 1e-9)


@pytest.mark.parametrize("name, make, args", CASES[:15], ids=IDS[:15])
def test_32_bit_mode_matches_jax(name: str, make: Callable[[Any], Any], args: tuple, x32: None) -> None:
    args = tuple(np.asarray(a).astype(np.complex64 if np.iscomplexobj(a) else np.float32)
                 if np.asarray(a).dtype.kind in "fc" else a for a in args)
    with jax.enable_x64(False):
        want = make(jsl)(*args)
    _close(make(fsl)(*args), want, 2e-3)


BATCHED = ["hessenberg_q", "qr_multiply_right", "qr_multiply_left", "rsf2csf", "solve_sylvester",
           "solve_sylvester_eigen"]


@pytest.mark.parametrize("name, make, args", [c for c in CASES if c[0] in BATCHED],
                         ids=[c[0] for c in CASES if c[0] in BATCHED])
def test_vmap_and_leading_axes_match_jax(name: str, make: Callable[[Any], Any], args: tuple) -> None:
    if name == "rsf2csf":
        stack = [np.stack(x) for x in zip(jsl.schur(A), jsl.schur(A * 2 + 1))]
    else:
        stack = [np.stack([x, 2 * x + 1]) for x in args]
    want = jax.vmap(make(jsl))(*stack)
    _close(fg.vmap(make(fsl))(*stack), want, 1e-9)
    _close(make(fsl)(*stack), want, 1e-9)


@pytest.mark.parametrize("name, jax_name, call", [
    ("hessenberg", "hessenberg", lambda sl, a: sl.hessenberg(a, calc_q=True)[0]),
    ("qr_multiply", "geqrf", lambda sl, a: sl.qr_multiply(a, a)[0]),
    ("funm", "schur", lambda sl, a: fnp.real(sl.funm(a, fnp.exp)) if sl is fsl else jnp.real(sl.funm(a, jnp.exp))),
    ("solve_sylvester", "schur", lambda sl, a: sl.solve_sylvester(a, a.T + 5 * np.eye(5), a)),
])
def test_derivatives_are_refused_as_jaxs(name: str, jax_name: str, call: Callable[[Any, Any], Any]) -> None:
    with pytest.raises(NotImplementedError, match=f"'{jax_name}' not implemented"):
        jax.grad(lambda a: call(jsl, a).sum())(A)
    with pytest.raises(NotImplementedError, match=f"'{jax_name}' not implemented"):
        fg.grad(lambda a: call(fsl, a).sum())(A)


def _same_up_to_sign(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    signs = np.sign(np.sum(got * want.conj(), axis=0).real)
    np.testing.assert_allclose(got * signs, want, atol=tol)


@pytest.mark.parametrize("d, e", [(D, E), (np.array([1.0, 1.0, 1.0, 2.0, 2.0]), np.zeros(4)),
                                  (np.arange(8.0), np.full(7, 0.5))], ids=["random", "clusters", "graded"])
def test_eigh_tridiagonal_vectors_match_jax_up_to_sign(d: np.ndarray, e: np.ndarray) -> None:
    """Inverse iteration from JAX's random start vectors gives JAX's eigenvectors; a vector's sign
    follows the last bit of the shifted solve (JAX's perturbed LAPACK-style kernel), and for a
    repeated eigenvalue only the span is defined."""
    w, v = (np.asarray(x) for x in fg.jit(fsl.eigh_tridiagonal)(d, e))
    jw, jv = (np.asarray(x) for x in jsl.eigh_tridiagonal(d, e))
    np.testing.assert_allclose(w, jw, atol=1e-12)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    np.testing.assert_allclose(t @ v, v * w, atol=1e-10)
    np.testing.assert_allclose(v.T @ v, np.eye(len(d)), atol=1e-10)
    distinct = np.array([np.sum(np.abs(jw - x) < 1e-8) == 1 for x in jw])
    _same_up_to_sign(v[:, distinct], jv[:, distinct], 1e-8)


def test_eigh_tridiagonal_vectors_in_32_bit_mode_and_complex(x32: None) -> None:
    """float32 eigenvectors (their random start drawn outside the custom_jvp body), and
    complex Hermitian ones, which are eigenvectors up to a unit phase."""
    d, e = D.astype(np.float32), E.astype(np.float32)
    w, v = (np.asarray(x) for x in fsl.eigh_tridiagonal(d, e))
    with jax.enable_x64(False):
        jw, jv = (np.asarray(x) for x in jsl.eigh_tridiagonal(d, e))
    assert (w.dtype, v.dtype) == (jw.dtype, jv.dtype) == (np.float32, np.float32)
    np.testing.assert_allclose(w, jw, atol=1e-5)
    _same_up_to_sign(v, jv, 1e-4)
    dc, ec = (D + 0j).astype(np.complex64), (E + 0.5j).astype(np.complex64)
    w, v = (np.asarray(x) for x in fsl.eigh_tridiagonal(dc, ec))
    assert (w.dtype, v.dtype) == (np.float32, np.complex64)
    t = np.diag(dc) + np.diag(ec, 1) + np.diag(ec.conj(), -1)
    np.testing.assert_allclose(t @ v, v * w, atol=1e-4)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(6), atol=1e-5)


def test_eigh_tridiagonal_batches_and_refuses_bad_input() -> None:
    stack_d, stack_e = np.stack([D, 2 * D]), np.stack([E, E + 1])
    got = fg.vmap(lambda d, e: fsl.eigh_tridiagonal(d, e, eigvals_only=True))(stack_d, stack_e)
    _close(got, jax.vmap(lambda d, e: jsl.eigh_tridiagonal(d, e, eigvals_only=True))(stack_d, stack_e), 1e-12)
    values, vectors = fg.vmap(fsl.eigh_tridiagonal)(stack_d, stack_e)
    for i in range(2):
        _close((values[i], vectors[i]), fsl.eigh_tridiagonal(stack_d[i], stack_e[i]), 1e-10)
    with pytest.raises(TypeError, match="same dtype"):
        fsl.eigh_tridiagonal(D, E.astype(np.float32))
    with pytest.raises(ValueError, match="select_range"):
        fsl.eigh_tridiagonal(D, E, select="i")
    with pytest.raises(ValueError, match="empty index range"):
        fsl.eigh_tridiagonal(D, E, select="i", select_range=(3, 1))
    with pytest.raises(NotImplementedError, match="select='v'"):
        fsl.eigh_tridiagonal(D, E, select="v")
    with pytest.raises(NotImplementedError, match="'eigh_tridiagonal' not implemented"):
        fg.grad(lambda d: fsl.eigh_tridiagonal(d, E, eigvals_only=True).sum())(D)


def test_bad_arguments_raise_as_jax() -> None:
    for call in (lambda sl: sl.qr_multiply(TALL, C, mode="up"), lambda sl: sl.qr_multiply(TALL, C),
                 lambda sl: sl.qr_multiply(TALL, C, mode="left"), lambda sl: sl.rsf2csf(TALL, A),
                 lambda sl: sl.solve_sylvester(A, B, C.T), lambda sl: sl.solve_sylvester(A, B, C, method="qz"),
                 lambda sl: sl.funm(TALL, np.exp)):
        with pytest.raises(ValueError):
            call(jsl)
        with pytest.raises(ValueError):
            call(fsl)
    for lib in (jsl, fsl):
        with pytest.raises(TypeError, match="int"):
            lib.hessenberg(np.arange(9).reshape(3, 3))


def test_every_public_name_of_jaxs_linalg_modules_exists() -> None:
    """``jax.scipy.linalg``, ``jax.numpy.linalg`` and ``jax.scipy.sparse.linalg`` have no name
    that fungraph's modules lack."""
    import importlib

    pairs = [("jax.scipy.linalg", "fungraph.scipy.linalg"), ("jax.numpy.linalg", "fungraph.numpy.linalg"),
             ("jax.scipy.sparse.linalg", "fungraph.scipy.sparse.linalg")]
    for theirs, ours in pairs:
        module = importlib.import_module(ours)
        missing = [n for n in dir(importlib.import_module(theirs)) if not n.startswith("_") and not hasattr(module, n)]
        assert not missing, f"{ours} lacks {missing}"
