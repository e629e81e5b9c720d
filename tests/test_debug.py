"""``fungraph.debug.print``/``callback``: what is printed, and how often, eagerly, under jit on
both engines, grad, vmap and inside control flow; the optimiser keeps the effect."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import debug, lax


@pytest.fixture(params=["cpu", "opencl"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "opencl":
        request.getfixturevalue("require_opencl")
    return request.param


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def printing(x):
    y = fnp.sin(x) * 2.0
    debug.print("y = {}", y)
    debug.print("sum {s:.4f} first {0}", y[0], s=y.sum())
    return (y ** 2).sum()


X = np.array([0.0, 1.0, 2.0], np.float32)


def expected(x: np.ndarray) -> list[str]:
    y = (np.sin(x) * np.float32(2.0)).astype(np.float32)
    return [f"y = {y}", f"sum {y.sum():.4f} first {y[0]}"]


def test_eager_prints_values(capsys) -> None:
    printing(X)
    assert lines(capsys) == expected(X)


def test_jit_prints_on_every_call_with_that_call_s_values(capsys, backend: str) -> None:
    f = fg.jit(printing, backend=backend)
    f(X)
    f(X + 1)
    out = lines(capsys)
    want = expected(X) + expected(X + 1)
    assert len(out) == 4
    assert [o.split()[0] for o in out] == [w.split()[0] for w in want]
    np.testing.assert_allclose(float(out[1].split()[1]), float(want[1].split()[1]), rtol=1e-4)
    np.testing.assert_allclose(float(out[3].split()[1]), float(want[3].split()[1]), rtol=1e-4)
    assert "debug_callback" in f.lower(X).text


def test_grad_prints_the_primal_values_once(capsys, backend: str) -> None:
    g = fg.jit(fg.grad(printing), backend=backend)
    np.testing.assert_allclose(np.asarray(g(X)), 8 * np.sin(X) * np.cos(X), rtol=1e-5)
    out = lines(capsys)
    assert len(out) == 2 and out[0].startswith("y = ")
    fg.grad(printing)(X)
    assert lines(capsys) == expected(X)


def test_vmap_prints_once_per_example_in_order(capsys) -> None:
    """Each print runs for every example before the next print does, as in JAX."""
    xs = np.stack([X, X + 1])
    fg.vmap(printing)(xs)
    a, b = expected(X), expected(X + 1)
    assert lines(capsys) == [a[0], b[0], a[1], b[1]]
    fg.jit(fg.vmap(printing))(xs)
    assert [o.split()[0] for o in lines(capsys)] == ["y", "y", "sum", "sum"]


def test_loops_print_every_iteration(capsys, backend: str) -> None:
    def body(i, c):
        debug.print("i={} c={}", i, c)
        return c * 1.5

    def f(x):
        return lax.fori_loop(0, 3, body, x)

    def g(x):
        def step(c):
            debug.print("c={}", c)
            return c * 2.0

        return lax.while_loop(lambda c: c < 10.0, step, x)

    fg.jit(f, backend=backend)(np.float32(1.0))
    assert lines(capsys) == ["i=0 c=1.0", "i=1 c=1.5", "i=2 c=2.25"]
    assert float(np.asarray(fg.jit(g, backend=backend)(np.float32(1.0)))) == 16.0
    assert lines(capsys) == ["c=1.0", "c=2.0", "c=4.0", "c=8.0"]
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(lambda x: f(x)), backend=backend)(np.float32(1.0))), 3.375)
    assert lines(capsys) == ["i=0 c=1.0", "i=1 c=1.5", "i=2 c=2.25"]


def test_cond_prints_only_the_branch_taken(capsys, backend: str) -> None:
    def f(x):
        def pos(v):
            debug.print("pos {}", v)
            return v

        def neg(v):
            debug.print("neg {}", v)
            return -v

        return lax.cond(x > 0, pos, neg, x)

    h = fg.jit(f, backend=backend)
    h(np.float32(2.0))
    h(np.float32(-3.0))
    assert lines(capsys) == ["pos 2.0", "neg -3.0"]


def test_scan_prints_each_element(capsys) -> None:
    def f(xs):
        def step(c, x):
            debug.print("x={}", x)
            return c + x, c

        return lax.scan(step, np.float32(0.0), xs)

    fg.jit(f)(np.arange(3, dtype=np.float32))
    assert lines(capsys) == ["x=0.0", "x=1.0", "x=2.0"]


def test_optimiser_keeps_every_print_in_order(capsys) -> None:
    def f(x):
        debug.print("a {}", x)
        debug.print("a {}", x)
        debug.print("b {}", x * 3.0)
        return x + 1.0

    g = fg.jit(f)
    assert float(g(np.float32(1.0))) == 2.0
    assert lines(capsys) == ["a 1.0", "a 1.0", "b 3.0"]
    assert g.lower(np.float32(1.0)).text.count("debug_callback") == 3


def test_a_loop_whose_only_use_is_its_print_is_kept(capsys) -> None:
    def f(x):
        lax.fori_loop(0, 2, lambda i, c: (debug.print("{}", c), c + 1.0)[1], x)
        return x

    fg.jit(f)(np.float32(5.0))
    assert lines(capsys) == ["5.0", "6.0"]


def test_callback_takes_pytrees_and_keywords() -> None:
    seen = []

    def record(tree, *, scale):
        seen.append((np.asarray(tree["a"]).tolist(), np.asarray(tree["b"][0]).tolist(), float(scale)))

    def f(x):
        debug.callback(record, {"a": x, "b": (x * 2.0,)}, scale=x.sum(), ordered=True)
        return x

    fg.jit(f)(np.array([1.0, 2.0], np.float32))
    assert seen == [([1.0, 2.0], [2.0, 4.0], 3.0)]


def test_format_errors_name_the_format_at_the_call() -> None:
    with pytest.raises(ValueError, match=r"'\{\} and \{\}'.*needs 2 positional"):
        fg.jit(lambda x: (debug.print("{} and {}", x), x)[1])(np.float32(1.0))
    with pytest.raises(ValueError, match="needs .* and y"):
        debug.print("{y}", 1.0)
    with pytest.raises(ValueError, match="bad format string"):
        debug.print("{", 1.0)


def test_checkpoint_prints_again_when_the_backward_pass_recomputes(capsys) -> None:
    def f(x):
        debug.print("x {}", x)
        return fnp.sin(x)

    fg.grad(fg.checkpoint(f))(np.float32(0.5))
    assert lines(capsys) == ["x 0.5", "x 0.5"]


def test_graph_pictures_and_text_show_the_print() -> None:
    from fungraph import viz

    g = fg.make_graph(printing)(X)
    fg.verify(g)
    assert "debug_callback" in viz.to_dot(g)
    assert any(e.effectful and not e.outputs for e in g.eqns)
    loop = fg.make_graph(lambda x: lax.fori_loop(0, 2, lambda i, c: (debug.print("{}", c), c)[1], x))(X)
    assert [e.effectful for e in loop.eqns] == [True]
