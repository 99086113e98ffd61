// shim/optim.cpp — torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta,
// Adamax, NAdam, RAdam and LBFGS: the C API, hyperparameters with Python's
// checks, and state dicts with Python's layout (see optim.h). The update rules
// are in optim_step.cpp.
//
// An optimizer keeps at::Tensor references to its parameters (in-place
// updates reach the caller's tensors) plus one unscoped handle per parameter
// for ct_optim_param(). Hyperparameters live in a fixed array per group; the
// per-type tables below say which keys a type has, in Python's order, and how
// each is written in a state dict.
#include "optim_internal.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ctrial/nn.h"
#include "ctrial/optim.h"
#include "ctrial/value.h"

using ct::Failure;
using namespace ct::optim;

namespace {

// ============================================================================
// hyperparameter tables
// ============================================================================

// How a key is written in param_groups: a number (an int where Python's
// default is the int 0), a bool, None/True/False, the (beta1, beta2) tuple,
// an int (LBFGS's counts), or LBFGS's line_search_fn (None/"strong_wolfe").
enum class Py { Num, Bool, OptBool, Betas, Int, LineSearch };

// A key that load_state_dict requires (Python's __setstate__ has no default).
constexpr double kRequired = NAN;

struct KeySpec {
    const char *name;
    Key key;
    Py py;
    double load_default;  // value when a loaded group lacks the key, or kRequired
};

// param_groups keys in Python's order (torch 2.11), per optimizer type.
const KeySpec kSgdKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"momentum", kMomentum, Py::Num, kRequired},
    {"dampening", kDampening, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"nesterov", kNesterov, Py::Bool, 0},
    {"maximize", kMaximize, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"differentiable", kDifferentiable, Py::Bool, 0},
    {"fused", kFused, Py::OptBool, 0},
};
const KeySpec kAdamKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"betas", kBeta1, Py::Betas, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"amsgrad", kAmsgrad, Py::Bool, 0},
    {"maximize", kMaximize, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"capturable", kCapturable, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
    {"fused", kFused, Py::OptBool, kNone},
    {"decoupled_weight_decay", kDecoupled, Py::Bool, 0},
};
const KeySpec kRmspropKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"momentum", kMomentum, Py::Num, 0},
    {"alpha", kAlpha, Py::Num, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"centered", kCentered, Py::Bool, 0},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"capturable", kCapturable, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"maximize", kMaximize, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
};
const KeySpec kAdagradKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"lr_decay", kLrDecay, Py::Num, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"initial_accumulator_value", kInitAcc, Py::Num, kRequired},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"maximize", kMaximize, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
    {"fused", kFused, Py::OptBool, kNone},
};

const KeySpec kAdadeltaKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"rho", kRho, Py::Num, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"maximize", kMaximize, Py::Bool, 0},
    {"capturable", kCapturable, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"differentiable", kDifferentiable, Py::Bool, 0},
};
const KeySpec kAdamaxKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"betas", kBeta1, Py::Betas, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"maximize", kMaximize, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
    {"capturable", kCapturable, Py::Bool, 0},
};
const KeySpec kNadamKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"betas", kBeta1, Py::Betas, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"momentum_decay", kMomentumDecay, Py::Num, kRequired},
    {"decoupled_weight_decay", kDecoupled, Py::Bool, 0},
    {"maximize", kMaximize, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"capturable", kCapturable, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
};
const KeySpec kRadamKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"betas", kBeta1, Py::Betas, kRequired},
    {"eps", kEps, Py::Num, kRequired},
    {"weight_decay", kWeightDecay, Py::Num, kRequired},
    {"maximize", kMaximize, Py::Bool, 0},
    {"foreach", kForeach, Py::OptBool, kNone},
    {"capturable", kCapturable, Py::Bool, 0},
    {"decoupled_weight_decay", kDecoupled, Py::Bool, 0},
    {"differentiable", kDifferentiable, Py::Bool, 0},
};
// LBFGS has no __setstate__: a loaded group must hold every key.
const KeySpec kLbfgsKeys[] = {
    {"lr", kLr, Py::Num, kRequired},
    {"max_iter", kMaxIter, Py::Int, kRequired},
    {"max_eval", kMaxEval, Py::Int, kRequired},
    {"tolerance_grad", kTolGrad, Py::Num, kRequired},
    {"tolerance_change", kTolChange, Py::Num, kRequired},
    {"history_size", kHistory, Py::Int, kRequired},
    {"line_search_fn", kLineSearch, Py::LineSearch, kRequired},
};

struct KeyTable {
    const KeySpec *keys;
    size_t n;
};

template <size_t N>
KeyTable table_of(const KeySpec (&a)[N]) { return {a, N}; }

KeyTable keys_of(Kind k) {
    switch (k) {
    case Kind::SGD: return table_of(kSgdKeys);
    case Kind::Adam:
    case Kind::AdamW: return table_of(kAdamKeys);
    case Kind::RMSprop: return table_of(kRmspropKeys);
    case Kind::Adagrad: return table_of(kAdagradKeys);
    case Kind::Adadelta: return table_of(kAdadeltaKeys);
    case Kind::Adamax: return table_of(kAdamaxKeys);
    case Kind::NAdam: return table_of(kNadamKeys);
    case Kind::RAdam: return table_of(kRadamKeys);
    case Kind::LBFGS: return table_of(kLbfgsKeys);
    }
    return {nullptr, 0};
}

// Whether the type's groups have "betas" (read and set as beta1/beta2).
bool has_betas(Kind k) {
    KeyTable t = keys_of(k);
    for (size_t i = 0; i < t.n; ++i)
        if (t.keys[i].py == Py::Betas) return true;
    return false;
}

bool has_key(Kind k, Key key) {
    if (key == kBeta2) return has_betas(k);
    KeyTable t = keys_of(k);
    for (size_t i = 0; i < t.n; ++i)
        if (t.keys[i].key == key) return true;
    return false;
}

