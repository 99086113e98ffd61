// shim/ops.cpp — elementwise math, reductions, linear algebra, convolution,
// pooling, neural-network functions and losses. Each entry point checks its
// inputs (NULL-propagating) and forwards to the ATen function Python's
// torch.* calls, so results are the same bits.
#include "internal.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

extern "C" {
#include "base/mt19937.h"
}

using ct::Failure;

// Entry points of one shape: `ct_NAME(a)` -> EXPR(a->t).
#define UNARY(name, expr)                                          \
    extern "C" ct_tensor *name(const ct_tensor *t) {               \
        CT_IN(t);                                                  \
        return ct::op(__func__, [&] { return expr; });             \
    }
#define BINARY(name, expr)                                         \
    extern "C" ct_tensor *name(const ct_tensor *a, const ct_tensor *b) { \
        CT_IN(a);                                                  \
        CT_IN(b);                                                  \
        return ct::op(__func__, [&] { return expr; });             \
    }
#define WITH_SCALAR(name, expr)                                    \
    extern "C" ct_tensor *name(const ct_tensor *a, double b) {     \
        CT_IN(a);                                                  \
        return ct::op(__func__, [&] { return expr; });             \
    }

namespace {

std::optional<at::Scalar> bound(const at::Tensor &t, double v) {
    if (std::isinf(v)) return std::nullopt;
    return ct::scalar_for(t, v);
}

int64_t reduction_enum(ct_reduction r) {
    switch (r) {
    case CT_REDUCE_MEAN: return at::Reduction::Mean;
    case CT_REDUCE_SUM: return at::Reduction::Sum;
    case CT_REDUCE_NONE: return at::Reduction::None;
    default: break;
    }
    throw Failure{CT_EINVAL, "unknown reduction " + std::to_string(r)};
}

std::vector<int64_t> pair(int64_t v) { return {v, v}; }

}  // namespace

// ============================================================================
// elementwise
// ============================================================================

