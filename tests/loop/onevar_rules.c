/* tests/loop/onevar_rules.c — the loop's rules (docs/design.md,
 * "Determined's rules") on Determined's OneVar fixture: 64 records (x=1,
 * y=1), a bias-free Linear(1,1) starting at w=0, SGD lr 0.001, MSE. Each
 * batch moves w <- w + 0.002 (1 - w) and reports
 * loss = (1 - w)^2 from before the step, so after k steps 1 - w = 0.998^k.
 *
 * A recorder callback writes every event as a word ("T4" training report
 * after 4 batches, "V4" validation, "C5:period" checkpoint decision and its
 * reason, "E0"/"e0" epoch start/end, ...); each scenario compares the whole
 * sequence with the one the rules give, and the numbers with 0.998 powers. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/callback.h>
#include <ctrial/trial.h>

#include "ct_test.h"
#include "onevar.h"

/* ---- the OneVar trial -------------------------------------------------- */

typedef struct {
    ct_module *lin;
    ct_optim *opt;
    int stop_after;      /* request a stop after this many batches (0: never) */
    int sigterm_after;   /* raise SIGTERM after this many batches (0: never) */
    int64_t expect_idx;  /* the batch_idx train_batch should see next */
    int eval_calls;
    bool extra_metrics;  /* evaluate_batch also reports mx, mn, arr */
    ct_clip_fn clip;
} OneVar;

static double g_clip_norm;
static double g_final_lr; /* the optimizer's lr when the trial is destroyed */
static int g_bad_indices; /* batch_idx / epoch_idx that were not the rules' */

static int clip_tiny(ct_tensor *const *params, size_t n, void *ctx) {
    return ct_clip_grad_norm(n, params, g_clip_norm, 2.0, NULL);
}

static void *onevar_init(ct_context *ctx) {
    OneVar *t = calloc(1, sizeof *t);
    t->lin = ct_ctx_wrap_model(ctx, onevar_model());
    t->opt = ct_ctx_wrap_optimizer(ctx, onevar_sgd(t->lin));
    t->expect_idx = ct_ctx_initial_batch(ctx); /* a resumed run starts where it stopped */
    t->stop_after = (int)ct_ctx_hparam_int(ctx, "stop_after", 0);
    t->sigterm_after = (int)ct_ctx_hparam_int(ctx, "sigterm_after", 0);
    t->extra_metrics = ct_ctx_hparam_bool(ctx, "extra_metrics", false);
    if (ct_ctx_hparam_bool(ctx, "clip", false)) t->clip = clip_tiny;
    /* StepLR(step_size=1, gamma=0.5) under a step mode from the hparams. */
    int64_t mode = ct_ctx_hparam_int(ctx, "sched_mode", -1);
    if (mode >= 0 && !ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 1, 0.5), (ct_step_mode)mode,
                                               (int)ct_ctx_hparam_int(ctx, "sched_freq", 1)))
        return NULL;
    return t;
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return onevar_loader(ctx, 64); }

static ct_tensor *mse(OneVar *t, const ct_value *batch) { return onevar_mse(t->lin, batch); }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    OneVar *t = self;
    int64_t epoch_len = 64 / ct_ctx_per_slot_batch_size(ctx);
    if (batch_idx != t->expect_idx || epoch_idx != batch_idx / epoch_len || ct_ctx_current_batch(ctx) != batch_idx)
        g_bad_indices++;
    t->expect_idx = batch_idx + 1;
    ct_tensor *loss = mse(t, batch);
    if (ct_ctx_backward(ctx, loss) || ct_ctx_step_optimizer(ctx, t->opt, t->clip, NULL)) return NULL;
    if (t->stop_after && batch_idx + 1 == t->stop_after) ct_ctx_request_stop(ctx);
    if (t->sigterm_after && batch_idx + 1 == t->sigterm_after) raise(SIGTERM);
    return ct_value_tensor(loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    OneVar *t = self;
    t->eval_calls++;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(mse(t, batch)));
    if (t->extra_metrics) {
        ct_value_dict_set(m, "mx", ct_value_int(batch_idx));
        ct_value_dict_set(m, "mn", ct_value_float((double)batch_idx));
        ct_value_dict_set(m, "arr", ct_value_tensor(ct_mul_scalar(ct_arange(1, 3, 1, NULL), (double)batch_idx)));
    }
    return m;
}

