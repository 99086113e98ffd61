// shim/optim_step.cpp — the update rules of torch.optim (torch 2.11), op for
// op, so that results match Python's bit for bit: `_single_tensor_*`
// (Python's choice on the CPU), `_multi_tensor_*` (foreach=True, or
// foreach=None with every parameter on CUDA) and `_fused_*` (fused=True).
// Which one runs is decided per group and per step exactly as Python decides.
// Comments name where ctrial differs: only where Python would fail.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optim_internal.h"

namespace ct {
namespace optim {
namespace {

// ---- small tensor helpers -------------------------------------------------

// Python keeps "step" as a float32 0-dim tensor: on the CPU, or on the
// parameter's device for fused groups (the kernels read it there).
at::Tensor zero_step(const at::Tensor &p, bool fused) {
    auto opt = at::TensorOptions().dtype(at::kFloat);
    return at::zeros({}, fused ? opt.device(p.device()) : opt);
}

bool fused_on(const Group &g) { return g.h.v[kFused] == 1; }

void touch_state(ct_optim *o, size_t i) {
    if (o->state[i].present) return;
    o->state[i].present = true;
    o->state_order.push_back(i);
}

// Parameters with a gradient, in group order; Python skips the others.
std::vector<size_t> with_grad(const ct_optim *o, const Group &g) {
    std::vector<size_t> idx;
    for (size_t i : g.params) {
        const at::Tensor &grad = o->params[i].grad();
        if (!grad.defined()) continue;
        if (grad.is_sparse())
            fail(CT_ENOTSUP, std::string(kind_name(o->kind)) + " does not support sparse gradients");
        idx.push_back(i);
    }
    return idx;
}

// Optimizer._group_tensors_by_device_and_dtype: foreach and fused kernels
// take lists of one device and dtype. First-seen order, like Python's dict.
std::vector<std::vector<size_t>> by_device_dtype(const ct_optim *o, const std::vector<size_t> &idx) {
    std::vector<std::pair<std::pair<at::Device, at::ScalarType>, std::vector<size_t>>> buckets;
    for (size_t i : idx) {
        auto key = std::make_pair(o->params[i].device(), o->params[i].scalar_type());
        auto it = buckets.begin();
        while (it != buckets.end() && it->first != key) ++it;
        if (it == buckets.end()) buckets.push_back({key, {i}});
        else it->second.push_back(i);
    }
    std::vector<std::vector<size_t>> out;
    for (auto &b : buckets) out.push_back(std::move(b.second));
    return out;
}

std::vector<at::Tensor> gather(const ct_optim *o, const std::vector<size_t> &idx) {
    std::vector<at::Tensor> v;
    for (size_t i : idx) v.push_back(o->params[i]);
    return v;
}
std::vector<at::Tensor> gather_grads(const ct_optim *o, const std::vector<size_t> &idx) {
    std::vector<at::Tensor> v;
    for (size_t i : idx) v.push_back(o->params[i].grad());
    return v;
}
std::vector<at::Tensor> gather(ct_optim *o, const std::vector<size_t> &idx, at::Tensor State::*f) {
    std::vector<at::Tensor> v;
    for (size_t i : idx) v.push_back(o->state[i].*f);
    return v;
}

enum class Path { Single, Foreach, Fused };

// The implementation Python picks for this group and step.
Path choose_path(const ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    double foreach = g.h.v[kForeach];
    double fused = g.h.v[kFused];  // kNone for RMSprop, which has no such key
    if (fused == 1) return Path::Fused;
    if (foreach == kNone && fused == kNone) {
        // _default_to_fused_or_foreach: foreach when every parameter is on
        // a device with foreach kernels (CUDA here).
        for (size_t i : idx)
            if (!o->params[i].is_cuda()) return Path::Single;
        return Path::Foreach;
    }
    return foreach == 1 ? Path::Foreach : Path::Single;
}

// _device_dtype_check_for_fused.
void check_fused(const ct_optim *o, const std::vector<size_t> &idx, bool cuda_ok) {
    for (size_t i : idx) {
        const at::Tensor &p = o->params[i];
        bool dev_ok = p.is_cpu() || (cuda_ok && p.is_cuda());
        if (!dev_ok || !at::isFloatingType(p.scalar_type()))
            fail(CT_ENOTSUP, std::string("`fused=True` requires all the params to be floating point "
                                         "Tensors of supported devices: ") +
                                 (cuda_ok ? "['cpu', 'cuda']" : "['cpu']") + " but " +
                                 ct::describe(p));
    }
}

// Fused groups keep "step" on the parameter's device.
void steps_to_params(ct_optim *o, const std::vector<size_t> &idx) {
    for (size_t i : idx) {
        at::Tensor &s = o->state[i].step;
        if (s.device() != o->params[i].device()) s = s.to(o->params[i].device());
    }
}

// grad_scale_dict / found_inf_dict of Python's fused functions: the tensor
// itself on its own device, else a copy made once per device. Empty (None)
// when the optimizer was not given one by a GradScaler.
struct PerDevice {
    at::Tensor master;
    std::vector<std::pair<at::Device, at::Tensor>> copies;
    std::optional<at::Tensor> get(const at::Device &d) {
        if (!master.defined()) return std::nullopt;
        if (master.device() == d) return master;
        for (auto &c : copies)
            if (c.first == d) return c.second;
        copies.emplace_back(d, master.to(d, master.scalar_type(), /*non_blocking=*/true));
        return copies.back().second;
    }
};

std::vector<at::Scalar> scalars(const std::vector<double> &v) {
    return std::vector<at::Scalar>(v.begin(), v.end());
}

// ============================================================================
// SGD (torch/optim/sgd.py)
// ============================================================================

void sgd_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], momentum = h[kMomentum], dampening = h[kDampening],
                 wd = h[kWeightDecay];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        if (wd != 0) grad = grad.add(param, wd);
        if (momentum != 0) {
            at::Tensor &buf = o->state[i].momentum_buffer;
            if (!buf.defined()) buf = grad.detach().clone();
            else buf.mul_(momentum).add_(grad, 1 - dampening);
            grad = h[kNesterov] ? grad.add(buf, momentum) : buf;
        }
        param.add_(grad, -lr);
    }
}

