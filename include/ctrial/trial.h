/*
 * ctrial/trial.h — the trial (your code), its context, and the loop that
 * drives it: Determined's PyTorchTrial and Trainer in C.
 *
 * A trial is a table of functions. ctrial calls them, Determined's way:
 * build the data loaders, then train batch after batch, validating,
 * checkpointing and reporting on schedule until max_length.
 *
 *     typedef struct { ct_module *model; ct_optim *opt; } Trial;
 *
 *     static void *trial_init(ct_context *ctx) {
 *         Trial *t = calloc(1, sizeof *t);
 *         t->model = ct_ctx_wrap_model(ctx, build_net());
 *         if (!t->model) { free(t); return NULL; }     // the error is kept
 *         ct_sgd_opts o = ct_sgd_defaults();
 *         o.lr = ct_ctx_hparam_double(ctx, "lr", 0.1);
 *         t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &o));
 *         return t;
 *     }
 *
 *     static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch,
 *                                  int64_t epoch_idx, int64_t batch_idx) {
 *         Trial *t = self;
 *         ct_tensor *loss = ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)),
 *                                            ct_batch_at(batch, 1));
 *         if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL))
 *             return NULL;
 *         return ct_value_tensor(loss);             // reported as "loss"
 *     }
 *     ...
 *     static const ct_trial trial = {
 *         .name = "mnist", .init = trial_init, .destroy = free,
 *         .build_training_data_loader = train_loader,
 *         .build_validation_data_loader = val_loader,
 *         .train_batch = train_batch, .evaluate_batch = evaluate_batch,
 *     };
 *     int main(int argc, char **argv) { return ct_main(argc, argv, &trial); }
 *
 * Tensors that train_batch, evaluate_batch and evaluate_full_dataset create
 * belong to a scope the loop opens around the call: they need no frees.
 * init, build_callbacks, the loader builders and callbacks run outside any
 * scope: tensors they create are theirs to free (in destroy). Objects
 * handed to ct_ctx_wrap_* belong to the context from then on.
 */
#ifndef CTRIAL_TRIAL_H
#define CTRIAL_TRIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amp.h"
#include "data.h"
#include "fit_opts.h"
#include "metrics.h"
#include "nn.h"
#include "optim.h"
#include "profiler.h"
#include "sched.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_context ct_context;
typedef struct ct_callback ct_callback; /* callback.h */
struct ct_summary_writer;                  /* summary.h */

/* Units, periods and the run's options (ct_fit_opts, ct_fit_defaults) are
 * fit_opts.h's, included above. */

/* ==== the trial =========================================================== */

/* When the loop steps a wrapped scheduler (Determined's rules). Schedulers
 * only move on batches that step the optimizer (every
 * aggregation_frequency-th batch); there:
 *   EVERY_BATCH           one step for each batch of the aggregation window
 *                         whose count (batch_idx + 1) is a multiple of
 *                         `frequency` - batches are counted, not steps;
 *   EVERY_OPTIMIZER_STEP  one step when batch_idx + 1 is a multiple of
 *                         `frequency` (once per batch, however many
 *                         optimizers the trial steps);
 *   EVERY_EPOCH           one step for each epoch that ends before the next
 *                         optimizer-step batch, if (epoch + 1) is a multiple
 *                         of `frequency`;
 *   MANUAL                never: the trial calls ct_sched_step itself. */
typedef enum {
    CT_STEP_EVERY_BATCH = 0,
    CT_STEP_EVERY_OPTIMIZER_STEP,
    CT_STEP_EVERY_EPOCH,
    CT_STEP_MANUAL,
    CT_STEP_MAX_ENUM_ = 0x7fffffff
} ct_step_mode;

