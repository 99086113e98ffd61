/* src/dist/cuda_transport.c — NCCL, or CUDA tensors through host memory
 * (cuda_transport.h). */
#define _POSIX_C_SOURCE 200809L
#include "dist/cuda_transport.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrial/cuda.h"
#include "ctrial/dist.h"
#include "ctrial/error.h"
#include "dist/agree.h"
#include "dist/nccl_comm.h"

enum { ASK_ANY = 0, ASK_NCCL = 1, ASK_HOST = 2, ASK_BAD = 3 };

static int decided; /* 0: not yet, else a cti_cuda_transport */
static char why[200];

const char *cti_cuda_transport_why(void) { return why; }

void cti_cuda_transport_reset(void) {
    decided = 0;
    why[0] = '\0';
}

/* FNV-1a over the host name and the device's PCI address: equal on two
 * ranks exactly when they drive the same GPU (0 never: 0 means unknown). */
static int64_t device_key(const char *host, const char *pci) {
    uint64_t h = 1469598103934665603ull;
    for (const char *s = host; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *s = pci; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? (int64_t)(h >> 1) : 1;
}

static int ask_of(const char *env) {
    if (!env || !*env) return ASK_ANY;
    if (strcmp(env, "nccl") == 0) return ASK_NCCL;
    if (strcmp(env, "host") == 0) return ASK_HOST;
    return ASK_BAD;
}

int cti_cuda_transport_get(int device) {
    if (decided) return decided;
    int size = ct_dist_size(), rank = ct_dist_rank();
    const char *env = getenv("CTRIAL_CUDA_TRANSPORT");
    if (size == 1) return CTI_CUDA_NCCL; /* nothing travels; decided by the first call with ranks */
    char pci[32] = "", host[256] = "";
    int rc = ct_cuda_device_pci_id(device, pci, sizeof pci);
    char err[256] = "";
    if (rc != CT_OK) snprintf(err, sizeof err, "%s", ct_last_error());
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    int64_t *v = calloc((size_t)size * 2, sizeof *v);
    if (!v) return ct_set_error(CT_ENOMEM, "cuda transport: rank %d: out of memory", rank);
    v[rank] = rc == CT_OK ? device_key(host, pci) : 0;
    v[size + rank] = ask_of(env);
    /* Every rank reaches this all-reduce, also one that could not name its GPU. */
    rc = cti_dist_allreduce_i64_as(v, size * 2, CT_DIST_SUM, "choosing how CUDA tensors travel");
    if (rc != CT_OK) {
        free(v);
        return rc;
    }
    int code = CT_OK, shared_a = -1, shared_b = -1;
    bool any_host = false, any_nccl = false;
    for (int r = 0; r < size && code == CT_OK; r++) {
        if (v[r] == 0)
            code = r == rank ? ct_set_error(CT_EDEVICE, "cuda transport: rank %d: cuda:%d: %s", rank, device, err)
                             : ct_set_error(CT_EDIST, "cuda transport: rank %d could not name its GPU (its message "
                                            "is on its own stderr)", r);
        else if (v[size + r] == ASK_BAD)
            code = r == rank ? ct_set_error(CT_EINVAL, "cuda transport: rank %d: CTRIAL_CUDA_TRANSPORT=%s: expected "
                                            "nccl or host (or unset: NCCL where each rank has its own GPU)", r, env)
                             : ct_set_error(CT_EINVAL, "cuda transport: rank %d's CTRIAL_CUDA_TRANSPORT is neither "
                                            "nccl nor host", r);
        any_host |= v[size + r] == ASK_HOST;
        any_nccl |= v[size + r] == ASK_NCCL;
        for (int q = 0; q < r && shared_a < 0; q++)
            if (v[q] == v[r]) shared_a = q, shared_b = r;
    }
    if (code == CT_OK && any_host && any_nccl)
        code = ct_set_error(CT_EINVAL, "cuda transport: rank %d: the ranks' CTRIAL_CUDA_TRANSPORT differ (nccl on "
                            "some, host on others): set it alike on every rank", rank);
    free(v);
    if (code != CT_OK) return code;
    if (any_host) {
        snprintf(why, sizeof why, "CTRIAL_CUDA_TRANSPORT=host");
        return decided = CTI_CUDA_HOST;
    }
    if (!cti_nccl_is_built()) {
        if (any_nccl)
            return ct_set_error(CT_ENOTSUP, "cuda transport: rank %d: CTRIAL_CUDA_TRANSPORT=nccl, but this ctrial "
                                "was built without NCCL (CTRIAL_WITH_NCCL); unset it to go through host memory", rank);
        snprintf(why, sizeof why, "this ctrial was built without NCCL");
        return decided = CTI_CUDA_HOST;
    }
    if (shared_a >= 0) {
        if (any_nccl)
            return ct_set_error(CT_EDIST, "cuda transport: rank %d: CTRIAL_CUDA_TRANSPORT=nccl, but ranks %d and %d "
                                "drive the same GPU, which NCCL refuses: give each rank its own GPU, or unset it to "
                                "go through host memory", rank, shared_a, shared_b);
        snprintf(why, sizeof why, "ranks %d and %d share a GPU, which NCCL refuses", shared_a, shared_b);
        return decided = CTI_CUDA_HOST;
    }
    return decided = CTI_CUDA_NCCL;
}
