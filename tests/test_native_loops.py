"""Whole elementwise loops as one native C function (fungraph.backends.native.loops): while
loops and fori loops (static bounds make a scan, traced ones a while) against the numpy
engine in both dtype modes, zero-trip and negative ranges, carries of several dtypes, and
the loops that must keep the CPU engine's path."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.native import codegen, toolchain
from fungraph.backends.native.loops import NATIVE_LOOP_STATS, inline_conds, loop_source
from fungraph.primitives.graph_utils import LOOP_STATS
from fungraph.tree_util import tree_leaves
from tests.helpers import native_and_numpy

pytestmark = pytest.mark.skipif(toolchain.find_compiler() is None, reason="no C compiler")


@pytest.fixture
def native(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A temporary build cache and the native engine switched on."""
    old = os.environ.get(toolchain.CACHE_ENV)
    os.environ[toolchain.CACHE_ENV] = str(tmp_path_factory.mktemp("native-loops"))
    was = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", True)
    yield
    fg.config.update("fungraph_native_cpu", was)
    if old is None:
        del os.environ[toolchain.CACHE_ENV]
    else:
        os.environ[toolchain.CACHE_ENV] = old


def run_both(fn: Callable[..., Any], *args: Any, natively: bool = True) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``jit(fn)(*args)`` with the native engine, then with the numpy engine; checks that
    the loop ran as a native loop (or, with ``natively=False``, that it did not)."""
    return native_and_numpy(fn, args, NATIVE_LOOP_STATS, natively)


def assert_same(fn: Callable[..., Any], *args: Any, natively: bool = True) -> None:
    got, want = run_both(fn, *args, natively=natively)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def tanh_step(x: Any) -> Any:
    return fnp.tanh(x) * 0.5 + 0.1


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("size", [1, 10, 1000])
def test_tanh_loops_match_the_numpy_engine(native: None, x64: bool, size: int) -> None:
    with fg.enable_x64(x64):
        x = np.linspace(-3, 3, size)
        loops = [lambda x: lax.fori_loop(0, 37, lambda i, v: tanh_step(v) + i * 1e-3, x),
                 lambda x, n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, tanh_step(c[1])), (0, x)),
                 lambda x, n: lax.fori_loop(n - 40, n, lambda i, v: tanh_step(v) - i, x)]
        for k, loop in enumerate(loops):
            got, want = run_both(loop, x, *([np.int32(23)] if k else []))
            for g, w in zip(got, want):
                # tanh is within 1.5 ulp of numpy's, and the step halves errors
                np.testing.assert_allclose(g, w, rtol=1e-13 if g.dtype == np.float64 else 2e-6, atol=1e-13)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("bounds", [(0, 0), (5, 2), (3, 3), (-3, 4), (-7, -2), (2, -5), (0, 9)])
def test_fori_ranges_static_and_traced_match_exactly(native: None, x64: bool, bounds: tuple[int, int]) -> None:
    lo, hi = bounds
    with fg.enable_x64(x64):
        x = np.arange(6.0) - 2.5
        body = lambda i, v: v * 0.75 + i - fnp.abs(v) / 3  # noqa: E731
        assert_same(lambda x: lax.fori_loop(lo, hi, body, x), x)
        assert_same(lambda x, a, b: lax.fori_loop(a, b, body, x), x, np.int32(lo), np.int32(hi))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_zero_trip_while_returns_the_initial_carries(native: None, x64: bool) -> None:
    with fg.enable_x64(x64):
        x = np.linspace(-1, 1, 5).astype(np.float32)
        f = lambda x, n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0), (7, x))  # noqa: E731
        got, _ = run_both(f, x, np.int32(3))
        np.testing.assert_array_equal(got[1], x)
        assert got[0] == 7
        assert_same(f, x, np.int32(3))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_carries_of_several_dtypes_wrap_and_swap_as_numpy(native: None, x64: bool) -> None:
    with fg.enable_x64(x64):
        n = 11
        f32 = np.linspace(-2, 2, n).astype(np.float32)
        ints = np.arange(n, dtype=np.int32) * 100_000_007
        u8 = np.arange(n, dtype=np.uint8) * 23
        flags = np.arange(n) % 3 == 0
        f64 = np.linspace(0, 1, n)

        def body(c: tuple) -> tuple:
            k, a, b, i, u, m, d, s = c
            return (k + 1, b, a + b * 0.5, i * 3 + 1, u + 200, fnp.logical_not(m) | (i > 0),
                    fnp.where(m, d * 1.5, -d), s * 3 - 2)

        f = lambda *c: lax.while_loop(lambda c: (c[0] < 9) & (c[7] != 5), body, c)  # noqa: E731
        assert_same(f, np.int32(0), f32, f32[::-1].copy(), ints, u8, flags, f64, np.int64(1))


def test_scalar_only_loops_and_empty_carries_run_natively(native: None) -> None:
    collatz = lambda n: lax.while_loop(lambda c: c[0] != 1,  # noqa: E731
                                       lambda c: (fnp.where(c[0] % 2 == 0, c[0] // 2, 3 * c[0] + 1), c[1] + 1),
                                       (n, 0))
    assert_same(collatz, np.int64(27))
    assert_same(lambda x: lax.fori_loop(0, 4, lambda i, v: v * 2.0 + i, x), np.zeros((0, 3)))


def test_broadcast_constants_in_the_body(native: None) -> None:
    w = np.linspace(0.1, 0.9, 8)
    b = np.float64(0.25)
    f = lambda x, w, b: lax.fori_loop(0, 12, lambda i, v: fnp.tanh(v * w) + b, x)  # noqa: E731
    got, want = run_both(f, np.linspace(-1, 1, 8), w, b)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14, atol=1e-15)


def test_loops_that_are_not_elementwise_keep_the_cpu_engine(native: None) -> None:
    x = np.linspace(0.5, 1.0, 16)
    two_shapes = lambda x, y: lax.fori_loop(0, 5, lambda i, c: (c[0] * 2.0, c[1] + 1.0), (x, y))  # noqa: E731
    assert_same(two_shapes, x, np.ones(3), natively=False)
    indexed = lambda x, xs: lax.scan(lambda c, t: (c + t[0], c * t), x, xs)  # noqa: E731
    assert_same(indexed, x, np.ones((4, 16)), natively=False)
    column_mean = lambda x: lax.fori_loop(0, 3, lambda i, v: v - fnp.mean(v, axis=0), x)  # noqa: E731
    assert_same(column_mean, np.ones((4, 5)), natively=False)


def test_the_generated_loop_keeps_scalars_in_locals(native: None) -> None:
    graph = fg.make_graph(lambda x: lax.fori_loop(0, 3, lambda i, v: v + i, x))(np.ones(4))
    scan = next(e for e in graph.eqns if e.primitive.name == "scan")
    p = scan.params
    src = loop_source("f", p["body"].invars[:2], None, 0, p["body"], 3)
    assert src is not None
    assert "for (; it < 3; it++)" in src and "s0 = n0;" in src


def test_disk_cache_keeps_loops_across_jit_caches(native: None, tmp_path: Path) -> None:
    os.environ[toolchain.CACHE_ENV] = str(tmp_path)
    f = lambda x: lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, x)  # noqa: E731
    assert_same(f, np.ones(5))
    assert list(tmp_path.glob("*.so"))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_trig_loops_take_the_fast_versions_and_fall_back_per_iteration(native: None, x64: bool, name: str) -> None:
    """A loop body calling sin, cos or tan checks its arguments each iteration and runs
    fgmath.h's fast ``_small`` versions when all are within FG_TRIG_SMALL_MAX (about 1.6e6),
    else the full-range ones for that iteration: here the arguments grow 4x per iteration,
    so the first iterations are fast and the later ones are not."""
    trig = getattr(fnp, name)
    body = lambda i, c: (c[0] * 4.0, c[1] * 0.5 + trig(c[0]))  # noqa: E731
    graph = fg.make_graph(lambda x: lax.fori_loop(0, 6, body, (x, x)))(np.ones(4))
    p = next(e for e in graph.eqns if e.primitive.name == "scan").params
    src = loop_source("f", p["body"].invars[:2], None, 0, p["body"], 6)
    assert src is not None and "fg_trig_small_ok_" in src and f"fg_{name}_small_" in src and "if (ok)" in src
    with fg.enable_x64(x64):
        small = np.linspace(-3.0, 3.0, 37)
        for x in (small, np.concatenate([small, [4e5, -1e5, 2e6, 1e22, np.inf, np.nan]])):
            with np.errstate(invalid="ignore"):
                got, want = run_both(lambda x: lax.fori_loop(0, 6, body, (x, x)), x)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
                eps = np.finfo(g.dtype).eps
                np.testing.assert_allclose(g, w, rtol=8 * eps, atol=8 * eps)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_tanh_loops_take_the_fast_version_below_one_and_fall_back_per_iteration(native: None, x64: bool) -> None:
    """A loop body calling tanh checks its arguments each iteration and runs fgmath.h's
    ``fg_tanh_small`` (its rational branch alone) when all are below 1, else the full
    function for that iteration: the arguments double per iteration, so the first iterations
    are fast and the later ones are not; NaN, Inf and -0.0 take the full one throughout."""
    body = lambda i, c: (c[0] * 2.0, c[1] * 0.5 + fnp.tanh(c[0]))  # noqa: E731
    graph = fg.make_graph(lambda x: lax.fori_loop(0, 6, body, (x, x)))(np.ones(4))
    p = next(e for e in graph.eqns if e.primitive.name == "scan").params
    src = loop_source("f", p["body"].invars[:2], None, 0, p["body"], 6)
    assert src is not None and "fg_tanh_small_ok_" in src and "fg_tanh_small_f" in src and "if (ok)" in src
    with fg.enable_x64(x64):
        small = np.linspace(-0.2, 0.2, 41)
        for x in (small, np.concatenate([small, [-0.0, 1e-300, np.inf, -np.inf, np.nan]])):
            with np.errstate(invalid="ignore"):
                got, want = run_both(lambda x: lax.fori_loop(0, 6, body, (x, x)), x)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
                np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))
                eps = np.finfo(g.dtype).eps
                np.testing.assert_allclose(g, w, rtol=4 * eps, atol=4 * eps)


def assert_close(fn: Callable[..., Any], *args: Any, natively: bool = True) -> None:
    """Native and numpy engines agree to a few ulp (tanh, exp: fgmath.h's against numpy's)."""
    got, want = run_both(fn, *args, natively=natively)
    for g, w in zip(got, want):
        if g.dtype.kind != "f":
            np.testing.assert_array_equal(g, w)
            continue
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        tol = 1e-12 if g.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# --- scans with scanned inputs and outputs -------------------------------------------------


def recurrence(c: Any, xs: Any, a: Any, reverse: bool = False) -> Any:
    """``c = tanh(c * a + x_t)``, emitting ``c * 2`` (before the update) and ``c`` (after)."""
    def step(c: Any, x: Any) -> tuple[Any, Any]:
        new = fnp.tanh(c * a + x)
        return new, (c * 2.0, new)

    return lax.scan(step, c, xs, reverse=reverse)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans_with_scanned_inputs_and_outputs_run_natively(native: None, x64: bool, reverse: bool) -> None:
    rng = np.random.default_rng(0)
    with fg.enable_x64(x64):
        c, xs, a = rng.standard_normal(50), rng.standard_normal((30, 50)), rng.uniform(0.5, 1.5, 50)
        assert_close(lambda c, xs, a: recurrence(c, xs, a, reverse), c, xs, a)
        # scalar scanned inputs and outputs beside array ones, a scalar carry
        mixed = lambda c, s: lax.scan(lambda k, t: ((k[0] + t, k[1] * t + k[0]), (k[1] - t, k[0] * 2)),  # noqa: E731
                                      c, s, reverse=reverse)
        assert_close(mixed, (np.asarray(0.5, c.dtype), c), np.linspace(-1, 1, 7).astype(c.dtype))
        assert_close(lambda c, xs: lax.scan(lambda k, t: (k + t, k), c, xs), c, np.zeros((0, 50)))


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_gradients_and_vmap_of_a_native_scan(native: None, x64: bool) -> None:
    rng = np.random.default_rng(1)
    with fg.enable_x64(x64):
        c, xs, a = rng.standard_normal(20), rng.standard_normal((12, 20)), rng.uniform(0.5, 1.5, 20)
        loss = lambda c, xs, a: fnp.sum(recurrence(c, xs, a)[1][1] ** 2)  # noqa: E731
        assert_close(fg.grad(loss, (0, 1, 2)), c, xs, a)
        assert_close(fg.vmap(recurrence, in_axes=(0, 1, None)), np.stack([c, -c]), np.stack([xs, xs * 0.5], 1), a)


# --- cond inside loop bodies ----------------------------------------------------------------


def test_conds_become_selects_on_the_clamped_index() -> None:
    body = fg.make_graph(lambda i, x: lax.switch(i, [lambda v: v * 2.0, fnp.tanh, lambda v: v - 1.0], x))(
        np.int32(0), np.ones(3))
    flat = inline_conds(body)
    assert flat is not None
    assert [e.primitive.name for e in flat.eqns].count("select") == 2 and "cond" not in str(flat)
    for i in (-3, 0, 1, 2, 7):
        np.testing.assert_array_equal(fg.eval_graph(flat, np.int32(i), np.linspace(-1, 1, 3))[0],
                                      fg.eval_graph(body, np.int32(i), np.linspace(-1, 1, 3))[0])


def test_each_branch_of_a_loop_body_cond_gets_its_own_element_pass() -> None:
    """The branch index is one per iteration: the element pass is specialised on it, so an
    iteration computes only the branch it takes (not tanh on the iterations that scale: one
    pass there, and the tanh branch's check of its arguments, fast and full passes)."""
    body = lambda i, v: lax.cond(i % 2 == 0, lambda v: fnp.tanh(v) * 0.5, lambda v: v * 0.9, v)  # noqa: E731
    graph = fg.make_graph(lambda x: lax.fori_loop(0, 5, body, x))(np.ones(8))
    p = next(e for e in graph.eqns if e.primitive.name == "scan").params
    flat = inline_conds(p["body"])
    assert flat is not None
    src = loop_source("f", flat.invars[:2], None, 0, flat, 5)
    assert src is not None and src.count("#pragma omp simd") == 4 and src.count("fg_tanh_small_ok_") == 1
    assert src.count("fg_tanh_f") == 1 and src.count("fg_tanh_small_f") == 2
    assert " ? " not in src


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_conds_in_loop_bodies_run_natively(native: None, x64: bool) -> None:
    with fg.enable_x64(x64):
        x = np.linspace(-2, 2, 40)
        parity = lambda x: lax.fori_loop(0, 9, lambda i, v: lax.cond(i % 2 == 0, lambda v: v * 0.75 + 0.1,  # noqa: E731
                                                                     fnp.tanh, v), x)
        assert_close(parity, x)
        branches = [lambda v: v * 2.0, lambda v: fnp.exp(-v * v), lambda v: v - 1.0]
        switch = lambda x, n: lax.while_loop(  # noqa: E731
            lambda c: c[0] < n, lambda c: (c[0] + 1, lax.switch(c[0] - 2, branches, c[1])), (0, x))
        assert_close(switch, x, np.int32(8))
        nested = lambda x: lax.fori_loop(0, 6, lambda i, v: lax.cond(  # noqa: E731
            i > 2, lambda v: lax.cond(i > 4, lambda w: w + 1.0, lambda w: w * 0.5, v), lambda v: -v, v), x)
        assert_close(nested, x)
        assert_close(fg.grad(lambda x: fnp.sum(parity(x) ** 2)), x)
        # vmap batches the loop's counter too: a (2,) carry beside the (2, 40) one, one per row
        assert_close(fg.vmap(parity), np.stack([x, x * 0.5]))
        counted = lambda x, n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))  # noqa: E731
        assert_close(fg.vmap(counted), np.stack([x, x * 0.5]), np.array([3, 7], np.int32))


