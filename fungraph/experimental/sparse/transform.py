"""``sparsify``: run a function written with ``fungraph.numpy`` on BCOO arguments, as
``jax.experimental.sparse.sparsify``. The function is traced with dense stand-ins of the
sparse arguments; its graph is then interpreted equation by equation, binding each primitive
as usual where every input is dense and calling the primitive's sparse rule where one is a
BCOO. The BCOO operators (``A @ X``, ``2 * A``, ``A.sum()``) are sparsified ``fungraph.numpy``
functions, as JAX's are; ``grad`` and ``value_and_grad`` differentiate a sparse argument's data.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from fungraph import api, dtypes
from fungraph import numpy as fnp
from fungraph.core import as_typed_constant, get_primitive
from fungraph.experimental.sparse.bcoo import (
    BCOO,
    JAXSparse,
    bcoo_concatenate,
    bcoo_dot_general,
    bcoo_multiply_dense,
    bcoo_reduce_sum,
    bcoo_reshape,
    bcoo_sum_duplicates,
    bcoo_transpose,
)
from fungraph.experimental.sparse.bcoo_multiply import bcoo_multiply_sparse
from fungraph.experimental.sparse.bcoo_slicing import (
    bcoo_broadcast_in_dim,
    bcoo_dynamic_slice,
    bcoo_getitem,
    bcoo_rev,
    bcoo_slice,
    bcoo_squeeze,
)
from fungraph.experimental.sparse.bcsr import BCSR
from fungraph.interpreters.staging import abstractify, stage
from fungraph.ir import Graph, Literal, ShapedArray
from fungraph.tree_util import tree_flatten, tree_unflatten

__all__ = ["grad", "sparsify", "value_and_grad"]

def _is_sparse(x: Any) -> bool:
    return isinstance(x, JAXSparse)


def sparsify(f: Callable[..., Any], use_tracer: bool = False) -> Callable[..., Any]:
    """``f`` taking BCOO (and BCSR) arrays wherever it takes arrays: the operations that
    have a sparse rule (products with dense arrays, elementwise products, sums, transposes,
    sums of arrays of one sparsity, zero-preserving elementwise functions) keep the data
    sparse; any other operation on a sparse value raises ``NotImplementedError``."""
    del use_tracer

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, in_tree = tree_flatten((args, kwargs), is_leaf=_is_sparse)
        values = [x.to_bcoo() if isinstance(x, BCSR) else x for x in leaves]
        avals = [ShapedArray(x.shape, x.dtype) if isinstance(x, BCOO) else abstractify(x) for x in values]
        weak = [not isinstance(x, BCOO) and dtypes.is_weak(x) for x in values]
        out_tree: list[Any] = []

        def flat(*xs: Any) -> list[Any]:
            a, k = tree_unflatten(in_tree, xs)
            outs, tree = tree_flatten(f(*a, **k))
            out_tree.append(tree)
            return outs

        graph, closure = stage(flat, avals, weak)
        outs = eval_sparse(graph, [*values, *closure])
        return tree_unflatten(out_tree[0], outs)

    return wrapped


def eval_sparse(graph: Graph, args: Sequence[Any]) -> list[Any]:
    """Evaluate ``graph`` on values some of which are BCOO arrays."""
    env: dict[Any, Any] = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, map(as_typed_constant, graph.consts)))

    def read(atom: Any) -> Any:
        return as_typed_constant(atom.array) if isinstance(atom, Literal) else env[atom]

    for eqn in graph.eqns:
        values = [read(a) for a in eqn.inputs]
        params = eqn.params.kwargs()
        if any(isinstance(v, BCOO) for v in values):
            outs = _sparse_rule(eqn)(*values, **params)
        else:
            outs = eqn.primitive.bind(*values, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outputs, outs))
    return [read(a) for a in graph.outvars]


def _sparse_rule(eqn: Any) -> Callable[..., list[Any]]:
    name = eqn.primitive.name
    rule = _RULES.get(name)
    where = f" (at {eqn.source})" if eqn.source else ""
    if rule is None and name in _DENSIFYING:
        raise NotImplementedError(f"sparsify: `{name}` of a sparse array{where} would give a dense result; "
                                  "convert the argument with .todense() if that is your intent")
    if rule is None:
        raise NotImplementedError(f"sparsify: no sparse rule for `{name}`{where}; fungraph's sparsify supports "
                                  f"{', '.join(sorted(_RULES))}; convert the argument with .todense()")
    return rule


def _rebuilt(mat: BCOO, data: Any) -> BCOO:
    return BCOO((data, mat.indices), shape=mat.shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def _unary(name: str, linear: bool) -> Callable[..., list[Any]]:
    """A zero-preserving elementwise function applied to the data; a nonlinear one sums
    duplicate entries first."""

    def rule(mat: BCOO, **params: Any) -> list[Any]:
        if not linear and not mat.unique_indices:
            mat = bcoo_sum_duplicates(mat, nse=mat.nse)
        return [_rebuilt(mat, get_primitive(name).bind(mat.data, **params))]

    return rule


def _dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                 preferred_element_type: Any = None, **_: Any) -> list[Any]:
    return [bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers, precision=precision,
                             preferred_element_type=preferred_element_type)]


def _mul(x: Any, y: Any, **_: Any) -> list[Any]:
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        if x.indices is y.indices and x.unique_indices:
            return [_rebuilt(x, x.data * y.data)]
        return [bcoo_multiply_sparse(x, y)]
    mat, dense = (x, y) if isinstance(x, BCOO) else (y, x)
    return [_rebuilt(mat, bcoo_multiply_dense(mat, dense))]


def _div(x: Any, y: Any, **_: Any) -> list[Any]:
    if isinstance(y, BCOO) or fnp.ndim(y) != 0:
        raise NotImplementedError("sparsify: division is supported for a sparse array divided by a scalar")
    return [_rebuilt(x, x.data / y)]


def _add(x: Any, y: Any, **_: Any) -> list[Any]:
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        return [_sparse_sum(x, y)]
    mat, dense = (x, y) if isinstance(x, BCOO) else (y, x)
    out_shape = fnp.broadcast_shapes(mat.shape, fnp.shape(dense))
    if tuple(fnp.shape(dense)) != tuple(out_shape):
        raise NotImplementedError(f"sparsify: adding a sparse array of shape {mat.shape} to a dense one of shape "
                                  f"{tuple(fnp.shape(dense))} would broadcast the sparse array; convert it with "
                                  ".todense()")
    return [mat.todense() + dense if mat is x else dense + mat.todense()]


def _sparse_sum(x: BCOO, y: BCOO) -> BCOO:
    """The sum of two sparse arrays: their data added where they share their indices, else
    their entries concatenated."""
    if x.shape != y.shape:
        raise NotImplementedError(f"sparsify: adding sparse arrays of shapes {x.shape} and {y.shape}")
    if x.indices is y.indices:
        return _rebuilt(x, x.data + y.data)
    if (x.n_batch, x.n_dense) != (y.n_batch, y.n_dense):
        raise NotImplementedError("sparsify: adding sparse arrays with different batch or dense dimensions")
    axis = x.n_batch
    indices = fnp.concatenate([x.indices, y.indices.astype(x.indices.dtype)], axis=axis)
    return BCOO((fnp.concatenate([x.data, y.data], axis=axis), indices), shape=x.shape)


def _sub(x: Any, y: Any, **params: Any) -> list[Any]:
    if isinstance(y, BCOO):
        return _add(x, _rebuilt(y, -y.data))
    return _add(x, -y)


def _reduce_sum(mat: BCOO, *, axes: Sequence[int], **_: Any) -> list[Any]:
    out = bcoo_reduce_sum(mat, axes=axes)
    return [fnp.sum(out.data)] if out.shape == () else [out]


def _transpose(mat: BCOO, *, permutation: Sequence[int], **_: Any) -> list[Any]:
    return [bcoo_transpose(mat, permutation=permutation)]


def _reshape(mat: BCOO, *, new_sizes: Sequence[int], dimensions: Any = None, **_: Any) -> list[Any]:
    new_sizes = tuple(new_sizes)
    unit_only = [s for s in mat.shape if s != 1] == [s for s in new_sizes if s != 1]
    if dimensions is None and unit_only and (mat.n_batch or mat.n_dense):
        return [_units_changed(mat, new_sizes)]
    return [bcoo_reshape(mat, new_sizes=new_sizes, dimensions=dimensions)]


def _units_changed(mat: BCOO, new_sizes: tuple[int, ...]) -> BCOO:
    """A reshape that only removes and inserts size-1 axes (fungraph's squeeze and expand_dims):
    a squeeze, then a ``broadcast_in_dim`` placing the other axes."""
    squeezed = bcoo_squeeze(mat, dimensions=[d for d, s in enumerate(mat.shape) if s == 1])
    placed = [d for d, s in enumerate(new_sizes) if s != 1]
    return bcoo_broadcast_in_dim(squeezed, shape=new_sizes, broadcast_dimensions=placed)


def _slice(mat: BCOO, *, start_indices: Sequence[int], limit_indices: Sequence[int], strides: Any = None,
           **_: Any) -> list[Any]:
    return [bcoo_slice(mat, start_indices=start_indices, limit_indices=limit_indices, strides=strides)]


def _rev(mat: BCOO, *, dimensions: Sequence[int], **_: Any) -> list[Any]:
    return [bcoo_rev(mat, dimensions)]


def _take(mat: Any, idx: Any, *, axis: int, **_: Any) -> list[Any]:
    """``take`` at a scalar index (``x[i]`` with a traced ``i``): a dynamic slice of size 1 along
    ``axis`` (negative indices counted from the end, clamped into range, as ``take``), squeezed."""
    if not isinstance(mat, BCOO) or fnp.ndim(idx) != 0:
        raise NotImplementedError("sparsify: `take` of a sparse array at an index array (JAX's bcoo_gather) is not "
                                  "supported by fungraph; convert it with .todense()")
    starts: list[Any] = [0] * mat.ndim
    starts[axis] = idx
    sizes = list(mat.shape)
    sizes[axis] = 1
    return [bcoo_squeeze(bcoo_dynamic_slice(mat, starts, sizes), dimensions=(axis,))]


def _broadcast_in_dim(mat: BCOO, *, shape: Sequence[int], broadcast_dimensions: Sequence[int], **_: Any) -> list[Any]:
    return [bcoo_broadcast_in_dim(mat, shape=shape, broadcast_dimensions=broadcast_dimensions)]


def _integer_pow(mat: BCOO, *, y: int) -> list[Any]:
    if y <= 0:
        raise NotImplementedError(f"sparsify: x ** {y} of a sparse array would give a dense result")
    return _unary("integer_pow", linear=False)(mat, y=y)


def _concatenate(*operands: Any, axis: int, **_: Any) -> list[Any]:
    if not all(isinstance(op, BCOO) for op in operands):
        raise NotImplementedError("sparsify: concatenating sparse and dense arrays is not supported; convert the "
                                  "sparse ones with .todense()")
    return [bcoo_concatenate(operands, dimension=axis)]


def _jit_call(*args: Any, call: Any, **_: Any) -> list[Any]:
    return eval_sparse(call, args)


_LINEAR = ("neg", "real", "imag", "conj", "convert_element_type")
_NONLINEAR = ("abs", "asin", "atan", "atanh", "bessel_i1e", "expm1", "log1p", "sign", "sin", "sinh", "sqrt", "tan",
              "tanh")
_DENSIFYING = frozenset(("acos", "acosh", "bessel_i0e", "cos", "cosh", "eq", "exp", "ge", "gt", "le", "log", "lt",
                         "ne", "xor"))

_RULES: dict[str, Callable[..., list[Any]]] = {
    **{name: _unary(name, linear=True) for name in _LINEAR},
    **{name: _unary(name, linear=False) for name in _NONLINEAR},
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "dot_general": _dot_general, "reduce_sum": _reduce_sum,
    "transpose": _transpose, "reshape": _reshape, "integer_pow": _integer_pow, "jit_call": _jit_call,
    "concatenate": _concatenate, "slice": _slice, "rev": _rev, "broadcast_in_dim": _broadcast_in_dim,
    "take": _take,
}


def _swapped(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: f(b, a)


def _sum(self: BCOO, *args: Any, **kwargs: Any) -> Any:
    """The sum over ``axis`` (all by default): a BCOO, or a dense scalar for a full sum."""
    return sparsify(lambda x: fnp.sum(x, *args, **kwargs))(self)


_BCOO_METHODS: dict[str, Any] = {
    "sum": _sum,
    "__matmul__": sparsify(fnp.matmul), "__rmatmul__": sparsify(_swapped(fnp.matmul)),
    "__mul__": sparsify(fnp.multiply), "__rmul__": sparsify(_swapped(fnp.multiply)),
    "__truediv__": sparsify(fnp.divide),
    "__add__": sparsify(fnp.add), "__radd__": sparsify(_swapped(fnp.add)),
    "__sub__": sparsify(fnp.subtract), "__rsub__": sparsify(_swapped(fnp.subtract)),
    "__neg__": sparsify(fnp.negative), "__abs__": sparsify(fnp.abs), "__pos__": lambda self: self,
    "__getitem__": bcoo_getitem, "__iter__": lambda self: (self[i] for i in range(self.shape[0])),
}
for _name, _method in _BCOO_METHODS.items():
    setattr(BCOO, _name, _method)
for _name in ("__matmul__", "__rmatmul__"):
    setattr(BCSR, _name, _BCOO_METHODS[_name])


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   **kwargs: Any) -> Callable[..., Any]:
    """``fungraph.value_and_grad`` where a sparse argument is differentiated through its data:
    its gradient is a BCOO of the same indices, as ``jax.experimental.sparse.value_and_grad``."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fun)
    def vg(*args: Any, **call_kwargs: Any) -> Any:
        sparse_at = {i: args[i] for i in nums if isinstance(args[i], BCOO)}

        def on_data(*xs: Any) -> Any:
            full = [_rebuilt(sparse_at[i], x) if i in sparse_at else x for i, x in enumerate(xs)]
            return fun(*full, **call_kwargs)

        plain = [a.data if i in sparse_at else a for i, a in enumerate(args)]
        value, grads = api.value_and_grad(on_data, argnums, has_aux=has_aux, **kwargs)(*plain)
        if isinstance(argnums, int):
            return value, (_rebuilt(sparse_at[argnums], grads) if argnums in sparse_at else grads)
        return value, tuple(_rebuilt(sparse_at[i], g) if i in sparse_at else g for i, g in zip(nums, grads))

    return vg


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         **kwargs: Any) -> Callable[..., Any]:
    """``fungraph.grad`` where a sparse argument's gradient is a BCOO of its indices."""
    vg = value_and_grad(fun, argnums, has_aux, **kwargs)

    @functools.wraps(fun)
    def g(*args: Any, **call_kwargs: Any) -> Any:
        value, grads = vg(*args, **call_kwargs)
        return (grads, value[1]) if has_aux else grads

    return g
