"""``fungraph.scipy.sparse.linalg`` (``cg``, ``bicgstab``, ``gmres``) against JAX 0.10's: the same
iterates (values to rounding, with ``maxiter``/``restart`` cutting them short), implicit
gradients through ``custom_linear_solve``, pytrees, preconditioners, ``jit``, ``vmap`` and
both dtype modes."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.scipy.sparse import linalg as fsp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
jsp = importlib.import_module("jax.scipy.sparse.linalg")

RNG = np.random.default_rng(3)
A = RNG.standard_normal((6, 6)) + 5 * np.eye(6)
SPD = A @ A.T + np.eye(6)
B = RNG.standard_normal(6)
PRECOND = np.diag(1.0 / np.diag(A))

# (name, solver name, matrix, keyword arguments)
CASES = [
    ("cg", "cg", SPD, {}),
    ("cg_maxiter", "cg", SPD, {"maxiter": 2}),
    ("bicgstab", "bicgstab", A, {}),
    ("bicgstab_maxiter_M", "bicgstab", A, {"maxiter": 2, "M": PRECOND}),
    ("gmres_batched", "gmres", A, {}),
    ("gmres_incremental", "gmres", A, {"solve_method": "incremental"}),
    ("gmres_short_restarts", "gmres", A, {"restart": 2, "maxiter": 2}),
    ("gmres_incremental_restarts_M", "gmres", A, {"restart": 3, "solve_method": "incremental", "M": PRECOND,
                                                  "tol": 1e-10}),
    ("gmres_x0_atol", "gmres", A, {"x0": np.ones(6), "atol": 1e-3, "tol": 0.0}),
]
IDS = [c[0] for c in CASES]


def _solve(lib: Any, solver: str, kwargs: dict) -> Callable[[Any, Any], Any]:
    return lambda a, b: getattr(lib, solver)(a, b, **kwargs)[0]


@pytest.mark.parametrize("name, solver, a, kwargs", CASES, ids=IDS)
def test_solution_and_gradients_match_jax(name: str, solver: str, a: np.ndarray, kwargs: dict) -> None:
    got = _solve(fsp, solver, kwargs)(a, B)
    want = _solve(jsp, solver, kwargs)(a, B)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    w = np.cos(np.arange(6.0))
    grads = fg.grad(lambda m, v: (_solve(fsp, solver, kwargs)(m, v) * w).sum(), argnums=(0, 1))(a, B)
    jgrads = jax.grad(lambda m, v: (_solve(jsp, solver, kwargs)(m, v) * w).sum(), argnums=(0, 1))(a, B)
    for g, j in zip(grads, jgrads):
        np.testing.assert_allclose(g, j, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("solver", ["bicgstab", "gmres"])
def test_pytrees_functions_jit_and_vmap_match_jax(solver: str) -> None:
    """A function operator on a dict of arrays, under jit; and a vmap over right-hand sides."""
    a1, a2 = A[:3, :3], A[3:, 3:] + A[3:, :3].T @ A[3:, :3] * 0.1
    b = {"u": B[:3], "v": B[3:].reshape(3, 1)}

    def operator(m: Any) -> Callable[[Any], Any]:
        return lambda x: {"u": m.dot(a1, x["u"]), "v": m.dot(a2, x["v"])}

    got = fg.jit(lambda t: getattr(fsp, solver)(operator(fg.numpy), t)[0])(b)
    want = getattr(jsp, solver)(operator(jnp), b)[0]
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12)
    rhs = np.stack([B, 2 * B + 1, -B])
    batched = fg.vmap(lambda v: getattr(fsp, solver)(A, v)[0])(rhs)
    jbatched = jax.vmap(lambda v: getattr(jsp, solver)(A, v)[0])(rhs)
    np.testing.assert_allclose(batched, jbatched, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("solver", ["bicgstab", "gmres"])
def test_complex_systems_match_jax(solver: str) -> None:
    a = A + 1j * RNG.standard_normal((6, 6))
    b = B + 0.5j
    got, want = getattr(fsp, solver)(a, b)[0], getattr(jsp, solver)(a, b)[0]
    assert np.asarray(got).dtype == np.complex128
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres"])
def test_32_bit_mode_matches_jax(solver: str, x32: None) -> None:
    a = (SPD if solver == "cg" else A).astype(np.float32)
    b = B.astype(np.float32)
    got = getattr(fsp, solver)(a, b)
    with jax.enable_x64(False):
        want = getattr(jsp, solver)(a, b)
    assert np.asarray(got[0]).dtype == np.float32
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    if solver == "gmres":
        assert np.asarray(got[1]).dtype == np.asarray(want[1]).dtype and int(got[1]) == int(want[1]) == 0
    else:
        assert got[1] is None and want[1] is None


def test_gmres_info_reports_nan() -> None:
    x0 = np.array([np.nan, 0, 0, 0, 0, 0])
    assert int(fsp.gmres(A, B, x0=x0)[1]) == int(jsp.gmres(A, B, x0=x0)[1]) == -1
    assert int(fsp.gmres(A, B)[1]) == int(jsp.gmres(A, B)[1]) == 0


def test_bad_arguments_raise_as_jax() -> None:
    with pytest.raises(ValueError, match="solve_method"):
        fsp.gmres(A, B, solve_method="qr")
    with pytest.raises(ValueError, match="square matrix"):
        fsp.bicgstab(np.ones((2, 3)), np.ones(2))
    with pytest.raises(TypeError, match="function or ndarray"):
        fsp.gmres("A", B)
    with pytest.raises(ValueError, match="matching shapes"):
        fsp.bicgstab(A, B, x0=np.ones(5))
    with pytest.raises(ValueError, match="tree structure"):
        fsp.gmres(A, B, x0=(B,))
