/* The generic dataset (ct_dataset_new over a user vtable) and TensorDataset:
 * lengths, bounds, error passing, reference counting across threads,
 * ownership and scopes, views vs copies, get_batch against stacked gets,
 * concurrent gets, and no leaked tensor handles. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ct_test.h"

/* ---- a user dataset ------------------------------------------------------- */

typedef struct {
    int64_t n;
    int len_calls, free_calls;
    atomic_int get_calls, batch_calls;
    bool fail_silently; /* get(3) returns NULL without an error */
    bool with_batch;
} user_ds;

static int64_t u_len(void *self) {
    user_ds *u = self;
    u->len_calls++;
    return u->n;
}

/* Sample i: the tensor [i, 10 i] (float32) — enough for collate to stack. */
static ct_value *u_get(void *self, int64_t i) {
    user_ds *u = self;
    atomic_fetch_add(&u->get_calls, 1);
    if (i == 3 && u->fail_silently) return NULL;
    if (i == 4) {
        ct_set_error(CT_EIO, "user: sample 4 is unreadable");
        return NULL;
    }
    float v[2] = {(float)i, (float)(10 * i)};
    return ct_value_tensor(ct_from_data(v, CT_SHAPE(2), CT_F32));
}

static ct_value *u_get_batch(void *self, const int64_t *idx, int64_t n) {
    user_ds *u = self;
    atomic_fetch_add(&u->batch_calls, 1);
    if (idx[0] == 3 && u->fail_silently) return NULL;
    return ct_value_int(n);
}

static void u_free(void *self) { ((user_ds *)self)->free_calls++; }

static int64_t bad_len(void *self) { return -1; }

/* Sample 2 has another shape than the rest: collate must fail on it. */
static ct_value *ragged_get(void *self, int64_t i) {
    return ct_value_tensor(ct_zeros(CT_SHAPE(i == 2 ? 3 : 2), NULL));
}

