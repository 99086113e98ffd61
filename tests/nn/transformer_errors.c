/* tests/nn/transformer_errors.c — nn.MultiheadAttention and the transformer
 * layers given bad input: every failure is an error whose message names the
 * layer, never a crash.
 *
 *   - construction: num_heads not dividing embed_dim, sizes <= 0, an
 *     unknown activation, no layers, a bad dropout;
 *   - forward: the wrong embedding dim, masks of the wrong shape or dtype,
 *     is_causal without a mask, a query of the wrong rank, unknown or
 *     missing arguments, arguments of the wrong kind, src and tgt that do
 *     not fit a Transformer;
 *   - what works: ct_nn_type, ct_nn_forward on a layer (one tensor in, one
 *     out), a stack moved to float64; no tensor handle left behind once the
 *     modules are freed. */
#include <stdlib.h>

#include "ct_test.h"

/* (args...) and {kwargs...} for ct_nn_call: tensors by handle (aliased). */
static ct_value *tensors(int n, ct_tensor *const *ts) {
    ct_value *t = ct_value_tuple();
    for (int i = 0; i < n; i++) ct_value_list_append(t, ct_value_tensor(ct_alias(ts[i])));
    return t;
}

/* m(args..., **{key: value}) with one keyword (value NULL: none); the
 * result is freed; returns whether the call succeeded. */
static bool call1(ct_module *m, int n, ct_tensor *const *ts, const char *key, ct_value *value) {
    ct_value *args = tensors(n, ts), *kwargs = ct_value_dict();
    if (key) ct_value_dict_set(kwargs, key, value);
    ct_value *r = ct_nn_call(m, args, kwargs);
    ct_value_free(args);
    ct_value_free(kwargs);
    bool ok = r != NULL;
    ct_value_free(r);
    return ok;
}

static ct_value *tv(ct_tensor *t) { return ct_value_tensor(ct_alias(t)); }

static void construction(void) {
    CHECK(!ct_nn_multihead_attention(10, 3, NULL));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: embed_dim must be divisible by num_heads");
    CHECK(!ct_nn_multihead_attention(0, 2, NULL));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: embed_dim and num_heads must be greater than 0");
    ct_mha_opts mo = ct_mha_defaults();
    mo.dropout = 1.5;
    CHECK(!ct_nn_multihead_attention(16, 4, &mo));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: dropout probability has to be between 0 and 1");

    ct_transformer_opts o = ct_transformer_defaults();
    o.dim_feedforward = 32;
    o.activation = "tanh";
    CHECK(!ct_nn_transformer_encoder_layer(16, 4, &o));
    CHECK_ERR(CT_EINVAL, "TransformerEncoderLayer: activation should be relu/gelu, not tanh");
    o.activation = "gelu";
    CHECK(!ct_nn_transformer_decoder_layer(16, 3, &o));
    CHECK_ERR(CT_EINVAL, "TransformerDecoderLayer: MultiheadAttention: embed_dim must be divisible by num_heads");
    CHECK(!ct_nn_transformer_encoder(16, 4, 0, true, &o));
    CHECK_ERR(CT_EINVAL, "TransformerEncoder: num_layers must be at least 1, got 0");
    CHECK(!ct_nn_transformer(16, 5, 1, 1, &o));
    CHECK_ERR(CT_EINVAL, "Transformer: TransformerEncoder: TransformerEncoderLayer: MultiheadAttention: embed_dim");
    o.dropout = -0.1;
    CHECK(!ct_nn_transformer_decoder(16, 4, 2, false, &o));
    CHECK_ERR(CT_EINVAL, "dropout probability has to be between 0 and 1");
}

