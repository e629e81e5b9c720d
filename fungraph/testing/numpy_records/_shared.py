"""Shape strategies, domains and helpers shared by the op records of ``fungraph.numpy``'s API
(``fungraph.testing.numpy_records``): functions written against a namespace ``xp`` run as
fungraph's (``fnp``) and numpy's (``np``) versions; matrix rows build well-conditioned operands
inside ``fun``; integer operands are made inside ``fun`` from the drawn floats, so every row
also runs under the float-only derivative and vmap checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fungraph import numpy as fnp
from fungraph.testing.op_records import FI, F, OpRecord
from fungraph.testing.strategies import shapes

POS = (0.1, 3.0)
UNIT = (-0.9, 0.9)
SMALL = (-1.0, 1.0)
NONZERO = (0.3, 3.0)


def _one(min_dims: int = 0, max_dims: int = 3, min_side: int = 1) -> st.SearchStrategy:
    return st.tuples(shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side))


def _bcast(n: int = 2) -> st.SearchStrategy:
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, max_side=4).map(
        lambda r: r.input_shapes)


def _same(n: int, min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy:
    return shapes(min_dims=min_dims, max_dims=max_dims).map(lambda s: (s,) * n)


@st.composite
def _square(draw: Any, max_batch: int = 1, min_n: int = 1) -> tuple:
    n = draw(st.integers(min_n, 4))
    batch = draw(shapes(max_dims=max_batch, max_side=3))
    return (batch + (n, n),)


@st.composite
def _rect(draw: Any, tall: bool = False) -> tuple:
    m, n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if tall and m < n:
        m, n = n, m
    batch = draw(shapes(max_dims=1, max_side=3))
    return (batch + (m, n),)


@st.composite
def _solve_shapes(draw: Any) -> tuple:
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    batch = draw(shapes(max_dims=1, max_side=3))
    return batch + (n, n), batch + (n, k)


@st.composite
def _vec_and_matrix(draw: Any) -> tuple:
    n = draw(st.integers(1, 4))
    return (n, n), (n,)


def _f_unary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domain: Any = (-3.0, 3.0),
             dts: tuple = FI, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _one(), dts, (domain,), **kw)


def _in_argument_dtype(ref: Callable[..., Any]) -> Callable[..., Any]:
    """numpy's ``ref`` with its result in its first argument's (inexact) dtype, as JAX's
    functions that numpy computes in float64 (``float_power``, ``cov``) keep float32."""

    def in_dtype(*args: Any) -> Any:
        return np.asarray(ref(*args)).astype(np.asarray(args[0]).dtype)

    return in_dtype


def _f_binary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domains: tuple = (),
              dts: tuple = FI, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, ref, _bcast(), dts, domains, **kw)


def _shift(a: Any, xp: Any) -> Any:
    """``a`` (entries in [-1, 1]) plus ``(n + 2) I``: strictly diagonally dominant, so never
    singular (a shift of 3 made the all -1 3x3 matrix singular)."""
    n = a.shape[-1]
    return a + (n + 2.0) * xp.eye(n, dtype=a.dtype)


def _spread(a: Any, xp: Any) -> Any:
    """``a`` plus a rectangular diagonal 4, 8, 12, ...: singular/eigen values far apart."""
    m, n = a.shape[-2:]
    d = np.zeros((m, n), a.dtype)
    k = min(m, n)
    d[np.arange(k), np.arange(k)] = 4.0 * np.arange(1, k + 1)
    return a + d


def _sym(a: Any, xp: Any) -> Any:
    return _spread((a + xp.swapaxes(a, -1, -2)) / 2, xp)


def _spd(a: Any, xp: Any) -> Any:
    n = a.shape[-1]
    return xp.matmul(a, xp.swapaxes(a, -1, -2)) + n * xp.eye(n, dtype=a.dtype)


def _flat_cat(xp: Any, lead: int, *xs: Any) -> Any:
    """Concatenate outputs flattened past their first ``lead`` axes."""
    parts = [xp.reshape(x, x.shape[:lead] + (-1,)) for x in xs]
    return xp.concatenate(parts, axis=-1)


def _sign_fix(v: Any, xp: Any) -> Any:
    """Columns of v flipped so that their first-row entries are non-negative."""
    s = xp.sign(v[..., :1, :])
    return v * xp.where(s == 0, 1.0, s)


def _eigvalsh_lower(a: Any, xp: Any) -> Any:
    """The eigenvalues of the Hermitian matrix ``a``'s lower triangle gives: numpy's eigvalsh,
    JAX's with ``symmetrize_input=False`` (by default JAX's takes ``(a + a^H) / 2``)."""
    return xp.linalg.eigvalsh(_spread(a, xp), **({} if xp is np else {"symmetrize_input": False}))


def _eigh_both(a: Any, xp: Any) -> Any:
    w, v = xp.linalg.eigh(_sym(a, xp))
    return _flat_cat(xp, a.ndim - 2, w, _sign_fix(v, xp))


def _svd_all(a: Any, xp: Any) -> Any:
    u, s, vt = xp.linalg.svd(_spread(a, xp), full_matrices=False)
    sg = xp.sign(u[..., :1, :])
    sg = xp.where(sg == 0, 1.0, sg)
    return _flat_cat(xp, a.ndim - 2, u * sg, s, vt * xp.swapaxes(sg, -1, -2))


def _qr_both(a: Any, xp: Any) -> Any:
    q, r = xp.linalg.qr(_spread(a, xp))
    return _flat_cat(xp, a.ndim - 2, q, r)


def _slogdet(a: Any, xp: Any) -> Any:
    sign, logdet = xp.linalg.slogdet(_shift(a, xp))
    return sign * logdet


def _split_mix(x: Any, xp: Any) -> Any:
    parts = xp.array_split(x, 3, axis=-1)
    return xp.concatenate([p * (i + 1) for i, p in enumerate(parts)], axis=-1)


def _meshgrid(x: Any, y: Any, xp: Any) -> Any:
    a, b = xp.meshgrid(x, y)
    return a * 2 + b


def _both(f: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(fungraph version, numpy version) of a function written against a namespace ``xp``."""
    return (lambda *a: f(*a, fnp), lambda *a: f(*a, np))


