/*
 * ctrial/tensor.h — tensors, ops, autograd and scopes (a C view of libtorch).
 *
 * A ct_tensor is an opaque handle to a libtorch tensor. Ops read like
 * PyTorch, return a NEW tensor, and return NULL on failure (the reason is in
 * ct_last_error()). Given a NULL input, an op returns NULL and keeps the
 * first failure's message, so a whole forward pass is checked once:
 *
 *     ct_scope *s = ct_scope_begin();            // owns what is made below
 *     ct_tensor *x = ct_randn(CT_SHAPE(64, 784), NULL);
 *     ct_tensor *h = ct_relu(ct_linear(x, w1, b1));
 *     ct_tensor *loss = ct_cross_entropy(ct_linear(h, w2, b2), target);
 *     if (!loss || ct_backward(loss) != 0)
 *         fprintf(stderr, "%s\n", ct_last_error());
 *     ct_scope_end(s);                           // frees x, h, loss, ...
 *
 * Ownership. Every function documents whether it returns a new or a borrowed
 * reference. A new tensor belongs to the innermost open scope of the calling
 * thread, if any, and is freed when that scope ends; with no scope open the
 * caller owns it and calls ct_tensor_free(). ct_keep() moves a tensor out of
 * its scope for tensors that must outlive it. Handles are cheap (a pointer
 * and a reference count inside libtorch); two handles may share storage
 * (views), exactly as in PyTorch.
 *
 * Threads. A handle has no internal lock: don't use one handle from two
 * threads at once. Scopes, grad mode and the error message are per thread.
 *
 * Shapes and dims are int64_t arrays; CT_SHAPE(...) and CT_DIMS(...) expand
 * to the (count, array) argument pair: ct_reshape(x, CT_SHAPE(-1, 28 * 28)).
 */
#ifndef CTRIAL_TENSOR_H
#define CTRIAL_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_tensor ct_tensor;
typedef struct ct_scope ct_scope;
typedef struct ct_guard ct_guard;

/* `ndim, (const int64_t[]){...}` for any function taking (ndim, shape). */
#define CT_SHAPE(...)                                                     \
    (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),      \
        (const int64_t[]) { __VA_ARGS__ }
#define CT_DIMS(...) CT_SHAPE(__VA_ARGS__)

/* ---- dtypes and devices: dtype.h ---------------------------------------- */

/* Options for tensor creation. Zero-initialised means float32 on the CPU
 * without grad, so `NULL` or `&(ct_topts){.dtype = CT_I64}` both work. */
typedef struct {
    ct_dtype dtype;
    ct_device device;
    bool requires_grad;
    bool pin_memory; /* page-locked host memory (needs CUDA) */
} ct_topts;


/* ---- tensors in value trees (value.h) ------------------------------------- */

typedef struct ct_value ct_value;
/* A value-tree leaf holding t (value.h). Steals t: the value owns it from
 * now on (t is moved out of its scope). NEW value, or NULL + error. */
CT_API ct_value *ct_value_tensor(ct_tensor *t);

/* ---- lifetime and scopes ----------------------------------------------- */

/* Frees a handle (accepts NULL). The storage lives on while other handles or
 * libtorch (autograd) still refer to it. Freeing a scoped tensor removes it
 * from its scope. */
CT_API void ct_tensor_free(ct_tensor *t);

/* Opens a scope on this thread: tensors created until ct_scope_end() belong
 * to it. Scopes nest; end them in reverse order. Returns a new scope. */
CT_API ct_scope *ct_scope_begin(void);
/* Frees every tensor still owned by the scope, then the scope. Accepts NULL.
 * Ending a scope that is not the innermost first ends the inner ones. */
CT_API void ct_scope_end(ct_scope *s);
/* Number of tensors the scope owns now (for tests and leak checks). */
CT_API size_t ct_scope_size(const ct_scope *s);
/* Moves t out of its scope: the caller owns it now. Returns t (NULL-safe). */
CT_API ct_tensor *ct_keep(ct_tensor *t);
/* Moves t from its scope to the enclosing scope (or to the caller when none):
 * for helpers that open a scope of their own and return a result. */
CT_API ct_tensor *ct_scope_return(ct_tensor *t);
/* Live tensor handles in this process (all threads): leak checks. */
CT_API size_t ct_tensor_live_count(void);

