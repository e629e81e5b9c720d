"""Array manipulation in ``fungraph.numpy``: flips, rolls, tiling, stacking, splitting,
diagonals and triangles, ``block``/``unstack``/``trim_zeros``. Every traced function is a
composition of the linear shape primitives (slice, pad, rev, concatenate, reshape, broadcast,
take), so it is differentiable and batched."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ConcretizationError, ShapeError, Tracer, to_concrete_dtype_array, weak_array
from fungraph.numpy._shape import concatenate, moveaxis, stack
from fungraph.numpy._util import asarray, namespace, normalize_axes, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import shape as sh
from fungraph.primitives.indexing import take as take_prim


def _axis(axis: int, ndim: int, name: str) -> int:
    (ax,) = normalize_axes(axis, ndim, name)
    return ax


def _slice_axis(x: Any, axis: int, start: int, stop: int, step: int = 1) -> Any:
    lo = [0] * x.ndim
    hi = list(x.shape)
    st = [1] * x.ndim
    lo[axis], hi[axis], st[axis] = start, stop, step
    return sh.slice_(x, lo, hi, st)


# --- flips and rotations ---------------------------------------------------------------------


def flip(m: Any, axis: Any = None) -> Any:
    x = asarray(m)
    return sh.rev(x, normalize_axes(axis, x.ndim, "flip"))


def fliplr(m: Any) -> Any:
    x = asarray(m)
    if x.ndim < 2:
        raise ShapeError("fliplr: input must be at least 2-d")
    return sh.rev(x, (1,))


def flipud(m: Any) -> Any:
    x = asarray(m)
    if x.ndim < 1:
        raise ShapeError("flipud: input must be at least 1-d")
    return sh.rev(x, (0,))


def rot90(m: Any, k: int = 1, axes: Sequence[int] = (0, 1)) -> Any:
    x = asarray(m)
    a0, a1 = (_axis(a, x.ndim, "rot90") for a in axes)
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return sh.rev(x, (a0, a1))
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return sh.transpose(sh.rev(x, (a1,)), perm)
    return sh.rev(sh.transpose(x, perm), (a1,))


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    x = asarray(a)
    if axis is None:
        return sh.reshape(roll(sh.reshape(x, (x.size,)), shift, 0), x.shape)
    shifts = (shift,) * (len(axis) if isinstance(axis, (tuple, list)) else 1) if isinstance(shift, int) else shift
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) != len(axes):
        raise ValueError("roll: 'shift' and 'axis' should be scalars or 1D sequences of the same length")
    for s, ax in zip(shifts, axes):
        ax = _axis(ax, x.ndim, "roll")
        n = x.shape[ax]
        s = int(s) % n if n else 0
        if s:
            x = sh.concatenate([_slice_axis(x, ax, n - s, n), _slice_axis(x, ax, 0, n - s)], ax)
    return x


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    x = asarray(a)
    n = x.ndim
    ax = _axis(axis, n, "rollaxis")
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise ValueError(f"rollaxis: start {start} is out of bounds for rank {n}")
    if ax < start:
        start -= 1
    return moveaxis(x, ax, start) if ax != start else x


# --- tiling and repeating ------------------------------------------------------------------------


def tile(A: Any, reps: Any) -> Any:
    x = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    x = sh.reshape(x, shape)
    inter = tuple(d for pair in zip(reps, shape) for d in pair)
    dims = tuple(range(1, 2 * nd, 2))
    out = sh.broadcast_in_dim(x, inter, dims)
    return sh.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a: Any, repeats: Any, axis: int | None = None) -> Any:
    x = asarray(a)
    if isinstance(repeats, Tracer):
        raise TypeError("repeat: the number of repeats must be concrete (the output shape depends on it)")
    if axis is None:
        x = sh.reshape(x, (x.size,))
        axis = 0
    ax = _axis(axis, x.ndim, "repeat")
    reps = np.asarray(repeats)
    if reps.ndim == 0:
        r = int(reps)
        shape = x.shape[:ax + 1] + (r,) + x.shape[ax + 1:]
        dims = tuple(i if i <= ax else i + 1 for i in range(x.ndim))
        out = sh.broadcast_in_dim(x, shape, dims)
        return sh.reshape(out, x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1:])
    idx = np.repeat(np.arange(x.shape[ax], dtype=np.int64), reps)
    return take_prim(x, idx, ax)


# --- dimensions and stacking ------------------------------------------------------------------------


def _atleast(arys: Sequence[Any], n: int) -> Any:
    out = []
    for a in arys:
        x = asarray(a)
        if x.ndim < n:
            if n == 3 and x.ndim == 2:
                shape = x.shape + (1,)
            elif n == 3 and x.ndim == 1:
                shape = (1,) + x.shape + (1,)
            else:
                shape = (1,) * (n - x.ndim) + x.shape
            x = sh.reshape(x, shape)
        out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys: Any) -> Any:
    return _atleast(arys, 1)


def atleast_2d(*arys: Any) -> Any:
    return _atleast(arys, 2)


def atleast_3d(*arys: Any) -> Any:
    return _atleast(arys, 3)


def _as_list(tup: Any) -> list[Any]:
    if isinstance(tup, Tracer) or isinstance(tup, np.ndarray):
        return [tup[i] for i in range(tup.shape[0])]
    return list(tup)


def vstack(tup: Any, dtype: Any = None) -> Any:
    return concatenate([atleast_2d(a) for a in _as_list(tup)], axis=0, dtype=dtype)


row_stack = vstack


def hstack(tup: Any, dtype: Any = None) -> Any:
    arrs = [atleast_1d(a) for a in _as_list(tup)]
    return concatenate(arrs, axis=0 if arrs[0].ndim == 1 else 1, dtype=dtype)


def dstack(tup: Any, dtype: Any = None) -> Any:
    return concatenate([atleast_3d(a) for a in _as_list(tup)], axis=2, dtype=dtype)


def column_stack(tup: Any) -> Any:
    arrs = []
    for a in _as_list(tup):
        x = asarray(a)
        arrs.append(sh.reshape(x, (x.size, 1)) if x.ndim < 2 else x)
    return concatenate(arrs, axis=1)


def _split_points(n: int, indices_or_sections: Any, even: bool, name: str) -> list[int]:
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        if even and n % sections:
            raise ValueError(f"{name}: array split does not result in an equal division")
        base, extra = divmod(n, sections)
        sizes = [base + 1] * extra + [base] * (sections - extra)
        return list(np.cumsum([0] + sizes))
    pts = [int(i) for i in indices_or_sections]
    return [0] + pts + [n]


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    return _split(ary, indices_or_sections, axis, False, "array_split")


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    return _split(ary, indices_or_sections, axis, True, "split")


def _split(ary: Any, ios: Any, axis: int, even: bool, name: str) -> list[Any]:
    x = asarray(ary)
    ax = _axis(axis, x.ndim, name)
    n = x.shape[ax]
    pts = _split_points(n, ios, even, name)
    out = []
    for lo, hi in zip(pts[:-1], pts[1:]):
        lo_c = min(max(lo + n if lo < 0 else lo, 0), n)
        hi_c = min(max(hi + n if hi < 0 else hi, 0), n)
        out.append(_slice_axis(x, ax, lo_c, max(lo_c, hi_c)))
    return out


def hsplit(ary: Any, indices_or_sections: Any) -> list[Any]:
    x = asarray(ary)
    if x.ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(x, indices_or_sections, 1 if x.ndim > 1 else 0)


def vsplit(ary: Any, indices_or_sections: Any) -> list[Any]:
    x = asarray(ary)
    if x.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(x, indices_or_sections, 0)


def dsplit(ary: Any, indices_or_sections: Any) -> list[Any]:
    x = asarray(ary)
    if x.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(x, indices_or_sections, 2)


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    x, v = asarray(arr), asarray(values)
    if axis is None:
        return concatenate([sh.reshape(x, (x.size,)), sh.reshape(v, (v.size,))], axis=0)
    return concatenate([x, v], axis=axis)


def delete(arr: Any, obj: Any, axis: int | None = None) -> Any:
    x = asarray(arr)
    if axis is None:
        x = sh.reshape(x, (x.size,))
        axis = 0
    ax = _axis(axis, x.ndim, "delete")
    keep = np.delete(np.arange(x.shape[ax], dtype=np.int64), obj)
    return take_prim(x, keep, ax)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """Insert ``values`` before static indices ``obj``: a gather from the concatenation."""
    x = asarray(arr)
    if axis is None:
        x = sh.reshape(x, (x.size,))
        axis = 0
    ax = _axis(axis, x.ndim, "insert")
    n = x.shape[ax]
    marker = np.insert(np.arange(n, dtype=np.int64), obj, -1)
    k = int((marker < 0).sum())
    (x, v) = promote(x, values)
    vshape = x.shape[:ax] + (k,) + x.shape[ax + 1:]
    v = sh.broadcast_to(asarray(v), vshape)
    both = sh.concatenate([x, v], ax)
    idx = marker.copy()
    idx[marker < 0] = n + np.arange(k)
    return take_prim(both, idx, ax)


def resize(a: Any, new_shape: Any) -> Any:
    x = asarray(a)
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(int(d) for d in new_shape)
    total = int(np.prod(shape, dtype=np.int64))
    flat = sh.reshape(x, (x.size,))
    if x.size == 0 or total == 0:
        return np.zeros(shape, x.dtype)
    return sh.reshape(take_prim(flat, np.arange(total, dtype=np.int64) % x.size, 0), shape)


# --- diagonals and triangles -------------------------------------------------------------------------


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The diagonal as a strided slice of the two axes flattened together (so it is linear)."""
    x = asarray(a)
    a1, a2 = _axis(axis1, x.ndim, "diagonal"), _axis(axis2, x.ndim, "diagonal")
    if a1 == a2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    rest = [i for i in range(x.ndim) if i not in (a1, a2)]
    moved = sh.transpose(x, rest + [a1, a2])
    n, m = x.shape[a1], x.shape[a2]
    lead = tuple(x.shape[i] for i in rest)
    if offset >= 0:
        count = max(0, min(n, m - offset))
        start = offset
    else:
        count = max(0, min(n + offset, m))
        start = -offset * m
    flat = sh.reshape(moved, lead + (n * m,))
    if count == 0:
        return _slice_axis(flat, len(lead), 0, 0)
    return _slice_axis(flat, len(lead), start, start + (count - 1) * (m + 1) + 1, m + 1)


