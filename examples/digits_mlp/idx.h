/* idx.h — reads MNIST's IDX files (plain or .gz) into tensors. A stand-in
 * until ctrial's data layer (data.h) exists. */
#ifndef DIGITS_IDX_H
#define DIGITS_IDX_H

#include <ctrial/ctrial.h>

/* Reads `path` (an idx3/idx1 file of unsigned bytes) into a new uint8 tensor
 * shaped as the file's header says; NULL with ct_last_error() set on failure. */
ct_tensor *idx_load(const char *path);

#endif
