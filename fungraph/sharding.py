"""Devices and the one sharding fungraph has: every array lies whole on one device (a backend),
as a JAX array on one device does. ``x.devices()``, ``x.device`` and ``x.sharding`` return
these, with JAX's attribute names, so code that inspects placement runs unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_DEVICE_CLASS_NAMES = {"cpu": "CpuDevice", "opencl": "OpenCLDevice"}


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
class SingleDeviceSharding:
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
