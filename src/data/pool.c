/* src/data/pool.c — batch memory used again (pool.h).
 *
 * Each block is one allocation: a header, then the tensor's bytes at
 * HEADER (64-byte aligned, as libtorch aligns its own). The tensor's
 * deleter finds the header in front of its data and gives the block back
 * to the pool, or frees it when the pool keeps enough or its owner has
 * let go. `refs` counts the owner and every block out, so the pool dies
 * with the last of them, on whichever thread that is. */
#define _POSIX_C_SOURCE 200809L

#include "data/pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define HEADER 64

typedef struct block {
    struct block *next;
    size_t bytes; /* the tensor's room, after the header */
} block;

struct cti_buf_pool {
    pthread_mutex_t lock;
    block *kept;
    int n_kept, keep;
    int64_t refs;
};

static void *data_of(block *b) { return (char *)b + HEADER; }
static block *block_of(void *data) { return (block *)(void *)((char *)data - HEADER); }

cti_buf_pool *cti_buf_pool_new(int keep, const char *fn) {
    cti_buf_pool *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
        return NULL;
    }
    p->keep = keep;
    p->refs = 1;
    return p;
}

static void free_blocks(block *b) {
    for (block *next; b; b = next) {
        next = b->next;
        free(b);
    }
}

static void pool_destroy(cti_buf_pool *p) {
    free_blocks(p->kept);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* One reference fewer (the lock held); destroys the pool at the last. */
static void unref_locked(cti_buf_pool *p) {
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (last) pool_destroy(p);
}

/* The deleter of every tensor from the pool: the block goes to the front
 * of the kept list, and the least recently returned one goes when there
 * are more than `keep`. */
static void give_back(void *data, void *ctx) {
    cti_buf_pool *p = ctx;
    block *b = block_of(data), *drop = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->keep > 0) {
        b->next = p->kept;
        p->kept = b;
        if (++p->n_kept > p->keep) {
            block **last = &p->kept;
            while ((*last)->next) last = &(*last)->next;
            drop = *last;
            *last = NULL;
            p->n_kept--;
        }
    } else {
        drop = b;
    }
    unref_locked(p);
    free(drop);
}

/* A new block's room: bytes rounded up to an eighth of its power of two,
 * so that nearby sizes (decoded crops) share blocks. */
static size_t room_for(size_t bytes) {
    size_t step = 1;
    while (step <= bytes / 16) step <<= 1; /* bytes / 16 < step <= bytes / 8 */
    return (bytes + step - 1) / step * step;
}

ct_tensor *cti_buf_pool_empty(cti_buf_pool *p, int ndim, const int64_t *shape, ct_dtype dtype) {
    size_t bytes = ct_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) bytes *= (size_t)shape[i];
    pthread_mutex_lock(&p->lock);
    block **at = &p->kept, **best = NULL; /* the smallest kept block that fits */
    for (; *at; at = &(*at)->next)
        if ((*at)->bytes >= bytes && (*at)->bytes / 2 <= bytes && (!best || (*at)->bytes < (*best)->bytes)) best = at;
    block *b = NULL;
    if (best) {
        b = *best;
        *best = b->next;
        p->n_kept--;
    }
    p->refs++;
    pthread_mutex_unlock(&p->lock);
    if (!b) {
        void *mem = NULL;
        size_t room = room_for(bytes ? bytes : 1);
        if (posix_memalign(&mem, HEADER, HEADER + room) != 0) {
            pthread_mutex_lock(&p->lock);
            unref_locked(p);
            ct_set_error(CT_ENOMEM, "out of host memory for a batch of %zu bytes", bytes);
            return NULL;
        }
        b = mem;
        b->bytes = room;
    }
    ct_tensor *t = ct_from_blob(data_of(b), ndim, shape, dtype, give_back, p);
    if (!t) give_back(data_of(b), p); /* the deleter was not called: give it back ourselves */
    return t;
}

void cti_buf_pool_release(cti_buf_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    block *kept = p->kept;
    p->kept = NULL;
    p->n_kept = 0;
    p->keep = 0;
    unref_locked(p);
    free_blocks(kept);
}

/* ---- this thread's pool ----------------------------------------------------- */

static _Thread_local cti_buf_pool *current;

void cti_buf_pool_use(cti_buf_pool *p) { current = p; }

cti_buf_pool *cti_buf_pool_current(void) { return current; }

ct_tensor *cti_buf_empty(int ndim, const int64_t *shape, ct_dtype dtype) {
    return current ? cti_buf_pool_empty(current, ndim, shape, dtype)
                   : ct_empty(ndim, shape, &(ct_topts){.dtype = dtype});
}
