"""Drawing arguments for an op record."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from fungraph import dtypes
from fungraph.testing import OpRecord, arrays
from fungraph.testing.strategies import random_array


def draw_args(data: st.DataObject, rec: OpRecord, dtype_choices: tuple | None = None,
              seeded: bool = False) -> tuple[np.ndarray, ...]:
    """Arguments for ``rec``: hypothesis-chosen values, or seeded uniform ones with ``seeded``."""
    dtype = data.draw(st.sampled_from(dtype_choices or rec.dtypes), label="dtype")
    shps = data.draw(rec.shapes, label="shapes")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed") if seeded else 0
    rng = np.random.default_rng(seed)
    args = []
    for i, s in enumerate(shps):
        dt = rec.arg_dtype(i, dtype)
        lo, hi = rec.domain(i, shps)
        if seeded or dtypes.is_int(dt) and dt != dtype:
            args.append(random_array(rng, s, dt, lo, hi))
        else:
            args.append(data.draw(arrays(dt, tuple(s), lo, hi), label=f"arg{i}"))
    return tuple(args)


def tolerance(rec: OpRecord, args: tuple[Any, ...]) -> float:
    if any(np.asarray(a).dtype == np.float32 for a in args):
        return rec.tol32
    return rec.tol64


def assert_matches(got: Any, want: Any, tol: float, what: str) -> None:
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape, f"{what}: shape {got_arr.shape} != numpy's {want_arr.shape}"
    assert got_arr.dtype == want_arr.dtype, f"{what}: dtype {got_arr.dtype} != numpy's {want_arr.dtype}"
    if got_arr.dtype.kind in "biu":
        np.testing.assert_array_equal(got_arr, want_arr, err_msg=what)
    else:
        np.testing.assert_allclose(got_arr, want_arr, rtol=tol, atol=tol, err_msg=what)


def with_float_args(fun: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """``fun`` as a function of its floating-point arguments only (the others held fixed)."""
    pos = [i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]

    def f(*float_args: Any) -> Any:
        full = list(args)
        for i, a in zip(pos, float_args):
            full[i] = a
        return fun(*full)

    return f, [args[i] for i in pos]


def draw_batched(data: st.DataObject, rec: OpRecord, dtype_choices: tuple | None = None) -> tuple:
    """Arguments for ``rec`` stacked along random axes (argument 0 always mapped, the others
    mapped or broadcast), with the in_axes and the per-example argument tuples."""
    dtype = data.draw(st.sampled_from(dtype_choices or rec.dtypes), label="dtype")
    shps = data.draw(rec.shapes, label="shapes")
    size = data.draw(st.integers(1, 3), label="batch")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    batched, axes, examples = [], [], []
    for i, s in enumerate(shps):
        dt = rec.arg_dtype(i, dtype)
        lo, hi = rec.domain(i, shps)
        if i and not data.draw(st.booleans(), label=f"mapped{i}"):
            a = random_array(rng, s, dt, lo, hi)
            batched.append(a)
            axes.append(None)
            examples.append([a] * size)
            continue
        axis = data.draw(st.integers(-(len(s) + 1), len(s)), label=f"axis{i}")
        per = [random_array(rng, s, dt, lo, hi) for _ in range(size)]
        batched.append(np.stack(per, axis=axis))
        axes.append(axis)
        examples.append(per)
    return batched, tuple(axes), [tuple(e[k] for e in examples) for k in range(size)]
