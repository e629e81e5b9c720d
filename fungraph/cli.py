"""The ``fungraph`` command line (``python -m fungraph``): look at what a function becomes.

    fungraph show examples/show_me.py:predict --arg f32[784,10] --arg f32[256,784] --grad --jit
    fungraph demo [--steps 300] [--out fungraph-out]
    fungraph bench [--quick] [NAME ...]

``show`` stages a function on abstract arguments and prints its graph; with ``--jit`` also the
optimised graph, the optimiser's pass report and the memory plan. ``demo`` trains a small MLP
with ``jit`` and writes pictures of its graph and memory plan. ``bench`` runs the benchmark
scripts of a source checkout. Mistakes in what was typed exit with status 2, failures of the
user's code with status 1; both print one line, ``fungraph: error: ...``, never a traceback.
See docs/cli.md.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import fungraph as fg
from fungraph import dtypes, viz
from fungraph.datasets import spirals

USAGE_ERROR = 2
FAILURE = 1


class CliError(Exception):
    """A one-line message for the user and the exit status that goes with it."""

    def __init__(self, message: str, status: int = FAILURE) -> None:
        super().__init__(message)
        self.status = status


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake raises CliError instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{message} (see `{self.prog} --help`)", USAGE_ERROR)


# --- show --------------------------------------------------------------------------------

_SPEC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[([^\]]*)\]\s*$")
_DTYPE_NAMES: dict[str, np.dtype] = {**dtypes.FROM_SHORT, **{d.name: d for d in dtypes.SUPPORTED}}


def parse_arg_spec(text: str) -> fg.ShapeDtypeStruct:
    """``f32[256,784]`` -> ShapeDtypeStruct((256, 784), float32); ``f64[]`` is a scalar."""
    example = "expected DTYPE[DIMS] such as f32[256,784], i32[5] or f64[] for a scalar"
    m = _SPEC.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"bad spec {text!r}: {example}")
    name, dims = m.group(1), m.group(2).strip()
    if name not in _DTYPE_NAMES:
        known = ", ".join(dtypes.FROM_SHORT)
        raise argparse.ArgumentTypeError(f"bad spec {text!r}: unknown dtype {name!r} (use one of {known})")
    shape: list[int] = []
    for part in dims.split(",") if dims else []:
        part = part.strip()
        if not part.isdigit():
            raise argparse.ArgumentTypeError(f"bad spec {text!r}: dimension {part!r} is not a whole number; "
                                             f"{example}")
        shape.append(int(part))
    return fg.ShapeDtypeStruct(tuple(shape), _DTYPE_NAMES[name])


def _spec_text(s: fg.ShapeDtypeStruct) -> str:
    return f"{dtypes.SHORT_NAMES[s.dtype]}[{','.join(str(d) for d in s.shape)}]"


def _import_file(path: Path) -> ModuleType:
    """Import a .py file by path (its folder goes on sys.path so its sibling imports work)."""
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    stem = re.sub(r"\W", "_", path.stem)
    name = f"fungraph_show_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path}: not a Python file", USAGE_ERROR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:
        sys.modules.pop(name, None)
        raise CliError(f"importing {path} failed: {_one_line(err)}") from None
    return module


def _import_module(name: str) -> ModuleType:
    """Import a dotted module name, looking in the current directory first."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            raise CliError(f"no module named {name!r} (looked in {cwd} and on sys.path; a path to a .py file "
                           f"works too)", USAGE_ERROR) from None
        raise CliError(f"importing {name} failed: {_one_line(err)}") from None
    except (Exception, SystemExit) as err:
        raise CliError(f"importing {name} failed: {_one_line(err)}") from None


def load_function(target: str) -> Callable[..., Any]:
    """``MODULE:FUNCTION`` -> the function; MODULE is a dotted name or a path to a .py file."""
    module_part, sep, func_part = target.rpartition(":")
    if not sep or not module_part or not func_part:
        raise CliError(f"expected MODULE:FUNCTION such as examples/show_me.py:predict or mypkg.model:loss, "
                       f"got {target!r}", USAGE_ERROR)
    if module_part.endswith(".py") or "/" in module_part or os.sep in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise CliError(f"no such file: {module_part}", USAGE_ERROR)
        module = _import_file(path)
    else:
        module = _import_module(module_part)
    obj: Any = module
    for part in func_part.split("."):
        if not hasattr(obj, part):
            defined = sorted(n for n, v in vars(module).items()
                             if inspect.isfunction(v) and not n.startswith("_") and v.__module__ == module.__name__)
            hint = f"; it defines {', '.join(defined[:12])}" if defined else ""
            raise CliError(f"{module_part} has no function {func_part!r}{hint}", USAGE_ERROR)
        obj = getattr(obj, part)
    if not callable(obj):
        raise CliError(f"{target} is a {type(obj).__name__}, not a function", USAGE_ERROR)
    return obj


