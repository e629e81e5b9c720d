"""Compiling a new program's kernels in helper processes (``fungraph/backends/opencl/
compile_pool.py``): the helpers compile a share, the results are those of the engine alone, a
helper that fails or hangs is dropped without changing a result, and the pool is used only on
PoCL with its kernel cache on, for programs compiled now and large enough to gain.

The thresholds are lowered here so that small programs use the helpers; the device is taken
for PoCL where it is not (helpers then only repeat the launches, which any driver runs).
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends.opencl import compile_pool, get_device
from fungraph.backends.opencl.kernels.spec import KernelSpec, exact_launches
from fungraph.backends.opencl.program import ENGINE_STATS, kernel_specs
from fungraph.jit import clear_caches

pytestmark = pytest.mark.usefixtures("require_opencl")


def mlp_loss(params: list, x: np.ndarray, y: np.ndarray) -> fg.Array:
    h = x
    for w, b in params[:-1]:
        h = fg.nn.relu(h @ w + b)
    w, b = params[-1]
    return fnp.mean((h @ w + b - y) ** 2)


def problem() -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    sizes = [12, 20, 16, 3]
    params = [(rng.standard_normal((a, b)).astype(np.float32) * 0.3, rng.standard_normal(b).astype(np.float32))
              for a, b in zip(sizes, sizes[1:])]
    return params, rng.standard_normal((9, 12)).astype(np.float32), rng.standard_normal((9, 3)).astype(np.float32)


@pytest.fixture
def eager_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Helpers for every program compiled in the test, one of them, started afresh."""
    compile_pool.close_pool()
    monkeypatch.setattr(compile_pool, "MIN_WORK", 0.0)
    monkeypatch.setattr(compile_pool, "CACHED_BUILD_CPU", -1.0)
    monkeypatch.setattr(compile_pool, "pocl_cache_on", lambda info: True)
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "1")
    clear_caches()
    yield
    compile_pool.close_pool()
    clear_caches()


def grads_on_opencl() -> list[np.ndarray]:
    params, x, y = problem()
    g = fg.jit(fg.grad(mlp_loss), backend="opencl")(params, x, y)
    return [np.asarray(leaf) for leaf in fg.tree_leaves(g)]


def grads_on_cpu() -> list[np.ndarray]:
    params, x, y = problem()
    return [np.asarray(leaf) for leaf in fg.tree_leaves(fg.jit(fg.grad(mlp_loss))(params, x, y))]


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_helpers_compile_a_share_and_the_results_are_the_engines(eager_pool: None) -> None:
    before = ENGINE_STATS["kernels_compiled_in_helpers"]
    with_helpers = grads_on_opencl()
    assert ENGINE_STATS["kernels_compiled_in_helpers"] > before
    assert len(compile_pool._POOL) == 1 and compile_pool._POOL[0].proc.poll() is None
    clear_caches()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(compile_pool.WORKERS_ENV, "0")
        alone = ENGINE_STATS["kernels_compiled_in_helpers"]
        without = grads_on_opencl()
        assert ENGINE_STATS["kernels_compiled_in_helpers"] == alone
    for a, b in zip(with_helpers, without):
        np.testing.assert_array_equal(a, b)
    assert_close(with_helpers, grads_on_cpu())


def test_a_helper_is_reused_by_the_next_program(eager_pool: None) -> None:
    grads_on_opencl()
    (worker,) = compile_pool._POOL
    before = ENGINE_STATS["kernels_compiled_in_helpers"]
    x = np.linspace(-2.0, 2.0, 4096, dtype=np.float32).reshape(64, 64)
    out = fg.jit(lambda a: (fnp.tanh(a @ a.T) * 3.0, fnp.exp(a).sum(axis=1), (a * a).max()), backend="opencl")(x)
    assert ENGINE_STATS["kernels_compiled_in_helpers"] > before
    assert compile_pool._POOL == [worker]
    np.testing.assert_allclose(np.asarray(out[0]), np.tanh(x @ x.T) * 3.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[1]), np.exp(x).sum(axis=1), rtol=1e-5)
    assert float(np.asarray(out[2])) == float((x * x).max())


