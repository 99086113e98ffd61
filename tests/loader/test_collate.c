/* ct_collate follows torch's default_collate (tensors stacked, ints ->
 * int64, floats -> float64, bools -> bool, strings -> list, containers
 * element-wise), its errors name the sample and the path inside it, the
 * ct_batch_* getters say what a batch holds when asked for something else,
 * and ct_value_to_device copies a batch tree with its tensors moved. */
#include <stdlib.h>

#include "ct_test.h"

/* A float32 tensor [rows, cols] whose elements are base, base + 1, ... */
static ct_tensor *counting(int64_t rows, int64_t cols, float base) {
    float buf[64];
    for (int i = 0; i < rows * cols; i++) buf[i] = base + (float)i;
    return ct_from_data(buf, 2, (int64_t[]){rows, cols}, CT_F32);
}

static ct_value *pair_list(int64_t k) {
    ct_value *l = ct_value_list();
    ct_value_list_append(l, ct_value_int(k * 10));
    ct_value_list_append(l, ct_value_tensor(counting(1, 2, (float)k)));
    return l;
}

/* (tensor [2, 3], {"label": int, "w": float, "name": str, "flag": bool,
 *  "pair": [int, tensor [1, 2]]}) */
static ct_value *nested_sample(int64_t k) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "label", ct_value_int(k));
    ct_value_dict_set(d, "w", ct_value_float(0.5 * (double)k));
    char name[16];
    snprintf(name, sizeof name, "s%lld", (long long)k);
    ct_value_dict_set(d, "name", ct_value_str(name));
    ct_value_dict_set(d, "flag", ct_value_bool(k % 2 == 1));
    ct_value_dict_set(d, "pair", pair_list(k));
    ct_value *t = ct_value_tuple();
    ct_value_list_append(t, ct_value_tensor(counting(2, 3, (float)(100 * k))));
    ct_value_list_append(t, d);
    return t;
}

static void free_all(ct_value **v, int n) {
    for (int i = 0; i < n; i++) ct_value_free(v[i]);
}

static void test_nested(void) {
    enum { N = 4 };
    ct_value *s[N];
    for (int k = 0; k < N; k++) s[k] = nested_sample(k);
    /* The batch's tensors belong to the batch, not to a scope open around
     * the call. */
    ct_scope *scope = ct_scope_begin();
    ct_value *b = ct_collate(s, N);
    CHECK(ct_scope_size(scope) == 0);
    ct_scope_end(scope);
    CHECK(b && ct_value_kind_of(b) == CT_VALUE_TUPLE && ct_value_len(b) == 2);

    ct_tensor *x = ct_batch_at(b, 0);
    CHECK(ct_ndim(x) == 3 && ct_size(x, 0) == N && ct_size(x, 1) == 2 && ct_size(x, 2) == 3);
    float xs[N * 6];
    CHECK_OK(ct_read(x, xs, sizeof xs));
    for (int k = 0; k < N; k++)
        for (int i = 0; i < 6; i++) CHECK(xs[k * 6 + i] == (float)(100 * k + i));
    CHECK(ct_batch_length(b) == N);

    const ct_value *d = ct_value_list_get(b, 1);
    CHECK(ct_value_kind_of(d) == CT_VALUE_DICT && ct_value_len(d) == 5);
    const char *key0 = NULL;
    ct_value_dict_at(d, 0, &key0, NULL);
    CHECK(key0 && strcmp(key0, "label") == 0); /* sample 0's key order */

    ct_tensor *label = ct_batch_get(d, "label");
    int64_t labels[N];
    CHECK(ct_dtype_of(label) == CT_I64 && ct_numel(label) == N);
    CHECK_OK(ct_read(label, labels, sizeof labels));
    for (int k = 0; k < N; k++) CHECK(labels[k] == k);

    ct_tensor *w = ct_batch_get(d, "w");
    double ws[N];
    CHECK(ct_dtype_of(w) == CT_F64);
    CHECK_OK(ct_read(w, ws, sizeof ws));
    for (int k = 0; k < N; k++) CHECK(ws[k] == 0.5 * k);

    ct_tensor *flag = ct_batch_get(d, "flag");
    unsigned char flags[N];
    CHECK(ct_dtype_of(flag) == CT_BOOL);
    CHECK_OK(ct_read(flag, flags, sizeof flags));
    for (int k = 0; k < N; k++) CHECK(flags[k] == (k % 2 == 1));

    const ct_value *names = ct_value_dict_get(d, "name");
    CHECK(ct_value_kind_of(names) == CT_VALUE_LIST && ct_value_len(names) == N);
    CHECK(strcmp(ct_value_get_str(ct_value_list_get(names, 3)), "s3") == 0);

    const ct_value *pair = ct_value_dict_get(d, "pair");
    CHECK(ct_value_kind_of(pair) == CT_VALUE_LIST && ct_value_len(pair) == 2);
    int64_t tens[N];
    CHECK_OK(ct_read(ct_batch_at(pair, 0), tens, sizeof tens));
    CHECK(tens[2] == 20);
    ct_tensor *pt = ct_batch_at(pair, 1);
    CHECK(ct_ndim(pt) == 3 && ct_size(pt, 0) == N && ct_size(pt, 1) == 1 && ct_size(pt, 2) == 2);

    ct_value_free(b);
    free_all(s, N);
}