/* ---- creation (all return a new tensor) -------------------------------- */

CT_API ct_tensor *ct_empty(int ndim, const int64_t *shape, const ct_topts *o);
CT_API ct_tensor *ct_zeros(int ndim, const int64_t *shape, const ct_topts *o);
CT_API ct_tensor *ct_ones(int ndim, const int64_t *shape, const ct_topts *o);
CT_API ct_tensor *ct_full(int ndim, const int64_t *shape, double value, const ct_topts *o);
CT_API ct_tensor *ct_scalar_tensor(double value, const ct_topts *o); /* 0-dim */
CT_API ct_tensor *ct_arange(double start, double end, double step, const ct_topts *o);
CT_API ct_tensor *ct_linspace(double start, double end, int64_t steps, const ct_topts *o);
/* Random: draw from the default generator of the tensor's device (see
 * ct_manual_seed), exactly as torch.randn/rand/randint do. */
CT_API ct_tensor *ct_randn(int ndim, const int64_t *shape, const ct_topts *o);
CT_API ct_tensor *ct_rand(int ndim, const int64_t *shape, const ct_topts *o);
/* randint and randperm make int64 when o is NULL, as torch.randint does. */
CT_API ct_tensor *ct_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                             const ct_topts *o);
CT_API ct_tensor *ct_randperm(int64_t n, const ct_topts *o);
/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)): a
 * permutation of 0..n-1 (int64, CPU) drawn from a fresh CPU generator seeded
 * `seed`, so the same permutation as Python's for the same seed; the default
 * generator is neither read nor advanced. Returns a new tensor. */
CT_API ct_tensor *ct_randperm_seeded(int64_t n, uint64_t seed);

/* A generator of its own: torch.Generator().manual_seed(seed) on the CPU
 * (mt19937; as in torch, only the seed's low 32 bits reach the engine).
 * Each draw is the one torch makes with the default generator seeded so
 * (torch.manual_seed(seed)), which is how a Python twin reproduces a
 * record's augmentation (vision.h). Not thread-safe: one per thread or
 * per record. New generator, or NULL + error. */
typedef struct ct_rng ct_rng;
CT_API ct_rng *ct_rng_new(uint64_t seed);
CT_API void ct_rng_free(ct_rng *r); /* accepts NULL */
/* The draws write *out and return 0, or a negative code (a NULL rng, an
 * range with lo > hi or low >= high, as torch refuses) with *out untouched.
 * torch.empty(1).uniform_(lo, hi).item(): a float32 draw in [lo, hi). */
CT_API int ct_rng_uniform(ct_rng *r, double lo, double hi, double *out);
/* torch.rand(1).item(): uniform_(0, 1). */
CT_API int ct_rng_rand(ct_rng *r, double *out);
/* torch.randint(low, high, (1,)).item() (low < high). */
CT_API int ct_rng_randint(ct_rng *r, int64_t low, int64_t high, int64_t *out);
/* torch.randperm(n) into out[0..n). */
CT_API int ct_rng_randperm(ct_rng *r, int64_t n, int64_t *out);
CT_API ct_tensor *ct_zeros_like(const ct_tensor *t);
CT_API ct_tensor *ct_ones_like(const ct_tensor *t);
CT_API ct_tensor *ct_full_like(const ct_tensor *t, double value);
CT_API ct_tensor *ct_empty_like(const ct_tensor *t);

/* Copies `data` (host memory, C-contiguous, `dtype` elements) into a new CPU
 * tensor. */
CT_API ct_tensor *ct_from_data(const void *data, int ndim, const int64_t *shape,
                               ct_dtype dtype);
/* Wraps `data` without copying; `deleter(data, ctx)` runs when the last
 * reference to the storage goes away (may be NULL: the caller keeps `data`
 * alive). If this call fails, the deleter is never called. */
CT_API ct_tensor *ct_from_blob(void *data, int ndim, const int64_t *shape, ct_dtype dtype,
                               void (*deleter)(void *data, void *ctx), void *ctx);

/* ---- conversion -------------------------------------------------------- */

