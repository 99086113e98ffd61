/* src/pth/pickle_write.c — a ct_value tree pickled as torch.save pickles it.
 *
 * The output is what Python's pickle protocol 2 writes for the same object,
 * opcode for opcode: ints in the smallest of BININT1/BININT2/BININT/LONG1,
 * floats as BINFLOAT, strings as BINUNICODE, tuples of up to three items
 * with TUPLE1..3, dicts and lists filled by SETITEMS/APPENDS in batches of
 * 1000. A tensor is pickled as torch's Tensor.__reduce_ex__ does:
 *
 *     torch._utils._rebuild_tensor_v2(
 *         <persistent id ('storage', torch.FloatStorage, '0', 'cpu', numel)>,
 *         storage_offset, size, stride, requires_grad, OrderedDict())
 *
 * where the persistent id names a storage saved once as data/<key>, keys
 * numbered in order of first use. Only what is used more than once is
 * memoized (the globals, 'storage', the location and key strings): Python
 * memoizes every object, which a reader cannot tell apart. What the pickle
 * says of a tensor comes from the caller's describe function (pth.h).
 */
#include "pth/pth.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- byte buffers ------------------------------------------------------------ */

void cti_pth_buf_put(cti_pth_buf *b, const void *data, size_t n) {
    if (b->oom || n == 0) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        unsigned char *p = realloc(b->data, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

void cti_pth_buf_free(cti_pth_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- storage classes and strings ---------------------------------------------- */

static const struct {
    ct_dtype dtype;
    const char *cls;
} storage_classes[] = {
    {CT_F32, "FloatStorage"}, {CT_F64, "DoubleStorage"}, {CT_F16, "HalfStorage"},
    {CT_BF16, "BFloat16Storage"}, {CT_I64, "LongStorage"}, {CT_I32, "IntStorage"},
    {CT_I16, "ShortStorage"}, {CT_I8, "CharStorage"}, {CT_U8, "ByteStorage"},
    {CT_BOOL, "BoolStorage"},
};
enum { NCLASSES = sizeof storage_classes / sizeof storage_classes[0] };

const char *cti_pth_storage_class(ct_dtype dtype) {
    for (size_t i = 0; i < NCLASSES; i++)
        if (storage_classes[i].dtype == dtype) return storage_classes[i].cls;
    return NULL;
}

bool cti_pth_storage_dtype(const char *name, ct_dtype *out) {
    for (size_t i = 0; i < NCLASSES; i++) {
        if (strcmp(storage_classes[i].cls, name) == 0) {
            *out = storage_classes[i].dtype;
            return true;
        }
    }
    return false;
}

/* UTF-8 as Python's pickle writes it ('surrogatepass': encoded surrogates
 * are accepted, overlong forms and code points past U+10FFFF are not). */
bool cti_pth_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the 2nd byte */
        if (c < 0x80) len = 1;
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return false;
        if (len > n - i) return false;
        if (len > 1 && (s[i + 1] < lo || s[i + 1] > hi)) return false;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

/* ---- the pickler --------------------------------------------------------------- */

enum { MAX_DEVICES = 16, PATH_MAX_LEN = 256, BATCH = 1000 };

typedef struct {
    ct_device device;
    uint32_t memo;
} location_memo;

typedef struct {
    cti_pth_buf *out;
    cti_pth_pickled *res;
    const cti_pth_tensors *tensors;
    const char *what;
    size_t cap;        /* of res->storages */
    size_t *slots;     /* open addressing by storage id: index + 1, 0 = empty */
    size_t nslots;
    /* Memo slots (index + 1; 0 = not written yet). */
    uint32_t memo_next;
    uint32_t memo_rebuild, memo_odict, memo_storage;
    uint32_t memo_class[NCLASSES];
    location_memo locs[MAX_DEVICES];
    size_t nlocs;
    /* Where in the tree the pickler is, for messages: ["model"]["fc.weight"]. */
    char path[PATH_MAX_LEN];
    size_t plen;
} pickler;

static void emit(pickler *pk, const void *p, size_t n) { cti_pth_buf_put(pk->out, p, n); }

static void op(pickler *pk, unsigned char code) { emit(pk, &code, 1); }

static void op_u32(pickler *pk, unsigned char code, uint32_t v) {
    unsigned char b[5] = {code, (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    emit(pk, b, 5);
}

/* Records "ct_pth_save: FILE: value at PATH: ..." and returns code. */
static int fail(pickler *pk, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_set_error(code, "ct_pth_save: %s: %s%s: %s", pk->what, pk->plen ? "value at " : "the top-level value",
                        pk->path, msg);
}

/* Appends a path component; returns the length to restore afterwards. */
static size_t path_push(pickler *pk, const char *fmt, ...) {
    size_t was = pk->plen;
    if (pk->plen < sizeof pk->path - 1) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(pk->path + pk->plen, sizeof pk->path - pk->plen, fmt, ap);
        va_end(ap);
        if (n > 0) pk->plen += (size_t)n < sizeof pk->path - pk->plen ? (size_t)n : sizeof pk->path - pk->plen - 1;
    }
    return was;
}

static void path_pop(pickler *pk, size_t was) {
    pk->plen = was;
    pk->path[was] = '\0';
}

/* BINPUT the object just written into the next memo slot; returns slot + 1. */
static uint32_t memo_put(pickler *pk) {
    uint32_t slot = pk->memo_next++;
    if (slot < 256) {
        unsigned char b[2] = {CT_PKL_BINPUT, (unsigned char)slot};
        emit(pk, b, 2);
    } else {
        op_u32(pk, CT_PKL_LONG_BINPUT, slot);
    }
    return slot + 1;
}

static void memo_get(pickler *pk, uint32_t memo) {
    uint32_t slot = memo - 1;
    if (slot < 256) {
        unsigned char b[2] = {CT_PKL_BINGET, (unsigned char)slot};
        emit(pk, b, 2);
    } else {
        op_u32(pk, CT_PKL_LONG_BINGET, slot);
    }
}

/* Python's save_long for protocol 2. */
static void put_int(pickler *pk, int64_t v) {
    if (v >= 0 && v <= 0xFF) {
        unsigned char b[2] = {CT_PKL_BININT1, (unsigned char)v};
        emit(pk, b, 2);
    } else if (v >= 0 && v <= 0xFFFF) {
        unsigned char b[3] = {CT_PKL_BININT2, (unsigned char)v, (unsigned char)(v >> 8)};
        emit(pk, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op_u32(pk, CT_PKL_BININT, (uint32_t)v);
    } else {
        /* LONG1: the shortest little-endian two's complement form. */
        unsigned char b[10];
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)(u >> (8 * i));
        int n = 8;
        while (n > 1 && ((b[1 + n] == 0x00 && !(b[n] & 0x80)) || (b[1 + n] == 0xFF && (b[n] & 0x80)))) n--;
        b[0] = CT_PKL_LONG1;
        b[1] = (unsigned char)n;
        emit(pk, b, 2 + (size_t)n);
    }
}

static void put_float(pickler *pk, double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    unsigned char b[9] = {CT_PKL_BINFLOAT};
    for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(u >> (56 - 8 * i));
    emit(pk, b, 9);
}

static int put_str(pickler *pk, const char *s) {
    size_t n = strlen(s);
    if (!cti_pth_utf8_valid((const unsigned char *)s, n))
        return fail(pk, CT_EINVAL, "string \"%.40s\" is not valid UTF-8 (Python strings are)", s);
    if (n > UINT32_MAX) return fail(pk, CT_EINVAL, "a string of %zu bytes is too long for pickle protocol 2", n);
    op_u32(pk, CT_PKL_BINUNICODE, (uint32_t)n);
    emit(pk, s, n);
    return 0;
}

/* GLOBAL module\nname\n the first time, BINGET afterwards. */
static void put_global(pickler *pk, const char *module, const char *name, uint32_t *memo) {
    if (*memo) {
        memo_get(pk, *memo);
        return;
    }
    op(pk, CT_PKL_GLOBAL);
    emit(pk, module, strlen(module));
    emit(pk, "\n", 1);
    emit(pk, name, strlen(name));
    emit(pk, "\n", 1);
    *memo = memo_put(pk);
}

/* A tuple of ints (a tensor's size or stride). */
static void put_int_tuple(pickler *pk, int n, const int64_t *v) {
    if (n == 0) {
        op(pk, CT_PKL_EMPTY_TUPLE);
        return;
    }
    if (n > 3) op(pk, CT_PKL_MARK);
    for (int i = 0; i < n; i++) put_int(pk, v[i]);
    op(pk, n > 3 ? CT_PKL_TUPLE : (unsigned char)(CT_PKL_TUPLE1 + n - 1));
}

/* ---- storages -------------------------------------------------------------------- */

static size_t slot_of(const void *id, size_t nslots) {
    uint64_t h = (uint64_t)(uintptr_t)id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (nslots - 1);
}

static int grow_slots(pickler *pk) {
    size_t n = pk->nslots ? pk->nslots * 2 : 64;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return fail(pk, CT_ENOMEM, "out of host memory");
    for (size_t i = 0; i < pk->res->nstorages; i++) {
        size_t s = slot_of(pk->res->storages[i].id, n);
        while (slots[s]) s = (s + 1) & (n - 1);
        slots[s] = i + 1;
    }
    free(pk->slots);
    pk->slots = slots;
    pk->nslots = n;
    return 0;
}

/* The storage of the tensor leaf described by ti, added at first use.
 * Sets *index. */
static int storage_of(pickler *pk, const ct_value *leaf, const cti_pth_tensor_info *ti, size_t *index) {
    ct_dtype dtype = ti->dtype;
    if ((pk->res->nstorages + 1) * 2 > pk->nslots && grow_slots(pk)) return ct_last_code();
    size_t s = slot_of(ti->storage_id, pk->nslots);
    for (; pk->slots[s]; s = (s + 1) & (pk->nslots - 1)) {
        cti_pth_storage *st = &pk->res->storages[pk->slots[s] - 1];
        if (st->id != ti->storage_id) continue;
        if (st->dtype != dtype)
            return fail(pk, CT_EDTYPE,
                        "a %s tensor shares storage %zu with an earlier %s tensor; a storage is saved "
                        "with one dtype (torch.save refuses this too)",
                        ct_dtype_name(dtype), pk->slots[s] - 1, ct_dtype_name(st->dtype));
        *index = pk->slots[s] - 1;
        return 0;
    }
    size_t esize = ct_dtype_size(dtype);
    if (esize == 0 || ti->storage_nbytes % esize != 0)
        return fail(pk, CT_EDTYPE, "its storage of %zu bytes is no whole number of %s elements", ti->storage_nbytes,
                    ct_dtype_name(dtype));
    if (pk->res->nstorages == pk->cap) {
        size_t cap = pk->cap ? pk->cap * 2 : 16;
        cti_pth_storage *p = realloc(pk->res->storages, cap * sizeof *p);
        if (!p) return fail(pk, CT_ENOMEM, "out of host memory");
        pk->res->storages = p;
        pk->cap = cap;
    }
    *index = pk->res->nstorages++;
    pk->res->storages[*index] = (cti_pth_storage){
        .id = ti->storage_id, .leaf = leaf, .dtype = dtype, .nbytes = ti->storage_nbytes, .device = ti->device};
    pk->slots[s] = *index + 1;
    return 0;
}

/* The location string of a device, memoized. */
static void put_location(pickler *pk, ct_device d) {
    for (size_t i = 0; i < pk->nlocs; i++) {
        if (pk->locs[i].device.type == d.type && pk->locs[i].device.index == d.index) {
            memo_get(pk, pk->locs[i].memo);
            return;
        }
    }
    char loc[32];
    ct_device_format(d, loc, sizeof loc);
    put_str(pk, loc);
    uint32_t memo = memo_put(pk);
    if (pk->nlocs < MAX_DEVICES) pk->locs[pk->nlocs++] = (location_memo){d, memo};
}

/* ---- values ------------------------------------------------------------------------ */

static int save_tensor(pickler *pk, const ct_value *leaf) {
    cti_pth_tensor_info ti;
    if (pk->tensors->describe(leaf, &ti)) return fail(pk, ct_last_code(), "%s", ct_last_error());
    ct_dtype dtype = ti.dtype;
    size_t cls = NCLASSES;
    for (size_t i = 0; i < NCLASSES; i++)
        if (storage_classes[i].dtype == dtype) cls = i;
    if (cls == NCLASSES) return fail(pk, CT_EDTYPE, "dtype %d has no PyTorch storage class", (int)dtype);
    int ndim = ti.ndim;
    if (ndim < 0 || ndim > CT_PTH_MAX_DIMS)
        return fail(pk, CT_ESHAPE, "%d dimensions (at most %d)", ndim, CT_PTH_MAX_DIMS);
    size_t index = 0;
    if (storage_of(pk, leaf, &ti, &index)) return ct_last_code();
    cti_pth_storage *st = &pk->res->storages[index];

    put_global(pk, "torch._utils", "_rebuild_tensor_v2", &pk->memo_rebuild);
    op(pk, CT_PKL_MARK);
    /* The persistent id: ('storage', torch.<Class>, key, location, numel). */
    op(pk, CT_PKL_MARK);
    if (pk->memo_storage) memo_get(pk, pk->memo_storage);
    else {
        put_str(pk, "storage");
        pk->memo_storage = memo_put(pk);
    }
    put_global(pk, "torch", storage_classes[cls].cls, &pk->memo_class[cls]);
    if (st->key_memo) memo_get(pk, st->key_memo);
    else {
        char key[24];
        snprintf(key, sizeof key, "%zu", index);
        put_str(pk, key);
        st->key_memo = memo_put(pk);
    }
    put_location(pk, ti.device);
    put_int(pk, (int64_t)(ti.storage_nbytes / ct_dtype_size(dtype)));
    op(pk, CT_PKL_TUPLE);
    op(pk, CT_PKL_BINPERSID);
    /* offset, size, stride, requires_grad, backward hooks */
    put_int(pk, ti.offset);
    put_int_tuple(pk, ndim, ti.size);
    put_int_tuple(pk, ndim, ti.stride);
    op(pk, ti.requires_grad ? CT_PKL_NEWTRUE : CT_PKL_NEWFALSE);
    put_global(pk, "collections", "OrderedDict", &pk->memo_odict);
    op(pk, CT_PKL_EMPTY_TUPLE);
    op(pk, CT_PKL_REDUCE);
    op(pk, CT_PKL_TUPLE);
    op(pk, CT_PKL_REDUCE);
    return 0;
}

static int save(pickler *pk, const ct_value *v);

/* Items of a list or tuple, from start on, each under its index in the path. */
static int save_items(pickler *pk, const ct_value *v, size_t start, size_t end) {
    for (size_t i = start; i < end; i++) {
        size_t was = path_push(pk, "[%zu]", i);
        int rc = save(pk, ct_value_list_get(v, i));
        path_pop(pk, was);
        if (rc) return rc;
    }
    return 0;
}

static int save_list(pickler *pk, const ct_value *v) {
    size_t n = ct_value_len(v);
    op(pk, CT_PKL_EMPTY_LIST);
    for (size_t at = 0; at < n; at += BATCH) {
        size_t end = n - at > BATCH ? at + BATCH : n;
        if (end - at > 1) op(pk, CT_PKL_MARK);
        if (save_items(pk, v, at, end)) return ct_last_code();
        op(pk, end - at > 1 ? CT_PKL_APPENDS : CT_PKL_APPEND);
    }
    return 0;
}

static int save_tuple(pickler *pk, const ct_value *v) {
    size_t n = ct_value_len(v);
    if (n == 0) {
        op(pk, CT_PKL_EMPTY_TUPLE);
        return 0;
    }
    if (n > 3) op(pk, CT_PKL_MARK);
    if (save_items(pk, v, 0, n)) return ct_last_code();
    op(pk, n > 3 ? CT_PKL_TUPLE : (unsigned char)(CT_PKL_TUPLE1 + n - 1));
    return 0;
}

static int save_dict(pickler *pk, const ct_value *v) {
    size_t n = ct_value_len(v);
    op(pk, CT_PKL_EMPTY_DICT);
    for (size_t at = 0; at < n; at += BATCH) {
        size_t end = n - at > BATCH ? at + BATCH : n;
        if (end - at > 1) op(pk, CT_PKL_MARK);
        for (size_t i = at; i < end; i++) {
            const char *skey = NULL;
            int64_t ikey = 0;
            const ct_value *item = ct_value_dict_at(v, i, &skey, &ikey);
            size_t was;
            if (skey) {
                if (put_str(pk, skey)) return ct_last_code();
                was = path_push(pk, "[\"%s\"]", skey);
            } else {
                put_int(pk, ikey);
                was = path_push(pk, "[%" PRId64 "]", ikey);
            }
            int rc = save(pk, item);
            path_pop(pk, was);
            if (rc) return rc;
        }
        op(pk, end - at > 1 ? CT_PKL_SETITEMS : CT_PKL_SETITEM);
    }
    return 0;
}

static int save(pickler *pk, const ct_value *v) {
    if (!v) return fail(pk, CT_EINVAL, "value is NULL");
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_NONE: op(pk, CT_PKL_NONE); return 0;
    case CT_VALUE_BOOL: {
        bool b = false;
        ct_value_get_bool(v, &b);
        op(pk, b ? CT_PKL_NEWTRUE : CT_PKL_NEWFALSE);
        return 0;
    }
    case CT_VALUE_INT: {
        int64_t i = 0;
        ct_value_get_int(v, &i);
        put_int(pk, i);
        return 0;
    }
    case CT_VALUE_FLOAT: {
        double d = 0;
        ct_value_get_float(v, &d);
        put_float(pk, d);
        return 0;
    }
    case CT_VALUE_STR: return put_str(pk, ct_value_get_str(v));
    case CT_VALUE_TENSOR: return save_tensor(pk, v);
    case CT_VALUE_LIST: return save_list(pk, v);
    case CT_VALUE_TUPLE: return save_tuple(pk, v);
    case CT_VALUE_DICT: return save_dict(pk, v);
    }
    return fail(pk, CT_EINVAL, "unknown value kind %d", (int)ct_value_kind_of(v));
}

int cti_pth_pickle(const ct_value *v, const cti_pth_tensors *tensors, const char *what, cti_pth_pickled *out) {
    memset(out, 0, sizeof *out);
    pickler pk = {.out = &out->pkl, .res = out, .tensors = tensors, .what = what};
    unsigned char proto[2] = {CT_PKL_PROTO, 2};
    emit(&pk, proto, 2);
    int rc = save(&pk, v);
    op(&pk, CT_PKL_STOP);
    if (rc == 0 && out->pkl.oom) rc = fail(&pk, CT_ENOMEM, "out of host memory for the pickle");
    free(pk.slots);
    if (rc) cti_pth_pickled_free(out);
    return rc;
}

void cti_pth_pickled_free(cti_pth_pickled *p) {
    cti_pth_buf_free(&p->pkl);
    free(p->storages);
    p->storages = NULL;
    p->nstorages = 0;
}
