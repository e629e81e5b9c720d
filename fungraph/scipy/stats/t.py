"""Student's t distribution with ``df`` degrees of freedom, shifted by ``loc`` and scaled by ``scale``."""

from __future__ import annotations

import math
from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats, standardize


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = floats(x, df, loc, scale)
    z = standardize(x, loc, scale)
    half_df1 = fnp.multiply(const(0.5, df), fnp.add(df, const(1, df)))
    norm = fnp.subtract(special.gammaln(half_df1), special.gammaln(fnp.multiply(const(0.5, df), df)))
    norm = fnp.subtract(norm, fnp.multiply(const(0.5, df), fnp.log(fnp.multiply(df, const(math.pi, df)))))
    kernel = fnp.multiply(half_df1, fnp.log1p(fnp.divide(fnp.square(z), df)))
    return fnp.subtract(fnp.subtract(norm, kernel), fnp.log(scale))


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, df, loc, scale))


def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Differentiable in x, loc and scale; not in df."""
    x, df, loc, scale = floats(x, df, loc, scale)
    return special.stdtr(df, standardize(x, loc, scale))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = floats(x, df, loc, scale)
    return special.stdtr(df, fnp.negative(standardize(x, loc, scale)))
