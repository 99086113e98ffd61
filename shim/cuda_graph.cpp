// shim/cuda_graph.cpp — CUDA graphs (cuda.h): a side stream for warm-up
// and capture, capture into a private memory pool, replay, and failures
// told in user terms. Compiled only when libtorch has CUDA (cuda_none.cpp
// stands in otherwise).
//
// libtorch's at::cuda::CUDAGraph does the capture. What this file adds is
// the stream handling of torch.cuda.graph / torch.cuda.stream, and the
// cleanup after a failed capture that CUDAGraph leaves to its caller: when
// capture_begin or capture_end throws before the capture ended, the caching
// allocators still route the stream's allocations to the graph's pool (with
// a filter that points at the graph object), the pool is never released, and
// the default generator still believes it is capturing, which makes every
// later eager random op fail ("Offset increment outside graph capture").
#include "internal.h"

#include "ctrial/cuda.h"

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cctype>
#include <memory>
#include <optional>
#include <string>

namespace {

// CUDAGraph, with read access to the two protected members a failed capture
// must be cleaned up by.
struct Graph : at::cuda::CUDAGraph {
    auto pool_id() const { return mempool_id_; }
    bool ended() const { return capture_ended_; }
};

}  // namespace

struct ct_cuda_graph {
    ct_cuda_graph(c10::DeviceIndex d, c10::cuda::CUDAStream s) : device(d), side(s) {}
    c10::DeviceIndex device;
    c10::cuda::CUDAStream side;           // warm-up and capture stream
    std::unique_ptr<Graph> graph;         // the current capture, or none
    bool capturing = false;               // between capture_begin and _end
    bool captured = false;                // graph holds a replayable capture
    bool in_side = false;                 // inside a side-stream scope
    std::optional<c10::cuda::CUDAStream> prev;  // the stream to go back to
};

