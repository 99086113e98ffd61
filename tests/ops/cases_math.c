/* tests/ops/cases_math.c — elementwise ops, broadcasting, dtype promotion,
 * comparisons, where, clamp, in-place ops, reductions. Twins: cases_math.py. */
#include "parity.h"

#include <stdio.h>

void case_binary_broadcast(void) {
    ct_tensor *a = RN64G(3, 1, 4), *b = RN64G(2, 4);
    ct_tensor *base = ct_rand(S(3, 1, 4), &F64G);
    ct_tensor *a32 = RNG(3, 1, 20), *b32 = RNG(2, 20);
    ct_tensor *ta = G(F64D(S(3), 1, 2, 3)), *tb = G(F64D(S(3), 1, 0, 3));
    ct_tensor *s = G(ct_scalar_tensor(1.5, &F64));
    ct_tensor *pos = ct_add_scalar(base, 0.5);
    outs o = {0};
    out(&o, "add", ct_add(a, b));
    out(&o, "sub", ct_sub(a, b));
    out(&o, "mul", ct_mul(a, b));
    out(&o, "div", ct_div(a, b));
    out(&o, "maximum", ct_maximum(a, b));
    out(&o, "minimum", ct_minimum(a, b));
    out(&o, "pow", ct_pow(pos, b));
    out(&o, "add_f32", ct_add(a32, b32));
    out(&o, "sub_f32", ct_sub(b32, a32));
    out(&o, "mul_f32", ct_mul(a32, b32));
    out(&o, "div_f32", ct_div(a32, b32));
    out(&o, "maximum_ties", ct_maximum(ta, tb));
    out(&o, "minimum_ties", ct_minimum(ta, tb));
    out(&o, "mul_0d", ct_mul(a, s));
    out(&o, "div_0d_by", ct_div(s, b));
    bw_outs(&o);
    put_grad("a", a);
    put_grad("b", b);
    put_grad("base", base);
    put_grad("a32", a32);
    put_grad("b32", b32);
    put_grad("ta", ta);
    put_grad("tb", tb);
    put_grad("s", s);
}

void case_promotion(void) {
    ct_tensor *i64 = I64D(S(3), 1, 2, 3), *i32 = I32D(S(3), -4, 5, 6), *u8 = U8D(S(3), 7, 8, 250);
    ct_tensor *bl = BOOLD(S(3), true, false, true);
    ct_tensor *f32 = F32D(S(3), 0.5f, -1.25f, 2.0f), *f64 = F64D(S(3), 0.1, 0.2, 0.3);
    ct_tensor *f16 = ct_to_dtype(f32, CT_F16), *bf = ct_to_dtype(f32, CT_BF16);
    put("i64_add_f32", ct_add(i64, f32));
    put("i32_mul_f64", ct_mul(i32, f64));
    put("u8_add_i32", ct_add(u8, i32));
    put("u8_add_u8_wraps", ct_add(u8, u8));
    put("bool_add_i64", ct_add(bl, i64));
    put("bool_mul_bool", ct_mul(bl, bl));
    put("f32_add_f64_0d", ct_add(f32, ct_scalar_tensor(0.25, &F64)));
    put("i64_add_f64_0d", ct_add(i64, ct_scalar_tensor(0.25, &F64)));
    put("f16_add_f32", ct_add(f16, f32));
    put("bf16_mul_f16", ct_mul(bf, f16));
    put("f16_mul_f16", ct_mul(f16, f16));
    put("bf16_add_bf16", ct_add(bf, bf));
    put("i64_div_i64", ct_div(i64, I64D(S(3), 2, 2, 2)));
    put("i64_sub_i32", ct_sub(i64, i32));
    put("maximum_i32_f32", ct_maximum(i32, f32));
    put("pow_i64_i64", ct_pow(i64, I64D(S(3), 2, 3, 0)));
    put("i64_add_2_5", ct_add_scalar(i64, 2.5));
    put("i64_div_2", ct_div_scalar(i64, 2));
    put("f16_mul_3", ct_mul_scalar(f16, 3));
    put("bf16_add_0_1", ct_add_scalar(bf, 0.1));
    put("bool_add_1_5", ct_add_scalar(bl, 1.5));
    put("i32_gt_1_5", ct_gt_scalar(i32, 1.5));
    put("i64_eq_f32", ct_eq(i64, f32));
    put("u8_lt_i32", ct_lt(u8, i32));
    put("f32_rsub_10", ct_rsub_scalar(f32, 10));
}

