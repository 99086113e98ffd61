"""Twins of tests/ops/cases_math.c."""
import torch

from pyharness import (G, INF, NAN, bf16, bw, case, f16, f32, f64, grads, i32, i64, rn, rn64g, rng,
                       snap, tbool, u8)


def backprop(o, r=None):
    """Backprops the outputs dict o (in order) and merges it into r."""
    bw(*o.values())
    return {**(r or {}), **o}


@case("binary_broadcast")
def _():
    a, b = rn64g(3, 1, 4), rn64g(2, 4)
    base = torch.rand(3, 1, 4, dtype=f64, requires_grad=True)
    a32, b32 = rng(3, 1, 20), rng(2, 20)
    ta = G(torch.tensor([1.0, 2, 3], dtype=f64))
    tb = G(torch.tensor([1.0, 0, 3], dtype=f64))
    s = G(torch.scalar_tensor(1.5, dtype=f64))
    pos = base + 0.5
    r = backprop({
        "add": a + b, "sub": a - b, "mul": a * b, "div": a / b,
        "maximum": torch.maximum(a, b), "minimum": torch.minimum(a, b), "pow": torch.pow(pos, b),
        "add_f32": a32 + b32, "sub_f32": b32 - a32, "mul_f32": a32 * b32, "div_f32": a32 / b32,
        "maximum_ties": torch.maximum(ta, tb), "minimum_ties": torch.minimum(ta, tb),
        "mul_0d": a * s, "div_0d_by": s / b,
    })
    return grads(r, a=a, b=b, base=base, a32=a32, b32=b32, ta=ta, tb=tb, s=s)


@case("promotion")
def _():
    i64_ = torch.tensor([1, 2, 3])
    i32_ = torch.tensor([-4, 5, 6], dtype=i32)
    u8_ = torch.tensor([7, 8, 250], dtype=u8)
    bl = torch.tensor([True, False, True])
    f32_ = torch.tensor([0.5, -1.25, 2.0])
    f64_ = torch.tensor([0.1, 0.2, 0.3], dtype=f64)
    f16_, bf = f32_.to(f16), f32_.to(bf16)
    return {
        "i64_add_f32": i64_ + f32_,
        "i32_mul_f64": i32_ * f64_,
        "u8_add_i32": u8_ + i32_,
        "u8_add_u8_wraps": u8_ + u8_,
        "bool_add_i64": bl + i64_,
        "bool_mul_bool": bl * bl,
        "f32_add_f64_0d": f32_ + torch.scalar_tensor(0.25, dtype=f64),
        "i64_add_f64_0d": i64_ + torch.scalar_tensor(0.25, dtype=f64),
        "f16_add_f32": f16_ + f32_,
        "bf16_mul_f16": bf * f16_,
        "f16_mul_f16": f16_ * f16_,
        "bf16_add_bf16": bf + bf,
        "i64_div_i64": i64_ / torch.tensor([2, 2, 2]),
        "i64_sub_i32": i64_ - i32_,
        "maximum_i32_f32": torch.maximum(i32_, f32_),
        "pow_i64_i64": torch.pow(i64_, torch.tensor([2, 3, 0])),
        "i64_add_2_5": i64_ + 2.5,
        "i64_div_2": i64_ / 2.0,
        "f16_mul_3": f16_ * 3.0,
        "bf16_add_0_1": bf + 0.1,
        "bool_add_1_5": bl + 1.5,
        "i32_gt_1_5": i32_ > 1.5,
        "i64_eq_f32": i64_ == f32_,
        "u8_lt_i32": u8_ < i32_,
        "f32_rsub_10": 10.0 - f32_,
    }


@case("scalar_ops")
def _():
    x = rn64g(3, 4)
    base = torch.rand(3, 4, dtype=f64, requires_grad=True)
    x32 = rng(20)
    pos = base + 0.1
    r = backprop({
        "add_2_5": x + 2.5, "sub_1_25": x - 1.25, "mul_neg3": x * -3.0, "div_4": x / 4.0,
        "div_0_3": x / 0.3, "pow_2": x.pow(2.0), "pow_3": x.pow(3.0), "pow_0": x.pow(0.0),
        "pow_0_5": pos.pow(0.5), "pow_neg1_5": pos.pow(-1.5), "rsub_1": torch.rsub(x, 1.0),
        "f32_add_0_1": x32 + 0.1, "f32_mul_third": x32 * (1.0 / 3.0), "f32_div_3": x32 / 3.0,
        "f32_sub_1e_8": x32 - 1e-8, "f32_pow_2": x32.pow(2.0), "f32_rsub_0_5": torch.rsub(x32, 0.5),
    })
    return grads(r, x=x, base=base, x32=x32)


