// shim/core.cpp — libtorch's exceptions as ctrial errors, the handle pool,
// scopes, dtype/device mapping, grad-mode guards, RNG and threads.
#include "internal.h"
#include "ctrial/nn.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

// ============================================================================
// errors
// ============================================================================

namespace {
std::string first_lines(std::string s) {
    // c10 messages may carry trailing blank lines; keep the text, trim the end.
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

bool contains(const std::string &s, const char *needle) { return s.find(needle) != std::string::npos; }

int classify(const std::string &m) {
    // CUDA's "out of memory"; the CPU allocator's "can't allocate memory" (or
    // "not enough memory" in older releases), raised as a plain c10::Error.
    if (contains(m, "out of memory") || contains(m, "can't allocate memory") || contains(m, "not enough memory"))
        return CT_ENOMEM;
    if (contains(m, "device") || contains(m, "CUDA") || contains(m, "cuda")) return CT_EDEVICE;
    if (contains(m, "dtype") || contains(m, "scalar type") || contains(m, "Scalar type") ||
        contains(m, "not implemented for"))
        return CT_EDTYPE;
    if (contains(m, "out of range") || contains(m, "out of bounds") || contains(m, "must be smaller than"))
        return CT_EINDEX;
    if (contains(m, "shape") || contains(m, "size") || contains(m, "dimension") ||
        contains(m, "Expected") || contains(m, "expected"))
        return CT_ESHAPE;
    return CT_ETORCH;
}
}  // namespace

namespace ct {

// The error state is base's (src/base/error.c), so that pure-C code links
// without libtorch; the shim records its failures through the C API.
int fail(int code, const char *fn, const std::string &msg) {
    return fn ? ct_set_error(code, "%s: %s", fn, msg.c_str()) : ct_set_error(code, "%s", msg.c_str());
}

bool error_pending() { return ct_last_code() != CT_OK; }

int fail_exception(const char *fn) {
    try {
        throw;
    } catch (const Failure &f) {
        return fail(f.code, fn, f.msg);
    } catch (const c10::OutOfMemoryError &e) {
        return fail(CT_ENOMEM, fn, first_lines(e.msg()));
    } catch (const c10::IndexError &e) {
        return fail(CT_EINDEX, fn, first_lines(e.msg()));
    } catch (const c10::TypeError &e) {
        return fail(CT_EDTYPE, fn, first_lines(e.msg()));
    } catch (const c10::NotImplementedError &e) {
        // "... not implemented for 'Long'": an op that has no kernel for
        // this dtype, which is the caller's dtype problem.
        std::string m = first_lines(e.msg());
        return fail(contains(m, "not implemented for") ? CT_EDTYPE : CT_ENOTSUP, fn, m);
    } catch (const c10::ValueError &e) {
        std::string m = first_lines(e.msg());
        return fail(classify(m) == CT_ETORCH ? CT_EINVAL : classify(m), fn, m);
    } catch (const c10::Error &e) {
        std::string m = first_lines(e.msg());
        return fail(classify(m), fn, m);
    } catch (const std::bad_alloc &) {
        return fail(CT_ENOMEM, fn, "out of host memory");
    } catch (const std::exception &e) {
        return fail(CT_ETORCH, fn, first_lines(e.what()));
    } catch (...) {
        return fail(CT_ETORCH, fn, "unknown C++ exception");
    }
}

bool check(const ct_tensor *h, const char *fn, const char *name) {
    if (!h) {
        if (!error_pending()) fail(CT_EINVAL, fn, std::string("argument '") + name + "' is NULL");
        return false;
    }
    if (h->magic != kLive) {
        fail(CT_ESTATE, fn, std::string("argument '") + name + "' is a freed tensor");
        return false;
    }
    if (!h->t.defined()) {
        fail(CT_ESTATE, fn, std::string("argument '") + name + "' is an undefined tensor");
        return false;
    }
    return true;
}

bool check_opt(const ct_tensor *h, const char *fn, const char *name) {
    return h == nullptr || check(h, fn, name);
}

}  // namespace ct

// ============================================================================
// the handle pool and scopes
// ============================================================================

namespace {

// Freed handles wait in a FIFO before reuse so that a stale pointer keeps
// reading as freed for a long while.
struct Pool {
    std::mutex mu;
    ct_tensor *free_head = nullptr;  // oldest freed
    ct_tensor *free_tail = nullptr;  // newest freed
    size_t free_count = 0;
    std::vector<ct_tensor *> slabs;
};
constexpr size_t kSlab = 1024;
constexpr size_t kQuarantine = 4096;  // reuse only when this many are waiting

Pool &pool() {
    static Pool *p = new Pool();  // never destroyed: handles may outlive main()
    return *p;
}
std::atomic<size_t> g_live{0};
thread_local ct_scope *tl_scope = nullptr;

ct_tensor *pool_get() {
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.free_count <= kQuarantine) {
        auto *slab = static_cast<ct_tensor *>(::operator new(sizeof(ct_tensor) * kSlab));
        p.slabs.push_back(slab);
        for (size_t i = 0; i < kSlab; ++i) {
            ct_tensor *h = &slab[i];
            h->magic = ct::kDead;
            h->next = nullptr;
            if (p.free_tail) p.free_tail->next = h; else p.free_head = h;
            p.free_tail = h;
        }
        // Fresh slab entries are appended at the tail, so older freed handles
        // are handed out first; fresh ones become eligible in turn.
        p.free_count += kSlab;
    }
    ct_tensor *h = p.free_head;
    p.free_head = h->next;
    if (!p.free_head) p.free_tail = nullptr;
    p.free_count--;
    return h;
}

void pool_put(ct_tensor *h) {
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.mu);
    h->next = nullptr;
    if (p.free_tail) p.free_tail->next = h; else p.free_head = h;
    p.free_tail = h;
    p.free_count++;
}

