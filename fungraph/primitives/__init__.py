"""The primitive set, one module per family; importing this package registers them all."""

from fungraph.primitives import (  # noqa: F401
    barrier,
    callback,
    collectives,
    control_flow,
    conv,
    cumulative,
    elementwise,
    fft,
    fused,
    indexing,
    linalg,
    linalg_ops,
    linear_solve,
    reductions,
    scan,
    shape,
    sorting,
    special,
    while_loop,
    while_tape_jvp,
)
