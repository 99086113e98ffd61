/* src/data/batch.c — reading batches and torch's default_collate (data.h).
 *
 * A batch is a ct_value tree. The ct_batch_* getters hand out borrowed
 * tensors from its top level, with errors that say what the batch holds so
 * that a wrong index or key is obvious from the message alone.
 *
 * ct_collate follows torch.utils.data.default_collate: it walks the first
 * sample's structure and, at every node, gathers the same node of all n
 * samples. Tensor leaves are stacked along a new dim 0, numbers become one
 * tensor, strings a list, containers recurse. Every check names the sample
 * and the path inside it ("sample 3: [1]["x"]: ..."), because "stack
 * expects each tensor to be equal size" does not say which of 64 images is
 * the odd one out.
 *
 * Tuples stay tuples (default_collate turns them into lists, a Python
 * detail that only matters for isinstance checks; ct_batch_at reads both).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "ctrial/data.h"
#include "ctrial/ops.h"
#include "data/pool.h"

enum { MAX_DIMS = 64 };

/* "a tensor", "an int", ...: for messages. */
static const char *a_kind(ct_value_kind k) {
    switch (k) {
    case CT_VALUE_NONE: return "None";
    case CT_VALUE_BOOL: return "a bool";
    case CT_VALUE_INT: return "an int";
    case CT_VALUE_FLOAT: return "a float";
    case CT_VALUE_STR: return "a str";
    case CT_VALUE_TENSOR: return "a tensor";
    case CT_VALUE_LIST: return "a list";
    case CT_VALUE_TUPLE: return "a tuple";
    case CT_VALUE_DICT: return "a dict";
    }
    return "an unknown value";
}

/* "[1, 28, 28]" ("[]" for a 0-dim tensor). */
static void format_shape(const ct_tensor *t, char *buf, size_t len) {
    int64_t shape[MAX_DIMS];
    int nd = ct_shape(t, shape, MAX_DIMS);
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < nd && d < MAX_DIMS && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, d ? ", %" PRId64 : "%" PRId64, shape[d]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

/* What a batch is, for messages: "a tensor [64, 10] float32 cpu", "a tuple
 * of 2", "a dict with keys "x", "y"". */
static void describe(const ct_value *v, char *buf, size_t len) {
    ct_value_kind k = ct_value_kind_of(v);
    if (!v) {
        snprintf(buf, len, "NULL");
    } else if (k == CT_VALUE_TENSOR) {
        char t[128];
        ct_describe(ct_value_get_tensor(v), t, sizeof t);
        snprintf(buf, len, "a tensor %s", t);
    } else if (k == CT_VALUE_LIST || k == CT_VALUE_TUPLE) {
        snprintf(buf, len, "%s of %zu", a_kind(k), ct_value_len(v));
    } else if (k == CT_VALUE_DICT) {
        size_t n = ct_value_len(v);
        size_t at = (size_t)snprintf(buf, len, n ? "a dict with keys " : "an empty dict");
        for (size_t i = 0; i < n && at < len; i++) {
            const char *skey;
            int64_t ikey;
            ct_value_dict_at(v, i, &skey, &ikey);
            const char *sep = i ? ", " : "";
            if (skey) at += (size_t)snprintf(buf + at, len - at, "%s\"%s\"", sep, skey);
            else at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, sep, ikey);
        }
    } else {
        snprintf(buf, len, "%s", a_kind(k));
    }
}

/* ---- the getters ----------------------------------------------------------- */

/* A borrowed tensor, or NULL + an error that says what `leaf` is instead. */
static ct_tensor *leaf_tensor(const ct_value *leaf, const char *fn, const char *where) {
    if (ct_value_kind_of(leaf) == CT_VALUE_TENSOR) return ct_value_get_tensor(leaf);
    ct_set_error(CT_EFORMAT, "%s: %s is %s, not a tensor", fn, where, a_kind(ct_value_kind_of(leaf)));
    return NULL;
}

ct_tensor *ct_batch_at(const ct_value *batch, size_t i) {
    char what[256];
    ct_value_kind k = ct_value_kind_of(batch);
    if (!batch) {
        ct_set_error(CT_EINVAL, "ct_batch_at: batch is NULL");
        return NULL;
    }
    if (k != CT_VALUE_TUPLE && k != CT_VALUE_LIST) {
        describe(batch, what, sizeof what);
        ct_set_error(CT_EFORMAT, "ct_batch_at(%zu): the batch is %s, not a tuple or list", i, what);
        return NULL;
    }
    if (i >= ct_value_len(batch)) {
        describe(batch, what, sizeof what);
        ct_set_error(CT_EINDEX, "ct_batch_at(%zu): index out of range: the batch is %s", i, what);
        return NULL;
    }
    char where[48];
    snprintf(where, sizeof where, "element %zu", i);
    return leaf_tensor(ct_value_list_get(batch, i), "ct_batch_at", where);
}

