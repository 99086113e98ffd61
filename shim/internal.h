// shim/internal.h — what every shim translation unit shares: the tensor handle,
// scopes, dtype/device mapping, and the guard that turns C++ exceptions into
// status codes. Internal to ctrial; never included by src/ (which is C).
#ifndef CTRIAL_SHIM_INTERNAL_H
#define CTRIAL_SHIM_INTERNAL_H

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>

#include "ctrial/error.h"
#include "ctrial/tensor.h"

// A handle. Handles come from a pool and are never returned to malloc, so a
// freed handle still reads as freed (magic == kDead) until it is reused much
// later: use-after-free is reported instead of crashing.
struct ct_tensor {
    uint32_t magic;
    at::Tensor t;
    ct_scope *scope;  // owning scope, or nullptr when the caller owns it
    ct_tensor *prev;  // links in the owning scope's list (or the free list)
    ct_tensor *next;
};

struct ct_scope {
    uint32_t magic;
    ct_scope *parent;  // enclosing scope on this thread
    ct_tensor head;    // sentinel of a circular list of owned handles
    size_t count;
};

namespace ct {

// The reduce function of ct_set_grad_reduce (nn.h) on this thread: fn NULL
// when none. grad_reduce(t, max) applies it to t in place (a no-op
// without one); a failure throws.
struct GradReduce {
    int (*fn)(ct_tensor *t, bool max, void *ctx) = nullptr;
    void *ctx = nullptr;
};
extern thread_local GradReduce tl_grad_reduce;
void grad_reduce(at::Tensor &t, bool max);

constexpr uint32_t kLive = 0x7e4503a1u;
constexpr uint32_t kDead = 0xdeadbeefu;

// ---- errors ---------------------------------------------------------------
// Records code + "fn: message" as this thread's last error; returns code.
int fail(int code, const char *fn, const std::string &msg);
// Maps a caught exception to a code and message (c10 errors lose their C++
// backtrace). Returns the code.
int fail_exception(const char *fn);
bool error_pending();

// ---- handles ----------------------------------------------------------------
// Wraps a tensor in a new handle owned by the current scope (or the caller).
ct_tensor *wrap(at::Tensor t);
// A handle owned by nobody's scope (modules, optimizers, values hold these).
ct_tensor *wrap_unscoped(at::Tensor t);
void unlink_from_scope(ct_tensor *h);

// Checks an input handle. On NULL keeps a pending error (the op chain's first
// failure) or records "fn: argument 'name' is NULL"; on a freed handle records
// CT_ESTATE. Returns false if the op must fail.
bool check(const ct_tensor *h, const char *fn, const char *name);
// Same for an optional input: NULL is fine, a freed handle is not.
bool check_opt(const ct_tensor *h, const char *fn, const char *name);

// ---- mapping ----------------------------------------------------------------
bool to_scalar_type(ct_dtype d, at::ScalarType *out);
bool from_scalar_type(at::ScalarType s, ct_dtype *out);
at::TensorOptions options(const ct_topts *o);  // throws on bad values
at::Device to_device(ct_device d);             // throws on bad values
ct_device from_device(const at::Device &d);
std::string describe(const at::Tensor &t);     // "[2, 3] float32 cpu"
at::IntArrayRef dims(int n, const int64_t *v); // throws on bad n / NULL
// A C double as the scalar Python would have written: an integral value
// applied to an integer tensor is an int (t + 5 stays int64), else a float.
at::Scalar scalar_for(const at::Tensor &t, double v);

// ---- dropout -----------------------------------------------------------------
// at::dropout (feature = false) or at::feature_dropout (true): the same
// values and the same use of torch's CPU generator, with the CPU mask drawn
// by vectorized loops instead of ATen's element-at-a-time kernel (ops.cpp).
at::Tensor dropout(const at::Tensor &x, double p, bool train, bool feature);

// Runs f (returning at::Tensor) and wraps the result, turning any exception
// into NULL + error. Every tensor-returning entry point goes through here.
template <class F>
ct_tensor *op(const char *fn, F &&f) {
    try {
        return wrap(f());
    } catch (...) {
        fail_exception(fn);
        return nullptr;
    }
}

// Runs f (returning void) and returns 0, or the code of the caught exception.
template <class F>
int status(const char *fn, F &&f) {
    try {
        f();
        return CT_OK;
    } catch (...) {
        return fail_exception(fn);
    }
}

// Thrown inside op/status bodies to fail with a specific code and message.
struct Failure {
    int code;
    std::string msg;
};

}  // namespace ct

// Input checks at the top of an entry point.
#define CT_IN(x) \
    do { if (!ct::check((x), __func__, #x)) return nullptr; } while (0)
#define CT_IN_OPT(x) \
    do { if (!ct::check_opt((x), __func__, #x)) return nullptr; } while (0)
#define CT_IN_STATUS(x) \
    do { if (!ct::check((x), __func__, #x)) return ct_last_code(); } while (0)
#define CT_IN_OPT_STATUS(x) \
    do { if (!ct::check_opt((x), __func__, #x)) return ct_last_code(); } while (0)

// The tensor behind a checked handle (NULL-safe for optional inputs).
inline at::Tensor T(const ct_tensor *h) { return h ? h->t : at::Tensor(); }

#endif  // CTRIAL_SHIM_INTERNAL_H
