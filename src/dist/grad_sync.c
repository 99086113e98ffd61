/* src/dist/grad_sync.c — gradients averaged across ranks in buckets that go out
 * during backward (grad_sync.h).
 *
 * The moving parts, in the order a step meets them:
 *
 *   cti_grad_sync_new   lays the parameters that require grad into buckets
 *                      (reverse registration order, one dtype per bucket, up
 *                      to bucket_bytes each), gives every bucket one flat
 *                      buffer [gradients | one "has grad" flag per parameter]
 *                      and hangs a post-accumulate-grad hook on every
 *                      parameter.
 *   cti_grad_sync_arm   opens a *window* on optimizer-step batches, and
 *                      lends every parameter without a .grad its zeroed
 *                      slot (see "Gradients as bucket views").
 *   on_grad (hook)     stages its parameter: copies the gradient into the
 *                      bucket (unless .grad already is its slot there) and
 *                      marks it ready; once every parameter of the next
 *                      bucket in index order is ready, launches it; then
 *                      drives every bucket in flight one poll further.
 *   cti_grad_sync_after_backward takes the lent slots back where backward
 *                      added nothing.
 *   cti_grad_sync_finish launches what is left, polls until every bucket is
 *                      reduced, points each .grad at its slot of the
 *                      averaged bucket as soon as that bucket is done, and
 *                      closes the window.
 *   cti_grad_sync_free  completes a window left open, removes the hooks and
 *                      frees the buckets and the communicator.
 *
 * The reduction. Ranks on one machine average float buckets in shared
 * memory (below; on several hosts, shared memory on each and messages
 * between them); otherwise a bucket is averaged by an all-reduce of
 * MPI_Isend/MPI_Irecv on a communicator of our own, a list of steps
 * (allreduce_steps.h): the ring — p-1 reduce-scatter steps (send one
 * chunk to the right, receive one from the left, add it; the last
 * addition also multiplies by 1/p, so the chunk a rank then owns holds
 * averages) and p-1 all-gather steps — or, for small buckets on a power of
 * two of ranks, halving-doubling, 2 log2(p) steps (cti_ar_choose;
 * CTRIAL_GRAD_SYNC=ring or halving-doubling picks one for every bucket).
 * Each step is a pair of requests that MPI_Testall polls from the hooks
 * and finish, so buckets progress while backward runs. Not
 * MPI_Iallreduce: in OpenMPI (4.1, libnbc) it reduces to rank 0 and
 * broadcasts back whenever there are fewer than 4 ranks or the buffer is
 * reduced in place, and allocates a temporary buffer of the whole message
 * on every call — half the bandwidth of a blocking MPI_Allreduce of the
 * same bytes. Both algorithms move 2(p-1)/p of the buffer per rank, like
 * MPI_Allreduce's own large-message algorithms; MPI only moves bytes, so
 * half-precision buckets work too (their additions go through libtorch).
 *
 * Gradients as bucket views (DistributedDataParallel's
 * gradient_as_bucket_view). After finish, every averaged .grad is a view of
 * its slot in the bucket, so the average is never copied out. A gradient
 * zeroed in place and accumulated again by the next backward is already in
 * its bucket: staging it copies nothing. After zero_grad(set_to_none) the
 * .grad is None, and backward would make a fresh tensor that staging must
 * copy (or read) into the bucket; so arm *lends* each such parameter its
 * slot, zeroed, as .grad. Backward then accumulates straight into the
 * bucket (libtorch adds into a .grad that exists), exactly as after an
 * in-place zero_grad, and cti_grad_sync_after_backward takes the slot back
 * from every parameter the backward did not reach: .grad is None again, as
 * without a sync, before anyone but backward could see the difference.
 * A .grad that is some other tensor (set by the caller, or a backward with
 * create_graph, which replaces .grad instead of adding) is staged by
 * copying its part in the chunk this rank sends first (1/p of it) and
 * keeping a reference; the reduce-scatter reads the rest straight from the
 * tensor as it adds.
 *
 * Shared memory. When every rank of the sync's communicator runs on this
 * machine (MPI_Comm_split_type), the float32/float64 buckets are laid out
 * in one shared-memory segment per rank that every other rank maps
 * read-only (node_shm.c), and no message moves: once every rank has
 * launched a bucket (its gradients are in its copy), rank r averages chunk
 * r of all p copies into its own (spans.c, added in rank order), then
 * copies each other chunk from the rank that averaged it. Each rank
 * publishes how far it got in flags at the head of its segment, one set
 * per bucket, numbered by window: arrived (its gradients are in), reduced
 * (its chunk holds averages), gathered (it has every chunk). A bucket is
 * done when every rank has gathered — until then the others may still read
 * this rank's copy, so nothing may write it (the next backward, a zero_grad
 * in place). Per rank that is reading p chunks and writing one, then
 * copying p-1: about a quarter of the memory traffic of MPI's
 * shared-memory transport, which copies every message into and out of its
 * own buffers (or, single-copy, pins pages per message) — bench/dist
 * measures it beside a bare MPI_Allreduce. Staging copies a gradient that
 * is not its slot whole (the others read it), and polls, hooks and the
 * collective timeout work as for messages. Half-precision buckets stay on
 * messages (their additions go through libtorch).
 *
 * Several hosts. When the ranks run on H hosts (node_shm.h's layout),
 * some with more than one, a float bucket is cut into S shares, S the
 * fewest ranks a host has, and averaged in three stages: host rank l < S
 * adds up share l of all its host's copies in shared memory (the host's
 * sum); the H ranks that are l on their hosts (a communicator split by
 * local rank) all-reduce that share by messages, dividing by the number of
 * ranks on its last addition; then every host rank copies the shares from
 * their owners, as on one machine (host ranks from S on own none: they
 * only copy). The S all-reduces run at once, so each host sends and
 * receives 2(H-1)/H of the bucket in all, as one ring of hosts would,
 * while no byte crosses the host's memory through MPI; a flat ring of n
 * ranks would move the same bytes through MPI within each host too, and
 * pay 2(n-1) message latencies per bucket instead of 2(H-1) (2 log2(H) by
 * halving-doubling). One rank on every host takes messages through every
 * rank. CTRIAL_GRAD_SYNC_HOST_RANKS fakes hosts on one machine (tests,
 * bench/dist).
 *
 * The "has grad" flags travel in the same buffer: after the reduction a
 * flag is the share of ranks that had a gradient for that parameter, so
 * one all-reduce also says whether any rank had one (keep None otherwise,
 * as a single process would).
 *
 * Ranks must agree on which collectives run. Every bucket is reduced
 * exactly once per window, in index order, on every rank, whatever the
 * timing: a bucket launches either from a hook or in finish. When arm is
 * called while a window is open (a second backward before the optimizer
 * step; the context arms before every backward, so every rank sees the same
 * calls), the window is completed right there — every bucket reduced and
 * written back — and a new one opens: the next backward then adds its local
 * gradients to averages that are equal on every rank, and the new window's
 * average of those sums is the average of both backwards. A backward that
 * no arm call announced, reaching a bucket already out, would write into
 * memory MPI is moving and cannot be repaired consistently: finish reports
 * it (CT_ESTATE) after completing every collective.
 *
 * Threads. Hooks run on the thread running backward. MPI is initialised
 * FUNNELED (dist.c), so hooks only act on the thread that armed the
 * window; anywhere else they leave everything to finish.
 *
 * Parameters from their owners (cti_grad_sync_share_params). A sharded
 * optimizer (shard.h) steps each parameter on one rank; afterwards the
 * float buckets' shared memory carries the parameters the way it carried
 * the gradients: once the step has set their .grad to None their slots
 * are free, the owner copies each of its parameters into its slot of its
 * own copy and publishes PARAMS_OUT, every rank copies the others' from
 * their copies and publishes PARAMS_IN, and no rank's next backward writes
 * its copy before every rank has read it (each waits for all PARAMS_IN).
 * The flags count share calls (param_gen), not windows: two optimizers
 * over one model share twice in one window. On several hosts a sharded
 * optimizer's bucket (one owner) also goes, by one message, from the
 * owner's copy into the copy of one rank on every other host (its
 * carrier: the rank at the owner's place on its host, carrier_on), and
 * that host's ranks copy the parameters from the carrier's copy: each host
 * receives every parameter it does not own once, as in an all-gather
 * between hosts.
 *
 * Sharded optimizers (grad_sync.h). plan_buckets gives each owner's
 * parameters buckets of their own (b->owner), filled in backward's order
 * as the others are, and orders params[] bucket by bucket. Such a bucket
 * is reduced to its owner (b->to_owner): in shared memory on one host the
 * owner averages every rank's whole copy in phase 0 (the others publish
 * REDUCED and GATHERED at once: they read nothing) and the bucket is done
 * for all once the owner has read; by messages cti_ar_reduce_steps (p - 1
 * additions on the owner, one send elsewhere); NCCL's ncclReduce. On
 * several hosts with shared memory on each, the host's sum of each share
 * is made as for any bucket, but between hosts it is reduced to the
 * owner's host (the same reduce steps, the owner's host as root), and
 * only the owner then copies the shares its host's ranks averaged: each
 * host sends its sum of a bucket once, to the owner's host, half the
 * all-reduce's traffic between hosts. write_back sets .grad to None off
 * the owner either way, and marks the owner's averages (averaged), which
 * sums_for_owners turns into sums at the next arm if a backward is about
 * to add to them.
 *
 * CUDA (grad_sync.h): the same buckets, slots, flags and lending in device
 * memory, but no messages of ours: launch enqueues one ncclAllReduce(ncclAvg) of the
 * whole bucket on the current stream and the bucket is done as far as the
 * host is concerned. Hooks act on any thread there (autograd runs CUDA
 * backward on a device thread while the arming thread waits), and the
 * communicator is created in new, on the MPI thread.
 *
 * CUDA through host memory ("staged": no NCCL in the build, or ranks
 * sharing a GPU; cuda_transport.h). The slots, lending and flags are on the
 * device as for NCCL (b->dev), and the bucket's buffer (b->buf) is on the
 * host as for a CPU bucket: pinned, or in this rank's shared segment. The
 * hook, on any thread, stages on the device, and once the bucket is full
 * queues its copy to the host and records an event (B_COPYING); every
 * slot's values are then in the host buffer, which the additions read. On
 * the arming thread, advance polls the event without blocking and starts
 * the host's reduction when it is done, so a bucket's messages can run
 * while the device still computes later gradients; write_back queues the
 * copy back on the current stream, where the optimizer step follows. The
 * host buffer is written again only after the next window's copy to it,
 * which the stream orders after that copy back. */
#define _POSIX_C_SOURCE 200809L
#include "dist/grad_sync.h"

#include "base/clock.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrial/config.h"
#include "ctrial/cuda.h"
#include "ctrial/dist.h"
#include "ctrial/error.h"
#include "ctrial/tensor.h"
#include "dist/cuda_transport.h"
#include "dist/nccl_comm.h"
#include "dist/watch.h"

