/* src/data/loader.h — what the training loop needs from a loader beyond
 * data.h. Internal to ctrial. */
#ifndef CTRIAL_DATA_LOADER_H
#define CTRIAL_DATA_LOADER_H

#include "ctrial/data.h"

/* Turns a trial-built loader into the training chain of Determined's user
 * guide: repeat, shard for (rank, world_size), skip to `position` batches.
 * The trial's own options (batch size, shuffle and seed, drop_last, workers)
 * stay. A loader over the user's own sampler keeps its chain and only moves
 * to `position` (forward; ct_loader_len is its chain's ct_sampler_len, and a
 * chain that does not repeat answers 0 at each pass end: reset it and go
 * on). An iterable loader turns to repeat mode for (rank, world_size) and
 * replays its iterator to `position` (exact only for a deterministic
 * iterator; see cti_loader_is_iterable). */
int cti_loader_use_training_chain(ct_loader *l, int rank, int world_size, int64_t position);
/* The validation loader's chain for `rank` of `world_size`: shard -> batch,
 * one pass per reset (rank r gets elements r, r + n, ...), from position 0.
 * A user's own sampler is left alone. An iterable loader takes every
 * world_size-th record of each pass, from its iterator's beginning. */
int cti_loader_use_validation_shard(ct_loader *l, int rank, int world_size);
/* Batches arrive on the trial's device (Determined's to_device before
 * train_batch / evaluate_batch): a loader the trial left on the CPU moves
 * them to `device`, pinned and non-blocking where CUDA is there. A loader
 * the trial gave a device keeps it; a CPU `device` changes nothing. */
int cti_loader_use_device(ct_loader *l, ct_device device);
/* The loader reads an iterable dataset (ct_loader_iterable): its length is
 * unknown (ct_loader_len -1) and its positions are replays whose exactness
 * ctrial cannot guarantee. The loop refuses it unless the trial opted out of
 * the dataset reproducibility checks. false for NULL. */
bool cti_loader_is_iterable(const ct_loader *l);
/* The loader hands out the batches of the trial's own sampler chain
 * (ct_loader_opts.sampler), whose order, sharding and resume ctrial cannot
 * vouch for: the loop refuses it unless the trial opted out of the dataset
 * reproducibility checks, as Determined refuses a DataLoader other than
 * its own. A chain with a skip (ct_sampler_skip, Determined's recipe's
 * SkipBatchSampler(initial_batch)) starts at its skip's count: the loop
 * leaves the positioning to it. false for NULL. */
bool cti_loader_has_user_sampler(const ct_loader *l);

#endif
