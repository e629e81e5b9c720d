"""The benchmark models (benchmarks/models.py) on reduced configurations: jit agrees with
eager, every memory plan verifies and sits between the liveness bound and no reuse, a
steady-state jitted call peaks far below an eager call, and the MNIST CNN training step
under jit with donated parameters matches the eager step."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import fungraph as fg
from fungraph.backends.cpu import lowering_for
from fungraph.interpreters.memory import plan_memory, verify_plan

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` under a private name, leaving sys.path alone."""
    spec = importlib.util.spec_from_file_location(f"_fungraph_benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


models = _load("models")
peak_traced_bytes = _load("_util").peak_traced_bytes
ModelSpec = models.ModelSpec
SPECS = {s.name: s for s in models.MODELS}


def _copy(tree: object) -> object:
    return fg.tree_map(np.array, tree)


@pytest.fixture(scope="module", params=sorted(SPECS))
def built(request: pytest.FixtureRequest) -> tuple[ModelSpec, object, tuple, object]:
    spec = SPECS[request.param]
    fn, args = spec.build(0, reduced=True)
    jitted = fg.jit(fn, donate_argnums=spec.donate_argnums)
    return spec, fn, args, jitted


def test_jit_matches_eager(built: tuple) -> None:
    spec, fn, args, jitted = built
    want = fn(*args)
    got = jitted(*_copy(args))
    leaves_want, leaves_got = fg.tree_leaves(want), fg.tree_leaves(got)
    assert len(leaves_want) == len(leaves_got)
    for w, g in zip(leaves_want, leaves_got):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6 * max(1.0, float(np.abs(w).max())))


def test_plan_verifies_and_is_bounded(built: tuple) -> None:
    spec, fn, args, jitted = built
    low = jitted.lower(*args)
    plan = low.plan
    verify_plan(low.graph, plan, donated=low.compiled.executable.donated)
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.unplanned_bytes
    assert plan.arena_bytes < plan.unplanned_bytes / 3  # reuse matters on every model


@pytest.mark.parametrize("strategy", ["owl_blocks", "greedy_size", "greedy_breadth", "interference"])
def test_every_strategy_gives_a_valid_plan(built: tuple, strategy: str) -> None:
    spec, fn, args, jitted = built
    graph = jitted.lower(*args).graph
    plan = plan_memory(graph, strategy=strategy)
    verify_plan(graph, plan)
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.unplanned_bytes


def test_depthwise_conv_matches_a_loop_over_channels() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 9, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 5, 1, 1)).astype(np.float32)
    for stride in (1, 2):
        got = models.depthwise_conv(x, w, stride=stride)
        want = np.stack([fg.lax.conv(x[:, c:c + 1], w[:, :, c, 0, 0][None, None], (stride, stride),
                                     ((1, 1), (1, 1)))[:, 0] for c in range(5)], axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mnist_step_with_donation_matches_eager_and_trains() -> None:
    step, (params, x, labels) = models.make_mnist_train_step(0, batch=8)
    want_params, want_loss = step(params, x, labels)
    jitted = fg.jit(step, donate_argnums=0)
    state = _copy(params)
    got_params, got_loss = jitted(state, x, labels)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-4)
    for w, g in zip(fg.tree_leaves(want_params), fg.tree_leaves(got_params)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    losses = [float(got_loss)]
    for _ in range(5):  # the jitted step keeps working on its own (donated) outputs
        got_params, loss = jitted(got_params, x, labels)
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_jit_call_peak_is_a_small_fraction_of_eager(built: tuple) -> None:
    """tracemalloc peak of one steady-state call against one eager call: the arena is
    allocated when the function is compiled, and every temporary of conv, pooling and the
    pooling gradient is planned in it (scratch), so no equation falls back to its allocating
    numpy impl and a call allocates little more than its outputs and numpy's constant ufunc
    buffers (the reduced models are small, so those constants weigh: the full models'
    ratios are in docs/memory.md)."""
    spec, fn, args, jitted = built
    exe = jitted.lower(*args).compiled.executable
    graph = exe.graph
    # a fusion region has only a scratch rule (the numpy engine's chunks) or runs natively
    assert {e.primitive.name for e in graph.eqns
            if not lowering_for(e.primitive)[1]
            and getattr(e.primitive.lowerings.get("cpu"), "scratch", None) is None} <= {"stop_gradient"}
    state = {"args": _copy(args)}

    def run_jit() -> None:
        out = jitted(*state["args"])
        if spec.donate_argnums:  # a training step: feed the new (donated) params back in
            state["args"] = (out[0], *state["args"][1:])

    run_jit()
    eager = peak_traced_bytes(lambda: fn(*args))
    jit = peak_traced_bytes(run_jit)
    assert 2.5 * jit <= eager, (jit, eager)


@pytest.mark.parametrize("name, count", [("resnet50", 25_557_032), ("mobilenet_v2", 3_504_872),
                                         ("inception_v3", 23_834_568)])
def test_full_models_have_torchvisions_parameter_counts(name: str, count: int) -> None:
    """torchvision's counts (InceptionV3: 27,161,264 less the 3,326,696 of its aux head);
    a folded batch norm has two parameters per channel, as torchvision's weight and bias."""
    _, (params, x) = SPECS[name].build(0)
    assert sum(a.size for a in fg.tree_leaves(params)) == count
