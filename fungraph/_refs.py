"""Mutable array references, JAX 0.10's ``jax.new_ref``/``jax.Ref`` (docs/differences_from_jax.md).

A ``Ref`` is a box holding one array value of a fixed shape and dtype. Reading (``r[...]``,
``r[i]``) gives the value or a part of it, writing (``r[...] = v``, ``r[i] += v``) replaces the
value functionally (``.at[i].set``), so the operations are ordinary traced operations and
``grad``, ``vmap`` and ``jit`` see plain values. A loop body or ``cond`` branch that touches a
reference made outside it has the reference threaded through as an extra carry or operand
(lax's control flow, with ``_ref_frames``), which is what JAX's discharge of effects does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fungraph import _ref_frames, dtypes
from fungraph.array import HostArray, hosted
from fungraph.core import Tracer, innermost_main, weak_array
from fungraph.ir import ShapedArray, aval_of
from fungraph.primitives.operands import asarray, cast


@dataclass(frozen=True)
class AbstractRef:
    """The type of a reference: the type of the array it holds (JAX's ``jax.ref.AbstractRef``)."""

    inner_aval: ShapedArray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inner_aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.inner_aval.dtype

    def __str__(self) -> str:
        return f"Ref{{{self.inner_aval}}}"


def _held(value: Any) -> Any:
    """``value`` as the reference keeps it: a traced value as it is, anything else a fresh
    read-only ``fungraph.Array`` (a numpy argument the caller may change is copied)."""
    if isinstance(value, Tracer) or isinstance(value, HostArray):
        return value
    weak = dtypes.is_weak(value)
    arr = np.array(asarray(value), copy=True)
    return weak_array(arr) if weak else hosted(arr)


def _whole(idx: Any) -> bool:
    return idx is Ellipsis or (isinstance(idx, tuple) and (idx == () or idx == (Ellipsis,)))


class Ref:
    """A mutable array reference (``jax.Ref``): read with ``r[idx]``, write with ``r[idx] = v``
    (``v`` of exactly the shape read there, of the reference's dtype or a Python scalar)."""

    __slots__ = ("__weakref__", "_freed", "_level", "_serial", "_shape", "_dtype", "_value")

    def __init__(self, value: Any) -> None:
        self._value = _held(value)
        a = aval_of(self._value)
        self._shape, self._dtype = tuple(a.shape), np.dtype(a.dtype)
        self._serial = _ref_frames.next_serial()
        self._level = innermost_main().level
        self._freed = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def weak_type(self) -> bool:
        return dtypes.is_weak(self._value)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object")
        return self._shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"a Ref is not an array (a mutable reference to one of shape {self.shape}, dtype "
                        f"{self.dtype}): read its value with `r[...]`, or pass the value to jit")

    def __iter__(self) -> Any:
        raise TypeError("a Ref cannot be iterated: read its value with `r[...]`")

    def read(self) -> Any:
        """The whole value (noted in the open staging frames)."""
        if self._freed:
            raise ValueError(f"this Ref (of type {self.shape}, {self.dtype}) was freed by free_ref; it cannot be used")
        _ref_frames.note_access(self)
        return self._value

    def write(self, value: Any) -> None:
        """Replace the whole value (already of the reference's shape and dtype)."""
        self.read()
        if isinstance(value, Tracer) and value._trace.main.level > self._level and not _ref_frames.staged_outer(self):
            raise ValueError(
                f"a value traced by a transformation (vmap, grad, jvp, ...) applied after this Ref (of shape "
                f"{self.shape}, dtype {self.dtype}) was made was written into it, where it would outlive the "
                "transformation: make the Ref inside the transformed function, or pass the value out")
        self._value = _held(value)

    def __getitem__(self, idx: Any) -> Any:
        value = self.read()
        return value if _whole(idx) else value[idx]

    def __setitem__(self, idx: Any, value: Any) -> None:
        self.write(self._updated(idx, value, "swap", "set"))

    def _checked(self, idx: Any, value: Any, what: str) -> Any:
        """``value`` for the part ``idx``: JAX's check of its shape and dtype, a Python scalar
        converted to the reference's dtype."""
        old = self.read()
        expected = aval_of(old).shape if _whole(idx) else aval_of(old[idx]).shape
        v = value if dtypes.is_weak(value) else asarray(value)
        shape = tuple(np.shape(v)) if not isinstance(v, Tracer) else tuple(v.aval.shape)
        if shape != tuple(expected):
            raise ValueError(f"Invalid shape for `{what}`. Ref shape: {self.shape}. Expected shape: "
                             f"{tuple(expected)}. Value shape: {shape}. Index: {idx!r}")
        dtype = np.asarray(v).dtype if dtypes.is_weak(value) and not isinstance(v, Tracer) else aval_of(v).dtype
        if dtype != self.dtype and not (dtypes.is_weak(value) and dtypes.result_type(self.dtype, value) == self.dtype):
            raise ValueError(f"Invalid dtype for `{what}`. Ref dtype: {self.dtype}. Value dtype: {dtype}.")
        return cast(v, self.dtype) if dtype != self.dtype or dtypes.is_weak(value) else v

    def _updated(self, idx: Any, value: Any, what: str, how: str) -> Any:
        v = self._checked(idx, value, what)
        old = self._value
        if _whole(idx):
            return old + v if how == "add" else v
        return getattr(old.at[idx], how)(v)

    def __repr__(self) -> str:
        if self._freed:
            return f"Ref(<freed>, shape={self.shape}, dtype={self.dtype})"
        if isinstance(self._value, Tracer):
            return f"Ref{{{self._value.aval}}}"
        text = repr(self._value)
        return "Ref" + text[text.index("("):] if text.startswith("Array(") else f"Ref({text})"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def new_ref(init_val: Any, *, memory_space: Any = None, kind: str | None = None) -> Ref:
    """A mutable reference holding ``init_val`` (``jax.new_ref``); ``memory_space`` and
    ``kind`` are accepted and have no effect (one memory, no rematerialisation semantics)."""
    if kind not in (None, "no_grad_no_remat"):
        raise ValueError(f"new_ref: kind must be None or 'no_grad_no_remat', got {kind!r}")
    if isinstance(init_val, Ref):
        raise TypeError("new_ref: init_val is already a Ref; pass its value (`r[...]`)")
    return Ref(init_val)


