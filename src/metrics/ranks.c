/* src/metrics/ranks.c — rule 2 of metrics.h: metrics across ranks.
 * Training metrics are averaged over ranks in one all-reduce; validation
 * metrics are reduced per rank, then rank 0 combines the ranks' results
 * (AVG weighted by batch counts) and every rank receives the answer, so
 * every rank makes the same decisions with it. */
#include "metrics/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "dist/value_wire.h"

/* ---- training: the mean over ranks ----------------------------------------------- */

int cti_metrics_average_ranks(ct_value *metrics) {
    if (ct_dist_size() == 1) return CT_OK;
    size_t n = ct_value_len(metrics), total = 0;
    int64_t *widths = calloc(n ? n : 1, sizeof *widths);
    double *flat = NULL;
    int rc = widths ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    /* Every rank reports the same metric names in the same order: one flat
     * array of all their numbers is reduced in one call. */
    for (size_t i = 0; rc == CT_OK && i < n; i++) {
        double *x = NULL;
        bool is_array;
        int64_t m = cti_metric_doubles(ct_value_dict_at(metrics, i, NULL, NULL), &x, &is_array);
        if (m < 0) {
            ct_clear_error();
            widths[i] = -1; /* not a number: left as it is */
            continue;
        }
        double *grown = realloc(flat, (total + (size_t)m + 1) * sizeof *flat);
        if (!grown) {
            free(x);
            rc = ct_set_error(CT_ENOMEM, "out of host memory");
            break;
        }
        flat = grown;
        memcpy(flat + total, x, (size_t)m * sizeof *x);
        total += (size_t)m;
        widths[i] = is_array ? m : 0; /* 0: a scalar */
        free(x);
    }
    if (rc == CT_OK && total > 0) {
        ct_scope *s = ct_scope_begin();
        ct_tensor *t = ct_from_data(flat, CT_SHAPE((int64_t)total), CT_F64);
        rc = t ? ct_dist_allreduce(t, CT_DIST_AVG) : ct_last_code();
        if (rc == CT_OK) rc = ct_read(t, flat, total * sizeof *flat);
        ct_scope_end(s);
    }
    for (size_t i = 0, at = 0; rc == CT_OK && i < n; i++) {
        if (widths[i] < 0) continue;
        const char *key = NULL;
        ct_value_dict_at(metrics, i, &key, NULL);
        ct_value *v;
        if (widths[i] == 0) {
            v = ct_value_float(flat[at++]);
        } else {
            v = ct_value_list();
            for (int64_t k = 0; k < widths[i]; k++) ct_value_list_append(v, ct_value_float(flat[at++]));
        }
        rc = ct_value_dict_set(metrics, key, v);
    }
    free(widths);
    free(flat);
    return rc;
}

/* ---- validation: combined on rank 0 ------------------------------------------------------ */

/* One metric over the ranks' answers: vals[r] (a number or a list of
 * numbers, NULL for a rank without batches) weighted by n[r]. NEW value. */
static ct_value *combine_metric(ct_reducer_kind kind, const ct_value *const *vals, const int64_t *n, int size,
                                const char *name) {
    const ct_value *first = NULL;
    for (int r = 0; r < size && !first; r++) first = vals[r];
    double *x = NULL;
    bool is_array = false;
    int64_t width = first ? cti_metric_doubles(first, &x, &is_array) : -1;
    free(x);
    if (width < 0) {
        ct_clear_error();
        return first ? ct_value_copy(first, false) : ct_value_none(); /* not numbers: rank 0's */
    }
    double *acc = calloc((size_t)(width ? width : 1), sizeof *acc), weight = 0;
    bool *any = calloc((size_t)(width ? width : 1), sizeof *any);
    int rc = acc && any ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    for (int r = 0; rc == CT_OK && r < size; r++) {
        if (!vals[r]) continue;
        bool arr;
        int64_t m = cti_metric_doubles(vals[r], &x, &arr);
        if (m != width) {
            free(x);
            rc = m < 0 ? ct_last_code()
                       : ct_set_error(CT_ETRIAL, "validation metric '%s' has %lld values on rank %d but %lld on "
                                                 "another rank", name, (long long)m, r, (long long)width);
            break;
        }
        for (int64_t i = 0; i < width; i++) {
            switch (kind) {
            case CT_REDUCER_AVG: acc[i] += x[i] * (double)n[r]; break;
            case CT_REDUCER_SUM: acc[i] += x[i]; break;
            case CT_REDUCER_MAX: acc[i] = any[i] && acc[i] > x[i] ? acc[i] : x[i]; break;
            case CT_REDUCER_MIN: acc[i] = any[i] && acc[i] < x[i] ? acc[i] : x[i]; break;
            default: break;
            }
            any[i] = true;
        }
        if (kind == CT_REDUCER_AVG) weight += (double)n[r];
        free(x);
    }
    ct_value *out = NULL;
    if (rc == CT_OK) {
        if (kind == CT_REDUCER_AVG && weight > 0)
            for (int64_t i = 0; i < width; i++) acc[i] /= weight;
        out = is_array ? ct_value_list() : ct_value_float(acc[0]);
        for (int64_t i = 0; is_array && out && i < width; i++)
            if (ct_value_list_append(out, ct_value_float(acc[i])) != CT_OK) {
                ct_value_free(out);
                out = NULL;
            }
    }
    free(acc);
    free(any);
    return out;
}

