/* nn_init_dump OUT.json — builds every built-in layer (and the reference MLP
 * and CNN) from a fixed seed and writes their state dicts. test_init_parity.py
 * builds the same in torch and requires bit-identical values, names and
 * order. Keep the cases in step with CASES in that script. */
#include <string.h>

#include "nn_util.h"

static ct_module *conv1d_strided(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.stride = 2;
    o.padding = 1;
    return ct_nn_conv1d(4, 6, 3, &o);
}

static ct_module *conv1d_groups_nobias(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.groups = 2;
    o.bias = false;
    return ct_nn_conv1d(4, 6, 5, &o);
}

static ct_module *conv2d_plain(void) { return ct_nn_conv2d(3, 8, 5, NULL); }

static ct_module *conv2d_groups(void) {
    ct_conv_opts o = ct_conv_defaults();
    o.groups = 4;
    o.dilation = 2;
    o.padding = 2;
    return ct_nn_conv2d(4, 8, 3, &o);
}

static ct_module *linear(void) { return ct_nn_linear(20, 30, true); }
static ct_module *linear_nobias(void) { return ct_nn_linear(7, 5, false); }
static ct_module *linear_large(void) { return ct_nn_linear(784, 128, true); }
static ct_module *bn1d(void) { return ct_nn_batchnorm1d(10, NULL); }

static ct_module *bn2d_noaffine(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.affine = false;
    return ct_nn_batchnorm2d(8, &o);
}

static ct_module *bn2d_notrack(void) {
    ct_norm_opts o = ct_norm_defaults();
    o.track_running_stats = false;
    return ct_nn_batchnorm2d(8, &o);
}

static ct_module *layernorm(void) { return ct_nn_layernorm(16, NULL); }
static ct_module *embedding_pad(void) { return ct_nn_embedding(50, 8, 3); }
static ct_module *embedding(void) { return ct_nn_embedding(10, 4, -1); }
static ct_module *mlp(void) { return nn_build_mlp(0.5); }

/* Every kind in one Sequential: the RNG sequence across kinds must match. */
static ct_module *mixed(void) {
    ct_module *seq = ct_nn_sequential(0, NULL);
    ct_nn_sequential_append(seq, ct_nn_embedding(30, 6, 0));
    ct_nn_sequential_append(seq, ct_nn_layernorm(6, NULL));
    ct_nn_sequential_append(seq, ct_nn_linear(6, 12, true));
    ct_nn_sequential_append(seq, ct_nn_gelu());
    ct_nn_sequential_append(seq, ct_nn_conv1d(12, 4, 3, NULL));
    ct_nn_sequential_append(seq, ct_nn_silu());
    ct_nn_sequential_append(seq, ct_nn_batchnorm1d(4, NULL));
    ct_nn_sequential_append(seq, ct_nn_tanh());
    ct_nn_sequential_append(seq, ct_nn_dropout(0.1));
    ct_nn_sequential_append(seq, ct_nn_conv2d(2, 3, 2, NULL));
    ct_nn_sequential_append(seq, ct_nn_sigmoid());
    ct_nn_sequential_append(seq, ct_nn_max_pool2d(2, 0, 0));
    ct_nn_sequential_append(seq, ct_nn_flatten(1, -1));
    ct_nn_sequential_append(seq, ct_nn_linear(3, 1, false));
    return seq;
}

static const struct {
    const char *name;
    uint64_t seed;
    ct_module *(*build)(void);
} CASES[] = {
    {"linear", 0, linear},
    {"linear_nobias", 1, linear_nobias},
    {"linear_large", 2, linear_large},
    {"conv1d", 3, conv1d_strided},
    {"conv1d_groups_nobias", 4, conv1d_groups_nobias},
    {"conv2d", 5, conv2d_plain},
    {"conv2d_groups", 6, conv2d_groups},
    {"bn1d", 7, bn1d},
    {"bn2d_noaffine", 8, bn2d_noaffine},
    {"bn2d_notrack", 9, bn2d_notrack},
    {"layernorm", 10, layernorm},
    {"embedding_pad", 11, embedding_pad},
    {"embedding", 12, embedding},
    {"mlp", 13, mlp},
    {"cnn", 14, nn_build_cnn},
    {"mixed", 15, mixed},
    {"big_seed", 123456789012ULL, linear},
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
        return 2;
    }
    json_t *cases = json_array();
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; ++i) {
        ct_manual_seed(CASES[i].seed);
        ct_module *m = CASES[i].build();
        if (!m) {
            fprintf(stderr, "%s: %s\n", CASES[i].name, ct_last_error());
            json_decref(cases);
            return 1;
        }
        json_t *c = json_object();
        json_object_set_new(c, "name", json_string(CASES[i].name));
        json_object_set_new(c, "type", json_string(ct_nn_type(m)));
        json_object_set_new(c, "state", nn_dump_state(m));
        json_t *params = json_array();
        for (size_t j = 0; j < ct_nn_num_params(m); ++j) {
            const char *name = NULL;
            ct_nn_param_at(m, j, &name);
            json_array_append_new(params, json_string(name));
        }
        json_object_set_new(c, "parameters", params);
        json_object_set_new(c, "num_param_elements", json_integer(ct_nn_num_param_elements(m)));
        json_array_append_new(cases, c);
        ct_nn_free(m);
    }
    json_t *root = json_object();
    json_object_set_new(root, "cases", cases);
    return nn_write_json(argv[1], root) == 0 ? 0 : 1;
}
