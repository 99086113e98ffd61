// shim/layers_conv.cpp — nn.Conv{1,2,3}d and nn.ConvTranspose{1,2}d:
// construction with PyTorch's initialisation, and their forwards.
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

using ct::Failure;
using namespace ct::nn;

namespace {

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

}  // namespace

// The forward of this family's kinds (module.cpp's builtin_forward dispatches here).
at::Tensor ct::nn::conv_forward(ct_module *m, const at::Tensor &x) {
    const Config &c = m->cfg;
    switch (m->kind) {
    case Kind::Conv1d: {
        int64_t s[1] = {c.stride}, p[1] = {c.padding}, d[1] = {c.dilation};
        return at::conv1d(x, m->weight->t, opt(m->bias), s, p, d, c.groups);
    }
    case Kind::Conv2d: {
        int64_t s[2] = {c.stride, c.stride}, p[2] = {c.padding, c.padding}, d[2] = {c.dilation, c.dilation};
        return at::conv2d(x, m->weight->t, opt(m->bias), s, p, d, c.groups);
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
    default: break;
    }
    throw Failure{CT_ENOTSUP, "no built-in forward for " + m->type};
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
