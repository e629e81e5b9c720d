"""``gaussian_kde``: kernel density estimation with Gaussian kernels, as ``jax.scipy.stats``'s
(an immutable pytree, so an estimate can be passed through ``jit``, ``grad`` and ``vmap``).

The bandwidth is Scott's or Silverman's factor, a scalar, or a callable of the estimate; the
kernel covariance is the weighted data covariance times the factor squared. Densities are sums
(or, for ``logpdf``, log-sum-exps) of Gaussians in coordinates whitened by the Cholesky factor
of the inverse covariance."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph import random
from fungraph.api import vmap
from fungraph.numpy._util import promote
from fungraph.scipy import linalg, special
from fungraph.tree_util import register_pytree_node_class

__all__ = ["gaussian_kde"]


def _weighted_covariance(dataset: Any, weights: Any) -> Any:
    """The unbiased covariance of the rows of ``dataset`` (d, n) with normalised weights ``weights``
    (numpy's ``cov(aweights=weights)``)."""
    mean = fnp.sum(dataset * weights, axis=1, keepdims=True)
    centred = dataset - mean
    return (centred * weights) @ centred.T / (1.0 - fnp.sum(weights * weights))


def _check_real(name: str, x: Any) -> None:
    if np.issubdtype(fnp.asarray(x).dtype, np.complexfloating):
        raise NotImplementedError(f"gaussian_kde does not support complex {name}")


@register_pytree_node_class
class gaussian_kde:  # noqa: N801 - SciPy's name
    """A Gaussian kernel density estimate of ``dataset`` ((n,) or (d, n)), with optional
    ``weights`` (n,) and ``bw_method`` "scott" (default), "silverman", a scalar or a callable."""

    __slots__ = ("covariance", "dataset", "inv_cov", "neff", "weights")

    def __init__(self, dataset: Any, bw_method: None | str | Any | Callable[[Any], Any] = None,
                 weights: Any = None) -> None:
        _check_real("data", dataset)
        data = fnp.atleast_2d(fnp.asarray(dataset))
        if not data.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = data.shape
        if weights is not None:
            data, w = (fnp.asarray(v) for v in promote(data, weights, to_inexact=True))
            w = fnp.atleast_1d(w)
            w = w / fnp.sum(w)
            if w.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if w.shape[0] != n:
                raise ValueError("`weights` input should be of length n")
        else:
            (data,) = (fnp.asarray(v) for v in promote(data, to_inexact=True))
            w = fnp.full(n, 1.0 / n, dtype=data.dtype)
        self._set("dataset", data)
        self._set("weights", w)
        neff = self._set("neff", 1 / fnp.sum(w ** 2))
        factor = self._factor("scott" if bw_method is None else bw_method, neff, d)
        data_cov = fnp.atleast_2d(_weighted_covariance(data, w))
        self._set("covariance", data_cov * factor ** 2)
        self._set("inv_cov", fnp.linalg.inv(data_cov) / factor ** 2)

    def _factor(self, bw_method: Any, neff: Any, d: int) -> Any:
        if isinstance(bw_method, str) and bw_method == "scott":
            return fnp.power(neff, -1.0 / (d + 4))
        if isinstance(bw_method, str) and bw_method == "silverman":
            return fnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        if not isinstance(bw_method, str) and fnp.isscalar(bw_method):
            return bw_method
        if callable(bw_method):
            return bw_method(self)
        raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")

    def _set(self, name: str, value: Any) -> Any:
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"gaussian_kde is immutable: cannot assign to {name!r}")

    def tree_flatten(self) -> tuple[tuple[Any, ...], None]:
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data: None, children: Any) -> gaussian_kde:
        kde = cls.__new__(cls)
        for name, value in zip(("neff", "dataset", "weights", "covariance", "inv_cov"), children):
            kde._set(name, value)
        return kde

    @property
    def d(self) -> int:
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        return self.dataset.shape[1]

    def evaluate(self, points: Any) -> Any:
        """The estimated density at ``points`` ((d, m), or (m,) for d == 1, or (d,) for one point)."""
        return _kernel_sum(False, self.dataset.T, self.weights[:, None], self._points(points).T, self.inv_cov)[:, 0]

    __call__ = evaluate

    def pdf(self, x: Any) -> Any:
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Any:
        """The log of the estimated density, by log-sum-exp over the kernels."""
        return _kernel_sum(True, self.dataset.T, self.weights[:, None], self._points(x).T, self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean: Any, cov: Any) -> Any:
        """The integral of the density times the Gaussian N(mean, cov)."""
        mean = fnp.atleast_1d(fnp.squeeze(fnp.asarray(mean)))
        cov = fnp.atleast_2d(fnp.asarray(cov))
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol = linalg.cho_factor(self.covariance + cov)
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * fnp.prod(fnp.diag(chol[0])))
        return _convolve(chol, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The probability mass of a one-dimensional density between ``low`` and ``high`` (scalars)."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = fnp.squeeze(fnp.sqrt(self.covariance))
        lo = fnp.squeeze((low - self.dataset) / sigma)
        hi = fnp.squeeze((high - self.dataset) / sigma)
        return fnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other: gaussian_kde) -> Any:
        """The integral of the product of this density and ``other``'s."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol = linalg.cho_factor(self.covariance + other.covariance)
        norm = 1.0 / (math.sqrt(2 * math.pi) ** self.d * fnp.prod(fnp.diag(chol[0])))
        small, large = (self, other) if self.n < other.n else (other, self)
        per_point = vmap(lambda m: _convolve(chol, norm, large.dataset, large.weights, m), in_axes=1)(small.dataset)
        return fnp.sum(per_point * small.weights)

    def resample(self, key: Any, shape: tuple[int, ...] = ()) -> Any:
        """Draws from the density, shape ``(d,) + shape``: a data point chosen by weight plus a
        kernel-covariance normal, with JAX's keys (split into choice and noise)."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, fnp.zeros(self.d, self.covariance.dtype), self.covariance,
                                           shape=shape, dtype=self.dataset.dtype).T
        return self.dataset[:, index] + noise

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Any:
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: Any = None) -> None:
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _points(self, points: Any) -> Any:
        _check_real("coordinates", points)
        pts = fnp.atleast_2d(fnp.asarray(points))
        d, m = pts.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return fnp.reshape(pts, (self.d, 1))
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return pts


