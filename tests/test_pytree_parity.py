"""``fungraph.tree_util`` and ``fungraph.tree`` against ``jax.tree_util`` and ``jax.tree``: leaf
order, structures, key paths and their text, the registration helpers, ``Partial``, and
registered classes as arguments and results of ``jit``, ``grad`` and ``vmap``."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import tree_util as ftu
from tests.helpers import jax_or_skip

Point = namedtuple("Point", "x y")


@ftu.register_dataclass
@dataclasses.dataclass
class Layer:
    """A dataclass with one static field."""

    w: Any
    b: Any
    act: str = fg.tree.static(default="tanh")


@ftu.register_pytree_node_class
class Box:
    """A class flattened by its own methods: any number of children and a label."""

    def __init__(self, items: tuple, label: str) -> None:
        self.items, self.label = tuple(items), label

    def tree_flatten(self) -> tuple[tuple, str]:
        return self.items, self.label

    @classmethod
    def tree_unflatten(cls, label: str, children: Any) -> Box:
        return cls(children, label)


class Keyed:
    """A class registered with keys: its children are named by attribute and dict key."""

    def __init__(self, first: Any, rest: Any) -> None:
        self.first, self.rest = first, rest


def _keyed_flatten(tu: Any) -> Callable[[Keyed], tuple[list, None]]:
    return lambda k: ([(tu.GetAttrKey("first"), k.first), (tu.DictKey("rest"), k.rest)], None)


ftu.register_pytree_with_keys(Keyed, _keyed_flatten(ftu), lambda _, c: Keyed(*c))


@functools.cache
def _jax_tu() -> Any:
    """``jax.tree_util`` with this module's classes registered in it too."""
    jax, _ = jax_or_skip()
    tu = jax.tree_util
    tu.register_dataclass(Layer)
    tu.register_pytree_node_class(Box)
    tu.register_pytree_with_keys(Keyed, _keyed_flatten(tu), lambda _, c: Keyed(*c))
    return tu


def _scale(a: Any, b: Any = 1, *, c: Any = 0) -> Any:
    return a * b + c


# --- random trees, built the same way for both libraries -------------------------------------

_KEYS = st.sampled_from("abcde")


def _nodes(child: st.SearchStrategy) -> st.SearchStrategy:
    small = st.lists(child, max_size=3)
    return st.one_of(
        small.map(lambda cs: ("list", cs)),
        small.map(lambda cs: ("tuple", cs)),
        st.dictionaries(_KEYS, child, max_size=3).map(lambda d: ("dict", d)),
        st.dictionaries(st.integers(-3, 3), child, max_size=3).map(lambda d: ("dict", d)),
        st.lists(st.tuples(_KEYS, child), max_size=3, unique_by=lambda kv: kv[0]).map(lambda kv: ("odict", kv)),
        st.dictionaries(_KEYS, child, max_size=3).map(lambda d: ("ddict", d)),
        st.tuples(child, child).map(lambda xy: ("point", xy)),
        st.tuples(child, child, st.sampled_from(["tanh", "relu"])).map(lambda t: ("layer", t)),
        st.tuples(small, st.sampled_from(["p", "q"])).map(lambda t: ("box", t)),
        st.tuples(child, child).map(lambda t: ("keyed", t)),
        st.tuples(small, st.dictionaries(st.sampled_from(["b", "c"]), child, max_size=2)).map(
            lambda t: ("partial", t)),
    )


tree_specs = st.deferred(lambda: st.recursive(st.sampled_from([("leaf", None), ("none", None)]), _nodes,
                                             max_leaves=12))


