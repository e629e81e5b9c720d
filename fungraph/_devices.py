"""JAX's device queries over fungraph's backends: each backend is one device, named by its
``platform`` (the name ``jit(..., backend=)`` and ``device_put`` take). ``cpu`` (numpy) always
exists; ``opencl`` when an OpenCL platform does. ``cpu`` is the default, as ``jit``'s backend."""

from __future__ import annotations

from fungraph import _mpi
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