namespace {

// ---- what a capture error means ---------------------------------------------

struct Cause {
    const char *needles[4];  // lower case; any one matches
    const char *did;         // follows "<what> "
};

// CUDA's messages (cudaGetErrorString) and libtorch's own checks, most
// specific first.
const Cause kCauses[] = {
    {{"operation not permitted when stream is capturing", "cudaerrorstreamcaptureunsupported",
      "cannot copy between cpu and cuda tensors during cuda graph capture", "during cuda graph capture"},
     "did something that needs the host to wait for the GPU during capture: a .item()/ct_item, printing a "
     "CUDA tensor, a copy to the CPU, or an op with a data-dependent output shape (nonzero, masked_select); "
     "a synchronize or a cudaMalloc outside libtorch's allocator fails the same way. Keep such reads out of "
     "the captured step (metrics can stay tensors: ctrial reads them once per report)"},
    {{"operation failed due to a previous error during capture", "cudaerrorstreamcaptureinvalidated",
      "cudastreamcapturestatusinvalidated", nullptr},
     "hit an error that invalidated the capture: something failed while capturing (perhaps a failure it "
     "went on after), most often a host sync: a .item()/ct_item, printing a CUDA tensor, a copy to the CPU, "
     "or an op with a data-dependent output shape (nonzero, masked_select)"},
    {{"capturing stream has unjoined work", "cudaerrorstreamcaptureunjoined", nullptr, nullptr},
     "forked work onto another CUDA stream during capture and did not join it back: the capturing stream "
     "must wait for every stream it used before the capture ends"},
    {{"dependency created on uncaptured work", "cudaerrorstreamcaptureisolation", nullptr, nullptr},
     "made the captured work wait for work outside the capture (an event recorded, or a stream used, "
     "before the capture began)"},
    {{"legacy stream depend on a capturing blocking stream", "cudaerrorstreamcaptureimplicit", nullptr,
      nullptr},
     "used the legacy default CUDA stream (stream 0) during capture; it synchronises with every other "
     "stream"},
    {{"event last recorded in a capturing stream", "cudaerrorcapturedevent", nullptr, nullptr},
     "waited for or queried, from the host, an event recorded during capture (it completes only when the "
     "graph is replayed)"},
    {{"merge of separate capture sequences", "cudaerrorstreamcapturemerge", nullptr, nullptr},
     "joined its capture with another one under way (another thread capturing at the same time)"},
    {{"thread-local capture sequence from another thread", "cudaerrorstreamcapturewrongthread", nullptr,
      nullptr},
     "ended the capture on another thread than the one that began it"},
    {{"capture was not initiated in this stream", "cudaerrorstreamcaptureunmatched",
      "capture must end on the same stream it began on", nullptr},
     "changed the current CUDA stream during capture and left it changed"},
    {{"can be called during stream capture only if new seed is the same", nullptr, nullptr, nullptr},
     "reseeded the CUDA generator (ct_manual_seed) during capture"},
    {{"capturing nccl collectives is only allowed", nullptr, nullptr, nullptr},
     "ran an NCCL collective that this NCCL version cannot capture"},
    {{"convolutions you're trying to capture use dynamic shapes", nullptr, nullptr, nullptr},
     "ran a convolution cuDNN had not planned before capture (a shape the warm-up did not see)"},
    {{"cuda generator not in capture mode", nullptr, nullptr, nullptr},
     "drew random numbers from a CUDA generator the capture does not know (only the device's default "
     "generator is registered)"},
};

std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

const Cause *cause_of(const std::string &msg) {
    std::string m = lower(msg);
    for (const Cause &c : kCauses) {
        if (m.find(lower(c.did)) != std::string::npos) return nullptr;  // explained already
    }
    for (const Cause &c : kCauses)
        for (const char *n : c.needles)
            if (n && m.find(n) != std::string::npos) return &c;
    return nullptr;
}

// Records `code, fn: msg` as the last error, explained when it is a capture
// error, and returns the code.
int fail_capture(int code, const char *fn, const std::string &msg) {
    ct::fail(code, fn, msg);
    return ct_cuda_graph_explain_error("the captured work");
}

[[noreturn]] void state(const std::string &msg) { throw ct::Failure{CT_ESTATE, msg}; }

bool null_graph(const ct_cuda_graph *g, const char *fn) {
    if (g) return false;
    ct::fail(CT_EINVAL, fn, "graph is NULL");
    return true;
}

// Stream `waiter` waits for what was enqueued on `on` so far (wait_stream).
void wait_stream(const c10::cuda::CUDAStream &waiter, const c10::cuda::CUDAStream &on) {
    at::cuda::CUDAEvent ev;
    ev.record(on);
    ev.block(waiter);
}

// Makes the default generator of the current device leave capture mode: a
// capture that failed before capture_end reached the generator leaves it
// believing it is capturing. The only door libtorch offers is a successful
// capture, so one is made: a one-element fill, captured, instantiated and
// dropped. The current stream must be the side stream.
void release_generator() {
    Graph g;
    g.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
        at::zeros({1}, at::TensorOptions().device(at::kCUDA, c10::cuda::current_device()));
    } catch (...) {
        try {
            g.capture_end();
        } catch (...) {
        }
        throw;
    }
    g.capture_end();
}

