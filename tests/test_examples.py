"""The examples run as tests (quick settings)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def _examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


#: The examples run as the README's demo command runs them: in JAX's default 32-bit mode (the
#: rest of the suite turns x64 on, which once hid a float64 parameter reaching a float32 product).
pytestmark = pytest.mark.usefixtures("x32")


def test_mlp_training_reduces_the_loss_tenfold() -> None:
    from mlp_training import train

    first, last = train(steps=150, verbose=False)
    assert first / last >= 10, (first, last)


def test_demo_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import mlp_training

    monkeypatch.setattr(mlp_training, "train", lambda steps, verbose: (1.0, 0.05))
    monkeypatch.setattr(sys, "argv", ["demo.py"])
    runpy.run_path(str(EXAMPLES / "demo.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "round trip equal: True" in out
    assert "max |staged - eager| = 0.00e+00" in out


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    import quickstart

    quickstart.main()
    assert "grad(jit(f)) == jit(grad(f)): True" in capsys.readouterr().out


def test_per_example_gradients() -> None:
    import per_example_gradients

    assert per_example_gradients.main(batch=4).shape == (4, 3)


def test_newton_gradient_matches_the_implicit_function_theorem() -> None:
    import newton

    dx, implicit = newton.main()
    assert abs(dx - implicit) < 1e-10


def test_cnn_jit_matches_eager() -> None:
    import cnn

    assert cnn.main(batch=4) < 1e-5


def test_custom_pass_example() -> None:
    import custom_pass

    assert [e.primitive.name for e in custom_pass.main().eqns] == ["mul"]


def test_property_testing_example() -> None:
    import property_testing

    property_testing.main()


def test_data_parallel_in_one_process_is_the_full_batch_run() -> None:
    """examples/data_parallel.py without mpiexec: a job of one process (tests/mpi/test_launch.py
    runs it under mpiexec)."""
    import data_parallel

    assert data_parallel.main(steps=3) < 1e-6
