"""JAX's tutorial "Writing custom Jaxpr interpreters in JAX" run on JAX and on fungraph with only
the imports switched, in both dtype modes: ``make_jaxpr`` gives a closed jaxpr whose equations
carry primitives with ``.name`` and ``.bind``, vars and ``Literal``s with ``.val``, and the
tutorial's hand-written evaluator and ``inverse`` interpreter give JAX's results, also under
``jit(vmap(grad(...)))``. Plus: every ``lax.*_p`` fungraph exports binds to JAX's result."""

from __future__ import annotations

from functools import wraps
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.extend.core as fcore
import fungraph.numpy as fnp
from fungraph import lax as flax
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
import jax.extend.core as jcore  # noqa: E402
from jax import lax as jlax  # noqa: E402

#: the API a program is written against: (jax, jax.numpy, jax.lax, jax.extend.core)
LIBS = {"jax": (jax, jnp, jlax, jcore), "fungraph": (fg, fnp, flax, fcore)}


def safe_map(f: Any, *args: Any) -> list[Any]:
    """``jax._src.util.safe_map``, which the tutorial imports (it is not public API)."""
    assert len({len(a) for a in args}) == 1
    return list(map(f, *args))


def tutorial(api: Any, jnp_: Any, lax: Any, core: Any) -> dict[str, Any]:
    """The tutorial's code, written against ``api`` (jax or fungraph); returns its functions."""

    def eval_jaxpr(jaxpr: Any, consts: Any, *args: Any) -> list[Any]:
        env = {}

        def read(var: Any) -> Any:
            if type(var) is core.Literal:
                return var.val
            return env[var]

        def write(var: Any, val: Any) -> None:
            env[var] = val

        safe_map(write, jaxpr.invars, args)
        safe_map(write, jaxpr.constvars, consts)
        for eqn in jaxpr.eqns:
            invals = safe_map(read, eqn.invars)
            outvals = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
            safe_map(write, eqn.outvars, outvals)
        return safe_map(read, jaxpr.outvars)

    inverse_registry = {lax.exp_p: jnp_.log, lax.tanh_p: jnp_.arctanh}

    def inverse_jaxpr(jaxpr: Any, consts: Any, *args: Any) -> list[Any]:
        env = {}

        def read(var: Any) -> Any:
            if type(var) is core.Literal:
                return var.val
            return env[var]

        def write(var: Any, val: Any) -> None:
            env[var] = val

        safe_map(write, jaxpr.outvars, args)
        safe_map(write, jaxpr.constvars, consts)
        for eqn in jaxpr.eqns[::-1]:
            invals = safe_map(read, eqn.outvars)
            if eqn.primitive not in inverse_registry:
                raise NotImplementedError(f"{eqn.primitive} does not have registered inverse.")
            outval = inverse_registry[eqn.primitive](*invals)
            safe_map(write, eqn.invars, [outval])
        return safe_map(read, jaxpr.invars)

    def inverse(fun: Any) -> Any:
        @wraps(fun)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            closed_jaxpr = api.make_jaxpr(fun)(*args, **kwargs)
            out = inverse_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.literals, *args)
            return out[0]
        return wrapped

    def f(x: Any) -> Any:
        return jnp_.exp(jnp_.tanh(x))

    def bar(w: Any, b: Any, x: Any) -> Any:
        return jnp_.dot(w, x) + b + jnp_.ones(5), x

    return {"eval_jaxpr": eval_jaxpr, "inverse": inverse, "f": f, "bar": bar}


def _examine(api: Any, jnp_: Any, fun: Any, *args: Any) -> tuple:
    """What the tutorial's ``examine_jaxpr`` prints, as comparable values."""
    closed = api.make_jaxpr(fun)(*args)
    jaxpr = closed.jaxpr
    eqns = [(e.primitive.name, len(e.invars), len(e.outvars)) for e in jaxpr.eqns]
    return len(jaxpr.invars), len(jaxpr.outvars), len(jaxpr.constvars), len(closed.consts), eqns


