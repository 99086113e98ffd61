/* tests/errors/errors_scopes.c — ownership: scopes free what was made in
 * them (outputs through pointers too), ct_keep and ct_scope_return move
 * tensors out, nested scopes and ending an outer scope first, scopes per
 * thread, from_blob's deleter (exactly once, never when the call fails), and
 * a long loop of scoped training steps that must not leak handles. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "errors_util.h"

static void basic_scope(void) {
    size_t live = ct_tensor_live_count();
    ct_scope *s = ct_scope_begin();
    CHECK(s != NULL);
    CHECK(ct_scope_size(s) == 0);
    ct_tensor *a = ct_ones(CT_SHAPE(2, 2), NULL);
    ct_tensor *b = ct_relu(ct_add_scalar(a, 1)); /* the intermediate is owned too */
    CHECK(ct_scope_size(s) == 3);
    CHECK(ct_tensor_live_count() == live + 3);
    /* outputs written through pointers belong to the scope as well */
    ct_tensor *v = NULL, *i = NULL, *pieces[2] = {NULL, NULL};
    CHECK(ct_max_dim(b, 0, false, &v, &i) == 0);
    CHECK(ct_split(b, 1, 0, pieces, 2) == 2);
    ct_tensor *ti = NULL;
    CHECK(ct_topk(b, 1, 0, true, true, &ti) != NULL);
    CHECK(ct_scope_size(s) == 3 + 2 + 2 + 2);
    /* freeing a scoped tensor removes it from the scope */
    ct_tensor_free(pieces[1]);
    CHECK(ct_scope_size(s) == 8);
    ct_scope_end(s);
    CHECK(ct_tensor_live_count() == live);
    CHECK(!ct_is_defined(a) && !ct_is_defined(b) && !ct_is_defined(v) && !ct_is_defined(pieces[0]));
    /* with no scope open the caller owns new tensors */
    ct_tensor *own = ct_ones(CT_SHAPE(1), NULL);
    CHECK(ct_tensor_live_count() == live + 1);
    ct_tensor_free(own);
    CHECK(ct_tensor_live_count() == live);
}

static void keep_and_return(void) {
    size_t live = ct_tensor_live_count();
    ct_scope *s = ct_scope_begin();
    ct_tensor *kept = ct_keep(ct_full(CT_SHAPE(3), 2, NULL));
    ct_tensor *temp = ct_ones(CT_SHAPE(3), NULL);
    CHECK(ct_scope_size(s) == 1);
    CHECK(ct_keep(kept) == kept); /* keeping twice is harmless */
    ct_scope_end(s);
    CHECK(ct_is_defined(kept) && !ct_is_defined(temp));
    double v = 0;
    ct_tensor *sum = ct_sum(kept);
    CHECK(ct_item(sum, &v) == 0 && v == 6.0);
    ct_tensor_free(sum);
    ct_tensor_free(kept);
    CHECK(ct_tensor_live_count() == live);

    /* a helper with its own scope hands its result to the caller's scope */
    ct_scope *outer = ct_scope_begin();
    ct_scope *inner = ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(4), NULL);
    ct_tensor *r = ct_scope_return(ct_mul_scalar(x, 3));
    CHECK(ct_scope_size(inner) == 1 && ct_scope_size(outer) == 1);
    ct_scope_end(inner);
    CHECK(!ct_is_defined(x) && ct_is_defined(r));
    CHECK(ct_item(ct_sum(r), &v) == 0 && v == 12.0); /* the sum lands in outer */
    CHECK(ct_scope_size(outer) == 2);
    ct_scope_end(outer);
    CHECK(!ct_is_defined(r));
    CHECK(ct_tensor_live_count() == live);

    /* returning from the outermost scope gives the tensor to the caller */
    ct_scope *only = ct_scope_begin();
    ct_tensor *mine = ct_scope_return(ct_ones(CT_SHAPE(1), NULL));
    CHECK(ct_scope_size(only) == 0);
    ct_scope_end(only);
    CHECK(ct_is_defined(mine));
    ct_tensor_free(mine);
    /* an unscoped tensor is returned as is */
    ct_tensor *free_standing = ct_ones(CT_SHAPE(1), NULL);
    CHECK(ct_scope_return(free_standing) == free_standing && ct_keep(free_standing) == free_standing);
    ct_tensor_free(free_standing);
    CHECK(ct_tensor_live_count() == live);
}

