/* src/dist/dist.c — ranks and collectives over MPI (dist.h).
 *
 * MPI starts only when mpirun launched this process (its environment says
 * so), so a plain run pays nothing. Every call checks MPI's return code and
 * turns a failure into CT_EDIST naming the rank and the call. CUDA tensors
 * go to NCCL (nccl_comm.c), bootstrapped over this MPI, or through host
 * memory where NCCL cannot be used (cuda_transport.h). */
#define _POSIX_C_SOURCE 200809L
#include "ctrial/dist.h"

#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/cpus.h"
#include "base/launch.h"
#include "ctrial/config.h"
#include "ctrial/cuda.h"
#include "ctrial/error.h"
#include "ctrial/trial.h" /* CT_EXIT_DIST */
#include "dist/agree.h"
#include "dist/cuda_transport.h"
#include "dist/group.h"
#include "dist/host.h"
#include "dist/nccl_comm.h"
#include "dist/watch.h"

#if CTRIAL_HAVE_MPI
#include <mpi.h>

#include "dist/comm.h"
#endif

static struct {
    bool init, we_started_mpi;
    int rank, size, local_rank, local_size;
} g = {.size = 1, .local_size = 1};

/* The collective timeout (watch.h), in seconds; 0: none. PyTorch's default
 * for its CPU backend (torch.distributed's default_pg_timeout). */
enum { CT_DIST_DEFAULT_TIMEOUT = 30 * 60 };
static double g_timeout = CT_DIST_DEFAULT_TIMEOUT;

int ct_dist_set_timeout(double seconds) {
    if (!(seconds >= 0))
        return ct_set_error(CT_EINVAL, "ct_dist_set_timeout: %g seconds (0 or infinity: no timeout)", seconds);
    g_timeout = isinf(seconds) ? 0 : seconds;
    return CT_OK;
}

double ct_dist_timeout(void) { return g_timeout; }

static const int64_t *progress; /* cti_dist_watch_progress: the loop's batches trained */

/* ct_dist_allreduce's checks, made before any communication, the same way
 * on every rank (the dtype is the same everywhere), so no rank is left in a
 * collective; with one rank and without MPI too, so that a program does
 * not fail only under mpirun. Returns a status. */
static int allreduce_args(const ct_tensor *t, ct_dist_op op) {
    if (!t) return ct_set_error(CT_EINVAL, "ct_dist_allreduce: t is NULL");
    if ((int)op < CT_DIST_SUM || (int)op > CT_DIST_MIN) return ct_set_error(CT_EINVAL, "ct_dist_allreduce: op %d", (int)op);
    if (op == CT_DIST_AVG && !ct_dtype_is_floating(ct_dtype_of(t)))
        return ct_set_error(CT_EDTYPE, "ct_dist_allreduce: rank %d: CT_DIST_AVG needs a floating tensor, not %s (the "
                            "mean of integers is not an integer: reduce with CT_DIST_SUM and divide)",
                            g.rank, ct_dtype_name(ct_dtype_of(t)));
    return CT_OK;
}

void cti_dist_watch_progress(const int64_t *batches) { progress = batches; }

#if CTRIAL_HAVE_MPI

/* ctrial's collectives, point to point on a communicator of their own, and
 * the timeout's queries on another (dup'd from MPI_COMM_WORLD at init):
 * neither ever matches a message of the program's. */
static MPI_Comm coll_comm = MPI_COMM_NULL, ctl_comm = MPI_COMM_NULL;

/* A group (group.h): its communicator, and the job's state to go back to. */
static struct {
    bool active;
    MPI_Comm base;
    MPI_Comm coll, ctl; /* the job's */
    int rank, size, local_rank, local_size;
} grp = {.base = MPI_COMM_NULL};

MPI_Comm cti_dist_base_comm(void) { return grp.active ? grp.base : MPI_COMM_WORLD; }

int cti_dist_mpi_failed(const char *who, const char *call, int err) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, text, &len);
    if (who) return ct_set_error(CT_EDIST, "%s: rank %d: %s failed: %s", who, g.rank, call, text);
    return ct_set_error(CT_EDIST, "rank %d: %s failed: %s", g.rank, call, text);
}

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int err_ = (call);                                                     \
        if (err_ != MPI_SUCCESS) return cti_dist_mpi_failed(NULL, #call, err_); \
    } while (0)

/* ---- the collective timeout (watch.h) --------------------------------------- */

enum { TAG_QUERY = 1, TAG_ANSWER = 2 };

