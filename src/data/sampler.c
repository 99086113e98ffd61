/* src/data/sampler.c — composable samplers, Determined's chain piece by piece:
 * sequential / reproducible shuffle -> repeat -> shard -> batch -> skip.
 *
 * Every sampler is an iterator with one operation, next(out, cap), that
 * writes an item's indices and returns their count, or 0 at the end of a
 * pass. A wrapper owns the sampler it wraps and pulls items from it. */
#include <stdlib.h>
#include <string.h>

#include "ctrial/data.h"
#include "base/mt19937.h"
#include "data/sampler.h"

struct ct_sampler {
    int64_t (*next)(ct_sampler *s, int64_t *out, int64_t cap);
    /* Items per pass, as Python's len() of the same sampler: the source's
     * length, or what the wrapper makes of its inner's (never an error). */
    int64_t (*len)(const ct_sampler *s);
    void (*destroy)(ct_sampler *s); /* frees what the subtype holds, not s */
    int64_t max_item;
    ct_sampler *inner; /* the wrapped sampler, owned; NULL at the source */
};

static void *sampler_alloc(size_t size, const char *fn) {
    void *p = calloc(1, size);
    if (!p) ct_set_error(CT_ENOMEM, "%s: out of memory", fn);
    return p;
}

/* A wrapper is refused (and frees what it was given) when its inner sampler
 * is NULL: the failure that produced the NULL keeps its message. */
static bool inner_ok(ct_sampler *inner, const char *fn) {
    if (inner) return true;
    if (ct_last_code() == CT_OK) ct_set_error(CT_EINVAL, "%s: inner sampler is NULL", fn);
    return false;
}

/* ---- sequential ----------------------------------------------------------- */

typedef struct {
    ct_sampler base;
    int64_t n, pos;
} Sequential;

static int64_t sequential_next(ct_sampler *s, int64_t *out, int64_t cap) {
    Sequential *q = (Sequential *)s;
    if (q->pos >= q->n) {
        q->pos = 0;
        return 0;
    }
    out[0] = q->pos++;
    return 1;
}

static int64_t sequential_len(const ct_sampler *s) { return ((const Sequential *)s)->n; }

ct_sampler *ct_sampler_sequential(int64_t n) {
    if (n < 0) {
        ct_set_error(CT_EINVAL, "ct_sampler_sequential: negative length %lld", (long long)n);
        return NULL;
    }
    Sequential *q = sampler_alloc(sizeof *q, __func__);
    if (!q) return NULL;
    q->base.next = sequential_next;
    q->base.len = sequential_len;
    q->base.max_item = 1;
    q->n = n;
    return &q->base;
}

/* ---- reproducible shuffle ------------------------------------------------- */

/* Determined's ReproducibleShuffleSampler: one RandomState(seed) for the
 * sampler's life; every pass shuffles a fresh arange(n) with it. */
typedef struct {
    ct_sampler base;
    int64_t n, pos;
    bool in_pass;
    int64_t *perm;
    cti_mt19937 rng;
} Shuffle;

static int64_t shuffle_next(ct_sampler *s, int64_t *out, int64_t cap) {
    Shuffle *q = (Shuffle *)s;
    if (!q->in_pass) {
        for (int64_t i = 0; i < q->n; i++) q->perm[i] = i;
        cti_mt19937_shuffle(&q->rng, q->perm, q->n);
        q->pos = 0;
        q->in_pass = true;
    }
    if (q->pos >= q->n) {
        q->in_pass = false;
        return 0;
    }
    out[0] = q->perm[q->pos++];
    return 1;
}

static void shuffle_destroy(ct_sampler *s) { free(((Shuffle *)s)->perm); }

static int64_t shuffle_len(const ct_sampler *s) { return ((const Shuffle *)s)->n; }

ct_sampler *ct_sampler_shuffle(int64_t n, uint64_t seed) {
    if (n < 0) {
        ct_set_error(CT_EINVAL, "ct_sampler_shuffle: negative length %lld", (long long)n);
        return NULL;
    }
    if (seed > 0xffffffffULL) {
        /* numpy: "Seed must be between 0 and 2**32 - 1" */
        ct_set_error(CT_EINVAL, "ct_sampler_shuffle: seed %llu must be between 0 and 2**32 - 1",
                     (unsigned long long)seed);
        return NULL;
    }
    Shuffle *q = sampler_alloc(sizeof *q, __func__);
    if (!q) return NULL;
    q->perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *q->perm);
    if (!q->perm) {
        free(q);
        ct_set_error(CT_ENOMEM, "ct_sampler_shuffle: out of memory for %lld indices", (long long)n);
        return NULL;
    }
    q->base.next = shuffle_next;
    q->base.len = shuffle_len;
    q->base.destroy = shuffle_destroy;
    q->base.max_item = 1;
    q->n = n;
    cti_mt19937_seed(&q->rng, (uint32_t)seed);
    return &q->base;
}

