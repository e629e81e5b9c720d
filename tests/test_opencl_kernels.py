"""OpenCL kernel choices: the packed 6x16 matmul and its edges, panel packing, work-group
sizes from the device's limits, and the GPU code paths (local-memory tiled matmul,
interleaved reductions) run on PoCL by presenting the device as a non-CPU one; on a GPU driver
the device is presented as a CPU for the others.

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.jit import clear_caches
from fungraph.testing import OP_RECORDS, Program, programs
from fungraph.testing.models import sgd_step
from fungraph.tree_util import tree_flatten
from tests.helpers import assert_matches, draw_args, opencl_device_presented_as
from tests.test_opencl import _tol

RECORDS = {r.name: r for r in OP_RECORDS}


# the CPU kernel choices are checked on every driver; the GPU_LIKE cases undo this
pytestmark = pytest.mark.usefixtures("require_opencl", "cpu_code_paths")


def _device():
    from fungraph.backends.opencl import get_device

    return get_device()


@pytest.fixture
def device_as(request: pytest.FixtureRequest) -> Iterator[object]:
    """The device presented with other limits (``request.param``: DeviceInfo fields)."""
    with opencl_device_presented_as(**request.param) as info:
        yield info


GPU_LIKE = {"is_cpu": False}


@pytest.fixture(params=[True, False], ids=["fused-pack", "pack-kernel"])
def fused_pack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """Packed products with ``rhs`` panels copied inside the product kernel (the default on a
    CPU) and with the separate pack kernel (what a panel too large for local memory gets)."""
    from fungraph.backends.opencl.kernels import matmul

    monkeypatch.setattr(matmul, "DOT_FUSED_PACK", request.param)
    clear_caches()
    yield request.param
    clear_caches()


@pytest.fixture
def pack_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Packed products with the separate pack kernel."""
    from fungraph.backends.opencl.kernels import matmul

    monkeypatch.setattr(matmul, "DOT_FUSED_PACK", False)
    clear_caches()
    yield
    clear_caches()


def _notes(f, *args) -> str:
    return f.lower(*args).text


def _matmul_cases() -> list[tuple[int, int, int]]:
    # m % 6 in 0..5, n % 16 != 0, k = 1, small m (unpacked path), m below the pack threshold
    return [(64, 32, 16), (70, 33, 17), (256, 100, 64), (67, 1, 48), (130, 64, 40), (7, 9, 33),
            (300, 20, 10), (96, 16, 32), (65, 5, 16)]


def _products(a, at, b, bt, ai, bi):  # noqa: ANN001, ANN202 - arrays in, a tuple of arrays out
    """One product in each operand layout (each gets its own kernels), in one program: a
    program build is most of what these tests cost on PoCL."""
    return a @ b, at.T @ b, a @ bt.T, ai @ bi


def _check_matmuls(rng: np.random.Generator) -> None:
    for m, k, n in _matmul_cases():
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        want = a.astype(np.float64) @ b
        tol = 1e-5 * np.sqrt(k) * 4
        ai = rng.integers(-5, 5, (m, k)).astype(np.int32)
        bi = rng.integers(-5, 5, (k, n)).astype(np.int32)
        *floats, ints = fg.jit(_products, backend="opencl")(a, a.T.copy(), b, b.T.copy(), ai, bi)
        for layout, got in zip(("x @ y", "x.T @ y", "x @ y.T"), floats):
            np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol, err_msg=f"{(m, k, n)} {layout}")
        np.testing.assert_array_equal(np.asarray(ints), ai @ bi)
    a = rng.standard_normal((3, 70, 40)).astype(np.float32)
    b = rng.standard_normal((3, 40, 50)).astype(np.float32)
    got = np.asarray(fg.jit(lambda x, y: x @ y, backend="opencl")(a, b))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_shapes_and_edges_on_the_cpu_kernels(fused_pack: bool) -> None:
    _check_matmuls(np.random.default_rng(0))


def test_large_matmul_packs_both_operands_and_covers_row_and_column_edges(fused_pack: bool) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((130, 70)).astype(np.float32)    # 130 = 21 * 6 + 4 rows
    b = rng.standard_normal((70, 40)).astype(np.float32)     # 40 = 2 * 16 + 8 columns
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4)
    text = _notes(f, a, b)
    if fused_pack:
        # lhs rows contiguous along k are read in place; rhs panels are copied by the product
        assert "[copy" not in text
        assert "rhs panels copied to local memory (16-wide lines), lhs rows read in place" in text
        # the last 130 % 6 rows: one more row panel starting at row 124, storing its last 4 rows
        assert "the last 4 rows from a panel at row 124" in text
        assert "scalar corner" not in text and "_rows" not in text
        assert "the last 8 columns, zero-padded" in text
    else:
        # rows 280 bytes apart are read in place; rhs and its zero-padded panel in one launch
        assert "rhs packed, lhs rows read in place" in text and "(2 copies in one launch)" in text
        assert "the last 4 rows from a panel at row 124" in text
        # the zero-padded panel is one more column panel of the product's launch
        assert "the last 8 columns from the zero-padded panel" in text and "_cols" not in text
        assert "pack the last 8 columns" in text
        assert "scalar corner" not in text
    t = fg.jit(lambda x, y: x.T @ y, backend="opencl")
    np.testing.assert_allclose(np.asarray(t(a.T.copy(), b)), a @ b, rtol=1e-4, atol=1e-4)
    text = _notes(t, a.T.copy(), b)
    if fused_pack:
        # the last 4 rows are computed from the local panel by the last work-item of each panel
        assert "lhs packed" in text and "the last 4 rows by the last work-item of each panel" in text
        assert "_rows" not in text.replace("pack_rows", "")
        assert "scalar corner" in text
    else:
        # rows 124-129 are packed into one more row panel, which stores only its last 4 rows;
        # with the padded column panel in the same launch there is no edge kernel at all
        assert "both operands packed" in text and "pack rows 124-129 into one more panel" in text
        assert "the last 4 rows from a panel at row 124, the last 8 columns from the zero-padded panel" in text
        assert sum(line.startswith("kernel ") for line in text.splitlines()) == 2, text
    # an rhs given as its transpose is packed as 16 x 16 blocks transposed in registers
    # (k = 70: 64 + a tail of 6)
    g = fg.jit(lambda x, y: x @ y.T, backend="opencl")
    np.testing.assert_allclose(np.asarray(g(a, b.T.copy())), a @ b, rtol=1e-4, atol=1e-4)
    how = "rhs panels copied to local memory (" if fused_pack else "pack 16-wide panels, "
    assert how + "16 x 16 blocks transposed in registers" in _notes(g, a, b.T.copy())


