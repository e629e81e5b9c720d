"""Op records for ``fungraph.numpy``'s API beyond the primitives' table
(:data:`fungraph.testing.op_records.OP_RECORDS`), one module per family as numpy's reference
groups its routines; :data:`NUMPY_RECORDS` joins them.

Tags: ``no_grad`` rows are only value-tested (their derivative is defined piecewise by NaN
masks); ``grad1`` rows check first derivatives only (second order is slow or ill-conditioned).
Where fungraph follows JAX rather than numpy (weights keep their dtype in ``bincount``, float32
stays float32 in ``polyder``/``polyint``/``sort_complex``, ``polymul`` keeps leading zeros,
``fill_diagonal`` and ``put_along_axis`` return the updated array), the reference does what
fungraph promises."""

from fungraph.testing.numpy_records.elementwise import ELEMENTWISE_RECORDS
from fungraph.testing.numpy_records.indexing import INDEXING_RECORDS
from fungraph.testing.numpy_records.linalg import LINALG_RECORDS
from fungraph.testing.numpy_records.manipulation import MANIPULATION_RECORDS
from fungraph.testing.numpy_records.polynomials import POLYNOMIALS_RECORDS
from fungraph.testing.numpy_records.statistics import STATISTICS_RECORDS

NUMPY_RECORDS = (ELEMENTWISE_RECORDS + MANIPULATION_RECORDS + STATISTICS_RECORDS + INDEXING_RECORDS + LINALG_RECORDS
                 + POLYNOMIALS_RECORDS)

__all__ = ["ELEMENTWISE_RECORDS", "INDEXING_RECORDS", "LINALG_RECORDS", "MANIPULATION_RECORDS", "NUMPY_RECORDS",
           "POLYNOMIALS_RECORDS", "STATISTICS_RECORDS"]
