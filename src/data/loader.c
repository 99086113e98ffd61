/* src/data/loader.c — the threaded data loader (data.h).
 *
 * The pipeline:
 *
 *     caller thread: sampler chain -> index lists -> slots[seq % nslots]
 *     worker threads: take the next queued slot, fetch + collate (+ pin)
 *     ct_loader_next: waits for slots[position], hands the batch out in
 *                     sequence order, moves it to the device, refills
 *
 * Only the caller's thread touches the sampler (samplers have no lock), and
 * it draws in stream order, so the batch at sequence number k is the same
 * whatever the number of workers: workers only decide *when* a batch is
 * ready, never *which* batch it is. `position` is the sequence number of the
 * next batch to hand out; `issued - position` batches (at most nslots, the
 * prefetch depth) are queued, loading or done. Slots are a ring indexed by
 * sequence number, so the slot of the batch being issued is always free.
 *
 * Workers never wait for room: the caller issues no more work than there
 * are slots. They only wait for work, on a condition variable that the stop
 * flag also signals, so stopping (free, reset, set_position, an error) joins
 * every thread after at most one batch load each.
 *
 * Positions. In training ("repeat") mode the chain is the one Determined's
 * user guide gives for a loader of one's own: shuffle -> repeat -> shard ->
 * batch -> skip(position), and a saved position is restored by rebuilding
 * the chain with that skip. One-pass mode (validation) is shuffle -> shard
 * -> batch (-> skip): the stream is the concatenation of its passes, one per
 * ct_loader_reset, and a reset in the middle of a pass counts the rest of
 * that pass as passed, so that a position still names one point in one
 * stream. A repeating stream has no passes: ct_loader_reset keeps its
 * position. A user's sampler cannot be rebuilt: it can only be moved
 * forward, drawing and discarding, across its pass ends.
 *
 * An iterable dataset (ct_loader_iterable) has no indices, so none of the
 * above runs: no sampler, no slots, no workers. ct_loader_next reads its
 * records on the caller's thread, shards and batches them, and a position
 * is restored by replaying the iterator from its beginning.
 *
 * Tensors cross threads inside ct_values: a value owns its tensors outside
 * any scope, and scopes are per thread, so handing a value from a worker to
 * the caller moves ownership without touching anyone's scope.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/opts.h"
#include "base/clock.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/pool.h"
#include "data/sampler.h"
#include "ctrial/cuda.h"
#include "ctrial/data.h"

enum { MSG_LEN = 1024, MAX_WORKERS = 256 };

typedef enum { SLOT_FREE, SLOT_QUEUED, SLOT_LOADING, SLOT_DONE } slot_state;

/* One batch on its way, from its index list to its result. The state moves
 * FREE -> QUEUED (caller) -> LOADING -> DONE (worker) -> FREE (caller),
 * under the loader's mutex while workers run; indices and the result are
 * written by the one thread that owns the slot in that state. */
typedef struct {
    slot_state state;
    int64_t n;
    int64_t *indices;    /* max_item entries */
    uint64_t *seeds;     /* each record's seed (ct_record_seed), max_item entries */
    ct_value *batch;     /* DONE: the batch, or NULL when err */
    int err;             /* DONE: 0 or a CT_E* code */
    char msg[MSG_LEN];   /* the worker's message: errors are thread-local */
} slot;

struct ct_loader {
    ct_dataset *dataset;
    ct_loader_opts o;    /* a copy; o.sampler moved to `sampler` */
    bool user_chain;     /* the sampler is the user's: cannot be rebuilt */
    int64_t chain_skip;  /* the user chain's ct_sampler_skip count (its start), -1: none */
    bool pin;            /* pin_memory asked and CUDA is there */
    int64_t num_samples;
    int64_t len;         /* batches per pass of this rank; -1 unknown */
    ct_sampler *sampler; /* caller's thread only */
    int64_t max_item;
    int64_t *scratch;    /* max_item indices for draws that are thrown away */

    /* The stream. */
    int64_t position;    /* batches handed out or passed over, skip included */
    int64_t pass_start;  /* position where the current pass began (one-pass mode) */
    bool pass_done;      /* the sampler ended the current pass */
    bool draw_failed;    /* the sampler failed: no more draws */
    int draw_err;        /* its code and message, delivered after the */
    char draw_msg[MSG_LEN]; /* batches drawn before the failure */
    int failed;          /* the error that stopped the loader, or 0 */
    char failed_msg[MSG_LEN];
    double wait_s;

    /* The pipeline. */
    cti_buf_pool *pool;   /* batch memory used again (data/pool.h) */
    int nslots;
    slot *slots;
    int64_t issued;      /* sequence number of the next batch to draw */
    int64_t taken;       /* sequence number of the next batch a worker takes */
    pthread_mutex_t mu;
    pthread_cond_t work; /* workers: a slot was queued, or stop */
    pthread_cond_t done; /* caller: a slot is done */
    bool stop;
    int nthreads;        /* running workers */
    pthread_t *threads;

    /* An iterable dataset (ct_loader_iterable): no dataset, sampler, slots
     * or workers; records are read in ct_loader_next. pass_done, position
     * and pass_start keep their meaning. */
    bool iterable;
    ct_iterable_vtable it_vt;
    void *it_self;
    ct_value **recs;     /* batch_size records being gathered */
    int64_t *rec_no;     /* their numbers within their pass, for messages */
    int64_t it_seen;     /* records read that sharding counts: this pass's
                          * (one-pass mode) or the stream's (repeat) */
    int64_t it_in_pass;  /* records read in the current pass */
    int64_t it_pass;     /* passes begun since the last replay, minus one */
};

/* A message into a MSG_LEN buffer, cut short when it does not fit (the
 * start of a message says what failed; its tail is detail). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void set_msg(char *dst, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, MSG_LEN, fmt, ap);
    va_end(ap);
}

static slot *slot_of(ct_loader *l, int64_t seq) { return &l->slots[seq % l->nslots]; }

static bool repeating(const ct_loader *l) { return !l->user_chain && l->o.repeat; }

/* Internal hook (data/loader.h). */
bool cti_loader_is_iterable(const ct_loader *l) { return l && l->iterable; }

