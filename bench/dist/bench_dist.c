/* bench/dist/bench_dist.c — gradient averaging across ranks (src/dist/grad_sync.c,
 * linked from module dist) measured beside a bare MPI_Allreduce; run.py drives it under
 * mpirun and prints the table. Rank 0 prints one JSON line per measurement.
 *
 *   bench_dist bandwidth [--mb 1,10,100] [--params 64] [--reps 7] [--bucket-mb 25] [--zero none|inplace]
 *       Gradients of MB megabytes (float32) spread evenly over PARAMS
 *       parameters, produced by a backward as cheap as backward gets
 *       (loss = sum of every parameter's sum: each gradient is a fill).
 *       Each repetition times, back to back, with a barrier before each:
 *         arm(false) + backward + after_backward + zero_grad (unarmed),
 *         arm + the same backward + after_backward + finish + zero_grad
 *         (hooks, staging, ring),
 *         MPI_Allreduce (MPI_SUM, in place) of one flat buffer of MB.
 *       The sync's time is the second minus the first; medians over reps.
 *       After each step the gradients are set to None (--zero none,
 *       PyTorch's default: arm lends each parameter its zeroed bucket slot
 *       as .grad) or zeroed in place (--zero inplace: backward accumulates
 *       into the bucket views finish left); either way backward adds
 *       straight into the buckets.
 *       Also printed: the all-reduce alone, bucket bytes over the summed
 *       launch-to-completion time of the buckets (grad_sync's stats).
 *
 *   bench_dist overlap [--steps 20] [--batch 64] [--width 2048] [--bucket-mb 25]
 *       An MLP 784 -> W -> W -> W -> 10 (float32), forward + backward +
 *       finish per step, armed every step: the sync's stats (comm_seconds,
 *       wait_seconds) over the timed steps, the hidden share
 *       1 - wait/comm, and the step time with and without the sync.
 *
 *   bench_dist train [--steps 30] [--global-batch 128] [--width 1024] [--threads 1] [--zero none|inplace]
 *                    [--optim sgd|adam] [--shard 0|1]
 *       An MLP 784 -> W -> W -> 10 trained with SGD (--optim adam: Adam), each rank on
 *       GLOBAL/size rows of random data: samples/s of the whole job
 *       (GLOBAL * steps / wall time of the timed steps), the sync's
 *       comm/wait per step, where a step's time goes (forward with arm,
 *       backward with the hooks, the sync after it, optimizer, zero_grad:
 *       rank 0's, per step) and the last step's loss on rank 0 (run.py
 *       checks it against torch DDP's, ddp_train.py). --zero as for
 *       bandwidth (the optimizer's zero_grad after each step). --shard 1:
 *       the optimizer's state sharded across the ranks as ct_fit's
 *       shard_optimizer does (dist/shard.h): each gradient is reduced to the
 *       rank that steps it (cti_grad_sync_new_owned), each rank steps its
 *       share, then every parameter comes from its owner (in "optimizer_ms");
 *       state_bytes_max is the most optimizer state a rank holds;
 *       grad_mb_sent_per_step the gradients' bytes every rank sent in MPI
 *       messages together, per step (0 where shared memory carries them).
 *
 * Options common to all: --threads N (libtorch's intra-op threads per rank,
 * default 1), --warmup N (untimed steps/reps first, default 2), --tune-malloc
 * 1|0 (default 1: glibc's malloc keeps freed blocks up to 32 MiB, as ct_fit
 * sets it by default). Every JSON line says which transport the sync used
 * (cti_grad_sync_transport: "shared memory", "shared memory + ring" on
 * several hosts, "ring", "halving-doubling"; CTRIAL_GRAD_SYNC=ring or
 * halving-doubling in the environment picks messages by that algorithm,
 * CTRIAL_GRAD_SYNC_HOST_RANKS=k fakes hosts of k ranks). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/config.h>
#include <ctrial/ctrial.h>

#include "base/heap.h"
#include "dist/grad_sync.h"
#include "dist/shard.h"

#if CTRIAL_HAVE_MPI
#include <mpi.h>
#endif

static int R, P;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what) {
    fprintf(stderr, "bench_dist: rank %d: %s: %s\n", R, what, ct_last_error());
    ct_dist_abort(1, what);
}

/* ---- options ------------------------------------------------------------- */

