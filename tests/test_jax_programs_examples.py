"""Programs from JAX's ``examples/`` directory, run on JAX and on fungraph with only the import
changed, in both dtype modes, on small synthetic data in place of MNIST: the classifier from
scratch (float64 numpy parameters entering a jitted update), differentially private SGD
(per-example clipped gradients by ``vmap``, noised with ``fold_in`` keys, a ``stax`` CNN),
kernel least squares (``optimizers.momentum`` on a ``vmap`` Gram matrix), the VAE (``stax``
encoder and decoder trained by ``fori_loop`` over ``dynamic_slice_in_dim`` batches under
``jit``) and Gaussian process regression (hand-written RMSProp on ``(1, 1)`` hyperparameters)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

from tests.helpers import jax_or_skip
from tests.jax_programs import check_program

jax, jnp = jax_or_skip()


def _example_libraries(lib: Any) -> tuple[Any, Any]:
    stax = importlib.import_module(lib.__name__ + ".example_libraries.stax")
    return stax, importlib.import_module(lib.__name__ + ".example_libraries.optimizers")


def _mnist_classifier_fromscratch(lib: Any, np_: Any) -> Any:
    # jax/examples/mnist_classifier_fromscratch.py
    logsumexp = lib.scipy.special.logsumexp

    def init_random_params(scale: float, layer_sizes: list[int], rng: Any = np.random.RandomState(0)) -> Any:  # noqa: B008
        return [(scale * rng.randn(m, n), scale * rng.randn(n)) for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]

    def predict(params: Any, inputs: Any) -> Any:
        activations = inputs
        for w, b in params[:-1]:
            outputs = np_.dot(activations, w) + b
            activations = np_.tanh(outputs)
        final_w, final_b = params[-1]
        logits = np_.dot(activations, final_w) + final_b
        return logits - logsumexp(logits, axis=1, keepdims=True)

    def loss(params: Any, batch: Any) -> Any:
        inputs, targets = batch
        preds = predict(params, inputs)
        return -np_.mean(np_.sum(preds * targets, axis=1))

    def accuracy(params: Any, batch: Any) -> Any:
        inputs, targets = batch
        target_class = np_.argmax(targets, axis=1)
        predicted_class = np_.argmax(predict(params, inputs), axis=1)
        return np_.mean(predicted_class == target_class)

    layer_sizes, param_scale, step_size = [16, 8, 8, 4], 0.1, 0.1
    rs = np.random.RandomState(1)
    train_images = rs.rand(12, 16).astype(np.float32)
    train_labels = np.eye(4, dtype=np.float32)[rs.randint(0, 4, 12)]

    @lib.jit
    def update(params: Any, batch: Any) -> Any:
        grads = lib.grad(loss)(params, batch)
        return [(w - step_size * dw, b - step_size * db) for (w, b), (dw, db) in zip(params, grads)]

    params = init_random_params(param_scale, layer_sizes)
    for i in range(3):
        idx = slice(4 * i, 4 * i + 4)
        params = update(params, (train_images[idx], train_labels[idx]))
    return params, accuracy(params, (train_images, train_labels)), loss(params, (train_images, train_labels))


def _differentially_private_sgd(lib: Any, np_: Any) -> Any:
    # jax/examples/differentially_private_sgd.py
    stax, optimizers = _example_libraries(lib)
    tree_flatten, tree_unflatten = lib.tree_util.tree_flatten, lib.tree_util.tree_unflatten
    random = lib.random
    init_random_params, predict = stax.serial(
        stax.Conv(4, (3, 3), padding="SAME", strides=(2, 2)), stax.Relu, stax.MaxPool((2, 2), (1, 1)),
        stax.Flatten, stax.Dense(8), stax.Relu, stax.Dense(3))

    def loss(params: Any, batch: Any) -> Any:
        inputs, targets = batch
        logits = predict(params, inputs)
        logits = stax.logsoftmax(logits)
        return -np_.mean(np_.sum(logits * targets, axis=1))

    def clipped_grad(params: Any, l2_norm_clip: float, single_example_batch: Any) -> Any:
        grads = lib.grad(loss)(params, single_example_batch)
        nonempty_grads, tree_def = tree_flatten(grads)
        total_grad_norm = np_.linalg.norm(np_.array([np_.linalg.norm(neg.ravel()) for neg in nonempty_grads]))
        divisor = np_.maximum(total_grad_norm / l2_norm_clip, 1.)
        normalized_nonempty_grads = [g / divisor for g in nonempty_grads]
        return tree_unflatten(tree_def, normalized_nonempty_grads)

    def private_grad(params: Any, batch: Any, rng: Any, l2_norm_clip: float, noise_multiplier: float,
                     batch_size: int) -> Any:
        clipped_grads = lib.vmap(clipped_grad, (None, None, 0))(params, l2_norm_clip, batch)
        clipped_grads_flat, grads_treedef = tree_flatten(clipped_grads)
        aggregated_clipped_grads = [g.sum(0) for g in clipped_grads_flat]
        rngs = random.split(rng, len(aggregated_clipped_grads))
        noised_aggregated_clipped_grads = [g + l2_norm_clip * noise_multiplier * random.normal(r, g.shape)
                                           for r, g in zip(rngs, aggregated_clipped_grads)]
        return tree_unflatten(grads_treedef, [g / batch_size for g in noised_aggregated_clipped_grads])

    batch_size = 4
    opt_init, opt_update, get_params = optimizers.sgd(0.15)

    @lib.jit
    def private_update(rng: Any, i: Any, opt_state: Any, batch: Any) -> Any:
        params = get_params(opt_state)
        rng = random.fold_in(rng, i)
        return opt_update(i, private_grad(params, batch, rng, 1.5, 1.1, batch_size), opt_state)

    key = random.PRNGKey(0)
    _, init_params = init_random_params(key, (-1, 6, 6, 1))
    opt_state = opt_init(init_params)
    rs = np.random.RandomState(0)
    images = rs.rand(batch_size, 1, 6, 6, 1)
    labels = np.eye(3)[rs.randint(0, 3, batch_size)][:, None]
    for i in range(2):
        opt_state = private_update(key, i, opt_state, (images, labels))
    return get_params(opt_state)


def _kernel_lsq(lib: Any, np_: Any) -> Any:
    # jax/examples/kernel_lsq.py
    _, optimizers = _example_libraries(lib)

    def gram(kernel: Any, xs: Any) -> Any:
        return lib.vmap(lambda x: lib.vmap(lambda y: kernel(x, y))(xs))(xs)

    def minimize(f: Any, x: Any, num_steps: int = 20, step_size: float = 0.001, mass: float = 0.9) -> Any:
        opt_init, opt_update, get_params = optimizers.momentum(step_size, mass)

        @lib.jit
        def update(i: Any, opt_state: Any) -> Any:
            x = get_params(opt_state)
            return opt_update(i, lib.grad(f)(x), opt_state)

        opt_state = opt_init(x)
        for i in range(num_steps):
            opt_state = update(i, opt_state)
        return get_params(opt_state)

    def train(kernel: Any, xs: Any, ys: Any, regularization: float = 0.01) -> Any:
        gram_ = lib.jit(partial(gram, kernel))
        gram_mat = gram_(xs)
        n = xs.shape[0]

        def objective(v: Any) -> Any:
            risk = .5 * np_.sum((np_.dot(gram_mat, v) - ys) ** 2.)
            reg = regularization * np_.sum(v ** 2.)
            return risk + reg

        v = minimize(objective, np_.zeros(n))

        def predict(x: Any) -> Any:
            prods = lib.vmap(lambda x_: kernel(x, x_))(xs)
            return np_.sum(v * prods)

        return lib.jit(lib.vmap(predict))

    n, d = 12, 3
    rng = np.random.RandomState(0)
    truth = rng.randn(d)
    xs = rng.randn(n, d)
    ys = np_.dot(xs, truth)
    kernel = np_.dot
    predict = train(kernel, xs, ys)
    e = np_.mean((predict(xs) - ys) ** 2.)
    rbf = lambda x, y: np_.exp(-0.5 * np_.sum((x - y) ** 2))  # noqa: E731
    return e, predict(xs[:3]), train(rbf, xs, ys)(xs[:4])


def _mnist_vae(lib: Any, np_: Any) -> Any:
    # jax/examples/mnist_vae.py
    stax, optimizers = _example_libraries(lib)
    random, lax = lib.random, lib.lax
    Dense, Relu, Softplus, FanOut = stax.Dense, stax.Relu, stax.Softplus, stax.FanOut

    def gaussian_kl(mu: Any, sigmasq: Any) -> Any:
        return -0.5 * np_.sum(1. + np_.log(sigmasq) - mu ** 2. - sigmasq)

    def gaussian_sample(rng: Any, mu: Any, sigmasq: Any) -> Any:
        return mu + np_.sqrt(sigmasq) * random.normal(rng, mu.shape)

    def bernoulli_logpdf(logits: Any, x: Any) -> Any:
        return -np_.sum(np_.logaddexp(0., np_.where(x, -1., 1.) * logits))

    def elbo(rng: Any, params: Any, images: Any) -> Any:
        enc_params, dec_params = params
        mu_z, sigmasq_z = encode(enc_params, images)
        logits_x = decode(dec_params, gaussian_sample(rng, mu_z, sigmasq_z))
        return bernoulli_logpdf(logits_x, images) - gaussian_kl(mu_z, sigmasq_z)

    def image_sample(rng: Any, params: Any, nrow: int, ncol: int) -> Any:
        _, dec_params = params
        code_rng, img_rng = random.split(rng)
        logits = decode(dec_params, random.normal(code_rng, (nrow * ncol, 3)))
        return random.bernoulli(img_rng, np_.logaddexp(0., logits))

    encoder_init, encode = stax.serial(Dense(8), Relu, Dense(8), Relu, FanOut(2),
                                       stax.parallel(Dense(3), stax.serial(Dense(3), Softplus)))
    decoder_init, decode = stax.serial(Dense(8), Relu, Dense(8), Relu, Dense(16))
    step_size, num_epochs, batch_size, nrow, ncol = 0.001, 2, 4, 2, 2
    test_rng = random.PRNGKey(1)
    train_images = np_.asarray(np.random.RandomState(0).rand(12, 16), dtype=np_.float32)
    num_batches = train_images.shape[0] // batch_size
    enc_init_rng, dec_init_rng = random.split(random.PRNGKey(2))
    _, init_encoder_params = encoder_init(enc_init_rng, (batch_size, 16))
    _, init_decoder_params = decoder_init(dec_init_rng, (batch_size, 3))
    init_params = init_encoder_params, init_decoder_params
    opt_init, opt_update, get_params = optimizers.momentum(step_size, mass=0.9)

    def binarize_batch(rng: Any, i: Any, images: Any) -> Any:
        i = i % num_batches
        batch = lax.dynamic_slice_in_dim(images, i * batch_size, batch_size)
        return random.bernoulli(rng, batch)

    @lib.jit
    def run_epoch(rng: Any, opt_state: Any, images: Any) -> Any:
        def body_fun(i: Any, opt_state: Any) -> Any:
            elbo_rng, data_rng = random.split(random.fold_in(rng, i))
            batch = binarize_batch(data_rng, i, images)
            loss = lambda params: -elbo(elbo_rng, params, batch) / batch_size  # noqa: E731
            g = lib.grad(loss)(get_params(opt_state))
            return opt_update(i, g, opt_state)
        return lax.fori_loop(0, num_batches, body_fun, opt_state)

    @lib.jit
    def evaluate(opt_state: Any, images: Any) -> Any:
        params = get_params(opt_state)
        elbo_rng, data_rng, image_rng = random.split(test_rng, 3)
        binarized_test = random.bernoulli(data_rng, images)
        test_elbo = elbo(elbo_rng, params, binarized_test) / images.shape[0]
        return test_elbo, image_sample(image_rng, params, nrow, ncol)

    opt_state = opt_init(init_params)
    results = []
    for epoch in range(num_epochs):
        opt_state = run_epoch(random.PRNGKey(epoch), opt_state, train_images)
        results.append(evaluate(opt_state, train_images[:4]))
    return results, get_params(opt_state)


def _gaussian_process_regression(lib: Any, np_: Any) -> Any:
    # jax/examples/gaussian_process_regression.py
    random, scipy, softplus = lib.random, lib.scipy, lib.nn.softplus
    numpts = 7
    key = random.PRNGKey(0)
    eye = np_.eye(numpts)

    def cov_map(cov_func: Any, xs: Any, xs2: Any = None) -> Any:
        if xs2 is None:
            return lib.vmap(lambda x: lib.vmap(lambda y: cov_func(x, y))(xs))(xs)
        return lib.vmap(lambda x: lib.vmap(lambda y: cov_func(x, y))(xs))(xs2).T

    def exp_quadratic(x1: Any, x2: Any) -> Any:
        return np_.exp(-np_.sum((x1 - x2) ** 2))

    def gp(params: Any, x: Any, y: Any, xtest: Any = None, compute_marginal_likelihood: bool = False) -> Any:
        noise = softplus(params["noise"])
        amp = softplus(params["amplitude"])
        ls = softplus(params["lengthscale"])
        ymean = np_.mean(y)
        y = y - ymean
        x = x / ls
        train_cov = amp * cov_map(exp_quadratic, x) + eye * (noise + 1e-6)
        chol = scipy.linalg.cholesky(train_cov, lower=True)
        kinvy = scipy.linalg.solve_triangular(chol.T, scipy.linalg.solve_triangular(chol, y, lower=True))
        if compute_marginal_likelihood:
            log2pi = np_.log(2. * 3.1415)
            ml = np_.sum(-0.5 * np_.dot(y.T, kinvy) - np_.sum(np_.log(np_.diag(chol))) - (numpts / 2.) * log2pi)
            ml -= np_.sum(-0.5 * np_.log(2 * 3.1415) - np_.log(amp) - np_.log(amp) ** 2)
            return -ml
        if xtest is not None:
            xtest = xtest / ls
        cross_cov = amp * cov_map(exp_quadratic, x, xtest)
        mu = np_.dot(cross_cov.T, kinvy) + ymean
        v = scipy.linalg.solve_triangular(chol, cross_cov, lower=True)
        var = (amp * cov_map(exp_quadratic, xtest) - np_.dot(v.T, v))
        return mu, var

    marginal_likelihood = partial(gp, compute_marginal_likelihood=True)
    predict = partial(gp, compute_marginal_likelihood=False)
    grad_fun = lib.jit(lib.grad(marginal_likelihood))
    params = {"amplitude": np_.zeros((1, 1)), "noise": np_.zeros((1, 1)) - 5., "lengthscale": np_.zeros((1, 1))}
    momentums = dict([(k, p * 0.) for k, p in params.items()])
    scales = dict([(k, p * 0. + 1.) for k, p in params.items()])
    lr = 0.01

    def train_step(params: Any, momentums: Any, scales: Any, x: Any, y: Any) -> Any:
        grads = grad_fun(params, x, y)
        for k in params:
            momentums[k] = 0.9 * momentums[k] + 0.1 * grads[k][0]
            scales[k] = 0.9 * scales[k] + 0.1 * grads[k][0] ** 2
            params[k] -= lr * momentums[k] / np_.sqrt(scales[k] + 1e-5)
        return params, momentums, scales

    def f(x: Any) -> Any:
        return 0.5 * np_.sin(3 * x)

    key, subkey = random.split(key)
    xtrain = np_.abs(random.normal(key, shape=(numpts, 1)))
    ytrain = f(xtrain) + 0.1 * random.normal(subkey, shape=(numpts, 1))
    for _ in range(5):
        params, momentums, scales = train_step(params, momentums, scales, xtrain, ytrain)
    xtest = np_.linspace(-2, 3, 9)[:, None]
    mu, var = predict(params, xtrain, ytrain, xtest)
    return params, marginal_likelihood(params, xtrain, ytrain), mu, np_.diag(var)


PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "mnist_classifier_fromscratch": _mnist_classifier_fromscratch,
    "differentially_private_sgd": _differentially_private_sgd, "kernel_lsq": _kernel_lsq, "mnist_vae": _mnist_vae,
    "gaussian_process_regression": _gaussian_process_regression,
}


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_example_program_matches_jax(name: str, x64: bool) -> None:
    check_program(jax, jnp, PROGRAMS[name], x64, rtol32=2e-4, rtol64=1e-9)
