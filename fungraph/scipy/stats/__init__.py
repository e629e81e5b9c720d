"""``fungraph.scipy.stats``: log-densities, densities and cdfs of common distributions, one module
per distribution like ``jax.scipy.stats`` (``fungraph.scipy.stats.norm.logpdf(x, loc, scale)``).

Every function is a composition of ``fungraph.numpy`` and ``fungraph.scipy.special``, so it
differentiates, batches and compiles like any other code; derivatives with respect to shape
parameters that enter an incomplete gamma/beta function (the cdfs of t, gamma, beta, chi2 and
poisson) are not implemented and raise ``NotImplementedError``. See docs/scipy.md.
"""

from fungraph.scipy.stats import (
    bernoulli,
    beta,
    chi2,
    dirichlet,
    expon,
    gamma,
    laplace,
    logistic,
    multivariate_normal,
    norm,
    poisson,
    t,
    uniform,
)

__all__ = ["bernoulli", "beta", "chi2", "dirichlet", "expon", "gamma", "laplace", "logistic", "multivariate_normal",
           "norm", "poisson", "t", "uniform"]
