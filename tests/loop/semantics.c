/* tests/loop/semantics.c — Determined's semantics that ctrial once differed
 * from (issue 15), one process, with exact numbers. The trial is OneVar
 * (tests/loop/onevar_rules.c): records x = 1, y = 1 with an id each, a
 * bias-free Linear(1,1) from w = 0, SGD lr 0.001, MSE, so after k steps
 * 1 - w = 0.998^k. A recorder logs events as words ("T4" training report
 * after 4 batches, "V4" validation, "C4:stop" checkpoint and its reason,
 * "E0"/"e0" epoch start/end, "[0,1,2,3]" a training batch's record ids).
 *
 * The cases: a training loader over the user's own sampler chain (its
 * epoch length, passes, exact resume); position queries before and during
 * training; stop requests taken at the next boundary and withdrawn;
 * ct_ctx_should_exit; evaluate_full_dataset getting a full pass each time;
 * evaluate_batch's metric names; the order of setup hooks and which hooks
 * run; backward's arguments; manual AMP (ct_ctx_wrap_scaler); the trial's
 * surroundings (user pointer, config, ids, TensorBoard switch). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctrial/callback.h>
#include <ctrial/summary.h>
#include <ctrial/trial.h>

#include "ct_test.h"
#include "onevar.h"

/* ---- what a scenario asks of the trial ------------------------------------ */

typedef struct {
    int64_t records;        /* training records (64) */
    int user_chain;         /* 0: ctrial's chain; 1: repeat-shard-batch of sequential; 2: batch of sequential;
                               3: 1 then skip(ct_ctx_initial_batch + skip_extra): Determined's user-guide recipe */
    int64_t skip_extra;     /* user_chain 3: batches skipped beyond the initial batch */
    int64_t chain_batch;    /* the user chain's batch size */
    int64_t stop_at;        /* set_stop_requested(true) in this batch index (-1) */
    int64_t unstop_at;      /* set_stop_requested(false) in this batch index (-1) */
    int64_t exit_at;        /* ct_ctx_should_exit in this batch index (-1) */
    bool exit_skip;         /* ... without a checkpoint */
    bool exit_in_hook;      /* ct_ctx_should_exit from on_validation_end instead */
    int names;              /* evaluate_batch: 1 drops "b" at batch 2, 2 adds "c" at batch 2 */
    double grad_factor;     /* > 0: backward_ex with gradient = this (a scalar tensor) */
    bool twice;             /* backward_ex twice, the first with retain_graph */
    bool bare_backward;     /* ct_backward instead of ct_ctx_backward */
    bool manual_scaler;     /* ct_ctx_wrap_scaler: scale, step, update by hand */
    bool summary;           /* log to ct_ctx_tensorboard_writer */
    bool no_zero;           /* step with auto_zero_grads = false */
    bool iterable;          /* the training loader is an iterable one over the records */
    bool opt_out;           /* ct_ctx_disable_dataset_reproducibility_checks in init */
    bool no_auto_device;    /* ct_ctx_disable_auto_to_device in init */
    bool read_hparams;      /* init reads "hidden" (an int) and "lr" (a number) */
    int64_t nan_at;         /* train_batch reports a NaN loss in this batch index (-1) */
    bool nan_val;           /* evaluate_batch reports a NaN validation_loss */
} Config;

static Config g;
static char g_log[16384];
static int g_bad;                /* position answers that were not Determined's */
static int g_full_batches[8];    /* batches each evaluate_full_dataset call saw */
static int g_full_calls;
static double g_final_w;
static void *g_user_seen;
static const ct_value *g_config_seen;
static int64_t g_ids[2];
static int64_t g_hidden;
static double g_lr;

static void say_word(const char *word) {
    size_t at = strlen(g_log);
    snprintf(g_log + at, sizeof g_log - at, "%s%s", at ? " " : "", word);
}

static void say(const char *fmt, long long v) {
    char word[256];
    snprintf(word, sizeof word, fmt, v);
    say_word(word);
}

static bool g_epochs, g_hooks; /* log epoch hooks; log setup, validation-epoch and checkpoint-step hooks */

/* Setup words ("init", "B" callbacks built, "U0" startup, "L"/"l" loaders
 * built, "S" training start, "R" checkpoint loading): only with g_hooks. */
static void say_setup(const char *fmt, long long v) {
    if (g_hooks) say(fmt, v);
}

static void expect_bad(bool cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "position check failed: %s (log so far: %s)\n", what, g_log);
        g_bad++;
    }
}

/* Before the run's first batch: -1 / false with CT_ESTATE, as Determined raises. */
static void check_not_started(const ct_context *ctx, const char *where) {
    ct_clear_error();
    expect_bad(ct_ctx_current_batch(ctx) == -1 && ct_last_code() == CT_ESTATE, where);
    expect_bad(ct_ctx_current_epoch(ctx) == -1, where);
    expect_bad(!ct_ctx_is_epoch_start(ctx) && !ct_ctx_is_epoch_end(ctx), where);
    ct_clear_error();
}

