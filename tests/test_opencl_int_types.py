"""The OpenCL kernels on the integer types narrower than int32 and the unsigned ones (int8/16,
uint8/16/32/64): wrap-around arithmetic, division, shifts, comparisons, conversions, literals
and reductions bit for bit against the CPU engine (and the shifts against JAX), with no
``BackendFallbackWarning``; and ``fungraph.random`` on the device again (its keys are uint32)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.lax as flax
import fungraph.numpy as fnp
from fungraph import random as fr
from fungraph.jit import BackendFallbackWarning
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

pytestmark = pytest.mark.usefixtures("require_opencl")

INT_TYPES = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]


def _edges(name: str) -> np.ndarray:
    """Each type's wrap-around edges (min, max and their neighbours, 0, +-1) and a few values
    between, 36 elements."""
    info = np.iinfo(name)
    vals = [info.min, info.min + 1, info.min + 2, -2, -1, 0, 1, 2, 3, 7, 100,
            info.max // 2, info.max // 2 + 1, info.max - 2, info.max - 1, info.max]
    vals = [v for v in vals if info.min <= v <= info.max]
    out = np.array((vals * 36)[:36], dtype=object)
    return out.astype(name)


def _on_device(f: Callable, *args: Any) -> Any:
    """``jit(f, backend="opencl")(*args)``, failing if the graph falls back to the CPU engine."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendFallbackWarning)
        return fg.jit(f, backend="opencl")(*args)


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} vs {want.dtype}"
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=what)


def _ops(x: Any, y: Any) -> dict[str, Any]:
    """Every elementwise op on one pair of same-typed operands, with literals of their type."""
    dt = x.dtype
    info = np.iinfo(dt)
    return {
        "add": x + y, "sub": x - y, "mul": x * y, "neg": -x, "abs": fnp.abs(x), "sign": fnp.sign(x),
        "add_max": x + np.asarray(info.max, dt), "mul_min": x * np.asarray(info.min if info.min else 3, dt),
        "max": fnp.maximum(x, y), "min": fnp.minimum(x, y), "floordiv": x // y, "mod": x % y,
        "eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y,
        "lt_lit": x < np.asarray(info.max // 2, dt), "and": x & y, "or": x | y, "xor": x ^ y, "not": ~x,
        "pow3": x ** 3, "where": fnp.where(x > y, x, np.asarray(info.max, dt)),
        "fma": x * y + np.asarray(7, dt),
        "to_f32": x.astype(np.float32), "to_i32": x.astype(np.int32), "to_i64": x.astype(np.int64),
        "to_bool": x.astype(bool), "from_i64": (x.astype(np.int64) * 3 + 1).astype(dt),
        "from_bool": (x > y).astype(dt), "from_f32": (x.astype(np.float32) / 2).astype(dt),
        "from_f32_saturating": fnp.where(x > y, x.astype(np.float32) * 1000.0, np.float32(np.nan)).astype(dt),
        "sum": fnp.sum(x), "prod": fnp.prod(y[:5]), "reduce_max": fnp.max(x), "reduce_min": fnp.min(x),
        "argmax": fnp.argmax(x),
    }


@pytest.mark.parametrize("name", INT_TYPES)
def test_int_elementwise_ops_wrap_as_on_the_cpu_engine(name: str) -> None:
    x = _edges(name)
    y = np.roll(x, 5)
    want = fg.jit(_ops)(x, y)
    got = _on_device(_ops, x, y)
    for key in want:
        _same(got[key], want[key], f"{name} {key}")


def _kernels(a: Any, b: Any) -> dict[str, Any]:
    """The kernels beside the elementwise ones: products, sums along an axis, scans, gathers and
    scatter-adds, whose accumulators are of the operands' type."""
    return {"dot": a @ b, "dot_tiled": fnp.tile(a, (4, 1)) @ fnp.tile(b, (1, 4)), "sum_rows": fnp.sum(a, axis=1),
            "cumsum": fnp.cumsum(a, axis=0), "take": a[np.array([1, 5, 1])] * np.asarray(3, a.dtype),
            "scatter_add": a.at[np.array([0, 0, 3])].add(a[:3])}


@pytest.mark.parametrize("name", INT_TYPES)
def test_int_products_sums_and_scatters_wrap_as_on_the_cpu_engine(name: str) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**63, (20, 30), dtype=np.uint64).astype(name)
    b = rng.integers(0, 2**63, (30, 17), dtype=np.uint64).astype(name)
    want = fg.jit(_kernels)(a, b)
    got = _on_device(_kernels, a, b)
    for key in want:
        _same(got[key], want[key], f"{name} {key}")


