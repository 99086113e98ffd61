/* tests/errors/errors_ops.c — ops given inputs that cannot work: mismatched
 * shapes, wrong dtypes, indices out of range, bad values, autograd misuse.
 * Each must fail with the right code and a message naming the problem. */
#define _POSIX_C_SOURCE 200809L
#include "errors_util.h"

static const ct_topts I64 = {.dtype = CT_I64};
static const ct_topts I32 = {.dtype = CT_I32};
static const ct_topts F64 = {.dtype = CT_F64};
static const ct_topts GRAD = {.requires_grad = true};

static void shapes(void) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), NULL), *b = ct_ones(CT_SHAPE(4, 5), NULL);
    ct_tensor *c = ct_ones(CT_SHAPE(3, 4), NULL);
    CHECK_NULL_ERR(ct_matmul(a, b), CT_ESHAPE, "2x3", "ct_matmul");
    CHECK_NULL_ERR(ct_mm(a, b), CT_ESHAPE, "2x3", "ct_mm");
    /* the exact code of these is libtorch's wording: any code, a clear message */
    CHECK_NULL_FAILS(ct_mm(a, ct_ones(CT_SHAPE(3), NULL)), "must be a matrix");
    CHECK_NULL_FAILS(ct_bmm(a, c), "3D");
    CHECK_NULL_ERR(ct_add(a, c), CT_ESHAPE, "size of tensor a (3)", "(4)");
    CHECK_NULL_ERR(ct_mul(b, a), CT_ESHAPE, "must match", NULL);
    CHECK_NULL_ERR(ct_where(ct_gt_scalar(a, 0), a, b), CT_ESHAPE, "must match", NULL);
    CHECK_NULL_ERR(ct_cat(2, (ct_tensor *[]){a, c}, 0), CT_ESHAPE, "Expected size 3 but got size 4", "ct_cat");
    CHECK_NULL_ERR(ct_cat(2, (ct_tensor *[]){a, ct_ones(CT_SHAPE(3), NULL)}, 0), CT_ESHAPE, "dim", NULL);
    CHECK_NULL_ERR(ct_stack(2, (ct_tensor *[]){a, c}, 0), CT_ESHAPE, "equal size", "ct_stack");
    CHECK_NULL_ERR(ct_view(a, CT_SHAPE(5, 5)), CT_ESHAPE, "[5, 5]", "size 6");
    CHECK_NULL_ERR(ct_reshape(a, CT_SHAPE(-1, 4)), CT_ESHAPE, "[-1, 4]", "ct_reshape");
    CHECK_NULL_ERR(ct_view(ct_t(c), CT_SHAPE(12)), CT_ESHAPE, "stride", "ct_view");
    CHECK_NULL_ERR(ct_expand(c, CT_SHAPE(2, 4)), CT_ESHAPE, "expanded size", NULL);
    CHECK_NULL_ERR(ct_permute(c, CT_SHAPE(0, 1, 2)), CT_ESHAPE, "dim", "ct_permute");
    CHECK_NULL_FAILS(ct_permute(c, CT_SHAPE(0, 0)), "duplicate dims");
    CHECK_NULL_ERR(ct_repeat(c, CT_SHAPE(2)), CT_ESHAPE, "dimensions", "ct_repeat");
    CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2, -3), NULL), CT_ESHAPE, "-3", "ct_zeros");
    CHECK_NULL_ERR(ct_reshape(c, -1, (const int64_t[]){1}), CT_EINVAL, "negative", NULL);
    CHECK_NULL_ERR(ct_linear(c, b, NULL), CT_ESHAPE, "[4, 5]", "ct_linear");
    CHECK_NULL_ERR(ct_linear(c, ct_ones(CT_SHAPE(4), NULL), NULL), CT_ESHAPE, "2-D", NULL);
    CHECK_NULL_ERR(ct_linear(c, ct_ones(CT_SHAPE(2, 4), NULL), ct_ones(CT_SHAPE(3), NULL)), CT_ESHAPE, "", NULL);
    CHECK_RC_ERR(ct_copy_(a, c), CT_ESHAPE, "must match");
    CHECK_RC_ERR(ct_add_(ct_ones(CT_SHAPE(3), NULL), a, 1), CT_ESHAPE, "[2, 3]");
    CHECK_RC_ERR(ct_set_grad(ct_ones(CT_SHAPE(3), &GRAD), a), CT_ESHAPE, "[2, 3]");

    /* conv: the weight does not fit the input */
    ct_tensor *img = ct_ones(CT_SHAPE(1, 2, 5, 5), NULL);
    ct_tensor *w3 = ct_ones(CT_SHAPE(4, 3, 3, 3), NULL);
    CHECK_NULL_ERR(ct_conv2d(img, w3, NULL, 1, 0, 1, 1), CT_ESHAPE, "3 channels", "ct_conv2d");
    CHECK_NULL_ERR(ct_conv2d(img, ct_ones(CT_SHAPE(4, 2, 3), NULL), NULL, 1, 0, 1, 1), CT_ESHAPE, "", NULL);
    CHECK_NULL_ERR(ct_conv2d(img, ct_ones(CT_SHAPE(4, 2, 3, 3), NULL), ct_ones(CT_SHAPE(3), NULL), 1, 0, 1, 1),
                   CT_ESHAPE, "bias", NULL);
    CHECK_NULL_ERR(ct_conv2d(img, ct_ones(CT_SHAPE(4, 2, 7, 7), NULL), NULL, 1, 0, 1, 1), CT_ESHAPE,
                   "Kernel size", NULL);
    CHECK_NULL_ERR(ct_conv2d(img, ct_ones(CT_SHAPE(3, 1, 3, 3), NULL), NULL, 1, 0, 1, 2), CT_ESHAPE, "groups",
                   NULL);
    CHECK_NULL_ERR(ct_conv1d(ct_ones(CT_SHAPE(1, 2, 5), NULL), w3, NULL, 1, 0, 1, 1), CT_ESHAPE, "", "ct_conv1d");
    CHECK_NULL_ERR(ct_max_pool2d(img, 7, 0, 0), CT_ESHAPE, "too small", "ct_max_pool2d");
    CHECK_NULL_ERR(ct_max_pool2d(img, 2, 0, 2), CT_ESHAPE, "pad", NULL);

    /* normalisation, attention, losses */
    CHECK_NULL_ERR(ct_layer_norm(c, CT_SHAPE(3), NULL, NULL, 1e-5), CT_ESHAPE, "normalized_shape", NULL);
    CHECK_NULL_ERR(ct_batch_norm(ct_ones(CT_SHAPE(1, 3), NULL), NULL, NULL, NULL, NULL, true, 0.1, 1e-5),
                   CT_ESHAPE, "more than 1 value per channel", NULL);
    CHECK_NULL_FAILS(ct_batch_norm(c, ct_ones(CT_SHAPE(3), NULL), NULL, NULL, NULL, true, 0.1, 1e-5),
                     "weight should contain 4 elements");
    ct_tensor *q = ct_ones(CT_SHAPE(1, 2, 3, 8), NULL), *k = ct_ones(CT_SHAPE(1, 2, 4, 6), NULL);
    CHECK_NULL_ERR(ct_scaled_dot_product_attention(q, k, k, NULL, 0, false, 0), CT_ESHAPE, "", NULL);
    CHECK_NULL_ERR(ct_mse_loss(a, c, CT_REDUCE_MEAN), CT_ESHAPE, "same shape", "[2, 3]");
    CHECK_NULL_ERR(ct_l1_loss(a, c, CT_REDUCE_SUM), CT_ESHAPE, "same shape", NULL);
    CHECK_NULL_ERR(ct_bce_with_logits(a, c, NULL, NULL, CT_REDUCE_MEAN), CT_ESHAPE, "[3, 4]", NULL);
    ct_tensor *logits = ct_ones(CT_SHAPE(4, 5), NULL);
    CHECK_NULL_ERR(ct_cross_entropy(logits, ct_zeros(CT_SHAPE(3), &I64)), CT_ESHAPE, "batch_size (3)", "ct_cross_entropy");
    CHECK_NULL_ERR(ct_cross_entropy(logits, ct_zeros(CT_SHAPE(4, 5, 1), &I64)), CT_ESHAPE, "targets", NULL);
    CHECK_NULL_ERR(ct_nll_loss(logits, ct_zeros(CT_SHAPE(5), &I64), NULL), CT_ESHAPE, "", NULL);

    /* autograd: backward without a gradient needs one element */
    ct_tensor *p = ct_ones(CT_SHAPE(3), &GRAD);
    CHECK_RC_ERR(ct_backward(ct_mul_scalar(p, 2)), CT_ESHAPE, "one-element");
    CHECK_RC_ERR(ct_backward_ex(ct_mul_scalar(p, 2), ct_ones(CT_SHAPE(4), NULL), false, false), CT_ESHAPE, "");
    double v = 0;
    CHECK_RC_ERR(ct_item(a, &v), CT_ESHAPE, "[2, 3]");
    int64_t iv = 0;
    CHECK_RC_ERR(ct_item_int(ct_zeros(CT_SHAPE(0), &I64), &iv), CT_ESHAPE, "one-element");
}

