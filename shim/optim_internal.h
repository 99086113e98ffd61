// shim/optim_internal.h — what the optimizer's two halves share: the
// per-group hyperparameters, the per-parameter state and struct ct_optim.
// optim.cpp holds the C API, the key tables and state dicts; optim_step.cpp
// the update rules. Internal to ctrial.
#ifndef CTRIAL_SHIM_OPTIM_INTERNAL_H
#define CTRIAL_SHIM_OPTIM_INTERNAL_H

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ctrial/optim.h"
#include "internal.h"

namespace ct {
namespace optim {

enum class Kind { SGD, Adam, AdamW, RMSprop, Adagrad };

enum Key {
    kLr, kMomentum, kDampening, kWeightDecay, kNesterov, kMaximize, kBeta1, kBeta2, kEps,
    kAmsgrad, kAlpha, kCentered, kLrDecay, kInitAcc, kForeach, kFused, kCapturable,
    kDifferentiable, kDecoupled, kNumKeys
};

inline const char *kind_name(Kind k) {
    switch (k) {
    case Kind::SGD: return "SGD";
    case Kind::Adam: return "Adam";
    case Kind::AdamW: return "AdamW";
    case Kind::RMSprop: return "RMSprop";
    case Kind::Adagrad: return "Adagrad";
    }
    return "?";
}

// Optional booleans (foreach, fused) are stored as -1 (None), 0 or 1.
constexpr double kNone = -1;

struct ValueFree {
    void operator()(ct_value *v) const { ct_value_free(v); }
};
using ValuePtr = std::unique_ptr<ct_value, ValueFree>;

struct Hyper {
    double v[kNumKeys] = {};
    // Written as a Python int (Python's defaults are the int 0 for these, and
    // a loaded int stays an int).
    bool as_int[kNumKeys] = {};
};

struct Group {
    std::vector<size_t> params;  // indices into ct_optim::params
    Hyper h;
    // Keys ctrial does not interpret but keeps, in order, for Python:
    // "initial_lr" (LR schedulers), "param_names", ...
    std::vector<std::pair<std::string, ValuePtr>> extras;
};

// Per-parameter state; an undefined tensor is a key Python's dict lacks.
struct State {
    bool present = false;  // the parameter has an entry in Python's self.state
    at::Tensor step, exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer, square_avg,
        grad_avg, sum;
};

[[noreturn]] inline void fail(int code, const std::string &msg) { throw Failure{code, msg}; }

// One optimizer step for a group (optim_step.cpp). Runs under no-grad.
void step_group(ct_optim *o, const Group &g);
// Adagrad's state for parameter i, made when it joins (Python: __init__).
void adagrad_init_param(ct_optim *o, const Group &g, size_t i);

}  // namespace optim
}  // namespace ct

struct ct_optim {
    ct::optim::Kind kind;
    ct::optim::Hyper defaults;            // for groups added later
    std::vector<at::Tensor> params;       // every parameter, in state_dict index order
    std::vector<ct_tensor *> handles;     // unscoped handle per parameter (ct_optim_param)
    std::vector<ct::optim::Group> groups;
    std::vector<ct::optim::State> state;  // per parameter
    std::vector<size_t> state_order;      // parameters in the order their state appeared
    // Python's optimizer.grad_scale / optimizer.found_inf: set by
    // ct_grad_scaler_step (amp.cpp) around one step of an optimizer whose
    // groups are all fused, undefined otherwise. The fused SGD/Adam/AdamW
    // kernels divide the gradients by grad_scale (when defined) and leave
    // everything alone when found_inf is 1.
    at::Tensor amp_grad_scale, amp_found_inf;

    ~ct_optim() {
        for (ct_tensor *h : handles) ct_tensor_free(h);
    }
};

#endif  // CTRIAL_SHIM_OPTIM_INTERNAL_H