BINARY(ct_add, at::add(a->t, b->t))
BINARY(ct_sub, at::sub(a->t, b->t))
BINARY(ct_mul, at::mul(a->t, b->t))
BINARY(ct_div, at::div(a->t, b->t))
BINARY(ct_pow, at::pow(a->t, b->t))
BINARY(ct_maximum, at::maximum(a->t, b->t))
BINARY(ct_minimum, at::minimum(a->t, b->t))
WITH_SCALAR(ct_add_scalar, at::add(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_sub_scalar, at::sub(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_mul_scalar, at::mul(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_div_scalar, at::div(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_pow_scalar, at::pow(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_rsub_scalar, at::rsub(a->t, ct::scalar_for(a->t, b)))

UNARY(ct_neg, at::neg(t->t))
UNARY(ct_abs, at::abs(t->t))
UNARY(ct_exp, at::exp(t->t))
UNARY(ct_log, at::log(t->t))
UNARY(ct_sqrt, at::sqrt(t->t))
UNARY(ct_rsqrt, at::rsqrt(t->t))
UNARY(ct_tanh, at::tanh(t->t))
UNARY(ct_sigmoid, at::sigmoid(t->t))
UNARY(ct_sin, at::sin(t->t))
UNARY(ct_cos, at::cos(t->t))
UNARY(ct_square, at::square(t->t))
UNARY(ct_reciprocal, at::reciprocal(t->t))
UNARY(ct_sign, at::sign(t->t))
UNARY(ct_floor, at::floor(t->t))
UNARY(ct_ceil, at::ceil(t->t))
UNARY(ct_round, at::round(t->t))
UNARY(ct_isnan, at::isnan(t->t))
UNARY(ct_isfinite, at::isfinite(t->t))
UNARY(ct_logical_not, at::logical_not(t->t))

BINARY(ct_eq, at::eq(a->t, b->t))
BINARY(ct_ne, at::ne(a->t, b->t))
BINARY(ct_lt, at::lt(a->t, b->t))
BINARY(ct_le, at::le(a->t, b->t))
BINARY(ct_gt, at::gt(a->t, b->t))
BINARY(ct_ge, at::ge(a->t, b->t))
WITH_SCALAR(ct_eq_scalar, at::eq(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_ne_scalar, at::ne(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_lt_scalar, at::lt(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_le_scalar, at::le(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_gt_scalar, at::gt(a->t, ct::scalar_for(a->t, b)))
WITH_SCALAR(ct_ge_scalar, at::ge(a->t, ct::scalar_for(a->t, b)))

extern "C" ct_tensor *ct_where(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b) {
    CT_IN(cond);
    CT_IN(a);
    CT_IN(b);
    return ct::op(__func__, [&] {
        if (cond->t.scalar_type() != at::kBool)
            throw Failure{CT_EDTYPE, "condition must be a bool tensor, got " + ct::describe(cond->t)};
        return at::where(cond->t, a->t, b->t);
    });
}

extern "C" ct_tensor *ct_clamp(const ct_tensor *t, double min, double max) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        if (std::isinf(min) && std::isinf(max) && min < 0 && max > 0) return t->t.clone();
        return at::clamp(t->t, bound(t->t, min), bound(t->t, max));
    });
}

extern "C" int ct_add_(ct_tensor *t, const ct_tensor *b, double alpha) {
    CT_IN_STATUS(t);
    CT_IN_STATUS(b);
    return ct::status(__func__, [&] { t->t.add_(b->t, ct::scalar_for(t->t, alpha)); });
}
extern "C" int ct_mul_(ct_tensor *t, const ct_tensor *b) {
    CT_IN_STATUS(t);
    CT_IN_STATUS(b);
    return ct::status(__func__, [&] { t->t.mul_(b->t); });
}
extern "C" int ct_mul_scalar_(ct_tensor *t, double b) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.mul_(ct::scalar_for(t->t, b)); });
}
extern "C" int ct_add_scalar_(ct_tensor *t, double b) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.add_(ct::scalar_for(t->t, b)); });
}
extern "C" int ct_fill_(ct_tensor *t, double value) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.fill_(value); });
}
extern "C" int ct_zero_(ct_tensor *t) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.zero_(); });
}
extern "C" int ct_uniform_(ct_tensor *t, double from, double to) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.uniform_(from, to); });
}
extern "C" int ct_normal_(ct_tensor *t, double mean, double std) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.normal_(mean, std); });
}
extern "C" int ct_clamp_(ct_tensor *t, double min, double max) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        if (std::isinf(min) && std::isinf(max) && min < 0 && max > 0) return;
        t->t.clamp_(bound(t->t, min), bound(t->t, max));
    });
}

// ============================================================================
// reductions
// ============================================================================

UNARY(ct_sum, at::sum(t->t))
UNARY(ct_mean, at::mean(t->t))
UNARY(ct_max, at::max(t->t))
UNARY(ct_min, at::min(t->t))

extern "C" ct_tensor *ct_sum_dim(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::sum(t->t, ct::dims(ndims, dims), keepdim); });
}

extern "C" ct_tensor *ct_mean_dim(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::mean(t->t, ct::dims(ndims, dims), keepdim); });
}

extern "C" ct_tensor *ct_var(const ct_tensor *t, int ndims, const int64_t *dims, double correction,
                             bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        at::OptionalIntArrayRef d = ndims > 0 ? at::OptionalIntArrayRef(ct::dims(ndims, dims)) : std::nullopt;
        return at::var(t->t, d, at::Scalar(correction), keepdim);
    });
}

extern "C" ct_tensor *ct_std(const ct_tensor *t, int ndims, const int64_t *dims, double correction,
                             bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        at::OptionalIntArrayRef d = ndims > 0 ? at::OptionalIntArrayRef(ct::dims(ndims, dims)) : std::nullopt;
        return at::std(t->t, d, at::Scalar(correction), keepdim);
    });
}

