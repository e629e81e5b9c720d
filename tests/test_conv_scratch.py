"""Planned scratch for the CPU engine's conv and pooling: a steady-state jitted call writes
every temporary (gathered taps, per-tap products, pooling indices) into arena blocks that
``plan_memory`` reserved, so it allocates almost nothing; the results equal the eager impl
bit for bit and an independent float64 reference to rounding; ``verify_plan`` checks the
scratch blocks like any other buffer."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph.backends.cpu import CpuExecutable, scratch_bytes
from fungraph.interpreters.memory import plan_memory, verify_plan
from fungraph.primitives.conv import conv_p, conv_scratch_bytes

#: what one engine call costs tracemalloc besides its lowerings, whatever the sizes: Python
#: lists, numpy's small internal buffers, the 6.4 KB of the ``np.broadcast`` behind a product's
#: shape check and the 184 B of the floating-point error state's context write; measured at
#: 1.6 to 8.3 KB
CALL_OVERHEAD = 12 * 1024
#: numpy's ufunc loops cast and broadcast through buffers of ``getbufsize()`` elements: a
#: constant (about 34 KB for float32), independent of the array sizes
UFUNC_BUFFER = np.getbufsize() * 8


def _peak(fn: Callable[[], Any]) -> int:
    fn()  # warm: first-call caches are not steady state
    gc.disable()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    return peak


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _reference_conv(x: np.ndarray, w: np.ndarray, *, window_strides: tuple, padding: tuple, lhs_dilation: tuple,
                    rhs_dilation: tuple) -> np.ndarray:
    """Float64 conv the textbook way: insert zeros for the dilations, pad (negative pads
    crop), and sum every window times the kernel."""
    def dilate(a: np.ndarray, d: tuple) -> np.ndarray:
        shape = a.shape[:2] + tuple((s - 1) * k + 1 if s else 0 for s, k in zip(a.shape[2:], d))
        out = np.zeros(shape)
        out[:, :, ::d[0], ::d[1]] = a
        return out

    strides = window_strides
    x, w = dilate(x.astype(np.float64), lhs_dilation), dilate(w.astype(np.float64), rhs_dilation)
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in padding))
    (t, b), (left, right) = ((max(-lo, 0), max(-hi, 0)) for lo, hi in padding)
    x = x[:, :, t:x.shape[2] - b, left:x.shape[3] - right]
    kh, kw = w.shape[2:]
    oh = max(0, (x.shape[2] - kh) // strides[0] + 1)
    ow = max(0, (x.shape[3] - kw) // strides[1] + 1)
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    if oh == 0 or ow == 0:
        return out
    for i in range(kh):
        for j in range(kw):
            win = x[:, :, i:i + strides[0] * (oh - 1) + 1:strides[0], j:j + strides[1] * (ow - 1) + 1:strides[1]]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, i, j])
    return out


@st.composite
def conv_cases(draw: st.DrawFn) -> dict:
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pair = lambda lo, hi: (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))  # noqa: E731
    return {"x": (n, c, h, w), "w": (o, c, kh, kw), "window_strides": pair(1, 3),
            "padding": (pair(-1, 3), pair(-1, 3)), "lhs_dilation": pair(1, 2), "rhs_dilation": pair(1, 2),
            "dtype": draw(st.sampled_from([np.float32, np.float64])), "seed": draw(st.integers(0, 2**16))}


def _compile_conv(case: dict) -> tuple[Any, np.ndarray, np.ndarray, dict]:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x"]).astype(case["dtype"])
    w = rng.standard_normal(case["w"]).astype(case["dtype"])
    params = {k: case[k] for k in ("window_strides", "padding", "lhs_dilation", "rhs_dilation")}
    f = lambda x, w: fg.lax.conv_general_dilated(x, w, params["window_strides"], params["padding"],  # noqa: E731
                                                 params["lhs_dilation"], params["rhs_dilation"])
    return fg.jit(f).lower(x, w), x, w, params


@settings(max_examples=60)
@given(conv_cases())
def test_planned_conv_allocates_nothing_and_equals_the_impl(case: dict) -> None:
    low, x, w, params = _compile_conv(case)
    (out_aval,) = low.graph.out_avals
    if out_aval.size == 0:
        return  # nothing to compute (the empty case is covered by the reference check below)
    verify_plan(low.graph, low.plan)
    (eqn,) = low.graph.eqns
    assert [p.size for p in low.plan.scratch.values()] == ([conv_scratch_bytes(eqn)] if conv_scratch_bytes(eqn)
                                                           else [])
    out = np.empty(out_aval.shape, out_aval.dtype)
    peak = _peak(lambda: low.compiled.executable.run([x, w], into=[out]))
    assert peak < out.nbytes // 4 + CALL_OVERHEAD, (peak, out.nbytes)
    want = conv_p.impl(x, w, **params)
    np.testing.assert_array_equal(_bits(out), _bits(want))
    ref = _reference_conv(x, w, **params)
    scale = _reference_conv(np.abs(x), np.abs(w), **params) + 1.0
    tol = 1e-6 if case["dtype"] == np.float32 else 1e-12
    assert np.all(np.abs(out - ref) <= tol * scale)


@settings(max_examples=40)
@given(conv_cases())
def test_conv_impl_matches_the_reference(case: dict) -> None:
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["x"]).astype(case["dtype"])
    w = rng.standard_normal(case["w"]).astype(case["dtype"])
    params = {k: case[k] for k in ("window_strides", "padding", "lhs_dilation", "rhs_dilation")}
    got = conv_p.impl(x, w, **params)
    ref = _reference_conv(x, w, **params)
    assert got.shape == ref.shape and got.dtype == case["dtype"]
    tol = 1e-6 if case["dtype"] == np.float32 else 1e-12
    assert np.all(np.abs(got - ref) <= tol * (_reference_conv(np.abs(x), np.abs(w), **params) + 1.0))


def test_a_plan_without_scratch_allocates_the_conv_temporaries() -> None:
    """The contrast that makes the bound above meaningful: the same conv planned without the
    engine's scratch rule gathers its taps and products into fresh arrays."""
    case = {"x": (2, 6, 30, 30), "w": (5, 6, 3, 3), "window_strides": (2, 1), "padding": ((1, 2), (0, 1)),
            "lhs_dilation": (1, 1), "rhs_dilation": (2, 1), "dtype": np.float32, "seed": 0}
    low, x, w, _ = _compile_conv(case)
    out = np.empty(low.graph.out_avals[0].shape, np.float32)
    planned = _peak(lambda: low.compiled.executable.run([x, w], into=[out]))
    bare = CpuExecutable(low.graph, plan_memory(low.graph))
    assert not bare.plan.scratch
    unplanned = _peak(lambda: bare.run([x, w], into=[out]))
    assert planned < out.nbytes // 4 + CALL_OVERHEAD < out.nbytes < unplanned, (planned, unplanned)


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("window, strides, padding", [((3, 3), (2, 2), "SAME"), ((2, 2), (2, 2), "VALID"),
                                                      ((3, 3), (1, 1), ((1, 1), (1, 1))), ((3, 2), (2, 3), "SAME")])
