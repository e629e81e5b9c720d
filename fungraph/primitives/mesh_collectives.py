"""Collectives over the axes of a device mesh, one device per process: what ``psum`` & co
bind inside ``shard_map``. Each runs one MPI call (``fungraph._mpi``) over the processes
along its axis; in a world of one process every axis has size one.

Their gradients follow JAX's varying/invariant typing (``shard_map``'s ``check_vma``): a
value is *varying* over an axis when its processes may hold different values, *invariant*
when they hold the same. ``psum`` takes a varying value to an invariant one, and ``pvary``
(no data movement) an invariant one to a varying one; ``shard_map`` inserts ``pvary`` where
an operation mixes the two, so each ``psum`` reads a varying value. Then the transpose of
``psum`` is ``pvary`` and the transpose of ``pvary`` is ``psum``: the gradient of
``psum(local_loss)`` with respect to replicated parameters is the global gradient.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np

from fungraph import _mpi, dtypes
from fungraph.core import NOT_DIFFERENTIABLE, Primitive, ShapeError, register_lowering
from fungraph.ir import Graph, ShapedArray
from fungraph.primitives._batching import to_front
from fungraph.primitives._rules import aval, linear_jvp
from fungraph.primitives.elementwise import convert, div, eq, mul

MeshAxes = _mpi.MeshAxes


class MeshPrimitive(Primitive):
    """A collective over one mesh axis (params ``axis_name`` and ``mesh``). Each call of a
    compiled graph holding these first checks that every process calls the same graph
    (:func:`checked_executable`); a collective run eagerly (outside such a call) checks that
    every process runs the same collective."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.effectful:
            self.impl = _eagerly_checked(self.name, self.impl)


class _Running(threading.local):
    """How many checked compiled graphs this thread is running (their collectives are checked)."""

    def __init__(self) -> None:
        self.depth = 0


_RUNNING = _Running()


def _eagerly_checked(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **params: Any) -> Any:
        if _RUNNING.depth == 0 and _mpi.process_count() > 1:
            text = [f"{name}[{', '.join(f'{k}={_param_text(v)}' for k, v in sorted(params.items()))}] "
                    f"({', '.join(str(ShapedArray(np.shape(a), np.asarray(a).dtype)) for a in args)})"]
            check_same_call(text, _signature(text))
        return impl(*args, **params)

    return run


# --- the meshes whose axes are in scope -------------------------------------------------------


class _MeshEnv(threading.local):
    def __init__(self) -> None:
        self.meshes: list[MeshAxes] = []
        #: for each mesh in scope, whether its ``shard_map`` checks replication (``check_vma``)
        self.checked: list[bool] = []


_ENV = _MeshEnv()


@contextmanager
def mesh_axes_in_scope(mesh: MeshAxes, checked: bool = True) -> Iterator[None]:
    """Make ``mesh``'s axis names refer to its axes while ``shard_map`` traces its function;
    ``checked=False`` (``pmap``): every value varies, and a reduction's result is a per-device
    copy, so its transpose sums (JAX's ``pmap`` rule)."""
    _ENV.meshes.append(mesh)
    _ENV.checked.append(checked)
    try:
        yield
    finally:
        _ENV.meshes.pop()
        _ENV.checked.pop()


def replication_checked(mesh: MeshAxes) -> bool:
    """Whether the innermost map over ``mesh`` is a ``shard_map`` (not a ``pmap``)."""
    for m, checked in zip(reversed(_ENV.meshes), reversed(_ENV.checked)):
        if m == mesh:
            return checked
    return True


def mesh_of_axis(name: Hashable) -> MeshAxes | None:
    """The innermost mesh in scope with an axis ``name``, or None."""
    for mesh in reversed(_ENV.meshes):
        if any(n == name for n, _ in mesh):
            return mesh
    return None


def typing_mesh() -> MeshAxes | None:
    """The innermost mesh in scope: while it is, staging types values with the axes they vary over."""
    return _ENV.meshes[-1] if _ENV.meshes else None


