/* tests/ops/parity.h — the harness shared by the C half of the parity test.
 *
 * The C program (parity_main.c + cases_*.c) runs every value-computing
 * function of tensor.h on seeded inputs and writes what came out — values,
 * input gradients, shapes, strides, dtypes, requires_grad — to a JSON file.
 * parity.py runs it, recomputes every case with Python's torch (cases_*.py
 * hold the twins, one per C case, under the same name) and compares.
 *
 * Both sides draw their inputs from libtorch's default CPU generator after
 * the same seed, so they see the same numbers: before each case the harness
 * seeds 0; bw() seeds 1 before drawing its weights. Draw in separate
 * statements: C leaves the order of argument evaluation unspecified.
 */
#ifndef PARITY_H
#define PARITY_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <ctrial/ctrial.h>

/* ---- recording results of the current case ------------------------------ */

/* Records t (values, shape, strides, dtype, requires_grad) under key; a NULL
 * t records the pending error instead. Returns t. */
ct_tensor *put(const char *key, ct_tensor *t);
/* Shape, strides, dtype and requires_grad only (ct_empty's values). */
ct_tensor *put_meta(const char *key, ct_tensor *t);
/* Records t's gradient under "<name>.grad" (JSON null when it has none). */
void put_grad(const char *name, const ct_tensor *t);
void put_val(const char *key, double v);
void put_int(const char *key, int64_t v);
void put_bool(const char *key, bool v);
void put_str(const char *key, const char *s);
/* A host buffer read back with ct_read, recorded like a 1-D tensor. */
void put_buffer(const char *key, ct_dtype dtype, const void *data, int64_t n);
/* Records a failure of the case that is not an op returning NULL. */
void put_failure(const char *what);

/* ---- backward ------------------------------------------------------------ */

/* Seeds 1, draws w_i ~ randn(shape of outs[i], dtype of outs[i]) in order,
 * and runs backward on sum_i (outs[i] * w_i).sum(). */
void bw(int n, ct_tensor *const *outs);
#define BW(...)                                                                \
    bw((int)(sizeof((ct_tensor *[]){__VA_ARGS__}) / sizeof(ct_tensor *)),      \
       (ct_tensor *[]){__VA_ARGS__})

/* Named outputs that are recorded and later fed to bw() in insertion order. */
typedef struct {
    int n;
    ct_tensor *t[96];
} outs;
ct_tensor *out(outs *o, const char *key, ct_tensor *t);
void bw_outs(const outs *o);

/* ---- inputs -------------------------------------------------------------- */

extern const ct_topts F32, F32G, F64, F64G, F16, BF16, I64, I32, U8, BOOLT;
extern const ct_dtype ALL_DTYPES[8];

#define S(...) CT_SHAPE(__VA_ARGS__)
#define RN(...) ct_randn(S(__VA_ARGS__), &F32)
#define RNG(...) ct_randn(S(__VA_ARGS__), &F32G)
#define RN64(...) ct_randn(S(__VA_ARGS__), &F64)
#define RN64G(...) ct_randn(S(__VA_ARGS__), &F64G)

/* Tensors from literal data: F64D(S(2, 2), 1, 2, 3, 4). */
#define F32D(shp, ...) ct_from_data((const float[]){__VA_ARGS__}, shp, CT_F32)
#define F64D(shp, ...) ct_from_data((const double[]){__VA_ARGS__}, shp, CT_F64)
#define I64D(shp, ...) ct_from_data((const int64_t[]){__VA_ARGS__}, shp, CT_I64)
#define I32D(shp, ...) ct_from_data((const int32_t[]){__VA_ARGS__}, shp, CT_I32)
#define U8D(shp, ...) ct_from_data((const uint8_t[]){__VA_ARGS__}, shp, CT_U8)
#define BOOLD(shp, ...) ct_from_data((const bool[]){__VA_ARGS__}, shp, CT_BOOL)

/* Makes t a leaf that requires grad; returns t. */
ct_tensor *G(ct_tensor *t);

/* ---- the cases (each has a twin of the same name in cases_*.py) ---------- */

#define PARITY_CASES(X)                                                        \
    /* cases_create.c */                                                       \
    X(rng_inputs) X(creation) X(from_data) X(to_dtype) X(clone_detach_contiguous) \
    X(read_write) X(queries) X(rng_state)                                      \
    /* cases_shape.c */                                                        \
    X(slice) X(narrow_select) X(index) X(join) X(views)                        \
    /* cases_math.c */                                                         \
    X(binary_broadcast) X(promotion) X(scalar_ops) X(unary) X(compare) X(where) \
    X(clamp) X(inplace) X(inplace_int) X(reductions) X(max_min_dim)            \
    X(norm_topk_cumsum)                                                        \
    /* cases_nn.c */                                                           \
    X(matmul) X(conv) X(pool) X(activations) X(dropout) X(dropout_masks)      \
    X(batch_norm)                                                              \
    X(layer_norm) X(embedding) X(sdpa) X(one_hot) X(cross_entropy) X(nll_loss) \
    X(regression_losses) X(bce_with_logits)                                    \
    /* cases_autograd.c */                                                     \
    X(autograd) X(grad_modes)

#define PARITY_DECLARE(name) void case_##name(void);
PARITY_CASES(PARITY_DECLARE)
#undef PARITY_DECLARE

#endif
