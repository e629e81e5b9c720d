"""Multi-process benchmarks over MPI (docs/distributed.md).

    python benchmarks/bench_distributed.py            # launches the runs below with mpiexec

1. allreduce: ``psum`` of float32 arrays from 4 B to 40 MB inside ``jit(shard_map)`` against
   raw mpi4py ``comm.Allreduce`` on preallocated buffers, at 2 and 4 processes (target: 40 MB
   within 1.1x). Each size interleaves the two, and a round's time is the slowest process's.
2. a data-parallel MLP step (784-1024-1024-10, global batch 2048, float32: loss, gradient with
   the psum, SGD update) at 1, 2 and 4 processes, with the speed-up over one process and the
   machine's load average (processes share the cores: ``nproc`` here, and other work).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SIZES_BYTES = [4, 40, 400, 4_000, 40_000, 400_000, 4_000_000, 40_000_000]


def _rounds(comm, fn, repeat: int) -> float:
    """Median over rounds of the slowest process's seconds per call."""
    times = []
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times.append(comm.allreduce(time.perf_counter() - t0, op=_max()))
    return statistics.median(times)


def _max():
    from mpi4py import MPI
    return MPI.MAX


def allreduce_worker() -> None:
    import fungraph as fg
    from fungraph import lax
    from fungraph.sharding import PartitionSpec as P
    fg.distributed.initialize()
    from fungraph import _mpi
    comm = _mpi.world()
    n, rank = fg.process_count(), fg.process_index()
    mesh = fg.make_mesh((n,), ("dp",))
    psum = fg.jit(fg.shard_map(lambda v: lax.psum(v, "dp"), mesh=mesh, in_specs=P("dp"), out_specs=P()))
    if rank == 0:
        print(f"allreduce (float32 sum) over {n} processes: median of the slowest process")
        print(f"{'bytes':>10} {'mpi4py':>11} {'fungraph':>11} {'ratio':>6}")
    for nbytes in SIZES_BYTES:
        x = np.full(max(nbytes // 4, 1), rank + 1.0, np.float32)
        recv = np.empty_like(x)
        number = 3 if nbytes >= 4_000_000 else 50
        repeat = 7 if nbytes >= 4_000_000 else 9

        def raw(x=x, recv=recv, number=number):
            for _ in range(number):
                comm.Allreduce(x, recv)

        def ours(x=x, number=number):
            for _ in range(number):
                psum(x)  # dropped, as raw's result is overwritten: the engine reuses the buffer

        assert float(psum(x)[0]) == n * (n + 1) / 2
        t_raw, t_ours = [], []
        for _ in range(2):  # interleaved
            t_raw.append(_rounds(comm, raw, repeat) / number)
            t_ours.append(_rounds(comm, ours, repeat) / number)
        a, b = min(t_raw), min(t_ours)
        if rank == 0:
            print(f"{nbytes:>10} {a * 1e6:>9.1f}us {b * 1e6:>9.1f}us {b / a:>6.2f}")


def mlp_worker() -> None:
    import fungraph as fg
    import fungraph.numpy as fnp
    from fungraph import lax, nn
    from fungraph.sharding import PartitionSpec as P
    fg.distributed.initialize()
    from fungraph import _mpi
    comm = _mpi.world()
    n, rank = fg.process_count(), fg.process_index()
    sizes, batch = (784, 1024, 1024, 10), 2048
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]

    def local_step(ps, x, y):
        def loss(q):
            h = x
            for w in q[:-1]:
                h = nn.relu(h @ w)
            return lax.psum(-fnp.sum(y * nn.log_softmax(h @ q[-1])), "dp") / batch
        value, grads = fg.value_and_grad(loss)(ps)
        return [p - 0.01 * g for p, g in zip(ps, grads)], value

    mesh = fg.make_mesh((n,), ("dp",))
    step = fg.jit(fg.shard_map(local_step, mesh=mesh, in_specs=(P(), P("dp"), P("dp")), out_specs=(P(), P())))
    mine = np.split(x, n)[rank], np.split(y, n)[rank]
    state = {"p": params}

    def one():
        state["p"], _ = step(state["p"], *mine)

    one()
    if comm is None:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            one()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
    else:
        t = _rounds(comm, one, 5)
    if rank == 0:
        print(f"MLP_STEP {n} {t:.6f}")


def _launch(n: int, mode: str) -> str:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [str(mpiexec), "-n", str(n), sys.executable, __file__, mode]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main() -> None:
    print(f"{os.cpu_count()} cores; load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for n in (2, 4):
        print(_launch(n, "allreduce"))
    steps = {}
    for n in (1, 2, 4):
        out = _launch(n, "mlp")
        steps[n] = float(next(line for line in out.splitlines() if line.startswith("MLP_STEP")).split()[2])
    print("data-parallel MLP 784-1024-1024-10, global batch 2048, float32, one BLAS thread per process")
    for n, t in steps.items():
        print(f"  {n} process{'es' if n > 1 else '  '}: {t * 1e3:8.1f} ms/step  speed-up {steps[1] / t:.2f}x")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "main"
    {"main": main, "allreduce": allreduce_worker, "mlp": mlp_worker}[mode]()
