/* src/nccl_lib.h — NVIDIA's nccl.h, for src/nccl.c only (internal).
 *
 * Included by absolute path (CTRIAL_NCCL_HEADER, which
 * cmake/FindCtrialNccl.cmake sets next to the libnccl.so.2 it links): a
 * plain <nccl.h> would find ctrial's own src/nccl.h wherever src/ is on the
 * include path (tests compile src/ files in), and the path pins the header
 * to the library that is linked. Marked a system header so that NCCL's own
 * declarations (`ncclGroupStart()`, no `void`) do not trip
 * -Wstrict-prototypes under -Werror; that carries over to what it includes. */
#ifndef CT_NCCL_LIB_H
#define CT_NCCL_LIB_H

#pragma GCC system_header

#ifndef CTRIAL_NCCL_HEADER
#error "CTRIAL_NCCL_HEADER is not set: link the target with ctrial_nccl (cmake/FindCtrialNccl.cmake)"
#endif
#include CTRIAL_NCCL_HEADER

#endif
