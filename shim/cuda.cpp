// shim/cuda.cpp — CUDA device queries and memory statistics. Compiled only
// when the linked libtorch has CUDA (cuda_none.cpp stands in otherwise); it
// still runs on machines without a GPU and answers "none present".
#include "internal.h"

#include "ctrial/cuda.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>

#include <cstdio>

#include <map>
#include <memory>
#include <mutex>

namespace {
// Validates a device ordinal; throws a Failure naming the problem.
void check_device(int device) {
    (void)ct::to_device(ct_cuda(device));
}
}  // namespace

extern "C" bool ct_cuda_is_built(void) { return true; }

extern "C" bool ct_cuda_is_available(void) {
    try {
        return at::hasCUDA() && c10::cuda::device_count() > 0;
    } catch (...) {
        return false;
    }
}

extern "C" int ct_cuda_device_count(void) {
    try {
        return at::hasCUDA() ? static_cast<int>(c10::cuda::device_count()) : 0;
    } catch (...) {
        return 0;
    }
}

extern "C" int ct_cuda_synchronize(int device) {
    return ct::status(__func__, [&] {
        check_device(device);
        c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
        c10::cuda::device_synchronize();
    });
}

static int64_t stat_current(int device, bool peak) {
    check_device(device);
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto &s = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    return peak ? s.peak : s.current;
}

extern "C" int ct_cuda_memory_allocated(int device, int64_t *bytes) {
    if (!bytes) return ct::fail(CT_EINVAL, __func__, "bytes is NULL");
    return ct::status(__func__, [&] { *bytes = stat_current(device, false); });
}

extern "C" int ct_cuda_max_memory_allocated(int device, int64_t *bytes) {
    if (!bytes) return ct::fail(CT_EINVAL, __func__, "bytes is NULL");
    return ct::status(__func__, [&] { *bytes = stat_current(device, true); });
}

extern "C" int ct_cuda_reset_peak_memory_stats(int device) {
    return ct::status(__func__, [&] {
        check_device(device);
        c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    });
}

extern "C" int ct_cuda_empty_cache(void) {
    return ct::status(__func__, [&] {
        if (!ct_cuda_is_available()) throw ct::Failure{CT_EDEVICE, "no GPU is present"};
        c10::cuda::CUDACachingAllocator::emptyCache();
    });
}

// ---- raw handles --------------------------------------------------------------

extern "C" int ct_cuda_set_device(int device) {
    return ct::status(__func__, [&] {
        check_device(device);
        c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
    });
}

extern "C" void *ct_cuda_current_stream(int device) {
    try {
        check_device(device);
        // The default stream is cudaStream_t 0, as torch reports it.
        return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void *ct_cuda_data_ptr(const ct_tensor *t) {
    if (!ct::check(t, __func__, "t")) return nullptr;
    try {
        const at::Tensor &x = t->t;
        if (!x.is_cuda()) throw ct::Failure{CT_EDEVICE, "tensor is on " + x.device().str() + ", not a CUDA device"};
        if (!x.is_contiguous())
            throw ct::Failure{CT_EINVAL, "tensor " + ct::describe(x) + " is not contiguous (call ct_contiguous first)"};
        void *p = x.data_ptr();
        if (!p) throw ct::Failure{CT_EINVAL, "tensor " + ct::describe(x) + " has no device memory (no elements)"};
        return p;
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

// One side stream per device for host-to-device copies: taken from
// libtorch's pool once, so that every copy of a device queues on the same
// stream, in order.
static c10::cuda::CUDAStream copy_stream(c10::DeviceIndex device) {
    static std::mutex mu;
    static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
    std::lock_guard<std::mutex> lock(mu);
    auto it = streams.find(device);
    if (it == streams.end()) it = streams.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
    return it->second;
}

extern "C" ct_tensor *ct_cuda_copy_in(const ct_tensor *t, int device) {
    CT_IN(t);
    return ct::op(__func__, [&] {
        check_device(device);
        const auto index = static_cast<c10::DeviceIndex>(device);
        c10::cuda::CUDAGuard device_guard(index);
        c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
        c10::cuda::CUDAStream side = copy_stream(index);
        at::Tensor out;
        {
            c10::cuda::CUDAStreamGuard on_side(side);
            out = t->t.to(at::Device(at::kCUDA, index), /*non_blocking=*/true);
        }
        at::cuda::CUDAEvent copied;
        copied.record(side);
        copied.block(current);
        // Allocated on the side stream, used on the current one.
        if (out.is_cuda()) out.record_stream(current);
        return out;
    });
}

extern "C" int ct_cuda_copy_async(ct_tensor *dst, const ct_tensor *src) {
    CT_IN_STATUS(dst);
    CT_IN_STATUS(src);
    return ct::status(__func__, [&] {
        const at::Tensor &d = dst->t, &s = src->t;
        if (d.is_cuda() == s.is_cuda())
            throw ct::Failure{CT_EDEVICE, "one side must be a CUDA tensor and the other a host tensor (" +
                                              ct::describe(d) + " <- " + ct::describe(s) + ")"};
        if (d.sizes() != s.sizes() || d.scalar_type() != s.scalar_type())
            throw ct::Failure{CT_ESHAPE, "dst " + ct::describe(d) + " and src " + ct::describe(s) + " differ"};
        c10::cuda::CUDAGuard guard(d.is_cuda() ? d.device() : s.device());
        dst->t.copy_(s, /*non_blocking=*/true);
    });
}

extern "C" int ct_cuda_device_pci_id(int device, char *out, size_t len) {
    if (!out || !len) return ct::fail(CT_EINVAL, __func__, "out is NULL or len is 0");
    return ct::status(__func__, [&] {
        check_device(device);
        const cudaDeviceProp *p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
        snprintf(out, len, "%04x:%02x:%02x.0", static_cast<unsigned>(p->pciDomainID),
                 static_cast<unsigned>(p->pciBusID), static_cast<unsigned>(p->pciDeviceID));
    });
}

struct ct_cuda_event {
    at::cuda::CUDAEvent ev;
};

extern "C" ct_cuda_event *ct_cuda_event_record(int device) {
    try {
        check_device(device);
        const auto index = static_cast<c10::DeviceIndex>(device);
        c10::cuda::CUDAGuard guard(index);
        auto e = std::make_unique<ct_cuda_event>();
        e->ev.record(c10::cuda::getCurrentCUDAStream(index));
        return e.release();
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" int ct_cuda_event_query(ct_cuda_event *e) {
    if (!e) return ct::fail(CT_EINVAL, __func__, "event is NULL");
    int done = 0;
    int rc = ct::status(__func__, [&] { done = e->ev.query() ? 1 : 0; });
    return rc != CT_OK ? rc : done;
}

extern "C" int ct_cuda_event_wait(ct_cuda_event *e) {
    if (!e) return ct::fail(CT_EINVAL, __func__, "event is NULL");
    return ct::status(__func__, [&] { e->ev.synchronize(); });
}

extern "C" void ct_cuda_event_free(ct_cuda_event *e) { delete e; }
