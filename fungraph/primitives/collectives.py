"""Collectives over a named ``vmap`` axis: psum, pmax, pmin, all_gather, psum_scatter,
ppermute, all_to_all, axis_index, and pmean, pshuffle and pswapaxes built on them; JAX's
collectives with their semantics under ``vmap``.

Inside ``vmap(f, axis_name='i')`` each example sees its own slice; ``psum(x, 'i')`` sums the
slices of all examples and gives every example the sum. Each primitive names one axis; the
functions below take a name or a tuple of names and apply one primitive per name.

The batching rule of the trace that maps the named axis does the work (a reduction over the
batch axis, a gather, an iota); under the trace of another axis a collective is mapped like
an elementwise operation. Reverse mode transposes psum to psum and all_gather to
psum_scatter, as JAX does under ``vmap``. A value that reaches ``impl`` (a ``jit`` called
inside the ``vmap`` with values that are the same for every example) does not depend on the
axis, so psum's ``impl`` multiplies by the axis size. The primitives are ``effectful`` so that
the optimiser never folds them into constants of one axis size.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import NOT_DIFFERENTIABLE, ShapeError, Tracer, to_concrete_dtype_array, weak_array
from fungraph.interpreters.batching import NamedAxisPrimitive, axis_frame, is_vmap_axis, rule_frame
from fungraph.ir import ShapedArray
from fungraph.primitives._batching import broadcast_batch, to_front
from fungraph.primitives._rules import aval, linear_jvp, lit, normalize_axis
from fungraph.primitives.elementwise import add, convert, div, eq, mul, select, weak
from fungraph.primitives.indexing import take
from fungraph.primitives.mesh_collectives import (
    INVARIANT_RESULT,
    MeshAxes,
    mesh_all_gather_p,
    mesh_all_to_all_p,
    mesh_axis_index_p,
    mesh_of_axis,
    mesh_pmax_p,
    mesh_pmin_p,
    mesh_ppermute_p,
    mesh_psum_p,
    mesh_psum_scatter_p,
    pvary_p,
    replication_checked,
    tiled_all_to_all_aval,
)
from fungraph.primitives.reductions import reduce_max_p, reduce_min_p, reduce_sum
from fungraph.primitives.shape import reshape, transpose
from fungraph.tree_util import tree_map

AxisName = Hashable | tuple[Hashable, ...]


def _names(axis_name: AxisName) -> tuple[Hashable, ...]:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _array(x: Any) -> Any:
    """``x`` as an operand, weakly typed where it is (a Python scalar, a weak array), as JAX's
    collectives keep their operand's weak type."""
    if isinstance(x, Tracer):
        return x
    return weak_array(to_concrete_dtype_array(x)) if dtypes.is_weak(x) else to_concrete_dtype_array(x)


def _numeric_aval(name: str) -> Callable[..., ShapedArray]:
    def abstract_eval(x: ShapedArray, *, axis_name: Hashable) -> ShapedArray:
        if x.dtype == dtypes.bool_:
            raise ShapeError(f"{name} over axis {axis_name!r} is not defined for bool, got {x}")
        return x

    return abstract_eval


# --- psum ------------------------------------------------------------------------------------


def _psum_impl(x: Any, *, axis_name: Hashable) -> np.ndarray:
    x = np.asarray(x)
    return x * np.asarray(axis_frame(axis_name).size, x.dtype)


psum_p = NamedAxisPrimitive("psum", impl=_psum_impl, abstract_eval=_numeric_aval("psum"), arity=1, effectful=True,
                            weak_from=None)


psum_p.jvp = partial(linear_jvp, psum_p)


psum_p.transpose = lambda ct, x, *, axis_name: (psum_p.bind(ct, axis_name=axis_name),)  # psum^T = psum


@psum_p.def_batch
def _psum_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable) -> tuple:
    (x,), (d,) = args, dims
    frame = rule_frame()
    if frame.name != axis_name:
        return psum_p.bind(x, axis_name=axis_name), d
    if d is None:
        return mul(x, lit(frame.size, aval(x).dtype)), None
    return reduce_sum(x, (d,)), None


# --- pmax, pmin ------------------------------------------------------------------------------


