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

#ifdef __cplusplus
}
#endif
#endif
