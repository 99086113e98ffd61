/* tests/nn/layers_more_errors.c — the single-call layers after MaxPool2d in
 * nn.h, from C: what the parity script can't see.
 *
 *   - bad arguments at construction are CT_EINVAL with a message naming the
 *     constructor (negative sizes, num_channels not divisible by num_groups,
 *     output_padding >= stride and dilation, an unknown upsample mode,
 *     align_corners with nearest, size and scale_factor both or neither,
 *     a dropout probability outside [0, 1], an unknown EmbeddingBag mode);
 *   - errors of forward name the layer by its repr (wrong ranks, an
 *     unbatched input of the wrong size, one spatial element in training,
 *     EmbeddingBag's argument rules);
 *   - EmbeddingBag through ct_nn_call: positional and keyword arguments,
 *     None, the 2-D input through ct_nn_forward equal to the same call,
 *     inside a Sequential that passes the arguments on;
 *   - type names, Identity's new handle, InstanceNorm's defaults (no
 *     parameters, no buffers) and its running statistics with
 *     track_running_stats (num_batches_tracked is never counted). */
#include <stdlib.h>

#include "ct_test.h"

/* The construction failed with CT_EINVAL, naming `fn`, with `needle`. */
#define CHECK_CTOR(expr, fn, needle)                                                  \
    do {                                                                              \
        ct_module *m_ = (expr);                                                       \
        CHECK(m_ == NULL);                                                            \
        CHECK(strstr(ct_last_error(), fn) != NULL);                                   \
        CHECK_ERR(CT_EINVAL, needle);                                                 \
        ct_nn_free(m_);                                                               \
    } while (0)


