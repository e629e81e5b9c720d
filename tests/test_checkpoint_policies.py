"""``checkpoint`` policies: what the forward pass saves (``saved_residuals``, checked against
JAX's), what the backward pass recomputes (equations counted), the same gradients at any
order, under ``jit`` (memory plan) and ``vmap``, and ``checkpoint_name`` on both engines."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np
import pytest

import fungraph as fg
import fungraph.numpy as fnp
from fungraph import checkpoint_policies as cp
from fungraph.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals
from fungraph.testing import check_grads
from tests.helpers import jax_or_skip


def _net(np_: Any, name: Any) -> Any:
    """Two tanh layers, the first labelled "h", written for fungraph or JAX."""
    def net(w: Any, x: Any) -> Any:
        h = name(np_.tanh(x @ w), "h")
        return np_.tanh(h @ w).sum()

    return net


net = _net(fnp, checkpoint_name)
RNG = np.random.default_rng(0)
W, X = RNG.normal(size=(3, 3)), RNG.normal(size=(2, 3))


def _policies(c: Any) -> dict[str, Any]:
    return {"none": None, "nothing": c.nothing_saveable, "dots": c.dots_saveable,
            "dots_no_batch": c.dots_with_no_batch_dims_saveable, "only_h": c.save_only_these_names("h"),
            "names_but_h": c.save_any_names_but_these("h"), "only_g": c.save_only_these_names("g"),
            "both": c.save_from_both_policies(c.save_only_these_names("h"), c.dots_saveable)}


POLICIES = _policies(cp)


def _dots(f: Any) -> int:
    """Top-level ``dot_general`` equations of ``grad(f)``: those of the backward pass, plus the
    forward products it recomputes (the forward pass's own sit inside the ``remat``)."""
    return sum(e.primitive.name == "dot_general" for e in fg.make_graph(fg.grad(f))(W, X).eqns)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_keeps_the_gradient(policy: str) -> None:
    f = fg.checkpoint(net, policy=POLICIES[policy])
    want = fg.grad(net)(W, X)
    np.testing.assert_allclose(fg.grad(f)(W, X), want, rtol=1e-14)
    np.testing.assert_allclose(fg.jit(fg.grad(f))(W, X), want, rtol=1e-13)
    check_grads(lambda w: f(w, X), [W], order=2)


@pytest.mark.parametrize("policy, recomputed", [("none", 2), ("dots", 0), ("dots_no_batch", 0), ("only_h", 1),
                                                ("names_but_h", 2), ("only_g", 2), ("both", 0)])
def test_saved_values_are_not_recomputed(policy: str, recomputed: int) -> None:
    """Three products transpose the two forward ones; a saved product (or the saved ``h``,
    which makes the first product unnecessary) is not computed again."""
    assert _dots(fg.checkpoint(net, policy=POLICIES[policy])) == 3 + recomputed


@pytest.mark.parametrize("policy", list(POLICIES))
def test_saved_residuals_match_jax(policy: str) -> None:
    jax, jnp = jax_or_skip()
    from jax.ad_checkpoint import checkpoint_name as jax_name
    from jax.ad_checkpoint import print_saved_residuals as jax_print

    ours = saved_residuals(fg.checkpoint(net, policy=POLICIES[policy]), W, X)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax_print(jax.checkpoint(_net(jnp, jax_name), policy=_policies(jax.checkpoint_policies)[policy]), W, X)
    theirs = [line.split(" from ")[0] for line in out.getvalue().splitlines()]
    assert sorted(f"{a} {w}".split(" from ")[0] for a, w in ours) == sorted(theirs)


def test_saved_residuals_name_their_sources(capsys: pytest.CaptureFixture[str]) -> None:
    print_saved_residuals(fg.checkpoint(net, policy=cp.save_only_these_names("h")), W, X)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["f64[3,3] from the argument w", "f64[2,3] from the argument x"]
    assert lines[2].startswith("f64[2,3] named 'h' from ") and "test_checkpoint_policies.py" in lines[2]
    dots = saved_residuals(fg.checkpoint(net, policy=cp.dots_saveable), {"w": W}.get("w"), x=X)
    assert [w for _, w in dots[:2]] == ["from the argument w", "from the argument x"]
    assert all(w.startswith("output of dot_general from ") for _, w in dots[2:]) and len(dots) == 4


def test_anything_except_names_recomputes_only_the_named_value() -> None:
    f = fg.checkpoint(net, policy=cp.save_anything_except_these_names("h"))
    wheres = [w for _, w in saved_residuals(f, W, X)]
    assert not any("named 'h'" in w for w in wheres) and len(wheres) > 3
    np.testing.assert_allclose(fg.grad(f)(W, X), fg.grad(net)(W, X), rtol=1e-14)


def test_offload_policies_save() -> None:
    policy = cp.save_and_offload_only_these_names(names_which_can_be_saved=["h"], names_which_can_be_offloaded=[],
                                                  offload_src="device", offload_dst="pinned_host")
    assert _dots(fg.checkpoint(net, policy=policy)) == 4
    assert _dots(fg.checkpoint(net, policy=cp.offload_dot_with_no_batch_dims("device", "pinned_host"))) == 3
    answers = {"dot_general": fg.ad_checkpoint.Saveable, "tanh": fg.ad_checkpoint.Offloadable("device", "pinned_host")}
    assert _dots(fg.checkpoint(net, policy=lambda p, *_, **__: answers.get(p.name, fg.ad_checkpoint.Recompute))) == 3
    with pytest.raises(ValueError, match=r"share \['h'\]"):
        cp.save_and_offload_only_these_names(names_which_can_be_saved=["h"], names_which_can_be_offloaded=["h"],
                                             offload_src="device", offload_dst="pinned_host")
    with pytest.raises(TypeError, match="names must be strings"):
        cp.save_only_these_names(3)  # type: ignore[arg-type]


def test_policies_under_vmap() -> None:
    xs = RNG.normal(size=(4, 2, 3))
    for policy in (cp.dots_saveable, cp.save_only_these_names("h")):
        f = fg.checkpoint(net, policy=policy)
        per_example = fg.vmap(fg.grad(f), in_axes=(None, 0))(W, xs)
        np.testing.assert_allclose(per_example, [fg.grad(net)(W, x) for x in xs], rtol=1e-13)
        total = fg.grad(lambda w: fg.vmap(lambda x: f(w, x))(xs).sum())(W)
        np.testing.assert_allclose(total, sum(fg.grad(net)(W, x) for x in xs), rtol=1e-13)


def test_a_policy_trades_memory_for_recomputation_under_jit() -> None:
    """20 checkpointed three-layer blocks under ``jit(grad)``: saving each block's labelled
    middle value (two values a block: its input and the label) needs more memory than saving
    only the inputs, and less than not checkpointing (three a block)."""
    rng = np.random.default_rng(0)
    ws = rng.standard_normal((20, 64, 64)) * 0.1
    x = rng.standard_normal((1024, 64))

    def block(h: Any, w: Any) -> Any:
        return fnp.tanh(checkpoint_name(fnp.tanh(fnp.tanh(h @ w) @ w), "mid") @ w)

    def loss(x: Any, ws: Any, policy: Any) -> Any:
        for i in range(20):
            x = block(x, ws[i]) if policy == "plain" else fg.checkpoint(block, policy=policy)(x, ws[i])
        return fnp.sum(x ** 2)

    mib = {}
    want = fg.grad(lambda v, w: loss(v, w, "plain"))(x, ws)
    for name, policy in (("plain", "plain"), ("inputs", None), ("mid", cp.save_only_these_names("mid"))):
        g = fg.jit(fg.grad(lambda v, w, p=policy: loss(v, w, p)))
        lowered = g.lower(x, ws)
        assert not any(e.primitive.name in ("checkpoint_name", "remat_saved") for e in lowered.graph.eqns)
        mib[name] = lowered.plan.arena_bytes / 2 ** 20
        np.testing.assert_allclose(g(x, ws), want, rtol=1e-12, atol=1e-12)
    assert mib["plain"] >= 30 and 10 <= mib["inputs"] <= 12 and 20 <= mib["mid"] <= 22, mib


@pytest.fixture(params=["cpu", "opencl"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "opencl":
        request.getfixturevalue("require_opencl")
    return request.param


def test_checkpoint_name_is_the_identity(backend: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    tree = checkpoint_name({"a": x, "b": (x, 2.0)}, "t")
    np.testing.assert_array_equal(tree["a"], x)
    assert float(tree["b"][1]) == 2.0

    def body(i: Any, c: Any) -> Any:
        return checkpoint_name(c * 2.0, "carry") + 1.0

    f = fg.jit(lambda x: fg.lax.fori_loop(0, 3, body, checkpoint_name(x, "x")), backend=backend)
    np.testing.assert_allclose(np.asarray(f(x)), ((x * 2 + 1) * 2 + 1) * 2 + 1)
    assert not any(e.primitive.name == "checkpoint_name" for e in f.lower(x).graph.eqns)
    np.testing.assert_allclose(fg.grad(lambda x: checkpoint_name(fnp.sin(x), "s").sum())(x.astype(np.float64)),
                               np.cos(x))
    np.testing.assert_allclose(fg.vmap(lambda r: checkpoint_name(r, "r"))(x), x)
    w32, x32 = W.astype(np.float32), X.astype(np.float32)
    for policy in (cp.dots_saveable, cp.save_only_these_names("h")):
        g = fg.jit(fg.grad(fg.checkpoint(net, policy=policy)), backend=backend)
        np.testing.assert_allclose(np.asarray(g(w32, x32)), fg.grad(net)(W, X), rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="name must be a string"):
        checkpoint_name(x, 3)  # type: ignore[arg-type]


def test_ad_checkpoint_has_jax_names() -> None:
    jax_or_skip()
    import jax.ad_checkpoint

    names = [n for n in dir(jax.ad_checkpoint) if not n.startswith("_")]
    assert [n for n in names if not hasattr(fg.ad_checkpoint, n)] == []
    assert fg.ad_checkpoint.checkpoint is fg.checkpoint and fg.ad_checkpoint.remat is fg.remat
    policies = [n for n in dir(jax.checkpoint_policies) if not n.startswith("_")]
    assert [n for n in policies if not hasattr(cp, n)] == []
