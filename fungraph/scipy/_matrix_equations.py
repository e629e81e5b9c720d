"""``solve_sylvester``: ``A X + X B = C`` by the Bartels-Stewart algorithm (complex Schur forms
of ``A`` and ``B^H``, then a triangular solve column by column) or from the
eigendecompositions, as ``jax.scipy.linalg.solve_sylvester``; NaN where the eigenvalues of
``A`` and ``-B`` come within ``tol`` of each other."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph import dtypes, lax
from fungraph.numpy import linalg as nla
from fungraph.numpy._util import promote
from fungraph.scipy._matrix_functions import schur


def _mH(x: Any) -> Any:
    return fnp.conj(fnp.swapaxes(x, -1, -2))


def _triangular_sylvester(r: Any, s: Any, f: Any) -> Any:
    """``Y`` with ``R Y + Y S = F``, ``R`` upper and ``S`` lower triangular: one entry at a time
    from the bottom-right corner (a ``lax.scan``), each from those below it and to its right; a
    zero ``R_ii + S_jj`` gives inf or NaN, not an error."""
    m, n = f.shape
    rows, cols = np.arange(m), np.arange(n)

    def entry(y: Any, idx: Any) -> tuple[Any, None]:
        i, j = idx // n, idx % n
        below = fnp.sum(fnp.where(rows > i, r[i, :] * y[:, j], 0))
        right = fnp.sum(fnp.where(cols > j, y[i, :] * s[:, j], 0))
        return y.at[i, j].set((f[i, j] - below - right) / (r[i, i] + s[j, j])), None

    y, _ = lax.scan(entry, fnp.zeros((m, n), f.dtype), fnp.arange(m * n - 1, -1, -1))
    return y


def _sylvester_2d(a: Any, b: Any, c: Any, *, method: str, tol: float) -> Any:
    m, n = c.shape
    if method == "schur":
        r, u = schur(a, output="complex")
        s, v = schur(_mH(b), output="complex")
        y = _triangular_sylvester(r, _mH(s), _mH(u) @ c.astype(r.dtype) @ v)
        x = u @ y @ _mH(v)
    elif method == "eigen":
        ra, ua = nla.eig(a)
        rb, ub = nla.eig(b)
        y = nla.solve(ua, c.astype(ra.dtype) @ ub) / (ra[:, None] + rb[None, :])
        x = ua[:m, :m] @ y[:m, :n] @ nla.inv(ub)[:n, :n]
    else:
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".')
    if not dtypes.is_complex(c.dtype):
        x = fnp.real(x)
    close = fnp.any(fnp.abs(nla.eigvals(a)[:, None] + nla.eigvals(b)[None, :]) < tol)
    return fnp.where(close, fnp.full_like(x, np.nan), x)


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:  # noqa: N803
    """``X`` with ``A X + X B = C`` for ``A`` (m x m), ``B`` (n x n), ``C`` (m x n), leading axes
    broadcast to a batch; ``method`` 'schur' (Bartels-Stewart) or 'eigen'."""
    a, b, c = promote(A, B, C, to_inexact=True)
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\nB: {b.shape}\nC: {c.shape}")
    if method not in ("schur", "eigen"):
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".')
    solve = functools.partial(_sylvester_2d, method=method, tol=tol)
    return fnp.vectorize(solve, signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)
