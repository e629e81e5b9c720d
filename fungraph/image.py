"""``fungraph.image``: image resampling, as ``jax.image``.

Every method but nearest is a separable linear map: for each resized axis a weight matrix
(input size x output size) built from a kernel evaluated at the distances between input pixel
centres and the output samples mapped back into the input, then contracted with the image.
The weights are ordinary ``fungraph.numpy`` arrays, so ``grad`` (also with respect to
``scale_and_translate``'s ``scale`` and ``translation``), ``vmap`` and ``jit`` come from the
operations they are built of. Pixels are half-centred: pixel ``i`` sits at ``i + 0.5``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph import numpy as fnp
from fungraph.lax import Precision
from fungraph.primitives.operands import normalize_axes

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Image resize method (``jax.image.ResizeMethod``): NEAREST, LINEAR (triangle), LANCZOS3,
    LANCZOS5, CUBIC (Keys, a = -0.5), CUBIC_PYTORCH (a = -0.75 with repeated edges when not
    antialiasing) and AREA (the overlap of pixel intervals)."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method a string names, with JAX's aliases (``"bilinear"``, ``"tricubic"``, ...)."""
        for method, names in _NAMES.items():
            if s in names:
                return method
        raise ValueError(f'Unknown resize method "{s}"')


_NAMES = {
    ResizeMethod.NEAREST: ("nearest",),
    ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
    ResizeMethod.LANCZOS3: ("lanczos3",),
    ResizeMethod.LANCZOS5: ("lanczos5",),
    ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
    ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"),
    ResizeMethod.AREA: ("area",),
}


def _method(method: str | ResizeMethod) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"resize method must be a string or a ResizeMethod, got {method!r}")
    return method


# --- kernels: weights as functions of the (scaled) distance |x| -----------------------------------


def _lanczos(radius: float) -> Callable[[Any], Any]:
    def kernel(x: Any) -> Any:
        y = radius * fnp.sin(np.pi * x) * fnp.sin(np.pi * x / radius)
        out = fnp.where(x > 1e-3, y / fnp.where(x != 0, np.pi**2 * x**2, 1), 1)
        return fnp.where(x > radius, 0.0, out)

    return kernel


def _keys_cubic(x: Any) -> Any:
    """Keys' cubic convolution kernel with a = -0.5 (Pillow's, TensorFlow's, antialiased PyTorch's)."""
    out = ((1.5 * x - 2.5) * x) * x + 1.0
    out = fnp.where(x >= 1.0, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0, out)
    return fnp.where(x >= 2.0, 0.0, out)


def _opencv_cubic(x: Any) -> Any:
    """The cubic kernel with a = -0.75 (OpenCV's, PyTorch's without antialiasing)."""
    a = -0.75
    out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    out = fnp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
    return fnp.where(x >= 2.0, 0.0, out)


def _triangle(x: Any) -> Any:
    return fnp.maximum(0, 1 - fnp.abs(x))


_AREA = None  # AREA has no kernel: its weights are interval overlaps

_KERNELS: dict[ResizeMethod, tuple[int, Callable[[Any], Any] | None]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, _AREA),
}

_MIN_TOTAL = 1000.0 * float(np.finfo(np.float32).eps)


def _normalize(weights: Any) -> Any:
    """Columns scaled to sum to one; a column whose weights (nearly) cancel becomes zero."""
    total = fnp.sum(weights, axis=0, keepdims=True)
    return fnp.where(fnp.abs(total) > _MIN_TOTAL, weights / fnp.where(total != 0, total, 1), 0)


def _area_weights(input_size: int, output_size: int, inv_scale: Any, translation: Any, dtype: Any) -> Any:
    left_out = fnp.arange(output_size, dtype=dtype) * inv_scale - translation * inv_scale
    right_out = left_out + inv_scale
    left_in = fnp.arange(input_size, dtype=dtype)
    overlap = fnp.minimum(right_out[None, :], left_in[:, None] + 1.0) - fnp.maximum(left_out[None, :], left_in[:, None])
    return fnp.maximum(0.0, overlap)


