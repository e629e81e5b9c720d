"""jit: differential tests against eager, composition, passes, cache, engine, donation, incremental."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes, lax
from fungraph.array import HostArray
from fungraph.interpreters.cse import cse
from fungraph.interpreters.dce import dce
from fungraph.interpreters.fold import fold_constants
from fungraph.interpreters.fuse import fuse_adagrad, fuse_fma
from fungraph.interpreters.memory import plan_memory, verify_plan
from fungraph.interpreters.optimize import DEFAULT_PASSES, optimize
from fungraph.interpreters.simplify import RULES, simplify
from fungraph.jit import compile_graph
from fungraph.primitives.fused import adagrad_reference
from fungraph.testing import OP_RECORDS, Program, programs
from tests.helpers import (
    call_concurrently,
    check_jit_against_eager,
    crossed_callbacks,
    draw_args,
    jax_or_skip,
    matmul_chain,
    with_float_args,
)

RECORDS = {r.name: r for r in OP_RECORDS}
DIFFERENTIABLE = [r.name for r in OP_RECORDS if r.differentiable]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=10)
@given(data=st.data())
def test_every_op_under_jit_matches_eager(name: str, data: st.DataObject) -> None:
    check_jit_against_eager(data, RECORDS[name])


def _float_wrapper(rec, args):
    f, fargs = with_float_args(rec.fun, args)
    return lambda *a: fnp.sum(fnp.sin(f(*a))), fargs


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=5)
@given(data=st.data())
def test_grad_of_jit_and_jit_of_grad_match_eager(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, fargs = _float_wrapper(rec, args)
    argnums = tuple(range(len(fargs)))
    want = fg.grad(f, argnums)(*fargs)
    for label, g in (("grad(jit)", fg.grad(fg.jit(f), argnums)), ("jit(grad)", fg.jit(fg.grad(f, argnums)))):
        got = g(*fargs)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{label} of {name}")


def test_compositions_agree() -> None:
    f = lambda x: fnp.sum(fnp.tanh(x) ** 3)
    x = np.linspace(-1, 1, 7)
    want = fg.grad(f)(x)
    for g in (fg.grad(fg.jit(f)), fg.jit(fg.grad(f)), fg.jit(fg.jit(fg.grad(f))), fg.grad(fg.jit(fg.jit(f))),
              fg.jit(fg.grad(fg.jit(f)))):
        np.testing.assert_allclose(g(x), want, rtol=1e-12, atol=1e-14)
    h = fg.hessian(fg.jit(f))(x)
    np.testing.assert_allclose(h, fg.hessian(f)(x), rtol=1e-12, atol=1e-14)


def test_jit_closing_over_a_tracer() -> None:
    g = fg.grad(lambda a: fg.jit(lambda y: fnp.sin(a * y))(2.0))(0.5)
    assert g == pytest.approx(2 * np.cos(1.0))


@settings(max_examples=60)
@given(prog=programs())
def test_every_pass_preserves_meaning_and_validity(prog: Program) -> None:
    want = fg.eval_graph(prog.graph, *prog.args)
    g = prog.graph
    for name, p in DEFAULT_PASSES:
        g = p(g)
        g.verify()
        got = fg.eval_graph(g, *prog.args)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5 if a.dtype == np.float32 else 1e-12, atol=1e-6,
                                       err_msg=f"after {name}: {prog}")


@settings(max_examples=60)
@given(prog=programs(), inplace=st.booleans())
def test_planned_execution_equals_unplanned_bit_for_bit(prog: Program, inplace: bool) -> None:
    g, _ = optimize(prog.graph)
    plan = plan_memory(g, inplace=inplace)
    verify_plan(g, plan)
    assert plan.arena_bytes >= plan.lower_bound_bytes
    from fungraph.backends.cpu import CpuExecutable

    got = CpuExecutable(g, plan).run(list(prog.args))
    want = fg.eval_graph(g, *prog.args)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_dce_cse_fold() -> None:
    def f(x):
        unused = fnp.exp(x) * 3
        a = fnp.sin(x) + fnp.sin(x)
        c = np.arange(4.0) * 2 + 1
        return a * c, unused * 0 if False else a

    g = fg.make_graph(f)(np.ones(4))
    assert len(dce(g).eqns) < len(g.eqns)
    names = [e.primitive.name for e in cse(dce(g)).eqns]
    assert names.count("sin") == 1
    folded = fold_constants(g)
    assert not any(e.primitive.name == "mul" and all(not isinstance(a, fg.Var) or a in folded.constvars
                                                      for a in e.inputs) for e in folded.eqns)
    np.testing.assert_array_equal(fg.eval_graph(folded, np.ones(4))[0], f(np.ones(4))[0])


@pytest.mark.parametrize("expr, expected", [
    (lambda x: x + 0.0, []), (lambda x: 0.0 + x, []), (lambda x: x - 0.0, []), (lambda x: x * 1.0, []),
    (lambda x: 1.0 * x, []), (lambda x: x / 1.0, []), (lambda x: fnp.negative(-x), []), (lambda x: x ** 1, []),
    (lambda x: x ** 2, ["mul"]), (lambda x: x * 0.0, ["mul"]),
    (lambda x: x.astype(int) * 0, ["broadcast_in_dim"]),
    (lambda x: fnp.transpose(fnp.transpose(x)), []),
    (lambda x: fnp.reshape(fnp.reshape(x, (-1,)), (2, 3)), []),
    (lambda x: x + fnp.broadcast_to(fnp.ones(3), (2, 3)), ["add"]),
    (lambda x: fnp.transpose(x @ x.T), ["transpose", "dot_general"]),
])
def test_simplification_rules(expr, expected) -> None:
    x = np.arange(6.0).reshape(2, 3) + 1
    g = fg.make_graph(expr)(x)
    s = dce(simplify(g))
    s.verify()
    assert [e.primitive.name for e in s.eqns] == expected, str(s)
    np.testing.assert_array_equal(fg.eval_graph(s, x)[0], fg.eval_graph(g, x)[0])
    assert all(r.identity for r in RULES)


def test_a_float_times_zero_keeps_nan_inf_and_signed_zero_as_jax() -> None:
    x = np.array([np.inf, -np.inf, np.nan, -1.0, 2.0])
    jax, _ = jax_or_skip()
    expected = np.asarray(jax.jit(lambda v: v * 0.0)(x))
    np.testing.assert_array_equal(np.signbit(fg.jit(lambda v: v * 0.0)(x)), np.signbit(expected))
    np.testing.assert_array_equal(fg.jit(lambda v: v * 0.0)(x), expected)


def test_a_scalar_times_a_product_scales_the_smaller_factor() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 2)), rng.standard_normal((2, 8))

    def names(f, *args):
        g = fg.make_graph(f)(*args)
        s = dce(simplify(g))
        s.verify()
        np.testing.assert_allclose(fg.eval_graph(s, *args)[0], fg.eval_graph(g, *args)[0], rtol=1e-13)
        return [e.primitive.name for e in s.eqns], s

    got, s = names(lambda a, b: 0.5 * (a @ b), a, b)
    assert got == ["mul", "dot_general"] and s.eqns[0].inputs[0] is s.invars[0]
    assert names(lambda a, b: (b.T @ a.T) * 3.0, a, b)[0][-2:] == ["mul", "dot_general"]
    def twice(a, b):
        d = a @ b
        return d * 0.5 + d

    assert names(twice, a, b)[0] == ["dot_general", "mul", "add"]  # the product is used twice
    assert names(lambda a, b: 0.5 * (b @ a), a, b)[0] == ["dot_general", "mul"]  # factors larger than output
    kept = dce(simplify(fg.make_graph(lambda a, b: 0.5 * (a @ b))(a, b), scale_factors=False))
    assert [e.primitive.name for e in kept.eqns] == ["dot_general", "mul"]  # for a backend that fuses it


def test_fma_and_adagrad_fusion() -> None:
    x = np.random.default_rng(0).standard_normal((3, 4))
    g = fuse_fma(fg.make_graph(lambda a, b, c: a * b + c)(x, x, x))
    assert [e.primitive.name for e in g.eqns] == ["fma"]
    g2 = fuse_fma(fg.make_graph(lambda a, b: (a * b) + (a * b) * 2.0)(x, x))
    g2.verify()
    w, acc, grad = x, np.abs(x), x * 0.5
    staged = fg.make_graph(lambda w, acc, g: adagrad_reference(w, acc, g, np.asarray(0.1), np.asarray(1e-8)))(
        w, acc, grad)
    fused = fuse_adagrad(staged)
    fused.verify()
    assert [e.primitive.name for e in fused.eqns] == ["adagrad"]
    for a, b in zip(fg.eval_graph(fused, w, acc, grad), fg.eval_graph(staged, w, acc, grad)):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_lower_exposes_graph_stats_plan_and_dot() -> None:
    f = fg.jit(lambda x, w: fnp.tanh(x @ w) * 2.0 + 1.0)
    low = f.lower(np.ones((8, 4)), np.ones((4, 3)))
    assert [e.primitive.name for e in low.graph.eqns] == ["dot_general", "tanh", "fma"]
    assert [s.name for s in low.stats][0] == "inline"
    assert "fuse_fma" in low.text and "memory plan" in low.text
    assert low.plan.arena_bytes >= low.plan.lower_bound_bytes > 0
    assert low.plan.unplanned_bytes == 2 * 8 * 3 * 8
    dot = low.as_dot()
    assert dot.startswith('digraph "fungraph"') and "block @" in dot and "pinned" in dot


def test_signature_cache_traces_once_and_structural_cache_shares_plans() -> None:
    traces = []

    def f(x):
        traces.append(1)
        return fnp.sin(x) * 2.0

    jf = fg.jit(f)
    x = np.ones(5)
    jf(x)
    jf(x + 1)
    assert len(traces) == 1
    jf(np.ones(6))
    assert len(traces) == 2
    a = fg.jit(lambda x: fnp.sin(x) * 2.0).lower(x).compiled
    b = fg.jit(lambda y: fnp.sin(y) * 2.0).lower(x).compiled
    assert a is b


def test_outputs_never_alias_later_calls_and_inputs_are_untouched() -> None:
    f = fg.jit(lambda x: fnp.exp(fnp.sin(x) + 1.0) * 3.0)
    x1, x2 = np.linspace(0, 1, 10), np.linspace(1, 2, 10)
    c1 = x1.copy()
    r1 = f(x1)
    r1_copy = r1.copy()
    f(x2)
    np.testing.assert_array_equal(r1, r1_copy)
    np.testing.assert_array_equal(x1, c1)


def test_steady_state_allocates_only_outputs() -> None:
    f = fg.jit(lambda x: fnp.tanh(fnp.sin(x) * 2.0 + fnp.cos(x)) - x)
    low = f.lower(np.ones(1000))
    exe = low.compiled.executable
    assert exe.allocations_per_call == 1
    assert exe.fallback_eqns == 0
    assert low.plan.arena_bytes == low.plan.lower_bound_bytes == 2 * 8000  # sin(x) and cos(x) live together


def test_donation_updates_in_place() -> None:
    def sgd(w, g):
        return w - 0.1 * g

    step = fg.jit(sgd, donate_argnums=0)
    low = step.lower(np.ones(4), np.ones(4))
    w = np.ones(4)
    g = np.full(4, 2.0)
    out = step(w, g)
    np.testing.assert_allclose(out, 0.8)
    assert low.plan is not None
    plain = fg.jit(sgd)
    w2 = np.ones(4)
    plain(w2, g)
    np.testing.assert_array_equal(w2, np.ones(4))


def test_incremental_recomputes_only_what_changed() -> None:
    def f(a, b):
        x = fnp.sin(a) @ fnp.cos(a)
        return fnp.sum(x) + fnp.sum(fnp.exp(b))

    jf = fg.jit(f, incremental=True)
    a, b = np.ones((3, 3)), np.ones(3)
    first = jf(a, b)
    exe = jf.last_incremental()
    total = exe.recomputed
    again = jf(a, b + 1.0)
    assert exe.recomputed < total
    np.testing.assert_allclose(again, f(a, b + 1.0))
    jf(a, b + 1.0)
    assert exe.recomputed == 0
    np.testing.assert_allclose(first, f(a, b))


def test_incremental_calls_from_threads_each_get_their_own_result() -> None:
    """One incremental executable called from several threads with different inputs: each
    call sees its own inputs (the executable keeps the last call's intermediates)."""
    def f(a, b):
        return fnp.tanh(a @ a) * 2.0 + fnp.sum(b)

    jf = fg.jit(f, incremental=True)
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal((40, 40)), rng.standard_normal(5)) for _ in range(4)]
    jf(*args[0])
    calls = [lambda a=a, b=b: jf(a, b) for a, b in args]
    assert not call_concurrently(calls, [f(a, b) for a, b in args], 30, 1e-12)


