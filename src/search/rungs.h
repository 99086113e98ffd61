/* src/search/rungs.h — one adaptive ASHA bracket as a search: which trial
 * to create, train to which rung, or close, as each trial reports (rungs.c).
 * Internal to ctrial.
 *
 * Determined's asynchronous successive halving before v0.38 (asha.go and
 * asha_stopping.go), the form in which a trial trains to a rung, stops, and
 * may be promoted later:
 *   - stop_once false (promotion): of the k results a rung has, the top
 *     int(k/d) are promoted, each as soon as it is in the top part (ties
 *     favour earlier trials); the others wait, checkpointed, and are closed
 *     once every trial of the bracket has reported the first rung and no
 *     trial is still due at the rungs below;
 *   - stop_once true (early stopping): a trial goes on to the next rung
 *     when it ranks in the top max(int(k/d), 1) of the k results its rung
 *     has so far, itself included (ties favour it), else it is closed.
 * A trial that exits early (it failed) counts as the worst result at its
 * rung and is never trained again. A new trial is created whenever a
 * report moves no trial on, until the bracket has created its max_trials.
 * The metric is made "smaller is better" by negating it first. */
#ifndef CTRIAL_SEARCH_RUNGS_H
#define CTRIAL_SEARCH_RUNGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search/asha.h"

typedef enum {
    CT_SEARCH_CREATE, /* create trial `trial` (its id, from the shared counter) */
    CT_SEARCH_TRAIN,  /* train `trial` until `length` units in all, then validate and report */
    CT_SEARCH_CLOSE,  /* `trial` is done: it trains no more */
} cti_search_op_kind;

typedef struct {
    cti_search_op_kind kind;
    int64_t trial;
    int64_t length;
} cti_search_op;

/* A growing list of operations; the caller frees v. */
typedef struct {
    cti_search_op *v;
    size_t n, cap;
} cti_search_ops;

/* Appends {kind, trial, length} to out: 0 or CT_ENOMEM. */
int cti_search_ops_push(cti_search_ops *out, cti_search_op_kind kind, int64_t trial, int64_t length);

typedef struct cti_rungs cti_rungs;

/* The search of bracket b. Trial ids come from *next_id (shared by the
 * brackets of one search; it starts at 1). New search or NULL + CT_ENOMEM. */
cti_rungs *cti_rungs_new(const cti_asha_bracket *b, double divisor, bool stop_once, bool smaller_is_better,
                       int64_t *next_id);
void cti_rungs_free(cti_rungs *r);

/* The first operations: CREATE + TRAIN to the first rung for each of the
 * bracket's initial trials. 0 or CT_ENOMEM (every call below likewise). */
int cti_rungs_start(cti_rungs *r, cti_search_ops *out);
/* The trial of a CREATE exists (Determined's trialCreated). */
int cti_rungs_created(cti_rungs *r, int64_t trial);
/* The trial finished a TRAIN and reports the searcher metric. */
int cti_rungs_validated(cti_rungs *r, int64_t trial, double metric, cti_search_ops *out);
/* The trial failed (after its retries) or was stopped by the user. */
int cti_rungs_exited(cti_rungs *r, int64_t trial, cti_search_ops *out);
/* The trial of a CLOSE has finished. */
int cti_rungs_closed(cti_rungs *r, int64_t trial);
/* Trials created, and closed or exited, so far. */
int64_t cti_rungs_created_count(const cti_rungs *r);
int64_t cti_rungs_closed_count(const cti_rungs *r);

#endif
