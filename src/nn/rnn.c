/* src/nn/rnn.c — nn.RNN, nn.LSTM and nn.GRU (torch/nn/modules/rnn.py).
 *
 * The parameters are Python's flat weights (weight_ih_l{k}, weight_hh_l{k},
 * bias_ih_l{k}, bias_hh_l{k}, then the same with _reverse, layer by layer),
 * drawn by reset_parameters in that order. The forward is Python's: the
 * same checks with the same messages (prefixed by the layer's name), hx
 * zeros by default, an unbatched input given a batch of one, and then
 * ATen's fused operator (aten::lstm.input, aten::gru.input,
 * aten::rnn_tanh.input, aten::rnn_relu.input) on the flat weights, as
 * _VF.lstm and its kin call it, so results and dropout's draws are
 * PyTorch's own. On CUDA the weights are first laid out in one buffer for
 * cuDNN, as flatten_parameters does (flatten_on_cuda). PackedSequence
 * inputs and LSTM's proj_size are not supported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/amp.h"
#include "ctrial/cuda.h"
#include "nn/layer.h"

typedef enum { RNN_TANH, RNN_RELU, RNN_LSTM, RNN_GRU } rnn_mode;

/* What forward needs to know; the module's user data. */
typedef struct {
    rnn_mode mode;
    const char *type; /* "RNN", "LSTM", "GRU": the prefix of every message */
    const ct_op *op;  /* the fused operator */
    int64_t input_size, hidden_size, num_layers;
    bool bias, batch_first, bidirectional;
    double dropout;
    size_t nparams; /* the flat weights: the module's first parameters */
    const ct_op *flatten; /* aten::_cudnn_rnn_flatten_weight (NULL: not looked up yet, or none) */
    void **flat_at;      /* [nparams] where flatten put each weight on the device (NULL: never flattened) */
} rnn_cfg;

static const char *const kOpNames[] = {"aten::rnn_tanh.input", "aten::rnn_relu.input", "aten::lstm.input",
                                       "aten::gru.input"};
static const char *const kTypes[] = {"RNN", "RNN", "LSTM", "GRU"};

static int64_t num_directions(const rnn_cfg *c) { return c->bidirectional ? 2 : 1; }

/* ---- forward: binding the arguments ---------------------------------------------- */

/* forward(self, input, hx=None) bound as Python binds it: *input and *hx
 * (NULL when absent) borrowed from args or kwargs. */
static int bind_args(const rnn_cfg *c, const ct_value *args, const ct_value *kwargs, const ct_value **input,
                     const ct_value **hx) {
    static const char *const names[] = {"input", "hx"};
    size_t npos = ct_value_len(args);
    if (npos > 2)
        return ct_set_error(CT_EINVAL, "%s: forward() takes from 2 to 3 positional arguments but %zu were given",
                            c->type, npos + 1);
    for (size_t i = 0; i < ct_value_len(kwargs); i++) {
        const char *key = NULL;
        int64_t ikey = 0;
        ct_value_dict_at(kwargs, i, &key, &ikey);
        size_t k = 0;
        while (k < 2 && !(key && strcmp(key, names[k]) == 0)) k++;
        if (k == 2) {
            if (key) return ct_set_error(CT_EINVAL, "%s: forward() got an unexpected keyword argument '%s'", c->type, key);
            return ct_set_error(CT_EINVAL, "%s: forward() got an unexpected keyword argument %lld", c->type,
                                (long long)ikey);
        }
        if (k < npos)
            return ct_set_error(CT_EINVAL, "%s: forward() got multiple values for argument '%s'", c->type, key);
    }
    *input = cti_layer_arg(args, kwargs, 0, "input");
    *hx = cti_layer_arg(args, kwargs, 1, "hx");
    if (*hx && ct_value_kind_of(*hx) == CT_VALUE_NONE) *hx = NULL;
    if (!*input)
        return ct_set_error(CT_EINVAL, "%s: forward() missing 1 required positional argument: 'input'", c->type);
    return CT_OK;
}

