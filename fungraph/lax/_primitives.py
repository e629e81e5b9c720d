"""JAX's ``lax.*_p`` names: fungraph's elementwise primitives under the names JAX programs
use to recognise equations (``eqn.primitive is lax.exp_p``) or bind them (``lax.add_p.bind(x, y)``).

Each is the primitive itself (``get_primitive(name)``), so ``eqn.primitive`` of a staged graph
is the same object. Their parameters are fungraph's, which differ from JAX's in two ways
(docs/differences_from_jax.md): the transcendental ones (``exp_p``, ``tanh_p``, ...) take no
``accuracy`` and ``convert_element_type_p`` takes ``new_dtype`` only (no ``weak_type``, ``sharding``).
Structural, reduction and control-flow primitives are not exported: their parameters differ more.
"""

from fungraph.core import get_primitive

#: The exported names, JAX's ``<name>_p`` for fungraph's primitive ``<name>``.
ELEMENTWISE_NAMES = (
    "abs", "acos", "acosh", "add", "and", "asin", "atan", "atan2", "atanh", "bessel_i0e", "bessel_i1e",
    "complex", "conj", "convert_element_type", "cos", "cosh", "digamma", "div", "eq", "erf", "erf_inv",
    "erfc", "exp", "expm1", "floor", "ge", "gt", "igamma", "igamma_grad_a", "igammac", "imag", "integer_pow",
    "le", "lgamma", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "not", "or",
    "polygamma", "pow", "real", "sign", "sin", "sinh", "sqrt", "sub", "tan", "tanh", "xor", "zeta",
)

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

__all__ = [
    "abs_p", "acos_p", "acosh_p", "add_p", "and_p", "asin_p", "atan_p", "atan2_p", "atanh_p", "bessel_i0e_p",
    "bessel_i1e_p", "complex_p", "conj_p", "convert_element_type_p", "cos_p", "cosh_p", "digamma_p", "div_p",
    "eq_p", "erf_p", "erf_inv_p", "erfc_p", "exp_p", "expm1_p", "floor_p", "ge_p", "gt_p", "igamma_p",
    "igamma_grad_a_p", "igammac_p", "imag_p", "integer_pow_p", "le_p", "lgamma_p", "log_p", "log1p_p",
    "logistic_p", "lt_p", "max_p", "min_p", "mul_p", "ne_p", "neg_p", "not_p", "or_p", "polygamma_p", "pow_p",
    "real_p", "sign_p", "sin_p", "sinh_p", "sqrt_p", "sub_p", "tan_p", "tanh_p", "xor_p", "zeta_p",
]
