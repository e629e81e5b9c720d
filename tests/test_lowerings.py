"""``core.register_lowering``: the one way a primitive declares a backend lowering."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import fungraph as fg
from fungraph.backends import backend_factory
from fungraph.core import MissingRuleError, Primitive, ScratchLowering, get_primitive, register_lowering
from fungraph.ir import ShapedArray


def _same_aval(x: ShapedArray) -> ShapedArray:
    return ShapedArray(x.shape, x.dtype)


triple_p = Primitive("test_lowerings_triple", impl=lambda x: np.asarray(x) * 3, abstract_eval=_same_aval, arity=1)
halve_p = Primitive("test_lowerings_halve", impl=lambda x: np.asarray(x) / 2, abstract_eval=_same_aval, arity=1)
bare_p = Primitive("test_lowerings_bare", impl=lambda x: np.asarray(x) + 1, abstract_eval=_same_aval, arity=1)

CALLS = {"triple": 0, "halve_lowered": 0, "halve_block": 0}


def _triple_cpu(out: np.ndarray, x: Any) -> np.ndarray:
    CALLS["triple"] += 1
    return np.multiply(x, 3, out=out)


def _halve_bytes(eqn: Any) -> int:
    return eqn.inputs[0].aval.nbytes


def _halve_lower(eqn: Any, block: np.ndarray) -> Any:
    CALLS["halve_lowered"] += 1
    CALLS["halve_block"] = block.size
    tmp = block.view(eqn.inputs[0].aval.dtype).reshape(eqn.inputs[0].aval.shape)

    def run(out: np.ndarray, x: Any) -> np.ndarray:
        np.divide(x, 2, out=tmp)   # through the planned block
        np.copyto(out, tmp)
        return out

    return run


register_lowering(triple_p, "cpu", _triple_cpu)
register_lowering(halve_p, "cpu", scratch=ScratchLowering(_halve_bytes, _halve_lower))


def test_a_registered_rule_is_what_the_cpu_engine_runs() -> None:
    f = fg.jit(lambda x: triple_p.bind(x) + 1.0)
    x = np.arange(6, dtype=np.float32)
    before = CALLS["triple"]
    np.testing.assert_array_equal(f(x), x * 3 + 1)
    np.testing.assert_array_equal(f(x), x * 3 + 1)
    assert CALLS["triple"] - before == 2
    assert f.lower(x).compiled.executable.fallback_eqns == 0


def test_a_scratch_lowering_gets_its_planned_block() -> None:
    f = fg.jit(lambda x: halve_p.bind(x * 2.0))
    x = np.arange(10, dtype=np.float64)
    np.testing.assert_array_equal(f(x), x)
    assert CALLS["halve_lowered"] >= 1
    assert CALLS["halve_block"] == x.nbytes
    assert backend_factory("cpu").scratch_bytes(f.lower(x).compiled.graph.eqns[-1]) == x.nbytes


def test_a_primitive_without_a_cpu_rule_runs_its_impl() -> None:
    f = fg.jit(lambda x: bare_p.bind(x * 2.0))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert f.lower(x).compiled.executable.fallback_eqns == 1


def test_a_missing_lowering_names_the_primitive_and_the_backend() -> None:
    with pytest.raises(MissingRuleError, match=r"no opencl lowering for primitive `test_lowerings_bare`"):
        bare_p.lowering("opencl")
    assert triple_p.lowering("cpu").rule is _triple_cpu
    assert halve_p.lowering("cpu").rule is None and halve_p.lowering("cpu").scratch.nbytes is _halve_bytes


def test_registering_twice_or_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"`test_lowerings_triple` already has a cpu lowering"):
        register_lowering(triple_p, "cpu", _triple_cpu)
    with pytest.raises(ValueError, match=r"give a rule, a scratch lowering or both"):
        register_lowering(bare_p, "cpu")
    assert "cpu" not in bare_p.lowerings


def test_lowerings_are_not_a_constructor_argument() -> None:
    with pytest.raises(TypeError):
        Primitive("test_lowerings_ctor", impl=np.negative, abstract_eval=_same_aval, lowerings={"cpu": _triple_cpu})


def test_every_single_output_ufunc_primitive_writes_into_out_on_the_cpu() -> None:
    """A primitive whose ``impl`` is a numpy ufunc would otherwise run its impl and a copy."""
    import fungraph.numpy  # noqa: F401 - defines the primitives of the libraries above lax
    import fungraph.scipy.special  # noqa: F401

    missing = sorted(p.name for p in Primitive.registry.values()
                     if isinstance(p.impl, np.ufunc) and p.impl.nout == 1
                     and ("cpu" not in p.lowerings or p.lowerings["cpu"].rule is None))
    assert missing == []
    assert get_primitive("add").lowering("cpu").rule is not None


@pytest.mark.parametrize("module", ["fungraph.backends.cpu", "fungraph.backends.opencl"])
def test_a_backend_imported_first_finds_the_control_flow_primitives(module: str) -> None:
    """Backends name the higher-order primitives (above them in the layers) when they load;
    importing one first still defines those primitives before (``import fungraph`` runs first)."""
    import os
    import subprocess
    import sys

    backend = module.rsplit(".", 1)[1]
    code = (f"import {module}\nfrom fungraph.core import get_primitive\n"
            f"print([n for n in ('cond', 'while', 'scan') if {backend!r} not in get_primitive(n).lowerings])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
