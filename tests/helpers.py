"""Drawing arguments for an op record."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

import fungraph as fg
from fungraph import dtypes
from fungraph.backends.native.regions import native_enabled
from fungraph.testing import OpRecord, arrays
from fungraph.testing.strategies import random_array
from fungraph.tree_util import tree_leaves


def draw_args(data: st.DataObject, rec: OpRecord, dtype_choices: tuple | None = None,
              seeded: bool = False) -> tuple[np.ndarray, ...]:
    """Arguments for ``rec``: hypothesis-chosen values, or seeded uniform ones with ``seeded``."""
    dtype = data.draw(st.sampled_from(dtype_choices or rec.dtypes), label="dtype")
    shps = data.draw(rec.shapes, label="shapes")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed") if seeded else 0
    rng = np.random.default_rng(seed)
    args = []
    for i, s in enumerate(shps):
        dt = rec.arg_dtype(i, dtype)
        lo, hi = rec.domain(i, shps)
        if seeded or dtypes.is_int(dt) and dt != dtype:
            args.append(random_array(rng, s, dt, lo, hi))
        else:
            args.append(data.draw(arrays(dt, tuple(s), lo, hi), label=f"arg{i}"))
    return tuple(args)


def tolerance(rec: OpRecord, args: tuple[Any, ...]) -> float:
    if any(np.asarray(a).dtype == np.float32 for a in args):
        return rec.tol32
    return rec.tol64


def assert_matches(got: Any, want: Any, tol: float, what: str) -> None:
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape, f"{what}: shape {got_arr.shape} != numpy's {want_arr.shape}"
    assert got_arr.dtype == want_arr.dtype, f"{what}: dtype {got_arr.dtype} != numpy's {want_arr.dtype}"
    if got_arr.dtype.kind in "biu":
        np.testing.assert_array_equal(got_arr, want_arr, err_msg=what)
    else:
        np.testing.assert_allclose(got_arr, want_arr, rtol=tol, atol=tol, err_msg=what)


def with_float_args(fun: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """``fun`` as a function of its floating-point arguments only (the others held fixed)."""
    pos = [i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]

    def f(*float_args: Any) -> Any:
        full = list(args)
        for i, a in zip(pos, float_args):
            full[i] = a
        return fun(*full)

    return f, [args[i] for i in pos]


def draw_batched(data: st.DataObject, rec: OpRecord, dtype_choices: tuple | None = None) -> tuple:
    """Arguments for ``rec`` stacked along random axes (argument 0 always mapped, the others
    mapped or broadcast), with the in_axes and the per-example argument tuples."""
    dtype = data.draw(st.sampled_from(dtype_choices or rec.dtypes), label="dtype")
    shps = data.draw(rec.shapes, label="shapes")
    size = data.draw(st.integers(1, 3), label="batch")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    batched, axes, examples = [], [], []
    for i, s in enumerate(shps):
        dt = rec.arg_dtype(i, dtype)
        lo, hi = rec.domain(i, shps)
        if i and not data.draw(st.booleans(), label=f"mapped{i}"):
            a = random_array(rng, s, dt, lo, hi)
            batched.append(a)
            axes.append(None)
            examples.append([a] * size)
            continue
        axis = data.draw(st.integers(-(len(s) + 1), len(s)), label=f"axis{i}")
        per = [random_array(rng, s, dt, lo, hi) for _ in range(size)]
        batched.append(np.stack(per, axis=axis))
        axes.append(axis)
        examples.append(per)
    return batched, tuple(axes), [tuple(e[k] for e in examples) for k in range(size)]


def assert_tree_matches(got: Any, want: Any, tol: float, what: str) -> None:
    """``assert_matches`` leaf by leaf for tuple/list results (e.g. linalg's namedtuples)."""
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), what
        for g, w in zip(got, want):
            assert_tree_matches(g, w, tol, what)
        return
    assert_matches(got, want, tol, what)


def _narrow_ints(args: tuple[Any, ...]) -> bool:
    """Whether every argument is a bool or an integer of up to 32 bits."""
    return bool(args) and all(np.asarray(a).dtype.kind in "biu" and np.asarray(a).dtype.itemsize <= 4 for a in args)


