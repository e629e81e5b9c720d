"""Program binaries cached on disk across processes.

A CPU driver (PoCL) spends most of a cold first call compiling: the program at
``clBuildProgram``, then each kernel's work-group function at its first launch. The binary the
driver hands back after the engine's warm-up launches holds both, so a later process that loads
it (``cl.Program(context, devices, binaries)``) launches at once, whatever the driver's own
cache holds. Entries are keyed by the program's source and build options and by the device,
driver and platform versions, so a driver upgrade never loads a stale binary.

It is off unless ``FUNGRAPH_OPENCL_CACHE_DIR`` names a folder (``0`` or empty: off): on PoCL,
reading a program's binary back compiles every kernel's work-group function once more (for
any work-group size), which about doubles the first process's cold first call, while PoCL's
own cache (``~/.cache/pocl``) already makes a second process warm on a machine that keeps it.
The folder is for where that cache does not persist (a fresh container shipped with a
prepared folder). It keeps the :data:`MAX_ENTRIES` most recently used binaries.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "FUNGRAPH_OPENCL_CACHE_DIR"
#: The most binaries kept: storing one more deletes the least recently used (a load touches
#: its file), so random programs built by a test suite never fill the disk.
MAX_ENTRIES = 256


def cache_dir() -> Path | None:
    """The folder of cached binaries, or None when the cache is off (read on every use, so a
    test may point it elsewhere)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return None if value in ("", "0") else Path(value).expanduser()


def binary_key(dev: Any, source: str, options: Sequence[str]) -> str:
    """A hex digest naming the binary of ``source`` built with ``options`` on ``dev``'s device
    and driver."""
    d = dev.device
    ident = "\0".join([d.name, d.version, d.driver_version, d.platform.name, d.platform.version,
                       ".".join(map(str, dev.cl.VERSION)), " ".join(options), source])
    return hashlib.sha256(ident.encode()).hexdigest()


def load(dev: Any, key: str, options: Sequence[str]) -> Any | None:
    """The built program cached under ``key``, or None when there is none or the driver
    refuses it (a truncated or foreign file is rebuilt from source, never an error)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{key}.bin"
    try:
        binary = path.read_bytes()
        os.utime(path)
    except OSError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dev.cl.Program(dev.context, [dev.device], [binary]).build(options=list(options))
    except (dev.cl.Error, ValueError, RuntimeError):
        return None


def store(dev: Any, key: str, program: Any) -> bool:
    """Write ``program``'s binary under ``key`` (atomically: a process reading at the same time
    sees the old file or the whole new one); False when the cache is off or not writable."""
    folder = cache_dir()
    if folder is None or program is None:
        return False
    try:
        binary = program.get_info(dev.cl.program_info.BINARIES)[0]
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(binary)
            os.replace(tmp, folder / f"{key}.bin")
        finally:
            Path(tmp).unlink(missing_ok=True)
        prune(folder, MAX_ENTRIES)
    except (OSError, dev.cl.Error):
        return False
    return True


def prune(folder: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used binaries in ``folder``."""
    entries = []
    for path in folder.glob("*.bin"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue
    entries.sort(reverse=True)
    for _, path in entries[keep:]:
        path.unlink(missing_ok=True)
