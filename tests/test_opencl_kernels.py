"""OpenCL launches and the elementwise, reduction and indexing kernels: work spread over
compute units, chunked and 16-column sums, a built program taken again by an identical
executable, non-temporal (streamed) stores, ordered scatter sums and pooling gradients.
(Products: test_opencl_matmul_kernels.py; epilogues: test_opencl_epilogue_kernels.py; GPU
code paths: test_opencl_gpu_kernels.py.)

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.jit import clear_caches
from fungraph.testing import Program, programs
from fungraph.tree_util import tree_flatten
from tests.helpers import kernel_notes, opencl_device

# the CPU kernel choices are checked on every driver
pytestmark = pytest.mark.usefixtures("require_opencl", "cpu_code_paths")


def test_large_launches_leave_every_compute_unit_work_and_small_ones_stay_on_one() -> None:
    from fungraph.backends.opencl.kernels.spec import SPREAD_MIN_WORK, exact_launches

    info = dataclasses.replace(opencl_device().info, is_cpu=True, compute_units=2, max_work_group_size=4096)
    for n in (132, 1000, SPREAD_MIN_WORK, 10_000_000):
        launches = exact_launches(n, info)
        assert sum(g[0] for g, _, _ in launches) == n
        bulk, local, _ = launches[0]
        if n >= SPREAD_MIN_WORK:
            assert bulk[0] // local[0] >= 4
        else:   # waking a second worker thread costs more than it saves
            assert local == (128,) if n == 132 else local == (256,)
    # few work-items doing much work each (a chunked sum): spread anyway
    bulk, local, _ = exact_launches(512, info, work=10_000_000)[0]
    assert bulk[0] // local[0] >= 4
    gpu = dataclasses.replace(info, is_cpu=False)
    assert exact_launches(1024, gpu)[0][1] == (256,)


def test_sum_of_many_elements_splits_into_chunks_on_every_core() -> None:
    x = np.random.default_rng(3).random(1_000_003).astype(np.float32)
    f = fg.jit(lambda a: fnp.sum(a), backend="opencl")
    np.testing.assert_allclose(float(np.asarray(f(x))), x.astype(np.float64).sum(), rtol=1e-5)
    assert "chunks per row" in kernel_notes(f, x)


@pytest.mark.parametrize("shape,axes", [((256, 64), (0,)), ((3, 32), (0,)), ((2, 4, 48), (0, 1)), ((7, 2, 16), (0,))])
def test_sums_over_leading_axes_read_sixteen_columns_per_work_item(shape, axes) -> None:
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    f = fg.jit(lambda a: fnp.sum(a, axis=axes), backend="opencl")
    np.testing.assert_allclose(np.asarray(f(x)), x.astype(np.float64).sum(axis=axes), rtol=1e-5, atol=1e-5)
    assert "16 columns per work-item" in kernel_notes(f, x)


def test_an_identical_executable_takes_the_built_program() -> None:
    from fungraph.backends.opencl import building, engine

    def f(x):
        return fnp.tanh(x * 3.0 + 1.0) @ x.T

    x = np.random.default_rng(9).standard_normal((40, 24)).astype(np.float32)
    first = fg.jit(lambda x: f(x), backend="opencl")
    want = np.asarray(first(x))
    built, reused = engine.ENGINE_STATS["kernels_built"], engine.ENGINE_STATS["programs_reused"]
    del first                                  # its executable goes; the built program stays
    gc.collect()
    again = fg.jit(lambda x: f(x), backend="opencl")
    np.testing.assert_array_equal(np.asarray(again(x)), want)
    assert engine.ENGINE_STATS["kernels_built"] == built
    assert engine.ENGINE_STATS["programs_reused"] == reused + 1
    clear_caches()                             # which clear_caches frees
    assert not building._PROGRAMS


def _chain(x):
    for _ in range(5):
        x = x * 1.0001 + 0.5
    return x


@pytest.mark.parametrize(("n", "dtype"), [(4_194_307, np.float32), (2_097_160, np.float64), (4_194_304, np.int32)])
def test_large_elementwise_kernels_stream_their_stores(n: int, dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs of at least ``STREAM_MIN_BYTES``: 8 elements per work-item stored with one
    non-temporal 8-wide store, the last ``n % 8`` elements by the plain kernel; the values are
    bitwise those of the plain kernel."""
    from fungraph.backends.opencl.kernels import elementwise

    x = (np.random.default_rng(n).standard_normal(n) * 100).astype(dtype)
    f = (lambda x: x * 3 + 7) if dtype == np.int32 else _chain
    clear_caches()
    streamed = fg.jit(f, backend="opencl")
    got = np.asarray(streamed(x))
    text = kernel_notes(streamed, x)
    assert f"non-temporal stores ({n - n % 8} elements)" in text
    assert (f"the last {n % 8} elements" in text) == (n % 8 != 0)
    monkeypatch.setattr(elementwise, "STREAM_STORES", False)
    clear_caches()
    plain = fg.jit(f, backend="opencl")
    np.testing.assert_array_equal(got, np.asarray(plain(x)))
    assert "non-temporal" not in kernel_notes(plain, x)
    clear_caches()