def staged_types(prim: Primitive, in_vma: Sequence[frozenset], params: Any, out_count: int,
                 mesh: MeshAxes) -> tuple[list[frozenset], list[frozenset], MeshAxes]:
    """What staging an equation inside ``shard_map`` does to types: the axes each input must
    vary over (``pvary`` raises it), those of each output, and the mesh of the ``pvary``s."""
    if isinstance(prim, MeshPrimitive):
        name, own = params["axis_name"], params["mesh"]
        if prim is mesh_axis_index_p:
            return [], [frozenset({name})] * out_count, own
        wanted = in_vma[0] | {name}
        if prim is pvary_p:
            return [in_vma[0]], [wanted], own
        return [wanted], [wanted - {name} if prim in INVARIANT_RESULT else wanted], own
    if prim.name in PER_OPERAND:
        return list(in_vma), list(in_vma), mesh
    graphs = [v for v in params.values() if isinstance(v, Graph)]
    graphs += [g for v in params.values() if isinstance(v, tuple) for g in v if isinstance(g, Graph)]
    # a graph of the equation's outputs, or a JVP graph (primal outputs, then the tangents it gives)
    matching = [g.outvars for g in graphs if len(g.outvars) == out_count]
    matching += [g.outvars[out_count:] for g in graphs if out_count and len(g.outvars) == 2 * out_count]
    if matching:
        out = [frozenset().union(*(outs[j].aval.vma for outs in matching)) for j in range(out_count)]
        return list(in_vma), out, mesh
    union = frozenset().union(*in_vma)
    return [union] * len(in_vma), [union] * out_count, mesh


#: primitives whose each output is its operand of the same position, so has its type
PER_OPERAND = frozenset({"optimization_barrier"})


def axis_size_of(mesh: MeshAxes, name: Hashable) -> int:
    return dict(mesh)[name]


def _comm(mesh: MeshAxes, axis_name: Hashable) -> Any:
    return _mpi.axis_comm(mesh, axis_name)


def _same(x: ShapedArray, **params: Any) -> ShapedArray:
    return x


def _numeric(name: str) -> Callable[..., ShapedArray]:
    def rule(x: ShapedArray, *, axis_name: Hashable, mesh: MeshAxes) -> ShapedArray:
        if x.dtype == dtypes.bool_ and name == "psum":
            raise ShapeError(f"{name} over mesh axis {axis_name!r} is not defined for bool, got {x}")
        return x

    return rule


