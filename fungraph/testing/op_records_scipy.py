"""Op records for ``fungraph.scipy.special`` and ``fungraph.scipy.stats``, with SciPy as the
reference; same format as :data:`fungraph.testing.op_records.OP_RECORDS`.

References are cast to the dtype fungraph promises: JAX's promotion of the arguments
(integers give the default float), except ``polygamma``, whose integer order does not widen ``x``.

Tags: ``wrt:i,j`` rows differentiate only those arguments (the others are shape parameters of an
incomplete gamma/beta function, whose derivatives are not implemented); ``grad1`` rows check
first derivatives only. Rows needing structured operands (simplex points, positive-definite
covariances) build them inside ``fun`` from unconstrained draws, and the reference does the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as ss
import scipy.stats as sst
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.scipy import special as fs
from fungraph.scipy import stats as fst
from fungraph.testing.op_records import F, OpRecord
from fungraph.testing.strategies import shapes

I64 = dtypes.int64
POS = (0.2, 4.0)
SHAPE = (0.5, 5.0)
LOC = (-1.0, 1.0)
SCALE = (0.5, 2.0)


def _one(min_dims: int = 0) -> st.SearchStrategy:
    return st.tuples(shapes(min_dims=min_dims))


def _bcast(n: int) -> st.SearchStrategy:
    return hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, max_side=4).map(
        lambda r: r.input_shapes)


def _ref(fun: Callable[..., Any], dtype_of: int | None = None) -> Callable[..., Any]:
    """``fun`` with its result cast to the dtype fungraph gives (see the module docstring)."""

    def ref(*args: Any) -> Any:
        if dtype_of is None:
            dt = dtypes.result_type(*(np.asarray(a) for a in args))
            dt = dt if dt.kind == "f" else dtypes.float_dtype_for(dt) if dt.kind in "biu" else dtypes.default_float()
        else:
            dt = np.asarray(args[dtype_of]).dtype
        out = fun(*args)
        if isinstance(out, tuple):
            return tuple(np.asarray(o).astype(dt) for o in out)
        return np.asarray(out).astype(dt)

    return ref


def _unary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domain: tuple = (-3.0, 3.0),
           **kw: Any) -> OpRecord:
    return OpRecord(name, fun, _ref(ref), _one(), F, (domain,), **kw)


def _nary(name: str, fun: Callable[..., Any], ref: Callable[..., Any], domains: tuple, **kw: Any) -> OpRecord:
    return OpRecord(name, fun, _ref(ref), _bcast(len(domains)), F, domains, **kw)


# --- structured operands ---------------------------------------------------------------------------


def _simplex(raw: Any, xp: Any) -> Any:
    """Points on the simplex along the first axis, from positive draws."""
    return raw / xp.sum(raw, axis=0, keepdims=True)


@st.composite
def _dirichlet_shapes(draw: Any) -> tuple:
    k = draw(st.integers(2, 4))
    return (k,) + tuple(draw(shapes(max_dims=1))), (k,)


def _dirichlet_ref(fun: Callable[..., Any], raw: np.ndarray, alpha: np.ndarray, drop: int) -> np.ndarray:
    """SciPy's value, unsqueezed to ``raw.shape[1:]`` (SciPy squeezes a single point to a scalar)."""
    x = _simplex(raw.astype(np.float64), np)
    return np.reshape(fun(x[:x.shape[0] - drop], alpha), raw.shape[1:])


def _spd(a: Any, xp: Any) -> Any:
    n = a.shape[-1]
    return xp.matmul(a, xp.swapaxes(a, -1, -2)) + n * xp.eye(n, dtype=a.dtype)


@st.composite
def _mvn_shapes(draw: Any) -> tuple:
    d = draw(st.integers(1, 3))
    batch = draw(shapes(max_dims=2, max_side=3))
    return batch + (d,), (d,), (d, d)


def _mvn_ref(x: np.ndarray, mean: np.ndarray, a: np.ndarray) -> np.ndarray:
    out = sst.multivariate_normal.logpdf(x, mean, _spd(a.astype(np.float64), np))
    return np.reshape(out, x.shape[:-1])


def _lse_b_neg(a: Any, b: Any, lse: Any, xp: Any) -> Any:
    """logsumexp of a negative sum, with its sign stacked first."""
    out, sign = lse(a, axis=-1, b=-b, return_sign=True)
    return xp.stack([sign, out])