def _product_notes(units: int, per_unit: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The notes of a checked 256x40 @ 40x64 product on the device presented with ``units``
    compute units, keeping ``per_unit`` work-groups per unit."""
    from fungraph.backends.opencl.kernels import matmul

    monkeypatch.setattr(matmul, "DOT_GROUPS_PER_UNIT", per_unit)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 40)).astype(np.float32)
    b = rng.standard_normal((40, 64)).astype(np.float32)
    with opencl_device_presented_as(compute_units=units):
        f = fg.jit(lambda x, y: x @ y, backend="opencl")
        np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4)
        return _notes(f, a, b)


@pytest.mark.parametrize(("units", "run"), [(2, 43), (4, 22), (8, 11), (16, 8)])
def test_fused_products_share_row_panels_while_every_core_has_several(
        units: int, run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 rows are 43 row panels (42 and one overlapping), 4 x 16 columns are 4 column
    panels: one work-item per column panel computing all 43 row panels from its local copy
    leaves 4 work-groups, enough for 2 compute units at two per unit; more units split the
    row panels into runs, never shorter than 8 (a copy costs about a few panels' products)."""
    text = _product_notes(units, 2, monkeypatch)
    assert f"{run} row panels per work-item" in text
    assert f"launches (4, {-(-43 // run)}, 1)/(1, 1, 1)" in text


@pytest.mark.parametrize("limit", ["local memory", "work"])
def test_fused_copy_falls_back_to_a_pack_kernel(limit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column panel larger than half the device's local memory, or a product of more than
    ``FUSED_MAX_WORK`` multiply-adds, is packed by its own kernel."""
    from fungraph.backends.opencl.kernels import matmul

    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal((300, 32)).astype(np.float32)
    local = 2 * 300 * 16 * 4 - (4 if limit == "local memory" else 0)
    monkeypatch.setattr(matmul, "FUSED_MAX_WORK", 64 * 300 * 32 - (1 if limit == "work" else 0))
    clear_caches()
    with opencl_device_presented_as(local_mem_size=local):
        f = fg.jit(lambda x, y: x @ y, backend="opencl")
        np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4)
        text = _notes(f, a, b)
        assert "pack 16-wide panels" in text and "local memory" not in text
    clear_caches()
    with opencl_device_presented_as(local_mem_size=local + 4):
        monkeypatch.setattr(matmul, "FUSED_MAX_WORK", 64 * 300 * 32)
        g = fg.jit(lambda x, y: x @ y, backend="opencl")
        np.testing.assert_allclose(np.asarray(g(a, b)), a @ b, rtol=1e-4, atol=1e-4)
        assert "rhs panels copied to local memory" in _notes(g, a, b)
    clear_caches()


@pytest.mark.parametrize(("units", "group"), [(2, 22), (8, 22), (16, 11), (64, 3)])
def test_packed_work_groups_take_many_row_panels_while_every_core_has_several(
        units: int, group: int, monkeypatch: pytest.MonkeyPatch, pack_kernel: None) -> None:
    """With the pack kernel: 256 rows are 43 row panels (42 and one overlapping), 4 x 16
    columns are 4 column panels. Work-groups take at most 34 row panels, so 2 per column
    panel (22 and 21): 8 work-groups, enough for up to 8 compute units at one per unit; 16
    units need 4 work-groups per column panel (11 row panels), 64 units 16 (3 each, 15 of
    them used)."""
    text = _product_notes(units, 1, monkeypatch)
    assert f"work-groups of 1x{group} panels" in text
    assert f"launches (4, {-(-43 // group) * group}, 1)/(1, {group}, 1)" in text


@pytest.mark.parametrize(("k", "packed"), [(512, True), (500, False), (1024, True), (520, False)])
def test_large_products_pack_lhs_rows_that_alias_in_the_cache(k: int, packed: bool, pack_kernel: None) -> None:
    """Beyond the fused copy, lhs rows contiguous along k are packed (with rhs, in one launch)
    when they lie a multiple of 2 KiB apart (six rows on few L1 sets), else read in place."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((70, k)).astype(np.float32)
    b = rng.standard_normal((k, 48)).astype(np.float32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    text = _notes(f, a, b)
    assert ("both operands packed" in text) == packed
    # rhs, its zero-padded panel (48 = 3 * 16: none) and, when packed, lhs's panels and the
    # panel of its last 6 rows (70 = 11 * 6 + 4) in one launch
    assert ("(3 copies in one launch)" in text) == packed
    assert ("lhs rows read in place" in text) == (not packed)


@pytest.mark.parametrize("rest", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_row_tail_panel_overlaps_the_last_whole_panel(rest: int, dtype: type, fused_pack: bool) -> None:
    """With lhs rows read in place, m % 6 rows come from a panel starting at m - 6 that stores
    only its last rows, in the 16-column kernel and in the zero-padded last panel
    (n = 16 * 3 + 5)."""
    rng = np.random.default_rng(rest)
    m = 66 + rest
    a = rng.integers(-4, 4, (m, 23)).astype(dtype)
    b = rng.integers(-4, 4, (23, 53)).astype(dtype)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(a, b)), a @ b)
    assert (f"the last {rest} rows from a panel at row {m - 6}" in _notes(f, a, b)) == (rest > 0)


@pytest.mark.parametrize("shape", [(70, 70, 200), (64, 64, 80), (100, 97, 129)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_product_with_a_transposed_rhs_is_computed_transposed(shape: tuple[int, int, int], dtype: type,
                                                              fused_pack: bool) -> None:
    """``g @ w.T`` with fewer rows in ``g`` than in ``w``: ``w``'s rows are read in place, only
    ``g`` is packed (as 16 x 16 blocks transposed in registers), and ``out`` is stored
    transposed, element by element."""
    m, k, n = shape
    rng = np.random.default_rng(m + n)
    g = rng.integers(-4, 4, (m, k)).astype(dtype)
    w = rng.integers(-4, 4, (n, k)).astype(dtype)
    f = fg.jit(lambda x, y: x @ y.T, backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(g, w)), g @ w.T)
    text = _notes(f, g, w)
    assert "transposed product out.T = rhs.T @ lhs.T" in text
    if fused_pack:
        assert "rhs panels copied to local memory (16 x 16 blocks transposed in registers)" in text
        assert "lhs rows read in place" in text
        assert f"launches ({m // 16}, " in text     # a work-item per 16 rows of g (columns of g.T)
    else:
        assert "rhs packed, lhs rows read in place" in text
    short = fg.jit(lambda x, y: x @ y.T, backend="opencl")        # k = 10: w packed, out stored by rows
    np.testing.assert_array_equal(np.asarray(short(g[:, :10], w[:, :10])), g[:, :10] @ w[:, :10].T)
    assert "transposed product" not in _notes(short, g[:, :10], w[:, :10])
    gb = rng.integers(-4, 4, (2, m, k)).astype(dtype)
    wb = rng.integers(-4, 4, (2, n, k)).astype(dtype)
    fb = fg.jit(lambda x, y: fnp.einsum("bik,bjk->bij", x, y), backend="opencl")
    np.testing.assert_array_equal(np.asarray(fb(gb, wb)), np.einsum("bik,bjk->bij", gb, wb))
    assert "transposed product" in _notes(fb, gb, wb)


def test_narrow_product_of_a_transposed_operand_needs_no_copy() -> None:
    rng = np.random.default_rng(7)
    h = rng.standard_normal((256, 300)).astype(np.float32)
    g = rng.standard_normal((256, 10)).astype(np.float32)
    f = fg.jit(lambda a, b: a.T @ b, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(h, g)), h.T @ g, rtol=1e-4, atol=1e-4)
    text = _notes(f, h, g)
    assert "10 columns x 8 adjacent rows per work-item" in text
    assert "copy" not in text


@pytest.mark.parametrize("m", [64, 67, 203])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_narrow_products_cover_every_row(m: int, dtype: type, fused_pack: bool) -> None:
    """8 rows per work-item in vectors, the last m % 8 one per work-item; a narrow product
    whose rows are not adjacent (``w @ v``, n < 16) takes one zero-padded 16-column panel."""
    rng = np.random.default_rng(m)
    h = rng.integers(-4, 4, (37, m)).astype(dtype)
    g = rng.integers(-4, 4, (37, 5)).astype(dtype)
    f = fg.jit(lambda a, b: a.T @ b, backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(h, g)), h.T @ g)
    assert ("last" in _notes(f, h, g)) == (m % 8 != 0)
    w = fg.jit(lambda a, b: a @ b, backend="opencl")
    np.testing.assert_array_equal(np.asarray(w(h.T.copy(), g)), h.T @ g)
    text = _notes(w, h.T.copy(), g)
    if fused_pack:
        assert "the last 5 columns, zero-padded" in text and "[copy" not in text
    else:
        assert "last 5 columns from the zero-padded panel" in text
        assert "pack the last 5 columns" in text


@pytest.mark.parametrize("order", ["rows", "columns"])
def test_panel_packing_reads_either_operand_layout(order: str, fused_pack: bool) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((200, 48)).astype(np.float32)
    b = rng.standard_normal((48, 64)).astype(np.float32)
    if order == "rows":
        f = fg.jit(lambda x, y: x @ y, backend="opencl")
        got = f(a, b)
    else:
        f = fg.jit(lambda x, y: x.T @ y.T, backend="opencl")
        got = f(a.T.copy(), b.T.copy())
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-4, atol=1e-4)