def _zero_like(x: Any) -> np.ndarray:
    """A zero of ``x``'s dtype, weakly typed where ``x`` is (JAX's zero fill keeps a weak array weak)."""
    zero = np.asarray(0, x.dtype)
    return weak_array(zero) if dtypes.is_weak(x) else zero


def diag(v: Any, k: int = 0) -> Any:
    x = asarray(v)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError("diag: input must be 1- or 2-d")
    n = x.shape[0] + abs(k)
    # place the values with interior padding: in the flat (n, n) matrix they sit (n + 1) apart
    start = k if k >= 0 else -k * n
    used = start + (x.shape[0] - 1) * (n + 1) + 1 if x.shape[0] else start
    flat = sh.pad(x, _zero_like(x), [(start, n * n - used, n)])
    return sh.reshape(flat, (n, n))


def diagflat(v: Any, k: int = 0) -> Any:
    x = asarray(v)
    return diag(sh.reshape(x, (x.size,)), k)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None) -> Any:
    from fungraph.numpy._reductions import sum as sum_

    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def tril(m: Any, k: int = 0) -> Any:
    x = asarray(m)
    if x.ndim < 2:
        x = sh.broadcast_to(x, (x.shape[-1] if x.ndim else 1,) * 2)
    mask = np.tri(x.shape[-2], x.shape[-1], k, dtype=bool)
    return ew.select(mask, x, _zero_like(x))


