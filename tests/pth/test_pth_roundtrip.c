/* tests/pth/test_pth_roundtrip.c — ct_pth_save then ct_pth_load in C:
 * every value kind and dtype comes back equal, with the same strides,
 * offsets and storage sharing (and sharing that works: a write through one
 * tensor shows in the other); checksums agree with zlib; bad arguments and
 * damaged files give the right code and message, and no damage to a file
 * (every truncation, every flipped byte) crashes or loads a wrong value. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ct_test.h"
#include "specimen.h"

static char dir[64];

static const char *in_dir(const char *name) {
    static char bufs[4][256];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static bool contains(const unsigned char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return true;
    return false;
}

static void expect_load_error(const char *path, int code, const char *needle);

/* ---- layout: strides, offsets, requires_grad and sharing ----------------------------- */

typedef struct {
    const void *a[512], *b[512];
    size_t n;
    int tensors;
} sharing;

/* Storage a in the original must map to storage b in the copy, one to one. */
static bool same_storage_map(sharing *s, const void *a, const void *b) {
    for (size_t i = 0; i < s->n; i++)
        if (s->a[i] == a || s->b[i] == b) return s->a[i] == a && s->b[i] == b;
    if (s->n == 512) return false;
    s->a[s->n] = a;
    s->b[s->n++] = b;
    return true;
}

static void same_layout(const ct_value *a, const ct_value *b, sharing *s) {
    CHECK(ct_value_kind_of(a) == ct_value_kind_of(b));
    if (ct_value_kind_of(a) != ct_value_kind_of(b)) return;
    switch (ct_value_kind_of(a)) {
    case CT_VALUE_TENSOR: {
        ct_tensor *x = ct_value_get_tensor(a), *y = ct_value_get_tensor(b);
        ct_storage_info sx, sy;
        CHECK_OK(ct_storage_info_of(x, &sx));
        CHECK_OK(ct_storage_info_of(y, &sy));
        CHECK(sx.offset == sy.offset);
        CHECK(sx.nbytes == sy.nbytes); /* a view saves its whole storage */
        CHECK(sy.device.type == CT_CPU);
        for (int d = 0; d < ct_ndim(x); d++) CHECK(ct_stride(x, d) == ct_stride(y, d));
        CHECK(ct_requires_grad(x) == ct_requires_grad(y));
        CHECK(same_storage_map(s, sx.id, sy.id));
        s->tensors++;
        break;
    }
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        for (size_t i = 0; i < ct_value_len(a) && i < ct_value_len(b); i++)
            same_layout(ct_value_list_get(a, i), ct_value_list_get(b, i), s);
        break;
    case CT_VALUE_DICT:
        for (size_t i = 0; i < ct_value_len(a) && i < ct_value_len(b); i++)
            same_layout(ct_value_dict_at(a, i, NULL, NULL), ct_value_dict_at(b, i, NULL, NULL), s);
        break;
    default: break;
    }
}

static ct_tensor *tensor_at(const ct_value *v, const char *k1, const char *k2) {
    const ct_value *x = ct_value_dict_get(v, k1);
    return ct_value_get_tensor(k2 ? ct_value_dict_get(x, k2) : x);
}

static double first(const ct_tensor *t) {
    double d = -1;
    ct_tensor *c = ct_contiguous(t), *f = ct_flatten(c, 0, -1), *e = ct_select(f, 0, 0);
    ct_item(e, &d);
    ct_tensor_free(c);
    ct_tensor_free(f);
    ct_tensor_free(e);
    return d;
}

/* ---- round trips ----------------------------------------------------------------------- */