/* A rank's answer to "where are you?": the collective it waits in. */
typedef struct {
    int64_t seq;     /* its count of collectives, the one it waits in included */
    double waited;   /* seconds it has waited in it */
    int64_t batches; /* the loop's batches trained (-1: unknown) */
    char what[96];
} wait_answer;

static cti_dist_watch *current_wait; /* the wait this rank is in (NULL: none) */
static int64_t collectives;         /* collectives this rank has begun */

void cti_dist_watch_begin(cti_dist_watch *w, const char *what) {
    w->what = what;
    w->start = cti_clock_monotonic();
    w->next_serve = w->start + 0.001;
    w->polls = 0;
    w->seq = ++collectives;
    current_wait = w;
}

void cti_dist_watch_end(cti_dist_watch *w) {
    if (current_wait == w) current_wait = NULL;
}

/* Answers every query that has arrived with where this rank waits. */
static void serve_queries(double now) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, ctl_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        int64_t q = 0;
        MPI_Recv(&q, 1, MPI_INT64_T, st.MPI_SOURCE, TAG_QUERY, ctl_comm, MPI_STATUS_IGNORE);
        wait_answer a;
        memset(&a, 0, sizeof a);
        a.batches = progress ? *progress : -1;
        if (current_wait) {
            a.seq = current_wait->seq;
            a.waited = now - current_wait->start;
            snprintf(a.what, sizeof a.what, "%s", current_wait->what);
        }
        /* A few dozen bytes: MPI sends them eagerly, so this returns at once. */
        MPI_Send(&a, (int)sizeof a, MPI_BYTE, st.MPI_SOURCE, TAG_ANSWER, ctl_comm);
    }
}

/* Appends to buf (len bytes, *at used so far), truncating. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void appendf(char *buf, size_t len, size_t *at, const char *fmt, ...) {
    if (*at >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n > 0) *at = *at + (size_t)n < len ? *at + (size_t)n : len;
}

/* "ranks 1, 3" into buf from the ranks marked in `mark`. */
static void list_ranks(const bool *mark, int n, char *buf, size_t len) {
    int count = 0;
    size_t at = 0;
    for (int r = 0; r < n; r++) count += mark[r];
    buf[0] = '\0';
    appendf(buf, len, &at, "rank%s", count == 1 ? "" : "s");
    for (int r = 0, k = 0; r < n; r++)
        if (mark[r]) appendf(buf, len, &at, "%s %d", k++ ? "," : "", r);
}

/* Past the deadline: asks every other rank where it is, waits a grace
 * period for the answers (serving the queries of ranks that timed out
 * too), and ends the job naming the ranks that gave none. */
