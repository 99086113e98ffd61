// shim/layers_norm.cpp — nn.BatchNorm{1,2}d, nn.LayerNorm, nn.GroupNorm and
// nn.InstanceNorm{1,2}d: construction, and their forwards line by line as
// Python's (running statistics, momentum None, track_running_stats).
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

using ct::Failure;
using namespace ct::nn;

namespace {

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

}  // namespace

// The forward of this family's kinds (module.cpp's builtin_forward dispatches here).
at::Tensor ct::nn::norm_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::BatchNorm1d:
    case Kind::BatchNorm2d: return batchnorm_forward(m, x);
    case Kind::LayerNorm:
        return at::layer_norm(x, c.sizes, opt(m->weight), opt(m->bias), c.eps,
                              at::globalContext().userEnabledCuDNN());
    case Kind::GroupNorm: return groupnorm_forward(m, x);
    case Kind::InstanceNorm1d:
    case Kind::InstanceNorm2d: return instancenorm_forward(m, x);
    default: break;
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
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
