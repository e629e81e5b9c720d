"""Argument handling shared by the distributions: promotion and standardisation."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import numpy as fnp
from fungraph.numpy._util import promote


def floats(*args: Any) -> list[Any]:
    """The arguments promoted to one floating dtype (integers become float64, scalars stay weak)."""
    return promote(*args, to_inexact=True)


def const(value: float, like: Any) -> np.ndarray:
    return np.asarray(value, dtype=like.dtype)


def standardize(x: Any, loc: Any, scale: Any) -> Any:
    """(x - loc) / scale."""
    return fnp.divide(fnp.subtract(x, loc), scale)