static ct_value *reducers(void *self, ct_context *ctx) {
    ct_value *spec = ct_value_dict();
    ct_value_dict_set(spec, "validation_loss", ct_value_int(CT_REDUCER_SUM));
    ct_value_dict_set(spec, "mx", ct_value_int(CT_REDUCER_MAX));
    ct_value_dict_set(spec, "mn", ct_value_int(CT_REDUCER_MIN));
    ct_value_dict_set(spec, "arr", ct_value_int(CT_REDUCER_AVG));
    return spec;
}

/* ---- the recorder ------------------------------------------------------ */

/* Every recorder writes to one log, so the order across callbacks shows. */
static char g_log[8192];

typedef struct {
    char tag[8];          /* prefix for order tests ("a:"), or "" */
    bool epochs;          /* log epoch starts/ends too */
    bool lifecycle;       /* log startup/training start/shutdown */
    double losses[64];    /* training reports' loss, by report */
    int64_t loss_at[64];
    int n_losses;
    double val_losses[64];
    int n_val;
    ct_value *last_val;   /* copy of the last validation metrics */
} Recorder;

static void say(Recorder *r, const char *fmt, long long v, const char *extra) {
    size_t at = strlen(g_log);
    snprintf(g_log + at, sizeof g_log - at, "%s%s", at ? " " : "", r->tag);
    at = strlen(g_log);
    snprintf(g_log + at, sizeof g_log - at, fmt, v, extra);
}

static int g_leaks; /* training reports carrying validation-only reducers */

static int on_workload(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    Recorder *r = self;
    if (ct_value_dict_get(avg, "count") || ct_value_dict_get(avg, "u1")) g_leaks++;
    int64_t bt = 0;
    ct_value_get_int(ct_value_dict_get(avg, "batches"), &bt);
    say(r, "T%lld%s", (long long)bt, "");
    if (r->n_losses < 64) {
        ct_value_get_float(ct_value_dict_get(avg, "loss"), &r->losses[r->n_losses]);
        r->loss_at[r->n_losses++] = bt;
    }
    return 0;
}

static int on_val_end(void *self, ct_context *ctx, const ct_value *metrics) {
    Recorder *r = self;
    int64_t bt = -1;
    ct_value_get_int(ct_value_dict_get(metrics, "batches"), &bt);
    say(r, "V%lld%s", (long long)bt, "");
    if (r->n_val < 64) ct_value_get_float(ct_value_dict_get(metrics, "validation_loss"), &r->val_losses[r->n_val++]);
    ct_value_free(r->last_val);
    r->last_val = ct_value_copy(metrics, true);
    return 0;
}

/* Checkpoints are recorded from what was written: metadata.json's step
 * and trial_state.reason of the committed directory. */
static int on_ckpt(void *self, ct_context *ctx, const char *dir) {
    Recorder *r = self;
    ct_value *meta = ct_ckpt_metadata(dir);
    int64_t bt = -1;
    ct_value_get_int(ct_value_dict_get(meta, "steps_completed"), &bt);
    const char *why = ct_value_get_str(ct_value_dict_get(ct_value_dict_get(meta, "trial_state"), "reason"));
    say(r, "C%lld:%s", (long long)bt, why ? why : "?");
    ct_value_free(meta);
    return 0;
}

static int on_epoch_start(void *self, ct_context *ctx, int64_t e) {
    Recorder *r = self;
    if (r->epochs) say(r, "E%lld%s", (long long)e, "");
    return 0;
}

static int on_epoch_end(void *self, ct_context *ctx, int64_t e) {
    Recorder *r = self;
    if (r->epochs) say(r, "e%lld%s", (long long)e, "");
    return 0;
}

