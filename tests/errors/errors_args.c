/* tests/errors/errors_args.c — bad arguments: NULL inputs for every kind of
 * function, NULL propagation through a chain of ops (the FIRST error's
 * message survives), freed tensors, double frees, unavailable CUDA devices,
 * bad device text, wrong byte counts, and the thread-locality of errors. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "errors_util.h"

static void null_inputs(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), NULL);
    ct_tensor *w = ct_ones(CT_SHAPE(4, 3), NULL);
    double v = 0;
    int64_t iv = 0;
    char buf[64];

    /* creation: a NULL shape or data array */
    CHECK_NULL_ERR(ct_zeros(2, NULL, NULL), CT_EINVAL, "NULL", "ct_zeros");
    CHECK_NULL_ERR(ct_randn(1, NULL, NULL), CT_EINVAL, "NULL", NULL);
    CHECK_NULL_ERR(ct_from_data(NULL, CT_SHAPE(2), CT_F32), CT_EINVAL, "data is NULL", "ct_from_data");
    CHECK_NULL_ERR(ct_from_blob(NULL, CT_SHAPE(2), CT_F32, NULL, NULL), CT_EINVAL, "data is NULL", NULL);
    /* ops: every kind of input slot */
    CHECK_NULL_ERR(ct_relu(NULL), CT_EINVAL, "is NULL", "ct_relu");
    CHECK_NULL_ERR(ct_add(x, NULL), CT_EINVAL, "'b' is NULL", "ct_add");
    CHECK_NULL_ERR(ct_add(NULL, x), CT_EINVAL, "'a' is NULL", NULL);
    CHECK_NULL_ERR(ct_mul_scalar(NULL, 2), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_where(NULL, x, x), CT_EINVAL, "is NULL", "ct_where");
    CHECK_NULL_ERR(ct_linear(x, NULL, NULL), CT_EINVAL, "is NULL", "ct_linear");
    CHECK_NULL_ERR(ct_zeros_like(NULL), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_to_dtype(NULL, CT_F64), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_reshape(x, 2, NULL), CT_EINVAL, "NULL", "ct_reshape");
    CHECK_NULL_ERR(ct_sum_dim(x, 1, NULL, false), CT_EINVAL, "NULL", NULL);
    CHECK_NULL_ERR(ct_cat(2, (ct_tensor *[]){x, NULL}, 0), CT_EINVAL, "NULL", "ct_cat");
    /* a list argument of n > 0 items whose pointer is NULL: named as such */
    CHECK_NULL_ERR(ct_call("aten::reshape", 2, (ct_arg[]){CT_T(x), ct_arg_ints(4, NULL)}), CT_EINVAL,
                   "argument 'shape' (2nd) takes int[], got an int list of 4 items whose pointer is NULL", NULL);
    CHECK_NULL_ERR(ct_call("aten::cat", 1, (ct_arg[]){ct_arg_tensors(2, NULL)}), CT_EINVAL,
                   "a Tensor list of 2 items whose pointer is NULL", NULL);
    CHECK_NULL_ERR(ct_cat(2, NULL, 0), CT_EINVAL, "NULL", NULL);
    CHECK_NULL_ERR(ct_cat(0, (ct_tensor *[]){x}, 0), CT_EINVAL, "at least one", NULL);
    CHECK_NULL_ERR(ct_stack(1, (ct_tensor *[]){NULL}, 0), CT_EINVAL, "NULL", NULL);
    CHECK_NULL_ERR(ct_cross_entropy(x, NULL), CT_EINVAL, "is NULL", "ct_cross_entropy");
    CHECK_NULL_ERR(ct_embedding(NULL, x, -1), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_conv2d_ex(x, w, NULL, NULL, (const int64_t[]){0, 0}, (const int64_t[]){1, 1}, 1),
                   CT_EINVAL, "NULL", NULL);
    CHECK_NULL_ERR(ct_scaled_dot_product_attention(x, NULL, x, NULL, 0, false, 0), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_topk(NULL, 1, 0, true, true, NULL), CT_EINVAL, "is NULL", NULL);
    CHECK_NULL_ERR(ct_data_ptr(NULL), CT_EINVAL, "NULL", NULL);

    /* status functions return CT_EINVAL */
    CHECK_RC_ERR(ct_backward(NULL), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_backward_ex(NULL, NULL, false, false), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_item(NULL, &v), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_item(x, NULL), CT_EINVAL, "NULL");
    CHECK_RC_ERR(ct_item_int(NULL, &iv), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_read(NULL, buf, 4), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_read(x, NULL, 6 * sizeof(float)), CT_EINVAL, "NULL");
    CHECK_RC_ERR(ct_write(NULL, buf, 4), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_write(x, NULL, 6 * sizeof(float)), CT_EINVAL, "NULL");
    CHECK_RC_ERR(ct_copy_(NULL, x), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_copy_(x, NULL), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_add_(x, NULL, 1), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_fill_(NULL, 1), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_uniform_(NULL, 0, 1), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_set_requires_grad(NULL, true), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_set_grad(NULL, x), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_zero_grad(NULL, true), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_max_dim(NULL, 0, false, NULL, NULL), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_split(NULL, 1, 0, NULL, 0), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_split(x, 1, 0, NULL, 2), CT_EINVAL, "NULL");
    CHECK_RC_ERR(ct_chunk(NULL, 2, 0, NULL, 0), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_rng_set_state(ct_cpu(), NULL), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_print(NULL), CT_EINVAL, "is NULL");
    CHECK_RC_ERR(ct_device_parse(NULL, &(ct_device){CT_CPU, 0}), CT_EINVAL, "NULL");
    CHECK_RC_ERR(ct_device_parse("cpu", NULL), CT_EINVAL, "NULL");

    /* queries answer their documented defaults; lifetime calls accept NULL */
    ct_clear_error();
    CHECK(ct_ndim(NULL) == -1);
    CHECK(ct_numel(NULL) == -1);
    CHECK(ct_size(NULL, 0) == -1);
    CHECK(ct_stride(NULL, 0) == -1);
    CHECK(ct_shape(NULL, NULL, 0) == -1);
    CHECK(!ct_is_defined(NULL));
    CHECK(!ct_requires_grad(NULL));
    CHECK(!ct_has_grad(NULL));
    CHECK(!ct_is_contiguous(NULL));
    CHECK(!ct_is_leaf(NULL));
    ct_describe(NULL, buf, sizeof buf);
    CHECK(strcmp(buf, "NULL") == 0);
    ct_describe(x, NULL, 10);
    ct_device_format(ct_cpu(), NULL, 10);
    ct_tensor_free(NULL);
    ct_scope_end(NULL);
    ct_guard_end(NULL);
    CHECK(ct_keep(NULL) == NULL);
    CHECK(ct_scope_return(NULL) == NULL);
    CHECK(ct_scope_size(NULL) == 0);
    CHECK(ct_last_code() == CT_OK);
    ct_tensor_free(x);
    ct_tensor_free(w);
}

