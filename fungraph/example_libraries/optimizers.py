"""``jax.example_libraries.optimizers``'s API on fungraph: each optimizer is an
``(init_fun, update_fun, get_params)`` triple over pytrees of parameters, with the same update
formulas, schedules and state packing as JAX's, so training loops written for it run unchanged.

An optimizer is declared per array (:func:`optimizer` lifts it to pytrees); its state is an
:class:`OptimizerState` pytree, so it passes through ``jit`` and ``vmap``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from fungraph import numpy as jnp
from fungraph import tree_util

Schedule = Callable[[Any], Any]


class OptimizerState(NamedTuple):
    """The flat per-array states, the parameters' tree and each state's own tree."""

    packed_state: Any
    tree_def: Any
    subtree_defs: Any


tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


class Optimizer(NamedTuple):
    init_fn: Callable[[Any], OptimizerState]
    update_fn: Callable[[Any, Any, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Any]


def _flatten_all(trees: list[Any]) -> tuple[list[Any], tuple[Any, ...]]:
    pairs = [tree_util.tree_flatten(t) for t in trees]
    return [p[0] for p in pairs], tuple(p[1] for p in pairs)


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lift an optimizer written for single arrays (``init(x0)``, ``update(i, g, state)``,
    ``get_params(state)``) to pytrees of parameters."""

    @functools.wraps(opt_maker)
    def make(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree: Any) -> OptimizerState:
            leaves, tree = tree_util.tree_flatten(x0_tree)
            states, subtrees = _flatten_all([init(x) for x in leaves])
            return OptimizerState(states, tree, subtrees)

        def tree_update(i: Any, grad_tree: Any, opt_state: OptimizerState) -> OptimizerState:
            states_flat, tree, subtrees = opt_state
            grads, grad_tree_def = tree_util.tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError("optimizer update function was passed a gradient tree that did not match the "
                                f"parameter tree structure with which it was initialized: parameter tree {tree} "
                                f"and grad tree {grad_tree_def}.")
            states = [tree_util.tree_unflatten(d, s) for d, s in zip(subtrees, states_flat)]
            new_flat, new_subtrees = _flatten_all([update(i, g, s) for g, s in zip(grads, states)])
            for old, new in zip(subtrees, new_subtrees):
                if old != new:
                    raise TypeError("optimizer update function produced an output structure that did not match "
                                    f"its input structure: input {old} and output {new}.")
            return OptimizerState(new_flat, tree, subtrees)

        def tree_get_params(opt_state: OptimizerState) -> Any:
            states_flat, tree, subtrees = opt_state
            return tree_util.tree_unflatten(
                tree, [get_params(tree_util.tree_unflatten(d, s)) for d, s in zip(subtrees, states_flat)])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return make


def _first(state: Any) -> Any:
    return state[0]


def _with_zeros(count: int) -> Callable[[Any], tuple]:
    """An ``init`` keeping the parameters and ``count`` zero accumulators shaped like them."""
    return lambda x0: (x0,) + tuple(jnp.zeros_like(x0) for _ in range(count))


@optimizer
def sgd(step_size: float | Schedule) -> tuple:
    """Stochastic gradient descent."""
    lr = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - lr(i) * g), (lambda x: x)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple:
    """Heavy-ball momentum."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - lr(i) * velocity, velocity

    return _with_zeros(1), update, _first


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple:
    """Nesterov's accelerated gradient."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - lr(i) * (mass * velocity + g), velocity

    return _with_zeros(1), update, _first


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """Adagrad with momentum on the scaled gradient."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        scale = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * scale) + momentum * m
        return x - lr(i) * m, g_sq, m

    return _with_zeros(2), update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple:
    """RMSProp."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        return x - lr(i) * g / jnp.sqrt(avg_sq + eps), avg_sq

    return _with_zeros(1), update, _first


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple:
    """RMSProp with momentum on the scaled step."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + lr(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return _with_zeros(2), update, _first


def _bias_correction(beta: float, like: Any, i: Any) -> Any:
    return 1 - jnp.asarray(beta, like.dtype) ** (i + 1)


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """Adam (Kingma and Ba)."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / _bias_correction(b1, m, i)
        v_hat = v / _bias_correction(b2, m, i)
        return x - lr(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return _with_zeros(2), update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """AdaMax, Adam's infinity-norm variant."""
    lr = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        return x - (lr(i) / _bias_correction(b1, m, i)) * m / (u + eps), m, u

    return _with_zeros(2), update, _first


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """SM3 (Anil et al.): one accumulator per axis of each parameter."""
    lr = make_schedule(step_size)

    def along(ndim: int, v: Any, axis: int) -> Any:
        return v[tuple(slice(None) if d == axis else None for d in range(ndim))]

    def init(x0: Any) -> tuple:
        shape = jnp.shape(x0)
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape], shape

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, vs, shape = state
        accum = functools.reduce(jnp.minimum, [along(g.ndim, v, k) for k, v in enumerate(vs)]) + jnp.square(g)
        scale = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * scale) + momentum * m
        others = [tuple(d for d in range(x.ndim) if d != k) for k in range(x.ndim)]
        return x - lr(i) * m, m, [jnp.max(accum, axis=axes) for axes in others], shape

    return init, update, lambda state: jnp.reshape(state[0], state[3])


def constant(step_size: Any) -> Schedule:
    return lambda i: step_size


def exponential_decay(step_size: Any, decay_steps: Any, decay_rate: Any) -> Schedule:
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size: Any, decay_steps: Any, decay_rate: Any, staircase: bool = False) -> Schedule:
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size: Any, decay_steps: Any, final_step_size: Any, power: float = 1.0) -> Schedule:
    def schedule(step_num: Any) -> Any:
        fraction = 1 - jnp.minimum(step_num, decay_steps) / decay_steps
        return fraction ** power * (step_size - final_step_size) + final_step_size

    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """``values[k]`` after ``k`` of the ``boundaries`` are passed (one more value than boundaries)."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule: Any) -> Schedule:
    """A schedule as it is; a scalar step size as a constant schedule."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


def l2_norm(tree: Any) -> Any:
    """The Euclidean norm of all the leaves of ``tree`` together."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tree_util.tree_leaves(tree)))


def clip_grads(grad_tree: Any, max_norm: Any) -> Any:
    """``grad_tree`` scaled down to norm ``max_norm`` where its norm exceeds it."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of :func:`unpack_optimizer_state`'s tree holding one parameter's state."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as a plain pytree (the parameters' tree of :class:`JoinPoint`), e.g. to pickle."""
    states_flat, tree_def, subtree_defs = opt_state
    return tree_util.tree_unflatten(
        tree_def, [JoinPoint(tree_util.tree_unflatten(d, s)) for d, s in zip(subtree_defs, states_flat)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of :func:`unpack_optimizer_state`."""
    points, tree_def = tree_util.tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(p, JoinPoint) for p in points):
        raise TypeError("pack_optimizer_state takes the tree made by unpack_optimizer_state")
    states_flat, subtree_defs = _flatten_all([p.subtree for p in points])
    return OptimizerState(states_flat, tree_def, subtree_defs)