static int on_startup(void *self, ct_context *ctx, int64_t first, const char *ckpt) {
    Recorder *r = self;
    if (r->lifecycle) say(r, "U%lld%s", (long long)first, "");
    return 0;
}

static int on_shutdown(void *self, ct_context *ctx) {
    Recorder *r = self;
    if (r->lifecycle) say(r, "S%.0lld%s", 0, "");
    return 0;
}

static Recorder g_rec[2];
static int g_n_rec = 1;

static ct_value *count_fn(ct_value *const *values, size_t n, void *ctx) { return ct_value_int((int64_t)n); }

static ct_value *sum_fn(ct_value *const *values, size_t n, void *ctx) {
    double s = 0, d;
    for (size_t i = 0; i < n; i++)
        if (ct_value_get_float(values[i], &d) == 0) s += d;
    ct_value *out = ct_value_dict();
    ct_value_dict_set(out, "u1", ct_value_float(s));
    return out;
}

static ct_reducer *g_count, *g_sum;

static ct_value *evaluate_with_reducers(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_reducer_update(g_count, ct_value_int(batch_idx));
    ct_reducer_update(g_sum, ct_value_float((double)batch_idx));
    return evaluate_batch(self, ctx, batch, batch_idx);
}

static int build_callbacks(void *self, ct_context *ctx) {
    for (int i = 0; i < g_n_rec; i++) {
        ct_callback cb = {
            .name = i ? "b" : "a", .self = &g_rec[i],
            .on_training_workload_end = on_workload, .on_validation_end = on_val_end,
            .on_checkpoint_write_end = on_ckpt, .on_training_epoch_start = on_epoch_start,
            .on_training_epoch_end = on_epoch_end, .on_trial_startup = on_startup,
            .on_trial_shutdown = on_shutdown,
        };
        if (ct_ctx_add_callback(ctx, &cb)) return -1;
    }
    if (ct_ctx_hparam_bool(ctx, "custom_reducers", false)) {
        g_count = ct_ctx_wrap_reducer(ctx, "count", count_fn, NULL);
        g_sum = ct_ctx_wrap_reducer(ctx, NULL, sum_fn, NULL);
        if (!g_count || !g_sum) return -1;
        if (ct_ctx_wrap_reducer(ctx, "again", count_fn, NULL) != NULL) return -1; /* twice: refused */
        ct_clear_error();
    }
    return 0;
}

/* ---- simple mode and evaluate_full_dataset ------------------------------ */

static ct_module *simple_model(void *self, ct_context *ctx) {
    ct_module *lin = ct_nn_linear(1, 1, false);
    ct_guard *g = ct_no_grad();
    ct_zero_(ct_nn_get(lin, "weight"));
    ct_guard_end(g);
    ((OneVar *)self)->lin = lin;
    return lin;
}

static ct_optim *simple_optimizer(void *self, ct_context *ctx, ct_module *model) {
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.001;
    return ((OneVar *)self)->opt = ct_optim_sgd(model, &o);
}

static void *simple_init(ct_context *ctx) { return calloc(1, sizeof(OneVar)); }

/* Simple mode: train_batch only computes the loss. */
static ct_value *simple_train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                                    int64_t batch_idx) {
    return ct_value_tensor(mse(self, batch));
}

/* The whole validation set at once, as Determined's evaluate_full_dataset. */
static ct_value *evaluate_full(void *self, ct_context *ctx, ct_loader *loader) {
    ct_value *batch;
    double sum = 0;
    int n = 0, got;
    ct_loader_reset(loader);
    while ((got = ct_loader_next(loader, &batch)) == 1) {
        double l = 0;
        ct_item(mse(self, batch), &l);
        sum += l;
        n++;
        ct_value_free(batch);
    }
    if (got < 0) return NULL;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(sum / n));
    ct_value_dict_set(m, "num_batches", ct_value_int(n));
    return m;
}

