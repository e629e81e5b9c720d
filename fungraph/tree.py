"""``fungraph.tree``: the short names of :mod:`fungraph.tree_util`, like ``jax.tree``."""

from fungraph.tree_util import tree_all as all  # noqa: A004 - jax.tree's name
from fungraph.tree_util import tree_flatten as flatten
from fungraph.tree_util import tree_leaves as leaves
from fungraph.tree_util import tree_map as map  # noqa: A004 - jax.tree's name
from fungraph.tree_util import tree_reduce as reduce
from fungraph.tree_util import tree_structure as structure
from fungraph.tree_util import tree_unflatten as unflatten

__all__ = ["all", "flatten", "leaves", "map", "reduce", "structure", "unflatten"]