#if CTRIAL_HAVE_MPI
#include <mpi.h>
#include <stdatomic.h>

#include "dist/comm.h"
#include "dist/node_shm.h"
#endif
#include "dist/allreduce_steps.h"
#include "dist/spans.h"

enum { MSG_LEN = 512 };

/* 25 MiB: DistributedDataParallel's bucket_cap_mb. */
#define DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

typedef enum {
    B_IDLE,    /* not launched in this window */
    B_COPYING, /* staged: on its way from the device to the host bucket */
    B_RUNNING, /* message steps or shared-memory phases in flight */
    B_DONE,    /* reduced, or given up on after an MPI failure (s->err says so) */
} bucket_state;

typedef struct gs_param {
    cti_grad_sync *s;  /* the hook's way back */
    ct_tensor *param; /* borrowed from the model */
    char *name;       /* its dotted name (a copy: the model's may change) */
    ct_tensor *slot;  /* NEW: view of its bucket's buffer, shaped as the parameter */
    char *at;         /* the slot's first byte */
    size_t bytes;     /* and its size */
    int64_t off;      /* the slot's first element in the buffer */
    const char *src;  /* staged: where its local gradient is (the slot, or held's data; NULL: zeros) */
    ct_tensor *held;  /* NEW while staged: the gradient src points into (kept alive) */
    int bucket;
    int64_t flag;     /* element index of its "has grad" flag in the buffer */
    bool ready;       /* its hook fired in this window */
    bool fired;       /* its hook fired since the last arm (armed or not) */
    bool lent;        /* arm gave it its zeroed slot as .grad (it had none) */
    bool averaged;    /* a sharded optimizer's, on its owner: write_back pointed .grad at its average */
} gs_param;

#if CTRIAL_HAVE_MPI
/* The ranks a bucket's messages run among, and how: every rank (the
 * sync's communicator), or, between hosts, the ranks that have this rank's
 * place on every host (see "Several hosts"). */
typedef struct {
    MPI_Comm comm;
    int p, r;        /* its size, and this rank's place in it */
    bool chosen;     /* every bucket takes algo (CTRIAL_GRAD_SYNC), else cti_ar_choose by its size */
    cti_ar_algo algo;
    bool uses[2];    /* some bucket takes the ring [CT_AR_RING], halving-doubling */
} gs_group;
#endif

typedef struct {
    ct_dtype dtype;
    size_t elsize;
    int owner;            /* sharded: the rank that steps its parameters (their averages are its alone); -1: every rank */
    bool to_owner;        /* reduced to its owner only (a reduce, not an all-reduce: see "Sharded optimizers") */
    int owner_at;         /* to_owner in shared memory: the owner's place among this host's ranks (-1: another host's) */
    int first, count;     /* params[first .. first + count) */
    int64_t numel;        /* gradient elements; the flags follow */
    int64_t n;            /* numel + count */
    ct_tensor *buf;       /* NEW: [n] */
    char *base;           /* buf's first byte (CPU, or the device address) */
    ct_tensor *dev;       /* NEW, staged: the bucket on the device, where the slots are ([n]) */
    ct_cuda_event *copied; /* staged: the copy to the host is done once this is (NULL: none pending) */
    ct_tensor *grads;     /* NEW view buf[0 .. numel), dev's when staged (CUDA: zeroed in one kernel) */
    ct_tensor *flags;     /* NEW view buf[numel .. n), dev's when staged (CUDA: filled by kernels) */
    bool all_had;         /* every parameter staged in this window had a local gradient */
    ct_tensor *scratch;   /* NEW: what an addition step receives */
    cti_ar_step *steps;    /* the messages of its all-reduce (allreduce_steps.h) */
    int nsteps;
    ct_tensor **chunk;    /* NEW views, half types: step i's receive range of buf */
    ct_tensor **incoming; /* NEW views, half types: scratch[0 .. step i's receive length) */
    int nready;
    bucket_state state;
    bool written;         /* its averages are in .grad (this window) */
    int step;             /* message step in flight: 0 .. nsteps-1 */
    double t_launch;
    bool shm;             /* buf is in this rank's shared segment: averaged there (see "Shared memory") */
    int phase;            /* shm: 0 .. 3, see advance_shm */
    int64_t *share_off;   /* shm: [shares] the share of buf host rank i averages, in elements */
    int64_t *share_len;
    const char **peer;    /* shm: [L] every host rank's copy of this bucket, as mapped here */
    const void **mine_in; /* shm: [L] this rank's share of every host rank's copy: what it adds up (if it has one) */
    bool *got;            /* shm: [L] the share of that rank copied in this window */
#if CTRIAL_HAVE_MPI
    const gs_group *group; /* the ranks its messages run among (NULL: shared memory alone) */
    MPI_Datatype type;   /* an unsigned integer of elsize bytes: MPI only moves bytes */
    MPI_Request req[2];
#endif
} gs_bucket;

struct cti_grad_sync {
    int rank, size;
    bool cuda;       /* the parameters are on cuda:device: NCCL instead of messages, unless staged */
    bool staged;     /* CUDA through host memory (cuda_transport.h): slots on the device, buckets on the host */
    int device;
    size_t nparams;
    gs_param *params;
    int nbuckets;
    gs_bucket *buckets;
    int next_launch; /* lowest bucket not launched in this window */
    bool window;     /* armed since the last finish */
    bool announced;  /* between arm and after_backward: a backward the context runs */
    char stray[256]; /* the first parameter a backward outside that span reached ("" none) */
    bool in_finish;
    double t_finish; /* when the current finish began waiting */
    pthread_t arm_thread;
    int err;         /* the window's first failure, reported by finish */
    char msg[MSG_LEN];
    cti_grad_sync_stats stats;
#if CTRIAL_HAVE_MPI
    MPI_Comm comm;     /* ours: never matches anyone else's messages */
    gs_group all;       /* every rank, around comm */
    gs_group across;    /* between hosts: this rank's place on every host (comm NULL: one host, or no shared memory) */
    cti_node_layout lay; /* which ranks share this rank's host */
    int shares;        /* shared memory: the shares a bucket is cut into on each host, each averaged by one host rank */
    cti_node_shm *shm;  /* every host rank's bucket segment (NULL: messages only) */
    uint32_t gen;      /* the window's number, the same on every rank (shared memory's flags) */
    uint32_t param_gen; /* cti_grad_sync_share_params calls so far, the same on every rank */
    char why_not_shm[160];
#endif
};

/* ======================================================================== */
#if CTRIAL_HAVE_MPI

/* Keeps the window's first failure for finish to return (hooks cannot
 * return one). Returns the code. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int record(cti_grad_sync *s, int code, const char *fmt, ...) {
    if (s->err) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    s->err = code;
    return code;
}

/* The same, with the libtorch/ctrial message of a call that just failed. */
static int record_last(cti_grad_sync *s, const char *what, int b, const char *param) {
    int code = ct_last_code() ? ct_last_code() : CT_ETORCH;
    if (param)
        return record(s, code, "grad_sync: rank %d: bucket %d: parameter '%s': %s: %s", s->rank, b, param, what,
                      ct_last_error());
    return record(s, code, "grad_sync: rank %d: bucket %d: %s: %s", s->rank, b, what, ct_last_error());
}

/* The same for an MPI call that returned mpi_err (CT_EDIST). */
static int record_mpi(cti_grad_sync *s, int b, const char *call, int mpi_err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(mpi_err, text, &len);
    return record(s, CT_EDIST, "grad_sync: rank %d: bucket %d: %s failed: %s", s->rank, b, call, text);
}

/* Whether bucket b's additions are spans.c's (float32, float64: read
 * straight from gradients, and shared memory can average them) rather than
 * libtorch's (half types, on messages only). */
static bool spans_dtype(const gs_bucket *b) { return b->dtype == CT_F32 || b->dtype == CT_F64; }

/* ---- messages ----------------------------------------------------------- */

/* Posts message step b->step (allreduce_steps.h): a receive into scratch
 * (an addition step) or straight into place, and a send. Messages of one
 * bucket share a tag and pair up in order: MPI does not let messages
 * between two ranks overtake. Returns false when MPI refused (recorded;
 * nothing is left posted but what MPI completes on its own). */
static bool post_step(cti_grad_sync *s, gs_bucket *b, int bi) {
    const cti_ar_step *t = &b->steps[b->step];
    void *recv_at = t->add ? ct_data_ptr(b->scratch) : b->base + (size_t)t->recv_off * b->elsize;
    int from = t->recv_from == CT_AR_NOBODY ? MPI_PROC_NULL : t->recv_from;
    int to = t->send_to == CT_AR_NOBODY ? MPI_PROC_NULL : t->send_to;
    int err = MPI_Irecv(recv_at, (int)t->recv_len, b->type, from, bi, b->group->comm, &b->req[1]);
    if (err != MPI_SUCCESS) {
        record_mpi(s, bi, "MPI_Irecv", err);
        return false;
    }
    err = MPI_Isend(b->base + (size_t)t->send_off * b->elsize, (int)t->send_len, b->type, to, bi, b->group->comm,
                    &b->req[0]);
    if (err != MPI_SUCCESS) {
        record_mpi(s, bi, "MPI_Isend", err);
        /* The receive may never match now; leave it to MPI rather than wait. */
        MPI_Request_free(&b->req[1]);
        return false;
    }
    if (to != MPI_PROC_NULL) s->stats.sent_bytes += (uint64_t)t->send_len * b->elsize;
    return true;
}

/* The local work after step b->step's messages arrived, in an addition
 * step: what came plus this rank's own values go into the buffer; the
 * range's last addition (after which it holds the sum over all ranks)
 * also divides by the number of ranks of the sync, so what is passed on
 * from there are averages. A range's first addition reads float32/float64
 * gradients straight from their tensors (stage copied only what step 0
 * sends): the copy into the bucket and the addition are one pass; later
 * ones read the buffer. Half types were staged whole and are added in
 * place through libtorch. Between hosts the buffer already holds the
 * host's sum (src is the slot itself). */
static void finish_step(cti_grad_sync *s, gs_bucket *b, int bi) {
    const cti_ar_step *t = &b->steps[b->step];
    if (!t->add) return;
    double k = 1.0 / s->size;
    if (!spans_dtype(b)) {
        if (ct_add_(b->chunk[b->step], b->incoming[b->step], 1.0) != CT_OK ||
            (t->last && ct_mul_scalar_(b->chunk[b->step], k) != CT_OK))
            record_last(s, "adding a peer's part", bi, NULL);
        return;
    }
    int64_t lo = t->recv_off, hi = lo + t->recv_len;
    const char *x = ct_data_ptr(b->scratch);
    size_t el = b->elsize;
    for (int i = b->first; i < b->first + b->count; i++) {
        const gs_param *q = &s->params[i];
        int64_t qn = (int64_t)(q->bytes / el);
        int64_t a0 = lo > q->off ? lo : q->off, a1 = hi < q->off + qn ? hi : q->off + qn;
        if (a0 >= a1) continue;
        char *d = b->base + (size_t)a0 * el;
        const char *a = !t->first ? d : q->src ? q->src + (size_t)(a0 - q->off) * el : NULL;
        cti_span_add(b->dtype, d, a, x + (size_t)(a0 - lo) * el, a1 - a0, t->last, k);
    }
    /* The flags live in the buffer itself. */
    int64_t f0 = lo > b->numel ? lo : b->numel;
    if (f0 < hi)
        cti_span_add(b->dtype, b->base + (size_t)f0 * el, b->base + (size_t)f0 * el, x + (size_t)(f0 - lo) * el,
                    hi - f0, t->last, k);
}

