/* fungraph native engine: the fg_<fn>_f32 / fg_<fn>_f64 functions generated code calls that
 * fgmath.h does not provide yet, from the C library (scalar calls: a loop calling one is not
 * vectorised). */
#ifndef FG_MATH_SHIM_H
#define FG_MATH_SHIM_H

#include <math.h>

static inline float fg_acosh_f32(float x) { return acoshf(x); }
static inline double fg_acosh_f64(double x) { return acosh(x); }
static inline float fg_atanh_f32(float x) { return atanhf(x); }
static inline double fg_atanh_f64(double x) { return atanh(x); }
static inline float fg_atan2_f32(float y, float x) { return atan2f(y, x); }
static inline double fg_atan2_f64(double y, double x) { return atan2(y, x); }

#endif
