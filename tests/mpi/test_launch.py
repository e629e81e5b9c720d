"""Jobs started with mpiexec from one process (scripts/test.sh runs this file without
mpiexec, after the mpiexec runs of the rest of tests/mpi): the data-parallel example at 2
and 4 processes, and an exception on one process ending the whole job within seconds while
the others wait in a collective."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fungraph as fg

ROOT = Path(__file__).resolve().parents[2]


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but mpiexec is missing (pip install 'fungraph[distributed]')")
        pytest.skip("mpiexec is missing (pip install 'fungraph[distributed]')")
    return found


def _run(n: int, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    if fg.process_count() > 1:
        pytest.fail("tests/mpi/test_launch.py starts its own jobs: run it without mpiexec")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)
    return done, time.perf_counter() - start


@pytest.mark.parametrize("n", [2, 4])
def test_data_parallel_example_matches_the_full_batch_run(n):
    done, _ = _run(n, "examples/data_parallel.py", "7")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"({n} processes)" in done.stdout
    assert "largest difference from the one-process full-batch run" in done.stdout
    assert done.stdout.count("step ") == 3  # only process 0 prints


FAILING = """
import numpy as np, fungraph as fg
from fungraph import lax
from fungraph.sharding import PartitionSpec as P
fg.distributed.initialize()
mesh = fg.make_mesh((fg.process_count(),), ("dp",))
f = fg.jit(fg.shard_map(lambda v: lax.psum(v, "dp"), mesh=mesh, in_specs=P("dp"), out_specs=P()))
f(np.ones(3))
if fg.process_index() == 1:
    raise ValueError("process 1 gives up")
f(np.ones(3))  # the others wait here for process 1
print("not reached")
"""


def test_an_exception_on_one_process_aborts_the_job_within_seconds(tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    done, seconds = _run(3, str(script), timeout=60)
    assert done.returncode != 0
    assert "process 1 gives up" in done.stderr and "aborting the job" in done.stderr
    assert "not reached" not in done.stdout
    assert seconds < 30, seconds