/* Enum values outside the enumerators (a C caller may pass any int). */
static void invalid_enums(void) {
    CHECK_NULL_ERR(ct_rng_get_state((ct_device){(ct_device_type)7, 0}), CT_EINVAL, "device type 7", NULL);
    CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2), &(ct_topts){.device = {(ct_device_type)3, 0}}), CT_EINVAL, "device", NULL);
    CHILD_DONE();
}

static void chain_keeps_first_error(void) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), NULL);
    ct_tensor *b = ct_ones(CT_SHAPE(4, 5), NULL);
    ct_tensor *bias = ct_ones(CT_SHAPE(5), NULL);
    ct_clear_error();
    /* a forward pass whose first op fails: one check at the end */
    ct_tensor *h = ct_matmul(a, b);
    ct_tensor *y = ct_relu(ct_add(h, bias));
    ct_tensor *loss = ct_mean(ct_log_softmax(y, 1));
    CHECK(h == NULL && y == NULL && loss == NULL);
    CHECK_MSG("ct_matmul");
    CHECK_MSG("2x3");
    CHECK_MSG("4x5");
    CHECK_ERR(CT_ESHAPE, "cannot be multiplied");
    /* status calls at the end of the chain report the first error too */
    ct_tensor *h2 = ct_matmul(a, b);
    CHECK(ct_backward(ct_sum(h2)) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "ct_matmul");
    double v = 0;
    ct_tensor *h3 = ct_matmul(a, b);
    CHECK(ct_item(ct_mean(h3), &v) == CT_ESHAPE);
    CHECK_ERR(CT_ESHAPE, "ct_matmul");
    /* a NULL inside a list keeps the first error as well */
    ct_tensor *h4 = ct_matmul(a, b);
    CHECK(ct_cat(2, (ct_tensor *[]){a, h4}, 0) == NULL);
    CHECK_ERR(CT_ESHAPE, "cannot be multiplied");
    /* once cleared, a NULL is reported as such */
    CHECK_NULL_ERR(ct_relu(NULL), CT_EINVAL, "is NULL", NULL);
    /* a later, unrelated failure replaces the message */
    CHECK(ct_matmul(a, b) == NULL);
    CHECK(ct_reshape(a, CT_SHAPE(5, 5)) == NULL);
    CHECK_ERR(CT_ESHAPE, "ct_reshape");
    /* libtorch's C++ backtrace stays out of messages */
    CHECK(ct_matmul(a, b) == NULL);
    CHECK(strstr(ct_last_error(), "Exception raised from") == NULL);
    CHECK(strstr(ct_last_error(), "frame #") == NULL);
    CHECK(strlen(ct_last_error()) < 400);
    ct_clear_error();
    CHECK(ct_last_code() == CT_OK && ct_last_error()[0] == '\0');
    CHECK(strstr(ct_strerror(CT_ESHAPE), "CT_ESHAPE") != NULL);
    CHECK(strstr(ct_strerror(CT_EDEVICE), "CT_EDEVICE") != NULL);
    CHECK(strcmp(ct_strerror(12345), "unknown ctrial error code") == 0);
    CHECK(strcmp(ct_err_name(12345), "CT_UNKNOWN") == 0);
    CHECK(strcmp(ct_err_name(CT_ECHECKPOINT), "CT_ECHECKPOINT") == 0);
    CHECK(strcmp(ct_strerror(CT_EEXIT), "CT_EEXIT: the trial asked to exit") == 0);
    /* No failure without words (issue 35: "optim_parity: state_dict: " and
     * nothing after it): an empty message, or a prefix over an empty one,
     * gets the code's description; a message with words stays as it is. */
    CHECK(ct_set_error(CT_EIO, "%s", "") == CT_EIO);
    CHECK(strcmp(ct_last_error(), "CT_EIO: input/output error (no further detail)") == 0);
    CHECK(ct_set_error(CT_ETORCH, "%s: %s", "state_dict", "") == CT_ETORCH);
    CHECK(strncmp(ct_last_error(), "state_dict: CT_ETORCH: ", 23) == 0);
    CHECK(strstr(ct_last_error(), "(no further detail)") != NULL);
    CHECK(ct_set_error(CT_EIO, "disk: read failed") == CT_EIO);
    CHECK(strcmp(ct_last_error(), "disk: read failed") == 0);
    ct_clear_error();
    /* Every row of the table: its value, a name that is its own, a phrase
     * after it, and no value given twice. */
    {
        static const int codes[] = {
#define CODE_(name, value, phrase, meaning) value,
            CT_ERRNO_MAP(CODE_)
#undef CODE_
        };
        static const char *const names[] = {
#define NAME_(name, value, phrase, meaning) "CT_" #name,
            CT_ERRNO_MAP(NAME_)
#undef NAME_
        };
        size_t n = sizeof codes / sizeof codes[0];
        CHECK(n == 19); /* CT_OK to CT_ENOENT */
        for (size_t i = 0; i < n; i++) {
            CHECK(codes[i] == -(int)i); /* 0, -1, -2 ... in order, none skipped */
            CHECK(strcmp(ct_err_name(codes[i]), names[i]) == 0);
            size_t len = strlen(names[i]);
            CHECK(strncmp(ct_strerror(codes[i]), names[i], len) == 0);
            CHECK(strncmp(ct_strerror(codes[i]) + len, ": ", 2) == 0);
        }
    }
    CHECK(ct_set_error(CT_ETRIAL, "callback %d failed", 7) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "callback 7 failed");
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(bias);
}

