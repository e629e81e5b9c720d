"""dot, matmul, einsum, outer, tensordot, matvec and vecmat, all lowered to ``dot_general``, and
``einsum_path`` (the contraction order ``einsum`` takes)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import ShapeError, Tracer
from fungraph.numpy._util import asarray, cast, promote
from fungraph.primitives import elementwise as ew
from fungraph.primitives import reductions as red
from fungraph.primitives import shape as sh
from fungraph.primitives.linalg import dot_general
from fungraph.primitives.shape import reshape

_PRECISIONS = {"default", "high", "highest", "bfloat16", "tensorfloat32", "float32", "fastest"}


def check_precision(precision: Any, name: str) -> None:
    """Accept JAX's ``precision`` values (None, a name, a ``lax.Precision``, or a pair of them)
    and refuse anything else: every backend computes in the operands' dtype, so the value
    changes nothing, but a misspelt one should not pass silently."""
    for p in precision if isinstance(precision, tuple) and len(precision) == 2 else (precision,):
        label = getattr(p, "name", p)
        if p is not None and not (isinstance(label, str) and label.lower() in _PRECISIONS):
            raise TypeError(f"{name}: precision={precision!r} is not one of None, {sorted(_PRECISIONS)}, "
                            "a lax.Precision or a pair of them")


def _pair(a: Any, b: Any, precision: Any = None, preferred_element_type: Any = None,
          name: str = "dot") -> tuple[Any, Any]:
    """Both operands at their common dtype, or at ``preferred_element_type`` when given (JAX's
    result dtype; computed by casting the operands)."""
    check_precision(precision, name)
    x, y = promote(a, b)
    x, y = asarray(x), asarray(y)
    if preferred_element_type is not None:
        dt = dtypes.canonicalize(preferred_element_type)
        x, y = ew.strong(cast(x, dt)), ew.strong(cast(y, dt))  # a requested dtype is strong, as in JAX
    return x, y


def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    x, y = _pair(a, b, precision, preferred_element_type, "dot")
    if x.ndim == 0 or y.ndim == 0:
        return ew.mul(x, y)
    yc = 0 if y.ndim == 1 else y.ndim - 2
    if x.shape[-1] != y.shape[yc]:
        raise ShapeError(f"dot: shapes {x.shape} and {y.shape} not aligned: {x.shape[-1]} (dim {x.ndim - 1}) "
                         f"!= {y.shape[yc]} (dim {yc})")
    out = dot_general(x, y, (((x.ndim - 1,), (yc,)), ((), ())))
    return out


def matmul(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    x, y = _pair(a, b, precision, preferred_element_type, "matmul")
    if x.ndim == 2 and y.ndim == 2 and x.shape[1] == y.shape[0]:
        return dot_general(x, y, (((1,), (0,)), ((), ())))
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: input operand does not have enough dimensions (shapes {x.shape} and {y.shape})")
    x2 = sh.reshape(x, (1,) + x.shape) if x.ndim == 1 else x
    y2 = sh.reshape(y, y.shape + (1,)) if y.ndim == 1 else y
    if x2.shape[-1] != y2.shape[-2]:
        raise ShapeError(f"matmul: mismatch in the contracted dimension: {x.shape} @ {y.shape} "
                         f"({x2.shape[-1]} != {y2.shape[-2]})")
    try:
        batch = tuple(np.broadcast_shapes(x2.shape[:-2], y2.shape[:-2]))
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions of {x.shape} and {y.shape} do not broadcast") from None
    x3 = sh.broadcast_to(x2, batch + x2.shape[-2:])
    y3 = sh.broadcast_to(y2, batch + y2.shape[-2:])
    nb = len(batch)
    out = dot_general(x3, y3, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    shape = batch + ((x.shape[-2],) if x.ndim > 1 else ()) + ((y.shape[-1],) if y.ndim > 1 else ())
    return sh.reshape(out, shape)


def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``sum(conj(a) * b)`` over the flattened arrays (numpy conjugates the first argument)."""
    x, y = _pair(a, b, precision, preferred_element_type, "vdot")
    if dtypes.is_complex(x.dtype):
        x = ew.conj(x)
    return dot(sh.reshape(x, (x.size,)), sh.reshape(y, (y.size,)))