@pytest.mark.parametrize("x64", [False, True])
def test_examine_jaxpr_structure(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        got = {}
        for name, (api, jnp_, _, _) in LIBS.items():
            got[name] = _examine(api, jnp_, lambda x: x + 1, 5)
        assert got["fungraph"] == got["jax"]
        closed = fg.make_jaxpr(lambda x: x + 1)(5)
        (eqn,) = closed.jaxpr.eqns
        assert eqn.primitive is flax.add_p and type(eqn.invars[1]) is fcore.Literal and eqn.invars[1].val == 1
        assert eqn.invars[0] is closed.jaxpr.invars[0] and eqn.outvars[0] is closed.jaxpr.outvars[0]


@pytest.mark.parametrize("x64", [False, True])
def test_eval_jaxpr_by_hand(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        outs = {}
        for name, (api, jnp_, lax, core) in LIBS.items():
            t = tutorial(api, jnp_, lax, core)
            closed = api.make_jaxpr(t["f"])(jnp_.ones(5))
            first = t["eval_jaxpr"](closed.jaxpr, closed.literals, jnp_.ones(5))
            w, b, x = jnp_.arange(50.0).reshape(5, 10) / 50, jnp_.ones(5), jnp_.linspace(0.0, 1.0, 10)
            closed = api.make_jaxpr(t["bar"])(w, b, x)
            second = t["eval_jaxpr"](closed.jaxpr, closed.literals, w, b, x)
            outs[name] = [np.asarray(o) for o in first + second]
        for a, b_ in zip(outs["fungraph"], outs["jax"], strict=True):
            assert a.dtype == b_.dtype and a.shape == b_.shape
            np.testing.assert_allclose(a, b_, rtol=1e-6)


@pytest.mark.parametrize("x64", [False, True])
def test_inverse_interpreter(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        outs = {}
        for name, (api, jnp_, lax, core) in LIBS.items():
            t = tutorial(api, jnp_, lax, core)
            f_inv = t["inverse"](t["f"])
            back = f_inv(t["f"](1.0))
            staged = api.make_jaxpr(t["inverse"](t["f"]))(t["f"](1.0))
            prims = [e.primitive.name for e in staged.jaxpr.eqns]
            grads = api.jit(api.vmap(api.grad(t["inverse"](t["f"]))))((jnp_.arange(5) + 1.0) / 5.0)
            outs[name] = (np.asarray(back), prims, np.asarray(grads))
        (fb, fp, fgr), (jb, jp, jgr) = outs["fungraph"], outs["jax"]
        np.testing.assert_allclose(fb, 1.0, rtol=1e-5)
        assert fb.dtype == jb.dtype
        assert fp == jp == ["log", "atanh"]
        assert fgr.dtype == jgr.dtype
        np.testing.assert_allclose(fgr, jgr, rtol=1e-5)


def _control_flow_program(api: Any, jnp_: Any, lax: Any) -> Any:
    def f(x: Any) -> Any:
        y = lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, x)
        z = lax.fori_loop(0, 3, lambda i, c: c + i, y)
        w = api.jit(lambda a: jnp_.sin(a) @ a)(z)
        return jnp_.where(z > 1, z, 0.0)[::2], w, jnp_.sort(-z), z.astype(jnp_.int32), jnp_.array([1.0, 2, 3, 4]) * x
    return f


@pytest.mark.parametrize("x64", [False, True])
def test_eval_jaxpr_by_hand_binds_every_kind_of_equation(x64: bool) -> None:
    """The tutorial's evaluator re-binds control flow, nested jit and literals of the graph's
    types (``Literal.val`` keeps the literal's dtype): the results are JAX's."""
    with fg.enable_x64(x64), jax.enable_x64(x64):
        outs = {}
        for name, (api, jnp_, lax, core) in LIBS.items():
            f = _control_flow_program(api, jnp_, lax)
            x = jnp_.arange(4.0)
            closed = api.make_jaxpr(f)(x)
            outs[name] = [np.asarray(o) for o in tutorial(api, jnp_, lax, core)["eval_jaxpr"](
                closed.jaxpr, closed.literals, x)]
        for a, b in zip(outs["fungraph"], outs["jax"], strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_inverse_missing_rule_names_the_primitive() -> None:
    t = tutorial(fg, fnp, flax, fcore)
    with pytest.raises(NotImplementedError, match="sin does not have registered inverse"):
        t["inverse"](fnp.sin)(0.5)


def test_jaxpr_as_fun_and_aliases() -> None:
    closed = fg.make_jaxpr(lambda x, y: (x * y + 2.0, x))(np.float32(3), np.float32(4))
    assert isinstance(closed, fcore.ClosedJaxpr) and isinstance(closed.jaxpr, fcore.Jaxpr)
    assert all(type(v) is fcore.Var for v in closed.jaxpr.invars)
    out = fcore.jaxpr_as_fun(closed)(np.float32(3), np.float32(4))
    np.testing.assert_allclose(np.asarray(out[0]), 14.0)
    with pytest.raises(TypeError, match="expected a graph from make_jaxpr"):
        fcore.jaxpr_as_fun(lambda x: x)


#: operand dtypes per primitive: float by default; those below need other kinds.
_INT_PRIMS = {"and", "or", "xor", "not"}
_COMPLEX_PRIMS = {"real", "imag", "conj"}
#: primitives checked against JAX's primitive itself (bound with these params) rather than a lax function
_PARAMS = {"integer_pow": {"y": 3}, "convert_element_type": {"new_dtype": np.dtype(np.int32)}, "igamma_grad_a": {}}
#: fungraph's name -> jax.lax's function of the same operation, where the names differ.
_JAX_FUN = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "not": "bitwise_not",
            "polygamma": "polygamma"}


def _operands(name: str, arity: int) -> list[np.ndarray]:
    if name in _INT_PRIMS:
        return [np.array([3, 5, -6], np.int32), np.array([6, 3, 12], np.int32)][:arity]
    if name in _COMPLEX_PRIMS:
        return [np.array([1 + 2j, -0.5j, 3], np.complex64)]
    if name == "polygamma":
        return [np.array([1.0, 2.0, 0.0], np.float32), np.array([0.6, 1.5, 2.5], np.float32)]
    if name in {"acosh", "zeta"}:
        return [np.array([1.5, 2.0, 3.25], np.float32), np.array([0.5, 1.5, 2.0], np.float32)][:arity]
    return [np.array([0.3, 0.55, 0.75], np.float32), np.array([0.6, 0.25, 0.9], np.float32)][:arity]


@pytest.mark.parametrize("name", flax._primitives.ELEMENTWISE_NAMES)
def test_lax_p_binds_like_jax(name: str) -> None:
    prim = getattr(flax, f"{name}_p")
    assert prim.name == name and getattr(jlax, f"{name}_p").name == name
    args = _operands(name, prim.arity)
    params = _PARAMS.get(name, {})
    with fg.enable_x64(False), jax.enable_x64(False):
        got = np.asarray(prim.bind(*args, **params))
        if name in _PARAMS:
            want = np.asarray(getattr(jlax, f"{name}_p").bind(*args, **{**params, **(
                {"weak_type": False, "sharding": None} if name == "convert_element_type" else {})}))
        else:
            want = np.asarray(getattr(jlax, _JAX_FUN.get(name, name))(*args))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


_X = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.5]], np.float32)
_V = np.array([1.0, -2.0, 0.25], np.float32)
#: name -> (operands, fungraph's params, the same operation in JAX)
_STRUCTURAL = {
    "argmax": ((_X,), {"axis": 1, "index_dtype": np.dtype(np.int32)}, lambda x: jlax.argmax(x, 1, np.int32)),
    "argmin": ((_X,), {"axis": 0, "index_dtype": np.dtype(np.int32)}, lambda x: jlax.argmin(x, 0, np.int32)),
    "broadcast_in_dim": ((_V,), {"shape": (2, 3), "broadcast_dimensions": (1,)},
                         lambda v: jlax.broadcast_in_dim(v, (2, 3), (1,))),
    "concatenate": ((_X, _X), {"axis": 1}, lambda a, b: jlax.concatenate([a, b], 1)),
    "cumsum": ((_X,), {"axis": 1, "reverse": True}, lambda x: jlax.cumsum(x, 1, reverse=True)),
    "dot_general": ((_X, _X), {"dimension_numbers": (((1,), (1,)), ((), ()))},
                    lambda a, b: jlax.dot_general(a, b, (((1,), (1,)), ((), ())))),
    "dynamic_update_slice": ((_X, _V[None, :2], np.int32(1), np.int32(1)), {"mode": "clamp"},
                             lambda x, u, i, j: jlax.dynamic_update_slice(x, u, (i, j))),
    "pad": ((_X, np.float32(0)), {"padding_config": ((1, 0, 0), (0, 1, 1))},
            lambda x, z: jlax.pad(x, z, ((1, 0, 0), (0, 1, 1)))),
    "reduce_max": ((_X,), {"axes": (1,)}, lambda x: jlax.reduce_max(x, (1,))),
    "reduce_min": ((_X,), {"axes": (0,)}, lambda x: jlax.reduce_min(x, (0,))),
    "reduce_prod": ((_X,), {"axes": (1,)}, lambda x: jlax.reduce_prod(x, (1,))),
    "reduce_sum": ((_X,), {"axes": (0, 1)}, lambda x: jlax.reduce_sum(x, (0, 1))),
    "reshape": ((_X,), {"new_sizes": (3, 2)}, lambda x: jlax.reshape(x, (3, 2))),
    "rev": ((_X,), {"dimensions": (0, 1)}, lambda x: jlax.rev(x, (0, 1))),
    "slice": ((_X,), {"start_indices": (0, 1), "limit_indices": (2, 3), "strides": (1, 2)},
              lambda x: jlax.slice(x, (0, 1), (2, 3), (1, 2))),
    "sort": ((_X,), {"axis": 0}, lambda x: jlax.sort(x, 0)),
    "stop_gradient": ((_X,), {}, jlax.stop_gradient),
    "transpose": ((_X,), {"permutation": (1, 0)}, lambda x: jlax.transpose(x, (1, 0))),
    "bitcast_convert_type": ((_X,), {"new_dtype": np.dtype(np.int32)},
                             lambda x: jlax.bitcast_convert_type(x, np.int32)),
    "conv_general_dilated": ((_X[None, None], _X[None, None, :, :2]),
                             {"window_strides": (1, 1), "padding": ((0, 0), (1, 0)), "lhs_dilation": (1, 1),
                              "rhs_dilation": (1, 1)},
                             lambda a, b: jlax.conv_general_dilated(a, b, (1, 1), ((0, 0), (1, 0)))),
    "fft": ((_X.astype(np.complex64),), {"fft_type": "FFT", "fft_lengths": (3,)},
            lambda x: jlax.fft(x, "FFT", (3,))),
    "gather": ((_X, np.array([2, 0, 2], np.int32)), {"axis": 1}, lambda x, i: jnp.take(x, i, axis=1)),
    "optimization_barrier": ((_X,), {}, lambda x: jlax.optimization_barrier([x])),
    "scatter_add": ((_X, np.array([2, 0], np.int32)), {"axis": 0, "shape": (3, 3)},
                    lambda u, i: jnp.zeros((3, 3), np.float32).at[i].add(u)),
    "select_n": ((_X > 1, _X, -_X), {}, lambda p, a, b: jlax.select_n(p, b, a)),
}
_CONTROL_FLOW = {"cond", "linear_solve", "scan", "while"}


