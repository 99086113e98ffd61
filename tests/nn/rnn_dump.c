/* rnn_dump OUT.pth — nn.RNN, nn.LSTM and nn.GRU from C for
 * test_rnn_parity.py, which builds the same layers in torch.
 *
 * For each case of CASES: ct_manual_seed(seed), the layer, its initial state
 * dict; then (as float64 when the case says so, in eval mode when it says
 * so) the input [T, N, I] ([N, T, I] batch_first, [T, I] unbatched) and hx
 * drawn from randn; ct_manual_seed(seed + 1000) right before the forward
 * (dropout's draws); a weight of each output's shape drawn from randn; and
 * backward of loss = sum_k (out_k * weight_k).sum() over the outputs in
 * order (output, h_n[, c_n]). OUT.pth:
 *
 *   {"cases": {name: {"type": ct_nn_type, "state0": {...}, "input": x,
 *                     "hx": h_0 (when given), "cx": c_0 (LSTM),
 *                     "out": the forward's value, detached,
 *                     "weights": [...], "grads": {"input", "hx", "cx",
 *                     each parameter's name}}},
 *    "errors": {name: message}}
 *
 * "errors" holds the message of each case of ERRORS, which must fail with
 * its code; the script checks the same call fails in torch with the same
 * message. Keep both tables in step with the script's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

enum { IN = 4, HID = 5, T = 6, N = 3 };

typedef enum { HX_NONE, HX_POS, HX_KW, HX_POS_NONE } hx_mode;

typedef struct {
    const char *name;
    uint64_t seed;
    const char *type;         /* "RNN", "LSTM", "GRU" */
    const char *nonlinearity; /* RNN: NULL (tanh) or "relu" */
    int64_t layers;           /* 0: 1 */
    bool bidirectional, batch_first, nobias;
    double dropout;
    bool eval, f64, unbatched;
    hx_mode hx;
    const char *autocast;     /* NULL, or the forward under autocast to "bf16" or "fp16" (the CPU's) */
} rnn_case;

