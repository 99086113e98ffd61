/* src/dist/nccl_vendor.h — NVIDIA's nccl.h, for src/dist/nccl_comm.c only.
 * Internal to ctrial.
 *
 * Included by absolute path (CTRIAL_NCCL_HEADER, which
 * cmake/FindCtrialNccl.cmake sets next to the libnccl.so.2 it links): the
 * path pins the header to the library that is linked, whatever other NCCL
 * the include path holds (the CUDA toolkit's, say). Marked a system header
 * so that NCCL's own declarations (`ncclGroupStart()`, no `void`) do not
 * trip -Wstrict-prototypes under -Werror; that carries over to what it
 * includes. */
#ifndef CTRIAL_DIST_NCCL_VENDOR_H
#define CTRIAL_DIST_NCCL_VENDOR_H

#pragma GCC system_header

#ifndef CTRIAL_NCCL_HEADER
#error "CTRIAL_NCCL_HEADER is not set: link the target with ctrial_nccl (cmake/FindCtrialNccl.cmake)"
#endif
#include CTRIAL_NCCL_HEADER

#endif
