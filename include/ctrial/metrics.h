/*
 * ctrial/metrics.h — reducers: how per-batch metric values become one
 * reported value, on one rank and across ranks.
 *
 * Built-in reducers reduce over the batches of a workload (AVG, SUM, MAX,
 * MIN; arrays element-wise), exactly as Determined's Reducer enum does. A
 * custom reducer sees every value and decides itself, like Determined's
 * MetricReducer:
 *
 *     // a function reducer: collect (correct, total) pairs, report accuracy
 *     static ct_value *accuracy(ct_value *const *values, size_t n, void *ctx) {
 *         double correct = 0, total = 0;
 *         for (size_t i = 0; i < n; i++) { ... }
 *         return ct_value_float(correct / total);
 *     }
 *     ct_reducer *r = ct_ctx_wrap_reducer(ctx, "accuracy", accuracy, NULL);
 *     ...
 *     // in evaluate_batch:
 *     ct_reducer_update(r, ct_value_float(correct_in_batch)); // steals
 *
 * Values passed to a reducer are ct_value trees (numbers, tensors, lists of
 * them); the cross-rank step interleaves the ranks' values round-robin to
 * rebuild the original batch order before the function runs.
 */
#ifndef CTRIAL_METRICS_H
#define CTRIAL_METRICS_H

#include <stddef.h>

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How evaluation metrics reduce over batches (and ranks). */
typedef enum {
    CT_REDUCER_AVG = 0, /* unweighted mean over batches (the default) */
    CT_REDUCER_SUM,
    CT_REDUCER_MAX,
    CT_REDUCER_MIN,
    CT_REDUCER_MAX_ENUM_ = 0x7fffffff
} ct_reducer_kind;

CT_API const char *ct_reducer_kind_name(ct_reducer_kind k); /* "avg", "sum", ... */

/* A function reducer: all values collected (in batch order, across ranks)
 * in, the reduced metric out (a NEW value: a number, a tensor, or, for an
 * unnamed reducer, a dict of named metrics). NULL + ct_set_error on failure. */
typedef ct_value *(*ct_reduce_fn)(ct_value *const *values, size_t n, void *ctx);

typedef struct ct_reducer ct_reducer;

/* Adds a value for the current workload (steals v). */
CT_API int ct_reducer_update(ct_reducer *r, ct_value *v);

#ifdef __cplusplus
}
#endif
#endif
