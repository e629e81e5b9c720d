"""The IR: immutability, text round-trip, verifier, structural equality, random programs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var, VerificationError
from fungraph.testing import Program, programs

F32 = np.dtype(np.float32)


def _mlp(x, w, b):
    return fnp.tanh(x @ w + b).sum()


def test_text_form_matches_the_documented_example() -> None:
    g = fg.make_graph(lambda a, b: a + b)(np.ones((3, 4), np.float32), np.ones(4, np.float32))
    assert str(g) == "{ lambda a:f32[3,4] b:f32[4] ; let\n    c:f32[3,4] = add a b\n  in (c,) }"


def test_graph_is_immutable() -> None:
    g = fg.make_graph(_mlp)(np.ones((2, 3)), np.ones((3, 4)), np.ones(4))
    assert isinstance(g.eqns, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.eqns = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.eqns[0].params["x"] = 1  # type: ignore[index]


def test_constants_are_read_only_copies() -> None:
    c = np.arange(3.0)
    g = fg.make_graph(lambda x: x * c)(np.ones(3))
    c[0] = 99.0
    assert g.consts[0][0] == 0.0
    with pytest.raises(ValueError):
        g.consts[0][0] = 1.0


def test_parse_round_trip_with_constants_and_literals() -> None:
    c = np.array([[1.5, -2.0], [np.inf, 3.25]], np.float32)
    g = fg.make_graph(lambda x, i: (x * c + 1.0, x[i], fnp.argmax(x, axis=0)))(np.ones((2, 2), np.float32),
                                                                                 np.array([1, 0]))
    back = fg.parse(str(g))
    assert back == g and hash(back) == hash(g)
    assert str(back) == str(g)


def test_structural_equality_ignores_names_but_not_structure() -> None:
    g1 = fg.make_graph(lambda x, y: fnp.sin(x) * y)(np.ones(3), np.ones(3))
    g2 = fg.make_graph(lambda a, b: fnp.sin(a) * b)(np.zeros(3), np.zeros(3))
    g3 = fg.make_graph(lambda a, b: fnp.sin(b) * a)(np.zeros(3), np.zeros(3))
    g4 = fg.make_graph(lambda a, b: fnp.cos(a) * b)(np.zeros(3), np.zeros(3))
    assert g1 == g2 and hash(g1) == hash(g2)
    assert g1 != g3
    assert g1 != g4
    assert len({g1, g2, g3, g4}) == 3


def test_verifier_rejects_bad_types_and_names_the_eqn() -> None:
    g = fg.make_graph(lambda x, y: x + y)(np.ones(3, np.float32), np.ones(3, np.float32))
    eqn = g.eqns[0]
    bad_out = Var(ShapedArray((4,), F32))
    bad = Graph(g.invars, (), (), (Eqn(eqn.primitive, eqn.inputs, (bad_out,), eqn.params),), (bad_out,))
    with pytest.raises(VerificationError, match=r"eqn 0 .*add.*f32\[4\].*shape rule gives f32\[3\]"):
        bad.verify()


def test_verifier_rejects_use_before_definition_and_double_definition() -> None:
    g = fg.make_graph(lambda x: fnp.sin(fnp.cos(x)))(np.ones(3))
    swapped = Graph(g.invars, (), (), (g.eqns[1], g.eqns[0]), g.outvars)
    with pytest.raises(VerificationError, match="before it is defined"):
        swapped.verify()
    twice = Graph(g.invars, (), (), (g.eqns[0], g.eqns[0]), g.outvars)
    with pytest.raises(VerificationError, match="defined twice"):
        twice.verify()
    with pytest.raises(VerificationError, match="not a scalar"):
        lit = Literal(1.0, ShapedArray((2,), np.float64))
        Graph(g.invars, (), (), (Eqn(g.eqns[0].primitive, (lit,), g.eqns[0].outputs, g.eqns[0].params),),
              g.outvars).verify()


def test_verifier_checks_arity() -> None:
    g = fg.make_graph(lambda x: fnp.sin(x))(np.ones(3))
    e = g.eqns[0]
    with pytest.raises(VerificationError, match="takes 1 inputs, got 2"):
        Graph(g.invars, (), (), (Eqn(e.primitive, e.inputs * 2, e.outputs, e.params),), g.outvars).verify()


def test_parse_errors_are_clear() -> None:
    with pytest.raises(fg.ParseError, match="unknown primitive `frobnicate`"):
        fg.parse("{ lambda a:f32[3] ; let\n b:f32[3] = frobnicate a\n in (b,) }")
    with pytest.raises(fg.ParseError, match="undefined var 'zz'"):
        fg.parse("{ lambda a:f32[3] ; let\n b:f32[3] = sin zz\n in (b,) }")


def test_graphs_written_as_text_evaluate() -> None:
    g = fg.parse("""{ lambda a:f64[2,3] b:f64[3] ; let
        c:f64[2,3] = mul a b
        d:f64[2] = reduce_sum[axes=(1,)] c
        e:f64[2] = add d 1.0:f64[]
      in (e,) }""")
    g.verify()
    a, b = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(fg.eval_graph(g, a, b)[0], (a * b).sum(1) + 1)


def test_source_lines_are_recorded() -> None:
    g = fg.make_graph(lambda x: fnp.sin(x))(1.0)
    assert "test_ir.py" in g.pretty(source=True)


@settings(max_examples=60)
@given(prog=programs())
def test_random_programs_print_parse_verify_and_evaluate(prog: Program) -> None:
    g = prog.graph
    g.verify()
    back = fg.parse(str(g))
    assert back == g
    back.verify()
    want = prog.fun(*prog.args)
    got = fg.eval_graph(back, *prog.args)
    assert len(got) == len(want)
    for w, o in zip(want, got):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(w))


def _rebuilt_key(g: Graph) -> tuple:
    return Graph(g.invars, g.constvars, g.consts, g.eqns, g.outvars).structural_key


@settings(max_examples=40)
@given(prog=programs())
def test_key_built_while_staging_equals_the_recomputed_key(prog: Program) -> None:
    assert "structural_key" in prog.graph.__dict__
    assert prog.graph.structural_key == _rebuilt_key(prog.graph)


def test_staged_key_with_constants_literals_and_closed_over_tracers() -> None:
    c = np.arange(6.0).reshape(2, 3)
    seen = []

    def outer(y):
        def inner(x):
            return fnp.sin(x) * y + c * 2.0 + 1.0, x

        g, closure = fg.interpreters.staging.stage(lambda x: list(inner(x)), [ShapedArray((2, 3), np.float64)])
        seen.append(g)
        return fnp.sum(fg.eval_graph(g, np.ones((2, 3)), *closure)[0])

    fg.grad(outer)(np.ones((2, 3)))
    g = seen[0]
    assert len(g.invars) == 2 and len(g.constvars) >= 1
    assert g.structural_key == _rebuilt_key(g)
    other = fg.make_graph(lambda x: fnp.sin(x) * 2.0)(np.ones((2, 3)))
    assert other.structural_key == _rebuilt_key(other) and other != g


def test_eval_graph_checks_argument_types() -> None:
    g = fg.make_graph(lambda x: x + 1.0)(np.ones(3))
    with pytest.raises(TypeError, match=r"input 0 has type f64\[3\], but the argument has type f64\[4\]"):
        fg.eval_graph(g, np.ones(4))


def test_eval_graph_errors_name_the_eqn() -> None:
    def broken(x):
        raise RuntimeError("host failure")

    g = fg.make_graph(lambda x: fg.pure_callback(broken, fg.ShapeDtypeStruct((3,), np.float64), x) + 1.0)(np.ones(3))
    with pytest.raises(RuntimeError, match="host failure") as info:
        fg.eval_graph(g, np.ones(3))
    assert "while executing eqn 0: `b:f64[3] = pure_callback" in "".join(getattr(info.value, "__notes__", []))