extern "C" ct_tensor *ct_logsumexp(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::logsumexp(t->t, ct::dims(ndims, dims), keepdim); });
}

extern "C" ct_tensor *ct_amax(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::amax(t->t, ct::dims(ndims, dims), keepdim); });
}

extern "C" ct_tensor *ct_amin(const ct_tensor *t, int ndims, const int64_t *dims, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::amin(t->t, ct::dims(ndims, dims), keepdim); });
}

static int values_indices(const char *fn, std::tuple<at::Tensor, at::Tensor> r, ct_tensor **values,
                          ct_tensor **indices) {
    if (values) *values = ct::wrap(std::get<0>(r));
    if (indices) *indices = ct::wrap(std::get<1>(r));
    return CT_OK;
}

extern "C" int ct_max_dim(const ct_tensor *t, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { values_indices(__func__, at::max(t->t, dim, keepdim), values, indices); });
}

extern "C" int ct_min_dim(const ct_tensor *t, int dim, bool keepdim, ct_tensor **values, ct_tensor **indices) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { values_indices(__func__, at::min(t->t, dim, keepdim), values, indices); });
}

extern "C" ct_tensor *ct_argmax(const ct_tensor *t, int dim, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::argmax(t->t, dim, keepdim); });
}

extern "C" ct_tensor *ct_argmin(const ct_tensor *t, int dim, bool keepdim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::argmin(t->t, dim, keepdim); });
}

extern "C" ct_tensor *ct_norm(const ct_tensor *t, double p) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::norm(t->t, at::Scalar(p)); });
}

extern "C" ct_tensor *ct_topk(const ct_tensor *t, int64_t k, int dim, bool largest, bool sorted,
                              ct_tensor **indices) {
    CT_IN(t);
    try {
        auto r = at::topk(t->t, k, dim, largest, sorted);
        ct_tensor *v = ct::wrap(std::get<0>(r));
        if (indices) *indices = ct::wrap(std::get<1>(r));
        return v;
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" ct_tensor *ct_cumsum(const ct_tensor *t, int dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::cumsum(t->t, dim); });
}

extern "C" ct_tensor *ct_multinomial(const ct_tensor *probs, int64_t num_samples, bool replacement) {
    CT_IN(probs);
    return ct::op(__func__, [&] { return at::multinomial(probs->t, num_samples, replacement); });
}

// ============================================================================
// linear algebra, convolution, pooling
// ============================================================================

BINARY(ct_matmul, at::matmul(a->t, b->t))
BINARY(ct_mm, at::mm(a->t, b->t))
BINARY(ct_bmm, at::bmm(a->t, b->t))

extern "C" ct_tensor *ct_linear(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias) {
    CT_IN(x);
    CT_IN(weight);
    CT_IN_OPT(bias);
    return ct::op(__func__, [&] {
        if (weight->t.dim() != 2)
            throw Failure{CT_ESHAPE, "weight must be 2-D [out, in], got " + ct::describe(weight->t)};
        if (x->t.dim() == 0 || x->t.size(-1) != weight->t.size(1))
            throw Failure{CT_ESHAPE, "input " + ct::describe(x->t) + " does not match weight " +
                                         ct::describe(weight->t) + " (last dim must be " +
                                         std::to_string(weight->t.size(1)) + ")"};
        return at::linear(x->t, weight->t, T(bias));
    });
}

extern "C" ct_tensor *ct_conv1d(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                                int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
    CT_IN(x);
    CT_IN(weight);
    CT_IN_OPT(bias);
    return ct::op(__func__, [&] {
        return at::conv1d(x->t, weight->t, T(bias), {stride}, {padding}, {dilation}, groups);
    });
}

extern "C" ct_tensor *ct_conv2d(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                                int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
    CT_IN(x);
    CT_IN(weight);
    CT_IN_OPT(bias);
    return ct::op(__func__, [&] {
        return at::conv2d(x->t, weight->t, T(bias), pair(stride), pair(padding), pair(dilation), groups);
    });
}

extern "C" ct_tensor *ct_conv2d_ex(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                                   const int64_t stride[2], const int64_t padding[2],
                                   const int64_t dilation[2], int64_t groups) {
    CT_IN(x);
    CT_IN(weight);
    CT_IN_OPT(bias);
    return ct::op(__func__, [&] {
        if (!stride || !padding || !dilation) throw Failure{CT_EINVAL, "stride, padding and dilation must not be NULL"};
        return at::conv2d(x->t, weight->t, T(bias), at::IntArrayRef(stride, 2), at::IntArrayRef(padding, 2),
                          at::IntArrayRef(dilation, 2), groups);
    });
}

extern "C" ct_tensor *ct_max_pool1d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    CT_IN(x);
    return ct::op(__func__, [&] {
        return at::max_pool1d(x->t, {kernel}, {stride > 0 ? stride : kernel}, {padding});
    });
}

