/* tests/value/test_value_wire.c — ct_value trees as bytes (src/dist/value_wire.c):
 * round trips of every kind and dtype (0-dim, empty and non-contiguous
 * tensors, float bits, dict key kinds and order, deep nesting), the layout
 * itself, and damaged buffers refused with CT_EFORMAT naming the offset:
 * every truncation, every single-byte flip (refused or decoded, never a crash
 * or a read past the end: run under the ASan build) and each hand-made
 * malformation. */
#include <stdint.h>
#include <stdlib.h>

#include "dist/value_wire.h"
#include "ct_test.h"

static const ct_dtype all_dtypes[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I64,
                                      CT_I32, CT_U8,  CT_BOOL, CT_I8,  CT_I16};

/* Encodes v, decodes it, checks equality and the byte count; returns the
 * decoded tree (NEW) for further checks. */
static ct_value *round_trip(const ct_value *v) {
    void *buf = NULL;
    size_t len = 0;
    CHECK_OK(cti_value_to_bytes(v, &buf, &len));
    CHECK(buf != NULL && len >= 5);
    ct_value *back = cti_value_from_bytes(buf, len);
    CHECK(back != NULL);
    CHECK(ct_value_equal(v, back));
    /* Encoding the decoded tree gives the same bytes. */
    void *buf2 = NULL;
    size_t len2 = 0;
    CHECK_OK(cti_value_to_bytes(back, &buf2, &len2));
    CHECK(len2 == len && buf2 && memcmp(buf, buf2, len) == 0);
    free(buf);
    free(buf2);
    return back;
}

static void check_round_trip(const ct_value *v) { ct_value_free(round_trip(v)); }

static void test_scalars(void) {
    ct_value *v[] = {ct_value_none(),          ct_value_bool(true),        ct_value_bool(false),
                     ct_value_int(0),          ct_value_int(INT64_MIN),    ct_value_int(INT64_MAX),
                     ct_value_int(-7),         ct_value_float(0.1),        ct_value_float(-1e300),
                     ct_value_float(INFINITY), ct_value_float(-INFINITY),  ct_value_float(NAN),
                     ct_value_float(5e-324),   ct_value_str(""),           ct_value_str("lr"),
                     ct_value_str("caf\xc3\xa9 \xe2\x9c\x93")};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        check_round_trip(v[i]);
        ct_value_free(v[i]);
    }
    /* Floats travel bit for bit: -0.0 stays negative (equality cannot tell). */
    ct_value *neg = ct_value_float(-0.0);
    ct_value *back = round_trip(neg);
    double d = 1;
    CHECK_OK(ct_value_get_float(back, &d));
    CHECK(d == 0 && signbit(d));
    ct_value_free(back);
    ct_value_free(neg);
    /* An int stays an int (not a float), a bool stays a bool (not an int). */
    ct_value *i = ct_value_int(3), *b = ct_value_bool(true);
    ct_value *bi = round_trip(i), *bb = round_trip(b);
    CHECK(ct_value_kind_of(bi) == CT_VALUE_INT && ct_value_kind_of(bb) == CT_VALUE_BOOL);
    ct_value_free(bi);
    ct_value_free(bb);
    ct_value_free(i);
    ct_value_free(b);
}

/* n elements of dtype with varied bytes (bools 0/1). */
static ct_tensor *pattern(ct_dtype dtype, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) n *= shape[k];
    size_t es = ct_dtype_size(dtype), nbytes = (size_t)n * es;
    unsigned char *data = malloc(nbytes ? nbytes : 1);
    for (size_t k = 0; k < nbytes; k++)
        data[k] = dtype == CT_BOOL ? (unsigned char)(k % 3 == 0) : (unsigned char)(k * 37 + 11);
    /* Any bits do for floats (NaN payloads too): equality compares bytes. */
    ct_tensor *t = ct_from_data(data, ndim, shape, dtype);
    free(data);
    return t;
}

