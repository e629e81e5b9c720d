"""The CPU engine's region policy at the sizes the native engine runs: GELU's two factors and
a ReLU's one-byte mask in one region, the values as the numpy engine's."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.backends.native import toolchain
from fungraph.backends.native.regions import native_enabled


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The native engine switched on, building into a temporary cache (never the user's)."""
    if not native_enabled():
        pytest.fail("the native engine needs a C compiler, and none was found")
    old_cache, was = os.environ.get(toolchain.CACHE_ENV), fg.config.fungraph_native_cpu
    os.environ[toolchain.CACHE_ENV] = str(tmp_path_factory.mktemp("native-cache"))
    fg.config.update("fungraph_native_cpu", True)
    yield
    fg.config.update("fungraph_native_cpu", was)
    if old_cache is None:
        del os.environ[toolchain.CACHE_ENV]
    else:
        os.environ[toolchain.CACHE_ENV] = old_cache


def _on_engine(native: bool, fun: Callable[..., Any], *args: Any) -> np.ndarray:
    fg.config.update("fungraph_native_cpu", native)
    try:
        return np.asarray(fg.jit(fun)(*args))
    finally:
        fg.config.update("fungraph_native_cpu", True)


def _regions(fun: Callable[..., Any], *args: Any) -> list[list[str]]:
    lowered = fg.jit(fun).lower(*args)
    assert len(lowered.compiled.executable.native) == sum(e.primitive.name == "fusion" for e in lowered.graph.eqns)
    return [[q.primitive.name for q in e.params["call"].eqns] for e in lowered.graph.eqns
            if e.primitive.name == "fusion"]


def gelu(x: Any) -> Any:
    return 0.5 * x * (1 + fnp.tanh(0.79788456 * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gelu_is_one_native_region(native: None, dt: Any) -> None:
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(dt) * 3
    with fg.enable_x64(dt == np.float64):
        (members,) = _regions(gelu, x)
        assert members.count("mul") >= 2 and "tanh" in members
        # ``1 + tanh`` cancels for negative x: its few-ulp difference is absolute, about eps * |x|
        np.testing.assert_allclose(_on_engine(True, gelu, x), _on_engine(False, gelu, x),
                                   rtol=4 * np.finfo(dt).eps, atol=16 * np.finfo(dt).eps)


def relu_backward(h: Any, g: Any) -> Any:
    return fnp.where(h > 0, g, 0.0) * 2.0 + fnp.maximum(h, 0.0)


def test_a_relu_mask_joins_its_region_at_an_mlp_layers_size(native: None) -> None:
    """At batch 256 and 1,024 units the mask is 256 KiB, half the region size, the values 1 MiB."""
    h, g = np.random.default_rng(1).standard_normal((2, 256, 1024)).astype(np.float32)
    (members,) = _regions(relu_backward, h, g)
    assert "gt" in members and "select" in members
    np.testing.assert_array_equal(_on_engine(True, relu_backward, h, g), _on_engine(False, relu_backward, h, g))
