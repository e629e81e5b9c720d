"""Scale: the verifier is linear in the graph's size, deep nesting of ``cond`` and of pytrees
works as deep as JAX's (or fails naming the depth), never with a ``RecursionError``."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var, VerificationError
from tests.helpers import jax_or_skip


def _chain(n: int) -> Graph:
    def f(x):
        for _ in range(n):
            x = fnp.sin(x)
        return x

    return fg.make_graph(f)(np.ones(3))


def _fastest(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def test_verify_is_linear_ten_thousand_equations_well_under_a_second() -> None:
    """Under 0.1 s for 10,000 equations on a quiet machine (it was 120+ s: quadratic); the
    bound is generous for a loaded one."""
    t_big = _fastest(_chain(10_000).verify)
    assert t_big < 5.0, f"verify of 10,000 equations took {t_big:.2f} s"


def _verify_error(graph: Graph) -> str:
    with pytest.raises(VerificationError) as err:
        graph.verify()
    return str(err.value)


def test_verifier_error_texts_name_the_equation_as_before() -> None:
    g = fg.make_graph(lambda x: fnp.sin(fnp.cos(x)) * 2.0)(np.ones(3))
    cos, sin, mul = g.eqns
    assert _verify_error(Graph(g.invars, (), (), (sin, cos, mul), g.outvars)) == \
        "eqn 0 `b:f64[3] = sin c`: var used before it is defined"
    assert _verify_error(Graph(g.invars, (), (), (cos, cos, sin, mul), g.outvars)) == \
        "eqn 1 `b:f64[3] = cos a`: var Var(f64[3]) is defined twice (SSA)"
    wide = Literal(2.0, ShapedArray((2,), np.float64))
    bad_mul = Eqn(mul.primitive, (mul.inputs[0], wide), mul.outputs, mul.params)
    assert _verify_error(Graph(g.invars, (), (), (cos, sin, bad_mul), g.outvars)) == \
        "eqn 2 `d:f64[3] = mul c 2.0:f64[2]`: literal 2.0:f64[2] is not a scalar"
    assert _verify_error(Graph(g.invars, (), (), (cos, Eqn(sin.primitive, sin.inputs * 2, sin.outputs, sin.params),
                                                  mul), g.outvars)) == \
        "eqn 1 `c:f64[3] = sin b b`: sin takes 1 inputs, got 2"
    out4 = Var(ShapedArray((4,), np.float64))
    assert _verify_error(Graph(g.invars, (), (), (cos, sin, Eqn(mul.primitive, mul.inputs, (out4,), mul.params)),
                               (out4,))) == \
        "eqn 2 `d:f64[4] = mul c 2.0:f64[]`: outputs have types f64[4] but mul's shape rule gives f64[3]"
    assert _verify_error(Graph(g.invars, (), (), (cos, sin), g.outvars)) == \
        "graph outputs: var used before it is defined"


def _nested_cond(depth: int, cond):
    """``depth`` conds each holding the next in its true branch (level ``d`` takes it when
    ``v > d``); the innermost adds one."""
    fun = lambda v: v + 1.0  # noqa: E731
    for d in range(1, depth + 1):
        fun = functools.partial(lambda v, d, inner: cond(v > d, inner, lambda u: u - 1.0, v), d=d, inner=fun)
    return fun


def _nested_python(depth: int, x: float) -> float:
    """What :func:`_nested_cond` computes, with a loop: the first level from the outside whose
    test fails subtracts one, else the innermost adds one."""
    for d in range(depth, 0, -1):
        if not x > d:
            return x - 1.0
    return x + 1.0


@pytest.mark.parametrize("x", [300.0, 120.0])
def test_jit_of_cond_nested_past_one_hundred_fifty_deep(x: float) -> None:
    depth = 160
    got = fg.jit(_nested_cond(depth, fg.lax.cond))(x)
    assert float(got) == _nested_python(depth, x)


def test_cond_nested_past_the_stack_names_the_depth() -> None:
    from fungraph.core import NestingError

    with pytest.raises(NestingError, match=r"nests \d+ levels deep") as err:
        fg.jit(_nested_cond(3000, fg.lax.cond))(1.0)
    assert int(str(err.value).split("nests ")[1].split()[0]) > 200


def _deep_list(depth: int, leaf):
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def test_pytrees_nested_nine_hundred_deep_as_jax() -> None:
    jax, _ = jax_or_skip()
    tree = _deep_list(900, np.arange(3.0))
    leaves, treedef = fg.tree_util.tree_flatten(tree)
    assert len(leaves) == len(jax.tree_util.tree_leaves(tree)) == 1
    assert treedef == fg.tree_util.tree_structure(_deep_list(900, 0.0))
    assert treedef != fg.tree_util.tree_structure(_deep_list(899, 0.0))
    assert hash(treedef) == hash(fg.tree_util.tree_structure(_deep_list(900, 1.0)))
    out = fg.jit(lambda t: fg.tree_util.tree_map(lambda x: x * 2.0, t))(tree)
    assert fg.tree_util.tree_structure(out) == treedef
    np.testing.assert_array_equal(fg.tree_util.tree_leaves(out)[0], np.arange(3.0) * 2.0)
    rebuilt = fg.tree_util.tree_unflatten(treedef, [np.ones(2)])
    for _ in range(900):
        assert isinstance(rebuilt, list) and len(rebuilt) == 1
        rebuilt = rebuilt[0]
    np.testing.assert_array_equal(rebuilt, np.ones(2))
