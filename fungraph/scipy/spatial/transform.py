"""``fungraph.scipy.spatial.transform``: ``Rotation`` and ``Slerp`` as ``jax.scipy.spatial.transform``
defines them.

A ``Rotation`` is a named tuple of unit quaternions ``quat`` (scalar last, shape (4,) for one
rotation or (N, 4)), so it is a pytree that passes through ``jit``, ``grad`` and ``vmap``. The
conversions are written over the last axis with ``fungraph.numpy``, batched over any leading
axes, where JAX vectorizes a per-quaternion function; the formulas are SciPy's.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import numpy as jnp
from fungraph.numpy._util import promote

__all__ = ["Rotation", "Slerp"]


# --- quaternion arithmetic over the last axis -------------------------------------------------


def _norm(v: Any) -> Any:
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(quat: Any) -> Any:
    return quat / _norm(quat)[..., None]


def _compose(p: Any, q: Any) -> Any:
    """The Hamilton product ``p q``: the rotation ``q`` followed by ``p``."""
    cross = jnp.cross(p[..., :3], q[..., :3])
    vector = p[..., 3:] * q[..., :3] + q[..., 3:] * p[..., :3] + cross
    scalar = p[..., 3] * q[..., 3] - jnp.sum(p[..., :3] * q[..., :3], axis=-1)
    return jnp.concatenate([vector, scalar[..., None]], axis=-1)


def _as_matrix(quat: Any) -> Any:
    x, y, z, w = (quat[..., i] for i in range(4))
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
            [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
            [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def _from_matrix(matrix: Any) -> Any:
    """The quaternion of a rotation matrix by Shepperd's method: the formula that divides by the
    largest of the diagonal and the trace."""
    m = jnp.asarray(matrix)
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"Rotation.from_matrix: expected matrices of shape (..., 3, 3), got {tuple(m.shape)}")
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    decision = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1)
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        parts = [None] * 4
        parts[i] = 1 - trace + 2 * m[..., i, i]
        parts[j] = m[..., j, i] + m[..., i, j]
        parts[k] = m[..., k, i] + m[..., i, k]
        parts[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(parts, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    choice = jnp.argmax(decision, axis=-1)
    quat = jnp.take_along_axis(jnp.stack(candidates, axis=-2), choice[..., None, None], axis=-2)[..., 0, :]
    return _normalize(quat)


def _from_rotvec(rotvec: Any, degrees: bool) -> Any:
    rotvec = jnp.asarray(rotvec)
    if rotvec.shape[-1:] != (3,):
        raise ValueError(f"Rotation.from_rotvec: expected vectors of shape (..., 3), got {tuple(rotvec.shape)}")
    rotvec = jnp.deg2rad(rotvec) if degrees else jnp.asarray(promote(rotvec, to_inexact=True)[0])
    angle = _norm(rotvec)
    angle2 = angle * angle
    small = 0.5 - angle2 / 48 + angle2 * angle2 / 3840
    large = jnp.sin(angle / 2) / angle
    scale = jnp.where(angle <= 1e-3, small, large)
    return jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]], axis=-1)


def _as_rotvec(quat: Any, degrees: bool) -> Any:
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)
    angle = 2.0 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    angle2 = angle * angle
    small = 2 + angle2 / 12 + 7 * angle2 * angle2 / 2880
    large = angle / jnp.sin(angle / 2)
    scale = jnp.where(angle <= 1e-3, small, large)
    if degrees:
        scale = jnp.rad2deg(scale)
    return scale[..., None] * quat[..., :3]


def _from_mrp(mrp: Any) -> Any:
    mrp = jnp.asarray(mrp)
    if mrp.shape[-1:] != (3,):
        raise ValueError(f"Rotation.from_mrp: expected vectors of shape (..., 3), got {tuple(mrp.shape)}")
    squared_plus_1 = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
    return jnp.concatenate([2 * mrp[..., :3], 2 - squared_plus_1], axis=-1) / squared_plus_1


def _as_mrp(quat: Any) -> Any:
    sign = jnp.where(quat[..., 3:] < 0, -1.0, 1.0)
    return sign * quat[..., :3] / (1.0 + sign * quat[..., 3:])


def _make_canonical(quat: Any) -> Any:
    """``quat`` or ``-quat``, whichever has its first nonzero component (w, x, y, z order) positive."""
    neg = quat < 0
    zero = quat == 0
    flip = (neg[..., 3] | (zero[..., 3] & neg[..., 0]) | (zero[..., 3] & zero[..., 0] & neg[..., 1])
            | (zero[..., 3] & zero[..., 0] & zero[..., 1] & neg[..., 2]))
    return jnp.where(flip[..., None], -quat, quat)


# --- Euler angles -----------------------------------------------------------------------------


def _axes_of(seq: str, most: int, exact: bool) -> tuple[list[int], bool]:
    """The axis indices of an Euler sequence and whether it is intrinsic (upper case)."""
    if (exact and len(seq) != most) or not 1 <= len(seq) <= most:
        raise ValueError(f"Expected axis specification to be a non-empty string of up to {most} characters "
                         f"({most} for as_euler), got {seq!r}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    extrinsic = re.match(r"^[xyz]{1,3}$", seq) is not None
    if not (intrinsic or extrinsic):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', 'Z'], got {seq!r}")
    if any(seq[i] == seq[i + 1] for i in range(len(seq) - 1)):
        raise ValueError(f"Expected consecutive axes to be different, got {seq!r}")
    return ["xyz".index(c) for c in seq.lower()], intrinsic


def _elementary(axis: int, angle: Any) -> Any:
    """The quaternion of a rotation by ``angle`` about the basis axis ``axis``."""
    zero = jnp.zeros_like(angle)
    parts = [zero, zero, zero, jnp.cos(angle / 2.0)]
    parts[axis] = jnp.sin(angle / 2.0)
    return jnp.stack(parts, axis=-1)


def _from_euler(angles: Any, axes: list[int], intrinsic: bool, degrees: bool) -> Any:
    angles = jnp.asarray(promote(jnp.atleast_1d(angles), to_inexact=True)[0])
    if angles.shape[-1] != len(axes):
        raise ValueError(f"Rotation.from_euler: expected angles with last axis of size {len(axes)} for "
                         f"{len(axes)} axes, got shape {tuple(angles.shape)}")
    if degrees:
        angles = jnp.deg2rad(angles)
    result = _elementary(axes[0], angles[..., 0])
    for n in range(1, len(axes)):
        quat = _elementary(axes[n], angles[..., n])
        result = _compose(result, quat) if intrinsic else _compose(quat, result)
    return result


def _as_euler(quat: Any, axes: list[int], extrinsic: bool, degrees: bool) -> Any:
    """SciPy's quaternion-to-Euler method (Bernardes and Viollet, 2022)."""
    first, third = (0, 2) if extrinsic else (2, 0)
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    q = [quat[..., n] for n in range(4)]
    if symmetric:
        a, b, c, d = q[3], q[i], q[j], q[k] * sign
    else:
        a, b, c, d = q[3] - q[j], q[i] + q[k] * sign, q[j] + q[3], q[k] * sign - q[i]
    eps = 1e-7
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    case = jnp.where(jnp.abs(middle - np.pi) <= eps, 2, 0)
    case = jnp.where(jnp.abs(middle) <= eps, 1, case)
    half_sum = jnp.arctan2(b, a)
    half_diff = jnp.arctan2(d, c)
    angles = [jnp.zeros_like(middle), middle, jnp.zeros_like(middle)]
    angles[0] = jnp.where(case == 1, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    angles[first] = jnp.where(case == 0, half_sum - half_diff, angles[first])
    angles[third] = jnp.where(case == 0, half_sum + half_diff, angles[third])
    if not symmetric:
        angles[third] = angles[third] * np.asarray(sign, quat.dtype)
        angles[1] = angles[1] - np.pi / 2
    out = (jnp.stack(angles, axis=-1) + np.pi) % (2 * np.pi) - np.pi
    return jnp.rad2deg(out) if degrees else out


# --- the public classes -----------------------------------------------------------------------


class Rotation(typing.NamedTuple):
    """``jax.scipy.spatial.transform.Rotation``: rotations in 3 dimensions, held as unit
    quaternions (scalar last). ``r * s`` applies ``s`` first, then ``r``."""

    quat: Any

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """The rotations of a sequence of ``Rotation`` objects, in order, as one."""
        return cls(jnp.concatenate([rotation.quat for rotation in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles: Any, degrees: bool = False) -> Rotation:
        """From Euler angles about up to 3 axes: "xyz" (lower case) extrinsic, "XYZ" intrinsic."""
        axes, intrinsic = _axes_of(seq, 3, exact=False)
        return cls(_from_euler(angles, axes, intrinsic, degrees))

    @classmethod
    def from_matrix(cls, matrix: Any) -> Rotation:
        """From rotation matrices (..., 3, 3)."""
        return cls(_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp: Any) -> Rotation:
        """From Modified Rodrigues Parameters (..., 3)."""
        return cls(_from_mrp(mrp))

    @classmethod
    def from_quat(cls, quat: Any) -> Rotation:
        """From quaternions (..., 4), scalar last; they are normalized."""
        return cls(_normalize(jnp.asarray(quat)))

    @classmethod
    def from_rotvec(cls, rotvec: Any, degrees: bool = False) -> Rotation:
        """From rotation vectors (..., 3): the axis scaled by the angle."""
        return cls(_from_rotvec(rotvec, degrees))

    @classmethod
    def identity(cls, num: int | None = None, dtype: Any = float) -> Rotation:
        """The identity rotation (JAX supports only ``num=None``)."""
        if num is not None:
            raise NotImplementedError("Rotation.identity: only num=None is supported, as in JAX")
        return cls(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype))

    @classmethod
    def random(cls, random_key: Any, num: int | None = None) -> Rotation:
        """Not implemented, as in JAX (it would need ``scipy.stats.special_ortho_group``)."""
        raise NotImplementedError("Rotation.random is not implemented (nor is it in JAX)")

    def __getitem__(self, indexer: Any) -> Rotation:
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:  # type: ignore[override]
        """The composition: ``other`` first, then ``self``."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors: Any, inverse: bool = False) -> Any:
        """The rotated vectors (..., 3); ``inverse`` applies the inverse rotation."""
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        vectors = jnp.asarray(vectors)
        if vectors.shape[-1:] != (3,):
            raise ValueError(f"Rotation.apply: expected vectors of shape (..., 3), got {tuple(vectors.shape)}")
        return jnp.matmul(matrix, vectors[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False) -> Any:
        """Euler angles (..., 3) for a sequence of 3 axes."""
        axes, intrinsic = _axes_of(seq, 3, exact=True)
        return _as_euler(self.quat, axes, not intrinsic, degrees)

    def as_matrix(self) -> Any:
        """Rotation matrices (..., 3, 3)."""
        return _as_matrix(self.quat)

    def as_mrp(self) -> Any:
        """Modified Rodrigues Parameters (..., 3)."""
        return _as_mrp(self.quat)

    def as_rotvec(self, degrees: bool = False) -> Any:
        """Rotation vectors (..., 3), angles in [0, pi]."""
        return _as_rotvec(self.quat, degrees)

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Any:
        """The quaternions; ``canonical`` picks the sign with ``w >= 0``, ``scalar_first`` puts ``w`` first."""
        quat = _make_canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, shift=1, axis=-1) if scalar_first else quat

    def inv(self) -> Rotation:
        """The inverse rotations (the conjugate quaternions)."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Any:
        """The rotation angles, in [0, pi]."""
        return 2.0 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights: Any = None) -> Rotation:
        """The weighted mean rotation: the principal eigenvector of the weighted quaternion scatter."""
        dtype = self.quat.dtype
        w = jnp.ones(self.quat.shape[0], dtype=dtype) if weights is None else jnp.asarray(weights, dtype=dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {tuple(w.shape)}.")
        if w.shape[0] != len(self):
            raise ValueError(f"Expected `weights` to have number of values equal to number of rotations, got "
                             f"{w.shape[0]} values and {len(self)} rotations.")
        scatter = jnp.dot(w[None, :] * self.quat.T, self.quat)
        _, vectors = jnp.linalg.eigh(scatter)
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        """Whether this holds one rotation (``quat`` of shape (4,))."""
        return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
    """``jax.scipy.spatial.transform.Slerp``: spherical linear interpolation between key
    rotations at increasing key times; build it with ``Slerp.init(times, rotations)``."""

    times: Any
    timedelta: Any
    rotations: Rotation
    rotvecs: Any

    @classmethod
    def init(cls, times: Any, rotations: Rotation) -> Slerp:
        """The interpolator through ``rotations`` (at least 2) at ``times`` (1-d, one per rotation)."""
        if not isinstance(rotations, Rotation):
            raise TypeError(f"`rotations` must be a `Rotation` instance, got {type(rotations).__name__}")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got {times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of timestamps given, got "
                             f"{len(rotations)} rotations and {times.shape[0]} timestamps.")
        quat = rotations.as_quat()
        starts = Rotation(quat[:-1])
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts,
                   rotvecs=(starts.inv() * Rotation(quat[1:])).as_rotvec())

    def __call__(self, times: Any) -> Rotation:
        """The interpolated rotations at ``times`` (a scalar gives a single rotation)."""
        at = jnp.asarray(times, dtype=self.times.dtype)
        if at.ndim > 1:
            raise ValueError(f"`times` must be at most 1-dimensional, got shape {tuple(at.shape)}")
        single = at.ndim == 0
        at = jnp.atleast_1d(at)
        index = jnp.maximum(jnp.searchsorted(self.times, at) - 1, 0)
        alpha = (at - self.times[index]) / self.timedelta[index]
        result = self.rotations[index] * Rotation.from_rotvec(self.rotvecs[index] * alpha[:, None])
        return result[0] if single else result
