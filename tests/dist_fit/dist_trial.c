/* tests/dist_fit/dist_trial.c — the trial test_dist_fit.py runs under mpirun
 * (and without it), through ct_main, so flags, ranks and exit codes are the
 * real ones.
 *
 *   model "onevar"  Determined's OneVar: 64 records (x=1, y=1), bias-free
 *                   Linear(1,1) from w=0, SGD(lr 0.001), MSE
 *   model "mlp"     Linear(8, hidden) -> ReLU -> Linear(hidden, 3), Adam(lr),
 *                   StepLR(5, 0.7) every batch, cross entropy; 180 fixed
 *                   training records (shuffled), `val_n` validation records
 *
 * Both models carry a persistent buffer "marker" (4 floats). With skew (the
 * default) rank r adds r/100 to every parameter and buffer in init, so the
 * ranks start different unless ct_fit broadcasts rank 0's state.
 *
 * Every record has an id (its index in its dataset). train_batch and
 * evaluate_batch feed the batch's ids to a function reducer "ids"; the
 * function appends each call's values (and the phase: training or
 * validation) to $DIST_FIT_OUT/reducer_rank<r>.jsonl. Per rank r the trial also
 * writes (into $DIST_FIT_OUT, default "."):
 *   rank<r>_start.json  at on_training_start: rank, size, pid, the state
 *                       after init ("init") and now ("start"), initial batch
 *   rank<r>_end.json    at on_trial_shutdown: the state ("end"), batches
 *   full_eval_rank<r>.json  evaluate_full_dataset's call (--full-eval)
 *   exit_rank<r>        ct_main's exit code, when the process got that far
 *   stop_signal_rank<r> ct_fit_stop_signal() after ct_main returned
 *
 * Hyperparameters: model ("mlp"), hidden (16), lr (0.01; onevar 0.001),
 * skew (true), val_n (60, at most 76), stop_at (-1: ct_ctx_request_stop
 * after that batch index), sleep_ms (0 per training batch), crash_rank (-1),
 * crash_at (-1), crash_how ("abort" | "exit": _exit(3) | "error": train_batch
 * fails), stuck_rank (-1), stuck_at (-1), stuck_s (60: seconds that rank sleeps
 * in that batch), stuck_where ("backward": before its backward, so the others
 * wait in the gradient all-reduce | "step": after its optimizer step, so they
 * wait in the agreement after the batch | "shutdown": in on_trial_shutdown,
 * after the fit's last collective, so in a search the others wait in the
 * search's own exchange; stuck_at is then ignored), sigterm_init_rank (-1: that rank
 * raises SIGTERM in init, a signal during the set-up).
 *
 * Environment: DIST_FIT_SIGNAL_AFTER_MAIN=1 raises SIGTERM in main right after
 * ct_main returned (a repeated signal while the program exits).
 *
 *   dist_trial [--full-eval] FLAGS...   (--full-eval: evaluate_full_dataset
 *                                        instead of evaluate_batch) */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ctrial/ctrial.h>

enum { N_TRAIN = 180, N_VAL_MAX = 76, F = 8 };

typedef struct {
    ct_context *ctx;
    ct_module *model;
    ct_optim *opt;
    ct_reducer *ids;
    bool onevar;
    int rank;
    int64_t stop_at, sleep_ms, crash_rank, crash_at, val_n, stuck_rank, stuck_at, stuck_s;
    const char *crash_how, *stuck_where;
    const char *phase; /* "training" or "validation": what the reducer reduces */
    ct_tensor *x, *y; /* all records (owned) */
    char *init_state; /* JSON of the state after init (before any broadcast) */
} Trial;

static const char *out_dir(void) {
    const char *d = getenv("DIST_FIT_OUT");
    return d && d[0] ? d : ".";
}

/* $DIST_FIT_OUT/<name with the rank for %d>. */
static FILE *open_out(const char *name_fmt, int rank, const char *mode) {
    char name[256], path[4096];
    snprintf(name, sizeof name, name_fmt, rank);
    snprintf(path, sizeof path, "%s/%s", out_dir(), name);
    return fopen(path, mode);
}

/* ---- the state as JSON ------------------------------------------------------- */

