"""``jax_debug_nans``/``jax_debug_infs``: the first primitive whose result holds a NaN (an
infinity) raises ``FloatingPointError`` naming it and the user's line, eagerly, under grad
and, through an op-by-op re-run as in JAX, under jit on both engines."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp


@pytest.fixture
def checks() -> Iterator[None]:
    fg.config.update("jax_debug_nans", True)
    fg.config.update("jax_debug_infs", True)
    try:
        yield
    finally:
        fg.config.update("jax_debug_nans", False)
        fg.config.update("jax_debug_infs", False)


def f(x: Any) -> Any:
    y = fnp.log(x)  # the line the errors name
    return fnp.sin(y) * 2.0


LINE = re.escape(f"test_debug_nans.py:{f.__code__.co_firstlineno + 1} (f)")


@pytest.fixture(params=["cpu", "opencl"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "opencl":
        request.getfixturevalue("require_opencl")
    return request.param


def test_off_by_default_and_read_back() -> None:
    assert not fg.config.jax_debug_nans and not fg.config.jax_debug_infs
    with np.errstate(invalid="ignore"):
        assert np.isnan(f(np.array([-1.0]))).all()


def test_eager_names_the_primitive_and_the_line(checks: None) -> None:
    with pytest.raises(FloatingPointError, match=rf"invalid value \(nan\) encountered in log at .*{LINE}: "
                                                 r"1 of the 2 values of its float64\[2\] result"), \
            np.errstate(invalid="ignore"):
        f(np.array([1.0, -1.0]))
    with pytest.raises(FloatingPointError, match=r"\(inf\) encountered in div"), np.errstate(divide="ignore"):
        fnp.divide(fnp.ones(2), fnp.zeros(2))
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), np.sin(np.log([1.0, 2.0])) * 2)


def test_jit_reruns_op_by_op(checks: None, backend: str) -> None:
    x = np.array([1.0, -1.0], np.float32)
    with pytest.raises(FloatingPointError, match=rf"encountered in log at .*{LINE}") as info, \
            np.errstate(invalid="ignore"):
        fg.jit(f, backend=backend)(x)
    assert "the output of jit-compiled f" in str(info.value.__context__)
    np.testing.assert_allclose(np.asarray(fg.jit(f, backend=backend)(np.ones(2, np.float32))), [0.0, 0.0])


def test_grad_and_integer_outputs(checks: None) -> None:
    with pytest.raises(FloatingPointError, match="encountered in log"), np.errstate(invalid="ignore"):
        fg.grad(lambda x: f(x).sum())(np.array([1.0, -1.0]))
    assert int(fg.jit(lambda i: i * 2)(np.int64(3))) == 6
    np.testing.assert_array_equal(fg.jit(lambda x: fnp.isnan(x))(np.array([np.nan])), [True])


def test_donated_calls_are_not_rerun(checks: None) -> None:
    g = fg.jit(lambda x: x * np.nan, donate_argnums=0)
    with pytest.raises(FloatingPointError, match="donated arguments are gone"):
        g(np.ones(2))


def test_a_nan_only_the_optimised_graph_makes_is_reported_as_such(checks: None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    jitted = fg.jit(lambda x: x + 1.0)
    monkeypatch.setattr(jitted, "_call", lambda args, kwargs, fast_key: np.array([np.nan]))
    with pytest.raises(FloatingPointError, match="running it op by op gave none"):
        jitted(np.ones(1))
