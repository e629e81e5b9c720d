"""Collectives over named vmap axes against JAX: values, gradients in both orders, nested
names, jit inside and outside, control flow, and the unbound-name error."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import lax as flax
from fungraph.primitives import collectives as fc
from tests.helpers import jax_or_skip

COLLECTIVES = ("psum", "pmean", "pmax", "pmin", "axis_index", "all_gather", "psum_scatter", "ppermute", "pshuffle",
               "all_to_all", "pswapaxes")


def _namespaces() -> tuple[SimpleNamespace, SimpleNamespace]:
    """The same names over JAX and over fungraph, so one program text runs on both."""
    jax, jnp = jax_or_skip()
    ours = SimpleNamespace(vmap=fg.vmap, grad=fg.grad, jit=fg.jit, jacfwd=fg.jacfwd, jacrev=fg.jacrev, np=fnp,
                           lax=flax, **{n: getattr(fc, n) for n in COLLECTIVES})
    theirs = SimpleNamespace(vmap=jax.vmap, grad=jax.grad, jit=jax.jit, jacfwd=jax.jacfwd, jacrev=jax.jacrev,
                             np=jnp, lax=jax.lax, **{n: getattr(jax.lax, n) for n in COLLECTIVES})
    return ours, theirs


def _check(program: Callable[[SimpleNamespace], Callable[..., Any]], *args: Any) -> None:
    ours, theirs = _namespaces()
    got = program(ours)(*args)
    want = program(theirs)(*args)
    got_leaves, want_leaves = fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        w = np.asarray(w)
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10, atol=1e-12)


XS = np.array([0.5, -1.25, 2.0, 3.5])
GRID = np.arange(12.0).reshape(3, 4) / 7.0 - 0.6
ROWS = np.arange(12.0).reshape(4, 3) ** 1.5 / 10.0
SHUFFLE = [2, 3, 1, 0]
CUBE = np.arange(48.0).reshape(4, 4, 3) / 7.0
TALL = np.arange(64.0).reshape(4, 8, 2) / 5.0

VALUES: dict[str, tuple[Callable[[SimpleNamespace], Callable[..., Any]], np.ndarray]] = {
    "psum": (lambda c: c.vmap(lambda x: c.psum(x, "i"), axis_name="i"), XS),
    "pmean": (lambda c: c.vmap(lambda x: c.pmean(x, "i"), axis_name="i"), XS),
    "pmax": (lambda c: c.vmap(lambda x: c.pmax(x, "i"), axis_name="i"), ROWS),
    "pmin": (lambda c: c.vmap(lambda x: c.pmin(x, "i"), axis_name="i", in_axes=1), ROWS),
    "axis_index": (lambda c: c.vmap(lambda x: x * c.axis_index("i"), axis_name="i"), XS),
    "batch_norm": (lambda c: c.vmap(lambda x: x - c.pmean(x, "i"), axis_name="i"), ROWS),
    "unmapped": (lambda c: c.vmap(lambda x, y: c.psum(y, "i") + x, in_axes=(0, None), axis_name="i"), XS),
    "constant": (lambda c: c.vmap(lambda x: c.psum(2.0, "i") * x + c.pmax(1.0, "i"), axis_name="i"), XS),
    "pytree": (lambda c: c.vmap(lambda x: c.psum({"a": x, "b": (x * 2, 1.0)}, "i"), axis_name="i"), XS),
    "out_axes_none": (lambda c: c.vmap(lambda x: c.psum(x, "i"), axis_name="i", out_axes=None), ROWS),
    "all_gather": (lambda c: c.vmap(lambda x: c.all_gather(x, "i"), axis_name="i"), ROWS),
    "all_gather_axis": (lambda c: c.vmap(lambda x: c.all_gather(x, "i", axis=1), axis_name="i"), ROWS),
    "all_gather_tiled": (lambda c: c.vmap(lambda x: c.all_gather(x, "i", tiled=True), axis_name="i"), ROWS),
    "psum_scatter": (lambda c: c.vmap(lambda x: c.psum_scatter(x, "i"), axis_name="i"),
                     np.arange(16.0).reshape(4, 4)),
    "psum_scatter_tiled": (lambda c: c.vmap(lambda x: c.psum_scatter(x, "i", scatter_dimension=1, tiled=True),
                                            axis_name="i"), np.arange(48.0).reshape(4, 3, 4)),
    "ppermute": (lambda c: c.vmap(lambda x: c.ppermute(x, "i", [(0, 1), (1, 3), (2, 0), (3, 2)]), axis_name="i"),
                 ROWS),
    "pshuffle": (lambda c: c.vmap(lambda x: c.pshuffle(x, "i", [3, 0, 2, 1]) * x, axis_name="i"), ROWS),
    "all_to_all": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 0, 0), axis_name="i"), CUBE),
    "all_to_all_concat_1": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 0, 1), axis_name="i"), CUBE),
    "all_to_all_split_1": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 1, 0), axis_name="i"),
                           np.transpose(CUBE, (0, 2, 1)).copy()),
    "all_to_all_tiled": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 0, 1, tiled=True), axis_name="i"), TALL),
    "all_to_all_tiled_same": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 0, 0, tiled=True), axis_name="i"),
                              TALL),
    "all_to_all_in_axes": (lambda c: c.vmap(lambda x: c.all_to_all(x, "i", 0, 1), axis_name="i", in_axes=1),
                           np.transpose(CUBE, (1, 0, 2)).copy()),
    "pswapaxes": (lambda c: c.vmap(lambda x: c.pswapaxes(x, "i", 0), axis_name="i"), CUBE),
}


@pytest.mark.parametrize("name", list(VALUES))
def test_values_match_jax(name: str) -> None:
    program, x = VALUES[name]
    if name == "unmapped":
        _check(program, x, np.float64(3.0))
    else:
        _check(program, x)


def test_integer_operands_match_jax() -> None:
    ints = np.arange(5)
    _check(lambda c: c.vmap(lambda x: (c.psum(x, "i"), c.pmean(x, "i"), c.pmax(x, "i")), axis_name="i"), ints)


def _bn(c: SimpleNamespace) -> Callable[..., Any]:
    return lambda x: c.np.sum((x - c.pmean(x, "i")) ** 2 * c.np.sin(x))


GRADS: dict[str, Callable[[SimpleNamespace], Callable[..., Any]]] = {
    "psum": lambda c: c.vmap(c.grad(lambda x: c.psum(x, "i")), axis_name="i"),
    "pmean": lambda c: c.vmap(c.grad(lambda x: c.pmean(x, "i") ** 2), axis_name="i"),
    "x_psum": lambda c: c.vmap(c.grad(lambda x: x * c.psum(x * x, "i")), axis_name="i"),
    "batch_norm": lambda c: c.vmap(c.grad(_bn(c)), axis_name="i"),
    "all_gather": lambda c: c.vmap(c.grad(lambda x: c.np.sum(c.all_gather(x, "i") ** 3)), axis_name="i"),
    "psum_scatter": lambda c: c.vmap(c.grad(lambda x: c.np.sum(c.np.sin(c.psum_scatter(x, "i")))),
                                     axis_name="i"),
    "outer": lambda c: c.grad(lambda xs: c.np.sum(c.vmap(_bn(c), axis_name="i")(xs))),
    "ppermute": lambda c: c.grad(lambda xs: c.np.sum(c.vmap(lambda x: c.np.sin(x) * c.pshuffle(x * x, "i", SHUFFLE),
                                                            axis_name="i")(xs) ** 2)),
    "all_to_all": lambda c: c.grad(lambda xs: c.np.sum(c.np.cos(c.vmap(lambda x: c.all_to_all(x ** 3, "i", 0, 0),
                                                                       axis_name="i")(xs)) * c.np.arange(4.0))),
    "jit_inside": lambda c: c.vmap(c.jit(c.grad(_bn(c))), axis_name="i"),
    "grad_of_jit": lambda c: c.vmap(c.grad(c.jit(_bn(c))), axis_name="i"),
    "jit_outside": lambda c: c.jit(c.grad(lambda xs: c.np.sum(c.vmap(_bn(c), axis_name="i")(xs)))),
    "jacrev": lambda c: c.jacrev(c.vmap(lambda x: c.np.sum(x - c.pmean(x, "i")) ** 2, axis_name="i")),
    "jacfwd": lambda c: c.jacfwd(c.vmap(lambda x: c.np.sin(x * c.psum(x, "i")), axis_name="i")),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_jax(name: str) -> None:
    x = np.arange(16.0).reshape(4, 4) / 5.0 - 1.0 if name in ("psum_scatter", "all_to_all") else ROWS
    if name in ("psum", "pmean", "x_psum"):
        x = XS
    _check(GRADS[name], x)


def test_pmax_gradient_is_that_of_the_maximum() -> None:
    """JAX has no derivative of pmax; ours is reduce_max's (ties share the tangent), and
    per-example gradients follow psum's convention (the cotangents of all examples add)."""
    jax, jnp = jax_or_skip()
    n = ROWS.shape[0]
    want = jax.grad(lambda xs: n * jnp.sum(jnp.max(xs * xs, 0)))(ROWS)
    outer = fg.grad(lambda xs: fnp.sum(fg.vmap(lambda x: fc.pmax(x * x, "i"), axis_name="i")(xs)))(ROWS)
    per_example = fg.vmap(fg.grad(lambda x: fnp.sum(fc.pmax(x * x, "i"))), axis_name="i")(ROWS)
    np.testing.assert_allclose(outer, want)
    np.testing.assert_allclose(per_example, want)


