"""The multinomial distribution: counts ``x`` (last axis) of ``n`` draws with probabilities ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.scipy import special
from fungraph.scipy.stats._util import const, floats


def logpmf(x: Any, n: Any, p: Any) -> Any:
    """log n! + sum(x log p - log x!) over the last axis; -inf where the counts do not sum to n.

    ``x`` and ``n`` must be integers (a ``ValueError`` otherwise, as in JAX)."""
    (p,) = floats(p)
    x, n = fnp.asarray(x), fnp.asarray(n)
    if not (fnp.issubdtype(x.dtype, np.integer) and fnp.issubdtype(n.dtype, np.integer)):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    xf, nf = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = special.gammaln(nf + 1.0) + fnp.sum(special.xlogy(xf, p) - special.gammaln(xf + 1.0), axis=-1)
    return fnp.where(fnp.sum(xf) == nf, log_probs, const(-np.inf, log_probs))


def pmf(x: Any, n: Any, p: Any) -> Any:
    return fnp.exp(logpmf(x, n, p))
