"""Testing tools for users and for fungraph's own suite (needs ``hypothesis``).

- :func:`check_grads`: forward and reverse derivatives against finite differences, any order;
- strategies: :func:`shapes`, :func:`arrays`, :func:`programs` (random well-typed graphs);
- :data:`OP_RECORDS`: the op-record table that drives the per-primitive tests, and
  :data:`NUMPY_RECORDS` the one for the rest of ``fungraph.numpy`` (one module per family).
"""

from fungraph.testing.grads import check_grads, numerical_jvp
from fungraph.testing.numpy_records import NUMPY_RECORDS
from fungraph.testing.op_records import OP_RECORDS, OpRecord
from fungraph.testing.strategies import Program, arrays, programs, shapes

__all__ = [
    "NUMPY_RECORDS",
    "OP_RECORDS",
    "OpRecord",
    "Program",
    "arrays",
    "check_grads",
    "numerical_jvp",
    "programs",
    "shapes",
]
