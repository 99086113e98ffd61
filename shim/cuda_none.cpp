// shim/cuda_none.cpp — stands in for cuda.cpp when the linked libtorch has no
// CUDA: queries say "none", actions fail with a message saying why.
#include "internal.h"

#include "ctrial/cuda.h"

static int no_cuda(const char *fn) { return ct::fail(CT_ENOTSUP, fn, "libtorch was built without CUDA"); }

extern "C" bool ct_cuda_is_built(void) { return false; }
extern "C" bool ct_cuda_is_available(void) { return false; }
extern "C" int ct_cuda_device_count(void) { return 0; }
extern "C" int ct_cuda_synchronize(int) { return no_cuda(__func__); }
extern "C" int ct_cuda_memory_allocated(int, int64_t *) { return no_cuda(__func__); }
extern "C" int ct_cuda_max_memory_allocated(int, int64_t *) { return no_cuda(__func__); }
extern "C" int ct_cuda_reset_peak_memory_stats(int) { return no_cuda(__func__); }
extern "C" int ct_cuda_empty_cache(void) { return no_cuda(__func__); }
extern "C" int ct_cuda_set_device(int) { return no_cuda(__func__); }
extern "C" void *ct_cuda_current_stream(int) {
    no_cuda(__func__);
    return nullptr;
}
extern "C" void *ct_cuda_data_ptr(const ct_tensor *) {
    no_cuda(__func__);
    return nullptr;
}
