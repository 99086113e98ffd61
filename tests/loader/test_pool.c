/* The loader's memory pool (src/data/pool.h, internal): a freed tensor's
 * block serves the next tensor of about its size, never one still held;
 * the least recently returned block goes when more than `keep` wait; a
 * thread's current pool serves cti_buf_empty and no other thread's; the
 * pool outlives its owner's release while tensors from it live; two
 * threads taking and giving back at once. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "ct_test.h"
#include "data/pool.h"

static ct_tensor *floats(cti_buf_pool *p, int64_t n) { return cti_buf_pool_empty(p, 1, (int64_t[]){n}, CT_F32); }

static void test_reuse(void) {
    cti_buf_pool *p = cti_buf_pool_new(2, "test");
    ct_tensor *a = floats(p, 1000);
    CHECK(a && ct_is_contiguous(a) && ct_numel(a) == 1000 && ct_dtype_of(a) == CT_F32);
    CHECK(((uintptr_t)ct_data_ptr(a) & 63) == 0); /* 64-byte aligned, as libtorch's own */
    void *at = ct_data_ptr(a);
    ct_tensor *held = floats(p, 1000);
    CHECK(ct_data_ptr(held) != at);
    ct_tensor *view = ct_narrow(a, 0, 10, 5);
    ct_tensor_free(a);
    ct_tensor *b = floats(p, 1000);
    CHECK(ct_data_ptr(b) != at); /* a's storage lives on in its view */
    ct_tensor_free(view);
    ct_tensor *c = floats(p, 600);
    CHECK(ct_data_ptr(c) == at); /* a's block, back: 600 fits in it */
    ct_tensor_free(c);
    ct_tensor *small = floats(p, 100); /* a block over twice its size is not taken */
    CHECK(ct_data_ptr(small) != at);
    ct_tensor *d = cti_buf_pool_empty(p, 2, (int64_t[]){10, 100}, CT_F32);
    CHECK(ct_data_ptr(d) == at && ct_size(d, 0) == 10);
    /* keep 2: three back, the first of them (b) is dropped */
    void *b_at = ct_data_ptr(b), *held_at = ct_data_ptr(held), *d_at = ct_data_ptr(d);
    ct_tensor_free(b);
    ct_tensor_free(held);
    ct_tensor_free(d);
    ct_tensor *e = floats(p, 1000), *f = floats(p, 1000), *g = floats(p, 1000);
    CHECK(ct_data_ptr(e) == d_at || ct_data_ptr(e) == held_at);
    CHECK(ct_data_ptr(f) == d_at || ct_data_ptr(f) == held_at);
    CHECK(ct_data_ptr(e) != ct_data_ptr(f));
    (void)b_at; /* g is a new block (malloc may place it where b was) */
    /* released with tensors out: they stay valid, their blocks freed as they die */
    CHECK(ct_fill_(g, 3.0) == 0);
    cti_buf_pool_release(p);
    double v = 0;
    ct_tensor *s = ct_sum(g);
    CHECK(ct_item(s, &v) == 0 && v == 3000.0);
    ct_tensor_free(s);
    ct_tensor_free(e);
    ct_tensor_free(f);
    ct_tensor_free(g);
    ct_tensor_free(small);
}

static void test_current(void) {
    cti_buf_pool *p = cti_buf_pool_new(4, "test");
    CHECK(cti_buf_pool_current() == NULL);
    ct_tensor *plain = cti_buf_empty(1, (int64_t[]){4000}, CT_U8);
    CHECK(plain && ct_dtype_of(plain) == CT_U8);
    ct_tensor_free(plain);
    cti_buf_pool_use(p);
    ct_tensor *a = cti_buf_empty(1, (int64_t[]){4000}, CT_U8);
    void *at = ct_data_ptr(a);
    ct_tensor_free(a);
    ct_tensor *b = cti_buf_empty(1, (int64_t[]){1000}, CT_F32);
    CHECK(ct_data_ptr(b) == at);
    cti_buf_pool_use(NULL);
    CHECK(cti_buf_pool_current() == NULL);
    ct_tensor_free(b);
    cti_buf_pool_release(p);
}

static void *churn(void *arg) {
    cti_buf_pool *p = arg;
    cti_buf_pool_use(p);
    for (int i = 0; i < 2000; i++) {
        ct_tensor *t = cti_buf_empty(1, (int64_t[]){100 + (i * 37) % 5000}, CT_F32);
        if (!t || ct_fill_(t, (double)i) != 0) return (void *)1;
        ct_tensor_free(t);
    }
    cti_buf_pool_use(NULL);
    return NULL;
}

static void test_threads(void) {
    cti_buf_pool *p = cti_buf_pool_new(6, "test");
    pthread_t th[2];
    void *rc[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, churn, p) == 0);
    for (int i = 0; i < 2; i++) CHECK(pthread_join(th[i], &rc[i]) == 0 && rc[i] == NULL);
    CHECK(cti_buf_pool_current() == NULL); /* the threads' settings were theirs */
    cti_buf_pool_release(p);
}

int main(void) {
    size_t live = ct_tensor_live_count();
    test_reuse();
    test_current();
    test_threads();
    CHECK(ct_tensor_live_count() == live);
    return ct_test_result("loader_pool");
}