/* {"name": [floats...], ...} of every state-dict entry (all float32). */
static char *state_json(ct_module *m) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fputc('{', f);
    size_t n = ct_nn_state_size(m);
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        ct_tensor *t = ct_nn_state_at(m, i, &name);
        int64_t k = ct_numel(t);
        float *v = malloc((size_t)(k ? k : 1) * sizeof *v);
        if (!v || ct_read(t, v, (size_t)k * sizeof *v) != 0) k = 0;
        fprintf(f, "%s\"%s\": [", i ? ", " : "", name);
        for (int64_t j = 0; j < k; j++) fprintf(f, "%s%.9g", j ? ", " : "", (double)v[j]);
        fputc(']', f);
        free(v);
    }
    fputc('}', f);
    fclose(f);
    return buf;
}

/* ---- records ------------------------------------------------------------------ */

/* Values that depend on no generator: y is the argmax of three fixed
 * projections of x. Records 0..179 train, 180.. validate. */
static void make_records(Trial *t) {
    enum { N = N_TRAIN + N_VAL_MAX };
    static float x[N * F];
    static int64_t y[N];
    uint32_t s = 12345;
    for (int i = 0; i < N * F; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < N; i++) {
        float a = x[i * F] + x[i * F + 1], b = x[i * F + 2] - x[i * F + 3], c = x[i * F + 4] * x[i * F + 5];
        y[i] = a > b ? (a > c ? 0 : 2) : (b > c ? 1 : 2);
    }
    t->x = ct_keep(ct_from_data(x, CT_SHAPE(N, F), CT_F32));
    t->y = ct_keep(ct_from_data(y, CT_SHAPE(N), CT_I64));
}

/* ---- the reducer and the callback --------------------------------------------- */

/* Appends this call's values (lists of record ids) as one JSON line; reports
 * how many ids it saw. */
static ct_value *ids_reduce(ct_value *const *values, size_t n, void *ctx) {
    Trial *t = ctx;
    FILE *f = open_out("reducer_rank%d.jsonl", t->rank, "a");
    if (!f) {
        ct_set_error(CT_EIO, "reducer: cannot write its file");
        return NULL;
    }
    int64_t total = 0;
    fprintf(f, "{\"rank\": %d, \"phase\": \"%s\", \"batches\": %lld, \"values\": [", t->rank,
            t->phase ? t->phase : "none", (long long)ct_ctx_current_batch(t->ctx));
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s[", i ? ", " : "");
        for (size_t j = 0; j < ct_value_len(values[i]); j++) {
            int64_t id = -1;
            ct_value_get_int(ct_value_list_get(values[i], j), &id);
            fprintf(f, "%s%lld", j ? ", " : "", (long long)id);
            total++;
        }
        fputc(']', f);
    }
    fprintf(f, "]}\n");
    fclose(f);
    return ct_value_int(total);
}

/* Written under a temporary name and renamed: the driver polls for the
 * file and must never read it half written. */
static int on_training_start(void *self, ct_context *ctx) {
    Trial *t = self;
    char *now = state_json(t->model);
    FILE *f = open_out("rank%d_start.json.tmp", t->rank, "w");
    if (!f || !now) {
        free(now);
        if (f) fclose(f);
        return ct_set_error(CT_EIO, "cannot write rank%d_start.json", t->rank);
    }
    fprintf(f, "{\"rank\": %d, \"size\": %d, \"pid\": %ld, \"initial_batch\": %lld,\n \"init\": %s,\n \"start\": %s}\n",
            ct_ctx_rank(ctx), ct_ctx_size(ctx), (long)getpid(), (long long)ct_ctx_initial_batch(ctx),
            t->init_state ? t->init_state : "null", now);
    fclose(f);
    free(now);
    char from[4300], to[4300];
    snprintf(from, sizeof from, "%s/rank%d_start.json.tmp", out_dir(), t->rank);
    snprintf(to, sizeof to, "%s/rank%d_start.json", out_dir(), t->rank);
    return rename(from, to) == 0 ? 0 : ct_set_error(CT_EIO, "cannot rename %s", from);
}

