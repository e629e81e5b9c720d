"""Pytrees: nested tuples, lists, dicts, None and namedtuples, plus user-registered classes.

Leaf order, key paths and their printed form follow ``jax.tree_util``, so code and
checkpoints keyed by ``keystr`` port unchanged."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fungraph._caches import on_clear

_T = TypeVar("_T")
_Typ = TypeVar("_Typ", bound=type)

_Flatten = Callable[[Any], tuple[Iterable[Any], Hashable]]
_Unflatten = Callable[[Hashable, Iterable[Any]], Any]
_FlattenWithKeys = Callable[[Any], tuple[Iterable[tuple[Any, Any]], Hashable]]
_IsLeaf = Callable[[Any], bool] | None


# --- key paths ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SequenceKey:
    """A position in a tuple or list; prints as ``[0]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclass(frozen=True)
class DictKey:
    """A key of a dict; prints as ``['a']``."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclass(frozen=True)
class GetAttrKey:
    """An attribute of a namedtuple or dataclass; prints as ``.x``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclass(frozen=True)
class FlattenedIndexKey:
    """The position of a child of a node registered without keys; prints as ``[<flat index 0>]``."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = SequenceKey | DictKey | GetAttrKey | FlattenedIndexKey | Any
KeyPath = tuple[KeyEntry, ...]


def _simple_key(k: KeyEntry) -> str:
    match k:
        case SequenceKey(idx=i):
            return str(i)
        case DictKey(key=key):
            return str(key)
        case GetAttrKey(name=name):
            return name
        case FlattenedIndexKey(key=key):
            return str(key)
    return str(k)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``"['a'][0].x"``, or ``"a/0/x"`` with ``simple=True, separator="/"``."""
    return separator.join(_simple_key(k) if simple else str(k) for k in keys)


# --- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class _NodeRule:
    """How one node type splits into children and aux data, and back."""

    type_name: str
    flatten: _Flatten
    unflatten: _Unflatten
    flatten_with_keys: _FlattenWithKeys | None = None

    def split(self, x: Any) -> tuple[Iterable[Any], Hashable]:
        return _checked_pair(self.flatten(x), self.type_name, "flatten")

    def split_with_keys(self, x: Any) -> tuple[list[tuple[KeyEntry, Any]], Hashable]:
        """Children paired with their keys; ``FlattenedIndexKey`` when registered without keys."""
        if self.flatten_with_keys is None:
            children, aux = self.split(x)
            return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux
        keyed, aux = _checked_pair(self.flatten_with_keys(x), self.type_name, "flatten_with_keys")
        return list(keyed), aux


def _checked_pair(result: Any, type_name: str, which: str) -> tuple[Any, Any]:
    try:
        children, aux = result
    except (TypeError, ValueError):
        raise TypeError(f"the {which} function registered for {type_name} must return a pair "
                        f"(children, aux_data), got {type(result).__name__}") from None
    return children, aux


_registry: dict[type, _NodeRule] = {}


def _require_class(cls: Any, caller: str) -> None:
    if not isinstance(cls, type):
        raise TypeError(f"{caller} expects a class, got {cls!r}")


def _register(cls: type, rule: _NodeRule) -> None:
    if cls in _registry:
        raise ValueError(f"{cls.__qualname__} is already registered as a pytree node")
    _registry[cls] = rule


def register_pytree_node(cls: type, flatten: _Flatten, unflatten: _Unflatten) -> None:
    """Teach fungraph to see through ``cls``: ``flatten(x) -> (children, aux)`` and
    ``unflatten(aux, children) -> x``; its key paths use ``FlattenedIndexKey``."""
    _require_class(cls, "register_pytree_node")
    if not callable(flatten) or not callable(unflatten):
        raise TypeError(f"register_pytree_node({cls.__qualname__}, ...) needs callable flatten and unflatten")
    _register(cls, _NodeRule(cls.__qualname__, flatten, unflatten))


