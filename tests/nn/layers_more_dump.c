/* nn_layers_more_dump OUT.json — the single-call layers of shim/layers_*.cpp that
 * come after MaxPool2d in nn.h (Conv3d, ConvTranspose, GroupNorm,
 * InstanceNorm, LayerNorm over several dims, the average and adaptive
 * pools, Upsample, Dropout1d/2d, Identity, Softmax, LogSoftmax, LeakyReLU,
 * ELU, Mish, Hardswish, PReLU, EmbeddingBag), written for
 * test_layers_more.py to repeat in torch.
 *
 * Each case: manual_seed(seed); build; the state dict right after
 * construction (compared bit for bit); the module moved to the case's dtype;
 * the input drawn (randn that requires grad, or randint; for EmbeddingBag
 * through ct_nn_call, offsets and per_sample_weights as the case says); `pre`
 * forwards in training mode (running statistics move, dropout draws); eval
 * when asked; the recorded forward y; w = randn_like(y); backward of
 * sum(y * w). The output, the gradients of every parameter and of the float
 * inputs, and the state afterwards are written. Keep CASES in step with
 * test_layers_more.py. */
#include <math.h>
#include <string.h>

#include "nn_util.h"

typedef struct {
    const char *name;
    uint64_t seed;
    ct_module *(*build)(void);
    const char *input; /* "randn", "randint" (int64 in [0, high)), or "bag" (1-D randint + offsets, via ct_nn_call) */
    int ndim;
    int64_t shape[5];
    int64_t high;
    ct_dtype dtype; /* of a randn input; the model is moved to it */
    int pre;        /* training forwards before the recorded one */
    bool eval;      /* record in eval mode */
    /* "bag" only: offsets (n_offsets of them) and per_sample_weights */
    int n_offsets;
    int64_t offsets[4];
    bool psw;
} layer_case;

/* ---- constructors (one statement per layer: the order of RNG draws) ------------------- */

static ct_module *conv3d(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.stride = 2;
    o.padding = 1;
    return ct_nn_conv3d(2, 4, 3, &o);
}

static ct_module *conv3d_groups_nobias(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.groups = 2;
    o.dilation = 2;
    o.bias = false;
    return ct_nn_conv3d(4, 6, 2, &o);
}

static ct_module *convt1d(void) {
    ct_conv_transpose_opts o = ct_conv_transpose_defaults();
    o.stride = 2;
    o.padding = 1;
    o.output_padding = 1;
    return ct_nn_conv_transpose1d(4, 6, 3, &o);
}

static ct_module *convt1d_groups_nobias(void) {
    ct_conv_transpose_opts o = ct_conv_transpose_defaults();
    o.groups = 2;
    o.dilation = 2;
    o.bias = false;
    return ct_nn_conv_transpose1d(4, 6, 3, &o);
}

static ct_module *convt2d(void) {
    ct_conv_transpose_opts o = ct_conv_transpose_defaults();
    o.stride = 2;
    o.padding = 1;
    o.output_padding = 1;
    return ct_nn_conv_transpose2d(3, 5, 3, &o);
}

static ct_module *convt2d_groups(void) {
    ct_conv_transpose_opts o = ct_conv_transpose_defaults();
    o.stride = 3;
    o.groups = 4;
    o.output_padding = 2;
    o.dilation = 2;
    return ct_nn_conv_transpose2d(4, 8, 4, &o);
}

static ct_module *convt2d_plain(void) { return ct_nn_conv_transpose2d(2, 3, 2, NULL); }

static ct_module *groupnorm(void) { return ct_nn_groupnorm(2, 6, NULL); }

static ct_module *groupnorm_noaffine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.eps = 1e-3;
    o.affine = false;
    return ct_nn_groupnorm(3, 6, &o);
}

static ct_module *in1d(void) { return ct_nn_instancenorm1d(4, NULL); }

static ct_module *in1d_affine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.track_running_stats = false;
    return ct_nn_instancenorm1d(4, &o);
}

static ct_module *in2d_track(void) {
    ct_norm_opts o = ct_norm_defaults(); /* affine and track_running_stats */
    o.momentum = 0.2;
    return ct_nn_instancenorm2d(3, &o);
}