ct_tensor *ct_batch_get(const ct_value *batch, const char *key) {
    char what[256];
    if (!batch || !key) {
        ct_set_error(CT_EINVAL, "ct_batch_get: %s is NULL", batch ? "key" : "batch");
        return NULL;
    }
    describe(batch, what, sizeof what);
    if (ct_value_kind_of(batch) != CT_VALUE_DICT) {
        ct_set_error(CT_EFORMAT, "ct_batch_get(\"%s\"): the batch is %s, not a dict", key, what);
        return NULL;
    }
    const ct_value *leaf = ct_value_dict_get(batch, key);
    if (!leaf) {
        ct_set_error(CT_EINDEX, "ct_batch_get(\"%s\"): no such key: the batch is %s", key, what);
        return NULL;
    }
    char where[300];
    snprintf(where, sizeof where, "the value of \"%s\"", key);
    return leaf_tensor(leaf, "ct_batch_get", where);
}

ct_tensor *ct_batch_tensor(const ct_value *batch) {
    if (!batch) {
        ct_set_error(CT_EINVAL, "ct_batch_tensor: batch is NULL");
        return NULL;
    }
    if (ct_value_kind_of(batch) == CT_VALUE_TENSOR) return ct_value_get_tensor(batch);
    char what[256];
    describe(batch, what, sizeof what);
    ct_set_error(CT_EFORMAT, "ct_batch_tensor: the batch is %s, not a tensor", what);
    return NULL;
}

/* The first tensor leaf in depth-first order (dict entries in insertion
 * order), or NULL. */
static const ct_tensor *first_tensor(const ct_value *v) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: return ct_value_get_tensor(v);
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const ct_tensor *t = first_tensor(ct_value_list_get(v, i));
            if (t) return t;
        }
        return NULL;
    case CT_VALUE_DICT:
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const ct_tensor *t = first_tensor(ct_value_dict_at(v, i, NULL, NULL));
            if (t) return t;
        }
        return NULL;
    default: return NULL;
    }
}

/* -1 on failure, as data.h says (not the code: callers add lengths up). */
int64_t ct_batch_length(const ct_value *batch) {
    if (!batch) {
        ct_set_error(CT_EINVAL, "ct_batch_length: batch is NULL");
        return -1;
    }
    const ct_tensor *t = first_tensor(batch);
    char what[256];
    if (!t) {
        describe(batch, what, sizeof what);
        ct_set_error(CT_EFORMAT, "ct_batch_length: the batch holds no tensor (it is %s)", what);
        return -1;
    }
    if (ct_ndim(t) < 1) {
        ct_describe(t, what, sizeof what);
        ct_set_error(CT_ESHAPE, "ct_batch_length: the first tensor of the batch is 0-dim (%s): "
                                "it has no size(0) to count records by", what);
        return -1;
    }
    return ct_size(t, 0);
}

/* ---- collate --------------------------------------------------------------- */

/* Where the walk is: the path inside a sample ("[1]["x"]") and, once a check
 * fails, the sample at fault. */
typedef struct {
    char path[256];
    size_t len;
    int64_t bad;
} walk;

/* Appends "[i]" / "["key"]" to the path; returns the old length for pop. */
static size_t push_index(walk *w, int64_t i) {
    size_t old = w->len;
    if (w->len < sizeof w->path)
        w->len += (size_t)snprintf(w->path + w->len, sizeof w->path - w->len, "[%" PRId64 "]", i);
    if (w->len >= sizeof w->path) w->len = sizeof w->path - 1;
    return old;
}

static size_t push_key(walk *w, const char *key) {
    size_t old = w->len;
    if (w->len < sizeof w->path)
        w->len += (size_t)snprintf(w->path + w->len, sizeof w->path - w->len, "[\"%s\"]", key);
    if (w->len >= sizeof w->path) w->len = sizeof w->path - 1;
    return old;
}

static void pop(walk *w, size_t old) {
    w->len = old;
    w->path[old] = '\0';
}

