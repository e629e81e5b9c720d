"""numpy's index-expression helpers: ``r_`` and ``c_`` (concatenation, on arrays and traced
values), ``mgrid`` and ``ogrid`` (concrete grids), ``s_`` and ``index_exp`` (numpy's own)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.numpy._creation import arange, linspace
from fungraph.numpy._shape import concatenate, reshape, transpose
from fungraph.numpy._util import asarray


def _ndmin(x: Any, ndmin: int, trans1d: int) -> Any:
    """``np.array(x, ndmin=ndmin)`` with numpy's placement of the original axes (``trans1d``)."""
    nd = x.ndim
    if nd >= ndmin:
        return x
    x = reshape(x, (1,) * (ndmin - nd) + x.shape)
    if trans1d == -1:
        return x
    k1, k2 = trans1d, ndmin - nd
    if k1 < 0:
        k1 += k2 + 1
    axes = list(range(ndmin))
    return transpose(x, axes[:k1] + axes[k2:] + axes[k1:k2])


def _directive(text: str) -> tuple[int, int, int]:
    if text in ("r", "c"):
        raise ValueError(f"r_/c_: the matrix directive {text!r} is not supported (fungraph has no matrix class)")
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise ValueError(f"r_/c_: unknown directive {text!r}; expected 'axis[,ndmin[,trans1d]]'") from None
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"r_/c_: directive {text!r} has more than three integers")
    axis, ndmin, trans1d = parts + [0, 1, -1][len(parts):]
    return axis, ndmin, trans1d


class _Concatenator:
    """``r_[...]``: slices become ranges (a complex step ``5j`` means that many points, as in
    ``linspace``), scalars and arrays are raised to ``ndmin`` dims, all joined along ``axis``."""

    def __init__(self, axis: int, ndmin: int, trans1d: int) -> None:
        self.defaults = (axis, ndmin, trans1d)

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.defaults
        parts = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                if i != 0:
                    raise ValueError("r_/c_: a string directive must come first")
                axis, ndmin, trans1d = _directive(item)
                continue
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, complex):
                    x = linspace(start, item.stop, int(abs(step)))
                else:
                    x = arange(start, item.stop, step)
                x = asarray(x)
                if ndmin > 1:
                    x = reshape(x, (1,) * (ndmin - 1) + x.shape)
                    if trans1d != -1:
                        perm = list(range(ndmin))
                        perm[-1], perm[trans1d] = perm[trans1d], perm[-1]
                        x = transpose(x, perm)
                parts.append(x)
                continue
            parts.append(_ndmin(asarray(item), max(ndmin, 1), trans1d))
        if not parts:
            return np.zeros(0)
        return concatenate(parts, axis=axis)

    def __len__(self) -> int:
        return 0


r_ = _Concatenator(0, 1, -1)
c_ = _Concatenator(-1, 2, 0)


def _grid_axis(item: slice) -> np.ndarray:
    """The points one slice of ``mgrid``/``ogrid`` names: ``arange``, or with a complex step
    ``5j`` that many points from start to stop inclusive (``linspace``)."""
    if not isinstance(item, slice):
        raise TypeError(f"mgrid/ogrid: expected slices such as 0:5 or 0:1:5j, got {item!r}")
    start = 0 if item.start is None else item.start
    step = 1 if item.step is None else item.step
    if isinstance(step, complex):
        return np.asarray(linspace(start, item.stop, int(abs(step))))
    return np.asarray(arange(start, item.stop, step))


class _Grid:
    """``mgrid[...]`` (``sparse=False``: the dense grid, stacked on a new first axis) and
    ``ogrid[...]`` (``sparse=True``: a list of open, broadcastable axes). Every axis takes the
    dtype the slices promote to, as in numpy and JAX; results are concrete numpy arrays."""

    def __init__(self, sparse: bool) -> None:
        self.sparse = sparse

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return _grid_axis(key)
        axes = [_grid_axis(item) for item in key]
        if not axes:
            return np.zeros(0, np.int64) if not self.sparse else []
        dtype = np.result_type(*axes)
        axes = [a.astype(dtype) for a in axes]
        n = len(axes)
        if self.sparse:
            return [a.reshape((1,) * i + (a.size,) + (1,) * (n - i - 1)) for i, a in enumerate(axes)]
        return np.stack(np.meshgrid(*axes, indexing="ij"))

    def __len__(self) -> int:
        return 0


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)
s_ = np.s_
index_exp = np.index_exp