def build(spec: tuple[str, Any], partial_cls: type, counter: list[int] | None = None) -> Any:
    """The tree ``spec`` describes, with leaves numbered 0, 1, ... in construction order."""
    counter = [0] if counter is None else counter

    def rec(s: tuple[str, Any]) -> Any:
        kind, payload = s
        if kind == "leaf":
            counter[0] += 1
            return counter[0] - 1
        if kind == "none":
            return None
        if kind in ("list", "tuple"):
            out = [rec(c) for c in payload]
            return out if kind == "list" else tuple(out)
        if kind == "dict":
            return {k: rec(c) for k, c in payload.items()}
        if kind == "odict":
            return OrderedDict((k, rec(c)) for k, c in payload)
        if kind == "ddict":
            return defaultdict(list, {k: rec(c) for k, c in payload.items()})
        if kind == "point":
            return Point(rec(payload[0]), rec(payload[1]))
        if kind == "layer":
            return Layer(rec(payload[0]), rec(payload[1]), payload[2])
        if kind == "box":
            return Box([rec(c) for c in payload[0]], payload[1])
        if kind == "keyed":
            return Keyed(rec(payload[0]), rec(payload[1]))
        args = [rec(c) for c in payload[0]]
        return partial_cls(_scale, *args, **{k: rec(c) for k, c in payload[1].items()})

    return rec(spec)


def _pair(spec: tuple[str, Any]) -> tuple[Any, Any, Any]:
    tu = _jax_tu()
    return build(spec, ftu.Partial), build(spec, tu.Partial), tu


def _path_texts(pairs: list[tuple[tuple, Any]], keystr: Callable[..., str]) -> list[tuple[str, str, list[str]]]:
    return [(keystr(p), keystr(p, simple=True, separator="/"), [repr(k) for k in p]) for p, _ in pairs]


@settings(max_examples=100)
@given(tree_specs)
def test_flatten_matches_jax(spec: tuple[str, Any]) -> None:
    ours, theirs, tu = _pair(spec)
    leaves, td = ftu.tree_flatten(ours)
    j_leaves, j_td = tu.tree_flatten(theirs)
    assert leaves == j_leaves
    assert repr(td) == repr(j_td)
    assert (td.num_leaves, td.num_nodes) == (j_td.num_leaves, j_td.num_nodes)
    assert ftu.tree_flatten(ftu.tree_unflatten(td, leaves)) == (leaves, td)
    assert ftu.tree_structure(ftu.tree_map(lambda x: -x, ours)) == td
    assert ftu.treedef_is_leaf(td) == tu.treedef_is_leaf(j_td)
    assert [repr(c) for c in ftu.treedef_children(td)] == [repr(c) for c in tu.treedef_children(j_td)]


@settings(max_examples=100)
@given(tree_specs)
def test_paths_match_jax(spec: tuple[str, Any]) -> None:
    ours, theirs, tu = _pair(spec)
    pairs, td = ftu.tree_flatten_with_path(ours)
    j_pairs, _ = tu.tree_flatten_with_path(theirs)
    assert [x for _, x in pairs] == [x for _, x in j_pairs] == ftu.tree_leaves(ours)
    assert _path_texts(pairs, ftu.keystr) == _path_texts(j_pairs, tu.keystr)
    assert ftu.tree_leaves_with_path(ours) == pairs
    mapped = ftu.tree_map_with_path(lambda p, x: ftu.keystr(p), ours)
    assert ftu.tree_leaves(mapped) == [ftu.keystr(p) for p, _ in pairs]
    assert ftu.tree_structure(mapped) == td


@settings(max_examples=60)
@given(tree_specs, st.sampled_from([list, tuple, dict, type(None), Point, Layer, Box]))
def test_is_leaf_matches_jax(spec: tuple[str, Any], stop_at: type) -> None:
    ours, theirs, tu = _pair(spec)

    def is_leaf(x: Any) -> bool:
        return type(x) is stop_at

    leaves, td = ftu.tree_flatten(ours, is_leaf=is_leaf)
    j_leaves, j_td = tu.tree_flatten(theirs, is_leaf=is_leaf)
    assert [type(x) for x in leaves] == [type(x) for x in j_leaves]
    assert repr(td) == repr(j_td)
    if stop_at is not list:  # jax.all_leaves applies is_leaf to the list it is given, too
        assert ftu.all_leaves(leaves, is_leaf=is_leaf) == tu.all_leaves(j_leaves, is_leaf=is_leaf)
    assert ftu.all_leaves(leaves) == tu.all_leaves(j_leaves)
    paths = ftu.tree_leaves_with_path(ours, is_leaf=lambda p, x: len(p) >= 2, is_leaf_takes_path=True)
    j_paths = tu.tree_leaves_with_path(theirs, is_leaf=lambda p, x: len(p) >= 2, is_leaf_takes_path=True)
    assert _path_texts(paths, ftu.keystr) == _path_texts(j_paths, tu.keystr)