static void nested_scopes(void) {
    size_t live = ct_tensor_live_count();
    ct_scope *outer = ct_scope_begin();
    ct_tensor *a = ct_ones(CT_SHAPE(2), NULL);
    ct_scope *mid = ct_scope_begin();
    ct_tensor *b = ct_ones(CT_SHAPE(2), NULL);
    ct_scope *inner = ct_scope_begin();
    ct_tensor *c = ct_add(a, b);
    CHECK(ct_scope_size(outer) == 1 && ct_scope_size(mid) == 1 && ct_scope_size(inner) == 1);
    /* ending the innermost leaves the others alone */
    ct_scope_end(inner);
    CHECK(!ct_is_defined(c) && ct_is_defined(b) && ct_is_defined(a));
    ct_tensor *d = ct_neg(b); /* lands in mid again */
    CHECK(ct_scope_size(mid) == 2);
    ct_scope *inner2 = ct_scope_begin();
    ct_tensor *e = ct_neg(a);
    (void)inner2;
    /* ending the outer scope ends mid and inner2 first */
    ct_scope_end(outer);
    CHECK(!ct_is_defined(a) && !ct_is_defined(b) && !ct_is_defined(d) && !ct_is_defined(e));
    CHECK(ct_tensor_live_count() == live);
    /* no scope is open any more: new tensors are the caller's */
    ct_tensor *after = ct_ones(CT_SHAPE(1), NULL);
    ct_scope *probe = ct_scope_begin();
    CHECK(ct_scope_size(probe) == 0);
    ct_scope_end(probe);
    CHECK(ct_is_defined(after));
    ct_tensor_free(after);
    CHECK(ct_tensor_live_count() == live);
}

/* Scopes are per thread: a thread's scope owns only that thread's tensors. */
static void *thread_scope(void *arg) {
    size_t *made = arg;
    ct_scope *s = ct_scope_begin();
    for (int i = 0; i < 5; i++) ct_ones(CT_SHAPE(2), NULL);
    made[0] = ct_scope_size(s);
    ct_scope_end(s);
    return NULL;
}

static void scopes_per_thread(void) {
    size_t live = ct_tensor_live_count();
    ct_scope *s = ct_scope_begin();
    ct_tensor *mine = ct_ones(CT_SHAPE(2), NULL);
    size_t made[1] = {0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_scope, made) == 0);
    pthread_join(th, NULL);
    CHECK(made[0] == 5);
    CHECK(ct_scope_size(s) == 1 && ct_is_defined(mine));
    ct_scope_end(s);
    CHECK(ct_tensor_live_count() == live);
}

static int g_deleted;
static void *g_deleted_ptr;
static void count_deleter(void *data, void *ctx) {
    g_deleted++;
    g_deleted_ptr = data;
    CHECK(ctx == (void *)&g_deleted);
}

static void blob_deleter(void) {
    float mem[4] = {1, 2, 3, 4};
    /* the last reference is a view */
    g_deleted = 0;
    ct_tensor *b = ct_from_blob(mem, CT_SHAPE(4), CT_F32, count_deleter, &g_deleted);
    CHECK(b != NULL);
    ct_tensor *view = ct_slice(b, 0, 1, 3, 1);
    ct_tensor *al = ct_alias(b);
    ct_tensor_free(b);
    ct_tensor_free(al);
    CHECK(g_deleted == 0);
    ct_tensor_free(view);
    CHECK(g_deleted == 1 && g_deleted_ptr == mem);

    /* the last reference is held by autograd (a tensor saved for backward) */
    g_deleted = 0;
    b = ct_from_blob(mem, CT_SHAPE(4), CT_F32, count_deleter, &g_deleted);
    CHECK(ct_set_requires_grad(b, true) == 0);
    ct_tensor *m = ct_mul(b, b);
    ct_tensor *y = ct_sum(m);
    ct_tensor_free(m);
    ct_tensor_free(b);
    CHECK(g_deleted == 0);
    ct_tensor_free(y);
    CHECK(g_deleted == 1);

    /* freed by a scope's end; a copy does not keep the memory */
    g_deleted = 0;
    ct_scope *s = ct_scope_begin();
    b = ct_from_blob(mem, CT_SHAPE(2, 2), CT_F32, count_deleter, &g_deleted);
    ct_tensor *copy = ct_keep(ct_clone(b));
    ct_tensor *cont = ct_keep(ct_contiguous(b)); /* contiguous already: the same storage */
    ct_scope_end(s);
    CHECK(g_deleted == 0);
    ct_tensor_free(cont);
    CHECK(g_deleted == 1);
    ct_tensor_free(copy);
    CHECK(g_deleted == 1);

    /* failed calls never call the deleter */
    g_deleted = 0;
    ct_clear_error();
    CHECK(ct_from_blob(mem, CT_SHAPE(2, -2), CT_F32, count_deleter, &g_deleted) == NULL);
    CHECK(ct_last_code() == CT_ESHAPE);
    CHECK(ct_from_blob(NULL, CT_SHAPE(4), CT_F32, count_deleter, &g_deleted) == NULL);
    CHECK(ct_last_code() == CT_EINVAL);
    CHECK(ct_from_blob(mem, 2, NULL, CT_F32, count_deleter, &g_deleted) == NULL);
    CHECK(ct_last_code() == CT_EINVAL);
    ct_clear_error();
    CHECK(g_deleted == 0);

    /* no deleter: the caller keeps the memory; the tensor reads it */
    ct_tensor *nd = ct_from_blob(mem, CT_SHAPE(4), CT_F32, NULL, NULL);
    double v = 0;
    ct_tensor *sum = ct_sum(nd);
    CHECK(ct_item(sum, &v) == 0 && v == 10.0);
    ct_tensor_free(sum);
    ct_tensor_free(nd);
}

