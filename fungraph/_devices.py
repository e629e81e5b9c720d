"""JAX's device queries over fungraph's backends: each backend is one device, named by its
``platform`` (the name ``jit(..., backend=)`` and ``device_put`` take). ``cpu`` (numpy) always
exists; ``opencl`` when an OpenCL platform does. ``cpu`` is the default, as ``jit``'s backend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import _mpi
from fungraph.array import Array, hosted
from fungraph.backends import known_backends
from fungraph.sharding import CPU_DEVICE, Device


def default_backend() -> str:
    """The backend ``jit`` uses without ``backend=``: always ``"cpu"``."""
    return "cpu"


def devices(backend: str | None = None) -> list[Device]:
    """The devices of ``backend`` (default: the default backend's); raises ``RuntimeError`` for an
    unknown backend or one this machine cannot run, as ``jax.devices`` does."""
    name = default_backend() if backend is None else backend
    if name not in known_backends():
        raise RuntimeError(f"unknown backend {name!r}; fungraph's backends are {', '.join(known_backends())}")
    if name == "cpu":
        return [CPU_DEVICE]
    try:
        # optional dependency: the OpenCL backend (and pyopencl) loads on first use
        from fungraph.backends.opencl.device import opencl_device

        return [opencl_device()]
    except (ImportError, RuntimeError) as err:
        raise RuntimeError(f"backend 'opencl' is not available: {err}") from None


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Device]:
    """``devices(backend)``: this process's devices (one per backend)."""
    if process_index not in (None, _mpi.process_index()):
        raise ValueError(f"local_devices: this is process {_mpi.process_index()}, got process_index={process_index}")
    return devices(backend)


def device_count(backend: str | None = None) -> int:
    """The devices of all processes (JAX's global count): one per process of an MPI run."""
    return len(devices(backend)) * _mpi.process_count()


def local_device_count(backend: str | None = None) -> int:
    return len(devices(backend))


def process_index() -> int:
    """This process's index among the processes of an MPI run (0 without one)."""
    return _mpi.process_index()


def process_count() -> int:
    """The number of processes of an MPI run (1 without one)."""
    return _mpi.process_count()


def process_indices() -> list[int]:
    """The indices of the processes of the run (``jax.process_indices``)."""
    return list(range(_mpi.process_count()))


def _local_index(shape: tuple[int, ...], sharding: Any, what: str) -> tuple[slice, ...]:
    """This process's block of an array of ``shape`` split by ``sharding`` (fungraph runs one
    device per process, at position ``process_index()`` of the mesh in row-major order)."""
    indices = sharding.devices_indices_map(tuple(shape))
    if len(indices) == 1:
        return next(iter(indices.values()))
    if len(indices) != _mpi.process_count():
        raise ValueError(f"{what}: the sharding's mesh has {len(indices)} devices but the run has "
                         f"{_mpi.process_count()} processes (fungraph runs one device per process)")
    return list(indices.values())[_mpi.process_index()]


def make_array_from_callback(shape: Sequence[int], sharding: Any, data_callback: Callable[[Any], Any],
                             dtype: Any = None) -> Any:
    """This process's block of a global array of ``shape`` split as ``sharding`` says, from
    ``data_callback(index)`` (a tuple of slices into the global array), as JAX calls it per device.
    fungraph's arrays are the process-local blocks ``shard_map`` takes (docs/distributed.md)."""
    index = _local_index(tuple(shape), sharding, "make_array_from_callback")
    block = np.asarray(data_callback(index), dtype=dtype)
    want = tuple(len(range(*s.indices(n))) for s, n in zip(index, shape))
    if block.shape != want:
        raise ValueError(f"make_array_from_callback: data_callback({index}) returned shape {block.shape}, "
                         f"but this process's block of the global shape {tuple(shape)} is {want}")
    return hosted(block)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any, arrays: Sequence[Any]) -> Any:
    """The global array of ``shape`` from this process's device arrays (one: fungraph's
    process-local block, returned as it is after checking its shape)."""
    if len(arrays) != 1:
        raise ValueError(f"make_array_from_single_device_arrays: fungraph has one device per process, got "
                         f"{len(arrays)} arrays")
    want = sharding.shard_shape(tuple(shape))
    if tuple(np.shape(arrays[0])) != tuple(want):
        raise ValueError(f"make_array_from_single_device_arrays: the array of shape {np.shape(arrays[0])} is not "
                         f"this process's block {tuple(want)} of the global shape {tuple(shape)}")
    return arrays[0] if isinstance(arrays[0], Array) else hosted(np.asarray(arrays[0]))


def make_array_from_process_local_data(sharding: Any, local_data: Any,
                                       global_shape: Sequence[int] | None = None) -> Any:
    """The global array whose block on this process is ``local_data`` (fungraph's arrays are
    those blocks); ``global_shape`` defaults to the blocks stacked along the split dimensions."""
    local = np.asarray(local_data)
    if global_shape is not None:
        want = sharding.shard_shape(tuple(global_shape)) if not sharding.is_fully_replicated else tuple(global_shape)
        if local.shape != tuple(want):
            raise ValueError(f"make_array_from_process_local_data: local data of shape {local.shape} is not this "
                             f"process's block {tuple(want)} of the global shape {tuple(global_shape)}")
    return local_data if isinstance(local_data, Array) else hosted(local)


def effects_barrier() -> None:
    """Wait until every effect staged so far has happened: callbacks run in order on the host,
    so only the OpenCL queue, if one was made, has work to finish."""
    import sys

    opencl = sys.modules.get("fungraph.backends.opencl.device")
    if opencl is not None and opencl._DEVICE:
        opencl._DEVICE[0].queue.finish()


def print_environment_info(return_string: bool = False) -> str | None:
    """Versions and devices, as ``jax.print_environment_info`` prints them."""
    import platform
    import sys
    from importlib import metadata

    try:
        version = metadata.version("fungraph")
    except metadata.PackageNotFoundError:
        version = "(not installed)"
    lines = [f"fungraph:    {version}", f"numpy:       {np.__version__}",
             f"python:      {sys.version.replace(chr(10), ' ')}", f"platform:    {platform.platform()}",
             f"backends:    {', '.join(known_backends())}", f"process_count: {_mpi.process_count()}"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None