static void attention_forward(void) {
    ct_module *mha = ct_nn_multihead_attention(16, 4, NULL);
    CHECK(mha && !strcmp(ct_nn_type(mha), "MultiheadAttention"));
    ct_tensor *x = ct_randn(CT_SHAPE(5, 2, 16), NULL), *x8 = ct_randn(CT_SHAPE(5, 2, 8), NULL);
    ct_tensor *xxx[3] = {x, x, x}, *bad[3] = {x8, x8, x8};
    CHECK(call1(mha, 3, xxx, NULL, NULL));

    CHECK(!call1(mha, 3, bad, NULL, NULL));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: was expecting embedding dimension of 16, but got 8");
    ct_tensor *x4 = ct_randn(CT_SHAPE(1, 5, 2, 16), NULL);
    CHECK(!call1(mha, 3, (ct_tensor *[]){x4, x4, x4}, NULL, NULL));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: query should be unbatched 2D or batched 3D tensor");
    CHECK(!call1(mha, 3, (ct_tensor *[]){x, ct_randn(CT_SHAPE(7, 2, 16), NULL), x}, NULL, NULL));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: key's sequence and batch dims do not match value's");

    CHECK(!call1(mha, 3, xxx, "attn_mask", tv(ct_zeros(CT_SHAPE(4, 5), NULL))));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: the shape of the 2D attn_mask is [4, 5], but should be [5, 5]");
    CHECK(!call1(mha, 3, xxx, "attn_mask", tv(ct_zeros(CT_SHAPE(4, 5, 5), NULL))));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: the shape of the 3D attn_mask is [4, 5, 5], but should be [8, 5, 5]");
    CHECK(!call1(mha, 3, xxx, "attn_mask", tv(ct_zeros(CT_SHAPE(5), NULL))));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: expected attn_mask to be None, 2-D or 3-D but found 1-D");
    CHECK(!call1(mha, 3, xxx, "attn_mask", tv(ct_zeros(CT_SHAPE(5, 5), &(ct_topts){.dtype = CT_I64}))));
    CHECK_ERR(CT_EDTYPE, "MultiheadAttention: only bool and floating types of attn_mask are supported");
    CHECK(!call1(mha, 3, xxx, "key_padding_mask", tv(ct_zeros(CT_SHAPE(3, 5), &(ct_topts){.dtype = CT_BOOL}))));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: expected key_padding_mask of shape [2, 5]");
    CHECK(!call1(mha, 3, xxx, "key_padding_mask", tv(ct_zeros(CT_SHAPE(2, 5, 1), NULL))));
    CHECK_ERR(CT_ESHAPE, "MultiheadAttention: for batched (3-D) query, expected key_padding_mask to be None or 2-D");
    CHECK(!call1(mha, 3, xxx, "is_causal", ct_value_bool(true)));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: need attn_mask if specifying the is_causal hint");

    CHECK(!call1(mha, 3, xxx, "mask", ct_value_none()));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: forward() got an unexpected keyword argument 'mask'");
    CHECK(!call1(mha, 1, xxx, NULL, NULL));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: forward() missing required argument 'key'");
    CHECK(!call1(mha, 3, xxx, "query", tv(x)));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: forward() got multiple values for argument 'query'");
    CHECK(!call1(mha, 3, xxx, "need_weights", ct_value_int(1)));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: argument 'need_weights' must be a bool or None, got a int");
    CHECK(!call1(mha, 3, xxx, "attn_mask", ct_value_str("causal")));
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: argument 'attn_mask' must be a tensor or None, got a str");

    CHECK(!ct_nn_forward(mha, x)); /* forward(x): attention needs key and value too */
    CHECK_ERR(CT_EINVAL, "MultiheadAttention: forward() missing required argument 'key'");
    ct_nn_free(mha);
}