# --- fixed examples ----------------------------------------------------------------------


def test_key_entries_print_like_jax() -> None:
    tu = _jax_tu()
    for name, arg in [("SequenceKey", 3), ("DictKey", "a"), ("DictKey", 1), ("DictKey", (1, "b")),
                      ("GetAttrKey", "x"), ("FlattenedIndexKey", 2)]:
        ours, theirs = getattr(ftu, name)(arg), getattr(tu, name)(arg)
        assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))
        assert ours == getattr(ftu, name)(arg) and hash(ours) == hash(getattr(ftu, name)(arg))
    path = (ftu.DictKey("a"), ftu.SequenceKey(0), ftu.GetAttrKey("x"), ftu.FlattenedIndexKey(1))
    assert ftu.keystr(path) == "['a'][0].x[<flat index 1>]"
    assert ftu.keystr(path, simple=True, separator="/") == "a/0/x/1"
    assert ftu.keystr(()) == "" and ftu.keystr(("u", 1)) == tu.keystr(("u", 1))


def test_builtin_orders_and_structures() -> None:
    tu = _jax_tu()
    trees = [None, (), [], {}, (1,), {"b": 1, "a": (2, None)}, Point(1, [2, 3]), {3: "x", 1: "y"},
             OrderedDict([("z", 1), ("a", 2)]), defaultdict(int, {"z": 1, "a": 2}), [None, [None]]]
    for t in trees:
        assert ftu.tree_leaves(t) == tu.tree_leaves(t)
        assert repr(ftu.tree_structure(t)) == repr(tu.tree_structure(t))
    assert ftu.tree_unflatten(ftu.tree_structure(trees[9]), [5, 6]).default_factory is int


def test_tree_map_with_prefix_trees_matches_jax() -> None:
    tu = _jax_tu()
    tree, full = [1, {"a": 2}], [(10, 20), {"a": [30]}]
    assert ftu.tree_map(lambda x, y: (x, y), tree, full) == tu.tree_map(lambda x, y: (x, y), tree, full)
    assert ftu.tree_map(lambda x, y: x + len(y), [1, 2], [(), (3, 4)], is_leaf=None) == [1, 4]
    got = ftu.tree_map_with_path(lambda p, x, y: (ftu.keystr(p), x + y), {"u": 1, "v": [2]}, {"u": 3, "v": [4]})
    assert got == {"u": ("['u']", 4), "v": [("['v'][0]", 6)]}


@pytest.mark.parametrize("rest, where", [
    ([[1], {"a": 2}], "key path [0]"),
    ([(1, 2), {"a": 2}], "key path [0]"),
    ([[1, 2], {"b": 2}], "key path [1]"),
    ([[1, 2]], "the root"),
])
def test_tree_map_mismatch_names_the_path(rest: Any, where: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"mismatch at {where}")):
        ftu.tree_map(lambda x, y: x, [[1, 2], {"a": 1}], rest)


def test_unflatten_checks_the_leaf_count() -> None:
    td = ftu.tree_structure([1, (2, 3)])
    with pytest.raises(ValueError, match="takes 3 leaves, got 2"):
        ftu.tree_unflatten(td, [1, 2])
    with pytest.raises(ValueError, match="takes 3 leaves, got 4"):
        td.unflatten([1, 2, 3, 4])


def test_treedef_methods() -> None:
    tu = _jax_tu()
    tree = {"a": [1, 2], "b": (3, None)}
    td, j_td = ftu.tree_structure(tree), tu.tree_structure(tree)
    assert td.flatten_up_to({"a": ["x", [1]], "b": ("y", None)}) == ["x", [1], "y"] and td.num_nodes == j_td.num_nodes
    inner = ftu.tree_structure((0, 0))
    assert repr(td.compose(inner)) == repr(j_td.compose(tu.tree_structure((0, 0))))
    assert td.node_data() == (dict, ("a", "b")) and ftu.LEAF.node_data() is None
    both = ftu.treedef_tuple([td, inner])
    assert repr(both) == repr(tu.treedef_tuple([j_td, tu.tree_structure((0, 0))]))
    assert ftu.treedef_is_leaf(ftu.tree_structure(None)) and not ftu.treedef_is_leaf(inner)


