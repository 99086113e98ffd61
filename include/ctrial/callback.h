/*
 * ctrial/callback.h — callbacks: code that runs at fixed points of the loop,
 * as Determined's PyTorchCallback.
 *
 *     static int on_validation_end(void *self, ct_context *ctx, const ct_value *metrics) {
 *         double loss;
 *         if (ct_value_get_float(ct_value_dict_get(metrics, "validation_loss"), &loss) == 0)
 *             printf("validated at batch %lld: %g\n", (long long)ct_ctx_current_batch(ctx), loss);
 *         return 0;
 *     }
 *     ...
 *     ct_ctx_add_callback(ctx, &(ct_callback){.name = "printer",
 *                                             .on_validation_end = on_validation_end});
 *
 * Callbacks run in registration order; on_trial_shutdown runs in reverse.
 * Every hook is optional (NULL). A hook returns 0, or a negative code with
 * ct_set_error() to stop the trial with that error. A callback's state_dict
 * is saved in checkpoints under its name and handed back to load_state_dict
 * on resume. on_training_epoch_start is not called for an epoch a resumed
 * run starts in the middle of.
 */
#ifndef CTRIAL_CALLBACK_H
#define CTRIAL_CALLBACK_H

#include <stdint.h>

#include "trial.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (the typedef ct_callback is in trial.h, which declares ct_ctx_add_callback) */
struct ct_callback {
    const char *name; /* unique among the trial's callbacks; copied */
    void *self;       /* handed to every hook */

    /* checkpoint_dir: the checkpoint resumed from, or NULL. */
    int (*on_trial_startup)(void *self, ct_context *ctx, int64_t first_batch_idx,
                            const char *checkpoint_dir);
    int (*on_training_start)(void *self, ct_context *ctx);
    int (*on_training_epoch_start)(void *self, ct_context *ctx, int64_t epoch_idx);
    int (*on_training_epoch_end)(void *self, ct_context *ctx, int64_t epoch_idx);
    /* avg_metrics: the workload's reported metrics; batch_metrics: a list of
     * each batch's metrics dict. Both borrowed. */
    int (*on_training_workload_end)(void *self, ct_context *ctx, const ct_value *avg_metrics,
                                    const ct_value *batch_metrics);
    int (*on_validation_start)(void *self, ct_context *ctx);
    int (*on_validation_epoch_start)(void *self, ct_context *ctx);
    /* outputs: a list of each validation batch's metrics dict (borrowed). */
    int (*on_validation_epoch_end)(void *self, ct_context *ctx, const ct_value *outputs);
    /* metrics: the reduced validation metrics (borrowed). */
    int (*on_validation_end)(void *self, ct_context *ctx, const ct_value *metrics);
    /* The whole checkpoint state being loaded (borrowed). */
    int (*on_checkpoint_load_start)(void *self, ct_context *ctx, const ct_value *state);
    /* The state about to be written: a callback may add entries (a dict). */
    int (*on_checkpoint_save_start)(void *self, ct_context *ctx, ct_value *state);
    /* The state about to be written (on_checkpoint_save_start) and the
     * committed directory (on_checkpoint_write_end): on rank 0 only, which
     * writes checkpoints, as in Determined. */
    int (*on_checkpoint_write_end)(void *self, ct_context *ctx, const char *dir);
    int (*on_trial_shutdown)(void *self, ct_context *ctx);

    /* Saved under `name` in checkpoints: a NEW value, or NULL: nothing to
     * save (a failure when it set an error; ctrial clears the thread's
     * error before the call, error.h). */
    ct_value *(*state_dict)(void *self);
    int (*load_state_dict)(void *self, const ct_value *state);
    /* Frees self when the context ends (may be NULL). */
    void (*free)(void *self);

    /* After a checkpoint is committed, on every rank (Determined's
     * on_checkpoint_upload_end; its uuid is the directory here). */
    int (*on_checkpoint_upload_end)(void *self, ct_context *ctx, const char *dir);
};

/* Registering one: ct_ctx_add_callback (trial.h, with every ct_ctx_*
 * function). */

#ifdef __cplusplus
}
#endif
#endif
