/* src/dist/grad_sync.h — averaging a model's gradients across ranks, in buckets
 * whose all-reduce starts during backward (DistributedDataParallel's
 * reducer). Internal to ctrial; the context (context.c) drives it:
 *
 *     s = cti_grad_sync_new(model, 25 << 20);   // after the weights are broadcast
 *     ...
 *     cti_grad_sync_arm(s, is_step_batch);       // in ct_ctx_backward, before backward
 *     backward ...                              // hooks launch each full bucket
 *     cti_grad_sync_after_backward(s);           // right after it
 *     cti_grad_sync_finish(s);                   // still in ct_ctx_backward, on step batches
 *
 * Buckets hold parameters in reverse registration order (the order backward
 * usually produces their gradients), up to bucket_bytes each, one dtype per
 * bucket. Buckets are launched strictly in index order on every rank; a
 * bucket whose gradients are ready waits for the ones before it, and a
 * bucket holding a parameter that gets no gradient in this backward waits
 * (with every later one) for finish. Unarmed (gradient-accumulation batches)
 * the hooks do nothing: no communication. finish launches what is left,
 * waits, and writes the average over ranks back into each .grad; a
 * parameter that has no gradient on any rank keeps none (as in one
 * process), one that has a gradient on some ranks gets the average with
 * zeros for the others. With one rank every call is a cheap no-op (no
 * buckets, no hooks).
 *
 * Gradients as bucket views (DistributedDataParallel's
 * gradient_as_bucket_view): after finish each averaged .grad is a view of
 * the sync's bucket memory, so nothing is copied out. Before each backward,
 * arm lends every parameter whose .grad is None (zero_grad(set_to_none),
 * PyTorch's default) its slot, zeroed, as .grad, so backward accumulates
 * straight into the bucket and nothing is copied in either;
 * after_backward sets .grad back to None where the backward added nothing.
 * Outside that span a caller sees .grad exactly as without a sync. The next
 * arm or finish overwrites those views: copy a gradient that must outlive
 * the step.
 *
 * Windows. arm(s, true) opens a window that finish closes. An arm call
 * while a window is open (a second backward before the optimizer step,
 * armed or not) completes that window on the spot — every bucket reduced
 * and written back, blocking — and opens a new one: the next backward adds
 * to averages that every rank shares, and the final finish averages the
 * sums, which is the average of both backwards. The context must call arm
 * before every backward, on every rank, so that ranks agree on the
 * collectives they run. A gradient reaching an already launched bucket in
 * a backward no arm call announced is reported by finish (CT_ESTATE).
 *
 * Transports. CPU buckets of float32/float64 gradients are averaged in
 * shared memory when every rank runs on this machine (node_shm.h: a
 * segment per rank that the others map; CTRIAL_GRAD_SYNC=ring or
 * halving-doubling turns it off); on several hosts, more than one rank on
 * some, in shared memory on each host with MPI messages between hosts;
 * else (one rank on every host) by MPI messages through every rank. Messages run a
 * ring, or halving-doubling for small buckets on a power of two of ranks
 * (allreduce_steps.h). Half-precision buckets always take messages
 * through every rank. cti_grad_sync_transport says which.
 *
 * Every rank must create, arm, finish and free its syncs in the same order
 * (new and free are collective). CPU hooks act only on the thread that
 * armed the window (MPI runs FUNNELED); free a sync before its model.
 *
 * Sharded optimizers (cti_grad_sync_new_owned; shard.h). Each rank steps
 * only its share of the parameters, so only that rank needs their average:
 * each owner's parameters get buckets of their own, and such a bucket is
 * reduced to its owner instead of all-reduced (in shared memory the owner
 * averages every rank's copy and nothing is copied back; by messages the
 * others send theirs to it; NCCL's ncclReduce), half an all-reduce's
 * traffic. After finish the owner's .grad holds the average, every other
 * rank's is None. On several hosts with shared memory on each, each host
 * sums its ranks' copies in shared memory and sends that sum to the
 * owner's host alone. A later backward that adds to an owner's averages
 * before the step (a second backward of a step batch) finds them turned
 * into sums at arm, so that its window's average is the sum of both
 * averages, as without sharding.
 *
 * CUDA. A model on one GPU gets buckets in device memory, each averaged by
 * one NCCL all-reduce (src/dist/nccl_comm.h) enqueued on the current stream as soon
 * as it is full — from the hook, on autograd's device thread — so the
 * host never waits for the device: finish only enqueues what is left, and
 * the optimizer step that follows on the stream sees the averages. The
 * flags are read back (a host sync) only in a window where this rank had
 * no gradient for some parameter. The stats count bytes and buckets but no
 * seconds there (the host does not see the device's timing). Where NCCL
 * cannot be used (a build without it, ranks sharing a GPU:
 * cuda_transport.h) the slots stay on the device and each bucket travels
 * through host memory: the hook queues its copy to a host buffer and an
 * event, and the host averages it as a CPU bucket once the event is done
 * ("staged", grad_sync.c).
 * Handles have no lock: one thread at a time. */
#ifndef CTRIAL_DIST_GRAD_SYNC_H
#define CTRIAL_DIST_GRAD_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/nn.h"

typedef struct cti_grad_sync cti_grad_sync;

