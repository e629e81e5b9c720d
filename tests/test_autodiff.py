"""Autodiff API: JAX's documented examples rewritten, any order, custom rules, checkpoint, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import nn
from fungraph.interpreters.dce import dce
from fungraph.testing import check_grads


def test_tanh_derivatives_of_every_order() -> None:
    x = 0.3
    t = np.tanh(x)
    d1 = 1 - t**2
    d2 = -2 * t * d1
    d3 = -2 * d1**2 - 2 * t * d2
    assert fg.grad(fnp.tanh)(x) == pytest.approx(d1, abs=1e-14)
    assert fg.grad(fg.grad(fnp.tanh))(x) == pytest.approx(d2, abs=1e-14)
    assert fg.grad(fg.grad(fg.grad(fnp.tanh)))(x) == pytest.approx(d3, abs=1e-13)


def _init_mlp(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [{"w": rng.standard_normal((m, n)) / np.sqrt(m), "b": rng.standard_normal(n) * 0.1}
            for m, n in zip(sizes[:-1], sizes[1:])]


def _mlp(params, x):
    for layer in params[:-1]:
        x = fnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def _loss(params, x, y):
    logits = _mlp(params, x)
    return -fnp.mean(fnp.sum(y * nn.log_softmax(logits), axis=-1))


def _numpy_loss_and_grad(params, x, y):
    acts, pre = [x], []
    for layer in params[:-1]:
        pre.append(acts[-1] @ layer["w"] + layer["b"])
        acts.append(np.tanh(pre[-1]))
    logits = acts[-1] @ params[-1]["w"] + params[-1]["b"]
    m = logits.max(-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    loss = -np.mean(np.sum(y * logp, -1))
    g = (np.exp(logp) - y) / x.shape[0]
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        grads[i] = {"w": acts[i].T @ g, "b": g.sum(0)}
        if i:
            g = (g @ params[i]["w"].T) * (1 - acts[i] ** 2)
    return loss, grads


def test_mlp_loss_over_dict_params_matches_hand_written_backprop() -> None:
    params = _init_mlp([5, 7, 6, 3])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5))
    y = np.eye(3)[rng.integers(0, 3, 4)]
    loss, grads = fg.value_and_grad(_loss)(params, x, y)
    want_loss, want = _numpy_loss_and_grad(params, x, y)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g["w"], w["w"], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g["b"], w["b"], rtol=1e-10, atol=1e-12)


def test_softmax_cross_entropy_gradient_is_softmax_minus_labels() -> None:
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
    labels = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    g = fg.grad(lambda z: -fnp.sum(labels * nn.log_softmax(z)))(logits)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(g, e / e.sum(-1, keepdims=True) - labels, rtol=1e-12)


def test_argnums_tuple_and_has_aux() -> None:
    f = lambda x, y: (fnp.sum(x * y**2), {"aux": x + 1})
    (gx, gy), aux = fg.grad(f, argnums=(0, 1), has_aux=True)(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_allclose(gx, [9.0, 16.0])
    np.testing.assert_allclose(gy, [6.0, 16.0])
    np.testing.assert_allclose(aux["aux"], [2.0, 3.0])


def test_jvp_of_grad_is_a_hessian_vector_product() -> None:
    f = lambda x: fnp.sum(fnp.sin(x) * x[::-1])
    x = np.array([0.1, 0.5, 0.9])
    v = np.array([1.0, -2.0, 0.5])
    _, hvp = fg.jvp(fg.grad(f), (x,), (v,))
    np.testing.assert_allclose(hvp, fg.hessian(f)(x) @ v, rtol=1e-12)


def test_jacobians_agree_with_finite_differences() -> None:
    f = lambda x, y: fnp.tanh(fnp.outer(x, y)).sum(axis=1) * x
    x, y = np.array([0.1, -0.4, 0.7]), np.array([0.3, 0.2])
    jf = fg.jacfwd(f, argnums=(0, 1))(x, y)
    jr = fg.jacrev(f, argnums=(0, 1))(x, y)
    eps = 1e-6
    for k, arg in enumerate((x, y)):
        num = np.stack([(f(*[a + eps * np.eye(arg.size)[j] if i == k else a for i, a in enumerate((x, y))])
                         - f(*[a - eps * np.eye(arg.size)[j] if i == k else a for i, a in enumerate((x, y))]))
                        / (2 * eps) for j in range(arg.size)], axis=-1)
        np.testing.assert_allclose(jf[k], num, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(jr[k], num, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(fg.jacfwd(fg.jacrev(lambda v: fnp.sum(v**3)))(x), np.diag(6 * x), atol=1e-12)


def test_linearize_reuses_the_linearization() -> None:
    f = lambda x: fnp.sin(x) * x
    x = np.array([0.2, 0.4])
    out, f_jvp = fg.linearize(f, x)
    np.testing.assert_allclose(out, f(x))
    for t in (np.array([1.0, 0.0]), np.array([0.5, 2.0])):
        np.testing.assert_allclose(f_jvp(t), (np.cos(x) * x + np.sin(x)) * t, rtol=1e-12)


def test_stop_gradient() -> None:
    g = fg.grad(lambda x: x * fg.stop_gradient(x) + fg.lax.stop_gradient(x**2))(3.0)
    assert g == pytest.approx(3.0)


def test_custom_jvp_and_custom_vjp() -> None:
    assert fg.grad(_softplus)(100.0) == pytest.approx(1.0)
    check_grads(_softplus, [np.array([0.3, -1.2])], order=2)

    @fg.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1.0, 1.0),))
    assert fg.grad(lambda x: 5.0 * clip_gradient(x))(2.0) == pytest.approx(1.0)
    with pytest.raises(TypeError, match="forward-mode"):
        fg.jvp(clip_gradient, (1.0,), (1.0,))


@fg.custom_jvp
def _sin_times(x, y):
    return fnp.sin(x) * y


@_sin_times.defjvp
def _sin_times_jvp(primals, tangents):
    """Two and three times the true partial derivatives, so a test sees which rule ran."""
    (x, y), (tx, ty) = primals, tangents
    return _sin_times(x, y), 2.0 * fnp.cos(x) * y * tx + 3.0 * fnp.sin(x) * ty


def _sin_times_partials(x, y):
    """The partial derivatives ``_sin_times``'s rule claims, elementwise."""
    return 2.0 * np.cos(x) * y, 3.0 * np.sin(x) * np.ones_like(y)