def test_large_launches_leave_every_compute_unit_work_and_small_ones_stay_on_one() -> None:
    from fungraph.backends.opencl.kernels.spec import SPREAD_MIN_WORK, exact_launches

    info = dataclasses.replace(_device().info, is_cpu=True, compute_units=2, max_work_group_size=4096)
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
    assert "chunks per row" in _notes(f, x)


@pytest.mark.parametrize("shape,axes", [((256, 64), (0,)), ((3, 32), (0,)), ((2, 4, 48), (0, 1)), ((7, 2, 16), (0,))])
def test_sums_over_leading_axes_read_sixteen_columns_per_work_item(shape, axes) -> None:
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    f = fg.jit(lambda a: fnp.sum(a, axis=axes), backend="opencl")
    np.testing.assert_allclose(np.asarray(f(x)), x.astype(np.float64).sum(axis=axes), rtol=1e-5, atol=1e-5)
    assert "16 columns per work-item" in _notes(f, x)


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
def test_gpu_matmul_is_the_local_memory_tiled_kernel(device_as) -> None:
    _check_matmuls(np.random.default_rng(4))
    a = np.ones((40, 24), np.float32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    text = _notes(f, a, a.T[:, :20].copy())   # smaller than one 32 x 32 register-blocked tile
    assert "local-memory tiles 16x16, 4 outputs per work-item" in text
    assert "packed" not in text


@pytest.mark.parametrize("device_as", [{**GPU_LIKE, "compute_units": 8, "max_work_group_size": 1024,
                                        "local_mem_size": 49152}], indirect=True)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_matmul_blocks_outputs_in_registers(device_as, dtype) -> None:
    """Products of at least a 32 x 32 tile take the register-blocked kernel: 4x4 outputs per
    work-item when that still gives each compute unit a work-group, else 2x2; edges, batches
    and a transposed operand included."""
    rng = np.random.default_rng(12)
    for (bt, m, k, n), r in (((1, 200, 37, 130), 4), ((1, 70, 20, 33), 2), ((3, 33, 70, 65), 2)):
        a = rng.standard_normal((bt, k, m)).astype(dtype)
        b = rng.standard_normal((bt, k, n)).astype(dtype)
        f = fg.jit(lambda x, y: fnp.swapaxes(x, 1, 2) @ y, backend="opencl")
        want = np.swapaxes(a, 1, 2).astype(np.float64) @ b
        np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
        assert f"{r}x{r} outputs per work-item in registers" in _notes(f, a, b)


@pytest.mark.parametrize("device_as", [{**GPU_LIKE, "compute_units": 16, "max_work_group_size": 1024,
                                        "local_mem_size": 49152}], indirect=True)
def test_gpu_long_reductions_combine_in_work_group_trees(device_as) -> None:
    """A long reduction on a GPU: pass 1 spreads each row over many work-items whose
    work-group combines its shares in local memory, pass 2 one work-group per row; arg
    reductions keep one partial per work-item. Values as numpy's, with prologue and epilogue."""
    rng = np.random.default_rng(15)
    v = rng.standard_normal(50000).astype(np.float32)
    r = rng.standard_normal((3, 20000))
    cases = [(lambda v: v.sum(), v, True), (lambda v: v.max(), v, True), (lambda r: r.min(axis=1), r, True),
             (lambda r: fnp.prod(1.0 + r * 1e-5, axis=1), r, True), (lambda v: (v > 0).astype(np.int32).sum(), v, True),
             (lambda v: fnp.sqrt((v * v).sum()) + 1.0, v, True), (lambda r: r.T.sum(axis=0), r, True),
             (lambda v: fnp.argmax(v), v, False)]
    for f, a, tree in cases:
        j = fg.jit(f, backend="opencl")
        np.testing.assert_allclose(np.asarray(j(a)), np.asarray(f(a)), rtol=1e-5)
        assert ("work-group sums" in _notes(j, a)) == tree


@pytest.mark.parametrize("device_as", [{"is_cpu": False, "max_work_group_size": 16, "local_mem_size": 600}],
                         indirect=True)
def test_tile_size_follows_the_device_limits(device_as) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 45)).astype(np.float32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-4, atol=1e-4)
    assert "local-memory tiles 8x8" in _notes(f, a, b)