static int on_trial_shutdown(void *self, ct_context *ctx) {
    Trial *t = self;
    if (t->rank == t->stuck_rank && strcmp(t->stuck_where, "shutdown") == 0) {
        struct timespec left = {t->stuck_s, 0};
        while (nanosleep(&left, &left) != 0) continue;
    }
    char *now = state_json(t->model);
    FILE *f = open_out("rank%d_end.json", t->rank, "w");
    if (f && now)
        fprintf(f, "{\"rank\": %d, \"batches\": %lld, \"end\": %s}\n", t->rank,
                (long long)ct_ctx_current_batch(ctx), now);
    if (f) fclose(f);
    free(now);
    return 0;
}

static int build_callbacks(void *self, ct_context *ctx) {
    ct_callback cb = {.name = "ranks", .self = self, .on_training_start = on_training_start,
                      .on_trial_shutdown = on_trial_shutdown};
    return ct_ctx_add_callback(ctx, &cb);
}

/* ---- the trial ------------------------------------------------------------------ */

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t->init_state);
    free(t);
}

static ct_module *build_model(Trial *t, ct_context *ctx) {
    ct_module *m;
    if (t->onevar) {
        m = ct_nn_linear(1, 1, false);
        ct_guard *g = ct_no_grad();
        if (m && ct_fill_(ct_nn_get(m, "weight"), 0.0) != 0) {
            ct_nn_free(m);
            m = NULL;
        }
        ct_guard_end(g);
    } else {
        int64_t hidden = ct_ctx_hparam_int(ctx, "hidden", 16);
        m = ct_nn_sequential(3, (ct_module *[]){ct_nn_linear(F, hidden, true), ct_nn_relu(),
                                                 ct_nn_linear(hidden, 3, true)});
    }
    if (m && !ct_nn_add_buffer(m, "marker", ct_keep(ct_arange(0, 4, 1, NULL)), true)) {
        ct_nn_free(m);
        return NULL;
    }
    /* Rank r starts off by r/100 everywhere: only a broadcast evens it out. */
    if (m && ct_ctx_hparam_bool(ctx, "skew", true) && t->rank > 0) {
        ct_guard *g = ct_no_grad();
        for (size_t i = 0; i < ct_nn_state_size(m); i++) ct_add_scalar_(ct_nn_state_at(m, i, NULL), t->rank / 100.0);
        ct_guard_end(g);
    }
    return m;
}

static void *trial_init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = ctx;
    t->rank = ct_ctx_rank(ctx);
    ct_clear_error();
    t->onevar = strcmp(ct_ctx_hparam_str(ctx, "model", "mlp"), "onevar") == 0;
    double lr = ct_ctx_hparam_double(ctx, "lr", t->onevar ? 0.001 : 0.01);
    t->stop_at = ct_ctx_hparam_int(ctx, "stop_at", -1);
    t->sleep_ms = ct_ctx_hparam_int(ctx, "sleep_ms", 0);
    t->crash_rank = ct_ctx_hparam_int(ctx, "crash_rank", -1);
    t->crash_at = ct_ctx_hparam_int(ctx, "crash_at", -1);
    t->crash_how = ct_ctx_hparam_str(ctx, "crash_how", "abort");
    t->val_n = ct_ctx_hparam_int(ctx, "val_n", 60);
    t->stuck_rank = ct_ctx_hparam_int(ctx, "stuck_rank", -1);
    t->stuck_at = ct_ctx_hparam_int(ctx, "stuck_at", -1);
    t->stuck_s = ct_ctx_hparam_int(ctx, "stuck_s", 60);
    t->stuck_where = ct_ctx_hparam_str(ctx, "stuck_where", "backward");
    if (ct_ctx_hparam_int(ctx, "sigterm_init_rank", -1) == t->rank) raise(SIGTERM);
    if (ct_last_code() != CT_OK) goto fail;
    if (t->val_n < 1 || t->val_n > N_VAL_MAX) {
        ct_set_error(CT_ECONFIG, "val_n must be 1..%d", N_VAL_MAX);
        goto fail;
    }
    if (!t->onevar) make_records(t);

    ct_module *model = build_model(t, ctx);
    if (model) t->init_state = state_json(model);
    t->model = ct_ctx_wrap_model(ctx, model);
    if (!t->model) goto fail;
    if (t->onevar) {
        ct_sgd_opts sgd = ct_sgd_defaults();
        sgd.lr = lr;
        t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &sgd));
    } else {
        ct_adam_opts adam = ct_adam_defaults();
        adam.lr = lr;
        t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &adam));
        if (t->opt && !ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 5, 0.7), CT_STEP_EVERY_BATCH, 1))
            goto fail;
    }
    if (!t->opt) goto fail;
    t->ids = ct_ctx_wrap_reducer(ctx, "ids", ids_reduce, t);
    if (!t->ids) goto fail;
    return t;
