// shim/layers_activation.cpp — the layers without parameters (activations,
// softmaxes, dropout, Flatten, Identity) and nn.PReLU: construction and
// their forwards.
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

using ct::Failure;
using namespace ct::nn;

// The forward of this family's kinds (module.cpp's builtin_forward dispatches here).
at::Tensor ct::nn::activation_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::Dropout: return ct::dropout(x, c.p, m->training, false);
    case Kind::ReLU: return at::relu(x);
    case Kind::GELU: return at::gelu(x, "none");
    case Kind::SiLU: return at::silu(x);
    case Kind::Tanh: return at::tanh(x);
    case Kind::Sigmoid: return at::sigmoid(x);
    case Kind::Flatten: return x.flatten(c.start_dim, c.end_dim);
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
    default: break;
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
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
