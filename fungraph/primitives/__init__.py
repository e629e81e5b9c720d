"""The primitive set, one module per family.

Importing this package registers the first-order primitives. The higher-order ones (``cond``
in control_flow, scan, while_loop, the collectives, and the linear solves of linear_solve)
hold sub-graphs and run them through the transformations, so they sit in a layer above those
(docs/architecture.md) and register when imported: ``import fungraph`` imports them all.
"""

from fungraph.primitives import (  # noqa: F401
    barrier,
    callback,
    conv,
    cumulative,
    elementwise,
    fft,
    fused,
    indexing,
    linalg,
    linalg_ops,
    reductions,
    shape,
    sorting,
    special,
)
