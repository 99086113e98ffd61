/* tests/loop/closure.c — ct_ctx_step_optimizer_with with a closure
 * (ct_step_opts.closure: optimizer.step(closure), what LBFGS needs) inside
 * ct_fit, on the CPU.
 *
 *   loop_closure                  the refusals, one process; under
 *                                 `mpirun -np 2` the refusal of ranks
 *   loop_closure parity OUT_DIR   the runs test_closure.py compares with
 *                                 torch.optim; writes OUT_DIR/<run>.json
 *
 * The trial: Linear(3,4) -> tanh -> Linear(4,2), MSE, over RECORDS records
 * x[i][j] = sin(0.37 (3i + j)), y[i][k] = cos(0.23 (2i + k)) (float32), in
 * batches of BATCH in order (no shuffle), BATCHES batches. Its closure
 * zeroes the gradients, computes the batch's loss and calls ct_ctx_backward,
 * as Python's does. Each run records the initial and final parameters and,
 * per batch, the closure's first loss (closure_loss), how many times the
 * closure ran, and whether every gradient was None after the step
 * (auto_zero_grads).
 *
 * Runs ("opt"):
 *   lbfgs           LBFGS(lr=1, max_iter=5, history_size=4, strong_wolfe):
 *                   the line search makes a data-dependent number of
 *                   evaluations
 *   lbfgs_autocast  the same, the closure's forward under bf16 autocast of
 *                   its own (what the refusal of AMP advises)
 *   sgd_mixed       SGD(lr=0.1, momentum=0.9), step(closure) on even
 *                   batches, backward then step() on odd ones
 *
 * Refusals, each at the first batch with the closure never called and the
 * weights untouched: a clip callback (CT_EINVAL), ct_step_opts.scaler
 * (CT_EINVAL), fp16 AMP's scaler and bf16 AMP's autocast (CT_ECONFIG),
 * aggregation_frequency 2 (CT_ECONFIG, on its first, accumulating, batch),
 * 2 ranks (CT_ECONFIG). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctrial/ctrial.h>

#include "ct_test.h"

enum { IN = 3, HID = 4, OUT = 2, RECORDS = 24, BATCH = 8, BATCHES = 6, MAX_VALUES = 64 };

/* ---- what a run asks of the trial ------------------------------------------ */

typedef enum { REFUSE_NONE, REFUSE_CLIP, REFUSE_SCALER_ARG } refusal;

static struct {
    const char *opt;    /* "lbfgs", "lbfgs_autocast" or "sgd_mixed" */
    const char *amp;    /* "none", "fp16", "bf16" */
    refusal refuse;     /* the step option that must be refused */
} g;

/* What the run saw. */
static struct {
    float initial[MAX_VALUES], final[MAX_VALUES];
    size_t n_values;
    double losses[BATCHES];
    int evals[BATCHES];
    bool grads_none[BATCHES];
    int n_batches;
    int closure_calls; /* over the whole run */
} r;

/* Every parameter of net, flattened in order, into out. */
static size_t read_params(ct_module *net, float *out) {
    size_t at = 0;
    for (size_t i = 0; i < ct_nn_num_params(net); i++) {
        ct_tensor *p = ct_nn_param_at(net, i, NULL);
        size_t n = (size_t)ct_numel(p);
        if (at + n > MAX_VALUES || ct_read(p, out + at, n * sizeof(float)) != 0) return 0;
        at += n;
    }
    return at;
}

/* ---- the trial ---------------------------------------------------------------- */

typedef struct {
    ct_module *net;
    ct_optim *opt;
    ct_grad_scaler *scaler; /* REFUSE_SCALER_ARG: a manual scaler */
} Mlp;

static void *init(ct_context *ctx) {
    Mlp *t = calloc(1, sizeof *t);
    if (!t) {
        ct_set_error(CT_ENOMEM, "out of memory");
        return NULL;
    }
    if (g.refuse == REFUSE_SCALER_ARG && !(t->scaler = ct_ctx_wrap_scaler(ctx, ct_grad_scaler_new(ct_cpu(), NULL)))) {
        free(t);
        return NULL;
    }
    ct_module *layers[] = {ct_nn_linear(IN, HID, true), ct_nn_tanh(), ct_nn_linear(HID, OUT, true)};
    t->net = ct_ctx_wrap_model(ctx, ct_nn_sequential(3, layers));
    if (t->net && strncmp(g.opt, "lbfgs", 5) == 0) {
        ct_lbfgs_opts o = ct_lbfgs_defaults();
        o.max_iter = 5;
        o.history_size = 4;
        o.line_search_fn = "strong_wolfe";
        t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_lbfgs(t->net, &o));
    } else if (t->net) {
        ct_sgd_opts o = ct_sgd_defaults();
        o.lr = 0.1;
        o.momentum = 0.9;
        t->opt = ct_ctx_wrap_optimizer(ctx, ct_optim_sgd(t->net, &o));
    }
    if (t->opt && strcmp(g.amp, "none") != 0) {
        ct_amp_opts a = ct_amp_defaults();
        a.dtype = strcmp(g.amp, "fp16") == 0 ? CT_F16 : CT_BF16;
        if (ct_ctx_use_amp(ctx, &a) != 0) t->opt = NULL;
    }
    if (!t->opt) {
        free(t);
        return NULL;
    }
    r.n_values = read_params(t->net, r.initial);
    return t;
}

