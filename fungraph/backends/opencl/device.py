"""The OpenCL device: selection, limits, transfers and ``OpenCLArray``.

One context and one in-order queue per process. ``FUNGRAPH_OPENCL_DEVICE`` picks a device by
a substring of its device or platform name; otherwise the first device of the first
platform is used. Every host<->device copy goes through :func:`upload` / :func:`download`
so :data:`TRANSFER_STATS` counts them.
"""

from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import dtypes, sharding
from fungraph.array import DeviceArray
from fungraph.backends.opencl.codegen import contiguous
from fungraph.ir import ShapedArray

TRANSFER_STATS = {"to_device": 0, "to_host": 0, "bytes_to_device": 0, "bytes_to_host": 0,
                  "scalar_reads": 0, "host_round_trips": 0}
ALLOC_STATS = {"buffers_created": 0, "buffers_reused": 0}


class OpenCLUnavailable(RuntimeError):
    """No OpenCL platform or device could be found."""


class DonatedArrayError(RuntimeError):
    """An :class:`OpenCLArray` was used after a jit call took over its buffer (donation)."""


POOL_LIMIT_BYTES = 1 << 30
#: Host arrays of at most this many bytes are uploaded without waiting, from a snapshot.
ASYNC_UPLOAD_BYTES = 1 << 16
#: Uploads in flight before the next one waits for the oldest.
PENDING_UPLOADS = 64
#: ``CL_COMPLETE``, an event's execution status once its command has finished.
CL_COMPLETE = 0
#: Environment PoCL reads when it starts its CPU workers, set here unless the user set it. Pinned
#: workers (one per core) keep Linux from stacking both of a launch's workers on one core of two,
#: where the idle core does not pull the second back within a 2 ms product (``docs/backends.md``).
POCL_DEFAULTS = {"POCL_AFFINITY": "1"}
INSTALL_HINT = ("install pyopencl and an OpenCL driver; on a CPU-only Debian/Ubuntu machine: "
                "`pip install pyopencl` and `apt-get install pocl-opencl-icd` (PoCL)")


@dataclass(frozen=True)
class DeviceInfo:
    """What the code generator needs to know about the device."""

    name: str
    platform: str
    is_cpu: bool
    max_work_group_size: int
    local_mem_size: int
    fp64: bool
    correctly_rounded_sqrt: bool
    compute_units: int = 1


class Device:
    """The process-wide context, queue and device limits."""

    def __init__(self) -> None:
        try:
            import pyopencl as cl
        except ImportError as err:
            raise OpenCLUnavailable(f"pyopencl is not installed; {INSTALL_HINT}") from err
        self.cl = cl
        for key, value in POCL_DEFAULTS.items():
            os.environ.setdefault(key, value)
        try:
            platforms = cl.get_platforms()
        except cl.Error as err:
            raise OpenCLUnavailable(f"no OpenCL platform found ({err}); {INSTALL_HINT}") from err
        candidates = [(p, d) for p in platforms for d in _devices(cl, p)]
        if not candidates:
            raise OpenCLUnavailable(f"no OpenCL device found; {INSTALL_HINT}")
        wanted = os.environ.get("FUNGRAPH_OPENCL_DEVICE")
        if wanted:
            chosen = [(p, d) for p, d in candidates if wanted.lower() in d.name.lower()
                      or wanted.lower() in p.name.lower()]
            if not chosen:
                names = ", ".join(f"{d.name!r} ({p.name})" for p, d in candidates)
                raise OpenCLUnavailable(f"FUNGRAPH_OPENCL_DEVICE={wanted!r} matches none of: {names}")
            candidates = chosen
        platform, dev = candidates[0]
        self.device = dev
        self.context = cl.Context([dev])
        self.queue = cl.CommandQueue(self.context)
        fp64 = bool(dev.double_fp_config) or "cl_khr_fp64" in dev.extensions
        crs = bool(dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
        self.info = DeviceInfo(dev.name.strip(), platform.name.strip(), bool(dev.type & cl.device_type.CPU),
                               int(dev.max_work_group_size), int(dev.local_mem_size), fp64, crs,
                               max(1, int(dev.max_compute_units)))

        self._free: dict[int, list[Any]] = {}
        self._free_bytes = 0
        #: events of uploads still in flight (each holds its private host copy alive)
        self.pending: collections.deque[Any] = collections.deque()
        # re-entrant: ``give`` runs from ``OpenCLArray.__del__``, on any thread, and may run
        # while this thread is inside ``take``
        self._pool_lock = threading.RLock()

    def alloc(self, nbytes: int) -> Any:
        """A device buffer of at least one byte (OpenCL refuses empty buffers)."""
        ALLOC_STATS["buffers_created"] += 1
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 1))

    def take(self, nbytes: int) -> Any:
        """An output buffer: one released by a dead :class:`OpenCLArray` of the same size if
        there is one (its pages are already mapped; a fresh 40 MB buffer costs ~25 ms of page
        faults on PoCL), else a new one."""
        with self._pool_lock:
            free = self._free.get(nbytes)
            if free:
                self._free_bytes -= nbytes
                ALLOC_STATS["buffers_reused"] += 1
                return free.pop()
        return self.alloc(nbytes)

    def give(self, nbytes: int, buffer: Any) -> None:
        """Keep a dead array's buffer for reuse (bounded: 8 per size, 1 GiB in all). The
        in-order queue runs every earlier command that used it before any later reuse."""
        with self._pool_lock:
            free = self._free.setdefault(nbytes, [])
            if len(free) < 8 and self._free_bytes + nbytes <= POOL_LIMIT_BYTES:
                free.append(buffer)
                self._free_bytes += nbytes

    def check_dtype(self, aval: ShapedArray, what: str) -> None:
        """Raise a TypeError naming the dtype and the device for what this device cannot run."""
        if dtypes.is_complex(aval.dtype):
            raise TypeError(f"{what} uses {aval.dtype} ({aval}) but the OpenCL backend has no complex kernels "
                            f"(device {self.info.name!r}, {self.info.platform}); use backend='cpu' for complex "
                            "values")
        if aval.dtype == dtypes.float64 and not self.info.fp64:
            raise TypeError(f"{what} uses float64 but the OpenCL device {self.info.name!r} ({self.info.platform}) "
                            "has no fp64 support (no double_fp_config / cl_khr_fp64); use float32")


