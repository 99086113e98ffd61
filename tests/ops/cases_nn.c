/* tests/ops/cases_nn.c — linear algebra, convolution, pooling, activations,
 * normalisation, embedding, attention, losses. Twins: cases_nn.py. */
#include "parity.h"

#include <stdio.h>

void case_matmul(void) {
    ct_tensor *v1 = RN64G(4), *v2 = RN64G(4), *m = RN64G(3, 4), *v3 = RN64G(3);
    ct_tensor *ba = RN64G(2, 1, 3, 4), *bb = RN64G(5, 4, 2);
    ct_tensor *mb = RN64G(4, 2), *b1 = RN64G(2, 3, 4), *b2 = RN64G(2, 4, 5);
    ct_tensor *x = RN64G(5, 4), *w = RN64G(3, 4), *bias = RN64G(3), *x3 = RN64G(2, 5, 4);
    ct_tensor *f1 = RNG(16, 32), *f2 = RNG(32, 8), *fx = RNG(7, 32), *fw = RNG(10, 32), *fb = RNG(10);
    ct_tensor *fb1 = RNG(3, 9, 17), *fb2 = RNG(3, 17, 6);
    outs o = {0};
    out(&o, "dot_1d_1d", ct_matmul(v1, v2));
    out(&o, "mat_vec", ct_matmul(m, v1));
    out(&o, "vec_mat", ct_matmul(v3, m));
    out(&o, "batched_broadcast", ct_matmul(ba, bb));
    out(&o, "mm", ct_mm(m, mb));
    out(&o, "bmm", ct_bmm(b1, b2));
    out(&o, "linear_bias", ct_linear(x, w, bias));
    out(&o, "linear_no_bias", ct_linear(x, w, NULL));
    out(&o, "linear_3d", ct_linear(x3, w, bias));
    out(&o, "linear_1d", ct_linear(v1, w, bias));
    out(&o, "f32_mm", ct_mm(f1, f2));
    out(&o, "f32_matmul", ct_matmul(f1, f2));
    out(&o, "f32_bmm", ct_bmm(fb1, fb2));
    out(&o, "f32_linear_bias", ct_linear(fx, fw, fb));
    out(&o, "f32_linear_no_bias", ct_linear(fx, fw, NULL));
    bw_outs(&o);
    const char *names[] = {"v1", "v2", "m", "v3", "ba", "bb", "mb", "b1", "b2", "x", "w", "bias", "x3",
                           "f1", "f2", "fx", "fw", "fb", "fb1", "fb2"};
    ct_tensor *ins[] = {v1, v2, m, v3, ba, bb, mb, b1, b2, x, w, bias, x3, f1, f2, fx, fw, fb, fb1, fb2};
    for (size_t i = 0; i < sizeof ins / sizeof *ins; i++) put_grad(names[i], ins[i]);
}

void case_conv(void) {
    ct_tensor *x = RNG(2, 4, 9), *w = RNG(6, 2, 3), *b = RNG(6);
    ct_tensor *X = RNG(2, 4, 7, 6), *W = RNG(4, 2, 3, 3), *B = RNG(4);
    ct_tensor *W2 = RNG(3, 4, 2, 2), *B2 = RNG(3);
    ct_tensor *X64 = RN64G(1, 2, 5, 5), *W64 = RN64G(2, 2, 3, 3);
    outs o = {0};
    out(&o, "conv1d_s2_p1_d2_g2", ct_conv1d(x, w, b, 2, 1, 2, 2));
    out(&o, "conv1d_no_bias", ct_conv1d(x, w, NULL, 1, 0, 1, 2));
    out(&o, "conv2d_p1_g2", ct_conv2d(X, W, B, 1, 1, 1, 2));
    out(&o, "conv2d_s2_no_bias", ct_conv2d(X, W2, NULL, 2, 0, 1, 1));
    out(&o, "conv2d_dilated", ct_conv2d(X, W2, B2, 1, 2, 2, 1));
    out(&o, "conv2d_ex_asym",
        ct_conv2d_ex(X, W2, B2, (const int64_t[]){2, 1}, (const int64_t[]){1, 0}, (const int64_t[]){1, 2}, 1));
    out(&o, "conv2d_ex_asym_g2",
        ct_conv2d_ex(X, W, B, (const int64_t[]){1, 2}, (const int64_t[]){0, 2}, (const int64_t[]){2, 1}, 2));
    out(&o, "conv2d_f64", ct_conv2d(X64, W64, NULL, 1, 1, 1, 1));
    bw_outs(&o);
    const char *names[] = {"x", "w", "b", "X", "W", "B", "W2", "B2", "X64", "W64"};
    ct_tensor *ins[] = {x, w, b, X, W, B, W2, B2, X64, W64};
    for (size_t i = 0; i < sizeof ins / sizeof *ins; i++) put_grad(names[i], ins[i]);
}