static void test_construction_errors(void) {
    ct_conv_opts c = ct_conv_defaults();
    CHECK_CTOR(ct_nn_conv3d(-1, 3, 3, NULL), "ct_nn_conv3d", "in_channels must be >= 0, got -1");
    CHECK_CTOR(ct_nn_conv3d(2, 3, 0, NULL), "ct_nn_conv3d", "kernel_size must be > 0");
    c.groups = 2;
    CHECK_CTOR(ct_nn_conv3d(3, 4, 3, &c), "ct_nn_conv3d", "in_channels must be divisible by groups");

    ct_conv_transpose_opts t = ct_conv_transpose_defaults();
    CHECK(t.stride == 1 && t.padding == 0 && t.output_padding == 0 && t.groups == 1 && t.dilation == 1 && t.bias);
    CHECK_CTOR(ct_nn_conv_transpose1d(4, -6, 3, NULL), "ct_nn_conv_transpose1d", "out_channels must be >= 0");
    t.stride = 2;
    t.output_padding = 2;
    CHECK_CTOR(ct_nn_conv_transpose2d(4, 6, 3, &t), "ct_nn_conv_transpose2d",
               "output padding must be smaller than either stride or dilation");
    t.output_padding = -1;
    CHECK_CTOR(ct_nn_conv_transpose2d(4, 6, 3, &t), "ct_nn_conv_transpose2d", "output_padding must be >= 0");
    t = ct_conv_transpose_defaults();
    t.groups = 4;
    CHECK_CTOR(ct_nn_conv_transpose1d(4, 6, 3, &t), "ct_nn_conv_transpose1d",
               "out_channels must be divisible by groups");

    CHECK_CTOR(ct_nn_groupnorm(4, 6, NULL), "ct_nn_groupnorm", "num_channels (6) must be divisible by num_groups (4)");
    CHECK_CTOR(ct_nn_groupnorm(0, 6, NULL), "ct_nn_groupnorm", "num_groups must be > 0");
    CHECK_CTOR(ct_nn_groupnorm(2, -4, NULL), "ct_nn_groupnorm", "num_channels must be >= 0");
    CHECK_CTOR(ct_nn_instancenorm1d(-2, NULL), "ct_nn_instancenorm1d", "num_features must be >= 0");
    CHECK_CTOR(ct_nn_instancenorm2d(-1, NULL), "ct_nn_instancenorm2d", "num_features must be >= 0");
    CHECK_CTOR(ct_nn_layernorm_nd(0, (const int64_t[]){3}, NULL), "ct_nn_layernorm_nd", "at least 1-dimensional");
    CHECK_CTOR(ct_nn_layernorm_nd(2, NULL, NULL), "ct_nn_layernorm_nd", "'normalized_shape' is NULL");
    CHECK_CTOR(ct_nn_layernorm_nd(2, (const int64_t[]){3, -4}, NULL), "ct_nn_layernorm_nd",
               "normalized_shape must be >= 0, got -4");

    CHECK_CTOR(ct_nn_avg_pool1d(0, 0, 0), "ct_nn_avg_pool1d", "kernel_size must be > 0");
    CHECK_CTOR(ct_nn_avg_pool1d(3, -1, 0), "ct_nn_avg_pool1d", "stride must be >= 0");
    CHECK_CTOR(ct_nn_avg_pool2d(3, 1, 2), "ct_nn_avg_pool2d", "pad should be at most half of effective kernel size");
    CHECK_CTOR(ct_nn_adaptive_avg_pool1d(-1), "ct_nn_adaptive_avg_pool1d", "output_size must be >= 0");
    CHECK_CTOR(ct_nn_adaptive_avg_pool2d(2, -3), "ct_nn_adaptive_avg_pool2d", "output_size must be >= 0");
    CHECK_CTOR(ct_nn_adaptive_max_pool2d(-2, 3), "ct_nn_adaptive_max_pool2d", "output_size must be >= 0");

    ct_upsample_opts u = ct_upsample_defaults();
    CHECK(u.ndims == 0 && u.scale_factor == 0 && strcmp(u.mode, "nearest") == 0 && !u.align_corners);
    CHECK_CTOR(ct_nn_upsample(NULL), "ct_nn_upsample", "either size or scale_factor should be defined");
    u.scale_factor = 2;
    u.mode = "cubic";
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "unknown mode 'cubic'");
    u.mode = "nearest";
    u.align_corners = true;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample",
               "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
               "trilinear");
    u.align_corners = false;
    u.ndims = 2;
    u.size[0] = u.size[1] = 4;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "only one of size or scale_factor should be defined");
    u.scale_factor = 0;
    u.size[1] = -4;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "size must be >= 0, got -4");
    u.ndims = 4;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "ndims must be 0 (scale_factor) or 1 to 3 (size), got 4");
    u = ct_upsample_defaults();
    u.scale_factor = -2;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "scale_factor must be a positive finite number");
    u.scale_factor = NAN;
    CHECK_CTOR(ct_nn_upsample(&u), "ct_nn_upsample", "scale_factor must be a positive finite number");

    CHECK_CTOR(ct_nn_dropout1d(1.5), "ct_nn_dropout1d", "dropout probability has to be between 0 and 1, but got 1.5");
    CHECK_CTOR(ct_nn_dropout2d(-0.1), "ct_nn_dropout2d", "dropout probability has to be between 0 and 1");
    CHECK_CTOR(ct_nn_dropout2d(NAN), "ct_nn_dropout2d", "dropout probability has to be between 0 and 1");
    CHECK_CTOR(ct_nn_prelu(-1, 0.25), "ct_nn_prelu", "num_parameters must be >= 0, got -1");
    CHECK_CTOR(ct_nn_embedding_bag(10, 3, "median"), "ct_nn_embedding_bag",
               "mode has to be one of sum, mean or max (got 'median')");
    CHECK_CTOR(ct_nn_embedding_bag(-10, 3, "sum"), "ct_nn_embedding_bag", "num_embeddings must be >= 0");
    CHECK_CTOR(ct_nn_embedding_bag(10, -3, "sum"), "ct_nn_embedding_bag", "embedding_dim must be >= 0");

    /* A failed constructor inside a Sequential keeps its message. */
    ct_module *seq = ct_nn_sequential(2, (ct_module *[]){ct_nn_relu(), ct_nn_groupnorm(4, 6, NULL)});
    CHECK(seq == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_groupnorm: num_channels (6) must be divisible by num_groups (4)");
}

/* ct_nn_forward(m, x) fails with `code`, the message holding `repr` and `needle`. */
static void check_forward_error(ct_module *m, int ndim, const int64_t *shape, int code, const char *repr,
                                const char *needle) {
    ct_tensor *x = ct_randn(ndim, shape, NULL);
    ct_tensor *y = ct_nn_forward(m, x);
    CHECK(y == NULL);
    CHECK(strstr(ct_last_error(), repr) != NULL);
    CHECK_ERR(code, needle);
    ct_tensor_free(x);
}