void case_scalar_ops(void) {
    ct_tensor *x = RN64G(3, 4);
    ct_tensor *base = ct_rand(S(3, 4), &F64G);
    ct_tensor *x32 = RNG(20);
    ct_tensor *pos = ct_add_scalar(base, 0.1);
    outs o = {0};
    out(&o, "add_2_5", ct_add_scalar(x, 2.5));
    out(&o, "sub_1_25", ct_sub_scalar(x, 1.25));
    out(&o, "mul_neg3", ct_mul_scalar(x, -3));
    out(&o, "div_4", ct_div_scalar(x, 4));
    out(&o, "div_0_3", ct_div_scalar(x, 0.3));
    out(&o, "pow_2", ct_pow_scalar(x, 2));
    out(&o, "pow_3", ct_pow_scalar(x, 3));
    out(&o, "pow_0", ct_pow_scalar(x, 0));
    out(&o, "pow_0_5", ct_pow_scalar(pos, 0.5));
    out(&o, "pow_neg1_5", ct_pow_scalar(pos, -1.5));
    out(&o, "rsub_1", ct_rsub_scalar(x, 1));
    out(&o, "f32_add_0_1", ct_add_scalar(x32, 0.1));
    out(&o, "f32_mul_third", ct_mul_scalar(x32, 1.0 / 3.0));
    out(&o, "f32_div_3", ct_div_scalar(x32, 3));
    out(&o, "f32_sub_1e_8", ct_sub_scalar(x32, 1e-8));
    out(&o, "f32_pow_2", ct_pow_scalar(x32, 2));
    out(&o, "f32_rsub_0_5", ct_rsub_scalar(x32, 0.5));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("base", base);
    put_grad("x32", x32);
}

void case_unary(void) {
    ct_tensor *x = RN64G(3, 5);
    ct_tensor *base = ct_rand(S(3, 5), &F64G);
    ct_tensor *x32 = RNG(20);
    ct_tensor *pos = ct_add_scalar(base, 0.1);
    ct_tensor *pos32 = ct_add_scalar(ct_abs(x32), 0.1);
    outs o = {0};
    out(&o, "neg", ct_neg(x));
    out(&o, "abs", ct_abs(x));
    out(&o, "exp", ct_exp(x));
    out(&o, "tanh", ct_tanh(x));
    out(&o, "sigmoid", ct_sigmoid(x));
    out(&o, "sin", ct_sin(x));
    out(&o, "cos", ct_cos(x));
    out(&o, "square", ct_square(x));
    out(&o, "sign", ct_sign(x));
    out(&o, "floor", ct_floor(x));
    out(&o, "ceil", ct_ceil(x));
    out(&o, "round", ct_round(x));
    out(&o, "log", ct_log(pos));
    out(&o, "sqrt", ct_sqrt(pos));
    out(&o, "rsqrt", ct_rsqrt(pos));
    out(&o, "reciprocal", ct_reciprocal(pos));
    out(&o, "f32_exp", ct_exp(x32));
    out(&o, "f32_tanh", ct_tanh(x32));
    out(&o, "f32_sigmoid", ct_sigmoid(x32));
    out(&o, "f32_sin", ct_sin(x32));
    out(&o, "f32_cos", ct_cos(x32));
    out(&o, "f32_log", ct_log(pos32));
    out(&o, "f32_sqrt", ct_sqrt(pos32));
    out(&o, "f32_rsqrt", ct_rsqrt(pos32));
    out(&o, "f32_reciprocal", ct_reciprocal(pos32));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("base", base);
    put_grad("x32", x32);

    ct_tensor *special = F64D(S(8), 0.5, 1.5, 2.5, -0.5, -2.5, 2.4999, -0.0, 1e300);
    put("round_halfway", ct_round(special));
    put("floor_special", ct_floor(special));
    put("ceil_special", ct_ceil(special));
    put("sign_special", ct_sign(special));
    ct_tensor *nonfinite = F64D(S(5), NAN, INFINITY, -INFINITY, 1, 0);
    put("isnan", ct_isnan(nonfinite));
    put("isfinite", ct_isfinite(nonfinite));
    put("isnan_of_int", ct_isnan(I64D(S(2), 1, 2)));
    put("exp_nonfinite", ct_exp(nonfinite));
    put("log_nonfinite", ct_log(nonfinite));
    put("sqrt_negative", ct_sqrt(F64D(S(2), -1, 4)));
    put("logical_not_f64", ct_logical_not(nonfinite));
    put("logical_not_bool", ct_logical_not(BOOLD(S(2), true, false)));
    put("logical_not_i64", ct_logical_not(I64D(S(3), 0, 3, -1)));
    put("abs_i32", ct_abs(I32D(S(3), -3, 0, 4)));
    put("neg_i64", ct_neg(I64D(S(2), 5, -6)));
    put("square_i64", ct_square(I64D(S(2), -3, 4)));
    put("sign_i32", ct_sign(I32D(S(3), -3, 0, 4)));
    put("exp_i64", ct_exp(I64D(S(2), 0, 1)));
}