HELPERS_THAT_FAIL = ["import sys; sys.exit(3)\n",                                      # dies
                     "import sys, time\nsys.stdin.readline()\ntime.sleep(60)\n",       # never answers
                     "print('not json', flush=True)\nimport sys; sys.stdin.read()\n"]   # answers nonsense


@pytest.mark.parametrize("script", HELPERS_THAT_FAIL)
def test_a_failing_or_silent_helper_is_dropped_and_nothing_changes(
        eager_pool: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    path = tmp_path / "helper.py"
    path.write_text(script)
    monkeypatch.setattr(compile_pool, "_SCRIPT", path)
    monkeypatch.setattr(compile_pool, "MIN_TIMEOUT", 1.0)
    monkeypatch.setattr(compile_pool, "TIMEOUT_FACTOR", 0.0)
    before = ENGINE_STATS["kernels_compiled_in_helpers"]
    assert_close(grads_on_opencl(), grads_on_cpu())
    assert ENGINE_STATS["kernels_compiled_in_helpers"] == before
    assert compile_pool._POOL == []


#: Answers each job twice, first under an earlier job's number (as an answer left unread by a
#: warm-up that raised would be), compiling nothing.
STALE_THEN_TRUE = """
import json, sys
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps({"id": job["id"] - 1, "ok": False}))
    print(json.dumps({"id": job["id"], "ok": True}), flush=True)
"""


def test_an_answer_counts_only_for_its_own_job(eager_pool: None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "helper.py"
    path.write_text(STALE_THEN_TRUE)
    monkeypatch.setattr(compile_pool, "_SCRIPT", path)
    before = ENGINE_STATS["kernels_compiled_in_helpers"]
    assert_close(grads_on_opencl(), grads_on_cpu())
    assert ENGINE_STATS["kernels_compiled_in_helpers"] > before
    assert len(compile_pool._POOL) == 1


def spec(name: str, source_chars: int, launches: list) -> KernelSpec:
    return KernelSpec(name, "x" * source_chars, [], launches)


def test_no_helpers_for_cached_small_or_foreign_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    compile_pool.close_pool()
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "2")
    dev = SimpleNamespace(info=dataclasses.replace(get_device().info, is_cpu=True,
                                                   platform="Portable Computing Language"))
    big = [spec(f"k{i}", 8000, [((256,), (64,), None)]) for i in range(8)]
    cold = SimpleNamespace(cpu_seconds=1.0, source="", options=(), functions={})
    cached = SimpleNamespace(cpu_seconds=0.01, source="", options=(), functions={})
    assert compile_pool.share(dev, cached, big, []) is None
    assert compile_pool.share(dev, cold, big[:1], []) is None          # ~0.4 s of compilation: not worth a job
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")
    assert compile_pool.share(dev, cold, big, []) is None               # helpers could not hand kernels over
    monkeypatch.delenv("POCL_KERNEL_CACHE")
    other = SimpleNamespace(info=dataclasses.replace(dev.info, platform="NVIDIA CUDA", is_cpu=False))
    assert compile_pool.share(other, cold, big, []) is None
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "0")
    assert compile_pool.share(dev, cold, big, []) is None
    assert compile_pool._POOL == []


def test_helpers_start_before_the_build_of_a_large_program_on_an_empty_cache(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    compile_pool.close_pool()
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "1")
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))      # read here only; PoCL read its own at start
    monkeypatch.setattr(compile_pool, "pocl_cache_on", lambda info: True)
    dev = get_device()
    large = [spec(f"k{i}", 8000, [((256,), (64,), None)]) for i in range(4)]
    (tmp_path / "tempfile_x1").write_bytes(b"")                              # PoCL's, at its start
    compile_pool.start(dev, [spec("k0", 100, [((256,), (64,), None)])])     # ~0.04 s to compile
    assert compile_pool._POOL == []
    (tmp_path / "AB").mkdir()                                                # a cache PoCL may hold it in
    compile_pool.start(dev, large)
    assert compile_pool._POOL == []
    (tmp_path / "AB").rmdir()
    compile_pool.start(dev, large)
    assert len(compile_pool._POOL) == 1 and compile_pool._POOL[0].proc.poll() is None
    compile_pool.close_pool()
    assert compile_pool._POOL == []


