"""Data type routines and type tests of ``fungraph.numpy``: promotion (``promote_types``,
``result_type``, ``can_cast``), machine limits and dtype predicates."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Tracer
from fungraph.numpy._util import asarray


def promote_types(a: Any, b: Any) -> np.dtype:
    """``jnp.promote_types``: JAX's promotion lattice (``int32`` with ``float32`` is float32),
    in the current dtype mode."""
    return dtypes.promote_types(*(t if t is int or t is float or t is complex else np.dtype(t) for t in (a, b)))


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    args = [a if isinstance(a, (Tracer, bool, int, float, complex)) else
            (np.zeros((), dtypes.canonicalize(a)) if _is_dtype_like(a) else asarray(a)) for a in arrays_and_dtypes]
    return dtypes.result_type(*args)


def _is_dtype_like(a: Any) -> bool:
    if isinstance(a, (np.dtype, type, str)):
        try:
            np.dtype(a)
            return True
        except TypeError:
            return False
    return False


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    src = from_.dtype if hasattr(from_, "dtype") else from_
    return bool(np.can_cast(src, to, casting))


finfo = dtypes.finfo
iinfo = np.iinfo
dtype = np.dtype
issubdtype = dtypes.issubdtype
isdtype = np.isdtype


def iscomplexobj(x: Any) -> bool:
    return dtypes.is_complex(x.dtype if hasattr(x, "dtype") else asarray(x).dtype)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def isscalar(element: Any) -> bool:
    return np.isscalar(element)


iterable = np.iterable
