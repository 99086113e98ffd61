/* src/reducer.c — reducing per-batch metrics: the built-in AVG/SUM/MAX/MIN
 * over a workload's batches (arrays element-wise, as numpy over axis 0) and
 * the trial's wrapped custom reducers. One rank for now; the cross-rank step
 * (issue: distributed) slots in where the per-rank results are formed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "fit/context.h"
#include "base/value_tensor.h"
#include "dist/value_wire.h"

const char *ct_reducer_kind_name(ct_reducer_kind k) {
    switch ((int)k) {
    case CT_REDUCER_AVG: return "avg";
    case CT_REDUCER_SUM: return "sum";
    case CT_REDUCER_MAX: return "max";
    case CT_REDUCER_MIN: return "min";
    default: return "unknown";
    }
}

int64_t ct_metric_doubles(const ct_value *v, double **out, bool *is_array) {
    ct_value_kind k = ct_value_kind_of(v);
    *is_array = false;
    if (k == CT_VALUE_INT || k == CT_VALUE_FLOAT || k == CT_VALUE_BOOL) {
        *out = malloc(sizeof **out);
        if (!*out) return ct_set_error(CT_ENOMEM, "out of host memory");
        bool b = false;
        if (k == CT_VALUE_BOOL) {
            ct_value_get_bool(v, &b);
            **out = b;
        } else {
            ct_value_get_float(v, *out);
        }
        return 1;
    }
    if (k == CT_VALUE_TENSOR) return ct_value_tensor_doubles(v, out, is_array);
    if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE) {
        size_t n = ct_value_len(v);
        *is_array = true;
        *out = malloc((n ? n : 1) * sizeof **out);
        if (!*out) return ct_set_error(CT_ENOMEM, "out of host memory");
        for (size_t i = 0; i < n; i++)
            if (ct_value_get_float(ct_value_list_get(v, i), &(*out)[i]) != 0) {
                free(*out);
                return ct_set_error(CT_EFORMAT, "item %zu of a list metric is not a number", i);
            }
        return (int64_t)n;
    }
    return ct_set_error(CT_EFORMAT, "a metric must be a number, a tensor or a list of numbers, not a %s",
                        ct_value_kind_name(k));
}

static double combine(ct_reducer_kind kind, double acc, double x) {
    switch ((int)kind) {
    case CT_REDUCER_MAX: return x > acc ? x : acc;
    case CT_REDUCER_MIN: return x < acc ? x : acc;
    default: return acc + x; /* AVG and SUM */
    }
}

/* When every batch's value of `name` is a tensor of one shape: all of them
 * stacked and read back at once (one device sync per report, not one per
 * batch; the per-batch path cost 12k instructions a batch). *buf gets
 * n x width doubles. Returns false (no error kept) when this does not apply;
 * the per-batch path then says what is wrong. */
static bool read_stacked(const ct_value *batches, const char *name, size_t n, double **buf, int64_t *width,
                         bool *is_array) {
    if (n == 0) return false;
    ct_tensor **ts = malloc(n * sizeof *ts);
    if (!ts) return false;
    bool ok = true;
    for (size_t b = 0; b < n && ok; b++) {
        const ct_value *v = ct_value_dict_get(ct_value_list_get(batches, b), name);
        ts[b] = v && ct_value_kind_of(v) == CT_VALUE_TENSOR ? ct_value_get_tensor(v) : NULL;
        ok = ts[b] != NULL;
    }
    ct_scope *s = ok ? ct_scope_begin() : NULL;
    ct_tensor *all = ok ? ct_to_dtype(ct_detach(ct_stack((int)n, ts, 0)), CT_F64) : NULL;
    int64_t total = all ? ct_numel(all) : 0;
    *width = total / (int64_t)n;
    *is_array = ok && ct_ndim(ts[0]) > 0 && *width != 1;
    *buf = all ? malloc((size_t)(total > 0 ? total : 1) * sizeof **buf) : NULL;
    ok = *buf && ct_read(all, *buf, (size_t)total * sizeof **buf) == 0;
    ct_scope_end(s);
    free(ts);
    if (!ok) {
        free(*buf);
        *buf = NULL;
        ct_clear_error();
    }
    return ok;
}

