// shim/tensor.cpp — tensor creation, conversion, queries, reading values
// back, indexing/joining/views, and autograd. Math lives in ops.cpp.
#include "internal.h"
#include <ATen/CPUGeneratorImpl.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>
#include <vector>

using ct::Failure;

namespace {

at::ScalarType scalar_type(ct_dtype d) {
    at::ScalarType st;
    if (!ct::to_scalar_type(d, &st)) throw Failure{CT_EDTYPE, "unknown dtype " + std::to_string(d)};
    return st;
}

at::IntArrayRef shape_arg(int ndim, const int64_t *shape) {
    at::IntArrayRef s = ct::dims(ndim, shape);
    for (int64_t v : s)
        if (v < 0) throw Failure{CT_ESHAPE, "negative size " + std::to_string(v) + " in shape"};
    return s;
}

// Gathers n checked handles into a vector (throws naming the bad element).
std::vector<at::Tensor> tensor_list(int n, ct_tensor *const *ts) {
    if (n <= 0) throw Failure{CT_EINVAL, "needs at least one tensor, got " + std::to_string(n)};
    if (!ts) throw Failure{CT_EINVAL, "tensor array is NULL"};
    std::vector<at::Tensor> v;
    v.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        const ct_tensor *h = ts[i];
        if (!h) throw Failure{ct::error_pending() ? ct_last_code() : CT_EINVAL,
                              ct::error_pending() ? std::string(ct_last_error())
                                                  : "tensor " + std::to_string(i) + " is NULL"};
        if (h->magic != ct::kLive) throw Failure{CT_ESTATE, "tensor " + std::to_string(i) + " is a freed tensor"};
        v.push_back(h->t);
    }
    return v;
}

// Writes pieces to out[0..max) as new tensors; returns the piece count.
int emit_pieces(const std::vector<at::Tensor> &pieces, ct_tensor **out, int max) {
    if (max > 0 && !out) throw Failure{CT_EINVAL, "output array is NULL"};
    int n = static_cast<int>(pieces.size());
    for (int i = 0; i < n && i < max; ++i) out[i] = ct::wrap(pieces[static_cast<size_t>(i)]);
    return n;
}

}  // namespace

// ============================================================================
// creation
// ============================================================================

// Creators taking a shape: the options' requires_grad makes a leaf that
// requires grad, as torch.zeros(..., requires_grad=True) does.
#define SHAPED(name, fn)                                                                        \
    extern "C" ct_tensor *name(int ndim, const int64_t *shape, const ct_topts *o) {            \
        return ct::op(__func__, [&] {                                                           \
            return fn(shape_arg(ndim, shape), ct::options(o)).set_requires_grad(o && o->requires_grad); \
        });                                                                                     \
    }

SHAPED(ct_empty, at::empty)
SHAPED(ct_zeros, at::zeros)
SHAPED(ct_ones, at::ones)
SHAPED(ct_randn, at::randn)
SHAPED(ct_rand, at::rand)

extern "C" ct_tensor *ct_full(int ndim, const int64_t *shape, double value, const ct_topts *o) {
    return ct::op(__func__, [&] {
        return at::full(shape_arg(ndim, shape), value, ct::options(o)).set_requires_grad(o && o->requires_grad);
    });
}

extern "C" ct_tensor *ct_scalar_tensor(double value, const ct_topts *o) {
    return ct::op(__func__, [&] {
        return at::scalar_tensor(value, ct::options(o)).set_requires_grad(o && o->requires_grad);
    });
}

extern "C" ct_tensor *ct_arange(double start, double end, double step, const ct_topts *o) {
    return ct::op(__func__, [&] {
        if (step == 0) throw Failure{CT_EINVAL, "step must be nonzero"};
        at::TensorOptions opt = ct::options(o);
        // Python's torch.arange(0, 5) with integer dtype counts in integers.
        at::Tensor r = at::isIntegralType(opt.dtype().toScalarType(), true)
                           ? at::arange(static_cast<int64_t>(start), static_cast<int64_t>(end),
                                        static_cast<int64_t>(step), opt)
                           : at::arange(start, end, step, opt);
        return r.set_requires_grad(o && o->requires_grad);
    });
}