@case("unary")
def _():
    x = rn64g(3, 5)
    base = torch.rand(3, 5, dtype=f64, requires_grad=True)
    x32 = rng(20)
    pos = base + 0.1
    pos32 = x32.abs() + 0.1
    r = backprop({
        "neg": -x, "abs": x.abs(), "exp": x.exp(), "tanh": x.tanh(), "sigmoid": x.sigmoid(),
        "sin": x.sin(), "cos": x.cos(), "square": x.square(), "sign": x.sign(), "floor": x.floor(),
        "ceil": x.ceil(), "round": x.round(), "log": pos.log(), "sqrt": pos.sqrt(),
        "rsqrt": pos.rsqrt(), "reciprocal": pos.reciprocal(),
        "f32_exp": x32.exp(), "f32_tanh": x32.tanh(), "f32_sigmoid": x32.sigmoid(),
        "f32_sin": x32.sin(), "f32_cos": x32.cos(), "f32_log": pos32.log(), "f32_sqrt": pos32.sqrt(),
        "f32_rsqrt": pos32.rsqrt(), "f32_reciprocal": pos32.reciprocal(),
    })
    grads(r, x=x, base=base, x32=x32)
    special = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999, -0.0, 1e300], dtype=f64)
    nonfinite = torch.tensor([NAN, INF, -INF, 1, 0], dtype=f64)
    r.update({
        "round_halfway": special.round(), "floor_special": special.floor(),
        "ceil_special": special.ceil(), "sign_special": special.sign(),
        "isnan": nonfinite.isnan(), "isfinite": nonfinite.isfinite(),
        "isnan_of_int": torch.tensor([1, 2]).isnan(),
        "exp_nonfinite": nonfinite.exp(), "log_nonfinite": nonfinite.log(),
        "sqrt_negative": torch.tensor([-1.0, 4.0], dtype=f64).sqrt(),
        "logical_not_f64": nonfinite.logical_not(),
        "logical_not_bool": torch.tensor([True, False]).logical_not(),
        "logical_not_i64": torch.tensor([0, 3, -1]).logical_not(),
        "abs_i32": torch.tensor([-3, 0, 4], dtype=i32).abs(),
        "neg_i64": -torch.tensor([5, -6]),
        "square_i64": torch.tensor([-3, 4]).square(),
        "sign_i32": torch.tensor([-3, 0, 4], dtype=i32).sign(),
        "exp_i64": torch.tensor([0, 1]).exp(),
    })
    return r


@case("compare")
def _():
    a = torch.randint(0, 3, (3, 4), dtype=f32)
    b = torch.randint(0, 3, (4,), dtype=f32)
    ia = torch.randint(0, 3, (4,))
    n = torch.tensor([NAN, 1.0], dtype=f64)
    return {
        "a": a, "eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
        "eq_scalar": a == 1.0, "ne_scalar": a != 1.0, "lt_scalar": a < 1.0, "le_scalar": a <= 1.0,
        "gt_scalar": a > 1.0, "ge_scalar": a >= 1.0,
        "lt_int_float": ia < b, "eq_int_scalar": ia == 1.0, "ge_int_half": ia >= 0.5,
        "eq_nan": n == n, "ne_nan": n != n, "lt_nan_scalar": n < 2.0,
    }


@case("where")
def _():
    cond = rn(3, 4) > 0
    a, b = rng(3, 4), rng(4)
    cond2 = rn(3, 1) > 0
    r = backprop({
        "where": torch.where(cond, a, b),
        "where_cond_broadcast": torch.where(cond2, a, b),
        "where_int_float": torch.where(cond, torch.tensor([1, 2, 3, 4]), b),
        "where_0d_other": torch.where(cond2, a, torch.scalar_tensor(0.0)),
    }, {"cond": cond, "cond2": cond2})
    grads(r, a=a, b=b)
    r["where_i64"] = torch.where(cond, torch.tensor([1, 2, 3, 4]), torch.scalar_tensor(-1, dtype=i64))
    return r


@case("clamp")
def _():
    x = rn64g(4, 5)
    edge = G(torch.tensor([-1, -0.5, 0, 0.5, 1], dtype=f64))
    x32 = rng(20)
    r = backprop({
        "both": torch.clamp(x, -0.5, 0.5),
        "max_only": torch.clamp(x, max=0.3),
        "min_only": torch.clamp(x, min=-0.2),
        "no_bounds": torch.clamp(x, -INF, INF),
        "at_bounds": torch.clamp(edge, -0.5, 0.5),
        "min_above_max": torch.clamp(x, 0.7, 0.2),
        "f32_both": torch.clamp(x32, -0.25, 0.75),
    })
    grads(r, x=x, edge=edge, x32=x32)
    r["nan_propagates"] = torch.clamp(torch.tensor([NAN, 2.0, -3.0]), -1, 1)
    return r


