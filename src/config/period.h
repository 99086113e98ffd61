/* src/config/period.h — the rules of periods (trial.h's ct_period), written
 * once for the config and the loop. Internal to ctrial. */
#ifndef CTRIAL_CONFIG_PERIOD_H
#define CTRIAL_CONFIG_PERIOD_H

#include <stdbool.h>
#include <stdint.h>

#include "ctrial/trial.h"

/* The largest global batch size: a batch of more records than any machine
 * holds (2^40), refused before a loader sizes its index lists by it. */
#define CT_GLOBAL_BATCH_SIZE_MAX (INT64_C(1) << 40)
/* The largest experiment seed: Determined's are 0 to 2^31 - 1. */
#define CT_SEED_MAX INT64_C(2147483647)

/* Determined's records -> batches: a period in records becomes
 * Batch(max(records / global_batch_size, 1)); one in other units is left
 * alone. Returns false, leaving *p as it was, for records without a global
 * batch size (< 1): the caller says where the period came from. */
bool cti_period_in_batches(ct_period *p, int64_t global_batch_size);

/* Whether p fires after `n` batches (n = batch_idx + 1) when an epoch is
 * `epoch_len` batches: every p->n batches, at the end of every p->n-th
 * epoch, or at the scheduled points. Never for CT_NEVER, nor for epochs
 * while epoch_len is unknown (<= 0). */
bool cti_period_fires(const ct_period *p, int64_t n, int64_t epoch_len);

/* How many times p fires after batch counts in (from, to]: the n for which
 * cti_period_fires(p, n, epoch_len) holds, counted without visiting them.
 * 0 when to <= from. */
int64_t cti_period_count(const ct_period *p, int64_t from, int64_t to, int64_t epoch_len);

/* The caller's options `o` as this library's struct in *out: the fields a
 * program built against an older ctrial lacks take their defaults
 * (base/opts.h). CT_OK, or CT_EINVAL for a struct not made by
 * ct_fit_defaults() or made by a newer ctrial. */
int cti_fit_opts_take(const ct_fit_opts *o, ct_fit_opts *out);

#endif
