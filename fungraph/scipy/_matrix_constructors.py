"""Structured matrices of ``scipy.linalg`` built from vectors or sizes (``circulant``,
``companion``, ``fiedler_companion``, ``convolution_matrix``, ``fiedler``, ``leslie``,
``hadamard``, ``helmert``, ``pascal``, ``invpascal``, ``invhilbert``, ``dft``), as
``jax.scipy.linalg``'s: leading axes of a vector argument are a batch."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

import fungraph.numpy as fnp
from fungraph.numpy._util import promote
from fungraph.scipy.special import comb

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


def fiedler_companion(a: Any) -> Any:
    """The pentadiagonal (Fiedler) companion matrix of the polynomial with coefficients ``a``
    (highest degree first): its eigenvalues are the polynomial's roots."""
    (a,) = promote(a, to_inexact=True)
    a = fnp.atleast_1d(a)
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero length, but got an array "
                         f"of shape {a.shape}.")
    n = a.shape[-1] - 1
    if n == 0:
        return fnp.zeros(a.shape[:-1] + (0, 0), a.dtype)
    a = a / a[..., :1]
    if n == 1:
        return -a[..., 1:, None]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    even, odd = i % 2 == 0, i % 2 == 1
    coefficient = fnp.zeros((), a.dtype)
    out = fnp.broadcast_to(coefficient, a.shape[:-1] + (n, n))
    one = fnp.ones((), a.dtype)
    rules = [
        ((i == 0) & (j == 0), -a[..., 1, None, None]),
        ((i == 1) & (j == 0), one),
        ((j == i + 1) & even, -a[..., np.minimum(i + 2, n) + 0 * j]),
        ((j == i + 2) & even, one),
        ((j == i - 1) & even & (i >= 2), -a[..., np.minimum(i + 1, n) + 0 * j]),
        ((j == i - 2) & odd & (i >= 3), one),
    ]
    for mask, value in reversed(rules):
        out = fnp.where(mask, value, out)
    return out


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The Toeplitz matrix ``A`` (``n`` columns) with ``A @ v == convolve(a, v, mode)``: rows
    ``m + n - 1`` ('full'), ``max(m, n)`` ('same') or ``max(m, n) - min(m, n) + 1`` ('valid')."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    a = fnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    rows = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        first, last = trim // 2, trim - trim // 2
    elif mode == "valid":
        first = last = min(n, m) - 1
    else:
        first = last = 0
    lag = np.arange(first, rows - last)[:, None] - np.arange(n)[None, :]
    inside = (lag >= 0) & (lag < m)
    return fnp.where(inside, a[..., np.clip(lag, 0, m - 1)], fnp.zeros((), a.dtype))


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


def invhilbert(n: int) -> Any:
    """The inverse of the n x n Hilbert matrix from its closed form in binomial coefficients,
    in the default float dtype (floating-point binomials, as JAX's)."""
    a = fnp.arange(n, dtype=fnp.zeros(0).dtype)
    i, j = a[:, None], a[None, :]
    s = i + j
    return (-1.0) ** s * (s + 1.0) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1) * comb(s, i) ** 2


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