def outer(a: Any, b: Any, out: Any = None) -> Any:
    if out is not None:
        raise TypeError("outer: out= is not supported (arrays are immutable); use the return value")
    x, y = _pair(a, b)
    return ew.mul(sh.reshape(x, (x.size, 1)), sh.reshape(y, (1, y.size)))


def inner(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    x, y = _pair(a, b, precision, preferred_element_type, "inner")
    if x.ndim == 0 or y.ndim == 0:
        return ew.mul(x, y)
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def tensordot(a: Any, b: Any, axes: Any = 2, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    x, y = _pair(a, b, precision, preferred_element_type, "tensordot")
    if isinstance(axes, int):
        xa = tuple(range(x.ndim - axes, x.ndim))
        ya = tuple(range(axes))
    else:
        xa, ya = axes
        xa = (xa,) if isinstance(xa, int) else tuple(xa)
        ya = (ya,) if isinstance(ya, int) else tuple(ya)
    xa = tuple(a % x.ndim for a in xa)
    ya = tuple(a % y.ndim for a in ya)
    return dot_general(x, y, ((xa, ya), ((), ())))


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse_einsum(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    """Each operand's index letters and the output's, with every ``...`` spelled out as fresh
    letters (right-aligned across operands, as numpy broadcasts them)."""
    subscripts = subscripts.replace(" ", "")
    lhs, arrow, out = subscripts.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ndims):
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(ndims)} operands")
    for part in [*ins, out]:
        if part.replace("...", "").count(".") or not part.replace("...", "").isalpha() and part.replace("...", ""):
            raise ValueError(f"einsum: subscripts {subscripts!r} may hold only letters, ',', '->' and '...'")
    ell = [nd - len(spec.replace("...", "")) if "..." in spec else 0 for spec, nd in zip(ins, ndims)]
    if min(ell, default=0) < 0:
        bad = next(i for i, e in enumerate(ell) if e < 0)
        raise ShapeError(f"einsum: subscripts '{ins[bad]}' name more axes than operand {bad} has ({ndims[bad]})")
    width = max(ell, default=0)
    fresh = "".join(c for c in _LETTERS if c not in subscripts)[:width]
    if len(fresh) < width:
        raise ValueError(f"einsum: too many axes under '...' ({width}) for the unused index letters")
    ins = [spec.replace("...", fresh[width - e:]) for spec, e in zip(ins, ell)]
    if arrow:
        out = out.replace("...", fresh)
    else:
        letters = "".join(ins)
        out = fresh + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fresh))
    return ins, out


def _take_diagonals(x: Any, spec: str) -> tuple[Any, str]:
    """``x`` with each index its subscripts repeat ('ii') reduced to the diagonal, as one axis."""
    from fungraph.numpy._manip import diagonal

    while len(set(spec)) != len(spec):
        c = next(c for c in spec if spec.count(c) > 1)
        i = spec.index(c)
        j = spec.index(c, i + 1)
        x = diagonal(x, 0, i, j)
        spec = "".join(d for k, d in enumerate(spec) if k not in (i, j)) + c
    return x, spec


def _reduce_own(x: Any, spec: str, keep: set[str]) -> tuple[Any, str]:
    """Sum out indices that only this operand has and nobody needs later."""
    axes = tuple(i for i, c in enumerate(spec) if c not in keep)
    return red.reduce_sum(x, axes), "".join(c for c in spec if c in keep)


def _broadcast_ones(xs: list[Any], ins: list[str], sizes: dict[str, int]) -> tuple[list[Any], list[str]]:
    """Drop the size-1 axes that broadcast against a larger size of the same index elsewhere."""
    out_xs, out_ins = [], []
    for x, spec in zip(xs, ins):
        drop = [i for i, c in enumerate(spec) if x.shape[i] == 1 and sizes[c] != 1]
        if drop:
            x = sh.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))
            spec = "".join(c for i, c in enumerate(spec) if i not in drop)
        out_xs.append(x)
        out_ins.append(spec)
    return out_xs, out_ins


