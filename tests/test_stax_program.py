"""JAX's own example library ``jax.example_libraries.stax``, its imports changed to fungraph, run
against the original: it reaches for ``lax``'s shape helpers (``conv_general_shape_tuple``,
``padtype_to_pads``, ``reduce_window_shape_tuple``, ``conv_transpose_shape_tuple``) and
``from jax.nn.initializers import ...``."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

import fungraph as fg
from tests.helpers import jax_or_skip

jax, jnp = jax_or_skip()


def _fungraph_stax(tmp_path: Path) -> ModuleType:
    import jax.example_libraries.stax as jax_stax

    source = Path(jax_stax.__file__).read_text()
    source = re.sub(r"^from jax import (lax|random)$", r"from fungraph import \1", source, flags=re.M)
    source = re.sub(r"^import jax\.numpy as jnp$", "import fungraph.numpy as jnp", source, flags=re.M)
    source = re.sub(r"^from jax\.nn", "from fungraph.nn", source, flags=re.M)
    assert "from jax" not in source and "import jax" not in source
    path = tmp_path / "fg_stax.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("fg_stax", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("fg_stax", None)
    spec.loader.exec_module(module)
    return module


def _net(stax: ModuleType) -> tuple:
    return stax.serial(
        stax.Conv(8, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), strides=(2, 2)),
        stax.Conv(4, (3, 3), strides=(2, 2)), stax.Tanh,
        stax.ConvTranspose(3, (3, 3), strides=(2, 2), padding="SAME"),
        stax.AvgPool((2, 2), padding="SAME"), stax.Flatten, stax.Dense(10), stax.LogSoftmax)


def test_stax_network_matches_jax(tmp_path: Path) -> None:
    import jax.example_libraries.stax as jax_stax

    ours_init, ours_apply = _net(_fungraph_stax(tmp_path))
    theirs_init, theirs_apply = _net(jax_stax)
    shape = (2, 12, 12, 3)
    ours_shape, ours_params = ours_init(fg.random.PRNGKey(0), shape)
    theirs_shape, theirs_params = theirs_init(jax.random.PRNGKey(0), shape)
    assert tuple(ours_shape) == tuple(theirs_shape)
    ours_leaves, theirs_leaves = fg.tree_util.tree_leaves(ours_params), jax.tree_util.tree_leaves(theirs_params)
    assert [np.shape(p) for p in ours_leaves] == [np.shape(p) for p in theirs_leaves]
    for p, q in zip(ours_leaves, theirs_leaves):
        np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7)
    x = np.random.default_rng(0).standard_normal(shape)
    np.testing.assert_allclose(ours_apply(theirs_params, x), theirs_apply(theirs_params, x), rtol=1e-8, atol=1e-9)
    got = fg.grad(lambda p: ours_apply(p, x).sum())(theirs_params)
    want = jax.grad(lambda p: theirs_apply(p, x).sum())(theirs_params)
    for g, w in zip(fg.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9)
