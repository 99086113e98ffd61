/* src/reduce_ranks.c — metrics across ranks (Determined's rules, in
 * shared/reference/determined-semantics.md "Reducers"): training metrics are
 * averaged over ranks; validation metrics are reduced per rank, then rank 0
 * combines the ranks' results (AVG weighted by batch counts) and every rank
 * receives the answer, so every rank makes the same decisions with it.
 *
 * Metrics travel as JSON text: after a rank's own reduction they are
 * numbers or lists of numbers. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "fit/context.h"
#include "base/value_json.h"

/* ---- training: the mean over ranks ----------------------------------------------- */

int ct_metrics_average_ranks(ct_context *ctx, ct_value *metrics) {
    if (ctx->size == 1) return CT_OK;
    size_t n = ct_value_len(metrics), total = 0;
    int64_t *widths = calloc(n ? n : 1, sizeof *widths);
    double *flat = NULL;
    int rc = widths ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    /* Every rank reports the same metric names in the same order: one flat
     * array of all their numbers is reduced in one call. */
    for (size_t i = 0; rc == CT_OK && i < n; i++) {
        double *x = NULL;
        bool is_array;
        int64_t m = ct_metric_doubles(ct_value_dict_at(metrics, i, NULL, NULL), &x, &is_array);
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

/* ---- sending JSON ------------------------------------------------------------------ */

/* Rank 0's text on every rank: NEW json (or NULL + error). */
static json_t *json_from_rank0(ct_context *ctx, json_t *mine) {
    char *text = NULL;
    int64_t len = 0;
    if (ctx->rank == 0) {
        text = json_dumps(mine, JSON_COMPACT | JSON_REAL_PRECISION(17));
        len = text ? (int64_t)strlen(text) + 1 : -1;
    }
    int rc = ct_dist_broadcast_bytes(&len, sizeof len, 0);
    if (rc == CT_OK && len < 0) rc = ct_set_error(CT_ENOMEM, "rank 0 could not format the metrics");
    if (rc == CT_OK && ctx->rank != 0 && !(text = malloc((size_t)len)))
        rc = ct_set_error(CT_ENOMEM, "out of host memory");
    if (rc == CT_OK) rc = ct_dist_broadcast_bytes(text, (size_t)len, 0);
    json_t *out = NULL;
    if (rc == CT_OK && !(out = json_loads(text, 0, NULL))) ct_set_error(CT_EDIST, "rank %d: garbled metrics from rank 0", ctx->rank);
    free(text);
    return out;
}

ct_value *ct_metrics_from_rank0(ct_context *ctx, const ct_value *metrics) {
    if (ctx->size == 1) return ct_value_copy(metrics, false);
    json_t *mine = ctx->rank == 0 ? ct_json_from_value(metrics) : NULL;
    json_t *all = json_from_rank0(ctx, mine);
    json_decref(mine);
    ct_value *v = all ? ct_value_from_json(all) : NULL;
    json_decref(all);
    return v;
}

/* ---- validation: combined on rank 0 ------------------------------------------------- */

/* One metric over the ranks' answers: `vals[r]` (number or array of
 * numbers, NULL for a rank without batches) weighted by `n[r]`. NEW json. */
static json_t *combine_metric(ct_reducer_kind kind, json_t *const *vals, const int64_t *n, int size) {
    json_t *first = NULL;
    for (int r = 0; r < size && !first; r++) first = vals[r];
    if (!first) return json_null();
    if (!json_is_number(first) && !json_is_array(first)) return json_incref(first); /* a string: rank 0's */
    size_t width = json_is_array(first) ? json_array_size(first) : 1;
    json_t *out = json_is_array(first) ? json_array() : NULL;
    for (size_t i = 0; i < width; i++) {
        double acc = 0, weight = 0;
        bool any = false;
        for (int r = 0; r < size; r++) {
            json_t *v = vals[r] && json_is_array(vals[r]) ? json_array_get(vals[r], i) : vals[r];
            if (!v || !json_is_number(v)) continue;
            double x = json_number_value(v);
            switch (kind) {
            case CT_REDUCER_AVG: acc += x * (double)n[r]; weight += (double)n[r]; break;
            case CT_REDUCER_SUM: acc += x; break;
            case CT_REDUCER_MAX: acc = any && acc > x ? acc : x; break;
            case CT_REDUCER_MIN: acc = any && acc < x ? acc : x; break;
            default: break;
            }
            any = true;
        }
        double result = kind == CT_REDUCER_AVG && weight > 0 ? acc / weight : acc;
        if (!out) return json_real(result);
        json_array_append_new(out, json_real(result));
    }
    return out;
}

/* Rank 0: the ranks' {"n": batches, "m": metrics} texts combined. NEW json. */
static json_t *combine_ranks(ct_context *ctx, const char *texts, const size_t *lens, const ct_value *spec) {
    int size = ctx->size;
    json_t **answers = calloc((size_t)size, sizeof *answers), **vals = calloc((size_t)size, sizeof *vals);
    int64_t *n = calloc((size_t)size, sizeof *n);
    json_t *out = NULL, *keys = NULL;
    if (!answers || !vals || !n) {
        ct_set_error(CT_ENOMEM, "out of host memory");
        goto done;
    }
    for (int r = 0, at = 0; r < size; at += (int)lens[r], r++) {
        answers[r] = json_loadb(texts + at, lens[r], 0, NULL);
        if (!answers[r]) {
            ct_set_error(CT_EDIST, "rank 0: garbled validation metrics from rank %d", r);
            goto done;
        }
        n[r] = json_integer_value(json_object_get(answers[r], "n"));
        if (!keys && n[r] > 0) keys = json_object_get(answers[r], "m"); /* names and order */
    }
    out = json_object();
    const char *key;
    json_t *unused;
    json_object_foreach(keys, key, unused) {
        ct_reducer_kind kind = CT_REDUCER_AVG;
        if (ct_reducer_for_metric(spec, key, &kind) != CT_OK) {
            json_decref(out);
            out = NULL;
            goto done;
        }
        for (int r = 0; r < size; r++) vals[r] = n[r] > 0 ? json_object_get(json_object_get(answers[r], "m"), key) : NULL;
        json_object_set_new(out, key, combine_metric(kind, vals, n, size));
    }
done:
    for (int r = 0; answers && r < size; r++) json_decref(answers[r]);
    free(answers);
    free(vals);
    free(n);
    return out;
}

ct_value *ct_metrics_reduce_ranks(ct_context *ctx, const ct_value *local, int64_t n_batches, const ct_value *spec) {
    if (ctx->size == 1) return ct_value_copy(local, false);
    json_t *mine = json_pack("{s:I, s:o}", "n", (json_int_t)n_batches, "m", ct_json_from_value(local));
    char *text = mine ? json_dumps(mine, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(mine);
    if (!text) {
        ct_set_error(CT_ENOMEM, "out of host memory");
        return NULL; /* every rank runs out of memory or none: no collective is left waiting in practice */
    }
    void *all = NULL;
    size_t *lens = calloc((size_t)ctx->size, sizeof *lens);
    int rc = lens ? ct_dist_gather_bytes(text, strlen(text), 0, &all, lens) : ct_set_error(CT_ENOMEM, "out of host memory");
    free(text);
    json_t *combined = NULL;
    if (rc == CT_OK && ctx->rank == 0) combined = combine_ranks(ctx, all, lens, spec);
    free(all);
    free(lens);
    /* Rank 0's answer (or its failure) reaches every rank. */
    int64_t ok = ctx->rank == 0 ? combined != NULL : 1;
    char msg[1024] = "";
    if (ctx->rank == 0 && !combined) snprintf(msg, sizeof msg, "%s", ct_last_error());
    if (ct_dist_broadcast_bytes(&ok, sizeof ok, 0) != CT_OK) return NULL;
    if (!ok) {
        ct_dist_broadcast_bytes(msg, sizeof msg, 0);
        json_decref(combined);
        ct_set_error(CT_ETRIAL, "validation metrics across ranks: %s", msg);
        return NULL;
    }
    json_t *everyone = json_from_rank0(ctx, combined);
    json_decref(combined);
    ct_value *v = everyone ? ct_value_from_json(everyone) : NULL;
    json_decref(everyone);
    return v;
}
