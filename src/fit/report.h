/* src/fit/report.h — what a run shows and records: metrics.jsonl
 * (docs/design.md, "Contracts"), console lines (plain, or none with quiet) and the summary at
 * the end. Rank 0 only. Internal to ctrial. */
#ifndef CTRIAL_FIT_REPORT_H
#define CTRIAL_FIT_REPORT_H

#include "base/clock.h"
#include "fit/context.h"

/* Starts the run's clock. */
void cti_report_start(ct_context *ctx);
/* Adds the time since `since` (a cti_clock_monotonic() reading) to kind's
 * share. */
void cti_time_add(ct_context *ctx, cti_time_kind kind, double since);
/* Opens <output_dir>/metrics.jsonl: new for a fresh run, appended to on
 * resume. */
int cti_report_open(ct_context *ctx);
/* TensorBoard event files (events.out.tfevents.*) in dir: how many, and
 * with `remove` each is deleted. Returns the count (0 when dir does not
 * exist), or a negative code. */
int cti_report_event_files(const char *dir, bool remove);
/* One report of `group` ("training" or "validation"): adds "batches" and
 * "epochs" to metrics unless present, appends the JSON line, prints. A
 * training line also carries "timings": where the time went since the
 * previous training line (see cti_time_kind), which the console shows as
 * shares. */
int cti_report(ct_context *ctx, const char *group, ct_value *metrics);
void cti_report_checkpoint(ct_context *ctx, const char *reason);
/* After every batch: redraws the live progress line on a terminal (at most
 * four times a second; a clock read otherwise). */
void cti_report_tick(ct_context *ctx);
/* The start-up summary, once set up (resumed state restored): version,
 * trial, device, threads, ranks, models and parameters; the datasets,
 * batches per epoch, global batch size; the length, periods and output;
 * the checkpoint and batch a resume continues from. Rank 0, not quiet. */
void cti_report_setup(ct_context *ctx);
/* The end: "done: N batches" when training ran to max_length, else
 * "stopped after N of M batches (why)" (`signal`: the stop signal agreed
 * across ranks, else a stop request or ct_ctx_should_exit); time, the best
 * metric, where the time went, the paths of the latest and the best
 * checkpoint. */
void cti_report_summary(ct_context *ctx, int signal);
/* "stopped by SIGTERM after batch N; resume with --resume CKPT" (rank 0,
 * also when quiet). */
void cti_report_preempted(ct_context *ctx, int signal);
/* "stopped by SIGTERM before training: nothing to save; resume with
 * --resume ..." (rank 0, also when quiet). */
void cti_report_stopped_before_training(ct_context *ctx, int signal);

#endif
