/* src/dist/node_shm.h — which ranks share a host, and one shared-memory
 * segment per rank mapped by every rank of its host: how the ranks of one
 * machine read each other's gradient buckets directly (grad_sync.c) instead
 * of passing them through MPI messages. Internal to src/dist (it includes
 * mpi.h).
 *
 *     cti_node_layout lay;
 *     cti_node_layout_get(comm, &lay);                  // collective
 *     cti_node_shm *m = cti_node_shm_new(comm, lay.local_size, lay.members,
 *                                      bytes, true, why, sizeof why);  // collective
 *     if (m) {
 *         char *mine = cti_node_shm_at(m, lay.local_rank); // read-write
 *         const char *theirs = cti_node_shm_at(m, q);      // q: 0 .. local_size-1, read-only
 *         ct_tensor *t = ct_from_blob(mine, ..., cti_node_shm_unref, cti_node_shm_ref(m));
 *         ...
 *         cti_node_shm_free(m);                       // collective
 *     }
 *
 * Each rank's segment is a POSIX shared-memory object (shm_open), its size
 * reserved at once (posix_fallocate: a full /dev/shm is a refusal here, not
 * a SIGBUS later), mapped read-write by its owner and read-only by the
 * others; its name is removed as soon as every rank has mapped every
 * segment, so nothing is left in /dev/shm after a crash past that point.
 * Before that, its creator holds a flock on it: a set-up removes first the
 * segments (/dev/shm/ctrial-*) of this user that nobody holds, those of a
 * rank that died during an earlier set-up. Fresh segments read as zeros.
 *
 * Lifetimes. Peers' mappings go with cti_node_shm_free. This rank's own
 * mapping goes when both the handle is freed and every reference taken with
 * cti_node_shm_ref is dropped: tensors over the segment (a .grad that is a
 * view of a bucket) stay valid after the sync that made them is gone. */
#ifndef CTRIAL_DIST_NODE_SHM_H
#define CTRIAL_DIST_NODE_SHM_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

/* The hosts of comm's ranks. A host is a machine (the ranks that share
 * memory, MPI_COMM_TYPE_SHARED); CTRIAL_GRAD_SYNC_HOST_RANKS=k splits each
 * machine's ranks into hosts of k consecutive ranks, so that a test or a
 * benchmark runs the several-host path on one machine. Hosts are numbered
 * by their lowest rank. Every rank gets the same picture. */
typedef struct {
    int hosts;      /* how many */
    int host;       /* this rank's, 0 .. hosts-1 */
    int local_size; /* ranks on this rank's host */
    int local_rank; /* this rank's place among them */
    int *members;   /* [local_size]: their ranks in comm, ascending (owned: cti_node_layout_clear) */
    int *host_of;   /* [comm's size]: every rank's host (owned) */
    int min_local_size, max_local_size; /* the fewest and the most ranks a host has */
} cti_node_layout;

/* Collective over comm. 0, or, on every rank alike: CT_EINVAL when some
 * rank's CTRIAL_GRAD_SYNC_HOST_RANKS is not a positive number, CT_ENOMEM
 * when some rank is out of memory; or CT_EDIST when MPI fails. The error
 * is set, *out is cleared. */
int cti_node_layout_get(MPI_Comm comm, cti_node_layout *out);
/* Frees members and host_of. Accepts a zeroed layout. */
void cti_node_layout_clear(cti_node_layout *lay);

typedef struct cti_node_shm cti_node_shm;

/* Collective over comm (every rank calls it, `want` or not, each with its
 * own host's members: n ranks of comm, this one among them). A segment of
 * `bytes` for every rank, mapped by every rank of its host, when every
 * rank of comm wants one and each one could create, reserve and map its
 * host's; otherwise NULL on every rank (they agree), with the reason in
 * why (no error is set: the caller falls back to messages). */
cti_node_shm *cti_node_shm_new(MPI_Comm comm, int n, const int *members, size_t bytes, bool want, char *why,
                             size_t why_len);
/* Removes this user's /dev/shm/ctrial-* segments that no process holds
 * (their creator died during its set-up) and that are older than a few
 * seconds; returns how many. cti_node_shm_new calls it first. Not
 * collective. */
int cti_node_shm_remove_stale(void);

/* The segment of members[q] (q: 0 .. n-1): this rank's is writable, the
 * others are not. BORROWED. */
char *cti_node_shm_at(const cti_node_shm *m, int q);
/* A reference to this rank's own mapping, for a tensor's deleter: returns
 * the context to pass to cti_node_shm_unref (the data argument is ignored). */
void *cti_node_shm_ref(cti_node_shm *m);
void cti_node_shm_unref(void *data, void *ctx);
/* Unmaps the peers' segments and drops the handle's reference to this
 * rank's own. Accepts NULL. Not collective. */
void cti_node_shm_free(cti_node_shm *m);

#endif