def _extremum(name: str, reduce_p: Any) -> NamedAxisPrimitive:
    def impl(x: Any, *, axis_name: Hashable) -> np.ndarray:
        """A value that reaches ``impl`` is the same for every example, so it is its own extremum."""
        axis_frame(axis_name)
        return np.asarray(x)

    prim = NamedAxisPrimitive(name, impl=impl, abstract_eval=lambda x, *, axis_name: x, arity=1, effectful=True,
                              weak_from=None)

    def jvp(primals: tuple, tangents: tuple, *, axis_name: Hashable) -> tuple:
        """The tangent of the examples that attain the extremum; ties share it equally."""
        (x,), (t,) = primals, tangents
        y = prim.bind(x, axis_name=axis_name)
        mask = convert(eq(x, y), aval(x).dtype)
        return y, div(psum_p.bind(mul(t, mask), axis_name=axis_name), psum_p.bind(mask, axis_name=axis_name))

    def batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable) -> tuple:
        (x,), (d,) = args, dims
        if rule_frame().name != axis_name:
            return prim.bind(x, axis_name=axis_name), d
        if d is None:
            return x, None
        return reduce_p.bind(x, axes=(d,)), None

    prim.jvp = jvp
    prim.batch = batch
    return prim


pmax_p = _extremum("pmax", reduce_max_p)
pmin_p = _extremum("pmin", reduce_min_p)


# --- all_gather and psum_scatter ---------------------------------------------------------------


def _all_gather_aval(x: ShapedArray, *, axis_name: Hashable, axis: int, tiled: bool, axis_size: int) -> ShapedArray:
    if tiled:
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"all_gather over {axis_name!r}: tiled axis {axis} is out of bounds for {x}")
        return ShapedArray(x.shape[:axis] + (axis_size * x.shape[axis],) + x.shape[axis + 1:], x.dtype)
    if not 0 <= axis <= x.ndim:
        raise ShapeError(f"all_gather over {axis_name!r}: axis {axis} is out of bounds for {x}")
    return ShapedArray(x.shape[:axis] + (axis_size,) + x.shape[axis:], x.dtype)


def _check_size(name: str, axis_name: Hashable, axis_size: int) -> None:
    size = axis_frame(axis_name).size
    if size != axis_size:
        raise ValueError(f"{name} over {axis_name!r} was staged for an axis of size {axis_size}, "
                         f"but the vmap that binds it has size {size}")


def _all_gather_impl(x: Any, *, axis_name: Hashable, axis: int, tiled: bool, axis_size: int) -> np.ndarray:
    _check_size("all_gather", axis_name, axis_size)
    x = np.asarray(x)
    return np.concatenate([x] * axis_size, axis) if tiled else np.stack([x] * axis_size, axis)


all_gather_p = NamedAxisPrimitive("all_gather", impl=_all_gather_impl, abstract_eval=_all_gather_aval, arity=1,
                                  effectful=True, weak_from=None)


all_gather_p.jvp = partial(linear_jvp, all_gather_p)


@all_gather_p.def_transpose
def _all_gather_transpose(ct: Any, x: Any, *, axis_name: Hashable, axis: int, tiled: bool, axis_size: int) -> tuple:
    return (psum_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled, axis_size=axis_size),)


@all_gather_p.def_batch
def _all_gather_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable, axis: int,
                      tiled: bool, axis_size: int) -> tuple:
    (x,), (d,) = args, dims
    if rule_frame().name != axis_name:
        return all_gather_p.bind(to_front(x, d), axis_name=axis_name, axis=axis + 1, tiled=tiled,
                                 axis_size=axis_size), 0
    stacked = broadcast_batch(x, d, axis_size)
    nd = aval(stacked).ndim
    gathered = transpose(stacked, tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, nd)))
    if not tiled:
        return gathered, None
    shape = aval(gathered).shape
    return reshape(gathered, shape[:axis] + (axis_size * shape[axis + 1],) + shape[axis + 2:]), None