typedef struct ct_trial {
    const char *name;

    /* PyTorchTrial.__init__(context): builds models, optimizers, schedulers
     * (wrap them through the context) and returns the trial's state (any
     * non-NULL pointer), or NULL + ct_set_error on failure. Required. */
    void *(*init)(ct_context *ctx);
    /* Frees the state init returned (may be NULL: nothing to free). Wrapped
     * objects are freed by the context afterwards. */
    void (*destroy)(void *self);

    /* Required. The loader's batch size should be ct_ctx_per_slot_batch_size;
     * ctrial sets the loader's training chain (repeat, shard, skip) itself. */
    ct_loader *(*build_training_data_loader)(void *self, ct_context *ctx);
    ct_loader *(*build_validation_data_loader)(void *self, ct_context *ctx);

    /* One batch: forward, ct_ctx_backward, ct_ctx_step_optimizer. Returns a
     * NEW value: a loss tensor (reported as "loss") or a dict of named
     * metrics (numbers or one-element tensors; the same names every batch).
     * NULL + error stops the trial. Required unless simple mode is used. */
    ct_value *(*train_batch)(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx);
    /* Exactly one of these two. evaluate_batch returns a NEW dict of named
     * metrics for one validation batch (run on every rank, models in eval
     * mode, no grad); evaluate_full_dataset returns the NEW dict of final
     * metrics for the whole (unsharded) validation loader, on rank 0 only. */
    ct_value *(*evaluate_batch)(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx);
    ct_value *(*evaluate_full_dataset)(void *self, ct_context *ctx, ct_loader *loader);
    /* Optional: how evaluate_batch metrics reduce. Returns a NEW value: an
     * int (a ct_reducer_kind for every metric) or a dict metric name -> int
     * whose keys must be exactly the metric names. NULL result: AVG (a
     * failure when it set an error: ctrial clears the thread's error
     * before calling the trial's code, error.h). */
    ct_value *(*evaluation_reducer)(void *self, ct_context *ctx);
    /* Optional: records in a batch (default: size(0) of its first tensor). */
    int64_t (*get_batch_length)(void *self, const ct_value *batch);
    /* Optional: registers callbacks with ct_ctx_add_callback (callback.h). */
    int (*build_callbacks)(void *self, ct_context *ctx);

    /* Simple mode (Determined's legacy API): instead of wrapping in init,
     * provide these; train_batch then only computes and returns the loss (a
     * tensor or a dict with "loss"), and ctrial does backward, the optimizer
     * step and zero-grad. */
    ct_module *(*build_model)(void *self, ct_context *ctx);
    ct_optim *(*optimizer)(void *self, ct_context *ctx, ct_module *model);
    /* Optional in simple mode; *mode receives the step mode (default
     * CT_STEP_EVERY_EPOCH). NULL without an error: no scheduler. */
    ct_sched *(*create_lr_scheduler)(void *self, ct_context *ctx, ct_optim *opt, ct_step_mode *mode);
} ct_trial;

/* ==== running a trial ===================================================== */

/* Runs the trial to max_length (or a stop request). Returns 0 or a negative
 * code with ct_last_error() saying why. */
CT_API int ct_fit(const ct_trial *trial, const ct_fit_opts *o);

/* Lightning's trainer.validate(ckpt_path=...), Determined's evaluation of a
 * checkpoint: the trial's validation alone (every validation loader, named
 * ones included) on the models of `checkpoint`, restored as a resume would
 * restore them: a checkpoint directory, an s3:// URL, or "latest" / "best"
 * (by o->searcher_metric) of o's checkpoint directory. Nothing is trained,
 * checkpointed, or changed in the output directory but one line appended
 * to <output_dir>/evaluation.jsonl on rank 0 ({"checkpoint", "batches",
 * "metrics"}); the metrics are printed. Under mpirun every rank takes part,
 * as in a validation. *metrics (may be NULL) receives the reduced metrics, a
 * NEW dict, on every rank. Returns 0 or a negative code (CT_ECHECKPOINT for
 * a checkpoint that is missing or does not fit the trial). */
CT_API int ct_evaluate(const ct_trial *trial, const ct_fit_opts *o, const char *checkpoint, ct_value **metrics);