/* Reads hyperparameters the trial's way; the wrong type is an error. */
static void *hparam_init(ct_context *ctx) {
    int64_t missing;
    if (ct_ctx_hparam_int_req(ctx, "layers", &missing) == 0) return NULL;
    if (!strstr(ct_last_error(), "'layers' is required")) return NULL;
    ct_clear_error();
    if (ct_ctx_hparam_double(ctx, "lr", 0.5) != 0.5) return NULL;  /* absent: the default */
    if (ct_ctx_hparam_int(ctx, "global_batch_size", 0) != 16) return NULL;
    double d;
    if (ct_ctx_hparam_double_req(ctx, "name", &d) != CT_ECONFIG) return NULL; /* a string */
    ct_set_error(CT_ECONFIG, "hparam checks passed");
    return NULL;
}

static void destroy(void *self) {
    g_final_lr = ct_optim_get_lr(((OneVar *)self)->opt, 0);
    free(self);
}

static ct_trial onevar_trial(void) {
    ct_trial t = {
        .name = "onevar", .init = onevar_init, .destroy = destroy,
        .build_training_data_loader = train_loader, .build_validation_data_loader = val_loader,
        .train_batch = train_batch, .evaluate_batch = evaluate_batch, .build_callbacks = build_callbacks,
    };
    return t;
}

/* ---- running scenarios ------------------------------------------------- */

static ct_value *hp(int64_t gbs) {
    ct_value *h = ct_value_dict();
    ct_value_dict_set(h, "global_batch_size", ct_value_int(gbs));
    return h;
}

static ct_fit_opts base_opts(const ct_value *hparams) {
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = hparams;
    o.quiet = true;
    o.output_dir = "onevar_rules_output";
    o.overwrite = true; /* each scenario replaces the last one's run */
    o.checkpoint_policy = CT_CKPT_NONE;
    return o;
}

static void reset_recorders(void) {
    for (int i = 0; i < 2; i++) {
        ct_value_free(g_rec[i].last_val);
        memset(&g_rec[i], 0, sizeof g_rec[i]);
    }
    g_n_rec = 1;
    g_log[0] = '\0';
}

/* Runs the scenario and checks the event sequence. */
static void expect_run(const char *name, const ct_trial *t, const ct_fit_opts *o, const char *want) {
    int rc = ct_fit(t, o);
    if (rc != 0) fprintf(stderr, "%s: ct_fit failed: %s\n", name, ct_last_error());
    CHECK(rc == 0);
    if (strcmp(g_log, want) != 0) {
        fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, g_log, want);
        CHECK(!"event sequence");
    }
}

static double pow998(int k) { return pow(0.998, k); }

/* ---- the heap during training (ct_fit_opts.tune_malloc) ---------------------- */

#ifdef __GLIBC__
#include <malloc.h>

/* This definition interposes glibc's (and a sanitizer's) for the whole
 * process, so the test sees exactly which parameters ct_fit sets. */
static int g_mallopt[3]; /* M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD values */
static int g_mallopt_calls;

__attribute__((visibility("default"))) int mallopt(int param, int value) {
    g_mallopt_calls++;
    if (param == M_MMAP_THRESHOLD) g_mallopt[0] = value;
    else if (param == M_TRIM_THRESHOLD) g_mallopt[1] = value;
    else if (param == M_TOP_PAD) g_mallopt[2] = value;
    return 1;
}

static int fit_and_count(const ct_trial *t, bool tune) {
    ct_value *h = hp(16);
    ct_fit_opts o = base_opts(h);
    o.max_length = ct_batches(2);
    o.tune_malloc = tune;
    memset(g_mallopt, 0, sizeof g_mallopt);
    g_mallopt_calls = 0;
    CHECK_OK(ct_fit(t, &o));
    ct_value_free(h);
    return g_mallopt_calls;
}
#endif

