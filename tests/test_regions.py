"""Fusion regions: the one pass that writes them as ``fusion`` equations under a backend's
capability, the verifier's check of them, their expansion back in place, the CPU engine's
chunked lowering, and the engine's recycling of dropped output buffers."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.backends.cpu_regions as cpu_regions
import fungraph.numpy as fnp
from fungraph.backends import backend_factory
from fungraph.backends.cpu import ENGINE_STATS, CpuExecutable
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.memory import plan_memory, verify_plan
from fungraph.interpreters.optimize import optimize
from fungraph.interpreters.regions import (
    READ_WINDOW,
    FusionCapability,
    contract,
    expand_regions,
    find_regions,
    fuse_regions,
    fusion_p,
    plan_regions,
)
from fungraph.interpreters.simplify import simplify
from fungraph.ir import Eqn, Graph, Params, ShapedArray, Var, VerificationError
from fungraph.jit import backend_passes, clear_caches, compile_graph
from fungraph.testing import Program, programs


@pytest.fixture
def tiny_chunks() -> Iterator[None]:
    """Fuse every region and split it into chunks of a few rows, so small test arrays
    exercise the numpy engine's chunked path (whole chunks, a tail chunk, broadcast inputs);
    the native engine, which runs regions otherwise, is off (tests/test_native.py covers it)."""
    factory = backend_factory("cpu")
    old = factory.fusion, cpu_regions.CHUNK_BYTES, fg.config.fungraph_native_cpu
    factory.fusion, cpu_regions.CHUNK_BYTES = replace(factory.fusion, min_bytes=0), 24
    fg.config.update("fungraph_native_cpu", False)
    clear_caches()
    cpu_regions._chunk_body.cache_clear()
    yield
    factory.fusion, cpu_regions.CHUNK_BYTES = old[:2]
    fg.config.update("fungraph_native_cpu", old[2])
    clear_caches()
    cpu_regions._chunk_body.cache_clear()


def _fusions(g: fg.Graph) -> list[fg.Eqn]:
    return [e for e in g.eqns if e.primitive.name == "fusion"]


@settings(max_examples=60)
@given(prog=programs())
def test_regions_preserve_meaning_and_validity(prog: Program) -> None:
    g, _ = optimize(prog.graph)
    fused = fuse_regions(g)
    fused.verify()
    assert fg.parse(str(fused)) == fused
    covered = sum(len(e.params["call"].eqns) - 1 for e in _fusions(fused))
    assert len(fused.eqns) == len(g.eqns) - covered
    for e in _fusions(fused):
        body = e.params["call"]
        assert len(body.eqns) >= 2
        assert all(b.primitive.elementwise for b in body.eqns)
        assert {o.aval.shape for b in body.eqns for o in b.outputs} == {body.outvars[0].aval.shape}
    for a, b in zip(fg.eval_graph(fused, *prog.args), fg.eval_graph(g, *prog.args)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs())
def test_chunked_regions_equal_unfused_execution_bit_for_bit(tiny_chunks: None, prog: Program) -> None:
    c = compile_graph(prog.graph)
    verify_plan(c.graph, c.plan)
    want = fg.eval_graph(c.staged, *prog.args)
    for a, b in zip(c.executable.run(list(prog.args)), want):
        np.testing.assert_array_equal(a, b)


def test_a_value_that_depends_on_the_region_from_outside_starts_a_new_region() -> None:
    def f(x, y):
        a = x * 2.0 + y
        total = fnp.sum(a)
        return fnp.tanh(a) * total - 1.0, a

    g = fg.make_graph(f)(np.ones((4, 3)), np.ones((4, 3)))
    assert [[g.eqns[i].primitive.name for i in r] for r in find_regions(g)] == [["mul", "add", "tanh"],
                                                                                ["mul", "sub"]]
    fused = fuse_regions(g)
    assert [e.primitive.name for e in fused.eqns] == ["fusion", "reduce_sum", "fusion"]
    x, y = np.random.default_rng(0).standard_normal((2, 4, 3))
    for a, b in zip(fg.eval_graph(fused, x, y), f(x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_region_read_long_before_does_not_take_in_a_late_reader() -> None:
    """``1 - y * y`` far below the region computing ``y`` (a backward pass reading a saved
    value) starts its own region: joining would run it, and keep its result alive, early."""
    def f(x, w):
        y = fnp.tanh(x * 2.0)
        h = y @ w
        for _ in range(READ_WINDOW):
            h = h @ w
        return (1.0 - y * y) * h

    g = fg.make_graph(f)(np.ones((4, 4)), np.ones((4, 4)))
    assert [[g.eqns[i].primitive.name for i in r] for r in find_regions(g)] == [["mul", "tanh"],
                                                                                ["mul", "sub", "mul"]]


def test_small_regions_are_left_alone_on_cpu() -> None:
    tiny = fg.jit(lambda x: x * 2.0 + 1.0).lower(np.ones(10, np.float32))
    assert not _fusions(tiny.graph)
    big = fg.jit(lambda x: fnp.tanh(x * 2.0 + 1.0)).lower(np.ones(1 << 20, np.float32))
    assert len(_fusions(big.graph)) == 1 and "fusion" in big.text
    assert [s.name for s in big.stats][-1] == "fuse_regions"


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_chunked_region_with_broadcast_inputs_and_a_tail(tiny_chunks: None, rows: int) -> None:
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 5))
    col, row, s = rng.standard_normal((rows, 1)), rng.standard_normal(5), np.float64(0.5)

    def f(x, col, row, s):
        y = fnp.sin(x * col + row) * s
        return fnp.maximum(y, 0.1) - x, y > 0

    got = fg.jit(f)(x, col, row, s)
    want = f(x, col, row, s)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    body = _fusions(fg.jit(f).lower(x, col, row, s).graph)[0].params["call"]
    axis = 0 if rows > 1 else 1  # one row: chunks split the columns
    row_bytes = 8 * (5 if axis == 0 else 1)
    assert cpu_regions.chunk_axis(body) == axis
    assert cpu_regions.chunk_rows(body) == max(1, min(x.shape[axis], 24 // row_bytes))


def test_a_batch_of_one_is_chunked_along_its_channels(tiny_chunks: None) -> None:
    """An image batch of one (``[1, C, H, W]``, MobileNetV2's depthwise taps): chunks split the
    channels, slicing a per-channel scale ``[C, 1, 1]`` with them and broadcasting a scalar."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 1, 6, 4, 3))
    scale = rng.standard_normal((6, 1, 1))

    def f(x, y, scale):
        return fnp.minimum(fnp.maximum(x * scale + y * 0.5, 0.0), 6.0)

    np.testing.assert_array_equal(fg.jit(f)(x, y, scale), f(x, y, scale))
    body = _fusions(fg.jit(f).lower(x, y, scale).graph)[0].params["call"]
    assert cpu_regions.chunk_axis(body) == 1 and cpu_regions.chunk_rows(body) == 1
    assert cpu_regions._split(body) == tuple(0 if v.aval.shape == (6, 1, 1) else 1 if v.aval.ndim == 4 else None
                                             for v in body.invars)


def test_regions_compose_with_grad_and_vmap(tiny_chunks: None) -> None:
    def f(x, w):
        return fnp.sum(fnp.tanh(x * w + 1.0) * x)

    x, w = np.random.default_rng(1).standard_normal((2, 6, 3))
    g = fg.make_graph(f)(x, w)
    fused = fuse_regions(optimize(g)[0])
    assert _fusions(fused)

    def via_fused(x, w):
        return fg.eval_graph(fused, x, w)[0]

    np.testing.assert_allclose(fg.grad(via_fused, argnums=(0, 1))(x, w), fg.grad(f, argnums=(0, 1))(x, w),
                               rtol=1e-12)
    xs, ws = np.random.default_rng(2).standard_normal((2, 4, 6, 3))
    np.testing.assert_allclose(fg.vmap(via_fused)(xs, ws), [f(a, b) for a, b in zip(xs, ws)], rtol=1e-12)
    np.testing.assert_allclose(fg.jit(fg.grad(f))(x, w), fg.grad(f)(x, w), rtol=1e-12)


def test_backend_passes_add_regions_only_where_the_backend_asks() -> None:
    assert [n for n, _ in backend_passes(backend_factory("cpu"))][-1] == "fuse_regions"
    assert "fuse_regions" not in [n for n, _ in backend_passes(object())]
    # OpenCL's engine runs the same pass itself, on the program order it settles last
    assert backend_factory("opencl").fusion.planned_by == "engine"
    assert "fuse_regions" not in [n for n, _ in backend_passes(backend_factory("opencl"))]
    simplify_on = {name: dict(backend_passes(backend_factory(name)))["simplify"] for name in ("cpu", "opencl")}
    assert simplify_on["cpu"] is simplify and simplify_on["opencl"].keywords == {"scale_factors": False}


@given(n=st.integers(1, 40))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_region_plan_includes_its_chunk_scratch(tiny_chunks: None, n: int) -> None:
    g = fuse_regions(fg.make_graph(lambda x: fnp.exp(fnp.sin(x) * 2.0) + x)(np.ones((n, 3))))
    plan = plan_memory(g, scratch_bytes=backend_factory("cpu").scratch_bytes)
    verify_plan(g, plan)
    assert list(plan.scratch) == [0] and plan.scratch[0].size >= 64


def test_dropped_outputs_are_recycled_and_held_outputs_never_are() -> None:
    f = fg.jit(lambda x: x * 2.0 + 1.0)
    x = np.arange(1 << 18, dtype=np.float64)
    held = f(x)
    second = f(x)
    assert not np.shares_memory(held, second)
    view = second[::3]
    del second
    third = f(x)
    assert not np.shares_memory(third, view) and not np.shares_memory(third, held)
    del third, view
    gc.collect()
    f(x)
    before = ENGINE_STATS["output_allocations"]
    for _ in range(5):
        out = f(x)
        np.testing.assert_array_equal(out, x * 2 + 1)
        del out
    assert ENGINE_STATS["output_allocations"] == before
    np.testing.assert_array_equal(held, x * 2 + 1)


def test_small_outputs_are_always_fresh() -> None:
    g = fg.make_graph(lambda x: x * 2.0)(np.ones(4))
    exe = CpuExecutable(g, plan_memory(g))
    before = ENGINE_STATS["output_allocations"]
    exe.run([np.ones(4)])
    exe.run([np.ones(4)])
    assert ENGINE_STATS["output_allocations"] == before + 2


def test_a_region_output_takes_over_an_input_only_when_no_later_body_eqn_reads_it() -> None:
    from fungraph.interpreters.memory import inplace_inputs

    x = np.ones((8, 3))
    safe = fuse_regions(optimize(fg.make_graph(lambda x: fnp.tanh(fnp.sin(x) * 2.0))(x))[0])
    def two_outputs(x):
        y = fnp.sin(x) * 2.0
        return y, y + x

    unsafe = fuse_regions(fg.make_graph(two_outputs)(x))
    (e_safe,) = _fusions(safe)
    assert inplace_inputs(e_safe, 0) == (0,)
    (e_unsafe,) = _fusions(unsafe)
    assert len(e_unsafe.outputs) == 2
    assert inplace_inputs(e_unsafe, 0) == () and inplace_inputs(e_unsafe, 1) == (0,)

    g = fg.make_graph(lambda x: fnp.sum(fnp.tanh(fnp.exp(x * 2.0) + 1.0)))(x)
    fused = fuse_regions(g)
    plan = plan_memory(fused, scratch_bytes=backend_factory("cpu").scratch_bytes)
    verify_plan(fused, plan)
    kinds = [plan.placements[o].kind for e in _fusions(fused) for o in e.outputs]
    assert kinds == ["buffer"]  # the input is a pinned graph input: never overwritten


def _reduce_chain(x, b):
    h = fnp.exp(x - b) * 2.0
    return fnp.sum(h * h, axis=1), fnp.tanh(h)


#: A search-policy capability without any engine behind it: elementwise members, sums as roots.
SEARCH_SUMS = FusionCapability(policy="search", roots=frozenset({"reduce_sum"}))


def test_the_capability_decides_what_a_region_may_hold() -> None:
    """One pass, two policies: elementwise chains never take the sum; the cost-model search
    with sums as roots fuses the square into the sum's region and the rest into another.
    Both fused graphs verify, print their regions and compute what the graph computes."""
    x = np.random.default_rng(2).standard_normal((64, 33))
    b = np.linspace(0, 1, 33)
    g = optimize(fg.make_graph(_reduce_chain)(x, b))[0]
    chains = fuse_regions(g)
    searched = fuse_regions(g, SEARCH_SUMS)
    bodies = {name: [[q.primitive.name for q in e.params["call"].eqns] for e in _fusions(f)]
              for name, f in (("chains", chains), ("search", searched))}
    assert all("reduce_sum" not in body for body in bodies["chains"])
    assert ["mul", "reduce_sum"] in bodies["search"] and len(bodies["search"]) == 2
    for fused in (chains, searched):
        fused.verify()
        assert str(fused).count("fusion[call={ lambda") == len(_fusions(fused))
        for got, want in zip(eval_graph(fused, x, b), eval_graph(g, x, b)):
            np.testing.assert_array_equal(got, want)


def test_expanding_regions_puts_their_bodies_back_where_they_ran() -> None:
    x = np.random.default_rng(3).standard_normal((64, 33))
    b = np.linspace(0, 1, 33)
    g = optimize(fg.make_graph(_reduce_chain)(x, b))[0]
    regions, plan = plan_regions(g, SEARCH_SUMS)
    assert plan is not None and [sorted(r.members) for r in plan.regions] == [m for m, _ in regions]
    fused = contract(g, regions)
    flat, spans = expand_regions(fused)
    flat.verify()
    assert len(flat.eqns) == len(g.eqns) and not _fusions(flat)
    multi = [(m, o) for m, o in regions if len(m) > 1]
    assert [[flat.eqns[i].primitive.name for i in m] for m, _ in spans] == \
        [[g.eqns[i].primitive.name for i in m] for m, _ in multi]
    assert [list(o) for _, o in spans] == [o for _, o in multi]
    for got, want in zip(eval_graph(flat, x, b), eval_graph(g, x, b)):
        np.testing.assert_array_equal(got, want)
    assert expand_regions(g) == (g, [])


def test_the_verifier_checks_a_region_against_its_body() -> None:
    """A ``fusion`` equation whose operands do not match its body's inputs, or whose body
    holds constants, fails verification naming the region."""
    x = Var(ShapedArray((3,), np.dtype(np.float32)))
    body = fuse_regions(fg.make_graph(lambda x: fnp.tanh(x * 2.0) + 1.0)(np.ones(3, np.float32)))
    (region,) = _fusions(body)
    good = region.params["call"]
    wrong = Var(ShapedArray((4,), np.dtype(np.float32)))
    bad = Eqn(fusion_p, (wrong,), tuple(Var(o.aval) for o in region.outputs), Params({"call": good}))
    with pytest.raises(VerificationError, match="do not match the region's inputs"):
        Graph((wrong,), (), (), (bad,), bad.outputs).verify()
    c = Var(ShapedArray((), np.dtype(np.float32)))
    closed = Graph(good.invars, (c,), (np.float32(1.0),), good.eqns, good.outvars)
    with_const = Eqn(fusion_p, (x,), tuple(Var(o.aval) for o in region.outputs), Params({"call": closed}))
    with pytest.raises(VerificationError, match="no constants"):
        Graph((x,), (), (), (with_const,), with_const.outputs).verify()


def test_a_capability_names_a_known_policy() -> None:
    with pytest.raises(ValueError, match="policy 'greedy' is neither"):
        FusionCapability(policy="greedy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="planned_by 'jit' is neither"):
        FusionCapability(planned_by="jit")  # type: ignore[arg-type]


def gelu(x: Any) -> Any:
    return 0.5 * x * (1 + fnp.tanh(0.79788456 * (x + 0.044715 * x**3)))


def test_an_equation_reading_two_regions_merges_them() -> None:
    """GELU's ``0.5 * x`` starts a region of its own (its input is the graph's), and the final
    product of it and the ``tanh`` chain joins both into one."""
    g = fg.make_graph(gelu)(np.ones(8))
    (members,) = find_regions(g)
    assert members == list(range(len(g.eqns)))
    fused = fuse_regions(g)
    assert [e.primitive.name for e in fused.eqns] == ["fusion"]
    x = np.random.default_rng(0).standard_normal(8)
    np.testing.assert_allclose(fg.eval_graph(fused, x)[0], gelu(x), rtol=1e-12)


def test_regions_linked_through_an_outside_equation_are_not_merged() -> None:
    """``b`` reads a sum of ``a``'s region, so the product ``a * b`` may join ``b``'s region
    but not also ``a``'s: the merged node would run both before and after the sum."""
    def f(x):
        a = fnp.tanh(x * 2.0)
        b = x * 3.0 + fnp.sum(a)
        return a * b

    g = fg.make_graph(f)(np.ones(8))
    assert [[g.eqns[i].primitive.name for i in r] for r in find_regions(g)] == [["mul", "tanh"],
                                                                                ["mul", "add", "mul"]]
    x = np.random.default_rng(0).standard_normal(8)
    np.testing.assert_allclose(fg.eval_graph(fuse_regions(g), x)[0], f(x), rtol=1e-12)


def test_a_narrow_mask_joins_a_region_whose_widest_member_is_large_enough() -> None:
    """The region size counts a region's widest member: a ReLU's bool mask (a quarter of the
    float32 values' bytes) joins them, and a region of masks alone stays below it."""
    cap = FusionCapability(min_bytes=64)
    g = fg.make_graph(lambda h, y: fnp.where(h > 0, y, 0.0) * 2.0)(np.ones(16, np.float32), np.ones(16, np.float32))
    assert [[g.eqns[i].primitive.name for i in r] for r in find_regions(g, cap)] == [["gt", "select", "mul"]]
    masks = fg.make_graph(lambda h: fnp.logical_not(h > 0))(np.ones(16, np.float32))
    assert find_regions(masks, cap) == []
    assert find_regions(g, FusionCapability(min_bytes=65)) == []


@pytest.mark.parametrize("shape", [(0,), (0, 0)])
def test_zero_size_regions_run_on_the_numpy_engine(tiny_chunks: None, shape: tuple[int, ...]) -> None:
    lowered = fg.jit(lambda x: fnp.tanh(x * 2.0) + 1.0).lower(np.ones(shape, np.float32))
    assert len(_fusions(lowered.graph)) == 1
    out = fg.jit(lambda x: fnp.tanh(x * 2.0) + 1.0)(np.ones(shape, np.float32))
    assert out.shape == shape and out.dtype == np.float32