/* The stop signal (SIGTERM or SIGINT) of the last ct_fit in this process,
 * or 0: the one that stopped training (agreed across ranks: every rank
 * returns the same, whichever rank got it), or one that came after
 * training had ended. A program that owns its main tells a preempted run
 * (it checkpointed, or stopped before training with nothing to save, and
 * returned 0) from a finished one. */
CT_API int ct_fit_stop_signal(void);

/* ct_main, ct_main_ex, the program's own flags and the exit codes are
 * main.h's, which this header includes at its end. */

/* ==== the context ========================================================= */

/* Wrapping hands the object to the context (it frees them at the end, after
 * destroy) and registers it for checkpoints; a model is moved to the trial's
 * device. Each returns its argument (borrowed from now on), or NULL + error
 * (a NULL argument keeps the error that produced it). */
CT_API ct_module *ct_ctx_wrap_model(ct_context *ctx, ct_module *model);
CT_API ct_optim *ct_ctx_wrap_optimizer(ct_context *ctx, ct_optim *opt);
/* mode and frequency: see ct_step_mode. */
CT_API ct_sched *ct_ctx_wrap_lr_scheduler(ct_context *ctx, ct_sched *s, ct_step_mode mode,
                                          int frequency);
/* A reducer for metrics the trial feeds itself (metrics.h), Determined's
 * wrap_reducer(reducer, name, for_training, for_validation). With a name,
 * the reducer's result is that metric's value (a dict is refused); with name
 * NULL it must be a dict of named metrics, merged into the report. It reports
 * only in the workloads it is for (training reports, validations); every
 * reducer is reset at the start of each. Wrapping the same fn + fn_ctx (or
 * the same self) twice, or two reducers of one name for the same kind of
 * workload, is refused with CT_EINVAL. The reducer is borrowed and lives as
 * long as the context.
 * ct_ctx_wrap_reducer: a function reducer, for training and validation. */
CT_API ct_reducer *ct_ctx_wrap_reducer(ct_context *ctx, const char *name, ct_reduce_fn fn,
                                       void *fn_ctx);
CT_API ct_reducer *ct_ctx_wrap_reducer_ex(ct_context *ctx, const char *name, ct_reduce_fn fn,
                                          void *fn_ctx, bool for_training, bool for_validation);
/* A class reducer (MetricReducer): ops is copied; self belongs to the
 * context from now on and is released with ops->free after destroy. On
 * failure free is never called (self is still the caller's). */
CT_API ct_reducer *ct_ctx_wrap_metric_reducer(ct_context *ctx, const char *name,
                                              const ct_metric_reducer_ops *ops, void *self,
                                              bool for_training, bool for_validation);
/* Registers a callback (callback.h; the struct is copied; self belongs to
 * the context from now on and is released with free). A name already
 * registered is refused with CT_EINVAL; on failure free is never called. */
CT_API int ct_ctx_add_callback(ct_context *ctx, const ct_callback *cb);

/* loss.backward(), with AMP scaling when configured. Under mpirun, on an
 * optimizer-step batch the gradients are averaged across ranks while
 * backward runs and are averages when this returns (as with
 * DistributedDataParallel); on accumulation batches they stay local. Every
 * rank must call it the same number of times per batch. */
CT_API int ct_ctx_backward(ct_context *ctx, const ct_tensor *loss);
/* Determined's context.backward(loss, gradient=, retain_graph=,
 * create_graph=): the same, with torch.Tensor.backward's arguments
 * (gradient NULL: loss must be a scalar). Use this, not ct_backward /
 * ct_backward_ex, inside train_batch: under mpirun a gradient computed by
 * a bare ct_backward is never averaged, so ct_ctx_step_optimizer refuses to
 * step on it (CT_ESTATE naming the parameter) rather than let ranks
 * diverge. */
CT_API int ct_ctx_backward_ex(ct_context *ctx, const ct_tensor *loss, const ct_tensor *gradient,
                              bool retain_graph, bool create_graph);
/* Gradient clipping callback: receives every parameter of the optimizer,
 * after gradient averaging (and AMP unscaling), before the step. */