// Cleans up after a capture that failed or was aborted: whatever CUDAGraph
// left undone is done, best effort, in the order capture_end would have
// done it. Never throws. The caller restores the stream afterwards; the
// current stream is the side stream here.
void discard_capture(ct_cuda_graph *g) {
    c10::cuda::CUDAGuard guard(g->device);
    // A stream still capturing (capture_end never reached cudaStreamEndCapture)
    // is taken out of capture first: nothing else works on it until then.
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(g->side.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
        cudaGraph_t raw = nullptr;
        if (cudaStreamEndCapture(g->side.stream(), &raw) == cudaSuccess && raw) cudaGraphDestroy(raw);
    }
    // Not ended: capture_begin or capture_end threw before handing the pool
    // back and before the generator left capture mode.
    const bool unfinished = g->graph && !g->graph->ended();
    if (unfinished) {
        auto id = g->graph->pool_id();
        if (id.first != 0 || id.second != 0) {
            // Each may have been done already (capture_end got that far): then
            // it throws, which is fine.
            try {
                c10::cuda::CUDACachingAllocator::endAllocateToPool(g->device, id);
            } catch (...) {
            }
            try {
                at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(id);
            } catch (...) {
            }
            try {
                c10::cuda::CUDACachingAllocator::releasePool(g->device, id);
            } catch (...) {
            }
            try {
                at::getHostAllocator(at::kCUDA)->release_pool(id);
            } catch (...) {
            }
        }
    }
    try {
        g->graph.reset();  // unregisters it from the generator
    } catch (...) {
    }
    if (unfinished) {
        try {
            release_generator();
        } catch (...) {
        }
    }
    (void)cudaGetLastError();  // no stale error for the next kernel launch check
    g->capturing = false;
    g->captured = false;
}

void restore_stream(ct_cuda_graph *g) {
    if (g->prev) c10::cuda::setCurrentCUDAStream(*g->prev);
    g->prev.reset();
}

}  // namespace

// ---- the API ------------------------------------------------------------------

extern "C" ct_cuda_graph *ct_cuda_graph_new(int device) {
    try {
        at::Device d = ct::to_device(ct_cuda(device));
        c10::cuda::CUDAGuard guard(d.index());
        auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index());
        return new ct_cuda_graph(d.index(), side);
    } catch (...) {
        ct::fail_exception(__func__);
        return nullptr;
    }
}

extern "C" void ct_cuda_graph_free(ct_cuda_graph *g) {
    if (!g) return;
    ct_cuda_graph_capture_abort(g);
    if (g->in_side) {
        try {
            c10::cuda::CUDAGuard guard(g->device);
            wait_stream(*g->prev, g->side);
        } catch (...) {
        }
        restore_stream(g);
    }
    try {
        // A replay may still be running: libtorch frees the generator's
        // offset tensors with the graph, outside its pool.
        if (g->captured) {
            c10::cuda::CUDAGuard guard(g->device);
            c10::cuda::device_synchronize();
        }
        g->graph.reset();
    } catch (...) {
    }
    delete g;
}

extern "C" int ct_cuda_graph_side_stream_begin(ct_cuda_graph *g) {
    if (null_graph(g, __func__)) return CT_EINVAL;
    return ct::status(__func__, [&] {
        if (g->capturing) state("a capture is under way");
        if (g->in_side) state("a side-stream scope is open already");
        c10::cuda::CUDAGuard guard(g->device);
        c10::cuda::CUDAStream cur = c10::cuda::getCurrentCUDAStream(g->device);
        wait_stream(g->side, cur);
        g->prev = cur;
        c10::cuda::setCurrentCUDAStream(g->side);
        g->in_side = true;
    });
}

extern "C" int ct_cuda_graph_side_stream_end(ct_cuda_graph *g) {
    if (null_graph(g, __func__)) return CT_EINVAL;
    return ct::status(__func__, [&] {
        if (!g->in_side) state("no side-stream scope is open (call ct_cuda_graph_side_stream_begin first)");
        c10::cuda::CUDAGuard guard(g->device);
        g->in_side = false;
        restore_stream(g);
        wait_stream(c10::cuda::getCurrentCUDAStream(g->device), g->side);
    });
}

