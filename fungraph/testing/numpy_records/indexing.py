"""Op records for ``fungraph.numpy``'s indexing routines (selections, functional updates, index
arithmetic) and set routines; same format and tags as
:data:`fungraph.testing.op_records.OP_RECORDS` (see :mod:`fungraph.testing.numpy_records`)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fungraph import numpy as fnp
from fungraph.testing.numpy_records._shared import (
    _VEC2,
    _choose,
    _compress_sized,
    _every_other,
    _extract_sized,
    _fill_diagonal,
    _one,
    _put_along,
    _rec,
    _same,
    _set_op,
    _union,
    _unique,
    _unique_parts,
)
from fungraph.testing.op_records import FI, INTS, F, OpRecord

INDEXING_RECORDS: tuple[OpRecord, ...] = (
    OpRecord("isin", lambda x: fnp.isin(fnp.round(x), [0.0, 2.0]), lambda x: np.isin(np.round(x), [0.0, 2.0]),
             _one(), F, differentiable=False),
    _rec("ravel_multi_index", lambda i, j, xp: xp.ravel_multi_index((i % 3, j % 4), (3, 4)), _same(2), INTS,
         differentiable=False),
    _rec("unravel_index", lambda i, xp: xp.stack(xp.unravel_index(i % 12, (3, 4))), _one(), INTS,
         differentiable=False),
    _rec("compress", _every_other, _one(1), FI),
    _rec("compress_sized", _compress_sized, _one(), F),
    _rec("extract_sized", _extract_sized, _one(), F),
    _rec("choose", _choose, _one(), F),
    _rec("fill_diagonal", _fill_diagonal, st.tuples(st.tuples(st.integers(1, 7), st.integers(1, 4))), FI),
    _rec("put_along_axis", _put_along, _one(1), F),
    _rec("unique_sized", _unique, _one(min_dims=1), FI),
    _rec("unique_index_inverse_counts", _unique_parts, _one(min_dims=1), F, differentiable=False),
    _rec("union1d_sized", _union, _VEC2, F),
    _rec("intersect1d_sized", _set_op("intersect1d"), _VEC2, F, differentiable=False),
    _rec("setdiff1d_sized", _set_op("setdiff1d"), _VEC2, F, differentiable=False),
    _rec("setxor1d_sized", _set_op("setxor1d"), _VEC2, F, differentiable=False),
)
