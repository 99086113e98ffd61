/* src/nn/attention.c — nn.MultiheadAttention (nn.h), written in C on the
 * public API: the parameters drawn in the order Python's constructor draws
 * them, and forward as torch.nn.functional.multi_head_attention_forward,
 * line by line, with the same ATen operators (so values, gradients and
 * dropout's draws match Python's).
 *
 * Python's eval-mode fast path (torch._native_multi_head_attention) is not
 * taken: the result is that of the path Python takes with
 * torch.backends.mha.set_fastpath_enabled(False), which the fast path
 * matches up to rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layer.h"

static const char *const kType = "MultiheadAttention";

typedef struct {
    int64_t embed_dim, num_heads, head_dim, kdim, vdim;
    double dropout;
    bool batch_first;
    bool same_embed_dim; /* _qkv_same_embed_dim: one packed in_proj_weight */
    /* Borrowed from the module, which owns them (NULL when absent). */
    ct_tensor *in_proj_weight, *q_proj_weight, *k_proj_weight, *v_proj_weight, *in_proj_bias;
    ct_tensor *out_weight, *out_bias;
} Mha;

/* One call's arguments, bound as Python binds forward's. */
typedef struct {
    const ct_tensor *query, *key, *value, *key_padding_mask, *attn_mask;
    bool need_weights, average_attn_weights, is_causal;
    /* Python's `query is key` and `key is value`, which pick the packed
     * in-projection's shortcuts. */
    bool q_is_k, k_is_v;
} MhaCall;

ct_mha_opts ct_mha_defaults(void) {
    ct_mha_opts o;
    o.dropout = 0.0;
    o.bias = true;
    o.kdim = 0;
    o.vdim = 0;
    o.batch_first = false;
    return o;
}

/* ---- arguments ------------------------------------------------------------------------ */

/* Python's `a is b` for two handles, as near as the public API comes: the
 * same tensor seen through two handles (ct_alias) views the same storage
 * at the same place with the same shape, strides and dtype, and the same
 * requires_grad and leaf-ness. */
static bool same_tensor(const ct_tensor *a, const ct_tensor *b) {
    if (a == b) return true;
    ct_storage_info sa, sb;
    if (ct_storage_info_of(a, &sa) != CT_OK || ct_storage_info_of(b, &sb) != CT_OK) {
        ct_clear_error();
        return false;
    }
    int nd = ct_ndim(a);
    if (sa.id != sb.id || sa.offset != sb.offset || nd != ct_ndim(b) || ct_dtype_of(a) != ct_dtype_of(b) ||
        ct_requires_grad(a) != ct_requires_grad(b) || ct_is_leaf(a) != ct_is_leaf(b))
        return false;
    for (int d = 0; d < nd; d++)
        if (ct_size(a, d) != ct_size(b, d) || ct_stride(a, d) != ct_stride(b, d)) return false;
    return true;
}

static int bind_call(const ct_value *args, const ct_value *kwargs, MhaCall *c) {
    static const char *const names[] = {
        "query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"};
    cti_layer_args a = cti_layer_bind(kType, args, kwargs, 8, names);
    c->query = cti_layer_tensor_at(&a, 0, true);
    c->key = cti_layer_tensor_at(&a, 1, true);
    c->value = cti_layer_tensor_at(&a, 2, true);
    c->key_padding_mask = cti_layer_tensor_at(&a, 3, false);
    c->need_weights = cti_layer_flag_at(&a, 4, 1) == 1; /* None is false, as in Python's `if need_weights:` */
    c->attn_mask = cti_layer_tensor_at(&a, 5, false);
    c->average_attn_weights = cti_layer_flag_at(&a, 6, 1) == 1;
    c->is_causal = cti_layer_flag_at(&a, 7, 0) == 1;
    if (a.rc != CT_OK) return a.rc;
    c->q_is_k = same_tensor(c->query, c->key);
    c->k_is_v = same_tensor(c->key, c->value);
    return CT_OK;
}

/* ---- checks (F._mha_shape_check and the asserts of the forward) ---------------------- */

