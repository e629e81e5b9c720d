"""Defects found by probing as a hostile user would (issue #36): silent wrong answers, edge
derivatives, and bad input that must raise a clear error. Each case is checked against JAX
where JAX defines the behaviour, or against the CPU engine for the OpenCL backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax
from fungraph.testing.strategies import Program, programs
from fungraph.tree_util import tree_flatten
from tests.helpers import jax_or_skip

# --- OpenCL: gradients of indexing by a traced scalar (#36 item 1) ---------------------------------

_RNG = np.random.default_rng(36)
_X2 = _RNG.standard_normal((3, 4))
_X3 = _RNG.standard_normal((3, 2, 4))
_W = _RNG.standard_normal(4)

#: Losses reading or writing ``x`` at a traced scalar ``i`` (0, 1 or 2): their gradients scatter
#: rows by a computed index, which the OpenCL engine once read through the work-item id.
TRACED_INDEXING = {
    "x[i]": (lambda x, i: fnp.sum(_W * x[i] ** 2), _X2),
    "x[i, :]": (lambda x, i: fnp.sum(_W * x[i, :] ** 2), _X2),
    "x[:, i]": (lambda x, i: fnp.sum(x[:, i] ** 2 * _W[:3]), _X2),
    "x[i, i]": (lambda x, i: x[i, i] ** 2, _X2),
    "x[-1 - i]": (lambda x, i: fnp.sum(_W * x[-1 - i] ** 2), _X2),
    "rank 3 x[i]": (lambda x, i: fnp.sum(x[i] ** 2 * _W), _X3),
    "rank 3 x[:, :, i]": (lambda x, i: fnp.sum(x[:, :, i] ** 3), _X3),
    "dynamic_slice": (lambda x, i: fnp.sum(lax.dynamic_slice(x, (i, 0), (2, 4)) ** 2), _X2),
    "dynamic_index_in_dim": (lambda x, i: fnp.sum(lax.dynamic_index_in_dim(x, i, 1, keepdims=False) ** 2), _X2),
    "take": (lambda x, i: fnp.sum(fnp.take(x, i, axis=0) ** 2 * _W), _X2),
    "at[i].set": (lambda x, i: fnp.sum(x.at[i].set(fnp.sin(x[0])) ** 2), _X2),
    "at[i].add": (lambda x, i: fnp.sum(x.at[i].add(_W * x[i]) ** 2), _X2),
    "at[i].multiply": (lambda x, i: fnp.sum(x.at[i].multiply(_W) ** 2), _X2),
    "dynamic_update_slice": (lambda x, i: fnp.sum(lax.dynamic_update_slice(x, fnp.tanh(x[:1]), (i, 0)) ** 2), _X2),
    "fori_loop at[k].set": (lambda x, i: fnp.sum(lax.fori_loop(
        0, 3, lambda k, c: c.at[k].set(fnp.sin(c[k - i]) * _W), x) ** 2), _X2),
    "fori_loop at[k].add": (lambda x, i: fnp.sum(lax.fori_loop(
        0, 3, lambda k, c: c.at[k].add(c[k] * x[i]), x) ** 2), _X2),
    "fori_loop from i": (lambda x, i: fnp.sum(lax.fori_loop(
        i, 3, lambda k, c: c.at[k].set(fnp.sin(c[k - 1]) * 2.0), x) ** 2), _X2),
}


@pytest.mark.usefixtures("require_opencl")
@pytest.mark.parametrize("name", list(TRACED_INDEXING))
def test_opencl_gradient_of_traced_scalar_indexing_matches_the_cpu(name: str) -> None:
    f, x = TRACED_INDEXING[name]
    for i in (0, 1, 2):
        want = np.asarray(fg.jit(fg.grad(f))(x, i))
        got = np.asarray(fg.jit(fg.grad(f), backend="opencl")(x, i))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{name}, i={i}")


#: The same with an index known when compiling (a literal): the OpenCL engine once typed a
#: scalar constant ``(1,)``, so the scatter read the first update for every element of a row.
LITERAL_INDEXING = {
    "take(x, 1)": lambda x: fnp.sum(fnp.tanh(fnp.take(x, 1, axis=0)) * _W),
    "take(x, 2, axis=1)": lambda x: fnp.sum(fnp.tanh(fnp.take(x, 2, axis=1)) * _W[:3]),
    "index folded to a literal": lambda x: fnp.sum(fnp.tanh(x[(fnp.max(x) > 99.0).astype(np.int32) * 2]) * _W),
}


@pytest.mark.usefixtures("require_opencl")
@pytest.mark.parametrize("name", list(LITERAL_INDEXING))
def test_opencl_gradient_of_literal_indexing_matches_the_cpu(name: str) -> None:
    f = LITERAL_INDEXING[name]
    want = np.asarray(fg.jit(fg.grad(f))(_X2))
    got = np.asarray(fg.jit(fg.grad(f), backend="opencl")(_X2))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.usefixtures("require_opencl")
def test_opencl_gradient_of_a_row_at_a_traced_index_goes_to_that_row() -> None:
    """The probe's case: ``sum(w * x[i])`` with ``x`` 3x2 has gradient ``w`` in row ``i``."""
    w = np.array([10.0, 20.0])
    x = np.arange(6.0).reshape(3, 2)
    got = fg.jit(fg.grad(lambda x, i: fnp.sum(w * x[i])), backend="opencl")(x, 1)
    np.testing.assert_array_equal(np.asarray(got), [[0, 0], [10, 20], [0, 0]])


