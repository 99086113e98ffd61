/* src/fit/snapshot.c — a checkpoint's state copied into host memory of its
 * own (snapshot.h). */
#include "fit/snapshot.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ctrial/error.h"
#include "ctrial/tensor.h"
#include "data/batch.h" /* defines: cti_batch_map_tensors */

/* Below this many bytes in all, the caller copies alone. */
#define TWO_THREADS_FROM ((size_t)4 << 20)

/* One CPU tensor's bytes to copy. */
typedef struct {
    char *dst;
    const char *src;
    size_t bytes;
} copy_job;

typedef struct {
    copy_job *jobs;
    size_t n, cap;
    size_t total; /* bytes, every job's */
    bool (*share)(const ct_tensor *t); /* the caller's: t may be shared, not copied */
} copy_plan;

/* Bytes [from, to) of the jobs laid end to end. */
typedef struct {
    const copy_plan *plan;
    size_t from, to;
} copy_range;

static void *copy_bytes(void *arg) {
    const copy_range *r = arg;
    size_t at = 0; /* where job i starts */
    for (size_t i = 0; i < r->plan->n && at < r->to; at += r->plan->jobs[i++].bytes) {
        const copy_job *j = &r->plan->jobs[i];
        size_t lo = r->from > at ? r->from - at : 0, hi = r->to - at < j->bytes ? r->to - at : j->bytes;
        if (lo < hi) memcpy(j->dst + lo, j->src + lo, hi - lo);
    }
    return NULL;
}

/* A leaf's copy (cti_batch_map_tensors): an empty CPU tensor whose bytes
 * the plan copies later, or a finished copy. NEW, or NULL + error. */
static ct_tensor *leaf_copy(const ct_tensor *t, void *ctx) {
    copy_plan *p = ctx;
    if (ct_device_of(t).type != CT_CPU) return ct_to_device(t, ct_cpu(), false);
    if (p->share && p->share(t)) return ct_detach(t); /* the same bytes */
    if (!ct_is_contiguous(t)) return ct_clone(t);
    ct_tensor *d = ct_empty_like(t);
    if (!d) return NULL;
    size_t bytes = (size_t)ct_numel(t) * ct_dtype_size(ct_dtype_of(t));
    if (bytes == 0) return d;
    if (!ct_is_contiguous(d)) return ct_clone(t); /* (empty_like keeps a dense layout; never seen) */
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        copy_job *jobs = realloc(p->jobs, cap * sizeof *jobs);
        if (!jobs) {
            ct_set_error(CT_ENOMEM, "checkpoint snapshot: out of host memory");
            return NULL; /* d goes with the map's scope */
        }
        p->jobs = jobs;
        p->cap = cap;
    }
    p->jobs[p->n++] = (copy_job){ct_data_ptr(d), ct_data_ptr(t), bytes};
    p->total += bytes;
    return d;
}

ct_value *cti_snapshot(const ct_value *state, bool (*share)(const ct_tensor *t)) {
    copy_plan plan = {.share = share};
    ct_value *snap = cti_batch_map_tensors(state, leaf_copy, &plan);
    if (snap && plan.total > 0) {
        /* The second half of the bytes on a helper, the first here. */
        copy_range mine = {&plan, 0, plan.total / 2}, theirs = {&plan, plan.total / 2, plan.total};
        pthread_t helper;
        bool two = plan.total >= TWO_THREADS_FROM && pthread_create(&helper, NULL, copy_bytes, &theirs) == 0;
        if (!two) mine.to = plan.total;
        copy_bytes(&mine);
        if (two) pthread_join(helper, NULL);
    }
    free(plan.jobs);
    return snap;
}
