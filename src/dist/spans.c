/* src/dist/spans.c — sums of float spans for gradient averaging (spans.h).
 *
 * Built at -O3 (src/CMakeLists.txt) so that GCC vectorizes these loops,
 * and on x86-64 also compiled for AVX2 and picked at load time. Each
 * element is computed exactly as the scalar expression says (no
 * reassociation: ctrial builds without -ffast-math), so every vector width
 * gives the same bits. */
#include "dist/spans.h"

#include <string.h>

#include "base/vector_clones.h"

/* Blocks small enough that the running sum stays in L1 while each source
 * is added into it. */
enum { BLOCK = 2048 };

/* add_T and mean_T for T = float and double: the same loops, written once. */
#define SPANS(T, SUFFIX)                                                                               \
    VECTOR_CLONES static void add_##SUFFIX(T *d, const T *a, const T *x, int64_t n, bool scale, T k) {   \
        if (!a && !scale) memcpy(d, x, (size_t)n * sizeof *d);                                          \
        else if (!a) for (int64_t i = 0; i < n; i++) d[i] = x[i] * k;                                   \
        else if (scale) for (int64_t i = 0; i < n; i++) d[i] = (a[i] + x[i]) * k;                       \
        else for (int64_t i = 0; i < n; i++) d[i] = a[i] + x[i];                                        \
    }                                                                                                  \
    VECTOR_CLONES static void mean_##SUFFIX(T *d, const T *const *src, int m, int64_t n, T k) {          \
        T acc[BLOCK];                                                                                  \
        for (int64_t at = 0; at < n; at += BLOCK) {                                                    \
            int64_t len = n - at < BLOCK ? n - at : BLOCK;                                             \
            const T *s0 = src[0] + at;                                                                 \
            if (m == 2) { /* the common case in one pass */                                            \
                const T *s1 = src[1] + at;                                                             \
                for (int64_t i = 0; i < len; i++) d[at + i] = (s0[i] + s1[i]) * k;                     \
                continue;                                                                              \
            }                                                                                          \
            for (int64_t i = 0; i < len; i++) acc[i] = s0[i];                                          \
            for (int j = 1; j < m; j++) {                                                              \
                const T *sj = src[j] + at;                                                             \
                for (int64_t i = 0; i < len; i++) acc[i] += sj[i];                                     \
            }                                                                                          \
            for (int64_t i = 0; i < len; i++) d[at + i] = acc[i] * k;                                  \
        }                                                                                              \
    }

SPANS(float, f32)
SPANS(double, f64)

void cti_span_add(ct_dtype dt, void *d, const void *a, const void *x, int64_t n, bool scale, double k) {
    if (dt == CT_F32) add_f32(d, a, x, n, scale, (float)k);
    else add_f64(d, a, x, n, scale, k);
}

void cti_span_mean(ct_dtype dt, void *d, const void *const *src, int m, int64_t n, double k) {
    if (dt == CT_F32) mean_f32(d, (const float *const *)src, m, n, (float)k);
    else mean_f64(d, (const double *const *)src, m, n, k);
}
