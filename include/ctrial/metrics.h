/*
 * ctrial/metrics.h — reducers: how per-batch metric values become one
 * reported value, on one rank and across ranks.
 *
 * Built-in reducers reduce over the batches of a workload (AVG, SUM, MAX,
 * MIN; arrays element-wise), exactly as Determined's Reducer enum does.
 * Custom reducers compute a metric themselves, and come in Determined's two
 * forms (both wrapped with the ct_ctx_* functions of trial.h):
 *
 *     // a function reducer (wrap_reducer(fn, name)): every value fed in the
 *     // workload, from every rank, goes to one function on rank 0
 *     static ct_value *accuracy(ct_value *const *values, size_t n, void *ctx) {
 *         double correct = 0, total = 0;
 *         for (size_t i = 0; i < n; i++) { ... }
 *         return ct_value_float(correct / total);
 *     }
 *     ct_reducer *r = ct_ctx_wrap_reducer(ctx, "accuracy", accuracy, NULL);
 *     // in evaluate_batch:
 *     ct_reducer_update(r, pair_of_correct_and_total); // steals
 *
 *     // a class reducer (a MetricReducer subclass): the trial keeps its own
 *     // state in `self`, each rank reduces it to a partial result, and rank
 *     // 0 combines the ranks' partials
 *     static const ct_metric_reducer_ops acc_ops = {acc_reset, acc_per_slot, acc_cross_slot, free};
 *     Acc *a = calloc(1, sizeof *a);
 *     ct_ctx_wrap_metric_reducer(ctx, "accuracy", &acc_ops, a, false, true); // validation only
 *     // in evaluate_batch: a->correct += ...; a->total += ...;
 *
 * Values are ct_value trees (numbers, tensors, lists of them). What crosses
 * ranks travels losslessly (tensors arrive on the CPU). The function form
 * interleaves the ranks' values round-robin to rebuild the original batch
 * order before the function runs.
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
 * unnamed reducer, a dict of named metrics; a named reducer's result must
 * not be a dict). The values are borrowed. NULL + ct_set_error on failure. */
typedef ct_value *(*ct_reduce_fn)(ct_value *const *values, size_t n, void *ctx);

/* A class reducer: Determined's MetricReducer. The trial keeps the state in
 * `self` and updates it itself (from train_batch or evaluate_batch). At the
 * end of each workload the reducer is wrapped for, every rank calls
 * per_slot_reduce, the results meet on rank 0 and cross_slot_reduce makes
 * the metric there; every rank reports rank 0's result. */
typedef struct {
    /* Forgets the state: at the start of every training workload and of
     * every validation (every wrapped reducer, whatever it is for). */
    void (*reset)(void *self);
    /* This rank's partial result: a NEW value (any tree: numbers, tensors,
     * lists, dicts), or NULL + ct_set_error on failure. Called on every rank,
     * also one that saw no batches. */
    ct_value *(*per_slot_reduce)(void *self);
    /* On rank 0 only: every rank's partial (borrowed), in rank order, n =
     * the number of ranks (1 without mpirun). Returns the metric, a NEW
     * value: not a dict for a named reducer, a dict of named metrics for an
     * unnamed one. NULL + ct_set_error on failure. */
    ct_value *(*cross_slot_reduce)(void *self, ct_value *const *per_slot, size_t n);
    /* Frees self when the context ends (may be NULL). */
    void (*free)(void *self);
} ct_metric_reducer_ops;

typedef struct ct_reducer ct_reducer;

/* Adds a value to a function reducer for the current workload (steals v,
 * also on failure). A class reducer keeps its own state: CT_EINVAL. */
CT_API int ct_reducer_update(ct_reducer *r, ct_value *v);

#ifdef __cplusplus
}
#endif
#endif