static void timed_out(cti_dist_watch *w, double now) {
    int p = g.size;
    double waited = now - w->start;
    double grace = fmin(fmax(g_timeout / 10, 1.0), 10.0);
    wait_answer *ans = calloc((size_t)p, sizeof *ans);
    MPI_Request *reqs = calloc((size_t)p * 2, sizeof *reqs);
    bool *got = calloc((size_t)p, sizeof *got), *missing = calloc((size_t)p, sizeof *missing);
    bool *other = calloc((size_t)p, sizeof *other);
    int64_t q = w->seq;
    if (!ans || !reqs || !got || !missing || !other) {
        ct_dist_abort(CT_EXIT_DIST, "collective timeout (and out of memory naming the ranks)");
        return;
    }
    for (int r = 0; r < p; r++) {
        reqs[2 * r] = reqs[2 * r + 1] = MPI_REQUEST_NULL;
        if (r == g.rank) continue;
        MPI_Irecv(&ans[r], (int)sizeof ans[r], MPI_BYTE, r, TAG_ANSWER, ctl_comm, &reqs[2 * r]);
        MPI_Isend(&q, 1, MPI_INT64_T, r, TAG_QUERY, ctl_comm, &reqs[2 * r + 1]);
    }
    int answered = 0;
    for (double t = now; t < now + grace && answered < p - 1; t = cti_clock_monotonic()) {
        serve_queries(t);
        for (int r = 0; r < p; r++) {
            int done = 0;
            if (r == g.rank || got[r]) continue;
            if (MPI_Test(&reqs[2 * r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
                got[r] = true;
                answered++;
            }
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    /* Who did not arrive, and whether a lower rank waits too (it reports). */
    bool lower_waits = false;
    int n_missing = 0, n_other = 0;
    for (int r = 0; r < p; r++) {
        if (r == g.rank) continue;
        if (!got[r] || ans[r].seq == 0) missing[r] = true, n_missing++;
        else if (ans[r].seq != w->seq || strcmp(ans[r].what, w->what) != 0) other[r] = true, n_other++;
        if (got[r] && ans[r].seq != 0 && r < g.rank) lower_waits = true;
    }
    char why[2048], names[512];
    size_t n = 0;
    int64_t batches = progress ? *progress : -1;
    appendf(why, sizeof why, &n, "collective timeout: waited %.1f s in %s (collective #%lld of this rank", waited,
            w->what, (long long)w->seq);
    if (batches >= 0) appendf(why, sizeof why, &n, "; %lld batches trained", (long long)batches);
    appendf(why, sizeof why, &n, ")");
    if (n_missing) {
        list_ranks(missing, p, names, sizeof names);
        appendf(why, sizeof why, &n, "; %s did not arrive: no answer within %.0f s, so %s outside every collective "
                "(stuck in the trial's code, a callback or a blocking call) or dead", names, grace,
                n_missing == 1 ? "it is" : "they are");
    }
    for (int r = 0; r < p; r++)
        if (other[r])
            appendf(why, sizeof why, &n, "; rank %d waits in another collective: %s (its #%lld, for %.1f s)", r,
                    ans[r].what, (long long)ans[r].seq, ans[r].waited);
    if (!n_missing && !n_other) appendf(why, sizeof why, &n, "; every rank waits in it, so MPI itself is stuck");
    appendf(why, sizeof why, &n, ". The timeout is %g s (--dist-timeout, CTRIAL_DIST_TIMEOUT, ct_fit_opts.dist_timeout or "
            "ct_dist_set_timeout; default %d s)", g_timeout, CT_DIST_DEFAULT_TIMEOUT);
    free(ans);
    free(reqs);
    free(got);
    free(missing);
    free(other);
    /* A lower rank that waits too tells the same story: it ends the job;
     * this rank does so itself only if the job is still there after
     * another grace period. */
    if (lower_waits)
        for (double end = cti_clock_monotonic() + 2 * grace, t = 0; (t = cti_clock_monotonic()) < end;) {
            serve_queries(t);
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    ct_dist_abort(CT_EXIT_DIST, why);
}

/* More ranks on this machine than the CPUs they may run on together
 * (mpirun --oversubscribe, or a cpuset smaller than the host's ranks): a
 * rank that waits gives its CPU away at every poll, since the rank it
 * waits for may be the one that needs it. Set by describe_comm, with the
 * count of those CPUs (0: not under mpirun). */
static bool oversubscribed;
static int host_cpus;

int cti_dist_host_cpus(void) { return host_cpus > 0 ? host_cpus : cti_cpus_usable(); }
bool cti_dist_host_oversubscribed(void) { return oversubscribed; }

void cti_dist_watch_poll(cti_dist_watch *w) {
    if (oversubscribed) sched_yield();
    if (++w->polls & 15) return;
    double now = cti_clock_monotonic();
    if (now - w->start > 0.002) sched_yield();
    if (now < w->next_serve) return;
    w->next_serve = now + 0.001;
    serve_queries(now);
    if (g_timeout > 0 && now - w->start > g_timeout) timed_out(w, now);
}

/* Polls the requests until every one completed. Returns a status. */
static int wait_all(int n, MPI_Request *reqs, cti_dist_watch *w) {
    for (;;) {
        int done = 0;
        int err = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) return cti_dist_mpi_failed(NULL, w->what, err);
        if (done) return CT_OK;
        cti_dist_watch_poll(w);
    }
}

/* ---- collectives, point to point ---------------------------------------- */

/* Tags keep the kinds apart: ranks that disagree on which collective comes
 * next wait (and time out, naming it) instead of mixing their bytes. */
enum { TAG_ALLREDUCE = 1, TAG_BCAST, TAG_GATHER };

/* Sends `count` items of sbuf to `to` and receives as many into rbuf from
 * `from` (either rank may be -1: none), and waits for both. */
static int exchange(const void *sbuf, int to, void *rbuf, int from, int count, MPI_Datatype type, int tag,
                    cti_dist_watch *w) {
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (from >= 0) MPI_CHECK(MPI_Irecv(rbuf, count, type, from, tag, coll_comm, &q[0]));
    if (to >= 0) MPI_CHECK(MPI_Isend(sbuf, count, type, to, tag, coll_comm, &q[1]));
    return wait_all(2, q, w);
}

/* MPICH's recursive doubling for p ranks: the first 2*rem ranks fold
 * pairwise into rem, the remaining power of two exchanges log2 times, the
 * result unfolds. Every rank adds the same operands in mirrored order, and
 * IEEE addition is commutative, so every rank ends with the same bits. */
static int allreduce_chunk(void *buf, void *tmp, int count, MPI_Datatype type, MPI_Op op, cti_dist_watch *w) {
    int p = g.size, r = g.rank, pof2 = 1;
    while (pof2 * 2 <= p) pof2 *= 2;
    int rem = p - pof2, newrank, rc = CT_OK;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            rc = exchange(buf, r + 1, NULL, -1, count, type, TAG_ALLREDUCE, w);
            newrank = -1;
        } else {
            rc = exchange(NULL, -1, tmp, r - 1, count, type, TAG_ALLREDUCE, w);
            if (rc == CT_OK) MPI_CHECK(MPI_Reduce_local(tmp, buf, count, type, op));
            newrank = r / 2;
        }
    } else {
        newrank = r - rem;
    }
    for (int mask = 1; rc == CT_OK && newrank >= 0 && mask < pof2; mask <<= 1) {
        int nd = newrank ^ mask, dst = nd < rem ? nd * 2 + 1 : nd + rem;
        rc = exchange(buf, dst, tmp, dst, count, type, TAG_ALLREDUCE, w);
        if (rc == CT_OK) MPI_CHECK(MPI_Reduce_local(tmp, buf, count, type, op));
    }
    if (rc == CT_OK && r < 2 * rem)
        rc = r % 2 ? exchange(buf, r - 1, NULL, -1, count, type, TAG_ALLREDUCE, w)
                   : exchange(NULL, -1, buf, r + 1, count, type, TAG_ALLREDUCE, w);
    return rc;
}

/* In place, in chunks of at most 4 MiB (the size of the scratch buffer). */
static int p2p_allreduce(void *buf, int count, MPI_Datatype type, MPI_Op op, const char *what) {
    int tsize = 0;
    MPI_CHECK(MPI_Type_size(type, &tsize));
    if (tsize <= 0 || count == 0) return CT_OK;
    /* An op MPI does not define on this type fails here, the same way on
     * every rank, before any rank has sent a byte (a failure between two
     * steps would leave a partner waiting). */
    unsigned char probe_in[16] = {0}, probe_out[16] = {0};
    if (tsize <= (int)sizeof probe_in) MPI_CHECK(MPI_Reduce_local(probe_in, probe_out, 1, type, op));
    int per = (int)((size_t)(4 << 20) / (size_t)tsize);
    if (per < 1) per = 1;
    if (per > count) per = count;
    unsigned char small[256];
    void *tmp = (size_t)per * (size_t)tsize <= sizeof small ? small : malloc((size_t)per * (size_t)tsize);
    if (!tmp) return ct_set_error(CT_ENOMEM, "%s: rank %d: out of memory", what, g.rank);
    cti_dist_watch w;
    cti_dist_watch_begin(&w, what);
    int rc = CT_OK;
    for (int at = 0; rc == CT_OK && at < count; at += per) {
        int n = count - at < per ? count - at : per;
        rc = allreduce_chunk((char *)buf + (size_t)at * (size_t)tsize, tmp, n, type, op, &w);
    }
    cti_dist_watch_end(&w);
    if (tmp != small) free(tmp);
    return rc;
}

/* A binomial tree from root (MPICH's short-message broadcast). */
static int p2p_bcast(void *buf, int count, MPI_Datatype type, int root, const char *what) {
    int p = g.size, r = g.rank, rel = (r - root + p) % p, mask = 1, rc = CT_OK;
    if (root < 0 || root >= p) return ct_set_error(CT_EINVAL, "%s: rank %d: root %d of %d ranks", what, r, root, p);
    cti_dist_watch w;
    cti_dist_watch_begin(&w, what);
    for (; mask < p; mask <<= 1)
        if (rel & mask) {
            rc = exchange(NULL, -1, buf, (r - mask + p) % p, count, type, TAG_BCAST, &w);
            break;
        }
    MPI_Request q[32];
    int nq = 0;
    for (mask >>= 1; rc == CT_OK && mask > 0; mask >>= 1)
        if (rel + mask < p) {
            int err = MPI_Isend(buf, count, type, (r + mask) % p, TAG_BCAST, coll_comm, &q[nq++]);
            if (err != MPI_SUCCESS) rc = cti_dist_mpi_failed(NULL, "MPI_Isend", err);
        }
    if (nq) {
        int wrc = wait_all(nq, q, &w);
        if (rc == CT_OK) rc = wrc;
    }
    cti_dist_watch_end(&w);
    return rc;
}

/* ---- initialisation ---------------------------------------------------------- */

/* CTRIAL_DIST_TIMEOUT, in seconds (0 or inf: none). */
static int timeout_from_env(void) {
    const char *v = getenv("CTRIAL_DIST_TIMEOUT");
    if (!v || !*v) return CT_OK;
    char *end = NULL;
    double s = strtod(v, &end);
    while (end && (*end == ' ' || *end == '\t')) end++;
    if (!end || *end || !(s >= 0))
        return ct_set_error(CT_ECONFIG, "CTRIAL_DIST_TIMEOUT is '%s': expected seconds, a number >= 0 (0 or inf: no "
                            "timeout)", v);
    g_timeout = isinf(s) ? 0 : s;
    return CT_OK;
}

/* rank, size and local rank and size within comm. */
static int describe_comm(MPI_Comm comm) {
    MPI_CHECK(MPI_Comm_rank(comm, &g.rank));
    MPI_CHECK(MPI_Comm_size(comm, &g.size));
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &local));
    MPI_Comm_rank(local, &g.local_rank);
    MPI_Comm_size(local, &g.local_size);
    /* the CPUs this host's ranks may run on, all together: one CPU each
     * (bound) is not oversubscribed, four ranks in a cpuset of two are */
    uint64_t cpus[CT_CPU_WORDS];
    cti_cpus_usable_set(cpus);
    int err = MPI_Allreduce(MPI_IN_PLACE, cpus, CT_CPU_WORDS, MPI_UINT64_T, MPI_BOR, local);
    MPI_Comm_free(&local);
    if (err != MPI_SUCCESS) return cti_dist_mpi_failed(NULL, "MPI_Allreduce (the CPUs of this host's ranks)", err);
    host_cpus = cti_cpus_count_set(cpus);
    oversubscribed = g.local_size > host_cpus;
    return CT_OK;
}

