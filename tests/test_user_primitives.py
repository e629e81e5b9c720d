"""JAX's tutorial "How JAX primitives work" run on JAX and on fungraph with only the imports
switched, in both dtype modes: a user's ``multiply_add`` primitive with ``def_impl``,
``def_abstract_eval``, a jvp rule in ``ad.primitive_jvps`` (JAX's ``ad.Zero`` tangents), a
transpose in ``ad.primitive_transposes`` and a batching rule in ``batching.primitive_batchers``
gives JAX's values under eager calls, ``jit``, ``jvp``, ``grad``, ``vmap`` and their compositions.
JAX lowers the primitive through its MLIR rule; fungraph's jit runs the ``impl`` (its CPU engine
falls back to a primitive's impl where no lowering is registered)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.core as fg_core
import fungraph.extend.core as fg_ext_core
from fungraph import lax as flax
from fungraph.core import MissingRuleError
from fungraph.interpreters import ad as fad
from fungraph.interpreters import batching as fbatching
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()
import jax.extend.core as jax_ext_core  # noqa: E402
from jax import core as jax_core  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax._src.lib.mlir.dialects import hlo  # noqa: E402
from jax.interpreters import ad as jad  # noqa: E402
from jax.interpreters import batching as jbatching  # noqa: E402
from jax.interpreters import mlir  # noqa: E402

#: (api, lax, jax.extend.core, jax.core, ad, batching)
LIBS = {"jax": (jax, jlax, jax_ext_core, jax_core, jad, jbatching),
        "fungraph": (fg, flax, fg_ext_core, fg_core, fad, fbatching)}


def define(api: Any, lax: Any, ext_core: Any, core: Any, ad: Any, batching: Any) -> dict[str, Any]:
    """The tutorial's primitive and its rules, against one library; returns ``square_add_prim``
    and the primitive. JAX's MLIR lowering is registered for JAX only (fungraph runs the impl)."""
    multiply_add_p = ext_core.Primitive("multiply_add")

    def multiply_add_prim(x: Any, y: Any, z: Any) -> Any:
        return multiply_add_p.bind(x, y, z)

    def square_add_prim(a: Any, b: Any) -> Any:
        return multiply_add_prim(a, a, b)

    def multiply_add_impl(x: Any, y: Any, z: Any) -> Any:
        return np.add(np.multiply(x, y), z)

    multiply_add_p.def_impl(multiply_add_impl)

    def multiply_add_abstract_eval(xs: Any, ys: Any, zs: Any) -> Any:
        assert xs.shape == ys.shape
        assert xs.shape == zs.shape
        return core.ShapedArray(xs.shape, xs.dtype)

    multiply_add_p.def_abstract_eval(multiply_add_abstract_eval)

    if api is jax:
        def multiply_add_lowering(ctx: Any, xc: Any, yc: Any, zc: Any) -> Any:
            return [hlo.AddOp(hlo.MulOp(xc, yc), zc).result]

        mlir.register_lowering(multiply_add_p, multiply_add_lowering, platform="cpu")

    def multiply_add_value_and_jvp(arg_values: Any, arg_tangents: Any) -> Any:
        x, y, z = arg_values
        xt, yt, zt = arg_tangents
        primal_out = multiply_add_prim(x, y, z)

        def make_zero(tan: Any) -> Any:
            return lax.full_like(x, 0) if type(tan) is ad.Zero else tan

        output_tangent = multiply_add_prim(make_zero(xt), y, multiply_add_prim(x, make_zero(yt), make_zero(zt)))
        return (primal_out, output_tangent)

    ad.primitive_jvps[multiply_add_p] = multiply_add_value_and_jvp

    def multiply_add_transpose(ct: Any, x: Any, y: Any, z: Any) -> Any:
        if not ad.is_undefined_primal(x):
            assert ad.is_undefined_primal(y)
            ct_y = ad.Zero(y.aval) if type(ct) is ad.Zero else multiply_add_prim(x, ct, lax.full_like(x, 0))
            res = None, ct_y, ct
        else:
            assert ad.is_undefined_primal(x)
            ct_x = ad.Zero(x.aval) if type(ct) is ad.Zero else multiply_add_prim(ct, y, lax.full_like(y, 0))
            res = ct_x, None, ct
        return res

    ad.primitive_transposes[multiply_add_p] = multiply_add_transpose

    def multiply_add_batch(vector_arg_values: Any, batch_axes: Any) -> Any:
        assert batch_axes[0] == batch_axes[1]
        assert batch_axes[0] == batch_axes[2]
        res = multiply_add_prim(*vector_arg_values)
        return res, batch_axes[0]

    batching.primitive_batchers[multiply_add_p] = multiply_add_batch
    return {"square_add_prim": square_add_prim, "p": multiply_add_p}


