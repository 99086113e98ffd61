/* src/experiment/experiment.h — a hyperparameter search in one program:
 * Determined's searchers (src/search) driving ct_fit trial after trial, an
 * experiment folder, and the search's resume (run.c). Internal to ctrial;
 * ct_main calls it when the config's searcher is random, grid or
 * adaptive_asha.
 *
 *     <output>/experiment.jsonl        every trial created, validated, paused,
 *                                      promoted, stopped, completed, errored
 *     <output>/trials/<id>/            each trial's ct_fit output: metrics.jsonl,
 *                                      TensorBoard events, checkpoints/
 *     <output>/events.out.tfevents.*   the HParams dashboard's experiment
 *
 * A TRAIN to a rung is one ct_fit of the trial to that length, resumed from
 * the trial's latest checkpoint: ct_fit validates and checkpoints at the
 * end of every length, so a paused trial that is promoted later goes on
 * exactly as if it had never stopped. */
#ifndef CTRIAL_EXPERIMENT_EXPERIMENT_H
#define CTRIAL_EXPERIMENT_EXPERIMENT_H

#include "config/experiment.h"
#include "ctrial/trial.h"

/* Runs the search c describes (cti_config_is_search(c), after
 * cti_config_finish) in c->fit.output_dir; c->fit.resume "latest" goes on
 * with the search found there. Returns 0 when the search ended (some
 * trials may have errored: experiment.jsonl says which) or stopped on a
 * signal after checkpointing; CT_ETRIAL when every trial failed; another
 * negative code for a failure of the search itself (its folder, its log). */
int cti_experiment_run(const ct_trial *trial, const cti_config *c);

#endif