typedef int (*ct_clip_fn)(ct_tensor *const *params, size_t n, void *ctx);
/* Steps `opt` on optimizer-step batches (every aggregation_frequency
 * batches, gradients divided by that frequency), then zeroes its gradients
 * (set to none). On accumulation batches it does nothing. */
CT_API int ct_ctx_step_optimizer(ct_context *ctx, ct_optim *opt, ct_clip_fn clip, void *clip_ctx);
/* The same with auto_zero_grads chosen. */
CT_API int ct_ctx_step_optimizer_ex(ct_context *ctx, ct_optim *opt, ct_clip_fn clip, void *clip_ctx,
                                    bool auto_zero_grads);
/* Every argument of Determined's step_optimizer(optimizer, clip_grads=,
 * auto_zero_grads=, scaler=), and PyTorch's optimizer.step(closure).
 *
 * With a closure the step is ct_optim_step_closure(opt, closure,
 * closure_user, closure_loss) instead of ct_optim_step: what LBFGS needs.
 * The closure does what Python's does (ct_optim_step_closure, optim.h):
 * zeroes the gradients, computes the loss, calls ct_ctx_backward (not
 * ct_backward) and returns the loss. The optimizer calls it inside this
 * call (LBFGS: as often as its line search needs), so its time counts as
 * the optimizer's; auto_zero_grads still zeroes after the step. Since the
 * closure makes the gradients itself, with the weights the step has moved
 * so far, it is refused (on every batch, before anything runs) with:
 *   - a clip callback (CT_EINVAL): it runs before the step, the closure
 *     makes the gradients inside it; clip inside the closure instead;
 *   - a GradScaler, `scaler` (CT_EINVAL) or fp16 AMP's (CT_ECONFIG), as
 *     PyTorch's GradScaler.step refuses closures;
 *   - AMP without a scaler, bf16 (CT_ECONFIG): the autocast region around
 *     train_batch keeps the weights' low-precision copies, so evaluations
 *     after the optimizer moved the weights would use the old ones (LBFGS
 *     would not move); autocast inside the closure instead
 *     (ct_autocast_enter / ct_autocast_exit around its forward);
 *   - aggregation_frequency > 1 (CT_ECONFIG): the closure evaluates the
 *     step batch alone, and its zero_grad drops what the window
 *     accumulated;
 *   - more than one rank (CT_ECONFIG): each evaluation's backward is an
 *     all-reduce, and LBFGS's data-dependent count of evaluations would
 *     differ between ranks;
 *   - cuda_graphs (CT_ECONFIG): each evaluation reads the loss on the
 *     host, which a capture cannot. */
typedef struct {
    ct_clip_fn clip;          /* NULL: no clipping */
    void *clip_ctx;
    bool auto_zero_grads;     /* zero (set to none) after the step (true); must stay true
                               * with aggregation_frequency > 1 (CT_ECONFIG) */
    ct_grad_scaler *scaler;   /* manual AMP: step through this scaler, scaler.step(opt)
                               * (NULL: the context's own, if ct_ctx_use_amp) */
    ct_closure_fn closure;    /* step(closure) (NULL: step()) */
    void *closure_user;       /* the closure's argument */
    double *closure_loss;     /* with a closure, when the step returns 0: float(loss) of
                               * its first call, what step(closure) returns (LBFGS: the
                               * loss before the step); may be NULL */
} ct_step_opts;
CT_API ct_step_opts ct_step_defaults(void);
CT_API int ct_ctx_step_optimizer_with(ct_context *ctx, ct_optim *opt, const ct_step_opts *o);
/* Manual AMP, Determined's context.wrap_scaler(scaler): the trial scales
 * its loss itself (ct_ctx_backward(ctx, ct_grad_scaler_scale(s, loss))),
 * unscales before clipping (ct_grad_scaler_unscale), steps through it
 * (ct_step_opts.scaler) and calls ct_grad_scaler_update after its steps;
 * autocast is its own too (ct_autocast_enter). The context only owns the
 * scaler and checkpoints it ("scaler_state_dict"), restoring it on resume.
 * Call it in init, before ct_ctx_wrap_model and instead of ct_ctx_use_amp
 * (CT_ESTATE otherwise). Returns its argument (borrowed from now on) or
 * NULL + error (the scaler is freed). */