@fg.custom_vjp
def _scaled_mul(x, w):
    return x * w


def _scaled_mul_fwd(x, w):
    return x * w, (x, w)


def _scaled_mul_bwd(res, g):
    """Three and five times the true cotangents."""
    x, w = res
    return 3.0 * g * w, 5.0 * g * x


_scaled_mul.defvjp(_scaled_mul_fwd, _scaled_mul_bwd)


@fg.custom_jvp
def _softplus(x):
    return fnp.log(1.0 + fnp.exp(x))


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t / (1.0 + fnp.exp(-x))


def _grads_of_vmapped(f, weights: np.ndarray) -> tuple:
    """``grad`` of ``(vmap(f, (0, None))(x, y) * weights).sum()`` in both arguments: plain,
    under ``jit``, with ``jit`` inside, and through a nested ``vmap``."""
    mapped = fg.vmap(f, in_axes=(0, None))

    def loss(x, y):
        return (mapped(x, y) * weights).sum()

    return (fg.grad(loss, argnums=(0, 1)), fg.jit(fg.grad(loss, argnums=(0, 1))),
            fg.grad(lambda x, y: (fg.jit(mapped)(x, y) * weights).sum(), argnums=(0, 1)),
            fg.grad(lambda x, y: (fg.vmap(fg.vmap(f), (0, None))(x, y) * weights).sum(), argnums=(0, 1)))


