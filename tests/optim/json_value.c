/* tests/optim/json_value.c — see json_value.h. */
#include "json_value.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    ct_dtype dtype;
} kDtypes[] = {{"float32", CT_F32}, {"float64", CT_F64}, {"int64", CT_I64}, {"int32", CT_I32}};

json_t *real_to_json(double x) {
    return isfinite(x) ? json_real(x) : json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

/* A number, or real_to_json's "nan", "inf", "-inf": false for anything else. */
static bool real_from_json(const json_t *j, double *x) {
    const char *s = json_string_value(j);
    if (json_is_number(j)) *x = json_number_value(j);
    else if (s && !strcmp(s, "nan")) *x = NAN;
    else if (s && (!strcmp(s, "inf") || !strcmp(s, "-inf"))) *x = s[0] == '-' ? -INFINITY : INFINITY;
    else return false;
    return true;
}

/* Element `i` of a host buffer of `dtype`, as JSON. */
static json_t *elem_to_json(const void *buf, ct_dtype dtype, int64_t i) {
    switch (dtype) {
    case CT_F32: return real_to_json(((const float *)buf)[i]);
    case CT_F64: return real_to_json(((const double *)buf)[i]);
    case CT_I64: return json_integer(((const int64_t *)buf)[i]);
    case CT_I32: return json_integer(((const int32_t *)buf)[i]);
    default: return NULL;
    }
}

/* Nested lists for dims [d, ndim), starting at element *pos. */
static json_t *nest(const void *buf, ct_dtype dtype, const int64_t *shape, int ndim, int d,
                    int64_t *pos) {
    if (d == ndim) return elem_to_json(buf, dtype, (*pos)++);
    json_t *a = json_array();
    for (int64_t i = 0; i < shape[d]; i++) json_array_append_new(a, nest(buf, dtype, shape, ndim, d + 1, pos));
    return a;
}

json_t *tensor_to_json(const ct_tensor *t) {
    ct_dtype dtype = ct_dtype_of(t);
    const char *name = NULL;
    for (size_t k = 0; k < sizeof kDtypes / sizeof *kDtypes; k++)
        if (kDtypes[k].dtype == dtype) name = kDtypes[k].name;
    if (!name) {
        ct_set_error(CT_EDTYPE, "tensor_to_json: dtype %s not handled", ct_dtype_name(dtype));
        return NULL;
    }
    int64_t shape[16];
    int ndim = ct_shape(t, shape, 16);
    size_t nbytes = (size_t)ct_numel(t) * ct_dtype_size(dtype);
    void *buf = malloc(nbytes ? nbytes : 1);
    if (ct_read(t, buf, nbytes) != 0) {
        free(buf);
        return NULL;
    }
    int64_t pos = 0;
    json_t *dims = json_array();
    for (int d = 0; d < ndim; d++) json_array_append_new(dims, json_integer(shape[d]));
    json_t *j = json_pack("{s:o, s:s, s:o}", "tensor", nest(buf, dtype, shape, ndim, 0, &pos),
                          "dtype", name, "shape", dims);
    free(buf);
    return j;
}

json_t *value_to_json(const ct_value *v) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_NONE: return json_null();
    case CT_VALUE_BOOL: {
        bool b = false;
        ct_value_get_bool(v, &b);
        return json_boolean(b);
    }
    case CT_VALUE_INT: {
        int64_t i = 0;
        ct_value_get_int(v, &i);
        return json_integer(i);
    }
    case CT_VALUE_FLOAT: {
        double d = 0;
        ct_value_get_float(v, &d);
        if (!isfinite(d)) /* as the dict {"float": "nan"}, the convention of sched_parity.c */
            return json_pack("{s:[[s, s]]}", "dict", "float", isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
        return json_real(d);
    }
    case CT_VALUE_STR: return json_string(ct_value_get_str(v));
    case CT_VALUE_TENSOR: return tensor_to_json(ct_value_get_tensor(v));
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        json_t *a = json_array();
        for (size_t i = 0; i < ct_value_len(v); i++) {
            json_t *item = value_to_json(ct_value_list_get(v, i));
            if (!item) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, item);
        }
        return ct_value_kind_of(v) == CT_VALUE_TUPLE ? json_pack("{s:o}", "tuple", a) : a;
    }
    case CT_VALUE_DICT: {
        json_t *a = json_array();
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const char *sk = NULL;
            int64_t ik = 0;
            json_t *item = value_to_json(ct_value_dict_at(v, i, &sk, &ik));
            if (!item) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, json_pack("[o, o]", sk ? json_string(sk) : json_integer(ik), item));
        }
        return json_pack("{s:o}", "dict", a);
    }
    }
    return NULL;
}

