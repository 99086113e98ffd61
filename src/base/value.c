/* src/base/value.c — nested values shaped like Python objects (see value.h).
 *
 * A value is a tagged union. Lists and tuples are growable arrays of owned
 * children; dicts are growable arrays of (key, child) entries kept in
 * insertion order, as Python's dicts are. Lookup is a linear scan: state
 * dicts hold tens to a few thousand entries and are walked far more often
 * than searched, so a hash index would buy little and cost clarity.
 */
#include "base/value_tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *skey;   /* string key, or NULL for an integer key */
    int64_t ikey; /* integer key (meaningful when skey is NULL) */
    ct_value *val;
} dict_entry;

struct ct_value {
    ct_value_kind kind;
    union {
        bool b;
        int64_t i;
        double d;
        char *s;
        struct {
            ct_tensor *t;
            const cti_value_tensor_ops *ops; /* base/value_tensor.h */
        } tensor;
        struct {
            ct_value **items;
            size_t len, cap;
        } seq; /* list and tuple */
        struct {
            dict_entry *items; /* in insertion order */
            size_t len, cap;
            size_t *slots; /* past INDEX_FROM entries: a hash table of item index + 1 (0: empty) */
            size_t n_slots; /* a power of two, at least twice len */
        } dict;
    } u;
};

/* ---- helpers ------------------------------------------------------------ */

static char *copy_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static ct_value *new_value(ct_value_kind kind) {
    ct_value *v = calloc(1, sizeof *v);
    if (!v) {
        ct_set_error(CT_ENOMEM, "ct_value: out of host memory");
        return NULL;
    }
    v->kind = kind;
    return v;
}

