// shim/module.cpp — modules (torch.nn.Module's model in C): the tree of
// named parameters, buffers and children (module.h says who owns what),
// listings, calls and forwards (each built-in layer's forward is its
// family's file's), Sequential, state dicts, train/eval and device/dtype
// moves. The built-in layers are in layers_*.cpp, gradient clipping in
// nn_utils.cpp.
#include "module.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <c10/core/GradMode.h>

#include "ctrial/value.h"

using ct::Failure;
using namespace ct::nn;

namespace {

ct_tensor *const kNoTensors[1] = {nullptr};

}  // namespace

namespace ct::nn {

// ---- small helpers ------------------------------------------------------------

// Like ct::check for tensors: a NULL module keeps a pending error (a failed
// constructor earlier in the chain) or records one.
bool check_module(const ct_module *m, const char *fn, const char *name) {
    if (m) return true;
    if (!ct::error_pending()) ct::fail(CT_EINVAL, fn, std::string("argument '") + name + "' is NULL");
    return false;
}

std::string shape_str(const at::Tensor &t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
}

std::string torch_size(const at::Tensor &t) { return "torch.Size(" + shape_str(t) + ")"; }

std::string fmt_double(double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// repr(float) in Python: the shortest text that reads back as v, with ".0"
// on integral values ("2.0", "0.01", "1e-05").
std::string py_float(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    std::string s(buf);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
}

// "(4, 5)", "(4,)": a Python tuple of ints.
std::string py_tuple(const std::vector<int64_t> &v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + (v.size() == 1 ? ",)" : ")");
}

const char *py_bool(bool b) { return b ? "True" : "False"; }

// Python-like repr of a module (for messages).
std::string repr(const ct_module *m) {
    const Config &c = m->cfg;
    auto n = [](int64_t v) { return std::to_string(v); };
    switch (m->kind) {
    case Kind::Linear:
        return "Linear(in_features=" + n(c.in) + ", out_features=" + n(c.out) +
               ", bias=" + (m->bias ? "True" : "False") + ")";
    case Kind::Conv1d:
    case Kind::Conv2d:
    case Kind::Conv3d:
        return m->type + "(" + n(c.in) + ", " + n(c.out) + ", kernel_size=" + n(c.kernel) +
               ", stride=" + n(c.stride) + ", padding=" + n(c.padding) + ")";
    case Kind::ConvTranspose1d:
    case Kind::ConvTranspose2d:
        return m->type + "(" + n(c.in) + ", " + n(c.out) + ", kernel_size=" + n(c.kernel) +
               ", stride=" + n(c.stride) + ", padding=" + n(c.padding) +
               (c.output_padding ? ", output_padding=" + n(c.output_padding) : std::string()) + ")";
    case Kind::BatchNorm1d:
    case Kind::BatchNorm2d:
        return m->type + "(" + n(c.in) + ", eps=" + fmt_double(c.eps) + ")";
    case Kind::LayerNorm:
        if (c.sizes.size() == 1) return m->type + "(" + n(c.in) + ", eps=" + fmt_double(c.eps) + ")";
        return "LayerNorm(" + py_tuple(c.sizes) + ", eps=" + fmt_double(c.eps) +
               ", elementwise_affine=" + py_bool(c.affine) + ")";
    case Kind::GroupNorm:
        return "GroupNorm(" + n(c.groups_norm) + ", " + n(c.in) + ", eps=" + fmt_double(c.eps) +
               ", affine=" + py_bool(c.affine) + ")";
    case Kind::InstanceNorm1d:
    case Kind::InstanceNorm2d:
        return m->type + "(" + n(c.in) + ", eps=" + fmt_double(c.eps) + ", momentum=" +
               (std::isnan(c.momentum) ? std::string("None") : fmt_double(c.momentum)) +
               ", affine=" + py_bool(c.affine) + ", track_running_stats=" + py_bool(c.track) + ")";
    case Kind::AvgPool1d:
    case Kind::AvgPool2d:
        return m->type + "(kernel_size=" + n(c.kernel) + ", stride=" + n(c.stride) + ", padding=" + n(c.padding) + ")";
    case Kind::AdaptiveAvgPool1d: return "AdaptiveAvgPool1d(output_size=" + n(c.sizes[0]) + ")";
    case Kind::AdaptiveAvgPool2d:
    case Kind::AdaptiveMaxPool2d: return m->type + "(output_size=" + py_tuple(c.sizes) + ")";
    case Kind::Upsample:
        return "Upsample(" + (c.sizes.empty() ? "scale_factor=" + py_float(c.scale) : "size=" + py_tuple(c.sizes)) +
               ", mode='" + c.mode + "')";
    case Kind::Dropout1d:
    case Kind::Dropout2d: return m->type + "(p=" + fmt_double(c.p) + ")";
    case Kind::Softmax:
    case Kind::LogSoftmax: return m->type + "(dim=" + std::to_string(c.dim) + ")";
    case Kind::LeakyReLU: return "LeakyReLU(negative_slope=" + py_float(c.slope) + ")";
    case Kind::ELU: return "ELU(alpha=" + py_float(c.slope) + ")";
    case Kind::PReLU: return "PReLU(num_parameters=" + n(c.in) + ")";
    case Kind::EmbeddingBag: return "EmbeddingBag(" + n(c.in) + ", " + n(c.out) + ", mode='" + c.mode + "')";
    case Kind::Embedding: return "Embedding(" + n(c.in) + ", " + n(c.out) + ")";
    case Kind::Dropout: return "Dropout(p=" + fmt_double(c.p) + ")";
    case Kind::MaxPool2d: return "MaxPool2d(kernel_size=" + n(c.kernel) + ")";
    default: return m->type;
    }
}

// "features.0" for a module inside a tree, "" for a root.
std::string path_of(const ct_module *m) {
    std::string path;
    for (; m->parent; m = m->parent) {
        for (const Child &c : m->parent->children)
            if (c.m == m) {
                path = path.empty() ? c.name : c.name + "." + path;
                break;
            }
    }
    return path;
}

std::string where(const ct_module *m) {
    std::string p = path_of(m);
    return p.empty() ? repr(m) : "'" + p + "' " + repr(m);
}

// A subtree changed: every cache on the way to the root is stale.
void touch(ct_module *m) {
    for (; m; m = m->parent) m->version++;
}

const ct_module *root_of(const ct_module *m) {
    while (m->parent) m = m->parent;
    return m;
}

bool tree_holds_handle(const ct_module *m, const ct_tensor *h) {
    for (const Slot &s : m->params)
        if (s.h == h) return true;
    for (const Slot &s : m->buffers)
        if (s.h == h) return true;
    for (const Child &c : m->children)
        if (tree_holds_handle(c.m, h)) return true;
    return false;
}

bool name_taken(const ct_module *m, const std::string &name) {
    for (const Slot &s : m->params)
        if (s.name == name) return true;
    for (const Slot &s : m->buffers)
        if (s.name == name) return true;
    for (const Child &c : m->children)
        if (c.name == name) return true;
    return false;
}

// Python's rules for attribute names of parameters, buffers and children.
void check_name(const ct_module *m, const char *name, const char *what) {
    if (!name) throw Failure{CT_EINVAL, std::string(what) + " name is NULL"};
    std::string s(name);
    if (s.empty()) throw Failure{CT_EINVAL, std::string(what) + " name can't be empty string \"\""};
    if (s.find('.') != std::string::npos)
        throw Failure{CT_EINVAL, std::string(what) + " name can't contain \".\" (got \"" + s + "\")"};
    if (name_taken(m, s))
        throw Failure{CT_EINVAL, "attribute '" + s + "' already exists in " + m->type};
}

// ---- listings -------------------------------------------------------------------

void collect_params(const ct_module *m, const std::string &prefix, Listing &out,
                    std::unordered_set<const void *> &seen) {
    for (const Slot &s : m->params) {
        // named_parameters() drops repeats of the same tensor (tied weights).
        if (!seen.insert(s.h->t.unsafeGetTensorImpl()).second) continue;
        out.names.push_back(prefix + s.name);
        out.handles.push_back(s.h);
    }
    for (const Child &c : m->children) collect_params(c.m, prefix + c.name + ".", out, seen);
}

void collect_state(const ct_module *m, const std::string &prefix, Listing &out) {
    for (const Slot &s : m->params) {
        out.names.push_back(prefix + s.name);
        out.handles.push_back(s.h);
    }
    for (const Slot &s : m->buffers) {
        if (!s.persistent) continue;
        out.names.push_back(prefix + s.name);
        out.handles.push_back(s.h);
    }
    for (const Child &c : m->children) collect_state(c.m, prefix + c.name + ".", out);
}

// Throws only std::bad_alloc.
const Listing &params_of(const ct_module *m) {
    Listing &l = m->param_cache;
    if (l.version != m->version) {
        Listing fresh;
        std::unordered_set<const void *> seen;
        collect_params(m, "", fresh, seen);
        fresh.version = m->version;
        l = std::move(fresh);
    }
    return l;
}

const Listing &state_of(const ct_module *m) {
    Listing &l = m->state_cache;
    if (l.version != m->version) {
        Listing fresh;
        collect_state(m, "", fresh);
        fresh.version = m->version;
        l = std::move(fresh);
    }
    return l;
}

// Every parameter and buffer handle of the subtree, including repeats and
// non-persistent buffers (what module._apply visits).
void collect_all(ct_module *m, std::vector<ct_tensor *> &params, std::vector<ct_tensor *> &buffers) {
    for (const Slot &s : m->params) params.push_back(s.h);
    for (const Slot &s : m->buffers) buffers.push_back(s.h);
    for (const Child &c : m->children) collect_all(c.m, params, buffers);
}

// ---- construction -------------------------------------------------------------------

ct_module *new_module(const char *type, Kind kind) {
    auto *m = new ct_module();
    m->type = type;
    m->kind = kind;
    return m;
}

void destroy(ct_module *m) {
    // User data first: it may hold borrowed pointers to the children, which
    // are still alive while user_free runs.
    if (m->user_free) m->user_free(m->user);
    for (Child &c : m->children) destroy(c.m);
    for (Slot &s : m->params) ct_tensor_free(s.h);
    for (Slot &s : m->buffers) ct_tensor_free(s.h);
    delete m;
}

// Registers a tensor made here (built-in layers); throws only bad_alloc, after
// which the caller destroys the module and with it the handles so far.
ct_tensor *own_param(ct_module *m, const char *name, at::Tensor t) {
    t.set_requires_grad(true);
    ct_tensor *h = ct::wrap_unscoped(std::move(t));
    try {
        m->params.push_back(Slot{name, h, true});
    } catch (...) {
        ct_tensor_free(h);
        throw;
    }
    touch(m);
    return h;
}

ct_tensor *own_buffer(ct_module *m, const char *name, at::Tensor t, bool persistent) {
    ct_tensor *h = ct::wrap_unscoped(std::move(t));
    try {
        m->buffers.push_back(Slot{name, h, persistent});
    } catch (...) {
        ct_tensor_free(h);
        throw;
    }
    touch(m);
    return h;
}

// torch.nn.init._calculate_fan_in_and_fan_out(w)[0]
int64_t fan_in_of(const at::Tensor &w) {
    int64_t receptive = 1;
    for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
    return w.size(1) * receptive;
}

// init.kaiming_uniform_(w, a=math.sqrt(5)) with Python's double arithmetic,
// step by step, so that the bound (and the RNG draw) is bit-identical.
void kaiming_uniform_sqrt5(at::Tensor &w) {
    if (w.numel() == 0) return;  // Python warns and returns without drawing
    const double a = std::sqrt(5.0);
    const double gain = std::sqrt(2.0 / (1 + std::pow(a, 2.0)));  // calculate_gain("leaky_relu", a)
    const double stdv = gain / std::sqrt(static_cast<double>(fan_in_of(w)));
    const double bound = std::sqrt(3.0) * stdv;
    w.uniform_(-bound, bound);
}

void check_nonneg(int64_t v, const char *what) {
    if (v < 0) throw Failure{CT_EINVAL, std::string(what) + " must be >= 0, got " + std::to_string(v)};
}

void check_positive(int64_t v, const char *what) {
    if (v <= 0) throw Failure{CT_EINVAL, std::string(what) + " must be > 0, got " + std::to_string(v)};
}

ct_module *stateless(const char *fn, const char *type, Kind kind) {
    return build(fn, type, kind, [](ct_module *) {});
}

}  // namespace ct::nn

namespace {

// The forward of a built-in layer: its family's.
at::Tensor builtin_forward(ct_module *m, const at::Tensor &x) {
    switch (m->kind) {
    case Kind::Linear:
    case Kind::Embedding:
    case Kind::EmbeddingBag: return linear_forward(m, x);
    case Kind::Conv1d:
    case Kind::Conv2d:
    case Kind::Conv3d:
    case Kind::ConvTranspose1d:
    case Kind::ConvTranspose2d: return conv_forward(m, x);
    case Kind::BatchNorm1d:
    case Kind::BatchNorm2d:
    case Kind::LayerNorm:
    case Kind::GroupNorm:
    case Kind::InstanceNorm1d:
    case Kind::InstanceNorm2d: return norm_forward(m, x);
    case Kind::MaxPool2d:
    case Kind::AvgPool1d:
    case Kind::AvgPool2d:
    case Kind::AdaptiveAvgPool1d:
    case Kind::AdaptiveAvgPool2d:
    case Kind::AdaptiveMaxPool2d:
    case Kind::Upsample: return pool_forward(m, x);
    case Kind::User:
    case Kind::Sequential: break;
    default: return activation_forward(m, x);
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
}

// ---- state dict helpers -------------------------------------------------------------------


std::string quoted_list(const std::vector<std::string> &names) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
    return s;
}

// The tensors of a state dict by key, in the dict's order; integer keys are
// kept (as text) only to be reported as unexpected.
struct SdEntry {
    std::string key;
    const ct_value *v;
};

std::vector<SdEntry> sd_entries(const ct_value *sd) {
    std::vector<SdEntry> out;
    size_t n = ct_value_len(sd);
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const char *skey = nullptr;
        int64_t ikey = 0;
        const ct_value *v = ct_value_dict_at(sd, i, &skey, &ikey);
        out.push_back(SdEntry{skey ? std::string(skey) : std::to_string(ikey), v});
    }
    return out;
}

}  // namespace

