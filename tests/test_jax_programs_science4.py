"""Small scientific and machine-learning projects as people write them in JAX, run on JAX and
on fungraph with only the import changed, in both dtype modes: fitting Lotka-Volterra rates
through an RK4 integrator, Gaussian-mixture EM, Lagrangian and Hamiltonian neural networks
(Cranmer et al.; Greydanus et al.), denoising score matching with Langevin sampling, REINFORCE
on a bandit, skip-gram embeddings trained by ``.at[].add``, graph message passing with
``segment_sum``, greedy and beam decoding, the Game of Life by convolution, Burgers' equation
and PageRank."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _mlp_init(lib: Any, key: Any, sizes: list[int], scale: float = 0.5) -> list[tuple[Any, Any]]:
    keys = lib.random.split(key, len(sizes) - 1)
    return [(scale * lib.random.normal(k, (m, n)), lib.numpy.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def _mlp(np_: Any, params: Any, x: Any, act: Any = None) -> Any:
    act = act or np_.tanh
    for w, b in params[:-1]:
        x = act(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def _lotka_volterra(lib: Any, np_: Any) -> Any:
    # Parameter estimation for predator-prey dynamics through a hand-written RK4 (lax.scan)
    def vector_field(y: Any, theta: Any) -> Any:
        alpha, beta, delta, gamma = theta
        prey, pred = y
        return np_.stack([alpha * prey - beta * prey * pred, delta * prey * pred - gamma * pred])

    def rk4_solve(y0: Any, theta: Any, dt: float = 0.1, n: int = 30) -> Any:
        def step(y: Any, _: Any) -> Any:
            k1 = vector_field(y, theta)
            k2 = vector_field(y + dt / 2 * k1, theta)
            k3 = vector_field(y + dt / 2 * k2, theta)
            k4 = vector_field(y + dt * k3, theta)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            return y, y

        return lib.lax.scan(step, y0, None, length=n)[1]

    y0 = np_.array([1.0, 0.5])
    true_theta = np_.array([1.1, 0.4, 0.1, 0.4])
    data = rk4_solve(y0, true_theta)

    @lib.jit
    def update(theta: Any) -> Any:
        loss, g = lib.value_and_grad(lambda th: np_.mean((rk4_solve(y0, th) - data) ** 2))(theta)
        return loss, theta - 0.05 * g

    theta = np_.array([1.0, 0.5, 0.15, 0.3])
    losses = []
    for _ in range(4):
        loss, theta = update(theta)
        losses.append(loss)
    return data[::10], losses, theta, lib.jacfwd(lambda th: rk4_solve(y0, th, n=5)[-1])(theta)


def _gaussian_mixture_em(lib: Any, np_: Any) -> Any:
    # Expectation-maximisation for a 1-d mixture of Gaussians, under jit with lax.fori_loop
    logsumexp = lib.scipy.special.logsumexp
    norm = lib.scipy.stats.norm
    k1, k2 = lib.random.split(lib.random.PRNGKey(0))
    x = np_.concatenate([lib.random.normal(k1, (20,)) - 2., 0.5 * lib.random.normal(k2, (20,)) + 1.5])

    def log_joint(x: Any, params: Any) -> Any:
        log_w, mu, log_sigma = params
        return log_w + norm.logpdf(x[:, None], mu, np_.exp(log_sigma))

    def em_step(_: Any, params: Any) -> Any:
        lj = log_joint(x, params)
        resp = np_.exp(lj - logsumexp(lj, axis=1, keepdims=True))
        nk = resp.sum(0)
        mu = (resp * x[:, None]).sum(0) / nk
        var = (resp * (x[:, None] - mu) ** 2).sum(0) / nk
        return np_.log(nk / x.shape[0]), mu, 0.5 * np_.log(var)

    init = (np_.log(np_.array([0.5, 0.5])), np_.array([-1., 1.]), np_.zeros(2))
    params = lib.jit(lambda p: lib.lax.fori_loop(0, 15, em_step, p))(init)
    log_lik = lambda p: logsumexp(log_joint(x, p), axis=1).sum()  # noqa: E731
    return params, log_lik(init), log_lik(params), lib.grad(log_lik)(params)


def _lagrangian_nn(lib: Any, np_: Any) -> Any:
    # Cranmer et al., "Lagrangian Neural Networks": accelerations from hessian/jacfwd of L
    def equation_of_motion(lagrangian: Any, state: Any) -> Any:
        q, q_t = np_.split(state, 2)
        q_tt = (np_.linalg.pinv(lib.hessian(lagrangian, 1)(q, q_t))
                @ (lib.grad(lagrangian, 0)(q, q_t) - lib.jacfwd(lib.grad(lagrangian, 1), 0)(q, q_t) @ q_t))
        return np_.concatenate([q_t, q_tt])

    def double_pendulum(q: Any, q_dot: Any, m1: float = 1., m2: float = 1., l1: float = 1., l2: float = 1.,
                        g: float = 9.8) -> Any:
        t1, t2 = q
        w1, w2 = q_dot
        T1 = 0.5 * m1 * (l1 * w1) ** 2
        T2 = 0.5 * m2 * ((l1 * w1) ** 2 + (l2 * w2) ** 2 + 2 * l1 * l2 * w1 * w2 * np_.cos(t1 - t2))
        V = -(m1 + m2) * g * l1 * np_.cos(t1) - m2 * g * l2 * np_.cos(t2)
        return T1 + T2 - V

    params = _mlp_init(lib, lib.random.PRNGKey(1), [4, 8, 1], 0.3)
    learned = lambda p: lambda q, q_t: _mlp(np_, p, np_.concatenate([q, q_t]), np_.tanh)[0]  # noqa: E731
    states = np_.array([[0.3, -0.2, 0.1, 0.4], [1.0, 0.5, -0.3, 0.2], [-0.4, 0.8, 0.0, -0.1]])
    targets = lib.jit(lib.vmap(lambda s: equation_of_motion(double_pendulum, s)))(states)

    def loss(p: Any) -> Any:
        preds = lib.vmap(lambda s: equation_of_motion(learned(p), s))(states)
        return np_.mean((preds - targets) ** 2)

    return targets, lib.jit(lib.value_and_grad(loss))(params)


def _hamiltonian_nn(lib: Any, np_: Any) -> Any:
    # Greydanus et al., "Hamiltonian Neural Networks": the symplectic gradient of a learned H
    params = _mlp_init(lib, lib.random.PRNGKey(2), [2, 16, 1], 0.5)
    optimizers = importlib.import_module(lib.__name__ + ".example_libraries.optimizers")

    def hamiltonian(p: Any, x: Any) -> Any:
        return _mlp(np_, p, x)[0]

    def time_derivative(p: Any, x: Any) -> Any:
        dq, dp = np_.split(lib.grad(hamiltonian, 1)(p, x), 2)
        return np_.concatenate([dp, -dq])

    t = np_.linspace(0., 2 * np_.pi, 12)
    xs = np_.stack([np_.cos(t), np_.sin(t)], axis=1) * 1.2
    dxs = np_.stack([xs[:, 1], -xs[:, 0]], axis=1)

    def loss(p: Any) -> Any:
        return np_.mean((lib.vmap(time_derivative, (None, 0))(p, xs) - dxs) ** 2)

    opt_init, opt_update, get_params = optimizers.adam(1e-2)

    @lib.jit
    def step(i: Any, state: Any) -> Any:
        value, g = lib.value_and_grad(loss)(get_params(state))
        return value, opt_update(i, g, state)

    state = opt_init(params)
    values = []
    for i in range(5):
        value, state = step(i, state)
        values.append(value)
    return values, lib.vmap(hamiltonian, (None, 0))(get_params(state), xs[:3])


def _denoising_score_matching(lib: Any, np_: Any) -> Any:
    # Song and Ermon's noise-conditional score model on 2-d toy data, then annealed Langevin dynamics
    r = lib.random
    k_data, k_init, k_train, k_sample = r.split(r.PRNGKey(3), 4)
    centres = np_.array([[1., 1.], [-1., -1.]])
    data = centres[r.bernoulli(k_data, 0.5, (32,)).astype(np_.int32)] + 0.1 * r.normal(k_data, (32, 2))
    sigmas = np_.array([1.0, 0.5, 0.1])
    params = _mlp_init(lib, k_init, [3, 16, 2], 0.3)

    def score(p: Any, x: Any, sigma: Any) -> Any:
        return _mlp(np_, p, np_.concatenate([x, np_.log(sigma)[None]]), lib.nn.softplus) / sigma

    def dsm_loss(p: Any, key: Any) -> Any:
        k1, k2 = r.split(key)
        s = sigmas[r.randint(k1, (data.shape[0],), 0, 3)]
        noise = r.normal(k2, data.shape)
        perturbed = data + s[:, None] * noise
        pred = lib.vmap(score, (None, 0, 0))(p, perturbed, s)
        return np_.mean(np_.sum((pred * s[:, None] + noise) ** 2, axis=1)) / 2

    @lib.jit
    def train_step(p: Any, key: Any) -> Any:
        value, g = lib.value_and_grad(dsm_loss)(p, key)
        return value, lib.tree.map(lambda w, d: w - 0.05 * d, p, g)

    losses = []
    for key in r.split(k_train, 2):
        value, params = train_step(params, key)
        losses.append(value)

    @lib.jit
    def langevin(p: Any, key: Any) -> Any:
        def level(carry: Any, sigma: Any) -> Any:
            x, key = carry
            step = 0.1 * sigma ** 2

            def inner(_: Any, c: Any) -> Any:
                x, key = c
                key, sub = r.split(key)
                drift = step * lib.vmap(score, (None, 0, None))(p, x, sigma)
                x = x + drift + np_.sqrt(2 * step) * r.normal(sub, x.shape)
                return x, key

            return lib.lax.fori_loop(0, 2, inner, (x, key)), None

        x0 = r.uniform(key, (5, 2), minval=-2., maxval=2.)
        return lib.lax.scan(level, (x0, key), sigmas)[0][0]

    return losses, langevin(params, k_sample)


def _reinforce_bandit(lib: Any, np_: Any) -> Any:
    # REINFORCE with a baseline on a 4-armed Gaussian bandit: sampled actions, log-prob gradients
    r = lib.random
    means = np_.array([0.1, 0.5, 0.9, 0.3])

    def log_prob(logits: Any, a: Any) -> Any:
        return lib.nn.log_softmax(logits)[a]

    @lib.jit
    def episode(carry: Any, key: Any) -> Any:
        logits, baseline = carry
        k_act, k_rew = r.split(key)
        actions = r.categorical(k_act, logits, shape=(8,))
        rewards = means[actions] + 0.1 * r.normal(k_rew, (8,))
        advantages = rewards - baseline
        g = lib.grad(lambda lg: np_.mean(lib.vmap(log_prob, (None, 0))(lg, actions) * advantages))(logits)
        return (logits + 0.5 * g, 0.9 * baseline + 0.1 * rewards.mean()), rewards.mean()

    (logits, baseline), returns = lib.lax.scan(episode, (np_.zeros(4), 0.), r.split(r.PRNGKey(4), 6))
    return lib.nn.softmax(logits), baseline, returns


def _skipgram(lib: Any, np_: Any) -> Any:
    # word2vec skip-gram with negative sampling: embedding lookups, and sparse SGD with .at[].add
    r = lib.random
    vocab, dim = 10, 4
    k_in, k_out, k_neg = r.split(r.PRNGKey(5), 3)
    emb_in = 0.1 * r.normal(k_in, (vocab, dim))
    emb_out = 0.1 * r.normal(k_out, (vocab, dim))
    corpus = np_.array([1, 2, 3, 2, 1, 4, 5, 6, 5, 4, 7, 8, 9, 8, 7])
    centres = corpus[1:-1]
    contexts = np_.stack([corpus[:-2], corpus[2:]], axis=1)
    negatives = r.randint(k_neg, (centres.shape[0], 3), 0, vocab)

    def loss(emb_in: Any, emb_out: Any) -> Any:
        v = emb_in[centres]
        pos = np_.einsum("nd,nkd->nk", v, emb_out[contexts])
        neg = np_.einsum("nd,nkd->nk", v, emb_out[negatives])
        return -(lib.nn.log_sigmoid(pos).sum() + lib.nn.log_sigmoid(-neg).sum()) / centres.shape[0]

    @lib.jit
    def sparse_step(emb_in: Any, emb_out: Any) -> Any:
        value, (g_in, g_out) = lib.value_and_grad(loss, (0, 1))(emb_in, emb_out)
        rows = g_in[centres]
        return value, emb_in.at[centres].add(-0.5 * rows / np_.maximum(1., np_.bincount(centres, length=vocab)[centres])
                                             [:, None]), emb_out - 0.5 * g_out

    values = []
    for _ in range(3):
        value, emb_in, emb_out = sparse_step(emb_in, emb_out)
        values.append(value)
    sims = emb_in @ emb_in.T / np_.outer(np_.linalg.norm(emb_in, axis=1), np_.linalg.norm(emb_in, axis=1))
    return values, emb_in, np_.argsort(-sims[2])[:3], lib.nn.one_hot(centres[:4], vocab) @ emb_in


def _message_passing(lib: Any, np_: Any) -> Any:
    # A graph convolutional network in jraph's style: gather senders, segment_sum to receivers
    ops = lib.ops
    senders = np_.array([0, 1, 1, 2, 3, 4, 4, 5])
    receivers = np_.array([1, 0, 2, 1, 4, 3, 5, 4])
    graph_of_node = np_.array([0, 0, 0, 1, 1, 1])
    n = 6
    nodes = np_.arange(12.).reshape(n, 2) / 10.
    params = _mlp_init(lib, lib.random.PRNGKey(6), [2, 5, 3], 0.5)

    def gcn_layer(w: Any, h: Any) -> Any:
        deg = ops.segment_sum(np_.ones_like(senders, dtype=h.dtype), receivers, n) + 1.
        norm = lib.lax.rsqrt(deg)
        messages = (h * norm[:, None])[senders]
        agg = ops.segment_sum(messages, receivers, num_segments=n) + h * norm[:, None]
        return agg * norm[:, None] @ w[0] + w[1]

    def readout(p: Any, h: Any) -> Any:
        h = lib.nn.relu(gcn_layer(p[0], h))
        h = gcn_layer(p[1], h)
        pooled = ops.segment_sum(h, graph_of_node, 2) / ops.segment_sum(np_.ones(n), graph_of_node, 2)[:, None]
        return pooled, ops.segment_max(h, graph_of_node, 2), ops.segment_min(h[:, 0], graph_of_node, num_segments=2,
                                                                              indices_are_sorted=True)

    def loss(p: Any) -> Any:
        pooled, _, _ = readout(p, nodes)
        return np_.sum(lib.nn.log_softmax(pooled) * lib.nn.one_hot(np_.array([0, 2]), 3))

    return readout(params, nodes), lib.jit(lib.grad(loss))(params), ops.segment_prod(nodes[:, 1], graph_of_node, 2)


def _decoding(lib: Any, np_: Any) -> Any:
    # Greedy and beam-search decoding of a toy recurrent language model with fixed-size buffers
    lax = lib.lax
    vocab, hidden, length, beams = 6, 5, 5, 3
    k1, k2, k3 = lib.random.split(lib.random.PRNGKey(7), 3)
    emb = lib.random.normal(k1, (vocab, hidden))
    w_h = 0.5 * lib.random.normal(k2, (hidden, hidden))
    w_o = lib.random.normal(k3, (hidden, vocab))

    def step_fn(h: Any, token: Any) -> Any:
        h = np_.tanh(emb[token] + h @ w_h)
        return h, lib.nn.log_softmax(h @ w_o)

    @lib.jit
    def greedy(start: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            h, tokens, score = carry
            h, logp = step_fn(h, tokens[i])
            nxt = np_.argmax(logp)
            return h, lax.dynamic_update_slice(tokens, nxt[None].astype(tokens.dtype), (i + 1,)), score + logp[nxt]

        tokens = np_.zeros(length + 1, np_.int32).at[0].set(start)
        return lax.fori_loop(0, length, body, (np_.zeros(hidden), tokens, 0.))[1:]

    @lib.jit
    def beam_search(start: Any) -> Any:
        def body(i: Any, carry: Any) -> Any:
            h, seqs, scores = carry
            h_new, logp = lib.vmap(step_fn)(h, seqs[:, i])
            total = (scores[:, None] + logp).reshape(-1)
            top_scores, flat = lax.top_k(total, beams)
            parent, token = flat // vocab, flat % vocab
            seqs = lax.dynamic_update_slice_in_dim(seqs[parent], token[:, None].astype(seqs.dtype), i + 1, axis=1)
            return h_new[parent], seqs, top_scores

        seqs = np_.zeros((beams, length + 1), np_.int32).at[:, 0].set(start)
        scores = np_.array([0.] + [-1e9] * (beams - 1))
        return lax.fori_loop(0, length, body, (np_.zeros((beams, hidden)), seqs, scores))[1:]

    return greedy(1), beam_search(1), lib.jit(lib.vmap(greedy))(np_.arange(3))[0]


def _game_of_life(lib: Any, np_: Any) -> Any:
    # Conway's Game of Life: neighbour counts by 2-d convolution (scipy.signal and lax.conv)
    convolve2d = lib.scipy.signal.convolve2d
    kernel = np_.ones((3, 3)).at[1, 1].set(0.)
    glider = np_.zeros((8, 8)).at[np_.array([0, 1, 2, 2, 2]), np_.array([1, 2, 0, 1, 2])].set(1.)

    def step(board: Any) -> Any:
        n = convolve2d(board, kernel, mode="same")
        return ((n == 3) | ((board == 1) & (n == 2))).astype(board.dtype)

    def step_lax(board: Any) -> Any:
        n = lib.lax.conv(board[None, None], kernel[None, None], (1, 1), "SAME")[0, 0]
        return np_.where((n == 3) | ((board == 1) & (n == 2)), 1., 0.)

    boards = lib.lax.scan(lambda b, _: (step(b), b.sum()), glider, None, length=4)
    return (boards, lib.jit(lambda b: lib.lax.fori_loop(0, 4, lambda i, b: step_lax(b), b))(glider),
            convolve2d(glider, kernel, mode="valid"), convolve2d(glider[:3, :3], kernel), lib.scipy.signal.correlate2d(
                glider[:4, :4], kernel[:2], mode="same"))


def _burgers(lib: Any, np_: Any) -> Any:
    # Viscous Burgers' equation with periodic finite differences; the gradient of the final
    # energy in the viscosity, and a wave equation by leapfrog
    n, dx, dt = 32, 2 * np_.pi / 32, 0.01
    x = np_.arange(n) * dx
    u0 = np_.sin(x) + 0.5

    def burgers_step(u: Any, nu: Any) -> Any:
        dudx = (np_.roll(u, -1) - np_.roll(u, 1)) / (2 * dx)
        d2udx2 = (np_.roll(u, -1) - 2 * u + np_.roll(u, 1)) / dx ** 2
        return u + dt * (-u * dudx + nu * d2udx2)

    def energy(nu: Any) -> Any:
        u = lib.lax.fori_loop(0, 20, lambda i, u: burgers_step(u, nu), u0)
        return 0.5 * np_.sum(u ** 2) * dx

    def wave(c: Any) -> Any:
        def step(carry: Any, _: Any) -> Any:
            prev, cur = carry
            nxt = 2 * cur - prev + (c * dt / dx) ** 2 * (np_.roll(cur, 1) - 2 * cur + np_.roll(cur, -1))
            return (cur, nxt), nxt[0]

        return lib.lax.scan(step, (u0, u0), None, length=15)

    return energy(0.1), lib.grad(energy)(0.1), lib.jit(wave)(1.0)[1], np_.gradient(u0, dx), np_.diff(u0, n=2)[:4]


def _pagerank(lib: Any, np_: Any) -> Any:
    # PageRank by power iteration to a tolerance (lax.while_loop), and its sensitivity to damping
    adjacency = np_.array([[0, 1, 1, 0, 0], [0, 0, 1, 0, 0], [1, 0, 0, 1, 0], [0, 0, 1, 0, 1], [1, 0, 0, 0, 0]],
                          dtype=np_.float32)
    transition = adjacency / adjacency.sum(axis=1, keepdims=True)

    def pagerank(damping: Any, tol: float = 1e-6) -> Any:
        n = transition.shape[0]

        def cond(state: Any) -> Any:
            _, delta, i = state
            return (delta > tol) & (i < 100)

        def body(state: Any) -> Any:
            rank, _, i = state
            new = (1 - damping) / n + damping * transition.T @ rank
            return new, np_.abs(new - rank).sum(), i + 1

        rank, _, iters = lib.lax.while_loop(cond, body, (np_.full(n, 1. / n), np_.inf, 0))
        return rank, iters

    def pagerank_direct(damping: Any) -> Any:
        n = transition.shape[0]
        return np_.linalg.solve(np_.eye(n) - damping * transition.T, np_.full(n, (1 - damping) / n))

    return (pagerank(0.85), lib.jit(pagerank)(0.5), lib.jacfwd(pagerank_direct)(0.85), np_.argsort(pagerank(0.85)[0]))


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "lotka_volterra": _lotka_volterra, "gaussian_mixture_em": _gaussian_mixture_em, "lagrangian_nn": _lagrangian_nn,
    "hamiltonian_nn": _hamiltonian_nn, "denoising_score_matching": _denoising_score_matching,
    "reinforce_bandit": _reinforce_bandit, "skipgram": _skipgram, "message_passing": _message_passing,
    "decoding": _decoding, "game_of_life": _game_of_life, "burgers": _burgers, "pagerank": _pagerank,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_science_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=2e-4, rtol64=1e-8)
