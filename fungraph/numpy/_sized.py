"""numpy functions whose result shape depends on the data (``nonzero``, ``flatnonzero``,
``argwhere``) with JAX's ``size=``/``fill_value=`` contract, and ``vectorize`` /
``apply_along_axis`` built on ``vmap``.

Eagerly, without ``size``, they return numpy's answer. Traced, the output shape must be known
when tracing: ``size`` fixes it (the first ``size`` hits in order, padded with ``fill_value``),
and without it the call raises a :class:`~fungraph.core.ConcretizationError` that says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph.core import ConcretizationError, Tracer
from fungraph.numpy._util import asarray, aval


def _fnp() -> Any:
    from fungraph import numpy as fnp

    return fnp


def _flat_hits(a: Any, size: int | None, fill_value: Any, name: str) -> tuple[Any, Any]:
    """Flat indices of the nonzero entries of ``a``, in order, as an int64 array of ``size``,
    and which of the ``size`` slots hold a hit (None eagerly without ``size``)."""
    fnp = _fnp()
    x = asarray(a)
    if size is None:
        if isinstance(x, Tracer):
            raise ConcretizationError(
                f"{name} of a traced {aval(x)} has a data-dependent shape; pass size= (the number of "
                "indices to return, padded with fill_value) as in JAX")
        return np.flatnonzero(np.asarray(x)), None
    size = int(size)
    if size < 0:
        raise ValueError(f"{name}: size must be >= 0, got {size}")
    flat = fnp.ravel(x)
    n = aval(flat).shape[0]
    hit = fnp.not_equal(flat, np.zeros((), aval(flat).dtype))
    order = fnp.argsort(fnp.logical_not(hit), stable=True)
    if size > n:
        order = fnp.concatenate([order, np.zeros(size - n, np.int64)])
    first = order[:size]
    fill = 0 if fill_value is None else fill_value
    kept = fnp.less(np.arange(size), fnp.count_nonzero(hit))
    return fnp.where(kept, first, np.asarray(fill, np.int64)), kept


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Flat indices of the nonzero entries (JAX's ``size``/``fill_value`` when traced)."""
    return _flat_hits(a, size, fill_value, "flatnonzero")[0]


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """Per-axis indices of the nonzero entries; ``fill_value`` may be one value per axis."""
    fnp = _fnp()
    x = asarray(a)
    shape = aval(x).shape
    if not shape:
        raise ValueError("nonzero of a 0-d array is not supported (numpy deprecated it); use atleast_1d")
    fills = fill_value if isinstance(fill_value, (tuple, list)) else (fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries for an array of rank {len(shape)}")
    flat, kept = _flat_hits(x, size, 0, "nonzero")
    if size is None:
        return tuple(np.unravel_index(flat, shape))
    coords = fnp.unravel_index(flat, shape)
    return tuple(c if f is None else fnp.where(kept, c, np.asarray(f, np.int64)) for c, f in zip(coords, fills))


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """``nonzero``'s indices stacked as rows, shape ``(hits, ndim)``."""
    return _fnp().stack(nonzero(a, size=size, fill_value=fill_value), axis=1)


_DIMS = r"\(([\w,\s]*)\)"


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """``"(m,n),(n)->(m)"`` as the core dimension names of each input and output."""
    sig = signature.replace(" ", "")
    match = re.fullmatch(rf"((?:{_DIMS},?)+)->((?:{_DIMS},?)+)", sig)
    if match is None:
        raise ValueError(f"vectorize: not a generalised-ufunc signature: {signature!r}")
    ins, outs = sig.split("->")
    parse = lambda part: [tuple(d for d in g.split(",") if d) for g in re.findall(_DIMS, part)]  # noqa: E731
    return parse(ins), parse(outs)


def vectorize(pyfunc: Callable[..., Any], *, excluded: Sequence[int | str] = (), signature: str | None = None
              ) -> Callable[..., Any]:
    """``pyfunc`` mapped over the broadcast loop dimensions of its arguments with ``vmap`` (JAX's
    ``jnp.vectorize``); ``signature`` names the core dimensions each call sees, ``excluded``
    positions or names of arguments passed through unmapped."""
    import functools

    from fungraph.api import vmap

    ins = _parse_signature(signature)[0] if signature else None

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        fnp = _fnp()
        fixed = {i: a for i, a in enumerate(args) if i in excluded}
        fixed_kw = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kw = {k: v for k, v in kwargs.items() if k not in excluded}
        if mapped_kw:
            raise TypeError(f"vectorize: keyword arguments must be excluded, got {sorted(mapped_kw)}")
        mapped = [asarray(a) for i, a in enumerate(args) if i not in excluded]
        cores = ins if ins is not None else [()] * len(mapped)
        if len(cores) != len(mapped):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(cores)} inputs, got {len(mapped)}")
        loops = []
        sizes: dict[str, int] = {}
        for a, core in zip(mapped, cores):
            shape = aval(a).shape
            if len(shape) < len(core):
                raise ValueError(f"vectorize: input {aval(a)} has fewer dimensions than its core {core}")
            for name, d in zip(core, shape[len(shape) - len(core):]):
                if sizes.setdefault(name, d) != d:
                    raise ValueError(f"vectorize: core dimension {name!r} is {sizes[name]} and {d}")
            loops.append(shape[:len(shape) - len(core)])
        loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
        count = int(np.prod(loop, dtype=np.int64))
        flat = [fnp.reshape(fnp.broadcast_to(a, loop + aval(a).shape[len(s):]), (count,) + aval(a).shape[len(s):])
                for a, s in zip(mapped, loops)]

        def call(*xs: Any) -> Any:
            it = iter(xs)
            full = [fixed[i] if i in fixed else next(it) for i in range(len(args))]
            return pyfunc(*full, **fixed_kw)

        out = vmap(call)(*flat)
        from fungraph.tree_util import tree_map

        return tree_map(lambda o: fnp.reshape(o, loop + aval(o).shape[1:]), out)

    return wrapped


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``func1d`` applied to each 1-d slice along ``axis`` (with ``vmap``); its result's axes
    replace ``axis``, as in numpy."""
    fnp = _fnp()
    from fungraph.api import vmap
    from fungraph.numpy._util import normalize_axes

    x = asarray(arr)
    (ax,) = normalize_axes(axis, aval(x).ndim, "apply_along_axis")
    moved = fnp.moveaxis(x, ax, -1)
    lead = aval(moved).shape[:-1]
    flat = fnp.reshape(moved, (int(np.prod(lead, dtype=np.int64)), aval(moved).shape[-1]))
    out = vmap(lambda row: asarray(func1d(row, *args, **kwargs)))(flat)
    out = fnp.reshape(out, lead + aval(out).shape[1:])
    extra = aval(out).ndim - len(lead)
    rank = len(lead)
    return fnp.transpose(out, (*range(ax), *range(rank, rank + extra), *range(ax, rank)))