/* ---- options and the chain ------------------------------------------------ */

static ct_loader_opts loader_defaults(void) {
    ct_loader_opts o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.batch_size = 1;
    o.world_size = 1;
    o.device = ct_cpu();
    return o;
}

void ct_loader_opts_init(ct_loader_opts *o, size_t size) {
    ct_loader_opts d = loader_defaults();
    cti_opts_init(o, size, &d, sizeof d);
}

/* The caller's options (NULL: the defaults) as this library's struct
 * (base/opts.h): what an older program lacks keeps its default. */
static int take_opts(const ct_loader_opts *opts, ct_loader_opts *o, const char *fn) {
    ct_loader_opts d = loader_defaults();
    if (!opts) {
        *o = d;
        return CT_OK;
    }
    /* Version 1 ends at `sampler`; a later field goes past it. */
    _Static_assert(offsetof(ct_loader_opts, sampler) + sizeof(ct_sampler *) == sizeof(ct_loader_opts),
                   "ct_loader_opts grew: record its version 2 (docs/design.md, \"A stable ABI\")");
    int rc = cti_opts_take(o, opts, &d, sizeof d, offsetof(ct_loader_opts, batch_size) + sizeof(int64_t),
                          "ct_loader_opts", "ct_loader_defaults");
    if (rc != CT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct_set_error(rc, "%s: %s", fn, msg);
    }
    return CT_OK;
}

/* This rank's samples per pass: sharding gives rank r L/n + (L%n > r). */
static int64_t rank_share(const ct_loader_opts *o, int64_t num_samples) {
    return num_samples / o->world_size + (num_samples % o->world_size > o->rank);
}

/* len(DataLoader) on this rank (rounded up without share + batch_size - 1,
 * which overflows for a batch_size near INT64_MAX). */
static int64_t batches_per_pass(const ct_loader_opts *o, int64_t num_samples) {
    int64_t share = rank_share(o, num_samples);
    return share / o->batch_size + (!o->drop_last && share % o->batch_size != 0);
}

/* Determined's chain, positioned after `skip` batches. New sampler or NULL
 * + error (each wrapper frees what it wraps when it fails). */
static ct_sampler *build_chain(const ct_loader *l, int64_t skip) {
    const ct_loader_opts *o = &l->o;
    ct_sampler *s = o->shuffle ? ct_sampler_shuffle(l->num_samples, o->seed)
                               : ct_sampler_sequential(l->num_samples);
    if (o->repeat) s = ct_sampler_repeat(s);
    s = ct_sampler_shard(s, o->rank, o->world_size);
    s = ct_sampler_batch(s, o->batch_size, o->drop_last);
    if (skip > 0) s = ct_sampler_skip(s, skip);
    return s;
}

/* Where the pass holding `position` began, in one-pass mode. A position at
 * a pass boundary is the *end* of the earlier pass: an uninterrupted loader
 * there has served the whole pass and answers 0 before its reset. */
static int64_t pass_start_of(const ct_loader *l, int64_t position) {
    if (repeating(l) || l->user_chain || l->len <= 0) return position;
    if (position > 0 && position % l->len == 0) return position - l->len;
    return position - position % l->len;
}

/* Checks what can be checked before anything is allocated. */
static int check_opts(const ct_dataset *d, const ct_loader_opts *o, bool user_chain) {
    const char *fn = "ct_loader_new";
    /* A NULL from a failed dataset constructor keeps that failure's message. */
    if (!d) return ct_last_code() != CT_OK ? ct_last_code() : ct_set_error(CT_EINVAL, "%s: dataset is NULL", fn);
    int64_t n = ct_dataset_len(d);
    if (n < 0) return ct_last_code();
    if (n == 0) return ct_set_error(CT_EINVAL, "%s: the dataset is empty (0 samples)", fn);
    if (o->num_workers < 0 || o->num_workers > MAX_WORKERS)
        return ct_set_error(CT_EINVAL, "%s: num_workers %d is not in [0, %d]", fn, o->num_workers,
                            MAX_WORKERS);
    if (o->prefetch_batches < 0)
        return ct_set_error(CT_EINVAL, "%s: prefetch_batches %d is negative (0: two per worker)", fn,
                            o->prefetch_batches);
    if (o->device.type != CT_CPU && !ct_cuda_is_available()) {
        char dev[32];
        ct_device_format(o->device, dev, sizeof dev);
        return ct_set_error(CT_EDEVICE, "%s: device %s asked for, but CUDA is not available", fn, dev);
    }
    if (user_chain) return 0; /* the chain options are ignored */
    if (o->batch_size < 1)
        return ct_set_error(CT_EINVAL, "%s: batch_size %" PRId64 " must be >= 1", fn, o->batch_size);
    if (o->world_size < 1 || o->rank < 0 || o->rank >= o->world_size)
        return ct_set_error(CT_EINVAL, "%s: rank %d is not in [0, world_size %d)", fn, o->rank,
                            o->world_size);
    if (o->skip_batches < 0)
        return ct_set_error(CT_EINVAL, "%s: skip_batches %" PRId64 " is negative", fn, o->skip_batches);
    if (o->repeat && rank_share(o, n) == 0)
        return ct_set_error(CT_EINVAL,
                            "%s: rank %d of %d gets none of the dataset's %" PRId64
                            " samples: a repeating loader would never yield a batch",
                            fn, o->rank, o->world_size, n);
    return 0;
}

/* ---- loading one batch (worker threads) ------------------------------------ */

/* "448, 449, 450, ... (64 in all)" for messages. */
static void format_indices(char *buf, size_t len, const int64_t *idx, int64_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n && i < 4 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? ", %" PRId64 : "%" PRId64, idx[i]);
    if (n > 4 && at < len) snprintf(buf + at, len - at, ", ... (%" PRId64 " in all)", n);
}

/* The thread's last error as the slot's error; a NULL without an error (a
 * user callback that forgot ct_set_error) still becomes one. */
static int take_error(int *err) {
    *err = ct_last_code() != CT_OK ? ct_last_code() : CT_ETRIAL;
    return *err;
}

