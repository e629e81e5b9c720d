"""The command line: `fungraph show / demo / bench`, exit codes, files written, one-line errors."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from fungraph import cli, viz
from fungraph.__main__ import main

REPO = Path(__file__).resolve().parents[1]
SHOW_ME = REPO / "examples" / "show_me.py"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`show` puts the current directory and imported files' folders on sys.path."""
    monkeypatch.setattr(sys, "path", list(sys.path))


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fungraph: error: ")
    return lines[0]


# --- --arg specs -------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "shape", "dtype"), [
    ("f32[256,784]", (256, 784), np.float32),
    ("f64[]", (), np.float64),
    ("i32[5]", (5,), np.int32),
    ("bool[4]", (4,), np.bool_),
    (" i64[ 2 , 3 ] ", (2, 3), np.int64),
    ("float32[1,2]", (1, 2), np.float32),
])
def test_arg_specs_parse(spec: str, shape: tuple, dtype: type) -> None:
    s = cli.parse_arg_spec(spec)
    assert s.shape == shape and s.dtype == np.dtype(dtype)


@pytest.mark.parametrize("spec", ["f32", "f32[2,]", "f32[-1]", "f32[2.5]", "x[2]", "f4[2]", "f32[2]]", "[2]"])
def test_bad_arg_specs_are_rejected(spec: str) -> None:
    with pytest.raises(Exception, match="bad spec"):
        cli.parse_arg_spec(spec)


# --- show --------------------------------------------------------------------------------


def test_show_grad_jit_prints_graphs_passes_plan_and_writes_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dot, plan = tmp_path / "g.dot", tmp_path / "plan.svg"
    status = main(["show", f"{SHOW_ME}:predict", "--arg", "f32[784,10]", "--arg", "f32[256,784]", "--grad", "--jit",
                   "--dot", str(dot), "--plan", str(plan)])
    out = capsys.readouterr().out
    assert status == 0
    assert "== staged graph of grad(predict)(f32[784,10], f32[256,784])" in out
    assert "== optimised graph (jit)" in out and "fma" in out
    assert "fuse_fma" in out and "total" in out
    assert "== memory plan" in out and "arena " in out and "liveness lower bound" in out
    assert dot.read_text().startswith('digraph "grad(predict)(f32[784,10], f32[256,784])"')
    assert "block @" in dot.read_text()  # with --jit the picture shows the memory plan
    root = ET.parse(plan).getroot()
    assert root.tag == SVG + "svg"
    assert [e for e in root.iter(SVG + "rect") if e.get("class") == "buffer"]


