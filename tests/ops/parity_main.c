/* tests/ops/parity_main.c — the harness: records results as JSON and runs
 * the cases listed in parity.h.
 *
 *     ops_parity_prog OUT.json [CASE...]      (all cases when none named)
 *
 * Output: {"threads": N, "torch_version": "...", "cases": {NAME: {"t": {KEY:
 * tensor}, "v": {KEY: scalar}, "errors": [...], "leaked": N}}} where a tensor
 * is {"dtype", "shape", "strides", "requires_grad", "contiguous", "data"}.
 * Floats are written with 17 significant digits (exact for float64 and for
 * float32 widened to double); nan/inf as the strings "nan", "inf", "-inf";
 * float16/bfloat16 as their raw 16-bit patterns.
 */
#include "parity.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ct_topts F32 = {.dtype = CT_F32};
const ct_topts F32G = {.dtype = CT_F32, .requires_grad = true};
const ct_topts F64 = {.dtype = CT_F64};
const ct_topts F64G = {.dtype = CT_F64, .requires_grad = true};
const ct_topts F16 = {.dtype = CT_F16};
const ct_topts BF16 = {.dtype = CT_BF16};
const ct_topts I64 = {.dtype = CT_I64};
const ct_topts I32 = {.dtype = CT_I32};
const ct_topts U8 = {.dtype = CT_U8};
const ct_topts BOOLT = {.dtype = CT_BOOL};
const ct_dtype ALL_DTYPES[8] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I64, CT_I32, CT_U8, CT_BOOL};

static json_t *g_case; /* the case being run */

void put_failure(const char *what) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s: %s [%s]", what, ct_last_error(), ct_strerror(ct_last_code()));
    json_array_append_new(json_object_get(g_case, "errors"), json_string(buf));
    ct_clear_error();
}

static json_t *float_json(double v) {
    if (isnan(v)) return json_string("nan");
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

/* Element i of a host buffer of `dtype` as JSON. */
static json_t *element_json(ct_dtype dtype, const unsigned char *buf, int64_t i) {
    switch (dtype) {
    case CT_F32: { float v; memcpy(&v, buf + 4 * i, 4); return float_json(v); }
    case CT_F64: { double v; memcpy(&v, buf + 8 * i, 8); return float_json(v); }
    case CT_F16:
    case CT_BF16: { uint16_t v; memcpy(&v, buf + 2 * i, 2); return json_integer(v); }
    case CT_I64: { int64_t v; memcpy(&v, buf + 8 * i, 8); return json_integer(v); }
    case CT_I32: { int32_t v; memcpy(&v, buf + 4 * i, 4); return json_integer(v); }
    case CT_U8: return json_integer(buf[i]);
    case CT_BOOL: return json_integer(buf[i] != 0);
    default: break;
    }
    return json_null();
}

static json_t *data_json(ct_dtype dtype, const void *data, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; i < n; i++) json_array_append_new(a, element_json(dtype, data, i));
    return a;
}

static json_t *tensor_json(const ct_tensor *t, bool with_data) {
    ct_dtype dt = ct_dtype_of(t);
    int nd = ct_ndim(t);
    json_t *shape = json_array(), *strides = json_array();
    for (int i = 0; i < nd; i++) {
        json_array_append_new(shape, json_integer(ct_size(t, i)));
        json_array_append_new(strides, json_integer(ct_stride(t, i)));
    }
    json_t *data = json_null();
    if (with_data) {
        int64_t n = ct_numel(t);
        size_t nbytes = (size_t)n * ct_dtype_size(dt);
        unsigned char *buf = malloc(nbytes ? nbytes : 1);
        if (!buf || ct_read(t, buf, nbytes) != 0) {
            free(buf);
            json_decref(shape);
            json_decref(strides);
            return NULL;
        }
        data = data_json(dt, buf, n);
        free(buf);
    }
    return json_pack("{s:s, s:o, s:o, s:b, s:b, s:o}", "dtype", ct_dtype_name(dt), "shape", shape,
                     "strides", strides, "requires_grad", (int)ct_requires_grad(t), "contiguous",
                     (int)ct_is_contiguous(t), "data", data);
}

static ct_tensor *put_tensor(const char *key, ct_tensor *t, bool with_data) {
    json_t *tj = t ? tensor_json(t, with_data) : NULL;
    if (!tj) {
        put_failure(key);
        return t;
    }
    json_object_set_new(json_object_get(g_case, "t"), key, tj);
    return t;
}

