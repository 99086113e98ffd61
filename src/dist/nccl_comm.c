/* src/dist/nccl_comm.c — NCCL collectives on CUDA memory, bootstrapped over MPI
 * (nccl.h).
 *
 * Only NCCL and MPI calls live here. Everything that touches the CUDA
 * runtime (current device, current stream, a tensor's device address) goes
 * through the shim (ctrial/cuda.h), so this file needs NCCL's header but
 * no CUDA library of its own; libnccl.so.2 is the one the torch wheel ships
 * and libtorch_cuda already loads (cmake/FindCtrialNccl.cmake). */
#define _POSIX_C_SOURCE 200809L
#include "dist/nccl_comm.h"

#include "ctrial/config.h"
#include "ctrial/error.h"

/* The one argument check made with one rank too (dist.c does the same). */
static bool op_is_valid(ct_dist_op op) { return (int)op >= CT_DIST_SUM && (int)op <= CT_DIST_MIN; }

#if CTRIAL_HAVE_NCCL

#if !CTRIAL_HAVE_MPI
#error "NCCL is bootstrapped over MPI: CTRIAL_HAVE_NCCL needs CTRIAL_HAVE_MPI"
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "ctrial/cuda.h"
#include "dist/comm.h"
#include "dist/nccl_vendor.h" /* NVIDIA's nccl.h */

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "ctrial needs NCCL 2.10 or newer (ncclAvg); cmake/FindCtrialNccl.cmake refuses older ones"
#endif
/* ncclBfloat16 came with NCCL 2.10, whose header declares it only where
 * CUDA's headers have bf16 (cuda_bf16.h, CUDA 11+: every CUDA libtorch 2.x);
 * without it bfloat16 is refused like any dtype NCCL lacks. */
#if defined(__CUDA_BF16_TYPES_EXIST__)
#define CT_NCCL_HAS_BF16 1
#else
#define CT_NCCL_HAS_BF16 0
#endif

/* One communicator per device index. libtorch names at most 120 GPUs in a
 * process (C10_COMPILE_TIME_MAX_GPUS; its device index is 8 bits), so 128
 * slots cover every device it can name, and a fixed table needs no
 * allocation, no lookup and nothing to free but the communicators. */
#define MAX_DEVICES 128

static ncclComm_t comms[MAX_DEVICES];
static bool exit_hook_set;

bool cti_nccl_is_built(void) { return true; }

/* NCCL's own account of the last failure (comm may be NULL: the thread's). */
static const char *nccl_detail(ncclComm_t comm) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    const char *s = ncclGetLastError(comm);
    return s && *s ? s : "no detail; NCCL_DEBUG=WARN prints more";
#else
    (void)comm;
    return "NCCL_DEBUG=WARN prints more";
#endif
}

/* Records CT_EDIST naming the rank, the NCCL call, the device and NCCL's
 * message; returns the code. */
static int nccl_failed(const char *fn, const char *call, int device, ncclResult_t r, ncclComm_t comm) {
    return ct_set_error(CT_EDIST, "%s: rank %d: %s on cuda:%d failed: %s (%s)", fn, ct_dist_rank(), call, device,
                        ncclGetErrorString(r), nccl_detail(comm));
}

/* NCCL's type for a dtype; false where NCCL has none. */
static bool nccl_type(ct_dtype d, ncclDataType_t *out) {
    switch (d) {
    case CT_F32: *out = ncclFloat32; return true;
    case CT_F64: *out = ncclFloat64; return true;
    case CT_F16: *out = ncclFloat16; return true;
#if CT_NCCL_HAS_BF16
    case CT_BF16: *out = ncclBfloat16; return true;
#endif
    case CT_I32: *out = ncclInt32; return true;
    case CT_I64: *out = ncclInt64; return true;
    case CT_U8: *out = ncclUint8; return true;
    case CT_I8: *out = ncclInt8; return true;
    default: return false;
    }
}

static ncclRedOp_t nccl_op(ct_dist_op op) {
    switch (op) {
    case CT_DIST_AVG: return ncclAvg;
    case CT_DIST_MAX: return ncclMax;
    case CT_DIST_MIN: return ncclMin;
    default: return ncclSum;
    }
}

/* The argument checks that need no peer. Every rank makes them before
 * anything is sent, and with the same dtype, count and device rules on
 * every rank they fail everywhere or nowhere, so no rank is left inside a
 * collective the others refused. Sets *type. Returns a status. */
