"""fungraph: JAX-like function transformations over an immutable, printable IR."""

from fungraph import (
    ad_checkpoint,
    checkpoint_policies,
    debug,
    distributed,
    experimental,
    lax,
    memory,
    nn,
    random,
    scipy,
    sharding,
    tree,
)
from fungraph import numpy as numpy  # noqa: PLC0414
from fungraph import primitives as _primitives  # noqa: F401  (registers the first-order primitives)
from fungraph._config import config, default_matmul_precision, disable_x64, enable_x64
from fungraph._devices import (
    Device,
    default_backend,
    device_count,
    devices,
    local_device_count,
    local_devices,
    process_count,
    process_index,
)
from fungraph.api import (
    ShapeDtypeStruct,
    block_until_ready,
    closure_convert,
    device_get,
    device_put,
    ensure_compile_time_eval,
    eval_graph,
    eval_shape,
    float0,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linear_transpose,
    linearize,
    make_graph,
    named_call,
    named_scope,
    pure_callback,
    typeof,
    value_and_grad,
    vjp,
    vmap,
)
from fungraph.array import Array
from fungraph.core import ConcretizationError, Primitive, ShapeError
from fungraph.custom_derivatives import checkpoint, custom_gradient, custom_jvp, custom_vjp, remat
from fungraph.distributed import make_mesh, pmap
from fungraph.ir import Eqn, Graph, Literal, ShapedArray, Var, verify
from fungraph.ir_text import ParseError, parse
from fungraph.jit import clear_caches, disable_jit, jit
from fungraph.primitives import collectives as _collectives  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives import control_flow as _control_flow  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives import linear_solve as _linear_solve  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives import scan as _scan  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives import while_loop as _while_loop  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives import while_tape_jvp as _while_tape_jvp  # noqa: F401  (a higher-order primitive registers on import)
from fungraph.primitives.callback import stop_gradient
from fungraph.primitives.shard_map import shard_map
from fungraph.tree_util import register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_unflatten

jacobian = jacrev  # jax.jacobian
make_jaxpr = make_graph  # jax.make_jaxpr: the staged Graph, printed in fungraph's IR text
__version__ = "0.1.0"

__all__ = [
    "Device",
    "ad_checkpoint",
    "checkpoint_policies",
    "clear_caches",
    "closure_convert",
    "config",
    "custom_gradient",
    "default_backend",
    "default_matmul_precision",
    "device_count",
    "device_get",
    "devices",
    "enable_x64",
    "disable_x64",
    "ensure_compile_time_eval",
    "float0",
    "local_device_count",
    "local_devices",
    "named_call",
    "named_scope",
    "process_count",
    "process_index",
    "distributed",
    "experimental",
    "make_mesh",
    "pmap",
    "shard_map",
    "sharding",
    "scipy",
    "typeof",
    "block_until_ready",
    "disable_jit",
    "device_put",
    "eval_shape",
    "jacobian",
    "make_jaxpr",
    "tree",
    "Array",
    "ConcretizationError",
    "Eqn",
    "Graph",
    "Literal",
    "ParseError",
    "Primitive",
    "ShapeDtypeStruct",
    "ShapeError",
    "ShapedArray",
    "Var",
    "eval_graph",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jit",
    "checkpoint",
    "custom_jvp",
    "custom_vjp",
    "debug",
    "remat",
    "jvp",
    "linear_transpose",
    "linearize",
    "value_and_grad",
    "vjp",
    "vmap",
    "lax",
    "make_graph",
    "memory",
    "nn",
    "numpy",
    "parse",
    "pure_callback",
    "memory",
    "random",
    "register_pytree_node",
    "stop_gradient",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_unflatten",
    "verify",
]