ct_tensor *new_handle(at::Tensor t, ct_scope *scope) {
    ct_tensor *h = pool_get();
    new (&h->t) at::Tensor(std::move(t));
    h->magic = ct::kLive;
    h->scope = nullptr;
    h->prev = h->next = nullptr;
    g_live.fetch_add(1, std::memory_order_relaxed);
    if (scope) {
        h->scope = scope;
        h->prev = scope->head.prev;
        h->next = &scope->head;
        scope->head.prev->next = h;
        scope->head.prev = h;
        scope->count++;
    }
    return h;
}

void destroy_handle(ct_tensor *h) {
    ct::unlink_from_scope(h);
    h->t.~Tensor();
    h->magic = ct::kDead;
    g_live.fetch_sub(1, std::memory_order_relaxed);
    pool_put(h);
}

}  // namespace

namespace ct {
ct_tensor *wrap(at::Tensor t) { return new_handle(std::move(t), tl_scope); }
ct_tensor *wrap_unscoped(at::Tensor t) { return new_handle(std::move(t), nullptr); }

void unlink_from_scope(ct_tensor *h) {
    if (!h->scope) return;
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->scope->count--;
    h->scope = nullptr;
    h->prev = h->next = nullptr;
}
}  // namespace ct

extern "C" void ct_tensor_free(ct_tensor *t) {
    if (!t) return;
    if (t->magic != ct::kLive) {
        ct::fail(CT_ESTATE, __func__, "tensor freed twice (or not a tensor)");
        return;
    }
    destroy_handle(t);
}

// Scopes come from a pool for the same reason handles do: ending a scope
// twice must read "ended twice", not freed memory. One scope per batch makes
// reuse the common case anyway.
namespace {
std::mutex g_scope_mu;
std::deque<ct_scope *> *g_scope_free = new std::deque<ct_scope *>();  // never destroyed
constexpr size_t kScopeQuarantine = 64;

ct_scope *scope_get() {
    std::lock_guard<std::mutex> lock(g_scope_mu);
    if (g_scope_free->size() > kScopeQuarantine) {
        ct_scope *s = g_scope_free->front();
        g_scope_free->pop_front();
        return s;
    }
    return new (std::nothrow) ct_scope();
}

void scope_put(ct_scope *s) {
    std::lock_guard<std::mutex> lock(g_scope_mu);
    g_scope_free->push_back(s);
}
}  // namespace

