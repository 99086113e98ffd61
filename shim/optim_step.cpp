// shim/optim_step.cpp — the update rules of torch.optim (torch 2.11), op for
// op, so that results match Python's bit for bit: `_single_tensor_*`
// (Python's choice on the CPU), `_multi_tensor_*` (foreach=True, or
// foreach=None with every parameter on CUDA) and `_fused_*` (fused=True).
// Which one runs is decided per group and per step exactly as Python decides.
// Comments name where ctrial differs: only where Python would fail.
#include <c10/core/GradMode.h>

#include <cmath>
#include <optional>
#include <tuple>
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

// Parameters with a gradient, in group order; Python skips the others (and
// ctrial those ct_optim_set_stepped left out: another rank's share).
std::vector<size_t> with_grad(const ct_optim *o, const Group &g) {
    std::vector<size_t> idx;
    for (size_t i : g.params) {
        if (i < o->stepped.size() && !o->stepped[i]) continue;
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

// What the Adam family's foreach paths share, in Python's order. Weight
// decay: decoupled shrinks the parameters; coupled adds wd * param to the
// gradients, in place when maximize already made them a copy.
void foreach_weight_decay(std::vector<at::Tensor> &params, std::vector<at::Tensor> &grads, double lr, double wd,
                          bool decoupled, bool maximize) {
    if (wd == 0) return;
    if (decoupled) at::_foreach_mul_(params, at::Scalar(1 - lr * wd));
    else if (maximize) at::_foreach_add_(grads, params, wd);
    else grads = at::_foreach_add(grads, params, wd);
}

// exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2).
void foreach_adam_moments(std::vector<at::Tensor> &exp_avgs, std::vector<at::Tensor> &exp_avg_sqs,
                          const std::vector<at::Tensor> &grads, double beta1, double beta2) {
    at::_foreach_lerp_(exp_avgs, grads, at::Scalar(1 - beta1));
    at::_foreach_mul_(exp_avg_sqs, at::Scalar(beta2));
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
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
        foreach_weight_decay(params, grads, lr, wd, h[kDecoupled] != 0, maximize);
        foreach_adam_moments(exp_avgs, exp_avg_sqs, grads, beta1, beta2);

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
        foreach_weight_decay(params, grads, lr, wd, false, maximize);
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
        foreach_weight_decay(params, grads, lr, wd, false, maximize);
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

// ============================================================================
// Adadelta (torch/optim/adadelta.py)
// ============================================================================

// _init_group of Adadelta, Adamax, NAdam and RAdam: a parameter's state is
// made on its first step ("step" a float32 CPU scalar, buffers of zeros).
void lazy_init(ct_optim *o, const std::vector<size_t> &idx) {
    for (size_t i : idx) {
        State &s = o->state[i];
        const at::Tensor &p = o->params[i];
        if (s.present && s.step.defined()) continue;
        touch_state(o, i);
        s.step = zero_step(p, false);
        switch (o->kind) {
        case Kind::Adadelta:
            s.square_avg = at::zeros_like(p);
            s.acc_delta = at::zeros_like(p);
            break;
        case Kind::Adamax:
            s.exp_avg = at::zeros_like(p);
            s.exp_inf = at::zeros_like(p);
            break;
        case Kind::NAdam:
            s.mu_product = at::ones({}, at::TensorOptions().dtype(at::kFloat));
            s.exp_avg = at::zeros_like(p);
            s.exp_avg_sq = at::zeros_like(p);
            break;
        default:  // RAdam
            s.exp_avg = at::zeros_like(p);
            s.exp_avg_sq = at::zeros_like(p);
            break;
        }
    }
}

void adadelta_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], rho = h[kRho], eps = h[kEps], wd = h[kWeightDecay];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        s.step.add_(1);
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        if (wd != 0) grad = grad.add(param, wd);
        s.square_avg.mul_(rho).addcmul_(grad, grad, 1 - rho);
        at::Tensor std = s.square_avg.add(eps).sqrt_();
        at::Tensor delta = s.acc_delta.add(eps).sqrt_();
        delta.div_(std).mul_(grad);
        s.acc_delta.mul_(rho).addcmul_(delta, delta, 1 - rho);
        param.add_(delta, -lr);
    }
}

void adadelta_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], rho = h[kRho], eps = h[kEps], wd = h[kWeightDecay];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> square_avgs = gather(o, idx, &State::square_avg);
        std::vector<at::Tensor> acc_deltas = gather(o, idx, &State::acc_delta);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        at::_foreach_add_(steps, at::Scalar(1));
        if (maximize) grads = at::_foreach_neg(grads);
        foreach_weight_decay(params, grads, lr, wd, false, maximize);
        at::_foreach_mul_(square_avgs, at::Scalar(rho));
        at::_foreach_addcmul_(square_avgs, grads, grads, 1 - rho);
        std::vector<at::Tensor> std = at::_foreach_add(square_avgs, at::Scalar(eps));
        at::_foreach_sqrt_(std);
        std::vector<at::Tensor> deltas = at::_foreach_add(acc_deltas, at::Scalar(eps));
        at::_foreach_sqrt_(deltas);
        at::_foreach_div_(deltas, std);
        at::_foreach_mul_(deltas, grads);
        at::_foreach_mul_(acc_deltas, at::Scalar(rho));
        at::_foreach_addcmul_(acc_deltas, deltas, deltas, 1 - rho);
        at::_foreach_add_(params, deltas, -lr);
    }
}

