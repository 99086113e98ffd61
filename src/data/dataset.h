/* src/data/dataset.h — helpers shared by the built-in datasets
 * (dataset.c, idx.c, csv.c, records.c). Internal to ctrial. */
#ifndef CTRIAL_DATA_DATASET_H
#define CTRIAL_DATA_DATASET_H

#include <stdbool.h>
#include <stddef.h>

#include "ctrial/data.h"

/* A tuple of the n tensors (a plain tensor value when n == 1). Steals every
 * tensor, also on failure and also when some of them are NULL (a failed op:
 * its error is kept). New value or NULL + error. */
ct_value *cti_ds_pack(int n, ct_tensor **ts);

/* A TensorDataset over n tensors that it takes (they are freed on failure
 * too). copy_samples: get() returns copies instead of views into the
 * tensors, for datasets whose tensors the user never saw (MNIST, CSV) and
 * whose samples should behave like freshly read ones. New dataset. */
ct_dataset *cti_ds_tensors_take(int n, ct_tensor **ts, bool copy_samples, const char *what);

/* Built-in datasets whose samples depend on a per-record seed (a map) or
 * that pass seeds on to the datasets they read (Subset, ConcatDataset):
 * the seed of record i is ct_record_seed(loader seed, epoch, i) for the
 * index i the loader asked for. Datasets without these ignore seeds. */
typedef struct {
    ct_value *(*get)(void *self, int64_t index, uint64_t seed);
    /* may be NULL: seeded get + collate */
    ct_value *(*get_batch)(void *self, const int64_t *indices, const uint64_t *seeds, int64_t n);
} cti_ds_seeded;

/* ct_dataset_new with seeded functions (vt->get may be NULL: the seeded get
 * serves plain gets with seed ct_record_seed(0, 0, index)). New dataset. */
ct_dataset *cti_ds_new_seeded(const ct_dataset_vtable *vt, const cti_ds_seeded *sv, void *self);
/* ct_dataset_get / get_batch with each record's seed (seeds NULL: epoch 0,
 * seed 0). Index checks and errors as theirs. NEW value or NULL + error. */
ct_value *cti_ds_get(ct_dataset *d, int64_t index, uint64_t seed);
ct_value *cti_ds_get_batch(ct_dataset *d, const int64_t *indices, const uint64_t *seeds, int64_t n);

/* d's `self` when d was made by ct_dataset_new with a vtable whose get is
 * `get` (how a built-in dataset recognises its own kind), else NULL. */
void *cti_ds_self_if(const ct_dataset *d, ct_value *(*get)(void *self, int64_t index));

#endif