static void test_user_dataset(void) {
    ct_dataset_vtable vt = {u_len, u_get, NULL, u_free};
    user_ds u = {.n = 6, .fail_silently = true};

    CHECK(ct_dataset_new(NULL, &u) == NULL);
    CHECK_ERR(CT_EINVAL, "vtable is NULL");
    ct_dataset_vtable no_get = {u_len, NULL, NULL, u_free};
    CHECK(ct_dataset_new(&no_get, &u) == NULL);
    CHECK_ERR(CT_EINVAL, "no get");
    ct_dataset_vtable neg = {bad_len, u_get, NULL, u_free};
    CHECK(ct_dataset_new(&neg, &u) == NULL);
    CHECK_ERR(CT_EINVAL, "len() returned -1");
    CHECK(u.free_calls == 0); /* never called on failure */

    ct_dataset *d = ct_dataset_new(&vt, &u);
    CHECK(d != NULL);
    CHECK(ct_dataset_len(d) == 6);
    CHECK(ct_dataset_len(d) == 6);
    CHECK(u.len_calls == 1);

    ct_value *s = ct_dataset_get(d, 2);
    float v[2] = {0, 0};
    CHECK(s && ct_read(ct_value_get_tensor(s), v, sizeof v) == 0 && v[0] == 2 && v[1] == 20);
    ct_value_free(s);

    CHECK(ct_dataset_get(d, 6) == NULL);
    CHECK_ERR(CT_EINDEX, "index 6 out of range for a dataset of length 6");
    CHECK(ct_dataset_get(d, -1) == NULL);
    CHECK_ERR(CT_EINDEX, "index -1");
    int calls = atomic_load(&u.get_calls);
    CHECK(calls == 1); /* bounds are checked before the user's get runs */

    /* A stale error must not pass for the user's: */
    ct_set_error(CT_ESHAPE, "an old, unrelated failure");
    CHECK(ct_dataset_get(d, 3) == NULL);
    CHECK_ERR(CT_ETRIAL, "get(3) returned NULL without setting an error");
    CHECK(ct_dataset_get(d, 4) == NULL);
    CHECK_ERR(CT_EIO, "user: sample 4 is unreadable");

    /* get_batch without a fast path: get + ct_collate, equal to stacking. */
    int64_t idx[3] = {5, 0, 5};
    ct_value *b = ct_dataset_get_batch(d, idx, 3);
    ct_tensor *parts[3];
    ct_value *samples[3];
    for (int i = 0; i < 3; i++) {
        samples[i] = ct_dataset_get(d, idx[i]);
        parts[i] = ct_value_get_tensor(samples[i]);
    }
    ct_value *stacked = ct_value_tensor(ct_stack(3, parts, 0));
    CHECK(b && ct_value_equal(b, stacked));
    ct_value_free(b);
    ct_value_free(stacked);
    for (int i = 0; i < 3; i++) ct_value_free(samples[i]);
    int64_t failing[2] = {0, 4};
    CHECK(ct_dataset_get_batch(d, failing, 2) == NULL);
    CHECK_ERR(CT_EIO, "sample 4 is unreadable");
    int64_t outside[2] = {0, 6};
    CHECK(ct_dataset_get_batch(d, outside, 2) == NULL);
    CHECK_ERR(CT_EINDEX, "index 6 out of range");
    CHECK(ct_dataset_get_batch(d, idx, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "n must be > 0");
    CHECK(ct_dataset_get_batch(d, NULL, 2) == NULL);
    CHECK_ERR(CT_EINVAL, "indices is NULL");

    /* A collate failure names the dataset index of the odd sample. */
    ct_dataset_vtable ragged_vt = {u_len, ragged_get, NULL, NULL};
    ct_dataset *r = ct_dataset_new(&ragged_vt, &u);
    int64_t mixed_shapes[3] = {0, 1, 2};
    CHECK(ct_dataset_get_batch(r, mixed_shapes, 3) == NULL);
    CHECK_ERR(CT_ESHAPE, "(sample 2 is dataset index 2)");
    ct_dataset_free(r);

    /* References: the last free frees self, once. */
    CHECK(ct_dataset_ref(d) == d);
    ct_dataset_ref(d);
    ct_dataset_free(d);
    ct_dataset_free(d);
    CHECK(u.free_calls == 0);
    ct_dataset_free(d);
    CHECK(u.free_calls == 1);
    ct_dataset_free(NULL);
    CHECK(ct_dataset_ref(NULL) == NULL);
    CHECK(ct_dataset_len(NULL) == -1);
    CHECK_ERR(CT_EINVAL, "dataset is NULL");
    CHECK(ct_dataset_get(NULL, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "dataset is NULL");

    /* A user get_batch is used as is, after the bounds check. */
    ct_dataset_vtable fast = {u_len, u_get, u_get_batch, u_free};
    user_ds w = {.n = 6, .fail_silently = true};
    d = ct_dataset_new(&fast, &w);
    int64_t v64 = 0;
    b = ct_dataset_get_batch(d, idx, 3);
    CHECK(b && ct_value_get_int(b, &v64) == 0 && v64 == 3);
    ct_value_free(b);
    int64_t three[1] = {3};
    CHECK(ct_dataset_get_batch(d, three, 1) == NULL);
    CHECK_ERR(CT_ETRIAL, "get_batch of 1 samples (first index 3) returned NULL");
    CHECK(ct_dataset_get_batch(d, outside, 2) == NULL);
    CHECK_ERR(CT_EINDEX, "index 6");
    CHECK(atomic_load(&w.batch_calls) == 2);
    ct_dataset_free(d);
    CHECK(w.free_calls == 1);
}

/* ---- reference counting from many threads ---------------------------------- */

static void *ref_unref(void *arg) {
    ct_dataset *d = arg;
    for (int i = 0; i < 20000; i++) {
        ct_dataset_ref(d);
        ct_dataset_free(d);
    }
    return NULL;
}

static void test_refcount_threads(void) {
    ct_dataset_vtable vt = {u_len, u_get, NULL, u_free};
    user_ds u = {.n = 1};
    ct_dataset *d = ct_dataset_new(&vt, &u);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, ref_unref, d);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK(u.free_calls == 0);
    ct_dataset_free(d);
    CHECK(u.free_calls == 1);
}

/* ---- TensorDataset ----------------------------------------------------------- */

/* get_batch equals stacking the get() results leaf by leaf with ct_stack. */
static bool batch_matches_gets(ct_dataset *d, const int64_t *idx, int64_t n) {
    ct_value *batch = ct_dataset_get_batch(d, idx, n);
    ct_value **samples = calloc((size_t)n, sizeof *samples);
    ct_tensor **col = calloc((size_t)n, sizeof *col);
    for (int64_t i = 0; i < n; i++) samples[i] = ct_dataset_get(d, idx[i]);
    bool tuple = ct_value_kind_of(samples[0]) == CT_VALUE_TUPLE;
    size_t leaves = tuple ? ct_value_len(samples[0]) : 1;
    ct_value *want = tuple ? ct_value_tuple() : NULL;
    for (size_t j = 0; j < leaves; j++) {
        for (int64_t i = 0; i < n; i++)
            col[i] = ct_value_get_tensor(tuple ? ct_value_list_get(samples[i], j) : samples[i]);
        ct_value *leaf = ct_value_tensor(ct_stack((int)n, col, 0));
        if (tuple) ct_value_list_append(want, leaf);
        else want = leaf;
    }
    bool ok = batch && want && ct_value_equal(batch, want);
    for (int64_t i = 0; i < n; i++) ct_value_free(samples[i]);
    free(samples);
    free(col);
    ct_value_free(batch);
    ct_value_free(want);
    return ok;
}

static void test_tensors(void) {
    ct_tensor *r = ct_arange(0, 12, 1, NULL);
    ct_tensor *x = ct_reshape(r, CT_SHAPE(4, 3));
    ct_tensor_free(r);
    ct_tensor *y = ct_arange(0, 4, 1, &(ct_topts){.dtype = CT_I64});
    ct_tensor *x_ref = ct_clone(x);
    ct_tensor *y5 = ct_zeros(CT_SHAPE(5), NULL);
    ct_tensor *scalar = ct_scalar_tensor(1, NULL);

    CHECK(ct_dataset_tensors(0, (ct_tensor *[]){x}) == NULL);
    CHECK_ERR(CT_EINVAL, "n must be >= 1");
    CHECK(ct_dataset_tensors(1, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "tensors is NULL");
    CHECK(ct_dataset_tensors(2, (ct_tensor *[]){x, NULL}) == NULL);
    CHECK_ERR(CT_EINVAL, "tensor 1 is NULL");
    CHECK(ct_dataset_tensors(2, (ct_tensor *[]){x, y5}) == NULL);
    CHECK_ERR(CT_ESHAPE, "tensor 1 has size(0) 5 but tensor 0 has 4");
    CHECK(ct_dataset_tensors(3, (ct_tensor *[]){x, y, scalar}) == NULL);
    CHECK_ERR(CT_ESHAPE, "tensor 2 is 0-dim");

    /* The dataset keeps its own references: the caller's may go. */
    ct_scope *sc = ct_scope_begin();
    ct_dataset *d = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
    ct_scope_end(sc);
    ct_tensor_free(x);
    ct_tensor_free(y);
    CHECK(ct_dataset_len(d) == 4);
    ct_value *s = ct_dataset_get(d, 2);
    CHECK(ct_value_kind_of(s) == CT_VALUE_TUPLE && ct_value_len(s) == 2);
    ct_tensor *row = ct_select(x_ref, 0, 2);
    ct_tensor *a = ct_value_get_tensor(ct_value_list_get(s, 0));
    ct_tensor *lbl = ct_value_get_tensor(ct_value_list_get(s, 1));
    ct_value *want_row = ct_value_tensor(row);
    ct_value *got_row = ct_value_tensor(ct_alias(a));
    CHECK(ct_value_equal(want_row, got_row));
    int64_t label = -1;
    CHECK(ct_ndim(lbl) == 0 && ct_item_int(lbl, &label) == 0 && label == 2);
    /* Samples are views, as torch's TensorDataset's are: an in-place change
     * shows in the next get. */
    CHECK_OK(ct_fill_(a, 99));
    ct_value *again = ct_dataset_get(d, 2);
    CHECK(ct_value_equal(again, s));
    ct_value_free(again);
    ct_value_free(s);
    ct_value_free(want_row);
    ct_value_free(got_row);

    CHECK(ct_dataset_get(d, 4) == NULL);
    CHECK_ERR(CT_EINDEX, "index 4 out of range for a dataset of length 4");
    int64_t idx[5] = {3, 3, 0, 1, 2};
    CHECK(batch_matches_gets(d, idx, 5));
    ct_dataset_free(d);

    /* get_batch copies rows of contiguous tensors itself; a transposed view
     * and a tensor that requires grad take index_select instead. Same batch. */
    ct_tensor *wide = ct_randn(CT_SHAPE(3, 6), NULL);
    ct_tensor *view = ct_t(wide);
    ct_tensor *leaf = ct_randn(CT_SHAPE(6, 2), &(ct_topts){.requires_grad = true});
    d = ct_dataset_tensors(3, (ct_tensor *[]){view, leaf, x_ref});
    CHECK(d == NULL); /* 6 rows vs x_ref's 4 */
    CHECK_ERR(CT_ESHAPE, "tensor 2 has size(0) 4 but tensor 0 has 6");
    d = ct_dataset_tensors(2, (ct_tensor *[]){view, leaf});
    CHECK(!ct_is_contiguous(view) && d != NULL);
    int64_t rows[4] = {5, 0, 5, 2};
    CHECK(batch_matches_gets(d, rows, 4));
    ct_dataset_free(d);
    ct_tensor_free(wide);
    ct_tensor_free(view);
    ct_tensor_free(leaf);

    /* One tensor: the sample is the tensor itself. An empty dataset is fine
     * here (the loader refuses it). */
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), NULL);
    d = ct_dataset_tensors(1, &e);
    CHECK(d && ct_dataset_len(d) == 0);
    CHECK(ct_dataset_get(d, 0) == NULL);
    CHECK_ERR(CT_EINDEX, "index 0 out of range for a dataset of length 0");
    ct_dataset_free(d);
    d = ct_dataset_tensors(1, &x_ref);
    s = ct_dataset_get(d, 1);
    CHECK(ct_value_kind_of(s) == CT_VALUE_TENSOR && ct_ndim(ct_value_get_tensor(s)) == 1);
    ct_value_free(s);
    ct_dataset_free(d);

    ct_tensor_free(e);
    ct_tensor_free(x_ref);
    ct_tensor_free(y5);
    ct_tensor_free(scalar);
}