def test_every_exported_primitive_is_checked() -> None:
    exported = {*flax._primitives.ELEMENTWISE_NAMES, *flax._primitives.PARAM_DIFFERENCES}
    assert exported == {*flax._primitives.ELEMENTWISE_NAMES, *_STRUCTURAL, *_CONTROL_FLOW}
    assert {n[:-2] for n in flax._primitives.__all__} == exported
    renamed = flax._primitives.FUNGRAPH_NAMES
    assert all(getattr(flax, f"{n}_p").name == renamed.get(n, n) for n in exported)
    differ = {n for n in exported if getattr(flax, f"{n}_p").name != getattr(jlax, f"{n}_p").name}
    assert differ == {"conv_general_dilated", "gather", "select_n", "scatter_add"}  # JAX's is "scatter-add"


@pytest.mark.parametrize("name", sorted(_STRUCTURAL))
def test_structural_p_binds_like_jax(name: str) -> None:
    args, params, jax_fun = _STRUCTURAL[name]
    with fg.enable_x64(False), jax.enable_x64(False):
        got = getattr(flax, f"{name}_p").bind(*args, **params)
        want = jax_fun(*args)
        got, want = (np.asarray(got[0] if isinstance(got, (list, tuple)) else got),
                     np.asarray(want[0] if isinstance(want, (list, tuple)) else want))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("x64", [False, True])