CT_API ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype);
/* non_blocking: asynchronous host<->device copy (pinned memory). */
CT_API ct_tensor *ct_to_device(const ct_tensor *t, ct_device device, bool non_blocking);
CT_API ct_tensor *ct_clone(const ct_tensor *t);
CT_API ct_tensor *ct_detach(const ct_tensor *t); /* shares storage, no grad */
CT_API ct_tensor *ct_contiguous(const ct_tensor *t);
CT_API ct_tensor *ct_pin_memory(const ct_tensor *t);
/* Another handle to the same tensor (like `b = a` in Python). */
CT_API ct_tensor *ct_alias(const ct_tensor *t);
/* dst.copy_(src): broadcasts, converts dtype and device. Returns a status. */
CT_API int ct_copy_(ct_tensor *dst, const ct_tensor *src);

/* ---- queries (never fail on a valid tensor; -1 / defaults on NULL) ----- */

CT_API int ct_ndim(const ct_tensor *t);
CT_API int64_t ct_size(const ct_tensor *t, int dim); /* negative dims count back */
CT_API int64_t ct_stride(const ct_tensor *t, int dim);
/* Copies min(ndim, max) sizes into shape; returns ndim (or -1 on error). */
CT_API int ct_shape(const ct_tensor *t, int64_t *shape, int max);
CT_API int64_t ct_numel(const ct_tensor *t);
CT_API ct_dtype ct_dtype_of(const ct_tensor *t);
CT_API ct_device ct_device_of(const ct_tensor *t);
CT_API bool ct_is_contiguous(const ct_tensor *t);
CT_API bool ct_is_defined(const ct_tensor *t); /* false on NULL or freed */
/* Writes "[2, 3] float32 cpu" into buf. */
CT_API void ct_describe(const ct_tensor *t, char *buf, size_t len);
/* Prints the values to stdout in libtorch's C++ layout (rows of values, then
 * "[ CPUFloatType{2,2} ]"); for debugging, not for parsing. */
CT_API int ct_print(const ct_tensor *t);

/* ---- reading values back ----------------------------------------------- */

/* The single value of a one-element tensor (any device: syncs). */
CT_API int ct_item(const ct_tensor *t, double *out);
CT_API int ct_item_int(const ct_tensor *t, int64_t *out);
/* Copies all elements, C-contiguous, in the tensor's dtype, into dst
 * (any device); nbytes must equal numel * dtype size. */
CT_API int ct_read(const ct_tensor *t, void *dst, size_t nbytes);
/* Copies src (host, C-contiguous, t's dtype) into t; nbytes as above. */
CT_API int ct_write(ct_tensor *t, const void *src, size_t nbytes);
/* Borrowed pointer to the first element of a contiguous CPU tensor; NULL
 * (with an error) otherwise. Valid while the storage lives. */
CT_API void *ct_data_ptr(const ct_tensor *t);

/* ---- storages (what torch.save records) ---------------------------------
 * A tensor views a storage: a flat run of bytes that views of one tensor
 * share. PyTorch's file format saves whole storages once each and every
 * tensor as (storage, offset, shape, stride); these calls expose exactly that. */

typedef struct {
    const void *id;   /* the same for every tensor viewing this storage */
    size_t nbytes;    /* size of the whole storage in bytes */
    int64_t offset;   /* t.storage_offset(), in elements of t's dtype */
    ct_device device; /* where the bytes live */
} ct_storage_info;

/* Fills *out for t. Returns a status. */
CT_API int ct_storage_info_of(const ct_tensor *t, ct_storage_info *out);
/* Borrowed pointer to the first byte of a CPU tensor's storage (not the
 * first element of t); NULL with CT_EDEVICE for a device storage. Valid
 * while the storage lives. */
CT_API const void *ct_storage_data(const ct_tensor *t);
/* Copies nbytes of t's storage starting at byte `pos` into host memory dst
 * (from a GPU: a device-to-host copy of just that range). Returns a status;
 * CT_EINVAL when the range leaves the storage. */
CT_API int ct_storage_read(const ct_tensor *t, size_t pos, void *dst, size_t nbytes);
/* A new tensor of `dtype` over the storage of `base` (shared, not copied):
 * Tensor.set_(storage, offset, shape, stride) — offset in elements of dtype.
 * CT_EINVAL when any element would lie outside the storage. New tensor. */
