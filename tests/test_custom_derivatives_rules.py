"""custom_jvp/custom_vjp as JAX 0.10 behaves: ``defjvps``, ``None`` cotangents from a bwd rule,
how often the function and its rule run under each transformation, and the checks of what a
rule returns (issue #32 item 5, issue #36 item 5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()

X = np.array([0.3, -1.2, 2.0])


# --- how often the function and the rule run --------------------------------------------------


def _counted(lib: Any, m: Any, rule_calls_fun: bool = False) -> tuple[Any, dict[str, int]]:
    """A counting custom_jvp sine; with ``rule_calls_fun`` its rule gets the primal output by
    calling the function, as JAX's documentation writes rules."""
    counts = {"fun": 0, "rule": 0}

    @lib.custom_jvp
    def f(x: Any) -> Any:
        counts["fun"] += 1
        return m.sin(x)

    @f.defjvp
    def f_jvp(primals: tuple, tangents: tuple) -> tuple:
        counts["rule"] += 1
        (x,), (t,) = primals, tangents
        return (f(x) if rule_calls_fun else m.sin(x)), m.cos(x) * t

    return f, counts


TRANSFORMS: dict[str, Callable[[Any, Any], Callable[[], Any]]] = {
    "eager": lambda lib, f: lambda: f(0.4),
    "jvp": lambda lib, f: lambda: lib.jvp(f, (0.4,), (1.0,)),
    "grad": lambda lib, f: lambda: lib.grad(f)(0.4),
    "value_and_grad": lambda lib, f: lambda: lib.value_and_grad(f)(0.4),
    "jit": lambda lib, f: lambda: lib.jit(f)(0.4),
    "jit_grad": lambda lib, f: lambda: lib.jit(lib.grad(f))(0.4),
    "vmap": lambda lib, f: lambda: lib.vmap(f)(X),
    "vmap_grad": lambda lib, f: lambda: lib.vmap(lib.grad(f))(X),
    "grad_grad": lambda lib, f: lambda: lib.grad(lib.grad(f))(0.4),
    "jacfwd": lambda lib, f: lambda: lib.jacfwd(f)(X),
    "jacrev": lambda lib, f: lambda: lib.jacrev(f)(X),
    "grad_vmap": lambda lib, f: lambda: lib.grad(lambda v: lib.vmap(f)(v).sum())(X),
    "jit_grad_vmap": lambda lib, f: lambda: lib.jit(lib.grad(lambda v: lib.vmap(f)(v).sum()))(X),
    "jacfwd_vmap": lambda lib, f: lambda: lib.jacfwd(lib.vmap(f))(X),
    "vmap_vmap": lambda lib, f: lambda: lib.vmap(lib.vmap(f))(X[None]),
    "vmap_grad_vmap": lambda lib, f: lambda: lib.vmap(lib.grad(lambda v: lib.vmap(f)(v).sum()))(X[None]),
}


@pytest.mark.parametrize("mode", ["x64", "x32"])
@pytest.mark.parametrize("rule_calls_fun", [False, True], ids=["rule", "rule_calls_fun"])
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_function_and_rule_run_as_often_as_in_jax(name: str, rule_calls_fun: bool, mode: str) -> None:
    """Under differentiation only the rule runs; the function's side effects happen as in JAX."""
    ours, ours_counts = _counted(fg, fnp, rule_calls_fun)
    theirs, their_counts = _counted(jax, jnp, rule_calls_fun)
    with fg.enable_x64(mode == "x64"), jax.enable_x64(mode == "x64"):
        got = TRANSFORMS[name](fg, ours)()
        want = TRANSFORMS[name](jax, theirs)()
    assert ours_counts == their_counts
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12 if mode == "x64" else 1e-6)


