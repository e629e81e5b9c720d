"""One-kernel loops on OpenCL (``backends/opencl/kernels/loops.py``): a while or fori loop
whose condition reads only scalars and whose body is elementwise over its carries runs every
iteration inside one kernel launch. Each case is compared bit for bit with the same loop
lowered with a launch per iteration (``FUNGRAPH_OPENCL_LOOP_KERNELS=0``) and with the CPU
engine, in both dtype modes; loops the kernel cannot run keep the per-iteration path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.jit import clear_caches
from fungraph.tree_util import tree_flatten
from tests.helpers import GPU_LIKE

pytestmark = pytest.mark.usefixtures("require_opencl")


def _stats() -> tuple[dict, dict]:
    from fungraph.backends.opencl import TRANSFER_STATS
    from fungraph.backends.opencl.program import ENGINE_STATS

    return ENGINE_STATS, TRANSFER_STATS


def _executable(f: Callable, args: tuple, loop_kernels: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``f`` compiled for OpenCL with one-kernel loops on or off (read at compile time)."""
    monkeypatch.setenv("FUNGRAPH_OPENCL_LOOP_KERNELS", "1" if loop_kernels else "0")
    clear_caches()
    exe = fg.jit(f, backend="opencl").lower(*args).compiled.executable
    clear_caches()
    return exe


def _run(exe: Any, args: tuple) -> list[np.ndarray]:
    return [np.asarray(o) for o in exe.run(list(args))]


def _host(tree: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in tree_flatten(tree)[0]]


@contextmanager
def _mode(x64: bool) -> Iterator[None]:
    with fg.enable_x64(x64):
        yield


def _while_counter(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.tanh(c[1]) * 0.5 + 0.1), (0, x))


def _damped(x, n):
    """Three carries: a counter, an array whose update reads the counter and a scalar that
    passes through."""
    def body(c):
        i, y, k = c
        return i + 1, fnp.tanh(y * 1.5 + i.astype(y.dtype) * 0.1) - 0.25 * k, k

    return lax.while_loop(lambda c: c[0] < n, body, (0, x, fnp.mean(x)))


def _fori_static(x, n):
    """Static bounds: the fori loop becomes a scan without scanned values."""
    return lax.fori_loop(0, 7, lambda i, v: fnp.sin(v) * 0.9 + i.astype(v.dtype) * 0.01, x)


def _swapped(x, n):
    """Carries that swap places, and a loop-invariant row broadcast over the carries' rows."""
    row = fnp.arange(x.shape[-1], dtype=x.dtype) * 0.01
    return lax.fori_loop(0, n, lambda i, c: (c[1] * 0.5 + row, fnp.exp(-fnp.abs(c[0]))), (x, x * 2.0))


def _scalars_only(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 2, c[1] * 0.5 + 1.0), (0, fnp.sum(x)))


def _integers(x, n):
    xi = (fnp.abs(x) * 100).astype(fnp.int32)
    return lax.fori_loop(0, n, lambda i, v: (v * 3 + i.astype(v.dtype)) % 1009, xi)


LOOPS = {"while with a counter": _while_counter, "three carries": _damped, "static fori": _fori_static,
         "swapped carries": _swapped, "scalars only": _scalars_only, "integers": _integers}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("n", [0, 1, 6, 40])