// ============================================================================
// Adamax (torch/optim/adamax.py)
// ============================================================================

void adamax_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        s.step.add_(1);
        if (wd != 0) grad = grad.add(param, wd);
        s.exp_avg.lerp_(grad, 1 - beta1);
        // torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
        at::Tensor decayed = s.exp_inf.mul_(beta2);
        at::Tensor norm = grad.abs().add_(eps);
        at::maximum_out(s.exp_inf, decayed, norm);
        const double bias_correction = 1 - std::pow(beta1, s.step.item<double>());
        const double clr = lr / bias_correction;
        param.addcdiv_(s.exp_avg, s.exp_inf, -clr);
    }
}

void adamax_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> exp_avgs = gather(o, idx, &State::exp_avg);
        std::vector<at::Tensor> exp_infs = gather(o, idx, &State::exp_inf);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        if (maximize) grads = at::_foreach_neg(grads);
        at::_foreach_add_(steps, at::Scalar(1));
        foreach_weight_decay(params, grads, lr, wd, false, maximize);
        at::_foreach_lerp_(exp_avgs, grads, at::Scalar(1 - beta1));
        at::_foreach_mul_(exp_infs, at::Scalar(beta2));
        // A copy of the gradients unless maximize or weight decay made one.
        if (!maximize && wd == 0) grads = at::_foreach_abs(grads);
        else at::_foreach_abs_(grads);
        at::_foreach_add_(grads, at::Scalar(eps));
        at::_foreach_maximum_(exp_infs, grads);
        std::vector<double> step_size;
        for (const auto &s : steps) {
            const double bias_correction = 1 - std::pow(beta1, s.item<double>());
            step_size.push_back((lr / bias_correction) * -1);
        }
        at::_foreach_addcdiv_(params, exp_avgs, exp_infs, scalars(step_size));
    }
}

// ============================================================================
// NAdam (torch/optim/nadam.py)
// ============================================================================

void nadam_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay],
                 momentum_decay = h[kMomentumDecay];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        s.step.add_(1);
        const double step = s.step.item<double>();
        const double bias_correction2 = 1 - std::pow(beta2, step);
        if (wd != 0) {
            if (h[kDecoupled]) param.mul_(1 - lr * wd);
            else grad = grad.add(param, wd);
        }
        // The momentum cache mu^{t} and mu^{t+1}.
        const double mu = beta1 * (1.0 - 0.5 * std::pow(0.96, step * momentum_decay));
        const double mu_next = beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * momentum_decay));
        s.mu_product.mul_(mu);
        s.exp_avg.lerp_(grad, 1 - beta1);
        s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
        at::Tensor denom = s.exp_avg_sq.div(bias_correction2).sqrt();
        const double mu_product = s.mu_product.item<double>();
        const double mu_product_next = mu_product * mu_next;
        denom.add_(eps);
        param.addcdiv_(grad, denom, -lr * (1.0 - mu) / (1.0 - mu_product));
        param.addcdiv_(s.exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next));
    }
}

void nadam_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay],
                 momentum_decay = h[kMomentumDecay];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> exp_avgs = gather(o, idx, &State::exp_avg);
        std::vector<at::Tensor> exp_avg_sqs = gather(o, idx, &State::exp_avg_sq);
        std::vector<at::Tensor> mu_products = gather(o, idx, &State::mu_product);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        if (maximize) grads = at::_foreach_neg(grads);
        at::_foreach_add_(steps, at::Scalar(1));
        foreach_weight_decay(params, grads, lr, wd, h[kDecoupled] != 0, maximize);
        foreach_adam_moments(exp_avgs, exp_avg_sqs, grads, beta1, beta2);
        std::vector<at::Tensor> exp_avg_sq_sqrt = at::_foreach_sqrt(exp_avg_sqs);
        std::vector<double> bias_correction_sqrt, mus, mu_nexts;
        for (const auto &s : steps) {
            const double step = s.item<double>();
            bias_correction_sqrt.push_back(std::pow(1 - std::pow(beta2, step), 0.5));
            mus.push_back(beta1 * (1.0 - 0.5 * std::pow(0.96, step * momentum_decay)));
            mu_nexts.push_back(beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * momentum_decay)));
        }
        at::_foreach_mul_(mu_products, scalars(mus));
        at::_foreach_div_(exp_avg_sq_sqrt, scalars(bias_correction_sqrt));
        at::_foreach_add_(exp_avg_sq_sqrt, at::Scalar(eps));
        std::vector<double> step_size_grads, step_size_expavg;
        for (size_t k = 0; k < idx.size(); ++k) {
            const double mu_product = mu_products[k].item<double>();
            step_size_grads.push_back((lr * (1.0 - mus[k]) / (1.0 - mu_product)) * -1);
            step_size_expavg.push_back((lr * mu_nexts[k] / (1.0 - mu_product * mu_nexts[k])) * -1);
        }
        at::_foreach_addcdiv_(params, grads, exp_avg_sq_sqrt, scalars(step_size_grads));
        at::_foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, scalars(step_size_expavg));
    }
}

