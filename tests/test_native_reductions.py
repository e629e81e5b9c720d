"""Reductions inside native regions (fungraph.backends.native.reductions): softmax, layer norm,
``x / sum(x)``, a sum of an elementwise chain and more, each one region computed row by row
in C, against the numpy engine in both dtype modes (values, gradients, vmap); the summation
error bound; the region pass's rules for reductions; the numpy fallback of a region the
generator cannot express."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.backends.cpu_regions as cpu_regions
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.backends import backend_factory
from fungraph.backends.native import codegen, toolchain
from fungraph.backends.native.reductions import STASH_ELEMENTS, SUM_BLOCK, reduction_source
from fungraph.backends.native.regions import native_enabled
from fungraph.interpreters.optimize import optimize
from fungraph.interpreters.regions import FusionCapability, find_regions
from fungraph.jit import clear_caches
from fungraph.scipy.special import gammaln
from fungraph.tree_util import tree_leaves

pytestmark = pytest.mark.skipif(toolchain.find_compiler() is None, reason="no C compiler")


@pytest.fixture
def small_regions(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Regions at any size (the CPU engine forms them from 512 KiB), a temporary build cache,
    the native engine on."""
    factory = backend_factory("cpu")
    monkeypatch.setattr(factory, "fusion", dataclasses.replace(factory.fusion, min_bytes=1))
    monkeypatch.setenv(toolchain.CACHE_ENV, str(tmp_path_factory.mktemp("native-reductions")))
    was = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", True)
    clear_caches()
    yield
    fg.config.update("fungraph_native_cpu", was)
    clear_caches()


def on_engine(native: bool, fun: Callable[..., Any], *args: Any) -> list[np.ndarray]:
    fg.config.update("fungraph_native_cpu", native)
    try:
        return [np.asarray(v) for v in tree_leaves(fg.jit(fun)(*args))]
    finally:
        fg.config.update("fungraph_native_cpu", True)


def reducing_regions(fun: Callable[..., Any], *args: Any) -> list[list[str]]:
    """The members of each region holding a reduction; every region runs natively."""
    lowered = fg.jit(fun).lower(*args)
    fusions = [e for e in lowered.graph.eqns if e.primitive.name == "fusion"]
    assert len(lowered.compiled.executable.native) == len(fusions)
    members = [[q.primitive.name for q in e.params["call"].eqns] for e in fusions]
    return [m for m in members if any(n.startswith("reduce_") for n in m)]


def assert_close(fun: Callable[..., Any], *args: Any, rtol32: float = 2e-6, rtol64: float = 1e-13) -> None:
    assert native_enabled()
    got, want = on_engine(True, fun, *args), on_engine(False, fun, *args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind != "f":
            np.testing.assert_array_equal(g, w)
            continue
        rtol = rtol64 if g.dtype == np.float64 else rtol32
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.nanmax(np.abs(w), initial=0))))


def softmax(x: Any) -> Any:
    e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
    return e / fnp.sum(e, axis=-1, keepdims=True)


def layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    mean = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.var(x, axis=-1, keepdims=True)
    return (x - mean) / fnp.sqrt(var + 1e-5) * gamma + beta


@pytest.fixture(params=[True, False], ids=["x64", "x32"])
def x64(request: pytest.FixtureRequest) -> Iterator[bool]:
    with fg.enable_x64(request.param):
        yield request.param


def test_softmax_is_one_native_region(small_regions: None, x64: bool) -> None:
    x = np.random.default_rng(0).standard_normal((37, 300)) * 4
    (members,) = reducing_regions(softmax, x)
    assert {"reduce_max", "reduce_sum", "exp", "div"} <= set(members)
    assert_close(softmax, x)


@pytest.mark.parametrize("length", [300, STASH_ELEMENTS + 1])
def test_short_rows_stash_what_long_rows_compute_again(small_regions: None, length: int) -> None:
    """Softmax's ``exp`` is stored on the stack for its last pass when a row is short, and
    computed again when it is long; the values are the same either way."""
    x = np.random.default_rng(9).standard_normal((3, length)) * 5
    region = next(e for e in fg.jit(softmax).lower(x).graph.eqns if e.primitive.name == "fusion")
    src = reduction_source(region.params["call"], "f")
    assert src is not None and src.count("fg_exp_") == (1 if length <= STASH_ELEMENTS else 2)
    with fg.enable_x64(True):
        assert_close(softmax, x)


