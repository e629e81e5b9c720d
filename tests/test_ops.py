"""Every public function against numpy (eager and staged) and its derivatives against
finite differences, driven by the op-record table in ``fungraph.testing``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
from fungraph import dtypes
from fungraph.testing import OP_RECORDS, check_grads
from tests.helpers import assert_matches, draw_args, tolerance, with_float_args

RECORDS = {r.name: r for r in OP_RECORDS}
DIFFERENTIABLE = [r.name for r in OP_RECORDS if r.differentiable]
NON_DIFFERENTIABLE = [r.name for r in OP_RECORDS if not r.differentiable and any(dtypes.is_float(d) for d in r.dtypes)]


@pytest.mark.parametrize("name", list(RECORDS))
@settings(max_examples=25)
@given(data=st.data())
def test_matches_numpy_eager_and_staged(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec)
    with np.errstate(all="ignore"):
        want = rec.ref(*args)
    tol = tolerance(rec, args)
    assert_matches(rec.fun(*args), want, tol, f"{name} eager")
    graph = fg.make_graph(rec.fun)(*args)
    graph.verify()
    (staged,) = fg.eval_graph(graph, *args)
    assert_matches(staged, want, tol, f"{name} via eval_graph(make_graph)")


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=8)
@given(data=st.data())
def test_derivatives_match_finite_differences(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, float_args = with_float_args(rec.fun, args)
    check_grads(f, float_args, order=rec.grad_order)


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
@settings(max_examples=5)
@given(data=st.data())
def test_non_differentiable_ops_have_zero_tangents(name: str, data: st.DataObject) -> None:
    rec = RECORDS[name]
    args = draw_args(data, rec, dtype_choices=(dtypes.float64,), seeded=True)
    f, float_args = with_float_args(rec.fun, args)
    out, t_out = fg.jvp(f, tuple(float_args), tuple(np.ones_like(a) for a in float_args))
    np.testing.assert_array_equal(np.asarray(t_out), np.zeros(np.shape(out), np.asarray(t_out).dtype))