def _elementwise_batch(prim: Primitive) -> Callable[..., tuple]:
    def batch(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        return prim.bind(args[0], **params), dims[0]

    return batch


# --- psum, pmax, pmin, pvary ------------------------------------------------------------------


def _reduction(kind: str) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    def lowering(out: np.ndarray, x: Any, *, axis_name: Hashable, mesh: MeshAxes) -> np.ndarray:
        comm = _comm(mesh, axis_name)
        if comm is None:
            np.copyto(out, x)
            return out
        return _mpi.allreduce(comm, np.asarray(x), out, kind)

    def impl(x: Any, *, axis_name: Hashable, mesh: MeshAxes) -> np.ndarray:
        x = np.asarray(x)
        return lowering(np.empty(x.shape, x.dtype), x, axis_name=axis_name, mesh=mesh)

    return impl, lowering


def _mesh_reduction(name: str, kind: str) -> MeshPrimitive:
    impl, lowering = _reduction(kind)
    prim = MeshPrimitive(name, impl=impl, abstract_eval=_numeric(name), arity=1, effectful=True,
                         effect_in_outputs=True, inplace=(0,))
    register_lowering(prim, "cpu", lowering)
    prim.batch = _elementwise_batch(prim)
    return prim


mesh_psum_p = _mesh_reduction("mesh_psum", "sum")
mesh_pmax_p = _mesh_reduction("mesh_pmax", "max")
mesh_pmin_p = _mesh_reduction("mesh_pmin", "min")


def _pvary_lowering(out: np.ndarray, x: Any, **params: Any) -> np.ndarray:
    np.copyto(out, x)
    return out


pvary_p = MeshPrimitive("pvary", impl=lambda x, **params: np.array(x), abstract_eval=_same, arity=1, inplace=(0,))
register_lowering(pvary_p, "cpu", _pvary_lowering)
pvary_p.batch = _elementwise_batch(pvary_p)
pvary_p.jvp = partial(linear_jvp, pvary_p)
pvary_p.transpose = lambda ct, x, **params: (mesh_psum_p.bind(ct, **params),)  # pvary^T = psum

mesh_psum_p.jvp = partial(linear_jvp, mesh_psum_p)
mesh_psum_p.transpose = lambda ct, x, **params: (pvary_p.bind(ct, **params),)  # psum^T = pvary


def _extremum_jvp(prim: Primitive) -> Callable[..., tuple]:
    def jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
        """The tangent of the processes that attain the extremum; ties share it equally."""
        (x,), (t,) = primals, tangents
        y = prim.bind(x, **params)
        mask = convert(eq(x, pvary_p.bind(y, **params)), aval(x).dtype)
        return y, div(mesh_psum_p.bind(mul(t, mask), **params), mesh_psum_p.bind(mask, **params))

    return jvp


mesh_pmax_p.jvp = _extremum_jvp(mesh_pmax_p)
mesh_pmin_p.jvp = _extremum_jvp(mesh_pmin_p)


# --- all_gather and psum_scatter ---------------------------------------------------------------


def _all_gather_aval(x: ShapedArray, *, axis_name: Hashable, mesh: MeshAxes, axis: int, tiled: bool) -> ShapedArray:
    n = axis_size_of(mesh, axis_name)
    if tiled:
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"all_gather over {axis_name!r}: tiled axis {axis} is out of bounds for {x}")
        return ShapedArray(x.shape[:axis] + (n * x.shape[axis],) + x.shape[axis + 1:], x.dtype)
    if not 0 <= axis <= x.ndim:
        raise ShapeError(f"all_gather over {axis_name!r}: axis {axis} is out of bounds for {x}")
    return ShapedArray(x.shape[:axis] + (n,) + x.shape[axis:], x.dtype)


def _all_gather_impl(x: Any, *, axis_name: Hashable, mesh: MeshAxes, axis: int, tiled: bool) -> np.ndarray:
    x = np.asarray(x)
    comm = _comm(mesh, axis_name)
    stacked = x[None] if comm is None else _mpi.allgather(comm, x)
    moved = np.moveaxis(stacked, 0, axis)
    if not tiled:
        return moved
    shape = moved.shape
    return moved.reshape(shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])


def _all_gather_lowering(out: np.ndarray, x: Any, *, axis_name: Hashable, mesh: MeshAxes, axis: int,
                         tiled: bool) -> np.ndarray:
    """Axis 0 with a contiguous output: the ``Allgather`` writes straight into it."""
    comm = _comm(mesh, axis_name)
    if axis == 0 and comm is not None and out.flags.c_contiguous and not np.shares_memory(out, np.asarray(x)):
        comm.Allgather(_mpi._bytes(np.asarray(x)), out.reshape(-1).view(np.uint8))
        return out
    np.copyto(out, _all_gather_impl(x, axis_name=axis_name, mesh=mesh, axis=axis, tiled=tiled))
    return out


mesh_all_gather_p = MeshPrimitive("mesh_all_gather", impl=_all_gather_impl, abstract_eval=_all_gather_aval,
                                  arity=1, effectful=True, effect_in_outputs=True)
register_lowering(mesh_all_gather_p, "cpu", _all_gather_lowering)
mesh_all_gather_p.jvp = partial(linear_jvp, mesh_all_gather_p)


