#!/usr/bin/env bash
# The README's second command: set up, then run the whole test suite (and ruff).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
.venv/bin/python -m ruff check fungraph tests examples benchmarks
exec .venv/bin/python -m pytest -q "$@"
