#!/usr/bin/env bash
# The README's second command: set up, then run ruff, the import contract and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
.venv/bin/python -m ruff check fungraph tests examples benchmarks
# The layer order of docs/architecture.md (contracts in pyproject.toml).
.venv/bin/lint-imports
# One pytest worker per core, at most 4 (PYTEST_WORKERS overrides; 0 runs in this process).
CORES=$(nproc 2>/dev/null || echo 2)
WORKERS=${PYTEST_WORKERS:-$(( CORES < 4 ? CORES : 4 ))}
.venv/bin/python -m pytest -q -n "$WORKERS" "$@"
# Then the multi-process tests (tests/mpi, docs/distributed.md): under mpiexec at 2 and 4
# processes (oversubscribed on small machines), each bounded by a timeout; process 0 reports and
# any failing process fails the run (scripts/mpi_pytest.py). Without mpi4py or mpiexec they are
# skipped, except under CI=true, where that is a failure.
MPIEXEC=.venv/bin/mpiexec
[ -x "$MPIEXEC" ] || MPIEXEC=$(command -v mpiexec || true)
if [ -z "$MPIEXEC" ] || ! .venv/bin/python -c "import mpi4py" >/dev/null 2>&1; then
  if [ "${CI:-}" = "true" ]; then
    echo "CI=true but mpi4py or mpiexec is missing: pip install -e '.[distributed]'" >&2
    exit 1
  fi
  echo "multi-process tests skipped: mpi4py or mpiexec is missing (pip install -e '.[distributed]')" >&2
  exit 0
fi
OVERSUBSCRIBE=""
"$MPIEXEC" --version 2>/dev/null | grep -qi "open mpi" && OVERSUBSCRIBE="--oversubscribe"
for N in 2 4; do
  echo "tests/mpi under mpiexec -n $N"
  # shellcheck disable=SC2086
  timeout 600 "$MPIEXEC" $OVERSUBSCRIBE -n "$N" .venv/bin/python scripts/mpi_pytest.py tests/mpi \
    --ignore=tests/mpi/test_launch.py
done
timeout 600 .venv/bin/python scripts/mpi_pytest.py tests/mpi/test_launch.py
