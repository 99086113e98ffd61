/* src/dist/value_wire.c — ct_value trees as bytes, and between ranks (see
 * value_wire.h).
 *
 * Encoding appends to one growable buffer; a tensor's elements are read
 * straight into their place in it. Decoding walks a cursor that refuses any
 * read past the end, so a truncated or garbled buffer from another rank
 * becomes an error naming the offset, never a crash or a huge allocation.
 */
#include "dist/value_wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/dist.h"
#include "dist/agree.h"

enum {
    WIRE_MAX_DEPTH = 1000, /* far beyond any state dict; bounds the recursion */
    WIRE_MAX_DIMS = 64,
    KEY_STR = 0,
    KEY_INT = 1,
};

static const unsigned char wire_magic[4] = {'C', 'T', 'V', '1'};

/* ---- encoding ----------------------------------------------------------------- */

typedef struct {
    unsigned char *data;
    size_t len, cap;
} wbuf;

/* Room for n more bytes at the end; returns where they go, or NULL. */
static unsigned char *reserve(wbuf *b, size_t n) {
    if (n > SIZE_MAX - b->len) {
        ct_set_error(CT_ENOMEM, "cti_value_to_bytes: encoding larger than memory");
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->len + n) ncap = ncap > SIZE_MAX / 2 ? b->len + n : ncap * 2;
        unsigned char *p = realloc(b->data, ncap);
        if (!p) {
            ct_set_error(CT_ENOMEM, "cti_value_to_bytes: out of host memory (%zu bytes)", ncap);
            return NULL;
        }
        b->data = p;
        b->cap = ncap;
    }
    unsigned char *at = b->data + b->len;
    b->len += n;
    return at;
}

static int put_bytes(wbuf *b, const void *src, size_t n) {
    unsigned char *at = reserve(b, n);
    if (!at) return ct_last_code();
    if (n) memcpy(at, src, n);
    return 0;
}

static int put_u8(wbuf *b, unsigned v) {
    unsigned char c = (unsigned char)v;
    return put_bytes(b, &c, 1);
}

static int put_u64(wbuf *b, uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(v >> (8 * i));
    return put_bytes(b, le, 8);
}

static int put_str(wbuf *b, const char *s) {
    size_t n = strlen(s);
    int rc = put_u64(b, (uint64_t)n);
    return rc ? rc : put_bytes(b, s, n);
}

static int put_tensor(wbuf *b, const ct_tensor *t) {
    int64_t shape[WIRE_MAX_DIMS];
    int ndim = ct_shape(t, shape, WIRE_MAX_DIMS);
    if (ndim < 0) return ct_last_code() ? ct_last_code() : ct_set_error(CT_EINVAL, "cti_value_to_bytes: bad tensor");
    if (ndim > WIRE_MAX_DIMS)
        return ct_set_error(CT_ESHAPE, "cti_value_to_bytes: tensor has %d dims (at most %d)", ndim,
                            WIRE_MAX_DIMS);
    ct_dtype dtype = ct_dtype_of(t);
    int rc = put_u8(b, (unsigned)dtype);
    if (!rc) rc = put_u8(b, (unsigned)ndim);
    for (int i = 0; !rc && i < ndim; i++) rc = put_u64(b, (uint64_t)shape[i]);
    if (rc) return rc;
    size_t nbytes = (size_t)ct_numel(t) * ct_dtype_size(dtype);
    if (nbytes == 0) return 0;
    unsigned char *at = reserve(b, nbytes);
    if (!at) return ct_last_code();
    return ct_read(t, at, nbytes); /* any device, any strides: C order on the host */
}

