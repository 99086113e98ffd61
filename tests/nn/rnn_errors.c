/* tests/nn/rnn_errors.c — nn.RNN, nn.LSTM and nn.GRU beyond what
 * test_rnn_parity.py compares with torch:
 *   - type names, parameter names, order and shapes (bias or not, layers,
 *     directions);
 *   - the constructor's checks (codes and messages), opts NULL, an
 *     RNN-only option given to LSTM or GRU;
 *   - forward's argument binding as Python's: input and hx by position or
 *     keyword, hx None, too many or unknown arguments, hx given twice, a
 *     missing input, hx of the wrong kind; ct_nn_forward, which needs a
 *     tensor back;
 *   - shape and dtype errors with the layer's name in the message;
 *   - dropout only in training; state dicts between layers; float64;
 *   - no tensor handle leaked by a forward, failed or not. */
#include <stdlib.h>

#include "ct_test.h"

/* ---- helpers ----------------------------------------------------------------------- */

static ct_value *tensor_value(ct_tensor *t) { return ct_value_tensor(ct_keep(t)); }

/* A tuple of n values (stolen). */
static ct_value *tuple(int n, ct_value *a, ct_value *b, ct_value *c) {
    ct_value *t = ct_value_tuple();
    ct_value *items[3] = {a, b, c};
    for (int i = 0; i < n; i++) ct_value_list_append(t, items[i]);
    return t;
}

static ct_value *randn3(int64_t a, int64_t b, int64_t c) { return tensor_value(ct_randn(CT_SHAPE(a, b, c), NULL)); }
static ct_value *zeros3(int64_t a, int64_t b, int64_t c) { return tensor_value(ct_zeros(CT_SHAPE(a, b, c), NULL)); }

/* m(*args, **kwargs) expected to fail with code and a message containing
 * needle; args and kwargs (may be NULL) are freed. */
#define CALL_FAILS(m, args, kwargs, code, needle)                     \
    do {                                                              \
        ct_value *a_ = (args), *k_ = (kwargs);                        \
        ct_value *y_ = ct_nn_call((m), a_, k_);                       \
        CHECK(y_ == NULL);                                            \
        CHECK_ERR((code), (needle));                                  \
        ct_value_free(y_);                                            \
        ct_value_free(a_);                                            \
        ct_value_free(k_);                                            \
    } while (0)

/* m(*args, **kwargs) must succeed; returns the result (the caller frees). */
static ct_value *call_ok(ct_module *m, ct_value *args, ct_value *kwargs) {
    ct_value *y = ct_nn_call(m, args, kwargs);
    CHECK(y != NULL);
    ct_value_free(args);
    ct_value_free(kwargs);
    return y;
}

/* The i-th leaf of a (nested) result, following the path of indices. */
static ct_tensor *at(const ct_value *v, int i, int j) {
    const ct_value *e = ct_value_list_get(v, (size_t)i);
    if (j >= 0) e = ct_value_list_get(e, (size_t)j);
    return e ? ct_value_get_tensor(e) : NULL;
}


