/* src/data/batch.h — what the loader needs from batch.c beyond data.h.
 * Internal to ctrial. */
#ifndef CTRIAL_DATA_BATCH_H
#define CTRIAL_DATA_BATCH_H

#include <stdint.h>

#include "ctrial/data.h"

/* ct_collate that also reports, on failure, which sample (0..n-1) was at
 * fault in *bad_sample (-1 when no single sample is: bad arguments, out of
 * memory). The loader turns that position into a dataset index. */
ct_value *cti_collate_where(ct_value *const *samples, int64_t n, int64_t *bad_sample);

/* A NEW copy of the tree whose tensor leaves are fn(leaf, ctx) (a NEW
 * tensor, or NULL + error) and whose other nodes are copied; the structure,
 * kinds and keys are kept. NULL + error when fn or a copy fails (nothing
 * leaks: it runs inside a scope of its own). The loader pins and moves
 * batches with it; ct_value_to_device is it over ct_to_device. */
typedef ct_tensor *(*cti_batch_leaf_fn)(const ct_tensor *t, void *ctx);
ct_value *cti_batch_map_tensors(const ct_value *v, cti_batch_leaf_fn fn, void *ctx);

#endif
