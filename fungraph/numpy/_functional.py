"""Functional programming in ``fungraph.numpy``: ``vectorize`` and ``apply_along_axis`` built
on ``vmap``, ``apply_over_axes`` and ``piecewise``."""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph.numpy._util import asarray, aval, namespace

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
        fnp = namespace()
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
    fnp = namespace()
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


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Any) -> Any:
    """``func(a, axis)`` applied for each axis in turn, each result kept at ``a``'s rank (a
    reduced axis is put back with length 1)."""
    fnp = namespace()
    out = asarray(a)
    for ax in ([axes] if np.ndim(axes) == 0 else list(axes)):
        ax = int(ax) % builtins.max(out.ndim, 1)
        res = asarray(func(out, ax))
        if res.ndim != out.ndim:
            res = fnp.expand_dims(res, ax)
        if res.ndim != out.ndim:
            raise ValueError("apply_over_axes: function is not returning an array of the correct shape")
        out = res
    return out


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[k]`` (a function of ``x`` or a constant) where ``condlist[k]`` holds, the last
    true condition winning; an extra last function gives the value where none holds (else 0).
    The result has ``x``'s dtype. Each function is applied to the whole of ``x`` and its values
    selected, which agrees with numpy and JAX for elementwise functions."""
    fnp = namespace()
    xa = asarray(x)
    if isinstance(condlist, (list, tuple)):
        conds = [asarray(c) for c in condlist]
    else:
        c = asarray(condlist)
        conds = [c] if c.ndim <= xa.ndim else [c[i] for i in range(c.shape[0])]
    n, nf = len(conds), len(funclist)
    if nf not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} condition(s), either {n} or {n + 1} functions are expected; got {nf}")

    def value(f: Any) -> Any:
        out = f(xa, *args, **kw) if callable(f) else f
        return fnp.broadcast_to(fnp.asarray(out).astype(xa.dtype), xa.shape)

    out = value(funclist[n]) if nf == n + 1 else fnp.zeros(xa.shape, xa.dtype)
    for c, f in zip(conds, funclist):
        out = fnp.where(c.astype(bool), value(f), out)
    return out