def _shifts(x: Any, s: Any) -> dict[str, Any]:
    return {"shift_left": flax.shift_left(x, s), "shift_right_logical": flax.shift_right_logical(x, s),
            "shift_right_arithmetic": flax.shift_right_arithmetic(x, s),
            "left_shift": fnp.left_shift(x, s), "right_shift": fnp.right_shift(x, s)}


@pytest.mark.parametrize("name", INT_TYPES)
def test_int_shifts_match_jax_on_the_device(name: str) -> None:
    """Shift amounts 0 .. bits + 3: shifts of the width or more give 0 (all ones for an
    arithmetic shift of a value with its top bit set); right shifts of unsigned values are
    logical."""
    bits = np.dtype(name).itemsize * 8
    s = np.arange(bits + 4).astype(name)
    x = np.resize(_edges(name), s.shape)
    got = _on_device(_shifts, x, s)
    cpu = fg.jit(_shifts)(x, s)
    lax_ops = {"shift_left", "shift_right_logical", "shift_right_arithmetic"}
    for key, value in got.items():
        ref = getattr(jax.lax, key)(x, s) if key in lax_ops else getattr(jnp, key)(x, s)
        _same(value, ref, f"{name} {key} (JAX)")
        _same(value, cpu[key], f"{name} {key} (CPU engine)")


def test_int_literals_at_the_edges_of_each_type() -> None:
    """A literal of each type's min and max in a fused kernel: C has no literal of char or
    short, and uint32's max is no int."""
    def f(*xs: Any) -> list[Any]:
        return [fnp.where(x > np.asarray(0, x.dtype), np.asarray(np.iinfo(x.dtype).max, x.dtype),
                          np.asarray(np.iinfo(x.dtype).min, x.dtype)) for x in xs]

    xs = [_edges(name) for name in INT_TYPES]
    for name, got, want in zip(INT_TYPES, _on_device(f, *xs), fg.jit(f)(*xs)):
        _same(got, want, name)


def test_random_samplers_run_on_the_device_bit_for_bit() -> None:
    """uint32 keys: split, fold_in, bits, uniform and randint on OpenCL, with no fallback to the
    CPU engine, equal to the CPU engine's bits (normal goes through log: a few ulps)."""
    def f(k: Any) -> tuple:
        k1, k2 = fr.split(k)
        k3 = fr.fold_in(k2, 77)
        return (k1, k3, fr.bits(k1, (3, 5)), fr.uniform(k2, (7,), np.float32, -1.0, 2.0),
                fr.randint(k3, (9,), -4, 2**62 + 12345), fr.bernoulli(k3, 0.3, (11,)),
                fr.permutation(k1, 10), fr.normal(k1, (2, 3), np.float32))

    for seed in (0, 2**31 - 1):
        key = fr.PRNGKey(seed)
        got = _on_device(f, key)
        want = fg.jit(f)(key)
        for g, w, what in zip(got[:-1], want[:-1], ("split", "fold_in", "bits", "uniform", "randint",
                                                    "bernoulli", "permutation")):
            _same(g, w, f"seed {seed} {what}")
        eps = np.finfo(np.float32).eps
        np.testing.assert_allclose(np.asarray(got[-1]), np.asarray(want[-1]), rtol=8 * eps, atol=8 * eps)


@pytest.mark.usefixtures("x32")
def test_random_samplers_run_on_the_device_in_32_bit_mode() -> None:
    def f(k: Any) -> tuple:
        return fr.split(k, 3), fr.bits(k, (4, 4)), fr.uniform(k, (6,)), fr.randint(k, (5,), 0, 1000)

    key = fr.PRNGKey(123)
    for g, w in zip(_on_device(f, key), fg.jit(f)(key)):
        _same(g, w, "32-bit mode")
