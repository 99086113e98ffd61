/* src/fit/snapshot.h — a checkpoint's state copied into host memory of its
 * own, so that a writer thread can write it while training goes on
 * (background_checkpoints, loop.c). Internal to ctrial.
 *
 *     ct_value *snap = cti_snapshot(state);   // NEW, or NULL + error
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
 * kinds and keys are kept. */
#ifndef CTRIAL_FIT_SNAPSHOT_H
#define CTRIAL_FIT_SNAPSHOT_H

#include "ctrial/value.h"

ct_value *cti_snapshot(const ct_value *state);

#endif