static void dtypes(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(4, 5), NULL);
    ct_tensor *findex = ct_zeros(CT_SHAPE(2), NULL);
    CHECK_NULL_ERR(ct_index_select(x, 0, findex), CT_EDTYPE, "int", "ct_index_select");
    CHECK_NULL_ERR(ct_gather(x, 0, ct_zeros(CT_SHAPE(1, 5), NULL)), CT_EDTYPE, "int64", "ct_gather");
    CHECK_NULL_ERR(ct_embedding(x, findex, -1), CT_EDTYPE, "int64", "float32");
    CHECK_NULL_ERR(ct_masked_fill(x, x, 0), CT_EDTYPE, "bool", "ct_masked_fill");
    CHECK_NULL_ERR(ct_masked_select(x, x), CT_EDTYPE, "bool", "ct_masked_select"); /* a dtype, not a shape, problem */
    CHECK_NULL_ERR(ct_where(x, x, x), CT_EDTYPE, "bool", "ct_where");
    CHECK_NULL_ERR(ct_matmul(x, ct_ones(CT_SHAPE(5, 2), &F64)), CT_EDTYPE, "dtype", NULL);
    CHECK_NULL_ERR(ct_linear(x, ct_ones(CT_SHAPE(3, 5), &F64), NULL), CT_EDTYPE, "", NULL);
    /* "not implemented for 'Long'": the dtype is the problem, not ctrial's support */
    CHECK_NULL_ERR(ct_randn(CT_SHAPE(2), &I64), CT_EDTYPE, "Long", "ct_randn");
    CHECK_NULL_FAILS(ct_one_hot(findex, 3), "LongTensor");
    CHECK_NULL_ERR(ct_softmax(ct_ones(CT_SHAPE(3), &I64), 0), CT_EDTYPE, "Long", NULL);
    CHECK_NULL_ERR(ct_mean(ct_ones(CT_SHAPE(3), &I64)), CT_EDTYPE, "", "ct_mean");
    CHECK_RC_ERR(ct_set_requires_grad(ct_ones(CT_SHAPE(3), &I64), true), CT_EDTYPE, "floating");

    /* losses: class indices must be int64; probabilities the logits' shape */
    ct_tensor *logits = ct_ones(CT_SHAPE(4, 5), NULL);
    CHECK_NULL_ERR(ct_cross_entropy(logits, ct_zeros(CT_SHAPE(4), &I32)), CT_EDTYPE, "int64", "int32");
    /* float class indices (a forgotten cast): the message must say what the
     * targets should have been, not only talk about probabilities */
    CHECK_NULL_ERR(ct_cross_entropy(logits, ct_zeros(CT_SHAPE(4), NULL)), CT_EDTYPE, "int64", "[4] float32");
    CHECK_NULL_ERR(ct_nll_loss(logits, ct_zeros(CT_SHAPE(4), NULL), NULL), CT_EDTYPE, "int64", NULL);
    CHECK_NULL_FAILS(ct_bce_with_logits(logits, ct_zeros(CT_SHAPE(4, 5), &I64), NULL, NULL, CT_REDUCE_MEAN),
                     "Long");

    /* RNG state of the wrong kind */
    CHECK_RC_ERR(ct_rng_set_state(ct_cpu(), x), CT_EFORMAT, "uint8");
    CHECK_RC_FAILS(ct_rng_set_state(ct_cpu(), ct_zeros(CT_SHAPE(10), &(ct_topts){.dtype = CT_U8})), "size");
    /* a non-integral amount on an integer tensor in place cannot be honoured */
    CHECK_RC_FAILS(ct_add_scalar_(ct_zeros(CT_SHAPE(2), &I64), 0.5), "");
}

