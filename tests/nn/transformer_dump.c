/* tests/nn/transformer_dump.c — the C half of test_transformer_parity.py:
 * every case of transformer_cases.json built, run and saved for Python to
 * rebuild and compare.
 *
 *     transformer_dump CASES.json OUT.pth
 *
 * A case is {"name", "module": "MultiheadAttention" | "TransformerEncoderLayer"
 * | "TransformerDecoderLayer" | "TransformerEncoder" | "TransformerDecoder" |
 * "Transformer", "size": [embed_dim or d_model, heads (, num_layers (,
 * num_decoder_layers))], "norm": bool (stacks), "opts": {fields of
 * ct_mha_opts or ct_transformer_opts}, "inputs": {NAME: SPEC}, "args":
 * [NAME...], "kwargs": {KEY: NAME, true, false or null}, "autocast": "bf16"
 * or "fp16" (optional: the calls under the CPU's autocast)}. Input specs:
 *   {"randn": SHAPE}         float32, requires grad
 *   {"pad": [N, S]}          key padding mask: row b masks its last b + 1
 *                            positions (bool; with "float": 0 / -inf;
 *                            with "squeeze": the first row only, 1-D)
 *   {"causal": L}            [L, L], true (or -inf with "float") above
 *                            the diagonal
 *   {"additive": SHAPE}      a float mask, randn
 *   {"random_bool": SHAPE}   rand > 0.6, never masking key 0
 *
 * The module is built after ct_manual_seed(1000 + case index), the inputs
 * drawn next; forward in training runs after ct_manual_seed(7), then the
 * backward of sum over the floating results t of
 * (t * cos(arange(numel)).view(t's shape)).sum(); then forward in eval
 * under no_grad.
 *
 * OUT.pth: {NAME: {"init": the state dict before anything ran, "inputs":
 * {NAME: tensor}, "train": the result, "input_grads": {NAME: grad},
 * "param_grads": {NAME: grad or None}, "eval": the result}}. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "common/cases.h"

static void die(const char *what) {
    fprintf(stderr, "transformer_dump: %s: %s\n", what, ct_last_error());
    exit(1);
}

static int shape_of(const json_t *j, int64_t *shape) {
    size_t i;
    json_t *d;
    json_array_foreach(j, i, d) shape[i] = json_integer_value(d);
    return (int)json_array_size(j);
}

static int64_t int_at(const json_t *arr, size_t i) { return json_integer_value(json_array_get(arr, i)); }

/* ---- the module ------------------------------------------------------------------------- */

static ct_mha_opts mha_opts(const json_t *o) {
    ct_mha_opts m = ct_mha_defaults();
    json_t *v;
    if ((v = json_object_get(o, "dropout"))) m.dropout = json_number_value(v);
    if ((v = json_object_get(o, "bias"))) m.bias = json_is_true(v);
    if ((v = json_object_get(o, "kdim"))) m.kdim = json_integer_value(v);
    if ((v = json_object_get(o, "vdim"))) m.vdim = json_integer_value(v);
    if ((v = json_object_get(o, "batch_first"))) m.batch_first = json_is_true(v);
    return m;
}

static ct_transformer_opts transformer_opts(const json_t *o) {
    ct_transformer_opts t = ct_transformer_defaults();
    json_t *v;
    if ((v = json_object_get(o, "dim_feedforward"))) t.dim_feedforward = json_integer_value(v);
    if ((v = json_object_get(o, "dropout"))) t.dropout = json_number_value(v);
    if ((v = json_object_get(o, "activation"))) t.activation = json_string_value(v);
    if ((v = json_object_get(o, "layer_norm_eps"))) t.layer_norm_eps = json_number_value(v);
    if ((v = json_object_get(o, "batch_first"))) t.batch_first = json_is_true(v);
    if ((v = json_object_get(o, "norm_first"))) t.norm_first = json_is_true(v);
    if ((v = json_object_get(o, "bias"))) t.bias = json_is_true(v);
    return t;
}