static void test_tensors(void) {
    const struct {
        int ndim;
        int64_t shape[4];
    } shapes[] = {{0, {0}}, {1, {0}}, {1, {5}}, {2, {2, 3}}, {3, {2, 0, 3}}, {4, {1, 2, 1, 3}}};
    for (size_t d = 0; d < sizeof all_dtypes / sizeof *all_dtypes; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            ct_value *v = ct_value_tensor(pattern(all_dtypes[d], shapes[s].ndim, shapes[s].shape));
            CHECK(v != NULL);
            ct_value *back = round_trip(v);
            ct_tensor *t = ct_value_get_tensor(back);
            CHECK(t && ct_dtype_of(t) == all_dtypes[d] && ct_ndim(t) == shapes[s].ndim);
            CHECK(ct_device_of(t).type == CT_CPU);
            ct_value_free(back);
            ct_value_free(v);
        }
    }
    /* A non-contiguous view travels as its values in C order. */
    ct_tensor *base = ct_arange(0, 12, 1, NULL);
    ct_tensor *m = ct_reshape(base, CT_SHAPE(3, 4));
    ct_tensor *tr = ct_t(m);
    CHECK(tr && !ct_is_contiguous(tr));
    ct_value *v = ct_value_tensor(ct_alias(tr));
    ct_value *back = round_trip(v);
    float got[12];
    CHECK_OK(ct_read(ct_value_get_tensor(back), got, sizeof got));
    CHECK(ct_is_contiguous(ct_value_get_tensor(back)));
    CHECK(ct_size(ct_value_get_tensor(back), 0) == 4 && ct_size(ct_value_get_tensor(back), 1) == 3);
    CHECK(got[0] == 0 && got[1] == 4 && got[2] == 8 && got[3] == 1 && got[11] == 11);
    ct_value_free(back);
    ct_value_free(v);
    /* A tensor that requires grad travels as its values. */
    ct_tensor *g = ct_arange(0, 3, 1, &(ct_topts){.requires_grad = true});
    v = ct_value_tensor(g);
    check_round_trip(v);
    ct_value_free(v);
    ct_tensor_free(tr);
    ct_tensor_free(m);
    ct_tensor_free(base);
    /* A device tensor comes back on the CPU with the same values. */
    if (ct_cuda_is_available()) {
        ct_tensor *h = pattern(CT_F32, 2, (const int64_t[]){3, 5});
        v = ct_value_tensor(ct_to_device(h, ct_cuda(0), false));
        ct_value *hv = ct_value_tensor(h);
        back = round_trip(hv);
        void *buf = NULL;
        size_t len = 0;
        CHECK_OK(cti_value_to_bytes(v, &buf, &len));
        ct_value *from_dev = cti_value_from_bytes(buf, len);
        CHECK(ct_value_equal(from_dev, hv));
        CHECK(ct_device_of(ct_value_get_tensor(from_dev)).type == CT_CPU);
        free(buf);
        ct_value_free(from_dev);
        ct_value_free(back);
        ct_value_free(hv);
        ct_value_free(v);
        printf("cuda tensor round trip checked\n");
    }
}

/* A tree like an optimizer state dict with every kind somewhere in it. */
static ct_value *sample_tree(void) {
    ct_value *root = ct_value_dict();
    ct_value *state = ct_value_dict();
    ct_value_dict_set_int(state, 3, ct_value_tensor(pattern(CT_F32, 2, (const int64_t[]){2, 2})));
    ct_value_dict_set_int(state, -1, ct_value_tensor(pattern(CT_I64, 0, NULL)));
    ct_value_dict_set_int(state, 0, ct_value_none());
    ct_value_dict_set(root, "state", state);
    ct_value *groups = ct_value_list();
    ct_value *g = ct_value_dict();
    ct_value_dict_set(g, "lr", ct_value_float(0.01));
    ct_value_dict_set(g, "nesterov", ct_value_bool(false));
    ct_value *betas = ct_value_tuple();
    ct_value_list_append(betas, ct_value_float(0.9));
    ct_value_list_append(betas, ct_value_float(0.999));
    ct_value_dict_set(g, "betas", betas);
    ct_value *params = ct_value_list();
    for (int i = 0; i < 4; i++) ct_value_list_append(params, ct_value_int(i));
    ct_value_dict_set(g, "params", params);
    ct_value_list_append(groups, g);
    ct_value_list_append(groups, ct_value_dict());
    ct_value_list_append(groups, ct_value_list());
    ct_value_list_append(groups, ct_value_tuple());
    ct_value_dict_set(root, "param_groups", groups);
    /* Keys in an order no sort would give, mixing key kinds. */
    ct_value *mixed = ct_value_dict();
    ct_value_dict_set(mixed, "z", ct_value_str("last letter"));
    ct_value_dict_set_int(mixed, 7, ct_value_bool(true));
    ct_value_dict_set(mixed, "7", ct_value_int(7)); /* a str key that looks like the int key */
    ct_value_dict_set(mixed, "", ct_value_tensor(pattern(CT_BOOL, 1, (const int64_t[]){0})));
    ct_value_dict_set(mixed, "a", ct_value_tensor(pattern(CT_BF16, 1, (const int64_t[]){3})));
    ct_value_dict_set(root, "mixed", mixed);
    return root;
}