def test_incremental_callbacks_calling_each_others_functions_from_two_threads_do_not_deadlock() -> None:
    assert not crossed_callbacks(lambda f: fg.jit(f, incremental=True))


def test_an_incremental_callback_cannot_reenter_its_own_call() -> None:
    """The kept intermediates are in use: re-entry raises instead of hanging on the lock."""
    def host(v):
        return np.asarray(jf(v))

    jf = fg.jit(lambda x: fg.pure_callback(host, fg.ShapeDtypeStruct(x.shape, x.dtype), x * 2.0) + 1.0,
                incremental=True)
    with pytest.raises(RuntimeError, match="host callback inside its own call"):
        jf(np.arange(4.0))


def test_static_argnums_and_errors() -> None:
    f = fg.jit(lambda x, n: x * n, static_argnums=1)
    assert f(np.ones(2), 3)[0] == 3.0
    with pytest.raises(TypeError, match="hashable"):
        f(np.ones(2), [1])
    with pytest.raises(ValueError, match="unknown backend"):
        fg.jit(lambda x: x, backend="tpu")
    assert compile_graph(fg.make_graph(lambda x: x + 1)(np.ones(2))).plan is not None


@settings(max_examples=40)
@given(prog=programs())
def test_every_schedule_is_valid_and_equal(prog: Program) -> None:
    from fungraph.interpreters.schedule import SCHEDULES

    want = fg.eval_graph(prog.graph, *prog.args)
    for name, order in SCHEDULES.items():
        g = order(prog.graph)
        g.verify()
        assert sorted(map(id, g.eqns)) == sorted(map(id, prog.graph.eqns)), name
        for a, b in zip(fg.eval_graph(g, *prog.args), want):
            np.testing.assert_array_equal(a, b)


