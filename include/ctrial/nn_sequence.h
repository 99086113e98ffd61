/*
 * ctrial/nn_sequence.h — layers for sequences: nn.RNN, nn.LSTM, nn.GRU,
 * nn.MultiheadAttention, nn.TransformerEncoderLayer / DecoderLayer and the
 * stacks built of them, nn.Transformer.
 *
 * They are written in C on the public API (module nn, src/nn/), as Python
 * builds them from other layers and functional calls, and are modules like
 * any other (nn.h, which includes this header): the same state-dict names
 * and initialisation as PyTorch's, value modules called with ct_nn_call
 * (or ct_nn_callf and ct_nn_forwardf, the arguments after a format).
 *
 *     ct_rnn_opts o = ct_rnn_defaults();
 *     o.batch_first = true;
 *     ct_module *lstm = ct_nn_lstm(64, 128, &o);
 *     ct_value *out = ct_nn_callf(lstm, "t, v", x, hx);   // lstm(x, (h_0, c_0)): (output, (h_n, c_n))
 */
#ifndef CTRIAL_NN_SEQUENCE_H
#define CTRIAL_NN_SEQUENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- recurrent layers: nn.RNN, nn.LSTM, nn.GRU -------------------------
 * Value modules, as in Python: ct_nn_call(m, (input[, hx]), NULL) returns
 * (output, h_n) for RNN and GRU, (output, (h_n, c_n)) for LSTM; input is
 * [T, N, input_size] ([N, T, ...] with batch_first, [T, input_size]
 * unbatched). Parameters are PyTorch's flat names (weight_ih_l0,
 * weight_hh_l0, bias_ih_l0, bias_hh_l0, then _reverse for the backward
 * direction, for each layer), each drawn from U(-1/sqrt(hidden),
 * 1/sqrt(hidden)) in that order. hx may also be the keyword "hx", or None
 * (zeros of the input's dtype and device); unbatched, hx is
 * [num_layers * num_directions, hidden] and the outputs lose the batch
 * dim, as in Python. Errors name the layer ("LSTM: input.size(-1) must be
 * equal to input_size. Expected 4, got 5"): CT_ESHAPE for shapes,
 * CT_EDTYPE for an input dtype other than the weights', CT_EINVAL for the
 * arguments. No PackedSequence, no proj_size. */
typedef struct {
    int64_t num_layers;       /* 1 */
    bool bias;                /* true */
    bool batch_first;         /* false */
    double dropout;           /* 0: on each layer's output but the last, in training */
    bool bidirectional;       /* false */
    const char *nonlinearity; /* nn.RNN only: "tanh" (default; NULL too) or "relu"; LSTM and GRU refuse others */
} ct_rnn_opts;
CT_API ct_rnn_opts ct_rnn_defaults(void);
CT_API ct_module *ct_nn_rnn(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts);
CT_API ct_module *ct_nn_lstm(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts);
CT_API ct_module *ct_nn_gru(int64_t input_size, int64_t hidden_size, const ct_rnn_opts *opts);

/* ---- attention and transformers ----------------------------------------
 * nn.MultiheadAttention: a value module, forward(query, key, value,
 * key_padding_mask=None, need_weights=True, attn_mask=None,
 * average_attn_weights=True, is_causal=False) -> (attn_output,
 * attn_weights or None), by position or keyword. Parameters
 * in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
 * (q_proj_weight, k_proj_weight, v_proj_weight when kdim or vdim differ
 * from embed_dim), initialised as PyTorch does. */
typedef struct {
    double dropout;    /* 0 */
    bool bias;         /* true */
    int64_t kdim, vdim; /* 0: embed_dim */
    bool batch_first;  /* false */
} ct_mha_opts;
CT_API ct_mha_opts ct_mha_defaults(void);
CT_API ct_module *ct_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, const ct_mha_opts *opts);

/* nn.TransformerEncoderLayer / DecoderLayer and the stacks built of them,
 * with PyTorch's names (self_attn.*, linear1.*, norm1.*, ...) and
 * initialisation. Value modules, their arguments bound as in Python, by
 * position or keyword:
 *   encoder layer: forward(src, src_mask=None, src_key_padding_mask=None,
 *       is_causal=False) -> tensor
 *   encoder: forward(src, mask=None, src_key_padding_mask=None,
 *       is_causal=None) -> tensor
 *   decoder layer, decoder: forward(tgt, memory, tgt_mask=None,
 *       memory_mask=None, tgt_key_padding_mask=None,
 *       memory_key_padding_mask=None, tgt_is_causal=False (None for the
 *       decoder), memory_is_causal=False) -> tensor
 *   transformer: forward(src, tgt, src_mask=None, tgt_mask=None,
 *       memory_mask=None, src_key_padding_mask=None,
 *       tgt_key_padding_mask=None, memory_key_padding_mask=None,
 *       src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)
 * An is_causal of None (or absent) on a stack detects a square causal mask,
 * as Python does. The stacks are nn.TransformerEncoder(layer, num_layers,
 * norm) with the layer's copies identical at the start (Python deep-copies
 * one layer; num_layers >= 1), and a final LayerNorm(d_model,
 * eps=layer_norm_eps, bias=bias) when `norm`; nn.Transformer has both
 * stacks with their norms and re-draws every matrix with xavier_uniform_,
 * as Python's does. Python's eval-mode fast paths are not taken: results
 * are those of torch.backends.mha.set_fastpath_enabled(False) (within
 * about 5e-7 of the fast path's, which zeroes padded positions where a
 * nested tensor drops them). */
typedef struct {
    int64_t dim_feedforward; /* 2048 */
    double dropout;          /* 0.1 */
    const char *activation;  /* "relu" (default) or "gelu" */
    double layer_norm_eps;   /* 1e-5 */
    bool batch_first;        /* false */
    bool norm_first;         /* false */
    bool bias;               /* true */
} ct_transformer_opts;
CT_API ct_transformer_opts ct_transformer_defaults(void);
CT_API ct_module *ct_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, const ct_transformer_opts *opts);
CT_API ct_module *ct_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, const ct_transformer_opts *opts);
CT_API ct_module *ct_nn_transformer_encoder(int64_t d_model, int64_t nhead, int64_t num_layers, bool norm,
                                            const ct_transformer_opts *opts);
CT_API ct_module *ct_nn_transformer_decoder(int64_t d_model, int64_t nhead, int64_t num_layers, bool norm,
                                            const ct_transformer_opts *opts);
CT_API ct_module *ct_nn_transformer(int64_t d_model, int64_t nhead, int64_t num_encoder_layers,
                                    int64_t num_decoder_layers, const ct_transformer_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
