"""The processes of a multi-process run and the MPI calls collectives make: mpi4py, an
optional dependency, is imported on first use only, so one process without ``mpiexec`` (or
without mpi4py) runs as a world of one.

A mesh lays the processes out row-major (process ``p`` sits at ``unravel_index(p, shape)``);
a collective over one mesh axis runs on the communicator of the processes that differ only
along that axis (``Split`` of the world, made once per mesh shape and axis).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Hashable
from types import TracebackType
from typing import Any

import numpy as np

#: ``((name, size), ...)`` of a mesh, in its axis order: what collectives carry as a parameter
MeshAxes = tuple[tuple[Hashable, int], ...]


#: ``check_comm``: a duplicate of the world for the same-program checks, apart from the programs' own calls
_STATE: dict[str, Any] = {"comm": None, "check_comm": None, "initialized": False, "axis_comms": {}}
#: MPI calls made, by kind (``allreduce_in_place``: with ``MPI.IN_PLACE``; ``overlap_copies``:
#: operands copied first because they partly overlap the result)
MPI_STATS = {"allreduce": 0, "allreduce_in_place": 0, "overlap_copies": 0, "program_checks": 0}
_LOCK = threading.Lock()


def _mpi() -> Any:
    """mpi4py's MPI module (imported lazily: an optional dependency, ``fungraph[distributed]``)."""
    from mpi4py import MPI  # optional dependency, loaded only by multi-process runs
    return MPI


def _launched_by_mpiexec() -> bool:
    return any(k in os.environ for k in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"))


def initialize(abort_on_exception: bool = True) -> None:
    """Join the MPI world (once); with ``abort_on_exception`` an uncaught exception on any
    process prints its traceback and aborts the whole job, as ``python -m mpi4py`` does, so
    that the others never wait for it in a collective."""
    with _LOCK:
        if _STATE["initialized"]:
            return
        try:
            MPI = _mpi()
        except ImportError as err:
            if _launched_by_mpiexec():
                raise ImportError("fungraph.distributed.initialize(): this process was started by mpiexec, but "
                                  "mpi4py is not installed; pip install 'fungraph[distributed]'") from err
            _STATE["initialized"] = True
            return
        _STATE["comm"] = MPI.COMM_WORLD
        _STATE["check_comm"] = MPI.COMM_WORLD.Dup()
        _STATE["initialized"] = True
    if abort_on_exception and process_count() > 1:
        _install_abort_hook()


def _install_abort_hook() -> None:
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        sys.stderr.write(f"fungraph: process {process_index()} of {process_count()} failed; aborting the job\n")
        traceback.print_exception(kind, value, tb)
        sys.stderr.flush()
        abort(1)
        previous(kind, value, tb)

    sys.excepthook = hook


def abort(code: int = 1) -> None:
    """End every process of the job now (``MPI_Abort``)."""
    comm = _STATE["comm"]
    if comm is not None:
        comm.Abort(code)


def world() -> Any:
    """The world communicator, or None for a single process without MPI: a process that
    ``mpiexec`` started joins on first use, any other only through :func:`initialize`."""
    if not _STATE["initialized"] and _launched_by_mpiexec():
        initialize()
    return _STATE["comm"]


def process_count() -> int:
    comm = world()
    return 1 if comm is None else comm.Get_size()


def process_index() -> int:
    comm = world()
    return 0 if comm is None else comm.Get_rank()


def axis_comm(mesh_axes: MeshAxes, axis_name: Hashable) -> Any:
    """The communicator of ``axis_name`` of a mesh over every process (None in a world of
    one). Made by a collective ``Split``, at the first collective over that axis, which every
    process reaches at the same point of the same program."""
    key = (mesh_axes, axis_name)
    sub = _STATE["axis_comms"].get(key)
    if sub is not None:
        return sub
    comm = world()
    shape = tuple(size for _, size in mesh_axes)
    names = [name for name, _ in mesh_axes]
    if int(np.prod(shape, dtype=np.int64)) != (1 if comm is None else comm.Get_size()):
        raise ValueError(f"a mesh of shape {dict(mesh_axes)} has {int(np.prod(shape))} devices, but "
                         f"{process_count()} processes run (one device per process)")
    if comm is None:
        return None
    coords = list(np.unravel_index(comm.Get_rank(), shape))
    a = names.index(axis_name)
    key_along = int(coords[a])
    coords[a] = 0
    color = int(np.ravel_multi_index(coords, shape))
    sub = _STATE["axis_comms"][key] = comm.Split(color, key_along)
    return sub


def axis_position(mesh_axes: MeshAxes, axis_name: Hashable) -> int:
    """This process's coordinate along ``axis_name`` of the mesh."""
    shape = tuple(size for _, size in mesh_axes)
    names = [name for name, _ in mesh_axes]
    return int(np.unravel_index(process_index(), shape)[names.index(axis_name)])


# --- the MPI calls, on contiguous numpy buffers ----------------------------------------------

#: numpy dtypes MPI reduces natively (mpi4py maps them by their buffer format)
_REDUCIBLE = set("bBhHiIlLqQfdFD?")


def _reduction_dtype(dtype: np.dtype) -> np.dtype | None:
    """The dtype a reduction runs in: the array's own when MPI knows it, float32 for the
    narrow floats (bfloat16, float16, float8s) MPI has no type for."""
    return None if dtype.char in _REDUCIBLE and dtype.kind != "b" else np.dtype(np.float32)


def _op(kind: str) -> Any:
    MPI = _mpi()
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "lor": MPI.LOR, "land": MPI.LAND}[kind]


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.nbytes == b.nbytes