CT_API ct_grad_scaler *ct_ctx_wrap_scaler(ct_context *ctx, ct_grad_scaler *scaler);

/* Mixed precision for the whole trial (Determined's
 * context.experimental.use_amp(), PyTorch's AMP recipe), set up in init:
 *
 *     ct_amp_opts amp = ct_amp_defaults();        // fp16 with a GradScaler
 *     amp.dtype = CT_BF16;                        // or bf16, no scaling
 *     if (ct_ctx_use_amp(ctx, &amp) != 0) ...
 *
 * Then the loop runs train_batch and evaluate_batch inside an autocast
 * region of the trial's device type; ct_ctx_backward scales the loss;
 * ct_ctx_step_optimizer unscales the gradients before a clip callback (so it
 * sees true gradients), skips the step when they hold inf/NaN (scaler.step)
 * and, once per optimizer-step batch after train_batch, the scale is
 * updated (scaler.update()); the scaler's state is checkpointed as
 * "scaler_state_dict" and restored on resume. bf16 (on the CPU or a GPU)
 * needs no scaler. */
typedef struct {
    ct_dtype dtype;             /* CT_F16 (default) or CT_BF16 */
    ct_grad_scaler_opts scaler; /* used with CT_F16; scaler.enabled = false: none */
} ct_amp_opts;
CT_API ct_amp_opts ct_amp_defaults(void);
/* Turns AMP on (in init, once). CT_ESTATE after training started or when
 * called twice, CT_EDTYPE for another dtype, CT_EDEVICE where the device
 * cannot autocast to it. Returns a status. */
CT_API int ct_ctx_use_amp(ct_context *ctx, const ct_amp_opts *o);
/* The context's GradScaler (borrowed; NULL without fp16 AMP): its scale,
 * ct_grad_scaler_get_scale, for logging. */
CT_API ct_grad_scaler *ct_ctx_grad_scaler(const ct_context *ctx);

/* Profiles training with libtorch's profiler (Determined's
 * context.set_profiler(...), i.e. torch.profiler.profile(schedule=...)), set
 * up in init: each training batch of this run is one profiler step (step 0
 * is the run's first batch, also after a resume), and every active window
 * of the schedule is written to <output_dir>/profiler/rank<r>.<cycle>.pt.trace.json
 * (Chrome, Perfetto, TensorBoard's profiler plugin). Bad options fail
 * ct_fit before the first batch, as ct_profiler_new would; a trace that
 * cannot be written prints why and training goes on. CT_ESTATE after
 * training started. Returns a status. */
CT_API int ct_ctx_set_profiler(ct_context *ctx, const ct_profiler_opts *o);

/* Hyperparameters (the config's "hyperparameters" and --hparam flags).
 * The getters return the default when the name is absent. A present value
 * of the wrong type records CT_ECONFIG naming the key, the value and the
 * type wanted, returns the default, and fails the trial (the loop stops it
 * with that error when the trial function returns). An int is a number; a
 * float with an integral value (128.0) is an integer. The _req forms fail
 * with CT_ECONFIG naming a missing or mistyped key. */
CT_API double ct_ctx_hparam_double(ct_context *ctx, const char *name, double def);
CT_API int64_t ct_ctx_hparam_int(ct_context *ctx, const char *name, int64_t def);
CT_API bool ct_ctx_hparam_bool(ct_context *ctx, const char *name, bool def);
CT_API const char *ct_ctx_hparam_str(ct_context *ctx, const char *name, const char *def);
CT_API int ct_ctx_hparam_double_req(ct_context *ctx, const char *name, double *out);
CT_API int ct_ctx_hparam_int_req(ct_context *ctx, const char *name, int64_t *out);
CT_API const ct_value *ct_ctx_hparams(const ct_context *ctx); /* borrowed dict */
CT_API const ct_value *ct_ctx_data_config(const ct_context *ctx); /* borrowed, may be NULL */

