"""``fungraph.Array``: the base class of device-resident arrays returned by a backend.

Passing an Array to a function jitted for the same backend costs no transfer; numpy sees it
through ``__array__`` (one copy to the host, on demand).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.ir import HasAval, ShapedArray


class Array(HasAval):
    """A device array: ``shape``, ``dtype``, ``aval``, ``numpy()`` and ``np.asarray(x)``, with
    numpy's operators and methods and ``.at`` (installed by ``fungraph.numpy._methods``), which run
    eagerly on the host."""

    backend: str = "?"
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    def numpy(self) -> np.ndarray:
        raise NotImplementedError

    def block_until_ready(self) -> Array:
        """Wait until the value is computed (JAX's method); returns the array itself."""
        return self

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of a host copy of the values (``np.from_dlpack``, ``torch.from_dlpack``
        and ``jnp.from_dlpack`` take device arrays this way); the device buffer is not shared, so
        ``copy=False`` is a ``BufferError``, as the DLPack protocol asks."""
        if copy is False:
            raise BufferError(f"{type(self).__name__} ({self.aval}): its values are on the device and DLPack exports "
                              "a host copy, which copy=False refuses")
        kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device)) if v is not None}
        return np.array(self.numpy(), copy=True).__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``: what :meth:`__dlpack__` exports lies on the host."""
        return (1, 0)

    def __repr__(self) -> str:
        return f"fungraph.Array({self.numpy()!r}, backend={self.backend!r})"


class HostArray(np.ndarray):
    """A numpy array with JAX's array methods: what eager operations and CPU-jitted functions
    return, so ``x.at[i].set(v)`` and ``f(x).block_until_ready()`` work as in JAX. It is a
    numpy array in every other way (operators, ufuncs and ``isinstance`` are numpy's), and
    prints as one."""

    def block_until_ready(self) -> HostArray:
        """Computed already (the CPU engine is synchronous): the array itself."""
        return self

    def copy_to_host_async(self) -> None:
        """On the host already: nothing to do."""

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))


def hosted(x: Any) -> Any:
    """``x`` as a :class:`HostArray` view if it is a plain numpy array, else ``x``."""
    return x.view(HostArray) if type(x) is np.ndarray else x


def unhosted(x: Any) -> Any:
    """``x`` as a plain numpy array view if it is a :class:`HostArray`, else ``x``: impls and
    engines see numpy arrays only, so 0-d results stay numpy scalars inside them."""
    return x.view(np.ndarray) if type(x) is HostArray else x