static ct_module *in2d_track_noaffine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.affine = false;
    return ct_nn_instancenorm2d(3, &o);
}

static ct_module *in2d_momentum_none(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.momentum = NAN;
    o.eps = 1e-3;
    return ct_nn_instancenorm2d(3, &o);
}

static ct_module *layernorm_2(void) { return ct_nn_layernorm_nd(2, (const int64_t[]){4, 5}, NULL); }

static ct_module *layernorm_3_noaffine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.eps = 1e-3;
    o.affine = false;
    return ct_nn_layernorm_nd(3, (const int64_t[]){3, 4, 5}, &o);
}

static ct_module *avg1d(void) { return ct_nn_avg_pool1d(3, 2, 1); }
static ct_module *avg2d(void) { return ct_nn_avg_pool2d(3, 0, 1); }
static ct_module *avg2d_s1(void) { return ct_nn_avg_pool2d(2, 1, 0); }
static ct_module *aavg1d(void) { return ct_nn_adaptive_avg_pool1d(4); }
static ct_module *aavg2d(void) { return ct_nn_adaptive_avg_pool2d(3, 2); }
static ct_module *amax2d(void) { return ct_nn_adaptive_max_pool2d(2, 3); }

static ct_module *up_scale(const char *mode, double scale, bool align) {
    ct_upsample_opts o = ct_upsample_defaults();
    o.mode = mode;
    o.scale_factor = scale;
    o.align_corners = align;
    return ct_nn_upsample(&o);
}

static ct_module *up_size(const char *mode, int n, int64_t a, int64_t b, int64_t c, bool align) {
    ct_upsample_opts o = ct_upsample_defaults();
    o.mode = mode;
    o.ndims = n;
    o.size[0] = a;
    o.size[1] = b;
    o.size[2] = c;
    o.align_corners = align;
    return ct_nn_upsample(&o);
}

static ct_module *up_nearest2(void) { return up_scale("nearest", 2.0, false); }
static ct_module *up_nearest_1d(void) { return up_size("nearest", 1, 7, 0, 0, false); }
static ct_module *up_nearest_3d(void) { return up_scale("nearest", 1.5, false); }
static ct_module *up_linear_ac(void) { return up_size("linear", 1, 9, 0, 0, true); }
static ct_module *up_linear_scale(void) { return up_scale("linear", 2.5, false); }
static ct_module *up_bilinear(void) { return up_scale("bilinear", 1.7, false); }
static ct_module *up_bilinear_ac(void) { return up_size("bilinear", 2, 7, 9, 0, true); }
static ct_module *up_bicubic(void) { return up_scale("bicubic", 2.0, false); }
static ct_module *up_bicubic_ac(void) { return up_size("bicubic", 2, 5, 3, 0, true); }
static ct_module *up_trilinear(void) { return up_size("trilinear", 3, 4, 5, 6, false); }
static ct_module *up_nearest_exact(void) { return up_scale("nearest-exact", 1.5, false); }
static ct_module *up_area(void) { return up_scale("area", 0.7, false); }

static ct_module *drop1d(void) { return ct_nn_dropout1d(0.4); }
static ct_module *drop2d(void) { return ct_nn_dropout2d(0.5); }
static ct_module *identity(void) { return ct_nn_identity(); }
static ct_module *softmax1(void) { return ct_nn_softmax(1); }
static ct_module *log_softmax_last(void) { return ct_nn_log_softmax(-1); }
static ct_module *leaky(void) { return ct_nn_leaky_relu(0.2); }
static ct_module *elu(void) { return ct_nn_elu(0.7); }
static ct_module *mish(void) { return ct_nn_mish(); }
static ct_module *hardswish(void) { return ct_nn_hardswish(); }
static ct_module *prelu1(void) { return ct_nn_prelu(1, 0.25); }
static ct_module *prelu3(void) { return ct_nn_prelu(3, -0.1); }
static ct_module *bag_mean(void) { return ct_nn_embedding_bag(10, 4, "mean"); }
static ct_module *bag_sum(void) { return ct_nn_embedding_bag(12, 3, "sum"); }
static ct_module *bag_max(void) { return ct_nn_embedding_bag(9, 5, "max"); }