typedef struct {
    const char *mb, *zero, *optim;
    int params, reps, steps, batch, global_batch, width, threads, warmup, shard;
    double bucket_mb;
    bool tune_malloc;
} opts;

static opts parse(int argc, char **argv) {
    opts o = {.mb = "1,10,100", .zero = "none", .optim = "sgd", .params = 64, .reps = 7, .steps = 0, .batch = 64, .global_batch = 128,
              .width = 0, .threads = 1, .warmup = 2, .bucket_mb = 25, .tune_malloc = true};
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--mb")) o.mb = v;
        else if (!strcmp(k, "--params")) o.params = atoi(v);
        else if (!strcmp(k, "--reps")) o.reps = atoi(v);
        else if (!strcmp(k, "--steps")) o.steps = atoi(v);
        else if (!strcmp(k, "--batch")) o.batch = atoi(v);
        else if (!strcmp(k, "--global-batch")) o.global_batch = atoi(v);
        else if (!strcmp(k, "--width")) o.width = atoi(v);
        else if (!strcmp(k, "--threads")) o.threads = atoi(v);
        else if (!strcmp(k, "--warmup")) o.warmup = atoi(v);
        else if (!strcmp(k, "--bucket-mb")) o.bucket_mb = atof(v);
        else if (!strcmp(k, "--zero")) o.zero = v;
        else if (!strcmp(k, "--optim")) o.optim = v;
        else if (!strcmp(k, "--shard")) o.shard = atoi(v);
        else if (!strcmp(k, "--tune-malloc")) o.tune_malloc = atoi(v) != 0;
        else {
            fprintf(stderr, "bench_dist: unknown option %s\n", k);
            exit(2);
        }
    }
    return o;
}

static size_t bucket_bytes(const opts *o) { return (size_t)(o->bucket_mb * 1024 * 1024); }

/* ---- 1. bandwidth ----------------------------------------------------------- */

#if CTRIAL_HAVE_MPI
/* loss = sum over parameters of p.sum(): backward fills every gradient. */
static int cheap_backward(ct_module *m) {
    ct_scope *sc = ct_scope_begin();
    size_t n = 0;
    ct_tensor *const *ps = ct_nn_parameters(m, &n);
    ct_tensor *loss = ct_sum(ps[0]);
    for (size_t i = 1; i < n; i++) loss = ct_add(loss, ct_sum(ps[i]));
    int rc = loss ? ct_backward(loss) : ct_last_code();
    ct_scope_end(sc);
    return rc;
}
#endif