// Python writes float hyperparameters with repr(): 0.001, 1e-08, -1.0.
std::string py_float(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {  // shortest text that reads back as x
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    std::string s(buf);
    size_t e = s.find('e');
    int exp = std::atoi(s.c_str() + e + 1);
    std::string digits, sign = s[0] == '-' ? "-" : "";
    for (size_t i = sign.size(); i < e; ++i)
        if (s[i] != '.') digits += s[i];
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    if (exp < -4 || exp >= 16) {  // repr switches to exponent form here
        std::string m = digits.substr(0, 1);
        if (digits.size() > 1) m += "." + digits.substr(1);
        snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        return sign + m + buf;
    }
    if (exp < 0) return sign + "0." + std::string(-exp - 1, '0') + digits;
    if (digits.size() <= static_cast<size_t>(exp) + 1)
        return sign + digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    return sign + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
}

// Python's ValueError text for an out-of-range value, or "" when it is fine.
// NaN is refused everywhere (Python lets some through only by accident of
// how each check is written).
std::string check_value(Key key, double v) {
    const std::string x = py_float(v);
    switch (key) {
    case kLr: return v >= 0 ? "" : "Invalid learning rate: " + x;
    case kMomentum: return v >= 0 ? "" : "Invalid momentum value: " + x;
    case kWeightDecay: return v >= 0 ? "" : "Invalid weight_decay value: " + x;
    case kEps: return v >= 0 ? "" : "Invalid epsilon value: " + x;
    case kAlpha: return v >= 0 ? "" : "Invalid alpha value: " + x;
    case kLrDecay: return v >= 0 ? "" : "Invalid lr_decay value: " + x;
    case kInitAcc: return v >= 0 ? "" : "Invalid initial_accumulator_value value: " + x;
    case kBeta1: return v >= 0 && v < 1 ? "" : "Invalid beta parameter at index 0: " + x;
    case kBeta2: return v >= 0 && v < 1 ? "" : "Invalid beta parameter at index 1: " + x;
    case kDampening: return std::isnan(v) ? "Invalid dampening value: nan" : "";
    case kRho: return v >= 0 && v <= 1 ? "" : "Invalid rho value: " + x;
    case kMomentumDecay: return v >= 0 ? "" : "Invalid momentum_decay value: " + x;
    // Python checks none of LBFGS's counts: 0 or less would step nothing,
    // leave None in the state, or fail in the middle of a step.
    case kMaxIter:
    case kMaxEval:
    case kHistory: {
        const char *name = key == kMaxIter ? "max_iter" : key == kMaxEval ? "max_eval" : "history_size";
        if (v >= 1 && v == std::floor(v) && v < 9.0e15) return "";
        const std::string shown = v == std::floor(v) && std::fabs(v) < 9.0e15
                                      ? std::to_string(static_cast<int64_t>(v)) : x;  // as the int it should be
        return std::string("Invalid ") + name + " value: " + shown + " (a whole number >= 1)";
    }
    default: return "";
    }
}

// The order in which each constructor checks its values (the first failure
// is the one Python reports).
std::vector<Key> check_order(Kind k) {
    switch (k) {
    case Kind::SGD: return {kLr, kMomentum, kWeightDecay, kDampening};
    case Kind::Adam:
    case Kind::AdamW: return {kLr, kEps, kBeta1, kBeta2, kWeightDecay};
    case Kind::RMSprop: return {kLr, kEps, kMomentum, kWeightDecay, kAlpha};
    case Kind::Adagrad: return {kLr, kLrDecay, kWeightDecay, kInitAcc, kEps};
    case Kind::Adadelta: return {kLr, kRho, kEps, kWeightDecay};
    case Kind::Adamax:
    case Kind::RAdam: return {kLr, kEps, kBeta1, kBeta2, kWeightDecay};
    case Kind::NAdam: return {kLr, kEps, kBeta1, kBeta2, kWeightDecay, kMomentumDecay};
    case Kind::LBFGS: return {kLr, kMaxIter, kMaxEval, kHistory};
    }
    return {};
}

// ============================================================================
// state keys
// ============================================================================

struct StateSlot {
    const char *name;
    at::Tensor State::*field;
};

// State keys in the order Python creates them.
std::vector<StateSlot> slots_of(Kind k) {
    switch (k) {
    case Kind::SGD: return {{"momentum_buffer", &State::momentum_buffer}};
    case Kind::Adam:
    case Kind::AdamW:
        return {{"step", &State::step},
                {"exp_avg", &State::exp_avg},
                {"exp_avg_sq", &State::exp_avg_sq},
                {"max_exp_avg_sq", &State::max_exp_avg_sq}};
    case Kind::RMSprop:
        return {{"step", &State::step},
                {"square_avg", &State::square_avg},
                {"momentum_buffer", &State::momentum_buffer},
                {"grad_avg", &State::grad_avg}};
    case Kind::Adagrad: return {{"step", &State::step}, {"sum", &State::sum}};
    case Kind::Adadelta:
        return {{"step", &State::step}, {"square_avg", &State::square_avg}, {"acc_delta", &State::acc_delta}};
    case Kind::Adamax:
        return {{"step", &State::step}, {"exp_avg", &State::exp_avg}, {"exp_inf", &State::exp_inf}};
    case Kind::NAdam:
        return {{"step", &State::step},
                {"mu_product", &State::mu_product},
                {"exp_avg", &State::exp_avg},
                {"exp_avg_sq", &State::exp_avg_sq}};
    case Kind::RAdam:
        return {{"step", &State::step}, {"exp_avg", &State::exp_avg}, {"exp_avg_sq", &State::exp_avg_sq}};
    case Kind::LBFGS: return {};  // one state of its own (LbfgsState)
    }
    return {};
}


// ============================================================================
// construction
// ============================================================================

// Checks a new value of one key, as Python's constructor would.
void validate(Key key, double v) {
    std::string msg = check_value(key, v);
    if (!msg.empty()) fail(CT_EINVAL, msg);
}

Hyper make_defaults(Kind kind, std::vector<std::pair<Key, double>> values) {
    Hyper h;
    h.v[kForeach] = kNone;
    h.v[kFused] = kNone;
    h.v[kDecoupled] = kind == Kind::AdamW;
    for (auto &kv : values) h.v[kv.first] = kv.second;
    for (Key k : check_order(kind)) validate(k, h.v[k]);
    if (kind == Kind::SGD && h.v[kNesterov] && (h.v[kMomentum] <= 0 || h.v[kDampening] != 0))
        fail(CT_EINVAL, "Nesterov momentum requires a momentum and zero dampening");
    // Python's defaults for these are the int 0; a value left at 0 is written
    // as that int so state dicts compare equal with Python's.
    for (Key k : {kMomentum, kDampening, kWeightDecay, kLrDecay, kInitAcc})
        h.as_int[k] = has_key(kind, k) && h.v[k] == 0 && !std::signbit(h.v[k]);
    if (kind == Kind::AdamW) h.as_int[kWeightDecay] = false;  // its default is 1e-2
    if (kind == Kind::LBFGS) h.as_int[kLr] = h.v[kLr] == 1;   // LBFGS's is the int 1
    return h;
}

ct_optim *create(const char *fn, Kind kind, const ct_module *m,
                 std::vector<std::pair<Key, double>> values) {
    try {
        auto o = std::make_unique<ct_optim>();
        o->kind = kind;
        o->defaults = make_defaults(kind, std::move(values));
        if (m) {
            size_t n = 0;
            ct_tensor *const *ps = ct_nn_parameters(m, &n);
            if (!ps && n) fail(ct_last_code() ? ct_last_code() : CT_EINVAL, ct_last_error());
            if (n == 0) fail(CT_EINVAL, "optimizer got an empty parameter list");
            if (ct_optim_add_param_group(o.get(), n, ps) < 0) fail(ct_last_code(), ct_last_error());
        }
        return o.release();
    } catch (...) {
        ct::fail_exception(fn);
        return nullptr;
    }
}

ct_optim *checked_optim(const ct_optim *o, size_t group, const char *fn) {
    if (!o) {
        ct::fail(CT_EINVAL, fn, "optimizer is NULL");
        return nullptr;
    }
    if (group >= o->groups.size()) {
        ct::fail(CT_EINDEX, fn, "group " + std::to_string(group) + " out of range (" +
                                     std::to_string(o->groups.size()) + " groups)");
        return nullptr;
    }
    return const_cast<ct_optim *>(o);
}

}  // namespace

// ============================================================================
// public API: construction
// ============================================================================

extern "C" ct_sgd_opts ct_sgd_defaults(void) {
    ct_sgd_opts o;
    o.lr = 1e-3;
    o.momentum = 0;
    o.dampening = 0;
    o.weight_decay = 0;
    o.nesterov = false;
    o.maximize = false;
    return o;
}

extern "C" ct_adam_opts ct_adam_defaults(void) {
    ct_adam_opts o;
    o.lr = 1e-3;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.weight_decay = 0;
    o.amsgrad = false;
    o.maximize = false;
    return o;
}

extern "C" ct_adam_opts ct_adamw_defaults(void) {
    ct_adam_opts o = ct_adam_defaults();
    o.weight_decay = 1e-2;
    return o;
}

