/*
 * ctrial/cuda.h — CUDA devices: availability, synchronisation, memory
 * statistics, and CUDA graphs (capture once, replay with one launch).
 *
 * Everything here works in every build: where the linked libtorch has no
 * CUDA, or no GPU is present, the queries answer false/0 and the actions fail
 * with CT_ENOTSUP or CT_EDEVICE and a message saying which.
 *
 *     if (ct_cuda_is_available()) {
 *         ct_nn_to_device(net, ct_cuda(0));
 *         ...
 *         int64_t peak = 0;
 *         ct_cuda_max_memory_allocated(0, &peak);
 *     }
 */
#ifndef CTRIAL_CUDA_H
#define CTRIAL_CUDA_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The linked libtorch was built with CUDA (a property of the build). */
CT_API bool ct_cuda_is_built(void);
/* libtorch has CUDA and at least one GPU is present now. */
CT_API bool ct_cuda_is_available(void);
/* Number of visible GPUs; 0 without CUDA. */
CT_API int ct_cuda_device_count(void);
/* Waits for all work on the device (torch.cuda.synchronize(device)). */
CT_API int ct_cuda_synchronize(int device);
/* Bytes held by tensors now / at peak since the last reset, on a device
 * (torch.cuda.memory_allocated / max_memory_allocated). */
CT_API int ct_cuda_memory_allocated(int device, int64_t *bytes);
CT_API int ct_cuda_max_memory_allocated(int device, int64_t *bytes);
CT_API int ct_cuda_reset_peak_memory_stats(int device);
/* Returns cached, unused blocks to the driver (torch.cuda.empty_cache()). */
CT_API int ct_cuda_empty_cache(void);

/* ---- raw handles, for code that drives CUDA libraries itself (NCCL) ---- */

/* Makes `device` the calling thread's current CUDA device
 * (torch.cuda.set_device). Returns a status: CT_EDEVICE for a device that
 * does not exist or no GPU. */
CT_API int ct_cuda_set_device(int device);
/* The calling thread's current CUDA stream on `device`, as a cudaStream_t
 * (torch.cuda.current_stream(device).cuda_stream). Borrowed: libtorch owns
 * it. As in PyTorch, the default stream is the null stream, so NULL is also
 * a valid answer: it is an error (recorded: CT_EDEVICE, or CT_ENOTSUP
 * without CUDA) only for a device that does not exist — check the device
 * first (ct_cuda_device_count) where that matters. */
CT_API void *ct_cuda_current_stream(int device);
/* The device address of a contiguous CUDA tensor's first element
 * (tensor.data_ptr()). Borrowed: valid while t's storage lives. NULL + error
 * for a CPU tensor (CT_EDEVICE), a non-contiguous one (CT_EINVAL) or one
 * without device memory (no elements; CT_EINVAL). */
CT_API void *ct_cuda_data_ptr(const ct_tensor *t);
/* t (a host tensor, pinned for the copy to be asynchronous) copied to
 * cuda:device on a side stream of that device, which the current stream
 * then waits for through an event: the copy runs beside the work already
 * queued on the current stream instead of behind it, and the host does not
 * wait (torch: with torch.cuda.stream(s): x.to(dev, non_blocking=True);
 * current.wait_stream(s); x.record_stream(current)). The result is
 * recorded on the current stream, so the caching allocator keeps its memory
 * until the work queued there is done. NEW tensor (like ct_to_device), or
 * NULL + error. */
CT_API ct_tensor *ct_cuda_copy_in(const ct_tensor *t, int device);
/* dst.copy_(src, non_blocking=True): between a CUDA tensor and a host
 * tensor, queued on the current stream of the CUDA side's device; with
 * pinned host memory the host does not wait (a pageable side makes CUDA
 * copy synchronously). Wait for it with an event recorded after it
 * (below) before reading a host dst, and keep a host src unchanged until
 * then. Same shapes and dtypes. Returns a status. */
