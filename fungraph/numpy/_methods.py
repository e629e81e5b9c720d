"""Operators and array methods of tracers and device arrays, so code reads like numpy code.

On a device array (``fungraph.array.DeviceArray``, e.g. an ``OpenCLArray`` returned by a jitted
function) they run eagerly, like every ``fungraph.numpy`` function called outside a
transformation: on the host, from the array's host copy (downloaded once and cached), giving a
``HostArray``. A ``HostArray`` keeps numpy's operators and methods; its indexing follows JAX
where numpy's differs (traced indices, out-of-bounds integers clamp)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.array import IMMUTABLE_MESSAGE, Array, DeviceArray, HostArray, hosted
from fungraph.core import Tracer
from fungraph.numpy import _at, _bits, _creation, _elementwise, _host_methods, _indexing, _linalg, _reductions, _shape
from fungraph.numpy import _elementwise as e


def _swap(f: Any) -> Any:
    return lambda self, other: f(other, self)


def _deferring(method: Any) -> Any:
    """The binary operator ``method``, which leaves the operation to an operand ranked above
    arrays by numpy's rule (a higher ``__array_priority__``, as a sparse array's): Python then
    calls that operand's reflected operator, as JAX's arrays do for types they do not know."""

    def op(self: Any, other: Any) -> Any:
        if getattr(other, "__array_priority__", 0) > Tracer.__array_priority__:
            return NotImplemented
        return method(self, other)

    op.__name__ = getattr(method, "__name__", "op")
    return op


def _reshape(self: Any, *shape: Any, order: str = "C") -> Any:
    if order != "C":
        raise NotImplementedError("only C order reshapes are supported")
    return _shape.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)


def _transpose(self: Any, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = axes[0]
    return _shape.transpose(self, axes or None)


def _public(name: str, operand: int = 0) -> Any:
    """A method calling ``fungraph.numpy.<name>`` with the array as its ``operand``-th argument
    (``a.compress(c)`` is ``compress(c, a)``)."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        import fungraph.numpy as fnp

        args = (*args[:operand], self, *args[operand:])
        return getattr(fnp, name)(*args, **kwargs)

    method.__name__ = name
    return method


_PUBLIC = ("conj", "conjugate", "round", "cumsum", "cumprod", "sort", "argsort", "argpartition", "repeat",
           "searchsorted", "trace", "diagonal", "ptp", "nonzero", "choose")

_METHODS: dict[str, Any] = {
    **{name: _public(name) for name in _PUBLIC},
    "compress": _public("compress", operand=1),
    "real": property(_public("real")),
    "imag": property(_public("imag")),
    "__divmod__": _public("divmod"), "__rdivmod__": _public("divmod", operand=1),
    "__lshift__": _public("left_shift"), "__rlshift__": _public("left_shift", operand=1),
    "__rshift__": _public("right_shift"), "__rrshift__": _public("right_shift", operand=1),
    "__add__": e.add, "__radd__": _swap(e.add),
    "__sub__": e.subtract, "__rsub__": _swap(e.subtract),
    "__mul__": e.multiply, "__rmul__": _swap(e.multiply),
    "__truediv__": e.divide, "__rtruediv__": _swap(e.divide),
    "__floordiv__": e.floor_divide, "__rfloordiv__": _swap(e.floor_divide),
    "__mod__": e.mod, "__rmod__": _swap(e.mod),
    "__pow__": e.power, "__rpow__": _swap(e.power),
    "__matmul__": _linalg.matmul, "__rmatmul__": _swap(_linalg.matmul),
    "__neg__": e.negative, "__pos__": lambda self: self, "__abs__": e.abs,
    "__lt__": e.less, "__le__": e.less_equal, "__gt__": e.greater, "__ge__": e.greater_equal,
    "__eq__": e.equal, "__ne__": e.not_equal,
    "__and__": _bits.bitwise_and, "__rand__": _swap(_bits.bitwise_and),
    "__or__": _bits.bitwise_or, "__ror__": _swap(_bits.bitwise_or),
    "__xor__": _bits.bitwise_xor, "__rxor__": _swap(_bits.bitwise_xor),
    "__invert__": _bits.bitwise_not,
    "__getitem__": _indexing.getitem,
    "T": property(lambda self: _shape.transpose(self)),
    "mT": property(lambda self: _shape.swapaxes(self, -1, -2)),
    "reshape": _reshape,
    "transpose": _transpose,
    "astype": _shape.astype,
    "ravel": _shape.ravel,
    "flatten": _shape.ravel,
    "squeeze": _shape.squeeze,
    "swapaxes": _shape.swapaxes,
    "sum": _reductions.sum,
    "mean": _reductions.mean,
    "max": _reductions.max,
    "min": _reductions.min,
    "prod": _reductions.prod,
    "var": _reductions.var,
    "std": _reductions.std,
    "argmax": _reductions.argmax,
    "argmin": _reductions.argmin,
    "all": _reductions.all,
    "any": _reductions.any,
    "clip": _elementwise.clip,
    "dot": _linalg.dot,
    "take": _indexing.take,
    "copy": lambda self: self,
    "item": lambda self: self.__float__(),
    "tolist": lambda self: self.__array__(),
    "zeros_like": _creation.zeros_like,
}
_UNARY = ("__neg__", "__pos__", "__abs__", "__invert__", "__getitem__")
_METHODS.update({name: _deferring(fn) for name, fn in _METHODS.items()
                 if name.startswith("__") and name not in _UNARY})