static const rnn_case CASES[] = {
    {.name = "rnn_tanh", .seed = 1, .type = "RNN"},
    {.name = "rnn_relu", .seed = 2, .type = "RNN", .nonlinearity = "relu"},
    {.name = "lstm", .seed = 3, .type = "LSTM"},
    {.name = "gru", .seed = 4, .type = "GRU"},
    {.name = "rnn_2l_bidir_bf", .seed = 5, .type = "RNN", .layers = 2, .bidirectional = true, .batch_first = true},
    {.name = "lstm_2l_bidir_bf", .seed = 6, .type = "LSTM", .layers = 2, .bidirectional = true, .batch_first = true},
    {.name = "gru_2l_bidir_bf", .seed = 7, .type = "GRU", .layers = 2, .bidirectional = true, .batch_first = true},
    {.name = "rnn_relu_dropout", .seed = 8, .type = "RNN", .nonlinearity = "relu", .layers = 3, .dropout = 0.3},
    {.name = "lstm_dropout_bidir", .seed = 9, .type = "LSTM", .layers = 2, .bidirectional = true, .dropout = 0.3},
    {.name = "gru_dropout", .seed = 10, .type = "GRU", .layers = 3, .dropout = 0.3},
    {.name = "rnn_unbatched", .seed = 11, .type = "RNN", .unbatched = true},
    {.name = "lstm_unbatched", .seed = 12, .type = "LSTM", .layers = 2, .unbatched = true},
    {.name = "gru_unbatched_bf_hx", .seed = 13, .type = "GRU", .batch_first = true, .unbatched = true, .hx = HX_POS},
    {.name = "lstm_unbatched_bidir_hx", .seed = 14, .type = "LSTM", .bidirectional = true, .unbatched = true,
     .hx = HX_POS},
    {.name = "rnn_hx", .seed = 15, .type = "RNN", .layers = 2, .bidirectional = true, .hx = HX_POS},
    {.name = "lstm_hx", .seed = 16, .type = "LSTM", .layers = 2, .bidirectional = true, .hx = HX_POS},
    {.name = "gru_hx_kw", .seed = 17, .type = "GRU", .layers = 2, .hx = HX_KW},
    {.name = "lstm_hx_kw_bf", .seed = 18, .type = "LSTM", .batch_first = true, .hx = HX_KW},
    {.name = "lstm_hx_none", .seed = 19, .type = "LSTM", .hx = HX_POS_NONE},
    {.name = "lstm_eval_dropout", .seed = 20, .type = "LSTM", .layers = 2, .dropout = 0.5, .eval = true},
    {.name = "gru_eval", .seed = 21, .type = "GRU", .eval = true, .hx = HX_POS},
    {.name = "lstm_f64", .seed = 22, .type = "LSTM", .layers = 2, .bidirectional = true, .f64 = true, .hx = HX_POS},
    {.name = "gru_f64_dropout", .seed = 23, .type = "GRU", .layers = 2, .dropout = 0.3, .f64 = true},
    {.name = "rnn_f64", .seed = 24, .type = "RNN", .f64 = true},
    {.name = "lstm_nobias", .seed = 25, .type = "LSTM", .layers = 2, .nobias = true, .hx = HX_POS},
    {.name = "gru_nobias_bidir", .seed = 26, .type = "GRU", .bidirectional = true, .nobias = true},
    {.name = "rnn_big_seed", .seed = 123456789012ULL, .type = "RNN", .layers = 2},
    /* Mixed precision (ct_ctx_use_amp's autocast): the same ops as Python's
     * under torch.autocast("cpu", dtype), so the same dtypes out: the RNN
     * and the LSTM in the low precision, the GRU in float32 (aten::gru is
     * on autocast's float32 list). fp16 LSTM is an error, as in torch. */
    {.name = "rnn_autocast_bf16", .seed = 27, .type = "RNN", .layers = 2, .hx = HX_POS, .autocast = "bf16"},
    {.name = "lstm_autocast_bf16", .seed = 28, .type = "LSTM", .layers = 2, .bidirectional = true, .hx = HX_POS,
     .autocast = "bf16"},
    {.name = "gru_autocast_bf16", .seed = 29, .type = "GRU", .batch_first = true, .autocast = "bf16"},
    {.name = "rnn_autocast_fp16", .seed = 30, .type = "RNN", .nonlinearity = "relu", .autocast = "fp16"},
    {.name = "gru_autocast_fp16", .seed = 31, .type = "GRU", .layers = 2, .hx = HX_KW, .autocast = "fp16"},
    {.name = "lstm_autocast_bf16_dropout", .seed = 32, .type = "LSTM", .layers = 2, .dropout = 0.3,
     .autocast = "bf16"},
};

static void die(const char *what) {
    fprintf(stderr, "rnn_dump: %s: %s\n", what, ct_last_error());
    exit(1);
}

static ct_module *build(const char *type, const ct_rnn_opts *o) {
    if (strcmp(type, "LSTM") == 0) return ct_nn_lstm(IN, HID, o);
    if (strcmp(type, "GRU") == 0) return ct_nn_gru(IN, HID, o);
    return ct_nn_rnn(IN, HID, o);
}

static ct_module *build_case(const rnn_case *c) {
    ct_rnn_opts o = ct_rnn_defaults();
    if (c->nonlinearity) o.nonlinearity = c->nonlinearity;
    o.num_layers = c->layers ? c->layers : 1;
    o.bidirectional = c->bidirectional;
    o.batch_first = c->batch_first;
    o.bias = !c->nobias;
    o.dropout = c->dropout;
    return build(c->type, &o);
}

/* randn of shape, requiring grad (a leaf of the graph); in the current scope. */
static ct_tensor *leaf(int ndim, const int64_t *shape, ct_dtype dtype) {
    ct_tensor *t = ct_randn(ndim, shape, &(ct_topts){.dtype = dtype});
    if (!t || ct_set_requires_grad(t, true) != CT_OK) die("randn");
    return t;
}

/* The initial state [L * D, N, H] ([L * D, H] unbatched). */
static ct_tensor *state(const rnn_case *c, ct_dtype dtype) {
    int64_t ld = (c->layers ? c->layers : 1) * (c->bidirectional ? 2 : 1);
    return c->unbatched ? leaf(CT_SHAPE(ld, HID), dtype) : leaf(CT_SHAPE(ld, N, HID), dtype);
}

static void set(ct_value *dict, const char *key, ct_value *v) {
    if (!v || ct_value_dict_set(dict, key, v) != CT_OK) die(key);
}