static void bandwidth_one(const opts *o, double mb) {
#if CTRIAL_HAVE_MPI
    int64_t total = (int64_t)(mb * 1e6 / 4);
    int64_t each = total / o->params;
    total = each * o->params;
    ct_module *m = ct_nn_module("Grads", NULL, NULL, NULL);
    for (int i = 0; i < o->params; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d", i);
        if (!ct_nn_add_parameter(m, name, ct_zeros(CT_SHAPE(each), NULL))) die("add_parameter");
    }
    cti_grad_sync *s = cti_grad_sync_new(m, bucket_bytes(o));
    if (!s) die("cti_grad_sync_new");
    ct_tensor *flat = ct_ones(CT_SHAPE(total), NULL);
    float *fp = ct_data_ptr(flat);
    double *tb = calloc((size_t)o->reps, sizeof *tb), *ts = calloc((size_t)o->reps, sizeof *ts),
           *ta = calloc((size_t)o->reps, sizeof *ta);
    bool to_none = strcmp(o->zero, "inplace") != 0;
    cti_grad_sync_stats st0 = {0};
    /* Each timed window ends with the zero_grad that ends a step: the
     * fresh gradients of a backward are freed there without a sync, and in
     * finish with one (it points .grad at the bucket), so both windows pay
     * for freeing them once. */
    ct_nn_zero_grad(m, to_none);
    for (int rep = -o->warmup; rep < o->reps; rep++) {
        if (rep == 0) cti_grad_sync_get_stats(s, &st0);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        cti_grad_sync_arm(s, false);
        if (cheap_backward(m) != 0) die("backward");
        cti_grad_sync_after_backward(s);
        ct_nn_zero_grad(m, to_none);
        double t1 = now_s();

        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = now_s();
        cti_grad_sync_arm(s, true);
        if (cheap_backward(m) != 0) die("backward");
        cti_grad_sync_after_backward(s);
        if (cti_grad_sync_finish(s) != 0) die("cti_grad_sync_finish");
        ct_nn_zero_grad(m, to_none);
        double t3 = now_s();

        MPI_Barrier(MPI_COMM_WORLD);
        double t4 = now_s();
        MPI_Allreduce(MPI_IN_PLACE, fp, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t5 = now_s();
        if (rep >= 0) {
            tb[rep] = t1 - t0;
            ts[rep] = t3 - t2;
            ta[rep] = t5 - t4;
        }
    }
    cti_grad_sync_stats st;
    cti_grad_sync_get_stats(s, &st);
    double b = median(tb, o->reps), sy = median(ts, o->reps), a = median(ta, o->reps);
    double bytes = (double)total * 4;
    double ring_gbs = (double)(st.bytes - st0.bytes) / (st.comm_seconds - st0.comm_seconds) / 1e9;
    if (R == 0)
        printf("{\"mode\": \"bandwidth\", \"ranks\": %d, \"zero\": \"%s\", \"mb\": %.3f, \"params\": %d, "
               "\"buckets_per_step\": %.2f, \"backward_s\": %.6f, \"sync_step_s\": %.6f, \"sync_s\": %.6f, "
               "\"allreduce_s\": %.6f, \"sync_gbs\": %.4f, \"ring_gbs\": %.4f, \"allreduce_gbs\": %.4f, "
               "\"ratio\": %.4f, \"transport\": \"%s\"}\n",
               P, o->zero, bytes / 1e6, o->params, (double)(st.buckets - st0.buckets) / o->reps, b, sy, sy - b, a,
               bytes / (sy - b) / 1e9, ring_gbs, bytes / a / 1e9, a / (sy - b), cti_grad_sync_transport(s, NULL, 0));
    fflush(stdout);
    free(tb);
    free(ts);
    free(ta);
    ct_tensor_free(flat);
    cti_grad_sync_free(s);
    ct_nn_free(m);
#else
    (void)o;
    (void)mb;
    if (R == 0) printf("{\"mode\": \"bandwidth\", \"error\": \"built without MPI\"}\n");
#endif
}

static int bandwidth(const opts *o) {
    char *list = strdup(o->mb);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) bandwidth_one(o, atof(tok));
    free(list);
    return 0;
}

/* ---- the MLP of 2. and 3. ------------------------------------------------------- */

typedef struct {
    ct_module *seq;
} mlp;

static ct_module *build_mlp(int width, int hidden_layers) {
    ct_manual_seed(0);
    ct_module *mods[16];
    int n = 0;
    int64_t in = 784;
    for (int i = 0; i < hidden_layers; i++) {
        mods[n++] = ct_nn_linear(in, width, true);
        mods[n++] = ct_nn_relu();
        in = width;
    }
    mods[n++] = ct_nn_linear(in, 10, true);
    return ct_nn_sequential(n, mods);
}

/* forward + cross-entropy + backward on rows x, labels y. */
static int step_backward(ct_module *net, const ct_tensor *x, const ct_tensor *y) {
    ct_scope *sc = ct_scope_begin();
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(net, x), y);
    int rc = loss ? ct_backward(loss) : ct_last_code();
    ct_scope_end(sc);
    return rc;
}

