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
 * Tensors a trial function creates belong to a scope the loop opens around
 * the call: they need no frees. Objects handed to ct_ctx_wrap_* belong to
 * the context from then on.
 */
#ifndef CTRIAL_TRIAL_H
#define CTRIAL_TRIAL_H

#include <stdbool.h>
#include <stdint.h>

#include "amp.h"
#include "data.h"
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

/* ==== units and periods =================================================== */

typedef enum {
    CT_NEVER = 0,   /* no period: never fires */
    CT_BATCHES,     /* every n batches, or at the listed batch counts */
    CT_EPOCHS,      /* at the end of every n-th epoch, or of the listed epochs */
    CT_RECORDS,     /* config only: becomes batches by the global batch size */
    CT_UNIT_MAX_ENUM_ = 0x7fffffff
} ct_unit;

#define CT_SCHEDULE_MAX 64

/* Batch(n), Epoch(n), or an explicit schedule Batch({a, b, c}). */
typedef struct {
    ct_unit unit;
    int64_t n;                          /* the period or length */
    int num_points;                     /* > 0: a schedule, n is ignored */
    int64_t points[CT_SCHEDULE_MAX];
} ct_period;

/* Invalid input (n < 1; a schedule of fewer than 1 or more than
 * CT_SCHEDULE_MAX points, a point < 1, a unit other than CT_BATCHES or
 * CT_EPOCHS, NULL points) records CT_EINVAL and returns a CT_NEVER period,
 * which ct_fit refuses as max_length. Unlike Determined, Batch(0) is not
 * "every batch": use ct_batches(1). */
CT_API ct_period ct_batches(int64_t n);
CT_API ct_period ct_epochs(int64_t n);
CT_API ct_period ct_records(int64_t n);
CT_API ct_period ct_never(void);
/* A schedule of explicit points (sorted or not) in batches or epochs; the
 * period holds them sorted, duplicates removed. */
CT_API ct_period ct_schedule(ct_unit unit, int n, const int64_t *points);

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
     * whose keys must be exactly the metric names. NULL result: AVG. */
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
     * CT_STEP_EVERY_EPOCH). */
    ct_sched *(*create_lr_scheduler)(void *self, ct_context *ctx, ct_optim *opt, ct_step_mode *mode);
} ct_trial;

/* ==== running a trial ===================================================== */

typedef enum {
    CT_CKPT_BEST = 0, /* checkpoint after a validation that improves searcher.metric */
    CT_CKPT_ALL,      /* after every validation */
    CT_CKPT_NONE,     /* never because of a validation */
    CT_CKPT_MAX_ENUM_ = 0x7fffffff
} ct_ckpt_policy;

typedef struct {
    ct_period max_length;          /* required: Batch(n) or Epoch(n) */
    ct_period validation_period;   /* never */
    ct_period checkpoint_period;   /* never */
    ct_period reporting_period;    /* Batch(100) */
    ct_ckpt_policy checkpoint_policy; /* best */
    const char *searcher_metric;   /* "validation_loss" */
    bool smaller_is_better;        /* true */
    bool step_zero_validation;     /* false */
    bool test_mode;                /* false */
    int64_t global_batch_size;     /* 0: from hparams' global_batch_size */
    int aggregation_frequency;     /* 1 */
    int64_t bucket_cap_mb;         /* gradient all-reduce bucket size under mpirun (25) */
    bool cuda_graphs;              /* capture the training step in a CUDA graph, replay it (false) */
    int cuda_graph_warmup;         /* eager batches before the capture, >= 1 (3) */
    bool tune_malloc;              /* glibc's heap thresholds set for training, process-wide (true) */
    uint64_t seed;                 /* experiment seed (0) */
    const char *output_dir;        /* metrics.jsonl, events, checkpoints ("output") */
    const char *checkpoint_dir;    /* checkpoint_storage.host_path (NULL: output_dir/checkpoints) */
    int save_trial_latest;         /* checkpoints kept by recency (1) */
    int save_trial_best;           /* checkpoints kept by searcher metric (1) */
    bool stop_on_nan;              /* a non-finite training loss stops the trial (false) */
    const char *resume;            /* checkpoint dir or "latest" (NULL) */
    const char *device;            /* "cpu", "cuda:N" (NULL: cpu) */
    int num_threads;               /* intra-op threads (0: libtorch's default) */
    bool quiet;                    /* only errors on the console */
    const ct_value *hparams;       /* borrowed dict (NULL: none) */
    const ct_value *data;          /* borrowed data config (NULL) */
} ct_fit_opts;

