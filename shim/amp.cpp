// shim/amp.cpp — autocast regions and torch.amp.GradScaler (see amp.h).
//
// Autocast is libtorch's own per-thread state; a region only saves and
// restores it, as torch.autocast.__enter__/__exit__ do. The scaler follows
// torch/amp/grad_scaler.py (torch 2.11) statement by statement: lazily made
// scale and growth-tracker tensors, per-optimizer READY/UNSCALED/STEPPED
// stages, gradients unscaled per device and dtype with
// _amp_foreach_non_finite_check_and_unscale_, and _amp_update_scale_ fed
// with the inf flags of every optimizer seen since the last update.
// Comments name the Python they mirror and where ctrial differs.
#include "optim_internal.h"

#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ctrial/amp.h"
#include "ctrial/value.h"

using ct::Failure;

namespace {

[[noreturn]] void fail(int code, const std::string &msg) { throw Failure{code, msg}; }

// ============================================================================
// autocast
// ============================================================================

// One open region: what __enter__ saved for its device type.
struct Frame {
    c10::DeviceType device;
    bool prev_enabled;
    at::ScalarType prev_dtype;
};
thread_local std::vector<Frame> tl_frames;

bool autocast_device(ct_device_type t, c10::DeviceType *out) {
    switch (t) {
    case CT_CPU: *out = c10::DeviceType::CPU; return true;
    case CT_CUDA: *out = c10::DeviceType::CUDA; return true;
    default: return false;
    }
}

// torch.cuda.is_bf16_supported() with its default including_emulation=True:
// true when a bfloat16 tensor can be made on the current GPU (which every
// compute capability >= 8 can, Python's first test). Cached per device, as
// Python's lru_cache does.
bool cuda_bf16_supported() {
    constexpr int kMaxDevices = 64;
    static std::atomic<int> cache[kMaxDevices];  // 0 unknown, 1 yes, 2 no
    int dev = at::detail::getCUDAHooks().current_device();
    if (dev < 0) return false;
    if (dev < kMaxDevices) {
        int c = cache[dev].load(std::memory_order_relaxed);
        if (c) return c == 1;
    }
    bool ok = true;
    try {
        (void)at::ones({1}, at::TensorOptions()
                                .dtype(at::kBFloat16)
                                .device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(dev))));
    } catch (...) {
        ok = false;
    }
    if (dev < kMaxDevices) cache[dev].store(ok ? 1 : 2, std::memory_order_relaxed);
    return ok;
}

}  // namespace

extern "C" int ct_autocast_enter(ct_device_type device_type, ct_dtype dtype) {
    return ct::status(__func__, [&] {
        c10::DeviceType dev;
        if (!autocast_device(device_type, &dev))
            fail(CT_EINVAL, "unsupported autocast device type " + std::to_string(static_cast<int>(device_type)) +
                                " (expected CT_CPU or CT_CUDA)");
        const std::string name = dev == c10::DeviceType::CPU ? "CPU" : "CUDA";
        if (dtype != CT_BF16 && dtype != CT_F16)
            fail(CT_EDTYPE, name + " autocast only supports bfloat16 and float16, got " + ct_dtype_name(dtype));
        const at::ScalarType st = dtype == CT_BF16 ? at::kBFloat16 : at::kHalf;
        if (dev == c10::DeviceType::CUDA) {
            if (!at::hasCUDA())
                fail(CT_EDEVICE, at::detail::getCUDAHooks().isBuilt()
                                     ? "CUDA autocast requested but no GPU is present"
                                     : "CUDA autocast requested but libtorch was built without CUDA");
            if (st == at::kBFloat16 && !cuda_bf16_supported())
                fail(CT_EDEVICE, "Current CUDA Device does not support bfloat16. Please switch dtype to float16.");
        }
        tl_frames.reserve(tl_frames.size() + 1);  // the push below cannot throw after the state changed
        Frame f{dev, at::autocast::is_autocast_enabled(dev), at::autocast::get_autocast_dtype(dev)};
        at::autocast::set_autocast_enabled(dev, true);
        at::autocast::set_autocast_dtype(dev, st);
        at::autocast::increment_nesting();
        tl_frames.push_back(f);
    });
}

