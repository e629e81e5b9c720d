"""Multi-process runs over MPI (JAX's ``jax.distributed``): start the processes with
``mpiexec -n N python script.py``, call :func:`initialize` once in each, then build a mesh of
one device per process and ``shard_map`` over it. See docs/distributed.md."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from fungraph import _mpi
from fungraph.sharding import Device, Mesh


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
