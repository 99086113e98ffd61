"""Twins of tests/ops/cases_nn.c."""
import torch
import torch.nn.functional as F

from pyharness import INF, G, bw, case, f32, f64, grads, i32, rn, rn64g, rng


def backprop(o, r=None):
    bw(*o.values())
    return {**(r or {}), **o}


@case("matmul")
def _():
    v1, v2, m, v3 = rn64g(4), rn64g(4), rn64g(3, 4), rn64g(3)
    ba, bb = rn64g(2, 1, 3, 4), rn64g(5, 4, 2)
    mb, b1, b2 = rn64g(4, 2), rn64g(2, 3, 4), rn64g(2, 4, 5)
    x, w, bias, x3 = rn64g(5, 4), rn64g(3, 4), rn64g(3), rn64g(2, 5, 4)
    f1, f2, fx, fw, fb = rng(16, 32), rng(32, 8), rng(7, 32), rng(10, 32), rng(10)
    fb1, fb2 = rng(3, 9, 17), rng(3, 17, 6)
    r = backprop({
        "dot_1d_1d": torch.matmul(v1, v2), "mat_vec": torch.matmul(m, v1), "vec_mat": torch.matmul(v3, m),
        "batched_broadcast": torch.matmul(ba, bb), "mm": torch.mm(m, mb), "bmm": torch.bmm(b1, b2),
        "linear_bias": F.linear(x, w, bias), "linear_no_bias": F.linear(x, w),
        "linear_3d": F.linear(x3, w, bias), "linear_1d": F.linear(v1, w, bias),
        "f32_mm": torch.mm(f1, f2), "f32_matmul": torch.matmul(f1, f2), "f32_bmm": torch.bmm(fb1, fb2),
        "f32_linear_bias": F.linear(fx, fw, fb), "f32_linear_no_bias": F.linear(fx, fw),
    })
    return grads(r, v1=v1, v2=v2, m=m, v3=v3, ba=ba, bb=bb, mb=mb, b1=b1, b2=b2, x=x, w=w, bias=bias,
                 x3=x3, f1=f1, f2=f2, fx=fx, fw=fw, fb=fb, fb1=fb1, fb2=fb2)


