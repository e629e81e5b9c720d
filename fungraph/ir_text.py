"""The IR's text form: ``str(graph)`` prints it (the printer is in ``ir``) and :func:`parse` reads it back.

    { lambda a:f32[3,4] b:f32[4] ; let
        c:f32[3,4] = add a b
        d:f32[3,4] = mul c 2.0:f32[]
      in (d,) }

Constants follow the inputs as ``const k:f32[2] = [1.0, 2.0]``; nested graphs appear as
parameter values. See docs/ir.md for the grammar.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fungraph import dtypes
from fungraph.core import get_primitive
from fungraph.ir import Atom, Eqn, Graph, Literal, Params, ShapedArray, Var

# --- parsing ---------------------------------------------------------------------------

_REAL = r"(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+|inf|nan)"
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<cnum>-?""" + _REAL + "[-+]" + _REAL + r"""j)
    | (?P<num>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+|inf\b|nan\b))
    | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<angle><[^<>]*>)
    | (?P<comment>\#[^\n]*)
    | (?P<punct>[{}()\[\],=;:])
    )""",
    re.VERBOSE,
)


class ParseError(ValueError):
    """The text is not a valid graph; the message gives the position and what was expected."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise ParseError(f"unexpected character {text[pos]!r} at offset {pos}")
            kind = m.lastgroup
            assert kind is not None
            if kind != "comment":
                self.toks.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            raise ParseError("unexpected end of text")
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        kind, tok, pos = self.next()
        if tok != value:
            raise ParseError(f"expected {value!r} at offset {pos}, found {tok!r}")

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] == value

    def aval(self) -> ShapedArray:
        _, dt, pos = self.next()
        if dt not in dtypes.FROM_SHORT:
            raise ParseError(f"unknown dtype {dt!r} at offset {pos}")
        self.expect("[")
        shape: list[int] = []
        while not self.at("]"):
            shape.append(int(self.next()[1]))
            if self.at(","):
                self.next()
        self.expect("]")
        return ShapedArray(tuple(shape), dtypes.FROM_SHORT[dt])

    def binder(self, scope: dict[str, Var]) -> Var:
        _, name, pos = self.next()
        self.expect(":")
        v = Var(self.aval())
        if name in scope:
            raise ParseError(f"var {name!r} defined twice (offset {pos})")
        scope[name] = v
        return v

    def scalar(self, tok: str) -> bool | int | float | complex:
        if tok.endswith("j"):
            return complex(tok)
        if tok in ("True", "False"):
            return tok == "True"
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        return float(tok)

    def atom(self, scope: dict[str, Var]) -> Atom:
        kind, tok, pos = self.next()
        if kind in ("num", "cnum") or tok in ("True", "False"):
            self.expect(":")
            aval = self.aval()
            value = self.scalar(tok)
            if dtypes.is_complex(aval.dtype):
                value = complex(value)
            elif dtypes.is_float(aval.dtype):
                value = float(value)
            return Literal(value, aval)
        if tok not in scope:
            raise ParseError(f"undefined var {tok!r} at offset {pos}")
        return scope[tok]

    def array(self, aval: ShapedArray) -> np.ndarray:
        def rec() -> Any:
            if self.at("["):
                self.next()
                items = []
                while not self.at("]"):
                    items.append(rec())
                    if self.at(","):
                        self.next()
                self.next()
                return items
            return self.scalar(self.next()[1])

        return np.array(rec(), dtype=aval.dtype).reshape(aval.shape)

    def value(self) -> Any:
        kind, tok, pos = self.peek() or ("", "", 0)
        if tok == "{":
            return self.graph()
        self.next()
        if kind == "num":
            return self.scalar(tok)
        if kind == "str":
            return eval(tok, {"__builtins__": {}})  # a Python string literal, nothing else
        if tok in ("True", "False", "None"):
            return None if tok == "None" else tok == "True"
        if tok == "(":
            items = []
            while not self.at(")"):
                items.append(self.value())
                if self.at(","):
                    self.next()
            self.next()
            return tuple(items)
        if kind == "name" and tok in dtypes.FROM_SHORT and self.at("["):
            self.i -= 1
            return self.aval()
        if kind == "name":
            try:
                return np.dtype(tok)
            except TypeError:
                pass
        if kind == "angle":
            raise ParseError(f"parameter value {tok} at offset {pos} is an opaque Python object and cannot be parsed")
        raise ParseError(f"unexpected {tok!r} at offset {pos} in a parameter value")

    def graph(self) -> Graph:
        scope: dict[str, Var] = {}
        self.expect("{")
        self.expect("lambda")
        invars = []
        while not self.at(";"):
            invars.append(self.binder(scope))
        self.next()
        constvars, consts = [], []
        while self.at("const"):
            self.next()
            v = self.binder(scope)
            self.expect("=")
            constvars.append(v)
            consts.append(self.array(v.aval))
            self.expect(";")
        self.expect("let")
        eqns = []
        while not self.at("in"):
            outs_scope: dict[str, Var] = {}
            outs = []
            while not self.at("="):
                outs.append(self.binder(outs_scope))
            self.next()
            _, pname, pos = self.next()
            try:
                prim = get_primitive(pname)
            except KeyError as err:
                raise ParseError(f"{err.args[0]} at offset {pos}") from None
            params: dict[str, Any] = {}
            if self.at("["):
                self.next()
                while not self.at("]"):
                    key = self.next()[1]
                    self.expect("=")
                    params[key] = self.value()
                    if self.at(","):
                        self.next()
                self.next()
            inputs = []
            while not self._at_line_end():
                inputs.append(self.atom(scope))
            for k, v in outs_scope.items():
                if k in scope:
                    raise ParseError(f"var {k!r} defined twice")
                scope[k] = v
            eqns.append(Eqn(prim, tuple(inputs), tuple(outs), Params(params)))
        self.expect("in")
        self.expect("(")
        outvars = []
        while not self.at(")"):
            outvars.append(self.atom(scope))
            if self.at(","):
                self.next()
        self.next()
        self.expect("}")
        return Graph(tuple(invars), tuple(constvars), tuple(consts), tuple(eqns), tuple(outvars))

    def _at_line_end(self) -> bool:
        """An equation's inputs end where the next ``name:type`` binder (or ``in``) starts."""
        tok = self.peek()
        if tok is None or tok[1] == "in":
            return True
        nxt = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
        return tok[0] == "name" and tok[1] not in ("True", "False") and nxt is not None and nxt[1] == ":"


def parse(text: str) -> Graph:
    """Read a graph from its text form (the inverse of ``str(graph)``)."""
    p = _Parser(text)
    g = p.graph()
    if p.peek() is not None:
        raise ParseError(f"trailing text at offset {p.peek()[2]}")  # type: ignore[index]
    return g