// ============================================================================
// RAdam (torch/optim/radam.py)
// ============================================================================

void radam_single(ct_optim *o, const Group &g, const std::vector<size_t> &idx) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay];
    for (size_t i : idx) {
        at::Tensor param = o->params[i];
        State &s = o->state[i];
        at::Tensor grad = h[kMaximize] ? at::neg(param.grad()) : param.grad();
        s.step.add_(1);
        const double step = s.step.item<double>();
        if (wd != 0) {
            if (h[kDecoupled]) param.mul_(1 - lr * wd);
            else grad = grad.add(param, wd);
        }
        s.exp_avg.lerp_(grad, 1 - beta1);
        s.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
        const double bias_correction1 = 1 - std::pow(beta1, step);
        const double bias_correction2 = 1 - std::pow(beta2, step);
        at::Tensor bias_corrected_exp_avg = s.exp_avg / bias_correction1;
        // The maximum and the current length of the approximated SMA.
        const double rho_inf = 2 / (1 - beta2) - 1;
        const double rho_t = rho_inf - 2 * step * std::pow(beta2, step) / bias_correction2;
        if (rho_t > 5.0) {
            at::Tensor update = bias_corrected_exp_avg * lr;
            // (bias_correction2 ** 0.5) / exp_avg_sq_sqrt: Tensor.__rdiv__ is reciprocal() * other
            at::Tensor adaptive_lr = s.exp_avg_sq.sqrt().add_(eps).reciprocal() * std::pow(bias_correction2, 0.5);
            update = update * adaptive_lr;
            const double rect =
                std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5);
            param.add_(update * rect, -1.0);
        } else {
            param.add_(bias_corrected_exp_avg * lr, -1.0);
        }
    }
}

void radam_foreach(ct_optim *o, const Group &g, const std::vector<size_t> &all) {
    const double *h = g.h.v;
    const double lr = h[kLr], beta1 = h[kBeta1], beta2 = h[kBeta2], eps = h[kEps], wd = h[kWeightDecay];
    const bool maximize = h[kMaximize] != 0;
    for (const auto &idx : by_device_dtype(o, all)) {
        std::vector<at::Tensor> params = gather(o, idx), grads = gather_grads(o, idx);
        std::vector<at::Tensor> exp_avgs = gather(o, idx, &State::exp_avg);
        std::vector<at::Tensor> exp_avg_sqs = gather(o, idx, &State::exp_avg_sq);
        std::vector<at::Tensor> steps = gather(o, idx, &State::step);
        at::_foreach_add_(steps, at::Scalar(1));
        if (maximize) grads = at::_foreach_neg(grads);
        const double rho_inf = 2 / (1 - beta2) - 1;
        std::vector<double> rho_t;
        for (const auto &s : steps) {
            const double step = s.item<double>();
            rho_t.push_back(rho_inf - 2 * step * std::pow(beta2, step) / (1 - std::pow(beta2, step)));
        }
        foreach_weight_decay(params, grads, lr, wd, h[kDecoupled] != 0, maximize);
        foreach_adam_moments(exp_avgs, exp_avg_sqs, grads, beta1, beta2);
        std::vector<double> unrect_step_size, bias_correction2;
        for (size_t k = 0; k < idx.size(); ++k) {
            const double r = rho_t[k];
            const double rect =
                r > 5 ? std::pow((r - 4) * (r - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * r), 0.5) : 0;
            const double unrectified = rect > 0 ? 0 : 1.0;
            const double step = steps[k].item<double>();
            const double bias_correction1 = 1 - std::pow(beta1, step);
            unrect_step_size.push_back((lr * unrectified / bias_correction1) * -1);
            bias_correction2.push_back(std::pow(1 - std::pow(beta2, step), 0.5) * (lr * rect / bias_correction1) * -1);
        }
        // buffer = sqrt(1 - beta2^t) * rect_step_size / (sqrt(v) + eps) + unrect_step_size
        std::vector<at::Tensor> buffer = at::_foreach_sqrt(exp_avg_sqs);
        at::_foreach_add_(buffer, at::Scalar(eps));
        at::_foreach_div_(buffer, scalars(bias_correction2));
        at::_foreach_reciprocal_(buffer);
        at::_foreach_add_(buffer, scalars(unrect_step_size));
        at::_foreach_addcmul_(params, exp_avgs, buffer);
    }
}

