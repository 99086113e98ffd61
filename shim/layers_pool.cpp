// shim/layers_pool.cpp — nn.MaxPool2d, nn.AvgPool{1,2}d, the adaptive
// pools and nn.Upsample: construction and their forwards.
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

using ct::Failure;
using namespace ct::nn;

namespace {

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

}  // namespace

// The forward of this family's kinds (module.cpp's builtin_forward dispatches here).
at::Tensor ct::nn::pool_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::MaxPool2d: {
        int64_t k[2] = {c.kernel, c.kernel}, s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding};
        int64_t d[2] = {1, 1};
        return at::max_pool2d(x, k, s, p, d, false);
    }
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
    default: break;
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
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
