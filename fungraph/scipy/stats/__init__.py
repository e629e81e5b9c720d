"""``fungraph.scipy.stats``: log-densities, densities, cdfs and quantiles of common distributions,
one module per distribution like ``jax.scipy.stats`` (``fungraph.scipy.stats.norm.logpdf(x, loc,
scale)``), and the descriptive statistics ``mode``, ``rankdata``, ``sem`` and the kernel density
estimate ``gaussian_kde`` that JAX provides.

Every function is a composition of ``fungraph.numpy`` and ``fungraph.scipy.special``, so it
differentiates, batches and compiles like any other code; derivatives with respect to shape
parameters that enter an incomplete beta function (the cdfs of t and beta) are not implemented
and raise ``NotImplementedError``. See docs/scipy.md.
"""

from fungraph.scipy.stats import (
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from fungraph.scipy.stats._descriptive import mode, rankdata, sem
from fungraph.scipy.stats._kde import gaussian_kde

__all__ = [
    "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gaussian_kde",
    "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode", "multinomial", "multivariate_normal",
    "nbinom", "norm", "pareto", "poisson", "rankdata", "sem", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy",
]
