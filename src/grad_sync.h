/* src/grad_sync.h — averaging a model's gradients across ranks, in buckets
 * whose all-reduce starts during backward (DistributedDataParallel's
 * reducer). Internal to ctrial; the context (context.c) drives it:
 *
 *     s = ct_grad_sync_new(model, 25 << 20);   // after the weights are broadcast
 *     ...
 *     ct_grad_sync_arm(s, is_step_batch);       // in ct_ctx_backward, before backward
 *     backward ...                              // hooks launch each full bucket
 *     ct_grad_sync_finish(s);                   // in ct_ctx_step_optimizer, before clipping
 *
 * Buckets hold parameters in reverse registration order (the order backward
 * usually produces their gradients), up to bucket_bytes each, one dtype and
 * device per bucket. Buckets are launched strictly in index order on every
 * rank (MPI collectives must match across ranks); a bucket whose gradients
 * are ready waits for the ones before it. Unarmed (gradient-accumulation
 * batches) the hooks do nothing: no communication. finish launches what is
 * left, waits, and writes the average over ranks back into each .grad; a
 * parameter that has no gradient on any rank keeps none (as in one process),
 * one that has a gradient on some ranks gets the average with zeros for the
 * others. With one rank every call is a cheap no-op. */
#ifndef CT_GRAD_SYNC_H
#define CT_GRAD_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/nn.h"

typedef struct ct_grad_sync ct_grad_sync;

/* Registers post-accumulate-grad hooks on every parameter of model that
 * requires grad. NEW, or NULL + error. */
ct_grad_sync *ct_grad_sync_new(ct_module *model, size_t bucket_bytes);
/* Whether the coming backward's gradients are reduced (optimizer-step
 * batches) or only accumulated. */
void ct_grad_sync_arm(ct_grad_sync *s, bool armed);
/* True when p is one of this sync's parameters. */
bool ct_grad_sync_covers(const ct_grad_sync *s, const ct_tensor *p);
/* Launches the buckets not yet launched, waits for all, averages, writes
 * the gradients back, disarms. A no-op when not armed. Returns a status
 * (CT_EDIST naming the rank and bucket on failure). */
int ct_grad_sync_finish(ct_grad_sync *s);

typedef struct {
    uint64_t bytes;       /* bytes all-reduced so far */
    double comm_seconds;  /* from each bucket's launch to its completion */
    double wait_seconds;  /* of that, spent blocked in finish (not hidden by backward) */
    int64_t buckets;      /* buckets reduced so far */
} ct_grad_sync_stats;

void ct_grad_sync_get_stats(const ct_grad_sync *s, ct_grad_sync_stats *out);
/* Removes the hooks and frees. Accepts NULL. */
void ct_grad_sync_free(ct_grad_sync *s);

#endif
