"""Interpreters over the IR: each a plain function (or a trace) over a Graph."""