void case_pool(void) {
    ct_tensor *x1 = RNG(2, 3, 10), *X = RNG(2, 3, 7, 6), *X3 = RNG(3, 5, 5);
    outs o = {0};
    out(&o, "max_pool1d_k3_p1", ct_max_pool1d(x1, 3, 0, 1));
    out(&o, "max_pool1d_k2_s1", ct_max_pool1d(x1, 2, 1, 0));
    out(&o, "max_pool2d_k2", ct_max_pool2d(X, 2, 0, 0));
    out(&o, "max_pool2d_k3_s2_p1", ct_max_pool2d(X, 3, 2, 1));
    out(&o, "avg_pool2d_k3_s2_p1", ct_avg_pool2d(X, 3, 2, 1));
    out(&o, "avg_pool2d_k2", ct_avg_pool2d(X, 2, 0, 0));
    out(&o, "adaptive_3_2", ct_adaptive_avg_pool2d(X, 3, 2));
    out(&o, "adaptive_1_1", ct_adaptive_avg_pool2d(X, 1, 1));
    out(&o, "adaptive_up_8_7", ct_adaptive_avg_pool2d(X, 8, 7));
    out(&o, "max_pool2d_unbatched", ct_max_pool2d(X3, 2, 0, 0));
    out(&o, "adaptive_unbatched", ct_adaptive_avg_pool2d(X3, 2, 3));
    bw_outs(&o);
    put_grad("x1", x1);
    put_grad("X", X);
    put_grad("X3", X3);
}

void case_activations(void) {
    ct_tensor *x = RN64G(3, 6), *x32 = RNG(4, 17);
    ct_tensor *edge = G(F64D(S(3), -1, 0, 1));
    outs o = {0};
    out(&o, "relu", ct_relu(x));
    out(&o, "gelu", ct_gelu(x));
    out(&o, "gelu_tanh", ct_gelu_tanh(x));
    out(&o, "silu", ct_silu(x));
    out(&o, "leaky_relu_0_2", ct_leaky_relu(x, 0.2));
    out(&o, "leaky_relu_0_01", ct_leaky_relu(x, 0.01));
    out(&o, "softmax_1", ct_softmax(x, 1));
    out(&o, "softmax_0", ct_softmax(x, 0));
    out(&o, "log_softmax_neg1", ct_log_softmax(x, -1));
    out(&o, "log_softmax_0", ct_log_softmax(x, 0));
    out(&o, "f32_relu", ct_relu(x32));
    out(&o, "f32_gelu", ct_gelu(x32));
    out(&o, "f32_gelu_tanh", ct_gelu_tanh(x32));
    out(&o, "f32_silu", ct_silu(x32));
    out(&o, "f32_leaky_relu", ct_leaky_relu(x32, 0.1));
    out(&o, "f32_softmax_neg1", ct_softmax(x32, -1));
    out(&o, "f32_softmax_0", ct_softmax(x32, 0));
    out(&o, "f32_log_softmax_neg1", ct_log_softmax(x32, -1));
    out(&o, "relu_at_0", ct_relu(edge));
    out(&o, "leaky_relu_at_0", ct_leaky_relu(edge, 0.1));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("x32", x32);
    put_grad("edge", edge);
    put("softmax_inf", ct_softmax(F64D(S(3), -INFINITY, 0, 1), 0));
}