# --- reductions in conds and bodies -------------------------------------------------------


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_while_conds_reducing_over_the_carry_run_natively(native: None, x64: bool) -> None:
    with fg.enable_x64(x64):
        x = np.linspace(-3, 5, 100)
        halve = lambda x, tol: lax.while_loop(lambda v: fnp.max(fnp.abs(v)) > tol,  # noqa: E731
                                              lambda v: v * 0.5 + 1e-4, x)
        assert_same(halve, x, 1e-2)
        counted = lambda x: lax.while_loop(  # noqa: E731
            lambda c: (fnp.sum(c[1] * c[1]) > 1.0) & (c[0] < 50), lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.9), (0, x))
        assert_close(counted, x)
        nan = x.copy()
        nan[7] = np.nan
        assert_same(halve, nan, 1e-2)
        centre = lambda x: lax.fori_loop(0, 5, lambda i, v: v - fnp.mean(v) * 0.5 + i, x)  # noqa: E731
        # a carry passing through untouched, beside one the body and the cond reduce
        assert_close(lambda x, y: lax.while_loop(lambda c: fnp.max(c[0]) > 0.5,
                                                 lambda c: (c[0] * 0.5 - fnp.mean(c[0]), c[1]), (x, y)), x, x * 2)
        assert_close(centre, x)
        assert_close(fg.grad(lambda x: fnp.sum(fnp.sin(centre(x)))), x)
        # a scan whose body reduces each scanned row and emits the centred rows
        assert_close(lambda c, xs: lax.scan(lambda c, t: (c + fnp.max(t), t - fnp.mean(t) + c), c, xs),
                     np.float64(0.5), np.linspace(-1, 1, 60).reshape(6, 10))
        assert_close(fg.vmap(lambda x: halve(x, 0.1)), np.stack([x, x * 3]))


