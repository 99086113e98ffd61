/* tests/loop/stale_errors.c — the rule of error.h's "Errors and your code":
 * ctrial clears the thread's error before it calls code of the trial's, so
 * an error a program set and handled earlier (a lookup that found nothing)
 * never reads as a failure of the next call.
 *
 * Every function of this OneVar trial and of its callbacks checks, on
 * entry, that no error is pending, and leaves one behind when it returns
 * success (ct_set_error, then 0 or a value: an error the program handled).
 * A callback's state_dict returns NULL ("nothing to save") and the trial's
 * evaluation_reducer NULL ("AVG"), each right after such a leftover: the
 * run trains, validates, checkpoints and resumes without an error, and
 * validation is averaged. The other direction: a state_dict that sets an
 * error and returns NULL, an evaluation_reducer that does the same, and a
 * train_batch returning NULL without an error fail the run, each with its
 * own message (not a leftover's). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include <ctrial/callback.h>
#include <ctrial/trial.h>

#include "ct_test.h"
#include "onevar.h"

static int g_entries, g_stale;         /* calls checked; calls that found an error pending */
static char g_first_stale[512];
static bool g_state_fails, g_reducer_fails, g_train_null;
static int g_loaded;                   /* load_state_dict calls */

/* On entry to the trial's code: nothing pending. */
static void entered(const char *fn) {
    g_entries++;
    if (ct_last_code() == CT_OK) return;
    if (!g_stale++) snprintf(g_first_stale, sizeof g_first_stale, "%s found: %s", fn, ct_last_error());
}

/* What a program leaves behind after handling a failed call itself. */
static void leave_stale(const char *fn) { ct_set_error(CT_EINDEX, "a lookup in %s found nothing (handled)", fn); }

static void *init(ct_context *ctx) {
    entered("init");
    onevar_parts *t = onevar_parts_init(ctx);
    leave_stale("init");
    return t;
}

static void destroy(void *self) { free(self); }

static ct_loader *train_loader(void *self, ct_context *ctx) {
    entered("build_training_data_loader");
    ct_loader *l = onevar_loader(ctx, 16);
    leave_stale("build_training_data_loader");
    return l;
}

static ct_loader *val_loader(void *self, ct_context *ctx) {
    entered("build_validation_data_loader");
    ct_loader *l = onevar_loader(ctx, 8);
    leave_stale("build_validation_data_loader");
    return l;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch, int64_t idx) {
    entered("train_batch");
    if (g_train_null) return NULL; /* fails without saying why */
    ct_value *loss = onevar_parts_train(self, ctx, batch);
    if (loss) leave_stale("train_batch");
    return loss;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t idx) {
    entered("evaluate_batch");
    ct_value *m = onevar_parts_eval(self, batch);
    leave_stale("evaluate_batch");
    return m;
}

static ct_value *evaluation_reducer(void *self, ct_context *ctx) {
    entered("evaluation_reducer");
    if (g_reducer_fails) ct_set_error(CT_ECONFIG, "evaluation_reducer: no such reducer 'medain'");
    return NULL; /* AVG, unless it set an error */
}

static int64_t batch_length(void *self, const ct_value *batch) {
    entered("get_batch_length");
    int64_t n = ct_size(ct_batch_at(batch, 0), 0);
    leave_stale("get_batch_length");
    return n;
}

/* ---- callbacks ---------------------------------------------------------------- */

static int hook(const char *name) {
    entered(name);
    leave_stale(name);
    return 0;
}

static int on_trial_startup(void *s, ct_context *c, int64_t b, const char *d) { return hook("on_trial_startup"); }
static int on_training_start(void *s, ct_context *c) { return hook("on_training_start"); }
static int on_epoch_start(void *s, ct_context *c, int64_t e) { return hook("on_training_epoch_start"); }
static int on_epoch_end(void *s, ct_context *c, int64_t e) { return hook("on_training_epoch_end"); }
static int on_workload_end(void *s, ct_context *c, const ct_value *a, const ct_value *b) {
    return hook("on_training_workload_end");
}
static int on_validation_start(void *s, ct_context *c) { return hook("on_validation_start"); }
static int on_validation_epoch_start(void *s, ct_context *c) { return hook("on_validation_epoch_start"); }
static int on_validation_epoch_end(void *s, ct_context *c, const ct_value *o) { return hook("on_validation_epoch_end"); }
static int on_validation_end(void *s, ct_context *c, const ct_value *m) { return hook("on_validation_end"); }
static int on_load_start(void *s, ct_context *c, const ct_value *st) { return hook("on_checkpoint_load_start"); }
static int on_save_start(void *s, ct_context *c, ct_value *st) { return hook("on_checkpoint_save_start"); }
static int on_write_end(void *s, ct_context *c, const char *d) { return hook("on_checkpoint_write_end"); }
static int on_upload_end(void *s, ct_context *c, const char *d) { return hook("on_checkpoint_upload_end"); }
static int on_shutdown(void *s, ct_context *c) { return hook("on_trial_shutdown"); }

