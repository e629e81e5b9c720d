"""``fungraph.nn.initializers``: ``jax.nn.initializers``' weight initializers.

A builder (``glorot_uniform()``, ``variance_scaling(...)``, ...) returns an :class:`Initializer`,
``init(key, shape, dtype)``; ``zeros`` and ``ones`` are initializers themselves. The default dtype
is the current mode's default float (``dtypes.default_float()``), as JAX's. Samples are drawn
with ``fungraph.random`` and scaled as JAX scales them, so initializers built on ``uniform`` match
JAX bit for bit and those built on ``normal``/``truncated_normal`` to a few ulp. ``orthogonal``
makes the diagonal of R in the QR of a normal draw positive, which makes the factorization
unique: it agrees with JAX up to the rounding of the two QR implementations.
Sharding (JAX's ``out_sharding``) is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph import random as fr
from fungraph._random_args import _shape as _checked_shape
from fungraph.primitives import elementwise as ew

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
           "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform",
           "zeros"]

Axes = int | Sequence[int]

_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")
# The standard deviation of a standard normal truncated to (-2, 2).
_TRUNCATED_STD = 0.87962566103423978
# JAX's divisor for a complex normal with modulus truncated at 2. The exact value is
# sqrt((1 - 5 e^-4) / (1 - e^-4)) = 0.96196..., so JAX's (and these) samples have a variance about
# 2% above the target; the constant is kept so that values agree with JAX's.
_TRUNCATED_MODULUS_STD = 0.95311164380491208


@runtime_checkable
class Initializer(Protocol):
    """What the builders return: ``init(key, shape, dtype)``, an array of ``shape`` drawn with ``key``."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None) -> Any: ...


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An array of zeros; the key is ignored."""
    return fnp.zeros(_shape(shape, "zeros"), _any_dtype(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An array of ones; the key is ignored."""
    return fnp.ones(_shape(shape, "ones"), _any_dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """Arrays filled with ``value`` (broadcast to the shape); ``dtype`` is the initializer's default."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return fnp.full(_shape(shape, "constant"), value, _any_dtype(dtype))

    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Uniform samples in [0, scale)."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _inexact_dtype(dtype, "uniform", complex_ok=False)
        return fnp.multiply(fr.uniform(key, _shape(shape, "uniform"), dt), fnp.asarray(scale, dtype=dt))

    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Normal samples with mean 0 and standard deviation ``stddev`` (complex dtypes allowed)."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _inexact_dtype(dtype, "normal", complex_ok=True)
        return fnp.multiply(fr.normal(key, _shape(shape, "normal"), dt), fnp.asarray(stddev, dtype=dt))

    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0, upper: Any = 2.0) -> Initializer:
    """Standard normal samples truncated to (lower, upper), then multiplied by ``stddev`` (which is
    therefore the standard deviation before truncation, as in JAX)."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dt = _inexact_dtype(dtype, "truncated_normal", complex_ok=False)
        draw = fr.truncated_normal(key, lower, upper, _shape(shape, "truncated_normal"), dt)
        return fnp.multiply(draw, fnp.asarray(stddev, dtype=dt))

    return init


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Axes = -2, out_axis: Axes = -1,
                     batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Samples with mean 0 and variance ``scale / n``, ``n`` the fan given by ``mode`` (``fan_in``,
    ``fan_out``, their mean ``fan_avg`` or geometric mean ``fan_geo_avg``). Axes outside ``in_axis``,
    ``out_axis`` and ``batch_axis`` form the receptive field, which multiplies both fans.
    ``distribution`` is ``truncated_normal`` (at two standard deviations, rescaled to the target
    variance), ``normal`` or ``uniform`` (an interval, or a disk for complex dtypes). A shape with
    a zero dimension gives an empty array (JAX divides by its zero fan)."""
    if mode not in _MODES:
        raise ValueError(f"variance_scaling: mode must be one of {', '.join(_MODES)}; got {mode!r}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling: distribution must be one of {', '.join(_DISTRIBUTIONS)}; "
                         f"got {distribution!r}")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape, "variance_scaling")
        dt = _inexact_dtype(dtype, "variance_scaling", complex_ok=True)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt)
        variance = np.asarray(scale / _fan(mode, fan_in, fan_out), dtype=dt)
        is_complex = dtypes.is_complex(dt)
        if distribution == "normal":
            return fnp.multiply(fr.normal(key, shape, dt), np.sqrt(variance))
        if distribution == "uniform" and not is_complex:
            return fnp.multiply(fr.uniform(key, shape, dt, -1), np.sqrt(3 * variance))
        if distribution == "uniform":
            return fnp.multiply(_complex_disk(key, shape, dt), np.sqrt(variance))
        if not is_complex:
            stddev = np.sqrt(variance) / np.asarray(_TRUNCATED_STD, dt)
            return fnp.multiply(fr.truncated_normal(key, -2, 2, shape, dt), stddev)
        stddev = np.sqrt(variance) / np.asarray(_TRUNCATED_MODULUS_STD, dt)
        return fnp.multiply(_complex_truncated_normal(key, 2.0, shape, dt), stddev)

    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Glorot (Xavier) uniform: ``variance_scaling(1.0, "fan_avg", "uniform")``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Glorot (Xavier) normal: ``variance_scaling(1.0, "fan_avg", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """LeCun uniform: ``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """LeCun normal: ``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """He (Kaiming) uniform: ``variance_scaling(2.0, "fan_in", "uniform")``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """He (Kaiming) normal: ``variance_scaling(2.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """``scale`` times a uniformly random (semi-)orthogonal matrix, unitary for complex dtypes: the
    shape is read as a matrix whose columns lie along ``column_axis`` and whose rows are all the
    other axes; the rows or the columns, whichever are fewer, are orthonormal."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape, "orthogonal")
        dt = _inexact_dtype(dtype, "orthogonal", complex_ok=True)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: shape {shape} has {len(shape)} dimensions; it needs at least 2")
        axis = _axis(column_axis, shape, "orthogonal", "column_axis")
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt)
        n_cols = shape[axis]
        rows = shape[:axis] + shape[axis + 1:]
        q = fr.orthogonal(key, math.prod(rows), (), dt, n_cols)
        q = fnp.moveaxis(fnp.reshape(q, (*rows, n_cols)), -1, axis)
        return fnp.multiply(fnp.asarray(scale, dtype=dt), q)

    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """A convolution kernel (1-, 2- or 3-D spatial axes, then in and out channels) that is zero
    except at the spatial centre, which holds ``orthogonal(scale, column_axis)`` of the channels:
    the convolution then preserves norms at initialization (Xiao et al. 2018)."""

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape, "delta_orthogonal")
        dt = _inexact_dtype(dtype, "delta_orthogonal", complex_ok=True)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: shape {shape} has {len(shape)} dimensions; it needs 3, 4 or 5 "
                             "(spatial axes, then input and output channels)")
        if shape[-1] < shape[-2]:
            raise ValueError(f"delta_orthogonal: shape {shape} has more input channels ({shape[-2]}) than output "
                             f"channels ({shape[-1]}); fan_in must not exceed fan_out")
        _axis(column_axis, shape[-2:], "delta_orthogonal", "column_axis")
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt)
        centre = orthogonal(scale, column_axis, dt)(key, shape[-2:])
        spatial = shape[:-2]
        widths = [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in spatial] + [(0, 0), (0, 0)]
        return fnp.pad(fnp.reshape(centre, (1,) * len(spatial) + shape[-2:]), widths)

    return init


