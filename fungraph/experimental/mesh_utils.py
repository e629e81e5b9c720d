"""``jax.experimental.mesh_utils``: device arrays for ``Mesh``. fungraph runs one device per
process, so a mesh's devices are the processes', laid out row-major (as ``make_mesh`` does)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph.distributed import process_devices

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False, allow_split_physical_axes: bool = False) -> np.ndarray:
    """The devices (default: every process's) as an array of ``mesh_shape``."""
    pool = process_devices() if devices is None else np.asarray(list(devices), dtype=object)
    shape = tuple(int(s) for s in mesh_shape)
    if int(np.prod(shape, dtype=np.int64)) != pool.size:
        raise ValueError(f"create_device_mesh: a mesh of shape {shape} needs {int(np.prod(shape))} devices, "
                         f"but {pool.size} are given (fungraph has one device per process)")
    return pool.reshape(shape)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh of ``mesh_shape * dcn_mesh_shape`` devices (each axis the product), the inner
    blocks of ``mesh_shape`` devices contiguous in process order, as JAX lays out slices."""
    inner, outer = tuple(int(s) for s in mesh_shape), tuple(int(s) for s in dcn_mesh_shape)
    if len(inner) != len(outer):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {inner} and dcn_mesh_shape {outer} differ in rank")
    blocks = create_device_mesh((int(np.prod(outer)), int(np.prod(inner))), devices)
    grid = blocks.reshape(outer + inner)
    order = [k for pair in zip(range(len(outer)), range(len(outer), 2 * len(outer))) for k in pair]
    return grid.transpose(order).reshape(tuple(o * i for o, i in zip(outer, inner)))