void case_compare(void) {
    ct_tensor *a = ct_randint(0, 3, S(3, 4), &F32);
    ct_tensor *b = ct_randint(0, 3, S(4), &F32);
    ct_tensor *ia = ct_randint(0, 3, S(4), &I64);
    put("a", a);
    put("eq", ct_eq(a, b));
    put("ne", ct_ne(a, b));
    put("lt", ct_lt(a, b));
    put("le", ct_le(a, b));
    put("gt", ct_gt(a, b));
    put("ge", ct_ge(a, b));
    put("eq_scalar", ct_eq_scalar(a, 1));
    put("ne_scalar", ct_ne_scalar(a, 1));
    put("lt_scalar", ct_lt_scalar(a, 1));
    put("le_scalar", ct_le_scalar(a, 1));
    put("gt_scalar", ct_gt_scalar(a, 1));
    put("ge_scalar", ct_ge_scalar(a, 1));
    put("lt_int_float", ct_lt(ia, b));
    put("eq_int_scalar", ct_eq_scalar(ia, 1));
    put("ge_int_half", ct_ge_scalar(ia, 0.5));
    ct_tensor *n = F64D(S(2), NAN, 1);
    put("eq_nan", ct_eq(n, n));
    put("ne_nan", ct_ne(n, n));
    put("lt_nan_scalar", ct_lt_scalar(n, 2));
}

void case_where(void) {
    ct_tensor *cond = ct_gt_scalar(RN(3, 4), 0);
    ct_tensor *a = RNG(3, 4), *b = RNG(4);
    ct_tensor *cond2 = ct_gt_scalar(RN(3, 1), 0);
    put("cond", cond);
    put("cond2", cond2);
    outs o = {0};
    out(&o, "where", ct_where(cond, a, b));
    out(&o, "where_cond_broadcast", ct_where(cond2, a, b));
    out(&o, "where_int_float", ct_where(cond, I64D(S(4), 1, 2, 3, 4), b));
    out(&o, "where_0d_other", ct_where(cond2, a, ct_scalar_tensor(0, NULL)));
    bw_outs(&o);
    put_grad("a", a);
    put_grad("b", b);
    put("where_i64", ct_where(cond, I64D(S(4), 1, 2, 3, 4), ct_scalar_tensor(-1, &I64)));
}