/* Reduces metric `name` over the list of per-batch dicts. NEW value. */
static ct_value *reduce_one(const ct_value *batches, const char *name, ct_reducer_kind kind,
                            const char *group) {
    size_t n = ct_value_len(batches);
    double *acc = NULL;
    int64_t width = -1;
    bool array = false;
    double *rows = NULL;
    if (read_stacked(batches, name, n, &rows, &width, &array)) {
        acc = rows; /* row 0 starts the accumulation */
        for (size_t b = 1; b < n; b++)
            for (int64_t i = 0; i < width; i++) acc[i] = combine(kind, acc[i], rows[(int64_t)b * width + i]);
        goto finish;
    }
    width = -1; /* the per-batch path, which also says what does not fit */
    array = false;
    for (size_t b = 0; b < n; b++) {
        const ct_value *v = ct_value_dict_get(ct_value_list_get(batches, b), name);
        if (!v) {
            free(acc);
            ct_set_error(CT_ETRIAL, "%s batch %zu did not report metric '%s' (the first batch did)", group, b,
                         name);
            return NULL;
        }
        double *x = NULL;
        bool is_array;
        int64_t m = ct_metric_doubles(v, &x, &is_array);
        if (m < 0) {
            free(acc);
            ct_set_error(ct_last_code(), "%s metric '%s' of batch %zu: %s", group, name, b, ct_last_error());
            return NULL;
        }
        if (width < 0) {
            width = m;
            array = is_array;
            acc = x;
            continue;
        }
        if (m != width) {
            free(acc);
            free(x);
            ct_set_error(CT_ETRIAL, "%s metric '%s' has %lld values in batch %zu but %lld before", group, name,
                         (long long)m, b, (long long)width);
            return NULL;
        }
        for (int64_t i = 0; i < m; i++) acc[i] = combine(kind, acc[i], x[i]);
        free(x);
    }
finish:
    if (width < 0) return ct_value_none();
    if (kind == CT_REDUCER_AVG)
        for (int64_t i = 0; i < width; i++) acc[i] /= (double)n;
    ct_value *out;
    if (!array) {
        out = ct_value_float(acc[0]);
    } else {
        out = ct_value_list();
        for (int64_t i = 0; i < width && out; i++) ct_value_list_append(out, ct_value_float(acc[i]));
    }
    free(acc);
    return out;
}

int ct_reducer_for_metric(const ct_value *spec, const char *name, ct_reducer_kind *out) {
    int64_t k = CT_REDUCER_AVG;
    if (spec && ct_value_kind_of(spec) == CT_VALUE_DICT) {
        const ct_value *v = ct_value_dict_get(spec, name);
        if (!v) return ct_set_error(CT_ETRIAL, "evaluation_reducer() has no reducer for metric '%s'", name);
        spec = v;
    }
    if (spec && ct_value_get_int(spec, &k) != 0)
        return ct_set_error(CT_ETRIAL, "evaluation_reducer() must give a ct_reducer_kind or a dict of them");
    if (k < CT_REDUCER_AVG || k > CT_REDUCER_MIN)
        return ct_set_error(CT_ETRIAL, "evaluation_reducer() gave an unknown reducer %lld for '%s'", (long long)k,
                            name);
    *out = (ct_reducer_kind)k;
    return CT_OK;
}

ct_value *ct_reduce_batches(const ct_value *batches, const ct_value *spec, const char *group) {
    ct_value *out = ct_value_dict();
    if (!out || ct_value_len(batches) == 0) return out;
    const ct_value *first = ct_value_list_get(batches, 0);
    size_t names = ct_value_len(first);
    /* A per-metric spec must name exactly the metrics. */
    if (spec && ct_value_kind_of(spec) == CT_VALUE_DICT) {
        for (size_t i = 0; i < ct_value_len(spec); i++) {
            const char *key = NULL;
            ct_value_dict_at(spec, i, &key, NULL);
            if (!key || !ct_value_dict_get(first, key)) {
                ct_set_error(CT_ETRIAL, "evaluation_reducer() names metric '%s' that evaluate_batch does not report",
                             key ? key : "(int key)");
                ct_value_free(out);
                return NULL;
            }
        }
    }
    for (size_t i = 0; i < names; i++) {
        const char *name = NULL;
        ct_value_dict_at(first, i, &name, NULL);
        ct_reducer_kind kind = CT_REDUCER_AVG;
        ct_value *r = NULL;
        if (!name) {
            ct_set_error(CT_ETRIAL, "%s metrics must have string names", group);
        } else if (ct_reducer_for_metric(spec, name, &kind) == CT_OK) {
            r = reduce_one(batches, name, kind, group);
        }
        if (!r || ct_value_dict_set(out, name, r) != 0) {
            ct_value_free(out);
            return NULL;
        }
    }
    return out;
}

