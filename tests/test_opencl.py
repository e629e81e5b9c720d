"""The OpenCL backend: every op record against eager numpy, gradients, an MLP step, device
residency (no transfers between chained calls), fusion and the memory arena.

Tolerances: integer and bool results must match exactly; float64 uses the record's
``tol64`` (1e-11 by default: OpenCL's double builtins are within 4 ulp and reductions sum
in another order); float32 uses the record's ``tol32`` (2e-5 by default) and never less
than 1e-5, since OpenCL's single-precision builtins may differ from numpy's by a few ulp.

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes, lax
from fungraph.testing import OP_RECORDS
from fungraph.testing.models import sgd_step as mlp_sgd_step
from fungraph.tree_util import tree_flatten
from tests.helpers import assert_matches, call_concurrently, crossed_callbacks, draw_args, matmul_chain, with_float_args

RECORDS = {r.name: r for r in OP_RECORDS}
GRAD_RECORDS = ["tanh", "multiply", "divide", "sum_axis0", "max", "softmax", "matmul", "transpose",
                "getitem_basic", "take", "concatenate", "conv_same", "where"]

pytestmark = pytest.mark.usefixtures("require_opencl")


def _cl():
    import fungraph.backends.opencl as ocl

    return ocl


def _tol(rec, args, result=None) -> float:
    """float32 tolerance where an operand or the result is float32 (an int32 `cosh` is float32)."""
    if any(np.asarray(a).dtype in (np.float32, np.complex64) for a in (*args, *([] if result is None else [result]))):
        return max(rec.tol32, 1e-5)
    return rec.tol64


def _host(tree):
    leaves, _ = tree_flatten(tree)
    return [np.asarray(x) for x in leaves]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=3)
@given(data=st.data())
def test_every_op_on_opencl_matches_eager(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec)
    with np.errstate(all="ignore"):
        want = rec.fun(*args)
    got = fg.jit(rec.fun, backend="opencl")(*args)
    for g, w in zip(_host(got), _host(want)):
        assert_matches(g, w, _tol(rec, args, w), f"jit({name}, backend='opencl')")


@pytest.mark.parametrize("name", GRAD_RECORDS)
@settings(max_examples=1)
@given(data=st.data())
def test_jit_of_grad_on_opencl(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, fargs = with_float_args(rec.fun, args)

    def loss(*a):
        return fnp.sum(fnp.sin(f(*a)))

    argnums = tuple(range(len(fargs)))
    want = fg.grad(loss, argnums)(*fargs)
    got = fg.jit(fg.grad(loss, argnums), backend="opencl")(*fargs)
    for g, w in zip(_host(got), _host(want)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10, err_msg=f"jit(grad({name}), opencl)")


def _mlp(seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = [12, 16, 16, 3]
    params = [{"w": (rng.standard_normal((m, n)) * 0.5).astype(np.float32), "b": np.zeros(n, np.float32)}
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    return params, x, y


def sgd_step(params, x, y):
    return mlp_sgd_step(params, x, y, lr=0.1)


def test_mlp_training_step_matches_cpu_and_stays_on_device() -> None:
    params, x, y = _mlp()
    cpu = fg.jit(sgd_step)
    ocl = fg.jit(sgd_step, backend="opencl")
    p_cpu, p_ocl = params, params
    for _ in range(3):
        p_cpu, l_cpu = cpu(p_cpu, x, y)
        p_ocl, l_ocl = ocl(p_ocl, x, y)
        np.testing.assert_allclose(np.asarray(l_ocl), l_cpu, rtol=1e-4)
    assert isinstance(p_ocl[0]["w"], _cl().OpenCLArray)
    for a, b in zip(_host(p_ocl), _host(p_cpu)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    ocl_mod = _cl()
    ocl(p_ocl, x, y)
    ocl_mod.reset_transfer_stats()
    p_next, _ = ocl(p_ocl, x, y)
    # only x and y come from the host; the parameters never leave the device
    assert ocl_mod.TRANSFER_STATS["to_device"] == 2
    assert ocl_mod.TRANSFER_STATS["to_host"] == 0


def test_chained_calls_transfer_nothing() -> None:
    ocl = _cl()
    f = fg.jit(lambda x: fnp.tanh(x) * 2.0 + 1.0, backend="opencl")
    g = fg.jit(lambda x: fnp.sum(x * x, axis=0), backend="opencl")
    x = np.linspace(-1, 1, 1000, dtype=np.float32).reshape(50, 20)
    y = f(x)
    g(y)
    ocl.reset_transfer_stats()
    z = g(f(y))
    assert isinstance(z, ocl.OpenCLArray)
    assert ocl.TRANSFER_STATS["to_device"] == 0 and ocl.TRANSFER_STATS["to_host"] == 0
    want = np.sum((np.tanh(np.tanh(x) * 2 + 1) * 2 + 1) ** 2, axis=0)
    np.testing.assert_allclose(np.asarray(z), want, rtol=1e-5)
    assert ocl.TRANSFER_STATS["to_host"] == 1


def test_outputs_are_fresh_buffers_per_call() -> None:
    f = fg.jit(lambda x: x * 3.0, backend="opencl")
    a = f(np.ones(100, np.float32))
    b = f(np.full(100, 2, np.float32))
    np.testing.assert_array_equal(np.asarray(a), 3.0)
    np.testing.assert_array_equal(np.asarray(b), 6.0)


def test_concurrent_calls_are_independent() -> None:
    """Threads calling OpenCL-jitted functions at once (two threads per function, released
    together by a barrier, each downloading its results) all get their own values: calls of
    one executable take turns binding and enqueueing, calls of two interleave on the queue."""
    rng = np.random.default_rng(0)
    n = 256
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    xs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(4)]
    f = fg.jit(lambda x, w: matmul_chain(fnp, x, w), backend="opencl")
    g = fg.jit(lambda x, w: fnp.tanh(x @ w) * 2.0, backend="opencl")
    calls = [(f, x) if t < 2 else (g, x) for t, x in enumerate(xs)]
    want = [matmul_chain(np, x.astype(np.float64), w) if t < 2 else np.tanh(x.astype(np.float64) @ w) * 2.0
            for t, x in enumerate(xs)]
    for (fun, x), expected in zip(calls, want):
        np.testing.assert_allclose(np.asarray(fun(x, w)), expected, rtol=1e-4, atol=1e-4)
    failures = call_concurrently([lambda fun=fun, x=x: fun(x, w) for fun, x in calls], want, iterations=8,
                                 rtol=1e-4)
    assert not failures, f"{len(failures)} of 32 calls failed: " + "\n".join(failures[:3])


def test_a_host_callback_cannot_reenter_its_own_call() -> None:
    """The arena and the kernels' arguments are in use: re-entry raises (no deadlock, no
    corruption), and the function works again afterwards."""
    reenter = [True]

    def host(v):
        return np.asarray(f(v)) if reenter[0] else v

    f = fg.jit(lambda x: fg.pure_callback(host, fg.ShapeDtypeStruct(x.shape, x.dtype), x * 2.0) + 1.0,
               backend="opencl")
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(RuntimeError, match="host callback inside its own call"):
        f(x)
    reenter[0] = False
    np.testing.assert_array_equal(np.asarray(f(x)), x * 2.0 + 1.0)


def test_callbacks_calling_each_others_functions_from_two_threads_do_not_deadlock() -> None:
    """A callback of one OpenCL function calls another whose callback calls the first, from
    two threads at once: the calls take turns under one lock shared by all executables."""
    assert not crossed_callbacks(lambda f: fg.jit(f, backend="opencl"))


def test_device_put_uploads_once_and_block_until_ready_waits() -> None:
    """``device_put(tree, "opencl")``: one upload per leaf, in its own dtype (float16 kept, as
    JAX keeps it); jitted calls then transfer nothing; ``block_until_ready`` returns what it is
    given."""
    ocl = _cl()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ocl.reset_transfer_stats()
    assert fg.device_put(np.float16(1.5), "opencl").aval.dtype == np.float16
    ocl.reset_transfer_stats()
    tree = fg.device_put({"a": x, "b": [np.float32(1.5)]}, "opencl")
    assert isinstance(tree["a"], ocl.OpenCLArray) and tree["b"][0].aval.dtype == np.float32
    assert ocl.TRANSFER_STATS["to_device"] == 2
    y = fg.jit(lambda t: t["a"] * 2.0 + t["b"][0], backend="opencl")(tree)
    assert ocl.TRANSFER_STATS["to_device"] == 2
    assert fg.block_until_ready(y) is y and y.block_until_ready() is y
    assert fg.device_put(tree["a"], "opencl") is tree["a"]
    back = fg.device_put(y)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, x * 2 + 1.5)
    with pytest.raises(ValueError, match="unknown device 'tpu'; available: cpu, opencl"):
        fg.device_put(x, "tpu")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_overflow_wraps_as_in_numpy(dtype: type) -> None:
    """Signed overflow is undefined in OpenCL C: the compiler had turned ``x * 2**32 < 0`` into
    ``x < 0``. Kernels compute +, -, * (and neg, abs, fma, integer powers, sums and products)
    through the unsigned type, so they wrap as numpy does."""
    info = np.iinfo(dtype)
    half = dtype(2 ** (info.bits // 2))
    x = np.array([1, 3, info.max, info.min, info.max // 2 + 5, -7, 0], dtype)

    def f(x):
        return (fnp.less(x * half, 0), -x, fnp.abs(x), x * x + x, x ** 3 - x, x + info.max, x - info.max,
                fnp.sum(x), fnp.prod(x + 2), fnp.sum(fnp.broadcast_to(x, (300, 7)), axis=0))

    with np.errstate(over="ignore"):
        want = fg.jit(f)(x)
    got = fg.jit(f, backend="opencl")(x)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def chain10(x, a, b):
    for i in range(5):
        x = x * a + b if i % 2 == 0 else x * b - a
    return x


def test_ten_op_chain_is_one_kernel() -> None:
    x = np.linspace(-2, 2, 10_007, dtype=np.float32)
    a, b = np.float32(0.9), np.float32(0.1)
    jf = fg.jit(chain10, backend="opencl")
    exe = jf.lower(x, a, b).compiled.executable
    assert exe.kernel_count == 1, exe.describe()
    assert exe.arena_bytes == 0
    np.testing.assert_allclose(np.asarray(jf(x, a, b)), chain10(x, a, b), rtol=1e-5, atol=1e-6)
    text = exe.describe()
    assert "k1_fused" in text and text.count("\n    ") == len(exe.ordered.eqns)


def test_fusion_reads_broadcasts_in_place_and_feeds_reductions() -> None:
    def f(x, b):
        h = fnp.exp(x - b) * 2.0
        return fnp.sum(h * h, axis=1)

    x = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    b = np.linspace(0, 1, 33, dtype=np.float32)
    jf = fg.jit(f, backend="opencl")
    exe = jf.lower(x, b).compiled.executable
    assert exe.kernel_count == 1, exe.describe()
    np.testing.assert_allclose(np.asarray(jf(x, b)), np.sum((np.exp(x - b) * 2) ** 2, axis=1), rtol=1e-5)


def test_cost_model_does_not_recompute_expensive_broadcasts() -> None:
    def f(x, v):
        return x * fnp.sin(v)[None, :]

    x = np.ones((4096, 512), np.float32)
    v = np.linspace(0, 1, 512, dtype=np.float32)
    exe = fg.jit(f, backend="opencl").lower(x, v).compiled.executable
    assert exe.kernel_count == 2, exe.describe()


def test_large_reductions_and_matmul() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(1_000_003).astype(np.float32)
    for fun, ref in ((fnp.sum, np.sum), (fnp.max, np.max), (fnp.argmin, np.argmin)):
        got = np.asarray(fg.jit(fun, backend="opencl")(x))
        np.testing.assert_allclose(got, ref(x), rtol=1e-5)
    a = rng.standard_normal((67, 45)).astype(np.float32)
    b = rng.standard_normal((45, 83)).astype(np.float32)
    for f, want in ((lambda a, b: a @ b, a @ b), (lambda a, b: (b.T @ a.T).T, a @ b),
                    (lambda a, b: a @ fnp.transpose(b.T), a @ b)):
        np.testing.assert_allclose(np.asarray(fg.jit(f, backend="opencl")(a, b)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(1, 64, 16, 16), (3, 150, 33, 40), (2, 67, 9, 83), (1, 200, 1, 35), (2, 63, 20, 48),
                                   (2, 11, 20, 48), (1, 12, 30, 33), (3, 8, 5, 17)])
@pytest.mark.usefixtures("cpu_code_paths")
def test_packed_register_blocked_matmul_and_its_edges(shape) -> None:
    """Row blocks in work-groups plus a leftover group, 16-column panels plus edge kernels
    for the last rows and columns; for m >= 12 (``PACK_MIN_ROWS``) rhs is packed, each panel
    copied by the product kernel into local memory (lhs, contiguous along k, is read in place),
    below that rhs is read in place too."""
    b, m, k, n = shape
    rng = np.random.default_rng(m)
    x = rng.standard_normal((b, m, k)).astype(np.float32)
    y = rng.standard_normal((b, k, n)).astype(np.float32)
    jf = fg.jit(lambda x, y: fnp.matmul(x, fnp.transpose(fnp.transpose(y, (0, 2, 1)), (0, 2, 1))), backend="opencl")
    np.testing.assert_allclose(np.asarray(jf(x, y)), x @ y, rtol=1e-4, atol=1e-4)
    text = jf.lower(x, y).compiled.executable.describe()
    assert ("rhs panels copied to local memory (16-wide lines), lhs rows read in place" in text) == (m >= 12), text
    assert "pack" not in text


def test_arena_is_reused_by_intermediates() -> None:
    def f(x, w):
        for _ in range(4):
            x = fnp.tanh(x @ w)
        return fnp.sum(x)

    x = np.ones((32, 32), np.float32)
    exe = fg.jit(f, backend="opencl").lower(x, x).compiled.executable
    one = 32 * 32 * 4
    assert exe.arena_bytes <= 3 * one, exe.describe()


def test_callbacks_round_trip_through_the_host_but_control_flow_stays_on_the_device() -> None:
    ocl = _cl()

    def f(x):
        y = fg.pure_callback(lambda a: np.cumsum(a), fg.ShapedArray(x.shape, x.dtype), x * 2.0)
        z = lax.cond(fnp.sum(y) > 0, lambda a: a + 1.0, lambda a: a - 1.0, y)
        return lax.fori_loop(0, 3, lambda i, c: c * 2.0, z)

    x = np.arange(5, dtype=np.float32)
    jf = fg.jit(f, backend="opencl")
    jf(x)
    ocl.reset_transfer_stats()
    got = np.asarray(jf(x))
    np.testing.assert_allclose(got, (np.cumsum(x * 2) + 1) * 8)
    assert ocl.TRANSFER_STATS["host_round_trips"] == 1          # the callback only
    assert ocl.TRANSFER_STATS["scalar_reads"] == 1              # the cond's branch index


# --- control flow on the device -------------------------------------------------------------


def _resident(*xs):
    return fg.jit(lambda *a: a, backend="opencl")(*xs)


def _assert_close_trees(got, want, tol: float, what: str) -> None:
    g, w = _host(got), _host(want)
    assert len(g) == len(w), what
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _counting(f, *args):
    """Run ``f`` (already compiled) and return its outputs and the transfers it made."""
    ocl = _cl()
    ocl.reset_transfer_stats()
    out = f(*args)
    stats = dict(ocl.TRANSFER_STATS)
    return out, stats


def damped(x, n):
    """A while loop with a data-dependent trip count bound ``n``, three carries (one passed
    through unchanged) and a float carry that depends on the counter."""
    def body(c):
        i, y, k = c
        return i + 1, fnp.tanh(y * 1.5 + i.astype(y.dtype) * 0.1) - 0.25 * k, k

    return lax.while_loop(lambda c: c[0] < n, body, (0, x, fnp.mean(x)))


@pytest.mark.parametrize("speculate", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
def test_while_loop_reads_only_its_predicate(n: int, speculate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from fungraph.backends.opencl import control
    from fungraph.jit import clear_caches

    monkeypatch.setenv("FUNGRAPH_OPENCL_SPECULATE", "1" if speculate else "0")
    monkeypatch.setenv("FUNGRAPH_OPENCL_LOOP_KERNELS", "0")   # the per-iteration path (one kernel: test_opencl_loops)
    # batches grow while an iteration takes less than the budget: a budget no iteration
    # exceeds makes the count of reads independent of how loaded the machine is
    monkeypatch.setattr(control, "SPECULATE_BUDGET_S", 10.0)
    clear_caches()
    x = np.random.default_rng(n).standard_normal((4, 33)).astype(np.float32)
    jf = fg.jit(damped, backend="opencl")
    xr, nr = _resident(x, np.int64(n))
    jf(xr, nr)
    text = jf.lower(xr, nr).compiled.executable.describe()
    assert ("masked iteration" in text) == speculate, text
    out, stats = _counting(jf, xr, nr)
    clear_caches()
    if speculate:   # batches of 1, 2, 4, ... masked iterations per predicate read
        assert 1 + (n + 1).bit_length() - 1 <= stats["scalar_reads"] <= n + 1
        if n == 40:
            assert stats["scalar_reads"] < 20
    else:           # one predicate per evaluation
        assert stats["scalar_reads"] == n + 1
    assert stats["to_device"] == 0 and stats["to_host"] == 0 and stats["host_round_trips"] == 0
    assert all(isinstance(o, _cl().OpenCLArray) for o in out)
    _assert_close_trees(out, fg.jit(damped)(x, n), 1e-5, f"while_loop, {n} iterations")


def test_speculative_batches_stop_growing_when_iterations_are_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    from fungraph.backends.opencl import control
    from fungraph.jit import clear_caches

    monkeypatch.setenv("FUNGRAPH_OPENCL_SPECULATE", "1")
    monkeypatch.setattr(control, "SPECULATE_BUDGET_S", 0.0)
    monkeypatch.setenv("FUNGRAPH_OPENCL_LOOP_KERNELS", "0")
    clear_caches()
    x = np.random.default_rng(3).standard_normal((4, 33)).astype(np.float32)
    jf = fg.jit(damped, backend="opencl")
    xr, nr = _resident(x, np.int64(12))
    jf(xr, nr)
    out, stats = _counting(jf, xr, nr)
    clear_caches()
    assert stats["scalar_reads"] == 13
    _assert_close_trees(out, fg.jit(damped)(x, 12), 1e-5, "while_loop, batches of one")


def test_while_loop_with_a_callback_in_its_body_is_not_run_ahead() -> None:
    calls = []

    def log(a):
        calls.append(1)
        return a

    def f(x):
        def body(c):
            y = fg.pure_callback(log, fg.ShapedArray(c[1].shape, c[1].dtype), c[1] * 2.0)
            return c[0] + 1, y

        return lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1]

    x = np.ones(3, np.float32)
    jf = fg.jit(f, backend="opencl")
    jf(x)
    calls.clear()
    out, stats = _counting(jf, x)
    np.testing.assert_allclose(np.asarray(out), 32.0)
    assert len(calls) == 5 and stats["scalar_reads"] == 6 and stats["host_round_trips"] == 5


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(0, 6), reverse=st.booleans())
def test_scan_reads_nothing_back(seed: int, length: int, reverse: bool) -> None:
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((length, 3, 5)).astype(np.float32)
    w = rng.standard_normal((5, 5)).astype(np.float32)
    c0 = rng.standard_normal((3, 5)).astype(np.float32)

    def f(c0, xs, w):
        def body(c, x):
            h = fnp.tanh(c @ w + x)
            return h, (fnp.sum(h, axis=0), x[::-1] * 2.0)

        return lax.scan(body, c0, xs, reverse=reverse)

    jf = fg.jit(f, backend="opencl")
    args = _resident(c0, xs, w)
    jf(*args)
    out, stats = _counting(jf, *args)
    assert stats["scalar_reads"] == 0 and stats["host_round_trips"] == 0
    assert stats["to_device"] == 0 and stats["to_host"] == 0
    _assert_close_trees(out, fg.jit(f)(c0, xs, w), 1e-5, f"scan of length {length}")


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 9])
def test_switch_reads_one_index(index: int) -> None:
    x = np.random.default_rng(0).standard_normal(17).astype(np.float32)

    def f(i, x):
        return lax.switch(i, [lambda a: a * 2.0, lambda a: fnp.sin(a), lambda a: x], x)

    jf = fg.jit(f, backend="opencl")
    args = _resident(np.int32(index), x)
    jf(*args)
    out, stats = _counting(jf, *args)
    assert stats["scalar_reads"] == 1 and stats["host_round_trips"] == 0 and stats["to_host"] == 0
    _assert_close_trees(out, f(np.int32(index), x), 1e-6, f"switch({index})")


def nested(x, ws):
    """A cond and a while loop inside a scan body, a scan inside a while body."""
    def inner_while(h):
        return lax.while_loop(lambda c: fnp.max(fnp.abs(c[1])) > 0.5,
                              lambda c: (c[0] + 1, c[1] * 0.5), (0, h))

    def body(c, w):
        h = lax.cond(fnp.sum(c) > 0, lambda a: fnp.tanh(a @ w), lambda a: a @ w * 0.5, c)
        k, h = inner_while(h)
        return h + 0.1, k

    c, ks = lax.scan(body, x, ws)

    def outer_body(s):
        j, y = s
        y2, _ = lax.scan(lambda a, b: (a * 0.9 + b, a), y, fnp.ones((3,) + y.shape, y.dtype))
        return j + 1, y2

    _, y = lax.while_loop(lambda s: s[0] < 2, outer_body, (0, c))
    return c, ks, y


def test_nested_control_flow_matches_cpu() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    ws = (rng.standard_normal((4, 6, 6)) * 0.8).astype(np.float32)
    jf = fg.jit(nested, backend="opencl")
    out = jf(x, ws)
    _assert_close_trees(out, fg.jit(nested)(x, ws), 1e-5, "nested control flow")
    exe = jf.lower(x, ws).compiled.executable
    assert exe.host_steps == 0, exe.describe()
    text = exe.describe()
    assert "scan of length 4" in text and "while on the device" in text and "branch 1:" in text


def _cf_losses():
    def scan_loss(w, x):
        def body(c, xi):
            c = fnp.tanh(c @ w + xi)
            return c, fnp.sum(c * c)

        c, ys = lax.scan(body, x[0], x)
        return fnp.sum(c) + fnp.sum(ys)

    def cond_loss(w, x):
        y = lax.cond(fnp.sum(x) > 0, lambda a: fnp.sin(a @ w), lambda a: fnp.exp(a) @ w, x)
        return fnp.sum(y * y)

    def fori_loss(w, x):
        return fnp.sum(lax.fori_loop(0, 5, lambda i, c: fnp.tanh(c @ w) + x * 0.1, x))

    return {"scan": scan_loss, "cond": cond_loss, "fori_loop": fori_loss}


@pytest.mark.parametrize("name", ["scan", "cond", "fori_loop"])
@settings(max_examples=2, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_jit_of_grad_through_control_flow_on_opencl(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 4)) * 0.5
    x = rng.standard_normal((3, 4))
    loss = _cf_losses()[name]
    got = fg.jit(fg.grad(loss, (0, 1)), backend="opencl")(w, x)
    want = fg.jit(fg.grad(loss, (0, 1)))(w, x)
    exe = fg.jit(fg.grad(loss, (0, 1)), backend="opencl").lower(w, x).compiled.executable
    assert exe.host_steps == 0, exe.describe()
    _assert_close_trees(got, want, 1e-10, f"jit(grad({name}_loss), opencl)")


@settings(max_examples=2, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_vmap_of_control_flow_on_opencl(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    n = rng.integers(0, 6, 5).astype(np.int64)

    def per_example(x, n):
        y = lax.cond(fnp.sum(x) > 0, lambda a: a * 2.0, lambda a: fnp.cos(a), x)
        _, y = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.tanh(c[1]) + 0.5), (0, y))
        y, ys = lax.scan(lambda c, xi: (c * 0.5 + xi, fnp.sum(c)), y, fnp.stack([x, x * 2.0]))
        return y, ys

    f = fg.vmap(per_example)
    got = fg.jit(f, backend="opencl")(x, n)
    _assert_close_trees(got, fg.jit(f)(x, n), 1e-5, "vmap of cond/while/scan")


def test_loop_carries_are_double_buffered_in_the_arena(monkeypatch: pytest.MonkeyPatch) -> None:
    from fungraph.jit import clear_caches

    monkeypatch.setenv("FUNGRAPH_OPENCL_LOOP_KERNELS", "0")   # a launch per iteration
    clear_caches()

    def f(x):
        return lax.fori_loop(0, 5, lambda i, c: (c[0] * 0.5 + c[1], c[1], c[0]), (x, x + 1.0, x))

    x = np.ones((64, 64), np.float32)
    jf = fg.jit(f, backend="opencl")
    exe = jf.lower(x).compiled.executable
    one = 64 * 64 * 4
    # counter: 2 slots; c[0], c[2]: 2 slots each; c[1] passes through: 1 slot (plus the x + 1 input)
    assert exe.arena_bytes <= 6 * one + 256, exe.describe()
    got = jf(x)
    clear_caches()
    _assert_close_trees(got, fg.jit(f)(x), 1e-6, "fori_loop with a passed-through carry")


def test_complex_values_are_refused_with_the_dtype_and_device() -> None:
    dev = _cl().get_device()
    x = np.ones(3, np.complex64)
    with pytest.raises(TypeError, match=r"complex64.*OpenCL") as err:
        fg.jit(lambda x: x * 2, backend="opencl")(x)
    assert dev.info.name in str(err.value)


def test_float64_needs_device_support() -> None:
    ocl = _cl()
    dev = ocl.get_device()
    if dev.info.fp64:
        out = fg.jit(lambda x: x * 2, backend="opencl")(np.ones(3))
        assert np.asarray(out).dtype == np.float64
    else:
        with pytest.raises(TypeError, match="fp64"):
            fg.jit(lambda x: x * 2, backend="opencl")(np.ones(3))


_PINNED_WORKERS = """
import os
import numpy as np, fungraph as fg
import fungraph.backends.opencl as ocl
dev = ocl.get_device()
fg.jit(lambda x: x + 1, backend="opencl")(np.ones(4096, np.float32)).numpy()
single = 0
for t in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{t}/status") as f:
        allowed = [ln.split(":")[1].strip() for ln in f if ln.startswith("Cpus_allowed_list")][0]
    single += allowed.isdigit()