/* Lays out the buckets (bucket_bytes 0: 25 MiB) and registers
 * post-accumulate-grad hooks on every parameter of model that requires grad.
 * A parameter has one such hook: a second sync over the same parameters
 * takes them over, and freeing either removes them, so keep one sync per
 * model. Collective under mpirun. NEW, or NULL + error (CT_ENOTSUP for
 * parameters on several devices, CT_EDIST when MPI or NCCL fails, and what
 * cti_cuda_transport_get refuses). */
cti_grad_sync *cti_grad_sync_new(ct_module *model, size_t bucket_bytes);
/* The same for a model whose parameters a sharded optimizer steps
 * (shard.h): owner_of(param, ctx) is the rank that steps each (-1: every
 * rank, or none). Each owner's parameters get buckets of their own, and
 * such a bucket is reduced to its owner alone, not all-reduced (see
 * "Sharded optimizers" below): after finish each rank's .grad holds the
 * average for the parameters it owns and is None for the other ranks'.
 * owner_of must give the same answers on every rank. */
cti_grad_sync *cti_grad_sync_new_owned(ct_module *model, size_t bucket_bytes,
                                       int (*owner_of)(const ct_tensor *param, void *ctx), void *ctx);
/* Whether the coming backward's gradients are reduced (optimizer-step
 * batches) or only accumulated. Called before every backward; a call while
 * a window is open blocks until that window's reductions are done (see
 * Windows). Errors surface at the next finish. */
void cti_grad_sync_arm(cti_grad_sync *s, bool armed);
/* Right after every backward that arm announced (whether it succeeded):
 * takes the lent slots back from parameters the backward did not reach
 * (their .grad is None again). Errors surface at the next finish. */
void cti_grad_sync_after_backward(cti_grad_sync *s);
/* Launches the buckets not yet launched, waits for all, points each .grad
 * at its average, closes the window. A no-op when no window is open.
 * Returns a status: CT_EDIST naming the rank and bucket when MPI fails, or
 * the failure of a copy naming the parameter; every collective has
 * completed either way, and on failure the gradients may be partly
 * averaged. */
int cti_grad_sync_finish(cti_grad_sync *s);

/* A backward that arm did not announce (a bare ct_backward under mpirun)
 * gives gradients that are never averaged. Returns whether such a backward
 * reached a parameter since the last call, and then copies the first one's
 * name into `name` (len bytes) and forgets it. */
bool cti_grad_sync_stray(cti_grad_sync *s, char *name, size_t len);

/* After an optimizer step each rank took for its own share of the
 * parameters (a sharded optimizer, shard.h): params[j] (n of them, the
 * optimizer's) from rank owners[j], through this sync's shared-memory
 * buckets where it can. Per bucket, each owner copies its parameters into
 * their slots of its own copy, and every rank then copies the others'
 * out of their copies (as the gradients' averages are gathered), so no
 * MPI message moves. On several hosts, a bucket of one owner's (a
 * sharded optimizer's, cti_grad_sync_new_owned) goes by one message from
 * the owner's copy to one rank on every other host, whose host's ranks
 * copy it out of that rank's copy. done[j] says which parameters it
 * moved: those of this sync's shared-memory buckets (on several hosts,
 * those of one owner's buckets); the caller broadcasts the rest. Writes
 * the slots: every parameter it moves must have no .grad (set them to
 * None first; CT_ESTATE otherwise).
 * Collective among the sync's ranks, called by every rank with the same
 * parameters in the same order, outside a window. A rank that does not
 * come ends the job after the collective timeout. */
int cti_grad_sync_share_params(cti_grad_sync *s, size_t n, ct_tensor *const *params, const int *owners, bool *done);

typedef struct {
    uint64_t bytes;       /* bytes reduced so far (gradients and flags; a bucket counts once, all-reduced or reduced to its owner) */
    double comm_seconds;  /* summed over buckets: launch to completion */
    double wait_seconds;  /* of that, spent inside finish (not hidden by backward) */
    int64_t buckets;      /* bucket reductions so far */
    uint64_t sent_bytes;  /* bytes this rank has sent in MPI messages (not shared memory's reads, not NCCL's) */
} cti_grad_sync_stats;

/* How the float buckets travel: "shared memory" (every rank on this
 * machine: each reads the others' buckets directly, see grad_sync.c),
 * "shared memory + ALGO" (several hosts: shared memory on each, messages
 * between them), "ALGO" (MPI messages through every rank), "nccl" (CUDA;
 * CUDA through host memory names the host's way, and why begins "CUDA
 * through host memory: " and the reason NCCL is not used),
 * or "none" (one rank); ALGO is "ring", "halving-doubling", or "ring and
 * halving-doubling" when the buckets' sizes choose both. A static string.
 * When why is not NULL, why (len bytes) says why shared memory is not used
 * (messages through every rank), or how many hosts of how many ranks
 * (shared memory + ALGO); else it is empty. */
const char *cti_grad_sync_transport(const cti_grad_sync *s, char *why, size_t len);
/* Copies the running totals into *out (zeros for a NULL s). */
void cti_grad_sync_get_stats(const cti_grad_sync *s, cti_grad_sync_stats *out);
/* Removes the hooks and frees. Accepts NULL. Collective under mpirun: it
 * frees the sync's communicator, and completes a window left open (a step
 * that failed after backward) as finish would, so that no message outlives
 * the communicator; every rank must free at the same point. */
void cti_grad_sync_free(cti_grad_sync *s);

#endif
