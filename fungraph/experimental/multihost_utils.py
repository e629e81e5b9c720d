"""JAX's ``jax.experimental.multihost_utils`` helpers that data-parallel programs call between
steps, over the processes of an MPI job (each a host with one device here): gather a value
from every process, broadcast one process's value, wait for all, assert they agree. In a
process started alone each is the identity (or a no-op)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph import _mpi
from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten


def _agreed_layout(leaves: list[np.ndarray], what: str) -> None:
    """Every process passes leaves of the same shapes and dtypes (an error naming both
    otherwise, instead of a truncated MPI message)."""
    mine = [(x.shape, str(x.dtype)) for x in leaves]
    everyone = _mpi.allgather_objects(mine)
    for p, theirs in enumerate(everyone):
        if theirs != mine:
            raise ValueError(f"{what}: process {_mpi.process_index()} passes leaves {mine}, but process {p} "
                             f"passes {theirs}; every process must pass the same shapes and dtypes")


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Each leaf of every process, stacked along a new leading axis in process order (or
    concatenated along axis 0 with ``tiled``), as numpy arrays on every process."""
    leaves, tree = tree_flatten(in_tree)
    arrays = [np.asarray(x) for x in leaves]
    comm = _mpi.world()
    if comm is None:
        out = [x.reshape((-1,) + x.shape[1:]) if tiled else x[None] for x in arrays]
        return tree_unflatten(tree, out)
    _agreed_layout(arrays, "process_allgather")
    out = []
    for x in arrays:
        stacked = _mpi.allgather(comm, x).reshape((-1,) + x.shape)
        out.append(stacked.reshape((-1,) + x.shape[1:]) if tiled and x.ndim else stacked)
    return tree_unflatten(tree, out)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Every process gets the source's leaves (process 0's, or those of the one process
    passing ``is_source=True``); the others pass leaves of the same shapes and dtypes."""
    leaves, tree = tree_flatten(in_tree)
    arrays = [np.array(x) for x in leaves]
    comm = _mpi.world()
    if comm is None:
        return tree_unflatten(tree, arrays)
    flags = _mpi.allgather_objects(_mpi.process_index() == 0 if is_source is None else bool(is_source))
    if sum(flags) != 1:
        raise ValueError(f"broadcast_one_to_all: {sum(flags)} processes passed is_source=True "
                         f"(processes {[p for p, f in enumerate(flags) if f]}); exactly one must")
    _agreed_layout(arrays, "broadcast_one_to_all")
    root = flags.index(True)
    for x in arrays:
        comm.Bcast(_mpi._bytes(x), root=root)
    return tree_unflatten(tree, arrays)


def sync_global_devices(name: str) -> None:
    """Wait until every process reaches this call with the same ``name`` (an error naming
    both names when one reaches another)."""
    names = _mpi.allgather_objects(str(name))
    for p, other in enumerate(names):
        if other != str(name):
            raise RuntimeError(f"sync_global_devices: process {_mpi.process_index()} waits at {name!r}, "
                               f"process {p} at {other!r}")


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Check that every process passes the same values (JAX's ``assert_equal``)."""
    gathered = process_allgather(in_tree)

    def check(stacked: np.ndarray) -> None:
        if not all(np.array_equal(stacked[0], s, equal_nan=stacked.dtype.kind in "fc") for s in stacked[1:]):
            raise AssertionError(f"{fail_message} the processes hold different values: {stacked!r}".strip())

    tree_map(check, gathered)
