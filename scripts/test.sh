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
exec .venv/bin/python -m pytest -q -n "$WORKERS" "$@"