@pytest.mark.parametrize("name", list(LOOPS))
def test_loop_kernel_matches_the_launch_per_iteration_path_and_cpu(name: str, n: int, x64: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    f = LOOPS[name]
    with _mode(x64):
        x = np.random.default_rng(n).standard_normal((3, 17)).astype(np.float64 if x64 else np.float32)
        args = (x, np.int32(n))
        one = _executable(f, args, True, monkeypatch)
        per_iteration = _executable(f, args, False, monkeypatch)
        assert "[loop, every iteration" in one.describe(), one.describe()
        assert "[loop" not in per_iteration.describe()
        got, want = _run(one, args), _run(per_iteration, args)
        cpu = _host(fg.jit(f)(*args))
    for a, b, c in zip(got, want, cpu):
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape
        np.testing.assert_array_equal(a, b, err_msg=f"{name}, {n} iterations")
        np.testing.assert_allclose(a, c, rtol=1e-12 if x64 else 2e-6, atol=1e-12 if x64 else 2e-6)


@pytest.mark.parametrize("n", [0, 3, 500])
def test_a_while_loop_is_one_launch_and_reads_nothing_back(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, transfers = _stats()
    x = np.linspace(-1, 1, 1000).astype(np.float32)
    f = lambda x, n: _while_counter(x, n)[1]  # noqa: E731
    args = fg.jit(lambda *a: a, backend="opencl")(x, np.int32(n))
    exe = _executable(f, args, True, monkeypatch)
    old = _executable(f, args, False, monkeypatch)
    launches = {}
    for label, e in (("one", exe), ("old", old)):
        e.run(list(args))
        before, reads = engine["launches"], transfers["scalar_reads"]
        out = e.run(list(args))
        launches[label] = engine["launches"] - before
        if label == "one":
            assert transfers["scalar_reads"] == reads
        np.testing.assert_array_equal(np.asarray(out[0]), _run(old, args)[0])
    assert launches["one"] == 1
    assert launches["old"] >= n + 1


def test_jvp_through_a_while_loop_is_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-2, 2, 50)
    t = np.cos(x)

    def f(x, t):
        return fg.jvp(lambda y: _damped(y, 9)[1], (x,), (t,))

    exe = _executable(f, (x, t), True, monkeypatch)
    assert exe.describe().count("[loop, every iteration") == 1, exe.describe()
    got = _run(exe, (x, t))
    want = _host(fg.jit(f)(x, t))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got, _run(_executable(f, (x, t), False, monkeypatch), (x, t)))


def test_derivatives_of_a_loss_around_a_fori_loop_match_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop of a directional derivative (``jvp``) is a one-kernel loop; ``grad`` keeps a
    scan that stacks its residuals."""
    x = np.linspace(-1, 1, 12)
    t = np.sin(x * 3)

    def loss(x):
        return fnp.sum(lax.fori_loop(0, 5, lambda i, v: fnp.sin(v) * 0.7 + x * 0.1, x) ** 2)

    directional = lambda x, t: fg.jvp(loss, (x,), (t,))[1]  # noqa: E731
    for d, args, one in ((fg.grad(loss), (x,), False), (directional, (x, t), True)):
        exe = _executable(d, args, True, monkeypatch)
        assert ("[loop, every iteration" in exe.describe()) == one, exe.describe()
        np.testing.assert_allclose(_run(exe, args)[0], np.asarray(fg.jit(d)(*args)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fg.jit(directional)(x, t), np.dot(np.asarray(fg.jit(fg.grad(loss))(x)), t),
                               rtol=1e-12, atol=1e-12)


def test_vmap_of_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batched fori loop with static bounds is one kernel (vmap batches its counter too: a
    carry of another shape, which the body's array values never meet); a batched while loop,
    whose condition reduces over the batch, is one kernel running each example's loop. All
    match the CPU engine."""
    x = np.random.default_rng(0).standard_normal((5, 8))
    ns = np.array([0, 3, 1, 5, 2], np.int32)
    fori = fg.vmap(lambda x: lax.fori_loop(0, 7, lambda i, v: fnp.sin(v) * 0.9 + 0.1, x))
    per_example = fg.vmap(lambda x: _fori_static(x, 0))
    batched = fg.vmap(lambda x, n: _damped(x, n)[1])
    for f, args in ((fori, (x,)), (per_example, (x[:, 0],)), (batched, (x, ns))):
        exe = _executable(f, args, True, monkeypatch)
        assert "[loop, every iteration" in exe.describe(), exe.describe()
        np.testing.assert_allclose(_run(exe, args)[0], np.asarray(fg.jit(f)(*args)), rtol=1e-12, atol=1e-12)


