"""The numpy LU elimination with partial pivoting (LAPACK's ``getrf`` pivots): the impl of the
``lu`` primitive and the fallback of ``solve`` for singular matrices, in a module of its own so
that both import it (``lu`` builds on ``linalg_ops``' products)."""

from __future__ import annotations

import numpy as np


def _magnitude(x: np.ndarray) -> np.ndarray:
    """LAPACK's pivot size: |x|, or |Re x| + |Im x| for complex x."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def lu_factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P A = L U`` packed, LAPACK's pivots and the row permutation (int32) of each matrix in
    ``a``'s batch: right-looking elimination, one column per step, vectorised over the batch."""
    *lead, m, n = a.shape
    k = min(m, n)
    work = np.array(a, copy=True).reshape(int(np.prod(lead, dtype=np.int64)), m, n)
    rows = np.arange(work.shape[0])
    pivots = np.zeros((work.shape[0], k), np.int32)
    perm = np.tile(np.arange(m, dtype=np.int32), (work.shape[0], 1))
    for j in range(k):
        p = j + np.argmax(_magnitude(work[:, j:, j]), axis=1)
        pivots[:, j] = p
        work[rows, j], work[rows, p] = work[rows, p].copy(), work[rows, j].copy()
        perm[rows, j], perm[rows, p] = perm[rows, p].copy(), perm[rows, j].copy()
        piv = work[:, j, j]
        nonzero = piv != 0
        scaled = work[:, j + 1:, j] / np.where(nonzero, piv, 1)[:, None]
        work[:, j + 1:, j] = np.where(nonzero[:, None], scaled, work[:, j + 1:, j])
        work[:, j + 1:, j + 1:] -= work[:, j + 1:, j:j + 1] * work[:, j:j + 1, j + 1:]
    return work.reshape(a.shape), pivots.reshape((*lead, k)), perm.reshape((*lead, m))