void case_clamp(void) {
    ct_tensor *x = RN64G(4, 5);
    ct_tensor *edge = G(F64D(S(5), -1, -0.5, 0, 0.5, 1));
    ct_tensor *x32 = RNG(20);
    outs o = {0};
    out(&o, "both", ct_clamp(x, -0.5, 0.5));
    out(&o, "max_only", ct_clamp(x, -INFINITY, 0.3));
    out(&o, "min_only", ct_clamp(x, -0.2, INFINITY));
    out(&o, "no_bounds", ct_clamp(x, -INFINITY, INFINITY));
    out(&o, "at_bounds", ct_clamp(edge, -0.5, 0.5));
    out(&o, "min_above_max", ct_clamp(x, 0.7, 0.2));
    out(&o, "f32_both", ct_clamp(x32, -0.25, 0.75));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("edge", edge);
    put_grad("x32", x32);
    put("nan_propagates", ct_clamp(F32D(S(3), NAN, 2.0f, -3.0f), -1, 1));
}

void case_inplace(void) {
    ct_tensor *base = RN(3, 4), *b = RN(4), *b2 = RN(3, 1);
    ct_tensor *t = ct_clone(base);
    put_int("add_rc", ct_add_(t, b, 0.5));
    put("add_", t);
    put_int("add_neg_alpha_rc", ct_add_(t, b2, -2));
    put("add_neg_alpha", t);
    put_int("mul_rc", ct_mul_(t, b2));
    put("mul_", t);
    put_int("mul_scalar_rc", ct_mul_scalar_(t, -2));
    put("mul_scalar_", t);
    put_int("add_scalar_rc", ct_add_scalar_(t, 0.25));
    put("add_scalar_", t);
    put_int("clamp_min_rc", ct_clamp_(t, -0.1, INFINITY));
    put("clamp_min_", t);
    put_int("clamp_max_rc", ct_clamp_(t, -INFINITY, 0.4));
    put("clamp_max_", t);
    put_int("clamp_both_rc", ct_clamp_(t, -0.05, 0.05));
    put("clamp_both_", t);
    put_int("clamp_none_rc", ct_clamp_(t, -INFINITY, INFINITY));
    put("clamp_none_", t);
    ct_tensor *f = ct_clone(base);
    put_int("fill_rc", ct_fill_(f, 7.5));
    put("fill_", f);
    put_int("zero_rc", ct_zero_(f));
    put("zero_", f);
    ct_tensor *u = ct_zeros(S(3, 4), NULL);
    put_int("uniform_rc", ct_uniform_(u, -2, 3));
    put("uniform_", u);
    ct_tensor *n = ct_zeros(S(3, 4), &F64);
    put_int("normal_rc", ct_normal_(n, 1, 2));
    put("normal_", n);
    ct_tensor *h = ct_zeros(S(5), &F16);
    put_int("normal_f16_rc", ct_normal_(h, 0, 1));
    put("normal_f16_", h);

    /* In place through views writes the base. */
    ct_tensor *vb = ct_clone(base);
    put_int("fill_view_rc", ct_fill_(ct_slice(vb, 1, 1, 3, 1), 9));
    put_int("zero_row_rc", ct_zero_(ct_select(vb, 0, 2)));
    put_int("add_transposed_rc", ct_add_(ct_t(vb), ct_ones(S(4, 3), NULL), 1));
    put("views_write_base", vb);

    /* Autograd through in-place ops on a non-leaf. */
    ct_tensor *x = RNG(3);
    ct_tensor *y = ct_mul_scalar(x, 2);
    put_int("grad_add_scalar_rc", ct_add_scalar_(y, 1));
    put_int("grad_mul_scalar_rc", ct_mul_scalar_(y, 3));
    put_int("grad_mul_rc", ct_mul_(y, x));
    put("y", y);
    BW(y);
    put_grad("x", x);
}