/* ---- the trial ------------------------------------------------------------ */

typedef struct {
    ct_module *lin;
    ct_optim *opt;
    ct_grad_scaler *scaler;
} OneVar;

static void *init(ct_context *ctx) {
    say_setup("init", 0);
    check_not_started(ctx, "init");
    g_user_seen = ct_ctx_user_data(ctx);
    g_config_seen = ct_ctx_experiment_config(ctx);
    g_ids[0] = ct_ctx_experiment_id(ctx);
    g_ids[1] = ct_ctx_trial_id(ctx);
    if (g.opt_out) ct_ctx_disable_dataset_reproducibility_checks(ctx);
    if (g.read_hparams) {
        g_hidden = ct_ctx_hparam_int(ctx, "hidden", 64);
        g_lr = ct_ctx_hparam_double(ctx, "lr", 1e-3);
    }
    if (g.no_auto_device) ct_ctx_disable_auto_to_device(ctx);
    OneVar *t = calloc(1, sizeof *t);
    if (g.manual_scaler) {
        t->scaler = ct_ctx_wrap_scaler(ctx, ct_grad_scaler_new(ct_cpu(), NULL));
        if (!t->scaler) return NULL;
    }
    t->lin = ct_ctx_wrap_model(ctx, onevar_model());
    t->opt = ct_ctx_wrap_optimizer(ctx, onevar_sgd(t->lin));
    return t->opt ? t : NULL;
}

static void destroy(void *self) {
    OneVar *t = self;
    ct_item(ct_nn_get(t->lin, "weight"), &g_final_w);
    free(t);
}

/* Records: (x = 1, y = 1, id = i). */
static ct_dataset *records(int64_t n) {
    ct_tensor *ts[3] = {ct_ones(CT_SHAPE(n, 1), NULL), ct_ones(CT_SHAPE(n, 1), NULL),
                        ct_arange(0, (double)n, 1, &(ct_topts){.dtype = CT_I64})};
    ct_dataset *d = ct_dataset_tensors(3, ts);
    for (int i = 0; i < 3; i++) ct_tensor_free(ts[i]);
    return d;
}

/* An iterable dataset: record k of each pass is (1, 1, k), g.records a pass. */
typedef struct {
    int64_t next;
} Counter;

static int counter_reset(void *self) {
    ((Counter *)self)->next = 0;
    return 0;
}

static ct_value *counter_next(void *self) {
    Counter *c = self;
    if (c->next >= g.records) return NULL;
    ct_value *rec = ct_value_tuple();
    ct_value_list_append(rec, ct_value_tensor(ct_ones(CT_SHAPE(1), NULL)));
    ct_value_list_append(rec, ct_value_tensor(ct_ones(CT_SHAPE(1), NULL)));
    ct_value_list_append(rec, ct_value_tensor(ct_full(0, NULL, (double)c->next++, &(ct_topts){.dtype = CT_I64})));
    return rec;
}

static ct_loader *train_loader(void *self, ct_context *ctx) {
    say_setup("L", 0);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    if (g.iterable)
        return ct_loader_iterable(&(ct_iterable_vtable){.reset = counter_reset, .next = counter_next, .free = free},
                                  calloc(1, sizeof(Counter)), &o);
    if (g.user_chain == 1)
        o.sampler = ct_sampler_batch(ct_sampler_shard(ct_sampler_repeat(ct_sampler_sequential(g.records)),
                                                      ct_ctx_rank(ctx), ct_ctx_size(ctx)),
                                     g.chain_batch, false);
    else if (g.user_chain == 2)
        o.sampler = ct_sampler_batch(ct_sampler_sequential(g.records), g.chain_batch, false);
    else if (g.user_chain == 3)
        o.sampler = ct_sampler_skip(
            ct_sampler_batch(ct_sampler_shard(ct_sampler_repeat(ct_sampler_sequential(g.records)), ct_ctx_rank(ctx),
                                              ct_ctx_size(ctx)),
                             g.chain_batch, false),
            ct_ctx_initial_batch(ctx) + g.skip_extra);
    return ct_loader_new(records(g.records), &o);
}

static ct_loader *val_loader(void *self, ct_context *ctx) {
    say_setup("l", 0);
    return onevar_loader(ctx, 64);
}

static ct_tensor *mse(OneVar *t, const ct_value *batch) { return onevar_mse(t->lin, batch); }

