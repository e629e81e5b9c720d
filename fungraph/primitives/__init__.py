"""The primitive set, one module per family; importing this package registers them all."""

from fungraph.primitives import (  # noqa: F401
    callback,
    control_flow,
    conv,
    elementwise,
    fused,
    indexing,
    linalg,
    reductions,
    scan,
    shape,
    while_loop,
)