def _psum_scatter_aval(x: ShapedArray, *, axis_name: Hashable, scatter_dimension: int, tiled: bool,
                       axis_size: int) -> ShapedArray:
    sd = scatter_dimension
    if not 0 <= sd < x.ndim:
        raise ShapeError(f"psum_scatter over {axis_name!r}: scatter_dimension {sd} is out of bounds for {x}")
    if tiled:
        if x.shape[sd] % axis_size:
            raise ShapeError(f"psum_scatter over {axis_name!r}: dimension {sd} of {x} is not a multiple of the "
                             f"axis size {axis_size}")
        return ShapedArray(x.shape[:sd] + (x.shape[sd] // axis_size,) + x.shape[sd + 1:], x.dtype)
    if x.shape[sd] != axis_size:
        raise ShapeError(f"psum_scatter over {axis_name!r}: dimension {sd} of {x} must equal the axis size "
                         f"{axis_size} (or pass tiled=True)")
    return ShapedArray(x.shape[:sd] + x.shape[sd + 1:], x.dtype)


def _psum_scatter_impl(x: Any, **params: Any) -> np.ndarray:
    raise ValueError(f"psum_scatter over {params['axis_name']!r} gives each example a different slice, so it "
                     "cannot run on values that are the same for every example (a jit called inside vmap with "
                     "no mapped argument); pass the jitted function a mapped value")


psum_scatter_p = NamedAxisPrimitive("psum_scatter", impl=_psum_scatter_impl, abstract_eval=_psum_scatter_aval,
                                    arity=1, effectful=True)


psum_scatter_p.jvp = partial(linear_jvp, psum_scatter_p)


@psum_scatter_p.def_transpose
def _psum_scatter_transpose(ct: Any, x: Any, *, axis_name: Hashable, scatter_dimension: int, tiled: bool,
                            axis_size: int) -> tuple:
    return (all_gather_p.bind(ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled, axis_size=axis_size),)


@psum_scatter_p.def_batch
def _psum_scatter_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable,
                        scatter_dimension: int, tiled: bool, axis_size: int) -> tuple:
    (x,), (d,) = args, dims
    sd = scatter_dimension
    if rule_frame().name != axis_name:
        return psum_scatter_p.bind(to_front(x, d), axis_name=axis_name, scatter_dimension=sd + 1, tiled=tiled,
                                   axis_size=axis_size), 0
    total = mul(x, lit(axis_size, aval(x).dtype)) if d is None else reduce_sum(x, (d,))
    if tiled:
        shape = aval(total).shape
        total = reshape(total, shape[:sd] + (axis_size, shape[sd] // axis_size) + shape[sd + 1:])
    return total, sd


# --- ppermute and all_to_all ------------------------------------------------------------------


def _per_example_impl(name: str) -> Callable[..., np.ndarray]:
    def impl(x: Any, **params: Any) -> np.ndarray:
        raise ValueError(f"{name} over {params['axis_name']!r} gives each example a different value, so it cannot "
                         "run on values that are the same for every example (a jit called inside vmap with no "
                         "mapped argument); pass the jitted function a mapped value")

    return impl


ppermute_p = NamedAxisPrimitive("ppermute", impl=_per_example_impl("ppermute"), arity=1, effectful=True,
                                abstract_eval=lambda x, *, axis_name, perm: x)


ppermute_p.jvp = partial(linear_jvp, ppermute_p)


@ppermute_p.def_transpose
def _ppermute_transpose(ct: Any, x: Any, *, axis_name: Hashable, perm: tuple[tuple[int, int], ...]) -> tuple:
    return (ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm)),)


@ppermute_p.def_batch
def _ppermute_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable,
                    perm: tuple[tuple[int, int], ...]) -> tuple:
    (x,), (d,) = args, dims
    frame = rule_frame()
    if frame.name != axis_name:
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    _check_perm(perm, axis_name, frame.size)
    source = np.zeros(frame.size, dtypes.int32)
    received = np.zeros(frame.size, bool)
    for src, dst in perm:
        source[dst], received[dst] = src, True
    moved = take(broadcast_batch(x, d, frame.size), source, 0)
    shape = aval(moved).shape
    if received.all():
        return moved, 0
    mask = np.broadcast_to(received.reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    return select(mask, moved, np.zeros(shape, aval(moved).dtype)), 0


def _check_perm(perm: tuple[tuple[int, int], ...], axis_name: Hashable, size: int) -> None:
    sources, dests = [s for s, _ in perm], [d for _, d in perm]
    if len(set(sources)) < len(sources) or len(set(dests)) < len(dests):
        raise ValueError(f"ppermute over {axis_name!r}: perm {list(perm)} repeats a source or a destination")
    if any(not 0 <= i < size for i in sources + dests):
        raise ValueError(f"ppermute over {axis_name!r}: perm {list(perm)} names an example outside 0..{size - 1}")


def _all_to_all_aval(x: ShapedArray, *, axis_name: Hashable, split_axis: int, concat_axis: int,
                     axis_size: int) -> ShapedArray:
    return tiled_all_to_all_aval(x, axis_name, split_axis, concat_axis, axis_size)


all_to_all_p = NamedAxisPrimitive("all_to_all", impl=_per_example_impl("all_to_all"), abstract_eval=_all_to_all_aval,
                                  arity=1, effectful=True)


all_to_all_p.jvp = partial(linear_jvp, all_to_all_p)


@all_to_all_p.def_transpose
def _all_to_all_transpose(ct: Any, x: Any, *, axis_name: Hashable, split_axis: int, concat_axis: int,
                          axis_size: int) -> tuple:
    return (all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis, concat_axis=split_axis,
                              axis_size=axis_size),)