CT_API int64_t ct_ctx_global_batch_size(const ct_context *ctx);
CT_API int64_t ct_ctx_per_slot_batch_size(const ct_context *ctx);
CT_API int ct_ctx_rank(const ct_context *ctx);
CT_API int ct_ctx_size(const ct_context *ctx);
CT_API int ct_ctx_local_rank(const ct_context *ctx);
CT_API ct_device ct_ctx_device(const ct_context *ctx);
CT_API uint64_t ct_ctx_trial_seed(const ct_context *ctx);
CT_API int ct_ctx_aggregation_frequency(const ct_context *ctx);
/* Batches trained before this run started (0, or the resumed position). */
CT_API int64_t ct_ctx_initial_batch(const ct_context *ctx);
/* Determined's current_train_batch(): the index (from 0, counted over the
 * whole trial) of the batch being trained — inside train_batch and the
 * epoch hooks around it — or, anywhere else, of the last batch trained
 * (in validation after N batches: N - 1). ct_ctx_current_epoch is its
 * epoch (index / epoch length), ct_ctx_is_epoch_start / _end whether it
 * is the first / last batch of its epoch. Before this run's first batch
 * (in init, on_trial_startup, on_training_start, a step-zero validation)
 * there is no such batch: Determined raises "Training hasn't started";
 * these return -1 (false) and record CT_ESTATE saying so. */
CT_API int64_t ct_ctx_current_batch(const ct_context *ctx);
CT_API int64_t ct_ctx_current_epoch(const ct_context *ctx);
CT_API bool ct_ctx_is_epoch_start(const ct_context *ctx);
CT_API bool ct_ctx_is_epoch_end(const ct_context *ctx);
/* Batches per epoch: rank 0's training loader's length, the same on every
 * rank (Determined broadcasts the chief's); -1 when unknown (an iterable
 * loader) or before the loaders are built. */
CT_API int64_t ct_ctx_epoch_length(const ct_context *ctx);

/* Determined's set_stop_requested / get_stop_requested: a request to stop
 * the trial, taken at the next boundary (the end of a workload: a
 * validation, checkpoint or reporting period, or max_length), where the
 * loop checkpoints unless the checkpoint is current and returns 0. Until
 * then it can be withdrawn with false. Under mpirun a request on any rank
 * stops every rank at the same boundary. (A SIGTERM / SIGINT is a
 * preemption: it stops after the current batch, not at the boundary.) */
CT_API void ct_ctx_set_stop_requested(ct_context *ctx, bool stop);
CT_API bool ct_ctx_get_stop_requested(const ct_context *ctx);
/* ct_ctx_set_stop_requested(ctx, true), kept from earlier releases. */
CT_API void ct_ctx_request_stop(ct_context *ctx);
/* Determined's `raise det.pytorch._ShouldExit(skip_exit_checkpoint)`:
 * records CT_EEXIT and returns it, for the trial function or hook to
 * return at once (NULL from train_batch, the code from a hook). The loop
 * then ends the trial cleanly: it checkpoints (unless skip_checkpoint, or
 * the checkpoint is current) and ct_fit returns 0. Raised in train_batch,
 * that batch counts as trained. Under mpirun every rank must call it at the
 * same point (as every Determined worker raises it), or the others wait
 * for it in their next collective. */
CT_API int ct_ctx_should_exit(ct_context *ctx, bool skip_checkpoint);

/* The trial's surroundings (Determined's context getters). */
/* The whole experiment config as ct_main read it (borrowed; NULL when
 * ct_fit was called without one: ct_fit_opts.experiment_config). */
CT_API const ct_value *ct_ctx_experiment_config(const ct_context *ctx);
/* ct_fit_opts.user: the program's own pointer, for a trial that takes
 * arguments (Determined's Trainer-era trials take them in __init__). */
