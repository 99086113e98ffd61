// shim/value_tensor.cpp — ct_value_tensor: tensor leaves of value trees.
//
// Value trees live in module base, which is pure C and never calls
// libtorch; a tensor leaf carries the functions below (base/value_tensor.h)
// for freeing, sharing, cloning, comparing and reading its tensor.
#include "internal.h"

#include <cstdlib>
#include <cstring>

extern "C" {
#include "base/value_tensor.h"
}

namespace {

void leaf_free(ct_tensor *t) { ct_tensor_free(t); }

ct_tensor *leaf_share(const ct_tensor *t) {
    if (!ct::check(t, "ct_value_copy", "tensor")) return nullptr;
    return ct::wrap_unscoped(t->t);
}

ct_tensor *leaf_clone(const ct_tensor *t) {
    if (!ct::check(t, "ct_value_copy", "tensor")) return nullptr;
    try {
        return ct::wrap_unscoped(t->t.clone());
    } catch (...) {
        ct::fail_exception("ct_value_copy");
        return nullptr;
    }
}

// Same dtype, shape and bytes (NaN equals the same NaN). Copies both to the
// host: equality is for tests and checkpoint checks, not for hot loops.
bool leaf_equal(const ct_tensor *a, const ct_tensor *b) {
    if (a == b) return true;
    if (!a || !b || a->magic != ct::kLive || b->magic != ct::kLive) return false;
    try {
        const at::Tensor &x = a->t, &y = b->t;
        if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes()) return false;
        if (x.numel() == 0) return true; // an empty tensor may have no memory at all
        at::Tensor cx = x.detach().to(at::kCPU).contiguous(), cy = y.detach().to(at::kCPU).contiguous();
        return std::memcmp(cx.data_ptr(), cy.data_ptr(), cx.nbytes()) == 0;
    } catch (...) {
        return false;
    }
}

int64_t leaf_to_doubles(const ct_tensor *t, double **out, bool *is_array) {
    *out = nullptr;
    *is_array = false;
    if (!ct::check(t, "cti_value_tensor_doubles", "tensor")) return ct_last_code();
    try {
        at::Tensor d = t->t.detach().to(at::kCPU, at::kDouble).contiguous();
        int64_t n = d.numel();
        *is_array = d.dim() > 0 && n != 1;
        *out = static_cast<double *>(std::malloc(static_cast<size_t>(n > 0 ? n : 1) * sizeof(double)));
        if (!*out) return ct::fail(CT_ENOMEM, "cti_value_tensor_doubles", "out of host memory");
        if (n > 0) std::memcpy(*out, d.data_ptr<double>(), static_cast<size_t>(n) * sizeof(double));
        return n;
    } catch (...) {
        std::free(*out);
        *out = nullptr;
        return ct::fail_exception("cti_value_tensor_doubles");
    }
}

const cti_value_tensor_ops kLeafOps = {leaf_free, leaf_share, leaf_clone, leaf_equal, leaf_to_doubles};

}  // namespace

extern "C" ct_value *ct_value_tensor(ct_tensor *t) { return cti_value_tensor_leaf(ct_keep(t), &kLeafOps); }
