"""The CPU engine's overlapped matrix products (fungraph/backends/cpu_overlap.py): a large
product started early on a second thread, its output buffer planned from that step, the
values those of the sequential run."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
from fungraph import _blas as blas
from fungraph.backends import cpu_overlap
from fungraph.interpreters.memory import plan_memory, verify_plan
from fungraph.testing.models import mlp_params, sgd_step


def _mlp_problem(batch: int = 256) -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    return mlp_params([784, 1024, 1024, 10]), x, y


def _three_products(a, b, c, d):
    """``a @ d`` needs only inputs, so it can run beside ``(a @ b) @ c``."""
    return (a @ b) @ c, a @ d


def _square(n: int, k: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n) for _ in range(k)]


@pytest.fixture
def sequential(monkeypatch):
    """Run the engine without overlap (the same plans), to compare against."""
    def run(f, *args):
        with monkeypatch.context() as m:
            m.setattr(blas, "may_overlap", lambda: False)
            return f(*args)
    return run


def test_mlp_step_starts_the_last_weight_gradient_early_and_plans_for_it():
    params, x, y = _mlp_problem()
    low = fg.jit(sgd_step, donate_argnums=0).lower(params, x, y)
    graph, plan = low.graph, low.plan
    assert len(plan.early) == 1
    (j, start), = plan.early.items()
    eqn = graph.eqns[j]
    assert eqn.primitive.name == "dot_general" and eqn.outputs[0].aval.shape == (1024, 1024)
    # another large product runs on the caller meanwhile
    assert any(cpu_overlap.product_size(graph.eqns[k]) >= cpu_overlap.MIN_OVERLAP_PRODUCT for k in range(start, j))
    # its buffer is the product's from the step it starts at, so nothing run meanwhile shares it
    assert plan.placements[eqn.outputs[0]].start == start
    verify_plan(graph, plan, [True] * 6 + [False] * 2)


def test_without_the_early_start_the_buffer_would_be_shared():
    """The plan made without ``early_starts`` packs another value of the window into the
    product's buffer: the early start is what keeps them apart."""
    params, x, y = _mlp_problem()
    low = fg.jit(sgd_step, donate_argnums=0).lower(params, x, y)
    graph, plan = low.graph, low.plan
    (j, start), = plan.early.items()
    plain = plan_memory(graph, [True] * 6 + [False] * 2, scratch_bytes=None)
    out = plain.placements[graph.eqns[j].outputs[0]]
    lo, hi = out.offset, out.offset + out.size
    shared = [v for v, p in plain.placements.items() if p.kind == "buffer" and p.start < j and p.end > start
              and p.offset < hi and p.offset + p.size > lo and v is not graph.eqns[j].outputs[0]]
    assert shared
    placed = plan.placements[graph.eqns[j].outputs[0]]
    for v in shared:
        p = plan.placements[v]
        assert p.offset >= placed.offset + placed.size or p.offset + p.size <= placed.offset


@pytest.fixture
def spare_core(monkeypatch):
    """The process had two cores lately, so the engine starts products early."""
    monkeypatch.setattr(blas.CORES, "available", lambda: 2.0)


def test_mlp_steps_match_the_sequential_engine(sequential, spare_core):
    params, x, y = _mlp_problem()
    step = fg.jit(sgd_step, donate_argnums=0)
    ref = fg.jit(sgd_step)
    p_fast = [{k: v.copy() for k, v in p.items()} for p in params]  # donated: overwritten in place
    p_seq = [{k: v.copy() for k, v in p.items()} for p in params]
    before = cpu_overlap.OVERLAP_STATS["overlapped"]
    for _ in range(3):
        p_fast, loss_fast = step(p_fast, x, y)
        p_seq, loss_seq = sequential(ref, p_seq, x, y)
        np.testing.assert_allclose(float(loss_fast), float(loss_seq), rtol=1e-6)
        for a, b in zip(p_fast, p_seq):
            np.testing.assert_allclose(np.asarray(a["w"]), np.asarray(b["w"]), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.asarray(a["b"]), np.asarray(b["b"]), rtol=1e-5, atol=1e-6)
    if blas.may_overlap():
        assert cpu_overlap.OVERLAP_STATS["overlapped"] == before + 3