extern "C" ct_tensor *ct_max_pool2d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    CT_IN(x);
    return ct::op(__func__, [&] {
        return at::max_pool2d(x->t, pair(kernel), pair(stride > 0 ? stride : kernel), pair(padding));
    });
}

extern "C" ct_tensor *ct_avg_pool2d(const ct_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    CT_IN(x);
    return ct::op(__func__, [&] {
        return at::avg_pool2d(x->t, pair(kernel), pair(stride > 0 ? stride : kernel), pair(padding));
    });
}

extern "C" ct_tensor *ct_adaptive_avg_pool2d(const ct_tensor *x, int64_t out_h, int64_t out_w) {
    CT_IN(x);
    return ct::op(__func__, [&] { return at::adaptive_avg_pool2d(x->t, {out_h, out_w}); });
}

// ============================================================================
// neural-network functions
// ============================================================================

UNARY(ct_relu, at::relu(t->t))
UNARY(ct_gelu, at::gelu(t->t))
UNARY(ct_gelu_tanh, at::gelu(t->t, "tanh"))
UNARY(ct_silu, at::silu(t->t))

extern "C" ct_tensor *ct_leaky_relu(const ct_tensor *t, double negative_slope) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::leaky_relu(t->t, negative_slope); });
}

extern "C" ct_tensor *ct_softmax(const ct_tensor *t, int dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::softmax(t->t, dim); });
}

extern "C" ct_tensor *ct_log_softmax(const ct_tensor *t, int dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::log_softmax(t->t, dim); });
}