def register_pytree_with_keys(nodetype: type, flatten_with_keys: _FlattenWithKeys, unflatten_func: _Unflatten,
                              flatten_func: _Flatten | None = None) -> None:
    """Like ``register_pytree_node`` with ``flatten_with_keys(x) -> ([(key, child), ...], aux)``,
    so key paths name the children; ``flatten_func`` is an optional faster keyless flatten."""
    _require_class(nodetype, "register_pytree_with_keys")
    if flatten_func is None:

        def flatten_func(x: Any) -> tuple[list[Any], Hashable]:
            keyed, aux = _checked_pair(flatten_with_keys(x), nodetype.__qualname__, "flatten_with_keys")
            return [c for _, c in keyed], aux

    _register(nodetype, _NodeRule(nodetype.__qualname__, flatten_func, unflatten_func, flatten_with_keys))


def _class_unflatten(cls: type, caller: str, flatten_method: str) -> _Unflatten:
    """``cls.tree_unflatten``, once ``cls`` is known to define it and ``flatten_method``."""
    missing = [m for m in (flatten_method, "tree_unflatten") if not callable(getattr(cls, m, None))]
    if missing:
        raise TypeError(f"{caller}: {cls.__qualname__} has no {' or '.join(missing)} method")
    if not isinstance(inspect.getattr_static(cls, "tree_unflatten"), (classmethod, staticmethod)):
        raise TypeError(f"{caller}: {cls.__qualname__}.tree_unflatten must be a classmethod "
                        "taking (aux_data, children)")
    return cls.tree_unflatten


def register_pytree_node_class(cls: _Typ) -> _Typ:
    """Class decorator: a pytree node through its ``tree_flatten()`` method and its
    ``tree_unflatten(aux_data, children)`` classmethod."""
    _require_class(cls, "register_pytree_node_class")
    unflatten = _class_unflatten(cls, "register_pytree_node_class", "tree_flatten")
    register_pytree_node(cls, lambda x: x.tree_flatten(), unflatten)
    return cls


def register_pytree_with_keys_class(cls: _Typ) -> _Typ:
    """Class decorator: like ``register_pytree_node_class`` with a ``tree_flatten_with_keys()``
    method giving ``([(key, child), ...], aux_data)``."""
    _require_class(cls, "register_pytree_with_keys_class")
    unflatten = _class_unflatten(cls, "register_pytree_with_keys_class", "tree_flatten_with_keys")
    plain = (lambda x: x.tree_flatten()) if callable(getattr(cls, "tree_flatten", None)) else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), unflatten, plain)
    return cls