def _psum_scatter_aval(x: ShapedArray, *, axis_name: Hashable, mesh: MeshAxes, scatter_dimension: int,
                       tiled: bool) -> ShapedArray:
    n, sd = axis_size_of(mesh, axis_name), scatter_dimension
    if not 0 <= sd < x.ndim:
        raise ShapeError(f"psum_scatter over {axis_name!r}: scatter_dimension {sd} is out of bounds for {x}")
    if tiled:
        if x.shape[sd] % n:
            raise ShapeError(f"psum_scatter over {axis_name!r}: dimension {sd} of {x} is not a multiple of the "
                             f"axis size {n}")
        return ShapedArray(x.shape[:sd] + (x.shape[sd] // n,) + x.shape[sd + 1:], x.dtype)
    if x.shape[sd] != n:
        raise ShapeError(f"psum_scatter over {axis_name!r}: dimension {sd} of {x} must equal the axis size {n} "
                         "(or pass tiled=True)")
    return ShapedArray(x.shape[:sd] + x.shape[sd + 1:], x.dtype)


def _psum_scatter_impl(x: Any, *, axis_name: Hashable, mesh: MeshAxes, scatter_dimension: int,
                       tiled: bool) -> np.ndarray:
    x = np.asarray(x)
    n, sd = axis_size_of(mesh, axis_name), scatter_dimension
    front = np.moveaxis(x, sd, 0)
    blocks = front.reshape((n, front.shape[0] // n) + front.shape[1:])
    comm = _comm(mesh, axis_name)
    mine = blocks[0] if comm is None else _mpi.reduce_scatter(comm, blocks)
    return np.moveaxis(mine, 0, sd) if tiled else np.asarray(mine).reshape(mine.shape[1:])


mesh_psum_scatter_p = MeshPrimitive("mesh_psum_scatter", impl=_psum_scatter_impl, abstract_eval=_psum_scatter_aval,
                                    arity=1, effectful=True, effect_in_outputs=True)
mesh_psum_scatter_p.jvp = partial(linear_jvp, mesh_psum_scatter_p)


@mesh_all_gather_p.def_transpose
def _all_gather_transpose(ct: Any, x: Any, *, axis_name: Hashable, mesh: MeshAxes, axis: int, tiled: bool) -> tuple:
    return (mesh_psum_scatter_p.bind(ct, axis_name=axis_name, mesh=mesh, scatter_dimension=axis, tiled=tiled),)


@mesh_psum_scatter_p.def_transpose
def _psum_scatter_transpose(ct: Any, x: Any, *, axis_name: Hashable, mesh: MeshAxes, scatter_dimension: int,
                            tiled: bool) -> tuple:
    return (mesh_all_gather_p.bind(ct, axis_name=axis_name, mesh=mesh, axis=scatter_dimension, tiled=tiled),)


@mesh_all_gather_p.def_batch
def _all_gather_batch(args: Sequence[Any], dims: Sequence[int | None], *, axis: int, **params: Any) -> tuple:
    return mesh_all_gather_p.bind(to_front(args[0], dims[0]), axis=axis + 1, **params), 0


@mesh_psum_scatter_p.def_batch
def _psum_scatter_batch(args: Sequence[Any], dims: Sequence[int | None], *, scatter_dimension: int,
                        **params: Any) -> tuple:
    return mesh_psum_scatter_p.bind(to_front(args[0], dims[0]), scatter_dimension=scatter_dimension + 1,
                                    **params), 0


# --- ppermute and all_to_all ------------------------------------------------------------------


def _ppermute_impl(x: Any, *, axis_name: Hashable, mesh: MeshAxes, perm: tuple[tuple[int, int], ...]) -> np.ndarray:
    me = _mpi.axis_position(mesh, axis_name) if _mpi.process_count() > 1 else 0
    dest = next((d for s, d in perm if s == me), None)
    source = next((s for s, d in perm if d == me), None)
    comm = _comm(mesh, axis_name)
    x = np.asarray(x)
    if comm is None:
        return np.array(x) if source == me else np.zeros_like(x)
    return _mpi.sendrecv(comm, x, dest, source)


mesh_ppermute_p = MeshPrimitive("mesh_ppermute", impl=_ppermute_impl, abstract_eval=_same, arity=1, effectful=True,
                                effect_in_outputs=True)
mesh_ppermute_p.jvp = partial(linear_jvp, mesh_ppermute_p)
mesh_ppermute_p.transpose = lambda ct, x, *, perm, **params: (
    mesh_ppermute_p.bind(ct, perm=tuple((d, s) for s, d in perm), **params),)
mesh_ppermute_p.batch = _elementwise_batch(mesh_ppermute_p)


def tiled_all_to_all_aval(x: ShapedArray, axis_name: Hashable, split_axis: int, concat_axis: int,
                          n: int) -> ShapedArray:
    """Blocks of ``split_axis`` go out to the ``n`` members of the axis (processes here, the
    examples of a ``vmap``), every member's block comes in along ``concat_axis`` (the tiled
    form; ``lax.all_to_all`` builds the untiled one from it)."""
    if not (0 <= split_axis < x.ndim and 0 <= concat_axis < x.ndim):
        raise ShapeError(f"all_to_all over {axis_name!r}: split_axis {split_axis} or concat_axis {concat_axis} is "
                         f"out of bounds for {x}")
    if x.shape[split_axis] % n:
        raise ShapeError(f"all_to_all over {axis_name!r}: dimension {split_axis} of {x} must be a multiple of the "
                         f"axis size {n}")
    shape = list(x.shape)
    shape[split_axis] //= n
    shape[concat_axis] *= n
    return ShapedArray(tuple(shape), x.dtype)


def _all_to_all_aval(x: ShapedArray, *, axis_name: Hashable, mesh: MeshAxes, split_axis: int,
                     concat_axis: int) -> ShapedArray:
    return tiled_all_to_all_aval(x, axis_name, split_axis, concat_axis, axis_size_of(mesh, axis_name))


def _all_to_all_impl(x: Any, *, axis_name: Hashable, mesh: MeshAxes, split_axis: int,
                     concat_axis: int) -> np.ndarray:
    x = np.asarray(x)
    n = axis_size_of(mesh, axis_name)
    blocks = np.stack(np.split(x, n, axis=split_axis))
    comm = _comm(mesh, axis_name)
    received = blocks if comm is None else _mpi.alltoall(comm, blocks)
    return np.concatenate(list(received), axis=concat_axis)


mesh_all_to_all_p = MeshPrimitive("mesh_all_to_all", impl=_all_to_all_impl, abstract_eval=_all_to_all_aval,
                                  arity=1, effectful=True, effect_in_outputs=True)
mesh_all_to_all_p.jvp = partial(linear_jvp, mesh_all_to_all_p)
mesh_all_to_all_p.transpose = lambda ct, x, *, split_axis, concat_axis, **params: (
    mesh_all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis, **params),)


@mesh_all_to_all_p.def_batch
def _all_to_all_batch(args: Sequence[Any], dims: Sequence[int | None], *, split_axis: int, concat_axis: int,
                      **params: Any) -> tuple:
    return mesh_all_to_all_p.bind(to_front(args[0], dims[0]), split_axis=split_axis + 1,
                                  concat_axis=concat_axis + 1, **params), 0


# --- axis_index -------------------------------------------------------------------------------


def _axis_index_impl(*, axis_name: Hashable, mesh: MeshAxes) -> np.ndarray:
    """No communication (constant folding may run it while only this process compiles)."""
    if int(np.prod([s for _, s in mesh], dtype=np.int64)) != _mpi.process_count():
        raise ValueError(f"a mesh of shape {dict(mesh)} needs one process per device, but "
                         f"{_mpi.process_count()} processes run")
    return np.asarray(_mpi.axis_position(mesh, axis_name), dtypes.int32)


mesh_axis_index_p = MeshPrimitive("mesh_axis_index", impl=_axis_index_impl, arity=0, jvp=NOT_DIFFERENTIABLE,
                                  abstract_eval=lambda **params: ShapedArray((), dtypes.int32))

#: the collectives whose result is the same on every process of the axis (it leaves the
#: value invariant); the others leave it varying
INVARIANT_RESULT = frozenset({mesh_psum_p, mesh_pmax_p, mesh_pmin_p})


# --- every process runs the same program -------------------------------------------------------


def holds_collectives(graph: Graph) -> bool:
    """Whether ``graph`` (or a sub-graph of it) runs a collective over processes."""
    return any(isinstance(e.primitive, MeshPrimitive) or any(holds_collectives(g) for g in e.subgraphs)
               for e in graph.eqns)


#: what ``repr`` adds for an object without its own: an address, which differs between processes
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _param_text(value: Any) -> str:
    if isinstance(value, Graph):
        return "<graph>"
    if isinstance(value, tuple) and any(isinstance(v, Graph) for v in value):
        return f"<{len(value)} graphs>"
    return _ADDRESS.sub("", repr(value))


def program_text(graph: Graph, depth: int = 0) -> list[str]:
    """One line per equation (primitive, static parameters, result types), sub-graphs
    indented below theirs: what must agree between processes (constants' values may not)."""
    pad = "  " * depth
    lines = [f"{pad}graph({', '.join(str(v.aval) for v in graph.invars)})"]
    for e in graph.eqns:
        params = ", ".join(f"{k}={_param_text(v)}" for k, v in e.params.items())
        outs = ", ".join(str(o.aval) for o in e.outputs)
        lines.append(f"{pad}  {e.primitive.name}[{params}] -> {outs}")
        for g in e.subgraphs:
            lines.extend(program_text(g, depth + 2))
    return lines


def _signature(text: list[str]) -> int:
    return int(hashlib.sha256("\n".join(text).encode()).hexdigest()[:15], 16)


def check_same_call(text: list[str], signature: int) -> None:
    """Before a program (a compiled graph, or one eager collective) talks to the other
    processes, check that they all run the same one: one small ``Allreduce`` (on a
    communicator of its own). A process that staged another program (a Python branch on its
    process index, another shape, another cached graph) fails here naming both, instead of
    waiting forever in a collective the others never call."""
    if _mpi.same_everywhere(signature):
        return
    texts = _mpi.allgather_objects(text)
    signatures = [_signature(t) for t in texts]
    me = _mpi.process_index()
    other = next(p for p, s in enumerate(signatures) if s != signature)
    first = next((i for i, (a, b) in enumerate(zip(texts[me], texts[other])) if a != b),
                 min(len(texts[me]), len(texts[other])))

    def line(p: int) -> str:
        return texts[p][first] if first < len(texts[p]) else "<end of program>"

    raise RuntimeError(
        f"process {me} runs a program (signature {signature:015x}) that differs from process {other}'s "
        f"(signature {signatures[other]:015x}); every process must run the same collectives in the same order.\n"
        f"  first difference, line {first}:\n    process {me}: {line(me)}\n    process {other}: {line(other)}")


class CheckedExecutable:
    """A compiled graph holding collectives: each run first checks that every process runs the
    same graph (:func:`check_same_call`); the executable's other attributes pass through."""

    def __init__(self, executable: Any, graph: Graph) -> None:
        self.executable = executable
        self.text = program_text(graph)
        self.signature = _signature(self.text)

    def run(self, args: Any) -> Any:
        check_same_call(self.text, self.signature)
        _RUNNING.depth += 1
        try:
            return self.executable.run(args)
        finally:
            _RUNNING.depth -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executable, name)


def checked_executable(graph: Graph, executable: Any) -> Any:
    """``executable`` of ``graph``, checked at each run when it holds collectives and more
    than one process runs (a graph without collectives never talks to other processes)."""
    if _mpi.process_count() == 1 or not holds_collectives(graph):
        return executable
    return CheckedExecutable(executable, graph)