// ---- dropout ---------------------------------------------------------------
//
// ATen's dropout on the CPU (Dropout.cpp, _dropout_impl) is
//     noise = empty_like(x) (feature dropout: empty([N, C, 1, ...]));
//     noise.bernoulli_(1 - p); noise.div_(1 - p); return x * noise;
// and bernoulli_ draws one element at a time from the default generator's
// MT19937: two 32-bit outputs per element, through a per-element callback.
// On a small model that is most of the step (a [32, 256] mask: 60 us of an
// MLP step of 250). Here the noise is drawn on a copy of the generator's
// state by base/mt19937.c's vectorized loops, the state is put back
// advanced by what ATen would have taken, and x * noise is the same ATen
// op: the same bits, the same autograd graph, the same generator after.
// tests/layers' dropout parity case holds it to Python's F.dropout.
namespace {

// ATen asks MKL's VSL (another stream) instead of the MT19937 on Intel CPUs
// when libtorch has MKL (DistributionKernels.cpp, bernoulli_scalar_kernel):
// there ATen's own kernel runs.
bool aten_bernoulli_is_mt19937() {
    static const bool mt = [] {
        if (!at::hasMKL()) return true;
#if defined(__x86_64__) || defined(__i386__)
        unsigned a, b, c, d;
        char vendor[13] = "";
        if (__get_cpuid(0, &a, &b, &c, &d)) {
            memcpy(vendor, &b, 4);
            memcpy(vendor + 4, &d, 4);
            memcpy(vendor + 8, &c, 4);
        }
        return strcmp(vendor, "GenuineIntel") != 0;
#else
        return true;
#endif
    }();
    return mt;
}

// noise.bernoulli_(p1m).div_(p1m) for a contiguous float32 CPU tensor.
// false, with nothing drawn, when the generator's state is not one this
// mapping knows (never after seeding and drawing).
bool draw_noise(at::Tensor &noise, double p1m) {
    constexpr int N = at::MERSENNE_STATE_N;
    auto *gen = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
    std::lock_guard<std::mutex> lock(gen->mutex_);
    at::mt19937 engine = gen->engine();
    at::mt19937_data_pod d = engine.data();
    // at::mt19937 hands out state_[next_] while --left_ stays above 0, and
    // twists when it reaches 0: left_ - 1 outputs remain before the twist.
    cti_mt19937 mt;
    if (d.left_ == 1) mt.pos = N;
    else if (d.left_ > 1 && d.next_ + d.left_ - 1 == (uint32_t)N) mt.pos = (int)d.next_;
    else return false;
    static_assert(sizeof mt.key == sizeof d.state_, "MT19937 states of one size");
    memcpy(mt.key, d.state_.data(), sizeof mt.key);
    // div_(1 - p) on float noise divides by the float (1 - p)
    cti_mt19937_bernoulli_f32(&mt, noise.data_ptr<float>(), (size_t)noise.numel(), p1m, 1.0f / (float)p1m);
    memcpy(d.state_.data(), mt.key, sizeof mt.key);
    d.next_ = (uint32_t)mt.pos;
    d.left_ = N - mt.pos + 1;
    engine.set_data(d);
    gen->set_engine(engine);
    return true;
}

}  // namespace

at::Tensor ct::dropout(const at::Tensor &x, double p, bool train, bool feature) {
    if (train && p > 0 && p < 1 && x.numel() > 0 && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
        x.layout() == at::kStrided && (!feature || x.dim() >= 2) && aten_bernoulli_is_mt19937()) {
        at::Tensor noise;
        if (feature) {
            std::vector<int64_t> sizes(x.dim(), 1);
            sizes[0] = x.size(0);
            sizes[1] = x.size(1);
            noise = at::empty(sizes, x.options());
        } else {
            noise = at::empty_like(x);
        }
        // ATen fills the noise in its memory order: the fast path takes the
        // layout where that is the index order
        if (noise.is_contiguous() && draw_noise(noise, 1 - p)) return x.mul(noise);
    }
    return feature ? at::feature_dropout(x, p, train) : at::dropout(x, p, train);
}

extern "C" ct_tensor *ct_dropout(const ct_tensor *t, double p, bool training) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        if (p < 0 || p > 1) throw Failure{CT_EINVAL, "dropout probability has to be between 0 and 1, but got " + std::to_string(p)};
        return ct::dropout(t->t, p, training, false);
    });
}

extern "C" ct_tensor *ct_batch_norm(const ct_tensor *x, const ct_tensor *weight, const ct_tensor *bias,
                                    ct_tensor *running_mean, ct_tensor *running_var, bool training,
                                    double momentum, double eps) {
    CT_IN(x);
    CT_IN_OPT(weight);
    CT_IN_OPT(bias);
    CT_IN_OPT(running_mean);
    CT_IN_OPT(running_var);
    return ct::op(__func__, [&] {
        if (!training && (!running_mean || !running_var))
            throw Failure{CT_EINVAL, "evaluation mode needs running_mean and running_var"};
        // F.batch_norm refuses a training batch with one value per channel.
        if (training) {
            int64_t per_channel = x->t.numel() / std::max<int64_t>(1, x->t.dim() > 1 ? x->t.size(1) : 1);
            if (per_channel <= 1)
                throw Failure{CT_ESHAPE, "expected more than 1 value per channel when training, got input " +
                                             ct::describe(x->t)};
        }
        return at::batch_norm(x->t, T(weight), T(bias), T(running_mean), T(running_var), training, momentum,
                              eps, /*cudnn_enabled=*/true);
    });
}