def test_transpose_reduce_all_broadcast_match_jax() -> None:
    tu = _jax_tu()
    outer, inner = [0, 0, 0], {"p": 0, "q": (0, 0)}
    tree = [{"p": i, "q": (10 * i, 100 * i)} for i in range(3)]
    for inner_def in (ftu.tree_structure(inner), None):
        j_inner = None if inner_def is None else tu.tree_structure(inner)
        got = ftu.tree_transpose(ftu.tree_structure(outer), inner_def, tree)
        assert got == tu.tree_transpose(tu.tree_structure(outer), j_inner, tree)
    assert ftu.tree_transpose(ftu.tree_structure([]), ftu.tree_structure((0, 0)), []) == ([], [])
    with pytest.raises(TypeError, match="tree_transpose"):
        ftu.tree_transpose(ftu.tree_structure(outer), ftu.tree_structure((0, 0)), tree)
    assert ftu.tree_reduce(lambda a, b: a - b, tree) == tu.tree_reduce(lambda a, b: a - b, tree)
    assert ftu.tree_reduce(lambda a, b: a - b, tree, 7) == tu.tree_reduce(lambda a, b: a - b, tree, 7)
    assert ftu.tree_reduce(lambda a, b: a + [b], [], []) == []
    assert ftu.tree_reduce_associative(lambda a, b: (a, b), list(range(5))) == \
        tu.tree_reduce_associative(lambda a, b: (a, b), list(range(5)))
    assert ftu.tree_reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        ftu.tree_reduce_associative(lambda a, b: a + b, [])
    flags = [True, (1, None), {"x": [0]}]
    assert not ftu.tree_all(flags) and ftu.tree_all(flags, is_leaf=lambda x: isinstance(x, dict))
    assert ftu.tree_all(flags, is_leaf=lambda x: isinstance(x, dict)) == \
        tu.tree_all(flags, is_leaf=lambda x: isinstance(x, dict))
    prefix, full = [1, {"a": 2, "b": None}], [(5, 6), {"a": [7, 8], "b": None}]
    assert ftu.tree_broadcast(prefix, full) == tu.tree_broadcast(prefix, full)


def test_tree_namespace_has_jax_tree_names() -> None:
    jax, _ = jax_or_skip()
    wanted = {n for n in dir(jax.tree) if not n.startswith("_")}
    assert wanted <= set(fg.tree.__all__)
    assert all(callable(getattr(fg.tree, n)) for n in fg.tree.__all__)
    field = fg.tree.static(default=3, metadata={"doc": "d"})
    assert field.metadata == {"doc": "d", "static": True} and field.default == 3
    pairs, td = fg.tree.flatten_with_path({"a": [1]})
    assert fg.tree.map_with_path(lambda p, x: fg.tree_util.keystr(p), {"a": [1]}) == {"a": ["['a'][0]"]}
    assert fg.tree.leaves_with_path({"a": [1]}) == pairs and td == fg.tree.structure({"a": [0]})


# --- registration ------------------------------------------------------------------------


