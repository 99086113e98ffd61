/* tests/ckpt/ckpt_trial.c — the trial the checkpoint tests run (through
 * ct_main, so flags and exit codes are the real ones). Everything a resume
 * must restore is in play:
 *
 *   model      Linear(8, hidden) -> ReLU -> Dropout(p) -> Linear(hidden, 3)
 *              (+ an unused "ballast" buffer of `ballast_mb` MB: slow writes)
 *   optimizer  Adam(lr), StepLR(step_size 5, gamma 0.7) stepped every batch
 *   RNG        dropout draws from the global generator
 *   data       240 fixed records, shuffled each epoch, `workers` loader threads
 *   callback   "counter": counts trained batches, state_dict {"batches": n};
 *              reported as the validation metric "cb_batches"
 *
 * Hyperparameters for the tests: hidden (16), dropout (0.2), lr (0.01),
 * workers (0), stop_at (-1: ct_ctx_request_stop after that batch index),
 * sigterm_at (-1: raise SIGTERM inside that batch), sleep_ms (0 per batch),
 * shuffle (true: the training loader shuffles),
 * ballast_mb (0), data (""; a .pth with {"x": [N, 8] float32, "y": [N] int64}
 * replaces the built-in records), warm_start ("": a .pth holding a model
 * state_dict loaded in init); mixed precision: amp ("", "fp16" or "bf16":
 * ct_ctx_use_amp), init_scale (64), growth_interval (1000), inf_at (-1: fill
 * the first layer's weight gradient with inf after backward in that batch),
 * clip (false: a clip callback reporting the gradient norm it sees as
 * "grad_norm"); with a scaler the metric "scale" is its scale; profile
 * (false: ct_ctx_set_profiler, schedule wait 1, warmup 1, active 2, once);
 * failures for the search's restarts: fail_at (-1: train_batch fails in
 * that batch index, every time), fail_once_at (-1: fails there once: only
 * while the file fail_marker does not exist, which the failure creates).
 *
 * `ckpt_trial predict DIR` instead loads the trial from checkpoint DIR
 * (ct_load_trial_from_checkpoint) and prints the model's outputs for the
 * first 4 records as a JSON list of lists. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctrial/ctrial.h>

typedef struct {
    ct_module *model;
    ct_optim *opt;
    int64_t stop_at, sigterm_at, sleep_ms, workers, inf_at, fail_at, fail_once_at;
    char fail_marker[1024];
    bool clip;
    double grad_norm; /* what the clip callback saw in this batch */
    ct_tensor *x, *y; /* all records (owned) */
    int64_t counter;  /* the callback's state */
    bool shuffle;
} Trial;

/* 240 records whose values do not depend on any generator: y is the argmax
 * of three fixed projections of x. */