extern "C" ct_tensor *ct_layer_norm(const ct_tensor *x, int ndims, const int64_t *normalized_shape,
                                    const ct_tensor *weight, const ct_tensor *bias, double eps) {
    CT_IN(x);
    CT_IN_OPT(weight);
    CT_IN_OPT(bias);
    return ct::op(__func__, [&] {
        return at::layer_norm(x->t, ct::dims(ndims, normalized_shape), T(weight), T(bias), eps);
    });
}

extern "C" ct_tensor *ct_embedding(const ct_tensor *weight, const ct_tensor *indices, int64_t padding_idx) {
    CT_IN(weight);
    CT_IN(indices);
    return ct::op(__func__, [&] {
        if (indices->t.scalar_type() != at::kLong && indices->t.scalar_type() != at::kInt)
            throw Failure{CT_EDTYPE, "indices must be int64 or int32, got " + ct::describe(indices->t)};
        return at::embedding(weight->t, indices->t, padding_idx < 0 ? -1 : padding_idx);
    });
}

extern "C" ct_tensor *ct_scaled_dot_product_attention(const ct_tensor *q, const ct_tensor *k,
                                                      const ct_tensor *v, const ct_tensor *mask,
                                                      double dropout_p, bool is_causal, double scale) {
    CT_IN(q);
    CT_IN(k);
    CT_IN(v);
    CT_IN_OPT(mask);
    return ct::op(__func__, [&] {
        std::optional<at::Tensor> m = mask ? std::optional<at::Tensor>(mask->t) : std::nullopt;
        std::optional<double> s = scale > 0 ? std::optional<double>(scale) : std::nullopt;
        return at::scaled_dot_product_attention(q->t, k->t, v->t, m, dropout_p, is_causal, s);
    });
}

extern "C" ct_tensor *ct_one_hot(const ct_tensor *indices, int64_t num_classes) {
    CT_IN(indices);
    return ct::op(__func__, [&] { return at::one_hot(indices->t, num_classes); });
}

// ============================================================================
// losses
// ============================================================================

extern "C" ct_cross_entropy_opts ct_cross_entropy_defaults(void) {
    ct_cross_entropy_opts o;
    o.weight = nullptr;
    o.ignore_index = -100;
    o.label_smoothing = 0.0;
    o.reduction = CT_REDUCE_MEAN;
    return o;
}

extern "C" ct_tensor *ct_cross_entropy(const ct_tensor *logits, const ct_tensor *target) {
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    return ct_cross_entropy_ex(logits, target, &o);
}

// Class-index targets must be integers of the logits' shape minus the class
// dim; say so plainly instead of libtorch's kernel-level message.
static void check_class_targets(const at::Tensor &logits, const at::Tensor &target) {
    if (!at::isFloatingType(target.scalar_type())) {
        if (target.scalar_type() != at::kLong)
            throw Failure{CT_EDTYPE, "class-index targets must be int64, got " + ct::describe(target)};
        if (logits.dim() == 0 || target.dim() != logits.dim() - 1)
            throw Failure{CT_ESHAPE, "targets " + ct::describe(target) + " do not match logits " +
                                         ct::describe(logits) + " (expected logits [N, C], targets [N])"};
    } else if (logits.dim() > 0 && target.dim() == logits.dim() - 1) {
        throw Failure{CT_EDTYPE, "class-index targets must be int64, got " + ct::describe(target) +
                                     " (probability targets need the logits' shape " + ct::describe(logits) + ")"};
    } else if (!target.sizes().equals(logits.sizes())) {
        throw Failure{CT_ESHAPE, "probability targets " + ct::describe(target) + " must have the logits' shape " +
                                     ct::describe(logits)};
    }
}

