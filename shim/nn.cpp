// shim/nn.cpp — modules (torch.nn.Module's model in C): named parameters,
// buffers and children, the built-in layers with PyTorch's initialisation,
// state dicts, device/dtype moves, and gradient clipping (torch.nn.utils).
//
// A module tree is owned from its root: a module added as a child belongs to
// its parent, and parameters/buffers are unscoped handles owned by the module
// that registered them. Flattened listings (parameters, state entries) are
// cached per module and rebuilt when the module's `version` moves; every
// registration bumps the version of the module and of all its ancestors, so a
// cache is stale exactly when something in that module's subtree changed.
#include "internal.h"

#include <ATen/native/ForeachUtils.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ctrial/nn.h"
#include "ctrial/value.h"

using ct::Failure;

namespace {

enum class Kind {
    User, Linear, Conv1d, Conv2d, BatchNorm1d, BatchNorm2d, LayerNorm, Embedding, Dropout,
    ReLU, GELU, SiLU, Tanh, Sigmoid, Flatten, MaxPool2d, Sequential,
    // the single-call layers after ct_nn_max_pool2d in nn.h
    Conv3d, ConvTranspose1d, ConvTranspose2d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, Upsample,
    Dropout1d, Dropout2d, Identity, Softmax, LogSoftmax, LeakyReLU, ELU, Mish, Hardswish, PReLU,
    EmbeddingBag,
};

struct Slot {
    std::string name;
    ct_tensor *h;     // unscoped, owned by the module
    bool persistent;  // buffers only: part of the state dict
};

struct Child {
    std::string name;
    ct_module *m;
};

// Settings of the built-in layers; each kind reads only its own fields.
struct Config {
    int64_t in = 0, out = 0;  // features, channels, or (num_embeddings, dim)
    int64_t kernel = 0, stride = 1, padding = 0, dilation = 1, groups = 1;
    double p = 0;                        // Dropout
    double eps = 1e-5, momentum = 0.1;   // norms; momentum NaN = None
    bool affine = true, track = true;    // norms
    int64_t padding_idx = -1;            // Embedding
    int start_dim = 1, end_dim = -1;     // Flatten
    int64_t output_padding = 0;          // ConvTranspose
    int64_t groups_norm = 1;             // GroupNorm's num_groups
    // LayerNorm's normalized_shape; the output size of the adaptive pools
    // and of Upsample (empty: Upsample uses scale)
    std::vector<int64_t> sizes;
    double scale = 0;                    // Upsample's scale_factor (0: None)
    std::string mode;                    // Upsample, EmbeddingBag
    bool align_corners = false;          // Upsample
    int dim = -1;                        // Softmax, LogSoftmax
    double slope = 0;                    // LeakyReLU's negative_slope, ELU's alpha
};

// A flattened view of a subtree: dotted names and handles in Python's order.
struct Listing {
    uint64_t version = 0;  // module version it was built at (versions start at 1)
    std::vector<std::string> names;
    std::vector<ct_tensor *> handles;
};

}  // namespace

struct ct_module {
    std::string type;
    Kind kind = Kind::User;
    Config cfg;
    ct_forward_fn forward = nullptr;
    ct_forward_value_fn forward_value = nullptr; // a value module (ct_nn_module_value)
    void *user = nullptr;
    void (*user_free)(void *) = nullptr;
    std::vector<Slot> params, buffers;
    std::vector<Child> children;
    ct_module *parent = nullptr;
    bool training = true;
    uint64_t version = 1;
    mutable Listing param_cache, state_cache;
    // Built-in layers keep direct pointers to their own slots: registered
    // handles are never replaced or removed while the module lives.
    ct_tensor *weight = nullptr, *bias = nullptr;
    ct_tensor *running_mean = nullptr, *running_var = nullptr, *num_batches = nullptr;
};