/* ---- 2. overlap ------------------------------------------------------------------ */

static int overlap(const opts *o) {
    int width = o->width ? o->width : 2048, steps = o->steps ? o->steps : 20;
    ct_module *net = build_mlp(width, 3);
    cti_grad_sync *s = cti_grad_sync_new(net, bucket_bytes(o));
    if (!s) die("cti_grad_sync_new");
    ct_manual_seed(1 + (uint64_t)R);
    ct_tensor *x = ct_randn(CT_SHAPE(o->batch, 784), NULL);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(o->batch), NULL);
    double *t_plain = calloc((size_t)steps, sizeof *t_plain), *t_sync = calloc((size_t)steps, sizeof *t_sync);
    cti_grad_sync_stats before = {0}, after;
    for (int i = -o->warmup; i < steps; i++) {
        if (i == 0) cti_grad_sync_get_stats(s, &before);
        ct_nn_zero_grad(net, true);
        ct_dist_barrier();
        double t0 = now_s();
        cti_grad_sync_arm(s, true);
        if (step_backward(net, x, y) != 0) die("backward");
        cti_grad_sync_after_backward(s);
        if (cti_grad_sync_finish(s) != 0) die("cti_grad_sync_finish");
        double t1 = now_s();
        ct_nn_zero_grad(net, true);
        ct_dist_barrier();
        double t2 = now_s();
        if (step_backward(net, x, y) != 0) die("backward");
        double t3 = now_s();
        if (i >= 0) {
            t_sync[i] = t1 - t0;
            t_plain[i] = t3 - t2;
        }
    }
    cti_grad_sync_get_stats(s, &after);
    double comm = after.comm_seconds - before.comm_seconds, wait = after.wait_seconds - before.wait_seconds;
    double ms_sync = 1e3 * median(t_sync, steps), ms_plain = 1e3 * median(t_plain, steps);
    /* Each rank's own view; rank 0 prints the mean over ranks of the shares. */
    double hidden = comm > 0 ? 1 - wait / comm : 0, sum_hidden = hidden;
#if CTRIAL_HAVE_MPI
    if (P > 1) MPI_Allreduce(&hidden, &sum_hidden, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    if (R == 0)
        printf("{\"mode\": \"overlap\", \"ranks\": %d, \"width\": %d, \"batch\": %d, \"steps\": %d, "
               "\"grad_mb\": %.3f, \"buckets_per_step\": %.2f, \"comm_ms_per_step\": %.3f, "
               "\"wait_ms_per_step\": %.3f, \"hidden_share\": %.4f, \"hidden_share_mean_over_ranks\": %.4f, "
               "\"step_ms_with_sync\": %.3f, \"step_ms_without\": %.3f}\n",
               P, width, o->batch, steps, (double)(after.bytes - before.bytes) / steps / 1e6,
               (double)(after.buckets - before.buckets) / steps, 1e3 * comm / steps, 1e3 * wait / steps, hidden,
               sum_hidden / P, ms_sync, ms_plain);
    free(t_plain);
    free(t_sync);
    ct_tensor_free(x);
    ct_tensor_free(y);
    cti_grad_sync_free(s);
    ct_nn_free(net);
    return 0;
}

/* ---- 3. training throughput --------------------------------------------------------- */

/* --shard 1: the rank that steps a model parameter, as ct_fit's context
 * finds it (the optimizer holds the model's parameters, in order). */
typedef struct {
    const ct_optim *opt;
    const cti_shard *shard;
} owners;

static int owner_of(const ct_tensor *param, void *ctx) {
    const owners *w = ctx;
    for (size_t i = 0; i < ct_optim_num_params(w->opt); i++)
        if (ct_data_ptr(ct_optim_param(w->opt, i)) == ct_data_ptr(param)) return cti_shard_owner_of(w->shard, i);
    return -1;
}