def _counted_vjp(lib: Any, m: Any) -> tuple[Any, dict[str, int]]:
    counts = {"fun": 0, "fwd": 0, "bwd": 0}

    @lib.custom_vjp
    def f(x: Any) -> Any:
        counts["fun"] += 1
        return m.sin(x)

    def f_fwd(x: Any) -> tuple:
        counts["fwd"] += 1
        return m.sin(x), x

    def f_bwd(x: Any, g: Any) -> tuple:
        counts["bwd"] += 1
        return (m.cos(x) * g,)

    f.defvjp(f_fwd, f_bwd)
    return f, counts


VJP_TRANSFORMS = {k: TRANSFORMS[k] for k in ("eager", "grad", "value_and_grad", "jit", "jit_grad", "vmap",
                                             "vmap_grad", "jacrev")}


@pytest.mark.parametrize("name", sorted(VJP_TRANSFORMS))
def test_custom_vjp_function_fwd_and_bwd_run_as_often_as_in_jax(name: str) -> None:
    """Under reverse-mode differentiation only fwd and bwd run, not the function itself."""
    ours, ours_counts = _counted_vjp(fg, fnp)
    theirs, their_counts = _counted_vjp(jax, jnp)
    got = VJP_TRANSFORMS[name](fg, ours)()
    want = VJP_TRANSFORMS[name](jax, theirs)()
    assert ours_counts == their_counts
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


# --- defjvps ------------------------------------------------------------------------------------


def _with_defjvps(lib: Any, m: Any) -> Any:
    @lib.custom_jvp
    def f(x: Any, y: Any) -> Any:
        return m.sin(x) * y

    f.defjvps(lambda x_dot, out, x, y: m.cos(x) * x_dot * y,
              lambda y_dot, out, x, y: m.sin(x) * y_dot)
    return f


def test_defjvps_values_gradients_and_vmap_match_jax() -> None:
    ours, theirs = _with_defjvps(fg, fnp), _with_defjvps(jax, jnp)
    y = np.array([2.0, 0.5, -1.0])
    np.testing.assert_allclose(ours(X, y), theirs(X, y), rtol=1e-14)
    for argnums in (0, 1, (0, 1)):
        got = fg.grad(lambda a, b: ours(a, b).sum(), argnums=argnums)(X, y)
        want = jax.grad(lambda a, b: theirs(a, b).sum(), argnums=argnums)(X, y)
        for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-14)
    got = fg.vmap(fg.grad(ours, argnums=(0, 1)))(X, y)
    want = jax.vmap(jax.grad(theirs, argnums=(0, 1)))(X, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_defjvps_with_none_gives_that_argument_a_zero_tangent() -> None:
    def make(lib: Any, m: Any) -> Any:
        @lib.custom_jvp
        def f(x: Any, y: Any) -> Any:
            return x * y

        f.defjvps(None, lambda y_dot, out, x, y: x * y_dot)
        return f

    ours, theirs = make(fg, fnp), make(jax, jnp)
    got = fg.grad(lambda a, b: ours(a, b).sum(), argnums=(0, 1))(X, 2 * X)
    want = jax.grad(lambda a, b: theirs(a, b).sum(), argnums=(0, 1))(X, 2 * X)
    np.testing.assert_array_equal(got[0], np.zeros(3))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_defjvps_refuses_nondiff_argnums() -> None:
    f = fg.custom_jvp(lambda n, x: x * n, nondiff_argnums=(0,))
    with pytest.raises(TypeError, match="defjvps"):
        f.defjvps(lambda t, out, n, x: t)


# --- custom_vjp: None cotangents ------------------------------------------------------------------


def _vjp_with_none(lib: Any, m: Any) -> Any:
    @lib.custom_vjp
    def f(x: Any, p: Any) -> Any:
        return m.sin(x) * p["a"] + p["b"]

    f.defvjp(lambda x, p: (f(x, p), (x, p)),
             lambda res, ct: (None, {"a": m.sin(res[0]) * ct, "b": None}))
    return f


def test_bwd_may_return_none_for_an_argument_and_for_a_leaf() -> None:
    ours, theirs = _vjp_with_none(fg, fnp), _vjp_with_none(jax, jnp)
    p = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([0.5, 0.5, 0.5])}
    got = fg.grad(lambda x, p: ours(x, p).sum(), argnums=(0, 1))(X, p)
    want = jax.grad(lambda x, p: theirs(x, p).sum(), argnums=(0, 1))(X, p)
    np.testing.assert_array_equal(got[0], np.zeros(3))
    np.testing.assert_array_equal(got[1]["b"], np.zeros(3))
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    got_v = fg.vmap(fg.grad(lambda x, p: ours(x, p).sum(), argnums=1), in_axes=(0, None))(np.stack([X, X]), p)
    want_v = jax.vmap(jax.grad(lambda x, p: theirs(x, p).sum(), argnums=1), in_axes=(0, None))(np.stack([X, X]), p)
    for g, w in zip(fg.tree_util.tree_leaves(got_v), jax.tree_util.tree_leaves(want_v)):
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_bwd_returning_a_list_is_accepted_as_jax_does() -> None:
    f = fg.custom_vjp(lambda x, y: x * y)
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, ct: [res[1] * ct, res[0] * ct])
    assert fg.grad(f, argnums=(0, 1))(2.0, 3.0) == (3.0, 2.0)


