"""``fungraph.profiler`` as JAX programs use it: ``trace``/``start_trace``/``stop_trace`` write a
Chrome trace-event file holding the annotated regions (with their arguments and threads) and
the compilations that ran inside the trace, and nothing is recorded outside one."""

from __future__ import annotations

import glob
import gzip
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import fungraph as fg
from fungraph import profiler


def _events(log_dir: Path, name: str = "*.trace.json.gz") -> list[dict]:
    (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", name))
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


_update = fg.jit(lambda w: w * 0.5 + 1.0)


@profiler.annotate_function
def _train_step(w: np.ndarray) -> object:
    return _update(w)


def test_trace_records_annotations_compiles_and_threads(tmp_path: Path) -> None:
    with profiler.TraceAnnotation("before the trace"):
        pass
    with profiler.trace(tmp_path, create_perfetto_trace=True):
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step):
                _train_step(np.ones(3) * step)
        worker = threading.Thread(target=lambda: profiler.TraceAnnotation("worker").__enter__().__exit__())
        worker.start()
        worker.join()
    events = _events(tmp_path)
    names = [e["name"] for e in events]
    assert names.count("train") == 2 and names.count("_train_step") == 2 and "worker" in names
    assert "before the trace" not in names
    assert [e["args"]["step_num"] for e in events if e["name"] == "train"] == ["0", "1"]
    compiles = [e for e in events if e["name"] == "compile (cpu)"]
    assert len(compiles) == 1 and int(compiles[0]["args"]["equations"]) >= 2 and compiles[0]["dur"] > 0
    assert len({e["tid"] for e in events}) == 2
    assert _events(tmp_path, "perfetto_trace.json.gz") == events


def test_start_and_stop_trace_refuse_misuse(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no profiler trace is running"):
        profiler.stop_trace()
    profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="already running"):
            profiler.start_trace(str(tmp_path))
    finally:
        profiler.stop_trace()
    assert _events(tmp_path) == []
    with pytest.raises(ValueError, match="create_perfetto_trace=True"):
        profiler.start_trace(tmp_path, create_perfetto_link=True)