static void test_containers(void) {
    ct_value *tree = sample_tree();
    ct_value *back = round_trip(tree);
    /* Order and key kinds survive: the i-th entry has the same key. */
    ct_value *mixed = ct_value_dict_get(back, "mixed");
    const char *skey = NULL;
    int64_t ikey = 0;
    ct_value_dict_at(mixed, 0, &skey, &ikey);
    CHECK(skey && strcmp(skey, "z") == 0);
    ct_value_dict_at(mixed, 1, &skey, &ikey);
    CHECK(skey == NULL && ikey == 7);
    ct_value_dict_at(mixed, 2, &skey, &ikey);
    CHECK(skey && strcmp(skey, "7") == 0);
    ct_value *betas = ct_value_dict_get(ct_value_list_get(ct_value_dict_get(back, "param_groups"), 0), "betas");
    CHECK(ct_value_kind_of(betas) == CT_VALUE_TUPLE);
    ct_value_free(back);
    ct_value_free(tree);

    /* Empty containers of each kind at the root. */
    ct_value *empties[] = {ct_value_list(), ct_value_tuple(), ct_value_dict()};
    for (int i = 0; i < 3; i++) {
        check_round_trip(empties[i]);
        ct_value_free(empties[i]);
    }

    /* Deep nesting (well within the bound). */
    ct_value *deep = ct_value_int(42);
    for (int i = 0; i < 200; i++) {
        ct_value *outer = i % 3 == 0 ? ct_value_list() : i % 3 == 1 ? ct_value_tuple() : ct_value_dict();
        if (i % 3 == 2) ct_value_dict_set_int(outer, i, deep);
        else ct_value_list_append(outer, deep);
        deep = outer;
    }
    check_round_trip(deep);
    ct_value_free(deep);

    /* Inequality is kept: a tuple does not come back as a list. */
    ct_value *tup = ct_value_tuple(), *lst = ct_value_list();
    ct_value *bt = round_trip(tup);
    CHECK(!ct_value_equal(bt, lst));
    ct_value_free(bt);
    ct_value_free(tup);
    ct_value_free(lst);
}

/* The documented layout, byte for byte, for one small tree. */
static void test_layout(void) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "a", ct_value_bool(true));
    ct_value_dict_set_int(d, 2, ct_value_int(-1));
    void *buf = NULL;
    size_t len = 0;
    CHECK_OK(cti_value_to_bytes(d, &buf, &len));
    const unsigned char want[] = {
        'C', 'T', 'V', '1', CT_VALUE_DICT, 2, 0, 0, 0, 0, 0, 0, 0,   /* dict of 2 */
        0, 1, 0, 0, 0, 0, 0, 0, 0, 'a', CT_VALUE_BOOL, 1,            /* "a": True */
        1, 2, 0, 0, 0, 0, 0, 0, 0, CT_VALUE_INT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK(len == sizeof want && memcmp(buf, want, len) == 0);
    free(buf);
    ct_value_free(d);

    ct_value *t = ct_value_tensor(ct_from_data((const int16_t[]){1, -2}, 2, (const int64_t[]){1, 2}, CT_I16));
    CHECK_OK(cti_value_to_bytes(t, &buf, &len));
    const unsigned char want_t[] = {'C', 'T', 'V', '1', CT_VALUE_TENSOR, CT_I16, 2, 1, 0, 0, 0, 0, 0, 0, 0,
                                    2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0xfe, 0xff};
    CHECK(len == sizeof want_t && memcmp(buf, want_t, len) == 0);
    free(buf);
    ct_value_free(t);
}