CT_API void *ct_ctx_user_data(const ct_context *ctx);
CT_API int64_t ct_ctx_experiment_id(const ct_context *ctx);
CT_API int64_t ct_ctx_trial_id(const ct_context *ctx);
/* Where TensorBoard's files go: the output directory (borrowed). */
CT_API const char *ct_ctx_tensorboard_path(const ct_context *ctx);
/* Determined's get_tensorboard_writer(): a writer (summary.h) for the
 * trial's own scalars, histograms, images and text, in the TensorBoard
 * directory beside the loop's metrics (borrowed; the context closes it).
 * NULL on ranks other than 0 and with TensorBoard logging off: every
 * ct_summary_add_* on NULL does nothing and returns 0, so a trial can log
 * unconditionally. Opened at the first call. */
CT_API struct ct_summary_writer *ct_ctx_tensorboard_writer(ct_context *ctx);
/* Determined's set_enable_tensorboard_logging: false stops the loop's own
 * TensorBoard scalars (metrics.jsonl is still written) and makes
 * ct_ctx_tensorboard_writer NULL from then on. ct_fit_opts.tensorboard
 * sets the starting value (true). */
CT_API void ct_ctx_set_enable_tensorboard_logging(ct_context *ctx, bool on);
CT_API bool ct_ctx_get_enable_tensorboard_logging(const ct_context *ctx);

/* Data. Batches reach train_batch and evaluate_batch on the trial's device
 * (every tensor leaf moved by the loop, Determined's auto to_device), unless
 * the trial called ct_ctx_disable_auto_to_device in init; then they arrive
 * as the loader made them. ct_ctx_to_device moves any tree the same way:
 * a NEW value, or NULL + error. */
CT_API void ct_ctx_disable_auto_to_device(ct_context *ctx);
CT_API ct_value *ct_ctx_to_device(ct_context *ctx, const ct_value *v);
/* Determined's context.experimental.disable_dataset_reproducibility_checks():
 * lets build_*_data_loader return an iterable loader (ct_loader_iterable,
 * data.h), whose resume is only as exact as its iterator is deterministic.
 * Call it in init; without it such a loader is refused. */
CT_API void ct_ctx_disable_dataset_reproducibility_checks(ct_context *ctx);
/* More validation loaders beside the one build_validation_data_loader
 * returns, as Lightning's several val_dataloaders: each is validated after
 * the main one at every validation, by the same evaluate_batch (or
 * evaluate_full_dataset), reduced on its own, and its metrics reported under
 * "<name>/<metric>" ("test/validation_loss") beside the main loader's. Call
 * it in build_validation_data_loader (or init); it takes the loader (also
 * on failure). name: letters, digits, '_', '-' and '.', unique, copied.
 * CT_EINVAL for a bad or repeated name or a NULL loader; CT_ESTATE during
 * training. */
CT_API int ct_ctx_add_validation_loader(ct_context *ctx, const char *name, ct_loader *loader);
/* The name of the validation loader evaluate_batch / evaluate_full_dataset
 * is called for: NULL for build_validation_data_loader's (borrowed). */
CT_API const char *ct_ctx_validation_loader_name(const ct_context *ctx);

/* The i-th wrapped model / optimizer (wrap order), borrowed; NULL past the end. */
CT_API ct_module *ct_ctx_model(const ct_context *ctx, size_t i);
CT_API ct_optim *ct_ctx_optimizer(const ct_context *ctx, size_t i);
/* What the trial's init returned (the trial's own struct), borrowed; NULL
 * for a simple-mode trial without init. */
CT_API void *ct_ctx_self(const ct_context *ctx);
/* Frees a context from ct_load_trial_from_checkpoint (below): calls the
 * trial's destroy, then frees what it wrapped. Accepts NULL. */
CT_API void ct_ctx_free(ct_context *ctx);