static int check_args(const char *fn, const void *buf, size_t count, ct_dtype dtype, int device,
                      ncclDataType_t *type) {
    if (!nccl_type(dtype, type))
        return ct_set_error(CT_EDTYPE, "%s: rank %d: NCCL has no %s type", fn, ct_dist_rank(), ct_dtype_name(dtype));
    if (!buf && count > 0) return ct_set_error(CT_EINVAL, "%s: rank %d: buf is NULL", fn, ct_dist_rank());
    if (device < 0 || device >= MAX_DEVICES)
        return ct_set_error(CT_EINVAL, "%s: rank %d: cuda:%d is out of range", fn, ct_dist_rank(), device);
    return CT_OK;
}

/* Destroys the communicators at exit before the CUDA runtime tears itself
 * down (atexit handlers run last-registered first, and this one is
 * registered after the first communicator made NCCL start CUDA). */
static void set_exit_hook(void) {
    if (exit_hook_set) return;
    exit_hook_set = true;
    atexit(cti_nccl_finalize);
}

/* Every rank says whether it is ready to join a new communicator; *first
 * gets the lowest rank that is not (INT_MAX when all are). Collective, so
 * that a rank whose device or unique id failed makes every rank give up
 * instead of leaving the others waiting in ncclCommInitRank. Returns a
 * status (CT_EDIST when MPI fails). */
static int agree_ready(const char *fn, bool ready, int *first) {
    int mine = ready ? INT_MAX : ct_dist_rank();
    int err = MPI_Allreduce(&mine, first, 1, MPI_INT, MPI_MIN, cti_dist_base_comm());
    return err == MPI_SUCCESS ? CT_OK : cti_dist_mpi_failed(fn, "MPI_Allreduce", err);
}

/* Creates the job's communicator for `device` (collective): rank 0 makes
 * NCCL's unique id, MPI broadcasts it, every rank joins on its device.
 * Returns a status; on success comms[device] is set. */
static int create_communicator(const char *fn, int device) {
    int rank = ct_dist_rank();
    /* NCCL binds the communicator to the calling thread's current device. */
    int rc = ct_cuda_set_device(device);
    if (rc != CT_OK) rc = ct_set_error(rc, "%s: rank %d: %s", fn, rank, ct_last_error());
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rc == CT_OK && rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) rc = nccl_failed(fn, "ncclGetUniqueId", device, r, NULL);
    }
    int first = INT_MAX, arc = agree_ready(fn, rc == CT_OK, &first);
    if (arc != CT_OK) return arc;
    if (rc != CT_OK) return rc; /* this rank's own message */
    if (first != INT_MAX)
        return ct_set_error(CT_EDIST, "%s: rank %d: no NCCL communicator for cuda:%d: rank %d could not prepare "
                            "(its message says why)", fn, rank, device, first);
    int err = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, cti_dist_base_comm());
    if (err != MPI_SUCCESS) return cti_dist_mpi_failed(fn, "MPI_Bcast", err);

    /* A rank that fails here returns CT_EDIST and the loop ends the job
     * (MPI_Abort); ranks still inside ncclCommInitRank are killed with it.
     * A peer that died outright is mpirun's to notice: it ends the job. */
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRank(&comm, ct_dist_size(), id, rank);
    if (r != ncclSuccess) {
        rc = nccl_failed(fn, "ncclCommInitRank", device, r, comm);
        if (comm) ncclCommAbort(comm); /* a failed blocking init may leave one behind */
        return rc;
    }
    comms[device] = comm;
    set_exit_hook();
    return CT_OK;
}

/* The communicator of `device`, created on first use; NULL + error. An
 * existing one that NCCL marked broken (an asynchronous error: a network
 * failure, a peer's abort) is reported instead of used. */
static ncclComm_t communicator(const char *fn, int device) {
    if (!comms[device] && create_communicator(fn, device) != CT_OK) return NULL;
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comms[device], &async);
    if (r != ncclSuccess) {
        nccl_failed(fn, "ncclCommGetAsyncError", device, r, comms[device]);
        return NULL;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
        nccl_failed(fn, "an earlier NCCL operation", device, async, comms[device]);
        return NULL;
    }
    return comms[device];
}

/* The stream to enqueue on: the caller's, or the current one of the
 * device. NULL is also torch's default stream (the null stream), which is
 * right here: the device exists, the communicator was made on it. */
static void *stream_for(int device, void *stream) { return stream ? stream : ct_cuda_current_stream(device); }

/* What an all-reduce and a reduce with op check before their call, and
 * the communicator: CT_OK with *comm set (NULL when there is nothing to
 * do: one rank, no elements), or a status. */
static int reduction(const char *fn, void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int device,
                     ncclDataType_t *type, ncclComm_t *comm) {
    *comm = NULL;
    if (ct_dist_size() == 1) return CT_OK;
    int rc = check_args(fn, buf, count, dtype, device, type);
    if (rc != CT_OK) return rc;
    if (op == CT_DIST_AVG && !ct_dtype_is_floating(dtype))
        return ct_set_error(CT_EDTYPE, "%s: rank %d: CT_DIST_AVG needs a floating dtype, not %s", fn, ct_dist_rank(),
                            ct_dtype_name(dtype));
    ncclComm_t c = communicator(fn, device);
    if (!c) return ct_last_code();
    if (count > 0) *comm = c;
    return CT_OK;
}