static void test_tune_malloc(const ct_trial *t) {
    CHECK(ct_fit_defaults().tune_malloc);
#ifdef __GLIBC__
    /* The environment's malloc settings are the user's: ct_fit leaves them. */
    const char *vars[] = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"};
    char *saved[4];
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    CHECK(fit_and_count(t, true) == 3);
    CHECK(g_mallopt[0] == 32 << 20 && g_mallopt[1] == 64 << 20 && g_mallopt[2] == 16 << 20);
    CHECK(fit_and_count(t, false) == 0);
    for (int i = 0; i < 4; i++) {
        setenv(vars[i], i == 3 ? "glibc.malloc.trim_threshold=1000000" : "1000000", 1);
        CHECK(fit_and_count(t, true) == 0);
        unsetenv(vars[i]);
    }
    setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=4096", 1); /* not malloc's */
    CHECK(fit_and_count(t, true) == 3);
    unsetenv("GLIBC_TUNABLES");
    for (int i = 0; i < 4; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        free(saved[i]);
    }
#endif
}

int main(void) {
    ct_trial t = onevar_trial();
    test_tune_malloc(&t);
    ct_value *h16 = hp(16), *h32 = hp(32);

    /* Batch periods; validation and checkpoint de-duplicated at the same
     * count; at max_length the checkpoint is current, the validation not. */
    reset_recorders();
    ct_fit_opts o = base_opts(h16);
    o.max_length = ct_batches(10);
    o.validation_period = ct_batches(4);
    o.checkpoint_period = ct_batches(5);
    expect_run("batch periods, policy none", &t, &o, "T4 V4 T5 C5:period T8 V8 T10 C10:period V10");
    /* Training loss: the mean over the workload's batches of 0.998^(2k). */
    CHECK(g_rec[0].n_losses == 4);
    double want = (pow998(0) + pow998(2) + pow998(4) + pow998(6)) / 4;
    CHECK_NEAR(g_rec[0].losses[0], want, 1e-6);
    CHECK_NEAR(g_rec[0].losses[1], pow998(8), 1e-6);
    CHECK_NEAR(g_rec[0].losses[3], (pow998(16) + pow998(18)) / 2, 1e-6);
    CHECK_NEAR(g_rec[0].val_losses[0], pow998(8), 1e-6);   /* (1-w)^2 after 4 steps */
    CHECK_NEAR(g_rec[0].val_losses[2], pow998(20), 1e-6);  /* after 10 */

    /* Policy best: every validation improves, so each checkpoints unless
     * the last checkpoint is at the same count. */
    reset_recorders();
    o.checkpoint_policy = CT_CKPT_BEST;
    expect_run("policy best", &t, &o, "T4 V4 C4:policy T5 C5:period T8 V8 C8:policy T10 C10:period V10");

    /* Epoch units: epoch_len = 64 / 16 = 4; policy all. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_epochs(2);
    o.validation_period = ct_epochs(1);
    o.checkpoint_policy = CT_CKPT_ALL;
    g_rec[0].epochs = true;
    expect_run("epochs, policy all", &t, &o, "E0 e0 T4 V4 C4:policy E1 e1 T8 V8 C8:policy");

    /* A schedule of explicit points; the end checkpoints whatever the policy. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(9);
    o.validation_period = ct_schedule(CT_BATCHES, 2, (int64_t[]){7, 3});
    expect_run("schedule", &t, &o, "T3 V3 T7 V7 T9 V9 C9:end");

    /* Epoch schedule: validate after epochs 1 and 3 (epoch_len 2 at gbs 32). */
    reset_recorders();
    o = base_opts(h32);
    o.max_length = ct_epochs(4);
    o.validation_period = ct_schedule(CT_EPOCHS, 2, (int64_t[]){1, 3});
    expect_run("epoch schedule", &t, &o, "T2 V2 T6 V6 T8 V8 C8:end");

    /* step_zero_validation validates first and never checkpoints for it. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(2);
    o.step_zero_validation = true;
    o.checkpoint_policy = CT_CKPT_ALL;
    expect_run("step zero validation", &t, &o, "V0 T2 V2 C2:policy");

    /* Reporting cadence alone. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(10);
    o.reporting_period = ct_batches(3);
    expect_run("reporting period", &t, &o, "T3 T6 T9 T10 V10 C10:end");

    /* Records become batches of the global batch size: 160 / 16 = 10. */
    reset_recorders();
    o.max_length = ct_records(160);
    o.reporting_period = ct_batches(100);
    expect_run("records", &t, &o, "T10 V10 C10:end");

    /* test_mode: one batch, the first validation batch only, checkpoint. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(100);
    o.validation_period = ct_batches(4);
    o.test_mode = true;
    expect_run("test mode", &t, &o, "T1 V1 C1:end");

    /* A stop request (in batch 6) is taken at the next boundary, the
     * validation after 8 batches (Determined's _stop_requested after each
     * boundary): checkpoint there, no final validation. */
    reset_recorders();
    ct_value *hstop = hp(16);
    ct_value_dict_set(hstop, "stop_after", ct_value_int(6));
    o = base_opts(hstop);
    o.max_length = ct_batches(10);
    o.validation_period = ct_batches(4);
    expect_run("stop request", &t, &o, "T4 V4 T8 V8 C8:stop");

    /* SIGTERM (preemption) stops after the batch, and ct_fit returns 0. */
    reset_recorders();
    ct_value *hterm = hp(16);
    ct_value_dict_set(hterm, "sigterm_after", ct_value_int(7));
    o = base_opts(hterm);
    o.max_length = ct_batches(10);
    o.validation_period = ct_batches(4);
    /* The workload it cuts short (batches 5-7) is not reported: the
     * checkpoint keeps it for the resumed run to report whole at 8. */
    expect_run("SIGTERM", &t, &o, "T4 V4 C7:stop");
    ct_value_free(hterm);

    /* Resume after a stop in the middle of epoch 1 (epoch_len 4; the stop
     * requested in batch 6 is taken at the reporting boundary there), with the
     * best policy where a larger validation loss is better (so only the
     * first validation is ever the best): the resumed run starts no epoch
     * it enters midway (no E1), remembers the best from before the stop (no
     * checkpoint at V8 or V12), and trains on from the saved weight (its
     * first report is the mean of losses 6 and 7). */
    reset_recorders();
    o = base_opts(hstop);
    o.output_dir = "onevar_rules_resume";
    o.max_length = ct_batches(12);
    o.validation_period = ct_batches(4);
    o.reporting_period = ct_batches(6);
    o.checkpoint_policy = CT_CKPT_BEST;
    o.searcher_metric = "validation_loss";
    o.smaller_is_better = false;
    g_rec[0].epochs = true;
    expect_run("resume: before the stop", &t, &o, "E0 e0 T4 V4 C4:policy E1 T6 C6:stop");
    reset_recorders();
    ct_value *hresume = hp(16);
    o.hparams = hresume;
    o.resume = "latest";
    g_rec[0].epochs = true;
    expect_run("resume: after the stop", &t, &o, "e1 T8 V8 E2 e2 T12 V12 C12:end");
    CHECK(g_rec[0].n_losses == 2);
    CHECK_NEAR(g_rec[0].losses[0], (pow998(12) + pow998(14)) / 2, 1e-6);
    ct_value_free(hresume);

    /* Callback order: registration order, shutdown in reverse. */
    reset_recorders();
    g_n_rec = 2;
    for (int i = 0; i < 2; i++) {
        g_rec[i].epochs = g_rec[i].lifecycle = true;
        snprintf(g_rec[i].tag, sizeof g_rec[i].tag, "%s", i ? "b:" : "a:");
    }
    o = base_opts(h32);
    o.max_length = ct_epochs(1);
    expect_run("callback order", &t, &o,
               "a:U0 b:U0 a:E0 b:E0 a:e0 b:e0 a:T2 b:T2 a:V2 b:V2 a:C2:end b:C2:end b:S a:S");

    /* Reducers: SUM / MAX / MIN / AVG (an array element-wise) over the 4
     * validation batches, plus a named and an unnamed custom reducer. */
    reset_recorders();
    ct_value *hred = hp(16);
    ct_value_dict_set(hred, "extra_metrics", ct_value_bool(true));
    ct_value_dict_set(hred, "custom_reducers", ct_value_bool(true));
    ct_trial tr = t;
    tr.evaluation_reducer = reducers;
    tr.evaluate_batch = evaluate_with_reducers;
    o = base_opts(hred);
    o.max_length = ct_batches(8);
    o.validation_period = ct_batches(4);
    expect_run("reducers", &tr, &o, "T4 V4 T8 V8 C8:end");
    CHECK(g_leaks == 0); /* reducers fed in validation only never show in training */
    const ct_value *m = g_rec[0].last_val;
    double d;
    int64_t i64;
    CHECK(ct_value_get_float(ct_value_dict_get(m, "validation_loss"), &d) == 0);
    CHECK_NEAR(d, 4 * pow998(16), 1e-6); /* SUM of four equal batches, after 8 steps */
    CHECK(ct_value_get_float(ct_value_dict_get(m, "mx"), &d) == 0 && d == 3);
    CHECK(ct_value_get_float(ct_value_dict_get(m, "mn"), &d) == 0 && d == 0);
    const ct_value *arr = ct_value_dict_get(m, "arr");
    CHECK(ct_value_len(arr) == 2);
    CHECK(ct_value_get_float(ct_value_list_get(arr, 0), &d) == 0 && d == 1.5); /* mean of 0,1,2,3 */
    CHECK(ct_value_get_float(ct_value_list_get(arr, 1), &d) == 0 && d == 3.0);
    CHECK(ct_value_get_int(ct_value_dict_get(m, "count"), &i64) == 0 && i64 == 4);
    CHECK(ct_value_get_float(ct_value_dict_get(m, "u1"), &d) == 0 && d == 6.0);

    /* Gradient aggregation: 10 batches with frequency 2 make 5 steps. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(10);
    o.aggregation_frequency = 2;
    expect_run("aggregation", &t, &o, "T10 V10 C10:end");
    CHECK_NEAR(g_rec[0].val_losses[0], pow998(10), 1e-6); /* (0.998^5)^2 */

    /* average_aggregated_gradients false: each of the 5 steps sees the sum
     * of its window's two gradients, and moves w twice as far. */
    reset_recorders();
    o = base_opts(h16);
    o.max_length = ct_batches(10);
    o.aggregation_frequency = 2;
    o.average_aggregated_gradients = false;
    expect_run("aggregation, summed", &t, &o, "T10 V10 C10:end");
    CHECK_NEAR(g_rec[0].val_losses[0], pow(0.996, 10), 1e-6); /* (0.996^5)^2 */

    /* Clipping changes the trajectory: one step with the gradient (-2) cut
     * to norm 1e-4 moves w by 1e-7 instead of 0.002. */
    reset_recorders();
    ct_value *hclip = hp(16);
    ct_value_dict_set(hclip, "clip", ct_value_bool(true));
    g_clip_norm = 1e-4;
    o = base_opts(hclip);
    o.max_length = ct_batches(1);
    expect_run("clipping", &t, &o, "T1 V1 C1:end");
    /* float32 resolves 1 - 2e-7 only to ~6e-8; unclipped it would be 0.996. */
    CHECK_NEAR(g_rec[0].val_losses[0], (1 - 1e-7) * (1 - 1e-7), 1.2e-7);

    /* Scheduler step modes over 10 batches of an epoch_len-4 loader. */
    struct {
        ct_step_mode mode;
        int freq, agg;
        int steps;
    } modes[] = {
        {CT_STEP_EVERY_BATCH, 1, 1, 10},           /* every batch */
        {CT_STEP_EVERY_BATCH, 2, 1, 5},            /* every 2nd batch */
        {CT_STEP_EVERY_BATCH, 1, 2, 10},           /* two per optimizer step: batches count */
        {CT_STEP_EVERY_BATCH, 4, 2, 2},            /* batch counts 4 and 8 */
        {CT_STEP_EVERY_OPTIMIZER_STEP, 1, 2, 5},   /* with the optimizer */
        {CT_STEP_EVERY_OPTIMIZER_STEP, 4, 2, 2},   /* at batch counts 4 and 8 */
        {CT_STEP_EVERY_EPOCH, 1, 1, 2},            /* epochs end after 4 and 8 */
        {CT_STEP_EVERY_EPOCH, 1, 2, 2},            /* ...seen from batches 4 and 8 */
        {CT_STEP_EVERY_EPOCH, 2, 1, 1},            /* every 2nd epoch */
        {CT_STEP_MANUAL, 1, 1, 0},                 /* never */
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        reset_recorders();
        ct_value *hs = hp(16);
        ct_value_dict_set(hs, "sched_mode", ct_value_int(modes[i].mode));
        ct_value_dict_set(hs, "sched_freq", ct_value_int(modes[i].freq));
        o = base_opts(hs);
        o.max_length = ct_batches(10);
        o.aggregation_frequency = modes[i].agg;
        expect_run("scheduler step mode", &t, &o, "T10 V10 C10:end");
        CHECK_NEAR(g_final_lr, 0.001 * pow(0.5, modes[i].steps), 1e-15);
        ct_value_free(hs);
    }

    /* Simple mode: the core does backward, step and zero-grad; the numbers
     * are those of the explicit trial. */
    reset_recorders();
    ct_trial simple = t;
    simple.init = simple_init;
    simple.build_model = simple_model;
    simple.optimizer = simple_optimizer;
    simple.train_batch = simple_train_batch;
    o = base_opts(h16);
    o.max_length = ct_batches(10);
    o.validation_period = ct_batches(4);
    expect_run("simple mode", &simple, &o, "T4 V4 T8 V8 T10 V10 C10:end");
    CHECK_NEAR(g_rec[0].losses[0], (pow998(0) + pow998(2) + pow998(4) + pow998(6)) / 4, 1e-6);
    CHECK_NEAR(g_rec[0].val_losses[2], pow998(20), 1e-6);

    /* evaluate_full_dataset sees the whole, unsharded validation loader. */
    reset_recorders();
    ct_trial full = t;
    full.evaluate_batch = NULL;
    full.evaluate_full_dataset = evaluate_full;
    expect_run("evaluate_full_dataset", &full, &o, "T4 V4 T8 V8 T10 V10 C10:end");
    CHECK_NEAR(g_rec[0].val_losses[1], pow998(16), 1e-6);
    CHECK(ct_value_get_int(ct_value_dict_get(g_rec[0].last_val, "num_batches"), &i64) == 0 && i64 == 4);

    /* Hyperparameters: defaults, required ones, wrong types. */
    ct_value *hh = hp(16);
    ct_value_dict_set(hh, "name", ct_value_str("onevar"));
    ct_trial ht = t;
    ht.init = hparam_init;
    o = base_opts(hh);
    o.max_length = ct_batches(1);
    CHECK(ct_fit(&ht, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "hparam checks passed");
    ct_value_free(hh);

    /* Refused before anything runs. */
    ct_trial bad = t;
    bad.train_batch = NULL;
    o = base_opts(h16);
    o.max_length = ct_batches(1);
    CHECK(ct_fit(&bad, &o) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "train_batch is required");
    bad = t;
    bad.evaluate_full_dataset = (ct_value * (*)(void *, ct_context *, ct_loader *))1;
    CHECK(ct_fit(&bad, &o) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "not both");
    o.max_length = ct_schedule(CT_BATCHES, 1, (int64_t[]){5});
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "max_length");

    CHECK(g_bad_indices == 0);
    reset_recorders();
    ct_value_free(h16);
    ct_value_free(h32);
    ct_value_free(hstop);
    ct_value_free(hred);
    ct_value_free(hclip);
    CHECK(ct_tensor_live_count() == 0);
    return ct_test_result("loop_onevar_rules");
}
