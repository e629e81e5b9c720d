"""Control flow: values, jvp, grad, vmap, jit and the IR of cond/switch, while_loop, fori_loop
and scan against Python-unrolled equivalents; reverse mode through data-dependent loops."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.cpu import ENGINE_STATS
from fungraph.primitives.while_loop import LOOP_STATS, tape_count
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip


@pytest.fixture
def numpy_loops() -> Iterator[None]:
    """The numpy engine's loops and conds (``_lower_while``/``_lower_scan`` stepping in Python,
    ``_lower_cond`` running a branch executable): the native engine would run an elementwise
    loop or cond as one C function instead."""
    was = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", False)
    yield
    fg.config.update("fungraph_native_cpu", was)

XS = np.array([-1.3, -0.2, 0.4, 1.7])


def branchy(x):
    return lax.cond(x > 0, lambda y: fnp.sin(y) * y, lambda y: fnp.cos(y) - y, x)


def branchy_py(x):
    return np.sin(x) * x if x > 0 else np.cos(x) - x


def three_way(i, x):
    return lax.switch(i, [lambda v: v * 2.0, lambda v: fnp.exp(v), lambda v: -v], x)


def scanned(x):
    def body(c, xi):
        return c * xi + fnp.sin(c), {"y": c * 2.0, "z": xi}

    c, ys = lax.scan(body, x, np.arange(1.0, 4.0))
    return c + fnp.sum(ys["y"]) + fnp.sum(ys["z"])


def scanned_py(x):
    c, total = x, 0.0
    for xi in np.arange(1.0, 4.0):
        total += c * 2.0 + xi
        c = c * xi + np.sin(c)
    return c + total


def looped(x):
    return lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, fnp.sin(c[1]) * x), (0, x))[1]


def looped_py(x):
    c = x
    for _ in range(4):
        c = np.sin(c) * x
    return c


def nested(x):
    def wbody(c):
        i, v = c

        def sbody(s, xi):
            return lax.cond(s > 0.5, lambda t: t * xi, lambda t: fnp.sin(t) + xi, s), s

        s, _ = lax.scan(sbody, v, np.array([0.3, 0.9]))
        return i + 1, s * x

    return lax.while_loop(lambda c: c[0] < 3, wbody, (0, x))[1]


def nested_py(x):
    v = x
    for _ in range(3):
        s = v
        for xi in (0.3, 0.9):
            s = s * xi if s > 0.5 else np.sin(s) + xi
        v = s * x
    return v


def newton_solve(theta):
    """The root x of x^3 + theta x - 1 = 0, by Newton steps until the step is tiny."""

    def body(c):
        x, _ = c
        step = (x ** 3 + theta * x - 1.0) / (3 * x ** 2 + theta)
        return x - step, fnp.abs(step)

    return lax.while_loop(lambda c: c[1] > 1e-14, body, (1.0, 1.0))[0]


CASES = [(branchy, branchy_py), (scanned, scanned_py), (looped, looped_py), (nested, nested_py)]


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


@pytest.mark.parametrize("f, ref", CASES, ids=["cond", "scan", "while", "nested"])
def test_value_jvp_grad_jit_vmap_against_python(f, ref) -> None:
    for x in XS:
        np.testing.assert_allclose(f(x), ref(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jit(f)(x), ref(x), rtol=1e-12)
        d = _fd(ref, x)
        np.testing.assert_allclose(fg.jvp(f, (x,), (1.0,))[1], d, rtol=1e-6, atol=1e-8)
        for g in (fg.grad(f), fg.jit(fg.grad(f)), fg.grad(fg.jit(f))):
            np.testing.assert_allclose(g(x), d, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(fg.vmap(f)(XS), [ref(x) for x in XS], rtol=1e-12)


@pytest.mark.parametrize("f", [branchy, scanned], ids=["cond", "scan"])
def test_second_order_and_vmap_of_grad(f) -> None:
    for x in XS:
        check_grads(f, [x], order=2)
    np.testing.assert_allclose(fg.vmap(fg.grad(f))(XS), [fg.grad(f)(x) for x in XS], rtol=1e-12)


def test_switch_clamps_and_batches_the_index() -> None:
    for i, want in ((-5, 1.0), (0, 1.0), (1, np.exp(0.5)), (2, -0.5), (9, -0.5)):
        assert three_way(i, 0.5) == pytest.approx(want)
    idx = np.array([0, 1, 2, 7])
    got = fg.vmap(three_way)(idx, XS)
    np.testing.assert_allclose(got, [three_way(int(i), x) for i, x in zip(idx, XS)])
    g = fg.grad(lambda x: three_way(1, x))(0.3)
    assert g == pytest.approx(np.exp(0.3))


def test_fori_loop_concrete_and_traced_bounds() -> None:
    body = lambda i, v: v * 0.5 + i
    assert lax.fori_loop(0, 5, body, 1.0) == pytest.approx(_py_fori(0, 5, 1.0))
    n = np.int64(5)
    traced = fg.jit(lambda n, v: lax.fori_loop(0, n, body, v))
    assert traced(n, 1.0) == pytest.approx(_py_fori(0, 5, 1.0))
    g = fg.grad(lambda v: lax.fori_loop(0, 5, lambda i, v: fnp.sin(v) * 1.5, v))(0.3)
    ref = lambda v: _py_loop(v, 5)
    assert g == pytest.approx(_fd(ref, 0.3), rel=1e-6)


def _py_fori(lo, hi, v):
    for i in range(lo, hi):
        v = v * 0.5 + i
    return v


def _py_loop(v, n):
    for _ in range(n):
        v = np.sin(v) * 1.5
    return v


def test_scan_reverse_pytrees_and_length() -> None:
    xs = {"a": np.arange(4.0), "b": np.ones((4, 2))}
    c, ys = lax.scan(lambda c, x: (c + x["a"], x["b"] * c), 0.0, xs, reverse=True)
    want_c, want = 0.0, []
    for i in range(3, -1, -1):
        want.insert(0, xs["b"][i] * want_c)
        want_c += xs["a"][i]
    assert c == pytest.approx(want_c)
    np.testing.assert_allclose(ys, np.stack(want))
    c2, ys2 = lax.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=3)
    assert c2 == 8.0
    np.testing.assert_allclose(ys2, [1.0, 2.0, 4.0])


def test_newton_while_loop_gradient_is_the_implicit_derivative() -> None:
    """x(theta) solves x^3 + theta x - 1 = 0; dx/dtheta = -x / (3 x^2 + theta)."""

    for theta in (0.5, 1.0, 3.0):
        x = newton_solve(theta)
        assert x ** 3 + theta * x - 1.0 == pytest.approx(0.0, abs=1e-12)
        implicit = -x / (3 * x ** 2 + theta)
        assert abs(fg.grad(newton_solve)(theta) - implicit) < 1e-10
        assert abs(fg.jit(fg.grad(newton_solve))(theta) - implicit) < 1e-10
    thetas = np.array([0.5, 1.0, 3.0])
    np.testing.assert_allclose(fg.vmap(newton_solve)(thetas), [newton_solve(t) for t in thetas])
    assert tape_count() == 0


def test_vjp_through_while_can_be_called_twice_and_frees_its_tape_with_the_function() -> None:
    """A ``vjp`` function holds its loop's tape: calling it again gives the same cotangent, and
    the tape goes when the function does, called or not; ``linearize`` likewise."""
    implicit = lambda th: -newton_solve(th) / (3 * newton_solve(th) ** 2 + th)  # noqa: E731
    base = tape_count()
    _, f_vjp = fg.vjp(newton_solve, 1.0)
    assert tape_count() == base + 1
    first, again = f_vjp(1.0)[0], f_vjp(1.0)[0]
    assert first == again and abs(first - implicit(1.0)) < 1e-10
    assert tape_count() == base + 1
    del f_vjp
    assert tape_count() == base
    _, unused = fg.vjp(newton_solve, 2.0)
    assert tape_count() == base + 1
    del unused
    assert tape_count() == base
    _, f_jvp = fg.linearize(newton_solve, 3.0)
    assert abs(f_jvp(1.0) - implicit(3.0)) < 1e-10 and tape_count() == base + 1
    del f_jvp
    assert tape_count() == base
    _, batched = fg.vjp(fg.vmap(newton_solve), np.array([0.5, 3.0]))
    np.testing.assert_allclose(batched(np.ones(2))[0], batched(np.ones(2))[0])
    del batched
    assert tape_count() == base


@pytest.mark.parametrize("policy", ["sqrt", "every:7"])
def test_checkpoint_policies_match_and_bound_the_tape(policy: str) -> None:
    n = 2500

    def f(x, checkpoint):
        body = lambda c: (c[0] + 1, fnp.sin(c[1]) * 0.5 + x)
        return lax.while_loop(lambda c: c[0] < n, body, (0, x), checkpoint=checkpoint)[1]

    full = fg.grad(lambda x: f(x, "all"))(0.3)
    assert LOOP_STATS["last_tape_length"] == n and LOOP_STATS["last_tape_peak"] == n
    g = fg.grad(lambda x: f(x, policy))(0.3)
    assert g == pytest.approx(full, rel=1e-12)
    bound = 3 * int(np.sqrt(n)) + 2 if policy == "sqrt" else n // 7 + 2
    assert LOOP_STATS["last_tape_peak"] <= bound


def test_loop_lowering_copies_no_carry_and_allocates_nothing_per_iteration() -> None:
    def run(n):
        return fg.jit(lambda x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.999 + 0.001),
                                               (0, x))[1])

    x = np.ones(10_000)
    costs = []
    for n in (10, 1000):
        f = run(n)
        f(x)
        before = (ENGINE_STATS["output_allocations"], LOOP_STATS["carry_copies"], LOOP_STATS["iterations"])
        f(x)
        after = (ENGINE_STATS["output_allocations"], LOOP_STATS["carry_copies"], LOOP_STATS["iterations"])
        assert after[2] - before[2] == n
        assert after[1] == before[1], "a carry was copied"
        costs.append(after[0] - before[0])
    assert costs[0] == costs[1], f"allocations grew with the trip count: {costs}"


@pytest.mark.parametrize("axis", [0, 1])
def test_loop_body_reads_and_writes_rows_at_traced_indices(axis: int) -> None:
    """A body reading ``x[i - 1]`` (a scalar-index ``take``: ``mode="wrap"`` counts a negative
    index from the end, ``mode="clip"`` clamps one out of range) and writing row ``i`` in
    place, against a numpy loop; the body runs with its buffers held for the whole loop
    (``CpuExecutable.held``)."""
    x = np.arange(42.0).reshape(6, 7)
    n = x.shape[axis]

    def body(i, x):
        row = fnp.take(x, i - 1, axis=axis, mode="wrap") * 0.5 + fnp.take(x, i + n + 3, axis=axis, mode="clip")
        return x.at[i].set(row) if axis == 0 else x.at[:, i].set(row)

    want = x.copy()
    for i in range(n):
        row = np.take(want, i - 1, axis=axis) * 0.5 + np.take(want, n - 1, axis=axis)
        if axis == 0:
            want[i] = row
        else:
            want[:, i] = row
    np.testing.assert_array_equal(fg.jit(lambda x: lax.fori_loop(0, n, body, x))(x), want)
    np.testing.assert_array_equal(lax.fori_loop(0, n, body, x), want)


def test_generated_loop_step_reads_every_kind_of_operand(monkeypatch: pytest.MonkeyPatch, numpy_loops: None) -> None:
    """The generated loop step (``cpu._step_function``) against a Python loop: a closure
    constant, literals, a nested loop (several results), a carry passed through unchanged (a
    copy into the carry view), a row updated in place (a donated carry), a scan output, and a
    body with no equations at all."""
    from fungraph.backends import cpu

    generated, make = [], cpu._step_function
    monkeypatch.setattr(cpu, "_step_function", lambda *a: generated.append(len(a[0])) or make(*a))
    table = np.linspace(0.0, 1.0, 5)

    def body(c, xi):
        i, x, kept, acc = c
        inner = lax.fori_loop(0, 3, lambda j, t: (t[0] + j, t[1] * 1.5), (i, xi))
        x = x.at[i].set(x[i - 1] * 0.5 + table * inner[1] + 2)
        return (i + 1, x, kept, acc + inner[0]), x[i] * kept

    def run(xs):
        return lax.scan(body, (0, np.ones((4, 5)), np.float64(3.0), 0), xs)

    xs = np.arange(1.0, 5.0)
    want_x, want_ys, acc = np.ones((4, 5)), [], 0
    for i, xi in enumerate(xs):
        want_x[i] = want_x[i - 1] * 0.5 + table * xi * 1.5 ** 3 + 2
        want_ys.append(want_x[i] * 3.0)
        acc += i + 3
    f = fg.jit(run)
    for _ in range(2):
        (n, x, kept, total), ys = f(xs)
        assert (int(n), float(kept), int(total)) == (4, 3.0, acc)
        np.testing.assert_allclose(x, want_x, rtol=1e-13)
        np.testing.assert_allclose(ys, np.array(want_ys), rtol=1e-13)
    still = fg.jit(lambda x: lax.scan(lambda c, _: (c, None), x, None, length=3)[0])
    np.testing.assert_array_equal(still(np.arange(3.0)), np.arange(3.0))
    assert 0 in generated and len(generated) >= 3, f"steps generated (equations each): {generated}"


def test_step_function_passes_parameters_that_are_not_identifiers() -> None:
    """A primitive's parameters reach its lowering as keywords; a name that cannot be one in
    source (any string is a valid ``**`` key) goes through a dict instead."""
    from fungraph.backends import cpu

    def scaled(out, x, **params):
        np.multiply(x, params["by"] + params["not-a-name"], out=out)
        return out

    out = np.empty(3)
    steps = [(scaled, (0,), (1,), (out,), {"by": 2.0, "not-a-name": 1.0}, False),
             (scaled, (1,), (2,), (0,), {"by": 1.0, "not-a-name": 0.0}, False)]
    into = [np.empty(3)]
    step = cpu._step_function(steps, [None, None, None], [0], [], [], 1)
    result = step([np.arange(3.0)], into)
    assert result[0] is into[0]
    np.testing.assert_array_equal(into[0], np.arange(3.0) * 3.0)


def test_a_body_that_allocates_runs_through_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``held`` leaves a body whose steps allocate to ``run`` (here forced): same values, and the
    buffer set goes back for the next call."""
    from fungraph.backends import cpu

    monkeypatch.setattr(cpu, "_held_steps", lambda program: False)
    f = fg.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: c.at[i].set(c[i - 1] * 2.0 + i), x))
    x = np.ones(5)
    want = x.copy()
    for i in range(5):
        want[i] = want[i - 1] * 2.0 + i
    for _ in range(2):
        np.testing.assert_array_equal(f(x), want)