// ============================================================================
// LBFGS (torch/optim/lbfgs.py)
// ============================================================================
//
// Python's LBFGS mixes floats, ints and 0-dim tensors in its scalar
// arithmetic (t, the line search's brackets, H_diag): which one a value is
// decides how it is computed (float32 tensor op or double) and how the state
// dict writes it. PyNum and the helpers below do what Python's operators do:
// a tensor operand makes it a tensor op (`float - tensor` is rsub, `float /
// tensor` is reciprocal() * float), two numbers stay numbers (int op int an
// int), comparisons with a tensor compare in the tensor's dtype.

PyNum num_int(double v) {
    PyNum n;
    n.type = PyNum::Int;
    n.v = v;
    return n;
}
PyNum num_float(double v) {
    PyNum n;
    n.type = PyNum::Float;
    n.v = v;
    return n;
}
PyNum num_tensor(at::Tensor t) {
    PyNum n;
    n.type = PyNum::Tensor;
    n.t = std::move(t);
    return n;
}
bool is_tensor(const PyNum &a) { return a.type == PyNum::Tensor; }
// As an op's scalar argument (alpha=t: a tensor passes its item()).
at::Scalar scalar_of(const PyNum &a) {
    if (a.type == PyNum::Tensor) return a.t.item();
    if (a.type == PyNum::Int) return at::Scalar(static_cast<int64_t>(a.v));
    return at::Scalar(a.v);
}
PyNum number(const PyNum &a, const PyNum &b, double v) {
    return a.type == PyNum::Int && b.type == PyNum::Int ? num_int(v) : num_float(v);
}

PyNum operator+(const PyNum &a, const PyNum &b) {
    if (is_tensor(a)) return num_tensor(is_tensor(b) ? at::add(a.t, b.t) : at::add(a.t, scalar_of(b)));
    if (is_tensor(b)) return num_tensor(at::add(b.t, scalar_of(a)));  // b.__radd__(a)
    return number(a, b, a.v + b.v);
}
PyNum operator-(const PyNum &a, const PyNum &b) {
    if (is_tensor(a)) return num_tensor(is_tensor(b) ? at::sub(a.t, b.t) : at::sub(a.t, scalar_of(b)));
    if (is_tensor(b)) return num_tensor(at::rsub(b.t, scalar_of(a)));  // b.__rsub__(a)
    return number(a, b, a.v - b.v);
}
PyNum operator*(const PyNum &a, const PyNum &b) {
    if (is_tensor(a)) return num_tensor(is_tensor(b) ? at::mul(a.t, b.t) : at::mul(a.t, scalar_of(b)));
    if (is_tensor(b)) return num_tensor(at::mul(b.t, scalar_of(a)));  // b.__rmul__(a)
    return number(a, b, a.v * b.v);
}
PyNum operator/(const PyNum &a, const PyNum &b) {
    if (is_tensor(a)) return num_tensor(is_tensor(b) ? at::div(a.t, b.t) : at::div(a.t, scalar_of(b)));
    if (is_tensor(b)) return num_tensor(at::mul(at::reciprocal(b.t), scalar_of(a)));  // b.__rdiv__(a)
    if (b.v == 0) fail(CT_ETORCH, "LBFGS: float division by zero (Python raises ZeroDivisionError here)");
    return num_float(a.v / b.v);
}
PyNum num_abs(const PyNum &a) {
    if (is_tensor(a)) return num_tensor(at::abs(a.t));
    PyNum r = a;
    r.v = std::fabs(a.v);
    return r;
}