def _nested(c: SimpleNamespace, f: Callable[..., Any]) -> Callable[..., Any]:
    return c.vmap(c.vmap(f, axis_name="j"), axis_name="i")


NESTED: dict[str, Callable[[SimpleNamespace], Callable[..., Any]]] = {
    "psum_both": lambda c: _nested(c, lambda x: c.psum(x, ("i", "j"))),
    "psum_outer": lambda c: _nested(c, lambda x: c.psum(x, "i")),
    "psum_inner": lambda c: _nested(c, lambda x: c.psum(x, "j")),
    "pmean_pmax": lambda c: _nested(c, lambda x: c.pmean(x, ("j", "i")) + c.pmax(x, ("i", "j"))),
    "axis_index": lambda c: _nested(c, lambda x: c.axis_index(("i", "j")) + 100 * c.axis_index(("j", "i"))),
    "grad": lambda c: _nested(c, c.grad(lambda x: (x - c.pmean(x, "i")) ** 2 * c.psum(x, "j"))),
    "outer_grad": lambda c: c.grad(lambda g: c.np.sum(_nested(c, lambda x: c.np.sin(x - c.pmean(x, ("i", "j"))))(g))),
    "jit_between": lambda c: c.vmap(c.jit(c.vmap(lambda x: c.psum(x, "i") * c.axis_index("j"), axis_name="j")),
                                    axis_name="i"),
    "same_name_shadows": lambda c: c.vmap(c.vmap(lambda x: c.psum(x, "i"), axis_name="i"), axis_name="i"),
    "ppermute_outer": lambda c: _nested(c, lambda x: c.pshuffle(x, "i", [1, 2, 0]) - x),
    "all_to_all_outer": lambda c: c.vmap(c.vmap(lambda x: c.all_to_all(x, "i", 0, 0), axis_name="j"),
                                         axis_name="i", in_axes=1),
}


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_names_match_jax(name: str) -> None:
    _check(NESTED[name], np.arange(27.0).reshape(3, 3, 3) / 4.0 if name == "all_to_all_outer" else GRID)


