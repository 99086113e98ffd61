/* src/data/batch.h — what the loader needs from batch.c beyond data.h.
 * Internal to ctrial. */
#ifndef CTRIAL_DATA_BATCH_H
#define CTRIAL_DATA_BATCH_H

#include <stdint.h>

#include "ctrial/data.h"

/* ct_collate that also reports, on failure, which sample (0..n-1) was at
 * fault in *bad_sample (-1 when no single sample is: bad arguments, out of
 * memory). The loader turns that position into a dataset index. */
ct_value *ct_collate_where(ct_value *const *samples, int64_t n, int64_t *bad_sample);

#endif