int ct_dist_init(void) {
    if (g.init) return CT_OK;
    int started = 0;
    MPI_Initialized(&started);
    if (!started && cti_launch_world_size() == 1) {
        g.init = true;
        return CT_OK;
    }
    int rc = timeout_from_env();
    if (rc != CT_OK) return rc;
    if (!started) {
        int provided = 0;
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        g.we_started_mpi = true;
        atexit(ct_dist_finalize); /* programs that call ct_fit directly and just return */
    }
    /* Errors come back as codes (then CT_EDIST), not as an abort inside MPI. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((rc = describe_comm(MPI_COMM_WORLD)) != CT_OK) return rc;
    if (g.size > 1) {
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &coll_comm));
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &ctl_comm));
    }
    g.init = true;
    return CT_OK;
}

int cti_dist_group_begin(int color) {
    if (grp.active) return ct_set_error(CT_ESTATE, "cti_dist_group_begin: already in a group");
    if (!g.init || g.size == 1) return CT_OK; /* one rank: its own group */
    MPI_Comm base = MPI_COMM_NULL, coll = MPI_COMM_NULL, ctl = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, g.rank, &base));
    MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_dup(base, &coll));
    MPI_CHECK(MPI_Comm_dup(base, &ctl));
    /* NCCL's communicators are the job's: the group makes its own */
    cti_nccl_finalize();
    cti_cuda_transport_reset();
    grp.active = true;
    grp.base = base;
    grp.coll = coll_comm, grp.ctl = ctl_comm;
    grp.rank = g.rank, grp.size = g.size, grp.local_rank = g.local_rank, grp.local_size = g.local_size;
    coll_comm = coll;
    ctl_comm = ctl;
    return describe_comm(base);
}

