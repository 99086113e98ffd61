/* src/metrics/batches.c — rule 1 of metrics.h: a workload's per-batch
 * metrics reduced on one rank by the built-in reducers (AVG, SUM, MAX, MIN;
 * arrays element-wise, as numpy over axis 0). */
#include "metrics/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "base/value_tensor.h"

const char *ct_reducer_kind_name(ct_reducer_kind k) {
    switch ((int)k) {
    case CT_REDUCER_AVG: return "avg";
    case CT_REDUCER_SUM: return "sum";
    case CT_REDUCER_MAX: return "max";
    case CT_REDUCER_MIN: return "min";
    default: return "unknown";
    }
}

int64_t cti_metric_doubles(const ct_value *v, double **out, bool *is_array) {
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
    if (k == CT_VALUE_TENSOR) return cti_value_tensor_doubles(v, out, is_array);
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
        int64_t m = cti_metric_doubles(v, &x, &is_array);
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

int cti_reducer_for_metric(const ct_value *spec, const char *name, ct_reducer_kind *out) {
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

ct_value *cti_metrics_reduce_batches(const ct_value *batches, const ct_value *spec, const char *group) {
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
        } else if (cti_reducer_for_metric(spec, name, &kind) == CT_OK) {
            r = reduce_one(batches, name, kind, group);
        }
        if (!r || ct_value_dict_set(out, name, r) != 0) {
            ct_value_free(out);
            return NULL;
        }
    }
    return out;
}