/* Starts bucket b's messages at their first step. false: MPI refused
 * (recorded). */
static bool steps_start(cti_grad_sync *s, gs_bucket *b, int bi) {
    b->step = 0;
    return post_step(s, b, bi);
}

/* Moves bucket b's messages as far as they allow: polls the step in
 * flight and, each time it is complete, does the step's local work and
 * posts the next. Returns 0 while steps remain, 1 when the last one is
 * done, -1 when MPI failed (recorded). */
static int steps_advance(cti_grad_sync *s, gs_bucket *b, int bi) {
    for (;;) {
        int done = 0;
        int err = MPI_Testall(2, b->req, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) {
            record_mpi(s, bi, "MPI_Testall", err);
            return -1;
        }
        if (!done) return 0;
        finish_step(s, b, bi);
        if (++b->step == b->nsteps) return 1;
        if (!post_step(s, b, bi)) return -1;
    }
}

/* Bucket b is reduced: the stats count it. */
static void bucket_done(cti_grad_sync *s, gs_bucket *b) {
    b->state = B_DONE;
    double t = cti_clock_monotonic();
    s->stats.comm_seconds += t - b->t_launch;
    if (s->in_finish) s->stats.wait_seconds += t - (b->t_launch > s->t_finish ? b->t_launch : s->t_finish);
    s->stats.bytes += (uint64_t)b->n * b->elsize;
    s->stats.buckets++;
}

/* ---- shared memory ------------------------------------------------------- */

/* One rank's flags for one bucket, at the head of its segment: the number
 * of the last window in which it published its gradients (ARRIVED),
 * averaged its chunk (REDUCED) and copied every other chunk (GATHERED);
 * and the number of the last cti_grad_sync_share_params in which it wrote
 * its parameters into its copy (PARAMS_OUT) and read every other rank's
 * (PARAMS_IN).
 * Each rank writes only its own; 32 bits, so that a peer's segment, mapped
 * read-only, is read with plain loads on every platform. */
enum { ARRIVED, REDUCED, GATHERED, PARAMS_OUT, PARAMS_IN, FLAGS };
typedef struct {
    _Atomic uint32_t at[FLAGS];
    char pad[64 - FLAGS * sizeof(uint32_t)];
} gs_flags;

/* Host rank q's flag `which` for bucket bi. */
static _Atomic uint32_t *flag_of(const cti_grad_sync *s, int q, int bi, int which) {
    return &((gs_flags *)cti_node_shm_at(s->shm, q) + bi)->at[which];
}

/* This rank has reached `which` in round gen (a window's number, or a
 * parameter share's). */
static void publish_at(cti_grad_sync *s, int bi, int which, uint32_t gen) {
    atomic_store_explicit(flag_of(s, s->lay.local_rank, bi, which), gen, memory_order_release);
}

/* Whether host rank q has reached `which` in round gen (wrap-around safe). */
static bool reached_at(const cti_grad_sync *s, int q, int bi, int which, uint32_t gen) {
    return (int32_t)(atomic_load_explicit(flag_of(s, q, bi, which), memory_order_acquire) - gen) >= 0;
}

static bool all_reached_at(const cti_grad_sync *s, int bi, int which, uint32_t gen) {
    for (int q = 0; q < s->lay.local_size; q++)
        if (!reached_at(s, q, bi, which, gen)) return false;
    return true;
}

/* The same in this window. */
static void publish(cti_grad_sync *s, int bi, int which) { publish_at(s, bi, which, s->gen); }
static bool reached(const cti_grad_sync *s, int q, int bi, int which) { return reached_at(s, q, bi, which, s->gen); }
static bool all_reached(const cti_grad_sync *s, int bi, int which) { return all_reached_at(s, bi, which, s->gen); }

/* Moves a shared-memory bucket as far as the other ranks allow, in four
 * phases. 0: once every host rank's gradients are in (arrived), this rank
 * adds up its share of every host rank's copy into its own — averages
 * when the host is every rank, else the host's sum, which 1: the
 * messages between hosts (this rank and the ones with its place on every
 * other host) turn into the average over all ranks (to_owner: only on the
 * owner's host, where they all go). 2: once a host rank has averaged its
 * share (reduced), this rank copies it (to_owner: the owner alone). 3:
 * once every host rank has every share it needs (gathered), none reads
 * this rank's copy any more and it may change again (the next backward, a
 * zero_grad in place): the bucket is done. Messages that fail are
 * recorded and the phases go on, so that the host's other ranks are not
 * left waiting. */
static void advance_shm(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    int n = s->lay.local_size, me = s->lay.local_rank;
    size_t el = b->elsize;
    if (b->to_owner && s->lay.hosts == 1) {
        /* A sharded optimizer's bucket (one host): its owner averages every
         * rank's whole copy into its own once all have arrived; the others
         * have nothing to read. Done for all once the owner has read. */
        if (b->phase == 0 && me == b->owner_at) {
            if (!all_reached(s, bi, ARRIVED)) return;
            cti_span_mean(b->dtype, b->base, b->mine_in, n, b->n, 1.0 / s->size);
        }
        if (b->phase == 0) {
            publish(s, bi, REDUCED);
            publish(s, bi, GATHERED);
            b->phase = 3;
        }
        if (reached(s, b->owner_at, bi, GATHERED)) bucket_done(s, b);
        return;
    }
    if (b->phase == 0) {
        if (!all_reached(s, bi, ARRIVED)) return;
        if (me < s->shares) /* (a host with more ranks than shares: the others only copy) */
            cti_span_mean(b->dtype, b->base + (size_t)b->share_off[me] * el, b->mine_in, n, b->share_len[me],
                         b->group ? 1.0 : 1.0 / s->size);
        b->phase = b->group && steps_start(s, b, bi) ? 1 : 2;
        if (b->phase == 2) publish(s, bi, REDUCED);
    }
    if (b->phase == 1) {
        if (steps_advance(s, b, bi) == 0) return;
        publish(s, bi, REDUCED);
        b->phase = 2;
    }
    if (b->phase == 2) {
        bool all = true;
        for (int q = 0; q < s->shares && (!b->to_owner || me == b->owner_at); q++) {
            if (q == me || b->got[q]) continue;
            if (!reached(s, q, bi, REDUCED)) {
                all = false;
                continue;
            }
            size_t at = (size_t)b->share_off[q] * el;
            memcpy(b->base + at, b->peer[q] + at, (size_t)b->share_len[q] * el);
            b->got[q] = true;
        }
        if (!all) return;
        publish(s, bi, GATHERED);
        b->phase = 3;
    }
    if (all_reached(s, bi, GATHERED)) bucket_done(s, b);
}

static void start_host(cti_grad_sync *s, int bi);

/* Moves bucket bi as far as the other ranks allow (staged: first waits,
 * without blocking, for its copy to the host). On the last step the
 * bucket is DONE and the stats count it. */
static void advance(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    if (b->state == B_COPYING) {
        if (b->copied) {
            int q = ct_cuda_event_query(b->copied);
            if (q == 0) return; /* the device is not there yet */
            if (q < 0) record_last(s, "waiting for the copy to the host", bi, NULL);
            ct_cuda_event_free(b->copied);
            b->copied = NULL;
        }
        start_host(s, bi);
    }
    if (b->state != B_RUNNING) return;
    if (b->shm) {
        advance_shm(s, bi);
        return;
    }
    int rc = steps_advance(s, b, bi);
    if (rc > 0) bucket_done(s, b);
    else if (rc < 0) b->state = B_DONE;
}

/* Every bucket in flight, one poll further. */
static void progress(cti_grad_sync *s) {
    for (int i = 0; i < s->next_launch; i++) advance(s, i);
}

/* ---- launching ---------------------------------------------------------- */

/* Writes 1 (a parameter had a gradient here) or 0 into a flag element. */
static void write_flag(gs_bucket *b, int64_t at, bool one) {
    static const float f32 = 1.0f;
    static const double f64 = 1.0;
    static const uint16_t f16 = 0x3c00, bf16 = 0x3f80; /* 1.0 in IEEE half and bfloat16 */
    char *p = b->base + (size_t)at * b->elsize;
    memset(p, 0, b->elsize);
    if (!one) return;
    switch (b->dtype) {
    case CT_F32: memcpy(p, &f32, sizeof f32); break;
    case CT_F64: memcpy(p, &f64, sizeof f64); break;
    case CT_F16: memcpy(p, &f16, sizeof f16); break;
    case CT_BF16: memcpy(p, &bf16, sizeof bf16); break;
    default: break; /* plan_buckets admits floating dtypes only */
    }
}

/* After the reduction a flag holds the share of ranks with a gradient:
 * nonzero bits (it is never negative) mean some rank had one. `flag` points
 * at its elsize bytes in host memory. */
static bool read_flag(const unsigned char *flag, size_t elsize) {
    for (size_t i = 0; i < elsize; i++)
        if (flag[i]) return true;
    return false;
}

/* The first byte of a contiguous gradient on the sync's device (host or
 * device address), else NULL (no error). */
static void *contiguous_data(const cti_grad_sync *s, const ct_tensor *g) {
    if (!ct_is_contiguous(g) || ct_numel(g) == 0) return NULL;
    ct_device d = ct_device_of(g);
    if (s->cuda) return d.type == CT_CUDA && d.index == s->device ? ct_cuda_data_ptr(g) : NULL;
    return d.type == CT_CPU ? ct_data_ptr(g) : NULL;
}

/* Whether g is p's slot itself (the view finish set, accumulated in place). */
static bool is_slot(const cti_grad_sync *s, const gs_param *p, const ct_tensor *g) {
    return p->bytes && contiguous_data(s, g) == p->at;
}

/* Lets go of the gradient p's staging held on to. */
static void release(gs_param *p) {
    ct_tensor_free(p->held);
    p->held = NULL;
    p->src = NULL;
}

/* Stages p's gradient as it is now (zeros when it has none) and sets its
 * flag. A gradient that is the slot already costs nothing. A contiguous
 * float32/float64 one is held where it is: only its part inside the chunk
 * this rank sends first is copied into the buffer, the rest is read by
 * finish_step's additions. Anything else is copied into the slot whole.
 * Hooks call this once per parameter and step, so copies are memcpy, not a
 * libtorch copy_ with its dispatch, where they can be. A copy that fails is
 * recorded; the bucket goes out anyway, since the other ranks wait for it. */