static void test_specimen(void) {
    ct_value *v = pth_specimen();
    CHECK(v != NULL);
    const char *path = in_dir("spec.pth");
    ct_file_sum sum = {0, 0}, chk = {0, 0};
    CHECK_OK(ct_pth_save(path, v, NULL, &sum));
    CHECK_OK(ct_file_checksum(path, &chk));
    size_t n = 0;
    unsigned char *bytes = slurp(path, &n);
    CHECK(sum.nbytes == n && chk.nbytes == n);
    CHECK(sum.crc32 == chk.crc32);
    CHECK(sum.crc32 == (uint32_t)crc32(0, bytes, (uInt)n));
    CHECK(contains(bytes, n, "spec/data.pkl") && contains(bytes, n, "spec/data/0"));
    free(bytes);

    ct_value *back = NULL;
    CHECK_OK(ct_pth_load(path, &back));
    CHECK(ct_value_equal(v, back));
    sharing s = {.n = 0};
    same_layout(v, back, &s);
    CHECK(s.tensors == 28);
    /* The dtypes' 10, the views' 2 (float and int), "shared"'s 1, "odd"'s 7. */
    CHECK(s.n == 10 + 2 + 1 + 7);

    /* -0.0 keeps its sign, NaN stays NaN. */
    const ct_value *floats = ct_value_dict_get(back, "floats");
    double z = 1, nan_ = 0;
    ct_value_get_float(ct_value_list_get(floats, 1), &z);
    ct_value_get_float(ct_value_list_get(floats, 8), &nan_);
    CHECK(z == 0 && signbit(z));
    CHECK(isnan(nan_));

    /* Shared storages are shared in memory: writes show through. */
    ct_tensor *base = tensor_at(back, "views", "base"), *tr = tensor_at(back, "views", "transposed");
    CHECK_OK(ct_fill_(base, 7));
    CHECK(first(tr) == 7 && first(tensor_at(back, "views", "expanded")) == 7);
    const ct_value *shared = ct_value_dict_get(back, "shared");
    ct_tensor *s0 = ct_value_get_tensor(ct_value_list_get(shared, 0));
    ct_tensor *s1 = ct_value_get_tensor(ct_value_list_get(shared, 1));
    CHECK_OK(ct_fill_(s1, -4));
    ct_tensor *row1 = ct_select(s0, 0, 1);
    CHECK(first(row1) == -4);
    ct_tensor_free(row1);
    CHECK(ct_requires_grad(tensor_at(back, "odd", "requires_grad")));
    CHECK(!ct_requires_grad(tensor_at(back, "odd", "scalar")));
    CHECK(ct_ndim(tensor_at(back, "odd", "scalar")) == 0);
    CHECK(ct_numel(tensor_at(back, "odd", "empty")) == 0 && ct_size(tensor_at(back, "odd", "empty"), 1) == 5);
    ct_value_free(back);
    ct_value_free(v);
}

static void roundtrip_top(ct_value *v, const char *name) {
    const char *path = in_dir(name);
    CHECK_OK(ct_pth_save(path, v, NULL, NULL));
    ct_value *back = NULL;
    CHECK_OK(ct_pth_load(path, &back));
    CHECK(ct_value_equal(v, back));
    ct_value_free(back);
    ct_value_free(v);
}

static void test_top_level(void) {
    roundtrip_top(ct_value_tensor(ct_arange(0, 5, 1, NULL)), "tensor.pth");
    ct_value *l = ct_value_list();
    ct_value_list_append(l, ct_value_str("x"));
    roundtrip_top(l, "list.pth");
    roundtrip_top(ct_value_none(), "none.pth");
    roundtrip_top(ct_value_int(INT64_MIN), "int.pth");
    roundtrip_top(ct_value_str("only a string"), "str.pth");
    roundtrip_top(ct_value_tuple(), "tuple.pth");
}