# --- checks of rule outputs -------------------------------------------------------------------------


def test_bwd_cotangent_of_the_wrong_shape_is_an_error_naming_the_rule() -> None:
    f = fg.custom_vjp(lambda x: x * 2)

    def f_bwd(res: Any, ct: Any) -> tuple:
        return (fnp.sum(ct),)

    f.defvjp(lambda x: (x * 2, None), f_bwd)
    with pytest.raises(ValueError, match=r"f_bwd.*f64\[\].*f64\[3\]"):
        fg.grad(lambda x: f(x).sum())(X)
    g = jax.custom_vjp(lambda x: x * 2)
    g.defvjp(lambda x: (x * 2, None), lambda res, ct: (jnp.sum(ct),))
    with pytest.raises(ValueError):
        jax.grad(lambda x: g(x).sum())(X)


def test_bwd_with_the_wrong_number_of_cotangents_is_an_error() -> None:
    f = fg.custom_vjp(lambda x, y: x * y)

    def two_bwd(res: Any, ct: Any) -> tuple:
        return (ct,)

    f.defvjp(lambda x, y: (x * y, None), two_bwd)
    with pytest.raises(TypeError, match=r"two_bwd.*one entry per argument \(2\)"):
        fg.grad(f)(1.0, 2.0)


def test_jvp_tangent_of_the_wrong_shape_is_an_error_naming_the_rule() -> None:
    f = fg.custom_jvp(lambda x: x * 2)

    @f.defjvp
    def short_jvp(primals: tuple, tangents: tuple) -> tuple:
        return primals[0] * 2, tangents[0][:2]

    with pytest.raises(TypeError, match=r"short_jvp.*expected f64\[3\].*got f64\[2\]"):
        fg.grad(lambda x: f(x).sum())(X)
    with pytest.raises(TypeError, match=r"short_jvp.*expected f64\[3\].*got f64\[2\]"):
        fg.jvp(f, (X,), (X,))
    g = jax.custom_jvp(lambda x: x * 2)
    g.defjvp(lambda p, t: (p[0] * 2, t[0][:2]))
    with pytest.raises(TypeError):
        jax.grad(lambda x: g(x).sum())(X)


def test_jvp_rule_returning_one_value_is_an_error_asking_for_a_pair() -> None:
    f = fg.custom_jvp(lambda x: x * 2)

    @f.defjvp
    def lone_jvp(primals: tuple, tangents: tuple) -> Any:
        return tangents[0] * 2

    with pytest.raises(TypeError, match=r"lone_jvp.*must produce a pair"):
        fg.grad(lambda x: f(x).sum())(X)
    with pytest.raises(TypeError, match=r"lone_jvp.*must produce a pair"):
        fg.jit(fg.grad(lambda x: f(x).sum()))(X)


