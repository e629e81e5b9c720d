/* fungraph native engine: the fg_<fn>_f32 / fg_<fn>_f64 functions that generated code calls,
 * mapped to the C library until fgmath.h (vectorisable polynomial versions with tested ulp
 * bounds) provides them. A function fgmath.h defines is taken from there: each one here is
 * guarded by the FG_HAVE_<FN> macro that fgmath.h defines beside its own. */
#ifndef FG_MATH_SHIM_H
#define FG_MATH_SHIM_H

#include <math.h>

#define FG_LIBM_UNARY(name, f32, f64) \
    static inline float fg_##name##_f32(float x) { return f32(x); } \
    static inline double fg_##name##_f64(double x) { return f64(x); }

#ifndef FG_HAVE_EXP
FG_LIBM_UNARY(exp, expf, exp)
#endif
#ifndef FG_HAVE_EXPM1
FG_LIBM_UNARY(expm1, expm1f, expm1)
#endif
#ifndef FG_HAVE_LOG
FG_LIBM_UNARY(log, logf, log)
#endif
#ifndef FG_HAVE_LOG1P
FG_LIBM_UNARY(log1p, log1pf, log1p)
#endif
#ifndef FG_HAVE_SIN
FG_LIBM_UNARY(sin, sinf, sin)
#endif
#ifndef FG_HAVE_COS
FG_LIBM_UNARY(cos, cosf, cos)
#endif
#ifndef FG_HAVE_TAN
FG_LIBM_UNARY(tan, tanf, tan)
#endif
#ifndef FG_HAVE_TANH
FG_LIBM_UNARY(tanh, tanhf, tanh)
#endif
#ifndef FG_HAVE_SINH
FG_LIBM_UNARY(sinh, sinhf, sinh)
#endif
#ifndef FG_HAVE_COSH
FG_LIBM_UNARY(cosh, coshf, cosh)
#endif
#ifndef FG_HAVE_ATAN
FG_LIBM_UNARY(atan, atanf, atan)
#endif
#ifndef FG_HAVE_ASIN
FG_LIBM_UNARY(asin, asinf, asin)
#endif
#ifndef FG_HAVE_ACOS
FG_LIBM_UNARY(acos, acosf, acos)
#endif
#ifndef FG_HAVE_ACOSH
FG_LIBM_UNARY(acosh, acoshf, acosh)
#endif
#ifndef FG_HAVE_ATANH
FG_LIBM_UNARY(atanh, atanhf, atanh)
#endif

#ifndef FG_HAVE_ERF
/* fungraph's erf is Python's math.erf (the C library's double erf) rounded to the dtype */
static inline float fg_erf_f32(float x) { return (float)erf((double)x); }
static inline double fg_erf_f64(double x) { return erf(x); }
#endif

#ifndef FG_HAVE_LOGISTIC
/* the CPU engine's formula: e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e) */
static inline float fg_logistic_f32(float x) {
    float e = fg_exp_f32(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
static inline double fg_logistic_f64(double x) {
    double e = fg_exp_f64(-fabs(x));
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
#endif

#ifndef FG_HAVE_POW
static inline float fg_pow_f32(float x, float y) { return powf(x, y); }
static inline double fg_pow_f64(double x, double y) { return pow(x, y); }
#endif
#ifndef FG_HAVE_ATAN2
static inline float fg_atan2_f32(float y, float x) { return atan2f(y, x); }
static inline double fg_atan2_f64(double y, double x) { return atan2(y, x); }
#endif

#endif