void case_dropout(void) {
    ct_tensor *x = RNG(8, 10);
    outs o = {0};
    out(&o, "train_p0_3", ct_dropout(x, 0.3, true));
    out(&o, "train_p0_5", ct_dropout(x, 0.5, true));
    out(&o, "eval", ct_dropout(x, 0.3, false));
    out(&o, "train_p1", ct_dropout(x, 1, true));
    out(&o, "train_p0", ct_dropout(x, 0, true));
    bw_outs(&o);
    put_grad("x", x);
    put("after", RN(4)); /* the generator advanced as in Python */
}

/* Masks of many draws (the shim draws them a block at a time: several
 * twists of the MT19937 per mask, and each mask starts where the last left
 * the generator), and the inputs ATen's own kernel keeps: float64, a
 * transposed (non-contiguous) input. */
void case_dropout_masks(void) {
    ct_tensor *x = RN(40, 500);
    put("p0_1", ct_dropout(x, 0.1, true));
    put("p0_9", ct_dropout(x, 0.9, true));
    put("p1_3", ct_dropout(x, 1.0 / 3.0, true));
    put("p0_5_odd", ct_dropout(RN(7, 13), 0.5, true));
    put("transposed", ct_dropout(ct_transpose(x, 0, 1), 0.25, true));
    put("f64", ct_dropout(ct_to_dtype(x, CT_F64), 0.25, true));
    put("after", RN(700)); /* crosses the next twist */
}

void case_batch_norm(void) {
    ct_tensor *x = RNG(4, 3, 5, 5), *w = RNG(3), *b = RNG(3);
    ct_tensor *x_b = RN(4, 3, 5, 5), *x2 = RNG(8, 3), *x3 = RNG(2, 3, 6);
    ct_tensor *rm = ct_zeros(S(3), NULL), *rv = ct_ones(S(3), NULL);
    outs o = {0};
    out(&o, "train", ct_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5));
    put("running_mean_1", rm);
    put("running_var_1", rv);
    out(&o, "train_second_batch", ct_batch_norm(x_b, w, b, rm, rv, true, 0.1, 1e-5));
    put("running_mean_2", rm);
    put("running_var_2", rv);
    out(&o, "eval", ct_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5));
    put("running_mean_after_eval", rm);
    put("running_var_after_eval", rv);
    out(&o, "train_no_affine_no_stats", ct_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    ct_tensor *rm2 = ct_zeros(S(3), NULL), *rv2 = ct_ones(S(3), NULL);
    out(&o, "train_2d", ct_batch_norm(x2, w, NULL, rm2, rv2, true, 0.2, 1e-3));
    put("running_mean_2d", rm2);
    put("running_var_2d", rv2);
    ct_tensor *rm3 = ct_full(S(3), 0.5, NULL), *rv3 = ct_full(S(3), 2, NULL);
    out(&o, "train_3d", ct_batch_norm(x3, NULL, b, rm3, rv3, true, 0.5, 1e-5));
    put("running_mean_3d", rm3);
    put("running_var_3d", rv3);
    out(&o, "eval_3d", ct_batch_norm(x3, w, b, rm3, rv3, false, 0.5, 1e-5));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("w", w);
    put_grad("b", b);
    put_grad("x2", x2);
    put_grad("x3", x3);
}

void case_layer_norm(void) {
    ct_tensor *x = RNG(2, 3, 4), *w = RNG(4), *b = RNG(4), *w2 = RNG(3, 4), *x64 = RN64G(5, 6);
    outs o = {0};
    out(&o, "last_dim", ct_layer_norm(x, CT_SHAPE(4), w, b, 1e-5));
    out(&o, "last_2_dims_no_affine", ct_layer_norm(x, CT_SHAPE(3, 4), NULL, NULL, 1e-5));
    out(&o, "last_2_dims_weight_only", ct_layer_norm(x, CT_SHAPE(3, 4), w2, NULL, 1e-3));
    out(&o, "f64", ct_layer_norm(x64, CT_SHAPE(6), NULL, NULL, 1e-5));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("w", w);
    put_grad("b", b);
    put_grad("w2", w2);
    put_grad("x64", x64);
}