/* get() of every sample; on failure frees what it got and names the index. */
static ct_value **get_samples(ct_loader *l, const int64_t *idx, const uint64_t *seeds, int64_t n, int *err,
                              char *msg) {
    ct_value **samples = calloc((size_t)n, sizeof *samples);
    if (!samples) {
        *err = ct_set_error(CT_ENOMEM, "ct_loader: out of host memory");
        set_msg(msg, "%s", ct_last_error());
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        samples[k] = cti_ds_get(l->dataset, idx[k], seeds[k]);
        if (samples[k]) continue;
        take_error(err);
        set_msg(msg, "ct_loader: dataset index %" PRId64 ": %s", idx[k], ct_last_error());
        for (int64_t j = 0; j < k; j++) ct_value_free(samples[j]);
        free(samples);
        return NULL;
    }
    return samples;
}

static void free_samples(ct_value **samples, int64_t n) {
    for (int64_t k = 0; k < n; k++) ct_value_free(samples[k]);
    free(samples);
}

/* The batch came back NULL from ct_dataset_get_batch, whose message cannot
 * say which sample was at fault (a get, or the collate of a sample of the
 * wrong shape). Loading the samples one by one finds it; this costs a second
 * load, but only on the way to stopping. */
static void diagnose(ct_loader *l, const int64_t *idx, const uint64_t *seeds, int64_t n, int *err,
                     char *msg) {
    int first_err = take_error(err);
    char first_msg[MSG_LEN], list[160];
    set_msg(first_msg, "%s", ct_last_error());
    ct_value **samples = get_samples(l, idx, seeds, n, err, msg);
    if (!samples) return; /* err and msg name the index whose get failed */
    int64_t bad = -1;
    ct_value *b = cti_collate_where(samples, n, &bad);
    if (!b && bad >= 0) {
        take_error(err);
        set_msg(msg, "ct_loader: dataset index %" PRId64 ": %s", idx[bad], ct_last_error());
    } else {
        *err = first_err;
        format_indices(list, sizeof list, idx, n);
        set_msg(msg, "ct_loader: the batch of dataset indices %s: %s", list, first_msg);
    }
    ct_value_free(b);
    free_samples(samples, n);
}

/* A user collate over get() results. */
static ct_value *user_collate(ct_loader *l, const int64_t *idx, const uint64_t *seeds, int64_t n, int *err,
                              char *msg) {
    ct_value **samples = get_samples(l, idx, seeds, n, err, msg);
    if (!samples) return NULL;
    ct_clear_error();
    ct_value *b = l->o.collate(samples, n, l->o.collate_ctx);
    if (!b) {
        char list[160];
        format_indices(list, sizeof list, idx, n);
        take_error(err);
        set_msg(msg, "ct_loader: the collate function failed on dataset indices %s: %s", list,
                 ct_last_code() != CT_OK ? ct_last_error() : "it returned NULL without setting an error");
    }
    free_samples(samples, n);
    return b;
}

static ct_tensor *pin_leaf(const ct_tensor *t, void *ctx) {
    (void)ctx;
    return ct_device_of(t).type == CT_CPU ? ct_pin_memory(t) : ct_alias(t);
}

/* Pinned batches go to a GPU on a side stream the compute stream waits
 * for, so the copy runs beside the previous batch's kernels rather than
 * queued behind them; anything else is a plain (blocking) move. */
static ct_tensor *move_leaf(const ct_tensor *t, void *ctx) {
    const ct_loader *l = ctx;
    if (l->pin && l->o.device.type == CT_CUDA && ct_device_of(t).type == CT_CPU)
        return ct_cuda_copy_in(t, l->o.device.index);
    return ct_to_device(t, l->o.device, l->pin);
}

/* The batch at idx[0..n): NEW value, or NULL with *err and msg set. Runs on
 * a worker thread (the caller's with 0 workers); reads only the dataset and
 * the loader's options. */
static ct_value *load_batch(ct_loader *l, const int64_t *idx, const uint64_t *seeds, int64_t n, int *err,
                            char *msg) {
    ct_value *b;
    cti_buf_pool_use(l->pool);
    if (l->o.collate) {
        b = user_collate(l, idx, seeds, n, err, msg);
    } else {
        b = cti_ds_get_batch(l->dataset, idx, seeds, n);
        if (!b) diagnose(l, idx, seeds, n, err, msg);
    }
    cti_buf_pool_use(NULL);
    if (b && l->pin) {
        ct_value *pinned = cti_batch_map_tensors(b, pin_leaf, l);
        ct_value_free(b);
        b = pinned;
        if (!b) {
            take_error(err);
            set_msg(msg, "ct_loader: pinning a batch: %s", ct_last_error());
        }
    }
    return b;
}

static void run_slot(ct_loader *l, slot *s) {
    s->err = 0;
    s->msg[0] = '\0';
    s->batch = load_batch(l, s->indices, s->seeds, s->n, &s->err, s->msg);
}

/* Worker threads run libtorch's ops on one thread each, as torch's
 * DataLoader workers do (each calls torch.set_num_threads(1)): N workers
 * each with a full team of OpenMP threads would oversubscribe the cores, and
 * a batch's copies are too small to gain from a team. ATen takes the count
 * from OpenMP's per-thread setting, which it initialises on a thread's first
 * query (ct_get_num_threads here), so setting it afterwards on this thread
 * changes nothing for any other. omp_set_num_threads is looked up rather
 * than linked: it must be the OpenMP runtime libtorch loaded, and a libtorch
 * without OpenMP has none (then there is nothing to do). */
static void single_threaded_ops(void) {
    void *self = dlopen(NULL, RTLD_LAZY);
    if (!self) return;
    void (*set_num_threads)(int);
    *(void **)(&set_num_threads) = dlsym(self, "omp_set_num_threads");
    if (set_num_threads && ct_get_num_threads() > 1) set_num_threads(1);
    dlclose(self);
}

