/* src/metrics/reducers.c — rule 3 of metrics.h: custom reducers, Determined's
 * wrap_reducer and MetricReducer (harness/determined/pytorch/_reducer.py).
 *
 * A function reducer is Determined's _SimpleReducer: the trial feeds values
 * with ct_reducer_update, each rank's list is its per-slot result, and on
 * rank 0 the lists are interleaved round-robin (the batches' order) and the
 * function runs once. A class reducer brings its own reset, per_slot_reduce
 * and cross_slot_reduce. At a report only the reducers wrapped for that
 * workload take part (reduce_metrics' `reducables`): every rank makes its
 * per-slot results, one gather brings them all to rank 0, which reduces each
 * and checks the result's shape against the name (run_cross_slot_reduction),
 * and one broadcast gives every rank rank 0's results. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "dist/value_wire.h"

/* ---- making, feeding, resetting ---------------------------------------------------- */

static ct_reducer *reducer_alloc(const char *name, bool for_training, bool for_validation) {
    ct_reducer *r = calloc(1, sizeof *r);
    if (r) {
        r->for_training = for_training;
        r->for_validation = for_validation;
        r->name = name ? strdup(name) : NULL;
    }
    if (!r || (name && !r->name)) {
        free(r);
        ct_set_error(CT_ENOMEM, "out of host memory");
        return NULL;
    }
    return r;
}

ct_reducer *cti_reducer_new(const char *name, ct_reduce_fn fn, void *fn_ctx, bool for_training, bool for_validation) {
    if (!fn) {
        ct_set_error(CT_EINVAL, "a function reducer needs a function");
        return NULL;
    }
    ct_reducer *r = reducer_alloc(name, for_training, for_validation);
    if (!r) return NULL;
    r->fn = fn;
    r->fn_ctx = fn_ctx;
    r->values = ct_value_list();
    if (!r->values) {
        cti_reducer_free(r);
        ct_set_error(CT_ENOMEM, "out of host memory");
        return NULL;
    }
    return r;
}

ct_reducer *cti_reducer_new_class(const char *name, const ct_metric_reducer_ops *ops, void *self, bool for_training,
                                 bool for_validation) {
    const char *missing = !ops                     ? "ops"
                          : !ops->reset            ? "ops->reset"
                          : !ops->per_slot_reduce  ? "ops->per_slot_reduce"
                          : !ops->cross_slot_reduce ? "ops->cross_slot_reduce"
                                                   : NULL;
    if (missing) {
        ct_set_error(CT_EINVAL, "a metric reducer needs %s", missing);
        return NULL;
    }
    ct_reducer *r = reducer_alloc(name, for_training, for_validation);
    if (!r) return NULL; /* self is still the caller's */
    r->is_class = true;
    r->ops = *ops;
    r->self = self;
    return r;
}

void cti_reducer_free(ct_reducer *r) {
    if (!r) return;
    if (r->is_class && r->ops.free) r->ops.free(r->self);
    free(r->name);
    ct_value_free(r->values);
    free(r);
}

int ct_reducer_update(ct_reducer *r, ct_value *v) {
    if (!r || !v) {
        ct_value_free(v);
        return ct_set_error(CT_EINVAL, "ct_reducer_update: %s is NULL", r ? "value" : "reducer");
    }
    if (r->is_class) {
        ct_value_free(v);
        return ct_set_error(CT_EINVAL,
                            "ct_reducer_update: reducer '%s' is a metric reducer (ct_ctx_wrap_metric_reducer): it "
                            "keeps its own state, update that instead", r->name ? r->name : "unnamed");
    }
    return ct_value_list_append(r->values, v);
}

void cti_reducers_reset(ct_reducer *const *reducers, size_t n) {
    /* Determined's reset_reducers: every wrapped reducer, whatever workloads
     * it is for. */
    for (size_t i = 0; i < n; i++) {
        ct_reducer *r = reducers[i];
        if (r->is_class) {
            r->ops.reset(r->self);
        } else {
            ct_value_free(r->values);
            r->values = ct_value_list(); /* NULL (out of memory) is met by the next update */
        }
    }
}

