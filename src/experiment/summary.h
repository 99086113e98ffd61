/* src/experiment/summary.h — the end of a search: the summary table, the
 * best trial and its checkpoint, the last event (summary.c). Internal to
 * ctrial. */
#ifndef CTRIAL_EXPERIMENT_SUMMARY_H
#define CTRIAL_EXPERIMENT_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "config/experiment.h"
#include "experiment/events.h"
#include "search/searcher.h"

typedef enum {
    CT_EXP_NONE = 0, /* not created */
    CT_EXP_ACTIVE,
    CT_EXP_PAUSED,    /* validated at a rung, checkpointed, waiting to be promoted or stopped */
    CT_EXP_COMPLETED, /* trained to max_length */
    CT_EXP_STOPPED,   /* stopped early by the searcher */
    CT_EXP_ERRORED,   /* failed after its restarts */
} cti_exp_state;

const char *cti_exp_state_name(cti_exp_state s);

/* What the search knows of one trial. */
typedef struct {
    int64_t length;     /* trained to, in max_length's unit (0: not yet) */
    int64_t batches;    /* batches trained */
    int restarts;       /* spent at the current TRAIN */
    bool has_best;
    double best;        /* the best searcher metric of its validations */
    cti_exp_state state;
    int code;           /* errored: the failure's CT_E* code */
    char error[512];
} cti_exp_trial;

/* "k=v k=v": the hyperparameters of `point` that the searcher chose (their
 * spec in `spec` samples; nested ones as group.name), or all of them when
 * none was chosen. */
void cti_exp_describe_hparams(const json_t *spec, const json_t *point, char *buf, size_t len);

/* "batches", "epochs", "records". */
const char *cti_exp_unit_name(ct_unit u);

/* Ends a search that ran to its end: prints the summary table (trial,
 * hyperparameters, best metric, batches, state) unless quiet, finds the
 * best trial and its best checkpoint, writes the experiment_completed
 * event. trials[1..n_trials) by id. 0, or CT_ETRIAL when every trial
 * errored, or the log's error. */
int cti_exp_finish(cti_exp_log *log, const cti_searcher *s, const cti_config *c, const char *dir,
                  const cti_exp_trial *trials, int64_t n_trials);

/* TensorBoard's HParams dashboard (hparams_tb.c): the experiment (the
 * hyperparameters of `first_point` with the domains their specs give, and
 * the metric tags validation/<metric> and training/loss) in the search's
 * folder; a trial's session start (its values) or end (success, or failure
 * when it errored) in its own folder, each in an event file of its own.
 * 0 or the writer's error. */
int cti_exp_tb_experiment(const char *dir, const json_t *spec, const json_t *first_point, const char *metric);
int cti_exp_tb_session(const char *trial_dir, const json_t *point, bool start, cti_exp_state state);

#endif
