"""``jax.lax``'s array operations for :mod:`fungraph.lax`: elementwise functions that refuse
mixed dtypes instead of promoting, explicit-shape ops (``broadcast_in_dim``, ``slice``,
``pad`` with interior padding), dynamic slices and updates (start indices clamped so the
window fits, as in JAX), reductions over named axes, cumulative and associative scans,
``sort``/``top_k``, ``iota``/``full``, ``map``, and XLA's ``gather``/``scatter`` (flat window
positions, one ``take`` or ``scatter_add``). Each is a thin composition of fungraph's
primitives, so every transformation and backend already handles it."""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.core import ShapeError
from fungraph.ir import aval_of
from fungraph.numpy._util import asarray, cast, is_weak


def _special() -> Any:
    """``fungraph.scipy.special``, imported on first use as ``fungraph.scipy`` intends."""
    from fungraph.scipy import special

    return special


# --- elementwise: equal dtypes, Python scalars weak -----------------------------------------


def _same_dtype(name: str, *xs: Any) -> list[Any]:
    """The operands at one dtype: arrays must already agree (lax does not promote); Python
    scalars take the arrays' dtype."""
    arrays = [asarray(x) for x in xs if not is_weak(x)]
    kinds = {aval_of(a).dtype for a in arrays}
    if len(kinds) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(str(aval_of(a)) for a in arrays)}")
    dt = kinds.pop() if kinds else dtypes.result_type(*xs)
    return [np.asarray(x, dt) if is_weak(x) else asarray(x) for x in xs]


def _unary(name: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def op(x: Any) -> Any:
        (x,) = _same_dtype(name, x)
        return fn(x)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise, keeping the operand's dtype."
    return op


#: numpy names of the ordered comparisons, for the error that points complex operands to them.
_NUMPY_NAME = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}