def allreduce(comm: Any, x: np.ndarray, out: np.ndarray, kind: str) -> np.ndarray:
    """``out = reduce(x over the communicator)``: one ``Allreduce``, in place when ``out`` is
    ``x``'s buffer; a partial overlap is copied first (MPI forbids aliased buffers)."""
    x = np.asarray(x)
    if x.dtype.kind == "b":
        kind = {"sum": "lor", "max": "lor", "min": "land"}[kind]
        x, out_view = x.view(np.uint8), out.view(np.uint8)
    else:
        out_view = out
    wide = _reduction_dtype(x.dtype)
    if wide is not None:
        MPI_STATS["allreduce"] += 1
        buf = np.array(x, wide)
        comm.Allreduce(_mpi().IN_PLACE, buf, op=_op(kind))
        np.copyto(out_view, buf, casting="unsafe")
        return out
    recv = out_view if out_view.flags.c_contiguous else np.empty(out_view.shape, out_view.dtype)
    MPI_STATS["allreduce"] += 1
    if _same_memory(x, recv) and x.flags.c_contiguous:
        MPI_STATS["allreduce_in_place"] += 1
        comm.Allreduce(_mpi().IN_PLACE, recv, op=_op(kind))
    else:
        overlap = np.shares_memory(x, recv)
        MPI_STATS["overlap_copies"] += overlap
        send = np.array(x) if overlap else np.ascontiguousarray(x)
        comm.Allreduce(send, recv, op=_op(kind))
    if recv is not out_view:
        np.copyto(out_view, recv)
    return out


def _bytes(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def allgather(comm: Any, x: np.ndarray) -> np.ndarray:
    """Every process's ``x`` stacked along a new leading axis: one ``Allgather`` of bytes."""
    x = np.ascontiguousarray(x)
    out = np.empty((comm.Get_size(),) + x.shape, x.dtype)
    comm.Allgather(_bytes(x), out.reshape(-1).view(np.uint8))
    return out


def reduce_scatter(comm: Any, blocks: np.ndarray) -> np.ndarray:
    """``blocks`` (leading axis: one block per process) summed over processes; this process
    keeps its block: one ``Reduce_scatter_block``."""
    narrow = _reduction_dtype(blocks.dtype)
    send = np.ascontiguousarray(blocks, narrow if narrow is not None else blocks.dtype)
    recv = np.empty(send.shape[1:], send.dtype)
    comm.Reduce_scatter_block(send, recv, op=_op("sum"))
    return recv.astype(blocks.dtype, copy=False)


def alltoall(comm: Any, blocks: np.ndarray) -> np.ndarray:
    """Block ``k`` (leading axis) goes to process ``k``; the result holds, in order, the block
    each process sent here: one ``Alltoall`` of bytes."""
    send = np.ascontiguousarray(blocks)
    recv = np.empty_like(send)
    n = comm.Get_size()
    comm.Alltoall(send.reshape(n, -1).view(np.uint8), recv.reshape(n, -1).view(np.uint8))
    return recv


def sendrecv(comm: Any, x: np.ndarray, dest: int | None, source: int | None) -> np.ndarray:
    """Send ``x`` to ``dest`` and receive the same shape from ``source`` (zeros when None):
    one ``Sendrecv`` (``PROC_NULL`` for a missing side)."""
    MPI = _mpi()
    x = np.ascontiguousarray(x)
    out = np.zeros_like(x)
    comm.Sendrecv(_bytes(x), MPI.PROC_NULL if dest is None else dest, 0,
                  out.reshape(-1).view(np.uint8), MPI.PROC_NULL if source is None else source, 0)
    return out


def allgather_objects(value: Any) -> list[Any]:
    """``value`` of every process (pickled; for small control messages such as fingerprints),
    over the checks' communicator."""
    world()
    comm = _STATE["check_comm"]
    return [value] if comm is None else comm.allgather(value)


def same_everywhere(value: int) -> bool:
    """Whether every process passed the same ``value`` (below 2**62): one ``Allreduce`` of
    ``(value, -value)`` with MAX over the checks' communicator."""
    world()
    comm = _STATE["check_comm"]
    if comm is None:
        return True
    MPI_STATS["program_checks"] += 1
    both = np.array([value, -value], np.int64)
    comm.Allreduce(_mpi().IN_PLACE, both, op=_mpi().MAX)
    return int(both[0]) == -int(both[1])