static void indices(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), NULL);
    CHECK_NULL_ERR(ct_select(x, 0, 5), CT_EINDEX, "index 5", "out of range");
    CHECK_NULL_ERR(ct_select(x, 1, -5), CT_EINDEX, "-5", NULL);
    CHECK_NULL_ERR(ct_index_select(x, 0, ct_full(CT_SHAPE(1), 7, &I64)), CT_EINDEX, "out of range", NULL);
    CHECK_NULL_ERR(ct_gather(x, 1, ct_full(CT_SHAPE(3, 1), 9, &I64)), CT_EINDEX, "9", "ct_gather");
    CHECK_NULL_ERR(ct_scatter(x, 1, ct_full(CT_SHAPE(3, 1), 9, &I64), x), CT_EINDEX, "9", NULL);
    CHECK_NULL_ERR(ct_embedding(x, ct_full(CT_SHAPE(2), 10, &I64), -1), CT_EINDEX, "out of range", NULL);
    CHECK_NULL_ERR(ct_cross_entropy(x, ct_full(CT_SHAPE(3), 7, &I64)), CT_EINDEX, "7", "out of bounds");
    CHECK_NULL_ERR(ct_one_hot(ct_full(CT_SHAPE(2), 5, &I64), 3), CT_EINDEX, "num_classes", "ct_one_hot");
    CHECK_NULL_FAILS(ct_narrow(x, 1, 2, 5), "exceeds");
    CHECK_NULL_ERR(ct_topk(x, 9, 1, true, true, NULL), CT_EINDEX, "k", "ct_topk");
    CHECK_NULL_ERR(ct_sum_dim(x, CT_DIMS(3), false), CT_EINDEX, "Dimension out of range", "got 3");
    CHECK_NULL_ERR(ct_transpose(x, 0, 5), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_unsqueeze(x, 4), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_squeeze_dim(x, -3), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_softmax(x, 2), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_cat(1, (ct_tensor *[]){x}, 2), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_slice(x, 2, 0, 1, 1), CT_EINDEX, "Dimension out of range", NULL);
    CHECK_NULL_ERR(ct_argmax(x, -3, false), CT_EINDEX, "Dimension out of range", NULL);
    ct_clear_error();
    CHECK(ct_size(x, 2) == -1);
    CHECK_ERR(CT_EINDEX, "dim 2");
    CHECK(ct_stride(x, -3) == -1);
    CHECK_ERR(CT_EINDEX, "dim -3");
    ct_tensor *v = NULL, *i = NULL;
    CHECK_RC_ERR(ct_max_dim(x, 2, false, &v, &i), CT_EINDEX, "Dimension out of range");
    CHECK(v == NULL && i == NULL);
    ct_tensor *pieces[2] = {NULL, NULL};
    CHECK_RC_ERR(ct_split(x, 2, 5, pieces, 2), CT_EINDEX, "Dimension out of range");
    CHECK(pieces[0] == NULL);
}