extern "C" ct_tensor *ct_linspace(double start, double end, int64_t steps, const ct_topts *o) {
    return ct::op(__func__, [&] {
        return at::linspace(start, end, steps, ct::options(o)).set_requires_grad(o && o->requires_grad);
    });
}

extern "C" ct_tensor *ct_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                                 const ct_topts *o) {
    return ct::op(__func__, [&] {
        if (high <= low)
            throw Failure{CT_EINVAL, "empty range: low " + std::to_string(low) + " >= high " + std::to_string(high)};
        // torch.randint defaults to int64 regardless of the float default.
        ct_topts def{};
        def.dtype = CT_I64;
        return at::randint(low, high, shape_arg(ndim, shape), ct::options(o ? o : &def));
    });
}

extern "C" ct_tensor *ct_randperm(int64_t n, const ct_topts *o) {
    return ct::op(__func__, [&] {
        ct_topts def{};
        def.dtype = CT_I64;
        return at::randperm(n, ct::options(o ? o : &def));
    });
}

extern "C" ct_tensor *ct_randperm_seeded(int64_t n, uint64_t seed) {
    return ct::op(__func__, [&] {
        // torch.Generator().manual_seed(seed): a CPU generator of its own.
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
        return at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
    });
}

// ---- ct_rng: a torch.Generator of the caller's own ------------------------------

struct ct_rng {
    at::Generator gen;
};

extern "C" ct_rng *ct_rng_new(uint64_t seed) {
    try {
        return new ct_rng{at::make_generator<at::CPUGeneratorImpl>(seed)};
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void ct_rng_free(ct_rng *r) { delete r; }

// Each draw is the operator Python's twin calls, on a one-element tensor,
// so that it consumes the engine exactly as that call does.
extern "C" int ct_rng_uniform(ct_rng *r, double lo, double hi, double *out) {
    return ct::status(__func__, [&] {
        if (!r || !out) throw Failure{CT_EINVAL, "NULL argument"};
        if (!(lo <= hi)) throw Failure{CT_EINVAL, "empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")"};
        *out = at::empty({1}, at::kFloat).uniform_(lo, hi, r->gen).item<float>();
    });
}

extern "C" int ct_rng_rand(ct_rng *r, double *out) { return ct_rng_uniform(r, 0.0, 1.0, out); }

extern "C" int ct_rng_randint(ct_rng *r, int64_t low, int64_t high, int64_t *out) {
    return ct::status(__func__, [&] {
        if (!r || !out) throw Failure{CT_EINVAL, "NULL argument"};
        if (low >= high) throw Failure{CT_EINVAL, "empty range [" + std::to_string(low) + ", " + std::to_string(high) + ")"};
        *out = at::randint(low, high, {1}, r->gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
    });
}

extern "C" int ct_rng_randperm(ct_rng *r, int64_t n, int64_t *out) {
    return ct::status(__func__, [&] {
        if (!r || (!out && n > 0)) throw Failure{CT_EINVAL, "NULL argument"};
        if (n < 0) throw Failure{CT_EINVAL, "n " + std::to_string(n) + " is negative"};
        at::Tensor p = at::randperm(n, r->gen, at::TensorOptions().dtype(at::kLong));
        if (n > 0) std::memcpy(out, p.data_ptr<int64_t>(), static_cast<size_t>(n) * sizeof(int64_t));
    });
}

extern "C" ct_tensor *ct_zeros_like(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::zeros_like(t->t); });
}
extern "C" ct_tensor *ct_ones_like(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::ones_like(t->t); });
}
extern "C" ct_tensor *ct_full_like(const ct_tensor *t, double value) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::full_like(t->t, value); });
}
extern "C" ct_tensor *ct_empty_like(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return at::empty_like(t->t); });
}

