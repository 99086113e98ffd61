/* The dataset tools (data.h): every bad input of ct_dataset_subset,
 * ct_dataset_concat, ct_dataset_random_split(_fractions) and
 * ct_dataset_mean_std is a named error that leaves nothing behind; subsets
 * and concatenations keep their parents alive; a concatenation's batches
 * that mix sources equal ct_collate of the samples (dict samples, the
 * string fallback, differing dtypes); random_split leaves the default
 * generator alone; no tensor handle leaks. Parity with torch and numpy is
 * test_dataset_tools.py's. */
#include <stdlib.h>

#include "ct_test.h"

/* ---- user datasets -------------------------------------------------------- */

typedef struct {
    int64_t n;
    int kind; /* 0: dict {"x": float32 [2], "y": int64 0-dim}; 1: (tensor, "name"); 2: 0 with float64 x */
    int frees;
} user_ds;

static int64_t u_len(void *self) { return ((user_ds *)self)->n; }

static ct_value *u_get(void *self, int64_t i) {
    user_ds *u = self;
    double v[2] = {(double)i + 0.5 * u->kind, (double)(100 * i)};
    float f[2] = {(float)v[0], (float)v[1]};
    ct_tensor *x = u->kind == 2 ? ct_from_data(v, CT_SHAPE(2), CT_F64) : ct_from_data(f, CT_SHAPE(2), CT_F32);
    if (u->kind == 1) {
        ct_value *t = ct_value_tuple();
        char name[32];
        snprintf(name, sizeof name, "s%lld", (long long)i);
        ct_value_list_append(t, ct_value_tensor(x));
        ct_value_list_append(t, ct_value_str(name));
        return t;
    }
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "x", ct_value_tensor(x));
    ct_value_dict_set(d, "y", ct_value_tensor(ct_scalar_tensor((double)(i % 3), &(ct_topts){.dtype = CT_I64})));
    return d;
}

static void u_free(void *self) { ((user_ds *)self)->frees++; }

static ct_dataset *user(user_ds *u) {
    return ct_dataset_new(&(ct_dataset_vtable){u_len, u_get, NULL, u_free}, u);
}

static ct_dataset *arange_ds(int64_t n) {
    ct_tensor *t = ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64});
    ct_dataset *d = ct_dataset_tensors(1, &t);
    ct_tensor_free(t);
    return d;
}

/* get_batch over idx equals ct_collate of the get() samples. */
static bool batch_is_collated(ct_dataset *d, const int64_t *idx, int64_t n) {
    ct_value *b = ct_dataset_get_batch(d, idx, n);
    ct_value **s = calloc((size_t)n, sizeof *s);
    for (int64_t i = 0; i < n; i++) s[i] = ct_dataset_get(d, idx[i]);
    ct_value *c = ct_collate(s, n);
    bool eq = b && c && ct_value_equal(b, c);
    for (int64_t i = 0; i < n; i++) ct_value_free(s[i]);
    free(s);
    ct_value_free(b);
    ct_value_free(c);
    return eq;
}

static int64_t value_at(ct_dataset *d, int64_t i) {
    ct_value *v = ct_dataset_get(d, i);
    int64_t x = -1;
    if (!v || ct_item_int(ct_value_get_tensor(v), &x) != 0) x = -1;
    ct_value_free(v);
    return x;
}

/* ---- Subset ------------------------------------------------------------- */