/* ---- repeat ---------------------------------------------------------------- */

static int64_t repeat_next(ct_sampler *s, int64_t *out, int64_t cap) {
    int64_t r = s->inner->next(s->inner, out, cap);
    if (r == 0) r = s->inner->next(s->inner, out, cap); /* the next pass */
    if (r == 0) return ct_set_error(CT_EINVAL, "ct_sampler_repeat: the inner sampler has an empty pass");
    return r;
}

/* Determined's RepeatSampler / RepeatBatchSampler: len() is one pass's. */
static int64_t inner_len(const ct_sampler *s) { return s->inner->len(s->inner); }

ct_sampler *ct_sampler_repeat(ct_sampler *inner) {
    if (!inner_ok(inner, __func__)) return NULL;
    ct_sampler *s = sampler_alloc(sizeof *s, __func__);
    if (!s) {
        ct_sampler_free(inner);
        return NULL;
    }
    s->next = repeat_next;
    s->len = inner_len;
    s->max_item = inner->max_item;
    s->inner = inner;
    return s;
}

/* ---- shard ----------------------------------------------------------------- */

/* itertools.islice(inner_pass, rank, None, world_size), restarted each pass. */
typedef struct {
    ct_sampler base;
    int rank, world_size;
    int64_t k; /* items seen in this pass */
} Shard;

static int64_t shard_next(ct_sampler *s, int64_t *out, int64_t cap) {
    Shard *q = (Shard *)s;
    for (;;) {
        int64_t r = s->inner->next(s->inner, out, cap);
        if (r <= 0) {
            q->k = 0;
            return r;
        }
        if (q->k++ % q->world_size == q->rank) return r;
    }
}

/* Determined's DistributedSampler.__len__: L/n + (L%n > rank). */
static int64_t shard_len(const ct_sampler *s) {
    const Shard *q = (const Shard *)s;
    int64_t l = s->inner->len(s->inner);
    return l / q->world_size + (l % q->world_size > q->rank);
}

ct_sampler *ct_sampler_shard(ct_sampler *inner, int rank, int world_size) {
    if (!inner_ok(inner, __func__)) return NULL;
    if (world_size < 1 || rank < 0 || rank >= world_size) {
        ct_sampler_free(inner);
        ct_set_error(CT_EINVAL, "ct_sampler_shard: rank %d is not in [0, %d)", rank, world_size);
        return NULL;
    }
    Shard *q = sampler_alloc(sizeof *q, __func__);
    if (!q) {
        ct_sampler_free(inner);
        return NULL;
    }
    q->base.next = shard_next;
    q->base.len = shard_len;
    q->base.max_item = inner->max_item;
    q->base.inner = inner;
    q->rank = rank;
    q->world_size = world_size;
    return &q->base;
}

/* ---- batch ----------------------------------------------------------------- */

/* torch's BatchSampler over the inner stream: runs of batch_size items; at
 * the end of an inner pass, a short run is yielded (or dropped), and the
 * following call reports the end of the pass. */
typedef struct {
    ct_sampler base;
    int64_t batch_size;
    bool drop_last;
    bool end_pending; /* a short batch was yielded; the pass ended */
} Batch;

static int64_t batch_next(ct_sampler *s, int64_t *out, int64_t cap) {
    Batch *q = (Batch *)s;
    if (q->end_pending) {
        q->end_pending = false;
        return 0;
    }
    int64_t count = 0;
    for (int64_t items = 0; items < q->batch_size; items++) {
        int64_t r = s->inner->next(s->inner, out + count, cap - count);
        if (r < 0) return r;
        if (r == 0) {
            if (count == 0 || q->drop_last) return 0;
            q->end_pending = true;
            return count;
        }
        count += r;
    }
    return count;
}