namespace {

ct_tensor *const kNoTensors[1] = {nullptr};

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

// Builds a built-in layer: `init` registers its tensors. Any failure frees the
// half-built module and reports under the constructor's name.
template <class F>
ct_module *build(const char *fn, const char *type, Kind kind, F &&init) {
    ct_module *m = nullptr;
    try {
        m = new_module(type, kind);
        init(m);
        return m;
    } catch (...) {
        if (m) destroy(m);
        ct::fail_exception(fn);
        return nullptr;
    }
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

// The settings of a convolution, from ct_conv_opts or ct_conv_transpose_opts.
struct ConvArgs {
    int64_t stride, padding, dilation, groups, output_padding;
    bool bias;
};

ConvArgs conv_args(const ct_conv_opts *opts) {
    ct_conv_opts o = opts ? *opts : ct_conv_defaults();
    return ConvArgs{o.stride, o.padding, o.dilation, o.groups, 0, o.bias};
}

ConvArgs conv_args(const ct_conv_transpose_opts *opts) {
    ct_conv_transpose_opts o = opts ? *opts : ct_conv_transpose_defaults();
    return ConvArgs{o.stride, o.padding, o.dilation, o.groups, o.output_padding, o.bias};
}

// nn.Conv{1,2,3}d / nn.ConvTranspose{1,2}d (_ConvNd.__init__, then
// reset_parameters()): weight [out, in/groups, k...], or [in, out/groups, k...]
// when transposed; both drawn by kaiming_uniform_(a=sqrt(5)) with the fan-in
// of weight dim 1, as Python computes it, then the bias from U(+-1/sqrt(fan_in)).
ct_module *conv(const char *fn, const char *type, Kind kind, int64_t in, int64_t out, int64_t k,
                const ConvArgs &o, int spatial, bool transposed) {
    return build(fn, type, kind, [&](ct_module *m) {
        check_nonneg(in, "in_channels");
        check_nonneg(out, "out_channels");
        check_positive(k, "kernel_size");
        check_positive(o.stride, "stride");
        check_nonneg(o.padding, "padding");
        check_positive(o.dilation, "dilation");
        if (o.groups <= 0) throw Failure{CT_EINVAL, "groups must be a positive integer"};
        if (in % o.groups != 0) throw Failure{CT_EINVAL, "in_channels must be divisible by groups"};
        if (out % o.groups != 0) throw Failure{CT_EINVAL, "out_channels must be divisible by groups"};
        if (transposed) {
            // ATen refuses this at the first forward; it can never work, so
            // it is refused here, in ATen's words.
            check_nonneg(o.output_padding, "output_padding");
            if (!(o.output_padding < o.stride || o.output_padding < o.dilation))
                throw Failure{CT_EINVAL, "output padding must be smaller than either stride or dilation, but got "
                                         "output_padding=" + std::to_string(o.output_padding) +
                                             ", stride=" + std::to_string(o.stride) +
                                             ", dilation=" + std::to_string(o.dilation)};
        }
        m->cfg.in = in;
        m->cfg.out = out;
        m->cfg.kernel = k;
        m->cfg.stride = o.stride;
        m->cfg.padding = o.padding;
        m->cfg.dilation = o.dilation;
        m->cfg.groups = o.groups;
        m->cfg.output_padding = transposed ? o.output_padding : 0;
        std::vector<int64_t> shape = transposed ? std::vector<int64_t>{in, out / o.groups}
                                                : std::vector<int64_t>{out, in / o.groups};
        for (int i = 0; i < spatial; ++i) shape.push_back(k);
        at::Tensor w = at::empty(shape, at::kFloat);
        at::Tensor b = o.bias ? at::empty({out}, at::kFloat) : at::Tensor();
        kaiming_uniform_sqrt5(w);
        if (b.defined()) {
            int64_t fan_in = fan_in_of(w);
            if (fan_in != 0) {
                const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
                b.uniform_(-bound, bound);
            }
        }
        m->weight = own_param(m, "weight", w);
        if (b.defined()) m->bias = own_param(m, "bias", b);
    });
}

ct_module *batchnorm(const char *fn, const char *type, Kind kind, int64_t num_features,
                     const ct_norm_opts *opts) {
    ct_norm_opts o = opts ? *opts : ct_norm_defaults();
    return build(fn, type, kind, [&](ct_module *m) {
        check_nonneg(num_features, "num_features");
        m->cfg.in = num_features;
        m->cfg.eps = o.eps;
        m->cfg.momentum = o.momentum;
        m->cfg.affine = o.affine;
        m->cfg.track = o.track_running_stats;
        // _NormBase.__init__: weight=ones, bias=zeros; buffers in this order.
        if (o.affine) {
            m->weight = own_param(m, "weight", at::ones({num_features}, at::kFloat));
            m->bias = own_param(m, "bias", at::zeros({num_features}, at::kFloat));
        }
        if (o.track_running_stats) {
            m->running_mean = own_buffer(m, "running_mean", at::zeros({num_features}, at::kFloat), true);
            m->running_var = own_buffer(m, "running_var", at::ones({num_features}, at::kFloat), true);
            m->num_batches = own_buffer(m, "num_batches_tracked", at::zeros({}, at::kLong), true);
        }
    });
}

ct_module *stateless(const char *fn, const char *type, Kind kind) {
    return build(fn, type, kind, [](ct_module *) {});
}

// ---- forward of the built-in layers ---------------------------------------------------

std::optional<at::Tensor> opt(const ct_tensor *h) {
    if (!h) return std::nullopt;
    return h->t;
}

at::Tensor batchnorm_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    if (m->kind == Kind::BatchNorm1d && x.dim() != 2 && x.dim() != 3)
        throw Failure{CT_ESHAPE, "expected 2D or 3D input (got " + std::to_string(x.dim()) + "D input)"};
    if (m->kind == Kind::BatchNorm2d && x.dim() != 4)
        throw Failure{CT_ESHAPE, "expected 4D input (got " + std::to_string(x.dim()) + "D input)"};
    // _BatchNorm.forward, line by line.
    const bool momentum_none = std::isnan(c.momentum);
    double factor = momentum_none ? 0.0 : c.momentum;
    if (m->training && c.track && m->num_batches) {
        m->num_batches->t.add_(1);
        if (momentum_none) factor = 1.0 / static_cast<double>(m->num_batches->t.item<int64_t>());
    }
    const bool use_batch_stats = m->training || (!m->running_mean && !m->running_var);
    if (use_batch_stats) {
        // F.batch_norm's _verify_batch_size
        int64_t per_channel = x.size(0);
        for (int64_t d = 2; d < x.dim(); ++d) per_channel *= x.size(d);
        if (per_channel == 1)
            throw Failure{CT_ESHAPE, "Expected more than 1 value per channel when training, got input size " +
                                         shape_str(x)};
    }
    return at::batch_norm(x, opt(m->weight), opt(m->bias), opt(m->running_mean), opt(m->running_var),
                          use_batch_stats, factor, c.eps, at::globalContext().userEnabledCuDNN());
}

// _InstanceNorm.forward: the input check, the no-batch case (unsqueeze(0),
// then squeeze(0)) and F.instance_norm with use_input_stats = training or
// not track_running_stats. num_batches_tracked is never counted (Python's
// InstanceNorm doesn't), and momentum None is passed as 0.0.
at::Tensor instancenorm_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    const int64_t no_batch = m->kind == Kind::InstanceNorm1d ? 2 : 3;
    if (x.dim() != no_batch && x.dim() != no_batch + 1)
        throw Failure{CT_ESHAPE, "expected " + std::to_string(no_batch) + "D or " + std::to_string(no_batch + 1) +
                                     "D input (got " + std::to_string(x.dim()) + "D input)"};
    const int64_t feature_dim = x.dim() - no_batch;
    // Without affine, Python only warns about a mismatch (num_features is unused).
    if (c.affine && x.size(feature_dim) != c.in)
        throw Failure{CT_ESHAPE, "expected input's size at dim=" + std::to_string(feature_dim) +
                                     " to match num_features (" + std::to_string(c.in) +
                                     "), but got: " + std::to_string(x.size(feature_dim)) + "."};
    const bool batched = x.dim() != no_batch;
    const at::Tensor in = batched ? x : x.unsqueeze(0);
    const bool use_input_stats = m->training || !c.track;
    if (use_input_stats) {  // F.instance_norm's _verify_spatial_size
        int64_t spatial = 1;
        for (int64_t d = 2; d < in.dim(); ++d) spatial *= in.size(d);
        if (spatial == 1)
            throw Failure{CT_ESHAPE,
                          "Expected more than 1 spatial element when training, got input size " + torch_size(in)};
    }
    at::Tensor y = at::instance_norm(in, opt(m->weight), opt(m->bias), opt(m->running_mean), opt(m->running_var),
                                     use_input_stats, std::isnan(c.momentum) ? 0.0 : c.momentum, c.eps,
                                     at::globalContext().userEnabledCuDNN());
    return batched ? y : y.squeeze(0);
}

