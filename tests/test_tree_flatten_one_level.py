"""``fungraph.tree_util.flatten_one_level`` against JAX 0.10's on built-in, namedtuple and
registered nodes, and its error on a leaf."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from fungraph import tree_util as ftu
from tests.helpers import jax_or_skip

jax, _ = jax_or_skip()

Point = collections.namedtuple("Point", "x y")


class Box:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


jax.tree_util.register_pytree_node(Box, lambda t: ((t.a, t.b), "box"), lambda aux, ch: Box(*ch))
ftu.register_pytree_node(Box, lambda t: ((t.a, t.b), "box"), lambda aux, ch: Box(*ch))


@pytest.mark.parametrize("tree", [[1, [2, 3]], (4, {"k": 5}), {"b": 1, "a": (2, 3)}, None, Point(1, [2]),
                                  Box(1, (2,)), collections.OrderedDict([("z", 1), ("y", 2)])],
                         ids=["list", "tuple", "dict", "None", "namedtuple", "registered", "OrderedDict"])
def test_matches_jax(tree: Any) -> None:
    got_children, got_aux = ftu.flatten_one_level(tree)
    want_children, want_aux = jax.tree_util.flatten_one_level(tree)
    assert list(got_children) == list(want_children)
    assert got_aux == want_aux


@pytest.mark.parametrize("leaf", [3, 2.5, "s"])
def test_leaf_raises_like_jax(leaf: Any) -> None:
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        jax.tree_util.flatten_one_level(leaf)
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        ftu.flatten_one_level(leaf)


@pytest.mark.parametrize("tree", [[1, [2, 3]], (4, {"k": 5}), {"b": 1, "a": (2, 3)}, None, Box(1, (2,)),
                                  collections.OrderedDict([("z", 1), ("y", 2)])],
                         ids=["list", "tuple", "dict", "None", "registered", "OrderedDict"])
def test_with_keys_matches_jax(tree: Any) -> None:
    got_children, got_aux = ftu.flatten_one_level_with_keys(tree)
    want_children, want_aux = jax.tree_util.flatten_one_level_with_keys(tree)
    assert [(str(k), c) for k, c in got_children] == [(str(k), c) for k, c in want_children]
    assert got_aux == want_aux


def test_with_keys_of_a_namedtuple_names_each_field() -> None:
    """JAX 0.10 names both fields ``.x`` (GetAttrKey of the first field twice); ours name each."""
    children, aux = ftu.flatten_one_level_with_keys(Point(1, [2]))
    assert [(str(k), c) for k, c in children] == [(".x", 1), (".y", [2])] and aux is Point
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        ftu.flatten_one_level_with_keys(3)