static int train(const opts *o) {
    int width = o->width ? o->width : 1024, steps = o->steps ? o->steps : 30;
    if (o->global_batch % P != 0) {
        fprintf(stderr, "bench_dist: global batch %d does not split over %d ranks\n", o->global_batch, P);
        return 2;
    }
    int local = o->global_batch / P;
    ct_module *net = build_mlp(width, 2);
    ct_sgd_opts so = ct_sgd_defaults();
    so.lr = 0.01;
    ct_adam_opts ao = ct_adam_defaults();
    ct_optim *opt = !strcmp(o->optim, "adam") ? ct_optim_adam(net, &ao) : ct_optim_sgd(net, &so);
    cti_shard *shard = o->shard ? cti_shard_new(opt, R, P) : NULL;
    if (!opt || (o->shard && !shard)) die("optimizer");
    /* Sharded: each gradient reduced to the rank that steps it, as ct_fit does. */
    owners w = {opt, shard};
    cti_grad_sync *s = shard ? cti_grad_sync_new_owned(net, bucket_bytes(o), owner_of, &w)
                             : cti_grad_sync_new(net, bucket_bytes(o));
    if (!s) die("cti_grad_sync_new");
    /* Each rank its own rows, one fixed batch (data loading is not measured). */
    ct_manual_seed(1 + (uint64_t)R);
    ct_tensor *x = ct_randn(CT_SHAPE(local, 784), NULL);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(local), NULL);
    /* Where a step's time goes, summed over the timed steps (this rank's
     * clock): forward (and the loss), backward (with the hooks that stage
     * gradients and poll buckets in flight), the sync after it (launching
     * what is left and waiting for every bucket: after_backward + finish),
     * the optimizer step and zero_grad. No data part: the batch is fixed. */
    enum { FWD, BWD, SYNC, OPT, ZERO, PHASES };
    double phase[PHASES] = {0}, t0 = 0, loss_value = 0;
    cti_grad_sync_stats before = {0}, after;
    for (int i = -o->warmup; i < steps; i++) {
        if (i == 0) {
            ct_dist_barrier();
            t0 = now_s();
        }
        double t[PHASES + 1];
        t[0] = now_s();
        cti_grad_sync_arm(s, true);
        ct_scope *sc = ct_scope_begin();
        ct_tensor *loss = ct_cross_entropy(ct_nn_forward(net, x), y);
        if (!loss) die("forward");
        t[1] = now_s();
        if (ct_backward(loss) != 0) die("backward");
        t[2] = now_s();
        if (i == steps - 1 && ct_item(loss, &loss_value) != 0) die("loss");
        ct_scope_end(sc);
        cti_grad_sync_after_backward(s);
        if (cti_grad_sync_finish(s) != 0) die("cti_grad_sync_finish");
        t[3] = now_s();
        if (ct_optim_step(opt) != 0) die("step");
        t[4] = now_s();
        ct_optim_zero_grad(opt, strcmp(o->zero, "inplace") != 0);
        t[5] = now_s();
        /* Sharded: the parameters from their owners, counted in "optimizer_ms" (through the buckets'
         * shared memory when zero_grad set .grad to None). */
        bool none = strcmp(o->zero, "inplace") != 0;
        if (shard && cti_shard_sync_params(shard, opt, &s, none ? 1 : 0) != 0) die("cti_shard_sync_params");
        double share = now_s() - t[5];
        if (i == -1) cti_grad_sync_get_stats(s, &before);
        for (int k = 0; i >= 0 && k < PHASES; k++) phase[k] += t[k + 1] - t[k];
        if (i >= 0) phase[OPT] += share;
    }
    ct_dist_barrier();
    double wall = now_s() - t0;
    cti_grad_sync_get_stats(s, &after);
    /* The optimizer state this rank holds, the most over ranks. */
    int64_t state_bytes = 0;
    ct_value *sd = ct_optim_state_dict(opt);
    const ct_value *st = ct_value_dict_get(sd, "state");
    for (size_t e = 0; e < ct_value_len(st); e++) {
        const ct_value *entry = ct_value_dict_at(st, e, NULL, NULL);
        for (size_t k = 0; k < ct_value_len(entry); k++) {
            ct_tensor *v = ct_value_get_tensor(ct_value_dict_at(entry, k, NULL, NULL));
            if (v) state_bytes += ct_numel(v) * (int64_t)ct_dtype_size(ct_dtype_of(v));
        }
    }
    ct_value_free(sd);
    if (ct_dist_allreduce_i64(&state_bytes, 1, CT_DIST_MAX) != 0) die("allreduce");
    /* The gradients' bytes in messages, every rank's together, per step. */
    int64_t sent = (int64_t)(after.sent_bytes - before.sent_bytes);
    if (ct_dist_allreduce_i64(&sent, 1, CT_DIST_SUM) != 0) die("allreduce");
    if (R == 0)
        printf("{\"mode\": \"train\", \"ranks\": %d, \"threads\": %d, \"zero\": \"%s\", \"width\": %d, "
               "\"global_batch\": %d, \"steps\": %d, \"samples_per_s\": %.2f, \"ms_per_step\": %.3f, "
               "\"comm_ms_per_step\": %.3f, \"wait_ms_per_step\": %.3f, \"forward_ms\": %.3f, "
               "\"backward_ms\": %.3f, \"sync_ms\": %.3f, \"optimizer_ms\": %.3f, \"zero_grad_ms\": %.3f, "
               "\"final_loss\": %.9g, \"transport\": \"%s\", \"malloc_tuned\": %s, \"optim\": \"%s\", "
               "\"shard\": %s, \"state_bytes_max\": %lld, \"grad_mb_sent_per_step\": %.3f}\n",
               P, o->threads, o->zero, width, o->global_batch, steps, (double)o->global_batch * steps / wall,
               1e3 * wall / steps, 1e3 * (after.comm_seconds - before.comm_seconds) / steps,
               1e3 * (after.wait_seconds - before.wait_seconds) / steps, 1e3 * phase[FWD] / steps,
               1e3 * phase[BWD] / steps, 1e3 * phase[SYNC] / steps, 1e3 * phase[OPT] / steps,
               1e3 * phase[ZERO] / steps, loss_value, cti_grad_sync_transport(s, NULL, 0),
               o->tune_malloc ? "true" : "false", o->optim, shard ? "true" : "false", (long long)state_bytes,
               (double)sent / steps / 1e6);
    ct_tensor_free(x);
    ct_tensor_free(y);
    cti_shard_free(shard);
    ct_optim_free(opt);
    cti_grad_sync_free(s);
    ct_nn_free(net);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_dist bandwidth|overlap|train [options] (see the source)\n");
        return 2;
    }
    if (ct_dist_init() != 0) {
        fprintf(stderr, "ct_dist_init: %s\n", ct_last_error());
        return 1;
    }
    R = ct_dist_rank();
    P = ct_dist_size();
    opts o = parse(argc, argv);
    ct_set_num_threads(o.threads);
    /* What ct_fit does by default (ct_fit_opts.tune_malloc): freed blocks up
     * to 32 MiB stay in the heap instead of going back to the kernel, so a
     * step's fresh gradients and activations cost no page faults. The
     * training part measures what ct_fit would run. */
    if (o.tune_malloc) cti_heap_tune_for_training();
    int rc;
    if (!strcmp(argv[1], "bandwidth")) rc = bandwidth(&o);
    else if (!strcmp(argv[1], "overlap")) rc = overlap(&o);
    else if (!strcmp(argv[1], "train")) rc = train(&o);
    else {
        fprintf(stderr, "bench_dist: unknown mode %s\n", argv[1]);
        rc = 2;
    }
    ct_dist_finalize();
    return rc;
}