static void make_records(Trial *t) {
    enum { N = 240, F = 8 };
    float x[N * F];
    int64_t y[N];
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

static int load_records(Trial *t, const char *path) {
    ct_value *v = NULL;
    if (ct_pth_load(path, &v) != 0) return -1;
    ct_tensor *x = ct_value_get_tensor(ct_value_dict_get(v, "x")), *y = ct_value_get_tensor(ct_value_dict_get(v, "y"));
    if (x && y) {
        t->x = ct_keep(ct_alias(x));
        t->y = ct_keep(ct_alias(y));
    }
    ct_value_free(v);
    return x && y ? 0 : ct_set_error(CT_EFORMAT, "%s: needs tensors 'x' and 'y'", path);
}

static void trial_destroy(void *self) {
    Trial *t = self;
    ct_tensor_free(t->x);
    ct_tensor_free(t->y);
    free(t);
}

/* ---- the callback ------------------------------------------------------------ */

static int counter_workload_end(void *self, ct_context *ctx, const ct_value *avg, const ct_value *batches) {
    ((Trial *)self)->counter += (int64_t)ct_value_len(batches);
    return 0;
}

static ct_value *counter_state(void *self) {
    ct_value *d = ct_value_dict();
    ct_value_dict_set(d, "batches", ct_value_int(((Trial *)self)->counter));
    return d;
}

static int counter_load(void *self, const ct_value *state) {
    return ct_value_get_int(ct_value_dict_get(state, "batches"), &((Trial *)self)->counter);
}

static int build_callbacks(void *self, ct_context *ctx) {
    ct_callback cb = {.name = "counter", .self = self, .on_training_workload_end = counter_workload_end,
                      .state_dict = counter_state, .load_state_dict = counter_load};
    return ct_ctx_add_callback(ctx, &cb);
}

/* ---- the trial --------------------------------------------------------------- */

static void *trial_init(ct_context *ctx) {
    Trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    ct_clear_error();
    int64_t hidden = ct_ctx_hparam_int(ctx, "hidden", 16), ballast = ct_ctx_hparam_int(ctx, "ballast_mb", 0);
    double p = ct_ctx_hparam_double(ctx, "dropout", 0.2), lr = ct_ctx_hparam_double(ctx, "lr", 0.01);
    t->stop_at = ct_ctx_hparam_int(ctx, "stop_at", -1);
    t->sigterm_at = ct_ctx_hparam_int(ctx, "sigterm_at", -1);
    t->sleep_ms = ct_ctx_hparam_int(ctx, "sleep_ms", 0);
    t->workers = ct_ctx_hparam_int(ctx, "workers", 0);
    t->shuffle = ct_ctx_hparam_bool(ctx, "shuffle", true);
    t->inf_at = ct_ctx_hparam_int(ctx, "inf_at", -1);
    t->fail_at = ct_ctx_hparam_int(ctx, "fail_at", -1);
    t->fail_once_at = ct_ctx_hparam_int(ctx, "fail_once_at", -1);
    snprintf(t->fail_marker, sizeof t->fail_marker, "%s", ct_ctx_hparam_str(ctx, "fail_marker", ""));
    t->clip = ct_ctx_hparam_bool(ctx, "clip", false);
    if (ct_ctx_hparam_bool(ctx, "profile", false)) {
        ct_profiler_opts po = ct_profiler_defaults();
        po.schedule.wait = 1;
        po.schedule.warmup = 1;
        po.schedule.active = 2;
        po.schedule.repeat = 1;
        if (ct_ctx_set_profiler(ctx, &po) != 0) goto fail;
    }
    const char *amp = ct_ctx_hparam_str(ctx, "amp", "");
    if (amp[0]) {
        ct_amp_opts o = ct_amp_defaults();
        o.dtype = !strcmp(amp, "bf16") ? CT_BF16 : !strcmp(amp, "fp16") ? CT_F16 : CT_F32;
        o.scaler.init_scale = ct_ctx_hparam_double(ctx, "init_scale", 64);
        o.scaler.growth_interval = ct_ctx_hparam_int(ctx, "growth_interval", 1000);
        if (ct_ctx_use_amp(ctx, &o) != 0) goto fail;
    }
    const char *data = ct_ctx_hparam_str(ctx, "data", ""), *warm = ct_ctx_hparam_str(ctx, "warm_start", "");
    if (ct_last_code() != CT_OK) goto fail;
    if (data[0] ? load_records(t, data) != 0 : (make_records(t), false)) goto fail;

    ct_module *model = ct_nn_sequential(4, (ct_module *[]){ct_nn_linear(8, hidden, true), ct_nn_relu(),
                                                            ct_nn_dropout(p), ct_nn_linear(hidden, 3, true)});
    if (model && ballast > 0)
        ct_nn_add_buffer(model, "ballast", ct_zeros(CT_SHAPE(ballast * 262144), NULL), true);
    if (model && warm[0]) {
        ct_value *sd = NULL;
        int rc = ct_pth_load(warm, &sd);
        if (rc == 0) rc = ct_nn_load_state_dict(model, sd, true);
        ct_value_free(sd);
        if (rc != 0) {
            ct_nn_free(model);
            goto fail;
        }
    }
    t->model = ct_ctx_wrap_model(ctx, model);
    ct_adam_opts adam = ct_adam_defaults();
    adam.lr = lr;
    t->opt = t->model ? ct_ctx_wrap_optimizer(ctx, ct_optim_adam(t->model, &adam)) : NULL;
    if (!t->opt || !ct_ctx_wrap_lr_scheduler(ctx, ct_sched_step_lr(t->opt, 5, 0.7), CT_STEP_EVERY_BATCH, 1))
        goto fail;
    return t;
fail:
    trial_destroy(t);
    return NULL;
}

/* A clip that clips nothing: it records the norm of the gradients it is
 * given (under fp16 AMP they must be unscaled by then). */
static int record_norm(ct_tensor *const *params, size_t n, void *ctx) {
    Trial *t = ctx;
    return ct_clip_grad_norm(n, params, 1e30, 2.0, &t->grad_norm);
}

static ct_value *train_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t epoch_idx,
                             int64_t batch_idx) {
    Trial *t = self;
    if (batch_idx == t->sigterm_at) raise(SIGTERM);
    if (batch_idx == t->fail_at) {
        ct_set_error(CT_ETRIAL, "ckpt_trial: fail_at %lld", (long long)batch_idx);
        return NULL;
    }
    if (batch_idx == t->fail_once_at && t->fail_marker[0]) {
        FILE *f = fopen(t->fail_marker, "r");
        if (f) fclose(f);
        else if ((f = fopen(t->fail_marker, "w"))) {
            fclose(f);
            ct_set_error(CT_ETRIAL, "ckpt_trial: fail_once_at %lld", (long long)batch_idx);
            return NULL;
        }
    }
    if (t->sleep_ms > 0) nanosleep(&(struct timespec){t->sleep_ms / 1000, (t->sleep_ms % 1000) * 1000000}, NULL);
    ct_tensor *loss = ct_cross_entropy(ct_nn_forward(t->model, ct_batch_at(batch, 0)), ct_batch_at(batch, 1));
    if (ct_ctx_backward(ctx, loss) != 0) return NULL;
    if (batch_idx == t->inf_at && ct_fill_(ct_grad(ct_optim_param(t->opt, 0)), INFINITY) != 0) return NULL;
    if (ct_ctx_step_optimizer(ctx, t->opt, t->clip ? record_norm : NULL, t) != 0) return NULL;
    if (batch_idx == t->stop_at) ct_ctx_request_stop(ctx);
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "loss", ct_value_tensor(ct_keep(ct_alias(loss))));
    ct_value_dict_set(m, "lr", ct_value_float(ct_optim_get_lr(t->opt, 0)));
    if (t->clip) ct_value_dict_set(m, "grad_norm", ct_value_float(t->grad_norm));
    if (ct_ctx_grad_scaler(ctx)) ct_value_dict_set(m, "scale", ct_value_float(ct_grad_scaler_get_scale(ct_ctx_grad_scaler(ctx))));
    return m;
}