def _scalar(self: DeviceArray) -> Any:
    """The value of a one-element array, for ``float(x)`` and the other conversions."""
    if self.size != 1:
        raise TypeError(f"only an array of one element converts to a Python scalar; this one is {self.aval}")
    return self.numpy().reshape(())[()]


def _hosting(method: Any) -> Any:
    """``method`` giving a :class:`HostArray` where it gives a numpy array (methods that change
    nothing, like ``x.T`` of a vector, return their host operand)."""
    if isinstance(method, property):
        return property(_hosting(method.fget))

    def call(*args: Any, **kwargs: Any) -> Any:
        return hosted(method(*args, **kwargs))

    return call


_ARRAY_METHODS: dict[str, Any] = {
    "__len__": lambda self: len(self.numpy()),
    "__iter__": lambda self: iter(hosted(self.numpy())),
    "__bool__": lambda self: bool(_scalar(self)),
    "__int__": lambda self: int(_scalar(self)),
    "__float__": lambda self: float(_scalar(self)),
    "__complex__": lambda self: complex(_scalar(self)),
    "__index__": lambda self: self.numpy().__index__(),
    "__format__": lambda self, spec: format(_scalar(self), spec),
    "item": lambda self, *args: self.numpy().item(*args),
    "tolist": lambda self: self.numpy().tolist(),
}


def _holds_tracer(idx: Any) -> bool:
    if isinstance(idx, Tracer):
        return True
    return isinstance(idx, (tuple, list)) and any(isinstance(e, Tracer) for e in idx)


def _host_getitem(self: HostArray, idx: Any) -> Any:
    """numpy's indexing where it agrees with JAX's, giving read-only arrays (0-d ones for
    single elements, weak where the array is); fungraph's (staged) indexing for a traced index, and for out-of-bounds
    integers, which JAX clamps where numpy raises."""
    if _holds_tracer(idx):
        return _indexing.getitem(self, idx)
    try:
        out = np.ndarray.__getitem__(self, idx)
    except IndexError:
        return _indexing.getitem(self, idx)
    if type(out) is not HostArray:
        out = hosted(np.asarray(out)) if isinstance(out, np.generic) else out
    else:
        out.flags.writeable = self.flags.writeable and out.flags.writeable
    if self.weak_type and type(out) is HostArray:
        out.weak_type = True
    return out


def _traced_setitem(self: Tracer, idx: Any, value: Any) -> None:
    raise TypeError(IMMUTABLE_MESSAGE.format(kind="traced value", aval=self.aval))


#: ``x.at[idx].set(v)`` and the other functional updates: one property for tracers and every
#: kind of array (an eager update of a device array computes on the host).
AT = property(_at.IndexUpdateHelper)


def install() -> None:
    """Give tracers, device arrays and host arrays numpy's operators and JAX's methods; the numpy
    layer installs them, as ``jax.numpy`` does, so the array classes below it need not import it."""
    for cls in (Tracer, Array):
        cls.at = AT
    for name, fn in _METHODS.items():
        setattr(Tracer, name, fn)
        if name not in vars(DeviceArray) and name not in vars(Array):
            setattr(DeviceArray, name, _hosting(fn))
    for name, fn in _ARRAY_METHODS.items():
        setattr(DeviceArray, name, fn)
    Tracer.__setitem__ = _traced_setitem
    _host_methods.install(_METHODS)
    HostArray.__getitem__ = _host_getitem
    HostArray._jax_sort = _METHODS["sort"]
