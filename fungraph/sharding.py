"""Devices and the one sharding fungraph has: every array lies whole on one device (a backend),
as a JAX array on one device does. ``x.devices()``, ``x.device`` and ``x.sharding`` return
these, with JAX's attribute names, so code that inspects placement runs unchanged."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

_DEVICE_CLASS_NAMES = {"cpu": "CpuDevice", "opencl": "OpenCLDevice"}


class Sharding:
    """The base of the sharding classes, for ``isinstance`` checks as ``jax.sharding.Sharding``."""

    __slots__ = ()


class AxisType(enum.Enum):
    """How a mesh axis is typed (JAX's sharding-in-types): fungraph computes each process's
    block explicitly in ``shard_map``, so the types are recorded on the mesh for programs that
    read them back."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()


@dataclass(frozen=True)
class Device:
    """One backend as a JAX user sees a device; ``device_put(x, device)`` accepts it."""

    platform: str
    device_kind: str
    id: int = 0
    process_index: int = 0

    @property
    def host_id(self) -> int:
        return self.process_index

    def __str__(self) -> str:
        return f"{self.platform}:{self.id}"

    def __repr__(self) -> str:
        return f"{_DEVICE_CLASS_NAMES.get(self.platform, 'Device')}(id={self.id})"


#: the host: eager results and the CPU engine's
CPU_DEVICE = Device("cpu", "cpu")


@dataclass(frozen=True)
class SingleDeviceSharding(Sharding):
    """All of an array on ``device`` (JAX's class of the same name, its basic attributes)."""

    device: Device
    memory_kind: str = "device"

    @property
    def device_set(self) -> set[Device]:
        return {self.device}

    @property
    def addressable_devices(self) -> set[Device]:
        return {self.device}

    num_devices = 1
    is_fully_addressable = True
    is_fully_replicated = True
    has_addressable_devices = True

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The whole array is the one shard."""
        return tuple(global_shape)

    def devices_indices_map(self, global_shape: tuple[int, ...]) -> dict[Device, tuple[slice, ...]]:
        return {self.device: (slice(None),) * len(global_shape)}

    addressable_devices_indices_map = devices_indices_map

    def is_equivalent_to(self, other: Any, ndim: int) -> bool:
        return isinstance(other, SingleDeviceSharding) and other.device == self.device

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self.device!r}, memory_kind={self.memory_kind})"


class PartitionSpec(tuple):
    """How an array's dimensions split over mesh axes (JAX's ``P``): entry ``i`` is None
    (dimension ``i`` is not split), an axis name, or a tuple of names (split over several
    axes, the first the major one); dimensions past the entries are not split."""

    def __new__(cls, *entries: Any) -> PartitionSpec:
        return super().__new__(cls, entries)

    def __repr__(self) -> str:
        return "PartitionSpec(" + ", ".join(repr(e) for e in self) + ")"

    def axis_names(self) -> tuple[Any, ...]:
        """The mesh axes this spec splits over, in order."""
        out: list[Any] = []
        for e in self:
            if e is None:
                continue
            out.extend(e if isinstance(e, tuple) else (e,))
        return tuple(out)


@dataclass(frozen=True, eq=False)
class Mesh:
    """Devices laid out on named axes (JAX's ``Mesh``). fungraph runs one device per process:
    ``devices`` holds the processes' devices, process ``p`` at ``unravel_index(p, shape)``."""

    devices: Any
    axis_names: tuple[Any, ...]
    axis_types: Any = None

    def __post_init__(self) -> None:
        devices = np.asarray(self.devices, dtype=object)
        names = tuple(self.axis_names) if isinstance(self.axis_names, (tuple, list)) else (self.axis_names,)
        if devices.ndim != len(names):
            raise ValueError(f"Mesh: {len(names)} axis names {names} for a device array of shape {devices.shape}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names {names} repeat a name")
        types = (AxisType.Auto,) * len(names) if self.axis_types is None else tuple(self.axis_types) \
            if isinstance(self.axis_types, (tuple, list)) else (self.axis_types,)
        if len(types) != len(names) or not all(isinstance(t, AxisType) for t in types):
            raise ValueError(f"Mesh: axis_types {self.axis_types} must be one AxisType per axis {names}")
        object.__setattr__(self, "devices", devices)
        object.__setattr__(self, "axis_names", names)
        object.__setattr__(self, "axis_types", types)

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types)

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def shape(self) -> dict[Any, int]:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def shape_tuple(self) -> tuple[tuple[Any, int], ...]:
        """``((name, size), ...)``: what collectives carry to find their communicator."""
        return tuple(zip(self.axis_names, self.devices.shape))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and self.shape_tuple == other.shape_tuple

    def __hash__(self) -> int:
        return hash(self.shape_tuple)

    def __repr__(self) -> str:
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape_tuple)})"