def test_worker_count_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "3")
    assert compile_pool.worker_count() == 3
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "0")
    assert compile_pool.worker_count() == 0
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="FUNGRAPH_OPENCL_BUILD_WORKERS='many'"):
        compile_pool.worker_count()
    monkeypatch.delenv(compile_pool.WORKERS_ENV)
    assert 0 <= compile_pool.worker_count() <= compile_pool.MAX_WORKERS


def test_device_sorted_scatter_and_helpers(eager_pool: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels that read indices other kernels wrote (a scatter sorting its indices on the
    device) warm up in program order, and the helpers run them on zeroed slots of their own."""
    from fungraph.backends.opencl.kernels import indexing
    from fungraph.primitives.indexing import scatter_add

    monkeypatch.setattr(indexing, "SCATTER_SORT_MIN", -1)
    rng = np.random.default_rng(11)
    idx = rng.integers(-7, 7, size=(40, 30))
    upd = rng.standard_normal((3, 40, 30, 2)).astype(np.float32)
    before = ENGINE_STATS["kernels_compiled_in_helpers"]
    f = fg.jit(lambda u, i: scatter_add(u, i, 1, (3, 5, 2)), backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(upd, idx)), scatter_add(upd, idx, 1, (3, 5, 2)))
    assert "index order sorted on the device" in f.lower(upd, idx).text
    assert ENGINE_STATS["kernels_compiled_in_helpers"] > before


def test_loop_kernels_are_left_to_the_executable(eager_pool: None) -> None:
    """A loop whose body fits one kernel reads its trip count from its inputs: no helper runs
    it on zeroed buffers (nor does the warm-up)."""
    def f(x: fg.Array) -> tuple:
        y = fg.lax.fori_loop(0, 7, lambda i, c: c * 0.5 + 1.0, x)
        return y, fnp.tanh(x @ x.T).sum(axis=0)

    x = np.linspace(-1.0, 1.0, 48, dtype=np.float32).reshape(6, 8)
    jf = fg.jit(f, backend="opencl")
    got = [np.asarray(o) for o in jf(x)]
    exe = jf.lower(x).compiled.executable
    assert any(spec.kind == "loop" for spec in kernel_specs(exe.steps))
    want = [np.asarray(o) for o in fg.jit(f)(x)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    loops = [s for s in kernel_specs(exe.steps) if s.kind == "loop"]
    assert not compile_pool._kernels(loops, {}, {}, exe.slots)


def test_each_work_group_size_offset_kind_and_grid_side_is_one_compilation() -> None:
    launches = [((5376,), (256,), None), ((64,), (64,), (5376,)), ((512,), (256,), None), ((0,), (64,), None),
                ((1 << 20,), (256,), None)]
    assert compile_pool._specializations(spec("k", 10, launches)) == launches[:2] + launches[4:]


def test_a_probe_is_one_work_group_unless_the_grid_is_wide() -> None:
    assert compile_pool.probe(((5440,), (64,), None)) == ((64,), (64,), None)
    assert compile_pool.probe(((64,), (64,), (5376,))) == ((64,), (64,), (5376,))
    assert compile_pool.probe(((16, 3, 1), (1, 1, 1), None)) == ((1, 1, 1), (1, 1, 1), None)
    wide = compile_pool.probe(((1 << 20, 4), (256, 2), None))
    assert wide == ((65536, 2), (256, 2), None) and wide[0][0] >= compile_pool.SMALL_GRID
    assert compile_pool.probe(((100,), None, None)) == ((100,), None, None)


def test_a_launch_of_several_groups_takes_a_dividing_size_rather_than_a_tail() -> None:
    info = dataclasses.replace(get_device().info, is_cpu=True, compute_units=2, max_work_group_size=4096)
    # the MLP step's panel copy: one compilation and one launch, where a tail had been a second of each
    assert exact_launches(5440, info) == [((5440,), (64,), None)]
    assert exact_launches(192, info) == [((128,), (128,), None), ((64,), (64,), (128,))]   # one group stays one
    many = exact_launches(10_000_064, info)                        # thousands of groups: the tail stays
    assert many[0][1] == (256,) and len(many) == 2


def test_the_helper_script_imports_no_fungraph() -> None:
    tree = ast.parse(Path(compile_pool._SCRIPT).read_text())
    names = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "pyopencl" in names and not any(n.startswith("fungraph") for n in names)
