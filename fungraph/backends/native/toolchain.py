"""The C toolchain of the native engine: find the system compiler, build a generated source into
a shared object in the disk cache, and load it with ctypes.

A build is keyed by the source (a function of the graph's structure), the headers it includes,
the compiler's identity, the flags and the processor (``-march=native`` code from one machine
may not run on another sharing the cache), so a second process, or a second graph with the same
regions, loads the object without compiling.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

HEADER_DIR = Path(__file__).resolve().parent

#: -O3 -march=native vectorises for this processor; -fno-math-errno lets sqrt be an
#: instruction; -ffp-contract=off keeps ``a * b + c`` two roundings, as numpy computes it (the
#: default for GNU C fuses it into an FMA); -fno-trapping-math lets gcc if-convert selects
#: (no result changes); -fopenmp-simd reads ``omp simd`` without the OpenMP runtime (loops split
#: across threads call the process's one pool, :func:`load_pool`, built with ``-pthread``).
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fno-trapping-math", "-fopenmp-simd",
         "-std=gnu11", "-fPIC", "-shared", "-Wno-unknown-pragmas")


#: The pool's source: fgpool.h's implementation, built on its own (see :func:`load_pool`).
POOL_SOURCE = '#define FG_POOL_IMPLEMENTATION\n#include "fgpool.h"\n'


def flags(source: str) -> tuple[str, ...]:
    return FLAGS + (("-pthread",) if source == POOL_SOURCE else ())

#: ``FUNGRAPH_NATIVE_CACHE`` names the folder of built objects (the user cache otherwise).
CACHE_ENV = "FUNGRAPH_NATIVE_CACHE"

BUILD_STATS = {"compiles": 0, "disk_hits": 0, "failures": 0}


class NativeBuildWarning(RuntimeWarning):
    """A generated source did not build; its regions run on the numpy engine instead."""


@dataclass(frozen=True)
class Compiler:
    """A C compiler: its command (``$CC`` split as a shell would) and identity (version text)."""

    command: tuple[str, ...]
    identity: str


@functools.cache
def _compiler_command(cc: str | None, path: str | None) -> tuple[str, ...] | None:
    """The command for ``$CC`` (``cc``), or the first of ``cc``/``gcc`` on ``path``."""
    if cc is not None:
        return tuple(shlex.split(cc)) or None
    for name in ("cc", "gcc"):
        found = shutil.which(name, path=path)
        if found is not None:
            return (found,)
    return None


@functools.cache
def _identify(command: tuple[str, ...]) -> Compiler | None:
    try:
        done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    exe = shutil.which(command[0]) or command[0]
    return Compiler(command, f"{os.path.realpath(exe)} {' '.join(command[1:])}\n{done.stdout.strip()}")


def find_compiler() -> Compiler | None:
    """The C compiler: ``$CC`` when set (a missing one means none), else ``cc`` or ``gcc`` on
    the PATH; None when there is none or it does not answer ``--version``."""
    command = _compiler_command(os.environ.get("CC"), os.environ.get("PATH"))
    return None if command is None else _identify(command)


@functools.cache
def _processor() -> str:
    """What ``-march=native`` depends on: the machine and its CPU's feature flags."""
    text = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "model name", "Features", "CPU part")):
                    text += line
                if line.strip() == "":
                    break
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}\n{text}"


def cache_dir() -> Path:
    """Where built objects are kept: ``$FUNGRAPH_NATIVE_CACHE``, else the user cache
    (``$XDG_CACHE_HOME`` or ``~/.cache``) under ``fungraph/native``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fungraph" / "native"


@functools.cache
def _headers(includes: tuple[str, ...]) -> bytes:
    return b"".join((HEADER_DIR / name).read_bytes() for name in includes if (HEADER_DIR / name).exists())


def build_key(source: str, compiler: Compiler, includes: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source.encode(), _headers(includes), compiler.identity.encode(), " ".join(flags(source)).encode(),
                 _processor().encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:40]


_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.RLock()
_POOL: list[ctypes.CDLL] = []
_POOL_FAILED: set[str] = set()


def build(source: str, includes: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """``source`` built and loaded (from the disk cache when an earlier build made it); None,
    with a :class:`NativeBuildWarning`, when there is no compiler or the build fails. A source
    splitting loops across threads gets the process's pool loaded first (:func:`load_pool`)."""
    compiler = find_compiler()
    if compiler is None:
        return None
    with _LOCK:
        if "fg_parallel(" in source:
            load_pool()
        return _build_locked(compiler, source, includes, ctypes.DEFAULT_MODE)


def load_pool() -> ctypes.CDLL | None:
    """The process's one thread pool (fgpool.h built on its own and loaded ``RTLD_GLOBAL``, so
    every region object's weak ``fg_pool_parallel`` finds it, and all share its workers); None
    when it cannot be built, and then regions run on one thread."""
    compiler = find_compiler()
    if compiler is None:
        return None
    with _LOCK:
        if _POOL:
            return _POOL[0]
        key = build_key(POOL_SOURCE, compiler, ("fgpool.h",))
        if key in _POOL_FAILED:
            return None
        lib = _build_locked(compiler, POOL_SOURCE, ("fgpool.h",), ctypes.RTLD_GLOBAL)
        if lib is None:
            _POOL_FAILED.add(key)
            return None
        lib.fg_pool_workers.restype = ctypes.c_int
        lib.fg_pool_workers.argtypes = []
        _POOL.append(lib)
        return lib


def _build_locked(compiler: Compiler, source: str, includes: tuple[str, ...], mode: int) -> ctypes.CDLL | None:
    key = build_key(source, compiler, includes)
    lib = _LOADED.get(key)
    if lib is not None:
        return lib
    folder = cache_dir()
    target = folder / f"{key}.so"
    if target.exists():
        BUILD_STATS["disk_hits"] += 1
    elif not _compile(compiler, source, folder, target):
        return None
    lib = _LOADED[key] = ctypes.CDLL(str(target), mode=mode)
    return lib


def _compile(compiler: Compiler, source: str, folder: Path, target: Path) -> bool:
    """Compile into a temporary file beside ``target``, then rename it there: a concurrent
    process building the same key finds either nothing or a whole object."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_src = tempfile.mkstemp(suffix=".c", prefix=target.stem + ".", dir=folder)
    except OSError as err:
        warnings.warn(f"native CPU engine: cannot write its build cache {folder}: {err}; the numpy engine "
                      f"runs these regions (set {CACHE_ENV} to a writable folder)", NativeBuildWarning, stacklevel=5)
        BUILD_STATS["failures"] += 1
        return False
    tmp_obj = tmp_src[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        cmd = [*compiler.command, *flags(source), f"-I{HEADER_DIR}", tmp_src, "-o", tmp_obj, "-lm"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.SubprocessError) as err:
            done = subprocess.CompletedProcess(cmd, -1, "", str(err))
        if done.returncode != 0:
            BUILD_STATS["failures"] += 1
            warnings.warn(f"native CPU engine: {' '.join(compiler.command)} failed to build a generated source "
                          f"({tmp_src}); the numpy engine runs these regions. Compiler output:\n"
                          f"{done.stderr.strip()[-2000:]}", NativeBuildWarning, stacklevel=5)
            return False
        os.replace(tmp_obj, target)
        os.replace(tmp_src, target.with_suffix(".c"))
        BUILD_STATS["compiles"] += 1
        return True
    finally:
        for leftover in (tmp_obj,):
            if os.path.exists(leftover):
                os.unlink(leftover)