def _devices(cl: Any, platform: Any) -> list[Any]:
    try:
        return list(platform.get_devices())
    except cl.Error:
        return []


_DEVICE: list[Device] = []


def get_device() -> Device:
    """The process-wide device, created on first use (raises :class:`OpenCLUnavailable`)."""
    if not _DEVICE:
        _DEVICE.append(Device())
    return _DEVICE[0]


def opencl_device() -> sharding.Device:
    """The OpenCL device as JAX's device queries name it (``fungraph.devices("opencl")[0]``)."""
    info = get_device().info
    return sharding.Device("opencl", f"{info.platform}: {info.name}")


def available() -> bool:
    try:
        get_device()
    except OpenCLUnavailable:
        return False
    return True


# --- transfers --------------------------------------------------------------------------


def device_put(host: np.ndarray) -> OpenCLArray:
    """``host`` (of a dtype fungraph supports) copied into a new device array."""
    dev = get_device()
    aval = ShapedArray(host.shape, host.dtype)
    dev.check_dtype(aval, "device_put")
    return OpenCLArray(upload(dev, host), aval)


def upload(dev: Device, host: np.ndarray, buffer: Any = None, byte_offset: int = 0) -> Any:
    """Copy ``host`` to the device (into ``buffer`` at ``byte_offset``, or a new buffer).
    Up to ``ASYNC_UPLOAD_BYTES`` (a host scalar such as a loop index) the copy is of a private
    snapshot and does not wait: the queue runs in order, and a blocking write would first wait
    for every kernel queued before it (200 chained calls of a jitted, donated ``x.at[i].set(v)``
    on a 1000 x 1000 array with a host ``i``: 247-449 -> 133-136 us a call on PoCL). Larger
    ones block, so no snapshot is taken."""
    host = np.ascontiguousarray(host)
    if buffer is None:
        buffer = dev.alloc(host.nbytes)
    if host.nbytes:
        if host.nbytes <= ASYNC_UPLOAD_BYTES:
            _settle(dev.pending)
            dev.pending.append(dev.cl.enqueue_copy(dev.queue, buffer, np.array(host), dst_offset=byte_offset,
                                                   is_blocking=False))
        else:
            dev.cl.enqueue_copy(dev.queue, buffer, host, dst_offset=byte_offset, is_blocking=True)
        TRANSFER_STATS["to_device"] += 1
        TRANSFER_STATS["bytes_to_device"] += host.nbytes
    return buffer


def _settle(pending: collections.deque[Any]) -> None:
    """Drop the finished upload events at the front of ``pending`` (releasing their host
    snapshots); while more than ``PENDING_UPLOADS`` remain, wait for the oldest."""
    try:
        while len(pending) > PENDING_UPLOADS or pending[0].command_execution_status == CL_COMPLETE:
            pending.popleft().wait()
    except IndexError:                                                   # emptied, maybe by another thread
        pass


def download(dev: Device, buffer: Any, aval: ShapedArray, elem_offset: int = 0,
             strides: tuple[int, ...] | None = None) -> np.ndarray:
    """Copy a (possibly strided) device array to a fresh host array; blocks until done."""
    shape = aval.shape
    if strides is None:
        strides = contiguous(shape)
    if aval.size == 0:
        return np.zeros(shape, aval.dtype)
    lo = elem_offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = elem_offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + 1
    span = np.empty(hi - lo, aval.dtype)
    dev.cl.enqueue_copy(dev.queue, span, buffer, src_offset=lo * aval.dtype.itemsize, is_blocking=True)
    TRANSFER_STATS["to_host"] += 1
    TRANSFER_STATS["bytes_to_host"] += span.nbytes
    item = aval.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(span[elem_offset - lo:], shape, tuple(s * item for s in strides))
    if tuple(strides) == contiguous(shape) and elem_offset == lo:
        return span.reshape(shape)
    return np.array(view)