ct_tensor *put(const char *key, ct_tensor *t) { return put_tensor(key, t, true); }
ct_tensor *put_meta(const char *key, ct_tensor *t) { return put_tensor(key, t, false); }

void put_grad(const char *name, const ct_tensor *t) {
    char key[256];
    snprintf(key, sizeof key, "%s.grad", name);
    if (!t) {
        put_failure(key);
        return;
    }
    if (!ct_has_grad(t)) {
        json_object_set_new(json_object_get(g_case, "t"), key, json_null());
        return;
    }
    put(key, ct_grad(t));
}

static void put_json(const char *key, json_t *v) { json_object_set_new(json_object_get(g_case, "v"), key, v); }
void put_val(const char *key, double v) { put_json(key, float_json(v)); }
void put_int(const char *key, int64_t v) { put_json(key, json_integer(v)); }
void put_bool(const char *key, bool v) { put_json(key, json_boolean(v)); }
void put_str(const char *key, const char *s) { put_json(key, s ? json_string(s) : json_null()); }

void put_buffer(const char *key, ct_dtype dtype, const void *data, int64_t n) {
    json_t *tj = json_pack("{s:s, s:[I], s:[i], s:b, s:b, s:o}", "dtype", ct_dtype_name(dtype), "shape",
                           (json_int_t)n, "strides", 1, "requires_grad", 0, "contiguous", 1, "data",
                           data_json(dtype, data, n));
    json_object_set_new(json_object_get(g_case, "t"), key, tj);
}

ct_tensor *G(ct_tensor *t) {
    if (t && ct_set_requires_grad(t, true) != 0) put_failure("set_requires_grad");
    return t;
}

void bw(int n, ct_tensor *const *o) {
    /* A missing output would shift every later weight: fail loudly instead. */
    for (int i = 0; i < n; i++)
        if (!o[i]) {
            ct_set_error(CT_EINVAL, "output %d of the case is NULL", i);
            put_failure("backward skipped");
            return;
        }
    ct_manual_seed(1);
    ct_tensor *loss = NULL;
    for (int i = 0; i < n; i++) {
        int64_t shape[16];
        int nd = ct_shape(o[i], shape, 16);
        ct_topts opts = {.dtype = ct_dtype_of(o[i])};
        ct_tensor *w = ct_randn(nd, shape, &opts);
        ct_tensor *term = ct_sum(ct_mul(o[i], w));
        loss = loss ? ct_add(loss, term) : term;
    }
    if (!loss || ct_backward(loss) != 0) put_failure("backward");
}

ct_tensor *out(outs *o, const char *key, ct_tensor *t) {
    put(key, t);
    if (o->n < (int)(sizeof o->t / sizeof *o->t)) o->t[o->n++] = t;
    return t;
}

void bw_outs(const outs *o) { bw(o->n, o->t); }

/* ---- main ---------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
#define PARITY_ENTRY(name) {#name, case_##name},
    PARITY_CASES(PARITY_ENTRY)
#undef PARITY_ENTRY
};

static bool wanted(const char *name, int argc, char **argv) {
    if (argc <= 2) return true;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.json [CASE...]\n", argv[0]);
        return 2;
    }
    /* Bit-identical results need the same thread count as the Python side. */
    int threads = ct_set_num_threads(1);
    json_t *all = json_object();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (!wanted(cases[i].name, argc, argv)) continue;
        g_case = json_pack("{s:{}, s:{}, s:[]}", "t", "v", "errors");
        ct_clear_error();
        ct_manual_seed(0);
        size_t live = ct_tensor_live_count();
        ct_scope *scope = ct_scope_begin();
        cases[i].fn();
        ct_scope_end(scope);
        json_object_set_new(g_case, "leaked", json_integer((json_int_t)ct_tensor_live_count() - (json_int_t)live));
        json_object_set_new(all, cases[i].name, g_case);
    }
    json_t *root = json_pack("{s:i, s:s, s:o}", "threads", threads, "torch_version", ct_torch_version(), "cases", all);
    int rc = json_dump_file(root, argv[1], JSON_REAL_PRECISION(17) | JSON_COMPACT);
    json_decref(root);
    if (rc != 0) {
        fprintf(stderr, "cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
