/* ct_set_post_accumulate_grad_hook (shim/hooks.cpp), in one process: the
 * hook runs once per backward after .grad holds the new total, receives the
 * handle it was registered with, is replaced by a second registration and
 * removed by NULL; refusals for non-leaves and tensors without grad; a hook
 * whose handle was freed stays silent. */
#include "ct_test.h"

typedef struct {
    int calls;
    ct_tensor *seen;  /* the handle of the last call */
    double grad0;     /* .grad[0] as the hook saw it */
} counter;

static void count(ct_tensor *t, void *ctx) {
    counter *c = ctx;
    c->calls++;
    c->seen = t;
    ct_tensor *g = ct_grad(t);
    double v = NAN;
    if (g) {
        ct_tensor *first = ct_select(g, 0, 0);
        ct_item(first, &v);
        ct_tensor_free(first);
    }
    ct_tensor_free(g);
    c->grad0 = v;
}

/* backward of sum(w * k) + sum(w * k): w appears twice, its gradient is 2k. */
static int backward_twice_used(ct_tensor *w, double k) {
    ct_scope *sc = ct_scope_begin();
    ct_tensor *a = ct_sum(ct_mul_scalar(w, k));
    ct_tensor *b = ct_sum(ct_mul_scalar(w, k));
    int rc = a && b ? ct_backward(ct_add(a, b)) : ct_last_code();
    ct_scope_end(sc);
    return rc;
}

int main(void) {
    ct_tensor *w = ct_zeros(CT_SHAPE(3), &(ct_topts){.requires_grad = true});
    counter c1 = {0}, c2 = {0};

    CHECK_OK(ct_set_post_accumulate_grad_hook(w, count, &c1));
    CHECK_OK(backward_twice_used(w, 1.5));
    CHECK(c1.calls == 1);  /* once per backward, after both uses were summed */
    CHECK(c1.seen == w);
    CHECK_NEAR(c1.grad0, 3.0, 0);
    CHECK_OK(backward_twice_used(w, 1.5));
    CHECK(c1.calls == 2);
    CHECK_NEAR(c1.grad0, 6.0, 0);  /* .grad already holds the accumulated total */

    /* A second registration replaces the first. */
    CHECK_OK(ct_set_post_accumulate_grad_hook(w, count, &c2));
    CHECK_OK(backward_twice_used(w, 1.0));
    CHECK(c1.calls == 2);
    CHECK(c2.calls == 1);
    CHECK_NEAR(c2.grad0, 8.0, 0);

    /* NULL removes it; removing twice is fine. */
    CHECK_OK(ct_set_post_accumulate_grad_hook(w, NULL, NULL));
    CHECK_OK(ct_set_post_accumulate_grad_hook(w, NULL, NULL));
    CHECK_OK(backward_twice_used(w, 1.0));
    CHECK(c2.calls == 1);

    /* Refusals. */
    ct_tensor *nograd = ct_zeros(CT_SHAPE(2), NULL);
    CHECK(ct_set_post_accumulate_grad_hook(nograd, count, &c1) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "doesn't require gradient");
    CHECK_OK(ct_set_post_accumulate_grad_hook(nograd, NULL, NULL)); /* no autograd metadata: nothing to do */
    ct_tensor *nonleaf = ct_mul_scalar(w, 2.0);
    CHECK(ct_set_post_accumulate_grad_hook(nonleaf, count, &c1) == CT_ESTATE);
    CHECK_ERR(CT_ESTATE, "non-leaf");
    CHECK(ct_set_post_accumulate_grad_hook(NULL, count, &c1) == CT_EINVAL);
    ct_clear_error();

    /* The hook keeps the handle it was given: once that handle is freed it
     * stays silent rather than pass a stale pointer. */
    ct_tensor *alias = ct_alias(w);
    counter c3 = {0};
    CHECK_OK(ct_set_post_accumulate_grad_hook(alias, count, &c3));
    CHECK_OK(backward_twice_used(w, 1.0));
    CHECK(c3.calls == 1);
    CHECK(c3.seen == alias);
    ct_tensor_free(alias);
    CHECK_OK(backward_twice_used(w, 1.0));
    CHECK(c3.calls == 1);
    CHECK_OK(ct_set_post_accumulate_grad_hook(w, NULL, NULL));

    ct_tensor_free(nonleaf);
    ct_tensor_free(nograd);
    ct_tensor_free(w);
    return ct_test_result("dist_grad_hook");
}
