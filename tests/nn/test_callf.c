/* tests/nn/test_callf.c — ct_nn_callf and ct_nn_forwardf: a value module
 * called in one line with its arguments after a format, as Python writes
 * the call.
 *
 *   - TransformerEncoder(x, src_key_padding_mask=pad), MultiheadAttention(q,
 *     k, v, need_weights=False, attn_mask=m) and LSTM(x, (h_0, c_0)) give
 *     exactly (bit for bit) what ct_nn_call gives with the tuple and dict
 *     built by hand, and the keywords reached the module (the results
 *     differ without them);
 *   - every code arrives as its value: int64_t, double, bool, string, None,
 *     a value tree, a tensor that is the caller's (the same memory, written
 *     in place by the module and seen by the caller);
 *   - ct_nn_forwardf's tensor belongs to the current scope; a tuple result
 *     is CT_EINVAL naming the module;
 *   - each malformed format is CT_EINVAL quoting it with the argument and
 *     the character; a NULL module, tensor or value keeps the first error.
 * Run under ASan (build-asan) it also shows that nothing leaks and nothing
 * is freed twice. */
#include <stdlib.h>

#include "ct_test.h"

static ct_value *tv(const ct_tensor *t) { return ct_value_tensor(ct_alias(t)); }

/* The i-th element of a tuple result as a tensor (borrowed). */
static ct_tensor *item(const ct_value *r, size_t i) { return ct_value_get_tensor(ct_value_list_get(r, i)); }

/* ---- the layers of nn_sequence.h ------------------------------------------------------------ */

static void transformer_encoder(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(1);
    ct_transformer_opts o = ct_transformer_defaults();
    o.dim_feedforward = 32;
    ct_module *enc = ct_nn_transformer_encoder(16, 4, 2, true, &o);
    ct_nn_train(enc, false); /* no dropout: two calls compare bit for bit */
    ct_tensor *x = ct_randn(CT_SHAPE(6, 3, 16), NULL);
    /* [N, S]: true pads; the last two positions of batch 0, the last of batch 2 */
    bool pad_data[3][6] = {{0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 1}};
    ct_tensor *pad = ct_from_data(pad_data, CT_SHAPE(3, 6), CT_BOOL);

    ct_tensor *y = ct_nn_forwardf(enc, "t, src_key_padding_mask=t", x, pad);
    CHECK(y && ct_ndim(y) == 3 && ct_size(y, 0) == 6 && ct_size(y, 2) == 16);

    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value_list_append(args, tv(x));
    ct_value_dict_set(kwargs, "src_key_padding_mask", tv(pad));
    ct_value *ref = ct_nn_call(enc, args, kwargs);
    CHECK(ref && ct_test_same(y, ct_value_get_tensor(ref)));
    ct_value_free(args);
    ct_value_free(kwargs);
    ct_value_free(ref);

    /* the mask reached the encoder: without it batch 0 comes out otherwise */
    ct_tensor *unmasked = ct_nn_forwardf(enc, "t", x);
    CHECK(unmasked && !ct_test_same(y, unmasked));
    /* ... and the same as ct_nn_forward's */
    CHECK(ct_test_same(unmasked, ct_nn_forward(enc, x)));
    /* blanks anywhere between the parts, None for a mask */
    CHECK(ct_test_same(unmasked, ct_nn_forwardf(enc, "  t ,mask = n,  src_key_padding_mask=n ", x)));

    /* the result is a handle of the current scope, as ct_nn_forward's */
    size_t before = ct_scope_size(s);
    ct_tensor *z = ct_nn_forwardf(enc, "t, src_key_padding_mask=t", x, pad);
    CHECK(z && ct_scope_size(s) > before);
    size_t with_z = ct_scope_size(s);
    CHECK(ct_keep(z) == z && ct_scope_size(s) == with_z - 1);
    ct_tensor_free(z);

    ct_nn_free(enc);
    ct_scope_end(s);
}