def _in_jax_inexact(x: Any) -> Any:
    """A numpy reference result of :func:`_narrow_ints` arguments in JAX's inexact dtype: numpy
    computes their inexact functions in float64, where JAX's ``to_inexact_dtype`` gives float32
    (complex64 for complex results)."""
    if isinstance(x, (tuple, list)):
        parts = [_in_jax_inexact(e) for e in x]
        return type(x)(parts) if isinstance(x, tuple) and not hasattr(x, "_fields") else parts
    arr = np.asarray(x)
    narrow = {np.dtype(np.float64): np.float32, np.dtype(np.complex128): np.complex64}.get(arr.dtype)
    return arr if narrow is None else arr.astype(narrow)


def check_values(data: st.DataObject, rec: OpRecord) -> None:
    """``rec.fun`` equals numpy's reference eagerly and via ``eval_graph(make_graph(...))``, in
    JAX's dtype (:func:`_in_jax_inexact`)."""
    import fungraph as fg

    args = draw_args(data, rec)
    narrow = _narrow_ints(args)
    with np.errstate(all="ignore"):
        want = _in_jax_inexact(rec.ref(*args)) if narrow else rec.ref(*args)
    tol = rec.tol32 if narrow else tolerance(rec, args)
    with np.errstate(all="ignore"):
        assert_tree_matches(rec.fun(*args), want, tol, f"{rec.name} eager")
        graph = fg.make_graph(rec.fun)(*args)
        graph.verify()
        (staged,) = fg.eval_graph(graph, *args)
    assert_tree_matches(staged, want, tol, f"{rec.name} via eval_graph(make_graph)")


def _in_x32(x: Any) -> Any:
    """A numpy reference result as JAX's 32-bit mode gives it (64-bit dtypes narrowed)."""
    if isinstance(x, (tuple, list)):
        return type(x)(_in_x32(e) for e in x) if isinstance(x, tuple) and not hasattr(x, "_fields") else [
            _in_x32(e) for e in x]
    arr = np.asarray(x)
    narrow = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32, np.dtype(np.uint64): np.uint32,
              np.dtype(np.complex128): np.complex64}.get(arr.dtype)
    return arr if narrow is None else arr.astype(narrow)


def check_values_x32(data: st.DataObject, rec: OpRecord) -> None:
    """``rec.fun`` with ``jax_enable_x64`` off, on 32-bit arguments: numpy's reference narrowed
    to 32 bits, eagerly and via ``eval_graph(make_graph(...))``, within float32 tolerances."""
    import fungraph as fg

    choices = tuple(dict.fromkeys(_in_x32(np.zeros((), d)).dtype for d in rec.dtypes))
    args = _in_x32(draw_args(data, rec, dtype_choices=choices))
    with np.errstate(all="ignore"):
        want = _in_x32(rec.ref(*args))
        with fg.enable_x64(False):
            got = rec.fun(*args)
            graph = fg.make_graph(rec.fun)(*args)
            graph.verify()
            (staged,) = fg.eval_graph(graph, *args)
    assert_tree_matches(got, want, rec.tol32, f"{rec.name} eager, x64 off")
    assert_tree_matches(staged, want, rec.tol32, f"{rec.name} via eval_graph(make_graph), x64 off")


def check_derivatives(data: st.DataObject, rec: OpRecord, order: int) -> None:
    """Forward and reverse derivatives against finite differences, in float64."""
    from fungraph.testing import check_grads

    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, float_args = with_float_args(rec.fun, args)
    check_grads(f, float_args, order=order)


def check_zero_tangents(data: st.DataObject, rec: OpRecord) -> None:
    """A non-differentiable function pushes every tangent to exactly zero."""
    import fungraph as fg

    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, float_args = with_float_args(rec.fun, args)
    if not float_args:
        return
    out, t_out = fg.jvp(f, tuple(float_args), tuple(np.ones_like(a) for a in float_args))
    np.testing.assert_array_equal(np.asarray(t_out), np.zeros(np.shape(out), np.asarray(t_out).dtype))