enum class Cmp { LT, LE, GT, GE };
// a OP b as Python evaluates it: number OP tensor is the tensor's reflected
// comparison (tensor.__gt__(number) for number < tensor).
bool compare(const PyNum &a, Cmp op, const PyNum &b) {
    auto tensor_cmp = [](const at::Tensor &x, Cmp c, const at::Tensor &y) {
        switch (c) {
        case Cmp::LT: return at::lt(x, y);
        case Cmp::LE: return at::le(x, y);
        case Cmp::GT: return at::gt(x, y);
        default: return at::ge(x, y);
        }
    };
    auto scalar_cmp = [](const at::Tensor &x, Cmp c, const at::Scalar &y) {
        switch (c) {
        case Cmp::LT: return at::lt(x, y);
        case Cmp::LE: return at::le(x, y);
        case Cmp::GT: return at::gt(x, y);
        default: return at::ge(x, y);
        }
    };
    auto reflected = [](Cmp c) {
        switch (c) {
        case Cmp::LT: return Cmp::GT;
        case Cmp::LE: return Cmp::GE;
        case Cmp::GT: return Cmp::LT;
        default: return Cmp::LE;
        }
    };
    if (is_tensor(a) && is_tensor(b)) return tensor_cmp(a.t, op, b.t).item<bool>();
    if (is_tensor(a)) return scalar_cmp(a.t, op, scalar_of(b)).item<bool>();
    if (is_tensor(b)) return scalar_cmp(b.t, reflected(op), scalar_of(a)).item<bool>();
    switch (op) {
    case Cmp::LT: return a.v < b.v;
    case Cmp::LE: return a.v <= b.v;
    case Cmp::GT: return a.v > b.v;
    default: return a.v >= b.v;
    }
}
bool operator<(const PyNum &a, const PyNum &b) { return compare(a, Cmp::LT, b); }
bool operator<=(const PyNum &a, const PyNum &b) { return compare(a, Cmp::LE, b); }
bool operator>(const PyNum &a, const PyNum &b) { return compare(a, Cmp::GT, b); }
bool operator>=(const PyNum &a, const PyNum &b) { return compare(a, Cmp::GE, b); }
// Python's min(a, b) and max(a, b): the second only when strictly smaller/larger.
PyNum py_min(const PyNum &a, const PyNum &b) { return b < a ? b : a; }
PyNum py_max(const PyNum &a, const PyNum &b) { return b > a ? b : a; }

// Short names for the literals and tensors in the expressions below.
PyNum PyF(double v) { return num_float(v); }
PyNum PyI(double v) { return num_int(v); }
PyNum PyT(const at::Tensor &t) { return num_tensor(t); }

// _cubic_interpolate: the minimiser of the cubic through (x1, f1, g1) and
// (x2, f2, g2), kept within bounds (default: between x1 and x2).
PyNum cubic_interpolate(const PyNum &x1, double f1, const PyNum &g1, const PyNum &x2, double f2, const PyNum &g2,
                        const PyNum *xmin, const PyNum *xmax) {
    PyNum xmin_bound, xmax_bound;
    if (xmin) {
        xmin_bound = *xmin;
        xmax_bound = *xmax;
    } else if (x1 <= x2) {
        xmin_bound = x1;
        xmax_bound = x2;
    } else {
        xmin_bound = x2;
        xmax_bound = x1;
    }
    const PyNum d1 = g1 + g2 - PyI(3) * (PyF(f1) - PyF(f2)) / (x1 - x2);
    if (!is_tensor(d1)) fail(CT_ETORCH, "LBFGS: the line search's slopes are not tensors");
    const PyNum d2_square = PyT(at::pow(d1.t, at::Scalar(static_cast<int64_t>(2)))) - g1 * g2;
    if (d2_square >= PyI(0)) {
        const PyNum d2 = PyT(at::sqrt(d2_square.t));
        PyNum min_pos;
        if (x1 <= x2) min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + PyI(2) * d2));
        else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + PyI(2) * d2));
        return py_min(py_max(min_pos, xmin_bound), xmax_bound);
    }
    return (xmin_bound + xmax_bound) / PyF(2.0);
}

// The parameters of LBFGS's one group, as Python's self._params.
struct Lbfgs {
    std::vector<at::Tensor> params;
    ct_closure_fn closure;
    void *user;

    at::Tensor gather_flat_grad() const {
        std::vector<at::Tensor> views;
        for (const at::Tensor &p : params) {
            const at::Tensor &grad = p.grad();
            if (!grad.defined()) views.push_back(at::zeros({p.numel()}, p.options()));
            else if (grad.is_sparse()) views.push_back(grad.to_dense().view(-1));
            else views.push_back(grad.view(-1));
        }
        return at::cat(views, 0);
    }
    void add_grad(const PyNum &step_size, const at::Tensor &update) const {
        const at::Scalar alpha = scalar_of(step_size);
        int64_t offset = 0;
        for (const at::Tensor &p : params) {
            const int64_t numel = p.numel();
            at::Tensor(p).add_(update.slice(0, offset, offset + numel).view_as(p), alpha);
            offset += numel;
        }
    }
    std::vector<at::Tensor> clone_param() const {
        std::vector<at::Tensor> out;
        for (const at::Tensor &p : params) out.push_back(p.clone(at::MemoryFormat::Contiguous));
        return out;
    }
    void set_param(const std::vector<at::Tensor> &data) const {
        for (size_t k = 0; k < params.size(); ++k) at::Tensor(params[k]).copy_(data[k]);
    }
    double evaluate() const { return call_closure(closure, user); }
    // _directional_evaluate: the loss and gradient at x + t * d (x restored after).
    std::pair<double, at::Tensor> directional_evaluate(const std::vector<at::Tensor> &x, const PyNum &t,
                                                       const at::Tensor &d) const {
        add_grad(t, d);
        const double loss = evaluate();
        at::Tensor flat_grad = gather_flat_grad();
        set_param(x);
        return {loss, flat_grad};
    }
};