static void *worker_main(void *arg) {
    ct_loader *l = arg;
    single_threaded_ops();
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->taken >= l->issued) pthread_cond_wait(&l->work, &l->mu);
        if (l->stop) break;
        slot *s = slot_of(l, l->taken++);
        s->state = SLOT_LOADING;
        pthread_mutex_unlock(&l->mu);
        run_slot(l, s);
        pthread_mutex_lock(&l->mu);
        s->state = SLOT_DONE;
        pthread_cond_signal(&l->done); /* only the caller waits on it */
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- the pipeline (caller's thread) ----------------------------------------- */

/* Joins every worker. A worker that is loading finishes that batch first
 * (its result stays in its slot), so no slot is LOADING afterwards. */
static void stop_workers(ct_loader *l) {
    if (l->nthreads == 0) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
    l->nthreads = 0;
    l->stop = false;
}

static int start_workers(ct_loader *l) {
    for (int i = l->nthreads; i < l->o.num_workers; i++) {
        int rc = pthread_create(&l->threads[i], NULL, worker_main, l);
        if (rc != 0) {
            stop_workers(l);
            return ct_set_error(CT_ENOMEM, "ct_loader: cannot start worker %d of %d: %s", i,
                                l->o.num_workers, strerror(rc));
        }
        l->nthreads++;
    }
    return 0;
}

static void free_slot(slot *s) {
    ct_value_free(s->batch);
    s->batch = NULL;
    s->state = SLOT_FREE;
}

/* Frees every batch in flight. Workers must be stopped. */
static void drop_in_flight(ct_loader *l) {
    for (int64_t seq = l->position; seq < l->issued; seq++) free_slot(slot_of(l, seq));
    l->issued = l->taken = l->position;
}

/* Stops the loader for good: later calls answer CT_ESTATE with this message. */
static int fail(ct_loader *l, int code, const char *msg) {
    l->failed = code < 0 ? code : CT_ETRIAL;
    if (msg != l->failed_msg) set_msg(l->failed_msg, "%s", msg);
    stop_workers(l);
    drop_in_flight(l);
    return ct_set_error(l->failed, "%s", l->failed_msg);
}

static int stopped(const ct_loader *l, const char *fn) {
    return ct_set_error(CT_ESTATE, "%s: the loader stopped after an error (%s); free it", fn,
                        l->failed_msg);
}

/* The pass of the stream that record j of batch `seq` belongs to (data.h,
 * ct_loader_opts.seed). In training mode it is record k = s * W + rank of
 * all ranks' stream, s = seq * B + j this rank's, and k / n is computed as
 * (s / n) * W + ((s % n) * W + rank) / n so that it cannot overflow. */
static int64_t record_pass(const ct_loader *l, int64_t seq, int64_t j) {
    if (repeating(l)) {
        int64_t n = l->num_samples, w = l->o.world_size;
        int64_t s = seq * l->o.batch_size + j;
        return (s / n) * w + ((s % n) * w + l->o.rank) / n;
    }
    return l->len > 0 ? seq / l->len : 0;
}

/* Draws index lists into free slots until nslots batches are in flight or
 * the pass ends. A sampler failure is kept and reaches ct_loader_next in its
 * turn, after the batches drawn before it. */
static void fill(ct_loader *l) {
    if (l->iterable) return; /* read in ct_loader_next */
    while (!l->pass_done && !l->draw_failed && l->issued - l->position < l->nslots) {
        slot *s = slot_of(l, l->issued);
        int64_t n = ct_sampler_next(l->sampler, s->indices, l->max_item);
        if (n == 0) {
            l->pass_done = true;
        } else if (n < 0) {
            l->draw_failed = true;
            l->draw_err = (int)n;
            set_msg(l->draw_msg, "ct_loader: the sampler failed: %s", ct_last_error());
        } else {
            for (int64_t j = 0; j < n; j++)
                s->seeds[j] = ct_record_seed(l->o.seed, record_pass(l, l->issued, j), s->indices[j]);
            pthread_mutex_lock(&l->mu);
            s->n = n;
            s->state = SLOT_QUEUED;
            l->issued++;
            pthread_cond_signal(&l->work);
            pthread_mutex_unlock(&l->mu);
        }
    }
}

/* The kept sampler failure stops the loader once the stream reaches it. */
static int draw_failure(ct_loader *l) {
    char msg[MSG_LEN];
    set_msg(msg, "%s", l->draw_msg);
    return fail(l, l->draw_err, msg);
}

/* Waits for the batch at `position` and takes it out of its slot: *out is
 * the batch, or NULL when loading it failed (then *err and msg say why). */
static void take_next(ct_loader *l, ct_value **out, int *err, char *msg) {
    slot *s = slot_of(l, l->position);
    double t0 = cti_clock_monotonic();
    if (l->nthreads == 0) {
        if (s->state == SLOT_QUEUED) { /* no workers: load it here */
            run_slot(l, s);
            s->state = SLOT_DONE;
            l->taken++;
        }
    } else {
        pthread_mutex_lock(&l->mu);
        while (s->state != SLOT_DONE) pthread_cond_wait(&l->done, &l->mu);
        pthread_mutex_unlock(&l->mu);
    }
    l->wait_s += cti_clock_monotonic() - t0;
    pthread_mutex_lock(&l->mu);
    *out = s->batch;
    *err = s->err;
    set_msg(msg, "%s", s->msg);
    s->batch = NULL;
    s->state = SLOT_FREE;
    l->position++;
    pthread_mutex_unlock(&l->mu);
}

/* True when a tensor leaf is not on `dev`. */
static bool needs_move(const ct_value *v, ct_device dev) {
    ct_value_kind k = ct_value_kind_of(v);
    if (k == CT_VALUE_TENSOR) {
        ct_device d = ct_device_of(ct_value_get_tensor(v));
        return d.type != dev.type || (d.type == CT_CUDA && d.index != dev.index);
    }
    for (size_t i = 0; i < ct_value_len(v); i++) {
        const ct_value *c = k == CT_VALUE_DICT ? ct_value_dict_at(v, i, NULL, NULL) : ct_value_list_get(v, i);
        if (needs_move(c, dev)) return true;
    }
    return false;
}

/* ---- iterable datasets (caller's thread) ----------------------------------- */

static void destroy(ct_loader *l);

/* An iterable dataset has no indices: the stream is the iterator's records,
 * read here in order. Sharding counts records (it_seen); a batch is
 * batch_size records of this rank. In one-pass mode a pass ends where the
 * iterator's does; in repeat mode the iterator is reset at its end and the
 * stream goes on, so batches run across pass ends. Every failure of the
 * user's code stops the loader: its iterator is in an unknown state. */

/* The user's reset: a new pass of the iterator. */
static int it_rewind(ct_loader *l) {
    ct_clear_error();
    int rc = l->it_vt.reset(l->it_self);
    l->it_pass++;
    l->it_in_pass = 0;
    if (!repeating(l)) l->it_seen = 0;
    if (rc == 0) return 0;
    char msg[MSG_LEN];
    set_msg(msg, "ct_loader: the iterable dataset's reset failed (pass %" PRId64 "): %s", l->it_pass,
            ct_last_code() != CT_OK ? ct_last_error() : "it returned an error code without setting an error");
    return fail(l, rc < 0 ? rc : CT_ETRIAL, msg);
}

/* The next record of this rank: 1 with *rec (NEW; NULL rec: dropped), 0 at
 * the end of a one-pass pass, or a negative code (the loader failed). Its
 * number within its pass goes to *no. */
static int it_record(ct_loader *l, ct_value **rec, int64_t *no) {
    for (;;) {
        ct_clear_error();
        ct_value *r = l->it_vt.next(l->it_self);
        if (!r && ct_last_code() != CT_OK) {
            char msg[MSG_LEN];
            set_msg(msg, "ct_loader: the iterable dataset failed reading record %" PRId64 " of pass %" PRId64 ": %s",
                    l->it_in_pass, l->it_pass, ct_last_error());
            return fail(l, ct_last_code(), msg);
        }
        if (!r) { /* the end of the iterator's pass */
            if (!repeating(l)) {
                l->pass_done = true;
                return 0;
            }
            if (l->it_in_pass == 0) {
                char msg[MSG_LEN];
                set_msg(msg, "ct_loader: the iterable dataset's pass %" PRId64
                             " is empty: a repeating loader would never yield a batch", l->it_pass);
                return fail(l, CT_EINVAL, msg);
            }
            int rc = it_rewind(l);
            if (rc) return rc;
            continue;
        }
        int64_t k = l->it_seen++;
        *no = l->it_in_pass++;
        if (k % l->o.world_size != l->o.rank) {
            ct_value_free(r);
            continue;
        }
        if (rec) *rec = r;
        else ct_value_free(r);
        return 1;
    }
}

/* Gathers this rank's next batch of records into l->recs (keep) or drops
 * them (!keep). Returns their count, 0 at the end of a pass (a short batch
 * under drop_last is dropped; none is left), or a negative code. */
static int64_t it_gather(ct_loader *l, bool keep) {
    int64_t n = 0;
    while (n < l->o.batch_size) {
        int r = it_record(l, keep ? &l->recs[n] : NULL, &l->rec_no[n]);
        if (r < 0) {
            for (int64_t i = 0; i < n; i++) {
                ct_value_free(l->recs[i]);
                l->recs[i] = NULL;
            }
            return r;
        }
        if (r == 0) break;
        n++;
    }
    if (n < l->o.batch_size && (n == 0 || l->o.drop_last)) {
        for (int64_t i = 0; i < n; i++) {
            ct_value_free(l->recs[i]);
            l->recs[i] = NULL;
        }
        return 0;
    }
    return n;
}

/* Collates the n gathered records (and frees them): NEW batch, or NULL
 * with the loader failed and the message naming the record at fault. */
static ct_value *it_collate(ct_loader *l, int64_t n) {
    ct_value *b;
    int64_t bad = -1;
    ct_clear_error();
    if (l->o.collate) b = l->o.collate(l->recs, n, l->o.collate_ctx);
    else b = cti_collate_where(l->recs, n, &bad);
    char msg[MSG_LEN];
    int err = 0;
    if (!b) {
        take_error(&err);
        if (bad >= 0)
            set_msg(msg, "ct_loader: the iterable dataset's record %" PRId64 " of pass %" PRId64 ": %s",
                    l->rec_no[bad], l->it_pass, ct_last_error());
        else
            set_msg(msg, "ct_loader: the %s failed on the iterable dataset's batch %" PRId64 ": %s",
                    l->o.collate ? "collate function" : "collate", l->position,
                    ct_last_code() != CT_OK ? ct_last_error() : "it returned NULL without setting an error");
    }
    for (int64_t i = 0; i < n; i++) {
        ct_value_free(l->recs[i]);
        l->recs[i] = NULL;
    }
    if (!b) {
        fail(l, err, msg);
        return NULL;
    }
    if (l->pin) {
        ct_value *pinned = cti_batch_map_tensors(b, pin_leaf, l);
        ct_value_free(b);
        if (!pinned) {
            set_msg(msg, "ct_loader: pinning a batch: %s", ct_last_error());
            fail(l, ct_last_code(), msg);
        }
        b = pinned;
    }
    if (b && needs_move(b, l->o.device)) {
        ct_value *moved = cti_batch_map_tensors(b, move_leaf, l);
        ct_value_free(b);
        if (!moved) {
            set_msg(msg, "ct_loader_next: moving the batch to the device: %s", ct_last_error());
            fail(l, ct_last_code(), msg);
        }
        b = moved;
    }
    return b;
}

static int it_next(ct_loader *l, ct_value **batch) {
    if (l->pass_done) return 0; /* until ct_loader_reset */
    double t0 = cti_clock_monotonic();
    int64_t n = it_gather(l, true);
    ct_value *b = n > 0 ? it_collate(l, n) : NULL;
    l->wait_s += cti_clock_monotonic() - t0;
    if (n <= 0) return (int)n;
    if (!b) return l->failed;
    l->position++;
    *batch = b;
    return 1;
}

/* One-pass mode, the pass begun: the rest of it counts as passed (read,
 * dropped), then the iterator starts the next. */
static int it_reset(ct_loader *l) {
    while (!l->pass_done) {
        int64_t n = it_gather(l, false);
        if (n < 0) return (int)n;
        if (n > 0) l->position++;
    }
    int rc = it_rewind(l);
    if (rc) return rc;
    l->pass_done = false;
    l->pass_start = l->position;
    return 0;
}

/* Replays from the beginning to `target` batches: reset, then batches read
 * and dropped, with a reset at each pass end on the way. */
static int it_seek(ct_loader *l, int64_t target) {
    l->it_pass = -1;
    l->it_seen = 0;
    l->position = l->pass_start = 0;
    l->pass_done = false;
    int rc = it_rewind(l);
    while (rc == 0 && l->position < target) {
        if (l->pass_done) { /* an uninterrupted loader was reset here */
            if (l->position == l->pass_start) {
                char msg[MSG_LEN];
                set_msg(msg, "ct_loader_set_position(%" PRId64 "): pass %" PRId64
                             " of the iterable dataset gives this rank no batch: the position cannot be reached",
                        target, l->it_pass);
                return fail(l, CT_EINVAL, msg);
            }
            rc = it_rewind(l);
            l->pass_done = false;
            l->pass_start = l->position;
            continue;
        }
        int64_t n = it_gather(l, false);
        if (n < 0) rc = (int)n;
        else if (n > 0) l->position++;
    }
    return rc;
}

ct_loader *ct_loader_iterable(const ct_iterable_vtable *vt, void *self, const ct_loader_opts *opts) {
    const char *fn = "ct_loader_iterable";
    ct_loader_opts o = {0}; /* as it is when take_opts fails: no sampler to free */
    int rc = take_opts(opts, &o, fn);
    if (rc == CT_OK && (!vt || !vt->reset || !vt->next))
        rc = ct_set_error(CT_EINVAL, "%s: %s is NULL", fn, !vt ? "the vtable" : !vt->reset ? "vt->reset" : "vt->next");
    else if (rc != CT_OK)
        ; /* take_opts said why */
    else if (o.sampler)
        rc = ct_set_error(CT_EINVAL, "%s: an iterable dataset has no indices to sample: ct_loader_opts.sampler must be NULL", fn);
    else if (o.shuffle)
        rc = ct_set_error(CT_EINVAL, "%s: the loader cannot shuffle an iterable dataset (shuffle in the iterator, "
                                     "the same way after every reset)", fn);
    else if (o.batch_size < 1)
        rc = ct_set_error(CT_EINVAL, "%s: batch_size %" PRId64 " must be >= 1", fn, o.batch_size);
    else if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
        rc = ct_set_error(CT_EINVAL, "%s: rank %d is not in [0, world_size %d)", fn, o.rank, o.world_size);
    else if (o.skip_batches < 0)
        rc = ct_set_error(CT_EINVAL, "%s: skip_batches %" PRId64 " is negative", fn, o.skip_batches);
    else if (o.device.type != CT_CPU && !ct_cuda_is_available()) {
        char dev[32];
        ct_device_format(o.device, dev, sizeof dev);
        rc = ct_set_error(CT_EDEVICE, "%s: device %s asked for, but CUDA is not available", fn, dev);
    }
    ct_sampler_free(o.sampler); /* taken, as ct_loader_new takes it */
    o.sampler = NULL;
    ct_loader *l = rc == 0 ? calloc(1, sizeof *l) : NULL;
    if (rc == 0 && !l) rc = ct_set_error(CT_ENOMEM, "%s: out of host memory", fn);
    if (rc != 0) {
        if (vt && vt->free) vt->free(self);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    o.num_workers = 0; /* the iterator is read on the caller's thread */
    o.prefetch_batches = 0;
    l->o = o;
    l->iterable = true;
    l->it_vt = *vt;
    l->it_self = self;
    l->pin = o.pin_memory && ct_cuda_is_available();
    l->num_samples = l->len = -1;
    if ((size_t)o.batch_size <= SIZE_MAX / sizeof(int64_t)) {
        l->recs = calloc((size_t)o.batch_size, sizeof *l->recs);
        l->rec_no = calloc((size_t)o.batch_size, sizeof *l->rec_no);
    }
    if (!l->recs || !l->rec_no) {
        ct_set_error(CT_ENOMEM, "%s: out of host memory for a batch of %" PRId64 " records", fn, o.batch_size);
        destroy(l);
        return NULL;
    }
    if (it_seek(l, o.skip_batches) != 0) {
        char msg[MSG_LEN];
        set_msg(msg, "%s", ct_last_error());
        int code = ct_last_code();
        destroy(l);
        ct_set_error(code, "%s", msg);
        return NULL;
    }
    return l;
}

/* ---- the API ----------------------------------------------------------------- */

/* Frees everything but the dataset reference. */
static void destroy(ct_loader *l) {
    stop_workers(l);
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free_slot(&l->slots[i]);
        free(l->slots[i].indices);
        free(l->slots[i].seeds);
    }
    ct_sampler_free(l->sampler);
    for (int64_t i = 0; l->recs && i < l->o.batch_size; i++) ct_value_free(l->recs[i]);
    free(l->recs);
    free(l->rec_no);
    if (l->iterable && l->it_vt.free) l->it_vt.free(l->it_self);
    pthread_cond_destroy(&l->done);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mu);
    free(l->slots);
    free(l->scratch);
    free(l->threads);
    cti_buf_pool_release(l->pool); /* batches still held keep their blocks */
    free(l);
}