@pytest.mark.usefixtures("require_opencl")
@settings(max_examples=30, deadline=None)
@given(prog=programs(max_eqns=6, control_ops=("index_traced", "fori_update", "take_perm")))
def test_random_program_gradients_on_opencl_match_the_cpu(prog: Program) -> None:
    """Gradients of random programs (gathers and updates at traced scalar indices among the
    steps) on OpenCL against the CPU engine."""

    def loss(*xs):
        return sum(fnp.sum(o) for o in prog.fun(*xs))

    g = fg.grad(loss, argnums=tuple(range(len(prog.args))))
    got = fg.jit(g, backend="opencl")(*prog.args)
    want = fg.jit(g)(*prog.args)
    for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4, err_msg=repr(prog))


# --- cond and switch predicates (#36 item 2) ---------------------------------------------------

PREDICATES = [0.5, -1, 2**32, np.nan, -0.0, 0.0, np.float32(0.25), True, False, np.uint8(0), np.int64(-3)]


@pytest.mark.parametrize("pred", PREDICATES, ids=repr)
def test_cond_takes_any_nonzero_number_as_true_eagerly_and_jitted(pred) -> None:
    jax, _ = jax_or_skip()
    want = int(jax.lax.cond(pred, lambda: 1, lambda: 0))
    assert want == (1 if pred else 0)
    assert int(lax.cond(pred, lambda: 1, lambda: 0)) == want
    assert int(fg.jit(lambda p: lax.cond(p, lambda: 1, lambda: 0))(pred)) == want


def test_cond_on_a_traced_negative_sum_takes_the_true_branch() -> None:
    jax, jnp = jax_or_skip()
    v = np.array([-1.0, -2.0])

    def f(cond, m):
        return lambda v: cond(m.sum(v), lambda u: u * 2.0, lambda u: u - 1.0, v)

    want = np.asarray(jax.jit(f(jax.lax.cond, jnp))(v))
    np.testing.assert_array_equal(np.asarray(fg.jit(f(lax.cond, fnp))(v)), want)
    np.testing.assert_array_equal(np.asarray(f(lax.cond, fnp)(v)), want)


@pytest.mark.parametrize("index", [1.7, True, 1j, np.float32(1.0)], ids=repr)
def test_switch_on_a_non_integer_index_is_a_type_error_as_in_jax(index) -> None:
    jax, _ = jax_or_skip()
    branches = [lambda: 0, lambda: 1, lambda: 2]
    with pytest.raises(TypeError):
        jax.lax.switch(index, branches)
    with pytest.raises(TypeError, match="(?s)switch index must be an integer.*at .*test_reliability.py"):
        lax.switch(index, branches)
    with pytest.raises(TypeError, match="switch index must be an integer"):
        fg.jit(lambda i: lax.switch(i, branches))(index)


@pytest.mark.parametrize("index", [-1, 5, 2**32 + 1, np.uint32(1), np.int64(2**40)], ids=repr)
def test_switch_on_an_integer_index_clamps_as_jax(index) -> None:
    jax, _ = jax_or_skip()
    branches = [lambda: 0, lambda: 1, lambda: 2]
    assert int(lax.switch(index, branches)) == int(jax.lax.switch(index, branches))


def test_cond_on_a_complex_predicate_is_a_type_error_as_in_jax() -> None:
    jax, _ = jax_or_skip()
    with pytest.raises(TypeError):
        jax.lax.cond(1j, lambda: 1, lambda: 0)
    with pytest.raises(TypeError, match="cond predicate must be a bool or a real number.*complex128"):
        lax.cond(1j, lambda: 1, lambda: 0)
