"""Whole elementwise loops as one native C function (fungraph.backends.native.loops): while
loops and fori loops (static bounds make a scan, traced ones a while) against the numpy
engine in both dtype modes, zero-trip and negative ranges, carries of several dtypes, and
the loops that must keep the CPU engine's path."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.native import toolchain
from fungraph.backends.native.loops import NATIVE_LOOP_STATS, loop_source
from fungraph.backends.native.regions import native_enabled
from fungraph.tree_util import tree_leaves

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
    """``jit(fn)(*args)`` with the native engine, then with the numpy engine, as leaves; checks
    that the loop ran as a native loop (or, with ``natively=False``, that it did not)."""
    assert native_enabled()
    before = NATIVE_LOOP_STATS["runs"]
    got = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
    assert (NATIVE_LOOP_STATS["runs"] > before) == natively
    fg.config.update("fungraph_native_cpu", False)
    try:
        want = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
    finally:
        fg.config.update("fungraph_native_cpu", True)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
    return got, want


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
    reduction_cond = lambda x: lax.while_loop(lambda v: fnp.sum(v) < 100.0, lambda v: v * 1.5, x)  # noqa: E731
    assert_same(reduction_cond, x, natively=False)
    reduction_body = lambda x: lax.fori_loop(0, 5, lambda i, v: v - fnp.mean(v), x)  # noqa: E731
    assert_same(reduction_body, x, natively=False)
    two_shapes = lambda x, y: lax.fori_loop(0, 5, lambda i, c: (c[0] * 2.0, c[1] + 1.0), (x, y))  # noqa: E731
    assert_same(two_shapes, x, np.ones(3), natively=False)


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