/* Slots, index buffers and thread handles, sized by the options. */
static int allocate(ct_loader *l) {
    int64_t m = l->max_item;
    l->nslots = l->o.num_workers == 0     ? 1
                : l->o.prefetch_batches > 0 ? l->o.prefetch_batches
                                            : 2 * l->o.num_workers;
    /* One list of m indices per slot, and one to throw draws away. */
    if (m < 1 || (uint64_t)m > SIZE_MAX / sizeof(int64_t) / ((size_t)l->nslots + 1))
        return ct_set_error(CT_ENOMEM,
                            "ct_loader_new: a batch of up to %" PRId64 " indices, %d at a time, is more than this "
                            "machine can address (batch_size too large)",
                            m, l->nslots + 1);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->scratch = malloc((size_t)m * sizeof *l->scratch);
    l->threads = calloc((size_t)(l->o.num_workers ? l->o.num_workers : 1), sizeof *l->threads);
    bool ok = l->slots && l->scratch && l->threads;
    for (int i = 0; ok && i < l->nslots; i++)
        ok = (l->slots[i].indices = malloc((size_t)m * sizeof(int64_t))) != NULL &&
             (l->slots[i].seeds = malloc((size_t)m * sizeof(uint64_t))) != NULL;
    if (!ok) return ct_set_error(CT_ENOMEM, "ct_loader_new: out of host memory");
    /* blocks for the batches in flight, the one the caller holds and the
     * one it is letting go, and a few for the images each thread decodes */
    int threads = l->o.num_workers ? l->o.num_workers : 1;
    l->pool = cti_buf_pool_new(l->nslots + 2 + 8 * threads, "ct_loader_new");
    return l->pool ? 0 : ct_last_code();
}

