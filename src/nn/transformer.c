/* src/nn/transformer.c — nn.TransformerEncoderLayer, TransformerDecoderLayer,
 * TransformerEncoder, TransformerDecoder and Transformer (nn.h), written
 * in C on the public API as torch/nn/modules/transformer.py writes them:
 * the same children under the same names (so the state dict is Python's),
 * built in the same order (so the same seed draws the same weights), and
 * the same forward, block by block.
 *
 * Python's eval-mode fast paths (torch._transformer_encoder_layer_fwd, and
 * the nested tensors of TransformerEncoder) are not taken: the results are
 * those of the path Python takes with
 * torch.backends.mha.set_fastpath_enabled(False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layer.h"

static const char *const kEncoderLayer = "TransformerEncoderLayer";
static const char *const kDecoderLayer = "TransformerDecoderLayer";
static const char *const kEncoder = "TransformerEncoder";
static const char *const kDecoder = "TransformerDecoder";
static const char *const kTransformer = "Transformer";

/* An encoder or decoder layer: its children (borrowed from the module). */
typedef struct {
    int64_t d_model;
    bool norm_first, gelu;
    ct_module *self_attn, *multihead_attn; /* multihead_attn: decoder layers only */
    ct_module *linear1, *dropout, *linear2;
    ct_module *norm1, *norm2, *norm3;          /* norm3: decoder layers only */
    ct_module *dropout1, *dropout2, *dropout3; /* dropout3: decoder layers only */
} Layer;

/* A stack: layers "0", "1", ... in a ModuleList, and the final norm. */
typedef struct {
    ct_module *layers, *norm; /* norm may be NULL */
    int64_t num_layers;
    bool batch_first;
} Stack;

typedef struct {
    ct_module *encoder, *decoder;
    int64_t d_model;
    bool batch_first;
} Model;

ct_transformer_opts ct_transformer_defaults(void) {
    ct_transformer_opts o;
    o.dim_feedforward = 2048;
    o.dropout = 0.1;
    o.activation = "relu";
    o.layer_norm_eps = 1e-5;
    o.batch_first = false;
    o.norm_first = false;
    o.bias = true;
    return o;
}

/* ---- errors and arguments ------------------------------------------------------------- */


/* t is [S, E], [S, N, E] or [N, S, E] with E = d_model. */
static int check_input(const char *type, const char *name, const ct_tensor *t, int64_t d_model) {
    if ((ct_ndim(t) == 2 || ct_ndim(t) == 3) && ct_size(t, -1) == d_model) return CT_OK;
    char shape[96];
    ct_describe(t, shape, sizeof shape);
    return ct_set_error(CT_ESHAPE, "%s: expected %s of 2 or 3 dims whose last is d_model=%lld, got %s", type, name,
                        (long long)d_model, shape);
}

/* A forward's result: a value holding t (made in `scope`, which ends), or
 * NULL with the error prefixed by the type. */
static ct_value *result(const char *type, ct_scope *scope, const ct_tensor *t) {
    ct_value *r = cti_layer_value(t);
    ct_scope_end(scope);
    return r ? r : cti_layer_failed(type);
}

/* ---- the blocks of a layer ------------------------------------------------------------ */

/* mha(x, mem, mem, attn_mask=, key_padding_mask=, is_causal=,
 * need_weights=False)[0]: a new tensor. */
static ct_tensor *attend(ct_module *mha, const ct_tensor *x, const ct_tensor *mem, const ct_tensor *attn_mask,
                         const ct_tensor *key_padding_mask, bool is_causal) {
    if (!x || !mem) return NULL;
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value_list_append(args, cti_layer_value(x));
    ct_value_list_append(args, cti_layer_value(mem));
    ct_value_list_append(args, cti_layer_value(mem));
    ct_value_dict_set(kwargs, "attn_mask", attn_mask ? cti_layer_value(attn_mask) : ct_value_none());
    ct_value_dict_set(kwargs, "key_padding_mask",
                      key_padding_mask ? cti_layer_value(key_padding_mask) : ct_value_none());
    ct_value_dict_set(kwargs, "is_causal", ct_value_bool(is_causal));
    ct_value_dict_set(kwargs, "need_weights", ct_value_bool(false));
    ct_value *r = ct_nn_call(mha, args, kwargs);
    ct_tensor *out = r ? ct_alias(ct_value_get_tensor(ct_value_list_get(r, 0))) : NULL;
    ct_value_free(r);
    ct_value_free(args);
    ct_value_free(kwargs);
    return out;
}

