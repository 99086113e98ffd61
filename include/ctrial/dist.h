/*
 * ctrial/dist.h — ranks and collectives: one trial on N processes under
 * mpirun.
 *
 * ct_main does all of this for a trial: it calls ct_dist_init, gives each
 * rank its shard of the data and its GPU, broadcasts the starting weights
 * from rank 0, averages gradients across ranks at every optimizer step and
 * reduces metrics. A program that owns its main uses the same calls:
 *
 *     int main(int argc, char **argv) {
 *         if (ct_dist_init() != 0) return 1;         // MPI only when mpirun started us
 *         ct_tensor *w = ct_randn(CT_SHAPE(4, 4), NULL);
 *         ct_dist_broadcast(w, 0);                    // every rank: rank 0's values
 *         ct_tensor *g = ct_ones(CT_SHAPE(4), NULL);
 *         ct_dist_allreduce(g, CT_DIST_AVG);          // the mean over ranks
 *         ct_dist_finalize();
 *     }
 *
 *     mpirun -np 4 ./program            (as root: --allow-run-as-root;
 *                                         more ranks than cores: --oversubscribe)
 *     mpirun -np 8 -H node1:4,node2:4 ./program     (two hosts, four ranks each)
 *
 * A program started without mpirun runs as rank 0 of 1 and never touches MPI
 * (no start-up cost); a build without MPI behaves the same way and refuses a
 * launch with more than one rank (CT_ENOTSUP).
 *
 * Collectives are called by every rank in the same order with tensors of the
 * same shape, dtype and device type. CPU tensors go through MPI. CUDA
 * tensors go through NCCL when the build has it (CTRIAL_HAVE_NCCL in
 * ctrial/config.h; bootstrapped over MPI, one communicator per device, made
 * by the first collective on that device, so every rank must make its first
 * CUDA collective at the same point): the call enqueues the collective on
 * the device's current stream and returns, so the result is there for work
 * that follows on that stream (or after ct_cuda_synchronize), as with
 * torch.distributed on NCCL. Where NCCL cannot be used — a build without
 * it, or ranks that share a GPU, which NCCL refuses — CUDA tensors are
 * copied to host memory, reduced by MPI and copied back, as torch's gloo
 * backend does (CTRIAL_CUDA_TRANSPORT=nccl asks for NCCL by name and is
 * refused there; =host asks for host memory everywhere; docs/api/dist.md,
 * "CUDA tensors"). Failures are CT_EDIST naming the
 * rank and the call; a rank that gets one should end the job
 * (ct_dist_abort), since its peers may be waiting inside the collective.
 */
#ifndef CTRIAL_DIST_H
#define CTRIAL_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CT_DIST_SUM = 0,
    CT_DIST_AVG, /* SUM divided by the number of ranks */
    CT_DIST_MAX,
    CT_DIST_MIN,
    CT_DIST_OP_MAX_ENUM_ = 0x7fffffff
} ct_dist_op;

/* Starts MPI when this process was launched by mpirun (and the build has
 * MPI); otherwise a single process. Idempotent. Returns a status. */
CT_API int ct_dist_init(void);
/* Ends MPI (when this library started it). */
CT_API void ct_dist_finalize(void);
/* Ends the whole job: every rank exits with `exit_code` (MPI_Abort under
 * mpirun, exit otherwise), after printing `why` prefixed by the rank. */
CT_API void ct_dist_abort(int exit_code, const char *why);

/* The collective timeout: a rank that has waited this many seconds in one
 * of ctrial's collectives (the calls below, gradient averaging on the CPU,
 * the loop's agreements) ends the job (exit code 5, CT_EXIT_DIST) with a
 * line naming the ranks that did not arrive and the collective, as
 * torch.distributed's `timeout` does. 30 minutes by default (PyTorch's
 * default for its CPU backend), or the environment's CTRIAL_DIST_TIMEOUT
 * (seconds) read by ct_dist_init; ct_fit_opts.dist_timeout sets it for one
 * ct_fit (and ct_main's --dist-timeout or resources.dist_timeout for the
 * whole run, a search's exchanges between trials included). 0 or infinity: no timeout. Process-wide. ct_dist_set_timeout
 * returns CT_EINVAL for a negative or NaN value. */
CT_API int ct_dist_set_timeout(double seconds);
CT_API double ct_dist_timeout(void); /* seconds; 0: none */

CT_API int ct_dist_rank(void);       /* 0 .. size-1 (0 before init) */
CT_API int ct_dist_size(void);       /* ranks in the job (1 before init) */
CT_API int ct_dist_local_rank(void); /* rank among this host's ranks */
CT_API int ct_dist_local_size(void);
CT_API bool ct_dist_is_distributed(void); /* size > 1 */

/* Every rank waits for the others. */
CT_API int ct_dist_barrier(void);
/* t (contiguous) takes root's values on every rank, in place. With one
 * rank: a no-op that looks at nothing. Returns a status. */
CT_API int ct_dist_broadcast(ct_tensor *t, int root);
/* t (contiguous) becomes op over every rank's t, in place. CT_DIST_AVG needs
 * a floating dtype: an integer or bool tensor is refused with CT_EDTYPE on
 * every rank before anything is sent (as torch.distributed refuses
 * ReduceOp.AVG on integers), so no rank is left waiting — with one rank
 * too, so that a program does not fail only under mpirun. Otherwise with one
 * rank: a no-op. Returns a status. */
CT_API int ct_dist_allreduce(ct_tensor *t, ct_dist_op op);
/* Raw bytes: buf takes root's n bytes on every rank. */
CT_API int ct_dist_broadcast_bytes(void *buf, size_t n, int root);
/* Every rank's int64 values, op-reduced in place on every rank (flags,
 * counts, decisions). CT_DIST_AVG divides the sum by the number of ranks
 * in integer arithmetic (truncating toward zero). */
CT_API int ct_dist_allreduce_i64(int64_t *values, int n, ct_dist_op op);
/* Gathers every rank's bytes on root: *out (malloc'd, only on root) holds
 * the ranks' buffers one after another and lens[r] (size() entries, caller
 * allocated, only read on root) each one's length. */
CT_API int ct_dist_gather_bytes(const void *buf, size_t n, int root, void **out, size_t *lens);

/* Objects (Determined's context.distributed.broadcast / gather / allgather
 * of picklable objects): any ct_value tree, sent faithfully (ints stay ints,
 * NaN stays NaN, tensors arrive on the CPU). Every rank calls them; a
 * failure on any rank (a NULL value, no memory) fails the call on every
 * rank with the same code, so none is left waiting. With one rank they copy.
 *
 * root's v on every rank: a NEW copy, or NULL + error. v is read on root only. */
CT_API ct_value *ct_dist_broadcast_value(const ct_value *v, int root);
/* Every rank's v on root: *out a NEW list (rank order) on root, NULL
 * elsewhere. Returns a status. */
CT_API int ct_dist_gather_value(const ct_value *v, int root, ct_value **out);
/* Every rank's v on every rank: a NEW list in rank order, or NULL + error. */
CT_API ct_value *ct_dist_allgather_value(const ct_value *v);

#ifdef __cplusplus
}
#endif
#endif
