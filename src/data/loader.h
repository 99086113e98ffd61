/* src/data/loader.h — what the training loop needs from a loader beyond
 * data.h. Internal to ctrial. */
#ifndef CTRIAL_DATA_LOADER_H
#define CTRIAL_DATA_LOADER_H

#include "ctrial/data.h"

/* Turns a trial-built loader into Determined's training chain: repeat, shard
 * for (rank, world_size), skip to `position` batches. The trial's own options
 * (batch size, shuffle and seed, drop_last, workers) stay. A loader over the
 * user's own sampler keeps its chain and only moves to `position`. */
int ct_loader_use_training_chain(ct_loader *l, int rank, int world_size, int64_t position);
/* The validation loader's chain for `rank` of `world_size`: shard -> batch,
 * one pass per reset (rank r gets elements r, r + n, ...). A user's own
 * sampler is left alone. */
int ct_loader_use_validation_shard(ct_loader *l, int rank, int world_size);
/* Batches arrive on the trial's device (Determined's to_device before
 * train_batch / evaluate_batch): a loader the trial left on the CPU moves
 * them to `device`, pinned and non-blocking where CUDA is there. A loader
 * the trial gave a device keeps it; a CPU `device` changes nothing. */
int ct_loader_use_device(ct_loader *l, ct_device device);

#endif
