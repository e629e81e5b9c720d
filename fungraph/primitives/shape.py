"""Shape primitives: reshape, transpose, broadcast_in_dim, concatenate, slice, pad, rev.
All are linear, so each has a transpose rule beside it and its jvp applies it to tangents."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from fungraph.core import Primitive, ShapeError, register_lowering
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
from fungraph.primitives._rules import aval, is_undefined, linear_jvp, normalize_axis, require_same_dtype


def _linear(name: str, impl: Any, abstract_eval: Any, arity: int | None = 1) -> Primitive:
    """A linear structural primitive: weakly typed when all its operands are, as JAX's."""
    p = Primitive(name, impl=impl, abstract_eval=abstract_eval, arity=arity, weak_from=None)
    p.jvp = partial(linear_jvp, p)
    return p


# reshape -------------------------------------------------------------------------------


#: The most dimensions an array may have (numpy's limit, which every engine's arrays share).
MAX_RANK = 64


def require_rank(name: str, shape: tuple[int, ...]) -> None:
    """A result of more than ``MAX_RANK`` dimensions is refused when it is traced, not at run time."""
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{name}: a result of rank {len(shape)} exceeds the maximum of {MAX_RANK} dimensions")


def _reshape_aval(x: ShapedArray, *, new_sizes: tuple[int, ...]) -> ShapedArray:
    require_rank("reshape", new_sizes)
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x} ({x.size} elements) to shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype)


reshape_p = _linear("reshape", lambda x, *, new_sizes: np.reshape(x, new_sizes), _reshape_aval)
reshape_p.transpose = lambda ct, x, *, new_sizes: (reshape(ct, aval(x).shape),)


def reshape(x: Any, shape: Sequence[int]) -> Any:
    shape = tuple(int(d) for d in shape)
    if aval(x).shape == shape:
        return x
    return reshape_p.bind(x, new_sizes=shape)


# transpose ------------------------------------------------------------------------------


def _transpose_aval(x: ShapedArray, *, permutation: tuple[int, ...]) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {permutation} is not a permutation of the axes of {x}")
    return ShapedArray(tuple(x.shape[i] for i in permutation), x.dtype)


transpose_p = _linear("transpose", lambda x, *, permutation: np.transpose(x, permutation), _transpose_aval)
transpose_p.transpose = lambda ct, x, *, permutation: (transpose(ct, tuple(np.argsort(permutation))),)


def transpose(x: Any, perm: Sequence[int]) -> Any:
    perm = tuple(int(i) for i in perm)
    if perm == tuple(range(len(perm))):
        return x
    return transpose_p.bind(x, permutation=perm)


# broadcast_in_dim -----------------------------------------------------------------------