def test_control_flow_ir_prints_parses_and_verifies() -> None:
    for f, x in ((branchy, 0.5), (scanned, 0.5), (looped, 0.5), (nested, 0.5), (fg.grad(scanned), 0.5),
                 (fg.grad(looped), 0.5),
                 (lambda x: three_way(1, x), 0.5)):
        g = fg.make_graph(f)(x)
        g.verify()
        back = fg.parse(str(g))
        assert back == g
        np.testing.assert_allclose(fg.eval_graph(back, x)[0], fg.eval_graph(g, x)[0])
    text = str(fg.make_graph(branchy)(0.5))
    assert "cond[branches=({ lambda" in text and "\n            b:f64[] = cos a" in text


def test_vmap_of_while_with_batched_predicate_masks_finished_lanes() -> None:
    def countdown(x):
        return lax.while_loop(lambda c: c[0] > 1.0, lambda c: (c[0] / 2.0, c[1] + 1), (x, 0))

    xs = np.array([1.0, 3.0, 100.0])
    vals, steps = fg.vmap(countdown)(xs)
    want = [countdown(x) for x in xs]
    np.testing.assert_allclose(vals, [w[0] for w in want])
    np.testing.assert_array_equal(steps, [w[1] for w in want])


@pytest.mark.parametrize("x64", [False, True])
def test_vmap_of_while_over_an_empty_batch_returns_the_empty_carries_as_jax(x64: bool) -> None:
    """Zero lanes run zero iterations; the empty batch once failed while tracing (the predicate's
    ``any`` over no lanes had no identity)."""
    jax, _ = jax_or_skip()

    def body(lx):
        return lambda c: lx.while_loop(lambda c: c[0] < 3.0, lambda c: (c[0] + 1.0, c[1] * 2), c)

    with fg.enable_x64(x64), jax.enable_x64(x64):
        x, n = np.zeros((0,), np.float32), np.ones((0, 2), np.int32)
        got = fg.jit(fg.vmap(body(lax)))((x, n))
        want = jax.vmap(body(jax.lax))((x, n))
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype


