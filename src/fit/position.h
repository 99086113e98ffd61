/* src/fit/position.h — where a run is: the counters the loop moves after
 * every batch and boundary. Internal to ctrial.
 *
 * One copy lives in the context (ct_context.pos), because the trial asks
 * for it (ct_ctx_current_batch, ct_ctx_initial_batch, ...). The loop
 * (loop.c) writes it, and a resume (state.c) restores it before training;
 * the reporter reads it for its lines, and the checkpoint state for
 * metadata.json's trial_state. */
#ifndef CTRIAL_FIT_POSITION_H
#define CTRIAL_FIT_POSITION_H

#include <stdint.h>

typedef struct {
    int64_t initial_batch;      /* batches trained before this run */
    int64_t batches_trained;    /* bt: batches completed so far */
    int64_t epoch_len;          /* batches per epoch (rank 0's training loader, broadcast); -1 unknown */
    int64_t max_length_batches; /* max_length in batches, once epoch_len is known */
    int64_t current_batch;      /* the batch being or last trained; -1 before this run's first */
    int64_t records_trained;    /* by all ranks, up to the last report */
    int64_t records_pending;    /* by this rank since the last report */
    int64_t last_validation_bt; /* -1: none yet */
    int64_t last_checkpoint_bt; /* -1: none yet */
    int64_t validations_run;    /* by this run */
} cti_position;

/* A run that has not started: nothing trained, nothing known. */
static inline cti_position cti_position_start(void) {
    cti_position p = {.epoch_len = -1, .current_batch = -1, .last_validation_bt = -1, .last_checkpoint_bt = -1};
    return p;
}

#endif