extern "C" ct_tensor *ct_from_data(const void *data, int ndim, const int64_t *shape, ct_dtype dtype) {
    return ct::op(__func__, [&] {
        at::IntArrayRef s = shape_arg(ndim, shape);
        at::Tensor out = at::empty(s, at::TensorOptions().dtype(scalar_type(dtype)));
        if (out.numel() > 0) {
            if (!data) throw Failure{CT_EINVAL, "data is NULL"};
            std::memcpy(out.data_ptr(), data, out.nbytes());
        }
        return out;
    });
}

extern "C" ct_tensor *ct_from_blob(void *data, int ndim, const int64_t *shape, ct_dtype dtype,
                                   void (*deleter)(void *, void *), void *ctx) {
    return ct::op(__func__, [&] {
        at::IntArrayRef s = shape_arg(ndim, shape);
        at::ScalarType st = scalar_type(dtype);
        if (!data) throw Failure{CT_EINVAL, "data is NULL"};
        // Everything that can fail happens before the storage takes the
        // deleter: if this call fails, the deleter is never called.
        if (!deleter) return at::from_blob(data, s, at::TensorOptions().dtype(st));
        return at::from_blob(data, s, [deleter, ctx](void *p) { deleter(p, ctx); },
                             at::TensorOptions().dtype(st));
    });
}

// ============================================================================
// conversion
// ============================================================================

extern "C" ct_tensor *ct_to_dtype(const ct_tensor *t, ct_dtype dtype) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.to(scalar_type(dtype)); });
}

extern "C" ct_tensor *ct_to_device(const ct_tensor *t, ct_device device, bool non_blocking) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.to(ct::to_device(device), non_blocking); });
}

extern "C" ct_tensor *ct_clone(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.clone(); });
}
extern "C" ct_tensor *ct_detach(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.detach(); });
}
extern "C" ct_tensor *ct_contiguous(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.contiguous(); });
}
extern "C" ct_tensor *ct_pin_memory(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        if (!at::hasCUDA()) throw Failure{CT_EDEVICE, "pinned memory needs CUDA and a GPU, none is present"};
        return t->t.pin_memory();
    });
}
extern "C" ct_tensor *ct_alias(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t; });
}

extern "C" int ct_copy_(ct_tensor *dst, const ct_tensor *src) {
    CT_IN_STATUS(dst);
    CT_IN_STATUS(src);
    return ct::status(__func__, [&] { dst->t.copy_(src->t); });
}

// ============================================================================
// queries
// ============================================================================

static bool live(const ct_tensor *t) { return t && t->magic == ct::kLive && t->t.defined(); }

extern "C" int ct_ndim(const ct_tensor *t) { return live(t) ? static_cast<int>(t->t.dim()) : -1; }

// A Python-style dim (negatives count back) as an index, or -1 + error.
static int64_t dim_index(const ct_tensor *t, int dim, const char *fn) {
    int64_t n = t->t.dim();
    int64_t d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) {
        ct::fail(CT_EINDEX, fn, "dim " + std::to_string(dim) + " out of range for a " + std::to_string(n) +
                                    "-d tensor");
        return -1;
    }
    return d;
}

extern "C" int64_t ct_size(const ct_tensor *t, int dim) {
    int64_t d = live(t) ? dim_index(t, dim, __func__) : -1;
    return d < 0 ? -1 : t->t.size(d);
}

extern "C" int64_t ct_stride(const ct_tensor *t, int dim) {
    int64_t d = live(t) ? dim_index(t, dim, __func__) : -1;
    return d < 0 ? -1 : t->t.stride(d);
}

extern "C" int ct_shape(const ct_tensor *t, int64_t *shape, int max) {
    if (!live(t)) return -1;
    if (!shape && max > 0) {
        ct::fail(CT_EINVAL, __func__, "shape is NULL");
        return -1;
    }
    int n = static_cast<int>(t->t.dim());
    for (int i = 0; i < n && i < max; ++i) shape[i] = t->t.size(i);
    return n;
}

