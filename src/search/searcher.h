/* src/search/searcher.h — Determined's searchers (single, random, grid,
 * adaptive_asha) as one object that hands out operations and takes back
 * results (searcher.c). Internal to ctrial: the experiment runner
 * (src/experiment) drives it, the config (src/config) fills its options.
 *
 *     cti_searcher *s = cti_searcher_new(&opts, space);
 *     cti_search_ops ops = {0};
 *     cti_searcher_start(s, &ops);
 *     // for each op, in order (a trial's ops in its order):
 *     //   CREATE t: cti_searcher_hparams(s, t), cti_searcher_trial_seed(s, t)
 *     //   TRAIN t L: train t to L units in all, validate, then
 *     //             cti_searcher_validated(s, t, metric, &ops)
 *     //             (or cti_searcher_exited(s, t, &ops) if it failed)
 *     //   CLOSE t: the trial is done: cti_searcher_closed(s, t, &ops)
 *     // until cti_searcher_done(s)
 *     free(ops.v);
 *     cti_searcher_free(s);
 *
 * The operations are Determined's before v0.38 (Create, ValidateAfter,
 * Close): random and grid emit CREATE, TRAIN to max_length and CLOSE for
 * each trial, max_concurrent_trials of them at first and one more each
 * time a trial closes; single is random with one trial; adaptive_asha runs
 * its brackets side by side (a tournament), each a cti_rungs.
 *
 * Each CREATE draws the trial's hyperparameters from the space, then 4
 * draws for Determined's request id and one for its trial seed, from one
 * MT19937 seeded with the experiment seed, in the order the CREATEs are
 * emitted: a search is reproducible from its seed and its results.
 *
 * At most CT_SEARCH_MAX_AT_ONCE trials are created at the start (all of a
 * search's when max_concurrent_trials is 0, as Determined creates them):
 * more is a CT_ECONFIG from cti_searcher_new, where Determined would hold
 * a grid of 10^12 points in memory before any trial trains. */
#ifndef CTRIAL_SEARCH_SEARCHER_H
#define CTRIAL_SEARCH_SEARCHER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "search/asha.h"
#include "search/rungs.h"
#include "search/space.h"

#define CT_SEARCH_MAX_AT_ONCE 100000
/* The longest max_length a search takes, in its unit (about 9.2e15): the
 * experiment log numbers each restart of a trial within its length
 * (length * 1000 + restart). A single trial (ct_fit) counts to 2^63 - 1. */
#define CT_SEARCH_MAX_LENGTH (INT64_MAX / 1000 - 1)

typedef enum {
    CT_SEARCHER_SINGLE = 0,
    CT_SEARCHER_RANDOM,
    CT_SEARCHER_GRID,
    CT_SEARCHER_ADAPTIVE_ASHA,
    CT_SEARCHER_ASYNC_HALVING, /* adaptive_asha's one bracket of num_rungs (Determined's async_halving) */
} cti_searcher_kind;

/* searcher: its keys, Determined's defaults in brackets. */
typedef struct {
    cti_searcher_kind kind;
    int64_t max_trials;            /* random, adaptive_asha: >= 1 (single: 1; grid: the grid's size) */
    int64_t max_concurrent_trials; /* (16); 0: no limit */
    int64_t max_length;            /* >= 1, in the length's own unit */
    bool smaller_is_better;        /* (true) */
    bool stop_once;                /* adaptive_asha, async_halving: early stopping instead of promotion
                                    * (false here; the config's default is true, as Determined's from 0.38) */
    double divisor;                /* adaptive_asha (4) */
    int max_rungs;                 /* adaptive_asha (5) */
    int num_rungs;                 /* async_halving: required, >= 1 */
    cti_asha_mode mode;             /* adaptive_asha (standard) */
    int bracket_rungs[CT_ASHA_MAX_BRACKETS];
    int n_bracket_rungs;           /* 0: brackets from mode */
    uint32_t seed;                 /* the experiment seed */
} cti_searcher_opts;

cti_searcher_opts cti_searcher_defaults(void);
/* Whether k runs rungs (adaptive_asha, async_halving). */
bool cti_searcher_kind_is_asha(cti_searcher_kind k);
/* "single", "random", "grid", "adaptive_asha", "async_halving". */
const char *cti_searcher_kind_name(cti_searcher_kind k);

typedef struct cti_searcher cti_searcher;

/* The searcher for o over `space` (borrowed: it must outlive the
 * searcher). New searcher, or NULL + CT_ECONFIG (an adaptive_asha plan
 * Determined's rules refuse; a grid of no point) or CT_ENOMEM. */
cti_searcher *cti_searcher_new(const cti_searcher_opts *o, const cti_hp_space *space);
void cti_searcher_free(cti_searcher *s);

/* The first operations. 0 or a negative code (CT_ENOMEM; CT_EINVAL for a
 * trial that is not the searcher's or in the wrong state) for each call
 * that appends operations. */
int cti_searcher_start(cti_searcher *s, cti_search_ops *out);
/* Trial `trial` finished a TRAIN and reports the searcher metric (a NaN is
 * taken as the worst result). */
int cti_searcher_validated(cti_searcher *s, int64_t trial, double metric, cti_search_ops *out);
/* The trial failed for good (after its restarts): it counts as the worst
 * result where it was, and trains no more; no CLOSE follows for it. */
int cti_searcher_exited(cti_searcher *s, int64_t trial, cti_search_ops *out);
/* The trial of a CLOSE is done. */
int cti_searcher_closed(cti_searcher *s, int64_t trial, cti_search_ops *out);

/* Every trial created so far is closed or exited, and none is left to
 * create: the search is over. */
bool cti_searcher_done(const cti_searcher *s);
/* Trials created so far; the total the search will create (random:
 * max_trials; grid: its points; adaptive_asha: the brackets' trials). */
int64_t cti_searcher_created(const cti_searcher *s);
int64_t cti_searcher_total(const cti_searcher *s);

/* A created trial's hyperparameters (borrowed: valid until the searcher is
 * freed), Determined's trial seed, its request id ("8-4-4-4-12" hex, a
 * UUIDv4 as Determined makes it) and its bracket (0 outside
 * adaptive_asha). NULL / 0 / -1 for a trial not created. */
const json_t *cti_searcher_hparams(const cti_searcher *s, int64_t trial);
uint32_t cti_searcher_trial_seed(const cti_searcher *s, int64_t trial);
const char *cti_searcher_request_id(const cti_searcher *s, int64_t trial);
int cti_searcher_bracket(const cti_searcher *s, int64_t trial);
/* The adaptive_asha plan (NULL for other searchers). Borrowed. */
const cti_asha_plan *cti_searcher_plan(const cti_searcher *s);

#endif
