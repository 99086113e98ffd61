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
ct_value *ct_ds_pack(int n, ct_tensor **ts);

/* A TensorDataset over n tensors that it takes (they are freed on failure
 * too). copy_samples: get() returns copies instead of views into the
 * tensors, for datasets whose tensors the user never saw (MNIST, CSV) and
 * whose samples should behave like freshly read ones. New dataset. */
ct_dataset *ct_ds_tensors_take(int n, ct_tensor **ts, bool copy_samples, const char *what);

#endif
