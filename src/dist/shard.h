/* src/dist/shard.h — an optimizer's state split across ranks (ZeRO stage 1,
 * as torch.distributed.optim.ZeroRedundancyOptimizer). Internal to ctrial.
 *
 * Every rank keeps the whole optimizer (its groups and hyperparameters,
 * which LR schedulers set alike everywhere) but steps, and keeps the state
 * of, only its share of the parameters; after each step every parameter
 * goes from the rank that stepped it to every other (through the gradient
 * buckets' shared memory where there is some, else broadcast:
 * cti_shard_sync_params), so the ranks' weights stay equal. Each gradient is reduced to the rank that steps it, not averaged
 * on every rank (grad_sync.h, cti_grad_sync_new_owned: the others' .grad
 * is None at the step), and the context combines a clip norm and a
 * GradScaler's inf check across ranks (ct_set_grad_reduce, nn.h), so that
 * every rank clips by and skips on the whole model's gradients.
 *
 *     cti_shard *s = cti_shard_new(opt, rank, size);   // partition; others' state dropped
 *     ...backward (gradients averaged)...
 *     ct_optim_step(opt);                              // this rank's share only
 *     ct_optim_zero_grad(opt, true);
 *     cti_shard_sync_params(s, opt, syncs, nsyncs);    // every parameter from its owner
 *     ...
 *     cti_shard_state_dict(s, opt, 0, dir, &sd);       // torch's layout, whole, on rank 0
 *     cti_shard_free(s);
 *
 * The partition is ZeroRedundancyOptimizer's: group by group, parameters
 * largest first (ties in index order), each to the rank holding the fewest
 * elements so far (the lowest such rank). It depends only on the
 * optimizer's groups and the parameters' sizes, so every rank computes the
 * same one, and a checkpoint (whose state is whole) resumes on any number
 * of ranks, sharded or not. */
#ifndef CTRIAL_DIST_SHARD_H
#define CTRIAL_DIST_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/optim.h"
#include "ctrial/value.h"

typedef struct cti_shard cti_shard;

/* A NEW partition of opt's parameters among `size` ranks, of which this
 * is `rank`: opt steps only this rank's share from now on
 * (ct_optim_set_stepped), and the state it holds for other ranks'
 * parameters (a loaded state dict, Adagrad's from its constructor) is
 * dropped. NULL + error: LBFGS (CT_ENOTSUP: one state spans all its
 * parameters), out of memory. Local: no communication. */
cti_shard *cti_shard_new(ct_optim *opt, int rank, int size);
void cti_shard_free(cti_shard *s); /* accepts NULL; opt steps as it was set */

/* The rank that steps opt's parameter i; -1 for an index out of range. */
int cti_shard_owner_of(const cti_shard *s, size_t i);

/* A NEW copy of the optimizer state dict sd (torch's layout, whole: a
 * checkpoint's) whose "state" keeps only this rank's parameters, for
 * ct_optim_load_state_dict: each rank loads its share, never the whole.
 * Tensors are shared with sd. NULL + error when sd is not a dict. */
ct_value *cti_shard_own_state(const cti_shard *s, const ct_value *sd);

/* Every parameter of opt from the rank that steps it. Through the shared
 * memory of the gradient syncs `syncs` (nsyncs of them: the models'
 * grad_sync.h, whose buckets hold the parameters' slots) where they have
 * it, which needs every parameter's .grad to be None (the step's
 * zero_grad(set_to_none) ran: pass 0 syncs otherwise); the rest by
 * ct_dist_broadcast, one per parameter, in index order. Collective: every
 * rank calls it after every step, also after a step that failed on this
 * rank alone (the others wait for its parameters). */
struct cti_grad_sync;
int cti_shard_sync_params(const cti_shard *s, ct_optim *opt, struct cti_grad_sync *const *syncs, size_t nsyncs);

/* opt.state_dict() as one unsharded optimizer's, in torch's layout: every
 * rank's state entries, in parameter order, with this rank's param_groups.
 * Collective. Returns a status; on root *out receives a NEW value: its own
 * tensors shared with opt, as ct_optim_state_dict's; other ranks' received
 * into new CPU tensors which, given a spill_dir (an existing directory on
 * root: the checkpoints'), live in an unlinked file there mapped into
 * memory, which the kernel may write back and drop (without one, or where
 * the file cannot be made, in memory). Elsewhere *out is NULL, and other
 * ranks hold one tensor at a time while it runs. */
int cti_shard_state_dict(const cti_shard *s, const ct_optim *opt, int root, const char *spill_dir, ct_value **out);

/* Whether p points into one of the spill file's regions that a state dict
 * of cti_shard_state_dict holds now: a tensor received from another rank,
 * which nothing but that state dict holds or writes, so that a
 * checkpoint's snapshot may share it instead of copying it into memory.
 * Any thread. */
bool cti_shard_is_spilled(const void *p);

#endif