void sgd_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], momentum = h[kMomentum], dampening = h[kDampening],
                 wd = h[kWeightDecay];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        if (maximize) grads = at::_foreach_neg(grads);
        if (wd != 0) {
            if (maximize) at::_foreach_add_(grads, params, wd);  // reuse the negated copies
            else grads = at::_foreach_add(grads, params, wd);
        }
        if (momentum != 0) {
            std::vector<at::Tensor> bufs = gather(o, idx, &State::momentum_buffer);
            bool all_present = true;
            for (const auto &b : bufs) all_present = all_present && b.defined();
            if (all_present) {
                at::_foreach_mul_(bufs, at::Scalar(momentum));
                at::_foreach_add_(bufs, grads, 1 - dampening);
            } else {
                for (size_t k = 0; k < idx.size(); ++k) {
                    at::Tensor &buf = o->state[idx[k]].momentum_buffer;
                    if (!buf.defined()) buf = grads[k].detach().clone();
                    else buf.mul_(momentum).add_(grads[k], 1 - dampening);
                    bufs[k] = buf;
                }
            }
            // As in Python, nesterov updates the gradient list in place
            // (p.grad itself when neither maximize nor weight decay copied it).
            if (h[kNesterov]) at::_foreach_add_(grads, bufs, momentum);
            else grads = bufs;
        }
        at::_foreach_add_(params, grads, -lr);
    }
}

void sgd_fused(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    check_fused(o, all, true);
    const bool no_buffer = h[kMomentum] == 0;
    // Python allocates every buffer on the first step and lets the kernel
    // copy the gradient in. A group where only some parameters have a
    // buffer (Python fails on it) runs as two calls: first steps, the rest.
    std::vector<size_t> first, later;
    for (size_t i : all) {
        at::Tensor &buf = o->state[i].momentum_buffer;
        if (no_buffer || buf.defined()) later.push_back(i);
        else {
            buf = at::empty_like(o->params[i].grad());
            first.push_back(i);
        }
    }
    PerDevice grad_scale{o->amp_grad_scale, {}}, found_inf{o->amp_found_inf, {}};
    for (int pass = 0; pass < 2; ++pass) {
        const bool is_first = pass == 0;
        for (const auto &idx : by_device_dtype(o, is_first ? first : later)) {
            std::vector<at::Tensor> bufs;
            if (!no_buffer) bufs = gather(o, idx, &State::momentum_buffer);
            const at::Device dev = o->params[idx[0]].device();
            // With found_inf set the kernel returns at once, also on a first
            // step: the new buffers stay uninitialised, as in Python.
            at::_fused_sgd_(gather(o, idx), gather_grads(o, idx), bufs, h[kWeightDecay],
                            h[kMomentum], h[kLr], h[kDampening], h[kNesterov] != 0,
                            h[kMaximize] != 0, is_first, grad_scale.get(dev), found_inf.get(dev));
        }
    }
}