extern "C" int64_t ct_numel(const ct_tensor *t) { return live(t) ? t->t.numel() : -1; }

extern "C" ct_dtype ct_dtype_of(const ct_tensor *t) {
    ct_dtype d = CT_F32;
    if (live(t)) ct::from_scalar_type(t->t.scalar_type(), &d);
    return d;
}

extern "C" ct_device ct_device_of(const ct_tensor *t) {
    return live(t) ? ct::from_device(t->t.device()) : ct_cpu();
}

extern "C" bool ct_is_contiguous(const ct_tensor *t) { return live(t) && t->t.is_contiguous(); }
extern "C" bool ct_is_defined(const ct_tensor *t) { return live(t); }

extern "C" void ct_describe(const ct_tensor *t, char *buf, size_t len) {
    if (!buf || !len) return;
    std::string s = !t ? "NULL" : t->magic != ct::kLive ? "freed tensor" : ct::describe(t->t);
    snprintf(buf, len, "%s", s.c_str());
}

extern "C" int ct_print(const ct_tensor *t) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        std::ostringstream os;
        os << t->t << "\n";
        fputs(os.str().c_str(), stdout);
    });
}

// ============================================================================
// reading values back
// ============================================================================

extern "C" int ct_item(const ct_tensor *t, double *out) {
    CT_IN_STATUS(t);
    if (!out) return ct::fail(CT_EINVAL, __func__, "out is NULL");
    return ct::status(__func__, [&] {
        if (t->t.numel() != 1)
            throw Failure{CT_ESHAPE, "needs a one-element tensor, got " + ct::describe(t->t)};
        *out = t->t.item<double>();
    });
}

extern "C" int ct_item_int(const ct_tensor *t, int64_t *out) {
    CT_IN_STATUS(t);
    if (!out) return ct::fail(CT_EINVAL, __func__, "out is NULL");
    return ct::status(__func__, [&] {
        if (t->t.numel() != 1)
            throw Failure{CT_ESHAPE, "needs a one-element tensor, got " + ct::describe(t->t)};
        *out = t->t.item<int64_t>();
    });
}

// The bytes a host buffer for all of t's elements needs; throws when the
// caller's buffer is another size.
static size_t buffer_bytes(const at::Tensor &t, size_t nbytes) {
    size_t need = t.numel() * t.element_size();
    if (nbytes != need)
        throw Failure{CT_EINVAL, "buffer of " + std::to_string(nbytes) + " bytes for " + ct::describe(t) +
                                     " which needs " + std::to_string(need)};
    return need;
}

extern "C" int ct_read(const ct_tensor *t, void *dst, size_t nbytes) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        size_t need = buffer_bytes(t->t, nbytes);
        if (need == 0) return;
        if (!dst) throw Failure{CT_EINVAL, "dst is NULL"};
        at::Tensor c = t->t.detach().to(at::kCPU).contiguous();
        std::memcpy(dst, c.data_ptr(), need);
    });
}

extern "C" int ct_write(ct_tensor *t, const void *src, size_t nbytes) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        size_t need = buffer_bytes(t->t, nbytes);
        if (need == 0) return;
        if (!src) throw Failure{CT_EINVAL, "src is NULL"};
        at::Tensor host = at::from_blob(const_cast<void *>(src), t->t.sizes(),
                                        at::TensorOptions().dtype(t->t.scalar_type()));
        c10::NoGradGuard ng;
        t->t.copy_(host);
    });
}

extern "C" void *ct_data_ptr(const ct_tensor *t) {
    if (!ct::check(t, __func__, "t")) return nullptr;
    if (!t->t.device().is_cpu()) {
        ct::fail(CT_EDEVICE, __func__, "tensor is on " + t->t.device().str() + ", not the CPU");
        return nullptr;
    }
    if (!t->t.is_contiguous()) {
        ct::fail(CT_EINVAL, __func__, "tensor is not contiguous (call ct_contiguous first)");
        return nullptr;
    }
    return t->t.data_ptr();
}