def test_jvp_rule_with_an_integer_tangent_is_an_error() -> None:
    f = fg.custom_jvp(lambda x: x * 2)

    @f.defjvp
    def int_jvp(primals: tuple, tangents: tuple) -> tuple:
        return primals[0] * 2, fnp.zeros(3, dtype=fnp.int32)

    with pytest.raises(TypeError, match=r"int_jvp.*expected f64\[3\].*got i32\[3\]"):
        fg.jvp(f, (X,), (X,))
    g = jax.custom_jvp(lambda x: x * 2)
    g.defjvp(lambda p, t: (p[0] * 2, jnp.zeros(3, dtype=jnp.int32)))
    with pytest.raises(TypeError):
        jax.jvp(g, (X,), (X,))


def test_integer_primals_get_float0_tangents_and_integer_outputs_need_them() -> None:
    """As in JAX: the rule sees float0 tangents for integer inputs and must return float0
    tangents for integer outputs (an integer zero is refused)."""
    seen = []

    @fg.custom_jvp
    def f(x: Any, n: Any) -> Any:
        return x * n, n

    @f.defjvp
    def f_jvp(primals: tuple, tangents: tuple) -> tuple:
        seen.append(tangents[1].dtype)
        x, n = primals
        return (x * n, n), (tangents[0] * n, np.zeros(np.shape(n), fg.float0))

    assert fg.grad(lambda x: f(x, np.int32(3))[0])(2.0) == 3.0
    assert seen == [fg.float0]

    @fg.custom_jvp
    def g(x: Any, n: Any) -> Any:
        return x * n, n

    @g.defjvp
    def g_jvp(primals: tuple, tangents: tuple) -> tuple:
        x, n = primals
        return (x * n, n), (tangents[0] * n, fnp.zeros_like(n))

    with pytest.raises(TypeError, match=r"g_jvp.*expected float0\[\] \(tangent type of i32\[\]\)"):
        fg.grad(lambda x: g(x, np.int32(3))[0])(2.0)


def test_jvp_rule_primal_output_must_match_the_function() -> None:
    """Checked where the function has run (under jit, vmap), as JAX does."""
    f = fg.custom_jvp(lambda x: x * 2)

    @f.defjvp
    def tuple_jvp(primals: tuple, tangents: tuple) -> tuple:
        return (primals[0], primals[0]), (tangents[0], tangents[0])

    with pytest.raises(TypeError, match=r"tuple_jvp.*structure"):
        fg.grad(lambda x: fg.jit(f)(x).sum())(X)


def test_fwd_rule_must_return_a_pair_with_the_functions_output() -> None:
    """Checked where the function was staged (under jit); otherwise, as in JAX, the mismatch
    surfaces as the bwd rule's cotangent type error."""
    f = fg.custom_vjp(lambda x: x * 2)

    def lone_fwd(x: Any) -> Any:
        return x * 2

    f.defvjp(lone_fwd, lambda res, ct: (ct * 2,))
    with pytest.raises(TypeError, match=r"lone_fwd.*must produce a pair"):
        fg.grad(lambda x: f(x).sum())(X)

    g = fg.custom_vjp(lambda x: x * 2)

    def short_fwd(x: Any) -> tuple:
        return x[:2] * 2, None

    def short_bwd(res: Any, ct: Any) -> tuple:
        return (ct * 2,)

    g.defvjp(short_fwd, short_bwd)
    with pytest.raises(TypeError, match=r"short_fwd.*\['f64\[3\]'\].*\['f64\[2\]'\]"):
        fg.grad(lambda x: fg.jit(g)(x).sum())(X)
    with pytest.raises(ValueError, match=r"short_bwd.*f64\[2\].*f64\[3\]"):
        fg.grad(lambda x: g(x).sum())(X)
    h = jax.custom_vjp(lambda x: x * 2)
    h.defvjp(lambda x: (x[:2] * 2, None), lambda res, ct: (ct * 2,))
    with pytest.raises((TypeError, ValueError)):
        jax.grad(lambda x: h(x).sum())(X)