// F.group_norm: its two checks, then torch.group_norm.
at::Tensor groupnorm_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    if (x.dim() < 2)
        throw Failure{CT_ESHAPE,
                      "Expected at least 2 dimensions for input tensor but received " + std::to_string(x.dim())};
    // _verify_batch_size([N * C // G, G] + spatial)
    std::vector<int64_t> size{x.size(0) * x.size(1) / c.groups_norm, c.groups_norm};
    int64_t per_channel = size[0];
    for (int64_t d = 2; d < x.dim(); ++d) {
        size.push_back(x.size(d));
        per_channel *= x.size(d);
    }
    if (per_channel == 1) {
        std::string s = "[";
        for (size_t i = 0; i < size.size(); ++i) s += (i ? ", " : "") + std::to_string(size[i]);
        throw Failure{CT_ESHAPE, "Expected more than 1 value per channel when training, got input size " + s + "]"};
    }
    return at::group_norm(x, c.groups_norm, opt(m->weight), opt(m->bias), c.eps,
                          at::globalContext().userEnabledCuDNN());
}

// nn.Upsample.forward = F.interpolate(x, size, scale_factor, mode,
// align_corners, recompute_scale_factor=None): the same checks and the same
// ATen call for each (input rank, mode) pair. A scale factor goes to ATen as
// scale_factors (ATen computes the size and uses the scale itself), except
// for "area", which Python turns into an output size first. Python's
// deterministic-CUDA decomposition of (bi/tri)linear is not reproduced.
at::Tensor upsample_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    const int64_t dim = x.dim() - 2;
    std::optional<std::vector<int64_t>> out;
    std::optional<std::vector<double>> scales;
    if (!c.sizes.empty()) {
        if (static_cast<int64_t>(c.sizes.size()) != dim) {
            std::string in = "[";
            for (int64_t d = 2; d < x.dim(); ++d) in += (d > 2 ? ", " : "") + std::to_string(x.size(d));
            throw Failure{CT_ESHAPE, "Input and output must have the same number of spatial dimensions, but got "
                                     "input with spatial dimensions of " + in + "] and output size of " +
                                         py_tuple(c.sizes) + ". Please provide input tensor in (N, C, d1, d2, "
                                         "...,dK) format and output size in (o1, o2, ...,oK) format."};
        }
        out = c.sizes;
    } else {
        scales = std::vector<double>(static_cast<size_t>(std::max<int64_t>(dim, 0)), c.scale);
    }
    const std::string &mode = c.mode;
    if (mode == "area" && !out) {
        std::vector<int64_t> sz;
        for (int64_t i = 0; i < dim; ++i)  // _sym_int(size * scale): truncation
            sz.push_back(static_cast<int64_t>(static_cast<double>(x.size(i + 2)) * c.scale));
        out = sz;
        scales.reset();
    }
    at::OptionalIntArrayRef osz = out ? at::OptionalIntArrayRef(*out) : at::OptionalIntArrayRef();
    std::optional<at::ArrayRef<double>> sf;
    if (scales) sf = at::ArrayRef<double>(*scales);
    const bool ac = c.align_corners;
    if (mode == "nearest") {
        if (dim == 1) return at::upsample_nearest1d(x, osz, sf);
        if (dim == 2) return at::upsample_nearest2d(x, osz, sf);
        if (dim == 3) return at::upsample_nearest3d(x, osz, sf);
    } else if (mode == "nearest-exact") {
        if (dim == 1) return at::_upsample_nearest_exact1d(x, osz, sf);
        if (dim == 2) return at::_upsample_nearest_exact2d(x, osz, sf);
        if (dim == 3) return at::_upsample_nearest_exact3d(x, osz, sf);
    } else if (mode == "area") {
        if (dim == 1) return at::adaptive_avg_pool1d(x, *out);
        if (dim == 2) return at::adaptive_avg_pool2d(x, *out);
        if (dim == 3) return at::adaptive_avg_pool3d(x, *out);
    } else if (dim == 1 && mode == "linear") {
        return at::upsample_linear1d(x, osz, ac, sf);
    } else if (dim == 2 && mode == "bilinear") {
        return at::upsample_bilinear2d(x, osz, ac, sf);
    } else if (dim == 3 && mode == "trilinear") {
        return at::upsample_trilinear3d(x, osz, ac, sf);
    } else if (dim == 2 && mode == "bicubic") {
        return at::upsample_bicubic2d(x, osz, ac, sf);
    }
    // Python's messages for a rank that doesn't fit the mode.
    const bool lin = mode == "linear", bil = mode == "bilinear", tri = mode == "trilinear";
    if ((dim == 1 && (bil || tri)) || (dim == 2 && (lin || tri)) || (dim == 3 && (lin || bil)))
        throw Failure{CT_ESHAPE, "Got " + std::to_string(x.dim()) + "D input, but " + mode + " mode needs " +
                                     (lin ? "3D" : bil ? "4D" : "5D") + " input"};
    throw Failure{CT_ESHAPE, "Input Error: Only 3D, 4D and 5D input Tensors supported (got " + std::to_string(x.dim()) +
                                 "D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                 "nearest-exact (got " + mode + ")"};
}