def _steps(x, limit):
    """Steps of a growing float until it passes ``limit``: how many each example takes varies."""
    def body(c):
        i, v = c
        return i + 1, fnp.where(v > 1.0, v * 1.3 + 0.1, fnp.sqrt(v) + 0.2)

    return lax.while_loop(lambda c: (c[1] < limit) & (c[0] < 200), body, (0, x))


BATCHED = {
    "vmap of a counted while": lambda x, n: fg.vmap(lambda x, n: _damped(x, n))(x, n),
    "vmap of a fori loop with batched bounds": lambda x, n: fg.vmap(
        lambda x, n: lax.fori_loop(0, n, lambda i, v: fnp.sin(v) * 0.9 + i.astype(v.dtype) * 0.01, x))(x, n),
    "vmap of a fori loop with a batched start": lambda x, n: fg.vmap(
        lambda x, n: lax.fori_loop(n, 9, lambda i, v: fnp.exp(-v * v) + v * 0.5, x), in_axes=(1, 0),
        out_axes=1)(x.T, n),
    "vmap of a loop whose trip count depends on the carry": lambda x, n: fg.vmap(
        lambda v, n: _steps(v, n.astype(v.dtype) * 0.5 + 2.0))(fnp.abs(x[:, 0]) + 0.01, n),
    "nested vmap": lambda x, n: fg.vmap(lambda x, n: fg.vmap(lambda v: _steps(v, n.astype(x.dtype) + 2.0))(x))(
        fnp.abs(x) + 0.01, n),
    "nested vmap of a counted while": lambda x, n: fg.vmap(lambda x, n: fg.vmap(lambda v: _damped(v, n))(x))(
        x.reshape(x.shape[0], 1, -1), n),
    "vmap of per-example scalars": lambda x, n: fg.vmap(lambda x, n: _steps(fnp.sum(x * x), n.astype(x.dtype)))(x, n),
}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("batch", [5, 300])
@pytest.mark.parametrize("name", list(BATCHED))
def test_batched_while_loops_are_one_kernel_matching_the_per_iteration_path_and_cpu(
        name: str, batch: int, x64: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example's loop runs to its own end inside the kernel; the examples' trip counts
    differ (0 to 12, and up to 200 by the carry), 300 examples span several work-groups. (The
    float64 ``tanh`` rule for PoCL is lifted here; it has its own test.)"""
    from fungraph.backends.opencl.kernels import loops

    monkeypatch.setattr(loops, "SLOW_FLOAT64_MAX_ELEMENTS", 10**9)
    f = BATCHED[name]
    rng = np.random.default_rng(batch)
    with _mode(x64):
        x = rng.standard_normal((batch, 3)).astype(np.float64 if x64 else np.float32)
        args = (x, rng.integers(0, 13, batch).astype(np.int32))
        one = _executable(f, args, True, monkeypatch)
        per_iteration = _executable(f, args, False, monkeypatch)
        assert "every iteration of the batched while inside the kernel" in one.describe(), one.describe()
        assert "[loop" not in per_iteration.describe()
        got, want = _run(one, args), _run(per_iteration, args)
        cpu = _host(fg.jit(f)(*args))
    assert len(got) == len(cpu)
    for a, b, c in zip(got, want, cpu):
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape
        np.testing.assert_array_equal(a, b, err_msg=name)
        if np.issubdtype(c.dtype, np.integer):
            np.testing.assert_array_equal(a, c, err_msg=name)
        np.testing.assert_allclose(a, c, rtol=1e-12 if x64 else 2e-6, atol=1e-12 if x64 else 2e-6)


def test_the_trip_counts_of_a_batched_while_differ_per_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example's count of iterations is its own, as on the CPU engine and unbatched."""
    x = np.abs(np.random.default_rng(3).standard_normal(40)) + 0.01
    limits = np.linspace(1.0, 30.0, 40)
    f = fg.vmap(lambda x, n: _steps(x, n)[0])
    exe = _executable(f, (x, limits), True, monkeypatch)
    assert "batched while" in exe.describe(), exe.describe()
    counts = _run(exe, (x, limits))[0]
    assert len(set(counts.tolist())) > 5
    np.testing.assert_array_equal(counts, np.asarray(fg.jit(f)(x, limits)))
    np.testing.assert_array_equal(counts, [int(fg.jit(lambda x, n: _steps(x, n)[0])(a, b)) for a, b in zip(x, limits)])


@pytest.mark.parametrize("name", ["vmap of a counted while", "vmap of a fori loop with batched bounds"])
def test_a_batched_while_is_one_launch_and_reads_nothing_back(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, transfers = _stats()
    rng = np.random.default_rng(0)
    args = fg.jit(lambda *a: a, backend="opencl")(rng.standard_normal((64, 4)).astype(np.float32),
                                                   rng.integers(0, 40, 64).astype(np.int32))
    f = lambda x, n: BATCHED[name](x, n)[1] if name.startswith("vmap of a counted") else BATCHED[name](x, n)  # noqa: E731
    launches, reads, kernels = {}, {}, {}
    for label, on in (("one", True), ("old", False)):
        exe = _executable(f, args, on, monkeypatch)
        exe.run(list(args))
        l0, r0 = engine["launches"], transfers["scalar_reads"]
        exe.run(list(args))
        launches[label], reads[label] = engine["launches"] - l0, transfers["scalar_reads"] - r0
        kernels[label] = exe.kernel_count
    assert launches["one"] == kernels["one"] and reads["one"] == 0, (launches, kernels, reads)
    assert launches["old"] >= launches["one"] + 39 and reads["old"] > 0, (launches, reads)


def test_a_batched_while_over_empty_examples_matches_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples of no elements leave no work-item to run the counter's loop: no loop kernel."""
    x, n = np.zeros((5, 0)), np.arange(5, dtype=np.int32)
    f = fg.vmap(_damped)
    exe = _executable(f, (x, n), True, monkeypatch)
    assert "[loop" not in exe.describe(), exe.describe()
    for a, b in zip(_run(exe, (x, n)), _host(fg.jit(f)(x, n))):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _three_shapes(x, n):
    """Carries of three array shapes per example, (3,), (7,) and (2, 3), met only by
    per-example scalars: a counter, and a scalar that also ends the loop."""
    a, b, m = x[:3], fnp.concatenate([x, x[:2] * 0.5]), fnp.concatenate([x, x[:1]]).reshape(2, 3)

    def body(c):
        i, s, a, b, m = c
        t = i.astype(a.dtype) * 0.05 + s
        return i + 1, s * 1.25 + 0.5, fnp.sin(a) * 0.9 + t, fnp.cos(b) * 0.5 - t, fnp.tanh(m * 1.5) + 0.25 * s

    return lax.while_loop(lambda c: (c[0] < n) & (c[1] < 6.0), body, (0, x[0] * 0.1, a, b, m))


def test_a_batched_while_with_carries_of_several_shapes_is_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example's carries of 3, 7 and 2 x 3 elements: one work-item per element of the
    largest, a smaller carry's last element computed again by the work-items past its end,
    which store nothing; 70 examples over several work-groups, bit for bit the
    launch-per-iteration path and as the CPU engine."""
    f = fg.vmap(_three_shapes)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((70, 5)).astype(np.float32)
    args = (x, rng.integers(0, 9, 70).astype(np.int32))
    one = _executable(f, args, True, monkeypatch)
    text = one.describe()
    assert "every iteration of the batched while inside the kernel" in text, text
    got, want = _run(one, args), _run(_executable(f, args, False, monkeypatch), args)
    cpu = _host(fg.jit(f)(*args))
    assert [a.shape for a in got] == [c.shape for c in cpu] == [(70,), (70,), (70, 3), (70, 7), (70, 2, 3)]
    assert len(set(got[0].tolist())) > 3
    for a, b, c in zip(got, want, cpu):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=2e-6, atol=2e-6)


def _own_mask(x, n):
    """A loop over a batch written by hand: ``any`` in the condition, the counter masked by
    the condition's predicate, but the array by another one, so it goes on changing after its
    example is done."""
    def body(c):
        i, v = c
        return fnp.where(i < n, i + 1, i), fnp.where(i < n + 2, v * 0.5 + 1.0, v)

    return lax.while_loop(lambda c: fnp.any(c[0] < n), body, (fnp.zeros_like(n), x))


def _centred(x, n):
    """A vmapped loop whose body reads the other elements of its example (a mean)."""
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] - fnp.mean(c[1]) * 0.5 + 0.1), (0, x))


NOT_FROZEN = {
    "any over a batch without a mask": lambda x, n: lax.while_loop(lambda v: fnp.any(v < 3.0), lambda v: v + 0.7, x),
    "a mask other than the condition's": _own_mask,
}


@pytest.mark.parametrize("device_as", [{}, {"max_work_group_size": 8}], indirect=True)
@pytest.mark.parametrize("name", list(NOT_FROZEN))
def test_batch_loops_that_do_not_freeze_finished_examples_run_as_one_work_group(
        device_as, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop over a batch whose body goes on changing examples that are done may not run its
    examples apart: it is one work-group over all 18 elements, running while any element's
    predicate holds, or, on a device whose work-groups are smaller, a launch per iteration."""
    f = NOT_FROZEN[name]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 3))
    args = (x, rng.integers(0, 9, x.shape).astype(np.int32))
    exe = _executable(f, args, True, monkeypatch)
    text = exe.describe()
    if device_as.max_work_group_size >= x.size:
        assert "one work-group whose work-items run while any element's predicate holds" in text, text
        assert "launches (18,)/(18,)" in text, text
    else:
        assert "[loop" not in text, text
    got = _run(exe, args)
    for a, b, c in zip(got, _run(_executable(f, args, False, monkeypatch), args), _host(fg.jit(f)(*args))):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)