static void layers_forward(void) {
    ct_transformer_opts o = ct_transformer_defaults();
    o.dim_feedforward = 32;
    ct_module *enc = ct_nn_transformer_encoder(16, 4, 2, true, &o);
    ct_module *layer = ct_nn_transformer_encoder_layer(16, 4, &o);
    ct_module *dec = ct_nn_transformer_decoder_layer(16, 4, &o);
    ct_module *tf = ct_nn_transformer(16, 4, 1, 1, &o);
    CHECK(enc && !strcmp(ct_nn_type(enc), "TransformerEncoder"));
    CHECK(enc && !strcmp(ct_nn_type(ct_nn_child(enc, "layers")), "ModuleList"));
    CHECK(enc && !strcmp(ct_nn_type(ct_nn_child(enc, "layers.1")), "TransformerEncoderLayer"));
    CHECK(enc && !strcmp(ct_nn_type(ct_nn_child(enc, "layers.1.self_attn")), "MultiheadAttention"));
    CHECK(dec && !strcmp(ct_nn_type(dec), "TransformerDecoderLayer"));
    CHECK(tf && !strcmp(ct_nn_type(tf), "Transformer"));
    CHECK(tf && !strcmp(ct_nn_type(ct_nn_child(tf, "decoder")), "TransformerDecoder"));

    ct_tensor *x = ct_randn(CT_SHAPE(5, 2, 16), NULL), *y = ct_nn_forward(layer, x);
    CHECK(y && ct_ndim(y) == 3 && ct_size(y, 0) == 5 && ct_size(y, 2) == 16);
    CHECK(!ct_nn_forward(layer, ct_randn(CT_SHAPE(5, 2, 8), NULL)));
    CHECK_ERR(CT_ESHAPE, "TransformerEncoderLayer: expected src of 2 or 3 dims whose last is d_model=16");
    CHECK(!call1(enc, 1, &x, "mask", tv(ct_zeros(CT_SHAPE(5, 4), NULL))));
    CHECK_ERR(CT_ESHAPE, "TransformerEncoder: MultiheadAttention: the shape of the 2D attn_mask is [5, 4]");
    CHECK(!call1(enc, 1, &x, "src_mask", ct_value_none()));
    CHECK_ERR(CT_EINVAL, "TransformerEncoder: forward() got an unexpected keyword argument 'src_mask'");
    CHECK(!call1(enc, 1, &x, "is_causal", ct_value_str("yes")));
    CHECK_ERR(CT_EINVAL, "TransformerEncoder: argument 'is_causal' must be a bool or None");
    CHECK(!call1(dec, 1, &x, NULL, NULL));
    CHECK_ERR(CT_EINVAL, "TransformerDecoderLayer: forward() missing required argument 'memory'");
    CHECK(!call1(dec, 2, (ct_tensor *[]){x, x}, "memory_key_padding_mask", tv(ct_zeros(CT_SHAPE(2, 4), NULL))));
    CHECK_ERR(CT_ESHAPE, "TransformerDecoderLayer: MultiheadAttention: expected key_padding_mask of shape [2, 5]");

    ct_tensor *tgt3 = ct_randn(CT_SHAPE(4, 3, 16), NULL), *tgt8 = ct_randn(CT_SHAPE(4, 2, 8), NULL);
    CHECK(call1(tf, 2, (ct_tensor *[]){x, ct_randn(CT_SHAPE(4, 2, 16), NULL)}, NULL, NULL));
    CHECK(!call1(tf, 2, (ct_tensor *[]){x, tgt3}, NULL, NULL));
    CHECK_ERR(CT_ESHAPE, "Transformer: the batch number of src and tgt must be equal");
    CHECK(!call1(tf, 2, (ct_tensor *[]){x, tgt8}, NULL, NULL));
    CHECK_ERR(CT_ESHAPE, "Transformer: the feature number of src and tgt must be equal to d_model");
    CHECK(!call1(tf, 2, (ct_tensor *[]){x, ct_randn(CT_SHAPE(4, 2, 16), NULL)}, "tgt_mask",
                 tv(ct_zeros(CT_SHAPE(5, 5), NULL))));
    CHECK_ERR(CT_ESHAPE,
              "Transformer: MultiheadAttention: the shape of the 2D attn_mask is [5, 5], but should be [4, 4]");
    /* module.double(): the layers read their (same) parameters, now float64 */
    ct_tensor *x64 = ct_to_dtype(x, CT_F64);
    CHECK_OK(ct_nn_to_dtype(enc, CT_F64));
    ct_tensor *y64 = ct_nn_forward(enc, x64);
    CHECK(y64 && ct_dtype_of(y64) == CT_F64);
    CHECK(call1(enc, 1, &x64, "src_key_padding_mask", tv(ct_zeros(CT_SHAPE(2, 5), &(ct_topts){.dtype = CT_BOOL}))));
    ct_nn_free(enc);
    ct_nn_free(layer);
    ct_nn_free(dec);
    ct_nn_free(tf);
}

int main(void) {
    ct_manual_seed(0);
    size_t live = ct_tensor_live_count();
    construction();
    ct_scope *s = ct_scope_begin();
    attention_forward();
    layers_forward();
    ct_scope_end(s);
    CHECK(ct_tensor_live_count() == live);
    return ct_test_result("nn_transformer_errors");
}
