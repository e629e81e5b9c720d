#!/usr/bin/env bash
# The README's first command: set up, then run the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-env.sh
exec .venv/bin/python examples/demo.py "$@"