struct WolfeResult {
    double f;
    at::Tensor g;
    PyNum t;
    int64_t evals;
};

// _strong_wolfe (c1=1e-4, c2=0.9, tolerance_change=1e-9: LBFGS.step passes
// only max_ls).
WolfeResult strong_wolfe(const Lbfgs &L, const std::vector<at::Tensor> &x, PyNum t, const at::Tensor &d, double f,
                         at::Tensor g, const PyNum &gtd, int64_t max_ls) {
    const double c1 = 1e-4, c2 = 0.9, tolerance_change = 1e-9;
    const PyNum d_norm = PyT(d.abs().max());
    g = g.clone(at::MemoryFormat::Contiguous);
    double f_new;
    at::Tensor g_new;
    std::tie(f_new, g_new) = L.directional_evaluate(x, t, d);
    int64_t ls_func_evals = 1;
    PyNum gtd_new = PyT(g_new.dot(d));

    // Bracket an interval containing a point satisfying the Wolfe criteria.
    PyNum t_prev = PyI(0), gtd_prev = gtd;
    double f_prev = f;
    at::Tensor g_prev = g;
    bool done = false;
    int64_t ls_iter = 0;
    size_t nb = 0;  // how many of the bracket's two slots are in use
    PyNum bracket[2], bracket_gtd[2];
    double bracket_f[2] = {0, 0};
    at::Tensor bracket_g[2];
    auto set_bracket2 = [&]() {
        nb = 2;
        bracket[0] = t_prev;
        bracket[1] = t;
        bracket_f[0] = f_prev;
        bracket_f[1] = f_new;
        bracket_g[0] = g_prev;
        bracket_g[1] = g_new.clone(at::MemoryFormat::Contiguous);
        bracket_gtd[0] = gtd_prev;
        bracket_gtd[1] = gtd_new;
    };
    while (ls_iter < max_ls) {
        if (PyF(f_new) > PyF(f) + PyF(c1) * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
            set_bracket2();
            break;
        }
        if (num_abs(gtd_new) <= PyF(-c2) * gtd) {
            nb = 1;
            bracket[0] = t;
            bracket_f[0] = f_new;
            bracket_g[0] = g_new;
            done = true;
            break;
        }
        if (gtd_new >= PyI(0)) {
            set_bracket2();
            break;
        }
        // Interpolate.
        const PyNum min_step = t + PyF(0.01) * (t - t_prev);
        const PyNum max_step = t * PyI(10);
        const PyNum tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, &min_step, &max_step);
        // Next step.
        t_prev = tmp;
        f_prev = f_new;
        g_prev = g_new.clone(at::MemoryFormat::Contiguous);
        gtd_prev = gtd_new;
        std::tie(f_new, g_new) = L.directional_evaluate(x, t, d);
        ls_func_evals += 1;
        gtd_new = PyT(g_new.dot(d));
        ls_iter += 1;
    }
    // Reached the maximum number of iterations?
    if (ls_iter == max_ls) {
        nb = 2;
        bracket[0] = PyI(0);
        bracket[1] = t;
        bracket_f[0] = f;
        bracket_f[1] = f_new;
        bracket_g[0] = g;
        bracket_g[1] = g_new;
    }
    if (nb == 0) fail(CT_ETORCH, "LBFGS: the line search found no bracket (max_eval too small?)");

    // Zoom phase: refine the bracket until a point satisfies the criteria.
    bool insuf_progress = false;
    size_t low_pos = 0, high_pos = 1;
    if (!(bracket_f[0] <= bracket_f[nb - 1])) low_pos = 1, high_pos = 0;
    while (!done && ls_iter < max_ls) {
        // The bracket is too small.
        if (num_abs(bracket[1] - bracket[0]) * d_norm < PyF(tolerance_change)) break;
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1],
                              nullptr, nullptr);
        // Too close to a boundary (or twice in a row): move 0.1 * len(bracket)
        // away from the nearest one.
        const PyNum hi = py_max(bracket[0], bracket[1]), lo = py_min(bracket[0], bracket[1]);
        const PyNum eps = PyF(0.1) * (hi - lo);
        if (py_min(hi - t, t - lo) < eps) {
            if (insuf_progress || t >= hi || t <= lo) {
                if (num_abs(t - hi) < num_abs(t - lo)) t = hi - eps;
                else t = lo + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        // Evaluate the new point.
        std::tie(f_new, g_new) = L.directional_evaluate(x, t, d);
        ls_func_evals += 1;
        gtd_new = PyT(g_new.dot(d));
        ls_iter += 1;
        if (PyF(f_new) > PyF(f) + PyF(c1) * t * gtd || f_new >= bracket_f[low_pos]) {
            // Armijo condition not satisfied or not lower than the lowest point.
            bracket[high_pos] = t;
            bracket_f[high_pos] = f_new;
            bracket_g[high_pos] = g_new.clone(at::MemoryFormat::Contiguous);
            bracket_gtd[high_pos] = gtd_new;
            if (bracket_f[0] <= bracket_f[1]) low_pos = 0, high_pos = 1;
            else low_pos = 1, high_pos = 0;
        } else {
            if (num_abs(gtd_new) <= PyF(-c2) * gtd) {
                done = true;  // the Wolfe conditions hold
            } else if (gtd_new * (bracket[high_pos] - bracket[low_pos]) >= PyI(0)) {
                // The old high becomes the new low.
                bracket[high_pos] = bracket[low_pos];
                bracket_f[high_pos] = bracket_f[low_pos];
                bracket_g[high_pos] = bracket_g[low_pos];
                bracket_gtd[high_pos] = bracket_gtd[low_pos];
            }
            // The new point becomes the new low.
            bracket[low_pos] = t;
            bracket_f[low_pos] = f_new;
            bracket_g[low_pos] = g_new.clone(at::MemoryFormat::Contiguous);
            bracket_gtd[low_pos] = gtd_new;
        }
    }
    if (low_pos >= nb) fail(CT_ENAN, "LBFGS: the line search's loss is NaN");  // Python: IndexError
    return {bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals};
}

}  // namespace

