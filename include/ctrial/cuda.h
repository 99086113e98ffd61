/*
 * ctrial/cuda.h — CUDA devices: availability, synchronisation, memory
 * statistics.
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

#ifdef __cplusplus
}
#endif
#endif