def test_custom_jvp_rule_is_kept_when_differentiating_outside_vmap() -> None:
    """grad, jvp, jacfwd and jacrev of a vmapped custom_jvp function, with jit inside or
    outside and a nested vmap, use the rule (which is not the true derivative)."""
    rng = np.random.default_rng(0)
    x, y, w = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))
    dx, dy = _sin_times_partials(x, y)
    mapped = fg.vmap(_sin_times, in_axes=(0, None))
    for g in _grads_of_vmapped(_sin_times, w):
        gx, gy = g(x, y)
        np.testing.assert_allclose(gx, dx * w, rtol=1e-12)
        np.testing.assert_allclose(gy, (dy * w).sum(0), rtol=1e-12)
    tx, ty = rng.standard_normal((3, 4)), rng.standard_normal(4)
    _, t_out = fg.jvp(mapped, (x, y), (tx, ty))
    np.testing.assert_allclose(t_out, dx * tx + dy * ty, rtol=1e-12)
    for jac in (fg.jacfwd, fg.jacrev):
        jx = np.asarray(jac(mapped)(x, y)).reshape(12, 12)
        np.testing.assert_allclose(jx, np.diag(dx.ravel()), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fg.vmap(fg.grad(_sin_times), (0, None))(x[:, 0], y[0]), dx[:, 0], rtol=1e-12)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_custom_jvp_in_out_axes_and_numerically_safe_rule_under_vmap() -> None:
    """A rule that stays finite where the function's own derivative overflows (exp(1000)),
    mapped along axis 1 with the output batch axis last."""
    x = np.array([[0.0, 1000.0, -3.0], [2.0, -1000.0, 40.0]])
    f = fg.vmap(_softplus, in_axes=1, out_axes=1)
    want = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(fg.grad(lambda x: f(x).sum())(x), want, rtol=1e-12)
    np.testing.assert_allclose(fg.jvp(f, (x,), (np.ones_like(x),))[1], want, rtol=1e-12)
    np.testing.assert_allclose(fg.grad(lambda x: fg.jit(f)(x).sum())(x), want, rtol=1e-12)
    text = str(fg.make_graph(f)(x))
    assert "custom_jvp_call" in text and "jvp=<vmap(_softplus_jvp)>" in text


def _scaled_mul_partials(x, w):
    """The partial derivatives ``_scaled_mul``'s bwd claims, elementwise."""
    return 3.0 * w * np.ones_like(x), 5.0 * x * np.ones_like(w)


_AXES = st.sampled_from([None, 0, 1, -1, -2])


@pytest.mark.parametrize("fun, partials", [(_sin_times, _sin_times_partials), (_scaled_mul, _scaled_mul_partials)],
                         ids=["custom_jvp", "custom_vjp"])
@settings(max_examples=20)
@given(size=st.integers(1, 4), x_axis=_AXES, y_axis=_AXES, out_axis=st.integers(-2, 1), seed=st.integers(0, 2**16))
def test_grad_of_vmapped_custom_rule_random_axes(fun, partials, size: int, x_axis: int | None, y_axis: int | None,
                                                 out_axis: int, seed: int) -> None:
    """grad(vmap(f)) against the rule's partial derivatives for random batch sizes, in_axes
    (None: broadcast, its gradient summed over the batch) and out_axes."""
    rng = np.random.default_rng(seed)
    xs, ys, w = rng.standard_normal((3, size, 3))
    if x_axis is None and y_axis is None:
        y_axis = 0
    x = xs[0] if x_axis is None else np.moveaxis(xs, 0, x_axis)
    y = ys[0] if y_axis is None else np.moveaxis(ys, 0, y_axis)
    mapped = fg.vmap(fun, in_axes=(x_axis, y_axis), out_axes=out_axis)
    gx, gy = fg.grad(lambda x, y: (np.moveaxis(w, 0, out_axis) * mapped(x, y)).sum(), argnums=(0, 1))(x, y)
    dx, dy = partials(xs if x_axis is not None else xs[0], ys if y_axis is not None else ys[0])
    for got, d, axis in ((gx, dx * w, x_axis), (gy, dy * w, y_axis)):
        np.testing.assert_allclose(got, d.sum(0) if axis is None else np.moveaxis(d, 0, axis), rtol=1e-12)