/* "[0,1,2,3]": the batch's record ids. */
static void say_ids(const ct_value *batch) {
    ct_tensor *ids = ct_batch_at(batch, 2);
    int64_t n = ct_size(ids, 0), v[64];
    if (n > 64 || ct_read(ids, v, (size_t)n * sizeof *v) != 0) return;
    char buf[512];
    size_t at = (size_t)snprintf(buf, sizeof buf, "[");
    for (int64_t i = 0; i < n; i++) at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld", i ? "," : "", (long long)v[i]);
    snprintf(buf + at, sizeof buf - at, "]");
    say_word(buf);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    OneVar *t = self;
    expect_bad(ct_ctx_current_batch(ctx) == batch_idx, "current batch in train_batch");
    if (g.user_chain || g.iterable) say_ids(batch);
    ct_value *moved = ct_ctx_to_device(ctx, batch);
    expect_bad(moved && ct_value_len(moved) == 3 && ct_batch_length(moved) == ct_batch_length(batch), "to_device");
    ct_value_free(moved);
    if (batch_idx == g.stop_at) ct_ctx_set_stop_requested(ctx, true);
    if (batch_idx == g.unstop_at) ct_ctx_set_stop_requested(ctx, false);
    expect_bad(ct_ctx_get_stop_requested(ctx) == (g.stop_at >= 0 && batch_idx >= g.stop_at &&
                                                  (g.unstop_at < 0 || batch_idx < g.unstop_at)),
               "get_stop_requested");
    ct_tensor *loss = mse(t, batch);
    int rc;
    if (g.bare_backward) {
        rc = ct_backward(loss);
    } else if (g.manual_scaler) {
        rc = ct_ctx_backward(ctx, ct_grad_scaler_scale(t->scaler, loss));
    } else if (g.grad_factor > 0 || g.twice) {
        ct_tensor *grad = g.grad_factor > 0 ? ct_full(0, NULL, g.grad_factor, NULL) : NULL;
        rc = ct_ctx_backward_ex(ctx, loss, grad, g.twice, false);
        if (rc == 0 && g.twice) rc = ct_ctx_backward_ex(ctx, loss, grad, false, false);
    } else {
        rc = ct_ctx_backward(ctx, loss);
    }
    if (rc == 0 && (g.manual_scaler || g.no_zero)) {
        ct_step_opts so = ct_step_defaults();
        so.scaler = t->scaler;
        so.auto_zero_grads = !g.no_zero;
        rc = ct_ctx_step_optimizer_with(ctx, t->opt, &so);
        if (rc == 0 && t->scaler) rc = ct_grad_scaler_update(t->scaler);
    } else if (rc == 0) {
        rc = ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL);
    }
    if (rc != 0) return NULL;
    if (g.summary) {
        ct_summary_writer *w = ct_ctx_tensorboard_writer(ctx);
        if (ct_summary_add_scalar(w, "trial/w", 1.0, batch_idx) != 0) return NULL;
    }
    if (batch_idx == g.exit_at) {
        ct_ctx_should_exit(ctx, g.exit_skip);
        return NULL;
    }
    if (batch_idx == g.nan_at) return ct_value_tensor(ct_mul_scalar(loss, NAN)); /* the report only */
    return ct_value_tensor(loss);
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", g.nan_val ? ct_value_float(NAN) : ct_value_tensor(mse(self, batch)));
    if (!(g.names == 1 && batch_idx == 2)) ct_value_dict_set(m, "b", ct_value_float(1));
    if (g.names == 2 && batch_idx == 2) ct_value_dict_set(m, "c", ct_value_float(1));
    return m;
}

/* Reads whatever the loader gives, without resetting it first. */
static ct_value *evaluate_full(void *self, ct_context *ctx, ct_loader *loader) {
    ct_value *batch;
    double sum = 0;
    int n = 0, got;
    while ((got = ct_loader_next(loader, &batch)) == 1) {
        double l = 0;
        ct_item(mse(self, batch), &l);
        sum += l;
        n++;
        ct_value_free(batch);
    }
    if (got < 0) return NULL;
    if (g_full_calls < 8) g_full_batches[g_full_calls++] = n;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_float(n ? sum / n : 0));
    return m;
}

/* ---- the recorder --------------------------------------------------------- */

