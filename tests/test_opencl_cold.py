"""The OpenCL engine's cold start: program binaries cached on disk
(``fungraph/backends/opencl/binaries.py``) make a second process start warm whatever the
driver's own cache holds, a damaged entry is rebuilt from source, the cache can be turned
off, and its key names the driver.

Each process below gets a fresh ``POCL_CACHE_DIR`` so PoCL's own kernel cache cannot be what
makes it warm. Without an OpenCL platform these tests skip, except under ``CI=true`` where a
missing driver is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends.opencl import binaries, engine
from fungraph.jit import clear_caches

pytestmark = pytest.mark.usefixtures("require_opencl")

ROOT = Path(__file__).resolve().parent.parent

#: One process: jit a product with a fused epilogue and a reduction on OpenCL, print the engine's
#: counters and the result as JSON.
CHILD = """
import json, sys
import numpy as np
import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends.opencl.program import ENGINE_STATS

def f(x, w):
    h = fnp.tanh(x @ w + 0.5)
    return h * 2.0 - 1.0, h.sum(axis=0)

x = np.linspace(-1.0, 1.0, 24 * 20, dtype=np.float32).reshape(24, 20)
w = np.cos(np.arange(20 * 12, dtype=np.float32)).reshape(20, 12)
out = fg.jit(f, backend="opencl")(x, w)
print(json.dumps({"stats": ENGINE_STATS, "out": [np.asarray(o).tolist() for o in out]}))
"""


def child_run(cache: Path, pocl_cache: Path) -> dict:
    env = dict(os.environ, FUNGRAPH_OPENCL_CACHE_DIR=str(cache), POCL_CACHE_DIR=str(pocl_cache),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_stored_binary(tmp_path: Path) -> None:
    cache = tmp_path / "fungraph"
    first = child_run(cache, tmp_path / "pocl1")
    assert first["stats"]["programs_built"] == 1 and first["stats"]["binaries_stored"] == 1
    assert len(list(cache.glob("*.bin"))) == 1
    second = child_run(cache, tmp_path / "pocl2")
    assert second["stats"]["programs_loaded"] == 1
    assert second["stats"]["programs_built"] == 0 and second["stats"]["kernels_built"] == 0
    assert second["stats"]["binaries_stored"] == 0
    for a, b in zip(first["out"], second["out"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    x = np.linspace(-1.0, 1.0, 24 * 20, dtype=np.float32).reshape(24, 20)
    w = np.cos(np.arange(20 * 12, dtype=np.float32)).reshape(20, 12)
    h = np.tanh(x @ w + 0.5)
    np.testing.assert_allclose(np.asarray(second["out"][0], np.float32), h * 2.0 - 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(second["out"][1], np.float32), h.sum(axis=0), rtol=1e-5, atol=1e-5)


def f(x):
    return fnp.exp(-x * x) @ x.T + 3.0


def test_a_damaged_entry_is_rebuilt_from_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.CACHE_ENV, str(tmp_path))
    x = np.random.default_rng(3).standard_normal((17, 9)).astype(np.float32)
    want = np.asarray(fg.jit(f)(x))
    clear_caches()
    np.testing.assert_allclose(np.asarray(fg.jit(f, backend="opencl")(x)), want, rtol=1e-5, atol=1e-5)
    (entry,) = tmp_path.glob("*.bin")
    entry.write_bytes(b"not a program binary")
    clear_caches()
    built = engine.ENGINE_STATS["programs_built"]
    np.testing.assert_allclose(np.asarray(fg.jit(f, backend="opencl")(x)), want, rtol=1e-5, atol=1e-5)
    assert engine.ENGINE_STATS["programs_built"] == built + 1
    assert entry.read_bytes() != b"not a program binary"
    clear_caches()
    loaded = engine.ENGINE_STATS["programs_loaded"]
    np.testing.assert_allclose(np.asarray(fg.jit(f, backend="opencl")(x)), want, rtol=1e-5, atol=1e-5)
    assert engine.ENGINE_STATS["programs_loaded"] == loaded + 1


@pytest.mark.parametrize("value", ["0", ""])
def test_the_cache_turns_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(binaries.CACHE_ENV, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert binaries.cache_dir() is None
    clear_caches()
    stored = engine.ENGINE_STATS["binaries_stored"]
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(fg.jit(lambda x: fnp.sin(x) * 4.0 + 2.5, backend="opencl")(x)),
                               np.sin(x) * 4.0 + 2.5, rtol=1e-5, atol=1e-5)
    assert engine.ENGINE_STATS["binaries_stored"] == stored
    assert not list(tmp_path.rglob("*.bin"))


def test_the_cache_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(binaries.CACHE_ENV, raising=False)
    assert binaries.cache_dir() is None


def fake_device(driver: str) -> SimpleNamespace:
    platform = SimpleNamespace(name="Portable Computing Language", version="OpenCL 3.0 PoCL")
    device = SimpleNamespace(name="cpu", version="OpenCL 3.0", driver_version=driver, platform=platform)
    return SimpleNamespace(device=device, cl=SimpleNamespace(VERSION=(2024, 1)))


def test_the_key_names_driver_source_and_options() -> None:
    key = binaries.binary_key(fake_device("3.1"), "kernel source", ["-w"])
    assert key == binaries.binary_key(fake_device("3.1"), "kernel source", ["-w"])
    assert key != binaries.binary_key(fake_device("3.2"), "kernel source", ["-w"])
    assert key != binaries.binary_key(fake_device("3.1"), "kernel source ", ["-w"])
    assert key != binaries.binary_key(fake_device("3.1"), "kernel source", [])


def test_prune_keeps_the_most_recently_used(tmp_path: Path) -> None:
    for k in range(5):
        path = tmp_path / f"{k}.bin"
        path.write_bytes(b"x")
        os.utime(path, (1000 + k, 1000 + k))
    binaries.prune(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == ["3.bin", "4.bin"]
