/*
 * bench_loop — what ct_fit costs: the loop's own overhead per batch, and
 * the digits MLP trained through it (run.py sets it beside a hand-written
 * libtorch loop, bench_loop_floor.cpp).
 *
 *     bench_loop overhead [--batches N] [--loader user|tensors] [--metric float|tensor]
 *                         [--batch-size B] [--report N] [--warmup N] [--out DIR]
 *     bench_loop digits   [--steps N] [--threads T] [--seed S] [--warmup N]
 *                         [--data DIR] [--out DIR] [--report N]
 *
 * Each mode prints one JSON line (run.py parses it). Times cover the
 * training batches only: from the first epoch start to the end of the last
 * training workload (its report included), so setup, data loading at
 * creation and the final validation are outside.
 *
 * overhead: train_batch does nothing but return a constant metric, over a
 * loader that does next to nothing, so what is left is the loop: the
 * loader's sampler chain and hand-over, the scope around train_batch, the
 * metric dict kept for the workload, the boundary checks, and the report's
 * reduction. The same loader driven by ct_loader_next alone gives the
 * loader's share; the difference is the loop's own.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <ctrial/callback.h>
#include <ctrial/trial.h>

/* Under `valgrind --tool=callgrind --instr-atstart=no` only the timed
 * window is counted (instructions per batch, whatever the machine's load);
 * outside valgrind these are a few no-op instructions. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name) ((void)(name))
#endif

/* One counted window: its own dump file, named `name` inside. */
static void count_begin(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
}

static void count_end(const char *name) {
    CALLGRIND_DUMP_STATS_AT(name);
    CALLGRIND_STOP_INSTRUMENTATION;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads): on a loaded machine it moves
 * less than wall time, as time spent waiting for a core is not counted. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* User and system CPU seconds and minor page faults so far (this process). */
typedef struct {
    double user, sys;
    long minflt;
} Usage;

static Usage usage_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    Usage u = {(double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec,
               (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec, ru.ru_minflt};
    return u;
}

static void die(const char *what) {
    fprintf(stderr, "bench_loop: %s: %s\n", what, ct_last_error());
    exit(1);
}

/* ---- options ------------------------------------------------------------- */

typedef struct {
    const char *mode;
    int64_t batches;      /* overhead: timed batches */
    int64_t steps;        /* digits: timed steps */
    int64_t warmup;       /* batches of an untimed run first */
    int64_t batch_size;
    int64_t report;       /* reporting period in batches */
    int threads;          /* intra-op threads (0: leave libtorch's default) */
    uint64_t seed;
    const char *loader;   /* overhead: "user" or "tensors" */
    const char *metric;   /* overhead: "float" or "tensor" */
    const char *data;
    const char *out;
} Opts;

static void usage(void) {
    fprintf(stderr,
            "usage: bench_loop overhead [--batches N] [--loader user|tensors] [--metric float|tensor]\n"
            "                           [--batch-size B] [--report N] [--warmup N] [--out DIR]\n"
            "       bench_loop digits [--steps N] [--threads T] [--seed S] [--warmup N] [--data DIR]\n"
            "                         [--out DIR] [--report N]\n");
    exit(2);
}

static Opts parse(int argc, char **argv) {
    Opts o = {.batches = 200000, .steps = 3000, .warmup = -1, .batch_size = -1, .report = -1,
              .threads = 1, .seed = 0, .loader = "user", .metric = "float",
              .data = "examples/data/digits", .out = "/tmp/ctrial_bench_loop"};
    if (argc < 2) usage();
    o.mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        i++;
        if (!strcmp(a, "--batches")) o.batches = atoll(v);
        else if (!strcmp(a, "--steps")) o.steps = atoll(v);
        else if (!strcmp(a, "--warmup")) o.warmup = atoll(v);
        else if (!strcmp(a, "--batch-size")) o.batch_size = atoll(v);
        else if (!strcmp(a, "--report")) o.report = atoll(v);
        else if (!strcmp(a, "--threads")) o.threads = atoi(v);
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--loader")) o.loader = v;
        else if (!strcmp(a, "--metric")) o.metric = v;
        else if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else usage();
    }
    return o;
}

/* ---- timing callback (both modes) ----------------------------------------- */

typedef struct {
    double t0, t1;          /* first epoch start; end of the latest workload */
    double c0, c1;          /* the same in process CPU time */
    Usage u0, u1;
    bool started;
    bool count;             /* the timed run: callgrind counts its window */
    int64_t max_batches;
    int64_t batches;        /* batches at the latest workload end */
    double last_train_loss; /* the latest workload's average "loss" */
    double val_loss;        /* the latest validation's "validation_loss" */
} Timer;