print(os.environ.get("POCL_AFFINITY"), single, dev.info.compute_units, "pthread" in dev.info.name.lower())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("user", [None, "0"])
def test_pocl_workers_are_pinned_unless_the_user_says_otherwise(user: str | None) -> None:
    """PoCL's CPU workers are pinned one per core by default (``device.POCL_DEFAULTS``); a
    ``POCL_AFFINITY`` the user set is left alone."""
    env = {k: v for k, v in os.environ.items() if k != "POCL_AFFINITY"}
    if user is not None:
        env["POCL_AFFINITY"] = user
    out = subprocess.run([sys.executable, "-c", _PINNED_WORKERS], env=env, capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1]).stdout.split()
    affinity, single, units, pocl_cpu = out[0], int(out[1]), int(out[2]), out[3] == "True"
    assert affinity == (user or "1")
    if pocl_cpu and units > 1 and len(os.sched_getaffinity(0)) >= units:
        assert (single >= units) == (user is None), out


def test_integer_division_by_zero_and_bool_ops_follow_jax() -> None:
    """``5 // 0`` is JAX's -2 on the device as on the CPU engine (tests/test_integer_division.py
    checks that one against JAX), ``INT_MIN // -1`` wraps, ``% 0`` is 0."""
    a = np.array([7, -7, 5, np.iinfo(np.int32).min, 3, 0], np.int32)
    b = np.array([2, 2, 0, -1, -2, 0], np.int32)
    g = lambda a, b: (a // b, a % b, a > b, (a > 0) & (b > 0), fnp.sum(a > b))  # noqa: E731
    want = _host(fg.jit(g)(a, b))
    np.testing.assert_array_equal(want[0], [3, -4, -2, np.iinfo(np.int32).min, -2, -1])
    for got, w in zip(_host(fg.jit(g, backend="opencl")(a, b)), want):
        np.testing.assert_array_equal(got, w)


# --- float32 sin, cos, log: the preamble's vectorisable helpers ----------------------------


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Float32 ulps between ``got`` and ``want`` (0 where both are NaN, 2**40 where one is)."""
    def line(a):
        b = a.view(np.int32).astype(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFF), b)      # the floats in order on the integers

    nan_a, nan_b = np.isnan(got), np.isnan(want)
    return np.where(nan_a & nan_b, 0, np.where(nan_a | nan_b, 2**40, np.abs(line(got) - line(want))))


def _neighbours(x, k: int = 2) -> np.ndarray:
    bits = np.asarray(x, np.float32).view(np.int32)
    return (bits[:, None] + np.arange(-k, k + 1)).astype(np.int32).view(np.float32).ravel()


#: float32 values closest to a zero of sin (a multiple of pi) or of cos (an odd multiple of pi/2),
#: the worst of a search over every binade: 7.729179e28 = 16367173 * 2^72 is within 2^-30.9 * pi
HARD_TO_REDUCE = np.array([7.729179e28, 2.1999385e10, 1.5458358e29, 4.399877e10, 3.0916716e29, 4.6381834e25],
                          np.float32)
EDGES = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-38, 1.1754944e-38, 1e-7, 1.0, 1e6, -1e6, 1e10, 3.4028235e38,
                  -3.4028235e38, np.inf, -np.inf, np.nan], np.float32)


def _trig_inputs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(|x| <= 1e5, beyond): a dense sweep, float multiples of pi/2 and their neighbours, edges."""
    quarter_turns = np.float32(np.array([1, 2, 3, 7, 100, 12345, 63661]) * np.pi / 2)
    small = np.concatenate([np.linspace(-1e5, 1e5, 1_000_001, dtype=np.float32), _neighbours(quarter_turns),
                            _neighbours(-quarter_turns), EDGES[np.abs(EDGES) <= 1e5]])
    large_turns = np.float32(np.array([2**20, 2**30, 2**40, 2**60, 2**100]) * np.pi / 2)
    sign = rng.choice(np.float32([-1, 1]), 400_000)
    log_uniform = np.exp(rng.uniform(np.log(1e5), np.log(3.4e38), 400_000)).astype(np.float32) * sign
    large = np.concatenate([log_uniform, _neighbours(large_turns), _neighbours(HARD_TO_REDUCE),
                            _neighbours(-HARD_TO_REDUCE), EDGES[~(np.abs(EDGES) <= 1e5)]])
    return small, large


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_sin_cos_are_within_2_ulp_of_numpy_for_every_magnitude(name: str) -> None:
    """The reduction by pi is exact for every float (no Cody-Waite bound), so the bound is the
    same beyond 1e5: within 1 ulp of float64 numpy rounded to float32 (checked on all 2^32
    floats once), so within 2 ulp of numpy's float32 (itself within 1 ulp); NaN and +-inf
    give NaN."""
    f = fg.jit(getattr(fnp, name), backend="opencl")
    ref = getattr(np, name)
    for x in _trig_inputs(np.random.default_rng(0)):
        got = np.asarray(f(x))
        with np.errstate(invalid="ignore"):
            want32, want64 = ref(x), ref(x.astype(np.float64)).astype(np.float32)
        worst = int(np.argmax(_ulps(got, want32)))
        assert _ulps(got, want32).max() <= 2, (x[worst], got[worst], want32[worst])
        worst = int(np.argmax(_ulps(got, want64)))
        assert _ulps(got, want64).max() <= 1, (x[worst], got[worst], want64[worst])
    assert f"fg_{name}_float(" in f.lower(x).compiled.executable.source


def test_float32_sin_keeps_the_sign_of_zero_and_cos_of_zero_is_one() -> None:
    x = np.array([0.0, -0.0, 1e-45, -1e-45], np.float32)
    s, c = _host(fg.jit(lambda x: (fnp.sin(x), fnp.cos(x)), backend="opencl")(x))
    np.testing.assert_array_equal(s, x)
    np.testing.assert_array_equal(np.signbit(s), np.signbit(x))
    np.testing.assert_array_equal(c, 1.0)


def test_float32_log_is_within_1_ulp_of_the_correctly_rounded_value() -> None:
    """Against float64 numpy rounded to float32 (numpy's float32 log is up to 4 ulp from it);
    subnormals, 0 (-inf), negative numbers (NaN), inf and NaN as numpy."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(0, 1e5, 1_000_001, dtype=np.float32),
                        np.linspace(0.5, 2, 200_001, dtype=np.float32),
                        np.exp(rng.uniform(np.log(1e-45), np.log(3.4e38), 400_000)).astype(np.float32),
                        np.arange(1, 2**23, 997, dtype=np.int32).view(np.float32), -EDGES, EDGES])
    got = np.asarray(fg.jit(fnp.log, backend="opencl")(x))
    with np.errstate(all="ignore"):
        want = np.log(x.astype(np.float64)).astype(np.float32)
    worst = int(np.argmax(_ulps(got, want)))
    assert _ulps(got, want).max() <= 1, (x[worst], got[worst], want[worst])


def test_float32_math_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """float32 sin/cos/log use the helpers, native sin/cos/exp when asked; float64 the library's."""
    from fungraph.backends.opencl.codegen import expression_rule
    from fungraph.core import get_primitive

    def rule(name: str):  # the C expression registered as the primitive's "opencl" lowering
        return expression_rule(get_primitive(name))

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    monkeypatch.delenv("FUNGRAPH_OPENCL_NATIVE_MATH", raising=False)
    for name in ("sin", "cos", "log"):
        assert rule(name)(f32, f32, ["x"], {}) == f"fg_{name}_float(x)"
        assert rule(name)(f64, f64, ["x"], {}) == f"{name}(x)"
    monkeypatch.setenv("FUNGRAPH_OPENCL_NATIVE_MATH", "1")
    for name in ("sin", "cos", "exp"):
        assert rule(name)(f32, f32, ["x"], {}) == f"native_{name}(x)"
        assert rule(name)(f64, f64, ["x"], {}) == f"{name}(x)"
    assert rule("log")(f32, f32, ["x"], {}) == "fg_log_float(x)"  # native_log is no faster
    assert rule("tanh")(f32, f32, ["x"], {}) == "fg_tanh_float(x)"


# --- donation: outputs written into donated device buffers ---------------------------------


def _alloc_stats() -> dict:
    from fungraph.backends.opencl.device import ALLOC_STATS

    return dict(ALLOC_STATS, **{k: _cl().ENGINE_STATS[k] for k in ("output_allocations", "donated_outputs")})


def _delta(before: dict) -> dict:
    after = _alloc_stats()
    return {k: after[k] - before[k] for k in before}


def test_donated_sgd_step_matches_and_allocates_nothing_in_steady_state() -> None:
    from fungraph.testing.models import mlp_loss, mlp_params

    ocl = _cl()
    rng = np.random.default_rng(3)
    params = mlp_params([12, 16, 16, 3], seed=3)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    xr, yr = _resident(x, y)
    plain = fg.jit(sgd_step, backend="opencl")
    donating = fg.jit(sgd_step, backend="opencl", donate_argnums=0)
    p_plain, p_don = params, params          # the first call donates numpy arrays: nothing to reuse
    for _ in range(3):
        want_loss = mlp_loss(_host_tree(p_don), x, y)
        p_plain, l_plain = plain(p_plain, xr, yr)
        p_don, l_don = donating(p_don, xr, yr)
        np.testing.assert_allclose(np.asarray(l_don), np.asarray(l_plain), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(l_don), want_loss, rtol=1e-5)
    for a, b in zip(_host(p_don), _host(p_plain)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_host(params)[1], mlp_params([12, 16, 16, 3], seed=3)[0]["w"])   # untouched
    exe = donating.lower(p_don, xr, yr).compiled.executable
    assert sorted(exe.donation.values()) == list(range(6)), exe.donation     # every parameter, none for the loss
    del p_plain, l_plain, l_don
    p, loss = donating(p_don, xr, yr)
    for _ in range(3):
        old = tree_flatten(p)[0]
        ptrs = [leaf.buffer.int_ptr for leaf in old]
        before = _alloc_stats()
        ocl.reset_transfer_stats()
        p, loss = donating(p, xr, yr)
        # every parameter is written into its own donated buffer; only the loss takes a pooled one
        assert _delta(before) == {"buffers_created": 0, "buffers_reused": 1, "output_allocations": 1,
                                  "donated_outputs": 6}
        assert [leaf.buffer.int_ptr for leaf in tree_flatten(p)[0]] == ptrs
        assert ocl.TRANSFER_STATS["to_device"] == 0 and ocl.TRANSFER_STATS["to_host"] == 0
        assert all(leaf.is_deleted() for leaf in old)
    assert np.isfinite(np.asarray(loss))


def _host_tree(tree):
    return [{k: np.asarray(v) for k, v in layer.items()} for layer in tree]


def test_a_donated_array_cannot_be_used_again() -> None:
    ocl = _cl()
    f = fg.jit(lambda x, y: x * 2.0 + y, backend="opencl", donate_argnums=0)
    x, y = _resident(np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32))
    ptr = x.buffer.int_ptr
    z = f(x, y)
    np.testing.assert_array_equal(np.asarray(z), np.arange(6).reshape(2, 3) * 2 + 1)
    assert z.buffer.int_ptr == ptr and x.is_deleted() and "donated" in repr(x)
    for use in (np.asarray, lambda a: a.numpy(), lambda a: f(a, y)):
        with pytest.raises(ocl.DonatedArrayError, match=r"float32\[2,3\].*donated"):
            use(x)
    np.testing.assert_array_equal(np.asarray(y), 1.0)          # not donated: still usable
    host = np.ones((2, 3), np.float32)
    for _ in range(2):                                          # a donated numpy array: nothing to reuse
        np.testing.assert_array_equal(np.asarray(f(host, y)), 3.0)
    np.testing.assert_array_equal(host, 1.0)


