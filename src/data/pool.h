/* src/data/pool.h — host memory for a loader's batches and the images it
 * decodes, used again once they are freed (pool.c). Internal to ctrial.
 *
 * A loader's default collate stacks its samples into a new batch tensor per
 * batch, and an image pipeline makes a decoded image and a float image per
 * record. Fresh memory of those sizes (an ImageNet batch of 64 is 38.5 MB,
 * a 224 x 224 float image 602 KB) is mapped by malloc or taken from the
 * top of its heap, faulted in page by page as it is written, and given
 * back to the system when freed: with a fresh buffer per batch, a sixth of
 * an image loader's time went there (bench/loader/README.md). A pool
 * keeps the memory of freed tensors and hands it to the next one of about
 * the same size. A tensor owns its block like any tensor its storage: the
 * block comes back only when the last reference to the storage dies, so
 * nothing the user holds is ever written.
 *
 * The loader sets its pool as its threads' current pool around each batch
 * it loads (cti_buf_pool_use); the code that makes those tensors (collate,
 * the image decoder, ToTensor) asks cti_buf_empty, which takes from the
 * current pool and is ct_empty anywhere else. */
#ifndef CTRIAL_DATA_POOL_H
#define CTRIAL_DATA_POOL_H

#include <stdint.h>

#include "ctrial/tensor.h"

typedef struct cti_buf_pool cti_buf_pool;

/* A pool that keeps at most `keep` freed blocks (the least recently
 * returned go first). New pool or NULL + error "fn: out of host memory". */
cti_buf_pool *cti_buf_pool_new(int keep, const char *fn);
/* A NEW contiguous CPU tensor (uninitialised) whose memory comes from the
 * pool: a kept block of at least its bytes and at most twice them, else a
 * new block. NULL + error. Thread-safe. */
ct_tensor *cti_buf_pool_empty(cti_buf_pool *p, int ndim, const int64_t *shape, ct_dtype dtype);
/* Sets this thread's current pool (NULL: none); cti_buf_empty takes from it. */
void cti_buf_pool_use(cti_buf_pool *p);
cti_buf_pool *cti_buf_pool_current(void);
/* A NEW contiguous CPU tensor (uninitialised): from this thread's current
 * pool, or ct_empty when there is none. NULL + error. */
ct_tensor *cti_buf_empty(int ndim, const int64_t *shape, ct_dtype dtype);

/* The owner lets go: the kept blocks are freed, and the pool itself once
 * the last tensor from it dies (blocks still out are freed as they come
 * back). Accepts NULL. */
void cti_buf_pool_release(cti_buf_pool *p);

#endif