/* "metrics" keeps nothing: NULL, right after a hook's leftover error. */
static ct_value *state_nothing(void *self) {
    entered("state_dict");
    if (g_state_fails) ct_set_error(CT_ENOMEM, "state_dict: out of memory building the state");
    return NULL;
}

/* "counter" keeps a number, so that a resume calls load_state_dict. */
static ct_value *state_counter(void *self) {
    entered("state_dict");
    return ct_value_int(42);
}

static int load_counter(void *self, const ct_value *state) {
    entered("load_state_dict");
    int64_t v = 0;
    CHECK(ct_value_get_int(state, &v) == 0 && v == 42);
    g_loaded++;
    leave_stale("load_state_dict");
    return 0;
}

static int build_callbacks(void *self, ct_context *ctx) {
    entered("build_callbacks");
    ct_callback metrics = {
        .name = "metrics",
        .on_trial_startup = on_trial_startup,
        .on_training_start = on_training_start,
        .on_training_epoch_start = on_epoch_start,
        .on_training_epoch_end = on_epoch_end,
        .on_training_workload_end = on_workload_end,
        .on_validation_start = on_validation_start,
        .on_validation_epoch_start = on_validation_epoch_start,
        .on_validation_epoch_end = on_validation_epoch_end,
        .on_validation_end = on_validation_end,
        .on_checkpoint_load_start = on_load_start,
        .on_checkpoint_save_start = on_save_start,
        .on_checkpoint_write_end = on_write_end,
        .on_checkpoint_upload_end = on_upload_end,
        .on_trial_shutdown = on_shutdown,
        .state_dict = state_nothing,
    };
    ct_callback counter = {.name = "counter", .state_dict = state_counter, .load_state_dict = load_counter};
    int rc = ct_ctx_add_callback(ctx, &metrics);
    if (!rc) rc = ct_ctx_add_callback(ctx, &counter);
    leave_stale("build_callbacks");
    return rc;
}

static const ct_trial trial = {
    .name = "stale_errors",
    .init = init,
    .destroy = destroy,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .evaluation_reducer = evaluation_reducer,
    .get_batch_length = batch_length,
    .build_callbacks = build_callbacks,
};

static ct_value *g_hp;

static ct_fit_opts opts(const char *out, int64_t batches) {
    ct_value_free(g_hp);
    g_hp = ct_value_dict();
    ct_value_dict_set(g_hp, "global_batch_size", ct_value_int(4));
    ct_fit_opts o = ct_fit_defaults();
    o.hparams = g_hp;
    o.quiet = true;
    o.output_dir = out;
    o.max_length = ct_batches(batches);
    o.validation_period = ct_batches(4);
    o.checkpoint_period = ct_batches(4);
    o.reporting_period = ct_batches(2);
    o.checkpoint_policy = CT_CKPT_NONE;
    return o;
}

/* ct_fit, with an error left pending by the program before it too. */
static int fit(const ct_fit_opts *o) {
    leave_stale("main");
    return ct_fit(&trial, o);
}

int main(void) {
    char out[] = "/tmp/ct_stale_errors_XXXXXX";
    if (!mkdtemp(out)) return 1;

    /* A whole run and its resume: every function found nothing pending. */
    ct_fit_opts o = opts(out, 8);
    int rc = fit(&o);
    if (rc) fprintf(stderr, "the run failed: %s\n", ct_last_error());
    CHECK(rc == 0);
    o = opts(out, 12);
    o.resume = "latest";
    rc = fit(&o);
    if (rc) fprintf(stderr, "the resume failed: %s\n", ct_last_error());
    CHECK(rc == 0);
    CHECK(g_loaded == 1);
    if (g_stale) fprintf(stderr, "%d of %d calls found an error pending; first: %s\n", g_stale, g_entries,
                         g_first_stale);
    CHECK(g_stale == 0);
    CHECK(g_entries > 60);

    /* Failures still fail, each with its own message. */
    o = opts(out, 4);
    o.overwrite = true;
    g_state_fails = true;
    rc = fit(&o);
    CHECK(rc == CT_ENOMEM && strstr(ct_last_error(), "callback 'metrics' state_dict: state_dict: out of memory"));
    g_state_fails = false;

    g_reducer_fails = true;
    rc = fit(&o);
    CHECK(rc == CT_ECONFIG && strstr(ct_last_error(), "no such reducer 'medain'"));
    g_reducer_fails = false;

    g_train_null = true;
    rc = fit(&o);
    CHECK(rc == CT_ETRIAL && strstr(ct_last_error(), "train_batch") && !strstr(ct_last_error(), "handled"));
    if (rc != CT_ETRIAL) fprintf(stderr, "train_batch NULL: %s\n", ct_last_error());
    g_train_null = false;

    ct_value_free(g_hp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0);
    return ct_test_result("loop_stale_errors");
}