CT_API ct_fit_opts ct_fit_defaults(void);

/* Runs the trial to max_length (or a stop request). Returns 0 or a negative
 * code with ct_last_error() saying why. */
CT_API int ct_fit(const ct_trial *trial, const ct_fit_opts *o);

/* The signal (SIGTERM or SIGINT) that stopped the last ct_fit on this
 * thread's process, or 0: a program that owns its main can tell a
 * preempted run (it checkpointed and returned 0) from a finished one. */
CT_API int ct_fit_stop_signal(void);

/* The standard program: parses flags and the JSON experiment config
 * (--help lists them), runs ct_fit, prints a one-line cause on failure and
 * returns the process exit code (ct_exit_code). */
CT_API int ct_main(int argc, char **argv, const ct_trial *trial);

/* Process exit codes (docs/design.md, "Contracts"): a preempted run that
 * checkpointed exits 0. */
enum {
    CT_EXIT_OK = 0,
    CT_EXIT_TRIAL = 1,      /* the trial (or libtorch) failed */
    CT_EXIT_CONFIG = 2,     /* bad flags or experiment config */
    CT_EXIT_CHECKPOINT = 3, /* bad checkpoint */
    CT_EXIT_NAN = 4,        /* non-finite loss with stop_on_nan */
    CT_EXIT_DIST = 5,       /* a rank was lost */
};
/* The exit code for a ct_fit result. */
CT_API int ct_exit_code(int status);

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
/* A reducer for metrics the trial feeds itself (see metrics.h). With a name,
 * fn returns that metric's value; with name NULL, fn returns a dict of named
 * metrics merged into the report. Wrapping the same fn+ctx twice is an error. */
CT_API ct_reducer *ct_ctx_wrap_reducer(ct_context *ctx, const char *name, ct_reduce_fn fn,
                                       void *fn_ctx);
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
 * The getters return the default when the name is absent; a present value
 * of the wrong type returns the default and records CT_ECONFIG naming the
 * key (see ct_last_code / ct_last_error). The _req forms fail with
 * CT_ECONFIG naming a missing or mistyped key. */
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
/* Inside train_batch: the batch being trained (absolute index); elsewhere
 * (validation, callbacks): the number of batches trained so far, as
 * Determined's current_train_batch(). ct_ctx_current_epoch: its epoch. */
CT_API int64_t ct_ctx_current_batch(const ct_context *ctx);
CT_API int64_t ct_ctx_current_epoch(const ct_context *ctx);
CT_API bool ct_ctx_is_epoch_start(const ct_context *ctx);
CT_API bool ct_ctx_is_epoch_end(const ct_context *ctx);
/* Determined's stop request: the loop finishes this batch, checkpoints if
 * the last checkpoint is not current, and returns cleanly. */
CT_API void ct_ctx_request_stop(ct_context *ctx);

/* The i-th wrapped model / optimizer (wrap order), borrowed; NULL past the end. */
CT_API ct_module *ct_ctx_model(const ct_context *ctx, size_t i);
CT_API ct_optim *ct_ctx_optimizer(const ct_context *ctx, size_t i);
/* What the trial's init returned (the trial's own struct), borrowed; NULL
 * for a simple-mode trial without init. */
CT_API void *ct_ctx_self(const ct_context *ctx);
/* Frees a context from ct_load_trial_from_checkpoint (ckpt.h): calls the
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

#ifdef __cplusplus
}
#endif
#endif