def triu(m: Any, k: int = 0) -> Any:
    x = asarray(m)
    if x.ndim < 2:
        x = sh.broadcast_to(x, (x.shape[-1] if x.ndim else 1,) * 2)
    mask = ~np.tri(x.shape[-2], x.shape[-1], k - 1, dtype=bool)
    return ew.select(mask, x, _zero_like(x))


# --- products -----------------------------------------------------------------------------------------


def kron(a: Any, b: Any) -> Any:
    x, y = (asarray(t) for t in promote(a, b))
    nd = max(x.ndim, y.ndim)
    xs = (1,) * (nd - x.ndim) + x.shape
    ys = (1,) * (nd - y.ndim) + y.shape
    xr = sh.reshape(x, tuple(d for s in xs for d in (s, 1)))
    yr = sh.reshape(y, tuple(d for s in ys for d in (1, s)))
    return sh.reshape(ew.mul(xr, yr), tuple(p * q for p, q in zip(xs, ys)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = (ew.strong(asarray(t)) for t in promote(a, b))  # strongly typed, as JAX's
    x = moveaxis(x, axisa, -1)
    y = moveaxis(y, axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ValueError("incompatible dimensions for cross product (dimension must be 2 or 3)")

    def comp(v: Any, i: int) -> Any:
        if i >= v.shape[-1]:
            return np.zeros(v.shape[:-1], v.dtype)
        return sh.reshape(_slice_axis(v, v.ndim - 1, i, i + 1), v.shape[:-1])

    x0, x1, x2 = (comp(x, i) for i in range(3))
    y0, y1, y2 = (comp(y, i) for i in range(3))
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return ew.sub(ew.mul(x0, y1), ew.mul(x1, y0))
    c0 = ew.sub(ew.mul(x1, y2), ew.mul(x2, y1))
    c1 = ew.sub(ew.mul(x2, y0), ew.mul(x0, y2))
    c2 = ew.sub(ew.mul(x0, y1), ew.mul(x1, y0))
    out = stack([c0, c1, c2], axis=-1)
    return moveaxis(out, -1, axisc)


# --- selection and differences ------------------------------------------------------------------------


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    choices = promote(*choicelist, default)
    out = asarray(choices[-1])
    for cond, choice in zip(reversed(condlist), reversed(choices[:-1])):
        c = asarray(cond)
        if c.dtype != np.bool_:
            raise TypeError(f"invalid entry in condlist: should be boolean ndarray, got {c.dtype}")
        out = ew.select(c, choice, out)
    return out


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    x = asarray(a)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    ax = _axis(axis, x.ndim, "diff")
    parts = [x] if prepend is None else [_broadcast_edge(prepend, x, ax), x]
    if append is not None:
        parts.append(_broadcast_edge(append, x, ax))
    if len(parts) > 1:
        x = concatenate(parts, axis=ax)
    for _ in range(n):
        m = x.shape[ax]
        hi, lo = _slice_axis(x, ax, 1, m), _slice_axis(x, ax, 0, max(m - 1, 0))
        x = ew.ne_p.bind(hi, lo) if x.dtype == np.bool_ else ew.sub(hi, lo)
    return x


def _broadcast_edge(v: Any, x: Any, ax: int) -> Any:
    v = asarray(v)
    if v.ndim == 0:
        shape = x.shape[:ax] + (1,) + x.shape[ax + 1:]
        return sh.broadcast_to(v, shape)
    return v


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    x = asarray(ary)
    d = diff(sh.reshape(x, (x.size,)))
    parts = [d]
    for t, front in ((to_begin, True), (to_end, False)):
        if t is not None:
            t = ew.convert(asarray(t), d.dtype)
            t = sh.reshape(t, (t.size,))
            parts = [t] + parts if front else parts + [t]
    return concatenate(parts, axis=0) if len(parts) > 1 else d


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """Central differences inside, one-sided at the edges, as JAX's: the spacing along each axis
    is a scalar or the 1-d coordinates of the samples (one for all axes, or one per axis); several
    axes give a list. ``edge_order=2`` (second-order edges, uniform spacing only) goes beyond JAX."""
    x, *spacing = promote(asarray(f), *varargs, to_inexact=True)
    axes = normalize_axes(axis, x.ndim, "gradient")
    if not axes:
        return []
    if builtins.min(x.shape[ax] for ax in axes) < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, "
                         f"at least {edge_order + 1} elements are required.")
    if len(spacing) == 0:
        spacing = [np.asarray(1, x.dtype)] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    outs = [_gradient_axis(x, ax, h, edge_order) for ax, h in zip(axes, spacing)]
    return outs[0] if len(outs) == 1 else outs


def _gradient_axis(x: Any, ax: int, h: Any, edge_order: int) -> Any:
    n = x.shape[ax]

    def s(lo: int, hi: int) -> Any:
        return _slice_axis(x, ax, lo, hi)

    if np.ndim(h) == 1:
        return _gradient_at_coordinates(x, ax, h, edge_order)
    if np.ndim(h) != 0:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    inner = ew.div(ew.sub(s(2, n), s(0, n - 2)), ew.mul(np.asarray(2, x.dtype), h))
    if edge_order == 1:
        first = ew.div(ew.sub(s(1, 2), s(0, 1)), h)
        last = ew.div(ew.sub(s(n - 1, n), s(n - 2, n - 1)), h)
    else:
        c = [np.asarray(v, x.dtype) for v in (-1.5, 2.0, -0.5)]
        first = ew.div(ew.add(ew.add(ew.mul(c[0], s(0, 1)), ew.mul(c[1], s(1, 2))), ew.mul(c[2], s(2, 3))), h)
        last = ew.div(ew.add(ew.add(ew.mul(ew.neg(c[0]), s(n - 1, n)), ew.mul(ew.neg(c[1]), s(n - 2, n - 1))),
                             ew.mul(ew.neg(c[2]), s(n - 3, n - 2))), h)
    return sh.concatenate([first, inner, last], ax)


def _gradient_at_coordinates(x: Any, ax: int, coords: Any, edge_order: int) -> Any:
    """The gradient along ``ax`` of samples taken at the 1-d ``coords``: the second-order
    three-point formula of unevenly spaced points inside, one-sided differences at the edges."""
    n = x.shape[ax]
    if coords.shape[0] != n:
        raise ValueError("Spacing arrays must have the same length as the dimension along which the "
                         f"gradient is calculated: {coords.shape[0]} coordinates for axis {ax} of shape {x.shape}.")
    if edge_order != 1:
        raise NotImplementedError("gradient: edge_order=2 takes uniform (scalar) spacing only")
    shape = [1] * x.ndim
    shape[ax] = n
    c = sh.reshape(coords, tuple(shape))

    def s(v: Any, lo: int, hi: int) -> Any:
        return _slice_axis(v, ax, lo, hi)

    dx1 = ew.sub(s(c, 1, n - 1), s(c, 0, n - 2))
    dx2 = ew.sub(s(c, 2, n), s(c, 1, n - 1))
    a = ew.div(ew.neg(dx2), ew.mul(dx1, ew.add(dx1, dx2)))
    b = ew.div(ew.sub(dx2, dx1), ew.mul(dx1, dx2))
    d = ew.div(dx1, ew.mul(dx2, ew.add(dx1, dx2)))
    inner = ew.add(ew.add(ew.mul(a, s(x, 0, n - 2)), ew.mul(b, s(x, 1, n - 1))), ew.mul(d, s(x, 2, n)))
    first = ew.div(ew.sub(s(x, 1, 2), s(x, 0, 1)), ew.sub(s(c, 1, 2), s(c, 0, 1)))
    last = ew.div(ew.sub(s(x, n - 1, n), s(x, n - 2, n - 1)), ew.sub(s(c, n - 1, n), s(c, n - 2, n - 1)))
    return sh.concatenate([first, inner, last], ax)


def meshgrid(*xi: Any, indexing: str = "xy", sparse: bool = False, copy: bool = True) -> list[Any]:
    xs = [sh.reshape(asarray(x), (asarray(x).size,)) for x in xi]
    nd = len(xs)
    out = []
    for i, x in enumerate(xs):
        shape = [1] * nd
        shape[i] = x.shape[0]
        if indexing == "xy" and nd > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        out.append(sh.reshape(x, tuple(shape)))
    if sparse:
        return out
    full = tuple(np.broadcast_shapes(*(o.shape for o in out)))
    return [sh.broadcast_to(o, full) for o in out]


# --- joining, splitting and trimming --------------------------------------------------------------


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, as a tuple."""
    fnp = namespace()
    a = asarray(x)
    if a.ndim == 0:
        raise ValueError("unstack: x must have at least one dimension")
    return tuple(fnp.moveaxis(a, axis, 0)[i] for i in range(a.shape[axis]))


def block(arrays: Any) -> Any:
    """Assemble an array from nested lists of blocks: the innermost lists join along the last
    axis, the next level along the one before it, and so on."""
    fnp = namespace()

    def depth(x: Any) -> int:
        return 1 + depth(x[0]) if isinstance(x, list) and x else 0

    levels = depth(arrays)
    if isinstance(arrays, tuple):
        raise TypeError("block: arrays must be nested lists (tuples are not accepted, as in numpy)")

    def build(x: Any, level: int) -> Any:
        if not isinstance(x, list):
            return asarray(x)
        if not x:
            raise ValueError("block: lists cannot be empty")
        parts = [build(p, level + 1) for p in x]
        ndim = max(levels, *(p.ndim for p in parts))
        parts = [fnp.reshape(p, (1,) * (ndim - p.ndim) + tuple(p.shape)) for p in parts]
        return fnp.concatenate(parts, axis=level - levels)

    return build(arrays, 0)


def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None) -> np.ndarray:
    """``filt`` with its leading (``'f'``) and/or trailing (``'b'``) zeros removed along each axis
    in ``axis`` (all by default; a slice along an axis is kept if any of it is nonzero). Eager
    only, as in JAX: the result's shape depends on the values."""
    if isinstance(filt, Tracer):
        raise ConcretizationError("trim_zeros needs a concrete array: its result's shape depends on the values")
    x = to_concrete_dtype_array(filt)
    trim = trim.lower()
    axes = range(x.ndim) if axis is None else [axis] if np.ndim(axis) == 0 else list(axis)
    axes = {int(a) % builtins.max(x.ndim, 1) for a in axes}
    index = []
    for ax in range(x.ndim):
        if ax not in axes:
            index.append(slice(None))
            continue
        hit = np.flatnonzero(np.any(x != 0, axis=tuple(i for i in range(x.ndim) if i != ax)))
        if hit.size == 0:
            index.append(slice(0, 0))
            continue
        start = int(hit[0]) if "f" in trim else None
        stop = int(hit[-1]) + 1 if "b" in trim else None
        index.append(slice(start, stop))
    return x[tuple(index)]
