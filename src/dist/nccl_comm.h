/* src/dist/nccl_comm.h — NCCL collectives on CUDA memory, bootstrapped over
 * MPI. Internal to ctrial.
 *
 * dist.c sends CUDA tensors here; grad_sync.c may hand over raw bucket
 * memory. Each call enqueues one NCCL collective on a CUDA stream and
 * returns: like torch.distributed with NCCL, the result is there for work
 * that follows on that stream (or after ct_cuda_synchronize), not yet for
 * the host.
 *
 *     void *p = ct_cuda_data_ptr(t);                 // contiguous CUDA tensor
 *     int rc = cti_nccl_allreduce(p, (size_t)ct_numel(t), ct_dtype_of(t),
 *                                CT_DIST_AVG, ct_device_of(t).index, NULL);
 *
 * Communicators. The first call that names a device creates the job's
 * communicator for it, and that call is collective: every rank must make
 * its first call for a device at the same point in the same order (ranks
 * on different devices pair up by that order, not by device index). It
 * also makes the device the calling thread's current CUDA device (NCCL
 * binds a communicator to the current device), and it talks over MPI,
 * which runs FUNNELED: make the first call from the thread that started
 * MPI. A call with count 0 sends nothing but does create the communicator,
 * so a caller that later reduces from another thread can set it up ahead
 * of time.
 *
 * Streams and memory. On the current stream (stream NULL), libtorch's
 * allocator reuses freed memory only for later work on that stream, so a
 * tensor may be freed right after the call. On another stream, keep buf
 * alive until that stream has passed the collective.
 *
 * Failures are CT_EDIST naming the rank, the NCCL call and NCCL's message;
 * the caller ends the job (the loop's MPI_Abort), because a peer that
 * entered the collective would otherwise wait for this rank forever. With
 * one rank every call is a no-op that returns CT_OK, in every build (only
 * op and root are checked). Not thread-safe: one thread at a time, as
 * NCCL's communicators themselves require. */
#ifndef CTRIAL_DIST_NCCL_COMM_H
#define CTRIAL_DIST_NCCL_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "ctrial/dist.h"
#include "ctrial/tensor.h"

/* Whether this build has NCCL (CTRIAL_HAVE_NCCL). */
bool cti_nccl_is_built(void);

/* All-reduce of `count` elements of `dtype` at device address `buf` (in
 * place) across every rank of the job, enqueued on `stream` (a
 * cudaStream_t; NULL: the current stream of `device`). Asynchronous with
 * respect to the host, like torch.distributed with NCCL. CT_DIST_AVG uses
 * ncclAvg (floating dtypes; integer dtypes: CT_EDTYPE before anything is
 * sent). Dtypes: f32, f64, f16, bf16, i32, i64, u8, i8; others CT_EDTYPE.
 * The first call on a device creates the job's communicator for it
 * (collective: every rank must make its first NCCL call in the same order).
 * Returns a status: CT_EDIST naming the rank, the NCCL call and NCCL's
 * message (ncclGetErrorString + ncclGetLastError); CT_EINVAL for a bad op,
 * a NULL buf with count > 0 or a device index out of range; CT_ENOTSUP when
 * the build has no NCCL. With one rank: a no-op (CT_OK). */
int cti_nccl_allreduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int device, void *stream);

/* Reduce of `count` elements at `buf` over every rank into root's `buf`
 * (0 .. size-1; the others' are left as they were), in place; same rules
 * as cti_nccl_allreduce. A sharded optimizer's bucket (grad_sync.c). */
int cti_nccl_reduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int root, int device, void *stream);

/* Broadcast of `count` elements at `buf` from `root` (0 .. size-1) to every
 * rank, in place; same rules as cti_nccl_allreduce. */
int cti_nccl_broadcast(void *buf, size_t count, ct_dtype dtype, int root, int device, void *stream);

/* Destroys every communicator (ncclCommDestroy; ncclCommAbort for one that
 * reported an asynchronous error). Called by ct_dist_finalize before
 * MPI_Finalize, and at exit; safe to call twice or with none. */
void cti_nccl_finalize(void);

#endif