def _donation_cases():
    sq = np.arange(16, dtype=np.float32).reshape(4, 4) / 7.0
    return [
        # (name, function, arguments, whether the output may take over x's buffer)
        ("reversed read", lambda x: x[::-1] * 2.0, (sq,), False),
        ("transposed read", lambda x: x.T + x, (sq,), False),
        ("matmul", lambda x: x @ x, (sq,), False),
        ("returned unchanged", lambda x: (x * 2.0, x), (sq,), False),
        ("returned as a view", lambda x: (fnp.reshape(x, (16,)) * 2.0, fnp.reshape(x, (16,))), (sq,), False),
        ("read by a later reduction", lambda x: (x * 2.0, fnp.sum(x, axis=0)), (sq,), True),
        ("read by a later broadcast", lambda x: (x + 1.0, x * fnp.sum(x)), (sq,), True),
        ("read in a loop", lambda x: lax.fori_loop(0, 3, lambda i, c: c * 0.5 + x, x), (sq,), True),
        ("same buffer twice", lambda x, y: x * 2.0 + y, "twice", False),
    ]


@pytest.mark.parametrize("case", _donation_cases(), ids=lambda c: c[0])
def test_donation_only_where_safe_and_values_always_right(case) -> None:
    name, fun, args, reusable = case
    sq = np.arange(16, dtype=np.float32).reshape(4, 4) / 7.0
    want = fg.jit(fun, backend="opencl")(*((sq, sq) if args == "twice" else args))
    (x,) = _resident(sq)
    call_args = (x, x) if args == "twice" else (x,)
    donating = fg.jit(fun, backend="opencl", donate_argnums=0)
    donating.lower(*call_args)
    before = _alloc_stats()
    got = donating(*call_args)
    reused = _delta(before)["donated_outputs"]
    assert reused == int(reusable), donating.lower(*call_args).compiled.executable.donation
    assert x.is_deleted() == reusable
    _assert_close_trees(got, want, 1e-6, name)
    if not reusable:
        np.testing.assert_array_equal(np.asarray(x), sq)


