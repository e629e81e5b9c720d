"""JAX's ``lax.*_p`` names: fungraph's elementwise primitives under the names JAX programs
use to recognise equations (``eqn.primitive is lax.exp_p``) or bind them (``lax.add_p.bind(x, y)``).

Each is the primitive itself (``get_primitive(name)``), so ``eqn.primitive`` of a staged graph
is the same object. Their parameters are fungraph's, which differ from JAX's in two ways
(docs/differences_from_jax.md): the transcendental ones (``exp_p``, ``tanh_p``, ...) take no
``accuracy`` and ``convert_element_type_p`` takes ``new_dtype`` only (no ``weak_type``, ``sharding``).
The structural, reduction and control-flow primitives below are exported too, for programs that
recognise equations; :data:`PARAM_DIFFERENCES` says how each one's parameters differ from JAX's, and
:data:`FUNGRAPH_NAMES` which of them fungraph names otherwise (``gather_p`` is fungraph's ``take``).
"""

from fungraph.core import get_primitive
from fungraph.primitives.control_flow import cond_p as cond_p  # noqa: PLC0414
from fungraph.primitives.linear_solve import linear_solve_p as linear_solve_p  # noqa: PLC0414
from fungraph.primitives.scan import scan_p as scan_p  # noqa: PLC0414
from fungraph.primitives.while_loop import while_p as while_p  # noqa: PLC0414

#: The exported names, JAX's ``<name>_p`` for fungraph's primitive ``<name>``.
ELEMENTWISE_NAMES = (
    "abs", "acos", "acosh", "add", "and", "asin", "atan", "atan2", "atanh", "bessel_i0e", "bessel_i1e",
    "complex", "conj", "convert_element_type", "cos", "cosh", "digamma", "div", "eq", "erf", "erf_inv",
    "erfc", "exp", "expm1", "floor", "ge", "gt", "igamma", "igamma_grad_a", "igammac", "imag", "integer_pow",
    "le", "lgamma", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "not", "or",
    "polygamma", "pow", "real", "sign", "sin", "sinh", "sqrt", "sub", "tan", "tanh", "xor", "zeta",
)

#: Exported primitives that are not elementwise, each with how its parameters differ from JAX's.
PARAM_DIFFERENCES = {
    "argmax": "`axis` (an int) and `index_dtype`, where JAX has `axes` (a 1-tuple)",
    "argmin": "`axis` (an int) and `index_dtype`, where JAX has `axes` (a 1-tuple)",
    "broadcast_in_dim": "no `sharding`",
    "concatenate": "`axis`, where JAX has `dimension`",
    "cond": "fungraph's sub-graphs and parameters, not JAX's `branches` of closed jaxprs",
    "cumsum": "as JAX's (`axis`, `reverse`)",
    "dot_general": "`dimension_numbers` only (no `precision`, `preferred_element_type`, `out_sharding`)",
    "dynamic_update_slice": "`mode` (`'clamp'`), which JAX's lacks",
    "pad": "as JAX's (`padding_config`)",
    "reduce_max": "as JAX's (`axes`)",
    "reduce_min": "as JAX's (`axes`)",
    "reduce_prod": "as JAX's (`axes`)",
    "reduce_sum": "`axes` only (no `out_sharding`)",
    "reshape": "`new_sizes` only (no `dimensions`, `sharding`)",
    "rev": "as JAX's (`dimensions`)",
    "scan": "fungraph's sub-graph and parameters, not JAX's `jaxpr`, `num_consts`, `num_carry`, ...",
    "slice": "`strides` always a tuple (JAX's may be None)",
    "sort": "one operand and `axis`, where JAX has `dimension`, `is_stable` and `num_keys` over several operands",
    "stop_gradient": "as JAX's (none)",
    "transpose": "as JAX's (`permutation`)",
    "while": "fungraph's sub-graphs and parameters, not JAX's `cond_jaxpr`, `body_jaxpr`, ...",
    # JAX's names for fungraph primitives under another name of their own
    "bitcast_convert_type": "as JAX's (`new_dtype`)",
    "conv_general_dilated": "fungraph's `conv`: a 2-d NCHW/OIHW convolution with `window_strides`, `padding` (pairs), "
                            "`lhs_dilation`, `rhs_dilation`; no `dimension_numbers`, `feature_group_count`, "
                            "`batch_group_count`, `precision`, `preferred_element_type` (lax.conv_general_dilated "
                            "transposes and groups around it)",
    "fft": "`fft_type` a string (`'FFT'`, `'IFFT'`, `'RFFT'`, `'IRFFT'`) and `fft_lengths`",
    "gather": "fungraph's `take`: operands (operand, indices) and `axis`, an integer-array index along one axis "
              "(numpy's `take`), where JAX has `dimension_numbers`, `slice_sizes`, `mode`, ...",
    "linear_solve": "fungraph's `custom_linear_solve`: sub-graphs `matvec`, `solve`, `transpose_solve` and `counts`, "
                    "not JAX's `const_lengths` and `jaxprs`",
    "optimization_barrier": "as JAX's (several operands, several results)",
    "scatter_add": "operands (updates, indices) and `axis`, `shape`: the transpose of `take` into zeros of `shape`, "
                   "where JAX's has (operand, indices, updates) and `dimension_numbers`, `mode`, ...",
    "select_n": "fungraph's `select`: operands (pred, on_true, on_false), where JAX's `select_n` has (which, *cases) "
                "with `cases[0]` taken where `which` is false",
}

