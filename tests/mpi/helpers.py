"""What the multi-process tests share: the process mesh, JAX's mesh of as many host devices,
and global arrays every process builds alike (one seed) and cuts its block from."""

import numpy as np

import fungraph as fg


def world() -> tuple[int, int]:
    return fg.process_count(), fg.process_index()


def mesh() -> fg.sharding.Mesh:
    n, _ = world()
    return fg.make_mesh((n,), ("dp",))


def jax_mesh(jax, shape=None, names=("dp",)):
    n, _ = world()
    shape = (n,) if shape is None else shape
    return jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def global_array(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def block(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """This process's block of ``x`` along ``axis``."""
    n, r = world()
    return np.split(x, n, axis=axis)[r]


def allsum(value: float) -> float:
    """The sum of a host float over processes (a test's own check, through mpi4py)."""
    from fungraph import _mpi
    comm = _mpi.world()
    return value if comm is None else comm.allreduce(value)
