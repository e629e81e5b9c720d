"""Autodiff API: JAX's documented examples rewritten, any order, custom rules, checkpoint, errors."""

from __future__ import annotations

import numpy as np
import pytest

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
    @fg.custom_jvp
    def log1pexp(x):
        return fnp.log(1.0 + fnp.exp(x))

    @log1pexp.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1.0 - 1.0 / (1.0 + fnp.exp(x)))

    assert fg.grad(log1pexp)(100.0) == pytest.approx(1.0)
    check_grads(log1pexp, [np.array([0.3, -1.2])], order=2)

    @fg.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1.0, 1.0),))
    assert fg.grad(lambda x: 5.0 * clip_gradient(x))(2.0) == pytest.approx(1.0)
    with pytest.raises(TypeError, match="forward-mode"):
        fg.jvp(clip_gradient, (1.0,), (1.0,))


def test_checkpoint_saves_only_inputs_and_matches() -> None:
    f = lambda x: fnp.sin(fnp.cos(fnp.sin(x)))
    x = np.array([0.3, 0.8])
    plain = fg.grad(lambda x: f(x).sum())(x)
    remat = fg.grad(lambda x: fg.checkpoint(f)(x).sum())(x)
    np.testing.assert_allclose(remat, plain, rtol=1e-14)
    check_grads(lambda x: fg.checkpoint(f)(x), [x], order=2)
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