extern "C" ct_scope *ct_scope_begin(void) {
    ct_scope *s = scope_get();
    if (!s) {
        ct::fail(CT_ENOMEM, __func__, "out of host memory");
        return nullptr;
    }
    s->magic = ct::kLive;
    s->parent = tl_scope;
    s->head.prev = s->head.next = &s->head;
    s->count = 0;
    tl_scope = s;
    return s;
}

static void end_one(ct_scope *s) {
    while (s->head.next != &s->head) destroy_handle(s->head.next);
    tl_scope = s->parent;
    s->magic = ct::kDead;
    scope_put(s);
}

extern "C" void ct_scope_end(ct_scope *s) {
    if (!s) return;
    if (s->magic != ct::kLive) {
        ct::fail(CT_ESTATE, __func__, "scope ended twice (or not a scope)");
        return;
    }
    // End inner scopes first; a scope from another thread is not on our
    // chain and is ended on its own.
    bool on_chain = false;
    for (ct_scope *c = tl_scope; c; c = c->parent)
        if (c == s) { on_chain = true; break; }
    if (on_chain)
        while (tl_scope != s) end_one(tl_scope);
    ct_scope *saved = tl_scope;
    end_one(s);
    if (!on_chain) tl_scope = saved;
}

extern "C" size_t ct_scope_size(const ct_scope *s) { return s && s->magic == ct::kLive ? s->count : 0; }

namespace ct {
thread_local GradReduce tl_grad_reduce;

void grad_reduce(at::Tensor &t, bool max) {
    if (!tl_grad_reduce.fn) return;
    ct_tensor *h = wrap_unscoped(t);
    int rc = tl_grad_reduce.fn(h, max, tl_grad_reduce.ctx);
    if (rc == CT_OK) t = h->t;
    ct_tensor_free(h);
    if (rc != CT_OK) throw Failure{rc, std::string("combining with the other processes: ") + ct_last_error()};
}
}  // namespace ct

extern "C" void ct_set_grad_reduce(ct_grad_reduce_fn fn, void *ctx) {
    ct::tl_grad_reduce.fn = fn;
    ct::tl_grad_reduce.ctx = fn ? ctx : nullptr;
}

extern "C" ct_tensor *ct_keep(ct_tensor *t) {
    if (t && t->magic == ct::kLive) ct::unlink_from_scope(t);
    return t;
}

extern "C" ct_tensor *ct_scope_return(ct_tensor *t) {
    if (!t || t->magic != ct::kLive || !t->scope) return t;
    ct_scope *parent = t->scope->parent;
    ct::unlink_from_scope(t);
    if (parent) {
        t->scope = parent;
        t->prev = parent->head.prev;
        t->next = &parent->head;
        parent->head.prev->next = t;
        parent->head.prev = t;
        parent->count++;
    }
    return t;
}

extern "C" size_t ct_tensor_live_count(void) { return g_live.load(std::memory_order_relaxed); }

// ============================================================================
// dtypes and devices
// ============================================================================

