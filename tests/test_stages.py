"""``fungraph.stages``, JAX's ahead-of-time API: ``jit(f).trace(...)``, ``.lower()``,
``.compile()``, with keyword arguments, ``args_info``/``out_info`` as JAX's, and the compiled
function refusing arguments of other shapes."""

from __future__ import annotations

import numpy as np
import pytest

import fungraph as fg
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


def _step(params: dict, x: np.ndarray, *, lr: float = 0.1) -> tuple:
    loss = ((x @ params["w"]) ** 2).sum()
    return {"w": params["w"] - lr * x.T @ x @ params["w"]}, loss


ARGS = ({"w": np.ones((3, 2), np.float32)}, np.arange(12, dtype=np.float32).reshape(4, 3))


def _infos(tree: object) -> list[tuple]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.5}], ids=["positional", "keyword"])
def test_trace_lower_compile_match_jax(kwargs: dict) -> None:
    theirs = jax.jit(_step, donate_argnums=0).trace(*ARGS, **kwargs)
    ours = fg.jit(_step, donate_argnums=0).trace(*ARGS, **kwargs)
    assert isinstance(ours, fg.stages.Traced)
    assert _infos(ours.out_info) == _infos(theirs.out_info)
    assert jax.tree_util.tree_structure(ours.out_info) == jax.tree_util.tree_structure(theirs.out_info)
    assert [a.donated for a in fg.tree_util.tree_leaves(ours.args_info)][:1] == [True]
    assert "dot_general" in str(ours.jaxpr)
    lowered = ours.lower()
    assert "memory plan" in lowered.as_text() and lowered.out_info == ours.out_info
    compiled = lowered.compile()
    assert isinstance(compiled, fg.stages.Compiled) and isinstance(fg.jit(_step), fg.stages.Wrapped)
    want = jax.jit(_step).lower(*ARGS, **kwargs).compile()(*ARGS, **kwargs)
    got = compiled({"w": ARGS[0]["w"].copy()}, ARGS[1], **kwargs)
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_compiled_refuses_other_shapes_naming_both() -> None:
    compiled = fg.jit(lambda x: x * 2).lower(np.ones(3, np.float32)).compile()
    with pytest.raises(TypeError, match=r"compiled for arguments \(float32\[3\]\) but called with \(float32\[4\]\)"):
        compiled(np.ones(4, np.float32))


def test_weak_outputs_show_in_out_info() -> None:
    info = fg.jit(lambda x, s: (x * s, s * 2.0)).trace(np.ones(2, np.float32), 3.0).out_info
    want = jax.jit(lambda x, s: (x * s, s * 2.0)).trace(np.ones(2, np.float32), 3.0).out_info
    assert [i.weak_type for i in info] == [i.weak_type for i in want] == [False, True]