def _rec(name: str, f: Callable[..., Any], shps: st.SearchStrategy, dts: tuple = F, **kw: Any) -> OpRecord:
    fun, ref = _both(f)
    return OpRecord(name, fun, ref, shps, dts, **kw)


def _parts(z: Any, xp: Any) -> Any:
    """A complex result as its real and imaginary parts stacked (real rows test it whole)."""
    return xp.stack([xp.real(z), xp.imag(z)])


def _inf_nan(x: Any, xp: Any) -> Any:
    return xp.where(x > 2, xp.inf, xp.where(x < -2, xp.nan, x))


def _nan_in(x: Any, xp: Any) -> Any:
    return xp.where(x > 1.5, xp.nan, x)


def _nan_rows(x: Any, xp: Any) -> Any:
    """NaNs injected everywhere but the first entry of each row, so no slice is all-NaN."""
    return xp.concatenate([x[..., :1], _nan_in(x[..., 1:], xp)], axis=-1)


BINS = 7


def _counts(x: Any, xp: Any) -> Any:
    return xp.floor(xp.abs(x) * 2).astype(np.int64)


def _bincount(x: Any, xp: Any) -> Any:
    xi = _counts(x, xp)
    return fnp.bincount(xi, length=BINS) if xp is fnp else np.bincount(xi, minlength=BINS)


def _bincount_w(x: Any, w: Any, xp: Any) -> Any:
    xi = _counts(x, xp)
    if xp is fnp:
        return fnp.bincount(xi, w, length=BINS)
    return np.bincount(xi, w, minlength=BINS).astype(w.dtype)


def _hist_w(x: Any, w: Any, xp: Any) -> Any:
    counts, _ = xp.histogram(x, 5, (-3.0, 3.0), weights=w)
    return counts.astype(w.dtype)


def _hist(x: Any, xp: Any) -> Any:
    """Counts in ``x``'s float dtype, as JAX's ``histogram`` returns them (numpy's are int64)."""
    counts, _ = xp.histogram(x, 5, (-3.0, 3.0))
    return counts.astype(x.dtype)


def _hist_density(x: Any, xp: Any) -> Any:
    """Densities and edges in ``x``'s float dtype, as JAX's (numpy's densities are float64)."""
    counts, edges = xp.histogram(x, 4, density=True)
    return xp.concatenate([counts, edges]).astype(x.dtype)


def _lexsort(x: Any, y: Any, xp: Any) -> Any:
    return xp.lexsort((xp.round(x), xp.round(y)))


def _block(a: Any, b: Any, xp: Any) -> Any:
    return xp.block([[a, b], [b * 2, a]])


def _every_other(x: Any, xp: Any) -> Any:
    return xp.compress(np.arange(x.shape[-1]) % 2 == 0, x, axis=-1)