static void values(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), NULL);
#ifndef __SANITIZE_ADDRESS__ /* whose allocator ends the process on a request this size */
    /* 1 PiB: the CPU allocator's failure is out of memory, whatever libtorch's words */
    CHECK_NULL_ERR(ct_empty(CT_SHAPE((int64_t)1 << 50), &(ct_topts){.dtype = CT_U8}), CT_ENOMEM, "allocate", "ct_empty");
#endif
    CHECK_NULL_ERR(ct_arange(0, 3, 0, NULL), CT_EINVAL, "step", "ct_arange");
    CHECK_NULL_FAILS(ct_arange(0, 3, 0.5, &I64), "step"); /* Python's own torch dies of SIGFPE here */
    CHECK_NULL_FAILS(ct_arange(0, 3, -1, NULL), "");
    CHECK_NULL_FAILS(ct_linspace(0, 1, -2, NULL), "steps");
    CHECK_NULL_ERR(ct_randint(5, 5, CT_SHAPE(2), &I64), CT_EINVAL, "5", "ct_randint");
    CHECK_NULL_FAILS(ct_randperm(-1, &I64), "");
    CHECK_NULL_ERR(ct_slice(x, 0, 0, 2, 0), CT_EINVAL, "step", "ct_slice");
    CHECK_NULL_ERR(ct_slice(x, 0, 2, 0, -1), CT_EINVAL, "step", NULL);
    CHECK_RC_ERR(ct_split(x, 0, 0, NULL, 0), CT_EINVAL, "split_size");
    CHECK_RC_ERR(ct_chunk(x, 0, 0, NULL, 0), CT_EINVAL, "chunks");
    CHECK_NULL_ERR(ct_dropout(x, 1.5, true), CT_EINVAL, "1.5", "ct_dropout");
    CHECK_NULL_ERR(ct_dropout(x, -0.1, false), CT_EINVAL, "probability", NULL);
    CHECK_NULL_ERR(ct_smooth_l1_loss(x, x, CT_REDUCE_MEAN, -1), CT_EINVAL, "beta", NULL);
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.label_smoothing = 1.5;
    CHECK_NULL_FAILS(ct_cross_entropy_ex(x, ct_zeros(CT_SHAPE(3), &I64), &o), "label_smoothing");
    o = ct_cross_entropy_defaults();
    o.weight = ct_ones(CT_SHAPE(3), NULL); /* 4 classes */
    CHECK_NULL_FAILS(ct_cross_entropy_ex(x, ct_zeros(CT_SHAPE(3), &I64), &o), "weight");
    CHECK_NULL_ERR(ct_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), CT_EINVAL, "running", NULL);
    CHECK_NULL_FAILS(ct_multinomial(ct_full(CT_SHAPE(3), -1, NULL), 1, false), "");
    CHECK_NULL_FAILS(ct_multinomial(ct_ones(CT_SHAPE(3), NULL), 5, false), "");
    CHECK_NULL_FAILS(ct_conv2d(ct_ones(CT_SHAPE(1, 1, 4, 4), NULL), ct_ones(CT_SHAPE(1, 1, 2, 2), NULL), NULL, 0, 0,
                               1, 1),
                     "stride");
    CHECK_NULL_FAILS(ct_conv2d(ct_ones(CT_SHAPE(1, 1, 4, 4), NULL), ct_ones(CT_SHAPE(1, 1, 2, 2), NULL), NULL, 1, -1,
                               1, 1),
                     "padding");
    CHECK_NULL_FAILS(ct_adaptive_avg_pool2d(ct_ones(CT_SHAPE(1, 1, 4, 4), NULL), -1, 2), "");
    CHECK_NULL_FAILS(ct_scaled_dot_product_attention(x, x, x, NULL, 1.5, false, 0), "");
}