def test_a_widened_carry_names_the_leaf_the_dtypes_and_the_line() -> None:
    """A strongly typed value of a wider dtype reaching a float32 carry is JAX's error: it names
    the leaf, the two types, says the dtypes do not match and points at the user's call."""
    x = np.ones(2, np.float32)
    with fg.enable_x64(True):
        with pytest.raises(TypeError, match=r"leaf 1 has type f32\[2\] but .* has type f64\[2\], so the dtypes do "
                                            r"not match") as info:
            lax.fori_loop(0, 3, lambda i, c: c + np.float64(0.25), x)
        assert "astype(c.dtype)" in str(info.value) and "test_control_flow.py" in str(info.value)
        got = lax.fori_loop(0, 3, lambda i, c: c + i * 0.25, x)   # the index is weak, as JAX's
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, x + 0.75)
        with pytest.raises(TypeError, match=r"leaf 0 has type f64\[2\] but .* has type f64\[\], so the shapes") as info:
            lax.while_loop(lambda c: c[0] > 0, lambda c: c[0], np.ones(2))
        assert "astype" not in str(info.value)


def test_errors() -> None:
    with pytest.raises(TypeError, match="carry's structure and types"):
        lax.while_loop(lambda c: c < 3, lambda c: (c, c), 0)
    with pytest.raises(TypeError, match="bool scalar"):
        lax.while_loop(lambda c: c, lambda c: c, 0.0)
    with pytest.raises(TypeError, match="same structure"):
        lax.cond(True, lambda x: (x, x), lambda x: x, 1.0)
    with pytest.raises(TypeError, match="scalar"):
        lax.cond(np.array([True, False]), lambda x: x, lambda x: x, 1.0)
    with pytest.raises(TypeError, match="pair"):
        lax.scan(lambda c, x: c, 0.0, np.ones(3))
    with pytest.raises(ValueError, match="checkpoint policy"):
        lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0, checkpoint="most")