@case("inplace")
def _():
    base, b, b2 = rn(3, 4), rn(4), rn(3, 1)
    r = {}
    t = base.clone()
    t.add_(b, alpha=0.5); r["add_rc"] = 0; r["add_"] = snap(t)
    t.add_(b2, alpha=-2); r["add_neg_alpha_rc"] = 0; r["add_neg_alpha"] = snap(t)
    t.mul_(b2); r["mul_rc"] = 0; r["mul_"] = snap(t)
    t.mul_(-2.0); r["mul_scalar_rc"] = 0; r["mul_scalar_"] = snap(t)
    t.add_(0.25); r["add_scalar_rc"] = 0; r["add_scalar_"] = snap(t)
    t.clamp_(min=-0.1); r["clamp_min_rc"] = 0; r["clamp_min_"] = snap(t)
    t.clamp_(max=0.4); r["clamp_max_rc"] = 0; r["clamp_max_"] = snap(t)
    t.clamp_(-0.05, 0.05); r["clamp_both_rc"] = 0; r["clamp_both_"] = snap(t)
    r["clamp_none_rc"] = 0; r["clamp_none_"] = snap(t)
    f = base.clone()
    f.fill_(7.5); r["fill_rc"] = 0; r["fill_"] = snap(f)
    f.zero_(); r["zero_rc"] = 0; r["zero_"] = snap(f)
    u = torch.zeros(3, 4).uniform_(-2, 3); r["uniform_rc"] = 0; r["uniform_"] = u
    n = torch.zeros(3, 4, dtype=f64).normal_(1, 2); r["normal_rc"] = 0; r["normal_"] = n
    h = torch.zeros(5, dtype=f16).normal_(0, 1); r["normal_f16_rc"] = 0; r["normal_f16_"] = h

    vb = base.clone()
    vb[:, 1:3].fill_(9); r["fill_view_rc"] = 0
    vb.select(0, 2).zero_(); r["zero_row_rc"] = 0
    vb.t().add_(torch.ones(4, 3), alpha=1); r["add_transposed_rc"] = 0
    r["views_write_base"] = vb

    x = rng(3)
    y = x * 2
    y.add_(1); r["grad_add_scalar_rc"] = 0
    y.mul_(3); r["grad_mul_scalar_rc"] = 0
    y.mul_(x); r["grad_mul_rc"] = 0
    r["y"] = snap(y)
    bw(y)
    return grads(r, x=x)


@case("inplace_int")
def _():
    c, d = torch.tensor([1, 2, 3]), torch.tensor([10, 20, 30])
    r = {}
    c.add_(d, alpha=1); r["add_rc"] = 0; r["add_"] = snap(c)
    c.add_(d, alpha=-2); r["add_alpha_rc"] = 0; r["add_alpha_"] = snap(c)
    c.add_(5); r["add_scalar_rc"] = 0; r["add_scalar_"] = snap(c)
    c.mul_(2); r["mul_scalar_rc"] = 0; r["mul_scalar_"] = snap(c)
    c.clamp_(-20, 50); r["clamp_rc"] = 0; r["clamp_"] = snap(c)
    c.mul_(d); r["mul_rc"] = 0; r["mul_"] = snap(c)
    c.fill_(4); r["fill_rc"] = 0; r["fill_"] = snap(c)
    k = torch.tensor([7, -7], dtype=i32)
    k.add_(1); r["i32_add_scalar_rc"] = 0; r["i32_add_scalar_"] = snap(k)
    k.add_(torch.tensor([True, False]), alpha=1); r["i32_add_bool_rc"] = 0; r["i32_add_bool_"] = snap(k)
    return r


