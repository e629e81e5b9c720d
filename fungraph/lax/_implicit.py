"""``jax.lax.custom_root`` and ``custom_linear_solve``: solves differentiated implicitly (by the
implicit function theorem, and by one more solve of the same kind), not through their
iterations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.ir import aval_of
from fungraph.lax._control_flow import _leaves, _single, _stage_fn
from fungraph.primitives.linear_solve import linear_solve_p
from fungraph.primitives.operands import asarray


def _zeros_like(x: Any) -> np.ndarray:
    a = asarray(x)
    return np.zeros(aval_of(a).shape, aval_of(a).dtype)


def _stage(fun: Callable[..., Any], example: Any, what: str) -> tuple[Any, list[Any], Any, Any]:
    """``fun`` staged at ``example``'s structure: its graph, closure, input tree and output tree."""

    _, tree, avals, _ = _leaves(example)
    graph, closure, out_tree, _ = _stage_fn(lambda v: fun(v), _single(tree), avals, what)
    return graph, closure, tree, out_tree


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``solve(matvec, b)``, differentiated implicitly as ``jax.lax.custom_linear_solve``: the
    solution is linear in ``b`` (its transpose is ``transpose_solve(vecmat, ct)``, or ``solve``
    again when ``symmetric``), and the tangent of what ``matvec`` closes over enters as
    ``-A^-1 (dA x)``; nothing is differentiated through ``solve`` itself. With ``has_aux``
    both solves return ``(solution, aux)`` and the aux outputs carry no derivative."""
    from fungraph.api import vjp
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    b_leaves, b_tree = tree_flatten(b)
    b_leaves = [asarray(v) for v in b_leaves]
    b = tree_unflatten(b_tree, b_leaves)
    m_graph, m_consts, _, m_out = _stage(matvec, b, "custom_linear_solve matvec")
    if m_out != b_tree or m_graph.out_avals != tuple(aval_of(v) for v in b_leaves):
        raise TypeError(f"custom_linear_solve: matvec must map b's structure and types to themselves; b is {b_tree} "
                        f"{[str(aval_of(v)) for v in b_leaves]}, matvec returns {m_out} "
                        f"{[str(a) for a in m_graph.out_avals]}")

    def solved(rhs: Any) -> Any:
        out = solve(matvec, rhs)
        return out if has_aux else (out, ())

    s_graph, s_consts, _, s_out = _stage(solved, b, "custom_linear_solve solve")
    if s_out.node_type not in (tuple, list) or len(s_out.children) != 2:
        raise TypeError(f"custom_linear_solve with has_aux=True: solve must return (solution, aux), got {s_out}")
    x_tree = s_out.children[0]
    n_x = len(b_leaves)
    if x_tree != b_tree or s_graph.out_avals[:n_x] != tuple(aval_of(v) for v in b_leaves):
        raise TypeError(f"custom_linear_solve: solve must return a solution shaped like b ({b_tree}), got {x_tree} "
                        f"{[str(a) for a in s_graph.out_avals[:n_x]]}")
    t_graph, t_consts = None, []
    t_solve = solve if transpose_solve is None and symmetric else transpose_solve
    if t_solve is not None:
        def vecmat(ct: Any) -> Any:
            _, pullback = vjp(matvec, tree_map(_zeros_like, b))
            (out,) = pullback(ct)
            return out

        def transposed(ct: Any) -> Any:
            out = t_solve(matvec if symmetric else vecmat, ct)
            return out[0] if has_aux else out

        t_graph, t_consts, _, _ = _stage(transposed, b, "custom_linear_solve transpose_solve")
    outs = linear_solve_p.bind(*m_consts, *s_consts, *t_consts, *b_leaves, matvec=m_graph, solve=s_graph,
                                  transpose_solve=t_graph, counts=(len(m_consts), len(s_consts), len(t_consts)),
                                  num_aux=len(s_graph.outvars) - n_x)
    x = tree_unflatten(b_tree, outs[:n_x])
    if not has_aux:
        return x
    return x, tree_unflatten(s_out.children[1], list(outs[n_x:]))


def custom_root(f: Callable[[Any], Any], initial_guess: Any, solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any], has_aux: bool = False) -> Any:
    """``solve(f, initial_guess)``, a root of ``f``, differentiated implicitly as
    ``jax.lax.custom_root``: from ``f(x*, theta) = 0``, ``dx* = -J_x^-1 (J_theta . dtheta)``, the
    linear system solved by ``tangent_solve(J_x, rhs)`` (in both directions). ``theta`` is
    whatever ``f`` closes over; ``initial_guess`` and any aux output carry no derivative."""
    from fungraph.api import jvp
    from fungraph.custom_derivatives import custom_jvp, zero_tangent
    from fungraph.interpreters.eval import eval_graph
    from fungraph.interpreters.jvp import jvp_flat
    from fungraph.primitives.callback import stop_gradient
    from fungraph.tree_util import tree_flatten, tree_map, tree_unflatten

    guess = tree_map(asarray, initial_guess)
    f_graph, f_consts, x_tree, f_out = _stage(f, guess, "custom_root f")
    if f_out != x_tree:
        raise TypeError(f"custom_root: f must map the guess's structure {x_tree} to itself, got {f_out}")

    def f_at(x: Any, consts: Sequence[Any]) -> Any:
        return tree_unflatten(f_out, eval_graph(f_graph, *tree_flatten(x)[0], *consts))

    def run(consts: Sequence[Any], x0: Any) -> Any:
        out = solve(lambda x: f_at(x, consts), tree_map(stop_gradient, x0))
        return out if has_aux else (out, ())

    @custom_jvp
    def root(consts: tuple, x0: Any) -> Any:
        return run(consts, x0)

    @root.defjvp
    def _(primals: tuple, tangents: tuple) -> tuple:
        consts, x0 = primals
        t_consts = [t if dtypes.is_inexact(aval_of(c).dtype) else None for c, t in zip(consts, tangents[0])]
        sol, aux = run(consts, x0)
        _, rhs = jvp_flat(lambda *c: tree_flatten(f_at(sol, c))[0], consts, t_consts)
        rhs = tree_unflatten(f_out, rhs)
        step = custom_linear_solve(lambda v: jvp(lambda x: f_at(x, consts), (sol,), (v,))[1], rhs,
                                   tangent_solve, lambda g, y: tangent_solve(g, y))
        return (sol, aux), (tree_map(lambda v: -v, step), tree_map(zero_tangent, aux))

    sol, aux = root(tuple(f_consts), guess)
    return (sol, tree_map(stop_gradient, aux)) if has_aux else sol
