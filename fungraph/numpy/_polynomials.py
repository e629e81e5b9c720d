"""Polynomials of ``fungraph.numpy`` (numpy's reference: poly1d-style functions; coefficients
highest power first): evaluation, arithmetic, derivatives and integrals, division, fitting and
roots, and the Vandermonde matrix they are built on. Compositions of the public functions, so
jit, grad and vmap work as they do for those."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ConcretizationError, Tracer
from fungraph.numpy._util import asarray, is_concrete, namespace, promote, real_inexact, take_static
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh


def _coefficients(p: Any, name: str) -> Any:
    c = asarray(p)
    if c.ndim != 1:
        raise ValueError(f"{name}: polynomial coefficients must be 1-d, got shape {c.shape}")
    return c


def polyval(p: Any, x: Any) -> Any:
    cs, xs = (ew.strong(asarray(t)) for t in promote(p, x))  # strongly typed, as JAX's
    out = None
    for k in range(cs.shape[0]):
        c = take_static(cs, k, 0)
        out = c if out is None else ew.add(ew.mul(out, xs), c)
    return sh.broadcast_to(out, np.broadcast_shapes(np.shape(out), xs.shape)) if out is not None else xs


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    """Powers of ``x`` in ``x``'s dtype, as ``jnp.vander`` (numpy widens to int64/float64)."""
    xs = asarray(x)
    n = xs.shape[0] if N is None else int(N)
    powers = range(n) if increasing else range(n - 1, -1, -1)
    cols = [ew.integer_pow(xs, k) for k in powers]
    return sh.concatenate([sh.reshape(c, (xs.shape[0], 1)) for c in cols], 1) if cols else np.zeros((xs.shape[0], 0))


def polyadd(a1: Any, a2: Any) -> Any:
    """The sum of two polynomials (coefficients highest power first)."""
    fnp = namespace()
    a, b = _coefficients(a1, "polyadd"), _coefficients(a2, "polyadd")
    n = max(a.shape[0], b.shape[0])
    return fnp.pad(a, (n - a.shape[0], 0)) + fnp.pad(b, (n - b.shape[0], 0))


def polysub(a1: Any, a2: Any) -> Any:
    return polyadd(a1, -_coefficients(a2, "polysub"))


def polymul(a1: Any, a2: Any) -> Any:
    """The product of two polynomials: the full convolution of their coefficients."""
    return namespace().convolve(_coefficients(a1, "polymul"), _coefficients(a2, "polymul"))