/* ---- concurrent use ------------------------------------------------------------ */

typedef struct {
    ct_dataset *d;
    ct_value *want; /* the batch of all samples, computed up front */
    int ok;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    int64_t n = ct_dataset_len(w->d), idx[64];
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    w->ok = 1;
    for (int round = 0; round < 50; round++) {
        ct_value *b = ct_dataset_get_batch(w->d, idx, n);
        if (!b || !ct_value_equal(b, w->want)) w->ok = 0;
        ct_value_free(b);
        ct_value_free(ct_dataset_get(w->d, round % n));
    }
    return NULL;
}

static void test_threads(void) {
    ct_tensor *x = ct_randn(CT_SHAPE(64, 5, 2), NULL);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(64), NULL);
    ct_dataset *d = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
    int64_t idx[64];
    for (int i = 0; i < 64; i++) idx[i] = i;
    worker_arg w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_arg){ct_dataset_ref(d), ct_dataset_get_batch(d, idx, 64), 0};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].ok);
        ct_value_free(w[i].want);
        ct_dataset_free(w[i].d);
    }
    ct_dataset_free(d);
    ct_tensor_free(x);
    ct_tensor_free(y);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_user_dataset();
    test_refcount_threads();
    test_tensors();
    test_threads();
    CHECK(ct_tensor_live_count() == live); /* nothing leaked */
    return ct_test_result("dataset_api");
}