def test_streamed_stores_into_unaligned_destinations(monkeypatch: pytest.MonkeyPatch) -> None:
    """A region stored into a slice of a concatenation that does not start on a 32-byte
    boundary takes plain 8-wide stores there; a scalar input streams, an input read through a
    broadcast keeps the plain kernel."""
    from fungraph.backends.opencl.kernels import elementwise

    monkeypatch.setattr(elementwise, "STREAM_MIN_BYTES", 0)
    clear_caches()
    x = np.arange(1001, dtype=np.float32)
    y = np.arange(77, dtype=np.float32)
    f = fg.jit(lambda x, y: fnp.concatenate([x * 2.0 + 1.0, y * 3.0 - 1.0, x[:5] + 1.0]), backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(x, y)), np.concatenate([x * 2 + 1, y * 3 - 1, x[:5] + 1]))
    assert "non-temporal stores (72 elements)" in kernel_notes(f, x, y)
    scaled = fg.jit(lambda x, a: x * a + 1.0, backend="opencl")   # a scalar input streams too
    np.testing.assert_array_equal(np.asarray(scaled(x, np.float32(3))), x * 3 + 1)
    assert "non-temporal stores (1000 elements)" in kernel_notes(scaled, x, np.float32(3))
    b = fg.jit(lambda x, r: x * r, backend="opencl")
    m = np.ones((64, 32), np.float32)
    r = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(b(m, r)), m * r)
    assert "non-temporal" not in kernel_notes(b, m, r)
    clear_caches()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs(max_eqns=14))
def test_random_programs_with_streamed_stores_match_the_cpu(prog: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random programs on OpenCL with every eligible elementwise kernel streaming its stores,
    against the CPU backend."""
    from fungraph.backends.opencl.kernels import elementwise

    monkeypatch.setattr(elementwise, "STREAM_MIN_BYTES", 0)
    clear_caches()
    got = fg.jit(prog.fun, backend="opencl")(*prog.args)
    want = fg.jit(prog.fun)(*prog.args)
    for g_, w_ in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=2e-4, atol=2e-4, err_msg=repr(prog))
    clear_caches()


@pytest.mark.parametrize("device_sort", [False, True], ids=["scan", "sort"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_scatter_sums_each_row_in_index_order(data: st.DataObject, device_sort: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Constant indices (repeats, negatives, out of range: clamped) are sorted by row when
    the kernel is built, so each output element reads only its own updates; indices computed
    on the device are scanned once per run of a row's elements, or (``device_sort``: every
    size) merge-sorted on the device first. All keep index order, so the sums equal the CPU's
    bit for bit."""
    from fungraph.backends.opencl.kernels import indexing
    from fungraph.primitives.indexing import scatter_add

    monkeypatch.setattr(indexing, "SCATTER_SORT_MIN", -1 if device_sort else 1 << 62)
    clear_caches()
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    n = data.draw(st.integers(1, 6))
    idx_shape = tuple(data.draw(st.lists(st.integers(1, 40 if device_sort else 4), min_size=1, max_size=2)))
    idx = rng.integers(-n - 2, n + 2, size=idx_shape)
    dtype = data.draw(st.sampled_from([np.float32, np.int32, np.bool_]))
    upd = (rng.standard_normal((3, *idx_shape, 2)) * 3).astype(dtype)

    def known(u: object) -> object:
        return scatter_add(u, idx, 1, (3, n, 2))

    def traced(u: object, i: object) -> object:
        return scatter_add(u, i, 1, (3, n, 2))

    want = known(upd)
    jk = fg.jit(known, backend="opencl")
    np.testing.assert_array_equal(np.asarray(jk(upd)), want)
    jt = fg.jit(traced, backend="opencl")
    np.testing.assert_array_equal(np.asarray(jt(upd, idx)), want)
    assert "index order known at compile time" in jk.lower(upd).text
    assert ("index order sorted on the device" if device_sort else "elements of a row per work-item") \
        in jt.lower(upd, idx).text


def test_large_scatter_sorts_its_device_indices() -> None:
    """An embedding gradient with token indices passed in (so only known on the device):
    more indices and rows than a scan pays for, so they are merge-sorted on the device (runs
    not a power of two long, the last merge short); the sums equal the CPU's bit for bit."""
    from fungraph.primitives.indexing import scatter_add

    rng = np.random.default_rng(3)
    vocab, tokens = 3001, 2500
    idx = rng.integers(-vocab - 5, vocab + 5, size=(50, tokens // 50)).astype(np.int32)
    idx[0, :40] = 7
    upd = rng.standard_normal((*idx.shape, 3)).astype(np.float32)

    def grad_rows(u: object, i: object) -> object:
        return scatter_add(u, i, 0, (vocab, 3))

    jt = fg.jit(grad_rows, backend="opencl")
    np.testing.assert_array_equal(np.asarray(jt(upd, idx)), fg.jit(grad_rows)(upd, idx))
    text = jt.lower(upd, idx).text
    assert "index order sorted on the device" in text and "merge sorted runs of 2048" in text


def test_max_pool_gradient_runs_row_by_row() -> None:
    """A pooling gradient is a scatter with constant window indices: on the device it matches
    the CPU and uses the ordered kernel."""
    from fungraph import nn

    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)

    def loss(x: object) -> object:
        return (nn.max_pool(x, (2, 2)) ** 2).sum()

    g = fg.jit(fg.grad(loss), backend="opencl")
    np.testing.assert_allclose(np.asarray(g(x)), fg.jit(fg.grad(loss))(x), rtol=1e-6)
    assert "index order known at compile time" in g.lower(x).text
