/* fungraph native engine: JAX's integer and numpy's floating-point division semantics, and bit
 * patterns as floats, for generated code (static inline: what a source does not call costs
 * nothing). */
#ifndef FG_OPS_H
#define FG_OPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fg_f32_bits(uint32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }
static inline double fg_f64_bits(uint64_t b) { double f; memcpy(&f, &b, sizeof f); return f; }

/* numpy's npy_divmod: fmod, then the quotient snapped to an integer and both adjusted so the
 * remainder takes the divisor's sign (Python's convention); b == 0 gives a / b and fmod. */
#define FG_FLOAT_DIVMOD(T, S, FMOD, FLOOR, COPYSIGN)                                  \
    static inline T fg_floordiv_##S(T a, T b) {                                        \
        if (b == 0) return a / b;                                                      \
        T mod = FMOD(a, b);                                                            \
        T div = (a - mod) / b;                                                         \
        if (mod != 0) {                                                                \
            if ((b < 0) != (mod < 0)) div -= (T)1;                                     \
        }                                                                              \
        if (div != 0) {                                                                \
            T fl = FLOOR(div);                                                         \
            if (div - fl > (T)0.5) fl += (T)1;                                         \
            return fl;                                                                 \
        }                                                                              \
        return COPYSIGN((T)0, a / b);                                                  \
    }                                                                                  \
    static inline T fg_mod_##S(T a, T b) {                                             \
        T mod = FMOD(a, b);                                                            \
        if (b == 0) return mod;                                                        \
        if (mod != 0) {                                                                \
            if ((b < 0) != (mod < 0)) mod += b;                                        \
            return mod;                                                                \
        }                                                                              \
        return COPYSIGN((T)0, b);                                                      \
    }

FG_FLOAT_DIVMOD(float, f32, fmodf, floorf, copysignf)
FG_FLOAT_DIVMOD(double, f64, fmod, floor, copysign)

/* JAX's signed integer floor division and remainder on CPU: x // 0 is XLA's truncated -1
 * floored (-2, or -1 for 0 // 0), x % 0 is 0, MIN // -1 wraps to MIN (C's own division would
 * trap on both). */
#define FG_SIGNED_DIVMOD(T, S, MIN)                                                    \
    static inline T fg_floordiv_##S(T a, T b) {                                        \
        if (b == 0) return a == 0 ? (T)-1 : (T)-2;                                     \
        if (b == -1) return a == MIN ? MIN : (T)-a;                                    \
        T q = a / b;                                                                   \
        if (((a < 0) != (b < 0)) && q * b != a) q -= 1;                                \
        return q;                                                                      \
    }                                                                                  \
    static inline T fg_mod_##S(T a, T b) {                                             \
        if (b == 0 || b == -1) return 0;                                               \
        T r = a % b;                                                                   \
        if (r != 0 && ((r < 0) != (b < 0))) r += b;                                    \
        return r;                                                                      \
    }

FG_SIGNED_DIVMOD(int8_t, i8, INT8_MIN)
FG_SIGNED_DIVMOD(int16_t, i16, INT16_MIN)
FG_SIGNED_DIVMOD(int32_t, i32, INT32_MIN)
FG_SIGNED_DIVMOD(int64_t, i64, INT64_MIN)

/* x // 0 has all bits set (XLA's), x % 0 is 0. */
#define FG_UNSIGNED_DIVMOD(T, S)                                                       \
    static inline T fg_floordiv_##S(T a, T b) { return b == 0 ? (T)~(T)0 : a / b; }    \
    static inline T fg_mod_##S(T a, T b) { return b == 0 ? 0 : a % b; }

FG_UNSIGNED_DIVMOD(uint8_t, u8)
FG_UNSIGNED_DIVMOD(uint16_t, u16)
FG_UNSIGNED_DIVMOD(uint32_t, u32)
FG_UNSIGNED_DIVMOD(uint64_t, u64)

#endif