# --- large loops split across threads -------------------------------------------------------


def _loop_source_of(fn: Callable[..., Any], *args: Any) -> str:
    """The native source of the first ``while`` or ``scan`` of ``make_graph(fn)(*args)``."""
    graph = fg.make_graph(fn)(*args)
    e = next(e for e in graph.eqns if e.primitive.name in ("while", "scan"))
    p = e.params
    if e.primitive.name == "scan":
        body = inline_conds(p["body"])
        assert body is not None
        nc = p["num_carry"]
        return loop_source("f", body.invars[:nc], None, 0, body, int(p["length"]))  # type: ignore[return-value]
    nc = len(p["body_graph"].outvars)
    src = loop_source("f", p["body_graph"].invars[:nc], p["cond_graph"], p["n_cc"], p["body_graph"], None)
    assert src is not None
    return src


def test_large_loop_bodies_split_each_iteration_across_threads(native: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads, a body's element pass over at least PARALLEL_MIN_ELEMENTS elements
    computing a transcendental function is a chunk function each iteration hands to fgpool.h,
    and gives the bits of one thread; small carries, cheap passes and the check of sin's
    arguments stay on one thread."""
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    counted = lambda x, n: lax.while_loop(lambda c: c[0] < n,  # noqa: E731
                                          lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.5 + 0.1 * c[0]), (0, x))
    big = np.linspace(-3, 3, 100_003)
    src = _loop_source_of(counted, big, np.int32(4))
    assert "fg_parallel(f_pass0, " in src and "static void f_pass0(void *const *args, int64_t lo, int64_t hi)" in src
    assert "fg_parallel(" not in _loop_source_of(counted, big[:1000], np.int32(4))
    # a pass of a few operations per element is faster on one core (its data stays in that cache)
    cheap = lambda x: lax.fori_loop(0, 3, lambda i, v: v * 0.99 + 1e-3, x)  # noqa: E731
    assert "fg_parallel(" not in _loop_source_of(cheap, big)
    trig = lambda x: lax.fori_loop(0, 6, lambda i, c: (c[0] * 4.0, c[1] * 0.5 + fnp.sin(c[0])), (x, x))  # noqa: E731
    trig_src = _loop_source_of(trig, big)
    assert trig_src.count("fg_parallel(") == 2 and "ok &= fg_trig_small_ok_f" in trig_src.split("fg_parallel(")[0]
    with fg.enable_x64(True):
        w = np.linspace(0.1, 0.9, 1000)
        far = big.reshape(-1)[:-3].reshape(100, 1000).copy()
        far[71, 5] = 1e5  # its sine leaves the fast range on the third iteration, in one chunk only
        loops = [(counted, (big, np.int32(9))), (trig, (far,)),
                 (lambda x, w: lax.fori_loop(0, 5, lambda i, v: fnp.tanh(v * w) + i, x), (far, w)),
                 (lambda c, xs: recurrence(c, xs, 0.75), (big[:40_000], np.ones((3, 40_000)))),
                 (lambda x: lax.fori_loop(0, 7, lambda i, v: lax.cond(i % 2 == 0, lambda v: fnp.exp(-v * v),
                                                                      lambda v: v * 0.9, v), x), (big,))]
        for fn, args in loops:
            threaded = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
            monkeypatch.setenv(codegen.THREADS_ENV, "1")
            fg.clear_caches()
            single, want = run_both(fn, *args)
            monkeypatch.setenv(codegen.THREADS_ENV, "2")
            fg.clear_caches()
            for t, s, ref in zip(threaded, single, want):
                np.testing.assert_array_equal(t, s)
                np.testing.assert_array_equal(np.isnan(t), np.isnan(ref))
                np.testing.assert_allclose(t, ref, rtol=1e-12, atol=1e-12)


_SPLIT_LOOP_CHILD = """
import os, threading, numpy as np
os.environ["FUNGRAPH_NATIVE_THREADS"] = "2"
import fungraph as fg, fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.native.loops import NATIVE_LOOP_STATS
fg.config.update("jax_enable_x64", True)
f = fg.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: fnp.tanh(v) * 0.5 + 0.1 * i, x))
g = fg.jit(lambda x: lax.while_loop(lambda v: fnp.sum(v * v) > 1.0, lambda v: v * 0.9, x))
xs = [np.random.default_rng(k).standard_normal(1 << 17) for k in range(4)]
want = [np.asarray(f(x, 30)) for x in xs]
shrunk = [np.asarray(g(x)) for x in xs]
assert NATIVE_LOOP_STATS["runs"] == 8
bad = []
def work(k):
    for _ in range(10):
        if not np.array_equal(np.asarray(f(xs[k], 30)), want[k]) or not np.array_equal(np.asarray(g(xs[k])), shrunk[k]):
            bad.append(k)
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(bad)
"""


def test_split_loops_called_from_several_threads_keep_their_results(native: None) -> None:
    """Python threads running split loops at once (an element pass, a reducing cond) get the
    results of a lone call: one uses the pool per iteration, the others run each job whole."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", _SPLIT_LOOP_CHILD], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]"], done.stdout + done.stderr[-2000:]