CT_API ct_tensor *ct_storage_view(const ct_tensor *base, ct_dtype dtype, int64_t offset, int ndim,
                                  const int64_t *shape, const int64_t *stride);

/* ---- indexing, joining, views (new tensors; views share storage) ------- */

/* t[..., start:end:step, ...] along dim; end may be INT64_MAX for "to the end",
 * negatives count back as in Python. */
CT_API ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
CT_API ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length);
CT_API ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index);
CT_API ct_tensor *ct_index_select(const ct_tensor *t, int dim, const ct_tensor *index);
CT_API ct_tensor *ct_gather(const ct_tensor *t, int dim, const ct_tensor *index);
CT_API ct_tensor *ct_scatter(const ct_tensor *t, int dim, const ct_tensor *index,
                             const ct_tensor *src);
CT_API ct_tensor *ct_scatter_add(const ct_tensor *t, int dim, const ct_tensor *index,
                                 const ct_tensor *src);
CT_API ct_tensor *ct_masked_fill(const ct_tensor *t, const ct_tensor *mask, double value);
/* t[mask] as a 1-D tensor. */
CT_API ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask);
CT_API ct_tensor *ct_cat(int n, ct_tensor *const *ts, int dim);
CT_API ct_tensor *ct_stack(int n, ct_tensor *const *ts, int dim);
/* Splits into pieces of split_size (the last may be smaller) / into `chunks`
 * pieces. Writes up to max new tensors to out; returns the number of pieces
 * (which may exceed max: nothing is written past max) or a negative code. */
