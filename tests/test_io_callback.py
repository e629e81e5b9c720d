"""``fungraph.experimental.io_callback`` against JAX 0.10's: it runs each time the program
reaches it (kept although its result is unused, every loop iteration, in order), once per
example under ``vmap`` (refused when ordered), and refuses differentiation, as JAX's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
from jax.experimental import io_callback as jax_io_callback  # noqa: E402

from fungraph.experimental import io_callback  # noqa: E402


def _run(lib: Any, call: Any) -> tuple[list, list]:
    log: list = []

    def record(x: Any) -> Any:
        log.append(np.asarray(x).tolist())
        return np.asarray(x) * 2

    def log_index(i: Any) -> None:
        log.append(int(i))

    f = lambda x: call(record, lib.ShapeDtypeStruct(x.shape, x.dtype), x)  # noqa: E731
    out = [np.asarray(lib.jit(f)(np.arange(3.0))).tolist(),
           np.asarray(lib.vmap(f)(np.arange(6.0).reshape(3, 2))).tolist()]
    lib.jit(lambda x: (call(record, lib.ShapeDtypeStruct(x.shape, x.dtype), x), x + 1)[1])(np.ones(2))

    def body(i: Any, c: Any) -> Any:
        call(log_index, None, i, ordered=True)
        return c + 1

    out.append(int(lib.jit(lambda: lib.lax.fori_loop(0, 3, body, 0))()))
    return out, log


def test_io_callback_runs_as_often_and_in_the_order_jax_s_does() -> None:
    assert _run(fg, io_callback) == _run(jax, jax_io_callback)


def test_io_callback_refuses_vmap_when_ordered_and_differentiation() -> None:
    for lib, call in ((jax, jax_io_callback), (fg, io_callback)):
        spec = lib.ShapeDtypeStruct((2,), np.float32)
        with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
            lib.vmap(lambda x: call(lambda v: v, spec, x, ordered=True))(np.ones((3, 2), np.float32))
        with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
            lib.grad(lambda x: call(lambda v: v, spec, x).sum())(np.ones(2, np.float32))
