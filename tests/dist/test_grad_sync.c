/* Bucketed gradient averaging (src/dist/grad_sync.c) under mpirun -np 2/3, and as
 * a plain process (one rank: no buckets, no hooks, gradients untouched).
 *
 * The model: an MLP 8 -> 16 -> 16 -> 4 in float64, plus three parameters of
 * the root module: `extra32` (float32: a bucket of another dtype), `half16`
 * (bfloat16, in the loss on rank 0 only: MPI has no such type, the ring adds
 * it through libtorch and must see zeros from the other ranks), `partial`
 * (in the loss on rank 0 only) and `unused` (in no loss). A 600-byte bucket
 * size splits it into several buckets, the first of which go out during
 * backward. Every rank takes its own rows of one global batch.
 *
 * Checked, for every parameter on every rank:
 *   - an unarmed backward leaves the local gradient (no bytes move);
 *   - after arm + backward + finish the gradient equals the mean over ranks
 *     of the local gradients (computed with ct_dist_allreduce AVG), is the
 *     same on every rank bit for bit, and equals one process's gradient of
 *     the concatenated global batch; `unused` keeps no gradient, `partial`
 *     gets rank 0's gradient averaged with zeros;
 *   - accumulation (unarmed then armed backward) reduces the sum once;
 *   - gradients zeroed in place stay in their buckets (same storage) and
 *     average right;
 *   - two armed backwards before finish reduce the sum (the first window
 *     completes at the second arm);
 *   - a backward no arm announced, reaching a launched bucket, is CT_ESTATE
 *     from finish, and the next window works again;
 *   - a backward on another thread than the arming one leaves the work to
 *     finish, still right;
 *   - a sync freed with buckets in flight completes them, and a new sync
 *     (one 1 MiB bucket) works after it;
 *   - stats, and the refusals;
 *   - a sharded optimizer's buckets (each parameter owned by one rank):
 *     the owner gets the mean, the others None, and the ranks send half
 *     the bytes in messages that the all-reduce sends, on every layout;
 *     after its step the parameters go from their owners to every rank
 *     through the buckets, on one host and on several;
 *   - the transport: ranks of one machine average their float32/float64
 *     buckets in shared memory (the bfloat16 one stays on the ring), unless
 *     CTRIAL_GRAD_SYNC=ring (tests.cmake runs both); every check above
 *     holds for either; when one rank alone is told to take the ring, all
 *     take it (the choice is agreed, nobody hangs); halving-doubling
 *     instead of the ring (CTRIAL_GRAD_SYNC=halving-doubling: 4 ranks; 3
 *     take the ring); a CTRIAL_GRAD_SYNC that is neither is refused on
 *     every rank;
 *   - several hosts, faked on this machine (CTRIAL_GRAD_SYNC_HOST_RANKS=k:
 *     hosts of k ranks; tests.cmake runs 2 hosts of 2 and 2 of 3, 4 of 2):
 *     shared memory on each host and a ring (halving-doubling between 4
 *     hosts) between them, every check above
 *     holding; uneven hosts (2 + 1, 3 + 2: as many shares as the smallest
 *     host has ranks, the others only copy) too; one rank per host takes
 *     messages through every rank; a host size that is not a number on
 *     one rank is refused on every rank;
 *   - ranks that share one CPU (a cpuset) yield while they wait;
 *   - a segment left in /dev/shm by a rank that died during the set-up
 *     (nobody holds its lock) is removed by the next set-up on the host,
 *     and one whose creator is alive is kept;
 *   - on a GPU (skipped with a visible line elsewhere): CUDA buckets through
 *     NCCL, and through host memory (ranks sharing a GPU, or asked for by
 *     name), give the same averages; a sharded optimizer's CUDA buckets
 *     reach their owners alone either way. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cpus.h"
#include "ct_test.h"
#include "ctrial/cuda.h"
#include "dist/grad_sync.h"
#include "dist/cuda_transport.h"
#include "dist/nccl_comm.h"
#include "dist/host.h"
#include "ctrial/config.h"
#if CTRIAL_HAVE_MPI
#include <time.h>

#include "dist/node_shm.h"
#endif

enum { B = 6, IN = 8, HID = 16, OUT = 4, NP = 10 };

static int R, P;

typedef struct {
    ct_module *fc1, *fc2, *fc3;
    ct_tensor *unused, *partial, *extra32, *half16;
} Net;

static ct_module *linear64(int64_t in, int64_t out) {
    ct_module *m = ct_nn_linear(in, out, true);
    if (ct_nn_to_dtype(m, CT_F64) != 0) return NULL;
    return m;
}

/* The same weights on every rank: the same seed. */
static ct_module *build(Net *n) {
    ct_manual_seed(1234);
    ct_module *net = ct_nn_module("Net", NULL, n, NULL);
    const ct_topts f64 = {.dtype = CT_F64};
    n->unused = ct_nn_add_parameter(net, "unused", ct_randn(CT_SHAPE(5), &f64));
    n->partial = ct_nn_add_parameter(net, "partial", ct_randn(CT_SHAPE(3), &f64));
    n->extra32 = ct_nn_add_parameter(net, "extra32", ct_randn(CT_SHAPE(2), NULL));
    n->half16 = ct_nn_add_parameter(net, "half16", ct_randn(CT_SHAPE(3), &(ct_topts){.dtype = CT_BF16}));
    n->fc1 = ct_nn_add_module(net, "fc1", linear64(IN, HID));
    n->fc2 = ct_nn_add_module(net, "fc2", linear64(HID, HID));
    n->fc3 = ct_nn_add_module(net, "fc3", linear64(HID, OUT));
    return n->fc3 ? net : NULL;
}

