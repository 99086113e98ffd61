/* src/trial_internal.h — the context's insides, shared by the loop
 * (loop.c), the context API (context.c), reducers (reducer.c) and reports
 * (report.c). Internal to ctrial. */
#ifndef CTRIAL_SRC_TRIAL_INTERNAL_H
#define CTRIAL_SRC_TRIAL_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "ctrial/callback.h"
#include "ctrial/trial.h"

typedef struct {
    ct_sched *sched;
    ct_step_mode mode;
    int frequency;
} ct_wrapped_sched;

struct ct_reducer {
    char *name;          /* NULL: fn returns a dict of named metrics */
    ct_reduce_fn fn;
    void *fn_ctx;
    ct_value *values;    /* list of what update() got in this workload */
};

/* Why a checkpoint is written (metadata.json's trial_state.reason). */
typedef enum { CT_WHY_PERIOD, CT_WHY_POLICY, CT_WHY_END, CT_WHY_STOP } ct_ckpt_why;

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
} ct_time_kind;

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
    bool scaler_stepped;         /* an optimizer stepped through it since the last update */
    /* ct_ctx_set_profiler: the options, and the profiler while training. */
    bool profile;
    ct_profiler_opts profiler_opts;
    ct_profiler *profiler;
    int64_t global_batch_size, per_slot_batch_size;
    int aggregation_frequency;

    /* What the trial wrapped, in wrap order (checkpoint order). */
    ct_module **models;
    size_t n_models;
    ct_optim **optims;
    size_t n_optims;
    ct_wrapped_sched *scheds;
    size_t n_scheds;
    struct ct_grad_sync **syncs; /* one per model under mpirun (grad_sync.h), else NULL */
    struct ct_graph_step *graph; /* the CUDA-graph step (graph_step.h) when opts.cuda_graphs */
    ct_reducer **reducers;
    size_t n_reducers;
    ct_callback *callbacks;
    size_t n_callbacks;

    /* Position. */
    int64_t initial_batch;       /* batches trained before this run */
    int64_t batches_trained;     /* bt: batches completed so far */
    int64_t epoch_len;           /* batches per epoch (rank 0's training loader) */
    int64_t current_batch;       /* the batch in train_batch now, -1 outside */
    bool stop_requested;
    bool in_validation;

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
    int64_t resume_position;     /* the training loader's position in it */
    ct_ckpt_why why;             /* of the checkpoint being written */

    ct_loader *train_loader, *val_loader;
    int64_t records_trained;     /* by all ranks, up to the last report */
    int64_t records_pending;     /* by this rank since the last report */
    int64_t max_length_batches;  /* max_length in batches, once epoch_len is known */

    /* Reporting (report.c). */
    FILE *metrics_log;           /* metrics.jsonl (rank 0) */
    struct ct_tb_writer *tb;     /* TensorBoard events in output_dir (rank 0) */
    double start_time, last_report_time;
    int64_t last_report_bt, last_report_records;
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
ct_context *ct_ctx_create(const ct_trial *trial, const ct_fit_opts *o);
void ct_ctx_destroy(ct_context *ctx);
/* Whether the batch being trained steps the optimizers (every
 * aggregation_frequency-th batch). */
bool ct_ctx_is_step_batch(const ct_context *ctx);

/* reducer.c */
/* A metric value as doubles: a number gives one, a tensor all its elements
 * (a one-element tensor counts as a scalar), a list of numbers its items.
 * Returns the count (*out malloc'd), or a negative code with an error. */
int64_t ct_metric_doubles(const ct_value *v, double **out, bool *is_array);
void ct_reducers_reset(ct_context *ctx);
/* Adds every wrapped reducer's result to `metrics` (a dict). */
int ct_reducers_report(ct_context *ctx, ct_value *metrics);
/* Reduces a list of per-batch metric dicts with the trial's evaluation
 * reducers (`spec`: NULL, an int, or a dict name -> int). NEW dict. */
ct_value *ct_reduce_batches(const ct_value *batches, const ct_value *spec, const char *group);
/* The reducer for metric `name` from the trial's evaluation_reducer()
 * answer (NULL: AVG). Returns a status. */
int ct_reducer_for_metric(const ct_value *spec, const char *name, ct_reducer_kind *out);

/* reduce_ranks.c: metrics across ranks (every call is collective; with one
 * rank they return their input's equivalent without communicating). */
/* Training: each numeric metric replaced by its mean over ranks (every rank
 * trained the same batches of the workload), in place. */
int ct_metrics_average_ranks(ct_context *ctx, ct_value *metrics);
/* Validation: every rank's reduced metrics and batch count, combined on
 * rank 0 by each metric's reducer (AVG weighted by batch counts, SUM, MAX,
 * MIN; ranks without batches left out), then the result on every rank.
 * NEW dict or NULL + error. */
ct_value *ct_metrics_reduce_ranks(ct_context *ctx, const ct_value *local, int64_t n_batches, const ct_value *spec);
/* Rank 0's metrics dict on every rank (numbers as floats). NEW. */
ct_value *ct_metrics_from_rank0(ct_context *ctx, const ct_value *metrics);

#endif
