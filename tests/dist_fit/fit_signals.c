/* tests/dist_fit/fit_signals.c — stop signals around a bare ct_fit (a program
 * that owns its main, not ct_main), one process (issue 17, item 6):
 *
 *  1. a fit that no signal reached gives SIGTERM and SIGINT back as they
 *     were (the default action);
 *  2. SIGTERM in batch 3 of a program with the default action: ct_fit
 *     stops after the batch, checkpoints and returns 0 with
 *     ct_fit_stop_signal() == SIGTERM; the handler stays, so that a second
 *     SIGTERM while the program ends does not kill it (here: raised, and
 *     the next line runs);
 *  3. that second SIGTERM is a stop request of its own: the next ct_fit
 *     stops before training, nothing saved, and returns 0;
 *  4. a fit after that trains to the end (nothing left over);
 *  5. a program with its own SIGTERM handler: ct_fit takes the signal in
 *     batch 3 (the program's handler is not called), and gives the
 *     program's handler back, which then gets the next SIGTERM;
 *  6. ct_fit_opts.dist_timeout: set for the fit (seen by the trial through
 *     ct_dist_timeout), given back after; negative or NaN is a config error
 *     before anything runs.
 * The checkpoints are checked on disk: one at batch 3 in 2, none in 3. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ct_test.h"

typedef struct {
    ct_module *model;
    ct_optim *opt;
} Trial;

static int g_raise_at = -1;           /* batch_idx in which train_batch raises SIGTERM */
static double g_timeout_seen = -1;    /* ct_dist_timeout() inside train_batch */
static volatile sig_atomic_t g_user_handler_calls;

static void user_handler(int sig) {
    (void)sig;
    g_user_handler_calls++;
}

static void *init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->model = ct_ctx_wrap_model(ctx, ct_nn_linear(1, 1, false));
    ct_sgd_opts o = ct_sgd_defaults();
    o.lr = 0.001;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->model, &o)) : NULL;
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

static void destroy(void *self) { free(self); }

static ct_loader *loader(void *self, ct_context *ctx) {
    (void)self;
    ct_tensor *x = ct_ones(CT_SHAPE(16, 1), NULL), *y = ct_ones(CT_SHAPE(16, 1), NULL);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){x, y});
    ct_tensor_free(x);
    ct_tensor_free(y);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ds ? ct_loader_new(ds, &o) : NULL;
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    (void)epoch_idx;
    Trial *t = self;
    g_timeout_seen = ct_dist_timeout();
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1),
                                  CT_REDUCE_MEAN);
    if (!loss || ct_ctx_backward(ctx, loss) != 0 || ct_ctx_step_optimizer(ctx, t->opt, NULL, NULL) != 0) return NULL;
    if (batch_idx == g_raise_at) raise(SIGTERM);
    return ct_value_tensor(ct_keep(ct_alias(loss)));
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    (void)ctx;
    (void)batch_idx;
    Trial *t = self;
    ct_value *m = ct_value_dict();
    ct_tensor *loss = ct_mse_loss(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1),
                                  CT_REDUCE_MEAN);
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(loss)));
    return m;
}

static const ct_trial trial = {
    .name = "fit_signals",
    .init = init,
    .destroy = destroy,
    .build_training_data_loader = loader,
    .build_validation_data_loader = loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

/* The number of committed checkpoints in dir/checkpoints. */
static int count_checkpoints(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, "ckpt-", 5) == 0;
    closedir(d);
    return n;
}

static void (*handler_of(int sig))(int) {
    struct sigaction cur;
    sigaction(sig, NULL, &cur);
    return cur.sa_handler;
}

static char g_root[4096];

/* ct_fit into a fresh output dir under g_root; returns its status. */
static int fit(const char *name, ct_fit_opts *o, char *out, size_t len) {
    snprintf(out, len, "%s/%s", g_root, name);
    o->output_dir = out;
    return ct_fit(&trial, o);
}

static ct_fit_opts opts(void) {
    ct_fit_opts o = ct_fit_defaults();
    o.max_length = ct_batches(8);
    o.global_batch_size = 4;
    o.quiet = true;
    o.tensorboard = false;
    o.num_threads = 1;
    return o;
}

int main(void) {
    snprintf(g_root, sizeof g_root, "%s/fit_signals_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    char out[4200];

    /* 1. */
    ct_fit_opts o = opts();
    CHECK_OK(fit("plain", &o, out, sizeof out));
    CHECK(ct_fit_stop_signal() == 0);
    CHECK(count_checkpoints(out) == 1);
    CHECK(handler_of(SIGTERM) == SIG_DFL);
    CHECK(handler_of(SIGINT) == SIG_DFL);

    /* 2. */
    g_raise_at = 2;
    o = opts();
    CHECK_OK(fit("stopped", &o, out, sizeof out));
    g_raise_at = -1;
    CHECK(ct_fit_stop_signal() == SIGTERM);
    CHECK(count_checkpoints(out) == 1); /* at batch 3, not 8 */
    char want[4300];
    snprintf(want, sizeof want, "%s/checkpoints", out);
    DIR *d = opendir(want);
    bool at3 = false;
    for (struct dirent *e; d && (e = readdir(d));) at3 = at3 || strncmp(e->d_name, "ckpt-000003-", 12) == 0;
    if (d) closedir(d);
    CHECK(at3);
    CHECK(handler_of(SIGTERM) != SIG_DFL); /* kept: the process was asked to end */
    raise(SIGTERM);                         /* would end the process with the default action */
    CHECK(1);                               /* still here */

    /* 3. */
    o = opts();
    CHECK_OK(fit("before", &o, out, sizeof out));
    CHECK(ct_fit_stop_signal() == SIGTERM);
    CHECK(count_checkpoints(out) == 0);

    /* 4. */
    o = opts();
    CHECK_OK(fit("after", &o, out, sizeof out));
    CHECK(ct_fit_stop_signal() == 0);
    CHECK(count_checkpoints(out) == 1);

    /* 5. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = user_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    g_raise_at = 2;
    o = opts();
    CHECK_OK(fit("own_handler", &o, out, sizeof out));
    g_raise_at = -1;
    CHECK(ct_fit_stop_signal() == SIGTERM);
    CHECK(g_user_handler_calls == 0);
    CHECK(handler_of(SIGTERM) == user_handler);
    raise(SIGTERM);
    CHECK(g_user_handler_calls == 1);

    /* 6. */
    double before = ct_dist_timeout();
    CHECK_NEAR(before, getenv("CTRIAL_DIST_TIMEOUT") ? before : 1800, 0);
    o = opts();
    o.dist_timeout = 7;
    CHECK_OK(fit("timeout", &o, out, sizeof out));
    CHECK_NEAR(g_timeout_seen, 7, 0);
    CHECK_NEAR(ct_dist_timeout(), before, 0);
    o = opts();
    o.dist_timeout = INFINITY;
    CHECK_OK(fit("no_timeout", &o, out, sizeof out));
    CHECK_NEAR(g_timeout_seen, 0, 0);
    o = opts();
    o.dist_timeout = -1;
    CHECK(fit("bad_timeout", &o, out, sizeof out) == CT_ECONFIG);
    CHECK_ERR(CT_ECONFIG, "ct_fit_opts.dist_timeout");
    CHECK(access(out, F_OK) != 0); /* refused before anything ran */
    o = opts();
    o.dist_timeout = NAN;
    CHECK(fit("nan_timeout", &o, out, sizeof out) == CT_ECONFIG);
    CHECK_NEAR(ct_dist_timeout(), before, 0);

    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (ct_test_failures == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_root);
    return ct_test_result("fit_signals");
}