// F.embedding_bag(input, weight, offsets, max_norm=None, norm_type=2,
// scale_grad_by_freq=False, mode, sparse=False, per_sample_weights,
// include_last_offset=False, padding_idx=None): Python's checks in its
// order, the 2-D input made into bags of equal length, then
// torch.embedding_bag. offsets and per_sample_weights may be undefined.
at::Tensor embedding_bag_forward(ct_module *m, const at::Tensor &input, at::Tensor offsets, at::Tensor psw) {
    const Config &c = m->cfg;
    if (psw.defined() && !input.sizes().equals(psw.sizes()))
        throw Failure{CT_ESHAPE, "embedding_bag: If per_sample_weights (" + torch_size(psw) +
                                     ") is not None, then it must have the same shape as the input (" +
                                     torch_size(input) + ")"};
    at::Tensor flat = input;
    if (input.dim() == 2) {
        if (offsets.defined())
            throw Failure{CT_EINVAL, "if input is 2D, then offsets has to be None, as input is treated is a "
                                     "mini-batch of fixed length sequences. However, found offsets of type "
                                     "<class 'torch.Tensor'>"};
        offsets = at::arange(0, input.numel(), input.size(1), input.options());
        flat = input.reshape(-1);
        if (psw.defined()) psw = psw.reshape(-1);
    } else if (input.dim() == 1) {
        if (!offsets.defined()) throw Failure{CT_EINVAL, "offsets has to be a 1D Tensor but got None"};
        if (offsets.dim() != 1) throw Failure{CT_ESHAPE, "offsets has to be a 1D Tensor"};
    } else {
        throw Failure{CT_ESHAPE,
                      "input has to be 1D or 2D Tensor, but got Tensor of dimension " + std::to_string(input.dim())};
    }
    const int64_t mode = c.mode == "sum" ? 0 : c.mode == "mean" ? 1 : 2;
    if (psw.defined() && mode != 0)
        throw Failure{CT_ENOTSUP, "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  "supported for mode='sum' (got mode='" + c.mode + "'). Please open a feature "
                                  "request on GitHub."};
    std::optional<at::Tensor> w;
    if (psw.defined()) w = psw;
    return std::get<0>(at::embedding_bag(m->weight->t, flat, offsets, false, mode, false, w, false, std::nullopt));
}

at::Tensor builtin_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::Linear: return at::linear(x, m->weight->t, opt(m->bias));
    case Kind::Conv1d: {
        int64_t s[1] = {c.stride}, p[1] = {c.padding}, d[1] = {c.dilation};
        return at::conv1d(x, m->weight->t, opt(m->bias), s, p, d, c.groups);
    }
    case Kind::Conv2d: {
        int64_t s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding}, d[2] = {c.dilation, c.dilation};
        return at::conv2d(x, m->weight->t, opt(m->bias), s, p, d, c.groups);
    }
    case Kind::BatchNorm1d:
    case Kind::BatchNorm2d: return batchnorm_forward(m, x);
    case Kind::LayerNorm:
        return at::layer_norm(x, c.sizes, opt(m->weight), opt(m->bias), c.eps,
                              at::globalContext().userEnabledCuDNN());
    case Kind::Embedding: return at::embedding(m->weight->t, x, c.padding_idx, false, false);
    case Kind::Dropout: return ct::dropout(x, c.p, m->training, false);
    case Kind::ReLU: return at::relu(x);
    case Kind::GELU: return at::gelu(x, "none");
    case Kind::SiLU: return at::silu(x);
    case Kind::Tanh: return at::tanh(x);
    case Kind::Sigmoid: return at::sigmoid(x);
    case Kind::Flatten: return x.flatten(c.start_dim, c.end_dim);
    case Kind::MaxPool2d: {
        int64_t k[2] = {c.kernel, c.kernel}, s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding};
        int64_t d[2] = {1, 1};
        return at::max_pool2d(x, k, s, p, d, false);
    }
    case Kind::Conv3d: {
        int64_t s[3] = {c.stride, c.stride, c.stride}, p[3] = {c.padding, c.padding, c.padding};
        int64_t d[3] = {c.dilation, c.dilation, c.dilation};
        return at::conv3d(x, m->weight->t, opt(m->bias), s, p, d, c.groups);
    }
    case Kind::ConvTranspose1d: {
        int64_t s[1] = {c.stride}, p[1] = {c.padding}, op[1] = {c.output_padding}, d[1] = {c.dilation};
        return at::conv_transpose1d(x, m->weight->t, opt(m->bias), s, p, op, c.groups, d);
    }
    case Kind::ConvTranspose2d: {
        int64_t s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding};
        int64_t op[2] = {c.output_padding, c.output_padding}, d[2] = {c.dilation, c.dilation};
        return at::conv_transpose2d(x, m->weight->t, opt(m->bias), s, p, op, c.groups, d);
    }
    case Kind::GroupNorm: return groupnorm_forward(m, x);
    case Kind::InstanceNorm1d:
    case Kind::InstanceNorm2d: return instancenorm_forward(m, x);
    case Kind::AvgPool1d: {
        int64_t k[1] = {c.kernel}, s[1] = {c.stride}, p[1] = {c.padding};
        return at::avg_pool1d(x, k, s, p, false, true);
    }
    case Kind::AvgPool2d: {
        int64_t k[2] = {c.kernel, c.kernel}, s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding};
        return at::avg_pool2d(x, k, s, p, false, true, std::nullopt);
    }
    case Kind::AdaptiveAvgPool1d: return at::adaptive_avg_pool1d(x, c.sizes);
    case Kind::AdaptiveAvgPool2d: return at::adaptive_avg_pool2d(x, c.sizes);
    case Kind::AdaptiveMaxPool2d: return std::get<0>(at::adaptive_max_pool2d(x, c.sizes));
    case Kind::Upsample: return upsample_forward(m, x);
    case Kind::Dropout1d: {
        // F.dropout1d: 2-D or 3-D; an unbatched input gets a batch dim of 1.
        if (x.dim() != 2 && x.dim() != 3)
            throw Failure{CT_ESHAPE, "dropout1d: Expected 2D or 3D input, but received a " + std::to_string(x.dim()) +
                                         "D input. Note that dropout1d exists to provide channel-wise dropout on "
                                         "inputs with 1 spatial dimension, a channel dimension, and an optional "
                                         "batch dimension (i.e. 2D or 3D inputs)."};
        if (x.dim() == 3) return ct::dropout(x, c.p, m->training, true);
        return ct::dropout(x.unsqueeze(0), c.p, m->training, true).squeeze(0);
    }
    // F.dropout2d: feature_dropout on the input as it is (Python only warns
    // about inputs that are not 3-D or 4-D, and reads a 3-D one as (N, C, L)).
    case Kind::Dropout2d: return ct::dropout(x, c.p, m->training, true);
    case Kind::Identity: return x;
    case Kind::Softmax: return at::softmax(x, c.dim, std::nullopt);
    case Kind::LogSoftmax: return at::log_softmax(x, c.dim, std::nullopt);
    case Kind::LeakyReLU: return at::leaky_relu(x, c.slope);
    case Kind::ELU: return at::elu(x, c.slope);
    case Kind::Mish: return at::mish(x);
    case Kind::Hardswish: return at::hardswish(x);
    case Kind::PReLU: return at::prelu(x, m->weight->t);
    case Kind::EmbeddingBag: return embedding_bag_forward(m, x, at::Tensor(), at::Tensor());
    case Kind::User:
    case Kind::Sequential: break;
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

