"""``fungraph.numpy``: numpy's API over traced and concrete arrays (like ``jax.numpy``).

Outside any transformation the functions run eagerly and return numpy arrays
(``fungraph.array.HostArray``: numpy's, with JAX's ``.at`` and ``.block_until_ready()``).
"""

import numpy as _np
from numpy.exceptions import ComplexWarning

from fungraph.numpy import _methods, fft, linalg
from fungraph.numpy._at import at
from fungraph.numpy._bits import (
    bitwise_and,
    bitwise_count,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    invert,
    left_shift,
    packbits,
    right_shift,
    unpackbits,
)
from fungraph.numpy._creation import (
    arange,
    array,
    asanyarray,
    ascontiguousarray,
    copy,
    empty,
    empty_like,
    eye,
    from_dlpack,
    frombuffer,
    fromfile,
    fromfunction,
    fromiter,
    fromstring,
    full,
    full_like,
    geomspace,
    identity,
    linspace,
    logspace,
    ones,
    ones_like,
    tri,
    zeros,
    zeros_like,
)
from fungraph.numpy._creation import asarray_ as asarray
from fungraph.numpy._elementwise import (
    abs,
    absolute,
    add,
    arctan,
    arctan2,
    clip,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    power,
    reciprocal,
    remainder,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from fungraph.numpy._floating import copysign, frexp, ldexp, nextafter, signbit, spacing
from fungraph.numpy._functional import apply_along_axis, apply_over_axes, piecewise, vectorize
from fungraph.numpy._histograms import bincount, digitize, histogram, histogram2d, histogram_bin_edges, histogramdd
from fungraph.numpy._index_tricks import c_, index_exp, mgrid, ogrid, r_, s_
from fungraph.numpy._indexing import (
    choose,
    compress,
    diag_indices,
    diag_indices_from,
    extract,
    fill_diagonal,
    indices,
    ix_,
    mask_indices,
    place,
    put,
    put_along_axis,
    ravel_multi_index,
    take,
    take_along_axis,
    tril_indices,
    tril_indices_from,
    triu_indices,
    triu_indices_from,
    unravel_index,
)
from fungraph.numpy._io import (
    array_repr,
    array_str,
    get_printoptions,
    load,
    printoptions,
    save,
    savez,
    set_printoptions,
)
from fungraph.numpy._linalg import dot, einsum, einsum_path, inner, matmul, matvec, outer, tensordot, vdot, vecmat
from fungraph.numpy._manip import (
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block,
    column_stack,
    cross,
    delete,
    diag,
    diagflat,
    diagonal,
    diff,
    dsplit,
    dstack,
    ediff1d,
    flip,
    fliplr,
    flipud,
    gradient,
    hsplit,
    hstack,
    insert,
    kron,
    meshgrid,
    repeat,
    resize,
    roll,
    rollaxis,
    rot90,
    row_stack,
    select,
    split,
    tile,
    trace,
    tril,
    trim_zeros,
    triu,
    unstack,
    vsplit,
    vstack,
)
from fungraph.numpy._math import (
    acos,
    acosh,
    allclose,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctanh,
    around,
    array_equal,
    array_equiv,
    asin,
    asinh,
    atanh,
    cbrt,
    ceil,
    conj,
    conjugate,
    deg2rad,
    degrees,
    exp2,
    fabs,
    fix,
    float_power,
    fmax,
    fmin,
    fmod,
    gcd,
    heaviside,
    hypot,
    i0,
    imag,
    interp,
    isclose,
    iscomplex,
    isneginf,
    isposinf,
    isreal,
    lcm,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    modf,
    nan_to_num,
    positive,
    rad2deg,
    radians,
    real,
    rint,
    round,
    round_,
    sinc,
    trapezoid,
    trunc,
    unwrap,
)
from fungraph.numpy._math import divmod_ as divmod
from fungraph.numpy._padding import pad
from fungraph.numpy._polynomials import (
    poly,
    polyadd,
    polyder,
    polydiv,
    polyfit,
    polyint,
    polymul,
    polysub,
    polyval,
    roots,
    vander,
)
from fungraph.numpy._reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    nancumprod,
    nancumsum,
    prod,
    std,
    sum,
    var,
)
from fungraph.numpy._scalar_types import (
    bfloat16,
    bool_,
    cdouble,
    character,
    complex64,
    complex128,
    complex_,
    complexfloating,
    csingle,
    double,
    flexible,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    float_,
    floating,
    generic,
    half,
    inexact,
    int8,
    int16,
    int32,
    int64,
    int_,
    integer,
    number,
    signedinteger,
    single,
    uint,
    uint8,
    uint16,
    uint32,
    uint64,
    unsignedinteger,
)
from fungraph.numpy._scalar_types import unsupported_dtype_error as _unsupported_dtype_error
from fungraph.numpy._sets import (
    intersect1d,
    isin,
    setdiff1d,
    setxor1d,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from fungraph.numpy._shape import (
    astype,
    broadcast_arrays,
    broadcast_shapes,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ndarray,
    ndim,
    ravel,
    reshape,
    shape,
    size,
    squeeze,
    stack,
    swapaxes,
    transpose,
)
from fungraph.numpy._sorting import (
    argpartition,
    argsort,
    argwhere,
    flatnonzero,
    lexsort,
    nonzero,
    partition,
    searchsorted,
    sort,
    sort_complex,
)
from fungraph.numpy._stats import (
    average,
    convolve,
    corrcoef,
    correlate,
    count_nonzero,
    cov,
    median,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmedian,
    nanmin,
    nanpercentile,
    nanprod,
    nanquantile,
    nanstd,
    nansum,
    nanvar,
    percentile,
    ptp,
    quantile,
)
from fungraph.numpy._types import (
    can_cast,
    dtype,
    finfo,
    iinfo,
    iscomplexobj,
    isdtype,
    isrealobj,
    isscalar,
    issubdtype,
    iterable,
    promote_types,
    result_type,
)
from fungraph.numpy._windows import bartlett, blackman, hamming, hanning, kaiser
from fungraph.numpy.linalg import matrix_transpose, vecdot

atan = arctan
atan2 = arctan2
bitwise_invert = bitwise_not
bitwise_left_shift = left_shift
bitwise_right_shift = right_shift
concat = concatenate
permute_dims = transpose
pow = power  # noqa: A001
bool = bool_  # noqa: A001

_methods.install()

from fungraph.numpy._ufunc import frompyfunc, ufunc  # noqa: E402
from fungraph.numpy._ufunc import install as _install_ufuncs  # noqa: E402

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None
euler_gamma = 0.5772156649015329
PINF = inf
NINF = -inf

__all__ = [name for name in dir() if not name.startswith("_")]


def _host_results(namespace: dict) -> None:
    """Wrap each public function so that a numpy array it returns (the creation functions'
    ``np.zeros`` and the like, alone or in a tuple) comes back as a :class:`HostArray`, as
    primitives' results do: every eager result has ``.at`` and ``.block_until_ready()``."""
    import functools
    import types

    from fungraph import dtypes
    from fungraph.array import hosted_copy_if_shared

    wrapped: dict[int, object] = {}
    for name in __all__:
        f = namespace[name]
        if not isinstance(f, types.FunctionType) or not f.__module__.startswith("fungraph.numpy"):
            continue
        if id(f) not in wrapped:
            def call(*args: object, __f: types.FunctionType = f, **kwargs: object) -> object:
                out = __f(*args, **kwargs)
                inputs = _array_arguments(args, kwargs)
                if type(out) is tuple or type(out) is list:
                    return type(out)(hosted_copy_if_shared(o, inputs) for o in out)
                return hosted_copy_if_shared(out, inputs)

            wrapped[id(f)] = functools.wraps(f)(call)
        namespace[name] = wrapped[id(f)]
    dtypes.TRANSPARENT_CODE.add(call.__code__)


def _array_arguments(args: tuple, kwargs: dict) -> list[object]:
    """The numpy arrays among a call's arguments (one level into lists and tuples): what a
    result must not share writeable memory with."""
    found: list[object] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            found.extend(e for e in a if isinstance(e, _np.ndarray))
        elif isinstance(a, _np.ndarray):
            found.append(a)
    return found


_host_results(globals())


_install_ufuncs(globals())


def __getattr__(name: str) -> object:
    """``fungraph.numpy.int8`` and the other ``jax.numpy`` dtypes fungraph lacks raise an
    AttributeError that says so and lists the supported dtypes."""
    err = _unsupported_dtype_error(name)
    if err is not None:
        raise err
    raise AttributeError(f"module 'fungraph.numpy' has no attribute {name!r}")
