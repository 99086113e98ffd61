/* src/dist/cuda_transport.h — how CUDA tensors travel between ranks: NCCL,
 * or through host memory and MPI. Internal to ctrial.
 *
 * NCCL is the default where every rank has a GPU of its own. Where it
 * cannot be used — a build without NCCL, or two ranks on one GPU, which
 * NCCL refuses — CUDA tensors are copied to host memory, reduced there by
 * the same MPI code as CPU tensors, and copied back, as torch's gloo
 * backend does with CUDA tensors. CTRIAL_CUDA_TRANSPORT=nccl asks for NCCL
 * by name (and is refused where it cannot work); =host asks for the copies
 * through host memory everywhere. */
#ifndef CTRIAL_DIST_CUDA_TRANSPORT_H
#define CTRIAL_DIST_CUDA_TRANSPORT_H

#include <stddef.h>

typedef enum {
    CTI_CUDA_NCCL = 1, /* NCCL on the device */
    CTI_CUDA_HOST = 2, /* staged through host memory, reduced by MPI */
} cti_cuda_transport;

/* The transport for CUDA tensors on `device` (this rank's), decided once
 * per job (again after a group begins or ends): every rank's PCI address
 * and host name, and its CTRIAL_CUDA_TRANSPORT, in one all-reduce, so
 * every rank decides alike. Collective: each rank's first CUDA collective
 * (a gradient sync's creation, a collective on a CUDA tensor) calls it at
 * the same point. Returns the transport, or a negative code with an error
 * naming the problem on every rank (a value that is neither nccl nor host;
 * nccl asked for where the build has none or ranks share a GPU). With one
 * rank, or without MPI: CTI_CUDA_NCCL without any exchange. */
int cti_cuda_transport_get(int device);

/* Why the last decision went as it did ("ranks 0 and 1 share a GPU, which
 * NCCL refuses", "this ctrial was built without NCCL",
 * "CTRIAL_CUDA_TRANSPORT=host"; "" for NCCL by default). Borrowed. */
const char *cti_cuda_transport_why(void);

/* Forgets the decision (a group begins or ends: other ranks, other GPUs). */
void cti_cuda_transport_reset(void);

#endif