def _fans(shape: tuple[int, ...], in_axis: Axes, out_axis: Axes, batch_axis: Axes) -> tuple[float, float]:
    """The input and output sizes, each multiplied by the receptive field (the size of every axis
    outside the three groups), in JAX's float arithmetic so that the variance rounds the same."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) < 2:
        raise ValueError(f"variance_scaling: cannot compute the fans of the {len(shape)}-D shape {shape} with the "
                         "default in_axis=-2: give a shape of at least 2 dimensions, or in_axis and out_axis")
    in_size = _axes_size(shape, in_axis, "in_axis")
    out_size = _axes_size(shape, out_axis, "out_axis")
    batch_size = _axes_size(shape, batch_axis, "batch_axis")
    if math.prod(shape) == 0:
        return 0.0, 0.0
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def _axes_size(shape: tuple[int, ...], axes: Axes, arg: str) -> int:
    if isinstance(axes, (int, np.integer)):
        return shape[_axis(axes, shape, "variance_scaling", arg)]
    if not isinstance(axes, Sequence):
        raise TypeError(f"variance_scaling: {arg} must be an int or a sequence of ints, got {axes!r}")
    return math.prod(shape[_axis(a, shape, "variance_scaling", arg)] for a in axes)


def _fan(mode: str, fan_in: float, fan_out: float) -> float:
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    if mode == "fan_avg":
        return (fan_in + fan_out) / 2
    return (fan_in * fan_out) ** 0.5


def _axis(axis: Any, shape: tuple[int, ...], name: str, arg: str) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{name}: {arg} must be an int, got {axis!r}")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{name}: {arg}={axis} is out of range for the {len(shape)}-D shape {shape}")
    return int(axis) % len(shape)


def _shape(shape: Any, name: str) -> tuple[int, ...]:
    return _checked_shape((shape,) if isinstance(shape, (int, np.integer)) else shape, name, prefix="")


def _any_dtype(dtype: Any) -> np.dtype:
    return dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)


def _inexact_dtype(dtype: Any, name: str, complex_ok: bool) -> np.dtype:
    dt = _any_dtype(dtype)
    if dtypes.is_float(dt) or complex_ok and dtypes.is_complex(dt):
        return dt
    allowed = "a float or complex dtype" if complex_ok else "float32 or float64"
    raise TypeError(f"{name}: dtype must be {allowed}, got {dt}")


def _polar(key_theta: Any, radius: Any, dt: np.dtype) -> Any:
    """``radius * exp(i theta)``, ``theta`` uniform in [0, 2 pi) drawn with ``key_theta``."""
    theta = fnp.multiply(np.asarray(2 * np.pi, radius.dtype), fr.uniform(key_theta, radius.shape, radius.dtype))
    return fnp.asarray(ew.complex_(fnp.multiply(radius, fnp.cos(theta)), fnp.multiply(radius, fnp.sin(theta))),
                       dtype=dt)


def _complex_disk(key: Any, shape: tuple[int, ...], dt: np.dtype) -> Any:
    """Uniform samples in the disk of radius sqrt(2), whose mean square modulus is one."""
    key_r, key_theta = fr.split(key)
    real = dtypes.real_for(dt)
    radius = fnp.sqrt(fnp.multiply(np.asarray(2, real), fr.uniform(key_r, shape, real)))
    return _polar(key_theta, radius, dt)


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...], dt: np.dtype) -> Any:
    """Complex normal samples (mean square modulus one) conditioned on a modulus below ``upper``:
    the squared modulus is exponential, drawn by inverting its truncated distribution function
    (``log(1 - t)`` rather than ``log1p(-t)``: JAX's rounding, which matters for small ``t``)."""
    key_r, key_theta = fr.split(key)
    real = dtypes.real_for(dt)
    mass = np.asarray(1, real) - np.exp(np.asarray(-upper**2, real))
    t = fnp.multiply(mass, fr.uniform(key_r, shape, real))
    radius = fnp.sqrt(fnp.negative(fnp.log(fnp.subtract(np.asarray(1, real), t))))
    return _polar(key_theta, radius, dt)