void case_inplace_int(void) {
    /* Counters and accumulated correct predictions are integer tensors; the
     * C API passes integral amounts as doubles, which must act like Python's
     * ints here (t.add_(u, alpha=1), t.add_(5), t.mul_(2), t.clamp_(0, 50)). */
    ct_tensor *c = I64D(S(3), 1, 2, 3), *d = I64D(S(3), 10, 20, 30);
    put_int("add_rc", ct_add_(c, d, 1));
    put("add_", c);
    put_int("add_alpha_rc", ct_add_(c, d, -2));
    put("add_alpha_", c);
    put_int("add_scalar_rc", ct_add_scalar_(c, 5));
    put("add_scalar_", c);
    put_int("mul_scalar_rc", ct_mul_scalar_(c, 2));
    put("mul_scalar_", c);
    put_int("clamp_rc", ct_clamp_(c, -20, 50));
    put("clamp_", c);
    put_int("mul_rc", ct_mul_(c, d));
    put("mul_", c);
    put_int("fill_rc", ct_fill_(c, 4));
    put("fill_", c);
    ct_tensor *k = I32D(S(2), 7, -7);
    put_int("i32_add_scalar_rc", ct_add_scalar_(k, 1));
    put("i32_add_scalar_", k);
    put_int("i32_add_bool_rc", ct_add_(k, BOOLD(S(2), true, false), 1));
    put("i32_add_bool_", k);
}

void case_reductions(void) {
    ct_tensor *x = RN64G(3, 4, 5);
    ct_tensor *tie = G(F64D(S(2, 4), 1, 3, 3, 2, 0, 0, -1, -1));
    outs o = {0};
    out(&o, "sum", ct_sum(x));
    out(&o, "mean", ct_mean(x));
    out(&o, "max", ct_max(x));
    out(&o, "min", ct_min(x));
    out(&o, "sum_0", ct_sum_dim(x, CT_DIMS(0), false));
    out(&o, "sum_0_2", ct_sum_dim(x, CT_DIMS(0, 2), false));
    out(&o, "sum_neg1_keep", ct_sum_dim(x, CT_DIMS(-1), true));
    out(&o, "sum_no_dims", ct_sum_dim(x, 0, NULL, false));
    out(&o, "mean_1_keep", ct_mean_dim(x, CT_DIMS(1), true));
    out(&o, "mean_0_1", ct_mean_dim(x, CT_DIMS(0, 1), false));
    out(&o, "mean_no_dims", ct_mean_dim(x, 0, NULL, false));
    out(&o, "var_1", ct_var(x, CT_DIMS(1), 1, false));
    out(&o, "var_0_2_corr0_keep", ct_var(x, CT_DIMS(0, 2), 0, true));
    out(&o, "var_all", ct_var(x, 0, NULL, 1, false));
    out(&o, "std_1", ct_std(x, CT_DIMS(1), 1, false));
    out(&o, "std_neg1_corr2_keep", ct_std(x, CT_DIMS(-1), 2, true));
    out(&o, "std_all_corr0", ct_std(x, 0, NULL, 0, false));
    out(&o, "logsumexp_2", ct_logsumexp(x, CT_DIMS(2), false));
    out(&o, "logsumexp_0_1_keep", ct_logsumexp(x, CT_DIMS(0, 1), true));
    out(&o, "amax_1", ct_amax(x, CT_DIMS(1), false));
    out(&o, "amin_0_2_keep", ct_amin(x, CT_DIMS(0, 2), true));
    out(&o, "amax_no_dims", ct_amax(x, 0, NULL, false));
    out(&o, "amax_ties", ct_amax(tie, CT_DIMS(1), false));
    out(&o, "amin_ties", ct_amin(tie, CT_DIMS(1), false));
    out(&o, "max_ties", ct_max(tie));
    out(&o, "min_ties", ct_min(tie));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("tie", tie);

    ct_tensor *ti = ct_randint(0, 10, S(3, 4), &I32);
    put("int_sum", ct_sum(ti));
    put("int_sum_0", ct_sum_dim(ti, CT_DIMS(0), false));
    put("int_amax_1", ct_amax(ti, CT_DIMS(1), false));
    put("int_max", ct_max(ti));
    put("int_min", ct_min(ti));
    put("bool_sum", ct_sum(BOOLD(S(4), true, true, false, true)));
    ct_tensor *x32 = RN(1000);
    put("f32_sum_1000", ct_sum(x32));
    put("f32_mean_1000", ct_mean(x32));
    put("f32_var_1000", ct_var(x32, CT_DIMS(0), 1, false));
    put("f32_std_1000", ct_std(x32, 0, NULL, 1, false));
    put("f32_logsumexp_1000", ct_logsumexp(x32, CT_DIMS(0), false));
    put("f16_sum", ct_sum(ct_to_dtype(x32, CT_F16)));
    put("bf16_mean", ct_mean(ct_to_dtype(x32, CT_BF16)));
}