def test_independent_product_runs_beside_a_chain_of_two(sequential, spare_core):
    a, b, c, d = _square(256, 4, 0)
    assert 256 ** 3 >= cpu_overlap.MIN_OVERLAP_PRODUCT
    f = fg.jit(_three_products)
    low = f.lower(a, b, c, d)
    assert list(low.plan.early.values()) == [0]
    got = f(a, b, c, d)
    np.testing.assert_allclose(np.asarray(got[0]), (a @ b) @ c, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got[1]), a @ d, rtol=1e-4, atol=1e-4)
    seq = sequential(f, a, b, c, d)
    for g, s in zip(got, seq):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(s))


def test_small_products_are_not_started_early():
    a, b, c, d = _square(64, 4, 1)
    assert not fg.jit(_three_products).lower(a, b, c, d).plan.early


def test_fixed_blas_threads_turn_overlap_off(monkeypatch):
    monkeypatch.setenv("FUNGRAPH_BLAS_THREADS", "2")
    assert not blas.may_overlap()
    a, b, c, d = _square(256, 4, 2)
    before = dict(cpu_overlap.OVERLAP_STATS)
    got = fg.jit(_three_products)(a, b, c, d)
    np.testing.assert_allclose(np.asarray(got[1]), a @ d, rtol=1e-4, atol=1e-4)
    assert cpu_overlap.OVERLAP_STATS == before


def test_products_run_on_one_thread_while_one_is_overlapped(monkeypatch):
    monkeypatch.delenv("FUNGRAPH_BLAS_THREADS", raising=False)
    monkeypatch.setattr(blas.CORES, "available", lambda: 4.0)
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 4
    task = cpu_overlap.Overlap(lambda: 1, (), {})  # counted from creation until it has run
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 1
    assert task.join() == 1
    assert blas.threads_for(blas.SMALL_PRODUCT, 4) == 4


def test_caller_takes_back_a_product_no_thread_began():
    task = cpu_overlap.Overlap(np.add, (np.ones(3), 2.0), {})  # never handed to the thread
    taken = cpu_overlap.OVERLAP_STATS["taken_back"]
    np.testing.assert_array_equal(task.join(), np.full(3, 3.0))
    assert cpu_overlap.OVERLAP_STATS["taken_back"] == taken + 1


def test_an_error_on_the_overlap_thread_is_raised_at_join():
    def fails() -> None:
        raise ValueError("boom in the product")

    task = cpu_overlap.start(fails)
    with pytest.raises(ValueError, match="boom in the product"):
        task.join()
    assert blas.OVERLAPPED.count == 0


def test_a_starved_process_runs_in_order_with_the_early_products_update_folded(monkeypatch):
    """Under load (the process had under ``MIN_CORES`` lately) nothing starts early, and the
    update of the weight whose gradient would have started early is folded into it."""
    from fungraph.backends import cpu
    from fungraph.jit import clear_caches

    clear_caches()
    made = []
    init = cpu.CpuExecutable.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(cpu.CpuExecutable, "__init__", record)
    monkeypatch.setattr(blas.CORES, "available", lambda: 0.3)
    params, x, y = _mlp_problem()
    step = fg.jit(sgd_step, donate_argnums=0)
    ref = [{k: v.copy() for k, v in p.items()} for p in params]
    before = cpu_overlap.OVERLAP_STATS["overlapped"]
    new, loss = step([{k: v.copy() for k, v in p.items()} for p in params], x, y)
    assert cpu_overlap.OVERLAP_STATS["overlapped"] == before
    exe = made[-1]
    (j, _), = exe.plan.early.items()
    assert exe._idle[0].program[j][0].__name__ == "skipped"  # its update at j + 1 computes it
    assert exe._idle[0].early_program[j][0].__name__ != "skipped"
    want, want_loss = sgd_step(ref, x, y)  # eager: op by op, not the engine's program
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-5)
    for a, b in zip(new, want):
        np.testing.assert_allclose(np.asarray(a["w"]), np.asarray(b["w"]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(a["b"]), np.asarray(b["b"]), rtol=1e-5, atol=1e-6)
