"""Shared state: per-thread source lines, bounded caches that ``clear_caches`` empties, jitted
functions freed with their caches, and ``jit``'s cache keyed on the function (as JAX's)."""

from __future__ import annotations

import functools
import gc
import threading
import tracemalloc

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.core import ShapeError
from fungraph.interpreters.eval import eval_graph
from tests.helpers import jax_or_skip


def _deep_source(x):
    return fnp.sin(x) * 2.0  # the line the evaluating thread pushes


def test_threads_tracing_and_calling_at_once_get_their_own_source_lines() -> None:
    graph = fg.make_graph(lambda x: _deep_source(x) + 1.0)(np.ones(3))
    stop = threading.Event()
    wrong: list[str] = []

    def evaluate() -> None:
        while not stop.is_set():
            eval_graph(graph, np.ones(3))

    def mismatch() -> None:
        for _ in range(400):
            try:
                fg.make_graph(lambda a, b: a + b)(np.ones(2), np.ones(3))  # mismatch line
            except ShapeError as err:
                if "mismatch line" not in _line_of(err):
                    wrong.append(str(err))

    workers = [threading.Thread(target=evaluate) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        callers = [threading.Thread(target=mismatch) for _ in range(2)]
        for c in callers:
            c.start()
        for c in callers:
            c.join()
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert not wrong, f"{len(wrong)} errors named another thread's line, e.g. {wrong[0]}"


def _line_of(err: Exception) -> str:
    """The source line an error names, read from this file."""
    import linecache
    import re

    found = re.search(r"at (\S+):(\d+) ", str(err))
    assert found, str(err)
    return linecache.getline(found.group(1), int(found.group(2)))


def _traced_after(run) -> tuple[int, int]:
    """Traced bytes before and after ``run(); clear_caches()``, collected."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        fg.clear_caches()
        gc.collect()
        return base, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_clear_caches_frees_what_hundreds_of_signatures_cached() -> None:
    """400 signatures (8 of them differentiated) under tracemalloc: any per-signature leak over
    2.6 KB (a cached graph and executable hold far more) crosses the 1 MiB bound."""
    def f(x, y):
        return fnp.sum(fg.lax.cond(fnp.sum(x) > 0, lambda v: v * y, lambda v: v - y, x) ** 2)

    jf = fg.jit(f)
    jf(np.ones(1), np.ones(1))
    fg.jit(fg.grad(f))(np.ones(1), np.ones(1))
    fg.clear_caches()

    def run() -> None:
        for n in range(2, 402):
            x = np.full(n, 0.5)
            jf(x, x)
            if n % 50 == 0:
                fg.jit(fg.grad(f))(x, x)

    base, after = _traced_after(run)
    assert after - base < 1 << 20, f"{(after - base) / 2**20:.1f} MiB still held after clear_caches()"


def test_dropped_jitted_functions_are_freed() -> None:
    """The probe of issue #36: 300 dropped closures over 1 MiB arrays (JAX: flat)."""
    v = np.zeros(1 << 17)

    def run() -> None:
        for i in range(300):
            arr = np.full(1 << 17, float(i))
            fg.jit(lambda v, arr=arr: v + arr)(v)

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        run()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 16 << 20, f"300 dropped jitted functions left {grown / 2**20:.0f} MiB behind"


def test_cache_size_bounds_every_cache() -> None:
    saved = fg.config.fungraph_cache_size
    fg.config.update("fungraph_cache_size", 8)
    try:
        jf = fg.jit(lambda x: x * 3.0)
        for n in range(1, 30):
            np.testing.assert_allclose(jf(np.ones(n)), np.full(n, 3.0))
        assert len(jf._cache) == 8
        assert len(jf._fast) <= 8
        from fungraph.interpreters.graph_transforms import _TRANSFORMED
        from fungraph.jit import _COMPILED

        for n in range(1, 30):
            fg.grad(lambda x: fnp.sum(fg.jit(lambda y: y * y)(x)))(np.ones(n))
        assert len(_COMPILED) <= 8 and len(_TRANSFORMED) <= 8
    finally:
        fg.config.update("fungraph_cache_size", saved)
    with pytest.raises(ValueError, match="positive int"):
        fg.config.update("fungraph_cache_size", 0)


def test_config_owns_its_flags() -> None:
    """Options live in the config module; core and jit read them there."""
    import fungraph._config as cfg
    import fungraph.core as core
    import fungraph.jit as jit_module

    assert not hasattr(core, "_FloatChecks") and not hasattr(jit_module, "_Disabled")
    with fg.disable_jit():
        assert fg.config.jax_disable_jit and cfg.JIT_DISABLED.on
    assert not fg.config.jax_disable_jit


# --- jit keyed on the function, as JAX's --------------------------------------------------


def _count_traces(make_jit, call) -> int:
    traces = []

    def f(x):
        traces.append(1)
        return x * 2

    for _ in range(3):
        call(make_jit(f))
    return len(traces)


def test_jit_written_in_a_loop_traces_once_as_jax() -> None:
    jax, jnp = jax_or_skip()
    x = np.ones(3, np.float32)
    ours = _count_traces(fg.jit, lambda jf: jf(x))
    theirs = _count_traces(jax.jit, lambda jf: jf(jnp.asarray(x)))
    assert ours == theirs == 1
    static = functools.partial(fg.jit, static_argnums=1)
    traces = []

    def g(x, n):
        traces.append(n)
        return x * n

    for n in (2, 3, 2, 3):
        np.testing.assert_allclose(static(g)(x, n), x * n)
    assert traces == [2, 3]


def test_jit_of_keywords_in_a_loop_traces_once() -> None:
    traces = []

    def f(x, *, scale):
        traces.append(1)
        return x * scale

    for _ in range(3):
        fg.jit(f, static_argnames="scale")(np.ones(2), scale=2.0)
    assert len(traces) == 1


class _Model:
    def __init__(self, k: float) -> None:
        self.k = k

    @functools.partial(fg.jit, static_argnums=0)
    def scaled(self, x):
        return x * self.k

    @fg.jit
    def doubled(self, x):
        return x * 2


def test_jit_on_methods_as_jax() -> None:
    jax, jnp = jax_or_skip()

    class JaxModel:
        def __init__(self, k: float) -> None:
            self.k = k

        @functools.partial(jax.jit, static_argnums=0)
        def scaled(self, x):
            return x * self.k

        @jax.jit
        def doubled(self, x):
            return x * 2

    x = np.arange(3.0, dtype=np.float32)
    for k in (2.0, 5.0):
        np.testing.assert_allclose(_Model(k).scaled(x), JaxModel(k).scaled(jnp.asarray(x)))
    with pytest.raises(TypeError):
        JaxModel(1.0).doubled(x)
    with pytest.raises(TypeError, match="_Model"):
        _Model(1.0).doubled(x)
    assert _Model.scaled(_Model(3.0), x).tolist() == [0.0, 3.0, 6.0]


def test_static_and_donate_argnames_as_jax() -> None:
    jax, jnp = jax_or_skip()

    def f(x, n, y):
        return x * n + y

    x = np.arange(3.0)
    ours = fg.jit(f, static_argnames="n", donate_argnames="y")(x, 3, y=np.ones(3))
    theirs = jax.jit(f, static_argnames="n", donate_argnames="y")(jnp.asarray(x), 3, y=jnp.ones(3))
    np.testing.assert_allclose(ours, theirs)


@pytest.mark.parametrize("kwargs", [{"static_argnums": 3}, {"static_argnums": -3}, {"donate_argnums": 2},
                                    {"static_argnums": 0, "donate_argnums": 0},
                                    {"static_argnames": "x", "donate_argnames": "x"},
                                    {"static_argnums": 1, "donate_argnames": "y"},
                                    {"static_argnames": "z"}, {"donate_argnames": "z"}])
def test_bad_static_and_donate_arguments_raise_as_jax(kwargs) -> None:
    jax, _ = jax_or_skip()

    def f(x, y):
        return x + y

    with pytest.raises(ValueError):
        jax.jit(f, **kwargs)(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"argnums|argnames|both static and donated") as err:
        fg.jit(f, **kwargs)
    assert "f" in str(err.value)


def test_argnums_past_a_star_args_function_are_accepted_as_jax() -> None:
    jax, _ = jax_or_skip()

    def f(*xs):
        return xs[0] * 2

    assert float(jax.jit(f, static_argnums=3)(1.0)) == float(fg.jit(f, static_argnums=3)(1.0)) == 2.0


def test_opencl_signatures_are_freed_by_clear_caches(require_opencl: None) -> None:
    import weakref

    from fungraph.backends.opencl import building

    jf = fg.jit(lambda x: fnp.tanh(x) * 2.0 + 1.0, backend="opencl")
    for n in range(1, 9):
        jf(np.ones(n, np.float32))
    executables = [weakref.ref(e.compiled.executable) for e in jf._cache.values()]
    assert len(executables) == 8 and building._PROGRAMS
    fg.clear_caches()
    gc.collect()
    assert not building._PROGRAMS
    assert all(ref() is None for ref in executables), "an OpenCL executable outlived clear_caches()"