static int on_epoch_start(void *self, ct_context *ctx, int64_t epoch) {
    Timer *t = self;
    if (!t->started) {
        t->started = true;
        if (t->count) count_begin();
        t->t0 = now_s();
        t->c0 = cpu_s();
        t->u0 = usage_now();
    }
    return 0;
}

static int on_workload_end(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    Timer *t = self;
    t->t1 = now_s();
    t->c1 = cpu_s();
    t->u1 = usage_now();
    ct_value_get_int(ct_value_dict_get(avg, "batches"), &t->batches);
    if (t->count && t->batches == t->max_batches) count_end("ct_fit");
    ct_value_get_float(ct_value_dict_get(avg, "loss"), &t->last_train_loss);
    return 0;
}

static int on_val_end(void *self, ct_context *ctx, const ct_value *metrics) {
    Timer *t = self;
    ct_value_get_float(ct_value_dict_get(metrics, "validation_loss"), &t->val_loss);
    return 0;
}

static Timer g_timer;

static int add_timer(void *self, ct_context *ctx) {
    ct_callback cb = {.name = "bench_timer", .self = &g_timer, .on_training_epoch_start = on_epoch_start,
                      .on_training_workload_end = on_workload_end, .on_validation_end = on_val_end};
    return ct_ctx_add_callback(ctx, &cb);
}

/* Runs the trial for `batches` and returns the timer; the ct_fit options
 * common to both modes: no checkpoints, no console, validation only at the
 * end (max_length always validates). */
static Timer fit(const ct_trial *trial, const Opts *o, int64_t batches, int64_t report, const ct_value *hp,
                 bool timed) {
    memset(&g_timer, 0, sizeof g_timer);
    g_timer.count = timed;
    g_timer.max_batches = batches;
    ct_fit_opts f = ct_fit_defaults();
    f.max_length = ct_batches(batches);
    f.reporting_period = ct_batches(report);
    f.checkpoint_policy = CT_CKPT_NONE;
    f.quiet = true;
    f.seed = o->seed;
    f.output_dir = o->out;
    f.overwrite = true; /* a scratch directory, run after run */
    f.hparams = hp;
    if (ct_fit(trial, &f) != 0) die("ct_fit");
    return g_timer;
}

/* ---- overhead: an empty train_batch over a loader that does nothing -------- */

typedef struct {
    ct_tensor *batch; /* the one preallocated batch every get_batch hands out */
} TinyData;

static int64_t tiny_len(void *self) { return 1 << 20; }

static ct_value *tiny_get(void *self, int64_t index) {
    ct_set_error(CT_ETRIAL, "tiny dataset: only get_batch is used");
    return NULL;
}

/* An alias (a new handle on the same storage) is as little as a NEW value
 * holding a tensor can be. */
static ct_value *tiny_get_batch(void *self, const int64_t *indices, int64_t n) {
    return ct_value_tensor(ct_alias(((TinyData *)self)->batch));
}

static void tiny_free(void *self) {
    ct_tensor_free(((TinyData *)self)->batch);
    free(self);
}

static const Opts *g_opts;
static ct_tensor *g_const_metric; /* 0-dim float, no grad: the "tensor" metric */

/* The loader of the overhead run: "user" hands out one preallocated batch
 * (the loader's own machinery only); "tensors" is ct_dataset_tensors over
 * tiny tensors (plus one index_select per tensor per batch). */
static ct_loader *tiny_loader(int64_t batch_size, bool repeat) {
    ct_dataset *ds;
    if (!strcmp(g_opts->loader, "tensors")) {
        ct_tensor *x = ct_zeros(CT_SHAPE(1024, 1), NULL);
        ct_tensor *y = ct_zeros(CT_SHAPE(1024), &(ct_topts){.dtype = CT_I64});
        ds = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
        ct_tensor_free(x);
        ct_tensor_free(y);
    } else {
        TinyData *td = calloc(1, sizeof *td);
        td->batch = ct_keep(ct_zeros(CT_SHAPE(batch_size, 1), NULL));
        static const ct_dataset_vtable vt = {tiny_len, tiny_get, tiny_get_batch, tiny_free};
        ds = ct_dataset_new(&vt, td);
    }
    if (!ds) die("dataset");
    ct_loader_opts lo = ct_loader_defaults();
    lo.batch_size = batch_size;
    lo.repeat = repeat; /* ct_fit sets the training chain itself; alone we ask for it */
    ct_loader *l = ct_loader_new(ds, &lo);
    if (!l) die("ct_loader_new");
    return l;
}

