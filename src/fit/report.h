/* src/fit/report.h — what a run shows and records: metrics.jsonl
 * (docs/design.md, "Contracts"), TensorBoard scalars, console lines (plain,
 * a live line on a terminal, or none with quiet), where the time goes, and
 * the summary at the end. Internal to ctrial.
 *
 * A reporter is an object of its own: the loop makes one per run and hands
 * it the run's options and position, which it reads (never writes) at each
 * call. Lines go out on rank 0 only; every rank counts its time.
 *
 *     cti_reporter *r = cti_reporter_new(&(cti_reporter_opts){.opts = &o, .pos = &pos, ...});
 *     cti_report_open(r, resumed);              // rank 0: metrics.jsonl
 *     ...
 *     double t0 = cti_clock_monotonic();
 *     ...                                       // a batch
 *     cti_time_add(r, CT_TIME_TRAIN, t0);
 *     cti_report(r, "training", metrics);       // a line, a scalar per metric
 *     ...
 *     cti_report_summary(r, &summary);
 *     cti_reporter_free(r);
 */
#ifndef CTRIAL_FIT_REPORT_H
#define CTRIAL_FIT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctrial/trial.h"
#include "fit/position.h"

typedef struct cti_reporter cti_reporter;

/* Where the loop's time goes, measured on the host. TRAIN is the whole of
 * train_batch; COMM and OPTIM are parts of it. */
typedef enum {
    CT_TIME_DATA,       /* waiting for the training loader's next batch */
    CT_TIME_TRAIN,      /* train_batch (and simple mode's backward and step) */
    CT_TIME_COMM,       /* waiting for the gradient all-reduce after backward */
    CT_TIME_OPTIM,      /* ct_ctx_step_optimizer on step batches */
    CT_TIME_VALIDATION, /* validations, metric reduction included */
    CT_TIME_CHECKPOINT, /* checkpoints, from state to commit */
    CT_TIME_KINDS
} cti_time_kind;

typedef struct {
    const ct_fit_opts *opts;   /* output_dir, quiet, the periods, searcher metric, resume, test_mode */
    const cti_position *pos;   /* where the run is, read at each call */
    const bool *tensorboard;   /* the trial's switch (ct_ctx_set_enable_tensorboard_logging), read at each report */
    const ct_device *device;   /* the trial's device, once set up: on a GPU its memory is reported too */
    int rank, size;
} cti_reporter_opts;

/* A reporter with the run's clock started now. What `o` points to is
 * borrowed for the reporter's life. NEW, or NULL + CT_ENOMEM. */
cti_reporter *cti_reporter_new(const cti_reporter_opts *o);
/* Closes metrics.jsonl and the event file. Accepts NULL. */
void cti_reporter_free(cti_reporter *r);

/* Adds the time since `since` (a cti_clock_monotonic() reading) to kind's
 * share. A NULL reporter counts nothing (a trial used outside ct_fit). */
void cti_time_add(cti_reporter *r, cti_time_kind kind, double since);

/* Opens <output_dir>/metrics.jsonl (rank 0): new for a fresh run; on a
 * resume, appended to after cutting it back to the restored position (the
 * lines after the checkpoint were written by a run that went on and was
 * lost). The rates of the first line count from the restored position. */
int cti_report_open(cti_reporter *r, bool resumed);
/* TensorBoard event files (events.out.tfevents.*) in dir: how many, and
 * with `remove` each is deleted. Returns the count (0 when dir does not
 * exist), or a negative code. */
int cti_report_event_files(const char *dir, bool remove);

/* One report of `group` ("training" or "validation"): adds "batches" and
 * "epochs" to metrics unless present, appends the JSON line, adds the
 * TensorBoard scalars, prints. A training line also carries "timings":
 * where the time went since the previous training line (cti_time_kind),
 * which the console shows as shares. */
int cti_report(cti_reporter *r, const char *group, ct_value *metrics);
/* "checkpoint at batch N (reason)" (", written in the background" for one
 * finished after training went on). */
void cti_report_checkpoint(cti_reporter *r, int64_t bt, const char *reason, bool background);
/* After every batch: redraws the live progress line on a terminal (at most
 * four times a second; a clock read otherwise). */
void cti_report_tick(cti_reporter *r);

/* What the start-up summary says beyond the options and the position. */
typedef struct {
    const char *trial_name;
    const char *threads_from;  /* where the intra-op thread count came from */
    const char *transport;     /* how gradients travel between ranks ("" on one rank) */
    size_t n_models;
    int64_t parameters;        /* of every wrapped model */
    int64_t global_batch_size;
    int64_t train_records, val_records; /* -1: an iterable loader */
    const char *resume_dir;    /* the checkpoint resumed ("" none) */
    bool deterministic;        /* deterministic algorithms only (ct_set_deterministic) */
} cti_setup_info;

/* The start-up summary, once set up (resumed state restored): version,
 * trial, device, threads, ranks, models and parameters; the datasets,
 * batches per epoch, global batch size; the length, periods and output;
 * the checkpoint and batch a resume continues from. Rank 0, not quiet. */
void cti_report_setup(cti_reporter *r, const cti_setup_info *s);

/* What the end's summary says beyond the position. */
typedef struct {
    int signal;                /* the stop signal agreed across ranks (0: none) */
    bool exit_requested;       /* ct_ctx_should_exit ended it */
    bool has_best;
    double best_metric;
    const char *checkpoint_dir;
} cti_summary_info;

/* The end: "done: N batches" when training ran to max_length, else
 * "stopped after N of M batches (why)"; time, the best metric, where the
 * time went, the paths of the latest and the best checkpoint. */
void cti_report_summary(cti_reporter *r, const cti_summary_info *s);
/* "stopped by SIGTERM after batch N; resume with --resume CKPT" (rank 0,
 * not quiet). last_checkpoint "" says latest. */
void cti_report_preempted(cti_reporter *r, int signal, const char *last_checkpoint);
/* "stopped by SIGTERM before training: nothing to save; resume with
 * --resume ..." (rank 0, not quiet). resume_dir: the checkpoint the run
 * resumed ("" none). */
void cti_report_stopped_before_training(cti_reporter *r, int signal, const char *resume_dir);

#endif
