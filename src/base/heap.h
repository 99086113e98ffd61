/* src/base/heap.h — glibc's heap set up for training: what ct_fit does by
 * default (ct_fit_opts.tune_malloc), and what bench/dist does to measure
 * the steps ct_fit would run. Internal to ctrial. */
#ifndef CTRIAL_BASE_HEAP_H
#define CTRIAL_BASE_HEAP_H

/* Keeps freed blocks up to 32 MiB on the heap and up to 64 MiB free at its
 * top (plus 16 MiB of slack when it grows), unless the environment already
 * sets a malloc parameter (a MALLOC_*_ variable or a glibc.malloc tunable:
 * the user's own choice wins). Process-wide; a no-op outside glibc. */
void cti_heap_tune_for_training(void);

#endif