static void *empty_init(ct_context *ctx) { return &g_timer; /* any non-NULL */ }

static ct_loader *empty_train_loader(void *self, ct_context *ctx) {
    return tiny_loader(ct_ctx_per_slot_batch_size(ctx), false);
}

/* The final validation sees one batch: a one-pass loader as long as a batch. */
static ct_loader *empty_val_loader(void *self, ct_context *ctx) {
    ct_tensor *x = ct_zeros(CT_SHAPE(ct_ctx_per_slot_batch_size(ctx), 1), NULL);
    ct_dataset *ds = ct_dataset_tensors(1, &x);
    ct_tensor_free(x);
    ct_loader_opts lo = ct_loader_defaults();
    lo.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ds, &lo);
}

/* A tensor metric is the usual answer (a loss); a number needs a dict, as
 * train_batch returns a tensor or a dict of metrics. */
static ct_value *empty_train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                                   int64_t batch_idx) {
    if (g_const_metric) return ct_value_tensor(ct_alias(g_const_metric));
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_float(0.5));
    return m;
}

static ct_value *empty_evaluate(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(0.5));
    return m;
}

/* ct_loader_next alone over the same loader: µs per batch (wall; CPU in
 * *cpu_us). */
static double loader_alone(int64_t batches, int64_t batch_size, double *cpu_us) {
    ct_loader *l = tiny_loader(batch_size, true);
    ct_value *b;
    for (int64_t i = 0; i < batches / 10; i++) { /* warm-up */
        if (ct_loader_next(l, &b) != 1) die("ct_loader_next");
        ct_value_free(b);
    }
    count_begin();
    double t0 = now_s(), c0 = cpu_s();
    for (int64_t i = 0; i < batches; i++) {
        if (ct_loader_next(l, &b) != 1) die("ct_loader_next");
        ct_value_free(b);
    }
    double dt = now_s() - t0;
    count_end("loader");
    *cpu_us = 1e6 * (cpu_s() - c0) / (double)batches;
    ct_loader_free(l);
    return 1e6 * dt / (double)batches;
}

static int run_overhead(const Opts *o) {
    int64_t bs = o->batch_size > 0 ? o->batch_size : 32;
    int64_t report = o->report > 0 ? o->report : 1000;
    int64_t warmup = o->warmup >= 0 ? o->warmup : o->batches / 10;
    if (strcmp(o->loader, "user") && strcmp(o->loader, "tensors")) usage();
    if (!strcmp(o->metric, "tensor")) g_const_metric = ct_keep(ct_scalar_tensor(0.5, NULL));
    else if (strcmp(o->metric, "float")) usage();
    if (o->threads > 0) ct_set_num_threads(o->threads);

    double loader_cpu_us;
    double loader_us = loader_alone(o->batches, bs, &loader_cpu_us);

    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(bs));
    const ct_trial trial = {
        .name = "empty", .init = empty_init,
        .build_training_data_loader = empty_train_loader, .build_validation_data_loader = empty_val_loader,
        .train_batch = empty_train_batch, .evaluate_batch = empty_evaluate, .build_callbacks = add_timer,
    };
    if (warmup > 0) fit(&trial, o, warmup, report, hp, false);
    double t0 = now_s();
    Timer t = fit(&trial, o, o->batches, report, hp, true);
    double whole = now_s() - t0;
    if (t.batches != o->batches) {
        fprintf(stderr, "bench_loop: trained %lld batches, not %lld\n", (long long)t.batches, (long long)o->batches);
        return 1;
    }
    double fit_us = 1e6 * (t.t1 - t.t0) / (double)o->batches;
    double fit_cpu_us = 1e6 * (t.c1 - t.c0) / (double)o->batches;
    printf("{\"mode\": \"overhead\", \"loader\": \"%s\", \"metric\": \"%s\", \"batch_size\": %lld, "
           "\"report\": %lld, \"batches\": %lld, \"loader_us\": %.4f, \"fit_us\": %.4f, "
           "\"loader_cpu_us\": %.4f, \"fit_cpu_us\": %.4f, \"fit_total_s\": %.4f}\n",
           o->loader, o->metric, (long long)bs, (long long)report, (long long)o->batches, loader_us, fit_us,
           loader_cpu_us, fit_cpu_us, whole);
    ct_value_free(hp);
    ct_tensor_free(g_const_metric);
    return 0;
}

