"""``fungraph.custom_batching`` against JAX 0.10's ``jax.custom_batching``: the rule runs under
``vmap`` (with JAX's arguments: axis size, batched flags, arguments batch-first), not otherwise;
values, dtypes and weak types as JAX's, eagerly, under ``jit`` and nested ``vmap``; forward
derivatives as JAX's and (further than JAX) reverse ones; ``sequential_vmap``; errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import check_like_jax, jax_or_skip

jax, jnp = jax_or_skip()


def _make(lib: Any, calls: list) -> Any:
    np_ = lib.numpy

    @lib.custom_batching.custom_vmap
    def f(x: Any, y: Any) -> Any:
        return {"s": np_.sin(x) * y, "c": np_.cos(y)}

    @f.def_vmap
    def rule(axis_size: int, in_batched: list, x: Any, y: Any) -> tuple:
        calls.append((axis_size, [bool(b) for b in in_batched], np.shape(x), np.shape(y)))
        xb, yb = in_batched
        y_rows = y if yb else np_.broadcast_to(y, (axis_size, *np.shape(y)))
        x_rows = x if xb else np_.broadcast_to(x, (axis_size, *np.shape(x)))
        return {"s": np_.sin(x_rows) * y_rows, "c": np_.cos(y)}, {"s": True, "c": bool(yb)}

    return f


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_custom_vmap_runs_its_rule_under_vmap_as_jax(x64: bool) -> None:
    x, y = np.linspace(-1, 1, 3), np.array([0.5, 2.0, -1.0])
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for args, in_axes in (((x, 2.0), (0, None)), ((x, y), (0, 0)), ((0.5, y), (None, 0))):
            theirs, ours = [], []
            want = jax.vmap(_make(jax, theirs), in_axes)(*args)
            check_like_jax(fg.vmap(_make(fg, ours), in_axes)(*args), want, f"vmap {in_axes}", 1e-6)
            check_like_jax(fg.jit(fg.vmap(_make(fg, []), in_axes))(*args), want, f"jit(vmap) {in_axes}", 1e-6)
            assert ours == theirs
        eager_ours, eager_theirs = _make(fg, ours)(1.0, 2.0), _make(jax, theirs)(1.0, 2.0)
        check_like_jax(eager_ours, eager_theirs, "eager", 1e-6)
        assert eager_ours["s"].weak_type == eager_theirs["s"].weak_type
        nested = fg.vmap(fg.vmap(_make(fg, []), (0, None)), (None, 0))(x, y)
        check_like_jax(nested, jax.vmap(jax.vmap(_make(jax, []), (0, None)), (None, 0))(x, y), "nested", 1e-6)


def test_custom_vmap_derivatives() -> None:
    """jvp as JAX's; under vmap and grad (which JAX refuses) the function's own derivative
    (JAX 0.10 differentiates the rule instead: this rule's vmapped jvp has shape (4, 4) there)."""
    x = np.linspace(-1, 1, 4)
    for lib in (jax, fg):
        t = lib.jvp(lambda a: _make(lib, [])(a, 3.0)["s"], (0.5,), (1.0,))[1]
        np.testing.assert_allclose(np.asarray(t), 3 * np.cos(0.5), rtol=1e-12)
    f = _make(fg, [])
    per = fg.vmap(lambda a: fg.jvp(lambda b: f(b, 3.0)["s"], (a,), (1.0,))[1])(x)
    np.testing.assert_allclose(np.asarray(per), 3 * np.cos(x), rtol=1e-12)
    g = fg.vmap(fg.grad(lambda a: _make(fg, [])(a, 3.0)["s"]))(x)
    np.testing.assert_allclose(np.asarray(g), 3 * np.cos(x), rtol=1e-12)


def test_sequential_vmap_matches_jax() -> None:
    x, b = np.arange(6.0).reshape(3, 2), np.array([1.0, -2.0, 0.5])
    for in_axes, args in (((0, None), (x, 2.0)), ((0, 0), (x, b)), ((None, 0), (x[0], b))):
        want = jax.vmap(jax.custom_batching.sequential_vmap(lambda a, c: jnp.sum(a) * c), in_axes)(*args)
        got = fg.vmap(fg.custom_batching.sequential_vmap(lambda a, c: fg.numpy.sum(a) * c), in_axes)(*args)
        check_like_jax(got, want, f"sequential_vmap {in_axes}")


def test_custom_vmap_errors_name_the_function() -> None:
    bare = fg.custom_batching.custom_vmap(lambda x: x)
    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap function <lambda>"):
        bare(1.0)

    @fg.custom_batching.custom_vmap
    def f(x: Any) -> Any:
        return x * 2

    f.def_vmap(lambda n, batched, x: x * 2)
    with pytest.raises(TypeError, match="vmap rule of custom_vmap function f must return"):
        fg.vmap(f)(np.ones(3))
    f.def_vmap(lambda n, batched, x: (x[0], True))
    with pytest.raises(TypeError, match="returned shape"):
        fg.vmap(f)(np.ones((3, 2)))