static ct_module *build(const json_t *c) {
    const char *kind = json_string_value(json_object_get(c, "module"));
    const json_t *size = json_object_get(c, "size"), *opts = json_object_get(c, "opts");
    const bool norm = json_is_true(json_object_get(c, "norm"));
    if (!strcmp(kind, "MultiheadAttention")) {
        ct_mha_opts o = mha_opts(opts);
        return ct_nn_multihead_attention(int_at(size, 0), int_at(size, 1), &o);
    }
    ct_transformer_opts o = transformer_opts(opts);
    if (!strcmp(kind, "TransformerEncoderLayer"))
        return ct_nn_transformer_encoder_layer(int_at(size, 0), int_at(size, 1), &o);
    if (!strcmp(kind, "TransformerDecoderLayer"))
        return ct_nn_transformer_decoder_layer(int_at(size, 0), int_at(size, 1), &o);
    if (!strcmp(kind, "TransformerEncoder"))
        return ct_nn_transformer_encoder(int_at(size, 0), int_at(size, 1), int_at(size, 2), norm, &o);
    if (!strcmp(kind, "TransformerDecoder"))
        return ct_nn_transformer_decoder(int_at(size, 0), int_at(size, 1), int_at(size, 2), norm, &o);
    if (!strcmp(kind, "Transformer"))
        return ct_nn_transformer(int_at(size, 0), int_at(size, 1), int_at(size, 2), int_at(size, 3), &o);
    fprintf(stderr, "transformer_dump: unknown module %s\n", kind);
    exit(1);
}

/* ---- inputs ----------------------------------------------------------------------------- */

/* Row b of [n, s] true at its last b + 1 positions. */
static ct_tensor *padding_mask(int64_t n, int64_t s) {
    ct_tensor *pos = ct_arange(0, (double)s, 1, &(ct_topts){.dtype = CT_I64}); /* [s] */
    ct_tensor *first_pad = ct_rsub_scalar(ct_arange(1, (double)n + 1, 1, &(ct_topts){.dtype = CT_I64}), (double)s);
    return ct_ge(ct_unsqueeze(pos, 0), ct_unsqueeze(first_pad, 1)); /* pos >= s - (b + 1) */
}

/* bool as 0 / -inf when `as_float`. */
static ct_tensor *maybe_float(ct_tensor *mask, bool as_float) {
    if (!as_float) return mask;
    return ct_masked_fill(ct_zeros_like(ct_to_dtype(mask, CT_F32)), mask, -INFINITY);
}

static ct_tensor *make_input(const json_t *spec) {
    int64_t shape[8];
    const json_t *s;
    const bool as_float = json_is_true(json_object_get(spec, "float"));
    ct_tensor *t = NULL;
    if ((s = json_object_get(spec, "randn"))) {
        int n = shape_of(s, shape);
        t = ct_keep(ct_randn(n, shape, NULL));
        if (ct_set_requires_grad(t, true) != 0) die("requires_grad");
        return t;
    }
    if ((s = json_object_get(spec, "pad"))) {
        t = maybe_float(padding_mask(int_at(s, 0), int_at(s, 1)), as_float);
        if (json_is_true(json_object_get(spec, "squeeze"))) t = ct_select(t, 0, 0);
    } else if ((s = json_object_get(spec, "causal"))) {
        int64_t l = json_integer_value(s);
        t = maybe_float(ct_triu(ct_ones(CT_SHAPE(l, l), &(ct_topts){.dtype = CT_BOOL}), 1), as_float);
    } else if ((s = json_object_get(spec, "additive"))) {
        int n = shape_of(s, shape);
        t = ct_randn(n, shape, NULL);
    } else if ((s = json_object_get(spec, "random_bool"))) {
        int n = shape_of(s, shape);
        ct_tensor *keep_first = ct_gt_scalar(ct_arange(0, (double)shape[n - 1], 1, NULL), 0.5);
        t = CT_CALL("aten::logical_and", CT_T(ct_gt_scalar(ct_rand(n, shape, NULL), 0.6)), CT_T(keep_first));
    }
    if (!t) die("making an input");
    return ct_keep(ct_contiguous(t));
}

/* ---- running ---------------------------------------------------------------------------- */

static ct_value *input_named(const json_t *name, const ct_value *inputs) {
    if (json_is_string(name))
        return ct_value_tensor(ct_alias(ct_value_get_tensor(ct_value_dict_get(inputs, json_string_value(name)))));
    if (json_is_boolean(name)) return ct_value_bool(json_is_true(name));
    return ct_value_none();
}