/* A dtype outside the enumerators fails before the deleter is taken. */
static void blob_bad_dtype(void) {
    float mem[4] = {1, 2, 3, 4};
    g_deleted = 0;
    CHECK(ct_from_blob(mem, CT_SHAPE(4), (ct_dtype)99, count_deleter, &g_deleted) == NULL);
    CHECK(ct_last_code() == CT_EDTYPE);
    CHECK(g_deleted == 0);
    CHILD_DONE();
}

/* One training step as a trial writes it, in a scope. */
static void scoped_step(ct_tensor *w, ct_tensor *bias) {
    ct_scope *s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(8, 5), NULL);
    ct_tensor *target = ct_randint(0, 3, CT_SHAPE(8), &(ct_topts){.dtype = CT_I64});
    ct_tensor *logits = ct_linear(ct_relu(x), w, bias);
    ct_tensor *loss = ct_cross_entropy(logits, target);
    if (ct_backward(loss) != 0) CHECK(!"backward failed");
    ct_tensor *values = NULL, *idx = NULL, *parts[3] = {NULL, NULL, NULL};
    ct_max_dim(logits, 1, false, &values, &idx);
    ct_split(logits, 3, 0, parts, 3);
    ct_tensor *correct = ct_sum(ct_eq(idx, target));
    int64_t n = -1;
    if (ct_item_int(correct, &n) != 0 || n < 0 || n > 8) CHECK(!"accuracy count");
    /* an SGD step without autograd, then zero the grads */
    ct_guard *g = ct_no_grad();
    ct_tensor *gw = ct_grad(w), *gb = ct_grad(bias);
    ct_add_(w, gw, -0.01);
    ct_add_(bias, gb, -0.01);
    ct_guard_end(g);
    ct_zero_grad(w, true);
    ct_zero_grad(bias, true);
    ct_scope_end(s);
}

static void flat_live_count(void) {
    ct_tensor *w = ct_randn(CT_SHAPE(3, 5), &(ct_topts){.requires_grad = true});
    ct_tensor *bias = ct_zeros(CT_SHAPE(3), &(ct_topts){.requires_grad = true});
    size_t live = ct_tensor_live_count();
    size_t at_10 = 0;
    ct_clear_error();
    for (int i = 0; i < 1000; i++) {
        scoped_step(w, bias);
        if (i == 10) at_10 = ct_tensor_live_count();
    }
    CHECK(at_10 == live);
    CHECK(ct_tensor_live_count() == live);
    CHECK(ct_last_code() == CT_OK);
    ct_tensor_free(w);
    ct_tensor_free(bias);
}

/* Ending a scope twice must be reported, not crash (run in a child). */
static void end_scope_twice(void) {
    ct_scope *s = ct_scope_begin();
    ct_ones(CT_SHAPE(1), NULL);
    ct_scope_end(s);
    ct_clear_error();
    ct_scope_end(s);
    exit(ct_last_code() == CT_ESTATE && strstr(ct_last_error(), "twice") ? 0 : 3);
}

/* ct_shape with no array but a positive max must not write through NULL. */
static void shape_into_null(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), NULL);
    int n = ct_shape(x, NULL, 2);
    exit(n == -1 ? 0 : 4);
}

int main(void) {
    basic_scope();
    keep_and_return();
    nested_scopes();
    scopes_per_thread();
    blob_deleter();
    flat_live_count();
    CHECK_IN_CHILD(blob_bad_dtype);
    CHECK_IN_CHILD(end_scope_twice);
    CHECK_IN_CHILD(shape_into_null);
    return ct_test_result("errors_scopes");
}