void case_max_min_dim(void) {
    ct_tensor *x = RN64G(3, 5);
    ct_tensor *v1 = NULL, *i1 = NULL, *v2 = NULL, *i2 = NULL, *i3 = NULL, *v4 = NULL;
    put_int("max_dim_rc", ct_max_dim(x, 1, false, &v1, &i1));
    put_int("min_dim_keep_rc", ct_min_dim(x, 0, true, &v2, &i2));
    put_int("max_dim_indices_only_rc", ct_max_dim(x, -1, true, NULL, &i3));
    put_int("min_dim_values_only_rc", ct_min_dim(x, 1, false, &v4, NULL));
    outs o = {0};
    out(&o, "max_values", v1);
    put("max_indices", i1);
    out(&o, "min_keep_values", v2);
    put("min_keep_indices", i2);
    put("max_indices_only", i3);
    out(&o, "min_values_only", v4);
    bw_outs(&o);
    put_grad("x", x);
    put("argmax_1", ct_argmax(x, 1, false));
    put("argmin_0_keep", ct_argmin(x, 0, true));
    put("argmax_neg1_keep", ct_argmax(x, -1, true));
    ct_tensor *tie = F64D(S(2, 3), 1, 3, 3, 2, 2, 0);
    put("argmax_ties", ct_argmax(tie, 1, false));
    put("argmin_ties", ct_argmin(tie, 1, false));
    ct_tensor *tv = NULL, *tix = NULL;
    put_int("max_dim_ties_rc", ct_max_dim(tie, 1, false, &tv, &tix));
    put("max_dim_ties_values", tv);
    put("max_dim_ties_indices", tix);
    put("argmax_i32", ct_argmax(I32D(S(4), 3, 9, 9, 1), 0, false));
}

void case_norm_topk_cumsum(void) {
    ct_tensor *x = RN64G(3, 4);
    ct_tensor *x32 = RNG(50);
    outs o = {0};
    out(&o, "norm_2", ct_norm(x, 2));
    out(&o, "norm_1", ct_norm(x, 1));
    out(&o, "norm_3", ct_norm(x, 3));
    out(&o, "norm_inf", ct_norm(x, INFINITY));
    out(&o, "norm_0_5", ct_norm(x, 0.5));
    out(&o, "norm_0", ct_norm(x, 0));
    out(&o, "f32_norm_2", ct_norm(x32, 2));
    ct_tensor *ti = NULL, *ti2 = NULL;
    out(&o, "topk_2_largest", ct_topk(x, 2, 1, true, true, &ti));
    put("topk_2_largest_indices", ti);
    out(&o, "topk_3_smallest_dim0", ct_topk(x, 3, 0, false, true, &ti2));
    put("topk_3_smallest_dim0_indices", ti2);
    out(&o, "topk_unsorted_no_indices", ct_topk(x, 2, -1, true, false, NULL));
    out(&o, "cumsum_0", ct_cumsum(x, 0));
    out(&o, "cumsum_neg1", ct_cumsum(x, -1));
    out(&o, "f32_cumsum", ct_cumsum(x32, 0));
    bw_outs(&o);
    put_grad("x", x);
    put_grad("x32", x32);
    put("cumsum_i32_widens", ct_cumsum(I32D(S(4), 1, 2, 3, INT32_MAX), 0));
    put("cumsum_bool", ct_cumsum(BOOLD(S(3), true, false, true), 0));
    ct_tensor *probs = ct_add_scalar(ct_rand(S(2, 5), NULL), 0.1);
    put("multinomial_no_replacement", ct_multinomial(probs, 3, false));
    put("multinomial_replacement", ct_multinomial(probs, 8, true));
    put("multinomial_1d", ct_multinomial(F64D(S(4), 0.1, 0, 0.6, 0.3), 5, true));
}