static void test_scalars_and_tensor_samples(void) {
    /* An int where sample 0 has a float is taken, as Python's
     * torch.tensor(batch, dtype=float64) takes it. */
    ct_value *f[3] = {ct_value_float(1.5), ct_value_int(2), ct_value_float(-1)};
    ct_value *b = ct_collate(f, 3);
    double fs[3];
    CHECK(b && ct_dtype_of(ct_batch_tensor(b)) == CT_F64);
    CHECK_OK(ct_read(ct_batch_tensor(b), fs, sizeof fs));
    CHECK(fs[0] == 1.5 && fs[1] == 2 && fs[2] == -1);
    ct_value_free(b);
    free_all(f, 3);

    /* Plain tensor samples, 0-dim included: stacked to [n]. */
    ct_value *t[3];
    for (int k = 0; k < 3; k++) t[k] = ct_value_tensor(ct_scalar_tensor(k, &(ct_topts){.dtype = CT_I64}));
    b = ct_collate(t, 3);
    int64_t ts[3];
    CHECK(b && ct_ndim(ct_batch_tensor(b)) == 1);
    CHECK_OK(ct_read(ct_batch_tensor(b), ts, sizeof ts));
    CHECK(ts[0] == 0 && ts[2] == 2);
    CHECK(ct_batch_length(b) == 3);
    ct_value_free(b);
    free_all(t, 3);
}

/* Four samples (int, tensor [1, 28, 28]); sample `odd` has another shape. */
static void test_shape_error(void) {
    ct_value *s[4];
    for (int k = 0; k < 4; k++) {
        s[k] = ct_value_tuple();
        ct_value_list_append(s[k], ct_value_int(k));
        ct_value_list_append(s[k], ct_value_tensor(ct_zeros(CT_SHAPE(1, 28, k == 3 ? 27 : 28), NULL)));
    }
    CHECK(ct_collate(s, 4) == NULL);
    CHECK_ERR(CT_ESHAPE, "sample 3: [1]: shape [1, 28, 27] differs from sample 0's [1, 28, 28]");
    free_all(s, 4);
}

static ct_value *dict_of(const char *key, ct_value *v) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, key, v);
    return d;
}

static void test_structure_errors(void) {
    /* dtype */
    ct_value *s[3];
    s[0] = dict_of("x", ct_value_tensor(ct_zeros(CT_SHAPE(2), NULL)));
    s[1] = dict_of("x", ct_value_tensor(ct_zeros(CT_SHAPE(2), NULL)));
    s[2] = dict_of("x", ct_value_tensor(ct_zeros(CT_SHAPE(2), &(ct_topts){.dtype = CT_F64})));
    CHECK(ct_collate(s, 3) == NULL);
    CHECK_ERR(CT_EDTYPE, "sample 2: [\"x\"]: dtype float64 differs from sample 0's float32");
    free_all(s, 3);

    /* a missing key */
    s[0] = dict_of("x", ct_value_int(1));
    s[1] = dict_of("y", ct_value_int(2));
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "sample 1: no key \"x\"");
    free_all(s, 2);

    /* a different kind, deep inside */
    s[0] = dict_of("a", pair_list(0));
    s[1] = dict_of("a", ct_value_list());
    ct_value_list_append(ct_value_dict_get(s[1], "a"), ct_value_int(1));
    ct_value_list_append(ct_value_dict_get(s[1], "a"), ct_value_str("oops"));
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "sample 1: [\"a\"][1]: is a str, sample 0's is a tensor");
    free_all(s, 2);

    /* a tuple of another length */
    s[0] = ct_value_tuple();
    s[1] = ct_value_tuple();
    ct_value_list_append(s[0], ct_value_int(1));
    ct_value_list_append(s[1], ct_value_int(1));
    ct_value_list_append(s[1], ct_value_int(2));
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "sample 1: a tuple of 2 elements, sample 0's has 1");
    free_all(s, 2);

    /* a float where sample 0 has an int is not widened */
    s[0] = ct_value_int(1);
    s[1] = ct_value_float(1.5);
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "sample 1: is a float, sample 0's is an int");
    free_all(s, 2);

    s[0] = ct_value_none();
    s[1] = ct_value_none();
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EFORMAT, "None cannot be collated");
    ct_value_free(s[1]);
    s[1] = NULL;
    CHECK(ct_collate(s, 2) == NULL);
    CHECK_ERR(CT_EINVAL, "sample 1 is NULL");
    free_all(s, 1);
    CHECK(ct_collate(NULL, 2) == NULL);
    CHECK_ERR(CT_EINVAL, "samples is NULL");
    CHECK(ct_collate(s, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "n must be > 0");
}