def check_jit_against_eager(data: st.DataObject, rec: OpRecord) -> None:
    """``jit(rec.fun)`` equals the eager call on drawn arguments."""
    import fungraph as fg

    args = draw_args(data, rec)
    with np.errstate(all="ignore"):
        want = rec.fun(*args)
        got = fg.jit(rec.fun)(*args)
    assert_tree_matches(got, want, tolerance(rec, args), f"jit({rec.name})")


def check_vmap_against_loop(data: st.DataObject, rec: OpRecord) -> None:
    """``vmap`` along random axes equals stacking a Python loop over the examples."""
    import fungraph as fg

    batched, axes, per_example = draw_batched(data, rec)
    out_axis = data.draw(st.integers(-1, 0), label="out_axis")
    with np.errstate(all="ignore"):
        got = fg.vmap(rec.fun, in_axes=axes, out_axes=out_axis)(*batched)
        want = np.stack([np.asarray(rec.fun(*ex)) for ex in per_example], axis=out_axis)
    assert_tree_matches(got, want, tolerance(rec, batched), f"vmap({rec.name}) in_axes={axes}")


def matmul_chain(xp: Any, x: Any, w: Any) -> Any:
    """Products and transcendental functions, long enough that calls from threads overlap."""
    h = xp.tanh(x @ w)
    h = xp.sin(h @ w) * 0.5 + h
    return xp.exp(-h * h) @ w - x * 0.25


def call_concurrently(calls: Sequence[Callable[[], Any]], want: Sequence[Any], iterations: int,
                      rtol: float) -> list[str]:
    """Run ``calls[t]()`` ``iterations`` times from thread t, all threads released at once by a
    barrier; every result is compared with ``want[t]``. Returns the failures as text."""
    barrier = threading.Barrier(len(calls))
    failures: list[str] = []

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(iterations):
            try:
                np.testing.assert_allclose(np.asarray(calls[t]()), want[t], rtol=rtol, atol=rtol)
            except Exception as err:  # noqa: BLE001 - reported by the test
                failures.append(f"thread {t}, call {i}: {type(err).__name__}: {err}"[:400])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(len(calls))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return failures


def crossed_callbacks(jit: Callable[[Callable[..., Any]], Callable[..., Any]]) -> list[str]:
    """Two functions jitted by ``jit`` whose host callbacks call each other's function, called
    from two threads at once; the outer callbacks meet at a barrier first, so with a lock per
    function each thread would hold one and wait for the other's. Both return ``6 x + 2``.
    Returns the problems as text: a thread still running after 30 s, or a wrong value."""
    import fungraph as fg

    on_thread = threading.local()
    meet = threading.Barrier(2)
    fns: dict[str, Callable[..., Any]] = {}

    def host(other: str) -> Callable[[np.ndarray], np.ndarray]:
        def callback(v: np.ndarray) -> np.ndarray:
            if getattr(on_thread, "inside", False):
                return np.asarray(v)
            on_thread.inside = True
            try:
                with contextlib.suppress(threading.BrokenBarrierError):
                    meet.wait(timeout=0.5)
                return np.asarray(fns[other](v))
            finally:
                on_thread.inside = False
        return callback

    def staged(other: str, scale: float) -> Callable[..., Any]:
        cb = host(other)
        return jit(lambda x: fg.pure_callback(cb, fg.ShapeDtypeStruct(x.shape, x.dtype), x * scale) + 1.0)

    fns["f"], fns["g"] = staged("g", 2.0), staged("f", 3.0)
    x = np.arange(6, dtype=np.float32)
    results: dict[str, Any] = {}

    def worker(name: str) -> None:
        try:
            results[name] = np.asarray(fns[name](x))
        except Exception as err:  # noqa: BLE001 - reported by the test
            results[name] = err

    threads = [threading.Thread(target=worker, args=(name,), daemon=True) for name in fns]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    problems = [f"thread {name} still running after 30 s (deadlock)" for name, th in zip(fns, threads)
                if th.is_alive()]
    for name, got in results.items():
        if isinstance(got, Exception) or not np.allclose(got, 6 * x + 2):
            problems.append(f"{name}: {got!r}")
    return problems


#: Presents the OpenCL device as a GPU (``opencl_device_presented_as(**GPU_LIKE)``): PoCL then
#: runs the GPU code paths.
GPU_LIKE = {"is_cpu": False}


