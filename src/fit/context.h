/* src/fit/context.h — the context's insides, shared by the files of module
 * fit: the loop (loop.c), the context API (context.c), checkpoint state
 * (state.c), reports (report.c) and the CUDA-graph step (graph_step.c).
 * Internal to ctrial. */
#ifndef CTRIAL_FIT_CONTEXT_H
#define CTRIAL_FIT_CONTEXT_H

#include <jansson.h>
#include <stdio.h>

#include "ctrial/callback.h"
#include "ctrial/trial.h"

typedef struct {
    ct_sched *sched;
    ct_step_mode mode;
    int frequency;
} cti_wrapped_sched;

/* Why a checkpoint is written (metadata.json's trial_state.reason). */
typedef enum { CT_WHY_PERIOD, CT_WHY_POLICY, CT_WHY_END, CT_WHY_STOP } cti_ckpt_why;

/* Where the loop's time goes, measured on the host (report.c). TRAIN is
 * the whole of train_batch; COMM and OPTIM are parts of it. */
typedef enum {
    CT_TIME_DATA,       /* waiting for the training loader's next batch */
    CT_TIME_TRAIN,      /* train_batch (and simple mode's backward and step) */
    CT_TIME_COMM,       /* waiting for the gradient all-reduce after backward */
    CT_TIME_OPTIM,      /* ct_ctx_step_optimizer on step batches */
    CT_TIME_VALIDATION, /* validations, metric reduction included */
    CT_TIME_CHECKPOINT, /* checkpoints, from state to commit */
    CT_TIME_KINDS
} cti_time_kind;

struct ct_context {
    const ct_trial *trial;
    ct_fit_opts opts;
    void *self;                  /* what trial->init returned */
    bool simple_mode;

    int rank, size, local_rank;
    ct_device device;
    uint64_t trial_seed;
    /* Mixed precision (ct_ctx_use_amp): autocast around train_batch and
     * evaluate_batch, the scaler for fp16 (NULL otherwise). */
    bool amp;
    ct_dtype amp_dtype;
    ct_grad_scaler *scaler;
    bool manual_scaler;          /* ct_ctx_wrap_scaler: the trial scales, steps and updates itself */
    bool scaler_stepped;         /* an optimizer stepped through it since the last update */
    bool auto_to_device;         /* batches moved to the device for the trial (true) */
    bool repro_checks;           /* iterable loaders refused (true) */
    /* ct_ctx_set_profiler: the options, and the profiler while training. */
    bool profile;
    ct_profiler_opts profiler_opts;
    ct_profiler *profiler;
    char threads_from[96];       /* where the intra-op thread count came from (the summary says) */
    int64_t global_batch_size, per_slot_batch_size;
    int aggregation_frequency;

    /* What the trial wrapped, in wrap order (checkpoint order). */
    ct_module **models;
    size_t n_models;
    ct_optim **optims;
    size_t n_optims;
    cti_wrapped_sched *scheds;
    size_t n_scheds;
    struct cti_grad_sync **syncs; /* one per model under mpirun (grad_sync.h), else NULL */
    struct cti_graph_step *graph; /* the CUDA-graph step (graph_step.h) when opts.cuda_graphs */
    ct_reducer **reducers;
    size_t n_reducers;
    ct_callback *callbacks;
    size_t n_callbacks;

    /* Position. */
    int64_t initial_batch;       /* batches trained before this run */
    int64_t batches_trained;     /* bt: batches completed so far */
    int64_t epoch_len;           /* batches per epoch (rank 0's training loader, broadcast); -1 unknown */
    int64_t current_batch;       /* the batch being or last trained; -1 before this run's first */
    bool stop_requested;         /* ct_ctx_set_stop_requested: taken at the next boundary */
    bool preempted;              /* a stop signal, agreed across ranks: taken after the batch */
    int exit_requested;          /* ct_ctx_should_exit: 0 none, 1 checkpoint first, 2 skip it */
    bool in_validation;

    /* Hyperparameters the trial read (ct_ctx_hparam_*), for the warning
     * about the ones it never reads; the first of the wrong type. */
#define CT_HPARAMS_TRACKED 256
    const ct_value *hparams_read[CT_HPARAMS_TRACKED];
    size_t n_hparams_read;
    bool hparams_all_read;       /* ct_ctx_hparams handed out the whole dict */
    bool hparams_warned;         /* the unread ones were reported */
    char hparam_error[1024];

    /* Decisions. */
    int64_t last_validation_bt;  /* -1: none yet */
    int64_t last_checkpoint_bt;  /* -1: none yet */
    bool has_best;
    double best_metric;
    ct_value *last_validation;   /* metrics of the latest validation (dict) */

    /* Checkpoints. */
    char checkpoint_dir[4096];   /* opts.checkpoint_dir or output_dir/checkpoints */
    char last_checkpoint[4096];  /* the latest committed checkpoint ("" none) */
    char resume_dir[4096];       /* the checkpoint this run resumes ("" none) */
    json_t *resume_meta;         /* its metadata.json */
    ct_value *saved_hparams;     /* hparams read from a checkpoint (owned) */
    ct_value *saved_config;      /* the experiment (or data) config read from a checkpoint (owned) */
    int64_t resume_position;     /* the training loader's position in it */
    cti_ckpt_why why;             /* of the checkpoint being written */

    ct_loader *train_loader, *val_loader;
    int64_t records_trained;     /* by all ranks, up to the last report */
    int64_t records_pending;     /* by this rank since the last report */
    ct_value *workload;          /* this rank's per-batch training metrics since the last report
                                  * (a list of dicts, owned; NULL or empty: none) */
    int64_t max_length_batches;  /* max_length in batches, once epoch_len is known */

    /* Reporting (report.c). */
    FILE *metrics_log;           /* metrics.jsonl (rank 0) */
    struct cti_tb_writer *tb;     /* TensorBoard events in output_dir (rank 0) */
    bool tensorboard;            /* TensorBoard logging on (ct_ctx_set_enable_tensorboard_logging) */
    struct ct_summary_writer *summary; /* the trial's own writer (ct_ctx_tensorboard_writer), rank 0 */
    double start_time, last_report_time;
    int64_t last_report_bt, last_report_records;
    /* The ETA is measured from the first training report: the time, the
     * batches trained (-1 before it), the validations' seconds and count. */
    double eta_since, eta_since_val_secs;
    int64_t eta_since_bt, eta_since_vals;
    int64_t validations_run;     /* by this run */
    bool live;                   /* stdout is a terminal: a live progress line */
    bool live_drawn;             /* the live line is on screen (no newline yet) */
    double last_tick;
    char latest[512];            /* the latest training metrics, for the live line */
    char latest_time[160];       /* the latest report's time shares, for the live line */
    /* Where the time goes (report.c): host seconds on this rank since the
     * last training report, and since the start. */
    double time_in[CT_TIME_KINDS], time_total[CT_TIME_KINDS], time_since;
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
/* The first hyperparameter the trial read with the wrong type, as
 * CT_ECONFIG with its message; CT_OK when there was none. */
int cti_context_hparam_failure(const ct_context *ctx);
/* A trial function returned NULL: keeps its message, or says which one
 * (`what`) returned NULL without one. Returns the code. */
int cti_context_trial_failed(const char *what);

#endif