@case("reductions")
def _():
    x = rn64g(3, 4, 5)
    tie = G(torch.tensor([[1.0, 3, 3, 2], [0, 0, -1, -1]], dtype=f64))
    r = backprop({
        "sum": x.sum(), "mean": x.mean(), "max": x.max(), "min": x.min(),
        "sum_0": x.sum(0), "sum_0_2": x.sum((0, 2)), "sum_neg1_keep": x.sum(-1, keepdim=True),
        "sum_no_dims": x.sum(dim=[]),
        "mean_1_keep": x.mean(1, keepdim=True), "mean_0_1": x.mean((0, 1)), "mean_no_dims": x.mean(dim=[]),
        "var_1": x.var(1, correction=1), "var_0_2_corr0_keep": x.var((0, 2), correction=0, keepdim=True),
        "var_all": x.var(correction=1),
        "std_1": x.std(1, correction=1), "std_neg1_corr2_keep": x.std(-1, correction=2, keepdim=True),
        "std_all_corr0": x.std(correction=0),
        "logsumexp_2": x.logsumexp(2), "logsumexp_0_1_keep": x.logsumexp((0, 1), keepdim=True),
        "amax_1": x.amax(1), "amin_0_2_keep": x.amin((0, 2), keepdim=True), "amax_no_dims": x.amax(dim=[]),
        "amax_ties": tie.amax(1), "amin_ties": tie.amin(1), "max_ties": tie.max(), "min_ties": tie.min(),
    })
    grads(r, x=x, tie=tie)
    ti = torch.randint(0, 10, (3, 4), dtype=i32)
    r.update({
        "int_sum": ti.sum(), "int_sum_0": ti.sum(0), "int_amax_1": ti.amax(1), "int_max": ti.max(),
        "int_min": ti.min(), "bool_sum": torch.tensor([True, True, False, True]).sum(),
    })
    x32 = rn(1000)
    r.update({
        "f32_sum_1000": x32.sum(), "f32_mean_1000": x32.mean(), "f32_var_1000": x32.var(0),
        "f32_std_1000": x32.std(), "f32_logsumexp_1000": x32.logsumexp(0),
        "f16_sum": x32.to(f16).sum(), "bf16_mean": x32.to(bf16).mean(),
    })
    return r


@case("max_min_dim")
def _():
    x = rn64g(3, 5)
    v1, i1 = torch.max(x, 1)
    v2, i2 = torch.min(x, 0, keepdim=True)
    i3 = torch.max(x, -1, keepdim=True).indices
    v4 = torch.min(x, 1).values
    r = {"max_dim_rc": 0, "min_dim_keep_rc": 0, "max_dim_indices_only_rc": 0, "min_dim_values_only_rc": 0,
         "max_indices": i1, "min_keep_indices": i2, "max_indices_only": i3}
    r = backprop({"max_values": v1, "min_keep_values": v2, "min_values_only": v4}, r)
    grads(r, x=x)
    tie = torch.tensor([[1.0, 3, 3], [2, 2, 0]], dtype=f64)
    tv, tix = torch.max(tie, 1)
    r.update({
        "argmax_1": x.argmax(1), "argmin_0_keep": x.argmin(0, keepdim=True),
        "argmax_neg1_keep": x.argmax(-1, keepdim=True),
        "argmax_ties": tie.argmax(1), "argmin_ties": tie.argmin(1),
        "max_dim_ties_rc": 0, "max_dim_ties_values": tv, "max_dim_ties_indices": tix,
        "argmax_i32": torch.tensor([3, 9, 9, 1], dtype=i32).argmax(0),
    })
    return r


@case("norm_topk_cumsum")
def _():
    x = rn64g(3, 4)
    x32 = rng(50)
    norm = torch.linalg.vector_norm
    # Ops run in the C program's order: it decides how gradients are summed.
    r = backprop({
        "norm_2": norm(x, 2), "norm_1": norm(x, 1), "norm_3": norm(x, 3), "norm_inf": norm(x, INF),
        "norm_0_5": norm(x, 0.5), "norm_0": norm(x, 0), "f32_norm_2": norm(x32, 2),
        "topk_2_largest": (t1 := torch.topk(x, 2, 1, largest=True, sorted=True)).values,
        "topk_3_smallest_dim0": (t2 := torch.topk(x, 3, 0, largest=False, sorted=True)).values,
        "topk_unsorted_no_indices": torch.topk(x, 2, -1, largest=True, sorted=False).values,
        "cumsum_0": x.cumsum(0), "cumsum_neg1": x.cumsum(-1), "f32_cumsum": x32.cumsum(0),
    })
    r["topk_2_largest_indices"], r["topk_3_smallest_dim0_indices"] = t1.indices, t2.indices
    grads(r, x=x, x32=x32)
    r["cumsum_i32_widens"] = torch.tensor([1, 2, 3, 2**31 - 1], dtype=i32).cumsum(0)
    r["cumsum_bool"] = torch.tensor([True, False, True]).cumsum(0)
    probs = torch.rand(2, 5) + 0.1
    r["multinomial_no_replacement"] = torch.multinomial(probs, 3, replacement=False)
    r["multinomial_replacement"] = torch.multinomial(probs, 8, replacement=True)
    r["multinomial_1d"] = torch.multinomial(torch.tensor([0.1, 0, 0.6, 0.3], dtype=f64), 5, replacement=True)
    return r
