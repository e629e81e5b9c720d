"""``jax.numpy.ufunc``: an elementwise function with numpy's ufunc methods (``outer``,
``reduce``, ``accumulate``, ``at``, ``reduceat``), and ``frompyfunc`` to make one.

A binary ufunc reduces and accumulates by a left fold along the axis (``lax.scan``), numpy's
order, so any function works, associative or not; the ufuncs ``fungraph.numpy`` defines pass
faster rules (``add.reduce`` is ``sum``, ``add.accumulate`` ``cumsum``); ``maximum.accumulate``
stays a fold, as JAX's, so its derivative splits ties as JAX's does. ``at`` applies
repeated indices one after another, as numpy's ``ufunc.at`` does, and like JAX's needs
``inplace=False``: arrays are immutable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fungraph import dtypes, lax
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._reductions import _keep
from fungraph.numpy._util import asarray, cast, normalize_axes
from fungraph.primitives.reductions import register_monoid


class ufunc:  # noqa: N801 - numpy's and JAX's name
    """An elementwise function of ``nin`` arrays with ``nout`` results, and numpy's methods."""

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *, name: str | None = None,
                 identity: Any = None, reduce: Callable[..., Any] | None = None,
                 accumulate: Callable[..., Any] | None = None, at: Callable[..., Any] | None = None) -> None:
        self._func = func
        self.nin, self.nout, self.nargs = nin, nout, nin + nout
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self._reduce, self._accumulate, self._at = reduce, accumulate, at

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<fungraph.numpy.ufunc '{self.__name__}'>"

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{method} needs a ufunc of two inputs and one output, "
                             f"not nin={self.nin}, nout={self.nout}")

    def outer(self, A: Any, B: Any, /) -> Any:  # noqa: N803 - numpy's names
        """``self(a, b)`` for every pair of elements: shape ``A.shape + B.shape``."""
        from fungraph.numpy._shape import reshape

        self._binary("outer")
        a, b = asarray(A), asarray(B)
        return self(reshape(a, a.shape + (1,) * b.ndim), b)

    def reduce(self, a: Any, axis: Any = 0, dtype: Any = None, out: Any = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Fold ``axis`` (a tuple or None: those axes, flattened) from the left."""
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.reduce: out= is not supported (use the returned value)")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
        x = asarray(a)
        if dtype is not None:
            x = cast(x, dtypes.canonicalize(dtype))
        axes = normalize_axes(axis, x.ndim, f"{self.__name__}.reduce")
        rows = _rows(x, axes)
        mask = None if where is None else _rows(_where(where, x), axes)
        start = initial if initial is not None else self.identity
        if start is None and (rows.shape[0] == 0 or mask is not None):
            why = "where= may leave no element" if mask is not None else "the reduction is empty"
            raise ValueError(f"{self.__name__}.reduce of {x.dtype.name}{list(x.shape)} over axes {axes} needs "
                             f"initial=: {why} and the ufunc has no identity")
        return _keep(self._fold(rows, mask, start), x, axes, keepdims)

    def _fold(self, rows: Any, mask: Any, start: Any) -> Any:
        """The left fold of ``rows`` from ``start`` (from the first row when None), skipping the
        rows ``mask`` leaves out; the first step runs unrolled so the carry has the result's dtype."""
        from fungraph.numpy._elementwise import where as select

        if start is None:
            carry, rest = rows[0], rows[1:]
        else:
            carry, rest = _broadcast(cast(asarray(start), rows.dtype), rows.shape[1:]), rows

        def step(c: Any, row: Any, keep: Any) -> Any:
            new = asarray(self(c, row))
            c = cast(c, new.dtype)
            return new if keep is None else select(keep, new, c)

        if rest.shape[0] == 0:
            return carry
        carry = step(carry, rest[0], None if mask is None else mask[0])
        if rest.shape[0] == 1:
            return carry
        if mask is None:
            return lax.scan(lambda c, r: (cast(step(c, r, None), c.dtype), None), carry, rest[1:])[0]
        return lax.scan(lambda c, it: (cast(step(c, it[0], it[1]), c.dtype), None), carry, (rest[1:], mask[1:]))[0]

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        """Every prefix's fold along ``axis``: ``accumulate(x)[i] = reduce(x[:i + 1])``."""
        from fungraph.numpy._shape import concatenate, moveaxis

        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.accumulate: out= is not supported (use the returned value)")
        x = asarray(a)
        if dtype is not None:
            x = cast(x, dtypes.canonicalize(dtype))
        (ax,) = normalize_axes(axis, x.ndim, f"{self.__name__}.accumulate")
        if self._accumulate is not None:
            return self._accumulate(x, ax)
        rows = moveaxis(x, ax, 0)
        if rows.shape[0] < 2:
            return x
        second = asarray(self(rows[0], rows[1]))

        def step(carry: Any, row: Any) -> tuple[Any, Any]:
            new = cast(asarray(self(carry, row)), carry.dtype)
            return new, new

        _, ys = lax.scan(step, second, rows[2:])
        firsts = [cast(rows[:1], second.dtype), second[None]]
        return moveaxis(concatenate([*firsts, ys], axis=0), 0, ax)

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """``a`` with ``self`` applied at ``indices`` (with ``b``'s values for a binary ufunc),
        repeated indices one after another; ``inplace=False`` is required, as in JAX."""
        if inplace:
            raise NotImplementedError(f"{self.__name__}.at: arrays are immutable; pass inplace=False for the "
                                      "updated copy, as in JAX")
        if (b is None) != (self.nin == 1):
            raise TypeError(f"{self.__name__}.at takes {'no' if self.nin == 1 else 'a'} value argument b")
        if self._at is not None:
            return self._at(asarray(a), indices, b)
        return self._sequential_at(asarray(a), indices, b)

    def _sequential_at(self, x: Any, indices: Any, b: Any) -> Any:
        from fungraph.numpy._indexing import take

        parts = indices if isinstance(indices, tuple) else (indices,)
        if any(isinstance(i, Tracer) for i in parts):
            raise TypeError(f"{self.__name__}.at with a traced index: only the ufuncs with an .at rule (add, "
                            "multiply, maximum, minimum, ...) take one")
        arrays = np.broadcast_arrays(*[np.asarray(i) for i in parts])
        flat = [p.reshape(-1) for p in arrays]
        count = flat[0].size
        values = None
        if b is not None:
            selected = x[tuple(arrays)]
            values = asarray(_broadcast(asarray(b), selected.shape))
            values = values.reshape((count,) + tuple(selected.shape[arrays[0].ndim:]))

        def body(k: Any, acc: Any) -> Any:
            where = tuple(take(f, k, mode="clip") for f in flat)
            current = acc[where]
            new = self(current) if values is None else self(current, take(values, k, axis=0, mode="clip"))
            return acc.at[where].set(cast(asarray(new), acc.dtype))

        return lax.fori_loop(0, count, body, x)

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        """``reduce`` over ``a[indices[i]:indices[i + 1]]`` along ``axis`` for each ``i`` (to the end
        for the last; ``a[indices[i]]`` where the next index is not larger), as numpy's."""
        from fungraph.numpy._shape import moveaxis, stack

        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"{self.__name__}.reduceat: out= is not supported (use the returned value)")
        if isinstance(indices, Tracer):
            raise TypeError(f"{self.__name__}.reduceat needs concrete indices (they set the result's shape)")
        x = asarray(a)
        if dtype is not None:
            x = cast(x, dtypes.canonicalize(dtype))
        (ax,) = normalize_axes(axis, x.ndim, f"{self.__name__}.reduceat")
        idx = np.asarray(indices).reshape(-1)
        n = x.shape[ax]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"{self.__name__}.reduceat: indices {idx.tolist()} out of range for axis {ax} of size {n}")
        rows = moveaxis(x, ax, 0)
        parts = []
        for i, start in enumerate(idx.tolist()):
            stop = idx[i + 1] if i + 1 < idx.size else n
            parts.append(self.reduce(rows[start:stop], axis=0) if start < stop else rows[start])
        return moveaxis(stack(parts, axis=0), 0, ax)