def test_schedule_search_never_worse_than_the_traced_order() -> None:
    from fungraph.jit import best_schedule

    def f(x):
        parts = [fnp.sin(x * i) for i in range(1, 6)]
        return sum(fnp.sum(p) for p in parts)

    g, _ = optimize(fg.make_graph(f)(np.ones(1000)))
    _, plan = best_schedule(g)
    assert plan.arena_bytes <= plan_memory(g).arena_bytes


def test_jit_inside_lax_bodies() -> None:
    body = fg.jit(lambda c, x: (c * 0.5 + x, fnp.sin(c)))
    c, ys = lax.scan(body, 1.0, np.arange(4.0))
    c2, ys2 = lax.scan(lambda c, x: (c * 0.5 + x, fnp.sin(c)), 1.0, np.arange(4.0))
    assert c == pytest.approx(c2)
    np.testing.assert_allclose(ys, ys2)
    g = fg.grad(lambda v: lax.scan(body, v, np.arange(4.0))[0])(1.0)
    assert g == pytest.approx(0.5 ** 4)


def test_donated_input_reused_in_place_by_an_intermediate() -> None:
    """The donated input holds intermediates too (JAX donates an input only when an output has
    its shape and dtype, so the function returns one)."""
    f = fg.jit(lambda x: fnp.exp(x) * 2.0 + fnp.sum(fnp.sin(x)), donate_argnums=0)
    x = np.ones(1000, np.float32)
    want = np.exp(np.ones(1000, np.float32)) * 2.0 + np.sum(np.sin(np.ones(1000, np.float32)))
    np.testing.assert_allclose(f(x), want, rtol=1e-5)
    low = f.lower(np.ones(1000, np.float32))
    verify_plan(low.graph, low.plan, donated=(True,))
    assert any(p.kind == "inplace" and p.offset < 0 for p in low.plan.placements.values())
    with pytest.raises(AssertionError, match="non-donated"):
        verify_plan(low.graph, low.plan)