def _compress_sized(x: Any, xp: Any) -> Any:
    if xp is fnp:
        return fnp.compress(fnp.ravel(x) > 0, x, size=x.size, fill_value=-9.0)
    kept = x.ravel()[x.ravel() > 0]
    return np.concatenate([kept, np.full(x.size - kept.size, -9.0, x.dtype)])


def _extract_sized(x: Any, xp: Any) -> Any:
    if xp is fnp:
        return fnp.extract(x < 1, x, size=x.size)
    kept = np.extract(x < 1, x)
    return np.concatenate([kept, np.zeros(x.size - kept.size, x.dtype)])


def _choose(x: Any, xp: Any) -> Any:
    idx = xp.floor(xp.abs(x)).astype(np.int64)
    return xp.choose(idx, [x, x * 2, -x, x * x], mode="clip")


def _fill_diagonal(x: Any, xp: Any) -> Any:
    if xp is fnp:
        return fnp.fill_diagonal(x, [5.0, -5.0], wrap=True, inplace=False)
    out = x.copy()
    np.fill_diagonal(out, [5.0, -5.0], wrap=True)
    return out


def _put_along(x: Any, xp: Any) -> Any:
    idx = (fnp.argsort(x, axis=-1) if xp is fnp else np.argsort(x, axis=-1, kind="stable"))[..., :1]
    if xp is fnp:
        return fnp.put_along_axis(x, idx, x[..., -1:] * 3.0, -1, inplace=False)
    out = x.copy()
    np.put_along_axis(out, idx, x[..., -1:] * 3.0, -1)
    return out


def _ints(x: Any, y: Any, xp: Any) -> tuple[Any, Any]:
    return xp.round(x * 10).astype(np.int64), xp.round(y * 7).astype(np.int64)


def _shifts(x: Any, y: Any, xp: Any) -> tuple[Any, Any]:
    return xp.round(x * 1000).astype(np.int64), xp.floor(xp.abs(y) * 3).astype(np.int64)


def _sort_complex_ref(x: Any) -> Any:
    """numpy's sort_complex, in JAX's dtype (complex64 for inputs of up to 32 bits)."""
    return np.real(np.sort_complex(x)).astype(np.float64 if x.dtype.itemsize == 8 else np.float32)


def _padded(values: np.ndarray, size: int, fill: Any) -> np.ndarray:
    """numpy's variable-length result cut or padded to ``size``, as ``unique(size=)`` returns it."""
    return np.concatenate([values[:size], np.full(max(size - values.size, 0), fill, values.dtype)])


def _unique(x: Any, xp: Any) -> Any:
    y = xp.concatenate([xp.ravel(x), xp.ravel(x)[::-1]])
    if xp is fnp:
        return fnp.unique(y, size=x.size)
    u = np.unique(y)
    return _padded(u, x.size, u[0])


def _unique_parts(x: Any, xp: Any) -> Any:
    """Index, inverse and counts of rounded values (repeats on purpose), stacked."""
    y = xp.round(x * 2)
    if xp is fnp:
        _, index, inverse, counts = fnp.unique(y, True, True, True, size=x.size)
        return fnp.concatenate([index, fnp.ravel(inverse), counts])
    _, index, inverse, counts = np.unique(y, True, True, True)
    return np.concatenate([_padded(index, x.size, index[0]), inverse.ravel(), _padded(counts, x.size, 0)])


def _union(x: Any, y: Any, xp: Any) -> Any:
    if xp is fnp:
        return fnp.union1d(x, xp.round(y), size=2 * x.size)
    u = np.union1d(x, np.round(y))
    return _padded(u, 2 * x.size, u[0])


def _set_op(name: str) -> Any:
    """``name`` of ``x`` and rounded ``y`` (so they share some values), cut or padded to
    ``2 * x.size`` as under a trace: numpy's result padded as JAX pads it (its smallest value,
    0 for an empty result and always for ``setdiff1d``)."""
    def f(x: Any, y: Any, xp: Any) -> Any:
        a, b = xp.round(x * 2), xp.round(y * 2)
        if xp is fnp:
            return getattr(fnp, name)(a, b, size=2 * x.size)
        r = getattr(np, name)(a, b)
        return _padded(r, 2 * x.size, r[0] if r.size and name != "setdiff1d" else 0)

    return f


def _poly(name: str) -> Any:
    return lambda a, b, xp: getattr(xp, name)(a, b)


_VEC = _one(1, 1)
_VEC2 = _same(2, 1, 1)
_COEFFS = st.tuples(_VEC.map(lambda s: s[0]), _VEC.map(lambda s: s[0]))
