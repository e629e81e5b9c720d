"""``fungraph.scipy.cluster``: ``vq`` (vector quantization), as ``jax.scipy.cluster``."""

from fungraph.scipy.cluster import vq

__all__ = ["vq"]