GPU_RECORDS = ["add", "multiply", "tanh", "exp", "sum_axis0", "max", "argmax", "softmax", "matmul",
               "transpose", "getitem_basic", "take", "concatenate", "conv_same", "where", "max_pool", "avg_pool"]


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
@pytest.mark.parametrize("name", GPU_RECORDS)
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_gpu_code_paths_match_eager(device_as, name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec)
    with np.errstate(all="ignore"):
        want = rec.fun(*args)
    got = fg.jit(rec.fun, backend="opencl")(*args)
    for g, w in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        assert_matches(np.asarray(g), np.asarray(w), _tol(rec, args), f"jit({name}, opencl, GPU paths)")


@pytest.mark.parametrize("device_as", [GPU_LIKE], indirect=True)
def test_gpu_code_paths_train_an_mlp_like_the_cpu(device_as) -> None:
    rng = np.random.default_rng(6)
    sizes = [20, 32, 32, 4]
    params = [{"w": (rng.standard_normal((m, n)) * 0.3).astype(np.float32), "b": np.zeros(n, np.float32)}
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((70, 20)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 70)]
    step = fg.jit(lambda p, a, b: sgd_step(p, a, b, lr=0.1), backend="opencl")
    p_ocl, l_ocl = step(params, x, y)
    p_cpu, l_cpu = fg.jit(lambda p, a, b: sgd_step(p, a, b, lr=0.1))(params, x, y)
    np.testing.assert_allclose(np.asarray(l_ocl), np.asarray(l_cpu), rtol=1e-4)
    for g, w in zip(tree_flatten(p_ocl)[0], tree_flatten(p_cpu)[0]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
    assert dtypes.float32 == np.asarray(l_ocl).dtype


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


FORMS = {"a @ b": (lambda a: a, lambda b: b), "a.T @ b": (lambda a: a.T, lambda b: b),
         "a @ b.T": (lambda a: a, lambda b: b.T)}


def _operands(rng: np.random.Generator, form: str, m: int, k: int, n: int, dtype: type) -> tuple:
    a = rng.standard_normal((k, m) if form == "a.T @ b" else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if form == "a @ b.T" else (k, n)).astype(dtype)
    return a, b


EPILOGUES = {
    "w - p": lambda p, w, c, q: w - p,
    "w + p": lambda p, w, c, q: w + p,
    "p - w": lambda p, w, c, q: p - w,
    "relu(p + c) and its mask": lambda p, w, c, q: (fnp.where(p + c > 0, p + c, 0.0), p + c > 0),
    "select by a stored mask": lambda p, w, c, q: fnp.where(q, p, 0.0) * 2.0,
    "max(p, w) * scalar": lambda p, w, c, q: fnp.maximum(p, w) * c[0],
}


@pytest.mark.parametrize("shape, form, dtype", [
    ((130, 70, 40), "a @ b", np.float32), ((130, 70, 40), "a.T @ b", np.float32),
    ((130, 70, 40), "a @ b.T", np.float32), ((67, 33, 53), "a.T @ b", np.float64),
    ((256, 100, 1024), "a @ b.T", np.float32)])
def test_elementwise_region_of_a_product_runs_in_the_product_kernels(shape: tuple[int, int, int], form: str,
                                                                      dtype: type) -> None:
    """The fused region consuming a product (a sum with ``w``, bias + ReLU writing the value
    and its mask, a select by a stored mask, a max and a scalar scale) runs on each block in
    every kernel of the product: the bulk, the overlapping (``a @ b``) or strided (``a.T @ b``)
    row panel, the padded column panel, the scalar corner, and the product computed
    transposed (``a @ b.T`` at 256 x 100 x 1024), with no kernel of its own. One program holds
    every case (one product per case, on its own ``b``)."""
    m, k, n = shape
    rng = np.random.default_rng(m * n)
    a, _ = _operands(rng, form, m, k, n, dtype)
    bs = [_operands(rng, form, m, k, n, dtype)[1] for _ in EPILOGUES]
    w = rng.standard_normal((m, n)).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    q = rng.standard_normal((m, n)) > 0
    fa, fb = FORMS[form]
    tol = 1e-4 if dtype == np.float32 else 1e-10

    def f(a, bs, w, c, q):
        return [epi(fa(a) @ fb(b), w, c, q) for epi, b in zip(EPILOGUES.values(), bs)]

    j = fg.jit(f, backend="opencl")
    got = j(a, bs, w, c, q)
    wide = [x.astype(np.float64) for x in (a, w, c)]
    want = f(wide[0], [b.astype(np.float64) for b in bs], wide[1], wide[2], q)
    for what, b, g_all, w_all in zip(EPILOGUES, bs, got, want):
        for g, v in zip(*(x if isinstance(x, tuple) else (x,) for x in (g_all, w_all))):
            g, v = np.asarray(g), np.asarray(v)
            if v.dtype == bool:
                near = np.abs(fa(wide[0]) @ fb(b.astype(np.float64)) + wide[2]) < 1e-3
                assert np.all((g == v) | near), what
            else:
                np.testing.assert_allclose(g, v, rtol=tol, atol=tol * np.abs(v).max(), err_msg=what)
    text = _notes(j, a, bs, w, c, q)
    assert text.count("epilogue") >= len(EPILOGUES)
    assert not _elementwise_kernels(text)


def _elementwise_kernels(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("kernel") and "[elementwise]" in line]


def _apart(f, args, flag: str) -> list[np.ndarray]:
    """``f``'s outputs on OpenCL with the lowering's epilogue switch ``flag`` off: the regions
    in kernels of their own."""
    from fungraph.backends.opencl import lowering

    setattr(lowering, flag, False)
    clear_caches()
    try:
        return [np.asarray(x) for x in tree_flatten(fg.jit(f, backend="opencl")(*args))[0]]
    finally:
        setattr(lowering, flag, True)
        clear_caches()


def test_epilogue_is_bitwise_the_separate_kernels() -> None:
    """The epilogue runs the region's operations in the same order as its own kernel would."""
    rng = np.random.default_rng(7)
    a, b = _operands(rng, "a @ b", 100, 50, 70, np.float32)
    c = rng.standard_normal(70).astype(np.float32)

    def f(a, b, c):
        h = a @ b + c
        return fnp.where(h > 0, h, 0.0) * 0.5 - c, fnp.maximum(h, -h) / 3.0

    fused = [np.asarray(x) for x in fg.jit(f, backend="opencl")(a, b, c)]
    apart = _apart(f, (a, b, c), "DOT_EPILOGUES")
    for x, y in zip(fused, apart):
        np.testing.assert_array_equal(x, y)


@st.composite
def _epilogue_programs(draw: st.DrawFn) -> tuple:
    """A product (optionally batched, any of the three forms, any edge sizes) followed by a
    random chain of epilogue operations on it, on full-shape, row, column and scalar inputs."""
    batch = draw(st.sampled_from([(), (2,)]))
    m = draw(st.integers(64, 100))
    k = draw(st.integers(1, 80))
    n = draw(st.sampled_from([1, 10, 16, 37]))
    form = draw(st.sampled_from(list(FORMS) if not batch else ["a @ b"]))
    ops = draw(st.lists(st.tuples(st.sampled_from(["add", "sub", "mul", "max", "min", "relu", "neg", "abs", "gt"]),
                                  st.sampled_from(["full", "row", "col", "scalar", "prev"])), min_size=1, max_size=4))
    return batch, m, k, n, form, ops


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_epilogue_programs(), st.integers(0, 2**16))
def test_random_epilogues_match_numpy(program: tuple, seed: int) -> None:
    batch, m, k, n, form, ops = program
    rng = np.random.default_rng(seed)
    a, b = _operands(rng, form, m, k, n, np.float32)
    if batch:
        a, b = np.stack([a, a * 0.5]), np.stack([b, -b])
    shape = (*batch, m, n)
    extra = {"full": rng.standard_normal(shape), "row": rng.standard_normal(n), "col": rng.standard_normal((m, 1)),
             "scalar": rng.standard_normal(())}
    extra = {key: v.astype(np.float32) for key, v in extra.items()}
    fa, fb = FORMS[form]

    def f(a, b, full, row, col, scalar, xp=fnp):
        p = xp.matmul(fa(a) if not batch else a, fb(b) if not batch else b)
        values = [p]
        args = {"full": full, "row": row, "col": col, "scalar": scalar}
        for op, src in ops:
            x = values[-1]
            y = values[-2] if src == "prev" and len(values) > 1 else args["full" if src == "prev" else src]
            if op == "relu":
                x = xp.where(x > 0, x, 0.0)
            elif op == "neg":
                x = -x
            elif op == "abs":
                x = xp.abs(x)
            elif op == "gt":
                x = xp.where(x > y, x, y * 0.5)
            else:
                x = {"add": xp.add, "sub": xp.subtract, "mul": xp.multiply, "max": xp.maximum,
                     "min": xp.minimum}[op](x, y)
            values.append(x)
        return values[-1]

    args = (a, b, extra["full"], extra["row"], extra["col"], extra["scalar"])
    got = np.asarray(fg.jit(f, backend="opencl")(*args))
    want = f(*(x.astype(np.float64) for x in args), xp=np)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale * max(1, k) ** 0.5)