CT_API int ct_cuda_copy_async(ct_tensor *dst, const ct_tensor *src);
/* The PCI address of a device, "dddd:bb:dd.f" as nvidia-smi prints it
 * (torch.cuda.get_device_properties(d).pci_bus_id, with the domain):
 * what tells two processes' devices apart where CUDA_VISIBLE_DEVICES gives
 * each its own numbering. Writes at most len bytes with the terminator.
 * Returns a status (CT_EDEVICE for no such device). */
CT_API int ct_cuda_device_pci_id(int device, char *out, size_t len);

/* An event (torch.cuda.Event): a point in a stream's work the host can
 * ask about or wait for. ct_cuda_event_record returns a NEW event recorded
 * on the current stream of `device` (NULL + error); _query says whether
 * the work before it is done (1), not yet (0) or a negative code; _wait
 * blocks the host until it is (a status); _free accepts NULL. */
typedef struct ct_cuda_event ct_cuda_event;
CT_API ct_cuda_event *ct_cuda_event_record(int device);
CT_API int ct_cuda_event_query(ct_cuda_event *e);
CT_API int ct_cuda_event_wait(ct_cuda_event *e);
CT_API void ct_cuda_event_free(ct_cuda_event *e);

/* ---- CUDA graphs (torch.cuda.CUDAGraph) -------------------------------------
 *
 * A graph records the GPU work of a stretch of code once and replays it
 * with one launch: the host no longer pays for every kernel launch, which
 * is most of the time of a small model. PyTorch's whole-network recipe,
 * call for call:
 *
 *     ct_cuda_graph *g = ct_cuda_graph_new(0);
 *     for (int i = 0; i < 3; i++) {                 // warm-up, on the side stream
 *         ct_cuda_graph_side_stream_begin(g);       // s.wait_stream(current); with torch.cuda.stream(s):
 *         step(static_x, static_y);                 // lazy state is made here, not in the graph
 *         ct_cuda_graph_side_stream_end(g);         // current.wait_stream(s)
 *     }
 *     ct_optim_zero_grad(opt, true);                // backward then allocates .grad in the graph's pool
 *     ct_cuda_graph_capture_begin(g);
 *     ct_tensor *loss = step(static_x, static_y);   // recorded, not run
 *     if (!loss) {
 *         ct_cuda_graph_capture_abort(g);           // keeps step's error
 *         ct_cuda_graph_explain_error("step");      // names the likely cause
 *     } else if (ct_cuda_graph_capture_end(g) == 0) {
 *         for (...) {
 *             ct_copy_(static_x, next_x);           // new inputs into the captured tensors
 *             ct_copy_(static_y, next_y);
 *             ct_cuda_graph_replay(g);              // loss now holds this batch's value
 *         }
 *     }
 *     ct_cuda_graph_free(g);
 *
 * What a replay does is what the capture recorded: the same kernels on the
 * same addresses with the same scalar arguments. So shapes are static,
 * inputs go into the captured tensors, outputs are the captured tensors
 * (overwritten by each replay: clone what must outlive the next one), host
 * values (a learning rate, a Python-style float argument) are frozen at
 * capture, and host code between the capture calls runs only once.
 * Capture refuses anything that makes the host wait for the GPU: item(),
 * printing or copying a CUDA tensor to the CPU, ops whose output shape
 * depends on the data (nonzero, masked_select), synchronisations.
 *
 * Random numbers work: capture registers the device's default CUDA
 * generator (libtorch's CUDAGraph does it in capture_begin), whose Philox
 * offsets advance on every replay as eager calls would advance them, so
 * dropout draws fresh masks and a replayed run draws what an eager run
 * draws. Other generators are not registered.
 *
 * Capture mode is thread-local (cudaStreamCaptureModeThreadLocal): the
 * capturing thread is refused the CUDA calls that are unsafe during
 * capture, while other threads (data-loader workers pinning memory and
 * freeing pinned blocks) go on; global mode, PyTorch's default, would fail
 * their calls or invalidate the capture. Autograd's device threads enqueue
 * backward's kernels on the capturing stream and are captured with it.
 *
 * Failures during capture end it and leave no trace: the stream is back
 * to what it was, the private pool is released and the generator is
 * usable eagerly again. Their messages name the cause in user terms
 * (ct_cuda_graph_explain_error), as CT_ESTATE.
 *
 * Everything here exists in every build; without CUDA or a GPU
 * ct_cuda_graph_new fails (CT_ENOTSUP / CT_EDEVICE). A graph has no lock:
 * use it from one thread, which must also be the one that begins and ends
 * its captures and side-stream scopes. */

