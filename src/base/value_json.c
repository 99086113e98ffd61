/* src/base/value_json.c — ct_value trees <-> JSON (see value_json.h). */
#include "base/value_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/value_tensor.h"
#include "ctrial/error.h"

static json_t *real_or_null(double d) { return isfinite(d) ? json_real(d) : json_null(); }

static json_t *tensor_to_json(const ct_value *v) {
    double *x = NULL;
    bool is_array;
    int64_t n = cti_value_tensor_doubles(v, &x, &is_array);
    if (n < 0) return json_null();
    json_t *out = is_array ? json_array() : real_or_null(x[0]);
    for (int64_t k = 0; is_array && k < n; k++) json_array_append_new(out, real_or_null(x[k]));
    free(x);
    return out;
}

json_t *cti_json_from_value(const ct_value *v) {
    double d;
    int64_t i;
    bool b;
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_INT: ct_value_get_int(v, &i); return json_integer(i);
    case CT_VALUE_FLOAT: ct_value_get_float(v, &d); return real_or_null(d);
    case CT_VALUE_BOOL: ct_value_get_bool(v, &b); return json_boolean(b);
    case CT_VALUE_STR: return json_string(ct_value_get_str(v));
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        json_t *a = json_array();
        for (size_t k = 0; k < ct_value_len(v); k++) json_array_append_new(a, cti_json_from_value(ct_value_list_get(v, k)));
        return a;
    }
    case CT_VALUE_DICT: {
        json_t *o = json_object();
        for (size_t k = 0; k < ct_value_len(v); k++) {
            const char *key = NULL;
            int64_t ikey = 0;
            const ct_value *item = ct_value_dict_at(v, k, &key, &ikey);
            char buf[32];
            if (!key) snprintf(buf, sizeof buf, "%lld", (long long)ikey);
            json_object_set_new(o, key ? key : buf, cti_json_from_value(item));
        }
        return o;
    }
    case CT_VALUE_TENSOR: return tensor_to_json(v);
    default: return json_null();
    }
}

ct_value *cti_value_from_json(const json_t *j) {
    ct_value *v = NULL;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        v = ct_value_dict();
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)j, key, item) {
            ct_value *c = cti_value_from_json(item);
            if (!c || !v || ct_value_dict_set(v, key, c) != 0) {
                ct_value_free(v);
                return NULL;
            }
        }
        return v;
    }
    case JSON_ARRAY: {
        v = ct_value_list();
        size_t k;
        json_t *item;
        json_array_foreach(j, k, item) {
            ct_value *c = cti_value_from_json(item);
            if (!c || !v || ct_value_list_append(v, c) != 0) {
                ct_value_free(v);
                return NULL;
            }
        }
        return v;
    }
    case JSON_STRING: v = ct_value_str(json_string_value(j)); break;
    case JSON_INTEGER: v = ct_value_int(json_integer_value(j)); break;
    case JSON_REAL: v = ct_value_float(json_real_value(j)); break;
    case JSON_TRUE: v = ct_value_bool(true); break;
    case JSON_FALSE: v = ct_value_bool(false); break;
    default: v = ct_value_none(); break;
    }
    if (!v) ct_set_error(CT_ENOMEM, "out of memory converting JSON");
    return v;
}
