"""Multi-process runs over MPI (JAX's ``jax.distributed``): start the processes with
``mpiexec -n N python script.py``, call :func:`initialize` once in each, then build a mesh of
one device per process and ``shard_map`` over it. See docs/distributed.md."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from fungraph import _mpi
from fungraph.array import Array, hosted
from fungraph.jit import jit
from fungraph.primitives._rules import aval
from fungraph.primitives.shape import reshape, transpose
from fungraph.primitives.shard_map import per_device_map
from fungraph.sharding import Device, Mesh, PartitionSpec, get_mesh
from fungraph.tree_util import tree_broadcast, tree_flatten, tree_leaves, tree_map, tree_unflatten


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, abort_on_exception: bool = True) -> None:
    """Join the MPI job this process was started in (``mpiexec``); a process started alone
    is a job of one. ``num_processes``/``process_id``, when given, are checked against
    MPI's (the launcher decides them; ``coordinator_address`` is JAX's and unused). With
    ``abort_on_exception`` an uncaught exception on any process aborts the whole job."""
    _mpi.initialize(abort_on_exception=abort_on_exception)
    if num_processes is not None and num_processes != _mpi.process_count():
        raise ValueError(f"initialize(num_processes={num_processes}), but mpiexec started "
                         f"{_mpi.process_count()} processes")
    if process_id is not None and process_id != _mpi.process_index():
        raise ValueError(f"initialize(process_id={process_id}), but MPI gave this process rank {_mpi.process_index()}")


def is_initialized() -> bool:
    return bool(_mpi._STATE["initialized"])


def shutdown() -> None:
    """Nothing to do: mpi4py finalises MPI when the process exits."""


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[Hashable], axis_types: Any = None, *,
              devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh of the processes (one device each), laid out row-major over ``axis_shapes``
    (JAX's ``jax.make_mesh``); their product must be the number of processes. ``axis_types``
    (one ``AxisType`` per axis) are recorded on the mesh; ``devices`` must be the processes'."""
    shape = tuple(int(s) for s in axis_shapes)
    names = tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis sizes {shape} for {len(names)} names {names}")
    n = _mpi.process_count()
    if int(np.prod(shape, dtype=np.int64)) != n:
        raise ValueError(f"make_mesh{shape}: a mesh of {int(np.prod(shape))} devices, but {n} processes run (one "
                         f"device each; start them with mpiexec -n {int(np.prod(shape))})")
    pool = process_devices()
    if devices is not None and [getattr(d, "process_index", None) for d in devices] != \
            [d.process_index for d in pool]:
        raise ValueError(f"make_mesh: devices must be the {n} processes' devices in process order "
                         "(fungraph runs one device per process)")
    return Mesh(pool.reshape(shape), names, axis_types)


def process_devices() -> np.ndarray:
    """The devices of the run, one per process in process order (a 1-d object array)."""
    n = _mpi.process_count()
    devices = np.empty(n, dtype=object)
    for p in range(n):
        devices[p] = Device("cpu", "cpu", id=p, process_index=p)
    return devices


class _PmapAxis:
    """The axis of a ``pmap`` given no ``axis_name``: a name no user code can refer to."""

    def __repr__(self) -> str:
        return "<pmap axis>"