namespace ct {

bool to_scalar_type(ct_dtype d, at::ScalarType *out) {
    switch (d) {
    case CT_F32: *out = at::kFloat; return true;
    case CT_F64: *out = at::kDouble; return true;
    case CT_F16: *out = at::kHalf; return true;
    case CT_BF16: *out = at::kBFloat16; return true;
    case CT_I64: *out = at::kLong; return true;
    case CT_I32: *out = at::kInt; return true;
    case CT_U8: *out = at::kByte; return true;
    case CT_BOOL: *out = at::kBool; return true;
    case CT_I8: *out = at::kChar; return true;
    case CT_I16: *out = at::kShort; return true;
    case CT_U16: *out = at::kUInt16; return true;
    default: return false;
    }
}

bool from_scalar_type(at::ScalarType s, ct_dtype *out) {
    switch (s) {
    case at::kFloat: *out = CT_F32; return true;
    case at::kDouble: *out = CT_F64; return true;
    case at::kHalf: *out = CT_F16; return true;
    case at::kBFloat16: *out = CT_BF16; return true;
    case at::kLong: *out = CT_I64; return true;
    case at::kInt: *out = CT_I32; return true;
    case at::kByte: *out = CT_U8; return true;
    case at::kBool: *out = CT_BOOL; return true;
    case at::kChar: *out = CT_I8; return true;
    case at::kShort: *out = CT_I16; return true;
    case at::kUInt16: *out = CT_U16; return true;
    default: return false;
    }
}

at::Device to_device(ct_device d) {
    if (d.type == CT_CPU) return at::Device(at::kCPU);
    if (d.type != CT_CUDA) throw Failure{CT_EINVAL, "unknown device type " + std::to_string(d.type)};
    if (!at::hasCUDA())
        throw Failure{CT_EDEVICE, at::detail::getCUDAHooks().isBuilt()
                                      ? "cuda:" + std::to_string(d.index) + " requested but no GPU is present"
                                      : "cuda:" + std::to_string(d.index) + " requested but libtorch was built without CUDA"};
    int n = at::detail::getCUDAHooks().deviceCount();
    if (d.index < 0 || d.index >= n)
        throw Failure{CT_EDEVICE, "cuda:" + std::to_string(d.index) + " does not exist (" +
                                      std::to_string(n) + " GPU(s) visible)"};
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d.index));
}

ct_device from_device(const at::Device &d) {
    ct_device out{CT_CPU, 0};
    if (d.is_cuda()) {
        out.type = CT_CUDA;
        out.index = d.has_index() ? d.index() : 0;
    }
    return out;
}

at::TensorOptions options(const ct_topts *o) {
    ct_topts def{};
    if (!o) o = &def;
    at::ScalarType st;
    if (!to_scalar_type(o->dtype, &st)) throw Failure{CT_EDTYPE, "unknown dtype " + std::to_string(o->dtype)};
    at::TensorOptions opt = at::TensorOptions().dtype(st).device(to_device(o->device));
    if (o->pin_memory) {
        if (o->device.type != CT_CPU) throw Failure{CT_EDEVICE, "pin_memory applies to CPU tensors only"};
        if (!at::hasCUDA()) throw Failure{CT_EDEVICE, "pin_memory needs CUDA and a GPU, none is present"};
        opt = opt.pinned_memory(true);
    }
    return opt;
}

std::string describe(const at::Tensor &t) {
    if (!t.defined()) return "undefined";
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) {
        if (i) s += ", ";
        s += std::to_string(t.size(i));
    }
    s += "] ";
    ct_dtype d;
    s += from_scalar_type(t.scalar_type(), &d) ? ct_dtype_name(d) : c10::toString(t.scalar_type());
    s += " ";
    s += t.device().str();
    return s;
}

at::Scalar scalar_for(const at::Tensor &t, double v) {
    if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false) && std::nearbyint(v) == v &&
        std::fabs(v) < 9.2e18)
        return at::Scalar(static_cast<int64_t>(v));
    return at::Scalar(v);
}

at::IntArrayRef dims(int n, const int64_t *v) {
    if (n < 0) throw Failure{CT_EINVAL, "negative dimension count " + std::to_string(n)};
    if (n > 0 && !v) throw Failure{CT_EINVAL, "dimension array is NULL"};
    return at::IntArrayRef(v, static_cast<size_t>(n));
}

}  // namespace ct

// ============================================================================
// grad-mode regions
// ============================================================================

struct ct_guard {
    enum Kind { kGrad, kInference } kind;
    bool prev_grad;
    c10::InferenceMode *inference;  // only for kInference
};