def test_reducing_conds_over_large_carries_split_their_reduction(native: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A while whose cond reduces a large carry (``max(abs(x)) > tol``, ``sum(x * x)``) splits
    the reduction across threads each iteration, each chunk a power of two sum blocks whose
    partial values combine in chunk order: one thread's bits and iteration count, NaN kept."""
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    halve = lambda x, tol: lax.while_loop(  # noqa: E731
        lambda v: (fnp.max(fnp.abs(v)) > tol) & (fnp.sum(v * v) > tol * tol), lambda v: v * 0.75 + 1e-5, x)
    big = np.linspace(-3, 5, 100_001)
    src = _loop_source_of(halve, big, 1e-2)
    assert "fg_parallel(f_cond_part, args, 100001, 8192, 2);" in src
    assert "fg_parallel(" not in _loop_source_of(halve, big[:5000], 1e-2)
    nan = big.copy()
    nan[54_321] = np.nan
    ints = np.arange(100_001, dtype=np.int32) * 70_001
    wrap = lambda v: lax.while_loop(lambda c: (fnp.sum(c[1]) != 7) & (c[0] < 5),  # noqa: E731
                                    lambda c: (c[0] + 1, c[1] * 3 + 1), (0, v))
    with fg.enable_x64(True):
        for fn, args in ((halve, (big, 1e-2)), (halve, (nan, 1e-2)), (wrap, (ints,))):
            before = LOOP_STATS["iterations"]
            threaded = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
            count = LOOP_STATS["iterations"] - before
            monkeypatch.setenv(codegen.THREADS_ENV, "1")
            fg.clear_caches()
            before = LOOP_STATS["iterations"]
            single, want = run_both(fn, *args)
            assert LOOP_STATS["iterations"] - before == 2 * count  # one thread's, then the numpy engine's
            monkeypatch.setenv(codegen.THREADS_ENV, "2")
            fg.clear_caches()
            for t, s, ref in zip(threaded, single, want):
                np.testing.assert_array_equal(t, s)
                np.testing.assert_array_equal(t, ref)