void sgd_step(ct_optim *o, const Group &g, const std::vector<size_t> &idx, Path path) {
    // Python's _init_group touches self.state[p] whenever momentum != 0.
    if (g.h.v[kMomentum] != 0)
        for (size_t i : idx) touch_state(o, i);
    if (path == Path::Fused) sgd_fused(o, g, idx);
    else if (path == Path::Foreach) sgd_foreach(o, g, idx);
    else sgd_single(o, g, idx);
}

// ============================================================================
// Adam and AdamW (torch/optim/adam.py; AdamW is Adam with decoupled decay)
// ============================================================================

void adam_init(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    for (size_t i : idx) {
        State &s = o->state[i];
        const at::Tensor &p = o->params[i];
        if (!s.present || !s.step.defined()) {
            touch_state(o, i);
            s.step = zero_step(p, fused_on(g));
            s.exp_avg = at::zeros_like(p);
            s.exp_avg_sq = at::zeros_like(p);
            if (g.h.v[kAmsgrad]) s.max_exp_avg_sq = at::zeros_like(p);
        }
        // amsgrad switched on after the first step: Python fails; start at 0.
        if (g.h.v[kAmsgrad] && !s.max_exp_avg_sq.defined())
            s.max_exp_avg_sq = at::zeros_like(p);
    }
}

void adam_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], wd = h[kWeightDecay],
                 eps = h[kEps];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        s.step.add_(1);
        if (wd != 0) {
            if (h[kDecoupled]) param.mul_(1 - lr * wd);
            else grad = grad.add(param, wd);
        }
        s.exp_avg.lerp_(grad, 1 - beta1);
        s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);

        const double step = s.step.item<double>();
        const double bias_correction1 = 1 - std::pow(beta1, step);
        const double bias_correction2 = 1 - std::pow(beta2, step);
        const double step_size = lr / bias_correction1;
        const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
        at::Tensor denom;
        if (h[kAmsgrad]) {
            at::maximum_out(s.max_exp_avg_sq, s.max_exp_avg_sq, s.exp_avg_sq);
            denom = (s.max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps);
        } else {
            denom = (s.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps);
        }
        param.addcdiv_(s.exp_avg, denom, -step_size);
    }
}

void adam_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], wd = h[kWeightDecay],
                 eps = h[kEps];
    const bool maximize = h[kMaximize] != 0, amsgrad = h[kAmsgrad] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> exp_avgs = gather(o, idx, &State::exp_avg);
        std::vector<at::Tensor> exp_avg_sqs = gather(o, idx, &State::exp_avg_sq);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        if (maximize) grads = at::_foreach_neg(grads);
        at::_foreach_add_(steps, at::Scalar(1));
        if (wd != 0) {
            if (h[kDecoupled]) at::_foreach_mul_(params, at::Scalar(1 - lr * wd));
            else if (maximize) at::_foreach_add_(grads, params, wd);
            else grads = at::_foreach_add(grads, params, wd);
        }
        at::_foreach_lerp_(exp_avgs, grads, at::Scalar(1 - beta1));
        at::_foreach_mul_(exp_avg_sqs, at::Scalar(beta2));
        at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);

        std::vector<double> step_size, bias_correction2_sqrt;
        for (const auto &s : steps) {
            const double step = s.item<double>();
            step_size.push_back((lr / (1 - std::pow(beta1, step))) * -1);
            bias_correction2_sqrt.push_back(std::pow(1 - std::pow(beta2, step), 0.5));
        }
        std::vector<at::Tensor> sq;
        if (amsgrad) {
            std::vector<at::Tensor> maxs = gather(o, idx, &State::max_exp_avg_sq);
            at::_foreach_maximum_(maxs, exp_avg_sqs);
            sq = at::_foreach_sqrt(maxs);
        } else {
            sq = at::_foreach_sqrt(exp_avg_sqs);
        }
        at::_foreach_div_(sq, scalars(bias_correction2_sqrt));
        at::_foreach_add_(sq, at::Scalar(eps));
        at::_foreach_addcdiv_(params, exp_avgs, sq, scalars(step_size));
    }
}