def test_product_epilogue_writes_a_donated_addend_in_place() -> None:
    """An SGD update ``w - x.T @ g`` with ``w`` donated writes into ``w``'s buffer."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((100, 64)).astype(np.float32)
    x = rng.standard_normal((256, 100)).astype(np.float32)
    g = rng.standard_normal((256, 64)).astype(np.float32)
    step = fg.jit(lambda w, x, g: w - x.T @ g, backend="opencl", donate_argnums=0)
    wd = fg.jit(lambda v: v * 1.0, backend="opencl")(w)
    ptr = wd.buffer.int_ptr
    out = step(wd, x, g)
    np.testing.assert_allclose(np.asarray(out), w - x.T @ g, rtol=1e-4, atol=1e-3)
    assert out.buffer.int_ptr == ptr and wd.is_deleted()
    assert "epilogue sub" in _notes(step, out, x, g)


def test_a_scaled_product_is_scaled_in_its_epilogue() -> None:
    """``w - lr * (x.T @ g)``: on OpenCL the scale stays on the product and the epilogue applies
    it; the CPU backend's rule that moves it onto the smaller factor ``x`` would cost a kernel."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((200, 128)).astype(np.float32)
    x = rng.standard_normal((64, 200)).astype(np.float32)
    g = rng.standard_normal((64, 128)).astype(np.float32)
    step = fg.jit(lambda w, x, g: w - 0.125 * (x.T @ g), backend="opencl")
    np.testing.assert_allclose(np.asarray(step(w, x, g)), w - 0.125 * (x.T @ g), rtol=1e-4, atol=1e-3)
    text = _notes(step, w, x, g)
    kernels = [line for line in text.splitlines() if line.startswith("kernel")]
    assert all("dot_general" in line or "pack" in line for line in kernels), kernels
    assert "epilogue fma" in text
    cpu = fg.jit(lambda w, x, g: w - 0.125 * (x.T @ g)).lower(w, x, g).text
    assert "mul" in cpu.split("dot_general")[0]  # the CPU backend scales x first