// Groups tensors by (device, dtype) with the very function behind Python's
// _group_tensors_by_device_and_dtype: its hash-map order is the order in
// which torch.nn.utils visits the groups, and with mixed dtypes the order of
// the per-group norms changes the last bits of the total norm.
std::vector<std::vector<at::Tensor>> group_by_device_dtype(const std::vector<at::Tensor> &ts) {
    std::vector<std::vector<at::Tensor>> groups;
    if (ts.empty()) return groups;
    at::native::nested_optional_tensorvec_t nested(1);
    for (const at::Tensor &t : ts) nested[0].emplace_back(t);
    for (auto &kv : at::native::_group_tensors_by_first_tensors_device_and_dtype(nested, false)) {
        std::vector<at::Tensor> g;
        for (const auto &t : kv.second.first[0]) g.push_back(*t);
        groups.push_back(std::move(g));
    }
    return groups;
}

// The defined gradients of params (checked handles), in order.
std::vector<at::Tensor> grads_of(size_t n, ct_tensor *const *params, const char *fn) {
    if (n > 0 && !params) throw Failure{CT_EINVAL, "parameter array is NULL"};
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < n; ++i) {
        const ct_tensor *h = params[i];
        if (!h || h->magic != ct::kLive || !h->t.defined())
            throw Failure{h ? CT_ESTATE : CT_EINVAL,
                          "params[" + std::to_string(i) + "] is " + (h ? "a freed tensor" : "NULL")};
        const at::Tensor &g = h->t.grad();
        if (g.defined()) grads.push_back(g);
    }
    return grads;
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

// ============================================================================
// built-in layers
// ============================================================================

extern "C" ct_module *ct_nn_linear(int64_t in_features, int64_t out_features, bool bias) {
    return build(__func__, "Linear", Kind::Linear, [&](ct_module *m) {
        check_nonneg(in_features, "in_features");
        check_nonneg(out_features, "out_features");
        m->cfg.in = in_features;
        m->cfg.out = out_features;
        // nn.Linear.__init__ + reset_parameters()
        at::Tensor w = at::empty({out_features, in_features}, at::kFloat);
        at::Tensor b = bias ? at::empty({out_features}, at::kFloat) : at::Tensor();
        kaiming_uniform_sqrt5(w);
        if (b.defined()) {
            int64_t fan_in = fan_in_of(w);
            const double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
            b.uniform_(-bound, bound);
        }
        m->weight = own_param(m, "weight", w);
        if (b.defined()) m->bias = own_param(m, "bias", b);
    });
}

extern "C" ct_conv_opts ct_conv_defaults(void) {
    ct_conv_opts o;
    o.stride = 1;
    o.padding = 0;
    o.dilation = 1;
    o.groups = 1;
    o.bias = true;
    return o;
}

extern "C" ct_module *ct_nn_conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                   const ct_conv_opts *opts) {
    return conv(__func__, "Conv1d", Kind::Conv1d, in_channels, out_channels, kernel, conv_args(opts), 1, false);
}

extern "C" ct_module *ct_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                   const ct_conv_opts *opts) {
    return conv(__func__, "Conv2d", Kind::Conv2d, in_channels, out_channels, kernel, conv_args(opts), 2, false);
}

extern "C" ct_norm_opts ct_norm_defaults(void) {
    ct_norm_opts o;
    o.eps = 1e-5;
    o.momentum = 0.1;
    o.affine = true;
    o.track_running_stats = true;
    return o;
}

extern "C" ct_module *ct_nn_batchnorm1d(int64_t num_features, const ct_norm_opts *opts) {
    return batchnorm(__func__, "BatchNorm1d", Kind::BatchNorm1d, num_features, opts);
}

extern "C" ct_module *ct_nn_batchnorm2d(int64_t num_features, const ct_norm_opts *opts) {
    return batchnorm(__func__, "BatchNorm2d", Kind::BatchNorm2d, num_features, opts);
}

extern "C" ct_module *ct_nn_layernorm(int64_t normalized, const ct_norm_opts *opts) {
    ct_norm_opts o = opts ? *opts : ct_norm_defaults();
    return build(__func__, "LayerNorm", Kind::LayerNorm, [&](ct_module *m) {
        check_nonneg(normalized, "normalized_shape");
        m->cfg.in = normalized;
        m->cfg.sizes = {normalized};
        m->cfg.eps = o.eps;
        m->cfg.affine = o.affine;
        if (o.affine) {  // elementwise_affine=True, bias=True
            m->weight = own_param(m, "weight", at::ones({normalized}, at::kFloat));
            m->bias = own_param(m, "bias", at::zeros({normalized}, at::kFloat));
        }
    });
}

extern "C" ct_module *ct_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx) {
    return build(__func__, "Embedding", Kind::Embedding, [&](ct_module *m) {
        check_nonneg(num_embeddings, "num_embeddings");
        check_nonneg(embedding_dim, "embedding_dim");
        if (padding_idx >= num_embeddings) throw Failure{CT_EINVAL, "Padding_idx must be within num_embeddings"};
        m->cfg.in = num_embeddings;
        m->cfg.out = embedding_dim;
        m->cfg.padding_idx = padding_idx < 0 ? -1 : padding_idx;
        // reset_parameters(): normal_(weight), then the padding row is zeroed.
        at::Tensor w = at::empty({num_embeddings, embedding_dim}, at::kFloat);
        w.normal_(0.0, 1.0);
        if (padding_idx >= 0) w[padding_idx].fill_(0);
        m->weight = own_param(m, "weight", w);
    });
}

extern "C" ct_module *ct_nn_dropout(double p) {
    return build(__func__, "Dropout", Kind::Dropout, [&](ct_module *m) {
        if (!(p >= 0 && p <= 1))
            throw Failure{CT_EINVAL, "dropout probability has to be between 0 and 1, but got " + fmt_double(p)};
        m->cfg.p = p;
    });
}