static ct_value *detached(const ct_tensor *t) { return ct_value_tensor(ct_keep(ct_detach(t))); }

/* The tensor leaves of v in order, detached (a copy of v's structure). */
static ct_value *detach_tree(const ct_value *v) {
    ct_value_kind k = ct_value_kind_of(v);
    if (k == CT_VALUE_TENSOR) return detached(ct_value_get_tensor(v));
    if (k != CT_VALUE_TUPLE && k != CT_VALUE_LIST) return ct_value_copy(v, false);
    ct_value *out = k == CT_VALUE_TUPLE ? ct_value_tuple() : ct_value_list();
    for (size_t i = 0; i < ct_value_len(v); i++)
        if (ct_value_list_append(out, detach_tree(ct_value_list_get(v, i))) != CT_OK) die("detach_tree");
    return out;
}

/* loss += (leaf * w).sum() for every tensor leaf of v in order, w drawn
 * from randn and appended to weights. */
static void add_loss(const ct_value *v, ct_tensor **loss, ct_value *weights) {
    if (ct_value_kind_of(v) == CT_VALUE_TENSOR) {
        const ct_tensor *t = ct_value_get_tensor(v);
        int64_t shape[8];
        int nd = ct_shape(t, shape, 8);
        ct_tensor *w = ct_randn(nd, shape, &(ct_topts){.dtype = ct_dtype_of(t)});
        ct_tensor *term = ct_sum(ct_mul(t, w));
        *loss = *loss ? ct_add(*loss, term) : term;
        if (!*loss || ct_value_list_append(weights, detached(w)) != CT_OK) die("loss");
        return;
    }
    for (size_t i = 0; i < ct_value_len(v); i++) add_loss(ct_value_list_get(v, i), loss, weights);
}

static ct_value *grad_of(const ct_tensor *t) {
    ct_tensor *g = ct_grad(t);
    if (!g) die("no gradient");
    return ct_value_tensor(ct_keep(g));
}

/* The arguments of the forward, as the case passes hx. */
static void make_args(const rnn_case *c, ct_tensor *x, ct_tensor *h, ct_tensor *cx, ct_value *args,
                      ct_value *kwargs) {
    ct_value_list_append(args, ct_value_tensor(ct_alias(x)));
    ct_value *hv = NULL;
    if (h && cx) {
        hv = ct_value_tuple();
        ct_value_list_append(hv, ct_value_tensor(ct_alias(h)));
        ct_value_list_append(hv, ct_value_tensor(ct_alias(cx)));
    } else if (h) {
        hv = ct_value_tensor(ct_alias(h));
    }
    if (c->hx == HX_POS) ct_value_list_append(args, hv);
    else if (c->hx == HX_KW) ct_value_dict_set(kwargs, "hx", hv);
    else if (c->hx == HX_POS_NONE) ct_value_list_append(args, ct_value_none());
}

static ct_value *run_case(const rnn_case *c) {
    ct_value *rec = ct_value_dict();
    ct_manual_seed(c->seed);
    ct_module *m = build_case(c);
    if (!m) die(c->name);
    set(rec, "type", ct_value_str(ct_nn_type(m)));
    ct_value *sd = ct_nn_state_dict(m);
    set(rec, "state0", ct_value_copy(sd, true));
    ct_value_free(sd);
    ct_dtype dt = c->f64 ? CT_F64 : CT_F32;
    if (ct_nn_to_dtype(m, dt) != CT_OK) die("to_dtype");
    ct_nn_train(m, !c->eval);

    bool lstm = strcmp(c->type, "LSTM") == 0, given = c->hx == HX_POS || c->hx == HX_KW;
    ct_tensor *x = c->unbatched ? leaf(CT_SHAPE(T, IN), dt)
                   : c->batch_first ? leaf(CT_SHAPE(N, T, IN), dt)
                                    : leaf(CT_SHAPE(T, N, IN), dt);
    ct_tensor *h = given ? state(c, dt) : NULL;
    ct_tensor *cx = given && lstm ? state(c, dt) : NULL;
    set(rec, "input", detached(x));
    if (h) set(rec, "hx", detached(h));
    if (cx) set(rec, "cx", detached(cx));

    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    make_args(c, x, h, cx, args, kwargs);
    ct_manual_seed(c->seed + 1000);
    ct_dtype low = c->autocast && strcmp(c->autocast, "fp16") == 0 ? CT_F16 : CT_BF16;
    if (c->autocast && ct_autocast_enter(CT_CPU, low) != CT_OK) die("autocast");
    ct_value *y = ct_nn_call(m, args, kwargs);
    if (c->autocast) ct_autocast_exit();
    if (!y) die(c->name);
    ct_tensor *loss = NULL;
    ct_value *weights = ct_value_list();
    add_loss(y, &loss, weights);
    if (ct_backward(loss) != CT_OK) die("backward");
    set(rec, "out", detach_tree(y));
    set(rec, "weights", weights);

    ct_value *grads = ct_value_dict();
    set(grads, "input", grad_of(x));
    if (h) set(grads, "hx", grad_of(h));
    if (cx) set(grads, "cx", grad_of(cx));
    for (size_t i = 0; i < ct_nn_num_params(m); i++) {
        const char *name = NULL;
        ct_tensor *p = ct_nn_param_at(m, i, &name);
        set(grads, name, grad_of(p));
    }
    set(rec, "grads", grads);
    ct_value_free(y);
    ct_value_free(args);
    ct_value_free(kwargs);
    ct_nn_free(m);
    return rec;
}