def test_select_lowering_is_bit_exact_for_special_values() -> None:
    x = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, -2.5, 3.0], np.float32)
    p = np.array([False, True, False, True, False, True, False])
    for y in (0.0, -0.0, 7.0):
        f = lambda x, p: fnp.where(p, x, np.float32(y))
        got = fg.jit(f)(x, p)
        want = np.where(p, x, np.float32(y))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    g = fg.jit(lambda x: fg.nn.relu(x) * 1.0)(x)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(np.where(x > 0, x, 0)))


def test_concurrent_calls_of_one_jitted_function_are_independent() -> None:
    """Threads calling one jitted function at once (matmuls release the GIL, so calls
    overlap) each get their own results: a call that finds the executable's buffers in use
    binds a set of its own. The first call compiles in this thread, so the executable is one."""
    rng = np.random.default_rng(0)
    n = 512
    w = rng.standard_normal((n, n)) / np.sqrt(n)
    inputs = [(rng.standard_normal((n, n)), w) for _ in range(4)]
    want = [matmul_chain(np, x, w) for x, w in inputs]
    f = fg.jit(lambda x, w: matmul_chain(fnp, x, w))
    np.testing.assert_allclose(f(*inputs[0]), want[0], rtol=1e-9, atol=1e-9)
    exe = f.lower(*inputs[0]).compiled.executable
    assert exe.buffer_sets == 1
    failures = call_concurrently([lambda x=x, w=w: f(x, w) for x, w in inputs], want, iterations=4, rtol=1e-9)
    assert not failures, f"{len(failures)} of 16 calls failed: " + "\n".join(failures[:3])
    assert 1 < exe.buffer_sets <= len(inputs)  # the calls did overlap