void adam_fused(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    check_fused(o, all, true);
    steps_to_params(o, all);
    PerDevice grad_scale{o->amp_grad_scale, {}}, found_inf{o->amp_found_inf, {}};
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        std::vector<at::Tensor> maxs;
        if (h[kAmsgrad]) maxs = gather(o, idx, &State::max_exp_avg_sq);
        const at::Device dev = o->params[idx[0]].device();
        std::optional<at::Tensor> dev_grad_scale = grad_scale.get(dev), dev_found_inf = found_inf.get(dev);
        at::_foreach_add_(steps, at::Scalar(1));
        if (h[kDecoupled])
            at::_fused_adamw_(gather(o, idx), gather_grads(o, idx), gather(o, idx, &State::exp_avg),
                              gather(o, idx, &State::exp_avg_sq), maxs, steps, h[kLr], h[kBeta1],
                              h[kBeta2], h[kWeightDecay], h[kEps], h[kAmsgrad] != 0,
                              h[kMaximize] != 0, dev_grad_scale, dev_found_inf);
        else
            at::_fused_adam_(gather(o, idx), gather_grads(o, idx), gather(o, idx, &State::exp_avg),
                             gather(o, idx, &State::exp_avg_sq), maxs, steps, h[kLr], h[kBeta1],
                             h[kBeta2], h[kWeightDecay], h[kEps], h[kAmsgrad] != 0,
                             h[kMaximize] != 0, dev_grad_scale, dev_found_inf);
        // A skipped step does not count: the kernel left everything alone.
        if (dev_found_inf)
            at::_foreach_sub_(steps, std::vector<at::Tensor>(steps.size(), *dev_found_inf));
    }
}

void adam_step(ct_optim *o, const Group &g, const std::vector<size_t> &idx, Path path) {
    if (path == Path::Fused) check_fused(o, idx, true);  // before any state is made
    adam_init(o, g, idx);
    if (path == Path::Fused) adam_fused(o, g, idx);
    else if (path == Path::Foreach) adam_foreach(o, g, idx);
    else adam_single(o, g, idx);
}

// ============================================================================
// RMSprop (torch/optim/rmsprop.py)
// ============================================================================

void rmsprop_init(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    for (size_t i : idx) {
        State &s = o->state[i];
        const at::Tensor &p = o->params[i];
        if (!s.present || !s.step.defined()) {
            touch_state(o, i);
            s.step = zero_step(p, false);
            s.square_avg = at::zeros_like(p);
        }
        // Created when the option is on at the first step, as in Python; when
        // it is switched on later (Python fails) they start at 0.
        if (h[kMomentum] > 0 && !s.momentum_buffer.defined())
            s.momentum_buffer = at::zeros_like(p);
        if (h[kCentered] && !s.grad_avg.defined())
            s.grad_avg = at::zeros_like(p);
    }
}

void rmsprop_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], alpha = h[kAlpha], eps = h[kEps], wd = h[kWeightDecay],
                 momentum = h[kMomentum];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        s.step.add_(1);
        if (wd != 0) grad = grad.add(param, wd);
        s.square_avg.mul_(alpha).addcmul_(grad, grad, 1 - alpha);
        at::Tensor avg;
        if (h[kCentered]) {
            s.grad_avg.lerp_(grad, 1 - alpha);
            avg = s.square_avg.addcmul(s.grad_avg, s.grad_avg, -1).sqrt_();
        } else {
            avg = s.square_avg.sqrt();
        }
        avg = avg.add_(eps);
        if (momentum > 0) {
            s.momentum_buffer.mul_(momentum).addcdiv_(grad, avg);
            param.add_(s.momentum_buffer, -lr);
        } else {
            param.addcdiv_(grad, avg, -lr);
        }
    }
}

void rmsprop_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], alpha = h[kAlpha], eps = h[kEps], wd = h[kWeightDecay],
                 momentum = h[kMomentum];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> square_avgs = gather(o, idx, &State::square_avg);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        if (maximize) grads = at::_foreach_neg(grads);
        at::_foreach_add_(steps, at::Scalar(1));
        if (wd != 0) {
            if (maximize) at::_foreach_add_(grads, params, wd);
            else grads = at::_foreach_add(grads, params, wd);
        }
        at::_foreach_mul_(square_avgs, at::Scalar(alpha));
        at::_foreach_addcmul_(square_avgs, grads, grads, 1 - alpha);
        std::vector<at::Tensor> avg;
        if (h[kCentered]) {
            std::vector<at::Tensor> grad_avgs = gather(o, idx, &State::grad_avg);
            at::_foreach_lerp_(grad_avgs, grads, at::Scalar(1 - alpha));
            avg = at::_foreach_addcmul(square_avgs, grad_avgs, grad_avgs, -1);
            at::_foreach_sqrt_(avg);
            at::_foreach_add_(avg, at::Scalar(eps));
        } else {
            avg = at::_foreach_sqrt(square_avgs);
            at::_foreach_add_(avg, at::Scalar(eps));
        }
        if (momentum > 0) {
            std::vector<at::Tensor> bufs = gather(o, idx, &State::momentum_buffer);
            at::_foreach_mul_(bufs, at::Scalar(momentum));
            at::_foreach_addcdiv_(bufs, grads, avg);
            at::_foreach_add_(params, bufs, -lr);
        } else {
            at::_foreach_addcdiv_(params, grads, avg, -lr);
        }
    }
}