static void test_getters(void) {
    ct_value *t = ct_value_tuple();
    ct_value_list_append(t, ct_value_tensor(counting(2, 2, 0)));
    ct_value_list_append(t, ct_value_int(7));
    CHECK(ct_batch_at(t, 0) != NULL);
    CHECK(ct_batch_at(t, 1) == NULL);
    CHECK_ERR(CT_EFORMAT, "ct_batch_at: element 1 is an int, not a tensor");
    CHECK(ct_batch_at(t, 2) == NULL);
    CHECK_ERR(CT_EINDEX, "index out of range: the batch is a tuple of 2");
    CHECK(ct_batch_get(t, "x") == NULL);
    CHECK_ERR(CT_EFORMAT, "the batch is a tuple of 2, not a dict");
    CHECK(ct_batch_tensor(t) == NULL);
    CHECK_ERR(CT_EFORMAT, "the batch is a tuple of 2, not a tensor");
    CHECK(ct_batch_length(t) == 2);

    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "name", ct_value_str("first leaf is no tensor"));
    ct_value_dict_set(d, "x", ct_value_tensor(ct_zeros(CT_SHAPE(5, 3), NULL)));
    ct_value_dict_set_int(d, 3, ct_value_int(1));
    CHECK(ct_batch_get(d, "x") != NULL);
    CHECK(ct_batch_length(d) == 5);
    CHECK(ct_batch_get(d, "z") == NULL);
    CHECK_ERR(CT_EINDEX, "no such key: the batch is a dict with keys \"name\", \"x\", 3");
    CHECK(ct_batch_get(d, "name") == NULL);
    CHECK_ERR(CT_EFORMAT, "the value of \"name\" is a str, not a tensor");
    CHECK(ct_batch_at(d, 0) == NULL);
    CHECK_ERR(CT_EFORMAT, "the batch is a dict with keys \"name\", \"x\", 3, not a tuple or list");

    ct_value *x = ct_value_tensor(ct_zeros(CT_SHAPE(4, 2), NULL));
    CHECK(ct_batch_tensor(x) == ct_value_get_tensor(x));
    CHECK(ct_batch_at(x, 0) == NULL);
    CHECK_ERR(CT_EFORMAT, "the batch is a tensor [4, 2] float32 cpu, not a tuple or list");

    ct_value *scalar = ct_value_tensor(ct_scalar_tensor(1, NULL));
    CHECK(ct_batch_length(scalar) == -1);
    CHECK_ERR(CT_ESHAPE, "0-dim");
    ct_value *none = ct_value_list();
    ct_value_list_append(none, ct_value_str("a"));
    CHECK(ct_batch_length(none) == -1);
    CHECK_ERR(CT_EFORMAT, "holds no tensor (it is a list of 1)");
    CHECK(ct_batch_tensor(NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "batch is NULL");

    ct_value_free(t);
    ct_value_free(d);
    ct_value_free(x);
    ct_value_free(scalar);
    ct_value_free(none);
}

/* Determined's to_device over a tree: every tensor leaf moved, everything
 * else copied, the structure (kinds, keys and their order) kept. On the CPU
 * the leaves are new handles to the same tensors. */