static void multihead_attention(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(2);
    ct_module *mha = ct_nn_multihead_attention(16, 4, NULL);
    ct_tensor *q = ct_randn(CT_SHAPE(5, 2, 16), NULL), *k = ct_randn(CT_SHAPE(7, 2, 16), NULL);
    ct_tensor *v = ct_randn(CT_SHAPE(7, 2, 16), NULL);
    ct_tensor *mask = ct_randn(CT_SHAPE(5, 7), NULL); /* a float attn_mask, added to the scores */

    ct_value *r = ct_nn_callf(mha, "t, t, t, need_weights=b, attn_mask=t", q, k, v, false, mask);
    CHECK(r && ct_value_kind_of(r) == CT_VALUE_TUPLE && ct_value_len(r) == 2);
    /* need_weights=False arrived: no weights */
    CHECK(r && ct_value_kind_of(ct_value_list_get(r, 1)) == CT_VALUE_NONE);

    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value_list_append(args, tv(q));
    ct_value_list_append(args, tv(k));
    ct_value_list_append(args, tv(v));
    ct_value_dict_set(kwargs, "need_weights", ct_value_bool(false));
    ct_value_dict_set(kwargs, "attn_mask", tv(mask));
    ct_value *ref = ct_nn_call(mha, args, kwargs);
    CHECK(ref && r && ct_value_equal(r, ref));
    ct_value_free(args);
    ct_value_free(kwargs);
    ct_value_free(ref);

    /* need_weights true (b as an int), the mask left out: weights, another output */
    ct_value *w = ct_nn_callf(mha, "t, t, t, need_weights=b", q, k, v, 1);
    CHECK(w && ct_value_kind_of(ct_value_list_get(w, 1)) == CT_VALUE_TENSOR);
    CHECK(w && r && !ct_test_same(item(w, 0), item(r, 0)));
    /* the same by position: key_padding_mask None, need_weights, attn_mask */
    ct_value *pos = ct_nn_callf(mha, "t, t, t, n, b, t", q, k, v, false, mask);
    CHECK(pos && r && ct_value_equal(pos, r));
    ct_value_free(w);
    ct_value_free(pos);
    ct_value_free(r);

    /* the module's own checks still speak */
    CHECK(!ct_nn_callf(mha, "t, t, t, need_weights=b, attn_mask=t", q, k, v, false, ct_randn(CT_SHAPE(4, 7), NULL)));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention");
    ct_nn_free(mha);
    ct_scope_end(s);
}

static void lstm(void) {
    ct_scope *s = ct_scope_begin();
    ct_manual_seed(3);
    ct_rnn_opts o = ct_rnn_defaults();
    o.num_layers = 2;
    ct_module *m = ct_nn_lstm(4, 8, &o);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 3, 4), NULL);
    ct_value *hx = ct_value_tuple(); /* (h_0, c_0) */
    ct_value_list_append(hx, ct_value_tensor(ct_randn(CT_SHAPE(2, 3, 8), NULL)));
    ct_value_list_append(hx, ct_value_tensor(ct_randn(CT_SHAPE(2, 3, 8), NULL)));

    ct_value *r = ct_nn_callf(m, "t, v", x, hx);
    ct_value *by_name = ct_nn_callf(m, "t, hx=v", x, hx);
    ct_value *args = ct_value_tuple();
    ct_value_list_append(args, tv(x));
    ct_value_list_append(args, ct_value_copy(hx, false));
    ct_value *ref = ct_nn_call(m, args, NULL);
    CHECK(r && ref && ct_value_equal(r, ref)); /* (output, (h_n, c_n)) */
    CHECK(by_name && ref && ct_value_equal(by_name, ref));
    /* hx reached the LSTM: zeros (None) give another output */
    ct_value *zeros = ct_nn_callf(m, "t, n", x);
    CHECK(zeros && r && !ct_test_same(item(zeros, 0), item(r, 0)));
    /* hx is still the caller's, whole */
    CHECK(ct_value_len(hx) == 2 && ct_value_get_tensor(ct_value_list_get(hx, 1)));

    /* a tuple is no tensor: ct_nn_forwardf says so, naming the module */
    CHECK(!ct_nn_forwardf(m, "t, v", x, hx));
    CHECK_ERR(CT_EINVAL, "LSTM");
    CHECK(!ct_nn_forwardf(m, "t", x));
    CHECK_ERR(CT_EINVAL, "ct_nn_forwardf: forward of LSTM returned a tuple, not a tensor: use ct_nn_callf");

    ct_value_free(args);
    ct_value_free(ref);
    ct_value_free(r);
    ct_value_free(by_name);
    ct_value_free(zeros);
    ct_value_free(hx);
    ct_nn_free(m);
    ct_scope_end(s);
}

/* ---- every code --------------------------------------------------------------------------- */

/* forward(*args, **kwargs) -> (args, kwargs), and adds 1 in place to a
 * first argument that is a tensor: what the module was given, seen from
 * outside. */