static void test_forward_errors(void) {
    ct_scope *s = ct_scope_begin();
    ct_module *gn = ct_nn_groupnorm(2, 6, NULL);
    check_forward_error(gn, 1, (int64_t[]){6}, CT_ESHAPE, "GroupNorm(2, 6, eps=1e-05, affine=True)",
                        "Expected at least 2 dimensions for input tensor but received 1");
    ct_module *gn6 = ct_nn_groupnorm(6, 6, NULL);
    check_forward_error(gn6, 3, (int64_t[]){1, 6, 1}, CT_ESHAPE, "GroupNorm(6, 6",
                        "Expected more than 1 value per channel when training, got input size [1, 6, 1]");

    ct_module *in1 = ct_nn_instancenorm1d(4, NULL);
    check_forward_error(in1, 4, (int64_t[]){2, 4, 3, 3}, CT_ESHAPE,
                        "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)",
                        "expected 2D or 3D input (got 4D input)");
    check_forward_error(in1, 3, (int64_t[]){2, 4, 1}, CT_ESHAPE, "InstanceNorm1d",
                        "Expected more than 1 spatial element when training, got input size torch.Size([2, 4, 1])");
    ct_norm_opts affine = ct_norm_defaults();
    affine.track_running_stats = false;
    ct_module *in2 = ct_nn_instancenorm2d(3, &affine);
    check_forward_error(in2, 3, (int64_t[]){5, 4, 4}, CT_ESHAPE, "InstanceNorm2d",
                        "expected input's size at dim=0 to match num_features (3), but got: 5.");
    check_forward_error(in2, 2, (int64_t[]){3, 4}, CT_ESHAPE, "InstanceNorm2d", "expected 3D or 4D input (got 2D input)");

    ct_upsample_opts uo = ct_upsample_defaults();
    uo.mode = "bilinear";
    uo.scale_factor = 2;
    ct_module *up = ct_nn_upsample(&uo);
    check_forward_error(up, 3, (int64_t[]){1, 2, 4}, CT_ESHAPE, "Upsample(scale_factor=2.0, mode='bilinear')",
                        "Got 3D input, but bilinear mode needs 4D input");
    check_forward_error(up, 2, (int64_t[]){2, 4}, CT_ESHAPE, "Upsample",
                        "Input Error: Only 3D, 4D and 5D input Tensors supported (got 2D)");
    uo = ct_upsample_defaults();
    uo.ndims = 2;
    uo.size[0] = 3;
    uo.size[1] = 5;
    ct_module *up_size = ct_nn_upsample(&uo);
    check_forward_error(up_size, 3, (int64_t[]){1, 2, 4}, CT_ESHAPE, "Upsample(size=(3, 5), mode='nearest')",
                        "Input and output must have the same number of spatial dimensions, but got input with "
                        "spatial dimensions of [4] and output size of (3, 5)");

    ct_module *d1 = ct_nn_dropout1d(0.5);
    check_forward_error(d1, 4, (int64_t[]){1, 2, 3, 4}, CT_ESHAPE, "Dropout1d(p=0.5)",
                        "dropout1d: Expected 2D or 3D input, but received a 4D input");

    ct_conv_transpose_opts to = ct_conv_transpose_defaults();
    to.output_padding = 1;
    to.stride = 2;
    ct_module *ct2 = ct_nn_conv_transpose2d(3, 4, 3, &to);
    check_forward_error(ct2, 4, (int64_t[]){1, 5, 4, 4}, CT_ESHAPE,
                        "ConvTranspose2d(3, 4, kernel_size=3, stride=2, padding=0, output_padding=1)",
                        "expected input");

    ct_module *sm = ct_nn_softmax(3);
    check_forward_error(sm, 2, (int64_t[]){2, 4}, CT_EINDEX, "Softmax(dim=3)", "Dimension out of range");
    ct_module *pr = ct_nn_prelu(3, 0.25);
    check_forward_error(pr, 2, (int64_t[]){2, 4}, CT_ESHAPE, "PReLU(num_parameters=3)", "Mismatch of parameter numbers");
    ct_module *ln = ct_nn_layernorm_nd(2, (const int64_t[]){4, 5}, NULL);
    check_forward_error(ln, 3, (int64_t[]){2, 5, 4}, CT_ESHAPE, "LayerNorm((4, 5), eps=1e-05, elementwise_affine=True)",
                        "normalized_shape=[4, 5]");

    ct_module *all[] = {gn, gn6, in1, in2, up, up_size, d1, ct2, sm, pr, ln};
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i) ct_nn_free(all[i]);
    ct_scope_end(s);
}