static ct_guard *grad_guard(bool enabled) {
    auto *g = new (std::nothrow) ct_guard{ct_guard::kGrad, c10::GradMode::is_enabled(), nullptr};
    if (!g) {
        ct::fail(CT_ENOMEM, "ct_no_grad", "out of host memory");
        return nullptr;
    }
    c10::GradMode::set_enabled(enabled);
    return g;
}

extern "C" ct_guard *ct_no_grad(void) { return grad_guard(false); }
extern "C" ct_guard *ct_enable_grad(void) { return grad_guard(true); }

extern "C" ct_guard *ct_inference_mode(void) {
    try {
        auto *g = new ct_guard{ct_guard::kInference, c10::GradMode::is_enabled(), nullptr};
        g->inference = new c10::InferenceMode(true);
        return g;
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void ct_guard_end(ct_guard *g) {
    if (!g) return;
    if (g->kind == ct_guard::kInference) delete g->inference;
    else c10::GradMode::set_enabled(g->prev_grad);
    delete g;
}

extern "C" bool ct_is_grad_enabled(void) { return c10::GradMode::is_enabled(); }

// ============================================================================
// RNG, threads, version
// ============================================================================

extern "C" int ct_manual_seed(uint64_t seed) {
    return ct::status(__func__, [&] {
        {
            auto gen = at::detail::getDefaultCPUGenerator();
            std::lock_guard<std::mutex> lock(gen.mutex());
            gen.set_current_seed(seed);
        }
        if (at::hasCUDA()) {
            auto &hooks = at::detail::getCUDAHooks();
            for (int i = 0; i < hooks.deviceCount(); ++i) {
                auto gen = hooks.getDefaultGenerator(static_cast<c10::DeviceIndex>(i));
                std::lock_guard<std::mutex> lock(gen.mutex());
                gen.set_current_seed(seed);
            }
        }
    });
}

static at::Generator default_generator(ct_device d) {
    if (d.type == CT_CPU) return at::detail::getDefaultCPUGenerator();
    at::Device dev = ct::to_device(d);  // validates
    return at::detail::getCUDAHooks().getDefaultGenerator(dev.index());
}

extern "C" ct_tensor *ct_rng_get_state(ct_device d) {
    return ct::op(__func__, [&] {
        at::Generator gen = default_generator(d);
        std::lock_guard<std::mutex> lock(gen.mutex());
        return gen.get_state();
    });
}

extern "C" int ct_rng_set_state(ct_device d, const ct_tensor *state) {
    CT_IN_STATUS(state);
    return ct::status(__func__, [&] {
        if (state->t.scalar_type() != at::kByte || state->t.dim() != 1)
            throw ct::Failure{CT_EFORMAT, "RNG state must be a 1-D uint8 tensor, got " + ct::describe(state->t)};
        at::Generator gen = default_generator(d);
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(state->t.to(at::kCPU).contiguous());
    });
}

extern "C" int ct_set_num_threads(int n) {
    try {
        if (n <= 0) {
            unsigned hc = std::thread::hardware_concurrency();
            n = hc ? static_cast<int>(hc) : 1;
        }
        at::set_num_threads(n);
        return at::get_num_threads();
    } catch (...) {
        return ct::fail_exception(__func__);
    }
}

extern "C" int ct_get_num_threads(void) { return at::get_num_threads(); }

extern "C" int ct_set_deterministic(bool on) {
    return ct::status(__func__, [&] {
        if (on) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0); /* kept when the user set one */
        at::globalContext().setDeterministicAlgorithms(on, /*warn_only=*/false);
        at::globalContext().setDeterministicCuDNN(on);
        if (on) at::globalContext().setBenchmarkCuDNN(false);
    });
}

extern "C" bool ct_get_deterministic(void) { return at::globalContext().deterministicAlgorithms(); }

extern "C" const char *ct_torch_version(void) { return TORCH_VERSION; }