void case_embedding(void) {
    ct_tensor *w1 = RNG(6, 3), *w2 = RNG(6, 3);
    ct_tensor *idx = I64D(S(2, 3), 0, 2, 0, 5, 1, 2);
    outs o = {0};
    out(&o, "padding_idx_0", ct_embedding(w1, idx, 0));
    out(&o, "no_padding", ct_embedding(w2, idx, -1));
    out(&o, "i32_indices", ct_embedding(w2, I32D(S(3), 4, 4, 3), -1));
    bw_outs(&o);
    put_grad("w1", w1);
    put_grad("w2", w2);
    /* The padding row gets no gradient at all, although index 0 is used. */
    ct_tensor *g = ct_grad(w1);
    put("w1.grad_row_0", g ? ct_select(g, 0, 0) : NULL);
}

void case_sdpa(void) {
    ct_tensor *q = RNG(2, 3, 4, 8), *k = RNG(2, 3, 6, 8), *v = RNG(2, 3, 6, 8);
    ct_tensor *qc = RNG(2, 2, 5, 8), *kc = RNG(2, 2, 5, 8), *vc = RNG(2, 2, 5, 8);
    ct_tensor *fm = RN(4, 6);
    ct_tensor *bm = BOOLD(S(4, 6), 1, 1, 0, 1, 0, 1, /**/ 0, 1, 1, 1, 0, 0, /**/ 1, 0, 0, 0, 0, 0,
                          /**/ 1, 1, 1, 1, 1, 1);
    outs o = {0};
    out(&o, "plain", ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0));
    out(&o, "causal", ct_scaled_dot_product_attention(qc, kc, vc, NULL, 0, true, 0));
    out(&o, "causal_l_ne_s", ct_scaled_dot_product_attention(q, k, v, NULL, 0, true, 0));
    out(&o, "bool_mask", ct_scaled_dot_product_attention(q, k, v, bm, 0, false, 0));
    out(&o, "float_mask", ct_scaled_dot_product_attention(q, k, v, fm, 0, false, 0));
    out(&o, "scale_0_3", ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0.3));
    out(&o, "causal_scale", ct_scaled_dot_product_attention(qc, kc, vc, NULL, 0, true, 0.5));
    out(&o, "dropout_0_25", ct_scaled_dot_product_attention(q, k, v, NULL, 0.25, false, 0));
    bw_outs(&o);
    const char *names[] = {"q", "k", "v", "qc", "kc", "vc"};
    ct_tensor *ins[] = {q, k, v, qc, kc, vc};
    for (size_t i = 0; i < sizeof ins / sizeof *ins; i++) put_grad(names[i], ins[i]);
}

void case_one_hot(void) {
    put("one_hot_1d", ct_one_hot(I64D(S(5), 0, 3, 1, 4, 4), 5));
    put("one_hot_2d", ct_one_hot(I64D(S(2, 2), 5, 0, 2, 2), 6));
}

static ct_tensor *ce(const ct_tensor *logits, const ct_tensor *target, const ct_tensor *weight,
                     int64_t ignore_index, double label_smoothing, ct_reduction r) {
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.weight = weight;
    o.ignore_index = ignore_index;
    o.label_smoothing = label_smoothing;
    o.reduction = r;
    return ct_cross_entropy_ex(logits, target, &o);
}