def test_layer_norm_with_broadcast_scale_and_shift(small_regions: None, x64: bool) -> None:
    rng = np.random.default_rng(1)
    x, gamma, beta = rng.standard_normal((20, 3, 129)) + 3, rng.standard_normal(129), rng.standard_normal(129)
    (members,) = reducing_regions(layer_norm, x, gamma, beta)
    assert members.count("reduce_sum") == 2 and "sqrt" in members
    assert_close(layer_norm, x, gamma, beta)


@pytest.mark.parametrize("shape", [(1000,), (40, 50), (3, 1, 257)])
def test_whole_array_reductions_feeding_and_ending_regions(small_regions: None, x64: bool,
                                                           shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(2).uniform(0.5, 2.0, shape)
    funs = [lambda x: x / fnp.sum(x), lambda x: fnp.sum(fnp.tanh(x) * 2 + 1),
            lambda x: (fnp.sum(x * x), fnp.max(fnp.abs(x - 1)), fnp.min(fnp.exp(-x)) + 1.0),
            lambda x: fnp.mean(x, axis=tuple(range(1, len(shape))), keepdims=True) * x]
    for fun in funs[:3] + (funs[3:] if len(shape) > 1 and shape[1] > 1 else []):
        assert reducing_regions(fun, x)
        assert_close(fun, x)


def test_large_reducing_regions_split_their_rows_across_threads(small_regions: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads a reducing region of at least PARALLEL_MIN_ELEMENTS elements hands
    ranges of its rows (a flat index over two kept axes here) to fgpool.h, and one long row
    whose reductions take one pass hands it chunks, with the bits of one thread (NaN kept); a
    whole-array sum read back by its elements (two passes) keeps one thread."""
    x = np.random.default_rng(5).standard_normal((6, 50, 300)) * 3
    gamma, beta = np.linspace(0.5, 1.5, 300), np.linspace(-1, 1, 300)
    region = next(e for e in fg.jit(layer_norm).lower(x, gamma, beta).graph.eqns if e.primitive.name == "fusion")
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    src = reduction_source(region.params["call"], "f")
    assert src is not None and "fg_parallel(f_rows, args, 300, 54, 2);" in src
    whole = next(e for e in fg.jit(lambda x: x / fnp.sum(x)).lower(x).graph.eqns if e.primitive.name == "fusion")
    assert "fg_parallel(" not in (reduction_source(whole.params["call"], "f") or "")
    chained = lambda v: (fnp.tanh(v) * 2.0, fnp.sum(fnp.tanh(v)), fnp.max(v), fnp.min(v * 3))  # noqa: E731
    long = np.random.default_rng(6).standard_normal(100_003)
    long[77_777] = np.nan
    one_row = next(e for e in fg.jit(chained).lower(long).graph.eqns if e.primitive.name == "fusion")
    assert "fg_parallel(f_part, args, 100003, 8192, 2);" in (reduction_source(one_row.params["call"], "f") or "")
    with fg.enable_x64(True):
        for fun, args in ((layer_norm, (x, gamma, beta)), (softmax, (x,)), (chained, (long,)),
                          (chained, (np.nan_to_num(long),))):
            threaded = on_engine(True, fun, *args)
            monkeypatch.setenv(codegen.THREADS_ENV, "1")
            clear_caches()
            single = on_engine(True, fun, *args)
            monkeypatch.setenv(codegen.THREADS_ENV, "2")
            clear_caches()
            for t, s in zip(threaded, single):
                np.testing.assert_array_equal(t, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # nanmax of the all-NaN sum
                assert_close(fun, *args)


def test_reductions_over_leading_axes_run_natively(small_regions: None, x64: bool) -> None:
    """A bias gradient (a masked gradient, its column sum, the update), a column mean over two
    leading axes with inputs broadcast along slices and along columns, column max and min
    with NaN and infinities, integer column sums that wrap: each one native region walked by
    columns, against the numpy engine."""
    rng = np.random.default_rng(11)
    g, b = rng.standard_normal((300, 500)), rng.standard_normal(500)
    mask = rng.standard_normal((300, 500)) > 0
    bias_grad = lambda g, m, b: (fnp.where(m, g, 0.0), b - 0.1 * fnp.sum(fnp.where(m, g, 0.0), axis=0))  # noqa: E731
    assert reducing_regions(bias_grad, g, mask, b)
    assert_close(bias_grad, g, mask, b)
    x, w, s = rng.standard_normal((8, 30, 200)), rng.standard_normal(200), rng.standard_normal((8, 30, 1))
    mean = lambda x, w, s: fnp.mean(fnp.tanh(x * w + s), axis=(0, 1)) * 2.0 + w  # noqa: E731
    (members,) = reducing_regions(mean, x, w, s)
    assert "tanh" in members and "reduce_sum" in members
    assert_close(mean, x, w, s)
    x = rng.standard_normal((50, 120))
    x[7, 3], x[20, 5], x[:, 9] = np.nan, -np.inf, np.inf
    extremes = lambda x: (fnp.max(x * 2.0, axis=0), fnp.min(fnp.abs(x) - 1.0, axis=0))  # noqa: E731
    with np.errstate(invalid="ignore"):
        assert reducing_regions(extremes, x)
        for got, want in zip(on_engine(True, extremes, x), on_engine(False, extremes, x)):
            np.testing.assert_array_equal(got, want)
    big = np.arange(6000, dtype=np.int32).reshape(50, 120) * 40_000_003
    wrap = lambda v: fnp.sum(v * 3 + 1, axis=0)  # noqa: E731
    assert reducing_regions(wrap, big)
    assert_close(wrap, big)
    # lgamma has no C rule: the column region runs whole on the numpy engine
    special = lambda x: fnp.sum(gammaln(x) * 2.0, axis=0)  # noqa: E731
    x = np.abs(np.nan_to_num(x, posinf=5.0, neginf=-5.0)) + 1
    lowered = fg.jit(special).lower(x)
    (region,) = [e for e in lowered.graph.eqns if e.primitive.name == "fusion"]
    assert reduction_source(region.params["call"], "f") is None and not lowered.compiled.executable.native
    assert_close(special, x)


def test_column_regions_split_their_columns_across_threads(small_regions: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads a large column region hands blocks of columns to fgpool.h: each
    column's sum is the same one after another, so the bits are one thread's."""
    rng = np.random.default_rng(12)
    g, mask, b = rng.standard_normal((256, 1024)), rng.standard_normal((256, 1024)) > 0, rng.standard_normal(1024)
    bias_grad = lambda g, m, b: (fnp.where(m, g, 0.0), b - 0.1 * fnp.sum(fnp.where(m, g, 0.0), axis=0))  # noqa: E731
    region = next(e for e in fg.jit(bias_grad).lower(g, mask, b).graph.eqns if e.primitive.name == "fusion")
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    src = reduction_source(region.params["call"], "f")
    assert src is not None and "fg_parallel(f_cols, args, 1024, 64, 2);" in src
    monkeypatch.setenv(codegen.THREADS_ENV, "1")
    assert "fg_parallel(" not in (reduction_source(region.params["call"], "f") or "")
    for dtype in (np.float32, np.float64):
        with fg.enable_x64(dtype == np.float64):
            args = (g.astype(dtype), mask, b.astype(dtype))
            single = on_engine(True, bias_grad, *args)
            monkeypatch.setenv(codegen.THREADS_ENV, "2")
            clear_caches()
            threaded = on_engine(True, bias_grad, *args)
            monkeypatch.setenv(codegen.THREADS_ENV, "1")
            clear_caches()
            for t, s in zip(threaded, single):
                np.testing.assert_array_equal(t, s)
            assert_close(bias_grad, *args)


def test_row_values_returned_with_the_rows(small_regions: None, x64: bool) -> None:
    """A region's row values used outside it (the mean and the variance of a norm) are its outputs."""
    def norm(x: Any) -> Any:
        mean = fnp.mean(x, axis=-1)
        var = fnp.mean(fnp.square(x - mean[:, None]), axis=-1)
        return (x - mean[:, None]) * lax.rsqrt(var[:, None] + 1e-6), mean, var + 1.0

    assert_close(norm, np.random.default_rng(3).standard_normal((64, 100)) * 3 + 1)


def test_max_and_min_propagate_nan_and_integers_wrap(small_regions: None, x64: bool) -> None:
    x = np.random.default_rng(4).standard_normal((8, 100))
    x[2, 17] = np.nan
    x[5, 0] = -np.inf
    with np.errstate(invalid="ignore"):
        assert_close(lambda x: (x - fnp.max(x, axis=1, keepdims=True), x * fnp.min(x, axis=1, keepdims=True)), x)
    big = (np.arange(400, dtype=np.int32).reshape(4, 100) * 40_000_003)
    f = lambda v: (v - fnp.sum(v * 3, axis=1, keepdims=True), fnp.max(v + 1), fnp.min(v ^ 5, axis=1))  # noqa: E731
    assert reducing_regions(f, big)
    assert_close(f, big)
    flags = np.arange(300).reshape(3, 100) % 7 == 0
    assert_close(lambda m: (fnp.any(m, axis=1), fnp.all(~m | m, axis=1)), flags)


def test_gradients_through_reducing_regions(small_regions: None, x64: bool) -> None:
    rng = np.random.default_rng(5)
    x, gamma, beta = rng.standard_normal((16, 64)), rng.standard_normal(64), rng.standard_normal(64)
    w = rng.standard_normal((16, 64))
    loss = lambda x, g, b: fnp.sum(softmax(layer_norm(x, g, b)) * w)  # noqa: E731
    grad = fg.grad(loss, (0, 1, 2))
    assert reducing_regions(grad, x, gamma, beta)
    assert_close(grad, x, gamma, beta, rtol32=2e-5, rtol64=1e-11)


def test_vmap_of_softmax_and_of_a_normalised_sum(small_regions: None, x64: bool) -> None:
    x = np.random.default_rng(6).standard_normal((5, 7, 90))
    batched = fg.vmap(softmax)
    assert reducing_regions(batched, x)
    assert_close(batched, x)
    assert_close(fg.vmap(lambda v: v / fnp.sum(fnp.abs(v))), x)


def test_a_donated_input_takes_the_output_in_place(small_regions: None) -> None:
    x = np.random.default_rng(7).standard_normal((50, 200))
    want = on_engine(False, softmax, x)[0]
    got = fg.jit(softmax, donate_argnums=0)(fg.device_put(x.copy()))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13)


def test_column_regions_write_in_place_over_donated_inputs(small_regions: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A bias gradient's region writes the masked gradient over the donated gradient and the
    updated bias over the donated bias (every block of columns reads its own columns before
    it stores them), on one thread and split across two."""
    rng = np.random.default_rng(13)
    g, mask, b = rng.standard_normal((256, 512)), rng.standard_normal((256, 512)) > 0, rng.standard_normal(512)
    step = lambda g, m, b: (fnp.where(m, g * 0.5, 0.0), b - 0.1 * fnp.sum(fnp.where(m, g * 0.5, 0.0), axis=0))  # noqa: E731
    with fg.enable_x64(True):
        want = on_engine(False, step, g, mask, b)
        for threads in ("1", "2"):
            monkeypatch.setenv(codegen.THREADS_ENV, threads)
            clear_caches()
            donating = fg.jit(step, donate_argnums=(0, 2))
            exe = donating.lower(g, mask, b).compiled.executable
            assert len(exe.native) == 1 and sorted(exe.donated_outputs) == [0, 1]
            g_in, b_in = fnp.array(g), fnp.array(b)  # fungraph arrays: donated numpy ones are copied, as in JAX
            ptrs = [np.asarray(g_in).ctypes.data, np.asarray(b_in).ctypes.data]
            got = donating(g_in, mask, b_in)
            assert [np.asarray(v).ctypes.data for v in got] == ptrs
            np.testing.assert_array_equal(np.asarray(got[0]), want[0])
            np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-13, atol=1e-13)


def fsum_error(got: float, x: np.ndarray) -> float:
    """``|got - sum(x)|`` relative to ``sum |x|`` (exact sums by ``math.fsum``)."""
    return abs(float(got) - math.fsum(x.astype(np.float64).tolist())) / math.fsum(np.abs(x).astype(np.float64))


def double_sum(v: Any) -> Any:
    return fnp.sum(v * 2.0)


@pytest.mark.parametrize("n", [1, 7, SUM_BLOCK, SUM_BLOCK + 1, 1000, (1 << 20) + 3])
def test_sums_are_within_the_stated_pairwise_bound(small_regions: None, n: int) -> None:
    """float64: ``(SUM_BLOCK + 2 ceil(log2 ceil(n / SUM_BLOCK)) + 1) eps sum|x|``; float32 is
    summed in double, so the result is the exact sum rounded once (and the double sum's own
    error). Terms ``2x``: exact, so the exact sums are ``math.fsum``'s."""
    rng = np.random.default_rng(n)
    blocks = max(1, -(-n // SUM_BLOCK))
    bound64 = (SUM_BLOCK + 2 * math.ceil(math.log2(blocks)) + 1) * np.finfo(np.float64).eps
    with fg.enable_x64(True):
        for x in (np.full(n, 0.1), rng.standard_normal(n), rng.uniform(0, 1, n) * 10.0 ** rng.integers(-8, 8, n)):
            if n == 1000:
                assert reducing_regions(double_sum, x)
            (got,) = on_engine(True, double_sum, x)
            assert fsum_error(got, x * 2.0) <= bound64
    with fg.enable_x64(False):
        for x in (np.full(n, 0.1, np.float32), rng.standard_normal(n).astype(np.float32)):
            if n == 1000:
                assert reducing_regions(double_sum, x)
            (got,) = on_engine(True, double_sum, x)
            terms = x.astype(np.float64) * 2.0
            exact = math.fsum(terms.tolist())
            allowed = np.spacing(np.float32(abs(exact))) * 0.5 + bound64 * float(np.abs(terms).sum())
            assert abs(float(got) - exact) <= allowed


def test_a_long_sum_is_pairwise_not_sequential(small_regions: None) -> None:
    """The sum of 2**22 float64 0.2s: one after another it is 1e-11 off relative (of the order
    of n eps), pairwise within a few eps."""
    x = np.full(1 << 22, 0.1)
    with fg.enable_x64(True):
        (got,) = on_engine(True, double_sum, x)
    sequential = np.cumsum(x * 2.0)[-1]
    exact = math.fsum((x * 2.0).tolist())
    assert abs(sequential - exact) / exact > 1e-12
    assert abs(got - exact) / exact < 64 * np.finfo(np.float64).eps


# --- the region pass's rules --------------------------------------------------------------


REDUCING = FusionCapability(reduces=lambda e: e.primitive.name.startswith("reduce_"))


def _members(fun: Callable[..., Any], *args: Any, capability: FusionCapability = REDUCING) -> list[list[str]]:
    g, _ = optimize(fg.make_graph(fun)(*args))
    return [[g.eqns[i].primitive.name for i in r] for r in find_regions(g, capability)]


def test_region_pass_puts_softmax_in_one_region_only_when_the_engine_reduces() -> None:
    x = np.ones((4, 6), np.float32)
    (members,) = _members(softmax, x)
    assert members.count("reshape") == 2 and members[0] == "reduce_max" and members[-1] == "div"
    assert _members(softmax, x, capability=FusionCapability()) == [["sub", "exp"]]


def test_region_pass_keeps_column_values_from_elements_and_mixed_axes_apart() -> None:
    """A reduction over leading axes joins its operand's region (a bias gradient's select, its
    column sum and the update computed on it), but elements reading its column values keep
    out (a column region is one pass); row and column reductions never share a region."""
    x = np.ones((4, 6), np.float32)
    assert _members(lambda x: x - fnp.mean(x, axis=0), x) == [["reduce_sum", "div"]]
    bias_grad = lambda g, m, b: (fnp.where(m, g, 0.0), b - 0.1 * fnp.sum(fnp.where(m, g, 0.0), axis=0))  # noqa: E731
    (members,) = _members(bias_grad, x, x > 0, x[0])
    assert members[:2] == ["select", "reduce_sum"] and len(members) == 3
    assert _members(lambda x: fnp.sum(x * 2.0, axis=(0, 1)), np.ones((3, 4, 6))) == [["mul", "reduce_sum"]]
    # a row sum and a column sum: the column one keeps out of the region
    regions = _members(lambda x: fnp.exp(x - fnp.max(x, axis=1, keepdims=True)) + fnp.sum(x, axis=0), x)
    assert [r for r in regions if "reduce_sum" in r] == []
    # a row sum broadcast along the rows (numpy's alignment puts it on the reduced axis)
    assert _members(lambda x: fnp.exp(x) * fnp.sum(x, axis=1), np.ones((4, 4), np.float32)) == [["exp", "mul"]]


def test_a_region_the_generator_cannot_express_runs_whole_on_numpy(small_regions: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``lgamma`` has no C rule: the region keeps the numpy engine, unchunked, since its rows
    are not its output's (chunks of 2 rows here would sum each chunk on its own)."""
    monkeypatch.setattr(cpu_regions, "CHUNK_BYTES", 16)
    cpu_regions._chunk_body.cache_clear()
    fun = lambda x: x / fnp.sum(gammaln(x) * 2.0 + 1.0)  # noqa: E731
    x = np.random.default_rng(8).uniform(1, 3, (10, 4))
    lowered = fg.jit(fun).lower(x)
    (region,) = [e for e in lowered.graph.eqns if e.primitive.name == "fusion"]
    assert reduction_source(region.params["call"], "f") is None and not lowered.compiled.executable.native
    with fg.enable_x64(True):
        np.testing.assert_allclose(on_engine(True, fun, x)[0], on_engine(False, fun, x)[0], rtol=1e-14)
    cpu_regions._chunk_body.cache_clear()


def test_reductions_stay_out_of_regions_with_the_engine_off(small_regions: None) -> None:
    fg.config.update("fungraph_native_cpu", False)
    try:
        g = fg.jit(softmax).lower(np.ones((4, 300))).graph
    finally:
        fg.config.update("fungraph_native_cpu", True)
    bodies = [e.params["call"] for e in g.eqns if e.primitive.name == "fusion"]
    assert bodies and all(not q.primitive.name.startswith("reduce_") for b in bodies for q in b.eqns)