SPECIAL_RECORDS: tuple[OpRecord, ...] = (
    _unary("erf", fs.erf, ss.erf),
    _unary("erfc", fs.erfc, ss.erfc),
    _unary("erfinv", fs.erfinv, ss.erfinv, (-0.95, 0.95), tol32=1e-4),
    _unary("expit", fs.expit, ss.expit, (-6.0, 6.0)),
    _unary("logit", fs.logit, ss.logit, (0.05, 0.95), tol32=1e-4),
    _unary("gamma", fs.gamma, ss.gamma, (0.2, 5.0), tol32=1e-4),
    _unary("gamma_negative", fs.gamma, ss.gamma, (-2.9, -2.1), tol32=1e-4),
    _unary("gammaln", fs.gammaln, ss.gammaln, (0.1, 30.0), tol32=1e-4),
    _unary("gammaln_negative", fs.gammaln, ss.gammaln, (-0.9, -0.1), tol32=1e-4),
    _unary("digamma", fs.digamma, ss.digamma, (0.1, 30.0), tol32=1e-4),
    _unary("psi_negative", fs.psi, ss.psi, (-1.9, -1.1), tol32=1e-4),
    OpRecord("polygamma", fs.polygamma, _ref(ss.polygamma, dtype_of=1), _bcast(2), F, ((0, 4), (0.2, 5.0)),
             (I64, None), tol32=1e-4),
    _nary("beta", fs.beta, ss.beta, (POS, POS), tol32=1e-4),
    _nary("beta_negative", fs.beta, ss.beta, ((-0.9, -0.1), (1.1, 1.9)), tol32=1e-4),
    _nary("betaln", fs.betaln, ss.betaln, (POS, POS), tol32=1e-4),
    _unary("multigammaln", lambda a: fs.multigammaln(a, 3), lambda a: ss.multigammaln(a, 3), (1.1, 6.0),
           tol32=1e-4),
    _unary("i0", fs.i0, ss.i0, (-6.0, 6.0)),
    _unary("i1", fs.i1, ss.i1, (-6.0, 6.0)),
    _unary("i0e", fs.i0e, ss.i0e, (-6.0, 6.0)),
    _unary("i1e", fs.i1e, ss.i1e, (-6.0, 6.0)),
    _unary("i0e_asymptotic", fs.i0e, ss.i0e, (25.0, 40.0)),
    _unary("i1_asymptotic", fs.i1, ss.i1, (25.0, 40.0), tol64=1e-10),
    _nary("xlogy", fs.xlogy, ss.xlogy, ((-2.0, 2.0), (0.1, 3.0))),
    _nary("xlog1py", fs.xlog1py, ss.xlog1py, ((-2.0, 2.0), (-0.9, 2.0))),
    _unary("entr", fs.entr, ss.entr, (0.05, 3.0)),
    _unary("ndtr", fs.ndtr, ss.ndtr, (-5.0, 5.0)),
    _unary("ndtri", fs.ndtri, ss.ndtri, (0.02, 0.98), tol32=1e-4),
    _unary("log_ndtr", fs.log_ndtr, ss.log_ndtr, (-10.0, 5.0), tol32=1e-4),
    _unary("log_ndtr_far_tail", fs.log_ndtr, ss.log_ndtr, (-60.0, -25.0), tol32=1e-4),
    _nary("gammainc", fs.gammainc, ss.gammainc, (SHAPE, (0.01, 8.0)), tags=("wrt:1",)),
    _nary("gammaincc", fs.gammaincc, ss.gammaincc, (SHAPE, (0.01, 8.0)), tags=("wrt:1",)),
    _nary("betainc", fs.betainc, ss.betainc, (SHAPE, SHAPE, (0.01, 0.99)), tol32=1e-4, tags=("wrt:2",)),
    _nary("stdtr", fs.stdtr, ss.stdtr, ((0.5, 20.0), (-5.0, 5.0)), tol32=1e-4, tags=("wrt:1",)),
    _unary("erfcx", fs.erfcx, ss.erfcx, (-3.0, 12.0), tol32=1e-4),
    _unary("dawsn", fs.dawsn, ss.dawsn, (-8.0, 8.0)),
    _nary("owens_t", fs.owens_t, ss.owens_t, ((-3.0, 3.0), (-3.0, 3.0))),
    _unary("expi", fs.expi, ss.expi, (0.1, 12.0), tol32=1e-4),
    _unary("expi_negative", fs.expi, ss.expi, (-12.0, -0.1), tol32=1e-4),
    _unary("exp1", fs.exp1, ss.exp1, (0.1, 12.0), tol32=1e-4, tags=("grad1",)),  # JAX: no second derivative
    OpRecord("expn", fs.expn, _ref(ss.expn), _bcast(2), F, ((0, 6), (0.1, 6.0)), (I64, None), tol32=1e-4,
             tags=("wrt:1", "grad1")),
    _unary("sici", lambda x: fnp.stack(fs.sici(x)), lambda x: np.stack(ss.sici(x)), (0.1, 12.0), tol32=1e-4),
    _unary("spence", fs.spence, ss.spence, (0.1, 4.0), tol32=1e-4),
    _nary("hyp1f1", fs.hyp1f1, ss.hyp1f1, ((0.1, 3.0), (0.5, 3.0), (-3.0, 3.0)), tol32=1e-4, tags=("grad1",)),
    _nary("hyp2f1", fs.hyp2f1, ss.hyp2f1, ((0.1, 2.0), (0.1, 2.0), (2.5, 4.0), (-0.9, 0.85)), tol32=1e-4,
          tags=("grad1",)),
    OpRecord("logsumexp", lambda a: fs.logsumexp(a, axis=-1), _ref(lambda a: ss.logsumexp(a, axis=-1)), _one(1),
             F, tol32=1e-4),
    OpRecord("logsumexp_all_keepdims", lambda a: fs.logsumexp(a, keepdims=True),
             _ref(lambda a: ss.logsumexp(a, keepdims=True)), _one(1), F, tol32=1e-4),
    OpRecord("logsumexp_b", lambda a, b: fs.logsumexp(a, axis=0, b=b),
             _ref(lambda a, b: ss.logsumexp(a, axis=0, b=b)), _bcast(2).filter(lambda s: max(map(len, s)) >= 1), F,
             ((-3.0, 3.0), (0.1, 2.0)), tol32=1e-4),
    OpRecord("logsumexp_negative_sign", lambda a, b: _lse_b_neg(a, b, fs.logsumexp, fnp),
             _ref(lambda a, b: _lse_b_neg(a, b, ss.logsumexp, np)),
             _bcast(2).filter(lambda s: max(map(len, s)) >= 1), F, ((-3.0, 3.0), (0.1, 2.0)), tol32=1e-4),
)