/* ==== CUDA graphs (ct_fit_opts.cuda_graphs) ================================
 *
 * With cuda_graphs on (and a CUDA device), the loop runs the first
 * cuda_graph_warmup batches eagerly on a side stream, then captures the
 * whole training step (train_batch: forward, ct_ctx_backward,
 * ct_ctx_step_optimizer; in simple mode with ctrial's backward and step) in
 * a CUDA graph and, for every later batch, copies the batch into the
 * captured input tensors and replays the graph: one launch instead of
 * hundreds. The metrics of each batch are clones of the tensors the graph
 * writes.
 *
 * A replay repeats what train_batch did at capture, so:
 *   - every batch has the structure, shapes and dtypes of the captured one
 *     and lives on the trial's device (the training chain repeats before
 *     it batches, so its batches are full; pad or bucket data of varying
 *     size); a mismatch is CT_ESHAPE naming the leaf and both shapes;
 *   - train_batch's host code (branches on batch_idx, counters, host
 *     numbers in its metrics, ct_reducer_update, ct_ctx_request_stop) runs
 *     only at capture; anything that needs the host to wait for the GPU
 *     (ct_item, printing, copies to the CPU, nonzero) fails the capture
 *     with CT_ESTATE saying so;
 *   - optimizer hyperparameters are baked in: when any group's differ from
 *     those at capture (a scheduler stepped), the step is captured again;
 *     a change on two batches in a row (a scheduler stepping every batch)
 *     is CT_ENOTSUP naming the schedulers, since capturing every batch
 *     costs more than it saves;
 *   - dropout works (the default CUDA generator is registered with the
 *     capture): a graph run draws what an eager run draws.
 *
 * Refused before training starts: aggregation_frequency > 1 and
 * cuda_graph_warmup < 1 (CT_ECONFIG); an optimizer whose step is not
 * capturable, i.e. other than SGD or fused (fused=1) Adam/AdamW
 * (CT_ENOTSUP naming it); mpirun (CT_ENOTSUP: the gradient all-reduce
 * decides its buckets on the host each backward); a CPU device
 * (CT_ECONFIG). AMP (ct_ctx_use_amp): the autocast region and the
 * scaler's scale, unscale, step and update are captured with the step;
 * fp16's GradScaler needs every optimizer group fused (CT_ENOTSUP
 * otherwise: for the others it decides on the host whether to step), bf16
 * has no scaler and no such limit. */

/* How many times the training step was captured so far in this run (0
 * before the first capture, or with cuda_graphs off); more than one means
 * re-captures after hyperparameter changes. */
CT_API int64_t ct_ctx_cuda_graph_captures(const ct_context *ctx);

/* ==== a trial from a checkpoint ============================================ */

/* Determined's load_trial_from_checkpoint_path: builds the trial (init, or
 * build_model/optimizer in simple mode) on `device` with the checkpoint's
 * hparams (or `hparams` when not NULL) and the experiment and data configs
 * it was trained with (metadata.json's experiment_config or data_config:
 * ct_ctx_experiment_config and ct_ctx_data_config in init read them), loads
 * the models' state, puts them in eval mode and returns a context to use
 * them:
 *
 *     ct_context *ctx = NULL;
 *     if (ct_load_trial_from_checkpoint("ckpts/ckpt-000100-1a2b3c4d", &trial, NULL, "cpu", &ctx))
 *         die(ct_last_error());
 *     ct_module *model = ct_ctx_model(ctx, 0);
 *     ...                                    // inference
 *     ct_ctx_free(ctx);                      // destroys the trial too
 *
 * Verifies the checkpoint first. Returns a status; on failure *out is NULL. */
CT_API int ct_load_trial_from_checkpoint(const char *dir, const ct_trial *trial, const ct_value *hparams,
                                         const char *device, ct_context **out);
/* The context's models and optimizers (ct_ctx_model, ct_ctx_optimizer),
 * the trial's own state (ct_ctx_self) and ct_ctx_free are above. */

#ifdef __cplusplus
}
#endif

#include "main.h" /* ct_main: the standard program (module cli) */
#endif
