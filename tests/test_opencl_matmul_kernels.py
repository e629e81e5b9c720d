"""OpenCL matrix products on the CPU kernels: the packed 6x16 matmul and its row and column
edges, panel packing (fused into the product or a separate pack kernel), work-groups over
row panels, transposed operands, narrow products, multi-line panel copies and unrolled loops.

Without an OpenCL platform these tests skip, except under ``CI=true`` where a missing
driver is a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.jit import clear_caches
from tests.helpers import kernel_notes, opencl_device, opencl_device_presented_as

# the CPU kernel choices are checked on every driver
pytestmark = pytest.mark.usefixtures("require_opencl", "cpu_code_paths")


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
    text = kernel_notes(f, a, b)
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
    text = kernel_notes(t, a.T.copy(), b)
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
    assert how + "16 x 16 blocks transposed in registers" in kernel_notes(g, a, b.T.copy())


def _productkernel_notes(units: int, per_unit: int, monkeypatch: pytest.MonkeyPatch) -> str:
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
        return kernel_notes(f, a, b)


@pytest.mark.parametrize(("units", "run"), [(2, 43), (4, 22), (8, 11), (16, 8)])
def test_fused_products_share_row_panels_while_every_core_has_several(
        units: int, run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """256 rows are 43 row panels (42 and one overlapping), 4 x 16 columns are 4 column
    panels: one work-item per column panel computing all 43 row panels from its local copy
    leaves 4 work-groups, enough for 2 compute units at two per unit; more units split the
    row panels into runs, never shorter than 8 (a copy costs about a few panels' products)."""
    text = _productkernel_notes(units, 2, monkeypatch)
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
        text = kernel_notes(f, a, b)
        assert "pack 16-wide panels" in text and "local memory" not in text
    clear_caches()
    with opencl_device_presented_as(local_mem_size=local + 4):
        monkeypatch.setattr(matmul, "FUSED_MAX_WORK", 64 * 300 * 32)
        g = fg.jit(lambda x, y: x @ y, backend="opencl")
        np.testing.assert_allclose(np.asarray(g(a, b)), a @ b, rtol=1e-4, atol=1e-4)
        assert "rhs panels copied to local memory" in kernel_notes(g, a, b)
    clear_caches()


@pytest.mark.parametrize(("units", "group"), [(2, 22), (8, 22), (16, 11), (64, 3)])
def test_packed_work_groups_take_many_row_panels_while_every_core_has_several(
        units: int, group: int, monkeypatch: pytest.MonkeyPatch, pack_kernel: None) -> None:
    """With the pack kernel: 256 rows are 43 row panels (42 and one overlapping), 4 x 16
    columns are 4 column panels. Work-groups take at most 34 row panels, so 2 per column
    panel (22 and 21): 8 work-groups, enough for up to 8 compute units at one per unit; 16
    units need 4 work-groups per column panel (11 row panels), 64 units 16 (3 each, 15 of
    them used)."""
    text = _productkernel_notes(units, 1, monkeypatch)
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
    text = kernel_notes(f, a, b)
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
    assert (f"the last {rest} rows from a panel at row {m - 6}" in kernel_notes(f, a, b)) == (rest > 0)


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
    text = kernel_notes(f, g, w)
    assert "transposed product out.T = rhs.T @ lhs.T" in text
    if fused_pack:
        assert "rhs panels copied to local memory (16 x 16 blocks transposed in registers)" in text
        assert "lhs rows read in place" in text
        assert f"launches ({m // 16}, " in text     # a work-item per 16 rows of g (columns of g.T)
    else:
        assert "rhs packed, lhs rows read in place" in text
    short = fg.jit(lambda x, y: x @ y.T, backend="opencl")        # k = 10: w packed, out stored by rows
    np.testing.assert_array_equal(np.asarray(short(g[:, :10], w[:, :10])), g[:, :10] @ w[:, :10].T)
    assert "transposed product" not in kernel_notes(short, g[:, :10], w[:, :10])
    gb = rng.integers(-4, 4, (2, m, k)).astype(dtype)
    wb = rng.integers(-4, 4, (2, n, k)).astype(dtype)
    fb = fg.jit(lambda x, y: fnp.einsum("bik,bjk->bij", x, y), backend="opencl")
    np.testing.assert_array_equal(np.asarray(fb(gb, wb)), np.einsum("bik,bjk->bij", gb, wb))
    assert "transposed product" in kernel_notes(fb, gb, wb)


def test_narrow_product_of_a_transposed_operand_needs_no_copy() -> None:
    rng = np.random.default_rng(7)
    h = rng.standard_normal((256, 300)).astype(np.float32)
    g = rng.standard_normal((256, 10)).astype(np.float32)
    f = fg.jit(lambda a, b: a.T @ b, backend="opencl")
    np.testing.assert_allclose(np.asarray(f(h, g)), h.T @ g, rtol=1e-4, atol=1e-4)
    text = kernel_notes(f, h, g)
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
    assert ("last" in kernel_notes(f, h, g)) == (m % 8 != 0)
    w = fg.jit(lambda a, b: a @ b, backend="opencl")
    np.testing.assert_array_equal(np.asarray(w(h.T.copy(), g)), h.T @ g)
    text = kernel_notes(w, h.T.copy(), g)
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


@pytest.mark.parametrize("k, lines", [(64, 8), (100, 4), (70, 2), (33, 1)])
def test_panel_copy_moves_several_lines_of_k_per_work_item(k: int, lines: int, pack_kernel: None) -> None:
    """The panel copies of a row-major ``rhs`` and of a transposed ``lhs`` (6-row panels) move
    the largest of 8/4/2/1 lines of ``k`` dividing ``k`` per work-item."""
    rng = np.random.default_rng(k)
    a = rng.integers(-4, 4, (70, k)).astype(np.int32)
    b = rng.integers(-4, 4, (k, 40)).astype(np.int32)
    f = fg.jit(lambda x, y: x @ y, backend="opencl")
    np.testing.assert_array_equal(np.asarray(f(a, b)), a @ b)
    assert (f"pack 16-wide panels, {lines} lines per work-item" in kernel_notes(f, a, b)) == (lines > 1)
    t = fg.jit(lambda x, y: x.T @ y, backend="opencl")
    at = a.T.copy()
    np.testing.assert_array_equal(np.asarray(t(at, b)), a @ b)
    assert (f"pack 6-wide panels, {lines} lines per work-item" in kernel_notes(t, at, b)) == (lines > 1)


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
    notes = [kernel_notes(f, *xs) for f, xs in zip(streamed, args)]
    assert re.search(r"pack 16-wide panels(, \d lines per work-item)?, non-temporal stores", notes[0])
    assert "16 x 16 blocks transposed in registers, non-temporal stores" in notes[1]
    assert ("16 x 6 blocks transposed in registers, non-temporal stores" in notes[0]) == (k == 512)
    monkeypatch.setattr(copies, "PACK_STREAM", False)
    clear_caches()
    for p, xs, g in zip(products, args, got):
        plain = fg.jit(p, backend="opencl")
        np.testing.assert_array_equal(g, np.asarray(plain(*xs)))
        assert "non-temporal" not in kernel_notes(plain, *xs)
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
    copies_in_kernel = matmul.fused_panels((1, m, k, n), np.dtype(np.float32), opencl_device().info)
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
