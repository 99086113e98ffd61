/* src/metrics/reducers.c — rule 3 of metrics.h: custom reducers, Determined's
 * MetricReducer. The trial feeds values with ct_reducer_update; at a report
 * every rank's values meet on rank 0 in the batches' order, the reducer's
 * function runs there once, and every rank receives its result. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "metrics/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "dist/value_wire.h"

ct_reducer *ct_reducer_new(const char *name, ct_reduce_fn fn, void *fn_ctx) {
    ct_reducer *r = calloc(1, sizeof *r);
    if (r) {
        r->fn = fn;
        r->fn_ctx = fn_ctx;
        r->name = name ? strdup(name) : NULL;
        r->values = ct_value_list();
    }
    if (!r || (name && !r->name) || !r->values) {
        ct_reducer_free(r);
        ct_set_error(CT_ENOMEM, "ct_ctx_wrap_reducer: out of host memory");
        return NULL;
    }
    return r;
}

void ct_reducer_free(ct_reducer *r) {
    if (!r) return;
    free(r->name);
    ct_value_free(r->values);
    free(r);
}

int ct_reducer_update(ct_reducer *r, ct_value *v) {
    if (!r || !v) {
        ct_value_free(v);
        return ct_set_error(CT_EINVAL, "ct_reducer_update: %s is NULL", r ? "value" : "reducer");
    }
    return ct_value_list_append(r->values, v);
}

void ct_reducers_reset(ct_reducer *const *reducers, size_t n) {
    for (size_t i = 0; i < n; i++) {
        ct_value_free(reducers[i]->values);
        reducers[i]->values = ct_value_list();
    }
}

/* Rank 0: every rank's values for reducer r, interleaved round-robin (rank
 * 0's first, rank 1's first, ..., rank 0's second, ...), which rebuilds the
 * batches' original order. NEW list in *out on rank 0, NULL elsewhere.
 * Collective. */
static int gather_values(const ct_reducer *r, ct_value **out) {
    *out = NULL;
    ct_value *lists = NULL;
    int rc = ct_value_gather(r->values, 0, &lists);
    if (rc != CT_OK || !lists) return rc; /* not rank 0, or failed */
    size_t longest = 0, ranks = ct_value_len(lists);
    for (size_t k = 0; k < ranks; k++) {
        size_t len = ct_value_len(ct_value_list_get(lists, k));
        if (len > longest) longest = len;
    }
    ct_value *all = ct_value_list();
    for (size_t i = 0; all && i < longest; i++)
        for (size_t k = 0; all && k < ranks; k++) {
            const ct_value *mine = ct_value_list_get(lists, k);
            if (i < ct_value_len(mine) && ct_value_list_append(all, ct_value_copy(ct_value_list_get(mine, i), false))) {
                ct_value_free(all);
                all = NULL;
            }
        }
    ct_value_free(lists);
    *out = all;
    return all ? CT_OK : ct_last_code();
}

/* Applies reducer r to its values and merges the result into metrics. */
static int apply_reducer(const ct_reducer *r, const ct_value *values, ct_value *metrics) {
    size_t n = ct_value_len(values);
    if (n == 0) return CT_OK; /* not fed in this workload */
    ct_value **items = malloc(n * sizeof *items);
    if (!items) return ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t j = 0; j < n; j++) items[j] = ct_value_list_get(values, j);
    ct_value *result = r->fn(items, n, r->fn_ctx);
    free(items);
    const char *label = r->name ? r->name : "unnamed reducer";
    if (!result) {
        if (ct_last_code() == CT_OK) ct_set_error(CT_ETRIAL, "reducer '%s' returned NULL", label);
        return ct_set_error(ct_last_code(), "reducer '%s': %s", label, ct_last_error());
    }
    if (r->name) return ct_value_dict_set(metrics, r->name, result);
    if (ct_value_kind_of(result) != CT_VALUE_DICT) {
        ct_value_free(result);
        return ct_set_error(CT_ETRIAL, "an unnamed reducer must return a dict of named metrics");
    }
    for (size_t j = 0; j < ct_value_len(result); j++) {
        const char *key = NULL;
        ct_value *v = ct_value_dict_at(result, j, &key, NULL);
        if (!key || ct_value_dict_set(metrics, key, ct_value_copy(v, false)) != 0) {
            ct_value_free(result);
            return ct_set_error(CT_ETRIAL, "an unnamed reducer returned a metric without a string name");
        }
    }
    ct_value_free(result);
    return CT_OK;
}

int ct_reducers_report(ct_reducer *const *reducers, size_t n, ct_value *metrics) {
    if (n == 0) return CT_OK;
    if (ct_dist_size() == 1) {
        for (size_t i = 0; i < n; i++) {
            int rc = apply_reducer(reducers[i], reducers[i]->values, metrics);
            if (rc != CT_OK) return rc;
        }
        return CT_OK;
    }
    /* Several ranks: the values meet on rank 0, which applies the reducers;
     * every rank then gets rank 0's results (so every rank decides alike). */
    ct_value *results = ct_dist_rank() == 0 ? ct_value_dict() : NULL;
    int rc = ct_dist_rank() != 0 || results ? CT_OK : ct_last_code();
    for (size_t i = 0; i < n; i++) {
        ct_value *values = NULL;
        int grc = gather_values(reducers[i], &values);
        if (rc == CT_OK) rc = grc;
        if (rc == CT_OK && values) rc = apply_reducer(reducers[i], values, results);
        ct_value_free(values);
    }
    if (rc != CT_OK) {
        ct_value_free(results);
        results = NULL; /* root's failure reaches every rank through the broadcast */
    }
    ct_value *everyone = ct_value_broadcast(results, 0);
    ct_value_free(results);
    if (!everyone) return ct_last_code();
    for (size_t j = 0; rc == CT_OK && j < ct_value_len(everyone); j++) {
        const char *key = NULL;
        ct_value *v = ct_value_dict_at(everyone, j, &key, NULL);
        rc = ct_value_dict_set(metrics, key, ct_value_copy(v, false));
    }
    ct_value_free(everyone);
    return rc;
}