def test_custom_vjp_bwd_is_kept_when_differentiating_outside_vmap() -> None:
    """grad and jacrev of a vmapped custom_vjp function use the mapped bwd; the cotangent of
    an unbatched argument is summed over the batch."""
    rng = np.random.default_rng(1)
    x, w, c = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))
    mapped = fg.vmap(_scaled_mul, in_axes=(0, None))
    for g in _grads_of_vmapped(_scaled_mul, c):
        gx, gw = g(x, w)
        np.testing.assert_allclose(gx, 3.0 * c * w, rtol=1e-12)
        np.testing.assert_allclose(gw, 5.0 * (c * x).sum(0), rtol=1e-12)
    columns = fg.vmap(_scaled_mul, in_axes=(1, None), out_axes=1)
    v = rng.standard_normal(3)
    gx, gv = fg.grad(lambda x, v: (columns(x, v) * c).sum(), argnums=(0, 1))(x, v)
    np.testing.assert_allclose(gx, 3.0 * c * v[:, None], rtol=1e-12)
    np.testing.assert_allclose(gv, 5.0 * (c * x).sum(1), rtol=1e-12)
    jx = np.asarray(fg.jacrev(mapped)(x, w)).reshape(12, 12)
    np.testing.assert_allclose(jx, np.diag(3.0 * np.broadcast_to(w, (3, 4)).ravel()), rtol=1e-12)
    with pytest.raises(TypeError, match="forward-mode"):
        fg.jvp(mapped, (x, w), (x, w))


def test_custom_rule_closing_over_a_batched_value_is_used_under_grad() -> None:
    """A function and rule that close over a value the vmap batches are mapped with that value
    as a batched argument, so a derivative taken outside the vmap runs the rule (JAX gives
    6.0: twice the true derivative, as the rule says; docs/vmap.md)."""
    def f(x, y):
        @fg.custom_jvp
        def g(x):
            return x * y

        @g.defjvp
        def _(primals, tangents):
            return primals[0] * y, 2.0 * tangents[0] * y

        return g(x)

    ys = np.array([1.0, 2.0])
    np.testing.assert_allclose(fg.vmap(lambda y: f(3.0, y))(ys), [3.0, 6.0])
    assert fg.grad(lambda x: fg.vmap(lambda y: f(x, y))(ys).sum())(3.0) == pytest.approx(6.0)
    np.testing.assert_allclose(fg.vmap(lambda y: fg.grad(f)(3.0, y))(ys), [2.0, 4.0])


def test_checkpoint_saves_only_inputs_and_matches() -> None:
    f = lambda x: fnp.sin(fnp.cos(fnp.sin(x)))
    x = np.array([0.3, 0.8])
    plain = fg.grad(lambda x: f(x).sum())(x)
    remat = fg.grad(lambda x: fg.checkpoint(f)(x).sum())(x)
    np.testing.assert_allclose(remat, plain, rtol=1e-14)
    check_grads(lambda x: fg.checkpoint(f)(x), [x], order=2)
    xs = np.array([[0.3, 0.8], [-1.0, 2.0]])
    batched = fg.grad(lambda x: fg.vmap(fg.checkpoint(f))(x).sum())(xs)
    np.testing.assert_allclose(batched, fg.grad(lambda x: f(x).sum())(xs), rtol=1e-14)
    assert "= remat[" in str(fg.make_graph(fg.grad(lambda x: fg.vmap(fg.checkpoint(f))(x).sum()))(xs))
    from fungraph.interpreters.transpose import linearize_flat

    _, lin, _, res = linearize_flat(lambda a: [fg.checkpoint(f)(a)], [x], [fg.ShapedArray((2,), np.float64)],
                                    [True])
    assert lin.num_residuals == 1 and np.shares_memory(res[0], x) or np.array_equal(res[0], x)