double lbfgs_step(ct_optim *o, ct_closure_fn closure, void *user) {
    if (o->groups.size() != 1 || o->groups[0].params.empty())
        fail(CT_EINVAL, "LBFGS has no parameters to step (add its one parameter group first)");
    const Group &group = o->groups[0];
    Lbfgs L{{}, closure, user};
    for (size_t i : group.params) L.params.push_back(o->params[i]);
    const double *h = group.h.v;
    const PyNum lr = group.h.as_int[kLr] ? PyI(h[kLr]) : PyF(h[kLr]);
    const int64_t max_iter = static_cast<int64_t>(h[kMaxIter]), max_eval = static_cast<int64_t>(h[kMaxEval]),
                  history_size = static_cast<int64_t>(h[kHistory]);
    const double tolerance_grad = h[kTolGrad], tolerance_change = h[kTolChange];
    const bool line_search = h[kLineSearch] == 1;

    // LBFGS has only global state, registered under the first parameter.
    LbfgsState &state = o->lbfgs;
    touch_state(o, group.params[0]);
    state.add_key("func_evals");
    state.add_key("n_iter");

    // Evaluate the initial f(x) and df/dx.
    const double orig_loss = L.evaluate();
    double loss = orig_loss;
    int64_t current_evals = 1;
    state.func_evals += 1;
    at::Tensor flat_grad = L.gather_flat_grad();
    bool opt_cond = PyT(flat_grad.abs().max()) <= PyF(tolerance_grad);
    if (opt_cond) return orig_loss;  // optimal already

    // What the state holds from earlier steps (Python: state.get(...)).
    at::Tensor d = state.d, prev_flat_grad = state.prev_flat_grad;
    PyNum t = state.t, H_diag = state.H_diag;
    std::vector<at::Tensor> old_dirs = state.old_dirs, old_stps = state.old_stps, ro = state.ro;
    double prev_loss = state.prev_loss;

    int64_t n_iter = 0;
    while (n_iter < max_iter) {
        n_iter += 1;
        state.n_iter += 1;

        // The descent direction.
        if (state.n_iter == 1) {
            d = flat_grad.neg();
            old_dirs.clear();
            old_stps.clear();
            ro.clear();
            H_diag = PyI(1);
        } else {
            // Update the memory.
            at::Tensor y = flat_grad.sub(prev_flat_grad);
            at::Tensor s = is_tensor(t) ? d.mul(t.t) : d.mul(scalar_of(t));
            at::Tensor ys = y.dot(s);
            if (at::gt(ys, 1e-10).item<bool>()) {
                if (static_cast<int64_t>(old_dirs.size()) == history_size) {  // shift the history by one
                    old_dirs.erase(old_dirs.begin());
                    old_stps.erase(old_stps.begin());
                    ro.erase(ro.begin());
                }
                old_dirs.push_back(y);
                old_stps.push_back(s);
                ro.push_back(at::mul(at::reciprocal(ys), 1.0));  // 1.0 / ys
                H_diag = PyT(ys / y.dot(y));                        // the initial Hessian's scale
            }
            // The approximate inverse Hessian times the gradient.
            const size_t num_old = old_dirs.size();
            if (!state.has("al")) {
                state.al.assign(static_cast<size_t>(history_size), at::Tensor());
                state.add_key("al");
            }
            // history_size raised after al was made: Python fails (IndexError).
            if (state.al.size() < num_old) state.al.resize(num_old);
            std::vector<at::Tensor> &al = state.al;
            at::Tensor q = flat_grad.neg();
            for (size_t k = num_old; k-- > 0;) {
                al[k] = at::mul(old_stps[k].dot(q), ro[k]);
                q.add_(old_dirs[k], at::neg(al[k]).item());
            }
            // Multiply by the initial Hessian; r/d is the final direction.
            at::Tensor r = is_tensor(H_diag) ? at::mul(q, H_diag.t) : at::mul(q, scalar_of(H_diag));
            d = r;
            for (size_t k = 0; k < num_old; ++k) {
                at::Tensor be_i = at::mul(old_dirs[k].dot(r), ro[k]);
                r.add_(old_stps[k], at::sub(al[k], be_i).item());
            }
        }
        if (!prev_flat_grad.defined()) prev_flat_grad = flat_grad.clone(at::MemoryFormat::Contiguous);
        else prev_flat_grad.copy_(flat_grad);
        prev_loss = loss;

        // The step length: reset the initial guess.
        if (state.n_iter == 1) t = py_min(PyF(1.0), PyF(1.0) / PyT(flat_grad.abs().sum())) * lr;
        else t = lr;

        // The directional derivative is below tolerance.
        const PyNum gtd = PyT(flat_grad.dot(d));
        if (gtd > PyF(-tolerance_change)) break;

        int64_t ls_func_evals = 0;
        if (line_search) {
            const std::vector<at::Tensor> x_init = L.clone_param();
            WolfeResult w = strong_wolfe(L, x_init, t, d, loss, flat_grad, gtd, max_eval - current_evals);
            loss = w.f;
            flat_grad = w.g;
            t = w.t;
            ls_func_evals = w.evals;
            L.add_grad(t, d);
            opt_cond = PyT(flat_grad.abs().max()) <= PyF(tolerance_grad);
        } else {
            // No line search: a fixed step, re-evaluated unless it is the last.
            L.add_grad(t, d);
            if (n_iter != max_iter) {
                loss = L.evaluate();
                flat_grad = L.gather_flat_grad();
                opt_cond = PyT(flat_grad.abs().max()) <= PyF(tolerance_grad);
                ls_func_evals = 1;
            }
        }
        current_evals += ls_func_evals;
        state.func_evals += ls_func_evals;

        // Stop?
        if (n_iter == max_iter) break;
        if (current_evals >= max_eval) break;
        if (opt_cond) break;
        // Lack of progress.
        const at::Tensor moved = is_tensor(t) ? d.mul(t.t) : d.mul(scalar_of(t));
        if (PyT(moved.abs().max()) <= PyF(tolerance_change)) break;
        if (std::fabs(loss - prev_loss) < tolerance_change) break;
    }

    state.d = d;
    state.t = t;
    state.old_dirs = old_dirs;
    state.old_stps = old_stps;
    state.ro = ro;
    state.H_diag = H_diag;
    state.prev_flat_grad = prev_flat_grad;
    state.prev_loss = prev_loss;
    for (const char *key : {"d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss"})
        state.add_key(key);
    return orig_loss;
}