/* Expects refusal with CT_EFORMAT and "at offset <off>" in the message. */
static void check_refused(const void *buf, size_t len, const char *needle, size_t off) {
    ct_clear_error();
    ct_value *v = cti_value_from_bytes(buf, len);
    CHECK(v == NULL);
    char where[64];
    snprintf(where, sizeof where, "at offset %zu", off);
    CHECK(strstr(ct_last_error(), where) != NULL);
    CHECK_ERR(CT_EFORMAT, needle);
    ct_value_free(v);
}

static void test_truncated_and_flipped(void) {
    ct_value *tree = sample_tree();
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK_OK(cti_value_to_bytes(tree, (void **)&buf, &len));
    /* Every prefix is refused, read from an exact-size copy so that ASan sees
     * any read past the end. */
    int refused = 0;
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        ct_clear_error();
        ct_value *v = cti_value_from_bytes(n ? cut : NULL, n);
        if (!v && ct_last_code() == CT_EFORMAT && strstr(ct_last_error(), "at offset")) refused++;
        ct_value_free(v);
        free(cut);
    }
    CHECK(refused == (int)len);
    /* One extra byte is refused too. */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    check_refused(longer, len + 1, "trailing bytes", len);
    free(longer);
    /* Every single-byte flip either decodes or is refused cleanly. */
    int decoded = 0, rejected = 0, other = 0;
    unsigned char *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, buf, len);
            copy[i] ^= (unsigned char)(1u << bit);
            ct_clear_error();
            ct_value *v = cti_value_from_bytes(copy, len);
            if (v) decoded++;
            else if (ct_last_code() == CT_EFORMAT) rejected++;
            else other++;
            ct_value_free(v);
        }
    }
    CHECK(other == 0);
    CHECK(decoded > 0 && rejected > 0);
    printf("flips: %d decoded, %d refused of %zu\n", decoded, rejected, len * 8);
    free(copy);
    free(buf);
    ct_value_free(tree);
}

/* Little builders for hand-made buffers. */
typedef struct {
    unsigned char b[256];
    size_t n;
} hb;
static void hb_u8(hb *h, unsigned v) { h->b[h->n++] = (unsigned char)v; }
static void hb_u64(hb *h, uint64_t v) {
    for (int i = 0; i < 8; i++) hb_u8(h, (unsigned)(v >> (8 * i)) & 0xff);
}
static void hb_magic(hb *h) {
    h->n = 0;
    hb_u8(h, 'C'), hb_u8(h, 'T'), hb_u8(h, 'V'), hb_u8(h, '1');
}