def register_static(cls: _Typ) -> _Typ:
    """Class decorator: instances are leafless nodes carried whole in the tree structure, so
    ``jit`` treats them as static (they must be hashable)."""
    _require_class(cls, "register_static")
    register_pytree_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def _dataclass_fields(nodetype: type, data_fields: Sequence[str] | None, meta_fields: Sequence[str] | None,
                      drop_fields: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (data, meta) field names of ``nodetype``, checked against its dataclass fields."""
    name = nodetype.__qualname__
    for what, given in (("data_fields", data_fields), ("meta_fields", meta_fields), ("drop_fields", drop_fields)):
        if isinstance(given, str):
            raise TypeError(f"register_dataclass({name}): {what} must be a sequence of field names, "
                            f"not the string {given!r}")
    is_dc = dataclasses.is_dataclass(nodetype)
    if data_fields is None and meta_fields is None:
        if not is_dc:
            raise TypeError(f"register_dataclass: {name} is not a dataclass; pass data_fields and "
                            "meta_fields to register another class")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta = tuple(f.name for f in fields if f.metadata.get("static", False))
        data = tuple(f.name for f in fields if f.name not in meta)
    elif data_fields is None or meta_fields is None:
        raise TypeError(f"register_dataclass({name}): give both data_fields and meta_fields, or neither")
    else:
        data, meta = tuple(data_fields), tuple(meta_fields)
    overlap = set(data) & set(meta)
    if overlap:
        raise ValueError(f"register_dataclass({name}): fields {sorted(overlap)} are both data and meta")
    if is_dc:
        expected = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        missing = expected - set(data) - set(meta)
        unexpected = (set(data) | set(meta)) - expected
        if missing:
            raise ValueError(f"register_dataclass({name}): init fields {sorted(missing)} are neither data "
                             "nor meta fields (list them in drop_fields to leave them out)")
        if unexpected:
            raise ValueError(f"register_dataclass({name}): {sorted(unexpected)} are not init fields of the "
                             "dataclass, so unflattening could not pass them to its constructor")
    return data, meta


def register_dataclass(nodetype: _Typ, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None, drop_fields: Sequence[str] = ()) -> _Typ:
    """Register a class whose ``data_fields`` are children and ``meta_fields`` static aux data;
    rebuilt by ``nodetype(**fields)``. As a bare decorator on a dataclass, fields declared with
    ``field(metadata=dict(static=True))`` are meta and the rest data. Returns ``nodetype``."""
    _require_class(nodetype, "register_dataclass")
    data, meta = _dataclass_fields(nodetype, data_fields, meta_fields, drop_fields)

    def flatten(x: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return tuple(getattr(x, n) for n in data), tuple(getattr(x, n) for n in meta)

    def flatten_with_keys(x: Any) -> tuple[list[tuple[GetAttrKey, Any]], tuple[Any, ...]]:
        return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux: tuple[Any, ...], children: Iterable[Any]) -> Any:
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    register_pytree_with_keys(nodetype, flatten_with_keys, unflatten, flatten)
    return nodetype


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def _sequence_keys(t: Sequence[Any]) -> tuple[list[tuple[SequenceKey, Any]], None]:
    return [(SequenceKey(i), c) for i, c in enumerate(t)], None


register_pytree_with_keys(tuple, _sequence_keys, lambda _, c: tuple(c), lambda t: (t, None))
register_pytree_with_keys(list, _sequence_keys, lambda _, c: list(c), lambda t: (t, None))
def _dict_children(d: dict) -> tuple[list[Any], tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _dict_keyed_children(d: dict) -> tuple[list[tuple[DictKey, Any]], tuple]:
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


register_pytree_with_keys(dict, _dict_keyed_children, lambda keys, c: dict(zip(keys, c)), _dict_children)
register_pytree_with_keys(
    OrderedDict,
    lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
    lambda keys, c: OrderedDict(zip(keys, c)),
)
register_pytree_with_keys(
    defaultdict,
    lambda d: ([(DictKey(k), d[k]) for k in _sorted_keys(d)], (d.default_factory, _sorted_keys(d))),
    lambda aux, c: defaultdict(aux[0], zip(aux[1], c)),
)
register_pytree_node(type(None), lambda _: ((), None), lambda _, __: None)


def _is_namedtuple_type(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


@functools.lru_cache(maxsize=256)
def _namedtuple_rule(cls: type) -> _NodeRule:
    return _NodeRule(
        cls.__qualname__,
        lambda t: (tuple(t), None),
        lambda _, c: cls(*c),
        lambda t: ([(GetAttrKey(f), v) for f, v in zip(cls._fields, t)], None),
    )


on_clear(_namedtuple_rule.cache_clear)


def _rule_for(t: type) -> _NodeRule | None:
    """The registered rule for ``t``, then the namedtuple rule; None for a leaf type."""
    rule = _registry.get(t)
    if rule is None and _is_namedtuple_type(t):
        return _namedtuple_rule(t)
    return rule


def is_tree_node(typ: type) -> bool:
    """Whether instances of ``typ`` are pytree nodes (registered, built in, or a namedtuple)."""
    return _rule_for(typ) is not None


# --- tree structures ---------------------------------------------------------------------


class PyTreeDef:
    """The shape of a pytree without its leaves; immutable and hashable so it can key caches.
    Its hash (when it is made) and leaf count are computed from its children's, and equality
    walks two structures with a stack, so a structure as deep as JAX's (900 nested lists)
    needs no recursion."""

    __slots__ = ("node_type", "aux", "children", "_hash", "_num_leaves")
    node_type: type | None
    aux: Hashable
    children: tuple[PyTreeDef, ...]

    def __init__(self, node_type: type | None, aux: Hashable, children: tuple[PyTreeDef, ...]) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "node_type", node_type)
        setattr_(self, "aux", aux)
        setattr_(self, "children", children)
        try:
            own = hash(aux)
        except TypeError:  # unhashable aux data (a list) is JAX's too: equality still compares it
            own = 0
        setattr_(self, "_hash", hash((node_type, own, tuple([c._hash for c in children]))))

    @property
    def num_leaves(self) -> int:
        try:
            return self._num_leaves
        except AttributeError:
            return _bottom_up(self, "_num_leaves",
                              lambda td: 1 if td.node_type is None else sum([c._num_leaves for c in td.children]))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"PyTreeDef is immutable (cannot set {name})")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        pairs = [(self, other)]
        while pairs:
            a, b = pairs.pop()
            if a is b:
                continue
            if (a._hash != b._hash or a.node_type is not b.node_type or len(a.children) != len(b.children)
                    or a.aux != b.aux):
                return False
            pairs.extend(zip(a.children, b.children))
        return True

    def __reduce__(self) -> tuple:
        return PyTreeDef, (self.node_type, self.aux, self.children)

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def node_data(self) -> tuple[type, Hashable] | None:
        """``(node type, aux data)`` of the root, None for a leaf."""
        return None if self.node_type is None else (self.node_type, self.aux)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of ``tree`` at this structure's leaves; ``tree`` must have this structure
        as a prefix, else a ValueError names the key path where they part."""
        out: list[Any] = []
        _flatten_up_to(self, tree, (), out)
        return out

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with ``inner`` in place of every leaf."""
        if self.node_type is None:
            return inner
        return PyTreeDef(self.node_type, self.aux, tuple(c.compose(inner) for c in self.children))

    def __repr__(self) -> str:
        return f"PyTreeDef({_show(self)})"


def _bottom_up(td: PyTreeDef, slot: str, compute: Callable[[PyTreeDef], Any]) -> Any:
    """Fill ``slot`` of ``td`` and of its descendants that lack it, children first, with a
    stack; return ``td``'s."""
    stack = [td]
    while stack:
        node = stack[-1]
        missing = [c for c in node.children if not hasattr(c, slot)]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        object.__setattr__(node, slot, compute(node))
    return getattr(td, slot)


LEAF = PyTreeDef(None, None, ())


def _show(td: PyTreeDef) -> str:
    """JAX's text for a structure: ``{'a': [*, (*,)], 'b': None}``."""
    parts = [_show(c) for c in td.children]
    if td.node_type is None:
        return "*"
    if td.node_type is type(None):
        return "None"
    if td.node_type is tuple:
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
    if td.node_type is list:
        return f"[{', '.join(parts)}]"
    if td.node_type is dict:
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(td.aux, parts)) + "}"
    if _is_namedtuple_type(td.node_type) and td.node_type not in _registry:
        return f"CustomNode(namedtuple[{td.node_type.__name__}], [{', '.join(parts)}])"
    return f"CustomNode({td.node_type.__name__}[{td.aux}], [{', '.join(parts)}])"