extern "C" int ct_autocast_exit(void) {
    if (tl_frames.empty())
        return ct::fail(CT_ESTATE, __func__,
                        "no autocast region is open on this thread (ct_autocast_exit without ct_autocast_enter)");
    return ct::status(__func__, [&] {
        Frame f = tl_frames.back();
        tl_frames.pop_back();
        // Drop the cache of casted weights when leaving the outermost region.
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_autocast_enabled(f.device, f.prev_enabled);
        at::autocast::set_autocast_dtype(f.device, f.prev_dtype);
    });
}

extern "C" bool ct_autocast_is_enabled(ct_device_type device_type) {
    c10::DeviceType dev;
    return autocast_device(device_type, &dev) && at::autocast::is_autocast_enabled(dev);
}

extern "C" ct_dtype ct_autocast_dtype(ct_device_type device_type) {
    c10::DeviceType dev;
    ct_dtype out;
    if (!autocast_device(device_type, &dev) || !ct::from_scalar_type(at::autocast::get_autocast_dtype(dev), &out))
        return CT_DTYPE_MAX_ENUM_;
    return out;
}

// ============================================================================
// GradScaler
// ============================================================================

namespace {

enum class Stage { Ready, Unscaled, Stepped };  // OptState

using PerDevice = std::vector<std::pair<at::Device, at::Tensor>>;  // a dict keyed by device

// One entry of Python's _per_optimizer_states (keyed there by id(optimizer),
// here by address; made on first lookup, like the defaultdict).
struct OptState {
    ct_optim *opt;
    Stage stage = Stage::Ready;
    PerDevice found_inf_per_device;
};

// _MultiDeviceReplicator: a copy of master per device, made on first request.
struct Replicator {
    at::Tensor master;
    PerDevice copies;
    at::Tensor get(const at::Device &d) {
        for (auto &c : copies)
            if (c.first == d) return c.second;
        copies.emplace_back(d, master.to(d, master.scalar_type(), /*non_blocking=*/true, /*copy=*/true));
        return copies.back().second;
    }
};

}  // namespace

struct ct_grad_scaler {
    bool enabled;
    double init_scale;
    double growth_factor;
    double backoff_factor;
    int64_t growth_interval;
    int64_t init_growth_tracker = 0;
    // float32 and int32 0-dim tensors, undefined until the first scale()
    // (lazy, as in PyTorch: they live on the first loss's device).
    at::Tensor scale;
    at::Tensor growth_tracker;
    // Optimizers seen since the last update, in first-use order. Only the
    // address is kept and never dereferenced by update(): an optimizer must
    // not be freed and another made at its address within one iteration.
    std::vector<OptState> per_opt;
};