def pmap(fun: Callable[..., Any], axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Any = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: Any = ()) -> Callable[..., Any]:
    """JAX's ``pmap`` with one local device per process: each process passes arrays whose
    mapped axis (``in_axes``: an axis or None per argument, a pytree prefix) has size 1,
    ``fun`` runs once per process on its slice, collectives over ``axis_name`` run over the
    processes, and each output gets a mapped axis of size 1 where ``out_axes`` puts it (None:
    the output is the process's own unmapped value). Built on ``shard_map`` over a mesh of
    the processes, with ``pmap``'s gradients (a reduction's transpose sums)."""
    statics = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) else tuple(
        static_broadcasted_argnums)
    name = axis_name if axis_name is not None else _PmapAxis()

    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        static = {i: args[i] for i in statics}
        dynamic = [a for i, a in enumerate(args) if i not in static]
        axes = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
        if isinstance(axes, tuple) and statics:
            axes = tuple(a for i, a in enumerate(axes) if i not in static)
        leaves, tree = tree_flatten(tuple(dynamic))
        flat_axes = [_mapped_axis(x, ax) for x, ax in zip(leaves, _flat_in_axes(axes, tuple(dynamic)))]
        mesh = make_mesh((_mpi.process_count(),), (name,))

        def body(*xs: Any) -> Any:
            xs = [x if ax is None else reshape(x, _dropped(aval(x).shape, ax)) for x, ax in zip(xs, flat_axes)]
            rebuilt = list(tree_unflatten(tree, xs))
            full = [static[i] if i in static else rebuilt.pop(0) for i in range(len(args))]
            out = fun(*full)
            return tree_map(lambda ax, o: o if ax is None else reshape(o, (1,) + aval(o).shape),
                            _out_axes_for(out_axes, out), out, is_leaf=lambda v: v is None)

        specs = [PartitionSpec() if ax is None else PartitionSpec(*(None,) * ax, name) for ax in flat_axes]
        out_specs = tree_map(lambda ax: PartitionSpec() if ax is None else PartitionSpec(name), out_axes,
                             is_leaf=lambda v: v is None)
        result = jit(per_device_map(body, mesh, tuple(specs), out_specs), backend=backend or "cpu")(*leaves)
        return tree_map(lambda ax, r: r if ax is None else _move_mapped_axis(r, ax),
                        _out_axes_for(out_axes, result), result, is_leaf=lambda v: v is None)

    return mapped


def _mapped_axis(x: Any, axis: Any) -> int | None:
    """``axis`` of ``x`` (an ``in_axes`` entry) as a non-negative axis, checked to have size 1."""
    if axis is None:
        return None
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"pmap: in_axes entries must be ints or None, got {axis!r}")
    shape = np.shape(x)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"pmap: in_axes={axis} for an argument of shape {shape}, which has no axis {axis}")
    axis = int(axis) % len(shape)
    if shape[axis] != 1:
        raise ValueError(f"pmap: an argument mapped over axis {axis} has shape {shape}, but each process has 1 "
                         f"local device, so that axis must have size 1 ({_mpi.process_count()} processes make the "
                         f"global axis)")
    return axis


def _out_axes_for(out_axes: Any, out: Any) -> Any:
    """``out_axes`` (a pytree prefix of ``out``) with one entry per leaf of ``out``."""
    return tree_broadcast(out_axes, out, is_leaf=lambda v: v is None)


def _move_mapped_axis(r: Any, axis: Any) -> Any:
    """A pmap result with its size-1 mapped axis moved from the front to ``out_axes``'s ``axis``."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"pmap: out_axes entries must be ints or None, got {axis!r}")
    ndim = np.ndim(r)
    if not -ndim <= axis < ndim:
        raise ValueError(f"pmap: out_axes={axis} for an output of shape {np.shape(r)[1:]}")
    perm = list(range(1, ndim))
    perm.insert(int(axis) % ndim, 0)
    return r if perm[0] == 0 else transpose(r, perm)


def _dropped(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1:]


def _flat_in_axes(in_axes: Any, args: tuple) -> list[Any]:
    """One axis (0 or None) per leaf of ``args``: ``in_axes`` is a pytree prefix of them."""
    full = tree_broadcast(in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args), args,
                          is_leaf=lambda x: x is None)
    return tree_flatten(full, is_leaf=lambda x: x is None)[0]


def reshard(xs: Any, out_shardings: Any) -> Any:
    """``xs`` laid out as ``out_shardings`` (a sharding or ``PartitionSpec`` per leaf, or one for
    all). A layout over one device (or a replicated one) keeps each array as it is; fungraph
    splits arrays over processes only inside ``shard_map`` (docs/distributed.md)."""
    for sharding in tree_leaves(out_shardings, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec)):
        spec = sharding if isinstance(sharding, PartitionSpec) else getattr(sharding, "spec", PartitionSpec())
        mesh = getattr(sharding, "mesh", None) or get_mesh()
        if spec.axis_names() and mesh is not None and mesh.size > 1:
            raise NotImplementedError(f"reshard to {sharding} over a mesh of {mesh.size} devices: fungraph splits "
                                      "arrays over processes only inside shard_map (docs/distributed.md)")
    return tree_map(lambda x: x if isinstance(x, Array) or not isinstance(x, (np.ndarray, np.generic)) else
                    hosted(np.array(x)), xs)
