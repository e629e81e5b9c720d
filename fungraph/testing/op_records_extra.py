"""Op records for the functions of ``fungraph.numpy._extra`` (counting, histograms, NaN-ignoring
quantiles, ordering helpers, functional index updates, integer bit operations, polynomials);
same format and tags as :data:`fungraph.testing.op_records_more.MORE_RECORDS`.

Integer operands are made inside ``fun`` from the drawn floats (``floor(|x| * 2)`` and the
like), so every row also runs under the float-only derivative and vmap checks. Where fungraph
follows JAX rather than numpy (weights keep their dtype in ``bincount``, float32 stays float32
in ``polyder``/``polyint``/``sort_complex``, ``polymul`` keeps leading zeros, ``fill_diagonal``
and ``put_along_axis`` return the updated array), the reference does what fungraph promises."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from fungraph import numpy as fnp
from fungraph.testing.op_records import FI, F, OpRecord
from fungraph.testing.op_records_more import _both, _nan_in, _nan_rows, _one, _same

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


def _hist_density(x: Any, xp: Any) -> Any:
    counts, edges = xp.histogram(x, 4, density=True)
    return xp.concatenate([counts, edges])


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
    """numpy's sort_complex, in JAX's dtype (complex64 for float32 input)."""
    return np.real(np.sort_complex(x)).astype(np.float32 if x.dtype == np.float32 else np.float64)


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


def _rec(name: str, f: Any, shps: st.SearchStrategy, dts: tuple = F, **kw: Any) -> OpRecord:
    fun, ref = _both(f)
    return OpRecord(name, fun, ref, shps, dts, **kw)


_VEC = _one(1, 1)
_VEC2 = _same(2, 1, 1)
_COEFFS = st.tuples(_VEC.map(lambda s: s[0]), _VEC.map(lambda s: s[0]))

EXTRA_RECORDS: tuple[OpRecord, ...] = (
    _rec("bincount", _bincount, _VEC, differentiable=False),
    _rec("bincount_weights", _bincount_w, _VEC2),
    _rec("histogram", lambda x, xp: xp.histogram(x, 5, (-3.0, 3.0))[0], _one(), differentiable=False),
    _rec("histogram_weights", _hist_w, _VEC2),
    _rec("histogram_density", _hist_density, _one(1), tags=("no_grad",)),
    _rec("histogram_bin_edges", lambda x, xp: xp.histogram_bin_edges(x, 4), _one(1)),
    _rec("nanquantile", lambda x, xp: xp.nanquantile(_nan_rows(x, xp), [0.2, 0.7], axis=-1), _one(1),
         domains=((-3.0, 1.7),)),
    _rec("nanmedian", lambda x, xp: xp.nanmedian(_nan_rows(x, xp), axis=-1, keepdims=True), _one(1),
         domains=((-3.0, 1.7),)),
    _rec("nanpercentile_all", lambda x, xp: xp.nanpercentile(_nan_in(x, xp), 40.0), _one(),
         domains=((-3.0, 1.0),)),
    _rec("lexsort", _lexsort, _VEC2, differentiable=False),
    _rec("unstack", lambda x, xp: xp.stack(xp.unstack(x, axis=-1)), _one(1), FI),
    _rec("block", _block, _same(2, 2, 2), FI),
    OpRecord("sort_complex", lambda x: fnp.real(fnp.sort_complex(x)), _sort_complex_ref, _VEC, FI),
    _rec("compress", _every_other, _one(1), FI),
    _rec("compress_sized", _compress_sized, _one(), F),
    _rec("extract_sized", _extract_sized, _one(), F),
    _rec("choose", _choose, _one(), F),
    _rec("fill_diagonal", _fill_diagonal, st.tuples(st.tuples(st.integers(1, 7), st.integers(1, 4))), FI),
    _rec("put_along_axis", _put_along, _one(1), F),
    _rec("gcd", lambda x, y, xp: xp.gcd(*_ints(x, y, xp)), _same(2), differentiable=False),
    _rec("lcm", lambda x, y, xp: xp.lcm(*_ints(x, y, xp)), _same(2), differentiable=False),
    _rec("left_shift", lambda x, y, xp: xp.left_shift(*_shifts(x, y, xp)), _same(2), differentiable=False),
    _rec("right_shift", lambda x, y, xp: xp.right_shift(*_shifts(x, y, xp)), _same(2), differentiable=False),
    _rec("unique_sized", _unique, _one(min_dims=1), FI),
    _rec("unique_index_inverse_counts", _unique_parts, _one(min_dims=1), F, differentiable=False),
    _rec("union1d_sized", _union, _VEC2, F),
    _rec("intersect1d_sized", _set_op("intersect1d"), _VEC2, F, differentiable=False),
    _rec("setdiff1d_sized", _set_op("setdiff1d"), _VEC2, F, differentiable=False),
    _rec("setxor1d_sized", _set_op("setxor1d"), _VEC2, F, differentiable=False),
    _rec("i0", lambda x, xp: xp.i0(x), _one(), F),
    _rec("unwrap", lambda x, xp: xp.unwrap(x * 3.0, axis=-1), _one(1), F),
    _rec("unwrap_period", lambda x, xp: xp.unwrap(x * 3.0, period=4.0, axis=0), _one(1), F),
    _rec("polyadd", _poly("polyadd"), _COEFFS, FI),
    _rec("polysub", _poly("polysub"), _COEFFS, FI),
    OpRecord("polymul", fnp.polymul, np.convolve, _COEFFS, F, tol32=1e-4),
    OpRecord("polyder", lambda p: fnp.polyder(p, 2), lambda p: np.polyder(p, 2).astype(p.dtype), _VEC, F),
    OpRecord("polyint", lambda p: fnp.polyint(p, 2, [1.0, -2.0]),
             lambda p: np.polyint(p, 2, [1.0, -2.0]).astype(p.dtype), _VEC, F),
)
