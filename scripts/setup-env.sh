#!/usr/bin/env bash
# Create .venv (if needed) and install fungraph with its test and OpenCL extras; when running
# as root without an OpenCL driver, install PoCL (a CPU OpenCL driver) from Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ "$(id -u)" = 0 ] && ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd >/dev/null
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import fungraph, pytest, hypothesis, pyopencl, jax" >/dev/null 2>&1 \
    || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test,opencl]"
  touch .venv/.installed
fi
