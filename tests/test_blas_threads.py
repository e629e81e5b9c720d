"""The CPU engine's BLAS thread count per matrix product (fungraph._blas)."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import _blas as blas


@pytest.fixture
def recorded(monkeypatch):
    """The thread counts set around each product, with OpenBLAS said to default to 4 threads."""
    calls: list[int] = []
    monkeypatch.setattr(blas, "_openblas", lambda: (calls.append, 4))
    monkeypatch.delenv("FUNGRAPH_BLAS_THREADS", raising=False)
    return calls


def test_small_product_runs_on_one_thread_and_restores(recorded, monkeypatch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = np.ones((4, 5), np.float32)
    out = fg.jit(lambda a, b: fnp.dot(a, b))(x, w)
    np.testing.assert_array_equal(np.asarray(out), x @ w)
    assert recorded == [1, 4]


def test_large_product_keeps_openblas_threads(recorded, monkeypatch):
    work = blas.SMALL_PRODUCT
    assert blas.threads_for(work, 4) == 4
    assert blas.threads_for(work - 1, 4) == 1
    assert blas.with_blas_threads(work, lambda: "ran") == "ran"
    assert recorded == []


def test_fixed_thread_count_from_environment(recorded, monkeypatch):
    monkeypatch.setenv("FUNGRAPH_BLAS_THREADS", "3")
    assert blas.threads_for(10, 4) == 3
    monkeypatch.setenv("FUNGRAPH_BLAS_THREADS", "many")
    with pytest.raises(ValueError, match="FUNGRAPH_BLAS_THREADS='many'"):
        blas.threads_for(10, 4)


def test_batched_and_eager_products_agree_with_numpy(recorded, monkeypatch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    expect = np.matmul(a, b)
    np.testing.assert_allclose(np.asarray(fg.jit(fnp.matmul)(a, b)), expect, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fnp.matmul(a, b)), expect, rtol=1e-6)
    assert recorded and recorded[0::2] == [1] * (len(recorded) // 2) and recorded[1::2] == [4] * (len(recorded) // 2)


def test_numpy_openblas_is_found():
    found = blas._openblas()
    if "openblas" in str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]).lower():
        assert found is not None and found[1] >= 1