def test_register_dataclass_bare_and_explicit() -> None:
    tu = _jax_tu()
    layer = Layer(1, 2, "relu")
    pairs, td = ftu.tree_flatten_with_path(layer)
    assert [(ftu.keystr(p), x) for p, x in pairs] == [(".w", 1), (".b", 2)]
    assert repr(td) == repr(tu.tree_structure(layer)) == "PyTreeDef(CustomNode(Layer[('relu',)], [*, *]))"
    assert ftu.tree_unflatten(td, [3, 4]) == Layer(3, 4, "relu")
    assert ftu.tree_structure(Layer(1, 2, "tanh")) != td

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        x: Any
        n: int
        skip: int = 0

    assert ftu.register_dataclass(Frozen, data_fields=["x"], meta_fields=["n"], drop_fields=["skip"]) is Frozen
    assert ftu.tree_flatten(Frozen(1, 2, 9)) == ([1], ftu.tree_structure(Frozen(0, 2)))
    assert ftu.tree_unflatten(ftu.tree_structure(Frozen(1, 2, 9)), [5]) == Frozen(5, 2)

    class Plain:
        def __init__(self, a: Any, k: str) -> None:
            self.a, self.k = a, k

    ftu.register_dataclass(Plain, data_fields=["a"], meta_fields=["k"])
    back = ftu.tree_map(lambda x: x + 1, Plain(1, "s"))
    assert (back.a, back.k) == (2, "s")
    assert ftu.keystr(ftu.tree_leaves_with_path(Plain(1, "s"))[0][0]) == ".a"