static void stage(cti_grad_sync *s, gs_param *p) {
    gs_bucket *b = &s->buckets[p->bucket];
    release(p);
    ct_tensor *g = ct_grad(p->param);
    bool has = g != NULL;
    ct_device want = s->cuda ? ct_cuda(s->device) : ct_cpu();
    if (has && (ct_device_of(g).type != want.type || ct_device_of(g).index != want.index ||
                ct_dtype_of(g) != b->dtype)) {
        /* The model moved after new(): copy_ would convert silently. */
        char d[96];
        ct_describe(g, d, sizeof d);
        record(s, CT_ESTATE,
               "grad_sync: rank %d: bucket %d: parameter '%s': its gradient is %s, the bucket %s %s:%d "
               "(moved or cast after cti_grad_sync_new?)",
               s->rank, p->bucket, p->name, d, ct_dtype_name(b->dtype), s->cuda ? "cuda" : "cpu", want.index);
        has = false;
    }
    if (!has) b->all_had = false;
    if (s->cuda) {
        /* Device memory: copies are kernels on the current stream, and the
         * flags are written at launch. */
        if (!has) {
            if (ct_zero_(p->slot) != CT_OK) record_last(s, "zeroing its bucket slot", p->bucket, p->name);
        } else if (!is_slot(s, p, g) && ct_copy_(p->slot, g) != CT_OK) {
            record_last(s, "copying the gradient into its bucket", p->bucket, p->name);
        }
        p->src = has ? p->at : NULL;
        ct_tensor_free(g);
        return;
    }
    const char *data = has ? contiguous_data(s, g) : NULL;
    /* finish_step reads src; a shared-memory bucket must hold it all */
    bool fused = !b->shm && spans_dtype(b);
    /* The part of p inside what the messages send first, in bytes from p's start. */
    size_t from = 0, len = 0;
    if (fused) {
        size_t el = b->elsize;
        int64_t lo = b->steps[0].send_off, hi = lo + b->steps[0].send_len, pn = (int64_t)(p->bytes / el);
        int64_t a0 = lo > p->off ? lo : p->off, a1 = hi < p->off + pn ? hi : p->off + pn;
        if (a0 < a1) from = (size_t)(a0 - p->off) * el, len = (size_t)(a1 - a0) * el;
    }
    if (!has && fused) {
        memset(p->at + from, 0, len);
    } else if (!has) {
        memset(p->at, 0, p->bytes);
        p->src = p->at;
    } else if (data && data == p->at) {
        p->src = p->at;
    } else if (data && fused) {
        memcpy(p->at + from, data + from, len);
        p->src = data;
        p->held = ct_keep(g); /* out of the caller's scope: it must live until the bucket is done */
        g = NULL;
    } else {
        if (data) memcpy(p->at, data, p->bytes);
        else if (ct_copy_(p->slot, g) != CT_OK)
            record_last(s, "copying the gradient into its bucket", p->bucket, p->name);
        p->src = p->at;
    }
    ct_tensor_free(g);
    write_flag(b, p->flag, has);
}

/* CUDA buckets: writes the flags (one kernel unless a parameter had no
 * local gradient), on the device. */
static bool write_device_flags(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    ct_scope *sc = ct_scope_begin();
    int rc = ct_fill_(b->flags, 1.0);
    for (int i = b->first; rc == CT_OK && !b->all_had && i < b->first + b->count; i++) {
        if (s->params[i].src) continue; /* had a gradient (stage pointed src at its slot) */
        rc = ct_zero_(ct_narrow(b->flags, 0, i - b->first, 1));
    }
    ct_scope_end(sc);
    if (rc != CT_OK) record_last(s, "writing the has-gradient flags", bi, NULL);
    return rc == CT_OK;
}

/* NCCL: the flags, then one NCCL average of the whole bucket enqueued on
 * the current stream, after the kernels that produced and staged the
 * gradients. Nothing to poll: work that follows on the stream (the
 * optimizer step) sees the average, so the bucket counts as done. */
static void launch_nccl(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    b->state = B_DONE;
    b->t_launch = cti_clock_monotonic();
    if (!write_device_flags(s, bi)) return;
    int rc = b->to_owner ? cti_nccl_reduce(b->base, (size_t)b->n, b->dtype, CT_DIST_AVG, b->owner, s->device, NULL)
                         : cti_nccl_allreduce(b->base, (size_t)b->n, b->dtype, CT_DIST_AVG, s->device, NULL);
    if (rc != CT_OK) {
        record(s, rc, "grad_sync: rank %d: bucket %d: %s", s->rank, bi, ct_last_error());
        return;
    }
    s->stats.bytes += (uint64_t)b->n * b->elsize;
    s->stats.buckets++;
}

/* Staged: the flags on the device, then the whole bucket queued for
 * copying into its host buffer (pinned, or this rank's shared segment),
 * with an event after it; advance starts the host's reduction once the
 * event is done. Every slot's values are then in the host buffer, so the
 * additions read them there (src). A failure is recorded and the bucket
 * goes on: the other ranks wait for it. Any thread: no MPI here. */
static void launch_copy(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    b->state = B_COPYING;
    if (write_device_flags(s, bi)) {
        if (ct_cuda_copy_async(b->buf, b->dev) != CT_OK) record_last(s, "copying the bucket to the host", bi, NULL);
        else if (!(b->copied = ct_cuda_event_record(s->device)))
            record_last(s, "recording the copy's event", bi, NULL);
    }
    for (int i = b->first; i < b->first + b->count; i++) {
        gs_param *p = &s->params[i];
        p->src = b->base + (size_t)p->off * b->elsize;
    }
}

/* The host's part of a bucket whose gradients are in its buffer: shared
 * memory's phases, or the first message step. */
static void start_host(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    b->state = B_RUNNING;
    if (b->shm) {
        b->phase = 0;
        memset(b->got, 0, (size_t)s->lay.local_size * sizeof *b->got);
        publish(s, bi, ARRIVED);
        return;
    }
    if (!steps_start(s, b, bi)) b->state = B_DONE;
}

/* Stages the bucket's parameters that no hook staged in this window
 * (no gradient from this backward: an older one, or none) and sends the
 * bucket on its way: NCCL, the copy to the host (staged), or the host's
 * reduction. */
static void launch(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    for (int i = b->first; i < b->first + b->count; i++)
        if (!s->params[i].ready) stage(s, &s->params[i]);
    if (s->cuda && !s->staged) {
        launch_nccl(s, bi);
        return;
    }
    b->t_launch = cti_clock_monotonic();
    if (s->staged) launch_copy(s, bi);
    else start_host(s, bi);
}

/* Launches, in index order, every bucket whose parameters are all ready. */
static void launch_ready(cti_grad_sync *s) {
    while (s->next_launch < s->nbuckets && s->buckets[s->next_launch].nready == s->buckets[s->next_launch].count)
        launch(s, s->next_launch++);
}

/* ---- the way back ------------------------------------------------------- */

/* Points each .grad of bucket bi at its slot, which holds the average now
 * (no copy; a gradient that is the slot already stays). A parameter no rank
 * had a gradient for keeps none. */
static void write_back(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    if (b->owner >= 0 && b->owner != s->rank) {
        /* A sharded optimizer's bucket of another rank's parameters: this
         * rank does not step them, and has no average of them (to_owner)
         * or leaves it unused: .grad is None, as after zero_grad. */
        for (int i = b->first; i < b->first + b->count; i++) {
            gs_param *p = &s->params[i];
            release(p);
            if (ct_has_grad(p->param) && ct_set_grad(p->param, NULL) != CT_OK)
                record_last(s, "setting .grad to None (another rank's parameter)", bi, p->name);
        }
        return;
    }
    /* A CUDA bucket's flags are read back only when this rank lacked a
     * gradient somewhere (a sync on the host): otherwise every flag holds
     * at least this rank's share and is nonzero. */
    unsigned char *host_flags = NULL;
    bool on_host = !s->cuda || s->staged; /* the flags are in b->base */
    if (s->staged && ct_cuda_copy_async(b->dev, b->buf) != CT_OK) {
        record_last(s, "copying the averages back to the device", bi, NULL);
        return;
    }
    if (!on_host && !b->all_had) {
        size_t nb = (size_t)b->count * b->elsize;
        host_flags = malloc(nb);
        if (!host_flags) {
            record(s, CT_ENOMEM, "grad_sync: rank %d: bucket %d: out of memory", s->rank, bi);
            return;
        }
        if (ct_storage_read(b->flags, (size_t)b->numel * b->elsize, host_flags, nb) != CT_OK) {
            record_last(s, "reading the has-gradient flags back", bi, NULL);
            free(host_flags);
            return;
        }
    }
    for (int i = b->first; i < b->first + b->count; i++) {
        gs_param *p = &s->params[i];
        release(p);
        bool any;
        if (on_host) any = read_flag((const unsigned char *)b->base + (size_t)p->flag * b->elsize, b->elsize);
        else any = !host_flags || read_flag(host_flags + (size_t)(i - b->first) * b->elsize, b->elsize);
        if (!any) continue;
        ct_tensor *g = ct_grad(p->param);
        if (!g || !is_slot(s, p, g)) {
            if (ct_set_grad(p->param, p->slot) != CT_OK) record_last(s, "pointing .grad at its average", bi, p->name);
        }
        ct_tensor_free(g);
        p->averaged = b->owner == s->rank;
    }
    free(host_flags);
}

/* Launches every bucket not yet out, polls until all are reduced, and
 * writes each one back as soon as it is done (while later ones are still in
 * flight), unless the window already failed; then resets the buckets for
 * the next window. Errors stay in s->err. */
static void complete(cti_grad_sync *s) {
    s->in_finish = true;
    s->t_finish = cti_clock_monotonic();
    /* A rank that never comes (stuck, dead) ends the job after the
     * collective timeout, named (watch.h); nothing else changes here. */
    cti_dist_watch w;
    cti_dist_watch_begin(&w, "the gradient all-reduce");
    while (s->next_launch < s->nbuckets) launch(s, s->next_launch++);
    for (bool running = true; running;) {
        running = false;
        for (int i = 0; i < s->nbuckets; i++) {
            gs_bucket *b = &s->buckets[i];
            advance(s, i);
            if (b->state == B_RUNNING || b->state == B_COPYING) {
                running = true;
            } else if (!b->written && !s->err) {
                write_back(s, i);
                b->written = true;
            }
        }
        if (running) cti_dist_watch_poll(&w);
    }
    cti_dist_watch_end(&w);
    s->in_finish = false;
    for (size_t i = 0; i < s->nparams; i++) {
        s->params[i].ready = false;
        release(&s->params[i]);
    }
    for (int i = 0; i < s->nbuckets; i++) {
        s->buckets[i].state = B_IDLE;
        s->buckets[i].nready = 0;
        s->buckets[i].written = false;
        s->buckets[i].all_had = true;
    }
    s->next_launch = 0;
    s->gen++;
}