extern "C" ct_rmsprop_opts ct_rmsprop_defaults(void) {
    ct_rmsprop_opts o;
    o.lr = 1e-2;
    o.alpha = 0.99;
    o.eps = 1e-8;
    o.weight_decay = 0;
    o.momentum = 0;
    o.centered = false;
    o.maximize = false;
    return o;
}

extern "C" ct_adagrad_opts ct_adagrad_defaults(void) {
    ct_adagrad_opts o;
    o.lr = 1e-2;
    o.lr_decay = 0;
    o.weight_decay = 0;
    o.initial_accumulator_value = 0;
    o.eps = 1e-10;
    o.maximize = false;
    return o;
}

extern "C" ct_adadelta_opts ct_adadelta_defaults(void) {
    ct_adadelta_opts o;
    o.lr = 1.0;
    o.rho = 0.9;
    o.eps = 1e-6;
    o.weight_decay = 0;
    o.maximize = false;
    return o;
}

extern "C" ct_adamax_opts ct_adamax_defaults(void) {
    ct_adamax_opts o;
    o.lr = 2e-3;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.weight_decay = 0;
    o.maximize = false;
    return o;
}

extern "C" ct_nadam_opts ct_nadam_defaults(void) {
    ct_nadam_opts o;
    o.lr = 2e-3;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.weight_decay = 0;
    o.momentum_decay = 4e-3;
    o.decoupled_weight_decay = false;
    o.maximize = false;
    return o;
}

extern "C" ct_radam_opts ct_radam_defaults(void) {
    ct_radam_opts o;
    o.lr = 1e-3;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.eps = 1e-8;
    o.weight_decay = 0;
    o.decoupled_weight_decay = false;
    o.maximize = false;
    return o;
}

extern "C" ct_lbfgs_opts ct_lbfgs_defaults(void) {
    ct_lbfgs_opts o;
    o.lr = 1;
    o.max_iter = 20;
    o.max_eval = 0;
    o.tolerance_grad = 1e-7;
    o.tolerance_change = 1e-9;
    o.history_size = 100;
    o.line_search_fn = nullptr;
    return o;
}

extern "C" ct_optim *ct_optim_sgd(const ct_module *params, const ct_sgd_opts *opts) {
    ct_sgd_opts o = opts ? *opts : ct_sgd_defaults();
    return create(__func__, Kind::SGD, params,
                  {{kLr, o.lr}, {kMomentum, o.momentum}, {kDampening, o.dampening},
                   {kWeightDecay, o.weight_decay}, {kNesterov, o.nesterov}, {kMaximize, o.maximize}});
}

