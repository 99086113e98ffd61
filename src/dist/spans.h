/* src/dist/spans.h — the arithmetic of gradient averaging on host memory:
 * sums of float32/float64 spans, in one pass, in a fixed order (every rank
 * computes its part of an average the same way). Vectorized (spans.c).
 * Internal to ctrial. */
#ifndef CTRIAL_DIST_SPANS_H
#define CTRIAL_DIST_SPANS_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrial/tensor.h"

/* d[i] = a[i] + x[i] over n elements of dtype dt (CT_F32 or CT_F64), times
 * k when `scale`; a == NULL stands for zeros, and a may be d. The ring's
 * reduce-scatter step (grad_sync.c). */
void cti_span_add(ct_dtype dt, void *d, const void *a, const void *x, int64_t n, bool scale, double k);

/* d[i] = (src[0][i] + src[1][i] + ... + src[m-1][i]) * k, added left to
 * right, over n elements of dtype dt (CT_F32 or CT_F64); d may be one of
 * src. The shared-memory average of one chunk (grad_sync.c). */
void cti_span_mean(ct_dtype dt, void *d, const void *const *src, int m, int64_t n, double k);

#endif
