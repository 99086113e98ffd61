/* nn_forward_dump OUT.json — forward/backward of every built-in layer, the
 * train/eval behaviour of BatchNorm and Dropout, a float64 model, and
 * gradient clipping, written for test_forward_parity.py to repeat in torch.
 *
 * Forward cases: manual_seed(seed); build; x = <input>; `pre` forwards in
 * training mode (BatchNorm statistics move); switch to eval when asked; the
 * recorded forward y = m(x); w = randn_like(y); backward of sum(y * w). The
 * output, the gradients of the parameters and of a float input (which
 * requires grad), and the state afterwards are written.
 *
 * Clip cases: standalone tensors with seeded random gradients (float32 and
 * float64 mixed, one without a gradient) go through ct_clip_grad_norm /
 * ct_clip_grad_value; the gradients before and after and the total norm are
 * written, and the script runs torch.nn.utils on the same gradients. */
#include <math.h>
#include <string.h>

#include "nn_util.h"

typedef struct {
    const char *name;
    uint64_t seed;
    ct_module *(*build)(void);
    const char *input;  /* "randn" or "randint" (int64 in [0, high)) */
    int ndim;
    int64_t shape[4];
    int64_t high;
    ct_dtype dtype; /* of a randn input; the model is moved to it */
    int pre;        /* training forwards before the recorded one */
    bool eval;      /* record in eval mode */
} fwd_case;

static ct_module *linear(void) { return ct_nn_linear(20, 30, true); }
static ct_module *linear_nobias(void) { return ct_nn_linear(20, 5, false); }

static ct_module *conv1d_strided(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.stride = 2;
    o.padding = 1;
    return ct_nn_conv1d(4, 6, 3, &o);
}

static ct_module *conv1d_groups(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.groups = 2;
    o.dilation = 2;
    o.bias = false;
    return ct_nn_conv1d(4, 6, 3, &o);
}

static ct_module *conv2d_groups(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.groups = 4;
    o.dilation = 2;
    o.padding = 2;
    o.stride = 2;
    return ct_nn_conv2d(4, 8, 3, &o);
}

static ct_module *bn1d(void) { return ct_nn_batchnorm1d(10, NULL); }
static ct_module *bn2d(void) { return ct_nn_batchnorm2d(3, NULL); }

static ct_module *bn2d_cumulative(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.momentum = NAN; /* momentum=None */
    return ct_nn_batchnorm2d(3, &o);
}

static ct_module *bn2d_notrack(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.track_running_stats = false;
    return ct_nn_batchnorm2d(3, &o);
}

static ct_module *bn2d_noaffine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.affine = false;
    o.momentum = 0.3;
    o.eps = 1e-3;
    return ct_nn_batchnorm2d(3, &o);
}

static ct_module *layernorm(void) { return ct_nn_layernorm(16, NULL); }
static ct_module *embedding_pad(void) { return ct_nn_embedding(50, 8, 3); }
static ct_module *dropout(void) { return ct_nn_dropout(0.3); }
static ct_module *mlp(void) { return nn_build_mlp(0.5); }

/* Conv2d(2, 4, 3, padding=1), GELU, MaxPool2d(2), SiLU, ReLU, Flatten,
 * Linear(64, 6), Tanh, Sigmoid */
static ct_module *stack(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.padding = 1;
    ct_module *seq = ct_nn_sequential(0, NULL);
    ct_nn_sequential_append(seq, ct_nn_conv2d(2, 4, 3, &o));
    ct_nn_sequential_append(seq, ct_nn_gelu());
    ct_nn_sequential_append(seq, ct_nn_max_pool2d(2, 0, 0));
    ct_nn_sequential_append(seq, ct_nn_silu());
    ct_nn_sequential_append(seq, ct_nn_relu());
    ct_nn_sequential_append(seq, ct_nn_flatten(1, -1));
    ct_nn_sequential_append(seq, ct_nn_linear(64, 6, true));
    ct_nn_sequential_append(seq, ct_nn_tanh());
    ct_nn_sequential_append(seq, ct_nn_sigmoid());
    return seq;
}