/* Flattens nested lists into buf (dtype elements) at *pos. */
static int flatten(const json_t *j, ct_dtype dtype, void *buf, int64_t n, int64_t *pos) {
    if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            if (flatten(json_array_get(j, i), dtype, buf, n, pos) != 0) return -1;
        return 0;
    }
    double x = 0;
    if (!real_from_json(j, &x) || *pos >= n) return ct_set_error(CT_EFORMAT, "tensor data does not fit its shape");
    switch (dtype) {
    case CT_F32: ((float *)buf)[*pos] = (float)x; break;
    case CT_F64: ((double *)buf)[*pos] = x; break;
    case CT_I64: ((int64_t *)buf)[*pos] = json_is_integer(j) ? json_integer_value(j) : (int64_t)x; break;
    case CT_I32: ((int32_t *)buf)[*pos] = (int32_t)x; break;
    default: return ct_set_error(CT_EDTYPE, "dtype not handled");
    }
    (*pos)++;
    return 0;
}

ct_tensor *tensor_from_json(const json_t *j) {
    const char *dname = json_string_value(json_object_get(j, "dtype"));
    const json_t *dims = json_object_get(j, "shape");
    ct_dtype dtype = CT_F32;
    bool found = false;
    for (size_t k = 0; dname && k < sizeof kDtypes / sizeof *kDtypes; k++)
        if (strcmp(kDtypes[k].name, dname) == 0) dtype = kDtypes[k].dtype, found = true;
    if (!found || !json_is_array(dims) || json_array_size(dims) > 16) {
        ct_set_error(CT_EFORMAT, "tensor_from_json: bad dtype or shape");
        return NULL;
    }
    int64_t shape[16], n = 1;
    int ndim = (int)json_array_size(dims);
    for (int d = 0; d < ndim; d++) n *= shape[d] = json_integer_value(json_array_get(dims, d));
    void *buf = malloc((size_t)(n ? n : 1) * ct_dtype_size(dtype));
    int64_t pos = 0;
    ct_tensor *t = NULL;
    if (flatten(json_object_get(j, "tensor"), dtype, buf, n, &pos) == 0 && pos == n)
        t = ct_keep(ct_from_data(buf, ndim, shape, dtype));
    else if (pos != n)
        ct_set_error(CT_EFORMAT, "tensor_from_json: %lld values for %lld elements", (long long)pos, (long long)n);
    free(buf);
    return t;
}

ct_value *value_from_json(const json_t *j) {
    if (json_is_null(j)) return ct_value_none();
    if (json_is_boolean(j)) return ct_value_bool(json_is_true(j));
    if (json_is_integer(j)) return ct_value_int(json_integer_value(j));
    if (json_is_real(j)) return ct_value_float(json_real_value(j));
    if (json_is_string(j)) return ct_value_str(json_string_value(j));
    if (json_is_array(j)) {
        ct_value *l = ct_value_list();
        for (size_t i = 0; l && i < json_array_size(j); i++)
            if (ct_value_list_append(l, value_from_json(json_array_get(j, i))) != 0) {
                ct_value_free(l);
                l = NULL;
            }
        return l;
    }
    if (json_object_get(j, "tensor")) return ct_value_tensor(tensor_from_json(j));
    const json_t *tuple = json_object_get(j, "tuple");
    if (tuple) {
        ct_value *t = ct_value_tuple();
        for (size_t i = 0; t && i < json_array_size(tuple); i++)
            if (ct_value_list_append(t, value_from_json(json_array_get(tuple, i))) != 0) {
                ct_value_free(t);
                t = NULL;
            }
        return t;
    }
    const json_t *items = json_object_get(j, "dict");
    if (!items) {
        ct_set_error(CT_EFORMAT, "value_from_json: unknown object");
        return NULL;
    }
    ct_value *d = ct_value_dict();
    for (size_t i = 0; d && i < json_array_size(items); i++) {
        const json_t *kv = json_array_get(items, i), *k = json_array_get(kv, 0);
        ct_value *item = value_from_json(json_array_get(kv, 1));
        int rc = json_is_string(k) ? ct_value_dict_set(d, json_string_value(k), item)
                                   : ct_value_dict_set_int(d, json_integer_value(k), item);
        if (rc != 0) {
            ct_value_free(d);
            d = NULL;
        }
    }
    return d;
}