def test_a_host_callback_may_call_its_own_jitted_function() -> None:
    """Re-entry on one thread: the inner call finds the buffers in use and binds its own, so
    ``y``, live in the outer call's arena across the callback, is not overwritten."""
    inner = []

    def host(v):
        inner.append(v)
        return np.asarray(f(v)) if len(inner) == 1 else v

    def body(x):
        y = fnp.sin(x) * 2.0 + 1.0
        return fg.pure_callback(host, fg.ShapeDtypeStruct(x.shape, x.dtype), y) + y * 3.0

    f = fg.jit(body)
    x = np.linspace(0.0, 3.0, 1000)
    y0 = np.sin(x) * 2.0 + 1.0
    y1 = np.sin(y0) * 2.0 + 1.0
    np.testing.assert_allclose(f(x), 4.0 * y1 + 3.0 * y0, rtol=1e-12)
    assert len(inner) == 2


def test_concurrent_calls_run_their_loops_in_their_own_arena() -> None:
    """``fori_loop`` and ``scan`` bodies are executables planned into blocks of their parent's
    arena (and a second carry view there): a contended call binds them to its own arena."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((256, 256)) / 16.0

    def loops(xp, x):
        h = x
        for _ in range(6):
            h = xp.tanh(h @ w) * 0.5 + h * 0.5
        c = h
        for r in x[:8]:
            c = xp.sin(c) * 0.5 + xp.sum(r)
        return h, c

    def f(x):
        h = lax.fori_loop(0, 6, lambda i, h: fnp.tanh(h @ w) * 0.5 + h * 0.5, x)
        c, _ = lax.scan(lambda c, r: (fnp.sin(c) * 0.5 + fnp.sum(r), None), h, x[:8])
        return h, c

    inputs = [(rng.standard_normal((256, 256)),) for _ in range(4)]
    want = [np.stack(loops(np, x)) for x, in inputs]
    jf = fg.jit(lambda x: fnp.stack(f(x)))
    np.testing.assert_allclose(jf(*inputs[0]), want[0], rtol=1e-9, atol=1e-9)
    failures = call_concurrently([lambda a=a: jf(*a) for a in inputs], want, iterations=4, rtol=1e-9)
    assert not failures, f"{len(failures)} of 16 calls failed: " + "\n".join(failures[:3])


def test_threads_trace_and_transform_at_once() -> None:
    """Each thread has its own trace stack (as in JAX): threads that trace fresh jitted
    functions, take eager gradients and vmap at the same moment get their own graphs. The
    functions sleep while being traced, so the threads' traces interleave."""
    import time

    barrier = threading.Barrier(4)
    errors: list[str] = []

    def pause(v):
        time.sleep(0.002)
        return v

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(50)
        try:
            for j in range(15):
                c = float(seed * 100 + j)
                barrier.wait(timeout=30)
                f = fg.jit(lambda x, c=c: fnp.sum(fnp.sin(pause(x) * c) ** 2) + c)
                np.testing.assert_allclose(f(x), np.sum(np.sin(x * c) ** 2) + c, rtol=1e-10)
                g = fg.grad(lambda x, c=c: fnp.sum(fnp.tanh(pause(x)) * c))(x)
                np.testing.assert_allclose(g, c * (1 - np.tanh(x) ** 2), rtol=1e-10)
                v = fg.vmap(lambda r, c=c: fnp.dot(pause(r), r) * c)(x.reshape(5, 10))
                np.testing.assert_allclose(v, (x.reshape(5, 10) ** 2).sum(1) * c, rtol=1e-10)
        except Exception as err:  # noqa: BLE001
            errors.append(f"thread {seed}: {type(err).__name__}: {err}")
            barrier.abort()

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors[:3])