def test_a_vmapped_loop_whose_body_reads_other_elements_keeps_a_launch_per_iteration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    f = fg.vmap(_centred)
    rng = np.random.default_rng(2)
    args = (rng.standard_normal((6, 3)), rng.integers(0, 9, 6).astype(np.int32))
    exe = _executable(f, args, True, monkeypatch)
    assert "[loop" not in exe.describe(), exe.describe()
    for a, b in zip(_run(exe, args), _host(fg.jit(f)(*args))):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


NOT_ELEMENTWISE = {
    "reversed carry": lambda x: lax.fori_loop(0, 4, lambda i, v: v[::-1] * 0.5 + 1.0, x),
    "sum in the body": lambda x: lax.fori_loop(0, 4, lambda i, v: v - fnp.mean(v), x),
    "condition on the array": lambda x: lax.while_loop(lambda v: fnp.max(fnp.abs(v)) > 0.1, lambda v: v * 0.5, x),
    "carries of two shapes meeting": lambda x: lax.fori_loop(0, 4, lambda i, c: (c[0] * 2.0 + c[1], c[1] + 1.0),
                                                              (x, x[0])),
    "product in the body": lambda x: lax.fori_loop(0, 3, lambda i, v: fnp.tanh(v @ v.T) * 0.1, x),
}