void case_cross_entropy(void) {
    ct_tensor *logits = RNG(6, 5);
    ct_tensor *tgt = ct_randint(0, 5, S(6), &I64);
    ct_tensor *cw = ct_add_scalar(ct_rand(S(5), NULL), 0.5);
    ct_tensor *soft = ct_softmax(RN(6, 5), 1);
    ct_tensor *logits_k = RNG(2, 5, 3);
    ct_tensor *tgt_k = ct_randint(0, 5, S(2, 3), &I64);
    ct_tensor *tgt_ign = I64D(S(6), 0, 2, 2, 1, 4, 2);
    ct_tensor *tgt_def_ign = I64D(S(6), -100, 1, 2, -100, 0, 4);
    ct_cross_entropy_opts d = ct_cross_entropy_defaults();
    put_bool("defaults_weight_null", d.weight == NULL);
    put_int("defaults_ignore_index", d.ignore_index);
    put_val("defaults_label_smoothing", d.label_smoothing);
    put_bool("defaults_reduction_mean", d.reduction == CT_REDUCE_MEAN);
    outs o = {0};
    out(&o, "default", ct_cross_entropy(logits, tgt));
    out(&o, "ex_null_opts", ct_cross_entropy_ex(logits, tgt, NULL));
    out(&o, "none", ce(logits, tgt, NULL, -100, 0, CT_REDUCE_NONE));
    out(&o, "sum", ce(logits, tgt, NULL, -100, 0, CT_REDUCE_SUM));
    out(&o, "smooth", ce(logits, tgt, NULL, -100, 0.1, CT_REDUCE_MEAN));
    out(&o, "smooth_none", ce(logits, tgt, NULL, -100, 0.1, CT_REDUCE_NONE));
    out(&o, "ignore", ce(logits, tgt_ign, NULL, 2, 0, CT_REDUCE_MEAN));
    out(&o, "ignore_none", ce(logits, tgt_ign, NULL, 2, 0, CT_REDUCE_NONE));
    out(&o, "ignore_sum", ce(logits, tgt_ign, NULL, 2, 0, CT_REDUCE_SUM));
    out(&o, "default_ignore_index", ct_cross_entropy(logits, tgt_def_ign));
    out(&o, "weight", ce(logits, tgt, cw, -100, 0, CT_REDUCE_MEAN));
    out(&o, "weight_sum", ce(logits, tgt, cw, -100, 0, CT_REDUCE_SUM));
    out(&o, "weight_none", ce(logits, tgt, cw, -100, 0, CT_REDUCE_NONE));
    out(&o, "weight_smooth", ce(logits, tgt, cw, -100, 0.2, CT_REDUCE_MEAN));
    out(&o, "weight_ignore_smooth", ce(logits, tgt_ign, cw, 2, 0.1, CT_REDUCE_MEAN));
    out(&o, "prob", ct_cross_entropy(logits, soft));
    out(&o, "prob_smooth_none", ce(logits, soft, NULL, -100, 0.2, CT_REDUCE_NONE));
    out(&o, "prob_weight", ce(logits, soft, cw, -100, 0, CT_REDUCE_MEAN));
    out(&o, "kdim", ct_cross_entropy(logits_k, tgt_k));
    out(&o, "kdim_none", ce(logits_k, tgt_k, NULL, -100, 0, CT_REDUCE_NONE));
    bw_outs(&o);
    put_grad("logits", logits);
    put_grad("logits_k", logits_k);
}

static ct_tensor *nll(const ct_tensor *lp, const ct_tensor *target, const ct_tensor *weight,
                      int64_t ignore_index, double label_smoothing, ct_reduction r) {
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.weight = weight;
    o.ignore_index = ignore_index;
    o.label_smoothing = label_smoothing;
    o.reduction = r;
    return ct_nll_loss(lp, target, &o);
}