_END: Any = object()


#: Nesting depth from which flattening continues with an explicit stack instead of recursion
#: (recursion is faster on the shallow trees of every day).
RECURSIVE_DEPTH = 64


def _walk(x: Any, is_leaf: _IsLeaf, leaves: list[Any], depth: int = 0) -> PyTreeDef:
    """Append the leaves of ``x``; return its structure."""
    rule = None if is_leaf is not None and is_leaf(x) else _rule_for(type(x))
    if rule is None:
        leaves.append(x)
        return LEAF
    if depth >= RECURSIVE_DEPTH:
        return _walk_deep(x, is_leaf, leaves)
    children, aux = rule.split(x)
    return PyTreeDef(type(x), aux, tuple([_walk(c, is_leaf, leaves, depth + 1) for c in children]))


def _walk_deep(x: Any, is_leaf: _IsLeaf, leaves: list[Any]) -> PyTreeDef:
    """:func:`_walk` depth-first with a stack of open nodes (type, aux, children still to
    visit, structures of those visited) instead of recursion."""
    stack: list[tuple[type, Hashable, Iterator[Any], list[PyTreeDef]]] = []
    node = x
    while True:
        rule = None if is_leaf is not None and is_leaf(node) else _rule_for(type(node))
        done: PyTreeDef | None = None
        if rule is None:
            leaves.append(node)
            done = LEAF
        else:
            children, aux = rule.split(node)
            stack.append((type(node), aux, iter(children), []))
        while True:
            if done is not None:
                if not stack:
                    return done
                stack[-1][3].append(done)
            typ, aux, pending, built = stack[-1]
            node = next(pending, _END)
            if node is not _END:
                break
            stack.pop()
            done = PyTreeDef(typ, aux, tuple(built))


