"""The CPU engine's matrix products on OpenBLAS (fungraph._blas): one OpenBLAS thread per call,
large products shared in tiles between the caller and a worker pool."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import _blas as blas
from fungraph import lax


@pytest.fixture
def recorded(monkeypatch):
    """The thread counts set on OpenBLAS around each product, with OpenBLAS said to default to
    4 threads (the setter records and sets nothing, so the real library stays as it is)."""
    calls: list[int] = []
    monkeypatch.setattr(blas, "_openblas", lambda: (calls.append, 4))
    monkeypatch.setattr(blas.CORES, "available", lambda: 1.6)  # contended: products in tiles
    monkeypatch.delenv("FUNGRAPH_BLAS_THREADS", raising=False)
    return calls


def test_small_product_runs_on_one_thread_and_restores(recorded):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = np.ones((4, 5), np.float32)
    before = dict(blas.BLAS_STATS)
    out = fg.jit(lambda a, b: fnp.dot(a, b))(x, w)
    np.testing.assert_array_equal(np.asarray(out), x @ w)
    assert recorded == [1, 4]
    assert blas.BLAS_STATS == before


def test_large_product_is_shared_in_tiles_on_one_openblas_thread(recorded):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((256, 384)).astype(np.float32)
    assert a.shape[0] * a.shape[1] * b.shape[1] >= blas.SMALL_PRODUCT
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 2  # 1.6 cores lately
    assert blas.threads_for(blas.SMALL_PRODUCT - 1, 4) == 1
    split = blas.BLAS_STATS["split_products"]
    got = np.asarray(fg.jit(lambda p, q: p @ q)(a, b))
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)
    assert blas.BLAS_STATS["split_products"] == split + 1
    assert recorded == [1, 4]
    # a tile is the same whichever thread computes it: the product does not depend on the schedule
    for _ in range(3):
        np.testing.assert_array_equal(blas.matmul(a, b), got)


@pytest.mark.parametrize("shapes", [((300, 200), (200, 500)), ((3, 300, 200), (200, 90)), ((160, 300), (2, 300, 270)),
                                    ((4, 64, 128), (4, 128, 512))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_shared_products_agree_with_numpy(recorded, monkeypatch, shapes, dtype):
    """Row and column tiles, stacked and broadcast operands, transposed views, ``out`` given or not."""
    monkeypatch.setattr(blas, "SMALL_PRODUCT", 1)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    expect = np.matmul(a, b)
    assert blas._tiles(a, b, expect.copy(), 8) is not None
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(blas.matmul(a, b), expect, rtol=tol, atol=tol * 100)
    out = np.empty_like(expect)
    assert blas.matmul(a, b, out) is out
    np.testing.assert_allclose(out, expect, rtol=tol, atol=tol * 100)
    a_t = np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)  # a transposed view, same values
    np.testing.assert_allclose(blas.matmul(a_t, b), expect, rtol=tol, atol=tol * 100)


def test_an_output_over_an_operand_is_one_call(recorded, monkeypatch):
    """Tiles would overwrite rows of an operand that later tiles read; numpy copies it first."""
    monkeypatch.setattr(blas, "SMALL_PRODUCT", 1)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    expect = a @ b
    split = blas.BLAS_STATS["split_products"]
    assert blas.matmul(a, b, a) is a
    np.testing.assert_allclose(a, expect, rtol=1e-4, atol=1e-3)
    assert blas.BLAS_STATS["split_products"] == split


def test_a_late_worker_tile_is_taken_back_and_never_written(recorded):
    """A worker that took a tile and lost its core: the caller computes that tile itself and
    returns; the worker's result, when it comes, does not reach ``out``."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1024, 64)).astype(np.float32)
    b = rng.standard_normal((64, 96)).astype(np.float32)
    out = np.zeros((1024, 96), np.float32)
    job = blas._tiles(a, b, out, 8)
    assert job is not None and len(job.out) == 8
    stalled = job._take(blas._WORKER)  # the worker's tile, never finished before the caller is done
    reclaimed = blas.BLAS_STATS["reclaimed_tiles"]
    job.run_caller()
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    assert blas.BLAS_STATS["reclaimed_tiles"] == reclaimed + 1
    out[...] = 0
    assert not job.deliver(stalled, np.ones_like(job.out[stalled]))
    assert not out.any()


def test_a_worker_tile_delivered_in_time_is_kept(recorded):
    a = np.ones((512, 8), np.float32)
    b = np.ones((8, 32), np.float32)
    out = np.zeros((512, 32), np.float32)
    job = blas._tiles(a, b, out, 4)
    mine = job._take(blas._WORKER)
    assert job.deliver(mine, np.full(job.out[mine].shape, 7, np.float32))
    job.run_caller()
    assert (job.out[mine] == 7).all()  # kept, not computed again
    assert (np.delete(out, np.arange(out.shape[0])[np.any(out == 7, axis=1)], axis=0) == 8).all()