/* torch's BatchSampler.__len__. */
static int64_t batch_len(const ct_sampler *s) {
    const Batch *q = (const Batch *)s;
    int64_t l = s->inner->len(s->inner);
    return q->drop_last ? l / q->batch_size : l / q->batch_size + (l % q->batch_size != 0);
}

ct_sampler *ct_sampler_batch(ct_sampler *inner, int64_t batch_size, bool drop_last) {
    if (!inner_ok(inner, __func__)) return NULL;
    if (batch_size < 1) {
        ct_sampler_free(inner);
        ct_set_error(CT_EINVAL, "ct_sampler_batch: batch_size must be positive, got %lld", (long long)batch_size);
        return NULL;
    }
    /* An item holds batch_size of the inner's items: its index count must
     * be an int64_t. */
    if (inner->max_item > 0 && batch_size > INT64_MAX / inner->max_item) {
        ct_set_error(CT_EINVAL, "ct_sampler_batch: batch_size %lld of items of up to %lld indices is more indices "
                                "than an int64_t counts",
                     (long long)batch_size, (long long)inner->max_item);
        ct_sampler_free(inner);
        return NULL;
    }
    Batch *q = sampler_alloc(sizeof *q, __func__);
    if (!q) {
        ct_sampler_free(inner);
        return NULL;
    }
    q->base.next = batch_next;
    q->base.len = batch_len;
    q->base.max_item = batch_size * inner->max_item;
    q->base.inner = inner;
    q->batch_size = batch_size;
    q->drop_last = drop_last;
    return &q->base;
}

/* ---- skip ------------------------------------------------------------------ */

/* Drops the first `count` items of the stream, then passes everything
 * through. Pass ends met while skipping are skipped too; two in a row mean
 * the inner passes are empty, and that ends the pass here. */
typedef struct {
    ct_sampler base;
    int64_t count, skipped;
} Skip;

static int64_t skip_next(ct_sampler *s, int64_t *out, int64_t cap) {
    Skip *q = (Skip *)s;
    bool last_was_end = false;
    while (q->skipped < q->count) {
        int64_t r = s->inner->next(s->inner, out, cap);
        if (r < 0) return r;
        if (r == 0) {
            if (last_was_end) return 0;
            last_was_end = true;
            continue;
        }
        last_was_end = false;
        q->skipped++;
    }
    return s->inner->next(s->inner, out, cap);
}

ct_sampler *ct_sampler_skip(ct_sampler *inner, int64_t count) {
    if (!inner_ok(inner, __func__)) return NULL;
    if (count < 0) {
        ct_sampler_free(inner);
        ct_set_error(CT_EINVAL, "ct_sampler_skip: negative count %lld", (long long)count);
        return NULL;
    }
    Skip *q = sampler_alloc(sizeof *q, __func__);
    if (!q) {
        ct_sampler_free(inner);
        return NULL;
    }
    q->base.next = skip_next;
    q->base.len = inner_len; /* SkipBatchSampler.__len__: a position moved, not a pass shortened */
    q->base.max_item = inner->max_item;
    q->base.inner = inner;
    q->count = count;
    return &q->base;
}

int64_t cti_sampler_skip_count(const ct_sampler *s) {
    int64_t total = -1;
    for (; s; s = s->inner)
        if (s->next == skip_next) total = (total < 0 ? 0 : total) + ((const Skip *)s)->count;
    return total;
}

/* ---- common ---------------------------------------------------------------- */

int64_t ct_sampler_next(ct_sampler *s, int64_t *out, int64_t cap) {
    if (!s || !out) return ct_set_error(CT_EINVAL, "ct_sampler_next: %s is NULL", s ? "out" : "sampler");
    if (cap < s->max_item)
        return ct_set_error(CT_EINVAL, "ct_sampler_next: room for %lld indices, an item may hold %lld",
                            (long long)cap, (long long)s->max_item);
    return s->next(s, out, cap);
}

int64_t ct_sampler_max_item(const ct_sampler *s) { return s ? s->max_item : 0; }

int64_t ct_sampler_len(const ct_sampler *s) {
    if (!s) return ct_set_error(CT_EINVAL, "ct_sampler_len: sampler is NULL");
    return s->len(s);
}

void ct_sampler_free(ct_sampler *s) {
    while (s) {
        ct_sampler *inner = s->inner;
        if (s->destroy) s->destroy(s);
        free(s);
        s = inner;
    }
}