def _bid_aval(x: ShapedArray, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    require_rank("broadcast_in_dim", shape)
    dims = broadcast_dimensions
    ok = len(dims) == x.ndim and all(0 <= d < len(shape) for d in dims) and list(dims) == sorted(set(dims))
    ok = ok and all(x.shape[i] in (1, shape[d]) for i, d in enumerate(dims))
    if not ok:
        raise ShapeError(f"broadcast_in_dim: cannot broadcast {x} to shape {shape} along dimensions {dims}")
    return ShapedArray(shape, x.dtype)


def _bid_impl(x: Any, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = np.shape(x)[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


broadcast_in_dim_p = _linear("broadcast_in_dim", _bid_impl, _bid_aval)


@broadcast_in_dim_p.def_transpose
def _bid_transpose(ct: Any, x: Any, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> tuple:
    # transposed broadcast is a sum; reductions import shape (one knot in primitives/)
    from fungraph.primitives.reductions import reduce_sum

    xs = aval(x).shape
    new_axes = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(d for i, d in enumerate(broadcast_dimensions) if xs[i] == 1 and shape[d] != 1)
    summed = reduce_sum(ct, tuple(sorted(new_axes + stretched))) if new_axes or stretched else ct
    return (reshape(summed, xs),)


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    shape = tuple(int(d) for d in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    if aval(x).shape == shape and dims == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """numpy's broadcast_to: align trailing axes."""
    xs = aval(x).shape
    shape = tuple(int(d) for d in shape)
    if len(shape) < len(xs):
        raise ShapeError(f"broadcast_to: cannot broadcast {aval(x)} to the lower-rank shape {shape}")
    lead = len(shape) - len(xs)
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


# concatenate ----------------------------------------------------------------------------


def _concat_aval(*xs: ShapedArray, axis: int) -> ShapedArray:
    if not xs:
        raise ShapeError("concatenate needs at least one operand")
    dtype = require_same_dtype("concatenate", *xs)
    first = xs[0]
    for x in xs:
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise ShapeError(
                f"concatenate along axis {axis}: shapes differ off that axis: {', '.join(map(str, xs))}"
            )
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return ShapedArray(tuple(shape), dtype)


concatenate_p = _linear("concatenate", lambda *xs, axis: np.concatenate(xs, axis), _concat_aval, arity=None)


@concatenate_p.def_transpose
def _concat_transpose(ct: Any, *xs: Any, axis: int) -> tuple:
    outs = []
    start = 0
    shape = aval(ct).shape
    for x in xs:
        size = aval(x).shape[axis]
        if is_undefined(x):
            lo = [0] * len(shape)
            hi = list(shape)
            lo[axis] = start
            hi[axis] = start + size
            outs.append(slice_(ct, lo, hi, None))
        else:
            outs.append(None)
        start += size
    return tuple(outs)


def concatenate(xs: Sequence[Any], axis: int) -> Any:
    if len(xs) == 1:
        return xs[0]
    return concatenate_p.bind(*xs, axis=int(axis))


# slice ----------------------------------------------------------------------------------


def _slice_aval(x: ShapedArray, *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
                strides: tuple[int, ...]) -> ShapedArray:
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise ShapeError(f"slice of {x}: start/limit/strides must each have {x.ndim} entries")
    shape = []
    for lo, hi, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= lo <= hi <= d) or st < 1:
            raise ShapeError(f"slice of {x}: bad bounds start={start_indices} limit={limit_indices} strides={strides}")
        shape.append(max(0, -(-(hi - lo) // st)))
    return ShapedArray(tuple(shape), x.dtype)


def _slice_impl(x: Any, *, start_indices: tuple, limit_indices: tuple, strides: tuple) -> np.ndarray:
    return np.asarray(x)[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


slice_p = _linear("slice", _slice_impl, _slice_aval)


@slice_p.def_transpose
def _slice_transpose(ct: Any, x: Any, *, start_indices: tuple, limit_indices: tuple, strides: tuple) -> tuple:
    xs = aval(x).shape
    cs = aval(ct).shape
    config = []
    for lo, st, d, c in zip(start_indices, strides, xs, cs):
        used = lo + (c - 1) * st + 1 if c > 0 else lo
        config.append((lo, d - used, st - 1))
    zero = np.asarray(0, aval(ct).dtype)
    return (pad(ct, zero, tuple(config)),)


def slice_(x: Any, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None) -> Any:
    st = tuple(int(s) for s in strides) if strides is not None else (1,) * len(start)
    lo = tuple(int(s) for s in start)
    hi = tuple(int(s) for s in limit)
    if lo == (0,) * len(lo) and hi == aval(x).shape and st == (1,) * len(st):
        return x
    return slice_p.bind(x, start_indices=lo, limit_indices=hi, strides=st)


# pad ------------------------------------------------------------------------------------


def _pad_aval(x: ShapedArray, v: ShapedArray, *, padding_config: tuple[tuple[int, int, int], ...]) -> ShapedArray:
    require_same_dtype("pad", x, v)
    if v.shape != () or len(padding_config) != x.ndim:
        raise ShapeError(f"pad of {x} with {v}: need a scalar padding value and {x.ndim} (lo, hi, interior) triples")
    shape = []
    for (lo, hi, interior), d in zip(padding_config, x.shape):
        if lo < 0 or hi < 0 or interior < 0:
            raise ShapeError(f"pad: negative padding {padding_config} is not supported")
        shape.append(lo + hi + d + max(d - 1, 0) * interior)
    return ShapedArray(tuple(shape), x.dtype)


def _pad_impl(x: Any, v: Any, *, padding_config: tuple) -> np.ndarray:
    x = np.asarray(x)
    out_shape = _pad_aval(ShapedArray(x.shape, x.dtype), ShapedArray((), x.dtype), padding_config=padding_config).shape
    out = np.full(out_shape, v, dtype=x.dtype)
    idx = tuple(slice(lo, lo + (d - 1) * (i + 1) + 1 if d else lo, i + 1)
                for (lo, _, i), d in zip(padding_config, x.shape))
    out[idx] = x
    return out


pad_p = _linear("pad", _pad_impl, _pad_aval, arity=2)


@pad_p.def_transpose
def _pad_transpose(ct: Any, x: Any, v: Any, *, padding_config: tuple) -> tuple:
    # transposed broadcast is a sum; reductions import shape (one knot in primitives/)
    from fungraph.primitives.elementwise import sub
    from fungraph.primitives.reductions import reduce_sum

    xs = aval(x).shape
    lo = [c[0] for c in padding_config]
    st = [c[2] + 1 for c in padding_config]
    hi = [lo_ + (d - 1) * s + 1 if d else lo_ for lo_, d, s in zip(lo, xs, st)]
    t_x = slice_(ct, lo, hi, st)
    t_v = None
    if is_undefined(v):
        all_axes = tuple(range(len(xs)))
        t_v = sub(reduce_sum(ct, all_axes), reduce_sum(t_x, all_axes))
    return (t_x if is_undefined(x) else None, t_v)


def pad(x: Any, value: Any, config: Sequence[tuple[int, int, int]]) -> Any:
    return pad_p.bind(x, value, padding_config=tuple(tuple(int(c) for c in t) for t in config))


# rev ------------------------------------------------------------------------------------


def _rev_aval(x: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    for d in dimensions:
        normalize_axis(d, x.ndim, "rev")
    return x


rev_p = _linear("rev", lambda x, *, dimensions: np.flip(x, dimensions), _rev_aval)
rev_p.transpose = lambda ct, x, *, dimensions: (rev(ct, dimensions),)


def rev(x: Any, dims: Sequence[int]) -> Any:
    dims = tuple(int(d) for d in dims)
    return rev_p.bind(x, dimensions=dims) if dims else x


# batching rules -------------------------------------------------------------------------


def _batch_reshape(args: Any, dims: Any, *, new_sizes: tuple[int, ...]) -> tuple[Any, int]:
    x = to_front(args[0], dims[0])
    return reshape(x, (aval(x).shape[0],) + new_sizes), 0


def _batch_transpose(args: Any, dims: Any, *, permutation: tuple[int, ...]) -> tuple[Any, int]:
    x = to_front(args[0], dims[0])
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


def _batch_bid(args: Any, dims: Any, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> tuple:
    x = to_front(args[0], dims[0])
    b = aval(x).shape[0]
    return broadcast_in_dim(x, (b,) + shape, (0,) + tuple(d + 1 for d in broadcast_dimensions)), 0


def _batch_concat(args: Any, dims: Any, *, axis: int) -> tuple[Any, int]:
    size = batch_size(args, dims)
    return concatenate([broadcast_batch(x, d, size) for x, d in zip(args, dims)], axis + 1), 0


def _batch_slice(args: Any, dims: Any, *, start_indices: tuple, limit_indices: tuple, strides: tuple) -> tuple:
    x = to_front(args[0], dims[0])
    b = aval(x).shape[0]
    return slice_(x, (0,) + start_indices, (b,) + limit_indices, (1,) + strides), 0


def _batch_pad(args: Any, dims: Any, *, padding_config: tuple) -> tuple[Any, int]:
    # transposed broadcast is a sum; reductions import shape (one knot in primitives/)
    from fungraph.primitives.elementwise import select

    x, v = args
    dx, dv = dims
    size = batch_size(args, dims)
    xb = broadcast_batch(x, dx, size)
    config = ((0, 0, 0),) + tuple(padding_config)
    if dv is None:
        return pad(xb, v, config), 0
    zero = np.asarray(0, aval(x).dtype)
    padded = pad(xb, zero, config)
    inside = pad(np.ones(aval(xb).shape, np.bool_), np.asarray(False), config)
    vb = to_front(v, dv)
    out_shape = aval(padded).shape
    return select(inside, padded, broadcast_in_dim(vb, out_shape, (0,))), 0


def _batch_rev(args: Any, dims: Any, *, dimensions: tuple[int, ...]) -> tuple[Any, int]:
    x = to_front(args[0], dims[0])
    return rev(x, tuple(d + 1 for d in dimensions)), 0


reshape_p.batch = _batch_reshape
transpose_p.batch = _batch_transpose
broadcast_in_dim_p.batch = _batch_bid
concatenate_p.batch = _batch_concat
slice_p.batch = _batch_slice
pad_p.batch = _batch_pad
rev_p.batch = _batch_rev


# --- CPU lowerings: ``rule(out, *inputs, **params)`` writes into the planned ``out`` ------------


def _view_lowering(view: Any) -> Any:
    """A view of the input (``out is None``: the plan made the output a view) or its copy
    into ``out``."""
    def run(out: np.ndarray | None, x: Any, **params: Any) -> np.ndarray:
        v = view(np.asarray(x), **params)
        if out is None:
            return v
        np.copyto(out, v)
        return out

    return run


def _bid_expanded(x: np.ndarray, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return x.reshape(expanded)


def _bid_cpu(out: np.ndarray | None, x: Any, *, shape: tuple[int, ...],
             broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    """A broadcast view (``out is None``), or ``x`` with its axes placed copied into ``out`` by
    numpy's own broadcasting (``np.broadcast_to`` first costs ~8 us a call)."""
    expanded = _bid_expanded(np.asarray(x), shape, broadcast_dimensions)
    if out is None:
        return np.broadcast_to(expanded, shape)
    np.copyto(out, expanded)
    return out


def _slice_view(x: np.ndarray, *, start_indices: tuple, limit_indices: tuple, strides: tuple) -> np.ndarray:
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


def _pad_cpu(out: np.ndarray, x: Any, value: Any, *, padding_config: tuple) -> np.ndarray:
    out.fill(value)
    out[tuple(slice(lo, lo + (d - 1) * (i + 1) + 1 if d else lo, i + 1)
              for (lo, _, i), d in zip(padding_config, np.shape(x)))] = x
    return out


register_lowering(reshape_p, "cpu", _view_lowering(lambda x, *, new_sizes: x.reshape(new_sizes)))
register_lowering(transpose_p, "cpu", _view_lowering(lambda x, *, permutation: np.transpose(x, permutation)))
register_lowering(broadcast_in_dim_p, "cpu", _bid_cpu)
register_lowering(slice_p, "cpu", _view_lowering(_slice_view))
register_lowering(rev_p, "cpu", _view_lowering(lambda x, *, dimensions: np.flip(x, dimensions)))
register_lowering(pad_p, "cpu", _pad_cpu)
register_lowering(concatenate_p, "cpu", lambda out, *xs, axis: np.concatenate(xs, axis=axis, out=out))