static ct_value *echo_forward(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    (void)self;
    ct_tensor *first = ct_value_len(args) ? ct_value_get_tensor(ct_value_list_get(args, 0)) : NULL;
    if (first && ct_add_scalar_(first, 1.0) != 0) return NULL;
    ct_value *r = ct_value_tuple();
    ct_value_list_append(r, ct_value_copy(args, false));
    ct_value_list_append(r, ct_value_copy(kwargs, false));
    return r;
}

static void codes(void) {
    ct_scope *s = ct_scope_begin();
    ct_module *echo = ct_nn_module_value("Echo", echo_forward, NULL, NULL);
    ct_tensor *x = ct_zeros(CT_SHAPE(3), NULL);
    ct_value *tree = ct_value_dict();
    ct_value_dict_set(tree, "lr", ct_value_float(0.5));
    const int64_t big = (int64_t)1 << 40;

    ct_value *r = ct_nn_callf(echo, "t, i, f, b, s, n, v, count=i, scale=f, flag=b, name=s, none=n, tree=v", x, big,
                              0.25, true, "relu", tree, (int64_t)-7, 1.5, false, "gelu", tree);
    CHECK(r != NULL);
    const ct_value *args = ct_value_list_get(r, 0), *kw = ct_value_list_get(r, 1);
    CHECK(ct_value_kind_of(args) == CT_VALUE_TUPLE && ct_value_len(args) == 7);
    CHECK(ct_value_kind_of(kw) == CT_VALUE_DICT && ct_value_len(kw) == 6);
    int64_t i = 0;
    double f = 0;
    bool b = false;
    /* t: the caller's tensor itself, the same memory, written in place */
    ct_tensor *seen = ct_value_get_tensor(ct_value_list_get(args, 0));
    CHECK(seen && ct_data_ptr(seen) == ct_data_ptr(x));
    double sum = 0;
    CHECK(ct_item(ct_sum(x), &sum) == 0 && sum == 3.0);
    CHECK(ct_value_get_int(ct_value_list_get(args, 1), &i) == 0 && i == big);
    CHECK(ct_value_kind_of(ct_value_list_get(args, 2)) == CT_VALUE_FLOAT);
    CHECK(ct_value_get_float(ct_value_list_get(args, 2), &f) == 0 && f == 0.25);
    CHECK(ct_value_get_bool(ct_value_list_get(args, 3), &b) == 0 && b);
    CHECK(ct_value_get_str(ct_value_list_get(args, 4)) && !strcmp(ct_value_get_str(ct_value_list_get(args, 4)), "relu"));
    CHECK(ct_value_kind_of(ct_value_list_get(args, 5)) == CT_VALUE_NONE);
    CHECK(ct_value_equal(ct_value_list_get(args, 6), tree));
    /* keywords in the format's order */
    const char *key = NULL;
    int64_t ik;
    CHECK(ct_value_dict_at(kw, 0, &key, &ik) && key && !strcmp(key, "count"));
    CHECK(ct_value_dict_at(kw, 5, &key, &ik) && key && !strcmp(key, "tree"));
    CHECK(ct_value_get_int(ct_value_dict_get(kw, "count"), &i) == 0 && i == -7);
    CHECK(ct_value_get_float(ct_value_dict_get(kw, "scale"), &f) == 0 && f == 1.5);
    CHECK(ct_value_get_bool(ct_value_dict_get(kw, "flag"), &b) == 0 && !b);
    CHECK(!strcmp(ct_value_get_str(ct_value_dict_get(kw, "name")) ? ct_value_get_str(ct_value_dict_get(kw, "name")) : "",
                  "gelu"));
    CHECK(ct_value_kind_of(ct_value_dict_get(kw, "none")) == CT_VALUE_NONE);
    CHECK(ct_value_equal(ct_value_dict_get(kw, "tree"), tree));
    ct_value_free(r);

    /* no arguments at all */
    r = ct_nn_callf(echo, "");
    CHECK(r && ct_value_len(ct_value_list_get(r, 0)) == 0 && ct_value_len(ct_value_list_get(r, 1)) == 0);
    ct_value_free(r);

    /* a tensor module through ct_nn_forwardf: one tensor, as ct_nn_forward */
    ct_module *lin = ct_nn_linear(3, 2, true);
    ct_tensor *y = ct_nn_forwardf(lin, "t", x);
    CHECK(y && ct_test_same(y, ct_nn_forward(lin, x)));
    CHECK(!ct_nn_forwardf(lin, "t, t", x, x));
    CHECK_ERR(CT_EINVAL, "takes one tensor and no keyword arguments");

    ct_value_free(tree);
    ct_nn_free(lin);
    ct_nn_free(echo);
    ct_scope_end(s);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void format_errors(void) {
    ct_scope *s = ct_scope_begin();
    ct_module *echo = ct_nn_module_value("Echo", echo_forward, NULL, NULL);
    ct_tensor *x = ct_zeros(CT_SHAPE(2), NULL);
    static const struct {
        const char *format, *needle;
    } bad[] = {
        {"t, q", "format \"t, q\": an unknown type code 'q' at character 4 (argument 2)"},
        {"tt", "format \"tt\": an unknown type code 'tt' at character 1 (argument 1)"},
        {"mask=t, t", "format \"mask=t, t\": a positional argument after a keyword argument at character 9 (argument 2)"},
        {"t, a=t, a=t", "format \"t, a=t, a=t\": a duplicate keyword 'a' at character 9 (argument 3)"},
        {"t, =t", "format \"t, =t\": an empty keyword name at character 4 (argument 2)"},
        {"t,,t", "format \"t,,t\": an empty argument at character 3 (argument 2)"},
        {"t,", "format \"t,\": an empty argument at character 3 (argument 2)"},
        {"t, 2x=t", "format \"t, 2x=t\": keyword '2x' is not a Python identifier at character 4 (argument 2)"},
        {"t, a b=t", "keyword 'a b' is not a Python identifier at character 5 (argument 2)"},
        {"t, a=", "format \"t, a=\": keyword 'a' has no type code at character 6 (argument 2)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(!ct_nn_callf(echo, bad[i].format, x, x, x));
        CHECK_ERR(CT_EINVAL, bad[i].needle);
        CHECK(!ct_nn_forwardf(echo, bad[i].format, x, x, x));
        CHECK_ERR(CT_EINVAL, "ct_nn_forwardf: format \"");
    }
    CHECK(!ct_nn_callf(echo, NULL));
    CHECK_ERR(CT_EINVAL, "argument 'format' is NULL");
    /* the message lists the codes */
    CHECK(!ct_nn_callf(echo, "x", x));
    CHECK_ERR(CT_EINVAL, "codes t (tensor), i (int64_t), f (double), b (bool), s (string), n (None), v (value)");
    /* a malformed format took no argument: x is untouched */
    double sum = -1;
    CHECK(ct_item(ct_sum(x), &sum) == 0 && sum == 0.0);

    /* NULL-propagation: the first failure is kept */
    ct_set_error(CT_ESHAPE, "the first failure");
    CHECK(!ct_nn_callf(NULL, "t", x));
    CHECK_ERR(CT_ESHAPE, "the first failure");
    CHECK(!ct_nn_forwardf(NULL, "t", x));
    CHECK(ct_last_code() == CT_EINVAL && strstr(ct_last_error(), "argument 'm' is NULL"));
    ct_clear_error();
    ct_set_error(CT_EDTYPE, "an earlier op");
    CHECK(!ct_nn_forwardf(echo, "t", NULL));
    CHECK_ERR(CT_EDTYPE, "an earlier op");
    ct_set_error(CT_EDTYPE, "an earlier op");
    CHECK(!ct_nn_callf(echo, "t, hx=v", x, NULL));
    CHECK_ERR(CT_EDTYPE, "an earlier op");
    CHECK(!ct_nn_callf(echo, "t, t", x, NULL));
    CHECK_ERR(CT_EINVAL, "ct_nn_callf: argument 'args[1]' is NULL");
    CHECK(!ct_nn_callf(echo, "mask=t", NULL));
    CHECK_ERR(CT_EINVAL, "argument 'mask' is NULL");
    CHECK(!ct_nn_callf(echo, "hx=v", NULL));
    CHECK_ERR(CT_EINVAL, "argument 'hx' (v) is NULL");
    CHECK(!ct_nn_callf(echo, "name=s", NULL));
    CHECK_ERR(CT_EINVAL, "argument 'name' (s) is NULL: pass None with n");
    ct_nn_free(echo);
    ct_scope_end(s);
}

int main(void) {
    transformer_encoder();
    multihead_attention();
    lstm();
    codes();
    format_errors();
    return ct_test_result("nn_callf");
}