@all_to_all_p.def_batch
def _all_to_all_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable, split_axis: int,
                      concat_axis: int, axis_size: int) -> tuple:
    """Example ``k`` receives block ``k`` (along ``split_axis``) of every example ``j``, and
    concatenates them in ``j``'s order along ``concat_axis``: on the stacked examples, a
    reshape that splits the blocks out, a transpose that swaps the example and block axes,
    and a reshape that merges the examples into ``concat_axis``."""
    (x,), (d,) = args, dims
    if rule_frame().name != axis_name:
        return all_to_all_p.bind(to_front(x, d), axis_name=axis_name, split_axis=split_axis + 1,
                                 concat_axis=concat_axis + 1, axis_size=axis_size), 0
    _check_size("all_to_all", axis_name, axis_size)
    stacked = broadcast_batch(x, d, axis_size)
    shape = aval(stacked).shape
    n, s, c = axis_size, split_axis + 1, concat_axis + 1
    blocks = reshape(stacked, shape[:s] + (n, shape[s] // n) + shape[s + 1:])
    # axes of blocks: 0 the sending example j, s the block k, the rest x's axes (s+1 holds split_axis)
    rest = [a for a in range(1, len(shape) + 1) if a != s]
    rest.insert(c - 1, 0)
    swapped = transpose(blocks, (s, *rest))
    out = aval(swapped).shape
    return reshape(swapped, out[:c] + (out[c] * out[c + 1],) + out[c + 2:]), 0


# --- axis_index ------------------------------------------------------------------------------


def _axis_index_impl(*, axis_name: Hashable) -> np.ndarray:
    axis_frame(axis_name)
    raise ValueError(f"axis_index of {axis_name!r} ran outside the batching of its axis")


axis_index_p = NamedAxisPrimitive("axis_index", impl=_axis_index_impl, arity=0, jvp=NOT_DIFFERENTIABLE,
                                  abstract_eval=lambda *, axis_name: ShapedArray((), dtypes.int32))


@axis_index_p.def_batch
def _axis_index_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis_name: Hashable) -> tuple:
    frame = rule_frame()
    if frame.name != axis_name:
        return axis_index_p.bind(axis_name=axis_name), None
    return np.arange(frame.size, dtype=dtypes.int32), 0


# --- the functions users call ----------------------------------------------------------------


def _mesh(name: Hashable) -> MeshAxes | None:
    """The mesh (in scope inside ``shard_map``) whose axis ``name`` is, unless a vmap binds it."""
    return None if is_vmap_axis(name) else mesh_of_axis(name)


def _size(name: Hashable) -> int:
    mesh = _mesh(name)
    return dict(mesh)[name] if mesh is not None else axis_frame(name).size


def axis_size(axis_name: AxisName) -> int:
    """The number of examples (or processes) along the named axes (the product for a tuple of names)."""
    return int(np.prod([_size(n) for n in _names(axis_name)], dtype=np.int64))


def _repeated(prim: NamedAxisPrimitive, mesh_prim: Any, x: Any, axis_name: AxisName) -> Any:
    names = _names(axis_name)

    def one(leaf: Any) -> Any:
        leaf = _array(leaf)
        for name in names:
            mesh = _mesh(name)
            if mesh is None:
                leaf = prim.bind(leaf, axis_name=name)
            else:
                leaf = mesh_prim.bind(leaf, axis_name=name, mesh=mesh)
                if mesh_prim in INVARIANT_RESULT and not replication_checked(mesh):
                    leaf = pvary_p.bind(leaf, axis_name=name, mesh=mesh)
        return leaf

    return tree_map(one, x)


def psum(x: Any, axis_name: AxisName) -> Any:
    """The sum of ``x`` (a pytree) over the examples of the named axes, for every example."""
    return _repeated(psum_p, mesh_psum_p, x, axis_name)


def pvary(x: Any, axis_name: AxisName) -> Any:
    """``x`` (a pytree), marked as varying over the named mesh axes (no data moves; JAX's
    ``pvary``); over a vmap axis it is ``x`` itself."""
    names = [n for n in _names(axis_name) if _mesh(n) is not None]

    def one(leaf: Any) -> Any:
        leaf = _array(leaf)
        for name in names:
            leaf = pvary_p.bind(leaf, axis_name=name, mesh=_mesh(name))
        return leaf

    return tree_map(one, x)


def pmean(x: Any, axis_name: AxisName) -> Any:
    """The mean of ``x`` (a pytree) over the examples of the named axes; integers give floats."""
    n = axis_size(axis_name)

    def one(leaf: Any) -> Any:
        total = psum(leaf, axis_name)
        dt = dtypes.float_dtype_for(aval(total).dtype)
        mean = div(convert(total, dt), lit(n, dt))
        return weak(mean) if dtypes.is_weak(total) else mean

    return tree_map(one, x)


def pmax(x: Any, axis_name: AxisName) -> Any:
    """The maximum of ``x`` (a pytree) over the examples of the named axes, for every example."""
    return _repeated(pmax_p, mesh_pmax_p, x, axis_name)


def pmin(x: Any, axis_name: AxisName) -> Any:
    """The minimum of ``x`` (a pytree) over the examples of the named axes, for every example."""
    return _repeated(pmin_p, mesh_pmin_p, x, axis_name)


def _axis_index_one(name: Hashable) -> Any:
    mesh = _mesh(name)
    if mesh is None:
        return axis_index_p.bind(axis_name=name)
    return mesh_axis_index_p.bind(axis_name=name, mesh=mesh)


def axis_index(axis_name: AxisName) -> Any:
    """Each example's position along the named axes (row-major over a tuple of names), int32."""
    names = _names(axis_name)
    index = _axis_index_one(names[0])
    for name in names[1:]:
        index = add(mul(index, lit(_size(name), dtypes.int32)), _axis_index_one(name))
    return index


def _gather_one(leaf: Any, name: Hashable, axis: int, tiled: bool) -> Any:
    mesh = _mesh(name)
    if mesh is None:
        return all_gather_p.bind(leaf, axis_name=name, axis=axis, tiled=tiled, axis_size=axis_frame(name).size)
    return mesh_all_gather_p.bind(leaf, axis_name=name, mesh=mesh, axis=axis, tiled=tiled)


def all_gather(x: Any, axis_name: AxisName, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every example's ``x`` (a pytree) stacked along a new ``axis``, or concatenated along
    ``axis`` when ``tiled``; over a tuple of names the first name is the major one."""
    names = _names(axis_name)

    def one(leaf: Any) -> Any:
        leaf = _array(leaf)
        nd = aval(leaf).ndim
        ax = normalize_axis(axis, nd if tiled else nd + 1, "all_gather")
        out = _gather_one(leaf, names[-1], ax, tiled)
        for name in reversed(names[:-1]):
            out = _gather_one(out, name, ax, True)
        return out

    return tree_map(one, x)


def ppermute(x: Any, axis_name: Hashable, perm: Sequence[tuple[int, int]]) -> Any:
    """Each ``(source, destination)`` pair of ``perm`` sends example ``source``'s ``x`` (a
    pytree) to example ``destination``; an example no pair sends to gets zeros."""
    pairs = tuple((int(s), int(d)) for s, d in perm)
    mesh = _mesh(axis_name)
    if mesh is None:
        return tree_map(lambda leaf: ppermute_p.bind(_array(leaf), axis_name=axis_name, perm=pairs), x)
    _check_perm(pairs, axis_name, dict(mesh)[axis_name])
    return tree_map(lambda leaf: mesh_ppermute_p.bind(_array(leaf), axis_name=axis_name, mesh=mesh, perm=pairs), x)


def pshuffle(x: Any, axis_name: Hashable, perm: Sequence[int]) -> Any:
    """Example ``i`` gets example ``perm[i]``'s ``x``: :func:`ppermute` with the pairs ``(perm[i], i)``."""
    return ppermute(x, axis_name, [(int(src), dst) for dst, src in enumerate(perm)])


def all_to_all(x: Any, axis_name: Hashable, split_axis: int, concat_axis: int, *, tiled: bool = False) -> Any:
    """Example ``k`` gets block ``k`` of every example's ``x`` (blocks along ``split_axis``), in
    the examples' order along ``concat_axis``. Without ``tiled`` the split axis must have the
    axis size and is removed, and the examples make a new axis at ``concat_axis``, as in JAX."""
    size = _size(axis_name)
    mesh = _mesh(axis_name)

    def bind(leaf: Any, s: int, c: int) -> Any:
        if mesh is None:
            return all_to_all_p.bind(leaf, axis_name=axis_name, split_axis=s, concat_axis=c, axis_size=size)
        return mesh_all_to_all_p.bind(leaf, axis_name=axis_name, mesh=mesh, split_axis=s, concat_axis=c)

    def one(leaf: Any) -> Any:
        leaf = _array(leaf)
        nd = aval(leaf).ndim
        s = normalize_axis(split_axis, nd, "all_to_all")
        c = normalize_axis(concat_axis, nd, "all_to_all")
        if tiled:
            return bind(leaf, s, c)
        shape = aval(leaf).shape
        if shape[s] != size:
            raise ShapeError(f"all_to_all over {axis_name!r}: dimension {s} of {aval(leaf)} must equal the axis "
                             f"size {size} (or pass tiled=True)")
        e = c if c <= s else c + 1  # where the new axis goes, so that it is at c once the split axis is gone
        expanded = reshape(leaf, shape[:e] + (1,) + shape[e:])
        s2 = s + 1 if s >= e else s
        moved = bind(expanded, s2, e)
        out = aval(moved).shape
        return reshape(moved, out[:s2] + out[s2 + 1:])

    return tree_map(one, x)


def pswapaxes(x: Any, axis_name: Hashable, axis: int, *, tiled: bool = False) -> Any:
    """:func:`all_to_all` with the same split and concat axis: swaps the named axis with ``axis``."""
    return all_to_all(x, axis_name, axis, axis, tiled=tiled)


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0, tiled: bool = False) -> Any:
    """``psum`` of ``x`` (a pytree), of which example ``k`` keeps only block ``k`` along
    ``scatter_dimension`` (one element without ``tiled``, which removes that dimension)."""
    names = _names(axis_name)

    def one(leaf: Any) -> Any:
        leaf = _array(leaf)
        sd = normalize_axis(scatter_dimension, aval(leaf).ndim, "psum_scatter")
        for i, name in enumerate(names):
            last = i == len(names) - 1
            mesh = _mesh(name)
            if mesh is None:
                leaf = psum_scatter_p.bind(leaf, axis_name=name, scatter_dimension=sd, tiled=tiled or not last,
                                           axis_size=axis_frame(name).size)
            else:
                leaf = mesh_psum_scatter_p.bind(leaf, axis_name=name, mesh=mesh, scatter_dimension=sd,
                                                tiled=tiled or not last)
        return leaf

    return tree_map(one, x)
