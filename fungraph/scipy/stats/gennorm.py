"""The generalised normal distribution with shape ``beta`` (2: normal with variance 1/2, 1: Laplace)."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import floats


def logpdf(x: Any, beta: Any) -> Any:
    """log(beta / 2) - gammaln(1 / beta) - |x|^beta."""
    x, beta = floats(x, beta)
    return fnp.log(0.5 * beta) - special.gammaln(1.0 / beta) - fnp.power(fnp.abs(x), beta)


def pdf(x: Any, beta: Any) -> Any:
    return fnp.exp(logpdf(x, beta))


def cdf(x: Any, beta: Any) -> Any:
    """(1 + sign(x) P(1 / beta, |x|^beta)) / 2."""
    x, beta = floats(x, beta)
    return 0.5 * (1.0 + fnp.sign(x) * special.gammainc(1.0 / beta, fnp.power(fnp.abs(x), beta)))
