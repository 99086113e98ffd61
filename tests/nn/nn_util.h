/* tests/nn/nn_util.h — what the nn test programs share: dumping tensors and
 * state dicts to JSON for the Python parity scripts, and the two reference
 * models (the MLP and the small CNN) that the scripts rebuild in torch.
 *
 * Layers are built one statement at a time on purpose: the order of
 * construction is the order of RNG draws, and C leaves the evaluation order
 * of an initializer list unspecified. */
#ifndef NN_UTIL_H
#define NN_UTIL_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include <ctrial/ctrial.h>

/* {"name", "dtype", "shape": [...], "values": [...]} — float values go through
 * double, which is exact for float32 and keeps every bit. */
static json_t *nn_dump_tensor(const char *name, const ct_tensor *t) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    int64_t shape[16];
    int nd = ct_shape(t, shape, 16);
    json_t *js = json_array();
    for (int i = 0; i < nd; ++i) json_array_append_new(js, json_integer(shape[i]));
    json_object_set_new(o, "shape", js);
    ct_dtype dt = ct_dtype_of(t);
    json_object_set_new(o, "dtype", json_string(ct_dtype_name(dt)));
    int64_t n = ct_numel(t);
    json_t *vals = json_array();
    if (ct_dtype_is_floating(dt)) {
        ct_tensor *d = ct_to_dtype(t, CT_F64);
        double *buf = malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (d && buf && ct_read(d, buf, sizeof(double) * (size_t)n) == 0)
            for (int64_t i = 0; i < n; ++i) json_array_append_new(vals, json_real(buf[i]));
        else
            fprintf(stderr, "nn_dump_tensor(%s): %s\n", name, ct_last_error());
        free(buf);
        ct_tensor_free(d);
    } else {
        ct_tensor *d = ct_to_dtype(t, CT_I64);
        int64_t *buf = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (d && buf && ct_read(d, buf, sizeof(int64_t) * (size_t)n) == 0)
            for (int64_t i = 0; i < n; ++i) json_array_append_new(vals, json_integer(buf[i]));
        else
            fprintf(stderr, "nn_dump_tensor(%s): %s\n", name, ct_last_error());
        free(buf);
        ct_tensor_free(d);
    }
    json_object_set_new(o, "values", vals);
    return o;
}

/* The state dict in order, as a list of nn_dump_tensor objects. */
static json_t *nn_dump_state(const ct_module *m) {
    json_t *arr = json_array();
    size_t n = ct_nn_state_size(m);
    for (size_t i = 0; i < n; ++i) {
        const char *name = NULL;
        ct_tensor *t = ct_nn_state_at(m, i, &name);
        json_array_append_new(arr, nn_dump_tensor(name, t));
    }
    return arr;
}

static int nn_write_json(const char *path, json_t *root) {
    int rc = json_dump_file(root, path, JSON_COMPACT);
    if (rc != 0) fprintf(stderr, "cannot write %s\n", path);
    json_decref(root);
    return rc;
}

/* nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Dropout(p), nn.Linear(128, 10)) */
static ct_module *nn_build_mlp(double p) {
    ct_module *l1 = ct_nn_linear(784, 128, true);
    ct_module *act = ct_nn_relu();
    ct_module *drop = ct_nn_dropout(p);
    ct_module *l2 = ct_nn_linear(128, 10, true);
    ct_module *layers[4] = {l1, act, drop, l2};
    return ct_nn_sequential(4, layers);
}

/* class Net(nn.Module): conv1 = Conv2d(1, 8, 3); bn1 = BatchNorm2d(8);
 * conv2 = Conv2d(8, 16, 3); fc = Linear(16 * 11 * 11, 10)
 * forward: fc(flatten(relu(conv2(max_pool2d(relu(bn1(conv1(x))), 2))), 1)) */
typedef struct {
    ct_module *conv1, *bn1, *conv2, *fc;
} nn_cnn;

static ct_tensor *nn_cnn_forward(ct_module *self, const ct_tensor *x) {
    nn_cnn *n = ct_nn_user(self);
    ct_tensor *h = ct_relu(ct_nn_forward(n->bn1, ct_nn_forward(n->conv1, x)));
    h = ct_max_pool2d(h, 2, 0, 0);
    h = ct_relu(ct_nn_forward(n->conv2, h));
    h = ct_flatten(h, 1, -1);
    return ct_nn_forward(n->fc, h);
}

static ct_module *nn_build_cnn(void) {
    nn_cnn *n = calloc(1, sizeof *n);
    ct_module *net = ct_nn_module("Net", nn_cnn_forward, n, free);
    n->conv1 = ct_nn_add_module(net, "conv1", ct_nn_conv2d(1, 8, 3, NULL));
    n->bn1 = ct_nn_add_module(net, "bn1", ct_nn_batchnorm2d(8, NULL));
    n->conv2 = ct_nn_add_module(net, "conv2", ct_nn_conv2d(8, 16, 3, NULL));
    n->fc = ct_nn_add_module(net, "fc", ct_nn_linear(16 * 11 * 11, 10, true));
    if (!n->conv1 || !n->bn1 || !n->conv2 || !n->fc) {
        ct_nn_free(net);
        return NULL;
    }
    return net;
}

#endif