def test_planned_pooling_allocates_nothing(pool: str, window: tuple, strides: tuple, padding: Any) -> None:
    x = np.random.default_rng(1).standard_normal((2, 8, 33, 30)).astype(np.float32)
    op = fg.nn.max_pool if pool == "max" else fg.nn.avg_pool
    f = lambda x: op(x, window, strides, padding)  # noqa: E731
    low = fg.jit(f).lower(x)
    verify_plan(low.graph, low.plan)
    exe = low.compiled.executable
    assert exe.fallback_eqns == 0  # pad, take and the reduction write into their arena views
    out = np.empty(low.graph.out_avals[0].shape, np.float32)
    peak = _peak(lambda: exe.run([x], into=[out]))
    assert peak < out.nbytes // 4 + CALL_OVERHEAD, (peak, out.nbytes)
    np.testing.assert_array_equal(out, f(x))


def test_pooling_gradient_scatter_allocates_nothing() -> None:
    """``take``'s transpose (``scatter_add``) zeroes its arena view instead of a fresh array;
    the gradient's comparisons and products allocate only numpy's constant ufunc buffers."""
    x = np.random.default_rng(2).standard_normal((4, 16, 40, 40)).astype(np.float32)
    f = fg.grad(lambda x: (fg.nn.max_pool(x, (2, 2)) ** 2).sum())
    low = fg.jit(f).lower(x)
    assert "scatter_add" in {e.primitive.name for e in low.graph.eqns}
    out = np.empty(x.shape, np.float32)
    peak = _peak(lambda: low.compiled.executable.run([x], into=[out]))
    assert peak < out.nbytes // 4 + CALL_OVERHEAD + UFUNC_BUFFER, (peak, out.nbytes)
    np.testing.assert_array_equal(out, f(x))


def _two_convs_fn(x: Any, w1: Any, w2: Any) -> Any:
    return fg.lax.conv(fg.nn.relu(fg.lax.conv(x, w1, (1, 1), "SAME")), w2, (2, 2), "SAME").sum()


def _two_convs() -> tuple[Any, Any]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 20, 20)).astype(np.float32)
    w1 = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((5, 6, 3, 3)).astype(np.float32)
    return fg.jit(_two_convs_fn).lower(x, w1, w2), (x, w1, w2)


def test_verify_plan_accepts_scratch_and_rejects_bad_blocks() -> None:
    low, args = _two_convs()
    graph, plan = low.graph, low.plan
    verify_plan(graph, plan)
    conv_steps = [i for i, e in enumerate(graph.eqns) if e.primitive.name == "conv"]
    assert sorted(plan.scratch) == conv_steps
    assert plan.lower_bound_bytes <= plan.arena_bytes
    # the bound counts scratch: planning without it gives a smaller bound here
    assert plan_memory(graph).lower_bound_bytes < plan.lower_bound_bytes
    step = conv_steps[1]
    live = [p for p in plan.placements.values() if p.kind == "buffer" and p.start <= step < p.end]
    assert live, "the second conv reads a buffer of the arena"

    def with_block(**changes: Any) -> Any:
        block = dataclasses.replace(plan.scratch[step], **changes)
        return dataclasses.replace(plan, scratch={**plan.scratch, step: block})

    with pytest.raises(ValueError, match="overlap in memory"):  # verify_offsets names the two blocks
        verify_plan(graph, with_block(offset=live[0].offset))
    with pytest.raises(AssertionError, match="exceeds the arena"):
        verify_plan(graph, with_block(offset=plan.arena_bytes))
    with pytest.raises(AssertionError, match=r"must be kind scratch over"):
        verify_plan(graph, with_block(end=step + 2))
    # and the engine runs the verified plan: two convs, a relu and a sum, equal to eager
    np.testing.assert_allclose(low.compiled.executable.run(list(args))[0], _two_convs_fn(*args), rtol=1e-5)


def test_scratch_rule_is_the_engines() -> None:
    """``jit`` plans with the CPU engine's rule: conv and take get blocks, others none."""
    low, _ = _two_convs()
    for i, e in enumerate(low.graph.eqns):
        assert scratch_bytes(e) == (low.plan.scratch[i].size if i in low.plan.scratch else 0)