CT_API int ct_split(const ct_tensor *t, int64_t split_size, int dim, ct_tensor **out, int max);
CT_API int ct_chunk(const ct_tensor *t, int chunks, int dim, ct_tensor **out, int max);
CT_API ct_tensor *ct_reshape(const ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_tensor *ct_view(const ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_tensor *ct_permute(const ct_tensor *t, int ndim, const int64_t *dims);
CT_API ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1);
CT_API ct_tensor *ct_t(const ct_tensor *t); /* 2-D transpose */
CT_API ct_tensor *ct_flatten(const ct_tensor *t, int start_dim, int end_dim);
CT_API ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_squeeze(const ct_tensor *t); /* all size-1 dims */
CT_API ct_tensor *ct_squeeze_dim(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_expand(const ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_tensor *ct_repeat(const ct_tensor *t, int ndim, const int64_t *repeats);
CT_API ct_tensor *ct_tril(const ct_tensor *t, int64_t diagonal);
CT_API ct_tensor *ct_triu(const ct_tensor *t, int64_t diagonal);

/* ---- elementwise ------------------------------------------------------- */

/* Binary ops broadcast and promote dtypes as PyTorch does. A scalar with an
 * integral value applied to an integer tensor acts as a Python int (t + 5
 * stays int64); any other scalar acts as a Python float. */
CT_API ct_tensor *ct_add(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_sub(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_mul(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_div(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_pow(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_maximum(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_minimum(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_add_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_sub_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_mul_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_div_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_pow_scalar(const ct_tensor *a, double exponent);
CT_API ct_tensor *ct_rsub_scalar(const ct_tensor *a, double b); /* b - a */

CT_API ct_tensor *ct_neg(const ct_tensor *t);
CT_API ct_tensor *ct_abs(const ct_tensor *t);
CT_API ct_tensor *ct_exp(const ct_tensor *t);
CT_API ct_tensor *ct_log(const ct_tensor *t);
CT_API ct_tensor *ct_sqrt(const ct_tensor *t);
CT_API ct_tensor *ct_rsqrt(const ct_tensor *t);
CT_API ct_tensor *ct_tanh(const ct_tensor *t);
CT_API ct_tensor *ct_sigmoid(const ct_tensor *t);
CT_API ct_tensor *ct_sin(const ct_tensor *t);
CT_API ct_tensor *ct_cos(const ct_tensor *t);
CT_API ct_tensor *ct_square(const ct_tensor *t);
CT_API ct_tensor *ct_reciprocal(const ct_tensor *t);
CT_API ct_tensor *ct_sign(const ct_tensor *t);
CT_API ct_tensor *ct_floor(const ct_tensor *t);
CT_API ct_tensor *ct_ceil(const ct_tensor *t);
CT_API ct_tensor *ct_round(const ct_tensor *t);
CT_API ct_tensor *ct_isnan(const ct_tensor *t);
CT_API ct_tensor *ct_isfinite(const ct_tensor *t);
CT_API ct_tensor *ct_logical_not(const ct_tensor *t);

/* Comparisons return bool tensors. */
CT_API ct_tensor *ct_eq(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_ne(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_lt(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_le(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_gt(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_ge(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_eq_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_ne_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_lt_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_le_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_gt_scalar(const ct_tensor *a, double b);
CT_API ct_tensor *ct_ge_scalar(const ct_tensor *a, double b);

CT_API ct_tensor *ct_where(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b);
/* clamp(t, min, max); pass -INFINITY / INFINITY for "no bound". */
CT_API ct_tensor *ct_clamp(const ct_tensor *t, double min, double max);

/* In place (t.add_(b, alpha=alpha) ...): return a status. */
CT_API int ct_add_(ct_tensor *t, const ct_tensor *b, double alpha);
CT_API int ct_mul_(ct_tensor *t, const ct_tensor *b);
CT_API int ct_mul_scalar_(ct_tensor *t, double b);
CT_API int ct_add_scalar_(ct_tensor *t, double b);
CT_API int ct_fill_(ct_tensor *t, double value);
CT_API int ct_zero_(ct_tensor *t);
CT_API int ct_uniform_(ct_tensor *t, double from, double to);
CT_API int ct_normal_(ct_tensor *t, double mean, double std);
CT_API int ct_clamp_(ct_tensor *t, double min, double max);

/* ---- reductions -------------------------------------------------------- */

CT_API ct_tensor *ct_sum(const ct_tensor *t);  /* over all elements */
CT_API ct_tensor *ct_mean(const ct_tensor *t);
CT_API ct_tensor *ct_max(const ct_tensor *t);
CT_API ct_tensor *ct_min(const ct_tensor *t);
/* Over the listed dims; ndims == 0 reduces over all dims (logsumexp, amax and
 * amin need at least one dim, as in Python). */
CT_API ct_tensor *ct_sum_dim(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim);
CT_API ct_tensor *ct_mean_dim(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim);
/* Variance / std with Bessel-style correction (1 = unbiased, as torch.var). */
CT_API ct_tensor *ct_var(const ct_tensor *t, int ndims, const int64_t *dims, double correction,
                         bool keepdim);
CT_API ct_tensor *ct_std(const ct_tensor *t, int ndims, const int64_t *dims, double correction,
                         bool keepdim);
CT_API ct_tensor *ct_logsumexp(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim);
CT_API ct_tensor *ct_amax(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim);
CT_API ct_tensor *ct_amin(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim);
/* torch.max(t, dim): values and indices (either out pointer may be NULL). */
CT_API int ct_max_dim(const ct_tensor *t, int dim, bool keepdim, ct_tensor **values,
                      ct_tensor **indices);
CT_API int ct_min_dim(const ct_tensor *t, int dim, bool keepdim, ct_tensor **values,
                      ct_tensor **indices);
CT_API ct_tensor *ct_argmax(const ct_tensor *t, int dim, bool keepdim);
CT_API ct_tensor *ct_argmin(const ct_tensor *t, int dim, bool keepdim);
/* p-norm over all elements. */
CT_API ct_tensor *ct_norm(const ct_tensor *t, double p);
CT_API ct_tensor *ct_topk(const ct_tensor *t, int64_t k, int dim, bool largest, bool sorted,
                          ct_tensor **indices); /* returns values; indices may be NULL */
CT_API ct_tensor *ct_cumsum(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_multinomial(const ct_tensor *probs, int64_t num_samples, bool replacement);

/* ---- linear algebra, convolution, pooling ------------------------------ */

CT_API ct_tensor *ct_matmul(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_mm(const ct_tensor *a, const ct_tensor *b);
CT_API ct_tensor *ct_bmm(const ct_tensor *a, const ct_tensor *b);
/* x @ weight.T + bias; bias may be NULL. */
CT_API ct_tensor *ct_linear(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias);
/* bias may be NULL. 1-D: stride/padding/dilation are single values. */
CT_API ct_tensor *ct_conv1d(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                            int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
/* 2-D with the same value on both axes (most CNNs); _ex takes {h, w} pairs. */
CT_API ct_tensor *ct_conv2d(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                            int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
CT_API ct_tensor *ct_conv2d_ex(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                               const int64_t stride[2], const int64_t padding[2],
                               const int64_t dilation[2], int64_t groups);
/* stride 0 means stride = kernel, as in PyTorch. */
CT_API ct_tensor *ct_max_pool1d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
CT_API ct_tensor *ct_max_pool2d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
CT_API ct_tensor *ct_avg_pool2d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding);
CT_API ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *x, int64_t out_h, int64_t out_w);

/* ---- neural-network functions ------------------------------------------ */

CT_API ct_tensor *ct_relu(const ct_tensor *t);
CT_API ct_tensor *ct_gelu(const ct_tensor *t);      /* exact (erf) */
CT_API ct_tensor *ct_gelu_tanh(const ct_tensor *t); /* approximate="tanh" */
CT_API ct_tensor *ct_silu(const ct_tensor *t);
CT_API ct_tensor *ct_leaky_relu(const ct_tensor *t, double negative_slope);
CT_API ct_tensor *ct_softmax(const ct_tensor *t, int dim);
CT_API ct_tensor *ct_log_softmax(const ct_tensor *t, int dim);
/* Dropout draws its mask from the default generator; identity when !training. */
CT_API ct_tensor *ct_dropout(const ct_tensor *t, double p, bool training);
/* weight/bias/running stats may be NULL, as in F.batch_norm. In training,
 * running_mean/var are updated in place with `momentum`. */
CT_API ct_tensor *ct_batch_norm(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                                ct_tensor *running_mean, ct_tensor *running_var, bool training,
                                double momentum, double eps);
/* Normalises over the last `ndims` dims (normalized_shape = their sizes). */
CT_API ct_tensor *ct_layer_norm(const ct_tensor *x, int ndims, const int64_t *normalized_shape,
                                const ct_tensor *weight, const ct_tensor *bias, double eps);
/* padding_idx < 0: none. */
CT_API ct_tensor *ct_embedding(const ct_tensor *weight, const ct_tensor *indices,
                               int64_t padding_idx);
/* softmax(q k^T * scale + mask) v; mask may be NULL (bool: true = keep, or
 * float: added); scale <= 0 means 1/sqrt(head_dim). */
CT_API ct_tensor *ct_scaled_dot_product_attention(const ct_tensor *q, const ct_tensor *k,
                                                  const ct_tensor *v, const ct_tensor *mask,
                                                  double dropout_p, bool is_causal, double scale);
CT_API ct_tensor *ct_one_hot(const ct_tensor *indices, int64_t num_classes);

/* ---- losses ------------------------------------------------------------ */

typedef enum {
    CT_REDUCE_MEAN = 0,
    CT_REDUCE_SUM,
    CT_REDUCE_NONE,
    CT_REDUCE_MAX_ENUM_ = 0x7fffffff /* keeps the enum int-sized */
} ct_reduction;

typedef struct {
    const ct_tensor *weight; /* per-class weights, or NULL */
    int64_t ignore_index;    /* default -100 */
    double label_smoothing;  /* default 0 */
    ct_reduction reduction;  /* default mean */
} ct_cross_entropy_opts;

CT_API ct_cross_entropy_opts ct_cross_entropy_defaults(void);
/* logits [N, C] (or [N, C, d...]); target class indices [N] (int64) or class
 * probabilities of the logits' shape. */
CT_API ct_tensor *ct_cross_entropy(const ct_tensor *logits, const ct_tensor *target);
CT_API ct_tensor *ct_cross_entropy_ex(const ct_tensor *logits, const ct_tensor *target,
                                      const ct_cross_entropy_opts *o);
/* label_smoothing is ignored by nll. */
CT_API ct_tensor *ct_nll_loss(const ct_tensor *log_probs, const ct_tensor *target,
                              const ct_cross_entropy_opts *o);
CT_API ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction r);
CT_API ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction r);
CT_API ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target,
                                    ct_reduction r, double beta);
/* weight and pos_weight may be NULL. */
CT_API ct_tensor *ct_bce_with_logits(const ct_tensor *logits, const ct_tensor *target,
                                     const ct_tensor *weight, const ct_tensor *pos_weight,
                                     ct_reduction r);

/* ---- autograd ---------------------------------------------------------- */

CT_API int ct_set_requires_grad(ct_tensor *t, bool requires_grad);
CT_API bool ct_requires_grad(const ct_tensor *t);
/* loss.backward() for a one-element tensor. */
CT_API int ct_backward(const ct_tensor *loss);
/* t.backward(gradient, retain_graph, create_graph); gradient may be NULL for
 * a one-element t. */
CT_API int ct_backward_ex(const ct_tensor *t, const ct_tensor *gradient, bool retain_graph,
                          bool create_graph);
/* t.grad as a new handle sharing its storage; NULL without an error when t has
 * no gradient (check ct_has_grad first, or ct_last_code()). */
CT_API ct_tensor *ct_grad(const ct_tensor *t);
CT_API bool ct_has_grad(const ct_tensor *t);
/* t.grad = g (a copy of the handle; g may be NULL to set None). */
CT_API int ct_set_grad(ct_tensor *t, const ct_tensor *g);
/* Zeroes t.grad, or sets it to None (set_to_none, PyTorch's default). */
CT_API int ct_zero_grad(ct_tensor *t, bool set_to_none);
CT_API bool ct_is_leaf(const ct_tensor *t);

/* tensor.register_post_accumulate_grad_hook(fn): fn(t, ctx) runs each time
 * backward has accumulated a gradient into t.grad (t: a leaf that requires
 * grad; CT_ESTATE otherwise), on the thread running that part of backward
 * (the caller's for CPU tensors, a device thread for CUDA ones). fn receives
 * the very handle passed here (borrowed), and t.grad already holds the new
 * total. One such hook per tensor: a second registration replaces the first,
 * and fn == NULL removes it (always succeeds on a live handle).
 *
 * Lifetime: the hook lives with the tensor, not with the handle. Remove it
 * before freeing this handle (or before ctx dies); a hook that finds its
 * handle freed, or naming another tensor, skips fn rather than pass a stale
 * handle. A hook must not start another backward. Returns a status. */
typedef void (*ct_post_accumulate_grad_fn)(ct_tensor *t, void *ctx);
CT_API int ct_set_post_accumulate_grad_hook(ct_tensor *t, ct_post_accumulate_grad_fn fn, void *ctx);

/* Regions, as Python's context managers. End them in reverse order, on the
 * thread that began them:
 *     ct_guard *g = ct_no_grad();  ...  ct_guard_end(g);                    */
CT_API ct_guard *ct_no_grad(void);
CT_API ct_guard *ct_enable_grad(void);
CT_API ct_guard *ct_inference_mode(void);
CT_API void ct_guard_end(ct_guard *g); /* accepts NULL */
CT_API bool ct_is_grad_enabled(void);

/* ---- random numbers and threads ---------------------------------------- */

/* torch.manual_seed(seed): the CPU generator and every CUDA device's. */
CT_API int ct_manual_seed(uint64_t seed);
/* Generator state as an opaque uint8 tensor (torch.get_rng_state() for the
 * CPU, torch.cuda.get_rng_state(i) for a GPU). Returns a new tensor. */
CT_API ct_tensor *ct_rng_get_state(ct_device device);
CT_API int ct_rng_set_state(ct_device device, const ct_tensor *state);

/* Intra-op threads (torch.set_num_threads); n <= 0 picks the number of
 * cores. Returns the number now in use. */
CT_API int ct_set_num_threads(int n);
CT_API int ct_get_num_threads(void);

/* Deterministic algorithms, process-wide: torch.use_deterministic_algorithms(on)
 * with torch.backends.cudnn.deterministic = on (and cudnn.benchmark off).
 * An operator without a deterministic implementation then fails, naming
 * itself, instead of running; uninitialised memory (ct_empty) is filled
 * with NaN, as PyTorch does. On a GPU, cuBLAS needs CUBLAS_WORKSPACE_CONFIG
 * set before its first use: turning the mode on sets it to ":4096:8"
 * (PyTorch's advice) when the environment has none. Returns 0 or an error. */
CT_API int ct_set_deterministic(bool on);
CT_API bool ct_get_deterministic(void);

/* "2.11.0" — the libtorch this library was built against. */
CT_API const char *ct_torch_version(void);

#ifdef __cplusplus
}
#endif
#endif