static int on_startup(void *self, ct_context *ctx, int64_t first, const char *ckpt) {
    say_setup("U%lld", first);
    check_not_started(ctx, "on_trial_startup");
    return 0;
}
static int on_training_start(void *self, ct_context *ctx) {
    say_setup("S", 0);
    check_not_started(ctx, "on_training_start");
    expect_bad(g.iterable ? ct_ctx_epoch_length(ctx) == -1 : ct_ctx_epoch_length(ctx) > 0,
               "epoch length at on_training_start: known, or -1 for an iterable loader");
    return 0;
}
static int on_epoch_start(void *self, ct_context *ctx, int64_t e) {
    say("E%lld", e);
    expect_bad(ct_ctx_is_epoch_start(ctx) && ct_ctx_current_epoch(ctx) == e, "is_epoch_start in on_training_epoch_start");
    expect_bad(ct_ctx_current_batch(ctx) == e * ct_ctx_epoch_length(ctx), "current batch at epoch start");
    return 0;
}
static int on_epoch_end(void *self, ct_context *ctx, int64_t e) {
    say("e%lld", e);
    expect_bad(ct_ctx_is_epoch_end(ctx) && ct_ctx_current_epoch(ctx) == e, "is_epoch_end in on_training_epoch_end");
    return 0;
}
static int on_workload(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    int64_t bt = 0;
    ct_value_get_int(ct_value_dict_get(avg, "batches"), &bt);
    say("T%lld", bt);
    expect_bad(ct_ctx_current_batch(ctx) == bt - 1, "current batch at a workload's end: the last trained");
    return 0;
}
static int on_val_epoch_start(void *self, ct_context *ctx) {
    say("v<", 0);
    return 0;
}
static int on_val_epoch_end(void *self, ct_context *ctx, const ct_value *outputs) {
    say("v>", 0);
    return 0;
}
static int on_val_end(void *self, ct_context *ctx, const ct_value *metrics) {
    int64_t bt = -1;
    ct_value_get_int(ct_value_dict_get(metrics, "batches"), &bt);
    say("V%lld", bt);
    if (bt > 0) expect_bad(ct_ctx_current_batch(ctx) == bt - 1, "current batch in validation: the last trained");
    return g.exit_in_hook ? ct_ctx_should_exit(ctx, false) : 0;
}
static int on_save_start(void *self, ct_context *ctx, ct_value *state) {
    say("s", 0);
    return 0;
}
static int on_write_end(void *self, ct_context *ctx, const char *dir) {
    ct_value *meta = ct_ckpt_metadata(dir);
    int64_t bt = -1;
    ct_value_get_int(ct_value_dict_get(meta, "steps_completed"), &bt);
    const char *why = ct_value_get_str(ct_value_dict_get(ct_value_dict_get(meta, "trial_state"), "reason"));
    char word[64];
    snprintf(word, sizeof word, "C%%lld:%s", why ? why : "?");
    say(word, bt);
    ct_value_free(meta);
    return 0;
}
static int on_upload_end(void *self, ct_context *ctx, const char *dir) {
    say("u", 0);
    return 0;
}
static int on_load_start(void *self, ct_context *ctx, const ct_value *state) {
    say_setup("R", 0);
    return 0;
}

static int build_callbacks(void *self, ct_context *ctx) {
    say_setup("B", 0);
    ct_callback cb = {
        .name = "recorder",
        .on_trial_startup = on_startup,
        .on_training_start = on_training_start,
        .on_training_workload_end = on_workload,
        .on_training_epoch_start = g_epochs ? on_epoch_start : NULL,
        .on_training_epoch_end = g_epochs ? on_epoch_end : NULL,
        .on_validation_epoch_start = g_hooks ? on_val_epoch_start : NULL,
        .on_validation_epoch_end = g_hooks ? on_val_epoch_end : NULL,
        .on_validation_end = on_val_end,
        .on_checkpoint_save_start = g_hooks ? on_save_start : NULL,
        .on_checkpoint_write_end = on_write_end,
        .on_checkpoint_upload_end = g_hooks ? on_upload_end : NULL,
        .on_checkpoint_load_start = g_hooks ? on_load_start : NULL,
    };
    return ct_ctx_add_callback(ctx, &cb);
}

static ct_trial the_trial(void) {
    ct_trial t = {
        .name = "semantics",
        .init = init,
        .destroy = destroy,
        .build_training_data_loader = train_loader,
        .build_validation_data_loader = val_loader,
        .train_batch = train_batch,
        .evaluate_batch = evaluate_batch,
        .build_callbacks = build_callbacks,
    };
    return t;
}

/* ---- running scenarios ------------------------------------------------------ */

static ct_value *g_hp;

static void reset(void) {
    Config d = {.records = 64, .chain_batch = 4, .stop_at = -1, .unstop_at = -1, .exit_at = -1, .nan_at = -1};
    g = d;
    g_log[0] = '\0';
    g_epochs = g_hooks = false;
    g_full_calls = 0;
}

static ct_fit_opts opts(const char *out, int64_t gbs) {
    ct_value_free(g_hp);
    g_hp = ct_value_dict();
    ct_value_dict_set(g_hp, "global_batch_size", ct_value_int(gbs));
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = g_hp;
    o.quiet = true;
    o.output_dir = out;
    o.overwrite = true; /* a scenario replaces the last one's run (the guard has its own) */
    o.checkpoint_policy = CT_CKPT_NONE;
    return o;
}

/* Runs, checks ct_fit's status and the event words. */
static void expect_run(const char *name, const ct_trial *t, const ct_fit_opts *o, int want_rc, const char *want) {
    int rc = ct_fit(t, o);
    if (rc != want_rc) fprintf(stderr, "%s: ct_fit returned %d (%s)\n", name, rc, ct_last_error());
    CHECK(rc == want_rc);
    if (strcmp(g_log, want) != 0) {
        fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, g_log, want);
        CHECK(!"event sequence");
    }
}

static double pow998(int k) { return pow(0.998, k); }

static int count_event_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) n++;
    if (d) closedir(d);
    return n;
}