def test_gradient_graph_is_at_most_twice_the_forward_graph() -> None:
    params = _init_mlp([8, 16, 16, 4])
    x, y = np.ones((2, 8)), np.eye(4)[[0, 1]]
    fwd = dce(fg.make_graph(_loss)(params, x, y))
    bwd = dce(fg.make_graph(fg.grad(_loss))(params, x, y))
    assert len(bwd.eqns) <= 2 * len(fwd.eqns), (len(fwd.eqns), len(bwd.eqns))


def test_grad_errors_are_clear() -> None:
    with pytest.raises(TypeError, match="argument 0 has dtype int64"):
        fg.grad(lambda x: x * 2.0)(np.array(3))
    with pytest.raises(TypeError, match=r"scalar output.*\(3,\)"):
        fg.grad(lambda x: x * 2.0)(np.ones(3))


def test_integer_inputs_get_zero_cotangents_in_vjp() -> None:
    out, f_vjp = fg.vjp(lambda x, i: x[i] * 2.0, np.array([1.0, 2.0, 3.0]), np.array([2, 0]))
    gx, gi = f_vjp(np.ones(2))
    np.testing.assert_allclose(gx, [2.0, 0.0, 2.0])
    assert not np.any(gi)


def test_grad_of_max_pool_and_conv_network() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 6, 6))
    w = rng.standard_normal((3, 2, 3, 3)) * 0.3

    def net(w, x):
        h = nn.relu(fg.lax.conv(x, w, (1, 1), "SAME"))
        return fnp.sum(nn.max_pool(h, (2, 2), (2, 2)) ** 2)

    check_grads(lambda w: net(w, x), [w], order=1)


def test_checkpoint_under_jit_recomputes_instead_of_merging() -> None:
    """Under ``jit(grad)``, CSE must not merge a checkpoint's recomputation with its forward
    pass: the plan of a 20-block network then holds only the blocks' inputs, not every
    intermediate (82 MiB without checkpoints; 44 MiB with them, 82 before the barrier)."""
    from fungraph.interpreters.optimize import optimize

    rng = np.random.default_rng(0)
    ws = rng.standard_normal((20, 64, 64)) * 0.1
    x = rng.standard_normal((4096, 64))

    def net(x: Any, ws: Any, ckpt: bool) -> Any:
        for i in range(20):
            blk = lambda h, w: fnp.tanh(fnp.tanh(h @ w) @ w)  # noqa: E731
            x = fg.checkpoint(blk)(x, ws[i]) if ckpt else blk(x, ws[i])
        return fnp.sum(x ** 2)

    plain = fg.jit(fg.grad(lambda v, w: net(v, w, False))).lower(x, ws)
    fenced = fg.jit(fg.grad(lambda v, w: net(v, w, True))).lower(x, ws)
    assert fenced.plan.arena_bytes < 0.6 * plain.plan.arena_bytes
    assert all(e.primitive.name != "optimization_barrier" for e in fenced.graph.eqns)
    staged = fg.make_graph(fg.grad(lambda v, w: net(v, w, True)))(x, ws)
    assert sum(e.primitive.name == "optimization_barrier" for e in optimize(staged)[0].eqns) == 0
    np.testing.assert_allclose(fg.jit(fg.grad(lambda v, w: net(v, w, True)))(x, ws),
                               fg.grad(lambda v, w: net(v, w, False))(x, ws), rtol=1e-12, atol=1e-12)