/* ---- errors: the same messages as torch's ----------------------------------------- */

static ct_module *lstm(void) { return ct_nn_lstm(IN, HID, NULL); }
static ct_module *gru(void) { return ct_nn_gru(IN, HID, NULL); }
static ct_module *rnn(void) { return ct_nn_rnn(IN, HID, NULL); }

static ct_module *lstm_2l_bidir(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 2;
    o.bidirectional = true;
    return ct_nn_lstm(IN, HID, &o);
}

static ct_module *rnn_sigmoid(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.nonlinearity = "sigmoid";
    return ct_nn_rnn(IN, HID, &o);
}

static ct_module *gru_dropout_big(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.dropout = 1.5;
    return ct_nn_gru(IN, HID, &o);
}

static ct_module *lstm_no_layers(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 0;
    return ct_nn_lstm(IN, HID, &o);
}

static ct_module *rnn_no_input(void) { return ct_nn_rnn(0, HID, NULL); }
static ct_module *gru_no_hidden(void) { return ct_nn_gru(IN, 0, NULL); }

/* A layer, then (when `in` has dims) a forward on zeros of the given
 * shapes: hx [h] or, LSTM, (h, c) when h has dims. */
typedef struct {
    int ndim;
    int64_t s[4];
} shape;

static const struct {
    const char *name;
    ct_module *(*build)(void);
    shape in, h, c;
    bool f64;
    int code;
    bool fp16; /* the forward under the CPU's fp16 autocast */
} ERRORS[] = {
    {"lstm_input_size", lstm, {3, {T, N, 5}}, {0}, {0}, false, CT_ESHAPE, false},
    {"lstm_4d", lstm, {4, {2, T, N, IN}}, {0}, {0}, false, CT_ESHAPE, false},
    {"rnn_1d", rnn, {1, {IN}}, {0}, {0}, false, CT_ESHAPE, false},
    {"gru_unbatched_input_size", gru, {2, {T, 3}}, {0}, {0}, false, CT_ESHAPE, false},
    {"gru_hidden_size", gru, {3, {T, N, IN}}, {3, {1, 2, HID}}, {0}, false, CT_ESHAPE, false},
    {"gru_unbatched_hx_3d", gru, {2, {T, IN}}, {3, {1, 1, HID}}, {0}, false, CT_ESHAPE, false},
    {"rnn_batched_hx_2d", rnn, {3, {T, N, IN}}, {2, {1, HID}}, {0}, false, CT_ESHAPE, false},
    {"rnn_unbatched_hx_size", rnn, {2, {T, IN}}, {2, {1, 4}}, {0}, false, CT_ESHAPE, false},
    {"lstm_cell_size", lstm_2l_bidir, {3, {T, N, IN}}, {3, {4, N, HID}}, {3, {4, N, 6}}, false, CT_ESHAPE, false},
    {"lstm_hidden_layers", lstm_2l_bidir, {3, {T, N, IN}}, {3, {2, N, HID}}, {3, {4, N, HID}}, false, CT_ESHAPE, false},
    {"lstm_unbatched_cx_3d", lstm, {2, {T, IN}}, {2, {1, HID}}, {3, {1, 1, HID}}, false, CT_ESHAPE, false},
    {"lstm_batched_hx_2d", lstm, {3, {T, N, IN}}, {2, {1, HID}}, {2, {1, HID}}, false, CT_ESHAPE, false},
    {"lstm_unbatched_hidden", lstm, {2, {T, IN}}, {2, {2, HID}}, {2, {1, HID}}, false, CT_ESHAPE, false},
    {"rnn_dtype", rnn, {3, {T, N, IN}}, {0}, {0}, true, CT_EDTYPE, false},
    {"rnn_nonlinearity", rnn_sigmoid, {0}, {0}, {0}, false, CT_EINVAL, false},
    {"gru_dropout_range", gru_dropout_big, {0}, {0}, {0}, false, CT_EINVAL, false},
    {"lstm_num_layers", lstm_no_layers, {0}, {0}, {0}, false, CT_EINVAL, false},
    {"rnn_input_size_zero", rnn_no_input, {0}, {0}, {0}, false, CT_EINVAL, false},
    {"gru_hidden_size_zero", gru_no_hidden, {0}, {0}, {0}, false, CT_EINVAL, false},
    /* torch's CPU LSTM (oneDNN) has no float16 kernel: libtorch's own error,
     * after the layer's name, as torch.autocast("cpu", torch.float16) fails. */
    {"lstm_autocast_fp16", lstm, {3, {T, N, IN}}, {0}, {0}, false, CT_ETORCH, true},
};

