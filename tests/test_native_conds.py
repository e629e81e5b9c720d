"""Top-level ``cond``s whose branches are elementwise, run as one native C function
(fungraph.backends.native.conds): every branch and clamped index against the numpy engine,
scalar and array operands and outputs, broadcast operands, pass-through outputs, large
branches split across threads, gradients, and the conds that must keep the CPU engine's
branch executables."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends.cpu_regions import CHUNK_BYTES
from fungraph.backends.native import codegen, conds, toolchain
from fungraph.backends.native.conds import NATIVE_COND_STATS, cond_source
from fungraph.backends.native.regions import native_enabled
from tests.helpers import native_and_numpy

pytestmark = pytest.mark.skipif(toolchain.find_compiler() is None, reason="no C compiler")


@pytest.fixture
def native(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A temporary build cache, the native engine switched on, and conds of every size run
    natively (so that small test arrays reach it)."""
    monkeypatch.setattr(conds, "MIN_BYTES", 1)
    fg.clear_caches()
    old = os.environ.get(toolchain.CACHE_ENV)
    os.environ[toolchain.CACHE_ENV] = str(tmp_path_factory.mktemp("native-conds"))
    was = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", True)
    yield
    fg.config.update("fungraph_native_cpu", was)
    fg.clear_caches()
    if old is None:
        del os.environ[toolchain.CACHE_ENV]
    else:
        os.environ[toolchain.CACHE_ENV] = old


def run_both(fn: Callable[..., Any], *args: Any, natively: bool = True) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``jit(fn)(*args)`` with the native engine, then with the numpy engine; checks that
    a cond ran natively (or, with ``natively=False``, that none did)."""
    return native_and_numpy(fn, args, NATIVE_COND_STATS, natively)


def assert_close(fn: Callable[..., Any], *args: Any, natively: bool = True, tol: float = 0.0) -> None:
    """Bit for bit with ``tol=0`` (arithmetic); within ``tol`` relative and absolute (values
    of about 1) for fgmath.h's functions, a few ulp from numpy's."""
    got, want = run_both(fn, *args, natively=natively)
    for g, w in zip(got, want):
        if tol:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@pytest.mark.parametrize("size", [1, 10, 1000])
def test_two_branch_cond_matches_the_numpy_engine(native: None, x64: bool, size: int) -> None:
    with fg.enable_x64(x64):
        x = np.linspace(-3, 3, size)
        fun = lambda p, x: lax.cond(p > 0, lambda v: fnp.tanh(v) * 0.5 + 0.1, lambda v: v * 2.0 - 1.0, x)  # noqa: E731
        for p in (1.0, -1.0):
            assert_close(fun, p, x, tol=1e-15 if x64 else 5e-7)


def test_switch_takes_every_branch_and_clamps_the_index(native: None) -> None:
    """``lax.switch`` as JAX: an index below 0 takes the first branch, one past the end the last."""
    x = np.arange(12, dtype=np.int32) - 5
    branches = [lambda v: v * 3, lambda v: v - 7, lambda v: -v, lambda v: v * v + 1]
    fun = lambda i, x: lax.switch(i, branches, x)  # noqa: E731
    for i in (-3, 0, 1, 2, 3, 4, 99):
        assert_close(fun, i, x)
        np.testing.assert_array_equal(fg.jit(fun)(i, x), branches[min(max(i, 0), 3)](x))


def test_scalar_and_array_operands_and_outputs(native: None) -> None:
    """Scalars computed once, an operand broadcast along the rows, several outputs of
    several dtypes, and outputs that pass an operand through."""
    x = np.random.default_rng(0).standard_normal((6, 5))
    b = np.linspace(-1, 1, 5)

    def fun(p: Any, s: Any, x: Any, b: Any) -> Any:
        def yes(s: Any, x: Any, b: Any) -> Any:
            k = s * 2.0 + 1.0
            return x * k + b, k, (x > b).astype(np.int32), x

        def no(s: Any, x: Any, b: Any) -> Any:
            return fnp.maximum(x, b) - s, -s, (x < 0).astype(np.int32), x + b

        return lax.cond(p, yes, no, s, x, b)

    for p in (True, False):
        assert_close(fun, p, 0.75, x, b)


def test_large_branches_split_across_threads(native: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large transcendental pass goes through the pool with two threads (fgpool.h), with the
    results of one thread; sin beyond the fast range takes the full-range version."""
    x = np.random.default_rng(1).standard_normal(200_000) * 3
    fun = lambda p, x: lax.cond(p > 0, lambda v: fnp.sin(v) * fnp.exp(-v * v), lambda v: fnp.tanh(v) + 1.0, x)  # noqa: E731
    one = {}
    for threads in ("1", "2"):
        monkeypatch.setenv(codegen.THREADS_ENV, threads)
        fg.clear_caches()
        one[threads] = [fg.jit(fun)(p, x) for p in (1.0, -1.0)]
        assert_close(fun, 1.0, x, tol=1e-15)
        assert_close(fun, -1.0, x, tol=1e-15)
    for a, b in zip(one["1"], one["2"]):
        np.testing.assert_array_equal(a, b)
    far = x.copy()
    far[12345] = 1e9
    assert_close(fun, 1.0, far, tol=1e-15)
    branches = [b for e in fg.jit(fun).lower(1.0, x).compiled.graph.eqns if e.primitive.name == "cond"
                for b in e.params["branches"]]
    assert "fg_parallel(" in cond_source("f", np.dtype(np.int32), branches)