static void test_malformed(void) {
    hb h;
    /* Bad magic. */
    hb_magic(&h);
    h.b[3] = '2';
    hb_u8(&h, CT_VALUE_NONE);
    check_refused(h.b, h.n, "bad magic", 0);
    /* Unknown value kind. */
    hb_magic(&h);
    hb_u8(&h, 99);
    check_refused(h.b, h.n, "unknown value kind", 4);
    /* A bool that is neither 0 nor 1. */
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_BOOL);
    hb_u8(&h, 2);
    check_refused(h.b, h.n, "bool neither 0 nor 1", 5);
    /* Counts beyond the buffer, even the largest. */
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_LIST);
    hb_u64(&h, UINT64_MAX);
    check_refused(h.b, h.n, "count larger than the bytes left", 5);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_DICT);
    hb_u64(&h, 1);
    hb_u8(&h, 1);
    check_refused(h.b, h.n, "count larger than the bytes left", 5);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_STR);
    hb_u64(&h, 1ull << 62);
    check_refused(h.b, h.n, "count larger than the bytes left", 5);
    /* A NUL inside a string. */
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_STR);
    hb_u64(&h, 3);
    hb_u8(&h, 'a'), hb_u8(&h, 0), hb_u8(&h, 'b');
    check_refused(h.b, h.n, "NUL", 5);
    /* Unknown dict key kind, duplicate keys. */
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_DICT);
    hb_u64(&h, 1);
    hb_u8(&h, 5);
    hb_u64(&h, 0);
    hb_u8(&h, CT_VALUE_NONE);
    check_refused(h.b, h.n, "unknown dict key kind", 13);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_DICT);
    hb_u64(&h, 2);
    for (int i = 0; i < 2; i++) {
        hb_u8(&h, 1);
        hb_u64(&h, 4);
        hb_u8(&h, CT_VALUE_NONE);
    }
    check_refused(h.b, h.n, "duplicate dict key", 23);
    /* Tensors: unknown dtype, too many dims, sizes out of range, data cut
     * short, a bool element that is not 0/1. */
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, 10);
    hb_u8(&h, 0);
    check_refused(h.b, h.n, "unknown tensor dtype", 5);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_F32);
    hb_u8(&h, 65);
    check_refused(h.b, h.n, "too many tensor dims", 6);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_U8);
    hb_u8(&h, 1);
    hb_u64(&h, UINT64_MAX);
    check_refused(h.b, h.n, "tensor size out of range", 7);
    hb_magic(&h); /* zero elements, but the other sizes' product overflows */
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_U8);
    hb_u8(&h, 3);
    hb_u64(&h, 0);
    hb_u64(&h, 1ull << 40);
    hb_u64(&h, 1ull << 40);
    check_refused(h.b, h.n, "tensor size out of range", 23);
    hb_magic(&h); /* element count * size overflows size_t */
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_F64);
    hb_u8(&h, 2);
    hb_u64(&h, 1ull << 31);
    hb_u64(&h, 1ull << 31);
    check_refused(h.b, h.n, "tensor data cut short", 23);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_I32);
    hb_u8(&h, 1);
    hb_u64(&h, 2);
    hb_u64(&h, 0); /* 8 bytes: exactly 2 int32 ... */
    ct_value *ok = cti_value_from_bytes(h.b, h.n);
    CHECK(ok != NULL);
    ct_value_free(ok);
    h.n--; /* ... and one short */
    check_refused(h.b, h.n, "tensor data cut short", 15);
    hb_magic(&h);
    hb_u8(&h, CT_VALUE_TENSOR);
    hb_u8(&h, CT_BOOL);
    hb_u8(&h, 1);
    hb_u64(&h, 3);
    hb_u8(&h, 1), hb_u8(&h, 0), hb_u8(&h, 7);
    check_refused(h.b, h.n, "bool tensor element", 17);

    /* Nesting beyond the bound is refused, not a stack overflow. */
    size_t depth = 5000;
    unsigned char *deep = malloc(4 + depth * 9 + 1);
    memcpy(deep, "CTV1", 4);
    for (size_t i = 0; i < depth; i++) {
        deep[4 + 9 * i] = CT_VALUE_LIST;
        unsigned char one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
        memcpy(deep + 4 + 9 * i + 1, one, 8);
    }
    deep[4 + depth * 9] = CT_VALUE_NONE;
    ct_value *v = cti_value_from_bytes(deep, 4 + depth * 9 + 1);
    CHECK(v == NULL);
    CHECK_ERR(CT_EFORMAT, "nested too deeply");
    free(deep);

    /* Arguments. */
    void *buf = (void *)1;
    size_t len = 1;
    ct_value *none = ct_value_none();
    CHECK(cti_value_to_bytes(NULL, &buf, &len) == CT_EINVAL);
    CHECK(buf == NULL && len == 0);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(cti_value_to_bytes(none, NULL, &len) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(cti_value_from_bytes(NULL, 4) == NULL);
    CHECK_ERR(CT_EINVAL, "NULL");
    CHECK(cti_value_from_bytes("", 0) == NULL);
    CHECK_ERR(CT_EFORMAT, "magic cut short");
    ct_value_free(none);
}

int main(void) {
    test_scalars();
    test_tensors();
    test_containers();
    test_layout();
    test_truncated_and_flipped();
    test_malformed();
    return ct_test_result("value_wire");
}
