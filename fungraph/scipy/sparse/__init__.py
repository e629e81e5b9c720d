"""``fungraph.scipy.sparse``: the iterative solvers of ``jax.scipy.sparse.linalg``."""

from fungraph.scipy.sparse import linalg

__all__ = ["linalg"]