/* _sa_block: dropout1(self_attn(x, x, x, ...)[0]). */
static ct_tensor *self_attention_block(const Layer *l, const ct_tensor *x, const ct_tensor *mask,
                                       const ct_tensor *key_padding_mask, bool is_causal) {
    return ct_nn_forward(l->dropout1, attend(l->self_attn, x, x, mask, key_padding_mask, is_causal));
}

/* _mha_block (decoder layers): dropout2(multihead_attn(x, mem, mem, ...)[0]). */
static ct_tensor *cross_attention_block(const Layer *l, const ct_tensor *x, const ct_tensor *mem, const ct_tensor *mask,
                                        const ct_tensor *key_padding_mask, bool is_causal) {
    return ct_nn_forward(l->dropout2, attend(l->multihead_attn, x, mem, mask, key_padding_mask, is_causal));
}

/* _ff_block: last_dropout(linear2(dropout(activation(linear1(x))))). */
static ct_tensor *feed_forward_block(const Layer *l, const ct_tensor *x, ct_module *last_dropout) {
    ct_tensor *h = ct_nn_forward(l->linear1, x);
    h = l->gelu ? ct_gelu(h) : ct_relu(h);
    h = ct_nn_forward(l->linear2, ct_nn_forward(l->dropout, h));
    return ct_nn_forward(last_dropout, h);
}

/* TransformerEncoderLayer.forward (the path without the fast path). */
static ct_tensor *encoder_layer_apply(const Layer *l, const ct_tensor *src, const ct_tensor *mask,
                                      const ct_tensor *key_padding_mask, bool is_causal) {
    if (check_input(kEncoderLayer, "src", src, l->d_model) != CT_OK) return NULL;
    ct_tensor *x;
    if (l->norm_first) {
        x = ct_add(src, self_attention_block(l, ct_nn_forward(l->norm1, src), mask, key_padding_mask, is_causal));
        x = ct_add(x, feed_forward_block(l, ct_nn_forward(l->norm2, x), l->dropout2));
    } else {
        x = ct_nn_forward(l->norm1, ct_add(src, self_attention_block(l, src, mask, key_padding_mask, is_causal)));
        x = ct_nn_forward(l->norm2, ct_add(x, feed_forward_block(l, x, l->dropout2)));
    }
    return x;
}

/* The masks and flags of a decoder layer's call. */
typedef struct {
    const ct_tensor *tgt_mask, *memory_mask, *tgt_key_padding_mask, *memory_key_padding_mask;
    bool tgt_is_causal, memory_is_causal;
} DecoderMasks;

/* TransformerDecoderLayer.forward. */
static ct_tensor *decoder_layer_apply(const Layer *l, const ct_tensor *tgt, const ct_tensor *memory,
                                      const DecoderMasks *m) {
    if (check_input(kDecoderLayer, "tgt", tgt, l->d_model) != CT_OK ||
        check_input(kDecoderLayer, "memory", memory, l->d_model) != CT_OK)
        return NULL;
    ct_tensor *x;
    if (l->norm_first) {
        x = ct_add(tgt, self_attention_block(l, ct_nn_forward(l->norm1, tgt), m->tgt_mask, m->tgt_key_padding_mask,
                                             m->tgt_is_causal));
        x = ct_add(x, cross_attention_block(l, ct_nn_forward(l->norm2, x), memory, m->memory_mask,
                                            m->memory_key_padding_mask, m->memory_is_causal));
        x = ct_add(x, feed_forward_block(l, ct_nn_forward(l->norm3, x), l->dropout3));
    } else {
        x = ct_nn_forward(l->norm1, ct_add(tgt, self_attention_block(l, tgt, m->tgt_mask, m->tgt_key_padding_mask,
                                                                     m->tgt_is_causal)));
        x = ct_nn_forward(l->norm2, ct_add(x, cross_attention_block(l, x, memory, m->memory_mask,
                                                                    m->memory_key_padding_mask, m->memory_is_causal)));
        x = ct_nn_forward(l->norm3, ct_add(x, feed_forward_block(l, x, l->dropout3)));
    }
    return x;
}

