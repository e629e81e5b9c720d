"""``fungraph.random``: ``jax.random``'s functional PRNG, bit-exact with JAX's default threefry2x32.

A raw key (``PRNGKey``) is a uint32 array of shape (2,) holding two words, exactly the words of
JAX's legacy ``jax.random.PRNGKey``; ``key`` returns a typed key array (``fungraph._key_array``)
of shape () and dtype ``key<fry>`` over the same words, as JAX's ``jax.random.key``. Every
function takes either kind, draws the same numbers from both, and ``split``/``fold_in``/``clone``
return keys of the kind they were given. In JAX's 32-bit mode (``jax_enable_x64`` off) each
sampler takes its dtype in that mode and computes its bits in 64-bit words, so draws match JAX's
32-bit mode as they match its x64 mode. Every function is written with ``fungraph.numpy``
operations, so keys may be traced (``jit``, ``vmap`` over split keys, OpenCL).

The bits, ``split``, ``fold_in``, ``uniform``, ``bernoulli``, ``randint``, ``permutation`` and
``choice`` match JAX (``jax_enable_x64``) bit for bit, and so do float64 ``gumbel`` and
``categorical`` in the tests. Samplers that pass uniforms through ``log1p``, ``erf``/``erfinv`` or
a float32 ``log`` (``normal``, ``truncated_normal``, ``exponential``, float32 ``gumbel``) use JAX's
formulas, but XLA's CPU backend has its own ``log1p`` and float32 ``log`` and fuses multiply-adds,
so their floats can differ from JAX's in the last few bits.

The distribution samplers use JAX's formulas and key splitting as well. ``rademacher`` and
``geometric`` agree bit for bit; the other closed-form transforms of uniform, normal and exponential
draws (``laplace``, ``logistic``, ``cauchy``, ``maxwell``, ``double_sided_maxwell``, ``weibull_min``,
``pareto``, ``rayleigh``, ``wald``, ``triangular``, ``lognormal``) to a few ulp, more where the
formula cancels (``wald``) or raises to a power (``weibull_min``). The rejection samplers and those
built on them (``gamma``, ``poisson``, ``binomial``, ...) are in ``fungraph._random_dists``;
the keys and closed-form samplers in ``fungraph._random_samplers``, the argument checks in
``fungraph._random_args`` and the exact arithmetic they share in ``fungraph._random_arith``.
Parameters outside their domain are refused, naming them, when they are concrete; traced ones
give what JAX gives (mostly nan). ``key_data`` gives a key array's words (a raw key is its own),
``wrap_key_data`` makes typed keys of uint32 words and ``key_impl`` names the PRNG.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph._key_array import KeyArray
from fungraph._random_dists import (
    ball,
    beta,
    binomial,
    chisquare,
    dirichlet,
    f,
    gamma,
    generalized_normal,
    loggamma,
    multinomial,
    multivariate_normal,
    orthogonal,
    poisson,
    t,
)
from fungraph._random_samplers import (
    CALLER_MODE,
    PRNGKey,
    bernoulli,
    bits,
    categorical,
    cauchy,
    choice,
    clone,
    double_sided_maxwell,
    exponential,
    fold_in,
    geometric,
    gumbel,
    key,
    key_data,
    key_dtype,
    key_impl,
    laplace,
    logistic,
    lognormal,
    maxwell,
    normal,
    pareto,
    permutation,
    rademacher,
    randint,
    rayleigh,
    split,
    triangular,
    truncated_normal,
    uniform,
    wald,
    weibull_min,
    wrap_key_data,
)
from fungraph.numpy._util import aval
from fungraph.tree_util import tree_map

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare", "choice",
           "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in", "gamma", "generalized_normal",
           "geometric", "gumbel", "key", "key_data", "key_dtype", "key_impl", "laplace", "loggamma", "logistic",
           "lognormal",
           "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto", "permutation", "poisson",
           "rademacher", "randint", "rayleigh", "split", "t", "triangular", "truncated_normal", "uniform", "wald",
           "weibull_min", "wrap_key_data"]

_KEYS = ("PRNGKey", "key", "split", "fold_in", "clone", "key_data", "wrap_key_data")


def _to_mode(x: Any) -> Any:
    """A sampler's output in the current mode: 64-bit arrays narrowed with x64 off."""
    dt = aval(x).dtype
    return x if dt in dtypes.enabled() else fnp.asarray(x, dtype=dtypes.canonicalize(dt))


def _uint32_keys(keys: Any) -> Any:
    """Keys, typed or raw, over uint32 words."""
    if isinstance(keys, KeyArray):
        return KeyArray(fnp.asarray(keys.words, dtype=dtypes.uint32), keys.dtype)
    return fnp.asarray(keys, dtype=dtypes.uint32)


def _in_either_mode(f: Callable[..., Any], is_key: bool) -> Callable[..., Any]:
    """``f`` in JAX's 32-bit mode too: its ``dtype`` argument (or default) is taken in the caller's
    mode (float32/int32 with x64 off, JAX's warning for an explicit 64-bit one), then the bits
    are computed in the 64-bit words the samplers are written in and the result narrowed, so
    draws match JAX's 32-bit mode bit for bit. Keys come out as uint32, as JAX's."""
    sig = inspect.signature(f)
    param = None if is_key else sig.parameters.get("dtype")

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        if dtypes.x64_enabled():
            out = f(*args, **kwargs)
            return _uint32_keys(out) if is_key else out
        bound = sig.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            if type(value) is float:
                bound.arguments[name] = np.float32(value)
            elif name == "seed" and type(value) is int:
                bound.arguments[name] = np.asarray(value % 2**32, np.uint32).astype(np.int32)
        if param is not None:
            given = bound.arguments.get("dtype", param.default)
            if given is not None:
                explicit = "dtype" in bound.arguments
                bound.arguments["dtype"] = dtypes.canonicalize(given, "" if explicit else None)
        args, kwargs = bound.args, bound.kwargs
        previous = dtypes.set_x64_override(True)
        CALLER_MODE.int_dtype, CALLER_MODE.float_dtype = dtypes.int32, dtypes.float32
        try:
            out = f(*args, **kwargs)
        finally:
            dtypes.set_x64_override(previous)
            CALLER_MODE.int_dtype, CALLER_MODE.float_dtype = dtypes.int64, dtypes.float64
        if is_key:
            return _uint32_keys(out)
        return tree_map(_to_mode, out)

    return run


for _name in __all__:
    if _name not in ("key_impl", "key_dtype"):
        globals()[_name] = _in_either_mode(globals()[_name], _name in _KEYS)