// ============================================================================
// storages
// ============================================================================

extern "C" int ct_storage_info_of(const ct_tensor *t, ct_storage_info *out) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        if (!out) throw Failure{CT_EINVAL, "out is NULL"};
        const c10::Storage &st = t->t.storage();
        out->id = st.unsafeGetStorageImpl();
        out->nbytes = st.nbytes();
        out->offset = t->t.storage_offset();
        out->device = ct::from_device(t->t.device());
    });
}

extern "C" const void *ct_storage_data(const ct_tensor *t) {
    if (!ct::check(t, __func__, "t")) return nullptr;
    if (!t->t.device().is_cpu()) {
        ct::fail(CT_EDEVICE, __func__, "storage is on " + t->t.device().str() + ", not the CPU");
        return nullptr;
    }
    return t->t.storage().data();
}

extern "C" int ct_storage_read(const ct_tensor *t, size_t pos, void *dst, size_t nbytes) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        const c10::Storage &st = t->t.storage();
        if (pos > st.nbytes() || nbytes > st.nbytes() - pos)
            throw Failure{CT_EINVAL, "bytes [" + std::to_string(pos) + ", " + std::to_string(pos + nbytes) +
                                         ") leave a storage of " + std::to_string(st.nbytes())};
        if (nbytes == 0) return;
        if (!dst) throw Failure{CT_EINVAL, "dst is NULL"};
        const char *base = static_cast<const char *>(st.data());
        if (t->t.device().is_cpu()) {
            std::memcpy(dst, base + pos, nbytes);
            return;
        }
        // A device range: wrap it as bytes and copy just that range to host.
        at::Tensor src = at::from_blob(const_cast<char *>(base) + pos, {(int64_t)nbytes},
                                       at::TensorOptions().dtype(at::kByte).device(t->t.device()));
        at::Tensor host = at::from_blob(dst, {(int64_t)nbytes}, at::TensorOptions().dtype(at::kByte));
        host.copy_(src);
    });
}

extern "C" ct_tensor *ct_storage_view(const ct_tensor *base, ct_dtype dtype, int64_t offset, int ndim,
                                      const int64_t *shape, const int64_t *stride) {
    CT_IN(base);
    return ct::op(__func__, [&] {
        at::ScalarType st = scalar_type(dtype);
        at::IntArrayRef sizes = ct::dims(ndim, shape), strides = ct::dims(ndim, stride);
        const c10::Storage &storage = base->t.storage();
        int64_t esize = (int64_t)c10::elementSize(st);
        if (offset < 0) throw Failure{CT_EINVAL, "negative storage offset " + std::to_string(offset)};
        // The furthest element any index reaches (an empty tensor reaches none).
        int64_t last = offset;
        bool empty = false;
        for (int i = 0; i < ndim; i++) {
            if (sizes[i] < 0 || strides[i] < 0)
                throw Failure{CT_EINVAL, "negative size or stride in dim " + std::to_string(i)};
            if (sizes[i] == 0) empty = true;
            else last += (sizes[i] - 1) * strides[i];
        }
        if (!empty && (last + 1) * esize > (int64_t)storage.nbytes())
            throw Failure{CT_EINVAL, "a view reaching element " + std::to_string(last) + " of " +
                                         c10::toString(st) + " needs " + std::to_string((last + 1) * esize) +
                                         " bytes; the storage has " + std::to_string(storage.nbytes())};
        at::Tensor v = at::empty({0}, at::TensorOptions().dtype(st).device(base->t.device()));
        v.set_(storage, offset, sizes, strides);
        return v;
    });
}

// ============================================================================
// indexing, joining, views
// ============================================================================

extern "C" ct_tensor *ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        if (step <= 0) throw Failure{CT_EINVAL, "slice step must be positive, got " + std::to_string(step)};
        return t->t.slice(dim, start, end, step);
    });
}

extern "C" ct_tensor *ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.narrow(dim, start, length); });
}