typedef struct ct_cuda_graph ct_cuda_graph;

/* A new graph on `device` with its own side stream (a stream from
 * libtorch's pool, as torch.cuda.Stream()) for warm-up and capture; nothing
 * is captured yet. NULL + error: CT_ENOTSUP without CUDA, CT_EDEVICE for no
 * GPU or a device that does not exist. */
CT_API ct_cuda_graph *ct_cuda_graph_new(int device);
/* Waits for the device when something was captured (a replay may still
 * run), then frees the graph and its memory pool (accepts NULL); a capture
 * under way is aborted, a side-stream scope left open is closed. Tensors
 * made during capture stay valid: they keep their blocks until freed. */
CT_API void ct_cuda_graph_free(ct_cuda_graph *g);

/* Runs the calling thread's work on the graph's side stream until
 * ct_cuda_graph_side_stream_end: the side stream first waits for the
 * current stream, and at the end the current stream waits for the side
 * stream (torch.cuda.stream(s) after s.wait_stream(current), then
 * current.wait_stream(s)). Warm-up iterations before a capture belong here:
 * libraries initialise per-stream state (cuBLAS workspaces) lazily, and it
 * must exist before capture. CT_ESTATE inside a capture or a scope already
 * open. Returns a status. */
CT_API int ct_cuda_graph_side_stream_begin(ct_cuda_graph *g);
CT_API int ct_cuda_graph_side_stream_end(ct_cuda_graph *g);

/* Begins capturing the calling thread's work on the graph's device: waits
 * for the device to finish (torch.cuda.graph does too), drops the previous
 * capture if any (its pool with it: a graph holds one capture, and
 * capturing again replaces it), makes the side stream current and starts
 * capture into a private memory pool in thread-local mode. Returns a
 * status; CT_ESTATE inside a side-stream scope or a capture. */
CT_API int ct_cuda_graph_capture_begin(ct_cuda_graph *g);
/* Ends the capture and instantiates the graph; the current stream is the
 * one from before capture_begin again. A capture the recorded work broke
 * (a host sync, unjoined streams, ...) fails here with CT_ESTATE naming the
 * likely cause; the graph is then empty and can capture again. */
CT_API int ct_cuda_graph_capture_end(ct_cuda_graph *g);
/* Ends a capture under way and throws it away (after the recorded work
 * failed); does nothing when none is under way. Keeps the calling thread's
 * last error as it is. */
CT_API void ct_cuda_graph_capture_abort(ct_cuda_graph *g);
/* Replays the captured work on the calling thread's current stream
 * (asynchronously, like any kernel launch). CT_ESTATE when nothing is
 * captured or a capture is under way. Returns a status. */
CT_API int ct_cuda_graph_replay(ct_cuda_graph *g);

/* After a failure while capturing: when the calling thread's last error is
 * one of CUDA's or libtorch's capture errors, rewrites it as CT_ESTATE
 * "<what> did something that needs the host to wait for the GPU during
 * capture: a .item()/ct_item, ...: <the original message>" (or the cause
 * that fits: unjoined side streams, a reseeded generator, ...). Other
 * errors, and none, are left alone. Returns the last error's code. */
CT_API int ct_cuda_graph_explain_error(const char *what);

#ifdef __cplusplus
}
#endif
#endif