DEVICE_ARRAY_EXPRESSIONS = [
    "y + 1", "1.5 - y", "y * y", "y / 3", "y // 2", "y % 2", "y ** 2", "2 ** y", "-y", "abs(y)",
    "y < 2", "y >= y", "y == y", "y != 0", "y @ y.T", "n @ y.T", "n + y", "y[1]", "y[:, ::-1]", "y[None, 0]",
    "y[:, n[0] > 1]", "y.T", "y.reshape(3, 2)", "y.reshape((6,))", "y.astype(np.int32)", "y.ravel()", "y.sum()",
    "y.sum(axis=0)", "y.mean()", "y.max(axis=1)", "y.argmin()", "y.var()", "y.prod()", "y.clip(1, 3)",
    "y.at[0, 1].set(9.0)", "y.at[:, 0].add(1.0)", "fnp.sin(y)", "fnp.where(y > 2, y, 0.0)",
]


@pytest.mark.parametrize("expr", DEVICE_ARRAY_EXPRESSIONS)
def test_device_arrays_take_numpys_operators_and_methods(expr: str) -> None:
    """A jitted function's device result works like a JAX array in eager code: operators,
    indexing and methods compute on the host from its one cached download and give a
    HostArray equal to numpy's (before, ``y + 1`` raised TypeError)."""
    from fungraph.array import HostArray

    host = np.array([[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]], np.float32)
    y = fg.jit(lambda x: x * 1.0, backend="opencl")(host)
    assert type(y).__name__ == "OpenCLArray"
    n = host.copy()
    got = eval(expr, {"y": y, "n": n, "np": np, "fnp": fnp})
    want = eval(expr.replace("y.at[0, 1].set(9.0)", "np.where(np.arange(6).reshape(2, 3) == 1, 9.0, y)")
                .replace("y.at[:, 0].add(1.0)", "y + (np.arange(3) == 0)").replace("fnp.", "np."),
                {"y": host.copy(), "n": n, "np": np})
    assert type(got) is HostArray, type(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(y), host)


