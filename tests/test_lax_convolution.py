"""``fungraph.lax``'s convolutions against JAX: ``conv_general_dilated`` with layouts, dilations,
groups and ``Precision``, its gradients, second order and vmap, the wrappers, ``conv_transpose``
and ``conv_general_dilated_patches``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.testing import check_grads
from tests.helpers import check_like_jax, jax_or_skip

jax, jnp = jax_or_skip()

RNG = np.random.default_rng(1)
X4 = RNG.standard_normal((2, 4, 7, 6))
W4 = RNG.standard_normal((6, 4, 3, 2))
CONVS: dict[str, tuple[tuple, tuple, dict]] = {
    "nchw_same": ((2, 4, 7, 6), (6, 4, 3, 2), dict(window_strides=(1, 1), padding="SAME")),
    "strided_dilated": ((2, 4, 9, 8), (6, 4, 3, 2), dict(window_strides=(2, 1), padding=[(1, 2), (0, -1)],
                                                         lhs_dilation=(1, 2), rhs_dilation=(2, 1))),
    "nhwc_hwio": ((2, 7, 6, 4), (3, 2, 4, 6), dict(window_strides=(1, 2), padding="VALID",
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "mixed_layouts": ((7, 2, 4, 6), (2, 6, 3, 4), dict(window_strides=(1, 1), padding="SAME_LOWER",
                                                      dimension_numbers=("HNCW", "WOHI", "CWNH"))),
    "conv1d": ((2, 3, 11), (5, 3, 4), dict(window_strides=(2,), padding="SAME", rhs_dilation=(2,))),
    "conv3d": ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), dict(window_strides=(1, 2, 1), padding=[(1, 0), (1, 1), (0, 2)],
                                                     lhs_dilation=(2, 1, 1))),
    "feature_groups": ((2, 6, 6, 5), (4, 3, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    "depthwise": ((2, 4, 5, 5), (8, 1, 3, 3), dict(window_strides=(2, 2), padding="VALID", feature_group_count=4)),
    "batch_groups": ((4, 3, 6, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    "no_spatial": ((3, 4), (5, 4), dict(window_strides=(), padding=())),
}


def conv_args(name: str) -> tuple[np.ndarray, np.ndarray, dict]:
    ls, rs, kw = CONVS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    return rng.standard_normal(ls), rng.standard_normal(rs), kw


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_general_dilated_matches_jax(name: str) -> None:
    x, w, kw = conv_args(name)
    want = jax.lax.conv_general_dilated(x, w, **kw)
    check_like_jax(lax.conv_general_dilated(x, w, **kw), want, name, 1e-10)
    check_like_jax(fg.jit(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w), want, f"jit {name}", 1e-10)


def test_conv_general_dilated_gradients_match_jax() -> None:
    """One JAX compilation for several configurations (JAX's compile time dominates)."""
    names = ["mixed_layouts", "conv3d", "depthwise", "batch_groups"]
    args = [conv_args(n) for n in names]

    def loss(lib: Any, m: Any) -> Callable[..., Any]:
        def f(*xs: Any) -> Any:
            outs = [lib.conv_general_dilated(x, w, **kw) for (x, w), (_, _, kw) in zip(zip(xs[::2], xs[1::2]), args)]
            return sum(m.sum(m.sin(o)) for o in outs)
        return f

    flat = [v for x, w, _ in args for v in (x, w)]
    got = fg.grad(loss(lax, fnp), argnums=tuple(range(len(flat))))(*flat)
    want = jax.jit(jax.grad(loss(jax.lax, jnp), argnums=tuple(range(len(flat)))))(*flat)
    for k, (g, v) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=1e-10, atol=1e-10, err_msg=names[k // 2])


def test_conv_second_order_and_vmap() -> None:
    x, w, kw = conv_args("depthwise")
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw), (x[:1], w), order=2)
    x3, w3, kw3 = conv_args("conv3d")
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw3), (x3, w3), order=1)
    xs = np.stack([x, 2 * x])
    got = fg.vmap(lambda a, b: lax.conv_general_dilated(a, b, **kw), in_axes=(0, None))(xs, w)
    want = np.stack([jax.lax.conv_general_dilated(a, w, **kw) for a in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv_wrappers_and_dtypes_match_jax() -> None:
    x, w = X4, W4
    for call in [lambda L: L.conv(x, w, (2, 1), "SAME", precision=L.Precision.HIGHEST),
                 lambda L: L.conv_with_general_padding(x, w, (1, 2), [(1, 1), (2, 0)], (2, 1), (1, 2)),
                 lambda L: L.conv(x.astype(np.float32), w.astype(np.float32), (1, 1), "VALID",
                                  preferred_element_type=np.float64),
                 lambda L: L.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "VALID"),
                 lambda L: L.conv_general_dilated(x.astype(np.int32), w.astype(np.int32), (1, 1), "SAME",
                                                  preferred_element_type=np.float32)]:
        check_like_jax(call(lax), call(jax.lax), "conv wrapper", 1e-5)
    x = x.transpose(0, 2, 3, 1)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "OIHW", "NCHW"))
    assert dn == tuple(jax.lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "OIHW", "NCHW")))
    assert isinstance(dn, lax.ConvDimensionNumbers)
    check_like_jax(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn),
           jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=jax.lax.ConvDimensionNumbers(*dn)),
           "ConvDimensionNumbers", 1e-10)