static void freed_tensors(void) {
    ct_tensor *t = ct_ones(CT_SHAPE(3), NULL);
    ct_tensor *u = ct_ones(CT_SHAPE(3), NULL);
    ct_tensor_free(t);
    double v = 0;
    CHECK(!ct_is_defined(t));
    CHECK(ct_ndim(t) == -1);
    CHECK(ct_numel(t) == -1);
    CHECK_NULL_ERR(ct_relu(t), CT_ESTATE, "freed", "ct_relu");
    CHECK_NULL_ERR(ct_add(u, t), CT_ESTATE, "freed", NULL);
    CHECK_NULL_ERR(ct_cat(2, (ct_tensor *[]){u, t}, 0), CT_ESTATE, "freed", NULL);
    CHECK_NULL_ERR(ct_linear(u, u, t), CT_ESTATE, "freed", NULL); /* an optional input */
    CHECK_NULL_ERR(ct_data_ptr(t), CT_ESTATE, "freed", NULL);
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.weight = t;
    CHECK_NULL_ERR(ct_cross_entropy_ex(ct_ones(CT_SHAPE(2, 3), NULL), ct_zeros(CT_SHAPE(2), &(ct_topts){.dtype = CT_I64}), &o),
                   CT_ESTATE, "freed", NULL);
    CHECK_RC_ERR(ct_item(t, &v), CT_ESTATE, "freed");
    CHECK_RC_ERR(ct_backward(t), CT_ESTATE, "freed");
    CHECK_RC_ERR(ct_fill_(t, 1), CT_ESTATE, "freed");
    CHECK_RC_ERR(ct_copy_(u, t), CT_ESTATE, "freed");
    /* even with an older error pending, a freed tensor is named as such */
    ct_set_error(CT_ESHAPE, "an older failure");
    CHECK(ct_relu(t) == NULL);
    CHECK_ERR(CT_ESTATE, "freed");
    char buf[32];
    ct_describe(t, buf, sizeof buf);
    CHECK(strstr(buf, "freed") != NULL);
    /* double free: an error, not a crash */
    ct_clear_error();
    ct_tensor_free(t);
    CHECK_ERR(CT_ESTATE, "freed twice");
    /* a tensor freed by its scope's end */
    ct_scope *s = ct_scope_begin();
    ct_tensor *in_scope = ct_ones(CT_SHAPE(2), NULL);
    ct_scope_end(s);
    CHECK_NULL_ERR(ct_neg(in_scope), CT_ESTATE, "freed", NULL);
    ct_tensor_free(in_scope);
    CHECK_ERR(CT_ESTATE, "freed twice");
    /* the other tensor is untouched by all this */
    CHECK(ct_item(ct_sum(u), &v) == 0 && v == 3.0);
    ct_tensor_free(u);
}