def test_vmap_of_grad_through_while_masks_lanes_with_different_trip_counts() -> None:
    ts = np.array([0.5, 1.0, 3.0, 10.0])
    want = [fg.grad(newton_solve)(t) for t in ts]
    np.testing.assert_allclose(fg.vmap(fg.grad(newton_solve))(ts), want, rtol=1e-12)
    np.testing.assert_allclose(fg.jit(fg.vmap(fg.grad(newton_solve)))(ts), want, rtol=1e-12)
    assert tape_count() == 0


def test_sub_graphs_are_planned_into_one_scratch_block_of_the_parent(numpy_loops: None) -> None:
    from fungraph.backends.cpu import scratch_bytes
    from fungraph.interpreters.memory import verify_plan
    from fungraph.jit import compile_graph

    x = np.linspace(0, 1, 256)
    g = fg.jit(lambda p, x: lax.cond(p > 0, lambda v: fnp.sin(v) * 3 + fnp.exp(v), lambda v: fnp.cos(v) - 2, x))
    low = g.lower(1.0, x)
    verify_plan(low.graph, low.plan)
    (index, block), = low.plan.scratch.items()
    eqn = low.graph.eqns[index]
    arenas = [compile_graph(b).plan.arena_bytes for b in eqn.params["branches"]]
    assert block.size == max(arenas) == scratch_bytes(eqn)  # the branches share one block
    assert low.compiled.executable.fallback_eqns == 0
    np.testing.assert_allclose(g(1.0, x), np.sin(x) * 3 + np.exp(x))
    np.testing.assert_allclose(g(-1.0, x), np.cos(x) - 2)


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_jitted_loops_are_right_for_every_trip_count_parity(n: int, numpy_loops: None) -> None:
    x = np.linspace(0.1, 0.9, 64)
    f = fg.jit(lambda x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.sin(c[1]) * 1.5), (0, x))[1])
    s = fg.jit(lambda x: lax.scan(lambda c, _: (fnp.sin(c) * 1.5, c), x, None, length=n))
    want = x.copy()
    for _ in range(n):
        want = np.sin(want) * 1.5
    before = LOOP_STATS["final_copies"]
    np.testing.assert_allclose(f(x), want, rtol=1e-14)
    assert LOOP_STATS["final_copies"] - before == (1 if n % 2 == 0 else 0)
    c, ys = s(x)
    np.testing.assert_allclose(c, want, rtol=1e-14)
    assert ys.shape == (n, 64)


