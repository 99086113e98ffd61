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

enum class Kind { SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS };

enum Key {
    kLr, kMomentum, kDampening, kWeightDecay, kNesterov, kMaximize, kBeta1, kBeta2, kEps,
    kAmsgrad, kAlpha, kCentered, kLrDecay, kInitAcc, kForeach, kFused, kCapturable,
    kDifferentiable, kDecoupled, kRho, kMomentumDecay, kMaxIter, kMaxEval, kTolGrad, kTolChange,
    kHistory, kLineSearch, kNumKeys
};

inline const char *kind_name(Kind k) {
    switch (k) {
    case Kind::SGD: return "SGD";
    case Kind::Adam: return "Adam";
    case Kind::AdamW: return "AdamW";
    case Kind::RMSprop: return "RMSprop";
    case Kind::Adagrad: return "Adagrad";
    case Kind::Adadelta: return "Adadelta";
    case Kind::Adamax: return "Adamax";
    case Kind::NAdam: return "NAdam";
    case Kind::RAdam: return "RAdam";
    case Kind::LBFGS: return "LBFGS";
    }
    return "?";
}

// Optional booleans (foreach, fused) are stored as -1 (None), 0 or 1;
// LBFGS's line_search_fn as 0 (None) or 1 ("strong_wolfe").
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
        grad_avg, sum, acc_delta, exp_inf, mu_product;
};

// A number as LBFGS's Python code holds it: an int, a float or a 0-dim
// tensor, depending on the path that made it ("t" is the int 1 with the
// default lr, a tensor after the first iteration's step length or a line
// search). Arithmetic on it follows Python's (optim_step.cpp), so that
// results and state dicts come out as Python's.
struct PyNum {
    enum Type { Int, Float, Tensor } type = Float;
    double v = 0;  // Int and Float
    at::Tensor t;  // Tensor
};

// LBFGS keeps one state for the whole optimizer, which Python files under its
// first parameter (state[0] in a state dict). Keys appear in `keys` in the
// order Python's dict holds them; a key not listed is absent.
struct LbfgsState {
    std::vector<std::string> keys;
    int64_t func_evals = 0, n_iter = 0;
    at::Tensor d, prev_flat_grad;
    PyNum t, H_diag;
    std::vector<at::Tensor> old_dirs, old_stps, ro;
    std::vector<at::Tensor> al;  // an undefined entry is None
    double prev_loss = 0;
    bool has(const char *key) const {
        for (const auto &k : keys)
            if (k == key) return true;
        return false;
    }
    void add_key(const char *key) {
        if (!has(key)) keys.emplace_back(key);
    }
};

[[noreturn]] inline void fail(int code, const std::string &msg) { throw Failure{code, msg}; }

// One optimizer step for a group (optim_step.cpp). Runs under no-grad.
void step_group(ct_optim *o, const Group &g);
// Evaluates the closure once with grad enabled, in a scope of its own (what
// it makes and does not keep is freed), and returns float(loss).
double call_closure(ct_closure_fn closure, void *user);
// LBFGS.step(closure) (optim_step.cpp): runs under no-grad; returns
// float(orig_loss), the closure's first value.
double lbfgs_step(ct_optim *o, ct_closure_fn closure, void *user);
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
    ct::optim::LbfgsState lbfgs;          // LBFGS only (state[0] when state_order has 0)
    // ct_optim_set_stepped: a parameter i < stepped.size() with stepped[i]
    // false is skipped by step() as one without a gradient is (empty: all).
    std::vector<char> stepped;
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
