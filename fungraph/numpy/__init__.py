"""``fungraph.numpy``: numpy's API over traced and concrete arrays (like ``jax.numpy``).

Outside any transformation the functions run eagerly and return numpy arrays.
"""

from fungraph.dtypes import bool_, float32, float64, int32, int64
from fungraph.numpy import _methods
from fungraph.numpy._creation import (
    arange,
    array,
    eye,
    full,
    full_like,
    identity,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from fungraph.numpy._creation import asarray_ as asarray
from fungraph.numpy._elementwise import (
    abs,
    absolute,
    add,
    arctan,
    arctan2,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    clip,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    invert,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    power,
    reciprocal,
    remainder,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from fungraph.numpy._indexing import take, take_along_axis
from fungraph.numpy._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from fungraph.numpy._reductions import all, amax, amin, any, argmax, argmin, max, mean, min, prod, std, sum, var
from fungraph.numpy._shape import (
    astype,
    broadcast_arrays,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ravel,
    reshape,
    squeeze,
    stack,
    swapaxes,
    transpose,
)

_methods.install()

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None

__all__ = [name for name in dir() if not name.startswith("_")]
