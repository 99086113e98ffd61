// shim/layers_linear.cpp — nn.Linear, nn.Embedding and nn.EmbeddingBag:
// construction with PyTorch's initialisation, and their forwards.
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

using ct::Failure;
using namespace ct::nn;

namespace {

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

}  // namespace

// The forward of this family's kinds (module.cpp's builtin_forward dispatches here).
at::Tensor ct::nn::linear_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::Linear: return at::linear(x, m->weight->t, opt(m->bias));
    case Kind::Embedding: return at::embedding(m->weight->t, x, c.padding_idx, false, false);
    case Kind::EmbeddingBag: return embedding_bag_forward(m, x, at::Tensor(), at::Tensor());
    default: break;
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
}

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

// EmbeddingBag's forward(input, offsets=None, per_sample_weights=None) on
// value trees: Python's binding of positional and keyword arguments (None
// is an absent tensor), then the same forward as ct_nn_forward's.
ct_value *ct::nn::call_embedding_bag(ct_module *m, const ct_value *args, const ct_value *kwargs) {
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