def test_device_arrays_convert_to_python_values_and_say_why_not() -> None:
    """``len``, iteration, ``float``/``int``/``bool``, ``item``, ``tolist`` and format specs
    work on device arrays as on JAX's; converting a many-element array names its type."""
    f = fg.jit(lambda x: x + 0.5, backend="opencl")
    y = f(np.arange(6.0).reshape(2, 3))
    s = f(np.float64(1.0))
    assert len(y) == 2 and [r.tolist() for r in y] == [[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]]
    assert float(s) == 1.5 and int(s) == 1 and bool(s) and complex(s) == 1.5 and f"{s:.2f}" == "1.50"
    assert y.item(4) == 4.5 and y.tolist()[1][2] == 5.5
    with pytest.raises(TypeError, match=r"f64\[2,3\]"):
        float(y)
    assert type(f(y + 1)).__name__ == "OpenCLArray" and +y is y


def test_opencl_jit_outputs_are_weakly_typed_where_cpu_jit_outputs_are() -> None:
    """A result computed from Python scalars is weak on OpenCL as on the CPU (and in JAX): it
    promotes as a Python scalar would, and the caller's own argument is not re-typed."""
    x = fg.jit(lambda: fg.numpy.ones(3), backend="opencl")()
    for backend in ("cpu", "opencl"):
        f = fg.jit(lambda a, s: (a * s, s * 2.0, a), backend=backend)
        scaled, weak, same = f(x, 2.0)
        assert (scaled.weak_type, weak.weak_type, same.weak_type, x.weak_type) == (False, True, False, False), backend
        assert "weak_type=True" in repr(weak)
        assert (weak + fg.numpy.bfloat16(1)).dtype == fg.numpy.bfloat16
        np.testing.assert_array_equal(np.asarray(weak), np.float32(4.0))
