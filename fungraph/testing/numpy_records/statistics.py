"""Op records for ``fungraph.numpy``'s reductions, cumulative functions, sorting, order statistics,
NaN-ignoring statistics and histograms; same format and tags as
:data:`fungraph.testing.op_records.OP_RECORDS` (see :mod:`fungraph.testing.numpy_records`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from fungraph import numpy as fnp
from fungraph.testing.numpy_records._shared import (
    _VEC,
    _VEC2,
    SMALL,
    _bincount,
    _bincount_w,
    _hist,
    _hist_density,
    _hist_w,
    _in_argument_dtype,
    _lexsort,
    _nan_in,
    _nan_rows,
    _one,
    _rec,
    _same,
    _sort_complex_ref,
)
from fungraph.testing.op_records import ALL, FI, F, OpRecord
from fungraph.testing.strategies import shapes


def _cum_dtype(x: Any) -> Any:
    """JAX's dtype of ``cumsum``/``cumprod``: bools count in the default integer, integers keep
    their dtype (numpy widens int32 to int64)."""
    return np.int64 if x.dtype == np.bool_ else x.dtype


STATISTICS_RECORDS: tuple[OpRecord, ...] = (
    OpRecord("cumsum", lambda x: fnp.cumsum(x, axis=-1), lambda x: np.cumsum(x, axis=-1, dtype=_cum_dtype(x)),
             _one(1), ALL),
    OpRecord("cumsum_flat", fnp.cumsum, lambda x: np.cumsum(x, dtype=_cum_dtype(x)), _one(), FI),
    OpRecord("cumprod", lambda x: fnp.cumprod(x, 0), lambda x: np.cumprod(x, 0, dtype=_cum_dtype(x)), _one(1), FI,
             ((-2.0, 2.0),),
             tol32=1e-4),
    OpRecord("cumulative_sum", lambda x: fnp.cumulative_sum(x, axis=0, include_initial=True),
             lambda x: np.cumulative_sum(x, axis=0, include_initial=True), _one(1), FI),
    OpRecord("nancumsum", lambda x: fnp.nancumsum(_nan_in(x, fnp), axis=-1),
             lambda x: np.nancumsum(_nan_in(x, np), axis=-1), _one(1), F, tags=("no_grad",)),
    OpRecord("sort", fnp.sort, np.sort, _one(1), FI),
    OpRecord("sort_axis0", lambda x: fnp.sort(x, axis=0), lambda x: np.sort(x, axis=0), _one(1), FI),
    OpRecord("sort_flat", lambda x: fnp.sort(x, axis=None), lambda x: np.sort(x, axis=None), _one(), FI),
    OpRecord("argsort", fnp.argsort, lambda x: np.argsort(x, kind="stable"), _one(1), FI, differentiable=False),
    OpRecord("partition", lambda x: fnp.partition(x, 0), lambda x: np.sort(np.partition(x, 0)), _one(1), FI),
    OpRecord("median", lambda x: fnp.median(x, axis=-1), lambda x: np.median(x, axis=-1), _one(1), FI),
    OpRecord("median_all", fnp.median, np.median, _one(), F),
    OpRecord("quantile", lambda x: fnp.quantile(x, [0.1, 0.5, 0.75], axis=0),
             lambda x: np.quantile(x, [0.1, 0.5, 0.75], axis=0), _one(1), F),
    OpRecord("percentile", lambda x: fnp.percentile(x, 30.0, axis=-1, keepdims=True),
             lambda x: np.percentile(x, 30.0, axis=-1, keepdims=True), _one(1), FI),
    OpRecord("nansum", lambda x: fnp.nansum(_nan_in(x, fnp), axis=0), lambda x: np.nansum(_nan_in(x, np), axis=0),
             _one(1), F),
    OpRecord("nanmean", lambda x: fnp.nanmean(_nan_in(x, fnp)), lambda x: np.nanmean(_nan_in(x, np)),
             _one(), F, domains=((-3.0, 1.0),)),
    OpRecord("nanmax", lambda x: fnp.nanmax(_nan_rows(x, fnp), axis=-1), lambda x: np.nanmax(_nan_rows(x, np), axis=-1),
             _one(1), F, domains=((-3.0, 1.7),)),
    OpRecord("nanmin", lambda x: fnp.nanmin(_nan_rows(x, fnp), axis=-1), lambda x: np.nanmin(_nan_rows(x, np), axis=-1),
             _one(1), F, domains=((-3.0, 1.7),)),
    OpRecord("nanvar", lambda x: fnp.nanvar(_nan_in(x, fnp), axis=0), lambda x: np.nanvar(_nan_in(x, np), axis=0),
             _one(1), F, domains=((-3.0, 1.6),), tol32=1e-4),
    OpRecord("nanargmax", lambda x: fnp.nanargmax(_nan_rows(x, fnp), axis=-1),
             lambda x: np.nanargmax(_nan_rows(x, np), axis=-1), _one(1), F, domains=((-3.0, 1.6),),
             differentiable=False),
    OpRecord("ptp", lambda x: fnp.ptp(x, axis=-1), lambda x: np.ptp(x, axis=-1), _one(1), FI),
    OpRecord("count_nonzero", lambda x: fnp.count_nonzero(x, axis=0), lambda x: np.count_nonzero(x, axis=0),
             _one(1), ALL, differentiable=False),
    OpRecord("average", lambda x, w: fnp.average(x, axis=-1, weights=w), lambda x, w: np.average(x, axis=-1, weights=w),
             _same(2, 1), F, ((-3.0, 3.0), (0.5, 2.0))),
    OpRecord("cov", fnp.cov, _in_argument_dtype(np.cov), _one(2, 2, min_side=2), F, tol32=1e-4),
    OpRecord("corrcoef", lambda x: fnp.corrcoef(x, rowvar=False),
             _in_argument_dtype(lambda x: np.corrcoef(x, rowvar=False)),
             st.tuples(st.tuples(st.integers(3, 5), st.integers(1, 3))), F, tol32=1e-4, tags=("grad1",)),
    OpRecord("searchsorted", lambda a, v: fnp.searchsorted(fnp.sort(a), v),
             lambda a, v: np.asarray(np.searchsorted(np.sort(a), v), np.int32),
             st.tuples(_one(1, 1).map(lambda s: s[0]), shapes(max_dims=2)),
             FI, differentiable=False),
    OpRecord("searchsorted_right", lambda a, v: fnp.searchsorted(fnp.sort(a), v, side="right"),
             lambda a, v: np.asarray(np.searchsorted(np.sort(a), v, side="right"), np.int32),
             st.tuples(_one(1, 1).map(lambda s: s[0]), shapes(max_dims=2)), FI, differentiable=False),
    OpRecord("digitize", lambda x: fnp.digitize(x, np.array([-1.0, 0.0, 2.0])),
             lambda x: np.asarray(np.digitize(x, np.array([-1.0, 0.0, 2.0])), np.int32), _one(), F,
             differentiable=False),
    OpRecord("interp", lambda x, fp: fnp.interp(x, np.array([-2.0, -0.5, 0.0, 1.0, 2.5])[:fp.shape[0]], fp),
             lambda x, fp: np.interp(x, np.array([-2.0, -0.5, 0.0, 1.0, 2.5])[:fp.shape[0]], fp),
             st.tuples(shapes(max_dims=2), st.integers(2, 5).map(lambda n: (n,))), F),
    OpRecord("trapezoid", lambda y: fnp.trapezoid(y, dx=0.5), lambda y: np.trapezoid(y, dx=0.5), _one(1), F),
    OpRecord("convolve", fnp.convolve, np.convolve, st.tuples(_one(1, 1).map(lambda s: s[0]),
                                                              _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("convolve_same", lambda a, v: fnp.convolve(a, v, "same"), lambda a, v: np.convolve(a, v, "same"),
             st.tuples(_one(1, 1).map(lambda s: s[0]), _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("correlate", fnp.correlate, np.correlate, st.tuples(_one(1, 1).map(lambda s: s[0]),
                                                                 _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    OpRecord("correlate_same", lambda a, v: fnp.correlate(a, v, "same"), lambda a, v: np.correlate(a, v, "same"),
             st.tuples(_one(1, 1).map(lambda s: s[0]), _one(1, 1).map(lambda s: s[0])), F, tol32=1e-4),
    _rec("all", lambda x, xp: xp.all(x > -1, axis=-1), _one(1), FI, differentiable=False),
    _rec("any", lambda x, xp: xp.any(x > 1, axis=0), _one(1), FI, differentiable=False),
    _rec("argpartition", lambda x, xp: xp.take_along_axis(x, xp.argpartition(x, 0, axis=-1)[..., :1], axis=-1)
         == xp.min(x, axis=-1, keepdims=True), _one(1), F, differentiable=False),  # ties pick any index
    _rec("cumulative_prod", lambda x, xp: xp.cumulative_prod(x, axis=-1, include_initial=True), _one(1, 2),
         domains=(SMALL,), tol32=1e-4),
    _rec("nanargmin", lambda x, xp: xp.nanargmin(_nan_rows(x, xp), axis=-1), _one(1), F, differentiable=False),
    _rec("nancumprod", lambda x, xp: xp.nancumprod(_nan_in(x, xp), axis=-1), _one(1), F, domains=(SMALL,),
         tags=("no_grad",), tol32=1e-4),
    _rec("nanprod", lambda x, xp: xp.nanprod(_nan_in(x, xp), axis=0), _one(1), F, domains=(SMALL,),
         tags=("no_grad",), tol32=1e-4),
    _rec("nanstd", lambda x, xp: xp.nanstd(_nan_rows(x, xp), axis=-1), _one(1, min_side=2), F,
         tags=("no_grad",), tol32=1e-4),
    _rec("bincount", _bincount, _VEC, differentiable=False),
    _rec("bincount_weights", _bincount_w, _VEC2),
    _rec("histogram", _hist, _one(), differentiable=False),
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
    OpRecord("sort_complex", lambda x: fnp.real(fnp.sort_complex(x)), _sort_complex_ref, _VEC, FI),
)