static const fwd_case CASES[] = {
    {"linear", 1, linear, "randn", 2, {4, 20}, 0, CT_F32, 0, false},
    {"linear_3d_nobias", 2, linear_nobias, "randn", 3, {2, 3, 20}, 0, CT_F32, 0, false},
    {"conv1d", 3, conv1d_strided, "randn", 3, {2, 4, 9}, 0, CT_F32, 0, false},
    {"conv1d_groups", 4, conv1d_groups, "randn", 3, {2, 4, 11}, 0, CT_F32, 0, false},
    {"conv2d_groups", 5, conv2d_groups, "randn", 4, {2, 4, 7, 7}, 0, CT_F32, 0, false},
    {"bn1d_train", 6, bn1d, "randn", 2, {6, 10}, 0, CT_F32, 2, false},
    {"bn1d_train_3d", 7, bn1d, "randn", 3, {4, 10, 5}, 0, CT_F32, 1, false},
    {"bn2d_eval", 8, bn2d, "randn", 4, {4, 3, 5, 5}, 0, CT_F32, 3, true},
    {"bn2d_cumulative", 9, bn2d_cumulative, "randn", 4, {4, 3, 5, 5}, 0, CT_F32, 3, false},
    {"bn2d_notrack_eval", 10, bn2d_notrack, "randn", 4, {4, 3, 5, 5}, 0, CT_F32, 1, true},
    {"bn2d_noaffine", 11, bn2d_noaffine, "randn", 4, {4, 3, 5, 5}, 0, CT_F32, 2, false},
    {"layernorm", 12, layernorm, "randn", 3, {3, 5, 16}, 0, CT_F32, 0, false},
    {"embedding_pad", 13, embedding_pad, "randint", 2, {4, 7}, 50, CT_F32, 0, false},
    {"dropout_train", 14, dropout, "randn", 2, {8, 16}, 0, CT_F32, 1, false},
    {"dropout_eval", 15, dropout, "randn", 2, {8, 16}, 0, CT_F32, 0, true},
    {"stack", 16, stack, "randn", 4, {3, 2, 8, 8}, 0, CT_F32, 0, false},
    {"mlp_eval", 17, mlp, "randn", 2, {5, 784}, 0, CT_F32, 0, true},
    {"mlp_f64", 18, mlp, "randn", 2, {5, 784}, 0, CT_F64, 0, false},
    {"cnn_f64_eval", 19, nn_build_cnn, "randn", 4, {3, 1, 28, 28}, 0, CT_F64, 2, true},
};

static json_t *forward_case(const fwd_case *c) {
    ct_manual_seed(c->seed);
    ct_module *m = c->build();
    if (m && c->dtype != CT_F32 && ct_nn_to_dtype(m, c->dtype) != 0) {
        ct_nn_free(m);
        m = NULL;
    }
    ct_scope *s = ct_scope_begin();
    json_t *out = NULL;
    ct_tensor *x = strcmp(c->input, "randint") == 0
                       ? ct_randint(0, c->high, c->ndim, c->shape, &(ct_topts){.dtype = CT_I64})
                       : ct_randn(c->ndim, c->shape, &(ct_topts){.dtype = c->dtype, .requires_grad = true});
    for (int i = 0; m && i < c->pre; ++i) ct_nn_forward(m, x);
    if (m && c->eval) ct_nn_train(m, false);
    ct_tensor *y = m ? ct_nn_forward(m, x) : NULL;
    int64_t yshape[8];
    int yndim = y ? ct_shape(y, yshape, 8) : 0;
    ct_tensor *w = y ? ct_randn(yndim, yshape, &(ct_topts){.dtype = ct_dtype_of(y)}) : NULL;
    if (!y || !w || ct_backward(ct_sum(ct_mul(y, w))) != 0) {
        fprintf(stderr, "%s: %s\n", c->name, ct_last_error());
    } else {
        out = json_object();
        json_object_set_new(out, "name", json_string(c->name));
        json_object_set_new(out, "output", nn_dump_tensor("output", y));
        json_t *grads = json_array();
        for (size_t i = 0; i < ct_nn_num_params(m); ++i) {
            const char *name = NULL;
            ct_tensor *p = ct_nn_param_at(m, i, &name);
            json_array_append_new(grads, nn_dump_tensor(name, ct_grad(p)));
        }
        json_object_set_new(out, "grads", grads);
        if (ct_has_grad(x)) json_object_set_new(out, "input_grad", nn_dump_tensor("input", ct_grad(x)));
        json_object_set_new(out, "state", nn_dump_state(m));
        if (c->eval && strncmp(c->name, "dropout", 7) == 0) {
            /* Dropout in eval mode is the identity (checked here as well). */
            ct_tensor *same = ct_eq(y, x);
            ct_tensor *all = ct_sum(ct_to_dtype(same, CT_I64));
            int64_t n = 0;
            ct_item_int(all, &n);
            json_object_set_new(out, "eval_identity", json_boolean(n == ct_numel(x)));
        }
    }
    ct_scope_end(s);
    ct_nn_free(m);
    return out;
}

