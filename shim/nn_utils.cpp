// shim/nn_utils.cpp — torch.nn.utils: clip_grad_norm_ and clip_grad_value_,
// with Python's grouping by device and dtype.
#include "module.h"

#include <cmath>
#include <string>
#include <vector>

#include <ATen/native/ForeachUtils.h>
#include <c10/core/GradMode.h>

using ct::Failure;
using namespace ct::nn;

namespace {

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
// torch.nn.utils
// ============================================================================

extern "C" int ct_clip_grad_norm(size_t n, ct_tensor *const *params, double max_norm, double norm_type,
                                 double *total_norm) {
    return ct::status(__func__, [&] {
        at::NoGradGuard no_grad;
        std::vector<at::Tensor> grads = grads_of(n, params, __func__);
        bool split = ct::tl_grad_reduce.fn != nullptr; /* every process must reduce, with gradients or not */
        if (grads.empty() && !split) {
            if (total_norm) *total_norm = 0;
            return;
        }
        // _get_total_norm: per-group foreach norms, then the norm of the norms.
        auto groups = group_by_device_dtype(grads);
        std::vector<at::Tensor> norms;
        for (const auto &g : groups)
            for (const at::Tensor &nrm : at::_foreach_norm(g, norm_type)) norms.push_back(nrm.to(grads[0].device()));
        at::Tensor total;
        if (split) {
            // Split across processes: this process's part as sum |g|^p (or
            // its largest |g|), combined with the others', then the root.
            bool inf = std::isinf(norm_type);
            // On the host (a process without gradients has no device tensor).
            at::Tensor part = norms.empty() ? at::zeros({}, at::kFloat)
                              : inf ? at::stack(norms).max().to(at::kCPU, at::kFloat)
                                    : at::stack(norms).to(at::kFloat).pow(norm_type).sum().to(at::kCPU);
            ct::grad_reduce(part, inf);
            total = inf ? part : part.pow(1.0 / norm_type);
            if (!grads.empty()) total = total.to(grads[0].device(), grads[0].scalar_type());
        } else {
            total = at::linalg_vector_norm(at::stack(norms), norm_type);
        }
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