/* Records "ct_collate: sample k: <path>: <message>" (sample < 0: no sample
 * at fault, the message is about the whole node). Returns NULL. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static ct_value *fail(walk *w, int64_t sample, int code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char who[48] = "";
    if (sample >= 0) snprintf(who, sizeof who, "sample %" PRId64 ": ", sample);
    ct_set_error(code, "ct_collate: %s%s%s%s", who, w->path, w->len ? ": " : "", msg);
    w->bad = sample;
    return NULL;
}

static ct_value *collate_node(ct_value *const *nodes, int64_t n, walk *w);

/* Same kind as sample 0's node; an int may stand where sample 0 has a float
 * (Python's torch.tensor([0.5, 1], dtype=float64) takes it). */
static bool kind_fits(const ct_value *v, ct_value_kind want) {
    ct_value_kind k = ct_value_kind_of(v);
    return k == want || (want == CT_VALUE_FLOAT && k == CT_VALUE_INT);
}

static ct_value *collate_tensors(ct_value *const *nodes, int64_t n, walk *w) {
    const ct_tensor *t0 = ct_value_get_tensor(nodes[0]);
    int64_t shape0[MAX_DIMS], shape[MAX_DIMS];
    int nd0 = ct_shape(t0, shape0, MAX_DIMS);
    ct_device dev0 = ct_device_of(t0);
    ct_tensor **ts = malloc((size_t)n * sizeof *ts);
    if (!ts) {
        ct_set_error(CT_ENOMEM, "ct_collate: out of host memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        ct_tensor *t = ct_value_get_tensor(nodes[k]);
        int nd = ct_shape(t, shape, MAX_DIMS);
        ts[k] = t;
        if (k == 0) continue;
        ct_device dev = ct_device_of(t);
        char a[256], b[256];
        if (nd != nd0 || memcmp(shape, shape0, (size_t)(nd < MAX_DIMS ? nd : MAX_DIMS) * sizeof *shape)) {
            format_shape(t, a, sizeof a);
            format_shape(t0, b, sizeof b);
            free(ts);
            return fail(w, k, CT_ESHAPE, "shape %s differs from sample 0's %s", a, b);
        }
        if (ct_dtype_of(t) != ct_dtype_of(t0)) {
            free(ts);
            return fail(w, k, CT_EDTYPE, "dtype %s differs from sample 0's %s",
                        ct_dtype_name(ct_dtype_of(t)), ct_dtype_name(ct_dtype_of(t0)));
        }
        if (dev.type != dev0.type || (dev.type == CT_CUDA && dev.index != dev0.index)) {
            ct_device_format(dev, a, sizeof a);
            ct_device_format(dev0, b, sizeof b);
            free(ts);
            return fail(w, k, CT_EDEVICE, "device %s differs from sample 0's %s", a, b);
        }
    }
    /* The stacked tensor is new; ct_value_tensor moves it out of any scope
     * the caller has open, so the batch alone owns it. In a loader it is
     * stacked into memory from the loader's pool, pool.h (a contiguous sample
     * stacks into a contiguous batch either way). */
    ct_tensor *stacked;
    if (cti_buf_pool_current() && dev0.type == CT_CPU && nd0 < MAX_DIMS && ct_is_contiguous(t0)) {
        int64_t bshape[MAX_DIMS + 1] = {n};
        memcpy(bshape + 1, shape0, (size_t)nd0 * sizeof *shape0);
        ct_tensor *out = cti_buf_empty(nd0 + 1, bshape, ct_dtype_of(t0));
        ct_arg list = ct_arg_tensors((size_t)n, (const ct_tensor *const *)ts);
        stacked = out ? CT_CALL("aten::stack.out", list, CT_I(0), CT_KW("out", CT_T(out))) : NULL;
        ct_tensor_free(out);
    } else {
        stacked = ct_stack((int)n, ts, 0);
    }
    free(ts);
    if (!stacked) return fail(w, -1, ct_last_code(), "%s", ct_last_error());
    return ct_value_tensor(stacked);
}

/* ints -> int64, floats -> float64, bools -> bool: one 1-D tensor of n. */
static ct_value *collate_numbers(ct_value *const *nodes, int64_t n, ct_value_kind kind) {
    size_t elem = kind == CT_VALUE_BOOL ? 1 : 8;
    unsigned char *buf = malloc((size_t)n * elem);
    if (!buf) {
        ct_set_error(CT_ENOMEM, "ct_collate: out of host memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        if (kind == CT_VALUE_INT) {
            ct_value_get_int(nodes[k], (int64_t *)(void *)(buf + 8 * k));
        } else if (kind == CT_VALUE_FLOAT) {
            ct_value_get_float(nodes[k], (double *)(void *)(buf + 8 * k));
        } else {
            bool b = false;
            ct_value_get_bool(nodes[k], &b);
            buf[k] = b ? 1 : 0; /* torch's bool storage: one byte, 0 or 1 */
        }
    }
    ct_dtype dtype = kind == CT_VALUE_INT ? CT_I64 : kind == CT_VALUE_FLOAT ? CT_F64 : CT_BOOL;
    ct_tensor *t = ct_from_data(buf, 1, &n, dtype);
    free(buf);
    return ct_value_tensor(t);
}

static ct_value *collate_strs(ct_value *const *nodes, int64_t n) {
    ct_value *list = ct_value_list();
    for (int64_t k = 0; list && k < n; k++) {
        if (ct_value_list_append(list, ct_value_str(ct_value_get_str(nodes[k]))) != 0) {
            ct_value_free(list);
            list = NULL;
        }
    }
    return list;
}

/* Tuples and lists: element i of the batch collates element i of every
 * sample. */
static ct_value *collate_seq(ct_value *const *nodes, int64_t n, walk *w) {
    ct_value_kind kind = ct_value_kind_of(nodes[0]);
    size_t len = ct_value_len(nodes[0]);
    for (int64_t k = 1; k < n; k++) {
        if (ct_value_len(nodes[k]) != len)
            return fail(w, k, CT_EFORMAT, "%s of %zu elements, sample 0's has %zu",
                        a_kind(ct_value_kind_of(nodes[k])), ct_value_len(nodes[k]), len);
    }
    ct_value **child = malloc((size_t)n * sizeof *child);
    ct_value *out = kind == CT_VALUE_LIST ? ct_value_list() : ct_value_tuple();
    bool ok = child && out;
    if (!child) ct_set_error(CT_ENOMEM, "ct_collate: out of host memory");
    for (size_t i = 0; ok && i < len; i++) {
        for (int64_t k = 0; k < n; k++) child[k] = ct_value_list_get(nodes[k], i);
        size_t old = push_index(w, (int64_t)i);
        ct_value *c = collate_node(child, n, w);
        pop(w, old);
        ok = c && ct_value_list_append(out, c) == 0;
    }
    free(child);
    if (!ok) {
        ct_value_free(out);
        return NULL;
    }
    return out;
}

/* Dicts: the batch has sample 0's keys, in its order; every sample must
 * have the same keys (torch would raise KeyError for a missing one). */
static ct_value *collate_dict(ct_value *const *nodes, int64_t n, walk *w) {
    size_t len = ct_value_len(nodes[0]);
    for (int64_t k = 1; k < n; k++) {
        if (ct_value_len(nodes[k]) != len)
            return fail(w, k, CT_EFORMAT, "dict of %zu keys, sample 0's has %zu",
                        ct_value_len(nodes[k]), len);
    }
    ct_value **child = malloc((size_t)n * sizeof *child);
    ct_value *out = ct_value_dict();
    bool ok = child && out;
    if (!child) ct_set_error(CT_ENOMEM, "ct_collate: out of host memory");
    for (size_t i = 0; ok && i < len; i++) {
        const char *skey;
        int64_t ikey;
        child[0] = ct_value_dict_at(nodes[0], i, &skey, &ikey);
        for (int64_t k = 1; ok && k < n; k++) {
            child[k] = skey ? ct_value_dict_get(nodes[k], skey) : ct_value_dict_get_int(nodes[k], ikey);
            if (child[k]) continue;
            if (skey) fail(w, k, CT_EFORMAT, "no key \"%s\" (sample 0 has it)", skey);
            else fail(w, k, CT_EFORMAT, "no key %" PRId64 " (sample 0 has it)", ikey);
            ok = false;
        }
        if (!ok) break;
        size_t old = skey ? push_key(w, skey) : push_index(w, ikey);
        ct_value *c = collate_node(child, n, w);
        pop(w, old);
        ok = c && (skey ? ct_value_dict_set(out, skey, c) : ct_value_dict_set_int(out, ikey, c)) == 0;
    }
    free(child);
    if (!ok) {
        ct_value_free(out);
        return NULL;
    }
    return out;
}

/* The same node of all n samples -> one batch node. */
static ct_value *collate_node(ct_value *const *nodes, int64_t n, walk *w) {
    ct_value_kind kind = ct_value_kind_of(nodes[0]);
    for (int64_t k = 1; k < n; k++) {
        if (!kind_fits(nodes[k], kind))
            return fail(w, k, CT_EFORMAT, "is %s, sample 0's is %s",
                        a_kind(ct_value_kind_of(nodes[k])), a_kind(kind));
    }
    switch (kind) {
    case CT_VALUE_TENSOR: return collate_tensors(nodes, n, w);
    case CT_VALUE_BOOL:
    case CT_VALUE_INT:
    case CT_VALUE_FLOAT: return collate_numbers(nodes, n, kind);
    case CT_VALUE_STR: return collate_strs(nodes, n);
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: return collate_seq(nodes, n, w);
    case CT_VALUE_DICT: return collate_dict(nodes, n, w);
    case CT_VALUE_NONE: break;
    }
    return fail(w, 0, CT_EFORMAT, "None cannot be collated (default_collate takes tensors, "
                                  "numbers, strings, dicts, tuples and lists)");
}

ct_value *cti_collate_where(ct_value *const *samples, int64_t n, int64_t *bad_sample) {
    if (bad_sample) *bad_sample = -1;
    if (!samples || n <= 0 || n > INT_MAX) {
        ct_set_error(CT_EINVAL, "ct_collate: %s", !samples ? "samples is NULL"
                                                 : n <= 0  ? "n must be > 0"
                                                           : "more than INT_MAX samples");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        if (samples[k]) continue;
        ct_set_error(CT_EINVAL, "ct_collate: sample %" PRId64 " is NULL", k);
        if (bad_sample) *bad_sample = k;
        return NULL;
    }
    walk w = {.len = 0, .bad = -1};
    w.path[0] = '\0';
    ct_value *batch = collate_node(samples, n, &w);
    if (!batch && bad_sample) *bad_sample = w.bad;
    return batch;
}

ct_value *ct_collate(ct_value *const *samples, int64_t n) {
    return cti_collate_where(samples, n, NULL);
}

/* ---- moving a batch ------------------------------------------------------- */

/* The copy of one node. A failure (NULL) frees what was built of this node;
 * tensors made by fn and not yet moved into the tree are the scope's. */
static ct_value *map_node(const ct_value *v, cti_batch_leaf_fn fn, void *ctx) {
    ct_value_kind k = ct_value_kind_of(v);
    if (k == CT_VALUE_TENSOR) return ct_value_tensor(fn(ct_value_get_tensor(v), ctx));
    if (k != CT_VALUE_LIST && k != CT_VALUE_TUPLE && k != CT_VALUE_DICT) return ct_value_copy(v, false);
    ct_value *out = k == CT_VALUE_LIST ? ct_value_list() : k == CT_VALUE_TUPLE ? ct_value_tuple() : ct_value_dict();
    if (!out) ct_set_error(CT_ENOMEM, "out of host memory copying a batch");
    for (size_t i = 0; out && i < ct_value_len(v); i++) {
        int rc;
        if (k == CT_VALUE_DICT) {
            const char *skey;
            int64_t ikey;
            ct_value *c = map_node(ct_value_dict_at(v, i, &skey, &ikey), fn, ctx);
            rc = skey ? ct_value_dict_set(out, skey, c) : ct_value_dict_set_int(out, ikey, c);
        } else {
            rc = ct_value_list_append(out, map_node(ct_value_list_get(v, i), fn, ctx));
        }
        if (rc != 0) {
            ct_value_free(out);
            out = NULL;
        }
    }
    return out;
}

ct_value *cti_batch_map_tensors(const ct_value *v, cti_batch_leaf_fn fn, void *ctx) {
    ct_scope *scope = ct_scope_begin();
    ct_value *out = map_node(v, fn, ctx);
    ct_scope_end(scope);
    return out;
}

typedef struct {
    ct_device device;
    bool non_blocking;
} to_device_args;

static ct_tensor *to_device_leaf(const ct_tensor *t, void *ctx) {
    const to_device_args *a = ctx;
    return ct_to_device(t, a->device, a->non_blocking);
}

ct_value *ct_value_to_device(const ct_value *v, ct_device device, bool non_blocking) {
    if (!v) { /* a NULL from a failed call keeps that call's error */
        if (ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "ct_value_to_device: value is NULL");
        return NULL;
    }
    to_device_args a = {device, non_blocking};
    return cti_batch_map_tensors(v, to_device_leaf, &a);
}
