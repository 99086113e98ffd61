/* src/metrics/per_batch.h — a workload's per-batch training metrics
 * averaged across ranks, for on_training_workload_end. Internal to ctrial.
 *
 * Determined hands every rank's callbacks the per-batch metrics averaged
 * over the ranks (average_training_metrics): batch i's value of a metric
 * is the mean of the ranks' batch-i values, element-wise for arrays, with
 * ranks that did not report it (None) left out. Every rank trains the same
 * number of batches per workload. */
#ifndef CTRIAL_METRICS_PER_BATCH_H
#define CTRIAL_METRICS_PER_BATCH_H

#include "ctrial/value.h"

/* `batches`: this rank's list of per-batch dicts. Returns a NEW list of
 * dicts, the same on every rank (a float per scalar metric, a list of
 * floats per array metric), or NULL + error on every rank. Collective. */
ct_value *cti_metrics_batches_across_ranks(const ct_value *batches);

#endif
