"""The native CPU engine (fungraph.backends.native): fused regions compiled to C against the
numpy engine, for every op record, random programs, gradients and vmap, in both dtype modes;
numpy's semantics at the edges (NaN, infinities, signed zeros, integer wraparound and
division); the memory plan's buffers; the disk cache across processes; the fallback without
a compiler or when a build fails."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.backends import backend_factory
from fungraph.backends.native import codegen, toolchain
from fungraph.backends.native.regions import native_enabled
from fungraph.core import get_primitive
from fungraph.jit import clear_caches
from fungraph.testing import NUMPY_RECORDS, OP_RECORDS, Program, programs
from fungraph.tree_util import tree_flatten, tree_map
from tests.helpers import assert_matches, draw_args, tolerance, with_float_args

RECORDS = {r.name: r for r in OP_RECORDS + NUMPY_RECORDS}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One build cache for the module in a temporary folder (never the user's)."""
    folder = tmp_path_factory.mktemp("native-cache")
    old = os.environ.get(toolchain.CACHE_ENV)
    os.environ[toolchain.CACHE_ENV] = str(folder)
    yield folder
    if old is None:
        del os.environ[toolchain.CACHE_ENV]
    else:
        os.environ[toolchain.CACHE_ENV] = old


@pytest.fixture
def every_region(build_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fuse every elementwise chain whatever its (non-zero) size, so that small test arrays reach the
    native engine, and start from the native engine switched on."""
    factory = backend_factory("cpu")
    monkeypatch.setattr(factory, "fusion", dataclasses.replace(factory.fusion, min_bytes=1))
    was = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", True)
    clear_caches()
    yield
    fg.config.update("fungraph_native_cpu", was)
    clear_caches()


def on_engine(native: bool, fun: Callable[..., Any], *args: Any) -> Any:
    """``jit(fun)(*args)`` with the native engine on or off (each switch empties the caches)."""
    fg.config.update("fungraph_native_cpu", native)
    try:
        return fg.jit(fun)(*args)
    finally:
        fg.config.update("fungraph_native_cpu", True)


def native_region_count(fun: Callable[..., Any], *args: Any) -> int:
    return len(fg.jit(fun).lower(*args).compiled.executable.native)


def _leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in tree_flatten(tree)[0]]


def _then_elementwise(y: Any) -> Any:
    """An elementwise step after a record's output, so its last operation has a region to join."""
    a = fnp.asarray(y)
    dt = np.dtype(a.dtype)
    if dt.kind == "b":
        return ~a
    if dt.kind in "iu":
        return a * 3 + 1
    if dt.kind == "f":
        return a * 2.0 - 1.0
    return a


# --- every op record, random programs, gradients, vmap: native against the numpy engine -----


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=1, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_op_record_through_native_regions_matches_the_numpy_engine(every_region: None, name: str,
                                                                        data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec)

    def fun(*a: Any) -> Any:
        return tree_map(_then_elementwise, rec.fun(*a))

    with np.errstate(all="ignore"):
        want = on_engine(False, fun, *args)
        got = on_engine(True, fun, *args)
    for g, w in zip(_leaves(got), _leaves(want)):
        assert_matches(g, w, tolerance(rec, args), f"native jit({name})")


GRAD_RECORDS = ["tanh", "multiply", "divide", "sum_axis0", "max", "softmax", "matmul", "where", "sigmoid",
                "gelu_tanh", "power", "sqrt", "log1p", "arctan2"]


@pytest.mark.parametrize("name", [n for n in GRAD_RECORDS if n in RECORDS])
@settings(max_examples=1, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_gradients_and_vmap_through_native_regions(every_region: None, name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, fargs = with_float_args(rec.fun, args)

    def loss(*a: Any) -> Any:
        return fnp.sum(fnp.sin(f(*a)) * 1.5)

    grad = fg.grad(loss, tuple(range(len(fargs))))
    batched = fg.vmap(lambda *a: fnp.tanh(f(*a)) * 2.0 + 1.0)
    stacked = [np.stack([a, a * 0.5]) for a in fargs]
    for fun, xs in ((grad, fargs), (batched, stacked)):
        want = on_engine(False, fun, *xs)
        got = on_engine(True, fun, *xs)
        for g, w in zip(_leaves(got), _leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10, err_msg=f"native {name}")
    assert native_region_count(grad, *fargs) > 0


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs(dtype_choices=(dtypes.float32, dtypes.float64)))
def test_random_programs_native_match_the_numpy_engine(every_region: None, x64: bool, prog: Program) -> None:
    with fg.enable_x64(x64):
        want = on_engine(False, prog.fun, *prog.args)
        got = on_engine(True, prog.fun, *prog.args)
    for g, w in zip(_leaves(got), _leaves(want)):
        tol = 1e-4 if g.dtype == np.float32 else 1e-10
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=repr(prog))


# --- numpy's semantics at the edges: bit for bit -----------------------------------------


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal values, dtypes and shapes; NaN where numpy has NaN, and zeros of numpy's sign."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
        np.testing.assert_array_equal(np.signbit(got) | np.isnan(got), np.signbit(want) | np.isnan(want),
                                      err_msg=what)
    np.testing.assert_array_equal(got, want, err_msg=what)


FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 0.5, 1e-40, -3.0, 3.0, np.inf, -np.inf, np.nan, 1e30,
               -1e30, 2.0, -2.0, 0.1]