static void cuda_devices(void) {
    /* a GPU that is not there: ordinal past the count where GPUs exist */
    int n = ct_cuda_device_count();
    char want[32];
    snprintf(want, sizeof want, "cuda:%d", n);
    const char *why = ct_cuda_is_available() ? "does not exist" : ct_cuda_is_built() ? "no GPU" : "without CUDA";
    ct_topts o = {.device = ct_cuda(n)};
    ct_tensor *x = ct_ones(CT_SHAPE(2), NULL);
    CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2), &o), CT_EDEVICE, want, why);
    CHECK_NULL_ERR(ct_randn(CT_SHAPE(2), &o), CT_EDEVICE, want, why);
    CHECK_NULL_ERR(ct_to_device(x, ct_cuda(n), false), CT_EDEVICE, want, why);
    CHECK_NULL_ERR(ct_rng_get_state(ct_cuda(n)), CT_EDEVICE, want, why);
    CHECK_RC_ERR(ct_rng_set_state(ct_cuda(n), ct_rng_get_state(ct_cpu())), CT_EDEVICE, want);
    CHECK_NULL_ERR(ct_to_device(x, ct_cuda(-1), false), CT_EDEVICE, "cuda:-1", NULL);
    if (!ct_cuda_is_available()) {
        CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2), &(ct_topts){.pin_memory = true}), CT_EDEVICE, "", NULL);
        CHECK_NULL_ERR(ct_pin_memory(x), CT_EDEVICE, "", NULL);
        CHECK(ct_cuda_synchronize(0) < 0);
        ct_clear_error();
    }
    CHECK_NULL_ERR(ct_zeros(CT_SHAPE(2), &(ct_topts){.device = ct_cuda(0), .pin_memory = true}), CT_EDEVICE, "",
                   NULL);
    ct_tensor_free(x);
}

