"""JAX's "Stateful computations", "Working with pytrees" and "Pseudorandom numbers" tutorials,
run on JAX and on fungraph with only the import changed, in both dtype modes: a counter whose
state is threaded through ``jit``, linear regression over a ``NamedTuple`` of parameters with
``jax.tree.map``, custom pytree nodes (``register_pytree_node``, ``register_pytree_node_class``,
``register_dataclass`` with meta fields), key paths, the ``jax.tree`` API, ``Partial``,
``flatten_util.ravel_pytree``, and keys made by ``random.key``/``split``/``fold_in``."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph.flatten_util import ravel_pytree
from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _counter(lib: Any, np_: Any) -> Any:
    class Counter:
        def count(self, n: Any) -> Any:
            return n + 1, n + 1

    counter, state, values = Counter(), 0, []
    for _ in range(3):
        value, state = lib.jit(counter.count)(state)
        values.append(value)
    return values, state


class Params(NamedTuple):
    weight: Any
    bias: Any


def _linear_regression(lib: Any, np_: Any) -> Any:
    def init(rng: Any) -> Params:
        weights_key, bias_key = lib.random.split(rng)
        return Params(lib.random.normal(weights_key, ()), lib.random.normal(bias_key, ()))

    def loss(params: Params, x: Any, y: Any) -> Any:
        return np_.mean((params.weight * x + params.bias - y) ** 2)

    @lib.jit
    def update(params: Params, x: Any, y: Any) -> Params:
        grad = lib.grad(loss)(params, x, y)
        return lib.tree.map(lambda p, g: p - g * 0.005, params, grad)

    rs = np.random.RandomState(0)
    xs = rs.normal(size=(100, 1))
    ys = xs * 3 - 1 + rs.normal(scale=0.1, size=(100, 1))
    params = init(lib.random.key(42))
    for _ in range(20):
        params = update(params, xs, ys)
    return params


def _custom_nodes(lib: Any, np_: Any) -> Any:
    tu = lib.tree_util

    class MyContainer:
        def __init__(self, name: str, a: Any, b: Any, c: Any) -> None:
            self.name, self.a, self.b, self.c = name, a, b, c

    tu.register_pytree_node(MyContainer, lambda c: ([c.a, c.b, c.c], c.name),
                            lambda name, contents: MyContainer(name, *contents))

    @tu.register_pytree_node_class
    class Special:
        def __init__(self, x: Any, y: Any) -> None:
            self.x, self.y = x, y

        def tree_flatten(self) -> Any:
            return (self.x, self.y), None

        @classmethod
        def tree_unflatten(cls, aux_data: Any, children: Any) -> Special:
            return cls(*children)

    tree = [MyContainer("Alice", 1, 2, 3), MyContainer("Bob", 4, 5, 6)]
    mapped = lib.tree.map(lambda x: x + 1, tree)
    s = lib.jit(lambda s: Special(s.x * 2, s.y + s.x))(Special(np_.ones(2), 3.))
    g = lib.grad(lambda s: np_.sum(s.x * s.y))(Special(np_.ones(2), 3.))
    return ([(m.name, m.a, m.b, m.c) for m in mapped], tu.tree_leaves(tree), (s.x, s.y), (g.x, g.y),
            len(tu.tree_leaves([None, (), {"a": None}])))


def _dataclasses(lib: Any, np_: Any) -> Any:
    @partial(lib.tree_util.register_dataclass, data_fields=["x", "y"], meta_fields=["op"])
    @dataclasses.dataclass
    class Binary:
        x: Any
        y: Any
        op: str

        def go(self) -> Any:
            return self.x + self.y if self.op == "add" else self.x * self.y

    @lib.tree_util.register_dataclass
    @dataclasses.dataclass
    class Powered:
        a: Any
        n: int = dataclasses.field(metadata=dict(static=True), default=2)

    d = Binary(np_.ones(2), np_.arange(2.), "mul")
    g = lib.grad(lambda d: np_.sum(d.go()))(d)
    p = lib.jit(lambda p: Powered(p.a ** p.n, p.n))(Powered(np_.arange(3.)))
    return lib.jit(lambda d: d.go())(d), g.x, g.y, g.op, p.a, p.n, lib.tree_util.tree_leaves(d)


def _key_paths(lib: Any, np_: Any) -> Any:
    tu = lib.tree_util

    @dataclasses.dataclass
    class Obj:
        a: Any

    tu.register_dataclass(Obj, data_fields=["a"], meta_fields=[])
    tree = {"layer": [Params(np_.ones(2), 0.5), (1, 2)], "o": Obj(3.0), "z": None}
    flat, _ = tu.tree_flatten_with_path(tree)
    return ([tu.keystr(p) for p, _ in flat], tu.tree_map_with_path(lambda p, x: tu.keystr(p), tree),
            [tu.keystr(p, simple=True, separator="/") for p, _ in flat],
            [[type(k).__name__ for k in p] for p, _ in flat], lib.tree.flatten_with_path(tree)[0][0][0][0].key)


def _tree_api(lib: Any, np_: Any) -> Any:
    t = {"a": [1., 2.], "b": (np_.ones(2), 3)}
    t2 = {"a": [10., 20.], "b": (np_.zeros(2), 30)}
    _, treedef = lib.tree.flatten(t)
    add = lib.tree_util.Partial(np_.add, np_.ones(2))
    return (lib.tree.map(lambda x, y: x + y, t, t2), lib.tree.leaves(t), lib.tree.structure(t).num_leaves,
            lib.tree.unflatten(treedef, [0] * 4), lib.tree.reduce(lambda a, b: a + np_.sum(b), t, 0.),
            lib.tree.transpose(lib.tree.structure([0, 0]), lib.tree.structure((0, 0)), [(1, 2), (3, 4)]),
            lib.tree.all([True, (1, 2)]), str(lib.tree.structure((1, {"x": 2}))),
            lib.tree.map(lambda x: x * 2, [1, None, 2]),
            lib.tree.map(lambda x: x, [1, None], is_leaf=lambda x: x is None),
            lib.jit(lambda f, x: f(x))(add, np_.arange(2.)), lib.tree_util.tree_leaves(add))


def _ravel_pytree(lib: Any, np_: Any) -> Any:
    ravel = importlib.import_module(lib.__name__ + ".flatten_util").ravel_pytree
    params = {"w": np_.ones((2, 3)), "b": np_.arange(3.), "n": [np_.float32(2.)], "i": np_.arange(2)}
    flat, unravel = ravel(params)
    same, unravel_same = ravel([np_.ones(2), np_.zeros((1, 2))])
    empty, unravel_empty = ravel({})
    grads = lib.grad(lambda f: np_.sum(unravel_same(f)[1] ** 2))(same)
    return flat, unravel(flat * 2), grads, unravel_same(same.astype(np_.int32)), empty, unravel_empty(empty)


def _keys(lib: Any, np_: Any) -> Any:
    r = lib.random
    key = r.key(0)
    k1, k2 = r.split(key)
    keys = r.split(key, 4)
    old = r.PRNGKey(0)
    key, subkey = r.split(old)
    key, *subkeys = r.split(key, 4)
    return (r.key_data(keys), r.key_data(k1), r.key_data(r.fold_in(k1, 7)), r.normal(k2, (3,)),
            r.key_data(r.wrap_key_data(r.key_data(keys))[1]), lib.vmap(lambda k: r.uniform(k, (2,)))(keys),
            r.split(old, 3), r.fold_in(old, 3), r.normal(subkey, (3,)), [r.uniform(k) for k in subkeys],
            r.randint(key, (3,), 0, 100, dtype=np_.int32), r.permutation(k1, 6),
            r.categorical(k2, np_.log(np_.array([0.2, 0.3, 0.5])), shape=(5,)),
            r.uniform(k1, (2,), minval=-1., maxval=2.), r.exponential(k2, (2,)))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "counter": _counter, "linear_regression": _linear_regression, "custom_nodes": _custom_nodes,
    "dataclasses": _dataclasses, "key_paths": _key_paths, "tree_api": _tree_api, "ravel_pytree": _ravel_pytree,
    "keys": _keys,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_state_and_tree_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=1e-4)


def test_typed_key_arrays_have_jax_s_shapes() -> None:
    ours = fg.random.split(fg.random.key(0), (2, 3))
    theirs = jax.random.split(jax.random.key(0), (2, 3))
    assert ours.shape == theirs.shape
    assert str(ours.dtype) == str(theirs.dtype)


@pytest.mark.parametrize("x64", [True, False])
def test_ravel_pytree_refuses_what_jax_refuses(x64: bool) -> None:
    with fg.enable_x64(x64):
        _, unravel = ravel_pytree({"a": fnp.ones(2), "b": fnp.ones(3)})
        with pytest.raises(ValueError, match=r"expected an array of shape \(5,\), got shape \(4,\)"):
            unravel(fnp.ones(4))
        _, unravel_mixed = ravel_pytree([fnp.ones(2), fnp.arange(2)])
        with pytest.raises(TypeError, match="unravel function given array of dtype int32 but expected dtype"):
            unravel_mixed(fnp.arange(4, dtype=fnp.int32))
