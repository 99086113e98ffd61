/* src/ckpt/pth_tensors.h — the switches of ct_pth_save and ct_pth_load
 * (ckpt.h) that the tests reach (tests/pth/pth_tool.c). Both run the pure-C
 * engine of src/pth/ with libtorch's tensors (pth_tensors.c). Internal to
 * ctrial. */
#ifndef CTRIAL_CKPT_PTH_TENSORS_H
#define CTRIAL_CKPT_PTH_TENSORS_H

#include <stdbool.h>
#include <stddef.h>

#include "ctrial/ckpt.h"
#include "pth/pth.h"

/* ct_pth_save with the zip64 switch of cti_pth_zw_open (pth/pth.h): every
 * entry's sizes and offsets in their zip64 form. */
int cti_pth_save_ex(const char *path, const ct_value *v, const ct_pth_save_params *p, ct_file_sum *sum,
                   bool force_zip64);
/* The table of libtorch's tensors that ct_pth_save and ct_pth_load run the
 * engine with (storages are uint8 CPU tensors, tensors views of them):
 * for other readers of PyTorch's files (src/pt2/). Borrowed, static. */
const cti_pth_tensors *cti_pth_libtorch_tensors(void);
/* ct_pth_load, with the large storages mapped from the file copy-on-write
 * (cti_pth_load_mapped_with, pth/pth.h): resuming and warm starts, which
 * copy what they load into the trial's tensors and so never hold a second
 * copy of the checkpoint in their own memory. */
int cti_pth_load_mapped(const char *path, ct_value **out);
/* ct_pth_load of an archive in memory; `name` names it in messages. */
int cti_pth_load_buffer(const void *data, size_t size, const char *name, ct_value **out);

#endif