fail:
    trial_destroy(t);
    return NULL;
}

/* The batch's record ids as a list of ints. */
static ct_value *id_list(const ct_value *batch) {
    ct_tensor *ids = ct_batch_at(batch, 2);
    int64_t n = ct_numel(ids);
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ct_value *l = ct_value_list();
    if (v && l && ct_read(ids, v, (size_t)n * sizeof *v) == 0)
        for (int64_t i = 0; i < n; i++) ct_value_list_append(l, ct_value_int(v[i]));
    free(v);
    return l;
}

static ct_tensor *loss_of(Trial *t, const ct_value *batch, ct_reduction how) {
    ct_tensor *out = ct_nn_forward(t->model, ct_batch_at(batch, 0));
    if (t->onevar) return ct_mse_loss(out, ct_batch_at(batch, 1), how);
    ct_cross_entropy_opts o = ct_cross_entropy_defaults();
    o.reduction = how;
    return ct_cross_entropy_ex(out, ct_batch_at(batch, 1), &o);
}

/* A rank stuck in the trial's code (stuck_rank, stuck_at, stuck_s) where
 * stuck_where says. */
static void maybe_stuck(const Trial *t, int64_t batch_idx, const char *where) {
    if (t->rank != t->stuck_rank || batch_idx != t->stuck_at || strcmp(t->stuck_where, where) != 0) return;
    struct timespec left = {t->stuck_s, 0};
    while (nanosleep(&left, &left) != 0) { /* a signal: sleep on */
    }
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    maybe_stuck(t, batch_idx, "backward");
    if (t->rank == t->crash_rank && batch_idx == t->crash_at) {
        /* No message of its own: the job's output must name the rank by itself. */
        if (strcmp(t->crash_how, "exit") == 0) _exit(3);
        if (strcmp(t->crash_how, "error") == 0) {
            ct_set_error(CT_ETRIAL, "dist_trial: a failure requested in batch %lld", (long long)batch_idx);
            return NULL;
        }
        abort();
    }
    t->phase = "training";
    if (ct_reducer_update(t->ids, id_list(batch)) != 0) return NULL;
    if (t->sleep_ms > 0) nanosleep(&(struct timespec){t->sleep_ms / 1000, (t->sleep_ms % 1000) * 1000000}, NULL);
    ct_tensor *loss = loss_of(t, batch, CT_REDUCE_MEAN);
    if (!loss || ct_ctx_backward(ctx, loss) != 0 || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0)
        return NULL;
    if (batch_idx == t->stop_at) ct_ctx_request_stop(ctx);
    maybe_stuck(t, batch_idx, "step");
    return ct_value_tensor(ct_keep(ct_alias(loss)));
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Trial *t = self;
    t->phase = "validation";
    if (ct_reducer_update(t->ids, id_list(batch)) != 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(loss_of(t, batch, CT_REDUCE_MEAN))));
    ct_value_dict_set(m, "val_loss_sum", ct_value_tensor(ct_keep(loss_of(t, batch, CT_REDUCE_SUM))));
    ct_value_dict_set(m, "val_records", ct_value_int(ct_batch_length(batch)));
    if (t->onevar) {
        double w = 0;
        ct_item(ct_nn_get(t->model, "weight"), &w);
        ct_value_dict_set(m, "weight", ct_value_float(w));
    }
    return m;
}

static ct_value *evaluation_reducer(void *self, ct_context *ctx) {
    Trial *t = self;
    ct_value *r = ct_value_dict();
    ct_value_dict_set(r, "validation_loss", ct_value_int(CT_REDUCER_AVG));
    ct_value_dict_set(r, "val_loss_sum", ct_value_int(CT_REDUCER_SUM));
    ct_value_dict_set(r, "val_records", ct_value_int(CT_REDUCER_SUM));
    if (t->onevar) ct_value_dict_set(r, "weight", ct_value_int(CT_REDUCER_MAX));
    return r;
}