extern "C" ct_tensor *ct_select(const ct_tensor *t, int dim, int64_t index) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.select(dim, index); });
}

extern "C" ct_tensor *ct_index_select(const ct_tensor *t, int dim, const ct_tensor *index) {
    CT_IN(t);
    CT_IN(index);
    return ct::op(__func__, [&] { return t->t.index_select(dim, index->t); });
}

extern "C" ct_tensor *ct_gather(const ct_tensor *t, int dim, const ct_tensor *index) {
    CT_IN(t);
    CT_IN(index);
    return ct::op(__func__, [&] { return t->t.gather(dim, index->t); });
}

extern "C" ct_tensor *ct_scatter(const ct_tensor *t, int dim, const ct_tensor *index, const ct_tensor *src) {
    CT_IN(t);
    CT_IN(index);
    CT_IN(src);
    return ct::op(__func__, [&] { return t->t.scatter(dim, index->t, src->t); });
}

extern "C" ct_tensor *ct_scatter_add(const ct_tensor *t, int dim, const ct_tensor *index,
                                     const ct_tensor *src) {
    CT_IN(t);
    CT_IN(index);
    CT_IN(src);
    return ct::op(__func__, [&] { return t->t.scatter_add(dim, index->t, src->t); });
}

extern "C" ct_tensor *ct_masked_fill(const ct_tensor *t, const ct_tensor *mask, double value) {
    CT_IN(t);
    CT_IN(mask);
    return ct::op(__func__, [&] { return t->t.masked_fill(mask->t, value); });
}

extern "C" ct_tensor *ct_masked_select(const ct_tensor *t, const ct_tensor *mask) {
    CT_IN(t);
    CT_IN(mask);
    return ct::op(__func__, [&] {
        if (mask->t.scalar_type() != at::kBool)
            throw Failure{CT_EDTYPE, "mask must be a bool tensor, got " + ct::describe(mask->t)};
        return t->t.masked_select(mask->t);
    });
}

extern "C" ct_tensor *ct_cat(int n, ct_tensor *const *ts, int dim) {
    return ct::op(__func__, [&] { return at::cat(tensor_list(n, ts), dim); });
}

extern "C" ct_tensor *ct_stack(int n, ct_tensor *const *ts, int dim) {
    return ct::op(__func__, [&] { return at::stack(tensor_list(n, ts), dim); });
}

extern "C" int ct_split(const ct_tensor *t, int64_t split_size, int dim, ct_tensor **out, int max) {
    CT_IN_STATUS(t);
    int n = 0;
    int rc = ct::status(__func__, [&] {
        if (split_size <= 0) throw Failure{CT_EINVAL, "split_size must be positive, got " + std::to_string(split_size)};
        n = emit_pieces(t->t.split(split_size, dim), out, max);
    });
    return rc ? rc : n;
}

extern "C" int ct_chunk(const ct_tensor *t, int chunks, int dim, ct_tensor **out, int max) {
    CT_IN_STATUS(t);
    int n = 0;
    int rc = ct::status(__func__, [&] {
        if (chunks <= 0) throw Failure{CT_EINVAL, "chunks must be positive, got " + std::to_string(chunks)};
        n = emit_pieces(t->t.chunk(chunks, dim), out, max);
    });
    return rc ? rc : n;
}

extern "C" ct_tensor *ct_reshape(const ct_tensor *t, int ndim, const int64_t *shape) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.reshape(ct::dims(ndim, shape)); });
}

extern "C" ct_tensor *ct_view(const ct_tensor *t, int ndim, const int64_t *shape) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.view(ct::dims(ndim, shape)); });
}

extern "C" ct_tensor *ct_permute(const ct_tensor *t, int ndim, const int64_t *dims) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.permute(ct::dims(ndim, dims)); });
}

extern "C" ct_tensor *ct_transpose(const ct_tensor *t, int dim0, int dim1) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.transpose(dim0, dim1); });
}

extern "C" ct_tensor *ct_t(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.t(); });
}