def _binary(name: str, fn: Callable[[Any, Any], Any], ordered: bool = False) -> Callable[[Any, Any], Any]:
    def op(x: Any, y: Any) -> Any:
        xs = _same_dtype(name, x, y)
        if ordered and np.issubdtype(aval_of(xs[0]).dtype, np.complexfloating):
            raise TypeError(f"lax.{name} does not accept complex operands ({aval_of(xs[0])}): complex numbers "
                            "have no order; compare their real parts or use fungraph.numpy's lexicographic "
                            f"{_NUMPY_NAME[name]}")
        return fn(*xs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: elementwise over operands of one dtype (no promotion)."
    return op


def _div(x: Any, y: Any) -> Any:
    """Integers round toward zero (C division); floats divide."""
    if not dtypes.is_int(aval_of(x).dtype):
        return fnp.divide(x, y)
    q = fnp.floor_divide(x, y)
    inexact = fnp.not_equal(fnp.multiply(q, y), x)
    return fnp.where(inexact & (fnp.less(x, 0) != fnp.less(y, 0)), q + 1, q)


def _keep(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its result cast back to the first operand's dtype (numpy widens ints)."""
    return lambda x, *rest: cast(fn(x, *rest), aval_of(asarray(x)).dtype)


add = _binary("add", lambda x, y: fnp.add(x, y))
sub = _binary("sub", lambda x, y: fnp.subtract(x, y))
mul = _binary("mul", lambda x, y: fnp.multiply(x, y))
div = _binary("div", _div)
rem = _binary("rem", lambda x, y: fnp.fmod(x, y))
max = _binary("max", lambda x, y: fnp.maximum(x, y))  # noqa: A001 - lax's name
min = _binary("min", lambda x, y: fnp.minimum(x, y))  # noqa: A001 - lax's name
atan2 = _binary("atan2", lambda x, y: fnp.arctan2(x, y))
eq = _binary("eq", lambda x, y: fnp.equal(x, y))
ne = _binary("ne", lambda x, y: fnp.not_equal(x, y))
lt = _binary("lt", lambda x, y: fnp.less(x, y), ordered=True)
le = _binary("le", lambda x, y: fnp.less_equal(x, y), ordered=True)
gt = _binary("gt", lambda x, y: fnp.greater(x, y), ordered=True)
ge = _binary("ge", lambda x, y: fnp.greater_equal(x, y), ordered=True)
bitwise_and = _binary("bitwise_and", lambda x, y: fnp.bitwise_and(x, y))
bitwise_or = _binary("bitwise_or", lambda x, y: fnp.bitwise_or(x, y))
bitwise_xor = _binary("bitwise_xor", lambda x, y: fnp.bitwise_xor(x, y))

neg = _unary("neg", lambda x: fnp.negative(x))
abs = _unary("abs", lambda x: fnp.abs(x))  # noqa: A001 - lax's name
sign = _unary("sign", lambda x: fnp.sign(x))
floor = _unary("floor", lambda x: fnp.floor(x))
ceil = _unary("ceil", lambda x: fnp.ceil(x))
exp = _unary("exp", lambda x: fnp.exp(x))
exp2 = _unary("exp2", lambda x: fnp.exp2(x))
log = _unary("log", lambda x: fnp.log(x))
log1p = _unary("log1p", lambda x: fnp.log1p(x))
expm1 = _unary("expm1", lambda x: fnp.expm1(x))
sin = _unary("sin", lambda x: fnp.sin(x))
cos = _unary("cos", lambda x: fnp.cos(x))
tan = _unary("tan", lambda x: fnp.tan(x))
asin = _unary("asin", lambda x: fnp.arcsin(x))
acos = _unary("acos", lambda x: fnp.arccos(x))
atan = _unary("atan", lambda x: fnp.arctan(x))
sinh = _unary("sinh", lambda x: fnp.sinh(x))
cosh = _unary("cosh", lambda x: fnp.cosh(x))
tanh = _unary("tanh", lambda x: fnp.tanh(x))
asinh = _unary("asinh", lambda x: fnp.arcsinh(x))
acosh = _unary("acosh", lambda x: fnp.arccosh(x))
atanh = _unary("atanh", lambda x: fnp.arctanh(x))
sqrt = _unary("sqrt", lambda x: fnp.sqrt(x))
rsqrt = _unary("rsqrt", lambda x: 1.0 / fnp.sqrt(x))
cbrt = _unary("cbrt", lambda x: fnp.cbrt(x))
square = _unary("square", lambda x: x * x)
logistic = _unary("logistic", lambda x: _special().expit(x))
erf = _unary("erf", lambda x: _special().erf(x))
erfc = _unary("erfc", lambda x: _special().erfc(x))
erf_inv = _unary("erf_inv", lambda x: _special().erfinv(x))
lgamma = _unary("lgamma", lambda x: _special().gammaln(x))
digamma = _unary("digamma", lambda x: _special().digamma(x))
is_finite = _unary("is_finite", lambda x: fnp.isfinite(x))
bitwise_not = _unary("bitwise_not", lambda x: fnp.bitwise_not(x))


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - lax's name
    """``x ** y`` for a float ``x`` and a float (same dtype) or integer ``y``."""
    x = asarray(x)
    y = np.asarray(y) if is_weak(y) else asarray(y)
    if not dtypes.is_int(aval_of(y).dtype):
        x, y = _same_dtype("pow", x, y)
    return cast(fnp.power(x, y), aval_of(x).dtype)


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a Python integer ``y`` (negative only for inexact ``x``)."""
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"lax.integer_pow needs a Python integer exponent, got {y!r}")
    x = asarray(x)
    if y < 0 and dtypes.is_int(aval_of(x).dtype):
        raise TypeError(f"lax.integer_pow: a negative exponent {y} needs an inexact operand, got {aval_of(x)}")
    return cast(fnp.power(x, int(y)), aval_of(x).dtype)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001 - lax's name
    """Round to integral values: halves away from zero (``rounding_method=0``, lax's default)
    or to even (``1``)."""
    x = asarray(x)
    if int(rounding_method) == 1:
        return fnp.rint(x)
    r = fnp.trunc(x)
    return fnp.where(fnp.abs(x - r) >= 0.5, r + fnp.sign(x), r)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` holds, else ``on_false``: one shape, one dtype, a bool ``pred``
    of that shape or a scalar."""
    p = asarray(pred)
    t, f = _same_dtype("select", on_true, on_false)
    if aval_of(p).dtype != dtypes.bool_:
        raise TypeError(f"lax.select needs a bool predicate, got {aval_of(p)}")
    if aval_of(t).shape != aval_of(f).shape or aval_of(p).shape not in ((), aval_of(t).shape):
        raise ShapeError(f"lax.select: shapes must agree, got predicate {aval_of(p)}, {aval_of(t)} and {aval_of(f)}")
    return fnp.where(p, t, f)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002 - lax's names
    """``x`` clipped to ``[min, max]`` (scalars or arrays of ``x``'s shape and dtype)."""
    lo, x, hi = _same_dtype("clamp", min, x, max)
    return fnp.minimum(fnp.maximum(x, lo), hi)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``operand`` cast to ``new_dtype`` (float -> int truncates toward zero)."""
    return cast(asarray(operand), dtypes.canonicalize(new_dtype, "convert_element_type"))


# --- shapes ---------------------------------------------------------------------------------


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """``operand`` (transposed by ``dimensions`` first, when given) with shape ``new_sizes``."""
    x = asarray(operand)
    if dimensions is not None:
        x = fnp.transpose(x, tuple(dimensions))
    return fnp.reshape(x, tuple(int(d) for d in new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    return fnp.transpose(asarray(operand), tuple(permutation))


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """``operand``'s axis ``i`` becomes axis ``broadcast_dimensions[i]`` of ``shape`` (size kept
    or 1); the other axes are new."""
    x = asarray(operand)
    shape = tuple(int(d) for d in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    xs = aval_of(x).shape
    if len(dims) != len(xs) or any(not 0 <= d < len(shape) for d in dims) or list(dims) != sorted(set(dims)) or \
            any(s not in (1, shape[d]) for s, d in zip(xs, dims)):
        raise ShapeError(f"lax.broadcast_in_dim: cannot place {aval_of(x)} at dimensions {dims} of shape {shape}")
    expanded = [1] * len(shape)
    for s, d in zip(xs, dims):
        expanded[d] = s
    return fnp.broadcast_to(fnp.reshape(x, tuple(expanded)), shape)


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """``operand`` with leading axes ``sizes`` added."""
    x = asarray(operand)
    rank = len(aval_of(x).shape)
    return broadcast_in_dim(x, tuple(sizes) + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + rank)))


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    return fnp.squeeze(asarray(array), axis=tuple(dimensions))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    return fnp.expand_dims(asarray(array), tuple(dimensions))


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    return fnp.flip(asarray(operand), axis=tuple(dimensions)) if len(dimensions) else asarray(operand)


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Axes ``start_dimension:stop_dimension`` merged into one."""
    x = asarray(operand)
    shape = aval_of(x).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    merged = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return fnp.reshape(x, shape[:start_dimension] + (merged,) + shape[stop:])


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    xs = _same_dtype("concatenate", *operands)
    return fnp.concatenate(xs, axis=dimension)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """``(low, high, interior)`` per axis: ``interior`` values between neighbours, then ``low``
    before and ``high`` after; negative ``low``/``high`` crop."""
    x, value = _same_dtype("pad", operand, padding_value)
    shape = aval_of(x).shape
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != len(shape) or any(len(c) != 3 or c[2] < 0 for c in config):
        raise ShapeError(f"lax.pad: padding_config {padding_config} needs one (low, high, interior >= 0) per "
                         f"axis of {aval_of(x)}")
    if any(c[2] for c in config):
        spread = tuple(s + (s - 1) * c[2] if s else 0 for s, c in zip(shape, config))
        base = fnp.broadcast_to(fnp.reshape(value, ()), spread)
        x = fnp.at(base)[tuple(builtins.slice(None, None, c[2] + 1) for c in config)].set(x)
        shape = spread
    grow = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in config]
    if any(lo or hi for lo, hi in grow):
        x = fnp.pad(x, grow, constant_values=value)
    crop = tuple(builtins.slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi, _ in config)
    out = x[crop]
    if any(d < 0 for d in aval_of(out).shape):
        raise ShapeError(f"lax.pad: padding_config {padding_config} crops more than {aval_of(operand)} holds")
    return out


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """``operand[start:limit:stride]`` on every axis (bounds checked, no negative indices)."""
    x = asarray(operand)
    shape = aval_of(x).shape
    strides = strides or (1,) * len(shape)
    if not len(start_indices) == len(limit_indices) == len(strides) == len(shape) or any(
            not 0 <= s <= e <= d or st < 1 for s, e, st, d in zip(start_indices, limit_indices, strides, shape)):
        raise ShapeError(f"lax.slice: start {tuple(start_indices)}, limit {tuple(limit_indices)}, strides "
                         f"{tuple(strides)} do not fit {aval_of(x)}")
    return x[tuple(builtins.slice(int(s), int(e), int(st)) for s, e, st in zip(start_indices, limit_indices, strides))]


def _axis_window(x: Any, axis: int, start: int, stop: int, stride: int = 1) -> tuple:
    rank = len(aval_of(x).shape)
    axis = axis % rank
    return tuple(builtins.slice(None) for _ in range(axis)) + (builtins.slice(start, stop, stride),)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Any:
    """``operand[start:limit:stride]`` along ``axis`` (negative indices count from the end)."""
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    start = 0 if start_index is None else int(start_index) % d if start_index < 0 else int(start_index)
    stop = d if limit_index is None else int(limit_index) % d if limit_index < 0 else int(limit_index)
    return x[_axis_window(x, axis, start, stop, stride)]


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    i = int(index) + d if index < 0 else int(index)
    out = slice_in_dim(x, i, i + 1, 1, axis)
    return out if keepdims else fnp.squeeze(out, axis=axis)


def _starts(x: Any, start_indices: Sequence[Any], sizes: Sequence[int], name: str) -> list[Any]:
    """Each start index as an int64 scalar, negative ones counted from the end, clamped so the
    window of ``sizes`` fits (JAX's rule)."""
    shape = aval_of(x).shape
    if len(start_indices) != len(shape) or len(sizes) != len(shape) or any(
            not 0 <= s <= d for s, d in zip(sizes, shape)):
        raise ShapeError(f"lax.{name}: start indices {len(start_indices)} and sizes {tuple(sizes)} do not fit "
                         f"{aval_of(x)}")
    out = []
    for i, d, s in zip(start_indices, shape, sizes):
        i = cast(asarray(i), dtypes.int64)
        i = fnp.where(i < 0, i + d, i)
        out.append(fnp.clip(i, 0, d - s))
    return out


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Any:
    """The ``slice_sizes`` window of ``operand`` at traced ``start_indices``, clamped to fit."""
    from fungraph.primitives.indexing import take

    x = asarray(operand)
    sizes = tuple(int(s) for s in slice_sizes)
    starts = _starts(x, list(start_indices), sizes, "dynamic_slice")
    for axis, (start, size) in enumerate(zip(starts, sizes)):
        if size != aval_of(x).shape[axis]:
            x = take(x, start + np.arange(size, dtype=np.int64), axis)
    return x


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Any:
    x = asarray(operand)
    shape = aval_of(x).shape
    axis = axis % len(shape)
    starts = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_slice(x, starts, shape[:axis] + (int(slice_size),) + shape[axis + 1:])


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Any:
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else fnp.squeeze(out, axis=axis)


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Any:
    """``operand`` with ``update`` written at traced ``start_indices``, clamped so it fits."""
    x, u = _same_dtype("dynamic_update_slice", operand, update)
    shape, ushape = aval_of(x).shape, aval_of(u).shape
    if len(ushape) != len(shape):
        raise ShapeError(f"lax.dynamic_update_slice: update {aval_of(u)} and operand {aval_of(x)} differ in rank")
    from fungraph.primitives.indexing import dynamic_update_slice_p

    return dynamic_update_slice_p.bind(x, u, *_starts(x, list(start_indices), ushape, "dynamic_update_slice"),
                                       mode="clamp")


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Any:
    x = asarray(operand)
    starts: list[Any] = [0] * len(aval_of(x).shape)
    starts[axis % len(starts)] = start_index
    return dynamic_update_slice(x, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Any:
    u = asarray(update)
    x = asarray(operand)
    if len(aval_of(u).shape) == len(aval_of(x).shape) - 1:
        u = fnp.expand_dims(u, axis)
    return dynamic_update_slice_in_dim(x, u, index, axis)


# --- reductions, scans, sorting ------------------------------------------------------------


def _reducer(name: str, fn_name: str) -> Callable[[Any, Sequence[int]], Any]:
    def op(operand: Any, axes: Sequence[int]) -> Any:
        x = asarray(operand)
        return getattr(fnp, fn_name)(x, axis=tuple(axes)) if len(axes) else x

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: over ``axes``, keeping the dtype."
    return op


reduce_sum = _keep(_reducer("reduce_sum", "sum"))
reduce_prod = _keep(_reducer("reduce_prod", "prod"))
reduce_max = _reducer("reduce_max", "max")
reduce_min = _reducer("reduce_min", "min")
reduce_and = _reducer("reduce_and", "all")
reduce_or = _reducer("reduce_or", "any")


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    return cast(fnp.argmax(asarray(operand), axis=int(axis)), dtypes.canonicalize(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    return cast(fnp.argmin(asarray(operand), axis=int(axis)), dtypes.canonicalize(index_dtype))


def iota(dtype: Any, size: int) -> Any:
    return np.arange(int(size), dtype=dtypes.canonicalize(dtype))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    shape = tuple(int(d) for d in shape)
    line = np.arange(shape[dimension], dtype=dtypes.canonicalize(dtype))
    return np.broadcast_to(line.reshape([-1 if k == dimension else 1 for k in range(len(shape))]), shape).copy()


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    return fnp.full(tuple(int(d) for d in shape), fill_value, dtype=dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None) -> Any:
    a = aval_of(asarray(x))
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def _cumulative(name: str, combine: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def op(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        return associative_scan(combine, asarray(operand), reverse=reverse, axis=axis)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``lax.{name}``: inclusive running {name[3:]} along ``axis`` (``reverse``: from the end)."
    return op


def _logaddexp(a: Any, b: Any) -> Any:
    return fnp.logaddexp(a, b)


cumsum = _cumulative("cumsum", lambda a, b: a + b)
cumprod = _cumulative("cumprod", lambda a, b: a * b)
cummax = _cumulative("cummax", lambda a, b: fnp.maximum(a, b))
cummin = _cumulative("cummin", lambda a, b: fnp.minimum(a, b))
cumlogsumexp = _cumulative("cumlogsumexp", _logaddexp)


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Inclusive scan of the associative ``fn`` along ``axis`` of every leaf of ``elems``, in
    ``ceil(log2 n)`` rounds of whole-array ``fn`` calls (Hillis and Steele): after round ``r``
    each element combines the ``2^r`` elements ending at it, earlier ones on the left."""
    from fungraph.tree_util import tree_flatten, tree_unflatten

    leaves, tree = tree_flatten(elems)
    leaves = [asarray(v) for v in leaves]
    if not leaves:
        return elems
    axis = axis % len(aval_of(leaves[0]).shape)
    n = aval_of(leaves[0]).shape[axis]
    if any(aval_of(v).shape[axis] != n for v in leaves):
        raise ShapeError(f"lax.associative_scan: leaves differ along axis {axis}: "
                         f"{[str(aval_of(v)) for v in leaves]}")
    if reverse:
        leaves = [fnp.flip(v, axis) for v in leaves]
    shift = 1
    while shift < n:
        early = tree_unflatten(tree, [v[_axis_window(v, axis, 0, n - shift)] for v in leaves])
        late = tree_unflatten(tree, [v[_axis_window(v, axis, shift, n)] for v in leaves])
        combined, _ = tree_flatten(fn(early, late))
        leaves = [fnp.concatenate([v[_axis_window(v, axis, 0, shift)], asarray(c)], axis=axis)
                  for v, c in zip(leaves, combined)]
        shift *= 2
    if reverse:
        leaves = [fnp.flip(v, axis) for v in leaves]
    return tree_unflatten(tree, leaves)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``operand`` sorted along ``dimension``; a sequence of operands is sorted by its first
    ``num_keys`` (lexicographically, stable) and returned as a tuple."""
    if not isinstance(operand, (list, tuple)):
        return fnp.sort(asarray(operand), axis=dimension)
    xs = [asarray(x) for x in operand]
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"lax.sort: num_keys={num_keys} for {len(xs)} operands")
    order = None
    for key in reversed(xs[:num_keys]):
        k = key if order is None else fnp.take_along_axis(key, order, axis=dimension)
        step = fnp.argsort(k, axis=dimension, stable=True)
        order = step if order is None else fnp.take_along_axis(order, step, axis=dimension)
    return tuple(fnp.take_along_axis(x, order, axis=dimension) for x in xs)


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Any, Any]:
    """The ``k`` largest entries along ``axis``, largest first (ties: lower index first), and
    their int32 indices."""
    x = asarray(operand)
    d = aval_of(x).shape[axis]
    if not 0 <= int(k) <= d:
        raise ValueError(f"lax.top_k: k={k} outside [0, {d}] for {aval_of(x)} along axis {axis}")
    key = fnp.negative(x) if dtypes.is_inexact(aval_of(x).dtype) else fnp.bitwise_not(x)
    order = fnp.argsort(key, axis=axis, stable=True)
    idx = order[_axis_window(order, axis, 0, int(k))]
    return fnp.take_along_axis(x, idx, axis=axis), cast(idx, dtypes.int32)


# --- map ------------------------------------------------------------------------


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - lax's name
    """``f`` applied to each slice of ``xs`` along its leading axis, as a ``scan``. With
    ``batch_size``, each scan step applies ``vmap(f)`` to ``batch_size`` slices, and the
    remaining ``n % batch_size`` slices go through one more ``vmap(f)`` after the scan;
    ``batch_size=0`` (or one above ``n``) is a single ``vmap``, as in JAX."""
    from fungraph.api import vmap
    from fungraph.lax import scan
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    if batch_size is None:
        _, ys = scan(lambda carry, x: (carry, f(x)), (), xs)
        return ys
    if int(batch_size) < 0:
        raise ValueError(f"lax.map: batch_size must be >= 0, got {batch_size}")
    leaves, tree = tree_flatten(xs)
    if not leaves:
        return map(f, xs)
    leaves = [asarray(x) for x in leaves]
    lengths = {aval_of(x).shape[0] if aval_of(x).shape else None for x in leaves}
    if len(lengths) != 1 or None in lengths:
        raise ShapeError(f"lax.map: every leaf of xs needs the same leading axis, got "
                         f"{[str(aval_of(x)) for x in leaves]}")
    n = lengths.pop()
    size = int(batch_size)
    batches = n // size if size else 0
    split = batches * size
    ys = None
    if batches:
        chunked = [fnp.reshape(x[:split], (batches, size) + aval_of(x).shape[1:]) for x in leaves]
        _, stacked = scan(lambda carry, x: (carry, vmap(f)(x)), (), tree_unflatten(tree, chunked))
        ys = tree_map(lambda y: fnp.reshape(y, (split,) + aval_of(y).shape[2:]), stacked)
    if ys is not None and split == n:
        return ys
    rest = vmap(f)(tree_unflatten(tree, [x[split:] for x in leaves]))
    if ys is None:
        return rest
    return tree_map(lambda a, b: fnp.concatenate([a, b], axis=0), ys, rest)



# --- gather and scatter ----------------------------------------------------------------------


class GatherScatterMode(enum.Enum):
    """What an out-of-bounds gather or scatter window does: ``CLIP`` moves it inside,
    ``FILL_OR_DROP`` fills the gathered window (NaN, the most negative integer, True) or drops
    the update, ``PROMISE_IN_BOUNDS`` clips here too. ``ONE_HOT`` is JAX-internal and refused."""

    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3

    @staticmethod
    def from_any(s: Any) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        names = {"clip": GatherScatterMode.CLIP, None: GatherScatterMode.FILL_OR_DROP,
                 "fill": GatherScatterMode.FILL_OR_DROP, "drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS, "one_hot": GatherScatterMode.ONE_HOT}
        if s not in names:
            raise ValueError(f"unknown gather/scatter mode {s!r}: use 'clip', 'fill', 'drop' or 'promise_in_bounds'")
        return names[s]


class GatherDimensionNumbers(NamedTuple):
    """``offset_dims``: output axes holding the slice's kept axes; ``collapsed_slice_dims``:
    operand axes sliced to size 1 and dropped; ``start_index_map``: the operand axis each index
    component starts; the batching dims pair operand axes with index batch axes."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """``update_window_dims``: the updates' window axes; ``inserted_window_dims``: operand axes
    the window has size 1 on (absent from the updates); ``scatter_dims_to_operand_dims``: the
    operand axis each index component starts; batching dims as in gather."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _windows(name: str, x: Any, indices: Any, index_map: Sequence[int], sizes: Sequence[int],
             operand_batching: Sequence[int], index_batching: Sequence[int],
             mode: GatherScatterMode) -> tuple[Any, Any]:
    """The flat operand position of every element of every window, shape ``B + sizes`` (``B``
    the indices' batch shape), and whether each window lies inside the operand (shape ``B``).
    Starts are clipped into range unless the mode fills or drops."""
    if mode is GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"lax.{name}: mode ONE_HOT is not supported")
    shape = aval_of(x).shape
    idx = cast(asarray(indices), dtypes.int64)
    ishape = aval_of(idx).shape
    if not ishape or ishape[-1] != len(index_map) or len(sizes) != len(shape) or any(
            not 0 <= s <= d for s, d in zip(sizes, shape)):
        raise ShapeError(f"lax.{name}: indices {aval_of(idx)} (last axis: one start per start_index_map "
                         f"{tuple(index_map)}) and window sizes {tuple(sizes)} do not fit the operand {aval_of(x)}")
    batch = ishape[:-1]
    nb, n = len(batch), len(shape)
    strides = np.cumprod((1,) + shape[::-1][:-1])[::-1]
    flat = np.zeros((), np.int64)
    inside = np.ones((), bool)
    for d, (size, dim) in enumerate(zip(sizes, shape)):
        if d in index_map:
            start = idx[(builtins.slice(None),) * nb + (list(index_map).index(d),)]
        elif d in operand_batching:
            axis = index_batching[list(operand_batching).index(d)]
            start = np.arange(batch[axis]).reshape([-1 if k == axis else 1 for k in range(nb)])
        else:
            start = np.zeros((1,) * nb, np.int64)
        if mode is GatherScatterMode.FILL_OR_DROP:
            inside = inside & (start >= 0) & (start <= dim - size)
        start = fnp.clip(start, 0, dim - size)
        offsets = np.arange(size).reshape([-1 if k == d else 1 for k in range(n)])
        flat = flat + (fnp.reshape(start, aval_of(asarray(start)).shape + (1,) * n) + offsets) * int(strides[d])
    return fnp.broadcast_to(flat, batch + tuple(int(s) for s in sizes)), fnp.broadcast_to(inside, batch)


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers, slice_sizes: Sequence[int],
           *, unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
           fill_value: Any = None) -> Any:
    """XLA's gather: a ``slice_sizes`` window of ``operand`` at each start in ``start_indices``
    (its last axis the start vector). ``mode`` "clip" (or None, JAX's promise of in-bounds
    windows) clips windows into range, "fill" fills those that leave it with ``fill_value``
    (NaN, the most negative integer or True by default). The ordering hints are unused."""
    from fungraph.primitives.indexing import take

    x = asarray(operand)
    dn = dimension_numbers
    mode = GatherScatterMode.CLIP if mode is None else GatherScatterMode.from_any(mode)
    sizes = tuple(int(s) for s in slice_sizes)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    if any(sizes[d] != 1 for d in dropped if d < len(sizes)):
        raise ShapeError(f"lax.gather: collapsed and batching operand axes {sorted(dropped)} need slice size 1, got "
                         f"slice_sizes {sizes}")
    flat, inside = _windows("gather", x, start_indices, dn.start_index_map, sizes, dn.operand_batching_dims,
                            dn.start_indices_batching_dims, mode)
    a = aval_of(x)
    got = take(fnp.reshape(x, (a.size,)), flat, 0)
    nb = len(aval_of(inside).shape)
    if mode is GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            fill_value = np.nan if dtypes.is_inexact(a.dtype) else True if a.dtype == dtypes.bool_ else \
                np.iinfo(a.dtype).min
        keep = fnp.reshape(inside, aval_of(inside).shape + (1,) * len(sizes))
        got = fnp.where(keep, got, np.asarray(fill_value).astype(a.dtype))
    kept = [d for d in range(len(sizes)) if d not in dropped]
    got = fnp.reshape(got, aval_of(got).shape[:nb] + tuple(sizes[d] for d in kept))
    rank = nb + len(kept)
    offsets = sorted(int(d) % builtins.max(rank, 1) for d in dn.offset_dims)
    if len(offsets) != len(kept):
        raise ShapeError(f"lax.gather: offset_dims {tuple(dn.offset_dims)} must name one output axis per kept slice "
                         f"axis ({len(kept)})")
    batch_axes = iter(range(nb))
    perm = [nb + offsets.index(p) if p in offsets else next(batch_axes) for p in range(rank)]
    return fnp.transpose(got, perm)


def _scatter(name: str, operand: Any, scatter_indices: Any, updates: Any, dn: ScatterDimensionNumbers, mode: Any,
             combine: str, func: Callable[[Any], Any] | None = None) -> Any:
    """Every update window at its position (windows leaving the operand dropped, or clipped
    with mode "clip"), combined by ``combine``: "add" with one ``scatter_add``; the others
    sort the positions, fold repeated ones in order (a segmented associative scan), then write
    each position once."""
    from fungraph.primitives.indexing import scatter_add, take

    x = asarray(operand)
    a = aval_of(x)
    u = cast(asarray(updates), a.dtype)
    mode = GatherScatterMode.from_any(mode)
    ushape = aval_of(u).shape
    window_axes = [int(d) for d in dn.update_window_dims]
    scatter_axes = [k for k in range(len(ushape)) if k not in window_axes]
    inserted = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(a.shape)) if d not in inserted]
    if len(window_dims) != len(window_axes):
        raise ShapeError(f"lax.{name}: updates {aval_of(u)} have window axes {tuple(window_axes)}, but operand "
                         f"{a} with inserted_window_dims {tuple(dn.inserted_window_dims)} needs {len(window_dims)}")
    sizes = [1] * len(a.shape)
    for d, k in zip(window_dims, window_axes):
        sizes[d] = ushape[k]
    u = fnp.transpose(u, scatter_axes + window_axes)
    flat, inside = _windows(name, x, scatter_indices, dn.scatter_dims_to_operand_dims, sizes,
                            dn.operand_batching_dims, dn.scatter_indices_batching_dims, mode)
    batch = aval_of(inside).shape
    if tuple(ushape[k] for k in scatter_axes) != batch:
        raise ShapeError(f"lax.{name}: the updates' scatter axes {tuple(ushape[k] for k in scatter_axes)} must match "
                         f"the indices' batch shape {batch}")
    count = int(np.prod(aval_of(flat).shape, dtype=np.int64))
    keep = fnp.broadcast_to(fnp.reshape(inside, batch + (1,) * len(sizes)), aval_of(flat).shape)
    pos = fnp.reshape(fnp.where(keep, flat, a.size), (count,))
    vals = fnp.reshape(u, (count,)) if func is None else None
    if combine == "add":
        total = scatter_add(vals, pos, 0, (a.size + 1,))[:a.size]
        return x + fnp.reshape(total, a.shape)
    order = fnp.argsort(pos, stable=True)
    pos = take(pos, order, 0)
    starts = fnp.concatenate([np.ones(1, bool), pos[1:] != pos[:-1]]) if count else np.ones(0, bool)
    last = fnp.concatenate([pos[1:] != pos[:-1], np.ones(1, bool)]) if count else np.ones(0, bool)
    real = last & (pos < a.size)
    hit = fnp.reshape(scatter_add(cast(real, dtypes.int64), pos, 0, (a.size + 1,))[:a.size], a.shape) > 0
    if func is not None:
        times = scatter_add(cast(pos < a.size, dtypes.int64), pos, 0, (a.size + 1,))[:a.size]
        return _apply_times(x, func, fnp.reshape(times, a.shape))
    op = {"set": lambda old, new: new, "mul": fnp.multiply, "min": fnp.minimum, "max": fnp.maximum}[combine]

    def segment(left: Any, right: Any) -> Any:
        return left[0] | right[0], fnp.where(right[0], right[1], op(left[1], right[1]))

    _, folded = associative_scan(segment, (starts, take(vals, order, 0)))
    as_int = a.dtype == dtypes.bool_
    written = fnp.where(real, cast(folded, dtypes.int32) if as_int else folded, 0)
    placed = fnp.reshape(scatter_add(written, pos, 0, (a.size + 1,))[:a.size], a.shape)
    placed = cast(placed, a.dtype) if as_int else placed
    return fnp.where(hit, op(x, placed), x)