int cti_nccl_allreduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int device, void *stream) {
    const char *fn = __func__;
    if (!op_is_valid(op)) return ct_set_error(CT_EINVAL, "%s: op %d", fn, (int)op);
    ncclDataType_t type = ncclFloat32; /* set by check_args */
    ncclComm_t comm = NULL;
    int rc = reduction(fn, buf, count, dtype, op, device, &type, &comm);
    if (rc != CT_OK || !comm) return rc;
    ncclResult_t r = ncclAllReduce(buf, buf, count, type, nccl_op(op), comm, stream_for(device, stream));
    return r == ncclSuccess ? CT_OK : nccl_failed(fn, "ncclAllReduce", device, r, comm);
}

int cti_nccl_reduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int root, int device, void *stream) {
    const char *fn = __func__;
    int size = ct_dist_size();
    if (!op_is_valid(op)) return ct_set_error(CT_EINVAL, "%s: op %d", fn, (int)op);
    if (root < 0 || root >= size) return ct_set_error(CT_EINVAL, "%s: root %d of %d ranks", fn, root, size);
    ncclDataType_t type = ncclFloat32; /* set by check_args */
    ncclComm_t comm = NULL;
    int rc = reduction(fn, buf, count, dtype, op, device, &type, &comm);
    if (rc != CT_OK || !comm) return rc;
    ncclResult_t r = ncclReduce(buf, buf, count, type, nccl_op(op), root, comm, stream_for(device, stream));
    return r == ncclSuccess ? CT_OK : nccl_failed(fn, "ncclReduce", device, r, comm);
}

int cti_nccl_broadcast(void *buf, size_t count, ct_dtype dtype, int root, int device, void *stream) {
    const char *fn = __func__;
    int size = ct_dist_size();
    if (root < 0 || root >= size) return ct_set_error(CT_EINVAL, "%s: root %d of %d ranks", fn, root, size);
    if (size == 1) return CT_OK;
    ncclDataType_t type = ncclFloat32; /* set by check_args */
    int rc = check_args(fn, buf, count, dtype, device, &type);
    if (rc != CT_OK) return rc;
    ncclComm_t comm = communicator(fn, device);
    if (!comm) return ct_last_code();
    if (count == 0) return CT_OK;
    ncclResult_t r = ncclBroadcast(buf, buf, count, type, root, comm, stream_for(device, stream));
    return r == ncclSuccess ? CT_OK : nccl_failed(fn, "ncclBroadcast", device, r, comm);
}

void cti_nccl_finalize(void) {
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (!comms[d]) continue;
        /* Destroy waits for the communicator's work; after an asynchronous
         * error that work may never finish, so abort instead. */
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comms[d], &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
            ncclCommAbort(comms[d]);
        else
            ncclCommDestroy(comms[d]);
        comms[d] = NULL;
    }
}

#else /* no NCCL in this build */

bool cti_nccl_is_built(void) { return false; }

static int not_built(const char *fn) {
    return ct_set_error(CT_ENOTSUP, "%s: rank %d: this ctrial was built without NCCL, which collectives on CUDA "
                        "memory need (configure with -DCTRIAL_WITH_NCCL=ON, a libtorch with CUDA and MPI; "
                        "-DNCCL_ROOT=<dir> where NCCL is not found)", fn, ct_dist_rank());
}

int cti_nccl_allreduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int device, void *stream) {
    if (!op_is_valid(op)) return ct_set_error(CT_EINVAL, "%s: op %d", __func__, (int)op);
    return ct_dist_size() == 1 ? CT_OK : not_built(__func__);
}

int cti_nccl_reduce(void *buf, size_t count, ct_dtype dtype, ct_dist_op op, int root, int device, void *stream) {
    int size = ct_dist_size();
    if (!op_is_valid(op)) return ct_set_error(CT_EINVAL, "%s: op %d", __func__, (int)op);
    if (root < 0 || root >= size) return ct_set_error(CT_EINVAL, "%s: root %d of %d ranks", __func__, root, size);
    return size == 1 ? CT_OK : not_built(__func__);
}

int cti_nccl_broadcast(void *buf, size_t count, ct_dtype dtype, int root, int device, void *stream) {
    int size = ct_dist_size();
    if (root < 0 || root >= size) return ct_set_error(CT_EINVAL, "%s: root %d of %d ranks", __func__, root, size);
    return size == 1 ? CT_OK : not_built(__func__);
}

void cti_nccl_finalize(void) {}

#endif
