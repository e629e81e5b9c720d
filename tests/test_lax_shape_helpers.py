"""lax's shape helpers against jax.lax's on a table of cases (issue #32 item 7)."""

from __future__ import annotations

from typing import Any

import pytest

from fungraph import lax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")
CONV_CASES: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], Any, Any]] = [
    ((1, 8, 8, 3), (3, 3, 3, 16), (1, 1), "SAME", NHWC),
    ((2, 9, 7, 3), (3, 2, 3, 4), (2, 2), "SAME", NHWC),
    ((2, 9, 7, 3), (3, 2, 3, 4), (2, 3), "VALID", NHWC),
    ((2, 3, 9, 7), (4, 3, 3, 2), (2, 1), "SAME_LOWER", NCHW),
    ((2, 3, 9, 7), (4, 3, 3, 2), (1, 2), ((1, 2), (0, 3)), NCHW),
    ((4, 10, 5), (3, 5, 6), (3,), "SAME", ("NWC", "WIO", "NWC")),
    ((1, 8, 8, 3), (3, 3, 3, 16), (1, 1), "VALID", ("NHWC", "HWIO", "NCHW")),
    ((1, 6, 8, 3), (2, 3, 3, 5), (2, 1), "SAME", ("NHWC", "WHIO", "NHWC")),
    ((2, 3, 5, 6), (4, 3, 2, 2), (1, 1), "VALID", None),
]


@pytest.mark.parametrize("lhs, rhs, strides, padding, dn", CONV_CASES)
def test_conv_general_shape_tuple(lhs: tuple, rhs: tuple, strides: tuple, padding: Any, dn: Any) -> None:
    if dn is None:
        with pytest.raises(TypeError):
            jax.lax.conv_general_shape_tuple(lhs, rhs, strides, padding, dn)
        assert lax.conv_general_shape_tuple(lhs, rhs, strides, padding, dn) == jax.lax.conv_shape_tuple(
            lhs, rhs, strides, padding)
        return
    want = jax.lax.conv_general_shape_tuple(lhs, rhs, strides, padding, dn)
    assert lax.conv_general_shape_tuple(lhs, rhs, strides, padding, dn) == tuple(int(d) for d in want)


@pytest.mark.parametrize("lhs, rhs, strides, padding, dn", [c for c in CONV_CASES if c[4] is not None and
                                                              c[3] in ("SAME", "VALID")])
def test_conv_transpose_shape_tuple(lhs: tuple, rhs: tuple, strides: tuple, padding: Any, dn: Any) -> None:
    want = jax.lax.conv_transpose_shape_tuple(lhs, rhs, strides, padding, dn)
    assert lax.conv_transpose_shape_tuple(lhs, rhs, strides, padding, dn) == tuple(int(d) for d in want)


def test_conv_transpose_shape_tuple_matches_conv_transpose() -> None:
    import numpy as np

    x, k = np.ones((1, 5, 4, 2)), np.ones((3, 3, 2, 6))
    for padding in ("SAME", "VALID"):
        out = lax.conv_transpose(x, k, (2, 2), padding, dimension_numbers=NHWC)
        assert out.shape == lax.conv_transpose_shape_tuple(x.shape, k.shape, (2, 2), padding, NHWC)


@pytest.mark.parametrize("lhs, rhs, strides, padding, dn", CONV_CASES)
def test_conv_dimension_numbers(lhs: tuple, rhs: tuple, strides: tuple, padding: Any, dn: Any) -> None:
    want = jax.lax.conv_dimension_numbers(lhs, rhs, dn)
    got = lax.conv_dimension_numbers(lhs, rhs, dn)
    assert tuple(map(tuple, got)) == tuple(map(tuple, want))
    assert (got.lhs_spec, got.rhs_spec, got.out_spec) == tuple(map(tuple, want))


@pytest.mark.parametrize("in_shape, window, strides, padding", [
    ((8, 8), (3, 3), (1, 1), "SAME"),
    ((9, 7), (3, 2), (2, 2), "SAME"),
    ((9, 7), (3, 2), (2, 3), "SAME_LOWER"),
    ((9, 7), (4, 4), (3, 1), "VALID"),
    ((5,), (6,), (1,), "SAME"),
    ((10, 3, 4), (2, 5, 1), (3, 1, 2), "same"),
])
def test_padtype_to_pads(in_shape: tuple, window: tuple, strides: tuple, padding: str) -> None:
    want = jax.lax.padtype_to_pads(in_shape, window, strides, padding)
    assert lax.padtype_to_pads(in_shape, window, strides, padding) == [tuple(int(v) for v in p) for p in want]


def test_padtype_to_pads_rejects_unknown_padding_as_jax() -> None:
    with pytest.raises(RuntimeError):
        jax.lax.padtype_to_pads((4,), (2,), (1,), "FULL")
    with pytest.raises(RuntimeError, match="FULL"):
        lax.padtype_to_pads((4,), (2,), (1,), "FULL")


@pytest.mark.parametrize("shape, window, strides, padding, base, dil", [
    ((1, 8, 8, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4, None, None),
    ((2, 9, 7, 3), (1, 3, 3, 1), (1, 2, 1, 1), ((0, 0), (1, 1), (0, 2), (0, 0)), None, None),
    ((5, 6), (2, 3), (1, 2), ((1, 0), (2, 2)), (2, 1), None),
    ((5, 6), (2, 3), (2, 1), ((0, 0), (0, 0)), None, (2, 2)),
    ((3, 4), (5, 1), (1, 1), ((0, 0), (0, 0)), None, None),
])
def test_reduce_window_shape_tuple(shape: tuple, window: tuple, strides: tuple, padding: tuple, base: Any,
                                   dil: Any) -> None:
    want = jax.lax.reduce_window_shape_tuple(shape, window, strides, padding, base, dil)
    assert lax.reduce_window_shape_tuple(shape, window, strides, padding, base, dil) == tuple(int(d) for d in want)
