"""The wider numpy API (``fungraph.testing.numpy_records``, one table per family): every
row against numpy eagerly and staged, its derivatives against finite differences (float64), under jit, and under vmap
against a Python loop; plus a few direct checks (isinstance, lists, conventions)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import dtypes
from fungraph.testing.numpy_records import NUMPY_RECORDS
from fungraph.testing.strategies import random_array
from tests.helpers import (
    check_derivatives,
    check_jit_against_eager,
    check_values,
    check_vmap_against_loop,
    check_zero_tangents,
)

ALL_RECORDS = NUMPY_RECORDS
RECORDS = {r.name: r for r in ALL_RECORDS}
assert len(RECORDS) == len(ALL_RECORDS), "op record names must be unique"
DIFFERENTIABLE = [r.name for r in ALL_RECORDS if r.differentiable and "no_grad" not in r.tags]
NON_DIFFERENTIABLE = [r.name for r in ALL_RECORDS
                      if not r.differentiable and any(dtypes.is_float(d) for d in r.dtypes)]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=10)
@given(data=st.data())
def test_matches_numpy_eager_and_staged(name: str, data: st.DataObject) -> None:
    check_values(data, RECORDS[name])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=4)
@given(data=st.data())
def test_derivatives_match_finite_differences(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    check_derivatives(data, rec, 1 if "grad1" in rec.tags else rec.grad_order)


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
@settings(max_examples=2)
@given(data=st.data())
def test_non_differentiable_rows_have_zero_tangents(name: str, data: st.DataObject) -> None:
    check_zero_tangents(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=4)
@given(data=st.data())
def test_jit_matches_eager(name: str, data: st.DataObject) -> None:
    check_jit_against_eager(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=8)
@given(data=st.data())
def test_vmap_matches_a_python_loop(name: str, data: st.DataObject) -> None:
    check_vmap_against_loop(data, RECORDS[name])


@pytest.mark.parametrize("name", ["sort", "cumsum", "cumprod", "eigh", "svd", "inv", "cholesky", "qr", "pad_reflect"])
@settings(max_examples=2)
@given(data=st.data())
def test_per_example_gradients(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    shps = data.draw(rec.shapes, label="shapes")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    xs = np.stack([random_array(rng, shps[0], np.float64, *rec.domain(0, shps)) for _ in range(3)])
    rest = tuple(random_array(rng, s, np.float64, *rec.domain(i + 1, shps)) for i, s in enumerate(shps[1:]))

    def loss(x, *others):
        return fnp.sum(fnp.sin(rec.fun(x, *others)))

    got = fg.vmap(fg.grad(loss), in_axes=(0,) + (None,) * len(rest))(xs, *rest)
    want = np.stack([fg.grad(loss)(x, *rest) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