static ct_value *evaluate_batch(void *self, ct_context *ctx, const ct_value *batch, int64_t batch_idx) {
    Trial *t = self;
    ct_tensor *out = ct_nn_forward(t->model, ct_batch_at(batch, 0));
    ct_value *m = ct_value_dict();
    ct_value_dict_set(m, "validation_loss", ct_value_tensor(ct_keep(ct_cross_entropy(out, ct_batch_at(batch, 1)))));
    ct_value_dict_set(m, "cb_batches", ct_value_int(t->counter));
    return m;
}

static ct_loader *loader(Trial *t, ct_context *ctx, bool training) {
    ct_loader_opts o = ct_loader_defaults();
    o.batch_size = ct_ctx_per_slot_batch_size(ctx);
    o.shuffle = training && t->shuffle;
    o.seed = ct_ctx_trial_seed(ctx);
    o.num_workers = (int)t->workers;
    int64_t n = ct_size(t->x, 0), cut = training ? n * 3 / 4 : n / 4;
    ct_tensor *x = training ? ct_narrow(t->x, 0, 0, cut) : ct_narrow(t->x, 0, n - cut, cut);
    ct_tensor *y = training ? ct_narrow(t->y, 0, 0, cut) : ct_narrow(t->y, 0, n - cut, cut);
    return ct_loader_new(ct_dataset_tensors(2, (ct_tensor *[]){x, y}), &o);
}

static ct_loader *train_loader(void *self, ct_context *ctx) { return loader(self, ctx, true); }
static ct_loader *val_loader(void *self, ct_context *ctx) { return loader(self, ctx, false); }

static const ct_trial trial = {
    .name = "ckpt_trial",
    .init = trial_init,
    .destroy = trial_destroy,
    .build_training_data_loader = train_loader,
    .build_validation_data_loader = val_loader,
    .train_batch = train_batch,
    .evaluate_batch = evaluate_batch,
    .build_callbacks = build_callbacks,
};

static int predict(const char *dir) {
    ct_context *ctx = NULL;
    if (ct_load_trial_from_checkpoint(dir, &trial, NULL, "cpu", &ctx) != 0) {
        fprintf(stderr, "predict: %s\n", ct_last_error());
        return 1;
    }
    Trial *t = ct_ctx_self(ctx);
    ct_scope *s = ct_scope_begin();
    ct_tensor *out = ct_nn_forward(ct_ctx_model(ctx, 0), ct_narrow(t->x, 0, 0, 4));
    float v[4 * 3];
    int rc = ct_read(out, v, sizeof v);
    ct_scope_end(s);
    for (int i = 0; rc == 0 && i < 4; i++)
        printf("%s[%.9g, %.9g, %.9g]%s", i ? ", " : "[", v[3 * i], v[3 * i + 1], v[3 * i + 2], i == 3 ? "]\n" : "");
    ct_ctx_free(ctx);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "predict") == 0) return predict(argv[2]);
    return ct_main(argc, argv, &trial);
}