def test_symbolic_zeros_flag_is_accepted_off_and_refused_on() -> None:
    f = fg.custom_jvp(lambda x: x * 2)
    f.defjvp(lambda p, t: (p[0] * 2, t[0] * 2), symbolic_zeros=False)
    assert fg.grad(f)(1.0) == 2.0
    with pytest.raises(NotImplementedError, match="symbolic_zeros"):
        f.defjvp(lambda p, t: (p[0] * 2, t[0] * 2), symbolic_zeros=True)
    g = fg.custom_vjp(lambda x: x * 2)
    g.defvjp(lambda x: (x * 2, None), lambda res, ct: (ct * 2,), symbolic_zeros=False, optimize_remat=False)
    assert fg.grad(g)(1.0) == 2.0
    with pytest.raises(NotImplementedError, match="symbolic_zeros"):
        g.defvjp(lambda x: (x * 2, None), lambda res, ct: (ct * 2,), symbolic_zeros=True)


def test_errors_name_the_users_rules_with_nondiff_argnums() -> None:
    f = fg.custom_vjp(lambda n, x: x * n, nondiff_argnums=(0,))

    def n_bwd(n: Any, res: Any, ct: Any) -> tuple:
        return (fnp.sum(ct),)

    f.defvjp(lambda n, x: (x * n, None), n_bwd)
    with pytest.raises(ValueError, match="n_bwd"):
        fg.grad(lambda x: f(2.0, x).sum())(X)


def _closing_over(lib: Any, m: Any) -> Callable[[Any, Any], Any]:
    def outer(x: Any, w: Any) -> Any:
        @lib.custom_jvp
        def f(x: Any) -> Any:
            return m.sin(x) * w

        @f.defjvp
        def closing_jvp(p: tuple, t: tuple) -> tuple:
            return m.sin(p[0]) * w, m.cos(p[0]) * t[0] * w

        return f(x)

    return outer


def test_rule_closing_over_a_differentiated_value_is_an_error_as_in_jax() -> None:
    """JAX raises UnexpectedTracerError; before, jvp returned escaped tracers."""
    ours, theirs = _closing_over(fg, fnp), _closing_over(jax, jnp)
    assert fg.grad(ours)(0.5, 2.0) == pytest.approx(float(jax.grad(theirs)(0.5, 2.0)))
    for call in (lambda: fg.grad(ours, argnums=1)(0.5, 2.0), lambda: fg.jvp(lambda w: ours(0.5, w), (2.0,), (1.0,))):
        with pytest.raises(TypeError, match="closing_jvp.*closes over a value"):
            call()
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.jvp(lambda w: theirs(0.5, w), (2.0,), (1.0,))


# --- an eager call runs the function as it is ---------------------------------------------------