/* ---- the hook ------------------------------------------------------------ */

/* Runs inside backward, right after p's gradient was accumulated. */
static void on_grad(ct_tensor *t, void *ctx) {
    gs_param *p = ctx;
    cti_grad_sync *s = p->s;
    p->fired = true;
    /* A backward the context did not announce (a bare ct_backward): its
     * gradients stay local; the context refuses to step on them. */
    if (!s->announced && !s->stray[0]) snprintf(s->stray, sizeof s->stray, "%s", p->name);
    /* MPI runs FUNNELED: messages only move on the arming thread. NCCL
     * may be called from the autograd engine's device thread, which runs
     * CUDA backward while the arming thread waits in backward. */
    bool on_arm = pthread_equal(pthread_self(), s->arm_thread);
    if (!s->window || (!s->cuda && !on_arm)) return;
    gs_bucket *b = &s->buckets[p->bucket];
    if (b->state != B_IDLE) {
        record(s, CT_ESTATE,
               "grad_sync: rank %d: parameter '%s' got a gradient after its bucket %d was launched, in a "
               "backward that cti_grad_sync_arm did not announce (the ranks cannot reduce it consistently)",
               s->rank, p->name, p->bucket);
        return;
    }
    /* Copied now, while the gradient is likely still in cache; again if
     * another accumulation comes before the bucket goes out. */
    stage(s, p);
    if (!p->ready) {
        p->ready = true;
        b->nready++;
    }
    launch_ready(s);
    if (on_arm) progress(s); /* staged CUDA: copies from any thread, messages from this one */
}

/* ---- building the buckets ------------------------------------------------- */

/* An MPI type of elsize bytes: messages only move bytes, so any float
 * dtype (half types too, which MPI lacks) travels as unsigned integers. */
static MPI_Datatype bytes_type(size_t elsize) {
    switch (elsize) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
    }
}

/* A NEW view of the 1-D buf[off .. off + len), outside any scope (the
 * caller of new may have one open). */
static ct_tensor *flat_view(ct_tensor *buf, int64_t off, int64_t len) { return ct_keep(ct_narrow(buf, 0, off, len)); }

/* The same, shaped as a parameter. */
static ct_tensor *shaped_view(ct_tensor *buf, int64_t off, int64_t len, int ndim, const int64_t *shape) {
    ct_tensor *flat = ct_narrow(buf, 0, off, len);
    ct_tensor *v = ct_view(flat, ndim, shape);
    ct_tensor_free(flat);
    return ct_keep(v);
}

/* Checks what a sync cannot take: non-floating dtypes (no gradient) and
 * parameters on more than one device (one sync is one
 * communicator: the first parameter decides). Returns a status. */
static int check_param(cti_grad_sync *s, const gs_param *p, bool first) {
    ct_device d = ct_device_of(p->param);
    if (!ct_dtype_is_floating(ct_dtype_of(p->param)))
        return ct_set_error(CT_EDTYPE, "grad_sync: rank %d: parameter '%s' is %s: only floating parameters have gradients",
                            s->rank, p->name, ct_dtype_name(ct_dtype_of(p->param)));
    if (first) {
        s->cuda = d.type == CT_CUDA;
        s->device = d.index;
    } else if ((d.type == CT_CUDA) != s->cuda || (s->cuda && d.index != s->device)) {
        return ct_set_error(CT_ENOTSUP,
                            "grad_sync: rank %d: parameter '%s' is on %s:%d, earlier ones on %s:%d: a model's "
                            "parameters must share one device for data-parallel training",
                            s->rank, p->name, d.type == CT_CUDA ? "cuda" : "cpu", d.index, s->cuda ? "cuda" : "cpu",
                            s->device);
    }
    return CT_OK;
}

/* Assigns parameters to buckets, last registered first: a new bucket starts
 * when the dtype changes or the next parameter would overflow bucket_bytes
 * (a parameter larger than that gets a bucket of its own). With owners
 * (a sharded optimizer's: owner[i] for params[i], -1 for none) a bucket
 * holds one owner's parameters: each owner fills a bucket of its own the
 * same way, and params[] is then ordered bucket by bucket (each bucket's
 * parameters stay in backward's order), as first/count need. */
static int plan_buckets(cti_grad_sync *s, size_t bucket_bytes, const int *owner) {
    s->buckets = calloc(s->nparams ? s->nparams : 1, sizeof *s->buckets);
    int *open = calloc((size_t)s->size + 1, sizeof *open); /* by owner + 1: its bucket being filled, + 1 (0: none) */
    if (!s->buckets || !open) {
        free(open);
        return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    }
    /* params[] already holds the reverse order. */
    for (size_t i = 0; i < s->nparams; i++) {
        gs_param *p = &s->params[i];
        int rc = check_param(s, p, i == 0);
        if (rc != CT_OK) {
            free(open);
            return rc;
        }
        ct_dtype dt = ct_dtype_of(p->param);
        size_t bytes = (size_t)ct_numel(p->param) * ct_dtype_size(dt);
        int o = owner ? owner[i] : -1, *at = owner ? &open[o + 1] : &open[0];
        if (!owner && s->nbuckets) *at = s->nbuckets; /* unsharded: the last bucket is the open one */
        gs_bucket *b = *at ? &s->buckets[*at - 1] : NULL;
        if (!b || b->dtype != dt || (size_t)b->numel * b->elsize + bytes > bucket_bytes) {
            b = &s->buckets[s->nbuckets++];
            b->dtype = dt;
            b->elsize = ct_dtype_size(dt);
            b->owner = o;
            *at = s->nbuckets;
        }
        p->bucket = (int)(b - s->buckets);
        b->count++;
        b->numel += ct_numel(p->param);
    }
    free(open);
    /* Bucket by bucket, each in backward's order (a counting sort), then each bucket's range. */
    gs_param *sorted = malloc((s->nparams ? s->nparams : 1) * sizeof *sorted);
    if (!sorted) return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    for (int bi = 0, k = 0; bi < s->nbuckets; bi++) {
        s->buckets[bi].first = k;
        for (size_t i = 0; i < s->nparams; i++)
            if (s->params[i].bucket == bi) sorted[k++] = s->params[i];
    }
    memcpy(s->params, sorted, s->nparams * sizeof *sorted);
    free(sorted);
    return CT_OK;
}

/* Lays bucket b's parameters' slots (views shaped as the parameters) and
 * flags out in buf (its buffer, or its device copy when staged), whose
 * first byte is at base, in order. */
static int make_slots(cti_grad_sync *s, gs_bucket *b, ct_tensor *buf, char *base) {
    int64_t off = 0;
    for (int i = b->first; i < b->first + b->count; i++) {
        gs_param *pr = &s->params[i];
        int64_t shape[16];
        int nd = ct_shape(pr->param, shape, 16);
        if (nd < 0 || nd > 16)
            return ct_set_error(CT_ESHAPE, "grad_sync: rank %d: parameter '%s' has %d dims", s->rank, pr->name, nd);
        int64_t numel = ct_numel(pr->param);
        pr->slot = shaped_view(buf, off, numel, nd, shape);
        if (!pr->slot) return ct_last_code();
        pr->at = base + (size_t)off * b->elsize;
        pr->bytes = (size_t)numel * b->elsize;
        pr->off = off;
        pr->flag = b->numel + (i - b->first);
        off += numel;
    }
    return CT_OK;
}

/* A bucket's buffer on the device (NEW), with views for zeroing the
 * gradients and writing the flags; *base its device address. */
static ct_tensor *device_bucket(cti_grad_sync *s, gs_bucket *b, char **base) {
    ct_topts o = {.dtype = b->dtype, .device = ct_cuda(s->device)};
    ct_tensor *buf = ct_keep(ct_zeros(CT_SHAPE(b->n), &o));
    if (!buf) return NULL;
    *base = ct_cuda_data_ptr(buf);
    b->grads = flat_view(buf, 0, b->numel);
    b->flags = flat_view(buf, b->numel, b->count);
    if (!*base || !b->grads || !b->flags) {
        ct_tensor_free(buf);
        return NULL;
    }
    return buf;
}

/* A CUDA bucket for NCCL: its buffer on the device and the slots; NCCL
 * needs no message steps. */
static int build_bucket_cuda(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    b->buf = device_bucket(s, b, &b->base);
    return b->buf ? make_slots(s, b, b->buf, b->base) : ct_last_code();
}

/* The slots of a bucket whose buffer is on the host: in that buffer, or,
 * staged, in a copy of it on the device. */
static int host_bucket_slots(cti_grad_sync *s, gs_bucket *b) {
    if (!s->staged) return make_slots(s, b, b->buf, b->base);
    char *dbase = NULL;
    b->dev = device_bucket(s, b, &dbase);
    return b->dev ? make_slots(s, b, b->dev, dbase) : ct_last_code();
}

/* Bucket b's messages: among `group`, by its algorithm, over the elements
 * [at, at + n) of its buffer (allreduce_steps.h), with a scratch buffer
 * for what an addition step receives. Half types (every rank's group
 * only) get views of each addition's range for libtorch. */
static int make_steps(cti_grad_sync *s, gs_bucket *b, int bi, gs_group *group, int64_t at, int64_t n) {
    b->group = group;
    if (b->to_owner) { /* to the owner's place: its rank among every rank, or its host between hosts */
        int root = group == &s->all ? b->owner : s->lay.host_of[b->owner];
        b->nsteps = cti_ar_reduce_steps(group->p, group->r, root, at, n, &b->steps);
    } else {
        cti_ar_algo algo = group->chosen ? group->algo : cti_ar_choose(group->p, n * (int64_t)b->elsize);
        group->uses[algo] = true;
        b->nsteps = cti_ar_steps(algo, group->p, group->r, at, n, &b->steps);
    }
    if (b->nsteps < 0) return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    int64_t largest = 0;
    for (int i = 0; i < b->nsteps; i++) {
        const cti_ar_step *t = &b->steps[i];
        int64_t m = t->send_len > t->recv_len ? t->send_len : t->recv_len;
        if (m > INT_MAX)
            return ct_set_error(CT_EINVAL, "grad_sync: rank %d: bucket %d holds %lld elements: a message of %lld "
                                "exceeds MPI's int count (use a smaller bucket size)",
                                s->rank, bi, (long long)b->n, (long long)m);
        if (t->add && t->recv_len > largest) largest = t->recv_len;
    }
    b->type = bytes_type(b->elsize);
    b->req[0] = b->req[1] = MPI_REQUEST_NULL;
    ct_topts o = {.dtype = b->dtype};
    b->scratch = ct_keep(ct_zeros(CT_SHAPE(largest > 0 ? largest : 1), &o));
    if (!b->scratch) return ct_last_code();
    if (spans_dtype(b)) return CT_OK;
    b->chunk = calloc((size_t)b->nsteps, sizeof *b->chunk);
    b->incoming = calloc((size_t)b->nsteps, sizeof *b->incoming);
    if (!b->chunk || !b->incoming) return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    for (int i = 0; i < b->nsteps; i++) {
        const cti_ar_step *t = &b->steps[i];
        if (!t->add) continue;
        b->chunk[i] = flat_view(b->buf, t->recv_off, t->recv_len);
        b->incoming[i] = flat_view(b->scratch, 0, t->recv_len);
        if (!b->chunk[i] || !b->incoming[i]) return ct_last_code();
    }
    return CT_OK;
}

