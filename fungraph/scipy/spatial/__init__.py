"""``fungraph.scipy.spatial``: ``transform`` (``Rotation``, ``Slerp``), as ``jax.scipy.spatial``."""

from fungraph.scipy.spatial import transform

__all__ = ["transform"]