void case_nll_loss(void) {
    ct_tensor *raw = RNG(6, 5);
    ct_tensor *tgt = ct_randint(0, 5, S(6), &I64);
    ct_tensor *cw = ct_add_scalar(ct_rand(S(5), NULL), 0.5);
    ct_tensor *raw_k = RNG(2, 5, 3);
    ct_tensor *tgt_k = ct_randint(0, 5, S(2, 3), &I64);
    ct_tensor *tgt_ign = I64D(S(6), 3, 0, 3, 1, 4, 2);
    ct_tensor *lp = ct_log_softmax(raw, 1);
    outs o = {0};
    out(&o, "null_opts", ct_nll_loss(lp, tgt, NULL));
    out(&o, "sum", nll(lp, tgt, NULL, -100, 0, CT_REDUCE_SUM));
    out(&o, "none", nll(lp, tgt, NULL, -100, 0, CT_REDUCE_NONE));
    out(&o, "weight", nll(lp, tgt, cw, -100, 0, CT_REDUCE_MEAN));
    out(&o, "weight_none", nll(lp, tgt, cw, -100, 0, CT_REDUCE_NONE));
    out(&o, "ignore", nll(lp, tgt_ign, NULL, 3, 0, CT_REDUCE_MEAN));
    out(&o, "ignore_none", nll(lp, tgt_ign, NULL, 3, 0, CT_REDUCE_NONE));
    out(&o, "weight_ignore", nll(lp, tgt_ign, cw, 3, 0, CT_REDUCE_MEAN));
    out(&o, "smoothing_ignored", nll(lp, tgt, NULL, -100, 0.5, CT_REDUCE_MEAN));
    out(&o, "kdim", ct_nll_loss(ct_log_softmax(raw_k, 1), tgt_k, NULL));
    bw_outs(&o);
    put_grad("raw", raw);
    put_grad("raw_k", raw_k);
}

void case_regression_losses(void) {
    ct_tensor *in = RNG(3, 4), *tg = RNG(3, 4);
    outs o = {0};
    out(&o, "mse_mean", ct_mse_loss(in, tg, CT_REDUCE_MEAN));
    out(&o, "mse_sum", ct_mse_loss(in, tg, CT_REDUCE_SUM));
    out(&o, "mse_none", ct_mse_loss(in, tg, CT_REDUCE_NONE));
    out(&o, "l1_mean", ct_l1_loss(in, tg, CT_REDUCE_MEAN));
    out(&o, "l1_sum", ct_l1_loss(in, tg, CT_REDUCE_SUM));
    out(&o, "l1_none", ct_l1_loss(in, tg, CT_REDUCE_NONE));
    out(&o, "smooth_l1_mean_b0_5", ct_smooth_l1_loss(in, tg, CT_REDUCE_MEAN, 0.5));
    out(&o, "smooth_l1_sum_b1", ct_smooth_l1_loss(in, tg, CT_REDUCE_SUM, 1.0));
    out(&o, "smooth_l1_none_b2", ct_smooth_l1_loss(in, tg, CT_REDUCE_NONE, 2.0));
    out(&o, "smooth_l1_mean_b0", ct_smooth_l1_loss(in, tg, CT_REDUCE_MEAN, 0.0));
    bw_outs(&o);
    put_grad("in", in);
    put_grad("tg", tg);
}

void case_bce_with_logits(void) {
    ct_tensor *lg = RNG(4, 3);
    ct_tensor *tg = ct_rand(S(4, 3), &F32G);
    ct_tensor *w = ct_rand(S(3), NULL);
    ct_tensor *pw = ct_add_scalar(ct_rand(S(3), NULL), 0.5);
    ct_tensor *hard = ct_to_dtype(ct_gt_scalar(ct_rand(S(4, 3), NULL), 0.5), CT_F32);
    outs o = {0};
    out(&o, "mean", ct_bce_with_logits(lg, tg, NULL, NULL, CT_REDUCE_MEAN));
    out(&o, "sum_weight", ct_bce_with_logits(lg, tg, w, NULL, CT_REDUCE_SUM));
    out(&o, "none_pos_weight", ct_bce_with_logits(lg, tg, NULL, pw, CT_REDUCE_NONE));
    out(&o, "mean_both", ct_bce_with_logits(lg, tg, w, pw, CT_REDUCE_MEAN));
    out(&o, "none_both", ct_bce_with_logits(lg, tg, w, pw, CT_REDUCE_NONE));
    out(&o, "hard_targets", ct_bce_with_logits(lg, hard, NULL, NULL, CT_REDUCE_MEAN));
    bw_outs(&o);
    put_grad("lg", lg);
    put_grad("tg", tg);
}