def test_partial_permutations_send_zeros_and_bad_ones_are_refused() -> None:
    """JAX's pmap takes a partial ``perm`` (examples nobody sends to get zeros); its vmap
    refuses one, ours runs it. A repeated destination or an example out of range is an error."""
    got = fg.vmap(lambda x: fc.ppermute(x, "i", [(0, 2), (3, 1)]), axis_name="i")(ROWS)
    np.testing.assert_array_equal(got, np.stack([0 * ROWS[0], ROWS[3], ROWS[0], 0 * ROWS[0]]))
    jitted = fg.jit(fg.vmap(fg.grad(lambda x: fnp.sum(fc.ppermute(x, "i", [(0, 2), (3, 1)]) ** 2)), axis_name="i"))
    np.testing.assert_allclose(jitted(ROWS), np.stack([2 * ROWS[0], 0 * ROWS[0], 0 * ROWS[0], 2 * ROWS[3]]))
    with pytest.raises(ValueError, match="repeats a source or a destination"):
        fg.vmap(lambda x: fc.ppermute(x, "i", [(0, 1), (2, 1)]), axis_name="i")(ROWS)
    with pytest.raises(ValueError, match="outside 0..3"):
        fg.vmap(lambda x: fc.ppermute(x, "i", [(0, 4)]), axis_name="i")(ROWS)
    with pytest.raises(fg.core.ShapeError, match="must equal the axis size 4"):
        fg.vmap(lambda x: fc.all_to_all(x, "i", 0, 0), axis_name="i")(ROWS)


