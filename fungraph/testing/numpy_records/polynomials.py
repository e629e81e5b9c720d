"""Op records for ``fungraph.numpy``'s polynomials; same format and tags as
:data:`fungraph.testing.op_records.OP_RECORDS` (see :mod:`fungraph.testing.numpy_records`)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fungraph import numpy as fnp
from fungraph.testing.numpy_records._shared import _COEFFS, _VEC, _one, _poly, _rec
from fungraph.testing.op_records import FI, F, OpRecord
from fungraph.testing.strategies import shapes

POLYNOMIALS_RECORDS: tuple[OpRecord, ...] = (
    OpRecord("polyval", fnp.polyval, np.polyval, st.tuples(_one(1, 1).map(lambda s: s[0]), shapes()), F,
             tol32=1e-4),
    OpRecord("vander", lambda x: fnp.vander(x, 4), lambda x: np.vander(x, 4).astype(x.dtype), _one(1, 1), FI,
             tol32=1e-4),
    _rec("polyadd", _poly("polyadd"), _COEFFS, FI),
    _rec("polysub", _poly("polysub"), _COEFFS, FI),
    OpRecord("polymul", fnp.polymul, np.convolve, _COEFFS, F, tol32=1e-4),
    OpRecord("polyder", lambda p: fnp.polyder(p, 2), lambda p: np.polyder(p, 2).astype(p.dtype), _VEC, F),
    OpRecord("polyint", lambda p: fnp.polyint(p, 2, [1.0, -2.0]),
             lambda p: np.polyint(p, 2, [1.0, -2.0]).astype(p.dtype), _VEC, F),
)
