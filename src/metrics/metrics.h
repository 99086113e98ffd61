/* src/metrics/metrics.h — from the metrics of each batch to the one line a
 * workload reports, on one rank and across ranks (Determined's reducers).
 * Internal to ctrial; metrics.h in include/ctrial is what users see.
 *
 * The loop makes one call per workload, and every call is collective under
 * mpirun (each rank makes it, in the same order):
 *
 *     // training: the batches' dicts, the trial's wrapped reducers
 *     ct_value *m = cti_metrics_training(workload, ctx->reducers, ctx->n_reducers);
 *     // validation with evaluate_batch, reduced as evaluation_reducer() says
 *     ct_value *m = cti_metrics_validation(outputs, spec, ctx->reducers, ctx->n_reducers);
 *     // validation with evaluate_full_dataset: rank 0's answer (NULL elsewhere)
 *     ct_value *m = cti_metrics_full_dataset(mine, ctx->reducers, ctx->n_reducers);
 *
 * Each returns a NEW dict, the same on every rank, or NULL + error on every
 * rank. The rules, Determined's:
 *   1. Over a workload's batches each metric reduces by its reducer (AVG,
 *      SUM, MAX, MIN; arrays element-wise, as numpy over axis 0). Training
 *      metrics always average.
 *   2. Across ranks, training metrics are the mean of the ranks' means
 *      (every rank trained the same number of batches); validation metrics
 *      combine the ranks' reduced values by the same reducer, AVG weighted
 *      by each rank's batch count, ranks without batches left out.
 *   3. Custom reducers (ct_ctx_wrap_reducer*, ct_ctx_wrap_metric_reducer)
 *      report only in the workloads they are wrapped for (for_training:
 *      cti_metrics_training; for_validation: the other two). A function
 *      reducer sees every rank's values on rank 0, interleaved round-robin
 *      (rank 0's first, rank 1's first, ..., rank 0's second, ...), which
 *      rebuilds the batches' original order, and is skipped when no rank fed
 *      it; a class reducer's per_slot_reduce runs on every rank and its
 *      cross_slot_reduce on rank 0 over the partials in rank order. A named
 *      reducer's result must not be a dict, an unnamed one's must be; the
 *      results join the dict on every rank. The loop resets every reducer
 *      (whatever it is for) at the start of every training workload and
 *      validation (cti_reducers_reset), as Determined's reset_reducers.
 * Everything that crosses ranks travels as value trees in dist's lossless
 * encoding (dist/value_wire.h): ints stay ints, NaN stays NaN. */
#ifndef CTRIAL_METRICS_METRICS_H
#define CTRIAL_METRICS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/metrics.h"

/* ---- one workload (collective) ------------------------------------------------------ */

/* Rules 1-3 for a training workload: `batches` is the list of train_batch's
 * dicts (AVG over batches, then over ranks), plus the custom reducers. */
ct_value *cti_metrics_training(const ct_value *batches, ct_reducer *const *reducers, size_t n_reducers);
/* A validation pass of evaluate_batch: `batches` is this rank's list of
 * dicts (possibly empty), `spec` what evaluation_reducer() returned (NULL:
 * AVG; an int; or a dict metric name -> int naming exactly the metrics). */
ct_value *cti_metrics_validation(const ct_value *batches, const ct_value *spec, ct_reducer *const *reducers,
                                size_t n_reducers);
/* A validation pass of evaluate_full_dataset: rank 0's dict (read on rank 0
 * only; NULL there means it failed, and its error reaches every rank). */
ct_value *cti_metrics_full_dataset(const ct_value *rank0, ct_reducer *const *reducers, size_t n_reducers);

/* ---- the pieces (batches.c, ranks.c) ------------------------------------------------- */

/* A metric value as doubles: a number gives one, a tensor all its elements
 * (a one-element tensor counts as a scalar), a list of numbers its items.
 * Returns the count (*out malloc'd, the caller frees it), or a negative code
 * with an error. */
int64_t cti_metric_doubles(const ct_value *v, double **out, bool *is_array);
/* The reducer for metric `name` under `spec` (see cti_metrics_validation).
 * Returns a status. */
int cti_reducer_for_metric(const ct_value *spec, const char *name, ct_reducer_kind *out);
/* Rule 1 on one rank: the list of per-batch dicts reduced metric by metric.
 * `group` ("training", "validation") names the batches in messages. NEW dict
 * (empty for no batches) or NULL + error. */
ct_value *cti_metrics_reduce_batches(const ct_value *batches, const ct_value *spec, const char *group);
/* Rule 2 for training: every numeric metric replaced by its mean over
 * ranks, in place. Collective. */
int cti_metrics_average_ranks(ct_value *metrics);
/* Rule 2 for validation: this rank's reduced metrics and batch count in,
 * the combination on every rank out. NEW dict or NULL + error. Collective. */
ct_value *cti_metrics_combine_ranks(const ct_value *local, int64_t n_batches, const ct_value *spec);

/* ---- custom reducers (reducers.c) ------------------------------------------------------ */

struct ct_reducer {
    char *name;       /* NULL: the result is a dict of named metrics */
    bool is_class;    /* a ct_metric_reducer_ops object, else a function */
    bool for_training, for_validation;
    /* a function reducer */
    ct_reduce_fn fn;
    void *fn_ctx;
    ct_value *values; /* list of what ct_reducer_update got in this workload */
    /* a class reducer (the reducer owns self once made) */
    ct_metric_reducer_ops ops;
    void *self;
};

/* A function reducer (name copied; may be NULL). NEW, or NULL + error. */
ct_reducer *cti_reducer_new(const char *name, ct_reduce_fn fn, void *fn_ctx, bool for_training, bool for_validation);
/* A class reducer: ops copied (reset, per_slot_reduce and cross_slot_reduce
 * required); self belongs to the reducer once it is made, and ops->free
 * releases it in cti_reducer_free. On failure (NULL + error) free is never
 * called: self is still the caller's. */
ct_reducer *cti_reducer_new_class(const char *name, const ct_metric_reducer_ops *ops, void *self, bool for_training,
                                 bool for_validation);
void cti_reducer_free(ct_reducer *r); /* accepts NULL; calls a class reducer's free */
/* Every reducer starts over (the start of a workload): a function reducer
 * forgets its values, a class reducer's reset runs. */
void cti_reducers_reset(ct_reducer *const *reducers, size_t n);
/* Rule 3: runs the reducers wrapped for this workload (`training` or not)
 * and adds their results to `metrics` on every rank. Collective. */
int cti_reducers_report(ct_reducer *const *reducers, size_t n, bool training, ct_value *metrics);

#endif