def _weight_matrix(input_size: int, output_size: int, scale: Any, translation: Any,
                   kernel: Callable[[Any], Any] | None, antialias: bool, edge_radius: int | None) -> Any:
    """The (input_size, output_size) resampling weights of one axis. ``edge_radius`` (CUBIC_PYTORCH
    without antialiasing) evaluates the kernel that far past each edge and folds those weights
    onto the edge pixels; otherwise samples outside the input get zero weight."""
    dtype = fnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    kernel_scale = fnp.maximum(inv_scale, 1.0) if antialias else 1.0
    sample = (fnp.arange(output_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    k = edge_radius or 0
    positions = fnp.arange(-k, input_size + k, dtype=dtype)
    if kernel is _AREA:
        weights = _area_weights(input_size, output_size, inv_scale, translation, dtype)
    else:
        weights = kernel(fnp.abs(sample[None, :] - positions[:, None]) / kernel_scale)
    if edge_radius:
        rows = np.clip(np.arange(-k, input_size + k), 0, input_size - 1)
        folded = fnp.zeros((input_size, output_size), dtype=weights.dtype)
        folded = folded.at[rows[:, None], np.arange(output_size)[None, :]].add(weights)
        return _normalize(folded)
    inside = fnp.logical_and(sample >= -0.5, sample <= input_size - 0.5)
    return fnp.where(inside[None, :], _normalize(weights), 0)


def _contract(x: Any, out_shape: tuple[int, ...], axes: Sequence[int], scales: Sequence[Any],
              translations: Sequence[Any], method: ResizeMethod, antialias: bool, precision: Any) -> Any:
    radius, kernel = _KERNELS[method]
    edge_radius = radius if method == ResizeMethod.CUBIC_PYTORCH and not antialias else None
    for axis, scale, translation in zip(axes, scales, translations):
        w = _weight_matrix(x.shape[axis], out_shape[axis], scale, translation, kernel, antialias, edge_radius)
        moved = fnp.tensordot(x, w.astype(x.dtype), axes=([axis], [0]), precision=precision)
        x = fnp.moveaxis(moved, -1, axis)
    return x


def _out_shape(image: Any, shape: Sequence[int], name: str) -> tuple[int, ...]:
    try:
        out = tuple(int(n) for n in shape)
    except TypeError as e:
        raise TypeError(f"{name}: shape must be a sequence of integers, got {shape!r}") from e
    if len(out) != image.ndim:
        raise ValueError(f"{name}: shape must have length equal to the number of dimensions of x; "
                         f"{out} vs {image.shape}")
    if any(n < 0 for n in out):
        raise ValueError(f"{name}: shape must not be negative, got {out}")
    return out


def _inexact(image: Any) -> Any:
    x = fnp.asarray(image)
    return x if dtypes.is_inexact(x.dtype) else x.astype(dtypes.float_dtype_for(x.dtype))


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int], scale: Any,
                        translation: Any, method: str | ResizeMethod, antialias: bool = True,
                        precision: Any = Precision.HIGHEST) -> Any:
    """Resample ``image`` to ``shape`` so that input location ``y`` along ``spatial_dims[i]`` lands
    at ``y * scale[i] + translation[i]`` (``jax.image.scale_and_translate``); samples that map
    outside the input are zero. ``antialias`` widens the kernel when downsampling."""
    x = fnp.asarray(image)
    out = _out_shape(x, shape, "scale_and_translate")
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    axes = [int(d) for d in spatial_dims]
    scale, translation = fnp.asarray(scale), fnp.asarray(translation)
    if scale.shape != (len(axes),) or translation.shape != (len(axes),):
        raise ValueError(f"scale_and_translate: scale {scale.shape} and translation {translation.shape} "
                         f"need one entry per spatial dimension {tuple(axes)}")
    axes = list(normalize_axes(axes, x.ndim, "scale_and_translate")) if axes else []
    if not axes:
        return x
    dtype = dtypes.float_dtype_for(fnp.result_type(scale, translation))
    scale, translation = scale.astype(dtype), translation.astype(dtype)
    return _contract(_inexact(x), out, axes, [scale[i] for i in range(len(axes))],
                     [translation[i] for i in range(len(axes))], method, antialias, precision)


def _resize_nearest(x: Any, out: tuple[int, ...]) -> Any:
    """Each output pixel takes the input pixel under its centre, located in float32 as JAX does."""
    for axis, (m, n) in enumerate(zip(x.shape, out)):
        if m == n:
            continue
        centres = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m) / np.float32(n)
        x = fnp.take(x, np.floor(centres).astype(np.int32), axis=axis, mode="clip")
    return x


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision: Any = Precision.HIGHEST) -> Any:
    """``image`` resampled to ``shape`` (every axis, batch and channel axes included: keep their
    sizes to leave them alone), as ``jax.image.resize``. NEAREST keeps the dtype; the other
    methods promote to a floating type."""
    x = fnp.asarray(image)
    out = _out_shape(x, shape, "resize")
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(x, out)
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    axes = [d for d in range(x.ndim) if x.shape[d] != out[d]]
    scales = [1.0 if out[d] == 0 else out[d] / x.shape[d] for d in axes]
    return _contract(_inexact(x), out, axes, scales, [0.0] * len(axes), method, antialias, precision)