/* A shared-memory bucket: its buffer at `off` in this rank's segment (a
 * tensor holding a reference to the mapping), every host rank's copy, and
 * the slots; between hosts, messages over this rank's share. */
static int build_bucket_shm(cti_grad_sync *s, int bi, size_t off) {
    gs_bucket *b = &s->buckets[bi];
    int n = s->lay.local_size, me = s->lay.local_rank;
    b->shm = true;
    b->peer = calloc((size_t)n, sizeof *b->peer);
    b->mine_in = calloc((size_t)n, sizeof *b->mine_in);
    b->got = calloc((size_t)n, sizeof *b->got);
    b->share_off = calloc((size_t)s->shares, sizeof *b->share_off);
    b->share_len = calloc((size_t)s->shares, sizeof *b->share_len);
    if (!b->peer || !b->mine_in || !b->got || !b->share_off || !b->share_len)
        return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    for (int c = 0; c < s->shares; c++) cti_ar_chunk(0, b->n, s->shares, c, &b->share_off[c], &b->share_len[c]);
    char *base = cti_node_shm_at(s->shm, me) + off;
    void *ref = cti_node_shm_ref(s->shm);
    ct_tensor *buf = ct_from_blob(base, 1, (int64_t[]){b->n}, b->dtype, cti_node_shm_unref, ref);
    if (!buf) {
        cti_node_shm_unref(NULL, ref); /* a failed ct_from_blob never calls its deleter */
        return ct_last_code();
    }
    b->buf = ct_keep(buf);
    b->base = base;
    b->to_owner = b->owner >= 0;
    b->owner_at = -1; /* the owner is on another host */
    for (int q = 0; q < n; q++) {
        b->peer[q] = cti_node_shm_at(s->shm, q) + off;
        if (b->to_owner && s->lay.hosts == 1) b->mine_in[q] = b->peer[q]; /* what the owner averages: every copy, whole */
        else if (me < s->shares) b->mine_in[q] = b->peer[q] + (size_t)b->share_off[me] * b->elsize;
        if (b->to_owner && s->lay.members[q] == b->owner) b->owner_at = q;
    }
    if (s->across.comm != MPI_COMM_NULL) { /* this rank has a share, and there are other hosts */
        int rc = make_steps(s, b, bi, &s->across, b->share_off[me], b->share_len[me]);
        if (rc != CT_OK) return rc;
    }
    return host_bucket_slots(s, b);
}

