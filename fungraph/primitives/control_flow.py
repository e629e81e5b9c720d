"""``cond``: run one of several branch graphs chosen by an integer index (``switch``; ``cond``
is the two-branch case). Each branch is a closed sub-graph taking the same operands; its
rules (eval, jvp, partial evaluation, transpose, batching) each map the branches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.interpreters.batching import vmap_flat
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.graph_transforms import batched_graph, jvp_graph, partial_eval_graph, transpose_graph
from fungraph.interpreters.staging import stage
from fungraph.ir import Eqn, Graph, Params, ShapedArray, Var
from fungraph.jit import compile_graph
from fungraph.primitives._batching import batch_size, to_front
from fungraph.primitives._rules import aval, is_undefined, zeros
from fungraph.primitives.elementwise import convert, eq, max_p, min_p, select
from fungraph.primitives.graph_utils import force_unknown
from fungraph.primitives.shape import reshape


def _index(i: Any, n: int) -> int:
    return int(np.clip(int(np.asarray(i)), 0, n - 1))


def _cond_impl(index: Any, *args: Any, branches: tuple[Graph, ...]) -> list[Any]:
    g = branches[_index(index, len(branches))]
    return compile_graph(g).executable.run([np.asarray(a) for a in args])


def _cond_aval(index: ShapedArray, *avals: ShapedArray, branches: tuple[Graph, ...]) -> tuple[ShapedArray, ...]:
    if index.shape != () or not dtypes.is_int(index.dtype):
        raise ShapeError(f"cond/switch: the index must be an integer scalar, got {index}")
    for k, b in enumerate(branches):
        if b.in_avals != tuple(avals):
            raise ShapeError(f"cond branch {k} takes {list(map(str, b.in_avals))}, got {list(map(str, avals))}")
        if b.out_avals != branches[0].out_avals:
            raise ShapeError(f"cond branch {k} returns {list(map(str, b.out_avals))} but branch 0 returns "
                             f"{list(map(str, branches[0].out_avals))}")
    return branches[0].out_avals


cond_p = Primitive("cond", impl=_cond_impl, abstract_eval=_cond_aval, multiple_results=True)


@cond_p.def_jvp
def _cond_jvp(primals: tuple, tangents: tuple, *, branches: tuple[Graph, ...]) -> tuple:
    index, args = primals[0], primals[1:]
    diff = tuple(t is not None for t in tangents[1:])
    jb = tuple(jvp_graph(b, diff) for b in branches)
    outs = cond_p.bind(index, *args, *[t for t in tangents[1:] if t is not None], branches=jb)
    n = len(branches[0].outvars)
    return outs[:n], outs[n:]


def _cond_partial_eval(eqn: Eqn, unknown: Sequence[bool]) -> tuple[list[Eqn], list[Eqn]]:
    """Split every branch the same way; their residuals are joined (each branch fills its own
    slots and zeros elsewhere) so the known and linear conds have one signature."""
    if unknown[0]:
        raise TypeError("cond: the branch index cannot depend on a differentiated value")
    branches = eqn.params["branches"]
    arg_unknown = tuple(unknown[1:])
    parts = [partial_eval_graph(b, arg_unknown) for b in branches]
    out_unknown = tuple(any(p[3][j] for p in parts) for j in range(len(eqn.outputs)))
    parts = [force_unknown(k, lin, r, ou, out_unknown) for k, lin, r, ou in parts]
    res_avals = [[v.aval for v in lin.invars[:r]] for _, lin, r, _ in parts]
    known_branches, lin_branches = [], []
    for i, (known, lin, r, _) in enumerate(parts):
        before = [a for rs in res_avals[:i] for a in rs]
        after = [a for rs in res_avals[i + 1:] for a in rs]
        known_branches.append(_pad_residual_outputs(known, r, before, after))
        lin_branches.append(_pad_residual_inputs(lin, r, before, after))
    all_res = [Var(a) for rs in res_avals for a in rs]
    index = eqn.inputs[0]
    known_in = tuple(a for a, u in zip(eqn.inputs[1:], arg_unknown) if not u)
    known_out = tuple(o for o, u in zip(eqn.outputs, out_unknown) if not u)
    unknown_in = tuple(a for a, u in zip(eqn.inputs[1:], arg_unknown) if u)
    unknown_out = tuple(o for o, u in zip(eqn.outputs, out_unknown) if u)
    known_eqn = Eqn(cond_p, (index,) + known_in, known_out + tuple(all_res),
                    Params({"branches": tuple(known_branches)}), eqn.source)
    lin_eqn = Eqn(cond_p, (index,) + tuple(all_res) + unknown_in, unknown_out,
                  Params({"branches": tuple(lin_branches)}), eqn.source)
    return [known_eqn], [lin_eqn]


def _pad_residual_outputs(known: Graph, r: int, before: list[ShapedArray], after: list[ShapedArray]) -> Graph:
    n_out = len(known.outvars) - r

    def fun(*args: Any) -> list[Any]:
        outs = eval_graph(known, *args)
        return outs[:n_out] + [zeros(a) for a in before] + outs[n_out:] + [zeros(a) for a in after]

    return stage(fun, list(known.in_avals))[0]


def _pad_residual_inputs(lin: Graph, r: int, before: list[ShapedArray], after: list[ShapedArray]) -> Graph:
    pre = tuple(Var(a) for a in before)
    post = tuple(Var(a) for a in after)
    inv = lin.invars
    return Graph(pre + inv[:r] + post + inv[r:], lin.constvars, lin.consts, lin.eqns, lin.outvars)


cond_p.partial_eval = _cond_partial_eval


@cond_p.def_transpose
def _cond_transpose(cts: Sequence[Any], index: Any, *args: Any, branches: tuple[Graph, ...]) -> tuple:
    mask = tuple(is_undefined(a) for a in args)
    tb = tuple(transpose_graph(b, mask) for b in branches)
    known = [a for a in args if not is_undefined(a)]
    ct_vals = [zeros(v.aval) if c is None else c for c, v in zip(cts, branches[0].outvars)]
    outs = iter(cond_p.bind(index, *known, *ct_vals, branches=tb))
    return (None,) + tuple(next(outs) if m else None for m in mask)


@cond_p.def_batch
def _cond_batch(args: Sequence[Any], dims: Sequence[int | None], *, branches: tuple[Graph, ...]) -> tuple:
    size = batch_size(args, dims)
    index, ops = args[0], args[1:]
    n_out = len(branches[0].outvars)
    if dims[0] is None:
        in_avals = tuple(aval(a) for a in ops)
        bb = tuple(batched_graph(b, tuple(dims[1:]), size, in_avals) for b in branches)
        return cond_p.bind(index, *ops, branches=bb), [0] * n_out
    # a batched index: every branch runs on the whole batch, then each lane picks its result
    idx = to_front(convert(index, dtypes.int64), dims[0])
    idx = min_p.bind(max_p.bind(idx, np.asarray(0, np.int64)), np.asarray(len(branches) - 1, np.int64))
    results = [vmap_flat(lambda *a, b=b: eval_graph(b, *a), ops, dims[1:], [0] * n_out, size) for b in branches]
    outs = list(results[0])
    for k in range(1, len(branches)):
        for j in range(n_out):
            shape = aval(outs[j]).shape
            pick = reshape(eq(idx, np.asarray(k, np.int64)), (size,) + (1,) * (len(shape) - 1))
            outs[j] = select(pick, results[k][j], outs[j])
    return outs, [0] * n_out
