#!/usr/bin/env bash
# Create .venv (if needed) and install fungraph with its test, OpenCL and distributed (mpi4py, mpich) extras; when running
# as root without an OpenCL driver, install PoCL (a CPU OpenCL driver) from Debian's packages, a C
# compiler (gcc, for the native CPU engine: docs/native.md) when `cc` is missing, and Graphviz
# (optional, for rendering graphs to SVG) when `dot` is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
PKGS=""
ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || PKGS="pocl-opencl-icd"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || PKGS="$PKGS gcc libc6-dev"   # native CPU engine
command -v dot >/dev/null 2>&1 || PKGS="$PKGS graphviz"   # optional: SVG rendering and its test
if [ "$(id -u)" = 0 ] && [ -n "$PKGS" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PKGS >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import fungraph, pytest, xdist, hypothesis, pyopencl, jax, importlinter, mpi4py" >/dev/null 2>&1 \
    || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[test,opencl,distributed]"
  touch .venv/.installed
fi