/* The mean-reduced loss of rows x, y, plus sum(extra32^2) * mean(x) (a
 * per-sample mean too) and partial_weight * (sum(partial^2) + sum(half16^2)). The gradient of
 * the global batch's loss is then the mean of the ranks' gradients when
 * partial_weight is 1 on rank 0 (0 elsewhere) locally and 1/P globally. */
static ct_tensor *loss_of(Net *n, const ct_tensor *x, const ct_tensor *y, double partial_weight) {
    ct_tensor *h = ct_relu(ct_nn_forward(n->fc1, x));
    h = ct_relu(ct_nn_forward(n->fc2, h));
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(n->fc3, h), y, CT_REDUCE_MEAN);
    ct_tensor *e = ct_to_dtype(n->extra32, CT_F64);
    loss = ct_add(loss, ct_mul(ct_sum(ct_mul(e, e)), ct_mean(x)));
    if (partial_weight != 0) {
        ct_tensor *h16 = ct_to_dtype(n->half16, CT_F64);
        ct_tensor *both = ct_add(ct_sum(ct_mul(n->partial, n->partial)), ct_sum(ct_mul(h16, h16)));
        loss = ct_add(loss, ct_mul_scalar(both, partial_weight));
    }
    return loss;
}

/* The global batch (the same on every rank) and this rank's rows of it. */
static ct_tensor *X, *Y, *x_local, *y_local;

static void make_data(void) {
    ct_manual_seed(99);
    const ct_topts f64 = {.dtype = CT_F64};
    X = ct_randn(CT_SHAPE(P * B, IN), &f64);
    Y = ct_randn(CT_SHAPE(P * B, OUT), &f64);
    x_local = ct_narrow(X, 0, (int64_t)R * B, B);
    y_local = ct_narrow(Y, 0, (int64_t)R * B, B);
}

/* One local backward, armed or not. */
static int local_backward(cti_grad_sync *s, Net *n, bool arm) {
    ct_scope *sc = ct_scope_begin();
    if (s) cti_grad_sync_arm(s, arm);
    ct_tensor *loss = loss_of(n, x_local, y_local, R == 0 ? 1.0 : 0.0);
    int rc = loss ? ct_backward(loss) : ct_last_code();
    if (s) cti_grad_sync_after_backward(s);
    ct_scope_end(sc);
    return rc;
}

/* A local backward on a thread of its own (no arm: the caller armed). */
typedef struct {
    Net *n;
    int rc;
} backward_job;

static void *backward_thread(void *arg) {
    backward_job *j = arg;
    ct_scope *sc = ct_scope_begin();
    ct_tensor *loss = loss_of(j->n, x_local, y_local, R == 0 ? 1.0 : 0.0);
    j->rc = loss ? ct_backward(loss) : ct_last_code();
    ct_scope_end(sc);
    return NULL;
}

/* A backward that no arm call announces. */
static int silent_backward(Net *n) {
    ct_scope *sc = ct_scope_begin();
    ct_tensor *loss = loss_of(n, x_local, y_local, R == 0 ? 1.0 : 0.0);
    int rc = loss ? ct_backward(loss) : ct_last_code();
    ct_scope_end(sc);
    return rc;
}

/* Every parameter's gradient, cloned (NULL where there is none). */
static void snapshot(ct_module *net, ct_tensor **out) {
    for (size_t i = 0; i < NP; i++) {
        ct_tensor *g = ct_grad(ct_nn_param_at(net, i, NULL));
        out[i] = g ? ct_keep(ct_clone(g)) : NULL;
        ct_tensor_free(g);
    }
}

static void free_all(ct_tensor **ts) {
    for (size_t i = 0; i < NP; i++) {
        ct_tensor_free(ts[i]);
        ts[i] = NULL;
    }
}

/* Compared on the CPU, in float64 (either may live on a GPU). */
static double maxdiff(const ct_tensor *a, const ct_tensor *b) {
    ct_scope *sc = ct_scope_begin();
    double d = INFINITY;
    ct_tensor *a64 = ct_to_dtype(ct_to_device(a, ct_cpu(), false), CT_F64);
    ct_tensor *b64 = ct_to_dtype(ct_to_device(b, ct_cpu(), false), CT_F64);
    ct_item(ct_max(ct_abs(ct_sub(a64, b64))), &d);
    ct_scope_end(sc);
    return d;
}