static bool has_shape(const ct_tensor *t, int ndim, const int64_t *shape) {
    if (!t || ct_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (ct_size(t, d) != shape[d]) return false;
    return true;
}

/* ---- structure ---------------------------------------------------------------------- */

static void test_parameters(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    CHECK(o.num_layers == 1 && o.bias && !o.batch_first && o.dropout == 0 && !o.bidirectional);
    CHECK(o.nonlinearity && strcmp(o.nonlinearity, "tanh") == 0);
    o.num_layers = 2;
    o.bidirectional = true;
    ct_module *m = ct_nn_lstm(3, 7, &o);
    CHECK(m && strcmp(ct_nn_type(m), "LSTM") == 0);
    static const char *const names[] = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
        "weight_hh_l0_reverse", "bias_ih_l0_reverse",   "bias_hh_l0_reverse",       "weight_ih_l1",
        "weight_hh_l1",         "bias_ih_l1",           "bias_hh_l1", "weight_ih_l1_reverse",
        "weight_hh_l1_reverse", "bias_ih_l1_reverse",   "bias_hh_l1_reverse"};
    CHECK(ct_nn_num_params(m) == 16 && ct_nn_state_size(m) == 16);
    for (size_t i = 0; i < 16 && i < ct_nn_num_params(m); i++) {
        const char *name = NULL;
        ct_tensor *p = ct_nn_param_at(m, i, &name);
        CHECK(name && strcmp(name, names[i]) == 0);
        CHECK(ct_requires_grad(p) && ct_is_leaf(p));
    }
    CHECK(has_shape(ct_nn_get(m, "weight_ih_l0"), CT_SHAPE(28, 3)));
    CHECK(has_shape(ct_nn_get(m, "weight_hh_l0_reverse"), CT_SHAPE(28, 7)));
    CHECK(has_shape(ct_nn_get(m, "weight_ih_l1"), CT_SHAPE(28, 14)));
    CHECK(has_shape(ct_nn_get(m, "bias_hh_l1_reverse"), CT_SHAPE(28)));
    /* every value within U(-1/sqrt(7), 1/sqrt(7)) */
    double hi = 0;
    CHECK_OK(ct_item(ct_max(ct_abs(ct_nn_get(m, "weight_ih_l1"))), &hi));
    CHECK(hi > 0 && hi <= 1 / sqrt(7.0));
    ct_nn_free(m);

    o = ct_rnn_defaults();
    o.bias = false;
    o.num_layers = 3;
    m = ct_nn_gru(2, 4, &o);
    CHECK(m && strcmp(ct_nn_type(m), "GRU") == 0 && ct_nn_num_params(m) == 6);
    CHECK(has_shape(ct_nn_get(m, "weight_ih_l2"), CT_SHAPE(12, 4)));
    ct_nn_free(m);

    m = ct_nn_rnn(2, 4, NULL);
    CHECK(m && strcmp(ct_nn_type(m), "RNN") == 0 && ct_nn_num_params(m) == 4);
    CHECK(has_shape(ct_nn_get(m, "weight_hh_l0"), CT_SHAPE(4, 4)));
    ct_nn_free(m);
}

