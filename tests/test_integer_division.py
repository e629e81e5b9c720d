"""Integer division and remainder by zero, and MIN // -1, as JAX computes them on CPU (XLA's
values, not numpy's zeros), eagerly, through the array operators, under ``jit`` (numpy
engine and native code) and on OpenCL, in both dtype modes, with no numpy warning."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

NARROW = ["int8", "int16", "int32", "uint8", "uint16", "uint32"]
CASES = [(True, dt) for dt in [*NARROW, "int64", "uint64"]] + [(False, dt) for dt in NARROW]


def _operands(dtype: str, n: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Dividends and divisors covering x / 0 (positive, negative, zero, the extremes), MIN / -1
    and ordinary quotients of both signs; ``n`` copies side by side."""
    info = np.iinfo(dtype)
    signed = info.min < 0
    x = [7, -7 if signed else 250, 0, info.min, info.max, info.min, 5, -9 if signed else 9, 9, 0]
    y = [0, 0, 0, 0, 0, -1 if signed else 3, 2, 4, -4 if signed else 4, 3]
    return np.tile(np.array(x, dtype), n), np.tile(np.array(y, dtype), n)


def _functions(m: Any, lax: Any) -> dict[str, Callable[[Any, Any], Any]]:
    return {"floor_divide": m.floor_divide, "//": lambda a, b: a // b, "remainder": m.remainder,
            "%": lambda a, b: a % b, "fmod": m.fmod, "divmod": m.divmod, "lax.div": lax.div, "lax.rem": lax.rem}


def _check(got: Any, want: Any, what: str) -> None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype, what
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=what)


@pytest.mark.parametrize("x64,dtype", CASES)
def test_integer_division_by_zero_matches_jax(x64: bool, dtype: str) -> None:
    """fungraph gave numpy's 0 for ``x // 0``, ``lax.div(x, 0)`` and ``lax.rem(x, 0)`` (JAX: -2 or
    -1, all bits set, and ``x``), and numpy's divide-by-zero warnings."""
    x, y = _operands(dtype)
    ours, theirs = _functions(fnp, flax), _functions(jnp, jax.lax)
    with fg.enable_x64(x64), jax.enable_x64(x64), warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, f in ours.items():
            want = theirs[name](jnp.asarray(x), jnp.asarray(y))
            _check(f(fnp.asarray(x), fnp.asarray(y)), want, f"{name} eager {dtype}")
            _check(fg.jit(f)(x, y), want, f"{name} jit {dtype}")
            _check(f(fnp.asarray(x[0]), fnp.asarray(y[0])), theirs[name](jnp.asarray(x[0]), jnp.asarray(y[0])),
                   f"{name} 0-d {dtype}")
        _check(fnp.asarray(x) // 0, jnp.asarray(x) // 0, f"x // 0 {dtype}")
        _check(5 // fnp.asarray(y), 5 // jnp.asarray(y), f"5 // y {dtype}")


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "uint64"])
def test_integer_division_by_zero_in_native_loops_matches_jax(dtype: str) -> None:
    """Long enough for the CPU engine's native code (its C helpers returned 0 for x // 0)."""
    x, y = _operands(dtype, 500)
    with fg.enable_x64(True):
        got = fg.jit(lambda a, b: (a // b + 1, a % b + 1, flax.div(a, b) * 3, flax.rem(a, b) * 3))(x, y)
    with jax.enable_x64(True):
        want = jax.jit(lambda a, b: (a // b + 1, a % b + 1, jax.lax.div(a, b) * 3, jax.lax.rem(a, b) * 3))(x, y)
    _check(got, want, f"native {dtype}")


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int8"])
def test_integer_division_by_zero_on_opencl_matches_jax(require_opencl: None, dtype: str) -> None:
    x, y = _operands(dtype, 3)
    with fg.enable_x64(True):
        got = fg.jit(lambda a, b: (a // b, a % b, flax.div(a, b), flax.rem(a, b)), backend="opencl")(x, y)
    with jax.enable_x64(True):
        want = jax.jit(lambda a, b: (a // b, a % b, jax.lax.div(a, b), jax.lax.rem(a, b)))(x, y)
    _check(tuple(np.asarray(g) for g in got), want, f"opencl {dtype}")


def test_floor_division_written_over_its_own_operands_under_jit() -> None:
    """The CPU engine may write a quotient into an operand's buffer (the plan reuses a dead
    intermediate, as in the shifts, which divide by powers of two that overflow to zero); the
    divide-by-zero fix-up reads the operands before that write."""
    for name in ("int8", "uint8", "int16"):
        s = np.arange(np.dtype(name).itemsize * 8 + 4).astype(name)
        x = np.resize(np.array([-128, -2, -1, 0, 1, 2, 3, 100], dtype=np.int64), s.shape).astype(name)
        f = lambda a, b: (flax.shift_right_logical(a, b), flax.shift_right_arithmetic(a, b),  # noqa: E731
                          fnp.right_shift(a, b), fnp.floor_divide(a, b))
        for got, want in zip(fg.jit(f)(x, s), f(x, s)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
