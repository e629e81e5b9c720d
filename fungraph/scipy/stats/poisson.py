"""The Poisson distribution with mean ``mu``, shifted by the integer ``loc``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """-inf where k - loc is negative or not an integer; differentiable in mu."""
    k, mu, loc = floats(k, mu, loc)
    k = fnp.subtract(k, loc)
    valid = fnp.logical_and(fnp.greater_equal(k, const(0, k)), fnp.equal(k, fnp.floor(k)))
    ks = fnp.where(valid, k, const(0, k))
    val = fnp.subtract(fnp.subtract(special.xlogy(ks, mu), mu), special.gammaln(fnp.add(ks, const(1, ks))))
    return fnp.where(valid, val, const(-np.inf, val))


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    return fnp.exp(logpmf(k, mu, loc))


def _tail(k: Any, mu: Any, loc: Any, upper: bool) -> Any:
    """P(K <= k) = Q(floor(k - loc) + 1, mu), or P(K > k) = P(floor(k - loc) + 1, mu) with
    ``upper``; below the support they are 0 and 1."""
    k, mu, loc = floats(k, mu, loc)
    k = fnp.floor(fnp.subtract(k, loc))
    nonneg = fnp.greater_equal(k, const(0, k))
    shape = fnp.add(fnp.where(nonneg, k, const(0, k)), const(1, k))
    tail = special.gammainc(shape, mu) if upper else special.gammaincc(shape, mu)
    return fnp.where(nonneg, tail, const(1 if upper else 0, mu))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """P(K <= k); differentiable in mu."""
    return _tail(k, mu, loc, upper=False)


def logcdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    return fnp.log(cdf(k, mu, loc))


def sf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """P(K > k); differentiable in mu."""
    return _tail(k, mu, loc, upper=True)


def _entropy_by_sum(mu: Any, terms: int, upper: Any) -> Any:
    """-sum p log p over k < min(terms, upper), for each entry of the flat ``mu``."""
    k = fnp.arange(terms, dtype=mu.dtype)[:, None]
    probs = fnp.where(k < upper[None, :], pmf(k, mu, 0), const(0, mu))
    return fnp.sum(special.entr(probs), axis=0)


def entropy(mu: Any, loc: Any = 0) -> Any:
    """The Shannon entropy (loc does not change it): a sum of the pmf below mu = 100 (35 or 250
    terms), 0.5 log(2 pi e mu) - 1 / (12 mu) above, as JAX."""
    mu, loc = floats(mu, loc)
    shape = fnp.broadcast_shapes(mu.shape, loc.shape)
    flat = fnp.ravel(mu)
    small = _entropy_by_sum(flat, 35, fnp.ceil(flat + 20.0))
    medium = _entropy_by_sum(flat, 250, fnp.ceil(flat + 10.0 * fnp.sqrt(flat) + 20.0))
    large = 0.5 * fnp.log(2 * np.pi * np.e * flat) - 1.0 / (12.0 * flat)
    result = fnp.where(flat == 0, fnp.zeros_like(flat),
                       fnp.where(flat < 10, small, fnp.where(flat < 100, medium, large)))
    return fnp.broadcast_to(fnp.reshape(result, mu.shape), shape)