static const char *kind_name(const ct_value *v) { return ct_value_kind_name(ct_value_kind_of(v)); }

/* The tensors of input and hx (LSTM: hx is (h_0, c_0)); borrowed. */
static int unpack_args(const rnn_cfg *c, const ct_value *input, const ct_value *hx, const ct_tensor **x,
                       const ct_tensor *h[2]) {
    if (ct_value_kind_of(input) != CT_VALUE_TENSOR)
        return ct_set_error(CT_EINVAL, "%s: input must be a tensor, got a %s", c->type, kind_name(input));
    *x = ct_value_get_tensor(input);
    if (!hx) return CT_OK;
    if (c->mode != RNN_LSTM) {
        if (ct_value_kind_of(hx) != CT_VALUE_TENSOR)
            return ct_set_error(CT_EINVAL, "%s: hx must be a tensor or None, got a %s", c->type, kind_name(hx));
        h[0] = ct_value_get_tensor(hx);
        return CT_OK;
    }
    ct_value_kind k = ct_value_kind_of(hx);
    const ct_value *h0 = ct_value_list_get(hx, 0), *c0 = ct_value_list_get(hx, 1);
    if ((k != CT_VALUE_TUPLE && k != CT_VALUE_LIST) || ct_value_len(hx) != 2 ||
        ct_value_kind_of(h0) != CT_VALUE_TENSOR || ct_value_kind_of(c0) != CT_VALUE_TENSOR)
        return ct_set_error(CT_EINVAL, "%s: hx must be a tuple (h_0, c_0) of two tensors or None, got a %s%s",
                            c->type, kind_name(hx),
                            k == CT_VALUE_TUPLE || k == CT_VALUE_LIST ? " of other values" : "");
    h[0] = ct_value_get_tensor(h0);
    h[1] = ct_value_get_tensor(c0);
    return CT_OK;
}

/* ---- forward: the checks -------------------------------------------------------- */