/* Every kind with parameters, in one Sequential: the RNG sequence across
 * kinds must match, and ct_nn_forward goes through each. */
static ct_module *stack(void) {
    ct_conv_transpose_opts t = ct_conv_transpose_defaults();
    t.stride = 2;
    ct_upsample_opts u = ct_upsample_defaults();
    u.mode = "bilinear";
    u.scale_factor = 0.5;
    ct_module *seq = ct_nn_sequential(0, NULL);
    ct_nn_sequential_append(seq, ct_nn_conv_transpose2d(2, 4, 3, &t));
    ct_nn_sequential_append(seq, ct_nn_groupnorm(2, 4, NULL));
    ct_nn_sequential_append(seq, ct_nn_mish());
    ct_nn_sequential_append(seq, ct_nn_upsample(&u));
    ct_nn_sequential_append(seq, ct_nn_avg_pool2d(2, 1, 0));
    ct_nn_sequential_append(seq, ct_nn_hardswish());
    ct_nn_sequential_append(seq, ct_nn_adaptive_max_pool2d(2, 2));
    ct_nn_sequential_append(seq, ct_nn_dropout2d(0.25));
    ct_nn_sequential_append(seq, ct_nn_flatten(1, -1));
    ct_nn_sequential_append(seq, ct_nn_linear(16, 6, true));
    ct_nn_sequential_append(seq, ct_nn_leaky_relu(0.1));
    ct_nn_sequential_append(seq, ct_nn_prelu(1, 0.25));
    ct_nn_sequential_append(seq, ct_nn_elu(1.0));
    ct_nn_sequential_append(seq, ct_nn_identity());
    ct_nn_sequential_append(seq, ct_nn_log_softmax(1));
    return seq;
}

/* Parameters of every new kind, for the initialisation alone. */
static ct_module *mixed_init(void) {
    ct_norm_opts track = ct_norm_defaults();
    ct_module *seq = ct_nn_sequential(0, NULL);
    ct_nn_sequential_append(seq, ct_nn_conv3d(3, 4, 2, NULL));
    ct_nn_sequential_append(seq, ct_nn_embedding_bag(7, 3, "sum"));
    ct_nn_sequential_append(seq, ct_nn_conv_transpose1d(6, 2, 5, NULL));
    ct_nn_sequential_append(seq, ct_nn_instancenorm1d(5, &track));
    ct_nn_sequential_append(seq, ct_nn_prelu(4, 0.5));
    ct_nn_sequential_append(seq, ct_nn_layernorm_nd(2, (const int64_t[]){2, 3}, NULL));
    ct_nn_sequential_append(seq, ct_nn_conv_transpose2d(4, 4, 3, NULL));
    ct_nn_sequential_append(seq, ct_nn_groupnorm(1, 3, NULL));
    return seq;
}

#define RANDN(n, ...) "randn", n, {__VA_ARGS__}, 0
#define RANDINT(high, n, ...) "randint", n, {__VA_ARGS__}, high
#define BAG(high, len) "bag", 1, {len}, high