def _where(where: Any, x: Any) -> Any:
    return _broadcast(cast(asarray(where), dtypes.bool_), x.shape)


def _broadcast(v: Any, shape: tuple[int, ...]) -> Any:
    from fungraph.numpy._shape import broadcast_to

    try:
        return broadcast_to(v, shape)
    except ShapeError as err:
        raise ShapeError(f"{v.shape} does not broadcast to {shape}") from err


def _rows(x: Any, axes: tuple[int, ...]) -> Any:
    """``x`` with ``axes`` moved to the front and flattened into one."""
    from fungraph.numpy._shape import reshape, transpose

    kept = tuple(i for i in range(x.ndim) if i not in axes)
    moved = transpose(x, tuple(axes) + kept)
    size = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    return reshape(moved, (size,) + tuple(x.shape[i] for i in kept))


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A :class:`ufunc` from a function of ``nin`` scalars (vectorized with ``vectorize``)."""
    from fungraph.numpy._functional import vectorize

    return ufunc(vectorize(func), nin, nout, name=getattr(func, "__name__", None), identity=identity)


def install(namespace: dict) -> None:
    """Make JAX's ufuncs (``add``, ``maximum``, ...) :class:`ufunc` objects, with the fast
    rules the reductions, cumulative functions and ``.at`` already give."""
    from fungraph.numpy._at import at as _at

    def cumulative(fn: Any) -> Any:
        return lambda x, axis: fn(x, axis=axis)

    def extremum(fn: Any) -> Any:
        def run(a: Any, dtype: Any = None, **kwargs: Any) -> Any:
            return fn(a if dtype is None else cast(asarray(a), dtypes.canonicalize(dtype)), **kwargs)

        return run

    def updating(method: str) -> Any:
        return lambda x, idx, b: getattr(_at(x)[idx], method)(b)

    binary = {
        "add": dict(identity=0, reduce=namespace["sum"], accumulate=cumulative(namespace["cumsum"]),
                    at=updating("add")),
        "multiply": dict(identity=1, reduce=namespace["prod"], accumulate=cumulative(namespace["cumprod"]),
                         at=updating("multiply")),
        "maximum": dict(reduce=extremum(namespace["max"]), at=updating("max")),
        "minimum": dict(reduce=extremum(namespace["min"]), at=updating("min")),
        "subtract": {}, "logical_and": dict(identity=True), "logical_or": dict(identity=False),
        "logical_xor": dict(identity=False), "bitwise_and": dict(identity=-1), "bitwise_or": dict(identity=0),
        "bitwise_xor": dict(identity=0), "logaddexp": dict(identity=-np.inf), "logaddexp2": dict(identity=-np.inf),
    }
    for name, rules in binary.items():
        namespace[name] = ufunc(namespace[name], 2, 1, name=name, **rules)
    namespace["negative"] = ufunc(namespace["negative"], 1, 1, name="negative")
    for name, kind in (("add", "sum"), ("multiply", "prod"), ("maximum", "max"), ("minimum", "min")):
        register_monoid(namespace[name], kind)