def empty_ref(ty: Any, memory_space: Any = None) -> Ref:
    """A reference of ``ty``'s shape and dtype (a ``ShapeDtypeStruct`` or an array); JAX leaves
    its contents undefined, fungraph fills it with zeros."""
    return Ref(np.zeros(tuple(ty.shape), dtypes.canonicalize(np.dtype(ty.dtype))))


def freeze(ref: Ref) -> Any:
    """The reference's final value (``jax.freeze``)."""
    return _ref(ref, "freeze").read()


def free_ref(ref: Ref) -> tuple[()]:
    """Invalidate ``ref``: any later use raises (``jax.free_ref``)."""
    _ref(ref, "free_ref").read()
    ref._freed = True
    return ()


def get(ref: Ref, idx: Any = ()) -> Any:
    """``ref[idx]`` (``jax.ref.get``)."""
    return _ref(ref, "get")[() if idx is None else idx]


def set(ref: Ref, idx: Any, value: Any) -> None:  # noqa: A001 - JAX's name
    """``ref[idx] = value`` (``jax.ref.set``)."""
    _ref(ref, "set")[() if idx is None else idx] = value


def swap(ref: Ref, idx: Any, value: Any) -> Any:
    """Write ``value`` at ``idx`` and return what was there (``jax.ref.swap``)."""
    idx = () if idx is None else idx
    old = _ref(ref, "swap")[idx]
    ref.write(ref._updated(idx, value, "swap", "set"))
    return old


def addupdate(ref: Ref, idx: Any, value: Any) -> None:
    """``ref[idx] += value`` (``jax.ref.addupdate``), with JAX's exact-shape check."""
    idx = () if idx is None else idx
    _ref(ref, "addupdate").write(ref._updated(idx, value, "addupdate", "add"))


def _ref(ref: Any, what: str) -> Ref:
    if not isinstance(ref, Ref):
        raise TypeError(f"{what} expects a fungraph.Ref (made by new_ref), got {type(ref).__name__}")
    return ref


def bind(refs: list[Ref], values: Sequence[Any]) -> None:
    """Inside a staged body that threads ``refs``: they hold their traced stand-ins, and the
    staging frame owns them (puts their outer values back when it closes)."""
    _ref_frames.adopt(refs, innermost_main().level)
    for r, v in zip(refs, values):
        r.write(v)


def threading_refs(fun: Callable[..., Any], refs: list[Ref]) -> Callable[..., Any]:
    """``fun`` taking the references' values first and returning their new values after its
    output: inside, the references hold the traced values (the staging frame owns them)."""
    n = len(refs)

    def with_refs(*args: Any) -> Any:
        bind(refs, args[:n])
        out = fun(*args[n:])
        return out, [r.read() for r in refs]

    functools.update_wrapper(with_refs, fun, updated=())
    return with_refs


def closing_over(fun: Callable[..., Any], refs: dict[int, Ref], n: int) -> Callable[..., Any]:
    """``fun`` with the references at the positions ``refs`` closed over, taking the others."""

    def with_refs(*args: Any) -> Any:
        it = iter(args)
        return fun(*(refs[i] if i in refs else next(it) for i in range(n)))

    functools.update_wrapper(with_refs, fun, updated=())
    return with_refs