def test_gradient_through_a_native_cond(native: None) -> None:
    x = np.linspace(-2, 2, 64)
    loss = lambda p, x: fnp.sum(lax.cond(p > 0, lambda v: fnp.tanh(v) * v, lambda v: v * v * 0.5, x))  # noqa: E731
    for p in (1.0, -1.0):
        got, want = run_both(fg.grad(loss, argnums=1), p, x)
        np.testing.assert_allclose(got[0], want[0], rtol=4e-16, atol=1e-300)


def test_conds_that_are_not_elementwise_keep_the_branch_executables(native: None) -> None:
    x = np.linspace(-1, 1, 24).reshape(4, 6)
    reducing = lambda p, x: lax.cond(p > 0, lambda v: v * fnp.sum(v), lambda v: v + 1.0, x)  # noqa: E731
    matmul = lambda p, x: lax.cond(p > 0, lambda v: v @ v.T, lambda v: v[:, :4] * 2.0, x)  # noqa: E731
    for fun in (reducing, matmul):
        for p in (1.0, -1.0):
            assert_close(fun, p, x, natively=False)


def test_a_native_cond_needs_no_branch_scratch(native: None) -> None:
    """The plan gives a native cond no scratch block: its branches never run as executables."""
    x = np.linspace(-1, 1, 100_000)
    fun = lambda p, x: lax.cond(p > 0, lambda v: fnp.exp(v) * 2.0, lambda v: v - 1.0, x)  # noqa: E731
    compiled = fg.jit(fun).lower(1.0, x).compiled
    index = next(i for i, e in enumerate(compiled.graph.eqns) if e.primitive.name == "cond")
    assert index not in compiled.plan.scratch
    fg.config.update("fungraph_native_cpu", False)
    try:
        fg.clear_caches()
        off = fg.jit(fun).lower(1.0, x).compiled
    finally:
        fg.config.update("fungraph_native_cpu", True)
    assert index in off.plan.scratch


def test_small_conds_keep_the_branch_executables_by_default(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Below the region size a cond is not worth a compiler call per shape; from it, it is."""
    assert conds.MIN_BYTES == 2 * CHUNK_BYTES
    old = os.environ.get(toolchain.CACHE_ENV)
    os.environ[toolchain.CACHE_ENV] = str(tmp_path_factory.mktemp("native-conds-size"))
    fg.clear_caches()
    try:
        fun = lambda p, x: lax.cond(p > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)  # noqa: E731
        for size, natively in ((1000, False), (conds.MIN_BYTES // 8, True)):
            x = np.linspace(-1, 1, size)
            before = NATIVE_COND_STATS["runs"]
            with fg.enable_x64(True):
                np.testing.assert_array_equal(fg.jit(fun)(1.0, x), x * 2.0)
            assert (NATIVE_COND_STATS["runs"] > before) == (natively and native_enabled())
    finally:
        fg.clear_caches()
        if old is None:
            del os.environ[toolchain.CACHE_ENV]
        else:
            os.environ[toolchain.CACHE_ENV] = old