static void test_constructor_errors(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.nonlinearity = "sigmoid";
    CHECK(ct_nn_rnn(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_rnn: Unknown nonlinearity 'sigmoid'. Select from 'tanh' or 'relu'.");
    o.nonlinearity = "relu";
    CHECK(ct_nn_lstm(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_lstm: nonlinearity is nn.RNN's option only (LSTM has none), got 'relu'");
    CHECK(ct_nn_gru(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_gru: nonlinearity is nn.RNN's option only (GRU has none)");
    o.nonlinearity = NULL; /* the default */
    ct_module *m = ct_nn_rnn(4, 5, &o);
    CHECK(m != NULL);
    ct_nn_free(m);

    o = ct_rnn_defaults();
    o.dropout = -0.1;
    CHECK(ct_nn_lstm(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "dropout should be a number in range [0, 1]");
    o.dropout = NAN;
    CHECK(ct_nn_gru(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "dropout should be a number in range [0, 1]");
    o.dropout = 1.0; /* allowed, as in Python */
    o.num_layers = 2;
    m = ct_nn_gru(4, 5, &o);
    CHECK(m != NULL);
    ct_nn_free(m);
    o = ct_rnn_defaults();
    o.num_layers = -1;
    CHECK(ct_nn_rnn(4, 5, &o) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_rnn: num_layers must be greater than zero");
    CHECK(ct_nn_lstm(-3, 5, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_lstm: input_size must be greater than zero");
    CHECK(ct_nn_lstm(3, 0, NULL) == NULL);
    CHECK_ERR(CT_EINVAL, "ct_nn_lstm: hidden_size must be greater than zero");
}

/* ---- forward ------------------------------------------------------------------------ */

static void test_binding(void) {
    ct_manual_seed(0);
    ct_module *lstm = ct_nn_lstm(4, 5, NULL), *gru = ct_nn_gru(4, 5, NULL);
    ct_tensor *x = ct_keep(ct_randn(CT_SHAPE(6, 3, 4), NULL));
    ct_tensor *h = ct_keep(ct_randn(CT_SHAPE(1, 3, 5), NULL)), *c = ct_keep(ct_randn(CT_SHAPE(1, 3, 5), NULL));
    ct_value *xv = tensor_value(ct_alias(x)), *hcv = tuple(2, tensor_value(ct_alias(h)), tensor_value(ct_alias(c)), NULL);

    /* input and hx by position, by keyword, hx None: the same results */
    ct_value *y1 = call_ok(lstm, tuple(2, ct_value_copy(xv, false), ct_value_copy(hcv, false), NULL), NULL);
    ct_value *kw = ct_value_dict();
    ct_value_dict_set(kw, "hx", ct_value_copy(hcv, false));
    ct_value_dict_set(kw, "input", ct_value_copy(xv, false));
    ct_value *y2 = call_ok(lstm, NULL, kw);
    CHECK(y1 && y2 && ct_value_equal(y1, y2));
    CHECK(y1 && ct_value_kind_of(y1) == CT_VALUE_TUPLE && ct_value_len(y1) == 2);
    CHECK(y1 && ct_value_kind_of(ct_value_list_get(y1, 1)) == CT_VALUE_TUPLE);
    CHECK(has_shape(at(y1, 0, -1), CT_SHAPE(6, 3, 5)) && has_shape(at(y1, 1, 1), CT_SHAPE(1, 3, 5)));
    /* the last step's output is h_n */
    CHECK(y1 && ct_test_same(ct_select(at(y1, 0, -1), 0, 5), ct_select(at(y1, 1, 0), 0, 0)));
    ct_value *z1 = call_ok(lstm, tuple(2, ct_value_copy(xv, false), ct_value_none(), NULL), NULL);
    ct_value *args_list = ct_value_list();
    ct_value_list_append(args_list, ct_value_copy(xv, false));
    ct_value *z2 = call_ok(lstm, args_list, NULL);
    kw = ct_value_dict();
    ct_value_dict_set(kw, "hx", ct_value_none());
    ct_value *z3 = call_ok(lstm, tuple(1, ct_value_copy(xv, false), NULL, NULL), kw);
    CHECK(z1 && z2 && z3 && ct_value_equal(z1, z2) && ct_value_equal(z1, z3));
    CHECK(z1 && !ct_value_equal(z1, y1));
    /* hx of zeros given is hx None */
    ct_value *z4 = call_ok(lstm, tuple(2, ct_value_copy(xv, false), tuple(2, zeros3(1, 3, 5), zeros3(1, 3, 5), NULL), NULL),
                           NULL);
    CHECK(z1 && z4 && ct_value_equal(z1, z4));
    ct_value_free(y1), ct_value_free(y2), ct_value_free(z1), ct_value_free(z2), ct_value_free(z3), ct_value_free(z4);

    /* what Python refuses */
    CALL_FAILS(lstm, tuple(3, ct_value_copy(xv, false), ct_value_copy(hcv, false), ct_value_none()), NULL, CT_EINVAL,
               "LSTM: forward() takes from 2 to 3 positional arguments but 4 were given");
    kw = ct_value_dict();
    ct_value_dict_set(kw, "h0", ct_value_copy(hcv, false));
    CALL_FAILS(lstm, tuple(1, ct_value_copy(xv, false), NULL, NULL), kw, CT_EINVAL,
               "LSTM: forward() got an unexpected keyword argument 'h0'");
    kw = ct_value_dict();
    ct_value_dict_set(kw, "hx", ct_value_copy(hcv, false));
    CALL_FAILS(lstm, tuple(2, ct_value_copy(xv, false), ct_value_copy(hcv, false), NULL), kw, CT_EINVAL,
               "LSTM: forward() got multiple values for argument 'hx'");
    kw = ct_value_dict();
    ct_value_dict_set(kw, "input", ct_value_copy(xv, false));
    CALL_FAILS(gru, tuple(1, ct_value_copy(xv, false), NULL, NULL), kw, CT_EINVAL,
               "GRU: forward() got multiple values for argument 'input'");
    CALL_FAILS(gru, NULL, NULL, CT_EINVAL, "GRU: forward() missing 1 required positional argument: 'input'");
    CALL_FAILS(gru, tuple(1, ct_value_none(), NULL, NULL), NULL, CT_EINVAL, "GRU: input must be a tensor, got a none");
    CALL_FAILS(lstm, tuple(2, ct_value_copy(xv, false), tensor_value(ct_alias(h)), NULL), NULL, CT_EINVAL,
               "LSTM: hx must be a tuple (h_0, c_0) of two tensors or None, got a tensor");
    CALL_FAILS(lstm, tuple(2, ct_value_copy(xv, false), tuple(1, tensor_value(ct_alias(h)), NULL, NULL), NULL), NULL,
               CT_EINVAL, "LSTM: hx must be a tuple (h_0, c_0) of two tensors or None, got a tuple of other values");
    CALL_FAILS(lstm, tuple(2, ct_value_copy(xv, false), tuple(2, tensor_value(ct_alias(h)), ct_value_int(0), NULL), NULL),
               NULL, CT_EINVAL, "LSTM: hx must be a tuple (h_0, c_0)");
    CALL_FAILS(gru, tuple(2, ct_value_copy(xv, false), ct_value_copy(hcv, false), NULL), NULL, CT_EINVAL,
               "GRU: hx must be a tensor or None, got a tuple");

    /* ct_nn_forward needs a tensor back */
    CHECK(ct_nn_forward(gru, x) == NULL);
    CHECK_ERR(CT_EINVAL, "use ct_nn_call");

    ct_value_free(xv);
    ct_value_free(hcv);
    ct_tensor_free(x), ct_tensor_free(h), ct_tensor_free(c);
    ct_nn_free(lstm);
    ct_nn_free(gru);
}

static void test_shape_errors(void) {
    ct_module *lstm = ct_nn_lstm(4, 5, NULL), *rnn = ct_nn_rnn(4, 5, NULL), *gru = ct_nn_gru(4, 5, NULL);
    CALL_FAILS(lstm, tuple(1, randn3(6, 3, 5), NULL, NULL), NULL, CT_ESHAPE,
               "LSTM: input.size(-1) must be equal to input_size. Expected 4, got 5");
    CALL_FAILS(rnn, tuple(1, tensor_value(ct_randn(CT_SHAPE(1, 6, 3, 4), NULL)), NULL, NULL), NULL, CT_ESHAPE,
               "RNN: Expected input to be 2D or 3D, got 4D tensor instead");
    CALL_FAILS(gru, tuple(1, tensor_value(ct_scalar_tensor(1, NULL)), NULL, NULL), NULL, CT_ESHAPE,
               "GRU: Expected input to be 2D or 3D, got 0D instead");
    CALL_FAILS(gru, tuple(2, randn3(6, 3, 4), randn3(2, 3, 5), NULL), NULL, CT_ESHAPE,
               "GRU: Expected hidden size (1, 3, 5), got [2, 3, 5]");
    CALL_FAILS(lstm, tuple(2, randn3(6, 3, 4), tuple(2, randn3(1, 3, 5), randn3(1, 3, 4), NULL), NULL), NULL,
               CT_ESHAPE, "LSTM: Expected hidden[1] size (1, 3, 5), got [1, 3, 4]");
    CALL_FAILS(lstm, tuple(2, randn3(6, 3, 4), tuple(2, randn3(1, 3, 5), tensor_value(ct_randn(CT_SHAPE(3, 5), NULL)), NULL),
                           NULL),
               NULL, CT_ESHAPE, "LSTM: For batched 3-D input, hx and cx should also be 3-D but got (3-D, 2-D) tensors");
    CALL_FAILS(rnn, tuple(1, tensor_value(ct_randn(CT_SHAPE(6, 3, 4), &(ct_topts){.dtype = CT_F64})), NULL, NULL), NULL,
               CT_EDTYPE, "RNN: input dtype (torch.float64) does not match weight dtype (torch.float32)");
    CALL_FAILS(rnn, tuple(1, tensor_value(ct_zeros(CT_SHAPE(6, 3, 4), &(ct_topts){.dtype = CT_I64})), NULL, NULL), NULL,
               CT_EDTYPE, "RNN: input dtype (torch.int64)");
    /* hx of another dtype: ATen's own message, after the layer's name */
    ct_value *args = tuple(2, randn3(6, 3, 4), tensor_value(ct_randn(CT_SHAPE(1, 3, 5), &(ct_topts){.dtype = CT_F64})),
                           NULL);
    CHECK(ct_nn_call(gru, args, NULL) == NULL);
    CHECK(strncmp(ct_last_error(), "GRU: ", 5) == 0 && strstr(ct_last_error(), "must have the same dtype") != NULL);
    ct_clear_error();
    ct_value_free(args);
    ct_nn_free(lstm), ct_nn_free(rnn), ct_nn_free(gru);
}

/* Dropout between layers in training only; eval twice gives the same. */
static void test_dropout_modes(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 2;
    o.dropout = 0.5;
    ct_manual_seed(3);
    ct_module *m = ct_nn_gru(4, 5, &o);
    ct_value *x = tuple(1, randn3(6, 3, 4), NULL, NULL);
    ct_value *a = ct_nn_call(m, x, NULL), *b = ct_nn_call(m, x, NULL);
    CHECK(a && b && !ct_value_equal(a, b));
    ct_manual_seed(9);
    ct_value *c = ct_nn_call(m, x, NULL);
    ct_manual_seed(9);
    ct_value *d = ct_nn_call(m, x, NULL);
    CHECK(c && d && ct_value_equal(c, d));
    ct_nn_train(m, false);
    CHECK(!ct_nn_is_training(m));
    ct_value *e = ct_nn_call(m, x, NULL), *f = ct_nn_call(m, x, NULL);
    CHECK(e && f && ct_value_equal(e, f) && !ct_value_equal(a, e));
    ct_value_free(a), ct_value_free(b), ct_value_free(c), ct_value_free(d), ct_value_free(e), ct_value_free(f);
    ct_value_free(x);
    ct_nn_free(m);
}

/* load_state_dict between layers of the same shape; refused otherwise. */
static void test_state_dict(void) {
    ct_manual_seed(1);
    ct_module *a = ct_nn_lstm(4, 5, NULL);
    ct_manual_seed(2);
    ct_module *b = ct_nn_lstm(4, 5, NULL);
    ct_value *x = tuple(1, randn3(6, 3, 4), NULL, NULL);
    ct_value *ya = ct_nn_call(a, x, NULL), *yb = ct_nn_call(b, x, NULL);
    CHECK(ya && yb && !ct_value_equal(ya, yb));
    ct_value *sd = ct_nn_state_dict(a);
    CHECK_OK(ct_nn_load_state_dict(b, sd, true));
    ct_value *yb2 = ct_nn_call(b, x, NULL);
    CHECK(ya && yb2 && ct_value_equal(ya, yb2));

    ct_module *g = ct_nn_gru(4, 5, NULL);
    CHECK(ct_nn_load_state_dict(g, sd, true) == CT_ESHAPE);
    ct_clear_error();
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 2;
    ct_module *two = ct_nn_lstm(4, 5, &o);
    CHECK(ct_nn_load_state_dict(two, sd, true) == CT_EFORMAT);
    CHECK_ERR(CT_EFORMAT, "weight_ih_l1");
    CHECK_OK(ct_nn_load_state_dict(two, sd, false));

    /* float64: the model and its input */
    CHECK_OK(ct_nn_to_dtype(b, CT_F64));
    ct_value *x64 = tuple(1, tensor_value(ct_to_dtype(ct_value_get_tensor(ct_value_list_get(x, 0)), CT_F64)), NULL, NULL);
    ct_value *y64 = ct_nn_call(b, x64, NULL);
    CHECK(y64 && ct_dtype_of(at(y64, 0, -1)) == CT_F64 && ct_dtype_of(at(y64, 1, 1)) == CT_F64);
    double dev = 1;
    CHECK_OK(ct_item(ct_max(ct_abs(ct_sub(ct_to_dtype(at(y64, 0, -1), CT_F32), at(ya, 0, -1)))), &dev));
    CHECK(dev < 1e-6);
    CALL_FAILS(b, ct_value_copy(x, false), NULL, CT_EDTYPE, "LSTM: input dtype (torch.float32) does not match");

    ct_value_free(sd), ct_value_free(ya), ct_value_free(yb), ct_value_free(yb2), ct_value_free(y64);
    ct_value_free(x), ct_value_free(x64);
    ct_nn_free(a), ct_nn_free(b), ct_nn_free(g), ct_nn_free(two);
}

/* Unbatched and batch_first: outputs without the batch dim / batch first. */
static void test_layouts(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.batch_first = true;
    o.bidirectional = true;
    ct_manual_seed(4);
    ct_module *m = ct_nn_rnn(4, 5, &o);
    ct_value *y = call_ok(m, tuple(1, randn3(3, 6, 4), NULL, NULL), NULL);
    CHECK(has_shape(at(y, 0, -1), CT_SHAPE(3, 6, 10)) && has_shape(at(y, 1, -1), CT_SHAPE(2, 3, 5)));
    ct_value_free(y);
    y = call_ok(m, tuple(2, tensor_value(ct_randn(CT_SHAPE(6, 4), NULL)), tensor_value(ct_randn(CT_SHAPE(2, 5), NULL)),
                         NULL),
                NULL);
    CHECK(has_shape(at(y, 0, -1), CT_SHAPE(6, 10)) && has_shape(at(y, 1, -1), CT_SHAPE(2, 5)));
    ct_value_free(y);
    CALL_FAILS(m, tuple(2, tensor_value(ct_randn(CT_SHAPE(6, 4), NULL)), randn3(2, 1, 5), NULL), NULL, CT_ESHAPE,
               "RNN: For unbatched 2-D input, hx should also be 2-D but got 3-D tensor");
    ct_nn_free(m);
}

/* A forward, failed or not, leaves no tensor handle behind. */
static void test_no_leaks(void) {
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 2;
    o.dropout = 0.2;
    ct_module *m = ct_nn_lstm(4, 5, &o);
    ct_value *good = tuple(1, randn3(6, 3, 4), NULL, NULL);
    ct_value *bad = tuple(2, randn3(6, 3, 4), tuple(2, randn3(2, 3, 5), randn3(1, 3, 5), NULL), NULL);
    size_t before = ct_tensor_live_count();
    for (int i = 0; i < 3; i++) {
        ct_value *y = ct_nn_call(m, good, NULL);
        CHECK(y != NULL);
        ct_value_free(y);
        CHECK(ct_nn_call(m, bad, NULL) == NULL);
        CHECK_ERR(CT_ESHAPE, "LSTM: Expected hidden[1] size (2, 3, 5), got [1, 3, 5]");
    }
    CHECK(ct_tensor_live_count() == before);
    ct_value_free(good);
    ct_value_free(bad);
    ct_nn_free(m);
}

int main(void) {
    ct_set_num_threads(1);
    ct_scope *s = ct_scope_begin();
    test_parameters();
    test_constructor_errors();
    test_binding();
    test_shape_errors();
    test_dropout_modes();
    test_state_dict();
    test_layouts();
    ct_scope_end(s);
    test_no_leaks();
    return ct_test_result("nn_rnn_errors");
}