/* ---- the stacks ----------------------------------------------------------------------- */

/* _get_seq_len: the sequence length of src. */
static int64_t seq_len_of(const ct_tensor *src, bool batch_first) {
    if (ct_ndim(src) == 2) return ct_size(src, 0);
    return ct_size(src, batch_first ? 1 : 0);
}

/* _detect_is_causal_mask: `is_causal` when given (0 or 1); for None (-1),
 * whether mask is exactly the square causal mask of size sz in mask's
 * dtype (-inf, or true, above the diagonal). */
static int detect_causal(const ct_tensor *mask, int is_causal, int64_t sz, bool *causal) {
    *causal = is_causal == 1;
    if (is_causal != -1 || !mask) return CT_OK;
    if (ct_ndim(mask) != 2 || ct_size(mask, 0) != sz || ct_size(mask, 1) != sz) return CT_OK;
    ct_tensor *reference = ct_triu(
        ct_full(CT_SHAPE(sz, sz), -INFINITY, &(ct_topts){.dtype = ct_dtype_of(mask), .device = ct_device_of(mask)}), 1);
    int64_t all = 0;
    int rc = ct_item_int(CT_CALL("aten::all", CT_T(ct_eq(mask, reference))), &all);
    *causal = all != 0;
    return rc;
}

/* The Layer of a stack's i-th layer. */
static const Layer *layer_at(const Stack *s, int64_t i) {
    char name[24];
    snprintf(name, sizeof name, "%lld", (long long)i);
    return ct_nn_user(ct_nn_child(s->layers, name));
}

/* TransformerEncoder.forward (without the nested-tensor fast path). */
static ct_tensor *encoder_apply(const Stack *s, const ct_tensor *src, const ct_tensor *mask,
                                const ct_tensor *key_padding_mask, int is_causal) {
    bool causal;
    if (detect_causal(mask, is_causal, seq_len_of(src, s->batch_first), &causal) != CT_OK) return NULL;
    ct_tensor *x = ct_alias(src);
    for (int64_t i = 0; x && i < s->num_layers; i++)
        x = encoder_layer_apply(layer_at(s, i), x, mask, key_padding_mask, causal);
    return s->norm ? ct_nn_forward(s->norm, x) : x;
}

/* TransformerDecoder.forward; tgt_is_causal is -1 for None. */
static ct_tensor *decoder_apply(const Stack *s, const ct_tensor *tgt, const ct_tensor *memory, const DecoderMasks *m,
                                int tgt_is_causal) {
    DecoderMasks masks = *m;
    if (detect_causal(m->tgt_mask, tgt_is_causal, seq_len_of(tgt, s->batch_first), &masks.tgt_is_causal) != CT_OK)
        return NULL;
    ct_tensor *x = ct_alias(tgt);
    for (int64_t i = 0; x && i < s->num_layers; i++) x = decoder_layer_apply(layer_at(s, i), x, memory, &masks);
    return s->norm ? ct_nn_forward(s->norm, x) : x;
}

/* ---- forwards over values ------------------------------------------------------------- */

/* forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False) */
static ct_value *encoder_layer_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    static const char *const names[] = {"src", "src_mask", "src_key_padding_mask", "is_causal"};
    cti_layer_args a = cti_layer_bind(kEncoderLayer, args, kwargs, 4, names);
    const ct_tensor *src = cti_layer_tensor_at(&a, 0, true), *mask = cti_layer_tensor_at(&a, 1, false), *kpm = cti_layer_tensor_at(&a, 2, false);
    bool is_causal = cti_layer_flag_at(&a, 3, 0) == 1;
    if (a.rc != CT_OK) return cti_layer_failed(kEncoderLayer);
    ct_scope *scope = ct_scope_begin();
    return result(kEncoderLayer, scope, encoder_layer_apply(ct_nn_user(self), src, mask, kpm, is_causal));
}