def opencl_device() -> Any:
    """The OpenCL device the backend uses (import inside: pyopencl is optional)."""
    from fungraph.backends.opencl import get_device

    return get_device()


def kernel_notes(f: Any, *args: Any) -> str:
    """The text of ``f``'s compiled program for ``args``, with the kernel choices' notes."""
    return f.lower(*args).text


@contextlib.contextmanager
def opencl_device_presented_as(**fields: Any) -> Iterator[Any]:
    """The OpenCL device presented with other limits (``DeviceInfo`` fields) for the body, so
    one driver can run the kernel choices made for another; the jit caches are cleared on
    both sides so no executable crosses over."""
    from fungraph.backends.opencl import get_device
    from fungraph.jit import clear_caches

    dev = get_device()
    saved = dev.info
    clear_caches()
    dev.info = dataclasses.replace(saved, **fields)
    try:
        yield dev.info
    finally:
        dev.info = saved
        clear_caches()


def jax_or_skip() -> tuple[Any, Any]:
    """``jax`` and ``jax.numpy`` set up for differential tests (float64, CPU). Without JAX the
    calling module is skipped, except under ``CI=true``, which installs it with the test extra."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:  # pragma: no cover - CI installs JAX with the test extra
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("JAX is not installed (pip install -e .[test])", allow_module_level=True)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax, jnp


def check_eager_and_jit(call: Callable[[tuple], Any], args: tuple, want: Any,
                        check: Callable[[Any, Any, str], None], what: str) -> None:
    """``call(args)`` eagerly, then under ``jit`` with its numpy-array arguments traced (the
    others stay Python values), each checked against ``want`` by ``check(got, want, what)``."""
    import fungraph as fg

    check(call(args), want, what)
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def staged(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return call(tuple(full))

    check(fg.jit(staged)(*[args[i] for i in arrays]), want, f"jit {what}")


def assert_same(got: Any, want: Any, exact: bool = False) -> None:
    """``got`` has ``want``'s shape and values (exactly for integers and bools, else to 1e-9)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def check_jit_and_vmap(f: Callable[..., Any], batch: tuple[np.ndarray, ...], exact: bool = False) -> None:
    """``jit(f)`` agrees with ``f`` on the first example, ``vmap(f)`` with a loop over all."""
    first = tuple(b[0] for b in batch)
    fg.tree.map(lambda g, w: assert_same(g, w, exact), fg.jit(f)(*first), f(*first))
    loop = [f(*(b[i] for b in batch)) for i in range(batch[0].shape[0])]
    stacked = fg.tree.map(lambda *xs: np.stack(xs), *loop)
    fg.tree.map(lambda g, w: assert_same(g, w, exact), fg.vmap(f)(*batch), stacked)


def check_like_jax(got: Any, want: Any, what: str, tol: float = 1e-12) -> None:
    """``got``'s leaves have ``want``'s (JAX's) shapes and dtypes and values: exactly for integers
    and bit-level results (``what`` naming bitcast, nextafter or precision), else to ``tol``."""
    got_leaves, want_leaves = fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if g.dtype.kind in "biu" or "bitcast" in what or "nextafter" in what or "precision" in what:
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=what)


#: Floats at the edges of the float64 range (signed zeros, infinities, NaN, subnormals, the largest
#: finite value, ...) that decomposition and rounding functions must treat as numpy does.
SPECIAL_FLOATS = np.array([0.0, -0.0, 1.0, -1.0, 3.0, 0.75, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 2.0**-1022,
                           np.finfo(np.float64).max, -np.finfo(np.float64).max, 1e300, -7.5])


def native_and_numpy(fn: Callable[..., Any], args: Sequence[Any], stats: dict[str, int],
                     natively: bool = True) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``jit(fn)(*args)`` with the native engine, then with the numpy engine, as leaves of equal
    dtypes and shapes; checks that ``stats["runs"]`` grew (or, with ``natively=False``, did not)."""
    assert native_enabled()
    before = stats["runs"]
    got = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
    assert (stats["runs"] > before) == natively
    fg.config.update("fungraph_native_cpu", False)
    try:
        want = [np.asarray(v) for v in tree_leaves(fg.jit(fn)(*args))]
    finally:
        fg.config.update("fungraph_native_cpu", True)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
    return got, want
