/* src/fit/outcome.h — ct_fit for a caller that goes on from what the run
 * ended with: the experiment runner (src/experiment) feeds each trial's
 * last validation to its searcher. Internal to ctrial. */
#ifndef CTRIAL_FIT_OUTCOME_H
#define CTRIAL_FIT_OUTCOME_H

#include <stdint.h>

#include "ctrial/trial.h"

typedef struct {
    int64_t batches_trained;    /* where training ended (0 when it never started) */
    ct_value *last_validation;  /* NEW: this run's last validation metrics, the same on every rank
                                 * (NULL: none in this run; the caller frees it) */
    int64_t last_validation_bt; /* the batches trained at that validation (-1: none) */
} cti_fit_outcome;

/* ct_fit(trial, o), and, when out is not NULL, what it ended with, filled
 * whether or not it succeeded (a failure after some training still says
 * where it was). ct_fit_stop_signal() tells a preempted run. */
int cti_fit_ex(const ct_trial *trial, const ct_fit_opts *o, cti_fit_outcome *out);

#endif
