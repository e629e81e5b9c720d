"""``jax.example_libraries.stax``'s API on fungraph: a layer is an ``(init_fun, apply_fun)``
pair, ``init_fun(rng, input_shape) -> (output_shape, params)`` and
``apply_fun(params, inputs, **kwargs)``; combinators build networks of layers. Keys are split
as JAX's are, so a network initialised from the same key has the same parameters."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from fungraph import lax, random
from fungraph import numpy as jnp
from fungraph.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from fungraph.nn.initializers import glorot_normal, normal, ones, zeros

Layer = tuple[Callable[..., Any], Callable[..., Any]]

glorot = glorot_normal
randn = normal
logsoftmax = log_softmax

_GLOROT, _NORMAL, _TINY_NORMAL = glorot_normal(), normal(), normal(1e-6)


def _no_params(rng: Any, input_shape: Any) -> tuple[Any, tuple]:
    return input_shape, ()


def Dense(out_dim: int, W_init: Callable = _GLOROT, b_init: Callable = _NORMAL) -> Layer:  # noqa: N802, N803
    """A fully connected layer ``inputs @ W + b``."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        k1, k2 = random.split(rng)
        return tuple(input_shape[:-1]) + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params  # noqa: N806
        return jnp.dot(inputs, W) + b

    return init_fun, apply_fun


def _kernel_and_bias_shapes(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                            input_shape: Sequence[int]) -> tuple[list[int], list[int]]:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = iter(filter_shape)
    kernel = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(spatial)
              for c in rhs_spec]
    return kernel, [out_chan if c == "C" else 1 for c in out_spec]


def _conv_layer(transpose: bool) -> Callable[..., Layer]:
    def layer(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
              strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Callable | None = None,  # noqa: N803
              b_init: Callable = _TINY_NORMAL) -> Layer:
        rhs_spec = dimension_numbers[1]
        one = (1,) * len(filter_shape)
        strides = strides or one
        w_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
        shape_tuple = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple

        def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
            kernel_shape, bias_shape = _kernel_and_bias_shapes(dimension_numbers, out_chan, filter_shape, input_shape)
            output_shape = shape_tuple(input_shape, kernel_shape, strides, padding, dimension_numbers)
            k1, k2 = random.split(rng)
            return output_shape, (w_init(k1, kernel_shape), b_init(k2, bias_shape))

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            W, b = params  # noqa: N806
            if transpose:
                return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers) + b
            return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                            dimension_numbers=dimension_numbers) + b

        return init_fun, apply_fun

    return layer


GeneralConv = _conv_layer(transpose=False)
GeneralConvTranspose = _conv_layer(transpose=True)
Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: Any = (0, 1, 2), epsilon: float = 1e-5, center: bool = True, scale: bool = True,  # noqa: N802
              beta_init: Callable = zeros, gamma_init: Callable = ones) -> Layer:
    """Standardise over ``axis`` (batch statistics), then scale by ``gamma`` and shift by ``beta``."""
    axis = (axis,) if jnp.isscalar(axis) else tuple(axis)

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        return input_shape, (beta_init(k1, shape) if center else (), gamma_init(k2, shape) if scale else ())

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        return z + beta[expand] if center else z

    return init_fun, apply_fun


def elementwise(fun: Callable[..., Any], **fun_kwargs: Any) -> Layer:
    """A layer applying ``fun`` to its inputs, without parameters."""
    return _no_params, lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs)


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _non_spatial_axes(spec: str | None, ndim: int) -> tuple[int, int]:
    return (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))


def _pooling_layer(reducer: Callable, init_val: float, average: bool = False) -> Callable[..., Layer]:
    def layer(window_shape: Sequence[int], strides: Sequence[int] | None = None, padding: Any = "VALID",
              spec: str | None = None) -> Layer:
        window, steps = tuple(window_shape), tuple(strides or (1,) * len(window_shape))
        spatial_window, spatial_steps = window, steps
        for i in sorted(_non_spatial_axes(spec, len(window) + 2)):
            window, steps = window[:i] + (1,) + window[i:], steps[:i] + (1,) + steps[i:]

        def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
            pads = lax.padtype_to_pads(input_shape, window, steps, padding)
            ones_ = (1,) * len(window)
            return lax.reduce_window_shape_tuple(input_shape, window, steps, pads, ones_, ones_), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_val, reducer, window, steps, padding)
            if not average:
                return out
            axes = _non_spatial_axes(spec, inputs.ndim)
            spatial = tuple(d for i, d in enumerate(inputs.shape) if i not in axes)
            sizes = lax.reduce_window(jnp.ones(spatial, dtype=inputs.dtype), 0., lax.add, spatial_window,
                                      spatial_steps, padding)
            for i in sorted(axes):
                sizes = jnp.expand_dims(sizes, i)
            return out / sizes

        return init_fun, apply_fun

    return layer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.)
AvgPool = _pooling_layer(lax.add, 0., average=True)

Flatten: Layer = (lambda rng, input_shape: ((input_shape[0], math.prod(input_shape[1:])), ()),
                  lambda params, inputs, **kwargs: jnp.reshape(inputs, (inputs.shape[0], -1)))
Identity: Layer = (_no_params, lambda params, inputs, **kwargs: inputs)
FanInSum: Layer = (lambda rng, input_shape: (input_shape[0], ()), lambda params, inputs, **kwargs: sum(inputs))


def FanOut(num: int) -> Layer:  # noqa: N802
    """``num`` copies of the input, for :func:`parallel`."""
    return (lambda rng, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kwargs: [inputs] * num)


def FanInConcat(axis: int = -1) -> Layer:  # noqa: N802
    """The inputs concatenated along ``axis``."""
    def init_fun(rng: Any, input_shape: Sequence[Sequence[int]]) -> tuple:
        ax = axis % len(input_shape[0])
        first = tuple(input_shape[0])
        return first[:ax] + (sum(s[ax] for s in input_shape),) + first[ax + 1:], ()

    return init_fun, lambda params, inputs, **kwargs: jnp.concatenate(inputs, axis)


def Dropout(rate: float, mode: str = "train") -> Layer:  # noqa: N802
    """Keeps each input with probability ``rate`` (scaled by ``1 / rate``) in ``"train"`` mode,
    JAX's convention; ``apply_fun`` needs ``rng=``."""
    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key argument. That is, "
                             "instead of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, rng)` "
                             "where `rng` is a PRNG key (e.g. from `fungraph.random.key`).")
        if mode != "train":
            return inputs
        return jnp.where(random.bernoulli(rng, rate, inputs.shape), inputs / rate, 0)

    return _no_params, apply_fun


def _layer_keys(kwargs: dict, count: int) -> Sequence[Any]:
    rng = kwargs.pop("rng", None)
    return random.split(rng, count) if rng is not None else (None,) * count


def serial(*layers: Layer) -> Layer:
    """The layers one after another."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        for fun, param, rng in zip(apply_funs, params, _layer_keys(kwargs, len(layers))):
            inputs = fun(param, inputs, rng=rng, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """The layers side by side, each on its own input of a sequence (see :func:`FanOut`)."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng: Any, input_shape: Any) -> Any:
        rngs = random.split(rng, len(layers))
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> list:
        return [f(p, x, rng=r, **kwargs)
                for f, p, x, r in zip(apply_funs, params, inputs, _layer_keys(kwargs, len(layers)))]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """A layer built from the input shape when it is known."""
    return ((lambda rng, input_shape: make_layer(input_shape)[0](rng, input_shape)),
            (lambda params, inputs, **kwargs: make_layer(inputs.shape)[1](params, inputs, **kwargs)))
