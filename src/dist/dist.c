/* src/dist/dist.c — ranks and collectives over MPI (dist.h).
 *
 * MPI starts only when mpirun launched this process (its environment says
 * so), so a plain run pays nothing. Every call checks MPI's return code and
 * turns a failure into CT_EDIST naming the rank and the call. CUDA tensors
 * go to NCCL (nccl_comm.c), bootstrapped over this MPI. */
#define _POSIX_C_SOURCE 200809L
#include "ctrial/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/launch.h"
#include "ctrial/config.h"
#include "ctrial/cuda.h"
#include "ctrial/error.h"
#include "dist/agree.h"
#include "dist/nccl_comm.h"

#if CTRIAL_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    bool init, we_started_mpi;
    int rank, size, local_rank, local_size;
} g = {.size = 1, .local_size = 1};

#if CTRIAL_HAVE_MPI

static int mpi_failed(const char *call, int err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, text, &len);
    return ct_set_error(CT_EDIST, "rank %d: %s failed: %s", g.rank, call, text);
}

#define MPI_CHECK(call)                                           \
    do {                                                          \
        int err_ = (call);                                        \
        if (err_ != MPI_SUCCESS) return mpi_failed(#call, err_); \
    } while (0)

int ct_dist_init(void) {
    if (g.init) return CT_OK;
    int started = 0;
    MPI_Initialized(&started);
    if (!started && ct_launch_world_size() == 1) {
        g.init = true;
        return CT_OK;
    }
    if (!started) {
        int provided = 0;
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        g.we_started_mpi = true;
        atexit(ct_dist_finalize); /* programs that call ct_fit directly and just return */
    }
    /* Errors come back as codes (then CT_EDIST), not as an abort inside MPI. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g.size));
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &local));
    MPI_Comm_rank(local, &g.local_rank);
    MPI_Comm_size(local, &g.local_size);
    MPI_Comm_free(&local);
    g.init = true;
    return CT_OK;
}

void ct_dist_finalize(void) {
    int done = 0;
    ct_nccl_finalize(); /* NCCL's communicators before the MPI that bootstrapped them */
    if (g.we_started_mpi && (MPI_Finalized(&done), !done)) MPI_Finalize();
    g.we_started_mpi = false;
}

void ct_dist_abort(int exit_code, const char *why) {
    fprintf(stderr, "ctrial: rank %d: %s\n", g.rank, why ? why : "aborting");
    fflush(stderr);
    if (g.size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

int ct_dist_barrier(void) {
    if (g.size == 1) return CT_OK;
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    return CT_OK;
}

/* The MPI type of a dtype; MPI_DATATYPE_NULL for half types. */
static MPI_Datatype mpi_type(ct_dtype d) {
    switch (d) {
    case CT_F32: return MPI_FLOAT;
    case CT_F64: return MPI_DOUBLE;
    case CT_I64: return MPI_INT64_T;
    case CT_I32: return MPI_INT32_T;
    case CT_I16: return MPI_INT16_T;
    case CT_I8: return MPI_INT8_T;
    case CT_U8: return MPI_UINT8_T;
    case CT_BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(ct_dist_op op) {
    switch (op) {
    case CT_DIST_MAX: return MPI_MAX;
    case CT_DIST_MIN: return MPI_MIN;
    default: return MPI_SUM;
    }
}

/* The buffer of t for MPI: a contiguous CPU tensor (CUDA tensors go to
 * NCCL before this). */
static void *mpi_buffer(const ct_tensor *t, const char *fn, MPI_Datatype *type) {
    *type = mpi_type(ct_dtype_of(t));
    if (*type == MPI_DATATYPE_NULL) {
        ct_set_error(CT_EDTYPE, "%s: rank %d: MPI has no %s type", fn, g.rank, ct_dtype_name(ct_dtype_of(t)));
        return NULL;
    }
    if (!ct_is_contiguous(t)) {
        ct_set_error(CT_EINVAL, "%s: rank %d: the tensor must be contiguous", fn, g.rank);
        return NULL;
    }
    return ct_data_ptr(t);
}

static bool is_cuda(const ct_tensor *t) { return ct_device_of(t).type == CT_CUDA; }

/* A collective on a CUDA tensor: NCCL on the tensor's device and current
 * stream (bcast: broadcast from root, else allreduce with op). Without NCCL
 * in the build: CT_ENOTSUP — never a copy through host memory behind the
 * caller's back. Returns a status. */
static int cuda_collective(ct_tensor *t, const char *fn, bool bcast, int root, ct_dist_op op) {
    if (!ct_nccl_is_built())
        return ct_set_error(CT_ENOTSUP, "%s: rank %d: collectives on CUDA tensors need NCCL, and this ctrial was built "
                            "without it (CTRIAL_HAVE_NCCL in ctrial/config.h is 0; copy to the CPU explicitly)",
                            fn, g.rank);
    if (!ct_is_contiguous(t)) return ct_set_error(CT_EINVAL, "%s: rank %d: the tensor must be contiguous", fn, g.rank);
    void *p = ct_cuda_data_ptr(t);
    if (!p) return ct_last_code();
    size_t n = (size_t)ct_numel(t);
    int device = ct_device_of(t).index;
    return bcast ? ct_nccl_broadcast(p, n, ct_dtype_of(t), root, device, NULL)
                 : ct_nccl_allreduce(p, n, ct_dtype_of(t), op, device, NULL);
}

int ct_dist_broadcast(ct_tensor *t, int root) {
    if (!t) return ct_set_error(CT_EINVAL, "ct_dist_broadcast: t is NULL");
    if (g.size == 1 || ct_numel(t) == 0) return CT_OK;
    if (is_cuda(t)) return cuda_collective(t, __func__, true, root, CT_DIST_SUM);
    MPI_Datatype type;
    void *p = mpi_buffer(t, __func__, &type);
    if (!p) return ct_last_code();
    MPI_CHECK(MPI_Bcast(p, (int)ct_numel(t), type, root, MPI_COMM_WORLD));
    return CT_OK;
}

int ct_dist_allreduce(ct_tensor *t, ct_dist_op op) {
    if (!t) return ct_set_error(CT_EINVAL, "ct_dist_allreduce: t is NULL");
    if ((int)op < CT_DIST_SUM || (int)op > CT_DIST_MIN) return ct_set_error(CT_EINVAL, "ct_dist_allreduce: op %d", (int)op);
    /* Refused before any communication, the same way on every rank (the
     * dtype is the same everywhere), so no rank is left in a collective;
     * with one rank too, so that a program does not fail only under mpirun. */
    if (op == CT_DIST_AVG && !ct_dtype_is_floating(ct_dtype_of(t)))
        return ct_set_error(CT_EDTYPE, "ct_dist_allreduce: rank %d: CT_DIST_AVG needs a floating tensor, not %s (the "
                            "mean of integers is not an integer: reduce with CT_DIST_SUM and divide)",
                            g.rank, ct_dtype_name(ct_dtype_of(t)));
    if (g.size == 1 || ct_numel(t) == 0) return CT_OK;
    if (is_cuda(t)) return cuda_collective(t, __func__, false, 0, op);
    MPI_Datatype type;
    void *p = mpi_buffer(t, __func__, &type);
    if (!p) return ct_last_code();
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, (int)ct_numel(t), type, mpi_op(op), MPI_COMM_WORLD));
    return op == CT_DIST_AVG ? ct_mul_scalar_(t, 1.0 / g.size) : CT_OK;
}

int ct_dist_broadcast_bytes(void *buf, size_t n, int root) {
    if (g.size == 1 || n == 0) return CT_OK;
    if (n > (size_t)INT32_MAX) return ct_set_error(CT_EINVAL, "ct_dist_broadcast_bytes: %zu bytes is too many", n);
    MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
    return CT_OK;
}

int ct_dist_allreduce_i64(int64_t *values, int n, ct_dist_op op) {
    if (g.size == 1 || n == 0) return CT_OK;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, mpi_op(op), MPI_COMM_WORLD));
    if (op == CT_DIST_AVG)
        for (int i = 0; i < n; i++) values[i] /= g.size;
    return CT_OK;
}

int ct_dist_gather_bytes(const void *buf, size_t n, int root, void **out, size_t *lens) {
    if (out) *out = NULL;
    if (n > (size_t)INT32_MAX) return ct_set_error(CT_EINVAL, "ct_dist_gather_bytes: %zu bytes is too many", n);
    if (g.size == 1) {
        *out = malloc(n ? n : 1);
        if (!*out) return ct_set_error(CT_ENOMEM, "out of memory");
        memcpy(*out, buf, n);
        lens[0] = n;
        return CT_OK;
    }
    int len = (int)n, *counts = NULL, *displs = NULL;
    if (g.rank == root) {
        counts = calloc((size_t)g.size, sizeof *counts);
        displs = calloc((size_t)g.size, sizeof *displs);
        if (!counts || !displs) {
            free(counts);
            free(displs);
            return ct_set_error(CT_ENOMEM, "out of memory");
        }
    }
    int err = MPI_Gather(&len, 1, MPI_INT, counts, 1, MPI_INT, root, MPI_COMM_WORLD);
    size_t total = 0;
    if (err == MPI_SUCCESS && g.rank == root) {
        for (int r = 0; r < g.size; r++) {
            displs[r] = (int)total;
            lens[r] = (size_t)counts[r];
            total += (size_t)counts[r];
        }
        if (total > (size_t)INT32_MAX) err = MPI_ERR_COUNT;
        else if (!(*out = malloc(total ? total : 1))) err = MPI_ERR_NO_MEM;
    }
    if (err == MPI_SUCCESS)
        err = MPI_Gatherv(buf, len, MPI_BYTE, out ? *out : NULL, counts, displs, MPI_BYTE, root, MPI_COMM_WORLD);
    free(counts);
    free(displs);
    if (err != MPI_SUCCESS) {
        if (out) {
            free(*out);
            *out = NULL;
        }
        return mpi_failed("MPI_Gatherv", err);
    }
    return CT_OK;
}

#else /* no MPI in this build: one process */

int ct_dist_init(void) {
    if (launched_by_mpirun())
        return ct_set_error(CT_ENOTSUP, "launched by mpirun with several ranks, but this ctrial was built without MPI");
    g.init = true;
    return CT_OK;
}
void ct_dist_finalize(void) {}
void ct_dist_abort(int exit_code, const char *why) {
    fprintf(stderr, "ctrial: %s\n", why ? why : "aborting");
    exit(exit_code);
}
int ct_dist_barrier(void) { return CT_OK; }
int ct_dist_broadcast(ct_tensor *t, int root) { return t ? CT_OK : ct_set_error(CT_EINVAL, "ct_dist_broadcast: t is NULL"); }
int ct_dist_allreduce(ct_tensor *t, ct_dist_op op) {
    return t ? CT_OK : ct_set_error(CT_EINVAL, "ct_dist_allreduce: t is NULL");
}
int ct_dist_broadcast_bytes(void *buf, size_t n, int root) { return CT_OK; }
int ct_dist_allreduce_i64(int64_t *values, int n, ct_dist_op op) { return CT_OK; }
int ct_dist_gather_bytes(const void *buf, size_t n, int root, void **out, size_t *lens) {
    *out = malloc(n ? n : 1);
    if (!*out) return ct_set_error(CT_ENOMEM, "out of memory");
    memcpy(*out, buf, n);
    lens[0] = n;
    return CT_OK;
}

#endif

int ct_dist_rank(void) { return g.rank; }
int ct_dist_size(void) { return g.size; }
int ct_dist_local_rank(void) { return g.local_rank; }
int ct_dist_local_size(void) { return g.local_size; }
bool ct_dist_is_distributed(void) { return g.size > 1; }

int ct_ranks_agree(int rc) {
    if (ct_dist_size() == 1) return rc;
    /* The lowest failing rank is the largest -rank; INT64_MIN: none failed. */
    int64_t failed = rc != CT_OK ? -(int64_t)ct_dist_rank() : INT64_MIN;
    int arc = ct_dist_allreduce_i64(&failed, 1, CT_DIST_MAX);
    if (rc != CT_OK) return rc;
    if (arc != CT_OK) return arc;
    if (failed == INT64_MIN) return CT_OK;
    return ct_set_error(CT_EDIST, "rank %d failed (its message is on its own stderr)", (int)-failed);
}