extern "C" int ct_cuda_graph_capture_begin(ct_cuda_graph *g) {
    if (null_graph(g, __func__)) return CT_EINVAL;
    if (g->capturing) return ct::fail(CT_ESTATE, __func__, "a capture is under way already");
    if (g->in_side)
        return ct::fail(CT_ESTATE, __func__, "a side-stream scope is open (end it before capturing)");
    try {
        c10::cuda::CUDAGuard guard(g->device);
        // Nothing in flight may still use the pool of the capture being
        // replaced, and the capture starts from a quiet device.
        c10::cuda::device_synchronize();
        g->graph.reset();
        g->captured = false;
        g->graph = std::make_unique<Graph>();
        g->prev = c10::cuda::getCurrentCUDAStream(g->device);
        c10::cuda::setCurrentCUDAStream(g->side);
        g->capturing = true;
        // The device guard also makes capture_begin register this device's
        // default generator (getDefaultCUDAGenerator of the current device).
        g->graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
        return CT_OK;
    } catch (...) {
        std::string msg;
        int code = ct::fail_exception(__func__);
        msg = ct_last_error();
        if (g->capturing) {
            c10::cuda::CUDAGuard guard(g->device);
            discard_capture(g);
            restore_stream(g);
        }
        ct_set_error(code, "%s", msg.c_str());
        return ct_cuda_graph_explain_error("the capture");
    }
}

extern "C" int ct_cuda_graph_capture_end(ct_cuda_graph *g) {
    if (null_graph(g, __func__)) return CT_EINVAL;
    if (!g->capturing)
        return ct::fail(CT_ESTATE, __func__, "no capture is under way (call ct_cuda_graph_capture_begin first)");
    try {
        c10::cuda::CUDAGuard guard(g->device);
        if (c10::cuda::getCurrentCUDAStream(g->device) != g->side) {
            // The captured work changed the current stream and left it so:
            // end the capture on its own stream, then refuse it.
            c10::cuda::setCurrentCUDAStream(g->side);
            discard_capture(g);
            restore_stream(g);
            return fail_capture(CT_ESTATE, __func__,
                                "capture must end on the same stream it began on: the current CUDA stream "
                                "was changed during capture and not restored");
        }
        try {
            g->graph->capture_end();
        } catch (...) {
            int code = ct::fail_exception(__func__);
            std::string msg = ct_last_error();
            discard_capture(g);
            restore_stream(g);
            ct_set_error(code, "%s", msg.c_str());
            return ct_cuda_graph_explain_error("the captured work");
        }
        g->capturing = false;
        g->captured = true;
        restore_stream(g);
        return CT_OK;
    } catch (...) {
        int code = ct::fail_exception(__func__);
        std::string msg = ct_last_error();
        if (g->capturing) {
            discard_capture(g);
            restore_stream(g);
        }
        ct_set_error(code, "%s", msg.c_str());
        return ct_cuda_graph_explain_error("the captured work");
    }
}

extern "C" void ct_cuda_graph_capture_abort(ct_cuda_graph *g) {
    if (!g || !g->capturing) return;
    int code = ct_last_code();
    std::string msg = ct_last_error();
    try {
        c10::cuda::CUDAGuard guard(g->device);
        c10::cuda::setCurrentCUDAStream(g->side);  // capture_end ends on the capturing stream
        try {
            g->graph->capture_end();  // fails on an invalidated capture: then the cleanup does the rest
        } catch (...) {
        }
        discard_capture(g);
    } catch (...) {
    }
    g->capturing = false;
    g->captured = false;
    try {
        restore_stream(g);
    } catch (...) {
    }
    if (code == CT_OK) ct_clear_error();
    else ct_set_error(code, "%s", msg.c_str());
}

extern "C" int ct_cuda_graph_replay(ct_cuda_graph *g) {
    if (null_graph(g, __func__)) return CT_EINVAL;
    return ct::status(__func__, [&] {
        if (g->capturing) state("a capture is under way (end it first)");
        if (!g->captured || !g->graph) state("nothing is captured (ct_cuda_graph_capture_begin/_end first)");
        c10::cuda::CUDAGuard guard(g->device);
        g->graph->replay();
    });
}

extern "C" int ct_cuda_graph_explain_error(const char *what) {
    int code = ct_last_code();
    if (code == CT_OK) return CT_OK;
    std::string msg = ct_last_error();
    const Cause *c = cause_of(msg);
    if (!c) return code;
    return ct_set_error(CT_ESTATE, "%s %s: %s", what && what[0] ? what : "the captured work", c->did,
                        msg.c_str());
}