def test_tuple_gathers_are_row_major_over_the_names() -> None:
    got = fg.vmap(fg.vmap(lambda x: fc.all_gather(x, ("i", "j")), axis_name="j"), axis_name="i")(GRID)
    np.testing.assert_array_equal(got, np.broadcast_to(GRID.reshape(-1), (3, 4, 12)))
    parts = np.arange(3 * 4 * 12.0).reshape(3, 4, 12)
    got = fg.vmap(fg.vmap(lambda x: fc.psum_scatter(x, ("i", "j")), axis_name="j"), axis_name="i")(parts)
    np.testing.assert_array_equal(got, parts.sum((0, 1)).reshape(3, 4))


CONTROL_FLOW: dict[str, Callable[[SimpleNamespace], Callable[..., Any]]] = {
    "fori_loop": lambda c: c.vmap(lambda x: c.lax.fori_loop(0, 3, lambda k, v: v - 0.5 * c.pmean(v * v, "i"), x),
                                  axis_name="i"),
    "cond": lambda c: c.vmap(lambda x: c.lax.cond(x > 1.0, lambda v: c.psum(v, "i"), lambda v: -v, x),
                             axis_name="i"),
    "scan": lambda c: c.vmap(lambda x: c.lax.scan(lambda s, a: (s + c.psum(a * s, "i"), s), x,
                                                  c.np.arange(3.0))[0], axis_name="i"),
    "grad_scan": lambda c: c.vmap(c.grad(lambda x: c.lax.scan(lambda s, a: (c.np.sin(s - c.pmean(s, "i")), a),
                                                              x, c.np.arange(3.0))[0]), axis_name="i"),
    "jit_of_constants": lambda c: c.vmap(lambda x: x + c.jit(lambda v: c.psum(v, "i"))(c.np.ones(2)),
                                         axis_name="i"),
}


@pytest.mark.parametrize("name", list(CONTROL_FLOW))
def test_control_flow_and_jit_match_jax(name: str) -> None:
    x = XS[:, None] * np.ones(2) if name == "jit_of_constants" else XS
    _check(CONTROL_FLOW[name], x)