/* Each gradient of net equals want[i] * scale (no gradient where want[i]
 * is NULL) within tol. */
static void check_grads(ct_module *net, ct_tensor **want, double scale, double tol, const char *what) {
    for (size_t i = 0; i < NP; i++) {
        const char *name = NULL;
        ct_tensor *p = ct_nn_param_at(net, i, &name);
        ct_tensor *g = ct_grad(p);
        CHECK((g != NULL) == (want[i] != NULL));
        if (g && want[i]) {
            ct_tensor *w = ct_mul_scalar(want[i], scale);
            double d = maxdiff(g, w), t = tol;
            CHECK(ct_device_of(g).type == ct_device_of(p).type); /* averaged where the parameter lives */
            if (ct_dtype_of(p) == CT_BF16) {
                /* 8 bits of mantissa: the ring's sums round differently. */
                double big = 0;
                ct_tensor *m = ct_max(ct_abs(ct_to_dtype(w, CT_F64)));
                ct_item(m, &big);
                ct_tensor_free(m);
                t = 1e-2 * (1 + big);
            }
            if (!(d <= t)) fprintf(stderr, "rank %d: %s: %s differs by %g\n", R, what, name, d);
            CHECK(d <= t);
            ct_tensor_free(w);
        }
        ct_tensor_free(g);
    }
}

/* The mean over ranks of each rank's local[i] (zeros where a rank has none),
 * in float64 (MPI has no bfloat16); NULL where no rank has a gradient. */
static void mean_over_ranks(ct_module *net, ct_tensor **local, ct_tensor **out) {
    for (size_t i = 0; i < NP; i++) {
        int64_t has = local[i] != NULL;
        CHECK_OK(ct_dist_allreduce_i64(&has, 1, CT_DIST_MAX));
        out[i] = NULL;
        if (!has) continue;
        ct_tensor *p = ct_nn_param_at(net, i, NULL);
        /* A float64 copy (to_dtype alone would alias a float64 local[i]). */
        out[i] = ct_keep(ct_to_dtype(local[i] ? local[i] : p, CT_F64));
        ct_tensor *c = ct_keep(local[i] ? ct_clone(out[i]) : ct_zeros_like(out[i]));
        ct_tensor_free(out[i]);
        out[i] = c;
        CHECK_OK(ct_dist_allreduce(out[i], CT_DIST_AVG));
    }
}

/* Every rank holds the same bits: the MAX and MIN over ranks agree with it. */
static void check_identical(ct_module *net) {
    for (size_t i = 0; i < NP; i++) {
        ct_tensor *g = ct_grad(ct_nn_param_at(net, i, NULL));
        if (!g) continue;
        /* float64 copies: exact, and MPI has no bfloat16 (to_dtype alone
         * would alias a float64 gradient). */
        ct_tensor *g64 = ct_to_dtype(g, CT_F64), *hi = ct_clone(g64), *lo = ct_clone(g64);
        ct_tensor_free(g64);
        CHECK_OK(ct_dist_allreduce(hi, CT_DIST_MAX));
        CHECK_OK(ct_dist_allreduce(lo, CT_DIST_MIN));
        CHECK(maxdiff(hi, g) == 0 && maxdiff(lo, g) == 0);
        ct_tensor_free(hi);
        ct_tensor_free(lo);
        ct_tensor_free(g);
    }
}

/* NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): on a host
 * with fewer GPUs than ranks CUDA buckets go through host memory. */
static bool few_gpus_for_ranks(void) {
    int64_t few = ct_cuda_device_count() < ct_dist_local_size();
    CHECK_OK(ct_dist_allreduce_i64(&few, 1, CT_DIST_MAX));
    return few != 0;
}

/* A sharded optimizer's owners (section 8e): model parameter i is stepped
 * by rank i % P. */
static int owner_by_index(const ct_tensor *param, void *net) {
    for (size_t i = 0; i < NP; i++)
        if (ct_data_ptr(ct_nn_param_at(net, i, NULL)) == ct_data_ptr(param)) return (int)(i % (size_t)P);
    return -1;
}

/* The bytes every rank together sent in messages over `windows` armed
 * windows of s (each: zero_grad to None, one backward; two when twice),
 * checking the gradients after each: the mean over ranks (`mean`) times
 * the backwards on every rank, or, owned, on the parameter's owner alone
 * (None elsewhere). */
static uint64_t sent_in_windows(cti_grad_sync *s, Net *n, ct_module *net, ct_tensor **mean, bool owned, bool twice,
                                const char *what) {
    cti_grad_sync_stats before, after;
    cti_grad_sync_get_stats(s, &before);
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, n, true));
    if (twice) CHECK_OK(local_backward(s, n, true));
    CHECK_OK(cti_grad_sync_finish(s));
    cti_grad_sync_get_stats(s, &after);
    ct_tensor *want[NP];
    for (size_t i = 0; i < NP; i++) want[i] = !owned || (int)(i % (size_t)P) == R ? mean[i] : NULL;
    check_grads(net, want, twice ? 2.0 : 1.0, 2e-6, what);
    int64_t sent = (int64_t)(after.sent_bytes - before.sent_bytes);
    CHECK_OK(ct_dist_allreduce_i64(&sent, 1, CT_DIST_SUM));
    return (uint64_t)sent;
}