/* ct_nn_call(m, args, kwargs) with the given tensors (NULL: left out). */
static ct_value *bag_call(ct_module *m, const ct_tensor *input, const ct_tensor *offsets, const char *offsets_key,
                          const ct_tensor *psw, bool psw_none) {
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    if (input) ct_value_list_append(args, ct_value_tensor(ct_alias(input)));
    if (offsets && !offsets_key) ct_value_list_append(args, ct_value_tensor(ct_alias(offsets)));
    if (offsets && offsets_key) ct_value_dict_set(kwargs, offsets_key, ct_value_tensor(ct_alias(offsets)));
    if (psw) ct_value_dict_set(kwargs, "per_sample_weights", ct_value_tensor(ct_alias(psw)));
    else if (psw_none) ct_value_dict_set(kwargs, "per_sample_weights", ct_value_none());
    ct_value *y = ct_nn_call(m, args, kwargs);
    ct_value_free(args);
    ct_value_free(kwargs);
    return y;
}

static void test_embedding_bag(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(7);
    ct_module *bag = ct_nn_embedding_bag(10, 3, NULL); /* NULL: mode "mean" */
    CHECK(bag && strcmp(ct_nn_type(bag), "EmbeddingBag") == 0);
    size_t np = 0;
    CHECK(ct_nn_parameters(bag, &np) && np == 1);
    const char *pname = NULL;
    ct_nn_param_at(bag, 0, &pname);
    CHECK(pname && strcmp(pname, "weight") == 0);

    const int64_t idx2[6] = {1, 2, 3, 4, 5, 6};
    ct_tensor *x2 = ct_from_data(idx2, 2, (int64_t[]){2, 3}, CT_I64);
    ct_tensor *x1 = ct_reshape(x2, 1, (int64_t[]){6});
    ct_tensor *offsets = ct_from_data((int64_t[]){0, 3}, 1, (int64_t[]){2}, CT_I64);

    /* ct_nn_forward on a 2-D input == ct_nn_call(input) == ct_nn_call(1-D, offsets) */
    ct_tensor *y_fwd = ct_nn_forward(bag, x2);
    CHECK(y_fwd && ct_size(y_fwd, 0) == 2 && ct_size(y_fwd, 1) == 3);
    ct_value *v = bag_call(bag, x2, NULL, NULL, NULL, true);
    CHECK(v && ct_test_same(ct_value_get_tensor(v), y_fwd));
    ct_value_free(v);
    v = bag_call(bag, x1, offsets, NULL, NULL, false);
    CHECK(v && ct_test_same(ct_value_get_tensor(v), y_fwd));
    ct_value_free(v);
    v = bag_call(bag, x1, offsets, "offsets", NULL, false); /* offsets as a keyword */
    CHECK(v && ct_test_same(ct_value_get_tensor(v), y_fwd));
    ct_value_free(v);
    /* the input as a keyword */
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value_dict_set(kwargs, "input", ct_value_tensor(ct_alias(x2)));
    v = ct_nn_call(bag, args, kwargs);
    CHECK(v && ct_test_same(ct_value_get_tensor(v), y_fwd));
    ct_value_free(v);

    /* inside a Sequential: the first child gets args and kwargs */
    ct_manual_seed(7); /* the same weight as bag's */
    ct_module *inner = ct_nn_embedding_bag(10, 3, "mean");
    ct_module *seq = ct_nn_sequential(2, (ct_module *[]){inner, ct_nn_identity()});
    CHECK(ct_test_same(ct_nn_get(seq, "0.weight"), ct_nn_get(bag, "weight")));
    v = bag_call(seq, x1, offsets, NULL, NULL, false);
    CHECK(v && ct_test_same(ct_value_get_tensor(v), y_fwd));
    ct_value_free(v);
    ct_tensor *y_seq = ct_nn_forward(seq, x2);
    CHECK(ct_test_same(y_seq, y_fwd));

    /* argument errors, named after the layer */
    CHECK(ct_nn_forward(bag, x1) == NULL);
    CHECK(strstr(ct_last_error(), "EmbeddingBag(10, 3, mode='mean')") != NULL);
    CHECK_ERR(CT_EINVAL, "offsets has to be a 1D Tensor but got None");
    CHECK(bag_call(bag, x2, offsets, NULL, NULL, false) == NULL);
    CHECK_ERR(CT_EINVAL, "if input is 2D, then offsets has to be None");
    CHECK(bag_call(bag, x1, offsets, "offset", NULL, false) == NULL);
    CHECK(strstr(ct_last_error(), "EmbeddingBag(10, 3, mode='mean')") != NULL);
    CHECK_ERR(CT_EINVAL, "EmbeddingBag.forward() got an unexpected keyword argument 'offset'");
    ct_value *bagged = bag_call(bag, x1, offsets, NULL, NULL, false);
    CHECK(bagged != NULL);
    ct_value_free(bagged); /* values belong to no scope */
    ct_value_list_append(args, ct_value_tensor(ct_alias(x1)));
    ct_value_dict_set(kwargs, "input", ct_value_tensor(ct_alias(x1)));
    CHECK(ct_nn_call(bag, args, kwargs) == NULL);
    CHECK_ERR(CT_EINVAL, "got multiple values for argument 'input'");
    ct_value_free(args);
    ct_value_free(kwargs);
    args = ct_value_tuple();
    for (int i = 0; i < 4; ++i) ct_value_list_append(args, ct_value_tensor(ct_alias(x1)));
    CHECK(ct_nn_call(bag, args, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "forward() takes from 2 to 4 positional arguments but 5 were given");
    ct_value_free(args);
    CHECK(ct_nn_call(bag, NULL, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "forward() missing 1 required positional argument: 'input'");
    args = ct_value_tuple();
    ct_value_list_append(args, ct_value_tensor(ct_alias(x1)));
    ct_value_list_append(args, ct_value_int(0));
    CHECK(ct_nn_call(bag, args, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "argument 'offsets' must be a tensor or None, not a int");
    ct_value_free(args);
    ct_tensor *psw = ct_ones(1, (int64_t[]){6}, NULL);
    CHECK(bag_call(bag, x1, offsets, NULL, psw, false) == NULL);
    CHECK_ERR(CT_ENOTSUP, "per_sample_weights is only supported for mode='sum' (got mode='mean')");
    ct_module *bag_sum = ct_nn_embedding_bag(10, 3, "sum");
    ct_tensor *psw_bad = ct_ones(1, (int64_t[]){5}, NULL);
    CHECK(bag_call(bag_sum, x1, offsets, NULL, psw_bad, false) == NULL);
    CHECK_ERR(CT_ESHAPE, "embedding_bag: If per_sample_weights (torch.Size([5])) is not None, then it must have the "
                         "same shape as the input (torch.Size([6]))");
    /* ones as weights: the plain sum */
    v = bag_call(bag_sum, x1, offsets, "offsets", psw, false);
    ct_value *v2 = bag_call(bag_sum, x1, offsets, NULL, NULL, true);
    CHECK(v && v2 && ct_test_same(ct_value_get_tensor(v), ct_value_get_tensor(v2)));
    ct_value_free(v);
    ct_value_free(v2);
    ct_tensor *x3 = ct_reshape(x2, 3, (int64_t[]){1, 2, 3});
    CHECK(ct_nn_forward(bag, x3) == NULL);
    CHECK_ERR(CT_ESHAPE, "input has to be 1D or 2D Tensor, but got Tensor of dimension 3");

    ct_nn_free(bag);
    ct_nn_free(bag_sum);
    ct_nn_free(seq);
    ct_scope_end(s);
}

static void test_misc(void) {
    ct_scope *s = ct_scope_begin();
    /* type names */
    struct {
        ct_module *m;
        const char *type;
    } types[] = {
        {ct_nn_conv3d(1, 1, 1, NULL), "Conv3d"},
        {ct_nn_conv_transpose1d(1, 1, 1, NULL), "ConvTranspose1d"},
        {ct_nn_conv_transpose2d(1, 1, 1, NULL), "ConvTranspose2d"},
        {ct_nn_groupnorm(1, 2, NULL), "GroupNorm"},
        {ct_nn_instancenorm1d(2, NULL), "InstanceNorm1d"},
        {ct_nn_instancenorm2d(2, NULL), "InstanceNorm2d"},
        {ct_nn_layernorm_nd(1, (const int64_t[]){3}, NULL), "LayerNorm"},
        {ct_nn_avg_pool1d(2, 0, 0), "AvgPool1d"},
        {ct_nn_avg_pool2d(2, 0, 0), "AvgPool2d"},
        {ct_nn_adaptive_avg_pool1d(2), "AdaptiveAvgPool1d"},
        {ct_nn_adaptive_avg_pool2d(2, 2), "AdaptiveAvgPool2d"},
        {ct_nn_adaptive_max_pool2d(2, 2), "AdaptiveMaxPool2d"},
        {ct_nn_upsample(&(ct_upsample_opts){.scale_factor = 2}), "Upsample"},
        {ct_nn_dropout1d(0.5), "Dropout1d"},
        {ct_nn_dropout2d(0.5), "Dropout2d"},
        {ct_nn_identity(), "Identity"},
        {ct_nn_softmax(1), "Softmax"},
        {ct_nn_log_softmax(1), "LogSoftmax"},
        {ct_nn_leaky_relu(0.01), "LeakyReLU"},
        {ct_nn_elu(1.0), "ELU"},
        {ct_nn_mish(), "Mish"},
        {ct_nn_hardswish(), "Hardswish"},
        {ct_nn_prelu(1, 0.25), "PReLU"},
        {ct_nn_embedding_bag(3, 2, "max"), "EmbeddingBag"},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; ++i) {
        CHECK(types[i].m != NULL);
        CHECK(strcmp(ct_nn_type(types[i].m), types[i].type) == 0);
        ct_nn_free(types[i].m);
    }

    /* Upsample with a NULL mode (a zeroed struct) is "nearest" */
    ct_module *up = ct_nn_upsample(&(ct_upsample_opts){.scale_factor = 2});
    ct_tensor *x = ct_randn(4, (int64_t[]){1, 1, 2, 2}, NULL);
    ct_tensor *y = ct_nn_forward(up, x);
    CHECK(y && ct_size(y, 2) == 4 && ct_size(y, 3) == 4);
    ct_nn_free(up);

    /* Identity: a new handle to the same values */
    ct_module *id = ct_nn_identity();
    ct_tensor *yi = ct_nn_forward(id, x);
    CHECK(yi && yi != x && ct_test_same(yi, x));
    ct_nn_free(id);

    /* InstanceNorm with opts NULL: no parameters, no buffers */
    ct_module *in = ct_nn_instancenorm2d(3, NULL);
    CHECK(ct_nn_num_params(in) == 0 && ct_nn_state_size(in) == 0);
    ct_nn_free(in);
    /* with track_running_stats: running stats move, num_batches_tracked stays 0 */
    ct_norm_opts o = ct_norm_defaults();
    in = ct_nn_instancenorm1d(2, &o);
    CHECK(ct_nn_state_size(in) == 5);
    const char *names[5] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    for (size_t i = 0; i < 5; ++i) {
        const char *n = NULL;
        ct_nn_state_at(in, i, &n);
        CHECK(n && strcmp(n, names[i]) == 0);
    }
    ct_tensor *xi = ct_add_scalar(ct_randn(3, (int64_t[]){4, 2, 5}, NULL), 3.0);
    CHECK(ct_nn_forward(in, xi) != NULL);
    double mean0 = 0;
    int64_t nbt = -1;
    CHECK_OK(ct_item(ct_select(ct_nn_get(in, "running_mean"), 0, 0), &mean0));
    CHECK_OK(ct_item_int(ct_nn_get(in, "num_batches_tracked"), &nbt));
    CHECK(mean0 > 0.1 && nbt == 0);
    /* to(float64) keeps num_batches_tracked int64 */
    CHECK_OK(ct_nn_to_dtype(in, CT_F64));
    CHECK(ct_dtype_of(ct_nn_get(in, "running_var")) == CT_F64);
    CHECK(ct_dtype_of(ct_nn_get(in, "num_batches_tracked")) == CT_I64);
    ct_nn_free(in);

    /* PReLU's weight: constant init, no draw */
    ct_manual_seed(3);
    ct_tensor *r1 = ct_randn(1, (int64_t[]){4}, NULL);
    ct_manual_seed(3);
    ct_module *pr = ct_nn_prelu(2, -0.5);
    ct_tensor *r2 = ct_randn(1, (int64_t[]){4}, NULL);
    CHECK(ct_test_same(r1, r2));
    double w0 = 0;
    CHECK_OK(ct_item(ct_select(ct_nn_get(pr, "weight"), 0, 1), &w0));
    CHECK(w0 == -0.5);
    ct_nn_free(pr);
    ct_scope_end(s);
}

int main(void) {
    test_construction_errors();
    test_forward_errors();
    test_embedding_bag();
    test_misc();
    return ct_test_result("nn_layers_more_errors");
}
