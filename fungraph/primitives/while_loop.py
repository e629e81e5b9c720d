"""``while``: a loop whose trip count is found at run time. Inputs ``(*cond_consts,
*body_consts, *init)``; ``cond_graph`` maps ``(carry, cond_consts)`` to a bool scalar and
``body_graph`` maps ``(carry, body_consts)`` to the next carry.

Reverse mode (which JAX refuses): the forward loop ``while_fwd`` records what the linear body
needs on a host-side *tape* and returns its handle and the trip count; ``while_lin`` is the
linear loop over tangents and ``while_bwd`` its transpose, which runs the transposed body that
many times backwards. Checkpoint policies trade memory for recomputation: ``"all"`` keeps every
iteration's residuals, ``"every:k"`` keeps every k-th carry, ``"sqrt"`` keeps O(sqrt(n)) carries
by thinning as the loop runs, and both recompute one segment's residuals at a time. The
readers ``while_lin``/``while_bwd`` also take the forward loop's inputs (``n_deps``), which
the rules of ``while_tape_jvp`` differentiate them by, to any order.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import Primitive, ShapeError
from fungraph.interpreters.batching import vmap_flat
from fungraph.interpreters.eval import eval_graph
from fungraph.interpreters.graph_transforms import (
    batched_graph,
    batched_graph_where_needed,
    loop_carry_batched,
    partial_eval_graph,
    transpose_graph,
)
from fungraph.interpreters.jvp import jvp_flat
from fungraph.interpreters.staging import stage
from fungraph.ir import Eqn, Graph, Params, ShapedArray, Var
from fungraph.jit import compile_graph
from fungraph.primitives._batching import batch_size, broadcast_batch, example_aval, to_front
from fungraph.primitives._rules import aval, instantiate, zeros
from fungraph.primitives.elementwise import select
from fungraph.primitives.graph_utils import LOOP_STATS, force_unknown
from fungraph.primitives.reductions import reduce_max_p
from fungraph.primitives.shape import reshape, slice_

_I64 = ShapedArray((), np.dtype(np.int64))


def _run(graph: Graph, args: Sequence[Any]) -> list[np.ndarray]:
    return compile_graph(graph).executable.run([np.asarray(a) for a in args])




def _while_impl(*args: Any, cond_graph: Graph, body_graph: Graph, n_cc: int, n_bc: int,
                policy: str = "all") -> list[Any]:
    """Two views of the carry alternate (libnnc's multi-view tensors with k = 2): iteration i
    reads view i % 2 and writes view (i + 1) % 2, so no carry is ever copied."""
    cc, bc = [np.asarray(a) for a in args[:n_cc]], [np.asarray(a) for a in args[n_cc:n_cc + n_bc]]
    carry = [np.asarray(a) for a in args[n_cc + n_bc:]]
    cond_exe = compile_graph(cond_graph).executable
    body_exe = compile_graph(body_graph).executable
    pred = [np.empty((), np.bool_)]
    views = [[np.empty(a.shape, a.dtype) for a in body_graph.out_avals] for _ in range(2)]
    k = 0
    while cond_exe.run(carry + cc, pred)[0]:
        carry = body_exe.run(carry + bc, views[k % 2])
        k += 1
    LOOP_STATS["iterations"] += k
    LOOP_STATS["carry_copies"] += k * body_exe.passthrough_outputs
    return [np.array(c) for c in carry] if k == 1 else carry


def _while_aval(*avals: ShapedArray, cond_graph: Graph, body_graph: Graph, n_cc: int,
                n_bc: int, policy: str = "all") -> tuple[ShapedArray, ...]:
    cc, bc, carry = avals[:n_cc], avals[n_cc:n_cc + n_bc], avals[n_cc + n_bc:]
    if cond_graph.in_avals != tuple(carry) + tuple(cc):
        raise ShapeError(f"while_loop cond takes {list(map(str, cond_graph.in_avals))}, got "
                         f"{list(map(str, tuple(carry) + tuple(cc)))}")
    if cond_graph.out_avals != (ShapedArray((), dtypes.bool_),):
        raise ShapeError(f"while_loop cond_fun must return a bool scalar, got {list(map(str, cond_graph.out_avals))}")
    if body_graph.in_avals != tuple(carry) + tuple(bc) or body_graph.out_avals != tuple(carry):
        raise ShapeError(f"while_loop body_fun must map the carry {list(map(str, carry))} to itself, got "
                         f"{list(map(str, body_graph.in_avals[:len(carry)]))} -> "
                         f"{list(map(str, body_graph.out_avals))}")
    return tuple(carry)


while_p = Primitive("while", impl=_while_impl, abstract_eval=_while_aval, multiple_results=True)


def _stage(fun: Any, avals: Sequence[ShapedArray]) -> Graph:
    return stage(fun, list(avals))[0]


@while_p.def_jvp
def _while_jvp(primals: tuple, tangents: tuple, *, cond_graph: Graph, body_graph: Graph, n_cc: int,
               n_bc: int, policy: str = "all") -> tuple:
    cc, bc, carry = primals[:n_cc], primals[n_cc:n_cc + n_bc], primals[n_cc + n_bc:]
    t_bc, t_carry = tangents[n_cc:n_cc + n_bc], tangents[n_cc + n_bc:]
    nc = len(carry)
    t_carry = [instantiate(t, aval(c)) if dtypes.is_float(aval(c).dtype) else None for c, t in zip(carry, t_carry)]
    c_mask = [t is not None for t in t_carry]
    k_mask = [t is not None for t in t_bc]
    n_tc, n_tk = sum(c_mask), sum(k_mask)
    c_av = [aval(c) for c in carry]

    def body(*args: Any) -> list[Any]:
        c, tc = args[:nc], iter(args[nc:nc + n_tc])
        k, tk = args[nc + n_tc:nc + n_tc + n_bc], iter(args[nc + n_tc + n_bc:])
        p, t = jvp_flat(lambda *a: eval_graph(body_graph, *a), list(c) + list(k),
                        [next(tc) if m else None for m in c_mask] + [next(tk) if m else None for m in k_mask])
        return list(p) + [tt for tt, m in zip(t, c_mask) if m]

    tc_av = [a for a, m in zip(c_av, c_mask) if m]
    tk_av = [aval(k) for k, m in zip(bc, k_mask) if m]
    jb = _stage(body, c_av + tc_av + [aval(k) for k in bc] + tk_av)
    jc = _stage(lambda *a: eval_graph(cond_graph, *a[:nc], *a[nc + n_tc:]), c_av + tc_av + [aval(c) for c in cc])
    outs = while_p.bind(*cc, *bc, *[t for t in t_bc if t is not None], *carry, *[t for t in t_carry if t is not None],
                        cond_graph=jc, body_graph=jb, n_cc=n_cc, n_bc=n_bc + n_tk, policy=policy)
    t_out = iter(outs[nc:])
    return outs[:nc], [next(t_out) if m else None for m in c_mask]


def _batch_with_one_predicate(args: Sequence[Any], dims: Sequence[int | None], cond_graph: Graph,
                              body_graph: Graph, n_cc: int, n_bc: int, policy: str, size: int) -> tuple | None:
    """The batched loop when its predicate is the same for every lane: the carries the batch
    reaches (the fixpoint over the body) batched on axis 0, the others unbatched; None when the
    predicate depends on the batch."""
    cc, bc, carry = args[:n_cc], args[n_cc:n_cc + n_bc], args[n_cc + n_bc:]
    dcc, dbc, dcarry = dims[:n_cc], dims[n_cc:n_cc + n_bc], dims[n_cc + n_bc:]
    nc = len(carry)
    cc_b = [to_front(c, d) for c, d in zip(cc, dcc)]
    bc_b = [to_front(b, d) for b, d in zip(bc, dbc)]
    cc_dims = tuple(None if d is None else 0 for d in dcc)
    bc_dims = tuple(None if d is None else 0 for d in dbc)

    examples = [example_aval(c, d) for c, d in zip(carry, dcarry)]

    def carry_avals(batched: tuple[bool, ...]) -> list[ShapedArray]:
        return [ShapedArray(((size,) if b else ()) + a.shape, a.dtype) for a, b in zip(examples, batched)]

    def body_avals(batched: tuple[bool, ...]) -> tuple[ShapedArray, ...]:
        return tuple(carry_avals(batched) + [aval(b) for b in bc_b])

    batched = loop_carry_batched(body_graph, tuple(d is not None for d in dcarry), bc_dims, size, body_avals, nc)
    c_dims = tuple(0 if b else None for b in batched)
    bcond, pred_batched = batched_graph_where_needed(cond_graph, c_dims + cc_dims, size,
                                                     tuple(carry_avals(batched) + [aval(c) for c in cc_b]), (False,))
    if pred_batched[0]:
        return None
    bbody, _ = batched_graph_where_needed(body_graph, c_dims + bc_dims, size, body_avals(batched), batched)
    carry_b = [broadcast_batch(c, d, size) if b else c for c, d, b in zip(carry, dcarry, batched)]
    outs = while_p.bind(*cc_b, *bc_b, *carry_b, cond_graph=bcond, body_graph=bbody, n_cc=n_cc, n_bc=n_bc,
                        policy=policy)
    return outs, list(c_dims)


#: The bodies of loops that ``vmap`` masked (every example runs until the last one stops), so
#: that ``checkify`` can refuse them as JAX refuses a batched while_loop.
MASKED_BODIES: weakref.WeakSet[Graph] = weakref.WeakSet()


@while_p.def_batch
def _while_batch(args: Sequence[Any], dims: Sequence[int | None], *, cond_graph: Graph, body_graph: Graph,
                 n_cc: int, n_bc: int, policy: str = "all") -> tuple:
    """With a predicate the batch does not reach, the carries the batch reaches are batched and
    the others stay as they are (JAX's fixpoint, so a loop counter stays unbatched). Otherwise all
    carries are batched; the loop runs while any lane's predicate holds, and lanes whose
    predicate is false keep their carry (masked with select)."""

    size = batch_size(args, dims)
    unmasked = _batch_with_one_predicate(args, dims, cond_graph, body_graph, n_cc, n_bc, policy, size)
    if unmasked is not None:
        return unmasked
    cc, bc, carry = args[:n_cc], args[n_cc:n_cc + n_bc], args[n_cc + n_bc:]
    dcc, dbc = dims[:n_cc], dims[n_cc:n_cc + n_bc]
    carry_b = [broadcast_batch(c, d, size) for c, d in zip(carry, dims[n_cc + n_bc:])]
    if size == 0:
        return carry_b, [0] * len(carry)
    cc_b = [to_front(c, d) for c, d in zip(cc, dcc)]
    bc_b = [to_front(b, d) for b, d in zip(bc, dbc)]
    kdc = [None if d is None else 0 for d in dcc]
    kdb = [None if d is None else 0 for d in dbc]
    nc = len(carry)

    def preds(c: Sequence[Any], k: Sequence[Any]) -> Any:
        return vmap_flat(lambda *a: eval_graph(cond_graph, *a), list(c) + list(k), [0] * nc + kdc, [0], size)[0]

    def cond(*a: Any) -> list[Any]:
        return [reduce_max_p.bind(preds(a[:nc], a[nc:]), axes=(0,))]

    def body(*a: Any) -> list[Any]:
        c, k_c, k_b = a[:nc], a[nc:nc + n_cc], a[nc + n_cc:]
        p = preds(c, k_c)
        new = vmap_flat(lambda *x: eval_graph(body_graph, *x), list(c) + list(k_b), [0] * nc + kdb, [0] * nc, size)
        return [select(reshape(p, (size,) + (1,) * (aval(o).ndim - 1)), o, old) for o, old in zip(new, c)]

    c_av = [aval(c) for c in carry_b]
    bcond = _stage(cond, c_av + [aval(c) for c in cc_b])
    bbody = _stage(body, c_av + [aval(c) for c in cc_b] + [aval(b) for b in bc_b])
    MASKED_BODIES.add(bbody)
    outs = while_p.bind(*cc_b, *cc_b, *bc_b, *carry_b, cond_graph=bcond, body_graph=bbody, n_cc=n_cc,
                        n_bc=n_cc + n_bc, policy=policy)
    return outs, [0] * nc


# --- reverse mode: the tape -------------------------------------------------------------


@dataclass
class Tape:
    """What the backward loop needs: per-iteration residuals, or checkpointed carries plus the
    means to recompute a segment's residuals."""

    known_body: Graph
    body_consts: list[Any]
    num_carry: int
    policy: str
    stride: int = 1
    count: int = 0
    residuals: list[list[np.ndarray]] = field(default_factory=list)
    checkpoints: dict[int, list[np.ndarray]] = field(default_factory=dict)
    segment: tuple[int, list[list[np.ndarray]]] | None = None
    peak_stored: int = 0
    active: list[np.ndarray] = field(default_factory=list)

    def record(self, carry: list[np.ndarray], residuals: list[np.ndarray]) -> None:
        """Called before running iteration ``count`` from ``carry``; ``residuals`` are its own."""
        if self.policy == "all":
            self.residuals.append(residuals)
        else:
            if self.count % self.stride == 0:
                self.checkpoints[self.count] = carry
            if self.policy == "sqrt" and len(self.checkpoints) > 2 * self.stride:
                self.stride *= 2
                self.checkpoints = {k: v for k, v in self.checkpoints.items() if k % self.stride == 0}
        self.count += 1
        self.peak_stored = max(self.peak_stored, len(self.residuals) + len(self.checkpoints))

    def residuals_at(self, i: int) -> list[np.ndarray]:
        if self.policy == "all":
            return self.residuals[i]
        start = (i // self.stride) * self.stride
        if self.segment is None or self.segment[0] != start:
            carry = self.checkpoints[start]
            seg = []
            for _ in range(start, min(start + self.stride, self.count)):
                outs = _run(self.known_body, carry + self.body_consts)
                carry = outs[:self.num_carry]
                seg.append(outs[self.num_carry:])
            self.segment = (start, seg)
        return self.segment[1][i - start]


_TAPES: dict[int, Tape] = {}
#: Handles start far from small integers so that a residual which merely equals one is
#: practically impossible (:func:`retain_tapes` looks for handles among a vjp's residuals), and
#: below 2**31 so that 32-bit mode, which narrows int64 values it stages to int32, keeps them.
_HANDLES = itertools.count(0x5EED_7A91)
#: Tapes a ``vjp`` function holds: their backward loops read them without consuming them, so
#: the function can be called again; they are released with the function.
_RETAINED: set[int] = set()


def tape_count() -> int:
    """Tapes recorded and not yet consumed by a backward loop or released with the ``vjp``
    function holding them (for tests and leak checks)."""
    return len(_TAPES)


def live_tapes() -> set[int]:
    """The handles of the tapes alive now."""
    return set(_TAPES)


def retain_tapes(residuals: Sequence[Any]) -> list[int]:
    """The live tape handles among ``residuals`` (a ``vjp``'s concrete residuals), now kept
    until :func:`release_tapes`: the backward loop reads a retained tape instead of consuming
    it, so the ``vjp`` function can be called more than once."""
    found: list[int] = []
    if not _TAPES:
        return found
    for r in residuals:
        if isinstance(r, np.ndarray) and r.dtype.kind == "i" and 0 < r.size <= 1 << 16:
            found += [h for h in np.unique(r).tolist() if h in _TAPES and h not in found]
    _RETAINED.update(found)
    return found


def release_tapes(handles: Sequence[int]) -> None:
    """Drop the tapes a ``vjp`` function held (called when the function is collected)."""
    for h in handles:
        _RETAINED.discard(h)
        _free(h)


def _free(h: int) -> None:
    """Drop tape ``h`` and the unread tapes of loops nested in its body (their handles are
    among its residuals): reading a tape consumes the nested tapes it reaches, not others."""
    tape = _TAPES.pop(h, None)
    if tape is None or not any(e.primitive is while_fwd_p for e in tape.known_body.eqns):
        return
    segment = tape.segment[1] if tape.segment is not None else []
    for rs in tape.residuals + segment:
        for r in rs:
            if r.dtype.kind == "i" and r.ndim == 0 and int(r) in _TAPES and int(r) not in _RETAINED:
                _free(int(r))


def _tape(handle: Any, consume: bool) -> Tape:
    h = int(handle)
    if h not in _TAPES:
        raise RuntimeError("the tape of this while_loop's forward run is gone: the backward loop of a "
                           "grad/vjp ran already or the vjp function that held the tape was released")
    return _TAPES.pop(h) if consume and h not in _RETAINED else _TAPES[h]


def _drop_nested_tapes(residuals: Sequence[Any]) -> None:
    """Free the tapes of loops nested in a body whose residuals a checkpointing tape does not
    keep: recomputing the segment in the backward loop records them afresh."""
    for r in residuals:
        r = np.asarray(r)
        if r.dtype.kind == "i" and r.ndim == 0 and int(r) in _TAPES and int(r) not in _RETAINED:
            del _TAPES[int(r)]


def _policy(policy: str) -> tuple[str, int]:
    if policy in ("all", "sqrt"):
        return policy, 1
    if policy.startswith("every:"):
        return "every", max(1, int(policy.split(":")[1]))
    raise ValueError(f"unknown while_loop checkpoint policy {policy!r}; use 'all', 'sqrt' or 'every:K'")


def _while_fwd_impl(*args: Any, cond_graph: Graph, body_graph: Graph, n_cc: int, n_bc: int, num_res: int,
                    policy: str, batched: bool = False) -> list[Any]:
    """With ``batched``, the graphs map a batch (axis 0): the loop runs while any lane's
    predicate holds, finished lanes keep their carry, and the tape records which lanes ran."""
    cc, bc, carry = list(args[:n_cc]), list(args[n_cc:n_cc + n_bc]), [np.asarray(a) for a in args[n_cc + n_bc:]]
    nc = len(carry)
    kind, stride = _policy(policy)
    tape = Tape(body_graph, bc, nc, "all" if batched else kind, stride)
    while True:
        pred = np.asarray(_run(cond_graph, carry + cc)[0])
        if not pred.any():
            break
        outs = _run(body_graph, carry + bc)
        tape.record(carry, outs[nc:])
        if kind != "all" and not batched:
            _drop_nested_tapes(outs[nc:])
        if batched:
            tape.active.append(pred)
            outs[:nc] = [np.where(pred.reshape(pred.shape + (1,) * (o.ndim - pred.ndim)), o, c)
                         for o, c in zip(outs[:nc], carry)]
        carry = outs[:nc]
    handle = next(_HANDLES)
    _TAPES[handle] = tape
    return carry + [np.asarray(tape.count, np.int64), np.asarray(handle, np.int64)]


while_fwd_p = Primitive(
    "while_fwd", impl=_while_fwd_impl, multiple_results=True, effectful=True, effect_in_outputs=True,
    abstract_eval=lambda *avals, cond_graph, body_graph, n_cc, n_bc, num_res, policy, batched=False:
    tuple(body_graph.out_avals[:len(body_graph.out_avals) - num_res]) + (_I64, _I64))


def _masked(active: np.ndarray | None, new: list[np.ndarray], old: list[np.ndarray]) -> list[np.ndarray]:
    if active is None:
        return new
    return [np.where(active.reshape(active.shape + (1,) * (n.ndim - active.ndim)), n, o) for n, o in zip(new, old)]


def n_deps(fwd_body: Graph, num_res: int, fwd_n_cc: int, fwd_n_bc: int) -> int:
    """How many inputs of ``while_lin``/``while_bwd`` after the trip count and the handle are
    the forward loop's own inputs (its cond and body constants and its carry): they do not
    feed the tape's reader but expose what its residuals depend on to the rules that
    differentiate the loop again."""
    return fwd_n_cc + fwd_n_bc + len(fwd_body.outvars) - num_res


def _lin_impl(n: Any, handle: Any, *args: Any, lin_body: Graph, num_res: int, n_bcu: int, fwd_cond: Graph,
              fwd_body: Graph, fwd_n_cc: int, fwd_n_bc: int, policy: str, batched: bool = False) -> list[Any]:
    tape = _tape(handle, consume=False)
    args = args[n_deps(fwd_body, num_res, fwd_n_cc, fwd_n_bc):]
    tk, tc = list(args[:n_bcu]), [np.asarray(a) for a in args[n_bcu:]]
    for i in range(int(n)):
        new = _run(lin_body, tape.residuals_at(i) + tc + tk)
        tc = _masked(tape.active[i] if batched else None, new, tc)
    return tc


def _lin_aval(n: ShapedArray, h: ShapedArray, *avals: ShapedArray, lin_body: Graph, num_res: int, n_bcu: int,
              fwd_cond: Graph, fwd_body: Graph, fwd_n_cc: int, fwd_n_bc: int, policy: str,
              batched: bool = False) -> tuple[ShapedArray, ...]:
    return tuple(avals[n_deps(fwd_body, num_res, fwd_n_cc, fwd_n_bc) + n_bcu:])


while_lin_p = Primitive("while_lin", impl=_lin_impl, multiple_results=True, abstract_eval=_lin_aval)


@while_lin_p.def_transpose
def _while_lin_transpose(cts: Sequence[Any], n: Any, handle: Any, *args: Any, lin_body: Graph, num_res: int,
                         n_bcu: int, batched: bool = False, **fwd: Any) -> tuple:
    nd = n_deps(fwd["fwd_body"], num_res, fwd["fwd_n_cc"], fwd["fwd_n_bc"])
    deps, tk, tc = args[:nd], args[nd:nd + n_bcu], args[nd + n_bcu:]
    ct_vals = [zeros(aval(c)) if ct is None else ct for ct, c in zip(cts, tc)]
    outs = while_bwd_p.bind(n, handle, *deps, *ct_vals, lin_body=lin_body, num_res=num_res,
                            k_avals=tuple(aval(k) for k in tk), batched=batched, **fwd)
    n_k = len(tk)
    return (None, None) + (None,) * nd + tuple(outs[len(tc):len(tc) + n_k]) + tuple(outs[:len(tc)])


def _bwd_impl(n: Any, handle: Any, *args: Any, lin_body: Graph, num_res: int, k_avals: tuple, fwd_cond: Graph,
              fwd_body: Graph, fwd_n_cc: int, fwd_n_bc: int, policy: str, batched: bool = False) -> list[Any]:

    cts = args[n_deps(fwd_body, num_res, fwd_n_cc, fwd_n_bc):]
    tape = _tape(handle, consume=False)
    LOOP_STATS["last_tape_peak"] = tape.peak_stored
    LOOP_STATS["last_tape_length"] = tape.count
    LOOP_STATS["max_tape_peak"] = max(LOOP_STATS["max_tape_peak"], tape.peak_stored)
    nc = len(cts)
    mask = tuple([False] * num_res + [True] * (nc + len(k_avals)))
    tg = transpose_graph(lin_body, mask)
    ct_c = [np.asarray(c) for c in cts]
    ct_k = [np.zeros(a.shape, a.dtype) for a in k_avals]
    for i in range(int(n) - 1, -1, -1):
        outs = _run(tg, tape.residuals_at(i) + ct_c)
        active = tape.active[i] if batched else None
        ct_c = _masked(active, outs[:nc], ct_c)
        ct_k = [a + b for a, b in zip(ct_k, _masked(active, outs[nc:], [np.zeros_like(o) for o in outs[nc:]]))]
    if int(handle) not in _RETAINED:
        _free(int(handle))
    return ct_c + ct_k


def _bwd_aval(n: ShapedArray, h: ShapedArray, *avals: ShapedArray, lin_body: Graph, num_res: int, k_avals: tuple,
              fwd_cond: Graph, fwd_body: Graph, fwd_n_cc: int, fwd_n_bc: int, policy: str,
              batched: bool = False) -> tuple[ShapedArray, ...]:
    return tuple(avals[n_deps(fwd_body, num_res, fwd_n_cc, fwd_n_bc):]) + tuple(k_avals)


while_bwd_p = Primitive("while_bwd", impl=_bwd_impl, multiple_results=True, effectful=True, abstract_eval=_bwd_aval)


def _while_partial_eval(eqn: Eqn, unknown: Sequence[bool]) -> tuple[list[Eqn], list[Eqn]]:
    p = eqn.params
    n_cc, n_bc, policy = p["n_cc"], p["n_bc"], p.get("policy", "all")
    body, cond = p["body_graph"], p["cond_graph"]
    cc_unk, bc_unk, c_unk = unknown[:n_cc], list(unknown[n_cc:n_cc + n_bc]), list(unknown[n_cc + n_bc:])
    if any(cc_unk):
        raise TypeError("while_loop: the predicate cannot depend on a differentiated value")
    nc = len(c_unk)
    while True:
        known_b, lin_b, r, out_unk = partial_eval_graph(body, tuple(c_unk + bc_unk))
        grown = [a or b for a, b in zip(c_unk, out_unk)]
        if grown == c_unk:
            break
        c_unk = grown
    known_b, lin_b, r, out_unk = force_unknown(known_b, lin_b, r, out_unk, c_unk)
    used = {a for e in cond.eqns for a in e.inputs} | set(cond.outvars)
    if any(u and v in used for v, u in zip(cond.invars[:nc], c_unk)):
        raise TypeError("while_loop: the predicate cannot depend on a differentiated carry")
    keep = [i for i, u in enumerate(c_unk) if not u] + list(range(nc, len(cond.invars)))
    cond_k = Graph(tuple(cond.invars[i] for i in keep), cond.constvars, cond.consts, cond.eqns, cond.outvars)
    ins = eqn.inputs
    cc_in, bc_in, c_in = ins[:n_cc], ins[n_cc:n_cc + n_bc], ins[n_cc + n_bc:]
    n_var, h_var = Var(_I64), Var(_I64)
    known_eqn = Eqn(while_fwd_p,
                    tuple(cc_in) + tuple(a for a, u in zip(bc_in, bc_unk) if not u)
                    + tuple(a for a, u in zip(c_in, c_unk) if not u),
                    tuple(o for o, u in zip(eqn.outputs, c_unk) if not u) + (n_var, h_var),
                    Params({"cond_graph": cond_k, "body_graph": known_b, "n_cc": n_cc,
                            "n_bc": sum(not u for u in bc_unk), "num_res": r, "policy": policy}), eqn.source)
    n_bcu = sum(bc_unk)
    # lin_b invars: (residuals, carry_u, bc_u) -> the loop passes (residuals, carry_u, bc_u)
    fwd = {"fwd_cond": cond_k, "fwd_body": known_b, "fwd_n_cc": n_cc, "fwd_n_bc": sum(not u for u in bc_unk),
           "policy": policy}
    lin_eqn = Eqn(while_lin_p,
                  (n_var, h_var) + known_eqn.inputs + tuple(a for a, u in zip(bc_in, bc_unk) if u)
                  + tuple(a for a, u in zip(c_in, c_unk) if u),
                  tuple(o for o, u in zip(eqn.outputs, c_unk) if u),
                  Params({"lin_body": lin_b, "num_res": r, "n_bcu": n_bcu, **fwd}), eqn.source)
    return [known_eqn], [lin_eqn]


while_p.partial_eval = _while_partial_eval


# --- batching the tape primitives: every lane in one masked loop ---------------------------


@while_fwd_p.def_batch
def _fwd_batch(args: Sequence[Any], dims: Sequence[int | None], *, cond_graph: Graph, body_graph: Graph,
               n_cc: int, n_bc: int, num_res: int, policy: str, batched: bool = False) -> tuple:
    size = batch_size(args, dims)
    full = [broadcast_batch(a, d, size) for a, d in zip(args, dims)]
    cc, bc, carry = full[:n_cc], full[n_cc:n_cc + n_bc], full[n_cc + n_bc:]
    c_dims = tuple([0] * (len(carry) + len(cc)))
    bcond = batched_graph(cond_graph, c_dims, size, tuple(aval(a) for a in carry + cc))
    bbody = batched_graph(body_graph, tuple([0] * (len(carry) + len(bc))), size, tuple(aval(a) for a in carry + bc))
    outs = while_fwd_p.bind(*full, cond_graph=bcond, body_graph=bbody, n_cc=n_cc, n_bc=n_bc, num_res=num_res,
                            policy=policy, batched=True)
    # the handle is repeated per lane so that whatever consumes the tape is batched too
    handle = broadcast_batch(outs[-1], None, size)
    return list(outs[:-1]) + [handle], [0] * (len(outs) - 2) + [None, 0]


def _scalar_handle(h: Any, d: int | None) -> Any:
    if d is None:
        return h

    h = to_front(h, d)
    return reshape(slice_(h, (0,), (1,), None), ())


def _batched_forward(fwd: dict[str, Any], deps: Sequence[Any], size: int) -> dict[str, Any]:
    """The forward loop's graphs mapped over a batch of its inputs, as ``_fwd_batch`` maps them."""

    n_cc, n_bc = fwd["fwd_n_cc"], fwd["fwd_n_bc"]
    cc, bc, carry = deps[:n_cc], deps[n_cc:n_cc + n_bc], deps[n_cc + n_bc:]
    c_avals, b_avals = tuple(aval(a) for a in carry + cc), tuple(aval(a) for a in carry + bc)
    bcond = batched_graph(fwd["fwd_cond"], (0,) * len(c_avals), size, c_avals)
    bbody = batched_graph(fwd["fwd_body"], (0,) * len(b_avals), size, b_avals)
    return {**fwd, "fwd_cond": bcond, "fwd_body": bbody}


def _tape_batched(dims: Sequence[int | None], nd: int, batched: bool) -> bool:
    """Whether a reader's batch runs over the tape's examples (the handle is batched) rather
    than over tangents or cotangents alone (one tape shared by every example)."""
    if dims[1] is None and all(d is None for d in dims[2:2 + nd]):
        if batched:
            raise NotImplementedError("vmap of the tangents of an already batched while_loop tape")
        return False
    return True


@while_lin_p.def_batch
def _lin_batch(args: Sequence[Any], dims: Sequence[int | None], *, lin_body: Graph, num_res: int, n_bcu: int,
               batched: bool = False, **fwd: Any) -> tuple:

    if dims[0] is not None:
        raise NotImplementedError("while_lin: a batched trip count")
    nd = n_deps(fwd["fwd_body"], num_res, fwd["fwd_n_cc"], fwd["fwd_n_bc"])
    size = batch_size(args, dims)
    rest = [broadcast_batch(a, d, size) for a, d in zip(args[2 + nd:], dims[2 + nd:])]
    tk, tc = rest[:n_bcu], rest[n_bcu:]
    lin_avals = tuple(aval(a) for a in tc + tk)
    if not _tape_batched(dims, nd, batched):
        res_avals = tuple(v.aval for v in lin_body.invars[:num_res])
        blin = batched_graph(lin_body, (None,) * num_res + (0,) * len(lin_avals), size, res_avals + lin_avals)
        outs = while_lin_p.bind(*args[:2 + nd], *tk, *tc, lin_body=blin, num_res=num_res, n_bcu=n_bcu, **fwd)
        return outs, [0] * len(outs)
    deps = [broadcast_batch(a, d, size) for a, d in zip(args[2:2 + nd], dims[2:2 + nd])]
    handle = _scalar_handle(args[1], dims[1])
    res_avals = tuple(ShapedArray((size,) + v.aval.shape, v.aval.dtype) for v in lin_body.invars[:num_res])
    blin = batched_graph(lin_body, tuple([0] * len(lin_body.invars)), size, res_avals + lin_avals)
    outs = while_lin_p.bind(args[0], handle, *deps, *tk, *tc, lin_body=blin, num_res=num_res, n_bcu=n_bcu,
                            batched=True, **_batched_forward(fwd, deps, size))
    return outs, [0] * len(outs)


@while_bwd_p.def_batch
def _bwd_batch(args: Sequence[Any], dims: Sequence[int | None], *, lin_body: Graph, num_res: int, k_avals: tuple,
               batched: bool = False, **fwd: Any) -> tuple:

    nd = n_deps(fwd["fwd_body"], num_res, fwd["fwd_n_cc"], fwd["fwd_n_bc"])
    size = batch_size(args, dims)
    cts = [broadcast_batch(a, d, size) for a, d in zip(args[2 + nd:], dims[2 + nd:])]
    lin_avals = tuple(ShapedArray((size,) + v.aval.shape, v.aval.dtype) for v in lin_body.invars[num_res:])
    bk = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in k_avals)
    if not _tape_batched(dims, nd, batched):
        res_avals = tuple(v.aval for v in lin_body.invars[:num_res])
        blin = batched_graph(lin_body, (None,) * num_res + (0,) * len(lin_avals), size, res_avals + lin_avals)
        outs = while_bwd_p.bind(*args[:2 + nd], *cts, lin_body=blin, num_res=num_res, k_avals=bk, **fwd)
        return outs, [0] * len(outs)
    deps = [broadcast_batch(a, d, size) for a, d in zip(args[2:2 + nd], dims[2:2 + nd])]
    res_avals = tuple(ShapedArray((size,) + v.aval.shape, v.aval.dtype) for v in lin_body.invars[:num_res])
    blin = batched_graph(lin_body, tuple([0] * len(lin_body.invars)), size, res_avals + lin_avals)
    handle = _scalar_handle(args[1], dims[1])
    outs = while_bwd_p.bind(args[0], handle, *deps, *cts, lin_body=blin, num_res=num_res, k_avals=bk, batched=True,
                            **_batched_forward(fwd, deps, size))
    return outs, [0] * len(outs)