def test_show_without_jit_prints_only_the_staged_graph(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", f"{SHOW_ME}:predict", "--arg", "f32[3,2]", "--arg", "f32[4,3]", "--source"]) == 0
    out = capsys.readouterr().out
    assert "staged graph of predict(f32[3,2], f32[4,3]): 4 equations" in out
    assert "c:f32[4,2] = dot_general" in out and "f:f32[] = reduce_sum" in out
    assert "show_me.py:" in out  # --source ends each equation with the user's line
    assert "optimised" not in out and "memory plan" not in out


def test_show_imports_a_dotted_module_from_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = tmp_path / "cli_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("import fungraph.numpy as fnp\n\n\ndef loss(x):\n    return fnp.sum(fnp.sin(x))\n")
    monkeypatch.chdir(tmp_path)
    assert main(["show", "cli_test_pkg.model:loss", "--arg", "f64[3]", "--grad"]) == 0
    out = capsys.readouterr().out
    assert "grad(loss)(f64[3])" in out and "cos" in out


ERRORS = [
    (["show", "cli_no_such_module_xyz:f", "--arg", "f32[2]"], 2, "no module named 'cli_no_such_module_xyz'"),
    (["show", "examples/cli_no_such_file.py:f"], 2, "no such file"),
    (["show", f"{SHOW_ME}:nope"], 2, "has no function 'nope'; it defines predict"),
    (["show", str(SHOW_ME)], 2, "expected MODULE:FUNCTION"),
    (["show", f"{SHOW_ME}:predict", "--arg", "f32[2,x]"], 2, "bad spec 'f32[2,x]'"),
    (["show", f"{SHOW_ME}:predict", "--arg", "f4[2]"], 2, "unknown dtype 'f4'"),
    (["show", f"{SHOW_ME}:predict", "--arg", "f32[2,3]"], 2, "predict(w, x) cannot be called with 1 --arg value"),
    (["show", f"{SHOW_ME}:predict", "--arg", "f32[3,2]", "--arg", "f32[4,3]", "--dot", "g.jpg"], 2, "must end in"),
    (["show", f"{SHOW_ME}:predict", "--arg", "f32[2,3]", "--arg", "f32[4,5]"], 1,
     "tracing predict(f32[2,3], f32[4,5]) failed: ShapeError"),
    (["show", f"{SHOW_ME}:predict", "--arg", "i32[3,2]", "--arg", "i32[4,3]", "--grad"], 1,
     "tracing grad(predict)(i32[3,2], i32[4,3]) failed"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ([], 2, "the following arguments are required"),
    (["demo", "--steps", "0"], 2, "0 is not positive"),
]


@pytest.mark.parametrize(("argv", "status", "message"), ERRORS)
def test_bad_input_gives_one_line_and_an_exit_status(
        argv: list[str], status: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == status
    assert message in _one_error_line(capsys.readouterr().err)


def test_a_module_that_fails_to_import_is_a_failure_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "broken_model.py"
    bad.write_text("def f(x):\n    return x\n\nraise RuntimeError('boom\\non two lines')\n")
    assert main(["show", f"{bad}:f", "--arg", "f32[2]"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "importing" in line and "RuntimeError: boom on two lines" in line


def test_a_picture_without_graphviz_fails_before_tracing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    status = main(["show", f"{SHOW_ME}:predict", "--arg", "f32[3,2]", "--arg", "f32[4,3]", "--dot",
                   str(tmp_path / "g.svg")])
    captured = capsys.readouterr()
    assert status == 1
    assert "apt-get install graphviz" in _one_error_line(captured.err)
    assert captured.out == "" and not (tmp_path / "g.svg").exists()


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "{show,demo,bench}" in capsys.readouterr().out
    assert main(["show", "--help"]) == 0
    assert "DTYPE[DIMS]" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("fungraph ")


def test_python_dash_m_fungraph_in_a_subprocess(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    ok = subprocess.run([sys.executable, "-m", "fungraph", "show", "examples/show_me.py:predict", "--arg",
                         "f32[784,10]", "--arg", "f32[256,784]", "--grad", "--jit"],
                        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "== optimised graph (jit)" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "fungraph", "show", "examples/show_me.py:predict", "--arg", "f32[2"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "bad spec 'f32[2'" in _one_error_line(bad.stderr)


# --- demo --------------------------------------------------------------------------------


def test_demo_trains_prints_reports_and_writes_pictures(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no Graphviz: graph.svg is skipped
    out_dir = tmp_path / "pictures"
    assert main(["demo", "--steps", "12", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "\r" not in out  # not a terminal: plain lines
    assert re.search(r"^step  1/12  loss \d\.\d{4}  compiled$", out, re.M)
    assert re.search(r"^step 12/12  loss \d\.\d{4}  \d+ steps/s$", out, re.M)
    first, last = map(float, re.search(r"loss (\d+\.\d+) -> (\d+\.\d+)", out).groups())
    assert last < first
    staged, optimised = map(int, re.search(r"(\d+) equations staged, (\d+) after optimisation", out).groups())
    assert optimised < staged
    assert "dce_final" in out and "strategy" in out
    assert (out_dir / "graph.dot").read_text().startswith('digraph "sgd_step"')
    assert ET.parse(out_dir / "memory.svg").getroot().tag == SVG + "svg"
    assert not (out_dir / "graph.svg").exists() and "skipped" in out and "brew install graphviz" in out


def test_demo_on_a_terminal_draws_one_updating_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["demo", "--steps", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    bar = out.split("\n")[1]
    assert bar.startswith("\r[") and bar.count("\r") >= 2 and "3/3" in bar and "loss" in bar
    assert (tmp_path / "graph.svg").exists() == viz.graphviz_available()


# --- bench -------------------------------------------------------------------------------


def test_bench_runs_each_script_with_quick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bench_a.py").write_text("import sys\nprint('bench a args', sys.argv[1:])\n")
    (tmp_path / "bench_b.py").write_text("import sys\nprint('bench b ran')\nsys.exit(3)\n")
    (tmp_path / "helper.py").write_text("raise SystemExit('not a benchmark')\n")
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: tmp_path)
    assert main(["bench", "--quick", "bench_a"]) == 0
    assert "bench a args ['--quick']" in capsys.readouterr().out
    assert main(["bench"]) == 1
    captured = capsys.readouterr()
    assert "bench a args []" in captured.out and "bench b ran" in captured.out
    assert "1 of 2 benchmarks failed: bench_b.py (exit status 3)" in _one_error_line(captured.err)
    assert main(["bench", "nothing_like_it"]) == 2
    assert "available: bench_a, bench_b" in _one_error_line(capsys.readouterr().err)


def test_bench_outside_a_checkout(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: None)
    assert main(["bench"]) == 1
    assert "only available from a source checkout" in _one_error_line(capsys.readouterr().err)


def test_the_repository_has_benchmarks() -> None:
    assert cli.benchmarks_dir() == REPO / "benchmarks"


def test_bench_summary_has_the_native_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fungraph bench` (bench_summary.py) prints issue #35's rows: each elementwise function
    at float32 and float64 on the numpy engine, the native engine and JAX, and the native
    while_loop's time per iteration at each carry size (small sizes here), and both built for
    one thread against the usable cores (bench_native_threads.py's rows)."""
    import fungraph as fg
    from fungraph.backends.native import native_enabled

    assert native_enabled(), "the suite's machine has a C compiler"
    spec = importlib.util.spec_from_file_location("_fungraph_bench_summary", REPO / "benchmarks" / "bench_summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    monkeypatch.setattr(sys.modules["_util"], "QUIET_S", 0.0)
    saved = fg.config.fungraph_native_cpu, fg.config.jax_enable_x64
    try:
        for jax in (None, summary.try_jax()):
            text = summary.native_elementwise_table(jax, 4096, rounds=1)
            for work in ("tanh(x)*2+1", "exp(x)*2+1", "log1p(abs(x))*2+1", "gelu (tanh form)"):
                for dtype in ("float32", "float64"):
                    assert re.search(rf"^{re.escape(work)} {dtype} +\d", text, re.M), text
            assert ("native / jax" in text) == (jax is not None)
            loops = summary.native_loop_table(jax, (10, 1000), (3, 3))
            assert re.search(r"^10 +\S+ us +\S+ us", loops, re.M) and re.search(r"^1,000 +\S+ us", loops, re.M), loops
            assert ("native / jax" in loops) == (jax is not None)
            threaded = summary.native_threads_tables(jax, 4096, (10, 1000), (3, 3), rounds=1)
            for work in ("tanh(x)*2+1", "gelu (tanh form)"):
                assert re.search(rf"^{re.escape(work)} float64 +\d\S* / \d", threaded, re.M), threaded
            assert re.search(r"^1,000 +\S+ / \S+ +\S+ / \S+", threaded, re.M) and "1 thread" in threaded, threaded
            assert ("jax" in threaded.split("\n")[0]) == (jax is not None)
    finally:
        fg.config.update("fungraph_native_cpu", saved[0])
        fg.config.update("jax_enable_x64", saved[1])


def test_bench_native_math_builds_as_the_engine_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """bench_native_math.py compiles with the engine's compiler (``$CC``) and flags, and has
    nothing to measure with the engine off."""
    import fungraph as fg
    from fungraph.backends.native import toolchain

    spec = importlib.util.spec_from_file_location("_fungraph_bench_native_math",
                                                  REPO / "benchmarks" / "bench_native_math.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    engine = [f for f in toolchain.FLAGS if f not in ("-fPIC", "-shared")]
    assert bench.FLAGS.split() == engine
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {shutil.which('gcc') or shutil.which('cc')} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    lib = bench.build(bench.FLAGS, ["exp"], tmp_path)
    assert hasattr(lib, "b_exp_f32")
    assert "-ffp-contract=off" in log.read_text().split()
    saved = fg.config.fungraph_native_cpu
    fg.config.update("fungraph_native_cpu", False)
    try:
        monkeypatch.setattr(sys, "argv", ["bench_native_math.py", "--quick", "exp"])
        bench.main()
    finally:
        fg.config.update("fungraph_native_cpu", saved)
    assert "nothing to measure" in capsys.readouterr().out