/* A bucket on messages through every rank: its buffer, the steps, the slots. */
static int build_bucket(cti_grad_sync *s, int bi) {
    gs_bucket *b = &s->buckets[bi];
    b->to_owner = b->owner >= 0; /* every rank's group: a reduce to it (NCCL's, or messages') */
    if (s->cuda && !s->staged) return build_bucket_cuda(s, bi);
    ct_topts o = {.dtype = b->dtype, .pin_memory = s->staged}; /* pinned: the copies do not block the host */
    b->buf = ct_keep(ct_zeros(CT_SHAPE(b->n), &o));
    if (!b->buf) return ct_last_code();
    b->base = ct_data_ptr(b->buf);
    if (!b->base) return ct_last_code();
    int rc = make_steps(s, b, bi, &s->all, 0, b->n);
    return rc != CT_OK ? rc : host_bucket_slots(s, b);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Whether the hosts' layout lets their ranks share memory: every rank on
 * one host, or several hosts with more than one rank on some (not one
 * rank on each: that is messages through every rank). Sets s->shares:
 * the host's ranks on one host; on several, the fewest ranks a host has,
 * so that share i has an owner on every host (host rank i) and those
 * owners' all-reduce between hosts has one rank on each. */
static bool shm_layout(cti_grad_sync *s) {
    const cti_node_layout *l = &s->lay;
    s->shares = l->hosts == 1 ? l->local_size : l->min_local_size;
    return l->hosts == 1 || l->max_local_size > 1;
}

/* The group between hosts: host rank i (i < shares) and host rank i of
 * every other host, in host order; the other host ranks take part in no
 * messages (MPI_COMM_NULL). Collective over the sync's communicator. */
static int make_across(cti_grad_sync *s) {
    bool owner = s->lay.local_rank < s->shares;
    int err = MPI_Comm_split(s->comm, owner ? s->lay.local_rank : MPI_UNDEFINED, s->lay.host, &s->across.comm);
    if (err != MPI_SUCCESS) return cti_dist_mpi_failed("grad_sync", "MPI_Comm_split (the ranks between hosts)", err);
    s->across.p = s->lay.hosts;
    s->across.r = s->lay.host;
    return CT_OK;
}

/* CTRIAL_GRAD_SYNC: "ring" or "halving-doubling" ask for messages through
 * every rank, every bucket by that algorithm (*forced); unset, shared
 * memory where it can be had, and messages by cti_ar_choose, bucket by
 * bucket. Sets s->all, agreed: the ring when any rank asks for it, else
 * halving-doubling when any does (algorithms that differ would never pair
 * their messages). A value that is neither is CT_EINVAL on every rank.
 * Collective. */
static int choose_messages(cti_grad_sync *s, bool *forced) {
    const char *env = getenv("CTRIAL_GRAD_SYNC");
    enum { BY_SIZE = 2 };
    int64_t v[2] = {1, BY_SIZE}; /* every rank's setting is valid; the algorithm */
    *forced = env && *env;
    if (*forced && strcmp(env, "ring") == 0) v[1] = CT_AR_RING;
    else if (*forced && strcmp(env, "halving-doubling") == 0)
        v[1] = cti_ar_fits(CT_AR_HALVING_DOUBLING, s->size) ? CT_AR_HALVING_DOUBLING : CT_AR_RING;
    else if (*forced) v[0] = 0;
    bool bad = v[0] == 0;
    if (ct_dist_allreduce_i64(v, 2, CT_DIST_MIN) != CT_OK) return ct_last_code();
    if (bad)
        return ct_set_error(CT_EINVAL, "grad_sync: rank %d: CTRIAL_GRAD_SYNC='%s': expected ring or halving-doubling "
                            "(or unset: shared memory where ranks share a machine)",
                            s->rank, env);
    if (v[0] == 0)
        return ct_set_error(CT_EINVAL, "grad_sync: rank %d: another rank's CTRIAL_GRAD_SYNC is neither ring nor "
                            "halving-doubling", s->rank);
    s->all.chosen = v[1] != BY_SIZE;
    s->all.algo = v[1] == BY_SIZE ? CT_AR_RING : (cti_ar_algo)v[1];
    if (*forced)
        snprintf(s->why_not_shm, sizeof s->why_not_shm, "CTRIAL_GRAD_SYNC=%s%s", env,
                 strcmp(env, "halving-doubling") == 0 && v[1] == CT_AR_RING
                     ? ", but the ranks are not a power of two"
                     : "");
    return CT_OK;
}

/* Builds every bucket: in shared memory when the ranks share this machine
 * (and CTRIAL_GRAD_SYNC is not set), the others on messages through every
 * rank; on several hosts with several ranks each, in shared memory on each
 * host with messages between hosts. Collective: the ranks agree on shared
 * memory or none, and on the messages' algorithm. */
static int build_buckets(cti_grad_sync *s) {
    for (int bi = 0; bi < s->nbuckets; bi++) {
        s->buckets[bi].n = s->buckets[bi].numel + s->buckets[bi].count;
        s->buckets[bi].all_had = true;
    }
    size_t bytes = align64((size_t)s->nbuckets * sizeof(gs_flags));
    size_t *at = calloc(s->nbuckets > 0 ? (size_t)s->nbuckets : 1, sizeof *at);
    if (!at) return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: out of memory", s->rank);
    bool any = false;
    for (int bi = 0; bi < s->nbuckets; bi++) {
        at[bi] = bytes;
        if (spans_dtype(&s->buckets[bi])) {
            bytes += align64((size_t)s->buckets[bi].n * s->buckets[bi].elsize);
            any = true;
        }
    }
    int rc = CT_OK;
    if (!s->cuda || s->staged) {
        bool forced = false;
        rc = choose_messages(s, &forced);
        if (rc == CT_OK) rc = cti_node_layout_get(s->comm, &s->lay);
        if (rc != CT_OK) {
            free(at);
            return rc;
        }
        bool layout = shm_layout(s); /* the same on every rank */
        char why[sizeof s->why_not_shm];
        s->shm = cti_node_shm_new(s->comm, s->lay.local_size, s->lay.members, bytes, any && !forced && layout, why,
                                 sizeof why);
        if (!any) snprintf(s->why_not_shm, sizeof s->why_not_shm, "no float32 or float64 bucket");
        else if (!forced && !layout)
            snprintf(s->why_not_shm, sizeof s->why_not_shm, "one rank on each of %d hosts", s->lay.hosts);
        else if (!forced) snprintf(s->why_not_shm, sizeof s->why_not_shm, "%s", why);
        /* every rank has a segment or none, so every rank splits or none */
        if (s->shm && s->lay.hosts > 1) rc = make_across(s);
    }
    for (int bi = 0; rc == CT_OK && bi < s->nbuckets; bi++)
        rc = s->shm && spans_dtype(&s->buckets[bi]) ? build_bucket_shm(s, bi, at[bi]) : build_bucket(s, bi);
    free(at);
    return rc;
}

#endif /* CTRIAL_HAVE_MPI */
/* ======================================================================== */

cti_grad_sync *cti_grad_sync_new(ct_module *model, size_t bucket_bytes) {
    return cti_grad_sync_new_owned(model, bucket_bytes, NULL, NULL);
}

cti_grad_sync *cti_grad_sync_new_owned(ct_module *model, size_t bucket_bytes,
                                       int (*owner_of)(const ct_tensor *param, void *ctx), void *ctx) {
    int *owner = NULL;
    if (!model) {
        ct_set_error(CT_EINVAL, "cti_grad_sync_new: model is NULL");
        return NULL;
    }
    cti_grad_sync *s = calloc(1, sizeof *s);
    if (!s) {
        ct_set_error(CT_ENOMEM, "cti_grad_sync_new: out of memory");
        return NULL;
    }
    s->rank = ct_dist_rank();
    s->size = ct_dist_size();
#if CTRIAL_HAVE_MPI
    s->comm = MPI_COMM_NULL;
    s->across.comm = MPI_COMM_NULL;
    s->gen = 1;
#endif
    /* The parameters that require grad, last registered first. */
    size_t n = ct_nn_num_params(model);
    s->params = calloc(n ? n : 1, sizeof *s->params);
    if (!s->params) {
        free(s);
        ct_set_error(CT_ENOMEM, "cti_grad_sync_new: out of memory");
        return NULL;
    }
    for (size_t i = n; i-- > 0;) {
        const char *name = NULL;
        ct_tensor *t = ct_nn_param_at(model, i, &name);
        if (!t) goto fail;
        if (!ct_requires_grad(t)) continue;
        gs_param *p = &s->params[s->nparams++];
        p->s = s;
        p->param = t;
        p->name = strdup(name ? name : "?");
        if (!p->name) {
            ct_set_error(CT_ENOMEM, "cti_grad_sync_new: out of memory");
            goto fail;
        }
    }
    if (s->size == 1) return s; /* nothing to average: no buckets, no hooks */
#if CTRIAL_HAVE_MPI
    {
        /* Collective: every rank builds its sync at the same point. */
        int err = MPI_Comm_dup(cti_dist_base_comm(), &s->comm);
        if (err != MPI_SUCCESS) {
            cti_dist_mpi_failed("grad_sync", "MPI_Comm_dup", err);
            goto fail;
        }
        s->all = (gs_group){.comm = s->comm, .p = s->size, .r = s->rank};
        if (owner_of && !(owner = malloc(s->nparams * sizeof *owner + 1))) {
            ct_set_error(CT_ENOMEM, "cti_grad_sync_new: out of memory");
            goto fail;
        }
        for (size_t i = 0; owner && i < s->nparams; i++) {
            int o = owner_of(s->params[i].param, ctx);
            owner[i] = o >= 0 && o < s->size ? o : -1;
        }
        int prc = plan_buckets(s, bucket_bytes ? bucket_bytes : DEFAULT_BUCKET_BYTES, owner);
        free(owner);
        owner = NULL;
        if (prc != CT_OK) goto fail;
        if (s->cuda) {
            /* NCCL, or through host memory (cuda_transport.h): decided alike on every rank */
            int how = cti_cuda_transport_get(s->device);
            if (how < 0) goto fail;
            s->staged = how == CTI_CUDA_HOST;
        }
        int *tag_ub = NULL, flag = 0;
        MPI_Comm_get_attr(s->comm, MPI_TAG_UB, &tag_ub, &flag);
        if (flag && tag_ub && s->nbuckets > *tag_ub) {
            ct_set_error(CT_EINVAL, "grad_sync: rank %d: %d buckets exceed MPI's largest tag %d (use larger buckets)",
                         s->rank, s->nbuckets, *tag_ub);
            goto fail;
        }
        if (build_buckets(s) != CT_OK) goto fail;
        /* NCCL's communicator is created over MPI, which runs FUNNELED:
         * here, on this thread, not later in a hook on autograd's. */
        if (s->cuda && !s->staged && cti_nccl_allreduce(NULL, 0, s->buckets[0].dtype, CT_DIST_SUM, s->device, NULL) != CT_OK)
            goto fail;
        for (size_t i = 0; i < s->nparams; i++)
            if (ct_set_post_accumulate_grad_hook(s->params[i].param, on_grad, &s->params[i]) != CT_OK) goto fail;
    }
    return s;
#else
    ct_set_error(CT_ENOTSUP, "cti_grad_sync_new: %d ranks, but this ctrial was built without MPI", s->size);
#endif
fail:;
    free(owner);
    /* Keep the first failure's message through the clean-up. */
    int code = ct_last_code();
    char msg[MSG_LEN];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    cti_grad_sync_free(s);
    ct_set_error(code ? code : CT_ETORCH, "%s", msg);
    return NULL;
}

#if CTRIAL_HAVE_MPI
/* Lends every parameter without a .grad its slot, zeroed, as .grad (see
 * "Gradients as bucket views"); a failure is recorded for finish and leaves
 * that .grad None (staging then copies). */
static void lend_slots(cti_grad_sync *s) {
    for (int bi = 0; bi < s->nbuckets; bi++) {
        gs_bucket *b = &s->buckets[bi];
        int lend = 0;
        for (int i = b->first; i < b->first + b->count; i++) {
            gs_param *p = &s->params[i];
            p->fired = false;
            p->lent = !ct_has_grad(p->param);
            lend += p->lent;
        }
        if (!lend) continue;
        /* On a GPU each zeroing is a kernel: one for the whole bucket when
         * every slot is lent (the usual step after zero_grad). */
        bool whole = s->cuda && lend == b->count;
        if (whole && ct_zero_(b->grads) != CT_OK) record_last(s, "zeroing the bucket", bi, NULL);
        for (int i = b->first; i < b->first + b->count; i++) {
            gs_param *p = &s->params[i];
            if (!p->lent) continue;
            int rc = whole ? CT_OK : s->cuda ? ct_zero_(p->slot) : (memset(p->at, 0, p->bytes), CT_OK);
            if (rc == CT_OK) rc = ct_set_grad(p->param, p->slot);
            if (rc != CT_OK) {
                record_last(s, "lending its bucket slot as .grad", bi, p->name);
                p->lent = false;
            }
        }
    }
}
#endif

#if CTRIAL_HAVE_MPI
/* Before a backward adds to gradients an earlier window averaged (a second
 * backward before the step: the context finishes a window after each
 * backward of a step batch; or a window completed by arm): a sharded
 * optimizer's buckets hold those averages on their owner alone (the
 * others' .grad is None), so the next reduction would count them once
 * instead of once for every rank. The owner's averages become sums, and
 * the next average is then the earlier average plus the new one, as the
 * averages every rank shares give without sharding. A gradient zeroed in
 * place since stays zero. */
static void sums_for_owners(cti_grad_sync *s) {
    for (size_t i = 0; i < s->nparams; i++) {
        gs_param *p = &s->params[i];
        if (!p->averaged) continue;
        p->averaged = false;
        ct_tensor *g = ct_grad(p->param);
        if (g && is_slot(s, p, g) && ct_mul_scalar_(p->slot, (double)s->size) != CT_OK)
            record_last(s, "turning its average into a sum", p->bucket, p->name);
        ct_tensor_free(g);
    }
}
#endif

void cti_grad_sync_arm(cti_grad_sync *s, bool armed) {
    if (!s || s->size == 1) return;
#if CTRIAL_HAVE_MPI
    if (s->window) {
        /* Another backward before finish (every rank sees this call): the
         * open window is completed now, before that backward can touch
         * buckets in flight, and a new one opens for what it adds. */
        complete(s);
    } else if (armed) {
        s->window = true;
    }
    sums_for_owners(s);
    s->arm_thread = pthread_self();
    s->announced = true;
    lend_slots(s);
#else
    (void)armed;
#endif
}

void cti_grad_sync_after_backward(cti_grad_sync *s) {
    if (!s || s->size == 1) return;
#if CTRIAL_HAVE_MPI
    s->announced = false;
    for (size_t i = 0; i < s->nparams; i++) {
        gs_param *p = &s->params[i];
        /* A lent slot the backward added nothing to goes back: None, as a
         * single process would have it. Nothing is staged from it yet (a
         * bucket launches only when every parameter's hook fired). */
        if (p->lent && !p->fired && ct_set_grad(p->param, NULL) != CT_OK)
            record(s, ct_last_code(), "grad_sync: rank %d: parameter '%s': taking back its lent slot: %s", s->rank,
                   p->name, ct_last_error());
        p->lent = false;
    }
#endif
}

int cti_grad_sync_finish(cti_grad_sync *s) {
    if (!s) return ct_set_error(CT_EINVAL, "cti_grad_sync_finish: s is NULL");
    if (s->size == 1 || !s->window) return CT_OK;
#if CTRIAL_HAVE_MPI
    complete(s);
    s->window = false;
    int err = s->err;
    s->err = 0;
    if (err) return ct_set_error(err, "%s", s->msg);
#endif
    return CT_OK;
}

bool cti_grad_sync_stray(cti_grad_sync *s, char *name, size_t len) {
    if (!s || !s->stray[0]) return false;
    snprintf(name, len, "%s", s->stray);
    s->stray[0] = '\0';
    return true;
}

#if CTRIAL_HAVE_MPI
/* The algorithms a group's buckets take (uses), after "shared memory + "
 * between hosts. A static string. */
static const char *messages_name(const bool uses[2], bool between_hosts) {
    static const char *const names[2][3] = {
        {"ring", "halving-doubling", "ring and halving-doubling"},
        {"shared memory + ring", "shared memory + halving-doubling", "shared memory + ring and halving-doubling"},
    };
    int which = !uses[CT_AR_HALVING_DOUBLING] ? 0 : uses[CT_AR_RING] ? 2 : 1;
    return names[between_hosts][which];
}

/* How the host's buckets are averaged, and why not by shared memory where
 * it is not (cti_grad_sync_transport). */
static const char *host_transport(const cti_grad_sync *s, char *why, size_t len) {
    /* a segment is made only when some bucket goes in it (build_buckets) */
    if (s->shm && s->lay.hosts > 1) {
        /* the float buckets' way between hosts (as this rank's share takes it: the same on every host rank
         * that has one, and the ring for the others, which send nothing) */
        const cti_node_layout *l = &s->lay;
        if (why && len && l->min_local_size == l->max_local_size)
            snprintf(why, len, "%d hosts of %d ranks", l->hosts, l->local_size);
        else if (why && len)
            snprintf(why, len, "%d hosts of %d to %d ranks", l->hosts, l->min_local_size, l->max_local_size);
        return messages_name(s->across.uses, true);
    }
    if (s->shm) return "shared memory";
    if (why && len) snprintf(why, len, "%s", s->why_not_shm);
    return messages_name(s->all.uses, false);
}
#endif

/* ---- parameters from their owners (a sharded optimizer) ------------------- */

#if CTRIAL_HAVE_MPI
/* The parameters of bucket bi among the n whose data are at data[]
 * (contiguous ones: a slot holds its parameter's elements in order): for
 * each, in the bucket's order, its place j among them into at[] and its
 * gs_param into slot[]. Returns how many. */
static int params_in_bucket(const cti_grad_sync *s, int bi, size_t n, void *const *data, int *at, int *slot) {
    const gs_bucket *b = &s->buckets[bi];
    int k = 0;
    for (int i = b->first; i < b->first + b->count; i++) {
        const void *d = ct_data_ptr(s->params[i].param);
        for (size_t j = 0; j < n; j++)
            if (data[j] == d) {
                at[k] = (int)j;
                slot[k++] = i;
                break;
            }
    }
    return k;
}

/* The host rank (0 .. local_size-1) of the sync's rank r, -1 if elsewhere. */
static int host_rank_of(const cti_grad_sync *s, int r) {
    for (int q = 0; q < s->lay.local_size; q++)
        if (s->lay.members[q] == r) return q;
    return -1;
}

/* Several hosts: the rank that carries rank `owner`'s parameters on host h
 * — the owner itself on its own host; elsewhere the host's rank at the
 * owner's place on its host, wrapped to h's size, so that the carriers
 * spread over a host as the owners do. */
static int carrier_on(const cti_grad_sync *s, int owner, int h) {
    const int *host_of = s->lay.host_of;
    int place = 0, size = 0;
    for (int r = 0; r < s->size; r++) {
        place += r < owner && host_of[r] == host_of[owner];
        size += host_of[r] == h;
    }
    for (int r = 0, i = 0; r < s->size; r++)
        if (host_of[r] == h && i++ == place % size) return r;
    return -1; /* (no such host) */
}

/* Several hosts: bucket bi's parameters [lo, hi) (elements of its buffer)
 * from their owner's copy into the copy of each other host's carrier, by
 * messages on the sync's communicator: the owner sends to every carrier,
 * a carrier receives. Waits (watched) for this rank's part. Returns a
 * status. */
static int carry_between_hosts(cti_grad_sync *s, int bi, int64_t lo, int64_t hi, cti_dist_watch *w) {
    gs_bucket *b = &s->buckets[bi];
    MPI_Request *req = malloc((size_t)s->lay.hosts * sizeof *req);
    if (!req) return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: sharing parameters: out of host memory", s->rank);
    int nreq = 0, err = MPI_SUCCESS, tag = s->nbuckets + bi; /* (no gradient message is in flight) */
    void *at = b->base + (size_t)lo * b->elsize;
    MPI_Datatype type = bytes_type(b->elsize);
    for (int h = 0; h < s->lay.hosts && err == MPI_SUCCESS; h++) {
        int carrier = carrier_on(s, b->owner, h);
        if (carrier == b->owner) continue; /* the owner's host */
        if (s->rank == b->owner) err = MPI_Isend(at, (int)(hi - lo), type, carrier, tag, s->comm, &req[nreq++]);
        else if (s->rank == carrier) err = MPI_Irecv(at, (int)(hi - lo), type, b->owner, tag, s->comm, &req[nreq++]);
    }
    int done = err != MPI_SUCCESS;
    while (!done) {
        err = MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) break;
        if (!done) cti_dist_watch_poll(w);
    }
    free(req);
    if (err == MPI_SUCCESS) return CT_OK;
    char call[96];
    snprintf(call, sizeof call, "passing bucket %d's parameters between hosts (MPI_Isend, MPI_Irecv)", bi);
    return cti_dist_mpi_failed("grad_sync", call, err);
}
#endif