ct_loader *ct_loader_new(ct_dataset *dataset, const ct_loader_opts *opts) {
    ct_loader_opts o;
    if (take_opts(opts, &o, "ct_loader_new") != CT_OK) {
        ct_dataset_free(dataset); /* taken, as on every failure; a sampler in a struct not read is left */
        return NULL;
    }
    ct_sampler *user = o.sampler;
    o.sampler = NULL;
    if (check_opts(dataset, &o, user != NULL) != 0) {
        ct_sampler_free(user);
        ct_dataset_free(dataset);
        return NULL;
    }
    ct_loader *l = calloc(1, sizeof *l);
    if (!l) {
        ct_set_error(CT_ENOMEM, "ct_loader_new: out of host memory");
        ct_sampler_free(user);
        ct_dataset_free(dataset);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    l->dataset = dataset;
    l->o = o;
    l->user_chain = user != NULL;
    /* A user chain that skips (Determined's recipe ends in
     * SkipBatchSampler(initial_batch)) starts where its skip puts it. */
    l->chain_skip = user ? cti_sampler_skip_count(user) : -1;
    /* torch's DataLoader, too, goes on without pinning when no GPU is there. */
    l->pin = o.pin_memory && ct_cuda_is_available();
    l->num_samples = ct_dataset_len(dataset);
    l->len = user ? ct_sampler_len(user) : batches_per_pass(&o, l->num_samples);
    l->position = user ? (l->chain_skip > 0 ? l->chain_skip : 0) : o.skip_batches;
    l->pass_start = pass_start_of(l, l->position);
    l->sampler = user ? user : build_chain(l, l->position);
    l->max_item = ct_sampler_max_item(l->sampler);
    int rc = l->sampler ? allocate(l) : ct_last_code();
    l->issued = l->taken = l->position;
    if (rc == 0) rc = start_workers(l);
    if (rc != 0) {
        destroy(l);
        ct_dataset_free(dataset);
        return NULL;
    }
    fill(l); /* the workers start on the first batches right away */
    return l;
}

int ct_loader_next(ct_loader *l, ct_value **batch) {
    if (batch) *batch = NULL;
    if (!l || !batch) return ct_set_error(CT_EINVAL, "ct_loader_next: %s is NULL", l ? "batch" : "loader");
    if (l->failed) return stopped(l, "ct_loader_next");
    if (l->iterable) return it_next(l, batch);
    fill(l);
    if (l->position == l->issued) /* the pass ended and all of it was served */
        return l->draw_failed ? draw_failure(l) : 0;
    ct_value *b;
    int err;
    char msg[MSG_LEN];
    take_next(l, &b, &err, msg);
    if (!b) return fail(l, err, msg);
    fill(l); /* keep the workers busy while the caller computes */
    if (needs_move(b, l->o.device)) {
        ct_value *moved = cti_batch_map_tensors(b, move_leaf, l);
        ct_value_free(b);
        if (!moved) {
            set_msg(msg, "ct_loader_next: moving the batch to the device: %s", ct_last_error());
            return fail(l, ct_last_code(), msg);
        }
        b = moved;
    }
    *batch = b;
    return 1;
}

/* Draws and discards items until the sampler ends its pass. A user's
 * sampler may never end one (a repeating chain has no next pass): give up
 * after more batches than a pass over the dataset could hold several times. */
static int drain_pass(ct_loader *l) {
    int64_t limit = l->user_chain ? 4 * l->num_samples + 16 : INT64_MAX;
    for (int64_t drawn = 0; !l->pass_done; drawn++) {
        if (drawn > limit) {
            char msg[MSG_LEN];
            set_msg(msg, "ct_loader_reset: the sampler did not end its pass within %" PRId64
                         " batches (a repeating sampler has no next pass)", limit);
            return fail(l, CT_EINVAL, msg);
        }
        int64_t n = ct_sampler_next(l->sampler, l->scratch, l->max_item);
        if (n < 0) return fail(l, (int)n, ct_last_error());
        if (n == 0) l->pass_done = true;
        else l->position++;
    }
    return 0;
}

int ct_loader_reset(ct_loader *l) {
    if (!l) return ct_set_error(CT_EINVAL, "ct_loader_reset: loader is NULL");
    if (l->failed) return stopped(l, "ct_loader_reset");
    if (repeating(l)) return 0; /* one endless stream: nothing to restart */
    if (!l->pass_done && l->position == l->pass_start) return 0; /* this pass has not begun */
    if (l->iterable) return it_reset(l);
    if (l->draw_failed) return draw_failure(l);
    stop_workers(l);
    /* The rest of the pass counts as passed: in flight, then still in the sampler. */
    int64_t end = l->issued;
    drop_in_flight(l);
    l->position = l->issued = l->taken = end;
    int rc = drain_pass(l);
    if (rc) return rc;
    l->issued = l->taken = l->position;
    l->pass_done = false;
    l->pass_start = l->position;
    rc = start_workers(l);
    if (rc) return fail(l, rc, ct_last_error());
    fill(l);
    return 0;
}

/* A user's sampler only moves forward: batches in flight first, then draws
 * (crossing pass ends, as an uninterrupted loader reset at each would). */
static int seek_user_chain(ct_loader *l, int64_t target) {
    if (target < l->position && l->chain_skip > 0 && l->position == l->chain_skip)
        return ct_set_error(CT_EINVAL,
                            "ct_loader_set_position(%" PRId64 "): the training loader's own sampler chain skips %"
                            PRId64 " batches (ct_sampler_skip), past position %" PRId64
                            ", and cannot be rewound: skip ct_ctx_initial_batch(ctx) batches, where a resumed run "
                            "starts (or none: the loop positions the chain)",
                            target, l->chain_skip, target);
    if (target < l->position)
        return ct_set_error(CT_ENOTSUP,
                            "ct_loader_set_position(%" PRId64 "): the loader is at %" PRId64
                            " and a user sampler cannot be rewound",
                            target, l->position);
    stop_workers(l);
    for (; l->position < target && l->position < l->issued; l->position++) free_slot(slot_of(l, l->position));
    if (l->taken < l->position) l->taken = l->position;
    if (l->position < target && l->draw_failed) return draw_failure(l);
    bool last_was_end = false;
    while (l->position < target) {
        if (l->pass_done) { /* the sampler's next call starts the next pass */
            l->pass_done = false;
            l->pass_start = l->position;
        }
        int64_t n = ct_sampler_next(l->sampler, l->scratch, l->max_item);
        if (n < 0) return fail(l, (int)n, ct_last_error());
        if (n == 0 && last_was_end)
            return fail(l, CT_EINVAL, "ct_loader_set_position: the sampler's passes are empty");
        last_was_end = n == 0;
        if (n == 0) l->pass_done = true;
        else l->position++;
        l->issued = l->taken = l->position;
    }
    int rc = start_workers(l);
    if (rc) return fail(l, rc, ct_last_error());
    fill(l);
    return 0;
}

int ct_loader_set_position(ct_loader *l, int64_t batches_served) {
    if (!l) return ct_set_error(CT_EINVAL, "ct_loader_set_position: loader is NULL");
    if (batches_served < 0)
        return ct_set_error(CT_EINVAL, "ct_loader_set_position: position %" PRId64 " is negative",
                            batches_served);
    if (l->failed) return stopped(l, "ct_loader_set_position");
    if (l->iterable) return it_seek(l, batches_served);
    if (l->user_chain) return seek_user_chain(l, batches_served);
    ct_sampler *chain = build_chain(l, batches_served);
    if (!chain) return ct_last_code(); /* the loader goes on where it was */
    stop_workers(l);
    drop_in_flight(l);
    ct_sampler_free(l->sampler);
    l->sampler = chain;
    l->position = l->issued = l->taken = batches_served;
    l->pass_start = pass_start_of(l, batches_served);
    l->pass_done = l->draw_failed = false;
    int rc = start_workers(l);
    if (rc) return fail(l, rc, ct_last_error());
    fill(l);
    return 0;
}

int64_t ct_loader_len(const ct_loader *l) {
    if (!l) return ct_set_error(CT_EINVAL, "ct_loader_len: loader is NULL");
    return l->len;
}

int64_t ct_loader_num_samples(const ct_loader *l) {
    if (!l) return ct_set_error(CT_EINVAL, "ct_loader_num_samples: loader is NULL");
    return l->num_samples;
}

int64_t ct_loader_position(const ct_loader *l) {
    if (!l) return ct_set_error(CT_EINVAL, "ct_loader_position: loader is NULL");
    return l->position;
}

double ct_loader_wait_seconds(const ct_loader *l) { return l ? l->wait_s : 0.0; }

void ct_loader_free(ct_loader *l) {
    if (!l) return;
    ct_dataset *d = l->dataset;
    destroy(l);
    ct_dataset_free(d);
}

/* ---- the training loop's hook (data/loader.h) ---------------------------- */

int cti_loader_use_validation_shard(ct_loader *l, int rank, int world_size) {
    if (!l) return ct_set_error(CT_EINVAL, "the validation data loader is NULL");
    if (l->user_chain || (l->o.rank == rank && l->o.world_size == world_size)) return CT_OK;
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return ct_set_error(CT_EINVAL, "the validation data loader: rank %d is not in [0, world_size %d)", rank,
                            world_size);
    stop_workers(l);
    l->o.repeat = false;
    l->o.rank = rank;
    l->o.world_size = world_size;
    if (!l->iterable) l->len = batches_per_pass(&l->o, l->num_samples);
    return ct_loader_set_position(l, 0); /* the chain rebuilt (the iterator replayed) for this shard */
}

int cti_loader_use_device(ct_loader *l, ct_device device) {
    if (!l) return ct_set_error(CT_EINVAL, "cti_loader_use_device: loader is NULL");
    if (l->o.device.type != CT_CPU || device.type == CT_CPU) return CT_OK;
    if (l->failed) return stopped(l, "cti_loader_use_device");
    stop_workers(l); /* they read l->pin */
    l->o.device = device;
    l->pin = ct_cuda_is_available();
    int rc = start_workers(l);
    if (rc) return fail(l, rc, ct_last_error());
    fill(l);
    return 0;
}

bool cti_loader_has_user_sampler(const ct_loader *l) { return l && l->user_chain; }

int cti_loader_use_training_chain(ct_loader *l, int rank, int world_size, int64_t position) {
    if (!l) return ct_set_error(CT_EINVAL, "the training data loader is NULL");
    if (l->user_chain && position <= l->position) return CT_OK; /* a skip of its own put it there, or beyond */
    if (l->iterable) { /* repeat -> shard -> batch, replayed to `position` */
        if (world_size < 1 || rank < 0 || rank >= world_size)
            return ct_set_error(CT_EINVAL, "the training data loader: rank %d is not in [0, world_size %d)", rank,
                                world_size);
        l->o.repeat = true;
        l->o.rank = rank;
        l->o.world_size = world_size;
    } else if (!l->user_chain) {
        ct_loader_opts o = l->o;
        o.repeat = true;
        o.rank = rank;
        o.world_size = world_size;
        if (world_size < 1 || rank < 0 || rank >= world_size || rank_share(&o, l->num_samples) == 0)
            return ct_set_error(CT_EINVAL,
                                "rank %d of %d gets none of the training set's %" PRId64 " samples", rank,
                                world_size, l->num_samples);
        stop_workers(l); /* they read l->o; set_position restarts them */
        l->o = o;
        l->len = batches_per_pass(&l->o, l->num_samples);
    }
    return ct_loader_set_position(l, position);
}