def _apply_times(x: Any, func: Callable[[Any], Any], times: Any) -> Any:
    """``func`` applied elementwise (on scalars, through ``vmap``) ``times`` times to each element."""
    from fungraph.api import vmap
    from fungraph.lax import fori_loop

    a = aval_of(x)
    if not a.size:
        return x
    flat_times = fnp.reshape(times, (a.size,))

    def body(k: Any, y: Any) -> Any:
        return fnp.where(flat_times > k, cast(vmap(func)(y), a.dtype), y)

    return fnp.reshape(fori_loop(0, fnp.max(flat_times), body, fnp.reshape(x, (a.size,))), a.shape)


def _scatter_op(combine: str, doc: str) -> Callable[..., Any]:
    def op(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
        return _scatter(name, operand, scatter_indices, updates, dimension_numbers, mode, combine)

    name = "scatter" if combine == "set" else f"scatter_{combine}"
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"XLA's scatter: {doc} (windows leaving the operand dropped, or clipped with mode 'clip')."
    return op


scatter = _scatter_op("set", "each update window written over the operand, the last one winning a repeated position")
scatter_add = _scatter_op("add", "each update window added to the operand")
scatter_mul = _scatter_op("mul", "the operand multiplied by each update window")
scatter_min = _scatter_op("min", "the elementwise minimum of the operand and each update window")
scatter_max = _scatter_op("max", "the elementwise maximum of the operand and each update window")


def scatter_sub(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """XLA's scatter: each update window subtracted from the operand."""
    return _scatter("scatter_sub", operand, scatter_indices, fnp.negative(asarray(updates)), dimension_numbers,
                    mode, "add")


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Any], Any],
                  dimension_numbers: ScatterDimensionNumbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """``func`` applied to each indexed element of ``operand``, once per time it is indexed (as
    XLA's scatter applies its computation once per update)."""
    x = asarray(operand)
    shape = tuple(int(s) for s in update_shape)
    return _scatter("scatter_apply", x, scatter_indices, fnp.zeros(shape, aval_of(x).dtype), dimension_numbers,
                    mode, "apply", func)