static const layer_case CASES[] = {
    {"conv3d", 1, conv3d, RANDN(5, 2, 2, 5, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"conv3d_groups_nobias", 2, conv3d_groups_nobias, RANDN(5, 1, 4, 6, 6, 6), CT_F32, 0, false, 0, {0}, false},
    {"conv3d_unbatched", 3, conv3d, RANDN(4, 2, 4, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"convt1d", 4, convt1d, RANDN(3, 2, 4, 7), CT_F32, 0, false, 0, {0}, false},
    {"convt1d_groups_nobias", 5, convt1d_groups_nobias, RANDN(3, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"convt1d_unbatched", 6, convt1d, RANDN(2, 4, 6), CT_F32, 0, false, 0, {0}, false},
    {"convt2d", 7, convt2d, RANDN(4, 2, 3, 5, 5), CT_F32, 0, false, 0, {0}, false},
    {"convt2d_groups", 8, convt2d_groups, RANDN(4, 2, 4, 4, 3), CT_F32, 0, false, 0, {0}, false},
    {"convt2d_f64", 9, convt2d_plain, RANDN(4, 2, 2, 4, 4), CT_F64, 0, false, 0, {0}, false},
    {"groupnorm", 10, groupnorm, RANDN(4, 3, 6, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"groupnorm_noaffine", 11, groupnorm_noaffine, RANDN(3, 4, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"groupnorm_2d_eval", 12, groupnorm, RANDN(2, 5, 6), CT_F32, 0, true, 0, {0}, false},
    {"instancenorm1d", 13, in1d, RANDN(3, 3, 4, 9), CT_F32, 0, false, 0, {0}, false},
    {"instancenorm1d_affine_unbatched", 14, in1d_affine, RANDN(2, 4, 9), CT_F32, 1, false, 0, {0}, false},
    {"instancenorm2d_track_train", 15, in2d_track, RANDN(4, 2, 3, 5, 5), CT_F32, 2, false, 0, {0}, false},
    {"instancenorm2d_track_eval", 16, in2d_track, RANDN(4, 2, 3, 5, 5), CT_F32, 2, true, 0, {0}, false},
    {"instancenorm2d_track_noaffine_unbatched", 17, in2d_track_noaffine, RANDN(3, 3, 4, 6), CT_F32, 1, false, 0, {0}, false},
    {"instancenorm2d_momentum_none", 18, in2d_momentum_none, RANDN(4, 2, 3, 4, 4), CT_F32, 2, false, 0, {0}, false},
    {"instancenorm1d_notrack_eval_f64", 19, in1d_affine, RANDN(3, 2, 4, 6), CT_F64, 1, true, 0, {0}, false},
    {"layernorm_2", 20, layernorm_2, RANDN(4, 3, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"layernorm_3_noaffine", 21, layernorm_3_noaffine, RANDN(4, 2, 3, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"avg_pool1d", 22, avg1d, RANDN(3, 2, 3, 10), CT_F32, 0, false, 0, {0}, false},
    {"avg_pool2d", 23, avg2d, RANDN(4, 2, 3, 7, 8), CT_F32, 0, false, 0, {0}, false},
    {"avg_pool2d_s1_unbatched", 24, avg2d_s1, RANDN(3, 3, 5, 4), CT_F32, 0, false, 0, {0}, false},
    {"adaptive_avg_pool1d", 25, aavg1d, RANDN(3, 2, 3, 10), CT_F32, 0, false, 0, {0}, false},
    {"adaptive_avg_pool2d", 26, aavg2d, RANDN(4, 2, 3, 7, 5), CT_F32, 0, false, 0, {0}, false},
    {"adaptive_max_pool2d", 27, amax2d, RANDN(4, 2, 3, 7, 8), CT_F32, 0, false, 0, {0}, false},
    {"upsample_nearest_scale", 28, up_nearest2, RANDN(4, 2, 3, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_nearest_1d_size", 29, up_nearest_1d, RANDN(3, 2, 3, 4), CT_F32, 0, false, 0, {0}, false},
    {"upsample_nearest_3d", 30, up_nearest_3d, RANDN(5, 1, 2, 3, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_linear_align", 31, up_linear_ac, RANDN(3, 2, 3, 4), CT_F32, 0, false, 0, {0}, false},
    {"upsample_linear_scale", 32, up_linear_scale, RANDN(3, 2, 3, 4), CT_F32, 0, false, 0, {0}, false},
    {"upsample_bilinear_scale", 33, up_bilinear, RANDN(4, 2, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_bilinear_align", 34, up_bilinear_ac, RANDN(4, 2, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_bicubic_f64", 35, up_bicubic, RANDN(4, 1, 2, 4, 5), CT_F64, 0, false, 0, {0}, false},
    {"upsample_bicubic_align", 36, up_bicubic_ac, RANDN(4, 1, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_trilinear", 37, up_trilinear, RANDN(5, 1, 2, 3, 3, 3), CT_F32, 0, false, 0, {0}, false},
    {"upsample_nearest_exact", 38, up_nearest_exact, RANDN(4, 2, 2, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"upsample_area", 39, up_area, RANDN(4, 2, 3, 8, 6), CT_F32, 0, false, 0, {0}, false},
    {"dropout1d_train", 40, drop1d, RANDN(3, 4, 8, 5), CT_F32, 1, false, 0, {0}, false},
    {"dropout1d_unbatched_train", 41, drop1d, RANDN(2, 16, 5), CT_F32, 1, false, 0, {0}, false},
    {"dropout1d_eval", 42, drop1d, RANDN(3, 4, 8, 5), CT_F32, 1, true, 0, {0}, false},
    {"dropout2d_train", 43, drop2d, RANDN(4, 3, 6, 4, 4), CT_F32, 1, false, 0, {0}, false},
    {"dropout2d_eval", 44, drop2d, RANDN(4, 3, 6, 4, 4), CT_F32, 0, true, 0, {0}, false},
    {"identity", 45, identity, RANDN(2, 3, 4), CT_F32, 0, false, 0, {0}, false},
    {"softmax", 46, softmax1, RANDN(3, 3, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"log_softmax", 47, log_softmax_last, RANDN(3, 3, 4, 5), CT_F32, 0, false, 0, {0}, false},
    {"leaky_relu", 48, leaky, RANDN(2, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"elu", 49, elu, RANDN(2, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"mish", 50, mish, RANDN(2, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"hardswish", 51, hardswish, RANDN(2, 6, 7), CT_F32, 0, false, 0, {0}, false},
    {"prelu", 52, prelu1, RANDN(3, 2, 3, 4), CT_F32, 0, false, 0, {0}, false},
    {"prelu_channels", 53, prelu3, RANDN(4, 2, 3, 4, 4), CT_F32, 0, false, 0, {0}, false},
    {"embedding_bag_2d", 54, bag_mean, RANDINT(10, 2, 3, 5), CT_F32, 0, false, 0, {0}, false},
    {"embedding_bag_sum_offsets_weights", 55, bag_sum, BAG(12, 8), CT_F32, 0, false, 4, {0, 3, 3, 6}, true},
    {"embedding_bag_mean_offsets", 56, bag_mean, BAG(10, 7), CT_F32, 0, false, 3, {0, 1, 4}, false},
    {"embedding_bag_max_offsets", 57, bag_max, BAG(9, 6), CT_F32, 0, false, 3, {0, 2, 5}, false},
    {"stack", 58, stack, RANDN(4, 3, 2, 5, 5), CT_F32, 1, false, 0, {0}, false},
    {"stack_eval", 59, stack, RANDN(4, 3, 2, 5, 5), CT_F32, 1, true, 0, {0}, false},
    {"mixed_init", 60, mixed_init, NULL, 0, {0}, 0, CT_F32, 0, false, 0, {0}, false},
};

/* The case's input (and, for "bag", offsets and per_sample_weights), drawn
 * in the order test_layers_more.py draws them. */
static ct_tensor *make_input(const layer_case *c, ct_tensor **offsets, ct_tensor **psw) {
    *offsets = *psw = NULL;
    if (strcmp(c->input, "randn") == 0)
        return ct_randn(c->ndim, c->shape, &(ct_topts){.dtype = c->dtype, .requires_grad = true});
    ct_tensor *x = ct_randint(0, c->high, c->ndim, c->shape, &(ct_topts){.dtype = CT_I64});
    if (strcmp(c->input, "bag") == 0) {
        *offsets = ct_from_data(c->offsets, 1, (int64_t[]){c->n_offsets}, CT_I64);
        if (c->psw) *psw = ct_randn(c->ndim, c->shape, &(ct_topts){.requires_grad = true});
    }
    return x;
}

/* m(x) or, for "bag", m(x, offsets, per_sample_weights=psw) through ct_nn_call. */
static ct_tensor *run(ct_module *m, const layer_case *c, ct_tensor *x, ct_tensor *offsets, ct_tensor *psw) {
    if (strcmp(c->input, "bag") != 0) return ct_nn_forward(m, x);
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value_list_append(args, ct_value_tensor(ct_alias(x)));
    ct_value_list_append(args, ct_value_tensor(ct_alias(offsets)));
    ct_value_dict_set(kwargs, "per_sample_weights", psw ? ct_value_tensor(ct_alias(psw)) : ct_value_none());
    ct_value *y = ct_nn_call(m, args, kwargs);
    ct_tensor *out = y ? ct_alias(ct_value_get_tensor(y)) : NULL;
    ct_value_free(y);
    ct_value_free(args);
    ct_value_free(kwargs);
    return out;
}

static json_t *layer_case_run(const layer_case *c) {
    ct_manual_seed(c->seed);
    ct_module *m = c->build();
    if (!m) {
        fprintf(stderr, "%s: %s\n", c->name, ct_last_error());
        return NULL;
    }
    json_t *out = json_object();
    json_object_set_new(out, "name", json_string(c->name));
    json_object_set_new(out, "type", json_string(ct_nn_type(m)));
    json_object_set_new(out, "init", nn_dump_state(m));
    if (!c->input) { /* initialisation only */
        ct_nn_free(m);
        return out;
    }
    if (c->dtype != CT_F32 && ct_nn_to_dtype(m, c->dtype) != 0) {
        fprintf(stderr, "%s: %s\n", c->name, ct_last_error());
        ct_nn_free(m);
        json_decref(out);
        return NULL;
    }
    ct_scope *s = ct_scope_begin();
    ct_tensor *offsets, *psw;
    ct_tensor *x = make_input(c, &offsets, &psw);
    for (int i = 0; i < c->pre; ++i) run(m, c, x, offsets, psw);
    if (c->eval) ct_nn_train(m, false);
    ct_tensor *y = run(m, c, x, offsets, psw);
    int64_t yshape[8];
    int yndim = y ? ct_shape(y, yshape, 8) : 0;
    ct_tensor *w = y ? ct_randn(yndim, yshape, &(ct_topts){.dtype = ct_dtype_of(y)}) : NULL;
    if (!y || !w || ct_backward(ct_sum(ct_mul(y, w))) != 0) {
        fprintf(stderr, "%s: %s\n", c->name, ct_last_error());
        json_decref(out);
        out = NULL;
    } else {
        json_object_set_new(out, "output", nn_dump_tensor("output", y));
        json_t *grads = json_array();
        for (size_t i = 0; i < ct_nn_num_params(m); ++i) {
            const char *name = NULL;
            ct_tensor *p = ct_nn_param_at(m, i, &name);
            json_array_append_new(grads, ct_has_grad(p) ? nn_dump_tensor(name, ct_grad(p)) : json_null());
        }
        json_object_set_new(out, "grads", grads);
        if (ct_has_grad(x)) json_object_set_new(out, "input_grad", nn_dump_tensor("input", ct_grad(x)));
        if (psw) json_object_set_new(out, "psw_grad", nn_dump_tensor("per_sample_weights", ct_grad(psw)));
        json_object_set_new(out, "state", nn_dump_state(m));
    }
    ct_scope_end(s);
    ct_nn_free(m);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
        return 2;
    }
    (void)nn_build_mlp; /* nn_util.h's reference models, not used here */
    (void)nn_build_cnn;
    json_t *cases = json_array();
    int failed = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; ++i) {
        json_t *r = layer_case_run(&CASES[i]);
        if (!r) {
            failed = 1;
            continue;
        }
        const layer_case *c = &CASES[i];
        json_object_set_new(r, "seed", json_integer((json_int_t)c->seed));
        if (c->input) {
            json_t *in = json_object(), *shape = json_array(), *offs = json_array();
            json_object_set_new(in, "kind", json_string(c->input));
            for (int d = 0; d < c->ndim; ++d) json_array_append_new(shape, json_integer(c->shape[d]));
            json_object_set_new(in, "shape", shape);
            json_object_set_new(in, "high", json_integer(c->high));
            json_object_set_new(in, "dtype", json_string(ct_dtype_name(c->dtype)));
            for (int k = 0; k < c->n_offsets; ++k) json_array_append_new(offs, json_integer(c->offsets[k]));
            json_object_set_new(in, "offsets", offs);
            json_object_set_new(in, "psw", json_boolean(c->psw));
            json_object_set_new(r, "input", in);
            json_object_set_new(r, "pre", json_integer(c->pre));
            json_object_set_new(r, "eval", json_boolean(c->eval));
        }
        json_array_append_new(cases, r);
    }
    json_t *root = json_object();
    json_object_set_new(root, "cases", cases);
    if (nn_write_json(argv[1], root) != 0) return 1;
    return failed;
}
