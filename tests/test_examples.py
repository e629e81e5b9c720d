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