def _edges(dt: np.dtype) -> np.ndarray:
    dt = np.dtype(dt)
    if dt.kind == "f":
        return np.array(FLOAT_EDGES, dtype=dt)
    if dt.kind == "b":
        return np.array([True, False] * 10)
    info = np.iinfo(dt)
    vals = [0, 1, -1, 7, -7, 2, -2, 3, -3, info.min, info.max, info.min + 1, info.max - 1, 5, -5, 100, -100, 13,
            -13, 64]
    return np.array([v for v in vals if info.min <= v <= info.max][:20] * 2, dtype=dt)[:20]


def _pairs(dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every edge value against every other (20 x 20)."""
    e = _edges(dt)
    return np.repeat(e, len(e)), np.tile(e, len(e))


BINARY = {"add": "fiub", "sub": "fiu", "mul": "fiub", "div": "f", "max": "fiub", "min": "fiub", "mod": "fiu",
          "floor_divide": "fiu", "pow": "f", "atan2": "f", "eq": "fiub", "ne": "fiub", "lt": "fiub", "le": "fiub",
          "gt": "fiub", "ge": "fiub", "and": "iub", "or": "iub", "xor": "iub"}
UNARY = {"neg": "fi", "abs": "fi", "sign": "fiu", "floor": "f", "sqrt": "f", "not": "iub", "exp": "f", "log": "f",
         "tanh": "f", "sin": "f", "cos": "f", "expm1": "f", "log1p": "f", "logistic": "f", "erf": "f", "atan": "f"}
EDGE_DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64,
               np.bool_]


def _names(table: dict[str, str], dt: Any) -> list[str]:
    return [name for name, kinds in table.items() if np.dtype(dt).kind in kinds]


#: where the C library and numpy's own vector code may differ by an ulp (special values are still exact)
TRANSCENDENTAL = {"pow", "atan2", "exp", "log", "tanh", "sin", "cos", "expm1", "log1p", "logistic", "erf", "atan"}


def _and_follow(r: Any) -> tuple[Any, Any]:
    """``r`` and an exact operation of it, so that the operation making ``r`` has a region."""
    return r, get_primitive("eq" if r.aval.dtype == np.bool_ else "mul").bind(r, r)


def _check_edges(cases: dict[str, Callable[..., Any]], *args: np.ndarray, rtol: dict[str, float] | None = None) -> None:
    """Each case (a function of ``args`` whose result is compared) as one region of one graph,
    so that one build covers them all: exactly numpy's bits, or within ``rtol[name]`` apart from
    special values (those of :data:`TRANSCENDENTAL` by default)."""
    def fun(*xs: Any) -> dict[str, Any]:
        return {name: _and_follow(case(*xs)) for name, case in cases.items()}

    with np.errstate(all="ignore"):
        want = on_engine(False, fun, *args)
        got = on_engine(True, fun, *args)
    assert native_region_count(fun, *args) == len(cases)
    for name in cases:
        for g, w in zip(_leaves(got[name]), _leaves(want[name])):
            tol = (rtol or {}).get(name, 4 * np.finfo(w.dtype).eps if name in TRANSCENDENTAL else None)
            if tol is None:
                assert_same_bits(g, w, f"{name} {g.dtype}")
                continue
            special = ~np.isfinite(w) | (w == 0) | ~np.isfinite(g)
            assert_same_bits(g[special], w[special], name)
            np.testing.assert_allclose(g[~special], w[~special], rtol=tol, err_msg=name)


@pytest.mark.parametrize("dt", EDGE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_binary_operations_follow_numpy_at_the_edges(every_region: None, dt: Any) -> None:
    cases = {name: get_primitive(name).bind for name in _names(BINARY, dt)}
    _check_edges(cases, *_pairs(dt))


@pytest.mark.parametrize("dt", EDGE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_unary_operations_follow_numpy_at_the_edges(every_region: None, dt: Any) -> None:
    cases = {name: get_primitive(name).bind for name in _names(UNARY, dt)}
    _check_edges(cases, _edges(dt))


def lax_convert(x: Any, dt: Any) -> Any:
    return get_primitive("convert_element_type").bind(x, new_dtype=np.dtype(dt))


@pytest.mark.parametrize("src", EDGE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_conversions_follow_numpy(every_region: None, src: Any) -> None:
    """Every conversion of the edge values that numpy defines (float to int only within range:
    out of range numpy's own result depends on its vector width)."""
    x = _edges(src)
    if np.dtype(src).kind == "f":
        x = x[np.isfinite(x) & (np.abs(x) < 100)]
    cases = {np.dtype(dst).name: functools.partial(lax_convert, dt=dst) for dst in EDGE_DTYPES
             if dst != src and not (np.dtype(src).kind == "f" and np.dtype(dst).kind == "u")}
    _check_edges(cases, x)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_integer_power_is_square_and_multiply(every_region: None, dt: Any) -> None:
    """Exact for integers and for exponents 0 and 2; square-and-multiply otherwise, within an
    ulp per multiplication of numpy's correctly rounded power."""
    prim = get_primitive("integer_pow")
    ys = [0, 2, 3, 5, 8] + ([-1, -3] if np.dtype(dt).kind == "f" else [])
    cases = {f"x ** {y}": functools.partial(prim.bind, y=y) for y in ys}
    rtol = {f"x ** {y}": abs(y) * np.finfo(dt).eps for y in ys if y not in (0, 2)} if np.dtype(dt).kind == "f" else {}
    _check_edges(cases, _edges(dt), rtol=rtol)


@pytest.mark.parametrize("value", [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.1, 1e-45, 3.4e38])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_literals_keep_their_exact_bits(every_region: None, value: float, dt: Any) -> None:
    c = np.asarray(value, dt)
    x = np.linspace(-2, 2, 7).astype(dt)

    def fun(x: Any) -> Any:
        w = fnp.where(x > 0, x * 3.0, c)
        return w, w * 1.5

    literals = [a for e in fg.make_graph(fun)(x).eqns for a in e.inputs if isinstance(a, fg.Literal)]
    assert any(a.aval.dtype == dt and a.array.tobytes() == c.tobytes() for a in literals)
    with np.errstate(all="ignore"):
        for g, w in zip(_leaves(on_engine(True, fun, x)), _leaves(on_engine(False, fun, x))):
            assert_same_bits(g, w, codegen.literal(c))


# --- the memory plan, strides, threads ---------------------------------------------------


def test_regions_write_into_planned_buffers_and_in_place_over_donated_inputs(every_region: None) -> None:
    x = np.random.default_rng(0).standard_normal(1 << 16)
    donating = fg.jit(lambda x: fnp.tanh(x) * 2.0 + 1.0, donate_argnums=0)
    exe = donating.lower(x.copy()).compiled.executable
    assert len(exe.native) == 1 and exe.donated_outputs == (0,)
    arg = fnp.array(x)  # a fungraph array: a donated numpy one is copied, as in JAX
    ptr = np.asarray(arg).ctypes.data
    out = donating(arg)
    assert np.asarray(out).ctypes.data == ptr
    np.testing.assert_allclose(out, np.tanh(x) * 2.0 + 1.0, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("donate", [False, True])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_trigonometry_beyond_the_fast_range_reruns_with_the_full_range_functions(every_region: None, dt: Any,
                                                                                 name: str, donate: bool) -> None:
    """sin, cos and tan run in their fast versions and again in their full-range ones when an
    argument is beyond FG_TRIG_SMALL_MAX (about 1.6e6), also when the output took the input's
    buffer (the input is copied first)."""
    small = np.linspace(-10, 10, 64).astype(dt)
    huge = np.concatenate([small, np.array([1e7, -3e9, 1e22, np.inf, np.nan], dt)])
    fun = lambda x: getattr(fnp, name)(x) * 2.0 + 1.0  # noqa: E731
    for x in (small, huge):
        with np.errstate(invalid="ignore"):
            want = np.asarray(on_engine(False, fun, x))
        f = fg.jit(fun, donate_argnums=0 if donate else ())
        exe = f.lower(x.copy()).compiled.executable
        assert len(exe.native) == 1 and exe.donated_outputs == ((0,) if donate else ())
        got = np.asarray(f(x.copy()))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dt).eps, atol=8 * np.finfo(dt).eps)


@pytest.mark.parametrize("shapes", [((6, 5), (6, 1), (5,), ()), ((3, 1, 4), (1, 5, 1), (4,), (3, 5, 4)),
                                    ((2, 3, 4), (2, 3, 4), (1, 3, 1), (4,)), ((70000,), (1,), (), (70000,))])
def test_broadcast_inputs_views_and_large_parallel_regions(every_region: None, shapes: tuple) -> None:
    rng = np.random.default_rng(len(shapes[0]))
    args = [rng.standard_normal(s) for s in shapes]

    def fun(a: Any, b: Any, c: Any, d: Any) -> Any:
        return fnp.maximum(a * b + c, d) - fnp.abs(a), (a > c) & (b < d)

    want = on_engine(False, fun, *args)
    assert native_region_count(fun, *args) >= 1
    for g, w in zip(_leaves(on_engine(True, fun, *args)), _leaves(want)):
        assert_same_bits(g, w, str(shapes))
    views = [a.T if a.ndim > 1 else a[::-1] if a.ndim else a for a in args]
    fun_t = lambda *vs: fun(*(v.T for v in vs))  # noqa: E731
    for g, w in zip(_leaves(on_engine(True, fun_t, *views)), _leaves(on_engine(False, fun_t, *views))):
        assert_same_bits(g, w, f"views of {shapes}")


def test_large_regions_split_across_threads_when_asked(every_region: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With FUNGRAPH_NATIVE_THREADS=2 a large region runs through fgpool.h's pool (a 2-d nest
    split on its outer axis, and the fast-trigonometry check gathered from every chunk), with
    the results of one thread."""
    x = np.random.default_rng(1).standard_normal((300, 250))
    b = np.random.default_rng(2).standard_normal(250)
    fun = lambda x, b: fnp.sin(x * 0.5 + b) * 2.0 + fnp.exp(-x * x)  # noqa: E731
    want = on_engine(False, fun, x, b)
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    body = fg.jit(fun).lower(x, b).compiled.graph.eqns[0].params["call"]
    src = codegen.region_source(body, "f")
    assert "fg_parallel(f_chunk, args, 300, " in src and "-pthread" not in toolchain.flags(src)
    assert "fg_parallel(" in codegen.region_source(body, "f_small", small_trig=True)
    np.testing.assert_allclose(on_engine(True, fun, x, b), want, rtol=1e-13, atol=1e-15)
    far = x.copy()
    far[123, 45] = 1e9  # beyond the fast sine's range, in one chunk only: the full-range rerun
    np.testing.assert_allclose(on_engine(True, fun, far, b), on_engine(False, fun, far, b), rtol=1e-13, atol=1e-15)
    monkeypatch.setenv(codegen.THREADS_ENV, "1")
    assert "fg_parallel(" not in codegen.region_source(body, "f")


_POOL_CHILD = """
import os, sys, threading, numpy as np
os.environ["FUNGRAPH_NATIVE_THREADS"] = "2"
import fungraph as fg, fungraph.numpy as fnp
fg.config.update("jax_enable_x64", True)
f = fg.jit(lambda x: fnp.tanh(x) * 2.0 + 1.0)
assert len(f.lower(np.zeros(1 << 17)).compiled.executable.native) == 1
xs = [np.random.default_rng(k).standard_normal(1 << 17) for k in range(4)]
want = [np.tanh(x) * 2.0 + 1.0 for x in xs]
assert all(np.allclose(f(x), w, rtol=1e-14) for x, w in zip(xs, want))
bad = []
def work(k):
    for _ in range(20):
        if not np.allclose(f(xs[k]), want[k], rtol=1e-14):
            bad.append(k)
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
pid = os.fork()
if pid == 0:
    os._exit(0 if np.allclose(f(xs[0]), want[0], rtol=1e-14) else 3)
_, status = os.waitpid(pid, 0)
print(bad, os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_thread_pool_serves_concurrent_callers_and_forked_children(build_cache: Path) -> None:
    """Python threads calling split regions at once get their own results (one uses the pool,
    the others run alone), and a child forked after the pool started runs regions without it."""
    if not native_enabled():
        pytest.skip("no C compiler")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", _POOL_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "0"], done.stdout + done.stderr[-2000:]


_ONE_POOL_CHILD = """
import os, numpy as np
os.environ["FUNGRAPH_NATIVE_THREADS"] = "2"
import fungraph as fg, fungraph.numpy as fnp
from fungraph.backends.native import toolchain
fg.config.update("jax_enable_x64", True)
x = np.random.default_rng(0).standard_normal(1 << 17)
tasks = []
for k in range(8):
    f = fg.jit(lambda x, k=k: fnp.tanh(x) * float(k + 2) + 1.0)
    assert len(f.lower(x).compiled.executable.native) == 1
    assert np.allclose(f(x), np.tanh(x) * (k + 2) + 1.0, rtol=1e-14)
    tasks.append(len(os.listdir("/proc/self/task")))
print(toolchain.load_pool().fg_pool_workers(), len(set(tasks)))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc/self/task")
def test_one_thread_pool_per_process_however_many_region_objects(build_cache: Path) -> None:
    """Eight graphs' region objects, each split across two threads, share the process's one pool:
    one worker thread, and the process's thread count does not grow from the first to the last."""
    if not native_enabled():
        pytest.skip("no C compiler")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", _ONE_POOL_CHILD], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1"], done.stdout + done.stderr[-2000:]


_STALLING_WORKER = """
#include <stdint.h>
#include <pthread.h>
#include <time.h>
#include "fgpool.h"
static pthread_t caller;
static int worker_chunks;
static void chunk(void *const *args, int64_t lo, int64_t hi) {
    (void)args; (void)lo; (void)hi;
    struct timespec t = {0, 20000000};
    if (!pthread_equal(pthread_self(), caller)) {
        __atomic_fetch_add(&worker_chunks, 1, __ATOMIC_RELAXED);
        nanosleep(&t, NULL);
        return;
    }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do clock_gettime(CLOCK_MONOTONIC, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000000 + now.tv_nsec - start.tv_nsec < 100000);
}
int run(void) {
    caller = pthread_self();
    worker_chunks = 0;
    fg_parallel(chunk, 0, 64, 1, 2);
    return __atomic_load_n(&worker_chunks, __ATOMIC_RELAXED);
}
"""


def test_pool_runs_jobs_alone_after_a_worker_stalled_a_split_one(build_cache: Path) -> None:
    """A worker that holds a chunk for 20 ms (as one the scheduler took off its core would)
    makes the split job slower than the caller alone: the next jobs run without the pool."""
    if not native_enabled():
        pytest.skip("no C compiler")
    lib = toolchain.build(codegen.prelude() + _STALLING_WORKER, codegen.INCLUDES)
    pool = toolchain.load_pool()
    assert lib is not None and pool is not None
    pool.fg_pool_alone.restype = ctypes.c_int
    for _ in range(50):
        while pool.fg_pool_alone() > 0:
            assert lib.run() == 0
        if lib.run() > 0:
            break
    else:
        pytest.fail("the worker never took a chunk in 50 jobs of 6.4 ms")
    alone = pool.fg_pool_alone()
    assert alone >= 1
    for left in range(alone - 1, -1, -1):
        assert lib.run() == 0 and pool.fg_pool_alone() == left


def test_threads_default_to_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without FUNGRAPH_NATIVE_THREADS a large region is split across the cores this process may
    run on; the variable overrides it, and small regions never split."""
    monkeypatch.delenv(codegen.THREADS_ENV, raising=False)
    assert codegen.threads() == codegen.usable_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(codegen.THREADS_ENV, "3")
    assert codegen.threads() == 3
    monkeypatch.setenv(codegen.THREADS_ENV, "two")
    with pytest.raises(ValueError, match="FUNGRAPH_NATIVE_THREADS='two'"):
        codegen.threads()
    monkeypatch.setenv(codegen.THREADS_ENV, "2")
    small = fg.make_graph(lambda x: fnp.tanh(x) * 2.0 + 1.0)(np.zeros(codegen.PARALLEL_MIN_ELEMENTS - 1))
    large = fg.make_graph(lambda x: fnp.tanh(x) * 2.0 + 1.0)(np.zeros(codegen.PARALLEL_MIN_ELEMENTS))
    assert "fg_parallel(" not in codegen.region_source(small, "f")
    assert "fg_parallel(" in codegen.region_source(large, "f")


def test_loop_nest_merges_axes_every_operand_walks_contiguously() -> None:
    extents, strides = codegen.loop_axes((4, 5, 6), [(4, 5, 6), (6,), ()])
    assert extents == [120, 6] or extents == [20, 6]
    assert codegen.loop_axes((4, 5, 6), [(4, 5, 6), (1, 1, 1)])[0] == [120]
    assert codegen.loop_axes((4, 1, 6), [(4, 1, 6), (4, 1, 1)]) == ([4, 6], [[6, 1], [1, 0], [6, 1]])


def test_type_suffix_names_the_dtype_in_helper_names() -> None:
    """``codegen.type_suffix`` spells helper names; the loop and reduction generators emit
    their equations through codegen's ``emit_eqns``, which uses it."""
    assert [codegen.type_suffix(np.dtype(t)) for t in (np.float32, np.float64, np.int64, np.uint8, np.bool_)] == [
        "f32", "f64", "i64", "u8", "b"]
    from fungraph.backends.native import loops, reductions

    assert loops.emit_eqns is codegen.emit_eqns and reductions.emit_eqns is codegen.emit_eqns


def test_region_source_emits_its_body_through_emit_eqns(every_region: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both kinds of a region (full-range trigonometry, and the fast one with its range
    check) come from codegen's one equation emitter, in the trig mode each needs."""
    x = np.linspace(-2, 2, 64)
    body = fg.jit(lambda x: fnp.sin(x) * 2.0 + 1.0).lower(x).compiled.graph.eqns[0].params["call"]
    seen: list[str] = []
    emit = codegen.emit_eqns

    def spy(eqns: Any, names: Any, lines: Any, counter: Any, trig: str = "full") -> None:
        seen.append(trig)
        emit(eqns, names, lines, counter, trig)

    monkeypatch.setattr(codegen, "emit_eqns", spy)
    full, small = codegen.region_source(body, "f"), codegen.region_source(body, "f_small", small_trig=True)
    assert seen == ["full", "check"]
    assert "fg_sin_f64(" in full and "fg_sin_small_f64(" not in full
    assert "fg_sin_small_f64(" in small and "ok &= fg_trig_small_ok_f64(" in small and "return ok;" in small


def test_unsupported_operations_keep_the_numpy_engine(every_region: None) -> None:
    x = np.linspace(0.5, 3, 12)
    fun = lambda x: fg.scipy.special.gammaln(x * 2.0) + 1.0  # noqa: E731
    assert native_region_count(fun, x) == 0
    np.testing.assert_allclose(on_engine(True, fun, x), on_engine(False, fun, x), rtol=1e-15)
    z = np.ones(12, np.complex128)
    fun_c = lambda z: z * 2.0 + 1.0  # noqa: E731
    assert native_region_count(fun_c, z) == 0
    np.testing.assert_array_equal(on_engine(True, fun_c, z), on_engine(False, fun_c, z))


# --- switching, the disk cache, no compiler, a failing compiler -----------------------------


def test_the_config_switch_picks_the_engine(every_region: None) -> None:
    x = np.linspace(-1, 1, 32)
    fun = lambda x: fnp.tanh(x) * 2.0 + 1.0  # noqa: E731
    f = fg.jit(fun)
    f(x)
    assert len(f.lower(x).compiled.executable.native) == 1
    fg.config.update("fungraph_native_cpu", False)
    assert not native_enabled()
    assert len(f.lower(x).compiled.executable.native) == 0
    fg.config.update("fungraph_native_cpu", True)
    assert len(f.lower(x).compiled.executable.native) == 1


def _run_child(code: str, env: dict[str, str]) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


CHILD = """
    import dataclasses
    import numpy as np, fungraph as fg, fungraph.numpy as fnp
    from fungraph.backends import backend_factory
    from fungraph.backends.native.toolchain import BUILD_STATS
    factory = backend_factory("cpu")
    factory.fusion = dataclasses.replace(factory.fusion, min_bytes=1)
    x = np.linspace(-1, 1, 1000)
    f = fg.jit(lambda x: fnp.tanh(x * 0.5) * 3.0 - 1.0)
    y = np.asarray(f(x))
    assert np.allclose(y, np.tanh(x * 0.5) * 3.0 - 1.0, rtol=1e-5, atol=1e-6)
    print(len(f.lower(x).compiled.executable.native), BUILD_STATS["compiles"], BUILD_STATS["disk_hits"])
"""


def test_a_second_process_loads_the_build_from_the_disk_cache(tmp_path: Path) -> None:
    env = {toolchain.CACHE_ENV: str(tmp_path), "FUNGRAPH_NATIVE_CPU": "1"}
    assert _run_child(CHILD, env) == "1 1 0"
    assert len(list(tmp_path.glob("*.so"))) == 1
    assert _run_child(CHILD, env) == "1 0 1"


def test_without_a_compiler_the_numpy_engine_runs_every_region(tmp_path: Path) -> None:
    env = {toolchain.CACHE_ENV: str(tmp_path), "CC": "/nonexistent/cc"}
    assert _run_child(CHILD, env) == "0 0 0"
    assert not list(tmp_path.iterdir())


def test_a_failing_build_warns_and_falls_back(every_region: None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake cc 1.0; exit 0; fi\n"
                    "echo 'fatal error: broken compiler' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    x = np.linspace(-1, 1, 50)
    fun = lambda x: fnp.tanh(x) * 2.0 + 1.0  # noqa: E731
    with pytest.warns(toolchain.NativeBuildWarning, match="broken compiler"):
        got = on_engine(True, fun, x)
    np.testing.assert_allclose(got, np.tanh(x) * 2.0 + 1.0, rtol=1e-15)


def test_the_cache_key_changes_with_compiler_flags_and_source() -> None:
    cc = toolchain.Compiler(("cc",), "cc 1")
    key = toolchain.build_key("int f;", cc, codegen.INCLUDES)
    assert key == toolchain.build_key("int f;", cc, codegen.INCLUDES)
    assert key != toolchain.build_key("int g;", cc, codegen.INCLUDES)
    assert key != toolchain.build_key("int f;", toolchain.Compiler(("cc",), "cc 2"), codegen.INCLUDES)


@pytest.mark.parametrize("src", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_float_to_integer_conversions_saturate_as_xla_s(every_region: None, src: Any) -> None:
    """Out of an integer type's range a float saturates to its bounds and NaN gives 0, as XLA's
    conversion (and fungraph's numpy engine) does, where a C cast is undefined."""
    x = np.array([-3e10, -129.5, -1.5, -0.5, 0.7, 127.9, 255.5, 256.0, 2.2e9, 4.3e9, 1e19, 2e19, np.nan, np.inf,
                  -np.inf] * 2, dtype=src)
    dsts = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64]
    cases = {np.dtype(dst).name: functools.partial(lax_convert, dt=dst) for dst in dsts}

    def fun(x: Any) -> Any:
        return {name: _and_follow(conv(x)) for name, conv in cases.items()}

    got = on_engine(True, fun, x)
    assert native_region_count(fun, x) == len(cases)
    for dst in dsts:
        name = np.dtype(dst).name
        info = np.iinfo(dst)
        finite = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=2.0 ** 70, neginf=-2.0 ** 70)
        want = np.array([min(max(int(v), int(info.min)), int(info.max)) for v in finite], dst)
        np.testing.assert_array_equal(got[name][0], want, err_msg=name)