def test_pytree_arguments_take_the_cached_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call whose leaves are numpy arrays of a seen structure, shapes and dtypes skips the
    signature (abstract values, key hashing); another structure or dtype still recompiles."""
    f = fg.jit(lambda d: d["a"] + d["b"][0] * d["b"][1])
    x = np.arange(3.0)
    np.testing.assert_array_equal(f({"a": x, "b": [x, x]}), x + x * x)
    calls = []
    original = type(f)._signature
    monkeypatch.setattr(type(f), "_signature", lambda self, args: calls.append(args) or original(self, args))
    np.testing.assert_array_equal(f({"a": x + 1, "b": [x, x]}), x + 1 + x * x)
    assert calls == []
    np.testing.assert_array_equal(f({"a": x.astype(np.float32), "b": [x, x]}), x + x * x)
    np.testing.assert_array_equal(f({"a": x, "b": (x, x), "c": None}), x + x * x)
    assert len(calls) == 2


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_results_fed_back_take_the_cached_dispatch(backend: str, monkeypatch: pytest.MonkeyPatch,
                                                    request: pytest.FixtureRequest) -> None:
    """A training loop feeds results back in: a HostArray (CPU) or a device array (OpenCL),
    first seen after the function was compiled for numpy inputs, skips the signature from its
    second call on (it once took 36 us against 6 for a numpy input on every call)."""
    if backend == "opencl":
        request.getfixturevalue("require_opencl")
    f = fg.jit(lambda x: x * 2.0 + 1.0, backend=backend)
    x = np.arange(4.0, dtype=np.float32)
    y = f(x)
    calls = []
    original = type(f)._signature
    monkeypatch.setattr(type(f), "_signature", lambda self, args: calls.append(args) or original(self, args))
    z = f(y)
    for _ in range(3):
        z = f(z)
    np.testing.assert_allclose(np.asarray(z), ((((x * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1)
    np.testing.assert_allclose(np.asarray(y), x * 2 + 1)
    assert len(calls) <= 1
    if backend == "cpu":
        assert type(z) is HostArray and type(np.asarray(z)) is np.ndarray
