"""Input and output of ``fungraph.numpy``: numpy's eager helpers for files and printing
(``load`` brings an array to a supported dtype)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fungraph.numpy._creation import _canonical_result


def array_repr(arr: Any, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a: Any, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``numpy.load``, with an array result brought to a supported dtype (an ``.npz`` archive
    comes back as numpy's lazy mapping)."""
    return _canonical_result(np.load(file, *args, **kwargs))


save = np.save
savez = np.savez
printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