@pytest.mark.parametrize("name", list(NOT_ELEMENTWISE))
def test_loops_reading_other_elements_keep_a_launch_per_iteration(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    f = NOT_ELEMENTWISE[name]
    x = np.random.default_rng(1).standard_normal((6, 6))
    exe = _executable(f, (x,), True, monkeypatch)
    assert "[loop" not in exe.describe(), exe.describe()
    for a, b in zip(_run(exe, (x,)), _host(fg.jit(f)(x))):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [10, 1000])
@pytest.mark.parametrize("device_as", [{}, {"platform": "NVIDIA CUDA", "is_cpu": False}], indirect=True)
def test_float64_tanh_loops_over_many_elements_keep_their_launches_on_pocl(device_as, size: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule holds on PoCL's CPU driver only: presented as another platform's device, the
    float64 ``tanh`` loop over 1,000 elements is one kernel too."""
    from fungraph.backends.opencl.kernels import loops

    x = np.linspace(-1, 1, size)
    exe = _executable(lambda x: _while_counter(x, 5)[1], (x,), True, monkeypatch)
    kept = loops.is_pocl_cpu(device_as) and size > loops.SLOW_FLOAT64_MAX_ELEMENTS
    assert ("[loop" in exe.describe()) == (not kept), exe.describe()
    np.testing.assert_allclose(_run(exe, (x,))[0], np.asarray(fg.jit(lambda x: _while_counter(x, 5)[1])(x)),
                               rtol=1e-12, atol=1e-12)


def test_the_float64_tanh_rule_is_decided_by_the_platform_the_size_and_the_dtype() -> None:
    """``slow_float64_loop`` needs no device: PoCL CPU devices only, more than 256 elements,
    float64 ``tanh`` only."""
    from fungraph.backends.opencl.device import DeviceInfo
    from fungraph.backends.opencl.kernels.loops import SLOW_FLOAT64_MAX_ELEMENTS as N
    from fungraph.backends.opencl.kernels.loops import slow_float64_loop
    from fungraph.interpreters.staging import stage
    from fungraph.ir import ShapedArray

    def body(dtype, fn):
        return stage(lambda v: fn(v) * 0.5 + 0.1, [ShapedArray((N + 1,), np.dtype(dtype))])[0]

    def device(platform, is_cpu=True):
        return DeviceInfo("dev", platform, is_cpu, 4096, 65536, True, True, 2)

    pocl, cuda = device("Portable Computing Language"), device("NVIDIA CUDA", is_cpu=False)
    pocl_gpu, intel = device("Portable Computing Language", is_cpu=False), device("Intel(R) OpenCL")
    tanh64, tanh32, exp64 = body(np.float64, fnp.tanh), body(np.float32, fnp.tanh), body(np.float64, fnp.exp)
    assert slow_float64_loop(tanh64, N + 1, pocl)
    assert not slow_float64_loop(tanh64, N, pocl)
    assert not any(slow_float64_loop(tanh64, N + 1, d) for d in (cuda, pocl_gpu, intel))
    assert not slow_float64_loop(tanh32, N + 1, pocl)
    assert not slow_float64_loop(exp64, N + 1, pocl)


@pytest.mark.parametrize("device_as", [{**GPU_LIKE, "max_work_group_size": 64}, {"compute_units": 4}],
                         indirect=True)
@pytest.mark.parametrize("size", [1, 63, 1000])
def test_loop_kernel_work_groups_cover_every_element(device_as, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole work-groups (up to 256, at most the device's limit: 64 on the GPU-like device; on a
    CPU halved until each compute unit gets two): the last group's extra work-items store
    nothing, and every element is stored."""
    x = np.linspace(-1, 1, size).astype(np.float32)
    f = lambda x, n: _damped(x, n)  # noqa: E731
    args = (x, np.int32(9))
    exe = _executable(f, args, True, monkeypatch)
    text = exe.describe()
    assert "[loop, every iteration" in text, text
    local = min(size, 256, device_as.max_work_group_size)
    while device_as.is_cpu and local > 64 and -(-size // local) < 2 * device_as.compute_units:
        local //= 2
    assert f"launches ({-(-size // local) * local},)/({local},)" in text, text
    got, want = _run(exe, args), _run(_executable(f, args, False, monkeypatch), args)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