def _eager_calls(lib: Any, m: Any) -> dict[str, Callable[[], Any]]:
    """Calls of a custom_jvp and a custom_vjp function outside every transformation, on Python
    scalars, numpy values and arrays."""
    seen: list[str] = []

    @lib.custom_jvp
    def cube(x: Any) -> Any:
        seen.append(type(x).__name__)
        return x ** 3

    cube.defjvp(lambda p, t: (cube(p[0]), 3 * p[0] ** 2 * t[0]))

    @lib.custom_vjp
    def affine(x: Any, y: Any) -> Any:
        return x * y + 1

    affine.defvjp(lambda x, y: (affine(x, y), (x, y)), lambda r, ct: (r[1] * ct, r[0] * ct))

    @lib.custom_jvp
    def pair(x: Any) -> Any:
        return 3, [x * 2, m.sin(x)]

    pair.defjvp(lambda p, t: (pair(p[0]), pair(t[0])))

    def scaled(n: int, x: Any) -> Any:
        return x * n

    scale = lib.custom_jvp(scaled, nondiff_argnums=(0,))
    scale.defjvp(lambda n, p, t: (scale(n, p[0]), n * t[0]))
    return {"scale(2, 3.)": lambda: scale(2, 3.), "scale(2, f32)": lambda: scale(2, np.float32(3.)),
            "cube(3.)": lambda: cube(3.), "cube(3)": lambda: cube(3), "cube(True)": lambda: cube(True),
            "cube(f32)": lambda: cube(np.float32(2.)), "cube(f64 array)": lambda: cube(np.array([1., 2.])),
            "cube(i64 array)": lambda: cube(np.array([1, 2])), "cube(array)": lambda: cube(m.array([1., 2.])),
            "affine(2., 3)": lambda: affine(2., 3), "affine(2, 3)": lambda: affine(2, 3),
            "pair(1.5)": lambda: pair(1.5), "jit cube(3.)": lambda: lib.jit(cube)(3.),
            "grad cube(2.)": lambda: lib.grad(cube)(2.)}


def _described(v: Any) -> Any:
    """A result's structure, Python or numpy type family, dtype, weak flag and value."""
    if isinstance(v, (list, tuple)):
        return [_described(a) for a in v]
    family = "array" if isinstance(v, (fg.Array, jax.Array)) else type(v).__name__
    return (family, str(getattr(v, "dtype", None)), getattr(v, "weak_type", None), np.asarray(v).tolist())


@pytest.mark.parametrize("x64", [True, False])
def test_eager_custom_rule_functions_run_as_jax_s(x64: bool) -> None:
    """JAX 0.10 runs a custom_jvp/custom_vjp function called outside any transformation on its
    arguments as they are (numpy values in the mode's dtype): ``cube(3.)`` is the Python float
    27.0, ``cube(np.array([1., 2.]))`` a numpy array. fungraph staged the call and returned a
    weakly typed array."""
    with fg.enable_x64(x64), jax.enable_x64(x64):
        ours, theirs = _eager_calls(fg, fnp), _eager_calls(jax, jnp)
        for name, call in theirs.items():
            assert _described(ours[name]()) == _described(call()), name


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_random_draws_inside_custom_jvp_bodies_match_jax_in_both_modes(x64: bool) -> None:
    """The samplers compute in 64-bit words in either mode; a custom_jvp body replayed eagerly
    (its graph evaluated) keeps those words' types in 32-bit mode (it raised a dtype error)."""
    jax, _ = jax_or_skip()
    outs = []
    for lib in (jax, fg):
        with lib.enable_x64(x64):
            key = lib.random.PRNGKey(0)

            @lib.custom_jvp
            def f(x: Any) -> Any:
                return lib.random.normal(key, (3,)) * x

            f.defjvp(lambda p, t: (f(p[0]), lib.random.normal(key, (3,)) * t[0]))  # noqa: B023
            outs.append([np.asarray(f(1.5)), np.asarray(lib.grad(lambda x: f(x).sum())(1.5)),  # noqa: B023
                         np.asarray(lib.jit(f)(1.5)), np.asarray(lib.vmap(f)(np.ones(2, np.float32)))])
    for got, want in zip(outs[1], outs[0]):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_random_draws_inside_checkpoint_match_jax_in_32_bit_mode() -> None:
    """The same replay for ``checkpoint`` outside jit (it raised a dtype error in 32-bit mode)."""
    jax, _ = jax_or_skip()
    outs = []
    for lib in (jax, fg):
        with lib.enable_x64(False):
            key = lib.random.PRNGKey(0)
            f = lib.checkpoint(lambda x: lib.random.normal(key, (2,)) * x)  # noqa: B023
            outs.append([np.asarray(f(2.0)), np.asarray(lib.grad(lambda x: f(x).sum())(2.0))])  # noqa: B023
    for got, want in zip(outs[1], outs[0]):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