static ct_optim *adam_like(const char *fn, Kind kind, const ct_module *params, const ct_adam_opts &o) {
    return create(fn, kind, params,
                  {{kLr, o.lr}, {kBeta1, o.beta1}, {kBeta2, o.beta2}, {kEps, o.eps},
                   {kWeightDecay, o.weight_decay}, {kAmsgrad, o.amsgrad}, {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_adam(const ct_module *params, const ct_adam_opts *opts) {
    return adam_like(__func__, Kind::Adam, params, opts ? *opts : ct_adam_defaults());
}

extern "C" ct_optim *ct_optim_adamw(const ct_module *params, const ct_adam_opts *opts) {
    return adam_like(__func__, Kind::AdamW, params, opts ? *opts : ct_adamw_defaults());
}

extern "C" ct_optim *ct_optim_rmsprop(const ct_module *params, const ct_rmsprop_opts *opts) {
    ct_rmsprop_opts o = opts ? *opts : ct_rmsprop_defaults();
    return create(__func__, Kind::RMSprop, params,
                  {{kLr, o.lr}, {kMomentum, o.momentum}, {kAlpha, o.alpha}, {kEps, o.eps},
                   {kCentered, o.centered}, {kWeightDecay, o.weight_decay}, {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_adagrad(const ct_module *params, const ct_adagrad_opts *opts) {
    ct_adagrad_opts o = opts ? *opts : ct_adagrad_defaults();
    return create(__func__, Kind::Adagrad, params,
                  {{kLr, o.lr}, {kLrDecay, o.lr_decay}, {kEps, o.eps}, {kWeightDecay, o.weight_decay},
                   {kInitAcc, o.initial_accumulator_value}, {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_adadelta(const ct_module *params, const ct_adadelta_opts *opts) {
    ct_adadelta_opts o = opts ? *opts : ct_adadelta_defaults();
    return create(__func__, Kind::Adadelta, params,
                  {{kLr, o.lr}, {kRho, o.rho}, {kEps, o.eps}, {kWeightDecay, o.weight_decay},
                   {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_adamax(const ct_module *params, const ct_adamax_opts *opts) {
    ct_adamax_opts o = opts ? *opts : ct_adamax_defaults();
    return create(__func__, Kind::Adamax, params,
                  {{kLr, o.lr}, {kBeta1, o.beta1}, {kBeta2, o.beta2}, {kEps, o.eps},
                   {kWeightDecay, o.weight_decay}, {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_nadam(const ct_module *params, const ct_nadam_opts *opts) {
    ct_nadam_opts o = opts ? *opts : ct_nadam_defaults();
    return create(__func__, Kind::NAdam, params,
                  {{kLr, o.lr}, {kBeta1, o.beta1}, {kBeta2, o.beta2}, {kEps, o.eps},
                   {kWeightDecay, o.weight_decay}, {kMomentumDecay, o.momentum_decay},
                   {kDecoupled, o.decoupled_weight_decay}, {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_radam(const ct_module *params, const ct_radam_opts *opts) {
    ct_radam_opts o = opts ? *opts : ct_radam_defaults();
    return create(__func__, Kind::RAdam, params,
                  {{kLr, o.lr}, {kBeta1, o.beta1}, {kBeta2, o.beta2}, {kEps, o.eps},
                   {kWeightDecay, o.weight_decay}, {kDecoupled, o.decoupled_weight_decay},
                   {kMaximize, o.maximize}});
}

extern "C" ct_optim *ct_optim_lbfgs(const ct_module *params, const ct_lbfgs_opts *opts) {
    ct_lbfgs_opts o = opts ? *opts : ct_lbfgs_defaults();
    double line_search = 0;
    if (o.line_search_fn) {
        if (std::strcmp(o.line_search_fn, "strong_wolfe") != 0) {
            ct::fail(CT_EINVAL, __func__, std::string("only 'strong_wolfe' is supported (line_search_fn \"") +
                                              o.line_search_fn + "\")");
            return nullptr;
        }
        line_search = 1;
    }
    // max_eval=None: max_iter * 5 // 4 (max_iter is checked to be >= 1).
    const double max_eval = o.max_eval == 0 && o.max_iter >= 1 ? static_cast<double>(o.max_iter * 5 / 4)
                                                                : static_cast<double>(o.max_eval);
    return create(__func__, Kind::LBFGS, params,
                  {{kLr, o.lr}, {kMaxIter, static_cast<double>(o.max_iter)}, {kMaxEval, max_eval},
                   {kTolGrad, o.tolerance_grad}, {kTolChange, o.tolerance_change},
                   {kHistory, static_cast<double>(o.history_size)}, {kLineSearch, line_search}});
}

extern "C" int ct_optim_add_param_group(ct_optim *o, size_t n, ct_tensor *const *params) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (n && !params) return ct::fail(CT_EINVAL, __func__, "params is NULL");
    for (size_t k = 0; k < n; ++k) {
        std::string name = "params[" + std::to_string(k) + "]";
        if (!ct::check(params[k], __func__, name.c_str())) return ct_last_code();
    }
    try {
        // Everything is checked before the optimizer changes.
        if (o->kind == Kind::LBFGS && !o->groups.empty())
            fail(CT_EINVAL, "LBFGS doesn't support per-parameter options (parameter groups)");
        for (size_t k = 0; k < n; ++k) {
            const at::Tensor &t = params[k]->t;
            if (!t.is_leaf() && !t.retains_grad())
                fail(CT_EINVAL, "can't optimize a non-leaf Tensor (params[" + std::to_string(k) + "])");
            auto same = [&](const at::Tensor &u) { return u.unsafeGetTensorImpl() == t.unsafeGetTensorImpl(); };
            for (size_t j = 0; j < k; ++j)
                if (same(params[j]->t))
                    fail(CT_EINVAL, "params[" + std::to_string(k) + "] appears twice in the group");
            for (const at::Tensor &u : o->params)
                if (same(u)) fail(CT_EINVAL, "some parameters appear in more than one parameter group");
        }
        Group g;
        g.h = o->defaults;
        o->params.reserve(o->params.size() + n);
        o->handles.reserve(o->handles.size() + n);
        o->state.reserve(o->state.size() + n);
        for (size_t k = 0; k < n; ++k) {
            g.params.push_back(o->params.size());
            o->params.push_back(params[k]->t);
            o->handles.push_back(ct::wrap_unscoped(params[k]->t));
            o->state.emplace_back();
        }
        o->groups.push_back(std::move(g));
        if (o->kind == Kind::Adagrad) {
            c10::NoGradGuard ng;
            for (size_t i : o->groups.back().params) adagrad_init_param(o, o->groups.back(), i);
        }
        return static_cast<int>(o->groups.size() - 1);
    } catch (...) {
        return ct::fail_exception(__func__);
    }
}

extern "C" void ct_optim_free(ct_optim *o) { delete o; }

// ============================================================================
// public API: stepping and options
// ============================================================================

extern "C" int ct_optim_step(ct_optim *o) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (o->kind == Kind::LBFGS)
        return ct::fail(CT_EINVAL, __func__,
                        "LBFGS re-evaluates the loss during its step: call ct_optim_step_closure with a closure "
                        "(Python: step() missing 1 required positional argument: 'closure')");
    return ct::status(__func__, [&] {
        c10::NoGradGuard ng;  // Python's step runs with grad disabled
        for (const Group &g : o->groups) step_group(o, g);
    });
}

extern "C" int ct_optim_step_closure(ct_optim *o, ct_closure_fn closure, void *user, double *loss) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (!closure) return ct::fail(CT_EINVAL, __func__, "closure is NULL");
    return ct::status(__func__, [&] {
        double value;
        if (o->kind == Kind::LBFGS) {
            c10::NoGradGuard ng;  // LBFGS.step is @torch.no_grad(); the closure gets grad back
            value = lbfgs_step(o, closure, user);
        } else {
            value = call_closure(closure, user);  // `with torch.enable_grad(): loss = closure()`
            c10::NoGradGuard ng;
            for (const Group &g : o->groups) step_group(o, g);
        }
        if (loss) *loss = value;
    });
}

extern "C" int ct_optim_zero_grad(ct_optim *o, bool set_to_none) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    return ct::status(__func__, [&] {
        for (at::Tensor &p : o->params) {
            at::Tensor &grad = p.mutable_grad();
            if (!grad.defined()) continue;
            if (set_to_none) {
                grad.reset();
                continue;
            }
            if (grad.grad_fn()) grad.detach_();
            else grad.requires_grad_(false);
            grad.zero_();
        }
    });
}

extern "C" const char *ct_optim_type(const ct_optim *o) { return o ? kind_name(o->kind) : "NULL"; }
extern "C" size_t ct_optim_num_groups(const ct_optim *o) { return o ? o->groups.size() : 0; }
extern "C" size_t ct_optim_num_params(const ct_optim *o) { return o ? o->params.size() : 0; }

extern "C" int ct_optim_set_stepped(ct_optim *o, const bool *stepped) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (o->kind == Kind::LBFGS && stepped)
        return ct::fail(CT_ENOTSUP, __func__, "LBFGS keeps one state for all its parameters (its directions and "
                                              "history span them all): it cannot step some of them alone");
    return ct::status(__func__, [&] {
        if (!stepped) {
            o->stepped.clear();
            return;
        }
        o->stepped.assign(stepped, stepped + o->params.size());
    });
}

extern "C" ct_tensor *ct_optim_param(const ct_optim *o, size_t i) {
    if (!o) {
        ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
        return nullptr;
    }
    if (i >= o->handles.size()) {
        ct::fail(CT_EINDEX, __func__, "parameter " + std::to_string(i) + " out of range (" +
                                          std::to_string(o->handles.size()) + " parameters)");
        return nullptr;
    }
    return o->handles[i];
}

namespace {

// A key of get/set_option: one of the type's table, or beta1/beta2.
const KeySpec *find_key(Kind kind, const char *name, Key *key) {
    if (has_betas(kind)) {
        static const KeySpec b1{"beta1", kBeta1, Py::Num, kRequired}, b2{"beta2", kBeta2, Py::Num, kRequired};
        if (std::strcmp(name, "beta1") == 0) {
            *key = kBeta1;
            return &b1;
        }
        if (std::strcmp(name, "beta2") == 0) {
            *key = kBeta2;
            return &b2;
        }
    }
    KeyTable t = keys_of(kind);
    for (size_t i = 0; i < t.n; ++i)
        if (std::strcmp(t.keys[i].name, name) == 0 && t.keys[i].py != Py::Betas) {
            *key = t.keys[i].key;
            return &t.keys[i];
        }
    return nullptr;
}

ct_value *find_extra(const Group &g, const char *name) {
    for (const auto &e : g.extras)
        if (e.first == name) return e.second.get();
    return nullptr;
}

std::string unknown_key(Kind kind, const char *name) {
    std::string msg = std::string(kind_name(kind)) + " has no option '" + name + "' (known:";
    KeyTable t = keys_of(kind);
    for (size_t i = 0; i < t.n; ++i)
        msg += std::string(" ") + (t.keys[i].py == Py::Betas ? "beta1 beta2" : t.keys[i].name);
    return msg + ")";
}

// Checks a value for a key of the given kind; "" when acceptable.
std::string check_set(const KeySpec &spec, double v) {
    std::string name = spec.name;
    switch (spec.py) {
    case Py::Num:
    case Py::Betas: return check_value(spec.key, v);
    case Py::Bool:
        if (v != 0 && v != 1) return "'" + name + "' is a bool: pass 0 or 1, not " + py_float(v);
        return "";
    case Py::OptBool:
        if (v != 0 && v != 1 && v != kNone)
            return "'" + name + "' is None/False/True: pass -1, 0 or 1, not " + py_float(v);
        return "";
    case Py::Int: return check_value(spec.key, v);
    case Py::LineSearch:
        if (v != 0 && v != 1)
            return "'" + name + "' is None or 'strong_wolfe': pass 0 or 1, not " + py_float(v);
        return "";
    }
    return "";
}

}  // namespace

extern "C" double ct_optim_get_lr(const ct_optim *o, size_t group) {
    if (!checked_optim(o, group, __func__)) return NAN;
    return o->groups[group].h.v[kLr];
}

extern "C" int ct_optim_set_lr(ct_optim *o, size_t group, double lr) {
    return ct_optim_set_option(o, group, "lr", lr);
}

extern "C" int ct_optim_get_option(const ct_optim *o, size_t group, const char *key, double *out) {
    if (!checked_optim(o, group, __func__)) return ct_last_code();
    if (!key || !out) return ct::fail(CT_EINVAL, __func__, "key or out is NULL");
    Key k;
    if (find_key(o->kind, key, &k)) {
        *out = o->groups[group].h.v[k];
        return CT_OK;
    }
    ct_value *extra = find_extra(o->groups[group], key);
    if (extra) {
        bool b;
        if (ct_value_get_bool(extra, &b) == 0) {
            *out = b;
            return CT_OK;
        }
        if (ct_value_get_float(extra, out) == 0) return CT_OK;
        return ct::fail(CT_EINVAL, __func__, std::string("'") + key + "' is a " +
                                                 ct_value_kind_name(ct_value_kind_of(extra)) +
                                                 ", not a number");
    }
    return ct::fail(CT_EINVAL, __func__, unknown_key(o->kind, key));
}

extern "C" int ct_optim_set_option(ct_optim *o, size_t group, const char *key, double value) {
    if (!checked_optim(o, group, __func__)) return ct_last_code();
    if (!key) return ct::fail(CT_EINVAL, __func__, "key is NULL");
    Group &g = o->groups[group];
    Key k;
    const KeySpec *spec = find_key(o->kind, key, &k);
    if (!spec) {
        // Numeric extras (initial_lr from an LR scheduler) may be set too.
        ct_value *extra = find_extra(g, key);
        bool numeric = extra && (ct_value_kind_of(extra) == CT_VALUE_FLOAT ||
                                 ct_value_kind_of(extra) == CT_VALUE_INT);
        if (!numeric && std::strcmp(key, "initial_lr") != 0)
            return ct::fail(CT_EINVAL, __func__, unknown_key(o->kind, key));
        ct_value *v = ct_value_float(value);
        if (!v) return ct_last_code();
        for (auto &e : g.extras)
            if (e.first == key) {
                e.second.reset(v);
                return CT_OK;
            }
        try {
            g.extras.emplace_back(key, ValuePtr(v));
        } catch (...) {
            ct_value_free(v);
            return ct::fail_exception(__func__);
        }
        return CT_OK;
    }
    std::string msg = check_set(*spec, value);
    if (!msg.empty()) return ct::fail(CT_EINVAL, __func__, msg);
    if ((k == kCapturable || k == kDifferentiable) && value == 1)
        return ct::fail(CT_ENOTSUP, __func__, std::string(key) + "=True is not supported");
    if ((k == kFused && value == 1 && g.h.v[kForeach] == 1) ||
        (k == kForeach && value == 1 && g.h.v[kFused] == 1))
        return ct::fail(CT_EINVAL, __func__, "`fused` and `foreach` cannot be `True` together.");
    g.h.v[k] = value;
    g.h.as_int[k] = false;  // a value set from C is a float, as assigning one in Python
    return CT_OK;
}

// ============================================================================
// state_dict
// ============================================================================

namespace {

void put(ct_value *dict, const char *key, ct_value *item) {
    if (ct_value_dict_set(dict, key, item) != 0) fail(ct_last_code(), ct_last_error());
}
void put_int(ct_value *dict, int64_t key, ct_value *item) {
    if (ct_value_dict_set_int(dict, key, item) != 0) fail(ct_last_code(), ct_last_error());
}
void append(ct_value *list, ct_value *item) {
    if (ct_value_list_append(list, item) != 0) fail(ct_last_code(), ct_last_error());
}
ct_value *checked(ct_value *v) {
    if (!v) fail(ct_last_code() ? ct_last_code() : CT_ENOMEM, ct_last_error());
    return v;
}
// A tensor leaf sharing storage with the optimizer's tensor.
ct_value *tensor_value(const at::Tensor &t) { return checked(ct_value_tensor(ct::wrap_unscoped(t))); }

ct_value *number_value(double v, bool as_int) {
    if (as_int && v == std::floor(v) && std::fabs(v) < 9.0e15)
        return checked(ct_value_int(static_cast<int64_t>(v)));
    return checked(ct_value_float(v));
}

ct_value *group_value(const ct_optim *o, const Group &g) {
    ValuePtr d(checked(ct_value_dict()));
    KeyTable t = keys_of(o->kind);
    for (size_t i = 0; i < t.n; ++i) {
        const KeySpec &s = t.keys[i];
        const double v = g.h.v[s.key];
        switch (s.py) {
        case Py::Num: put(d.get(), s.name, number_value(v, g.h.as_int[s.key])); break;
        case Py::Bool: put(d.get(), s.name, checked(ct_value_bool(v != 0))); break;
        case Py::OptBool:
            put(d.get(), s.name, checked(v == kNone ? ct_value_none() : ct_value_bool(v != 0)));
            break;
        case Py::Int: put(d.get(), s.name, number_value(v, true)); break;
        case Py::LineSearch:
            put(d.get(), s.name, checked(v == 1 ? ct_value_str("strong_wolfe") : ct_value_none()));
            break;
        case Py::Betas: {
            ValuePtr betas(checked(ct_value_tuple()));
            append(betas.get(), checked(ct_value_float(g.h.v[kBeta1])));
            append(betas.get(), checked(ct_value_float(g.h.v[kBeta2])));
            put(d.get(), s.name, betas.release());
            break;
        }
        }
    }
    for (const auto &e : g.extras) put(d.get(), e.first.c_str(), checked(ct_value_copy(e.second.get(), false)));
    ValuePtr ids(checked(ct_value_list()));
    for (size_t i : g.params) append(ids.get(), checked(ct_value_int(static_cast<int64_t>(i))));
    put(d.get(), "params", ids.release());
    return d.release();
}

// An LBFGS number as Python holds it: int, float or 0-dim tensor.
ct_value *pynum_value(const PyNum &n) {
    switch (n.type) {
    case PyNum::Int: return number_value(n.v, true);
    case PyNum::Float: return checked(ct_value_float(n.v));
    case PyNum::Tensor: return tensor_value(n.t);
    }
    return nullptr;
}

ct_value *tensor_list_value(const std::vector<at::Tensor> &ts) {
    ValuePtr l(checked(ct_value_list()));
    for (const at::Tensor &t : ts) append(l.get(), t.defined() ? tensor_value(t) : checked(ct_value_none()));
    return l.release();
}

// LBFGS's state[0], keys in the order Python's dict has them.
ct_value *lbfgs_entry(const LbfgsState &st) {
    ValuePtr e(checked(ct_value_dict()));
    for (const std::string &k : st.keys) {
        const char *key = k.c_str();
        ct_value *v = nullptr;
        if (k == "func_evals") v = checked(ct_value_int(st.func_evals));
        else if (k == "n_iter") v = checked(ct_value_int(st.n_iter));
        else if (k == "d") v = tensor_value(st.d);
        else if (k == "t") v = pynum_value(st.t);
        else if (k == "old_dirs") v = tensor_list_value(st.old_dirs);
        else if (k == "old_stps") v = tensor_list_value(st.old_stps);
        else if (k == "ro") v = tensor_list_value(st.ro);
        else if (k == "H_diag") v = pynum_value(st.H_diag);
        else if (k == "prev_flat_grad") v = tensor_value(st.prev_flat_grad);
        else if (k == "prev_loss") v = checked(ct_value_float(st.prev_loss));
        else if (k == "al") v = tensor_list_value(st.al);
        else fail(CT_ESTATE, "LBFGS state has an unknown key '" + k + "'");
        put(e.get(), key, v);
    }
    return e.release();
}

}  // namespace

extern "C" ct_value *ct_optim_state_dict(const ct_optim *o) {
    if (!o) {
        ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
        return nullptr;
    }
    try {
        ValuePtr sd(checked(ct_value_dict()));
        ValuePtr state(checked(ct_value_dict()));
        const std::vector<StateSlot> slots = slots_of(o->kind);
        for (size_t i : o->state_order) {
            if (o->kind == Kind::LBFGS) {  // one state, filed under the first parameter
                put_int(state.get(), static_cast<int64_t>(i), lbfgs_entry(o->lbfgs));
                continue;
            }
            ValuePtr entry(checked(ct_value_dict()));
            for (const StateSlot &s : slots) {
                const at::Tensor &t = o->state[i].*s.field;
                if (t.defined()) put(entry.get(), s.name, tensor_value(t));
            }
            put_int(state.get(), static_cast<int64_t>(i), entry.release());
        }
        put(sd.get(), "state", state.release());
        ValuePtr groups(checked(ct_value_list()));
        for (const Group &g : o->groups) append(groups.get(), group_value(o, g));
        put(sd.get(), "param_groups", groups.release());
        return sd.release();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

// ============================================================================
// load_state_dict
// ============================================================================

namespace {

std::string shape_str(at::IntArrayRef s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// Reads one hyperparameter of a saved group into h.
void load_key(const KeySpec &s, const ct_value *v, Hyper &h, const std::string &where) {
    const std::string name = where + "['" + s.name + "']";
    ct_value_kind kind = ct_value_kind_of(v);
    auto bad = [&](const char *want) {
        fail(CT_EFORMAT, name + " must be " + want + ", got " + ct_value_kind_name(kind));
    };
    double x = 0;
    switch (s.py) {
    case Py::Num:
        if (kind != CT_VALUE_INT && kind != CT_VALUE_FLOAT) bad("a number");
        ct_value_get_float(v, &x);
        h.v[s.key] = x;
        h.as_int[s.key] = kind == CT_VALUE_INT;
        break;
    case Py::Bool:
        if (kind == CT_VALUE_BOOL) {
            bool b;
            ct_value_get_bool(v, &b);
            h.v[s.key] = b;
        } else if (kind == CT_VALUE_INT) {
            int64_t i;
            ct_value_get_int(v, &i);
            h.v[s.key] = i != 0;
        } else {
            bad("a bool");
        }
        break;
    case Py::OptBool:
        if (kind == CT_VALUE_NONE) {
            h.v[s.key] = kNone;
        } else if (kind == CT_VALUE_BOOL) {
            bool b;
            ct_value_get_bool(v, &b);
            h.v[s.key] = b;
        } else {
            bad("None or a bool");
        }
        break;
    case Py::Betas: {
        if ((kind != CT_VALUE_TUPLE && kind != CT_VALUE_LIST) || ct_value_len(v) != 2)
            bad("a pair of numbers");
        for (int k = 0; k < 2; ++k) {
            if (ct_value_get_float(ct_value_list_get(v, k), &x) != 0) bad("a pair of numbers");
            h.v[k ? kBeta2 : kBeta1] = x;
        }
        break;
    }
    case Py::Int:
        if (kind != CT_VALUE_INT) bad("an int");
        ct_value_get_float(v, &x);
        h.v[s.key] = x;
        h.as_int[s.key] = true;
        break;
    case Py::LineSearch:
        if (kind == CT_VALUE_NONE) {
            h.v[s.key] = 0;
        } else if (kind == CT_VALUE_STR) {
            // Python raises this at the next step; here it is refused now.
            if (std::strcmp(ct_value_get_str(v), "strong_wolfe") != 0)
                fail(CT_EINVAL, name + " is '" + ct_value_get_str(v) + "': only 'strong_wolfe' is supported");
            h.v[s.key] = 1;
        } else {
            bad("None or 'strong_wolfe'");
        }
        break;
    }
    if (s.py == Py::Betas) {
        for (Key k : {kBeta1, kBeta2}) {
            std::string msg = check_value(k, h.v[k]);
            if (!msg.empty()) fail(CT_EINVAL, name + ": " + msg);
        }
    } else {
        std::string msg = check_value(s.key, h.v[s.key]);
        if (!msg.empty()) fail(CT_EINVAL, name + ": " + msg);
    }
}

// The saved group `sg` (index gi) as a Group over the current group's params.
Group load_group(const ct_optim *o, const Group &cur, const ct_value *sg, size_t gi) {
    const std::string where = "param_groups[" + std::to_string(gi) + "]";
    if (ct_value_kind_of(sg) != CT_VALUE_DICT) fail(CT_EFORMAT, where + " is not a dict");
    Group g;
    g.params = cur.params;
    g.h = o->defaults;
    KeyTable t = keys_of(o->kind);
    for (size_t i = 0; i < t.n; ++i) {
        const KeySpec &s = t.keys[i];
        const ct_value *v = ct_value_dict_get(sg, s.name);
        if (v) {
            load_key(s, v, g.h, where);
        } else if (std::isnan(s.load_default)) {
            fail(CT_EFORMAT, where + " has no '" + s.name + "' (not a " + kind_name(o->kind) +
                                 " state dict?)");
        } else {
            g.h.v[s.key] = s.load_default;
            g.h.as_int[s.key] = false;
        }
    }
    if (o->kind == Kind::AdamW) g.h.v[kDecoupled] = 1;  // AdamW.__setstate__ forces it
    if (g.h.v[kCapturable] == 1)
        fail(CT_ENOTSUP, where + " has capturable=True (CUDA graph capture), which ctrial does not support");
    if (g.h.v[kDifferentiable] == 1)
        fail(CT_ENOTSUP, where + " has differentiable=True, which ctrial does not support");
    if (g.h.v[kFused] == 1 && g.h.v[kForeach] == 1)
        fail(CT_EINVAL, where + ": `fused` and `foreach` cannot be `True` together.");
    if (o->kind == Kind::SGD && g.h.v[kNesterov] == 1 &&
        (g.h.v[kMomentum] <= 0 || g.h.v[kDampening] != 0))
        fail(CT_EINVAL, where + ": Nesterov momentum requires a momentum and zero dampening");
    // Everything else is kept as it came (initial_lr, param_names, ...).
    for (size_t i = 0; i < ct_value_len(sg); ++i) {
        const char *key = nullptr;
        const ct_value *v = ct_value_dict_at(sg, i, &key, nullptr);
        if (!key) fail(CT_EFORMAT, where + " has a non-string key");
        if (std::strcmp(key, "params") == 0) continue;
        bool known = false;
        for (size_t j = 0; j < t.n; ++j) known = known || std::strcmp(t.keys[j].name, key) == 0;
        if (known) continue;
        ct_value *copy = ct_value_copy(v, true);
        if (!copy) fail(ct_last_code(), ct_last_error());
        g.extras.emplace_back(key, ValuePtr(copy));
    }
    return g;
}

// One saved state tensor cast the way Python's load_state_dict casts it:
// "step" stays a float32 scalar (on the parameter's device when fused),
// everything else takes the parameter's device and (floating) dtype. Always
// a copy, so that the optimizer never shares storage with the caller's value.
// NAdam's "mu_product" (is_scalar) is one value cast like the others, or a
// plain number from an older checkpoint (NAdam.__setstate__: a float32 CPU
// tensor).
at::Tensor load_tensor(const at::Tensor &param, const ct_value *v, bool is_step, bool fused,
                       const std::string &name, bool is_scalar = false) {
    at::Tensor t;
    ct_value_kind kind = ct_value_kind_of(v);
    if (kind == CT_VALUE_TENSOR) {
        t = ct_value_get_tensor(v)->t.detach();
    } else if (is_step && (kind == CT_VALUE_INT || kind == CT_VALUE_FLOAT)) {
        double x = 0;
        ct_value_get_float(v, &x);  // older checkpoints keep the step as a number
        t = at::scalar_tensor(x, at::kDouble);
    } else if (is_scalar && (kind == CT_VALUE_INT || kind == CT_VALUE_FLOAT)) {
        double x = 0;
        ct_value_get_float(v, &x);
        return at::scalar_tensor(x, at::kFloat);
    } else {
        fail(CT_EFORMAT, name + " must be a tensor, got " + ct_value_kind_name(kind));
    }
    if (is_scalar) {
        if (t.numel() != 1) fail(CT_ESHAPE, name + " must hold one value, got " + ct::describe(t));
        at::ScalarType dtype = param.is_floating_point() ? param.scalar_type() : t.scalar_type();
        return t.reshape({}).to(param.device(), dtype, false, true);
    }
    if (is_step) {
        if (t.numel() != 1) fail(CT_ESHAPE, name + " must hold one value, got " + ct::describe(t));
        // The bias corrections read it: a NaN or negative count would turn
        // every later step's update into NaN or nonsense.
        const double count = t.reshape({}).item<double>();
        if (!std::isfinite(count) || count < 0)
            fail(CT_EFORMAT, name + " is " + std::to_string(count) + ", expected a finite step count >= 0");
        auto opt = at::TensorOptions().dtype(at::kFloat).device(fused ? param.device() : at::Device(at::kCPU));
        return t.reshape({}).to(opt, false, true);
    }
    if (!t.sizes().equals(param.sizes()))
        fail(CT_ESHAPE, name + " has shape " + shape_str(t.sizes()) + " but its parameter has " +
                            shape_str(param.sizes()));
    at::ScalarType dtype = param.is_floating_point() ? param.scalar_type() : t.scalar_type();
    return t.to(param.device(), dtype, false, true);
}

// The state keys a parameter's entry must hold once it has any (Python
// makes them together and reads them at every step; a missing one fails
// the next step there, and here would restart that buffer at zero). The others are optional: SGD's momentum
// buffer (made from the gradient when absent), Adam's max_exp_avg_sq and
// RMSprop's momentum_buffer and grad_avg (made when their option is on).
std::vector<const char *> required_slots(Kind k) {
    switch (k) {
    case Kind::SGD: return {};
    case Kind::Adam:
    case Kind::AdamW: return {"step", "exp_avg", "exp_avg_sq"};
    case Kind::RMSprop: return {"step", "square_avg"};
    case Kind::Adagrad: return {"step", "sum"};
    case Kind::Adadelta: return {"step", "square_avg", "acc_delta"};
    case Kind::Adamax: return {"step", "exp_avg", "exp_inf"};
    case Kind::NAdam: return {"step", "mu_product", "exp_avg", "exp_avg_sq"};
    case Kind::RAdam: return {"step", "exp_avg", "exp_avg_sq"};
    case Kind::LBFGS: return {};  // load_lbfgs checks its own
    }
    return {};
}

// "step, exp_avg and exp_avg_sq" for messages.
std::string listed(const std::vector<const char *> &names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i)
        out += std::string(i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return out;
}

// LBFGS's saved state[0] as Python's load_state_dict leaves it: tensors (in
// lists too) cast to the first parameter's device and floating dtype, copies;
// numbers as they are. Checked so that the next step cannot fail on it.
LbfgsState load_lbfgs(const ct_optim *o, size_t first, const ct_value *entry, const std::string &where) {
    LbfgsState st;
    const at::Tensor &p0 = o->params[first];
    int64_t numel = 0;
    for (const at::Tensor &p : o->params) numel += p.numel();
    auto kind_name = [](const ct_value *v) { return std::string(ct_value_kind_name(ct_value_kind_of(v))); };
    auto cast = [&](const at::Tensor &t) {
        at::ScalarType dtype = p0.is_floating_point() ? p0.scalar_type() : t.scalar_type();
        return t.to(p0.device(), dtype, false, true);
    };
    auto tensor = [&](const ct_value *v, const std::string &name) {
        if (ct_value_kind_of(v) != CT_VALUE_TENSOR) fail(CT_EFORMAT, name + " must be a tensor, got " + kind_name(v));
        return ct_value_get_tensor(v)->t.detach();
    };
    auto flat = [&](const ct_value *v, const std::string &name) {
        at::Tensor t = tensor(v, name);
        if (t.dim() != 1 || t.size(0) != numel)
            fail(CT_ESHAPE, name + " has shape " + shape_str(t.sizes()) + " but the parameters have " +
                                std::to_string(numel) + " elements in all (expected [" + std::to_string(numel) + "])");
        return cast(t);
    };
    auto one = [&](const at::Tensor &t, const std::string &name) {
        if (t.numel() != 1) fail(CT_ESHAPE, name + " must hold one value, got " + ct::describe(t));
        return cast(t);
    };
    auto number = [&](const ct_value *v, const std::string &name) {
        PyNum n;
        switch (ct_value_kind_of(v)) {
        case CT_VALUE_INT: n.type = PyNum::Int; break;
        case CT_VALUE_FLOAT: n.type = PyNum::Float; break;
        case CT_VALUE_TENSOR:
            n.type = PyNum::Tensor;
            n.t = one(tensor(v, name), name);
            return n;
        default: fail(CT_EFORMAT, name + " must be a number or a one-element tensor, got " + kind_name(v));
        }
        ct_value_get_float(v, &n.v);
        return n;
    };
    auto list = [&](const ct_value *v, const std::string &name, bool flat_items, bool none_ok) {
        if (ct_value_kind_of(v) != CT_VALUE_LIST && ct_value_kind_of(v) != CT_VALUE_TUPLE)
            fail(CT_EFORMAT, name + " must be a list, got " + kind_name(v));
        std::vector<at::Tensor> out;
        for (size_t k = 0; k < ct_value_len(v); ++k) {
            const ct_value *item = ct_value_list_get(v, k);
            const std::string iname = name + "[" + std::to_string(k) + "]";
            if (none_ok && ct_value_kind_of(item) == CT_VALUE_NONE) out.emplace_back();
            else out.push_back(flat_items ? flat(item, iname) : one(tensor(item, iname), iname));
        }
        return out;
    };
    auto count = [&](const ct_value *v, const std::string &name) {
        int64_t n = 0;
        if (ct_value_kind_of(v) != CT_VALUE_INT) fail(CT_EFORMAT, name + " must be an int, got " + kind_name(v));
        ct_value_get_int(v, &n);
        if (n < 0) fail(CT_EFORMAT, name + " is " + std::to_string(n) + ", expected a count >= 0");
        return n;
    };
    for (size_t k = 0; k < ct_value_len(entry); ++k) {
        const char *key = nullptr;
        const ct_value *v = ct_value_dict_at(entry, k, &key, nullptr);
        const std::string name = where + "['" + (key ? key : "<int>") + "']";
        const std::string kk = key ? key : "";
        if (kk == "func_evals") st.func_evals = count(v, name);
        else if (kk == "n_iter") st.n_iter = count(v, name);
        else if (kk == "d") st.d = flat(v, name);
        else if (kk == "t") st.t = number(v, name);
        else if (kk == "old_dirs") st.old_dirs = list(v, name, true, false);
        else if (kk == "old_stps") st.old_stps = list(v, name, true, false);
        else if (kk == "ro") st.ro = list(v, name, false, false);
        else if (kk == "H_diag") st.H_diag = number(v, name);
        else if (kk == "prev_flat_grad") st.prev_flat_grad = flat(v, name);
        else if (kk == "al") st.al = list(v, name, false, true);
        else if (kk == "prev_loss") {
            if (ct_value_kind_of(v) != CT_VALUE_INT && ct_value_kind_of(v) != CT_VALUE_FLOAT)
                fail(CT_EFORMAT, name + " must be a number, got " + kind_name(v));
            ct_value_get_float(v, &st.prev_loss);
        } else {
            fail(CT_EFORMAT, where + " has the key '" + (key ? key : "<int>") + "', which LBFGS does not use");
        }
        st.keys.push_back(kk);
    }
    if (st.keys.empty()) return st;  // not stepped yet
    // step() keeps func_evals and n_iter from its first call, and the rest
    // once an iteration has run (n_iter > 0); it reads them all back.
    static const char *const kCounts[] = {"func_evals", "n_iter"};
    static const char *const kIterated[] = {"d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad",
                                            "prev_loss"};
    const char *why = "LBFGS keeps func_evals and n_iter once it has stepped, and d, t, old_dirs, old_stps, ro, "
                      "H_diag, prev_flat_grad and prev_loss once n_iter > 0";
    for (const char *name : kCounts)
        if (!st.has(name)) fail(CT_EFORMAT, where + " has no '" + name + "' (" + why + ")");
    if (st.n_iter > 0)
        for (const char *name : kIterated)
            if (!st.has(name)) fail(CT_EFORMAT, where + " has no '" + name + "' (" + why + ")");
    if (st.old_dirs.size() != st.old_stps.size() || st.old_dirs.size() != st.ro.size())
        fail(CT_EFORMAT, where + ": old_dirs, old_stps and ro must have the same length, got " +
                             std::to_string(st.old_dirs.size()) + ", " + std::to_string(st.old_stps.size()) +
                             " and " + std::to_string(st.ro.size()));
    return st;
}

}  // namespace

extern "C" int ct_optim_load_state_dict(ct_optim *o, const ct_value *sd) {
    if (!o) return ct::fail(CT_EINVAL, __func__, "optimizer is NULL");
    if (!sd) return ct::fail(CT_EINVAL, __func__, "state dict is NULL");
    try {
        // Check and build everything aside; the optimizer changes only at the end.
        if (ct_value_kind_of(sd) != CT_VALUE_DICT) fail(CT_EFORMAT, "state dict is not a dict");
        const ct_value *saved_state = ct_value_dict_get(sd, "state");
        const ct_value *saved_groups = ct_value_dict_get(sd, "param_groups");
        if (!saved_state || ct_value_kind_of(saved_state) != CT_VALUE_DICT)
            fail(CT_EFORMAT, "state dict has no 'state' dict");
        if (!saved_groups || (ct_value_kind_of(saved_groups) != CT_VALUE_LIST &&
                              ct_value_kind_of(saved_groups) != CT_VALUE_TUPLE))
            fail(CT_EFORMAT, "state dict has no 'param_groups' list");
        if (ct_value_len(saved_groups) != o->groups.size())
            fail(CT_EINVAL, "loaded state dict has a different number of parameter groups (" +
                                std::to_string(ct_value_len(saved_groups)) + ", the optimizer has " +
                                std::to_string(o->groups.size()) + ")");

        std::map<int64_t, size_t> id_map;  // saved parameter id -> our index
        std::map<int64_t, bool> id_fused;  // saved id -> its saved group is fused
        std::vector<Group> groups;
        for (size_t gi = 0; gi < o->groups.size(); ++gi) {
            const ct_value *sg = ct_value_list_get(saved_groups, gi);
            const Group &cur = o->groups[gi];
            const ct_value *ids = ct_value_kind_of(sg) == CT_VALUE_DICT ? ct_value_dict_get(sg, "params") : nullptr;
            const std::string where = "param_groups[" + std::to_string(gi) + "]";
            if (!ids || ct_value_kind_of(ids) != CT_VALUE_LIST)
                fail(CT_EFORMAT, where + " has no 'params' list");
            if (ct_value_len(ids) != cur.params.size())
                fail(CT_EINVAL, "loaded state dict contains a parameter group that doesn't match the "
                                "size of optimizer's group: " + where + " has " +
                                    std::to_string(ct_value_len(ids)) + " parameters, the optimizer's has " +
                                    std::to_string(cur.params.size()));
            groups.push_back(load_group(o, cur, sg, gi));
            for (size_t k = 0; k < cur.params.size(); ++k) {
                int64_t id;
                if (ct_value_get_int(ct_value_list_get(ids, k), &id) != 0)
                    fail(CT_EFORMAT, where + "['params'][" + std::to_string(k) + "] is not an int");
                if (id_map.count(id)) fail(CT_EFORMAT, "parameter id " + std::to_string(id) + " appears twice");
                id_map[id] = cur.params[k];
                id_fused[id] = groups.back().h.v[kFused] == 1;
            }
        }

        std::vector<State> state(o->params.size());
        std::vector<size_t> order;
        LbfgsState lbfgs;
        const std::vector<StateSlot> slots = slots_of(o->kind);
        const std::vector<const char *> required = required_slots(o->kind);
        for (size_t e = 0; e < ct_value_len(saved_state); ++e) {
            const char *skey = nullptr;
            int64_t id = 0;
            const ct_value *entry = ct_value_dict_at(saved_state, e, &skey, &id);
            const std::string where = skey ? std::string("state['") + skey + "']" : "state[" + std::to_string(id) + "]";
            if (skey || !id_map.count(id))
                fail(CT_EFORMAT, where + " belongs to no parameter of the param groups");
            if (ct_value_kind_of(entry) != CT_VALUE_DICT) fail(CT_EFORMAT, where + " is not a dict");
            const size_t i = id_map[id];
            State &s = state[i];
            s.present = true;
            order.push_back(i);
            if (o->kind == Kind::LBFGS) {
                // LBFGS reads only self.state[self._params[0]].
                if (i != o->groups[0].params[0])
                    fail(CT_EFORMAT, where + " is not LBFGS's: it keeps its state under its first parameter");
                lbfgs = load_lbfgs(o, i, entry, where);
                continue;
            }
            for (size_t k = 0; k < ct_value_len(entry); ++k) {
                const char *key = nullptr;
                const ct_value *v = ct_value_dict_at(entry, k, &key, nullptr);
                const StateSlot *slot = nullptr;
                for (const StateSlot &sl : slots)
                    if (key && std::strcmp(sl.name, key) == 0) slot = &sl;
                if (!slot)
                    fail(CT_EFORMAT, where + " has the key '" + (key ? key : "<int>") + "', which " +
                                         kind_name(o->kind) + " does not use");
                if (ct_value_kind_of(v) == CT_VALUE_NONE) continue;  // an absent buffer
                const bool is_step = std::strcmp(key, "step") == 0;
                s.*(slot->field) = load_tensor(o->params[i], v, is_step, id_fused[id], where + "['" + key + "']",
                                               std::strcmp(key, "mu_product") == 0);
            }
            // An empty entry is a parameter not stepped yet (it starts
            // afresh); one with anything in it must hold all it needs.
            if (ct_value_len(entry) == 0) continue;
            for (const char *name : required) {
                const StateSlot *slot = nullptr;
                for (const StateSlot &sl : slots)
                    if (std::strcmp(sl.name, name) == 0) slot = &sl;
                if (slot && !(s.*(slot->field)).defined())
                    fail(CT_EFORMAT, where + " has no '" + name + "' (" + kind_name(o->kind) + " keeps " +
                                         listed(required) + " for each parameter it has stepped)");
            }
        }

        // Commit: nothing below can fail.
        o->groups.swap(groups);
        o->state.swap(state);
        o->state_order.swap(order);
        std::swap(o->lbfgs, lbfgs);
        return CT_OK;
    } catch (...) {
        return ct::fail_exception(__func__);
    }
}

