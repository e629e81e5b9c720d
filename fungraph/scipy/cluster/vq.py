"""``fungraph.scipy.cluster.vq``: ``vq``, the nearest code of each observation, as JAX's."""

from __future__ import annotations

from typing import Any

from fungraph import numpy as jnp
from fungraph.numpy._util import promote

__all__ = ["vq"]


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """``jax.scipy.cluster.vq.vq``: (the index of the code in ``code_book`` (K, N) nearest to each
    row of ``obs`` (M, N) in Euclidean distance, that distance); 1-d inputs are length-1 vectors.
    ``check_finite`` is unused, as in JAX."""
    del check_finite
    x, book = (jnp.asarray(a) for a in promote(obs, code_book, to_inexact=True))
    if x.ndim != book.ndim:
        raise ValueError(f"vq: observation and code_book should have the same rank, got shapes "
                         f"{tuple(x.shape)} and {tuple(book.shape)}")
    if x.ndim == 1:
        x, book = x[:, None], book[:, None]
    if x.ndim != 2:
        raise ValueError(f"vq: ndim different than 1 or 2 are not supported, got shape {tuple(x.shape)}")
    dist = jnp.linalg.norm(x[:, None, :] - book[None, :, :], axis=-1)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=1)[:, 0]