static const char *const kDecoderNames[] = {
    "tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "tgt_is_causal",
    "memory_is_causal"};

/* The masks of a decoder's (or decoder layer's) call, bound to
 * kDecoderNames; tgt_is_causal is left to the caller. */
static DecoderMasks decoder_masks(cti_layer_args *a) {
    DecoderMasks m;
    m.tgt_mask = cti_layer_tensor_at(a, 2, false);
    m.memory_mask = cti_layer_tensor_at(a, 3, false);
    m.tgt_key_padding_mask = cti_layer_tensor_at(a, 4, false);
    m.memory_key_padding_mask = cti_layer_tensor_at(a, 5, false);
    m.tgt_is_causal = false;
    m.memory_is_causal = cti_layer_flag_at(a, 7, 0) == 1;
    return m;
}

/* forward(tgt, memory, tgt_mask=None, memory_mask=None,
 * tgt_key_padding_mask=None, memory_key_padding_mask=None,
 * tgt_is_causal=False, memory_is_causal=False) */
static ct_value *decoder_layer_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    cti_layer_args a = cti_layer_bind(kDecoderLayer, args, kwargs, 8, kDecoderNames);
    const ct_tensor *tgt = cti_layer_tensor_at(&a, 0, true), *memory = cti_layer_tensor_at(&a, 1, true);
    DecoderMasks m = decoder_masks(&a);
    m.tgt_is_causal = cti_layer_flag_at(&a, 6, 0) == 1;
    if (a.rc != CT_OK) return cti_layer_failed(kDecoderLayer);
    ct_scope *scope = ct_scope_begin();
    return result(kDecoderLayer, scope, decoder_layer_apply(ct_nn_user(self), tgt, memory, &m));
}

/* forward(src, mask=None, src_key_padding_mask=None, is_causal=None) */
static ct_value *encoder_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    static const char *const names[] = {"src", "mask", "src_key_padding_mask", "is_causal"};
    cti_layer_args a = cti_layer_bind(kEncoder, args, kwargs, 4, names);
    const ct_tensor *src = cti_layer_tensor_at(&a, 0, true), *mask = cti_layer_tensor_at(&a, 1, false), *kpm = cti_layer_tensor_at(&a, 2, false);
    int is_causal = cti_layer_flag_at(&a, 3, -1);
    if (a.rc != CT_OK) return cti_layer_failed(kEncoder);
    ct_scope *scope = ct_scope_begin();
    return result(kEncoder, scope, encoder_apply(ct_nn_user(self), src, mask, kpm, is_causal));
}

/* forward(tgt, memory, tgt_mask=None, memory_mask=None,
 * tgt_key_padding_mask=None, memory_key_padding_mask=None,
 * tgt_is_causal=None, memory_is_causal=False) */
static ct_value *decoder_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    cti_layer_args a = cti_layer_bind(kDecoder, args, kwargs, 8, kDecoderNames);
    const ct_tensor *tgt = cti_layer_tensor_at(&a, 0, true), *memory = cti_layer_tensor_at(&a, 1, true);
    DecoderMasks m = decoder_masks(&a);
    int tgt_is_causal = cti_layer_flag_at(&a, 6, -1);
    if (a.rc != CT_OK) return cti_layer_failed(kDecoder);
    ct_scope *scope = ct_scope_begin();
    return result(kDecoder, scope, decoder_apply(ct_nn_user(self), tgt, memory, &m, tgt_is_causal));
}

/* Transformer.forward's checks of src and tgt. */
static int check_src_tgt(const Model *t, const ct_tensor *src, const ct_tensor *tgt) {
    const bool batched = ct_ndim(src) == 3;
    const int batch_dim = t->batch_first ? 0 : 1;
    if (batched && (ct_ndim(tgt) != 3 || ct_size(src, batch_dim) != ct_size(tgt, batch_dim)))
        return ct_set_error(CT_ESHAPE, "%s: the batch number of src and tgt must be equal", kTransformer);
    if (ct_size(src, -1) != t->d_model || ct_size(tgt, -1) != t->d_model)
        return ct_set_error(CT_ESHAPE, "%s: the feature number of src and tgt must be equal to d_model (%lld)",
                            kTransformer, (long long)t->d_model);
    return CT_OK;
}

/* forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
 * src_key_padding_mask=None, tgt_key_padding_mask=None,
 * memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
 * memory_is_causal=False) */
static ct_value *transformer_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    static const char *const names[] = {"src",
                                        "tgt",
                                        "src_mask",
                                        "tgt_mask",
                                        "memory_mask",
                                        "src_key_padding_mask",
                                        "tgt_key_padding_mask",
                                        "memory_key_padding_mask",
                                        "src_is_causal",
                                        "tgt_is_causal",
                                        "memory_is_causal"};
    const Model *t = ct_nn_user(self);
    cti_layer_args a = cti_layer_bind(kTransformer, args, kwargs, 11, names);
    const ct_tensor *src = cti_layer_tensor_at(&a, 0, true), *tgt = cti_layer_tensor_at(&a, 1, true);
    const ct_tensor *src_mask = cti_layer_tensor_at(&a, 2, false), *src_kpm = cti_layer_tensor_at(&a, 5, false);
    DecoderMasks m;
    m.tgt_mask = cti_layer_tensor_at(&a, 3, false);
    m.memory_mask = cti_layer_tensor_at(&a, 4, false);
    m.tgt_key_padding_mask = cti_layer_tensor_at(&a, 6, false);
    m.memory_key_padding_mask = cti_layer_tensor_at(&a, 7, false);
    int src_is_causal = cti_layer_flag_at(&a, 8, -1), tgt_is_causal = cti_layer_flag_at(&a, 9, -1);
    m.memory_is_causal = cti_layer_flag_at(&a, 10, 0) == 1;
    m.tgt_is_causal = false;
    if (a.rc != CT_OK || check_src_tgt(t, src, tgt) != CT_OK) return cti_layer_failed(kTransformer);
    ct_scope *scope = ct_scope_begin();
    ct_tensor *memory = encoder_apply(ct_nn_user(t->encoder), src, src_mask, src_kpm, src_is_causal);
    ct_tensor *out = memory ? decoder_apply(ct_nn_user(t->decoder), tgt, memory, &m, tgt_is_causal) : NULL;
    return result(kTransformer, scope, out);
}

/* ---- construction --------------------------------------------------------------------- */

/* nn.LayerNorm(d, eps, bias=False): a weight and no bias (ct_nn_layernorm
 * has both or neither). */
typedef struct {
    int64_t d;
    double eps;
} NormNoBias;

static ct_tensor *norm_no_bias_forward(ct_module *self, const ct_tensor *x) {
    const NormNoBias *n = ct_nn_user(self);
    return ct_layer_norm(x, CT_SHAPE(n->d), ct_nn_get(self, "weight"), NULL, n->eps);
}

/* nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias). */
static ct_module *layer_norm(int64_t d, double eps, bool bias) {
    if (bias) {
        ct_norm_opts o = ct_norm_defaults();
        o.eps = eps;
        return ct_nn_layernorm(d, &o);
    }
    NormNoBias *n = malloc(sizeof *n);
    if (!n) {
        ct_set_error(CT_ENOMEM, "LayerNorm: out of host memory");
        return NULL;
    }
    n->d = d;
    n->eps = eps;
    ct_module *m = ct_nn_module("LayerNorm", norm_no_bias_forward, n, free);
    if (!m) {
        free(n);
        return NULL;
    }
    if (!cti_layer_param(m, "weight", CT_SHAPE(d), cti_layer_init_constant, 1.0, 0)) {
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

static int check_activation(const char *type, const ct_transformer_opts *o, bool *gelu) {
    const char *act = o->activation ? o->activation : "relu";
    *gelu = strcmp(act, "gelu") == 0;
    if (*gelu || strcmp(act, "relu") == 0) return CT_OK;
    return ct_set_error(CT_EINVAL, "%s: activation should be relu/gelu, not %s", type, act);
}

/* child registered as m.name; false (the error set) when it is NULL. */
static bool add(ct_module *m, const char *name, ct_module *child, ct_module **slot) {
    *slot = child ? ct_nn_add_module(m, name, child) : NULL;
    return *slot != NULL;
}

/* The children of a layer, made and registered in the order Python's
 * __init__ makes them: the attention blocks (which draw), linear1,
 * dropout, linear2 (which draw), the norms, the dropouts. */
static bool make_children(ct_module *m, Layer *l, bool decoder, int64_t nhead, const ct_transformer_opts *o) {
    ct_mha_opts ao = ct_mha_defaults();
    ao.dropout = o->dropout;
    ao.bias = o->bias;
    ao.batch_first = o->batch_first;
    const int64_t d = l->d_model;
    if (!add(m, "self_attn", ct_nn_multihead_attention(d, nhead, &ao), &l->self_attn)) return false;
    if (decoder && !add(m, "multihead_attn", ct_nn_multihead_attention(d, nhead, &ao), &l->multihead_attn))
        return false;
    if (!add(m, "linear1", ct_nn_linear(d, o->dim_feedforward, o->bias), &l->linear1)) return false;
    if (!add(m, "dropout", ct_nn_dropout(o->dropout), &l->dropout)) return false;
    if (!add(m, "linear2", ct_nn_linear(o->dim_feedforward, d, o->bias), &l->linear2)) return false;
    if (!add(m, "norm1", layer_norm(d, o->layer_norm_eps, o->bias), &l->norm1)) return false;
    if (!add(m, "norm2", layer_norm(d, o->layer_norm_eps, o->bias), &l->norm2)) return false;
    if (decoder && !add(m, "norm3", layer_norm(d, o->layer_norm_eps, o->bias), &l->norm3)) return false;
    if (!add(m, "dropout1", ct_nn_dropout(o->dropout), &l->dropout1)) return false;
    if (!add(m, "dropout2", ct_nn_dropout(o->dropout), &l->dropout2)) return false;
    return !decoder || add(m, "dropout3", ct_nn_dropout(o->dropout), &l->dropout3);
}

static ct_module *make_layer(bool decoder, int64_t d_model, int64_t nhead, const ct_transformer_opts *opts) {
    const char *type = decoder ? kDecoderLayer : kEncoderLayer;
    const ct_transformer_opts o = opts ? *opts : ct_transformer_defaults();
    Layer *l = calloc(1, sizeof *l);
    if (!l) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", type);
        return NULL;
    }
    l->d_model = d_model;
    l->norm_first = o.norm_first;
    if (check_activation(type, &o, &l->gelu) != CT_OK) {
        free(l);
        return NULL;
    }
    ct_module *m = ct_nn_module_value(type, decoder ? decoder_layer_call : encoder_layer_call, l, free);
    if (!m) {
        free(l);
        return NULL;
    }
    if (!make_children(m, l, decoder, nhead, &o)) {
        cti_layer_failed(type);
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, const ct_transformer_opts *opts) {
    return make_layer(false, d_model, nhead, opts);
}

ct_module *ct_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, const ct_transformer_opts *opts) {
    return make_layer(true, d_model, nhead, opts);
}

/* copy.deepcopy(layer): a new layer of the same make, loaded with layer's
 * values. The generator's state is put back, so the copy draws nothing. */
static ct_module *copy_layer(const ct_module *layer, bool decoder, int64_t d_model, int64_t nhead,
                             const ct_transformer_opts *o) {
    ct_scope *scope = ct_scope_begin();
    ct_tensor *rng = ct_rng_get_state(ct_cpu());
    ct_module *copy = rng ? make_layer(decoder, d_model, nhead, o) : NULL;
    bool ok = copy && ct_rng_set_state(ct_cpu(), rng) == CT_OK;
    ct_value *values = ok ? ct_nn_state_dict(layer) : NULL;
    ok = values && ct_nn_load_state_dict(copy, values, true) == CT_OK;
    ct_value_free(values);
    ct_scope_end(scope);
    if (ok) return copy;
    ct_nn_free(copy);
    return NULL;
}

/* The layers of a stack: the first made, the others copies of it. */
static bool make_layers(Stack *s, bool decoder, int64_t d_model, int64_t nhead, const ct_transformer_opts *o) {
    ct_module *first = ct_nn_add_module(s->layers, "0", make_layer(decoder, d_model, nhead, o));
    for (int64_t i = 1; first && i < s->num_layers; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        if (!ct_nn_add_module(s->layers, name, copy_layer(first, decoder, d_model, nhead, o))) return false;
    }
    return first != NULL;
}

/* nn.TransformerEncoder(layer, num_layers, norm) or the decoder: `layers`
 * (a ModuleList), then `norm` when asked. */
static ct_module *make_stack(bool decoder, int64_t d_model, int64_t nhead, int64_t num_layers, bool norm,
                             const ct_transformer_opts *opts) {
    const char *type = decoder ? kDecoder : kEncoder;
    const ct_transformer_opts o = opts ? *opts : ct_transformer_defaults();
    if (num_layers < 1) {
        ct_set_error(CT_EINVAL, "%s: num_layers must be at least 1, got %lld", type, (long long)num_layers);
        return NULL;
    }
    Stack *s = calloc(1, sizeof *s);
    if (!s) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", type);
        return NULL;
    }
    s->num_layers = num_layers;
    s->batch_first = o.batch_first;
    ct_module *m = ct_nn_module_value(type, decoder ? decoder_call : encoder_call, s, free);
    if (!m) {
        free(s);
        return NULL;
    }
    bool ok = add(m, "layers", ct_nn_module("ModuleList", NULL, NULL, NULL), &s->layers) &&
              make_layers(s, decoder, d_model, nhead, &o) &&
              (!norm || add(m, "norm", layer_norm(d_model, o.layer_norm_eps, o.bias), &s->norm));
    if (!ok) {
        cti_layer_failed(type);
        ct_nn_free(m);
        return NULL;
    }
    return m;
}