int cti_dist_group_end(void) {
    if (!grp.active) return CT_OK;
    cti_nccl_finalize();
    cti_cuda_transport_reset();
    MPI_Comm_free(&coll_comm);
    MPI_Comm_free(&ctl_comm);
    MPI_Comm_free(&grp.base);
    coll_comm = grp.coll;
    ctl_comm = grp.ctl;
    g.rank = grp.rank, g.size = grp.size, g.local_rank = grp.local_rank, g.local_size = grp.local_size;
    grp.active = false;
    return CT_OK;
}

void ct_dist_finalize(void) {
    int done = 0;
    cti_dist_group_end();
    cti_nccl_finalize(); /* NCCL's communicators before the MPI that bootstrapped them */
    cti_cuda_transport_reset();
    if (g.we_started_mpi && (MPI_Finalized(&done), !done)) {
        if (coll_comm != MPI_COMM_NULL) MPI_Comm_free(&coll_comm);
        if (ctl_comm != MPI_COMM_NULL) MPI_Comm_free(&ctl_comm);
        MPI_Finalize();
    }
    g.we_started_mpi = false;
}

void ct_dist_abort(int exit_code, const char *why) {
    fprintf(stderr, "ctrial: rank %d: %s\n", g.rank, why ? why : "aborting");
    fflush(stderr);
    if (g.size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

int ct_dist_barrier(void) {
    if (g.size == 1) return CT_OK;
    int x = 0;
    return p2p_allreduce(&x, 1, MPI_INT, MPI_MAX, "ct_dist_barrier");
}

/* The MPI type of a dtype; MPI_DATATYPE_NULL for half types. */
static MPI_Datatype mpi_type(ct_dtype d) {
    switch (d) {
    case CT_F32: return MPI_FLOAT;
    case CT_F64: return MPI_DOUBLE;
    case CT_I64: return MPI_INT64_T;
    case CT_I32: return MPI_INT32_T;
    case CT_I16: return MPI_INT16_T;
    case CT_I8: return MPI_INT8_T;
    case CT_U8: return MPI_UINT8_T;
    case CT_BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(ct_dist_op op) {
    switch (op) {
    case CT_DIST_MAX: return MPI_MAX;
    case CT_DIST_MIN: return MPI_MIN;
    default: return MPI_SUM;
    }
}

/* The buffer of t for MPI: a contiguous CPU tensor (CUDA tensors go to
 * NCCL before this). */
static void *mpi_buffer(const ct_tensor *t, const char *fn, MPI_Datatype *type) {
    *type = mpi_type(ct_dtype_of(t));
    if (*type == MPI_DATATYPE_NULL) {
        ct_set_error(CT_EDTYPE, "%s: rank %d: MPI has no %s type", fn, g.rank, ct_dtype_name(ct_dtype_of(t)));
        return NULL;
    }
    if (!ct_is_contiguous(t)) {
        ct_set_error(CT_EINVAL, "%s: rank %d: the tensor must be contiguous", fn, g.rank);
        return NULL;
    }
    return ct_data_ptr(t);
}

static bool is_cuda(const ct_tensor *t) { return ct_device_of(t).type == CT_CUDA; }

/* The CPU side of a collective: MPI on t's host memory (bcast: broadcast
 * from root, else allreduce with op; AVG divides after the sum). */
static int mpi_collective(ct_tensor *t, const char *fn, bool bcast, int root, ct_dist_op op) {
    MPI_Datatype type;
    void *p = mpi_buffer(t, fn, &type);
    if (!p) return ct_last_code();
    if (bcast) return p2p_bcast(p, (int)ct_numel(t), type, root, fn);
    int rc = p2p_allreduce(p, (int)ct_numel(t), type, mpi_op(op), fn);
    if (rc != CT_OK) return rc;
    return op == CT_DIST_AVG ? ct_mul_scalar_(t, 1.0 / g.size) : CT_OK;
}

/* A CUDA tensor through host memory (gloo's way with CUDA tensors): copied
 * to the host once the device has computed it (half types as float32,
 * which MPI has), reduced there, copied back on the current stream. */
static int host_collective(ct_tensor *t, const char *fn, bool bcast, int root, ct_dist_op op) {
    ct_dtype dt = ct_dtype_of(t);
    ct_tensor *h = ct_to_device(t, ct_cpu(), false);
    if (h && (dt == CT_F16 || dt == CT_BF16)) { /* MPI has no half types: added in float32, rounded once */
        ct_tensor *f = ct_to_dtype(h, CT_F32);
        ct_tensor_free(h);
        h = f;
    }
    if (!h) return ct_last_code();
    int rc = mpi_collective(h, fn, bcast, root, op);
    if (rc == CT_OK) rc = ct_copy_(t, h);
    ct_tensor_free(h);
    return rc;
}

/* A collective on a CUDA tensor: NCCL on the tensor's device and current
 * stream (bcast: broadcast from root, else allreduce with op), or, where
 * NCCL cannot be used (cuda_transport.h), through host memory: copied to
 * the host, reduced by MPI as a CPU tensor, copied back. Returns a status. */
static int cuda_collective(ct_tensor *t, const char *fn, bool bcast, int root, ct_dist_op op) {
    if (!ct_is_contiguous(t)) return ct_set_error(CT_EINVAL, "%s: rank %d: the tensor must be contiguous", fn, g.rank);
    int device = ct_device_of(t).index;
    int how = cti_cuda_transport_get(device);
    if (how < 0) return how;
    if (how == CTI_CUDA_HOST) return host_collective(t, fn, bcast, root, op);
    void *p = ct_cuda_data_ptr(t);
    if (!p) return ct_last_code();
    size_t n = (size_t)ct_numel(t);
    return bcast ? cti_nccl_broadcast(p, n, ct_dtype_of(t), root, device, NULL)
                 : cti_nccl_allreduce(p, n, ct_dtype_of(t), op, device, NULL);
}

int ct_dist_broadcast(ct_tensor *t, int root) {
    if (!t) return ct_set_error(CT_EINVAL, "ct_dist_broadcast: t is NULL");
    if (g.size == 1 || ct_numel(t) == 0) return CT_OK;
    if (is_cuda(t)) return cuda_collective(t, __func__, true, root, CT_DIST_SUM);
    return mpi_collective(t, __func__, true, root, CT_DIST_SUM);
}

int ct_dist_allreduce(ct_tensor *t, ct_dist_op op) {
    int rc = allreduce_args(t, op);
    if (rc != CT_OK) return rc;
    if (g.size == 1 || ct_numel(t) == 0) return CT_OK;
    if (is_cuda(t)) return cuda_collective(t, __func__, false, 0, op);
    return mpi_collective(t, __func__, false, 0, op);
}

int ct_dist_broadcast_bytes(void *buf, size_t n, int root) {
    if (g.size == 1 || n == 0) return CT_OK;
    if (n > (size_t)INT32_MAX) return ct_set_error(CT_EINVAL, "ct_dist_broadcast_bytes: %zu bytes is too many", n);
    return p2p_bcast(buf, (int)n, MPI_BYTE, root, "ct_dist_broadcast_bytes");
}

int cti_dist_allreduce_i64_as(int64_t *values, int n, ct_dist_op op, const char *what) {
    if (g.size == 1 || n == 0) return CT_OK;
    int rc = p2p_allreduce(values, n, MPI_INT64_T, mpi_op(op), what ? what : "ct_dist_allreduce_i64");
    if (rc == CT_OK && op == CT_DIST_AVG)
        for (int i = 0; i < n; i++) values[i] /= g.size;
    return rc;
}

int ct_dist_allreduce_i64(int64_t *values, int n, ct_dist_op op) {
    return cti_dist_allreduce_i64_as(values, n, op, NULL);
}

/* Every rank sends its length, then its bytes, to root, which receives
 * them all at once. */
int ct_dist_gather_bytes(const void *buf, size_t n, int root, void **out, size_t *lens) {
    if (out) *out = NULL;
    if (n > (size_t)INT32_MAX) return ct_set_error(CT_EINVAL, "ct_dist_gather_bytes: %zu bytes is too many", n);
    if (g.size == 1) {
        *out = malloc(n ? n : 1);
        if (!*out) return ct_set_error(CT_ENOMEM, "out of memory");
        if (n > 0) memcpy(*out, buf, n);
        lens[0] = n;
        return CT_OK;
    }
    if (root < 0 || root >= g.size)
        return ct_set_error(CT_EINVAL, "ct_dist_gather_bytes: rank %d: root %d of %d ranks", g.rank, root, g.size);
    cti_dist_watch w;
    cti_dist_watch_begin(&w, "ct_dist_gather_bytes");
    int64_t len = (int64_t)n;
    int rc = CT_OK;
    if (g.rank != root) {
        MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int err = MPI_Isend(&len, 1, MPI_INT64_T, root, TAG_GATHER, coll_comm, &q[0]);
        if (err == MPI_SUCCESS) err = MPI_Isend(buf, (int)n, MPI_BYTE, root, TAG_GATHER, coll_comm, &q[1]);
        rc = err == MPI_SUCCESS ? wait_all(2, q, &w) : cti_dist_mpi_failed(NULL, "MPI_Isend", err);
        cti_dist_watch_end(&w);
        return rc;
    }
    int p = g.size;
    int64_t *counts = calloc((size_t)p, sizeof *counts);
    MPI_Request *q = calloc((size_t)p, sizeof *q);
    if (!counts || !q) rc = ct_set_error(CT_ENOMEM, "out of memory");
    for (int r = 0; r < p && q; r++) q[r] = MPI_REQUEST_NULL;
    for (int r = 0; rc == CT_OK && r < p; r++) {
        if (r == root) continue;
        int err = MPI_Irecv(&counts[r], 1, MPI_INT64_T, r, TAG_GATHER, coll_comm, &q[r]);
        if (err != MPI_SUCCESS) rc = cti_dist_mpi_failed(NULL, "MPI_Irecv", err);
    }
    if (rc == CT_OK) rc = wait_all(p, q, &w);
    size_t total = 0;
    if (rc == CT_OK) {
        counts[root] = len;
        for (int r = 0; r < p; r++) total += (size_t)counts[r];
        if (total > (size_t)INT32_MAX)
            rc = ct_set_error(CT_EINVAL, "ct_dist_gather_bytes: rank %d: %zu bytes in all is too many", g.rank, total);
        else if (!(*out = malloc(total ? total : 1)))
            rc = ct_set_error(CT_ENOMEM, "out of memory");
    }
    for (int r = 0, at = 0; rc == CT_OK && r < p; at += (int)counts[r], r++) {
        lens[r] = (size_t)counts[r];
        if (r == root) {
            if (n > 0) memcpy((char *)*out + at, buf, n); /* buf may be NULL when empty */
            continue;
        }
        int err = MPI_Irecv((char *)*out + at, (int)counts[r], MPI_BYTE, r, TAG_GATHER, coll_comm, &q[r]);
        if (err != MPI_SUCCESS) rc = cti_dist_mpi_failed(NULL, "MPI_Irecv", err);
    }
    if (rc == CT_OK) rc = wait_all(p, q, &w);
    cti_dist_watch_end(&w);
    free(counts);
    free(q);
    if (rc != CT_OK && out) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

#else /* no MPI in this build: one process */

int cti_dist_group_begin(int color) {
    (void)color;
    return CT_OK;
}
int cti_dist_group_end(void) { return CT_OK; }
int ct_dist_init(void) {
    if (cti_launch_world_size() > 1)
        return ct_set_error(CT_ENOTSUP, "launched by mpirun with several ranks, but this ctrial was built without MPI");
    g.init = true;
    return CT_OK;
}
void ct_dist_finalize(void) {}
int cti_dist_host_cpus(void) { return cti_cpus_usable(); }
bool cti_dist_host_oversubscribed(void) { return false; }
void ct_dist_abort(int exit_code, const char *why) {
    fprintf(stderr, "ctrial: %s\n", why ? why : "aborting");
    exit(exit_code);
}
int ct_dist_barrier(void) { return CT_OK; }
int ct_dist_broadcast(ct_tensor *t, int root) { return t ? CT_OK : ct_set_error(CT_EINVAL, "ct_dist_broadcast: t is NULL"); }
int ct_dist_allreduce(ct_tensor *t, ct_dist_op op) { return allreduce_args(t, op); }
int ct_dist_broadcast_bytes(void *buf, size_t n, int root) { return CT_OK; }
int ct_dist_allreduce_i64(int64_t *values, int n, ct_dist_op op) { return CT_OK; }
int cti_dist_allreduce_i64_as(int64_t *values, int n, ct_dist_op op, const char *what) {
    (void)values, (void)n, (void)op, (void)what;
    return CT_OK;
}
int ct_dist_gather_bytes(const void *buf, size_t n, int root, void **out, size_t *lens) {
    *out = malloc(n ? n : 1);
    if (!*out) return ct_set_error(CT_ENOMEM, "out of memory");
    if (n > 0) memcpy(*out, buf, n);
    lens[0] = n;
    return CT_OK;
}

#endif

int ct_dist_rank(void) { return g.rank; }
int ct_dist_size(void) { return g.size; }
int ct_dist_local_rank(void) { return g.local_rank; }
int ct_dist_local_size(void) { return g.local_size; }
bool ct_dist_is_distributed(void) { return g.size > 1; }

int cti_ranks_agree(int rc) {
    if (ct_dist_size() == 1) return rc;
    /* The lowest failing rank is the largest -rank; INT64_MIN: none failed. */
    int64_t failed = rc != CT_OK ? -(int64_t)ct_dist_rank() : INT64_MIN;
    int arc = cti_dist_allreduce_i64_as(&failed, 1, CT_DIST_MAX, "cti_ranks_agree (every rank's status)");
    if (rc != CT_OK) return rc;
    if (arc != CT_OK) return arc;
    if (failed == INT64_MIN) return CT_OK;
    return ct_set_error(CT_EDIST, "rank %d failed (its message is on its own stderr)", (int)-failed);
}