def _reduce_epilogue_cases() -> dict[str, tuple]:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((96, 64)).astype(np.float32)   # 64 columns: 16-column sums on CPUs
    b = rng.standard_normal(64).astype(np.float32)
    v = rng.standard_normal(20000)                         # long: two passes
    s = rng.standard_normal((3, 37)).astype(np.float32)
    return {"b - lr * sum(x, 0)": (lambda x, b: b - 0.1 * x.sum(axis=0), (x, b)),
            "sum(x, 0) > b": (lambda x, b: x.sum(axis=0) > b, (x, b)),
            "two regions: sum(x, 0) > b, sum(x, 0) * b": (lambda x, b: (x.sum(axis=0) > b, x.sum(axis=0) * b), (x, b)),
            "two regions: log(s), x / s": (lambda x: (fnp.log(fnp.exp(x).sum(axis=1)), 2.0 / fnp.exp(x).sum(axis=1)),
                                           (x,)),
            "mean": (lambda v: fnp.mean(v), (v,)),
            "sqrt(sum(v * v)) + 1": (lambda v: fnp.sqrt(fnp.sum(v * v)) + 1.0, (v,)),
            "2 * mean over rows": (lambda x: x.mean(axis=1) * 2.0, (x,)),
            "argmax + 1": (lambda s: fnp.argmax(s, axis=1) + 1, (s,)),
            "exp(max(s, 0))": (lambda s: fnp.exp(s.max(axis=0)), (s,)),
            "mean over rows, keepdims": (lambda x: x.mean(axis=1, keepdims=True), (x,)),
            "sum(x, 0, keepdims) + row": (lambda x, b: x.sum(axis=0, keepdims=True) * 0.5 + b[None], (x, b))}




@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@pytest.mark.parametrize("case", list(_reduce_epilogue_cases()))
def test_reduction_computes_the_region_that_consumes_it(device_as, case: str) -> None:
    """A reduction whose result only feeds one elementwise region of its shape, or of its
    shape with ``keepdims`` (a mean's division, a bias update), evaluates that region where it
    stores: no elementwise kernel is left, and the values are bitwise those of the separate
    kernels."""
    f, args = _reduce_epilogue_cases()[case]
    j = fg.jit(f, backend="opencl")
    got = [np.asarray(x) for x in tree_flatten(j(*args))[0]]
    want = tree_flatten(f(*args))[0]
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, np.asarray(w_), rtol=2e-5, atol=1e-4)
    text = _notes(j, *args)
    assert "epilogue" in text and not _elementwise_kernels(text), text
    for g_, a_ in zip(got, _apart(f, args, "REDUCE_EPILOGUES")):
        np.testing.assert_array_equal(g_, a_)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@pytest.mark.parametrize("shape", [(96, 64), (50, 7)])
def test_reduction_epilogue_writes_a_donated_bias_in_place(device_as, shape) -> None:
    """A bias update ``b - lr * sum(g, 0)`` with ``b`` donated: the reduction's kernel reads
    each element of ``b`` only where it stores it, so the result takes ``b``'s buffer."""
    rng = np.random.default_rng(11)
    g = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    step = fg.jit(lambda b, g: b - 0.1 * g.sum(axis=0), backend="opencl", donate_argnums=0)
    bd = fg.jit(lambda v: v * 1.0, backend="opencl")(b)
    ptr = bd.buffer.int_ptr
    out = step(bd, g)
    np.testing.assert_allclose(np.asarray(out), b - 0.1 * g.sum(axis=0), rtol=1e-5, atol=1e-5)
    assert out.buffer.int_ptr == ptr and bd.is_deleted()
    assert "epilogue" in _notes(step, out, g)


def test_training_step_reductions_absorb_the_loss_and_bias_updates() -> None:
    """An MLP's SGD step: the loss's softmax sums, its mean and the bias updates run in their
    reductions' kernels (a sum feeding both ``log`` and a division, a reshape taken before
    the sum included), with parameters and loss bitwise those of separate kernels."""
    from fungraph.testing.models import mlp_params

    rng = np.random.default_rng(14)
    params = mlp_params([20, 32, 32, 10], seed=14)
    x = rng.standard_normal((24, 20)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 24)]
    step = fg.jit(sgd_step, backend="opencl")
    got = [np.asarray(v) for v in tree_flatten(step(params, x, y))[0]]
    for g_, a_ in zip(got, _apart(sgd_step, (params, x, y), "REDUCE_EPILOGUES")):
        np.testing.assert_array_equal(g_, a_)
    text = _notes(step, params, x, y)
    assert "(2 outputs)" in text and text.count("epilogue") >= 5, text