def polyder(p: Any, m: int = 1) -> Any:
    """The ``m``-th derivative of a polynomial (empty once ``m`` exceeds its degree)."""
    c = _coefficients(p, "polyder")
    if m < 0:
        raise ValueError("polyder: order of derivative must be non-negative")
    c = c.astype(np.promote_types(c.dtype, np.int64)) if c.dtype == dtypes.bool_ else c
    for _ in range(m):
        n = c.shape[0] - 1
        c = c[:-1] * np.arange(n, 0, -1).astype(c.dtype) if n > 0 else c[:0]
    return c


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative of a polynomial, with integration constants ``k`` (one per
    integration, the first integration's first; zeros by default)."""
    fnp = namespace()
    c = _coefficients(p, "polyint")
    if m < 0:
        raise ValueError("polyint: order of integral must be non-negative")
    c = c.astype(np.promote_types(c.dtype, np.float64)) if not dtypes.is_inexact(c.dtype) else c
    ks = np.zeros(m) if k is None else np.broadcast_to(np.asarray(k, np.float64) if is_concrete(k) else k, (m,))
    for j in range(m):
        n = c.shape[0]
        c = fnp.concatenate([c / np.arange(n, 0, -1).astype(c.dtype), fnp.reshape(fnp.asarray(ks[j], c.dtype), (1,))])
    return c


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """(quotient, remainder) of polynomial long division. The remainder keeps ``u``'s length
    (its leading entries are zeros), as in JAX; ``trim_leading_zeros=True`` drops them (entries
    below ``sqrt(eps)``, as JAX) but keeps at least one, as numpy does (JAX may return an empty
    remainder); that needs a concrete remainder."""
    fnp = namespace()
    a, b = promote(_coefficients(u, "polydiv"), _coefficients(v, "polydiv"), to_inexact=True)
    a, b = asarray(a), asarray(b)
    m, n = a.shape[0] - 1, b.shape[0] - 1
    inv_lead = 1 / b[0]
    quotient = []
    for k in range(m - n + 1):
        d = inv_lead * a[k]
        quotient.append(d)
        a = fnp.at(a)[k:k + n + 1].add(-d * b)
    q = fnp.stack(quotient) if quotient else fnp.zeros(1, a.dtype)
    if trim_leading_zeros:
        if isinstance(a, Tracer):
            raise ConcretizationError("polydiv: trim_leading_zeros=True needs a concrete remainder (not under jit)")
        r = np.asarray(a)
        keep = np.flatnonzero(np.abs(r) >= np.sqrt(np.finfo(r.dtype).eps))
        a = r[min(keep[0], r.size - 1) if keep.size else r.size - 1:]
    return q, a


def poly(seq_of_zeros: Any) -> Any:
    """The monic polynomial with the given roots (highest power first), or the characteristic
    polynomial of a square matrix (from its eigenvalues). As in JAX the result stays complex
    for complex roots and for a matrix (numpy returns a real array when roots pair up)."""
    fnp = namespace()
    z = asarray(seq_of_zeros)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = fnp.linalg.eigvals(z)
    elif z.ndim == 0:
        z = fnp.reshape(z, (1,))
    elif z.ndim != 1:
        raise ValueError("poly: input must be 1-d or a non-empty square 2-d array")
    (z,) = promote(z, to_inexact=True) if not dtypes.is_inexact(z.dtype) else (z,)
    out = fnp.ones(1, z.dtype)
    for k in range(z.shape[0]):
        out = fnp.convolve(out, fnp.stack([fnp.ones((), z.dtype), -z[k]]))
    return out


def _companion_roots(p: Any) -> Any:
    fnp = namespace()
    cdt = dtypes.complex_for(p.dtype)
    if p.shape[0] < 2:
        return np.zeros(0, cdt)
    k = p.shape[0] - 1
    first = fnp.reshape(-p[1:] / p[0], (1, k))
    below = fnp.eye(k - 1, k, dtype=p.dtype)
    return fnp.linalg.eigvals(fnp.concatenate([first, below], axis=0)).astype(cdt)


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """The roots of the polynomial ``p`` (highest power first) as the eigenvalues of its
    companion matrix, always complex as in JAX. ``strip_zeros=True`` drops leading zero
    coefficients, which needs a concrete ``p``; with ``strip_zeros=False`` (required under jit,
    as in JAX) each leading zero instead gives a NaN root, listed last."""
    fnp = namespace()
    (c,) = promote(fnp.atleast_1d(asarray(p)), to_inexact=True)
    c = asarray(c)
    if c.ndim != 1:
        raise ValueError("roots: input must be a rank-1 array")
    n = c.shape[0]
    if n < 2:
        return np.zeros(0, dtypes.complex_for(c.dtype))
    nz = c != 0
    lead = fnp.where(fnp.any(nz), fnp.argmax(nz), n)
    if strip_zeros:
        if isinstance(lead, Tracer):
            raise ConcretizationError("roots: strip_zeros=True needs concrete coefficients; under jit pass "
                                      "strip_zeros=False (each leading zero then gives a NaN root)")
        return _companion_roots(c[int(lead):])
    safe = fnp.where(lead == n, fnp.ones_like(c), c)
    shifted = fnp.take(safe, (np.arange(n) + lead) % n)
    found = _companion_roots(shifted)
    found = fnp.take(found, fnp.argsort(found == 0, stable=True), mode="clip")
    cnan = np.asarray(complex(np.nan, np.nan), found.dtype)
    return fnp.where(np.arange(n - 1) < n - 1 - lead, found, cnan)


def _concrete_int(x: Any, what: str) -> int:
    if isinstance(x, Tracer):
        raise ConcretizationError(f"{what} must be a concrete integer, got a traced value {x.aval}")
    return int(x)


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: bool | str = False) -> Any:
    """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (``y`` may hold one
    data set per column), coefficients highest power first, solved with ``linalg.lstsq`` on the
    column-scaled Vandermonde matrix. ``w`` weights the residuals; ``full`` also returns
    (residuals, rank, singular values, rcond); ``cov`` the coefficients' covariance (scaled by
    the residual variance unless ``cov="unscaled"``)."""
    fnp = namespace()
    deg = _concrete_int(deg, "polyfit: deg")
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    xs, ys = real_inexact("polyfit", x, y)
    if xs.ndim != 1:
        raise TypeError("polyfit: expected a 1-d vector for x")
    if xs.shape[0] == 0:
        raise TypeError("polyfit: expected a non-empty vector for x")
    if ys.ndim not in (1, 2):
        raise TypeError("polyfit: expected a 1-d or 2-d array for y")
    if ys.shape[0] != xs.shape[0]:
        raise TypeError("polyfit: expected x and y to have the same length")
    order = deg + 1
    n = xs.shape[0]
    if rcond is None:
        rcond = n * float(np.finfo(xs.dtype).eps)
    lhs = fnp.vander(xs, order)
    rhs = ys
    if w is not None:
        (wt,) = promote(w, to_inexact=True)
        wt = asarray(wt)
        if wt.ndim != 1 or wt.shape[0] != n:
            raise TypeError("polyfit: expected a 1-d w of the same length as x")
        lhs = lhs * wt[:, None]
        rhs = rhs * (wt if ys.ndim == 1 else wt[:, None])
    scale = fnp.sqrt(fnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = fnp.linalg.lstsq(lhs, rhs, rcond)
    c = c / (scale if ys.ndim == 1 else scale[:, None])
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    base = fnp.linalg.inv(lhs.T @ lhs) / fnp.outer(scale, scale)
    if isinstance(cov, str) and cov == "unscaled":
        fac = fnp.ones(1, base.dtype)
    else:
        if n <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale the covariance matrix")
        fac = resids / (n - order)
    return c, (base * fac if ys.ndim == 1 else base[:, :, None] * fac)
