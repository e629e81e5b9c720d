"""``custom_linear_solve``: a user's solve, linear in its right-hand side, transposed with the
user's transpose solve (``lax.custom_linear_solve``). It holds the ``matvec``, ``solve`` and
``transpose_solve`` graphs, so it is a higher-order primitive (its rules run the graphs through
the interpreters), beside ``control_flow``, ``scan`` and ``while_loop`` in the layer order.

Inputs: the constants of ``matvec``, of ``solve`` and of ``transpose_solve``, then the
right-hand side ``b``. Graphs: ``matvec(x, *cm)``, ``solve(b, *cs) -> (x, aux)`` and
``transpose_solve(ct, *ct_consts) -> b-cotangent`` (None: reverse mode is refused)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fungraph.core import Primitive, ShapeError
from fungraph.ir import Graph, ShapedArray
from fungraph.primitives._batching import batch_size, broadcast_batch, to_front
from fungraph.primitives._rules import aval, instantiate, is_undefined, zeros
from fungraph.primitives.elementwise import neg, sub


def _split(args: Sequence[Any], counts: tuple[int, int, int]) -> tuple[list, list, list, list]:
    nm, ns, nt = counts
    args = list(args)
    return args[:nm], args[nm:nm + ns], args[nm + ns:nm + ns + nt], args[nm + ns + nt:]


def _ls_impl(*args: Any, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
             counts: tuple[int, int, int], num_aux: int) -> list[Any]:
    from fungraph.interpreters.eval import eval_graph

    _, cs, _, b = _split(args, counts)
    return eval_graph(solve, *b, *cs)


def _ls_aval(*avals: ShapedArray, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
             counts: tuple[int, int, int], num_aux: int) -> tuple[ShapedArray, ...]:
    _, _, _, b = _split(avals, counts)
    if tuple(b) != solve.in_avals[:len(b)]:
        raise ShapeError(f"custom_linear_solve: solve takes {[str(a) for a in solve.in_avals[:len(b)]]}, "
                         f"got b {[str(a) for a in b]}")
    return solve.out_avals


linear_solve_p = Primitive("custom_linear_solve", impl=_ls_impl, abstract_eval=_ls_aval, multiple_results=True)


@linear_solve_p.def_jvp
def _ls_jvp(primals: tuple, tangents: tuple, *, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
            counts: tuple[int, int, int], num_aux: int) -> tuple:
    """x = A(theta)^-1 b, so dx = A^-1 (db - (dA/dtheta . dtheta) x): one more solve of the
    same kind, linear in its right-hand side. The constants of the solves carry no tangent."""
    from fungraph.interpreters.eval import eval_graph
    from fungraph.interpreters.jvp import jvp_flat

    params = dict(matvec=matvec, solve=solve, transpose_solve=transpose_solve, counts=counts, num_aux=num_aux)
    cm, cs, ct, b = _split(primals, counts)
    tm, _, _, tb = _split(tangents, counts)
    outs = linear_solve_p.bind(*primals, **params)
    n_x = len(outs) - num_aux
    x = outs[:n_x]
    rhs = list(tb)
    if any(t is not None for t in tm):
        _, moved = jvp_flat(lambda *c: eval_graph(matvec, *x, *c), cm, tm)
        rhs = [neg(m) if r is None else sub(r, m) for r, m in zip(rhs, moved)]
    if all(r is None for r in rhs):
        return outs, [None] * len(outs)
    rhs = [instantiate(r, aval(v)) for r, v in zip(rhs, b)]
    t_outs = linear_solve_p.bind(*cm, *cs, *ct, *rhs, **params)
    return outs, list(t_outs[:n_x]) + [None] * num_aux


@linear_solve_p.def_transpose
def _ls_transpose(cts: Sequence[Any], *args: Any, matvec: Graph, solve: Graph, transpose_solve: Graph | None,
                  counts: tuple[int, int, int], num_aux: int) -> tuple:
    from fungraph.interpreters.eval import eval_graph

    cm, cs, ct, b = _split(args, counts)
    if any(is_undefined(a) for a in cm + cs + ct):
        raise TypeError("custom_linear_solve is linear in b only, not in the constants of matvec or solve")
    if transpose_solve is None:
        raise TypeError("custom_linear_solve: reverse-mode differentiation needs transpose_solve "
                        "(or symmetric=True)")
    n_x = len(solve.outvars) - num_aux
    ct_x = [zeros(v.aval) if c is None else c for c, v in zip(cts[:n_x], solve.outvars)]
    ct_b = eval_graph(transpose_solve, *ct_x, *ct)
    return (None,) * (len(args) - len(b)) + tuple(ct_b)


@linear_solve_p.def_batch
def _ls_batch(args: Sequence[Any], dims: Sequence[int | None], *, matvec: Graph, solve: Graph,
              transpose_solve: Graph | None, counts: tuple[int, int, int], num_aux: int) -> tuple:
    """Every graph mapped over the batch: the right-hand side (and so the solution and every
    cotangent) batched on axis 0, each constant as it comes."""
    from fungraph.interpreters.graph_transforms import batched_graph

    size = batch_size(args, dims)
    cm, cs, ct, b = _split([to_front(a, d) for a, d in zip(args, dims)], counts)
    dm, ds, dt, _ = _split([None if d is None else 0 for d in dims], counts)
    b = [broadcast_batch(v, d, size) for v, d in zip(b, dims[len(dims) - len(b):])]
    n_x = len(solve.outvars) - num_aux
    x_avals = [ShapedArray((size,) + v.aval.shape, v.aval.dtype) for v in solve.outvars[:n_x]]

    def mapped(g: Graph | None, lead: Sequence[ShapedArray], consts: list[Any], cdims: list[Any]) -> Graph | None:
        if g is None:
            return None
        return batched_graph(g, (0,) * len(lead) + tuple(cdims), size, tuple(lead) + tuple(aval(c) for c in consts))

    b_avals = [aval(v) for v in b]
    new = dict(matvec=mapped(matvec, x_avals, cm, dm), solve=mapped(solve, b_avals, cs, ds),
               transpose_solve=mapped(transpose_solve, x_avals, ct, dt), counts=counts, num_aux=num_aux)
    outs = linear_solve_p.bind(*cm, *cs, *ct, *b, **new)
    return outs, [0] * len(outs)
