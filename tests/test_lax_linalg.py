"""fungraph.lax.linalg against jax.lax.linalg (issue #32): output orders, values, grads, vmap."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
RNG = np.random.default_rng(3)
A = RNG.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)
RECT = RNG.normal(size=(5, 3))


def _close(got: object, want: object, tol: float = 1e-9) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _abs_cols(x: object) -> np.ndarray:
    """Eigen- and singular vectors up to sign: compare magnitudes."""
    return np.abs(np.asarray(x))


def test_cholesky_and_eigh() -> None:
    for sym in (True, False):
        _close(lax.linalg.cholesky(SPD + np.triu(A, 1) * sym, symmetrize_input=sym),
               jax.lax.linalg.cholesky(SPD + np.triu(A, 1) * sym, symmetrize_input=sym))
    for kw in ({}, {"lower": False, "symmetrize_input": False}):
        v, w = lax.linalg.eigh(SPD + np.tril(A, -1), **kw)
        jv, jw = jax.lax.linalg.eigh(SPD + np.tril(A, -1), **kw)
        _close(w, jw)
        _close(_abs_cols(v), _abs_cols(jv), 1e-7)
    v, w = lax.linalg.eigh(SPD, subset_by_index=(1, 3))  # JAX has it on TPU only: compare with a slice
    jv, jw = jax.lax.linalg.eigh(SPD)
    _close(w, jw[1:3])
    _close(_abs_cols(v), _abs_cols(jv[:, 1:3]), 1e-7)
    loss = lambda lib: lambda x: lib.numpy.sum(lib.lax.linalg.eigh(x)[1] ** 3) + lib.numpy.sum(
        lib.lax.linalg.cholesky(x))
    _close(fg.grad(loss(fg))(SPD), jax.grad(loss(jax))(SPD), 1e-7)


def test_lu_qr_svd() -> None:
    for x in (A, RECT, RECT.T):
        for got, want in zip(lax.linalg.lu(x), jax.lax.linalg.lu(x)):
            _close(got, want)
        for full in (True, False):
            q, r = lax.linalg.qr(x, full_matrices=full)
            jq, jr = jax.lax.linalg.qr(x, full_matrices=full)
            _close(_abs_cols(q), _abs_cols(jq), 1e-7)
            _close(_abs_cols(r), _abs_cols(jr), 1e-7)
            u, s, vh = lax.linalg.svd(x, full_matrices=full)
            ju, js, jvh = jax.lax.linalg.svd(x, full_matrices=full)
            _close(s, js)
            _close(_abs_cols(u), _abs_cols(ju), 1e-7)
            _close(_abs_cols(vh), _abs_cols(jvh), 1e-7)
        _close(lax.linalg.svd(x, compute_uv=False), jax.lax.linalg.svd(x, compute_uv=False))
        kw = dict(compute_uv=False, full_matrices=False, subset_by_index=(1, 3))  # JAX: TPU only; a slice
        _close(lax.linalg.svd(x, **kw), jax.lax.linalg.svd(x, compute_uv=False)[1:3])
        with pytest.raises(ValueError, match="cannot both be set"):
            lax.linalg.svd(x, subset_by_index=(1, 3))
    with pytest.raises(NotImplementedError, match="pivoting"):
        lax.linalg.qr(A, pivoting=True)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve(left_side: bool, lower: bool, transpose_a: bool, unit_diagonal: bool) -> None:
    a = A + 5 * np.eye(4)
    b = RNG.normal(size=(4, 3) if left_side else (3, 4))
    kw = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    _close(lax.linalg.triangular_solve(a, b, **kw), jax.lax.linalg.triangular_solve(a, b, **kw))
    g = lambda lib: lib.grad(lambda m, r: lib.numpy.sum(lib.lax.linalg.triangular_solve(m, r, **kw) ** 2),
                             argnums=(0, 1))(a, b)
    for x, y in zip(g(fg), g(jax)):
        _close(x, y, 1e-8)


def test_tridiagonal_solve_and_pivots() -> None:
    dl, d, du = RNG.normal(size=(2, 5)), RNG.normal(size=(2, 5)) + 4, RNG.normal(size=(2, 5))
    dl[:, 0] = 0.0
    du[:, -1] = 0.0
    b = RNG.normal(size=(2, 5, 3))
    _close(lax.linalg.tridiagonal_solve(dl, d, du, b), jax.lax.linalg.tridiagonal_solve(dl, d, du, b))
    pivots = np.array([[2, 2, 3], [0, 3, 2]], np.int32)
    _close(lax.linalg.lu_pivots_to_permutation(pivots, 5), jax.lax.linalg.lu_pivots_to_permutation(pivots, 5))
    _close(fg.jit(fg.vmap(lambda p: lax.linalg.lu_pivots_to_permutation(p, 4)))(pivots),
           jax.vmap(lambda p: jax.lax.linalg.lu_pivots_to_permutation(p, 4))(pivots))
    _close(fg.vmap(lax.linalg.cholesky)(np.stack([SPD, 2 * SPD])), jax.vmap(jax.lax.linalg.cholesky)(
        np.stack([SPD, 2 * SPD])))
    assert fnp is not None


def test_eig_symmetric_product_cholesky_update() -> None:
    for x in (A, A + 1j * RNG.normal(size=(4, 4))):
        w, vl, vr = lax.linalg.eig(x)
        jw, jvl, jvr = jax.lax.linalg.eig(x)
        _close(w, jw, 1e-9)
        _close(_abs_cols(vr), _abs_cols(jvr), 1e-8)
        _close(_abs_cols(vl), _abs_cols(jvl), 1e-8)
        np.testing.assert_allclose(np.conj(np.asarray(vl)).T @ x, np.asarray(w)[:, None] * np.conj(np.asarray(vl)).T,
                                   atol=1e-9)
        assert len(lax.linalg.eig(x, compute_left_eigenvectors=False)) == 2
        assert len(lax.linalg.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False)) == 1
    c = RNG.normal(size=(4, 4))
    for sym in (True, False):
        _close(lax.linalg.symmetric_product(A[:, :2], c, alpha=2.0, beta=0.5, symmetrize_output=sym),
               jax.lax.linalg.symmetric_product(A[:, :2], c, alpha=2.0, beta=0.5, symmetrize_output=sym))
    r = np.linalg.cholesky(SPD).T
    w_vec = RNG.normal(size=4)
    _close(np.triu(lax.linalg.cholesky_update(r, w_vec)), np.triu(jax.lax.linalg.cholesky_update(r, w_vec)))
    for name in ("EigImplementation", "EighImplementation", "SvdAlgorithm"):
        assert [(m.name, m.value) for m in getattr(lax.linalg, name)] == [
            (m.name, m.value) for m in getattr(jax.lax.linalg, name)]
