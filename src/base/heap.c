/* src/base/heap.c — glibc's heap set up for training (heap.h).
 *
 * glibc's defaults suit programs that allocate a little at a time: it maps
 * every allocation over its mmap threshold (128 KiB, raised only as such
 * blocks are freed) on its own and unmaps it when freed, and it gives the
 * heap's free top back to the kernel once 128 KiB lie there. A training step
 * frees its activations and gradients and allocates them again the next
 * step, so each step faulted the same pages in afresh: 3,200 page faults a
 * step and a third of the time in the digits CNN at batch 128
 * (bench/compare/README.md). Keeping blocks up to 32 MiB on the heap and up
 * to 64 MiB free at its top (plus 16 MiB of slack when it grows) keeps those
 * pages; the cost is at most that much resident memory that was in use
 * anyway. mallopt has no getter to restore from, so it stays in place. */
#define _DEFAULT_SOURCE
#include "base/heap.h"

#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void cti_heap_tune_for_training(void) {
#ifdef __GLIBC__
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") || getenv("MALLOC_TOP_PAD_") ||
        (tunables && strstr(tunables, "glibc.malloc.")))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
#endif
}
