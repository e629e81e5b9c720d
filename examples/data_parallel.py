"""Data-parallel training over MPI processes: each process holds 1/N of the global batch,
computes the gradient of its part of the loss inside ``shard_map``, and ``psum`` makes it the
global gradient (replicated parameters: JAX's varying/invariant typing transposes the
parameters' implicit ``pvary`` to a ``psum``). Run it as

    mpiexec -n 4 python examples/data_parallel.py      # 4 processes
    python examples/data_parallel.py                   # one process: the same numbers

Every process then compares its parameters with a one-process full-batch run and process 0
prints the losses and the largest difference."""

from __future__ import annotations

import sys

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax, nn
from fungraph.sharding import PartitionSpec as P

SIZES = (32, 64, 10)
GLOBAL_BATCH = 256


def init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(SIZES[:-1], SIZES[1:])]


def data(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((GLOBAL_BATCH, SIZES[0])).astype(np.float32)
    labels = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], GLOBAL_BATCH)]
    return x, labels


def summed_loss(params, x, labels):
    """The cross-entropy summed over the rows given (a process's block, or the whole batch)."""
    h = x
    for w in params[:-1]:
        h = nn.relu(h @ w)
    return -fnp.sum(labels * nn.log_softmax(h @ params[-1]))


def local_step(params, x, labels, lr=0.5):
    """One SGD step on a process's block: the psum makes loss and gradient global."""
    def loss(ps):
        return lax.psum(summed_loss(ps, x, labels), "dp") / GLOBAL_BATCH

    value, grads = fg.value_and_grad(loss)(params)
    return [p - lr * g for p, g in zip(params, grads)], value


def main(steps: int = 20) -> float:
    fg.distributed.initialize()
    n, rank = fg.process_count(), fg.process_index()
    mesh = fg.make_mesh((n,), ("dp",))
    step = fg.jit(fg.shard_map(local_step, mesh=mesh, in_specs=(P(), P("dp"), P("dp")), out_specs=(P(), P())))
    x, labels = data()
    mine = np.split(x, n)[rank], np.split(labels, n)[rank]
    params = init()
    for i in range(steps):
        params, value = step(params, *mine)
        if rank == 0 and (i % 5 == 0 or i == steps - 1):
            print(f"step {i:3d}  loss {float(value):.5f}  ({n} process{'es' if n > 1 else ''})")

    full = fg.jit(lambda ps, x, y: [p - 0.5 * g for p, g in zip(ps, fg.grad(
        lambda q: summed_loss(q, x, y) / GLOBAL_BATCH)(ps))])
    single = init()
    for _ in range(steps):
        single = full(single, x, labels)
    diff = max(float(np.max(np.abs(np.asarray(a) - b))) for a, b in zip(params, single))
    if rank == 0:
        print(f"largest difference from the one-process full-batch run: {diff:.2e}")
    return diff


if __name__ == "__main__":
    worst = main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
    sys.exit(0 if worst < 1e-4 else 1)
