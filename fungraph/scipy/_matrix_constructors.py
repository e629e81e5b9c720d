"""Structured matrices of ``scipy.linalg`` built from vectors or sizes (``circulant``,
``companion``, ``fiedler``, ``leslie``, ``hadamard``, ``helmert``, ``pascal``, ``invpascal``,
``dft``), as ``jax.scipy.linalg``'s: leading axes of a vector argument are a batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph.numpy._util import promote

_KINDS = ("symmetric", "lower", "upper")


def circulant(c: Any) -> Any:
    """The matrix whose first column is ``c``, each column the previous one rotated down by one."""
    c = fnp.atleast_1d(fnp.asarray(c))
    n = c.shape[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return c[..., idx]


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree first)."""
    (a,) = promote(a, to_inexact=True)
    a = fnp.atleast_1d(a)
    if a.shape[-1] < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got shape {a.shape}.")
    first_row = -a[..., 1:] / a[..., :1]
    m = a.shape[-1] - 1
    below = fnp.broadcast_to(fnp.eye(m, m, k=-1, dtype=first_row.dtype), a.shape[:-1] + (m, m))
    return fnp.where(np.arange(m)[:, None] == 0, first_row[..., None, :], below)


def fiedler(a: Any) -> Any:
    """The symmetric matrix |a_i - a_j|."""
    a = fnp.atleast_1d(fnp.asarray(a))
    return fnp.abs(a[..., :, None] - a[..., None, :])


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix: fecundities ``f`` in the first row, survival rates ``s`` below the diagonal."""
    f, s = promote(fnp.atleast_1d(fnp.asarray(f)), fnp.atleast_1d(fnp.asarray(s)))
    if f.shape[-1] < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape {f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError("Incorrect lengths for f and s. The length of s along the last axis must be one less than "
                         f"the length of f; got f shape {f.shape} and s shape {s.shape}.")
    n = f.shape[-1]
    batch = fnp.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    padded = fnp.concatenate([fnp.broadcast_to(s, batch + s.shape[-1:]), fnp.zeros(batch + (1,), s.dtype)], axis=-1)
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    sub = fnp.where(rows == cols + 1, padded[..., None, :], fnp.zeros((), s.dtype))
    return fnp.where(rows == 0, fnp.broadcast_to(f, batch + (n,))[..., None, :], sub)


def hadamard(n: int, dtype: Any = int) -> Any:
    """The n x n Hadamard matrix (Sylvester's construction) for n a power of 2."""
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    h = np.ones((1, 1))
    for _ in range(int(math.log2(n))):
        h = np.block([[h, h], [h, -h]])
    return fnp.asarray(h, dtype=dtype)


def helmert(n: int, full: bool = False) -> Any:
    """The (n - 1) x n Helmert matrix (n x n with ``full``: the row 1/sqrt(n) first)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    dtype = fnp.zeros(0).dtype
    i, j = np.arange(n - 1)[:, None], np.arange(n)[None, :]
    k = (i + 1).astype(np.float64)
    denom = np.sqrt(k * (k + 1))
    h = np.where(j <= i, 1.0 / denom, np.where(j == i + 1, -k / denom, 0.0))
    if full:
        h = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), h], axis=0)
    return fnp.asarray(h.astype(dtype))


def _binomials(n: int) -> np.ndarray:
    return np.asarray([[math.comb(i, j) for j in range(n)] for i in range(n)], dtype=np.float64)


def _kind(kind: str | None) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in _KINDS:
        raise ValueError(f"Expected kind to be one of: {list(_KINDS)}; got {kind}")
    return kind


def pascal(n: int, kind: str | None = None) -> Any:
    """The Pascal matrix of binomial coefficients: lower, upper or their (symmetric) product, in float32
    as JAX's."""
    kind = _kind(kind)
    lower = _binomials(n)
    out = {"lower": lower, "upper": lower.T, "symmetric": lower @ lower.T}[kind]
    return fnp.asarray(out.astype(np.float32))


def invpascal(n: int, kind: str | None = None) -> Any:
    """The inverse of ``pascal(n, kind)``, in the default float dtype."""
    kind = _kind(kind)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    lower_inv = np.where((i - j) % 2 == 0, 1.0, -1.0) * _binomials(n)
    out = {"lower": lower_inv, "upper": lower_inv.T, "symmetric": lower_inv.T @ lower_inv}[kind]
    return fnp.asarray(out.astype(fnp.zeros(0).dtype))


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The n x n discrete Fourier transform matrix exp(-2 pi i jk / n), scaled by 1/sqrt(n) or 1/n."""
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    dtype = np.dtype(fnp.zeros(0, dtype=complex).dtype if dtype is None else dtype)
    if dtype.kind != "c":
        raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
    a = np.arange(n)
    omegas = np.exp(-2j * np.pi * (np.outer(a, a) % n) / n)
    omegas = omegas / {None: 1.0, "sqrtn": math.sqrt(n), "n": float(n)}[scale]
    return fnp.asarray(omegas.astype(dtype))