def test_large_products_take_the_cores_the_process_had_lately(recorded, monkeypatch):
    """Idle machine time plus the process's own CPU time per second says how many threads a
    large product gets: a busy machine keeps it on the calling thread, unsplit."""
    monkeypatch.setattr(blas.CORES, "available", lambda: 1.2)
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 1
    split = blas.BLAS_STATS["split_products"]
    a = np.ones((512, 256), np.float32)
    np.testing.assert_array_equal(blas.matmul(a, a.T), np.full((512, 512), 256, np.float32))
    assert recorded == [1, 4] and blas.BLAS_STATS["split_products"] == split
    monkeypatch.setattr(blas.CORES, "available", lambda: 2.6)
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 3
    monkeypatch.setattr(blas.CORES, "available", lambda: float("inf"))
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 4


def test_available_cores_count_idle_time_and_the_process_own(monkeypatch):
    cores = blas._Cores()
    samples = iter([(10.0, 100.0, 5.0), (10.5, 100.3, 5.45), (11.0, 100.3, 5.5)])
    monkeypatch.setattr(cores, "_sample", lambda: next(samples))
    clock = iter([10.0, 10.5, 10.55, 11.0])
    monkeypatch.setattr(blas.time, "monotonic", lambda: next(clock))
    assert cores.available() == float("inf")  # nothing measured yet
    assert cores.available() == pytest.approx((0.3 + 0.45) / 0.5)
    assert cores.available() == pytest.approx(1.5)  # within the window: the last measure
    assert cores.available() == pytest.approx((0.0 + 0.05) / 0.5)
    monkeypatch.undo()
    sample = blas._Cores()._sample()
    assert sample is None or (sample[1] >= 0 and sample[2] > 0)


def test_fixed_thread_count_from_environment(recorded, monkeypatch):
    monkeypatch.setenv("FUNGRAPH_BLAS_THREADS", "3")
    assert blas.threads_for(10, 4) == 3
    split = blas.BLAS_STATS["split_products"]
    a = np.ones((512, 256), np.float32)
    np.testing.assert_array_equal(blas.matmul(a, a.T), np.full((512, 512), 256, np.float32))
    assert recorded == [3, 4] and blas.BLAS_STATS["split_products"] == split
    monkeypatch.setenv("FUNGRAPH_BLAS_THREADS", "many")
    with pytest.raises(ValueError, match="FUNGRAPH_BLAS_THREADS='many'"):
        blas.threads_for(10, 4)


def test_batched_and_eager_products_agree_with_numpy(recorded):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    expect = np.matmul(a, b)
    np.testing.assert_allclose(np.asarray(fg.jit(fnp.matmul)(a, b)), expect, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fnp.matmul(a, b)), expect, rtol=1e-6)
    assert recorded and recorded[0::2] == [1] * (len(recorded) // 2) and recorded[1::2] == [4] * (len(recorded) // 2)


def test_convolution_products_follow_the_policy(recorded):
    """The convolution's per-tap products go through the same policy (one OpenBLAS thread here)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME")  # noqa: E731
    got = np.asarray(fg.jit(conv)(x, w))
    recorded_jit = list(recorded)
    eager = np.asarray(conv(x, w))
    assert recorded_jit and recorded_jit[0::2] == [1] * (len(recorded_jit) // 2)
    assert len(recorded) > len(recorded_jit)
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_shares_products_with_its_own_pool(monkeypatch):
    """The parent's pool threads do not exist in a forked child: it starts its own (a job put
    on the parent's queue would wait there for ever, holding the product's arrays)."""
    monkeypatch.setattr(blas.CORES, "available", lambda: 1.6)
    monkeypatch.setattr(blas, "SMALL_PRODUCT", 1)
    a = np.ones((512, 64), np.float32)
    expect = np.full((512, 512), 64, np.float32)
    if blas._openblas() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS: products are plain np.matmul")
    np.testing.assert_array_equal(blas.matmul(a, a.T), expect)  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 when its product is right and a live worker took the job
        try:
            right = np.array_equal(blas.matmul(a, a.T), expect)
            end = time.monotonic() + 10
            while not blas._pool(1).jobs.empty() and time.monotonic() < end:
                time.sleep(0.01)
            os._exit(0 if right and blas._pool(1).jobs.empty() else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 120
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's product did not finish")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_numpy_openblas_is_found():
    found = blas._openblas()
    if "openblas" in str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]).lower():
        assert found is not None and found[1] >= 1


def test_a_quiet_machine_runs_a_large_product_as_one_openblas_call(recorded, monkeypatch):
    """Every OpenBLAS thread has a core: one call on all of them (faster than tiles there)."""
    monkeypatch.setattr(blas.CORES, "available", lambda: 3.9)
    split = blas.BLAS_STATS["split_products"]
    a = np.ones((512, 256), np.float32)
    np.testing.assert_array_equal(blas.matmul(a, a.T), np.full((512, 512), 256, np.float32))
    assert recorded == [4] and blas.BLAS_STATS["split_products"] == split
