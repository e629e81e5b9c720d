"""Running one public JAX program on fungraph and on JAX, with only the import changed, in a
given dtype mode, and comparing what they return: the same pytree of leaves with the same
shapes, dtypes and values (within a tolerance for floats), and what they print."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import Any

import numpy as np

import fungraph as fg
import fungraph.numpy as fnp

Program = Callable[[Any, Any], Any]


def run_both(jax: Any, jnp: Any, program: Program, x64: bool) -> tuple[tuple[Any, str], tuple[Any, str]]:
    """``program(lib, numpy)`` on fungraph and on JAX in the mode ``x64``: each one's result and
    what it printed."""
    results = []
    for lib, np_, mode in ((fg, fnp, fg.enable_x64), (jax, jnp, jax.enable_x64)):
        out = io.StringIO()
        with mode(x64), contextlib.redirect_stdout(out):
            results.append((program(lib, np_), out.getvalue()))
    return results[0], results[1]


def assert_same(jax: Any, ours: Any, theirs: Any, x64: bool, rtol32: float = 2e-5, rtol64: float = 1e-9) -> None:
    """The two results hold the same pytree structure and leaves: Python scalars and strings
    equal, arrays of one shape and dtype with equal integers and close floats."""
    our_leaves, our_tree = fg.tree_util.tree_flatten(ours)
    their_leaves, their_tree = jax.tree_util.tree_flatten(theirs)
    assert str(our_tree) == str(their_tree), (our_tree, their_tree)
    tol = rtol64 if x64 else rtol32
    for i, (got, want) in enumerate(zip(our_leaves, their_leaves)):
        if isinstance(want, (str, bool, int, float, complex, type(None))) and not hasattr(want, "dtype"):
            assert not hasattr(got, "dtype") and type(got) is type(want), (i, got, want)
            assert got == want or (isinstance(want, (float, complex)) and np.isclose(got, want, rtol=tol, atol=tol)), \
                (i, got, want)
            continue
        got_arr, want_arr = np.asarray(got), np.asarray(want)
        assert (got_arr.shape, got_arr.dtype) == (want_arr.shape, want_arr.dtype), (i, got_arr.dtype, want_arr.dtype,
                                                                                   got_arr.shape, want_arr.shape)
        if want_arr.dtype.kind in "fc":
            np.testing.assert_allclose(got_arr, want_arr, rtol=tol, atol=tol, err_msg=f"leaf {i}")
        else:
            np.testing.assert_array_equal(got_arr, want_arr, err_msg=f"leaf {i}")


def check_program(jax: Any, jnp: Any, program: Program, x64: bool, **tolerances: float) -> None:
    """``program`` returns and prints the same on fungraph as on JAX in the mode ``x64``."""
    (ours, our_out), (theirs, their_out) = run_both(jax, jnp, program, x64)
    assert_same(jax, ours, theirs, x64, **tolerances)
    assert our_out == their_out


#: ``FUNGRAPH_ALL_JAX_PROGRAMS=1`` runs every program of a file in both modes. By default a file
#: runs the cases it lists: JAX compiles each program afresh (1-6 s of CPU per program and mode,
#: against fungraph's 0.1 s), more than the suite's time budget takes for all of them.
ALL_PROGRAMS = os.environ.get("FUNGRAPH_ALL_JAX_PROGRAMS") == "1"


def program_cases(programs: dict[str, Program], in_suite: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The (program name, x64) cases to run: ``in_suite``, or all of them with ``ALL_PROGRAMS``."""
    assert all(name in programs for name, _ in in_suite)
    if ALL_PROGRAMS:
        return [(name, x64) for name in sorted(programs) for x64 in (True, False)]
    return in_suite