/* ---- one report ---------------------------------------------------------------------- */

/* "reducer 'acc'" or "the unnamed reducer", for messages. */
static const char *who(const ct_reducer *r, char *buf, size_t size) {
    if (r->name) snprintf(buf, size, "reducer '%s'", r->name);
    else snprintf(buf, size, "an unnamed reducer");
    return buf;
}

/* The error a user function left (or a generic one when it left none),
 * prefixed with the reducer and the step. Returns the code. */
static int user_failed(const ct_reducer *r, const char *step) {
    char b[300];
    if (ct_last_code() == CT_OK) return ct_set_error(CT_ETRIAL, "%s: %s returned NULL", who(r, b, sizeof b), step);
    return ct_set_error(ct_last_code(), "%s: %s failed: %s", who(r, b, sizeof b), step, ct_last_error());
}

/* This rank's per-slot result for r: a NEW value (a function reducer's list
 * of values, a class reducer's per_slot_reduce), or NULL + error. */
static ct_value *per_slot(const ct_reducer *r) {
    if (!r->is_class) {
        ct_value *v = r->values ? ct_value_copy(r->values, false) : NULL;
        if (!v) ct_set_error(CT_ENOMEM, "out of host memory");
        return v;
    }
    ct_clear_error();
    ct_value *v = r->ops.per_slot_reduce(r->self);
    if (!v) user_failed(r, "per_slot_reduce");
    return v;
}

/* Run_cross_slot_reduction for one reducer: the ranks' per-slot results
 * (borrowed, rank order) reduced, checked and added to `out`. */
static int cross_slot(const ct_reducer *r, ct_value *const *slots, size_t n_slots, ct_value *out) {
    ct_value *result = NULL;
    const char *step = r->is_class ? "cross_slot_reduce" : "the reduce function";
    if (r->is_class) {
        ct_clear_error();
        result = r->ops.cross_slot_reduce(r->self, slots, n_slots);
    } else {
        /* _SimpleReducer.cross_slot_reduce: rank 0's first value, rank 1's
         * first, ..., rank 0's second, ... */
        size_t total = 0, longest = 0;
        for (size_t k = 0; k < n_slots; k++) {
            size_t len = ct_value_len(slots[k]);
            total += len;
            if (len > longest) longest = len;
        }
        if (total == 0) return CT_OK; /* no rank fed it in this workload: not reported */
        ct_value **flat = malloc(total * sizeof *flat);
        if (!flat) return ct_set_error(CT_ENOMEM, "out of host memory");
        size_t at = 0;
        for (size_t i = 0; i < longest; i++)
            for (size_t k = 0; k < n_slots; k++)
                if (i < ct_value_len(slots[k])) flat[at++] = ct_value_list_get(slots[k], i);
        ct_clear_error();
        result = r->fn(flat, total, r->fn_ctx);
        free(flat);
    }
    if (!result) return user_failed(r, step);
    char b[300];
    bool is_dict = ct_value_kind_of(result) == CT_VALUE_DICT;
    if (r->name) {
        /* Determined refuses a dict from a named reducer: too common a mistake. */
        if (is_dict) {
            ct_value_free(result);
            return ct_set_error(CT_ETRIAL,
                                "%s: %s returned a dict, but the reducer was wrapped with a name; wrap it with name "
                                "NULL to report several metrics, or return a single metric (not a dict)",
                                who(r, b, sizeof b), step);
        }
        return ct_value_dict_set(out, r->name, result);
    }
    if (!is_dict) {
        int code = ct_set_error(CT_ETRIAL,
                                "%s: %s returned a value of kind %s, not a dict, but the reducer was wrapped with "
                                "name NULL; set a name to report a single metric, or return a dict mapping names "
                                "to metrics",
                                who(r, b, sizeof b), step, ct_value_kind_name(ct_value_kind_of(result)));
        ct_value_free(result);
        return code;
    }
    int rc = CT_OK;
    for (size_t j = 0; rc == CT_OK && j < ct_value_len(result); j++) {
        const char *key = NULL;
        ct_value *v = ct_value_dict_at(result, j, &key, NULL);
        rc = key ? ct_value_dict_set(out, key, ct_value_copy(v, false))
                 : ct_set_error(CT_ETRIAL, "%s: %s returned a metric without a string name", who(r, b, sizeof b),
                                step);
    }
    ct_value_free(result);
    return rc;
}