def _check_arity(fun: Callable[..., Any], n: int, label: str) -> None:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError as err:
        raise CliError(f"{label}{sig} cannot be called with {n} --arg value{'s' if n != 1 else ''}: {err}",
                       USAGE_ERROR) from None


def _check_output_path(path: Path | None, option: str, allowed: Sequence[str], needs_dot: bool) -> None:
    if path is None:
        return
    if path.suffix.lower() not in allowed:
        raise CliError(f"{option} {path}: the file name must end in {', '.join(allowed)}", USAGE_ERROR)
    if needs_dot and path.suffix.lower() not in (".dot", ".gv") and not viz.graphviz_available():
        raise CliError(f"{option} {path} needs Graphviz's `dot` program, which is not on PATH: {viz.INSTALL_HINT}; "
                       f"or give a .dot path to write the Graphviz text", FAILURE)


def _write(path: Path, what: str, write: Callable[[Path], object]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except (OSError, RuntimeError, ValueError) as err:
        raise CliError(f"writing {path} failed: {_one_line(err)}") from None
    print(f"wrote {path} ({what})")


def cmd_show(args: argparse.Namespace) -> int:
    _check_output_path(args.dot, "--dot", (".svg", ".png", ".pdf", ".dot", ".gv"), needs_dot=True)
    _check_output_path(args.plan, "--plan", (".svg",), needs_dot=False)
    fun = load_function(args.target)
    name = args.target.rpartition(":")[2]
    specs: list[fg.ShapeDtypeStruct] = args.arg
    _check_arity(fun, len(specs), name)
    if args.grad:
        if not specs:
            raise CliError("--grad differentiates with respect to the first argument: give at least one --arg",
                           USAGE_ERROR)
        fun = fg.grad(fun)
        name = f"grad({name})"
    signature = f"{name}({', '.join(_spec_text(s) for s in specs)})"
    try:
        staged = fg.make_graph(fun)(*specs)
    except Exception as err:
        raise CliError(f"tracing {signature} failed: {_one_line(err)}") from None
    print(f"== staged graph of {signature}: {len(staged.eqns)} equations")
    print(staged.pretty(source=args.source))
    lowered = None
    if args.jit or args.plan is not None:
        try:
            lowered = fg.jit(fun).lower(*specs)
        except Exception as err:
            raise CliError(f"compiling {signature} failed: {_one_line(err)}") from None
    if lowered is not None and args.jit:
        print(f"\n== optimised graph (jit): {len(lowered.graph.eqns)} equations")
        print(lowered.graph.pretty(source=args.source))
        print("\n== optimiser passes")
        print(viz.pass_report(lowered.stats))
        print("\n== memory plan")
        print(lowered.plan.summary())
    if args.dot is not None or args.plan is not None:
        print()
    if args.dot is not None:
        if lowered is not None and args.jit:
            dot, what = viz.to_dot(lowered.graph, lowered.plan, name=signature), "optimised graph with its memory plan"
        else:
            dot, what = viz.to_dot(staged, name=signature), "staged graph"
        _write(args.dot, what, lambda p: viz.render_dot(dot, p))
    if args.plan is not None and lowered is not None:
        svg = viz.memory_timeline_svg(lowered.plan, lowered.graph, title=f"memory plan of {signature}")
        _write(args.plan, "memory timeline", lambda p: p.write_text(svg, encoding="utf-8"))
    return 0


# --- demo --------------------------------------------------------------------------------
# The MLP of examples/mlp_training.py, defined here so the installed command needs no checkout.


def init_mlp(sizes: Sequence[int], seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"w": rng.standard_normal((m, n)) * np.sqrt(2.0 / m), "b": np.zeros(n)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def mlp(params: list[dict[str, Any]], x: Any) -> Any:
    for layer in params[:-1]:
        x = fg.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def mlp_loss(params: list[dict[str, Any]], x: Any, y: Any) -> Any:
    return -fg.numpy.mean(fg.numpy.sum(y * fg.nn.log_softmax(mlp(params, x)), axis=-1))


class Progress:
    """A single updating line on a terminal; a plain line every tenth of the run otherwise.
    Rates leave out the first step, which traces and compiles."""

    def __init__(self, total: int, tty: bool) -> None:
        self.total = total
        self.tty = tty
        self.width = len(str(total))
        self.t_first = 0.0
        self.last_draw = 0.0
        self.every = max(total // 10, 1)

    def rate(self, done: int, now: float) -> str:
        if done < 2 or now <= self.t_first:
            return "compiled"
        return f"{(done - 1) / (now - self.t_first):.0f} steps/s"

    def update(self, done: int, loss: float) -> None:
        now = time.perf_counter()
        if done == 1:
            self.t_first = now
        last = done == self.total
        if self.tty:
            if now - self.last_draw < 0.1 and not last and done != 1:
                return
            self.last_draw = now
            filled = round(24 * done / self.total)
            bar = "#" * filled + "-" * (24 - filled)
            line = f"[{bar}] {done:>{self.width}}/{self.total}  {self.rate(done, now):>14}  loss {loss:.4f}"
            sys.stdout.write("\r" + line + ("\n" if last else ""))
            sys.stdout.flush()
        elif done == 1 or done % self.every == 0 or last:
            print(f"step {done:>{self.width}}/{self.total}  loss {loss:.4f}  {self.rate(done, now)}", flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    x, y = spirals()
    params = init_mlp([2, 64, 64, 3])
    lr = args.lr

    def sgd_step(params: list[dict[str, Any]], x: Any, y: Any) -> tuple[Any, Any]:
        loss, grads = fg.value_and_grad(mlp_loss)(params, x, y)
        return loss, fg.tree_map(lambda p, g: p - lr * g, params, grads)

    step = fg.jit(sgd_step)
    print(f"fungraph demo: a 2-64-64-3 MLP on {len(x)} generated spiral points; each SGD step (lr {lr}) is "
          f"jit(value_and_grad(loss)) plus the update, compiled into one graph")
    progress = Progress(args.steps, sys.stdout.isatty())
    t0 = time.perf_counter()
    first = last = float("nan")
    for i in range(args.steps):
        loss, params = step(params, x, y)
        last = float(loss)
        if i == 0:
            first = last
            compile_seconds = time.perf_counter() - t0
        progress.update(i + 1, last)
    seconds = time.perf_counter() - t0
    accuracy = float(np.mean(np.argmax(fg.jit(mlp)(params, x), axis=1) == np.argmax(y, axis=1)))
    print(f"trained {args.steps} steps in {seconds:.2f} s (the first, which traces and compiles, "
          f"{compile_seconds:.2f} s): loss {first:.4f} -> {last:.4f}, training accuracy {accuracy:.1%}")

    lowered = step.lower(params, x, y)
    print(f"\n== graph: {len(lowered.staged.eqns)} equations staged, {len(lowered.graph.eqns)} after optimisation")
    print("\n== optimiser passes")
    print(viz.pass_report(lowered.stats))
    print("\n== memory plan")
    print(lowered.plan.summary())
    print()
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CliError(f"cannot create {out}: {_one_line(err)}") from None
    dot = viz.to_dot(lowered.graph, lowered.plan, name="sgd_step")
    _write(out / "graph.dot", "Graphviz text of the optimised graph", lambda p: viz.render_dot(dot, p))
    if viz.graphviz_available():
        _write(out / "graph.svg", "the optimised graph, coloured by memory block", lambda p: viz.render_dot(dot, p))
    else:
        print(f"skipped {out / 'graph.svg'}: Graphviz's `dot` is not on PATH ({viz.INSTALL_HINT})")
    svg = viz.memory_timeline_svg(lowered.plan, lowered.graph, title="memory plan of sgd_step (2-64-64-3 MLP)")
    _write(out / "memory.svg", "memory timeline", lambda p: p.write_text(svg, encoding="utf-8"))
    return 0


# --- bench -------------------------------------------------------------------------------


def benchmarks_dir() -> Path | None:
    """The benchmarks/ folder of a source checkout (None for an installed package)."""
    folder = Path(fg.__file__).resolve().parents[1] / "benchmarks"
    return folder if folder.is_dir() else None


def cmd_bench(args: argparse.Namespace) -> int:
    folder = benchmarks_dir()
    if folder is None:
        raise CliError("bench is only available from a source checkout of fungraph (no benchmarks/ folder next "
                       "to the fungraph package)")
    scripts = sorted(folder.glob("bench_*.py"))
    summary = folder / "bench_summary.py"
    if not args.names and summary.exists():
        scripts = [summary]
    elif args.names == ["all"]:
        pass
    elif args.names:
        chosen = [s for s in scripts if any(n in s.stem for n in args.names)]
        if not chosen:
            known = ", ".join(s.stem for s in scripts)
            raise CliError(f"no benchmark matches {' '.join(args.names)} (available: {known})", USAGE_ERROR)
        scripts = chosen
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder.parent), env.get("PYTHONPATH")) if p)
    failed = []
    for script in scripts:
        command = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        print(f"== {script.relative_to(folder.parent)}{' --quick' if args.quick else ''}", flush=True)
        with subprocess.Popen(command, cwd=folder.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                print(line, end="", flush=True)
        if proc.returncode != 0:
            failed.append(f"{script.name} (exit status {proc.returncode})")
        print()
    if failed:
        raise CliError(f"{len(failed)} of {len(scripts)} benchmarks failed: {', '.join(failed)}")
    return 0


# --- the parser and main -----------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not positive")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fungraph", description="Look at what fungraph makes of a function: its graph, "
                     "the optimised graph, the memory plan; run the demo or the benchmarks.")
    parser.add_argument("--version", action="version", version=f"fungraph {fg.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{show,demo,bench}", parser_class=_Parser)

    show = sub.add_parser("show", help="print the graph of MODULE:FUNCTION on abstract arguments",
                          description="Stage FUNCTION on abstract arguments and print its graph; with --jit also "
                          "the optimised graph, the pass report and the memory plan.")
    show.add_argument("target", metavar="MODULE:FUNCTION",
                      help="a dotted module importable from the current directory, or a path to a .py file")
    show.add_argument("--arg", action="append", default=[], type=parse_arg_spec, metavar="DTYPE[DIMS]",
                      help="one per positional argument: f32[256,784], i32[5], bool[4], f64[] (a scalar)")
    show.add_argument("--grad", action="store_true", help="show grad(FUNCTION) with respect to the first argument")
    show.add_argument("--jit", action="store_true",
                      help="also print the optimised graph, the optimiser passes and the memory plan")
    show.add_argument("--source", action="store_true", help="end each equation with its source line")
    show.add_argument("--dot", type=Path, metavar="PATH",
                      help="write the graph picture (.svg/.png/.pdf via Graphviz's dot, or .dot text); with --jit "
                      "the optimised graph coloured by memory block")
    show.add_argument("--plan", type=Path, metavar="PATH", help="write the memory plan as an SVG timeline")
    show.set_defaults(run=cmd_show)

    demo = sub.add_parser("demo", help="train a small MLP with jit and write pictures of its graph and memory",
                          description="Train a 2-64-64-3 MLP on generated spirals with jit(value_and_grad) and SGD, "
                          "then print the graph statistics, pass report and memory plan and write pictures.")
    demo.add_argument("--steps", type=_positive_int, default=300, help="SGD steps (default 300)")
    demo.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    demo.add_argument("--out", type=Path, default=Path("fungraph-out"),
                      help="folder for graph.dot, graph.svg and memory.svg (default ./fungraph-out)")
    demo.set_defaults(run=cmd_demo)

    bench = sub.add_parser("bench", help="run the benchmark scripts of a source checkout",
                           description="Run benchmarks/bench_*.py with this interpreter and print their output.")
    bench.add_argument("--quick", action="store_true", help="pass --quick to each script (smaller sizes)")
    bench.add_argument("names", nargs="*", metavar="NAME",
                       help="only the scripts whose name contains NAME; 'all' runs every script; by default "
                            "bench_summary.py prints one table across engines")
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failure, 2 usage)."""
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except CliError as err:
        sys.stdout.flush()
        print(f"fungraph: error: {err}", file=sys.stderr)
        return err.status
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else 0
    except KeyboardInterrupt:
        print("\nfungraph: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `fungraph show ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return FAILURE