extern "C" ct_module *ct_nn_relu(void) { return stateless(__func__, "ReLU", Kind::ReLU); }
extern "C" ct_module *ct_nn_gelu(void) { return stateless(__func__, "GELU", Kind::GELU); }
extern "C" ct_module *ct_nn_silu(void) { return stateless(__func__, "SiLU", Kind::SiLU); }
extern "C" ct_module *ct_nn_tanh(void) { return stateless(__func__, "Tanh", Kind::Tanh); }
extern "C" ct_module *ct_nn_sigmoid(void) { return stateless(__func__, "Sigmoid", Kind::Sigmoid); }

extern "C" ct_module *ct_nn_flatten(int start_dim, int end_dim) {
    return build(__func__, "Flatten", Kind::Flatten, [&](ct_module *m) {
        m->cfg.start_dim = start_dim;
        m->cfg.end_dim = end_dim;
    });
}

extern "C" ct_module *ct_nn_max_pool2d(int64_t kernel, int64_t stride, int64_t padding) {
    return build(__func__, "MaxPool2d", Kind::MaxPool2d, [&](ct_module *m) {
        check_positive(kernel, "kernel_size");
        check_nonneg(stride, "stride");
        check_nonneg(padding, "padding");
        if (padding * 2 > kernel)
            throw Failure{CT_EINVAL, "pad should be at most half of effective kernel size, but got pad=" +
                                         std::to_string(padding) + ", kernel_size=" + std::to_string(kernel)};
        m->cfg.kernel = kernel;
        m->cfg.stride = stride == 0 ? kernel : stride;  // stride=None
        m->cfg.padding = padding;
    });
}

// ---- more convolutions --------------------------------------------------------------

extern "C" ct_module *ct_nn_conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                   const ct_conv_opts *opts) {
    return conv(__func__, "Conv3d", Kind::Conv3d, in_channels, out_channels, kernel, conv_args(opts), 3, false);
}

extern "C" ct_conv_transpose_opts ct_conv_transpose_defaults(void) {
    ct_conv_transpose_opts o;
    o.stride = 1;
    o.padding = 0;
    o.output_padding = 0;
    o.groups = 1;
    o.dilation = 1;
    o.bias = true;
    return o;
}

extern "C" ct_module *ct_nn_conv_transpose1d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                             const ct_conv_transpose_opts *opts) {
    return conv(__func__, "ConvTranspose1d", Kind::ConvTranspose1d, in_channels, out_channels, kernel,
                conv_args(opts), 1, true);
}

extern "C" ct_module *ct_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                             const ct_conv_transpose_opts *opts) {
    return conv(__func__, "ConvTranspose2d", Kind::ConvTranspose2d, in_channels, out_channels, kernel,
                conv_args(opts), 2, true);
}

// ---- more normalisations ---------------------------------------------------------------

extern "C" ct_module *ct_nn_groupnorm(int64_t num_groups, int64_t num_channels, const ct_norm_opts *opts) {
    ct_norm_opts o = opts ? *opts : ct_norm_defaults();
    return build(__func__, "GroupNorm", Kind::GroupNorm, [&](ct_module *m) {
        check_positive(num_groups, "num_groups");
        check_nonneg(num_channels, "num_channels");
        if (num_channels % num_groups != 0)
            throw Failure{CT_EINVAL, "num_channels (" + std::to_string(num_channels) +
                                         ") must be divisible by num_groups (" + std::to_string(num_groups) + ")"};
        m->cfg.in = num_channels;
        m->cfg.groups_norm = num_groups;
        m->cfg.eps = o.eps;
        m->cfg.affine = o.affine;
        if (o.affine) {  // reset_parameters(): ones_, zeros_
            m->weight = own_param(m, "weight", at::ones({num_channels}, at::kFloat));
            m->bias = own_param(m, "bias", at::zeros({num_channels}, at::kFloat));
        }
    });
}

// nn.InstanceNorm{1,2}d: _NormBase with PyTorch's InstanceNorm defaults
// (affine and track_running_stats false) when opts is NULL.
static ct_module *instancenorm(const char *fn, const char *type, Kind kind, int64_t num_features,
                               const ct_norm_opts *opts) {
    ct_norm_opts o = ct_norm_defaults();
    o.affine = false;
    o.track_running_stats = false;
    if (opts) o = *opts;
    return batchnorm(fn, type, kind, num_features, &o);
}

extern "C" ct_module *ct_nn_instancenorm1d(int64_t num_features, const ct_norm_opts *opts) {
    return instancenorm(__func__, "InstanceNorm1d", Kind::InstanceNorm1d, num_features, opts);
}

extern "C" ct_module *ct_nn_instancenorm2d(int64_t num_features, const ct_norm_opts *opts) {
    return instancenorm(__func__, "InstanceNorm2d", Kind::InstanceNorm2d, num_features, opts);
}

extern "C" ct_module *ct_nn_layernorm_nd(int ndims, const int64_t *normalized_shape, const ct_norm_opts *opts) {
    ct_norm_opts o = opts ? *opts : ct_norm_defaults();
    return build(__func__, "LayerNorm", Kind::LayerNorm, [&](ct_module *m) {
        if (ndims < 1)
            throw Failure{CT_EINVAL, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                                     "least one element, but got ndims=" + std::to_string(ndims)};
        if (!normalized_shape) throw Failure{CT_EINVAL, "argument 'normalized_shape' is NULL"};
        std::vector<int64_t> shape(normalized_shape, normalized_shape + ndims);
        for (int64_t v : shape) check_nonneg(v, "normalized_shape");
        m->cfg.in = shape.back();
        m->cfg.sizes = shape;
        m->cfg.eps = o.eps;
        m->cfg.affine = o.affine;
        if (o.affine) {  // elementwise_affine=True, bias=True
            m->weight = own_param(m, "weight", at::ones(shape, at::kFloat));
            m->bias = own_param(m, "bias", at::zeros(shape, at::kFloat));
        }
    });
}

// ---- pooling -------------------------------------------------------------------------------

static ct_module *avg_pool(const char *fn, const char *type, Kind kind, int64_t kernel, int64_t stride,
                           int64_t padding) {
    return build(fn, type, kind, [&](ct_module *m) {
        check_positive(kernel, "kernel_size");
        check_nonneg(stride, "stride");
        check_nonneg(padding, "padding");
        if (padding * 2 > kernel)  // ATen's check, made at construction
            throw Failure{CT_EINVAL, "pad should be at most half of effective kernel size, but got pad=" +
                                         std::to_string(padding) + ", kernel_size=" + std::to_string(kernel)};
        m->cfg.kernel = kernel;
        m->cfg.stride = stride == 0 ? kernel : stride;  // stride=None
        m->cfg.padding = padding;
    });
}