def test_sixteen_column_sum_leaves_a_region_it_cannot_vectorise_apart() -> None:
    """``exp(sum(x, 0))``: the 16-column sum evaluates epilogues on vector lanes, which take no
    ``exp``, so the sum keeps its fast form and ``exp`` its own kernel."""
    x = np.random.default_rng(13).standard_normal((96, 64)).astype(np.float32) * 0.1
    j = fg.jit(lambda x: fnp.exp(x.sum(axis=0)), backend="opencl")
    np.testing.assert_allclose(np.asarray(j(x)), np.exp(x.sum(axis=0)), rtol=1e-5)
    text = _notes(j, x)
    assert "16 columns per work-item" in text and "epilogue" not in text and _elementwise_kernels(text)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
def test_reduction_epilogue_needs_each_element_where_it_is_stored(device_as) -> None:
    """``rev(2 * sum(x, 0))`` and the like read the result at other elements than they store
    (a random program found ``rev`` of a ``keepdims`` sum computed wrongly): the result is
    stored and the region keeps its own kernel."""
    rng = np.random.default_rng(16)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    z = rng.standard_normal((3, 4, 6)).astype(np.float32)
    cases = [(lambda x: (x.sum(axis=0) * 2.0)[::-1], x), (lambda x: x.sum(axis=0, keepdims=True)[:, ::-1], x),
             (lambda z: (z.sum(axis=1) + 1.0).T * 2.0, z), (lambda x: fnp.maximum(x.max(axis=1), 0.0)[1:4] * 3.0, x)]
    for f, a in cases:
        j = fg.jit(f, backend="opencl")
        np.testing.assert_allclose(np.asarray(j(a)), np.asarray(f(a)), rtol=1e-5, atol=1e-5)
        assert "epilogue" not in _notes(j, a)


@pytest.mark.parametrize("device_as", [{}, GPU_LIKE], indirect=True, ids=["as-is", "gpu-like"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs(max_eqns=14))
def test_random_programs_with_reduction_epilogues_match_the_cpu(device_as, prog: Program) -> None:
    """Random programs (``keepdims`` sums, means and maxima among elementwise, shape and
    matmul operations) on OpenCL, with reduction epilogues wherever they apply, against the
    CPU backend."""
    got = fg.jit(prog.fun, backend="opencl")(*prog.args)
    want = fg.jit(prog.fun)(*prog.args)
    for g_, w_ in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=2e-4, atol=2e-4, err_msg=repr(prog))


def test_reduction_epilogue_waits_for_values_computed_later() -> None:
    """``sum(x, 0) + sum(2x, 0)``: the first sum cannot store the add (the second sum does not
    exist yet), the second can."""
    x = np.random.default_rng(10).standard_normal((40, 24)).astype(np.float32)
    f = lambda x: x.sum(axis=0) + (x * 2.0).sum(axis=0)  # noqa: E731
    j = fg.jit(f, backend="opencl")
    np.testing.assert_allclose(np.asarray(j(x)), x.sum(axis=0) * 3.0, rtol=1e-5, atol=1e-5)
    reductions = [line for line in _notes(j, x).splitlines() if line.startswith("kernel") and "reduce" in line]
    assert len(reductions) == 2 and "epilogue" not in reductions[0] and "epilogue add" in reductions[1]


def test_donated_operand_of_a_product_is_not_overwritten_by_its_epilogue() -> None:
    """``w - w @ s`` with ``w`` donated: other work-items still read ``w`` as an operand, so the
    result goes to a fresh buffer."""
    rng = np.random.default_rng(6)
    w = rng.standard_normal((96, 96)).astype(np.float32)
    s = rng.standard_normal((96, 96)).astype(np.float32)
    step = fg.jit(lambda w, s: w - w @ s, backend="opencl", donate_argnums=0)
    wd = fg.jit(lambda v: v * 1.0, backend="opencl")(w)
    ptr = wd.buffer.int_ptr
    out = step(wd, s)
    np.testing.assert_allclose(np.asarray(out), w - w @ s, rtol=1e-4, atol=1e-3)
    assert out.buffer.int_ptr != ptr
    assert "epilogue sub" in _notes(step, out, s)