static void test_to_device(void) {
    ct_value *batch = ct_value_dict();
    ct_value_dict_set(batch, "x", ct_value_tensor(counting(2, 3, 1)));
    ct_value *list = ct_value_list();
    ct_value_list_append(list, ct_value_tensor(counting(1, 2, 7)));
    ct_value_list_append(list, ct_value_int(3));
    ct_value_list_append(list, ct_value_str("id-3"));
    ct_value_dict_set(batch, "y", list);
    ct_value *tuple = ct_value_tuple();
    ct_value_list_append(tuple, ct_value_none());
    ct_value_list_append(tuple, ct_value_float(0.25));
    ct_value_list_append(tuple, ct_value_bool(true));
    ct_value *inner = ct_value_dict();
    ct_value_dict_set_int(inner, 5, ct_value_tensor(ct_zeros(CT_SHAPE(4), &(ct_topts){.dtype = CT_I64})));
    ct_value_list_append(tuple, inner);
    ct_value_dict_set_int(batch, 2, tuple);
    ct_value_dict_set(batch, "empty", ct_value_list());

    ct_value *moved = ct_value_to_device(batch, ct_cpu(), false);
    CHECK(moved != NULL && moved != batch);
    CHECK(ct_value_equal(moved, batch));
    CHECK(ct_value_kind_of(ct_value_dict_get_int(moved, 2)) == CT_VALUE_TUPLE);
    CHECK(ct_value_kind_of(ct_value_dict_get(moved, "y")) == CT_VALUE_LIST);
    const char *skey;
    int64_t ikey;
    ct_value_dict_at(moved, 2, &skey, &ikey);
    CHECK(skey == NULL && ikey == 2); /* the int key, in its place */
    ct_value_dict_at(moved, 3, &skey, &ikey);
    CHECK(skey && !strcmp(skey, "empty"));
    /* new handles to the same storage: torch's .to() on the same device */
    ct_tensor *a = ct_batch_get(batch, "x"), *b = ct_batch_get(moved, "x");
    CHECK(a != NULL && b != NULL && a != b && ct_data_ptr(a) == ct_data_ptr(b));
    CHECK(ct_value_get_str(ct_value_list_get(ct_value_dict_get(moved, "y"), 2)) !=
          ct_value_get_str(ct_value_list_get(list, 2))); /* strings copied */
    ct_value_free(batch); /* the copy owns its own handles */
    CHECK(ct_device_of(ct_batch_get(moved, "x")).type == CT_CPU);
    float got[6];
    CHECK(ct_read(ct_batch_get(moved, "x"), got, sizeof got) == 0 && got[0] == 1 && got[5] == 6);
    ct_value_free(moved);

    /* a plain tensor and a scalar */
    ct_value *t = ct_value_tensor(counting(1, 1, 9));
    ct_value *tm = ct_value_to_device(t, ct_cpu(), true);
    CHECK(tm && ct_value_kind_of(tm) == CT_VALUE_TENSOR && ct_value_equal(t, tm));
    ct_value *i = ct_value_int(4);
    ct_value *im = ct_value_to_device(i, ct_cpu(), false);
    CHECK(im && im != i && ct_value_equal(i, im));
    ct_value_free(t);
    ct_value_free(tm);
    ct_value_free(i);
    ct_value_free(im);

    /* NULL: an error, or the error of the call that produced the NULL */
    CHECK(ct_value_to_device(NULL, ct_cpu(), false) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_value_to_device: value is NULL");
    ct_set_error(CT_EIO, "earlier failure");
    CHECK(ct_value_to_device(NULL, ct_cpu(), false) == NULL);
    CHECK_ERR(CT_EIO, "earlier failure");

    if (ct_cuda_is_available()) { /* to a GPU and back */
        ct_value *g = ct_value_tuple();
        ct_value_list_append(g, ct_value_tensor(counting(2, 2, 3)));
        ct_value_list_append(g, ct_value_str("s"));
        ct_value *on_gpu = ct_value_to_device(g, ct_cuda(0), false);
        CHECK(on_gpu && ct_device_of(ct_batch_at(on_gpu, 0)).type == CT_CUDA);
        ct_value *back = ct_value_to_device(on_gpu, ct_cpu(), false);
        CHECK(back && ct_value_equal(back, g));
        ct_value_free(g);
        ct_value_free(on_gpu);
        ct_value_free(back);
    } else {
        /* a failing move: no GPU, nothing leaked */
        ct_value *g = ct_value_list();
        ct_value_list_append(g, ct_value_tensor(counting(2, 2, 3)));
        ct_value_list_append(g, ct_value_tensor(counting(2, 2, 3)));
        CHECK(ct_value_to_device(g, ct_cuda(0), false) == NULL);
        CHECK(ct_last_code() != CT_OK);
        ct_clear_error();
        ct_value_free(g);
    }
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_nested();
    test_scalars_and_tensor_samples();
    test_shape_error();
    test_structure_errors();
    test_getters();
    test_to_device();
    CHECK(ct_tensor_live_count() == live); /* nothing leaked, failures included */
    return ct_test_result("loader_collate");
}
