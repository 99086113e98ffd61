// shim/cuda_none.cpp — stands in for cuda.cpp and cuda_graph.cpp when the
// linked libtorch has no CUDA: queries say "none", actions fail with a
// message saying why.
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
extern "C" ct_tensor *ct_cuda_copy_in(const ct_tensor *, int) {
    no_cuda(__func__);
    return nullptr;
}
extern "C" int ct_cuda_copy_async(ct_tensor *, const ct_tensor *) { return no_cuda(__func__); }
extern "C" int ct_cuda_device_pci_id(int, char *, size_t) { return no_cuda(__func__); }
extern "C" ct_cuda_event *ct_cuda_event_record(int) {
    no_cuda(__func__);
    return nullptr;
}
extern "C" int ct_cuda_event_query(ct_cuda_event *) { return no_cuda(__func__); }
extern "C" int ct_cuda_event_wait(ct_cuda_event *) { return no_cuda(__func__); }
extern "C" void ct_cuda_event_free(ct_cuda_event *) {}

// ---- CUDA graphs: nothing can be captured, so nothing needs explaining ----

extern "C" ct_cuda_graph *ct_cuda_graph_new(int) {
    no_cuda(__func__);
    return nullptr;
}
extern "C" void ct_cuda_graph_free(ct_cuda_graph *) {}
static int no_graph(const ct_cuda_graph *g, const char *fn) {
    return g ? no_cuda(fn) : ct::fail(CT_EINVAL, fn, "graph is NULL");
}
extern "C" int ct_cuda_graph_side_stream_begin(ct_cuda_graph *g) { return no_graph(g, __func__); }
extern "C" int ct_cuda_graph_side_stream_end(ct_cuda_graph *g) { return no_graph(g, __func__); }
extern "C" int ct_cuda_graph_capture_begin(ct_cuda_graph *g) { return no_graph(g, __func__); }
extern "C" int ct_cuda_graph_capture_end(ct_cuda_graph *g) { return no_graph(g, __func__); }
extern "C" void ct_cuda_graph_capture_abort(ct_cuda_graph *) {}
extern "C" int ct_cuda_graph_replay(ct_cuda_graph *g) { return no_graph(g, __func__); }
extern "C" int ct_cuda_graph_explain_error(const char *) { return ct_last_code(); }