def _walk_with_paths(x: Any, path: KeyPath, is_leaf: Callable[..., bool] | None, takes_path: bool,
                     leaves: list[Any], paths: list[KeyPath]) -> PyTreeDef:
    """``_walk`` that also appends each leaf's key path."""
    stop = is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x))
    rule = None if stop else _rule_for(type(x))
    if rule is None:
        leaves.append(x)
        paths.append(path)
        return LEAF
    keyed, aux = rule.split_with_keys(x)
    subtrees = [_walk_with_paths(c, (*path, k), is_leaf, takes_path, leaves, paths) for k, c in keyed]
    return PyTreeDef(type(x), aux, tuple(subtrees))


def _where(path: KeyPath) -> str:
    return f"key path {keystr(path)}" if path else "the root"


def _flatten_up_to(td: PyTreeDef, x: Any, path: KeyPath, out: list[Any]) -> None:
    if td.node_type is None:
        out.append(x)
        return
    if type(x) is not td.node_type:
        raise ValueError(f"tree structure mismatch at {_where(path)}: expected a {td.node_type.__name__} "
                         f"node, got {type(x).__name__}")
    rule = _rule_for(td.node_type)
    keyed, aux = rule.split_with_keys(x)
    if len(keyed) != len(td.children) or aux != td.aux:
        got = PyTreeDef(td.node_type, aux, (LEAF,) * len(keyed))
        want = PyTreeDef(td.node_type, td.aux, (LEAF,) * len(td.children))
        raise ValueError(f"tree structure mismatch at {_where(path)}: expected {want}, got {got}")
    for (k, c), sub in zip(keyed, td.children):
        _flatten_up_to(sub, c, (*path, k), out)


# --- flattening and mapping --------------------------------------------------------------