/* ---- gradient clipping -------------------------------------------------- */

enum { NCLIP = 5 };

/* Five tensors: float32 and float64 mixed, the fourth without a gradient. */
static void make_clip_params(uint64_t seed, ct_tensor **p) {
    static const int64_t shapes[NCLIP][2] = {{7, 3}, {5, 1}, {4, 4}, {2, 2}, {9, 1}};
    static const ct_dtype dts[NCLIP] = {CT_F32, CT_F64, CT_F32, CT_F32, CT_F64};
    ct_manual_seed(seed);
    for (int i = 0; i < NCLIP; ++i) {
        ct_topts o = {.dtype = dts[i], .requires_grad = true};
        p[i] = ct_randn(2, shapes[i], &o);
        if (i != 3) {
            ct_tensor *g = ct_randn(2, shapes[i], &(ct_topts){.dtype = dts[i]});
            ct_set_grad(p[i], g);
            ct_tensor_free(g);
        }
    }
}

static json_t *dump_grads(ct_tensor **p) {
    json_t *arr = json_array();
    for (int i = 0; i < NCLIP; ++i) {
        if (ct_has_grad(p[i])) {
            ct_tensor *g = ct_grad(p[i]);
            json_array_append_new(arr, nn_dump_tensor("grad", g));
            ct_tensor_free(g);
        } else {
            json_array_append_new(arr, json_null());
        }
    }
    return arr;
}

static json_t *clip_case(uint64_t seed, const char *kind, double max_norm, double norm_type) {
    ct_tensor *p[NCLIP];
    make_clip_params(seed, p);
    json_t *out = json_object();
    json_object_set_new(out, "kind", json_string(kind));
    json_object_set_new(out, "max", json_real(max_norm));
    json_object_set_new(out, "norm_type", isinf(norm_type) ? json_string("inf") : json_real(norm_type));
    json_object_set_new(out, "before", dump_grads(p));
    double total = -1;
    int rc = strcmp(kind, "norm") == 0 ? ct_clip_grad_norm(NCLIP, p, max_norm, norm_type, &total)
                                       : ct_clip_grad_value(NCLIP, p, max_norm);
    if (rc != 0) fprintf(stderr, "clip %s: %s\n", kind, ct_last_error());
    json_object_set_new(out, "rc", json_integer(rc));
    json_object_set_new(out, "total", json_real(total));
    json_object_set_new(out, "after", dump_grads(p));
    for (int i = 0; i < NCLIP; ++i) ct_tensor_free(p[i]);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
        return 2;
    }
    json_t *root = json_object();
    json_t *cases = json_array();
    int failed = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; ++i) {
        const fwd_case *c = &CASES[i];
        json_t *r = forward_case(c);
        if (!r) {
            failed = 1;
            continue;
        }
        json_t *input = json_object();
        json_object_set_new(input, "kind", json_string(c->input));
        json_t *shape = json_array();
        for (int d = 0; d < c->ndim; ++d) json_array_append_new(shape, json_integer(c->shape[d]));
        json_object_set_new(input, "shape", shape);
        json_object_set_new(input, "high", json_integer(c->high));
        json_object_set_new(input, "dtype", json_string(ct_dtype_name(c->dtype)));
        json_object_set_new(r, "input", input);
        json_object_set_new(r, "seed", json_integer((json_int_t)c->seed));
        json_object_set_new(r, "pre", json_integer(c->pre));
        json_object_set_new(r, "eval", json_boolean(c->eval));
        json_array_append_new(cases, r);
    }
    json_object_set_new(root, "forward", cases);

    json_t *clips = json_array();
    json_array_append_new(clips, clip_case(300, "norm", 0.5, 2.0));     /* clips */
    json_array_append_new(clips, clip_case(301, "norm", 1e6, 2.0));     /* coefficient clamped to 1 */
    json_array_append_new(clips, clip_case(302, "norm", 0.5, INFINITY));
    json_array_append_new(clips, clip_case(303, "norm", 2.0, 1.0));
    json_array_append_new(clips, clip_case(304, "norm", 0.25, 3.0));
    json_array_append_new(clips, clip_case(305, "value", 0.3, 0));
    json_object_set_new(root, "clip", clips);
    if (nn_write_json(argv[1], root) != 0) return 1;
    return failed;
}