int cti_grad_sync_share_params(cti_grad_sync *s, size_t n, ct_tensor *const *params, const int *owners, bool *done) {
    for (size_t j = 0; j < n; j++) done[j] = false;
    if (!s || s->size == 1) return CT_OK;
#if CTRIAL_HAVE_MPI
    /* Shared memory, and no window open. On several hosts only a sharded
     * optimizer's buckets (one owner each): its parameters go from its
     * copy to one carrier on each other host by messages, and the host's
     * ranks copy them from the carrier's copy. */
    if (!s->shm || s->window || s->cuda) return CT_OK;
    bool hosts = s->lay.local_size != s->size;
    uint32_t gen = ++s->param_gen;
    /* [nparams] twice: per bucket, from its first, its parameters' places
     * among params[] and in the sync; [nbuckets] twice: how many it has
     * among them, and whether they crossed between hosts */
    int *at = malloc(((size_t)s->nparams * 2 + (size_t)s->nbuckets * 2 + 1) * sizeof *at);
    int *slot = at ? at + s->nparams : NULL, *nin = at ? slot + s->nparams : NULL, *carried = nin ? nin + s->nbuckets : NULL;
    void **data = malloc((n ? n : 1) * sizeof *data);
    if (!at || !data) {
        free(at);
        free(data);
        return ct_set_error(CT_ENOMEM, "grad_sync: rank %d: sharing parameters: out of host memory", s->rank);
    }
    for (int bi = 0; bi < s->nbuckets; bi++) nin[bi] = 0, carried[bi] = CT_OK;
    for (size_t j = 0; j < n; j++) data[j] = ct_is_contiguous(params[j]) ? ct_data_ptr(params[j]) : NULL;
    int me = s->lay.local_rank, rc = CT_OK, failed = CT_OK;
    /* Three passes over the buckets, so that the ranks write and copy at
     * the same time rather than bucket by bucket in turn: 1. each owner
     * writes its parameters into its copy's slots (and sends them to the
     * other hosts' carriers) and publishes PARAMS_OUT; 2. once a bucket's
     * are out everywhere on the host, every rank copies the others' (or
     * the carrier's) and publishes PARAMS_IN; 3. no rank writes its copy
     * again (the next backward) before every rank has read it. Pass 1
     * waits for no flag, so every rank finishes it, whatever the others'
     * messages wait for. */
    cti_dist_watch w;
    cti_dist_watch_begin(&w, "the sharded optimizer's parameters");
    for (int bi = 0; bi < s->nbuckets && rc == CT_OK; bi++) {
        gs_bucket *b = &s->buckets[bi];
        int *bat = at + b->first, *bslot = slot + b->first; /* (a bucket has at most count of them) */
        int k = b->shm && (!hosts || b->owner >= 0) ? params_in_bucket(s, bi, n, data, bat, bslot) : 0;
        int64_t lo = INT64_MAX, hi = 0; /* the elements the parameters span */
        for (int m = 0; m < k; m++) {
            const gs_param *q = &s->params[bslot[m]];
            if (hosts && owners[bat[m]] != b->owner) k = 0; /* (not this bucket's owner's: the caller broadcasts) */
            lo = q->off < lo ? q->off : lo;
            hi = q->off + (int64_t)(q->bytes / b->elsize) > hi ? q->off + (int64_t)(q->bytes / b->elsize) : hi;
        }
        if (hosts && hi - lo > INT_MAX) k = 0; /* beyond one message's int count: broadcasts */
        nin[bi] = k;
        if (k == 0) continue;
        /* Every shared parameter's .grad is None: its slot is free. The
         * gradients' window is complete, so no rank reads this copy now. */
        for (int m = 0; m < k && rc == CT_OK; m++)
            if (ct_has_grad(params[bat[m]]))
                rc = ct_set_error(CT_ESTATE, "grad_sync: rank %d: sharing parameter %d: it still has a .grad, which "
                                  "may be its bucket slot", s->rank, bat[m]);
        if (rc != CT_OK) break;
        for (int m = 0; m < k; m++)
            if (host_rank_of(s, owners[bat[m]]) == me)
                memcpy(s->params[bslot[m]].at, data[bat[m]], s->params[bslot[m]].bytes);
        carried[bi] = hosts ? carry_between_hosts(s, bi, lo, hi, &w) : CT_OK;
        if (carried[bi] != CT_OK && failed == CT_OK) failed = carried[bi]; /* the buckets go on: nobody is left waiting */
        publish_at(s, bi, PARAMS_OUT, gen);
    }
    for (int bi = 0; bi < s->nbuckets && rc == CT_OK; bi++) {
        gs_bucket *b = &s->buckets[bi];
        const int *bat = at + b->first, *bslot = slot + b->first;
        if (nin[bi] == 0) continue;
        while (!all_reached_at(s, bi, PARAMS_OUT, gen)) cti_dist_watch_poll(&w);
        /* every other rank's out of theirs, or the carrier's (its own
         * copy, for the carrier) */
        int carrier = hosts ? host_rank_of(s, carrier_on(s, b->owner, s->lay.host)) : -1;
        for (int m = 0; m < nin[bi] && carried[bi] == CT_OK; m++) {
            const gs_param *q = &s->params[bslot[m]];
            int from = hosts ? carrier : host_rank_of(s, owners[bat[m]]);
            if (from >= 0 && s->rank != owners[bat[m]])
                memcpy(data[bat[m]], from == me ? q->at : b->peer[from] + (q->at - b->base), q->bytes);
            done[bat[m]] = from >= 0;
        }
        publish_at(s, bi, PARAMS_IN, gen);
    }
    for (int bi = 0; bi < s->nbuckets && rc == CT_OK; bi++)
        while (nin[bi] > 0 && !all_reached_at(s, bi, PARAMS_IN, gen)) cti_dist_watch_poll(&w);
    cti_dist_watch_end(&w);
    free(at);
    free(data);
    return rc != CT_OK ? rc : failed;
#else
    (void)params;
    (void)owners;
    return CT_OK;
#endif
}

const char *cti_grad_sync_transport(const cti_grad_sync *s, char *why, size_t len) {
    if (why && len) why[0] = '\0';
    if (!s || s->size == 1) return "none";
    if (s->cuda && !s->staged) return "nccl";
#if CTRIAL_HAVE_MPI
    const char *how = host_transport(s, why, len);
    if (s->staged && why && len) {
        /* "CUDA through host memory: <why NCCL is not used>[; <why not shared memory>]" */
        char rest[200];
        snprintf(rest, sizeof rest, "%s", why);
        snprintf(why, len, "CUDA through host memory: %s%s%s", cti_cuda_transport_why(), rest[0] ? "; " : "", rest);
    }
    return how;
#else
    return "ring";
#endif
}

void cti_grad_sync_get_stats(const cti_grad_sync *s, cti_grad_sync_stats *out) {
    if (!out) return;
    if (s) *out = s->stats;
    else memset(out, 0, sizeof *out);
}

void cti_grad_sync_free(cti_grad_sync *s) {
    if (!s) return;
#if CTRIAL_HAVE_MPI
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* A window left open (a step that failed after backward) is completed
     * like finish would: cancelling its messages instead would leave them
     * queued, and once this communicator is freed MPI may reuse its context
     * for the next one, where they would match the wrong receives. Every
     * rank takes this path (the ranks agree on stopping). */
    if (s->window && !finalized) complete(s);
    s->window = false;
#endif
    for (size_t i = 0; i < s->nparams; i++) {
        gs_param *p = &s->params[i];
        if (p->slot) ct_set_post_accumulate_grad_hook(p->param, NULL, NULL);
        ct_tensor_free(p->held);
        ct_tensor_free(p->slot);
        free(p->name);
    }
#if CTRIAL_HAVE_MPI
    for (int bi = 0; bi < s->nbuckets; bi++) {
        gs_bucket *b = &s->buckets[bi];
        for (int i = 0; b->chunk && i < b->nsteps; i++) ct_tensor_free(b->chunk[i]);
        for (int i = 0; b->incoming && i < b->nsteps; i++) ct_tensor_free(b->incoming[i]);
        free(b->steps);
        free(b->chunk);
        free(b->incoming);
        free(b->peer);
        free(b->mine_in);
        free(b->got);
        free(b->share_off);
        free(b->share_len);
        ct_tensor_free(b->buf);
        ct_tensor_free(b->scratch);
        ct_tensor_free(b->grads);
        ct_tensor_free(b->flags);
        ct_tensor_free(b->dev);
        ct_cuda_event_free(b->copied);
    }
    if (s->across.comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&s->across.comm);
    if (s->comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&s->comm);
    cti_node_shm_free(s->shm); /* this rank's mapping stays while a .grad views it */
    cti_node_layout_clear(&s->lay);
#endif
    free(s->buckets);
    free(s->params);
    free(s);
}