extern "C" ct_tensor *ct_cross_entropy_ex(const ct_tensor *logits, const ct_tensor *target,
                                          const ct_cross_entropy_opts *o) {
    CT_IN(logits);
    CT_IN(target);
    ct_cross_entropy_opts def = ct_cross_entropy_defaults();
    if (!o) o = &def;
    CT_IN_OPT(o->weight);
    return ct::op(__func__, [&] {
        check_class_targets(logits->t, target->t);
        return at::cross_entropy_loss(logits->t, target->t, T(o->weight), reduction_enum(o->reduction),
                                      o->ignore_index, o->label_smoothing);
    });
}

extern "C" ct_tensor *ct_nll_loss(const ct_tensor *log_probs, const ct_tensor *target,
                                  const ct_cross_entropy_opts *o) {
    CT_IN(log_probs);
    CT_IN(target);
    ct_cross_entropy_opts def = ct_cross_entropy_defaults();
    if (!o) o = &def;
    CT_IN_OPT(o->weight);
    return ct::op(__func__, [&] {
        if (at::isFloatingType(target->t.scalar_type()))
            throw Failure{CT_EDTYPE, "nll_loss targets must be int64 class indices, got " + ct::describe(target->t)};
        check_class_targets(log_probs->t, target->t);
        return at::nll_loss_nd(log_probs->t, target->t, T(o->weight), reduction_enum(o->reduction),
                               o->ignore_index);
    });
}

static void check_same_shape(const at::Tensor &input, const at::Tensor &target) {
    if (!input.sizes().equals(target.sizes()))
        throw Failure{CT_ESHAPE, "input " + ct::describe(input) + " and target " + ct::describe(target) +
                                     " must have the same shape"};
}

extern "C" ct_tensor *ct_mse_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction r) {
    CT_IN(input);
    CT_IN(target);
    return ct::op(__func__, [&] {
        check_same_shape(input->t, target->t);
        return at::mse_loss(input->t, target->t, reduction_enum(r));
    });
}

extern "C" ct_tensor *ct_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction r) {
    CT_IN(input);
    CT_IN(target);
    return ct::op(__func__, [&] {
        check_same_shape(input->t, target->t);
        return at::l1_loss(input->t, target->t, reduction_enum(r));
    });
}

extern "C" ct_tensor *ct_smooth_l1_loss(const ct_tensor *input, const ct_tensor *target, ct_reduction r,
                                        double beta) {
    CT_IN(input);
    CT_IN(target);
    return ct::op(__func__, [&] {
        check_same_shape(input->t, target->t);
        if (beta < 0) throw Failure{CT_EINVAL, "beta must be non-negative, got " + std::to_string(beta)};
        // F.smooth_l1_loss switches to l1_loss at beta == 0; so do we.
        if (beta == 0) return at::l1_loss(input->t, target->t, reduction_enum(r));
        return at::smooth_l1_loss(input->t, target->t, reduction_enum(r), beta);
    });
}

extern "C" ct_tensor *ct_bce_with_logits(const ct_tensor *logits, const ct_tensor *target,
                                         const ct_tensor *weight, const ct_tensor *pos_weight, ct_reduction r) {
    CT_IN(logits);
    CT_IN(target);
    CT_IN_OPT(weight);
    CT_IN_OPT(pos_weight);
    return ct::op(__func__, [&] {
        check_same_shape(logits->t, target->t);
        return at::binary_cross_entropy_with_logits(logits->t, target->t, T(weight), T(pos_weight),
                                                    reduction_enum(r));
    });
}