def _convolve(chol: tuple[Any, bool], norm: Any, target: Any, weights: Any, mean: Any) -> Any:
    diff = target - mean[:, None]
    alpha = linalg.cho_solve(chol, diff)
    return norm * fnp.sum(fnp.exp(-0.5 * fnp.sum(diff * alpha, axis=0)) * weights)


def _kernel_sum(in_log: bool, points: Any, values: Any, xi: Any, precision: Any) -> Any:
    """For each row of ``xi``: sum_j values_j N(xi; points_j, precision^-1) (its log with ``in_log``)."""
    points, values, xi, precision = (fnp.asarray(v) for v in promote(points, values, xi, precision,
                                                                        to_inexact=True))
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    whitening = linalg.cholesky(precision, lower=True)
    points, xi = points @ whitening, xi @ whitening
    log_norm = fnp.sum(fnp.log(fnp.diag(whitening))) - 0.5 * d * math.log(2 * math.pi)

    def kernel(x_test: Any, x_train: Any, y_train: Any) -> Any:
        arg = log_norm - 0.5 * fnp.sum(fnp.square(x_train - x_test))
        return fnp.log(y_train) + arg if in_log else y_train * fnp.exp(arg)

    reduce = special.logsumexp if in_log else fnp.sum
    return vmap(lambda x: reduce(vmap(kernel, in_axes=(None, 0, 0))(x, points, values), axis=0))(xi)
