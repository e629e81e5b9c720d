/* fgscatter.h: the CPU engine's scatter_add as native loops (fungraph/backends/native/scatter.py).
 * Reference: docs/native.md, "Scatter-add".
 *
 * out (outer, dim, inner) = 0, then for each outer slice o and each index k in order,
 * out[o, clamp(idx[k]), :] += upd[o, k, :], where clamp wraps a negative index once (i + dim)
 * and clamps the result to [0, dim - 1], as the scatter_add primitive does. Every element of
 * out receives its updates in index order, as numpy's np.add.at adds them, so the result has
 * np.add.at's bits. Integers add in their unsigned type (wrapping, as numpy's), bool ORs
 * (numpy's bool add), complex numbers are pairs of floats (inner doubled by the caller).
 *
 * One thread: splitting the destination rows across the pool's threads (each walking every
 * index, keeping the order) gained nothing at 8,192 x 64 and lost up to 40x at 1M scalar
 * updates on the loaded 2-core development machine, where a worker waits for a core.
 */
#ifndef FGSCATTER_H
#define FGSCATTER_H

#include <stdint.h>
#include <string.h>

static inline int64_t fg__scatter_row(int64_t i, int64_t dim) {
    i = i < 0 ? i + dim : i;
    return i < 0 ? 0 : i >= dim ? dim - 1 : i;
}

#define FG_SCATTER_LOOP(NAME, T, I, ACC)                                                           \
    void NAME(T *restrict out, const T *restrict upd, const I *restrict idx, int64_t outer, int64_t n, \
              int64_t dim, int64_t inner) {                                                       \
        memset(out, 0, (size_t)(outer * dim * inner) * sizeof(T));                                \
        if (outer * dim * inner == 0)                                                             \
            return;                                                                               \
        for (int64_t o = 0; o < outer; o++) {                                                     \
            T *restrict dst = out + o * dim * inner;                                              \
            const T *restrict src = upd + o * n * inner;                                          \
            if (inner == 1) {                                                                     \
                for (int64_t k = 0; k < n; k++)                                                   \
                    ACC(dst[fg__scatter_row((int64_t)idx[k], dim)], src[k]);                      \
                continue;                                                                         \
            }                                                                                     \
            for (int64_t k = 0; k < n; k++) {                                                     \
                T *restrict d = dst + fg__scatter_row((int64_t)idx[k], dim) * inner;              \
                const T *restrict s = src + k * inner;                                            \
                _Pragma("omp simd") for (int64_t j = 0; j < inner; j++) ACC(d[j], s[j]);          \
            }                                                                                     \
        }                                                                                         \
    }

#define FG_SCATTER_ADD(d, s) ((d) += (s))
#define FG_SCATTER_OR(d, s) ((d) |= (s))

#define FG_SCATTER_TYPE(SUFFIX, T, ACC)                                                            \
    FG_SCATTER_LOOP(fg_scatter_##SUFFIX##_i32, T, int32_t, ACC)                                   \
    FG_SCATTER_LOOP(fg_scatter_##SUFFIX##_i64, T, int64_t, ACC)

#endif