#: fungraph's name for each exported primitive whose JAX name differs.
FUNGRAPH_NAMES = {"conv_general_dilated": "conv", "gather": "take", "linear_solve": "custom_linear_solve",
                  "select_n": "select"}

abs_p = get_primitive("abs")
acos_p = get_primitive("acos")
acosh_p = get_primitive("acosh")
add_p = get_primitive("add")
and_p = get_primitive("and")
asin_p = get_primitive("asin")
atan_p = get_primitive("atan")
atan2_p = get_primitive("atan2")
atanh_p = get_primitive("atanh")
bessel_i0e_p = get_primitive("bessel_i0e")
bessel_i1e_p = get_primitive("bessel_i1e")
complex_p = get_primitive("complex")
conj_p = get_primitive("conj")
convert_element_type_p = get_primitive("convert_element_type")
cos_p = get_primitive("cos")
cosh_p = get_primitive("cosh")
digamma_p = get_primitive("digamma")
div_p = get_primitive("div")
eq_p = get_primitive("eq")
erf_p = get_primitive("erf")
erf_inv_p = get_primitive("erf_inv")
erfc_p = get_primitive("erfc")
exp_p = get_primitive("exp")
expm1_p = get_primitive("expm1")
floor_p = get_primitive("floor")
ge_p = get_primitive("ge")
gt_p = get_primitive("gt")
igamma_p = get_primitive("igamma")
igamma_grad_a_p = get_primitive("igamma_grad_a")
igammac_p = get_primitive("igammac")
imag_p = get_primitive("imag")
integer_pow_p = get_primitive("integer_pow")
le_p = get_primitive("le")
lgamma_p = get_primitive("lgamma")
log_p = get_primitive("log")
log1p_p = get_primitive("log1p")
logistic_p = get_primitive("logistic")
lt_p = get_primitive("lt")
max_p = get_primitive("max")
min_p = get_primitive("min")
mul_p = get_primitive("mul")
ne_p = get_primitive("ne")
neg_p = get_primitive("neg")
not_p = get_primitive("not")
or_p = get_primitive("or")
polygamma_p = get_primitive("polygamma")
pow_p = get_primitive("pow")
real_p = get_primitive("real")
sign_p = get_primitive("sign")
sin_p = get_primitive("sin")
sinh_p = get_primitive("sinh")
sqrt_p = get_primitive("sqrt")
sub_p = get_primitive("sub")
tan_p = get_primitive("tan")
tanh_p = get_primitive("tanh")
xor_p = get_primitive("xor")
zeta_p = get_primitive("zeta")
argmax_p = get_primitive("argmax")
argmin_p = get_primitive("argmin")
broadcast_in_dim_p = get_primitive("broadcast_in_dim")
concatenate_p = get_primitive("concatenate")
cumsum_p = get_primitive("cumsum")
dot_general_p = get_primitive("dot_general")
dynamic_update_slice_p = get_primitive("dynamic_update_slice")
pad_p = get_primitive("pad")
reduce_max_p = get_primitive("reduce_max")
reduce_min_p = get_primitive("reduce_min")
reduce_prod_p = get_primitive("reduce_prod")
reduce_sum_p = get_primitive("reduce_sum")
reshape_p = get_primitive("reshape")
rev_p = get_primitive("rev")
slice_p = get_primitive("slice")
sort_p = get_primitive("sort")
stop_gradient_p = get_primitive("stop_gradient")
transpose_p = get_primitive("transpose")
bitcast_convert_type_p = get_primitive("bitcast_convert_type")
conv_general_dilated_p = get_primitive("conv")
fft_p = get_primitive("fft")
gather_p = get_primitive("take")
optimization_barrier_p = get_primitive("optimization_barrier")
scatter_add_p = get_primitive("scatter_add")
select_n_p = get_primitive("select")

__all__ = [f"{n}_p" for n in (*ELEMENTWISE_NAMES, *PARAM_DIFFERENCES)]
