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

#include <stdbool.h>
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

/* ---- stock callbacks -------------------------------------------------------
 *
 * Early stopping, as Lightning's EarlyStopping: after each validation the
 * monitored metric is compared with the best so far; a value better by more
 * than min_delta is the new best and resets the wait, anything else adds one
 * to it, and once the wait reaches patience the trial is asked to stop
 * (ct_ctx_request_stop: the loop ends after this validation, checkpoints and
 * returns CT_OK, as when the trial stops itself). A value that is not finite
 * stops at once (check_finite), as does one past stopping_threshold (good
 * enough) or divergence_threshold (hopeless). Its state (wait_count,
 * stopped_epoch, best_score, patience: Lightning's keys) is saved in
 * checkpoints as callback "early_stopping", so a resumed run goes on
 * counting. In init:
 *
 *     ct_early_stopping_opts es = ct_early_stopping_defaults();
 *     es.monitor = "validation_loss";
 *     es.patience = 5;
 *     if (ct_ctx_add_early_stopping(ctx, &es) != 0) ...
 */
typedef struct {
    const char *monitor;         /* the validation metric watched (required); copied */
    double min_delta;            /* an improvement smaller than this does not count (0) */
    int patience;                /* validations without improvement before stopping (3) */
    bool maximize;               /* mode "max": larger is better (false: "min") */
    bool strict;                 /* a validation without the metric is CT_ETRIAL (true); false: skipped */
    bool check_finite;           /* NaN or infinity stops at once (true) */
    bool has_stopping_threshold; /* stop as soon as the metric is better than stopping_threshold */
    double stopping_threshold;
    bool has_divergence_threshold; /* stop as soon as the metric is worse than divergence_threshold */
    double divergence_threshold;
    bool verbose;                /* say on the console why it stops, and each improvement (false: only why) */
} ct_early_stopping_opts;
CT_API ct_early_stopping_opts ct_early_stopping_defaults(void);
/* Registers the callback (named "early_stopping"). Returns a status:
 * CT_EINVAL for no monitor or patience < 0. */
CT_API int ct_ctx_add_early_stopping(ct_context *ctx, const ct_early_stopping_opts *o);

/* A learning-rate monitor, as Lightning's LearningRateMonitor: every
 * training report (metrics.jsonl's training lines, TensorBoard's training
 * scalars) also holds each wrapped optimizer's learning rate per parameter
 * group, named as Lightning names them: "lr-Adam"; "lr-Adam/pg1",
 * "lr-Adam/pg2" for several groups; "lr-Adam-1" for a second optimizer of
 * the same type. The rates are read when the report is made (after the
 * schedulers' steps of its last batch). In init; CT_ESTATE after training
 * started. Returns a status. */
CT_API int ct_ctx_add_lr_monitor(ct_context *ctx);

/* An exponential moving average of a model's weights, as Lightning's
 * EMAWeightAveraging (torch.optim.swa_utils.AveragedModel with
 * get_ema_avg_fn(decay)). The average starts as a copy of the model; after
 * each optimizer step whose zero-based index is at least
 * update_starting_at_step and a multiple of update_every_n_steps, each
 * averaged entry becomes decay * average + (1 - decay) * current (the first
 * update copies the model); parameters always, buffers (BatchNorm's running
 * statistics) with use_buffers, else they are copied. A batch that only
 * accumulates gradients (aggregation_frequency) is not a step. With
 * validate_with_average, every validation runs on the averaged weights: the
 * model and the average trade values before it and back after it, so the
 * reported metrics, the `best` policy and early stopping see the average,
 * and training goes on from the model's own weights. Checkpoints keep both:
 * the model's weights in models_state_dict as always, and the callback's
 * state, named "ema" (model 0) or "ema_<k>" (model k), beside them:
 * {"state_dict": the averaged state dict under the model's names,
 *  "n_averaged", "latest_update_step"}; in Python,
 * model.load_state_dict(torch.load(path)["callbacks"]["ema"]["state_dict"])
 * gives the averaged model, and a resumed run goes on averaging exactly.
 * In init, after wrapping the model (NULL: every model the trial wraps,
 * which also serves trials that build their model with build_model):
 *
 *     ct_ema_opts ema = ct_ema_defaults();
 *     ema.decay = 0.999;
 *     if (ct_ctx_add_ema(ctx, model, &ema) != 0) ...
 */
typedef struct {
    double decay;                    /* 0.999; in [0, 1] */
    bool use_buffers;                /* true: buffers averaged too (Lightning's default) */
    int64_t update_every_n_steps;    /* 1 */
    int64_t update_starting_at_step; /* 0 */
    bool validate_with_average;      /* true: validations run on the averaged weights */
} ct_ema_opts;
CT_API ct_ema_opts ct_ema_defaults(void);
/* Registers the average of `model` (a wrapped model, or NULL: all). opts
 * NULL: the defaults. Returns a status: CT_EINVAL for a decay outside
 * [0, 1], a schedule below 1 / 0, a model the trial did not wrap or one
 * already averaged; CT_ESTATE once training has started. */
CT_API int ct_ctx_add_ema(ct_context *ctx, ct_module *model, const ct_ema_opts *o);

#ifdef __cplusplus
}
#endif
#endif
