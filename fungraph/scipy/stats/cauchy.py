"""The Cauchy distribution with median ``loc`` and half-width ``scale``."""

from __future__ import annotations

import math
from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy.stats._util import floats, standardize


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    z = standardize(x, loc, scale)
    return -(fnp.log(math.pi * scale) + fnp.log1p(z * z))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return 0.5 + fnp.arctan(standardize(x, loc, scale)) / math.pi


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return fnp.log(cdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = floats(x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return fnp.tan(math.pi * q - math.pi / 2) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = floats(q, loc, scale)
    return fnp.tan(math.pi / 2 - math.pi * q) * scale + loc