def tree_flatten(tree: Any, is_leaf: _IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of ``tree`` in JAX's order (dicts by sorted key) and its structure;
    ``is_leaf(x)`` true stops the descent at ``x``."""
    leaves: list[Any] = []
    return leaves, _walk(tree, is_leaf, leaves)


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like ``tree_flatten`` with each leaf paired with its key path; with
    ``is_leaf_takes_path`` the predicate is called as ``is_leaf(path, x)``."""
    leaves: list[Any] = []
    paths: list[KeyPath] = []
    treedef = _walk_with_paths(tree, (), is_leaf, is_leaf_takes_path, leaves, paths)
    return list(zip(paths, leaves)), treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """The tree of structure ``treedef`` holding ``leaves`` in order."""
    flat = leaves if isinstance(leaves, (list, tuple)) else list(leaves)
    if len(flat) != treedef.num_leaves:
        raise ValueError(f"{treedef} takes {treedef.num_leaves} leaves, got {len(flat)}")
    if treedef.node_type is None:
        return flat[0]
    it = iter(flat)
    stack: list[tuple[PyTreeDef, Iterator[PyTreeDef], list[Any]]] = [(treedef, iter(treedef.children), [])]
    while True:
        td, pending, built = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            node = _rule_for(td.node_type).unflatten(td.aux, built)
            if not stack:
                return node
            stack[-1][2].append(node)
        elif child.node_type is None:
            built.append(next(it))
        else:
            stack.append((child, iter(child.children), []))


def tree_leaves(tree: Any, is_leaf: _IsLeaf = None) -> list[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    """The children and aux data of ``tree``'s top node (a namedtuple's aux data is its class),
    as JAX's; a ``ValueError`` for a leaf."""
    rule = _rule_for(type(tree))
    if rule is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, aux = rule.split(tree)
    if _is_namedtuple_type(type(tree)) and type(tree) not in _registry:
        return list(children), type(tree)
    return children, aux


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """:func:`flatten_one_level` with each child paired with its key, as JAX's."""
    rule = _rule_for(type(tree))
    if rule is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    keyed, aux = rule.split_with_keys(tree)
    if _is_namedtuple_type(type(tree)) and type(tree) not in _registry:
        return list(keyed), type(tree)
    return tuple(keyed), aux


def tree_structure(tree: Any, is_leaf: _IsLeaf = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def all_leaves(iterable: Iterable[Any], is_leaf: _IsLeaf = None) -> bool:
    """Whether every element is a leaf (None is not: it is an empty node)."""
    return all(tree_structure(x, is_leaf) == LEAF for x in iterable)


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: _IsLeaf = None) -> Any:
    """``f`` applied leafwise; each of ``rest`` must have ``tree``'s structure as a prefix, and
    its subtree at each leaf of ``tree`` is passed whole."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *others))


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """Like ``tree_map`` with ``f(path, leaf, *others)``."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(p, x, *xs) for (p, x), *xs in zip(pairs, *others))


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


def tree_reduce(function: Callable[[_T, Any], _T], tree: Any, initializer: _T = _MISSING,
                is_leaf: _IsLeaf = None) -> _T:
    """``functools.reduce(function, leaves[, initializer])``."""
    if initializer is _MISSING:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


def tree_reduce_associative(operation: Callable[[_T, _T], _T], tree: Any, *, identity: _T = _MISSING,
                            is_leaf: _IsLeaf = None) -> _T:
    """Reduce the leaves pairwise, as a balanced tree of ``operation`` calls (which must be
    associative); ``identity`` is the result for a tree without leaves."""
    values = tree_leaves(tree, is_leaf)
    if not values:
        if identity is _MISSING:
            raise TypeError("tree_reduce_associative of a tree without leaves needs an identity")
        return identity

    def halves(lo: int, hi: int) -> _T:
        if hi - lo == 1:
            return values[lo]
        mid = (lo + hi) // 2
        return operation(halves(lo, mid), halves(mid, hi))

    return halves(0, len(values))


def tree_all(tree: Any, *, is_leaf: _IsLeaf = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: _IsLeaf = None) -> Any:
    """``full_tree``'s structure with each leaf of ``prefix_tree`` copied over the subtree it covers."""
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = prefix_def.flatten_up_to(full_tree)
    return prefix_def.unflatten(tree_map(lambda _, v=v: v, s, is_leaf=is_leaf)
                                for v, s in zip(prefix_leaves, subtrees))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """Turn an outer structure of inner structures into an inner of outers; ``inner_treedef``
    None takes the structure of the first inner tree."""
    subtrees = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        if not subtrees:
            raise ValueError("tree_transpose cannot infer inner_treedef from an outer tree without leaves")
        inner_treedef = tree_structure(subtrees[0])
    expected = outer_treedef.compose(inner_treedef)
    leaves, actual = tree_flatten(pytree_to_transpose)
    if actual != expected:
        raise TypeError(f"tree_transpose: the tree has structure {actual}, expected {expected}")
    n_inner = inner_treedef.num_leaves
    columns = [leaves[j::n_inner] for j in range(n_inner)]
    return inner_treedef.unflatten(outer_treedef.unflatten(col) for col in columns)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True for a structure of a single node: a leaf, or a node without children such as None."""
    return treedef.num_nodes == 1


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    return PyTreeDef(tuple, None, tuple(treedefs))


# --- Partial -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Opaque:
    """A callable that ``functools.partial`` does not merge into the partial wrapping it."""

    fun: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.fun)


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the function is static structure and the bound
    arguments are children, so it can be an argument or result of ``jit``, ``grad`` and ``vmap``.

    A wrapped partial (``Partial`` or ``functools.partial``) stays whole inside the function,
    so its own arguments are static."""

    def __new__(cls, func: Callable[..., Any], /, *args: Any, **keywords: Any) -> Partial:
        if not callable(func):
            raise TypeError(f"Partial needs a callable first argument, got {type(func).__name__}")
        target = _Opaque(func) if isinstance(func, functools.partial) else func
        return super().__new__(cls, target, *args, **keywords)

    @property
    def func(self) -> Callable[..., Any]:
        stored = functools.partial.func.__get__(self)
        return stored.fun if isinstance(stored, _Opaque) else stored


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)
