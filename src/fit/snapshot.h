/* src/fit/snapshot.h — a checkpoint's state copied into host memory of its
 * own, so that a writer thread can write it while training goes on
 * (background_checkpoints, loop.c). Internal to ctrial.
 *
 *     ct_value *snap = cti_snapshot(state, NULL);   // NEW, or NULL + error
 *     cti_checkpointer_write_background(ckpt, bt, snap, metadata);  // takes it
 *
 * Training stands still while it runs, so it is the whole cost of a
 * background checkpoint to the loop. A device tensor is copied to the host
 * (ct_to_device, which waits for the device). A contiguous CPU tensor gets
 * an empty tensor of its own and its bytes are copied by two threads, the
 * caller's and one helper (the core the writer is about to take), since
 * one thread's memcpy leaves much of the memory's bandwidth unused: on the
 * 2-core machine of bench/ckpt charlm's GPT's 128 MB take 10 ms instead of
 * 20. Anything else (a strided tensor) is cloned. The tree's structure,
 * kinds and keys are kept.
 *
 * A CPU tensor for which share(t) is true is not copied: the snapshot
 * takes a tensor over the same bytes (ct_detach). That is for bytes the
 * state alone holds and nobody writes once it is made — rank 0's received
 * share of a sharded optimizer's state, in its spill file
 * (cti_shard_is_spilled): copying it would bring the whole state into
 * rank 0's memory, which the spill file is there to avoid. share may be
 * NULL (copy every tensor). */
#ifndef CTRIAL_FIT_SNAPSHOT_H
#define CTRIAL_FIT_SNAPSHOT_H

#include <stdbool.h>

#include "ctrial/tensor.h"
#include "ctrial/value.h"

ct_value *cti_snapshot(const ct_value *state, bool (*share)(const ct_tensor *t));

#endif