#: Each library's primitive is defined once (JAX's MLIR lowering registry refuses a second
#: rule per primitive object only per object, but one definition keeps the test cheap).
DEFINED = {name: define(*lib) for name, lib in LIBS.items()}


def _cases(api: Any, sq: Any) -> dict[str, Any]:
    """The tutorial's calls of ``square_add_prim``, as name -> result."""
    return {
        "eager": sq(2.0, 10.0),
        "jit": api.jit(sq)(2.0, 10.0),
        "eager_jvp": api.jvp(sq, (2.0, 10.0), (1.0, 1.0)),
        "jit_jvp": api.jit(lambda arg_values, arg_tangents: api.jvp(sq, arg_values, arg_tangents))(
            (2.0, 10.0), (1.0, 1.0)),
        "jit_static": api.jit(lambda x, y: sq(x, y), static_argnums=1)(2.0, 10.0),
        "grad": api.grad(sq)(2.0, 10.0),
        "grad_both": api.grad(sq, argnums=(0, 1))(2.0, 10.0),
        "jit_grad": api.jit(lambda x, y: api.grad(sq)(x, y))(2.0, 10.0),
        "grad_jit": api.grad(api.jit(sq))(2.0, 10.0),
        "vmap": api.vmap(sq, in_axes=0, out_axes=0)(np.array([2.0, 3.0]), np.array([10.0, 20.0])),
        "jit_vmap": api.jit(api.vmap(sq, in_axes=0, out_axes=0))(np.array([2.0, 3.0]), np.array([10.0, 20.0])),
        "eager_f32": sq(np.float32(2.0), np.float32(10.0)),
    }


@pytest.mark.parametrize("x64", [False, True])
def test_multiply_add_tutorial_matches_jax(x64: bool) -> None:
    with fg.enable_x64(x64), jax.enable_x64(x64):
        got = _cases(fg, DEFINED["fungraph"]["square_add_prim"])
        want = _cases(jax, DEFINED["jax"]["square_add_prim"])
    _compare(got, want)