static ct_value *zeros_value(shape s, ct_dtype dt) {
    return ct_value_tensor(ct_keep(ct_zeros(s.ndim, s.s, &(ct_topts){.dtype = dt})));
}

/* The case's failure: its code checked, its message returned. */
static const char *error_of(size_t i) {
    ct_clear_error();
    ct_module *m = ERRORS[i].build();
    ct_value *y = NULL;
    if (m && ERRORS[i].in.ndim) {
        ct_value *args = ct_value_tuple();
        ct_value_list_append(args, zeros_value(ERRORS[i].in, ERRORS[i].f64 ? CT_F64 : CT_F32));
        if (ERRORS[i].h.ndim && ERRORS[i].c.ndim) {
            ct_value *hc = ct_value_tuple();
            ct_value_list_append(hc, zeros_value(ERRORS[i].h, CT_F32));
            ct_value_list_append(hc, zeros_value(ERRORS[i].c, CT_F32));
            ct_value_list_append(args, hc);
        } else if (ERRORS[i].h.ndim) {
            ct_value_list_append(args, zeros_value(ERRORS[i].h, CT_F32));
        }
        if (ERRORS[i].fp16 && ct_autocast_enter(CT_CPU, CT_F16) != CT_OK) die("autocast");
        y = ct_nn_call(m, args, NULL);
        if (ERRORS[i].fp16) ct_autocast_exit();
        ct_value_free(args);
    }
    bool failed = !y && (!m || ERRORS[i].in.ndim);
    if (!failed || ct_last_code() != ERRORS[i].code) {
        fprintf(stderr, "rnn_dump: error case %s: expected %s, got %s (%s)\n", ERRORS[i].name,
                ct_strerror(ERRORS[i].code), failed ? ct_strerror(ct_last_code()) : "success", ct_last_error());
        exit(1);
    }
    ct_value_free(y);
    ct_nn_free(m);
    return ct_last_error();
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.pth\n", argv[0]);
        return 2;
    }
    ct_set_num_threads(1);
    ct_value *all = ct_value_dict(), *cases = ct_value_dict(), *errors = ct_value_dict();
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        ct_scope *s = ct_scope_begin();
        set(cases, CASES[i].name, run_case(&CASES[i]));
        ct_scope_end(s);
    }
    for (size_t i = 0; i < sizeof ERRORS / sizeof *ERRORS; i++) set(errors, ERRORS[i].name, ct_value_str(error_of(i)));
    set(all, "cases", cases);
    set(all, "errors", errors);
    if (ct_pth_save(argv[1], all, NULL, NULL) != CT_OK) die(argv[1]);
    ct_value_free(all);
    return 0;
}
