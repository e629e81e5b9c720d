"""The autodiff cookbook's and the gradient-checkpointing guide's programs, run on JAX and on
fungraph with only the import changed, in both dtype modes: Hessian-vector products in all
four compositions (and batched), Jacobians of pytrees, ``vjp``/``linearize`` with aux data,
complex differentiation, per-example gradients, ``stop_gradient`` (TD(0) and the
straight-through estimator), Jacobians by ``vmap`` of ``vjp``/``jvp``, and ``jax.checkpoint``
with ``checkpoint_policies``, ``checkpoint_name``, ``static_argnums`` and inside ``scan``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program, run_both

jax, jnp = jax_or_skip()


def _hessian_vector_products(lib: Any, np_: Any) -> Any:
    def f(x: Any) -> Any:
        return np_.sum(np_.tanh(x) ** 2 * np_.sin(x[::-1]))

    def hvp_rev_rev(f: Any, x: Any, v: Any) -> Any:
        return lib.grad(lambda x: np_.vdot(lib.grad(f)(x), v))(x)

    def hvp_fwd_rev(f: Any, primals: Any, tangents: Any) -> Any:
        return lib.jvp(lib.grad(f), primals, tangents)[1]

    def hvp_rev_fwd(f: Any, x: Any, v: Any) -> Any:
        return lib.grad(lambda x: lib.jvp(f, (x,), (v,))[1])(x)

    @lib.jit
    def all_products(x: Any, v: Any) -> Any:
        return (hvp_rev_rev(f, x, v), hvp_rev_fwd(f, x, v), lib.hessian(f)(x) @ v,
                lib.vmap(lambda t: hvp_fwd_rev(f, (x,), (t,)))(np_.eye(5)[:3]))

    x, v = np_.linspace(-1., 1., 5), np_.arange(5.) / 5
    return hvp_fwd_rev(f, (x,), (v,)), lib.jit(hvp_fwd_rev, static_argnums=0)(f, (x,), (v,)), all_products(x, v)


def _pytree_jacobians(lib: Any, np_: Any) -> Any:
    def f(params: Any, x: Any) -> Any:
        return {"out": np_.tanh(params["W"] @ x + params["b"]), "norm": np_.sum(params["W"] ** 2)}

    params = {"W": np_.arange(6.).reshape(2, 3) / 6, "b": np_.array([0.1, -0.2])}
    x = np_.array([1., 2., 3.])
    return (lib.jacrev(f)(params, x), lib.jacfwd(f)(params, x), lib.jacrev(f, argnums=(0, 1))(params, x),
            lib.hessian(lambda p: f(p, x)["norm"] + np_.sum(f(p, x)["out"]))(params))


def _vjp_jvp_linearize(lib: Any, np_: Any) -> Any:
    def f(x: Any, y: Any) -> Any:
        return np_.sin(x) * y, np_.cos(x) + y ** 2

    def g(x: Any) -> Any:
        return np_.sum(x ** 2), {"aux": x * 2}

    x, y = np_.arange(3.), np_.ones(3) * 2
    out, f_vjp = lib.vjp(f, x, y)
    y_lin, f_jvp = lib.linearize(f, x, y)
    o, g_vjp, aux = lib.vjp(g, x, has_aux=True)
    return (out, f_vjp((np_.ones(3), np_.arange(3.))), y_lin, f_jvp(np_.ones(3), np_.zeros(3)), o, g_vjp(1.0), aux,
            lib.value_and_grad(g, has_aux=True)(x))


def _complex_differentiation(lib: Any, np_: Any) -> Any:
    A = np_.array([[1 + 1j, 2.], [0.5j, 1 - 2j]])
    return (lib.grad(lambda z: np_.abs(z) ** 2)(3. + 4j),
            lib.grad(lambda z: np_.real(z * np_.conj(z) + np_.sin(z)))(1. + 2j),
            lib.grad(lambda x: np_.sum(np_.abs(A @ x) ** 2))(np_.array([1. + 0j, 2j])),
            lib.grad(np_.sin, holomorphic=True)(1. + 1j),
            lib.grad(lambda x: np_.abs(np_.exp(1j * x) * 2.0))(0.3))


def _per_example_gradients(lib: Any, np_: Any) -> Any:
    def loss(W: Any, b: Any, x: Any, y: Any) -> Any:
        preds = lib.nn.sigmoid(np_.dot(x, W) + b)
        return -np_.sum(np_.log(preds * y + (1 - preds) * (1 - y)))

    k1, k2 = lib.random.split(lib.random.PRNGKey(0))
    X, W = lib.random.normal(k1, (6, 3)), lib.random.normal(k2, (3,))
    Y = np_.array([True, False, True, True, False, False])
    return (lib.vmap(lib.grad(loss), in_axes=(None, None, 0, 0))(W, 0.1, X, Y),
            lib.jit(lib.grad(loss, (0, 1)))(W, 0.1, X, Y))


def _stop_gradient(lib: Any, np_: Any) -> Any:
    def td_loss(theta: Any, s_tm1: Any, r_t: Any, s_t: Any) -> Any:
        target = r_t + np_.dot(theta, s_t)
        return -0.5 * ((lib.lax.stop_gradient(target) - np_.dot(theta, s_tm1)) ** 2)

    def straight_through_round(x: Any) -> Any:
        return x - lib.lax.stop_gradient(x) + lib.lax.stop_gradient(np_.round(x))

    theta = np_.array([0.1, -0.1, 0.])
    return (lib.grad(td_loss)(theta, np_.array([1., 2., -1.]), np_.array(1.), np_.array([2., 1., 0.])),
            lib.grad(straight_through_round)(3.2), lib.grad(np_.round)(3.2))


def _jacobians_by_vmap(lib: Any, np_: Any) -> Any:
    def f(x: Any) -> Any:
        return np_.stack([x[0] * x[1], np_.exp(x[2]), np_.sum(x ** 3)])

    x = np_.array([1., 2., 0.5])
    _, f_vjp = lib.vjp(f, x)
    return (lib.jacfwd(f)(x), lib.vmap(f_vjp)(np_.eye(3)),
            lib.vmap(lambda v: lib.jvp(f, (x,), (v,))[1], out_axes=1)(np_.eye(3)), lib.jacrev(f)(x),
            lib.jacfwd(lib.jacrev(f))(x))


def _checkpoint_policies(lib: Any, np_: Any) -> Any:
    def g(W: Any, x: Any) -> Any:
        return np_.sin(np_.dot(W, x))

    def f(W1: Any, W2: Any, W3: Any, x: Any) -> Any:
        x = lib.checkpoint(g, policy=lib.checkpoint_policies.dots_with_no_batch_dims_saveable)(W1, x)
        x = lib.checkpoint(g, policy=lib.checkpoint_policies.nothing_saveable)(W2, x)
        x = lib.remat(g, policy=lib.checkpoint_policies.everything_saveable)(W3, x)
        return np_.sum(x)

    ks = lib.random.split(lib.random.PRNGKey(0), 4)
    W1, W2, W3 = (lib.random.normal(k, (4, 4)) for k in ks[:3])
    x = lib.random.normal(ks[3], (4,))
    return lib.grad(f, argnums=(0, 1, 2))(W1, W2, W3, x), lib.jit(lib.grad(f))(W1, W2, W3, x)


def _checkpoint_names(lib: Any, np_: Any) -> Any:
    checkpoint_name = importlib.import_module(lib.__name__ + ".ad_checkpoint").checkpoint_name

    def loss(params: Any, x: Any) -> Any:
        for W, b in params:
            x = np_.tanh(checkpoint_name(np_.dot(W, x) + b, name="pre"))
        return np_.sum(x ** 2)

    params = [(np_.eye(3) * 0.5 + 0.1, np_.ones(3) * 0.1)] * 3
    pols = lib.checkpoint_policies
    policies = (pols.save_only_these_names("pre"), pols.save_any_names_but_these("pre"),
                pols.save_anything_except_these_names("pre"),
                pols.save_from_both_policies(pols.dots_saveable, pols.save_only_these_names("pre")),
                pols.checkpoint_dots, pols.checkpoint_dots_with_no_batch_dims)
    return [lib.grad(lib.checkpoint(loss, policy=p))(params, np_.arange(3.)) for p in policies]


def _checkpoint_static_and_scanned(lib: Any, np_: Any) -> Any:
    @partial(lib.checkpoint, static_argnums=(1,))
    def repeated_sin(x: Any, n: int) -> Any:
        for _ in range(n):
            x = np_.sin(x)
        return x

    def body(c: Any, x: Any) -> Any:
        c = lib.checkpoint(lambda c, x: np_.tanh(c * x + 1.0), prevent_cse=False)(c, x)
        return c, c ** 2

    def scanned(c0: Any, xs: Any) -> Any:
        c, ys = lib.lax.scan(body, c0, xs)
        return c + np_.sum(ys)

    return lib.grad(repeated_sin)(1.0, 3), lib.jit(lib.grad(scanned, (0, 1)))(0.5, np_.linspace(0., 1., 6))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "hessian_vector_products": _hessian_vector_products, "pytree_jacobians": _pytree_jacobians,
    "vjp_jvp_linearize": _vjp_jvp_linearize, "complex_differentiation": _complex_differentiation,
    "per_example_gradients": _per_example_gradients, "stop_gradient": _stop_gradient,
    "jacobians_by_vmap": _jacobians_by_vmap, "checkpoint_policies": _checkpoint_policies,
    "checkpoint_names": _checkpoint_names, "checkpoint_static_and_scanned": _checkpoint_static_and_scanned,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_cookbook_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=1e-4)


def test_saved_residuals_print_as_jax_s() -> None:
    """``print_saved_residuals`` lists what JAX lists; the order and the source lines may differ."""
    def program(lib: Any, np_: Any) -> Any:
        ad = importlib.import_module(lib.__name__ + ".ad_checkpoint")
        ad.print_saved_residuals(lambda W, x: np_.sin(np_.dot(W, x)), np_.ones((2, 2)), np_.ones(2))

    (_, ours), (_, theirs) = run_both(jax, jnp, program, False)

    def kinds(text: str) -> list[tuple[str, bool]]:
        return sorted((line.split(" from ")[0], "argument" in line) for line in text.splitlines())

    assert kinds(ours) == kinds(theirs)