def _compare(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal values, shapes and dtypes; eager results compare by value only, because JAX's eager
    ``bind`` of a user's primitive returns its ``impl``'s output unconverted (a float64 numpy
    scalar from Python floats even with x64 off)."""
    assert got.keys() == want.keys()
    for case in want:
        g_leaves, w_leaves = jax.tree_util.tree_leaves(got[case]), jax.tree_util.tree_leaves(want[case])
        assert len(g_leaves) == len(w_leaves), case
        for g, w in zip(g_leaves, w_leaves, strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape, (case, g.shape, w.shape)
            assert case.startswith("eager") or g.dtype == w.dtype, (case, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=case)


def test_batching_rule_assertion_fails_on_both() -> None:
    """The tutorial's batching rule asserts all operands are batched alike, which ``vmap(grad)``
    breaks (the transpose passes an unbatched zero): both libraries raise its AssertionError."""
    for name in LIBS:
        api, sq = LIBS[name][0], DEFINED[name]["square_add_prim"]
        with pytest.raises(AssertionError):
            api.vmap(api.grad(sq))(np.array([2.0, 3.0]), np.array([10.0, 20.0]))


def test_staged_equation_is_the_users_primitive() -> None:
    sq, p = DEFINED["fungraph"]["square_add_prim"], DEFINED["fungraph"]["p"]
    closed = fg.make_jaxpr(sq)(2.0, 10.0)
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive is p and eqn.primitive.name == "multiply_add"
    assert p in fad.primitive_jvps and p in fad.primitive_transposes and p in fbatching.primitive_batchers


def test_two_primitives_of_one_name_stay_apart_under_jit() -> None:
    """JAX lets primitives share a name; the jit cache must not mistake one for the other."""
    a, b = fg_ext_core.Primitive("twin"), fg_ext_core.Primitive("twin")
    for p, k in ((a, 2.0), (b, 3.0)):
        p.def_impl(lambda x, k=k: np.multiply(x, k))
        p.def_abstract_eval(lambda x: x)
    x = np.float32(1.0)
    assert float(fg.jit(a.bind)(x)) == 2.0
    assert float(fg.jit(b.bind)(x)) == 3.0


def test_missing_rules_are_named() -> None:
    p = fg_ext_core.Primitive("half_done")
    with pytest.raises(MissingRuleError, match="no evaluation rule for primitive `half_done`.*def_impl"):
        p.bind(np.float32(1.0))
    p.def_impl(lambda x: np.multiply(x, 2))
    assert float(p.bind(np.float32(1.5))) == 3.0  # eager needs only the impl, as in JAX
    with pytest.raises(MissingRuleError, match="no abstract evaluation rule for primitive `half_done`"):
        fg.jit(p.bind)(np.float32(1.0))
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(MissingRuleError, match="no jvp rule for primitive `half_done`"):
        fg.grad(p.bind)(np.float32(1.0))
    p.def_jvp(lambda primals, tangents: (p.bind(*primals), p.bind(*tangents)))
    with pytest.raises(NotImplementedError, match="cannot transpose `half_done`"):  # JAX's error type
        fg.grad(p.bind)(np.float32(1.0))
    with pytest.raises(MissingRuleError, match="no batch rule for primitive `half_done`"):
        fg.vmap(p.bind)(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="registered for a Primitive, got str"):
        fad.primitive_jvps["half_done"] = lambda primals, tangents: None


@pytest.mark.parametrize("x64", [False, True])
def test_defjvp_matches_jax(x64: bool) -> None:
    def build(ext_core: Any, core: Any, ad: Any) -> Any:
        p = ext_core.Primitive("scaled_sin")
        p.def_impl(lambda x, y: np.sin(x) * y)
        p.def_abstract_eval(lambda x, y: core.ShapedArray(x.shape, x.dtype))
        ad.defjvp(p, lambda g, x, y: g * jnp_cos(x) * y, lambda g, x, y: g * jnp_sin(x))
        return p

    outs = {}
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for name, (api, _, ext_core, core, ad, _) in LIBS.items():
            global jnp_cos, jnp_sin
            jnp_cos, jnp_sin = (jnp.cos, jnp.sin) if api is jax else (fg.numpy.cos, fg.numpy.sin)
            p = build(ext_core, core, ad)
            outs[name] = {
                "eager_jvp": api.jvp(lambda x, y: p.bind(x, y), (0.5, 2.0), (1.0, 0.25)),
                "grad": api.grad(lambda x, y: p.bind(x, y), argnums=(0, 1))(0.5, 2.0),
                "grad_x": api.grad(lambda x, y: p.bind(x, y))(0.5, 2.0),
            }
    _compare(outs["fungraph"], outs["jax"])


@pytest.mark.parametrize("x64", [False, True])
def test_multiple_results_primitive_matches_jax(x64: bool) -> None:
    """A primitive with ``multiple_results = True``: rules take and give lists."""
    def build(ext_core: Any, core: Any, batching: Any) -> Any:
        p = ext_core.Primitive("sum_and_diff")
        p.multiple_results = True
        p.def_impl(lambda x, y: [np.add(x, y), np.subtract(x, y)])
        p.def_abstract_eval(lambda x, y: [core.ShapedArray(x.shape, x.dtype)] * 2)

        def batch(args: Any, dims: Any) -> Any:
            assert dims[0] == dims[1]
            return p.bind(*args), [dims[0], dims[0]]

        batching.primitive_batchers[p] = batch
        return p

    outs = {}
    with fg.enable_x64(x64), jax.enable_x64(x64):
        for name, (api, _, ext_core, core, _, batching) in LIBS.items():
            p = build(ext_core, core, batching)
            x, y = np.arange(3.0), np.array([0.5, -1.0, 2.0])
            if api is jax:
                mlir.register_lowering(p, mlir.lower_fun(lambda x, y: [x + y, x - y], multiple_results=True))
            outs[name] = {"eager": p.bind(x[0], y[0]), "jit": api.jit(lambda a, b: p.bind(a, b))(x, y),
                          "vmap": api.vmap(lambda a, b: p.bind(a, b))(x, y)}
    _compare(outs["fungraph"], outs["jax"])
