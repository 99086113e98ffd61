/* src/metrics/metrics.c — one workload's metrics, start to end (metrics.h):
 * over the batches (batches.c), across ranks (ranks.c), then the custom
 * reducers (reducers.c). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "metrics/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "dist/value_wire.h"

/* Adds the results of the custom reducers wrapped for this workload
 * (`training` or validation) to `metrics` (stolen; NULL keeps the error that
 * made it). NEW dict or NULL + error. Collective. */
static ct_value *with_reducers(ct_value *metrics, ct_reducer *const *reducers, size_t n, bool training) {
    /* Every rank takes part in the reducers' collectives, also one whose
     * metrics failed: the first failure is the one returned, its message
     * kept across the reducers' own calls. */
    int rc = metrics ? CT_OK : ct_last_code();
    char *why = metrics ? NULL : strdup(ct_last_error());
    ct_value *scratch = metrics ? NULL : ct_value_dict();
    int rrc = cti_reducers_report(reducers, n, training, metrics ? metrics : scratch);
    ct_value_free(scratch);
    if (rc != CT_OK) ct_set_error(rc, "%s", why ? why : "out of host memory");
    free(why);
    if (rc == CT_OK) rc = rrc;
    if (rc != CT_OK) {
        ct_value_free(metrics);
        return NULL;
    }
    return metrics;
}

ct_value *cti_metrics_training(const ct_value *batches, ct_reducer *const *reducers, size_t n_reducers) {
    /* Every rank's batches report numbers under the same names, so a failure
     * here is a trial's bug every rank meets alike; a rank that meets it
     * alone leaves the collectives below, and ct_main ends the job. */
    ct_value *avg = cti_metrics_reduce_batches(batches, NULL, "training");
    if (!avg) return NULL;
    if (cti_metrics_average_ranks(avg) != CT_OK) {
        ct_value_free(avg);
        return NULL;
    }
    return with_reducers(avg, reducers, n_reducers, true);
}

ct_value *cti_metrics_validation(const ct_value *batches, const ct_value *spec, ct_reducer *const *reducers,
                                size_t n_reducers) {
    /* Each rank reduces its batches, then the ranks' results combine. */
    ct_value *local = cti_metrics_reduce_batches(batches, spec, "validation");
    ct_value *all = cti_metrics_combine_ranks(local, local ? (int64_t)ct_value_len(batches) : -1, spec);
    ct_value_free(local);
    return with_reducers(all, reducers, n_reducers, false);
}

ct_value *cti_metrics_full_dataset(const ct_value *rank0, ct_reducer *const *reducers, size_t n_reducers) {
    return with_reducers(cti_value_broadcast(rank0, 0), reducers, n_reducers, false);
}
