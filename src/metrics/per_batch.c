/* src/metrics/per_batch.c — per-batch training metrics averaged across
 * ranks (per_batch.h): gathered on rank 0, averaged there, broadcast. */
#include "metrics/per_batch.h"

#include <stdlib.h>

#include "dist/value_wire.h"
#include "metrics/metrics.h"

/* The mean over ranks of metric `name` in batch `b`. NEW value or NULL + error. */
static ct_value *mean_over_ranks(const ct_value *all, size_t b, const char *name) {
    size_t ranks = ct_value_len(all);
    double *sum = NULL;
    int64_t width = -1, count = 0;
    bool array = false;
    for (size_t r = 0; r < ranks; r++) {
        const ct_value *v = ct_value_dict_get(ct_value_list_get(ct_value_list_get(all, r), b), name);
        if (!v || ct_value_kind_of(v) == CT_VALUE_NONE) continue; /* left out, as numpy's `!= None` */
        double *x = NULL;
        bool is_array = false;
        int64_t m = cti_metric_doubles(v, &x, &is_array);
        if (m < 0 || (width >= 0 && m != width)) {
            if (m >= 0) ct_set_error(CT_ETRIAL, "training metric '%s' of batch %zu has %lld values on rank %zu but "
                                                "%lld on a lower rank", name, b, (long long)m, r, (long long)width);
            free(x);
            free(sum);
            return NULL;
        }
        if (width < 0) {
            width = m;
            array = is_array;
            sum = x;
        } else {
            for (int64_t i = 0; i < m; i++) sum[i] += x[i];
            free(x);
        }
        count++;
    }
    if (count == 0) {
        free(sum);
        return ct_value_none();
    }
    ct_value *out = NULL;
    if (!array) {
        out = ct_value_float(sum[0] / (double)count);
    } else {
        out = ct_value_list();
        for (int64_t i = 0; out && i < width; i++)
            if (ct_value_list_append(out, ct_value_float(sum[i] / (double)count)) != CT_OK) {
                ct_value_free(out);
                out = NULL;
            }
    }
    free(sum);
    return out;
}

/* On rank 0: every rank's list (`all`, rank order) into the averaged list. */
static ct_value *average(const ct_value *all) {
    const ct_value *mine = ct_value_list_get(all, 0);
    size_t n = ct_value_len(mine);
    for (size_t r = 1; r < ct_value_len(all); r++)
        if (ct_value_len(ct_value_list_get(all, r)) != n) {
            ct_set_error(CT_EDIST, "rank %zu trained %zu batches in this workload, rank 0 %zu", r,
                         ct_value_len(ct_value_list_get(all, r)), n);
            return NULL;
        }
    ct_value *out = ct_value_list();
    for (size_t b = 0; out && b < n; b++) {
        const ct_value *first = ct_value_list_get(mine, b);
        ct_value *d = ct_value_dict();
        for (size_t k = 0; d && k < ct_value_len(first); k++) {
            const char *key = NULL;
            ct_value_dict_at(first, k, &key, NULL);
            ct_value *v = key ? mean_over_ranks(all, b, key) : NULL;
            if (!v || ct_value_dict_set(d, key, v) != CT_OK) {
                ct_value_free(d);
                d = NULL;
            }
        }
        if (!d || ct_value_list_append(out, d) != CT_OK) {
            ct_value_free(out);
            out = NULL;
        }
    }
    return out;
}

ct_value *cti_metrics_batches_across_ranks(const ct_value *batches) {
    ct_value *all = NULL;
    if (cti_value_gather(batches, 0, &all) != CT_OK) return NULL;
    ct_value *avg = all ? average(all) : NULL; /* rank 0 only */
    ct_value_free(all);
    /* Rank 0's answer, or its error, on every rank. */
    ct_value *out = cti_value_broadcast(avg, 0);
    ct_value_free(avg);
    return out;
}
