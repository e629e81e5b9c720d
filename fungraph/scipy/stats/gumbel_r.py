"""The right-skewed Gumbel distribution (of maxima): cdf exp(-e^-z), z = (x - loc) / scale."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import nn
from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def _nan_unless(ok: Any, val: Any) -> Any:
    return fnp.where(ok, val, const(np.nan, val))


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """-(z + e^-z) - log scale; nan for scale <= 0."""
    x, loc, scale = floats(x, loc, scale)
    z = standardize(x, loc, scale)
    return _nan_unless(scale > 0, special.xlogy(-1.0, scale) - (z + fnp.exp(-z)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return _nan_unless(scale > 0, -fnp.exp(-standardize(x, loc, scale)))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logcdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_z = (loc - x) / scale
    return _nan_unless(scale > 0, 1.0 - fnp.exp(-fnp.exp(neg_z)))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    neg_z = (loc - x) / scale
    return _nan_unless(scale > 0, nn.log1mexp(fnp.exp(neg_z)))


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """loc - scale log(-log p); nan outside (0, 1)."""
    p, loc, scale = floats(p, loc, scale)
    quantile = loc - scale * fnp.log(special.xlogy(-1.0, p))
    return _nan_unless((p > 0) & (p < 1), quantile)