static void destroy(void *self) {
    Mlp *t = self;
    read_params(t->net, r.final);
    free(t);
}

static ct_loader *loader(void *self, ct_context *ctx) {
    float x[RECORDS * IN], y[RECORDS * OUT];
    for (int i = 0; i < RECORDS; i++) {
        for (int j = 0; j < IN; j++) x[i * IN + j] = (float)sin(0.37 * (IN * i + j));
        for (int k = 0; k < OUT; k++) y[i * OUT + k] = (float)cos(0.23 * (OUT * i + k));
    }
    ct_tensor *tx = ct_from_data(x, CT_SHAPE(RECORDS, IN), CT_F32);
    ct_tensor *ty = ct_from_data(y, CT_SHAPE(RECORDS, OUT), CT_F32);
    ct_dataset *ds = ct_dataset_tensors(2, (ct_tensor *[]){tx, ty});
    ct_tensor_free(tx);
    ct_tensor_free(ty);
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    return ct_loader_new(ds, &o);
}

static ct_tensor *mse(ct_module *net, const ct_value *batch) {
    return ct_mse_loss(ct_nn_forward(net, ct_batch_at(batch, 0)), ct_batch_at(batch, 1), CT_REDUCE_MEAN);
}

typedef struct {
    Mlp *t;
    ct_context *ctx;
    const ct_value *batch;
} Closure;

/* Python's closure: opt.zero_grad(); loss = ...; loss.backward(); return
 * loss; lbfgs_autocast computes the loss under bf16 autocast. */
static ct_tensor *closure(void *user) {
    Closure *c = user;
    r.closure_calls++;
    if (ct_optim_zero_grad(c->t->opt, true) != 0) return NULL;
    bool autocast = strcmp(g.opt, "lbfgs_autocast") == 0;
    if (autocast && ct_autocast_enter(CT_CPU, CT_BF16) != 0) return NULL;
    ct_tensor *loss = mse(c->t->net, c->batch);
    if (autocast) ct_autocast_exit();
    return ct_ctx_backward(c->ctx, loss) == 0 ? loss : NULL;
}

static int clip_nothing(ct_tensor *const *params, size_t n, void *ctx) { return 0; }

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Mlp *t = self;
    Closure c = {t, ctx, batch};
    ct_step_opts o = ct_step_defaults();
    double loss = NAN;
    int calls = r.closure_calls;
    if (strcmp(g.opt, "sgd_mixed") == 0 && batch_idx % 2 == 1) { /* loss.backward(); opt.step() */
        ct_tensor *l = mse(t->net, batch);
        if (ct_item(l, &loss) != 0 || ct_ctx_backward(ctx, l) != 0) return NULL;
    } else { /* loss = opt.step(closure) */
        o.closure = closure;
        o.closure_user = &c;
        o.closure_loss = &loss;
        if (g.refuse == REFUSE_CLIP) o.clip = clip_nothing;
        if (g.refuse == REFUSE_SCALER_ARG) o.scaler = t->scaler;
    }
    if (ct_ctx_step_optimizer_with(ctx, t->opt, &o) != 0) return NULL;
    if (r.n_batches < BATCHES) {
        bool none = true;
        for (size_t i = 0; i < ct_optim_num_params(t->opt); i++) none = none && !ct_has_grad(ct_optim_param(t->opt, i));
        r.losses[r.n_batches] = loss;
        r.evals[r.n_batches] = r.closure_calls - calls;
        r.grads_none[r.n_batches] = none;
        r.n_batches++;
    }
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_float(loss));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Mlp *t = self;
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(mse(t->net, batch)));
    return m;
}

static const ct_trial trial = {
    .name = "closure",
    .init = init,
    .destroy = destroy,
    .build_training_data_loader = loader,
    .build_validation_data_loader = loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
};