def test_control_flow_equations_are_the_exported_primitives(x64: bool) -> None:
    with fg.enable_x64(x64):
        f = _control_flow_program(fg, fnp, flax)
        closed = fg.make_jaxpr(lambda x: (f(x), flax.while_loop(lambda c: c < 10, lambda c: c * 2, x[0])))(
            fnp.arange(4.0))
        prims = {e.primitive for e in closed.jaxpr.eqns}
    assert {flax.cond_p, flax.while_p, flax.scan_p} <= prims


def _indexing_program(api: Any, jnp_: Any, lax: Any) -> Any:
    def f(x: Any, idx: Any, seg: Any) -> Any:
        c = lax.conv_general_dilated(x[None, None], x[None, None, :2, :2], (1, 1), "VALID")
        t = api.ops.segment_sum(x[0], seg, num_segments=3)
        return x[idx].sum(0) + lax.select(x[0] > 0.5, x[1], -x[1]), c, t, lax.bitcast_convert_type(x, jnp_.int32)
    return f


def _rule_interpreter(lax: Any) -> tuple[Any, set[str]]:
    """An interpreter keyed on JAX's primitive objects, as programs write them: it evaluates a
    jaxpr equation by equation, through a rule where the table has one (here: record, re-bind)."""
    keyed = ("gather", "select_n", "conv_general_dilated", "scatter_add", "bitcast_convert_type")
    fired: set[str] = set()

    def rule(name: str) -> Any:
        def apply(prim: Any, *args: Any, **params: Any) -> Any:
            fired.add(name)
            return prim.bind(*args, **params)
        return apply

    rules = {getattr(lax, f"{n}_p"): rule(n) for n in keyed}

    def run(jaxpr: Any, consts: Any, *args: Any) -> list[Any]:
        env = dict(zip(jaxpr.invars, args)) | dict(zip(jaxpr.constvars, consts))
        for eqn in jaxpr.eqns:
            invals = [v.val if hasattr(v, "val") else env[v] for v in eqn.invars]
            apply = rules.get(eqn.primitive)
            outs = apply(eqn.primitive, *invals, **eqn.params) if apply else eqn.primitive.bind(*invals, **eqn.params)
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
        return [v.val if hasattr(v, "val") else env[v] for v in jaxpr.outvars]

    return run, fired


def test_interpreter_keyed_on_jax_primitive_names() -> None:
    """A rule table keyed on ``lax.gather_p``, ``select_n_p``, ``conv_general_dilated_p``,
    ``scatter_add_p``, ``bitcast_convert_type_p`` sees fungraph's equations of those
    operations as it sees JAX's, and evaluates the program to JAX's values."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    args = (x, np.array([2, 0], np.int32), np.array([0, 2, 2, 1], np.int32))
    outs, fired = {}, {}
    with fg.enable_x64(False), jax.enable_x64(False):
        for name, (api, jnp_, lax, _) in LIBS.items():
            closed = api.make_jaxpr(_indexing_program(api, jnp_, lax))(*args)
            run, fired[name] = _rule_interpreter(lax)
            outs[name] = [np.asarray(o) for o in run(closed.jaxpr, closed.consts, *args)]
    assert fired["fungraph"] == fired["jax"] == {"gather", "select_n", "conv_general_dilated", "scatter_add",
                                                 "bitcast_convert_type"}
    for a, b in zip(outs["fungraph"], outs["jax"], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)