ct_module *ct_nn_transformer_encoder(int64_t d_model, int64_t nhead, int64_t num_layers, bool norm,
                                     const ct_transformer_opts *opts) {
    return make_stack(false, d_model, nhead, num_layers, norm, opts);
}

ct_module *ct_nn_transformer_decoder(int64_t d_model, int64_t nhead, int64_t num_layers, bool norm,
                                     const ct_transformer_opts *opts) {
    return make_stack(true, d_model, nhead, num_layers, norm, opts);
}

/* Transformer._reset_parameters: xavier_uniform_ on every parameter of
 * more than one dim, in parameters() order. */
static int redraw_matrices(ct_module *m) {
    ct_guard *g = ct_no_grad();
    int rc = CT_OK;
    for (size_t i = 0; rc == CT_OK && i < ct_nn_num_params(m); i++) {
        ct_tensor *p = ct_nn_param_at(m, i, NULL);
        if (ct_ndim(p) > 1) rc = cti_layer_init_xavier_uniform(p, 1.0, 0);
    }
    ct_guard_end(g);
    return rc;
}

ct_module *ct_nn_transformer(int64_t d_model, int64_t nhead, int64_t num_encoder_layers, int64_t num_decoder_layers,
                             const ct_transformer_opts *opts) {
    Model *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", kTransformer);
        return NULL;
    }
    t->d_model = d_model;
    t->batch_first = opts ? opts->batch_first : false;
    ct_module *m = ct_nn_module_value(kTransformer, transformer_call, t, free);
    if (!m) {
        free(t);
        return NULL;
    }
    bool ok = add(m, "encoder", make_stack(false, d_model, nhead, num_encoder_layers, true, opts), &t->encoder) &&
              add(m, "decoder", make_stack(true, d_model, nhead, num_decoder_layers, true, opts), &t->decoder) &&
              redraw_matrices(m) == CT_OK;
    if (!ok) {
        cti_layer_failed(kTransformer);
        ct_nn_free(m);
        return NULL;
    }
    return m;
}