/* The whole validation set on rank 0 (Determined: evaluate_full_dataset runs
 * only on the chief, with an unsharded loader). */
static ct_value *evaluate_full_dataset(void *self, ct_context *ctx, ct_loader *loader) {
    Trial *t = self;
    double sum = 0;
    int64_t records = 0, batches = 0;
    FILE *f = open_out("full_eval_rank%d.json", t->rank, "w");
    if (f) fprintf(f, "{\"rank\": %d, \"ids\": [", t->rank);
    ct_value *batch = NULL;
    int rc;
    while ((rc = ct_loader_next(loader, &batch)) == 1) {
        ct_scope *s = ct_scope_begin();
        double l = 0;
        rc = ct_item(loss_of(t, batch, CT_REDUCE_SUM), &l);
        ct_value *ids = id_list(batch);
        for (size_t i = 0; f && i < ct_value_len(ids); i++) {
            int64_t id = -1;
            ct_value_get_int(ct_value_list_get(ids, i), &id);
            fprintf(f, "%s%lld", records + (int64_t)i ? ", " : "", (long long)id);
        }
        records += ct_batch_length(batch);
        batches++;
        sum += l;
        ct_value_free(ids);
        ct_value_free(batch);
        ct_scope_end(s);
        if (rc != 0) break;
    }
    if (f) {
        fprintf(f, "], \"batches\": %lld, \"size\": %d}\n", (long long)batches, ct_ctx_size(ctx));
        fclose(f);
    }
    if (rc < 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(sum / (double)(records ? records : 1)));
    ct_value_dict_set(m, "val_records", ct_value_int(records));
    return m;
}

static ct_loader *loader(Trial *t, ct_context *ctx, bool training) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = training && !t->onevar;
    o.seed = ct_ctx_trial_seed(ctx);
    int64_t n = t->onevar ? 64 : training ? N_TRAIN : t->val_n;
    ct_tensor *ids = ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64});
    ct_tensor *x, *y;
    if (t->onevar) {
        x = ct_ones(CT_SHAPE(n, 1), NULL);
        y = ct_ones(CT_SHAPE(n, 1), NULL);
    } else {
        x = ct_narrow(t->x, 0, training ? 0 : N_TRAIN, n);
        y = ct_narrow(t->y, 0, training ? 0 : N_TRAIN, n);
    }
    ct_dataset *ds = ct_dataset_tensors(3, (ct_tensor *[]){x, y, ids});
    ct_tensor_free(x); /* the dataset keeps its own references */
    ct_tensor_free(y);
    ct_tensor_free(ids);
    return ds ? ct_loader_new(ds, &o) : NULL;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(self, ctx, true); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return loader(self, ctx, false); }

static const ct_trial batch_trial = {
    .name = "dist_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .evaluation_reducer = evaluation_reducer,
    .build_callbacks = build_callbacks,
};

static const ct_trial full_trial = {
    .name = "dist_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_full_dataset = evaluate_full_dataset,
    .build_callbacks = build_callbacks,
};

/* Each rank's own exit code into exit_rank<r> (mpirun reports only one):
 * the SIGTERM test needs to know that every rank exited cleanly. */
int main(int argc, char **argv) {
    bool full = argc > 1 && strcmp(argv[1], "--full-eval") == 0;
    if (full) argv[1] = argv[0];
    int rc = full ? ct_main(argc - 1, argv + 1, &full_trial) : ct_main(argc, argv, &batch_trial);
    const char *again = getenv("DIST_FIT_SIGNAL_AFTER_MAIN");
    if (again && strcmp(again, "1") == 0) raise(SIGTERM);
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    FILE *f = open_out("exit_rank%d", r ? atoi(r) : 0, "w");
    if (f) {
        fprintf(f, "%d\n", rc);
        fclose(f);
    }
    f = open_out("stop_signal_rank%d", r ? atoi(r) : 0, "w");
    if (f) {
        fprintf(f, "%d\n", ct_fit_stop_signal());
        fclose(f);
    }
    return rc;
}
