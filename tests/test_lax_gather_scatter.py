"""``fungraph.lax.gather`` and the ``scatter`` family with XLA's dimension numbers against JAX:
values, modes, gradients and ``scatter_apply``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from tests.helpers import check_like_jax, jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(1)
OP3 = np.arange(60.0).reshape(3, 4, 5) / 7
GI = np.array([[[0, 1], [2, 3]], [[1, 0], [2, 4]]])
IDX1 = np.array([[0], [8], [-1], [20]])


def _gathers(L: Any) -> list[tuple[tuple, dict]]:
    """(arguments, keywords) of gathers: clipping and filling, collapsed and batching axes."""
    G = L.GatherDimensionNumbers
    return [((np.arange(10.0), IDX1, G(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,)), (3,)),
             {"mode": m}) for m in (None, "clip", "fill")] + [
        ((OP3, GI, G(offset_dims=(2,), collapsed_slice_dims=(0, 2), start_index_map=(0, 2)), (1, 3, 1)), {}),
        ((OP3, GI, G(offset_dims=(0, 3), collapsed_slice_dims=(1,), start_index_map=(1, 2)), (2, 1, 2)),
         {"mode": "fill", "fill_value": -1.0}),
        ((OP3, np.array([[1], [3], [0]]), G(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,),
                                            operand_batching_dims=(0,), start_indices_batching_dims=(0,)),
          (1, 1, 5)), {})]


@pytest.mark.parametrize("k", range(6))
def test_gather_matches_jax(k: int) -> None:
    (args, kw), (jargs, jkw) = _gathers(lax)[k], _gathers(jax.lax)[k]
    want = jax.lax.gather(*jargs, **jkw)
    check_like_jax(lax.gather(*args, **kw), want, "gather")
    check_like_jax(fg.jit(lambda x: lax.gather(x, *args[1:], **kw))(args[0]), want, "jit gather")
    loss = lambda L, m, a: lambda x: m.sum(m.sin(L.gather(x, *a[1:], **kw)) ** 2)  # noqa: E731
    if k > 0 and kw.get("mode") != "fill":  # case 0 breaks JAX's default promise of in-bounds windows
        np.testing.assert_allclose(fg.grad(loss(lax, fnp, args))(args[0]),
                                   jax.jit(jax.grad(loss(jax.lax, jnp, jargs)))(args[0]), rtol=1e-12)


SCATTER_CASES = [  # operand, indices, updates, dimension numbers (as keywords), mode
    (np.arange(10.0), IDX1, np.arange(12.0).reshape(4, 3) - 5,
     dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)), None),
    (np.arange(10.0), np.array([[1], [2], [1], [5]]), np.arange(12.0).reshape(4, 3) - 5,
     dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)), "clip"),
    (OP3, GI, np.arange(16.0).reshape(4, 2, 2) / 3,
     dict(update_window_dims=(0,), inserted_window_dims=(0, 2), scatter_dims_to_operand_dims=(0, 2)), None),
    (np.array([1, 5, 2, 9]), np.array([[1], [5], [1]]), np.array([7, 8, -3]),
     dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)), None),
]


@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min",
                                  "scatter_max"])
def test_scatters_match_jax(name: str) -> None:
    for x, idx, upd, dn, mode in SCATTER_CASES:
        want = getattr(jax.lax, name)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn), mode=mode)
        got = getattr(lax, name)(x, idx, upd, lax.ScatterDimensionNumbers(**dn), mode=mode)
        check_like_jax(got, want, f"{name} {dn}")
    x, idx, upd, dn, mode = SCATTER_CASES[2]
    f = fg.jit(lambda x, i, u: getattr(lax, name)(x, i, u, lax.ScatterDimensionNumbers(**dn), mode=mode))
    want = getattr(jax.lax, name)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn))
    check_like_jax(f(x, idx, upd), want, f"jit {name}")
    got = fg.vmap(f, in_axes=(None, 0, 0))(x, np.stack([idx, idx[::-1]]), np.stack([upd, 2 * upd]))
    for b, (i, u) in enumerate([(idx, upd), (idx[::-1], 2 * upd)]):
        np.testing.assert_allclose(got[b], f(x, i, u), rtol=1e-14, err_msg=f"vmap {name}")


def test_scatter_gradients_and_apply_match_jax() -> None:
    D = dict(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    x, u = np.arange(10.0) / 3, np.arange(9.0).reshape(3, 3) / 7
    for name, idx in [("scatter", np.array([[1], [2], [1]])), ("scatter_add", np.array([[1], [2], [1]])),
                      ("scatter_mul", np.array([[0], [3], [6]])), ("scatter_max", np.array([[0], [3], [6]]))]:
        def loss(L: Any, m: Any, name: str = name, idx: Any = idx) -> Callable[..., Any]:
            return lambda x, u: m.sum(m.sin(getattr(L, name)(x, idx, u, L.ScatterDimensionNumbers(**D),
                                                            unique_indices=name in ("scatter_mul", "scatter_max"))))
        for g, w in zip(fg.grad(loss(lax, fnp), (0, 1))(x, u), jax.jit(jax.grad(loss(jax.lax, jnp), (0, 1)))(x, u)):
            np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=name)
    D0 = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    idx = np.array([[1], [1], [3], [9]])
    want = jax.lax.scatter_apply(x, idx, jnp.sin, jax.lax.ScatterDimensionNumbers(**D0), update_shape=(4,))
    got = lax.scatter_apply(x, idx, fnp.sin, lax.ScatterDimensionNumbers(**D0), update_shape=(4,))
    check_like_jax(got, want, "apply")
    got = fg.jit(lambda x, i: lax.scatter_apply(x, i, fnp.sin, lax.ScatterDimensionNumbers(**D0), update_shape=(4,)))
    check_like_jax(got(x, idx), want, "jit apply")
    assert lax.GatherScatterMode.from_any("fill") is lax.GatherScatterMode.FILL_OR_DROP
    with pytest.raises(ValueError, match="unknown gather/scatter mode 'wrap'"):
        lax.GatherScatterMode.from_any("wrap")
    with pytest.raises(ValueError, match=r"lax.gather: indices i64\[4,1\] .* do not fit the operand f64\[10\]"):
        lax.gather(np.arange(10.0), IDX1, lax.GatherDimensionNumbers((1,), (), (0,)), (11,))


@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"])
def test_scatter_of_no_updates_leaves_the_operand(name: str) -> None:
    """Zero update windows (an empty index batch): the operand comes back unchanged, as in JAX."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx, upd = np.zeros((0, 1), np.int32), np.zeros((0, 4), np.float32)
    dn = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    got = getattr(lax, name)(x, idx, upd, lax.ScatterDimensionNumbers(**dn))
    want = getattr(jax.lax, name)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
