"""Every public function against numpy (eager and staged) and its derivatives against
finite differences, driven by the op-record table in ``fungraph.testing``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fungraph import dtypes
from fungraph.testing import OP_RECORDS
from tests.helpers import check_derivatives, check_values, check_values_x32, check_zero_tangents

RECORDS = {r.name: r for r in OP_RECORDS}
DIFFERENTIABLE = [r.name for r in OP_RECORDS if r.differentiable]
NON_DIFFERENTIABLE = [r.name for r in OP_RECORDS if not r.differentiable and any(dtypes.is_float(d) for d in r.dtypes)]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=25)
@given(data=st.data())
def test_matches_numpy_eager_and_staged(name: str, data: st.DataObject) -> None:
    check_values(data, RECORDS[name])


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=10)
@given(data=st.data())
def test_matches_numpy_in_32_bit_mode(name: str, data: st.DataObject) -> None:
    """The op-record suite again with ``jax_enable_x64`` off (JAX's default): 32-bit arguments,
    32-bit results, float32 tolerances."""
    check_values_x32(data, RECORDS[name])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=8)
@given(data=st.data())
def test_derivatives_match_finite_differences(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    check_derivatives(data, rec, rec.grad_order)


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
@settings(max_examples=5)
@given(data=st.data())
def test_non_differentiable_ops_have_zero_tangents(name: str, data: st.DataObject) -> None:
    check_zero_tangents(data, RECORDS[name])