@dataclass(frozen=True)
class NamedSharding(Sharding):
    """An array split over ``mesh`` as ``spec`` says (JAX's ``NamedSharding``)."""

    mesh: Mesh
    spec: PartitionSpec = PartitionSpec()

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    def shard_shape(self, global_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one device's block of an array of ``global_shape``."""
        shape = list(global_shape)
        for i, entry in enumerate(self.spec):
            if entry is None:
                continue
            names = entry if isinstance(entry, tuple) else (entry,)
            n = 1
            for name in names:
                n *= self.mesh.shape[name]
            if shape[i] % n:
                raise ValueError(f"dimension {i} of shape {tuple(global_shape)} does not split evenly over mesh "
                                 f"axes {names} ({n} devices)")
            shape[i] //= n
        return tuple(shape)

    @property
    def is_fully_replicated(self) -> bool:
        return not self.spec.axis_names()

    def devices_indices_map(self, global_shape: tuple[int, ...]) -> dict[Any, tuple[slice, ...]]:
        """Each mesh device's block of an array of ``global_shape``: along a split dimension, the
        block numbered by the device's coordinates on that entry's mesh axes (row-major)."""
        block = self.shard_shape(global_shape)
        positions = {name: k for k, name in enumerate(self.mesh.axis_names)}
        out = {}
        for coords in np.ndindex(*self.mesh.devices.shape):
            index = [slice(None)] * len(global_shape)
            for i, entry in enumerate(self.spec):
                if entry is None:
                    continue
                number = 0
                for name in entry if isinstance(entry, tuple) else (entry,):
                    number = number * self.mesh.shape[name] + coords[positions[name]]
                index[i] = slice(number * block[i], (number + 1) * block[i])
            out[self.mesh.devices[coords]] = tuple(index)
        return out


@dataclass(frozen=True)
class AbstractMesh:
    """A mesh's axis names, sizes and types without its devices (``jax.sharding.AbstractMesh``)."""

    axis_sizes: tuple[int, ...]
    axis_names: tuple[Any, ...]
    axis_types: tuple[AxisType, ...] = ()

    @property
    def shape(self) -> dict[Any, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return int(np.prod(self.axis_sizes, dtype=np.int64))

    @property
    def empty(self) -> bool:
        return not self.axis_names


_MESH = threading.local()


def get_mesh() -> Mesh | None:
    """The mesh ``set_mesh`` made current in this thread (None without one)."""
    return getattr(_MESH, "mesh", None)


def get_abstract_mesh() -> AbstractMesh:
    """The current mesh's :class:`AbstractMesh`, an empty one without a mesh."""
    mesh = get_mesh()
    return AbstractMesh((), ()) if mesh is None else mesh.abstract_mesh


class set_mesh:  # noqa: N801 - JAX's name
    """Make ``mesh`` current: for the block (``with set_mesh(mesh):``), or from now on when
    called as a statement, as ``jax.set_mesh``."""

    def __init__(self, mesh: Mesh | None) -> None:
        self.previous = get_mesh()
        self.mesh = mesh
        _MESH.mesh = mesh

    def __enter__(self) -> Mesh | None:
        return self.mesh

    def __exit__(self, *exc: object) -> None:
        _MESH.mesh = self.previous