def _fresh_dataclass(**extra: Any) -> type:
    fields = {"a": Any, "b": Any}
    namespace = {"__annotations__": fields, **extra}
    return dataclasses.dataclass(type("Fresh", (), namespace))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(data_fields=["a"]), TypeError, "both data_fields and meta_fields"),
    (dict(meta_fields=["a"]), TypeError, "both data_fields and meta_fields"),
    (dict(data_fields=["a"], meta_fields=[]), ValueError, r"init fields \['b'\]"),
    (dict(data_fields=["a", "b"], meta_fields=["b"]), ValueError, "both data and meta"),
    (dict(data_fields=["a", "b", "c"], meta_fields=[]), ValueError, r"\['c'\] are not init fields"),
    (dict(data_fields="ab", meta_fields=[]), TypeError, "sequence of field names"),
])
def test_register_dataclass_field_errors(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ftu.register_dataclass(_fresh_dataclass(), **kwargs)


def test_registration_errors_are_clear() -> None:
    class NotADataclass:
        pass

    with pytest.raises(TypeError, match="NotADataclass is not a dataclass"):
        ftu.register_dataclass(NotADataclass)
    with pytest.raises(TypeError, match="expects a class"):
        ftu.register_dataclass(NotADataclass())
    with pytest.raises(TypeError, match=r"NotADataclass has no tree_flatten or tree_unflatten method"):
        ftu.register_pytree_node_class(NotADataclass)

    class Unbound:
        def tree_flatten(self) -> tuple:
            return (), None

        def tree_unflatten(self, aux: Any, children: Any) -> Any:
            return self

    with pytest.raises(TypeError, match="Unbound.tree_unflatten must be a classmethod"):
        ftu.register_pytree_node_class(Unbound)
    with pytest.raises(ValueError, match="Layer is already registered"):
        ftu.register_pytree_node(Layer, lambda x: ((), None), lambda a, c: None)
    with pytest.raises(TypeError, match="callable"):
        ftu.register_pytree_node(NotADataclass, "flatten", "unflatten")

    class BadFlatten:
        pass

    ftu.register_pytree_node(BadFlatten, lambda x: [1, 2, 3], lambda a, c: None)
    with pytest.raises(TypeError, match="registered for .*BadFlatten must return a pair"):
        ftu.tree_flatten(BadFlatten())


def test_bare_dataclass_with_an_init_false_field_is_refused() -> None:
    @dataclasses.dataclass
    class Derived:
        a: Any
        c: int = dataclasses.field(default=0, init=False)

    with pytest.raises(ValueError, match=r"\['c'\] are not init fields"):
        ftu.register_dataclass(Derived)
    assert ftu.register_dataclass(Derived, data_fields=["a"], meta_fields=[], drop_fields=["c"]) is Derived


def test_keys_class_and_static_registration() -> None:
    @ftu.register_pytree_with_keys_class
    class Named:
        def __init__(self, parts: dict) -> None:
            self.parts = parts

        def tree_flatten_with_keys(self) -> tuple[list, tuple]:
            return [(ftu.GetAttrKey(k), v) for k, v in self.parts.items()], tuple(self.parts)

        @classmethod
        def tree_unflatten(cls, names: tuple, children: Any) -> Named:
            return cls(dict(zip(names, children)))

    named = Named({"u": [1], "v": 2})
    assert [ftu.keystr(p) for p, _ in ftu.tree_leaves_with_path(named)] == [".u[0]", ".v"]
    assert ftu.tree_map(lambda x: x * 10, named).parts == {"u": [10], "v": 20}
    assert ftu.is_tree_node(Named) and ftu.is_tree_node(Point) and not ftu.is_tree_node(int)

    @ftu.register_static
    @dataclasses.dataclass(frozen=True)
    class Config:
        power: int

    assert ftu.tree_leaves([Config(2), 1]) == [1]
    traces = []

    def f(cfg: Config, x: Any) -> Any:
        traces.append(cfg)
        return x ** cfg.power

    jf = fg.jit(f)
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_allclose(jf(Config(2), x), x ** 2)
    np.testing.assert_allclose(jf(Config(3), x), x ** 3)
    jf(Config(2), x)
    assert traces == [Config(2), Config(3)]


# --- Partial -------------------------------------------------------------------------------


def test_partial_is_a_functools_partial_and_a_pytree() -> None:
    tu = _jax_tu()
    p = ftu.Partial(_scale, 2, c=1)
    assert isinstance(p, functools.partial) and p(3) == 7 and p.func is _scale
    pairs, td = ftu.tree_flatten_with_path(p)
    j_pairs, j_td = tu.tree_flatten_with_path(tu.Partial(_scale, 2, c=1))
    assert _path_texts(pairs, ftu.keystr) == _path_texts(j_pairs, tu.keystr) and repr(td) == repr(j_td)
    assert ftu.tree_structure(ftu.Partial(_scale, 5, c=0)) == td
    assert ftu.tree_structure(ftu.Partial(_scale, 5)) != td
    back = ftu.tree_unflatten(td, [4, 0])
    assert isinstance(back, ftu.Partial) and back(3) == 12
    for inner in (ftu.Partial(_scale, 2), functools.partial(_scale, 2)):
        outer = ftu.Partial(inner, 5)
        assert ftu.tree_leaves(outer) == tu.tree_leaves(tu.Partial(inner, 5)) == [5]
        assert outer() == 10 and outer.func is inner and "Partial(" in repr(outer)
    with pytest.raises(TypeError, match="callable"):
        ftu.Partial(3)


def _apply(p: Any, x: Any) -> Any:
    return p(x)


def test_partial_through_jit_grad_vmap_matches_jax() -> None:
    jax, jnp = jax_or_skip()
    tu = _jax_tu()

    def ours_f(w: Any, x: Any, *, shift: Any) -> Any:
        return fnp.tanh(w * x + shift)

    def jax_f(w: Any, x: Any, *, shift: Any) -> Any:
        return jnp.tanh(w * x + shift)

    w, shift, x = np.float64(0.7), np.float64(0.1), np.linspace(-1.0, 1.0, 4)
    p, jp = ftu.Partial(ours_f, w, shift=shift), tu.Partial(jax_f, w, shift=shift)
    np.testing.assert_allclose(fg.jit(_apply)(p, x), jax.jit(_apply)(jp, x), rtol=1e-12)
    loss = lambda q, x: fnp.sum(q(x) ** 2)  # noqa: E731
    j_loss = lambda q, x: jnp.sum(q(x) ** 2)  # noqa: E731
    g, jg = fg.grad(loss)(p, x), jax.grad(j_loss)(jp, x)
    assert isinstance(g, ftu.Partial) and g.func is ours_f
    for a, b in zip(ftu.tree_leaves(g), tu.tree_leaves(jg)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    ws = np.array([0.5, 1.0, 2.0])
    batched = ftu.Partial(ours_f, ws, shift=shift)
    spec = ftu.Partial(ours_f, 0, shift=None)
    j_spec = tu.Partial(jax_f, 0, shift=None)
    got = fg.vmap(_apply, in_axes=(spec, None))(batched, x)
    want = jax.vmap(_apply, in_axes=(j_spec, None))(tu.Partial(jax_f, ws, shift=shift), x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    made = fg.jit(lambda w: ftu.Partial(ours_f, w * 2, shift=shift))(w)
    assert isinstance(made, ftu.Partial) and made.func is ours_f
    np.testing.assert_allclose(made(x), np.tanh(2 * w * x + shift), rtol=1e-12)


# --- registered classes through the transformations ------------------------------------------


def _layer_loss(layer: Layer, x: Any, np_: Any) -> Any:
    act = getattr(np_, layer.act)
    return np_.sum(act(x @ layer.w + layer.b) ** 2)


def test_dataclass_through_jit_grad_vmap_matches_jax() -> None:
    jax, jnp = jax_or_skip()
    _jax_tu()
    rng = np.random.default_rng(0)
    layer = Layer(rng.normal(size=(3, 2)), rng.normal(size=2), "tanh")
    x = rng.normal(size=(5, 3))
    g = fg.jit(fg.grad(lambda m, x: _layer_loss(m, x, fnp)))(layer, x)
    jg = jax.jit(jax.grad(lambda m, x: _layer_loss(m, x, jnp)))(layer, x)
    assert isinstance(g, Layer) and g.act == "tanh"
    np.testing.assert_allclose(g.w, jg.w, rtol=1e-10)
    np.testing.assert_allclose(g.b, jg.b, rtol=1e-10)
    per_row = fg.vmap(lambda m, r: _layer_loss(m, r[None], fnp), in_axes=(None, 0))(layer, x)
    j_per_row = jax.vmap(lambda m, r: _layer_loss(m, r[None], jnp), in_axes=(None, 0))(layer, x)
    np.testing.assert_allclose(per_row, j_per_row, rtol=1e-10)
    stacked = fg.vmap(lambda w: Layer(w, w.sum(), "relu"))(x)
    assert isinstance(stacked, Layer) and stacked.act == "relu" and stacked.b.shape == (5,)
    axes = Layer(None, 0, "tanh")
    got = fg.vmap(lambda m: m.w.sum() + m.b, in_axes=(axes,))(Layer(layer.w, np.arange(4.0), "tanh"))
    np.testing.assert_allclose(got, layer.w.sum() + np.arange(4.0))


def test_jit_cache_keys_on_static_fields() -> None:
    traces = []

    def f(m: Layer) -> Any:
        traces.append(m.act)
        return getattr(fnp, m.act)(m.w) + m.b

    jf = fg.jit(f)
    w = np.array([-1.0, 2.0])
    for act in ("tanh", "tanh", "exp", "tanh"):
        np.testing.assert_allclose(jf(Layer(w, 1.0, act)), getattr(np, act)(w) + 1)
    assert traces == ["tanh", "exp"]


def test_node_class_keyed_class_and_containers_through_transformations() -> None:
    x = np.array([1.0, 2.0, 3.0])
    tree = Box([x, Keyed(OrderedDict([("z", x), ("a", 2 * x)]), Point(x, None))], "lbl")

    def loss(t: Box) -> Any:
        first, keyed = t.items
        return fnp.sum(first * keyed.first["z"]) + fnp.sum(keyed.first["a"] * keyed.rest.x)

    g = fg.grad(loss)(tree)
    assert isinstance(g, Box) and g.label == "lbl" and list(g.items[1].first) == ["z", "a"]
    np.testing.assert_allclose(g.items[0], x)
    np.testing.assert_allclose(g.items[1].first["a"], x)
    np.testing.assert_allclose(g.items[1].rest.x, 2 * x)
    assert g.items[1].rest.y is None
    doubled = fg.jit(lambda t: ftu.tree_map(lambda v: v * 2, t))(tree)
    assert ftu.tree_structure(doubled) == ftu.tree_structure(tree)
    for a, b in zip(ftu.tree_leaves(doubled), ftu.tree_leaves(tree)):
        np.testing.assert_allclose(a, 2 * b)
    rows = fg.vmap(lambda r: Box([r, Point(r * 2, None)], "row"))(np.ones((4, 2)))
    assert rows.label == "row" and rows.items[1].x.shape == (4, 2) and rows.items[1].y is None