extern "C" ct_module *ct_nn_avg_pool1d(int64_t kernel, int64_t stride, int64_t padding) {
    return avg_pool(__func__, "AvgPool1d", Kind::AvgPool1d, kernel, stride, padding);
}

extern "C" ct_module *ct_nn_avg_pool2d(int64_t kernel, int64_t stride, int64_t padding) {
    return avg_pool(__func__, "AvgPool2d", Kind::AvgPool2d, kernel, stride, padding);
}

static ct_module *adaptive_pool(const char *fn, const char *type, Kind kind, std::vector<int64_t> sizes) {
    return build(fn, type, kind, [&](ct_module *m) {
        for (int64_t v : sizes) check_nonneg(v, "output_size");
        m->cfg.sizes = std::move(sizes);
    });
}

extern "C" ct_module *ct_nn_adaptive_avg_pool1d(int64_t output_size) {
    return adaptive_pool(__func__, "AdaptiveAvgPool1d", Kind::AdaptiveAvgPool1d, {output_size});
}

extern "C" ct_module *ct_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    return adaptive_pool(__func__, "AdaptiveAvgPool2d", Kind::AdaptiveAvgPool2d, {out_h, out_w});
}

extern "C" ct_module *ct_nn_adaptive_max_pool2d(int64_t out_h, int64_t out_w) {
    return adaptive_pool(__func__, "AdaptiveMaxPool2d", Kind::AdaptiveMaxPool2d, {out_h, out_w});
}

// ---- upsampling ----------------------------------------------------------------------------

extern "C" ct_upsample_opts ct_upsample_defaults(void) {
    ct_upsample_opts o;
    o.ndims = 0;
    o.size[0] = o.size[1] = o.size[2] = 0;
    o.scale_factor = 0;
    o.mode = "nearest";
    o.align_corners = false;
    return o;
}

// What F.interpolate checks on its arguments is checked here, once; what
// depends on the input (its rank) is checked by each forward. Besides nn.h's
// modes, Python's "nearest-exact" and "area" are accepted.
extern "C" ct_module *ct_nn_upsample(const ct_upsample_opts *opts) {
    ct_upsample_opts o = opts ? *opts : ct_upsample_defaults();
    return build(__func__, "Upsample", Kind::Upsample, [&](ct_module *m) {
        std::string mode = o.mode ? o.mode : "nearest";
        static const char *const kModes[] = {"nearest", "linear", "bilinear", "bicubic", "trilinear",
                                             "nearest-exact", "area"};
        bool known = false;
        for (const char *k : kModes) known = known || mode == k;
        if (!known)
            throw Failure{CT_EINVAL, "unknown mode '" + mode + "' (expected one of nearest | linear | bilinear | "
                                     "bicubic | trilinear | area | nearest-exact)"};
        if (o.ndims < 0 || o.ndims > 3)
            throw Failure{CT_EINVAL, "ndims must be 0 (scale_factor) or 1 to 3 (size), got " + std::to_string(o.ndims)};
        if (std::isnan(o.scale_factor) || o.scale_factor < 0 || std::isinf(o.scale_factor))
            throw Failure{CT_EINVAL, "scale_factor must be a positive finite number (0: use size), got " +
                                         fmt_double(o.scale_factor)};
        if (o.ndims > 0 && o.scale_factor > 0)
            throw Failure{CT_EINVAL, "only one of size or scale_factor should be defined"};
        if (o.ndims == 0 && o.scale_factor == 0)
            throw Failure{CT_EINVAL, "either size or scale_factor should be defined"};
        for (int i = 0; i < o.ndims; ++i) check_nonneg(o.size[i], "size");
        if (o.align_corners && (mode == "nearest" || mode == "area" || mode == "nearest-exact"))
            throw Failure{CT_EINVAL, "align_corners option can only be set with the interpolating modes: "
                                     "linear | bilinear | bicubic | trilinear"};
        m->cfg.sizes.assign(o.size, o.size + o.ndims);
        m->cfg.scale = o.scale_factor;
        m->cfg.mode = mode;
        m->cfg.align_corners = o.align_corners;
    });
}

// ---- more stateless layers -------------------------------------------------------------

static ct_module *dropout_nd(const char *fn, const char *type, Kind kind, double p) {
    return build(fn, type, kind, [&](ct_module *m) {
        if (!(p >= 0 && p <= 1))
            throw Failure{CT_EINVAL, "dropout probability has to be between 0 and 1, but got " + fmt_double(p)};
        m->cfg.p = p;
    });
}

extern "C" ct_module *ct_nn_dropout1d(double p) { return dropout_nd(__func__, "Dropout1d", Kind::Dropout1d, p); }
extern "C" ct_module *ct_nn_dropout2d(double p) { return dropout_nd(__func__, "Dropout2d", Kind::Dropout2d, p); }
extern "C" ct_module *ct_nn_identity(void) { return stateless(__func__, "Identity", Kind::Identity); }
extern "C" ct_module *ct_nn_mish(void) { return stateless(__func__, "Mish", Kind::Mish); }
extern "C" ct_module *ct_nn_hardswish(void) { return stateless(__func__, "Hardswish", Kind::Hardswish); }

extern "C" ct_module *ct_nn_softmax(int dim) {
    return build(__func__, "Softmax", Kind::Softmax, [&](ct_module *m) { m->cfg.dim = dim; });
}

extern "C" ct_module *ct_nn_log_softmax(int dim) {
    return build(__func__, "LogSoftmax", Kind::LogSoftmax, [&](ct_module *m) { m->cfg.dim = dim; });
}

extern "C" ct_module *ct_nn_leaky_relu(double negative_slope) {
    return build(__func__, "LeakyReLU", Kind::LeakyReLU, [&](ct_module *m) { m->cfg.slope = negative_slope; });
}

extern "C" ct_module *ct_nn_elu(double alpha) {
    return build(__func__, "ELU", Kind::ELU, [&](ct_module *m) { m->cfg.slope = alpha; });
}