/* One run into out_dir; ct_fit's status. */
static int fit(const char *out_dir, int agg) {
    memset(&r, 0, sizeof r);
    ct_fit_opts o = ct_fit_defaults();
    o.global_batch_size = BATCH * ct_dist_size();
    o.max_length = ct_batches(BATCHES);
    o.reporting_period = ct_batches(1);
    o.checkpoint_policy = CT_CKPT_NONE;
    o.aggregation_frequency = agg;
    o.output_dir = out_dir;
    o.overwrite = true;
    o.num_threads = 1;
    o.quiet = true;
    o.tensorboard = false;
    o.seed = 7;
    return ct_fit(&trial, &o);
}

/* ---- parity: the runs test_closure.py compares -------------------------------- */

static void put_floats(FILE *f, const char *key, const float *v, size_t n) {
    fprintf(f, "\"%s\": [", key);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%.9g", i ? ", " : "", v[i]);
    fprintf(f, "], ");
}

static int parity(const char *out_dir) {
    const char *runs[] = {"lbfgs", "lbfgs_autocast", "sgd_mixed"};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        g.opt = runs[k];
        char dir[4096], path[4200];
        snprintf(dir, sizeof dir, "%s/%s", out_dir, runs[k]);
        if (fit(dir, 1) != 0) {
            fprintf(stderr, "%s: %s\n", runs[k], ct_last_error());
            return 1;
        }
        snprintf(path, sizeof path, "%s/%s.json", out_dir, runs[k]);
        FILE *f = fopen(path, "w");
        if (!f) return 1;
        fprintf(f, "{");
        put_floats(f, "initial", r.initial, r.n_values);
        put_floats(f, "final", r.final, r.n_values);
        fprintf(f, "\"losses\": [");
        for (int i = 0; i < r.n_batches; i++) fprintf(f, "%s%.17g", i ? ", " : "", r.losses[i]);
        fprintf(f, "], \"evals\": [");
        for (int i = 0; i < r.n_batches; i++) fprintf(f, "%s%d", i ? ", " : "", r.evals[i]);
        fprintf(f, "], \"grads_none\": [");
        for (int i = 0; i < r.n_batches; i++) fprintf(f, "%s%s", i ? ", " : "", r.grads_none[i] ? "true" : "false");
        fprintf(f, "]}\n");
        fclose(f);
    }
    return 0;
}

/* ---- refusals ------------------------------------------------------------------- */

static char g_out[64] = "/tmp/ct_closure_XXXXXX";

/* A run refused at its first batch with `code` and `needle`: the closure
 * never ran and the weights did not move. */
static void expect_refused(int agg, int code, const char *needle) {
    int rc = fit(g_out, agg);
    CHECK(rc == code);
    CHECK_ERR(code, needle);
    CHECK(r.closure_calls == 0);
    CHECK(r.n_values > 0 && memcmp(r.initial, r.final, r.n_values * sizeof(float)) == 0);
}

static void refusals(void) {
    g.opt = "lbfgs";
    g.refuse = REFUSE_CLIP;
    expect_refused(1, CT_EINVAL, "ct_ctx_step_optimizer: a closure with a clip callback");
    g.refuse = REFUSE_SCALER_ARG;
    expect_refused(1, CT_EINVAL, "a closure with a GradScaler (ct_step_opts.scaler): closure use is not supported");
    g.refuse = REFUSE_NONE;
    g.amp = "fp16";
    expect_refused(1, CT_ECONFIG, "a closure with a GradScaler (fp16 AMP, ct_ctx_use_amp)");
    g.amp = "bf16";
    expect_refused(1, CT_ECONFIG, "a closure with AMP (ct_ctx_use_amp): train_batch runs in one autocast region");
    g.amp = "none";
    expect_refused(2, CT_ECONFIG, "a closure with aggregation_frequency 2");
}

int main(int argc, char **argv) {
    g.opt = "lbfgs";
    g.amp = "none";
    if (argc == 3 && strcmp(argv[1], "parity") == 0) return parity(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: loop_closure [parity OUT_DIR]\n");
        return 2;
    }
    CHECK_OK(ct_dist_init());
    int rank = ct_dist_rank(), size = ct_dist_size();
    char name[64];
    snprintf(name, sizeof name, "loop_closure (rank %d of %d)", rank, size);
    if (size > 1) {
        /* Every rank refuses at the same call, before any collective of
         * the closure's backward: the job ends, it does not hang. */
        snprintf(g_out, sizeof g_out, "ct_closure_np%d", size);
        expect_refused(1, CT_ECONFIG, "a closure with 2 ranks");
    } else if (!mkdtemp(g_out)) {
        perror("mkdtemp");
        return 1;
    } else {
        refusals();
        char cmd[32 + sizeof g_out];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_out);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_out);
    }
    int rc = ct_test_result(name);
    ct_dist_finalize();
    return rc;
}