static void device_text(void) {
    const char *bad[] = {"gpu", "CPU", "cuda:", "cuda:x", "cuda:1x", "", "cuda:-1", "cuda0", " cpu",
                         "cuda:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ct_device d = {CT_CUDA, 77};
        ct_clear_error();
        CHECK(ct_device_parse(bad[i], &d) == CT_EINVAL);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        CHECK_MSG(quoted);
        CHECK_ERR(CT_EINVAL, "expected cpu, cuda or cuda:N");
        CHECK(d.type == CT_CUDA && d.index == 77); /* untouched on failure */
    }
}

static void byte_counts(void) {
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), NULL);
    float buf[7] = {0};
    CHECK_RC_ERR(ct_read(x, buf, sizeof buf), CT_EINVAL, "28 bytes");
    CHECK_RC_ERR(ct_read(x, buf, 5 * sizeof(float)), CT_EINVAL, "24");
    CHECK_RC_ERR(ct_write(x, buf, sizeof buf), CT_EINVAL, "28 bytes");
    /* int64 data read with the float32 size: the count is in the tensor's dtype */
    ct_tensor *i = ct_zeros(CT_SHAPE(3), &(ct_topts){.dtype = CT_I64});
    CHECK_RC_ERR(ct_read(i, buf, 3 * sizeof(float)), CT_EINVAL, "24");
    CHECK(buf[0] == 0.0f); /* nothing written on failure */
    ct_tensor *t = ct_t(x);
    CHECK_NULL_ERR(ct_data_ptr(t), CT_EINVAL, "contiguous", NULL);
    ct_tensor_free(t);
    ct_tensor_free(i);
    ct_tensor_free(x);
}

/* Errors are per thread: a failure here is invisible to the main thread. */
static void *fail_in_thread(void *arg) {
    int *seen = arg;
    seen[0] = ct_last_code(); /* fresh thread: nothing pending */
    ct_relu(NULL);
    seen[1] = ct_last_code();
    return NULL;
}

static void thread_local_errors(void) {
    ct_clear_error();
    ct_set_error(CT_EIO, "main thread's failure");
    int seen[2] = {99, 99};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, fail_in_thread, seen) == 0);
    pthread_join(th, NULL);
    CHECK(seen[0] == CT_OK);
    CHECK(seen[1] == CT_EINVAL);
    CHECK_ERR(CT_EIO, "main thread's failure");
}

int main(void) {
    void (*parts[])(void) = {null_inputs, chain_keeps_first_error, freed_tensors, cuda_devices,
                             device_text, byte_counts, thread_local_errors};
    size_t live = ct_tensor_live_count();
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        ct_scope *s = ct_scope_begin(); /* owns what the failing calls' inputs were */
        parts[i]();
        ct_scope_end(s);
    }
    CHECK(ct_tensor_live_count() == live);
    CHECK_IN_CHILD(invalid_enums);
    return ct_test_result("errors_args");
}