/* m(*args, **kwargs) as the case says. */
static ct_value *call(ct_module *m, const json_t *c, const ct_value *inputs) {
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    size_t i;
    json_t *e;
    const char *key;
    json_array_foreach(json_object_get(c, "args"), i, e) ct_value_list_append(args, input_named(e, inputs));
    json_object_foreach(json_object_get(c, "kwargs"), key, e) ct_value_dict_set(kwargs, key, input_named(e, inputs));
    /* "autocast": the call under the CPU's autocast, as torch.autocast("cpu", dtype) */
    const char *amp = json_string_value(json_object_get(c, "autocast"));
    if (amp && ct_autocast_enter(CT_CPU, strcmp(amp, "fp16") == 0 ? CT_F16 : CT_BF16) != CT_OK) die(amp);
    ct_value *r = ct_nn_call(m, args, kwargs);
    if (amp) ct_autocast_exit();
    ct_value_free(args);
    ct_value_free(kwargs);
    return r;
}

/* Adds (t * cos(arange(numel)).view(t's shape)).sum() for every floating
 * tensor t of v to *loss. */
static void add_loss(const ct_value *v, ct_tensor **loss) {
    if (ct_value_kind_of(v) == CT_VALUE_TUPLE || ct_value_kind_of(v) == CT_VALUE_LIST) {
        for (size_t i = 0; i < ct_value_len(v); i++) add_loss(ct_value_list_get(v, i), loss);
        return;
    }
    if (ct_value_kind_of(v) != CT_VALUE_TENSOR) return;
    ct_tensor *t = ct_value_get_tensor(v);
    int64_t shape[8];
    int n = ct_shape(t, shape, 8);
    ct_tensor *w = ct_reshape(ct_cos(ct_arange(0, (double)ct_numel(t), 1, NULL)), n, shape);
    ct_tensor *term = ct_sum(ct_mul(t, w));
    *loss = *loss ? ct_add(*loss, term) : term;
}

/* {name: grad or None} for the grad-requiring inputs / the parameters. */
static ct_value *input_grads(const ct_value *inputs) {
    ct_value *g = ct_value_dict();
    for (size_t i = 0; i < ct_value_len(inputs); i++) {
        const char *name;
        int64_t ik;
        ct_tensor *t = ct_value_get_tensor(ct_value_dict_at(inputs, i, &name, &ik));
        if (ct_requires_grad(t))
            ct_value_dict_set(g, name, ct_has_grad(t) ? ct_value_tensor(ct_grad(t)) : ct_value_none());
    }
    return g;
}

static ct_value *param_grads(const ct_module *m) {
    ct_value *g = ct_value_dict();
    for (size_t i = 0; i < ct_nn_num_params(m); i++) {
        const char *name;
        ct_tensor *p = ct_nn_param_at(m, i, &name);
        ct_value_dict_set(g, name, ct_has_grad(p) ? ct_value_tensor(ct_grad(p)) : ct_value_none());
    }
    return g;
}

static ct_value *run_case(const json_t *c, size_t index) {
    ct_manual_seed(1000 + index);
    ct_module *m = build(c);
    if (!m) die(json_string_value(json_object_get(c, "name")));
    ct_value *rec = ct_value_dict(), *inputs = ct_value_dict();
    ct_value *init = ct_nn_state_dict(m);
    ct_value_dict_set(rec, "init", ct_value_copy(init, true));
    ct_value_free(init);
    const char *name;
    json_t *spec;
    json_object_foreach(json_object_get(c, "inputs"), name, spec)
        ct_value_dict_set(inputs, name, ct_value_tensor(make_input(spec)));

    ct_manual_seed(7);
    ct_value *out = call(m, c, inputs);
    ct_tensor *loss = NULL;
    if (out) add_loss(out, &loss);
    if (!loss || ct_backward(loss) != 0) die(json_string_value(json_object_get(c, "name")));
    ct_value_dict_set(rec, "train", out);
    ct_value_dict_set(rec, "input_grads", input_grads(inputs));
    ct_value_dict_set(rec, "param_grads", param_grads(m));

    ct_nn_train(m, false);
    ct_guard *g = ct_no_grad();
    ct_value *eval = call(m, c, inputs);
    ct_guard_end(g);
    if (!eval) die(json_string_value(json_object_get(c, "name")));
    ct_value_dict_set(rec, "eval", eval);
    ct_value_dict_set(rec, "inputs", inputs);
    ct_nn_free(m);
    return rec;
}

int main(int argc, char **argv) {
    json_t *cases = ct_test_load_cases(argc, argv);
    if (!cases) return 2;
    ct_set_num_threads(1);
    ct_value *all = ct_value_dict();
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        ct_scope *scope = ct_scope_begin();
        ct_value_dict_set(all, json_string_value(json_object_get(c, "name")), run_case(c, i));
        ct_scope_end(scope);
    }
    return ct_test_save_results(argv[2], all, cases);
}
