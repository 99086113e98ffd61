/* src/fit/state.h — a run as checkpoint contents and back (state.c):
 * state_dict.pth's tree (models, optimizers, schedulers, callbacks, RNG,
 * the unreported workload) and metadata.json's trial_state (the loop's
 * position and decisions). Writing them to disk is the checkpointer's
 * (checkpointer.h) and ckpt/ckpt.h's. Internal to ctrial. */
#ifndef CTRIAL_FIT_STATE_H
#define CTRIAL_FIT_STATE_H

#include <jansson.h>
#include <stdbool.h>

#include "fit/context.h"
#include "fit/run.h"

/* The checkpoint's state_dict.pth contents for the run (models,
 * optimizers, schedulers, callbacks, rng_state; accumulated gradients
 * mid-window; the workload not reported yet). Collective under mpirun.
 * NEW value. */
ct_value *cti_run_state(cti_run *run);
/* Why a checkpoint is written, in words ("period", "policy", "end",
 * "stop"): metadata.json's trial_state.reason and the console's. Static. */
const char *cti_ckpt_why_name(cti_ckpt_why why);
/* metadata.json for the run's current position. NEW json. */
json_t *cti_run_metadata(cti_run *run);

/* Restores the trained state, the unreported workload, the accumulated
 * gradients, the callbacks and, last, the RNG from a loaded
 * state_dict.pth; checks counts, names and shapes first. CT_ECHECKPOINT
 * naming the mismatch. */
int cti_run_restore_state(cti_run *run, const ct_value *state, const char *dir);
/* The models alone (ct_load_trial_from_checkpoint). */
int cti_context_restore_models(ct_context *ctx, const ct_value *state, const char *dir);
/* The trained state alone, what a warm start takes (warm_start.c) and the
 * first part of cti_run_restore_state: models, optimizers and LR
 * schedulers (each list's count, then names and shapes checked), and the
 * grad scaler when both ctx and state have one. Not the position, RNG,
 * callbacks or accumulated gradients. CT_ECHECKPOINT naming the mismatch. */
int cti_context_restore_trained(ct_context *ctx, const ct_value *state, const char *dir);
/* Restores the loop's position (ctx->pos) and decisions (the policy's
 * best, the loader position) from metadata's trial_state, after checking
 * every field: its type and range, the fields against each other, and what
 * must be the run's own (global batch size, aggregation frequency, seed,
 * searcher metric). CT_ECHECKPOINT naming the checkpoint, the field, its
 * value and what was expected. */
int cti_run_restore_position(cti_run *run, const json_t *metadata, const char *dir);
/* The restored position against what needs the training loader: once
 * epoch_len and max_length_batches are known, before the loader moves to
 * the position. CT_OK when the run resumes nothing. */
int cti_run_check_position(cti_run *run);

#endif