static void test_archive_names(void) {
    ct_value *v = pth_small();
    ct_pth_save_params p = ct_pth_save_default_params();
    CHECK(!p.fsync && p.archive_name == NULL);
    p.archive_name = "weights";
    p.fsync = true;
    const char *path = in_dir("named.pth");
    CHECK_OK(ct_pth_save(path, v, &p, NULL));
    size_t n = 0;
    unsigned char *b = slurp(path, &n);
    CHECK(contains(b, n, "weights/data.pkl") && !contains(b, n, "named/"));
    free(b);
    ct_value *back = NULL;
    CHECK_OK(ct_pth_load(path, &back));
    CHECK(ct_value_equal(v, back));
    ct_value_free(back);
    /* torch.save's default: the file name without its last extension. */
    CHECK_OK(ct_pth_save(in_dir("a.b.pth"), v, NULL, NULL));
    b = slurp(in_dir("a.b.pth"), &n);
    CHECK(contains(b, n, "a.b/data.pkl"));
    free(b);
    CHECK_OK(ct_pth_save(in_dir(".pth"), v, NULL, NULL));
    b = slurp(in_dir(".pth"), &n);
    CHECK(contains(b, n, "archive/data.pkl"));
    free(b);
    p.archive_name = "a/b";
    CHECK(ct_pth_save(path, v, &p, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "archive_name");
    p.archive_name = "";
    CHECK(ct_pth_save(path, v, &p, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "archive_name");
    ct_value_free(v);
}

/* Storages of several MiB take the other paths: CRCs computed by a helper
 * thread while saving, reads split into chunks over threads while loading
 * (their CRCs combined). */
static void test_large(void) {
    ct_manual_seed(3);
    ct_value *v = ct_value_dict();
    ct_value_dict_set(v, "big", ct_value_tensor(ct_randn(CT_SHAPE(1300, 1024), NULL)));
    ct_value_dict_set(v, "bias", ct_value_tensor(ct_randn(CT_SHAPE(7), NULL)));
    ct_value_dict_set(v, "mid", ct_value_tensor(ct_randint(-9, 9, CT_SHAPE(300, 1024), NULL)));
    ct_value_dict_set(v, "half", ct_value_tensor(ct_randn(CT_SHAPE(2, 700, 1024), &(ct_topts){.dtype = CT_F16})));
    const char *path = in_dir("large.pth");
    ct_file_sum sum = {0, 0};
    CHECK_OK(ct_pth_save(path, v, NULL, &sum));
    size_t n = 0;
    unsigned char *b = slurp(path, &n);
    CHECK(n > 10 * 1000 * 1000 && sum.nbytes == n && sum.crc32 == (uint32_t)crc32(0, b, (uInt)n));
    ct_value *back = NULL;
    CHECK_OK(ct_pth_load(path, &back));
    CHECK(ct_value_equal(v, back));
    ct_value_free(back);
    /* A flipped byte deep inside the first storage (its third 2 MiB chunk). */
    size_t at = 0;
    for (size_t i = 0; i + 12 <= n && !at; i++)
        if (memcmp(b + i, "large/data/0", 12) == 0) at = (i + 12 + 4 + 63) / 64 * 64 + (5u << 20) - 3;
    CHECK(at > 0 && at < n);
    b[at] ^= 0x40;
    spit(in_dir("large_bad.pth"), b, n);
    expect_load_error(in_dir("large_bad.pth"), CT_EFORMAT, "large_bad.pth: entry large/data/0: its bytes have CRC-32");
    free(b);
    ct_value_free(v);
}

/* ---- errors while saving ---------------------------------------------------------------- */

static void test_save_errors(void) {
    ct_value *v = pth_small();
    CHECK(ct_pth_save(NULL, v, NULL, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "path is NULL");
    CHECK(ct_pth_save(in_dir("x.pth"), NULL, NULL, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "v is NULL");
    CHECK(ct_pth_save(in_dir("missing/x.pth"), v, NULL, NULL) == CT_EIO);
    CHECK_ERR(CT_EIO, "missing/x.pth: cannot create");
    ct_value_free(v);

    /* One storage seen as float32 and as int32: torch.save refuses it too. */
    ct_tensor *f = ct_zeros(CT_SHAPE(4), NULL);
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "f", ct_value_tensor(ct_alias(f)));
    ct_value_dict_set(d, "i", ct_value_tensor(ct_storage_view(f, CT_I32, 0, 1, (const int64_t[]){4},
                                                              (const int64_t[]){1})));
    CHECK(ct_pth_save(in_dir("dtypes.pth"), d, NULL, NULL) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "value at [\"i\"]: a int32 tensor shares storage 0 with an earlier float32 tensor");
    ct_value_free(d);
    /* A float32 view of a 6-byte storage: no whole number of elements. */
    ct_tensor *u = ct_zeros(CT_SHAPE(6), &(ct_topts){.dtype = CT_U8});
    d = ct_value_dict();
    ct_value_dict_set(d, "odd", ct_value_tensor(ct_storage_view(u, CT_F32, 0, 1, (const int64_t[]){1},
                                                                (const int64_t[]){1})));
    CHECK(ct_pth_save(in_dir("odd.pth"), d, NULL, NULL) == CT_EDTYPE);
    CHECK_ERR(CT_EDTYPE, "storage of 6 bytes is no whole number of float32 elements");
    ct_value_free(d);
    ct_tensor_free(u);
    ct_tensor_free(f);
    /* Strings must be UTF-8, keys included; the message says where. */
    d = ct_value_dict();
    ct_value *inner = ct_value_dict();
    ct_value_dict_set(inner, "ok", ct_value_str("bad \xff byte"));
    ct_value_dict_set(d, "outer", inner);
    CHECK(ct_pth_save(in_dir("utf8.pth"), d, NULL, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "value at [\"outer\"][\"ok\"]: string \"bad \xff byte\" is not valid UTF-8");
    ct_value_free(d);
}

/* ---- errors while loading ----------------------------------------------------------------- */

static void expect_load_error(const char *path, int code, const char *needle) {
    ct_value *out = (ct_value *)&out; /* must come back NULL */
    CHECK(ct_pth_load(path, &out) == code);
    CHECK(out == NULL);
    CHECK_ERR(code, needle);
}

static void test_load_errors(void) {
    ct_value *out = NULL;
    CHECK(ct_pth_load(NULL, &out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "path is NULL");
    CHECK(ct_pth_load(in_dir("x"), NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "out is NULL");
    expect_load_error(in_dir("does-not-exist.pth"), CT_EIO, "does-not-exist.pth: cannot open");
    expect_load_error(dir, CT_EIO, "not a regular file");
    spit(in_dir("text.pth"), "hello, this is not a zip file at all\n", 37);
    expect_load_error(in_dir("text.pth"), CT_EFORMAT, "text.pth: not a zip archive (starts with 68 65 6c 6c");
    spit(in_dir("empty.pth"), "", 0);
    expect_load_error(in_dir("empty.pth"), CT_EFORMAT, "empty.pth: only 0 bytes: not a zip archive");
    static const char legacy[] = "\x80\x02 stands for a legacy pickle.";
    spit(in_dir("legacy.pth"), legacy, sizeof legacy - 1);
    expect_load_error(in_dir("legacy.pth"), CT_EFORMAT, "legacy format");
}

/* Every truncation fails; every flipped byte either fails with CT_EFORMAT
 * or loads the very same value (it hit bytes that carry no meaning: header
 * padding, times, the data descriptors). */
static void test_damage(void) {
    ct_value *v = pth_small();
    const char *good = in_dir("small.pth"), *bad = in_dir("small_bad.pth");
    CHECK_OK(ct_pth_save(good, v, NULL, NULL));
    size_t n = 0;
    unsigned char *b = slurp(good, &n);
    CHECK(n > 1000);
    int wrong = 0;
    for (size_t len = 0; len < n; len++) {
        spit(bad, b, len);
        ct_value *out = NULL;
        if (ct_pth_load(bad, &out) != CT_EFORMAT || out) wrong++;
        ct_value_free(out);
        ct_clear_error();
    }
    CHECK(wrong == 0);
    int loaded = 0, refused = 0;
    wrong = 0;
    for (size_t i = 0; i < n; i++) {
        b[i] ^= 0xFF;
        spit(bad, b, n);
        b[i] ^= 0xFF;
        ct_value *out = NULL;
        int rc = ct_pth_load(bad, &out);
        if (rc == 0 && ct_value_equal(out, v)) loaded++;
        else if (rc == CT_EFORMAT && !out) refused++;
        else wrong++;
        ct_value_free(out);
        ct_clear_error();
    }
    CHECK(wrong == 0);
    CHECK(loaded > 0 && (size_t)refused > n / 2);

    /* A flipped storage byte names the entry and the CRC. */
    size_t data = 0;
    for (size_t i = 0; i + 12 <= n && !data; i++)
        if (memcmp(b + i, "small/data/0", 12) == 0) data = (i + 12 + 4 + 63) / 64 * 64; /* past "FB"+len, aligned */
    CHECK(data > 0 && data % 64 == 0);
    b[data + 5] ^= 0x01;
    spit(bad, b, n);
    b[data + 5] ^= 0x01;
    expect_load_error(bad, CT_EFORMAT, "small_bad.pth: entry small/data/0: its bytes have CRC-32");
    /* data.pkl renamed (in its local header and the directory). */
    unsigned char *r = malloc(n);
    memcpy(r, b, n);
    for (size_t i = 0; i + 8 <= n; i++)
        if (memcmp(r + i, "data.pkl", 8) == 0) r[i + 7] = 'x';
    spit(bad, r, n);
    expect_load_error(bad, CT_EFORMAT, "small_bad.pth: no entry small/data.pkl");
    free(r);
    free(b);
    ct_value_free(v);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ct_pth_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_specimen();
    test_top_level();
    test_archive_names();
    test_large();
    test_save_errors();
    test_load_errors();
    test_damage();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_result("pth_roundtrip");
}
