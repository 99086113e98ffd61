/* src/nn/layer.c — parameters made and initialised as torch.nn.init does,
 * and Python's argument binding for value forwards (layer.h). */
#include "nn/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ct_tensor *cti_layer_param(ct_module *m, const char *name, int ndim, const int64_t *shape, cti_layer_init_fn init,
                          double a, double b) {
    ct_tensor *t = ct_keep(ct_empty(ndim, shape, NULL));
    if (!t) return NULL;
    if (init(t, a, b) != CT_OK) {
        ct_tensor_free(t);
        return NULL;
    }
    return ct_nn_add_parameter(m, name, t); /* steals t, also on failure */
}

int cti_layer_init_uniform(ct_tensor *t, double low, double high) {
    ct_tensor *r = CT_CALL("aten::uniform_", CT_T(t), CT_F(low), CT_F(high));
    int rc = r ? CT_OK : ct_last_code();
    ct_tensor_free(r);
    return rc;
}

int cti_layer_init_constant(ct_tensor *t, double value, double unused) {
    ct_tensor *r = CT_CALL("aten::fill_.Scalar", CT_T(t), CT_F(value));
    int rc = r ? CT_OK : ct_last_code();
    ct_tensor_free(r);
    return rc;
}

/* fan_in and fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
static void fans(const ct_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    int nd = ct_ndim(t);
    int64_t receptive = 1;
    for (int d = 2; d < nd; d++) receptive *= ct_size(t, d);
    *fan_in = nd >= 2 ? ct_size(t, 1) * receptive : ct_size(t, 0);
    *fan_out = nd >= 2 ? ct_size(t, 0) * receptive : ct_size(t, 0);
}

int cti_layer_init_xavier_uniform(ct_tensor *t, double gain, double unused) {
    int64_t fan_in, fan_out;
    fans(t, &fan_in, &fan_out);
    double std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    return cti_layer_init_uniform(t, -sqrt(3.0) * std, sqrt(3.0) * std);
}

const ct_value *cti_layer_arg(const ct_value *args, const ct_value *kwargs, size_t pos, const char *name) {
    if (args && pos < ct_value_len(args)) return ct_value_list_get(args, pos);
    return kwargs && name ? ct_value_dict_get(kwargs, name) : NULL;
}

/* Python's binding of forward(*args, **kwargs) to the parameters `names`:
 * too many positional arguments, an unknown keyword or one given twice fail
 * as Python's TypeError does. */
static int bind_args(const char *type, const ct_value *args, const ct_value *kwargs, size_t n, const char *const *names,
                     const ct_value **got) {
    size_t npos = ct_value_len(args);
    if (n > CT_LAYER_MAX_ARGS) return ct_set_error(CT_EINVAL, "%s: more than %d parameters", type, CT_LAYER_MAX_ARGS);
    if (npos > n)
        return ct_set_error(CT_EINVAL, "%s: forward() takes at most %zu positional arguments but %zu were given", type,
                            n, npos);
    for (size_t i = 0; i < n; i++) got[i] = i < npos ? ct_value_list_get(args, i) : NULL;
    for (size_t j = 0; j < ct_value_len(kwargs); j++) {
        const char *key = NULL;
        int64_t ikey = 0;
        const ct_value *v = ct_value_dict_at(kwargs, j, &key, &ikey);
        size_t i = 0;
        while (i < n && !(key && strcmp(key, names[i]) == 0)) i++;
        if (i == n)
            return ct_set_error(CT_EINVAL, "%s: forward() got an unexpected keyword argument '%s'", type,
                                key ? key : "(an integer)");
        if (got[i]) return ct_set_error(CT_EINVAL, "%s: forward() got multiple values for argument '%s'", type, key);
        got[i] = v;
    }
    return CT_OK;
}

cti_layer_args cti_layer_bind(const char *type, const ct_value *args, const ct_value *kwargs, size_t n,
                            const char *const *names) {
    cti_layer_args a = {.type = type, .names = names};
    a.rc = bind_args(type, args, kwargs, n, names, a.got);
    return a;
}

const ct_tensor *cti_layer_tensor_at(cti_layer_args *a, size_t i, bool required) {
    const ct_value *v = a->got[i];
    if (a->rc != CT_OK) return NULL;
    if (v && ct_value_kind_of(v) == CT_VALUE_TENSOR) return ct_value_get_tensor(v);
    if (v && ct_value_kind_of(v) != CT_VALUE_NONE)
        a->rc = ct_set_error(CT_EINVAL, "%s: argument '%s' must be a tensor or None, got a %s", a->type, a->names[i],
                             ct_value_kind_name(ct_value_kind_of(v)));
    else if (required)
        a->rc = ct_set_error(CT_EINVAL, "%s: forward() missing required argument '%s'", a->type, a->names[i]);
    return NULL;
}

int cti_layer_flag_at(cti_layer_args *a, size_t i, int dflt) {
    const ct_value *v = a->got[i];
    bool b = false;
    if (a->rc != CT_OK || !v) return dflt;
    if (ct_value_kind_of(v) == CT_VALUE_NONE) return -1;
    if (ct_value_get_bool(v, &b) != CT_OK)
        a->rc = ct_set_error(CT_EINVAL, "%s: argument '%s' must be a bool or None, got a %s", a->type, a->names[i],
                             ct_value_kind_name(ct_value_kind_of(v)));
    return b;
}

void *cti_layer_failed(const char *type) {
    const char *msg = ct_last_error();
    size_t n = strlen(type);
    if (strncmp(msg, type, n) == 0 && msg[n] == ':') return NULL;
    char *copy = malloc(strlen(msg) + 1);
    if (!copy) return NULL;
    strcpy(copy, msg);
    ct_set_error(ct_last_code() ? ct_last_code() : CT_ETORCH, "%s: %s", type, copy);
    free(copy);
    return NULL;
}

ct_value *cti_layer_value(const ct_tensor *t) { return t ? ct_value_tensor(ct_alias(t)) : NULL; }