def read_scalar(dev: Device, buffer: Any, dtype: np.dtype, elem_offset: int) -> Any:
    """Read one element (a ``cond`` index or a ``while`` predicate); waits for the queue.
    Counted in ``TRANSFER_STATS["scalar_reads"]``, not as an array copy."""
    host = np.empty(1, dtype)
    dev.cl.enqueue_copy(dev.queue, host, buffer, src_offset=elem_offset * host.itemsize, is_blocking=True)
    TRANSFER_STATS["scalar_reads"] += 1
    TRANSFER_STATS["bytes_to_host"] += host.itemsize
    return host[0]


def reset_transfer_stats() -> None:
    for k in TRANSFER_STATS:
        TRANSFER_STATS[k] = 0


# --- the device array --------------------------------------------------------------------


class OpenCLArray(DeviceArray):
    """A contiguous array in a device buffer at ``offset`` elements. It stays on the device:
    passing it to an OpenCL-jitted function costs no transfer; ``numpy()`` copies to the host.

    Donated to a jit call (``donate_argnums``) whose output took over its buffer, it is
    *deleted*: ``buffer`` is None and any further use raises :class:`DonatedArrayError`."""

    backend = "opencl"
    __slots__ = ("_aval", "buffer", "offset", "_host", "_pooled")
    #: JAX's weak type (a jit output computed from Python scalars): see :meth:`weakly_typed`
    weak_type = False

    def __init__(self, buffer: Any, aval: ShapedArray, offset: int = 0, pooled: bool = False) -> None:
        self.buffer = buffer
        self._aval = aval
        self.offset = offset
        self._host: np.ndarray | None = None
        self._pooled = pooled

    def __del__(self) -> None:
        if self._pooled and self.buffer is not None and _DEVICE:
            try:
                _DEVICE[0].give(self._aval.nbytes, self.buffer)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def delete(self) -> None:
        """Give the buffer up (its new owner is the output written into it): later use raises."""
        self.buffer = None
        self._host = None
        self._pooled = False

    def donate(self) -> tuple[Any, int, bool]:
        """Hand the buffer to a jit output written into it: ``(buffer, offset, pooled)``, where
        ``pooled`` says whether the buffer goes back to the pool when its new owner dies. This
        array is deleted."""
        taken = (self.live_buffer(), self.offset, self._pooled)
        self.delete()
        return taken

    def is_deleted(self) -> bool:
        return self.buffer is None

    def weakly_typed(self) -> OpenCLArray:
        """This array's values as a new, weakly typed device array. A copy on the device, not a
        re-typing in place: the array may be the caller's argument or another output."""
        if self.weak_type:
            return self
        dev = get_device()
        nbytes = self._aval.nbytes
        buffer = dev.take(nbytes)
        if nbytes:
            dev.cl.enqueue_copy(dev.queue, buffer, self.live_buffer(), byte_count=nbytes,
                                src_offset=self.offset * self._aval.dtype.itemsize)
        return _WeakOpenCLArray(buffer, self._aval, 0, pooled=True)

    def live_buffer(self) -> Any:
        """``buffer``, or a :class:`DonatedArrayError` naming this array if it was donated."""
        if self.buffer is None:
            shape = ",".join(map(str, self._aval.shape))
            raise DonatedArrayError(f"this OpenCLArray ({self._aval.dtype.name}[{shape}]) was donated to a jit call "
                                    "(donate_argnums) and its device buffer now holds that call's output; use the "
                                    "returned value instead")
        return self.buffer

    def block_until_ready(self) -> OpenCLArray:
        """Wait for the device queue (which computes this array) to finish."""
        self.live_buffer()
        get_device().queue.finish()
        return self

    def numpy(self) -> np.ndarray:
        """The values on the host (copied once, then cached: device arrays are immutable)."""
        self.live_buffer()
        if self._host is None:
            host = download(get_device(), self.buffer, self._aval, self.offset)
            host.flags.writeable = False
            self._host = host
        return self._host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = np.array(self.numpy(), copy=True)
        return arr if dtype is None else arr.astype(dtype)

    def __repr__(self) -> str:
        if self.buffer is None:
            return f"OpenCLArray(<donated>, {self._aval})"
        return super().__repr__()

    @property
    def device(self) -> sharding.Device:
        return opencl_device()


class _WeakOpenCLArray(OpenCLArray):
    """An :class:`OpenCLArray` typed weakly, as JAX types a result of weak inputs."""

    __slots__ = ()
    weak_type = True
