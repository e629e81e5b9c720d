"""Pytrees: nested tuples, lists, dicts, None and namedtuples, plus user-registered classes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

_Flatten = Callable[[Any], tuple[Iterable[Any], Hashable]]
_Unflatten = Callable[[Hashable, Iterable[Any]], Any]

_registry: dict[type, tuple[_Flatten, _Unflatten]] = {}


def register_pytree_node(cls: type, flatten: _Flatten, unflatten: _Unflatten) -> None:
    """Teach fungraph to see through ``cls``: ``flatten(x) -> (children, aux)``."""
    _registry[cls] = (flatten, unflatten)


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c))
register_pytree_node(
    dict,
    lambda d: ((d[k] for k in _sorted_keys(d)), _sorted_keys(d)),
    lambda keys, c: dict(zip(keys, c)),
)
register_pytree_node(type(None), lambda _: ((), None), lambda _, __: None)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


@dataclass(frozen=True)
class PyTreeDef:
    """The shape of a pytree without its leaves; hashable so it can key caches."""

    node_type: type | None
    aux: Hashable
    children: tuple[PyTreeDef, ...]

    @property
    def num_leaves(self) -> int:
        if self.node_type is None:
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self) -> str:
        if self.node_type is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children)
        return f"{self.node_type.__name__}({inner})"


LEAF = PyTreeDef(None, None, ())


def _node_handlers(x: Any) -> tuple[_Flatten, _Unflatten] | None:
    if _is_namedtuple(x):
        cls = type(x)
        return (lambda t: (tuple(t), None), lambda _, c, cls=cls: cls(*c))
    return _registry.get(type(x))


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    leaves: list[Any] = []

    def rec(x: Any) -> PyTreeDef:
        handlers = None if (is_leaf is not None and is_leaf(x)) else _node_handlers(x)
        if handlers is None:
            leaves.append(x)
            return LEAF
        children, aux = handlers[0](x)
        return PyTreeDef(type(x), aux, tuple(rec(c) for c in children))

    return leaves, rec(tree)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    it = iter(leaves)

    def rec(td: PyTreeDef) -> Any:
        if td.node_type is None:
            return next(it)
        children = [rec(c) for c in td.children]
        if td.node_type in _registry:
            return _registry[td.node_type][1](td.aux, children)
        return td.node_type(*children)  # namedtuple

    out = rec(treedef)
    sentinel = object()
    if next(it, sentinel) is not sentinel:
        raise ValueError(f"too many leaves for tree structure {treedef}")
    return out


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_reduce(f: Callable[[Any, Any], Any], tree: Any, *initializer: Any,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``functools.reduce(f, leaves[, initializer])``."""
    return functools.reduce(f, tree_leaves(tree, is_leaf), *initializer)


def tree_all(tree: Any) -> bool:
    return all(tree_leaves(tree))


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} vs {r_def}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])