/* Grows an array of `size`-byte elements so that one more fits. */
static int grow(void **items, size_t *cap, size_t len, size_t size) {
    if (len < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 4;
    void *p = realloc(*items, ncap * size);
    if (!p) return ct_set_error(CT_ENOMEM, "ct_value: out of host memory");
    *items = p;
    *cap = ncap;
    return 0;
}

static bool is_seq(const ct_value *v) {
    return v && (v->kind == CT_VALUE_LIST || v->kind == CT_VALUE_TUPLE);
}

/* A stolen item that was never given must still be checked for NULL the way
 * tensor ops check inputs: keep an earlier failure (the constructor's) rather
 * than hide it behind "item is NULL". */
static int null_item(const char *fn) {
    if (ct_last_code() != CT_OK) return ct_last_code();
    return ct_set_error(CT_EINVAL, "%s: item is NULL", fn);
}

/* ---- constructors --------------------------------------------------------- */

ct_value *ct_value_none(void) { return new_value(CT_VALUE_NONE); }

ct_value *ct_value_bool(bool b) {
    ct_value *v = new_value(CT_VALUE_BOOL);
    if (v) v->u.b = b;
    return v;
}

ct_value *ct_value_int(int64_t i) {
    ct_value *v = new_value(CT_VALUE_INT);
    if (v) v->u.i = i;
    return v;
}

ct_value *ct_value_float(double d) {
    ct_value *v = new_value(CT_VALUE_FLOAT);
    if (v) v->u.d = d;
    return v;
}

ct_value *ct_value_str(const char *s) {
    if (!s) {
        ct_set_error(CT_EINVAL, "ct_value_str: s is NULL");
        return NULL;
    }
    ct_value *v = new_value(CT_VALUE_STR);
    if (!v) return NULL;
    v->u.s = copy_str(s);
    if (!v->u.s) {
        free(v);
        ct_set_error(CT_ENOMEM, "ct_value_str: out of host memory");
        return NULL;
    }
    return v;
}

ct_value *cti_value_tensor_leaf(ct_tensor *t, const cti_value_tensor_ops *ops) {
    if (!t) {
        null_item("ct_value_tensor");
        return NULL;
    }
    ct_value *v = new_value(CT_VALUE_TENSOR);
    if (!v) {
        ops->free(t); /* stolen, also on failure */
        return NULL;
    }
    v->u.tensor.t = t;
    v->u.tensor.ops = ops;
    return v;
}

int64_t cti_value_tensor_doubles(const ct_value *v, double **out, bool *is_array) {
    if (!v || v->kind != CT_VALUE_TENSOR) return ct_set_error(CT_EINVAL, "cti_value_tensor_doubles: not a tensor");
    return v->u.tensor.ops->to_doubles(v->u.tensor.t, out, is_array);
}

ct_value *ct_value_list(void) { return new_value(CT_VALUE_LIST); }
ct_value *ct_value_tuple(void) { return new_value(CT_VALUE_TUPLE); }
ct_value *ct_value_dict(void) { return new_value(CT_VALUE_DICT); }

void ct_value_free(ct_value *v) {
    if (!v) return;
    switch (v->kind) {
    case CT_VALUE_STR: free(v->u.s); break;
    case CT_VALUE_TENSOR: v->u.tensor.ops->free(v->u.tensor.t); break;
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        for (size_t i = 0; i < v->u.seq.len; i++) ct_value_free(v->u.seq.items[i]);
        free(v->u.seq.items);
        break;
    case CT_VALUE_DICT:
        for (size_t i = 0; i < v->u.dict.len; i++) {
            free(v->u.dict.items[i].skey);
            ct_value_free(v->u.dict.items[i].val);
        }
        free(v->u.dict.items);
        free(v->u.dict.slots);
        break;
    default: break;
    }
    free(v);
}

/* ---- kinds and scalars ------------------------------------------------------ */

ct_value_kind ct_value_kind_of(const ct_value *v) { return v ? v->kind : CT_VALUE_NONE; }

const char *ct_value_kind_name(ct_value_kind k) {
    static const char *names[] = {"none", "bool",   "int",   "float", "str",
                                  "tensor", "list", "tuple", "dict"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "unknown";
}

/* Records "fn: expected <kind>, got <kind>" and returns CT_EFORMAT. */
static int wrong_kind(const char *fn, const char *want, const ct_value *v) {
    if (!v) return ct_set_error(CT_EINVAL, "%s: value is NULL", fn);
    return ct_set_error(CT_EFORMAT, "%s: expected %s, got %s", fn, want,
                        ct_value_kind_name(v->kind));
}

int ct_value_get_bool(const ct_value *v, bool *out) {
    if (!v || v->kind != CT_VALUE_BOOL) return wrong_kind(__func__, "bool", v);
    if (out) *out = v->u.b;
    return 0;
}

int ct_value_get_int(const ct_value *v, int64_t *out) {
    if (!v || v->kind != CT_VALUE_INT) return wrong_kind(__func__, "int", v);
    if (out) *out = v->u.i;
    return 0;
}

int ct_value_get_float(const ct_value *v, double *out) {
    if (v && v->kind == CT_VALUE_INT) {
        if (out) *out = (double)v->u.i;
        return 0;
    }
    if (!v || v->kind != CT_VALUE_FLOAT) return wrong_kind(__func__, "float", v);
    if (out) *out = v->u.d;
    return 0;
}

const char *ct_value_get_str(const ct_value *v) {
    if (!v || v->kind != CT_VALUE_STR) {
        wrong_kind(__func__, "str", v);
        return NULL;
    }
    return v->u.s;
}

ct_tensor *ct_value_get_tensor(const ct_value *v) {
    if (!v || v->kind != CT_VALUE_TENSOR) {
        wrong_kind(__func__, "tensor", v);
        return NULL;
    }
    return v->u.tensor.t;
}

/* ---- lists and tuples --------------------------------------------------------- */

size_t ct_value_len(const ct_value *v) {
    if (is_seq(v)) return v->u.seq.len;
    if (v && v->kind == CT_VALUE_DICT) return v->u.dict.len;
    return 0;
}

int ct_value_list_append(ct_value *list, ct_value *item) {
    if (!item) return null_item(__func__);
    int rc = 0;
    if (!is_seq(list)) rc = wrong_kind(__func__, "list or tuple", list);
    else if (item == list) rc = ct_set_error(CT_EINVAL, "%s: cannot append a list to itself", __func__);
    else rc = grow((void **)&list->u.seq.items, &list->u.seq.cap, list->u.seq.len, sizeof(ct_value *));
    if (rc) {
        if (item != list) ct_value_free(item);
        return rc;
    }
    list->u.seq.items[list->u.seq.len++] = item;
    return 0;
}

ct_value *ct_value_list_get(const ct_value *list, size_t i) {
    if (!is_seq(list)) {
        wrong_kind(__func__, "list or tuple", list);
        return NULL;
    }
    if (i >= list->u.seq.len) {
        ct_set_error(CT_EINDEX, "%s: index %zu out of range (length %zu)", __func__, i,
                     list->u.seq.len);
        return NULL;
    }
    return list->u.seq.items[i];
}

/* ---- dicts ------------------------------------------------------------------- */

/* A small dict is searched in order; past INDEX_FROM entries it keeps a
 * hash table of its keys, so that building one of n keys (a config of
 * 100,000 hyperparameters) is not n^2 / 2 string comparisons. */
#define INDEX_FROM 32

static bool same_key(const dict_entry *e, const char *skey, int64_t ikey) {
    return skey ? e->skey && strcmp(e->skey, skey) == 0 : !e->skey && e->ikey == ikey;
}

static size_t key_hash(const char *skey, int64_t ikey) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    if (skey)
        for (const unsigned char *p = (const unsigned char *)skey; *p; p++) h = (h ^ *p) * 1099511628211u;
    else
        h = ((uint64_t)ikey ^ 0x9e3779b97f4a7c15u) * 1099511628211u;
    return (size_t)(h ^ h >> 29);
}

/* The slot that holds this key, or the empty one where it would go. */
static size_t *slot_of(const ct_value *dict, const char *skey, int64_t ikey) {
    size_t mask = dict->u.dict.n_slots - 1, i = key_hash(skey, ikey) & mask;
    while (dict->u.dict.slots[i] && !same_key(&dict->u.dict.items[dict->u.dict.slots[i] - 1], skey, ikey))
        i = (i + 1) & mask;
    return &dict->u.dict.slots[i];
}

/* Index of the entry with this key (skey for a string key, else ikey), or -1. */
static long find(const ct_value *dict, const char *skey, int64_t ikey) {
    if (dict->u.dict.slots) {
        size_t at = *slot_of(dict, skey, ikey);
        return at ? (long)at - 1 : -1;
    }
    for (size_t i = 0; i < dict->u.dict.len; i++)
        if (same_key(&dict->u.dict.items[i], skey, ikey)) return (long)i;
    return -1;
}

/* After an append: the new last entry into the table, which is made, or
 * doubled, when it would be more than half full. Without memory for it the
 * dict goes on unindexed (find searches in order). */
static void index_last(ct_value *dict) {
    size_t len = dict->u.dict.len;
    if (len < INDEX_FROM) return;
    if (2 * len > dict->u.dict.n_slots) {
        size_t n = 64;
        while (n < 4 * len) n *= 2;
        size_t *slots = calloc(n, sizeof *slots);
        free(dict->u.dict.slots);
        dict->u.dict.slots = slots;
        dict->u.dict.n_slots = slots ? n : 0;
        for (size_t i = 0; slots && i < len; i++) {
            const dict_entry *e = &dict->u.dict.items[i];
            *slot_of(dict, e->skey, e->ikey) = i + 1;
        }
        return;
    }
    const dict_entry *e = &dict->u.dict.items[len - 1];
    *slot_of(dict, e->skey, e->ikey) = len;
}

/* Shared by the string and integer setters: replaces in place or appends. */
static int dict_set(const char *fn, ct_value *dict, const char *skey, int64_t ikey,
                    ct_value *item) {
    if (!item) return null_item(fn);
    int rc = 0;
    if (!dict || dict->kind != CT_VALUE_DICT) rc = wrong_kind(fn, "dict", dict);
    else if (item == dict) rc = ct_set_error(CT_EINVAL, "%s: cannot insert a dict into itself", fn);
    if (rc) {
        if (item != dict) ct_value_free(item);
        return rc;
    }
    long at = find(dict, skey, ikey);
    if (at >= 0) {
        ct_value_free(dict->u.dict.items[at].val);
        dict->u.dict.items[at].val = item;
        return 0;
    }
    char *kcopy = NULL;
    if (skey && !(kcopy = copy_str(skey))) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    if (!rc) rc = grow((void **)&dict->u.dict.items, &dict->u.dict.cap, dict->u.dict.len, sizeof(dict_entry));
    if (rc) {
        free(kcopy);
        ct_value_free(item);
        return rc;
    }
    dict_entry *e = &dict->u.dict.items[dict->u.dict.len++];
    e->skey = kcopy;
    e->ikey = skey ? 0 : ikey;
    e->val = item;
    index_last(dict);
    return 0;
}

int ct_value_dict_set(ct_value *dict, const char *key, ct_value *item) {
    if (!key) {
        if (item != dict) ct_value_free(item);
        return ct_set_error(CT_EINVAL, "%s: key is NULL", __func__);
    }
    return dict_set(__func__, dict, key, 0, item);
}

int ct_value_dict_set_int(ct_value *dict, int64_t key, ct_value *item) {
    return dict_set(__func__, dict, NULL, key, item);
}

/* A missing key is an answer, not a failure: no error is recorded for it. */
ct_value *ct_value_dict_get(const ct_value *dict, const char *key) {
    if (!dict || dict->kind != CT_VALUE_DICT) {
        wrong_kind(__func__, "dict", dict);
        return NULL;
    }
    if (!key) return NULL;
    long at = find(dict, key, 0);
    return at >= 0 ? dict->u.dict.items[at].val : NULL;
}

ct_value *ct_value_dict_get_int(const ct_value *dict, int64_t key) {
    if (!dict || dict->kind != CT_VALUE_DICT) {
        wrong_kind(__func__, "dict", dict);
        return NULL;
    }
    long at = find(dict, NULL, key);
    return at >= 0 ? dict->u.dict.items[at].val : NULL;
}

ct_value *ct_value_dict_at(const ct_value *dict, size_t i, const char **skey, int64_t *ikey) {
    if (!dict || dict->kind != CT_VALUE_DICT) {
        wrong_kind(__func__, "dict", dict);
        return NULL;
    }
    if (i >= dict->u.dict.len) {
        ct_set_error(CT_EINDEX, "%s: index %zu out of range (length %zu)", __func__, i,
                     dict->u.dict.len);
        return NULL;
    }
    const dict_entry *e = &dict->u.dict.items[i];
    if (skey) *skey = e->skey;
    if (ikey) *ikey = e->skey ? 0 : e->ikey;
    return e->val;
}

/* ---- copy -------------------------------------------------------------------- */

ct_value *ct_value_copy(const ct_value *v, bool clone_tensors) {
    if (!v) {
        ct_set_error(CT_EINVAL, "%s: value is NULL", __func__);
        return NULL;
    }
    switch (v->kind) {
    case CT_VALUE_NONE: return ct_value_none();
    case CT_VALUE_BOOL: return ct_value_bool(v->u.b);
    case CT_VALUE_INT: return ct_value_int(v->u.i);
    case CT_VALUE_FLOAT: return ct_value_float(v->u.d);
    case CT_VALUE_STR: return ct_value_str(v->u.s);
    case CT_VALUE_TENSOR:
    {
        const cti_value_tensor_ops *ops = v->u.tensor.ops;
        return cti_value_tensor_leaf(clone_tensors ? ops->clone(v->u.tensor.t) : ops->share(v->u.tensor.t), ops);
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE: {
        ct_value *c = new_value(v->kind);
        for (size_t i = 0; c && i < v->u.seq.len; i++) {
            if (ct_value_list_append(c, ct_value_copy(v->u.seq.items[i], clone_tensors)) != 0) {
                ct_value_free(c);
                c = NULL;
            }
        }
        return c;
    }
    case CT_VALUE_DICT: {
        ct_value *c = new_value(CT_VALUE_DICT);
        for (size_t i = 0; c && i < v->u.dict.len; i++) {
            const dict_entry *e = &v->u.dict.items[i];
            if (dict_set(__func__, c, e->skey, e->ikey, ct_value_copy(e->val, clone_tensors)) != 0) {
                ct_value_free(c);
                c = NULL;
            }
        }
        return c;
    }
    }
    ct_set_error(CT_EINVAL, "%s: unknown value kind %d", __func__, (int)v->kind);
    return NULL;
}

/* ---- equality ---------------------------------------------------------------- */

bool ct_value_equal(const ct_value *a, const ct_value *b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case CT_VALUE_NONE: return true;
    case CT_VALUE_BOOL: return a->u.b == b->u.b;
    case CT_VALUE_INT: return a->u.i == b->u.i;
    /* NaN equals NaN here: a tree compared with its own copy must be equal. */
    case CT_VALUE_FLOAT: return a->u.d == b->u.d || (isnan(a->u.d) && isnan(b->u.d));
    case CT_VALUE_STR: return strcmp(a->u.s, b->u.s) == 0;
    case CT_VALUE_TENSOR: return a->u.tensor.t == b->u.tensor.t || a->u.tensor.ops->equal(a->u.tensor.t, b->u.tensor.t);
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        if (a->u.seq.len != b->u.seq.len) return false;
        for (size_t i = 0; i < a->u.seq.len; i++)
            if (!ct_value_equal(a->u.seq.items[i], b->u.seq.items[i])) return false;
        return true;
    case CT_VALUE_DICT:
        if (a->u.dict.len != b->u.dict.len) return false;
        for (size_t i = 0; i < a->u.dict.len; i++) {
            const dict_entry *ea = &a->u.dict.items[i], *eb = &b->u.dict.items[i];
            if (!ea->skey != !eb->skey) return false;
            if (ea->skey ? strcmp(ea->skey, eb->skey) != 0 : ea->ikey != eb->ikey) return false;
            if (!ct_value_equal(ea->val, eb->val)) return false;
        }
        return true;
    }
    return false;
}