/* "[2, 3, 4]" (Python's list(t.size())) into buf. */
static const char *format_size(const ct_tensor *t, char *buf, size_t len) {
    int64_t shape[16];
    int nd = ct_shape(t, shape, 16);
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < nd && d < 16 && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* The dims of hx (LSTM: of h_0 and c_0) against the input's, as Python's
 * forward checks them before check_forward_args. */
static int check_hx_dims(const rnn_cfg *c, bool batched, const ct_tensor *const h[2]) {
    int want = batched ? 3 : 2;
    const char *what = batched ? "batched 3-D" : "unbatched 2-D";
    if (c->mode != RNN_LSTM) {
        if (ct_ndim(h[0]) == want) return CT_OK;
        return ct_set_error(CT_ESHAPE, "%s: For %s input, hx should also be %d-D but got %d-D tensor", c->type, what,
                            want, ct_ndim(h[0]));
    }
    if (ct_ndim(h[0]) == want && ct_ndim(h[1]) == want) return CT_OK;
    return ct_set_error(CT_ESHAPE, "%s: For %s input, hx and cx should also be %d-D but got (%d-D, %d-D) tensors",
                        c->type, what, want, ct_ndim(h[0]), ct_ndim(h[1]));
}

/* check_input: the input's dtype (unless autocast is on) and size(-1). */
static int check_input(ct_module *self, const rnn_cfg *c, const ct_tensor *x) {
    ct_dtype wt = ct_dtype_of(ct_nn_param_at(self, 0, NULL)), xt = ct_dtype_of(x);
    bool autocast = ct_autocast_is_enabled(CT_CPU) || ct_autocast_is_enabled(CT_CUDA);
    if (xt != wt && !autocast)
        return ct_set_error(CT_EDTYPE,
                            "%s: input dtype (torch.%s) does not match weight dtype (torch.%s). Convert input: "
                            "input.to(torch.%s), or convert model: model.to(torch.%s)",
                            c->type, ct_dtype_name(xt), ct_dtype_name(wt), ct_dtype_name(wt), ct_dtype_name(xt));
    if (ct_size(x, -1) != c->input_size)
        return ct_set_error(CT_ESHAPE, "%s: input.size(-1) must be equal to input_size. Expected %lld, got %lld",
                            c->type, (long long)c->input_size, (long long)ct_size(x, -1));
    return CT_OK;
}

/* check_hidden_size: h must be [num_layers * num_directions, batch, hidden]. */
static int check_hidden(const rnn_cfg *c, const ct_tensor *h, int64_t batch, const char *which) {
    int64_t want[3] = {c->num_layers * num_directions(c), batch, c->hidden_size};
    bool ok = ct_ndim(h) == 3;
    for (int d = 0; ok && d < 3; d++) ok = ct_size(h, d) == want[d];
    if (ok) return CT_OK;
    char got[256];
    return ct_set_error(CT_ESHAPE, "%s: Expected %s size (%lld, %lld, %lld), got %s", c->type, which,
                        (long long)want[0], (long long)want[1], (long long)want[2], format_size(h, got, sizeof got));
}

/* ---- forward: the call ------------------------------------------------------------ */

/* The initial states: hx as given (given a batch dim when unbatched), or
 * zeros of the input's dtype and device; new tensors in the current scope. */
static int initial_states(const rnn_cfg *c, const ct_tensor *x, bool batched, const ct_tensor *const given[2],
                          ct_tensor *h[2]) {
    int n = c->mode == RNN_LSTM ? 2 : 1;
    if (given[0]) {
        for (int i = 0; i < n; i++) h[i] = batched ? ct_alias(given[i]) : ct_unsqueeze(given[i], 1);
    } else {
        int64_t batch = ct_size(x, c->batch_first ? 0 : 1);
        ct_topts o = {.dtype = ct_dtype_of(x), .device = ct_device_of(x)};
        for (int i = 0; i < n; i++)
            h[i] = ct_zeros(CT_SHAPE(c->num_layers * num_directions(c), batch, c->hidden_size), &o);
    }
    return h[0] && (n == 1 || h[1]) ? CT_OK : ct_last_code();
}

/* cuDNN's mode numbers (torch.backends.cudnn.rnn.get_cudnn_mode). */
static const int64_t kCudnnModes[] = {1, 0, 2, 3};

/* nn.RNNBase.flatten_parameters: on CUDA, cuDNN takes the weights as they
 * are only when they lie in one buffer in its layout; otherwise every call
 * copies them into one first. So, as PyTorch does after .cuda(), the
 * weights are moved once into a buffer laid out for cuDNN
 * (aten::_cudnn_rnn_flatten_weight, which makes each parameter a view of
 * it with Tensor.set_, under no_grad): the same parameters, names and
 * values, the state dict one storage as PyTorch saves it. Again whenever a
 * weight is no longer where the last flattening put it (moved, replaced).
 * As in Python, weights that are not all CUDA tensors of one dtype, or
 * share memory, are left alone, and so is a libtorch without cuDNN. */
static void flatten_on_cuda(rnn_cfg *c, const ct_tensor **params) {
    ct_dtype dt = ct_dtype_of(params[0]);
    bool flat = c->flat_at != NULL;
    for (size_t i = 0; i < c->nparams; i++) {
        ct_device d = ct_device_of(params[i]);
        if (d.type != CT_CUDA || ct_dtype_of(params[i]) != dt || !ct_is_contiguous(params[i])) return;
        flat = flat && ct_cuda_data_ptr(params[i]) == c->flat_at[i];
    }
    if (flat) return;
    for (size_t i = 0; i < c->nparams; i++)
        for (size_t j = 0; j < i; j++)
            if (ct_cuda_data_ptr(params[i]) == ct_cuda_data_ptr(params[j])) return; /* shared weights */
    if (!c->flatten && !(c->flatten = ct_op_find("aten::_cudnn_rnn_flatten_weight"))) {
        ct_clear_error();
        return;
    }
    if (!c->flat_at && !(c->flat_at = calloc(c->nparams, sizeof *c->flat_at))) return;
    ct_arg a[] = {
        ct_arg_tensors(c->nparams, params),
        CT_I(c->bias ? 4 : 2),
        CT_I(c->input_size),
        CT_I(kCudnnModes[c->mode]),
        CT_I(c->hidden_size),
        CT_I(0), /* proj_size */
        CT_I(c->num_layers),
        CT_B(c->batch_first),
        CT_B(c->bidirectional),
    };
    ct_tensor *buf = NULL;
    ct_guard *g = ct_no_grad();
    int rc = ct_op_call_n(c->flatten, sizeof a / sizeof *a, a, 1, &buf);
    ct_guard_end(g);
    ct_tensor_free(buf); /* the parameters hold its storage now */
    if (rc < 0) { /* no cuDNN for these weights: the fused operator copies them, as without flattening */
        ct_clear_error();
        return;
    }
    for (size_t i = 0; i < c->nparams; i++) c->flat_at[i] = ct_cuda_data_ptr(params[i]);
}

/* The fused operator on x [T, N, in] (or [N, T, in]) and the states h:
 * out[0] the output, out[1] h_n (and out[2] c_n for LSTM); new tensors. */
static int call_fused(ct_module *self, rnn_cfg *c, const ct_tensor *x, ct_tensor *const h[2],
                      ct_tensor *out[3]) {
    const ct_tensor **params = malloc(c->nparams * sizeof *params);
    if (!params) return ct_set_error(CT_ENOMEM, "%s: out of host memory", c->type);
    for (size_t i = 0; i < c->nparams; i++) params[i] = ct_nn_param_at(self, i, NULL);
    if (ct_device_of(x).type == CT_CUDA) flatten_on_cuda(c, params);
    const ct_tensor *states[2] = {h[0], h[1]};
    ct_arg a[] = {
        CT_T(x),
        c->mode == RNN_LSTM ? ct_arg_tensors(2, states) : CT_T(h[0]),
        ct_arg_tensors(c->nparams, params),
        CT_B(c->bias),
        CT_I(c->num_layers),
        CT_F(c->dropout),
        CT_B(ct_nn_is_training(self)),
        CT_B(c->bidirectional),
        CT_B(c->batch_first),
    };
    size_t nout = c->mode == RNN_LSTM ? 3 : 2;
    int rc = ct_op_call_n(c->op, sizeof a / sizeof *a, a, nout, out);
    free(params);
    if (rc >= 0) return CT_OK;
    /* libtorch's own failure (fp16 on the CPU, which oneDNN's LSTM lacks)
     * after the layer's name, as Python's reads, not the operator's. */
    const char *op = kOpNames[c->mode], *msg = ct_last_error();
    size_t n = strlen(op);
    char why[2048];
    snprintf(why, sizeof why, "%s", strncmp(msg, op, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg);
    return ct_set_error(rc, "%s: %s", c->type, why);
}

/* A tuple of a and b (stolen, also on failure); NULL + error if either is NULL. */
static ct_value *pair(ct_value *a, ct_value *b) {
    ct_value *t = a && b ? ct_value_tuple() : NULL;
    if (!t) {
        ct_value_free(a);
        ct_value_free(b);
    } else if (ct_value_list_append(t, a) != CT_OK) { /* a is freed */
        ct_value_free(b);
        ct_value_free(t);
        t = NULL;
    } else if (ct_value_list_append(t, b) != CT_OK) {
        ct_value_free(t);
        t = NULL;
    }
    if (!t) ct_set_error(CT_ENOMEM, "out of host memory");
    return t;
}

/* (output, h_n), or (output, (h_n, c_n)) for LSTM; the batch dim taken out
 * again for an unbatched input. */
static ct_value *results(const rnn_cfg *c, bool batched, ct_tensor *out[3]) {
    int n = c->mode == RNN_LSTM ? 3 : 2;
    if (!batched) {
        out[0] = ct_squeeze_dim(out[0], c->batch_first ? 0 : 1);
        for (int i = 1; i < n; i++) out[i] = ct_squeeze_dim(out[i], 1);
    }
    for (int i = 0; i < n; i++)
        if (!out[i]) return NULL;
    ct_value *hidden = c->mode == RNN_LSTM ? pair(cti_layer_value(out[1]), cti_layer_value(out[2]))
                                           : cti_layer_value(out[1]);
    return pair(cti_layer_value(out[0]), hidden);
}

/* forward(input, hx=None); the tensors it makes belong to the current scope. */
static ct_value *run(ct_module *self, rnn_cfg *c, const ct_tensor *x, const ct_tensor *const given[2]) {
    int nd = ct_ndim(x);
    if (nd != 2 && nd != 3) {
        ct_set_error(CT_ESHAPE, "%s: Expected input to be 2D or 3D, got %dD %s", c->type, nd,
                     c->mode == RNN_LSTM || c->mode == RNN_GRU ? "instead" : "tensor instead");
        return NULL;
    }
    bool batched = nd == 3;
    if (given[0] && check_hx_dims(c, batched, given) != CT_OK) return NULL;
    const ct_tensor *in = batched ? x : ct_unsqueeze(x, c->batch_first ? 0 : 1);
    ct_tensor *h[2] = {NULL, NULL}, *out[3] = {NULL, NULL, NULL};
    if (!in || initial_states(c, in, batched, given, h) != CT_OK || check_input(self, c, in) != CT_OK) return NULL;
    int64_t batch = ct_size(in, c->batch_first ? 0 : 1);
    if (check_hidden(c, h[0], batch, c->mode == RNN_LSTM ? "hidden[0]" : "hidden") != CT_OK ||
        (c->mode == RNN_LSTM && check_hidden(c, h[1], batch, "hidden[1]") != CT_OK))
        return NULL;
    if (call_fused(self, c, in, h, out) != CT_OK) return NULL;
    return results(c, batched, out);
}

static ct_value *rnn_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    rnn_cfg *c = ct_nn_user(self);
    const ct_value *input = NULL, *hx = NULL;
    const ct_tensor *x = NULL, *h[2] = {NULL, NULL};
    if (bind_args(c, args, kwargs, &input, &hx) != CT_OK || unpack_args(c, input, hx, &x, h) != CT_OK) return NULL;
    ct_scope *s = ct_scope_begin(); /* the values returned hold their own handles */
    ct_value *y = run(self, c, x, h);
    ct_scope_end(s);
    return y;
}

/* ---- construction ------------------------------------------------------------------ */

/* Python's checks in RNNBase.__init__ and RNN.__init__. */
static int check_opts(const char *fn, rnn_mode mode, int64_t input_size, int64_t hidden_size, const ct_rnn_opts *o) {
    if (input_size <= 0) return ct_set_error(CT_EINVAL, "%s: input_size must be greater than zero", fn);
    if (hidden_size <= 0) return ct_set_error(CT_EINVAL, "%s: hidden_size must be greater than zero", fn);
    if (o->num_layers <= 0) return ct_set_error(CT_EINVAL, "%s: num_layers must be greater than zero", fn);
    if (!(o->dropout >= 0 && o->dropout <= 1))
        return ct_set_error(CT_EINVAL,
                            "%s: dropout should be a number in range [0, 1] representing the probability of an "
                            "element being zeroed",
                            fn);
    const char *nl = o->nonlinearity;
    if (mode != RNN_LSTM && mode != RNN_GRU) {
        if (nl && strcmp(nl, "tanh") != 0 && strcmp(nl, "relu") != 0)
            return ct_set_error(CT_EINVAL, "%s: Unknown nonlinearity '%s'. Select from 'tanh' or 'relu'.", fn, nl);
    } else if (nl && strcmp(nl, "tanh") != 0) {
        return ct_set_error(CT_EINVAL, "%s: nonlinearity is nn.RNN's option only (%s has none), got '%s'", fn,
                            kTypes[mode], nl);
    }
    return CT_OK;
}

/* One direction of one layer: weight_ih, weight_hh (and the biases), each
 * drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)) as reset_parameters does. */
static int add_layer_params(ct_module *m, const rnn_cfg *c, int64_t layer, int dir) {
    static const char *const names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    int64_t gate = c->hidden_size * (c->mode == RNN_LSTM ? 4 : c->mode == RNN_GRU ? 3 : 1);
    int64_t in = layer == 0 ? c->input_size : c->hidden_size * num_directions(c);
    int64_t shapes[4][2] = {{gate, in}, {gate, c->hidden_size}, {gate, 0}, {gate, 0}};
    double bound = 1.0 / sqrt((double)c->hidden_size);
    for (int i = 0; i < (c->bias ? 4 : 2); i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_l%lld%s", names[i], (long long)layer, dir ? "_reverse" : "");
        if (!cti_layer_param(m, name, i < 2 ? 2 : 1, shapes[i], cti_layer_init_uniform, -bound, bound))
            return ct_last_code();
    }
    return CT_OK;
}

static void cfg_free(void *p) {
    rnn_cfg *c = p;
    if (c) free(c->flat_at);
    free(c);
}

static ct_module *rnn_new(const char *fn, rnn_mode mode, int64_t input_size, int64_t hidden_size,
                          const ct_rnn_opts *opts) {
    ct_rnn_opts o = opts ? *opts : ct_rnn_defaults();
    if (check_opts(fn, mode, input_size, hidden_size, &o) != CT_OK) return NULL;
    if (mode == RNN_TANH && o.nonlinearity && strcmp(o.nonlinearity, "relu") == 0) mode = RNN_RELU;
    rnn_cfg *c = calloc(1, sizeof *c);
    const ct_op *op = ct_op_find(kOpNames[mode]);
    if (!c || !op) {
        free(c);
        if (op) ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    *c = (rnn_cfg){mode, kTypes[mode], op, input_size, hidden_size, o.num_layers, o.bias, o.batch_first,
                   o.bidirectional, o.dropout, 0, NULL, NULL};
    c->nparams = (size_t)(o.num_layers * num_directions(c) * (o.bias ? 4 : 2));
    ct_module *m = ct_nn_module_value(c->type, rnn_forward, c, cfg_free);
    if (!m) {
        free(c); /* user_free is not called on failure */
        return NULL;
    }
    for (int64_t layer = 0; layer < o.num_layers; layer++)
        for (int dir = 0; dir < num_directions(c); dir++)
            if (add_layer_params(m, c, layer, dir) != CT_OK) {
                ct_nn_free(m);
                return NULL;
            }
    return m;
}

ct_rnn_opts ct_rnn_defaults(void) {
    return (ct_rnn_opts){.num_layers = 1, .bias = true, .batch_first = false, .dropout = 0.0,
                         .bidirectional = false, .nonlinearity = "tanh"};
}

ct_module *ct_nn_rnn(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts) {
    return rnn_new(__func__, RNN_TANH, input_size, hidden_size, opts);
}

ct_module *ct_nn_lstm(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts) {
    return rnn_new(__func__, RNN_LSTM, input_size, hidden_size, opts);
}

ct_module *ct_nn_gru(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts) {
    return rnn_new(__func__, RNN_GRU, input_size, hidden_size, opts);
}
