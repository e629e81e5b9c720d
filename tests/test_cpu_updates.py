"""Weight updates folded into their matrix product on the CPU engine
(fungraph/backends/cpu_updates.py, fungraph._blas.gemm_update)."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.backends.cpu as cpu
from fungraph import _blas as blas
from fungraph.backends.cpu_updates import update_folds
from fungraph.jit import clear_caches
from fungraph.testing.models import mlp_params, sgd_step


@pytest.fixture
def executables(monkeypatch):
    """The CPU executables made while the test runs, newest last (compiled afresh: caches cleared)."""
    clear_caches()
    made: list[cpu.CpuExecutable] = []
    init = cpu.CpuExecutable.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(cpu.CpuExecutable, "__init__", record)
    return made


def _copy(params):
    return [{k: np.array(v, copy=True) for k, v in p.items()} for p in params]


def _reference_step(params, x, y, lr=0.01):
    """The SGD step in float64 numpy: the new parameters."""
    p64 = [{k: v.astype(np.float64) for k, v in p.items()} for p in params]
    x, y = x.astype(np.float64), y.astype(np.float64)
    acts, pres = [x], []
    for layer in p64[:-1]:
        pres.append(acts[-1] @ layer["w"] + layer["b"])
        acts.append(np.maximum(pres[-1], 0))
    logits = acts[-1] @ p64[-1]["w"] + p64[-1]["b"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    g = (e / e.sum(-1, keepdims=True) - y) / x.shape[0]
    new = [None] * len(p64)
    for i in range(len(p64) - 1, -1, -1):
        gw, gb = acts[i].T @ g, g.sum(0)
        if i:
            g = (g @ p64[i]["w"].T) * (pres[i - 1] > 0)
        new[i] = {"w": p64[i]["w"] - float(lr) * gw, "b": p64[i]["b"] - float(lr) * gb}
    return new


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_update_adds_the_scaled_product_in_place(dtype):
    rng = np.random.default_rng(0)
    for ta in (False, True):
        for tb in (False, True):
            a = rng.standard_normal((20, 30) if ta else (30, 20)).astype(dtype)
            b = rng.standard_normal((40, 20) if tb else (20, 40)).astype(dtype)
            a, b = (a.T if ta else a), (b.T if tb else b)
            c = rng.standard_normal((30, 40)).astype(dtype)
            expect = c.astype(np.float64) - 0.3 * (a.astype(np.float64) @ b.astype(np.float64))
            buf = c.copy()
            assert blas.gemm_update(buf, a, b, -0.3) == (blas._openblas() is not None)
            if blas._openblas() is not None:
                np.testing.assert_allclose(buf, expect, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_gemm_update_declines_what_one_call_cannot_do():
    a = np.ones((8, 4), np.float32)
    b = np.ones((4, 6), np.float32)
    c = np.zeros((8, 6), np.float32)
    assert not blas.gemm_update(c, a.astype(np.float64), b, 1.0)  # mixed dtypes
    assert not blas.gemm_update(c, a[::2], b[:, :3], 1.0)  # shapes do not chain
    assert not blas.gemm_update(np.zeros((8, 12), np.float32)[:, ::2], a, b, 1.0)  # strided c
    assert not blas.gemm_update(c.astype(np.int32), a.astype(np.int32), b.astype(np.int32), 1.0)
    big = np.zeros((8, 8), np.float32)
    assert not blas.gemm_update(big, big, big, 1.0)  # c overlaps an operand
    np.testing.assert_array_equal(c, 0)


def test_mlp_step_folds_the_first_layers_update_with_its_learning_rate(executables):
    params = mlp_params([784, 1024, 1024, 10])
    rng = np.random.default_rng(4)
    x = rng.standard_normal((256, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    step = fg.jit(sgd_step, donate_argnums=0)
    expect = _reference_step(params, x, y)
    new, _ = step(_copy(params), x, y)
    exe = executables[-1]
    folds = update_folds(exe.graph, exe.plan, exe.donated)
    assert exe.folded_updates == len(folds) >= 1
    fold = next(f for f in folds.values() if f.weight.aval.shape == (784, 1024))
    assert fold.scale is not None and fold.alpha == pytest.approx(-0.01)  # the learning rate, folded
    assert fold.lhs in exe.graph.invars  # x itself, not x * lr
    for got, want in zip(new, expect):
        np.testing.assert_allclose(np.asarray(got["w"]), want["w"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(got["b"]), want["b"], rtol=1e-4, atol=1e-5)


def test_donated_updates_match_numpy_subtracted_or_added(executables):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    g = rng.standard_normal((32, 40)).astype(np.float32)
    f1 = fg.jit(lambda w, x, g: w - 0.1 * (x.T @ g), donate_argnums=0)
    got = f1(w.copy(), x, g)
    np.testing.assert_allclose(np.asarray(got), w - np.float32(0.1) * (x.T @ g), rtol=1e-5, atol=1e-5)
    assert executables[-1].folded_updates == 1
    a = rng.standard_normal((48, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    f2 = fg.jit(lambda w, a, b: (a @ b) + w, donate_argnums=0)
    np.testing.assert_allclose(np.asarray(f2(w.copy(), a, b)), a @ b + w, rtol=1e-5, atol=1e-5)
    assert executables[-1].folded_updates == 1


def test_an_update_into_an_output_of_its_own_leaves_the_weight_as_it_was(executables):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    g = rng.standard_normal((32, 40)).astype(np.float32)
    before = w.copy()
    out = fg.jit(lambda w, x, g: w - 0.25 * (x.T @ g))(w, x, g)  # not donated: a fresh output
    assert executables[-1].folded_updates == 1
    np.testing.assert_array_equal(w, before)
    np.testing.assert_allclose(np.asarray(out), w - np.float32(0.25) * (x.T @ g), rtol=1e-5, atol=1e-5)


def test_no_fold_when_the_product_is_read_again(executables):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    g = rng.standard_normal((32, 40)).astype(np.float32)
    both = fg.jit(lambda w, x, g: (w - x.T @ g, x.T @ g), donate_argnums=0)(w.copy(), x, g)
    np.testing.assert_allclose(np.asarray(both[0]), w - x.T @ g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(both[1]), x.T @ g, rtol=1e-5, atol=1e-5)
    assert executables[-1].folded_updates == 0


def test_fold_falls_back_to_numpy_when_blas_declines(executables, monkeypatch):
    monkeypatch.setattr(blas, "gemm_update", lambda *a: False)
    rng = np.random.default_rng(7)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    g = rng.standard_normal((32, 40)).astype(np.float32)
    got = fg.jit(lambda w, x, g: w - 0.1 * (x.T @ g), donate_argnums=0)(w.copy(), x, g)
    assert executables[-1].folded_updates == 1
    np.testing.assert_allclose(np.asarray(got), w - np.float32(0.1) * (x.T @ g), rtol=1e-5, atol=1e-5)