def test_collectives_inside_vmap_stage_as_reductions() -> None:
    graph = fg.make_graph(fg.vmap(lambda x: x - fc.pmean(x, "i"), axis_name="i"))(XS)
    names = {e.primitive.name for e in graph.eqns}
    assert "reduce_sum" in names and not names & {"psum", "pmean"}


def test_an_unbound_name_names_the_source_line() -> None:
    with pytest.raises(NameError, match=r"unbound axis name 'k'(.|\n)*test_collectives.py"):
        fg.vmap(lambda x: fc.psum(x, "k"), axis_name="i")(XS)
    with pytest.raises(NameError, match="unbound axis name 'i': .* outside any vmap"):
        fc.psum(XS, "i")
    with pytest.raises(NameError, match="unbound axis name 'i'"):
        fg.jit(lambda x: fc.axis_index("i") + x)(XS)
    with pytest.raises(NameError, match="unbound axis name 'i'"):
        fg.vmap(lambda x: fc.pmean(x, "i"))(XS)


def test_a_jit_of_constants_rejects_a_different_axis_size() -> None:
    gather = fg.jit(lambda v: fc.all_gather(v, "i"))
    assert fg.vmap(lambda x: gather(np.ones(2)), axis_name="i")(XS).shape == (4, 4, 2)
    with pytest.raises(ValueError, match="staged for an axis of size 4"):
        fg.vmap(lambda x: gather(np.ones(2)), axis_name="i")(XS[:3])


def test_a_jitted_graph_batched_under_two_names() -> None:
    psum_i = fg.jit(lambda x: fc.psum(x, "i"))
    fg.vmap(psum_i, axis_name="i")(GRID[0, :3])
    got = fg.vmap(fg.vmap(psum_i, axis_name="j"), axis_name="i")(GRID[:, :3])
    np.testing.assert_allclose(got, np.broadcast_to(GRID[:, :3].sum(0), (3, 3)))


def test_collectives_are_exported_from_lax() -> None:
    for name in ("psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "axis_index", "axis_size", "ppermute",
                 "pshuffle", "all_to_all", "pswapaxes"):
        assert getattr(fg.lax, name) is getattr(fc, name)


@pytest.mark.parametrize("x64", [False, True])
def test_collectives_keep_the_weak_type_as_jax(x64: bool) -> None:
    """A weakly typed operand (a Python scalar, a weak array) stays weak through ``psum``,
    ``pmean``, ``pmax`` and ``all_gather`` under ``vmap(axis_name=...)``, as JAX's; a strong one
    stays strong, and ``axis_index`` is strong."""
    jax_, jnp_ = jax_or_skip()
    cases = {
        "psum of a Python scalar": lambda lib, np_, x: lib.lax.psum(1.0, "i"),
        "psum of a weak array": lambda lib, np_, x: lib.lax.psum(np_.asarray(2.0), "i"),
        "psum of a strong value": lambda lib, np_, x: lib.lax.psum(x * 0 + 1.0, "i"),
        "pmean of a weak array": lambda lib, np_, x: lib.lax.pmean(np_.asarray(2.0), "i"),
        "pmax of a Python scalar": lambda lib, np_, x: lib.lax.pmax(3.0, "i"),
        "pmin of a Python int": lambda lib, np_, x: lib.lax.pmin(3, "i"),
        "all_gather of a weak array": lambda lib, np_, x: lib.lax.all_gather(np_.asarray(2.0), "i"),
        "axis_index": lambda lib, np_, x: lib.lax.axis_index("i"),
    }
    x = np.arange(3, dtype=np.float32)
    for name, fun in cases.items():
        with fg.enable_x64(x64), jax_.enable_x64(x64):
            want = jax_.vmap(lambda v: fun(jax_, jnp_, v), axis_name="i")(x)
            got = fg.vmap(lambda v: fun(fg, fnp, v), axis_name="i")(x)
        assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type), name
        np.testing.assert_allclose(got, want)