void rmsprop_step(ct_optim *o, const Group &g, const std::vector<size_t> &idx, Path path) {
    rmsprop_init(o, g, idx);
    if (path == Path::Foreach) rmsprop_foreach(o, g, idx);
    else rmsprop_single(o, g, idx);
}

// ============================================================================
// Adagrad (torch/optim/adagrad.py)
// ============================================================================

// Adagrad makes its state when parameters join (Python: in __init__).
}  // namespace

void adagrad_init_param(ct_optim *o, const Group &g, size_t i) {
    State &s = o->state[i];
    const at::Tensor &p = o->params[i];
    touch_state(o, i);
    s.step = zero_step(p, fused_on(g));
    s.sum = at::full_like(p, g.h.v[kInitAcc]);
}

namespace {

void adagrad_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], wd = h[kWeightDecay], lr_decay = h[kLrDecay], eps = h[kEps];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        s.step.add_(1);
        const double step = s.step.item<double>();
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        if (wd != 0) grad = grad.add(param, wd);
        const double clr = lr / (1 + (step - 1) * lr_decay);
        s.sum.addcmul_(grad, grad, 1);
        at::Tensor std = s.sum.sqrt().add_(eps);
        param.addcdiv_(grad, std, -clr);
    }
}

void adagrad_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], wd = h[kWeightDecay], lr_decay = h[kLrDecay], eps = h[kEps];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> sums = gather(o, idx, &State::sum);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        if (maximize) grads = at::_foreach_neg(grads);
        at::_foreach_add_(steps, at::Scalar(1));
        if (wd != 0) {
            if (maximize) at::_foreach_add_(grads, params, wd);
            else grads = at::_foreach_add(grads, params, wd);
        }
        std::vector<double> minus_clr;
        for (const auto &s : steps) minus_clr.push_back(-lr / (1 + (s.item<double>() - 1) * lr_decay));
        at::_foreach_addcmul_(sums, grads, grads, 1);
        std::vector<at::Tensor> std = at::_foreach_sqrt(sums);
        at::_foreach_add_(std, at::Scalar(eps));
        std::vector<at::Tensor> numerator;
        if (wd != 0 || maximize) {  // grads are already copies: scale in place
            at::_foreach_mul_(grads, scalars(minus_clr));
            numerator = grads;
        } else {
            numerator = at::_foreach_mul(grads, scalars(minus_clr));
        }
        at::_foreach_addcdiv_(params, numerator, std);
    }
}

void adagrad_fused(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    check_fused(o, all, false);  // libtorch has no CUDA kernel for it
    steps_to_params(o, all);
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        at::_foreach_add_(steps, at::Scalar(1));
        at::_fused_adagrad_(gather(o, idx), gather_grads(o, idx), gather(o, idx, &State::sum), steps,
                            h[kLr], h[kLrDecay], h[kWeightDecay], h[kEps], h[kMaximize] != 0);
    }
}

void adagrad_step(ct_optim *o, const Group &g, const std::vector<size_t> &idx, Path path) {
    if (path == Path::Fused) check_fused(o, idx, false);
    for (size_t i : idx)  // a loaded state dict may lack some parameters
        if (!o->state[i].sum.defined()) adagrad_init_param(o, g, i);
    if (path == Path::Fused) adagrad_fused(o, g, idx);
    else if (path == Path::Foreach) adagrad_foreach(o, g, idx);
    else adagrad_single(o, g, idx);
}

}  // namespace

void step_group(ct_optim *o, const Group &g) {
    std::vector<size_t> idx = with_grad(o, g);
    if (idx.empty()) return;
    Path path = choose_path(o, g, idx);
    switch (o->kind) {
    case Kind::SGD: sgd_step(o, g, idx, path); break;
    case Kind::Adam:
    case Kind::AdamW: adam_step(o, g, idx, path); break;
    case Kind::RMSprop: rmsprop_step(o, g, idx, path); break;
    case Kind::Adagrad: adagrad_step(o, g, idx, path); break;
    }
}


}  // namespace optim
}  // namespace ct