static void shape_text(const ct_tensor *t, char *buf, size_t len) {
    int64_t shape[8];
    int nd = ct_shape(t, shape, 8);
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < nd && d < 8 && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

/* Whether the input is batched (query 3-D) or not (2-D); the dims of the
 * inputs and masks checked as _mha_shape_check does. */
static int check_dims(const Mha *a, const MhaCall *c, bool *batched) {
    int q = ct_ndim(c->query), k = ct_ndim(c->key), v = ct_ndim(c->value);
    int kpm = c->key_padding_mask ? ct_ndim(c->key_padding_mask) : -1;
    int am = c->attn_mask ? ct_ndim(c->attn_mask) : -1;
    if (q != 2 && q != 3)
        return ct_set_error(CT_ESHAPE,
                            "%s: query should be unbatched 2D or batched 3D tensor but received %d-D query tensor",
                            kType, q);
    *batched = q == 3;
    if (k != q || v != q)
        return ct_set_error(CT_ESHAPE,
                            "%s: for %s (%d-D) query, expected key and value to be %d-D but found %d-D and %d-D", kType,
                            q == 3 ? "batched" : "unbatched", q, q, k, v);
    if (kpm >= 0 && kpm != q - 1)
        return ct_set_error(CT_ESHAPE,
                            "%s: for %s (%d-D) query, expected key_padding_mask to be None or %d-D but found %d-D",
                            kType, q == 3 ? "batched" : "unbatched", q, q - 1, kpm);
    if (am >= 0 && am != 2 && am != 3)
        return ct_set_error(CT_ESHAPE, "%s: expected attn_mask to be None, 2-D or 3-D but found %d-D", kType, am);
    if (ct_size(c->query, -1) != a->embed_dim)
        return ct_set_error(CT_ESHAPE, "%s: was expecting embedding dimension of %lld, but got %lld", kType,
                            (long long)a->embed_dim, (long long)ct_size(c->query, -1));
    if (ct_size(c->key, -1) != a->kdim || ct_size(c->value, -1) != a->vdim)
        return ct_set_error(
            CT_ESHAPE,
            "%s: expected key and value of embedding dimensions %lld and %lld (kdim, vdim), got %lld and %lld", kType,
            (long long)a->kdim, (long long)a->vdim, (long long)ct_size(c->key, -1), (long long)ct_size(c->value, -1));
    return CT_OK;
}

/* F._canonical_mask: a bool mask becomes a float one of `dtype`, -inf where
 * true; a float mask is kept; any other dtype is an error. New (or
 * borrowed back when already canonical), NULL for NULL. */
static int canonical_mask(const ct_tensor *mask, const char *name, ct_dtype dtype, const ct_tensor **out) {
    *out = mask;
    if (!mask || ct_dtype_is_floating(ct_dtype_of(mask))) return CT_OK;
    if (ct_dtype_of(mask) != CT_BOOL)
        return ct_set_error(CT_EDTYPE, "%s: only bool and floating types of %s are supported", kType, name);
    ct_tensor *zeros = CT_CALL("aten::zeros_like", CT_T(mask), CT_KW("dtype", CT_DTYPE(dtype)));
    *out = CT_CALL("aten::masked_fill_.Scalar", CT_T(zeros), CT_T(mask), CT_F(-INFINITY));
    return *out ? CT_OK : ct_last_code();
}

/* ---- forward (F.multi_head_attention_forward) ------------------------------------------ */

/* q, k, v projected: _in_projection_packed, whose shortcuts for
 * self-attention (q is k is v) and encoder-decoder attention (k is v) are
 * kept (they order the sums of the backward differently), or
 * _in_projection with separate weights. */
static void in_projection(const Mha *a, const MhaCall *c, const ct_tensor *query, const ct_tensor *key,
                          const ct_tensor *value, ct_tensor **q, ct_tensor **k, ct_tensor **v) {
    const int64_t e = a->embed_dim;
    ct_tensor *b[3] = {NULL, NULL, NULL};
    if (!a->same_embed_dim) {
        if (a->in_proj_bias) ct_chunk(a->in_proj_bias, 3, 0, b, 3);
        *q = ct_linear(query, a->q_proj_weight, b[0]);
        *k = ct_linear(key, a->k_proj_weight, b[1]);
        *v = ct_linear(value, a->v_proj_weight, b[2]);
        return;
    }
    const ct_tensor *w = a->in_proj_weight, *bias = a->in_proj_bias;
    if (c->k_is_v && c->q_is_k) {
        /* proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous() */
        ct_tensor *proj = CT_CALL("aten::unflatten.int", CT_T(ct_linear(query, w, bias)), CT_I(-1), CT_INTS(3, e));
        proj = ct_contiguous(ct_squeeze_dim(ct_transpose(ct_unsqueeze(proj, 0), 0, -2), -2));
        *q = ct_select(proj, 0, 0);
        *k = ct_select(proj, 0, 1);
        *v = ct_select(proj, 0, 2);
    } else if (c->k_is_v) {
        ct_tensor *w_parts[2] = {NULL, NULL}, *b_parts[2] = {NULL, NULL};
        CT_CALL_N("aten::split_with_sizes", 2, w_parts, CT_T(w), CT_INTS(e, 2 * e));
        if (bias) CT_CALL_N("aten::split_with_sizes", 2, b_parts, CT_T(bias), CT_INTS(e, 2 * e));
        *q = ct_linear(query, w_parts[0], b_parts[0]);
        ct_tensor *kv =
            CT_CALL("aten::unflatten.int", CT_T(ct_linear(key, w_parts[1], b_parts[1])), CT_I(-1), CT_INTS(2, e));
        kv = ct_contiguous(ct_squeeze_dim(ct_transpose(ct_unsqueeze(kv, 0), 0, -2), -2));
        *k = ct_select(kv, 0, 0);
        *v = ct_select(kv, 0, 1);
    } else {
        ct_tensor *w_parts[3] = {NULL, NULL, NULL};
        ct_chunk(w, 3, 0, w_parts, 3);
        if (bias) ct_chunk(bias, 3, 0, b, 3);
        *q = ct_linear(query, w_parts[0], b[0]);
        *k = ct_linear(key, w_parts[1], b[1]);
        *v = ct_linear(value, w_parts[2], b[2]);
    }
}

/* attn_mask checked and made 3-D: (L, S) -> (1, L, S), or (N * H, L, S). */
static int attn_mask_3d(const Mha *a, const ct_tensor *mask, int64_t tgt_len, int64_t src_len, int64_t bsz,
                        const ct_tensor **out) {
    char got[64];
    shape_text(mask, got, sizeof got);
    *out = NULL;
    if (ct_ndim(mask) == 2) {
        if (ct_size(mask, 0) != tgt_len || ct_size(mask, 1) != src_len)
            return ct_set_error(CT_ESHAPE, "%s: the shape of the 2D attn_mask is %s, but should be [%lld, %lld]", kType,
                                got, (long long)tgt_len, (long long)src_len);
        *out = ct_unsqueeze(mask, 0);
        return *out ? CT_OK : ct_last_code();
    }
    if (ct_size(mask, 0) != bsz * a->num_heads || ct_size(mask, 1) != tgt_len || ct_size(mask, 2) != src_len)
        return ct_set_error(CT_ESHAPE, "%s: the shape of the 3D attn_mask is %s, but should be [%lld, %lld, %lld]",
                            kType, got, (long long)(bsz * a->num_heads), (long long)tgt_len, (long long)src_len);
    *out = mask;
    return CT_OK;
}

/* need_weights: the explicit path, softmax(q k^T / sqrt(d) + mask) v, and
 * the weights (averaged over heads, or [N, H, L, S]). q, k, v are
 * [N * H, L or S, head_dim]. */
static ct_tensor *attend_with_weights(const Mha *a, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                                      const ct_tensor *mask, double dropout_p, bool average, int64_t tgt_len,
                                      int64_t src_len, int64_t bsz, ct_tensor **weights) {
    ct_tensor *q_scaled = ct_mul_scalar(q, sqrt(1.0 / (double)ct_size(q, -1)));
    ct_tensor *kt = ct_transpose(k, -2, -1);
    ct_tensor *w = mask ? CT_CALL("aten::baddbmm", CT_T(mask), CT_T(q_scaled), CT_T(kt)) : ct_bmm(q_scaled, kt);
    w = ct_softmax(w, -1);
    if (dropout_p > 0.0) w = ct_dropout(w, dropout_p, true);
    ct_tensor *out = ct_bmm(w, v);
    out = ct_view(ct_contiguous(ct_transpose(out, 0, 1)), CT_SHAPE(tgt_len * bsz, a->embed_dim));
    out = ct_linear(out, a->out_weight, a->out_bias);
    out = ct_view(out, CT_SHAPE(tgt_len, bsz, ct_size(out, 1)));
    w = ct_view(w, CT_SHAPE(bsz, a->num_heads, tgt_len, src_len));
    *weights = average ? ct_mean_dim(w, CT_DIMS(1), false) : w;
    return out;
}

/* need_weights=False: scaled_dot_product_attention on [N, H, L, d]. */
static ct_tensor *attend_sdpa(const Mha *a, const ct_tensor *q, const ct_tensor *k, const ct_tensor *v,
                              const ct_tensor *mask, double dropout_p, bool is_causal, int64_t tgt_len, int64_t src_len,
                              int64_t bsz) {
    const int64_t h = a->num_heads, d = a->head_dim;
    if (mask) {
        if (ct_size(mask, 0) == 1 && ct_ndim(mask) == 3)
            mask = ct_unsqueeze(mask, 0);
        else
            mask = ct_view(mask, CT_SHAPE(bsz, h, -1, src_len));
    }
    ct_tensor *out = ct_scaled_dot_product_attention(
        ct_view(q, CT_SHAPE(bsz, h, tgt_len, d)), ct_view(k, CT_SHAPE(bsz, h, src_len, d)),
        ct_view(v, CT_SHAPE(bsz, h, src_len, d)), mask, dropout_p, is_causal, 0.0);
    out = ct_view(ct_contiguous(ct_permute(out, CT_DIMS(2, 0, 1, 3))), CT_SHAPE(bsz * tgt_len, a->embed_dim));
    out = ct_linear(out, a->out_weight, a->out_bias);
    return ct_view(out, CT_SHAPE(tgt_len, bsz, ct_size(out, 1)));
}

/* F.multi_head_attention_forward on sequence-first inputs, masks already
 * canonical: the output, and the weights when c->need_weights. */
static ct_tensor *mha_forward_seq_first(const Mha *a, bool training, const MhaCall *c, const ct_tensor *query,
                                        const ct_tensor *key, const ct_tensor *value, const ct_tensor *kpm,
                                        const ct_tensor *attn_mask, bool batched, ct_tensor **weights) {
    if (!batched) { /* a batch of one; `query is key` no longer holds for the unsqueezed copies */
        query = ct_unsqueeze(query, 1);
        key = ct_unsqueeze(key, 1);
        value = ct_unsqueeze(value, 1);
        if (kpm) kpm = ct_unsqueeze(kpm, 0);
    }
    const MhaCall same = {.q_is_k = batched && c->q_is_k, .k_is_v = batched && c->k_is_v};
    const int64_t tgt_len = ct_size(query, 0), bsz = ct_size(query, 1), h = a->num_heads;
    int64_t src_len = ct_size(key, 0);
    bool is_causal = c->is_causal;
    if (is_causal && !attn_mask) {
        ct_set_error(CT_EINVAL, "%s: need attn_mask if specifying the is_causal hint", kType);
        return NULL;
    }
    if (is_causal && !kpm && !c->need_weights)
        attn_mask = NULL; /* SDPA's is_causal does the masking */
    else if (kpm)
        is_causal = false; /* the merged mask is no longer causal */
    if (ct_size(key, 0) != ct_size(value, 0) || ct_size(key, 1) != ct_size(value, 1) ||
        (a->same_embed_dim && ct_size(key, 2) != ct_size(value, 2))) {
        ct_set_error(CT_ESHAPE, "%s: key's sequence and batch dims do not match value's", kType);
        return NULL;
    }
    ct_tensor *q, *k, *v;
    in_projection(a, &same, query, key, value, &q, &k, &v);
    if (attn_mask && attn_mask_3d(a, attn_mask, tgt_len, src_len, bsz, &attn_mask) != CT_OK) return NULL;
    q = ct_transpose(ct_view(q, CT_SHAPE(tgt_len, bsz * h, a->head_dim)), 0, 1);
    k = ct_transpose(ct_view(k, CT_SHAPE(ct_size(k, 0), bsz * h, a->head_dim)), 0, 1);
    v = ct_transpose(ct_view(v, CT_SHAPE(ct_size(v, 0), bsz * h, a->head_dim)), 0, 1);
    src_len = ct_size(k, 1);
    if (kpm) {
        if (ct_size(kpm, 0) != bsz || ct_size(kpm, 1) != src_len) {
            ct_set_error(CT_ESHAPE,
                         "%s: expected key_padding_mask of shape [%lld, %lld] (batch, source length), got [%lld, %lld]",
                         kType, (long long)bsz, (long long)src_len, (long long)ct_size(kpm, 0),
                         (long long)ct_size(kpm, 1));
            return NULL;
        }
        ct_tensor *merged = ct_reshape(ct_expand(ct_view(kpm, CT_SHAPE(bsz, 1, 1, src_len)), CT_SHAPE(-1, h, -1, -1)),
                                       CT_SHAPE(bsz * h, 1, src_len));
        attn_mask = attn_mask ? ct_add(attn_mask, merged) : merged;
    }
    const double dropout_p = training ? a->dropout : 0.0;
    ct_tensor *out;
    if (c->need_weights)
        out = attend_with_weights(a, q, k, v, attn_mask, dropout_p, c->average_attn_weights, tgt_len, src_len, bsz,
                                  weights);
    else
        out = attend_sdpa(a, q, k, v, attn_mask, dropout_p, is_causal, tgt_len, src_len, bsz);
    if (!batched) {
        out = ct_squeeze_dim(out, 1);
        if (c->need_weights) *weights = ct_squeeze_dim(*weights, 0);
    }
    return out;
}

/* MultiheadAttention.forward: masks made canonical, batch-first inputs
 * turned sequence-first and the output back. */
static ct_tensor *mha_forward(ct_module *self, const MhaCall *c, ct_tensor **weights) {
    const Mha *a = ct_nn_user(self);
    bool batched = false;
    if (check_dims(a, c, &batched) != CT_OK) return NULL;
    const ct_dtype dtype = ct_dtype_of(c->query);
    const ct_tensor *kpm, *attn_mask;
    if (canonical_mask(c->key_padding_mask, "key_padding_mask", dtype, &kpm) != CT_OK ||
        canonical_mask(c->attn_mask, "attn_mask", dtype, &attn_mask) != CT_OK)
        return NULL;
    const ct_tensor *query = c->query, *key = c->key, *value = c->value;
    const bool flip = a->batch_first && batched;
    if (flip) { /* the transposes keep `query is key` and `key is value` */
        query = ct_transpose(query, 1, 0);
        key = c->q_is_k ? query : ct_transpose(key, 1, 0);
        value = c->k_is_v ? key : ct_transpose(value, 1, 0);
    }
    ct_tensor *out =
        mha_forward_seq_first(a, ct_nn_is_training(self), c, query, key, value, kpm, attn_mask, batched, weights);
    return flip ? ct_transpose(out, 1, 0) : out;
}

/* forward(query, key, value, key_padding_mask=None, need_weights=True,
 * attn_mask=None, average_attn_weights=True, is_causal=False) ->
 * (attn_output, attn_weights or None). */
static ct_value *mha_call(ct_module *self, const ct_value *args, const ct_value *kwargs) {
    MhaCall c;
    if (bind_call(args, kwargs, &c) != CT_OK) return cti_layer_failed(kType);
    ct_scope *scope = ct_scope_begin();
    ct_tensor *weights = NULL;
    ct_tensor *out = mha_forward(self, &c, &weights);
    ct_value *r = NULL;
    if (out && (!c.need_weights || weights)) {
        r = ct_value_tuple();
        ct_value_list_append(r, cti_layer_value(out));
        ct_value_list_append(r, weights ? cti_layer_value(weights) : ct_value_none());
    }
    ct_scope_end(scope);
    return r ? r : cti_layer_failed(kType);
}

/* ---- construction ---------------------------------------------------------------------- */

static int check_sizes(int64_t embed_dim, int64_t num_heads, const ct_mha_opts *o) {
    if (embed_dim <= 0 || num_heads <= 0)
        return ct_set_error(
            CT_EINVAL,
            "%s: embed_dim and num_heads must be greater than 0, got embed_dim=%lld and num_heads=%lld instead", kType,
            (long long)embed_dim, (long long)num_heads);
    if (embed_dim % num_heads != 0)
        return ct_set_error(CT_EINVAL,
                            "%s: embed_dim must be divisible by num_heads, got embed_dim=%lld and num_heads=%lld",
                            kType, (long long)embed_dim, (long long)num_heads);
    if (o->kdim < 0 || o->vdim < 0)
        return ct_set_error(CT_EINVAL, "%s: kdim and vdim must be positive (or 0 for embed_dim), got %lld and %lld",
                            kType, (long long)o->kdim, (long long)o->vdim);
    if (!(o->dropout >= 0.0 && o->dropout <= 1.0))
        return ct_set_error(CT_EINVAL, "%s: dropout probability has to be between 0 and 1, but got %g", kType,
                            o->dropout);
    return CT_OK;
}

/* MultiheadAttention.__init__: the projections' parameters (empty), then
 * out_proj = Linear(E, E), which draws its weight and bias, then
 * _reset_parameters: xavier_uniform_ on the projections, biases zeroed. */
static int make_parameters(ct_module *m, Mha *a, bool bias) {
    const int64_t e = a->embed_dim;
    ct_module *out_proj = ct_nn_add_module(m, "out_proj", ct_nn_linear(e, e, bias));
    if (!out_proj) return ct_last_code();
    a->out_weight = ct_nn_get(out_proj, "weight");
    a->out_bias = bias ? ct_nn_get(out_proj, "bias") : NULL;
    if (a->same_embed_dim) {
        a->in_proj_weight =
            cti_layer_param(m, "in_proj_weight", CT_SHAPE(3 * e, e), cti_layer_init_xavier_uniform, 1.0, 0);
        if (!a->in_proj_weight) return ct_last_code();
    } else {
        a->q_proj_weight = cti_layer_param(m, "q_proj_weight", CT_SHAPE(e, e), cti_layer_init_xavier_uniform, 1.0, 0);
        a->k_proj_weight = a->q_proj_weight ? cti_layer_param(m, "k_proj_weight", CT_SHAPE(e, a->kdim),
                                                             cti_layer_init_xavier_uniform, 1.0, 0)
                                            : NULL;
        a->v_proj_weight = a->k_proj_weight ? cti_layer_param(m, "v_proj_weight", CT_SHAPE(e, a->vdim),
                                                             cti_layer_init_xavier_uniform, 1.0, 0)
                                            : NULL;
        if (!a->v_proj_weight) return ct_last_code();
    }
    if (!bias) return CT_OK;
    a->in_proj_bias = cti_layer_param(m, "in_proj_bias", CT_SHAPE(3 * e), cti_layer_init_constant, 0.0, 0);
    if (!a->in_proj_bias) return ct_last_code();
    ct_guard *g = ct_no_grad();
    int rc = cti_layer_init_constant(a->out_bias, 0.0, 0);
    ct_guard_end(g);
    return rc;
}

ct_module *ct_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, const ct_mha_opts *opts) {
    const ct_mha_opts o = opts ? *opts : ct_mha_defaults();
    if (check_sizes(embed_dim, num_heads, &o) != CT_OK) return NULL;
    Mha *a = calloc(1, sizeof *a);
    if (!a) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory", kType);
        return NULL;
    }
    a->embed_dim = embed_dim;
    a->num_heads = num_heads;
    a->head_dim = embed_dim / num_heads;
    a->kdim = o.kdim ? o.kdim : embed_dim;
    a->vdim = o.vdim ? o.vdim : embed_dim;
    a->same_embed_dim = a->kdim == embed_dim && a->vdim == embed_dim;
    a->dropout = o.dropout;
    a->batch_first = o.batch_first;
    ct_module *m = ct_nn_module_value(kType, mha_call, a, free);
    if (!m) {
        free(a);
        return NULL;
    }
    if (make_parameters(m, a, o.bias) != CT_OK) {
        cti_layer_failed(kType);
        ct_nn_free(m);
        return NULL;
    }
    return m;
}