def test_verifier_descends_into_every_branch() -> None:
    from fungraph.ir import Eqn, Graph, Var, VerificationError

    g = fg.make_graph(branchy)(0.5)
    cond_eqn = next(e for e in g.eqns if e.primitive.name == "cond")
    good, other = cond_eqn.params["branches"]
    inner = other.eqns[0]
    bad_out = Var(fg.ShapedArray((2,), np.float64))
    broken = Graph(other.invars, other.constvars, other.consts,
                   (Eqn(inner.primitive, inner.inputs, (bad_out,), inner.params),), (bad_out,))
    params = dict(cond_eqn.params)
    params["branches"] = (good, broken)
    from fungraph.ir import Params

    bad = Graph(g.invars, g.constvars, g.consts,
                tuple(Eqn(e.primitive, e.inputs, e.outputs, Params(params)) if e is cond_eqn else e for e in g.eqns),
                g.outvars)
    with pytest.raises(VerificationError):
        bad.verify()


def _nested_conds(depth: int, lax_module):
    """``cond`` nested ``depth`` deep: level k adds 1 and goes deeper while ``x > k``."""
    def f(x):
        def go(k, y):
            if k == 0:
                return y * 2.0
            return lax_module.cond(y > k, lambda t: go(k - 1, t) + 1.0, lambda t: t - 1.0, y)
        return go(depth, x)
    return f


