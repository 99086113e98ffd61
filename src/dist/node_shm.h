/* src/dist/node_shm.h — one shared-memory segment per rank, mapped by every
 * rank: how the ranks of one machine read each other's gradient buckets
 * directly (grad_sync.c) instead of passing them through MPI messages.
 * Internal to src/dist (it includes mpi.h).
 *
 *     ct_node_shm *m = ct_node_shm_new(comm, bytes, true, why, sizeof why);  // collective
 *     if (m) {
 *         char *mine = ct_node_shm_at(m, rank);     // read-write
 *         const char *theirs = ct_node_shm_at(m, q); // read-only
 *         ct_tensor *t = ct_from_blob(mine, ..., ct_node_shm_unref, ct_node_shm_ref(m));
 *         ...
 *         ct_node_shm_free(m);                       // collective
 *     }
 *
 * Each rank's segment is a POSIX shared-memory object (shm_open), its size
 * reserved at once (posix_fallocate: a full /dev/shm is a refusal here, not
 * a SIGBUS later), mapped read-write by its owner and read-only by the
 * others; its name is removed as soon as every rank has mapped every
 * segment, so nothing is left in /dev/shm after a crash past that point.
 * Fresh segments read as zeros.
 *
 * Lifetimes. Peers' mappings go with ct_node_shm_free. This rank's own
 * mapping goes when both the handle is freed and every reference taken with
 * ct_node_shm_ref is dropped: tensors over the segment (a .grad that is a
 * view of a bucket) stay valid after the sync that made them is gone. */
#ifndef CTRIAL_DIST_NODE_SHM_H
#define CTRIAL_DIST_NODE_SHM_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

typedef struct ct_node_shm ct_node_shm;

/* Collective over comm (every rank calls it, `want` or not). A segment of
 * `bytes` for every rank, when every rank wants one, every rank of comm
 * runs on this machine, and each one could create, reserve and map all of
 * them; otherwise NULL on every rank (they agree), with the reason in why
 * (no error is set: the caller falls back to messages). */
ct_node_shm *ct_node_shm_new(MPI_Comm comm, size_t bytes, bool want, char *why, size_t why_len);
/* Rank q's segment (of comm): this rank's is writable, the others are not.
 * BORROWED. */
char *ct_node_shm_at(const ct_node_shm *m, int q);
/* A reference to this rank's own mapping, for a tensor's deleter: returns
 * the context to pass to ct_node_shm_unref (the data argument is ignored). */
void *ct_node_shm_ref(ct_node_shm *m);
void ct_node_shm_unref(void *data, void *ctx);
/* Unmaps the peers' segments and drops the handle's reference to this
 * rank's own. Accepts NULL. Not collective. */
void ct_node_shm_free(ct_node_shm *m);

#endif