@case("conv")
def _():
    x, w, b = rng(2, 4, 9), rng(6, 2, 3), rng(6)
    X, W, B = rng(2, 4, 7, 6), rng(4, 2, 3, 3), rng(4)
    W2, B2 = rng(3, 4, 2, 2), rng(3)
    X64, W64 = rn64g(1, 2, 5, 5), rn64g(2, 2, 3, 3)
    r = backprop({
        "conv1d_s2_p1_d2_g2": F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        "conv1d_no_bias": F.conv1d(x, w, None, stride=1, padding=0, dilation=1, groups=2),
        "conv2d_p1_g2": F.conv2d(X, W, B, stride=1, padding=1, dilation=1, groups=2),
        "conv2d_s2_no_bias": F.conv2d(X, W2, None, stride=2),
        "conv2d_dilated": F.conv2d(X, W2, B2, stride=1, padding=2, dilation=2),
        "conv2d_ex_asym": F.conv2d(X, W2, B2, stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
        "conv2d_ex_asym_g2": F.conv2d(X, W, B, stride=(1, 2), padding=(0, 2), dilation=(2, 1), groups=2),
        "conv2d_f64": F.conv2d(X64, W64, None, padding=1),
    })
    return grads(r, x=x, w=w, b=b, X=X, W=W, B=B, W2=W2, B2=B2, X64=X64, W64=W64)


@case("pool")
def _():
    x1, X, X3 = rng(2, 3, 10), rng(2, 3, 7, 6), rng(3, 5, 5)
    r = backprop({
        "max_pool1d_k3_p1": F.max_pool1d(x1, 3, stride=3, padding=1),
        "max_pool1d_k2_s1": F.max_pool1d(x1, 2, stride=1),
        "max_pool2d_k2": F.max_pool2d(X, 2),
        "max_pool2d_k3_s2_p1": F.max_pool2d(X, 3, stride=2, padding=1),
        "avg_pool2d_k3_s2_p1": F.avg_pool2d(X, 3, stride=2, padding=1),
        "avg_pool2d_k2": F.avg_pool2d(X, 2),
        "adaptive_3_2": F.adaptive_avg_pool2d(X, (3, 2)),
        "adaptive_1_1": F.adaptive_avg_pool2d(X, (1, 1)),
        "adaptive_up_8_7": F.adaptive_avg_pool2d(X, (8, 7)),
        "max_pool2d_unbatched": F.max_pool2d(X3, 2),
        "adaptive_unbatched": F.adaptive_avg_pool2d(X3, (2, 3)),
    })
    return grads(r, x1=x1, X=X, X3=X3)


@case("activations")
def _():
    x, x32 = rn64g(3, 6), rng(4, 17)
    edge = G(torch.tensor([-1.0, 0, 1], dtype=f64))
    r = backprop({
        "relu": F.relu(x), "gelu": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh"), "silu": F.silu(x),
        "leaky_relu_0_2": F.leaky_relu(x, 0.2), "leaky_relu_0_01": F.leaky_relu(x, 0.01),
        "softmax_1": F.softmax(x, 1), "softmax_0": F.softmax(x, 0),
        "log_softmax_neg1": F.log_softmax(x, -1), "log_softmax_0": F.log_softmax(x, 0),
        "f32_relu": F.relu(x32), "f32_gelu": F.gelu(x32), "f32_gelu_tanh": F.gelu(x32, approximate="tanh"),
        "f32_silu": F.silu(x32), "f32_leaky_relu": F.leaky_relu(x32, 0.1),
        "f32_softmax_neg1": F.softmax(x32, -1), "f32_softmax_0": F.softmax(x32, 0),
        "f32_log_softmax_neg1": F.log_softmax(x32, -1),
        "relu_at_0": F.relu(edge), "leaky_relu_at_0": F.leaky_relu(edge, 0.1),
    })
    grads(r, x=x, x32=x32, edge=edge)
    r["softmax_inf"] = F.softmax(torch.tensor([-INF, 0, 1], dtype=f64), 0)
    return r


@case("dropout")
def _():
    x = rng(8, 10)
    r = backprop({
        "train_p0_3": F.dropout(x, 0.3, training=True),
        "train_p0_5": F.dropout(x, 0.5, training=True),
        "eval": F.dropout(x, 0.3, training=False),
        "train_p1": F.dropout(x, 1.0, training=True),
        "train_p0": F.dropout(x, 0.0, training=True),
    })
    grads(r, x=x)
    r["after"] = rn(4)
    return r


@case("dropout_masks")
def _():
    x = rn(40, 500)
    return {
        "p0_1": F.dropout(x, 0.1, training=True),
        "p0_9": F.dropout(x, 0.9, training=True),
        "p1_3": F.dropout(x, 1.0 / 3.0, training=True),
        "p0_5_odd": F.dropout(rn(7, 13), 0.5, training=True),
        "transposed": F.dropout(x.t(), 0.25, training=True),
        "f64": F.dropout(x.double(), 0.25, training=True),
        "after": rn(700),
    }


@case("batch_norm")
def _():
    x, w, b = rng(4, 3, 5, 5), rng(3), rng(3)
    x_b, x2, x3 = rn(4, 3, 5, 5), rng(8, 3), rng(2, 3, 6)
    rm, rv = torch.zeros(3), torch.ones(3)
    o, r = {}, {}
    o["train"] = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    r["running_mean_1"], r["running_var_1"] = rm.clone(), rv.clone()
    o["train_second_batch"] = F.batch_norm(x_b, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)
    r["running_mean_2"], r["running_var_2"] = rm.clone(), rv.clone()
    o["eval"] = F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
    r["running_mean_after_eval"], r["running_var_after_eval"] = rm.clone(), rv.clone()
    o["train_no_affine_no_stats"] = F.batch_norm(x, None, None, training=True, momentum=0.1, eps=1e-5)
    rm2, rv2 = torch.zeros(3), torch.ones(3)
    o["train_2d"] = F.batch_norm(x2, rm2, rv2, w, None, training=True, momentum=0.2, eps=1e-3)
    r["running_mean_2d"], r["running_var_2d"] = rm2, rv2
    rm3, rv3 = torch.full((3,), 0.5), torch.full((3,), 2.0)
    o["train_3d"] = F.batch_norm(x3, rm3, rv3, None, b, training=True, momentum=0.5, eps=1e-5)
    r["running_mean_3d"], r["running_var_3d"] = rm3.clone(), rv3.clone()
    o["eval_3d"] = F.batch_norm(x3, rm3, rv3, w, b, training=False, momentum=0.5, eps=1e-5)
    r = backprop(o, r)
    return grads(r, x=x, w=w, b=b, x2=x2, x3=x3)


@case("layer_norm")
def _():
    x, w, b, w2, x64 = rng(2, 3, 4), rng(4), rng(4), rng(3, 4), rn64g(5, 6)
    r = backprop({
        "last_dim": F.layer_norm(x, (4,), w, b, 1e-5),
        "last_2_dims_no_affine": F.layer_norm(x, (3, 4), None, None, 1e-5),
        "last_2_dims_weight_only": F.layer_norm(x, (3, 4), w2, None, 1e-3),
        "f64": F.layer_norm(x64, (6,), None, None, 1e-5),
    })
    return grads(r, x=x, w=w, b=b, w2=w2, x64=x64)


@case("embedding")
def _():
    w1, w2 = rng(6, 3), rng(6, 3)
    idx = torch.tensor([[0, 2, 0], [5, 1, 2]])
    r = backprop({
        "padding_idx_0": F.embedding(idx, w1, padding_idx=0),
        "no_padding": F.embedding(idx, w2),
        "i32_indices": F.embedding(torch.tensor([4, 4, 3], dtype=i32), w2),
    })
    grads(r, w1=w1, w2=w2)
    r["w1.grad_row_0"] = torch.zeros(3)  # the padding row gets nothing
    assert torch.equal(w1.grad[0], torch.zeros(3))
    return r


@case("sdpa")
def _():
    q, k, v = rng(2, 3, 4, 8), rng(2, 3, 6, 8), rng(2, 3, 6, 8)
    qc, kc, vc = rng(2, 2, 5, 8), rng(2, 2, 5, 8), rng(2, 2, 5, 8)
    fm = rn(4, 6)
    bm = torch.tensor([[1, 1, 0, 1, 0, 1], [0, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]],
                      dtype=torch.bool)
    sdpa = F.scaled_dot_product_attention
    r = backprop({
        "plain": sdpa(q, k, v),
        "causal": sdpa(qc, kc, vc, is_causal=True),
        "causal_l_ne_s": sdpa(q, k, v, is_causal=True),
        "bool_mask": sdpa(q, k, v, attn_mask=bm),
        "float_mask": sdpa(q, k, v, attn_mask=fm),
        "scale_0_3": sdpa(q, k, v, scale=0.3),
        "causal_scale": sdpa(qc, kc, vc, is_causal=True, scale=0.5),
        "dropout_0_25": sdpa(q, k, v, dropout_p=0.25),
    })
    return grads(r, q=q, k=k, v=v, qc=qc, kc=kc, vc=vc)


@case("one_hot")
def _():
    return {
        "one_hot_1d": F.one_hot(torch.tensor([0, 3, 1, 4, 4]), 5),
        "one_hot_2d": F.one_hot(torch.tensor([[5, 0], [2, 2]]), 6),
    }


@case("cross_entropy")
def _():
    logits = rng(6, 5)
    tgt = torch.randint(0, 5, (6,))
    cw = torch.rand(5) + 0.5
    soft = F.softmax(rn(6, 5), 1)
    logits_k = rng(2, 5, 3)
    tgt_k = torch.randint(0, 5, (2, 3))
    tgt_ign = torch.tensor([0, 2, 2, 1, 4, 2])
    tgt_def_ign = torch.tensor([-100, 1, 2, -100, 0, 4])
    ce = F.cross_entropy
    r = {"defaults_weight_null": True, "defaults_ignore_index": -100, "defaults_label_smoothing": 0.0,
         "defaults_reduction_mean": True}
    r = backprop({
        "default": ce(logits, tgt),
        "ex_null_opts": ce(logits, tgt),
        "none": ce(logits, tgt, reduction="none"),
        "sum": ce(logits, tgt, reduction="sum"),
        "smooth": ce(logits, tgt, label_smoothing=0.1),
        "smooth_none": ce(logits, tgt, label_smoothing=0.1, reduction="none"),
        "ignore": ce(logits, tgt_ign, ignore_index=2),
        "ignore_none": ce(logits, tgt_ign, ignore_index=2, reduction="none"),
        "ignore_sum": ce(logits, tgt_ign, ignore_index=2, reduction="sum"),
        "default_ignore_index": ce(logits, tgt_def_ign),
        "weight": ce(logits, tgt, weight=cw),
        "weight_sum": ce(logits, tgt, weight=cw, reduction="sum"),
        "weight_none": ce(logits, tgt, weight=cw, reduction="none"),
        "weight_smooth": ce(logits, tgt, weight=cw, label_smoothing=0.2),
        "weight_ignore_smooth": ce(logits, tgt_ign, weight=cw, ignore_index=2, label_smoothing=0.1),
        "prob": ce(logits, soft),
        "prob_smooth_none": ce(logits, soft, label_smoothing=0.2, reduction="none"),
        "prob_weight": ce(logits, soft, weight=cw),
        "kdim": ce(logits_k, tgt_k),
        "kdim_none": ce(logits_k, tgt_k, reduction="none"),
    }, r)
    return grads(r, logits=logits, logits_k=logits_k)


@case("nll_loss")
def _():
    raw = rng(6, 5)
    tgt = torch.randint(0, 5, (6,))
    cw = torch.rand(5) + 0.5
    raw_k = rng(2, 5, 3)
    tgt_k = torch.randint(0, 5, (2, 3))
    tgt_ign = torch.tensor([3, 0, 3, 1, 4, 2])
    lp = F.log_softmax(raw, 1)
    nll = F.nll_loss
    r = backprop({
        "null_opts": nll(lp, tgt),
        "sum": nll(lp, tgt, reduction="sum"),
        "none": nll(lp, tgt, reduction="none"),
        "weight": nll(lp, tgt, weight=cw),
        "weight_none": nll(lp, tgt, weight=cw, reduction="none"),
        "ignore": nll(lp, tgt_ign, ignore_index=3),
        "ignore_none": nll(lp, tgt_ign, ignore_index=3, reduction="none"),
        "weight_ignore": nll(lp, tgt_ign, weight=cw, ignore_index=3),
        "smoothing_ignored": nll(lp, tgt),
        "kdim": nll(F.log_softmax(raw_k, 1), tgt_k),
    })
    return grads(r, raw=raw, raw_k=raw_k)


@case("regression_losses")
def _():
    inp, tg = rng(3, 4), rng(3, 4)
    r = backprop({
        "mse_mean": F.mse_loss(inp, tg), "mse_sum": F.mse_loss(inp, tg, reduction="sum"),
        "mse_none": F.mse_loss(inp, tg, reduction="none"),
        "l1_mean": F.l1_loss(inp, tg), "l1_sum": F.l1_loss(inp, tg, reduction="sum"),
        "l1_none": F.l1_loss(inp, tg, reduction="none"),
        "smooth_l1_mean_b0_5": F.smooth_l1_loss(inp, tg, beta=0.5),
        "smooth_l1_sum_b1": F.smooth_l1_loss(inp, tg, reduction="sum", beta=1.0),
        "smooth_l1_none_b2": F.smooth_l1_loss(inp, tg, reduction="none", beta=2.0),
        "smooth_l1_mean_b0": F.smooth_l1_loss(inp, tg, beta=0.0),
    })
    r["in.grad"], r["tg.grad"] = inp.grad, tg.grad
    return r


@case("bce_with_logits")
def _():
    lg = rng(4, 3)
    tg = torch.rand(4, 3, requires_grad=True)
    w = torch.rand(3)
    pw = torch.rand(3) + 0.5
    hard = (torch.rand(4, 3) > 0.5).to(f32)
    bce = F.binary_cross_entropy_with_logits
    r = backprop({
        "mean": bce(lg, tg),
        "sum_weight": bce(lg, tg, weight=w, reduction="sum"),
        "none_pos_weight": bce(lg, tg, pos_weight=pw, reduction="none"),
        "mean_both": bce(lg, tg, weight=w, pos_weight=pw),
        "none_both": bce(lg, tg, weight=w, pos_weight=pw, reduction="none"),
        "hard_targets": bce(lg, hard),
    })
    return grads(r, lg=lg, tg=tg)
