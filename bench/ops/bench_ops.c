/* bench/ops/bench_ops.c — what calling an operator by name (ctrial/ops.h)
 * costs beside tensor.h's hand-written wrapper of the same operator.
 *
 *     bench_ops [--calls N] [--rounds R] [--grad]
 *
 * For each operator, three ways of making the same call on small tensors
 * (so the call's overhead, not the kernel, is what is timed):
 *   wrapper   tensor.h's function (ct_add, ct_linear, ...)
 *   by name   ct_call("aten::add.Tensor", ...)    (a string lookup each call)
 *   found     ct_op_call(op, ...) with op = ct_op_find once
 * Each round times N calls of every way in turn (the order rotates from
 * round to round), each result freed at once; the table gives the median
 * ns per call over the rounds and the extra ns of the two by-name ways over
 * the wrapper (the target: at most 1000). --grad makes the inputs require
 * grad, so every call also records autograd's graph. One intra-op thread. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/ctrial.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static ct_tensor *x8, *y8, *x48, *w88, *b8, *img, *k33, *ln_w, *ln_b;
static const ct_op *op_add, *op_relu, *op_linear, *op_sum, *op_softmax, *op_conv2d, *op_layer_norm;

/* One benchmark: the three ways of one call. */
typedef struct {
    const char *name;
    ct_tensor *(*way[3])(void);
} bench;

#define WAYS(tag, wrapper_expr, name, ...)                                                           \
    static ct_tensor *tag##_wrapper(void) { return wrapper_expr; }                                   \
    static ct_tensor *tag##_byname(void) { return CT_CALL(name, __VA_ARGS__); }                      \
    static ct_tensor *tag##_found(void) {                                                            \
        const ct_arg args[] = {__VA_ARGS__};                                                         \
        return ct_op_call(op_##tag, sizeof args / sizeof args[0], args);                             \
    }

WAYS(add, ct_add(x8, y8), "aten::add.Tensor", CT_T(x8), CT_T(y8))
WAYS(relu, ct_relu(x8), "aten::relu", CT_T(x8))
WAYS(sum, ct_sum(x8), "aten::sum", CT_T(x8))
WAYS(softmax, ct_softmax(x48, 1), "aten::softmax.int", CT_T(x48), CT_I(1))
WAYS(linear, ct_linear(x48, w88, b8), "aten::linear", CT_T(x48), CT_T(w88), CT_T(b8))
WAYS(conv2d, ct_conv2d(img, k33, NULL, 1, 1, 1, 1), "aten::conv2d", CT_T(img), CT_T(k33), CT_NONE, CT_I(1),
     CT_I(1))
WAYS(layer_norm, ct_layer_norm(x48, 1, (const int64_t[]){8}, ln_w, ln_b, 1e-5), "aten::layer_norm", CT_T(x48),
     CT_INTS(8), CT_T(ln_w), CT_T(ln_b))

static const bench benches[] = {
    {"add (2 x [8])", {add_wrapper, add_byname, add_found}},
    {"relu ([8])", {relu_wrapper, relu_byname, relu_found}},
    {"sum ([8])", {sum_wrapper, sum_byname, sum_found}},
    {"softmax ([4, 8], dim 1)", {softmax_wrapper, softmax_byname, softmax_found}},
    {"linear ([4, 8] x [8, 8] + [8])", {linear_wrapper, linear_byname, linear_found}},
    {"conv2d ([1, 1, 4, 4] * [1, 1, 3, 3])", {conv2d_wrapper, conv2d_byname, conv2d_found}},
    {"layer_norm ([4, 8] over [8])", {layer_norm_wrapper, layer_norm_byname, layer_norm_found}},
};
enum { NB = sizeof benches / sizeof benches[0], MAX_ROUNDS = 64 };

static double time_way(ct_tensor *(*f)(void), int calls) {
    double t0 = now_ns();
    for (int i = 0; i < calls; i++) {
        ct_tensor *r = f();
        if (!r) {
            fprintf(stderr, "bench_ops: %s\n", ct_last_error());
            exit(1);
        }
        ct_tensor_free(r);
    }
    return (now_ns() - t0) / calls;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int calls = 20000, rounds = 7;
    bool grad = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--grad")) grad = true;
        else {
            fprintf(stderr, "usage: %s [--calls N] [--rounds R] [--grad]\n", argv[0]);
            return 2;
        }
    }
    if (calls < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_ops: --calls >= 1, --rounds 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    ct_set_num_threads(1);
    ct_manual_seed(0);
    ct_topts o = {.requires_grad = grad};
    x8 = ct_randn(CT_SHAPE(8), &o), y8 = ct_randn(CT_SHAPE(8), &o), x48 = ct_randn(CT_SHAPE(4, 8), &o);
    w88 = ct_randn(CT_SHAPE(8, 8), &o), b8 = ct_randn(CT_SHAPE(8), &o);
    img = ct_randn(CT_SHAPE(1, 1, 4, 4), &o), k33 = ct_randn(CT_SHAPE(1, 1, 3, 3), &o);
    ln_w = ct_ones(CT_SHAPE(8), &o), ln_b = ct_zeros(CT_SHAPE(8), &o);
    op_add = ct_op_find("aten::add.Tensor"), op_relu = ct_op_find("aten::relu");
    op_sum = ct_op_find("aten::sum"), op_softmax = ct_op_find("aten::softmax.int");
    op_linear = ct_op_find("aten::linear"), op_conv2d = ct_op_find("aten::conv2d");
    op_layer_norm = ct_op_find("aten::layer_norm");
    if (!op_add || !op_relu || !op_sum || !op_softmax || !op_linear || !op_conv2d || !op_layer_norm) {
        fprintf(stderr, "bench_ops: %s\n", ct_last_error());
        return 1;
    }

    static double ns[NB][3][MAX_ROUNDS];
    for (int b = 0; b < NB; b++)
        for (int w = 0; w < 3; w++) time_way(benches[b].way[w], calls / 10 + 1); /* warm-up */
    for (int r = 0; r < rounds; r++)
        for (int b = 0; b < NB; b++)
            for (int k = 0; k < 3; k++) {
                int w = (k + r) % 3;
                ns[b][w][r] = time_way(benches[b].way[w], calls);
            }

    printf("ns per call, median of %d rounds of %d calls, one thread%s\n\n", rounds, calls,
           grad ? ", inputs require grad" : "");
    printf("| operator | wrapper | by name | found | by name - wrapper | found - wrapper |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (int b = 0; b < NB; b++) {
        double m[3];
        for (int w = 0; w < 3; w++) m[w] = median(ns[b][w], rounds);
        printf("| %s | %.0f | %.0f | %.0f | %+.0f | %+.0f |\n", benches[b].name, m[0], m[1], m[2], m[1] - m[0],
               m[2] - m[0]);
    }
    return 0;
}