def _nested_whiles(depth: int):
    """``while_loop`` nested ``depth`` deep: level k's body runs level k - 1 and adds 1 (once
    from 0.5)."""
    def f(x):
        def go(k, y):
            if k == 0:
                return y * 2.0
            return lax.while_loop(lambda c: c < k, lambda c: go(k - 1, c) + 1.0, y)
        return go(depth, x)
    return f


def _nested_scans(depth: int):
    """``scan`` nested ``depth`` deep, one step each, adding ``xs`` to the carry."""
    def f(x):
        def go(k, y):
            if k == 0:
                return y * 2.0
            return lax.scan(lambda c, xi: (go(k - 1, c) + xi, None), y, np.array([0.5]))[0]
        return go(depth, x)
    return f


def _executables_bound(monkeypatch, f, x) -> tuple[int, int]:
    """CPU executable bindings to compile and first run ``jit(f)`` on fresh caches, and then
    to run it again."""
    from fungraph.backends.cpu import CpuExecutable
    from fungraph.jit import clear_caches

    count = [0]
    bind = CpuExecutable._bind

    def counted(self, *args, **kwargs):
        count[0] += 1
        return bind(self, *args, **kwargs)

    monkeypatch.setattr(CpuExecutable, "_bind", counted)
    clear_caches()
    g = fg.jit(f)
    g(x)
    first = count[0]
    g(x)
    return first, count[0] - first


@pytest.mark.parametrize("nest, x", [(lambda d: _nested_conds(d, lax), 25.0), (_nested_whiles, 0.5),
                                     (_nested_scans, 0.5)], ids=["cond", "while", "scan"])
def test_nested_control_flow_binds_linearly_many_executables(monkeypatch, numpy_loops, nest, x) -> None:
    """Each level binds its sub-executables once, at most once more for running them: binding
    one used to bind every level below it again, O(depth^2) executables (cond 160 deep:
    25,602, 2.5 s to compile). ``x`` makes every level's sub-graph run."""
    counts = {d: _executables_bound(monkeypatch, nest(d), np.float64(x)) for d in (0, 10, 20)}
    first = {d: c[0] for d, c in counts.items()}
    assert first[20] - first[10] <= first[10] - first[0] + 1, first
    assert all(again == 0 for _, again in counts.values()), counts


def test_nested_cond_matches_eager_and_jax() -> None:
    jax, _ = jax_or_skip()
    f = _nested_conds(12, lax)
    want = jax.jit(_nested_conds(12, jax.lax))
    g = fg.jit(f)
    for x in (-3.0, 0.5, 4.5, 7.0, 11.5, 30.0):
        eager = f(np.float64(x))
        np.testing.assert_allclose(g(np.float64(x)), eager, rtol=1e-15)
        np.testing.assert_allclose(eager, want(np.float64(x)), rtol=1e-15)
