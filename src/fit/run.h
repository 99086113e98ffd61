/* src/fit/run.h — one ct_fit's own state: what the loop needs beside the
 * trial's context and nobody else does. Internal to ctrial.
 *
 * The loop (loop.c) owns it and is the only writer while training. The
 * checkpoint state (state.c) reads it to write a checkpoint and fills it
 * from one when the run resumes. The trial never sees it: what it asks
 * for is the context's (context.h). */
#ifndef CTRIAL_FIT_RUN_H
#define CTRIAL_FIT_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "fit/checkpointer.h"
#include "fit/context.h"
#include "fit/report.h"

/* Why a checkpoint is written (metadata.json's trial_state.reason). */
typedef enum { CT_WHY_PERIOD, CT_WHY_POLICY, CT_WHY_END, CT_WHY_STOP } cti_ckpt_why;

typedef struct {
    ct_context *ctx;             /* the trial's side: what it wrapped, its position (ctx->pos) */
    cti_reporter *report;        /* metrics.jsonl, TensorBoard, the console, time accounting */
    cti_checkpointer *ckpt;      /* the directory, the resume source, the latest, the best */
    ct_loader *train_loader, *val_loader;
    ct_value *workload;          /* this rank's per-batch training metrics since the last report
                                  * (a list of dicts, owned; NULL or empty: none) */
    ct_value *last_validation;   /* metrics of the latest validation (dict, owned) */
    cti_ckpt_why why;            /* of the checkpoint being written */
    bool bg_writing;             /* a checkpoint is being written in the background (every rank knows) */
    int64_t bg_bt;               /* its batch */
    cti_ckpt_why bg_why;         /* and why */
    int64_t resume_position;     /* the training loader's position in the resumed checkpoint */
    bool preempted;              /* a stop signal, agreed across ranks: taken after the batch */
    bool hparams_warned;         /* the hyperparameters never read were reported */
    ct_profiler *profiler;       /* ct_ctx_set_profiler's, while training */
    char threads_from[96];       /* where the intra-op thread count came from (the summary says) */
    const char *evaluate;        /* ct_evaluate: the checkpoint validated; nothing is trained, written
                                  * or checkpointed but evaluation.jsonl (NULL: a fit) */
    char best_path[4096];        /* ct_evaluate(..., "best"): the checkpoint found */
} cti_run;

#endif
