/* tests/pth/specimen.h — values that exercise every corner of PyTorch's file
 * format, shared by the C round-trip test and pth_tool (whose files Python
 * reads back). */
#ifndef CT_TEST_PTH_SPECIMEN_H
#define CT_TEST_PTH_SPECIMEN_H

#include <ctrial/ctrial.h>

/* A dict holding every value kind (None, bools, ints at every encoding
 * boundary, floats incl. -0.0/inf/nan, UTF-8 strings, tuples of 0..5 items,
 * deep nesting, int keys, lists and dicts past pickle's 1000-item batches)
 * and tensors: every dtype, views (transposed, strided, offset, expanded),
 * several tensors on one storage, empty and 0-dim tensors, requires_grad.
 * New value (NULL + error on failure). */
ct_value *pth_specimen(void);

/* A small dict (two tensors on one storage, an int, a string): for
 * byte-by-byte damage sweeps. New value. */
ct_value *pth_small(void);

#endif