TRANSPOSES = [("SAME", (1, 1), {}), ("SAME", (2, 3), {"rhs_dilation": (1, 2)}), ("VALID", (3, 1), {}),
              ("VALID", (2, 3), {"transpose_kernel": True}), ([(1, 2), (0, 1)], (2, 3), {}),
              ([(2, 2), (1, 0)], (3, 1), {"use_consistent_padding": True}),
              ("SAME", (2, 2), {"use_consistent_padding": True, "transpose_kernel": True}),
              ([(1, 0), (0, 2)], (2, 1), {"dimension_numbers": ("NCHW", "OIHW", "NCHW")})]


@pytest.mark.parametrize("padding, strides, kw", TRANSPOSES)
def test_conv_transpose_matches_jax(padding: Any, strides: tuple, kw: dict) -> None:
    x = RNG.standard_normal((2, 5, 4, 3))
    w = RNG.standard_normal((3, 2, 3, 4))
    lhs = x.transpose(0, 3, 1, 2) if "dimension_numbers" in kw else x
    rhs = w.transpose(3, 2, 0, 1) if "dimension_numbers" in kw else w
    if kw.get("transpose_kernel"):
        rhs = w[:, :, :, :2].transpose(0, 1, 3, 2)
    want = jax.lax.conv_transpose(lhs, rhs, strides, padding, **kw)
    check_like_jax(lax.conv_transpose(lhs, rhs, strides, padding, **kw), want, f"conv_transpose {kw}", 1e-10)


def test_conv_transpose_is_the_gradient_of_conv() -> None:
    """With ``transpose_kernel`` and the forward padding, ``conv_transpose`` is the vjp of ``conv``."""
    x = RNG.standard_normal((1, 6, 6, 2))
    w = RNG.standard_normal((3, 3, 2, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    y, vjp = fg.vjp(lambda a: lax.conv_general_dilated(a, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=dn), x)
    ct = RNG.standard_normal(np.shape(y))
    got = lax.conv_transpose(ct, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=dn, transpose_kernel=True,
                             use_consistent_padding=True)
    np.testing.assert_allclose(got, vjp(ct)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [
    dict(filter_shape=(3, 2), window_strides=(2, 1), padding=[(0, 1), (1, 1)], rhs_dilation=(1, 2),
         lhs_dilation=(2, 1)),
    dict(filter_shape=(2, 2), window_strides=(1, 2), padding=[(1, 0), (2, 1)],
         dimension_numbers=("NHWC", "OIHW", "NCHW")),
    dict(filter_shape=(3,), window_strides=(2,), padding="SAME"),
])
def test_conv_general_dilated_patches_matches_jax(case: dict) -> None:
    rank = len(case["filter_shape"]) + 2
    x = RNG.standard_normal((2, 3, 6, 5)[:rank] if rank == 4 else (2, 3, 8))
    want = jax.lax.conv_general_dilated_patches(x, **case)
    check_like_jax(lax.conv_general_dilated_patches(x, **case), want, "patches", 1e-12)
    check_like_jax(fg.jit(lambda a: lax.conv_general_dilated_patches(a, **case))(x), want, "jit patches", 1e-12)
    check_grads(lambda a: lax.conv_general_dilated_patches(a, **case), (x,), order=1)