extern "C" ct_tensor *ct_flatten(const ct_tensor *t, int start_dim, int end_dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.flatten(start_dim, end_dim); });
}

extern "C" ct_tensor *ct_unsqueeze(const ct_tensor *t, int dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.unsqueeze(dim); });
}

extern "C" ct_tensor *ct_squeeze(const ct_tensor *t) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.squeeze(); });
}

extern "C" ct_tensor *ct_squeeze_dim(const ct_tensor *t, int dim) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.squeeze(dim); });
}

extern "C" ct_tensor *ct_expand(const ct_tensor *t, int ndim, const int64_t *shape) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.expand(ct::dims(ndim, shape)); });
}

extern "C" ct_tensor *ct_repeat(const ct_tensor *t, int ndim, const int64_t *repeats) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.repeat(ct::dims(ndim, repeats)); });
}

extern "C" ct_tensor *ct_tril(const ct_tensor *t, int64_t diagonal) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.tril(diagonal); });
}

extern "C" ct_tensor *ct_triu(const ct_tensor *t, int64_t diagonal) {
    CT_IN(t);
    return ct::op(__func__, [&] { return t->t.triu(diagonal); });
}

// ============================================================================
// autograd
// ============================================================================

extern "C" int ct_set_requires_grad(ct_tensor *t, bool requires_grad) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] { t->t.requires_grad_(requires_grad); });
}

extern "C" bool ct_requires_grad(const ct_tensor *t) { return live(t) && t->t.requires_grad(); }

extern "C" int ct_backward(const ct_tensor *loss) {
    CT_IN_STATUS(loss);
    return ct::status(__func__, [&] {
        if (loss->t.numel() != 1)
            throw Failure{CT_ESHAPE, "backward() without a gradient needs a one-element tensor, got " +
                                         ct::describe(loss->t)};
        if (!loss->t.requires_grad())
            throw Failure{CT_ESTATE, "the loss does not require grad (no parameter in its graph, "
                                     "or computed under ct_no_grad)"};
        loss->t.backward();
    });
}

extern "C" int ct_backward_ex(const ct_tensor *t, const ct_tensor *gradient, bool retain_graph,
                              bool create_graph) {
    CT_IN_STATUS(t);
    CT_IN_OPT_STATUS(gradient);
    return ct::status(__func__, [&] {
        if (!t->t.requires_grad()) throw Failure{CT_ESTATE, "tensor does not require grad"};
        t->t.backward(T(gradient), retain_graph, create_graph);
    });
}

extern "C" ct_tensor *ct_grad(const ct_tensor *t) {
    CT_IN(t);
    const at::Tensor &g = t->t.grad();
    if (!g.defined()) return nullptr;
    return ct::op(__func__, [&] { return g; });
}

extern "C" bool ct_has_grad(const ct_tensor *t) { return live(t) && t->t.grad().defined(); }

extern "C" int ct_set_grad(ct_tensor *t, const ct_tensor *g) {
    CT_IN_STATUS(t);
    CT_IN_OPT_STATUS(g);
    return ct::status(__func__, [&] {
        if (g && !g->t.sizes().equals(t->t.sizes()))
            throw Failure{CT_ESHAPE, "gradient " + ct::describe(g->t) + " does not match tensor " +
                                         ct::describe(t->t)};
        t->t.mutable_grad() = T(g);
    });
}

extern "C" int ct_zero_grad(ct_tensor *t, bool set_to_none) {
    CT_IN_STATUS(t);
    return ct::status(__func__, [&] {
        at::Tensor &g = t->t.mutable_grad();
        if (!g.defined()) return;
        if (set_to_none) {
            g.reset();
        } else {
            // As torch.optim's zero_grad: detach from any graph, then zero.
            if (g.grad_fn()) g = g.detach();
            else g.requires_grad_(false);
            g.zero_();
        }
    });
}

extern "C" bool ct_is_leaf(const ct_tensor *t) { return live(t) && t->t.is_leaf(); }