STATS_RECORDS: tuple[OpRecord, ...] = (
    _nary("norm.logpdf", fst.norm.logpdf, sst.norm.logpdf, ((-3.0, 3.0), LOC, SCALE)),
    _nary("norm.pdf", fst.norm.pdf, sst.norm.pdf, ((-3.0, 3.0), LOC, SCALE)),
    _nary("norm.cdf", fst.norm.cdf, sst.norm.cdf, ((-3.0, 3.0), LOC, SCALE)),
    _nary("norm.logcdf", fst.norm.logcdf, sst.norm.logcdf, ((-6.0, 3.0), LOC, SCALE), tol32=1e-4),
    _nary("norm.sf", fst.norm.sf, sst.norm.sf, ((-3.0, 3.0), LOC, SCALE)),
    _nary("norm.logsf", fst.norm.logsf, sst.norm.logsf, ((-3.0, 6.0), LOC, SCALE), tol32=1e-4),
    _nary("norm.ppf", fst.norm.ppf, sst.norm.ppf, ((0.02, 0.98), LOC, SCALE), tol32=1e-4),
    _nary("t.logpdf", fst.t.logpdf, sst.t.logpdf, ((-4.0, 4.0), (0.5, 10.0), LOC, SCALE), tol32=1e-4),
    _nary("t.pdf", fst.t.pdf, sst.t.pdf, ((-4.0, 4.0), (0.5, 10.0), LOC, SCALE), tol32=1e-4),
    _nary("t.cdf", fst.t.cdf, sst.t.cdf, ((-4.0, 4.0), (0.5, 10.0), LOC, SCALE), tol32=1e-4,
          tags=("wrt:0,2,3",)),
    _nary("t.logcdf", fst.t.logcdf, sst.t.logcdf, ((-4.0, 4.0), (0.5, 10.0), LOC, SCALE), tol32=1e-4,
          tags=("wrt:0,2,3",)),
    _nary("gamma.logpdf", fst.gamma.logpdf, sst.gamma.logpdf, ((0.0, 6.0), SHAPE, (-1.0, -0.1), SCALE),
          tol32=1e-4),
    _nary("gamma.pdf", fst.gamma.pdf, sst.gamma.pdf, ((0.0, 6.0), SHAPE, (-1.0, -0.1), SCALE), tol32=1e-4),
    _nary("gamma.logpdf_outside", fst.gamma.logpdf, sst.gamma.logpdf, ((-3.0, -1.5), SHAPE, LOC, SCALE),
          tags=("no_grad",)),
    _nary("gamma.cdf", fst.gamma.cdf, sst.gamma.cdf, ((0.0, 6.0), SHAPE, (-1.0, -0.1), SCALE), tol32=1e-4,
          tags=("wrt:0,2,3",)),
    _nary("gamma.logcdf", fst.gamma.logcdf, sst.gamma.logcdf, ((0.0, 6.0), SHAPE, (-1.0, -0.1), SCALE),
          tol32=1e-4, tags=("wrt:0,2,3",)),
    _nary("beta.logpdf", fst.beta.logpdf, sst.beta.logpdf, ((0.05, 0.95), SHAPE, SHAPE), tol32=1e-4),
    _nary("beta.pdf", fst.beta.pdf, sst.beta.pdf, ((0.05, 0.95), SHAPE, SHAPE), tol32=1e-4),
    _nary("beta.logpdf_loc_scale", fst.beta.logpdf, sst.beta.logpdf,
          ((-3.0, 3.0), SHAPE, SHAPE, (-1.0, -0.5), (3.0, 4.0)), tol32=1e-4, tags=("no_grad",)),
    _nary("beta.cdf", fst.beta.cdf, sst.beta.cdf, ((0.05, 0.95), SHAPE, SHAPE), tol32=1e-4, tags=("wrt:0",)),
    _nary("beta.logcdf", fst.beta.logcdf, sst.beta.logcdf, ((0.05, 0.95), SHAPE, SHAPE), tol32=1e-4,
          tags=("wrt:0",)),
    _nary("chi2.logpdf", fst.chi2.logpdf, sst.chi2.logpdf, ((0.1, 8.0), (1.0, 6.0)), tol32=1e-4),
    _nary("chi2.pdf", fst.chi2.pdf, sst.chi2.pdf, ((0.1, 8.0), (1.0, 6.0), (-0.5, 0.0), SCALE), tol32=1e-4),
    _nary("chi2.cdf", fst.chi2.cdf, sst.chi2.cdf, ((0.1, 8.0), (1.0, 6.0), (-0.5, 0.0), SCALE), tol32=1e-4,
          tags=("wrt:0,2,3",)),
    _nary("chi2.logcdf", fst.chi2.logcdf, sst.chi2.logcdf, ((0.1, 8.0), (1.0, 6.0)), tol32=1e-4, tags=("wrt:0",)),
    OpRecord("poisson.logpmf", fst.poisson.logpmf, _ref(sst.poisson.logpmf), _bcast(2), F, ((0, 8), (0.2, 6.0)),
             (I64, None), tol32=1e-4),
    OpRecord("poisson.logpmf_outside", fst.poisson.logpmf, _ref(sst.poisson.logpmf), _bcast(2), F,
             ((-3, 0), (0.2, 6.0)), (I64, None), tags=("no_grad",)),
    OpRecord("poisson.pmf", fst.poisson.pmf, _ref(sst.poisson.pmf), _bcast(2), F, ((0, 8), (0.2, 6.0)),
             (I64, None), tol32=1e-4),
    OpRecord("poisson.pmf_loc", fst.poisson.pmf, _ref(sst.poisson.pmf), _bcast(3), F, ((0, 8), (0.2, 6.0), (0, 3)),
             (I64, None, I64), tol32=1e-4),
    OpRecord("poisson.cdf", fst.poisson.cdf, _ref(sst.poisson.cdf), _bcast(2), F, ((-1, 8), (0.2, 6.0)),
             (I64, None), tol32=1e-4),
    OpRecord("poisson.logcdf", fst.poisson.logcdf, _ref(sst.poisson.logcdf), _bcast(2), F, ((0, 8), (0.2, 6.0)),
             (I64, None), tol32=1e-4),
    OpRecord("dirichlet.logpdf", lambda raw, alpha: fst.dirichlet.logpdf(_simplex(raw, fnp), alpha),
             _ref(lambda raw, alpha: _dirichlet_ref(sst.dirichlet.logpdf, raw, alpha, 0)),
             _dirichlet_shapes(), F, ((0.2, 2.0), (0.5, 4.0)), tol32=1e-4),
    OpRecord("dirichlet.pdf_k_minus_1", lambda raw, alpha: fst.dirichlet.pdf(_simplex(raw, fnp)[:-1], alpha),
             _ref(lambda raw, alpha: _dirichlet_ref(sst.dirichlet.pdf, raw, alpha, 1)),
             _dirichlet_shapes(), F, ((0.2, 2.0), (0.5, 4.0)), tol32=1e-4),
    OpRecord("multivariate_normal.logpdf", lambda x, mean, a: fst.multivariate_normal.logpdf(x, mean, _spd(a, fnp)),
             _ref(_mvn_ref), _mvn_shapes(), F, ((-2.0, 2.0), LOC, (-1.0, 1.0)), tol32=1e-4),
    OpRecord("multivariate_normal.pdf", lambda x, mean, a: fst.multivariate_normal.pdf(x, mean, _spd(a, fnp)),
             _ref(lambda x, mean, a: np.exp(_mvn_ref(x, mean, a))), _mvn_shapes(), F,
             ((-2.0, 2.0), LOC, (-1.0, 1.0)), tol32=1e-4),
)

SCIPY_RECORDS: tuple[OpRecord, ...] = SPECIAL_RECORDS + STATS_RECORDS
