"""``fungraph.numpy``: numpy's API over traced and concrete arrays (like ``jax.numpy``).

Outside any transformation the functions run eagerly and return numpy arrays
(``fungraph.array.HostArray``: numpy's, with JAX's ``.at`` and ``.block_until_ready()``).
"""

import numpy as _np
from numpy.exceptions import ComplexWarning

from fungraph.numpy import _methods, fft, linalg
from fungraph.numpy._at import at
from fungraph.numpy._breadth import (
    apply_over_axes,
    array_repr,
    array_str,
    bitwise_count,
    einsum_path,
    frexp,
    from_dlpack,
    frombuffer,
    fromfile,
    fromfunction,
    fromiter,
    fromstring,
    get_printoptions,
    histogram2d,
    histogramdd,
    load,
    mask_indices,
    nextafter,
    packbits,
    piecewise,
    place,
    poly,
    polydiv,
    polyfit,
    printoptions,
    promote_types,
    put,
    roots,
    save,
    savez,
    set_printoptions,
    spacing,
    trim_zeros,
    unpackbits,
)
from fungraph.numpy._creation import (
    arange,
    array,
    eye,
    full,
    full_like,
    identity,
    linspace,
    ones,
    ones_like,
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
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
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
    invert,
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
from fungraph.numpy._extra import (
    asanyarray,
    ascontiguousarray,
    bincount,
    block,
    choose,
    compress,
    extract,
    fill_diagonal,
    gcd,
    histogram,
    histogram_bin_edges,
    i0,
    intersect1d,
    kaiser,
    lcm,
    left_shift,
    lexsort,
    nanmedian,
    nanpercentile,
    nanquantile,
    polyadd,
    polyder,
    polyint,
    polymul,
    polysub,
    put_along_axis,
    right_shift,
    setdiff1d,
    setxor1d,
    sort_complex,
    tril_indices_from,
    triu_indices_from,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
    unstack,
    unwrap,
)
from fungraph.numpy._index_tricks import c_, index_exp, mgrid, ogrid, r_, s_
from fungraph.numpy._indexing import take, take_along_axis
from fungraph.numpy._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from fungraph.numpy._manip import (
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
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
    pad,
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
    triu,
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
    copysign,
    deg2rad,
    degrees,
    exp2,
    fabs,
    fix,
    float_power,
    fmax,
    fmin,
    fmod,
    heaviside,
    hypot,
    imag,
    isclose,
    iscomplex,
    isneginf,
    isposinf,
    isreal,
    ldexp,
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
    signbit,
    sinc,
    trunc,
)
from fungraph.numpy._math import divmod_ as divmod
from fungraph.numpy._more import (
    bartlett,
    blackman,
    broadcast_shapes,
    can_cast,
    copy,
    diag_indices,
    diag_indices_from,
    dtype,
    empty,
    empty_like,
    finfo,
    geomspace,
    hamming,
    hanning,
    iinfo,
    indices,
    iscomplexobj,
    isdtype,
    isin,
    isrealobj,
    isscalar,
    issubdtype,
    iterable,
    ix_,
    logspace,
    matvec,
    ndarray,
    ndim,
    ravel_multi_index,
    result_type,
    shape,
    size,
    tri,
    tril_indices,
    triu_indices,
    unravel_index,
    vecmat,
)
from fungraph.numpy._reductions import all, amax, amin, any, argmax, argmin, max, mean, min, prod, std, sum, var
from fungraph.numpy._scalar_types import (
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
    float32,
    float64,
    float_,
    floating,
    generic,
    inexact,
    int32,
    int64,
    int_,
    integer,
    number,
    signedinteger,
    single,
    unsignedinteger,
)
from fungraph.numpy._scalar_types import unsupported_dtype_error as _unsupported_dtype_error
from fungraph.numpy._shape import (
    astype,
    broadcast_arrays,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ravel,
    reshape,
    squeeze,
    stack,
    swapaxes,
    transpose,
)
from fungraph.numpy._sized import apply_along_axis, argwhere, flatnonzero, nonzero, vectorize
from fungraph.numpy._stats import (
    argpartition,
    argsort,
    average,
    convolve,
    corrcoef,
    correlate,
    count_nonzero,
    cov,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    digitize,
    interp,
    median,
    nanargmax,
    nanargmin,
    nancumprod,
    nancumsum,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
    partition,
    percentile,
    polyval,
    ptp,
    quantile,
    searchsorted,
    sort,
    trapezoid,
    vander,
)
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