static int put_value(wbuf *b, const ct_value *v, int depth) {
    if (!v) return ct_set_error(CT_EINVAL, "cti_value_to_bytes: value is NULL");
    if (depth > WIRE_MAX_DEPTH)
        return ct_set_error(CT_EINVAL, "cti_value_to_bytes: nested deeper than %d", WIRE_MAX_DEPTH);
    ct_value_kind kind = ct_value_kind_of(v);
    int rc = put_u8(b, (unsigned)kind);
    if (rc) return rc;
    switch (kind) {
    case CT_VALUE_NONE: return 0;
    case CT_VALUE_BOOL: {
        bool x = false;
        ct_value_get_bool(v, &x);
        return put_u8(b, x ? 1 : 0);
    }
    case CT_VALUE_INT: {
        int64_t x = 0;
        ct_value_get_int(v, &x);
        return put_u64(b, (uint64_t)x);
    }
    case CT_VALUE_FLOAT: {
        double x = 0;
        uint64_t bits;
        ct_value_get_float(v, &x);
        memcpy(&bits, &x, sizeof bits);
        return put_u64(b, bits);
    }
    case CT_VALUE_STR: return put_str(b, ct_value_get_str(v));
    case CT_VALUE_TENSOR: return put_tensor(b, ct_value_get_tensor(v));
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        size_t n = ct_value_len(v);
        rc = put_u64(b, (uint64_t)n);
        for (size_t i = 0; !rc && i < n; i++) rc = put_value(b, ct_value_list_get(v, i), depth + 1);
        return rc;
    }
    case CT_VALUE_DICT: {
        size_t n = ct_value_len(v);
        rc = put_u64(b, (uint64_t)n);
        for (size_t i = 0; !rc && i < n; i++) {
            const char *skey = NULL;
            int64_t ikey = 0;
            const ct_value *item = ct_value_dict_at(v, i, &skey, &ikey);
            rc = put_u8(b, skey ? KEY_STR : KEY_INT);
            if (!rc) rc = skey ? put_str(b, skey) : put_u64(b, (uint64_t)ikey);
            if (!rc) rc = put_value(b, item, depth + 1);
        }
        return rc;
    }
    }
    return ct_set_error(CT_EINVAL, "cti_value_to_bytes: unknown value kind %d", (int)kind);
}

int cti_value_to_bytes(const ct_value *v, void **out, size_t *len) {
    if (!out || !len) return ct_set_error(CT_EINVAL, "cti_value_to_bytes: out or len is NULL");
    *out = NULL;
    *len = 0;
    wbuf b = {0};
    int rc = put_bytes(&b, wire_magic, sizeof wire_magic);
    if (!rc) rc = put_value(&b, v, 0);
    if (rc) {
        free(b.data);
        return rc;
    }
    *out = b.data;
    *len = b.len;
    return 0;
}

/* ---- decoding ------------------------------------------------------------------ */

typedef struct {
    const unsigned char *p;
    size_t len, off;
} rbuf;

/* Records CT_EFORMAT "cti_value_from_bytes: <what> at offset N". */
static int malformed(const rbuf *r, const char *what) {
    return ct_set_error(CT_EFORMAT, "cti_value_from_bytes: %s at offset %zu (of %zu bytes)", what,
                        r->off, r->len);
}

static size_t left(const rbuf *r) { return r->len - r->off; }

/* The next n bytes (the cursor moves past them), or NULL when fewer are left. */
static const unsigned char *take(rbuf *r, size_t n, const char *what) {
    if (n > left(r)) {
        malformed(r, what);
        return NULL;
    }
    const unsigned char *at = r->p + r->off;
    r->off += n;
    return at;
}

static int get_u8(rbuf *r, unsigned *out, const char *what) {
    const unsigned char *at = take(r, 1, what);
    if (!at) return CT_EFORMAT;
    *out = at[0];
    return 0;
}

static int get_u64(rbuf *r, uint64_t *out, const char *what) {
    const unsigned char *at = take(r, 8, what);
    if (!at) return CT_EFORMAT;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)at[i] << (8 * i);
    *out = v;
    return 0;
}

/* A count of items that each take at least `min_size` bytes: more than the
 * bytes left can hold is malformed, whatever follows. */
static int get_count(rbuf *r, size_t min_size, size_t *out, const char *what) {
    size_t at = r->off;
    uint64_t n = 0;
    if (get_u64(r, &n, what)) return CT_EFORMAT;
    if (n > left(r) / min_size) {
        r->off = at;
        return malformed(r, "count larger than the bytes left");
    }
    *out = (size_t)n;
    return 0;
}