void ct_reducers_reset(ct_context *ctx) {
    for (size_t i = 0; i < ctx->n_reducers; i++) {
        ct_value_free(ctx->reducers[i]->values);
        ctx->reducers[i]->values = ct_value_list();
    }
}

/* Rank 0: every rank's list of values for reducer r, interleaved
 * round-robin (rank 0's first, rank 1's first, ..., rank 0's second, ...),
 * which rebuilds the batches' original order. NEW list in *out; other ranks
 * get NULL. Collective. */
static int gather_values(ct_context *ctx, const ct_reducer *r, ct_value **out) {
    *out = NULL;
    void *mine = NULL, *all = NULL;
    size_t len = 0;
    size_t *lens = calloc((size_t)ctx->size, sizeof *lens);
    int rc = lens ? ct_value_to_bytes(r->values, &mine, &len) : ct_set_error(CT_ENOMEM, "out of host memory");
    /* A rank that failed still takes part, with nothing, so no rank waits. */
    if (rc == CT_OK || lens) {
        int grc = ct_dist_gather_bytes(mine, rc == CT_OK ? len : 0, 0, &all, lens);
        if (rc == CT_OK) rc = grc;
    }
    free(mine);
    ct_value **lists = ctx->rank == 0 && rc == CT_OK ? calloc((size_t)ctx->size, sizeof *lists) : NULL;
    if (ctx->rank == 0 && rc == CT_OK && !lists) rc = ct_set_error(CT_ENOMEM, "out of host memory");
    size_t longest = 0, at = 0;
    for (int k = 0; lists && rc == CT_OK && k < ctx->size; at += lens[k], k++) {
        lists[k] = lens[k] ? ct_value_from_bytes((const char *)all + at, lens[k]) : NULL;
        if (!lists[k]) rc = ct_set_error(CT_EDIST, "reducer values from rank %d: %s", k, ct_last_error());
        else if (ct_value_len(lists[k]) > longest) longest = ct_value_len(lists[k]);
    }
    if (lists && rc == CT_OK) {
        *out = ct_value_list();
        for (size_t i = 0; i < longest; i++)
            for (int k = 0; k < ctx->size; k++)
                if (i < ct_value_len(lists[k])) ct_value_list_append(*out, ct_value_copy(ct_value_list_get(lists[k], i), false));
    }
    for (int k = 0; lists && k < ctx->size; k++) ct_value_free(lists[k]);
    free(lists);
    free(all);
    free(lens);
    return rc;
}

/* Applies reducer r to its values and merges the result into metrics. */
static int apply_reducer(ct_reducer *r, const ct_value *values, ct_value *metrics) {
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

int ct_reducers_report(ct_context *ctx, ct_value *metrics) {
    if (ctx->size == 1) {
        for (size_t i = 0; i < ctx->n_reducers; i++) {
            int rc = apply_reducer(ctx->reducers[i], ctx->reducers[i]->values, metrics);
            if (rc != CT_OK) return rc;
        }
        return CT_OK;
    }
    /* Several ranks: the values meet on rank 0, which applies the reducers;
     * every rank then gets rank 0's results (so every rank decides alike). */
    ct_value *results = ct_value_dict();
    int rc = results ? CT_OK : ct_set_error(CT_ENOMEM, "out of host memory");
    for (size_t i = 0; i < ctx->n_reducers; i++) {
        ct_value *values = NULL;
        int grc = gather_values(ctx, ctx->reducers[i], &values);
        if (rc == CT_OK) rc = grc;
        if (rc == CT_OK && ctx->rank == 0) rc = apply_reducer(ctx->reducers[i], values, results);
        ct_value_free(values);
    }
    int64_t ok = rc == CT_OK;
    if (ct_dist_allreduce_i64(&ok, 1, CT_DIST_MIN) != CT_OK || !ok) {
        ct_value_free(results);
        return rc != CT_OK ? rc : ct_set_error(CT_EDIST, "a custom reducer failed on another rank");
    }
    ct_value *everyone = ct_metrics_from_rank0(ctx, results);
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
