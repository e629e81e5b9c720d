"""Run pytest in every process of an ``mpiexec`` job: process 0 reports; another process is
silent unless it fails, and then prints its own report after process 0's. The exit status
is the process's own, so ``mpiexec`` fails when any process fails. Used by scripts/test.sh:
``timeout 600 mpiexec -n 4 python scripts/mpi_pytest.py tests/mpi``."""

import os
import sys
import tempfile

import pytest


def main(argv: list[str]) -> int:
    os.environ["FUNGRAPH_MPI_TESTS"] = "1"
    rank = int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
    args = ["-q", "-p", "no:cacheprovider", "-n", "0", *argv]
    if rank == 0:
        return int(pytest.main(args))
    with tempfile.TemporaryFile("w+") as log:
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            code = int(pytest.main(args))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        if code:
            log.seek(0)
            sys.stdout.write(f"--- process {rank} failed ---\n" + log.read())
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