namespace {

const char *kFix = " This may indicate your script did not use ct_grad_scaler_scale(loss) earlier in the iteration.";

// _check_scale_growth_tracker.
void check_scale(const ct_grad_scaler *s, const char *what) {
    if (!s->scale.defined() || !s->growth_tracker.defined())
        fail(CT_ESTATE, std::string("Attempted ") + what + " but the scale was never used (PyTorch: _scale is None)." +
                            kFix);
}

OptState &state_of(ct_grad_scaler *s, ct_optim *opt) {
    for (OptState &st : s->per_opt)
        if (st.opt == opt) return st;
    s->per_opt.push_back(OptState{opt, Stage::Ready, {}});
    return s->per_opt.back();
}

at::Tensor scalar_f32(double v, const at::Device &d) {
    return at::full({}, v, at::TensorOptions().dtype(at::kFloat).device(d));
}

// GradScaler._unscale_grads_: every gradient of the optimizer's groups,
// split by device and dtype (first-seen order, like Python's nested
// defaultdicts), one foreach kernel per split. Returns found_inf per device
// (only devices that had a gradient).
PerDevice unscale_grads(ct_optim *o, const at::Tensor &inv_scale, const at::Tensor &found_inf, bool allow_fp16) {
    Replicator per_device_inv_scale{inv_scale, {}};
    Replicator per_device_found_inf{found_inf, {}};
    struct ByDtype {
        at::ScalarType dtype;
        std::vector<at::Tensor> grads;
    };
    struct ByDevice {
        at::Device device;
        std::vector<ByDtype> dtypes;
    };
    std::vector<ByDevice> split;
    c10::NoGradGuard no_grad;
    for (const ct::optim::Group &g : o->groups) {
        for (size_t i : g.params) {
            at::Tensor &param = o->params[i];
            at::Tensor grad = param.grad();
            if (!grad.defined()) continue;
            if (!allow_fp16 && grad.scalar_type() == at::kHalf)
                fail(CT_EDTYPE, "Attempting to unscale FP16 gradients (parameter " + std::to_string(i) +
                                    ": " + ct::describe(grad) + ").");
            at::Tensor to_unscale;
            if (grad.is_sparse()) {
                // Duplicate indices of a scaled fp16 gradient may overflow when
                // summed: check the coalesced values (Python replaces .grad).
                if (grad.scalar_type() == at::kHalf) {
                    grad = grad.coalesce();
                    param.mutable_grad() = grad;
                }
                to_unscale = grad._values();
            } else {
                to_unscale = grad;
            }
            const at::Device dev = to_unscale.device();
            auto d = split.begin();
            while (d != split.end() && d->device != dev) ++d;
            if (d == split.end()) d = split.insert(split.end(), ByDevice{dev, {}});
            auto t = d->dtypes.begin();
            while (t != d->dtypes.end() && t->dtype != to_unscale.scalar_type()) ++t;
            if (t == d->dtypes.end()) t = d->dtypes.insert(d->dtypes.end(), ByDtype{to_unscale.scalar_type(), {}});
            t->grads.push_back(to_unscale);
        }
    }
    for (ByDevice &d : split) {
        for (ByDtype &t : d.dtypes) {
            at::Tensor dev_found_inf = per_device_found_inf.get(d.device);
            at::_amp_foreach_non_finite_check_and_unscale_(t.grads, dev_found_inf,
                                                           per_device_inv_scale.get(d.device));
        }
    }
    return per_device_found_inf.copies;
}

// Gradients split across processes (ct_set_grad_reduce): this process's
// flags, summed on the scale's device, replaced by the largest over every
// process (on the host: a process without gradients has no device flag),
// one entry on the scale's device. Else unchanged.
void across_processes(PerDevice &found, const at::Device &scale_device) {
    if (!ct::tl_grad_reduce.fn) return;
    at::Tensor f = at::zeros({}, at::kFloat);
    for (auto &kv : found) f = f + kv.second.to(at::kCPU, at::kFloat);
    ct::grad_reduce(f, /*max=*/true);
    found.clear();
    found.emplace_back(scale_device, f.to(scale_device));
}

// unscale_ after its stage checks.
void unscale_into(ct_grad_scaler *s, ct_optim *opt, OptState &st) {
    // FP32 division can be imprecise for certain compile options, so the
    // reciprocal is taken in FP64 (Python's comment).
    at::Tensor inv_scale = s->scale.to(at::kDouble).reciprocal().to(at::kFloat);
    at::Tensor found_inf = scalar_f32(0.0, s->scale.device());
    st.found_inf_per_device = unscale_grads(opt, inv_scale, found_inf, /*allow_fp16=*/false);
    across_processes(st.found_inf_per_device, s->scale.device());
    st.stage = Stage::Unscaled;
}

// Python's optimizer._step_supports_amp_scaling: set by SGD, Adam and AdamW
// when constructed with fused=True. ctrial sets fused per group, so the
// counterpart is "every group is fused". A mix (Python fails on it: its
// non-fused functions refuse grad_scale) takes the unscaling road, where the
// fused groups' kernels get plain unscaled gradients.
bool supports_amp_scaling(const ct_optim *o) {
    using ct::optim::Kind;
    if (o->kind != Kind::SGD && o->kind != Kind::Adam && o->kind != Kind::AdamW) return false;
    if (o->groups.empty()) return false;
    for (const ct::optim::Group &g : o->groups)
        if (g.h.v[ct::optim::kFused] != 1) return false;
    return true;
}

// optimizer.step() under no-grad (what ct_optim_step does), with the
// errors of this call.
void optimizer_step(ct_optim *opt) {
    c10::NoGradGuard no_grad;
    for (const ct::optim::Group &g : opt->groups) ct::optim::step_group(opt, g);
}

// Sets optimizer.grad_scale / optimizer.found_inf for one step and deletes
// them afterwards, also when the step throws.
struct AmpAttrs {
    ct_optim *opt;
    AmpAttrs(ct_optim *o, at::Tensor grad_scale, at::Tensor found_inf) : opt(o) {
        opt->amp_grad_scale = std::move(grad_scale);
        opt->amp_found_inf = std::move(found_inf);
    }
    ~AmpAttrs() {
        opt->amp_grad_scale.reset();
        opt->amp_found_inf.reset();
    }
    AmpAttrs(const AmpAttrs &) = delete;
    AmpAttrs &operator=(const AmpAttrs &) = delete;
};

bool get_number(const ct_value *v, double *out) {
    ct_value_kind k = ct_value_kind_of(v);
    return (k == CT_VALUE_FLOAT || k == CT_VALUE_INT) && ct_value_get_float(v, out) == 0;
}

const ct_value *require(const ct_value *sd, const char *key) {
    const ct_value *v = ct_value_dict_get(sd, key);
    if (!v) fail(CT_EFORMAT, std::string("state dict has no key '") + key + "'");
    return v;
}

[[noreturn]] void mistyped(const char *key, const char *want, const ct_value *v) {
    fail(CT_EFORMAT, std::string("state dict key '") + key + "' must be " + want + ", got " +
                         ct_value_kind_name(ct_value_kind_of(v)));
}

std::string num(double x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

ct_value *checked(ct_value *v) {
    if (!v) fail(CT_ENOMEM, "out of host memory");
    return v;
}

}  // namespace

extern "C" ct_grad_scaler_opts ct_grad_scaler_defaults(void) {
    ct_grad_scaler_opts o;
    o.init_scale = 65536.0;
    o.growth_factor = 2.0;
    o.backoff_factor = 0.5;
    o.growth_interval = 2000;
    o.enabled = true;
    return o;
}

extern "C" ct_grad_scaler *ct_grad_scaler_new(ct_device device, const ct_grad_scaler_opts *opts) {
    try {
        const ct_grad_scaler_opts o = opts ? *opts : ct_grad_scaler_defaults();
        if (device.type != CT_CPU && device.type != CT_CUDA)
            fail(CT_EINVAL, "unsupported device type " + std::to_string(static_cast<int>(device.type)) +
                                " (expected CT_CPU or CT_CUDA)");
        auto s = std::make_unique<ct_grad_scaler>();
        s->enabled = o.enabled;
        s->init_scale = o.init_scale;
        s->growth_factor = o.growth_factor;
        s->backoff_factor = o.backoff_factor;
        s->growth_interval = o.growth_interval;
        if (s->enabled) {
            (void)ct::to_device(device);  // CUDA present, index valid
            // PyTorch's assertions; NaN fails them here (it passes Python's).
            if (!(o.growth_factor > 1.0)) fail(CT_EINVAL, "The growth factor must be > 1.0 (got " + num(o.growth_factor) + ").");
            if (!(o.backoff_factor < 1.0)) fail(CT_EINVAL, "The backoff factor must be < 1.0 (got " + num(o.backoff_factor) + ").");
        }
        return s.release();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void ct_grad_scaler_free(ct_grad_scaler *s) { delete s; }

extern "C" ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, const ct_tensor *loss) {
    CT_IN(loss);
    if (!s) {
        ct::fail(CT_EINVAL, __func__, "scaler is NULL");
        return nullptr;
    }
    return ct::op(__func__, [&]() -> at::Tensor {
        if (!s->enabled) return loss->t;
        const at::Tensor &out = loss->t;
        if (!s->scale.defined()) {  // _lazy_init_scale_growth_tracker(outputs.device)
            s->scale = at::full({}, s->init_scale, at::TensorOptions().dtype(at::kFloat).device(out.device()));
            s->growth_tracker = at::full({}, s->init_growth_tracker,
                                         at::TensorOptions().dtype(at::kInt).device(out.device()));
        }
        return out * s->scale.to(out.device(), s->scale.scalar_type(), /*non_blocking=*/true);
    });
}

extern "C" int ct_grad_scaler_unscale(ct_grad_scaler *s, ct_optim *opt) {
    if (!s) return ct::fail(CT_EINVAL, __func__, "scaler is NULL");
    if (!opt) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (!s->enabled) return CT_OK;
    return ct::status(__func__, [&] {
        check_scale(s, "unscale_");
        OptState &st = state_of(s, opt);
        if (st.stage == Stage::Unscaled)
            fail(CT_ESTATE, "unscale_() has already been called on this optimizer since the last update().");
        if (st.stage == Stage::Stepped) fail(CT_ESTATE, "unscale_() is being called after step().");
        unscale_into(s, opt, st);
    });
}

extern "C" int ct_grad_scaler_step(ct_grad_scaler *s, ct_optim *opt, bool *stepped) {
    if (stepped) *stepped = false;
    if (!s) return ct::fail(CT_EINVAL, __func__, "scaler is NULL");
    if (!opt) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (!s->enabled) {
        int rc = ct_optim_step(opt);
        if (rc == CT_OK && stepped) *stepped = true;
        return rc;
    }
    return ct::status(__func__, [&] {
        check_scale(s, "step");
        OptState &st = state_of(s, opt);
        if (st.stage == Stage::Stepped) fail(CT_ESTATE, "step() has already been called since the last update().");

        if (supports_amp_scaling(opt)) {
            // The fused kernels unscale and skip by themselves: only look for
            // infs here (_check_inf_per_device: inv_scale 1, fp16 allowed).
            if (st.stage == Stage::Ready) {
                st.found_inf_per_device = unscale_grads(opt, scalar_f32(1.0, s->scale.device()),
                                                        scalar_f32(0.0, s->scale.device()), /*allow_fp16=*/true);
                across_processes(st.found_inf_per_device, s->scale.device());
            }
            // sum(found_inf.to(scale.device) for each device): a new tensor.
            at::Tensor found_inf;
            for (auto &kv : st.found_inf_per_device) {
                at::Tensor t = kv.second.to(s->scale.device(), kv.second.scalar_type(), /*non_blocking=*/true);
                found_inf = found_inf.defined() ? found_inf + t : t + 0;
            }
            if (!found_inf.defined()) found_inf = scalar_f32(0.0, s->scale.device());  // no gradient: nothing steps
            // optimizer.grad_scale = scale * 1 when the gradients are still
            // scaled, None when unscale_ ran already.
            at::Tensor grad_scale;
            if (st.stage == Stage::Ready) grad_scale = s->scale * 1;
            {
                AmpAttrs attrs(opt, grad_scale, found_inf);
                optimizer_step(opt);
            }
            st.stage = Stage::Stepped;
            // The kernels skip when found_inf == 1 exactly (a sum over
            // devices of 2 would step, in PyTorch as here).
            if (stepped) *stepped = found_inf.item<float>() != 1.0f;
            return;
        }

        if (st.stage == Stage::Ready) unscale_into(s, opt, st);
        if (st.found_inf_per_device.empty()) fail(CT_ESTATE, "No inf checks were recorded for this optimizer.");
        // _maybe_opt_step: a host sync per device.
        double found = 0;
        for (auto &kv : st.found_inf_per_device) found += kv.second.item<double>();
        if (found == 0) {
            optimizer_step(opt);
            if (stepped) *stepped = true;
        }
        st.stage = Stage::Stepped;
    });
}

extern "C" int ct_grad_scaler_update(ct_grad_scaler *s) {
    if (!s) return ct::fail(CT_EINVAL, __func__, "scaler is NULL");
    if (!s->enabled) return CT_OK;
    return ct::status(__func__, [&] {
        check_scale(s, "update");
        std::vector<at::Tensor> found_infs;
        for (OptState &st : s->per_opt)
            for (auto &kv : st.found_inf_per_device)
                found_infs.push_back(kv.second.to(s->scale.device(), kv.second.scalar_type(), /*non_blocking=*/true));
        if (found_infs.empty()) fail(CT_ESTATE, "No inf checks were recorded prior to update.");
        at::Tensor found_inf_combined = found_infs[0];
        for (size_t i = 1; i < found_infs.size(); ++i) found_inf_combined.add_(found_infs[i]);
        at::_amp_update_scale_(s->scale, s->growth_tracker, found_inf_combined, s->growth_factor,
                               s->backoff_factor, s->growth_interval);
        s->per_opt.clear();
    });
}

extern "C" double ct_grad_scaler_get_scale(const ct_grad_scaler *s) {
    if (!s) {
        ct::fail(CT_EINVAL, __func__, "scaler is NULL");
        return NAN;
    }
    if (!s->enabled) return 1.0;
    if (!s->scale.defined()) return s->init_scale;
    try {
        return static_cast<double>(s->scale.item<float>());
    } catch (...) {
        ct::fail_exception(__func__);
        return NAN;
    }
}

extern "C" bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s) { return s && s->enabled; }

extern "C" ct_value *ct_grad_scaler_state_dict(const ct_grad_scaler *s) {
    if (!s) {
        ct::fail(CT_EINVAL, __func__, "scaler is NULL");
        return nullptr;
    }
    try {
        ct::optim::ValuePtr d(checked(ct_value_dict()));
        if (!s->enabled) return d.release();
        const double scale = s->scale.defined() ? static_cast<double>(s->scale.item<float>()) : s->init_scale;
        const int64_t tracker = s->growth_tracker.defined() ? static_cast<int64_t>(s->growth_tracker.item<int32_t>())
                                                            : s->init_growth_tracker;
        auto set = [&](const char *key, ct_value *v) {
            if (ct_value_dict_set(d.get(), key, checked(v)) != 0) fail(CT_ENOMEM, "out of host memory");
        };
        set("scale", ct_value_float(scale));
        set("growth_factor", ct_value_float(s->growth_factor));
        set("backoff_factor", ct_value_float(s->backoff_factor));
        set("growth_interval", ct_value_int(s->growth_interval));
        set("_growth_tracker", ct_value_int(tracker));
        return d.release();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" int ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_value *state) {
    if (!s) return ct::fail(CT_EINVAL, __func__, "scaler is NULL");
    if (!state) return ct::fail(CT_EINVAL, __func__, "state dict is NULL");
    if (!s->enabled) return CT_OK;
    return ct::status(__func__, [&] {
        if (ct_value_kind_of(state) != CT_VALUE_DICT)
            fail(CT_EFORMAT, std::string("state dict must be a dict, got ") +
                                 ct_value_kind_name(ct_value_kind_of(state)));
        if (ct_value_len(state) == 0)
            fail(CT_EFORMAT, "The source state dict is empty, possibly because it was saved from a disabled "
                             "instance of GradScaler.");
        // Every key is read and checked before anything changes.
        double scale, growth_factor, backoff_factor;
        int64_t growth_interval, tracker;
        const ct_value *v;
        if (!get_number(v = require(state, "scale"), &scale)) mistyped("scale", "a float", v);
        if (!get_number(v = require(state, "growth_factor"), &growth_factor)) mistyped("growth_factor", "a float", v);
        if (!get_number(v = require(state, "backoff_factor"), &backoff_factor))
            mistyped("backoff_factor", "a float", v);
        v = require(state, "growth_interval");
        if (ct_value_kind_of(v) != CT_VALUE_INT || ct_value_get_int(v, &growth_interval) != 0)
            mistyped("growth_interval", "an int", v);
        v = require(state, "_growth_tracker");
        if (ct_value_kind_of(v) != CT_VALUE_INT || ct_value_get_int(v, &tracker) != 0)
            mistyped("_growth_tracker", "an int", v);
        if (tracker < std::numeric_limits<int32_t>::min() || tracker > std::numeric_limits<int32_t>::max())
            fail(CT_EFORMAT, "state dict key '_growth_tracker' (" + std::to_string(tracker) +
                                 ") does not fit the int32 growth tracker");

        s->init_scale = scale;
        if (s->scale.defined()) s->scale.fill_(scale);
        s->growth_factor = growth_factor;
        s->backoff_factor = backoff_factor;
        s->growth_interval = growth_interval;
        s->init_growth_tracker = tracker;
        if (s->growth_tracker.defined()) s->growth_tracker.fill_(tracker);
    });
}