extern "C" ct_module *ct_nn_prelu(int64_t num_parameters, double init) {
    return build(__func__, "PReLU", Kind::PReLU, [&](ct_module *m) {
        check_nonneg(num_parameters, "num_parameters");
        m->cfg.in = num_parameters;
        // torch.empty(num_parameters), then init.constant_(weight, init): no draw.
        m->weight = own_param(m, "weight", at::full({num_parameters}, init, at::kFloat));
    });
}

// ---- EmbeddingBag --------------------------------------------------------------------------
//
// A built-in kind whose forward takes more than a tensor: ct_nn_forward(m, x)
// is forward(x) (a 2-D input: bags of equal length), and ct_nn_call binds
// (input, offsets=None, per_sample_weights=None) from args and kwargs as
// Python does (see call_embedding_bag). It is not a ct_nn_module_value: it
// has no user forward, and stays a built-in layer for repr, to() and the rest.

extern "C" ct_module *ct_nn_embedding_bag(int64_t num_embeddings, int64_t embedding_dim, const char *mode) {
    return build(__func__, "EmbeddingBag", Kind::EmbeddingBag, [&](ct_module *m) {
        check_nonneg(num_embeddings, "num_embeddings");
        check_nonneg(embedding_dim, "embedding_dim");
        std::string md = mode ? mode : "mean";  // NULL: PyTorch's default
        if (md != "sum" && md != "mean" && md != "max")
            throw Failure{CT_EINVAL, "mode has to be one of sum, mean or max (got '" + md + "')"};
        m->cfg.in = num_embeddings;
        m->cfg.out = embedding_dim;
        m->cfg.mode = md;
        // reset_parameters(): init.normal_(weight); no padding_idx.
        at::Tensor w = at::empty({num_embeddings, embedding_dim}, at::kFloat);
        w.normal_(0.0, 1.0);
        m->weight = own_param(m, "weight", w);
    });
}

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

// EmbeddingBag's forward(input, offsets=None, per_sample_weights=None) on
// value trees: Python's binding of positional and keyword arguments (None
// is an absent tensor), then the same forward as ct_nn_forward's.
ct_value *call_embedding_bag(ct_module *m, const ct_value *args, const ct_value *kwargs) {
    static const char *const kNames[3] = {"input", "offsets", "per_sample_weights"};
    const ct_value *bound[3] = {nullptr, nullptr, nullptr};
    try {
        const std::string fwd = m->type + ".forward()";
        const size_t nargs = ct_value_len(args);
        if (nargs > 3)
            throw Failure{CT_EINVAL, fwd + " takes from 2 to 4 positional arguments but " + std::to_string(nargs + 1) +
                                         " were given"};
        for (size_t i = 0; i < nargs; ++i) bound[i] = ct_value_list_get(args, i);
        for (size_t i = 0; i < ct_value_len(kwargs); ++i) {
            const char *key = nullptr;
            int64_t ikey = 0;
            const ct_value *v = ct_value_dict_at(kwargs, i, &key, &ikey);
            const std::string k = key ? key : std::to_string(ikey);
            int slot = -1;
            for (int j = 0; j < 3; ++j)
                if (k == kNames[j]) slot = j;
            if (slot < 0) throw Failure{CT_EINVAL, fwd + " got an unexpected keyword argument '" + k + "'"};
            if (bound[slot]) throw Failure{CT_EINVAL, fwd + " got multiple values for argument '" + k + "'"};
            bound[slot] = v;
        }
        if (!bound[0]) throw Failure{CT_EINVAL, fwd + " missing 1 required positional argument: 'input'"};
        at::Tensor t[3];
        for (int j = 0; j < 3; ++j) {
            if (!bound[j] || ct_value_kind_of(bound[j]) == CT_VALUE_NONE) {
                if (j == 0) throw Failure{CT_EINVAL, fwd + ": argument 'input' must be a tensor, not None"};
                continue;
            }
            if (ct_value_kind_of(bound[j]) != CT_VALUE_TENSOR)
                throw Failure{CT_EINVAL, fwd + ": argument '" + kNames[j] + "' must be a tensor or None, not a " +
                                             ct_value_kind_name(ct_value_kind_of(bound[j]))};
            t[j] = ct_value_get_tensor(bound[j])->t;
        }
        return ct_value_tensor(ct::wrap_unscoped(embedding_bag_forward(m, t[0], t[1], t[2])));  // steals
    } catch (...) {
        std::string fn;
        try {
            fn = "ct_nn_call: " + where(m);
        } catch (...) {
        }
        ct::fail_exception(fn.empty() ? "ct_nn_call" : fn.c_str());
        return nullptr;
    }
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

// ============================================================================
// torch.nn.utils
// ============================================================================

extern "C" int ct_clip_grad_norm(size_t n, ct_tensor *const *params, double max_norm, double norm_type,
                                 double *total_norm) {
    return ct::status(__func__, [&] {
        at::NoGradGuard no_grad;
        std::vector<at::Tensor> grads = grads_of(n, params, __func__);
        if (grads.empty()) {
            if (total_norm) *total_norm = 0;
            return;
        }
        // _get_total_norm: per-group foreach norms, then the norm of the norms.
        auto groups = group_by_device_dtype(grads);
        std::vector<at::Tensor> norms;
        for (const auto &g : groups)
            for (const at::Tensor &nrm : at::_foreach_norm(g, norm_type)) norms.push_back(nrm.to(grads[0].device()));
        at::Tensor total = at::linalg_vector_norm(at::stack(norms), norm_type);
        // _clip_grads_with_norm_: `max_norm / (total + 1e-6)` is
        // Tensor.__rtruediv__, i.e. reciprocal() * max_norm.
        at::Tensor coef = at::clamp(at::reciprocal(total + 1e-6) * max_norm, std::optional<at::Scalar>(),
                                   std::optional<at::Scalar>(1.0));
        for (auto &g : groups) at::_foreach_mul_(g, coef.to(g[0].device()));
        if (total_norm) *total_norm = total.item<double>();
    });
}

extern "C" int ct_clip_grad_value(size_t n, ct_tensor *const *params, double clip_value) {
    return ct::status(__func__, [&] {
        at::NoGradGuard no_grad;
        std::vector<at::Tensor> grads = grads_of(n, params, __func__);
        for (auto &g : group_by_device_dtype(grads)) {
            at::_foreach_clamp_min_(g, -clip_value);
            at::_foreach_clamp_max_(g, clip_value);
        }
    });
}
