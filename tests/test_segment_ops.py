"""``fungraph.ops``' segment reductions against ``jax.ops``' in both dtype modes: every
reduction over float, integer and bool data, empty segments holding the identity, negative and
too-large ids dropped (or clamped with ``mode="clip"``), ``num_segments`` inferred from concrete
ids, ``bucket_size``, under ``jit`` with repeated traced ids, and derivatives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.core import ConcretizationError
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_segment_reductions_match_jax(name: str, x64: bool) -> None:
    ids = np.array([0, 0, 2, 5, -1, 2, 3])

    def program(lib: Any, np_: Any) -> Any:
        op = getattr(lib.ops, name)
        data = np_.linspace(-1.5, 2.0, 7)
        rows = np_.arange(14.).reshape(7, 2) / 7
        flags = np_.arange(7) % 2 == 0 if name in ("segment_max", "segment_min") else np_.arange(7.) % 2
        return (op(data, ids, 4), op(np_.arange(7), ids, 4), op(flags, ids, num_segments=4),
                op(data, ids), op(np_.arange(7, dtype=np_.int8), ids, 4, mode="clip"), op(rows, ids, 5),
                op(data, ids, 4, bucket_size=3), op(data, np.sort(ids), 6, indices_are_sorted=True),
                lib.jit(lambda d, i: op(d, i, num_segments=4))(data, ids),
                None if name == "segment_prod" else lib.grad(lambda d: np_.sum(op(d, ids, 4) * np_.arange(4.)))(data),
                lib.vmap(lambda d: op(d, ids, 3))(np_.stack([data, -data])))

    check_program(jax, jnp, program, x64, rtol32=1e-6, rtol64=1e-12)


def test_segment_ids_must_be_concrete_to_count_segments() -> None:
    with pytest.raises(ConcretizationError, match="segment_sum: num_segments=None needs concrete segment_ids"):
        fg.jit(lambda d, i: fg.ops.segment_sum(d, i))(np.ones(3), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="segment_sum: num_segments must be non-negative"):
        fg.ops.segment_sum(np.ones(3), np.array([0, 1, 1]), -2)
    with pytest.raises(TypeError, match="segment_ids must be integers"):
        fg.ops.segment_max(fnp.ones(3), fnp.ones(3))


@pytest.mark.parametrize("name", ["segment_sum", "segment_prod", "segment_max", "segment_min"])
def test_bool_data_as_jax(name: str) -> None:
    """JAX refuses bool data where the segment reduction adds or multiplies, and reduces it by
    max and min."""
    jax_, _ = jax_or_skip()
    data, ids = np.array([True, False, True]), np.array([0, 0, 1])
    try:
        want = getattr(jax_.ops, name)(data, ids, num_segments=2)
    except TypeError:
        with pytest.raises(TypeError, match=f"{name}: data of dtype bool"):
            getattr(fg.ops, name)(data, ids, num_segments=2)
        return
    got = getattr(fg.ops, name)(data, ids, num_segments=2)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