/* Rank 0: the ranks' {"batches": n, "metrics": dict} combined. NEW dict or
 * NULL + error. */
static ct_value *combine_on_root(const ct_value *answers, const ct_value *spec) {
    int size = (int)ct_value_len(answers);
    const ct_value **vals = calloc((size_t)size, sizeof *vals);
    int64_t *n = calloc((size_t)size, sizeof *n);
    ct_value *out = vals && n ? ct_value_dict() : NULL;
    const ct_value *names = NULL; /* the metrics' names and order: the first rank with batches */
    for (int r = 0; out && r < size; r++) {
        const ct_value *a = ct_value_list_get(answers, r);
        ct_value_get_int(ct_value_dict_get(a, "batches"), &n[r]);
        if (!names && n[r] > 0) names = ct_value_dict_get(a, "metrics");
    }
    for (size_t i = 0; out && i < ct_value_len(names); i++) {
        const char *key = NULL;
        ct_value_dict_at(names, i, &key, NULL);
        ct_reducer_kind kind = CT_REDUCER_AVG;
        ct_value *v = NULL;
        if (key && cti_reducer_for_metric(spec, key, &kind) == CT_OK) {
            for (int r = 0; r < size; r++)
                vals[r] = n[r] > 0 ? ct_value_dict_get(ct_value_dict_get(ct_value_list_get(answers, r), "metrics"), key)
                                   : NULL;
            v = combine_metric(kind, vals, n, size, key);
        }
        if (!v || ct_value_dict_set(out, key, v) != CT_OK) {
            ct_value_free(out);
            out = NULL;
        }
    }
    if (!vals || !n) ct_set_error(CT_ENOMEM, "out of host memory");
    free(vals);
    free(n);
    return out;
}

ct_value *cti_metrics_combine_ranks(const ct_value *local, int64_t n_batches, const ct_value *spec) {
    if (!local) {
        if (ct_dist_size() == 1) return NULL;
    } else if (ct_dist_size() == 1) {
        return ct_value_copy(local, false);
    }
    /* A rank whose own reduction failed still takes part with NULL: the
     * gather then fails on every rank, and this rank keeps its message. */
    ct_value *mine = local ? ct_value_dict() : NULL;
    if (mine && (ct_value_dict_set(mine, "batches", ct_value_int(n_batches)) != CT_OK ||
                 ct_value_dict_set(mine, "metrics", ct_value_copy(local, false)) != CT_OK)) {
        ct_value_free(mine);
        mine = NULL;
    }
    ct_value *answers = NULL;
    int rc = cti_value_gather(mine, 0, &answers); /* a NULL `mine` fails every rank */
    ct_value_free(mine);
    ct_value *combined = rc == CT_OK && answers ? combine_on_root(answers, spec) : NULL;
    ct_value_free(answers);
    /* Rank 0's answer, or its failure, on every rank. */
    ct_value *out = rc == CT_OK ? cti_value_broadcast(combined, 0) : NULL;
    ct_value_free(combined);
    if (!out && local) ct_set_error(ct_last_code(), "validation metrics across ranks: %s", ct_last_error());
    return out;
}