/* After a sharded step (section 8e): each parameter (.grad None) from its
 * owner through the owned sync's buckets. Each rank sets its own
 * parameters to 1000 (i + 1) and the others' to -1; after the share every
 * rank holds 1000 (i + 1) in each parameter it was told was moved, which
 * is every one in a shared-memory bucket (on several hosts too, through a
 * carrier on each), and none where there is no shared memory (the ring,
 * one rank on each host) or for the bfloat16 parameter (its bucket is on
 * messages). The weights are as before afterwards. */
static void share_from_owners(cti_grad_sync *s, ct_module *net) {
    ct_tensor *params[NP], *keep[NP];
    int owners[NP];
    bool done[NP];
    char why[200];
    bool shm = strstr(cti_grad_sync_transport(s, why, sizeof why), "shared memory") != NULL;
    CHECK_OK(ct_nn_zero_grad(net, true));
    ct_guard *g = ct_no_grad();
    for (size_t i = 0; i < NP; i++) {
        params[i] = ct_nn_param_at(net, i, NULL);
        keep[i] = ct_keep(ct_clone(params[i]));
        owners[i] = (int)(i % (size_t)P);
        CHECK_OK(ct_fill_(params[i], owners[i] == R ? 1000.0 * (double)(i + 1) : -1.0));
    }
    CHECK_OK(cti_grad_sync_share_params(s, NP, params, owners, done));
    for (size_t i = 0; i < NP; i++) {
        const char *name = NULL;
        ct_nn_param_at(net, i, &name);
        bool want = shm && ct_dtype_of(params[i]) != CT_BF16;
        if (done[i] != want) fprintf(stderr, "rank %d: %s: moved %d, expected %d\n", R, name, done[i], want);
        CHECK(done[i] == want);
        double lo = 0, hi = 0;
        ct_tensor *lo_t = ct_min(params[i]), *hi_t = ct_max(params[i]);
        ct_item(lo_t, &lo);
        ct_item(hi_t, &hi);
        ct_tensor_free(lo_t);
        ct_tensor_free(hi_t);
        if (done[i]) CHECK(lo == 1000.0 * (double)(i + 1) && hi == lo);
        else CHECK(hi == (owners[i] == R ? 1000.0 * (double)(i + 1) : -1.0)); /* untouched: the caller broadcasts */
        CHECK_OK(ct_copy_(params[i], keep[i]));
        ct_tensor_free(keep[i]);
    }
    ct_guard_end(g);
}

/* A sync of 600-byte buckets, made while the last rank alone has `name`
 * set to `value`; the variable is as before afterwards. */
static cti_grad_sync *new_with_last_rank_env(ct_module *net, const char *name, const char *value) {
    const char *env = getenv(name);
    char keep[64] = "";
    if (env) snprintf(keep, sizeof keep, "%s", env);
    if (R == P - 1) setenv(name, value, 1);
    cti_grad_sync *s = cti_grad_sync_new(net, 600);
    if (R == P - 1) {
        if (env) setenv(name, keep, 1);
        else unsetenv(name);
    }
    return s;
}