def test_product_epilogue_is_skipped_when_it_would_be_wrong() -> None:
    """No epilogue when the product has a use outside the region (a reduction), or when the
    region computes what an epilogue does not (``exp``); the values stay right."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((96, 96)).astype(np.float32)
    s = rng.standard_normal((96, 96)).astype(np.float32)
    cases = [lambda w, s: (w - s @ s, (s @ s).sum(axis=0)), lambda w, s: fnp.exp(s @ w * 0.01) + w]
    for f in cases:
        j = fg.jit(f, backend="opencl")
        got, want = j(w, s), f(w, s)
        for gv, wv in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(np.asarray(gv), wv, rtol=1e-4, atol=1e-3)
        text = _notes(j, w, s)
        assert "epilogue" not in text and _elementwise_kernels(text)


def test_product_epilogue_leaves_a_region_with_transcendentals_alone() -> None:
    """``tanh(w)`` joins the region of ``tanh(w) - p``; an epilogue does not evaluate ``tanh``,
    so the region stays a kernel of its own."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((100, 64)).astype(np.float32)
    a = rng.standard_normal((100, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)

    def f(w, a, b):
        x = fnp.tanh(w)
        p = a @ b
        return x - p, x * 2.0

    j = fg.jit(f, backend="opencl")
    for g, want in zip(j(w, a, b), f(w, a, b)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert "epilogue" not in _notes(j, w, a, b)


@pytest.mark.parametrize("k, lines", [(64, 8), (100, 4), (70, 2), (33, 1)])
def test_panel_copy_moves_several_lines_of_k_per_work_item(k: int, lines: int, pack_kernel: None) -> None:
    """The panel copies of a row-major ``rhs`` and of a transposed ``lhs`` (6-row panels) move
    the largest of 8/4/2/1 lines of ``k`` dividing ``k`` per work-item."""
    rng = np.random.default_rng(k)
    a = rng.integers(-4, 4, (70, k)).astype(np.int32)
    b = rng.integers(-4, 4, (k, 40)).astype(np.int32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(a, b)), a @ b)
    assert (f"pack 16-wide panels, {lines} lines per work-item" in _notes(f, a, b)) == (lines > 1)
    t = fg.jit(lambda x, y: x.T @ y, backend="opencl")
    at = a.T.copy()
    np.testing.assert_array_equal(np.asarray(t(at, b)), a @ b)
    assert (f"pack 6-wide panels, {lines} lines per work-item" in _notes(t, at, b)) == (lines > 1)


@pytest.mark.parametrize(("m", "k", "n"), [(70, 512, 40), (71, 37, 35), (130, 100, 48)])
def test_large_panel_copies_stream_their_stores(m: int, k: int, n: int, pack_kernel: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Panels of at least ``PACK_STREAM_MIN_BYTES`` (here every panel) are stored with non-temporal
    stores where a line starts 64-byte aligned (odd ``k`` puts some lines off that boundary:
    plain stores there): ``rhs`` row-major and transposed (16 x 16 blocks), and ``lhs`` rows
    2 KiB apart (16 x 6 blocks); the products are bitwise those of plainly stored panels."""
    from fungraph.backends.opencl.kernels import copies

    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    products = (lambda x, y: x @ y, lambda x, y: x @ y.T)
    args = ((a, b), (a, b.T.copy()))
    monkeypatch.setattr(copies, "PACK_STREAM_MIN_BYTES", 0)
    clear_caches()
    streamed = [fg.jit(p, backend="opencl") for p in products]
    got = [np.asarray(f(*xs)) for f, xs in zip(streamed, args)]
    notes = [_notes(f, *xs) for f, xs in zip(streamed, args)]
    assert re.search(r"pack 16-wide panels(, \d lines per work-item)?, non-temporal stores", notes[0])
    assert "16 x 16 blocks transposed in registers, non-temporal stores" in notes[1]
    assert ("16 x 6 blocks transposed in registers, non-temporal stores" in notes[0]) == (k == 512)
    monkeypatch.setattr(copies, "PACK_STREAM", False)
    clear_caches()
    for p, xs, g in zip(products, args, got):
        plain = fg.jit(p, backend="opencl")
        np.testing.assert_array_equal(g, np.asarray(plain(*xs)))
        assert "non-temporal" not in _notes(plain, *xs)
        np.testing.assert_allclose(g, a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    clear_caches()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(("m", "k", "n"), [(70, 1, 40), (66, 3, 16), (71, 37, 35), (64, 512, 33)])
def test_unrolled_products_match_the_plain_loop(m: int, k: int, n: int, fused: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The packed kernel's ``k`` loop unrolled by ``DOT_UNROLL`` (``k`` below it or not a
    multiple of it included) sums in the same order as the plain loop: bitwise equal; so does
    the fused kernel's panel copy unrolled by ``COPY_UNROLL``. Products below
    ``DOT_UNROLL_MIN_WORK`` are not unrolled."""
    from fungraph.backends.opencl.kernels import matmul

    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    monkeypatch.setattr(matmul, "DOT_FUSED_PACK", fused)
    monkeypatch.setattr(matmul, "DOT_UNROLL_MIN_WORK", 0)
    # a panel over half the device's local memory (k = 512 on a 48 KiB GPU) takes a pack kernel
    copies_in_kernel = matmul.fused_panels((1, m, k, n), np.dtype(np.float32), _device().info)
    got = {}
    for unroll in (1, 4):
        monkeypatch.setattr(matmul, "DOT_UNROLL", unroll)
        monkeypatch.setattr(matmul, "COPY_UNROLL", 2 * unroll if unroll > 1 else 1)
        clear_caches()
        f = fg.jit(lambda x, y: x @ y, backend="opencl")
        got[unroll] = np.asarray(f(a, b))
        source = f.lower(a, b).compiled.executable.source
        assert ("#pragma unroll 4" in source) == (unroll == 4)
        assert ("#pragma unroll 8" in source) == (unroll == 4 and copies_in_kernel)
    np.testing.assert_array_equal(got[1], got[4])
    np.testing.assert_allclose(got[4], a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    monkeypatch.setattr(matmul, "DOT_UNROLL_MIN_WORK", m * k * n + 1)
    clear_caches()
    small = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_array_equal(np.asarray(small(a, b)), got[1])
    assert "#pragma unroll" not in small.lower(a, b).compiled.executable.source
    clear_caches()


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
    text = _notes(streamed, x)
    assert f"non-temporal stores ({n - n % 8} elements)" in text
    assert (f"the last {n % 8} elements" in text) == (n % 8 != 0)
    monkeypatch.setattr(elementwise, "STREAM_STORES", False)
    clear_caches()
    plain = fg.jit(f, backend="opencl")
    np.testing.assert_array_equal(got, np.asarray(plain(x)))
    assert "non-temporal" not in _notes(plain, x)
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
    assert "non-temporal stores (72 elements)" in _notes(f, x, y)
    scaled = fg.jit(lambda x, a: x * a + 1.0, backend="opencl")   # a scalar input streams too
    np.testing.assert_array_equal(np.asarray(scaled(x, np.float32(3))), x * 3 + 1)
    assert "non-temporal stores (1000 elements)" in _notes(scaled, x, np.float32(3))
    b = fg.jit(lambda x, r: x * r, backend="opencl")
    m = np.ones((64, 32), np.float32)
    r = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(b(m, r)), m * r)
    assert "non-temporal" not in _notes(b, m, r)
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