/* A NUL-terminated malloc'd copy of a length-prefixed string, or NULL. */
static char *get_str(rbuf *r, const char *what) {
    size_t at = r->off, n = 0;
    if (get_count(r, 1, &n, what)) return NULL;
    const unsigned char *s = take(r, n, what);
    if (!s) return NULL;
    if (memchr(s, 0, n)) {
        r->off = at;
        malformed(r, "string holds a NUL byte");
        return NULL;
    }
    char *c = malloc(n + 1);
    if (!c) {
        ct_set_error(CT_ENOMEM, "cti_value_from_bytes: out of host memory");
        return NULL;
    }
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static ct_value *get_tensor(rbuf *r) {
    size_t at = r->off;
    unsigned dtype = 0, ndim = 0;
    if (get_u8(r, &dtype, "tensor dtype cut short") || get_u8(r, &ndim, "tensor ndim cut short"))
        return NULL;
    if (dtype > (unsigned)CT_I16) {
        r->off = at;
        malformed(r, "unknown tensor dtype");
        return NULL;
    }
    if (ndim > WIRE_MAX_DIMS) {
        r->off = at + 1;
        malformed(r, "too many tensor dims");
        return NULL;
    }
    int64_t shape[WIRE_MAX_DIMS];
    /* Both the element count and the extent (zero sizes read as one) must fit
     * an int64, so that libtorch's strides cannot overflow either. */
    uint64_t numel = 1, extent = 1;
    for (unsigned i = 0; i < ndim; i++) {
        size_t dim_at = r->off;
        uint64_t d = 0;
        if (get_u64(r, &d, "tensor size cut short")) return NULL;
        uint64_t e = d ? d : 1;
        if (d > INT64_MAX || extent > (uint64_t)INT64_MAX / e) {
            r->off = dim_at;
            malformed(r, "tensor size out of range");
            return NULL;
        }
        extent *= e;
        numel = d ? numel * d : 0;
        shape[i] = (int64_t)d;
    }
    size_t esize = ct_dtype_size((ct_dtype)dtype);
    if (numel > left(r) / esize) {
        malformed(r, "tensor data cut short");
        return NULL;
    }
    size_t nbytes = (size_t)numel * esize;
    const unsigned char *data = take(r, nbytes, "tensor data cut short");
    if (!data) return NULL;
    if (dtype == CT_BOOL) {
        for (size_t i = 0; i < nbytes; i++) {
            if (data[i] > 1) {
                r->off -= nbytes - i;
                malformed(r, "bool tensor element neither 0 nor 1");
                return NULL;
            }
        }
    }
    /* ct_from_data copies (memcpy): the bytes need no alignment. */
    return ct_value_tensor(ct_from_data(data, (int)ndim, shape, (ct_dtype)dtype));
}

static ct_value *get_value(rbuf *r, int depth);

static ct_value *get_seq(rbuf *r, ct_value *seq, int depth) {
    size_t n = 0;
    if (!seq || get_count(r, 1, &n, "item count cut short")) {
        ct_value_free(seq);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        ct_value *item = get_value(r, depth + 1);
        if (!item || ct_value_list_append(seq, item) != 0) {
            ct_value_free(seq);
            return NULL;
        }
    }
    return seq;
}

static ct_value *get_dict(rbuf *r, int depth) {
    ct_value *dict = ct_value_dict();
    size_t n = 0;
    /* An entry is at least a key kind, a key (8 bytes) and a value kind. */
    if (!dict || get_count(r, 10, &n, "entry count cut short")) {
        ct_value_free(dict);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = r->off;
        unsigned key_kind = 0;
        char *skey = NULL;
        uint64_t ikey = 0;
        int rc = get_u8(r, &key_kind, "dict key kind cut short");
        if (!rc && key_kind == KEY_STR) rc = (skey = get_str(r, "dict key cut short")) ? 0 : ct_last_code();
        else if (!rc && key_kind == KEY_INT) rc = get_u64(r, &ikey, "dict key cut short");
        else if (!rc) {
            r->off = at;
            rc = malformed(r, "unknown dict key kind");
        }
        ct_value *item = rc ? NULL : get_value(r, depth + 1);
        if (item) {
            rc = skey ? ct_value_dict_set(dict, skey, item) : ct_value_dict_set_int(dict, (int64_t)ikey, item);
            if (!rc && ct_value_len(dict) != i + 1) {
                r->off = at;
                rc = malformed(r, "duplicate dict key");
            }
        }
        free(skey);
        if (!item || rc) {
            ct_value_free(dict);
            return NULL;
        }
    }
    return dict;
}

static ct_value *get_value(rbuf *r, int depth) {
    if (depth > WIRE_MAX_DEPTH) {
        malformed(r, "values nested too deeply");
        return NULL;
    }
    size_t at = r->off;
    unsigned kind = 0;
    if (get_u8(r, &kind, "value kind cut short")) return NULL;
    switch (kind) {
    case CT_VALUE_NONE: return ct_value_none();
    case CT_VALUE_BOOL: {
        unsigned x = 0;
        if (get_u8(r, &x, "bool cut short")) return NULL;
        if (x > 1) {
            r->off--;
            malformed(r, "bool neither 0 nor 1");
            return NULL;
        }
        return ct_value_bool(x == 1);
    }
    case CT_VALUE_INT: {
        uint64_t x = 0;
        return get_u64(r, &x, "int cut short") ? NULL : ct_value_int((int64_t)x);
    }
    case CT_VALUE_FLOAT: {
        uint64_t bits = 0;
        double x;
        if (get_u64(r, &bits, "float cut short")) return NULL;
        memcpy(&x, &bits, sizeof x);
        return ct_value_float(x);
    }
    case CT_VALUE_STR: {
        char *s = get_str(r, "str cut short");
        if (!s) return NULL;
        ct_value *v = ct_value_str(s);
        free(s);
        return v;
    }
    case CT_VALUE_TENSOR: return get_tensor(r);
    case CT_VALUE_LIST: return get_seq(r, ct_value_list(), depth);
    case CT_VALUE_TUPLE: return get_seq(r, ct_value_tuple(), depth);
    case CT_VALUE_DICT: return get_dict(r, depth);
    default: break;
    }
    r->off = at;
    malformed(r, "unknown value kind");
    return NULL;
}

ct_value *cti_value_from_bytes(const void *buf, size_t len) {
    rbuf r = {buf, len, 0};
    if (!buf && len) {
        ct_set_error(CT_EINVAL, "cti_value_from_bytes: buf is NULL");
        return NULL;
    }
    const unsigned char *magic = take(&r, sizeof wire_magic, "magic cut short");
    if (!magic) return NULL;
    if (memcmp(magic, wire_magic, sizeof wire_magic) != 0) {
        r.off = 0;
        malformed(&r, "not a ctrial value (bad magic)");
        return NULL;
    }
    ct_value *v = get_value(&r, 0);
    if (v && r.off != r.len) {
        malformed(&r, "trailing bytes after the value");
        ct_value_free(v);
        return NULL;
    }
    return v;
}

/* ---- between ranks -------------------------------------------------------------- */

ct_value *cti_value_broadcast(const ct_value *v, int root) {
    int rank = ct_dist_rank(), size = ct_dist_size();
    if (root < 0 || root >= size) {
        ct_set_error(CT_EINVAL, "cti_value_broadcast: root %d of %d ranks", root, size);
        return NULL;
    }
    if (size == 1) {
        if (!v && ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "cti_value_broadcast: value is NULL");
        return v ? ct_value_copy(v, false) : NULL;
    }
    /* Root sends its length, or -1 and then its error (code and message), so
     * that a failure there (no value, or none encodable) fails every rank
     * alike, with root's words. */
    void *bytes = NULL;
    size_t len = 0;
    struct {
        int64_t code;
        char msg[1024];
    } why = {0, ""};
    int64_t n = 0;
    if (rank == root) {
        int rc = v ? cti_value_to_bytes(v, &bytes, &len)
                   : ct_last_code() != CT_OK ? ct_last_code() : ct_set_error(CT_EINVAL, "no value to send");
        n = rc == CT_OK ? (int64_t)len : -1;
        if (rc != CT_OK) {
            why.code = rc;
            snprintf(why.msg, sizeof why.msg, "%s", ct_last_error());
        }
    }
    int rc = ct_dist_broadcast_bytes(&n, sizeof n, root);
    if (rc == CT_OK && n < 0) {
        rc = ct_dist_broadcast_bytes(&why, sizeof why, root);
        if (rc == CT_OK) rc = ct_set_error((int)why.code, "%s", why.msg);
    }
    if (rc == CT_OK && rank != root && !(bytes = malloc(n ? (size_t)n : 1)))
        rc = ct_set_error(CT_ENOMEM, "cti_value_broadcast: out of host memory for %lld bytes", (long long)n);
    /* Every rank has its buffer before the bytes move (a rank out of memory
     * must not leave the others in the broadcast). */
    if (n >= 0) rc = cti_ranks_agree(rc);
    if (rc == CT_OK) rc = ct_dist_broadcast_bytes(bytes, (size_t)n, root);
    /* Root decodes its own bytes too: every rank ends with the same tree,
     * or every rank fails. */
    ct_value *out = rc == CT_OK ? cti_value_from_bytes(bytes, (size_t)n) : NULL;
    free(bytes);
    if (n >= 0 && cti_ranks_agree(out ? CT_OK : ct_last_code()) != CT_OK) {
        ct_value_free(out);
        out = NULL;
    }
    return out;
}

int cti_value_gather(const ct_value *v, int root, ct_value **out) {
    *out = NULL;
    int rank = ct_dist_rank(), size = ct_dist_size();
    if (root < 0 || root >= size) return ct_set_error(CT_EINVAL, "cti_value_gather: root %d of %d ranks", root, size);
    if (size == 1) {
        ct_value *list = ct_value_list();
        if (list && ct_value_list_append(list, v ? ct_value_copy(v, false) : NULL) != CT_OK) {
            ct_value_free(list);
            list = NULL;
        }
        *out = list;
        return list ? CT_OK : ct_last_code();
    }
    void *mine = NULL, *all = NULL;
    size_t len = 0;
    size_t *lens = calloc((size_t)size, sizeof *lens);
    int rc = !v ? (ct_last_code() != CT_OK ? ct_last_code() : ct_set_error(CT_EINVAL, "cti_value_gather: value is NULL"))
             : lens ? cti_value_to_bytes(v, &mine, &len)
                    : ct_set_error(CT_ENOMEM, "cti_value_gather: out of host memory");
    /* A rank that failed still takes part, sending nothing, so no rank waits;
     * then every rank learns the lowest failing rank. */
    size_t none = 0;
    int grc = ct_dist_gather_bytes(mine, rc == CT_OK ? len : 0, root, &all, lens ? lens : &none);
    free(mine);
    rc = cti_ranks_agree(rc);
    if (rc == CT_OK) rc = grc;
    ct_value *list = NULL;
    if (rank == root && rc == CT_OK) {
        list = ct_value_list();
        size_t at = 0;
        for (int k = 0; list && k < size; at += lens[k], k++) {
            ct_value *item = cti_value_from_bytes((const char *)all + at, lens[k]);
            if (!item) {
                rc = ct_set_error(CT_EDIST, "the value from rank %d: %s", k, ct_last_error());
                break;
            }
            if (ct_value_list_append(list, item) != CT_OK) break;
        }
        if (!list || rc != CT_OK || ct_value_len(list) != (size_t)size) {
            if (rc == CT_OK) rc = ct_last_code() != CT_OK ? ct_last_code() : CT_ENOMEM;
            ct_value_free(list);
            list = NULL;
        }
    }
    free(all);
    free(lens);
    /* Root's verdict on decoding reaches every rank. */
    int64_t ok = rank == root ? rc == CT_OK : 1;
    if (ct_dist_broadcast_bytes(&ok, sizeof ok, root) != CT_OK && rc == CT_OK) rc = ct_last_code();
    if (rc == CT_OK && !ok) rc = ct_set_error(CT_EDIST, "rank %d could not decode the values it gathered", root);
    if (rc == CT_OK) *out = list;
    else ct_value_free(list);
    return rc;
}

/* ---- the public object collectives (ctrial/dist.h) ------------------------------ */

ct_value *ct_dist_broadcast_value(const ct_value *v, int root) { return cti_value_broadcast(v, root); }

int ct_dist_gather_value(const ct_value *v, int root, ct_value **out) {
    if (!out) return ct_set_error(CT_EINVAL, "ct_dist_gather_value: out is NULL");
    return cti_value_gather(v, root, out);
}

/* Gathered on rank 0, then rank 0's list (or its failure) to every rank. */
ct_value *ct_dist_allgather_value(const ct_value *v) {
    ct_value *on_root = NULL;
    int rc = cti_value_gather(v, 0, &on_root);
    if (rc != CT_OK) return NULL; /* the same status on every rank */
    ct_value *all = cti_value_broadcast(on_root, 0);
    ct_value_free(on_root);
    return all;
}
