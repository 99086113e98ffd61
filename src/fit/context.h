/* src/fit/context.h — the context's insides, shared by the files of module
 * fit. The context holds what the trial sees: what it gave and wrapped,
 * where it runs, AMP, its position and requests, the hyperparameters it
 * read. What the loop alone needs (the loaders, the workload, the resume)
 * is the run's (run.h); reports are the reporter's (report.h) and
 * checkpoint directories the checkpointer's (checkpointer.h). Internal to
 * ctrial. */
#ifndef CTRIAL_FIT_CONTEXT_H
#define CTRIAL_FIT_CONTEXT_H

#include <jansson.h>
#include <stdio.h>

#include "ctrial/callback.h"
#include "ctrial/trial.h"
#include "fit/position.h"

/* A validation loader of the trial's beside the main one
 * (ct_ctx_add_validation_loader). */
typedef struct {
    char *name;
    ct_loader *loader;
} cti_named_loader;

typedef struct {
    ct_sched *sched;
    ct_step_mode mode;
    int frequency;
} cti_wrapped_sched;

struct ct_context {
    /* The trial and its options. */
    const ct_trial *trial;
    ct_fit_opts opts;
    void *self;                  /* what trial->init returned */
    bool simple_mode;

    /* Where it runs. */
    int rank, size, local_rank;
    ct_device device;
    uint64_t trial_seed;
    int64_t global_batch_size, per_slot_batch_size;
    int aggregation_frequency;

    /* Mixed precision (ct_ctx_use_amp): autocast around train_batch and
     * evaluate_batch, the scaler for fp16 (NULL otherwise). */
    bool amp;
    ct_dtype amp_dtype;
    ct_grad_scaler *scaler;
    bool manual_scaler;          /* ct_ctx_wrap_scaler: the trial scales, steps and updates itself */
    bool scaler_stepped;         /* an optimizer stepped through it since the last update */
    /* The trial's switches, set in init. */
    bool auto_to_device;         /* batches moved to the device for the trial (true) */
    bool repro_checks;           /* iterable loaders and user chains refused (true) */
    bool profile;                /* ct_ctx_set_profiler: the loop profiles with these options */
    ct_profiler_opts profiler_opts;

    /* What the trial wrapped, in wrap order (checkpoint order). */
    ct_module **models;
    size_t n_models;
    ct_optim **optims;
    size_t n_optims;
    bool lr_monitor;      /* ct_ctx_add_lr_monitor: learning rates in every training report */
    cti_named_loader *val_loaders; /* ct_ctx_add_validation_loader's, owned */
    size_t n_val_loaders;
    const char *val_name;        /* the named loader being validated (NULL: the main one) */
    bool val_loaders_closed;     /* build_validation_data_loader has returned */
    struct cti_ema **emas;       /* ct_ctx_add_ema: weight averages (ema.h), each its callback's self */
    size_t n_emas;
    bool ema_all;                /* ct_ctx_add_ema(ctx, NULL, ...): every model, once wrapped */
    ct_ema_opts ema_all_opts;
    cti_wrapped_sched *scheds;
    size_t n_scheds;
    /* One per model, from the loop's start: averages its gradients across
     * ranks during backward, and on one rank does nothing
     * (dist/grad_sync.h). None before, and in a trial loaded from a
     * checkpoint. */
    struct cti_grad_sync **syncs;
    size_t n_syncs;
    /* With shard_optimizer under mpirun, one per wrapped optimizer (in
     * optims' order), from the set-up on: which rank steps each parameter
     * and keeps its state (dist/shard.h). NULL otherwise. */
    struct cti_shard **shards;
    struct cti_graph_step *graph; /* the CUDA-graph step (graph_step.h) when opts.cuda_graphs */
    ct_reducer **reducers;
    size_t n_reducers;
    ct_callback *callbacks;
    size_t n_callbacks;

    /* Its position (position.h), moved by the loop; its requests, taken by
     * the loop at the next boundary. */
    cti_position pos;
    bool stop_requested;         /* ct_ctx_set_stop_requested */
    int exit_requested;          /* ct_ctx_should_exit: 0 none, 1 checkpoint first, 2 skip it */
    bool training;               /* the loaders are built: what belongs in init is refused */

    /* Hyperparameters the trial read (ct_ctx_hparam_*), for the warning
     * about the ones it never reads; the first of the wrong type. */
#define CT_HPARAMS_TRACKED 256
    const ct_value *hparams_read[CT_HPARAMS_TRACKED];
    size_t n_hparams_read;
    bool hparams_all_read;       /* ct_ctx_hparams handed out the whole dict */
    char hparam_error[1024];

    /* The run's reporter, borrowed while ct_fit runs (NULL otherwise): the
     * time backward and the optimizer step take is counted there. */
    struct cti_reporter *reporter;
    bool tensorboard;            /* TensorBoard logging on (ct_ctx_set_enable_tensorboard_logging) */
    struct ct_summary_writer *summary; /* the trial's own writer (ct_ctx_tensorboard_writer), rank 0 */
    /* A trial loaded from a checkpoint: the hyperparameters and config it
     * trained with, which opts.hparams, .experiment_config and .data may
     * point into (owned). */
    ct_value *saved_hparams, *saved_config;
};

/* context.c */
/* A context for `trial` with options `o` (copied; the strings and trees they
 * point to are borrowed). NEW; ct_ctx_free frees it. */
ct_context *cti_context_new(const ct_trial *trial, const ct_fit_opts *o);
/* Seeds every generator with the trial seed (as Determined does before
 * init), then builds the trial: init, or simple mode's model, optimizer and
 * scheduler. */
int cti_context_build_trial(ct_context *ctx);
/* Whether training batch `batch_idx` (absolute, from 0) ends an aggregation
 * window: the optimizers step on it (every aggregation_frequency-th batch),
 * gradients are averaged across ranks in its backward, schedulers move. */
bool cti_context_is_step_batch(const ct_context *ctx, int64_t batch_idx);

/* shard_optimizer under mpirun: every wrapped optimizer's parameters
 * partitioned among the ranks (ctx->shards), once the trial has built
 * them. Does nothing otherwise. */
int cti_context_shard_optimizers(ct_context *ctx);
/* The shard of a wrapped optimizer, NULL when it is not sharded. */
struct cti_shard *cti_context_shard_of(const ct_context *ctx, const ct_optim *opt);
/* Which rank steps each parameter of the sharded optimizers, described
 * once: a NEW table (cti_param_owners_free), or NULL + error. With it,
 * cti_param_owner gives the rank that steps `param` (any handle on a
 * model's parameter), -1 when no sharded optimizer holds it: the owner
 * whose grad_sync buckets reduce its gradient to it alone
 * (cti_grad_sync_new_owned). The same on every rank. */
typedef struct cti_param_owners cti_param_owners;
cti_param_owners *cti_context_param_owners(const ct_context *ctx);
int cti_param_owner(const cti_param_owners *t, const ct_tensor *param);
void cti_param_owners_free(cti_param_owners *t); /* accepts NULL */
/* The first hyperparameter the trial read with the wrong type, as
 * CT_ECONFIG with its message; CT_OK when there was none. */
int cti_context_hparam_failure(const ct_context *ctx);
/* A trial function returned NULL: keeps its message, or says which one
 * (`what`) returned NULL without one. Returns the code. */
int cti_context_trial_failed(const char *what);

#endif