/* ---- digits: the MLP through ct_fit ---------------------------------------- */

typedef struct {
    ct_module *model;
    ct_optim *opt;
} Digits;

static void *digits_init(ct_context *ctx) {
    Digits *d = calloc(1, sizeof *d);
    /* flatten [B, 1, 8, 8] -> [B, 64]; Linear 64->128, ReLU, Linear 128->10 */
    ct_module *layers[] = {ct_nn_flatten(1, -1), ct_nn_linear(64, 128, true), ct_nn_relu(),
                           ct_nn_linear(128, 10, true)};
    d->model = ct_ctx_wrap_model(ctx, ct_nn_sequential(4, layers));
    ct_adam_opts a = ct_adam_defaults();
    a.lr = 1e-3;
    d->opt = d->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(d->model, &a)) : NULL;
    if (!d->opt) {
        free(d);
        return NULL;
    }
    return d;
}

static ct_loader *digits_loader(const char *split, ct_context *ctx, bool train) {
    char images[1024], labels[1024];
    snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", g_opts->data, split);
    snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", g_opts->data, split);
    ct_dataset *ds = ct_dataset_mnist(images, labels);
    if (!ds) return NULL;
    ct_loader_opts lo = ct_loader_defaults();
    if (train) {
        lo.batch_size = ct_ctx_per_slot_batch_size(ctx);
        lo.shuffle = true;
        lo.seed = ct_ctx_trial_seed(ctx);
    } else {
        lo.batch_size = ct_dataset_len(ds); /* the whole split in one batch */
    }
    return ct_loader_new(ds, &lo);
}

static ct_loader *digits_train_loader(void *self, ct_context *ctx) { return digits_loader("train", ctx, true); }

/* "Validation" is the loss over the whole training split: the number the
 * hand-written loop computes at its end too. */
static ct_loader *digits_val_loader(void *self, ct_context *ctx) { return digits_loader("train", ctx, false); }

static ct_value *digits_train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                                    int64_t batch_idx) {
    Digits *d = self;
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(d->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, d->opt, NULL, NULL)) return NULL;
    return ct_value_tensor(loss);
}

static ct_value *digits_evaluate(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Digits *d = self;
    ct_value *m = ct_value_dict();
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(d->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(loss));
    return m;
}

static int run_digits(const Opts *o) {
    int64_t bs = o->batch_size > 0 ? o->batch_size : 32;
    int64_t report = o->report > 0 ? o->report : 100; /* ct_fit's default */
    int64_t warmup = o->warmup >= 0 ? o->warmup : 200;
    if (o->threads > 0) ct_set_num_threads(o->threads);
    ct_value *hp = ct_value_dict();
    ct_value_dict_set(hp, "global_batch_size", ct_value_int(bs));
    const ct_trial trial = {
        .name = "digits", .init = digits_init, .destroy = free,
        .build_training_data_loader = digits_train_loader, .build_validation_data_loader = digits_val_loader,
        .train_batch = digits_train_batch, .evaluate_batch = digits_evaluate, .build_callbacks = add_timer,
    };
    if (warmup > 0) fit(&trial, o, warmup, report, hp, false);
    Timer t = fit(&trial, o, o->steps, report, hp, true);
    double dt = t.t1 - t.t0, cpu = t.c1 - t.c0;
    printf("{\"mode\": \"digits\", \"impl\": \"ctrial\", \"torch\": \"%s\", \"threads\": %d, \"steps\": %lld, "
           "\"seconds\": %.6f, \"cpu_seconds\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f, \"minflt\": %ld, "
           "\"steps_per_s\": %.3f, \"final_loss\": %.6f, \"last_train_loss\": %.6f}\n",
           ct_torch_version(), ct_get_num_threads(), (long long)o->steps, dt, cpu, t.u1.user - t.u0.user,
           t.u1.sys - t.u0.sys, t.u1.minflt - t.u0.minflt, (double)o->steps / dt, t.val_loss, t.last_train_loss);
    ct_value_free(hp);
    return 0;
}

int main(int argc, char **argv) {
    Opts o = parse(argc, argv);
    g_opts = &o;
    if (!strcmp(o.mode, "overhead")) return run_overhead(&o);
    if (!strcmp(o.mode, "digits")) return run_digits(&o);
    usage();
}