static void test_subset(void) {
    ct_dataset *d = arange_ds(10);
    CHECK(ct_dataset_subset(NULL, (int64_t[]){0}, 1) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_dataset_subset: dataset is NULL");
    CHECK(ct_dataset_subset(d, NULL, 2) == NULL);
    CHECK_ERR(CT_EINVAL, "indices is NULL");
    CHECK(ct_dataset_subset(d, (int64_t[]){0}, -1) == NULL);
    CHECK_ERR(CT_EINVAL, "n must be >= 0");
    CHECK(ct_dataset_subset(d, (int64_t[]){3, 9, 10}, 3) == NULL);
    CHECK_ERR(CT_EINDEX, "indices[2] = 10 is out of range for a dataset of length 10");
    CHECK(ct_dataset_subset(d, (int64_t[]){-1}, 1) == NULL);
    CHECK_ERR(CT_EINDEX, "indices[0] = -1 is out of range for a dataset of length 10");

    ct_dataset *s = ct_dataset_subset(d, (int64_t[]){7, 2, 2, 9}, 4);
    CHECK(s && ct_dataset_len(s) == 4);
    ct_dataset *ss = ct_dataset_subset(s, (int64_t[]){3, 0}, 2); /* a subset of a subset */
    ct_dataset_free(d);                                        /* the subsets keep it */
    CHECK(value_at(s, 0) == 7 && value_at(s, 2) == 2 && value_at(s, 3) == 9);
    CHECK(value_at(ss, 0) == 9 && value_at(ss, 1) == 7);
    CHECK(ct_dataset_get(s, 4) == NULL);
    CHECK_ERR(CT_EINDEX, "index 4 out of range for a dataset of length 4");
    CHECK(batch_is_collated(s, (int64_t[]){3, 1, 1, 0}, 4));
    ct_dataset *empty = ct_dataset_subset(s, NULL, 0);
    CHECK(empty && ct_dataset_len(empty) == 0);
    ct_dataset_free(empty);
    ct_dataset_free(ss);
    ct_dataset_free(s);

    /* the parent is freed with its last holder */
    user_ds u = {.n = 5};
    ct_dataset *ud = user(&u);
    ct_dataset *us = ct_dataset_subset(ud, (int64_t[]){4, 0}, 2);
    ct_dataset_free(ud);
    CHECK(u.frees == 0);
    CHECK(batch_is_collated(us, (int64_t[]){1, 0, 1}, 3));
    ct_dataset_free(us);
    CHECK(u.frees == 1);
}

/* ---- ConcatDataset -------------------------------------------------------- */

static void test_concat(void) {
    CHECK(ct_dataset_concat(0, (ct_dataset *[]){NULL}) == NULL);
    CHECK_ERR(CT_EINVAL, "n must be >= 1");
    CHECK(ct_dataset_concat(1, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "datasets is NULL");
    ct_dataset *a = arange_ds(3);
    CHECK(ct_dataset_concat(2, (ct_dataset *[]){a, NULL}) == NULL);
    CHECK_ERR(CT_EINVAL, "datasets[1] is NULL");

    /* lengths 3, 0, 4: torch's bisect skips the empty one */
    ct_dataset *z = arange_ds(0), *b = arange_ds(4);
    ct_dataset *c = ct_dataset_concat(3, (ct_dataset *[]){a, z, b});
    ct_dataset_free(a);
    ct_dataset_free(z);
    ct_dataset_free(b);
    CHECK(c && ct_dataset_len(c) == 7);
    int64_t want[7] = {0, 1, 2, 0, 1, 2, 3};
    for (int i = 0; i < 7; i++) CHECK(value_at(c, i) == want[i]);
    CHECK(ct_dataset_get(c, 7) == NULL);
    CHECK_ERR(CT_EINDEX, "index 7 out of range for a dataset of length 7");
    CHECK(batch_is_collated(c, (int64_t[]){6, 0, 3, 2, 6}, 5));
    ct_dataset_free(c);

    /* dict samples from user datasets: the per-source merge */
    user_ds u0 = {.n = 4, .kind = 0}, u1 = {.n = 3, .kind = 0};
    ct_dataset *d0 = user(&u0), *d1 = user(&u1);
    ct_dataset *dc = ct_dataset_concat(2, (ct_dataset *[]){d0, d1});
    CHECK(batch_is_collated(dc, (int64_t[]){5, 0, 6, 3, 4, 1}, 6));
    CHECK(batch_is_collated(dc, (int64_t[]){5, 4}, 2)); /* one source */
    ct_dataset_free(dc);
    CHECK(u0.frees == 0); /* the caller's references are untouched */
    ct_dataset_free(d0);
    ct_dataset_free(d1);
    CHECK(u0.frees == 1 && u1.frees == 1);

    /* strings in the samples: get + collate */
    user_ds s0 = {.n = 2, .kind = 1}, s1 = {.n = 2, .kind = 1};
    ct_dataset *e0 = user(&s0), *e1 = user(&s1);
    ct_dataset *ec = ct_dataset_concat(2, (ct_dataset *[]){e0, e1});
    CHECK(batch_is_collated(ec, (int64_t[]){3, 0, 2}, 3));
    ct_dataset_free(ec);
    ct_dataset_free(e0);
    ct_dataset_free(e1);

    /* float32 and float64 sources: a mixed batch fails as collate does */
    user_ds f0 = {.n = 2, .kind = 0}, f1 = {.n = 2, .kind = 2};
    ct_dataset *g0 = user(&f0), *g1 = user(&f1);
    ct_dataset *gc = ct_dataset_concat(2, (ct_dataset *[]){g0, g1});
    ct_dataset_free(g0);
    ct_dataset_free(g1);
    CHECK(ct_dataset_get_batch(gc, (int64_t[]){0, 3}, 2) == NULL);
    CHECK_ERR(CT_EDTYPE, "(sample 1 is dataset index 3)");
    ct_value *ok = ct_dataset_get_batch(gc, (int64_t[]){3, 2}, 2); /* one source */
    CHECK(ok != NULL);
    ct_value_free(ok);
    ct_dataset_free(gc);

    /* tensors with two leaves, mixed batches of many rows */
    ct_tensor *x1 = ct_randn(CT_SHAPE(30, 3, 2), NULL), *y1 = ct_randint(0, 9, CT_SHAPE(30), NULL);
    ct_tensor *x2 = ct_randn(CT_SHAPE(20, 3, 2), NULL), *y2 = ct_randint(0, 9, CT_SHAPE(20), NULL);
    ct_dataset *t1 = ct_dataset_tensors(2, (ct_tensor *[]){x1, y1});
    ct_dataset *t2 = ct_dataset_tensors(2, (ct_tensor *[]){x2, y2});
    ct_dataset *tc = ct_dataset_concat(3, (ct_dataset *[]){t1, t2, t1});
    int64_t idx[64];
    for (int i = 0; i < 64; i++) idx[i] = (i * 37 + 11) % 80;
    CHECK(batch_is_collated(tc, idx, 64));
    ct_dataset_free(tc);
    ct_dataset_free(t1);
    ct_dataset_free(t2);
    ct_tensor_free(x1);
    ct_tensor_free(y1);
    ct_tensor_free(x2);
    ct_tensor_free(y2);
}

/* ---- random_split ----------------------------------------------------------- */

static void test_random_split(void) {
    ct_dataset *d = arange_ds(10);
    ct_dataset *out[4] = {(ct_dataset *)1, (ct_dataset *)1, (ct_dataset *)1, (ct_dataset *)1};
    CHECK(ct_dataset_random_split(NULL, 2, (int64_t[]){5, 5}, 0, out) == CT_EINVAL);
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK_ERR(CT_EINVAL, "ct_dataset_random_split: dataset is NULL");
    CHECK(ct_dataset_random_split(d, 0, (int64_t[]){10}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "n (the number of splits) must be >= 1");
    CHECK(ct_dataset_random_split(d, 2, NULL, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "lengths is NULL");
    CHECK(ct_dataset_random_split(d, 2, (int64_t[]){5, 5}, 0, NULL) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "out is NULL");
    CHECK(ct_dataset_random_split(d, 3, (int64_t[]){13, -3, 0}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "lengths[0..0] already sum to more than the dataset's 10 samples");
    CHECK(ct_dataset_random_split(d, 3, (int64_t[]){5, -3, 8}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "lengths[1] is -3 (lengths must be >= 0)");
    CHECK(ct_dataset_random_split(d, 2, (int64_t[]){4, 5}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "the lengths sum to 9 but the dataset has 10 samples");
    CHECK(ct_dataset_random_split(d, 2, (int64_t[]){INT64_MAX, 1}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "sum to more than");
    CHECK(out[0] == NULL && out[1] == NULL && out[2] == NULL);

    CHECK(ct_dataset_random_split_fractions(d, 2, (double[]){1.5, -0.5}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "fractions[0] is 1.5 (not between 0 and 1)");
    CHECK(ct_dataset_random_split_fractions(d, 2, (double[]){0.5, NAN}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "fractions[1] is nan");
    CHECK(ct_dataset_random_split_fractions(d, 2, (double[]){0.5, 0.4}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "the fractions sum to 0.90000000000000002, not 1");
    CHECK(ct_dataset_random_split_fractions(d, 2, (double[]){0.6, 0.5}, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "the fractions sum to 1.1000000000000001, not 1");
    CHECK(ct_dataset_random_split_fractions(d, 1, NULL, 0, out) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "fractions is NULL");

    /* 0.1 + 0.2 + 0.7 sums to 1 exactly (Python 3.12's sum) */
    CHECK_OK(ct_dataset_random_split_fractions(d, 3, (double[]){0.1, 0.2, 0.7}, 5, out));
    CHECK(ct_dataset_len(out[0]) == 1 && ct_dataset_len(out[1]) == 2 && ct_dataset_len(out[2]) == 7);
    /* the splits partition the dataset */
    int seen[10] = {0};
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < ct_dataset_len(out[k]); i++) {
            int64_t v = value_at(out[k], i);
            if (v >= 0 && v < 10) seen[v]++;
        }
    for (int i = 0; i < 10; i++) CHECK(seen[i] == 1);
    for (int k = 0; k < 3; k++) ct_dataset_free(out[k]);

    /* the default generator is neither read nor advanced */
    CHECK_OK(ct_manual_seed(77));
    ct_tensor *r1 = ct_randn(CT_SHAPE(4), NULL);
    CHECK_OK(ct_manual_seed(77));
    CHECK_OK(ct_dataset_random_split(d, 2, (int64_t[]){3, 7}, 1, out));
    ct_tensor *r2 = ct_randn(CT_SHAPE(4), NULL);
    CHECK(ct_test_same(r1, r2));
    ct_tensor_free(r1);
    ct_tensor_free(r2);
    /* the same seed, the same split; the splits outlive the caller's dataset */
    ct_dataset *again[2];
    CHECK_OK(ct_dataset_random_split(d, 2, (int64_t[]){3, 7}, 1, again));
    ct_dataset_free(d);
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < ct_dataset_len(out[k]); i++)
            CHECK(value_at(out[k], i) == value_at(again[k], i));
        ct_dataset_free(out[k]);
        ct_dataset_free(again[k]);
    }
    CHECK(ct_randperm_seeded(-1, 0) == NULL);
    ct_clear_error();
}

/* ---- mean and std ------------------------------------------------------------- */

static void test_mean_std(void) {
    ct_tensor *mean = (ct_tensor *)1, *std = (ct_tensor *)1;
    CHECK(ct_dataset_mean_std(NULL, 0, 0, &mean, &std) == CT_EINVAL);
    CHECK(mean == NULL && std == NULL);
    CHECK_ERR(CT_EINVAL, "ct_dataset_mean_std: dataset is NULL");
    ct_tensor *x = ct_arange(0, 24, 1, NULL);
    ct_tensor *x3 = ct_reshape(x, CT_SHAPE(4, 2, 3));
    ct_tensor *y = ct_arange(0, 4, 1, &(ct_topts){.dtype = CT_I64});
    ct_dataset *d = ct_dataset_tensors(2, (ct_tensor *[]){x3, y});
    CHECK(ct_dataset_mean_std(d, 0, 0, NULL, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "mean and std must not be NULL");
    CHECK(ct_dataset_mean_std(d, -1, 0, &mean, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "field must be >= 0");
    CHECK(ct_dataset_mean_std(d, 0, -2, &mean, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "channel_dim must be >= 0, or -1 for none");
    CHECK(ct_dataset_mean_std(d, 0, 2, &mean, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "channel_dim 2 is out of range for samples of 2 dims (field 0)");
    CHECK(ct_dataset_mean_std(d, 1, 0, &mean, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "channel_dim 0 is out of range for samples of 0 dims (field 1)");
    CHECK(ct_dataset_mean_std(d, 2, 0, &mean, &std) == CT_EINDEX);
    CHECK_ERR(CT_EINDEX, "ct_dataset_mean_std: field 2 of samples 0..0");
    CHECK(mean == NULL && std == NULL);
    ct_dataset *empty = ct_dataset_subset(d, NULL, 0);
    CHECK(ct_dataset_mean_std(empty, 0, 0, &mean, &std) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "the dataset is empty");
    ct_dataset_free(empty);

    /* channel 0 of [2, 3] samples: rows 0..2 of each of 4 samples, i.e. the
     * values 6k + {0, 1, 2}: mean 10, population std sqrt(mean((v-10)^2)) */
    CHECK_OK(ct_dataset_mean_std(d, 0, 0, &mean, &std));
    double m[2], s[2];
    CHECK(ct_ndim(mean) == 1 && ct_numel(mean) == 2 && ct_dtype_of(mean) == CT_F64);
    CHECK_OK(ct_read(mean, m, sizeof m));
    CHECK_OK(ct_read(std, s, sizeof s));
    double ss = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++) ss += (6.0 * k + j - 10) * (6.0 * k + j - 10);
    CHECK_NEAR(m[0], 10, 1e-12);
    CHECK_NEAR(m[1], 13, 1e-12);
    CHECK_NEAR(s[0], sqrt(ss / 12), 1e-12);
    CHECK_NEAR(s[1], sqrt(ss / 12), 1e-12);
    ct_tensor_free(mean);
    ct_tensor_free(std);
    /* labels, no channel: 0-dim results */
    CHECK_OK(ct_dataset_mean_std(d, 1, -1, &mean, &std));
    CHECK(ct_ndim(mean) == 0 && ct_ndim(std) == 0);
    double mv, sv;
    CHECK_OK(ct_item(mean, &mv));
    CHECK_OK(ct_item(std, &sv));
    CHECK_NEAR(mv, 1.5, 1e-15);
    CHECK_NEAR(sv, sqrt(1.25), 1e-15);
    ct_tensor_free(mean);
    ct_tensor_free(std);
    ct_dataset_free(d);
    ct_tensor_free(x);
    ct_tensor_free(x3);
    ct_tensor_free(y);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_subset();
    test_concat();
    test_random_split();
    test_mean_std();
    CHECK(ct_tensor_live_count() == live); /* nothing leaked */
    return ct_test_result("dataset_tools");
}