// ============================================================================
// building modules
// ============================================================================

extern "C" ct_module *ct_nn_module(const char *type_name, ct_forward_fn forward, void *user,
                                   void (*user_free)(void *user)) {
    try {
        ct_module *m = new_module(type_name && *type_name ? type_name : "Module", Kind::User);
        m->forward = forward;
        m->user = user;
        m->user_free = user_free;
        return m;
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" ct_module *ct_nn_module_value(const char *type_name, ct_forward_value_fn forward, void *user,
                                         void (*user_free)(void *user)) {
    try {
        ct_module *m = new_module(type_name && *type_name ? type_name : "Module", Kind::User);
        m->forward_value = forward;
        m->user = user;
        m->user_free = user_free;
        return m;
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void *ct_nn_user(const ct_module *m) { return m ? m->user : nullptr; }

// Shared by add_parameter / add_buffer: takes ownership of t on success and
// frees it on failure, except when t is not the caller's to give (freed, or
// already registered in this tree).
static ct_tensor *add_tensor(ct_module *m, const char *name, ct_tensor *t, bool is_param,
                             bool persistent, const char *fn) {
    if (!t) {
        if (!ct::error_pending()) ct::fail(CT_EINVAL, fn, "argument 't' is NULL");
        return nullptr;
    }
    if (t->magic != ct::kLive) {
        ct::fail(CT_ESTATE, fn, "argument 't' is a freed tensor");
        return nullptr;
    }
    if (!m) {
        check_module(m, fn, "m");
        ct_tensor_free(t);
        return nullptr;
    }
    if (tree_holds_handle(root_of(m), t)) {
        ct::fail(CT_EINVAL, fn, std::string("tensor for '") + (name ? name : "") +
                                    "' is already registered in this module tree (use ct_alias to tie weights)");
        return nullptr;
    }
    try {
        check_name(m, name, is_param ? "parameter" : "buffer");
        if (!t->t.defined()) throw Failure{CT_ESTATE, "argument 't' is an undefined tensor"};
        at::Tensor value = t->t;
        if (is_param) {
            // nn.Parameter(t): a leaf sharing t's storage.
            if (!value.is_floating_point() && !value.is_complex())
                throw Failure{CT_EDTYPE, std::string("parameter '") + name +
                                             "': only floating point and complex tensors can require gradients, got " +
                                             ct::describe(value)};
            // A leaf that already requires grad is kept as is, so that
            // registering ct_alias(p) ties weights (one tensor, two names).
            if (!value.is_leaf() || !value.requires_grad()) value = value.detach().requires_grad_(true);
        }
        Slot slot{name, t, persistent};
        if (is_param) m->params.push_back(std::move(slot));
        else m->buffers.push_back(std::move(slot));
        ct::unlink_from_scope(t);
        t->t = std::move(value);
        touch(m);
        return t;
    } catch (...) {
        ct::fail_exception(fn);
        ct_tensor_free(t);
        return nullptr;
    }
}

extern "C" ct_tensor *ct_nn_add_parameter(ct_module *m, const char *name, ct_tensor *t) {
    return add_tensor(m, name, t, true, true, __func__);
}

extern "C" ct_tensor *ct_nn_add_buffer(ct_module *m, const char *name, ct_tensor *t, bool persistent) {
    return add_tensor(m, name, t, false, persistent, __func__);
}

extern "C" ct_module *ct_nn_add_module(ct_module *m, const char *name, ct_module *child) {
    if (!child) {
        check_module(child, __func__, "child");
        return nullptr;
    }
    // A child that already belongs somewhere (or is m's own root) is not the
    // caller's to give away: refuse without freeing it.
    if (child->parent) {
        ct::fail(CT_EINVAL, __func__, "module " + child->type + " already has a parent (at '" + path_of(child) + "')");
        return nullptr;
    }
    if (m && root_of(m) == child) {
        ct::fail(CT_EINVAL, __func__, "adding " + child->type + " under itself would make a cycle");
        return nullptr;
    }
    if (!m) {
        check_module(m, __func__, "m");
        destroy(child);
        return nullptr;
    }
    try {
        check_name(m, name, "module");
        m->children.push_back(Child{name, child});
        child->parent = m;
        touch(m);
        return child;
    } catch (...) {
        ct::fail_exception(__func__);
        destroy(child);
        return nullptr;
    }
}

// ---- Sequential ----------------------------------------------------------------------

extern "C" ct_module *ct_nn_sequential(int n, ct_module *const *modules) {
    if (n < 0 || (n > 0 && !modules)) {
        ct::fail(CT_EINVAL, __func__, n < 0 ? "negative module count" : "module array is NULL");
        return nullptr;
    }
    // Steals every module, also on failure. `done` holds the modules already
    // dealt with (added, or freed by ct_nn_add_module), so that a module given
    // twice is never freed twice.
    std::unordered_set<const ct_module *> done;
    auto free_rest = [&](int from) {
        for (int j = from; j < n; ++j) {
            ct_module *c = modules[j];
            if (c && !c->parent && done.insert(c).second) destroy(c);
        }
    };
    ct_module *seq = nullptr;
    try {
        for (int i = 0; i < n; ++i)
            if (!modules[i]) throw Failure{CT_EINVAL, "module " + std::to_string(i) + " is NULL"};
        seq = new_module("Sequential", Kind::Sequential);
    } catch (...) {
        // A NULL module usually comes from a failed constructor: keep its error.
        if (!ct::error_pending()) ct::fail_exception(__func__);
        free_rest(0);
        return nullptr;
    }
    for (int i = 0; i < n; ++i) {
        done.insert(modules[i]);
        if (!ct_nn_add_module(seq, std::to_string(i).c_str(), modules[i])) {
            free_rest(i + 1);
            destroy(seq);
            return nullptr;
        }
    }
    return seq;
}

extern "C" ct_module *ct_nn_sequential_append(ct_module *seq, ct_module *m) {
    if (seq && seq->kind != Kind::Sequential) {
        ct::fail(CT_EINVAL, __func__, "append needs a Sequential, got " + seq->type);
        if (m && !m->parent && m != root_of(seq)) destroy(m);
        return nullptr;
    }
    return ct_nn_add_module(seq, seq ? std::to_string(seq->children.size()).c_str() : "0", m);
}

// ============================================================================
// using modules
// ============================================================================

namespace {

// A value module's forward(args, kwargs) with the checks every call makes:
// a NEW value, or NULL with an error naming the module.
ct_value *call_forward_value(ct_module *m, const ct_value *args, const ct_value *kwargs) {
    ct_value *y = m->forward_value(m, args, kwargs);
    if (!y && !ct::error_pending())
        ct::fail(CT_ETRIAL, "ct_nn_call", "forward of " + where(m) + " returned NULL without setting an error");
    return y;
}

// ct_nn_forward(m, x) on a value module: forward((x,), {}) must give a tensor.
ct_tensor *forward_value_as_tensor(ct_module *m, const ct_tensor *x) {
    ct_value *args = ct_value_tuple(), *kwargs = ct_value_dict();
    ct_value *y = nullptr;
    ct_tensor *out = nullptr;
    if (args && kwargs && ct_value_list_append(args, ct_value_tensor(ct_alias(x))) == CT_OK)
        y = call_forward_value(m, args, kwargs);
    else if (!ct::error_pending())
        ct::fail(CT_ENOMEM, "ct_nn_forward", "out of host memory");
    if (y && ct_value_kind_of(y) == CT_VALUE_TENSOR) out = ct_alias(ct_value_get_tensor(y));
    else if (y)
        ct::fail(CT_EINVAL, "ct_nn_forward",
                 "forward of " + where(m) + " returned a " + ct_value_kind_name(ct_value_kind_of(y)) + ", not a tensor: use ct_nn_call");
    ct_value_free(y);
    ct_value_free(args);
    ct_value_free(kwargs);
    return out;
}

// The first NULL or freed tensor leaf in v, as tensor inputs are checked.
bool check_leaves(const ct_value *v, const char *fn) {
    switch (ct_value_kind_of(v)) {
    case CT_VALUE_TENSOR: return ct::check(ct_value_get_tensor(v), fn, "a tensor in args");
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        for (size_t i = 0; i < ct_value_len(v); i++)
            if (!check_leaves(ct_value_list_get(v, i), fn)) return false;
        return true;
    case CT_VALUE_DICT:
        for (size_t i = 0; i < ct_value_len(v); i++) {
            const char *sk;
            int64_t ik;
            if (!check_leaves(ct_value_dict_at(v, i, &sk, &ik), fn)) return false;
        }
        return true;
    default: return true;
    }
}

ct_value *call_module(ct_module *m, const ct_value *args, const ct_value *kwargs);

// A Sequential: the first child gets args and kwargs, each next one the
// result before it as its one argument.
ct_value *call_sequential(ct_module *m, const ct_value *args, const ct_value *kwargs) {
    if (m->children.empty()) {
        if (ct_value_len(args) == 1 && ct_value_len(kwargs) == 0) return ct_value_copy(ct_value_list_get(args, 0), false);
        ct::fail(CT_EINVAL, "ct_nn_call", "an empty " + where(m) + " takes one argument");
        return nullptr;
    }
    ct_value *y = call_module(m->children[0].m, args, kwargs);
    for (size_t i = 1; y && i < m->children.size(); i++) {
        ct_value *one = ct_value_tuple(), *none = ct_value_dict();
        ct_value *next = nullptr;
        if (one && none && ct_value_list_append(one, y) == CT_OK) {
            y = nullptr; // the tuple owns it now
            next = call_module(m->children[i].m, one, none);
        } else if (!ct::error_pending()) {
            ct::fail(CT_ENOMEM, "ct_nn_call", "out of host memory");
        }
        ct_value_free(y);
        ct_value_free(one);
        ct_value_free(none);
        y = next;
    }
    return y;
}

ct_value *call_module(ct_module *m, const ct_value *args, const ct_value *kwargs) {
    if (m->kind == Kind::Sequential) return call_sequential(m, args, kwargs);
    if (m->kind == Kind::User && m->forward_value) return call_forward_value(m, args, kwargs);
    if (m->kind == Kind::EmbeddingBag) return call_embedding_bag(m, args, kwargs);
    // A tensor module: one tensor, no keywords.
    const ct_value *x = ct_value_len(args) == 1 ? ct_value_list_get(args, 0) : nullptr;
    if (!x || ct_value_kind_of(x) != CT_VALUE_TENSOR || ct_value_len(kwargs) != 0) {
        ct::fail(CT_EINVAL, "ct_nn_call",
                 where(m) + " takes one tensor and no keyword arguments (its forward is on a tensor); got " +
                     std::to_string(ct_value_len(args)) + " argument(s) and " + std::to_string(ct_value_len(kwargs)) +
                     " keyword(s)");
        return nullptr;
    }
    ct_tensor *y = ct_nn_forward(m, ct_value_get_tensor(x));
    return y ? ct_value_tensor(y) : nullptr;
}

}  // namespace

extern "C" ct_value *ct_nn_call(ct_module *m, const ct_value *args, const ct_value *kwargs) {
    if (!check_module(m, __func__, "m")) return nullptr;
    if (args && ct_value_kind_of(args) != CT_VALUE_TUPLE && ct_value_kind_of(args) != CT_VALUE_LIST) {
        ct::fail(CT_EINVAL, __func__, std::string("args is a ") + ct_value_kind_name(ct_value_kind_of(args)) + ", not a tuple or list");
        return nullptr;
    }
    if (kwargs && ct_value_kind_of(kwargs) != CT_VALUE_DICT) {
        ct::fail(CT_EINVAL, __func__, std::string("kwargs is a ") + ct_value_kind_name(ct_value_kind_of(kwargs)) + ", not a dict");
        return nullptr;
    }
    if ((args && !check_leaves(args, __func__)) || (kwargs && !check_leaves(kwargs, __func__))) return nullptr;
    ct_value *no_args = args ? nullptr : ct_value_tuple(), *no_kwargs = kwargs ? nullptr : ct_value_dict();
    ct_value *y = nullptr;
    if ((args || no_args) && (kwargs || no_kwargs)) y = call_module(m, args ? args : no_args, kwargs ? kwargs : no_kwargs);
    else ct::fail(CT_ENOMEM, __func__, "out of host memory");
    ct_value_free(no_args);
    ct_value_free(no_kwargs);
    return y;
}

extern "C" ct_tensor *ct_nn_forward(ct_module *m, const ct_tensor *x) {
    if (!check_module(m, __func__, "m")) return nullptr;
    CT_IN(x);
    if (m->kind == Kind::Sequential) {
        // Intermediate handles are freed as soon as the next layer has used
        // them; autograd keeps what it needs on its own.
        const ct_tensor *h = x;
        for (const Child &c : m->children) {
            ct_tensor *next = ct_nn_forward(c.m, h);
            if (h != x && h != next) ct_tensor_free(const_cast<ct_tensor *>(h));
            if (!next) return nullptr;
            h = next;
        }
        if (h == x) return ct::op(__func__, [&] { return x->t; });  // empty Sequential: a new handle
        return const_cast<ct_tensor *>(h);
    }
    if (m->kind == Kind::User && m->forward_value) return forward_value_as_tensor(m, x);
    if (m->kind == Kind::User) {
        if (!m->forward) {
            ct::fail(CT_ENOTSUP, __func__, where(m) + " has no forward (it is a container)");
            return nullptr;
        }
        ct_tensor *y = m->forward(m, x);
        if (!y) {
            if (!ct::error_pending())
                ct::fail(CT_ETRIAL, __func__, "forward of " + where(m) + " returned NULL without setting an error");
            return nullptr;
        }
        // The contract is a new tensor; a forward that hands back its input
        // (identity) gets a fresh handle so the caller may free both.
        if (y == x) return ct::op(__func__, [&] { return x->t; });
        return y;
    }
    try {
        return ct::wrap(builtin_forward(m, x->t));
    } catch (...) {
        std::string fn;
        try {
            fn = std::string(__func__) + ": " + where(m);
        } catch (...) {
        }
        ct::fail_exception(fn.empty() ? __func__ : fn.c_str());
        return nullptr;
    }
}

// ---- calls written as Python's: m(x, key_padding_mask=pad) -------------------

namespace {

// One argument of a call format: "code" or "name=code".
struct FormatArg {
    std::string name; // empty: positional
    char code;        // t i f b s n v
};

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }

// Parses fmt into out. On a malformed format records CT_EINVAL quoting it
// and naming the argument and the character (1-based) where it went wrong.
bool parse_call_format(const char *fn, const char *fmt, std::vector<FormatArg> &out) {
    if (!fmt) {
        ct::fail(CT_EINVAL, fn, "argument 'format' is NULL");
        return false;
    }
    const std::string f = fmt;
    auto bad = [&](size_t at, size_t arg, const std::string &why) {
        ct::fail(CT_EINVAL, fn,
                 "format \"" + f + "\": " + why + " at character " + std::to_string(at + 1) + " (argument " +
                     std::to_string(arg) + "); an argument is a code or name=code, codes t (tensor), i (int64_t), "
                     "f (double), b (bool), s (string), n (None), v (value)");
        return false;
    };
    size_t i = 0;
    while (i < f.size() && is_space(f[i])) i++;
    if (i == f.size()) return true; // "" or blanks: no arguments
    std::unordered_set<std::string> names;
    for (size_t arg = 1;; arg++) {
        while (i < f.size() && is_space(f[i])) i++;
        const size_t start = i;
        size_t end = f.find(',', i);
        if (end == std::string::npos) end = f.size();
        size_t last = end; // one past the argument's last non-blank
        while (last > start && is_space(f[last - 1])) last--;
        if (last == start) return bad(start, arg, "an empty argument");
        FormatArg a;
        size_t eq = f.find('=', start);
        size_t code_at = start;
        if (eq != std::string::npos && eq < last) {
            size_t name_end = eq;
            while (name_end > start && is_space(f[name_end - 1])) name_end--;
            if (name_end == start) return bad(start, arg, "an empty keyword name");
            a.name = f.substr(start, name_end - start);
            for (size_t k = 0; k < a.name.size(); k++)
                if (!(k == 0 ? is_name_start(a.name[k]) : is_name_char(a.name[k])))
                    return bad(start + k, arg, "keyword '" + a.name + "' is not a Python identifier");
            if (!names.insert(a.name).second) return bad(start, arg, "a duplicate keyword '" + a.name + "'");
            code_at = eq + 1;
            while (code_at < last && is_space(f[code_at])) code_at++;
            if (code_at == last) return bad(code_at, arg, "keyword '" + a.name + "' has no type code");
        } else if (!names.empty()) {
            return bad(start, arg, "a positional argument after a keyword argument");
        }
        const std::string code = f.substr(code_at, last - code_at);
        if (code.size() != 1 || !std::strchr("tifbsnv", code[0]))
            return bad(code_at, arg, "an unknown type code '" + code + "'");
        a.code = code[0];
        out.push_back(std::move(a));
        if (end == f.size()) return true;
        i = end + 1;
    }
}

// What one vararg of code `c` becomes: a NEW value, or NULL + error (a NULL
// tensor or value keeps a pending error, as the ops do).
ct_value *format_value(const char *fn, char c, const std::string &what, va_list *ap) {
    switch (c) {
    case 't': {
        const ct_tensor *t = va_arg(*ap, const ct_tensor *);
        if (!ct::check(t, fn, what.c_str())) return nullptr;
        // Another handle on the caller's tensor (ct_alias): no copy, and the
        // value frees only its own handle.
        return ct_value_tensor(ct::wrap_unscoped(t->t));
    }
    case 'i': return ct_value_int(va_arg(*ap, int64_t));
    case 'f': return ct_value_float(va_arg(*ap, double));
    case 'b': return ct_value_bool(va_arg(*ap, int) != 0);
    case 's': {
        const char *s = va_arg(*ap, const char *);
        if (!s) ct::fail(CT_EINVAL, fn, "argument '" + what + "' (s) is NULL: pass None with n");
        return s ? ct_value_str(s) : nullptr;
    }
    case 'n': return ct_value_none();
    default: { // 'v'
        const ct_value *v = va_arg(*ap, const ct_value *);
        if (!v && !ct::error_pending()) ct::fail(CT_EINVAL, fn, "argument '" + what + "' (v) is NULL");
        return v ? ct_value_copy(v, false) : nullptr; // tensors shared, not copied
    }
    }
}

// m(*args, **kwargs) with the arguments the format describes: a NEW value,
// or NULL + error.
ct_value *call_format(const char *fn, ct_module *m, const char *fmt, va_list *ap) {
    if (!check_module(m, fn, "m")) return nullptr;
    try {
        std::vector<FormatArg> spec;
        if (!parse_call_format(fn, fmt, spec)) return nullptr;
        using Value = std::unique_ptr<ct_value, void (*)(ct_value *)>;
        Value args(ct_value_tuple(), ct_value_free), kwargs(ct_value_dict(), ct_value_free);
        bool ok = args && kwargs;
        for (size_t i = 0; ok && i < spec.size(); i++) {
            const FormatArg &a = spec[i];
            std::string what = a.name.empty() ? "args[" + std::to_string(i) + "]" : a.name;
            ct_value *v = format_value(fn, a.code, what, ap);
            if (!v) ok = false;
            else if (a.name.empty()) ok = ct_value_list_append(args.get(), v) == CT_OK; // steals v
            else ok = ct_value_dict_set(kwargs.get(), a.name.c_str(), v) == CT_OK;
        }
        if (!ok) {
            if (!ct::error_pending()) ct::fail(CT_ENOMEM, fn, "out of host memory");
            return nullptr;
        }
        return ct_nn_call(m, args.get(), kwargs.get());
    } catch (...) {
        ct::fail_exception(fn);
        return nullptr;
    }
}

}  // namespace

extern "C" ct_value *ct_nn_callf(ct_module *m, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    ct_value *y = call_format(__func__, m, format, &ap);
    va_end(ap);
    return y;
}

extern "C" ct_tensor *ct_nn_forwardf(ct_module *m, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    ct_value *y = call_format(__func__, m, format, &ap);
    va_end(ap);
    if (!y) return nullptr;
    ct_tensor *out = nullptr;
    if (ct_value_kind_of(y) == CT_VALUE_TENSOR) {
        out = ct_alias(ct_value_get_tensor(y)); // a handle in the current scope
    } else {
        try {
            ct::fail(CT_EINVAL, __func__,
                     "forward of " + where(m) + " returned a " + ct_value_kind_name(ct_value_kind_of(y)) +
                         ", not a tensor: use ct_nn_callf");
        } catch (...) {
            ct::fail_exception(__func__);
        }
    }
    ct_value_free(y);
    return out;
}

extern "C" const char *ct_nn_type(const ct_module *m) { return m ? m->type.c_str() : ""; }

// Walks a dotted path of children; throws naming the first missing part.
static const ct_module *walk(const ct_module *m, const std::string &path) {
    size_t start = 0;
    while (start < path.size()) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const ct_module *next = nullptr;
        for (const Child &c : m->children)
            if (c.name == part) {
                next = c.m;
                break;
            }
        if (!next) {
            std::string have;
            for (const Child &c : m->children) have += (have.empty() ? "" : ", ") + c.name;
            throw Failure{CT_EINVAL, m->type + " has no child '" + part + "' (in path '" + path + "'; children: " +
                                         (have.empty() ? "none" : have) + ")"};
        }
        m = next;
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return m;
}

extern "C" ct_module *ct_nn_child(const ct_module *m, const char *path) {
    if (!check_module(m, __func__, "m")) return nullptr;
    if (!path) {
        ct::fail(CT_EINVAL, __func__, "argument 'path' is NULL");
        return nullptr;
    }
    try {
        return const_cast<ct_module *>(walk(m, path));
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" ct_tensor *ct_nn_get(const ct_module *m, const char *name) {
    if (!check_module(m, __func__, "m")) return nullptr;
    if (!name) {
        ct::fail(CT_EINVAL, __func__, "argument 'name' is NULL");
        return nullptr;
    }
    try {
        std::string full(name);
        size_t dot = full.rfind('.');
        const ct_module *owner = dot == std::string::npos ? m : walk(m, full.substr(0, dot));
        std::string leaf = dot == std::string::npos ? full : full.substr(dot + 1);
        for (const Slot &s : owner->params)
            if (s.name == leaf) return s.h;
        for (const Slot &s : owner->buffers)
            if (s.name == leaf) return s.h;
        std::string have;
        for (const Slot &s : owner->params) have += (have.empty() ? "" : ", ") + s.name;
        for (const Slot &s : owner->buffers) have += (have.empty() ? "" : ", ") + s.name;
        throw Failure{CT_EINVAL, owner->type + " has no parameter or buffer '" + leaf + "' (looking up '" + full +
                                     "'; it has: " + (have.empty() ? "none" : have) + ")"};
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" size_t ct_nn_num_params(const ct_module *m) {
    if (!m) return 0;
    try {
        return params_of(m).handles.size();
    } catch (...) {
        ct::fail_exception(__func__);
        return 0;
    }
}

static ct_tensor *listing_at(const Listing &l, size_t i, const char **name, const char *fn) {
    if (i >= l.handles.size()) {
        ct::fail(CT_EINDEX, fn, "index " + std::to_string(i) + " out of range (" + std::to_string(l.handles.size()) +
                                    " entries)");
        return nullptr;
    }
    if (name) *name = l.names[i].c_str();
    return l.handles[i];
}

extern "C" ct_tensor *ct_nn_param_at(const ct_module *m, size_t i, const char **name) {
    if (!check_module(m, __func__, "m")) return nullptr;
    try {
        return listing_at(params_of(m), i, name, __func__);
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" ct_tensor *const *ct_nn_parameters(const ct_module *m, size_t *n) {
    if (n) *n = 0;
    if (!check_module(m, __func__, "m")) return nullptr;
    try {
        const Listing &l = params_of(m);
        if (n) *n = l.handles.size();
        // Never NULL on success, even for a module without parameters.
        return l.handles.empty() ? kNoTensors : l.handles.data();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" int64_t ct_nn_num_param_elements(const ct_module *m) {
    if (!check_module(m, __func__, "m")) return 0;
    try {
        int64_t total = 0;
        for (const ct_tensor *h : params_of(m).handles) total += h->t.numel();
        return total;
    } catch (...) {
        ct::fail_exception(__func__);
        return 0;
    }
}

extern "C" size_t ct_nn_state_size(const ct_module *m) {
    if (!m) return 0;
    try {
        return state_of(m).handles.size();
    } catch (...) {
        ct::fail_exception(__func__);
        return 0;
    }
}

extern "C" ct_tensor *ct_nn_state_at(const ct_module *m, size_t i, const char **name) {
    if (!check_module(m, __func__, "m")) return nullptr;
    try {
        return listing_at(state_of(m), i, name, __func__);
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" ct_value *ct_nn_state_dict(const ct_module *m) {
    if (!check_module(m, __func__, "m")) return nullptr;
    ct_value *dict = nullptr;
    try {
        const Listing &l = state_of(m);
        dict = ct_value_dict();
        if (!dict) throw std::bad_alloc();
        for (size_t i = 0; i < l.handles.size(); ++i) {
            // state_dict() holds param.detach(): same storage, no autograd.
            ct_value *v = ct_value_tensor(ct::wrap_unscoped(l.handles[i]->t.detach()));
            if (!v || ct_value_dict_set(dict, l.names[i].c_str(), v) != 0)
                throw Failure{ct::error_pending() ? ct_last_code() : CT_ENOMEM,
                              "adding '" + l.names[i] + "' to the state dict failed"};
        }
        return dict;
    } catch (...) {
        ct_value_free(dict);
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" int ct_nn_load_state_dict(ct_module *m, const ct_value *sd, bool strict) {
    if (!check_module(m, __func__, "m")) return ct_last_code();
    if (!sd) {
        if (!ct::error_pending()) ct::fail(CT_EINVAL, __func__, "argument 'sd' is NULL");
        return ct_last_code();
    }
    return ct::status(__func__, [&] {
        if (ct_value_kind_of(sd) != CT_VALUE_DICT)
            throw Failure{CT_EINVAL, std::string("expected a dict, got a ") + ct_value_kind_name(ct_value_kind_of(sd))};
        const Listing &l = state_of(m);
        std::vector<SdEntry> entries = sd_entries(sd);
        std::unordered_map<std::string, const ct_value *> by_key;
        for (const SdEntry &e : entries) by_key.emplace(e.key, e.v);

        // Everything is checked before anything is copied (Python copies as
        // it goes; a half-loaded model is worse than a refused one).
        std::vector<std::string> missing, unexpected, errors;
        bool non_tensor = false;
        std::vector<std::pair<ct_tensor *, at::Tensor>> copies;
        std::unordered_set<std::string> known;
        for (size_t i = 0; i < l.handles.size(); ++i) {
            const std::string &key = l.names[i];
            known.insert(key);
            auto it = by_key.find(key);
            if (it == by_key.end()) {
                missing.push_back(key);
                continue;
            }
            ct_tensor *src = ct_value_get_tensor(it->second);
            if (!src || src->magic != ct::kLive || !src->t.defined()) {
                non_tensor = true;
                errors.push_back("While copying the parameter named \"" + key +
                                 "\", expected a tensor from checkpoint but received " +
                                 ct_value_kind_name(ct_value_kind_of(it->second)) + ".");
                continue;
            }
            const at::Tensor &dst = l.handles[i]->t;
            if (!src->t.sizes().equals(dst.sizes())) {
                errors.push_back("size mismatch for " + key + ": copying a param with shape " +
                                 torch_size(src->t) + " from checkpoint, the shape in current model is " +
                                 torch_size(dst) + ".");
                continue;
            }
            copies.emplace_back(l.handles[i], src->t);
        }
        for (const SdEntry &e : entries)
            if (!known.count(e.key)) unexpected.push_back(e.key);

        std::vector<std::string> msgs;
        if (strict && !missing.empty()) msgs.push_back("Missing key(s) in state_dict: " + quoted_list(missing) + ". ");
        if (strict && !unexpected.empty())
            msgs.push_back("Unexpected key(s) in state_dict: " + quoted_list(unexpected) + ". ");
        msgs.insert(msgs.end(), errors.begin(), errors.end());
        if (!msgs.empty()) {
            std::string text = "Error(s) in loading state_dict for " + m->type + ":";
            for (const std::string &s : msgs) text += "\n\t" + s;
            bool only_shapes = !non_tensor && (!strict || (missing.empty() && unexpected.empty()));
            throw Failure{only_shapes ? CT_ESHAPE : CT_EFORMAT, text};
        }
        at::NoGradGuard no_grad;
        for (auto &c : copies) c.first->t.copy_(c.second);
    });
}

static void set_training(ct_module *m, bool mode) {
    m->training = mode;
    for (Child &c : m->children) set_training(c.m, mode);
}

extern "C" void ct_nn_train(ct_module *m, bool mode) {
    if (m) set_training(m, mode);
}

extern "C" bool ct_nn_is_training(const ct_module *m) { return m && m->training; }

// module._apply(fn): parameters keep their identity (param.data = fn(param),
// and the same for their gradients); buffers are replaced. All new tensors are
// made first, so a failure (a GPU out of memory) leaves the module unchanged.
template <class F>
static int apply(ct_module *m, const char *fn_name, F &&fn) {
    if (!check_module(m, fn_name, "m")) return ct_last_code();
    return ct::status(fn_name, [&] {
        std::vector<ct_tensor *> params, buffers;
        collect_all(m, params, buffers);
        std::vector<at::Tensor> new_params, new_grads, new_buffers;
        {
            at::NoGradGuard no_grad;
            for (ct_tensor *h : params) {
                new_params.push_back(fn(h->t));
                const at::Tensor &g = h->t.grad();
                new_grads.push_back(g.defined() ? fn(g) : at::Tensor());
            }
            for (ct_tensor *h : buffers) new_buffers.push_back(fn(h->t));
        }
        for (size_t i = 0; i < params.size(); ++i) {
            params[i]->t.set_data(new_params[i]);
            if (new_grads[i].defined()) params[i]->t.grad().set_data(new_grads[i]);
        }
        for (size_t i = 0; i < buffers.size(); ++i) buffers[i]->t = new_buffers[i];
    });
}

extern "C" int ct_nn_to_device(ct_module *m, ct_device device) {
    at::Device dev(at::kCPU);
    try {
        dev = ct::to_device(device);
    } catch (...) {
        return ct::fail_exception(__func__);
    }
    return apply(m, __func__, [&](const at::Tensor &t) { return t.to(dev); });
}

extern "C" int ct_nn_to_dtype(ct_module *m, ct_dtype dtype) {
    at::ScalarType st;
    if (!ct::to_scalar_type(dtype, &st))
        return ct::fail(CT_EDTYPE, __func__, "unknown dtype " + std::to_string(dtype));
    if (!at::isFloatingType(st))
        return ct::fail(CT_EDTYPE, __func__,
                        std::string("nn.Module.to only accepts floating point dtypes, but got desired dtype=") +
                            ct_dtype_name(dtype));
    // Integer tensors (num_batches_tracked) keep their dtype, as in Python.
    return apply(m, __func__, [&](const at::Tensor &t) {
        return t.is_floating_point() || t.is_complex() ? t.to(st) : t;
    });
}

extern "C" int ct_nn_zero_grad(ct_module *m, bool set_to_none) {
    if (!check_module(m, __func__, "m")) return ct_last_code();
    return ct::status(__func__, [&] {
        for (ct_tensor *h : params_of(m).handles) {
            at::Tensor &g = h->t.mutable_grad();
            if (!g.defined()) continue;
            if (set_to_none) {
                g.reset();
            } else {
                if (g.grad_fn()) g.detach_();
                else g.requires_grad_(false);
                g.zero_();
            }
        }
    });
}

extern "C" void ct_nn_free(ct_module *m) {
    if (!m) return;
    if (m->parent) {
        ct::fail(CT_ESTATE, __func__,
                 "module '" + path_of(m) + "' (" + m->type + ") belongs to its parent; free the root module");
        return;
    }
    destroy(m);
}
