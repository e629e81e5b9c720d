"""Models in the style of small public JAX projects written in pure ``jax.numpy``, run on JAX and
on fungraph with only the import changed, in both dtype modes: a causal transformer (embedding
lookups, multi-head attention with a ``tril`` mask, ``take_along_axis`` cross-entropy) trained
one step by ``vmap``/``jit(value_and_grad)``, a RealNVP normalising flow (log-density and
sampling), a physics-informed network for Burgers' equation (input derivatives by nested
``grad`` under ``vmap``), optax-style optimizers written inline (Adam with bias correction,
global-norm clipping, a warmup-cosine schedule, a training loop under ``scan``), logistic
regression by Newton's method with ``hessian``, a network with dropout and batch-norm state
(``has_aux``), and the single-device parts of JAX's parallel-programming guide."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _dense_init(lib: Any, key: Any, sizes: list[int], scale: float = 0.3) -> list[tuple[Any, Any]]:
    keys = lib.random.split(key, len(sizes) - 1)
    return [(scale * lib.random.normal(k, (m, n)), lib.numpy.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def _transformer(lib: Any, np_: Any) -> Any:
    # after minimal GPTs in pure jax.numpy (nanoGPT-style blocks, no framework)
    nn, random = lib.nn, lib.random
    vocab, d, heads, T = 11, 8, 2, 6

    def init(key: Any) -> Any:
        ks = random.split(key, 6)
        block = {"w_qkv": random.normal(ks[0], (d, 3 * d)) * 0.2, "w_o": random.normal(ks[1], (d, d)) * 0.2,
                 "w_1": random.normal(ks[2], (d, 4 * d)) * 0.2, "w_2": random.normal(ks[3], (4 * d, d)) * 0.2,
                 "ln1": (np_.ones(d), np_.zeros(d)), "ln2": (np_.ones(d), np_.zeros(d))}
        return {"embed": random.normal(ks[4], (vocab, d)) * 0.2, "pos": random.normal(ks[5], (T, d)) * 0.2,
                "blocks": [block], "ln_f": (np_.ones(d), np_.zeros(d))}

    def layer_norm(x: Any, gb: Any, eps: float = 1e-5) -> Any:
        g, b = gb
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        return g * (x - mean) / np_.sqrt(var + eps) + b

    def attention(x: Any, p: Any) -> Any:
        t = x.shape[0]
        q, k, v = np_.split(x @ p["w_qkv"], 3, axis=-1)
        q, k, v = (a.reshape(t, heads, d // heads).transpose(1, 0, 2) for a in (q, k, v))
        scores = q @ k.swapaxes(-1, -2) / np_.sqrt(q.shape[-1])
        mask = np_.tril(np_.ones((t, t), dtype=bool))
        scores = np_.where(mask, scores, -np_.inf)
        out = nn.softmax(scores, axis=-1) @ v
        return out.transpose(1, 0, 2).reshape(t, d) @ p["w_o"]

    def forward(params: Any, tokens: Any) -> Any:
        x = params["embed"][tokens] + params["pos"][:tokens.shape[0]]
        for p in params["blocks"]:
            x = x + attention(layer_norm(x, p["ln1"]), p)
            x = x + nn.gelu(layer_norm(x, p["ln2"]) @ p["w_1"]) @ p["w_2"]
        return layer_norm(x, params["ln_f"]) @ params["embed"].T

    def loss(params: Any, tokens: Any) -> Any:
        logp = nn.log_softmax(forward(params, tokens[:-1]))
        return -np_.mean(np_.take_along_axis(logp, tokens[1:, None], axis=-1))

    def batch_loss(params: Any, batch: Any) -> Any:
        return np_.mean(lib.vmap(loss, in_axes=(None, 0))(params, batch))

    params = init(random.PRNGKey(0))
    batch = random.randint(random.PRNGKey(1), (3, T + 1), 0, vocab)
    value, grads = lib.jit(lib.value_and_grad(batch_loss))(params, batch)
    params = lib.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return value, grads, batch_loss(params, batch), np_.argmax(forward(params, batch[0, :T]), axis=-1)


def _real_nvp(lib: Any, np_: Any) -> Any:
    # after RealNVP normalising-flow tutorials in JAX (affine coupling layers, change of variables)
    norm = lib.scipy.stats.norm
    masks = [np_.array([1., 0.]), np_.array([0., 1.]), np_.array([1., 0.])]

    def mlp(params: Any, x: Any) -> Any:
        for w, b in params[:-1]:
            x = lib.nn.relu(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    def coupling_forward(params: Any, x: Any, mask: Any) -> Any:
        s, t = np_.split(mlp(params, x * mask), 2, axis=-1)
        s = np_.tanh(s)
        y = x * mask + (1 - mask) * (x * np_.exp(s) + t)
        return y, np_.sum((1 - mask) * s, axis=-1)

    def coupling_inverse(params: Any, y: Any, mask: Any) -> Any:
        s, t = np_.split(mlp(params, y * mask), 2, axis=-1)
        s = np_.tanh(s)
        return y * mask + (1 - mask) * (y - t) * np_.exp(-s)

    def log_prob(params: Any, x: Any) -> Any:
        z, total = x, np_.zeros(x.shape[0])
        for p, m in zip(params, masks):
            z, log_det = coupling_forward(p, z, m)
            total = total + log_det
        return norm.logpdf(z).sum(-1) + total

    def sample(params: Any, key: Any, n: int) -> Any:
        z = lib.random.normal(key, (n, 2))
        for p, m in reversed(list(zip(params, masks))):
            z = coupling_inverse(p, z, m)
        return z

    keys = lib.random.split(lib.random.PRNGKey(0), len(masks))
    params = [_dense_init(lib, k, [2, 8, 4], 0.5) for k in keys]
    data = lib.random.normal(lib.random.PRNGKey(1), (16, 2)) * np_.array([1.0, 0.3]) + np_.array([0.5, -1.0])
    loss = lambda p: -np_.mean(log_prob(p, data))  # noqa: E731
    value, grads = lib.jit(lib.value_and_grad(loss))(params)
    samples = sample(params, lib.random.PRNGKey(2), 4)
    jitted = lib.jit(partial(sample, n=3))(params, lib.random.PRNGKey(3))
    return value, grads, samples, log_prob(params, samples), jitted


def _pinn(lib: Any, np_: Any) -> Any:
    # after physics-informed neural networks for Burgers' equation in JAX
    nu = 0.01 / np_.pi

    def u(params: Any, x: Any, t: Any) -> Any:
        h = np_.array([x, t])
        for w, b in params[:-1]:
            h = np_.tanh(h @ w + b)
        w, b = params[-1]
        return (h @ w + b)[0]

    u_t = lib.grad(u, argnums=2)
    u_x = lib.grad(u, argnums=1)
    u_xx = lib.grad(lib.grad(u, argnums=1), argnums=1)

    def residual(params: Any, x: Any, t: Any) -> Any:
        return u_t(params, x, t) + u(params, x, t) * u_x(params, x, t) - nu * u_xx(params, x, t)

    def loss(params: Any, xs: Any, ts: Any, x0: Any) -> Any:
        r = lib.vmap(residual, in_axes=(None, 0, 0))(params, xs, ts)
        initial = lib.vmap(u, in_axes=(None, 0, None))(params, x0, 0.) + np_.sin(np_.pi * x0)
        boundary = lib.vmap(u, in_axes=(None, None, 0))(params, 1., ts) ** 2
        return np_.mean(r ** 2) + np_.mean(initial ** 2) + np_.mean(boundary)

    params = _dense_init(lib, lib.random.PRNGKey(0), [2, 6, 6, 1], 0.8)
    xs = np_.linspace(-1., 1., 5)
    ts = np_.linspace(0., 1., 5)
    value, grads = lib.jit(lib.value_and_grad(loss))(params, xs, ts, xs)
    hess = lib.hessian(u, argnums=(1, 2))(params, 0.3, 0.2)
    return value, grads, hess, lib.jacfwd(lib.jacrev(u, argnums=1), argnums=2)(params, 0.3, 0.2)


def _inline_optimizers(lib: Any, np_: Any) -> Any:
    # after optax-style optimizers written inline (GradientTransformation pairs, chain, schedules)
    tree = lib.tree

    def adam(learning_rate: Any, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Any:
        def init(params: Any) -> Any:
            return tree.map(np_.zeros_like, params), tree.map(np_.zeros_like, params), 0

        def update(grads: Any, state: Any) -> Any:
            m, v, count = state
            count = count + 1
            m = tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
            v = tree.map(lambda v, g: b2 * v + (1 - b2) * g ** 2, v, grads)
            lr = learning_rate(count) if callable(learning_rate) else learning_rate
            updates = tree.map(lambda m, v: -lr * (m / (1 - b1 ** count)) / (np_.sqrt(v / (1 - b2 ** count)) + eps),
                               m, v)
            return updates, (m, v, count)
        return init, update

    def clip_by_global_norm(max_norm: float) -> Any:
        def update(grads: Any, state: Any) -> Any:
            g_norm = np_.sqrt(sum(np_.sum(g ** 2) for g in tree.leaves(grads)))
            trigger = g_norm < max_norm
            return tree.map(lambda t: np_.where(trigger, t, t / g_norm * max_norm), grads), state
        return lambda params: (), update

    def chain(*transforms: Any) -> Any:
        def init(params: Any) -> Any:
            return tuple(t[0](params) for t in transforms)

        def update(grads: Any, state: Any) -> Any:
            new_state = []
            for (_, t_update), s in zip(transforms, state):
                grads, s = t_update(grads, s)
                new_state.append(s)
            return grads, tuple(new_state)
        return init, update

    def warmup_cosine(step: Any, peak: float = 0.1, warmup: int = 3, total: int = 10) -> Any:
        frac = np_.clip((step - warmup) / (total - warmup), 0., 1.)
        return np_.where(step < warmup, peak * step / warmup, peak * 0.5 * (1 + np_.cos(np_.pi * frac)))

    def apply_updates(params: Any, updates: Any) -> Any:
        return tree.map(lambda p, u: np_.asarray(p + u).astype(np_.asarray(p).dtype), params, updates)

    def loss(params: Any) -> Any:
        return np_.sum((params["w"] @ np_.arange(3.) + params["b"] - 2.) ** 2) + np_.sum(params["w"] ** 4)

    init, update = chain(clip_by_global_norm(1.0), adam(warmup_cosine))
    params = {"w": np_.ones((2, 3)) * 0.5, "b": np_.zeros(2)}

    @lib.jit
    def train(params: Any) -> Any:
        def step(carry: Any, _: Any) -> Any:
            params, state = carry
            value, grads = lib.value_and_grad(loss)(params)
            updates, state = update(grads, state)
            return (apply_updates(params, updates), state), value
        return lib.lax.scan(step, (params, init(params)), None, length=6)

    (trained, state), losses = train(params)
    eager_state = init(params)
    eager = params
    for _ in range(2):
        updates, eager_state = update(lib.grad(loss)(eager), eager_state)
        eager = apply_updates(eager, updates)
    return trained, state, losses, eager, eager_state, [warmup_cosine(s) for s in range(0, 10, 3)]


def _newton_logistic_regression(lib: Any, np_: Any) -> Any:
    # after "logistic regression with Newton's method" examples using jax.hessian
    X = lib.random.normal(lib.random.PRNGKey(0), (20, 3))
    y = (X @ np_.array([1.5, -2., 0.5]) + 0.3 * lib.random.normal(lib.random.PRNGKey(1), (20,)) > 0).astype(
        np_.float32)

    def nll(w: Any) -> Any:
        logits = X @ w
        return np_.sum(np_.logaddexp(0., logits) - y * logits) + 0.05 * w @ w

    w = np_.zeros(3)
    history = []
    for _ in range(4):
        g, H = lib.grad(nll)(w), lib.hessian(nll)(w)
        w = w - np_.linalg.solve(H, g)
        history.append(nll(w))
    newton_step = lib.jit(lambda w: w - np_.linalg.solve(lib.hessian(nll)(w), lib.grad(nll)(w)))
    return w, history, newton_step(np_.zeros(3)), lib.nn.sigmoid(X[:4] @ w)


def _dropout_and_batch_norm(lib: Any, np_: Any) -> Any:
    # after hand-written dropout and batch-norm layers threading state through value_and_grad(has_aux=True)
    random, lax = lib.random, lib.lax

    def dropout(key: Any, x: Any, rate: float) -> Any:
        keep = random.bernoulli(key, 1 - rate, x.shape)
        return np_.where(keep, x / (1 - rate), 0)

    def batch_norm(x: Any, stats: Any, train: bool, momentum: float = 0.9) -> Any:
        if train:
            mean, var = x.mean(0), x.var(0)
            stats = {"mean": momentum * stats["mean"] + (1 - momentum) * mean,
                     "var": momentum * stats["var"] + (1 - momentum) * var}
        else:
            mean, var = stats["mean"], stats["var"]
        return (x - mean) * lax.rsqrt(var + 1e-5), stats

    def apply(params: Any, stats: Any, x: Any, key: Any, train: bool) -> Any:
        (w1, b1), (w2, b2) = params
        h, stats = batch_norm(x @ w1 + b1, stats, train)
        h = lib.nn.relu(h)
        if train:
            h = dropout(key, h, 0.25)
        return h @ w2 + b2, stats

    def loss(params: Any, stats: Any, x: Any, y: Any, key: Any) -> Any:
        out, stats = apply(params, stats, x, key, True)
        return np_.mean((out[:, 0] - y) ** 2), stats

    params = _dense_init(lib, random.PRNGKey(0), [3, 5, 1])
    stats = {"mean": np_.zeros(5), "var": np_.ones(5)}
    x = random.normal(random.PRNGKey(1), (8, 3))
    y = np_.sin(x[:, 0])

    @partial(lib.jit, donate_argnums=(0, 1))
    def step(params: Any, stats: Any, key: Any) -> Any:
        (value, stats), grads = lib.value_and_grad(loss, has_aux=True)(params, stats, x, y, key)
        return lib.tree.map(lambda p, g: p - 0.05 * g, params, grads), stats, value

    values = []
    for i in range(3):
        params, stats, value = step(params, stats, random.fold_in(random.PRNGKey(2), i))
        values.append(value)
    return values, params, stats, apply(params, stats, x, None, False)[0]


def _parallel_single_device(lib: Any, np_: Any) -> Any:
    # JAX docs, "Introduction to parallel programming", run on the one device a test machine has
    P, NamedSharding = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
    shard_map = importlib.import_module(lib.__name__ + ".experimental.shard_map").shard_map
    mesh = lib.make_mesh((1,), ("x",))
    sharding = NamedSharding(mesh, P("x"))
    arr = lib.device_put(np_.arange(8.), sharding)

    @lib.jit
    def f_elementwise(x: Any) -> Any:
        return 2 * np_.sin(x) + 1

    @partial(shard_map, mesh=mesh, in_specs=P("x"), out_specs=P())
    def f_sum(x_block: Any) -> Any:
        return lib.lax.psum(np_.sum(x_block, keepdims=True), "x")

    @lib.jit
    def f_constrained(x: Any) -> Any:
        return lib.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P()))

    return (f_elementwise(arr), f_sum(arr), f_constrained(arr), f_elementwise(arr).shape,
            len(mesh.devices.reshape(-1)), mesh.axis_names, lib.device_put(arr, lib.devices()[0]))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "transformer": _transformer, "real_nvp": _real_nvp, "pinn": _pinn, "inline_optimizers": _inline_optimizers,
    "newton_logistic_regression": _newton_logistic_regression, "dropout_and_batch_norm": _dropout_and_batch_norm,
    "parallel_single_device": _parallel_single_device,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_model_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=5e-4, rtol64=1e-9)
