"""Multi-process runs over MPI (JAX's ``jax.distributed``): start the processes with
``mpiexec -n N python script.py``, call :func:`initialize` once in each, then build a mesh of
one device per process and ``shard_map`` over it. See docs/distributed.md."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from fungraph import _mpi
from fungraph.jit import jit
from fungraph.primitives._rules import aval
from fungraph.primitives.shape import reshape
from fungraph.primitives.shard_map import per_device_map
from fungraph.sharding import Device, Mesh, PartitionSpec
from fungraph.tree_util import tree_broadcast, tree_flatten, tree_map, tree_unflatten


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


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[Hashable]) -> Mesh:
    """A mesh of the processes (one device each), laid out row-major over ``axis_shapes``
    (JAX's ``jax.make_mesh``); their product must be the number of processes."""
    shape = tuple(int(s) for s in axis_shapes)
    names = tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis sizes {shape} for {len(names)} names {names}")
    n = _mpi.process_count()
    if int(np.prod(shape, dtype=np.int64)) != n:
        raise ValueError(f"make_mesh{shape}: a mesh of {int(np.prod(shape))} devices, but {n} processes run (one "
                         f"device each; start them with mpiexec -n {int(np.prod(shape))})")
    devices = np.empty(n, dtype=object)
    for p in range(n):
        devices[p] = Device("cpu", "cpu", id=p, process_index=p)
    return Mesh(devices.reshape(shape), names)


class _PmapAxis:
    """The axis of a ``pmap`` given no ``axis_name``: a name no user code can refer to."""

    def __repr__(self) -> str:
        return "<pmap axis>"


def pmap(fun: Callable[..., Any], axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Any = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: Any = ()) -> Callable[..., Any]:
    """JAX's ``pmap`` with one local device per process: each process passes arrays whose
    mapped axis (``in_axes``: 0 or None per argument, a pytree prefix) has size 1, ``fun`` runs
    once per process on its slice, collectives over ``axis_name`` run over the processes, and
    each output gets a leading axis of size 1 (``out_axes=0``). Built on ``shard_map`` over a
    mesh of the processes, with ``pmap``'s gradients (a reduction's transpose sums)."""
    statics = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) else tuple(
        static_broadcasted_argnums)
    if out_axes != 0:
        raise NotImplementedError(f"pmap(out_axes={out_axes!r}): only out_axes=0 is supported")
    name = axis_name if axis_name is not None else _PmapAxis()

    @functools.wraps(fun)
    def mapped(*args: Any) -> Any:
        static = {i: args[i] for i in statics}
        dynamic = [a for i, a in enumerate(args) if i not in static]
        axes = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
        if isinstance(axes, tuple) and statics:
            axes = tuple(a for i, a in enumerate(axes) if i not in static)
        flat_axes = _flat_in_axes(axes, tuple(dynamic))
        leaves, tree = tree_flatten(tuple(dynamic))
        for x, ax in zip(leaves, flat_axes):
            if ax not in (0, None):
                raise NotImplementedError(f"pmap(in_axes={in_axes!r}): only 0 and None are supported")
            if ax == 0 and (np.ndim(x) == 0 or np.shape(x)[0] != 1):
                raise ValueError(f"pmap: an argument mapped over axis 0 has shape {np.shape(x)}, but each process "
                                 f"has 1 local device, so its leading axis must have size 1 "
                                 f"({_mpi.process_count()} processes make the global axis)")
        mesh = make_mesh((_mpi.process_count(),), (name,))

        def body(*xs: Any) -> Any:
            xs = [x[0] if ax == 0 else x for x, ax in zip(xs, flat_axes)]
            rebuilt = list(tree_unflatten(tree, xs))
            full = [static[i] if i in static else rebuilt.pop(0) for i in range(len(args))]
            return tree_map(lambda o: reshape(o, (1,) + aval(o).shape), fun(*full))

        specs = [PartitionSpec(name) if ax == 0 else PartitionSpec() for ax in flat_axes]
        run = per_device_map(body, mesh, tuple(specs), PartitionSpec(name))
        return jit(run, backend=backend or "cpu")(*leaves)

    return mapped


def _flat_in_axes(in_axes: Any, args: tuple) -> list[Any]:
    """One axis (0 or None) per leaf of ``args``: ``in_axes`` is a pytree prefix of them."""
    full = tree_broadcast(in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args), args,
                          is_leaf=lambda x: x is None)
    return tree_flatten(full, is_leaf=lambda x: x is None)[0]