/* Runs ct_fit with `fd` (1 or 2) going to a file; returns its status and
 * puts what was written there in buf. */
static int fit_capturing(int fd, const ct_trial *t, const ct_fit_opts *o, char *buf, size_t len) {
    fflush(stdout);
    fflush(stderr);
    int saved = dup(fd);
    FILE *f = tmpfile();
    dup2(fileno(f), fd);
    int rc = ct_fit(t, o);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, fd);
    close(saved);
    rewind(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return rc;
}

static void rm_rf(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    ct_trial t = the_trial();

    /* 1. A training loader over the user's own chain: repeat, shard, batch
     * of 10 records by 4. Its epoch is one pass of the inner sampler,
     * ceil(10 / 4) = 3 batches, and the batches run on through the passes. */
    reset();
    rm_rf("semantics_chain");
    g.records = 10;
    g.user_chain = 1;
    g.opt_out = true;
    g_epochs = true;
    ct_fit_opts o = opts("semantics_chain", 4);
    o.max_length = ct_epochs(2);
    expect_run("user chain", &t, &o, 0,
               "E0 [0,1,2,3] [4,5,6,7] [8,9,0,1] e0 E1 [2,3,4,5] [6,7,8,9] [0,1,2,3] e1 T6 V6 C6:end");
    double straight = g_final_w;
    CHECK_NEAR(1 - straight, pow998(6), 1e-6);
    /* ... and resumes mid-epoch exactly: a stop requested in batch 3 is
     * taken at the next boundary (the reporting period, 4 batches). */
    reset();
    rm_rf("semantics_chain");
    g.records = 10;
    g.user_chain = 1;
    g.opt_out = true;
    g.stop_at = 3;
    g_epochs = true;
    o = opts("semantics_chain", 4);
    o.max_length = ct_epochs(2);
    o.reporting_period = ct_batches(4);
    expect_run("user chain: stopped", &t, &o, 0, "E0 [0,1,2,3] [4,5,6,7] [8,9,0,1] e0 E1 [2,3,4,5] T4 C4:stop");
    reset();
    g.records = 10;
    g.user_chain = 1;
    g.opt_out = true;
    g_epochs = true;
    o.resume = "latest";
    expect_run("user chain: resumed", &t, &o, 0, "[6,7,8,9] [0,1,2,3] e1 T6 V6 C6:end");
    CHECK(g_final_w == straight);

    /* Without the opt-out a chain of the trial's own is refused, as
     * Determined refuses a DataLoader other than its own, naming the way out. */
    reset();
    rm_rf("semantics_chain");
    g.records = 10;
    g.user_chain = 1;
    o = opts("semantics_chain", 4);
    o.max_length = ct_epochs(2);
    CHECK(ct_fit(&t, &o) == CT_ETRIAL);
    CHECK(strstr(ct_last_error(), "build_training_data_loader returned a loader over the trial's own sampler chain"));
    CHECK_ERR(CT_ETRIAL, "ct_ctx_disable_dataset_reproducibility_checks(ctx) in init");

    /* Determined's user guide's chain ends in SkipBatchSampler(initial_batch)
     * (here skip(ct_ctx_initial_batch)): the skip positions it, and a resume
     * mid-epoch trains on what the uninterrupted run trained on, no batch
     * skipped twice. */
    reset();
    rm_rf("semantics_recipe");
    g.records = 10;
    g.user_chain = 3;
    g.opt_out = true;
    g.stop_at = 3;
    g_epochs = true;
    o = opts("semantics_recipe", 4);
    o.max_length = ct_epochs(2);
    o.reporting_period = ct_batches(4);
    expect_run("recipe chain: stopped", &t, &o, 0, "E0 [0,1,2,3] [4,5,6,7] [8,9,0,1] e0 E1 [2,3,4,5] T4 C4:stop");
    /* (a chain that skips more than the run's start trains nothing) */
    reset();
    g.records = 10;
    g.user_chain = 3;
    g.skip_extra = 2;
    g.opt_out = true;
    o.resume = "latest";
    CHECK(ct_fit(&t, &o) == CT_EINVAL);
    CHECK_ERR(CT_EINVAL, "skips 6 batches (ct_sampler_skip), past position 4");
    CHECK(!strchr(g_log, '['));
    reset();
    g.records = 10;
    g.user_chain = 3;
    g.opt_out = true;
    g_epochs = true;
    expect_run("recipe chain: resumed", &t, &o, 0, "[6,7,8,9] [0,1,2,3] e1 T6 V6 C6:end");
    CHECK(g_final_w == straight);

    /* A chain that ends its passes (no repeat): each pass is an epoch, the
     * last batch of a pass is short, and resuming mid-pass is exact. */
    reset();
    rm_rf("semantics_passes");
    g.records = 10;
    g.user_chain = 2;
    g.opt_out = true;
    g_epochs = true;
    o = opts("semantics_passes", 4);
    o.max_length = ct_epochs(2);
    expect_run("passes", &t, &o, 0, "E0 [0,1,2,3] [4,5,6,7] [8,9] e0 E1 [0,1,2,3] [4,5,6,7] [8,9] e1 T6 V6 C6:end");
    straight = g_final_w;
    reset();
    rm_rf("semantics_passes");
    g.records = 10;
    g.user_chain = 2;
    g.opt_out = true;
    g.exit_at = 3;
    o = opts("semantics_passes", 4);
    o.max_length = ct_epochs(2);
    expect_run("passes: exit", &t, &o, 0, "[0,1,2,3] [4,5,6,7] [8,9] [0,1,2,3] C4:stop");
    reset();
    g.records = 10;
    g.user_chain = 2;
    g.opt_out = true;
    o.resume = "latest";
    expect_run("passes: resumed", &t, &o, 0, "[4,5,6,7] [8,9] T6 V6 C6:end");
    CHECK(g_final_w == straight);

    /* 2. Setup in Determined's order: init, callbacks, on_trial_startup,
     * then the loaders; positions are "not started" until the first batch;
     * validation-epoch hooks around evaluate_batch's pass; the checkpoint
     * hooks save start, write end, upload end. */
    reset();
    rm_rf("semantics_hooks");
    g_hooks = g_epochs = true;
    o = opts("semantics_hooks", 32);
    o.max_length = ct_batches(2);
    int user_thing = 42;
    o.user = &user_thing;
    ct_value *config = ct_value_dict();
    ct_value_dict_set(config, "name", ct_value_str("semantics"));
    o.experiment_config = config;
    o.experiment_id = 7;
    o.trial_id = 9;
    expect_run("hook order", &t, &o, 0, "init B U0 L l S E0 e0 T2 v< v> V2 s C2:end u");
    CHECK(g_bad == 0);
    CHECK(g_user_seen == &user_thing);
    CHECK(g_config_seen == config);
    CHECK(g_ids[0] == 7 && g_ids[1] == 9);
    /* A resumed run loads the checkpoint after the loaders are built. */
    reset();
    g_hooks = true;
    o.max_length = ct_batches(4);
    o.resume = "latest";
    expect_run("hook order: resumed", &t, &o, 0, "init B U2 L l R S T4 v< v> V4 s C4:end u");
    ct_value_free(config);

    /* evaluate_full_dataset: no validation-epoch hooks (Determined calls
     * them for evaluate_batch only), and a full pass every time although
     * the trial never resets the loader. */
    reset();
    g_hooks = true;
    ct_trial full = t;
    full.evaluate_batch = NULL;
    full.evaluate_full_dataset = evaluate_full;
    o = opts("semantics_full", 16);
    o.max_length = ct_batches(8);
    o.validation_period = ct_batches(4);
    expect_run("full dataset", &full, &o, 0, "init B U0 L l S T4 V4 T8 V8 s C8:end u");
    CHECK(g_full_calls == 2 && g_full_batches[0] == 4 && g_full_batches[1] == 4);

    /* 3. Stop requests are taken at the next boundary, and can be withdrawn. */
    reset();
    g.stop_at = 5;
    o = opts("semantics_stop", 16);
    o.max_length = ct_batches(12);
    o.validation_period = ct_batches(4);
    expect_run("stop at the next boundary", &t, &o, 0, "T4 V4 T8 V8 C8:stop");
    reset();
    g.stop_at = 5;
    g.unstop_at = 6;
    expect_run("stop withdrawn", &t, &o, 0, "T4 V4 T8 V8 T12 V12 C12:end");

    /* ct_ctx_should_exit: that batch counts, a checkpoint unless skipped, 0. */
    reset();
    rm_rf("semantics_exit");
    g.exit_at = 5;
    o = opts("semantics_exit", 16);
    o.max_length = ct_batches(12);
    o.validation_period = ct_batches(4);
    expect_run("should exit", &t, &o, 0, "T4 V4 C6:stop");
    reset();
    rm_rf("semantics_exit");
    g.exit_at = 5;
    g.exit_skip = true;
    expect_run("should exit, no checkpoint", &t, &o, 0, "T4 V4");
    char dummy[4096];
    CHECK(ct_ckpt_latest("semantics_exit/checkpoints", dummy, sizeof dummy) == CT_ECHECKPOINT);
    /* ... also from a hook: the first validation ends the trial. */
    reset();
    rm_rf("semantics_exit");
    g.exit_in_hook = true;
    expect_run("should exit from a hook", &t, &o, 0, "T4 V4 C4:stop");

    /* 4. evaluate_batch's metric names must match across batches, whichever
     * way they differ. */
    reset();
    g.names = 1;
    o = opts("semantics_names", 16);
    o.max_length = ct_batches(2);
    CHECK(ct_fit(&t, &o) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "batch 0 returned {validation_loss, b}, batch 2 returned {validation_loss}");
    reset();
    g.names = 2;
    CHECK(ct_fit(&t, &o) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "metric names must match across batches");

    /* 5. backward's arguments: a gradient of 2 doubles each step (1 - w =
     * 0.996^k); two backward passes (the first retaining the graph) add up
     * to the same. */
    reset();
    g.grad_factor = 2;
    o = opts("semantics_backward", 16);
    o.max_length = ct_batches(3);
    expect_run("backward gradient", &t, &o, 0, "T3 V3 C3:end");
    CHECK_NEAR(1 - g_final_w, pow(0.996, 3), 1e-6);
    reset();
    g.twice = true;
    expect_run("backward twice", &t, &o, 0, "T3 V3 C3:end");
    CHECK_NEAR(1 - g_final_w, pow(0.996, 3), 1e-6);

    /* 6. Manual AMP: the trial scales, steps through its scaler and updates
     * it; the steps are the unscaled ones, and the checkpoint holds the
     * scaler's state. Refused after wrap_model or with use_amp. */
    reset();
    rm_rf("semantics_scaler");
    g.manual_scaler = true;
    o = opts("semantics_scaler", 16);
    o.max_length = ct_batches(3);
    expect_run("manual scaler", &t, &o, 0, "T3 V3 C3:end");
    CHECK_NEAR(1 - g_final_w, pow998(3), 1e-6);
    char latest[4096], path[4200];
    CHECK(ct_ckpt_latest("semantics_scaler/checkpoints", latest, sizeof latest) == 0);
    snprintf(path, sizeof path, "%s/state_dict.pth", latest);
    ct_value *state = NULL;
    CHECK(ct_pth_load(path, &state) == 0);
    double scale = 0;
    CHECK(ct_value_get_float(ct_value_dict_get(ct_value_dict_get(state, "scaler_state_dict"), "scale"), &scale) == 0);
    CHECK(scale == 65536.0);
    ct_value_free(state);

    /* 7. TensorBoard: the loop's event file, and the trial's own writer
     * beside it; none with TensorBoard logging off. */
    reset();
    rm_rf("semantics_tb");
    g.summary = true;
    o = opts("semantics_tb", 16);
    o.max_length = ct_batches(2);
    expect_run("tensorboard", &t, &o, 0, "T2 V2 C2:end");
    CHECK(count_event_files("semantics_tb") == 2);
    reset();
    rm_rf("semantics_tb");
    g.summary = true;
    o.tensorboard = false;
    expect_run("tensorboard off", &t, &o, 0, "T2 V2 C2:end");
    CHECK(count_event_files("semantics_tb") == 0);

    /* 8. auto_zero_grads = false is refused with aggregation (Determined). */
    reset();
    g.no_zero = true;
    o = opts("semantics_zero", 16);
    o.max_length = ct_batches(2);
    o.aggregation_frequency = 2;
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "auto_zero_grads must be true");
    /* ... and allowed without: the trial zeroes nothing, so the second
     * step adds the first batch's gradient again: w = 0.002, then
     * 0.002 + 0.001 * (2 * 0.998 + 2) = 0.005996. */
    reset();
    g.no_zero = true;
    o = opts("semantics_zero", 16);
    o.max_length = ct_batches(2);
    expect_run("no zero grads", &t, &o, 0, "T2 V2 C2:end");
    CHECK_NEAR(g_final_w, 0.005996, 1e-7);

    /* 9. An iterable training loader is refused unless the trial opts out
     * of the reproducibility checks; then it trains through its passes
     * (10 records by 4), its epochs unknown, so periods in epochs are refused. */
    reset();
    rm_rf("semantics_iterable");
    g.records = 10;
    g.iterable = true;
    o = opts("semantics_iterable", 4);
    o.max_length = ct_batches(4);
    CHECK(ct_fit(&t, &o) == CT_ETRIAL);
    CHECK_ERR(CT_ETRIAL, "ct_ctx_disable_dataset_reproducibility_checks");
    reset();
    g.records = 10;
    g.iterable = g.opt_out = g.no_auto_device = true;
    expect_run("iterable", &t, &o, 0, "[0,1,2,3] [4,5,6,7] [8,9,0,1] [2,3,4,5] T4 V4 C4:end");
    reset();
    g.records = 10;
    g.iterable = g.opt_out = true;
    o.validation_period = ct_epochs(1);
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "the validation period is in epochs, but the training loader has no length");

    /* 10. An earlier run in the output directory is never destroyed: a run
     * that does not resume is refused, naming the ways on, and leaves it
     * as it was; --overwrite replaces it. */
    reset();
    rm_rf("semantics_guard");
    o = opts("semantics_guard", 16);
    o.overwrite = false;
    o.max_length = ct_batches(2);
    expect_run("guard: the first run", &t, &o, 0, "T2 V2 C2:end");
    struct stat before, after;
    CHECK(stat("semantics_guard/metrics.jsonl", &before) == 0 && before.st_size > 0);
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "semantics_guard holds an earlier run (metrics.jsonl, 1 checkpoint in "
                          "semantics_guard/checkpoints, 1 TensorBoard event file): continue it with --resume "
                          "latest, write this run to another --output, or replace it with --overwrite");
    CHECK(stat("semantics_guard/metrics.jsonl", &after) == 0 && after.st_size == before.st_size);
    CHECK(ct_ckpt_latest("semantics_guard/checkpoints", dummy, sizeof dummy) == 0 && strstr(dummy, "ckpt-000002-"));
    CHECK(count_event_files("semantics_guard") == 1);
    reset();
    o.overwrite = true;
    o.max_length = ct_batches(3);
    expect_run("guard: overwrite", &t, &o, 0, "T3 V3 C3:end");
    CHECK(count_event_files("semantics_guard") == 1);
    CHECK(ct_ckpt_latest("semantics_guard/checkpoints", dummy, sizeof dummy) == 0 && strstr(dummy, "ckpt-000003-"));
    CHECK(system("test $(ls semantics_guard/checkpoints | wc -l) = 1") == 0);

    /* 11. Hyperparameters: an integral float is an integer (128.0 trains
     * with 128); a wrong type fails the trial, naming the key, the value and
     * the type; a hyperparameter never read is warned about, and so is a
     * resume with other values than the checkpoint's. */
    reset();
    rm_rf("semantics_hparams");
    g.read_hparams = true;
    o = opts("semantics_hparams", 16);
    o.max_length = ct_batches(2);
    o.quiet = false;
    ct_value_dict_set(g_hp, "hidden", ct_value_float(128.0));
    ct_value_dict_set(g_hp, "lr", ct_value_float(0.5));
    ct_value_dict_set(g_hp, "dropuot", ct_value_float(0.1));
    char err[8192];
    CHECK(fit_capturing(2, &t, &o, err, sizeof err) == 0);
    CHECK(g_hidden == 128 && g_lr == 0.5);
    CHECK(strstr(err, "warning: hyperparameter 'dropuot' was never read by the trial") != NULL);
    CHECK(strstr(err, "'hidden'") == NULL && strstr(err, "'lr'") == NULL && strstr(err, "global_batch_size") == NULL);
    reset();
    g.read_hparams = true;
    ct_value_dict_set(g_hp, "lr", ct_value_float(0.25));
    o.resume = "latest";
    o.max_length = ct_batches(3);
    CHECK(fit_capturing(2, &t, &o, err, sizeof err) == 0);
    CHECK(strstr(err, "resuming with hyperparameters that differ from the checkpoint's: lr 0.25 (checkpoint: 0.5)"));
    reset();
    g.read_hparams = true;
    o = opts("semantics_hparams", 16);
    o.max_length = ct_batches(2);
    ct_value_dict_set(g_hp, "hidden", ct_value_float(128.5));
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "hyperparameter 'hidden' is 128.5 (float), but the trial reads it as an integer");
    ct_value_dict_set(g_hp, "hidden", ct_value_int(32));
    ct_value_dict_set(g_hp, "lr", ct_value_str("fast"));
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "hyperparameter 'lr' is \"fast\" (str), but the trial reads it as a number");

    /* 12. Non-finite numbers: a NaN searcher metric under the best policy
     * is never better (no checkpoint for it, no failure), the console shows
     * it as nan; --stop-on-nan names the first batch whose loss was not
     * finite. */
    reset();
    rm_rf("semantics_nan");
    g.nan_val = true;
    o = opts("semantics_nan", 16);
    o.quiet = false;
    o.max_length = ct_batches(8);
    o.validation_period = ct_batches(4);
    o.checkpoint_policy = CT_CKPT_BEST;
    char out[16384];
    CHECK(fit_capturing(1, &t, &o, out, sizeof out) == 0);
    CHECK(strstr(out, "validation_loss nan") != NULL);
    CHECK(strstr(out, "checkpoint at batch 4") == NULL && strstr(out, "checkpoint at batch 8 (end)") != NULL);
    reset();
    g.nan_at = 5;
    o = opts("semantics_nan", 16);
    o.max_length = ct_batches(12);
    o.reporting_period = ct_batches(4);
    o.stop_on_nan = true;
    CHECK(ct_fit(&t, &o) == CT_ENAN);
    CHECK_ERR(CT_ENAN, "training loss is nan in batch 6 (batch_idx 5; the report after batch 8 averages nan)");

    /* 13. A misspelled searcher metric is a config error naming the metrics
     * there are. */
    reset();
    o = opts("semantics_metric", 16);
    o.max_length = ct_batches(2);
    o.checkpoint_policy = CT_CKPT_BEST;
    o.searcher_metric = "validation_los";
    CHECK(ct_fit(&t, &o) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "searcher.metric 'validation_los' is not among the validation metrics "
                          "{validation_loss, b, batches, epochs}");

    CHECK(g_bad == 0);
    ct_value_free(g_hp);
    CHECK(ct_tensor_live_count() == 0);
    return ct_test_result("loop_semantics");
}