int main(void) {
    if (!ct_test_dist_init(&R, &P)) return 1;
    ct_set_num_threads(1);

    /* 0. Oversubscription: tests.cmake runs 2 ranks in a cpuset of one CPU
     * (CT_TEST_ONE_CPU): they share it, so a waiting rank yields; one rank
     * never does. */
    if (getenv("CT_TEST_ONE_CPU")) {
        uint64_t set[CT_CPU_WORDS];
        cti_cpus_usable_set(set);
        CHECK(cti_cpus_count_set(set) == 1 && set[0] == 1);
        CHECK(cti_dist_host_cpus() == 1);
        CHECK(cti_dist_host_oversubscribed() == (P > 1));
    } else if (P == 1) {
        CHECK(!cti_dist_host_oversubscribed());
        CHECK(cti_dist_host_cpus() == cti_cpus_usable());
    }

    CHECK(cti_grad_sync_new(NULL, 0) == NULL);
    CHECK_ERR(CT_EINVAL, "model is NULL");
    CHECK(cti_grad_sync_finish(NULL) == CT_EINVAL);
    ct_clear_error();

    Net n = {0};
    ct_module *net = build(&n);
    CHECK(net != NULL);
    CHECK(ct_nn_num_params(net) == NP);
    make_data();
#if CTRIAL_HAVE_MPI
    /* Two segments as an earlier job's set-up leaves them, an hour old: one
     * whose creator died (nobody holds it), one whose creator is alive (a
     * child holding its lock until the pipe closes). */
    char stale[64], live[64];
    snprintf(stale, sizeof stale, "/ctrial-test-stale-%ld", (long)getpid());
    snprintf(live, sizeof live, "/ctrial-test-live-%ld", (long)getpid());
    int holder[2] = {-1, -1};
    pid_t child = -1;
    if (R == 0 && P > 1) {
        const struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
        int fd = shm_open(stale, O_CREAT | O_EXCL | O_RDWR, 0600);
        CHECK(fd >= 0 && futimens(fd, old) == 0);
        close(fd);
        CHECK(pipe(holder) == 0);
        child = fork();
        if (child == 0) { /* holds the lock until the pipe closes; no MPI here */
            int lfd = shm_open(live, O_CREAT | O_EXCL | O_RDWR, 0600);
            char c;
            close(holder[1]);
            if (lfd < 0 || flock(lfd, LOCK_EX) != 0 || futimens(lfd, old) != 0) _exit(1);
            (void)!read(holder[0], &c, 1); /* EOF: the parent closed its end */
            _exit(0);
        }
        close(holder[0]);
        for (int tries = 0; tries < 500; tries++) { /* the child holds it */
            int lfd = shm_open(live, O_RDONLY, 0);
            bool held = lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) != 0;
            if (lfd >= 0) close(lfd);
            if (held) break;
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
    }
#endif
    cti_grad_sync *s = cti_grad_sync_new(net, 600);
    CHECK(s != NULL);
#if CTRIAL_HAVE_MPI
    if (R == 0 && P > 1) {
        char why[200];
        bool shm = strstr(cti_grad_sync_transport(s, why, sizeof why), "shared memory") != NULL;
        int fd = shm_open(stale, O_RDONLY, 0), lfd = shm_open(live, O_RDONLY, 0);
        if (shm) CHECK(fd < 0); /* removed by the set-up */
        CHECK(lfd >= 0);        /* its creator is alive */
        if (fd >= 0) close(fd);
        if (lfd >= 0) close(lfd);
        close(holder[1]); /* the creator ends: now it is stale too */
        int status = 0;
        CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        cti_node_shm_remove_stale(); /* (a concurrent test's set-up may have removed them first) */
        CHECK(shm_open(live, O_RDONLY, 0) < 0 && shm_open(stale, O_RDONLY, 0) < 0);
    }
#endif
    {
        char why[200];
        const char *env = getenv("CTRIAL_GRAD_SYNC"), *how = cti_grad_sync_transport(s, why, sizeof why);
        const char *hosts_env = getenv("CTRIAL_GRAD_SYNC_HOST_RANKS");
        int k = hosts_env ? atoi(hosts_env) : P, hosts = (P + k - 1) / k;
        /* messages: halving-doubling from 4 ranks on when a power of two */
        bool pow2 = (P & (P - 1)) == 0, hosts_pow2 = (hosts & (hosts - 1)) == 0;
        const char *messages = P >= 4 && pow2 ? "halving-doubling" : "ring";
        if (R == 0) printf("%d ranks: transport %s%s%s\n", P, how, why[0] ? ": " : "", why);
        if (P == 1) {
            CHECK(strcmp(how, "none") == 0);
        } else if (env && strcmp(env, "ring") == 0) {
            CHECK(strcmp(how, "ring") == 0 && strcmp(why, "CTRIAL_GRAD_SYNC=ring") == 0);
        } else if (env && strcmp(env, "halving-doubling") == 0) {
            CHECK(strcmp(how, pow2 ? "halving-doubling" : "ring") == 0);
            CHECK(strncmp(why, "CTRIAL_GRAD_SYNC=halving-doubling", 33) == 0);
            CHECK((strstr(why, "not a power of two") != NULL) == !pow2);
        } else if (hosts == 1) {
            CHECK(strcmp(how, "shared memory") == 0); /* the test's ranks share this machine */
        } else if (k == 1) {
            CHECK(strcmp(how, messages) == 0 && strstr(why, "one rank on each of"));
        } else {
            /* hosts of k ranks, the last one smaller when k does not divide P */
            char want[64];
            if (P % k == 0) snprintf(want, sizeof want, "%d hosts of %d ranks", hosts, k);
            else snprintf(want, sizeof want, "%d hosts of %d to %d ranks", hosts, P % k, k);
            CHECK(strcmp(how, hosts >= 4 && hosts_pow2 ? "shared memory + halving-doubling" : "shared memory + ring") ==
                  0);
            CHECK(strcmp(why, want) == 0);
        }
    }
    cti_grad_sync_stats st0, st;
    cti_grad_sync_get_stats(s, &st0);
    CHECK(st0.bytes == 0 && st0.buckets == 0);

    ct_tensor *w1 = ct_nn_get(net, "fc1.weight");

    /* 1. Unarmed: local gradients, nothing moves; finish is a no-op. */
    ct_tensor *local[NP], *mean[NP], *synced[NP];
    CHECK_OK(local_backward(s, &n, false));
    CHECK_OK(cti_grad_sync_finish(s));
    cti_grad_sync_get_stats(s, &st);
    CHECK(st.bytes == 0 && st.buckets == 0);
    snapshot(net, local);
    CHECK(local[0] == NULL);                /* unused */
    CHECK((local[1] != NULL) == (R == 0));  /* partial */
    CHECK((local[3] != NULL) == (R == 0));  /* half16 */
    mean_over_ranks(net, local, mean);

    /* 2. Armed: the mean over ranks, identical everywhere. After backward
     * the slots arm lent to parameters the backward did not reach are taken
     * back (None, as in one process). */
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, &n, true));
    CHECK(!ct_has_grad(n.unused));
    CHECK(ct_has_grad(n.partial) == (R == 0));
    CHECK(ct_has_grad(n.half16) == (R == 0));
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 1.0, 1e-6, "armed backward vs the mean of local gradients");
    check_identical(net);
    CHECK(!ct_has_grad(n.unused));
    CHECK(ct_has_grad(n.partial));
    if (R == 0) {
        /* Rank 0's own gradient averaged with P - 1 zeros. */
        ct_tensor *g = ct_grad(n.partial), *want = ct_mul_scalar(local[1], 1.0 / P);
        CHECK(maxdiff(g, want) <= 1e-12);
        ct_tensor_free(want);
        ct_tensor_free(g);
    }
    cti_grad_sync_stats one;
    cti_grad_sync_get_stats(s, &one);
    if (P > 1) {
        CHECK(one.buckets == 8); /* fc3 | fc2.bias | fc2.weight | fc1.bias | fc1.weight | half16 | extra32 | partial, unused */
        CHECK(one.bytes > 0);
        CHECK(one.comm_seconds >= one.wait_seconds && one.wait_seconds >= 0);
    } else {
        CHECK(one.bytes == 0 && one.buckets == 0);
    }
    snapshot(net, synced);

    /* 2b. Zeroed in place instead of set to None: the gradients are views of
     * the buckets now, backward accumulates straight into them, and the
     * next window averages them where they are (the same storage after). */
    ct_storage_info before_info, after_info;
    ct_tensor *g0 = ct_grad(w1);
    CHECK_OK(ct_storage_info_of(g0, &before_info));
    ct_tensor_free(g0);
    CHECK_OK(ct_nn_zero_grad(net, false));
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 1.0, 1e-6, "zeroed in place, armed backward");
    ct_tensor *g1 = ct_grad(w1);
    CHECK_OK(ct_storage_info_of(g1, &after_info));
    CHECK(before_info.id == after_info.id && before_info.offset == after_info.offset);
    ct_tensor_free(g1);
    cti_grad_sync_get_stats(s, &st);
    if (P > 1) CHECK(st.buckets == 2 * one.buckets);
    one.bytes = st.bytes / 2; /* the tallies below count from here */
    one.buckets = st.buckets / 2;

    /* 3. One process, the whole global batch: the same gradients. */
    CHECK_OK(ct_nn_zero_grad(net, true));
    {
        ct_scope *sc = ct_scope_begin();
        ct_tensor *loss = loss_of(&n, X, Y, 1.0 / P);
        CHECK_OK(ct_backward(loss));
        ct_scope_end(sc);
    }
    check_grads(net, synced, 1.0, 1e-6, "armed backward vs the global batch in one process");
    cti_grad_sync_get_stats(s, &st);
    CHECK(st.bytes == 2 * one.bytes); /* that backward was not armed */

    /* 4. Accumulation: an unarmed backward, then an armed one; one reduction
     * of the sum. */
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, &n, false));
    cti_grad_sync_get_stats(s, &st);
    CHECK(st.bytes == 2 * one.bytes);
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 2.0, 2e-6, "accumulated then armed");
    if (P > 1) {
        /* Set to None before: arm lent the slots, so the averages are in the
         * same bucket memory as after the in-place window. */
        ct_storage_info info4;
        ct_tensor *g4 = ct_grad(w1);
        CHECK_OK(ct_storage_info_of(g4, &info4));
        CHECK(info4.id == after_info.id && info4.offset == after_info.offset);
        ct_tensor_free(g4);
    }
    cti_grad_sync_get_stats(s, &st);
    CHECK(st.bytes == 3 * one.bytes && st.buckets == 3 * one.buckets);

    /* 5. Two armed backwards before finish: every bucket once more. */
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 2.0, 2e-6, "two armed backwards");
    check_identical(net);
    cti_grad_sync_get_stats(s, &st);
    CHECK(st.buckets == 5 * one.buckets); /* the first window completed at the second arm, then the second */

    /* 6. A backward no arm announced reaches buckets already out: finish
     * reports it once every collective is done; the next window is clean. */
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(silent_backward(&n));
    if (P > 1) {
        CHECK(cti_grad_sync_finish(s) == CT_ESTATE);
        CHECK_ERR(CT_ESTATE, "did not announce");
    } else {
        CHECK_OK(cti_grad_sync_finish(s));
    }
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s, &n, true));
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 1.0, 1e-6, "the window after a failed one");

    /* 7. Backward on another thread than the one that armed: the hooks
     * leave everything to finish (MPI runs FUNNELED), which still averages. */
    cti_grad_sync_stats st7;
    cti_grad_sync_get_stats(s, &st7);
    CHECK_OK(ct_nn_zero_grad(net, true));
    cti_grad_sync_arm(s, true);
    pthread_t th;
    backward_job job = {&n, -1};
    CHECK(pthread_create(&th, NULL, backward_thread, &job) == 0);
    pthread_join(th, NULL);
    cti_grad_sync_after_backward(s);
    CHECK_OK(job.rc);
    CHECK_OK(cti_grad_sync_finish(s));
    check_grads(net, mean, 1.0, 1e-6, "backward on another thread");
    cti_grad_sync_get_stats(s, &st);
    if (P > 1) {
        CHECK(st.buckets == st7.buckets + one.buckets);
        CHECK(st.wait_seconds - st7.wait_seconds == st.comm_seconds - st7.comm_seconds); /* all inside finish */
    }

    cti_grad_sync_get_stats(s, &st);
    if (R == 0)
        printf("%d ranks: %lld bucket reductions, %.0f bytes, comm %.3f ms, of which waited %.3f ms\n", P,
               (long long)st.buckets, (double)st.bytes, 1e3 * st.comm_seconds, 1e3 * st.wait_seconds);

    cti_grad_sync_free(s);
    cti_grad_sync_free(NULL);
    /* After free the hooks are gone: backward with a freed sync is harmless. */
    CHECK_OK(local_backward(NULL, &n, false));

    /* 8. A sync freed with buckets in flight (a step that failed after
     * backward, on every rank) completes them: nothing is left queued for
     * the next sync's communicator, which works. */
    cti_grad_sync *s2 = cti_grad_sync_new(net, 600);
    CHECK(s2 != NULL);
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s2, &n, true));
    cti_grad_sync_free(s2);
    CHECK_OK(ct_dist_barrier());
    cti_grad_sync *s3 = cti_grad_sync_new(net, 1 << 20);
    CHECK(s3 != NULL);
    CHECK_OK(ct_nn_zero_grad(net, true));
    CHECK_OK(local_backward(s3, &n, true));
    CHECK_OK(cti_grad_sync_finish(s3));
    check_grads(net, mean, 1.0, 1e-6, "a new sync after an abandoned one");
    cti_grad_sync_free(s3);

    /* 8b. Ranks that disagree on shared memory (here the last one is told
     * to take the ring) all take the ring, and nobody waits for anybody:
     * the choice is agreed when the sync is made. */
    if (P > 1) {
        cti_grad_sync *s5 = new_with_last_rank_env(net, "CTRIAL_GRAD_SYNC", "ring");
        CHECK(s5 != NULL);
        char why[200];
        CHECK(strcmp(cti_grad_sync_transport(s5, why, sizeof why), "ring") == 0);
        CHECK(why[0] != '\0');
        CHECK_OK(ct_nn_zero_grad(net, true));
        CHECK_OK(local_backward(s5, &n, true));
        CHECK_OK(cti_grad_sync_finish(s5));
        check_grads(net, mean, 1.0, 1e-6, "ranks that disagreed on shared memory, on the ring");
        cti_grad_sync_free(s5);
    }

    /* 8c. CTRIAL_GRAD_SYNC that is neither ring nor halving-doubling, on
     * one rank only: every rank refuses the sync, naming it. */
    if (P > 1) {
        cti_grad_sync *s7 = new_with_last_rank_env(net, "CTRIAL_GRAD_SYNC", "tree");
        CHECK(s7 == NULL);
        CHECK_ERR(CT_EINVAL, R == P - 1 ? "CTRIAL_GRAD_SYNC='tree'" : "another rank's CTRIAL_GRAD_SYNC");
        cti_grad_sync_free(s7);
    }

    /* 8d. A host size that is not a number, on one rank only: every rank
     * refuses the sync, naming the variable (nobody is left waiting). */
    if (P > 1) {
        cti_grad_sync *s6 = new_with_last_rank_env(net, "CTRIAL_GRAD_SYNC_HOST_RANKS", "two");
        CHECK(s6 == NULL);
        /* the rank that has the value quotes it */
        CHECK_ERR(CT_EINVAL, R == P - 1 ? "CTRIAL_GRAD_SYNC_HOST_RANKS='two'" : "CTRIAL_GRAD_SYNC_HOST_RANKS");
        cti_grad_sync_free(s6);
    }

    /* 8e. A sharded optimizer's sync (cti_grad_sync_new_owned): each
     * parameter's owner gets the mean over ranks, every other rank None;
     * with two backwards in one window, the sum of both means (the owner's
     * averages become sums at the second arm). Every bucket is reduced to
     * its owner, not all-reduced: together the ranks send exactly half the
     * bytes in messages (the bfloat16 bucket over every rank; on several
     * hosts each host's sum between hosts, to the owner's host only; on
     * one host the float buckets send nothing). */
    if (P > 1) {
        cti_grad_sync *sa = cti_grad_sync_new(net, 600);
        CHECK(sa != NULL);
        uint64_t all_sent = sent_in_windows(sa, &n, net, mean, false, false, "all-reduced, for the owned sync");
        cti_grad_sync_free(sa);
        cti_grad_sync *so = cti_grad_sync_new_owned(net, 600, owner_by_index, net);
        CHECK(so != NULL);
        uint64_t own_sent = sent_in_windows(so, &n, net, mean, true, false, "reduced to the owners");
        CHECK(all_sent > 0 && own_sent * 2 == all_sent);
        if (R == 0)
            printf("owned buckets: the ranks sent %llu bytes in messages, all-reduced %llu\n",
                   (unsigned long long)own_sent, (unsigned long long)all_sent);
        CHECK(sent_in_windows(so, &n, net, mean, true, true, "two backwards, reduced to the owners") == own_sent * 2);
        /* then one backward again: the owner's sums were not left over */
        CHECK(sent_in_windows(so, &n, net, mean, true, false, "one backward after two, owned") == own_sent);
        share_from_owners(so, net);
        cti_grad_sync_free(so);
    }

    /* 9. On a GPU: CUDA buckets, hooks on autograd's device thread, the
     * same averages, in two passes: the transport chosen (NCCL where each
     * rank has a GPU of its own, else through host memory: ranks sharing a
     * GPU, or a build without NCCL), then through host memory by name
     * (CTRIAL_CUDA_TRANSPORT=host), whatever the GPUs. The second round of
     * each goes into lent slots. */
    if (!ct_cuda_is_available()) {
        if (R == 0) printf("SKIP: CUDA buckets: no GPU here (ct_cuda_is_available() is false)\n");
    } else {
        bool few = few_gpus_for_ranks();
        int dev = ct_dist_local_rank() % ct_cuda_device_count();
        CHECK_OK(ct_nn_to_device(net, ct_cuda(dev)));
        ct_tensor *xc = ct_keep(ct_to_device(x_local, ct_cuda(dev), false));
        ct_tensor *yc = ct_keep(ct_to_device(y_local, ct_cuda(dev), false));
        ct_tensor *xh = x_local, *yh = y_local;
        x_local = xc;
        y_local = yc;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) setenv("CTRIAL_CUDA_TRANSPORT", "host", 1);
            cti_cuda_transport_reset();
            cti_grad_sync *s4 = cti_grad_sync_new(net, 600);
            CHECK(s4 != NULL);
            char why[256];
            const char *how = cti_grad_sync_transport(s4, why, sizeof why);
            bool nccl = pass == 0 && cti_nccl_is_built() && !few;
            if (P > 1) {
                CHECK(strcmp(how, "nccl") == 0 || !nccl);
                CHECK(nccl || strstr(why, "CUDA through host memory: ") == why);
                if (!nccl && pass == 0)
                    CHECK(strstr(why, cti_nccl_is_built() ? "share a GPU" : "built without NCCL") != NULL);
                if (pass == 1) CHECK(strstr(why, "CTRIAL_CUDA_TRANSPORT=host") != NULL);
                if (R == 0) printf("CUDA buckets, pass %d: %s%s%s\n", pass, how, why[0] ? ", " : "", why);
            }
            for (int round = 0; round < 2; round++) {
                CHECK_OK(ct_nn_zero_grad(net, true));
                CHECK_OK(local_backward(s4, &n, true));
                CHECK_OK(cti_grad_sync_finish(s4));
                CHECK_OK(ct_cuda_synchronize(dev));
                check_grads(net, mean, 1.0, 1e-6, nccl ? "CUDA buckets through NCCL" : "CUDA buckets through the host");
            }
            cti_grad_sync_free(s4);
            /* A sharded optimizer's CUDA buckets: reduced to their owners
             * (ncclReduce, or the host's reduce when staged). */
            if (P > 1) {
                cti_grad_sync *so = cti_grad_sync_new_owned(net, 600, owner_by_index, net);
                CHECK(so != NULL);
                uint64_t sent = sent_in_windows(so, &n, net, mean, true, false,
                                                nccl ? "owned CUDA buckets through NCCL" : "owned CUDA buckets through the host");
                CHECK(nccl ? sent == 0 : sent > 0); /* (the bfloat16 bucket takes messages through the host) */
                cti_grad_sync_free(so);
            }
        }
        unsetenv("CTRIAL_CUDA_TRANSPORT");
        cti_cuda_transport_reset();
        x_local = xh;
        y_local = yh;
        ct_tensor_free(xc);
        ct_tensor_free(yc);
    }
    free_all(local);
    free_all(mean);
    free_all(synced);
    ct_tensor_free(x_local);
    ct_tensor_free(y_local);
    ct_tensor_free(X);
    ct_tensor_free(Y);
    ct_nn_free(net);

    return ct_test_dist_result("dist_grad_sync");
}