/* Adds a copy of every entry of `from` to `to`. */
static int merge(ct_value *to, const ct_value *from) {
    int rc = CT_OK;
    for (size_t j = 0; rc == CT_OK && j < ct_value_len(from); j++) {
        const char *key = NULL;
        ct_value *v = ct_value_dict_at(from, j, &key, NULL);
        rc = ct_value_dict_set(to, key, ct_value_copy(v, false));
    }
    return rc;
}

int cti_reducers_report(ct_reducer *const *reducers, size_t n, bool training, ct_value *metrics) {
    /* reduce_metrics: only the reducers marked for this kind of workload.
     * Every rank wrapped the same ones, so every rank agrees on the list. */
    ct_reducer **mine = malloc((n ? n : 1) * sizeof *mine);
    if (!mine) return ct_set_error(CT_ENOMEM, "out of host memory"); /* ranks may now disagree: ct_main ends the job */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (training ? reducers[i]->for_training : reducers[i]->for_validation) mine[m++] = reducers[i];
    if (m == 0) {
        free(mine);
        return CT_OK;
    }
    /* Every rank's per-slot results, one list per rank. A rank that fails
     * still takes part (with NULL): the gather then fails on every rank and
     * this rank keeps its own message. */
    ct_value *slots = ct_value_list();
    int rc = slots ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; rc == CT_OK && i < m; i++) {
        ct_value *v = per_slot(mine[i]);
        rc = v ? ct_value_list_append(slots, v) : ct_last_code();
    }
    if (rc != CT_OK) {
        ct_value_free(slots);
        slots = NULL;
    }
    int size = ct_dist_size();
    ct_value *gathered = NULL; /* rank 0: a list of `size` lists of m values */
    if (size > 1) {
        int grc = cti_value_gather(slots, 0, &gathered);
        if (rc == CT_OK) rc = grc;
        if (rc != CT_OK) { /* every rank knows: the gather fails everywhere alike */
            ct_value_free(slots);
            ct_value_free(gathered);
            free(mine);
            return rc;
        }
    }
    /* On rank 0, each reducer over the ranks' results, in rank order. */
    ct_value *results = NULL;
    if (ct_dist_rank() == 0 && rc == CT_OK) {
        ct_value **per_rank = malloc((size_t)size * sizeof *per_rank);
        results = per_rank ? ct_value_dict() : NULL;
        rc = results ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
        for (size_t i = 0; rc == CT_OK && i < m; i++) {
            for (int k = 0; k < size; k++)
                per_rank[k] = ct_value_list_get(size > 1 ? ct_value_list_get(gathered, (size_t)k) : slots, i);
            rc = cross_slot(mine[i], per_rank, (size_t)size, results);
        }
        free(per_rank);
        if (rc != CT_OK) {
            ct_value_free(results);
            results = NULL;
        }
    }
    ct_value_free(gathered);
    ct_value_free(slots);
    free(mine);
    if (size == 1) {
        rc = rc == CT_OK ? merge(metrics, results) : rc;
        ct_value_free(results);
        return rc;
    }
    /* Rank 0's results, or its failure, on every rank. */
    ct_value *everyone = cti_value_broadcast(results, 0);
    ct_value_free(results);
    if (!everyone) return ct_last_code();
    rc = merge(metrics, everyone);
    ct_value_free(everyone);
    return rc;
}
