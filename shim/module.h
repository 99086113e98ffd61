// shim/module.h — the insides of a module (struct ct_module) and the
// helpers the files of modules share: module.cpp (the tree, listings,
// calls, state dicts, moves), one file per family of built-in layers
// (layers_linear.cpp: Linear, Embedding, EmbeddingBag; layers_conv.cpp;
// layers_norm.cpp; layers_pool.cpp: pooling and Upsample;
// layers_activation.cpp: activations, dropout, Flatten, Identity) and
// nn_utils.cpp (torch.nn.utils). Internal to the shim.
//
// A module tree is owned from its root: a module added as a child belongs to
// its parent, and parameters/buffers are unscoped handles owned by the module
// that registered them. Flattened listings (parameters, state entries) are
// cached per module and rebuilt when the module's `version` moves; every
// registration bumps the version of the module and of all its ancestors, so a
// cache is stale exactly when something in that module's subtree changed.
#ifndef CTRIAL_SHIM_MODULE_H
#define CTRIAL_SHIM_MODULE_H

#include "internal.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ctrial/nn.h"

namespace ct::nn {

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

}  // namespace ct::nn

struct ct_module {
    std::string type;
    ct::nn::Kind kind = ct::nn::Kind::User;
    ct::nn::Config cfg;
    ct_forward_fn forward = nullptr;
    ct_forward_value_fn forward_value = nullptr; // a value module (ct_nn_module_value)
    void *user = nullptr;
    void (*user_free)(void *) = nullptr;
    std::vector<ct::nn::Slot> params, buffers;
    std::vector<ct::nn::Child> children;
    ct_module *parent = nullptr;
    bool training = true;
    uint64_t version = 1;
    mutable ct::nn::Listing param_cache, state_cache;
    // Built-in layers keep direct pointers to their own slots: registered
    // handles are never replaced or removed while the module lives.
    ct_tensor *weight = nullptr, *bias = nullptr;
    ct_tensor *running_mean = nullptr, *running_var = nullptr, *num_batches = nullptr;
};

namespace ct::nn {

// ---- module.cpp: checks and names ----
// Like ct::check for tensors: a NULL module keeps a pending error (a failed
// constructor earlier in the chain) or records one.
bool check_module(const ct_module *m, const char *fn, const char *name);
std::string shape_str(const at::Tensor &t);
std::string torch_size(const at::Tensor &t);  // "torch.Size([2, 3])"
std::string fmt_double(double v);
std::string py_float(double v);               // repr(float) as Python writes it
std::string py_tuple(const std::vector<int64_t> &v);
const char *py_bool(bool b);
std::string where(const ct_module *m);        // the module's type and path, for messages
void touch(ct_module *m);                     // bumps the version of m and its ancestors

// ---- module.cpp: construction ----
ct_module *new_module(const char *type, Kind kind);
void destroy(ct_module *m);
// Registers a tensor made here (built-in layers); throws only bad_alloc, after
// which the caller destroys the module and with it the handles so far.
ct_tensor *own_param(ct_module *m, const char *name, at::Tensor t);
ct_tensor *own_buffer(ct_module *m, const char *name, at::Tensor t, bool persistent);
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
int64_t fan_in_of(const at::Tensor &w);
// init.kaiming_uniform_(w, a=math.sqrt(5)), bit-identical to Python's.
void kaiming_uniform_sqrt5(at::Tensor &w);
void check_nonneg(int64_t v, const char *what);   // throws CT_EINVAL "what must be >= 0"
void check_positive(int64_t v, const char *what); // throws CT_EINVAL "what must be > 0"
// A layer without parameters or settings.
ct_module *stateless(const char *fn, const char *type, Kind kind);

inline std::optional<at::Tensor> opt(const ct_tensor *h) {
    if (!h) return std::nullopt;
    return h->t;
}

// ---- the families' forwards (module.cpp's builtin_forward picks one by kind) ----
at::Tensor linear_forward(ct_module *m, const at::Tensor &x);      // layers_linear.cpp
at::Tensor conv_forward(ct_module *m, const at::Tensor &x);        // layers_conv.cpp
at::Tensor norm_forward(ct_module *m, const at::Tensor &x);        // layers_norm.cpp
at::Tensor pool_forward(ct_module *m, const at::Tensor &x);        // layers_pool.cpp
at::Tensor activation_forward(ct_module *m, const at::Tensor &x);  // layers_activation.cpp
// EmbeddingBag's forward(input, offsets=None, per_sample_weights=None) from
// ct_nn_call's value trees (layers_linear.cpp): NEW value or NULL + error.
ct_value *call_embedding_bag(ct_module *m, const ct_value *args, const ct_value *kwargs);

}  // namespace ct::nn

#endif