def _greedy_pair(specs: list[str], out: str, sizes: dict[str, int]) -> tuple[int, int]:
    """The two operands whose product is smallest once indices nobody else needs are summed out
    (opt_einsum's greedy choice; ties to the leftmost pair, so two operands keep their order)."""
    best: tuple[int, int, int] | None = None
    for i in range(len(specs)):
        for j in range(i + 1, len(specs)):
            others = set(out).union(*(s for k, s in enumerate(specs) if k not in (i, j)))
            kept = (set(specs[i]) | set(specs[j])) & others
            cost = int(np.prod([sizes[c] for c in kept], dtype=np.int64))
            if best is None or cost < best[0]:
                best = (cost, i, j)
    assert best is not None
    return best[1], best[2]


def _sublist_letters(sublist: Any) -> str:
    """One interleaved-form sublist (axis labels as ints in [0, 52), or ``...``) as subscripts."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = []
    for label in sublist:
        if label is Ellipsis:
            out.append("...")
        elif isinstance(label, (int, np.integer)) and not isinstance(label, bool) and 0 <= label < len(letters):
            out.append(letters[label])
        else:
            raise ValueError(f"einsum: an interleaved sublist holds ints in [0, 52) or Ellipsis, got {label!r}")
    return "".join(out)


def _interleaved(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """numpy's ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])`` as a subscripts
    string and its operands."""
    operands, sublists = args[0::2], args[1::2]
    if len(args) % 2:
        operands, out = operands[:-1], "->" + _sublist_letters(args[-1])
    else:
        out = ""
    return ",".join(_sublist_letters(s) for s in sublists) + out, operands


def einsum(subscripts: Any, *operands: Any, out: Any = None, optimize: Any = "auto", precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """numpy's and JAX's ``einsum``, lowered to ``dot_general`` and sums: ``...`` broadcasts,
    repeated indices take diagonals, and three or more operands contract in opt_einsum's greedy
    order (smallest intermediate first) unless ``optimize=False`` (left to right). ``precision``
    is accepted and ignored (every backend computes in the operands' dtype);
    ``preferred_element_type`` casts the operands to that dtype first. numpy's interleaved form
    (operands each followed by a list of integer axis labels) is accepted too."""
    if out is not None:
        raise TypeError("einsum: out= is not supported (arrays are immutable); use the return value")
    check_precision(precision, "einsum")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts, *operands))
    xs = [asarray(x) for x in promote(*operands)]
    if preferred_element_type is not None:
        xs = [cast(x, dtypes.canonicalize(preferred_element_type)) for x in xs]
    ins, out_spec = _parse_einsum(subscripts, [x.ndim for x in xs])
    for spec, x in zip(ins, xs):
        if len(spec) != x.ndim:
            raise ShapeError(f"einsum: subscripts '{spec}' do not match operand of shape {x.shape}")
    sizes: dict[str, int] = {}
    for spec, x in zip(ins, xs):
        for c in set(spec):
            own = {d for s, d in zip(spec, x.shape) if s == c}
            if len(own) > 1:
                raise ShapeError(f"einsum: index '{c}' repeats in '{spec}' over axes of sizes "
                                 f"{' and '.join(map(str, sorted(own)))}")
        for c, d in zip(spec, x.shape):
            if sizes.setdefault(c, d) != d and 1 not in (sizes[c], d):
                raise ShapeError(f"einsum: index '{c}' has sizes {sizes[c]} and {d}")
            sizes[c] = builtins.max(sizes[c], d)
    missing = [c for c in out_spec if c not in sizes]
    if missing:
        raise ValueError(f"einsum: output index '{missing[0]}' does not appear in any input")
    if len(set(out_spec)) != len(out_spec):
        raise ValueError(f"einsum: output subscripts '{out_spec}' repeat an index")
    xs, ins = _broadcast_ones(xs, ins, sizes)
    pairs = [_take_diagonals(x, spec) for x, spec in zip(xs, ins)]
    xs, ins = [p[0] for p in pairs], [p[1] for p in pairs]
    for k in range(len(xs)):
        needed = set(out_spec).union(*(s for i, s in enumerate(ins) if i != k))
        xs[k], ins[k] = _reduce_own(xs[k], ins[k], needed)
    while len(xs) > 1:
        i, j = (0, 1) if optimize is False else _greedy_pair(ins, out_spec, sizes)
        rest = set(out_spec).union(*(s for k, s in enumerate(ins) if k not in (i, j)))
        x, x_spec = _reduce_own(xs[i], ins[i], rest | set(ins[j]))
        y, y_spec = _reduce_own(xs[j], ins[j], rest | set(x_spec))
        acc, acc_spec = _contract(x, x_spec, y, y_spec, rest)
        xs = [x for k, x in enumerate(xs) if k not in (i, j)] + [acc]
        ins = [s for k, s in enumerate(ins) if k not in (i, j)] + [acc_spec]
        if optimize is False:
            xs, ins = xs[-1:] + xs[:-1], ins[-1:] + ins[:-1]
    acc, acc_spec = _reduce_own(xs[0], ins[0], set(out_spec))
    for c in out_spec:
        if c not in acc_spec:
            acc = sh.broadcast_in_dim(acc, (*acc.shape, sizes[c]), tuple(range(acc.ndim)))
            acc_spec += c
    return sh.transpose(acc, tuple(acc_spec.index(c) for c in out_spec))


def _contract(x: Any, xs: str, y: Any, ys: str, needed: set[str]) -> tuple[Any, str]:
    batch = [c for c in xs if c in ys and c in needed]
    contract = [c for c in xs if c in ys and c not in needed]
    dims = ((tuple(xs.index(c) for c in contract), tuple(ys.index(c) for c in contract)),
            (tuple(xs.index(c) for c in batch), tuple(ys.index(c) for c in batch)))
    out = dot_general(x, y, dims)
    spec = "".join(batch) + "".join(c for c in xs if c not in ys) + "".join(c for c in ys if c not in xs)
    return out, spec


# --- matrix-vector products and contraction paths -------------------------------------------------


def matvec(x1: Any, x2: Any, /) -> Any:

    v = asarray(x2)
    out = matmul(x1, reshape(v, tuple(v.shape) + (1,)))
    return reshape(out, tuple(out.shape[:-1]))


def vecmat(x1: Any, x2: Any, /) -> Any:

    v = asarray(x1)
    out = matmul(reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1])), x2)
    return reshape(out, tuple(out.shape[:-2]) + (out.shape[-1],))


def einsum_path(subscripts: str, /, *operands: Any, optimize: Any = "auto") -> tuple[list[Any], str]:
    """numpy's ``(path, report)`` for the contraction order fungraph's ``einsum`` takes: the
    greedy order of ``einsum(optimize="auto")`` (``optimize=False``: all operands at once, as
    numpy reports it; an explicit ``['einsum_path', ...]`` is used as given). Only the
    operands' shapes are read; numpy writes the report for that path."""

    shapes = [tuple(np.shape(o)) if not isinstance(o, Tracer) else tuple(o.shape) for o in operands]
    if isinstance(optimize, (list, tuple)):
        path = list(optimize)
    elif optimize is False or len(shapes) < 3:
        path = ["einsum_path", tuple(range(len(shapes)))]
    else:
        ins, out = _parse_einsum(subscripts, [len(s) for s in shapes])
        sizes: dict[str, int] = {}
        for spec, s in zip(ins, shapes):
            for c, dim in zip(spec, s):
                sizes[c] = builtins.max(sizes.get(c, 1), dim)
        specs = [set(spec) for spec in ins]
        path = ["einsum_path"]
        while len(specs) > 1:
            names = ["".join(sorted(s)) for s in specs]
            i, j = _greedy_pair(names, out, sizes)
            rest = set(out).union(*(s for k, s in enumerate(specs) if k not in (i, j)))
            merged = (specs[i] | specs[j]) & rest
            specs = [s for k, s in enumerate(specs) if k not in (i, j)] + [merged]
            path.append((i, j))
    dummies = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
    return np.einsum_path(subscripts, *dummies, optimize=path)