/* Enum values outside the enumerators (a C caller may pass any int). */
static void invalid_enums(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), NULL);
    CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2), &(ct_topts){.dtype = (ct_dtype)42}), CT_EDTYPE, "42", NULL);
    CHECK_NULL_ERR(ct_to_dtype(x, (ct_dtype)-1), CT_EDTYPE, "dtype", NULL);
    CHECK_NULL_ERR(ct_from_data(&(float){1}, CT_SHAPE(1), (ct_dtype)77), CT_EDTYPE, "77", NULL);
    CHECK_NULL_ERR(ct_mse_loss(x, x, (ct_reduction)9), CT_EINVAL, "reduction", NULL);
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.reduction = (ct_reduction)9;
    CHECK_NULL_ERR(ct_cross_entropy_ex(x, ct_zeros(CT_SHAPE(3), &I64), &o), CT_EINVAL, "reduction", NULL);
    CHECK(strcmp(ct_dtype_name((ct_dtype)77), "unknown") == 0);
    CHECK(ct_dtype_size((ct_dtype)77) == 0);
    CHECK(!ct_dtype_is_floating((ct_dtype)77));
    CHILD_DONE();
}

static void autograd_misuse(void) {
    ct_tensor *p = ct_ones(CT_SHAPE(3), &GRAD);
    ct_tensor *c = ct_ones(CT_SHAPE(3), NULL);
    CHECK_RC_ERR(ct_backward(ct_sum(c)), CT_ESTATE, "does not require grad");
    CHECK_RC_ERR(ct_backward_ex(c, NULL, false, false), CT_ESTATE, "does not require grad");
    /* a loss computed under no_grad */
    ct_guard *g = ct_no_grad();
    ct_tensor *l = ct_sum(ct_mul(p, p));
    ct_guard_end(g);
    CHECK_RC_ERR(ct_backward(l), CT_ESTATE, "no_grad");
    /* backward twice through a freed graph */
    ct_tensor *l2 = ct_sum(ct_mul(p, p));
    CHECK(ct_backward(l2) == 0);
    CHECK_RC_FAILS(ct_backward(l2), "second time");
    /* in place on a leaf that requires grad */
    CHECK_RC_FAILS(ct_add_scalar_(p, 1), "leaf");
    CHECK_RC_FAILS(ct_fill_(p, 0), "leaf");
    /* an inference tensor saved for backward */
    ct_guard *im = ct_inference_mode();
    ct_tensor *inf = ct_ones(CT_SHAPE(3), NULL);
    ct_guard_end(im);
    CHECK_RC_FAILS(ct_backward(ct_sum(ct_mul(p, inf))), "nference");
    ct_clear_error();
    /* the failures left the parameter usable */
    ct_zero_grad(p, true);
    CHECK(ct_backward(ct_sum(ct_mul_scalar(p, 2))) == 0);
    double v = 0;
    CHECK(ct_item(ct_sum(ct_grad(p)), &v) == 0 && v == 6.0);
}

int main(void) {
    void (*parts[])(void) = {shapes, dtypes, indices, values, autograd_misuse};
    size_t live = ct_tensor_live_count();
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        ct_scope *s = ct_scope_begin();
        parts[i]();
        ct_scope_end(s);
    }
    CHECK(ct_tensor_live_count() == live);
    CHECK_IN_CHILD(invalid_enums);
    return ct_test_result("errors_ops");
}
