"""JAX's "Custom derivative rules for JAX-transformable Python functions" tutorial, run on JAX
and on fungraph with only the import changed, in both dtype modes: ``custom_jvp`` with
``defjvp``/``defjvps`` (``log1pexp``, a two-argument rule, a ``None`` rule, ``nondiff_argnums``),
``custom_vjp`` (``clip_gradient``, ``debug`` printing in the backward pass, a pytree argument
with a ``None`` cotangent) and implicit differentiation (the ``fixed_point`` solver with a
``while_loop`` inside ``custom_vjp``, ``lax.custom_root``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _log1pexp(lib: Any, np_: Any) -> Any:
    @lib.custom_jvp
    def log1pexp(x: Any) -> Any:
        return np_.log(1. + np_.exp(x))

    log1pexp.defjvps(lambda t, ans, x: (1 - 1 / (1 + np_.exp(x))) * t)
    return (lib.grad(log1pexp)(100.), lib.jit(lib.grad(log1pexp))(3.),
            lib.vmap(lib.jit(lib.grad(log1pexp)))(np_.arange(3.)), lib.grad(lib.grad(log1pexp))(1.0), log1pexp(2.0))


def _two_argument_rules(lib: Any, np_: Any) -> Any:
    @lib.custom_jvp
    def f(x: Any, y: Any) -> Any:
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        x, y = primals
        x_dot, y_dot = tangents
        return f(x, y), np_.cos(x) * x_dot * y + np_.sin(x) * y_dot

    @lib.custom_jvp
    def g(x: Any, y: Any) -> Any:
        return np_.sin(x) * y

    g.defjvps(lambda x_dot, primal_out, x, y: np_.cos(x) * x_dot * y, None)
    return (lib.jvp(f, (2., 3.), (1., 0.)), lib.grad(f)(2., 3.), lib.grad(f, argnums=(0, 1))(2., 3.),
            lib.grad(g)(2., 3.), lib.grad(g, 1)(2., 3.))


def _nondiff_and_integer_arguments(lib: Any, np_: Any) -> Any:
    @partial(lib.custom_jvp, nondiff_argnums=(0,))
    def app(f: Any, x: Any) -> Any:
        return f(x)

    @app.defjvp
    def app_jvp(f: Any, primals: Any, tangents: Any) -> Any:
        x, = primals
        x_dot, = tangents
        return f(x), 2. * x_dot

    @lib.custom_jvp
    def power(x: Any, n: Any) -> Any:
        return x ** n

    @power.defjvp
    def power_jvp(primals: Any, tangents: Any) -> Any:
        x, n = primals
        x_dot, _ = tangents
        return power(x, n), n * x ** (n - 1) * x_dot

    return lib.grad(app, 1)(lambda x: x ** 3, 3.), lib.grad(power)(2.0, 3), lib.jit(lib.grad(power))(2.0, 3)


def _stable_at_zero(lib: Any, np_: Any) -> Any:
    @lib.custom_jvp
    def f(x: Any) -> Any:
        return x / (1 + np_.sqrt(x))

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        x, = primals
        x_dot, = tangents
        return f(x), ((np_.sqrt(x) + 2) / (2 * (np_.sqrt(x) + 1) ** 2)) * x_dot

    @lib.custom_jvp
    def scaled(x: Any) -> Any:
        return x

    @scaled.defjvp
    def scaled_jvp(primals: Any, tangents: Any) -> Any:
        return scaled(primals[0]), tangents[0] * primals[0]

    g = lambda x: np_.sum(scaled(x) ** 2)  # noqa: E731
    return (lib.grad(f)(0.), lib.jacfwd(f)(np_.array([0., 1.])), lib.hessian(g)(np_.arange(3.)),
            lib.jacrev(lib.jacfwd(g))(np_.arange(3.)))


def _clip_gradient(lib: Any, np_: Any) -> Any:
    @partial(lib.custom_vjp, nondiff_argnums=(0, 1))
    def clip_gradient(lo: Any, hi: Any, x: Any) -> Any:
        return x

    def clip_gradient_fwd(lo: Any, hi: Any, x: Any) -> Any:
        return x, None

    def clip_gradient_bwd(lo: Any, hi: Any, _: Any, g: Any) -> Any:
        return (np_.clip(g, lo, hi),)

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)

    def clip_sin(x: Any) -> Any:
        return np_.sin(clip_gradient(-0.75, 0.75, x))

    return lib.vmap(lib.grad(clip_sin))(np_.linspace(0, 10, 20)), lib.grad(clip_sin)(0.1)


def _vjp_rules(lib: Any, np_: Any) -> Any:
    @lib.custom_vjp
    def f(x: Any, y: Any) -> Any:
        return np_.sin(x) * y

    def f_fwd(x: Any, y: Any) -> Any:
        return f(x, y), (np_.cos(x), np_.sin(x), y)

    def f_bwd(res: Any, g: Any) -> Any:
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)

    @lib.custom_vjp
    def h(pt: Any) -> Any:
        return np_.sin(pt["a"]) * pt["b"][0]

    h.defvjp(lambda pt: (h(pt), pt),
             lambda pt, g: ({"a": np_.cos(pt["a"]) * g * pt["b"][0], "b": (np_.sin(pt["a"]) * g, None)},))
    return (lib.grad(f)(2., 3.), lib.jit(lib.grad(f, (0, 1)))(2., 3.),
            lib.vmap(lib.grad(f))(np_.arange(3.), np_.ones(3)), lib.grad(h)({"a": 1.0, "b": (2.0, 3.0)}))


def _debug_backward_pass(lib: Any, np_: Any) -> Any:
    @lib.custom_vjp
    def debug(x: Any) -> Any:
        return x

    def debug_bwd(x: Any, g: Any) -> Any:
        print("backward", float(g))
        return (g,)

    debug.defvjp(lambda x: (x, x), debug_bwd)

    def foo(x: Any) -> Any:
        return np_.sin(debug(x ** 2))

    return lib.grad(foo)(0.5)


def _fixed_point(lib: Any, np_: Any) -> Any:
    @partial(lib.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f: Any, a: Any, x_guess: Any) -> Any:
        def cond_fun(carry: Any) -> Any:
            x_prev, x = carry
            return np_.abs(x_prev - x) > 1e-6

        def body_fun(carry: Any) -> Any:
            _, x = carry
            return x, f(a, x)

        _, x_star = lib.lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f: Any, a: Any, x_init: Any) -> Any:
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def rev_iter(f: Any, packed: Any, u: Any) -> Any:
        a, x_star, x_star_bar = packed
        _, vjp_x = lib.vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point_rev(f: Any, res: Any, x_star_bar: Any) -> Any:
        a, x_star = res
        _, vjp_a = lib.vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, np_.zeros_like(x_star)

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a: Any) -> Any:
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)

    return newton_sqrt(2.), lib.grad(newton_sqrt)(2.), lib.jit(lib.grad(newton_sqrt))(9.)


def _custom_root(lib: Any, np_: Any) -> Any:
    def newton(g: Any, x0: Any) -> Any:
        return lib.lax.while_loop(lambda x: np_.abs(g(x)) > 1e-5, lambda x: x - g(x) / (2 * x), x0)

    def sqrt_root(y: Any) -> Any:
        return lib.lax.custom_root(lambda x: x ** 2 - y, 1.0, newton, lambda g, y: y / (2.0 * 1.4142135))

    return sqrt_root(2.0), lib.grad(sqrt_root)(2.0)


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "log1pexp": _log1pexp, "two_argument_rules": _two_argument_rules,
    "nondiff_and_integer_arguments": _nondiff_and_integer_arguments, "stable_at_zero": _stable_at_zero,
    "clip_gradient": _clip_gradient, "vjp_rules": _vjp_rules, "debug_backward_pass": _debug_backward_pass,
    "fixed_point": _fixed_point, "custom_root": _custom_root,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_custom_derivative_tutorial_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64)
