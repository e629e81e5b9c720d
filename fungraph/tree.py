"""``fungraph.tree``: the short names of :mod:`fungraph.tree_util`, like ``jax.tree``."""

import dataclasses
from typing import Any

from fungraph.tree_util import tree_all as all  # noqa: A004 - jax.tree's name
from fungraph.tree_util import tree_broadcast as broadcast
from fungraph.tree_util import tree_flatten as flatten
from fungraph.tree_util import tree_flatten_with_path as flatten_with_path
from fungraph.tree_util import tree_leaves as leaves
from fungraph.tree_util import tree_leaves_with_path as leaves_with_path
from fungraph.tree_util import tree_map as map  # noqa: A004 - jax.tree's name
from fungraph.tree_util import tree_map_with_path as map_with_path
from fungraph.tree_util import tree_reduce as reduce
from fungraph.tree_util import tree_reduce_associative as reduce_associative
from fungraph.tree_util import tree_structure as structure
from fungraph.tree_util import tree_transpose as transpose
from fungraph.tree_util import tree_unflatten as unflatten


def static(**kwargs: Any) -> Any:
    """``dataclasses.field(**kwargs)`` marked static, so ``register_dataclass`` makes it a meta field."""
    metadata = {**(kwargs.pop("metadata", None) or {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)


__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]
