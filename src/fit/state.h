/* src/fit/state.h — a context as checkpoint contents and back (state.c):
 * state_dict.pth's tree (models, optimizers, schedulers, callbacks, RNG) and
 * metadata.json's trial_state (the loop's position and decisions). Writing
 * them to disk is ckpt/ckpt.h's. Internal to ctrial. */
#ifndef CTRIAL_FIT_STATE_H
#define CTRIAL_FIT_STATE_H

#include <jansson.h>
#include <stdbool.h>

#include "fit/context.h"

/* The checkpoint's state_dict.pth contents for ctx (models, optimizers,
 * schedulers, callbacks, rng_state). NEW value. */
ct_value *cti_context_state(ct_context *ctx);
/* Why a checkpoint is written, in words ("period", "policy", "end",
 * "stop"): metadata.json's trial_state.reason and the console's. Static. */
const char *cti_context_why_name(cti_ckpt_why why);
/* metadata.json for ctx's current position. NEW json. */
json_t *cti_context_metadata(ct_context *ctx);
/* Restores models (and, unless models_only, optimizers, schedulers,
 * callbacks and RNG) from a loaded state_dict.pth; checks counts, names
 * and shapes first. CT_ECHECKPOINT naming the mismatch. */
int cti_context_restore_state(ct_context *ctx, const ct_value *state, const char *dir, bool models_only);
/* The trained state alone, what a warm start takes (warm_start.c) and the
 * first part of cti_context_restore_state: models, optimizers and LR
 * schedulers (each list's count, then names and shapes checked), and the
 * grad scaler when both ctx and state have one. Not the position, RNG,
 * callbacks or accumulated gradients. CT_ECHECKPOINT naming the mismatch. */
int cti_context_restore_trained(ct_context *ctx, const ct_value *state, const char *dir);
/* Restores the loop's position and decisions from metadata's trial_state,
 * after checking every field: its type and range, the fields against each
 * other, and what must be the run's own (global batch size, aggregation
 * frequency, seed, searcher metric). CT_ECHECKPOINT naming the checkpoint,
 * the field, its value and what was expected. */
int cti_context_restore_position(ct_context *ctx, const json_t *metadata, const char *dir);
/* The restored position against what needs the training loader: once
 * epoch_len and max_length_batches are known, before the loader moves to
 * the position. CT_OK when the run resumes nothing. */
int cti_context_check_position(ct_context *ctx);

#endif
