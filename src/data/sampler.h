/* src/data/sampler.h — what the loader reads of a sampler chain beyond
 * data.h. Internal to ctrial. */
#ifndef CTRIAL_DATA_SAMPLER_H
#define CTRIAL_DATA_SAMPLER_H

#include <stdint.h>

#include "ctrial/data.h"

/* The items the chain's skips drop before its first item (the counts of
 * every ct_sampler_skip in it, added), or -1 when it has none: a user's
 * chain built as Determined's user guide shows ends in
 * SkipBatchSampler(initial_batch), and the loader then starts there. */
int64_t cti_sampler_skip_count(const ct_sampler *s);

#endif