double call_closure(ct_closure_fn closure, void *user) {
    c10::AutoGradMode enable(true);  // the closure's backward needs a graph
    ct_scope *scope = ct_scope_begin();
    ct_tensor *loss = closure(user);
    double value = 0;
    try {
        if (!loss) {
            const int code = ct_last_code();
            if (code == CT_OK) fail(CT_ETRIAL, "the closure returned NULL");
            fail(code, std::string("the closure failed: ") + ct_last_error());
        }
        if (!ct::check(loss, "closure", "its loss")) fail(ct_last_code(), ct_last_error());
        if (loss->t.numel() != 1)
            fail(CT_ESHAPE, "the closure's loss must be one value, got " + ct::describe(loss->t));
        value = loss->t.item<double>();
    } catch (...) {
        ct_scope_end(scope);
        throw;
    }
    ct_scope_end(scope);
    return value;
}

namespace {

// Adadelta, Adamax, NAdam and RAdam: single-tensor or foreach, as Python picks.
void lazy_step(ct_optim *o, const Group &g, const std::vector<size_t> &idx, Path path) {
    lazy_init(o, idx);
    const bool foreach = path == Path::Foreach;
    switch (o->kind) {
    case Kind::Adadelta: foreach ? adadelta_foreach(o, g, idx) : adadelta_single(o, g, idx); break;
    case Kind::Adamax: foreach ? adamax_foreach(o, g, idx) : adamax_single(o, g, idx); break;
    case Kind::NAdam: foreach ? nadam_foreach(o, g, idx) : nadam_single(o, g, idx); break;
    default: foreach ? radam_foreach(o, g, idx) : radam_single(o, g, idx); break;
    }
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
    case Kind::Adadelta:
    case Kind::Adamax:
    case Kind::NAdam:
    case Kind::RAdam: lazy_step(o, g, idx, path); break;
    case Kind::LBFGS: fail(CT_EINVAL, "LBFGS steps with a closure");
    }
}


}  // namespace optim
}  // namespace ct
